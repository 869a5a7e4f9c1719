/* walsync.h - the node's WAL fsyncs, off the event loop.
 *
 * A durable point that need not hold up other clients - a move destination
 * making its copy durable before VERIFY, the everysec fsync - asks here
 * instead of calling store_sync_wal on the loop thread (which waits for
 * the disk: 148 ms for a 300,000-field copy, docs/benchmarks.md). The loop
 * writes the turn and hands the WAL to the OS (store_wal_sync_begin), one
 * worker thread of this module's own fsyncs (store_wal_sync_run) while the
 * loop serves on, and the loop records the outcome (store_wal_sync_end) and
 * calls back.
 *
 * walsync_request(w, fn, arg): once everything written to the store before
 * the call is durable, fn(arg, 0) runs on the loop; if the store failed,
 * fn(arg, rc < 0). fn never runs inside walsync_request. Requests made while
 * an fsync is in flight are served by the next one (the one in flight may
 * not cover their writes); one fsync serves every request waiting for it.
 * walsync_cancel(w, arg) drops the requests made with arg: their fn never
 * runs (for an owner about to free arg).
 *
 * walsync_free joins the worker: it waits for an fsync in flight, so that
 * the store may be freed right after; callbacks still pending are dropped.
 * It closes a libuv handle, whose memory is released when the loop next
 * runs (or leaked if it never does). Not from inside a walsync callback.
 *
 * Threads: every call on the loop thread; the worker touches only the store
 * through store_wal_sync_run and this module's own state under its mutex.
 */
#ifndef KEEL_WALSYNC_H
#define KEEL_WALSYNC_H

#include <stdint.h>
#include <uv.h>

#include "store/store.h"

typedef struct walsync walsync;
typedef void (*walsync_fn)(void *arg, int rc);

/* NULL when out of memory or the thread cannot start. */
walsync *walsync_new(uv_loop_t *loop, store *st);
void walsync_free(walsync *w);
/* 0, or KEEL_ENOMEM (then fn never runs). */
int walsync_request(walsync *w, walsync_fn fn, void *arg);
void walsync_cancel(walsync *w, void *arg);
/* 1 while an fsync is in flight or requests wait. */
int walsync_busy(const walsync *w);
/* Duration of the last completed fsync, microseconds. */
uint64_t walsync_last_us(const walsync *w);

#endif
