/* cmd_list.c - lists (DESIGN.md §14): one metadata record per key,
 * [version][size][head], and one record per element whose field is its
 * index, u64 big-endian: element i is at head + i, so field order is list
 * order, pushes and pops at either end touch one record, and LINDEX/LSET
 * are point reads. LPUSH takes head - 1; a new list starts at 2^63.
 * Commands that shift elements (LREM, LINSERT) rewrite the list under a new
 * version. Semantics and error texts follow redis-server 7.0 (t_list.c).
 * The blocking forms are in cmd_blocking.c, through node/list.h. */
#include "node/cmd.h"
#include "core/err.h"
#include "node/db.h"
#include "node/list.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K(x) (x)->argv[1], (x)->argvlen[1]
#define LIST_MID (1ull << 63)

static void idx_field(char f[8], uint64_t i) {
    for (int j = 0; j < 8; j++)
        f[j] = (char)(i >> (56 - 8 * j));
}

static int done(cmd_ctx *x, store_txn *t, int rc) {
    return db_finish(x, t, rc);
}

static int el_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, uint64_t i,
                  store_value *v) {
    char f[8];
    idx_field(f, o->head + i);
    return sub_get(x, t, k, kl, o, f, 8, v);
}

static int el_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, uint64_t i,
                  const char *p, size_t len) {
    char f[8];
    idx_field(f, o->head + i);
    return sub_put(x, t, k, kl, o, f, 8, p, len);
}

static int el_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, uint64_t i) {
    char f[8];
    idx_field(f, o->head + i);
    return sub_del(x, t, k, kl, o, f, 8, NULL);
}

/* Pushes els at the left (head) or right end of o. */
static int push(cmd_ctx *x, store_txn *t, const char *k, size_t kl, obj *o, int left, char **els,
                const size_t *lens, size_t n) {
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (left) {
            o->head--;
            o->size++;
            rc = el_put(x, t, k, kl, o, 0, els[i], lens[i]);
        } else {
            rc = el_put(x, t, k, kl, o, o->size, els[i], lens[i]);
            o->size++;
        }
    }
    return rc;
}

static void push_generic(cmd_ctx *x, int left, int only_existing) {
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, K(x), STORE_T_LIST, &o);
    if (r < 0 || (r == 0 && only_existing)) {
        store_txn_abort(t);
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    int rc = push(x, t, K(x), &o, left, x->argv + 2, x->argvlen + 2, (size_t)(x->argc - 2));
    if (!rc) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc) == 0) resp_w_int(x->out, (long long)o.size);
}

void cmd_lpush(cmd_ctx *x) {
    push_generic(x, 1, 0);
}
void cmd_rpush(cmd_ctx *x) {
    push_generic(x, 0, 0);
}
void cmd_lpushx(cmd_ctx *x) {
    push_generic(x, 1, 1);
}
void cmd_rpushx(cmd_ctx *x) {
    push_generic(x, 0, 1);
}

static void pop_generic(cmd_ctx *x, int left) {
    long long count = 1;
    int has_count = x->argc == 3;
    if (x->argc > 3) {
        reply_errf(x, "ERR wrong number of arguments for '%s' command", left ? "lpop" : "rpop");
        return;
    }
    if (has_count && (arg_ll(x->argv[2], x->argvlen[2], &count) || count < 0)) {
        reply_err(x, "ERR value is out of range, must be positive");
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, K(x), STORE_T_LIST, &o);
    if (r <= 0) {
        store_txn_abort(t);
        if (r == 0) {
            if (has_count)
                resp_w_null_array(x->out, x->proto);
            else
                resp_w_null(x->out, x->proto);
        }
        return;
    }
    if (has_count && count == 0) {
        store_txn_abort(t);
        resp_w_array(x->out, 0);
        return;
    }
    size_t n = (unsigned long long)count < o.size ? (size_t)count : o.size;
    kbuf out;
    kbuf_init(&out);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t at = left ? 0 : o.size - 1;
        store_value v;
        rc = el_get(x, t, K(x), &o, at, &v);
        if (rc) break;
        resp_w_bulk(&out, v.data, v.len);
        store_value_release(&v);
        rc = el_del(x, t, K(x), &o, at);
        if (left) o.head++;
        o.size--;
    }
    if (!rc) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc) == 0) {
        if (has_count) resp_w_array(x->out, n);
        kbuf_append(x->out, out.p, out.len);
    }
    kbuf_close(&out);
}

void cmd_lpop(cmd_ctx *x) {
    pop_generic(x, 1);
}
void cmd_rpop(cmd_ctx *x) {
    pop_generic(x, 0);
}

void cmd_llen(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_LIST, &o);
    if (r >= 0) resp_w_int(x->out, r ? (long long)o.size : 0);
}

/* Resolves a redis list index (negative from the end). -1 if outside. */
static long long list_index(long long i, uint64_t size) {
    if (i < 0) i += (long long)size;
    return i < 0 || (uint64_t)i >= size ? -1 : i;
}

void cmd_lindex(cmd_ctx *x) {
    long long i;
    if (arg_ll(x->argv[2], x->argvlen[2], &i)) {
        reply_not_int(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_LIST, &o);
    if (r < 0) return;
    long long at = r ? list_index(i, o.size) : -1;
    store_value v;
    if (at >= 0 && el_get(x, NULL, K(x), &o, (uint64_t)at, &v) == 0) {
        resp_w_bulk(x->out, v.data, v.len);
        store_value_release(&v);
    } else {
        resp_w_null(x->out, x->proto);
    }
}

void cmd_lset(cmd_ctx *x) {
    long long i;
    if (arg_ll(x->argv[2], x->argvlen[2], &i)) {
        reply_not_int(x);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, K(x), STORE_T_LIST, &o);
    if (r <= 0) {
        store_txn_abort(t);
        if (r == 0) reply_err(x, "ERR no such key");
        return;
    }
    long long at = list_index(i, o.size);
    if (at < 0) {
        store_txn_abort(t);
        reply_err(x, "ERR index out of range");
        return;
    }
    int rc = el_put(x, t, K(x), &o, (uint64_t)at, x->argv[3], x->argvlen[3]);
    if (done(x, t, rc) == 0) reply_ok(x);
}

/* Normalises LRANGE/LTRIM's start, stop over size. Returns 0 if empty. */
static int range_of(long long *start, long long *stop, uint64_t size) {
    long long n = (long long)size;
    if (*start < 0) *start += n;
    if (*stop < 0) *stop += n;
    if (*start < 0) *start = 0;
    if (*start > *stop || *start >= n) return 0;
    if (*stop >= n) *stop = n - 1;
    return 1;
}

static int lrange_one(void *arg, const char *rk, size_t rkl, const store_value *v) {
    (void)rk;
    (void)rkl;
    resp_w_bulk(arg, v->data, v->len);
    return 0;
}

void cmd_lrange(cmd_ctx *x) {
    long long start, stop;
    if (arg_ll(x->argv[2], x->argvlen[2], &start) || arg_ll(x->argv[3], x->argvlen[3], &stop)) {
        reply_not_int(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_LIST, &o);
    if (r < 0) return;
    if (!r || !range_of(&start, &stop, o.size)) {
        resp_w_array(x->out, 0);
        return;
    }
    /* Every index head..head+size-1 has its record, so the reply's length
     * is known before the scan: the elements go straight from the iterator
     * into the reply (no copy into a list first). A scan that finds fewer
     * (a storage error) takes the partial reply back. */
    size_t want = (size_t)(stop - start + 1), mark = x->out->len;
    resp_w_array(x->out, want);
    /* One seek to element start's record (its field is head + start), not
     * a walk past the first start records: LRANGE -100 -1 of a long list
     * costs 100 steps. */
    char from[8];
    idx_field(from, o.head + (uint64_t)start);
    long n = sub_scan_from(x, K(x), &o, from, sizeof from, 0, want, lrange_one, x->out);
    if (n != (long)want) {
        x->out->len = mark;
        reply_storage(x, n < 0 ? (int)n : KEEL_ECORRUPT);
    }
}

void cmd_ltrim(cmd_ctx *x) {
    long long start, stop;
    if (arg_ll(x->argv[2], x->argvlen[2], &start) || arg_ll(x->argv[3], x->argvlen[3], &stop)) {
        reply_not_int(x);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, K(x), STORE_T_LIST, &o);
    if (r <= 0) {
        store_txn_abort(t);
        if (r == 0) reply_ok(x);
        return;
    }
    int rc = 0;
    if (!range_of(&start, &stop, o.size)) {
        rc = db_del(x, t, K(x), NULL); /* everything goes: the fields are orphans */
    } else {
        for (long long i = 0; i < start && !rc; i++)
            rc = el_del(x, t, K(x), &o, (uint64_t)i);
        for (long long i = stop + 1; i < (long long)o.size && !rc; i++)
            rc = el_del(x, t, K(x), &o, (uint64_t)i);
        o.head += (uint64_t)start;
        o.size = (uint64_t)(stop - start + 1);
        if (!rc) rc = obj_save(x, t, K(x), &o);
    }
    if (done(x, t, rc) == 0) reply_ok(x);
}

/* Rewrites key k as the elements l (a new version), or deletes it. */
static int rewrite(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *old, char **els,
                   const size_t *lens, size_t n) {
    int rc = db_del(x, t, k, kl, NULL);
    obj o = {.type = STORE_T_LIST,
             .expire_ms = old->expire_ms,
             .version = store_new_version(x->srv->st),
             .head = LIST_MID};
    if (!rc) rc = push(x, t, k, kl, &o, 0, els, lens, n);
    if (!rc && n) rc = obj_save(x, t, k, kl, &o);
    return rc;
}

/* Loads the list as element pointers into l's buffer. */
static int load_list(cmd_ctx *x, const obj *o, flist *l, char ***els, size_t **lens) {
    flist_init(l);
    long n = flist_load(x, K(x), o, 0, SIZE_MAX, l);
    if (n < 0) return (int)n;
    *els = malloc((l->n + 2) * sizeof **els);
    *lens = malloc((l->n + 2) * sizeof **lens);
    if (!*els || !*lens) return KEEL_ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        (*els)[i] = (char *)flist_v(l, i);
        (*lens)[i] = l->e[i].vl;
    }
    return 0;
}

void cmd_lrem(cmd_ctx *x) {
    long long count;
    if (arg_ll(x->argv[2], x->argvlen[2], &count)) {
        reply_not_int(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_LIST, &o);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    flist l;
    char **els = NULL;
    size_t *lens = NULL;
    int rc = load_list(x, &o, &l, &els, &lens);
    size_t n = l.n, w = 0;
    long long removed = 0;
    const char *val = x->argv[3];
    size_t vl = x->argvlen[3];
    char *keep = calloc(n + 1, 1);
    if (!rc && !keep) rc = KEEL_ENOMEM;
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            keep[i] = 1;
        for (size_t j = 0; j < n && (count == 0 || removed < (count < 0 ? -count : count)); j++) {
            size_t i = count < 0 ? n - 1 - j : j;
            if (lens[i] == vl && memcmp(els[i], val, vl) == 0) {
                keep[i] = 0;
                removed++;
            }
        }
        for (size_t i = 0; i < n; i++)
            if (keep[i]) {
                els[w] = els[i];
                lens[w++] = lens[i];
            }
    }
    if (!rc && removed) {
        store_txn *t = store_txn_begin(x->srv->st);
        rc = rewrite(x, t, K(x), &o, els, lens, w);
        if (done(x, t, rc) == 0) resp_w_int(x->out, removed);
    } else if (rc) {
        reply_storage(x, rc);
    } else {
        resp_w_int(x->out, 0);
    }
    free(keep);
    free(els);
    free(lens);
    flist_free(&l);
}

void cmd_linsert(cmd_ctx *x) {
    int before = arg_is(x, 2, "before");
    if (!before && !arg_is(x, 2, "after")) {
        reply_syntax(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_LIST, &o);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    flist l;
    char **els = NULL;
    size_t *lens = NULL;
    int rc = load_list(x, &o, &l, &els, &lens);
    size_t n = l.n, at = SIZE_MAX;
    for (size_t i = 0; !rc && i < n && at == SIZE_MAX; i++)
        if (lens[i] == x->argvlen[3] && memcmp(els[i], x->argv[3], lens[i]) == 0) at = i;
    if (rc) {
        reply_storage(x, rc);
    } else if (at == SIZE_MAX) {
        resp_w_int(x->out, -1);
    } else {
        size_t pos = before ? at : at + 1;
        memmove(els + pos + 1, els + pos, (n - pos) * sizeof *els);
        memmove(lens + pos + 1, lens + pos, (n - pos) * sizeof *lens);
        els[pos] = x->argv[4];
        lens[pos] = x->argvlen[4];
        store_txn *t = store_txn_begin(x->srv->st);
        rc = rewrite(x, t, K(x), &o, els, lens, n + 1);
        if (done(x, t, rc) == 0) resp_w_int(x->out, (long long)(n + 1));
    }
    free(els);
    free(lens);
    flist_free(&l);
}

int list_peek(cmd_ctx *x, const char *k, size_t kl) {
    store_value v;
    int rc = db_get(x, NULL, k, kl, &v);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    int list = v.type == STORE_T_LIST;
    store_value_release(&v);
    return list ? 1 : -2; /* a list key exists only while it has elements */
}

int list_move(cmd_ctx *x, const char *sk, size_t skl, const char *dk, size_t dkl, int from_left,
              int to_left) {
    store_txn *t = store_txn_begin(x->srv->st);
    obj so, dobj;
    int r = obj_lookup(x, t, sk, skl, STORE_T_LIST, &so);
    if (r <= 0) {
        store_txn_abort(t);
        return r < 0;
    }
    if (obj_lookup(x, t, dk, dkl, STORE_T_LIST, &dobj) < 0) {
        store_txn_abort(t);
        return 1;
    }
    uint64_t at = from_left ? 0 : so.size - 1;
    store_value v;
    int rc = el_get(x, t, sk, skl, &so, at, &v);
    if (rc) {
        store_txn_abort(t);
        reply_storage(x, rc);
        return 1;
    }
    char *val = malloc(v.len ? v.len : 1);
    size_t vl = v.len;
    if (val) memcpy(val, v.data, vl);
    store_value_release(&v);
    if (!val) rc = KEEL_ENOMEM;
    if (!rc) rc = el_del(x, t, sk, skl, &so, at);
    if (from_left) so.head++;
    so.size--;
    if (!rc) rc = obj_save(x, t, sk, skl, &so);
    int same = skl == dkl && memcmp(sk, dk, skl) == 0;
    if (!rc && same) { /* the destination is the source as just changed */
        if (obj_lookup(x, t, dk, dkl, STORE_T_LIST, &dobj) < 0) {
            store_txn_abort(t);
            free(val);
            return 1;
        }
    }
    if (!rc) rc = push(x, t, dk, dkl, &dobj, to_left, &val, &vl, 1);
    if (!rc) rc = obj_save(x, t, dk, dkl, &dobj);
    if (done(x, t, rc) == 0) resp_w_bulk(x->out, val, vl);
    free(val);
    return 1;
}

/* LMOVE src dst LEFT|RIGHT LEFT|RIGHT, and RPOPLPUSH (RIGHT LEFT). */
static void move_generic(cmd_ctx *x, int from_left, int to_left) {
    if (!list_move(x, x->argv[1], x->argvlen[1], x->argv[2], x->argvlen[2], from_left, to_left))
        resp_w_null(x->out, x->proto);
}

void cmd_rpoplpush(cmd_ctx *x) {
    move_generic(x, 0, 1);
}

void cmd_lmove(cmd_ctx *x) {
    int fl = arg_is(x, 3, "left"), fr = arg_is(x, 3, "right");
    int tl = arg_is(x, 4, "left"), tr = arg_is(x, 4, "right");
    if (!(fl || fr) || !(tl || tr)) {
        reply_syntax(x);
        return;
    }
    move_generic(x, fl, tl);
}

/* LPOS key element [RANK rank] [COUNT num] [MAXLEN len] */
void cmd_lpos(cmd_ctx *x) {
    long long rank = 1, count = -1, maxlen = 0;
    for (int j = 3; j < x->argc; j += 2) {
        long long v;
        if (j + 1 >= x->argc) {
            reply_syntax(x);
            return;
        }
        if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &v)) {
            reply_not_int(x);
            return;
        }
        if (arg_is(x, j, "rank")) {
            if (v == 0 || v == LLONG_MIN) {
                reply_err(x, "ERR RANK can't be zero: use 1 to start from the first match, 2 "
                             "from the second ... or use negative to start from the end of the "
                             "list");
                return;
            }
            rank = v;
        } else if (arg_is(x, j, "count")) {
            if (v < 0) {
                reply_err(x, "ERR COUNT can't be negative");
                return;
            }
            count = v;
        } else if (arg_is(x, j, "maxlen")) {
            if (v < 0) {
                reply_err(x, "ERR MAXLEN can't be negative");
                return;
            }
            maxlen = v;
        } else {
            reply_syntax(x);
            return;
        }
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_LIST, &o);
    if (r < 0) return;
    flist l;
    flist_init(&l);
    long n = r ? flist_load(x, K(x), &o, 0, SIZE_MAX, &l) : 0;
    if (n < 0) {
        flist_free(&l);
        reply_storage(x, (int)n);
        return;
    }
    kbuf out;
    kbuf_init(&out);
    size_t found = 0, want = count < 0 ? 1 : count == 0 ? SIZE_MAX : (size_t)count;
    long long skip = (rank < 0 ? -rank : rank) - 1;
    for (size_t j = 0; j < l.n && found < want && (!maxlen || (long long)j < maxlen); j++) {
        size_t i = rank < 0 ? l.n - 1 - j : j;
        if (l.e[i].vl == x->argvlen[2] && memcmp(flist_v(&l, i), x->argv[2], l.e[i].vl) == 0) {
            if (skip > 0) {
                skip--;
                continue;
            }
            resp_w_int(&out, (long long)i);
            found++;
        }
    }
    if (count >= 0) {
        resp_w_array(x->out, found);
        kbuf_append(x->out, out.p, out.len);
    } else if (found) {
        kbuf_append(x->out, out.p, out.len);
    } else {
        resp_w_null(x->out, x->proto);
    }
    kbuf_close(&out);
    flist_free(&l);
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: pops up to count
 * elements from the first non-empty list, as redis' lmpopGenericCommand:
 * [key, [elements]], or a null array when every list is empty. */
void cmd_lmpop(cmd_ctx *x) {
    int left, nk;
    long long count;
    if (arg_mpop(x, 1, "left", "right", &left, &nk, &count)) return;
    int w = 2 + nk;
    for (int i = 2; i < w; i++) {
        kbuf out;
        kbuf_init(&out);
        long n = list_pop_n(x, x->argv[i], x->argvlen[i], left, count, &out);
        if (n > 0) {
            resp_w_array(x->out, 2);
            resp_w_bulk(x->out, x->argv[i], x->argvlen[i]);
            resp_w_array(x->out, (size_t)n);
            kbuf_append(x->out, out.p, out.len);
        }
        kbuf_close(&out);
        if (n) return; /* popped, or replied an error */
    }
    resp_w_null_array(x->out, x->proto);
}

long list_pop_n(cmd_ctx *x, const char *k, size_t kl, int left, long long count, kbuf *out) {
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, k, kl, STORE_T_LIST, &o);
    if (r <= 0) {
        store_txn_abort(t);
        return r < 0 ? -1 : 0;
    }
    size_t n = (unsigned long long)count < o.size ? (size_t)count : o.size;
    size_t start = out->len;
    int rc = 0;
    for (size_t e = 0; e < n && !rc; e++) {
        uint64_t at = left ? 0 : o.size - 1;
        store_value v;
        rc = el_get(x, t, k, kl, &o, at, &v);
        if (rc) break;
        resp_w_bulk(out, v.data, v.len);
        store_value_release(&v);
        rc = el_del(x, t, k, kl, &o, at);
        if (left) o.head++;
        o.size--;
    }
    if (!rc) rc = obj_save(x, t, k, kl, &o);
    if (done(x, t, rc)) {
        out->len = start;
        return -1;
    }
    return (long)n;
}
