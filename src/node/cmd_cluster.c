/* cmd_cluster.c - CLUSTER subcommands, answered from the node's map.
 *
 * The map is per partition; Redis clients think in slot ranges. Every view
 * here walks the partitions once and merges adjacent partitions with the same
 * owner into one slot range, so a node owning partitions 0-1 and 4-5 shows
 * two ranges, and one owning everything shows 0-16383.
 */
#include "node/cmd.h"
#include "node/move.h"
#include "core/crc16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot_range {
    unsigned first, last;     /* slots, inclusive */
    int owner;                /* index in map->nodes: the leader */
    int nrep;                 /* replicas, leader first (1 at RF 1) */
    int rep[KEEL_RF_MAX];     /* indexes in map->nodes */
} slot_range;

static int same_replicas(const slot_range *r, const map_rep *mr) {
    if (r->nrep != mr->n) return 0;
    for (int i = 0; i < r->nrep; i++)
        if (r->rep[i] != mr->node[i]) return 0;
    return 1;
}

/* Fills r (capacity partitions) with merged ranges, in slot order: one
 * range per run of partitions with the same replicas (leader first), as
 * Redis lists a master and its replicas. Unowned partitions are skipped.
 * Returns the count. */
static size_t map_ranges(const keel_map *m, slot_range *r) {
    size_t n = 0;
    unsigned per = 16384u / m->partitions;
    for (unsigned p = 0; p < m->partitions; p++) {
        int o = m->owner[p];
        if (o < 0) continue;
        map_rep mr;
        keel_map_get_rep(m, p, &mr);
        if (n && r[n - 1].owner == o && r[n - 1].last + 1 == p * per &&
            same_replicas(&r[n - 1], &mr)) {
            r[n - 1].last = (p + 1) * per - 1;
            continue;
        }
        slot_range s = {p * per, (p + 1) * per - 1, o, mr.n, {0}};
        for (int i = 0; i < mr.n; i++)
            s.rep[i] = mr.node[i];
        r[n++] = s;
    }
    return n;
}

static slot_range *ranges_of(cmd_ctx *x, size_t *n) {
    const keel_map *m = ptable_map(x->srv->pt);
    slot_range *r = malloc(m->partitions * sizeof *r);
    if (!r) {
        reply_err(x, "ERR out of memory");
        return NULL;
    }
    *n = map_ranges(m, r);
    return r;
}

void cmd_cluster(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'cluster' command");
}

static void write_node_endpoint(cmd_ctx *x, const map_node *nd) {
    resp_w_array(x->out, 4);
    resp_w_bulkstr(x->out, nd->host);
    resp_w_int(x->out, nd->port);
    resp_w_bulkstr(x->out, nd->id);
    resp_w_map(x->out, x->proto, 0);
}

void cmd_cluster_slots(cmd_ctx *x) {
    size_t n;
    slot_range *r = ranges_of(x, &n);
    if (!r) return;
    const keel_map *m = ptable_map(x->srv->pt);
    resp_w_array(x->out, n);
    for (size_t i = 0; i < n; i++) { /* the leader, then its followers (Redis: master, replicas) */
        resp_w_array(x->out, 2 + (size_t)r[i].nrep);
        resp_w_int(x->out, r[i].first);
        resp_w_int(x->out, r[i].last);
        for (int k = 0; k < r[i].nrep; k++)
            write_node_endpoint(x, &m->nodes[r[i].rep[k]]);
    }
    free(r);
}

/* One node of a CLUSTER SHARDS entry. */
static void write_shard_node(cmd_ctx *x, const map_node *nd, int leader) {
    resp_w_map(x->out, x->proto, 7);
    resp_w_bulkstr(x->out, "id");
    resp_w_bulkstr(x->out, nd->id);
    resp_w_bulkstr(x->out, "port");
    resp_w_int(x->out, nd->port);
    resp_w_bulkstr(x->out, "ip");
    resp_w_bulkstr(x->out, nd->host);
    resp_w_bulkstr(x->out, "endpoint");
    resp_w_bulkstr(x->out, nd->host);
    resp_w_bulkstr(x->out, "role");
    resp_w_bulkstr(x->out, leader ? "master" : "replica");
    resp_w_bulkstr(x->out, "replication-offset");
    resp_w_int(x->out, 0);
    resp_w_bulkstr(x->out, "health");
    resp_w_bulkstr(x->out, "online");
}

/* 1 if range j opens a replica set not seen in ranges [0, j) led by the
 * same node. */
static int first_of_set(const slot_range *r, size_t j) {
    for (size_t i = 0; i < j; i++) {
        if (r[i].owner != r[j].owner || r[i].nrep != r[j].nrep) continue;
        if (!memcmp(r[i].rep, r[j].rep, (size_t)r[j].nrep * sizeof *r[j].rep)) return 0;
    }
    return 1;
}

static int same_set(const slot_range *a, const slot_range *b) {
    return a->owner == b->owner && a->nrep == b->nrep &&
           !memcmp(a->rep, b->rep, (size_t)a->nrep * sizeof *a->rep);
}

void cmd_cluster_shards(cmd_ctx *x) {
    size_t n;
    slot_range *r = ranges_of(x, &n);
    if (!r) return;
    const keel_map *m = ptable_map(x->srv->pt);
    /* A shard is one replica set (leader first) and the slots it holds; a
     * node that leads nothing is a shard of its own with no slots (at RF 1:
     * one shard per node, as before). Nodes in node order. */
    size_t shards = 0;
    for (size_t k = 0; k < m->nnodes; k++) {
        size_t sets = 0;
        for (size_t j = 0; j < n; j++)
            sets += r[j].owner == (int)k && first_of_set(r, j);
        shards += sets ? sets : 1;
    }
    resp_w_array(x->out, shards);
    for (size_t k = 0; k < m->nnodes; k++) {
        int any = 0;
        for (size_t j = 0; j <= n; j++) {
            if (j < n && (r[j].owner != (int)k || !first_of_set(r, j))) continue;
            if (j == n && any) break;
            size_t mine = 0;
            for (size_t i = 0; j < n && i < n; i++)
                mine += same_set(&r[i], &r[j]);
            resp_w_map(x->out, x->proto, 2);
            resp_w_bulkstr(x->out, "slots");
            resp_w_array(x->out, 2 * mine);
            for (size_t i = 0; j < n && i < n; i++)
                if (same_set(&r[i], &r[j])) {
                    resp_w_int(x->out, r[i].first);
                    resp_w_int(x->out, r[i].last);
                }
            resp_w_bulkstr(x->out, "nodes");
            int nn = j < n ? r[j].nrep : 1;
            resp_w_array(x->out, (size_t)nn);
            for (int i = 0; i < nn; i++)
                write_shard_node(x, &m->nodes[j < n ? r[j].rep[i] : (int)k], i == 0);
            any = 1;
        }
    }
    free(r);
}

static uint64_t node_epoch(const keel_map *m, int k) {
    uint64_t e = 0;
    for (unsigned p = 0; p < m->partitions; p++)
        if (m->owner[p] == k && m->epoch[p] > e) e = m->epoch[p];
    return e;
}

void cmd_cluster_nodes(cmd_ctx *x) {
    size_t n;
    slot_range *r = ranges_of(x, &n);
    if (!r) return;
    const keel_map *m = ptable_map(x->srv->pt);
    int self = ptable_self_index(x->srv->pt);
    kbuf b;
    kbuf_init(&b);
    for (size_t k = 0; k < m->nnodes; k++) {
        const map_node *nd = &m->nodes[k];
        /* A node that leads no slot but follows some is listed as Redis
         * lists a replica: "slave <leader-id>" (of its first followed range). */
        int leads = 0, follows = -1;
        for (size_t i = 0; i < n; i++) {
            leads |= r[i].owner == (int)k;
            for (int j = 1; follows < 0 && j < r[i].nrep; j++)
                if (r[i].rep[j] == (int)k) follows = r[i].owner;
        }
        int slave = !leads && follows >= 0;
        kbuf_printf(&b, "%s %s:%d@%d %s%s %s 0 0 %llu connected", nd->id, nd->host, nd->port,
                    nd->port + 10000, (int)k == self ? "myself," : "", slave ? "slave" : "master",
                    slave ? m->nodes[follows].id : "-", (unsigned long long)node_epoch(m, (int)k));
        for (size_t i = 0; i < n; i++) {
            if (r[i].owner != (int)k) continue;
            if (r[i].first == r[i].last)
                kbuf_printf(&b, " %u", r[i].first);
            else
                kbuf_printf(&b, " %u-%u", r[i].first, r[i].last);
        }
        kbuf_append(&b, "\n", 1);
    }
    resp_w_verbatim(x->out, x->proto, "txt", b.p ? b.p : "", b.len);
    kbuf_close(&b);
    free(r);
}

void cmd_cluster_info(cmd_ctx *x) {
    const keel_map *m = ptable_map(x->srv->pt);
    unsigned per = 16384u / m->partitions, assigned = 0;
    size_t with_slots = 0;
    for (unsigned p = 0; p < m->partitions; p++)
        assigned += m->owner[p] >= 0 ? per : 0;
    for (size_t k = 0; k < m->nnodes; k++)
        for (unsigned p = 0; p < m->partitions; p++)
            if (m->owner[p] == (int)k) {
                with_slots++;
                break;
            }
    uint64_t cur = 0;
    for (unsigned p = 0; p < m->partitions; p++)
        cur = m->epoch[p] > cur ? m->epoch[p] : cur;
    kbuf b;
    kbuf_init(&b);
    kbuf_printf(&b,
                "cluster_state:%s\r\ncluster_slots_assigned:%u\r\ncluster_slots_ok:%u\r\n"
                "cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:%zu\r\n"
                "cluster_size:%zu\r\ncluster_current_epoch:%llu\r\ncluster_my_epoch:%llu\r\n"
                "cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n"
                "total_cluster_links_buffer_limit_exceeded:0\r\n"
                "keel_partitions:%u\r\nkeel_map_version:%llu\r\n",
                assigned == 16384 ? "ok" : "fail", assigned, assigned, m->nnodes, with_slots,
                (unsigned long long)cur, (unsigned long long)ptable_self_epoch(x->srv->pt),
                m->partitions, (unsigned long long)m->version);
    resp_w_verbatim(x->out, x->proto, "txt", b.p, b.len);
    kbuf_close(&b);
}

void cmd_cluster_myid(cmd_ctx *x) {
    resp_w_bulkstr(x->out, ptable_self_id(x->srv->pt));
}

void cmd_cluster_keyslot(cmd_ctx *x) {
    resp_w_int(x->out, keel_key_slot(x->argv[2], x->argvlen[2]));
}

/* Parses a slot argument; replies and returns -1 when it is bad. */
static int slot_arg(cmd_ctx *x, int i, long long *slot) {
    if (arg_ll(x->argv[i], x->argvlen[i], slot)) {
        reply_not_int(x);
        return -1;
    }
    if (*slot < 0 || *slot >= 16384) {
        reply_err(x, "ERR Invalid slot");
        return -1;
    }
    return 0;
}

void cmd_cluster_countkeysinslot(cmd_ctx *x) {
    long long slot;
    if (slot_arg(x, 2, &slot)) return;
    uint64_t keys, bytes;
    store_slot_stats(x->srv->st, (unsigned)slot, &keys, &bytes);
    resp_w_int(x->out, (long long)keys);
}

typedef struct {
    kbuf *tmp;
    size_t n;
} keys_acc;

static int collect_key(void *arg, const char *rk, size_t rklen, const store_value *v) {
    keys_acc *a = arg;
    resp_w_bulk(a->tmp, rk + 1, rklen - 1); /* the record key is [0x00][key] */
    a->n++;
    return 0;
}

void cmd_cluster_getkeysinslot(cmd_ctx *x) {
    long long slot, count;
    if (arg_ll(x->argv[2], x->argvlen[2], &slot) || arg_ll(x->argv[3], x->argvlen[3], &count)) {
        reply_not_int(x);
        return;
    }
    if (slot < 0 || slot >= 16384 || count < 0) {
        reply_err(x, "ERR Invalid slot or number of keys");
        return;
    }
    kbuf tmp;
    kbuf_init(&tmp);
    keys_acc a = {&tmp, 0};
    const char lo = STORE_TAG_KEY, hi = STORE_TAG_KEY + 1; /* keys, not field records */
    long rc = store_scan_range(x->srv->st, (unsigned)slot, &lo, 1, &hi, 1, 0, (size_t)count,
                               x->now_ms, collect_key, &a);
    if (rc < 0)
        reply_err(x, "ERR storage error");
    else {
        resp_w_array(x->out, a.n);
        kbuf_append(x->out, tmp.p, tmp.len);
        if (tmp.oom) x->out->oom = 1; /* a key is missing: not a reply to send */
    }
    kbuf_close(&tmp);
}

void cmd_cluster_help(cmd_ctx *x) {
    static const char *help[] = {
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "HELP",
        "    Print this help."};
    resp_w_array(x->out, sizeof help / sizeof *help);
    for (size_t i = 0; i < sizeof help / sizeof *help; i++)
        resp_w_simple(x->out, help[i]);
}

/* READONLY / READWRITE: whether this connection may read replicated
 * partitions from this node as a follower (node/rep_uv.h); Redis Cluster's
 * replica reads. Off by default: a follower answers -MOVED to the leader. */
static void set_readonly(cmd_ctx *x, int on) {
    node_conn *nc = node_conn_of(x->c);
    if (!nc) {
        reply_err(x, "ERR out of memory");
        return;
    }
    nc->readonly = on;
    reply_ok(x);
}

void cmd_readonly(cmd_ctx *x) {
    set_readonly(x, 1);
}

void cmd_readwrite(cmd_ctx *x) {
    set_readonly(x, 0);
}
