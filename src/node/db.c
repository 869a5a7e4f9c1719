/* db.c - user keys to record keys, and compound keys (see db.h). Record
 * keys are built in a stack buffer when short, else on the heap. */
#include "node/db.h"
#include "node/blocking.h"
#include "node/multi.h"
#include "core/err.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* zset.h (which includes this module's header) */
int zs_index_copy(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *m,
                  size_t ml, const char *val, size_t vl);

#define SMALL 256
#define LIST_MID (1ull << 63)

typedef struct rkbuf {
    char small[SMALL];
    char *p;
    size_t len;
} rkbuf;

/* Builds [0x00][k]. Returns 0, or KEEL_EINVAL for a key too long to store. */
static int rk_key(rkbuf *b, const char *k, size_t kl) {
    b->p = kl + 1 <= SMALL ? b->small : malloc(kl + 1);
    if (!b->p) return KEEL_ENOMEM;
    b->len = store_rkey(b->p, k, kl);
    return b->len ? 0 : KEEL_EINVAL;
}

/* Builds [0x01][kl][k][version][f]. */
static int rk_sub(rkbuf *b, const char *k, size_t kl, uint64_t ver, const char *f, size_t fl) {
    size_t n = kl + 11 + fl;
    b->p = n <= SMALL ? b->small : malloc(n);
    if (!b->p) return KEEL_ENOMEM;
    size_t pl = store_sub_prefix(b->p, k, kl, ver);
    if (!pl || n > 65000) {
        b->len = 0;
        return KEEL_EINVAL;
    }
    if (fl) memcpy(b->p + pl, f, fl);
    b->len = n;
    return 0;
}

static void rk_free(rkbuf *b) {
    if (b->p && b->p != b->small) free(b->p);
    b->p = NULL;
}

void reply_storage(cmd_ctx *x, int rc) {
    reply_errf(x, "ERR storage error: %s", keel_strerror(rc));
}

void db_del_fields(cmd_ctx *x, uint8_t type) {
    const char *k = x->argv[1];
    size_t kl = x->argvlen[1];
    store_txn *t = store_txn_begin(x->srv->st);
    obj o;
    int r = obj_lookup(x, t, k, kl, type, &o);
    if (r <= 0) {
        store_txn_abort(t);
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    long long n = 0;
    int rc = 0;
    for (int i = 2; i < x->argc && !rc; i++) {
        int existed;
        rc = sub_del(x, t, k, kl, &o, x->argv[i], x->argvlen[i], &existed);
        n += existed;
    }
    o.size -= (uint64_t)n;
    if (!rc && n) rc = obj_save(x, t, k, kl, &o);
    if (db_finish(x, t, rc) == 0) resp_w_int(x->out, n);
}

int db_finish(cmd_ctx *x, store_txn *t, int rc) {
    if (rc) {
        store_txn_abort(t);
        reply_storage(x, rc);
        return -1;
    }
    if ((rc = store_txn_commit(t))) {
        reply_storage(x, rc);
        return -1;
    }
    return 0;
}

int db_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, store_value *v) {
    rkbuf b;
    int rc = rk_key(&b, k, kl);
    if (rc == KEEL_EINVAL) rc = KEEL_ENOTFOUND;
    if (!rc)
        rc = t ? store_txn_get(t, x->slot, b.p, b.len, x->now_ms, v)
               : store_get(x->srv->st, x->slot, b.p, b.len, x->now_ms, v);
    else
        memset(v, 0, sizeof *v);
    rk_free(&b);
    return rc;
}

int db_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, uint8_t type, int64_t expire_ms,
           const void *p, size_t len) {
    rkbuf b;
    int rc = rk_key(&b, k, kl);
    if (!rc) rc = store_txn_put(t, x->slot, b.p, b.len, type, expire_ms, p, len);
    rk_free(&b);
    multi_touch(x->srv, k, kl);
    /* Wakes BLPOP, BZPOPMIN, XREAD & co (blocking.h); any type, as a
     * blocked XREADGROUP answers a key that stopped being a stream. */
    blocking_touch(x->srv, k, kl);
    return rc;
}

int db_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, int *existed) {
    rkbuf b;
    int ex = 0;
    int rc = rk_key(&b, k, kl);
    if (rc == KEEL_EINVAL)
        rc = 0; /* too long to exist */
    else if (!rc)
        rc = store_txn_del(t, x->slot, b.p, b.len, &ex);
    rk_free(&b);
    if (existed) *existed = ex;
    if (ex) { /* deleting nothing changes nothing (redis) */
        multi_touch(x->srv, k, kl);
        blocking_touch(x->srv, k, kl); /* a blocked XREADGROUP fails on a deleted key */
    }
    return rc;
}

int obj_lookup(cmd_ctx *x, store_txn *t, const char *k, size_t kl, uint8_t want, obj *o) {
    store_value v;
    int rc = db_get(x, t, k, kl, &v);
    if (rc == KEEL_ENOTFOUND) {
        *o = (obj){.type = want, .version = store_new_version(x->srv->st), .head = LIST_MID};
        return 0;
    }
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    if (v.type != want || v.len < STORE_META_LEN) {
        store_value_release(&v);
        reply_wrongtype(x);
        return -1;
    }
    const unsigned char *p = (const unsigned char *)v.data;
    uint64_t ver = 0, size = 0;
    for (int i = 0; i < 8; i++) {
        ver = ver << 8 | p[i];
        size = size << 8 | p[8 + i];
    }
    uint64_t head = LIST_MID;
    if (v.type == STORE_T_LIST && v.len >= STORE_META_LEN + 8) {
        head = 0;
        for (int i = 0; i < 8; i++)
            head = head << 8 | p[16 + i];
    }
    *o =
        (obj){.type = v.type, .expire_ms = v.expire_ms, .version = ver, .size = size, .head = head};
    store_value_release(&v);
    return 1;
}

int obj_save(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o) {
    if (o->size == 0) return db_del(x, t, k, kl, NULL);
    char m[STORE_META_LEN + 8];
    for (int i = 0; i < 8; i++) {
        m[i] = (char)(o->version >> (56 - 8 * i));
        m[8 + i] = (char)(o->size >> (56 - 8 * i));
        m[16 + i] = (char)(o->head >> (56 - 8 * i));
    }
    size_t n = o->type == STORE_T_LIST ? sizeof m : STORE_META_LEN;
    return db_put(x, t, k, kl, o->type, o->expire_ms, m, n);
}

int sub_get(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *f,
            size_t fl, store_value *v) {
    rkbuf b;
    int rc = rk_sub(&b, k, kl, o->version, f, fl);
    if (rc == KEEL_EINVAL) rc = KEEL_ENOTFOUND;
    if (!rc)
        rc = t ? store_txn_get(t, x->slot, b.p, b.len, x->now_ms, v)
               : store_get(x->srv->st, x->slot, b.p, b.len, x->now_ms, v);
    else
        memset(v, 0, sizeof *v);
    rk_free(&b);
    return rc;
}

int sub_put(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *f,
            size_t fl, const void *p, size_t len) {
    rkbuf b;
    int rc = rk_sub(&b, k, kl, o->version, f, fl);
    if (!rc)
        rc = store_txn_put(t, x->slot, b.p, b.len, (uint8_t)(STORE_T_SUB | o->type), 0, p, len);
    rk_free(&b);
    multi_touch(x->srv, k, kl);
    return rc;
}

int sub_del(cmd_ctx *x, store_txn *t, const char *k, size_t kl, const obj *o, const char *f,
            size_t fl, int *existed) {
    rkbuf b;
    int ex = 0;
    int rc = rk_sub(&b, k, kl, o->version, f, fl);
    if (rc == KEEL_EINVAL)
        rc = 0;
    else if (!rc)
        rc = store_txn_del(t, x->slot, b.p, b.len, &ex);
    rk_free(&b);
    if (existed) *existed = ex;
    if (ex) multi_touch(x->srv, k, kl);
    return rc;
}

typedef struct sub_scan_ctx {
    size_t plen;
    sub_cb cb;
    void *arg;
} sub_scan_ctx;

static int sub_scan_one(void *arg, const char *rk, size_t rkl, const store_value *v) {
    sub_scan_ctx *c = arg;
    return c->cb(c->arg, rk + c->plen, rkl - c->plen, v);
}

long sub_scan_from(cmd_ctx *x, const char *k, size_t kl, const obj *o, const char *from,
                   size_t fromlen, size_t skip, size_t max, sub_cb cb, void *arg) {
    char *lo = malloc(kl + 11 + fromlen), *hi = malloc(kl + 11);
    long n = KEEL_ENOMEM;
    if (lo && hi) {
        size_t pl = store_sub_prefix(lo, k, kl, o->version);
        store_sub_prefix(hi, k, kl, o->version + 1);
        if (fromlen) memcpy(lo + pl, from, fromlen);
        sub_scan_ctx c = {.plen = pl, .cb = cb, .arg = arg};
        n = pl ? store_scan_range(x->srv->st, x->slot, lo, pl + fromlen, hi, pl, skip, max,
                                  x->now_ms, sub_scan_one, &c)
               : 0;
    }
    free(lo);
    free(hi);
    return n;
}

long sub_scan(cmd_ctx *x, const char *k, size_t kl, const obj *o, size_t skip, size_t max,
              sub_cb cb, void *arg) {
    return sub_scan_from(x, k, kl, o, NULL, 0, skip, max, cb, arg);
}

/* redis' stringmatchlen (util.c), without the recursion-depth guard's
 * nesting limit beyond what a 64 KiB key allows. */
static int glob_impl(const char *p, size_t pl, const char *s, size_t sl, int nocase, int depth,
                     int *skip_longer) {
    if (depth > 1000) return 0;
    while (pl && sl) {
        switch (p[0]) {
        case '*':
            while (pl > 1 && p[1] == '*') {
                p++;
                pl--;
            }
            if (pl == 1) return 1;
            while (sl) {
                if (glob_impl(p + 1, pl - 1, s, sl, nocase, depth + 1, skip_longer)) return 1;
                if (*skip_longer) return 0;
                s++;
                sl--;
            }
            /* The rest matches nowhere in the rest of the string: no longer
             * match of an earlier '*' can help (redis' skipLongerMatches). */
            *skip_longer = 1;
            return 0;
        case '?':
            s++;
            sl--;
            break;
        case '[': {
            p++;
            pl--;
            int not = pl && p[0] == '^';
            if (not ) {
                p++;
                pl--;
            }
            int match = 0;
            for (;;) {
                if (pl >= 2 && p[0] == '\\') {
                    p++;
                    pl--;
                    if (p[0] == s[0]) match = 1;
                } else if (pl == 0 || p[0] == ']') {
                    break;
                } else if (pl >= 3 && p[1] == '-') {
                    int a = (unsigned char)p[0], z = (unsigned char)p[2], c = (unsigned char)s[0];
                    if (a > z) {
                        int tmp = a;
                        a = z;
                        z = tmp;
                    }
                    if (nocase) {
                        a = tolower(a);
                        z = tolower(z);
                        c = tolower(c);
                    }
                    p += 2;
                    pl -= 2;
                    if (c >= a && c <= z) match = 1;
                } else if (nocase ? tolower((unsigned char)p[0]) == tolower((unsigned char)s[0])
                                  : p[0] == s[0]) {
                    match = 1;
                }
                p++;
                pl--;
            }
            if (pl == 0) { /* unterminated: redis stops at the end */
                p--;
                pl++;
            }
            if (not ) match = !match;
            if (!match) return 0;
            s++;
            sl--;
            break;
        }
        case '\\':
            if (pl >= 2) {
                p++;
                pl--;
            }
            /* fall through */
        default:
            if (nocase ? tolower((unsigned char)p[0]) != tolower((unsigned char)s[0])
                       : p[0] != s[0])
                return 0;
            s++;
            sl--;
            break;
        }
        p++;
        pl--;
        if (sl == 0) {
            while (pl && *p == '*') {
                p++;
                pl--;
            }
            break;
        }
    }
    return pl == 0 && sl == 0;
}

int db_glob(const char *p, size_t pl, const char *s, size_t sl, int nocase) {
    int skip_longer = 0;
    return glob_impl(p, pl, s, sl, nocase, 0, &skip_longer);
}

void flist_init(flist *l) {
    memset(l, 0, sizeof *l);
    kbuf_init(&l->buf);
}

void flist_free(flist *l) {
    kbuf_close(&l->buf);
    free(l->e);
    memset(l, 0, sizeof *l);
}

int flist_add(flist *l, const char *f, size_t fl, const char *v, size_t vl) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        flist_ent *p = realloc(l->e, cap * sizeof *p);
        if (!p) return KEEL_ENOMEM;
        l->e = p;
        l->cap = cap;
    }
    flist_ent *e = &l->e[l->n];
    e->fo = l->buf.len;
    e->fl = fl;
    if (kbuf_append(&l->buf, f, fl)) return KEEL_ENOMEM;
    e->vo = l->buf.len;
    e->vl = vl;
    if (kbuf_append(&l->buf, v, vl)) return KEEL_ENOMEM;
    l->n++;
    return 0;
}

static int flist_one(void *arg, const char *f, size_t fl, const store_value *v) {
    return flist_add(arg, f, fl, v->data, v->len) ? -1 : 0;
}

long flist_load(cmd_ctx *x, const char *k, size_t kl, const obj *o, size_t skip, size_t max,
                flist *l) {
    size_t before = l->n;
    long n = sub_scan(x, k, kl, o, skip, max, flist_one, l);
    if (n >= 0 && l->n != before + (size_t)n) return KEEL_ENOMEM;
    return n;
}

const char *db_type_name(uint8_t type) {
    switch (type) {
    case STORE_T_STRING:
        return "string";
    case STORE_T_HASH:
        return "hash";
    case STORE_T_SET:
        return "set";
    case STORE_T_ZSET:
        return "zset";
    case STORE_T_LIST:
        return "list";
    case STORE_T_STREAM:
        return "stream";
    default:
        return "none";
    }
}

int db_load_value(cmd_ctx *x, const char *k, size_t kl, store_value *sv, flist *l) {
    flist_init(l);
    int rc = db_get(x, NULL, k, kl, sv);
    if (rc) return rc;
    if (sv->type == STORE_T_STRING) return 0;
    obj o;
    if (sv->len < STORE_META_LEN) return KEEL_ECORRUPT;
    const unsigned char *p = (const unsigned char *)sv->data;
    o.version = 0;
    for (int i = 0; i < 8; i++)
        o.version = o.version << 8 | p[i];
    o.type = sv->type;
    long n = flist_load(x, k, kl, &o, 0, SIZE_MAX, l);
    if (n < 0) {
        store_value_release(sv);
        flist_free(l);
        return (int)n;
    }
    return 0;
}

int db_copy_value(cmd_ctx *x, store_txn *t, const store_value *sv, const flist *l, const char *dk,
                  size_t dkl, int64_t expire_ms) {
    int rc = db_del(x, t, dk, dkl, NULL);
    if (rc) return rc;
    if (sv->type ==
        STORE_T_STREAM) { /* a stream: its metadata under a new version, then every record */
        if (sv->len < STORE_META_LEN) return KEEL_ECORRUPT;
        char *m = malloc(sv->len);
        if (!m) return KEEL_ENOMEM;
        memcpy(m, sv->data, sv->len);
        obj so = {.type = sv->type, .version = store_new_version(x->srv->st)};
        for (int i = 0; i < 8; i++)
            m[i] = (char)(so.version >> (56 - 8 * i));
        for (size_t i = 0; i < l->n && !rc; i++)
            rc = sub_put(x, t, dk, dkl, &so, flist_f(l, i), l->e[i].fl, flist_v(l, i), l->e[i].vl);
        if (!rc) rc = db_put(x, t, dk, dkl, sv->type, expire_ms, m, sv->len);
        free(m);
        return rc;
    }
    if (sv->type == STORE_T_STRING)
        return db_put(x, t, dk, dkl, STORE_T_STRING, expire_ms, sv->data, sv->len);
    obj o = {.type = sv->type,
             .expire_ms = expire_ms,
             .version = store_new_version(x->srv->st),
             .size = l->n};
    if (sv->type == STORE_T_LIST) { /* keep the source's index records */
        o.head = LIST_MID;
        if (l->n && l->e[0].fl == 8) {
            const unsigned char *f = (const unsigned char *)flist_f(l, 0);
            o.head = 0;
            for (int i = 0; i < 8; i++)
                o.head = o.head << 8 | f[i];
        }
    }
    for (size_t i = 0; i < l->n && !rc; i++) {
        rc = sub_put(x, t, dk, dkl, &o, flist_f(l, i), l->e[i].fl, flist_v(l, i), l->e[i].vl);
        if (!rc && sv->type == STORE_T_ZSET) /* and its score-index record */
            rc = zs_index_copy(x, t, dk, dkl, &o, flist_f(l, i), l->e[i].fl, flist_v(l, i),
                               l->e[i].vl);
    }
    return rc ? rc : obj_save(x, t, dk, dkl, &o);
}
