/* cmd.h - the command table, dispatch and the context handlers receive.
 *
 * Dispatch order follows redis-server, so errors match it: unknown command,
 * arity, authentication, then cluster routing (CROSSSLOT before -MOVED),
 * then the handler. Handlers write exactly one reply to x->out.
 */
#ifndef KEEL_CMD_H
#define KEEL_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "node/server.h"

typedef struct cmd_ctx {
    server *srv;
    client *c;
    int argc;
    char **argv;
    const size_t *argvlen;
    kbuf *out;
    int proto;
    int64_t now_ms;
    unsigned slot;      /* the slot of the command's keys, when it has keys */
    unsigned partition; /* its partition */
    int can_block;      /* a top-level request: may block (blocking.h); 0 in EXEC, scripts */
    int hold;           /* set by blocking_run: dispatch returns it (RSERVER_HOLD) */
    int writes;         /* the routed command may write (cmd_route's replication checks) */
} cmd_ctx;

typedef void (*cmd_fn)(cmd_ctx *x);
/* Key positions a table row cannot state (redis' getkeys_proc; getkeys.h):
 * writes the argv indexes of the keys of argv[0..argc) to pos (room for
 * argc entries), returns how many, or -1 when the arguments name no keys
 * in a valid way (the handler replies the error). */
typedef int (*cmd_keys_fn)(int argc, char *const *argv, const size_t *argvlen, int *pos);

enum {
    CMD_WRITE = 1 << 0,
    CMD_READONLY = 1 << 1,
    CMD_FAST = 1 << 2,
    CMD_NOAUTH = 1 << 3, /* allowed before AUTH */
    CMD_ADMIN = 1 << 4,
    CMD_LOADING = 1 << 5,
    CMD_STALE = 1 << 6,
    CMD_NOSCRIPT = 1 << 7,
    CMD_CONTAINER = 1 << 8,   /* has subcommands */
    CMD_NOQUEUE = 1 << 9,     /* executes at once inside MULTI (EXEC, DISCARD, WATCH...) */
    CMD_ALLOW_BUSY = 1 << 10, /* runs while a script is past its time limit (redis' allow-busy) */
    CMD_NOMULTI = 1 << 11,    /* refused inside MULTI, which then fails (redis' no-multi) */
};

typedef enum { CLASS_READ, CLASS_WRITE, CLASS_ADMIN, CLASS__COUNT } cmd_class;

typedef struct cmd_def {
    const char *name; /* lower case */
    int arity;        /* >0 exact, <0 at least -arity (argv[0] included) */
    unsigned flags;
    int first_key, last_key, key_step; /* as in COMMAND; last -1 = last arg */
    cmd_class cls;
    cmd_fn fn;
    const char *group; /* for COMMAND DOCS */
    const char *summary;
    const struct cmd_def *subs; /* container commands; terminated by name NULL */
    int keynum;                 /* >0: argv[keynum] counts the keys that follow it (SINTERCARD);
                                   first_key..key_step are then 0 as in COMMAND */
    cmd_keys_fn getkeys;        /* non-NULL: the keys (routing, GETKEYS), "movablekeys" */
} cmd_def;

/* Looks up a command by name (any case). NULL if unknown. */
const cmd_def *cmd_lookup(const char *name, size_t len);
/* For a container, the subcommand named by argv[1], or NULL. */
const cmd_def *cmd_lookup_sub(const cmd_def *parent, const char *name, size_t len);
/* Executes the current request of c (argv from its parser). Returns 0, or
 * RSERVER_HOLD when the request is held (a fenced partition, or a move's
 * long poll; see move.h). */
int cmd_dispatch(server *srv, client *c, int argc, char **argv, const size_t *argvlen);
/* Routes x->slot: returns 1 if this node serves it (x->partition set);
 * else replies -MOVED or -CLUSTERDOWN, or holds the request (*held =
 * RSERVER_HOLD, nothing replied), and returns 0. */
int cmd_route(cmd_ctx *x, int *held);
/* Computes the one slot of the keys of x's command d into x->slot. Returns
 * 0 (*has_keys 1 if it has keys), or -1 after replying -CROSSSLOT. */
int cmd_keys_slot(cmd_ctx *x, const cmd_def *d, int *has_keys);
/* Runs d's handler on x (routed already) and records its metrics. */
void cmd_call(cmd_ctx *x, const cmd_def *d, int has_keys);
/* Iteration over the table for COMMAND. */
size_t cmd_count(void);
const cmd_def *cmd_at(size_t i);

/* Reply helpers shared by handlers. */
void reply_ok(cmd_ctx *x);
void reply_err(cmd_ctx *x, const char *msg);
void reply_errf(cmd_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void reply_syntax(cmd_ctx *x);
void reply_not_int(cmd_ctx *x);
void reply_wrongtype(cmd_ctx *x);
void reply_arity(cmd_ctx *x, const cmd_def *d);
/* Parses a whole argument as a long long exactly as redis' string2ll does
 * (no spaces, no '+', no leading zeros). Returns 0 or KEEL_EINVAL. */
int arg_ll(const char *s, size_t len, long long *out);
int arg_is(const cmd_ctx *x, int i, const char *word); /* case-insensitive */
/* The tail of LMPOP, ZMPOP, BLMPOP and BZMPOP, as redis' *mpopGenericCommand:
 * numkeys at argv[at], that many keys, then w1|w2 [COUNT count]. Returns 0
 * with *is_w1 (1 for w1), *nkeys and *count (1 when absent), or -1 having
 * replied the error (numkeys, syntax, count). */
int arg_mpop(cmd_ctx *x, int at, const char *w1, const char *w2, int *is_w1, int *nkeys,
             long long *count);

#endif
