/* cmd_xgroup.c - consumer groups: XGROUP CREATE / SETID / DESTROY /
 * CREATECONSUMER / DELCONSUMER / HELP, XACK, XPENDING, XCLAIM,
 * XAUTOCLAIM, and XINFO STREAM [FULL] / GROUPS / CONSUMERS / HELP
 * (stream.h has the records). Checks, replies and errors follow redis
 * 7.0 (t_stream.c) in its order. A consumer's PEL is its group's PEL
 * records naming it: commands that need it filter the group's. Scans come
 * before each txn (none may be open during a scan).
 */
#include "node/blocking.h"
#include "node/stream.h"
#include "core/err.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAXID ((sid){UINT64_MAX, UINT64_MAX})
#define ZEROID ((sid){0, 0})

static void reply_help(cmd_ctx *x, const char *cmd, const char *const *lines, size_t n) {
    char head[96];
    snprintf(head, sizeof head, "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", cmd);
    resp_w_array(x->out, n + 3);
    resp_w_simple(x->out, head);
    for (size_t i = 0; i < n; i++)
        resp_w_simple(x->out, lines[i]);
    resp_w_simple(x->out, "HELP");
    resp_w_simple(x->out, "    Prints this help.");
}

static void reply_sub_syntax(cmd_ctx *x, const char *cmd) {
    reply_errf(x, "ERR unknown subcommand or wrong number of arguments for '%.128s'. Try %s HELP.",
               x->argv[1], cmd);
}

/* ---- XGROUP ----------------------------------------------------------------- */

void cmd_xgroup(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'xgroup' command");
}

void cmd_xgroup_help(cmd_ctx *x) {
    static const char *const help[] = {"CREATE <key> <groupname> <id|$> [option]",
                                       "    Create a new consumer group. Options are:",
                                       "    * MKSTREAM",
                                       "      Create the empty stream if it does not exist.",
                                       "    * ENTRIESREAD entries_read",
                                       "      Set the group's entries_read counter (internal use).",
                                       "CREATECONSUMER <key> <groupname> <consumer>",
                                       "    Create a new consumer in the specified group.",
                                       "DELCONSUMER <key> <groupname> <consumer>",
                                       "    Remove the specified consumer.",
                                       "DESTROY <key> <groupname>",
                                       "    Remove the specified group.",
                                       "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                                       "    Set the current group ID and entries_read counter."};
    reply_help(x, "XGROUP", help, sizeof help / sizeof *help);
}

#define GK(x) (x)->argv[2], (x)->argvlen[2]
#define GN(x) (x)->argv[3], (x)->argvlen[3]

/* The shared head of every XGROUP subcommand (redis' xgroupCommand):
 * options, the key, the group. Returns 1 with *m (r: the key exists) and
 * *g (*has_g), or 0 after replying. */
typedef struct xg {
    smeta m;
    int exists, has_g, mkstream;
    sgroup g;
    long long entries_read;
} xg;

static int xgroup_open(cmd_ctx *x, xg *s, int create, int setid, int need_group) {
    memset(s, 0, sizeof *s);
    s->entries_read = -1;
    for (int i = 5; i < x->argc;) {
        if (create && !strcasecmp(x->argv[i], "mkstream")) {
            s->mkstream = 1;
            i++;
        } else if ((create || setid) && !strcasecmp(x->argv[i], "entriesread") && i + 1 < x->argc) {
            if (arg_ll(x->argv[i + 1], x->argvlen[i + 1], &s->entries_read)) {
                reply_not_int(x);
                return 0;
            }
            if (s->entries_read < 0 && s->entries_read != -1) {
                reply_err(x, "ERR value for ENTRIESREAD must be positive or -1");
                return 0;
            }
            i += 2;
        } else {
            reply_sub_syntax(x, "XGROUP");
            return 0;
        }
    }
    int r = sm_lookup(x, NULL, GK(x), &s->m);
    if (r < 0) return 0;
    s->exists = r;
    if (!s->mkstream) {
        if (!r) {
            reply_err(x, "ERR The XGROUP subcommand requires the key to exist. Note that for "
                         "CREATE you may want to use the MKSTREAM option to create an empty "
                         "stream automatically.");
            return 0;
        }
    }
    if (r) {
        int gr = sg_get(x, NULL, GK(x), &s->m, GN(x), &s->g);
        if (gr < 0) {
            st_fail(x, NULL, gr);
            return 0;
        }
        s->has_g = gr;
    }
    if (need_group && !s->has_g) {
        reply_errf(x, "NOGROUP No such consumer group '%.*s' for key name '%.*s'",
                   (int)x->argvlen[3], x->argv[3], (int)x->argvlen[2], x->argv[2]);
        return 0;
    }
    return 1;
}

void cmd_xgroup_create(cmd_ctx *x) {
    xg s;
    if (!xgroup_open(x, &s, 1, 0, 0)) return;
    if (x->argc > 8) {
        reply_sub_syntax(x, "XGROUP");
        return;
    }
    sid id;
    if (x->argvlen[4] == 1 && x->argv[4][0] == '$')
        id = s.exists ? s.m.last : ZEROID;
    else if (sid_parse(x, x->argv[4], x->argvlen[4], &id, 0, 1, NULL))
        return;
    if (s.has_g) {
        reply_err(x, "BUSYGROUP Consumer Group name already exists");
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = s.exists ? 0 : sm_save(x, t, GK(x), &s.m);
    sgroup g = {.last = id,
                .entries_read =
                    s.entries_read < 0 ? ENTRIES_READ_INVALID : (uint64_t)s.entries_read};
    if (!rc) rc = sg_put(x, t, GK(x), &s.m, GN(x), &g);
    if (db_finish(x, t, rc) == 0) reply_ok(x);
}

void cmd_xgroup_setid(cmd_ctx *x) {
    xg s;
    if (!xgroup_open(x, &s, 0, 1, 1)) return;
    if (x->argc != 5 && x->argc != 7) {
        reply_sub_syntax(x, "XGROUP");
        return;
    }
    sid id;
    if (x->argvlen[4] == 1 && x->argv[4][0] == '$')
        id = s.m.last;
    else if (sid_parse(x, x->argv[4], x->argvlen[4], &id, 0, 0, NULL))
        return;
    s.g.last = id;
    s.g.entries_read = s.entries_read < 0 ? ENTRIES_READ_INVALID : (uint64_t)s.entries_read;
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = sg_put(x, t, GK(x), &s.m, GN(x), &s.g);
    if (db_finish(x, t, rc) == 0) reply_ok(x);
}

/* Deletes the records in l (PEL ids of group g when pel, else consumer
 * names of g) in t. */
static int del_recs(cmd_ctx *x, store_txn *t, const smeta *m, const slist *l, int pel,
                    const char *only, size_t onlylen, long long *n) {
    const char *g = x->argv[3];
    size_t gl = x->argvlen[3];
    char *f = malloc(gl + 20 + 65536);
    if (!f) return KEEL_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < l->n && !rc; i++) {
        size_t fl;
        if (pel) {
            if (only) {
                spel p;
                if (sp_decode(l->r[i].val, l->r[i].vlen, &p) || p.conslen != onlylen ||
                    memcmp(p.cons, only, onlylen))
                    continue;
            }
            fl = sf_pel(f, g, gl, l->r[i].id);
        } else {
            if (l->r[i].namelen > 65536) continue;
            fl = sf_cons(f, g, gl, l->r[i].name, l->r[i].namelen);
        }
        rc = st_sub_del(x, t, GK(x), m, f, fl, NULL);
        if (n) (*n)++;
    }
    free(f);
    return rc;
}

void cmd_xgroup_destroy(cmd_ctx *x) {
    xg s;
    if (!xgroup_open(x, &s, 0, 0, 0)) return;
    if (!s.has_g) {
        resp_w_int(x->out, 0);
        return;
    }
    slist pel = {0}, cons = {0};
    long n = st_load_pel(x, GK(x), &s.m, GN(x), ZEROID, MAXID, 0, &pel);
    if (n >= 0) n = st_load_consumers(x, GK(x), &s.m, GN(x), &cons);
    if (n < 0) {
        slist_free(&pel);
        slist_free(&cons);
        st_fail(x, NULL, (int)n);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = del_recs(x, t, &s.m, &pel, 1, NULL, 0, NULL);
    if (!rc) rc = del_recs(x, t, &s.m, &cons, 0, NULL, 0, NULL);
    char *f = malloc(x->argvlen[3] + 1);
    if (!rc && !f) rc = KEEL_ENOMEM;
    if (!rc) rc = st_sub_del(x, t, GK(x), &s.m, f, sf_group(f, GN(x)), NULL);
    free(f);
    slist_free(&pel);
    slist_free(&cons);
    if (db_finish(x, t, rc) == 0) {
        resp_w_int(x->out, 1);
        blocking_touch(x->srv, GK(x)); /* its blocked XREADGROUPs get -NOGROUP */
    }
}

void cmd_xgroup_createconsumer(cmd_ctx *x) {
    xg s;
    if (!xgroup_open(x, &s, 0, 0, 1)) return;
    store_txn *t = store_txn_begin(x->srv->st);
    int created = 0;
    int rc = sc_touch(x, t, GK(x), &s.m, GN(x), x->argv[4], x->argvlen[4], 0, &created);
    if (rc || !created) {
        store_txn_abort(t);
        if (rc)
            st_fail(x, NULL, rc);
        else
            resp_w_int(x->out, 0);
        return;
    }
    if (db_finish(x, t, 0) == 0) resp_w_int(x->out, 1);
}

void cmd_xgroup_delconsumer(cmd_ctx *x) {
    xg s;
    if (!xgroup_open(x, &s, 0, 0, 1)) return;
    char *f = malloc(x->argvlen[3] + x->argvlen[4] + 3);
    if (!f) {
        st_fail(x, NULL, KEEL_ENOMEM);
        return;
    }
    size_t fl = sf_cons(f, GN(x), x->argv[4], x->argvlen[4]);
    store_value v;
    int rc = st_sub_get(x, NULL, GK(x), &s.m, f, fl, &v);
    if (rc) {
        free(f);
        if (rc == KEEL_ENOTFOUND)
            resp_w_int(x->out, 0);
        else
            st_fail(x, NULL, rc);
        return;
    }
    store_value_release(&v);
    slist pel = {0};
    long n = st_load_pel(x, GK(x), &s.m, GN(x), ZEROID, MAXID, 0, &pel);
    if (n < 0) {
        free(f);
        slist_free(&pel);
        st_fail(x, NULL, (int)n);
        return;
    }
    long long pending = 0;
    store_txn *t = store_txn_begin(x->srv->st);
    rc = del_recs(x, t, &s.m, &pel, 1, x->argv[4], x->argvlen[4], &pending);
    if (!rc) rc = st_sub_del(x, t, GK(x), &s.m, f, fl, NULL);
    free(f);
    slist_free(&pel);
    if (db_finish(x, t, rc) == 0) resp_w_int(x->out, pending);
}

/* ---- XACK, XPENDING ------------------------------------------------------ */

#define K1(x) (x)->argv[1], (x)->argvlen[1]
#define G2(x) (x)->argv[2], (x)->argvlen[2]

/* Opens key argv[1] and group argv[2] for XACK/XPENDING/XCLAIM: 1 both
 * exist, 0 one is missing (nothing replied), -1 replied. */
static int open_group(cmd_ctx *x, smeta *m, sgroup *g) {
    int r = sm_lookup(x, NULL, K1(x), m);
    if (r <= 0) return r;
    int gr = sg_get(x, NULL, K1(x), m, G2(x), g);
    if (gr < 0) {
        st_fail(x, NULL, gr);
        return -1;
    }
    return gr;
}

static void reply_nogroup(cmd_ctx *x) {
    reply_errf(x, "NOGROUP No such key '%.*s' or consumer group '%.*s'", (int)x->argvlen[1],
               x->argv[1], (int)x->argvlen[2], x->argv[2]);
}

void cmd_xack(cmd_ctx *x) {
    smeta m;
    sgroup g;
    int r = open_group(x, &m, &g);
    if (r < 0) return;
    if (r == 0) {
        resp_w_int(x->out, 0);
        return;
    }
    size_t n = (size_t)(x->argc - 3);
    sid *ids = malloc(n * sizeof *ids);
    if (!ids) {
        st_fail(x, NULL, KEEL_ENOMEM);
        return;
    }
    for (size_t j = 0; j < n; j++)
        if (sid_parse(x, x->argv[j + 3], x->argvlen[j + 3], &ids[j], 0, 1, NULL)) {
            free(ids);
            return;
        }
    char *f = malloc(x->argvlen[2] + 20);
    store_txn *t = store_txn_begin(x->srv->st);
    int rc = f ? 0 : KEEL_ENOMEM;
    long long acked = 0;
    for (size_t j = 0; j < n && !rc; j++) {
        int ex = 0;
        rc = st_sub_del(x, t, K1(x), &m, f, sf_pel(f, G2(x), ids[j]), &ex);
        acked += ex;
    }
    free(f);
    free(ids);
    if (db_finish(x, t, rc) == 0) resp_w_int(x->out, acked);
}

/* Per-consumer counts of a PEL, in consumer name order. */
typedef struct ccount {
    const char *name;
    size_t len;
    long long n;
} ccount;

static int ccount_order(const void *a, const void *b) {
    const ccount *p = a, *q = b;
    size_t l = p->len < q->len ? p->len : q->len;
    int c = memcmp(p->name, q->name, l);
    return c ? c : (p->len > q->len) - (p->len < q->len);
}

static void pending_summary(cmd_ctx *x, const slist *pel) {
    resp_w_array(x->out, 4);
    resp_w_int(x->out, (long long)pel->n);
    if (!pel->n) {
        resp_w_null(x->out, x->proto);
        resp_w_null(x->out, x->proto);
        resp_w_null_array(x->out, x->proto);
        return;
    }
    sid_reply(x, pel->r[0].id);
    sid_reply(x, pel->r[pel->n - 1].id);
    ccount *cc = calloc(pel->n, sizeof *cc);
    size_t nc = 0;
    for (size_t i = 0; cc && i < pel->n; i++) {
        spel p;
        if (sp_decode(pel->r[i].val, pel->r[i].vlen, &p)) continue;
        cc[nc++] = (ccount){p.cons, p.conslen, 1};
    }
    if (cc) qsort(cc, nc, sizeof *cc, ccount_order);
    size_t groups = 0;
    for (size_t i = 0; i < nc; i++)
        if (!i || ccount_order(&cc[i], &cc[i - 1])) groups++;
    resp_w_array(x->out, groups);
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        while (j < nc && !ccount_order(&cc[j], &cc[i]))
            j++;
        resp_w_array(x->out, 2);
        resp_w_bulk(x->out, cc[i].name, cc[i].len);
        char num[24];
        int w = snprintf(num, sizeof num, "%zu", j - i);
        resp_w_bulk(x->out, num, (size_t)w);
        i = j;
    }
    free(cc);
}

void cmd_xpending(cmd_ctx *x) {
    int justinfo = x->argc == 3;
    sid start = ZEROID, end = MAXID;
    long long count = 0, minidle = 0;
    const char *cons = NULL;
    size_t conslen = 0;
    if (x->argc != 3 && (x->argc < 6 || x->argc > 9)) {
        reply_syntax(x);
        return;
    }
    if (x->argc >= 6) {
        int si = 3, sex, eex;
        if (!strcasecmp(x->argv[3], "idle")) {
            if (arg_ll(x->argv[4], x->argvlen[4], &minidle)) {
                reply_not_int(x);
                return;
            }
            if (x->argc < 8) {
                reply_syntax(x);
                return;
            }
            si += 2;
        }
        if (arg_ll(x->argv[si + 2], x->argvlen[si + 2], &count)) {
            reply_not_int(x);
            return;
        }
        if (count < 0) count = 0;
        if (sid_parse_interval(x, x->argv[si], x->argvlen[si], &start, &sex, 0)) return;
        if (sex && sid_incr(&start)) {
            reply_err(x, "ERR invalid start ID for the interval");
            return;
        }
        if (sid_parse_interval(x, x->argv[si + 1], x->argvlen[si + 1], &end, &eex, UINT64_MAX))
            return;
        if (eex && sid_decr(&end)) {
            reply_err(x, "ERR invalid end ID for the interval");
            return;
        }
        if (si + 3 < x->argc) {
            cons = x->argv[si + 3];
            conslen = x->argvlen[si + 3];
        }
    }
    smeta m;
    sgroup g;
    int r = open_group(x, &m, &g);
    if (r < 0) return;
    if (r == 0) {
        reply_nogroup(x);
        return;
    }
    slist pel = {0};
    long n = st_load_pel(x, K1(x), &m, G2(x), start, end, 0, &pel);
    if (n < 0) {
        slist_free(&pel);
        st_fail(x, NULL, (int)n);
        return;
    }
    if (justinfo) {
        pending_summary(x, &pel);
        slist_free(&pel);
        return;
    }
    if (cons) { /* an unknown consumer: an empty array */
        char *f = malloc(x->argvlen[2] + conslen + 3);
        store_value v;
        int g2 = f ? st_sub_get(x, NULL, K1(x), &m, f, sf_cons(f, G2(x), cons, conslen), &v)
                   : KEEL_ENOMEM;
        free(f);
        if (g2 == 0) store_value_release(&v);
        if (g2 == KEEL_ENOTFOUND) {
            slist_free(&pel);
            resp_w_array(x->out, 0);
            return;
        }
    }
    kbuf body, *out = x->out;
    kbuf_init(&body);
    x->out = &body;
    size_t len = 0;
    for (size_t i = 0; i < pel.n && count; i++) {
        spel p;
        if (sp_decode(pel.r[i].val, pel.r[i].vlen, &p)) continue;
        if (cons && (p.conslen != conslen || memcmp(p.cons, cons, conslen))) continue;
        long long idle = x->now_ms - (long long)p.time;
        if (minidle && idle < minidle) continue;
        len++;
        count--;
        resp_w_array(x->out, 4);
        sid_reply(x, pel.r[i].id);
        resp_w_bulk(x->out, p.cons, p.conslen);
        resp_w_int(x->out, idle < 0 ? 0 : idle);
        resp_w_int(x->out, (long long)p.count);
    }
    x->out = out;
    resp_w_array(x->out, len);
    kbuf_append(x->out, body.p, body.len);
    kbuf_close(&body);
    slist_free(&pel);
}

/* ---- XCLAIM, XAUTOCLAIM ------------------------------------------------- */

/* Reads an integer argument with redis' custom error text. */
static int arg_ll_msg(cmd_ctx *x, int i, long long *v, const char *msg) {
    if (arg_ll(x->argv[i], x->argvlen[i], v)) {
        reply_errf(x, "ERR %s", msg);
        return -1;
    }
    return 0;
}

/* Moves PEL record id (its value p, NULL for FORCE's new one) to consumer
 * argv[3] and writes it; loads the entry for the reply into *ev when
 * !justid. */
static int claim_one(cmd_ctx *x, store_txn *t, const smeta *m, sid id, spel *p, long long time,
                     long long retry, int justid) {
    p->cons = x->argv[3];
    p->conslen = x->argvlen[3];
    p->time = (uint64_t)time;
    if (retry >= 0)
        p->count = (uint64_t)retry;
    else if (!justid)
        p->count++;
    return sp_put(x, t, K1(x), m, G2(x), id, p);
}

void cmd_xclaim(cmd_ctx *x) {
    smeta m;
    sgroup g;
    int r = open_group(x, &m, &g);
    if (r < 0) return;
    if (r == 0) {
        reply_nogroup(x);
        return;
    }
    long long minidle, retry = -1, dtime = -1, now = x->now_ms;
    int force = 0, justid = 0, j;
    if (arg_ll_msg(x, 4, &minidle, "Invalid min-idle-time argument for XCLAIM")) return;
    if (minidle < 0) minidle = 0;
    size_t n = 0;
    sid *ids = malloc((size_t)(x->argc - 5) * sizeof *ids + 1);
    if (!ids) {
        st_fail(x, NULL, KEEL_ENOMEM);
        return;
    }
    for (j = 5; j < x->argc; j++) {
        if (sid_parse(NULL, x->argv[j], x->argvlen[j], &ids[n], 0, 1, NULL)) break;
        n++;
    }
    sid lastid = ZEROID;
    for (; j < x->argc; j++) {
        int more = x->argc - 1 - j;
        const char *o = x->argv[j];
        if (!strcasecmp(o, "force")) {
            force = 1;
        } else if (!strcasecmp(o, "justid")) {
            justid = 1;
        } else if (!strcasecmp(o, "idle") && more) {
            if (arg_ll_msg(x, ++j, &dtime, "Invalid IDLE option argument for XCLAIM")) goto out;
            dtime = now - dtime;
        } else if (!strcasecmp(o, "time") && more) {
            if (arg_ll_msg(x, ++j, &dtime, "Invalid TIME option argument for XCLAIM")) goto out;
        } else if (!strcasecmp(o, "retrycount") && more) {
            if (arg_ll_msg(x, ++j, &retry, "Invalid RETRYCOUNT option argument for XCLAIM"))
                goto out;
        } else if (!strcasecmp(o, "lastid") && more) {
            j++;
            if (sid_parse(x, x->argv[j], x->argvlen[j], &lastid, 0, 1, NULL)) goto out;
        } else {
            reply_errf(x, "ERR Unrecognized XCLAIM option '%.128s'", o);
            goto out;
        }
    }
    if (dtime != -1) {
        if (dtime < 0 || dtime > now) dtime = now;
    } else {
        dtime = now;
    }
    /* Reads first: each id's PEL record and entry. */
    store_value *pv = calloc(n + 1, sizeof *pv), *ev = calloc(n + 1, sizeof *ev);
    char *hp = calloc(n + 1, 1), *he = calloc(n + 1, 1);
    char *f = malloc(x->argvlen[2] + 20);
    int rc = pv && ev && hp && he && f ? 0 : KEEL_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        int a = st_sub_get(x, NULL, K1(x), &m, f, sf_pel(f, G2(x), ids[i]), &pv[i]);
        if (a == 0)
            hp[i] = 1;
        else if (a != KEEL_ENOTFOUND)
            rc = a;
        char ef[17];
        int b = rc ? 0 : st_sub_get(x, NULL, K1(x), &m, ef, sf_entry(ef, ids[i]), &ev[i]);
        if (!rc && b == 0)
            he[i] = 1;
        else if (!rc && b != KEEL_ENOTFOUND)
            rc = b;
    }
    kbuf body, *outb = x->out;
    kbuf_init(&body);
    size_t len = 0;
    store_txn *t = NULL;
    if (!rc) {
        t = store_txn_begin(x->srv->st);
        if (sid_cmp(lastid, g.last) > 0) {
            g.last = lastid;
            rc = sg_put(x, t, K1(x), &m, G2(x), &g);
        }
        int have_cons = 0;
        for (size_t i = 0; i < n && !rc; i++) {
            if (!he[i]) { /* the entry is gone: drop its PEL record */
                if (hp[i]) rc = st_sub_del(x, t, K1(x), &m, f, sf_pel(f, G2(x), ids[i]), NULL);
                continue;
            }
            spel p = {0};
            int fresh = 0;
            if (hp[i]) {
                if (sp_decode(pv[i].data, pv[i].len, &p)) continue;
            } else if (force) {
                p.count = 1;
                fresh = 1;
            } else {
                continue;
            }
            if (!fresh && minidle && now - (long long)p.time < minidle) continue;
            if (!have_cons) {
                rc = sc_touch(x, t, K1(x), &m, G2(x), x->argv[3], x->argvlen[3], 1, NULL);
                have_cons = 1;
                if (rc) break;
            }
            rc = claim_one(x, t, &m, ids[i], &p, dtime, retry, justid);
            x->out = &body;
            if (justid)
                sid_reply(x, ids[i]);
            else
                st_reply_entry(x, ids[i], ev[i].data, ev[i].len);
            x->out = outb;
            len++;
        }
        if (rc)
            store_txn_abort(t);
        else
            rc = store_txn_commit(t);
    }
    if (rc) {
        st_fail(x, NULL, rc);
    } else {
        resp_w_array(x->out, len);
        kbuf_append(x->out, body.p, body.len);
    }
    kbuf_close(&body);
    for (size_t i = 0; i < n && pv && ev && hp && he; i++) {
        if (hp[i]) store_value_release(&pv[i]);
        if (he[i]) store_value_release(&ev[i]);
    }
    free(pv);
    free(ev);
    free(hp);
    free(he);
    free(f);
out:
    free(ids);
}

void cmd_xautoclaim(cmd_ctx *x) {
    long long minidle, count = 100;
    int justid = 0, sex;
    sid start;
    if (arg_ll_msg(x, 4, &minidle, "Invalid min-idle-time argument for XAUTOCLAIM")) return;
    if (minidle < 0) minidle = 0;
    if (sid_parse_interval(x, x->argv[5], x->argvlen[5], &start, &sex, 0)) return;
    if (sex && sid_incr(&start)) {
        reply_err(x, "ERR invalid start ID for the interval");
        return;
    }
    for (int j = 6; j < x->argc; j++) {
        int more = x->argc - 1 - j;
        if (!strcasecmp(x->argv[j], "count") && more) {
            long long maxc = LONG_MAX / 16;
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &count) || count < 1 || count > maxc) {
                reply_err(x, "ERR COUNT must be > 0");
                return;
            }
            j++;
        } else if (!strcasecmp(x->argv[j], "justid")) {
            justid = 1;
        } else {
            reply_syntax(x);
            return;
        }
    }
    smeta m;
    sgroup g;
    int r = open_group(x, &m, &g);
    if (r < 0) return;
    if (r == 0) {
        reply_nogroup(x);
        return;
    }
    long long attempts = count * 10;
    slist pel = {0};
    /* attempts records, and one more: the cursor to return */
    long n = st_load_pel(x, K1(x), &m, G2(x), start, MAXID, (size_t)attempts + 1, &pel);
    int rc = n < 0 ? (int)n : 0;
    char *f = malloc(x->argvlen[2] + 20);
    if (!rc && !f) rc = KEEL_ENOMEM;
    store_value *ev = calloc(pel.n + 1, sizeof *ev);
    char *he = calloc(pel.n + 1, 1);
    if (!rc && (!ev || !he)) rc = KEEL_ENOMEM;
    size_t scan = pel.n < (size_t)attempts ? pel.n : (size_t)attempts;
    for (size_t i = 0; i < scan && !rc; i++) {
        char ef[17];
        int b = st_sub_get(x, NULL, K1(x), &m, ef, sf_entry(ef, pel.r[i].id), &ev[i]);
        if (b == 0)
            he[i] = 1;
        else if (b != KEEL_ENOTFOUND)
            rc = b;
    }
    kbuf body, *outb = x->out;
    kbuf_init(&body);
    sid *deleted = calloc((size_t)(scan + 1), sizeof *deleted);
    size_t nd = 0, len = 0, i = 0;
    if (!rc && !deleted) rc = KEEL_ENOMEM;
    if (!rc) {
        store_txn *t = store_txn_begin(x->srv->st);
        int have_cons = 0;
        for (; i < scan && count && !rc; i++) {
            sid id = pel.r[i].id;
            if (!he[i]) {
                rc = st_sub_del(x, t, K1(x), &m, f, sf_pel(f, G2(x), id), NULL);
                deleted[nd++] = id;
                count--;
                continue;
            }
            spel p;
            if (sp_decode(pel.r[i].val, pel.r[i].vlen, &p)) continue;
            if (minidle && x->now_ms - (long long)p.time < minidle) continue;
            if (!have_cons) {
                rc = sc_touch(x, t, K1(x), &m, G2(x), x->argv[3], x->argvlen[3], 1, NULL);
                have_cons = 1;
                if (rc) break;
            }
            rc = claim_one(x, t, &m, id, &p, x->now_ms, -1, justid);
            x->out = &body;
            if (justid)
                sid_reply(x, id);
            else
                st_reply_entry(x, id, ev[i].data, ev[i].len);
            x->out = outb;
            len++;
            count--;
        }
        if (rc)
            store_txn_abort(t);
        else
            rc = store_txn_commit(t);
    }
    if (rc) {
        st_fail(x, NULL, rc);
    } else {
        resp_w_array(x->out, 3);
        sid_reply(x, i < pel.n ? pel.r[i].id : ZEROID);
        resp_w_array(x->out, len);
        kbuf_append(x->out, body.p, body.len);
        resp_w_array(x->out, nd);
        for (size_t d = 0; d < nd; d++)
            sid_reply(x, deleted[d]);
    }
    kbuf_close(&body);
    for (size_t e = 0; he && e < scan; e++)
        if (he[e]) store_value_release(&ev[e]);
    free(ev);
    free(he);
    free(deleted);
    free(f);
    slist_free(&pel);
}

/* ---- XINFO ------------------------------------------------------------------ */

void cmd_xinfo(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'xinfo' command");
}

void cmd_xinfo_help(cmd_ctx *x) {
    static const char *const help[] = {"CONSUMERS <key> <groupname>",
                                       "    Show consumers of <groupname>.",
                                       "GROUPS <key>",
                                       "    Show the stream consumer groups.",
                                       "STREAM <key> [FULL [COUNT <count>]",
                                       "    Show information about the stream."};
    reply_help(x, "XINFO", help, sizeof help / sizeof *help);
}

/* XINFO's key lookup: 1 found, else replied (-ERR no such key). */
static int info_open(cmd_ctx *x, smeta *m) {
    int r = sm_lookup(x, NULL, GK(x), m);
    if (r == 0) reply_err(x, "ERR no such key");
    return r == 1;
}

static void reply_lag(cmd_ctx *x, const smeta *m, const sgroup *g) {
    if (!m->added) {
        resp_w_int(x->out, 0);
    } else if (g->entries_read != ENTRIES_READ_INVALID &&
               !st_range_has_tombstones(m, &g->last, NULL)) {
        resp_w_int(x->out, (long long)(m->added - g->entries_read));
    } else {
        uint64_t er = st_estimate_distance(m, g->last);
        if (er != ENTRIES_READ_INVALID)
            resp_w_int(x->out, (long long)(m->added - er));
        else
            resp_w_null(x->out, x->proto);
    }
}

static void reply_entries_read(cmd_ctx *x, const sgroup *g) {
    if (g->entries_read != ENTRIES_READ_INVALID)
        resp_w_int(x->out, (long long)g->entries_read);
    else
        resp_w_null(x->out, x->proto);
}

/* Pending records of consumer c (name cn) among pel. */
static long long pel_of(const slist *pel, const char *cn, size_t cl) {
    long long n = 0;
    for (size_t i = 0; i < pel->n; i++) {
        spel p;
        if (!sp_decode(pel->r[i].val, pel->r[i].vlen, &p) && p.conslen == cl &&
            !memcmp(p.cons, cn, cl))
            n++;
    }
    return n;
}

void cmd_xinfo_consumers(cmd_ctx *x) {
    smeta m;
    if (!info_open(x, &m)) return;
    sgroup g;
    int gr = sg_get(x, NULL, GK(x), &m, GN(x), &g);
    if (gr < 0) {
        st_fail(x, NULL, gr);
        return;
    }
    if (!gr) {
        reply_errf(x, "NOGROUP No such consumer group '%.*s' for key name '%.*s'",
                   (int)x->argvlen[3], x->argv[3], (int)x->argvlen[2], x->argv[2]);
        return;
    }
    slist cons = {0}, pel = {0};
    long n = st_load_consumers(x, GK(x), &m, GN(x), &cons);
    if (n >= 0) n = st_load_pel(x, GK(x), &m, GN(x), ZEROID, MAXID, 0, &pel);
    if (n < 0) {
        st_fail(x, NULL, (int)n);
    } else {
        resp_w_array(x->out, cons.n);
        for (size_t i = 0; i < cons.n; i++) {
            uint64_t seen = 0;
            for (size_t b = 0; b < 8 && b < cons.r[i].vlen; b++)
                seen = seen << 8 | (unsigned char)cons.r[i].val[b];
            long long idle = x->now_ms - (long long)seen;
            resp_w_map(x->out, x->proto, 3);
            resp_w_bulkstr(x->out, "name");
            resp_w_bulk(x->out, cons.r[i].name, cons.r[i].namelen);
            resp_w_bulkstr(x->out, "pending");
            resp_w_int(x->out, pel_of(&pel, cons.r[i].name, cons.r[i].namelen));
            resp_w_bulkstr(x->out, "idle");
            resp_w_int(x->out, idle < 0 ? 0 : idle);
        }
    }
    slist_free(&cons);
    slist_free(&pel);
}

void cmd_xinfo_groups(cmd_ctx *x) {
    smeta m;
    if (!info_open(x, &m)) return;
    slist groups = {0};
    long n = st_load_groups(x, GK(x), &m, &groups);
    if (n < 0) {
        slist_free(&groups);
        st_fail(x, NULL, (int)n);
        return;
    }
    kbuf body, *outb = x->out;
    kbuf_init(&body);
    int rc = 0;
    for (size_t i = 0; i < groups.n && !rc; i++) {
        sgroup g;
        sg_decode(groups.r[i].val, groups.r[i].vlen, &g);
        slist cons = {0}, pel = {0};
        long a = st_load_consumers(x, GK(x), &m, groups.r[i].name, groups.r[i].namelen, &cons);
        if (a >= 0)
            a = st_load_pel(x, GK(x), &m, groups.r[i].name, groups.r[i].namelen, ZEROID, MAXID, 0,
                            &pel);
        if (a < 0) rc = (int)a;
        x->out = &body;
        resp_w_map(x->out, x->proto, 6);
        resp_w_bulkstr(x->out, "name");
        resp_w_bulk(x->out, groups.r[i].name, groups.r[i].namelen);
        resp_w_bulkstr(x->out, "consumers");
        resp_w_int(x->out, (long long)cons.n);
        resp_w_bulkstr(x->out, "pending");
        resp_w_int(x->out, (long long)pel.n);
        resp_w_bulkstr(x->out, "last-delivered-id");
        sid_reply(x, g.last);
        resp_w_bulkstr(x->out, "entries-read");
        reply_entries_read(x, &g);
        resp_w_bulkstr(x->out, "lag");
        reply_lag(x, &m, &g);
        x->out = outb;
        slist_free(&cons);
        slist_free(&pel);
    }
    if (rc) {
        st_fail(x, NULL, rc);
    } else {
        resp_w_array(x->out, groups.n);
        kbuf_append(x->out, body.p, body.len);
    }
    kbuf_close(&body);
    slist_free(&groups);
}

/* XINFO STREAM key FULL: entries, then every group with its PEL and
 * consumers (count limits each list; 0 = all). */
static int info_full(cmd_ctx *x, const smeta *m, long long count) {
    slist ents = {0}, groups = {0};
    long n = st_load_entries(x, GK(x), m, ZEROID, MAXID, 0, (size_t)count, &ents);
    if (n >= 0) n = st_load_groups(x, GK(x), m, &groups);
    if (n < 0) {
        slist_free(&ents);
        slist_free(&groups);
        return (int)n;
    }
    resp_w_bulkstr(x->out, "entries");
    resp_w_array(x->out, ents.n);
    for (size_t i = 0; i < ents.n; i++)
        st_reply_entry(x, ents.r[i].id, ents.r[i].val, ents.r[i].vlen);
    resp_w_bulkstr(x->out, "groups");
    resp_w_array(x->out, groups.n);
    int rc = 0;
    for (size_t i = 0; i < groups.n; i++) {
        sgroup g;
        sg_decode(groups.r[i].val, groups.r[i].vlen, &g);
        const char *gn = groups.r[i].name;
        size_t gl = groups.r[i].namelen;
        slist cons = {0}, pel = {0};
        long a = st_load_consumers(x, GK(x), m, gn, gl, &cons);
        if (a >= 0) a = st_load_pel(x, GK(x), m, gn, gl, ZEROID, MAXID, 0, &pel);
        if (a < 0 && !rc) rc = (int)a;
        resp_w_map(x->out, x->proto, 7);
        resp_w_bulkstr(x->out, "name");
        resp_w_bulk(x->out, gn, gl);
        resp_w_bulkstr(x->out, "last-delivered-id");
        sid_reply(x, g.last);
        resp_w_bulkstr(x->out, "entries-read");
        reply_entries_read(x, &g);
        resp_w_bulkstr(x->out, "lag");
        reply_lag(x, m, &g);
        resp_w_bulkstr(x->out, "pel-count");
        resp_w_int(x->out, (long long)pel.n);
        resp_w_bulkstr(x->out, "pending");
        size_t np = count && (size_t)count < pel.n ? (size_t)count : pel.n;
        resp_w_array(x->out, np);
        for (size_t p = 0; p < np; p++) {
            spel e = {0};
            sp_decode(pel.r[p].val, pel.r[p].vlen, &e);
            resp_w_array(x->out, 4);
            sid_reply(x, pel.r[p].id);
            resp_w_bulk(x->out, e.cons, e.conslen);
            resp_w_int(x->out, (long long)e.time);
            resp_w_int(x->out, (long long)e.count);
        }
        resp_w_bulkstr(x->out, "consumers");
        resp_w_array(x->out, cons.n);
        for (size_t c = 0; c < cons.n; c++) {
            uint64_t seen = 0;
            for (size_t b = 0; b < 8 && b < cons.r[c].vlen; b++)
                seen = seen << 8 | (unsigned char)cons.r[c].val[b];
            resp_w_map(x->out, x->proto, 4);
            resp_w_bulkstr(x->out, "name");
            resp_w_bulk(x->out, cons.r[c].name, cons.r[c].namelen);
            resp_w_bulkstr(x->out, "seen-time");
            resp_w_int(x->out, (long long)seen);
            resp_w_bulkstr(x->out, "pel-count");
            long long mine = pel_of(&pel, cons.r[c].name, cons.r[c].namelen);
            resp_w_int(x->out, mine);
            resp_w_bulkstr(x->out, "pending");
            size_t want = count && count < mine ? (size_t)count : (size_t)mine, k = 0;
            resp_w_array(x->out, want);
            for (size_t p = 0; p < pel.n && k < want; p++) {
                spel e;
                if (sp_decode(pel.r[p].val, pel.r[p].vlen, &e) || e.conslen != cons.r[c].namelen ||
                    memcmp(e.cons, cons.r[c].name, e.conslen))
                    continue;
                resp_w_array(x->out, 3);
                sid_reply(x, pel.r[p].id);
                resp_w_int(x->out, (long long)e.time);
                resp_w_int(x->out, (long long)e.count);
                k++;
            }
        }
        slist_free(&cons);
        slist_free(&pel);
    }
    slist_free(&ents);
    slist_free(&groups);
    return rc;
}

/* Loads the last entry into l (see st_last_valid). */
static long load_last(cmd_ctx *x, const smeta *m, slist *l) {
    sid last;
    int rc = st_last_valid(x, GK(x), m, &last);
    if (rc) return rc;
    if (!m->length) return 0;
    return st_load_entries(x, GK(x), m, last, last, 0, 1, l);
}

/* radix-tree-keys: the listpack nodes from the first entry's to the last
 * entry's (two seeks; a node emptied by XDEL in the middle still counts,
 * where redis would have freed it). */
static long count_nodes(cmd_ctx *x, const smeta *m, long long *nodes) {
    slist f = {0}, l = {0};
    *nodes = 0;
    long n = st_load_entries(x, GK(x), m, ZEROID, MAXID, 0, 1, &f);
    if (n > 0) n = load_last(x, m, &l);
    if (n > 0 && f.n && l.n) {
        uint64_t a = 0, b = 0;
        for (size_t i = 0; i < 8 && i < f.r[0].vlen && i < l.r[0].vlen; i++) {
            a = a << 8 | (unsigned char)f.r[0].val[i];
            b = b << 8 | (unsigned char)l.r[0].val[i];
        }
        *nodes = b >= a ? (long long)(b - a + 1) : 1;
    }
    slist_free(&f);
    slist_free(&l);
    return n;
}

void cmd_xinfo_stream(cmd_ctx *x) {
    int full = 0;
    long long count = 10;
    int optc = x->argc - 3;
    if (optc) {
        if ((optc != 1 && optc != 3) || strcasecmp(x->argv[3], "full")) {
            reply_sub_syntax(x, "XINFO");
            return;
        }
        if (optc == 3) {
            if (strcasecmp(x->argv[4], "count")) {
                reply_sub_syntax(x, "XINFO");
                return;
            }
            if (arg_ll(x->argv[5], x->argvlen[5], &count)) {
                reply_not_int(x);
                return;
            }
            if (count < 0) count = 10;
        }
        full = 1;
    }
    smeta m;
    if (!info_open(x, &m)) return;
    long long nodes = 0;
    long rcn = count_nodes(x, &m, &nodes);
    slist groups = {0}, first = {0}, last = {0};
    if (rcn >= 0 && !full) rcn = st_load_groups(x, GK(x), &m, &groups);
    if (rcn >= 0 && !full) rcn = st_load_entries(x, GK(x), &m, ZEROID, MAXID, 0, 1, &first);
    if (rcn >= 0 && !full) rcn = load_last(x, &m, &last);
    if (rcn < 0) {
        st_fail(x, NULL, (int)rcn);
        goto out;
    }
    kbuf body, *outb = x->out;
    kbuf_init(&body);
    x->out = &body;
    resp_w_map(x->out, x->proto, full ? 9 : 10);
    resp_w_bulkstr(x->out, "length");
    resp_w_int(x->out, (long long)m.length);
    resp_w_bulkstr(x->out, "radix-tree-keys");
    resp_w_int(x->out, nodes);
    resp_w_bulkstr(x->out, "radix-tree-nodes");
    resp_w_int(x->out, nodes + 1); /* rax internals keel has no counterpart for */
    resp_w_bulkstr(x->out, "last-generated-id");
    sid_reply(x, m.last);
    resp_w_bulkstr(x->out, "max-deleted-entry-id");
    sid_reply(x, m.maxdel);
    resp_w_bulkstr(x->out, "entries-added");
    resp_w_int(x->out, (long long)m.added);
    resp_w_bulkstr(x->out, "recorded-first-entry-id");
    sid_reply(x, m.first);
    int rc = 0;
    if (!full) {
        resp_w_bulkstr(x->out, "groups");
        resp_w_int(x->out, (long long)groups.n);
        resp_w_bulkstr(x->out, "first-entry");
        if (first.n)
            st_reply_entry(x, first.r[0].id, first.r[0].val, first.r[0].vlen);
        else
            resp_w_null(x->out, x->proto);
        resp_w_bulkstr(x->out, "last-entry");
        if (last.n)
            st_reply_entry(x, last.r[0].id, last.r[0].val, last.r[0].vlen);
        else
            resp_w_null(x->out, x->proto);
    } else {
        rc = info_full(x, &m, count);
    }
    x->out = outb;
    if (rc)
        st_fail(x, NULL, rc);
    else
        kbuf_append(x->out, body.p, body.len);
    kbuf_close(&body);
out:
    slist_free(&groups);
    slist_free(&first);
    slist_free(&last);
}
