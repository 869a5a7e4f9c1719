/* hiredis_uv.c - see hiredis_uv.h.
 *
 * Two handles per context: the uv_poll that watches the socket, and a
 * uv_prepare that writes hiredis' output buffer before the loop next blocks.
 * hiredis asks for "writable" (addWrite) every time it buffers a command and
 * drops the wish (delWrite) once the buffer is out; each such change is a
 * uv_poll_start, which libuv turns into an epoll_ctl DEL at once and an ADD
 * at the next poll. On a connected socket the write nearly always goes out
 * whole, so addWrite only arms the prepare handle; the poll is asked for
 * writable only when a write left bytes behind (the socket buffer was full)
 * or the connect is still in progress. strace of an RF 3 node under
 * unpipelined SETs: 1.4 epoll_ctl per client SET before, none after
 * (docs/replication.md, "Peer writes without epoll_ctl, and one-way
 * replication messages").
 */
#include "net/hiredis_uv.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>

typedef struct watch {
    redisAsyncContext *ac; /* NULL once hiredis cleaned up */
    uv_poll_t poll;
    uv_prepare_t prep;
    int events; /* what hiredis asked for */
    int polled; /* what the uv_poll watches (0: stopped) */
    int open;   /* handles not yet closed (freed at 0) */
    int trying; /* inside on_prepare's write: a call for writable now means "full" */
} watch;

static void on_poll(uv_poll_t *h, int status, int events);

/* Points the uv_poll at want, if that changes anything. */
static void poll_set(watch *w, int want) {
    if (want == w->polled) return;
    w->polled = want;
    if (want)
        uv_poll_start(&w->poll, want, on_poll);
    else
        uv_poll_stop(&w->poll);
}

/* The events the uv_poll must watch: reads as asked; writable only while a
 * write waits for room, not while the prepare handle will try it. */
static void sync_poll(watch *w) {
    int want = w->events & UV_READABLE;
    if ((w->events & UV_WRITABLE) && !uv_is_active((uv_handle_t *)&w->prep)) want |= UV_WRITABLE;
    poll_set(w, want);
}

static void on_poll(uv_poll_t *h, int status, int events) {
    watch *w = h->data;
    /* An error (status < 0) is a readiness too: let hiredis find it. libuv
     * has stopped the handle before this call, so what hiredis asks next
     * must start it again (a read may still find the peer's last bytes and
     * no error, and the socket would then be watched by nobody). */
    if (status < 0) w->polled = 0;
    int ev = status < 0 ? w->events : events;
    if (w->ac && (ev & UV_READABLE)) redisAsyncHandleRead(w->ac);
    if (w->ac && (ev & UV_WRITABLE)) redisAsyncHandleWrite(w->ac);
    if (w->ac && status < 0) sync_poll(w); /* watched again if hiredis still wants it */
}

/* Before the loop blocks: write what hiredis buffered. Still wanting to
 * write afterwards means the socket took only part: watch for writable. */
static void on_prepare(uv_prepare_t *h) {
    watch *w = h->data;
    uv_prepare_stop(h);
    if (w->ac && (w->events & UV_WRITABLE)) {
        w->trying = 1; /* hiredis asks for writable again if bytes are left */
        redisAsyncHandleWrite(w->ac);
        w->trying = 0;
    }
    if (w->ac) sync_poll(w); /* w->ac NULL: hiredis freed the context (cleanup) */
}

static void add_read(void *p) {
    watch *w = p;
    w->events |= UV_READABLE;
    sync_poll(w);
}
static void del_read(void *p) {
    watch *w = p;
    w->events &= ~UV_READABLE;
    sync_poll(w);
}
static void add_write(void *p) {
    watch *w = p;
    w->events |= UV_WRITABLE;
    /* Connected and not already waiting for room: try before the next poll.
     * Not when the try itself left bytes behind (trying): the socket is
     * full, and another try would spin until the next unrelated wakeup. A
     * connect in progress needs the real writable event too (hiredis reads
     * a pending connect's SO_ERROR as success). */
    if ((w->ac->c.flags & REDIS_CONNECTED) && !w->trying && !(w->polled & UV_WRITABLE))
        uv_prepare_start(&w->prep, on_prepare);
    sync_poll(w);
}
static void del_write(void *p) {
    watch *w = p;
    w->events &= ~UV_WRITABLE;
    uv_prepare_stop(&w->prep);
    sync_poll(w);
}

static void on_closed(uv_handle_t *h) {
    watch *w = h->data;
    if (--w->open == 0) free(w);
}

static void cleanup(void *p) {
    watch *w = p;
    w->ac = NULL; /* hiredis is freeing the context */
    uv_close((uv_handle_t *)&w->prep, on_closed);
    uv_close((uv_handle_t *)&w->poll, on_closed);
}

int hiredis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop) {
    if (ac->ev.data) return REDIS_ERR;
    watch *w = calloc(1, sizeof *w);
    if (!w) return REDIS_ERR;
    if (uv_poll_init(loop, &w->poll, ac->c.fd) != 0) {
        free(w);
        return REDIS_ERR;
    }
    uv_prepare_init(loop, &w->prep); /* cannot fail */
    w->poll.data = w;
    w->prep.data = w;
    w->open = 2;
    w->ac = ac;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    ac->ev.data = w;
    return REDIS_OK;
}
