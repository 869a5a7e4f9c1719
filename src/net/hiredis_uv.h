/* hiredis_uv.h - attaches a hiredis async context to a libuv loop.
 *
 * The same job as hiredis' own adapters/libuv.h, which we cannot use as
 * shipped: in Debian 12's hiredis 0.14.1 its poll callback returns early
 * when libuv reports an error status (a refused connection, a reset), and
 * libuv then stops watching the socket - hiredis never learns, no callback
 * ever runs, and the connection hangs forever. Here an error status is
 * handed to hiredis as "readable and writable" for the events it asked for,
 * so its read or write fails and it runs its disconnect path (hiredis 1.0
 * does the same).
 *
 * Writes: a buffered command goes out before the loop next blocks (a
 * uv_prepare handle), not on a writable event; the socket is polled for
 * writable only while a write waits for room or a connect is in progress.
 * So a command sent from a callback leaves before the loop blocks again,
 * and changing hiredis' wishes costs no epoll_ctl. Not from another
 * uv_prepare callback: libuv runs a prepare handle started in that phase
 * only at the next iteration, after a poll that may block; nothing sends
 * from one today. The context's handles close when hiredis frees it.
 *
 * Threads: the loop's thread.
 */
#ifndef KEEL_HIREDIS_UV_H
#define KEEL_HIREDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/* Returns REDIS_OK, or REDIS_ERR (already attached, out of memory). */
int hiredis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

#endif
