/* coord_defer.c - held commands answered from map-store completions; see
 * coord_defer.h. The records are a list on the coordinator (a handful at
 * a time: one per held client at most). */
#include "coord/coord_defer.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "resp/resp.h"

struct coord_deferred {
    client *c; /* NULL once the client closed */
    int proto;
    int done; /* the reply is in `reply`; the client is being resumed */
    kbuf reply;
    coord_defer_fn fn;
    void *arg;
    struct coord_deferred *next;
};

static void unlink_free(coord *co, coord_deferred *d) {
    coord_deferred **pp = &co->deferred;
    while (*pp && *pp != d)
        pp = &(*pp)->next;
    if (*pp) *pp = d->next;
    kbuf_close(&d->reply);
    free(d->arg);
    free(d);
}

coord_deferred *coord_defer_hold(cctx *x) {
    coord_deferred *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->c = x->c;
    d->proto = x->c->proto;
    kbuf_init(&d->reply);
    d->next = x->co->deferred;
    x->co->deferred = d;
    x->hold = 1;
    return d;
}

void coord_defer_drop(coord *co, coord_deferred *d) {
    unlink_free(co, d);
}

kbuf *coord_defer_out(coord_deferred *d) {
    return &d->reply;
}

int coord_defer_proto(const coord_deferred *d) {
    return d->proto;
}

void coord_defer_done(coord *co, coord_deferred *d) {
    d->done = 1;
    if (!d->c) {
        unlink_free(co, d);
        return;
    }
    /* Re-dispatches the held request: coord_defer_take sends the reply
     * and frees d. A client already closing is not re-dispatched; its
     * on_close (coord_defer_closed) frees d. */
    rserver_resume(d->c);
}

int coord_defer_take(coord *co, client *c) {
    for (coord_deferred *d = co->deferred; d; d = d->next) {
        if (d->c != c || !d->done) continue;
        kbuf_append(&c->out, d->reply.p, d->reply.len);
        unlink_free(co, d);
        return 1;
    }
    return 0;
}

void coord_defer_closed(coord *co, client *c) {
    for (coord_deferred *d = co->deferred, *next; d; d = next) {
        next = d->next;
        if (d->c != c) continue;
        if (d->done)
            unlink_free(co, d);
        else
            d->c = NULL;
    }
}

/* ---- One write, one reply ----------------------------------------------------- */

typedef struct write_wait {
    coord *co;
    coord_deferred *d;
    coord_defer_fn fn;
    void *arg;
} write_wait;

static void on_write_done(void *arg, const mapstore_result *r) {
    write_wait *w = arg;
    w->fn(w->co, r, w->arg, coord_defer_out(w->d), w->d->proto);
    free(w->arg);
    coord_deferred *d = w->d;
    coord *co = w->co;
    free(w);
    coord_defer_done(co, d);
}

int coord_defer_write(cctx *x, const mapstore_write *mw, coord_defer_fn fn, void *arg) {
    write_wait *w = calloc(1, sizeof *w);
    coord_deferred *d = w ? coord_defer_hold(x) : NULL;
    if (!d) {
        free(w);
        free(arg);
        return KEEL_ENOMEM;
    }
    *w = (write_wait){x->co, d, fn, arg};
    int rc = mapstore_submit(x->co->ms, mw, on_write_done, w);
    if (rc) { /* refused at once: not held after all */
        x->hold = 0;
        unlink_free(x->co, d);
        free(arg);
        free(w);
    }
    return rc;
}
