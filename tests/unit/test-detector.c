/* test-detector.c - the failure detector (coord/detector.c) and the stall
 * clock (core/stallclock.c): unit cases, then a deterministic simulation of
 * a coordinator and its nodes driven by one seed.
 *
 * The simulation models what made the detector misjudge liveness (issue 15):
 *
 *   - the coordinator's loop as libuv runs it: in each iteration the timers
 *     that are due run first, then the sockets are read. A coordinator that
 *     is paused (SIGSTOP, a VM freeze, a stall under its map store) runs
 *     nothing; heartbeats pile up in its sockets, and on resume its member
 *     timer fires before it has read them;
 *   - each node's coordinator link as node/coordlink.c runs it: a heartbeat
 *     every second, one at a time; no reply for three heartbeats and the
 *     link is dropped, redialled after 1 s, and must register again;
 *   - operators draining nodes, nodes killed, message delays.
 *
 * The coordinator side calls the real detector_judge() on the real stall
 * clock, as coord.c's check_members does. A "legacy" coordinator replays
 * the algorithm before the fix (raw clock, silence counted from start only,
 * DRAINING nodes not judged, no brake): the checkers must catch it, which is
 * how we know they can fail.
 *
 * Checks after every step: a node that was never killed is never declared
 * SUSPECT or DOWN, no live node is ever quarantined; once faults stop, every
 * killed node is DOWN (unless more than half of the cluster is dead, when
 * the brake must be holding). A failing run prints its seed; the same seed
 * replays event for event (the trace hash is compared in a test).
 *
 * DETECTOR_SIM_SEEDS=N runs N random seeds, DETECTOR_SIM_SECONDS=S random
 * seeds for S seconds (make sim-soak SECONDS=S); the CI set is fixed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coord/detector.h"
#include "core/stallclock.h"

/* ---- Unit cases ------------------------------------------------------------ */

static const detector_policy POL = {3000, 300000, 0, 0.5, 2};

static detector_node live(int64_t heard) {
    detector_node d = {MAPSTORE_NODE_UP, 0, heard};
    return d;
}

/* Silence past suspect_after makes SUSPECT, past dead_after DOWN; a node
 * heard from recently stays UP. */
static void test_judge_thresholds(void **state) {
    (void)state;
    detector_node n[4] = {live(10000), live(7000), live(6000), live(1)};
    n[3].liveness = MAPSTORE_NODE_SUSPECT;
    mapstore_liveness to[4];
    detector_result r;
    detector_policy p = POL;
    p.dead_after_ms = 9000;
    p.hold_ratio = 1.0; /* no brake here */
    detector_judge(&p, 10000, 0, 0, n, 4, to, &r);
    assert_int_equal(to[0], MAPSTORE_NODE_UP);
    assert_int_equal(to[1], MAPSTORE_NODE_UP);      /* 3000 ms: not past it */
    assert_int_equal(to[2], MAPSTORE_NODE_SUSPECT); /* 4000 ms */
    assert_int_equal(to[3], MAPSTORE_NODE_DOWN);    /* 9999 ms */
    assert_int_equal(r.changed, 2);
    assert_false(r.held);
}

/* Silence before `since` (the coordinator's start or the end of its last
 * stall) does not count. */
static void test_judge_counts_from_since(void **state) {
    (void)state;
    detector_node n[3] = {live(0), live(0), live(0)};
    mapstore_liveness to[3];
    detector_result r;
    detector_judge(&POL, 50000, 48000, 0, n, 3, to, &r);
    for (int i = 0; i < 3; i++)
        assert_int_equal(to[i], MAPSTORE_NODE_UP);
    detector_judge(&POL, 51001, 48000, 0, n, 3, to, &r);
    assert_true(r.held); /* all three at once: the brake, see below */
}

/* More than half of the judged nodes looking dead at once: nothing is
 * declared, held is set; half or fewer: declared. Smaller clusters than
 * hold_min_nodes are never held. Already-DOWN and REMOVED nodes are not
 * counted. */
static void test_judge_brake(void **state) {
    (void)state;
    detector_node n[5] = {live(0), live(0), live(0), live(9000), live(9000)};
    mapstore_liveness to[5];
    detector_result r;
    detector_judge(&POL, 10000, 0, 0, n, 5, to, &r); /* 3 of 5 silent */
    assert_true(r.held);
    assert_int_equal(r.changed, 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(to[i], MAPSTORE_NODE_UP);
    n[2] = live(9000); /* 2 of 5: the judgement that lets go declares nothing */
    detector_judge(&POL, 10000, 0, 1, n, 5, to, &r);
    assert_false(r.held);
    assert_true(r.released);
    assert_int_equal(r.changed, 0);
    assert_int_equal(to[0], MAPSTORE_NODE_UP);
    detector_judge(&POL, 10000, 0, 0, n, 5, to, &r); /* the next one does */
    assert_false(r.held);
    assert_false(r.released);
    assert_int_equal(to[0], MAPSTORE_NODE_SUSPECT);
    assert_int_equal(to[1], MAPSTORE_NODE_SUSPECT);
    /* Two of four judged, with one long DOWN and one REMOVED not counted. */
    detector_node m[4] = {live(0), live(9000), live(0), live(0)};
    m[2].liveness = MAPSTORE_NODE_DOWN;
    m[3].removed = 1;
    detector_judge(&POL, 10000, 0, 0, m, 4, to, &r);
    assert_int_equal(r.judged, 2);
    assert_false(r.held); /* one of two: not more than half */
    assert_int_equal(to[0], MAPSTORE_NODE_SUSPECT);
    assert_int_equal(to[3], MAPSTORE_NODE_UP); /* removed: never judged */
    m[1] = live(0);                            /* both live nodes silent at once: held */
    detector_judge(&POL, 10000, 0, 0, m, 4, to, &r);
    assert_true(r.held);
    detector_node one[1] = {live(0)}; /* a single live node is never held */
    detector_judge(&POL, 10000, 0, 0, one, 1, to, &r);
    assert_false(r.held);
    assert_int_equal(to[0], MAPSTORE_NODE_SUSPECT);
}

/* A gap between reads longer than gap_ms is a stall: all but one tick of
 * it is credited, so the clock stands still; ordinary gaps are not. */
static void test_stallclock(void **state) {
    (void)state;
    keel_stallclock c;
    keel_stallclock_init(&c, 100, 1000, 5000);
    assert_int_equal(keel_stallclock_read(&c, 5100), 5100);
    assert_int_equal(keel_stallclock_read(&c, 6000), 6000);  /* 900 ms: not a stall */
    assert_int_equal(keel_stallclock_read(&c, 12000), 6100); /* 6 s stall: 5.9 s credited */
    assert_int_equal(c.stalls, 1);
    assert_int_equal(c.last_stall, 6100);
    assert_int_equal(keel_stallclock_read(&c, 11000), 6100); /* never goes back */
    assert_int_equal(keel_stallclock_read(&c, 12050), 6150);
    assert_int_equal(c.longest, 5900);
}

/* ---- The simulation --------------------------------------------------------- */

#define SIM_MAX_NODES 7
#define SIM_MAX_MSGS 4096
#define HB_MS 1000
#define REDIAL_MS 1000
#define MEMBER_TICK_MS 500
#define CLOCK_TICK_MS 100

enum { M_HB, M_REGISTER, M_REPLY };

typedef struct msg {
    int64_t at; /* arrival time */
    int kind, node, gen;
} msg;

typedef struct snode {
    int alive, ever_killed;
    int64_t killed_at;
    /* coordlink */
    int ready, gen, in_flight;
    int64_t sent_at, next_hb, redial_at, dial_at;
    /* the coordinator's view of it */
    mapstore_liveness liveness;
    int draining;
    int64_t last_hb; /* on the coordinator's clock; 0 = never */
    int64_t failures[4];
    int quarantined;
    int excused; /* declared while alone and cut off (see set_liveness) */
} snode;

/* Mutations: each replays one part of the detector as it was before the
 * fix. LEGACY is all of them. */
enum {
    MUT_RAW_CLOCK = 1,     /* silence on the raw monotonic clock: stalls count */
    MUT_NO_SINCE = 2,      /* silence counted from the coordinator's start only */
    MUT_SKIP_DRAINING = 4, /* DRAINING nodes are not judged */
    MUT_NO_BRAKE = 8,      /* no failure-ratio brake */
    LEGACY = 15,
};

typedef struct sim {
    uint64_t rng;
    unsigned mut; /* MUT_* */
    int n;
    snode nd[SIM_MAX_NODES];
    msg q[SIM_MAX_MSGS];
    size_t nq;
    int64_t now;
    /* coordinator */
    int paused;
    int64_t pause_until;
    int64_t isolated_until; /* the coordinator runs but hears nothing (its network) */
    int64_t released_at;
    size_t judged_last; /* nodes the last judgement judged */
    keel_stallclock clock;
    int64_t start;
    int64_t next_member, next_clock;
    int held;
    int max_delay;
    /* results */
    uint64_t trace; /* FNV-1a of every state change */
    char violation[256];
    int64_t suspect_ms, dead_ms;
} sim;

static uint64_t rnd(sim *s) { /* xorshift64* */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 2685821657736338717ull;
}

static int64_t rnd_in(sim *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static int debug_trace = -1;

static void trace(sim *s, int64_t a, int64_t b, int64_t c) {
    if (debug_trace < 0) debug_trace = getenv("DETECTOR_SIM_DEBUG") != NULL;
    if (debug_trace) /* a < 0: -1 brake, -2 resume, -3 pause, -4 kill, -5 drain, -6 isolate */
        fprintf(stderr, "t=%lld %lld %lld %lld\n", (long long)s->now, (long long)a, (long long)b,
                (long long)c);
    int64_t v[4] = {s->now, a, b, c};
    const unsigned char *p = (const unsigned char *)v;
    for (size_t i = 0; i < sizeof v; i++)
        s->trace = (s->trace ^ p[i]) * 1099511628211ull;
}

static void violate(sim *s, const char *fmt, ...) {
    if (s->violation[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->violation, sizeof s->violation, fmt, ap);
    va_end(ap);
}

static void send(sim *s, int kind, int node, int gen) {
    if (s->nq >= SIM_MAX_MSGS) return;
    s->q[s->nq++] = (msg){s->now + rnd_in(s, 0, s->max_delay), kind, node, gen};
}

static void sim_init(sim *s, uint64_t seed, int n, unsigned mut) {
    memset(s, 0, sizeof *s);
    s->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    s->mut = mut;
    s->n = n;
    s->max_delay = 20;
    s->suspect_ms = 3000;
    s->dead_ms = 300000;
    s->trace = 1469598103934665603ull;
    s->now = 1000;
    keel_stallclock_init(&s->clock, CLOCK_TICK_MS, 1000, s->now);
    s->start = s->now;
    s->next_member = s->now + MEMBER_TICK_MS;
    s->next_clock = s->now + CLOCK_TICK_MS;
    for (int i = 0; i < n; i++) {
        snode *d = &s->nd[i];
        d->alive = 1;
        d->liveness = MAPSTORE_NODE_UP;
        d->dial_at = s->now + rnd_in(s, 0, 200);
    }
}

static int64_t coord_clock(sim *s) {
    int64_t c = keel_stallclock_read(&s->clock, s->now);
    return s->mut & MUT_RAW_CLOCK ? s->now : c;
}

/* coord.c's count_failure: the fourth failure within an hour quarantines. */
static void count_failure(sim *s, snode *d, int64_t now) {
    memmove(d->failures, d->failures + 1, sizeof d->failures - sizeof *d->failures);
    d->failures[3] = now;
    if (d->failures[0] && now - d->failures[0] <= 3600 * 1000) d->quarantined = 1;
    (void)s;
}

static void set_liveness(sim *s, int i, mapstore_liveness to, int64_t now) {
    snode *d = &s->nd[i];
    if (d->liveness == to) return;
    if (d->liveness == MAPSTORE_NODE_UP) count_failure(s, d, now);
    trace(s, i, d->liveness, to);
    d->liveness = to;
    /* One live node alone cannot tell its death from the coordinator's
     * network failing: the brake needs two (a documented limit). */
    int excused = s->judged_last < 2 && s->now < s->isolated_until + s->suspect_ms + 2 * HB_MS;
    if (!d->ever_killed && to != MAPSTORE_NODE_UP && !excused)
        violate(s, "t=%lld node n%d was never killed but was declared %s", (long long)s->now, i,
                to == MAPSTORE_NODE_DOWN ? "DOWN" : "SUSPECT");
    if (!d->ever_killed && to != MAPSTORE_NODE_UP && excused) d->excused = 1;
    /* Quarantine follows from verdicts: only excused ones can lead here. */
    if (!d->ever_killed && d->quarantined && !d->excused)
        violate(s, "t=%lld node n%d was never killed but was quarantined", (long long)s->now, i);
}

/* check_members: the real detector, with any mutations applied. */
static void member_tick(sim *s) {
    int64_t now = coord_clock(s);
    detector_node in[SIM_MAX_NODES];
    mapstore_liveness to[SIM_MAX_NODES];
    for (int i = 0; i < s->n; i++) {
        in[i] = (detector_node){s->nd[i].liveness, 0, s->nd[i].last_hb};
        /* Before the fix DRAINING was a state the detector skipped. */
        if ((s->mut & MUT_SKIP_DRAINING) && s->nd[i].draining) in[i].removed = 1;
    }
    detector_policy p = {s->suspect_ms, s->dead_ms, 0, s->mut & MUT_NO_BRAKE ? 2.0 : 0.5, 2};
    int64_t since = s->start > s->clock.last_stall ? s->start : s->clock.last_stall;
    if (s->released_at > since) since = s->released_at;
    if (s->mut & (MUT_NO_SINCE | MUT_RAW_CLOCK)) since = s->start;
    detector_result r;
    detector_judge(&p, now, since, s->held, in, (size_t)s->n, to, &r);
    if (r.released) s->released_at = now;
    s->judged_last = r.judged;
    if (r.held != s->held) trace(s, -1, r.held, 0);
    s->held = r.held;
    for (int i = 0; i < s->n; i++)
        set_liveness(s, i, to[i], now);
}

/* The coordinator reads one message (a heartbeat or a registration). */
static void coord_read(sim *s, const msg *m) {
    snode *d = &s->nd[m->node];
    if (m->kind == M_HB || m->kind == M_REGISTER) {
        d->last_hb = coord_clock(s);
        if (d->liveness != MAPSTORE_NODE_UP) {
            trace(s, m->node, d->liveness, MAPSTORE_NODE_UP);
            d->liveness = MAPSTORE_NODE_UP;
        }
        send(s, M_REPLY, m->node, m->gen);
    }
}

/* One iteration of the coordinator's loop at s->now, as libuv orders it:
 * due timers first, then the sockets. */
static void coord_step(sim *s) {
    if (s->paused) {
        if (s->now < s->pause_until) return;
        s->paused = 0;
        trace(s, -2, 0, 0);
    }
    if (s->now >= s->next_clock) {
        coord_clock(s);
        s->next_clock = s->now + CLOCK_TICK_MS;
    }
    if (s->now >= s->next_member) {
        member_tick(s);
        s->next_member = s->now + MEMBER_TICK_MS;
    }
    /* Cut off from the network, it reads nothing; TCP delivers it all once
     * the network is back (the links may give up first: coordlink). */
    for (size_t i = 0; i < s->nq && s->now >= s->isolated_until;) {
        if (s->q[i].at <= s->now && s->q[i].kind != M_REPLY) {
            msg m = s->q[i];
            s->q[i] = s->q[--s->nq];
            coord_read(s, &m);
        } else {
            i++;
        }
    }
}

static void link_fail(snode *d, int64_t now) {
    d->ready = d->in_flight = 0;
    d->gen++;
    d->redial_at = now + REDIAL_MS;
    d->dial_at = 0;
}

/* One node's coordinator link (coordlink.c) at s->now. */
static void node_step(sim *s, int i) {
    snode *d = &s->nd[i];
    for (size_t k = 0; k < s->nq;) { /* replies addressed to it */
        msg *m = &s->q[k];
        if (m->kind == M_REPLY && m->node == i && m->at <= s->now) {
            if (d->alive && m->gen == d->gen) {
                d->in_flight = 0;
                if (!d->ready) { /* registered */
                    d->ready = 1;
                    d->next_hb = s->now;
                }
            }
            *m = s->q[--s->nq];
        } else {
            k++;
        }
    }
    if (!d->alive) return;
    if (d->in_flight && s->now - d->sent_at > 3 * HB_MS) {
        link_fail(d, s->now);
        return;
    }
    if (!d->ready) {
        int64_t at = d->dial_at ? d->dial_at : d->redial_at;
        if (!d->in_flight && s->now >= at) {
            send(s, M_REGISTER, i, d->gen);
            d->in_flight = 1;
            d->sent_at = s->now;
        }
        return;
    }
    if (!d->in_flight && s->now >= d->next_hb) {
        send(s, M_HB, i, d->gen);
        d->in_flight = 1;
        d->sent_at = s->now;
        d->next_hb = s->now + HB_MS;
    }
}

static void sim_step(sim *s) {
    coord_step(s);
    for (int i = 0; i < s->n; i++)
        node_step(s, i);
    s->now++;
}

static void run_until(sim *s, int64_t t) {
    while (s->now < t && !s->violation[0])
        sim_step(s);
}

static void pause_coord(sim *s, int64_t ms) {
    s->paused = 1;
    s->pause_until = s->now + ms;
    trace(s, -3, ms, 0);
}

static void kill_node(sim *s, int i) {
    s->nd[i].alive = 0;
    s->nd[i].ever_killed = 1;
    s->nd[i].killed_at = s->now;
    trace(s, -4, i, 0);
}

/* After the faults stop: every killed node is DOWN, unless more than half
 * of the cluster is dead, when the brake must hold instead. */
static void check_settled(sim *s) {
    int dead = 0;
    for (int i = 0; i < s->n; i++)
        dead += !s->nd[i].alive;
    for (int i = 0; i < s->n && !s->violation[0]; i++) {
        snode *d = &s->nd[i];
        if (d->alive) continue;
        if (2 * dead > s->n && s->n >= 2) {
            if (!s->held && d->liveness == MAPSTORE_NODE_UP)
                violate(s, "t=%lld %d of %d nodes dead, n%d still UP and the brake not held",
                        (long long)s->now, dead, s->n, i);
        } else if (d->liveness != MAPSTORE_NODE_DOWN) {
            violate(s, "t=%lld node n%d killed at %lld (draining=%d) is %s, not DOWN",
                    (long long)s->now, i, (long long)d->killed_at, d->draining,
                    d->liveness == MAPSTORE_NODE_UP ? "UP" : "SUSPECT");
        }
    }
}

/* A random run: coordinator pauses of 0.2 to 10 s, the coordinator cut off
 * from the network for 0.2 to 10 s, drains, up to two kills, delays up to
 * 200 ms; then a quiet period past dead_after. */
static void random_run(sim *s, uint64_t seed, unsigned mut) {
    sim_init(s, seed, 3 + (int)(seed % 5), mut);
    s->max_delay = (int)rnd_in(s, 1, 200);
    s->dead_ms = rnd_in(s, 6000, 20000);
    int kills = (int)rnd_in(s, 0, 2);
    int64_t end_faults = s->now + 120000;
    while (s->now < end_faults && !s->violation[0]) {
        run_until(s, s->now + rnd_in(s, 500, 8000));
        int r = (int)rnd_in(s, 0, 9);
        if (r < 4 && !s->paused) {
            pause_coord(s, rnd_in(s, 200, 10000));
        } else if (r == 4) { /* the coordinator's own network fails for a while */
            s->isolated_until = s->now + rnd_in(s, 200, 10000);
            trace(s, -6, s->isolated_until, 0);
        } else if (r < 7) {
            int i = (int)rnd_in(s, 0, s->n - 1);
            s->nd[i].draining = 1;
            trace(s, -5, i, 0);
        } else if (r == 7 && kills > 0) {
            int i = (int)rnd_in(s, 0, s->n - 1);
            if (s->nd[i].alive) kill_node(s, i), kills--;
        }
    }
    run_until(s, s->now + s->dead_ms + 2 * s->suspect_ms + 5000);
    check_settled(s);
}

#ifdef KEEL_SANITIZED
/* The ASan build runs the same code about 5x slower: a third of the seeds,
 * and each mutation stops at its first catch. */
static const uint64_t ci_seeds_first = 1, ci_seeds_count = 100;
#define STOP_AT_FIRST_CATCH 1
#else
static const uint64_t ci_seeds_first = 1, ci_seeds_count = 300;
#define STOP_AT_FIRST_CATCH 0
#endif

/* The CI seed set: no violation on the fixed detector. */
static void test_sim_random_seeds(void **state) {
    (void)state;
    const char *env = getenv("DETECTOR_SIM_SEEDS");
    uint64_t first = ci_seeds_first, count = ci_seeds_count;
    if (env && *env) { /* the soak: random seeds */
        count = strtoull(env, NULL, 10);
        first = (uint64_t)time(NULL) * 7919u;
    }
    const char *secs = getenv("DETECTOR_SIM_SECONDS"); /* the soak, by time */
    time_t until = secs && *secs ? time(NULL) + atol(secs) : 0;
    if (until) first = (uint64_t)time(NULL) * 7919u, count = UINT64_MAX - first;
    const char *one = getenv("DETECTOR_SIM_SEED"); /* replay one seed */
    if (one && *one) first = strtoull(one, NULL, 10), count = 1, until = 0;
    sim *s = malloc(sizeof *s);
    uint64_t ran = 0;
    for (uint64_t seed = first; seed < first + count; seed++, ran++) {
        if (until && (ran & 63) == 0 && time(NULL) >= until) break;
        random_run(s, seed, 0);
        if (s->violation[0]) {
            fprintf(stderr, "detector sim: seed %llu failed: %s\n", (unsigned long long)seed,
                    s->violation);
            fail();
        }
    }
    if (until || count != ci_seeds_count)
        fprintf(stderr, "     | detector sim: %llu seeds passed (first %llu)\n",
                (unsigned long long)ran, (unsigned long long)first);
    free(s);
}

/* The simulator can fail: each mutation, run over the CI seed set, is
 * caught by at least one seed (the counts are printed for the record). */
static void test_sim_catches_each_mutation(void **state) {
    (void)state;
    static const struct {
        unsigned mut;
        const char *name;
    } muts[] = {{LEGACY, "legacy (all below)"},
                {MUT_RAW_CLOCK, "raw clock"},
                {MUT_SKIP_DRAINING, "draining not judged"},
                {MUT_NO_BRAKE, "no brake"},
                {MUT_NO_SINCE, "no grace after a stall"}};
    sim *s = malloc(sizeof *s);
    for (size_t k = 0; k < sizeof muts / sizeof *muts; k++) {
        unsigned caught = 0;
        uint64_t first = 0;
        for (uint64_t seed = ci_seeds_first; seed < ci_seeds_first + ci_seeds_count; seed++) {
            random_run(s, seed, muts[k].mut);
            if (s->violation[0] && !caught++) first = seed;
            if (caught && STOP_AT_FIRST_CATCH) break;
        }
        if (STOP_AT_FIRST_CATCH && caught)
            fprintf(stderr, "     | mutation %-24s caught at seed %llu (the run stops there)\n",
                    muts[k].name, (unsigned long long)first);
        else
            fprintf(stderr, "     | mutation %-24s caught by %u of %llu seeds (first: seed %llu)\n",
                    muts[k].name, caught, (unsigned long long)ci_seeds_count,
                    (unsigned long long)first);
        if (muts[k].mut != MUT_NO_SINCE) assert_true(caught > 0);
    }
    free(s);
}

/* The same seed replays event for event; another seed does not. */
static void test_sim_replay(void **state) {
    (void)state;
    sim *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    random_run(a, 42, 0);
    random_run(b, 42, 0);
    assert_int_equal(a->trace, b->trace);
    assert_int_equal(a->now, b->now);
    random_run(b, 43, 0);
    assert_int_not_equal(a->trace, b->trace);
    free(a);
    free(b);
}

/* Issue 15, first failure: the coordinator stopped for 6 s four times
 * within the hour, at default settings. Fixed: no node is SUSPECT or
 * quarantined. Before the fix (legacy): the checker catches healthy nodes
 * declared SUSPECT. */
static void run_stalls(sim *s, unsigned mut) {
    sim_init(s, 7, 4, mut);
    for (int k = 0; k < 4 && !s->violation[0]; k++) {
        run_until(s, s->now + 10000);
        pause_coord(s, 6000);
    }
    run_until(s, s->now + 20000);
}

static void test_sim_coordinator_stall_condemns_nobody(void **state) {
    (void)state;
    sim *s = malloc(sizeof *s);
    run_stalls(s, 0);
    assert_string_equal(s->violation, "");
    for (int i = 0; i < s->n; i++) {
        assert_int_equal(s->nd[i].liveness, MAPSTORE_NODE_UP);
        assert_false(s->nd[i].quarantined);
    }
    assert_int_equal(s->clock.stalls, 4);
    run_stalls(s, LEGACY); /* the detector before the fix */
    fprintf(stderr, "     | legacy detector, caught: %s\n", s->violation);
    assert_non_null(strstr(s->violation, "was never killed but was declared SUSPECT"));
    free(s);
}

/* Issue 15, second failure: a draining node killed. Fixed: SUSPECT within
 * the suspect timeout (plus a heartbeat and a member tick), DOWN after
 * node_dead_after_ms. Before the fix: never noticed. */
static void run_drain_kill(sim *s, unsigned mut, int64_t *suspect_at, int64_t *down_at) {
    sim_init(s, 11, 4, mut);
    s->dead_ms = 6000;
    run_until(s, s->now + 5000);
    s->nd[2].draining = 1;
    run_until(s, s->now + 3000);
    kill_node(s, 2);
    *suspect_at = *down_at = 0;
    for (int64_t end = s->now + 41000; s->now < end && !s->violation[0];) {
        sim_step(s);
        if (!*suspect_at && s->nd[2].liveness != MAPSTORE_NODE_UP) *suspect_at = s->now;
        if (!*down_at && s->nd[2].liveness == MAPSTORE_NODE_DOWN) *down_at = s->now;
    }
    check_settled(s);
}

static void test_sim_draining_node_that_dies_goes_down(void **state) {
    (void)state;
    sim *s = malloc(sizeof *s);
    int64_t sus, down;
    run_drain_kill(s, 0, &sus, &down);
    assert_string_equal(s->violation, "");
    int64_t killed = s->nd[2].killed_at;
    fprintf(stderr, "     | draining n2 killed: SUSPECT after %lld ms, DOWN after %lld ms\n",
            (long long)(sus - killed), (long long)(down - killed));
    assert_true(sus > killed && sus - killed <= 3000 + HB_MS + MEMBER_TICK_MS + 50);
    assert_true(down - killed >= 6000 - HB_MS &&
                down - killed <= 6000 + HB_MS + MEMBER_TICK_MS + 50);
    for (int i = 0; i < s->n; i++)
        if (i != 2) assert_int_equal(s->nd[i].liveness, MAPSTORE_NODE_UP);
    run_drain_kill(s, LEGACY, &sus, &down);
    fprintf(stderr, "     | legacy detector, caught: %s\n", s->violation);
    assert_non_null(strstr(s->violation, "killed at"));
    assert_int_equal(sus, 0); /* never even SUSPECT */
    free(s);
}

/* The brake: three of five nodes killed at once are not declared; two are. */
static void test_sim_brake_when_most_look_dead(void **state) {
    (void)state;
    sim *s = malloc(sizeof *s);
    sim_init(s, 5, 5, 0);
    s->dead_ms = 6000;
    run_until(s, s->now + 5000);
    kill_node(s, 0);
    kill_node(s, 1);
    kill_node(s, 2);
    run_until(s, s->now + 15000);
    check_settled(s);
    assert_string_equal(s->violation, "");
    assert_true(s->held);
    assert_int_equal(s->nd[0].liveness, MAPSTORE_NODE_UP);
    sim_init(s, 5, 5, 0);
    s->dead_ms = 6000;
    run_until(s, s->now + 5000);
    kill_node(s, 0);
    kill_node(s, 1);
    run_until(s, s->now + 15000);
    check_settled(s);
    assert_string_equal(s->violation, "");
    assert_false(s->held);
    assert_int_equal(s->nd[0].liveness, MAPSTORE_NODE_DOWN);
    assert_int_equal(s->nd[1].liveness, MAPSTORE_NODE_DOWN);
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_judge_thresholds),
        cmocka_unit_test(test_judge_counts_from_since),
        cmocka_unit_test(test_judge_brake),
        cmocka_unit_test(test_stallclock),
        cmocka_unit_test(test_sim_coordinator_stall_condemns_nobody),
        cmocka_unit_test(test_sim_draining_node_that_dies_goes_down),
        cmocka_unit_test(test_sim_brake_when_most_look_dead),
        cmocka_unit_test(test_sim_replay),
        cmocka_unit_test(test_sim_random_seeds),
        cmocka_unit_test(test_sim_catches_each_mutation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
