/* cmd_client.c - CLIENT LIST / INFO / KILL / REPLY / SETINFO / NO-EVICT /
 * GETREDIR / HELP, and MONITOR, with redis 7.0's replies and errors.
 *
 * CLIENT LIST prints redis 7.0's fields (plus 7.2's lib-name and lib-ver,
 * which CLIENT SETINFO sets). Fields keel has no counterpart for print
 * redis' idle values: db=0, sub/psub/ssub=0, redir=-1, obl/oll/omem=0.
 * qbuf is the size of the request being executed for the calling client
 * (redis still holds it in its query buffer then) and 0 for the others:
 * keel parses each read whole before the next.
 *
 * CLIENT REPLY OFF/SKIP are applied by cmd_dispatch (cmd.c), which drops
 * the reply of a silenced request after its handler ran.
 *
 * MONITOR: monitors are kept in s->monitors; every command executed (its
 * handler called, by cmd_call, and EXEC) is fed to each of them, except
 * admin commands, as redis does. A monitor whose unsent output passes
 * MONITOR_MAX_BACKLOG is closed rather than letting it grow without bound.
 */
#include "node/blocking.h"
#include "node/cmd.h"
#include "node/introspect.h"
#include "node/multi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#define MONITOR_MAX_BACKLOG (64u << 20)

struct monitor_list {
    client **c;
    size_t n, cap;
};

/* ---- CLIENT LIST / INFO -------------------------------------------------- */

static size_t request_bytes(const cmd_ctx *x) { /* as a multibulk */
    char tmp[24];
    size_t n = (size_t)snprintf(tmp, sizeof tmp, "*%d\r\n", x->argc);
    for (int i = 0; i < x->argc; i++)
        n += (size_t)snprintf(tmp, sizeof tmp, "$%zu\r\n", x->argvlen[i]) + x->argvlen[i] + 2;
    return n;
}

static void client_line(const cmd_ctx *x, const client *c, kbuf *b) {
    char flags[8];
    size_t f = 0;
    if (c->monitor) flags[f++] = 'O';
    if (multi_active(c)) flags[f++] = 'x';
    if (c->no_evict) flags[f++] = 'e';
    if (blocking_is_blocked(x->srv, c)) flags[f++] = 'b';
    if (!f) flags[f++] = 'N';
    flags[f] = 0;
    char cmd[80] = "NULL";
    if (c->cmd_name && c->cmd_sub)
        snprintf(cmd, sizeof cmd, "%s|%s", c->cmd_name, c->cmd_sub);
    else if (c->cmd_name)
        snprintf(cmd, sizeof cmd, "%s", c->cmd_name);
    int64_t now = x->now_ms;
    size_t qbuf = c == x->c ? request_bytes(x) : 0;
    kbuf_printf(b,
                "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 sub=0 "
                "psub=0 ssub=0 multi=%d qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=0 rbs=%zu "
                "rbp=%zu obl=0 oll=0 omem=0 tot-mem=%zu events=r cmd=%s user=default redir=-1 "
                "resp=%d lib-name=%s lib-ver=%s\n",
                (unsigned long long)c->id, c->addr, c->laddr, c->fd, c->name,
                (long long)((now - c->created_ms) / 1000), (long long)((now - c->last_ms) / 1000),
                flags, multi_active(c) ? 0 : -1, qbuf, (size_t)0, qbuf, (size_t)65536, (size_t)0,
                c->out.cap + qbuf, cmd, c->proto, c->lib_name, c->lib_ver);
}

static int type_known(const char *t) {
    return !strcasecmp(t, "normal") || !strcasecmp(t, "master") || !strcasecmp(t, "replica") ||
           !strcasecmp(t, "slave") || !strcasecmp(t, "pubsub");
}

void cmd_client_list(cmd_ctx *x) {
    int only_normal = -1; /* -1: every type */
    int ids_from = 0;
    if (x->argc == 4 && arg_is(x, 2, "type")) {
        if (!type_known(x->argv[3])) {
            reply_errf(x, "ERR Unknown client type '%s'", x->argv[3]);
            return;
        }
        only_normal = arg_is(x, 3, "normal");
    } else if (x->argc > 3 && arg_is(x, 2, "id")) {
        ids_from = 3;
        for (int i = 3; i < x->argc; i++) {
            long long id;
            if (arg_ll(x->argv[i], x->argvlen[i], &id) || id <= 0) {
                reply_err(x, "ERR Invalid client ID");
                return;
            }
        }
    } else if (x->argc != 2) {
        reply_syntax(x);
        return;
    }
    kbuf b;
    kbuf_init(&b);
    for (client *c = rserver_clients(x->srv->rs); c; c = c->next) {
        if (only_normal == 0) break; /* keel has no masters, replicas or pubsub clients */
        if (ids_from) {
            int hit = 0;
            for (int i = ids_from; i < x->argc && !hit; i++) {
                long long id = 0;
                hit = !arg_ll(x->argv[i], x->argvlen[i], &id) && (uint64_t)id == c->id;
            }
            if (!hit) continue;
        }
        client_line(x, c, &b);
    }
    resp_w_verbatim(x->out, x->proto, "txt", b.p ? b.p : "", b.len);
    kbuf_close(&b);
}

void cmd_client_info(cmd_ctx *x) {
    kbuf b;
    kbuf_init(&b);
    client_line(x, x->c, &b);
    resp_w_verbatim(x->out, x->proto, "txt", b.p ? b.p : "", b.len);
    kbuf_close(&b);
}

/* ---- CLIENT KILL --------------------------------------------------------- */

typedef struct kill_filter {
    long long id;
    const char *addr, *laddr;
    int skipme, any_type; /* any_type 0: a type no keel client has */
} kill_filter;

static int kill_matches(const kill_filter *k, const client *c, const client *me) {
    if (!k->any_type) return 0;
    if (k->id && (uint64_t)k->id != c->id) return 0;
    if (k->addr && strcmp(k->addr, c->addr) != 0) return 0;
    if (k->laddr && strcmp(k->laddr, c->laddr) != 0) return 0;
    if (k->skipme && c == me) return 0;
    return 1;
}

void cmd_client_kill(cmd_ctx *x) {
    kill_filter k = {.skipme = 1, .any_type = 1};
    int old_form = x->argc == 3;
    if (old_form) {
        k.addr = x->argv[2];
        k.skipme = 0;
    } else {
        for (int i = 2; i < x->argc; i += 2) {
            int more = i + 1 < x->argc;
            const char *v = more ? x->argv[i + 1] : NULL;
            if (arg_is(x, i, "id") && more) {
                if (arg_ll(v, x->argvlen[i + 1], &k.id) || k.id <= 0) {
                    reply_err(x, "ERR client-id should be greater than 0");
                    return;
                }
            } else if (arg_is(x, i, "type") && more) {
                if (!type_known(v)) {
                    reply_errf(x, "ERR Unknown client type '%s'", v);
                    return;
                }
                k.any_type = !strcasecmp(v, "normal");
            } else if (arg_is(x, i, "addr") && more) {
                k.addr = v;
            } else if (arg_is(x, i, "laddr") && more) {
                k.laddr = v;
            } else if (arg_is(x, i, "user") && more) {
                if (strcmp(v, "default") != 0) {
                    reply_errf(x, "ERR No such user '%s'", v);
                    return;
                }
            } else if (arg_is(x, i, "skipme") && more) {
                if (!strcasecmp(v, "yes"))
                    k.skipme = 1;
                else if (!strcasecmp(v, "no"))
                    k.skipme = 0;
                else {
                    reply_syntax(x);
                    return;
                }
            } else {
                reply_syntax(x);
                return;
            }
        }
    }
    long long killed = 0;
    int me_too = 0;
    for (client *c = rserver_clients(x->srv->rs); c; c = c->next) {
        if (!kill_matches(&k, c, x->c)) continue;
        killed++;
        if (c == x->c)
            me_too = 1;
        else
            rserver_kill(c);
    }
    if (old_form) {
        if (killed)
            reply_ok(x);
        else
            reply_err(x, "ERR No such client");
    } else {
        resp_w_int(x->out, killed);
    }
    if (me_too) rserver_close_after_reply(x->c); /* this reply leaves first */
}

/* ---- REPLY / SETINFO / NO-EVICT / GETREDIR / HELP ------------------------- */

void cmd_client_reply(cmd_ctx *x) {
    if (arg_is(x, 2, "on")) {
        x->c->reply_off = x->c->reply_skip = x->c->reply_skip_next = 0;
        reply_ok(x);
    } else if (arg_is(x, 2, "off")) {
        x->c->reply_off = 1; /* this OK is dropped by cmd_dispatch, as redis sends none */
        reply_ok(x);
    } else if (arg_is(x, 2, "skip")) {
        if (!x->c->reply_off) x->c->reply_skip_next = 1;
        reply_ok(x); /* dropped too: SKIP has no reply */
    } else {
        reply_syntax(x);
    }
}

void cmd_client_setinfo(cmd_ctx *x) {
    char *dst;
    size_t cap;
    if (arg_is(x, 2, "lib-name"))
        dst = x->c->lib_name, cap = sizeof x->c->lib_name;
    else if (arg_is(x, 2, "lib-ver"))
        dst = x->c->lib_ver, cap = sizeof x->c->lib_ver;
    else {
        reply_errf(x, "ERR Unrecognized option '%s'", x->argv[2]);
        return;
    }
    for (size_t i = 0; i < x->argvlen[3]; i++) {
        unsigned char ch = (unsigned char)x->argv[3][i];
        if (ch < '!' || ch > '~') {
            reply_errf(x, "ERR %s cannot contain spaces, newlines or special characters.",
                       x->argv[2]);
            return;
        }
    }
    if (x->argvlen[3] >= cap) {
        reply_errf(x, "ERR %s is too long (at most %zu bytes)", x->argv[2], cap - 1);
        return;
    }
    memcpy(dst, x->argv[3], x->argvlen[3]);
    dst[x->argvlen[3]] = 0;
    reply_ok(x);
}

/* keel never evicts clients; the flag is kept and shown ('e') as redis does. */
void cmd_client_no_evict(cmd_ctx *x) {
    if (arg_is(x, 2, "on"))
        x->c->no_evict = 1;
    else if (arg_is(x, 2, "off"))
        x->c->no_evict = 0;
    else {
        reply_syntax(x);
        return;
    }
    reply_ok(x);
}

void cmd_client_getredir(cmd_ctx *x) { /* keel has no client-side caching */
    resp_w_int(x->out, -1);
}

void cmd_client_help(cmd_ctx *x) {
    static const char *help[] = {
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "    * ID <client-id>",
        "      Kill connections by client id.",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "    * ID <client-id> [<client-id> ...]",
        "      Return clients of specified IDs only.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.",
        "    * LIB-VER: the client lib version.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "HELP",
        "    Print this help."};
    resp_w_array(x->out, sizeof help / sizeof *help);
    for (size_t i = 0; i < sizeof help / sizeof *help; i++)
        resp_w_simple(x->out, help[i]);
}

/* ---- MONITOR ------------------------------------------------------------- */

void cmd_monitor(cmd_ctx *x) {
    server *s = x->srv;
    if (x->c->monitor) {
        reply_ok(x);
        return;
    }
    struct monitor_list *m = s->monitors;
    if (!m && !(m = s->monitors = calloc(1, sizeof *m))) {
        reply_err(x, "ERR out of memory");
        return;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4;
        client **p = realloc(m->c, cap * sizeof *p);
        if (!p) {
            reply_err(x, "ERR out of memory");
            return;
        }
        m->c = p, m->cap = cap;
    }
    m->c[m->n++] = x->c;
    x->c->monitor = 1;
    reply_ok(x);
}

/* redis' sdscatrepr: a quoted string with C escapes. */
static void repr(kbuf *b, const char *p, size_t n) {
    kbuf_appendstr(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        switch (ch) {
        case '\\':
            kbuf_appendstr(b, "\\\\");
            break;
        case '"':
            kbuf_appendstr(b, "\\\"");
            break;
        case '\n':
            kbuf_appendstr(b, "\\n");
            break;
        case '\r':
            kbuf_appendstr(b, "\\r");
            break;
        case '\t':
            kbuf_appendstr(b, "\\t");
            break;
        case '\a':
            kbuf_appendstr(b, "\\a");
            break;
        case '\b':
            kbuf_appendstr(b, "\\b");
            break;
        default:
            if (ch >= 0x20 && ch < 0x7f)
                kbuf_append(b, &p[i], 1);
            else
                kbuf_printf(b, "\\x%02x", ch);
        }
    }
    kbuf_appendstr(b, "\"");
}

int monitor_feed_first(const cmd_def *d) {
    static const char *const names[] = {"eval",       "evalsha", "eval_ro",
                                        "evalsha_ro", "fcall",   "fcall_ro"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(d->name, names[i])) return 1;
    return 0;
}

void monitor_feed(cmd_ctx *x, const cmd_def *d) {
    struct monitor_list *m = x->srv->monitors;
    if (!m || !m->n || (d->flags & CMD_ADMIN)) return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    kbuf line;
    kbuf_init(&line);
    kbuf_printf(&line, "+%ld.%06ld [0 %s]", (long)tv.tv_sec, (long)tv.tv_usec, x->c->addr);
    int redact = !strcasecmp(x->argv[0], "auth");
    for (int i = 0; i < x->argc; i++) {
        kbuf_appendstr(&line, " ");
        if (redact && i > 0)
            kbuf_appendstr(&line, "\"(redacted)\"");
        else
            repr(&line, x->argv[i], x->argvlen[i]);
    }
    kbuf_appendstr(&line, "\r\n");
    for (size_t i = 0; i < m->n; i++) {
        client *c = m->c[i];
        if (c == x->c) continue;
        if (c->out.len > MONITOR_MAX_BACKLOG) {
            rserver_kill(c); /* on_close takes it off the list */
            continue;
        }
        if (kbuf_append(&c->out, line.p, line.len) == 0) rserver_wake(c);
    }
    kbuf_close(&line);
}

void client_conn_closed(server *s, client *c) {
    struct monitor_list *m = s->monitors;
    if (!m || !c->monitor) return;
    for (size_t i = 0; i < m->n; i++)
        if (m->c[i] == c) {
            m->c[i] = m->c[--m->n];
            break;
        }
}

void monitors_free(struct monitor_list *m) {
    if (!m) return;
    free(m->c);
    free(m);
}
