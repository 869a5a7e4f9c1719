/* cmd_string.c - string and expiry commands (DESIGN.md §4).
 *
 * Semantics and error texts follow redis-server 7.0 (t_string.c, expire.c).
 * Reads use store_get; writes use a store txn, which reads its own writes,
 * and reply only after the txn committed - the turn's group commit then
 * makes it durable before the reply leaves (server.c).
 */
#include "node/cmd.h"
#include "core/err.h"
#include "node/db.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_STRING (512ll << 20) /* proto-max-bulk-len */

/* ---- Helpers ------------------------------------------------------------- */

/* Looks up argv[i]. Returns 1 found, 0 absent, -1 after replying an error.
 * With t == NULL reads the store directly. */
static int lookup_any(cmd_ctx *x, store_txn *t, int i, store_value *v) {
    int rc = db_get(x, t, x->argv[i], x->argvlen[i], v);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    return 1;
}

static int lookup(cmd_ctx *x, store_txn *t, int i, store_value *v) {
    int r = lookup_any(x, t, i, v);
    if (r <= 0) return r;
    if (v->type != STORE_T_STRING) {
        store_value_release(v);
        reply_wrongtype(x);
        return -1;
    }
    return 1;
}

/* Aborts t and replies a storage error for code rc. */
static void fail(cmd_ctx *x, store_txn *t, int rc) {
    store_txn_abort(t);
    reply_errf(x, "ERR storage error: %s", keel_strerror(rc));
}

/* Ends a write whose last step returned rc: aborts and replies the error, or
 * commits into the turn. Returns 0 when committed; the caller then replies.
 * A commit cannot fail: durability is the turn's store_sync, and a failed
 * sync stops the node before any reply of the turn leaves (server.c). */
static int finish(cmd_ctx *x, store_txn *t, int rc) {
    if (rc) {
        fail(x, t, rc);
        return -1;
    }
    store_txn_commit(t);
    return 0;
}

static int put(store_txn *t, cmd_ctx *x, int i, int64_t expire, const void *p, size_t len) {
    return db_put(x, t, x->argv[i], x->argvlen[i], STORE_T_STRING, expire, p, len);
}

/* Replies with a looked-up value, or nil when it was not found. */
static void reply_value(cmd_ctx *x, int found, const store_value *v) {
    if (found)
        resp_w_bulk(x->out, v->data, v->len);
    else
        resp_w_null(x->out, x->proto);
}

static void reply_expire_time(cmd_ctx *x, const char *cmd) {
    reply_errf(x, "ERR invalid expire time in '%s' command", cmd);
}

/* ---- GET / SET family ---------------------------------------------------- */

void cmd_get(cmd_ctx *x) {
    store_value v;
    int r = lookup(x, NULL, 1, &v);
    if (r < 0) return;
    reply_value(x, r, &v);
    if (r) store_value_release(&v);
}

enum {
    SET_NX = 1,
    SET_XX = 2,
    SET_GET = 4,
    SET_KEEPTTL = 8,
    SET_EX = 16,
    SET_PX = 32,
    SET_EXAT = 64,
    SET_PXAT = 128
};
#define SET_ANY_EXPIRE (SET_EX | SET_PX | SET_EXAT | SET_PXAT)

/* Parses SET's options as redis' parseExtendedStringArgumentsOrReply does.
 * Returns 0 with *flags and *expire (absolute ms, 0 = none), or -1 after
 * replying. */
static int set_options(cmd_ctx *x, unsigned *flags, int64_t *expire) {
    static const struct {
        const char *name;
        unsigned flag;
    } units[] = {{"ex", SET_EX}, {"px", SET_PX}, {"exat", SET_EXAT}, {"pxat", SET_PXAT}};
    int exp_arg = 0;
    *flags = 0;
    *expire = 0;
    for (int j = 3; j < x->argc; j++) {
        const char *o = x->argv[j];
        int has_next = j + 1 < x->argc;
        unsigned unit = 0;
        for (size_t u = 0; u < 4; u++)
            if (strcasecmp(o, units[u].name) == 0) unit = units[u].flag;
        if (!strcasecmp(o, "nx") && !(*flags & SET_XX))
            *flags |= SET_NX;
        else if (!strcasecmp(o, "xx") && !(*flags & SET_NX))
            *flags |= SET_XX;
        else if (!strcasecmp(o, "get"))
            *flags |= SET_GET;
        else if (!strcasecmp(o, "keepttl") && !(*flags & SET_ANY_EXPIRE))
            *flags |= SET_KEEPTTL;
        else if (unit && !(*flags & (SET_KEEPTTL | (SET_ANY_EXPIRE & ~unit))) && has_next) {
            /* A repeated unit is accepted and the last value wins, as in redis. */
            *flags |= unit;
            exp_arg = ++j;
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    if (!exp_arg) return 0;
    long long ms;
    if (arg_ll(x->argv[exp_arg], x->argvlen[exp_arg], &ms)) {
        reply_not_int(x);
        return -1;
    }
    int seconds = *flags & (SET_EX | SET_EXAT);
    if (ms <= 0 || (seconds && ms > LLONG_MAX / 1000)) {
        reply_expire_time(x, "set");
        return -1;
    }
    if (seconds) ms *= 1000;
    if (*flags & (SET_EX | SET_PX)) {
        if (ms > LLONG_MAX - x->now_ms) {
            reply_expire_time(x, "set");
            return -1;
        }
        ms += x->now_ms;
    }
    *expire = ms;
    return 0;
}

void cmd_set(cmd_ctx *x) {
    unsigned flags;
    int64_t expire;
    if (set_options(x, &flags, &expire)) return;
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    /* Plain SET overwrites a value of any type; only SET ... GET cares. */
    int rc = db_get(x, t, x->argv[1], x->argvlen[1], &old);
    if (rc && rc != KEEL_ENOTFOUND) {
        fail(x, t, rc);
        return;
    }
    int found = rc == 0;
    if (found && (flags & SET_GET) && old.type != STORE_T_STRING) {
        store_value_release(&old);
        store_txn_abort(t);
        reply_wrongtype(x);
        return;
    }
    if ((flags & SET_NX && found) || (flags & SET_XX && !found)) {
        reply_value(x, (flags & SET_GET) && found, &old);
        if (found) store_value_release(&old);
        store_txn_abort(t);
        return;
    }
    if (flags & SET_KEEPTTL && found) expire = old.expire_ms;
    rc = (expire && expire <= x->now_ms) ? db_del(x, t, x->argv[1], x->argvlen[1], NULL)
                                         : put(t, x, 1, expire, x->argv[2], x->argvlen[2]);
    if (finish(x, t, rc) == 0) {
        if (flags & SET_GET)
            reply_value(x, found, &old);
        else
            reply_ok(x);
    }
    if (found) store_value_release(&old);
}

/* SETNX, GETSET, GETDEL share: look up, write or delete, reply. */
void cmd_setnx(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found != 0) {
        store_txn_abort(t);
        if (found > 0) {
            store_value_release(&old);
            resp_w_int(x->out, 0);
        }
        return;
    }
    if (finish(x, t, put(t, x, 1, 0, x->argv[2], x->argvlen[2])) == 0) resp_w_int(x->out, 1);
}

static void get_and_replace(cmd_ctx *x, int del) {
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found < 0 || (del && !found)) {
        store_txn_abort(t);
        if (!found) resp_w_null(x->out, x->proto);
        return;
    }
    int rc = del ? db_del(x, t, x->argv[1], x->argvlen[1], NULL)
                 : put(t, x, 1, 0, x->argv[2], x->argvlen[2]);
    if (finish(x, t, rc) == 0) reply_value(x, found, &old);
    if (found) store_value_release(&old);
}

void cmd_getset(cmd_ctx *x) {
    get_and_replace(x, 0);
}
void cmd_getdel(cmd_ctx *x) {
    get_and_replace(x, 1);
}

void cmd_mget(cmd_ctx *x) {
    resp_w_array(x->out, (size_t)(x->argc - 1));
    for (int i = 1; i < x->argc; i++) {
        store_value v;
        int rc = db_get(x, NULL, x->argv[i], x->argvlen[i], &v);
        if (rc == 0 && v.type == STORE_T_STRING)
            resp_w_bulk(x->out, v.data, v.len);
        else
            resp_w_null(x->out, x->proto); /* MGET answers nil for other types */
        if (rc == 0) store_value_release(&v);
    }
}

void cmd_mset(cmd_ctx *x) {
    if (x->argc % 2 == 0) {
        reply_errf(x, "ERR wrong number of arguments for 'mset' command");
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    for (int i = 1; i < x->argc; i += 2) {
        int rc = put(t, x, i, 0, x->argv[i + 1], x->argvlen[i + 1]);
        if (rc) {
            fail(x, t, rc);
            return;
        }
    }
    if (finish(x, t, 0) == 0) reply_ok(x);
}

/* DEL and UNLINK count keys that logically existed; expired ones are
 * removed too but not counted, as redis does. */
void cmd_del(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    long long n = 0;
    for (int i = 1; i < x->argc; i++) {
        store_value v;
        int rc = db_get(x, t, x->argv[i], x->argvlen[i], &v);
        if (rc == 0) {
            n++;
            store_value_release(&v);
        }
        rc = db_del(x, t, x->argv[i], x->argvlen[i], NULL);
        if (rc) {
            fail(x, t, rc);
            return;
        }
    }
    if (finish(x, t, 0) == 0) resp_w_int(x->out, n);
}

void cmd_exists(cmd_ctx *x) {
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

void cmd_strlen(cmd_ctx *x) {
    store_value v;
    int r = lookup(x, NULL, 1, &v);
    if (r < 0) return;
    resp_w_int(x->out, r ? (long long)v.len : 0);
    if (r) store_value_release(&v);
}

void cmd_append(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found < 0) {
        store_txn_abort(t);
        return;
    }
    size_t oldlen = found ? old.len : 0;
    if ((long long)(oldlen + x->argvlen[2]) > MAX_STRING) {
        store_txn_abort(t);
        if (found) store_value_release(&old);
        reply_err(x, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return;
    }
    kbuf nv;
    kbuf_init(&nv);
    int rc = (found ? kbuf_append(&nv, old.data, old.len) : 0) ||
             kbuf_append(&nv, x->argv[2], x->argvlen[2]);
    int64_t expire = found ? old.expire_ms : 0;
    if (found) store_value_release(&old);
    if (!rc) rc = put(t, x, 1, expire, nv.p ? nv.p : "", oldlen + x->argvlen[2]);
    kbuf_close(&nv);
    if (finish(x, t, rc > 0 ? KEEL_ENOMEM : rc) == 0)
        resp_w_int(x->out, (long long)(oldlen + x->argvlen[2]));
}

/* ---- Counters ------------------------------------------------------------ */

static void incr_by(cmd_ctx *x, long long by) {
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found < 0) {
        store_txn_abort(t);
        return;
    }
    long long cur = 0;
    int64_t expire = 0;
    if (found) {
        int bad = arg_ll(old.data, old.len, &cur);
        expire = old.expire_ms;
        store_value_release(&old);
        if (bad) {
            store_txn_abort(t);
            reply_not_int(x);
            return;
        }
    }
    if ((by < 0 && cur < 0 && by < LLONG_MIN - cur) ||
        (by > 0 && cur > 0 && by > LLONG_MAX - cur)) {
        store_txn_abort(t);
        reply_err(x, "ERR increment or decrement would overflow");
        return;
    }
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", cur + by);
    if (finish(x, t, put(t, x, 1, expire, num, (size_t)n)) == 0) resp_w_int(x->out, cur + by);
}

static int incr_arg(cmd_ctx *x, long long *by) {
    if (arg_ll(x->argv[2], x->argvlen[2], by)) {
        reply_not_int(x);
        return -1;
    }
    return 0;
}

void cmd_incr(cmd_ctx *x) {
    incr_by(x, 1);
}
void cmd_decr(cmd_ctx *x) {
    incr_by(x, -1);
}
void cmd_incrby(cmd_ctx *x) {
    long long by;
    if (incr_arg(x, &by) == 0) incr_by(x, by);
}
void cmd_decrby(cmd_ctx *x) {
    long long by;
    if (incr_arg(x, &by)) return;
    if (by == LLONG_MIN) {
        reply_err(x, "ERR decrement would overflow");
        return;
    }
    incr_by(x, -by);
}

/* ---- Expiry -------------------------------------------------------------- */

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

static int expire_options(cmd_ctx *x, unsigned *flags) {
    *flags = 0;
    for (int j = 3; j < x->argc; j++) {
        if (arg_is(x, j, "nx"))
            *flags |= EXP_NX;
        else if (arg_is(x, j, "xx"))
            *flags |= EXP_XX;
        else if (arg_is(x, j, "gt"))
            *flags |= EXP_GT;
        else if (arg_is(x, j, "lt"))
            *flags |= EXP_LT;
        else {
            reply_errf(x, "ERR Unsupported option %s", x->argv[j]);
            return -1;
        }
    }
    if ((*flags & EXP_NX) && (*flags & (EXP_XX | EXP_GT | EXP_LT))) {
        reply_err(x, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return -1;
    }
    if ((*flags & EXP_GT) && (*flags & EXP_LT)) {
        reply_err(x, "ERR GT and LT options at the same time are not compatible");
        return -1;
    }
    return 0;
}

/* Whether the NX/XX/GT/LT condition lets the new expiry replace cur
 * (0 = no expiry, which counts as infinite). */
static int expire_allowed(unsigned flags, int64_t cur, int64_t when) {
    if ((flags & EXP_NX) && cur) return 0;
    if ((flags & EXP_XX) && !cur) return 0;
    if ((flags & EXP_GT) && (!cur || when <= cur)) return 0;
    if ((flags & EXP_LT) && cur && when >= cur) return 0;
    return 1;
}

static void expire_generic(cmd_ctx *x, int seconds, const char *name) {
    unsigned flags;
    long long when;
    if (expire_options(x, &flags)) return;
    if (arg_ll(x->argv[2], x->argvlen[2], &when)) {
        reply_not_int(x);
        return;
    }
    if (seconds && (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)) {
        reply_expire_time(x, name);
        return;
    }
    if (seconds) when *= 1000;
    if (when > LLONG_MAX - x->now_ms) {
        reply_expire_time(x, name);
        return;
    }
    when += x->now_ms;
    store_txn *t = store_txn_begin(x->srv->st);
    store_value v;
    int found = lookup_any(x, t, 1, &v);
    if (found <= 0 || !expire_allowed(flags, v.expire_ms, when)) {
        store_txn_abort(t);
        if (found > 0) store_value_release(&v);
        if (found >= 0) resp_w_int(x->out, 0);
        return;
    }
    int rc = when <= x->now_ms
                 ? db_del(x, t, x->argv[1], x->argvlen[1], NULL)
                 : db_put(x, t, x->argv[1], x->argvlen[1], v.type, when, v.data, v.len);
    store_value_release(&v);
    if (finish(x, t, rc) == 0) resp_w_int(x->out, 1);
}

void cmd_expire(cmd_ctx *x) {
    expire_generic(x, 1, "expire");
}
void cmd_pexpire(cmd_ctx *x) {
    expire_generic(x, 0, "pexpire");
}

static void ttl_generic(cmd_ctx *x, int ms) {
    store_value v;
    int rc = db_get(x, NULL, x->argv[1], x->argvlen[1], &v);
    if (rc) {
        resp_w_int(x->out, -2);
        return;
    }
    long long left = -1;
    if (v.expire_ms) {
        left = v.expire_ms - x->now_ms;
        if (left < 0) left = 0;
        if (!ms) left = (left + 500) / 1000;
    }
    store_value_release(&v);
    resp_w_int(x->out, left);
}

void cmd_ttl(cmd_ctx *x) {
    ttl_generic(x, 0);
}
void cmd_pttl(cmd_ctx *x) {
    ttl_generic(x, 1);
}

void cmd_persist(cmd_ctx *x) {
    store_txn *t = store_txn_begin(x->srv->st);
    store_value v;
    int found = lookup_any(x, t, 1, &v);
    if (found <= 0 || !v.expire_ms) {
        store_txn_abort(t);
        if (found > 0) store_value_release(&v);
        if (found >= 0) resp_w_int(x->out, 0);
        return;
    }
    int rc = db_put(x, t, x->argv[1], x->argvlen[1], v.type, 0, v.data, v.len);
    store_value_release(&v);
    if (finish(x, t, rc) == 0) resp_w_int(x->out, 1);
}
