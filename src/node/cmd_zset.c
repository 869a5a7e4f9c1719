/* cmd_zset.c - sorted-set commands (DESIGN.md §14) over the records of
 * zset.h: member records for scores and membership, the score index for
 * ranks, score ranges and pops, member order for BYLEX. Rank and offset
 * walks cost O(rank) record reads (as Kvrocks'). Argument parsing, the
 * order of checks and every reply and error text follow redis-server 7.0
 * (t_zset.c); tests/integration/test_types diffs them byte for byte.
 * BYLEX reads member order, which is redis' order when all scores are
 * equal (the only case redis defines). */
#include "node/cmd.h"
#include "core/err.h"
#include "core/crc16.h"
#include "node/zset.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int scan_cursor(cmd_ctx *x, int i, unsigned long long *out); /* cmd_keyspace.c */
int scan_options(cmd_ctx *x, int first, const char **pat, size_t *patlen, long long *count,
                 int *type);
void pick_random(size_t *idx, size_t want, size_t n, int distinct); /* cmd_hash.c */

#define K(x) (x)->argv[1], (x)->argvlen[1]

static void reply_float_err(cmd_ctx *x) {
    reply_err(x, "ERR min or max is not a float");
}
static void reply_lex_err(cmd_ctx *x) {
    reply_err(x, "ERR min or max not valid string range item");
}

/* Members (and scores) as redis replies them: RESP2 flat, RESP3 pairs. */
static void reply_zlist(cmd_ctx *x, const zlist *l, int withscores) {
    int nested = withscores && x->proto == 3;
    resp_w_array(x->out, l->n * (withscores && !nested ? 2 : 1));
    for (size_t i = 0; i < l->n; i++) {
        if (nested) resp_w_array(x->out, 2);
        resp_w_bulk(x->out, zlist_m(l, i), l->e[i].ml);
        if (withscores) resp_w_double(x->out, x->proto, l->e[i].s);
    }
}

/* Deletes the members of l (both records each) from o; o->size follows. */
static int remove_all(cmd_ctx *x, store_txn *t, const char *k, size_t kl, obj *o, const zlist *l,
                      long long *n) {
    int rc = 0;
    *n = 0;
    for (size_t i = 0; i < l->n && !rc; i++) {
        int ex;
        rc = zs_remove(x, t, k, kl, o, zlist_m(l, i), l->e[i].ml, &ex);
        *n += ex;
    }
    o->size -= (uint64_t)*n;
    return rc;
}

/* ---- ZADD, ZINCRBY, ZREM ------------------------------------------------------ */

enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_CH = 16, Z_INCR = 32 };

static void zadd_generic(cmd_ctx *x, unsigned flags) {
    int j = 2;
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
        if (zs_arg_double(x->argv[j + 2 * i], x->argvlen[j + 2 * i], &scores[i])) {
            free(scores);
            reply_err(x, "ERR value is not a valid float");
            return;
        }
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    if (obj_lookup(x, t, K(x), STORE_T_ZSET, &o) < 0) {
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
        int g = zs_score(x, t, K(x), &o, m, ml, &cur);
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
                rc = zs_set(x, t, K(x), &o, m, ml, score, &cur);
                updated++;
            }
        } else if (g == KEEL_ENOTFOUND) {
            if (flags & Z_XX) continue;
            rc = zs_set(x, t, K(x), &o, m, ml, score, NULL);
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
    if (db_finish(x, t, rc)) return;
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
    zadd_generic(x, 0);
}

void cmd_zincrby(cmd_ctx *x) {
    zadd_generic(x, Z_INCR); /* ZINCRBY key incr member = ZADD key INCR incr member */
}

void cmd_zrem(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, K(x), STORE_T_ZSET, &o);
    if (r <= 0) {
        store_txn_abort(t);
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    long long n = 0;
    int rc = 0;
    for (int i = 2; i < x->argc && !rc; i++) {
        int ex;
        rc = zs_remove(x, t, K(x), &o, x->argv[i], x->argvlen[i], &ex);
        n += ex;
    }
    o.size -= (uint64_t)n;
    if (!rc && n) rc = obj_save(x, t, K(x), &o);
    if (db_finish(x, t, rc) == 0) resp_w_int(x->out, n);
}

/* ---- Point reads ----------------------------------------------------------------- */

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
    if (r && zs_score(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &s) == 0)
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
        if (r && zs_score(x, NULL, K(x), &o, x->argv[i], x->argvlen[i], &s) == 0)
            resp_w_double(x->out, x->proto, s);
        else
            resp_w_null(x->out, x->proto);
    }
}

static void zrank_generic(cmd_ctx *x, int rev) {
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    double s;
    int g = r ? zs_score(x, NULL, K(x), &o, x->argv[2], x->argvlen[2], &s) : KEEL_ENOTFOUND;
    if (g == KEEL_ENOTFOUND) {
        resp_w_null(x->out, x->proto);
        return;
    }
    long rank = g ? g : zs_rank(x, K(x), &o, s, x->argv[2], x->argvlen[2]);
    if (rank < 0)
        reply_storage(x, (int)rank);
    else
        resp_w_int(x->out, rev ? (long long)o.size - 1 - rank : rank);
}

void cmd_zrank(cmd_ctx *x) {
    zrank_generic(x, 0);
}
void cmd_zrevrank(cmd_ctx *x) {
    zrank_generic(x, 1);
}

/* ---- Ranges ------------------------------------------------------------------------ */

enum { BY_AUTO, BY_RANK, BY_SCORE, BY_LEX };
enum { DIR_AUTO, DIR_FWD, DIR_REV };

/* A parsed range request. */
typedef struct zreq {
    int by, rev, withscores;
    long long start, end, offset, limit;
    zs_srange sr;
    zs_lrange lr;
} zreq;

/* redis' zrangeGenericCommand steps 1-2: options after argv[first+2], then
 * the range at argv[first+1], argv[first+2]. store: ZRANGESTORE (no
 * WITHSCORES). Returns 0 or -1 after replying. */
static int parse_range(cmd_ctx *x, int first, int store, int by, int dir, zreq *q) {
    memset(q, 0, sizeof *q);
    q->limit = -1;
    for (int j = first + 3; j < x->argc; j++) {
        int left = x->argc - j - 1;
        if (!store && arg_is(x, j, "withscores")) {
            q->withscores = 1;
        } else if (arg_is(x, j, "limit") && left >= 2) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &q->offset) ||
                arg_ll(x->argv[j + 2], x->argvlen[j + 2], &q->limit)) {
                reply_not_int(x);
                return -1;
            }
            j += 2;
        } else if (dir == DIR_AUTO && arg_is(x, j, "rev")) {
            dir = DIR_REV;
        } else if (by == BY_AUTO && arg_is(x, j, "bylex")) {
            by = BY_LEX;
        } else if (by == BY_AUTO && arg_is(x, j, "byscore")) {
            by = BY_SCORE;
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    if (by == BY_AUTO) by = BY_RANK;
    q->by = by;
    q->rev = dir == DIR_REV;
    if (q->limit != -1 && by == BY_RANK) {
        reply_err(x, "ERR syntax error, LIMIT is only supported in combination with either "
                     "BYSCORE or BYLEX");
        return -1;
    }
    if (q->withscores && by == BY_LEX) {
        reply_err(x, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return -1;
    }
    int mn = first + 1, mx = first + 2;
    if (q->rev && by != BY_RANK) {
        mn = first + 2;
        mx = first + 1;
    }
    if (by == BY_RANK) {
        if (arg_ll(x->argv[mn], x->argvlen[mn], &q->start) ||
            arg_ll(x->argv[mx], x->argvlen[mx], &q->end)) {
            reply_not_int(x);
            return -1;
        }
    } else if (by == BY_SCORE) {
        if (zs_parse_score(x->argv[mn], x->argvlen[mn], &q->sr.min, &q->sr.minex) ||
            zs_parse_score(x->argv[mx], x->argvlen[mx], &q->sr.max, &q->sr.maxex)) {
            reply_float_err(x);
            return -1;
        }
    } else {
        zs_lrange *l = &q->lr;
        if (zs_parse_lex(x->argv[mn], x->argvlen[mn], &l->min, &l->minl, &l->mininf, &l->minex) ||
            zs_parse_lex(x->argv[mx], x->argvlen[mx], &l->max, &l->maxl, &l->maxinf, &l->maxex)) {
            reply_lex_err(x);
            return -1;
        }
    }
    return 0;
}

/* Runs q on key k (o). Returns 0 or a KEEL_E*. */
static int run_range(cmd_ctx *x, const char *k, size_t kl, const obj *o, const zreq *q,
                     zlist *out) {
    long n = 0;
    if (q->by == BY_RANK) {
        long long len = (long long)o->size, start = q->start, end = q->end;
        if (start < 0) start += len;
        if (end < 0) end += len;
        if (start < 0) start = 0;
        if (start > end || start >= len) return 0;
        if (end >= len) end = len - 1;
        n = zs_range_score(x, k, kl, o, NULL, q->rev, (size_t)start, (size_t)(end - start + 1),
                           out);
    } else {
        if (q->offset < 0 || q->limit == 0) return 0;
        size_t max = q->limit < 0 ? SIZE_MAX : (size_t)q->limit;
        n = q->by == BY_SCORE
                ? zs_range_score(x, k, kl, o, &q->sr, q->rev, (size_t)q->offset, max, out)
                : zs_range_lex(x, k, kl, o, &q->lr, q->rev, (size_t)q->offset, max, out);
    }
    return n < 0 ? (int)n : 0;
}

static void zrange_generic(cmd_ctx *x, int by, int dir) {
    zreq q;
    if (parse_range(x, 1, 0, by, dir, &q)) return;
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    zlist l;
    zlist_init(&l);
    int rc = r ? run_range(x, K(x), &o, &q, &l) : 0;
    if (rc)
        reply_storage(x, rc);
    else
        reply_zlist(x, &l, q.withscores);
    zlist_free(&l);
}

void cmd_zrange(cmd_ctx *x) {
    zrange_generic(x, BY_AUTO, DIR_AUTO);
}
void cmd_zrevrange(cmd_ctx *x) {
    zrange_generic(x, BY_RANK, DIR_REV);
}
void cmd_zrangebyscore(cmd_ctx *x) {
    zrange_generic(x, BY_SCORE, DIR_FWD);
}
void cmd_zrevrangebyscore(cmd_ctx *x) {
    zrange_generic(x, BY_SCORE, DIR_REV);
}
void cmd_zrangebylex(cmd_ctx *x) {
    zrange_generic(x, BY_LEX, DIR_FWD);
}
void cmd_zrevrangebylex(cmd_ctx *x) {
    zrange_generic(x, BY_LEX, DIR_REV);
}

/* ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] */
void cmd_zrangestore(cmd_ctx *x) {
    zreq q;
    if (parse_range(x, 2, 1, BY_AUTO, DIR_AUTO, &q)) return;
    const char *sk = x->argv[2];
    size_t skl = x->argvlen[2];
    obj o;
    int r = obj_lookup(x, NULL, sk, skl, STORE_T_ZSET, &o);
    if (r < 0) return;
    zlist l;
    zlist_init(&l);
    int rc = r ? run_range(x, sk, skl, &o, &q, &l) : 0;
    if (rc) {
        reply_storage(x, rc);
    } else {
        store_txn *t = store_txn_begin(x->srv->st);
        rc = zs_store(x, t, K(x), &l);
        if (db_finish(x, t, rc) == 0) resp_w_int(x->out, (long long)l.n);
    }
    zlist_free(&l);
}

void cmd_zcount(cmd_ctx *x) {
    zs_srange sr;
    if (zs_parse_score(x->argv[2], x->argvlen[2], &sr.min, &sr.minex) ||
        zs_parse_score(x->argv[3], x->argvlen[3], &sr.max, &sr.maxex)) {
        reply_float_err(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    long n = r ? zs_range_score(x, K(x), &o, &sr, 0, 0, SIZE_MAX, NULL) : 0;
    if (n < 0)
        reply_storage(x, (int)n);
    else
        resp_w_int(x->out, n);
}

void cmd_zlexcount(cmd_ctx *x) {
    zs_lrange l;
    if (zs_parse_lex(x->argv[2], x->argvlen[2], &l.min, &l.minl, &l.mininf, &l.minex) ||
        zs_parse_lex(x->argv[3], x->argvlen[3], &l.max, &l.maxl, &l.maxinf, &l.maxex)) {
        reply_lex_err(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    long n = r ? zs_range_lex(x, K(x), &o, &l, 0, 0, SIZE_MAX, NULL) : 0;
    if (n < 0)
        reply_storage(x, (int)n);
    else
        resp_w_int(x->out, n);
}

/* ZREMRANGEBYRANK/SCORE/LEX key a b */
static void zremrange_generic(cmd_ctx *x, int by) {
    zreq q;
    memset(&q, 0, sizeof q);
    q.by = by;
    q.limit = -1;
    if (by == BY_RANK) {
        if (arg_ll(x->argv[2], x->argvlen[2], &q.start) ||
            arg_ll(x->argv[3], x->argvlen[3], &q.end)) {
            reply_not_int(x);
            return;
        }
    } else if (by == BY_SCORE) {
        if (zs_parse_score(x->argv[2], x->argvlen[2], &q.sr.min, &q.sr.minex) ||
            zs_parse_score(x->argv[3], x->argvlen[3], &q.sr.max, &q.sr.maxex)) {
            reply_float_err(x);
            return;
        }
    } else {
        zs_lrange *l = &q.lr;
        if (zs_parse_lex(x->argv[2], x->argvlen[2], &l->min, &l->minl, &l->mininf, &l->minex) ||
            zs_parse_lex(x->argv[3], x->argvlen[3], &l->max, &l->maxl, &l->maxinf, &l->maxex)) {
            reply_lex_err(x);
            return;
        }
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    zlist l;
    zlist_init(&l);
    int rc = run_range(x, K(x), &o, &q, &l);
    if (rc) {
        reply_storage(x, rc);
    } else {
        store_txn *t = store_txn_begin(x->srv->st);
        long long n = 0;
        rc = remove_all(x, t, K(x), &o, &l, &n);
        if (!rc && n) rc = obj_save(x, t, K(x), &o);
        if (db_finish(x, t, rc) == 0) resp_w_int(x->out, n);
    }
    zlist_free(&l);
}

void cmd_zremrangebyrank(cmd_ctx *x) {
    zremrange_generic(x, BY_RANK);
}
void cmd_zremrangebyscore(cmd_ctx *x) {
    zremrange_generic(x, BY_SCORE);
}
void cmd_zremrangebylex(cmd_ctx *x) {
    zremrange_generic(x, BY_LEX);
}

/* ---- Pops ------------------------------------------------------------------------------ */

static void reply_pop(cmd_ctx *x, const zlist *l, int nested) {
    resp_w_array(x->out, nested ? l->n : l->n * 2);
    for (size_t i = 0; i < l->n; i++) {
        if (nested) resp_w_array(x->out, 2);
        resp_w_bulk(x->out, zlist_m(l, i), l->e[i].ml);
        resp_w_double(x->out, x->proto, l->e[i].s);
    }
}

/* ZPOPMIN/ZPOPMAX key [count] */
static void zpop_generic(cmd_ctx *x, int max) {
    if (x->argc > 3) {
        reply_syntax(x);
        return;
    }
    long long count = 1;
    if (x->argc == 3) {
        if (arg_ll(x->argv[2], x->argvlen[2], &count) || count < 0) {
            reply_err(x, "ERR value is out of range, must be positive");
            return;
        }
        if (count == 0) { /* after the key's type is checked, as redis 7.0 */
            obj o;
            if (obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o) >= 0) resp_w_array(x->out, 0);
            return;
        }
    }
    zlist l;
    zlist_init(&l);
    long n = zset_pop(x, K(x), max, (size_t)count, &l);
    if (n >= 0) reply_pop(x, &l, x->proto == 3 && x->argc == 3);
    zlist_free(&l);
}

void cmd_zpopmin(cmd_ctx *x) {
    zpop_generic(x, 0);
}
void cmd_zpopmax(cmd_ctx *x) {
    zpop_generic(x, 1);
}

/* ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]; dispatch routed the
 * keys (cmd_def.keynum). */
void cmd_zmpop(cmd_ctx *x) {
    int max, nk;
    long long count;
    if (arg_mpop(x, 1, "max", "min", &max, &nk, &count)) return;
    long long wi = 2 + nk;
    for (int i = 2; i < wi; i++) {
        zlist l;
        zlist_init(&l);
        long n = zset_pop(x, x->argv[i], x->argvlen[i], max, (size_t)count, &l);
        if (n != 0) {
            if (n > 0) {
                resp_w_array(x->out, 2);
                resp_w_bulk(x->out, x->argv[i], x->argvlen[i]);
                reply_pop(x, &l, 1);
            }
            zlist_free(&l);
            return;
        }
        zlist_free(&l);
    }
    resp_w_null_array(x->out, x->proto);
}

/* ZRANDMEMBER key [count [WITHSCORES]] */
void cmd_zrandmember(cmd_ctx *x) {
    long long cnt = 0;
    int withscores = 0, has_count = x->argc >= 3;
    if (has_count) {
        if (arg_ll(x->argv[2], x->argvlen[2], &cnt)) {
            reply_not_int(x);
            return;
        }
        if (cnt == LLONG_MIN) {
            reply_err(x, "ERR value is out of range, value must between -9223372036854775807 "
                         "and 9223372036854775807");
            return;
        }
        if (x->argc > 4 || (x->argc == 4 && !arg_is(x, 3, "withscores"))) {
            reply_syntax(x);
            return;
        }
        if (x->argc == 4) {
            withscores = 1;
            if (cnt < -LLONG_MAX / 2 || cnt > LLONG_MAX / 2) {
                reply_err(x, "ERR value is out of range");
                return;
            }
        }
    }
    obj o;
    int r = obj_lookup(x, NULL, K(x), STORE_T_ZSET, &o);
    if (r < 0) return;
    if (!r) {
        if (has_count)
            resp_w_array(x->out, 0);
        else
            resp_w_null(x->out, x->proto);
        return;
    }
    int distinct = !has_count || cnt >= 0;
    unsigned long long want = !has_count ? 1
                              : cnt < 0  ? (unsigned long long)-cnt
                                         : (unsigned long long)cnt;
    if (has_count && want == 0) {
        resp_w_array(x->out, 0);
        return;
    }
    zlist l;
    zlist_init(&l);
    long n = zs_range_score(x, K(x), &o, NULL, 0, 0, SIZE_MAX, &l);
    if (n <= 0) {
        if (n < 0)
            reply_storage(x, (int)n);
        else
            resp_w_array(x->out, 0);
        zlist_free(&l);
        return;
    }
    if (distinct && want > l.n) want = l.n;
    if (want > 100000000ull) { /* a repeating sample this large cannot be sent */
        reply_err(x, "ERR value is out of range");
        zlist_free(&l);
        return;
    }
    size_t *idx = malloc((size_t)want * sizeof *idx);
    if (!idx) {
        reply_storage(x, KEEL_ENOMEM);
        zlist_free(&l);
        return;
    }
    pick_random(idx, (size_t)want, l.n, distinct);
    if (!has_count) {
        resp_w_bulk(x->out, zlist_m(&l, idx[0]), l.e[idx[0]].ml);
    } else {
        int nested = withscores && x->proto == 3;
        resp_w_array(x->out, (size_t)want * (withscores && !nested ? 2 : 1));
        for (size_t i = 0; i < want; i++) {
            if (nested) resp_w_array(x->out, 2);
            resp_w_bulk(x->out, zlist_m(&l, idx[i]), l.e[idx[i]].ml);
            if (withscores) resp_w_double(x->out, x->proto, l.e[idx[i]].s);
        }
    }
    free(idx);
    zlist_free(&l);
}

/* ---- ZUNION, ZINTER, ZDIFF and their STORE forms, ZINTERCARD --------------------- */

enum { OP_UNION, OP_INTER, OP_DIFF };
enum { AGG_SUM, AGG_MIN, AGG_MAX };

/* One input member: its source and weighted score. */
typedef struct src_ent {
    const char *m;
    size_t ml;
    double s;
    size_t src;
} src_ent;

static int src_ent_cmp(const void *a, const void *b) {
    const src_ent *p = a, *q = b;
    size_t n = p->ml < q->ml ? p->ml : q->ml;
    int c = memcmp(p->m, q->m, n);
    if (c) return c;
    if (p->ml != q->ml) return p->ml < q->ml ? -1 : 1;
    return (p->src > q->src) - (p->src < q->src);
}

static int zitem_cmp_ctx(const zlist *l, const zitem *a, const zitem *b) {
    if (a->s < b->s) return -1;
    if (a->s > b->s) return 1;
    size_t n = a->ml < b->ml ? a->ml : b->ml;
    int c = memcmp(l->buf.p + a->mo, l->buf.p + b->mo, n);
    return c ? c : (a->ml > b->ml) - (a->ml < b->ml);
}

/* qsort has no context argument: the list being sorted. */
static const zlist *sort_list;
static int zitem_cmp(const void *a, const void *b) {
    return zitem_cmp_ctx(sort_list, a, b);
}

static void aggregate(double *t, double v, int agg) {
    if (agg == AGG_SUM) {
        *t += v;
        if (isnan(*t)) *t = 0; /* inf + -inf is 0 in redis */
    } else if (agg == AGG_MIN) {
        *t = v < *t ? v : *t;
    } else {
        *t = v > *t ? v : *t;
    }
}

typedef struct load_ctx {
    zlist *l;
    int set;
} load_ctx;

static int load_one(void *arg, const char *f, size_t fl, const store_value *v) {
    load_ctx *c = arg;
    double s = 1.0;
    if (!c->set) {
        if (v->len != 8) return 0;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = u << 8 | (uint8_t)v->data[i];
        memcpy(&s, &u, 8);
    }
    return zlist_add(c->l, f, fl, s) ? -1 : 0;
}

/* Loads a zset or set (score 1) into l in member order. Returns 0 (absent:
 * nothing added), or -1 after replying WRONGTYPE or a storage error. */
static int load_input(cmd_ctx *x, const char *k, size_t kl, zlist *l) {
    store_value v;
    int rc = db_get(x, NULL, k, kl, &v);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    if ((v.type != STORE_T_ZSET && v.type != STORE_T_SET) || v.len < STORE_META_LEN) {
        store_value_release(&v);
        reply_wrongtype(x);
        return -1;
    }
    obj o = {.type = v.type};
    for (int i = 0; i < 8; i++)
        o.version = o.version << 8 | (uint8_t)v.data[i];
    load_ctx c = {.l = l, .set = v.type == STORE_T_SET};
    store_value_release(&v);
    long n = sub_scan(x, k, kl, &o, 0, SIZE_MAX, load_one, &c);
    if (n < 0) {
        reply_storage(x, (int)n);
        return -1;
    }
    return 0;
}

/* The algebra of redis' zunionInterDiffGenericCommand. nki: the numkeys
 * argument; dst: a STORE form; card: ZINTERCARD. */
static void zalgebra(cmd_ctx *x, int nki, int op, int dst, int card) {
    long long nk;
    if (arg_ll(x->argv[nki], x->argvlen[nki], &nk)) {
        reply_not_int(x);
        return;
    }
    if (nk < 1) {
        char lower[32];
        size_t i = 0;
        for (; i < x->argvlen[0] && i < sizeof lower - 1; i++)
            lower[i] =
                (char)(x->argv[0][i] | ((x->argv[0][i] >= 'A' && x->argv[0][i] <= 'Z') ? 0x20 : 0));
        lower[i] = 0;
        reply_errf(x, "ERR at least 1 input key is needed for '%s' command", lower);
        return;
    }
    if (nk > x->argc - (nki + 1)) {
        reply_syntax(x);
        return;
    }
    if (dst && keel_key_slot(x->argv[1], x->argvlen[1]) != x->slot) {
        reply_err(x, "CROSSSLOT Keys in request don't hash to the same slot");
        return;
    }
    size_t n = (size_t)nk;
    zlist *in = calloc(n, sizeof *in);
    double *w = malloc(n * sizeof *w);
    src_ent *all = NULL;
    zlist res;
    zlist_init(&res);
    if (!in || !w) {
        reply_storage(x, KEEL_ENOMEM);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        zlist_init(&in[i]);
        w[i] = 1.0;
    }
    for (size_t i = 0; i < n; i++)
        if (load_input(x, x->argv[nki + 1 + i], x->argvlen[nki + 1 + i], &in[i])) goto out;
    int agg = AGG_SUM, withscores = 0;
    long long limit = 0;
    for (int j = nki + 1 + (int)nk; j < x->argc;) {
        int remaining = x->argc - j;
        if (op != OP_DIFF && !card && remaining >= (int)nk + 1 && arg_is(x, j, "weights")) {
            j++;
            for (size_t i = 0; i < n; i++, j++)
                if (zs_arg_double(x->argv[j], x->argvlen[j], &w[i])) {
                    reply_err(x, "ERR weight value is not a float");
                    goto out;
                }
        } else if (op != OP_DIFF && !card && remaining >= 2 && arg_is(x, j, "aggregate")) {
            j++;
            if (arg_is(x, j, "sum"))
                agg = AGG_SUM;
            else if (arg_is(x, j, "min"))
                agg = AGG_MIN;
            else if (arg_is(x, j, "max"))
                agg = AGG_MAX;
            else {
                reply_syntax(x);
                goto out;
            }
            j++;
        } else if (!dst && !card && arg_is(x, j, "withscores")) {
            j++;
            withscores = 1;
        } else if (card && remaining >= 2 && arg_is(x, j, "limit")) {
            j++;
            if (arg_ll(x->argv[j], x->argvlen[j], &limit) || limit < 0) {
                reply_err(x, "ERR LIMIT can't be negative");
                goto out;
            }
            j++;
        } else {
            reply_syntax(x);
            goto out;
        }
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += in[i].n;
    all = malloc((total ? total : 1) * sizeof *all);
    if (!all) {
        reply_storage(x, KEEL_ENOMEM);
        goto out;
    }
    size_t a = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < in[i].n; e++) {
            double s = in[i].e[e].s * w[i];
            if (isnan(s)) s = 0;
            all[a++] = (src_ent){zlist_m(&in[i], e), in[i].e[e].ml, s, i};
        }
    qsort(all, total, sizeof *all, src_ent_cmp);
    long long cardn = 0;
    for (size_t g = 0; g < total;) {
        size_t h = g + 1;
        while (h < total && all[h].ml == all[g].ml && memcmp(all[h].m, all[g].m, all[g].ml) == 0)
            h++;
        int keep;
        double s = all[g].s;
        if (op == OP_UNION) {
            keep = 1;
        } else if (op == OP_INTER) {
            keep = h - g == n; /* one entry per source: members are unique in each */
        } else {
            keep = all[g].src == 0 && h - g == 1;
        }
        if (keep && op != OP_DIFF)
            for (size_t i = g + 1; i < h; i++)
                aggregate(&s, all[i].s, agg);
        if (keep) {
            if (card) {
                cardn++;
                if (limit && cardn >= limit) break;
            } else if (zlist_add(&res, all[g].m, all[g].ml, s)) {
                reply_storage(x, KEEL_ENOMEM);
                goto out;
            }
        }
        g = h;
    }
    if (card) {
        resp_w_int(x->out, cardn);
        goto out;
    }
    sort_list = &res;
    qsort(res.e, res.n, sizeof *res.e, zitem_cmp);
    sort_list = NULL;
    if (dst) {
        store_txn *t = store_txn_begin(x->srv->st);
        int rc = zs_store(x, t, x->argv[1], x->argvlen[1], &res);
        if (db_finish(x, t, rc) == 0) resp_w_int(x->out, (long long)res.n);
    } else {
        reply_zlist(x, &res, withscores);
    }
out:
    if (in)
        for (size_t i = 0; i < n; i++)
            zlist_free(&in[i]);
    free(in);
    free(w);
    free(all);
    zlist_free(&res);
}

void cmd_zunion(cmd_ctx *x) {
    zalgebra(x, 1, OP_UNION, 0, 0);
}
void cmd_zinter(cmd_ctx *x) {
    zalgebra(x, 1, OP_INTER, 0, 0);
}
void cmd_zdiff(cmd_ctx *x) {
    zalgebra(x, 1, OP_DIFF, 0, 0);
}
void cmd_zunionstore(cmd_ctx *x) {
    zalgebra(x, 2, OP_UNION, 1, 0);
}
void cmd_zinterstore(cmd_ctx *x) {
    zalgebra(x, 2, OP_INTER, 1, 0);
}
void cmd_zdiffstore(cmd_ctx *x) {
    zalgebra(x, 2, OP_DIFF, 1, 0);
}
void cmd_zintercard(cmd_ctx *x) {
    zalgebra(x, 1, OP_INTER, 0, 1);
}

/* ---- ZSCAN ----------------------------------------------------------------------------- */

/* ZSCAN: member, score pairs (the score as ZSCORE writes it) in score
 * order, the cursor an offset in it (a small set comes back whole, in the
 * order redis' listpack has). */
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
    zlist l;
    zlist_init(&l);
    long n = r ? zs_range_score(x, K(x), &o, NULL, 0, (size_t)cur, (size_t)count, &l) : 0;
    if (n < 0) {
        zlist_free(&l);
        reply_storage(x, (int)n);
        return;
    }
    unsigned long long next = (size_t)n == (size_t)count ? cur + (unsigned long long)n : 0;
    size_t matched = 0;
    for (size_t i = 0; i < l.n; i++)
        if (!pat || db_glob(pat, patlen, zlist_m(&l, i), l.e[i].ml, 0)) matched++;
    char num[32];
    int nl = snprintf(num, sizeof num, "%llu", next);
    resp_w_array(x->out, 2);
    resp_w_bulk(x->out, num, (size_t)nl);
    resp_w_array(x->out, matched * 2);
    for (size_t i = 0; i < l.n; i++) {
        if (pat && !db_glob(pat, patlen, zlist_m(&l, i), l.e[i].ml, 0)) continue;
        resp_w_bulk(x->out, zlist_m(&l, i), l.e[i].ml);
        resp_w_double(x->out, 2, l.e[i].s);
    }
    zlist_free(&l);
}
