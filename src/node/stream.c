/* stream.c - the stream encoding and shared helpers (see stream.h). Ids,
 * metadata, record fields, range loads and the group/PEL/consumer
 * records. Behaviour of id parsing and the lag estimates follows redis 7.0
 * (t_stream.c). */
#include "node/stream.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Ids ------------------------------------------------------------------ */

int sid_cmp(sid a, sid b) {
    if (a.ms != b.ms) return a.ms < b.ms ? -1 : 1;
    if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
    return 0;
}

int sid_incr(sid *id) {
    if (id->seq == UINT64_MAX) {
        if (id->ms == UINT64_MAX) return -1;
        id->ms++;
        id->seq = 0;
    } else {
        id->seq++;
    }
    return 0;
}

int sid_decr(sid *id) {
    if (id->seq == 0) {
        if (id->ms == 0) return -1;
        id->ms--;
        id->seq = UINT64_MAX;
    } else {
        id->seq--;
    }
    return 0;
}

size_t sid_fmt(char *out, sid id) {
    int n = snprintf(out, SID_STRLEN, "%llu-%llu", (unsigned long long)id.ms,
                     (unsigned long long)id.seq);
    return n > 0 ? (size_t)n : 0;
}

void sid_reply(cmd_ctx *x, sid id) {
    char b[SID_STRLEN];
    resp_w_bulk(x->out, b, sid_fmt(b, id));
}

/* redis' string2ull: digits only, no sign, fits in u64. */
static int parse_ull(const char *s, size_t n, uint64_t *out) {
    if (n == 0 || n > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int sid_parse(cmd_ctx *x, const char *s, size_t n, sid *id, uint64_t missing_seq, int strict,
              int *seq_given) {
    if (n > 127 || memchr(s, 0, n)) goto invalid;
    if (seq_given) *seq_given = 1;
    if (n == 1 && (s[0] == '-' || s[0] == '+')) {
        if (strict) goto invalid;
        id->ms = id->seq = s[0] == '-' ? 0 : UINT64_MAX;
        return 0;
    }
    const char *dash = memchr(s, '-', n);
    uint64_t ms, seq;
    if (parse_ull(s, dash ? (size_t)(dash - s) : n, &ms)) goto invalid;
    if (dash) {
        size_t sl = n - (size_t)(dash - s) - 1;
        if (seq_given && sl == 1 && dash[1] == '*') {
            seq = 0;
            *seq_given = 0;
        } else if (parse_ull(dash + 1, sl, &seq)) {
            goto invalid;
        }
    } else {
        seq = missing_seq;
    }
    id->ms = ms;
    id->seq = seq;
    return 0;
invalid:
    if (x) reply_err(x, "ERR Invalid stream ID specified as stream command argument");
    return -1;
}

int sid_parse_interval(cmd_ctx *x, const char *s, size_t n, sid *id, int *ex,
                       uint64_t missing_seq) {
    *ex = n > 1 && s[0] == '(';
    if (*ex) return sid_parse(x, s + 1, n - 1, id, missing_seq, 1, NULL);
    return sid_parse(x, s, n, id, missing_seq, 0, NULL);
}

static void put64(char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (56 - 8 * i));
}

static uint64_t get64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

void sid_put(char *p, sid id) {
    put64(p, id.ms);
    put64(p + 8, id.seq);
}

sid sid_get(const char *p) {
    return (sid){get64(p), get64(p + 8)};
}

/* ---- Metadata ------------------------------------------------------------- */

int sm_lookup(cmd_ctx *x, store_txn *t, const char *k, size_t kl, smeta *m) {
    store_value v;
    int rc = db_get(x, t, k, kl, &v);
    memset(m, 0, sizeof *m);
    if (rc == KEEL_ENOTFOUND) {
        m->version = store_new_version(x->srv->st);
        return 0;
    }
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    if (v.type != STORE_T_STREAM || v.len < SMETA_LEN) {
        store_value_release(&v);
        reply_wrongtype(x);
        return -1;
    }
    const char *p = v.data;
    m->expire_ms = v.expire_ms;
    m->version = get64(p);
    m->length = get64(p + 8);
    m->last = sid_get(p + 16);
    m->added = get64(p + 32);
    m->maxdel = sid_get(p + 40);
    m->first = sid_get(p + 56);
    m->tail_node = get64(p + 72);
    m->tail_count = get64(p + 80);
    store_value_release(&v);
    return 1;
}

int sm_save(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m) {
    char p[SMETA_LEN];
    put64(p, m->version);
    put64(p + 8, m->length);
    sid_put(p + 16, m->last);
    put64(p + 32, m->added);
    sid_put(p + 40, m->maxdel);
    sid_put(p + 56, m->first);
    put64(p + 72, m->tail_node);
    put64(p + 80, m->tail_count);
    return db_put(x, t, k, kl, STORE_T_STREAM, m->expire_ms, p, sizeof p);
}

/* ---- Field records -------------------------------------------------------- */

size_t sf_entry(char *out, sid id) {
    out[0] = SK_ENTRY;
    sid_put(out + 1, id);
    return 17;
}

size_t sf_group(char *out, const char *g, size_t gl) {
    out[0] = SK_GROUP;
    memcpy(out + 1, g, gl);
    return 1 + gl;
}

static size_t sf_gprefix(char *out, int kind, const char *g, size_t gl) {
    out[0] = (char)kind;
    out[1] = (char)(gl >> 8);
    out[2] = (char)gl;
    memcpy(out + 3, g, gl);
    return 3 + gl;
}

size_t sf_pel(char *out, const char *g, size_t gl, sid id) {
    size_t n = sf_gprefix(out, SK_PEL, g, gl);
    sid_put(out + n, id);
    return n + 16;
}

size_t sf_cons(char *out, const char *g, size_t gl, const char *c, size_t cl) {
    size_t n = sf_gprefix(out, SK_CONS, g, gl);
    memcpy(out + n, c, cl);
    return n + cl;
}

static obj as_obj(const smeta *m) {
    return (obj){.type = STORE_T_STREAM, .version = m->version};
}

int st_sub_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *f,
               size_t fl, store_value *v) {
    obj o = as_obj(m);
    return sub_get(x, t, k, kl, &o, f, fl, v);
}

int st_sub_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *f,
               size_t fl, const void *p, size_t len) {
    obj o = as_obj(m);
    return sub_put(x, t, k, kl, &o, f, fl, p, len);
}

int st_sub_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *f,
               size_t fl, int *existed) {
    obj o = as_obj(m);
    return sub_del(x, t, k, kl, &o, f, fl, existed);
}

void slist_free(slist *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->r[i].name);
        free(l->r[i].val);
    }
    free(l->r);
    memset(l, 0, sizeof *l);
}

typedef struct load_ctx {
    slist *out;
    size_t plen; /* record key bytes before the part we decode */
    int kind;    /* 0: the rest is an id; 1: the rest is a name */
    int oom;
} load_ctx;

static int load_one(void *arg, const char *rk, size_t rkl, const store_value *v) {
    load_ctx *c = arg;
    slist *l = c->out;
    if (rkl < c->plen || (c->kind == 0 && rkl != c->plen + 16)) return 0; /* malformed: skip */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        srec *r = realloc(l->r, cap * sizeof *r);
        if (!r) {
            c->oom = 1;
            return 1;
        }
        l->r = r;
        l->cap = cap;
    }
    srec *r = &l->r[l->n];
    memset(r, 0, sizeof *r);
    if (c->kind == 0) {
        r->id = sid_get(rk + c->plen);
    } else {
        r->namelen = rkl - c->plen;
        r->name = malloc(r->namelen + 1);
        if (!r->name) {
            c->oom = 1;
            return 1;
        }
        memcpy(r->name, rk + c->plen, r->namelen);
        r->name[r->namelen] = 0;
    }
    r->vlen = v->len;
    r->val = malloc(v->len + 1);
    if (!r->val) {
        free(r->name);
        c->oom = 1;
        return 1;
    }
    memcpy(r->val, v->data, v->len);
    l->n++;
    return 0;
}

/* Scans the records of m whose field lies in [flo, fhi) (fhi NULL: to the
 * end of the version), decoding fields after skip_field bytes. */
static long load_range(cmd_ctx *x, const char *k, size_t kl, const smeta *m, const char *flo,
                       size_t flol, const char *fhi, size_t fhil, size_t skip_field, int kind,
                       int rev, size_t max, slist *out) {
    size_t cap = kl + 11 + (flol > fhil ? flol : fhil) + 1;
    char *lo = malloc(cap), *hi = malloc(cap);
    long n = KEEL_ENOMEM;
    if (!lo || !hi) goto done;
    size_t pl = store_sub_prefix(lo, k, kl, m->version);
    if (!pl) {
        n = 0;
        goto done;
    }
    size_t hl;
    if (fhi) {
        store_sub_prefix(hi, k, kl, m->version);
        memcpy(hi + pl, fhi, fhil);
        hl = pl + fhil;
    } else {
        store_sub_prefix(hi, k, kl, m->version + 1);
        hl = pl;
    }
    memcpy(lo + pl, flo, flol);
    load_ctx c = {.out = out, .plen = pl + skip_field, .kind = kind};
    size_t before = out->n;
    n = rev ? store_scan_range_rev(x->srv->st, x->slot, lo, pl + flol, hi, hl, 0,
                                   max ? max : SIZE_MAX, x->now_ms, load_one, &c)
            : store_scan_range(x->srv->st, x->slot, lo, pl + flol, hi, hl, 0, max ? max : SIZE_MAX,
                               x->now_ms, load_one, &c);
    if (c.oom) n = KEEL_ENOMEM;
    if (n >= 0) n = (long)(out->n - before);
done:
    free(lo);
    free(hi);
    return n;
}

long st_load_entries(cmd_ctx *x, const char *k, size_t kl, const smeta *m, sid start, sid end,
                     int rev, size_t max, slist *out) {
    if (sid_cmp(start, end) > 0) return 0;
    char lo[17], hi[18];
    sf_entry(lo, start);
    sf_entry(hi, end);
    hi[17] = 0; /* just past end's record */
    return load_range(x, k, kl, m, lo, sizeof lo, hi, sizeof hi, 1, 0, rev, max, out);
}

long st_load_groups(cmd_ctx *x, const char *k, size_t kl, const smeta *m, slist *out) {
    char lo[1] = {SK_GROUP}, hi[1] = {SK_GROUP + 1};
    return load_range(x, k, kl, m, lo, 1, hi, 1, 1, 1, 0, 0, out);
}

long st_load_pel(cmd_ctx *x, const char *k, size_t kl, const smeta *m, const char *g, size_t gl,
                 sid start, sid end, size_t max, slist *out) {
    if (sid_cmp(start, end) > 0) return 0;
    char *lo = malloc(gl + 20), *hi = malloc(gl + 20);
    long n = KEEL_ENOMEM;
    if (lo && hi) {
        size_t ll = sf_pel(lo, g, gl, start), hl = sf_pel(hi, g, gl, end);
        hi[hl++] = 0;
        n = load_range(x, k, kl, m, lo, ll, hi, hl, 3 + gl, 0, 0, max, out);
    }
    free(lo);
    free(hi);
    return n;
}

long st_load_consumers(cmd_ctx *x, const char *k, size_t kl, const smeta *m, const char *g,
                       size_t gl, slist *out) {
    char *lo = malloc(gl + 4), *hi = malloc(gl + 4);
    long n = KEEL_ENOMEM;
    if (lo && hi) {
        size_t ll = sf_cons(lo, g, gl, NULL, 0);
        memcpy(hi, lo, ll);
        /* just past every name: the prefix with its last byte bumped (the
         * prefix ends in the group name or its length, never all 0xff:
         * the kind byte is 0x04). */
        size_t hl = ll;
        while (hl > 0 && (unsigned char)hi[hl - 1] == 0xff)
            hl--;
        hi[hl - 1] = (char)((unsigned char)hi[hl - 1] + 1);
        n = load_range(x, k, kl, m, lo, ll, hi, hl, ll, 1, 0, 0, out);
    }
    free(lo);
    free(hi);
    return n;
}

static uint32_t get32(const char *p) {
    return (uint32_t)(unsigned char)p[0] << 24 | (uint32_t)(unsigned char)p[1] << 16 |
           (uint32_t)(unsigned char)p[2] << 8 | (uint32_t)(unsigned char)p[3];
}

void st_reply_entry(cmd_ctx *x, sid id, const char *val, size_t vl) {
    resp_w_array(x->out, 2);
    sid_reply(x, id);
    uint32_t n = vl >= 12 ? get32(val + 8) : 0;
    size_t off = 12;
    resp_w_array(x->out, (size_t)n * 2);
    for (uint32_t i = 0; i < n * 2; i++) {
        size_t len = off + 4 <= vl ? get32(val + off) : 0;
        off += 4;
        if (off + len > vl) len = off <= vl ? vl - off : 0;
        resp_w_bulk(x->out, val + (off <= vl ? off : vl), len);
        off += len;
    }
}

/* ---- Groups, PEL, consumers ----------------------------------------------- */

void sg_decode(const char *v, size_t vl, sgroup *g) {
    memset(g, 0, sizeof *g);
    if (vl >= 24) {
        g->last = sid_get(v);
        g->entries_read = get64(v + 16);
    }
}

void sg_encode(char *out, const sgroup *g) {
    sid_put(out, g->last);
    put64(out + 16, g->entries_read);
}

int sg_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
           size_t gl, sgroup *out) {
    char *f = malloc(gl + 1);
    if (!f) return KEEL_ENOMEM;
    store_value v;
    int rc = st_sub_get(x, t, k, kl, m, f, sf_group(f, g, gl), &v);
    free(f);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) return rc;
    sg_decode(v.data, v.len, out);
    store_value_release(&v);
    return 1;
}

int sg_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
           size_t gl, const sgroup *sg) {
    char *f = malloc(gl + 1), val[24];
    if (!f) return KEEL_ENOMEM;
    sg_encode(val, sg);
    int rc = st_sub_put(x, t, k, kl, m, f, sf_group(f, g, gl), val, sizeof val);
    free(f);
    return rc;
}

int sp_decode(const char *v, size_t vl, spel *p) {
    if (vl < 16) return -1;
    p->time = get64(v);
    p->count = get64(v + 8);
    p->cons = v + 16;
    p->conslen = vl - 16;
    return 0;
}

int sp_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
           size_t gl, sid id, const spel *p) {
    char *f = malloc(gl + 19), *val = malloc(16 + p->conslen);
    int rc = KEEL_ENOMEM;
    if (f && val) {
        put64(val, p->time);
        put64(val + 8, p->count);
        memcpy(val + 16, p->cons, p->conslen);
        rc = st_sub_put(x, t, k, kl, m, f, sf_pel(f, g, gl, id), val, 16 + p->conslen);
    }
    free(f);
    free(val);
    return rc;
}

int sc_touch(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const smeta *m, const char *g,
             size_t gl, const char *c, size_t cl, int touch, int *created) {
    char *f = malloc(gl + cl + 3);
    if (!f) return KEEL_ENOMEM;
    size_t fl = sf_cons(f, g, gl, c, cl);
    store_value v;
    int rc = st_sub_get(x, t, k, kl, m, f, fl, &v);
    if (created) *created = rc == KEEL_ENOTFOUND;
    if (rc == 0) store_value_release(&v);
    if (rc == KEEL_ENOTFOUND || (rc == 0 && touch)) {
        char val[8];
        put64(val, (uint64_t)x->now_ms);
        rc = st_sub_put(x, t, k, kl, m, f, fl, val, sizeof val);
    }
    free(f);
    return rc;
}

/* ---- Lag ------------------------------------------------------------------ */

int st_range_has_tombstones(const smeta *m, const sid *start, const sid *end) {
    sid zero = {0, 0}, max = {UINT64_MAX, UINT64_MAX};
    if (!m->length || !sid_cmp(m->maxdel, zero)) return 0;
    if (sid_cmp(m->first, m->maxdel) > 0) return 0;
    sid s = start ? *start : zero, e = end ? *end : max;
    return sid_cmp(s, m->maxdel) <= 0 && sid_cmp(m->maxdel, e) <= 0;
}

uint64_t st_estimate_distance(const smeta *m, sid id) {
    sid zero = {0, 0};
    if (!m->added) return 0;
    if (!m->length && sid_cmp(id, m->last) < 1) return m->added;
    int cl = sid_cmp(id, m->last);
    if (cl == 0) return m->added;
    if (cl > 0) return ENTRIES_READ_INVALID;
    int cf = sid_cmp(id, m->first);
    if (!sid_cmp(m->maxdel, zero) || sid_cmp(m->maxdel, m->first) < 0) {
        if (cf < 0) return m->added - m->length;
        if (cf == 0) return m->added - m->length + 1;
    }
    return ENTRIES_READ_INVALID;
}

void st_fail(cmd_ctx *x, store_txn *t, int rc) {
    if (t) store_txn_abort(t);
    if (rc == KEEL_ENOMEM)
        reply_err(x, "ERR out of memory");
    else
        reply_storage(x, rc);
}
