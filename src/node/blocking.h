/* blocking.h - clients blocked on keys (BLPOP and friends), as redis 7.0's
 * blocked.c serves them, parked with rserver's hold (net/rserver.h).
 *
 * Parking. A blocking command whose keys hold nothing for it does not reply:
 * blocking_run() queues the client, in arrival order, on a FIFO per key
 * (each distinct key once), and its dispatch returns RSERVER_HOLD, so the
 * event loop goes on and the client's later pipelined requests wait behind
 * it. Nothing is copied: rserver keeps the held request's argv until it is
 * dispatched again. A handler call that blocks is left out of the command
 * metrics (cmd_call); only the call that finally replies is counted, so a
 * blocking command counts once, as in redis.
 *
 * Waking. Every write of a list key's metadata (db_put with STORE_T_LIST:
 * pushes, LMOVE, RENAME, COPY, SORT STORE, inside MULTI/EXEC and scripts as
 * well) calls blocking_touch(), which marks the key ready when someone waits
 * on it. After the writing request has finished (cmd_dispatch's end: a
 * plain command, a whole EXEC, a whole script) blocking_serve() takes the
 * ready keys in the order they became ready and, for each, re-dispatches
 * its waiters oldest first (rserver_resume). The re-dispatched handler runs
 * its command's try function again in "serving" mode; if that finds
 * nothing (another waiter emptied the key, or it was deleted again in the
 * same EXEC) the client stays blocked in its place and the key's remaining
 * waiters are not tried. Writes made while serving (BLMOVE's push) mark
 * further keys ready, served in the same pass. So the replies, and the
 * store batch they go into, are those of the writer's turn: one group
 * commit covers the push and the pops it caused.
 *
 * Timeouts. A deadline heap on the monotonic clock and one libuv timer set
 * to the earliest deadline (so 0.01 s returns after about 10 ms), capped at
 * BLOCKING_CHECK_MS. Timeout 0 waits forever. At the deadline the request
 * is re-dispatched with reason BLOCK_TIMEOUT and replies a null array (*-1,
 * RESP3 _), whatever the command: redis' replyToBlockedClientTimedOut.
 *
 * Slots moving away. Every BLOCKING_CHECK_MS, while anyone is blocked, each
 * blocked client's slot is routed again (ptable_route). When this node no
 * longer serves it (ROUTE_MOVED or ROUTE_DOWN) the request is re-dispatched:
 * cmd_route answers "-MOVED slot host:port" (or -CLUSTERDOWN) and the client
 * is unblocked. This is redis 7.0's clusterRedirectBlockedClientIfNeeded,
 * which its clientsCron runs: a blocked client is redirected once the slot
 * is owned by another node, and stays blocked while it is only migrating
 * (keel: FENCED, ROUTE_HOLD).
 *
 * Inside MULTI/EXEC and scripts (x->can_block == 0) a blocking command is
 * its non-blocking form: served now, or its null reply (redis'
 * CLIENT_DENY_BLOCKING: a null array for the pops, a null bulk for BLMOVE
 * and BRPOPLPUSH). Scripts may call only BLMPOP (redis 7.0 marks the others
 * noscript; script.c refuses them).
 *
 * Adding a blocking command (BZPOPMIN, BZPOPMAX, BZMPOP): validate the
 * arguments, then call blocking_run() with a spec naming the keys, the
 * timeout argument, the null reply, and a try function that, for the keys
 * in order, serves the first one that has something (replying exactly one
 * reply and returning 1), or returns 0 having replied nothing. In serving
 * mode a key of the wrong type is skipped (redis leaves the client
 * blocked); otherwise it is replied -WRONGTYPE and 1 returned. Then make
 * the writes that can satisfy it call blocking_touch() (db_put does it for
 * lists; a sorted set's type is another line there).
 *
 * Threads: everything runs on the loop thread.
 */
#ifndef KEEL_BLOCKING_H
#define KEEL_BLOCKING_H

#include <stddef.h>

#include "node/cmd.h"

#define BLOCKING_CHECK_MS 100 /* the route check's period, and the timer's longest sleep */

/* Why a blocked request is being re-dispatched. */
typedef enum {
    BLOCK_READY = 0,     /* a key it waits on became ready (or a fresh call) */
    BLOCK_TIMEOUT = 1,   /* its deadline passed, or CLIENT UNBLOCK id TIMEOUT */
    BLOCK_UNBLOCKED = 2, /* CLIENT UNBLOCK id ERROR */
} blocking_reason;

/* Tries to serve the command in x now. serving is 1 when x is a blocked
 * request re-dispatched because a key became ready. Returns 1 after
 * appending exactly one reply to x->out, or 0 having appended nothing
 * (nothing to serve yet). */
typedef int (*blocking_try_fn)(cmd_ctx *x, int serving, void *arg);

typedef struct blocking_spec {
    int first_key, nkeys; /* the keys: argv[first_key .. first_key + nkeys - 1] */
    int timeout_arg;      /* argv index of the timeout, in seconds (a float) */
    int null_array;       /* reply when it may not block (MULTI, scripts) and nothing is
                             there: 1 a null array (*-1), 0 a null bulk ($-1, BLMOVE) */
    blocking_try_fn try_serve;
    void *arg; /* passed to try_serve */
    /* Streams (XREAD, XREADGROUP; all 0 for the list and zset commands): */
    int timeout_ms;   /* the timeout is integer milliseconds (redis' UNIT_MILLISECONDS:
                         "-ERR timeout is not an integer or out of range") */
    const void *save; /* bytes kept with a blocked request (XREAD's resolved $ ids), */
    size_t savelen;   /* copied when it blocks; blocking_saved() returns them */
    int keep_trying;  /* when this waiter stays blocked on a ready key, the key's
                         later waiters are still tried (they wait for different ids) */
} blocking_spec;

/* Runs a blocking command whose other arguments the caller has checked:
 * parses the timeout (replying "-ERR timeout is not a float or out of
 * range" or "-ERR timeout is negative" as redis 7.0.15; milliseconds are
 * rounded up, so 0.0001 is 1 ms), answers a re-dispatch for a timeout or CLIENT UNBLOCK, tries
 * sp->try_serve, and otherwise blocks: sets x->hold to RSERVER_HOLD (the
 * client keeps its place if it was already blocked) or, when x->can_block
 * is 0, replies the null reply. Replies "-ERR out of memory" if the
 * client cannot be queued. sp is borrowed for the call. */
void blocking_run(cmd_ctx *x, const blocking_spec *sp);

/* The bytes sp->save held when x's request blocked, while x is that
 * request re-dispatched (try_serve with serving 1); else NULL. *len gets
 * their length. Valid until the request replies or blocks again. */
const void *blocking_saved(cmd_ctx *x, size_t *len);

/* The write hook: key k (bytes, borrowed) now holds a list (or another
 * type a blocked command waits for). Marks it ready if anyone waits on it;
 * cheap when nobody is blocked. */
void blocking_touch(server *s, const char *k, size_t kl);

/* Marks every key someone waits on ready (FLUSHALL). */
void blocking_touch_all(server *s);

/* Serves the clients waiting on ready keys (see "Waking"). Called at the
 * end of each top-level request; does nothing when called from inside a
 * serve pass (a re-dispatched request's own dispatch), or while a script
 * past its time limit still runs (a SCRIPT KILL's dispatch). */
void blocking_serve(server *s);

/* Number of clients blocked now (INFO clients blocked_clients). */
size_t blocking_count(const server *s);

/* 1 if c is blocked on keys now (CLIENT LIST's flag b). */
int blocking_is_blocked(const server *s, const client *c);

/* Unblocks the client with id `id` if it is blocked on keys: with
 * as_error 0 it replies the timeout reply (a null array), with 1 "-UNBLOCKED client
 * unblocked via CLIENT UNBLOCK". Returns 1 if it was blocked, else 0. For
 * CLIENT UNBLOCK; the reply leaves at the turn end. */
int blocking_unblock(server *s, unsigned long long id, int as_error);

/* CLIENT UNBLOCK client-id [TIMEOUT|ERROR] (cmd_table.c's client_subs). */
void cmd_client_unblock(cmd_ctx *x);

/* rserver on_close: takes c off every queue. Before move_conn_closed,
 * which frees c->user. */
void blocking_conn_closed(server *s, client *c);

/* Frees the module's state and closes its timer (shutdown; every client
 * must have been closed, or will be without being resumed). */
void blocking_free(server *s);

#endif
