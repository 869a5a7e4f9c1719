/* demo.c - `keel demo`: until the coordinator exists, one node that serves
 * every partition. Starts `keel node --own all` as a child in a temporary
 * directory, loads sample keys through hiredis (pipelined), prints how to
 * connect, and runs until Ctrl-C or --exit-after seconds. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int parse_pos(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "keel demo: %s must be an integer from %ld to %ld, got '%s'\n", flag, lo,
                hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

static redisContext *connect_retry(int port, double seconds) {
    struct timespec ts = {0, 50 * 1000000};
    for (int i = 0; i < seconds * 20; i++) {
        redisContext *c = redisConnect("127.0.0.1", port);
        if (c && !c->err) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            if (ok) return c;
        }
        redisFree(c);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Loads n keys "demo:<i>" in pipelined batches. Returns keys acknowledged. */
static long load_keys(redisContext *c, long n) {
    long acked = 0;
    const long batch = 1000;
    for (long base = 0; base < n; base += batch) {
        long m = n - base < batch ? n - base : batch;
        for (long i = 0; i < m; i++)
            redisAppendCommand(c, "SET demo:%ld value-%ld", base + i, base + i);
        for (long i = 0; i < m; i++) {
            redisReply *r;
            if (redisGetReply(c, (void **)&r) != REDIS_OK) return acked;
            acked += r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
        }
    }
    return acked;
}

int demo_main(int argc, char **argv, const char *self) {
    long port = 7000, keys = 10000, exit_after = 0;
    const char *fsync = "always";
    for (int i = 0; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help")) {
            printf(
                "usage: keel demo [--port N] [--keys K] [--fsync MODE] [--exit-after SECONDS]\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "keel demo: unknown flag or missing value: %s\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--port")) {
            if (parse_pos("--port", v, 1, 65535, &port)) return 2;
        } else if (!strcmp(argv[i], "--keys")) {
            if (parse_pos("--keys", v, 0, 100000000, &keys)) return 2;
        } else if (!strcmp(argv[i], "--exit-after")) {
            if (parse_pos("--exit-after", v, 1, 1000000, &exit_after)) return 2;
        } else if (!strcmp(argv[i], "--fsync")) {
            fsync = v;
        } else {
            fprintf(stderr, "keel demo: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    char dir[] = "/tmp/keel-demo-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("keel demo: mkdtemp");
        return 1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        snprintf(exe, sizeof exe, "%s", self);
    else
        exe[n] = 0;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%ld", port);
    pid_t child = fork();
    if (child == 0) {
        execl(exe, exe, "node", "--port", portstr, "--dir", dir, "--own", "all", "--fsync", fsync,
              (char *)NULL);
        perror("keel demo: exec");
        _exit(127);
    }
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    int status = 1;
    redisContext *c = connect_retry((int)port, 10);
    if (!c) {
        fprintf(stderr, "keel demo: node did not come up on port %ld\n", port);
        goto out;
    }
    long acked = load_keys(c, keys);
    redisReply *r = redisCommand(c, "DBSIZE");
    long long dbsize = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    printf("\nkeel demo: one node serving all 16384 slots on 127.0.0.1:%ld (data in %s)\n", port,
           dir);
    printf("  loaded %ld sample keys (demo:0 .. demo:%ld), DBSIZE=%lld\n", acked,
           keys ? keys - 1 : 0, dbsize);
    printf("  connect:  redis-cli -c -p %ld\n", port);
    printf("  try:      redis-cli -c -p %ld GET demo:42\n", port);
    printf("            redis-cli -c -p %ld CLUSTER SLOTS\n", port);
    printf("            redis-benchmark -p %ld -t set,get -n 100000 -q\n", port);
    printf("  %s\n\n", exit_after ? "stopping after --exit-after" : "press Ctrl-C to stop");
    fflush(stdout);
    status = acked == keys && dbsize == keys ? 0 : 1;
    time_t until = exit_after ? time(NULL) + exit_after : 0;
    while (!stop_requested && (!until || time(NULL) < until)) {
        int st;
        if (waitpid(child, &st, WNOHANG) == child) {
            fprintf(stderr, "keel demo: node exited unexpectedly\n");
            child = 0;
            status = 1;
            break;
        }
        usleep(100 * 1000);
    }
out:
    if (child > 0) {
        kill(child, SIGTERM);
        waitpid(child, NULL, 0);
    }
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "keel demo: could not remove %s\n", dir);
    return status;
}
