/* walsync.c - WAL fsyncs on a worker thread; see walsync.h.
 *
 * States, on the loop: idle (nothing in flight), or in flight with a batch
 * of requests it will answer. New requests wait in `waiting` and start the
 * next fsync when the one in flight ends. The worker sleeps on a condition
 * until `go`, runs the fsync, sets `done` and wakes the loop with a
 * uv_async. A begin that finds nothing to fsync (or a failed store) answers
 * through the same async, so callbacks never run inside walsync_request.
 */
#include "node/walsync.h"
#include "core/err.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct wreq {
    walsync_fn fn;
    void *arg;
} wreq;

typedef struct wlist {
    wreq *v;
    size_t n, cap;
} wlist;

struct walsync {
    uv_loop_t *loop;
    store *st;
    uv_async_t wake;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go, done, quit;  /* under mu */
    int inflight;        /* loop only: a batch awaits its answer */
    int answer_now;      /* loop only: the batch is answered with early_rc */
    int early_rc;
    store_wal_sync ws;
    wlist batch, waiting;
    uint64_t last_us;
};

static int wlist_push(wlist *l, walsync_fn fn, void *arg) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        wreq *v = realloc(l->v, cap * sizeof *v);
        if (!v) return KEEL_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (wreq){fn, arg};
    return 0;
}

static void wlist_drop(wlist *l, void *arg) {
    size_t j = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].arg != arg) l->v[j++] = l->v[i];
    l->n = j;
}

static void *worker(void *p) {
    walsync *w = p;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->go && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->quit) break;
        w->go = 0;
        pthread_mutex_unlock(&w->mu);
        store_wal_sync_run(w->st, &w->ws);
        pthread_mutex_lock(&w->mu);
        w->done = 1;
        uv_async_send(&w->wake);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Moves the waiting requests into the batch and starts their fsync. */
static void start(walsync *w) {
    wlist t = w->batch;
    w->batch = w->waiting;
    w->waiting = t;
    w->waiting.n = 0;
    w->inflight = 1;
    uv_ref((uv_handle_t *)&w->wake);
    int rc = store_wal_sync_begin(w->st, &w->ws);
    if (rc != 1) { /* nothing to fsync, or the store failed: answer at once */
        w->answer_now = 1;
        w->early_rc = rc;
        uv_async_send(&w->wake);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->go = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void on_wake(uv_async_t *h) {
    walsync *w = h->data;
    if (!w->inflight) return;
    int rc;
    if (w->answer_now) {
        w->answer_now = 0;
        rc = w->early_rc;
    } else {
        pthread_mutex_lock(&w->mu);
        int done = w->done;
        w->done = 0;
        pthread_mutex_unlock(&w->mu);
        if (!done) return; /* a stray wake-up */
        rc = store_wal_sync_end(w->st, &w->ws);
        w->last_us = w->ws.us;
    }
    w->inflight = 0;
    uv_unref((uv_handle_t *)&w->wake);
    /* Callbacks may request again (into waiting) or cancel (in batch). */
    for (size_t i = 0; i < w->batch.n; i++) {
        wreq r = w->batch.v[i];
        if (r.fn) r.fn(r.arg, rc);
    }
    w->batch.n = 0;
    if (w->waiting.n) start(w);
}

walsync *walsync_new(uv_loop_t *loop, store *st) {
    walsync *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->loop = loop;
    w->st = st;
    if (pthread_mutex_init(&w->mu, NULL)) goto fail_mu;
    if (pthread_cond_init(&w->cv, NULL)) goto fail_cv;
    if (uv_async_init(loop, &w->wake, on_wake)) goto fail_async;
    w->wake.data = w;
    /* The handle keeps the loop alive only while an fsync is in flight. */
    uv_unref((uv_handle_t *)&w->wake);
    if (pthread_create(&w->thread, NULL, worker, w)) {
        uv_close((uv_handle_t *)&w->wake, NULL); /* w leaks until the loop runs: rare */
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        return NULL;
    }
    return w;
fail_async:
    pthread_cond_destroy(&w->cv);
fail_cv:
    pthread_mutex_destroy(&w->mu);
fail_mu:
    free(w);
    return NULL;
}

static void on_closed(uv_handle_t *h) {
    walsync *w = h->data;
    free(w->batch.v);
    free(w->waiting.v);
    free(w);
}

void walsync_free(walsync *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL); /* waits for an fsync in flight */
    if (w->inflight && !w->answer_now) {
        /* The fsync may have run: settle it, so the store's state is right. */
        pthread_mutex_lock(&w->mu);
        int done = w->done;
        pthread_mutex_unlock(&w->mu);
        if (done) (void)store_wal_sync_end(w->st, &w->ws); /* a failure is sticky */
    }
    w->batch.n = w->waiting.n = 0;
    w->inflight = 0;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    uv_close((uv_handle_t *)&w->wake, on_closed);
}

int walsync_request(walsync *w, walsync_fn fn, void *arg) {
    int rc = wlist_push(&w->waiting, fn, arg);
    if (rc) return rc;
    if (!w->inflight) start(w);
    return 0;
}

void walsync_cancel(walsync *w, void *arg) {
    if (!w) return;
    wlist_drop(&w->waiting, arg);
    for (size_t i = 0; i < w->batch.n; i++)
        if (w->batch.v[i].arg == arg) w->batch.v[i].fn = NULL;
}

int walsync_busy(const walsync *w) {
    return w && (w->inflight || w->waiting.n);
}

uint64_t walsync_last_us(const walsync *w) {
    return w ? w->last_us : 0;
}
