/* admin.c - the operator commands of the `keel` CLI: each sends one admin
 * command to the coordinator over RESP (hiredis) and prints the reply (text,
 * or with --json the JSON the coordinator renders).
 *
 *   keel status|nodes|partitions [--node ID] [--json]
 *   keel set NAME VALUE | keel unset NAME
 *   keel pause [--reason TEXT] | keel resume
 *   keel drain NODE | keel remove NODE | keel unquarantine NODE
 *   keel move PARTITION NODE [--json] | keel cancel MOVE
 *   keel moves [--json] [--all] [--watch]     (--watch: moves_watch.c)
 *   keel failover PARTITION [--to NODE] [--unclean]
 *   keel plan --coord HOST:PORT [--json]      (plan.c hands this case here)
 *
 * Every one takes --coord HOST:PORT[,HOST:PORT...] (default 127.0.0.1:7400;
 * core/addrlist.h): the addresses are tried in order; a standby answers with
 * -NOTLEADER naming the leader (core/notleader.h), which is dialled next at
 * once (the command runs only after the coordinator answered AUTH or PING as
 * the leader, so a standby never executes it); and
 * --password PW (or $KEEL_PASSWORD). Exit status: 0, 1 (the coordinator
 * refused, or no address answered: the error names each one tried), 2 (bad
 * usage). */
#include "core/addrlist.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/notleader.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 8

typedef struct admin_cmd {
    const char *cli;        /* keel <cli> */
    const char *wire;       /* the coordinator command */
    const char *sub;        /* a fixed first argument, or NULL */
    int positionals;        /* required positional arguments */
    int json, node, reason; /* flags it takes */
    const char *usage;
    int listing;  /* --all and --watch (moves) */
    int failover; /* --to NODE and --unclean (failover) */
} admin_cmd;

static const admin_cmd cmds[] = {
    {"status", "STATUS", NULL, 0, 1, 0, 0, ""},
    {"nodes", "NODES", NULL, 0, 1, 0, 0, ""},
    {"partitions", "PARTITIONS", NULL, 0, 1, 1, 0, " [--node ID]"},
    {"plan", "PLAN", NULL, 0, 1, 0, 0, ""},
    {"set", "SETTING", "SET", 2, 0, 0, 0, " NAME VALUE"},
    {"unset", "SETTING", "RESET", 1, 0, 0, 0, " NAME"},
    {"pause", "PAUSE", NULL, 0, 0, 0, 1, " [--reason TEXT]"},
    {"resume", "RESUME", NULL, 0, 0, 0, 0, ""},
    {"drain", "DRAIN", NULL, 1, 0, 0, 0, " NODE"},
    {"remove", "REMOVE", NULL, 1, 0, 0, 0, " NODE"},
    {"unquarantine", "UNQUARANTINE", NULL, 1, 0, 0, 0, " NODE"},
    {"move", "MOVE", NULL, 2, 1, 0, 0, " PARTITION NODE"},
    {"cancel", "CANCEL", NULL, 1, 0, 0, 0, " MOVE"},
    {"moves", "MOVES", NULL, 0, 1, 0, 0, " [--all] [--watch]", 1},
    {"promote", "PROMOTE", NULL, 2, 1, 0, 0, " PARTITION NODE"},
    {"failover", "FAILOVER", NULL, 1, 0, 0, 0, " PARTITION [--to NODE] [--unclean]", 0, 1},
};

int moves_watch(redisContext *c, int all); /* moves_watch.c */

typedef struct admin_args {
    addrlist coords;
    int json, all, watch;
    const char *node, *reason, *password, *to;
    int unclean;
    const char *pos[2];
    int npos;
} admin_args;

static int usage(const admin_cmd *d, const char *bad) {
    fprintf(stderr,
            "keel %s: %s\nusage: keel %s%s --coord HOST:PORT[,HOST:PORT...]%s [--password PW]\n",
            d->cli, bad, d->cli, d->usage, d->json ? " [--json]" : "");
    return 2;
}

static int parse_args(const admin_cmd *d, int argc, char **argv, admin_args *a) {
    memset(a, 0, sizeof *a);
    a->coords.n = 1;
    snprintf(a->coords.a[0].host, sizeof a->coords.a[0].host, "127.0.0.1");
    a->coords.a[0].port = 7400;
    a->password = getenv("KEEL_PASSWORD");
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (d->json && !strcmp(f, "--json"))
            a->json = 1;
        else if (!strcmp(f, "--coord") && v) {
            char why[384], msg[448];
            if (addrlist_parse(v, &a->coords, why, sizeof why)) {
                snprintf(msg, sizeof msg,
                         "--coord must be HOST:PORT[,HOST:PORT...] (at most %d): %s", ADDRLIST_MAX,
                         why);
                return usage(d, msg);
            }
            i++;
        } else if (d->node && !strcmp(f, "--node") && v)
            a->node = argv[++i];
        else if (d->listing && !strcmp(f, "--all"))
            a->all = 1;
        else if (d->listing && !strcmp(f, "--watch"))
            a->watch = 1;
        else if (d->reason && !strcmp(f, "--reason") && v)
            a->reason = argv[++i];
        else if (d->failover && !strcmp(f, "--to") && v)
            a->to = argv[++i];
        else if (d->failover && !strcmp(f, "--unclean"))
            a->unclean = 1;
        else if (!strcmp(f, "--password") && v)
            a->password = argv[++i];
        else if (f[0] != '-' && a->npos < d->positionals)
            a->pos[a->npos++] = f;
        else {
            char msg[128];
            snprintf(msg, sizeof msg, "unexpected argument '%.64s'", f);
            return usage(d, msg);
        }
    }
    if (a->npos != d->positionals) return usage(d, "missing argument");
    return 0;
}

/* One pass over the addresses for dial_leader: a connection to the leader,
 * or NULL with what each dial met in tried[*ntried]. *final: a leader
 * refused us (a bad password), do not retry. *standby: a standby answered
 * (an election may be under way, worth another pass). */
static redisContext *dial_round(const admin_cmd *d, const admin_args *a, struct timeval tv,
                                char tried[][384], int *ntried, int *final, int *standby) {
    addrlist l = a->coords;
    int next = 0, redirect = -1;
    *ntried = 0;
    for (int dials = 0; dials < ADDRLIST_MAX; dials++) {
        int i = redirect >= 0 ? redirect : next++;
        redirect = -1;
        if (i >= l.n) break;
        const addrlist_entry *e = &l.a[i];
        redisContext *c = redisConnectWithTimeout(e->host, e->port, tv);
        const char *why = c ? c->errstr : "out of memory";
        redisReply *r = NULL;
        if (c && !c->err) {
            redisSetTimeout(c, tv);
            r = a->password ? redisCommand(c, "AUTH %s", a->password) : redisCommand(c, "PING");
            if (r && r->type != REDIS_REPLY_ERROR) {
                freeReplyObject(r);
                return c;
            }
            why = r ? r->str : c->errstr;
            addrlist_entry to;
            int nl = r ? notleader_parse(r->str, r->len, &to, NULL, 0) : KEEL_EINVAL;
            if (nl == 0) redirect = addrlist_find_or_add(&l, &to);
            if (nl != KEEL_EINVAL || !r) *standby = 1; /* or closed as it took over */
            if (r && nl == KEEL_EINVAL) { /* the leader refused (a bad password): final */
                fprintf(stderr, "keel %s: %s\n", d->cli, r->str);
                *final = 1;
                freeReplyObject(r);
                redisFree(c);
                return NULL;
            }
        }
        snprintf(tried[(*ntried)++], 384, "%s:%d: %s", e->host, e->port, why);
        freeReplyObject(r);
        redisFree(c);
    }
    return NULL;
}

/* A connection to the leading coordinator, AUTHed when a password is
 * given, or NULL after printing every address tried and why each failed.
 * Addresses are tried in list order; a -NOTLEADER reply to AUTH or PING
 * naming an address sends us there next (appended to the list when it is
 * not in it), at most ADDRLIST_MAX dials a pass. When a standby answered
 * but no leader was reached (an election under way: the old leader's lease
 * has not run out, or the new one is opening the map), passes repeat every
 * 250 ms for up to ELECTION_WAIT_MS. */
#define ELECTION_WAIT_MS 5000
static redisContext *dial_leader(const admin_cmd *d, const admin_args *a, struct timeval tv) {
    char tried[ADDRLIST_MAX][384];
    int ntried = 0;
    uint64_t t0 = keel_mono_us();
    for (;;) {
        int final = 0, standby = 0;
        redisContext *c = dial_round(d, a, tv, tried, &ntried, &final, &standby);
        if (c) return c;
        if (final) return NULL;
        if (!standby || keel_mono_us() - t0 >= ELECTION_WAIT_MS * 1000ull) break;
        usleep(250 * 1000);
    }
    if (ntried == 1) {
        fprintf(stderr, "keel %s: cannot reach the coordinator at %s\n", d->cli, tried[0]);
        return NULL;
    }
    fprintf(stderr, "keel %s: cannot reach any of the %d coordinators:\n", d->cli, ntried);
    for (int i = 0; i < ntried; i++)
        fprintf(stderr, "  %s\n", tried[i]);
    return NULL;
}

static int run(const admin_cmd *d, const admin_args *a) {
    struct timeval tv = {5, 0};
    redisContext *c = dial_leader(d, a, tv);
    if (!c) return 1;
    int status = 1;
    redisReply *r = NULL;
    if (a->watch) {
        status = moves_watch(c, a->all);
        goto out;
    }
    const char *argv[MAX_ARGS] = {d->wire};
    int n = 1;
    if (d->sub) argv[n++] = d->sub;
    for (int i = 0; i < a->npos; i++)
        argv[n++] = a->pos[i];
    if (a->node) argv[n++] = "NODE", argv[n++] = a->node;
    if (a->reason) argv[n++] = a->reason;
    if (a->all) argv[n++] = "ALL";
    if (a->to) argv[n++] = "TO", argv[n++] = a->to;
    if (a->unclean) argv[n++] = "UNCLEAN";
    if (a->json) argv[n++] = "JSON";
    /* failover waits out the old leader's lease (replica_lease_ms, up to 60 s);
     * promote ends within 30 s (coord_repmove.c PROMOTE_TIMEOUT_MS) */
    if (d->failover || !strcmp(d->cli, "promote")) {
        struct timeval longer = {70, 0};
        redisSetTimeout(c, longer);
    }
    r = redisCommandArgv(c, n, argv, NULL);
    if (!r) {
        fprintf(stderr, "keel %s: %s\n", d->cli, c->errstr);
    } else if (r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "keel %s: %s\n", d->cli, r->str);
    } else if (r->type == REDIS_REPLY_INTEGER) {
        printf("%lld\n", r->integer);
        status = 0;
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        fwrite(r->str, 1, r->len, stdout);
        if (r->len && r->str[r->len - 1] != '\n') putchar('\n');
        status = 0;
    } else {
        fprintf(stderr, "keel %s: unexpected reply type %d\n", d->cli, r->type);
    }
out:
    freeReplyObject(r);
    redisFree(c);
    return status;
}

/* Entry point for every admin subcommand: argv[-1] names it (main.c passes
 * the arguments after the subcommand name, and the name in self_name). */
int admin_main(const char *name, int argc, char **argv) {
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(cmds[i].cli, name)) continue;
        admin_args a;
        int rc = parse_args(&cmds[i], argc, argv, &a);
        return rc ? rc : run(&cmds[i], &a);
    }
    fprintf(stderr, "keel: no admin command '%s'\n", name);
    return 2;
}

#define ADMIN_MAIN(fn, name)                                                                       \
    int fn(int argc, char **argv, const char *self) {                                              \
        (void)self;                                                                                \
        return admin_main(name, argc, argv);                                                       \
    }
ADMIN_MAIN(status_main, "status")
ADMIN_MAIN(nodes_main, "nodes")
ADMIN_MAIN(partitions_main, "partitions")
ADMIN_MAIN(set_main, "set")
ADMIN_MAIN(unset_main, "unset")
ADMIN_MAIN(pause_main, "pause")
ADMIN_MAIN(resume_main, "resume")
ADMIN_MAIN(drain_main, "drain")
ADMIN_MAIN(remove_main, "remove")
ADMIN_MAIN(unquarantine_main, "unquarantine")
ADMIN_MAIN(move_main, "move")
ADMIN_MAIN(cancel_main, "cancel")
ADMIN_MAIN(moves_main, "moves")
ADMIN_MAIN(promote_main, "promote")
ADMIN_MAIN(failover_main, "failover")
