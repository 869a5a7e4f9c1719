/* cmd_set.c - sets (DESIGN.md §14): one metadata record per key and one
 * empty record per member (db.h). Semantics and error texts follow
 * redis-server 7.0 (t_set.c). Multi-key commands work within one slot
 * (dispatch replies -CROSSSLOT otherwise). Members come back in byte order
 * (the record order), a valid order for an unordered set. */
#include "node/cmd.h"
#include "core/err.h"
#include "node/db.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void scan_fields(cmd_ctx *x, uint8_t type, int with_values);        /* cmd_hash.c */
void pick_random(size_t *idx, size_t want, size_t n, int distinct); /* cmd_hash.c */

#define K(x) (x)->argv[1], (x)->argvlen[1]

static int done(cmd_ctx *x, store_txn *t, int rc) {
    return db_finish(x, t, rc);
}

/* Whether member m is in o (key k), through t or the store. */
static int is_member(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o,
                     const char *m, size_t ml, int *rc) {
    store_value v;
    *rc = sub_get(x, t, k, kl, o, m, ml, &v);
    if (*rc == 0) {
        store_value_release(&v);
        return 1;
    }
    if (*rc == KEEL_ENOTFOUND) *rc = 0;
    return 0;
}

/* Adds members argv[first..] to the set o of key k in t. *added counts them. */
static int add_members(cmd_ctx *x, store_txn *t, const char *k, size_t kl, obj *o, char **m,
                       const size_t *ml, size_t n, long long *added) {
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (is_member(x, t, k, kl, o, m[i], ml[i], &rc) || rc) continue;
        rc = sub_put(x, t, k, kl, o, m[i], ml[i], "", 0);
        if (!rc) {
            o->size++;
            (*added)++;
        }
    }
    return rc;
}

void cmd_sadd(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    if (obj_lookup(x, t, K(x), STORE_T_SET, &o) < 0) {
        store_txn_abort(t);
        return;
    }
    long long added = 0;
    int rc =
        add_members(x, t, K(x), &o, x->argv + 2, x->argvlen + 2, (size_t)(x->argc - 2), &added);
    if (!rc && added) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc) == 0) resp_w_int(x->out, added);
}

void cmd_srem(cmd_ctx *x) {
    db_del_fields(x, STORE_T_SET);
}

void cmd_scard(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_SET, &o);
    if (r >= 0) resp_w_int(x->out, r ? (long long)o.size : 0);
}

void cmd_sismember(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_SET, &o), rc = 0;
    if (r < 0) return;
    int m = r && is_member(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &rc);
    resp_w_int(x->out, m);
}

void cmd_smismember(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_SET, &o), rc = 0;
    if (r < 0) return;
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++)
        resp_w_int(x->out, r && is_member(x, NULL, K(x), &o, x->argv[i], x->argvlen[i], &rc));
}

/* Loads the members of set key k: 1 found, 0 absent (l empty), -1 replied. */
static int load_set(cmd_ctx *x, const char *k, size_t kl, flist *l, obj *o) {
    int r = obj_lookup(x, NULL, k, kl, STORE_T_SET, o);
    if (r <= 0) return r;
    long n = flist_load(x, k, kl, o, 0, SIZE_MAX, l);
    if (n < 0) {
        reply_storage(x, (int)n);
        return -1;
    }
    return 1;
}

static void reply_members(cmd_ctx *x, const flist *l, int as_set) {
    if (as_set)
        resp_w_set(x->out, x->proto, l->n);
    else
        resp_w_array(x->out, l->n);
    for (size_t i = 0; i < l->n; i++)
        resp_w_bulk(x->out, flist_f(l, i), l->e[i].fl);
}

void cmd_smembers(cmd_ctx *x) {
    flist l;
    flist_init(&l);
    obj o;
    if (load_set(x, K(x), &l, &o) >= 0) reply_members(x, &l, 1);
    flist_free(&l);
}

void cmd_sscan(cmd_ctx *x) {
    scan_fields(x, STORE_T_SET, 0);
}

/* Parses a count in [lo, LONG_MAX] as getRangeLongFromObjectOrReply. */
static int count_arg(cmd_ctx *x, int i, long long lo, const char *range_msg, long long *out) {
    if (arg_ll(x->argv[i], x->argvlen[i], out)) {
        if (lo == 0) /* redis' getPositiveLong: one message for both */
            reply_err(x, range_msg);
        else
            reply_not_int(x);
        return -1;
    }
    if (*out < lo || *out > LONG_MAX) {
        reply_err(x, range_msg);
        return -1;
    }
    return 0;
}

void cmd_srandmember(cmd_ctx *x) {
    long long count = 0;
    if (x->argc > 3) {
        reply_syntax(x);
        return;
    }
    int has_count = x->argc == 3;
    if (has_count && count_arg(x, 2, -LONG_MAX, "ERR value is out of range", &count)) return;
    flist l;
    flist_init(&l);
    obj o;
    int r = load_set(x, K(x), &l, &o);
    if (r < 0) goto out;
    if (!has_count) {
        if (!l.n) {
            resp_w_null(x->out, x->proto);
        } else {
            size_t i = (size_t)((unsigned long)rand() % l.n);
            resp_w_bulk(x->out, flist_f(&l, i), l.e[i].fl);
        }
        goto out;
    }
    if (!l.n || count == 0) {
        resp_w_array(x->out, 0);
        goto out;
    }
    int distinct = count > 0;
    size_t want =
        distinct ? ((unsigned long long)count < l.n ? (size_t)count : l.n) : (size_t)(-count);
    size_t *idx = malloc(want * sizeof *idx);
    if (!idx) {
        reply_storage(x, KEEL_ENOMEM);
        goto out;
    }
    pick_random(idx, want, l.n, distinct);
    resp_w_array(x->out, want);
    for (size_t j = 0; j < want; j++)
        resp_w_bulk(x->out, flist_f(&l, idx[j]), l.e[idx[j]].fl);
    free(idx);
out:
    flist_free(&l);
}

void cmd_spop(cmd_ctx *x) {
    long long count = 1;
    if (x->argc > 3) {
        reply_syntax(x);
        return;
    }
    int has_count = x->argc == 3;
    if (has_count && count_arg(x, 2, 0, "ERR value is out of range, must be positive", &count))
        return;
    flist l;
    flist_init(&l);
    obj o;
    int r = load_set(x, K(x), &l, &o);
    if (r <= 0 || count == 0) {
        if (r == 0 || (r > 0 && count == 0)) {
            if (has_count)
                resp_w_set(x->out, x->proto, 0);
            else
                resp_w_null(x->out, x->proto);
        }
        flist_free(&l);
        return;
    }
    size_t want = (unsigned long long)count < l.n ? (size_t)count : l.n;
    size_t *idx = malloc(want * sizeof *idx);
    if (!idx) {
        flist_free(&l);
        reply_storage(x, KEEL_ENOMEM);
        return;
    }
    pick_random(idx, want, l.n, 1);
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = 0;
    for (size_t j = 0; j < want && !rc; j++)
        rc = sub_del(x, t, K(x), &o, flist_f(&l, idx[j]), l.e[idx[j]].fl, NULL);
    o.size -= want;
    if (!rc) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc) == 0) {
        if (has_count) resp_w_set(x->out, x->proto, want);
        for (size_t j = 0; j < want; j++)
            resp_w_bulk(x->out, flist_f(&l, idx[j]), l.e[idx[j]].fl);
    }
    free(idx);
    flist_free(&l);
}

void cmd_smove(cmd_ctx *x) {
    const char *sk = x->argv[1], *dk = x->argv[2], *m = x->argv[3];
    size_t skl = x->argvlen[1], dkl = x->argvlen[2], ml = x->argvlen[3];
    store_txn *t = store_txn_begin(x->srv->st);
    obj so, dobj;
    int sr = obj_lookup(x, t, sk, skl, STORE_T_SET, &so);
    if (sr < 0) {
        store_txn_abort(t);
        return;
    }
    if (sr == 0) {
        store_txn_abort(t);
        resp_w_int(x->out, 0);
        return;
    }
    if (obj_lookup(x, t, dk, dkl, STORE_T_SET, &dobj) < 0) {
        store_txn_abort(t);
        return;
    }
    int rc = 0;
    int in = is_member(x, t, sk, skl, &so, m, ml, &rc);
    if (rc || !in || (skl == dkl && memcmp(sk, dk, skl) == 0)) {
        store_txn_abort(t);
        if (rc)
            reply_storage(x, rc);
        else
            resp_w_int(x->out, in);
        return;
    }
    rc = sub_del(x, t, sk, skl, &so, m, ml, NULL);
    so.size--;
    if (!rc) rc = obj_save(x, t, sk, skl, &so);
    long long added = 0;
    char *mv[1] = {(char *)m};
    size_t mlv[1] = {ml};
    if (!rc) rc = add_members(x, t, dk, dkl, &dobj, mv, mlv, 1, &added);
    if (!rc && added) rc = obj_save(x, t, dk, dkl, &dobj);
    if (done(x, t, rc) == 0) resp_w_int(x->out, 1);
}

/* ---- Algebra -------------------------------------------------------------------- */

enum { OP_INTER, OP_UNION, OP_DIFF };

typedef struct memref {
    const char *p;
    size_t len;
} memref;

static int memref_cmp(const void *a, const void *b) {
    const memref *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, m);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Computes op over the sets keys[0..n) into out. limit (SINTERCARD) stops
 * an intersection early; 0 = none. Returns 0 or -1 after replying. */
static int set_op(cmd_ctx *x, int op, char **keys, const size_t *kl, size_t n, size_t limit,
                  flist *out) {
    obj *o = calloc(n, sizeof *o);
    int *found = calloc(n, sizeof *found);
    int ret = -1;
    if (!o || !found) {
        reply_storage(x, KEEL_ENOMEM);
        goto out;
    }
    for (size_t i = 0; i < n; i++) /* type errors first, as redis */
        if ((found[i] = obj_lookup(x, NULL, keys[i], kl[i], STORE_T_SET, &o[i])) < 0) goto out;
    if (op == OP_UNION) {
        flist all;
        flist_init(&all);
        for (size_t i = 0; i < n; i++)
            if (found[i] && flist_load(x, keys[i], kl[i], &o[i], 0, SIZE_MAX, &all) < 0) {
                flist_free(&all);
                reply_storage(x, KEEL_EIO);
                goto out;
            }
        memref *r = malloc((all.n ? all.n : 1) * sizeof *r);
        if (!r) {
            flist_free(&all);
            reply_storage(x, KEEL_ENOMEM);
            goto out;
        }
        for (size_t i = 0; i < all.n; i++)
            r[i] = (memref){flist_f(&all, i), all.e[i].fl};
        qsort(r, all.n, sizeof *r, memref_cmp);
        for (size_t i = 0; i < all.n; i++)
            if (i == 0 || memref_cmp(&r[i], &r[i - 1]) != 0)
                flist_add(out, r[i].p, r[i].len, "", 0);
        free(r);
        flist_free(&all);
        ret = 0;
        goto out;
    }
    /* INTER walks the smallest set, DIFF the first; the others are probed. */
    size_t base = 0;
    if (op == OP_INTER) {
        for (size_t i = 0; i < n; i++) {
            if (!found[i]) {
                ret = 0; /* an empty set: empty result */
                goto out;
            }
            if (o[i].size < o[base].size) base = i;
        }
    } else if (!found[0]) {
        ret = 0;
        goto out;
    }
    flist b;
    flist_init(&b);
    if (flist_load(x, keys[base], kl[base], &o[base], 0, SIZE_MAX, &b) < 0) {
        flist_free(&b);
        reply_storage(x, KEEL_EIO);
        goto out;
    }
    for (size_t j = 0; j < b.n && !(limit && out->n >= limit); j++) {
        int keep = 1, rc = 0;
        for (size_t i = 0; i < n && keep; i++) {
            if (i == base) continue;
            if (op == OP_DIFF &&
                (!found[i] || (kl[i] == kl[0] && !memcmp(keys[i], keys[0], kl[0])))) {
                if (found[i]) keep = 0; /* diff against itself */
                continue;
            }
            int m = is_member(x, NULL, keys[i], kl[i], &o[i], flist_f(&b, j), b.e[j].fl, &rc);
            keep = op == OP_INTER ? m : !m;
        }
        if (keep) flist_add(out, flist_f(&b, j), b.e[j].fl, "", 0);
    }
    flist_free(&b);
    ret = 0;
out:
    free(o);
    free(found);
    return ret;
}

static void algebra(cmd_ctx *x, int op) {
    flist r;
    flist_init(&r);
    if (set_op(x, op, x->argv + 1, x->argvlen + 1, (size_t)(x->argc - 1), 0, &r) == 0)
        reply_members(x, &r, 1);
    flist_free(&r);
}

static void algebra_store(cmd_ctx *x, int op) {
    flist r;
    flist_init(&r);
    if (set_op(x, op, x->argv + 2, x->argvlen + 2, (size_t)(x->argc - 2), 0, &r) == 0) {
        store_txn *t = store_txn_begin(x->srv->st);
        int rc = db_del(x, t, K(x), NULL);
        obj o = {.type = STORE_T_SET, .version = store_new_version(x->srv->st)};
        for (size_t i = 0; i < r.n && !rc; i++)
            rc = sub_put(x, t, K(x), &o, flist_f(&r, i), r.e[i].fl, "", 0);
        o.size = r.n;
        if (!rc && r.n) rc = obj_save(x, t, K(x), &o);
        if (done(x, t, rc) == 0) resp_w_int(x->out, (long long)r.n);
    }
    flist_free(&r);
}

void cmd_sinter(cmd_ctx *x) {
    algebra(x, OP_INTER);
}
void cmd_sunion(cmd_ctx *x) {
    algebra(x, OP_UNION);
}
void cmd_sdiff(cmd_ctx *x) {
    algebra(x, OP_DIFF);
}
void cmd_sinterstore(cmd_ctx *x) {
    algebra_store(x, OP_INTER);
}
void cmd_sunionstore(cmd_ctx *x) {
    algebra_store(x, OP_UNION);
}
void cmd_sdiffstore(cmd_ctx *x) {
    algebra_store(x, OP_DIFF);
}

/* SINTERCARD numkeys key [key ...] [LIMIT limit]; dispatch routed the keys
 * (cmd_def.keynum). */
void cmd_sintercard(cmd_ctx *x) {
    long long nk, limit = 0;
    if (arg_ll(x->argv[1], x->argvlen[1], &nk) || nk <= 0) {
        reply_err(x, "ERR numkeys should be greater than 0");
        return;
    }
    if (nk > x->argc - 2) {
        reply_err(x, "ERR Number of keys can't be greater than number of args");
        return;
    }
    for (int j = 2 + (int)nk; j < x->argc; j += 2) {
        if (arg_is(x, j, "limit") && j + 1 < x->argc) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &limit) || limit < 0) {
                reply_err(x, "ERR LIMIT can't be negative");
                return;
            }
        } else {
            reply_syntax(x);
            return;
        }
    }
    flist r;
    flist_init(&r);
    if (set_op(x, OP_INTER, x->argv + 2, x->argvlen + 2, (size_t)nk, (size_t)limit, &r) == 0)
        resp_w_int(x->out, (long long)r.n);
    flist_free(&r);
}
