/* cmd_sort.c - SORT and SORT_RO over lists, sets and sorted sets, as redis
 * 7.0's sort.c, with one cluster rule.
 *
 * Contract. SORT key [BY pattern] [LIMIT offset count] [GET pattern ...]
 * [ASC|DESC] [ALPHA] [STORE destination]; SORT_RO is the same without
 * STORE (a syntax error there). Numeric sort parses each element (or its BY
 * value; a missing one is 0) as a double and fails with "One or more scores
 * can't be converted into double"; equal scores fall back to byte order, so
 * the result is deterministic. ALPHA compares bytes (redis' strcoll in the
 * C locale). BY without '*' means no sorting: lists keep their order,
 * sorted sets their score order (DESC reverses both); a set is then sorted
 * by bytes when the reply is stored or the caller is a script, as redis
 * does. STORE writes the result as a list (nil GETs as empty strings),
 * replacing dest; an empty result deletes dest. Both keys must share a
 * slot (-CROSSSLOT otherwise).
 *
 * Cluster rule. Redis 7.0 in cluster mode refuses BY and GET patterns
 * outright; keel accepts those whose every formed key is in the sorted
 * key's slot: the pattern must begin with a hash tag "{tag}" (non-empty,
 * before the '*') whose slot is the key's. "#" and patterns without '*'
 * read no key and are always allowed. Anything else is refused with
 * "ERR BY/GET option of SORT denied in Cluster mode unless the pattern
 * starts with a hash tag of the sorted key's slot", as no other partition
 * may be read inside this one's turn.
 */
#include "node/cmd.h"
#include "core/crc16.h"
#include "core/err.h"
#include "node/db.h"
#include "node/script.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct sort_el {
    const char *p; /* the element (in the loaded flist) */
    size_t len;
    double score;
    char *by; /* ALPHA with BY: the looked-up value (owned), or NULL */
    size_t bylen;
} sort_el;

typedef struct sort_opts {
    const char *by;
    size_t bylen;
    int dontsort, desc, alpha, ro;
    long long lstart, lcount;
    const char *store;
    size_t storelen;
    int gets[512];
    int ngets;
} sort_opts;

static int g_desc, g_alpha, g_by; /* qsort's comparator cannot take a context */

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int sort_cmp(const void *va, const void *vb) {
    const sort_el *a = va, *b = vb;
    int c;
    if (!g_alpha) {
        c = a->score > b->score   ? 1
            : a->score < b->score ? -1
                                  : bytes_cmp(a->p, a->len, b->p, b->len);
    } else if (g_by) {
        if (!a->by || !b->by)
            c = a->by == b->by ? 0 : a->by ? 1 : -1;
        else
            c = bytes_cmp(a->by, a->bylen, b->by, b->bylen);
    } else {
        c = bytes_cmp(a->p, a->len, b->p, b->len);
    }
    return g_desc ? -c : c;
}

/* 1 if every key pattern p forms is in `slot` (see the header), or p reads
 * no key. */
static int pattern_in_slot(const char *p, size_t pl, unsigned slot) {
    if (pl == 1 && p[0] == '#') return 1;
    const char *star = memchr(p, '*', pl);
    if (!star) return 1;
    if (pl < 3 || p[0] != '{') return 0;
    const char *close = memchr(p + 1, '}', (size_t)(star - p - 1));
    if (!close || close == p + 1) return 0;
    return keel_crc16(p + 1, (size_t)(close - p - 1)) % 16384 == slot;
}

/* The meta record of a compound key as an obj (its version and type). */
static int meta_obj(const store_value *v, obj *o) {
    if (v->len < STORE_META_LEN) return KEEL_ECORRUPT;
    const unsigned char *p = (const unsigned char *)v->data;
    memset(o, 0, sizeof *o);
    for (int i = 0; i < 8; i++)
        o->version = o->version << 8 | p[i];
    o->type = v->type;
    return 0;
}

/* redis' lookupKeyByPattern: "#" is the element itself; no '*' is nothing;
 * else the key formed by replacing the first '*' with the element, or its
 * hash field after "->". Returns 1 and a malloc'd copy in *out, 0 for
 * nothing, or a negative KEEL_E*. */
static int lookup_pattern(cmd_ctx *x, const char *p, size_t pl, const char *el, size_t ell,
                          char **out, size_t *outlen) {
    *out = NULL, *outlen = 0;
    if (pl == 1 && p[0] == '#') {
        if (!(*out = malloc(ell + 1))) return KEEL_ENOMEM;
        memcpy(*out, el, ell);
        *outlen = ell;
        return 1;
    }
    const char *star = memchr(p, '*', pl);
    if (!star) return 0;
    const char *arrow = NULL, *field = NULL;
    size_t fieldlen = 0;
    for (const char *q = star + 1; q + 1 < p + pl; q++)
        if (q[0] == '-' && q[1] == '>') {
            arrow = q;
            break;
        }
    if (arrow && arrow + 2 < p + pl) {
        field = arrow + 2;
        fieldlen = (size_t)(p + pl - field);
    } else {
        arrow = NULL;
    }
    size_t pre = (size_t)(star - p), post = (size_t)((arrow ? arrow : p + pl) - star - 1);
    char *key = malloc(pre + ell + post + 1);
    if (!key) return KEEL_ENOMEM;
    memcpy(key, p, pre);
    memcpy(key + pre, el, ell);
    memcpy(key + pre + ell, star + 1, post);
    size_t kl = pre + ell + post;
    store_value v;
    int rc = db_get(x, NULL, key, kl, &v);
    if (rc) {
        free(key);
        return rc == KEEL_ENOTFOUND ? 0 : rc;
    }
    const char *src = NULL;
    size_t srclen = 0;
    store_value fv;
    int have_fv = 0;
    if (field && v.type == STORE_T_HASH) {
        obj o;
        rc = meta_obj(&v, &o);
        if (!rc) rc = sub_get(x, NULL, key, kl, &o, field, fieldlen, &fv);
        if (rc == KEEL_ENOTFOUND)
            rc = 0;
        else if (!rc)
            have_fv = 1, src = fv.data, srclen = fv.len;
    } else if (!field && v.type == STORE_T_STRING) {
        src = v.data, srclen = v.len;
    }
    int found = src != NULL;
    if (!rc && found) {
        if (!(*out = malloc(srclen + 1)))
            rc = KEEL_ENOMEM;
        else
            memcpy(*out, src, srclen), *outlen = srclen;
    }
    if (have_fv) store_value_release(&fv);
    store_value_release(&v);
    free(key);
    return rc ? rc : found;
}

/* redis' strtod check for a sort score. */
static int parse_score(const char *s, size_t len, double *out) {
    char buf[128];
    if (len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || errno == ERANGE || isnan(d)) return -1;
    *out = d;
    return 0;
}

static double dec_score(const char *p) { /* a sorted set member's score record */
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = u << 8 | (uint8_t)p[i];
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static int zset_order(const void *va, const void *vb) { /* score, then member */
    const sort_el *a = va, *b = vb;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    return bytes_cmp(a->p, a->len, b->p, b->len);
}

static int parse_opts(cmd_ctx *x, sort_opts *o, int ro) {
    memset(o, 0, sizeof *o);
    o->ro = ro;
    o->lstart = 0, o->lcount = -1;
    for (int j = 2; j < x->argc; j++) {
        int left = x->argc - j - 1;
        if (arg_is(x, j, "asc")) {
            o->desc = 0;
        } else if (arg_is(x, j, "desc")) {
            o->desc = 1;
        } else if (arg_is(x, j, "alpha")) {
            o->alpha = 1;
        } else if (arg_is(x, j, "limit") && left >= 2) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &o->lstart) ||
                arg_ll(x->argv[j + 2], x->argvlen[j + 2], &o->lcount)) {
                reply_not_int(x);
                return -1;
            }
            j += 2;
        } else if (arg_is(x, j, "store") && left >= 1 && !o->ro) {
            o->store = x->argv[j + 1], o->storelen = x->argvlen[j + 1];
            j++;
        } else if (arg_is(x, j, "by") && left >= 1) {
            o->by = x->argv[j + 1], o->bylen = x->argvlen[j + 1];
            if (!memchr(o->by, '*', o->bylen))
                o->dontsort = 1;
            else if (!pattern_in_slot(o->by, o->bylen, x->slot)) {
                reply_err(x, "ERR BY option of SORT denied in Cluster mode unless the pattern "
                             "starts with a hash tag of the sorted key's slot");
                return -1;
            }
            j++;
        } else if (arg_is(x, j, "get") && left >= 1) {
            if (!pattern_in_slot(x->argv[j + 1], x->argvlen[j + 1], x->slot)) {
                reply_err(x, "ERR GET option of SORT denied in Cluster mode unless the pattern "
                             "starts with a hash tag of the sorted key's slot");
                return -1;
            }
            if (o->ngets == (int)(sizeof o->gets / sizeof *o->gets)) {
                reply_err(x, "ERR SORT: too many GET patterns (at most 512)");
                return -1;
            }
            o->gets[o->ngets++] = j + 1;
            j++;
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    if (o->store && keel_key_slot(o->store, o->storelen) != x->slot) {
        reply_err(x, "CROSSSLOT Keys in request don't hash to the same slot");
        return -1;
    }
    return 0;
}

/* Writes the result list to dest (or deletes dest when n == 0). */
static int store_result(cmd_ctx *x, const sort_opts *o, char **vals, const size_t *lens, size_t n) {
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = 0;
    if (!n) {
        rc = db_del(x, t, o->store, o->storelen, NULL);
    } else {
        flist l;
        flist_init(&l);
        for (size_t i = 0; i < n && !rc; i++) {
            uint64_t idx = (1ull << 63) + i; /* cmd_list.c's index records from 2^63 */
            char f[8];
            for (int b = 0; b < 8; b++)
                f[b] = (char)(idx >> (56 - 8 * b));
            rc = flist_add(&l, f, 8, vals[i] ? vals[i] : "", vals[i] ? lens[i] : 0);
        }
        store_value sv = {.type = STORE_T_LIST};
        if (!rc) rc = db_copy_value(x, t, &sv, &l, o->store, o->storelen, 0);
        flist_free(&l);
    }
    return db_finish(x, t, rc);
}

static void sort_generic(cmd_ctx *x, int ro) {
    sort_opts o;
    if (parse_opts(x, &o, ro)) return;
    store_value sv;
    flist l;
    int rc = db_load_value(x, x->argv[1], x->argvlen[1], &sv, &l);
    if (rc && rc != KEEL_ENOTFOUND) {
        flist_free(&l);
        reply_storage(x, rc);
        return;
    }
    uint8_t type = rc ? STORE_T_LIST : sv.type;
    if (!rc) store_value_release(&sv);
    if (type != STORE_T_LIST && type != STORE_T_SET && type != STORE_T_ZSET) {
        flist_free(&l);
        reply_wrongtype(x);
        return;
    }
    size_t n = l.n, nout = 0;
    sort_el *els = calloc(n + 1, sizeof *els);
    char **vals = NULL;
    size_t *lens = NULL;
    if (!els) {
        rc = KEEL_ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        if (type == STORE_T_LIST) {
            els[i].p = flist_v(&l, i), els[i].len = l.e[i].vl;
        } else {
            els[i].p = flist_f(&l, i), els[i].len = l.e[i].fl;
            if (type == STORE_T_ZSET && l.e[i].vl == 8) els[i].score = dec_score(flist_v(&l, i));
        }
    }
    int dontsort = o.dontsort;
    if (type == STORE_T_ZSET) qsort(els, n, sizeof *els, zset_order);
    /* a set has no order of its own: sort it when the order is observable */
    if (dontsort && type == STORE_T_SET && (o.store || script_is_caller(x->srv, x->c))) {
        dontsort = 0, o.alpha = 1, o.by = NULL;
    }
    if (dontsort && o.desc) /* lists and sorted sets: their own order, reversed */
        for (size_t i = 0; i < n / 2; i++) {
            sort_el tmp = els[i];
            els[i] = els[n - 1 - i], els[n - 1 - i] = tmp;
        }
    if (!dontsort) {
        int bad = 0;
        for (size_t i = 0; i < n && !bad; i++) {
            char *byv = NULL;
            size_t byl = 0;
            if (o.by) {
                int r = lookup_pattern(x, o.by, o.bylen, els[i].p, els[i].len, &byv, &byl);
                if (r < 0) {
                    rc = r;
                    goto fail;
                }
            }
            if (o.alpha) {
                els[i].by = byv, els[i].bylen = byl;
                continue;
            }
            els[i].score = 0;
            if (o.by) {
                if (byv && parse_score(byv, byl, &els[i].score)) bad = 1;
                free(byv);
            } else if (parse_score(els[i].p, els[i].len, &els[i].score)) {
                bad = 1;
            }
        }
        if (bad) {
            reply_err(x, "ERR One or more scores can't be converted into double");
            goto done;
        }
        g_desc = o.desc, g_alpha = o.alpha, g_by = o.by != NULL;
        qsort(els, n, sizeof *els, sort_cmp);
    }
    /* LIMIT, as redis clamps it */
    long long start = o.lstart < 0 ? 0 : o.lstart;
    long long end = o.lcount < 0 ? (long long)n - 1 : start + o.lcount - 1;
    if (start >= (long long)n) start = (long long)n - 1, end = (long long)n - 2;
    if (end >= (long long)n) end = (long long)n - 1;
    size_t count = end >= start ? (size_t)(end - start + 1) : 0;
    size_t per = o.ngets ? (size_t)o.ngets : 1;
    vals = calloc(count * per + 1, sizeof *vals);
    lens = calloc(count * per + 1, sizeof *lens);
    if (!vals || !lens) {
        rc = KEEL_ENOMEM;
        goto fail;
    }
    nout = count * per;
    for (size_t i = 0; i < count; i++) {
        const sort_el *e = &els[(size_t)start + i];
        if (!o.ngets) {
            if (!(vals[i] = malloc(e->len + 1))) {
                rc = KEEL_ENOMEM;
                goto fail;
            }
            memcpy(vals[i], e->p, e->len), lens[i] = e->len;
            continue;
        }
        for (int g = 0; g < o.ngets; g++) {
            int a = o.gets[g];
            int r = lookup_pattern(x, x->argv[a], x->argvlen[a], e->p, e->len, &vals[i * per + g],
                                   &lens[i * per + g]);
            if (r < 0) {
                rc = r;
                goto fail;
            }
        }
    }
    if (o.store) {
        if (store_result(x, &o, vals, lens, nout) == 0) resp_w_int(x->out, (long long)nout);
        goto done;
    }
    resp_w_array(x->out, nout);
    for (size_t i = 0; i < nout; i++) {
        if (vals[i])
            resp_w_bulk(x->out, vals[i], lens[i]);
        else
            resp_w_null(x->out, x->proto);
    }
    goto done;
fail:
    reply_storage(x, rc);
done:
    for (size_t i = 0; vals && i < nout; i++)
        free(vals[i]);
    for (size_t i = 0; els && i < n; i++)
        free(els[i].by);
    free(vals);
    free(lens);
    free(els);
    flist_free(&l);
}

void cmd_sort(cmd_ctx *x) {
    sort_generic(x, 0);
}

void cmd_sort_ro(cmd_ctx *x) {
    sort_generic(x, 1);
}
