/* sim_run.c - the round loop of `keel sim`: the planner of DESIGN.md §8
 * driven the way the coordinator's rebalance loop (§7) drives it, over a
 * simulated cluster.
 *
 * One round, at simulated time t = (round - 1) * round_s:
 *   1. Scripted events of this round (add-node, drain, set-load...).
 *   2. Observe: the planner's model gets this round's metrics, i.e. the true
 *      bytes and loads with seeded noise, the time since each partition's
 *      last move, disk use, and metric ages (a `stale` node is old).
 *   3. Plan: plan_run on that model, with the episode of the previous round
 *      (hysteresis). The new episode is kept for the next round.
 *   4. Enqueue every planned move as in flight (in_flight, moving_to), as
 *      the coordinator does, so the next round counts its weight on the
 *      destination and does not correct twice.
 *   5. Execute until t + round_s: the move executor of §7 with its limits
 *      (per-node in and out, cluster), each running move copying `rate`
 *      bytes/s, so a move takes bytes/rate seconds once started. A finished
 *      move is applied to the model the way plan_apply applies one (owner
 *      changes, since_last_move_s restarts at 0). plan_apply itself cannot be
 *      used: it applies a whole plan at once, to the model it was planned on,
 *      and here moves finish one by one, rounds later.
 *   6. Report the state at t + round_s from TRUE values.
 *
 * The cumulative floor: the movement floor (sum over nodes of weight above
 * target, DESIGN §8) of the committed placement (in-flight moves counted on
 * their destination), measured on true values. Moves lower it; only events
 * raise it. So each round adds max(0, floor after this round's events -
 * floor after the previous round's plan), and cumulative moved / floor is
 * the whole run's efficiency: 1.0 means nothing moved that did not have to.
 */
#include "cli/sim.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_move {
    uint32_t part;
    int32_t from, to;
    double left; /* bytes still to copy */
    bool running;
} sim_move;

typedef struct wconst {
    double kb, kl, kc; /* w(p) = bytes*kb + load*kl + kc, on true values */
} wconst;

typedef struct sim_state {
    const sim_scenario *sc;
    plan_model m;         /* placement, node states, this round's observed metrics */
    double *bytes, *load; /* [nparts] true values */
    double *done_at;      /* [nparts] when the last move finished; -1 = never */
    sim_move *q;          /* planned moves not finished, in plan order */
    size_t nq, qcap, running;
    uint32_t *in_run, *out_run; /* [ncap] running moves per node */
    bool *removing, *stale;     /* [ncap] */
    double *W, *fac;            /* [ncap] scratch: weights, noise factors */
    size_t ncap;
    uint64_t rng[4];
    double now;
    double floor_ref, floor_end, moved_w, moved_bytes;
    char events[SIM_ROW_EVENTS_TEXT];
    char *err;
    size_t errcap;
} sim_state;

/* ---- Randomness: xoshiro256**, seeded by splitmix64 ------------------------ */

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

static void seed_rng(uint64_t s[4], uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        s[i] = z ^ (z >> 31);
    }
}

/* 1 + amp * uniform(-1, 1); no draw when amp is 0, so noise-free runs do not
 * depend on the order of draws. */
static double jitter(sim_state *st, double amp) {
    if (amp <= 0) return 1;
    return 1 + amp * ((double)(next_u64(st->rng) >> 11) * 0x1p-52 - 1);
}

/* ---- Setup ---------------------------------------------------------------- */

static int state_init(sim_state *st, const sim_scenario *sc) {
    const plan_model *src = &sc->model;
    size_t P = src->nparts, adds = 0;
    for (size_t i = 0; i < sc->nevents; i++)
        adds += sc->events[i].kind == SIM_EV_ADD_NODE;
    st->sc = sc;
    st->ncap = src->nnodes + adds;
    plan_model_init(&st->m);
    st->m.settings = src->settings;
    st->m.nodes = malloc(st->ncap * sizeof *st->m.nodes);
    st->m.nodes_cap = st->ncap;
    if (plan_model_reserve_parts(&st->m, P ? P : 1)) return KEEL_ENOMEM;
    st->bytes = malloc((P + 1) * sizeof *st->bytes);
    st->load = malloc((P + 1) * sizeof *st->load);
    st->done_at = malloc((P + 1) * sizeof *st->done_at);
    st->in_run = calloc(st->ncap, sizeof *st->in_run);
    st->out_run = calloc(st->ncap, sizeof *st->out_run);
    st->removing = calloc(st->ncap, sizeof *st->removing);
    st->stale = calloc(st->ncap, sizeof *st->stale);
    st->W = calloc(st->ncap, sizeof *st->W);
    st->fac = calloc(st->ncap, sizeof *st->fac);
    if (!st->m.nodes || !st->bytes || !st->load || !st->done_at || !st->in_run || !st->out_run ||
        !st->removing || !st->stale || !st->W || !st->fac)
        return KEEL_ENOMEM;
    memcpy(st->m.nodes, src->nodes, src->nnodes * sizeof *src->nodes);
    st->m.nnodes = src->nnodes;
    memcpy(st->m.parts, src->parts, P * sizeof *src->parts);
    st->m.nparts = P;
    for (size_t i = 0; i < P; i++) {
        st->bytes[i] = src->parts[i].bytes;
        st->load[i] = src->parts[i].load;
        st->done_at[i] = -1;
    }
    seed_rng(st->rng, sc->seed);
    return 0;
}

static void state_close(sim_state *st) {
    plan_model_close(&st->m);
    free(st->bytes);
    free(st->load);
    free(st->done_at);
    free(st->q);
    free(st->in_run);
    free(st->out_run);
    free(st->removing);
    free(st->stale);
    free(st->W);
    free(st->fac);
}

/* ---- True weights, ratios and the floor ----------------------------------- */

static wconst weight_constants(const sim_state *st) {
    double tb = 0, tl = 0, n = (double)st->m.nparts, lw = st->m.settings.load_weight;
    for (size_t i = 0; i < st->m.nparts; i++)
        tb += st->bytes[i], tl += st->load[i];
    wconst k = {tb > 0 ? 1 / tb : 0, tl > 0 ? lw / tl : 0, 0};
    if (n > 0 && tb <= 0) k.kc += 1 / n;
    if (n > 0 && tl <= 0) k.kc += lw / n;
    return k;
}

static double weight(const sim_state *st, const wconst *k, size_t p) {
    return st->bytes[p] * k->kb + st->load[p] * k->kl + k->kc;
}

/* Weight per node into st->W: where partitions are (committed = false) or
 * where they will be once in-flight moves finish (committed = true). */
static void node_weights(sim_state *st, bool committed) {
    wconst k = weight_constants(st);
    memset(st->W, 0, st->m.nnodes * sizeof *st->W);
    for (size_t i = 0; i < st->m.nparts; i++) {
        const plan_part *p = &st->m.parts[i];
        int32_t n = committed && p->moving_to >= 0 ? p->moving_to : p->replicas[0];
        if (p->nreplicas) st->W[n] += weight(st, &k, i);
    }
}

static bool live(const plan_node *n) {
    return n->state == PLAN_NODE_UP || n->state == PLAN_NODE_DRAINING;
}

static double eff_cap(const plan_node *n) {
    return n->state == PLAN_NODE_UP && !n->draining ? n->capacity : 0;
}

/* Plain mean utilisation over live nodes, as the planner defines it. */
static double mean_util(const sim_state *st) {
    double w = 0, c = 0;
    for (size_t i = 0; i < st->m.nnodes; i++)
        if (live(&st->m.nodes[i])) w += st->W[i], c += eff_cap(&st->m.nodes[i]);
    return c > 0 ? w / c : 0;
}

static double floor_now(sim_state *st) {
    node_weights(st, true);
    double mean = mean_util(st), f = 0;
    for (size_t i = 0; i < st->m.nnodes; i++)
        if (live(&st->m.nodes[i])) f += fmax(0, st->W[i] - eff_cap(&st->m.nodes[i]) * mean);
    return f;
}

/* Max and min u/mean over up nodes of capacity > 0, where data is now. */
static void ratios(sim_state *st, double *mx, double *mn) {
    node_weights(st, false);
    double mean = mean_util(st);
    *mx = 0, *mn = INFINITY;
    for (size_t i = 0; i < st->m.nnodes; i++) {
        double c = eff_cap(&st->m.nodes[i]);
        if (c <= 0) continue;
        double r = mean > 0 ? st->W[i] / (c * mean) : 1;
        *mx = fmax(*mx, r), *mn = fmin(*mn, r);
    }
    if (*mn == INFINITY) *mx = *mn = 1;
}

/* ---- Moves ---------------------------------------------------------------- */

static void event_text(sim_state *st, const char *word, const char *arg) {
    size_t n = strlen(st->events);
    snprintf(st->events + n, sizeof st->events - n, "%s%s%s%s", n ? ";" : "", word, arg ? ":" : "",
             arg ? arg : "");
}

/* Removes move i from the queue (its partition no longer in flight) and, if
 * it completed, applies it at time t. */
static void end_move(sim_state *st, size_t i, bool completed, double t) {
    sim_move *mv = &st->q[i];
    plan_part *p = &st->m.parts[mv->part];
    if (mv->running) {
        st->in_run[mv->to]--, st->out_run[mv->from]--;
        st->running--;
    }
    if (completed) {
        p->replicas[0] = mv->to;
        p->since_last_move_s = 0;
        st->done_at[mv->part] = t;
    }
    p->in_flight = false;
    p->moving_to = -1;
    memmove(st->q + i, st->q + i + 1, (st->nq - i - 1) * sizeof *st->q);
    st->nq--;
}

static int enqueue(sim_state *st, const plan_result *r, sim_row *row) {
    wconst k = weight_constants(st);
    if (st->nq + r->nmoves > st->qcap) {
        size_t cap = st->qcap ? st->qcap : 64;
        while (cap < st->nq + r->nmoves)
            cap *= 2;
        sim_move *q = realloc(st->q, cap * sizeof *q);
        if (!q) return KEEL_ENOMEM;
        st->q = q, st->qcap = cap;
    }
    for (size_t i = 0; i < r->nmoves; i++) {
        const plan_move *mv = &r->moves[i];
        plan_part *p = &st->m.parts[mv->part];
        if (mv->replica != 0 || p->replicas[0] != mv->from || p->in_flight) {
            snprintf(st->err, st->errcap,
                     "planner returned a move of partition %llu that does "
                     "not match the model",
                     (unsigned long long)mv->part_id);
            return KEEL_EINVAL;
        }
        p->in_flight = true;
        p->moving_to = mv->to;
        st->q[st->nq++] =
            (sim_move){(uint32_t)mv->part, mv->from, mv->to, st->bytes[mv->part], false};
        row->bytes_moved += st->bytes[mv->part];
        st->moved_w += weight(st, &k, mv->part);
        if ((unsigned)mv->why <= PLAN_WHY_DISK_FLOOD) row->why[mv->why]++;
    }
    row->moves = r->nmoves;
    st->moved_bytes += row->bytes_moved;
    return 0;
}

static uint64_t cluster_limit(const sim_state *st) {
    if (st->sc->max_cluster >= 0) return (uint64_t)st->sc->max_cluster;
    uint64_t n = 0;
    for (size_t i = 0; i < st->m.nnodes; i++)
        n += live(&st->m.nodes[i]);
    return n / 2 > 1 ? n / 2 : 1;
}

/* Starts queued moves in plan order while the executor's limits allow. */
static void start_ready(sim_state *st) {
    const sim_scenario *sc = st->sc;
    uint64_t cl = cluster_limit(st);
    for (size_t i = 0; i < st->nq; i++) {
        sim_move *mv = &st->q[i];
        if (mv->running) continue;
        if ((cl && st->running >= cl) || (sc->max_out && st->out_run[mv->from] >= sc->max_out) ||
            (sc->max_in && st->in_run[mv->to] >= sc->max_in))
            continue;
        mv->running = true;
        st->in_run[mv->to]++, st->out_run[mv->from]++;
        st->running++;
    }
}

/* Runs the executor from st->now to end; returns the bytes copied. */
static double execute(sim_state *st, double end) {
    double rate = st->sc->rate, copied = 0, t = st->now;
    if (rate <= 0) { /* instant moves: every planned move lands now */
        while (st->nq) {
            copied += st->q[0].left;
            end_move(st, 0, true, t);
        }
        return copied;
    }
    for (;;) {
        start_ready(st);
        if (!st->running) break;
        double dt = INFINITY;
        for (size_t i = 0; i < st->nq; i++)
            if (st->q[i].running) dt = fmin(dt, st->q[i].left / rate);
        bool last = t + dt > end;
        if (last) dt = end - t;
        t += dt;
        for (size_t i = st->nq; i-- > 0;) {
            sim_move *mv = &st->q[i];
            if (!mv->running) continue;
            double step = fmin(mv->left, dt * rate);
            copied += step;
            mv->left -= step;
            if (mv->left <= 1e-9 * (st->bytes[mv->part] + 1)) end_move(st, i, true, t);
        }
        if (last) break;
    }
    return copied;
}

/* A node that failed: its moves, in and out, abort. */
static void abort_moves(sim_state *st, int32_t node) {
    for (size_t i = st->nq; i-- > 0;)
        if (st->q[i].from == node || st->q[i].to == node) end_move(st, i, false, st->now);
}

/* Decommissioned nodes leave once nothing is on or coming to them. */
static void finish_removals(sim_state *st) {
    for (size_t n = 0; n < st->m.nnodes; n++) {
        if (!st->removing[n]) continue;
        bool empty = true;
        for (size_t i = 0; i < st->m.nparts && empty; i++)
            empty = st->m.parts[i].replicas[0] != (int32_t)n;
        for (size_t i = 0; i < st->nq && empty; i++)
            empty = st->q[i].to != (int32_t)n;
        if (!empty) continue;
        st->m.nodes[n].state = PLAN_NODE_DOWN;
        st->removing[n] = false;
        event_text(st, "removed", st->m.nodes[n].id);
    }
}

/* ---- Events and observation ----------------------------------------------- */

static bool sel_has(const sim_sel *s, uint64_t id) {
    if (s->all) return true;
    for (int i = 0; i < s->n; i++)
        if (id >= s->r[i].lo && id <= s->r[i].hi) return true;
    return false;
}

static int apply_event(sim_state *st, const sim_event *ev) {
    plan_model *m = &st->m;
    int n = ev->kind == SIM_EV_ADD_NODE ? plan_model_add_node(m, &ev->node)
                                        : plan_model_find_node(m, ev->node.id);
    const char *arg = ev->node.id;
    if (n < 0 && ev->kind != SIM_EV_SET_LOAD && ev->kind != SIM_EV_SET_BYTES &&
        ev->kind != SIM_EV_SET) {
        snprintf(st->err, st->errcap, "round %u: event %s on node '%s' failed: %s", ev->round,
                 sim_event_name(ev->kind), ev->node.id, keel_strerror(n));
        return n == KEEL_ENOMEM ? n : KEEL_EINVAL;
    }
    plan_node *nd = n >= 0 ? &m->nodes[n] : NULL;
    switch (ev->kind) {
    case SIM_EV_ADD_NODE:
        break;
    case SIM_EV_REMOVE_NODE:
    case SIM_EV_DRAIN:
        nd->state = PLAN_NODE_DRAINING;
        st->removing[n] = ev->kind == SIM_EV_REMOVE_NODE;
        break;
    case SIM_EV_UNDRAIN:
    case SIM_EV_RECOVER_NODE:
        nd->state = PLAN_NODE_UP;
        st->removing[n] = false;
        break;
    case SIM_EV_FAIL_NODE:
        nd->state = PLAN_NODE_DOWN;
        st->removing[n] = false;
        abort_moves(st, n);
        break;
    case SIM_EV_SET_CAPACITY:
        nd->capacity = ev->value;
        break;
    case SIM_EV_STALE:
        st->stale[n] = true;
        break;
    case SIM_EV_SET_LOAD:
    case SIM_EV_SET_BYTES:
        for (size_t i = 0; i < m->nparts; i++)
            if (sel_has(&ev->sel, m->parts[i].id))
                (ev->kind == SIM_EV_SET_LOAD ? st->load : st->bytes)[i] = ev->value;
        arg = NULL;
        break;
    case SIM_EV_SET:
        sim_setting_set(&m->settings, ev->setting, ev->value);
        arg = sim_setting_name(ev->setting);
        break;
    }
    event_text(st, sim_event_name(ev->kind), arg);
    return 0;
}

/* The metrics the planner sees this round: true values with noise. */
static void observe(sim_state *st) {
    const sim_scenario *sc = st->sc;
    plan_model *m = &st->m;
    for (size_t n = 0; n < m->nnodes; n++) {
        st->fac[n] = jitter(st, sc->noise_node);
        m->nodes[n].metrics_age_s = st->stale[n] ? 1e9 : 0;
        m->nodes[n].disk_used = 0;
    }
    for (size_t i = 0; i < m->nparts; i++) {
        plan_part *p = &m->parts[i];
        p->bytes = st->bytes[i] * jitter(st, sc->noise_bytes);
        p->load = st->load[i] * jitter(st, sc->noise_load) * st->fac[p->replicas[0]];
        p->since_last_move_s = st->done_at[i] < 0 ? 1e9 : st->now - st->done_at[i];
        m->nodes[p->replicas[0]].disk_used += st->bytes[i];
    }
    for (size_t i = 0; i < st->nq; i++) /* a destination reserves what it receives */
        m->nodes[st->q[i].to].disk_used += st->bytes[st->q[i].part];
}

/* ---- The loop ------------------------------------------------------------- */

static int round_once(sim_state *st, uint32_t round, size_t *next_ev, sim_row_fn fn, void *arg) {
    const sim_scenario *sc = st->sc;
    plan_result r = {0};
    sim_row row = {.round = round};
    int rc = 0;
    st->now = (double)(round - 1) * sc->round_s;
    st->events[0] = 0;
    for (; *next_ev < sc->nevents && sc->events[*next_ev].round == round; (*next_ev)++)
        if ((rc = apply_event(st, &sc->events[*next_ev]))) return rc;
    st->floor_ref += fmax(0, floor_now(st) - st->floor_end);
    observe(st);
    if ((rc = plan_run(&st->m, &r))) {
        snprintf(st->err, st->errcap, "round %u: planner: %s", round,
                 r.error[0] ? r.error : keel_strerror(rc));
        goto done;
    }
    st->m.episode = r.episode;
    if ((rc = enqueue(st, &r, &row))) goto done;
    st->floor_end = floor_now(st);
    row.bytes_transferred = execute(st, st->now + sc->round_s);
    st->now += sc->round_s;
    finish_removals(st);
    ratios(st, &row.max_over_mean, &row.min_over_mean);
    row.time_s = st->now;
    row.in_flight = st->nq;
    row.cum_bytes_moved = st->moved_bytes;
    row.floor = st->floor_ref;
    row.cum_moved_over_floor = st->floor_ref > 1e-12 ? st->moved_w / st->floor_ref : 0;
    row.episode_open = r.episode.active;
    row.events = st->events;
    row.model = &st->m;
    row.plan = &r;
    rc = fn(&row, arg);
    memset(st->stale, 0, st->m.nnodes * sizeof *st->stale);
done:
    plan_result_close(&r);
    return rc;
}

int sim_run(const sim_scenario *sc, sim_row_fn fn, void *arg, char *err, size_t cap) {
    sim_state st = {.err = err, .errcap = cap};
    size_t next_ev = 0;
    int rc = state_init(&st, sc);
    if (rc) snprintf(err, cap, "out of memory");
    for (uint32_t round = 1; !rc && round <= sc->rounds; round++)
        rc = round_once(&st, round, &next_ev, fn, arg);
    state_close(&st);
    return rc;
}
