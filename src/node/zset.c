/* zset.c - sorted-set records: member records and the score index kept in
 * step (see zset.h). Record keys are built on the heap; a member may be up
 * to 64 KiB. Ranges become record-key bounds [from, to) so that the store
 * seeks straight to them: a score bound is the 8-byte encoded score (plus
 * one, as a u64, to step past every member of that score), a lex bound is
 * the member bytes (plus a 0x00 byte to step past that member). */
#include "node/zset.h"
#include "core/err.h"
#include "core/zscore.h"
#include "node/multi.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void zlist_init(zlist *l) {
    memset(l, 0, sizeof *l);
    kbuf_init(&l->buf);
}

void zlist_free(zlist *l) {
    kbuf_close(&l->buf);
    free(l->e);
    memset(l, 0, sizeof *l);
}

int zlist_add(zlist *l, const char *m, size_t ml, double s) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        zitem *p = realloc(l->e, cap * sizeof *p);
        if (!p) return KEEL_ENOMEM;
        l->e = p;
        l->cap = cap;
    }
    l->e[l->n] = (zitem){.mo = l->buf.len, .ml = ml, .s = s};
    if (kbuf_append(&l->buf, m, ml)) return KEEL_ENOMEM;
    l->n++;
    return 0;
}

/* ---- Values and arguments ---------------------------------------------------- */

static void bits_put(char out[8], double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    for (int i = 0; i < 8; i++)
        out[i] = (char)(u >> (56 - 8 * i));
}

static double bits_get(const char *p) {
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = u << 8 | (uint8_t)p[i];
    double d;
    memcpy(&d, &u, 8);
    return d;
}

int zs_arg_double(const char *s, size_t len, double *out) {
    /* redis' getDoubleFromObject: strtod over the whole string, no leading
     * space, no overflow to +-HUGE_VAL or underflow to 0, not NaN. */
    if (len == 0 || memchr(s, 0, len) || isspace((unsigned char)s[0])) return -1;
    char small[128], *buf = len < sizeof small ? small : malloc(len + 1);
    if (!buf) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    int bad = (size_t)(end - buf) != len || isnan(d) ||
              (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO));
    if (buf != small) free(buf);
    if (bad) return -1;
    *out = d;
    return 0;
}

int zs_parse_score(const char *s, size_t len, double *v, int *ex) {
    *ex = len > 0 && s[0] == '(';
    if (*ex) {
        s++;
        len--;
    }
    return zs_arg_double(s, len, v);
}

int zs_parse_lex(const char *s, size_t len, const char **v, size_t *vl, int *inf, int *ex) {
    *v = NULL;
    *vl = 0;
    *inf = 0;
    *ex = 0;
    if (len == 0) return -1;
    if (s[0] == '-' || s[0] == '+') {
        if (len != 1) return -1;
        *inf = s[0] == '-' ? -1 : 1;
        return 0;
    }
    if (s[0] != '[' && s[0] != '(') return -1;
    *ex = s[0] == '(';
    *v = s + 1;
    *vl = len - 1;
    return 0;
}

/* ---- Record keys --------------------------------------------------------------- */

/* [0x02 prefix][score][member] on the heap (free it); NULL on overflow. */
static char *zidx_key(const char *k, size_t kl, uint64_t ver, double s, const char *m, size_t ml,
                      size_t *len) {
    if (kl > STORE_UKEY_MAX || kl + 11 + ZSCORE_LEN + ml > 65000) return NULL;
    char *p = malloc(kl + 11 + ZSCORE_LEN + ml + 1);
    if (!p) return NULL;
    size_t pl = store_zidx_prefix(p, k, kl, ver);
    zscore_encode(p + pl, s);
    if (ml) memcpy(p + pl + ZSCORE_LEN, m, ml);
    *len = pl + ZSCORE_LEN + ml;
    return p;
}

int zs_score(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
             size_t ml, double *s) {
    store_value v;
    int rc = sub_get(x, t, k, kl, o, m, ml, &v);
    if (rc) return rc;
    if (v.len != 8)
        rc = KEEL_ECORRUPT;
    else
        *s = bits_get(v.data);
    store_value_release(&v);
    return rc;
}

static int zidx_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, uint64_t ver, double s,
                    const char *m, size_t ml) {
    size_t len;
    char *key = zidx_key(k, kl, ver, s, m, ml, &len);
    if (!key) return KEEL_EINVAL;
    /* The member record names the score, so the index record is there:
     * no read needed to keep the statistics exact (store.h). */
    int rc = store_txn_del_present(t, x->slot, key, len, STORE_T_SUB | STORE_T_ZSET, "", 0);
    free(key);
    return rc;
}

/* Puts the index record of (m, s). absent: the caller knows it is not
 * there (m was absent, or had another score), so no read is needed. */
static int zidx_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, uint64_t ver, double s,
                    const char *m, size_t ml, int absent) {
    size_t len;
    char *key = zidx_key(k, kl, ver, s, m, ml, &len);
    if (!key) return KEEL_EINVAL;
    int rc = absent ? store_txn_put_absent(t, x->slot, key, len, STORE_T_SUB | STORE_T_ZSET, "", 0)
                    : store_txn_put(t, x->slot, key, len, STORE_T_SUB | STORE_T_ZSET, 0, "", 0);
    free(key);
    return rc;
}

int zs_set(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
           size_t ml, double s, const double *old) {
    if (s == 0) s = 0; /* -0 is stored as 0: redis replies "0" for it (listpack) */
    char v[8];
    bits_put(v, s);
    int rc = 0, moved = 1; /* the index record changes key */
    if (old) {
        char a[ZSCORE_LEN], b[ZSCORE_LEN];
        zscore_encode(a, *old);
        zscore_encode(b, s);
        moved = memcmp(a, b, ZSCORE_LEN) != 0;
        if (moved) rc = zidx_del(x, t, k, kl, o->version, *old, m, ml);
    }
    if (!rc) rc = sub_put(x, t, k, kl, o, m, ml, v, 8);
    /* Same encoded score: the index record (empty payload) is already the
     * one s wants. */
    if (!rc && moved) rc = zidx_put(x, t, k, kl, o->version, s, m, ml, 1);
    return rc;
}

int zs_remove(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
              size_t ml, int *existed) {
    double s;
    *existed = 0;
    int rc = zs_score(x, t, k, kl, o, m, ml, &s);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) return rc;
    if ((rc = sub_del(x, t, k, kl, o, m, ml, existed))) return rc;
    return zidx_del(x, t, k, kl, o->version, s, m, ml);
}

int zs_index_copy(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
                  size_t ml, const char *val, size_t vl) {
    if (vl != 8) return KEEL_ECORRUPT;
    return zidx_put(x, t, k, kl, o->version, bits_get(val), m, ml, 0);
}

/* ---- Scans ----------------------------------------------------------------------- */

typedef struct bound {
    char *p;
    size_t len;
} bound;

/* prefix(ver) + tail (+ 0x00 when pad) */
static int bound_make(bound *b, int tag, const char *k, size_t kl, uint64_t ver, const char *tail,
                      size_t tl, int pad) {
    b->p = malloc(kl + 11 + tl + 1);
    if (!b->p) return KEEL_ENOMEM;
    size_t pl = tag == STORE_TAG_ZIDX ? store_zidx_prefix(b->p, k, kl, ver)
                                      : store_sub_prefix(b->p, k, kl, ver);
    if (!pl) return KEEL_EINVAL;
    if (tl) memcpy(b->p + pl, tail, tl);
    b->len = pl + tl;
    if (pad) b->p[b->len++] = 0;
    return 0;
}

/* The 8-byte encoded score, plus one when past (step over that score). */
static void score_tail(char out[ZSCORE_LEN], double s, int past) {
    zscore_encode(out, s);
    for (int i = ZSCORE_LEN - 1; past && i >= 0; i--)
        if (++out[i] != 0) break;
}

typedef struct scan_ctx {
    size_t plen; /* record-key prefix to strip */
    int idx;     /* 1: index records (score in key), 0: member records */
    zlist *out;
    int err;
} scan_ctx;

static int scan_one(void *arg, const char *rk, size_t rkl, const store_value *v) {
    scan_ctx *c = arg;
    if (!c->out) return 0;
    const char *m;
    size_t ml;
    double s;
    if (c->idx) {
        if (rkl < c->plen + ZSCORE_LEN) return 0;
        s = zscore_decode(rk + c->plen);
        m = rk + c->plen + ZSCORE_LEN;
        ml = rkl - c->plen - ZSCORE_LEN;
    } else {
        if (v->len != 8) return 0;
        s = bits_get(v->data);
        m = rk + c->plen;
        ml = rkl - c->plen;
    }
    if (zlist_add(c->out, m, ml, s)) {
        c->err = KEEL_ENOMEM;
        return 1;
    }
    return 0;
}

static long scan_bounds(cmd_ctx *x, bound *lo, bound *hi, size_t plen, int idx, int rev,
                        size_t skip, size_t max, zlist *out) {
    size_t m = lo->len < hi->len ? lo->len : hi->len;
    int c = memcmp(lo->p, hi->p, m);
    if (c > 0 || (c == 0 && lo->len >= hi->len)) return 0; /* empty range */
    scan_ctx sc = {.plen = plen, .idx = idx, .out = out};
    long n = rev ? store_scan_range_rev(x->srv->st, x->slot, lo->p, lo->len, hi->p, hi->len, skip,
                                        max, x->now_ms, scan_one, &sc)
                 : store_scan_range(x->srv->st, x->slot, lo->p, lo->len, hi->p, hi->len, skip, max,
                                    x->now_ms, scan_one, &sc);
    return sc.err ? sc.err : n;
}

long zs_range_score(cmd_ctx *x, const char *k, size_t kl, const obj *o, const zs_srange *r, int rev,
                    size_t skip, size_t max, zlist *out) {
    bound lo = {0}, hi = {0};
    char a[ZSCORE_LEN], b[ZSCORE_LEN];
    long n;
    if (r) {
        score_tail(a, r->min, r->minex);
        score_tail(b, r->max, !r->maxex);
        n = bound_make(&lo, STORE_TAG_ZIDX, k, kl, o->version, a, ZSCORE_LEN, 0);
        if (!n) n = bound_make(&hi, STORE_TAG_ZIDX, k, kl, o->version, b, ZSCORE_LEN, 0);
    } else {
        n = bound_make(&lo, STORE_TAG_ZIDX, k, kl, o->version, NULL, 0, 0);
        if (!n) n = bound_make(&hi, STORE_TAG_ZIDX, k, kl, o->version + 1, NULL, 0, 0);
    }
    if (!n) n = scan_bounds(x, &lo, &hi, kl + 11, 1, rev, skip, max, out);
    free(lo.p);
    free(hi.p);
    return n;
}

long zs_range_lex(cmd_ctx *x, const char *k, size_t kl, const obj *o, const zs_lrange *r, int rev,
                  size_t skip, size_t max, zlist *out) {
    bound lo = {0}, hi = {0};
    long n;
    if (r->mininf > 0 || r->maxinf < 0) return 0;
    if (r->mininf < 0)
        n = bound_make(&lo, STORE_TAG_SUB, k, kl, o->version, NULL, 0, 0);
    else
        n = bound_make(&lo, STORE_TAG_SUB, k, kl, o->version, r->min, r->minl, r->minex);
    if (!n) {
        if (r->maxinf > 0)
            n = bound_make(&hi, STORE_TAG_SUB, k, kl, o->version + 1, NULL, 0, 0);
        else
            n = bound_make(&hi, STORE_TAG_SUB, k, kl, o->version, r->max, r->maxl, !r->maxex);
    }
    if (!n) n = scan_bounds(x, &lo, &hi, kl + 11, 0, rev, skip, max, out);
    free(lo.p);
    free(hi.p);
    return n;
}

long zs_rank(cmd_ctx *x, const char *k, size_t kl, const obj *o, double s, const char *m,
             size_t ml) {
    bound lo = {0}, hi = {0};
    char a[ZSCORE_LEN];
    zscore_encode(a, s);
    long n = bound_make(&lo, STORE_TAG_ZIDX, k, kl, o->version, NULL, 0, 0);
    if (!n) {
        hi.p = malloc(kl + 11 + ZSCORE_LEN + ml + 1);
        n = hi.p ? 0 : KEEL_ENOMEM;
        if (!n) {
            size_t pl = store_zidx_prefix(hi.p, k, kl, o->version);
            memcpy(hi.p + pl, a, ZSCORE_LEN);
            if (ml) memcpy(hi.p + pl + ZSCORE_LEN, m, ml);
            hi.len = pl + ZSCORE_LEN + ml;
        }
    }
    if (!n) n = scan_bounds(x, &lo, &hi, kl + 11, 1, 0, 0, SIZE_MAX, NULL);
    free(lo.p);
    free(hi.p);
    return n;
}

/* ---- Writes of whole sets ------------------------------------------------------- */

long zset_pop(cmd_ctx *x, const char *k, size_t kl, int max, size_t count, zlist *out) {
    obj o;
    int r = obj_lookup(x, NULL, k, kl, STORE_T_ZSET, &o);
    if (r <= 0) return r;
    size_t before = out->n;
    long n = zs_range_score(x, k, kl, &o, NULL, max, 0, count, out);
    if (n < 0) {
        reply_storage(x, (int)n);
        return -1;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = 0;
    for (size_t i = before; i < out->n && !rc; i++) {
        int ex;
        rc = sub_del(x, t, k, kl, &o, zlist_m(out, i), out->e[i].ml, &ex);
        if (!rc) rc = zidx_del(x, t, k, kl, o.version, out->e[i].s, zlist_m(out, i), out->e[i].ml);
        o.size -= (uint64_t)ex;
    }
    if (!rc && n) rc = obj_save(x, t, k, kl, &o);
    if (db_finish(x, t, rc)) return -1;
    return n;
}

int zs_store(cmd_ctx *x, store_txn *t, const char *dk, size_t dkl, const zlist *l) {
    int rc = db_del(x, t, dk, dkl, NULL);
    if (rc || !l->n) return rc;
    obj o = {.type = STORE_T_ZSET, .version = store_new_version(x->srv->st), .size = l->n};
    for (size_t i = 0; i < l->n && !rc; i++)
        rc = zs_set(x, t, dk, dkl, &o, zlist_m(l, i), l->e[i].ml, l->e[i].s, NULL);
    return rc ? rc : obj_save(x, t, dk, dkl, &o);
}
