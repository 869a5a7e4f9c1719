/* cmd_server.c - connection and server commands: PING, ECHO, AUTH, HELLO,
 * CLIENT, SELECT, QUIT, READONLY/READWRITE/ASKING, DBSIZE, CONFIG GET and
 * COMMAND. Texts follow redis-server 7.0 in cluster mode. */
#include "node/cmd.h"
#include "node/script.h"
#include "core/err.h"

#include <fnmatch.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KEEL_VERSION "0.1.0"

void cmd_ping(cmd_ctx *x) {
    if (x->argc > 2) {
        reply_err(x, "ERR wrong number of arguments for 'ping' command");
        return;
    }
    if (x->argc == 2)
        resp_w_bulk(x->out, x->argv[1], x->argvlen[1]);
    else
        resp_w_simple(x->out, "PONG");
}

void cmd_echo(cmd_ctx *x) {
    resp_w_bulk(x->out, x->argv[1], x->argvlen[1]);
}

void cmd_ok(cmd_ctx *x) { /* READONLY, READWRITE, ASKING */
    reply_ok(x);
}

void cmd_quit(cmd_ctx *x) {
    reply_ok(x);
    rserver_close_after_reply(x->c);
}

/* Constant-time comparison, so AUTH timing does not leak the password. */
static int password_ok(const server *s, const char *pw, size_t len) {
    size_t want = strlen(s->cfg.requirepass);
    return want == len && CRYPTO_memcmp(pw, s->cfg.requirepass, len) == 0;
}

/* Returns 1 if authenticated; otherwise replies and returns 0. */
static int check_auth(cmd_ctx *x, int user_i, int pass_i) {
    const server *s = x->srv;
    if (user_i >= 0 && strcmp(x->argv[user_i], "default") != 0) {
        /* Only the default user exists. */
        reply_err(x, "WRONGPASS invalid username-password pair or user is disabled.");
        return 0;
    }
    if (!s->cfg.requirepass[0]) {
        if (user_i < 0) {
            reply_err(x, "ERR AUTH <password> called without any password configured for the "
                         "default user. Are you sure your configuration is correct?");
            return 0;
        }
    } else if (!password_ok(s, x->argv[pass_i], x->argvlen[pass_i])) {
        reply_err(x, "WRONGPASS invalid username-password pair or user is disabled.");
        return 0;
    }
    x->c->authed = 1;
    return 1;
}

void cmd_auth(cmd_ctx *x) {
    if (x->argc > 3) {
        reply_syntax(x);
        return;
    }
    if (check_auth(x, x->argc == 3 ? 1 : -1, x->argc - 1)) reply_ok(x);
}

void cmd_hello(cmd_ctx *x) {
    long long ver = x->c->proto;
    int j = 1;
    if (x->argc >= 2) {
        if (arg_ll(x->argv[1], x->argvlen[1], &ver)) {
            reply_err(x, "ERR Protocol version is not an integer or out of range");
            return;
        }
        j = 2;
        if (ver < 2 || ver > 3) {
            reply_err(x, "NOPROTO unsupported protocol version");
            return;
        }
    }
    const char *setname = NULL;
    for (; j < x->argc; j++) {
        int more = x->argc - j - 1;
        if (arg_is(x, j, "auth") && more >= 2) {
            if (!check_auth(x, j + 1, j + 2)) return;
            j += 2;
        } else if (arg_is(x, j, "setname") && more >= 1) {
            setname = x->argv[++j];
        } else {
            reply_errf(x, "ERR Syntax error in HELLO option '%s'", x->argv[j]);
            return;
        }
    }
    if (!x->c->authed) {
        reply_err(x, "NOAUTH HELLO must be called with the client already authenticated, "
                     "otherwise the HELLO AUTH <user> <pass> option can be used to "
                     "authenticate the client and select the RESP protocol version at the same "
                     "time");
        return;
    }
    if (setname) snprintf(x->c->name, sizeof x->c->name, "%s", setname);
    x->c->proto = x->proto = (int)ver;
    resp_w_map(x->out, x->proto, 7);
    resp_w_bulkstr(x->out, "server");
    resp_w_bulkstr(x->out, "keel");
    resp_w_bulkstr(x->out, "version");
    resp_w_bulkstr(x->out, KEEL_VERSION);
    resp_w_bulkstr(x->out, "proto");
    resp_w_int(x->out, ver);
    resp_w_bulkstr(x->out, "id");
    resp_w_int(x->out, (long long)x->c->id);
    resp_w_bulkstr(x->out, "mode");
    resp_w_bulkstr(x->out, "cluster");
    resp_w_bulkstr(x->out, "role");
    resp_w_bulkstr(x->out, "master");
    resp_w_bulkstr(x->out, "modules");
    resp_w_array(x->out, 0);
}

void cmd_select(cmd_ctx *x) {
    long long db;
    if (arg_ll(x->argv[1], x->argvlen[1], &db) || db < INT_MIN || db > INT_MAX)
        reply_not_int(x);
    else if (db != 0)
        reply_err(x, "ERR SELECT is not allowed in cluster mode");
    else
        reply_ok(x);
}

void cmd_dbsize(cmd_ctx *x) {
    resp_w_int(x->out, (long long)store_total_keys(x->srv->st));
}

/* ---- CLIENT -------------------------------------------------------------- */

void cmd_client(cmd_ctx *x) { /* bare CLIENT is caught by arity */
    reply_err(x, "ERR wrong number of arguments for 'client' command");
}

void cmd_client_id(cmd_ctx *x) {
    resp_w_int(x->out, (long long)x->c->id);
}

void cmd_client_getname(cmd_ctx *x) {
    if (x->c->name[0])
        resp_w_bulkstr(x->out, x->c->name);
    else
        resp_w_null(x->out, x->proto);
}

void cmd_client_setname(cmd_ctx *x) {
    for (size_t i = 0; i < x->argvlen[2]; i++) {
        unsigned char ch = (unsigned char)x->argv[2][i];
        if (ch < '!' || ch > '~') {
            reply_err(x, "ERR Client names cannot contain spaces, newlines or special characters.");
            return;
        }
    }
    if (x->argvlen[2] >= sizeof x->c->name) {
        reply_err(x, "ERR Client name is too long");
        return;
    }
    memcpy(x->c->name, x->argv[2], x->argvlen[2]);
    x->c->name[x->argvlen[2]] = 0;
    reply_ok(x);
}

/* ---- CONFIG GET ---------------------------------------------------------- */

static const struct {
    const char *name, *value;
} config_values[] = {
    {"save", ""},
    {"appendonly", "no"},
    {"cluster-enabled", "yes"},
    {"databases", "1"},
    {"maxmemory", "0"},
    {"cluster-require-full-coverage", "yes"},
    {"timeout", "0"},
    {"proto-max-bulk-len", NULL},
    {"maxclients", NULL},
    /* Encoding thresholds: keel stores every hash, set, sorted set and list
     * one way (a record per element), so these are accepted by CONFIG SET
     * and have no effect. */
    {"hash-max-listpack-entries", "128"},
    {"hash-max-listpack-value", "64"},
    {"hash-max-ziplist-entries", "128"},
    {"hash-max-ziplist-value", "64"},
    {"set-max-intset-entries", "512"},
    {"zset-max-listpack-entries", "128"},
    {"zset-max-listpack-value", "64"},
    {"zset-max-ziplist-entries", "128"},
    {"zset-max-ziplist-value", "64"},
    {"list-max-listpack-size", "-2"},
    {"list-max-ziplist-size", "-2"},
    {"list-compress-depth", "0"},
};
#define CONFIG_NOOP_FIRST 9 /* config_values[9..]: CONFIG SET accepts, no effect */
#define CONFIG_SAVE 0       /* "save": keel takes no snapshots; accepted, no effect */

void cmd_config(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'config' command");
}

/* CONFIG SET param value [param value ...]: only the parameters that mean
 * nothing to keel's storage (encoding thresholds) are accepted; the rest
 * get redis' error for an unknown parameter, and nothing is applied. */
void cmd_config_set(cmd_ctx *x) {
    size_t n = sizeof config_values / sizeof *config_values;
    if (x->argc % 2 != 0) {
        reply_err(x, "ERR wrong number of arguments for 'config|set' command");
        return;
    }
    for (int j = 2; j < x->argc; j += 2) {
        int bad = 0;
        if (script_config_set(x->srv, x->argv[j], x->argv[j + 1], &bad)) { /* script.h */
            if (bad) {
                reply_errf(x, "ERR Invalid argument '%s' for CONFIG SET '%s'", x->argv[j + 1],
                           x->argv[j]);
                return;
            }
            continue;
        }
        size_t i = CONFIG_NOOP_FIRST;
        while (i < n && strcasecmp(x->argv[j], config_values[i].name) != 0)
            i++;
        if (!strcasecmp(x->argv[j], config_values[CONFIG_SAVE].name)) i = CONFIG_SAVE;
        if (i == n) {
            reply_errf(x, "ERR Unknown option or number of arguments for CONFIG SET - '%s'",
                       x->argv[j]);
            return;
        }
    }
    reply_ok(x);
}

void cmd_config_get(cmd_ctx *x) {
    size_t n = sizeof config_values / sizeof *config_values, hits = 0;
    const char *match[32];
    char vals[32][32];
    for (size_t i = 0; i < n; i++) {
        int hit = 0;
        for (int j = 2; j < x->argc && !hit; j++)
            hit = fnmatch(x->argv[j], config_values[i].name, FNM_CASEFOLD) == 0;
        if (!hit) continue;
        const char *v = config_values[i].value;
        if (!v && !strcmp(config_values[i].name, "maxclients"))
            snprintf(vals[hits], sizeof vals[hits], "%d", x->srv->cfg.maxclients);
        else if (!v)
            snprintf(vals[hits], sizeof vals[hits], "%zu", x->srv->cfg.limits.max_bulk);
        else
            snprintf(vals[hits], sizeof vals[hits], "%s", v);
        match[hits++] = config_values[i].name;
    }
    static const char *const script_params[] = {"lua-time-limit", "busy-reply-threshold"};
    for (size_t i = 0; i < 2 && hits < 32; i++) {
        int hit = 0;
        for (int j = 2; j < x->argc && !hit; j++)
            hit = fnmatch(x->argv[j], script_params[i], FNM_CASEFOLD) == 0;
        if (hit && script_config_get(x->srv, script_params[i], vals[hits], sizeof vals[hits]))
            match[hits++] = script_params[i];
    }
    resp_w_map(x->out, x->proto, hits);
    for (size_t i = 0; i < hits; i++) {
        resp_w_bulkstr(x->out, match[i]);
        resp_w_bulkstr(x->out, vals[i]);
    }
}

/* ---- COMMAND ------------------------------------------------------------- */

static const char *flag_names[] = {"write", "readonly", "fast",  "no_auth",
                                   "admin", "loading",  "stale", "noscript"};

static void write_key_specs(cmd_ctx *x, const cmd_def *d) {
    if (d->keynum > 0) { /* numkeys at keynum, then the keys */
        resp_w_array(x->out, 1);
        resp_w_map(x->out, x->proto, 3);
        resp_w_bulkstr(x->out, "flags");
        resp_w_set(x->out, x->proto, 1);
        resp_w_simple(x->out, d->flags & CMD_WRITE ? "RW" : "RO");
        resp_w_bulkstr(x->out, "begin_search");
        resp_w_map(x->out, x->proto, 2);
        resp_w_bulkstr(x->out, "type");
        resp_w_bulkstr(x->out, "index");
        resp_w_bulkstr(x->out, "spec");
        resp_w_map(x->out, x->proto, 1);
        resp_w_bulkstr(x->out, "index");
        resp_w_int(x->out, d->keynum);
        resp_w_bulkstr(x->out, "find_keys");
        resp_w_map(x->out, x->proto, 2);
        resp_w_bulkstr(x->out, "type");
        resp_w_bulkstr(x->out, "keynum");
        resp_w_bulkstr(x->out, "spec");
        resp_w_map(x->out, x->proto, 3);
        resp_w_bulkstr(x->out, "keynumidx");
        resp_w_int(x->out, 0);
        resp_w_bulkstr(x->out, "firstkey");
        resp_w_int(x->out, 1);
        resp_w_bulkstr(x->out, "keystep");
        resp_w_int(x->out, 1);
        return;
    }
    if (d->first_key <= 0) {
        resp_w_array(x->out, 0);
        return;
    }
    resp_w_array(x->out, 1);
    resp_w_map(x->out, x->proto, 3);
    resp_w_bulkstr(x->out, "flags");
    resp_w_set(x->out, x->proto, 1);
    resp_w_simple(x->out, d->flags & CMD_WRITE ? "RW" : "RO");
    resp_w_bulkstr(x->out, "begin_search");
    resp_w_map(x->out, x->proto, 2);
    resp_w_bulkstr(x->out, "type");
    resp_w_bulkstr(x->out, "index");
    resp_w_bulkstr(x->out, "spec");
    resp_w_map(x->out, x->proto, 1);
    resp_w_bulkstr(x->out, "index");
    resp_w_int(x->out, d->first_key);
    resp_w_bulkstr(x->out, "find_keys");
    resp_w_map(x->out, x->proto, 2);
    resp_w_bulkstr(x->out, "type");
    resp_w_bulkstr(x->out, "range");
    resp_w_bulkstr(x->out, "spec");
    resp_w_map(x->out, x->proto, 3);
    resp_w_bulkstr(x->out, "lastkey");
    resp_w_int(x->out, d->last_key < 0 ? -1 : d->last_key - d->first_key);
    resp_w_bulkstr(x->out, "keystep");
    resp_w_int(x->out, d->key_step);
    resp_w_bulkstr(x->out, "limit");
    resp_w_int(x->out, 0);
}

static size_t count_subs(const cmd_def *d) {
    size_t n = 0;
    while (d->subs && d->subs[n].name)
        n++;
    return n;
}

static void write_command_info(cmd_ctx *x, const cmd_def *d, const char *parent) {
    char name[80];
    if (parent)
        snprintf(name, sizeof name, "%s|%s", parent, d->name);
    else
        snprintf(name, sizeof name, "%s", d->name);
    resp_w_array(x->out, 10);
    resp_w_bulkstr(x->out, name);
    resp_w_int(x->out, d->arity);
    size_t nf = 0, nflags = sizeof flag_names / sizeof *flag_names;
    for (size_t i = 0; i < nflags; i++)
        nf += (d->flags >> i) & 1;
    resp_w_set(x->out, x->proto, nf);
    for (size_t i = 0; i < nflags; i++)
        if ((d->flags >> i) & 1) resp_w_simple(x->out, flag_names[i]);
    resp_w_int(x->out, d->first_key);
    resp_w_int(x->out, d->last_key);
    resp_w_int(x->out, d->key_step);
    char cat[40];
    snprintf(cat, sizeof cat, "@%s", d->group);
    resp_w_set(x->out, x->proto, 1);
    resp_w_simple(x->out, cat);
    resp_w_array(x->out, 0); /* tips */
    write_key_specs(x, d);
    size_t ns = count_subs(d);
    resp_w_array(x->out, ns);
    for (size_t i = 0; i < ns; i++)
        write_command_info(x, &d->subs[i], d->name);
}

void cmd_command(cmd_ctx *x) {
    resp_w_array(x->out, cmd_count());
    for (size_t i = 0; i < cmd_count(); i++)
        write_command_info(x, cmd_at(i), NULL);
}

void cmd_command_count(cmd_ctx *x) {
    resp_w_int(x->out, (long long)cmd_count());
}

void cmd_command_info(cmd_ctx *x) {
    if (x->argc == 2) {
        cmd_command(x);
        return;
    }
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        const cmd_def *d = cmd_lookup(x->argv[i], x->argvlen[i]);
        if (d)
            write_command_info(x, d, NULL);
        else
            resp_w_null(x->out, x->proto);
    }
}

static void write_doc(cmd_ctx *x, const cmd_def *d) {
    resp_w_bulkstr(x->out, d->name);
    resp_w_map(x->out, x->proto, 3);
    resp_w_bulkstr(x->out, "summary");
    resp_w_bulkstr(x->out, d->summary);
    resp_w_bulkstr(x->out, "since");
    resp_w_bulkstr(x->out, "1.0.0");
    resp_w_bulkstr(x->out, "group");
    resp_w_bulkstr(x->out, d->group);
}

void cmd_command_docs(cmd_ctx *x) {
    if (x->argc == 2) {
        resp_w_map(x->out, x->proto, cmd_count());
        for (size_t i = 0; i < cmd_count(); i++)
            write_doc(x, cmd_at(i));
        return;
    }
    size_t n = 0;
    for (int i = 2; i < x->argc; i++)
        n += cmd_lookup(x->argv[i], x->argvlen[i]) != NULL;
    resp_w_map(x->out, x->proto, n);
    for (int i = 2; i < x->argc; i++) {
        const cmd_def *d = cmd_lookup(x->argv[i], x->argvlen[i]);
        if (d) write_doc(x, d);
    }
}

/* COMMAND GETKEYS cmd arg...: the keys a command would touch. */
void cmd_command_getkeys(cmd_ctx *x) {
    const cmd_def *d = cmd_lookup(x->argv[2], x->argvlen[2]);
    int argc = x->argc - 2;
    if (!d) {
        reply_err(x, "ERR Invalid command specified");
        return;
    }
    if ((d->arity > 0 && argc != d->arity) || argc < -d->arity) {
        reply_err(x, "ERR Invalid number of arguments specified for command");
        return;
    }
    if (d->first_key <= 0) {
        reply_err(x, "ERR The command has no key arguments");
        return;
    }
    int last = d->last_key < 0 ? argc + d->last_key : d->last_key;
    size_t n = 0;
    for (int i = d->first_key; i <= last && i < argc; i += d->key_step)
        n++;
    resp_w_array(x->out, n);
    for (int i = d->first_key; i <= last && i < argc; i += d->key_step)
        resp_w_bulk(x->out, x->argv[i + 2], x->argvlen[i + 2]);
}
