/* cmd_hash.c - hashes (DESIGN.md §14): one metadata record per key and one
 * record per field (db.h). Semantics and error texts follow redis-server
 * 7.0 (t_hash.c). Writes read the metadata and the fields they touch
 * through the txn; whole-hash reads scan the key's field range. */
#include "node/cmd.h"
#include "core/err.h"
#include "node/db.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fmt_ld(char *buf, size_t cap, long double v);            /* cmd_string.c */
int scan_cursor(cmd_ctx *x, int i, unsigned long long *out); /* cmd_keyspace.c */
int scan_options(cmd_ctx *x, int first, const char **pat, size_t *patlen, long long *count,
                 int *type);

#define K(x) (x)->argv[1], (x)->argvlen[1]
#define SCAN_WHOLE 2048 /* HSCAN/SSCAN reply a key of up to this many fields at once */

/* Ends a write: commits, or aborts and replies the storage error. Returns 0
 * when committed. */
static int done(cmd_ctx *x, store_txn *t, int rc) {
    return db_finish(x, t, rc);
}

/* Reads the hash for a read-only command. 1 found, 0 absent, -1 replied. */
static int hash_read(cmd_ctx *x, obj *o) {
    return obj_lookup(x, NULL, K(x), STORE_T_HASH, o);
}

static void hset_generic(cmd_ctx *x, const char *name, int reply_count) {
    if (x->argc % 2 != 0) {
        reply_errf(x, "ERR wrong number of arguments for '%s' command", name);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    if (obj_lookup(x, t, K(x), STORE_T_HASH, &o) < 0) {
        store_txn_abort(t);
        return;
    }
    long long added = 0;
    int rc = 0;
    for (int i = 2; i < x->argc && !rc; i += 2) {
        int existed = 0;
        store_value v;
        int g = sub_get(x, t, K(x), &o, x->argv[i], x->argvlen[i], &v);
        if (g == 0) {
            existed = 1;
            store_value_release(&v);
        } else if (g != KEEL_ENOTFOUND) {
            rc = g;
            break;
        }
        rc = sub_put(x, t, K(x), &o, x->argv[i], x->argvlen[i], x->argv[i + 1], x->argvlen[i + 1]);
        if (!existed) added++;
    }
    o.size += (uint64_t)added;
    if (!rc) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc) == 0) {
        if (reply_count)
            resp_w_int(x->out, added);
        else
            reply_ok(x);
    }
}

void cmd_hset(cmd_ctx *x) {
    hset_generic(x, "hset", 1);
}
void cmd_hmset(cmd_ctx *x) {
    hset_generic(x, "hmset", 0);
}

void cmd_hsetnx(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    if (obj_lookup(x, t, K(x), STORE_T_HASH, &o) < 0) {
        store_txn_abort(t);
        return;
    }
    store_value v;
    int g = sub_get(x, t, K(x), &o, x->argv[2], x->argvlen[2], &v);
    if (g == 0) {
        store_value_release(&v);
        store_txn_abort(t);
        resp_w_int(x->out, 0);
        return;
    }
    int rc = g == KEEL_ENOTFOUND ? 0 : g;
    if (!rc) rc = sub_put(x, t, K(x), &o, x->argv[2], x->argvlen[2], x->argv[3], x->argvlen[3]);
    o.size++;
    if (!rc) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc) == 0) resp_w_int(x->out, 1);
}

void cmd_hget(cmd_ctx *x) {
    obj o;
    int r = hash_read(x, &o);
    if (r < 0) return;
    store_value v;
    if (r && sub_get(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &v) == 0) {
        resp_w_bulk(x->out, v.data, v.len);
        store_value_release(&v);
    } else {
        resp_w_null(x->out, x->proto);
    }
}

void cmd_hmget(cmd_ctx *x) {
    obj o;
    int r = hash_read(x, &o);
    if (r < 0) return;
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        store_value v;
        if (r && sub_get(x, NULL, K(x), &o, x->argv[i], x->argvlen[i], &v) == 0) {
            resp_w_bulk(x->out, v.data, v.len);
            store_value_release(&v);
        } else {
            resp_w_null(x->out, x->proto);
        }
    }
}

void cmd_hdel(cmd_ctx *x) {
    db_del_fields(x, STORE_T_HASH);
}

void cmd_hlen(cmd_ctx *x) {
    obj o;
    int r = hash_read(x, &o);
    if (r >= 0) resp_w_int(x->out, r ? (long long)o.size : 0);
}

void cmd_hstrlen(cmd_ctx *x) {
    obj o;
    int r = hash_read(x, &o);
    if (r < 0) return;
    store_value v;
    long long n = 0;
    if (r && sub_get(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &v) == 0) {
        n = (long long)v.len;
        store_value_release(&v);
    }
    resp_w_int(x->out, n);
}

void cmd_hexists(cmd_ctx *x) {
    obj o;
    int r = hash_read(x, &o);
    if (r < 0) return;
    store_value v;
    int e = r && sub_get(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &v) == 0;
    if (e) store_value_release(&v);
    resp_w_int(x->out, e);
}

static int parse_ld(const char *s, size_t len, long double *out) {
    char buf[5600];
    if (len == 0 || len >= sizeof buf || memchr(s, 0, len)) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (isspace((unsigned char)buf[0])) return -1;
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if (*end || isnan(v) || (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)))
        return -1;
    *out = v;
    return 0;
}

/* The shared half of HINCRBY and HINCRBYFLOAT: opens the hash and reads
 * field argv[2] through parse into cur (left as the caller set it when the
 * field is absent). Returns 1 with t open, or 0 after replying (WRONGTYPE,
 * or notnum when the field's value does not parse) with t closed. */
typedef struct hincr {
    store_txn *t;
    obj o;
    int g, isnew; /* sub_get's result; 1 if the field is absent */
} hincr;

static int hincr_open(cmd_ctx *x, hincr *h, int (*parse)(const char *, size_t, void *), void *cur,
                      const char *notnum) {
    h->t = store_txn_begin(x->srv->st);
    if (obj_lookup(x, h->t, K(x), STORE_T_HASH, &h->o) < 0) {
        store_txn_abort(h->t);
        return 0;
    }
    store_value v;
    h->g = sub_get(x, h->t, K(x), &h->o, x->argv[2], x->argvlen[2], &v);
    h->isnew = h->g == KEEL_ENOTFOUND;
    if (h->g == 0) {
        int bad = parse(v.data, v.len, cur);
        store_value_release(&v);
        if (bad) {
            store_txn_abort(h->t);
            reply_err(x, notnum);
            return 0;
        }
    }
    return 1;
}

/* Stores the new value num[0..n) (n < 0: it could not be written) and
 * closes t; 0 if the reply is the caller's to write. */
static int hincr_store(cmd_ctx *x, hincr *h, const char *num, int n) {
    int rc = n < 0 ? KEEL_EINVAL : h->g && !h->isnew ? h->g : 0;
    if (!rc) rc = sub_put(x, h->t, K(x), &h->o, x->argv[2], x->argvlen[2], num, (size_t)n);
    if (h->isnew) h->o.size++;
    if (!rc && h->isnew) rc = obj_save(x, h->t, K(x), &h->o);
    return done(x, h->t, rc);
}

static int parse_ll_cb(const char *s, size_t len, void *out) {
    return arg_ll(s, len, out);
}

static int parse_ld_cb(const char *s, size_t len, void *out) {
    return parse_ld(s, len, out);
}

void cmd_hincrby(cmd_ctx *x) {
    long long by, cur = 0;
    if (arg_ll(x->argv[3], x->argvlen[3], &by)) {
        reply_not_int(x);
        return;
    }
    hincr h;
    if (!hincr_open(x, &h, parse_ll_cb, &cur, "ERR hash value is not an integer")) return;
    if ((by < 0 && cur < 0 && by < LLONG_MIN - cur) ||
        (by > 0 && cur > 0 && by > LLONG_MAX - cur)) {
        store_txn_abort(h.t);
        reply_err(x, "ERR increment or decrement would overflow");
        return;
    }
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", cur + by);
    if (hincr_store(x, &h, num, n) == 0) resp_w_int(x->out, cur + by);
}

void cmd_hincrbyfloat(cmd_ctx *x) {
    long double by, cur = 0;
    if (parse_ld(x->argv[3], x->argvlen[3], &by)) {
        reply_err(x, "ERR value is not a valid float");
        return;
    }
    if (isnan(by) || isinf(by)) {
        reply_err(x, "ERR value is NaN or Infinity");
        return;
    }
    hincr h;
    if (!hincr_open(x, &h, parse_ld_cb, &cur, "ERR hash value is not a float")) return;
    long double r = cur + by;
    if (isnan(r) || isinf(r)) {
        store_txn_abort(h.t);
        reply_err(x, "ERR increment would produce NaN or Infinity");
        return;
    }
    char num[5600];
    int n = fmt_ld(num, sizeof num, r);
    if (hincr_store(x, &h, num, n) == 0) resp_w_bulk(x->out, num, (size_t)n);
}

/* HKEYS, HVALS, HGETALL: what = 1 fields, 2 values, 3 both. */
static void hgetall_generic(cmd_ctx *x, int what) {
    obj o;
    int r = hash_read(x, &o);
    if (r < 0) return;
    flist l;
    flist_init(&l);
    long n = r ? flist_load(x, K(x), &o, 0, SIZE_MAX, &l) : 0;
    if (n < 0) {
        flist_free(&l);
        reply_storage(x, (int)n);
        return;
    }
    if (what == 3)
        resp_w_map(x->out, x->proto, l.n);
    else if (what == 1)
        resp_w_array(x->out, l.n);
    else
        resp_w_array(x->out, l.n);
    for (size_t i = 0; i < l.n; i++) {
        if (what & 1) resp_w_bulk(x->out, flist_f(&l, i), l.e[i].fl);
        if (what & 2) resp_w_bulk(x->out, flist_v(&l, i), l.e[i].vl);
    }
    flist_free(&l);
}

void cmd_hkeys(cmd_ctx *x) {
    hgetall_generic(x, 1);
}
void cmd_hvals(cmd_ctx *x) {
    hgetall_generic(x, 2);
}
void cmd_hgetall(cmd_ctx *x) {
    hgetall_generic(x, 3);
}

/* HSCAN and SSCAN: the cursor is the offset of the next field in field
 * order. with_values: HSCAN's field, value pairs. */
void scan_fields(cmd_ctx *x, uint8_t type, int with_values) {
    unsigned long long cur;
    const char *pat;
    size_t patlen;
    long long count;
    if (scan_cursor(x, 2, &cur) || scan_options(x, 3, &pat, &patlen, &count, NULL)) return;
    obj o;
    int r = obj_lookup(x, NULL, K(x), type, &o);
    if (r < 0) return;
    /* A small key comes back whole, as redis does for its compact
     * encodings: the offset cursor below can skip fields that stay if
     * others are deleted between calls. */
    if (r && cur == 0 && o.size <= SCAN_WHOLE) count = SCAN_WHOLE;
    flist l;
    flist_init(&l);
    long n = r ? flist_load(x, K(x), &o, (size_t)cur, (size_t)count, &l) : 0;
    if (n < 0) {
        flist_free(&l);
        reply_storage(x, (int)n);
        return;
    }
    unsigned long long next = (size_t)n == (size_t)count ? cur + (unsigned long long)n : 0;
    size_t matched = 0;
    for (size_t i = 0; i < l.n; i++)
        if (!pat || db_glob(pat, patlen, flist_f(&l, i), l.e[i].fl, 0)) matched++;
    char num[32];
    int nl = snprintf(num, sizeof num, "%llu", next);
    resp_w_array(x->out, 2);
    resp_w_bulk(x->out, num, (size_t)nl);
    resp_w_array(x->out, matched * (with_values ? 2 : 1));
    for (size_t i = 0; i < l.n; i++) {
        if (pat && !db_glob(pat, patlen, flist_f(&l, i), l.e[i].fl, 0)) continue;
        resp_w_bulk(x->out, flist_f(&l, i), l.e[i].fl);
        if (with_values) resp_w_bulk(x->out, flist_v(&l, i), l.e[i].vl);
    }
    flist_free(&l);
}

void cmd_hscan(cmd_ctx *x) {
    scan_fields(x, STORE_T_HASH, 1);
}

/* Random picks for HRANDFIELD and SRANDMEMBER: fills idx[0..want) with
 * indexes into [0, n): distinct when distinct, else with repetitions. */
void pick_random(size_t *idx, size_t want, size_t n, int distinct) {
    if (!distinct) {
        for (size_t i = 0; i < want; i++)
            idx[i] = (size_t)((unsigned long)rand() % n);
        return;
    }
    size_t *all = malloc(n * sizeof *all);
    if (!all) {
        for (size_t i = 0; i < want; i++)
            idx[i] = i;
        return;
    }
    for (size_t i = 0; i < n; i++)
        all[i] = i;
    for (size_t i = 0; i < want; i++) { /* partial Fisher-Yates */
        size_t j = i + (size_t)((unsigned long)rand() % (n - i));
        size_t tmp = all[i];
        all[i] = all[j];
        all[j] = tmp;
        idx[i] = all[i];
    }
    free(all);
}

void cmd_hrandfield(cmd_ctx *x) {
    long long count = 0;
    int withvalues = 0, has_count = x->argc >= 3;
    if (x->argc > 4 || (x->argc == 4 && !arg_is(x, 3, "withvalues"))) {
        reply_syntax(x);
        return;
    }
    withvalues = x->argc == 4;
    if (has_count) {
        if (arg_ll(x->argv[2], x->argvlen[2], &count)) {
            reply_not_int(x);
            return;
        }
        if (count < -LONG_MAX || (withvalues && count < -LONG_MAX / 2)) {
            reply_err(x, "ERR value is out of range");
            return;
        }
    }
    obj o;
    int r = hash_read(x, &o);
    if (r < 0) return;
    if (!r || (has_count && count == 0)) {
        if (has_count)
            resp_w_array(x->out, 0);
        else
            resp_w_null(x->out, x->proto);
        return;
    }
    flist l;
    flist_init(&l);
    long n = flist_load(x, K(x), &o, 0, SIZE_MAX, &l);
    if (n <= 0) {
        flist_free(&l);
        if (n < 0)
            reply_storage(x, (int)n);
        else if (has_count)
            resp_w_array(x->out, 0);
        else
            resp_w_null(x->out, x->proto);
        return;
    }
    if (!has_count) {
        size_t i = (size_t)((unsigned long)rand() % l.n);
        resp_w_bulk(x->out, flist_f(&l, i), l.e[i].fl);
        flist_free(&l);
        return;
    }
    int distinct = count > 0;
    size_t want =
        distinct ? ((unsigned long long)count < l.n ? (size_t)count : l.n) : (size_t)(-count);
    size_t *idx = malloc((want ? want : 1) * sizeof *idx);
    if (!idx) {
        flist_free(&l);
        reply_storage(x, KEEL_ENOMEM);
        return;
    }
    pick_random(idx, want, l.n, distinct);
    if (withvalues && x->proto == 3)
        resp_w_array(x->out, want);
    else
        resp_w_array(x->out, want * (withvalues ? 2 : 1));
    for (size_t j = 0; j < want; j++) {
        size_t i = idx[j];
        if (withvalues && x->proto == 3) resp_w_array(x->out, 2);
        resp_w_bulk(x->out, flist_f(&l, i), l.e[i].fl);
        if (withvalues) resp_w_bulk(x->out, flist_v(&l, i), l.e[i].vl);
    }
    free(idx);
    flist_free(&l);
}
