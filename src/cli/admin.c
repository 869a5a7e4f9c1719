/* admin.c - `keel status`, `keel nodes`, `keel partitions`: operator views
 * fetched from the coordinator over RESP (hiredis) and printed as text or,
 * with --json, as the JSON the coordinator renders. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct admin_args {
    char host[256];
    int port;
    int json;
    const char *node;
    const char *password;
} admin_args;

static int parse_coord(const char *v, admin_args *a) {
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v || (size_t)(colon - v) >= sizeof a->host) return -1;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || *end || p <= 0 || p > 65535) return -1;
    memcpy(a->host, v, (size_t)(colon - v));
    a->host[colon - v] = 0;
    a->port = (int)p;
    return 0;
}

static int parse_args(const char *cmd, int argc, char **argv, admin_args *a) {
    memset(a, 0, sizeof *a);
    snprintf(a->host, sizeof a->host, "127.0.0.1");
    a->port = 7400;
    a->password = getenv("KEEL_PASSWORD");
    for (int i = 0; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--json")) {
            a->json = 1;
        } else if (!strcmp(argv[i], "--coord") && v) {
            if (parse_coord(v, a)) {
                fprintf(stderr, "keel %s: --coord must be HOST:PORT, got '%s'\n", cmd, v);
                return -1;
            }
            i++;
        } else if (!strcmp(argv[i], "--node") && v && !strcmp(cmd, "partitions")) {
            a->node = v;
            i++;
        } else if (!strcmp(argv[i], "--password") && v) {
            a->password = v;
            i++;
        } else {
            fprintf(stderr,
                    "keel %s: unknown flag or missing value '%s'\n"
                    "usage: keel %s --coord HOST:PORT [--json]%s [--password PW]\n",
                    cmd, argv[i], cmd, !strcmp(cmd, "partitions") ? " [--node ID]" : "");
            return -1;
        }
    }
    return 0;
}

/* Runs `cmd` against the coordinator and prints its reply. */
static int admin_run(const char *cmd, int argc, char **argv) {
    admin_args a;
    if (parse_args(cmd, argc, argv, &a)) return 2;
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout(a.host, a.port, tv);
    if (!c || c->err) {
        fprintf(stderr, "keel %s: cannot reach the coordinator at %s:%d: %s\n", cmd, a.host, a.port,
                c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }
    redisSetTimeout(c, tv);
    int status = 1;
    redisReply *r = NULL;
    if (a.password) {
        r = redisCommand(c, "AUTH %s", a.password);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            fprintf(stderr, "keel %s: %s\n", cmd, r ? r->str : c->errstr);
            goto out;
        }
        freeReplyObject(r);
    }
    const char *argv2[5] = {cmd};
    int n = 1;
    if (a.node) argv2[n++] = "NODE", argv2[n++] = a.node;
    if (a.json) argv2[n++] = "JSON";
    r = redisCommandArgv(c, n, argv2, NULL);
    if (!r) {
        fprintf(stderr, "keel %s: %s\n", cmd, c->errstr);
    } else if (r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "keel %s: %s\n", cmd, r->str);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        fwrite(r->str, 1, r->len, stdout);
        if (r->len && r->str[r->len - 1] != '\n') putchar('\n');
        status = 0;
    } else {
        fprintf(stderr, "keel %s: unexpected reply type %d\n", cmd, r->type);
    }
out:
    freeReplyObject(r);
    redisFree(c);
    return status;
}

int status_main(int argc, char **argv, const char *self) {
    return admin_run("status", argc, argv);
}
int nodes_main(int argc, char **argv, const char *self) {
    return admin_run("nodes", argc, argv);
}
int partitions_main(int argc, char **argv, const char *self) {
    return admin_run("partitions", argc, argv);
}
