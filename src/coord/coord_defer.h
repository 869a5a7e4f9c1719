/* coord_defer.h - commands whose reply waits for a map-store write (issue
 * 12: the coordinator's loop never waits on the store).
 *
 * A command that changes the map submits its write (mapstore_submit) and
 * holds its connection (rserver's RSERVER_HOLD: RESP has no request ids, so
 * later pipelined requests wait behind it). The write's completion, on the
 * loop, writes the reply into the held record and resumes the client; the
 * re-dispatch of the same request finds the reply and sends it. Nothing on
 * the loop waits meanwhile: other clients, heartbeats and moves go on.
 *
 *   d = coord_defer_hold(x)       the handler: hold x (x->hold = 1)
 *   ... later, on the loop ...
 *   coord_defer_out(d)            the kbuf the reply goes into (exactly one)
 *   coord_defer_done(co, d)       send it: resumes the client, frees d
 *
 * coord_defer_write does both for the common case of one write and a reply
 * made from its result. A client that disconnects while held: its record
 * stays until the completion, which then only frees it (the write and its
 * side effects, such as logs, still happen).
 *
 * Threads: the coordinator's loop thread.
 */
#ifndef KEEL_COORD_DEFER_H
#define KEEL_COORD_DEFER_H

#include "coord/coord_int.h"

typedef struct coord_deferred coord_deferred;

/* Holds the command x: returns its record, or NULL (out of memory: x is not
 * held, and the caller replies an error at once). */
coord_deferred *coord_defer_hold(cctx *x);
/* Where the one reply goes; proto is the client's RESP version. */
kbuf *coord_defer_out(coord_deferred *d);
int coord_defer_proto(const coord_deferred *d);
/* Forgets d without a reply: for a handler that held, then failed before
 * anything was submitted (it clears x->hold and replies itself). */
void coord_defer_drop(coord *co, coord_deferred *d);
/* Sends the reply written to coord_defer_out(d) and frees d. */
void coord_defer_done(coord *co, coord_deferred *d);

/* Makes the reply of a held command from its write's result. arg is the
 * caller's (malloc'd or NULL) and is freed with free() after the call. */
typedef void (*coord_defer_fn)(coord *co, const mapstore_result *r, void *arg, kbuf *out,
                               int proto);
/* Submits w and holds x until its completion, where fn makes the reply.
 * Returns 0 (held), or the submit's error (w refused at once, or no memory;
 * x is not held, arg was freed, and the caller replies). */
int coord_defer_write(cctx *x, const mapstore_write *w, coord_defer_fn fn, void *arg);

/* coord_dispatch, first: 1 if c has a finished reply (appended to c->out
 * now; the request is answered), 0 otherwise. */
int coord_defer_take(coord *co, client *c);
/* coord_conn_closed: c is going away. */
void coord_defer_closed(coord *co, client *c);

#endif
