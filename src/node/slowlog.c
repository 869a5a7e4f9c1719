/* slowlog.c - the slow command log (see slowlog.h): a ring of entries,
 * newest first on GET. */
#include "node/slowlog.h"
#include "core/clock.h"
#include "node/introspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ARGS 32
#define MAX_ARG_LEN 128

typedef struct sl_entry {
    long long id, time_s, duration_us;
    int argc;
    char **argv;
    size_t *argvlen;
    char addr[64], name[128];
} sl_entry;

struct slowlog {
    sl_entry *e; /* ring of cap entries; e[(head + i) % cap], i < n, oldest first */
    size_t cap, head, n;
    long long next_id;
    unsigned gen; /* s->config_gen the two below were read at (+1) */
    long long slower_than, max_len;
};

static void entry_free(sl_entry *e) {
    for (int i = 0; i < e->argc; i++)
        free(e->argv[i]);
    free(e->argv);
    free(e->argvlen);
    memset(e, 0, sizeof *e);
}

static long long param(server *s, const char *name, long long def) {
    const char *v = config_value(s, name); /* introspect.h */
    return v ? strtoll(v, NULL, 10) : def;
}

static struct slowlog *get(server *s) {
    struct slowlog *sl = s->slowlog;
    if (!sl) {
        if (!(sl = calloc(1, sizeof *sl))) return NULL;
        s->slowlog = sl;
    }
    if (sl->gen != s->config_gen + 1) {
        sl->slower_than = param(s, "slowlog-log-slower-than", 10000);
        sl->max_len = param(s, "slowlog-max-len", 128);
        sl->gen = s->config_gen + 1;
        if (sl->max_len < 0) sl->max_len = 0;
    }
    return sl;
}

/* Drops the oldest entries until at most keep remain. */
static void trim(struct slowlog *sl, size_t keep) {
    while (sl->n > keep) {
        entry_free(&sl->e[sl->head]);
        sl->head = (sl->head + 1) % sl->cap;
        sl->n--;
    }
}

/* Resizes the ring to hold max_len (keeping the newest). Returns 0 or -1. */
static int fit(struct slowlog *sl) {
    size_t want = (size_t)sl->max_len;
    if (want == sl->cap) return 0;
    trim(sl, want);
    sl_entry *ne = want ? calloc(want, sizeof *ne) : NULL;
    if (want && !ne) return -1;
    for (size_t i = 0; i < sl->n; i++)
        ne[i] = sl->e[(sl->head + i) % sl->cap];
    free(sl->e);
    sl->e = ne, sl->cap = want, sl->head = 0;
    return 0;
}

static char *dup_arg(const char *p, size_t len, size_t *outlen) {
    char tail[48] = "";
    size_t keep = len;
    if (len > MAX_ARG_LEN) {
        keep = MAX_ARG_LEN;
        snprintf(tail, sizeof tail, "... (%zu more bytes)", len - MAX_ARG_LEN);
    }
    size_t tl = strlen(tail);
    char *o = malloc(keep + tl + 1);
    if (!o) return NULL;
    memcpy(o, p, keep);
    memcpy(o + keep, tail, tl + 1);
    *outlen = keep + tl;
    return o;
}

void slowlog_record(cmd_ctx *x, const cmd_def *d, uint64_t duration_us) {
    (void)d;
    struct slowlog *sl = get(x->srv);
    if (!sl || sl->slower_than < 0 || (long long)duration_us < sl->slower_than) return;
    if (fit(sl) || sl->cap == 0) return; /* out of memory or max-len 0: nothing kept */
    sl_entry e = {.id = sl->next_id++,
                  .time_s = keel_wall_ms() / 1000,
                  .duration_us = (long long)duration_us};
    int argc = x->argc > MAX_ARGS ? MAX_ARGS : x->argc;
    e.argv = calloc((size_t)argc, sizeof *e.argv);
    e.argvlen = calloc((size_t)argc, sizeof *e.argvlen);
    if (!e.argv || !e.argvlen) {
        entry_free(&e);
        return;
    }
    int redact = !strcasecmp(x->argv[0], "auth");
    for (int i = 0; i < argc; i++) {
        char more[48];
        const char *p = x->argv[i];
        size_t len = x->argvlen[i];
        if (i == MAX_ARGS - 1 && x->argc > MAX_ARGS) {
            snprintf(more, sizeof more, "... (%d more arguments)", x->argc - MAX_ARGS + 1);
            p = more, len = strlen(more);
        } else if (redact && i > 0) {
            p = "(redacted)", len = 10;
        }
        if (!(e.argv[i] = dup_arg(p, len, &e.argvlen[i]))) {
            e.argc = i;
            entry_free(&e);
            return;
        }
        e.argc = i + 1;
    }
    snprintf(e.addr, sizeof e.addr, "%s", x->c->addr);
    snprintf(e.name, sizeof e.name, "%s", x->c->name);
    if (sl->n == sl->cap) trim(sl, sl->cap - 1);
    sl->e[(sl->head + sl->n) % sl->cap] = e;
    sl->n++;
}

void slowlog_free(struct slowlog *sl) {
    if (!sl) return;
    trim(sl, 0);
    free(sl->e);
    free(sl);
}

/* ---- Commands ------------------------------------------------------------ */

void cmd_slowlog(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'slowlog' command");
}

void cmd_slowlog_get(cmd_ctx *x) {
    long long count = 10;
    if (x->argc > 3) { /* redis' text for this arity */
        reply_errf(x, "ERR unknown subcommand or wrong number of arguments for '%.64s'. Try "
                      "SLOWLOG HELP.", x->argv[1]);
        return;
    }
    if (x->argc == 3 && (arg_ll(x->argv[2], x->argvlen[2], &count) || count < -1)) {
        reply_err(x, "ERR count should be greater than or equal to -1");
        return;
    }
    struct slowlog *sl = get(x->srv);
    size_t n = sl ? sl->n : 0;
    if (count >= 0 && (size_t)count < n) n = (size_t)count;
    resp_w_array(x->out, n);
    for (size_t i = 0; i < n; i++) { /* newest first */
        const sl_entry *e = &sl->e[(sl->head + sl->n - 1 - i) % sl->cap];
        resp_w_array(x->out, 6);
        resp_w_int(x->out, e->id);
        resp_w_int(x->out, e->time_s);
        resp_w_int(x->out, e->duration_us);
        resp_w_array(x->out, (size_t)e->argc);
        for (int j = 0; j < e->argc; j++)
            resp_w_bulk(x->out, e->argv[j], e->argvlen[j]);
        resp_w_bulkstr(x->out, e->addr);
        resp_w_bulkstr(x->out, e->name);
    }
}

void cmd_slowlog_len(cmd_ctx *x) {
    struct slowlog *sl = get(x->srv);
    resp_w_int(x->out, sl ? (long long)sl->n : 0);
}

void cmd_slowlog_reset(cmd_ctx *x) {
    struct slowlog *sl = get(x->srv);
    if (sl) trim(sl, 0);
    reply_ok(x);
}

void cmd_slowlog_help(cmd_ctx *x) {
    static const char *help[] = {
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help."};
    resp_w_array(x->out, sizeof help / sizeof *help);
    for (size_t i = 0; i < sizeof help / sizeof *help; i++)
        resp_w_simple(x->out, help[i]);
}
