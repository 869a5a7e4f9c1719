/* info.c - INFO sections and the Prometheus page: two views of the same
 * counters, both rendered on the loop thread.
 *
 * INFO follows redis 7.0: `INFO` and `INFO default` give the default
 * sections, `all` adds commandstats, `everything` is all of them; several
 * section names may be given (any case) and each section appears once.
 * Memory figures are the process' (mallinfo2 for used_memory, /proc for
 * RSS); keel has no replication, so that section says "master" with no
 * replicas and offset 0.
 */
#include "core/clock.h"
#include "node/rep_uv.h"
#include "node/cmd.h"
#include "node/cmdstats.h"
#include "node/blocking.h"
#include "node/script.h"
#include "node/move.h"
#include "node/save.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#define KEEL_VERSION "0.1.0"

static void info_server(const server *s, kbuf *b) {
    int64_t now = keel_wall_ms(), up = (now - s->start_ms) / 1000;
    struct utsname un;
    if (uname(&un)) memset(&un, 0, sizeof un);
    kbuf_printf(b,
                "# Server\r\nredis_version:7.0.0\r\nkeel_version:%s\r\nredis_git_sha1:00000000\r\n"
                "redis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:cluster\r\n"
                "os:%s %s %s\r\narch_bits:%d\r\nmultiplexing_api:epoll\r\n"
                "atomicvar_api:c11-builtin\r\ngcc_version:0.0.0\r\n"
                "process_id:%d\r\nprocess_supervised:no\r\nrun_id:%s\r\ntcp_port:%d\r\n"
                "server_time_usec:%lld\r\nuptime_in_seconds:%lld\r\nuptime_in_days:%lld\r\n"
                "hz:10\r\nconfigured_hz:10\r\nlru_clock:%lld\r\nexecutable:keel\r\n"
                "config_file:\r\nio_threads_active:0\r\n",
                KEEL_VERSION, un.sysname, un.release, un.machine, (int)(sizeof(void *) * 8),
                (int)getpid(), s->runid, s->cfg.port, (long long)keel_wall_us(), (long long)up,
                (long long)(up / 86400), (long long)((now / 1000) & ((1 << 24) - 1)));
}

static void info_clients(const server *s, kbuf *b) {
    rserver_stats st;
    rserver_get_stats(s->rs, &st);
    kbuf_printf(b,
                "# Clients\r\nconnected_clients:%zu\r\ncluster_connections:0\r\n"
                "maxclients:%d\r\nclient_recent_max_input_buffer:0\r\n"
                "client_recent_max_output_buffer:0\r\nblocked_clients:%zu\r\n"
                "tracking_clients:0\r\nclients_in_timeout_table:0\r\n",
                st.clients, s->cfg.maxclients, blocking_count(s));
}

static void human(char *out, size_t cap, unsigned long long n) {
    if (n < 1024)
        snprintf(out, cap, "%lluB", n);
    else if (n < 1024ull * 1024)
        snprintf(out, cap, "%.2fK", (double)n / 1024);
    else if (n < 1024ull * 1024 * 1024)
        snprintf(out, cap, "%.2fM", (double)n / (1024 * 1024));
    else
        snprintf(out, cap, "%.2fG", (double)n / (1024.0 * 1024 * 1024));
}

static unsigned long long rss_bytes(void) {
    unsigned long long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss * (unsigned long long)sysconf(_SC_PAGESIZE);
}

static void info_memory(const server *s, kbuf *b) {
    struct mallinfo2 mi = mallinfo2();
    unsigned long long used = mi.uordblks + mi.hblkhd, rss = rss_bytes();
    static unsigned long long peak;
    if (used > peak) peak = used;
    char hu[32], hr[32], hp[32];
    human(hu, sizeof hu, used);
    human(hr, sizeof hr, rss);
    human(hp, sizeof hp, peak);
    kbuf_printf(b,
                "# Memory\r\nused_memory:%llu\r\nused_memory_human:%s\r\n"
                "used_memory_rss:%llu\r\nused_memory_rss_human:%s\r\nused_memory_peak:%llu\r\n"
                "used_memory_peak_human:%s\r\n"
                "maxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\n"
                "mem_fragmentation_ratio:%.2f\r\nmem_allocator:libc\r\nlazyfree_pending_objects:0\r\n"
                "keel_store_bytes:%llu\r\n",
                used, hu, rss, hr, peak, hp, used ? (double)rss / (double)used : 0.0,
                (unsigned long long)store_total_bytes(s->st));
    script_info_memory(s, b); /* script.h: used_memory_lua, number_of_cached_scripts */
}

static void info_replication(const server *s, kbuf *b) {
    kbuf_printf(b,
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
                "master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
                "master_replid2:0000000000000000000000000000000000000000\r\n"
                "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
                "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\n"
                "repl_backlog_histlen:0\r\n",
                s->runid);
    node_rep_info_replication(s->rep, b); /* RF > 1 partitions by role, lag (rep_uv.h) */
}

static void info_cpu(const server *s, kbuf *b) {
    (void)s;
    struct rusage self, kids, th;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    if (getrusage(RUSAGE_THREAD, &th)) th = self;
#define TV(t) ((double)(t).tv_sec + (double)(t).tv_usec / 1e6)
    kbuf_printf(b,
                "# CPU\r\nused_cpu_sys:%.6f\r\nused_cpu_user:%.6f\r\nused_cpu_sys_children:%.6f\r\n"
                "used_cpu_user_children:%.6f\r\nused_cpu_sys_main_thread:%.6f\r\n"
                "used_cpu_user_main_thread:%.6f\r\n",
                TV(self.ru_stime), TV(self.ru_utime), TV(kids.ru_stime), TV(kids.ru_utime),
                TV(th.ru_stime), TV(th.ru_utime));
#undef TV
}

static void info_modules(const server *s, kbuf *b) {
    (void)s;
    kbuf_appendstr(b, "# Modules\r\n");
}

static void info_errorstats(const server *s, kbuf *b) {
    kbuf_appendstr(b, "# Errorstats\r\n");
    cmdstats_info_errors((server *)s, b);
}

static void info_commandstats(const server *s, kbuf *b) {
    kbuf_appendstr(b, "# Commandstats\r\n");
    cmdstats_info_commands((server *)s, b);
}

static void info_stats(const server *s, kbuf *b) {
    const metrics *m = s->mx;
    rserver_stats st;
    rserver_get_stats(s->rs, &st);
    kbuf_printf(b,
                "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                "rejected_connections:%llu\r\nexpired_keys:%llu\r\nevicted_keys:0\r\n"
                "migrate_cached_sockets:0\r\n" /* MIGRATE opens one per request and closes it */
                "keyspace_hits:0\r\nkeyspace_misses:0\r\npubsub_channels:0\r\n"
                "pubsub_patterns:0\r\ntotal_error_replies:%llu\r\nkeel_read_ops:%llu\r\n"
                "keel_write_ops:%llu\r\nkeel_admin_ops:%llu\r\n",
                (unsigned long long)st.total_connections, (unsigned long long)st.total_commands,
                (unsigned long long)st.rejected_connections, (unsigned long long)s->expired_keys,
                (unsigned long long)cmdstats_total_errors(s),
                (unsigned long long)m->ops[CLASS_READ], (unsigned long long)m->ops[CLASS_WRITE],
                (unsigned long long)m->ops[CLASS_ADMIN]);
}

static void info_persistence(const server *s, kbuf *b) {
    kbuf_printf(b,
                "# Persistence\r\nloading:0\r\naof_enabled:0\r\nrdb_changes_since_last_save:0\r\n"
                "rdb_bgsave_in_progress:%d\r\nrdb_last_save_time:%lld\r\n"
                "keel_fsync:%s\r\nkeel_fsync_count:%llu\r\nkeel_last_fsync_us:%llu\r\n"
                "keel_store_bytes:%llu\r\n",
                save_bgsave_running(s), save_last_unix(s),
                store_fsync_name(store_fsync_mode(s->st)), (unsigned long long)s->mx->fsync.total,
                (unsigned long long)s->last_fsync_us, (unsigned long long)store_total_bytes(s->st));
}

static void info_keyspace(const server *s, kbuf *b) {
    kbuf_appendstr(b, "# Keyspace\r\n");
    uint64_t keys = store_total_keys(s->st);
    if (keys)
        kbuf_printf(b, "db0:keys=%llu,expires=%llu\r\n", (unsigned long long)keys,
                    (unsigned long long)store_total_expires(s->st));
}

static void info_keel(const server *s, kbuf *b) {
    const keel_map *m = ptable_map(s->pt);
    unsigned serving = 0;
    for (unsigned p = 0; p < m->partitions; p++)
        serving +=
            ptable_state(s->pt, p) == PART_SERVING || ptable_state(s->pt, p) == PART_OUTGOING;
    kbuf_printf(b,
                "# Keel\r\nnode_id:%s\r\npartitions:%u\r\npartitions_serving:%u\r\n"
                "map_version:%llu\r\nmap_nodes:%zu\r\nepoch:%llu\r\n",
                ptable_self_id(s->pt), m->partitions, serving, (unsigned long long)m->version,
                m->nnodes, (unsigned long long)ptable_self_epoch(s->pt));
    move_stats ms;
    move_get_stats(s->mv, &ms);
    kbuf_printf(b,
                "partitions_outgoing:%u\r\npartitions_fenced:%u\r\npartitions_incoming:%u\r\n"
                "partitions_retired:%u\r\nrequests_held:%llu\r\n",
                ms.outgoing, ms.fenced, ms.incoming, ms.retired, (unsigned long long)ms.held);
    unsigned role[MAP_ROLE_LAGGING + 1] = {0};
    for (unsigned p = 0; p < m->partitions; p++)
        role[ptable_role(s->pt, p)]++;
    kbuf_printf(b, "replicas_leader:%u\r\nreplicas_follower:%u\r\nreplicas_lagging:%u\r\n",
                role[MAP_ROLE_LEADER], role[MAP_ROLE_FOLLOWER], role[MAP_ROLE_LAGGING]);
    node_rep_info_keel(s->rep, b); /* replication counters (rep_uv.h) */
    loopstat_info(s->loops, b);
}

/* The move protocol's gauges and counters (move.h). */
static void metrics_moves(const server *s, kbuf *b) {
    move_stats ms;
    move_get_stats(s->mv, &ms);
    const struct {
        const char *name, *type, *help;
        unsigned long long v;
    } rows[] = {
        {"keel_partitions_outgoing", "gauge", "Partitions this node is streaming to another.",
         ms.outgoing},
        {"keel_partitions_fenced", "gauge", "Partitions fenced here (requests are held).",
         ms.fenced},
        {"keel_partitions_incoming", "gauge", "Partitions this node is receiving.", ms.incoming},
        {"keel_partitions_retired", "gauge", "Moved-away partitions whose old copy awaits cleanup.",
         ms.retired},
        {"keel_requests_held", "gauge", "Requests waiting on a fenced partition.", ms.held},
        {"keel_requests_held_total", "counter", "Requests ever held on a fence.", ms.held_total},
        {"keel_requests_tryagain_total", "counter", "Held requests answered -TRYAGAIN.",
         ms.tryagain_total},
        {"keel_move_bytes_sent_total", "counter", "Bytes sent as a move source.", ms.bytes_sent},
        {"keel_move_bytes_received_total", "counter", "Bytes applied as a move destination.",
         ms.bytes_received},
        {"keel_move_commits_total", "counter", "Moves this node saw commit.", ms.commits_total},
        {"keel_move_aborts_total", "counter", "Moves this node saw abort.", ms.aborts_total},
        {"keel_move_cleanups_total", "counter", "Retired copies deleted after cleanup_after.",
         ms.cleanups_total},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        kbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", rows[i].name, rows[i].help,
                    rows[i].name, rows[i].type, rows[i].name, rows[i].v);
}

static void info_cluster(const server *s, kbuf *b) {
    kbuf_appendstr(b, "# Cluster\r\ncluster_enabled:1\r\n");
}

/* deflt: in INFO / INFO default; all: in INFO all (everything has all). */
static const struct {
    const char *name;
    void (*fn)(const server *, kbuf *);
    int deflt, all;
} sections[] = {
    {"server", info_server, 1, 1},
    {"clients", info_clients, 1, 1},
    {"memory", info_memory, 1, 1},
    {"persistence", info_persistence, 1, 1},
    {"stats", info_stats, 1, 1},
    {"replication", info_replication, 1, 1},
    {"cpu", info_cpu, 1, 1},
    {"modules", info_modules, 1, 1},
    {"commandstats", info_commandstats, 0, 1},
    {"errorstats", info_errorstats, 1, 1},
    {"cluster", info_cluster, 1, 1},
    {"keyspace", info_keyspace, 1, 1},
    {"keel", info_keel, 1, 1},
};
#define NSECTIONS (sizeof sections / sizeof *sections)

void cmd_info(cmd_ctx *x) {
    unsigned char want[NSECTIONS] = {0};
    for (int i = 1; i <= x->argc; i++) {
        int deflt = i == x->argc ? x->argc == 1 : arg_is(x, i, "default");
        int all = i < x->argc && (arg_is(x, i, "all") || arg_is(x, i, "everything"));
        for (size_t k = 0; k < NSECTIONS; k++)
            if ((deflt && sections[k].deflt) || (all && sections[k].all) ||
                (i < x->argc && arg_is(x, i, sections[k].name)))
                want[k] = 1;
    }
    kbuf b;
    kbuf_init(&b);
    for (size_t k = 0; k < NSECTIONS; k++) {
        if (!want[k]) continue;
        if (b.len) kbuf_appendstr(&b, "\r\n");
        sections[k].fn(x->srv, &b);
    }
    resp_w_verbatim(x->out, x->proto, "txt", b.p ? b.p : "", b.len);
    kbuf_close(&b);
}

int node_partition_totals(const server *s, unsigned p, uint64_t *keys, uint64_t *bytes) {
    unsigned per = 16384u / ptable_partitions(s->pt);
    *keys = *bytes = 0;
    for (unsigned sl = p * per; sl < (p + 1) * per; sl++) {
        uint64_t k, b;
        store_slot_stats(s->st, sl, &k, &b);
        *keys += k;
        *bytes += b;
    }
    part_state st = ptable_state(s->pt, p);
    return st == PART_SERVING || st == PART_OUTGOING || st == PART_FENCED || *keys;
}

/* ---- Prometheus ---------------------------------------------------------- */

static const char *class_names[CLASS__COUNT] = {"read", "write", "admin"};

void node_render_metrics(void *arg, kbuf *b) {
    const server *s = arg;
    const metrics *m = s->mx;
    kbuf_appendstr(b, "# HELP keel_ops_total Commands executed, by class.\n"
                      "# TYPE keel_ops_total counter\n");
    for (int c = 0; c < CLASS__COUNT; c++)
        kbuf_printf(b, "keel_ops_total{class=\"%s\"} %llu\n", class_names[c],
                    (unsigned long long)m->ops[c]);
    kbuf_appendstr(b, "# HELP keel_op_latency_seconds Command execution time, by class.\n"
                      "# TYPE keel_op_latency_seconds histogram\n");
    for (int c = 0; c < CLASS__COUNT; c++) {
        char labels[32];
        snprintf(labels, sizeof labels, "class=\"%s\"", class_names[c]);
        histogram_write(b, "keel_op_latency_seconds", labels, &m->latency[c]);
    }
    kbuf_appendstr(b, "# HELP keel_fsync_seconds WAL fsync time per group commit.\n"
                      "# TYPE keel_fsync_seconds histogram\n");
    histogram_write(b, "keel_fsync_seconds", "", &m->fsync);
    rserver_stats rst;
    rserver_get_stats(s->rs, &rst);
    kbuf_printf(b,
                "# HELP keel_connected_clients Client connections open now.\n"
                "# TYPE keel_connected_clients gauge\nkeel_connected_clients %zu\n",
                rst.clients);
    kbuf_printf(b,
                "# HELP keel_keys Keys stored on this node, in every partition it holds.\n"
                "# TYPE keel_keys gauge\nkeel_keys %llu\n",
                (unsigned long long)store_total_keys(s->st));
    metrics_moves(s, b);
    loopstat_metrics(s->loops, b);
    /* Per partition: only those this node serves or holds data for, and
     * none with --partition-metrics 0 (3 series per partition add up at
     * large P). */
    if (!s->cfg.partition_metrics) return;
    static const char *part_metrics[3][2] = {
        {"keel_partition_keys", "Keys stored in the partition."},
        {"keel_partition_bytes", "Bytes (encoded keys and values) in the partition."},
        {"keel_partition_ops_per_second", "Smoothed commands per second on the partition."}};
    for (int k = 0; k < 3; k++) {
        kbuf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", part_metrics[k][0], part_metrics[k][1],
                    part_metrics[k][0]);
        for (unsigned p = 0; p < m->partitions; p++) {
            uint64_t keys, bytes;
            if (!node_partition_totals(s, p, &keys, &bytes)) continue;
            if (k == 0)
                kbuf_printf(b, "%s{partition=\"%u\"} %llu\n", part_metrics[k][0], p,
                            (unsigned long long)keys);
            else if (k == 1)
                kbuf_printf(b, "%s{partition=\"%u\"} %llu\n", part_metrics[k][0], p,
                            (unsigned long long)bytes);
            else
                kbuf_printf(b, "%s{partition=\"%u\"} %.3f\n", part_metrics[k][0], p,
                            m->part_rate[p]);
        }
    }
}
