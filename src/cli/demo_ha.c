/* demo_ha.c - see demo_ha.h. Processes are spawned with fork/exec, output to
 * DIR/<name>.log; nothing here blocks for longer than a dial or a short
 * sleep, so the demo's screen keeps moving through the failover. */
#include "cli/demo_ha.h"
#include "core/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ETCD_CLIENT(h, i) ((h)->base + 20 + (i))
#define ETCD_PEER(h, i) ((h)->base + 23 + (i))

int demo_ha_coord_port(const demo_ha *h, int i) {
    return (int)(i == 0 ? h->base : h->base + 9 + i);
}

static int http_port(const demo_ha *h, int i) {
    return (int)(i == 0 ? h->base + 80 : h->base + 89 + i);
}

int demo_ha_find_etcd(demo_ha *h) {
    const char *env = getenv("KEEL_ETCD");
    if (env && access(env, X_OK) == 0) return snprintf(h->etcd, sizeof h->etcd, "%s", env), 1;
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    while (path && *path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        snprintf(buf, sizeof buf, "%.*s/etcd", (int)n, path);
        if (n && access(buf, X_OK) == 0) return snprintf(h->etcd, sizeof h->etcd, "%s", buf), 1;
        path = c ? c + 1 : NULL;
    }
    if (access("/usr/bin/etcd", X_OK) == 0)
        return snprintf(h->etcd, sizeof h->etcd, "/usr/bin/etcd"), 1;
    return 0;
}

static pid_t spawn_exe(const char *exe, const char *log, char *const args[]) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    execv(exe, args);
    _exit(127);
}

static void etcd_urls(const demo_ha *h, char *out, size_t cap) {
    snprintf(out, cap, "http://127.0.0.1:%ld,http://127.0.0.1:%ld,http://127.0.0.1:%ld",
             ETCD_CLIENT(h, 0), ETCD_CLIENT(h, 1), ETCD_CLIENT(h, 2));
}

static void start_member(demo_ha *h, int i) {
    char name[8], data[PATH_MAX], curl[64], purl[64], cluster[256], log[PATH_MAX];
    snprintf(name, sizeof name, "e%d", i + 1);
    snprintf(data, sizeof data, "%s/etcd-e%d", h->dir, i + 1);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%ld", ETCD_CLIENT(h, i));
    snprintf(purl, sizeof purl, "http://127.0.0.1:%ld", ETCD_PEER(h, i));
    snprintf(cluster, sizeof cluster,
             "e1=http://127.0.0.1:%ld,e2=http://127.0.0.1:%ld,e3=http://127.0.0.1:%ld",
             ETCD_PEER(h, 0), ETCD_PEER(h, 1), ETCD_PEER(h, 2));
    snprintf(log, sizeof log, "%s/etcd-e%d.log", h->dir, i + 1);
    char *args[] = {h->etcd,     "--name",
                    name,        "--data-dir",
                    data,        "--listen-client-urls",
                    curl,        "--advertise-client-urls",
                    curl,        "--listen-peer-urls",
                    purl,        "--initial-advertise-peer-urls",
                    purl,        "--initial-cluster",
                    cluster,     "--initial-cluster-state",
                    "new",       "--initial-cluster-token",
                    "keel-demo", "--log-level",
                    "warn",      NULL};
    h->etcd_pid[i] = spawn_exe(h->etcd, log, args);
}

static void start_coord(demo_ha *h, int i) {
    char id[8], cdir[PATH_MAX], port[16], hport[16], urls[256], log[PATH_MAX];
    snprintf(id, sizeof id, "c%d", i + 1);
    snprintf(cdir, sizeof cdir, "%s/coord-c%d", h->dir, i + 1);
    snprintf(port, sizeof port, "%d", demo_ha_coord_port(h, i));
    snprintf(hport, sizeof hport, "%d", http_port(h, i));
    snprintf(log, sizeof log, "%s/coord-c%d.log", h->dir, i + 1);
    etcd_urls(h, urls, sizeof urls);
    char *args[] = {(char *)h->exe, "coord",  "--dir",  cdir, "--port", port,
                    "--http-port",  hport,    "--etcd", urls, "--id",   id,
                    "--audit-log",  h->audit, NULL};
    h->coord_pid[i] = spawn_exe(h->exe, log, args);
}

static int run_wait(const char *exe, const char *log, char *const args[]) {
    int st;
    pid_t pid = spawn_exe(exe, log, args);
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* DIR/coord-cN: a copy of the directory --init made (secret, key, the etcd
 * cluster id), one per coordinator, as on separate machines. */
static int copy_dirs(demo_ha *h, const char *src) {
    for (int i = 0; i < DEMO_HA_N; i++) {
        char cmd[3 * PATH_MAX];
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s/coord-c%d'", src, h->dir, i + 1);
        if (system(cmd) != 0) return -1;
    }
    return 0;
}

int demo_ha_start(demo_ha *h, long base, const char *dir, const char *exe) {
    h->base = base, h->dir = dir, h->exe = exe, h->killed = -1;
    snprintf(h->audit, sizeof h->audit, "%s/audit.log", dir);
    snprintf(h->coord_list, sizeof h->coord_list, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             demo_ha_coord_port(h, 0), demo_ha_coord_port(h, 1), demo_ha_coord_port(h, 2));
    for (int i = 0; i < DEMO_HA_N; i++)
        start_member(h, i);
    char init_dir[PATH_MAX], urls[256], log[PATH_MAX];
    snprintf(init_dir, sizeof init_dir, "%s/coord-init", dir);
    snprintf(log, sizeof log, "%s/coord-init.log", dir);
    etcd_urls(h, urls, sizeof urls);
    char parts[16];
    snprintf(parts, sizeof parts, "%ld", h->partitions ? h->partitions : 1024);
    /* RF 1: --ha shows the control plane's failover; --replicas shows a node's */
    char *init[] = {(char *)exe, "coord",        "--init", "--dir",      init_dir, "--etcd",
                    urls,        "--partitions", parts,    "--replicas", "1",      NULL};
    int rc = -1;
    for (int t = 0; t < 60 && rc != 0; t++) { /* the members elect a leader first */
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", init_dir);
        if (t && system(cmd) != 0) break;
        if ((rc = run_wait(exe, log, init)) != 0) usleep(500 * 1000);
    }
    if (rc != 0 || copy_dirs(h, init_dir)) {
        fprintf(stderr, "keel demo --ha: could not create the cluster on etcd (see %s)\n", log);
        return -1;
    }
    start_coord(h, 0);
    for (int t = 0; t < 100 && demo_ha_leader(h) != 0; t++) /* c1 leads: then the standbys */
        usleep(100 * 1000);
    start_coord(h, 1);
    start_coord(h, 2);
    return 0;
}

static redisContext *dial_port(int port) {
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        return c;
    }
    redisFree(c);
    return NULL;
}

/* 1 when c answers PING as the leader (a standby says -NOTLEADER). */
static int is_leader(redisContext *c) {
    redisReply *r = c ? redisCommand(c, "PING") : NULL;
    int ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return ok;
}

int demo_ha_leader(demo_ha *h) {
    for (int i = 0; i < DEMO_HA_N; i++) {
        if (h->coord_pid[i] <= 0) continue;
        redisContext *c = dial_port(demo_ha_coord_port(h, i));
        int ok = is_leader(c);
        redisFree(c);
        if (ok) return i;
    }
    return -1;
}

redisContext *demo_ha_dial(demo_ha *h, int wait_ms) {
    uint64_t end = keel_mono_us() + (uint64_t)wait_ms * 1000;
    do {
        for (int i = 0; i < DEMO_HA_N; i++) {
            if (h->coord_pid[i] <= 0) continue;
            redisContext *c = dial_port(demo_ha_coord_port(h, i));
            if (is_leader(c)) return c;
            redisFree(c);
        }
        usleep(100 * 1000);
    } while (keel_mono_us() < end);
    return NULL;
}

int demo_ha_kill_leader(demo_ha *h) {
    int i = demo_ha_leader(h);
    if (i < 0) return -1;
    h->kill_wall_ms = keel_wall_ms();
    kill(h->coord_pid[i], SIGKILL);
    waitpid(h->coord_pid[i], NULL, 0);
    h->coord_pid[i] = 0;
    h->killed = i;
    return 0;
}

int demo_ha_restart_killed(demo_ha *h) {
    if (h->killed < 0) return 0;
    if (h->restarted) return 1;
    int l = demo_ha_leader(h);
    if (l < 0) return 0;
    start_coord(h, h->killed);
    h->restarted = 1;
    return 1;
}

double demo_ha_failover_ms(const demo_ha *h, char *who, size_t cap) {
    if (h->killed < 0) return -1;
    FILE *f = fopen(h->audit, "r");
    if (!f) return -1;
    char line[512], killed[8];
    snprintf(killed, sizeof killed, "c%d", h->killed + 1);
    double out = -1;
    while (out < 0 && fgets(line, sizeof line, f)) {
        long long ts;
        char id[80];
        if (sscanf(line, "ts_ms=%lld who=%79s", &ts, id) != 2 || ts < h->kill_wall_ms ||
            !strcmp(id, killed) || !strstr(line, " kind=map_write op=bump_term ") ||
            !strstr(line, " rc=0 "))
            continue;
        out = (double)(ts - h->kill_wall_ms);
        snprintf(who, cap, "%s", id);
    }
    fclose(f);
    return out;
}

void demo_ha_stop(demo_ha *h) {
    for (int i = DEMO_HA_N - 1; i >= 0; i--)
        if (h->coord_pid[i] > 0) kill(h->coord_pid[i], SIGTERM), waitpid(h->coord_pid[i], NULL, 0);
    for (int i = DEMO_HA_N - 1; i >= 0; i--)
        if (h->etcd_pid[i] > 0) kill(h->etcd_pid[i], SIGTERM), waitpid(h->etcd_pid[i], NULL, 0);
    memset(h->coord_pid, 0, sizeof h->coord_pid);
    memset(h->etcd_pid, 0, sizeof h->etcd_pid);
}
