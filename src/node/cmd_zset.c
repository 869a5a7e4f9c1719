/* cmd_zset.c - sorted sets, PARTIAL (DESIGN.md §14): one metadata record
 * per key and one record per member holding its score (a double, 8 bytes
 * in host order... stored as IEEE-754 bits, u64 big-endian). There is no
 * second index by score yet: rank and score ranges load the members and
 * sort them, O(n log n) per call. Semantics and error texts follow
 * redis-server 7.0 (t_zset.c) for the commands here. */
#include "node/cmd.h"
#include "core/err.h"
#include "node/db.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void scan_fields(cmd_ctx *x, uint8_t type, int with_values); /* cmd_hash.c */
int scan_cursor(cmd_ctx *x, int i, unsigned long long *out); /* cmd_keyspace.c */
int scan_options(cmd_ctx *x, int first, const char **pat, size_t *patlen, long long *count,
                 int *type);

#define K(x) (x)->argv[1], (x)->argvlen[1]

static void enc_score(char out[8], double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        out[i] = (char)(u >> (56 - 8 * i));
}

static double dec_score(const char *p) {
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = u << 8 | (uint8_t)p[i];
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* redis' getDoubleFromObject: the whole argument, no spaces, not NaN. */
static int arg_double(const char *s, size_t len, double *out) {
    char buf[128];
    if (len == 0 || len >= sizeof buf || memchr(s, 0, len)) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (buf[0] == ' ' || buf[len - 1] == ' ') return -1;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || isnan(d) || (errno == ERANGE && d == 0 && 0)) return -1;
    *out = d;
    return 0;
}

static int done(cmd_ctx *x, store_txn *t, int rc) {
    return db_finish(x, t, rc);
}

static int zget(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
                size_t ml, double *score) {
    store_value v;
    int rc = sub_get(x, t, k, kl, o, m, ml, &v);
    if (rc) return rc;
    if (v.len != 8)
        rc = KEEL_ECORRUPT;
    else
        *score = dec_score(v.data);
    store_value_release(&v);
    return rc;
}

static int zput(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
                size_t ml, double score) {
    char sc[8];
    enc_score(sc, score);
    return sub_put(x, t, k, kl, o, m, ml, sc, 8);
}

enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_CH = 16, Z_INCR = 32 };

static void zadd_generic(cmd_ctx *x, unsigned flags, int first) {
    int j = first;
    for (; j < x->argc; j++) {
        if (arg_is(x, j, "nx"))
            flags |= Z_NX;
        else if (arg_is(x, j, "xx"))
            flags |= Z_XX;
        else if (arg_is(x, j, "gt"))
            flags |= Z_GT;
        else if (arg_is(x, j, "lt"))
            flags |= Z_LT;
        else if (arg_is(x, j, "ch"))
            flags |= Z_CH;
        else if (arg_is(x, j, "incr"))
            flags |= Z_INCR;
        else
            break;
    }
    int elements = x->argc - j;
    if (elements % 2 || !elements) {
        reply_syntax(x);
        return;
    }
    elements /= 2;
    if ((flags & Z_NX) && (flags & Z_XX)) {
        reply_err(x, "ERR XX and NX options at the same time are not compatible");
        return;
    }
    if (((flags & Z_GT) && (flags & Z_NX)) || ((flags & Z_LT) && (flags & Z_NX)) ||
        ((flags & Z_GT) && (flags & Z_LT))) {
        reply_err(x, "ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if ((flags & Z_INCR) && elements > 1) {
        reply_err(x, "ERR INCR option supports a single increment-element pair");
        return;
    }
    double *scores = malloc((size_t)elements * sizeof *scores);
    if (!scores) {
        reply_storage(x, KEEL_ENOMEM);
        return;
    }
    for (int i = 0; i < elements; i++)
        if (arg_double(x->argv[j + 2 * i], x->argvlen[j + 2 * i], &scores[i])) {
            free(scores);
            reply_err(x, "ERR value is not a valid float");
            return;
        }
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, K(x), STORE_T_ZSET, &o);
    if (r < 0) {
        store_txn_abort(t);
        free(scores);
        return;
    }
    long long added = 0, updated = 0, processed = 0;
    double last = 0;
    int rc = 0;
    for (int i = 0; i < elements && !rc; i++) {
        const char *m = x->argv[j + 2 * i + 1];
        size_t ml = x->argvlen[j + 2 * i + 1];
        double cur, score = scores[i];
        int g = zget(x, t, K(x), &o, m, ml, &cur);
        if (g == 0) {
            if (flags & Z_NX) continue;
            if (flags & Z_INCR) {
                score += cur;
                if (isnan(score)) {
                    store_txn_abort(t);
                    free(scores);
                    reply_err(x, "ERR resulting score is not a number (NaN)");
                    return;
                }
            }
            if (((flags & Z_GT) && score <= cur) || ((flags & Z_LT) && score >= cur)) continue;
            last = score;
            processed++;
            if (score != cur) {
                rc = zput(x, t, K(x), &o, m, ml, score);
                updated++;
            }
        } else if (g == KEEL_ENOTFOUND) {
            if (flags & Z_XX) continue;
            rc = zput(x, t, K(x), &o, m, ml, score);
            o.size++;
            added++;
            processed++;
            last = score;
        } else {
            rc = g;
        }
    }
    free(scores);
    if (!rc && added) rc = obj_save(x, t, K(x), &o);
    if (done(x, t, rc)) return;
    if (flags & Z_INCR) {
        if (processed)
            resp_w_double(x->out, x->proto, last);
        else
            resp_w_null(x->out, x->proto);
    } else {
        resp_w_int(x->out, (flags & Z_CH) ? added + updated : added);
    }
}

void cmd_zadd(cmd_ctx *x) {
    zadd_generic(x, 0, 2);
}

void cmd_zincrby(cmd_ctx *x) {
    /* ZINCRBY key incr member = ZADD key INCR incr member */
    zadd_generic(x, Z_INCR, 2);
}

void cmd_zcard(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r >= 0) resp_w_int(x->out, r ? (long long)o.size : 0);
}

void cmd_zscore(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    double s;
    if (r && zget(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &s) == 0)
        resp_w_double(x->out, x->proto, s);
    else
        resp_w_null(x->out, x->proto);
}

void cmd_zmscore(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        double s;
        if (r && zget(x, NULL, K(x), &o, x->argv[i], x->argvlen[i], &s) == 0)
            resp_w_double(x->out, x->proto, s);
        else
            resp_w_null(x->out, x->proto);
    }
}

void cmd_zrem(cmd_ctx *x) {
    db_del_fields(x, STORE_T_ZSET);
}

/* ---- Ordered reads (no score index yet: load and sort) ------------------- */

typedef struct zel {
    const char *m;
    size_t ml;
    double s;
} zel;

static int zel_cmp(const void *a, const void *b) {
    const zel *x = a, *y = b;
    if (x->s < y->s) return -1;
    if (x->s > y->s) return 1;
    size_t n = x->ml < y->ml ? x->ml : y->ml;
    int c = memcmp(x->m, y->m, n);
    return c ? c : (x->ml > y->ml) - (x->ml < y->ml);
}

/* Loads key argv[1] sorted by (score, member). 1 found, 0 absent, -1 replied. */
static int zload(cmd_ctx *x, flist *l, zel **out, size_t *n) {
    obj o;
    *out = NULL;
    *n = 0;
    flist_init(l);
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r <= 0) return r;
    long got = flist_load(x, K(x), &o, 0, SIZE_MAX, l);
    zel *e = got >= 0 ? malloc((l->n ? l->n : 1) * sizeof *e) : NULL;
    if (!e) {
        reply_storage(x, got < 0 ? (int)got : KEEL_ENOMEM);
        return -1;
    }
    for (size_t i = 0; i < l->n; i++)
        e[i] = (zel){flist_f(l, i), l->e[i].fl, l->e[i].vl == 8 ? dec_score(flist_v(l, i)) : 0};
    qsort(e, l->n, sizeof *e, zel_cmp);
    *out = e;
    *n = l->n;
    return 1;
}

static void reply_range(cmd_ctx *x, const zel *e, size_t *idx, size_t n, int withscores) {
    if (withscores && x->proto == 3)
        resp_w_array(x->out, n);
    else
        resp_w_array(x->out, n * (withscores ? 2 : 1));
    for (size_t i = 0; i < n; i++) {
        const zel *z = &e[idx[i]];
        if (withscores && x->proto == 3) resp_w_array(x->out, 2);
        resp_w_bulk(x->out, z->m, z->ml);
        if (withscores) resp_w_double(x->out, x->proto, z->s);
    }
}

/* A score bound: "(1.5" exclusive, "-inf", "+inf". */
static int score_bound(const char *s, size_t len, double *v, int *excl) {
    *excl = len > 0 && s[0] == '(';
    if (*excl) {
        s++;
        len--;
    }
    return arg_double(s, len, v);
}

static int in_min(double s, double min, int ex) {
    return ex ? s > min : s >= min;
}
static int in_max(double s, double max, int ex) {
    return ex ? s < max : s <= max;
}

/* ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES],
 * and the older forms through mode: 0 ZRANGE, 1 ZREVRANGE, 2 ZRANGEBYSCORE,
 * 3 ZREVRANGEBYSCORE. */
static void zrange_generic(cmd_ctx *x, int mode) {
    int byscore = mode >= 2, rev = mode == 1 || mode == 3, withscores = 0;
    long long offset = 0, limit = -1;
    int has_limit = 0;
    for (int j = 4; j < x->argc; j++) {
        if (arg_is(x, j, "withscores"))
            withscores = 1;
        else if (mode == 0 && arg_is(x, j, "byscore"))
            byscore = 1;
        else if (mode == 0 && arg_is(x, j, "rev"))
            rev = 1;
        else if (mode == 0 && arg_is(x, j, "bylex")) {
            reply_err(x, "ERR BYLEX is not supported by keel yet");
            return;
        } else if (arg_is(x, j, "limit") && j + 2 < x->argc) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &offset) ||
                arg_ll(x->argv[j + 2], x->argvlen[j + 2], &limit)) {
                reply_not_int(x);
                return;
            }
            has_limit = 1;
            j += 2;
        } else {
            reply_syntax(x);
            return;
        }
    }
    if (has_limit && !byscore) {
        reply_err(x, "ERR syntax error, LIMIT is only supported in combination with either "
                     "BYSCORE or BYLEX");
        return;
    }
    /* arguments: for REV BYSCORE, the first bound is the max */
    const char *a = x->argv[2], *b = x->argv[3];
    size_t al = x->argvlen[2], bl = x->argvlen[3];
    long long start = 0, stop = 0;
    double min = 0, max = 0;
    int minex = 0, maxex = 0;
    if (byscore) {
        const char *mn = rev ? b : a, *mx = rev ? a : b;
        size_t mnl = rev ? bl : al, mxl = rev ? al : bl;
        if (score_bound(mn, mnl, &min, &minex) || score_bound(mx, mxl, &max, &maxex)) {
            reply_err(x, "ERR min or max is not a float");
            return;
        }
    } else if (arg_ll(a, al, &start) || arg_ll(b, bl, &stop)) {
        reply_not_int(x);
        return;
    }
    flist l;
    zel *e;
    size_t n;
    int r = zload(x, &l, &e, &n);
    if (r < 0) {
        flist_free(&l);
        return;
    }
    size_t *idx = malloc((n ? n : 1) * sizeof *idx), cnt = 0;
    if (!idx) {
        reply_storage(x, KEEL_ENOMEM);
        goto out;
    }
    if (byscore) {
        long long skip = offset;
        if (offset < 0) {
            cnt = 0;
        } else {
            for (size_t j = 0; j < n; j++) {
                size_t i = rev ? n - 1 - j : j;
                if (!in_min(e[i].s, min, minex) || !in_max(e[i].s, max, maxex)) continue;
                if (skip > 0) {
                    skip--;
                    continue;
                }
                if (limit >= 0 && (long long)cnt >= limit) break;
                idx[cnt++] = i;
            }
        }
    } else {
        long long len = (long long)n;
        if (start < 0) start += len;
        if (stop < 0) stop += len;
        if (start < 0) start = 0;
        if (!(start > stop || start >= len)) {
            if (stop >= len) stop = len - 1;
            for (long long j = start; j <= stop; j++)
                idx[cnt++] = rev ? (size_t)(len - 1 - j) : (size_t)j;
        }
    }
    reply_range(x, e, idx, cnt, withscores);
out:
    free(idx);
    free(e);
    flist_free(&l);
}

void cmd_zrange(cmd_ctx *x) {
    zrange_generic(x, 0);
}
void cmd_zrevrange(cmd_ctx *x) {
    zrange_generic(x, 1);
}
void cmd_zrangebyscore(cmd_ctx *x) {
    zrange_generic(x, 2);
}
void cmd_zrevrangebyscore(cmd_ctx *x) {
    zrange_generic(x, 3);
}

void cmd_zcount(cmd_ctx *x) {
    double min, max;
    int minex, maxex;
    if (score_bound(x->argv[2], x->argvlen[2], &min, &minex) ||
        score_bound(x->argv[3], x->argvlen[3], &max, &maxex)) {
        reply_err(x, "ERR min or max is not a float");
        return;
    }
    flist l;
    zel *e;
    size_t n;
    int r = zload(x, &l, &e, &n);
    if (r >= 0) {
        long long c = 0;
        for (size_t i = 0; i < n; i++)
            c += in_min(e[i].s, min, minex) && in_max(e[i].s, max, maxex);
        resp_w_int(x->out, c);
    }
    free(e);
    flist_free(&l);
}

static void zrank_generic(cmd_ctx *x, int rev) {
    flist l;
    zel *e;
    size_t n;
    int r = zload(x, &l, &e, &n);
    if (r >= 0) {
        long long rank = -1;
        for (size_t i = 0; i < n && rank < 0; i++)
            if (e[i].ml == x->argvlen[2] && memcmp(e[i].m, x->argv[2], e[i].ml) == 0)
                rank = rev ? (long long)(n - 1 - i) : (long long)i;
        if (rank < 0)
            resp_w_null(x->out, x->proto);
        else
            resp_w_int(x->out, rank);
    }
    free(e);
    flist_free(&l);
}

void cmd_zrank(cmd_ctx *x) {
    zrank_generic(x, 0);
}
void cmd_zrevrank(cmd_ctx *x) {
    zrank_generic(x, 1);
}

/* ZSCAN: member, score pairs (the score as ZSCORE writes it). */
void cmd_zscan(cmd_ctx *x) {
    unsigned long long cur;
    const char *pat;
    size_t patlen;
    long long count;
    if (scan_cursor(x, 2, &cur) || scan_options(x, 3, &pat, &patlen, &count, NULL)) return;
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    if (r && cur == 0 && o.size <= 2048) count = 2048;
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
    resp_w_array(x->out, matched * 2);
    for (size_t i = 0; i < l.n; i++) {
        if (pat && !db_glob(pat, patlen, flist_f(&l, i), l.e[i].fl, 0)) continue;
        resp_w_bulk(x->out, flist_f(&l, i), l.e[i].fl);
        resp_w_double(x->out, 2, l.e[i].vl == 8 ? dec_score(flist_v(&l, i)) : 0);
    }
    flist_free(&l);
}
