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

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
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
    if ((rc = store_txn_commit(t))) { /* only KEEL_EINVAL: no txn open */
        reply_errf(x, "ERR storage error: %s", keel_strerror(rc));
        return -1;
    }
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

static void expire_generic(cmd_ctx *x, int seconds, const char *name, int absolute) {
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
    int64_t base = absolute ? 0 : x->now_ms;
    if (when > LLONG_MAX - base) {
        reply_expire_time(x, name);
        return;
    }
    when += base;
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
    expire_generic(x, 1, "expire", 0);
}
void cmd_pexpire(cmd_ctx *x) {
    expire_generic(x, 0, "pexpire", 0);
}
void cmd_expireat(cmd_ctx *x) {
    expire_generic(x, 1, "expireat", 1);
}
void cmd_pexpireat(cmd_ctx *x) {
    expire_generic(x, 0, "pexpireat", 1);
}

static void ttl_generic(cmd_ctx *x, int ms, int absolute) {
    store_value v;
    int rc = db_get(x, NULL, x->argv[1], x->argvlen[1], &v);
    if (rc) {
        resp_w_int(x->out, -2);
        return;
    }
    long long left = -1;
    if (v.expire_ms) {
        left = absolute ? v.expire_ms : v.expire_ms - x->now_ms;
        if (left < 0) left = 0;
        if (!ms) left = (left + 500) / 1000;
    }
    store_value_release(&v);
    resp_w_int(x->out, left);
}

void cmd_ttl(cmd_ctx *x) {
    ttl_generic(x, 0, 0);
}
void cmd_pttl(cmd_ctx *x) {
    ttl_generic(x, 1, 0);
}
void cmd_expiretime(cmd_ctx *x) {
    ttl_generic(x, 0, 1);
}
void cmd_pexpiretime(cmd_ctx *x) {
    ttl_generic(x, 1, 1);
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

/* ---- String completions ---------------------------------------------------- */

/* SETEX key seconds value, PSETEX key ms value. */
static void setex_generic(cmd_ctx *x, int seconds, const char *name) {
    long long n;
    if (arg_ll(x->argv[2], x->argvlen[2], &n)) {
        reply_not_int(x);
        return;
    }
    if (n <= 0 || (seconds && n > LLONG_MAX / 1000)) {
        reply_expire_time(x, name);
        return;
    }
    if (seconds) n *= 1000;
    if (n > LLONG_MAX - x->now_ms) {
        reply_expire_time(x, name);
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    if (finish(x, t, put(t, x, 1, x->now_ms + n, x->argv[3], x->argvlen[3])) == 0) reply_ok(x);
}

void cmd_setex(cmd_ctx *x) {
    setex_generic(x, 1, "setex");
}
void cmd_psetex(cmd_ctx *x) {
    setex_generic(x, 0, "psetex");
}

void cmd_getex(cmd_ctx *x) {
    static const struct {
        const char *name;
        int ms, abs;
    } units[] = {{"ex", 0, 0}, {"px", 1, 0}, {"exat", 0, 1}, {"pxat", 1, 1}};
    int unit = -1, persist = 0, exp_arg = 0;
    for (int j = 2; j < x->argc; j++) {
        int u = -1;
        for (int k = 0; k < 4; k++)
            if (arg_is(x, j, units[k].name)) u = k;
        if (u >= 0 && !persist && (unit < 0 || unit == u) && j + 1 < x->argc) {
            unit = u;
            exp_arg = ++j;
        } else if (arg_is(x, j, "persist") && unit < 0) {
            persist = 1;
        } else {
            reply_syntax(x);
            return;
        }
    }
    int64_t when = 0;
    if (exp_arg) {
        long long n;
        if (arg_ll(x->argv[exp_arg], x->argvlen[exp_arg], &n)) {
            reply_not_int(x);
            return;
        }
        if (n <= 0 || (!units[unit].ms && n > LLONG_MAX / 1000)) {
            reply_expire_time(x, "getex");
            return;
        }
        if (!units[unit].ms) n *= 1000;
        if (!units[unit].abs) {
            if (n > LLONG_MAX - x->now_ms) {
                reply_expire_time(x, "getex");
                return;
            }
            n += x->now_ms;
        }
        when = n;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    store_value v;
    int found = lookup(x, t, 1, &v);
    if (found <= 0) {
        store_txn_abort(t);
        if (found == 0) resp_w_null(x->out, x->proto);
        return;
    }
    int rc = 0;
    if (exp_arg && when <= x->now_ms)
        rc = db_del(x, t, x->argv[1], x->argvlen[1], NULL);
    else if (exp_arg)
        rc = put(t, x, 1, when, v.data, v.len);
    else if (persist && v.expire_ms)
        rc = put(t, x, 1, 0, v.data, v.len);
    if (finish(x, t, rc) == 0) resp_w_bulk(x->out, v.data, v.len);
    store_value_release(&v);
}

void cmd_getrange(cmd_ctx *x) {
    long long start, end;
    if (arg_ll(x->argv[2], x->argvlen[2], &start) || arg_ll(x->argv[3], x->argvlen[3], &end)) {
        reply_not_int(x);
        return;
    }
    store_value v;
    int r = lookup(x, NULL, 1, &v);
    if (r < 0) return;
    long long len = r ? (long long)v.len : 0;
    if (start < 0 && end < 0 && start > end) {
        resp_w_bulk(x->out, "", 0);
    } else {
        if (start < 0) start += len;
        if (end < 0) end += len;
        if (start < 0) start = 0;
        if (end < 0) end = 0;
        if (end >= len) end = len - 1;
        if (start > end || len == 0)
            resp_w_bulk(x->out, "", 0);
        else
            resp_w_bulk(x->out, v.data + start, (size_t)(end - start + 1));
    }
    if (r) store_value_release(&v);
}

void cmd_setrange(cmd_ctx *x) {
    long long off;
    if (arg_ll(x->argv[2], x->argvlen[2], &off)) {
        reply_not_int(x);
        return;
    }
    if (off < 0) {
        reply_err(x, "ERR offset is out of range");
        return;
    }
    size_t vl = x->argvlen[3];
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found < 0) {
        store_txn_abort(t);
        return;
    }
    size_t oldlen = found ? old.len : 0;
    if (vl == 0) { /* nothing to write: redis replies the length */
        store_txn_abort(t);
        if (found) store_value_release(&old);
        resp_w_int(x->out, (long long)oldlen);
        return;
    }
    if (off > MAX_STRING - (long long)vl) {
        store_txn_abort(t);
        if (found) store_value_release(&old);
        reply_err(x, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        return;
    }
    size_t nl = (size_t)off + vl > oldlen ? (size_t)off + vl : oldlen;
    char *nv = calloc(1, nl ? nl : 1);
    int rc = nv ? 0 : KEEL_ENOMEM;
    int64_t expire = found ? old.expire_ms : 0;
    if (nv) {
        if (oldlen) memcpy(nv, old.data, oldlen);
        memcpy(nv + off, x->argv[3], vl);
        rc = put(t, x, 1, expire, nv, nl);
    }
    free(nv);
    if (found) store_value_release(&old);
    if (finish(x, t, rc) == 0) resp_w_int(x->out, (long long)nl);
}

/* redis' string2ld: the whole argument, no spaces, not NaN. */
static int arg_ld(const char *s, size_t len, long double *out) {
    char buf[5600];
    if (len == 0 || len >= sizeof buf || memchr(s, 0, len)) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (isspace((unsigned char)buf[0])) return -1;
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if (*end || isnan(v) || (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)))
        return -1;
    *out = v;
    return 0;
}

/* redis' ld2string(LD_STR_HUMAN): %.17Lf without trailing zeros. */
int fmt_ld(char *buf, size_t cap, long double v) {
    if (isinf(v)) return snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    int n = snprintf(buf, cap, "%.17Lf", v);
    if (n <= 0 || (size_t)n >= cap) return -1;
    if (strchr(buf, '.')) {
        while (n > 0 && buf[n - 1] == '0')
            n--;
        if (n > 0 && buf[n - 1] == '.') n--;
        buf[n] = 0;
    }
    if (n == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        buf[1] = 0;
        n = 1;
    }
    return n;
}

void cmd_incrbyfloat(cmd_ctx *x) {
    long double by, cur = 0;
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found < 0) {
        store_txn_abort(t);
        return;
    }
    int64_t expire = found ? old.expire_ms : 0;
    int bad = found && arg_ld(old.data, old.len, &cur);
    if (found) store_value_release(&old);
    if (bad || arg_ld(x->argv[2], x->argvlen[2], &by)) {
        store_txn_abort(t);
        reply_err(x, "ERR value is not a valid float");
        return;
    }
    long double r = cur + by;
    if (isnan(r) || isinf(r)) {
        store_txn_abort(t);
        reply_err(x, "ERR increment would produce NaN or Infinity");
        return;
    }
    char num[5600];
    int n = fmt_ld(num, sizeof num, r);
    if (n < 0) {
        store_txn_abort(t);
        reply_err(x, "ERR value is not a valid float");
        return;
    }
    if (finish(x, t, put(t, x, 1, expire, num, (size_t)n)) == 0)
        resp_w_bulk(x->out, num, (size_t)n);
}

void cmd_msetnx(cmd_ctx *x) {
    if (x->argc % 2 == 0) {
        reply_errf(x, "ERR wrong number of arguments for 'msetnx' command");
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    for (int i = 1; i < x->argc; i += 2) {
        store_value v;
        if (db_get(x, t, x->argv[i], x->argvlen[i], &v) == 0) {
            store_value_release(&v);
            store_txn_abort(t);
            resp_w_int(x->out, 0);
            return;
        }
    }
    for (int i = 1; i < x->argc; i += 2) {
        int rc = put(t, x, i, 0, x->argv[i + 1], x->argvlen[i + 1]);
        if (rc) {
            fail(x, t, rc);
            return;
        }
    }
    if (finish(x, t, 0) == 0) resp_w_int(x->out, 1);
}

/* ---- Bits -------------------------------------------------------------------- */

static int bit_offset(cmd_ctx *x, int i, long long *off) {
    if (arg_ll(x->argv[i], x->argvlen[i], off) || *off < 0 || (*off >> 3) >= MAX_STRING) {
        reply_err(x, "ERR bit offset is not an integer or out of range");
        return -1;
    }
    return 0;
}

void cmd_setbit(cmd_ctx *x) {
    long long off, bit;
    if (bit_offset(x, 2, &off)) return;
    if (arg_ll(x->argv[3], x->argvlen[3], &bit) || (bit != 0 && bit != 1)) {
        reply_err(x, "ERR bit is not an integer or out of range");
        return;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    store_value old;
    int found = lookup(x, t, 1, &old);
    if (found < 0) {
        store_txn_abort(t);
        return;
    }
    size_t byte = (size_t)(off >> 3), oldlen = found ? old.len : 0;
    size_t nl = byte + 1 > oldlen ? byte + 1 : oldlen;
    char *nv = calloc(1, nl);
    int rc = nv ? 0 : KEEL_ENOMEM;
    int prev = 0;
    if (nv) {
        if (oldlen) memcpy(nv, old.data, oldlen);
        int shift = 7 - (int)(off & 7);
        prev = (nv[byte] >> shift) & 1;
        nv[byte] = (char)(((unsigned char)nv[byte] & ~(1u << shift)) | ((unsigned)bit << shift));
        rc = put(t, x, 1, found ? old.expire_ms : 0, nv, nl);
    }
    free(nv);
    if (found) store_value_release(&old);
    if (finish(x, t, rc) == 0) resp_w_int(x->out, prev);
}

void cmd_getbit(cmd_ctx *x) {
    long long off;
    if (bit_offset(x, 2, &off)) return;
    store_value v;
    int r = lookup(x, NULL, 1, &v);
    if (r < 0) return;
    int bit = 0;
    if (r && (size_t)(off >> 3) < v.len)
        bit = ((unsigned char)v.data[off >> 3] >> (7 - (off & 7))) & 1;
    if (r) store_value_release(&v);
    resp_w_int(x->out, bit);
}

/* Normalises [start, end] as redis' bitcount/bitpos do, over total units.
 * Returns 0 when the range is empty. */
static int norm_range(long long *start, long long *end, long long total) {
    if (*start < 0) *start += total;
    if (*end < 0) *end += total;
    if (*start < 0) *start = 0;
    if (*end < 0) *end = 0;
    if (*end >= total) *end = total - 1;
    return *start <= *end;
}

static int bit_at(const store_value *v, long long i) {
    return ((unsigned char)v->data[i >> 3] >> (7 - (i & 7))) & 1;
}

/* BITCOUNT's and BITPOS's optional BYTE|BIT unit at argv[i]: 0 with
 * *isbit set, -1 if it is neither. */
static int range_unit(cmd_ctx *x, int i, int *isbit) {
    *isbit = arg_is(x, i, "bit");
    return *isbit || arg_is(x, i, "byte") ? 0 : -1;
}

void cmd_bitcount(cmd_ctx *x) {
    store_value v;
    int r = lookup(x, NULL, 1, &v);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, 0);
        return;
    }
    long long start = 0, end = (long long)v.len - 1;
    int isbit = 0;
    if (x->argc == 4 || x->argc == 5) {
        if (arg_ll(x->argv[2], x->argvlen[2], &start) || arg_ll(x->argv[3], x->argvlen[3], &end)) {
            store_value_release(&v);
            reply_not_int(x);
            return;
        }
        if (x->argc == 5 && range_unit(x, 4, &isbit)) {
            store_value_release(&v);
            reply_syntax(x);
            return;
        }
    } else if (x->argc != 2) {
        store_value_release(&v);
        reply_syntax(x);
        return;
    }
    long long total = isbit ? (long long)v.len * 8 : (long long)v.len;
    long long n = 0;
    if (x->argc == 2 ? v.len > 0 : norm_range(&start, &end, total)) {
        long long lo = isbit ? start : start * 8, hi = isbit ? end : end * 8 + 7;
        for (long long i = lo; i <= hi;) {
            if ((i & 7) == 0 && i + 7 <= hi) {
                n += __builtin_popcount((unsigned char)v.data[i >> 3]);
                i += 8;
            } else {
                n += bit_at(&v, i++);
            }
        }
    }
    store_value_release(&v);
    resp_w_int(x->out, n);
}

void cmd_bitpos(cmd_ctx *x) {
    long long bit;
    if (arg_ll(x->argv[2], x->argvlen[2], &bit)) {
        reply_not_int(x);
        return;
    }
    if (bit != 0 && bit != 1) {
        reply_err(x, "ERR The bit argument must be 1 or 0.");
        return;
    }
    store_value v;
    int r = lookup(x, NULL, 1, &v);
    if (r <= 0) {
        if (r == 0) resp_w_int(x->out, bit ? -1 : 0);
        return;
    }
    long long len = (long long)v.len, start = 0, end = len - 1;
    int isbit = 0, end_given = 0;
    if (x->argc > 3) {
        if (arg_ll(x->argv[3], x->argvlen[3], &start) ||
            (x->argc > 4 && arg_ll(x->argv[4], x->argvlen[4], &end))) {
            store_value_release(&v);
            reply_not_int(x);
            return;
        }
        if ((x->argc == 6 && range_unit(x, 5, &isbit)) || x->argc > 6) {
            store_value_release(&v);
            reply_syntax(x);
            return;
        }
        long long total = isbit ? len * 8 : len;
        if (x->argc > 4)
            end_given = 1;
        else
            end = total - 1;
        norm_range(&start, &end, total);
    }
    long long pos = -1;
    if (start <= end) {
        long long lo = isbit ? start : start * 8, hi = isbit ? end : end * 8 + 7;
        for (long long i = lo; i <= hi; i++)
            if (bit_at(&v, i) == bit) {
                pos = i;
                break;
            }
        if (pos < 0 && bit == 0 && !end_given) pos = hi + 1;
    }
    store_value_release(&v);
    resp_w_int(x->out, pos);
}

/* LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: redis 7.0's
 * lcsCommand, the same table and the same backward walk, so the matches
 * come out in the same order. */
void cmd_lcs(cmd_ctx *x) {
    store_value va = {0}, vb = {0};
    int fa = db_get(x, NULL, x->argv[1], x->argvlen[1], &va) == 0;
    int fb = db_get(x, NULL, x->argv[2], x->argvlen[2], &vb) == 0;
    uint32_t *lcs = NULL;
    char *result = NULL;
    kbuf ranges;
    kbuf_init(&ranges);
    if ((fa && va.type != STORE_T_STRING) || (fb && vb.type != STORE_T_STRING)) {
        reply_err(x, "ERR The specified keys must contain string values");
        goto out;
    }
    long long minmatchlen = 0;
    int getlen = 0, getidx = 0, withmatchlen = 0;
    for (int j = 3; j < x->argc; j++) {
        int more = x->argc - 1 - j;
        if (arg_is(x, j, "idx"))
            getidx = 1;
        else if (arg_is(x, j, "len"))
            getlen = 1;
        else if (arg_is(x, j, "withmatchlen"))
            withmatchlen = 1;
        else if (arg_is(x, j, "minmatchlen") && more) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &minmatchlen)) {
                reply_not_int(x);
                goto out;
            }
            if (minmatchlen < 0) minmatchlen = 0;
            j++;
        } else {
            reply_syntax(x);
            goto out;
        }
    }
    if (getidx && getlen) {
        reply_err(x, "ERR If you want both the length and indexes, please just use IDX.");
        goto out;
    }
    const char *a = fa ? va.data : "", *b = fb ? vb.data : "";
    uint32_t alen = fa ? (uint32_t)va.len : 0, blen = fb ? (uint32_t)vb.len : 0;
    unsigned long long cells = (unsigned long long)(alen + 1) * (blen + 1);
    if (cells * sizeof(uint32_t) > (unsigned long long)MAX_STRING) {
        reply_err(x, "ERR Insufficient memory, transient memory for LCS exceeds "
                     "proto-max-bulk-len");
        goto out;
    }
    lcs = malloc((size_t)cells * sizeof *lcs);
    if (!lcs) {
        reply_err(x, "ERR Insufficient memory, failed allocating transient memory for LCS");
        goto out;
    }
#define LCS(A, B) lcs[(B) + (size_t)(A) * (blen + 1)]
    for (uint32_t i = 0; i <= alen; i++)
        for (uint32_t j = 0; j <= blen; j++) {
            if (i == 0 || j == 0)
                LCS(i, j) = 0;
            else if (a[i - 1] == b[j - 1])
                LCS(i, j) = LCS(i - 1, j - 1) + 1;
            else
                LCS(i, j) = LCS(i - 1, j) > LCS(i, j - 1) ? LCS(i - 1, j) : LCS(i, j - 1);
        }
    uint32_t idx = LCS(alen, blen), total = idx;
    uint32_t as = alen, ae = 0, bs = 0, be = 0, nranges = 0;
    int computelcs = getidx || !getlen;
    if (computelcs && !(result = malloc(idx ? idx : 1))) {
        reply_storage(x, KEEL_ENOMEM);
        goto out;
    }
    uint32_t i = alen, j = blen;
    while (computelcs && i > 0 && j > 0) {
        int emit = 0;
        if (a[i - 1] == b[j - 1]) {
            result[idx - 1] = a[i - 1];
            if (as == alen) {
                as = ae = i - 1;
                bs = be = j - 1;
            } else if (as == i && bs == j) {
                as--;
                bs--;
            } else {
                emit = 1;
            }
            if (as == 0 || bs == 0) emit = 1;
            idx--;
            i--;
            j--;
        } else {
            if (LCS(i - 1, j) > LCS(i, j - 1))
                i--;
            else
                j--;
            if (as != alen) emit = 1;
        }
        uint32_t mlen = ae - as + 1;
        if (emit) {
            if ((minmatchlen == 0 || mlen >= minmatchlen) && getidx) {
                resp_w_array(&ranges, (size_t)(2 + withmatchlen));
                resp_w_array(&ranges, 2);
                resp_w_int(&ranges, as);
                resp_w_int(&ranges, ae);
                resp_w_array(&ranges, 2);
                resp_w_int(&ranges, bs);
                resp_w_int(&ranges, be);
                if (withmatchlen) resp_w_int(&ranges, mlen);
                nranges++;
            }
            as = alen;
        }
    }
#undef LCS
    if (getidx) {
        resp_w_map(x->out, x->proto, 2);
        resp_w_bulkstr(x->out, "matches");
        resp_w_array(x->out, nranges);
        kbuf_append(x->out, ranges.p, ranges.len);
        resp_w_bulkstr(x->out, "len");
        resp_w_int(x->out, total);
    } else if (getlen) {
        resp_w_int(x->out, idx);
    } else {
        resp_w_bulk(x->out, result, total);
    }
out:
    free(lcs);
    free(result);
    kbuf_close(&ranges);
    if (fa) store_value_release(&va);
    if (fb) store_value_release(&vb);
}
