/* multi.c - MULTI/EXEC/DISCARD/WATCH/UNWATCH (see multi.h).
 *
 * The watch table is a chained hash of watched keys, created on the first
 * WATCH: each entry has a write counter and a count of the client watches
 * that point at it, and goes when the last watch does. A client's state
 * (node_conn.multi) holds its queue and its watches.
 */
#include "node/multi.h"
#include "core/crc16.h"
#include "core/err.h"
#include "node/db.h"
#include "node/move.h"

#include <stdlib.h>
#include <string.h>

#define WATCH_BUCKETS 1024

typedef struct wkey {
    struct wkey *next;
    uint64_t ver;  /* bumped on every write to the key */
    unsigned refs; /* client watches pointing here */
    size_t kl;
    char k[];
} wkey;

typedef struct watch_tab {
    wkey *b[WATCH_BUCKETS];
    size_t n;
} watch_tab;

typedef struct mcmd {
    const cmd_def *d;
    int argc, has_keys;
    unsigned slot;
    char **argv;
    size_t *len;
} mcmd;

typedef struct mwatch {
    wkey *e;
    uint64_t ver; /* e->ver at WATCH */
    int live;     /* the key existed at WATCH */
} mwatch;

typedef struct multi_state {
    int active, dirty;
    mcmd *q;
    size_t n, cap;
    mwatch *w;
    size_t wn, wcap;
} multi_state;

static unsigned key_hash(const char *k, size_t kl) {
    unsigned h = 2166136261u;
    for (size_t i = 0; i < kl; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h & (WATCH_BUCKETS - 1);
}

static wkey *wt_find(watch_tab *t, const char *k, size_t kl) {
    for (wkey *e = t->b[key_hash(k, kl)]; e; e = e->next)
        if (e->kl == kl && memcmp(e->k, k, kl) == 0) return e;
    return NULL;
}

static void wt_unref(watch_tab *t, wkey *e) {
    if (--e->refs) return;
    wkey **pp = &t->b[key_hash(e->k, e->kl)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    t->n--;
    free(e);
}

void multi_touch(server *s, const char *k, size_t kl) {
    if (!s->watch || !s->watch->n) return;
    wkey *e = wt_find(s->watch, k, kl);
    if (e) e->ver++;
}

static multi_state *ms_peek(const client *c) {
    const node_conn *nc = c->user;
    return nc ? nc->multi : NULL;
}

static multi_state *ms_get(client *c) {
    node_conn *nc = node_conn_of(c);
    if (!nc) return NULL;
    if (!nc->multi) nc->multi = calloc(1, sizeof *nc->multi);
    return nc->multi;
}

int multi_active(const client *c) {
    const multi_state *ms = ms_peek(c);
    return ms && ms->active;
}

void multi_flag(client *c) {
    multi_state *ms = ms_peek(c);
    if (ms && ms->active) ms->dirty = 1;
}

static void queue_clear(multi_state *ms) {
    for (size_t i = 0; i < ms->n; i++) {
        for (int j = 0; j < ms->q[i].argc; j++)
            free(ms->q[i].argv[j]);
        free(ms->q[i].argv);
        free(ms->q[i].len);
    }
    free(ms->q);
    ms->q = NULL;
    ms->n = ms->cap = 0;
    ms->active = ms->dirty = 0;
}

static void unwatch_all(server *s, multi_state *ms) {
    for (size_t i = 0; i < ms->wn; i++)
        wt_unref(s->watch, ms->w[i].e);
    free(ms->w);
    ms->w = NULL;
    ms->wn = ms->wcap = 0;
}

/* Ends the transaction: the queue and the watches go (EXEC, DISCARD). */
static void discard(server *s, multi_state *ms) {
    queue_clear(ms);
    unwatch_all(s, ms);
}

void multi_queue(cmd_ctx *x, const cmd_def *d, int has_keys) {
    multi_state *ms = ms_peek(x->c);
    if (ms->n == ms->cap) {
        size_t cap = ms->cap ? ms->cap * 2 : 8;
        mcmd *q = realloc(ms->q, cap * sizeof *q);
        if (!q) goto oom;
        ms->q = q;
        ms->cap = cap;
    }
    mcmd *m = &ms->q[ms->n];
    *m = (mcmd){.d = d, .argc = 0, .has_keys = has_keys, .slot = x->slot};
    m->argv = calloc((size_t)x->argc + 1, sizeof *m->argv);
    m->len = calloc((size_t)x->argc + 1, sizeof *m->len);
    if (!m->argv || !m->len) goto oom_m;
    for (int i = 0; i < x->argc; i++) {
        if (!(m->argv[i] = malloc(x->argvlen[i] + 1))) goto oom_m;
        memcpy(m->argv[i], x->argv[i], x->argvlen[i]);
        m->argv[i][x->argvlen[i]] = 0;
        m->len[i] = x->argvlen[i];
        m->argc = i + 1;
    }
    ms->n++;
    resp_w_simple(x->out, "QUEUED");
    return;
oom_m:
    for (int j = 0; j < m->argc; j++)
        free(m->argv[j]);
    free(m->argv);
    free(m->len);
oom:
    ms->dirty = 1;
    reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* 1 if the key is there (not expired) now; x->slot is set to its slot. */
static int key_live(cmd_ctx *x, const char *k, size_t kl) {
    x->slot = keel_key_slot(k, kl);
    store_value v;
    int rc = db_get(x, NULL, k, kl, &v);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (!rc) store_value_release(&v);
    return 1; /* a storage error counts as live: EXEC then fails safe */
}

/* 1 if every watched key is as WATCH saw it. */
static int watches_hold(cmd_ctx *x, multi_state *ms) {
    for (size_t i = 0; i < ms->wn; i++) {
        const mwatch *w = &ms->w[i];
        if (w->e->ver != w->ver) return 0;
        if (w->live && !key_live(x, w->e->k, w->e->kl)) return 0;
    }
    return 1;
}

void multi_exec_abort(cmd_ctx *x, const char *why) {
    reply_errf(x, "EXECABORT Transaction discarded because of: %s", why);
    discard(x->srv, ms_peek(x->c));
}

int multi_exec(cmd_ctx *x) {
    multi_state *ms = ms_peek(x->c);
    server *s = x->srv;
    int has_keys = 0;
    unsigned slot = 0;
    for (size_t i = 0; i < ms->n; i++) {
        if (!ms->q[i].has_keys) continue;
        if (has_keys && ms->q[i].slot != slot) {
            reply_err(x, "CROSSSLOT Keys in request don't hash to the same slot");
            discard(s, ms);
            return 0;
        }
        slot = ms->q[i].slot;
        has_keys = 1;
    }
    if (has_keys) {
        int held = 0;
        x->slot = slot;
        x->writes = 1; /* EXEC: its queue may write */
        if (!cmd_route(x, &held)) {
            if (held) return held;
            discard(s, ms);
            return 0;
        }
    }
    unsigned partition = x->partition;
    if (ms->dirty) {
        reply_err(x, "EXECABORT Transaction discarded because of previous errors.");
        discard(s, ms);
        return 0;
    }
    if (!watches_hold(x, ms)) {
        resp_w_null_array(x->out, x->c->proto);
        discard(s, ms);
        return 0;
    }
    /* Detach the queue first: the client is out of MULTI while its
     * commands run, as in redis. */
    unwatch_all(s, ms);
    mcmd *q = ms->q;
    size_t n = ms->n;
    ms->q = NULL;
    ms->n = ms->cap = 0;
    ms->active = ms->dirty = 0;
    resp_w_array(x->out, n);
    for (size_t i = 0; i < n; i++) {
        cmd_ctx y = *x;
        y.argc = q[i].argc;
        y.argv = q[i].argv;
        y.argvlen = q[i].len;
        y.proto = x->c->proto;
        y.slot = q[i].slot;
        y.partition = partition;
        cmd_call(&y, q[i].d, q[i].has_keys);
    }
    multi_state tmp = {.q = q, .n = n};
    queue_clear(&tmp);
    return 0;
}

void multi_conn_closed(server *s, client *c) {
    node_conn *nc = c->user;
    if (!nc || !nc->multi) return;
    discard(s, nc->multi);
    free(nc->multi);
    nc->multi = NULL;
}

void multi_server_free(server *s) {
    if (!s->watch) return;
    for (size_t i = 0; i < WATCH_BUCKETS; i++)
        for (wkey *e = s->watch->b[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(s->watch);
    s->watch = NULL;
}

/* ---- Handlers ------------------------------------------------------------ */

void cmd_multi(cmd_ctx *x) {
    multi_state *ms = ms_get(x->c);
    if (!ms) {
        reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    if (ms->active) {
        reply_err(x, "ERR MULTI calls can not be nested");
        return;
    }
    ms->active = 1;
    ms->dirty = 0;
    reply_ok(x);
}

/* EXEC outside MULTI (in MULTI, cmd_dispatch calls multi_exec). */
void cmd_exec(cmd_ctx *x) {
    reply_err(x, "ERR EXEC without MULTI");
}

void cmd_discard(cmd_ctx *x) {
    multi_state *ms = ms_peek(x->c);
    if (!ms || !ms->active) {
        reply_err(x, "ERR DISCARD without MULTI");
        return;
    }
    discard(x->srv, ms);
    reply_ok(x);
}

void cmd_watch(cmd_ctx *x) {
    if (multi_active(x->c)) {
        reply_err(x, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    multi_state *ms = ms_get(x->c);
    server *s = x->srv;
    if (!ms || (!s->watch && !(s->watch = calloc(1, sizeof *s->watch)))) goto oom;
    for (int i = 1; i < x->argc; i++) {
        const char *k = x->argv[i];
        size_t kl = x->argvlen[i];
        wkey *e = wt_find(s->watch, k, kl);
        int dup = 0;
        for (size_t j = 0; e && j < ms->wn && !dup; j++)
            dup = ms->w[j].e == e;
        if (dup) continue;
        if (ms->wn == ms->wcap) {
            size_t cap = ms->wcap ? ms->wcap * 2 : 4;
            mwatch *w = realloc(ms->w, cap * sizeof *w);
            if (!w) goto oom;
            ms->w = w;
            ms->wcap = cap;
        }
        if (!e) {
            if (!(e = calloc(1, sizeof *e + kl))) goto oom;
            memcpy(e->k, k, kl);
            e->kl = kl;
            unsigned h = key_hash(k, kl);
            e->next = s->watch->b[h];
            s->watch->b[h] = e;
            s->watch->n++;
        }
        e->refs++;
        ms->w[ms->wn++] = (mwatch){.e = e, .ver = e->ver, .live = key_live(x, k, kl)};
    }
    reply_ok(x);
    return;
oom:
    reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
}

void cmd_unwatch(cmd_ctx *x) {
    multi_state *ms = ms_peek(x->c);
    if (ms) unwatch_all(x->srv, ms);
    reply_ok(x);
}
