/* cmd_command.c - COMMAND, COMMAND COUNT / LIST / INFO / DOCS / GETKEYS /
 * GETKEYSANDFLAGS, from the command table (cmd_table.c), as redis 7.0
 * replies them.
 *
 * Key positions come from the table (first, last, step, or keynum for the
 * numkeys commands, reported "movablekeys"). The key flags of
 * GETKEYSANDFLAGS are redis 7.0's key-spec flags: a short table of the
 * commands whose flags are not the default (RO access for read commands, RW
 * access update for writes).
 */
#include "node/cmd.h"
#include "node/getkeys.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- COMMAND ------------------------------------------------------------- */

static const char *flag_names[] = {"write", "readonly", "fast",  "no_auth",
                                   "admin", "loading",  "stale", "noscript"};
#define NFLAGS (sizeof flag_names / sizeof *flag_names)

static void write_range_spec(cmd_ctx *x, const cmd_def *d, const char *flags);

static void write_key_specs(cmd_ctx *x, const cmd_def *d) {
    if (d->getkeys == getkeys_xread) { /* keyword STREAMS, then half of the rest */
        resp_w_array(x->out, 1);
        resp_w_map(x->out, x->proto, 3);
        resp_w_bulkstr(x->out, "flags");
        resp_w_set(x->out, x->proto, 2);
        resp_w_simple(x->out, "RO");
        resp_w_simple(x->out, "access");
        resp_w_bulkstr(x->out, "begin_search");
        resp_w_map(x->out, x->proto, 2);
        resp_w_bulkstr(x->out, "type");
        resp_w_bulkstr(x->out, "keyword");
        resp_w_bulkstr(x->out, "spec");
        resp_w_map(x->out, x->proto, 2);
        resp_w_bulkstr(x->out, "keyword");
        resp_w_bulkstr(x->out, "STREAMS");
        resp_w_bulkstr(x->out, "startfrom");
        resp_w_int(x->out, d->flags & CMD_WRITE ? 4 : 1);
        resp_w_bulkstr(x->out, "find_keys");
        resp_w_map(x->out, x->proto, 2);
        resp_w_bulkstr(x->out, "type");
        resp_w_bulkstr(x->out, "range");
        resp_w_bulkstr(x->out, "spec");
        resp_w_map(x->out, x->proto, 3);
        resp_w_bulkstr(x->out, "lastkey");
        resp_w_int(x->out, -1);
        resp_w_bulkstr(x->out, "keystep");
        resp_w_int(x->out, 1);
        resp_w_bulkstr(x->out, "limit");
        resp_w_int(x->out, 2);
        return;
    }
    if (d->keynum > 0) {             /* numkeys at keynum, then the keys */
        int dest = d->first_key > 0; /* ZUNIONSTORE's destination first */
        resp_w_array(x->out, 1 + (size_t)dest);
        if (dest) write_range_spec(x, d, "OW update");
        resp_w_map(x->out, x->proto, 3);
        resp_w_bulkstr(x->out, "flags");
        resp_w_set(x->out, x->proto, 1 + (size_t)dest);
        resp_w_simple(x->out, dest ? "RO" : d->flags & CMD_WRITE ? "RW" : "RO");
        if (dest) resp_w_simple(x->out, "access"); /* the sources are only read */
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
    write_range_spec(x, d, d->flags & CMD_WRITE ? "RW" : "RO");
}

/* One key spec: the range first_key..last_key of d. */
static void write_range_spec(cmd_ctx *x, const cmd_def *d, const char *flags) {
    resp_w_map(x->out, x->proto, 3);
    resp_w_bulkstr(x->out, "flags");
    size_t nw = 1;
    for (const char *p = flags; *p; p++)
        nw += *p == ' ';
    resp_w_set(x->out, x->proto, nw);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", flags);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        resp_w_simple(x->out, w);
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
    /* movablekeys: the keys depend on the arguments (numkeys, SORT's STORE) */
    int movable =
        d->keynum > 0 || d->getkeys || !strcmp(d->name, "sort") || !strcmp(d->name, "sort_ro");
    int nomulti = (d->flags & CMD_NOMULTI) != 0;
    size_t nf = (size_t)movable + (size_t)nomulti;
    for (size_t i = 0; i < NFLAGS; i++)
        nf += (d->flags >> i) & 1;
    resp_w_set(x->out, x->proto, nf);
    for (size_t i = 0; i < NFLAGS; i++)
        if ((d->flags >> i) & 1) resp_w_simple(x->out, flag_names[i]);
    if (nomulti) resp_w_simple(x->out, "no_multi");
    if (movable) resp_w_simple(x->out, "movablekeys");
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

void cmd_command_count(cmd_ctx *x) {
    resp_w_int(x->out, (long long)cmd_count());
}

/* "get" or "config|get"; NULL for anything else ("get|key"). */
static const cmd_def *lookup_full(const char *name, size_t len, const cmd_def **parent) {
    const char *bar = memchr(name, '|', len);
    *parent = NULL;
    if (!bar) return cmd_lookup(name, len);
    const cmd_def *p = cmd_lookup(name, (size_t)(bar - name));
    if (!p || !p->subs) return NULL;
    const char *sub = bar + 1;
    size_t sl = len - (size_t)(sub - name);
    if (memchr(sub, '|', sl)) return NULL;
    *parent = p;
    return cmd_lookup_sub(p, sub, sl);
}

void cmd_command_info(cmd_ctx *x) {
    if (x->argc == 2) {
        cmd_command(x);
        return;
    }
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        const cmd_def *parent, *d = lookup_full(x->argv[i], x->argvlen[i], &parent);
        if (d)
            write_command_info(x, d, parent ? parent->name : NULL);
        else
            resp_w_null(x->out, x->proto);
    }
}

/* ---- COMMAND LIST --------------------------------------------------------- */

/* redis' ACL categories of a command, derived from its flags and group. */
static int in_category(const cmd_def *d, const char *cat) {
    static const struct {
        const char *group, *cat;
    } groups[] = {{"keyspace", "keyspace"},
                  {"string", "string"},
                  {"bitmap", "bitmap"},
                  {"hash", "hash"},
                  {"set", "set"},
                  {"sorted_set", "sortedset"},
                  {"list", "list"},
                  {"connection", "connection"},
                  {"transactions", "transaction"},
                  {"scripting", "scripting"},
                  {"pubsub", "pubsub"},
                  {"stream", "stream"},
                  {"geo", "geo"}};
    if (!strcasecmp(cat, "read")) return (d->flags & CMD_READONLY) != 0;
    if (!strcasecmp(cat, "write")) return (d->flags & CMD_WRITE) != 0;
    if (!strcasecmp(cat, "fast")) return (d->flags & CMD_FAST) != 0;
    if (!strcasecmp(cat, "slow")) return !(d->flags & CMD_FAST);
    if (!strcasecmp(cat, "admin") || !strcasecmp(cat, "dangerous"))
        return (d->flags & CMD_ADMIN) != 0;
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++)
        if (!strcasecmp(cat, groups[i].cat)) return d->group && !strcmp(d->group, groups[i].group);
    return 0;
}

typedef struct list_filter {
    int kind; /* 0 none, 1 aclcat, 2 pattern, 3 module */
    const char *arg;
} list_filter;

static int list_match(const list_filter *f, const cmd_def *d, const char *full) {
    switch (f->kind) {
    case 1:
        return in_category(d, f->arg);
    case 2:
        return fnmatch(f->arg, full, FNM_CASEFOLD) == 0;
    case 3:
        return 0; /* keel has no modules */
    }
    return 1;
}

void cmd_command_list(cmd_ctx *x) {
    list_filter f = {0, NULL};
    if (x->argc == 5 && arg_is(x, 2, "filterby")) {
        f.arg = x->argv[4];
        if (arg_is(x, 3, "aclcat"))
            f.kind = 1;
        else if (arg_is(x, 3, "pattern"))
            f.kind = 2;
        else if (arg_is(x, 3, "module"))
            f.kind = 3;
        else {
            reply_syntax(x);
            return;
        }
    } else if (x->argc != 2) {
        reply_syntax(x);
        return;
    }
    /* Two passes: count, then write (the array length comes first). */
    for (int pass = 0, n = 0; pass < 2; pass++) {
        if (pass) resp_w_array(x->out, (size_t)n);
        for (size_t i = 0; i < cmd_count(); i++) {
            const cmd_def *d = cmd_at(i);
            if (list_match(&f, d, d->name)) {
                if (pass)
                    resp_w_bulkstr(x->out, d->name);
                else
                    n++;
            }
            for (const cmd_def *s = d->subs; s && s->name; s++) {
                char full[80];
                snprintf(full, sizeof full, "%s|%s", d->name, s->name);
                if (!list_match(&f, s, full)) continue;
                if (pass)
                    resp_w_bulkstr(x->out, full);
                else
                    n++;
            }
        }
    }
}

/* ---- COMMAND GETKEYS / GETKEYSANDFLAGS ------------------------------------ */

/* Key flags that differ from the defaults; "first" is for the first key,
 * "rest" for the others (NULL: as the first). */
static const struct {
    const char *cmd, *first, *rest;
} key_flags[] = {
    {"set", "OW update", NULL},
    {"mset", "OW update", NULL},
    {"msetnx", "OW insert", NULL},
    {"setnx", "OW insert", NULL},
    {"setex", "OW update", NULL},
    {"psetex", "OW update", NULL},
    {"del", "RM delete", NULL},
    {"unlink", "RM delete", NULL},
    {"getdel", "RW access delete", NULL},
    {"append", "RW insert", NULL},
    {"lmove", "RW access delete", "RW insert"},
    {"rpoplpush", "RW access delete", "RW insert"},
    {"smove", "RW access delete", "RW insert"},
    {"rename", "RW access delete", "OW update"},
    {"renamenx", "RW access delete", "OW insert"},
    {"copy", "RO access", "OW update"},
    {"sort", "RO access", "OW update"},
    {"sort_ro", "RO access", NULL},
    {"expire", "RW update", NULL},
    {"pexpire", "RW update", NULL},
    {"expireat", "RW update", NULL},
    {"pexpireat", "RW update", NULL},
    {"persist", "RW update", NULL},
    {"touch", "RO", NULL},
    {"exists", "RO", NULL},
    {"type", "RO", NULL},
    {"ttl", "RO access", NULL},
    {"pttl", "RO access", NULL},
    {"sinterstore", "OW update", "RO access"},
    {"sunionstore", "OW update", "RO access"},
    {"sdiffstore", "OW update", "RO access"},
    {"watch", "RO", NULL},
    {"memory|usage", "RO", NULL},
    {"object", "RO", NULL},
    {"eval", "RW access update", NULL},
    {"evalsha", "RW access update", NULL},
    {"fcall", "RW access update", NULL},
    {"lmpop", "RW access delete", NULL},
    {"restore", "OW update", NULL},
    {"zunionstore", "OW update", "RO access"},
    {"zinterstore", "OW update", "RO access"},
    {"zdiffstore", "OW update", "RO access"},
    {"georadius", "RO access", "OW update"},
    {"georadiusbymember", "RO access", "OW update"},
    {"geosearchstore", "OW update", "RO access"},
    {"geoadd", "RW update", NULL},
    {"migrate", "RW access delete", NULL},
    {"restore-asking", "OW update", NULL},
    {"xadd", "RW update", NULL},
    {"xautoclaim", "RW delete", NULL},
    {"xdel", "RW delete", NULL},
    {"xtrim", "RW delete", NULL},
    {"xreadgroup", "RO access", NULL},
    {"xgroup|create", "RW insert", NULL},
    {"xgroup|createconsumer", "RW insert", NULL},
    {"xgroup|delconsumer", "RW delete", NULL},
    {"xgroup|destroy", "RW delete", NULL},
    {"xgroup|setid", "RW update", NULL},
};

/* Commands whose keys may be absent (redis' CMD_NO_MANDATORY_KEYS): a bad
 * key count gives GETKEYS an empty array rather than an error. */
static int no_mandatory_keys(const char *full) {
    static const char *const names[] = {"eval",       "evalsha", "eval_ro",
                                        "evalsha_ro", "fcall",   "fcall_ro"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(names[i], full)) return 1;
    return 0;
}

static const char *flags_for(const char *full, const cmd_def *d, int first) {
    for (size_t i = 0; i < sizeof key_flags / sizeof *key_flags; i++)
        if (!strcmp(key_flags[i].cmd, full))
            return first || !key_flags[i].rest ? key_flags[i].first : key_flags[i].rest;
    return d->flags & CMD_WRITE ? "RW access update" : "RO access";
}

/* 1 if d takes key arguments at all (redis' doesCommandHaveKeys). */
static int has_key_args(const cmd_def *parent, const cmd_def *d) {
    return d->keynum > 0 || d->first_key > 0 || d->getkeys || !strcmp(d->name, "object") ||
           (parent && !strcmp(parent->name, "memory") && !strcmp(d->name, "usage"));
}

/* Key positions in args[0..argc) (args[0] the command): writes up to cap
 * indexes to pos, returns how many, or -1 if the command has no key
 * arguments. */
static int key_positions(const cmd_def *parent, const cmd_def *d, int argc, char **argv,
                         const size_t *argvlen, int *pos, int cap) {
    int n = 0;
    if (d->getkeys) {
        n = d->getkeys(argc, argv, argvlen, pos);
        return n < 0 ? -2 : n;
    }
    /* Keys the table cannot describe: the handler routes them itself. */
    if ((parent && !strcmp(parent->name, "memory") && !strcmp(d->name, "usage")) ||
        !strcmp(d->name, "object")) {
        if (argc < 3) return -1;
        pos[0] = 2;
        return 1;
    }
    if (!parent && !strcmp(d->name, "sort")) { /* the key, the last STORE's: sortGetKeys */
        pos[n++] = 1;
        int store = 0;
        for (int i = 2; i < argc; i++) {
            if (!strcasecmp(argv[i], "limit"))
                i += 2;
            else if (!strcasecmp(argv[i], "get") || !strcasecmp(argv[i], "by"))
                i += 1;
            else if (!strcasecmp(argv[i], "store") && i + 1 < argc)
                store = i + 1; /* not skipped, as redis */
        }
        if (store && store < argc && n < cap) pos[n++] = store;
        return n;
    }
    if (d->keynum > 0) {
        long long nk;
        if (d->keynum >= argc || arg_ll(argv[d->keynum], argvlen[d->keynum], &nk) || nk < 0 ||
            nk > argc - d->keynum - 1)
            return -2;
        for (long long i = 0; i < nk && n < cap; i++)
            pos[n++] = d->keynum + 1 + (int)i;
        return n;
    }
    if (d->first_key <= 0) return -1;
    int last = d->last_key < 0 ? argc + d->last_key : d->last_key;
    int step = d->key_step > 0 ? d->key_step : 1;
    for (int i = d->first_key; i <= last && i < argc && n < cap; i += step)
        pos[n++] = i;
    return n;
}

static void getkeys(cmd_ctx *x, int with_flags) {
    const cmd_def *parent = NULL, *d = cmd_lookup(x->argv[2], x->argvlen[2]);
    char **argv = x->argv + 2;
    const size_t *argvlen = x->argvlen + 2;
    int argc = x->argc - 2;
    if (!d) {
        reply_err(x, "ERR Invalid command specified");
        return;
    }
    if (d->subs && argc >= 2) {
        const cmd_def *sub = cmd_lookup_sub(d, argv[1], argvlen[1]);
        if (!sub) {
            reply_err(x, "ERR Invalid command specified");
            return;
        }
        parent = d, d = sub;
    }
    char full[80];
    if (parent)
        snprintf(full, sizeof full, "%s|%s", parent->name, d->name);
    else
        snprintf(full, sizeof full, "%s", d->name);
    /* redis' order: unknown command, no key arguments, then arity */
    if (!has_key_args(parent, d)) {
        reply_err(x, "ERR The command has no key arguments");
        return;
    }
    if ((d->arity > 0 && argc != d->arity) || argc < -d->arity) {
        reply_err(x, "ERR Invalid number of arguments specified for command");
        return;
    }
    /* Room for every argument: a command has at most argc - 1 keys (there
     * was a fixed 4096 here; redis had a 256 one, "MORE THAN 256 KEYS"). */
    int *pos = malloc((size_t)argc * sizeof *pos);
    if (!pos) {
        reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
        return;
    }
    int n = key_positions(parent, d, argc, argv, argvlen, pos, argc);
    if (n < 0 && no_mandatory_keys(full)) n = 0;
    if (n < 0) {
        free(pos);
        reply_err(x, "ERR Invalid arguments specified for command");
        return;
    }
    resp_w_array(x->out, (size_t)n);
    for (int i = 0; i < n; i++) {
        if (!with_flags) {
            resp_w_bulk(x->out, argv[pos[i]], argvlen[pos[i]]);
            continue;
        }
        /* SORT ... STORE dest: the STORE key is the second one. */
        resp_w_array(x->out, 2);
        resp_w_bulk(x->out, argv[pos[i]], argvlen[pos[i]]);
        const char *fl = flags_for(full, d, i == 0);
        char buf[64];
        snprintf(buf, sizeof buf, "%s", fl);
        size_t nw = 1;
        for (const char *p = buf; *p; p++)
            nw += *p == ' ';
        resp_w_array(x->out, nw);
        for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
            resp_w_simple(x->out, w);
    }
    free(pos);
}

void cmd_command_getkeys(cmd_ctx *x) {
    getkeys(x, 0);
}

void cmd_command_getkeysandflags(cmd_ctx *x) {
    getkeys(x, 1);
}

void cmd_command_help(cmd_ctx *x) {
    static const char *help[] = {
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Print this help."};
    resp_w_array(x->out, sizeof help / sizeof *help);
    for (size_t i = 0; i < sizeof help / sizeof *help; i++)
        resp_w_simple(x->out, help[i]);
}
