/* cmd_keyspace.c - keyspace commands over every type: FLUSHALL/FLUSHDB,
 * KEYS, SCAN, RANDOMKEY, TYPE, RENAME/RENAMENX, COPY, TOUCH, OBJECT, TIME.
 *
 * Semantics and error texts follow redis-server 7.0 (db.c, object.c). This
 * node holds only the partitions it serves, so FLUSHDB, KEYS, SCAN and
 * RANDOMKEY cover the slots this node serves, as a Redis Cluster node's do.
 * Keys live per slot in record-key order ([0x00][key], store.h), so SCAN's
 * cursor is (offset in slot << 14) | slot: it visits slots in order and
 * returns every key present for the whole scan, as redis guarantees.
 */
#include "node/cmd.h"
#include "node/blocking.h"
#include "core/clock.h"
#include "core/crc16.h"
#include "core/err.h"
#include "node/access.h"
#include "node/db.h"
#include "node/ptable.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SLOTS 16384u

/* Whether this node serves slot (its keys are visible to clients). */
static int serves(cmd_ctx *x, unsigned slot) {
    route r;
    ptable_route(x->srv->pt, slot, &r);
    return r.kind == ROUTE_SERVE || r.kind == ROUTE_HOLD;
}

/* ---- FLUSHALL / FLUSHDB ----------------------------------------------------- */

void cmd_flushall(cmd_ctx *x) {
    if (x->argc > 2 || (x->argc == 2 && !arg_is(x, 1, "sync") && !arg_is(x, 1, "async"))) {
        reply_syntax(x);
        return;
    }
    /* Partitions this node serves and no move is copying (a range delete is
     * invisible to a change capture), merged into runs of slots. */
    const ptable *pt = x->srv->pt;
    unsigned p = ptable_partitions(pt), per = SLOTS / p;
    int rc = 0;
    for (unsigned i = 0; i < p && !rc;) {
        if (ptable_state(pt, i) != PART_SERVING) {
            i++;
            continue;
        }
        unsigned j = i;
        while (j + 1 < p && ptable_state(pt, j + 1) == PART_SERVING)
            j++;
        rc = store_delete_slots(x->srv->st, i * per, (j + 1) * per - 1);
        i = j + 1;
    }
    if (rc)
        reply_storage(x, rc);
    else
        reply_ok(x);
    blocking_touch_all(x->srv); /* blocked XREADGROUPs fail: their keys are gone */
}

/* ---- KEYS / SCAN / RANDOMKEY ---------------------------------------------------- */

typedef struct keys_acc {
    cmd_ctx *x;
    kbuf out;
    size_t n;
    const char *pat; /* NULL = all */
    size_t patlen;
    int type;         /* -1 = any */
    const char *last; /* RANDOMKEY: the key found */
    size_t lastlen;
} keys_acc;

static int keys_one(void *arg, const char *rk, size_t rkl, const store_value *v) {
    keys_acc *a = arg;
    const char *k = rk + 1;
    size_t kl = rkl - 1;
    if (a->pat && !db_glob(a->pat, a->patlen, k, kl, 0)) return 0;
    if (a->type >= 0 && v->type != a->type) return 0;
    resp_w_bulk(&a->out, k, kl);
    a->n++;
    return 0;
}

static const char key_lo = STORE_TAG_KEY, key_hi = STORE_TAG_KEY + 1;

void cmd_keys(cmd_ctx *x) {
    keys_acc a = {.x = x, .pat = x->argv[1], .patlen = x->argvlen[1], .type = -1};
    if (a.patlen == 1 && a.pat[0] == '*') a.pat = NULL;
    kbuf_init(&a.out);
    long rc = 0;
    for (unsigned slot = 0; slot < SLOTS && rc >= 0; slot++) {
        uint64_t keys;
        store_slot_stats(x->srv->st, slot, &keys, NULL);
        if (!keys || !serves(x, slot)) continue;
        rc = store_scan_range(x->srv->st, slot, &key_lo, 1, &key_hi, 1, 0, SIZE_MAX, x->now_ms,
                              keys_one, &a);
    }
    if (rc < 0) {
        reply_storage(x, (int)rc);
    } else {
        resp_w_array(x->out, a.n);
        kbuf_append(x->out, a.out.p, a.out.len);
    }
    kbuf_close(&a.out);
}

static int type_by_name(const char *s) {
    static const char *names[] = {"string", "hash", "set", "zset", "list", "stream"};
    for (int i = 0; i < 6; i++) /* index = STORE_T_* */
        if (!strcasecmp(s, names[i])) return i;
    return -2;
}

/* Parses a SCAN-family cursor as redis' parseScanCursorOrReply. */
int scan_cursor(cmd_ctx *x, int i, unsigned long long *out) {
    char *end;
    errno = 0;
    const char *s = x->argv[i];
    *out = strtoull(s, &end, 10);
    if (x->argvlen[i] == 0 || s[0] == '-' || s[0] == ' ' || *end || errno == ERANGE) {
        reply_err(x, "ERR invalid cursor");
        return -1;
    }
    return 0;
}

/* Parses [MATCH p] [COUNT n] [TYPE t] from argument first. type NULL when
 * TYPE is not accepted. Returns 0 or -1 after replying. */
int scan_options(cmd_ctx *x, int first, const char **pat, size_t *patlen, long long *count,
                 int *type) {
    *pat = NULL;
    *patlen = 0;
    *count = 10;
    if (type) *type = -1;
    for (int j = first; j < x->argc; j += 2) {
        int more = x->argc - j - 1;
        if (arg_is(x, j, "count") && more >= 1) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], count)) {
                reply_not_int(x);
                return -1;
            }
            if (*count < 1) {
                reply_syntax(x);
                return -1;
            }
        } else if (arg_is(x, j, "match") && more >= 1) {
            *pat = x->argv[j + 1];
            *patlen = x->argvlen[j + 1];
            if (*patlen == 1 && (*pat)[0] == '*') *pat = NULL;
        } else if (type && arg_is(x, j, "type") && more >= 1) {
            *type = type_by_name(x->argv[j + 1]);
            /* redis 7.0 accepts an unknown type and matches nothing */
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    return 0;
}

void cmd_scan(cmd_ctx *x) {
    unsigned long long cur;
    long long count;
    keys_acc a = {.x = x};
    if (scan_cursor(x, 1, &cur) || scan_options(x, 2, &a.pat, &a.patlen, &count, &a.type)) return;
    kbuf_init(&a.out);
    unsigned slot = (unsigned)(cur & (SLOTS - 1));
    unsigned long long off = cur >> 14;
    unsigned long long next = 0;
    long examined = 0;
    for (; slot < SLOTS; slot++, off = 0) {
        uint64_t keys;
        store_slot_stats(x->srv->st, slot, &keys, NULL);
        if (!keys || !serves(x, slot)) continue;
        size_t want = (size_t)(count - examined);
        /* COUNT bounds the keys examined, matched or not, as in redis. */
        long got = store_scan_range(x->srv->st, slot, &key_lo, 1, &key_hi, 1, (size_t)off, want,
                                    x->now_ms, keys_one, &a);
        if (got < 0) {
            kbuf_close(&a.out);
            reply_storage(x, (int)got);
            return;
        }
        examined += got;
        if ((size_t)got == want) {
            next = ((off + (unsigned long long)got) << 14) | slot;
            break;
        }
        if (examined >= count) {
            next = slot + 1 < SLOTS ? slot + 1 : 0;
            break;
        }
    }
    char num[32];
    int nl = snprintf(num, sizeof num, "%llu", next);
    resp_w_array(x->out, 2);
    resp_w_bulk(x->out, num, (size_t)nl);
    resp_w_array(x->out, a.n);
    kbuf_append(x->out, a.out.p, a.out.len);
    kbuf_close(&a.out);
}

void cmd_randomkey(cmd_ctx *x) {
    uint64_t total = store_total_keys(x->srv->st);
    for (int attempt = 0; total && attempt < 100; attempt++) {
        unsigned start = (unsigned)rand() % SLOTS;
        for (unsigned n = 0; n < SLOTS; n++) {
            unsigned slot = (start + n) % SLOTS;
            uint64_t keys;
            store_slot_stats(x->srv->st, slot, &keys, NULL);
            if (!keys || !serves(x, slot)) continue;
            keys_acc a = {.x = x, .type = -1};
            kbuf_init(&a.out);
            long got =
                store_scan_range(x->srv->st, slot, &key_lo, 1, &key_hi, 1,
                                 (size_t)((uint64_t)rand() % keys), 1, x->now_ms, keys_one, &a);
            if (got > 0) {
                kbuf_append(x->out, a.out.p, a.out.len);
                kbuf_close(&a.out);
                return;
            }
            kbuf_close(&a.out);
            break; /* an expired key or a stale count: pick another slot */
        }
    }
    resp_w_null(x->out, x->proto);
}

/* ---- TYPE / TOUCH / OBJECT / TIME --------------------------------------------- */

void cmd_type(cmd_ctx *x) {
    store_value v;
    int rc = db_get(x, NULL, x->argv[1], x->argvlen[1], &v);
    if (rc && rc != KEEL_ENOTFOUND) {
        reply_storage(x, rc);
        return;
    }
    resp_w_simple(x->out, rc ? "none" : db_type_name(v.type));
    if (!rc) store_value_release(&v);
}

void cmd_touch(cmd_ctx *x) {
    long long n = 0;
    for (int i = 1; i < x->argc; i++) {
        store_value v;
        if (db_get(x, NULL, x->argv[i], x->argvlen[i], &v) == 0) {
            n++;
            store_value_release(&v);
        }
    }
    resp_w_int(x->out, n);
}

/* redis' string encodings: an integer that fits a long, embstr up to 44
 * bytes, raw beyond. */
static const char *string_encoding(const store_value *v) {
    long long ll;
    if (v->len <= 20 && arg_ll(v->data, v->len, &ll) == 0) return "int";
    return v->len <= 44 ? "embstr" : "raw";
}

void cmd_object(cmd_ctx *x) {
    int help = arg_is(x, 1, "help");
    int enc = arg_is(x, 1, "encoding"), ref = arg_is(x, 1, "refcount"),
        idle = arg_is(x, 1, "idletime"), freq = arg_is(x, 1, "freq");
    if (!(help || enc || ref || idle || freq)) {
        reply_errf(x, "ERR unknown subcommand '%.128s'. Try OBJECT HELP.", x->argv[1]);
        return;
    }
    if (x->argc != (help ? 2 : 3)) { /* redis names the subcommand in lower case */
        char sub[16];
        size_t i = 0;
        for (; x->argv[1][i] && i < sizeof sub - 1; i++)
            sub[i] = (char)tolower((unsigned char)x->argv[1][i]);
        sub[i] = 0;
        reply_errf(x, "ERR wrong number of arguments for 'object|%s' command", sub);
        return;
    }
    if (help) {
        static const char *help[] = {
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Prints this help."};
        resp_w_array(x->out, sizeof help / sizeof *help);
        for (size_t i = 0; i < sizeof help / sizeof *help; i++)
            resp_w_simple(x->out, help[i]);
        return;
    }
    /* OBJECT's key is argv[2]: route it here (the table cannot say so). */
    x->slot = keel_key_slot(x->argv[2], x->argvlen[2]);
    route r;
    ptable_route(x->srv->pt, x->slot, &r);
    if (r.kind == ROUTE_MOVED) {
        reply_errf(x, "MOVED %u %s:%d", x->slot, r.owner->host, r.owner->port);
        return;
    }
    store_value v;
    int rc = db_get(x, NULL, x->argv[2], x->argvlen[2], &v);
    if (rc) {
        if (rc == KEEL_ENOTFOUND)
            resp_w_null(x->out, x->proto);
        else
            reply_storage(x, rc);
        return;
    }
    if (enc) {
        const char *e = v.type == STORE_T_STRING ? string_encoding(&v) : "hashtable";
        if (v.type == STORE_T_ZSET) e = "skiplist";
        if (v.type == STORE_T_LIST) e = "quicklist";
        if (v.type == STORE_T_STREAM) e = "stream";
        resp_w_bulkstr(x->out, e);
    } else if (freq && !access_lfu_mode(x->srv)) {
        reply_err(x, "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
                     "Please note that when switching between policies at runtime LRU and LFU "
                     "data will take some time to adjust.");
    } else if (freq) {
        resp_w_int(x->out, access_freq(x, x->argv[2], x->argvlen[2]));
    } else if (idle && access_lfu_mode(x->srv)) {
        reply_err(x, "ERR An LFU maxmemory policy is selected, idle time not tracked. Please "
                     "note that when switching between policies at runtime LRU and LFU data "
                     "will take some time to adjust.");
    } else if (idle) {
        resp_w_int(x->out, access_idle_s(x, x->argv[2], x->argvlen[2]));
    } else {
        resp_w_int(x->out, 1); /* REFCOUNT */
    }
    store_value_release(&v);
}

void cmd_time(cmd_ctx *x) {
    int64_t us = keel_wall_us();
    char a[32], b[32];
    int al = snprintf(a, sizeof a, "%lld", (long long)(us / 1000000));
    int bl = snprintf(b, sizeof b, "%lld", (long long)(us % 1000000));
    resp_w_array(x->out, 2);
    resp_w_bulk(x->out, a, (size_t)al);
    resp_w_bulk(x->out, b, (size_t)bl);
}

/* ---- RENAME / RENAMENX / COPY -------------------------------------------------- */

static void rename_generic(cmd_ctx *x, int nx) {
    const char *sk = x->argv[1], *dk = x->argv[2];
    size_t skl = x->argvlen[1], dkl = x->argvlen[2];
    store_value sv;
    flist l;
    int rc = db_load_value(x, sk, skl, &sv, &l);
    if (rc == KEEL_ENOTFOUND) {
        flist_free(&l);
        reply_err(x, "ERR no such key");
        return;
    }
    if (rc) {
        flist_free(&l);
        reply_storage(x, rc);
        return;
    }
    int same = skl == dkl && memcmp(sk, dk, skl) == 0;
    store_txn *t = store_txn_begin(x->srv->st);
    if (nx || same) {
        store_value dv;
        int d = db_get(x, t, dk, dkl, &dv);
        if (d == 0) store_value_release(&dv);
        if (d == 0 || same) {
            store_txn_abort(t);
            store_value_release(&sv);
            flist_free(&l);
            if (nx)
                resp_w_int(x->out, 0);
            else
                reply_ok(x);
            return;
        }
    }
    rc = db_copy_value(x, t, &sv, &l, dk, dkl, sv.expire_ms);
    if (!rc) rc = db_del(x, t, sk, skl, NULL);
    store_value_release(&sv);
    flist_free(&l);
    if (db_finish(x, t, rc)) return;
    if (nx)
        resp_w_int(x->out, 1);
    else
        reply_ok(x);
}

void cmd_rename(cmd_ctx *x) {
    rename_generic(x, 0);
}
void cmd_renamenx(cmd_ctx *x) {
    rename_generic(x, 1);
}

void cmd_copy(cmd_ctx *x) {
    int replace = 0;
    for (int j = 3; j < x->argc; j++) {
        if (arg_is(x, j, "replace")) {
            replace = 1;
        } else if (arg_is(x, j, "db") && j + 1 < x->argc) {
            long long db;
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &db)) {
                reply_not_int(x);
                return;
            }
            if (db < 0 || db > 0x7fffffff) {
                reply_err(x, "ERR value is out of range, must be positive");
                return;
            }
            if (db != 0) {
                reply_err(x, "ERR Copying to another database is not allowed in cluster mode");
                return;
            }
            j++;
        } else {
            reply_syntax(x);
            return;
        }
    }
    const char *sk = x->argv[1], *dk = x->argv[2];
    size_t skl = x->argvlen[1], dkl = x->argvlen[2];
    if (skl == dkl && memcmp(sk, dk, skl) == 0) {
        reply_err(x, "ERR source and destination objects are the same");
        return;
    }
    store_value sv;
    flist l;
    int rc = db_load_value(x, sk, skl, &sv, &l);
    if (rc) {
        flist_free(&l);
        if (rc == KEEL_ENOTFOUND)
            resp_w_int(x->out, 0);
        else
            reply_storage(x, rc);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    store_value dv;
    if (!replace && db_get(x, t, dk, dkl, &dv) == 0) {
        store_value_release(&dv);
        store_txn_abort(t);
        store_value_release(&sv);
        flist_free(&l);
        resp_w_int(x->out, 0);
        return;
    }
    rc = db_copy_value(x, t, &sv, &l, dk, dkl, sv.expire_ms);
    store_value_release(&sv);
    flist_free(&l);
    if (db_finish(x, t, rc)) return;
    resp_w_int(x->out, 1);
}

void cmd_function(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'function' command");
}

void cmd_memory(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'memory' command");
}

/* MEMORY USAGE key [SAMPLES n]: the bytes of the key's records as stored
 * (record keys and values, field records included), not RAM. */
void cmd_memory_usage(cmd_ctx *x) {
    if (x->argc != 3 && !(x->argc == 5 && arg_is(x, 3, "samples"))) {
        reply_syntax(x);
        return;
    }
    x->slot = keel_key_slot(x->argv[2], x->argvlen[2]);
    route r;
    ptable_route(x->srv->pt, x->slot, &r);
    if (r.kind == ROUTE_MOVED) {
        reply_errf(x, "MOVED %u %s:%d", x->slot, r.owner->host, r.owner->port);
        return;
    }
    store_value v;
    flist l;
    int rc = db_load_value(x, x->argv[2], x->argvlen[2], &v, &l);
    if (rc) {
        flist_free(&l);
        if (rc == KEEL_ENOTFOUND)
            resp_w_null(x->out, x->proto);
        else
            reply_storage(x, rc);
        return;
    }
    size_t kl = x->argvlen[2];
    long long n = (long long)(2 + 1 + kl + 9 + v.len);
    for (size_t i = 0; i < l.n; i++)
        n += (long long)(2 + 11 + kl + l.e[i].fl + 9 + l.e[i].vl);
    store_value_release(&v);
    flist_free(&l);
    resp_w_int(x->out, n);
}
