/* cmd_stream.c - XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID
 * (stream.h has the encoding). Argument checks, replies and errors follow
 * redis 7.0 (t_stream.c) in its order. Each write scans what it needs
 * first (no txn may be open for a scan), then writes the entries and the
 * metadata in one txn.
 *
 * Trimming. Exact trimming (MAXLEN n, MINID id) removes entries one by
 * one from the head. Approximate trimming (~) removes only whole nodes,
 * as redis removes whole listpacks: every entry records the node number
 * it was appended to (a new node every stream-node-max-entries entries;
 * redis also cuts a node at stream-node-max-bytes, which keel does not
 * model), and a node goes only when all of it may go, within LIMIT
 * (default 100 x stream-node-max-entries).
 */
#include "node/stream.h"
#include "core/err.h"
#include "node/introspect.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define K(x) (x)->argv[1], (x)->argvlen[1]

enum { TRIM_NONE, TRIM_MAXLEN, TRIM_MINID };

typedef struct trim_args {
    int strategy, approx, no_mkstream, id_given, seq_given;
    long long maxlen, limit;
    sid minid, id;
} trim_args;

static long long node_max_entries(cmd_ctx *x) {
    const char *v = config_value(x->srv, "stream-node-max-entries");
    long long n = v ? atoll(v) : 100;
    return n < 0 ? 0 : n;
}

/* redis' streamParseAddOrTrimArgsOrReply. Returns the id's position (XADD),
 * argc for XTRIM, or -1 after replying. */
static int parse_trim(cmd_ctx *x, trim_args *a, int xadd) {
    memset(a, 0, sizeof *a);
    int i = 2, limit_given = 0;
    for (; i < x->argc; i++) {
        int more = x->argc - 1 - i;
        const char *o = x->argv[i];
        if (xadd && x->argvlen[i] == 1 && o[0] == '*') break;
        if ((!strcasecmp(o, "maxlen") || !strcasecmp(o, "minid")) && more) {
            int minid = !strcasecmp(o, "minid");
            if (a->strategy != TRIM_NONE) {
                reply_err(x, "ERR syntax error, MAXLEN and MINID options at the same time are "
                             "not compatible");
                return -1;
            }
            a->approx = 0;
            const char *nx = x->argv[i + 1];
            if (more >= 2 && x->argvlen[i + 1] == 1 && (nx[0] == '~' || nx[0] == '=')) {
                a->approx = nx[0] == '~';
                i++;
            }
            if (minid) {
                if (sid_parse(x, x->argv[i + 1], x->argvlen[i + 1], &a->minid, 0, 1, NULL))
                    return -1;
            } else {
                if (arg_ll(x->argv[i + 1], x->argvlen[i + 1], &a->maxlen)) {
                    reply_not_int(x);
                    return -1;
                }
                if (a->maxlen < 0) {
                    reply_err(x, "ERR The MAXLEN argument must be >= 0.");
                    return -1;
                }
            }
            i++;
            a->strategy = minid ? TRIM_MINID : TRIM_MAXLEN;
        } else if (!strcasecmp(o, "limit") && more) {
            if (arg_ll(x->argv[i + 1], x->argvlen[i + 1], &a->limit)) {
                reply_not_int(x);
                return -1;
            }
            if (a->limit < 0) {
                reply_err(x, "ERR The LIMIT argument must be >= 0.");
                return -1;
            }
            limit_given = 1;
            i++;
        } else if (xadd && !strcasecmp(o, "nomkstream")) {
            a->no_mkstream = 1;
        } else if (xadd) {
            if (sid_parse(x, x->argv[i], x->argvlen[i], &a->id, 0, 1, &a->seq_given)) return -1;
            a->id_given = 1;
            break;
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    if (a->limit && a->strategy == TRIM_NONE) {
        reply_err(x, "ERR syntax error, LIMIT cannot be used without specifying a trimming "
                     "strategy");
        return -1;
    }
    if (!xadd && a->strategy == TRIM_NONE) {
        reply_err(x, "ERR syntax error, XTRIM must be called with a trimming strategy");
        return -1;
    }
    if (limit_given) {
        if (!a->approx) {
            reply_err(x, "ERR syntax error, LIMIT cannot be used without the special ~ option");
            return -1;
        }
    } else if (a->approx) {
        a->limit = 100 * node_max_entries(x);
        if (a->limit <= 0) a->limit = 10000;
        if (a->limit > 1000000) a->limit = 1000000;
    } else {
        a->limit = 0;
    }
    return i;
}

static uint64_t entry_node(const srec *r) {
    uint64_t v = 0;
    for (int i = 0; i < 8 && (size_t)i < r->vlen; i++)
        v = v << 8 | (unsigned char)r->val[i];
    return v;
}

/* A trim decided before the txn: the stored entries to delete, whether the
 * entry being appended goes too, and the first id left. */
typedef struct trim_plan {
    slist head; /* loaded head entries; del[i] marks those that go */
    char *del;
    size_t ndel;
    int drop_new;  /* the appended entry is trimmed away as well */
    int has_first; /* first is the new first id (else the stream is empty) */
    sid first;
} trim_plan;

static void plan_free(trim_plan *p) {
    slist_free(&p->head);
    free(p->del);
}

/* Plans the trim of m (whose length counts an entry being appended when
 * newid is non-NULL: it has id *newid and node newnode). */
static int plan_trim(cmd_ctx *x, const smeta *m, const trim_args *a, const sid *newid,
                     uint64_t newnode, trim_plan *p) {
    memset(p, 0, sizeof *p);
    uint64_t total = m->length;
    uint64_t stored = m->length - (newid ? 1 : 0);
    if (a->strategy == TRIM_MAXLEN && total <= (uint64_t)a->maxlen) return 0;
    sid lo = {0, 0}, hi = {UINT64_MAX, UINT64_MAX};
    size_t want;
    if (a->strategy == TRIM_MAXLEN) {
        want = (size_t)(total - (uint64_t)a->maxlen);
        if (a->limit && (uint64_t)a->limit < want) want = (size_t)a->limit;
    } else {
        want = a->limit ? (size_t)a->limit : 0;
        if (!a->approx) {
            hi = a->minid;
            if (sid_decr(&hi)) return 0; /* MINID 0-0: nothing is smaller */
        }
    }
    if (stored) {
        long n = st_load_entries(x, K(x), m, lo, hi, 0, want ? want + 1 : 0, &p->head);
        if (n < 0) return (int)n;
    }
    /* One more stored entry (or the new one) tells whether the last loaded
     * node is complete. */
    size_t nload = p->head.n;
    int all_loaded = nload == stored;
    if (!all_loaded && nload) {
        sid after = p->head.r[nload - 1].id;
        if (!sid_incr(&after)) {
            long n =
                st_load_entries(x, K(x), m, after, (sid){UINT64_MAX, UINT64_MAX}, 0, 1, &p->head);
            if (n < 0) return (int)n;
        }
    }
    int virt = 0;
    if (newid && p->head.n == stored) { /* reached the end: the new entry follows */
        srec r = {.id = *newid};
        char nb[8];
        for (int i = 0; i < 8; i++)
            nb[i] = (char)(newnode >> (56 - 8 * i));
        if (p->head.n == p->head.cap) {
            size_t cap = p->head.cap ? p->head.cap * 2 : 4;
            srec *nr = realloc(p->head.r, cap * sizeof *nr);
            if (!nr) return KEEL_ENOMEM;
            p->head.r = nr;
            p->head.cap = cap;
        }
        r.val = malloc(8);
        if (!r.val) return KEEL_ENOMEM;
        memcpy(r.val, nb, 8);
        r.vlen = 8;
        p->head.r[p->head.n++] = r;
        virt = 1;
    }
    size_t n = p->head.n;
    int complete_end = p->head.n == stored + (size_t)virt; /* the list ends the stream */
    p->del = calloc(n ? n : 1, 1);
    if (!p->del) return KEEL_ENOMEM;
    uint64_t deleted = 0;
    size_t i = 0;
    while (i < n) {
        if (a->strategy == TRIM_MAXLEN && total - deleted <= (uint64_t)a->maxlen) break;
        size_t j = i;
        uint64_t node = entry_node(&p->head.r[i]);
        while (j < n && entry_node(&p->head.r[j]) == node)
            j++;
        uint64_t entries = j - i;
        int complete = j < n || complete_end;
        if (a->limit && deleted + entries > (uint64_t)a->limit) break;
        int remove = complete &&
                     (a->strategy == TRIM_MAXLEN ? total - deleted - entries >= (uint64_t)a->maxlen
                                                 : sid_cmp(p->head.r[j - 1].id, a->minid) < 0);
        if (remove) {
            memset(p->del + i, 1, j - i);
            deleted += entries;
            i = j;
            continue;
        }
        if (a->approx) break;
        while (i < j) {
            int stop = a->strategy == TRIM_MAXLEN ? total - deleted <= (uint64_t)a->maxlen
                                                  : sid_cmp(p->head.r[i].id, a->minid) >= 0;
            if (stop) break;
            p->del[i++] = 1;
            deleted++;
        }
        if (i < j) break;
    }
    p->ndel = (size_t)deleted;
    if (virt && p->del[n - 1]) p->drop_new = 1;
    for (size_t e = 0; e < n; e++)
        if (!p->del[e]) {
            p->has_first = 1;
            p->first = p->head.r[e].id;
            break;
        }
    if (!p->has_first && p->ndel < total) { /* survivors beyond what we loaded */
        p->has_first = 1;
        p->first = m->first;
    }
    return 0;
}

/* Applies a plan in t: deletes the planned stored entries and updates m. */
static int apply_trim(cmd_ctx *x, store_txn *t, smeta *m, const trim_plan *p) {
    int rc = 0;
    for (size_t i = 0; i < p->head.n && !rc; i++) {
        /* a stored entry's value is >= 12 bytes; 8 is the virtual new one */
        if (!p->del[i] || p->head.r[i].vlen == 8) continue;
        char f[17];
        rc = st_sub_del(x, t, K(x), m, f, sf_entry(f, p->head.r[i].id), NULL);
    }
    m->length -= p->ndel;
    if (p->has_first)
        m->first = p->first;
    else
        m->first = (sid){0, 0};
    return rc;
}

static int put_entry(cmd_ctx *x, store_txn *t, const smeta *m, sid id, uint64_t node, int first) {
    size_t len = 12;
    for (int i = first; i < x->argc; i++)
        len += 4 + x->argvlen[i];
    char *v = malloc(len);
    if (!v) return KEEL_ENOMEM;
    for (int i = 0; i < 8; i++)
        v[i] = (char)(node >> (56 - 8 * i));
    uint32_t n = (uint32_t)((x->argc - first) / 2);
    size_t off = 8;
    for (int b = 0; b < 4; b++)
        v[off + (size_t)b] = (char)(n >> (24 - 8 * b));
    off += 4;
    for (int i = first; i < x->argc; i++) {
        uint32_t l = (uint32_t)x->argvlen[i];
        for (int b = 0; b < 4; b++)
            v[off + (size_t)b] = (char)(l >> (24 - 8 * b));
        off += 4;
        memcpy(v + off, x->argv[i], l);
        off += l;
    }
    char f[17];
    int rc = st_sub_put(x, t, K(x), m, f, sf_entry(f, id), v, len);
    free(v);
    return rc;
}

void cmd_xadd(cmd_ctx *x) {
    trim_args a;
    int idpos = parse_trim(x, &a, 1);
    if (idpos < 0) return;
    int fpos = idpos + 1;
    if (x->argc - fpos < 2 || (x->argc - fpos) % 2 == 1) {
        reply_err(x, "ERR wrong number of arguments for 'xadd' command");
        return;
    }
    if (a.id_given && a.seq_given && a.id.ms == 0 && a.id.seq == 0) {
        reply_err(x, "ERR The ID specified in XADD must be greater than 0-0");
        return;
    }
    smeta m;
    int r = sm_lookup(x, NULL, K(x), &m);
    if (r < 0) return;
    if (r == 0 && a.no_mkstream) {
        resp_w_null(x->out, x->proto);
        return;
    }
    if (m.last.ms == UINT64_MAX && m.last.seq == UINT64_MAX) {
        reply_err(x, "ERR The stream has exhausted the last possible ID, unable to add more "
                     "items");
        return;
    }
    sid id;
    if (a.id_given) {
        id = a.id;
        if (!a.seq_given) {
            if (m.last.ms == a.id.ms) {
                if (m.last.seq == UINT64_MAX) goto too_small;
                id = m.last;
                id.seq++;
            }
        }
    } else {
        uint64_t now = (uint64_t)x->now_ms;
        if (now > m.last.ms)
            id = (sid){now, 0};
        else {
            id = m.last;
            sid_incr(&id);
        }
    }
    if (sid_cmp(id, m.last) <= 0) {
    too_small:
        reply_err(x, "ERR The ID specified in XADD is equal or smaller than the target stream "
                     "top item");
        return;
    }
    long long nmax = node_max_entries(x);
    if (m.length == 0 || (nmax && m.tail_count >= (uint64_t)nmax)) {
        m.tail_node++;
        m.tail_count = 0;
    }
    m.tail_count++;
    uint64_t node = m.tail_node;
    if (m.length == 0) m.first = id;
    m.length++;
    m.last = id;
    m.added++;
    trim_plan p;
    int rc = a.strategy != TRIM_NONE ? plan_trim(x, &m, &a, &id, node, &p) : 0;
    if (a.strategy == TRIM_NONE) memset(&p, 0, sizeof p);
    if (rc) {
        plan_free(&p);
        st_fail(x, NULL, rc);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    if (!p.drop_new) rc = put_entry(x, t, &m, id, node, fpos);
    if (!rc && a.strategy != TRIM_NONE && p.del) rc = apply_trim(x, t, &m, &p);
    if (!rc) rc = sm_save(x, t, K(x), &m);
    plan_free(&p);
    if (db_finish(x, t, rc) == 0) sid_reply(x, id);
}

void cmd_xtrim(cmd_ctx *x) {
    trim_args a;
    if (parse_trim(x, &a, 0) < 0) return;
    smeta m;
    int r = sm_lookup(x, NULL, K(x), &m);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    trim_plan p;
    int rc = plan_trim(x, &m, &a, NULL, 0, &p);
    if (rc || !p.ndel) {
        plan_free(&p);
        if (rc)
            st_fail(x, NULL, rc);
        else
            resp_w_int(x->out, 0);
        return;
    }
    size_t n = p.ndel;
    store_txn *t = store_txn_begin(x->srv->st);
    rc = apply_trim(x, t, &m, &p);
    if (!rc) rc = sm_save(x, t, K(x), &m);
    plan_free(&p);
    if (db_finish(x, t, rc) == 0) resp_w_int(x->out, (long long)n);
}

void cmd_xlen(cmd_ctx *x) {
    smeta m;
    int r = sm_lookup(x, NULL, K(x), &m);
    if (r >= 0) resp_w_int(x->out, r ? (long long)m.length : 0);
}

static void xrange_generic(cmd_ctx *x, int rev) {
    int si = rev ? 3 : 2, ei = rev ? 2 : 3, sex, eex;
    sid start, end;
    long long count = -1;
    if (sid_parse_interval(x, x->argv[si], x->argvlen[si], &start, &sex, 0)) return;
    if (sex && sid_incr(&start)) {
        reply_err(x, "ERR invalid start ID for the interval");
        return;
    }
    if (sid_parse_interval(x, x->argv[ei], x->argvlen[ei], &end, &eex, UINT64_MAX)) return;
    if (eex && sid_decr(&end)) {
        reply_err(x, "ERR invalid end ID for the interval");
        return;
    }
    for (int j = 4; j < x->argc; j++) {
        if (!strcasecmp(x->argv[j], "count") && j + 1 < x->argc) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &count)) {
                reply_not_int(x);
                return;
            }
            if (count < 0) count = 0;
            j++;
        } else {
            reply_syntax(x);
            return;
        }
    }
    smeta m;
    int r = sm_lookup(x, NULL, K(x), &m);
    if (r < 0) return;
    if (r == 0) {
        resp_w_array(x->out, 0);
        return;
    }
    if (count == 0) {
        resp_w_null_array(x->out, x->proto);
        return;
    }
    slist l = {0};
    long n = st_load_entries(x, K(x), &m, start, end, rev, count < 0 ? 0 : (size_t)count, &l);
    if (n < 0) {
        slist_free(&l);
        st_fail(x, NULL, (int)n);
        return;
    }
    resp_w_array(x->out, l.n);
    for (size_t i = 0; i < l.n; i++)
        st_reply_entry(x, l.r[i].id, l.r[i].val, l.r[i].vlen);
    slist_free(&l);
}

void cmd_xrange(cmd_ctx *x) {
    xrange_generic(x, 0);
}
void cmd_xrevrange(cmd_ctx *x) {
    xrange_generic(x, 1);
}

static int sid_order(const void *a, const void *b) {
    return sid_cmp(*(const sid *)a, *(const sid *)b);
}

void cmd_xdel(cmd_ctx *x) {
    smeta m;
    int r = sm_lookup(x, NULL, K(x), &m);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    size_t n = (size_t)(x->argc - 2), nd = 0;
    sid *ids = malloc(n * sizeof *ids);
    if (!ids) {
        st_fail(x, NULL, KEEL_ENOMEM);
        return;
    }
    for (size_t j = 0; j < n; j++)
        if (sid_parse(x, x->argv[j + 2], x->argvlen[j + 2], &ids[j], 0, 1, NULL)) {
            free(ids);
            return;
        }
    qsort(ids, n, sizeof *ids, sid_order);
    /* Which exist (each once), before the txn. */
    int rc = 0, first_gone = 0;
    for (size_t j = 0; j < n && !rc; j++) {
        if (j && !sid_cmp(ids[j], ids[j - 1])) continue;
        char f[17];
        store_value v;
        int g = st_sub_get(x, NULL, K(x), &m, f, sf_entry(f, ids[j]), &v);
        if (g == KEEL_ENOTFOUND) continue;
        if (g) {
            rc = g;
            break;
        }
        store_value_release(&v);
        ids[nd++] = ids[j];
        if (!sid_cmp(ids[j], m.first)) first_gone = 1;
    }
    slist l = {0};
    if (!rc && nd && m.length > nd && first_gone) { /* the new first entry */
        long got =
            st_load_entries(x, K(x), &m, m.first, (sid){UINT64_MAX, UINT64_MAX}, 0, nd + 1, &l);
        if (got < 0) rc = (int)got;
        size_t d = 0;
        for (size_t i = 0; i < l.n && !rc; i++) {
            while (d < nd && sid_cmp(ids[d], l.r[i].id) < 0)
                d++;
            if (d < nd && !sid_cmp(ids[d], l.r[i].id)) continue;
            m.first = l.r[i].id;
            break;
        }
    }
    slist_free(&l);
    if (rc || !nd) {
        free(ids);
        if (rc)
            st_fail(x, NULL, rc);
        else
            resp_w_int(x->out, 0);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    for (size_t j = 0; j < nd && !rc; j++) {
        char f[17];
        rc = st_sub_del(x, t, K(x), &m, f, sf_entry(f, ids[j]), NULL);
        if (sid_cmp(ids[j], m.maxdel) > 0) m.maxdel = ids[j];
    }
    m.length -= nd;
    if (m.length == 0) m.first = (sid){0, 0};
    free(ids);
    if (!rc) rc = sm_save(x, t, K(x), &m);
    if (db_finish(x, t, rc) == 0) resp_w_int(x->out, (long long)nd);
}

/* The last entry's id (redis' streamLastValidID), or 0-0 when empty: most
 * often the last generated id itself (a point read), else a reverse seek. */
int st_last_valid(cmd_ctx *x, const char *k, size_t kl, const smeta *m, sid *out) {
    *out = (sid){0, 0};
    if (!m->length) return 0;
    char f[17];
    store_value v;
    int g = st_sub_get(x, NULL, k, kl, m, f, sf_entry(f, m->last), &v);
    if (g == 0) {
        store_value_release(&v);
        *out = m->last;
        return 0;
    }
    if (g != KEEL_ENOTFOUND) return g;
    slist l = {0};
    long n = st_load_entries(x, k, kl, m, (sid){0, 0}, m->last, 1, 1, &l);
    if (n > 0) *out = l.r[0].id;
    slist_free(&l);
    return n < 0 ? (int)n : 0;
}

void cmd_xsetid(cmd_ctx *x) {
    sid id, maxdel = {0, 0};
    long long added = -1;
    if (sid_parse(x, x->argv[2], x->argvlen[2], &id, 0, 1, NULL)) return;
    for (int i = 3; i < x->argc;) {
        int more = x->argc - 1 - i;
        if (!strcasecmp(x->argv[i], "entriesadded") && more) {
            if (arg_ll(x->argv[i + 1], x->argvlen[i + 1], &added)) {
                reply_not_int(x);
                return;
            }
            if (added < 0) {
                reply_err(x, "ERR entries_added must be positive");
                return;
            }
            i += 2;
        } else if (!strcasecmp(x->argv[i], "maxdeletedid") && more) {
            if (sid_parse(x, x->argv[i + 1], x->argvlen[i + 1], &maxdel, 0, 1, NULL)) return;
            if (sid_cmp(id, maxdel) < 0) {
                reply_err(x, "ERR The ID specified in XSETID is smaller than the provided "
                             "max_deleted_entry_id");
                return;
            }
            i += 2;
        } else {
            reply_syntax(x);
            return;
        }
    }
    smeta m;
    int r = sm_lookup(x, NULL, K(x), &m);
    if (r < 0) return;
    if (r == 0) {
        reply_err(x, "ERR no such key");
        return;
    }
    if (m.length > 0) {
        sid top;
        int rc = st_last_valid(x, K(x), &m, &top);
        if (rc) {
            st_fail(x, NULL, rc);
            return;
        }
        if (sid_cmp(id, top) < 0) {
            reply_err(x, "ERR The ID specified in XSETID is smaller than the target stream top "
                         "item");
            return;
        }
        if (added != -1 && m.length > (uint64_t)added) {
            reply_err(x, "ERR The entries_added specified in XSETID is smaller than the target "
                         "stream length");
            return;
        }
    }
    m.last = id;
    if (added != -1) m.added = (uint64_t)added;
    if (maxdel.ms || maxdel.seq) m.maxdel = maxdel;
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = sm_save(x, t, K(x), &m);
    if (db_finish(x, t, rc) == 0) reply_ok(x);
}
