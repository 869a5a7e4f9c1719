/* cmd_server.c - connection and server commands: PING, ECHO, AUTH, HELLO,
 * CLIENT ID/GETNAME/SETNAME, SELECT, QUIT, READONLY/READWRITE/ASKING and
 * DBSIZE. Texts follow redis-server 7.0 in cluster mode. (CLIENT's other
 * subcommands and MONITOR: cmd_client.c; CONFIG: cmd_config.c; COMMAND:
 * cmd_command.c.) */
#include "node/cmd.h"
#include "core/err.h"

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

void cmd_ok(cmd_ctx *x) { /* ASKING */
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
