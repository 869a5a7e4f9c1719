/* hiredis_uv.c - see hiredis_uv.h. */
#include "net/hiredis_uv.h"

#include <stdlib.h>

typedef struct watch {
    redisAsyncContext *ac; /* NULL once hiredis cleaned up */
    uv_poll_t poll;
    int events;
} watch;

static void on_poll(uv_poll_t *h, int status, int events) {
    watch *w = h->data;
    /* An error (status < 0) is a readiness too: let hiredis find it. */
    int ev = status < 0 ? w->events : events;
    if (w->ac && (ev & UV_READABLE)) redisAsyncHandleRead(w->ac);
    if (w->ac && (ev & UV_WRITABLE)) redisAsyncHandleWrite(w->ac);
}

static void update(watch *w) {
    if (w->events)
        uv_poll_start(&w->poll, w->events, on_poll);
    else
        uv_poll_stop(&w->poll);
}

static void add_read(void *p) {
    watch *w = p;
    w->events |= UV_READABLE;
    update(w);
}
static void del_read(void *p) {
    watch *w = p;
    w->events &= ~UV_READABLE;
    update(w);
}
static void add_write(void *p) {
    watch *w = p;
    w->events |= UV_WRITABLE;
    update(w);
}
static void del_write(void *p) {
    watch *w = p;
    w->events &= ~UV_WRITABLE;
    update(w);
}

static void on_closed(uv_handle_t *h) {
    free(h->data);
}

static void cleanup(void *p) {
    watch *w = p;
    w->ac = NULL; /* hiredis is freeing the context */
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
    w->poll.data = w;
    w->ac = ac;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    ac->ev.data = w;
    return REDIS_OK;
}
