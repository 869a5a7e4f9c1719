/* rep_uv.c - the replication engines' production binding; see rep_uv.h.
 *
 * Pieces, in the order a write meets them:
 *   routing   node_rep_route (cmd.c's cmd_route): rep_write_check /
 *             rep_read_check for RF > 1 partitions, follower reads for
 *             READONLY connections; a write marks its partition touched.
 *   the turn  node_rep_seal (rserver ops.seal_turn, after the group
 *             commit): rep_turn_end gives the turn's batches positions and
 *             streams them; the turn is sealed under a token with the
 *             (partition, position, epoch) it must see committed.
 *   release   env->committed -> try_release: sealed turns leave in order
 *             (rserver_release) once every pair is committed.
 *   drop      on_tick: a sealed turn that can never commit is dropped.
 * Peer transport: struct rlink, one per peer id (outgoing peerlink and
 * queue, and the id of the newest incoming connection from that peer).
 */
#include "node/rep_uv.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/directive.h"
#include "core/log.h"
#include "core/num.h"
#include "net/peerlink.h"
#include "node/coordlink.h"
#include "node/server.h"

#include <hiredis/hiredis.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINK_QUEUE_MAX (64u << 20) /* queued bytes to one peer before the link is reset */
#define MSG_ARGS_MAX 8             /* the largest KEEL.REP.* message (SNAP) */
#define HB_DEFAULT_MS 1000         /* coordlink's pace without RF > 1 partitions */
#define DEFAULT_LEASE_MS 2000      /* the coordinator's replica_lease_ms default */
#define REDIAL_US 250000ull        /* a link that went down is not redialled sooner */
/* A dial not ready after this is given up and made again at once: one such
 * dial to a restarted leader took 1.04 s on loopback (docs/replication.md,
 * "Data from before replication, and the promoted follower's tail"), while
 * the follower's SUBs waited in its queue and the leader's REP_LAG_MAX_MS
 * ran out. Each redial after a slow one is allowed twice as long (a
 * loaded peer that needs longer still gets through; from 4 s on the
 * handshake's own limit is the only one). */
#define DIAL_SLOW_US 500000ull
#define RESIGN_US 5000000ull /* KEEL.REP.RESIGN waits this long for the target */
#define RESIGNS_MAX 64       /* RESIGNs waiting at once */

typedef struct rlink {
    node_rep *nr;
    char id[KEEL_ID_MAX + 1];
    peerlink *pl;
    int ready, dead;    /* dead: went down; closed and told at the next tick */
    int oneway;         /* the peer answers nothing to our messages (KEEL.REP.ONEWAY) */
    int olds;           /* the peer takes APPEND's olds (it answered ONEWAY OLDS with "OK OLDS") */
    kbuf q;             /* queued messages: [u32 argc] then argc x [u32 len][bytes] */
    kbuf qe;            /* the same, a leader's data messages: may leave before the fsync */
    uint64_t in_client; /* the newest incoming connection from this peer (client id) */
    uint64_t redial_us; /* no new dial before this (keel_mono_us) */
    uint64_t dial_us;   /* the current dial started (0: none, or ready) */
    unsigned slows;     /* slow dials in a row (each next one is allowed twice as long) */
    unsigned fails;     /* consecutive downs, to keep the log readable */
} rlink;

typedef struct seal_pair {
    unsigned p;
    uint64_t pos, epoch;
} seal_pair;

typedef struct sealed_turn {
    uint64_t token, since_us;
    size_t n;
    seal_pair *pairs;
} sealed_turn;

/* One partition of a KEEL.REP.RESIGN, held until its target acknowledged
 * the end (C5). A RESIGN of k partitions holds k of these, idx 0..k-1. */
typedef struct resign {
    int active;
    /* 0 waiting, 1 target caught up, -1 timed out or leadership lost, -2
     * refused at once (not the leader in that epoch) */
    int done;
    unsigned p, idx;
    uint64_t le, end, deadline_us;
    char target[KEEL_ID_MAX + 1];
    client *c; /* NULL once the coordinator's connection closed */
} resign;

struct node_rep {
    server *s;
    rep *eng;
    peerauth_secret secret;
    char inc[NODE_REP_INCARNATION_HEX + 1];
    int fresh;
    uv_timer_t tick;
    rlink **links;
    size_t nlinks;
    unsigned np;
    uint8_t *rf; /* replicas of each partition in the installed map */
    int any_rf;  /* some partition has RF > 1 */
    uint64_t lease_ms;
    /* The turn: partitions written under a passed rep_write_check. */
    uint32_t *touched; /* turn_gen when last touched */
    uint32_t turn_gen;
    unsigned *tlist;
    size_t ntl;
    /* Sealed turns, oldest first. */
    sealed_turn *seals;
    size_t nseals, capseals;
    uint64_t next_token;
    int maybe_release;
    /* Leadership transfer: writes of p refused while refuse_le[p] is the
     * leader epoch this node leads p in (a RESIGN waiting or answered OK). */
    uint64_t *refuse_le;
    /* ... and reads too once it answered OK (resigned_le[p] the epoch): the
     * target may lead, with a lease, before this node hears of it (repsim
     * seed 2000, R3). */
    uint64_t *resigned_le;
    /* ... and where to: the id of the RESIGN's target ("" for none), whose
     * address in the map its clients get with -MOVED (its own map may name
     * the new leader only after it exits: a SIGTERM hand-off's
     * KEEL.REP.HANDOFF reply holds its coordinator link). Valid while
     * resigned_le[p] is. */
    char (*resign_to)[KEEL_ID_MAX + 1];
    resign resigns[RESIGNS_MAX];
    unsigned resigns_waiting; /* active and not done: checked at every turn end */
    node_rep_stats st;
};

static void resign_tick(node_rep *nr, uint64_t now);

/* ---- Failure ------------------------------------------------------------- */

/* An engine call failed: a store error (the engines' contract: the node
 * stops), as a failed group commit stops it. */
static void fatal(node_rep *nr, const char *what, int rc) {
    keel_log(KEEL_LOG_ERROR, "replication_failed", "step=%s error=\"%s\" action=exit", what,
             keel_strerror(rc));
    if (nr->s->epoch_log) fflush(nr->s->epoch_log);
    _exit(2);
}

/* ---- Links ----------------------------------------------------------------- */

static rlink *link_find(node_rep *nr, const char *id) {
    for (size_t i = 0; i < nr->nlinks; i++)
        if (strcmp(nr->links[i]->id, id) == 0) return nr->links[i];
    return NULL;
}

static rlink *link_get(node_rep *nr, const char *id) {
    rlink *l = link_find(nr, id);
    if (l) return l;
    if (strlen(id) > KEEL_ID_MAX) return NULL;
    rlink **nl = realloc(nr->links, (nr->nlinks + 1) * sizeof *nl);
    if (!nl) return NULL;
    nr->links = nl;
    if (!(l = calloc(1, sizeof *l))) return NULL;
    l->nr = nr;
    snprintf(l->id, sizeof l->id, "%s", id);
    kbuf_init(&l->q);
    kbuf_init(&l->qe);
    nr->links[nr->nlinks++] = l;
    return l;
}

/* The answer to KEEL.REP.ONEWAY OLDS: +OK OLDS, the peer sends no reply
 * to our messages from now on and takes APPEND's olds (rep_engine.h); +OK
 * (a version before olds, which ignores the argument), no reply but no
 * olds; an error (a version that knows no ONEWAY), every message is
 * answered with +OK as before, and no olds. Only then is the link ready. */
static void on_oneway(void *arg, void *tag, redisReply *r) {
    (void)tag;
    rlink *l = arg;
    if (!r || l->dead) return; /* went down first: on_link_down runs */
    int st = r->type == REDIS_REPLY_STATUS;
    l->olds = st && strcmp(r->str, "OK OLDS") == 0;
    l->oneway = st && (l->olds || strcmp(r->str, "OK") == 0);
    l->ready = 1; /* the queue leaves at the next flush point (after a sync) */
    l->dial_us = 0;
    l->slows = 0;
    if (l->fails)
        keel_log(KEEL_LOG_INFO, "rep_link_up", "peer=%s after=%u oneway=%d olds=%d", l->id,
                 l->fails, l->oneway, l->olds);
    l->fails = 0;
}

/* Proven: asks the peer to answer nothing to the replication messages of
 * this connection. Every message is fire-and-forget (sent with no reply
 * callback), so each +OK cost both ends a write, a read and often a
 * wakeup: 702 of a node's 1,513 peer syscalls in a 1 s trace of an RF 3
 * SET run (docs/replication.md, "Peer writes without epoll_ctl, and
 * one-way replication messages"). */
static void on_link_ready(void *arg, peerlink *pl) {
    rlink *l = arg;
    static const char *argv[] = {"KEEL.REP.ONEWAY", "OLDS"};
    l->oneway = l->olds = 0;
    if (peerlink_send(pl, on_oneway, NULL, 2, argv, NULL)) l->dead = 1; /* cannot while ready */
}

static void on_link_down(void *arg, peerlink *pl, const char *why) {
    (void)pl;
    rlink *l = arg;
    if (l->dead) return;
    /* A peer that stays away costs one line per 50 attempts. */
    keel_log(l->fails++ % 50 ? KEEL_LOG_DEBUG : KEEL_LOG_INFO, "rep_link_down",
             "peer=%s reason=\"%s\" attempt=%u", l->id, why ? why : "", l->fails);
    l->dead = 1;
    l->ready = 0;
    l->q.len = l->qe.len = 0;
    l->nr->st.links_down++;
}

/* Closes a dead (or reset) link and tells the engine: messages may have
 * been lost. Never from inside the engine. */
static void link_settle(node_rep *nr, rlink *l) {
    if (!l->dead) return;
    peerlink_close(l->pl);
    l->pl = NULL;
    l->dead = l->ready = 0;
    l->q.len = l->qe.len = 0;
    l->redial_us = keel_mono_us() + REDIAL_US;
    l->dial_us = 0;
    rep_peer_down(nr->eng, l->id);
}

static int link_open(node_rep *nr, rlink *l) {
    const keel_map *m = ptable_map(nr->s->pt);
    int k = keel_map_find_node(m, l->id);
    if (k < 0) return -1; /* not in the map: nowhere to send */
    static const peerlink_cbs cbs = {.on_ready = on_link_ready, .on_down = on_link_down};
    l->pl = peerlink_open(nr->s->loop, m->nodes[k].host, m->nodes[k].port, nr->s->cfg.id, l->id,
                          &nr->secret, &cbs, l);
    l->dial_us = l->pl ? keel_mono_us() : 0;
    return l->pl ? 0 : -1;
}

static int put_u32(kbuf *b, size_t v) {
    unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    return kbuf_append(b, x, 4);
}

static size_t get_u32(const char *p) {
    const unsigned char *x = (const unsigned char *)p;
    return (size_t)x[0] << 24 | (size_t)x[1] << 16 | (size_t)x[2] << 8 | x[3];
}

/* Sends queue q of l, in order, if the link is ready. */
static void queue_flush(node_rep *nr, rlink *l, kbuf *q) {
    if (!l->ready || l->dead || !q->len) return;
    size_t off = 0;
    while (off + 4 <= q->len) {
        int argc = (int)get_u32(q->p + off);
        const char *argv[MSG_ARGS_MAX];
        size_t len[MSG_ARGS_MAX];
        size_t o = off + 4;
        for (int i = 0; i < argc; i++) {
            len[i] = get_u32(q->p + o);
            argv[i] = q->p + o + 4;
            o += 4 + len[i];
        }
        if (!l->olds) argc = rep_msg_downgrade(argc, argv, len);
        if (l->oneway ? peerlink_send_oneway(l->pl, argc, argv, len)
                      : peerlink_send(l->pl, NULL, NULL, argc, argv, len)) {
            l->dead = 1; /* cannot happen while ready; treated as a loss */
            break;
        }
        nr->st.msgs_out++;
        off = o;
    }
    q->len = 0;
}

/* Both queues: the leader's data first (as it would have left early). */
static void link_flush(node_rep *nr, rlink *l) {
    queue_flush(nr, l, &l->qe);
    queue_flush(nr, l, &l->q);
}

static void flush_all(node_rep *nr) {
    for (size_t i = 0; i < nr->nlinks; i++)
        link_flush(nr, nr->links[i]);
}

/* ---- The environment ----------------------------------------------------- */

static uint64_t e_now_us(void *ctx) {
    (void)ctx;
    return keel_mono_us();
}

/* Queued: leaves at the next flush point, after the turn's store_sync; a
 * leader's data message perhaps before it (rep_msg_early, node_rep_presync). */
static int e_send(void *ctx, const char *peer, int argc, const char **argv, const size_t *len) {
    node_rep *nr = ctx;
    rlink *l = link_get(nr, peer);
    if (!l || argc > MSG_ARGS_MAX || l->dead) {
        nr->st.msgs_dropped++;
        return -1;
    }
    if (!l->pl && (keel_mono_us() < l->redial_us || link_open(nr, l))) {
        nr->st.msgs_dropped++;
        return -1;
    }
    size_t need = 4;
    for (int i = 0; i < argc; i++)
        need += 4 + len[i];
    if (l->q.len + l->qe.len + need >
        LINK_QUEUE_MAX) { /* this far behind: reset, it resubscribes */
        keel_log(KEEL_LOG_WARN, "rep_link_reset", "peer=%s reason=queue-full bytes=%zu", l->id,
                 l->q.len + l->qe.len);
        l->dead = 1;
        l->q.len = l->qe.len = 0;
        nr->st.msgs_dropped++;
        return -1;
    }
    kbuf *q = rep_msg_early(argc, argv, len) ? &l->qe : &l->q;
    int bad = kbuf_reserve(q, need) || put_u32(q, (size_t)argc);
    for (int i = 0; i < argc && !bad; i++)
        bad = put_u32(q, len[i]) || (len[i] && kbuf_append(q, argv[i], len[i]));
    if (bad) { /* out of memory: the partial message must not leave */
        l->dead = 1;
        l->q.len = l->qe.len = 0;
        nr->st.msgs_dropped++;
        return -1;
    }
    return 0;
}

static void e_report(void *ctx, int argc, const char **argv, const size_t *len) {
    node_rep *nr = ctx;
    if (nr->s->link) (void)coordlink_send(nr->s->link, argc, argv, len);
}

static void e_committed(void *ctx, unsigned p, uint64_t pos) {
    (void)p, (void)pos;
    node_rep *nr = ctx;
    nr->maybe_release = 1;
}

/* ---- Sealed turns ---------------------------------------------------------- */

static int pair_committed(node_rep *nr, const seal_pair *sp) {
    return rep_role(nr->eng, sp->p) == REP_LEADER && rep_epoch(nr->eng, sp->p) == sp->epoch &&
           rep_committed(nr->eng, sp->p) >= sp->pos;
}

static int pair_lost(node_rep *nr, const seal_pair *sp) {
    return rep_role(nr->eng, sp->p) != REP_LEADER || rep_epoch(nr->eng, sp->p) != sp->epoch;
}

static void seals_pop(node_rep *nr, size_t k) {
    for (size_t i = 0; i < k; i++)
        free(nr->seals[i].pairs);
    memmove(nr->seals, nr->seals + k, (nr->nseals - k) * sizeof *nr->seals);
    nr->nseals -= k;
}

static void try_release(node_rep *nr) {
    nr->maybe_release = 0;
    size_t k = 0;
    while (k < nr->nseals) {
        sealed_turn *t = &nr->seals[k];
        size_t i = 0;
        while (i < t->n && pair_committed(nr, &t->pairs[i]))
            i++;
        if (i < t->n) break;
        k++;
    }
    if (!k) return;
    uint64_t now = keel_mono_us();
    for (size_t i = 0; i < k; i++) {
        uint64_t w = now - nr->seals[i].since_us;
        nr->st.seal_wait_us += w;
        if (w > nr->st.seal_wait_max_us) nr->st.seal_wait_max_us = w;
    }
    uint64_t token = nr->seals[k - 1].token;
    seals_pop(nr, k);
    nr->st.released_turns += k;
    rserver_release(nr->s->rs, token);
}

/* Sealed turns that can never commit: the node no longer leads a partition
 * in the epoch the turn wrote in, or its lease has been gone for two lease
 * lengths (the coordinator may have moved the leadership). Their clients
 * are closed unanswered: no reply claims a write that may be lost. */
static void check_drop(node_rep *nr, uint64_t now) {
    if (!nr->nseals) return;
    int drop = 0;
    for (size_t k = 0; k < nr->nseals && !drop; k++) {
        sealed_turn *t = &nr->seals[k];
        for (size_t i = 0; i < t->n && !drop; i++) {
            const seal_pair *sp = &t->pairs[i];
            if (pair_committed(nr, sp)) continue;
            drop = pair_lost(nr, sp) || (rep_read_check(nr->eng, sp->p) == REP_ENOLEASE &&
                                         now - t->since_us > 2 * nr->lease_ms * 1000ull);
        }
    }
    if (!drop) return;
    size_t n = rserver_drop_sealed(nr->s->rs);
    keel_log(KEEL_LOG_WARN, "rep_sealed_dropped", "turns=%zu clients=%zu", nr->nseals, n);
    nr->st.dropped_turns += nr->nseals;
    nr->st.dropped_clients += n;
    seals_pop(nr, nr->nseals);
}

void node_rep_presync(node_rep *nr) {
    if (!nr || !nr->any_rf) return;
    /* A failed write is sticky: the caller's store_sync returns it and the
     * node stops before any reply or acknowledgement leaves. */
    if (store_write_turn(nr->s->st)) return;
    int rc = rep_turn_end(nr->eng);
    if (rc) fatal(nr, "turn_end", rc);
    for (size_t i = 0; i < nr->nlinks; i++) {
        rlink *l = nr->links[i];
        if (!l->qe.len || !l->ready || l->dead) continue;
        queue_flush(nr, l, &l->qe);
        nr->st.early_flushes++;
        peerlink_push(l->pl); /* onto the socket before this thread blocks in fsync */
    }
}

int node_rep_turn_touched(const node_rep *nr) {
    return nr && nr->ntl != 0;
}

uint64_t node_rep_seal(node_rep *nr) {
    if (!nr) return 0;
    int rc = rep_turn_end(nr->eng);
    if (rc) fatal(nr, "turn_end", rc);
    uint64_t token = 0;
    if (nr->ntl) {
        seal_pair *pairs = malloc(nr->ntl * sizeof *pairs);
        size_t n = 0;
        for (size_t i = 0; pairs && i < nr->ntl; i++) {
            unsigned p = nr->tlist[i];
            if (rep_role(nr->eng, p) != REP_LEADER) continue; /* cannot be: checked this turn */
            seal_pair sp = {p, rep_end(nr->eng, p), rep_epoch(nr->eng, p)};
            if (!pair_committed(nr, &sp)) pairs[n++] = sp;
        }
        if (!pairs) fatal(nr, "seal", KEEL_ENOMEM); /* a reply must not leave unsealed */
        if (n && nr->nseals == nr->capseals) {
            size_t cap = nr->capseals ? 2 * nr->capseals : 16;
            sealed_turn *ns = realloc(nr->seals, cap * sizeof *ns);
            if (!ns) fatal(nr, "seal", KEEL_ENOMEM);
            nr->seals = ns, nr->capseals = cap;
        }
        if (n) {
            token = ++nr->next_token;
            nr->seals[nr->nseals++] =
                (sealed_turn){.token = token, .since_us = keel_mono_us(), .n = n, .pairs = pairs};
            nr->st.sealed_turns++;
        } else {
            free(pairs);
        }
        nr->ntl = 0;
    }
    nr->turn_gen++;
    flush_all(nr);
    if (nr->maybe_release) try_release(nr);
    /* A RESIGN is answered at the end of the turn that brought the target's
     * acknowledgement (every write taken before the RESIGN has its position
     * now), not at the next tick: the hold is one round trip (C5). */
    if (nr->resigns_waiting) resign_tick(nr, keel_mono_us());
    return token;
}

/* ---- The tick -------------------------------------------------------------- */

static void resign_tick(node_rep *nr, uint64_t now);

/* A dial not ready after DIAL_SLOW_US << slows (three times at most) is
 * given up: what it queued is dropped, the engine is told (settle), and the
 * next dial goes at once, not after REDIAL_US. */
static void abort_slow_dial(node_rep *nr, rlink *l, uint64_t now) {
    if (!l->pl || l->ready || l->dead || !l->dial_us || l->slows >= 3 ||
        now - l->dial_us <= DIAL_SLOW_US << l->slows)
        return;
    keel_log(KEEL_LOG_INFO, "rep_link_down", "peer=%s reason=\"dial-slow\" ms=%llu", l->id,
             (unsigned long long)((now - l->dial_us) / 1000));
    l->dead = 1;
    l->slows++;
    nr->st.links_down++;
    link_settle(nr, l);
    l->redial_us = 0;
}

static void on_tick(uv_timer_t *t) {
    node_rep *nr = t->data;
    uint64_t t0 = keel_mono_us();
    for (size_t i = 0; i < nr->nlinks; i++) {
        abort_slow_dial(nr, nr->links[i], t0);
        link_settle(nr, nr->links[i]); /* after an abort: nothing left to do */
    }
    int rc = rep_tick(nr->eng);
    if (rc) fatal(nr, "tick", rc);
    /* Writes made outside a turn (expiry) reach a batch too; and what the
     * tick sends leaves only after a sync, like a turn's messages. */
    if ((rc = store_sync(nr->s->st, NULL))) fatal(nr, "tick_sync", rc);
    if ((rc = rep_turn_end(nr->eng))) fatal(nr, "tick_turn_end", rc);
    flush_all(nr);
    try_release(nr);
    uint64_t now = keel_mono_us();
    check_drop(nr, now);
    resign_tick(nr, now);
}

/* ---- Map ------------------------------------------------------------------- */

int node_rep_sweep_skip(const node_rep *nr, unsigned slot) {
    return nr && nr->eng && rep_sweep_skip(nr->eng, slot);
}

int node_rep_is_replicated(const node_rep *nr, unsigned p) {
    return nr && p < nr->np && nr->rf[p] > 1;
}

int node_rep_leads_any(const node_rep *nr) {
    for (unsigned p = 0; nr && p < nr->np; p++)
        if (nr->rf[p] > 1 && rep_role(nr->eng, p) == REP_LEADER) return 1;
    return 0;
}

int node_rep_fresh(const node_rep *nr) {
    return !nr || nr->fresh;
}

int node_rep_map_changed(node_rep *nr) {
    if (!nr) return 0;
    const keel_map *m = ptable_map(nr->s->pt);
    int self = ptable_self_index(nr->s->pt);
    int own_inc = self >= 0 && strcmp(m->nodes[self].incarnation, nr->inc) == 0;
    if (own_inc && nr->fresh) {
        nr->fresh = 0;
        keel_log(KEEL_LOG_INFO, "rep_incarnation_listed", "incarnation=%s version=%llu", nr->inc,
                 (unsigned long long)m->version);
    }
    nr->lease_ms = m->lease_ms ? m->lease_ms : DEFAULT_LEASE_MS;
    rep_set_lease_ms(nr->eng, (unsigned)nr->lease_ms);
    int any = 0;
    for (unsigned p = 0; p < nr->np && p < m->partitions; p++) {
        map_rep mr;
        keel_map_get_rep(m, p, &mr);
        /* A partition of a cluster whose writes need several copies (the map's
         * min_insync > 1, written only at RF > 1) is replicated even while it
         * has one replica (a new cluster with one node): its leader answers
         * -NOREPLICAS until min_insync copies are in sync (issue 11). */
        int replicated = mr.n > 1 || (mr.n == 1 && m->min_insync > 1);
        nr->rf[p] = replicated && mr.n < 2 ? 2 : mr.n;
        rep_config c = {.leader_epoch = mr.leader_epoch, .part_epoch = mr.partition_epoch};
        if (!replicated) { /* RF 1 (C1): the engine lets go of what it had */
            if (rep_role(nr->eng, p) == REP_NONE) continue;
        } else if (mr.n > REP_RF_MAX) {
            keel_log(KEEL_LOG_ERROR, "rep_rf_unsupported", "partition=%u replicas=%u max=%d", p,
                     mr.n, REP_RF_MAX);
            continue;
        } else {
            any = 1;
            /* C3: leadership given to another life of this node is not ours. */
            if (mr.node[0] == self && !own_inc) continue;
            c.leader = m->nodes[mr.node[0]].id;
            for (unsigned i = 0; i < mr.n; i++) {
                c.replicas[c.nreplicas++] = m->nodes[mr.node[i]].id;
                if ((mr.isr >> i) & 1) c.isr[c.nisr++] = m->nodes[mr.node[i]].id;
            }
            c.min_insync = m->min_insync ? (int)m->min_insync : 1;
        }
        int rc = rep_configure(nr->eng, p, &c);
        if (rc) return rc;
    }
    int rc = rep_configure_sync(nr->eng); /* one fsync for the whole map */
    if (rc) return rc;
    nr->any_rf = any;
    if (nr->s->link) {
        int hb = HB_DEFAULT_MS;
        if (any) { /* several renewals per lease */
            hb = (int)(nr->lease_ms / 4);
            if (hb < 50) hb = 50;
            if (hb > HB_DEFAULT_MS) hb = HB_DEFAULT_MS;
        }
        coordlink_set_heartbeat_ms(nr->s->link, hb);
    }
    nr->maybe_release = 1;
    try_release(nr);
    /* Tick now: a new follower's subscription (or a new leader's first
     * messages) leaves at once, not up to REP_TICK_MS later. */
    if (uv_is_active((uv_handle_t *)&nr->tick)) uv_timer_start(&nr->tick, on_tick, 0, REP_TICK_MS);
    return 0;
}

void node_rep_lease(node_rep *nr, int lease, uint64_t version, uint64_t sent_us) {
    if (!nr || !nr->any_rf) return;
    const keel_map *m = ptable_map(nr->s->pt);
    if (!lease || m->version != version) {
        nr->st.lease_denied++;
        return;
    }
    int self = ptable_self_index(nr->s->pt);
    for (unsigned p = 0; p < nr->np && p < m->partitions; p++) {
        if (nr->rf[p] <= 1) continue;
        map_rep mr;
        keel_map_get_rep(m, p, &mr);
        if (mr.node[0] == self) rep_lease(nr->eng, p, mr.leader_epoch, sent_us);
    }
    nr->st.leases++;
}

/* ---- Routing --------------------------------------------------------------- */

/* The resigned leader of p: -MOVED to the RESIGN's target, if the map
 * knows its address (0 otherwise: the caller answers -TRYAGAIN). */
static int moved_to_target(node_rep *nr, unsigned p, unsigned slot, kbuf *out) {
    if (!nr->resign_to[p][0]) return 0;
    const keel_map *m = ptable_map(nr->s->pt);
    int k = keel_map_find_node(m, nr->resign_to[p]);
    if (k < 0) return 0;
    char e[KEEL_HOST_MAX + 48];
    snprintf(e, sizeof e, "MOVED %u %s:%d", slot, m->nodes[k].host, m->nodes[k].port);
    resp_w_error(out, e);
    nr->st.handoff_moved++;
    return 1;
}

int node_rep_route(node_rep *nr, unsigned p, unsigned slot, int serve, int write, int readonly,
                   kbuf *out, int *follower_read) {
    *follower_read = 0;
    if (!nr || p >= nr->np || nr->rf[p] <= 1) return serve ? NODE_REP_SERVE : NODE_REP_PTABLE;
    if (!serve && !write && readonly && rep_role(nr->eng, p) == REP_FOLLOWER) {
        *follower_read = 1;
        nr->st.follower_reads++;
        return NODE_REP_SERVE;
    }
    int rc = write ? rep_write_check(nr->eng, p) : rep_read_check(nr->eng, p);
    if (!serve) {
        /* -MOVED as the map says, but not back to a leader that resigned. */
        if (rc != REP_EHANDOFF) return NODE_REP_PTABLE;
    } else if (nr->resigned_le[p] && nr->resigned_le[p] == rep_epoch(nr->eng, p) &&
               rep_role(nr->eng, p) == REP_LEADER) {
        /* Handed over (C5): no read or write here, the new leader may
         * already take writes; its clients go to it. */
        if (moved_to_target(nr, p, slot, out)) return NODE_REP_REPLIED;
        rc = REP_ENOLEASE;
    } else if (rc == REP_OK && write && nr->refuse_le[p] &&
               nr->refuse_le[p] == rep_epoch(nr->eng, p)) {
        rc = REP_ENOLEASE; /* handing the leadership over (C5): -TRYAGAIN */
    }
    switch (rc) {
    case REP_OK:
        if (write && nr->touched[p] != nr->turn_gen + 1) {
            nr->touched[p] = nr->turn_gen + 1;
            nr->tlist[nr->ntl++] = p;
        }
        return NODE_REP_SERVE;
    case REP_ENOREPLICAS:
        nr->st.noreplicas++;
        resp_w_error(out, "NOREPLICAS Not enough good replicas to write.");
        return NODE_REP_REPLIED;
    case REP_EHANDOFF: /* a follower whose leader resigned: not -MOVED back to it */
        nr->st.handoff_tryagain++;
        resp_w_error(out, "TRYAGAIN leadership of this slot is being handed over; retry");
        return NODE_REP_REPLIED;
    default: /* no lease, or the map's leadership is not this incarnation's yet */
        nr->st.tryagain++;
        resp_w_error(out, "TRYAGAIN partition leader has no lease; retry");
        return NODE_REP_REPLIED;
    }
}

/* ---- Peer commands ---------------------------------------------------------- */

void node_rep_peer_command(node_rep *nr, uint64_t client_id, const char *peer, int argc,
                           char **argv, const size_t *len, kbuf *out) {
    rlink *l = link_get(nr, peer);
    if (!l) {
        resp_w_error(out, "ERR out of memory");
        return;
    }
    if (client_id < l->in_client) { /* an older connection than the peer's newest */
        resp_w_simple(out, "OK");
        return;
    }
    if (client_id > l->in_client) {
        /* A new connection: what the peer sent on its previous one may
         * not all have arrived. */
        if (l->in_client) rep_peer_down(nr->eng, peer);
        l->in_client = client_id;
    }
    nr->st.msgs_in++;
    int rc = rep_message(nr->eng, peer, argc, (const char **)argv, len);
    if (rc == KEEL_EPROTO) {
        keel_log(KEEL_LOG_DEBUG, "rep_bad_message", "peer=%s cmd=%.32s", peer, argv[0]);
        resp_w_error(out, "ERR bad replication message");
        return;
    }
    if (rc) fatal(nr, "message", rc);
    if (nr->maybe_release) try_release(nr);
    resp_w_simple(out, "OK");
}

void node_rep_peer_closed(node_rep *nr, const client *c, const char *peer) {
    if (!nr) return;
    for (int i = 0; i < RESIGNS_MAX; i++) {
        resign *g = &nr->resigns[i];
        if (!g->active || g->c != c) continue;
        if (g->done)
            g->active = 0; /* its answer had nobody to go to */
        else
            g->c = NULL; /* resign_tick frees it once done */
    }
    if (!peer) return;
    rlink *l = link_find(nr, peer);
    if (l && l->in_client == c->id) rep_peer_down(nr->eng, peer);
}

/* ---- Leadership transfer (C5) ------------------------------------------------ */

static resign *resign_of(node_rep *nr, const client *c) {
    for (int i = 0; i < RESIGNS_MAX; i++)
        if (nr->resigns[i].active && nr->resigns[i].c == c) return &nr->resigns[i];
    return NULL;
}

/* c's RESIGN still has a partition waiting. */
static int waits_for(node_rep *nr, const client *c) {
    for (int i = 0; i < RESIGNS_MAX; i++)
        if (nr->resigns[i].active && nr->resigns[i].c == c && !nr->resigns[i].done) return 1;
    return 0;
}

/* Each tick: a waiting RESIGN is done once its target acknowledged the
 * end (no write is taken meanwhile, so the end is final), or fails at its
 * deadline or when this node no longer leads p in that epoch. */
static void resign_tick(node_rep *nr, uint64_t now) {
    int announced = 0;
    for (int i = 0; i < RESIGNS_MAX; i++) {
        resign *g = &nr->resigns[i];
        if (!g->active || g->done) continue;
        int leading = rep_role(nr->eng, g->p) == REP_LEADER && rep_epoch(nr->eng, g->p) == g->le;
        uint64_t end = rep_end(nr->eng, g->p);
        if (leading && rep_peer_acked(nr->eng, g->p, g->target) >= end &&
            rep_committed(nr->eng, g->p) >= end) {
            g->done = 1;
            g->end = end;
            nr->resigned_le[g->p] = g->le;
            snprintf(nr->resign_to[g->p], sizeof nr->resign_to[g->p], "%s", g->target);
            /* The followers stop sending clients back here (REP_EHANDOFF). */
            if (rep_resign_announce(nr->eng, g->p) == 0) announced = 1;
        } else if (!leading || now >= g->deadline_us) {
            g->done = -1;
            if (nr->refuse_le[g->p] == g->le) nr->refuse_le[g->p] = 0; /* serves again */
        } else {
            continue;
        }
        if (nr->resigns_waiting) nr->resigns_waiting--;
        if (!g->c)
            g->active = 0; /* nobody to answer */
        else if (!waits_for(nr, g->c))
            rserver_resume(g->c); /* the last of its RESIGN's partitions */
    }
    /* Called after the turn's or the tick's store_sync: the announcements
     * leave now, before the clients this node now redirects reach the
     * target. */
    if (announced) flush_all(nr);
}

/* The answer for one partition of c's RESIGN (its slot g, NULL if it got
 * none: more than RESIGNS_MAX at once), and frees the slot. */
static void resign_answer(node_rep *nr, client *c, resign *g) {
    if (!g) {
        resp_w_error(&c->out, "ERR too many transfers at once; retry");
        return;
    }
    if (g->done > 0) {
        resp_w_array(&c->out, 2);
        resp_w_int(&c->out, (long long)g->end);
        resp_w_int(&c->out, (long long)g->le);
        keel_log(KEEL_LOG_INFO, "rep_resigned", "partition=%u epoch=%llu end=%llu target=%s", g->p,
                 (unsigned long long)g->le, (unsigned long long)g->end, g->target);
    } else {
        resp_w_error(&c->out, g->done == -1 && rep_role(nr->eng, g->p) == REP_LEADER
                                  ? "ERR resign timed out"
                                  : "ERR not the leader of that partition in that epoch");
    }
    g->active = 0;
}

static resign *slot_of(node_rep *nr, const client *c, unsigned idx) {
    for (int i = 0; i < RESIGNS_MAX; i++)
        if (nr->resigns[i].active && nr->resigns[i].c == c && nr->resigns[i].idx == idx)
            return &nr->resigns[i];
    return NULL;
}

/* c's k answers, in request order: one, or an array of k for k > 1. */
static void resign_answers(node_rep *nr, client *c, int k) {
    if (k > 1) resp_w_array(&c->out, (size_t)k);
    for (int i = 0; i < k; i++)
        resign_answer(nr, c, slot_of(nr, c, (unsigned)i));
}

/* The i-th (p, leader-epoch, target) of a RESIGN: 0, or -1 if malformed. */
static int resign_triple(const node_rep *nr, char **argv, const size_t *len, int i, uint64_t *p,
                         uint64_t *le) {
    int a = 2 + 3 * i;
    return keel_parse_u64(argv[a], len[a], p) || keel_parse_u64(argv[a + 1], len[a + 1], le) ||
                   *p >= nr->np || len[a + 2] == 0 || len[a + 2] > KEEL_ID_MAX
               ? -1
               : 0;
}

int node_rep_resign(node_rep *nr, client *c, int argc, char **argv, const size_t *len) {
    static const char usage[] =
        "ERR bad KEEL.REP.RESIGN: term partition leader-epoch target [partition leader-epoch "
        "target ...]";
    int k = (argc - 2) / 3;
    if (resign_of(nr, c)) { /* the re-dispatch of a held RESIGN: its answers */
        if (waits_for(nr, c)) return RSERVER_HOLD; /* cannot be: resumed only when done */
        resign_answers(nr, c, k);
        return 0;
    }
    uint64_t term, p, le;
    int bad = argc < 5 || (argc - 2) % 3 || keel_parse_u64(argv[1], len[1], &term);
    for (int i = 0; i < k && !bad; i++) /* all of it well formed, or none of it is done */
        bad = resign_triple(nr, argv, len, i, &p, &le);
    if (bad) {
        resp_w_error(&c->out, usage);
        return 0;
    }
    directive_verdict v = coordlink_check_term(nr->s->link, 1, term);
    if (v != DIRECTIVE_ACCEPT) {
        char msg[96];
        snprintf(msg, sizeof msg, "ERR directive refused: %s", directive_verdict_name(v));
        resp_w_error(&c->out, msg);
        return 0;
    }
    int held = 0, slot = 0;
    uint64_t now = keel_mono_us();
    for (int i = 0; i < k; i++) {
        while (slot < RESIGNS_MAX && nr->resigns[slot].active)
            slot++;
        if (slot == RESIGNS_MAX) break;                 /* the rest: "too many" */
        (void)resign_triple(nr, argv, len, i, &p, &le); /* checked above */
        const char *target = argv[2 + 3 * i + 2];
        size_t tl = len[2 + 3 * i + 2];
        resign *g = &nr->resigns[slot];
        *g = (resign){.active = 1,
                      .p = (unsigned)p,
                      .idx = (unsigned)i,
                      .le = le,
                      .c = c,
                      .deadline_us = now + RESIGN_US};
        memcpy(g->target, target, tl);
        g->target[tl] = 0;
        if (nr->rf[p] <= 1 || rep_role(nr->eng, (unsigned)p) != REP_LEADER ||
            rep_epoch(nr->eng, (unsigned)p) != le) {
            g->done = -2;
            continue;
        }
        nr->refuse_le[p] = le; /* no new write from now on */
        nr->resigns_waiting++;
        held++;
        keel_log(KEEL_LOG_INFO, "rep_resigning", "partition=%u epoch=%llu target=%s", (unsigned)p,
                 (unsigned long long)le, g->target);
    }
    if (k > 1 || held < k)
        keel_log(held < k ? KEEL_LOG_WARN : KEEL_LOG_INFO, "rep_resign_request",
                 "partitions=%d held=%d", k, held);
    if (held) return RSERVER_HOLD;
    resign_answers(nr, c, k); /* nothing to wait for: answered now */
    return 0;
}

/* ---- Life ------------------------------------------------------------------- */

/* Whether this node's store may send "absent" old states (rep_engine.h
 * rep_set_olds_absent): only if every sweep and gc it ever ran on a
 * replicated partition ran as that partition's leader. True of a store
 * this version or a later one first opened empty (marked "rep-sweep-led");
 * not known of one an older version left with data, whose sweep ran on the
 * partitions it followed too. */
static int olds_absent_init(node_rep *nr) {
    static const char mark[] = "rep-sweep-led";
    char *v = NULL;
    size_t n = 0;
    int rc = store_meta_get(nr->s->st, mark, &v, &n);
    free(v);
    if (rc == 0) return rep_set_olds_absent(nr->eng, 1), 0;
    if (rc != KEEL_ENOTFOUND) return rc;
    if (store_total_keys(nr->s->st) != 0) {
        keel_log(KEEL_LOG_INFO, "rep_olds_absent_off",
                 "reason=\"data from a version that swept followed partitions\"");
        return rep_set_olds_absent(nr->eng, 0), 0;
    }
    rep_set_olds_absent(nr->eng, 1);
    return store_meta_put(nr->s->st, mark, "1", 1);
}

node_rep *node_rep_new(server *s, const peerauth_secret *secret, const char *incarnation, char *err,
                       size_t cap) {
    node_rep *nr = calloc(1, sizeof *nr);
    if (!nr) return snprintf(err, cap, "out of memory"), NULL;
    nr->s = s;
    nr->secret = *secret;
    nr->fresh = 1;
    nr->lease_ms = DEFAULT_LEASE_MS;
    snprintf(nr->inc, sizeof nr->inc, "%s", incarnation);
    nr->np = ptable_partitions(s->pt);
    nr->rf = calloc(nr->np, 1);
    nr->touched = calloc(nr->np, sizeof *nr->touched);
    nr->tlist = calloc(nr->np, sizeof *nr->tlist);
    nr->refuse_le = calloc(nr->np, sizeof *nr->refuse_le);
    nr->resigned_le = calloc(nr->np, sizeof *nr->resigned_le);
    nr->resign_to = calloc(nr->np, sizeof *nr->resign_to);
    rep_env env = {.ctx = nr,
                   .st = s->st,
                   .self_id = s->cfg.id,
                   .partitions = nr->np,
                   .now_us = e_now_us,
                   .send = e_send,
                   .report = e_report,
                   .committed = e_committed};
    if (!nr->rf || !nr->touched || !nr->tlist || !nr->refuse_le || !nr->resigned_le ||
        !nr->resign_to || !(nr->eng = rep_new(&env, 0))) {
        snprintf(err, cap, "out of memory starting replication");
        goto fail;
    }
    int rc = rep_restore(nr->eng);
    if (rc) {
        snprintf(err, cap, "cannot restore the replication records: %s", keel_strerror(rc));
        goto fail;
    }
    if ((rc = olds_absent_init(nr))) {
        snprintf(err, cap, "cannot write metadata: %s", keel_strerror(rc));
        goto fail;
    }
    if ((rc = node_rep_map_changed(nr))) {
        snprintf(err, cap, "cannot configure replication: %s", keel_strerror(rc));
        goto fail;
    }
    uv_timer_init(s->loop, &nr->tick);
    nr->tick.data = nr;
    uv_timer_start(&nr->tick, on_tick, REP_TICK_MS, REP_TICK_MS);
    return nr;
fail:
    rep_free(nr->eng);
    free(nr->rf);
    free(nr->touched);
    free(nr->tlist);
    free(nr->refuse_le);
    free(nr->resigned_le);
    free(nr->resign_to);
    peerauth_secret_wipe(&nr->secret);
    free(nr);
    return NULL;
}

static void tick_closed(uv_handle_t *h) {
    free(h->data);
}

void node_rep_free(node_rep *nr) {
    if (!nr) return;
    for (size_t i = 0; i < nr->nlinks; i++) {
        peerlink_close(nr->links[i]->pl);
        kbuf_close(&nr->links[i]->q);
        kbuf_close(&nr->links[i]->qe);
        free(nr->links[i]);
    }
    free(nr->links);
    seals_pop(nr, nr->nseals);
    free(nr->seals);
    /* A clean stop: the partitions still led record their exact ends, so
     * that the restart catches up from its leaders' logs instead of
     * truncating by full copy (rep_stop). */
    int rc = rep_stop(nr->eng);
    if (rc) keel_log(KEEL_LOG_WARN, "rep_stop_failed", "err=%s", keel_strerror(rc));
    rep_free(nr->eng);
    free(nr->rf);
    free(nr->touched);
    free(nr->tlist);
    free(nr->refuse_le);
    free(nr->resigned_le);
    free(nr->resign_to);
    peerauth_secret_wipe(&nr->secret);
    uv_timer_stop(&nr->tick);
    uv_close((uv_handle_t *)&nr->tick, tick_closed);
}

void node_rep_get_stats(node_rep *nr, node_rep_stats *out) {
    memset(out, 0, sizeof *out);
    if (!nr) return;
    *out = nr->st;
    rep_get_stats(nr->eng, &out->eng);
    if (nr->s->rs) rserver_sealed_stats(nr->s->rs, &out->sealed_bytes, &out->sealed_clients);
    out->pending_turns = nr->nseals;
    for (unsigned p = 0; p < nr->np; p++) {
        if (nr->rf[p] <= 1) continue;
        map_role r = ptable_role(nr->s->pt, p);
        if (r == MAP_ROLE_LEADER) {
            out->leader++;
            uint64_t lag = rep_end(nr->eng, p) - rep_committed(nr->eng, p);
            if (rep_role(nr->eng, p) == REP_LEADER && lag > out->max_lag) out->max_lag = lag;
        } else if (r == MAP_ROLE_FOLLOWER)
            out->follower++;
        else if (r == MAP_ROLE_LAGGING)
            out->lagging++;
    }
}

rep *node_rep_engine(node_rep *nr) {
    return nr ? nr->eng : NULL;
}

void node_rep_info_replication(node_rep *nr, kbuf *b) {
    if (!nr) return;
    node_rep_stats st;
    node_rep_get_stats(nr, &st);
    kbuf_printf(b,
                "keel_rep_partitions_leader:%u\r\nkeel_rep_partitions_follower:%u\r\n"
                "keel_rep_partitions_lagging:%u\r\nkeel_rep_max_uncommitted_batches:%llu\r\n"
                "keel_rep_sealed_turns_waiting:%zu\r\n",
                st.leader, st.follower, st.lagging, (unsigned long long)st.max_lag,
                st.pending_turns);
}

void node_rep_info_keel(node_rep *nr, kbuf *b) {
    if (!nr) return;
    node_rep_stats st;
    node_rep_get_stats(nr, &st);
    kbuf_printf(b,
                "rep_incarnation:%s\r\nrep_fresh:%d\r\nrep_lease_ms:%llu\r\n"
                "rep_batches_sent:%llu\r\nrep_batches_applied:%llu\r\nrep_copies_sent:%llu\r\n"
                "rep_copies_received:%llu\r\nrep_truncations:%llu\r\nrep_isr_proposals:%llu\r\n"
                "rep_early_subs:%llu\r\n"
                "rep_sealed_turns:%llu\r\nrep_released_turns:%llu\r\nrep_dropped_turns:%llu\r\n"
                "rep_dropped_clients:%llu\r\nrep_sealed_bytes:%zu\r\nrep_sealed_clients:%zu\r\n"
                "rep_tryagain:%llu\r\nrep_noreplicas:%llu\r\nrep_follower_reads:%llu\r\n"
                "rep_msgs_out:%llu\r\nrep_msgs_in:%llu\r\nrep_msgs_dropped:%llu\r\n"
                "rep_links_down:%llu\r\nrep_leases:%llu\r\nrep_leases_denied:%llu\r\n"
                "rep_records_synced:%llu\r\nrep_records_lazy:%llu\r\n"
                "rep_seal_wait_us:%llu\r\nrep_seal_wait_max_us:%llu\r\n"
                "rep_early_flushes:%llu\r\n",
                nr->inc, nr->fresh, (unsigned long long)nr->lease_ms,
                (unsigned long long)st.eng.batches_sent, (unsigned long long)st.eng.batches_applied,
                (unsigned long long)st.eng.copies_sent, (unsigned long long)st.eng.copies_received,
                (unsigned long long)st.eng.truncations, (unsigned long long)st.eng.isr_proposals,
                (unsigned long long)st.eng.early_subs, (unsigned long long)st.sealed_turns,
                (unsigned long long)st.released_turns, (unsigned long long)st.dropped_turns,
                (unsigned long long)st.dropped_clients, st.sealed_bytes, st.sealed_clients,
                (unsigned long long)st.tryagain, (unsigned long long)st.noreplicas,
                (unsigned long long)st.follower_reads, (unsigned long long)st.msgs_out,
                (unsigned long long)st.msgs_in, (unsigned long long)st.msgs_dropped,
                (unsigned long long)st.links_down, (unsigned long long)st.leases,
                (unsigned long long)st.lease_denied, (unsigned long long)st.eng.records_synced,
                (unsigned long long)st.eng.records_lazy, (unsigned long long)st.seal_wait_us,
                (unsigned long long)st.seal_wait_max_us, (unsigned long long)st.early_flushes);
    kbuf_printf(b, "rep_copies_active:%u\r\nrep_copies_deferred:%llu\r\n", st.eng.copies_active,
                (unsigned long long)st.eng.copies_deferred);
    kbuf_printf(b, "rep_handoff_moved:%llu\r\nrep_handoff_tryagain:%llu\r\n",
                (unsigned long long)st.handoff_moved, (unsigned long long)st.handoff_tryagain);
    /* Outgoing links ready now, and of those the ones whose peer answers
     * nothing (KEEL.REP.ONEWAY; a version before it answers every message). */
    unsigned ready = 0, oneway = 0, olds = 0;
    for (size_t i = 0; i < nr->nlinks; i++) {
        const rlink *l = nr->links[i];
        if (!l->ready || l->dead) continue;
        ready++;
        oneway += l->oneway != 0;
        olds += l->olds != 0;
    }
    kbuf_printf(b, "rep_links_ready:%u\r\nrep_links_oneway:%u\r\nrep_links_olds:%u\r\n", ready,
                oneway, olds);
    /* A follower's records applied with the leader's old state, and by
     * reading its own (rep_engine.h olds); mismatched must stay 0. */
    kbuf_printf(b,
                "rep_olds_used:%llu\r\nrep_olds_read:%llu\r\nrep_olds_verified:%llu\r\n"
                "rep_olds_mismatched:%llu\r\n",
                (unsigned long long)st.eng.olds_used, (unsigned long long)st.eng.olds_read,
                (unsigned long long)st.eng.olds_verified,
                (unsigned long long)st.eng.olds_mismatched);
}
