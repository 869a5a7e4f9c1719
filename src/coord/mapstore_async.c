/* mapstore_async.c - the map store's asynchronous writes (mapstore.h,
 * "Asynchronous writes"): a queue of writes run one at a time on a worker
 * thread, and their completions run on the owner's libuv loop.
 *
 *   loop thread                         worker thread
 *   mapstore_submit: check, copy  -->   queued jobs (FIFO)
 *                                        run the backend call (may wait on
 *                                        etcd for seconds: only here)
 *                                        after a non-refusal failure, or
 *                                        while stale: re-read everything
 *   on_wake (uv_async): for each   <--  done queue (FIFO), uv_async_send
 *   done job, in order: update
 *   memory, then call done()
 *
 * Memory (the handle's cache, term, version, errmsg) is touched only on the
 * loop thread; the backend only on the worker. The queues and `stop` are
 * guarded by `mu`. Since one worker takes jobs in order and completions are
 * delivered in order, the memory after completion k equals the store after
 * write k, and the update of write k (mapstore.c's apply) sees exactly the
 * state the backend validated it against.
 *
 * The same path serves SQLite and etcd: on SQLite the worker waits for the
 * fsync instead of the loop (the SQLite connection is opened in SQLite's
 * serialized threading mode, and only the worker uses it once started).
 */
#include "coord/mapstore.h"
#include "coord/mapstore_int.h"

#include <pthread.h>
#include <stdio.h>
#include <uv.h>
#include <stdlib.h>
#include <string.h>

#include "core/audit.h"
#include "core/err.h"

struct ms_async {
    mapstore *ms;
    uv_async_t wake;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ms_job *queued, *queued_tail; /* mu */
    ms_job *done, *done_tail;     /* mu */
    int stop;                     /* mu */
};

static _Thread_local int on_worker;

int ms_on_worker(void) {
    return on_worker;
}

static void job_free(ms_job *j) {
    if (!j) return;
    free(j->fresh.nodes);
    free(j->fresh.parts);
    free(j->fresh.moves);
    free(j->fresh.settings);
    free(j->placed);
    free(j->pl);
    free(j);
}

static void push(ms_job **head, ms_job **tail, ms_job *j) {
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

/* ---- Worker ------------------------------------------------------------------ */

static void run_job(mapstore *ms, ms_job *j) {
    ms->werr[0] = 0;
    int rc = ms_wops[j->w.kind].run(ms, j);
    if (j->want_fresh || (rc && !ms_refusal(rc))) {
        char why[MAPSTORE_ERR_MAX];
        memcpy(why, ms->werr, sizeof why);
        int lr = msc_load_all(ms, &j->fresh);
        j->reads = 4;
        j->have_fresh = lr == 0;
        if (j->w.kind == MAPSTORE_W_RELOAD)
            rc = lr;
        else /* the write's own reason is the one to report */
            memcpy(ms->werr, why, sizeof why);
    }
    j->r.rc = rc;
    memcpy(j->err, ms->werr, sizeof j->err);
    j->term = ms->ops->term(ms->impl);
    j->version = ms->ops->version(ms->impl);
}

static void *worker(void *arg) {
    ms_async *a = arg;
    on_worker = 1;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->stop && !a->queued)
            pthread_cond_wait(&a->cv, &a->mu);
        if (a->stop) break;
        ms_job *j = a->queued;
        a->queued = j->next;
        if (!a->queued) a->queued_tail = NULL;
        pthread_mutex_unlock(&a->mu);
        run_job(a->ms, j);
        pthread_mutex_lock(&a->mu);
        push(&a->done, &a->done_tail, j);
        uv_async_send(&a->wake);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ---- Completions (loop thread) ------------------------------------------------ */

static void complete(mapstore *ms, ms_job *j) {
    int rc = j->r.rc;
    if (ms_counted(&j->w)) ms->writes++;
    if (audit_enabled()) { /* on the loop, as the synchronous calls log them */
        if (j->w.kind == MAPSTORE_W_BUMP_TERM)
            audit_map_write("bump_term", rc, rc ? 0 : j->r.term, j->version);
        else if (ms_counted(&j->w) && j->w.kind != MAPSTORE_W_NODE_HEARTBEAT)
            audit_map_write("write", rc, 0, j->version);
    }
    ms->reads += (uint64_t)j->reads;
    ms->term = j->term;
    ms->version = j->version;
    if (j->have_fresh) { /* read after the write ran: it already shows it */
        msc_free(ms);
        ms->c = j->fresh;
        memset(&j->fresh, 0, sizeof j->fresh);
        /* After a write whose answer was lost, etcd may still apply it later
         * (a request queued in a stopped or slow member): stay stale, so the
         * owner's timer reads once more (coord.c, on_member_timer). */
        ms->stale = rc && !ms_refusal(rc) && j->w.kind != MAPSTORE_W_RELOAD;
    } else if (rc == 0) {
        ms_wops[j->w.kind].apply(ms, j);
    } else if (!ms_refusal(rc)) {
        ms->stale = 1; /* failed, and so did the re-read */
    }
    if (ms->pending) ms->pending--;
    if (rc) memcpy(ms->errmsg, j->err, sizeof ms->errmsg);
    j->r.kind = j->w.kind;
    j->r.errmsg = j->err;
    if (j->done) j->done(j->arg, &j->r);
}

static void on_wake(uv_async_t *h) {
    ms_async *a = h->data;
    pthread_mutex_lock(&a->mu);
    ms_job *list = a->done;
    a->done = a->done_tail = NULL;
    pthread_mutex_unlock(&a->mu);
    while (list) {
        ms_job *j = list;
        list = j->next;
        /* A callback may stop the handle: the rest are dropped, as queued. */
        if (a->ms->async == a) complete(a->ms, j);
        job_free(j);
    }
}

/* ---- API ----------------------------------------------------------------------- */

static void on_closed(uv_handle_t *h) {
    ms_async *a = h->data;
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

int mapstore_async_start(mapstore *ms, uv_loop_t *loop) {
    if (ms->async) return mapstore__errf(ms, KEEL_EINVAL, "map store: already asynchronous");
    int rc;
    if ((rc = msc_nodes(ms)) || (rc = msc_parts(ms)) || (rc = msc_moves(ms)) ||
        (rc = msc_settings(ms)))
        return rc;
    ms_async *a = calloc(1, sizeof *a);
    if (!a) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    a->ms = ms;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    if (uv_async_init(loop, &a->wake, on_wake)) {
        free(a);
        return mapstore__errf(ms, KEEL_EIO, "map store: uv_async_init failed");
    }
    a->wake.data = a;
    ms->term = ms->ops->term(ms->impl);
    ms->version = ms->ops->version(ms->impl);
    ms->stale = 0;
    ms->pending = 0;
    ms->async = a; /* before the thread starts: mapstore__errf reads it there */
    if (pthread_create(&a->thread, NULL, worker, a)) {
        ms->async = NULL;
        uv_close((uv_handle_t *)&a->wake, on_closed);
        return mapstore__errf(ms, KEEL_EIO, "map store: cannot start its worker thread");
    }
    return 0;
}

static void free_jobs(ms_job *j) {
    while (j) {
        ms_job *next = j->next;
        job_free(j);
        j = next;
    }
}

void mapstore_async_stop(mapstore *ms) {
    ms_async *a = ms ? ms->async : NULL;
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    free_jobs(a->queued);
    free_jobs(a->done);
    a->queued = a->queued_tail = a->done = a->done_tail = NULL;
    ms->async = NULL;
    ms->pending = 0;
    if (!uv_is_closing((uv_handle_t *)&a->wake)) uv_close((uv_handle_t *)&a->wake, on_closed);
}

int mapstore_is_async(const mapstore *ms) {
    return ms->async != NULL;
}

int mapstore_submit(mapstore *ms, const mapstore_write *w, mapstore_done_fn done, void *arg) {
    ms_async *a = ms->async;
    if (!a)
        return mapstore__errf(ms, KEEL_EINVAL,
                              "map store: not asynchronous (mapstore_async_start)");
    if (!w || (unsigned)w->kind >= MAPSTORE_W_NKINDS)
        return mapstore__errf(ms, KEEL_EINVAL, "map store: not a write");
    int rc = ms_wops[w->kind].check(ms, w);
    if (rc) return rc;
    ms_job *j = calloc(1, sizeof *j);
    if (!j) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    j->w = *w;
    j->w.pl = NULL;
    if (w->kind == MAPSTORE_W_PARTITION_PLACE && w->npl) {
        j->placed = calloc(w->npl, sizeof *j->placed);
        j->pl = calloc(w->npl, sizeof *j->pl);
        if (!j->placed || !j->pl) {
            job_free(j);
            return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < w->npl; i++) { /* owners checked: they fit */
            j->placed[i].partition = w->pl[i].partition;
            ms_placed *c = &j->placed[i];
            snprintf(c->owner, sizeof c->owner, "%s", w->pl[i].owner);
            for (unsigned f = 0; f < w->pl[i].nfollowers; f++) { /* checked: they fit */
                snprintf(c->followers[f], sizeof c->followers[f], "%s", w->pl[i].followers[f]);
                c->fptr[f] = c->followers[f];
            }
            j->pl[i] = (mapstore_placement){c->partition, c->owner, c->fptr, w->pl[i].nfollowers};
        }
        j->w.pl = j->pl;
    }
    j->done = done;
    j->arg = arg;
    j->want_fresh = ms->stale;
    pthread_mutex_lock(&a->mu);
    push(&a->queued, &a->queued_tail, j);
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    ms->pending++;
    return 0;
}

int mapstore_reload_submit(mapstore *ms, mapstore_done_fn done, void *arg) {
    mapstore_write w;
    memset(&w, 0, sizeof w);
    w.kind = MAPSTORE_W_RELOAD;
    return mapstore_submit(ms, &w, done, arg);
}

size_t mapstore_pending(const mapstore *ms) {
    return ms->pending;
}

int mapstore_stale(const mapstore *ms) {
    return ms->stale;
}
