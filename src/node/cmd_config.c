/* cmd_config.c - CONFIG GET / SET / RESETSTAT / REWRITE / HELP over a table
 * of redis 7.0 parameters.
 *
 * Contract. Every parameter has a name (and maybe an alias: both are listed by
 * CONFIG GET, as redis does), a type that validates and normalises a value
 * with redis' own error texts, and one of four kinds:
 *
 *   LIVE       keel applies it (maxclients, loglevel, busy-reply-threshold,
 *              slowlog-*);
 *   NOOP       accepted and reported, no effect on keel: redis-internal knobs
 *              (encoding thresholds, eviction, lazyfree, hz...) that keel's
 *              storage has no counterpart for; docs/compatibility.md lists them;
 *   FIXED      reported; CONFIG SET accepts only the current value, else a
 *              clear error naming the node flag (port, appendfsync...);
 *   IMMUTABLE  reported; CONFIG SET fails as redis' immutable configs do.
 *
 * HIDDEN parameters are only listed when named exactly (key-load-delay).
 * CONFIG SET with several pairs is atomic: every pair is validated before
 * any is applied, so one bad pair changes nothing, and errors follow
 * redis' configSetCommand (unknown, immutable, duplicate, then the first
 * invalid value). Values live in the server (s->params), created on first
 * use.
 */
#include "node/cmd.h"
#include "core/log.h"
#include "node/cmdstats.h"
#include "node/introspect.h"
#include "node/script.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { T_BOOL, T_INT, T_MEM, T_PCT, T_ENUM, T_STR, T_SAVE } ptype;
typedef enum { K_NOOP, K_LIVE, K_FIXED, K_IMMUTABLE } pkind;

typedef struct param {
    const char *name, *alias;
    ptype type;
    pkind kind;
    int hidden;
    long long min, max;
    const char *enums; /* T_ENUM: "a,b,c" */
    const char *def;   /* default; NULL: read from the node's configuration */
    const char *flag;  /* K_FIXED: the node flag that sets it */
} param;

#define LL_MAX 9223372036854775807LL
#define INTMAX 2147483647LL
/* clang-format off */
static const param params[] = {
    /* kept from the node's configuration */
    {"port", NULL, T_INT, K_FIXED, 0, 0, 65535, NULL, NULL, "--port"},
    {"bind", NULL, T_STR, K_FIXED, 0, 0, 0, NULL, NULL, "--bind"},
    {"dir", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, NULL, NULL},
    {"maxclients", NULL, T_INT, K_LIVE, 0, 1, INTMAX, NULL, NULL, NULL},
    {"proto-max-bulk-len", NULL, T_MEM, K_FIXED, 0, 1048576, LL_MAX, NULL, NULL, "--max-bulk"},
    {"appendfsync", NULL, T_ENUM, K_FIXED, 0, 0, 0, "always,everysec,no", NULL, "--fsync"},
    {"loglevel", NULL, T_ENUM, K_LIVE, 0, 0, 0, "debug,verbose,notice,warning", "notice", NULL},
    {"requirepass", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, NULL, NULL},
    /* the script time limit (script.h) */
    {"busy-reply-threshold", "lua-time-limit", T_INT, K_LIVE, 0, 0, LL_MAX, NULL, NULL, NULL},
    /* what keel is, and cannot change at runtime */
    {"cluster-enabled", NULL, T_BOOL, K_IMMUTABLE, 0, 0, 0, NULL, "yes", NULL},
    {"databases", NULL, T_INT, K_IMMUTABLE, 0, 1, INTMAX, NULL, "1", NULL},
    {"daemonize", NULL, T_BOOL, K_IMMUTABLE, 0, 0, 0, NULL, "no", NULL},
    {"supervised", NULL, T_ENUM, K_IMMUTABLE, 0, 0, 0, "upstart,systemd,auto,no", "no", NULL},
    {"io-threads", NULL, T_INT, K_IMMUTABLE, 0, 1, 128, NULL, "1", NULL},
    {"tcp-backlog", NULL, T_INT, K_IMMUTABLE, 0, 0, INTMAX, NULL, "511", NULL},
    {"logfile", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, "", NULL},
    {"pidfile", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, "", NULL},
    {"dbfilename", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, "dump.rdb", NULL},
    {"unixsocket", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, "", NULL},
    {"cluster-config-file", NULL, T_STR, K_IMMUTABLE, 0, 0, 0, NULL, "nodes.conf", NULL},
    {"cluster-port", NULL, T_INT, K_IMMUTABLE, 0, 0, 65535, NULL, "0", NULL},
    {"enable-debug-command", NULL, T_ENUM, K_IMMUTABLE, 0, 0, 0, "no,yes,local", "no", NULL},
    {"enable-module-command", NULL, T_ENUM, K_IMMUTABLE, 0, 0, 0, "no,yes,local", "no", NULL},
    {"enable-protected-configs", NULL, T_ENUM, K_IMMUTABLE, 0, 0, 0, "no,yes,local", "no", NULL},
    {"replicaof", "slaveof", T_STR, K_IMMUTABLE, 0, 0, 0, NULL, "", NULL},
    /* durability is keel's WAL (--fsync), not AOF or RDB */
    {"appendonly", NULL, T_BOOL, K_FIXED, 0, 0, 0, NULL, "no", "--fsync"},
    {"cluster-require-full-coverage", NULL, T_BOOL, K_FIXED, 0, 0, 0, NULL, "yes", NULL},
    {"cluster-allow-reads-when-down", NULL, T_BOOL, K_FIXED, 0, 0, 0, NULL, "no", NULL},
    {"notify-keyspace-events", NULL, T_STR, K_FIXED, 0, 0, 0, NULL, "", NULL},
    {"save", NULL, T_SAVE, K_NOOP, 0, 0, 0, NULL, "", NULL},
    /* accepted, no effect on keel (see the header comment) */
    {"maxmemory", NULL, T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "0", NULL},
    {"maxmemory-policy", NULL, T_ENUM, K_NOOP, 0, 0, 0,
     "volatile-lru,volatile-lfu,volatile-random,volatile-ttl,allkeys-lru,allkeys-lfu,"
     "allkeys-random,noeviction", "noeviction", NULL},
    {"maxmemory-samples", NULL, T_INT, K_NOOP, 0, 1, 255, NULL, "5", NULL},
    {"maxmemory-eviction-tenacity", NULL, T_INT, K_NOOP, 0, 0, 100, NULL, "10", NULL},
    {"maxmemory-clients", NULL, T_PCT, K_NOOP, 0, 0, LL_MAX, NULL, "0", NULL},
    {"client-query-buffer-limit", NULL, T_MEM, K_NOOP, 0, 1048576, LL_MAX, NULL, "1073741824", NULL},
    {"timeout", NULL, T_INT, K_NOOP, 0, 0, INTMAX, NULL, "0", NULL},
    {"tcp-keepalive", NULL, T_INT, K_NOOP, 0, 0, INTMAX, NULL, "300", NULL},
    {"hz", NULL, T_INT, K_NOOP, 0, 0, INTMAX, NULL, "10", NULL},
    {"dynamic-hz", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "yes", NULL},
    {"active-expire-effort", NULL, T_INT, K_NOOP, 0, 1, 10, NULL, "1", NULL},
    {"activerehashing", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "yes", NULL},
    {"activedefrag", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "no", NULL},
    {"lazyfree-lazy-eviction", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "no", NULL},
    {"lazyfree-lazy-expire", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "no", NULL},
    {"lazyfree-lazy-server-del", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "no", NULL},
    {"lazyfree-lazy-user-del", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "no", NULL},
    {"lazyfree-lazy-user-flush", NULL, T_BOOL, K_NOOP, 0, 0, 0, NULL, "no", NULL},
    {"lfu-log-factor", NULL, T_INT, K_NOOP, 0, 0, INTMAX, NULL, "10", NULL},
    {"lfu-decay-time", NULL, T_INT, K_NOOP, 0, 0, INTMAX, NULL, "1", NULL},
    {"repl-backlog-size", NULL, T_MEM, K_NOOP, 0, 1, LL_MAX, NULL, "1048576", NULL},
    {"replica-read-only", "slave-read-only", T_BOOL, K_NOOP, 0, 0, 0, NULL, "yes", NULL},
    {"hash-max-listpack-entries", "hash-max-ziplist-entries", T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "512", NULL},
    {"hash-max-listpack-value", "hash-max-ziplist-value", T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "64", NULL},
    {"set-max-intset-entries", NULL, T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "512", NULL},
    {"zset-max-listpack-entries", "zset-max-ziplist-entries", T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "128", NULL},
    {"zset-max-listpack-value", "zset-max-ziplist-value", T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "64", NULL},
    {"list-max-listpack-size", "list-max-ziplist-size", T_INT, K_NOOP, 0, -INTMAX - 1, INTMAX, NULL, "-2", NULL},
    {"list-compress-depth", NULL, T_INT, K_NOOP, 0, 0, INTMAX, NULL, "0", NULL},
    {"stream-node-max-bytes", NULL, T_MEM, K_NOOP, 0, 0, LL_MAX, NULL, "4096", NULL},
    {"stream-node-max-entries", NULL, T_INT, K_NOOP, 0, 0, LL_MAX, NULL, "100", NULL},
    /* RESTORE always checks the whole payload (cmd_dump.c), whatever this says */
    {"slowlog-log-slower-than", NULL, T_INT, K_LIVE, 0, -1, LL_MAX, NULL, "10000", NULL},
    {"latency-monitor-threshold", NULL, T_INT, K_LIVE, 0, 0, LL_MAX, NULL, "0", NULL},
    {"slowlog-max-len", NULL, T_INT, K_LIVE, 0, 0, LL_MAX, NULL, "128", NULL},
    {"sanitize-dump-payload", NULL, T_ENUM, K_NOOP, 0, 0, 0, "no,yes,clients", "no", NULL},
    {"key-load-delay", NULL, T_INT, K_NOOP, 1, -INTMAX - 1, INTMAX, NULL, "0", NULL},
};
/* clang-format on */
#define NPARAMS (sizeof params / sizeof *params)
#define VAL_MAX 512

struct param_state {
    char val[NPARAMS][VAL_MAX];
};

static void live_value(const server *s, const param *p, char *out) {
    const char *n = p->name;
    if (!strcmp(n, "port"))
        snprintf(out, VAL_MAX, "%d", s->cfg.port);
    else if (!strcmp(n, "bind"))
        snprintf(out, VAL_MAX, "%s", s->cfg.bind);
    else if (!strcmp(n, "dir"))
        snprintf(out, VAL_MAX, "%s", s->cfg.dir);
    else if (!strcmp(n, "maxclients"))
        snprintf(out, VAL_MAX, "%d", s->cfg.maxclients);
    else if (!strcmp(n, "proto-max-bulk-len"))
        snprintf(out, VAL_MAX, "%zu", s->cfg.limits.max_bulk);
    else if (!strcmp(n, "appendfsync"))
        snprintf(out, VAL_MAX, "%s", store_fsync_name(s->cfg.fsync));
    else if (!strcmp(n, "requirepass"))
        snprintf(out, VAL_MAX, "%s", s->cfg.requirepass);
    else if (!script_config_get(s, n, out, VAL_MAX)) /* busy-reply-threshold */
        out[0] = 0;
}

static struct param_state *state(server *s) {
    if (s->params) return s->params;
    struct param_state *ps = calloc(1, sizeof *ps);
    if (!ps) return NULL;
    for (size_t i = 0; i < NPARAMS; i++) {
        if (params[i].def)
            snprintf(ps->val[i], VAL_MAX, "%s", params[i].def);
        else
            live_value(s, &params[i], ps->val[i]);
    }
    s->params = ps;
    return ps;
}

void config_params_free(struct param_state *ps) {
    free(ps);
}

/* ---- Parsing, with redis' error texts ------------------------------------- */

static int parse_ll(const char *v, long long *out) {
    return arg_ll(v, strlen(v), out) ? -1 : 0;
}

/* redis' memtoull: digits then b, k, kb, m, mb, g, gb (any case). */
static int parse_mem(const char *v, long long *out) {
    const char *u = v;
    while (*u && (isdigit((unsigned char)*u) || *u == '-'))
        u++;
    long long mul = 1;
    if (!*u || !strcasecmp(u, "b"))
        mul = 1;
    else if (!strcasecmp(u, "k"))
        mul = 1000;
    else if (!strcasecmp(u, "kb"))
        mul = 1024;
    else if (!strcasecmp(u, "m"))
        mul = 1000 * 1000;
    else if (!strcasecmp(u, "mb"))
        mul = 1024 * 1024;
    else if (!strcasecmp(u, "g"))
        mul = 1000LL * 1000 * 1000;
    else if (!strcasecmp(u, "gb"))
        mul = 1024LL * 1024 * 1024;
    else
        return -1;
    long long n;
    if (arg_ll(v, (size_t)(u - v), &n) || n < 0 || n > LL_MAX / mul) return -1;
    *out = n * mul;
    return 0;
}

/* Validates v for p; writes the normalised value to out (VAL_MAX), or
 * returns an error text (redis' wording). */
static const char *normalise(const param *p, const char *v, char *out) {
    long long n;
    switch (p->type) {
    case T_BOOL:
        if (strcasecmp(v, "yes") && strcasecmp(v, "no")) return "argument must be 'yes' or 'no'";
        snprintf(out, VAL_MAX, "%s", strcasecmp(v, "yes") ? "no" : "yes");
        return NULL;
    case T_INT:
        if (parse_ll(v, &n)) return "argument couldn't be parsed into an integer";
        break;
    case T_MEM:
        if (parse_mem(v, &n)) return "argument must be a memory value";
        break;
    case T_PCT: {
        size_t len = strlen(v);
        if (len > 1 && v[len - 1] == '%' && !arg_ll(v, len - 1, &n) && n >= 0) {
            if (n > 100) return "percentage argument must be less or equal to 100";
            snprintf(out, VAL_MAX, "%lld%%", n);
            return NULL;
        }
        if (parse_mem(v, &n)) return "argument must be a memory or percent value";
        break;
    }
    case T_ENUM: {
        const char *e = p->enums;
        while (*e) {
            size_t len = strcspn(e, ",");
            if (strlen(v) == len && !strncasecmp(v, e, len)) {
                snprintf(out, VAL_MAX, "%.*s", (int)len, e);
                return NULL;
            }
            e += len + (e[len] == ',');
        }
        static char msg[512];
        snprintf(msg, sizeof msg, "argument(s) must be one of the following: ");
        size_t m = strlen(msg);
        for (e = p->enums; *e && m < sizeof msg - 3; e++)
            m += (size_t)snprintf(msg + m, sizeof msg - m, *e == ',' ? ", " : "%c", *e);
        return msg;
    }
    case T_STR:
        if (strlen(v) >= VAL_MAX) return "argument is too long";
        snprintf(out, VAL_MAX, "%s", v);
        return NULL;
    case T_SAVE: { /* "" or pairs of "<seconds> <changes>" */
        char buf[VAL_MAX], *tok, *save = NULL;
        if (strlen(v) >= VAL_MAX) return "Invalid save parameters";
        snprintf(buf, sizeof buf, "%s", v);
        size_t k = 0, w = 0;
        out[0] = 0;
        for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save), k++) {
            if (parse_ll(tok, &n) || n < 0) return "Invalid save parameters";
            w += (size_t)snprintf(out + w, VAL_MAX - w, "%s%lld", k ? " " : "", n);
        }
        if (k % 2) return "Invalid save parameters";
        return NULL;
    }
    }
    if (n < p->min || n > p->max) {
        static char msg[128];
        snprintf(msg, sizeof msg, "argument must be between %lld and %lld inclusive", p->min,
                 p->max);
        return msg;
    }
    snprintf(out, VAL_MAX, "%lld", n);
    return NULL;
}

static const param *lookup(const char *name, size_t *idx) {
    for (size_t i = 0; i < NPARAMS; i++)
        if (!strcasecmp(name, params[i].name) ||
            (params[i].alias && !strcasecmp(name, params[i].alias))) {
            *idx = i;
            return &params[i];
        }
    return NULL;
}

const char *config_value(server *s, const char *name) {
    struct param_state *ps = state(s);
    size_t i;
    if (!ps || !lookup(name, &i)) return NULL;
    return ps->val[i];
}

/* Applies a LIVE parameter's validated value. Returns 0, or -1 if it could
 * not be applied (the script engine could not start: out of memory). */
static int apply_live(server *s, const param *p, const char *v) {
    int bad = 0;
    if (script_config_set(s, p->name, v, &bad)) return bad ? -1 : 0;
    if (!strcmp(p->name, "maxclients")) {
        s->cfg.maxclients = atoi(v);
        rserver_set_maxclients(s->rs, s->cfg.maxclients);
    } else if (!strcmp(p->name, "loglevel")) {
        int lvl;
        const char *kl = !strcmp(v, "warning") ? "warn" : !strcmp(v, "notice") ? "info" : "debug";
        if (!keel_log_parse_level(kl, &lvl)) keel_log_set_level(lvl);
    }
    return 0;
}

/* ---- Commands ------------------------------------------------------------ */

void cmd_config(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'config' command");
}

void cmd_config_set(cmd_ctx *x) {
    struct param_state *ps = state(x->srv);
    if (!ps) {
        reply_err(x, "ERR out of memory");
        return;
    }
    if (x->argc % 2 != 0) { /* arity -4 is checked by cmd_dispatch */
        reply_syntax(x);
        return;
    }
    int npairs = (x->argc - 2) / 2;
    size_t idx[64];
    if (npairs > 64) {
        reply_err(x, "ERR CONFIG SET: too many parameters at once (at most 64)");
        return;
    }
    const char *unknown = NULL, *errstr = NULL, *errarg = NULL;
    for (int i = 0; i < npairs; i++) {
        const char *name = x->argv[2 + 2 * i];
        const param *p = lookup(name, &idx[i]);
        if (!p) {
            if (!unknown) unknown = name;
            continue;
        }
        if (unknown || errstr) continue;
        if (p->kind == K_IMMUTABLE) {
            errstr = "can't set immutable config", errarg = name;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (idx[j] == idx[i]) errstr = "duplicate parameter", errarg = name;
    }
    if (unknown) {
        reply_errf(x, "ERR Unknown option or number of arguments for CONFIG SET - '%s'", unknown);
        return;
    }
    static char newv[64][VAL_MAX];
    for (int i = 0; i < npairs && !errstr; i++) {
        const param *p = &params[idx[i]];
        if ((errstr = normalise(p, x->argv[3 + 2 * i], newv[i]))) {
            errarg = p->name;
            break;
        }
        if (p->kind == K_FIXED && strcmp(newv[i], ps->val[idx[i]]) != 0) {
            static char msg[200];
            if (p->flag)
                snprintf(msg, sizeof msg, "keel cannot change %s at runtime (set %s at start)",
                         p->name, p->flag);
            else
                snprintf(msg, sizeof msg, "keel supports only %s '%s'", p->name, ps->val[idx[i]]);
            errstr = msg, errarg = p->name;
        }
    }
    if (errstr) {
        reply_errf(x, "ERR CONFIG SET failed (possibly related to argument '%s') - %s", errarg,
                   errstr);
        return;
    }
    for (int i = 0; i < npairs; i++) { /* all valid: apply them together */
        if (params[idx[i]].kind == K_LIVE && apply_live(x->srv, &params[idx[i]], newv[i])) {
            /* only an allocation failure gets here; earlier pairs stay applied */
            reply_errf(x, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
                       params[idx[i]].name, "out of memory");
            return;
        }
        memcpy(ps->val[idx[i]], newv[i], VAL_MAX);
    }
    x->srv->config_gen++;
    reply_ok(x);
}

static int has_glob(const char *s) {
    return strpbrk(s, "[*?") != NULL;
}

void cmd_config_get(cmd_ctx *x) {
    struct param_state *ps = state(x->srv);
    if (!ps) {
        reply_err(x, "ERR out of memory");
        return;
    }
    /* A name is listed once: hit[i] bit 1 = name, bit 2 = alias. An exact
     * (glob-free) name is listed as typed, as redis does. */
    unsigned char hit[NPARAMS] = {0};
    const char *shown[NPARAMS][2];
    for (size_t i = 0; i < NPARAMS; i++)
        shown[i][0] = params[i].name, shown[i][1] = params[i].alias;
    size_t n = 0;
    for (int j = 2; j < x->argc; j++) {
        const char *pat = x->argv[j];
        for (size_t i = 0; i < NPARAMS; i++) {
            const param *p = &params[i];
            for (int a = 0; a < 2; a++) {
                const char *nm = a ? p->alias : p->name;
                unsigned bit = a ? 2u : 1u;
                if (!nm || (hit[i] & bit)) continue;
                int m = has_glob(pat) ? !p->hidden && fnmatch(pat, nm, FNM_CASEFOLD) == 0
                                      : strcasecmp(pat, nm) == 0;
                if (!m) continue;
                hit[i] |= bit, n++;
                if (!has_glob(pat)) shown[i][a] = pat;
            }
        }
    }
    resp_w_map(x->out, x->proto, n);
    for (size_t i = 0; i < NPARAMS; i++) {
        if (hit[i] && params[i].kind == K_LIVE && !params[i].def) /* read it where it lives */
            live_value(x->srv, &params[i], ps->val[i]);
        if (hit[i] & 1) {
            resp_w_bulkstr(x->out, shown[i][0]);
            resp_w_bulkstr(x->out, ps->val[i]);
        }
        if (hit[i] & 2) {
            resp_w_bulkstr(x->out, shown[i][1]);
            resp_w_bulkstr(x->out, ps->val[i]);
        }
    }
}

void cmd_config_resetstat(cmd_ctx *x) {
    cmdstats_reset(x->srv);
    reply_ok(x);
}

void cmd_config_rewrite(cmd_ctx *x) {
    reply_err(x, "ERR The server is running without a config file");
}

void cmd_config_help(cmd_ctx *x) {
    static const char *help[] = {
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Print this help."};
    resp_w_array(x->out, sizeof help / sizeof *help);
    for (size_t i = 0; i < sizeof help / sizeof *help; i++)
        resp_w_simple(x->out, help[i]);
}
