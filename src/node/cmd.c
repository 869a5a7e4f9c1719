/* cmd.c - command lookup, dispatch and shared reply helpers.
 *
 * Dispatch mirrors redis-server's processCommand so that error replies match
 * it byte for byte: unknown command, unknown subcommand, arity, NOAUTH, then
 * cluster routing (CROSSSLOT, then -MOVED / -CLUSTERDOWN), then the handler.
 * Lookup is a hash of the lower-cased name, built once from cmd_table.c.
 */
#include "node/cmd.h"
#include "core/clock.h"
#include "core/crc16.h"
#include "core/err.h"
#include "core/log.h"
#include "node/access.h"
#include "node/latency.h"
#include "node/slowlog.h"
#include "node/cmdstats.h"
#include "node/introspect.h"
#include "node/blocking.h"
#include "node/move.h"
#include "node/multi.h"
#include "node/rep_uv.h"
#include "node/script.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern const cmd_def cmd_table[];
extern const size_t cmd_table_len;

#define CMD_HASH_SIZE 256
static const cmd_def *cmd_hash[CMD_HASH_SIZE];

static unsigned name_hash(const char *s, size_t n) {
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)tolower((unsigned char)s[i])) * 16777619u;
    return h;
}

__attribute__((constructor)) static void cmd_hash_build(void) {
    for (size_t i = 0; i < cmd_table_len; i++) {
        const cmd_def *d = &cmd_table[i];
        unsigned h = name_hash(d->name, strlen(d->name)) & (CMD_HASH_SIZE - 1);
        while (cmd_hash[h])
            h = (h + 1) & (CMD_HASH_SIZE - 1);
        cmd_hash[h] = d;
    }
}

const cmd_def *cmd_lookup(const char *name, size_t len) {
    unsigned h = name_hash(name, len) & (CMD_HASH_SIZE - 1);
    while (cmd_hash[h]) {
        const cmd_def *d = cmd_hash[h];
        if (strlen(d->name) == len && strncasecmp(d->name, name, len) == 0) return d;
        h = (h + 1) & (CMD_HASH_SIZE - 1);
    }
    return NULL;
}

const cmd_def *cmd_lookup_sub(const cmd_def *parent, const char *name, size_t len) {
    for (const cmd_def *d = parent->subs; d && d->name; d++)
        if (strlen(d->name) == len && strncasecmp(d->name, name, len) == 0) return d;
    return NULL;
}

size_t cmd_count(void) {
    return cmd_table_len;
}
const cmd_def *cmd_at(size_t i) {
    return i < cmd_table_len ? &cmd_table[i] : NULL;
}

/* ---- Replies ------------------------------------------------------------- */

void reply_ok(cmd_ctx *x) {
    resp_w_simple(x->out, "OK");
}
void reply_err(cmd_ctx *x, const char *msg) {
    resp_w_error(x->out, msg);
}
void reply_errf(cmd_ctx *x, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp_w_error(x->out, msg);
}
void reply_syntax(cmd_ctx *x) {
    reply_err(x, "ERR syntax error");
}
void reply_not_int(cmd_ctx *x) {
    reply_err(x, "ERR value is not an integer or out of range");
}
void reply_wrongtype(cmd_ctx *x) {
    reply_err(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

/* redis' fullname: "get", or "cluster|keyslot" for a subcommand. */
static void full_name(const cmd_def *parent, const cmd_def *d, char *out, size_t cap) {
    if (parent)
        snprintf(out, cap, "%s|%s", parent->name, d->name);
    else
        snprintf(out, cap, "%s", d->name);
}

void reply_arity(cmd_ctx *x, const cmd_def *d) {
    reply_errf(x, "ERR wrong number of arguments for '%s' command", d->name);
}

int arg_ll(const char *s, size_t len, long long *out) {
    if (len == 0 || len > 20) return KEEL_EINVAL;
    size_t i = 0;
    int neg = 0;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (s[0] == '-') {
        neg = 1;
        if (++i == len) return KEEL_EINVAL;
    }
    if (s[i] < '1' || s[i] > '9') return KEEL_EINVAL;
    unsigned long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return KEEL_EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (~0ull - d) / 10) return KEEL_EINVAL;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1) return KEEL_EINVAL;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > LLONG_MAX) return KEEL_EINVAL;
        *out = (long long)v;
    }
    return 0;
}

int arg_is(const cmd_ctx *x, int i, const char *word) {
    return i < x->argc && strcasecmp(x->argv[i], word) == 0;
}

int arg_mpop(cmd_ctx *x, int at, const char *w1, const char *w2, int *is_w1, int *nkeys,
             long long *count) {
    long long nk;
    if (arg_ll(x->argv[at], x->argvlen[at], &nk) || nk <= 0) {
        reply_err(x, "ERR numkeys should be greater than 0");
        return -1;
    }
    if (nk > x->argc - at - 2) { /* the word's index, at + 1 + numkeys, past the end */
        reply_syntax(x);
        return -1;
    }
    int w = at + 1 + (int)nk;
    *is_w1 = arg_is(x, w, w1);
    if (!*is_w1 && !arg_is(x, w, w2)) {
        reply_syntax(x);
        return -1;
    }
    *count = -1;
    for (int j = w + 1; j < x->argc; j++) { /* one COUNT, checked as it comes */
        if (*count == -1 && arg_is(x, j, "count") && j + 1 < x->argc) {
            j++;
            if (arg_ll(x->argv[j], x->argvlen[j], count) || *count <= 0) {
                reply_err(x, "ERR count should be greater than 0");
                return -1;
            }
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    if (*count == -1) *count = 1;
    *nkeys = (int)nk;
    return 0;
}

/* ---- Dispatch ------------------------------------------------------------ */

static void reply_unknown(cmd_ctx *x) {
    char args[160] = "";
    size_t n = 0;
    for (int i = 1; i < x->argc && n < 128; i++) {
        int w = snprintf(args + n, sizeof args - n, "'%.*s' ", (int)(128 - n), x->argv[i]);
        if (w < 0) break;
        n += (size_t)w;
        if (n >= sizeof args) n = sizeof args - 1;
    }
    reply_errf(x, "ERR unknown command '%.128s', with args beginning with: %s", x->argv[0], args);
}

/* The slot of keys named by a getkeys function (cmd_def.getkeys). */
static int keys_slot_fn(cmd_ctx *x, const cmd_def *d, int *has_keys) {
    int *pos = malloc((size_t)x->argc * sizeof *pos);
    if (!pos) {
        reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
        return -1;
    }
    int n = d->getkeys(x->argc, x->argv, x->argvlen, pos); /* < 0: the handler's error */
    for (int i = 0; i < n; i++) {
        unsigned slot = keel_key_slot(x->argv[pos[i]], x->argvlen[pos[i]]);
        if (*has_keys && slot != x->slot) {
            free(pos);
            reply_err(x, "CROSSSLOT Keys in request don't hash to the same slot");
            return -1;
        }
        x->slot = slot;
        *has_keys = 1;
    }
    free(pos);
    return 0;
}

int cmd_keys_slot(cmd_ctx *x, const cmd_def *d, int *has_keys) {
    *has_keys = 0;
    if (d->getkeys) return keys_slot_fn(x, d, has_keys);
    int first = d->first_key, last, step;
    if (d->keynum > 0) { /* a bad count is the handler's error to reply */
        long long nk;
        if (d->keynum >= x->argc || arg_ll(x->argv[d->keynum], x->argvlen[d->keynum], &nk) ||
            nk <= 0 || nk > x->argc - d->keynum - 1)
            return 0;
        first = d->keynum + 1;
        last = d->keynum + (int)nk;
        step = 1;
    } else {
        if (first <= 0 || first >= x->argc) return 0;
        last = d->last_key < 0 ? x->argc + d->last_key : d->last_key;
        step = d->key_step > 0 ? d->key_step : 1;
    }
    if (last >= x->argc) last = x->argc - 1;
    for (int i = first; i <= last; i += step) {
        unsigned slot = keel_key_slot(x->argv[i], x->argvlen[i]);
        if (*has_keys && slot != x->slot) {
            reply_err(x, "CROSSSLOT Keys in request don't hash to the same slot");
            return -1;
        }
        x->slot = slot;
        *has_keys = 1;
    }
    return 0;
}

int cmd_route(cmd_ctx *x, int *held) {
    route r;
    ptable_route(x->srv->pt, x->slot, &r);
    x->partition = r.partition;
    if (x->srv->rep && (r.kind == ROUTE_SERVE || r.kind == ROUTE_MOVED)) {
        /* RF > 1 (node/rep_uv.h): the leader's lease and ISR; reads at a
         * follower for READONLY connections. RF 1 passes straight on. */
        node_conn *nc = x->c->user;
        int follower_read,
            v = node_rep_route(x->srv->rep, r.partition, x->slot, r.kind == ROUTE_SERVE, x->writes,
                               nc && nc->readonly, x->out, &follower_read);
        if (v == NODE_REP_SERVE) return 1;
        if (v == NODE_REP_REPLIED) return 0;
    }
    if (r.kind == ROUTE_SERVE) return 1;
    if (r.kind == ROUTE_HOLD) {
        *held = move_hold(x->srv->mv, x->c, r.partition);
        return 0;
    }
    if (r.kind == ROUTE_MOVED)
        reply_errf(x, "MOVED %u %s:%d", x->slot, r.owner->host, r.owner->port);
    else
        reply_err(x, "CLUSTERDOWN Hash slot not served");
    return 0;
}

/* One request: *dp is the command (or subcommand) found, NULL if unknown. */
static int dispatch_one(server *srv, client *c, int argc, char **argv, const size_t *argvlen,
                        const cmd_def **dp, const cmd_def **parentp) {
    cmd_ctx x = {.srv = srv,
                 .c = c,
                 .argc = argc,
                 .argv = argv,
                 .argvlen = argvlen,
                 .out = &c->out,
                 .proto = c->proto};
    x.now_ms = c->last_ms ? c->last_ms : keel_wall_ms();
    const cmd_def *parent = NULL, *d = cmd_lookup(argv[0], argvlen[0]);
    if (!d && argvlen[0] > 5 && strncasecmp(argv[0], "keel.", 5) == 0) {
        if (script_busy(srv)) { /* no move step inside a script's turn */
            script_reply_busy(&x);
            return 0;
        }
        return move_dispatch(srv->mv, c, argc, argv, argvlen); /* cluster peers only */
    }
    if (!d) {
        reply_unknown(&x);
        multi_flag(c);
        return 0;
    }
    if (d->subs && argc >= 2) {
        const cmd_def *sub = cmd_lookup_sub(d, argv[1], argvlen[1]);
        if (!sub) {
            char up[32];
            size_t i = 0;
            for (; d->name[i] && i < sizeof up - 1; i++)
                up[i] = (char)toupper(d->name[i]);
            up[i] = 0;
            reply_errf(&x, "ERR unknown subcommand '%.128s'. Try %s HELP.", argv[1], up);
            multi_flag(c);
            return 0;
        }
        parent = d;
        d = sub;
    }
    *dp = d;
    *parentp = parent;
    c->cmd_name = parent ? parent->name : d->name;
    c->cmd_sub = parent ? d->name : NULL;
    if ((d->arity > 0 && argc != d->arity) || argc < (d->arity < 0 ? -d->arity : d->arity)) {
        char name[80];
        full_name(parent, d, name, sizeof name);
        char why[128];
        snprintf(why, sizeof why, "wrong number of arguments for '%s' command", name);
        if (d->fn == cmd_exec && multi_active(c))
            multi_exec_abort(&x, why);
        else
            reply_errf(&x, "ERR %s", why);
        multi_flag(c);
        return 0;
    }
    if (!c->authed && !(d->flags & CMD_NOAUTH)) {
        reply_err(&x, "NOAUTH Authentication required.");
        multi_flag(c);
        return 0;
    }
    if (script_busy(srv) && !script_allowed_busy(parent, d)) { /* a script past its limit */
        if (d->fn == cmd_exec && multi_active(c)) {            /* as redis' rejectCommand */
            multi_exec_abort(&x, script_busy_msg());
            return 0;
        }
        script_reply_busy(&x);
        multi_flag(c);
        return 0;
    }
    int in_multi = multi_active(c);
    if (in_multi && d->fn == cmd_exec) {
        int rc = multi_exec(&x);
        if (rc == 0) monitor_feed(&x, d);
        blocking_serve(srv);
        return rc;
    }
    if (in_multi && (d->flags & CMD_NOMULTI)) { /* SAVE, SHUTDOWN: EXEC then fails */
        reply_err(&x, "ERR Command not allowed inside a transaction");
        multi_flag(c);
        return 0;
    }
    int has_keys, held = 0;
    if (cmd_keys_slot(&x, d, &has_keys)) {
        multi_flag(c);
        return 0;
    }
    x.writes = (d->flags & CMD_WRITE) || d->cls == CLASS_WRITE;
    if (has_keys && !cmd_route(&x, &held)) {
        if (!held) multi_flag(c);
        return held;
    }
    if (in_multi && !(d->flags & CMD_NOQUEUE)) {
        multi_queue(&x, d, has_keys);
        return 0;
    }
    x.can_block = 1;
    cmd_call(&x, d, has_keys);
    blocking_serve(srv); /* the keys this request made ready (blocking.h) */
    return x.hold;
}

/* Wraps dispatch_one with what applies to every request: CLIENT REPLY
 * OFF/SKIP drop the reply (a held request keeps its SKIP for when it runs),
 * and an error replied before any handler ran counts as rejected (the
 * handlers' errors are counted by cmd_call). */
int cmd_dispatch(server *srv, client *c, int argc, char **argv, const size_t *argvlen) {
    size_t before = c->out.len;
    uint64_t calls = srv->handler_calls;
    const cmd_def *d = NULL, *parent = NULL;
    /* A replication peer's connection after KEEL.REP.ONEWAY (move_uv.c):
     * nothing may answer its messages, not even an error (-BUSY during a
     * script, say): the sender queued no reply callback, and hiredis drops
     * a link on a reply it did not expect. A message refused that way is
     * lost, as it was when the reply went to the sender's empty callback;
     * the engines resend or resubscribe. Its turn end still runs as for a
     * reply (rserver_touch): that is where a follower's ACK leaves. */
    const node_conn *nc = c->user;
    int oneway = nc && nc->rep_oneway;
    int rc = dispatch_one(srv, c, argc, argv, argvlen, &d, &parent);
    if (oneway) {
        c->out.len = before;
        rserver_touch(c);
    }
    if (rc == RSERVER_HOLD) return rc;
    if (srv->handler_calls == calls && c->out.len > before && c->out.p[before] == '-') {
        cmdstats_error(srv, c->out.p + before, c->out.len - before);
        if (d) cmdstats_rejected(srv, d);
    }
    /* As redis' resetClient: SKIP silences the next request (ON clears it). */
    if (c->reply_off || c->reply_skip || c->reply_skip_next) c->out.len = before;
    c->reply_skip = c->reply_skip_next;
    c->reply_skip_next = 0;
    return rc;
}

void cmd_call(cmd_ctx *x, const cmd_def *d, int has_keys) {
    server *srv = x->srv;
    size_t before = x->out->len;
    uint64_t t0 = keel_mono_us();
    srv->handler_calls++;
    int feed_first = monitor_feed_first(d); /* introspect.h */
    if (feed_first) monitor_feed(x, d);
    d->fn(x);
    if (x->hold) return; /* blocked: counted once, by the call that replies (blocking.h) */
    uint64_t us = keel_mono_us() - t0;
    int failed = x->out->len > before && x->out->p[before] == '-';
    cmdstats_call(srv, d, us, failed);
    if (failed) cmdstats_error(srv, x->out->p + before, x->out->len - before);
    if (!feed_first) monitor_feed(x, d);
    if (has_keys) access_touch_cmd(x, d); /* access.h: OBJECT IDLETIME/FREQ */
    slowlog_record(x, d, us);             /* slowlog.h */
    latency_record(x, d, us);             /* latency.h */
    metrics_op(srv->mx, d->cls, has_keys ? (int)x->partition : -1, us);
    if (srv->epoch_log && has_keys && (d->flags & CMD_WRITE))
        fprintf(srv->epoch_log, "%lld %u %llu %s\n", (long long)keel_wall_us(), x->partition,
                (unsigned long long)ptable_map(srv->pt)->epoch[x->partition], srv->cfg.id);
}
