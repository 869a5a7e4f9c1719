/* demo.c - `keel demo`: a coordinator and N nodes on loopback in a temporary
 * directory. It creates the cluster, starts the processes (logs in the
 * directory), waits until every slot has an owner, loads sample keys through
 * the cluster map (each key to the node owning its slot, pipelined), prints
 * `keel status` and how to connect, and runs until Ctrl-C or --exit-after,
 * then stops every process with SIGTERM and removes the directory. */
#include "core/crc16.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEMO_MAX_NODES 9

static volatile sig_atomic_t stop_requested;
static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

typedef struct demo {
    long base, nodes, keys, exit_after;
    char dir[64], exe[PATH_MAX];
    pid_t pids[DEMO_MAX_NODES + 1]; /* [0] = coordinator */
    int slot_port[16384];
} demo;

static int parse_num(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "keel demo: %s must be an integer from %ld to %ld\n", flag, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_flags(demo *d, int argc, char **argv) {
    for (int i = 0; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--help")) {
            printf("usage: keel demo [--nodes N] [--keys K] [--port BASE] [--exit-after SECONDS]\n"
                   "  the coordinator listens on BASE (default 7000), node i on BASE+i\n");
            exit(0);
        }
        int rc = !strcmp(f, "--port")    ? parse_num(f, v, 1, 65000, &d->base)
                 : !strcmp(f, "--nodes") ? parse_num(f, v, 1, DEMO_MAX_NODES, &d->nodes)
                 : !strcmp(f, "--keys")  ? parse_num(f, v, 0, 100000000, &d->keys)
                 : !strcmp(f, "--exit-after")
                     ? parse_num(f, v, 1, 1000000, &d->exit_after)
                     : (fprintf(stderr, "keel demo: unknown flag %s\n", f), -1);
        if (rc) return -1;
    }
    return 0;
}

/* Runs `keel args...` with output to log (or inherited when NULL). */
static pid_t spawn(demo *d, const char *log, char *const args[]) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    }
    execv(d->exe, args);
    _exit(127);
}

static redisContext *dial(int port) {
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && !c->err) return c;
    redisFree(c);
    return NULL;
}

/* Reads CLUSTER SLOTS from node 1 into slot_port; returns slots covered. */
static int read_slots(demo *d) {
    redisContext *c = dial((int)d->base + 1);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    int covered = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *e = r->element[i];
        if (e->elements < 3) continue;
        int port = (int)e->element[2]->element[1]->integer;
        for (long s = e->element[0]->integer; s <= e->element[1]->integer; s++, covered++)
            d->slot_port[s] = port;
    }
    freeReplyObject(r);
    redisFree(c);
    return covered;
}

/* Each key to the node owning its slot, pipelined per node. */
static long load_keys(demo *d) {
    redisContext *ctx[DEMO_MAX_NODES + 1] = {0};
    long pending[DEMO_MAX_NODES + 1] = {0}, acked = 0;
    char key[32], val[32];
    for (long i = 0; i <= d->keys; i++) {
        int flush = i == d->keys || i % 1000 == 999;
        if (i < d->keys) {
            int n = snprintf(key, sizeof key, "demo:%ld", i);
            snprintf(val, sizeof val, "value-%ld", i);
            int k = d->slot_port[keel_key_slot(key, (size_t)n)] - (int)d->base;
            if (k < 1 || k > d->nodes || (!ctx[k] && !(ctx[k] = dial((int)d->base + k)))) continue;
            redisAppendCommand(ctx[k], "SET %s %s", key, val);
            pending[k]++;
        }
        for (int k = 1; flush && k <= d->nodes; k++)
            for (; pending[k] > 0; pending[k]--) {
                redisReply *r;
                if (redisGetReply(ctx[k], (void **)&r) != REDIS_OK) break;
                acked += r->type == REDIS_REPLY_STATUS;
                freeReplyObject(r);
            }
    }
    for (int k = 1; k <= d->nodes; k++)
        redisFree(ctx[k]);
    return acked;
}

static void print_status(demo *d) {
    redisContext *c = dial((int)d->base);
    redisReply *r = c ? redisCommand(c, "STATUS") : NULL;
    if (r && r->type == REDIS_REPLY_STRING) printf("%s", r->str);
    freeReplyObject(r);
    redisFree(c);
}

static int start_cluster(demo *d) {
    char coordport[16], cport[32], secret[128], log[128];
    snprintf(coordport, sizeof coordport, "%ld", d->base);
    snprintf(cport, sizeof cport, "127.0.0.1:%ld", d->base);
    snprintf(secret, sizeof secret, "%s/cluster.secret", d->dir);
    char *init[] = {d->exe, "coord", "--init", "--dir", d->dir, NULL};
    snprintf(log, sizeof log, "%s/coord.log", d->dir);
    int st;
    if (waitpid(spawn(d, log, init), &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) return -1;
    char *coord[] = {d->exe, "coord", "--dir", d->dir, "--port", coordport, NULL};
    d->pids[0] = spawn(d, log, coord);
    for (long i = 1; i <= d->nodes; i++) {
        char port[16], ndir[96], id[16];
        snprintf(port, sizeof port, "%ld", d->base + i);
        snprintf(ndir, sizeof ndir, "%s/n%ld", d->dir, i);
        snprintf(id, sizeof id, "n%ld", i);
        snprintf(log, sizeof log, "%s/n%ld.log", d->dir, i);
        char *node[] = {d->exe, "node",          "--port", port,   "--dir", ndir, "--coord",
                        cport,  "--secret-file", secret,   "--id", id,      NULL};
        d->pids[i] = spawn(d, log, node);
    }
    for (int t = 0; t < 300 && !stop_requested; t++) { /* up to 30 s for placement */
        if (read_slots(d) == 16384) return 0;
        usleep(100 * 1000);
    }
    return -1;
}

static void stop_cluster(demo *d) {
    for (long i = d->nodes; i >= 0; i--)
        if (d->pids[i] > 0) kill(d->pids[i], SIGTERM), waitpid(d->pids[i], NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    if (system(cmd) != 0) fprintf(stderr, "keel demo: could not remove %s\n", d->dir);
}

int demo_main(int argc, char **argv, const char *self) {
    demo d = {.base = 7000, .nodes = 3, .keys = 10000};
    if (parse_flags(&d, argc, argv)) return 2;
    snprintf(d.dir, sizeof d.dir, "/tmp/keel-demo-XXXXXX");
    if (!mkdtemp(d.dir)) return perror("keel demo: mkdtemp"), 1;
    ssize_t n = readlink("/proc/self/exe", d.exe, sizeof d.exe - 1);
    if (n > 0)
        d.exe[n] = 0;
    else
        snprintf(d.exe, sizeof d.exe, "%s", self);
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    int status = 1;
    if (start_cluster(&d)) {
        fprintf(stderr, "keel demo: the cluster did not come up; logs:\n");
        char cmd[128];
        snprintf(cmd, sizeof cmd, "tail -n 5 %s/*.log >&2", d.dir);
        if (system(cmd)) {
        }
        stop_cluster(&d);
        return 1;
    }
    long acked = load_keys(&d);
    usleep(1500 * 1000); /* one heartbeat, so the status shows the keys */
    printf("\nkeel demo: a coordinator on 127.0.0.1:%ld and %ld nodes on ports %ld-%ld "
           "(data and logs in %s)\n",
           d.base, d.nodes, d.base + 1, d.base + d.nodes, d.dir);
    printf("loaded %ld of %ld sample keys (demo:0 .. demo:%ld) through the cluster map\n\n", acked,
           d.keys, d.keys ? d.keys - 1 : 0);
    print_status(&d);
    printf("\nconnect:  redis-cli -c -p %ld GET demo:42\n", d.base + 1);
    printf("          build/keel status --coord 127.0.0.1:%ld\n", d.base);
    printf("          build/keel partitions --coord 127.0.0.1:%ld --node n1\n", d.base);
    printf("%s\n\n", d.exit_after ? "stopping after --exit-after" : "press Ctrl-C to stop");
    fflush(stdout);
    status = acked == d.keys ? 0 : 1;
    time_t until = d.exit_after ? time(NULL) + d.exit_after : 0;
    while (!stop_requested && (!until || time(NULL) < until)) {
        int st;
        for (long i = 0; i <= d.nodes; i++)
            if (d.pids[i] > 0 && waitpid(d.pids[i], &st, WNOHANG) == d.pids[i]) {
                fprintf(stderr, "keel demo: a %s exited unexpectedly\n",
                        i ? "node" : "coordinator");
                d.pids[i] = 0;
                status = 1;
                stop_requested = 1;
            }
        usleep(100 * 1000);
    }
    stop_cluster(&d);
    return status;
}
