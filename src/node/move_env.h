/* move_env.h - everything the node's move engines reach outside themselves
 * (DESIGN.md §11).
 *
 * The move state machine (move.c), the stream source (move_src.c) and the
 * stream destination (move_dst.c) touch time, timers, peer connections, the
 * store, the partition table, the coordinator and held requests only through
 * this environment. Production binds it to libuv, RocksDB, sockets and the
 * coordinator link (move_uv.c); the move simulator (tests/sim/movesim.c)
 * binds it to a simulated clock and network, in one process, driven by one
 * seed. Nothing in the engines reads a global, a clock or a socket of its
 * own, so a simulated run repeats event for event.
 *
 * Requests reach the engines as a move_call: the reply is written to
 * call->out (RESP, as resp/resp.h writes it) and the call returns 0, or the
 * call returns MOVE_HELD having written nothing. A held call is run again
 * (the whole command, from the start) after the engine asks env->resume for
 * its connection; the environment must not run it again before then.
 *
 * Threads: one; every callback runs on the thread that owns the engine.
 */
#ifndef KEEL_MOVE_ENV_H
#define KEEL_MOVE_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/directive.h"
#include "node/ptable.h"
#include "store/store.h"

struct redisReply;

#define MOVE_HELD 1 /* = RSERVER_HOLD */

typedef struct move_timer move_timer; /* the environment's */
typedef struct move_link move_link;   /* the environment's: D's connection to S */

typedef void (*move_timer_fn)(void *arg);
/* A reply on a link: r is NULL when the link went down before it came. */
typedef void (*move_reply_fn)(void *arg, void *tag, struct redisReply *r);

typedef struct move_link_cbs {
    void (*on_ready)(void *arg);                  /* authenticated: requests may flow */
    /* Gone: no callback follows, and sends fail; the owner still calls
     * link_close. */
    void (*on_down)(void *arg, const char *why);
} move_link_cbs;

typedef struct move_env {
    void *ctx; /* passed back to every function below that takes one */
    store *st;
    ptable *pt;
    const char *self_id;

    uint64_t (*now_us)(void *ctx); /* monotonic */

    /* One-shot or repeating timers. timer_free stops the timer; no callback
     * runs after it. A (0, 0) start means "soon, after other work": a chain
     * of them started from their own callbacks must let the loop poll
     * between two callbacks. */
    move_timer *(*timer_new)(void *ctx, move_timer_fn fn, void *arg);
    void (*timer_start)(move_timer *t, uint64_t after_ms, uint64_t repeat_ms);
    void (*timer_stop)(move_timer *t);
    void (*timer_free)(move_timer *t);

    /* An authenticated connection to peer peer_id at host:port; NULL if it
     * cannot even be started. link_send returns 0 or -1 (then no callback
     * comes); link_close runs no callback. */
    move_link *(*link_open)(void *ctx, const char *host, int port, const char *peer_id,
                            const move_link_cbs *cbs, void *arg);
    int (*link_send)(move_link *l, move_reply_fn fn, void *tag, int argc, const char **argv);
    void (*link_close)(move_link *l);

    /* Makes everything written to the store so far durable without
     * waiting on the engine's thread (node/walsync.h): done(arg, 0) runs
     * later, once it is, or done(arg, rc < 0) if the store failed. Returns
     * 0, or < 0 (then done never runs). sync_wal_cancel(ctx, arg) drops the
     * pending requests made with arg. */
    int (*sync_wal)(void *ctx, void (*done)(void *arg, int rc), void *arg);
    void (*sync_wal_cancel)(void *ctx, void *arg);

    /* A KEEL.MOVE.REPORT to the coordinator (dropped when not connected). */
    void (*report)(void *ctx, int argc, const char **argv);
    /* The directive guard (DESIGN I3): may a directive with this term from
     * this peer be acted on? */
    directive_verdict (*check_term)(void *ctx, int from_coordinator, uint64_t term);
    /* Installs a map pushed with KEEL.MOVE.COMMIT (node_install_map's
     * contract: < 0 refused with err, 0 already had it, 1 installed; an
     * install calls move_map_changed). */
    int (*install_map)(void *ctx, const char *json, size_t len, char *err, size_t cap);
    /* Runs a held call of connection conn again. */
    void (*resume)(void *ctx, void *conn);
    /* Re-runs the client requests held for partition p (all when p < 0);
     * with tryagain they are answered -TRYAGAIN. */
    void (*release_held)(void *ctx, long p, int tryagain);
    /* Re-runs the held requests whose partition is no longer FENCED (a
     * fence restored at start-up and settled by a map). */
    void (*release_unfenced)(void *ctx);
} move_env;

/* One request to the engines. */
typedef struct move_call {
    void *conn;       /* the caller's connection, opaque: given back to env->resume */
    kbuf *out;        /* the reply goes here */
    int proto;        /* 2 or 3 */
    const char *peer; /* the authenticated peer id; NULL if none */
    int *waits_data;  /* the connection's data-wait flag: 0, 1 waiting, 2 woken by its timer */
} move_call;

/* Test-only protocol mutations (the simulator proves it can fail with them;
 * production never sets any). */
enum {
    MOVE_MUT_FENCE_TIMER = 1 << 0,    /* S lifts the fence on its own after 50 ms */
    MOVE_MUT_NO_FENCE_RECORD = 1 << 1 /* S does not persist FENCED */
};

#endif
