/* cmd_xread.c - XREAD and XREADGROUP, blocking through blocking.h.
 *
 * Arguments are checked in redis 7.0's order (t_stream.c xreadCommand):
 * options, STREAMS balance, GROUP, then per stream the key's type, the
 * group (-NOGROUP), and the id ("$" resolves to the stream's last id now,
 * ">" means the group's undelivered entries). A stream with something to
 * serve is served at once; otherwise with BLOCK the request blocks
 * (blocking_run, timeout in milliseconds) keeping its resolved ids
 * (blocking_spec.save), and is re-dispatched when a write touches one of
 * its keys. Then a blocked XREAD serves the streams that have entries past
 * its ids and stays blocked otherwise; a blocked XREADGROUP answers
 * "-UNBLOCKED the stream key no longer exists" when a key is gone or not a
 * stream, "-NOGROUP ... no longer exists" when its group is gone, and is
 * served from the group's last id. Inside MULTI the request is its
 * non-blocking form (a null array when nothing is there); scripts may not
 * use BLOCK at all (redis' error).
 *
 * XREADGROUP writes, per stream served and in one txn each: the group's
 * last id and read counter, a PEL record per delivered entry (unless
 * NOACK; an entry pending for another consumer is reassigned), and the
 * consumer (created, its seen time refreshed).
 */
#include "node/blocking.h"
#include "node/script.h"
#include "node/stream.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BLOCKED_DEFAULT_COUNT 1000

typedef struct xr_args {
    int group; /* XREADGROUP */
    const char *g, *c;
    size_t gl, cl;
    int noack;
    long long count;
    int block_arg; /* argv index of the timeout; 0 = no BLOCK */
    int sa, n;     /* streams start at argv[sa], n of them, then their ids */
    sid *ids;      /* resolved ids */
    char *newonly; /* XREADGROUP ">" per stream */
} xr_args;

static const char *key_of(cmd_ctx *x, const xr_args *a, int i, size_t *kl) {
    *kl = x->argvlen[a->sa + i];
    return x->argv[a->sa + i];
}

/* The type of key k without replying: 1 a stream (*m filled), 0 absent, 2
 * another type, negative KEEL_E*. */
static int peek(cmd_ctx *x, const char *k, size_t kl, smeta *m) {
    store_value v;
    int rc = db_get(x, NULL, k, kl, &v);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) return rc;
    int stream = v.type == STORE_T_STREAM;
    store_value_release(&v);
    if (!stream) return 2;
    return sm_lookup(x, NULL, k, kl, m) == 1 ? 1 : KEEL_EIO;
}

/* Resolves and checks every stream's id (a fresh call). 0, or -1 replied. */
static int resolve(cmd_ctx *x, xr_args *a) {
    for (int i = 0; i < a->n; i++) {
        size_t kl;
        const char *k = key_of(x, a, i, &kl);
        int ia = a->sa + a->n + i;
        smeta m;
        int r = sm_lookup(x, NULL, k, kl, &m);
        if (r < 0) return -1;
        if (a->group) {
            sgroup g;
            int gr = r ? sg_get(x, NULL, k, kl, &m, a->g, a->gl, &g) : 0;
            if (gr < 0) {
                st_fail(x, NULL, gr);
                return -1;
            }
            if (!gr) {
                reply_errf(x,
                           "NOGROUP No such key '%.*s' or consumer group '%.*s' in XREADGROUP "
                           "with GROUP option",
                           (int)kl, k, (int)a->gl, a->g);
                return -1;
            }
        }
        a->newonly[i] = 0;
        if (x->argvlen[ia] == 1 && x->argv[ia][0] == '$') {
            if (a->group) {
                reply_err(x, "ERR The $ ID is meaningless in the context of XREADGROUP: you want "
                             "to read the history of this consumer by specifying a proper ID, "
                             "or use the > ID to get new messages. The $ ID would just return "
                             "an empty result set.");
                return -1;
            }
            a->ids[i] = r ? m.last : (sid){0, 0};
            continue;
        }
        if (x->argvlen[ia] == 1 && x->argv[ia][0] == '>') {
            if (!a->group) {
                reply_err(x, "ERR The > ID can be specified only when calling XREADGROUP using "
                             "the GROUP <group> <consumer> option.");
                return -1;
            }
            a->newonly[i] = 1;
            a->ids[i] = (sid){UINT64_MAX, UINT64_MAX};
            continue;
        }
        if (sid_parse(x, x->argv[ia], x->argvlen[ia], &a->ids[i], 0, 1, NULL)) return -1;
    }
    return 0;
}

/* XREADGROUP ">": delivers entries after the group's last id. Writes the
 * [key, entries] reply into x->out. Returns entries served (0: nothing,
 * nothing written) or a negative KEEL_E*. */
static long serve_new(cmd_ctx *x, const xr_args *a, const char *k, size_t kl, smeta *m, sgroup *g,
                      size_t count) {
    sid start = g->last;
    if (sid_incr(&start)) return 0;
    slist l = {0};
    long n = st_load_entries(x, k, kl, m, start, (sid){UINT64_MAX, UINT64_MAX}, 0, count, &l);
    if (n <= 0) {
        slist_free(&l);
        return n;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = sc_touch(x, t, k, kl, m, a->g, a->gl, a->c, a->cl, 1, NULL);
    for (size_t i = 0; i < l.n && !rc; i++) {
        sid id = l.r[i].id;
        if (sid_cmp(id, g->last) > 0) {
            if (g->entries_read != ENTRIES_READ_INVALID && !st_range_has_tombstones(m, &id, NULL))
                g->entries_read++;
            else if (m->added)
                g->entries_read = st_estimate_distance(m, id);
            g->last = id;
        }
        if (!a->noack) {
            spel p = {.time = (uint64_t)x->now_ms, .count = 1, .cons = a->c, .conslen = a->cl};
            rc = sp_put(x, t, k, kl, m, a->g, a->gl, id, &p);
        }
    }
    if (!rc) rc = sg_put(x, t, k, kl, m, a->g, a->gl, g);
    if (rc) {
        store_txn_abort(t);
        slist_free(&l);
        return rc;
    }
    if ((rc = store_txn_commit(t))) {
        slist_free(&l);
        return rc;
    }
    if (x->proto < 3) resp_w_array(x->out, 2);
    resp_w_bulk(x->out, k, kl);
    resp_w_array(x->out, l.n);
    for (size_t i = 0; i < l.n; i++)
        st_reply_entry(x, l.r[i].id, l.r[i].val, l.r[i].vlen);
    slist_free(&l);
    return n;
}

/* XREADGROUP with an id: the consumer's own pending entries after it.
 * Always replies [key, entries] (possibly empty). */
static long serve_history(cmd_ctx *x, const xr_args *a, const char *k, size_t kl, const smeta *m,
                          sid after, size_t count) {
    slist pel = {0};
    long n = 0;
    int rc = 0;
    if (!sid_incr(&after)) {
        n = st_load_pel(x, k, kl, m, a->g, a->gl, after, (sid){UINT64_MAX, UINT64_MAX}, 0, &pel);
        if (n < 0) rc = (int)n;
    }
    /* Keep this consumer's records, at most count. */
    size_t keep = 0;
    for (size_t i = 0; i < pel.n && !rc; i++) {
        spel p;
        if (sp_decode(pel.r[i].val, pel.r[i].vlen, &p) || p.conslen != a->cl ||
            memcmp(p.cons, a->c, a->cl))
            continue;
        if (count && keep == count) break;
        srec tmp = pel.r[keep];
        pel.r[keep] = pel.r[i];
        pel.r[i] = tmp;
        keep++;
    }
    store_value *ev = calloc(keep ? keep : 1, sizeof *ev);
    char *found = calloc(keep ? keep : 1, 1);
    if (!rc && (!ev || !found)) rc = KEEL_ENOMEM;
    for (size_t i = 0; i < keep && !rc; i++) {
        char f[17];
        int g = st_sub_get(x, NULL, k, kl, m, f, sf_entry(f, pel.r[i].id), &ev[i]);
        if (g == 0)
            found[i] = 1;
        else if (g != KEEL_ENOTFOUND)
            rc = g;
    }
    store_txn *t = NULL;
    if (!rc) {
        t = store_txn_begin(x->srv->st);
        rc = sc_touch(x, t, k, kl, m, a->g, a->gl, a->c, a->cl, 1, NULL);
        for (size_t i = 0; i < keep && !rc; i++) {
            if (!found[i]) continue;
            spel p;
            sp_decode(pel.r[i].val, pel.r[i].vlen, &p);
            p.time = (uint64_t)x->now_ms;
            p.count++;
            rc = sp_put(x, t, k, kl, m, a->g, a->gl, pel.r[i].id, &p);
        }
        if (rc)
            store_txn_abort(t);
        else
            rc = store_txn_commit(t);
    }
    if (!rc) {
        if (x->proto < 3) resp_w_array(x->out, 2);
        resp_w_bulk(x->out, k, kl);
        resp_w_array(x->out, keep);
        for (size_t i = 0; i < keep; i++) {
            if (found[i]) {
                st_reply_entry(x, pel.r[i].id, ev[i].data, ev[i].len);
            } else {
                resp_w_array(x->out, 2);
                sid_reply(x, pel.r[i].id);
                resp_w_null_array(x->out, x->proto);
            }
        }
    }
    for (size_t i = 0; ev && found && i < keep; i++)
        if (found[i]) store_value_release(&ev[i]);
    free(ev);
    free(found);
    slist_free(&pel);
    return rc ? rc : 1;
}

/* XREAD: entries after id. Returns entries served or KEEL_E*. */
static long serve_plain(cmd_ctx *x, const char *k, size_t kl, const smeta *m, sid after,
                        size_t count) {
    if (sid_incr(&after)) return 0;
    slist l = {0};
    long n = st_load_entries(x, k, kl, m, after, (sid){UINT64_MAX, UINT64_MAX}, 0, count, &l);
    if (n > 0) {
        if (x->proto < 3) resp_w_array(x->out, 2);
        resp_w_bulk(x->out, k, kl);
        resp_w_array(x->out, l.n);
        for (size_t i = 0; i < l.n; i++)
            st_reply_entry(x, l.r[i].id, l.r[i].val, l.r[i].vlen);
    }
    slist_free(&l);
    return n;
}

static int try_xread(cmd_ctx *x, int serving, void *arg) {
    xr_args *a = arg;
    if (!serving) {
        if (resolve(x, a)) return 1;
    } else if (!a->group) {
        size_t len;
        const void *saved = blocking_saved(x, &len);
        if (saved && len == (size_t)a->n * sizeof(sid)) memcpy(a->ids, saved, len);
    } else {
        memset(a->newonly, 1, (size_t)a->n); /* only ">" blocks */
    }
    size_t count = a->count > 0 ? (size_t)a->count : 0;
    if (serving && !count) count = BLOCKED_DEFAULT_COUNT;
    kbuf body, *out = x->out;
    kbuf_init(&body);
    x->out = &body;
    size_t served = 0;
    int rc = 0, replied = 0;
    for (int i = 0; i < a->n && !rc && !replied; i++) {
        size_t kl;
        const char *k = key_of(x, a, i, &kl);
        smeta m;
        int r = peek(x, k, kl, &m);
        if (r < 0) {
            rc = r;
            break;
        }
        if (r != 1) {
            if (serving && a->group) {
                x->out = out;
                reply_err(x, "UNBLOCKED the stream key no longer exists");
                replied = 1;
            }
            continue; /* XREAD: nothing there (yet) */
        }
        long got = 0;
        if (a->group) {
            sgroup g;
            int gr = sg_get(x, NULL, k, kl, &m, a->g, a->gl, &g);
            if (gr < 0) {
                rc = gr;
                break;
            }
            if (!gr) {
                x->out = out;
                reply_err(x, "NOGROUP the consumer group this client was blocked on no longer "
                             "exists");
                replied = 1;
                break;
            }
            if (a->newonly[i])
                got = serve_new(x, a, k, kl, &m, &g, count);
            else
                got = serve_history(x, a, k, kl, &m, a->ids[i], count);
        } else {
            got = serve_plain(x, k, kl, &m, a->ids[i], count);
        }
        if (got < 0) rc = (int)got;
        if (got > 0) served++;
    }
    x->out = out;
    if (!replied && rc) {
        st_fail(x, NULL, rc);
        replied = 1;
    }
    if (!replied && served) {
        if (x->proto >= 3)
            resp_w_map(x->out, x->proto, served);
        else
            resp_w_array(x->out, served);
        kbuf_append(x->out, body.p, body.len);
        replied = 1;
    }
    kbuf_close(&body);
    return replied;
}

static void xread_generic(cmd_ctx *x, int group) {
    xr_args a = {.group = group};
    for (int i = 1; i < x->argc; i++) {
        int more = x->argc - i - 1;
        const char *o = x->argv[i];
        if (!strcasecmp(o, "block") && more) {
            if (script_is_caller(x->srv, x->c)) {
                reply_errf(x, "ERR %s command is not allowed with BLOCK option from scripts",
                           x->argv[0]);
                return;
            }
            a.block_arg = ++i;
            long long t; /* checked here for redis' order; blocking_run parses it again */
            if (arg_ll(x->argv[i], x->argvlen[i], &t)) {
                reply_err(x, "ERR timeout is not an integer or out of range");
                return;
            }
            if (t < 0) {
                reply_err(x, "ERR timeout is negative");
                return;
            }
        } else if (!strcasecmp(o, "count") && more) {
            i++;
            if (arg_ll(x->argv[i], x->argvlen[i], &a.count)) {
                reply_not_int(x);
                return;
            }
            if (a.count < 0) a.count = 0;
        } else if (!strcasecmp(o, "streams") && more) {
            a.sa = i + 1;
            int sc = x->argc - a.sa;
            if (sc % 2) {
                reply_err(x, "ERR Unbalanced XREAD list of streams: for each stream key an ID or "
                             "'$' must be specified.");
                return;
            }
            a.n = sc / 2;
            break;
        } else if (!strcasecmp(o, "group") && more >= 2) {
            if (!group) {
                reply_err(x, "ERR The GROUP option is only supported by XREADGROUP. You called "
                             "XREAD instead.");
                return;
            }
            a.g = x->argv[i + 1];
            a.gl = x->argvlen[i + 1];
            a.c = x->argv[i + 2];
            a.cl = x->argvlen[i + 2];
            i += 2;
        } else if (!strcasecmp(o, "noack")) {
            if (!group) {
                reply_err(x, "ERR The NOACK option is only supported by XREADGROUP. You called "
                             "XREAD instead.");
                return;
            }
            a.noack = 1;
        } else {
            reply_syntax(x);
            return;
        }
    }
    if (a.sa == 0) {
        reply_syntax(x);
        return;
    }
    if (group && !a.g) {
        reply_err(x, "ERR Missing GROUP option for XREADGROUP");
        return;
    }
    a.ids = calloc((size_t)a.n, sizeof *a.ids);
    a.newonly = calloc((size_t)a.n + 1, 1);
    if (!a.ids || !a.newonly) {
        reply_err(x, "ERR out of memory");
    } else if (!a.block_arg) {
        if (!try_xread(x, 0, &a)) resp_w_null_array(x->out, x->proto);
    } else {
        blocking_spec sp = {.first_key = a.sa,
                            .nkeys = a.n,
                            .timeout_arg = a.block_arg,
                            .null_array = 1,
                            .try_serve = try_xread,
                            .arg = &a,
                            .timeout_ms = 1,
                            .save = a.ids,
                            .savelen = group ? 0 : (size_t)a.n * sizeof(sid),
                            .keep_trying = 1};
        blocking_run(x, &sp);
    }
    free(a.ids);
    free(a.newonly);
}

void cmd_xread(cmd_ctx *x) {
    xread_generic(x, 0);
}

void cmd_xreadgroup(cmd_ctx *x) {
    xread_generic(x, 1);
}
