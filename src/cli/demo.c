/* demo.c - `keel demo`: Keel rebalancing itself, live, on loopback.
 *
 *  1. a coordinator and N nodes (default 4) in a temporary directory, with
 *     the rebalance loop on;
 *  2. K keys (default 500000) loaded through the cluster map, pipelined;
 *  3. a steady background load (demo_client.c) that records every
 *     acknowledged write and every latency;
 *  4. one more node joins; the screen shows each move with a progress bar
 *     and the imbalance falling, until the cluster is balanced;
 *  5. every key is read back, and a summary compares latency before and
 *     during the rebalance, bytes moved against the floor, the longest write
 *     pause, client errors and lost writes (must be 0).
 * Then it stays up for redis-cli until Ctrl-C, or stops after --exit-after
 * seconds, stops every process with SIGTERM and removes the directory.
 *
 * With --ha (demo_ha.h) the coordinator is three, on three etcd members,
 * and the leading one is killed with SIGKILL during the join; the summary
 * shows the failover.
 *
 * The dashboard (docs/dashboard.md) is up the whole time on the
 * coordinator's HTTP port, BASE+80, and node i serves /metrics on BASE+80+i:
 * the ports contrib/prometheus/keel.yml scrapes for the default BASE 7000. */
#include "cli/demo_client.h"
#include "cli/demo_ha.h"
#include "cli/demo_rf.h"
#include "core/clock.h"
#include "core/crc16.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEMO_MAX_NODES 9
#define REBALANCE_TIMEOUT_S 600
#define HTTP_OFFSET 80    /* the coordinator's HTTP port is BASE+80, node i's metrics BASE+80+i */
#define DEMO_RF_DEFAULT 3 /* copies of each partition (--replicas; 1 with --ha) */
#define DEMO_DEAD_AFTER_MS 5000 /* node_dead_after_ms at RF > 1: RF is restored within the demo */

int moves_render(redisContext *c, int all, int tty, const char *header); /* moves_watch.c */

static volatile sig_atomic_t stop_requested;
static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

typedef struct demo {
    long base, nodes, keys, exit_after, value_size, join, partitions, replicas;
    char dir[64], exe[PATH_MAX];
    pid_t pids[DEMO_MAX_NODES + 1]; /* [0] = coordinator */
    int slot_port[16384];
    demo_ha ha; /* --ha */
    demo_rf rf; /* --replicas > 1: a node killed after the rebalance */
    int replicas_given;
    /* --ha: the moves unfinished when the leader was killed, and how many
     * had committed by then */
    double inflight_at_kill[4096];
    int ninflight_at_kill, committed_at_kill;
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
        if (!strcmp(f, "--ha")) { /* takes no value */
            d->ha.on = 1;
            if (!d->replicas_given) d->replicas = 1; /* the control plane's failover alone */
            i--;
            continue;
        }
        if (!strcmp(f, "--help")) {
            printf("usage: keel demo [--nodes N] [--keys K] [--value-size B] [--join 0|1]\n"
                   "                 [--port BASE] [--exit-after SECONDS] [--partitions P] [--ha]\n"
                   "                 [--replicas RF]\n"
                   "  N nodes (default 4) and K keys (default 500000) of B bytes (default 100);\n"
                   "  then one more node joins and the cluster rebalances itself (--join 0: no)\n"
                   "  the coordinator listens on BASE (default 7000), node i on BASE+i;\n"
                   "  the dashboard is at http://127.0.0.1:BASE+80/ and node i serves\n"
                   "  /metrics on BASE+80+i\n"
                   "  --ha: three etcd members (client ports BASE+20..22) and three\n"
                   "  coordinators (BASE, BASE+10, BASE+11); the leader is killed with\n"
                   "  SIGKILL during the join and the summary shows the failover\n"
                   "  --replicas RF: copies of each partition (default %d); above 1, after\n"
                   "  the rebalance the node leading the most partitions is killed with\n"
                   "  SIGKILL and the summary shows the failover and RF restored\n",
                   DEMO_RF_DEFAULT);
            exit(0);
        }
        int rc = !strcmp(f, "--port")         ? parse_num(f, v, 1, 65000, &d->base)
                 : !strcmp(f, "--nodes")      ? parse_num(f, v, 1, DEMO_MAX_NODES, &d->nodes)
                 : !strcmp(f, "--keys")       ? parse_num(f, v, 0, 100000000, &d->keys)
                 : !strcmp(f, "--value-size") ? parse_num(f, v, 1, 1 << 20, &d->value_size)
                 : !strcmp(f, "--join")       ? parse_num(f, v, 0, 1, &d->join)
                 : !strcmp(f, "--partitions") ? parse_num(f, v, 16, 16384, &d->partitions)
                 : !strcmp(f, "--replicas")
                     ? (d->replicas_given = 1, parse_num(f, v, 1, 7, &d->replicas))
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

/* Reads CLUSTER SLOTS from node i into slot_port[16384]; returns the slots
 * covered. */
static int read_slots_from(demo *d, long i, int *slot_port) {
    redisContext *c = dial((int)(d->base + i));
    if (!c) return 0;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    int covered = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *e = r->element[i];
        if (e->elements < 3) continue;
        int port = (int)e->element[2]->element[1]->integer;
        for (long s = e->element[0]->integer; s <= e->element[1]->integer; s++, covered++)
            slot_port[s] = port;
    }
    freeReplyObject(r);
    redisFree(c);
    return covered;
}

/* The cluster serves once every node has the whole map, and the same map:
 * node 1 alone having it is not enough, since another node learns the
 * placement with its next heartbeat (up to a second later) and would refuse
 * the load's first writes meanwhile. Returns 1 with slot_port filled. */
static int read_slots(demo *d) {
    static int other[16384];
    if (read_slots_from(d, 1, d->slot_port) != 16384) return 0;
    for (long i = 2; i <= d->nodes; i++)
        if (read_slots_from(d, i, other) != 16384 || memcmp(other, d->slot_port, sizeof other) != 0)
            return 0;
    return 1;
}

/* demo:<i> = "value-<i>:" padded with 'x' to value_size bytes. */
static int demo_value(const demo *d, long i, char *out, size_t cap) {
    int n = snprintf(out, cap, "value-%ld:", i);
    while ((size_t)n < (size_t)d->value_size && (size_t)n < cap - 1)
        out[n++] = 'x';
    out[n] = 0;
    return n;
}

/* Each key to the node owning its slot, pipelined per node. */
static long load_keys(demo *d) {
    redisContext *ctx[DEMO_MAX_NODES + 1] = {0};
    long pending[DEMO_MAX_NODES + 1] = {0}, acked = 0;
    char key[32], *val = malloc((size_t)d->value_size + 32);
    if (!val) return 0;
    for (long i = 0; i <= d->keys; i++) {
        int flush = i == d->keys || i % 1000 == 999;
        if (i < d->keys) {
            int n = snprintf(key, sizeof key, "demo:%ld", i);
            int vn = demo_value(d, i, val, (size_t)d->value_size + 32);
            int k = d->slot_port[keel_key_slot(key, (size_t)n)] - (int)d->base;
            if (k < 1 || k > d->nodes || (!ctx[k] && !(ctx[k] = dial((int)d->base + k)))) continue;
            redisAppendCommand(ctx[k], "SET %b %b", key, (size_t)n, val, (size_t)vn);
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
    free(val);
    return acked;
}

/* The coordinator, or with --ha whichever leads (waiting out a failover). */
static redisContext *coord_dial(demo *d) {
    return d->ha.on ? demo_ha_dial(&d->ha, 15000) : dial((int)d->base);
}

/* One admin command to the coordinator; returns the reply (caller frees). */
static redisReply *coord_cmd(demo *d, const char *fmt, ...) {
    redisContext *c = coord_dial(d);
    if (!c) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

static cJSON *coord_json(demo *d, const char *cmd) {
    redisReply *r = coord_cmd(d, cmd);
    cJSON *j = r && r->type == REDIS_REPLY_STRING ? cJSON_Parse(r->str) : NULL;
    freeReplyObject(r);
    return j;
}

static cJSON *rf_json(void *arg, const char *cmd) {
    return coord_json(arg, cmd);
}

/* RF > 1: kills the node leading the most partitions, with the load still
 * on; the summary lines come later (rf_summary). */
static void rf_kill(demo *d) {
    d->rf.rf = (int)d->replicas;
    d->rf.base = d->base;
    d->rf.partitions = d->partitions;
    if (!demo_rf_pick_victim(&d->rf, rf_json, d)) return;
    printf("\n>>> kill -9 of %s, which leads %d partitions; the load keeps writing\n", d->rf.victim,
           d->rf.led);
    fflush(stdout);
    int i = d->rf.victim_index;
    demo_rf_kill_and_measure(&d->rf, d->pids[i], (int)d->nodes, rf_json, d, 30000, 120000);
    waitpid(d->pids[i], NULL, 0);
    d->pids[i] = 0;
}

static int rf_summary(demo *d) {
    if (!d->rf.victim_index) {
        printf("node failure                no node was killed (none leads a partition)\n");
        return -1;
    }
    printf("failover                    kill -9 of %s (leader of %d partitions) -> writes to "
           "its partitions accepted again: ",
           d->rf.victim, d->rf.led);
    if (d->rf.failover_ms < 0)
        printf("not within 30 s\n");
    else
        printf("%.0f ms\n", d->rf.failover_ms);
    printf("RF restored                 %d copies of every partition, all in sync, none on %s: ",
           d->rf.rf, d->rf.victim);
    if (d->rf.restored_ms < 0)
        printf("not within 120 s\n");
    else
        printf("%.1f s after the kill (node_dead_after_ms %d)\n", d->rf.restored_ms / 1000.0,
               DEMO_DEAD_AFTER_MS);
    return d->rf.failover_ms < 0 || d->rf.restored_ms < 0 ? -1 : 0;
}

static void print_status(demo *d) {
    redisReply *r = coord_cmd(d, "STATUS");
    if (r && r->type == REDIS_REPLY_STRING) printf("%s", r->str);
    freeReplyObject(r);
}

static void spawn_node(demo *d, long i) {
    char port[16], ndir[96], id[16], log[128], cport[160], secret[128], mport[16];
    snprintf(cport, sizeof cport, "127.0.0.1:%ld", d->base);
    if (d->ha.on) snprintf(cport, sizeof cport, "%s", d->ha.coord_list);
    snprintf(mport, sizeof mport, "%ld", d->base + HTTP_OFFSET + i);
    snprintf(secret, sizeof secret, "%s/cluster.secret", d->dir);
    snprintf(port, sizeof port, "%ld", d->base + i);
    snprintf(ndir, sizeof ndir, "%s/n%ld", d->dir, i);
    snprintf(id, sizeof id, "n%ld", i);
    snprintf(log, sizeof log, "%s/n%ld.log", d->dir, i);
    char *node[17] = {
        /* [14], [15]: --audit-log with --ha */
        d->exe,          "node", "--port", port, "--dir",          ndir,  "--coord", cport,
        "--secret-file", secret, "--id",   id,   "--metrics-port", mport, NULL};
    if (d->ha.on) node[14] = "--audit-log", node[15] = d->ha.audit;
    d->pids[i] = spawn(d, log, node);
}

static int start_cluster(demo *d) {
    char coordport[16], httpport[16], log[128];
    snprintf(coordport, sizeof coordport, "%ld", d->base);
    snprintf(httpport, sizeof httpport, "%ld", d->base + HTTP_OFFSET);
    char secret[128];
    snprintf(secret, sizeof secret, "%s/cluster.secret", d->dir);
    if (d->ha.on) { /* the secret where spawn_node looks for it */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "cp '%s/coord-init/cluster.secret' '%s'", d->dir, secret);
        d->ha.partitions = d->partitions;
        if (demo_ha_start(&d->ha, d->base, d->dir, d->exe) || system(cmd) != 0) return -1;
        goto nodes;
    }
    char parts[16], rf[8];
    snprintf(parts, sizeof parts, "%ld", d->partitions);
    snprintf(rf, sizeof rf, "%ld", d->replicas);
    char *init[] = {d->exe,         "coord", "--init",     "--dir", d->dir,
                    "--partitions", parts,   "--replicas", rf,      NULL};
    snprintf(log, sizeof log, "%s/coord.log", d->dir);
    int st;
    if (waitpid(spawn(d, log, init), &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) return -1;
    char *coord[] = {d->exe,    "coord",       "--dir",  d->dir, "--port",
                     coordport, "--http-port", httpport, NULL};
    d->pids[0] = spawn(d, log, coord);
nodes:
    for (long i = 1; i <= d->nodes; i++)
        spawn_node(d, i);
    for (int t = 0; t < 300 && !stop_requested; t++) { /* up to 30 s for placement */
        if (read_slots(d)) return 0;
        usleep(100 * 1000);
    }
    return -1;
}

/* Stops pids[from..to] with SIGTERM at once, then SIGKILL to any still
 * running after wait_s. */
static void stop_pids(demo *d, long from, long to, int wait_s) {
    for (long i = from; i <= to; i++)
        if (d->pids[i] > 0) kill(d->pids[i], SIGTERM);
    uint64_t deadline = keel_mono_us() + (uint64_t)wait_s * 1000000u;
    for (long i = from; i <= to; i++) {
        if (d->pids[i] <= 0) continue;
        while (waitpid(d->pids[i], NULL, WNOHANG) == 0) {
            if (keel_mono_us() > deadline) {
                kill(d->pids[i], SIGKILL);
                waitpid(d->pids[i], NULL, 0);
                break;
            }
            usleep(20 * 1000);
        }
        d->pids[i] = 0;
    }
}

/* The nodes first, all at once (at RF > 1 each hands off its leaderships
 * through the coordinator, up to 10 s), then the coordinator.
 * KEEL_DEMO_KEEP=1 keeps the data and logs directory. */
static void stop_cluster(demo *d) {
    stop_pids(d, 1, DEMO_MAX_NODES, 15);
    stop_pids(d, 0, 0, 5);
    if (d->ha.on) demo_ha_stop(&d->ha);
    const char *keep = getenv("KEEL_DEMO_KEEP");
    if (keep && !strcmp(keep, "1")) {
        printf("data and logs kept in %s (KEEL_DEMO_KEEP=1)\n", d->dir);
        return;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    if (system(cmd) != 0) fprintf(stderr, "keel demo: could not remove %s\n", d->dir);
}

/* Per-node sums of the partitions' bytes and keys (from PARTITIONS JSON):
 * max/mean over the n nodes, and the movement floor for bytes
 * (sum of max(0, bytes - mean)). */
typedef struct spread {
    double bytes_ratio, keys_ratio, floor_bytes, total_bytes;
} spread;

static spread measure_spread(demo *d, long nodes) {
    spread sp = {0};
    double bytes[DEMO_MAX_NODES + 1] = {0}, keys[DEMO_MAX_NODES + 1] = {0};
    cJSON *arr = coord_json(d, "PARTITIONS JSON"), *p;
    cJSON_ArrayForEach(p, arr) {
        /* Every replica holds the partition's bytes (the leader alone at RF 1). */
        const cJSON *reps = cJSON_GetObjectItemCaseSensitive(p, "replicas"), *o;
        cJSON *owner_only = NULL;
        if (!cJSON_IsArray(reps) || cJSON_GetArraySize(reps) == 0) {
            owner_only = cJSON_CreateArray();
            const cJSON *ow = cJSON_GetObjectItemCaseSensitive(p, "owner");
            if (cJSON_IsString(ow))
                cJSON_AddItemToArray(owner_only, cJSON_CreateString(ow->valuestring));
            reps = owner_only;
        }
        cJSON_ArrayForEach(o, reps) {
            long k = cJSON_IsString(o) && o->valuestring[0] == 'n' ? atol(o->valuestring + 1) : 0;
            if (k < 1 || k > DEMO_MAX_NODES) continue;
            bytes[k] += cJSON_GetObjectItemCaseSensitive(p, "bytes")->valuedouble;
            keys[k] += cJSON_GetObjectItemCaseSensitive(p, "keys")->valuedouble;
        }
        cJSON_Delete(owner_only);
    }
    cJSON_Delete(arr);
    double tb = 0, tk = 0, mb = 0, mk = 0;
    for (long k = 1; k <= nodes; k++) {
        tb += bytes[k], tk += keys[k];
        mb = fmax(mb, bytes[k]), mk = fmax(mk, keys[k]);
    }
    sp.total_bytes = tb;
    sp.bytes_ratio = tb > 0 ? mb / (tb / (double)nodes) : 0;
    sp.keys_ratio = tk > 0 ? mk / (tk / (double)nodes) : 0;
    for (long k = 1; k <= nodes; k++)
        sp.floor_bytes += fmax(0, bytes[k] - tb / (double)nodes);
    return sp;
}

/* A number field of o, or 0 when absent (replica moves carry fewer). */
static double num_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

typedef struct move_sum {
    int in_flight, committed, aborted;
    double bytes, max_pause;
} move_sum;

/* Moves with an id above first_id. */
static move_sum sum_moves(demo *d, double first_id) {
    move_sum m = {0};
    cJSON *arr = coord_json(d, "MOVES JSON ALL"), *o;
    cJSON_ArrayForEach(o, arr) {
        if (num_of(o, "id") <= first_id) continue;
        const cJSON *stj = cJSON_GetObjectItemCaseSensitive(o, "state");
        const char *st = cJSON_IsString(stj) ? stj->valuestring : "";
        if (!strcmp(st, "COMMITTED") || !strcmp(st, "DONE")) {
            m.committed++;
            m.bytes += num_of(o, "total_bytes");
            m.max_pause = fmax(m.max_pause,
                               fmax(num_of(o, "write_pause_ms"), num_of(o, "transfer_pause_ms")));
        } else if (!strcmp(st, "ABORTED")) {
            m.aborted++;
        } else {
            m.in_flight++;
        }
    }
    cJSON_Delete(arr);
    return m;
}

static double last_move_id(demo *d) {
    double id = 0;
    cJSON *arr = coord_json(d, "MOVES JSON ALL"), *o;
    cJSON_ArrayForEach(o, arr) id = fmax(id, num_of(o, "id"));
    cJSON_Delete(arr);
    return id;
}

/* --ha: kills the leader once the join's first move is under way (or
 * done), noting the moves then unfinished; restarts it once another leads. */
static void ha_step(demo *d, const move_sum *ms, double first_id) {
    if (d->ha.killed >= 0) {
        if (!d->ha.restarted && demo_ha_restart_killed(&d->ha))
            printf("c%d started again: it rejoins as a standby\n", d->ha.killed + 1);
        return;
    }
    if (ms->in_flight == 0 && ms->committed == 0) return;
    cJSON *arr = coord_json(d, "MOVES JSON ALL"), *o;
    d->ninflight_at_kill = 0;
    cJSON_ArrayForEach(o, arr) {
        double id = cJSON_GetObjectItemCaseSensitive(o, "id")->valuedouble;
        const char *st = cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring;
        if (id > first_id && strcmp(st, "DONE") && strcmp(st, "COMMITTED") &&
            strcmp(st, "ABORTED") && d->ninflight_at_kill < 4096)
            d->inflight_at_kill[d->ninflight_at_kill++] = id;
    }
    cJSON_Delete(arr);
    d->committed_at_kill = ms->committed;
    if (demo_ha_kill_leader(&d->ha) == 0)
        printf("\n>>> kill -9 of the leading coordinator c%d (%d moves committed, %d in flight)\n",
               d->ha.killed + 1, ms->committed, d->ninflight_at_kill);
    fflush(stdout);
}

/* --ha: the failover lines of the summary. Returns 0 when it was seen. */
static int ha_summary(demo *d, const move_sum *ms) {
    if (d->ha.killed < 0) {
        printf("failover                    the leader was not killed (no move started)\n");
        return -1;
    }
    char who[80] = "?";
    double ms_fail = demo_ha_failover_ms(&d->ha, who, sizeof who);
    int done = 0, aborted = 0, open = 0;
    cJSON *arr = coord_json(d, "MOVES JSON ALL"), *o;
    cJSON_ArrayForEach(o, arr) {
        double id = cJSON_GetObjectItemCaseSensitive(o, "id")->valuedouble;
        const char *st = cJSON_GetObjectItemCaseSensitive(o, "state")->valuestring;
        for (int k = 0; k < d->ninflight_at_kill; k++)
            if (d->inflight_at_kill[k] == id) {
                if (!strcmp(st, "DONE") || !strcmp(st, "COMMITTED"))
                    done++;
                else if (!strcmp(st, "ABORTED"))
                    aborted++;
                else
                    open++;
            }
    }
    cJSON_Delete(arr);
    printf("failover                    kill -9 of c%d -> first map write by %s: ",
           d->ha.killed + 1, who);
    if (ms_fail < 0)
        printf("not seen\n");
    else
        printf("%.0f ms\n", ms_fail);
    printf("moves across the failover   %d in flight at the kill: %d finished, %d aborted, "
           "%d unfinished; %d committed after it\n",
           d->ninflight_at_kill, done, aborted, open, ms->committed - d->committed_at_kill);
    return ms_fail < 0 || open ? -1 : 0;
}

/* Adds node N+1 and shows the rebalance until nothing is in flight for a
 * while and the new node holds data. Returns seconds to balanced, or -1. */
static double watch_rebalance(demo *d, double first_id) {
    redisContext *c = coord_dial(d);
    if (!c) return -1;
    int tty = isatty(STDOUT_FILENO);
    double t0 = (double)keel_mono_us() / 1000;
    double quiet_since = 0, done_at = -1;
    while (!stop_requested) {
        double now = (double)keel_mono_us() / 1000;
        if (now - t0 > REBALANCE_TIMEOUT_S * 1000.0) break;
        spread sp = measure_spread(d, d->nodes);
        move_sum ms = sum_moves(d, first_id);
        char header[256];
        snprintf(header, sizeof header,
                 "node n%ld joined %.1f s ago; imbalance (max/mean bytes) %.3f, keys %.3f; "
                 "moves done %d, aborted %d\n",
                 d->nodes, (now - t0) / 1000.0, sp.bytes_ratio, sp.keys_ratio, ms.committed,
                 ms.aborted);
        int active = moves_render(c, 0, tty, header);
        if (!tty) fflush(stdout);
        if (active < 0 && d->ha.on) { /* the leader is gone: find the next one */
            redisFree(c);
            if (!(c = coord_dial(d))) break;
            continue;
        }
        if (active < 0) break;
        if (d->ha.on) ha_step(d, &ms, first_id);
        /* Balanced: moves happened, none in flight or queued for 3 planning
         * rounds (the loop would have planned more if it could gain). */
        if (ms.committed > 0 && ms.in_flight == 0) {
            if (!quiet_since) quiet_since = now, done_at = now;
            if (now - quiet_since > 7000) break;
        } else {
            quiet_since = 0;
        }
        usleep(tty ? 500000 : 2000000);
    }
    redisFree(c);
    return done_at > 0 ? (done_at - t0) / 1000.0 : -1;
}

/* Reads every loaded key and every key the load acknowledged. */
static long verify(demo *d, dload *l, long *lost) {
    dcc c;
    *lost = 0;
    if (dcc_init(&c, (int)d->base, (int)d->nodes) != 16384) return -1;
    char key[48], *want = malloc((size_t)d->value_size + 32);
    long checked = 0;
    for (long i = 0; i < d->keys; i++) {
        int n = snprintf(key, sizeof key, "demo:%ld", i);
        int wn = demo_value(d, i, want, (size_t)d->value_size + 32);
        const char *get[] = {"GET", key};
        size_t lens[] = {3, (size_t)n};
        redisReply *r = dcc_command(&c, 2, get, lens);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != (size_t)wn ||
            memcmp(r->str, want, (size_t)wn))
            (*lost)++;
        freeReplyObject(r);
        checked++;
    }
    for (long k = 0; k < l->keys; k++) {
        if (!l->last[k]) continue;
        snprintf(key, sizeof key, "demo:w:%ld", k);
        const char *get[] = {"GET", key};
        redisReply *r = dcc_command(&c, 2, get, NULL);
        char w[48];
        snprintf(w, sizeof w, "w-%llu", (unsigned long long)l->last[k]);
        /* The last acknowledged value, or a later one still in flight at
         * the stop: never an older one. */
        if (!r || r->type != REDIS_REPLY_STRING || strtoull(r->str + 2, NULL, 10) < l->last[k])
            (*lost)++;
        freeReplyObject(r);
        checked++;
    }
    dcc_close(&c);
    free(want);
    return checked;
}

int demo_main(int argc, char **argv, const char *self) {
    demo d = {.base = 7000,
              .nodes = 4,
              .keys = 500000,
              .value_size = 100,
              .join = 1,
              .partitions = 1024,
              .replicas = DEMO_RF_DEFAULT};
    if (parse_flags(&d, argc, argv)) return 2;
    if (d.partitions & (d.partitions - 1)) {
        fprintf(stderr, "keel demo: --partitions must be a power of two from 16 to 16384\n");
        return 2;
    }
    if (d.ha.on && d.replicas > 1) {
        fprintf(stderr, "keel demo: --ha keeps one copy of each partition (--replicas 1): it "
                        "shows the coordinators' failover; --replicas RF shows a node's\n");
        return 2;
    }
    if (d.join && d.nodes >= DEMO_MAX_NODES) {
        fprintf(stderr, "keel demo: --nodes must be below %d to add one\n", DEMO_MAX_NODES);
        return 2;
    }
    snprintf(d.dir, sizeof d.dir, "/tmp/keel-demo-XXXXXX");
    if (!mkdtemp(d.dir)) return perror("keel demo: mkdtemp"), 1;
    ssize_t n = readlink("/proc/self/exe", d.exe, sizeof d.exe - 1);
    if (n > 0)
        d.exe[n] = 0;
    else
        snprintf(d.exe, sizeof d.exe, "%s", self);
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    if (d.ha.on && !demo_ha_find_etcd(&d.ha)) {
        printf("keel demo --ha: skipped: no etcd binary (install etcd-server, e.g. make deps, "
               "or set KEEL_ETCD)\n");
        rmdir(d.dir);
        return 0;
    }
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
    printf("keel demo: a coordinator on 127.0.0.1:%ld and %ld nodes on ports %ld-%ld "
           "(data and logs in %s)\n",
           d.base, d.nodes, d.base + 1, d.base + d.nodes, d.dir);
    if (d.ha.on)
        printf("coordinators c1, c2, c3 on 127.0.0.1:%d, :%d, :%d (c1 leads) on three etcd "
               "members, client ports %ld-%ld; audit log %s\n",
               demo_ha_coord_port(&d.ha, 0), demo_ha_coord_port(&d.ha, 1),
               demo_ha_coord_port(&d.ha, 2), d.base + 20, d.base + 22, d.ha.audit);
    printf("dashboard: http://127.0.0.1:%ld/  (up as long as the demo runs)\n",
           d.base + HTTP_OFFSET);
    fflush(stdout);
    long acked = load_keys(&d);
    printf("loaded %ld of %ld keys (demo:0 .. demo:%ld, %ld-byte values) through the cluster map\n",
           acked, d.keys, d.keys ? d.keys - 1 : 0, d.value_size);
    fflush(stdout);
    status = acked == d.keys ? 0 : 1;
    if (d.join && !stop_requested) {
        /* The rebalance loop: plan every 2 s, as many moves as help. With
         * --ha, 4 moves a round: the join then spans several rounds, so the
         * coordinator's kill lands inside it and later rounds' moves commit
         * under the new leader (on a fast disk every move of a round could
         * finish before the first poll saw one). */
        freeReplyObject(coord_cmd(&d, "SETTING SET rebalance_interval_s 2"));
        freeReplyObject(coord_cmd(&d, d.ha.on ? "SETTING SET max_moves_per_round 4"
                                              : "SETTING SET max_moves_per_round 0"));
        freeReplyObject(coord_cmd(&d, "SETTING SET cleanup_after_s 30"));
        if (d.replicas > 1) {
            char set[64];
            snprintf(set, sizeof set, "SETTING SET node_dead_after_ms %d", DEMO_DEAD_AFTER_MS);
            freeReplyObject(coord_cmd(&d, set));
        }
        usleep(2500 * 1000); /* two heartbeats: the coordinator sees the keys */
        dload load;
        if (dload_start(&load, (int)d.base, (int)d.nodes, d.keys, 10000)) {
            fprintf(stderr, "keel demo: cannot start the background load\n");
            stop_cluster(&d);
            return 1;
        }
        usleep(3000 * 1000);                             /* the "before" latency */
        spread before = measure_spread(&d, d.nodes + 1); /* counting the empty newcomer */
        double first_id = last_move_id(&d);
        load.phase = DLOAD_DURING;
        spawn_node(&d, ++d.nodes);
        double secs = watch_rebalance(&d, first_id);
        load.phase = DLOAD_AFTER;
        usleep(1500 * 1000); /* heartbeats: metrics of the final placement */
        spread after = measure_spread(&d, d.nodes);
        move_sum ms = sum_moves(&d, first_id);
        if (d.replicas > 1 && !stop_requested) rf_kill(&d);
        dload_stop(&load);
        long lost = 0, checked = verify(&d, &load, &lost);
        double floor = before.floor_bytes; /* what must leave the old nodes, at least */
        printf("\n==== keel demo: summary ====\n");
        printf("time to balanced            %s%.1f s\n", secs < 0 ? "not reached after " : "",
               secs < 0 ? (double)REBALANCE_TIMEOUT_S : secs);
        printf("moves                       %d committed, %d aborted\n", ms.committed, ms.aborted);
        printf("bytes moved / floor         %.1f MB / %.1f MB = %.2f\n", ms.bytes / 1e6,
               floor / 1e6, floor > 0 ? ms.bytes / floor : 0);
        printf("imbalance by bytes          %.3f before -> %.3f after (max/mean over %ld nodes)\n",
               before.bytes_ratio, after.bytes_ratio, d.nodes);
        printf("imbalance by keys           %.3f before -> %.3f after\n", before.keys_ratio,
               after.keys_ratio);
        printf("client p99 / max latency    before %.2f / %.2f ms, during %.2f / %.2f ms\n",
               dload_pct(&load, DLOAD_BEFORE, 99), dload_max(&load, DLOAD_BEFORE),
               dload_pct(&load, DLOAD_DURING, 99), dload_max(&load, DLOAD_DURING));
        printf("max write pause             %.1f ms (fence to new owner serving)\n", ms.max_pause);
        printf("client ops                  %llu before, %llu during (redirects %llu, "
               "TRYAGAIN %llu)\n",
               (unsigned long long)load.ops[DLOAD_BEFORE],
               (unsigned long long)load.ops[DLOAD_DURING], (unsigned long long)load.c.moved,
               (unsigned long long)load.c.tryagain);
        printf("client errors               %llu (wrong reads %llu)\n",
               (unsigned long long)load.c.errors, (unsigned long long)load.wrong_reads);
        if (load.c.errors) printf("  last client error         %s\n", load.c.last_error);
        printf("lost writes                 %ld of %ld keys checked\n", lost, checked);
        if (lost || load.c.errors || load.wrong_reads || secs < 0) status = 1;
        if (d.ha.on && ha_summary(&d, &ms)) status = 1;
        if (d.replicas > 1 && rf_summary(&d)) status = 1;
        dload_free(&load);
    }
    printf("\n");
    print_status(&d);
    printf("\ndashboard: http://127.0.0.1:%ld/\n", d.base + HTTP_OFFSET);
    printf("connect:  redis-cli -c -p %ld GET demo:42\n", d.base + 1);
    char at[160];
    snprintf(at, sizeof at, "127.0.0.1:%ld", d.base);
    if (d.ha.on) snprintf(at, sizeof at, "%s", d.ha.coord_list);
    printf("          build/keel moves --coord %s\n", at);
    printf("          build/keel partitions --coord %s --node n1\n", at);
    printf("%s\n\n", d.exit_after ? "stopping after --exit-after" : "press Ctrl-C to stop");
    fflush(stdout);
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
