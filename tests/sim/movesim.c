/* movesim.c - the move-protocol simulator (movesim.h; docs/simulation.md).
 *
 * Everything happens on one simulated clock, in one event queue ordered by
 * (time, sequence number), so a seed decides every interleaving. A node's
 * "turn" is one event: its handler runs, then the node's store writes the
 * turn out (store_sync) and only then do the turn's messages leave - the
 * group commit of the real node. A failed turn write stops the node with its
 * replies unsent, as the real node does.
 *
 *   clients --GET/SET--> node: ptable_route -> serve / hold / -MOVED
 *   coordinator model --KEEL.MOVE.* directives--> node engine (move_engine.h)
 *   D's engine --CHUNK/CHANGES over a sim link--> S's engine
 *   D's engine --REPORT--> coordinator model;  coordinator --map--> nodes
 *
 * Faults (until fault_ms): network delay bursts, dropped connections, node
 * crashes (in-memory state lost; what the store wrote survives, as after
 * kill -9) and restarts, pauses, clock steps and skew, and a failed store
 * write. Replies are real RESP, parsed by hiredis's reader, so the engines
 * see what they see in production.
 */
#include "movesim.h"
#include "simkit.h"

#include "core/buf.h"
#include "core/crc16.h"
#include "core/directive.h"
#include "core/err.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "core/mapcodec.h"
#include "node/move_engine.h"
#include "node/ptable.h"
#include "resp/resp.h"
#include "store/store.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define P 16                 /* partitions */
#define MAXN 7               /* nodes */
#define CLIENTS 8
#define PRELOAD 3000         /* keys written before the run */
#define HOLD_MAX_MS 2000     /* a held client request gets -TRYAGAIN after this */
#define CLIENT_TIMEOUT_MS 1500
#define TICK_MS 20           /* coordinator model */
#define STALL_MS 3000        /* a move without progress aborts */
#define FENCE_TIMEOUT_MS 2000
#define RATE 200000          /* bytes/s a move's source sends */
#define FENCE_LAG 4096
#define SETTLE_MS 30000      /* after the faults: every move must end by then */
#define BASE_PORT 7000

/* ---- Events ------------------------------------------------------------------ */

typedef struct sim sim;
typedef struct ev ev;
typedef void (*ev_fn)(sim *w, ev *e);

enum { K_REQ = 1, K_REPLY, K_RESUME, K_DOWN, K_READY, K_CONNECT, K_TIMER, K_CLIENT_CMD,
       K_CLIENT_REPLY, K_CLIENT_TIMEOUT, K_CLIENT_NEXT, K_HOLD_TIMEOUT, K_HELD_RERUN, K_MAP,
       K_REPORT, K_COORD_TICK, K_FAULT, K_RESTART, K_SERVER_CLOSE, K_WALSYNC };

struct ev {
    uint64_t at, seq;
    int kind;
    int node, inc; /* node >= 0: runs as a turn of that node, if still incarnation inc */
    ev_fn fn;
    void *a;
    uint64_t u, u2;
    kbuf data;
};

typedef struct move_link sconn;
typedef struct snode snode;

typedef struct sreq {
    struct sreq *next;
    int argc, held;
    char **argv;
    size_t *len;
} sreq;

typedef struct pend {
    move_reply_fn fn;
    void *tag;
} pend;

enum { C_CONNECTING, C_READY, C_DOWN, C_CLOSED };

/* A connection: node D's link to S (move_link), or the coordinator's to a node. */
struct move_link {
    sim *w;
    int from, to; /* node indexes; from -1: the coordinator */
    int from_inc, to_inc;
    int state;
    const move_link_cbs *cbs;
    void *arg;
    pend *pend;
    size_t npend, pend_head, cappend;
    sreq *qhead, *qtail; /* at `to`: requests to answer, in order */
    int waits_data;
    uint64_t last_c2s, last_s2c;
};

typedef struct move_timer {
    snode *n;
    int inc, dead, repeat_ms;
    uint64_t gen;
    move_timer_fn fn;
    void *arg;
} sim_timer;

typedef struct hold {
    struct hold *next;
    int client, active;
    uint64_t gen;
    unsigned p;
} hold;

/* A pending env->sync_wal: the fsync completes as a later event. */
typedef struct sim_sync {
    void (*done)(void *arg, int rc);
    void *arg;
    int over; /* answered or cancelled */
    struct sim_sync *next;
} sim_sync;

struct snode {
    sim *w;
    sim_sync *syncs; /* this incarnation's sync_wal requests */
    int i, up, inc, dying, fail_next_sync;
    char id[16], dir[300];
    store *st;
    ptable *pt;
    moves *eng;
    directive_guard *guard;
    uint64_t paused_until;
    int64_t clock_off; /* us */
    uint64_t rate_ppm;
    ev **out;
    size_t nout, capout;
    hold *holds;
    uint64_t seen_version, seen_epoch[P];
};

/* ---- The coordinator model ------------------------------------------------------ */

enum { CM_PLANNED, CM_COPYING, CM_CATCHUP, CM_FENCED, CM_COMMITTED, CM_DONE, CM_ABORTED,
       CM_FORGOTTEN };

typedef struct cmove {
    struct cmove *next;
    uint64_t id;
    unsigned p;
    int from, to, state, busy;
    int out_ok, in_ok, have_fence, commit_d, commit_s, abort_s, abort_d;
    uint64_t created, state_at, progress_at;
    uint64_t epoch; /* the partition's epoch when the move was planned */
    long long f, dg, keys;
    char why[64];
} cmove;

typedef struct ctag {
    cmove *m;
    int kind;
    uint64_t inc; /* the coordinator incarnation that sent it */
} ctag;

/* ---- Clients and the oracle ----------------------------------------------------- */

typedef struct acked {
    char key[40], val[40];
    unsigned slot;
} acked;

typedef struct sclient {
    int id, target, attempts, is_read;
    uint64_t seq, gen, started;
    char key[40], val[40];
    long want; /* is_read: index into the oracle */
    unsigned slot;
    int owner[P]; /* the client's routing cache (node index) */
} sclient;

struct sim {
    movesim_opts o;
    movesim_result *r;
    uint64_t rng;
    uint64_t now, seq;
    simkit_queue q; /* pending events */
    void **keep;
    size_t nkeep, capkeep;
    sconn **conns;
    size_t nconns, capconns;
    int n;
    snode nodes[MAXN];
    sconn *cconn[MAXN]; /* coordinator -> node */
    keel_map map;       /* the coordinator's, authoritative */
    char *initial_json;
    cmove *moves;
    uint64_t next_move;
    sclient clients[CLIENTS];
    acked *acks;
    size_t nacks, capacks;
    uint64_t slow_until, fault_end, end;
    uint64_t coord_down_until; /* the coordinator process is down until then */
    uint64_t coord_inc;        /* its incarnation: replies to an older one are lost */
    int stopping;
};

static void violation(sim *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(sim *w, const char *fmt, ...) {
    if (w->r->violation) return;
    w->r->violation = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->r->what, sizeof w->r->what, "seed %llu at %.3f s: %s",
             (unsigned long long)w->o.seed, w->now / 1e6, msg);
}

static void trace(sim *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(sim *w, const char *fmt, ...) {
    if (!w->o.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%10.3f ", w->now / 1e6);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t rnd(sim *w) { /* splitmix64 (simkit.h) */
    return simkit_rnd(&w->rng);
}
static uint64_t rnd_in(sim *w, uint64_t lo, uint64_t hi) { /* [lo, hi] */
    return simkit_rnd_in(&w->rng, lo, hi);
}
static int chance(sim *w, unsigned per_mille) {
    return simkit_chance(&w->rng, per_mille);
}

static void *keep(sim *w, size_t n) {
    void *p = calloc(1, n);
    if (!p) abort(); /* the simulator is a test: out of memory ends it */
    if (w->nkeep == w->capkeep) {
        w->capkeep = w->capkeep ? w->capkeep * 2 : 256;
        w->keep = realloc(w->keep, w->capkeep * sizeof *w->keep);
        if (!w->keep) abort();
    }
    w->keep[w->nkeep++] = p;
    return p;
}

/* The event queue orders by (at, seq): simkit.h. */
static void heap_push(sim *w, ev *e) {
    simkit_push(&w->q, e->at, e->seq, e);
}

static ev *heap_pop(sim *w) {
    return simkit_pop(&w->q);
}

static ev *ev_new(sim *w, int kind, uint64_t at, int node, ev_fn fn) {
    ev *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->kind = kind;
    e->at = at < w->now ? w->now : at;
    e->node = node;
    e->inc = node >= 0 ? w->nodes[node].inc : -1;
    e->fn = fn;
    kbuf_init(&e->data);
    return e;
}

static void sreq_free(sreq *q);

/* Frees an event; a request that never arrived goes with it. */
static void ev_free(ev *e) {
    if (e->kind == K_REQ && e->u) sreq_free((sreq *)(uintptr_t)e->u);
    kbuf_close(&e->data);
    free(e);
}

static void schedule(sim *w, ev *e) {
    e->seq = ++w->seq;
    heap_push(w, e);
}

/* Messages a node sends leave when its turn is written (node_turn_end). */
static void send_from(sim *w, int node, ev *e) {
    if (node < 0) {
        schedule(w, e);
        return;
    }
    snode *n = &w->nodes[node];
    if (n->nout == n->capout) {
        n->capout = n->capout ? n->capout * 2 : 16;
        n->out = realloc(n->out, n->capout * sizeof *n->out);
        if (!n->out) abort();
    }
    n->out[n->nout++] = e;
}

/* One message's delay: 50-1500 us, one in fifty 5-20 ms more, and up to
 * 40 ms more during a delay burst. */
static uint64_t net_delay(sim *w) {
    uint64_t d = rnd_in(w, 50, 1500);
    if (chance(w, 20)) d += rnd_in(w, 5000, 20000);
    if (w->now < w->slow_until) d += rnd_in(w, 0, 40000);
    return d;
}

/* ---- Node clock and timers ------------------------------------------------------- */

static uint64_t n_now_us(void *ctx) {
    snode *n = ctx;
    return (uint64_t)((int64_t)(n->w->now * (n->rate_ppm / 1e6)) + n->clock_off);
}

static void ev_timer(sim *w, ev *e);

static void timer_arm(sim_timer *t, uint64_t after_ms) {
    sim *w = t->n->w;
    uint64_t world_us = (uint64_t)(after_ms * 1000.0 * 1e6 / (double)t->n->rate_ppm);
    ev *e = ev_new(w, K_TIMER, w->now + world_us, t->n->i, ev_timer);
    e->inc = t->inc;
    e->a = t;
    e->u = t->gen;
    schedule(w, e);
}

static void ev_timer(sim *w, ev *e) {
    (void)w;
    sim_timer *t = e->a;
    if (t->dead || t->gen != e->u) return;
    if (t->repeat_ms)
        timer_arm(t, (uint64_t)t->repeat_ms);
    else
        t->gen++; /* fired: a later start arms it anew */
    t->fn(t->arg);
}

static move_timer *n_timer_new(void *ctx, move_timer_fn fn, void *arg) {
    snode *n = ctx;
    sim_timer *t = keep(n->w, sizeof *t);
    t->n = n, t->inc = n->inc, t->fn = fn, t->arg = arg;
    return t;
}
static void n_timer_start(move_timer *t, uint64_t after_ms, uint64_t repeat_ms) {
    t->gen++;
    t->repeat_ms = (int)repeat_ms;
    timer_arm(t, after_ms);
}
static void n_timer_stop(move_timer *t) {
    t->gen++;
}
static void n_timer_free(move_timer *t) {
    if (t) t->dead = 1, t->gen++;
}

/* ---- Connections ---------------------------------------------------------------- */

static const char *peer_name(sim *w, const sconn *c) {
    return c->from < 0 ? "coordinator" : w->nodes[c->from].id;
}

static void ev_req(sim *w, ev *e);
static void ev_reply(sim *w, ev *e);
static void ev_down(sim *w, ev *e);

static int conn_send(sconn *c, move_reply_fn fn, void *tag, int argc, const char **argv) {
    sim *w = c->w;
    if (c->state != C_READY) return -1;
    if (c->npend == c->cappend) {
        c->cappend = c->cappend ? c->cappend * 2 : 8;
        c->pend = realloc(c->pend, c->cappend * sizeof *c->pend);
        if (!c->pend) abort();
    }
    c->pend[c->npend++] = (pend){fn, tag};
    sreq *q = calloc(1, sizeof *q);
    q->argc = argc;
    q->argv = calloc((size_t)argc, sizeof *q->argv);
    q->len = calloc((size_t)argc, sizeof *q->len);
    for (int i = 0; i < argc; i++) {
        q->len[i] = strlen(argv[i]);
        q->argv[i] = malloc(q->len[i] + 1);
        memcpy(q->argv[i], argv[i], q->len[i] + 1);
    }
    uint64_t at = w->now + net_delay(w);
    if (at <= c->last_c2s) at = c->last_c2s + 1;
    c->last_c2s = at;
    ev *e = ev_new(w, K_REQ, at, c->to, ev_req);
    e->inc = c->to_inc;
    e->a = c;
    e->u = (uint64_t)(uintptr_t)q;
    send_from(w, c->from, e);
    return 0;
}

static void sreq_free(sreq *q) {
    for (int i = 0; i < q->argc; i++)
        free(q->argv[i]);
    free(q->argv);
    free(q->len);
    free(q);
}

static void conn_clear_queue(sconn *c) {
    while (c->qhead) {
        sreq *q = c->qhead;
        c->qhead = q->next;
        sreq_free(q);
    }
    c->qtail = NULL;
}

/* Answers c's queued requests at node `to`, in order, until one is held. */
static void conn_serve(sim *w, sconn *c) {
    snode *n = &w->nodes[c->to];
    while (c->qhead && !c->qhead->held && c->state == C_READY && n->up && n->inc == c->to_inc) {
        sreq *q = c->qhead;
        kbuf out;
        kbuf_init(&out);
        move_call call = {.conn = c, .out = &out, .proto = 2, .peer = peer_name(w, c),
                          .waits_data = &c->waits_data};
        int rc = move_engine_call(n->eng, &call, q->argc, q->argv, q->len);
        if (rc == MOVE_HELD) {
            q->held = 1;
            kbuf_close(&out);
            return;
        }
        c->qhead = q->next;
        if (!c->qhead) c->qtail = NULL;
        trace(w, "%s <- %s %s: %.*s", n->id, peer_name(w, c), q->argv[0],
              (int)(out.len > 40 ? 40 : out.len), out.p ? out.p : "");
        sreq_free(q);
        uint64_t at = w->now + net_delay(w);
        if (at <= c->last_s2c) at = c->last_s2c + 1;
        c->last_s2c = at;
        ev *e = ev_new(w, K_REPLY, at, c->from, ev_reply);
        if (c->from >= 0) e->inc = c->from_inc;
        e->a = c;
        kbuf_append(&e->data, out.p ? out.p : "", out.len);
        kbuf_close(&out);
        send_from(w, c->to, e);
    }
}

static void ev_req(sim *w, ev *e) {
    sconn *c = e->a;
    sreq *q = (sreq *)(uintptr_t)e->u;
    e->u = 0; /* taken */
    if (c->state != C_READY) {
        sreq_free(q);
        return;
    }
    if (c->qtail)
        c->qtail->next = q;
    else
        c->qhead = q;
    c->qtail = q;
    conn_serve(w, c);
}

static void ev_resume(sim *w, ev *e) {
    sconn *c = e->a;
    if (c->qhead) c->qhead->held = 0;
    conn_serve(w, c);
}

static void coord_reply(sim *w, void *tag, redisReply *r);

static void ev_reply(sim *w, ev *e) {
    sconn *c = e->a;
    if (c->state != C_READY || c->pend_head >= c->npend) return;
    pend p = c->pend[c->pend_head++];
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    if (!rd || redisReaderFeed(rd, e->data.p, e->data.len) != REDIS_OK ||
        redisReaderGetReply(rd, &reply) != REDIS_OK || !reply) {
        violation(w, "unparsable reply from %s", w->nodes[c->to].id);
        if (rd) redisReaderFree(rd);
        return;
    }
    redisReaderFree(rd);
    if (c->from < 0)
        coord_reply(w, p.tag, reply);
    else
        p.fn(c->arg, p.tag, reply);
    freeReplyObject(reply);
}

/* The connection breaks: both ends learn it (after a delay for the client). */
static void conn_down(sim *w, sconn *c, const char *why) {
    if (c->state != C_READY && c->state != C_CONNECTING) return;
    c->state = C_DOWN;
    snode *t = &w->nodes[c->to];
    if (t->up && t->inc == c->to_inc && !t->dying) move_engine_conn_gone(t->eng, c);
    conn_clear_queue(c);
    ev *e = ev_new(w, K_DOWN, w->now + net_delay(w), c->from, ev_down);
    if (c->from >= 0) e->inc = c->from_inc;
    e->a = c;
    kbuf_append(&e->data, why, strlen(why) + 1);
    schedule(w, e);
}

static void ev_down(sim *w, ev *e) {
    sconn *c = e->a;
    /* link_close runs no callback (move_env.h): the engine that closed this
     * link while its breakage was in flight may have freed the callbacks'
     * argument already. */
    if (c->from >= 0 && c->state == C_CLOSED) {
        c->pend_head = c->npend;
        return;
    }
    while (c->pend_head < c->npend) {
        pend p = c->pend[c->pend_head++];
        if (c->from < 0)
            coord_reply(w, p.tag, NULL);
        else
            p.fn(c->arg, p.tag, NULL);
    }
    if (c->from >= 0 && c->cbs) c->cbs->on_down(c->arg, e->data.p);
}

static void ev_ready(sim *w, ev *e) {
    sconn *c = e->a;
    if (c->state != C_CONNECTING) return;
    c->state = C_READY;
    if (c->from >= 0 && c->cbs) c->cbs->on_ready(c->arg);
    (void)w;
}

/* At the target: accept (the node is up) or refuse. */
static void ev_connect(sim *w, ev *e) {
    sconn *c = e->a;
    snode *t = &w->nodes[c->to];
    if (c->state != C_CONNECTING) return;
    if (!t->up || t->paused_until > w->now) {
        conn_down(w, c, "refused");
        return;
    }
    c->to_inc = t->inc;
    ev *r = ev_new(w, K_READY, w->now + net_delay(w), c->from, ev_ready);
    if (c->from >= 0) r->inc = c->from_inc;
    r->a = c;
    schedule(w, r);
}

static sconn *conn_open(sim *w, int from, int to) {
    sconn *c = calloc(1, sizeof *c);
    if (!c) abort();
    if (w->nconns == w->capconns) {
        w->capconns = w->capconns ? w->capconns * 2 : 64;
        w->conns = realloc(w->conns, w->capconns * sizeof *w->conns);
        if (!w->conns) abort();
    }
    w->conns[w->nconns++] = c;
    c->w = w, c->from = from, c->to = to;
    c->from_inc = from >= 0 ? w->nodes[from].inc : 0;
    c->to_inc = -1;
    c->state = C_CONNECTING;
    ev *e = ev_new(w, K_CONNECT, w->now + net_delay(w), -1, ev_connect);
    e->a = c;
    schedule(w, e);
    return c;
}

/* ---- The node's environment -------------------------------------------------------- */

static move_link *n_link_open(void *ctx, const char *host, int port, const char *peer_id,
                              const move_link_cbs *cbs, void *arg) {
    snode *n = ctx;
    sim *w = n->w;
    (void)host;
    int to = port - BASE_PORT;
    if (to < 0 || to >= w->n || strcmp(w->nodes[to].id, peer_id)) return NULL;
    sconn *c = conn_open(w, n->i, to);
    c->cbs = cbs, c->arg = arg;
    return c;
}

static int n_link_send(move_link *l, move_reply_fn fn, void *tag, int argc, const char **argv) {
    return l ? conn_send(l, fn, tag, argc, argv) : -1;
}

static void ev_server_close(sim *w, ev *e) {
    sconn *c = e->a;
    snode *t = &w->nodes[c->to];
    if (t->up && t->inc == c->to_inc) move_engine_conn_gone(t->eng, c);
    conn_clear_queue(c);
}

static void n_link_close(move_link *l) {
    if (!l) return;
    sim *w = l->w;
    int was = l->state;
    l->state = C_CLOSED;
    if (was == C_READY || was == C_CONNECTING) {
        ev *e = ev_new(w, K_SERVER_CLOSE, w->now + net_delay(w), l->to, ev_server_close);
        e->inc = l->to_inc;
        e->a = l;
        schedule(w, e);
    }
}

/* env->sync_wal: the fsync takes 0.2-5 ms, one in ten 20-150 ms (a busy
 * disk), and completes as an event of the node's incarnation: a crash
 * before it drops it. */
static void ev_walsync(sim *w, ev *e) {
    sim_sync *ss = e->a;
    snode *n = &w->nodes[e->node];
    if (ss->over) return;
    ss->over = 1;
    ss->done(ss->arg, store_sync_wal(n->st, NULL));
}

static int n_sync_wal(void *ctx, void (*done)(void *arg, int rc), void *arg) {
    snode *n = ctx;
    sim *w = n->w;
    sim_sync *ss = keep(w, sizeof *ss);
    ss->done = done, ss->arg = arg, ss->next = n->syncs;
    n->syncs = ss;
    uint64_t us = rnd_in(w, 0, 9) ? rnd_in(w, 200, 5000) : rnd_in(w, 20000, 150000);
    ev *e = ev_new(w, K_WALSYNC, w->now + us, n->i, ev_walsync);
    e->inc = n->inc;
    e->a = ss;
    schedule(w, e);
    return 0;
}

static void n_sync_wal_cancel(void *ctx, void *arg) {
    snode *n = ctx;
    for (sim_sync *ss = n->syncs; ss; ss = ss->next)
        if (ss->arg == arg) ss->over = 1;
}

static void coord_report(sim *w, ev *e);

static void n_report(void *ctx, int argc, const char **argv) {
    snode *n = ctx;
    sim *w = n->w;
    ev *e = ev_new(w, K_REPORT, w->now + net_delay(w), -1, coord_report);
    for (int i = 0; i < argc; i++)
        kbuf_append(&e->data, argv[i], strlen(argv[i]) + 1);
    e->u = (uint64_t)argc;
    e->u2 = (uint64_t)n->i;
    send_from(w, n->i, e);
}

static directive_verdict n_check_term(void *ctx, int from_coordinator, uint64_t term) {
    snode *n = ctx;
    return directive_admit_term(n->guard, from_coordinator, term);
}

/* node_install_map's contract: < 0 refused, 0 already had it, 1 installed. */
static int n_install_map(void *ctx, const char *json, size_t len, char *err, size_t cap) {
    snode *n = ctx;
    keel_map m;
    if (keel_map_parse_json(json, &m, err, cap)) return -1;
    if (m.version <= ptable_map(n->pt)->version) {
        keel_map_close(&m);
        return 0;
    }
    if (store_meta_put(n->st, "map", json, len)) {
        keel_map_close(&m);
        snprintf(err, cap, "cannot persist the map");
        return KEEL_EIO;
    }
    int rc = ptable_apply_map(n->pt, &m);
    if (rc) {
        keel_map_close(&m);
        snprintf(err, cap, "refused: %s", keel_strerror(rc));
        return rc;
    }
    move_map_changed(n->eng);
    return 1;
}

static void ev_resume_conn(sim *w, snode *n, sconn *c) {
    ev *e = ev_new(w, K_RESUME, w->now, n->i, ev_resume);
    e->a = c;
    schedule(w, e);
}

static void n_resume(void *ctx, void *conn) {
    snode *n = ctx;
    if (n->dying) return;
    ev_resume_conn(n->w, n, conn);
}

static void ev_held_rerun(sim *w, ev *e);

static void rerun_hold(snode *n, hold *h, int tryagain) {
    h->active = 0;
    ev *e = ev_new(n->w, K_HELD_RERUN, n->w->now, n->i, ev_held_rerun);
    e->u = (uint64_t)h->client;
    e->u2 = h->gen;
    e->a = tryagain ? (void *)1 : NULL;
    schedule(n->w, e);
}

static void n_release_held(void *ctx, long p, int tryagain) {
    snode *n = ctx;
    if (n->dying) return;
    for (hold *h = n->holds; h; h = h->next)
        if (h->active && (p < 0 || h->p == (unsigned)p)) rerun_hold(n, h, tryagain);
}

static void n_release_unfenced(void *ctx) {
    snode *n = ctx;
    if (n->dying) return;
    for (hold *h = n->holds; h; h = h->next)
        if (h->active && ptable_state(n->pt, h->p) != PART_FENCED) rerun_hold(n, h, 0);
}

/* ---- Node life ------------------------------------------------------------------- */

static int install_json(snode *n, const char *json, size_t len) {
    char err[200];
    return n_install_map(n, json, len, err, sizeof err);
}

static int node_start(sim *w, snode *n) {
    store_opts so;
    store_opts_default(&so);
    so.fsync = STORE_FSYNC_NO; /* a crash here is kill -9: the OS keeps what was written */
    so.cache_bytes = 1u << 20;
    so.write_buffer_bytes = 1u << 20;
    char err[256];
    if (store_open(n->dir, &so, &n->st, err, sizeof err)) {
        snprintf(w->r->what, sizeof w->r->what, "store_open %s: %s", n->dir, err);
        return -1;
    }
    n->pt = ptable_new(P, n->id);
    n->guard = directive_guard_new();
    move_env env = {
        .ctx = n, .st = n->st, .pt = n->pt, .self_id = n->id, .now_us = n_now_us,
        .timer_new = n_timer_new, .timer_start = n_timer_start, .timer_stop = n_timer_stop,
        .timer_free = n_timer_free, .link_open = n_link_open, .link_send = n_link_send,
        .link_close = n_link_close, .report = n_report, .check_term = n_check_term,
        .install_map = n_install_map, .resume = n_resume, .release_held = n_release_held,
        .release_unfenced = n_release_unfenced, .sync_wal = n_sync_wal,
        .sync_wal_cancel = n_sync_wal_cancel,
    };
    n->syncs = NULL;
    n->eng = move_engine_new(&env, w->o.node_mutations);
    if (!n->pt || !n->guard || !n->eng) {
        snprintf(w->r->what, sizeof w->r->what, "out of memory");
        return -1;
    }
    n->up = 1;
    char *js = NULL;
    size_t jl = 0;
    int rc = store_meta_get(n->st, "map", &js, &jl);
    if (rc == 0) {
        /* The persisted map, as the node's start-up reads it. */
        keel_map m;
        char perr[200];
        if (keel_map_parse_json(js, &m, perr, sizeof perr) || ptable_apply_map(n->pt, &m)) {
            free(js);
            snprintf(w->r->what, sizeof w->r->what, "%s: persisted map unreadable", n->id);
            return -1;
        }
        free(js);
    } else if (install_json(n, w->initial_json, strlen(w->initial_json)) < 0) {
        snprintf(w->r->what, sizeof w->r->what, "%s: cannot install the first map", n->id);
        return -1;
    }
    if (move_restore(n->eng)) {
        violation(w, "%s: move_restore failed", n->id);
        return 0;
    }
    if (store_sync(n->st, NULL)) violation(w, "%s: first sync failed", n->id);
    return 0;
}

static void node_crash(sim *w, snode *n, const char *why) {
    if (!n->up) return;
    trace(w, "%s CRASH (%s)", n->id, why);
    n->dying = 1;
    for (size_t i = 0; i < n->nout; i++)
        ev_free(n->out[i]); /* the turn's messages never leave */
    n->nout = 0;
    move_engine_free(n->eng);
    n->eng = NULL;
    n->up = 0;
    n->inc++;
    for (hold *h = n->holds, *nx; h; h = nx) {
        nx = h->next;
        free(h);
    }
    n->holds = NULL;
    /* Every connection to or from it breaks. */
    for (size_t k = 0; k < w->nconns; k++) {
        sconn *c = w->conns[k];
        if ((c->from == n->i && c->from_inc == n->inc - 1) ||
            (c->to == n->i && (c->to_inc == n->inc - 1 || c->state == C_CONNECTING)))
            conn_down(w, c, "node-crashed");
    }
    store_free(n->st);
    n->st = NULL;
    ptable_free(n->pt);
    n->pt = NULL;
    directive_guard_free(n->guard);
    n->guard = NULL;
    n->dying = 0;
    n->paused_until = 0;
    w->r->crashes++;
}

static void ev_restart(sim *w, ev *e) {
    snode *n = &w->nodes[e->u];
    if (n->up) return;
    trace(w, "%s RESTART", n->id);
    if (node_start(w, n)) violation(w, "restart failed: %s", w->r->what);
    w->r->restarts++;
}

/* The end of a node's turn: write it out, then let its messages go. */
static void node_turn_end(sim *w, snode *n) {
    if (!n->up) return;
    int arm = n->fail_next_sync && n->st;
    if (arm) {
        char err[64];
        (void)failpoint_set("store.turn_write", "error", err, sizeof err);
    }
    int rc = store_sync(n->st, NULL);
    if (arm) {
        char err[64];
        (void)failpoint_set("store.turn_write", "off", err, sizeof err);
        if (rc) n->fail_next_sync = 0;
    }
    if (rc) {
        node_crash(w, n, "turn write failed");
        w->r->disk_errors++;
        ev *e = ev_new(w, K_RESTART, w->now + rnd_in(w, 100000, 1000000), -1, ev_restart);
        e->u = (uint64_t)n->i;
        schedule(w, e);
        return;
    }
    for (size_t i = 0; i < n->nout; i++)
        schedule(w, n->out[i]);
    n->nout = 0;
}

/* ---- Clients ---------------------------------------------------------------------- */

static void ev_client_cmd(sim *w, ev *e);
static void ev_client_reply(sim *w, ev *e);
static void ev_client_timeout(sim *w, ev *e);
static void client_next(sim *w, sclient *cl);

enum { RP_OK, RP_VALUE, RP_NIL, RP_MOVED, RP_TRYAGAIN, RP_DOWN };

static void client_send(sim *w, sclient *cl) {
    cl->gen++;
    ev *e = ev_new(w, K_CLIENT_CMD, w->now + net_delay(w), cl->owner[keel_slot_partition(cl->slot, P)],
                   ev_client_cmd);
    e->u = (uint64_t)cl->id;
    e->u2 = cl->gen;
    schedule(w, e);
    ev *t = ev_new(w, K_CLIENT_TIMEOUT, w->now + CLIENT_TIMEOUT_MS * 1000ull, -1, ev_client_timeout);
    t->u = (uint64_t)cl->id;
    t->u2 = cl->gen;
    schedule(w, t);
}

static void node_reply_client(sim *w, snode *n, sclient *cl, uint64_t gen, int kind,
                              const char *data, size_t len) {
    ev *e = ev_new(w, K_CLIENT_REPLY, w->now + net_delay(w), -1, ev_client_reply);
    e->u = (uint64_t)cl->id;
    e->u2 = gen;
    e->a = (void *)(uintptr_t)kind;
    if (data) kbuf_append(&e->data, data, len);
    send_from(w, n->i, e);
}

/* hold_max_ms passed: -TRYAGAIN if still held; the entry goes. */
static void ev_hold_timeout(sim *w, ev *e) {
    hold *h = e->a;
    snode *n = &w->nodes[e->node];
    for (hold **pp = &n->holds; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            if (h->active) node_reply_client(w, n, &w->clients[h->client], h->gen, RP_TRYAGAIN, NULL, 0);
            free(h);
            return;
        }
}

/* A client command at node n: routed by the node's partition table, as
 * cmd.c routes it. */
static void node_client_cmd(sim *w, snode *n, sclient *cl, uint64_t gen) {
    route r;
    ptable_route(n->pt, cl->slot, &r);
    if (r.kind == ROUTE_HOLD) {
        hold *h = calloc(1, sizeof *h);
        h->client = cl->id, h->gen = gen, h->p = r.partition, h->active = 1;
        h->next = n->holds;
        n->holds = h;
        ev *t = ev_new(w, K_HOLD_TIMEOUT, w->now + HOLD_MAX_MS * 1000ull, n->i, ev_hold_timeout);
        t->a = h;
        schedule(w, t);
        return;
    }
    if (r.kind == ROUTE_MOVED) {
        char idx[8];
        int k = keel_map_find_node(ptable_map(n->pt), r.owner->id);
        snprintf(idx, sizeof idx, "%d", k);
        node_reply_client(w, n, cl, gen, RP_MOVED, idx, strlen(idx) + 1); /* with its NUL */
        return;
    }
    if (r.kind == ROUTE_DOWN) {
        node_reply_client(w, n, cl, gen, RP_DOWN, NULL, 0);
        return;
    }
    if (!cl->is_read) {
        store_txn *t = store_txn_begin(n->st);
        if (store_txn_put(t, cl->slot, cl->key, strlen(cl->key), STORE_T_STRING, 0, cl->val,
                          strlen(cl->val))) {
            store_txn_abort(t);
            node_reply_client(w, n, cl, gen, RP_DOWN, NULL, 0);
            return;
        }
        if (store_txn_commit(t)) violation(w, "%s: txn commit failed", n->id);
        node_reply_client(w, n, cl, gen, RP_OK, NULL, 0);
        return;
    }
    store_value v;
    int rc = store_get(n->st, cl->slot, cl->key, strlen(cl->key), 0, &v);
    if (rc == KEEL_ENOTFOUND) {
        node_reply_client(w, n, cl, gen, RP_NIL, NULL, 0);
    } else if (rc) {
        node_reply_client(w, n, cl, gen, RP_DOWN, NULL, 0);
    } else {
        node_reply_client(w, n, cl, gen, RP_VALUE, v.data, v.len);
        store_value_release(&v);
    }
}

static void ev_client_cmd(sim *w, ev *e) {
    sclient *cl = &w->clients[e->u];
    node_client_cmd(w, &w->nodes[e->node], cl, e->u2);
}

static void ev_held_rerun(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    sclient *cl = &w->clients[e->u];
    if (e->a)
        node_reply_client(w, n, cl, e->u2, RP_TRYAGAIN, NULL, 0);
    else
        node_client_cmd(w, n, cl, e->u2);
}

static void ev_client_next(sim *w, ev *e) {
    client_next(w, &w->clients[e->u]);
}

static void client_later(sim *w, sclient *cl, uint64_t us) {
    ev *e = ev_new(w, K_CLIENT_NEXT, w->now + us, -1, ev_client_next);
    e->u = (uint64_t)cl->id;
    schedule(w, e);
}

static void client_retry(sim *w, ev *e) {
    sclient *cl = &w->clients[e->u];
    if (cl->gen != e->u2) return;
    client_send(w, cl);
}

static void client_done(sim *w, sclient *cl) {
    cl->gen++; /* later replies and the timeout of this op are stale */
    client_later(w, cl, rnd_in(w, 0, 2000));
}

static void ev_client_reply(sim *w, ev *e) {
    sclient *cl = &w->clients[e->u];
    if (cl->gen != e->u2) return;
    int kind = (int)(uintptr_t)e->a;
    unsigned p = keel_slot_partition(cl->slot, P);
    switch (kind) {
    case RP_OK: {
        if (w->nacks == w->capacks) {
            w->capacks = w->capacks ? w->capacks * 2 : 4096;
            w->acks = realloc(w->acks, w->capacks * sizeof *w->acks);
            if (!w->acks) abort();
        }
        acked *a = &w->acks[w->nacks++];
        snprintf(a->key, sizeof a->key, "%s", cl->key);
        snprintf(a->val, sizeof a->val, "%s", cl->val);
        a->slot = cl->slot;
        w->r->writes_acked++;
        client_done(w, cl);
        return;
    }
    case RP_VALUE:
    case RP_NIL: {
        const acked *a = &w->acks[cl->want];
        if (kind == RP_NIL || e->data.len != strlen(a->val) || memcmp(e->data.p, a->val, e->data.len))
            violation(w, "I2: read of acknowledged key %s from %s returned %s (want %s)", a->key,
                      w->nodes[cl->owner[p]].id, kind == RP_NIL ? "nil" : "another value", a->val);
        w->r->reads_checked++;
        client_done(w, cl);
        return;
    }
    case RP_MOVED: {
        int k = atoi(e->data.p ? e->data.p : "-1");
        if (k >= 0 && k < w->n) cl->owner[p] = k;
        if (++cl->attempts > 20) {
            client_done(w, cl);
            return;
        }
        client_send(w, cl);
        return;
    }
    default: /* TRYAGAIN or unavailable: retry shortly, within limits */
        if (++cl->attempts > 20) {
            client_done(w, cl);
            return;
        }
        {
            ev *r = ev_new(w, K_CLIENT_NEXT, w->now + rnd_in(w, 5000, 30000), -1, client_retry);
            r->u = (uint64_t)cl->id;
            r->u2 = cl->gen;
            schedule(w, r);
        }
    }
}

static void ev_client_timeout(sim *w, ev *e) {
    sclient *cl = &w->clients[e->u];
    if (cl->gen != e->u2) return;
    client_done(w, cl); /* outcome unknown: a write is not acknowledged */
}

static void client_next(sim *w, sclient *cl) {
    if (w->stopping) return;
    cl->attempts = 0;
    cl->started = w->now;
    cl->is_read = w->nacks > 0 && chance(w, 400);
    if (cl->is_read) {
        cl->want = (long)(rnd(w) % w->nacks);
        snprintf(cl->key, sizeof cl->key, "%s", w->acks[cl->want].key);
    } else {
        cl->seq++;
        snprintf(cl->key, sizeof cl->key, "c%d-%llu", cl->id, (unsigned long long)cl->seq);
        snprintf(cl->val, sizeof cl->val, "v%d-%llu-%llu", cl->id, (unsigned long long)cl->seq,
                 (unsigned long long)(rnd(w) % 100000));
    }
    cl->slot = keel_key_slot(cl->key, strlen(cl->key));
    client_send(w, cl);
}

/* ---- The coordinator model --------------------------------------------------------- */

static const char *cm_name(int s) {
    static const char *n[] = {"PLANNED",   "COPYING", "CATCHING_UP", "FENCED",
                              "COMMITTED", "DONE",    "ABORTED",     "FORGOTTEN"};
    return n[s];
}

static void cm_set(sim *w, cmove *m, int state) {
    trace(w, "coord: move %llu p%u %s -> %s %s", (unsigned long long)m->id, m->p, cm_name(m->state),
          cm_name(state), m->why);
    m->state = state;
    m->state_at = m->progress_at = w->now;
    m->busy = 0;
}

static void cm_abort(sim *w, cmove *m, const char *why) {
    if (m->state >= CM_COMMITTED) return;
    snprintf(m->why, sizeof m->why, "%s", why);
    cm_set(w, m, CM_ABORTED);
}

static void coord_push_map(sim *w, int only);

static void cm_commit(sim *w, cmove *m) {
    w->map.owner[m->p] = m->to;
    w->map.epoch[m->p]++;
    w->map.version++;
    cm_set(w, m, CM_COMMITTED);
    coord_push_map(w, -1);
}

static int coord_send(sim *w, cmove *m, int node, int kind, int argc, const char **argv) {
    sconn *c = w->cconn[node];
    ctag *t = keep(w, sizeof *t);
    t->m = m, t->kind = kind, t->inc = w->coord_inc;
    if (!c || conn_send(c, NULL, t, argc, argv)) return -1;
    m->busy = 1;
    return 0;
}

enum { D_OUT, D_IN, D_FENCE, D_VERIFY, D_COMMIT_D, D_COMMIT_S, D_CLEANUP, D_ABORT_S, D_ABORT_D,
       D_RATE };

static int is_err(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR;
}

static void coord_reply(sim *w, void *tag, redisReply *r) {
    ctag *t = tag;
    cmove *m = t->m;
    if (t->inc != w->coord_inc) return; /* sent by a coordinator that has since restarted */
    m->busy = 0;
    if (!r) return; /* the connection broke: the step retries */
    switch (t->kind) {
    case D_OUT:
    case D_IN:
        if (m->state != CM_PLANNED) return;
        if (is_err(r)) {
            cm_abort(w, m, t->kind == D_OUT ? "out-refused" : "in-refused");
            return;
        }
        if (t->kind == D_OUT) m->out_ok = 1;
        else {
            m->in_ok = 1;
            cm_set(w, m, CM_COPYING);
        }
        return;
    case D_FENCE:
        if (m->state != CM_FENCED) return;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
            cm_abort(w, m, "fence-failed");
            return;
        }
        m->f = r->element[0]->integer, m->dg = r->element[1]->integer;
        m->keys = r->element[2]->integer;
        m->have_fence = 1;
        if (w->o.coord_mutations & SIM_MUT_COMMIT_UNVERIFIED) cm_commit(w, m);
        return;
    case D_VERIFY:
        if (m->state != CM_FENCED) return;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            cm_abort(w, m, "verify-failed");
            return;
        }
        if (r->element[0]->integer != m->dg || r->element[1]->integer != m->keys) {
            cm_abort(w, m, "checksum-mismatch");
            return;
        }
        cm_commit(w, m);
        return;
    case D_COMMIT_D:
    case D_COMMIT_S:
    case D_CLEANUP:
        if (m->state != CM_COMMITTED || is_err(r)) return;
        if (t->kind == D_COMMIT_D) m->commit_d = 1;
        else if (t->kind == D_COMMIT_S) m->commit_s = 1;
        else cm_set(w, m, CM_DONE), w->r->moves_done++;
        return;
    case D_RATE:
        return;
    case D_ABORT_S:
    case D_ABORT_D:
        if (m->state != CM_ABORTED) return;
        if (is_err(r)) {
            /* "committed here; it cannot abort" would be a protocol error */
            violation(w, "ABORT of move %llu refused: %s", (unsigned long long)m->id, r->str);
            return;
        }
        if (t->kind == D_ABORT_S) m->abort_s = 1;
        else m->abort_d = 1;
        if (m->abort_s && m->abort_d) cm_set(w, m, CM_FORGOTTEN), w->r->moves_aborted++;
        return;
    }
}

static void coord_report(sim *w, ev *e) {
    if (w->now < w->coord_down_until) return; /* nobody listens */
    const char *argv[9] = {0};
    const char *p = e->data.p;
    int argc = (int)e->u;
    for (int i = 0; i < argc && i < 9; i++, p += strlen(p) + 1)
        argv[i] = p;
    if (argc < 9) return;
    uint64_t id = strtoull(argv[1], NULL, 10);
    cmove *m = w->moves;
    while (m && m->id != id)
        m = m->next;
    if (!m || (int)e->u2 != m->to || m->state < CM_COPYING || m->state > CM_CATCHUP) return;
    const char *phase = argv[2];
    long long lag = atoll(argv[5]);
    m->progress_at = w->now;
    if (!strcmp(phase, "failed") || !strcmp(phase, "non-converging")) {
        cm_abort(w, m, argv[8][0] ? argv[8] : phase);
    } else if (!strcmp(phase, "caught-up") ||
               (!strcmp(phase, "catching-up") && lag >= 0 && lag <= FENCE_LAG)) {
        cm_set(w, m, CM_FENCED);
    } else if (!strcmp(phase, "catching-up") && m->state == CM_COPYING) {
        cm_set(w, m, CM_CATCHUP);
    }
}

static void ev_map(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    if (install_json(n, e->data.p, e->data.len) < 0) violation(w, "%s refused the map", n->id);
}

static void coord_push_map(sim *w, int only) {
    kbuf js;
    kbuf_init(&js);
    keel_map_write_json(&w->map, 1, &js);
    for (int i = 0; i < w->n; i++) {
        if (only >= 0 && i != only) continue;
        ev *e = ev_new(w, K_MAP, w->now + net_delay(w), i, ev_map);
        kbuf_append(&e->data, js.p, js.len);
        kbuf_append(&e->data, "", 1);
        e->data.len--;
        schedule(w, e);
    }
    kbuf_close(&js);
}

static int conn_up(sim *w, int i) {
    return w->cconn[i] && w->cconn[i]->state == C_READY;
}

static void num(char *b, uint64_t v) {
    snprintf(b, 24, "%llu", (unsigned long long)v);
}

static void cm_step(sim *w, cmove *m) {
    char id[24], p[24], e[24], port[24], rate[24], lag[24], f[24];
    num(id, m->id), num(p, m->p), num(e, m->epoch), num(port, BASE_PORT + (uint64_t)m->from);
    num(rate, RATE), num(lag, FENCE_LAG), num(f, (uint64_t)m->f);
    const char *S = w->nodes[m->from].id, *D = w->nodes[m->to].id;
    uint64_t idle = w->now - m->progress_at;
    if (m->busy) return;
    switch (m->state) {
    case CM_PLANNED:
        if (!conn_up(w, m->from) || !conn_up(w, m->to)) {
            if (w->now - m->state_at > STALL_MS * 1000ull) cm_abort(w, m, "node-unavailable");
            return;
        }
        if (!m->out_ok) {
            const char *a[] = {"KEEL.MOVE.OUT", "1", id, p, e, D, rate};
            coord_send(w, m, m->from, D_OUT, 7, a);
        } else {
            const char *a[] = {"KEEL.MOVE.IN", "1", id, p, e, S, "sim", port, lag};
            coord_send(w, m, m->to, D_IN, 9, a);
        }
        return;
    case CM_COPYING:
    case CM_CATCHUP:
        if (idle > STALL_MS * 1000ull) {
            cm_abort(w, m, "stalled");
        } else if (chance(w, 20)) { /* the budget changes (KEEL.MOVE.RATE) */
            char r2[24];
            num(r2, rnd_in(w, RATE / 4, RATE * 4));
            const char *a[] = {"KEEL.MOVE.RATE", "1", id, r2};
            if (coord_send(w, m, m->from, D_RATE, 4, a) == 0) m->busy = 0; /* fire and forget */
        }
        return;
    case CM_FENCED:
        if (w->now - m->state_at > FENCE_TIMEOUT_MS * 1000ull) {
            cm_abort(w, m, "fence-timeout");
            return;
        }
        if (!m->have_fence) {
            const char *a[] = {"KEEL.MOVE.FENCE", "1", id};
            coord_send(w, m, m->from, D_FENCE, 3, a);
        } else {
            const char *a[] = {"KEEL.MOVE.VERIFY", "1", id, f};
            coord_send(w, m, m->to, D_VERIFY, 4, a);
        }
        return;
    case CM_COMMITTED: {
        kbuf js;
        kbuf_init(&js);
        keel_map_write_json(&w->map, 1, &js);
        kbuf_append(&js, "", 1);
        if (!m->commit_d) {
            const char *a[] = {"KEEL.MOVE.COMMIT", "1", id, js.p};
            coord_send(w, m, m->to, D_COMMIT_D, 4, a);
        } else if (!m->commit_s) {
            const char *a[] = {"KEEL.MOVE.COMMIT", "1", id, js.p};
            coord_send(w, m, m->from, D_COMMIT_S, 4, a);
        } else {
            const char *a[] = {"KEEL.MOVE.CLEANUP", "1", id, p};
            coord_send(w, m, m->from, D_CLEANUP, 4, a);
        }
        kbuf_close(&js);
        return;
    }
    case CM_ABORTED:
        if (!m->abort_s) {
            const char *a[] = {"KEEL.MOVE.ABORT", "1", id, p};
            coord_send(w, m, m->from, D_ABORT_S, 4, a);
        } else if (!m->abort_d) {
            const char *a[] = {"KEEL.MOVE.ABORT", "1", id, p};
            coord_send(w, m, m->to, D_ABORT_D, 4, a);
        }
        return;
    default:
        return;
    }
}

static int active_moves(sim *w, unsigned *busy_p) {
    int n = 0;
    for (cmove *m = w->moves; m; m = m->next)
        if (m->state < CM_DONE || m->state == CM_ABORTED) {
            n++;
            if (busy_p) busy_p[m->p] = 1;
        }
    return n;
}

/* The coordinator process restarts: its links and in-memory halves of
 * moves are gone; the durable states stay. As coord_move.c does at start,
 * every move not yet COMMITTED aborts (coordinator-restart). */
static void coord_crash(sim *w) {
    w->coord_inc++; /* replies to the old process are lost */
    trace(w, "coord: CRASH");
    for (int i = 0; i < w->n; i++)
        if (w->cconn[i]) conn_down(w, w->cconn[i], "coordinator-crashed");
}

static void coord_restart(sim *w) {
    trace(w, "coord: RESTART");
    for (cmove *m = w->moves; m; m = m->next) {
        m->busy = 0;
        if (m->state < CM_COMMITTED) cm_abort(w, m, "coordinator-restart");
        if (m->state == CM_COMMITTED) m->commit_d = m->commit_s = 0;
        if (m->state == CM_ABORTED) m->abort_s = m->abort_d = 0;
    }
}

static void coord_tick(sim *w, ev *e) {
    (void)e;
    if (w->now < w->coord_down_until) {
        ev *t = ev_new(w, K_COORD_TICK, w->coord_down_until, -1, coord_tick);
        schedule(w, t);
        return;
    }
    if (w->coord_down_until && w->coord_down_until <= w->now) {
        w->coord_down_until = 0;
        coord_restart(w);
    }
    /* (Re)connect to every node. */
    for (int i = 0; i < w->n; i++)
        if (!w->cconn[i] || w->cconn[i]->state >= C_DOWN) w->cconn[i] = conn_open(w, -1, i);
    for (cmove *m = w->moves; m; m = m->next) {
        if ((m->state == CM_COPYING || m->state == CM_CATCHUP || m->state == CM_PLANNED) &&
            chance(w, 2)) /* an operator's cancel */
            cm_abort(w, m, "cancelled");
        cm_step(w, m);
    }
    /* New moves, while the run lasts. */
    unsigned busy[P] = {0};
    if (w->now < w->fault_end + 1000000 && active_moves(w, busy) < 2 && chance(w, 80)) {
        unsigned p = (unsigned)(rnd(w) % P);
        int from = w->map.owner[p];
        int to = (int)((unsigned)(from + 1 + (int)(rnd(w) % (uint64_t)(w->n - 1))) % (unsigned)w->n);
        if (!busy[p]) {
            cmove *m = keep(w, sizeof *m);
            m->id = ++w->next_move, m->p = p, m->from = from, m->to = to;
            m->epoch = w->map.epoch[p];
            m->created = m->state_at = m->progress_at = w->now;
            m->next = w->moves;
            w->moves = m;
            w->r->moves_started++;
            trace(w, "coord: move %llu p%u %s -> %s planned", (unsigned long long)m->id, p,
                  w->nodes[from].id, w->nodes[to].id);
        }
    }
    if (w->now / 1000 % 500 < TICK_MS) coord_push_map(w, -1); /* the heartbeat's map */
    ev *t = ev_new(w, K_COORD_TICK, w->now + TICK_MS * 1000ull, -1, coord_tick);
    schedule(w, t);
}

/* ---- Faults ------------------------------------------------------------------------ */

static int nodes_down(sim *w) {
    int d = 0;
    for (int i = 0; i < w->n; i++)
        d += !w->nodes[i].up;
    return d;
}

static void ev_fault(sim *w, ev *e) {
    (void)e;
    if (w->now >= w->fault_end) return;
    snode *n = &w->nodes[rnd(w) % (uint64_t)w->n];
    switch (rnd(w) % 8) {
    case 0:
        w->slow_until = w->now + rnd_in(w, 100000, 1000000);
        break;
    case 1:
    case 2: { /* drop a live connection: a D link or a coordinator one */
        sconn *pick = NULL;
        uint64_t seen = 0;
        for (size_t k = 0; k < w->nconns; k++)
            if (w->conns[k]->state == C_READY && rnd(w) % ++seen == 0) pick = w->conns[k];
        if (pick) {
            trace(w, "fault: drop the link %s -> %s", peer_name(w, pick), w->nodes[pick->to].id);
            conn_down(w, pick, "dropped");
            w->r->drops++;
        }
        break;
    }
    case 3:
        /* Half the time at the worst moment: a node in the middle of a move. */
        if (chance(w, 500))
            for (int i = 0; i < w->n; i++) {
                snode *x = &w->nodes[(n->i + i) % w->n];
                int busy = 0;
                for (unsigned p = 0; x->up && p < P && !busy; p++)
                    busy = ptable_state(x->pt, p) >= PART_OUTGOING &&
                           ptable_state(x->pt, p) <= PART_INCOMING;
                if (busy) {
                    n = x;
                    break;
                }
            }
        if (n->up && nodes_down(w) == 0) {
            node_crash(w, n, "fault");
            ev *r = ev_new(w, K_RESTART, w->now + rnd_in(w, 50000, 2000000), -1, ev_restart);
            r->u = (uint64_t)n->i;
            schedule(w, r);
        }
        break;
    case 4:
        if (n->up && n->paused_until < w->now) {
            n->paused_until = w->now + rnd_in(w, 50000, 1500000);
            trace(w, "fault: pause %s", n->id);
            w->r->pauses++;
        }
        break;
    case 5:
        n->clock_off += (int64_t)rnd_in(w, 500000, 5000000);
        trace(w, "fault: clock step on %s", n->id);
        w->r->clock_steps++;
        break;
    case 6:
        if (n->up && nodes_down(w) == 0) n->fail_next_sync = 1;
        break;
    default:
        if (chance(w, 300) && !w->coord_down_until) {
            w->coord_down_until = w->now + rnd_in(w, 100000, 1500000);
            coord_crash(w);
            w->r->coord_restarts++;
        }
        break;
    }
    w->r->faults++;
    ev *nx = ev_new(w, K_FAULT, w->now + rnd_in(w, 20000, 500000), -1, ev_fault);
    schedule(w, nx);
}

/* ---- Invariants ------------------------------------------------------------------- */

static void check(sim *w) {
    for (unsigned p = 0; p < P; p++) {
        int serving = 0;
        char who[64] = "";
        for (int i = 0; i < w->n; i++) {
            snode *n = &w->nodes[i];
            if (!n->up) continue;
            part_state s = ptable_state(n->pt, p);
            if (s == PART_SERVING || s == PART_OUTGOING) {
                serving++;
                size_t l = strlen(who);
                snprintf(who + l, sizeof who - l, " %s(%s)", n->id, part_state_name(s));
            }
        }
        if (serving > 1) violation(w, "I1: partition %u served by%s", p, who);
    }
    for (int i = 0; i < w->n; i++) {
        snode *n = &w->nodes[i];
        if (!n->up) continue;
        const keel_map *m = ptable_map(n->pt);
        if (m->version < n->seen_version)
            violation(w, "I3: %s map version went from %llu to %llu", n->id,
                      (unsigned long long)n->seen_version, (unsigned long long)m->version);
        n->seen_version = m->version;
        for (unsigned p = 0; p < P; p++) {
            if (m->epoch[p] < n->seen_epoch[p])
                violation(w, "I3: %s epoch of partition %u went down", n->id, p);
            n->seen_epoch[p] = m->epoch[p];
        }
    }
}

/* After the run: every acknowledged key is on the node the final map names. */
static void check_final(sim *w) {
    for (size_t k = 0; k < w->nacks && !w->r->violation; k++) {
        const acked *a = &w->acks[k];
        unsigned p = keel_slot_partition(a->slot, P);
        snode *n = &w->nodes[w->map.owner[p]];
        if (!n->up) {
            violation(w, "L: owner %s of partition %u is down at the end", n->id, p);
            return;
        }
        store_value v;
        int rc = store_get(n->st, a->slot, a->key, strlen(a->key), 0, &v);
        if (rc) {
            violation(w, "I2: acknowledged key %s (partition %u) missing on its owner %s", a->key, p,
                      n->id);
            return;
        }
        int same = v.len == strlen(a->val) && !memcmp(v.data, a->val, v.len);
        store_value_release(&v);
        if (!same) violation(w, "I2: acknowledged key %s has another value on %s", a->key, n->id);
    }
}

/* ---- The run ----------------------------------------------------------------------- */

static void rm_rf(const char *dir) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
    }
}

static int preload(sim *w) {
    for (int k = 0; k < PRELOAD; k++) {
        acked a;
        snprintf(a.key, sizeof a.key, "pre-%d", k);
        snprintf(a.val, sizeof a.val, "p%d-%llu", k, (unsigned long long)(rnd(w) % 1000000));
        a.slot = keel_key_slot(a.key, strlen(a.key));
        snode *n = &w->nodes[w->map.owner[keel_slot_partition(a.slot, P)]];
        store_txn *t = store_txn_begin(n->st);
        if (store_txn_put(t, a.slot, a.key, strlen(a.key), STORE_T_STRING, 0, a.val,
                          strlen(a.val)) ||
            store_txn_commit(t))
            return -1;
        if (w->nacks == w->capacks) {
            w->capacks = w->capacks ? w->capacks * 2 : 4096;
            w->acks = realloc(w->acks, w->capacks * sizeof *w->acks);
            if (!w->acks) abort();
        }
        w->acks[w->nacks++] = a;
    }
    for (int i = 0; i < w->n; i++)
        if (store_sync(w->nodes[i].st, NULL)) return -1;
    return 0;
}

static int settled(sim *w) {
    return active_moves(w, NULL) == 0;
}

int movesim_run(const movesim_opts *o, movesim_result *r) {
    memset(r, 0, sizeof *r);
    sim *w = calloc(1, sizeof *w);
    if (!w) return -1;
    w->o = *o;
    w->r = r;
    w->rng = o->seed * 0x2545f4914f6cdd1dull + 1;
    w->n = o->nodes ? o->nodes : 3 + (int)(rnd(w) % 5);
    if (w->n < 3) w->n = 3;
    if (w->n > MAXN) w->n = MAXN;
    /* Faults (unless no_faults) and new moves until fault_end. */
    w->fault_end = (o->fault_ms ? o->fault_ms : 6000) * 1000ull;
    w->end = w->fault_end + SETTLE_MS * 1000ull;
    /* Stores in memory when the machine has /dev/shm: the run is CPU-bound then. */
    const char *base = o->dir                       ? o->dir
                       : access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                       : getenv("TMPDIR")              ? getenv("TMPDIR")
                                                       : "/tmp";
    char root[256];
    snprintf(root, sizeof root, "%s/movesim-%d-%llu", base, (int)getpid(),
             (unsigned long long)o->seed);
    rm_rf(root);
    mkdir(root, 0700);
    int rc = 0;
    if (keel_map_init(&w->map, P)) {
        free(w);
        return -1;
    }
    w->map.version = 1;
    for (int i = 0; i < w->n; i++) {
        snode *n = &w->nodes[i];
        n->w = w, n->i = i;
        snprintf(n->id, sizeof n->id, "n%d", i + 1);
        snprintf(n->dir, sizeof n->dir, "%s/%s", root, n->id);
        n->rate_ppm = 1000000 - 20000 + rnd(w) % 40001; /* skew: +-2% */
        keel_map_add_node(&w->map, n->id, "sim", BASE_PORT + i);
    }
    for (unsigned p = 0; p < P; p++)
        w->map.owner[p] = (int32_t)(p % (unsigned)w->n), w->map.epoch[p] = 1;
    kbuf js;
    kbuf_init(&js);
    keel_map_write_json(&w->map, 1, &js);
    kbuf_append(&js, "", 1);
    w->initial_json = strdup(js.p);
    kbuf_close(&js);
    for (int i = 0; i < w->n && !rc; i++)
        rc = node_start(w, &w->nodes[i]);
    if (!rc && preload(w)) {
        snprintf(r->what, sizeof r->what, "preload failed");
        rc = -1;
    }
    if (!rc) {
        for (int c = 0; c < CLIENTS; c++) {
            sclient *cl = &w->clients[c];
            cl->id = c;
            for (unsigned p = 0; p < P; p++)
                cl->owner[p] = w->map.owner[p];
            client_later(w, cl, rnd_in(w, 0, 5000));
        }
        schedule(w, ev_new(w, K_COORD_TICK, 0, -1, coord_tick));
        if (!o->no_faults) schedule(w, ev_new(w, K_FAULT, 200000, -1, ev_fault));
        uint64_t h = 1469598103934665603ull;
        for (ev *e; !r->violation && (e = heap_pop(w));) {
            if (e->at > w->end) {
                ev_free(e);
                break;
            }
            w->now = e->at;
            snode *n = e->node >= 0 ? &w->nodes[e->node] : NULL;
            if (n && (!n->up || (e->inc >= 0 && e->inc != n->inc))) {
                ev_free(e); /* for an incarnation that is gone */
                continue;
            }
            if (n && n->paused_until > w->now) { /* a paused node runs nothing */
                e->at = n->paused_until;
                schedule(w, e);
                continue;
            }
            if (w->o.verbose > 1) trace(w, "event %d node %d", e->kind, e->node);
            e->fn(w, e);
            if (n) node_turn_end(w, n);
            h = (h ^ (uint64_t)e->kind) * 1099511628211ull;
            h = (h ^ (uint64_t)(e->node + 1)) * 1099511628211ull;
            h = (h ^ e->at) * 1099511628211ull;
            r->events++;
            ev_free(e);
            check(w);
            if (w->now > w->fault_end + 1500000 && settled(w) && !nodes_down(w)) break;
        }
        r->trace = h;
        r->sim_ms = w->now / 1000;
        if (!r->violation && !settled(w)) {
            for (cmove *m = w->moves; m; m = m->next)
                if (m->state < CM_DONE || m->state == CM_ABORTED) {
                    violation(w, "L: move %llu of partition %u still %s %.0f s after the faults",
                              (unsigned long long)m->id, m->p, cm_name(m->state),
                              (w->now - w->fault_end) / 1e6);
                    break;
                }
        }
        w->stopping = 1;
        if (!r->violation) check_final(w);
    }
    unsigned crashes = r->crashes;
    for (int i = 0; i < w->n; i++)
        node_crash(w, &w->nodes[i], "end"); /* frees; not a fault */
    r->crashes = crashes;
    for (ev *e; (e = heap_pop(w));)
        ev_free(e);
    for (size_t k = 0; k < w->nconns; k++) {
        conn_clear_queue(w->conns[k]);
        free(w->conns[k]->pend);
        free(w->conns[k]);
    }
    free(w->conns);
    for (size_t k = 0; k < w->nkeep; k++)
        free(w->keep[k]);
    free(w->keep);
    simkit_queue_free(&w->q);
    free(w->acks);
    free(w->initial_json);
    for (int i = 0; i < w->n; i++)
        free(w->nodes[i].out);
    keel_map_close(&w->map);
    rm_rf(root);
    free(w);
    return rc ? -1 : 0;
}
