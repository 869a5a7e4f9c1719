/* cluster.c - the node in a coordinated cluster; see cluster.h.
 *
 * The map arrives as JSON (the --map file format plus "term") in admitted
 * directives from coordlink. Before the partition table exists the first map
 * is only kept; afterwards each newer map is installed with
 * ptable_apply_map (which refuses older versions) and persisted in the data
 * directory, so a restarted node serves its SERVING partitions from the last
 * map it had even while the coordinator is unreachable (DESIGN §5).
 */
#include "node/cluster.h"
#include "core/audit.h"
#include "core/clock.h"
#include "core/coordkey.h"
#include "core/addrlist.h"
#include "core/err.h"
#include "core/log.h"
#include "core/num.h"
#include "node/coordlink.h"
#include "node/cmd.h" /* CLASS_READ, CLASS_WRITE */
#include "node/move.h"
#include "node/rep_uv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int parse_map(const char *json, size_t len, keel_map *m, char *err, size_t cap) {
    char *text = malloc(len + 1);
    if (!text) return snprintf(err, cap, "out of memory"), KEEL_ENOMEM;
    memcpy(text, json, len);
    text[len] = 0;
    int rc = keel_map_parse_json(text, m, err, cap);
    free(text);
    return rc;
}

/* The directive high-water mark, persisted with each admitted map before
 * anything of the map leaves this process. Written lazily
 * (store_meta_put_lazy): it is in the WAL before the map record that
 * node_install_map writes, and the one sync at the end of the install makes
 * both durable with replication's records, one fsync per map (the transfer
 * pause, docs/replication.md). A map that is not installed (not
 * newer, or refused) is not acted on, so its mark may wait for the next
 * sync: replayed after a crash, it would again be not newer. Returns 0 or
 * the store's KEEL_E* (logged). */
KEEL_MUST_CHECK static int save_mark(server *s, uint64_t term, uint64_t seq) {
    char mark[48];
    int n =
        snprintf(mark, sizeof mark, "%llu %llu", (unsigned long long)term, (unsigned long long)seq);
    int rc = store_meta_put_lazy(s->st, "directive_mark", mark, (size_t)n);
    if (rc)
        keel_log(KEEL_LOG_ERROR, "directive_mark_persist_failed", "term=%llu seq=%llu error=\"%s\"",
                 (unsigned long long)term, (unsigned long long)seq, keel_strerror(rc));
    return rc;
}

/* Loads the mark into lc. No mark is 0 (a new node); a read error or a mark
 * that does not parse is an error, never "no mark": the guard would then
 * accept a replayed directive. */
KEEL_MUST_CHECK static int load_mark(server *s, coordlink_config *lc, char *err, size_t cap) {
    char *v = NULL;
    size_t len = 0;
    int rc = store_meta_get(s->st, "directive_mark", &v, &len);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) return snprintf(err, cap, "cannot read the directive mark: %s", keel_strerror(rc)), rc;
    char *sp = memchr(v, ' ', len);
    uint64_t t, q;
    rc = !sp || keel_parse_u64(v, (size_t)(sp - v), &t) ||
                 keel_parse_u64(sp + 1, len - (size_t)(sp - v) - 1, &q)
             ? KEEL_ECORRUPT
             : 0;
    free(v);
    if (rc) return snprintf(err, cap, "the directive mark in the data directory is corrupt"), rc;
    lc->last_term = t, lc->last_seq = q;
    return 0;
}

int node_install_map(server *s, const char *json, size_t len, char *err, size_t cap) {
    keel_map m;
    uint64_t t0 = keel_mono_us();
    if (parse_map(json, len, &m, err, cap)) return KEEL_EINVAL;
    uint64_t t1 = keel_mono_us();
    uint64_t version = m.version, old = ptable_map(s->pt)->version;
    if (version <= old) {
        keel_map_close(&m);
        if (version == old) return 0;
        snprintf(err, cap, "map version %llu is older than %llu", (unsigned long long)version,
                 (unsigned long long)old);
        return KEEL_ERANGE;
    }
    if (m.partitions != ptable_partitions(s->pt)) {
        keel_map_close(&m);
        snprintf(err, cap, "partition count differs");
        return KEEL_EINVAL;
    }
    /* Into the WAL before it is acted on, durable before anything of it
     * leaves this process: the one sync at the end covers it together with
     * the records replication writes for it. A restart comes back to this
     * map. */
    if (store_meta_put_lazy(s->st, "map", json, len)) {
        keel_map_close(&m);
        snprintf(err, cap, "cannot persist map version %llu", (unsigned long long)version);
        keel_log(KEEL_LOG_ERROR, "map_persist_failed", "version=%llu", (unsigned long long)version);
        return KEEL_EIO;
    }
    uint64_t t2 = keel_mono_us();
    int rc = ptable_apply_map(s->pt, &m); /* newer, same partition count: cannot refuse */
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "map_apply_failed", "version=%llu error=\"%s\" action=exit",
                 (unsigned long long)version, keel_strerror(rc));
        _exit(2);
    }
    uint64_t t3 = keel_mono_us();
    if (s->mv) move_map_changed(s->mv);
    if (s->rep && (rc = node_rep_map_changed(s->rep))) {
        /* A store error configuring replication: stop, as a failed sync does. */
        keel_log(KEEL_LOG_ERROR, "replication_failed", "step=configure error=\"%s\" action=exit",
                 keel_strerror(rc));
        _exit(2);
    }
    uint64_t t4 = keel_mono_us();
    /* Nothing left the process since the lazy save: sends are queued
     * (replication's links, the coordinator link's hiredis buffer) and
     * replies wait for the turn end. One fsync makes the mark, the map and
     * replication's records durable together, unless replication's own
     * sync already did (then this one finds nothing to do). The map is
     * applied, so a failed sync stops the node, as a failed group commit
     * does. */
    if ((rc = store_sync_wal(s->st, NULL))) {
        keel_log(KEEL_LOG_ERROR, "map_persist_failed", "version=%llu error=\"%s\" action=exit",
                 (unsigned long long)version, keel_strerror(rc));
        _exit(2);
    }
    uint64_t t5 = keel_mono_us();
    /* Where an install's time goes (the transfer pause waits for it): parse,
     * the save into the WAL, the table, the moves' and replication's
     * reaction (with replication's fsync, if it had records), the sync. */
    keel_log(KEEL_LOG_INFO, "map_installed",
             "version=%llu previous=%llu epoch=%llu bytes=%zu parse_us=%llu save_us=%llu "
             "apply_us=%llu react_us=%llu sync_us=%llu",
             (unsigned long long)version, (unsigned long long)old,
             (unsigned long long)ptable_self_epoch(s->pt), len, (unsigned long long)(t1 - t0),
             (unsigned long long)(t2 - t1), (unsigned long long)(t3 - t2),
             (unsigned long long)(t4 - t3), (unsigned long long)(t5 - t4));
    return 1;
}

static void on_map(void *arg, const char *json, size_t len, uint64_t term, uint64_t seq) {
    server *s = arg;
    /* Unrecorded, the directive could be replayed after a restart: do not
     * act on it. The coordinator sends the map again, as a new directive. */
    if (save_mark(s, term, seq)) return;
    if (!s->pt) { /* start-up: keep the first one for node_cluster_start */
        s->first_map.len = 0;
        kbuf_append(&s->first_map, json, len);
        s->have_first_map = 1;
        return;
    }
    char err[256];
    if (node_install_map(s, json, len, err, sizeof err) < 0)
        keel_log(KEEL_LOG_WARN, "map_rejected", "reason=\"%s\"", err);
}

/* The coordinator key, pinned at the first join (coordlink): durable before
 * the link goes on, so a restart still refuses any other key. */
#define COORD_PUB_META "coord_pubkey"

static int pin_coord_key(void *arg, const char *pub_hex) {
    server *s = arg;
    if (!coordkey_pub_valid(pub_hex, strlen(pub_hex))) return KEEL_EINVAL;
    int rc = store_meta_put(s->st, COORD_PUB_META, pub_hex, strlen(pub_hex));
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "coordinator_key_persist_failed", "error=\"%s\"",
                 keel_strerror(rc));
        return rc;
    }
    snprintf(s->coord_pub, sizeof s->coord_pub, "%s", pub_hex);
    return 0;
}

/* Loads the pinned key into s->coord_pub ("" when none is pinned yet). */
KEEL_MUST_CHECK static int load_coord_key(server *s, char *err, size_t cap) {
    char *v = NULL;
    size_t len = 0;
    s->coord_pub[0] = 0;
    int rc = store_meta_get(s->st, COORD_PUB_META, &v, &len);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc)
        return snprintf(err, cap, "cannot read the pinned coordinator key: %s", keel_strerror(rc)),
               rc;
    if (!coordkey_pub_valid(v, len)) {
        free(v);
        return snprintf(err, cap, "the pinned coordinator key is corrupt"), KEEL_ECORRUPT;
    }
    snprintf(s->coord_pub, sizeof s->coord_pub, "%s", v);
    free(v);
    return 0;
}

static int rep_fresh(void *arg) {
    server *s = arg;
    return node_rep_fresh(s->rep);
}

static void on_lease(void *arg, int lease, uint64_t version, uint64_t sent_us) {
    server *s = arg;
    node_rep_lease(s->rep, lease, version, sent_us);
}

static uint64_t map_version(void *arg) {
    server *s = arg;
    return s->pt ? ptable_map(s->pt)->version : 0;
}

/* p50 and p99 of read and write commands since the last heartbeat, in ms:
 * the upper bound of the histogram bucket that holds each (0 without
 * commands). */
static uint64_t bucket_rank(const uint64_t *delta, uint64_t want) {
    uint64_t seen = 0;
    for (int i = 0; i < HISTOGRAM_BUCKETS; i++)
        if ((seen += delta[i]) >= want) return (uint64_t)i;
    return HISTOGRAM_BUCKETS - 1;
}

static void interval_pcts_ms(server *s, double *p50, double *p99) {
    uint64_t delta[HISTOGRAM_BUCKETS + 1], total = 0;
    *p50 = *p99 = 0;
    if (!s->mx) return; /* start-up: no commands yet */
    for (int i = 0; i <= HISTOGRAM_BUCKETS; i++) {
        uint64_t now = s->mx->latency[CLASS_READ].count[i] + s->mx->latency[CLASS_WRITE].count[i];
        delta[i] = now - s->hb_lat_prev[i];
        s->hb_lat_prev[i] = now;
        total += delta[i];
    }
    if (!total) return;
    *p50 = histogram_bounds[bucket_rank(delta, total - total / 2)] * 1000.0;
    *p99 = histogram_bounds[bucket_rank(delta, total - total / 100)] * 1000.0;
}

/* {"disk_used":N,"disk_capacity":N,"p50_ms":X,"p99_ms":X,
 *  "partitions":[[p,bytes,keys,ops],...]}
 * for the partitions this node owns. */
static void metrics_json(void *arg, kbuf *b) {
    server *s = arg;
    struct statvfs vfs;
    unsigned long long used = 0, total = 0;
    if (statvfs(s->cfg.dir, &vfs) == 0) {
        total = (unsigned long long)vfs.f_blocks * vfs.f_frsize;
        used = total - (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    }
    double p50, p99;
    interval_pcts_ms(s, &p50, &p99);
    kbuf_printf(b,
                "{\"disk_used\":%llu,\"disk_capacity\":%llu,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
                "\"partitions\":[",
                used, total, p50, p99);
    unsigned np = s->pt ? ptable_partitions(s->pt) : 0;
    int first = 1;
    for (unsigned p = 0; p < np; p++) {
        uint64_t keys, bytes;
        part_state ps = ptable_state(s->pt, p);
        /* Only what this node owns: a retired copy awaiting cleanup or an
         * incoming one would double-count the partition at the coordinator. */
        if ((ps != PART_SERVING && ps != PART_OUTGOING && ps != PART_FENCED) ||
            !node_partition_totals(s, p, &keys, &bytes))
            continue;
        kbuf_printf(b, "%s[%u,%llu,%llu,%.3f]", first ? "" : ",", p, (unsigned long long)bytes,
                    (unsigned long long)keys, s->mx->part_rate[p]);
        first = 0;
    }
    kbuf_appendstr(b, "]}");
}

int node_cluster_start(server *s, keel_map *m, char *err, size_t cap) {
    peerauth_secret secret;
    int rc = peerauth_secret_load(s->cfg.secret_file, &secret, err, cap);
    if (rc) return rc;
    if (s->cfg.audit_log[0] && (rc = audit_open(s->cfg.audit_log, s->cfg.id, err, cap))) return rc;
    coordlink_config lc = {.host = s->cfg.coord_host,
                           .port = s->cfg.coord_port,
                           .coords = s->cfg.coords.n ? &s->cfg.coords : NULL,
                           .self_id = s->cfg.id,
                           .adv_host = s->cfg.announce_host,
                           .adv_port = s->cfg.port,
                           .rack = s->cfg.rack,
                           .capacity = s->cfg.capacity,
                           .heartbeat_ms = 1000,
                           .incarnation = s->incarnation};
    coordlink_cbs cbs = {.on_map = on_map,
                         .metrics = metrics_json,
                         .map_version = map_version,
                         .pin = pin_coord_key,
                         .fresh = rep_fresh,
                         .on_lease = on_lease};
    if ((rc = load_mark(s, &lc, err, cap))) return rc;
    if ((rc = load_coord_key(s, err, cap))) return rc;
    lc.coord_pub = s->coord_pub;
    char *saved = NULL;
    size_t len = 0;
    rc = store_meta_get(s->st, "map", &saved, &len);
    if (rc && rc != KEEL_ENOTFOUND) /* an I/O error is not "no map yet" */
        return snprintf(err, cap, "cannot read the saved map: %s", keel_strerror(rc)), rc;
    if (rc == 0) {
        rc = parse_map(saved, len, m, err, cap);
        free(saved);
        if (rc) return rc;
        keel_log(KEEL_LOG_INFO, "map_loaded", "version=%llu source=data-dir",
                 (unsigned long long)m->version);
    }
    s->link = coordlink_start(s->loop, &lc, &secret, &cbs, s);
    s->secret = secret; /* for peers: the move protocol's connections */
    s->have_secret = 1;
    peerauth_secret_wipe(&secret);
    if (!s->link) return snprintf(err, cap, "out of memory"), KEEL_ENOMEM;
    if (saved) return 0;
    char coords[1024];
    keel_log(KEEL_LOG_INFO, "waiting_for_map", "coord=%s",
             s->cfg.coords.n ? addrlist_format(&s->cfg.coords, coords, sizeof coords) : "?");
    while (!s->have_first_map && !s->stopping)
        uv_run(s->loop, UV_RUN_ONCE);
    if (!s->have_first_map)
        return snprintf(err, cap, "stopped before the first map arrived"), KEEL_EAGAIN;
    if ((rc = parse_map(s->first_map.p, s->first_map.len, m, err, cap))) return rc;
    if ((rc = store_meta_put(s->st, "map", s->first_map.p, s->first_map.len))) {
        keel_log(KEEL_LOG_ERROR, "map_persist_failed", "version=%llu",
                 (unsigned long long)m->version);
        keel_map_close(m);
        return snprintf(err, cap, "cannot persist the first map: %s", keel_strerror(rc)), rc;
    }
    kbuf_close(&s->first_map);
    keel_log(KEEL_LOG_INFO, "map_loaded", "version=%llu source=coordinator",
             (unsigned long long)m->version);
    return 0;
}

void node_cluster_stop(server *s, int leave) {
    coordlink_stop(s->link, leave);
    s->link = NULL;
}
