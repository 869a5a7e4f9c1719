/* move_uv.c - the production binding of the move engines (move.h): the
 * environment of move_env.h over libuv timers, peerlink connections, the
 * coordinator link, the held-request queue (holdq.h) and the node's map
 * install; and the node's side of peer commands (KEEL.AUTH, connection
 * state, the hold of fenced requests).
 *
 * The engines themselves (move.c, move_src.c, move_dst.c) never see a libuv
 * handle, a socket or a clock; the simulator (tests/sim) binds the same
 * environment to simulated ones.
 */
#include "node/move.h"
#include "core/clock.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "net/peerlink.h"
#include "node/cluster.h"
#include "node/coordlink.h"
#include "node/rep_uv.h"
#include "node/walsync.h"
#include "resp/resp.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The environment's context: what the binding adds to the engine. */
typedef struct node_moves {
    server *s;
    peerauth_secret secret;
    holdq hq; /* requests for fenced partitions */
    moves *eng;
} node_moves;

static node_moves *nm_of(const moves *mv) {
    return move_engine_env(mv)->ctx;
}

/* ---- Time and timers ------------------------------------------------------ */

/* A timer started with (0, 0) runs from an idle handle instead, at most
 * once per loop iteration: one started from its own callback runs in the
 * next iteration, after that iteration's poll. libuv 1.44 runs a 0 ms timer
 * started from a timer callback again in the same timers phase, so a chain
 * of 0 ms timers (move_dst.c's apply slices) would never yield the loop. */
struct move_timer {
    uv_timer_t t;
    uv_idle_t idle;
    int open; /* handles not yet closed */
    move_timer_fn fn;
    void *arg;
};

static uint64_t e_now_us(void *ctx) {
    (void)ctx;
    return keel_mono_us();
}

static void on_uv_timer(uv_timer_t *t) {
    move_timer *mt = t->data;
    mt->fn(mt->arg);
}

static void on_uv_idle(uv_idle_t *h) {
    move_timer *mt = h->data;
    uv_idle_stop(h);
    mt->fn(mt->arg);
}

static move_timer *e_timer_new(void *ctx, move_timer_fn fn, void *arg) {
    node_moves *nm = ctx;
    move_timer *mt = calloc(1, sizeof *mt);
    if (!mt) return NULL;
    mt->fn = fn, mt->arg = arg;
    uv_timer_init(nm->s->loop, &mt->t);
    uv_idle_init(nm->s->loop, &mt->idle);
    mt->t.data = mt->idle.data = mt;
    mt->open = 2;
    return mt;
}

static void e_timer_start(move_timer *mt, uint64_t after_ms, uint64_t repeat_ms) {
    if (after_ms == 0 && repeat_ms == 0) {
        uv_timer_stop(&mt->t);
        uv_idle_start(&mt->idle, on_uv_idle);
        return;
    }
    uv_idle_stop(&mt->idle);
    uv_timer_start(&mt->t, on_uv_timer, after_ms, repeat_ms);
}

static void e_timer_stop(move_timer *mt) {
    uv_timer_stop(&mt->t);
    uv_idle_stop(&mt->idle);
}

static void timer_closed(uv_handle_t *h) {
    move_timer *mt = h->data;
    if (--mt->open == 0) free(mt);
}

static void e_timer_free(move_timer *mt) {
    if (!mt) return;
    e_timer_stop(mt);
    uv_close((uv_handle_t *)&mt->t, timer_closed);
    uv_close((uv_handle_t *)&mt->idle, timer_closed);
}

/* ---- Links to sources ------------------------------------------------------ */

struct move_link {
    peerlink *pl;
    const move_link_cbs *cbs;
    void *arg;
};

static void on_pl_ready(void *arg, peerlink *l) {
    (void)l;
    move_link *ml = arg;
    ml->cbs->on_ready(ml->arg);
}

static void on_pl_down(void *arg, peerlink *l, const char *why) {
    (void)l;
    move_link *ml = arg;
    ml->cbs->on_down(ml->arg, why);
}

static move_link *e_link_open(void *ctx, const char *host, int port, const char *peer_id,
                              const move_link_cbs *cbs, void *arg) {
    node_moves *nm = ctx;
    move_link *ml = calloc(1, sizeof *ml);
    if (!ml) return NULL;
    ml->cbs = cbs, ml->arg = arg;
    static const peerlink_cbs plcbs = {.on_ready = on_pl_ready, .on_down = on_pl_down};
    ml->pl =
        peerlink_open(nm->s->loop, host, port, nm->s->cfg.id, peer_id, &nm->secret, &plcbs, ml);
    if (!ml->pl) {
        free(ml);
        return NULL;
    }
    return ml;
}

static int e_link_send(move_link *ml, move_reply_fn fn, void *tag, int argc, const char **argv) {
    if (!ml) return -1;
    return peerlink_send(ml->pl, fn, tag, argc, argv, NULL) ? -1 : 0;
}

static void e_link_close(move_link *ml) {
    if (!ml) return;
    peerlink_close(ml->pl); /* its callbacks never run again */
    free(ml);
}

/* ---- The coordinator, the map and held requests ----------------------------- */

static void e_report(void *ctx, int argc, const char **argv) {
    node_moves *nm = ctx;
    if (nm->s->link) coordlink_send(nm->s->link, argc, argv, NULL);
}

static directive_verdict e_check_term(void *ctx, int from_coordinator, uint64_t term) {
    node_moves *nm = ctx;
    return coordlink_check_term(nm->s->link, from_coordinator, term);
}

static int e_install_map(void *ctx, const char *json, size_t len, char *err, size_t cap) {
    node_moves *nm = ctx;
    return node_install_map(nm->s, json, len, err, cap);
}

static void e_resume(void *ctx, void *conn) {
    (void)ctx;
    holdq_resume(conn);
}

static void e_release_held(void *ctx, long p, int tryagain) {
    node_moves *nm = ctx;
    holdq_release(&nm->hq, p, tryagain);
}

static int still_fenced(unsigned p, void *pt) {
    return ptable_state(pt, p) == PART_FENCED;
}

static int e_sync_wal(void *ctx, void (*done)(void *arg, int rc), void *arg) {
    node_moves *nm = ctx;
    return walsync_request(nm->s->wsync, done, arg);
}

static void e_sync_wal_cancel(void *ctx, void *arg) {
    node_moves *nm = ctx;
    walsync_cancel(nm->s->wsync, arg);
}

static void e_release_unfenced(void *ctx) {
    node_moves *nm = ctx;
    for (long p; (p = holdq_find_unfenced(&nm->hq, still_fenced, nm->s->pt)) >= 0;)
        holdq_release(&nm->hq, p, 0);
}

/* ---- move.h ---------------------------------------------------------------- */

node_conn *node_conn_of(client *c) {
    if (!c->user) {
        node_conn *nc = calloc(1, sizeof *nc);
        if (!nc) return NULL;
        nc->c = c;
        c->user = nc;
    }
    return c->user;
}

int move_hold(moves *mv, client *c, unsigned p) {
    return holdq_hold(&nm_of(mv)->hq, c, p);
}

int move_dispatch(moves *mv, client *c, int argc, char **argv, const size_t *len) {
    if (!mv) { /* not in a coordinated cluster: no peers at all */
        keel_log(KEEL_LOG_WARN, "peer_command_refused", "addr=%s reason=no-cluster", c->addr);
        resp_w_error(&c->out, PEERSERVE_NOPERM);
        return 0;
    }
    node_moves *nm = nm_of(mv);
    node_conn *nc = node_conn_of(c);
    if (!nc) {
        resp_w_error(&c->out, "ERR out of memory");
        return 0;
    }
    if (!strcasecmp(argv[0], "keel.auth")) {
        peerserve_auth(&nc->peer, c, nm->s->cfg.id, &nm->secret, nm->s->coord_pub, argc, argv, len);
        return 0;
    }
    const char *peer = peerserve_peer(&nc->peer);
    if (!peer) {
        keel_log(KEEL_LOG_WARN, "peer_command_refused", "addr=%s reason=unauthenticated", c->addr);
        resp_w_error(&c->out, PEERSERVE_NOPERM);
        return 0;
    }
    if (!strncasecmp(argv[0], "keel.rep.", 9)) { /* replication (rep_uv.h) */
        if (!nm->s->rep) {
            resp_w_error(&c->out, "ERR replication is not running");
            return 0;
        }
        if (!strcasecmp(argv[0], "keel.rep.resign")) { /* a directive: the coordinator only */
            if (strcmp(peer, COORDINATOR_ID) == 0)
                return node_rep_resign(nm->s->rep, c, argc, argv, len) ? RSERVER_HOLD : 0;
            resp_w_error(&c->out, "ERR KEEL.REP.RESIGN is the coordinator's");
            return 0;
        }
        if (!strcasecmp(argv[0], "keel.rep.nudge")) { /* the coordinator: heartbeat now */
            if (strcmp(peer, COORDINATOR_ID) != 0) {
                resp_w_error(&c->out, "ERR KEEL.REP.NUDGE is the coordinator's");
                return 0;
            }
            coordlink_heartbeat_now(nm->s->link);
            resp_w_simple(&c->out, "OK");
            return 0;
        }
        /* rep_uv.c on_link_ready. Failpoint rep.oneway (error): answer as a
         * version before ONEWAY did; rep.olds (error): as one before olds,
         * which ignored the argument (test_rep_oneway). */
        if (!strcasecmp(argv[0], "keel.rep.oneway") && FAILPOINT("rep.oneway") != FP_ERROR) {
            nc->rep_oneway = 1; /* from the next request on: this +OK leaves */
            int olds =
                argc == 2 && !strcasecmp(argv[1], "olds") && FAILPOINT("rep.olds") != FP_ERROR;
            resp_w_simple(&c->out, olds ? "OK OLDS" : "OK");
            return 0;
        }
        /* On a one-way connection cmd_dispatch drops what this answers. */
        node_rep_peer_command(nm->s->rep, c->id, peer, argc, argv, len, &c->out);
        return 0;
    }
    move_call call = {
        .conn = c, .out = &c->out, .proto = c->proto, .peer = peer, .waits_data = &nc->waits_data};
    return move_engine_call(mv, &call, argc, argv, len) == MOVE_HELD ? RSERVER_HOLD : 0;
}

void move_conn_closed(moves *mv, client *c) {
    node_conn *nc = c->user;
    if (!nc) return;
    if (mv) {
        holdq_unlink(&nm_of(mv)->hq, nc);
        move_engine_conn_gone(mv, c);
    }
    peerserve_close(&nc->peer, c);
    free(nc);
    c->user = NULL;
}

void move_get_stats(const moves *mv, move_stats *out) {
    memset(out, 0, sizeof *out);
    if (!mv) return;
    move_engine_stats(mv, out);
    const node_moves *nm = nm_of(mv);
    out->held = nm->hq.held;
    out->held_total = nm->hq.held_total;
    out->tryagain_total = nm->hq.tryagain_total;
}

moves *moves_new(server *s, const peerauth_secret *secret, int hold_max_ms) {
    node_moves *nm = calloc(1, sizeof *nm);
    if (!nm) return NULL;
    nm->s = s;
    nm->secret = *secret;
    move_env env = {
        .ctx = nm,
        .st = s->st,
        .pt = s->pt,
        .self_id = s->cfg.id,
        .now_us = e_now_us,
        .timer_new = e_timer_new,
        .timer_start = e_timer_start,
        .timer_stop = e_timer_stop,
        .timer_free = e_timer_free,
        .link_open = e_link_open,
        .link_send = e_link_send,
        .link_close = e_link_close,
        .report = e_report,
        .check_term = e_check_term,
        .install_map = e_install_map,
        .resume = e_resume,
        .release_held = e_release_held,
        .release_unfenced = e_release_unfenced,
        .sync_wal = e_sync_wal,
        .sync_wal_cancel = e_sync_wal_cancel,
    };
    if (!(nm->eng = move_engine_new(&env, 0))) {
        peerauth_secret_wipe(&nm->secret);
        free(nm);
        return NULL;
    }
    holdq_init(&nm->hq, s->loop, hold_max_ms);
    return nm->eng;
}

static void moves_closed(uv_handle_t *h) {
    free(h->data);
}

void moves_free(moves *mv) {
    if (!mv) return;
    node_moves *nm = nm_of(mv);
    move_engine_free(mv);
    peerauth_secret_wipe(&nm->secret);
    holdq_close(&nm->hq, moves_closed, nm);
}
