/* info.c - INFO sections and the Prometheus page: two views of the same
 * counters, both rendered on the loop thread. */
#include "core/clock.h"
#include "node/cmd.h"
#include "node/blocking.h"
#include "node/script.h"
#include "node/move.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define KEEL_VERSION "0.1.0"

static void info_server(const server *s, kbuf *b) {
    int64_t up = (keel_wall_ms() - s->start_ms) / 1000;
    kbuf_printf(b,
                "# Server\r\nredis_version:7.0.0\r\nkeel_version:%s\r\nredis_mode:cluster\r\n"
                "process_id:%d\r\nrun_id:%s\r\ntcp_port:%d\r\nuptime_in_seconds:%lld\r\n"
                "uptime_in_days:%lld\r\n",
                KEEL_VERSION, (int)getpid(), s->runid, s->cfg.port, (long long)up,
                (long long)(up / 86400));
}

static void info_clients(const server *s, kbuf *b) {
    rserver_stats st;
    rserver_get_stats(s->rs, &st);
    kbuf_printf(b, "# Clients\r\nconnected_clients:%zu\r\nmaxclients:%d\r\n", st.clients,
                s->cfg.maxclients);
    kbuf_printf(b, "blocked_clients:%zu\r\n", blocking_count(s));
}

static void info_stats(const server *s, kbuf *b) {
    const metrics *m = s->mx;
    rserver_stats st;
    rserver_get_stats(s->rs, &st);
    kbuf_printf(b,
                "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                "rejected_connections:%llu\r\nexpired_keys:%llu\r\nkeel_read_ops:%llu\r\n"
                "keel_write_ops:%llu\r\nkeel_admin_ops:%llu\r\n",
                (unsigned long long)st.total_connections, (unsigned long long)st.total_commands,
                (unsigned long long)st.rejected_connections, (unsigned long long)s->expired_keys,
                (unsigned long long)m->ops[CLASS_READ], (unsigned long long)m->ops[CLASS_WRITE],
                (unsigned long long)m->ops[CLASS_ADMIN]);
}

static void info_persistence(const server *s, kbuf *b) {
    kbuf_printf(b,
                "# Persistence\r\nloading:0\r\naof_enabled:0\r\nrdb_changes_since_last_save:0\r\n"
                "keel_fsync:%s\r\nkeel_fsync_count:%llu\r\nkeel_last_fsync_us:%llu\r\n"
                "keel_store_bytes:%llu\r\n",
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

static const struct {
    const char *name;
    void (*fn)(const server *, kbuf *);
} sections[] = {
    {"server", info_server},   {"clients", info_clients},
    {"stats", info_stats},     {"persistence", info_persistence},
    {"cluster", info_cluster}, {"keyspace", info_keyspace},
    {"keel", info_keel},       {"memory", script_info_memory}, /* script.h */
};

void cmd_info(cmd_ctx *x) {
    size_t n = sizeof sections / sizeof *sections;
    int all = x->argc == 1;
    for (int i = 1; i < x->argc; i++)
        if (arg_is(x, i, "all") || arg_is(x, i, "default") || arg_is(x, i, "everything")) all = 1;
    kbuf b;
    kbuf_init(&b);
    for (size_t k = 0; k < n; k++) {
        int want = all;
        for (int i = 1; i < x->argc && !want; i++)
            want = arg_is(x, i, sections[k].name);
        if (!want) continue;
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
