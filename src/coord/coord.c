/* coord.c - the coordinator process: flags, --init, start-up, membership and
 * bootstrap placement (DESIGN.md §7). Commands live in coord_cmd.c.
 *
 * Start-up: open the map store (never created here: --init does that), bump
 * the term durably before anything is sent (invariant I3), load the secret,
 * then listen. Membership and liveness are two fields (mapstore.h): an
 * operator sets membership (ACTIVE, DRAINING, REMOVED); the failure detector
 * (detector.h) sets liveness: UP while a node heartbeats, SUSPECT after
 * node_suspect_after_ms of silence, DOWN after node_dead_after_ms, or at once
 * when it says KEEL.LEAVE on a graceful stop. Silence is measured on the
 * stall clock (coord_now), counted only since the coordinator's start or its
 * last stall, and a failure-ratio brake stops verdicts when most of the
 * cluster looks dead at once. Every state change goes through the map store,
 * which bumps the map version, so nodes learn of it with their next
 * heartbeat reply. Placement: once the first node has registered and
 * bootstrap_wait_ms has passed, every unowned partition goes where the
 * planner's plan_place puts it (least utilised eligible node), in one
 * transaction.
 */
#include "coord/coord_dash.h"
#include "coord/coord_int.h"
#include "coord/coord_move.h"
#include "coord/coord_rebalance.h"
#include "coord/coord_repmove.h"
#include "coord/coord_elect.h"
#include "coord/coord_standby.h"
#include "coord/detector.h"
#include "coord/mapstore_etcd.h"
#include "core/audit.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/num.h"
#include "coord/coord_place.h"
#include "coord/coord_rep.h"
#include "coord/coord_rf.h"
#include "core/coordkey.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "net/http.h"
#include "planner/planner.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Every setting, its default and its range. Those after the membership
 * ones feed the planner (PLAN) and, with the move protocol, the rebalance
 * loop. */
const setting_def coord_settings[] = {
    {"heartbeat_ms", "1000", "how often nodes heartbeat", 100, 60000},
    {"node_suspect_after_ms", "3000", "silence before a node is SUSPECT (3 heartbeats)", 300,
     3.6e6},
    {"node_dead_after_ms", "300000", "silence before a node is DOWN", 1000, 8.64e7},
    {"replica_lease_ms", "2000",
     "a leader serves a partition only this long after a heartbeat renewed its lease (RF > 1)", 200,
     60000},
    {"bootstrap_wait_ms", "2000", "wait after the first node registers before placing", 0, 3.6e6},
    {"load_weight", "0.5", "weight of the load term against bytes", 0, 100},
    {"start_ratio", "1.25", "an episode starts above this max/mean", 1, 100},
    {"stop_ratio", "1.10", "an episode ends inside this max/mean", 1, 100},
    {"max_moves_per_round", "16", "moves one planning round may propose (0 = no limit)", 0, 1e6},
    {"min_gain", "0", "a move must gain more than this", 0, 1e6},
    {"min_residence_s", "600", "a partition stays put this long after a move", 0, 8.64e6},
    {"disk_low", "0.85", "no moves into a node above this disk fraction", 0, 1},
    {"disk_high", "0.90", "a node above this disk fraction sheds", 0, 1},
    {"disk_flood", "0.95", "a node above this sheds before anything else", 0, 1},
    {"move_bytes_per_sec", "67108864", "copy and catch-up throttle per move (0 = unlimited)", 0,
     1099511627776.0},
    {"move_bytes_per_sec_max", "268435456",
     "a non-converging move's throttle may be raised up to this", 0, 1099511627776.0},
    {"fence_lag_bytes", "1048576", "fence once the catch-up backlog is this small", 0, 1073741824},
    {"fence_timeout_ms", "2000", "abort a move whose fence has not committed in this time", 10,
     600000},
    {"move_stall_timeout_ms", "30000", "abort a move with no progress report for this long", 1000,
     3.6e6},
    {"cleanup_after_s", "300", "keep a moved partition's old copy this long", 0, 8.64e6},
    {"replica_move_timeout_ms", "600000",
     "abort a replica move (RF > 1) not in sync and transferred in this time", 1000, 8.64e7},
    {"max_moves_in_per_node", "2", "moves into one node at once", 1, 1000},
    {"max_moves_out_per_node", "2", "moves out of one node at once", 1, 1000},
    {"max_moves_cluster", "0", "moves at once in the cluster (0 = max(1, nodes/2))", 0, 100000},
    {"rebalance_interval_s", "10", "how often the rebalance loop plans (0 = the loop is off)", 0,
     86400},
    {"quarantine", "1", "quarantine a node after its 4th failure within an hour (0 = never)", 0, 1},
    {"latency_objective_ms", "50",
     "rebalancing waits while a node's p99 is above this (0 = never waits)", 0, 600000},
    /* Replication (coord_rf.h): both checked together by coord_rf_check_change.
     * min_insync's real default depends on RF (coord_rf_get); "2" is it for
     * the default RF 3. */
    {"replicas", "3", "copies of each partition (RF)", 1, 7},
    {"min_insync", "2", "in-sync copies a write needs (default 2 for RF >= 3, else RF)", 1, 7},
    {NULL, NULL, NULL, 0, 0},
};

const setting_def *coord_setting_find(const char *name) {
    for (const setting_def *d = coord_settings; d->name; d++)
        if (!strcmp(d->name, name)) return d;
    return NULL;
}

double coord_setting_d(coord *co, const char *name) {
    mapstore_setting st;
    if (mapstore_setting_get(co->ms, name, &st) == 0) return atof(st.value);
    const setting_def *d = coord_setting_find(name);
    return d ? atof(d->def) : 0;
}

long long coord_setting_ll(coord *co, const char *name) {
    return (long long)coord_setting_d(co, name);
}

/* ---- Flags --------------------------------------------------------------- */

void coord_config_default(coord_config *c) {
    memset(c, 0, sizeof *c);
    c->partitions = 1024;
    snprintf(c->bind, sizeof c->bind, "127.0.0.1");
    c->log_level = KEEL_LOG_INFO;
}

static int int_arg(const char *flag, const char *v, long lo, long hi, long *out, char *err,
                   size_t cap) {
    int64_t x;
    if (keel_parse_i64z(v, &x) || x < lo || x > hi) {
        snprintf(err, cap, "%s must be an integer from %ld to %ld, got '%s'", flag, lo, hi, v);
        return KEEL_EINVAL;
    }
    *out = x;
    return 0;
}

int coord_config_parse(coord_config *c, int argc, char **argv, char *err, size_t cap) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--init")) {
            c->init = 1;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, cap, "%s: unknown flag or missing value", a);
            return KEEL_EINVAL;
        }
        const char *v = argv[++i];
        long x;
        if (!strcmp(a, "--dir")) {
            if (!*v || strlen(v) >= sizeof c->dir)
                return snprintf(err, cap, "bad --dir"), KEEL_EINVAL;
            snprintf(c->dir, sizeof c->dir, "%s", v);
        } else if (!strcmp(a, "--port")) {
            if (int_arg(a, v, 1, 65535, &x, err, cap)) return KEEL_EINVAL;
            c->port = (int)x;
        } else if (!strcmp(a, "--http-port")) {
            if (int_arg(a, v, 1, 65535, &x, err, cap)) return KEEL_EINVAL;
            c->http_port = (int)x;
        } else if (!strcmp(a, "--partitions")) {
            if (int_arg(a, v, 16, 16384, &x, err, cap) || (x & (x - 1))) {
                snprintf(err, cap, "--partitions must be a power of two from 16 to 16384");
                return KEEL_EINVAL;
            }
            c->partitions = (unsigned)x;
            c->partitions_given = 1;
        } else if (!strcmp(a, "--bind")) {
            snprintf(c->bind, sizeof c->bind, "%s", v);
        } else if (!strcmp(a, "--requirepass")) {
            snprintf(c->requirepass, sizeof c->requirepass, "%s", v);
        } else if (!strcmp(a, "--etcd")) {
            if (!*v || strlen(v) >= sizeof c->etcd)
                return snprintf(err, cap, "bad --etcd (URL[,URL...])"), KEEL_EINVAL;
            snprintf(c->etcd, sizeof c->etcd, "%s", v);
        } else if (!strcmp(a, "--etcd-prefix")) {
            if (!*v || strlen(v) >= sizeof c->etcd_prefix || v[strlen(v) - 1] != '/')
                return snprintf(err, cap, "--etcd-prefix must be 1..128 bytes ending in '/'"),
                       KEEL_EINVAL;
            snprintf(c->etcd_prefix, sizeof c->etcd_prefix, "%s", v);
        } else if (!strcmp(a, "--id")) {
            if (!*v || strlen(v) >= sizeof c->id)
                return snprintf(err, cap, "bad --id"), KEEL_EINVAL;
            snprintf(c->id, sizeof c->id, "%s", v);
        } else if (!strcmp(a, "--lease-ttl-s")) {
            if (int_arg(a, v, 2, 60, &x, err, cap)) return KEEL_EINVAL;
            c->lease_ttl_s = (int)x;
        } else if (!strcmp(a, "--audit-log")) {
            if (!*v || strlen(v) >= sizeof c->audit_log)
                return snprintf(err, cap, "bad --audit-log FILE"), KEEL_EINVAL;
            snprintf(c->audit_log, sizeof c->audit_log, "%s", v);
        } else if (!strcmp(a, "--etcd-timeout-ms")) {
            if (int_arg(a, v, 100, 60000, &x, err, cap)) return KEEL_EINVAL;
            c->etcd_timeout_ms = (int)x;
        } else if (!strcmp(a, "--replicas")) {
            if (int_arg(a, v, 1, KEEL_RF_MAX, &x, err, cap)) return KEEL_EINVAL;
            c->replicas = (int)x;
        } else if (!strcmp(a, "--min-insync")) {
            if (int_arg(a, v, 1, KEEL_RF_MAX, &x, err, cap)) return KEEL_EINVAL;
            c->min_insync = (int)x;
        } else if (!strcmp(a, "--log-level")) {
            if (keel_log_parse_level(v, &c->log_level))
                return snprintf(err, cap, "bad --log-level '%s'", v), KEEL_EINVAL;
        } else {
            snprintf(err, cap, "unknown flag '%s' (see keel coord --help)", a);
            return KEEL_EINVAL;
        }
    }
    if (!c->dir[0]) return snprintf(err, cap, "--dir is required"), KEEL_EINVAL;
    if (!c->init && !c->port) return snprintf(err, cap, "--port is required"), KEEL_EINVAL;
    if (!c->etcd[0] && (c->id[0] || c->lease_ttl_s))
        return snprintf(err, cap, "--id and --lease-ttl-s need --etcd"), KEEL_EINVAL;
    if (!c->etcd[0] && (c->etcd_prefix[0] || c->etcd_timeout_ms))
        return snprintf(err, cap, "--etcd-prefix and --etcd-timeout-ms need --etcd"), KEEL_EINVAL;
    if (!c->init && (c->replicas || c->min_insync))
        return snprintf(err, cap,
                        "--replicas and --min-insync are for --init (later: keel set replicas N)"),
               KEEL_EINVAL;
    if (c->init) {
        int rf = c->replicas ? c->replicas : COORD_RF_DEFAULT;
        int mi = c->min_insync ? c->min_insync : coord_rf_default_min_insync(rf);
        if (coord_rf_validate(rf, mi, 1, err, cap)) return KEEL_EINVAL;
    }
    if (c->http_port && c->http_port == c->port)
        return snprintf(err, cap, "--http-port must differ from --port"), KEEL_EINVAL;
    return 0;
}

const char *coord_usage(void) {
    return "usage: keel coord --init --dir DIR [--partitions P] [--replicas RF]\n"
           "                  [--min-insync N] [ETCD]   create a cluster (RF 1 for now)\n"
           "       keel coord --dir DIR --port N [--http-port H] [--requirepass PW]\n"
           "                  [--bind ADDR] [--log-level L] [--audit-log FILE] [ETCD]\n"
           "ETCD (the map store on etcd instead of DIR/map.db; DIR keeps the secret and keys):\n"
           "       --etcd http://HOST:PORT[,...] [--etcd-prefix /keel/NAME/]\n"
           "       [--etcd-timeout-ms MS]   (prefix default " MAPSTORE_ETCD_DEFAULT_PREFIX
           ", timeout 2000)\n"
           "       [--id C [--lease-ttl-s S]]   several coordinators, one leader (default TTL 3)\n";
}

static void paths(const coord_config *c, char *db, char *secret, size_t cap) {
    snprintf(db, cap, "%s/map.db", c->dir);
    snprintf(secret, cap, "%s/cluster.secret", c->dir);
}

/* The coordinator key pair beside cluster.secret (core/coordkey.h). */
static void key_paths(const coord_config *c, char *key, char *pub, size_t cap) {
    snprintf(key, cap, "%s/coord.key", c->dir);
    snprintf(pub, cap, "%s/coord.pub", c->dir);
}

/* ---- The map store: SQLite in DIR, or etcd ------------------------------ */

static mapstore_etcd_config etcd_config(const coord_config *c) {
    mapstore_etcd_config e = {c->etcd, c->etcd_prefix[0] ? c->etcd_prefix : NULL,
                              c->etcd_timeout_ms};
    return e;
}

static void etcd_id_path(const coord_config *c, char *p, size_t cap) {
    snprintf(p, cap, "%s/etcd.cluster", c->dir);
}

/* Creates the map (DIR/map.db, or on etcd with the id kept in
 * DIR/etcd.cluster). */
static int create_map(const coord_config *c, mapstore **ms, char *err, size_t cap) {
    char db[PATH_MAX + 16], sec[PATH_MAX + 16];
    paths(c, db, sec, sizeof db);
    if (!c->etcd[0]) return mapstore_sqlite_create(db, c->partitions, keel_wall_ms(), ms, err, cap);
    char idp[PATH_MAX + 16];
    etcd_id_path(c, idp, sizeof idp);
    mapstore_etcd_config e = etcd_config(c);
    int rc = mapstore_etcd_create(&e, c->partitions, keel_wall_ms(), ms, err, cap);
    if (rc) return rc;
    FILE *fp = fopen(idp, "wx");
    if (!fp || fprintf(fp, "%s\n", mapstore_cluster_id(*ms)) < 0 || fclose(fp)) {
        snprintf(err, cap,
                 "%s: %s (the map was created in etcd under %s; remove it with "
                 "etcdctl del --prefix before trying again)",
                 idp, strerror(errno),
                 c->etcd_prefix[0] ? c->etcd_prefix : MAPSTORE_ETCD_DEFAULT_PREFIX);
        mapstore_free(*ms);
        *ms = NULL;
        return KEEL_EIO;
    }
    return 0;
}

/* Opens the map; on etcd it must be the cluster DIR/etcd.cluster names. */
static int open_map(const coord_config *c, mapstore_expect *want, mapstore **ms, char *err,
                    size_t cap) {
    char db[PATH_MAX + 16], sec[PATH_MAX + 16];
    paths(c, db, sec, sizeof db);
    if (!c->etcd[0]) return mapstore_sqlite_open(db, want, ms, err, cap);
    char idp[PATH_MAX + 16], id[MAPSTORE_CLUSTER_ID_MAX + 2] = "";
    etcd_id_path(c, idp, sizeof idp);
    FILE *fp = fopen(idp, "r");
    if (!fp || !fgets(id, sizeof id, fp)) {
        if (fp) fclose(fp);
        snprintf(err, cap,
                 "%s: no etcd cluster recorded in %s (create one with keel coord "
                 "--init --dir %s --etcd URL)",
                 idp, c->dir, c->dir);
        return KEEL_ENOTFOUND;
    }
    fclose(fp);
    id[strcspn(id, "\n")] = 0;
    want->cluster_id = id;
    mapstore_etcd_config e = etcd_config(c);
    int rc = mapstore_etcd_open(&e, want, ms, err, cap);
    want->cluster_id = NULL;
    return rc;
}

/* ---- --init -------------------------------------------------------------- */

int coord_init(const coord_config *c) {
    char db[PATH_MAX + 16], sec[PATH_MAX + 16], err[MAPSTORE_ERR_MAX + PATH_MAX];
    paths(c, db, sec, sizeof db);
    if (mkdir(c->dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "keel coord: cannot create %s: %s\n", c->dir, strerror(errno));
        return 1;
    }
    struct stat st;
    if (stat(sec, &st) == 0) {
        fprintf(stderr, "keel coord: %s exists: this directory already holds a cluster\n", sec);
        return 1;
    }
    mapstore *ms = NULL;
    if (create_map(c, &ms, err, sizeof err)) {
        fprintf(stderr, "keel coord: %s\n", err);
        return 1;
    }
    /* The replication settings, validated by coord_config_parse. */
    int rf = c->replicas ? c->replicas : COORD_RF_DEFAULT;
    int mi = c->min_insync ? c->min_insync : coord_rf_default_min_insync(rf);
    char rfs[16], mis[16];
    snprintf(rfs, sizeof rfs, "%d", rf);
    snprintf(mis, sizeof mis, "%d", mi);
    int rc = mapstore_setting_set(ms, "replicas", rfs, keel_wall_ms());
    if (rc == 0) rc = mapstore_setting_set(ms, "min_insync", mis, keel_wall_ms());
    if (rc) {
        fprintf(stderr, "keel coord: %s\n", mapstore_errmsg(ms));
        mapstore_free(ms);
        if (!c->etcd[0]) unlink(db);
        return 1;
    }
    peerauth_secret s;
    char key[PATH_MAX + 16], pub[PATH_MAX + 16];
    key_paths(c, key, pub, sizeof key);
    rc = peerauth_secret_generate(&s);
    if (rc == 0) rc = peerauth_secret_write(sec, &s, err, sizeof err);
    peerauth_secret_wipe(&s);
    if (rc == 0 && (rc = coordkey_create(key, pub, err, sizeof err))) unlink(sec);
    if (rc) {
        fprintf(stderr, "keel coord: %s\n", rc == KEEL_EIO && !err[0] ? "no randomness" : err);
        mapstore_free(ms);
        unlink(db);
        return 1;
    }
    if (c->etcd[0])
        printf("map store: etcd %s, prefix %s\n", c->etcd,
               c->etcd_prefix[0] ? c->etcd_prefix : MAPSTORE_ETCD_DEFAULT_PREFIX);
    printf("created cluster %s with %u partitions in %s\nreplicas %d, min_insync %d\n"
           "secret: %s (give it to every node)\n",
           mapstore_cluster_id(ms), c->partitions, c->dir, rf, mi, sec);
    keel_log(KEEL_LOG_INFO, "cluster_created",
             "cluster=%s partitions=%u dir=%s replicas=%d min_insync=%d", mapstore_cluster_id(ms),
             c->partitions, c->dir, rf, mi);
    mapstore_free(ms);
    return 0;
}

/* ---- Membership ---------------------------------------------------------- */

member *coord_member(coord *co, const char *id, int create) {
    for (size_t i = 0; i < co->nmembers; i++)
        if (!strcmp(co->members[i].id, id)) return &co->members[i];
    if (!create) return NULL;
    member *m = realloc(co->members, (co->nmembers + 1) * sizeof *m);
    if (!m) return NULL;
    co->members = m;
    m = &co->members[co->nmembers++];
    memset(m, 0, sizeof *m);
    snprintf(m->id, sizeof m->id, "%s", id);
    return m;
}

int coord_quarantined(coord *co, const char *id) {
    mapstore_setting st;
    if (mapstore_setting_get(co->ms, "quarantined", &st)) return 0;
    size_t n = strlen(id);
    for (const char *p = st.value; (p = strstr(p, id)); p += n)
        if ((p == st.value || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return 1;
    return 0;
}

int coord_quarantine_write(coord *co, const char *id, int on, mapstore_write *w) {
    mapstore_setting st;
    char list[MAPSTORE_SETTING_VALUE_MAX + 1] = "";
    int have = mapstore_setting_get(co->ms, "quarantined", &st) == 0;
    if (have) snprintf(list, sizeof list, "%s", st.value);
    char out[MAPSTORE_SETTING_VALUE_MAX + 1] = "";
    size_t len = 0;
    for (char *save = NULL, *tok = strtok_r(list, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save))
        if (strcmp(tok, id))
            len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", len ? " " : "", tok);
    if (on) {
        if (len + strlen(id) + 2 > MAPSTORE_SETTING_VALUE_MAX) return KEEL_ELIMIT;
        snprintf(out + len, sizeof out - len, "%s%s", len ? " " : "", id);
    }
    if (!out[0]) {
        if (!have) return 1;
        mapstore_w_setting_unset(w, "quarantined");
        return 0;
    }
    mapstore_w_setting_set(w, "quarantined", out, keel_wall_ms());
    return 0;
}

static void quarantined_done(void *arg, const mapstore_result *r) {
    char *id = arg;
    if (r->rc == 0)
        keel_log(KEEL_LOG_WARN, "node_quarantined",
                 "node=%s failures_in_last_hour=4 action=\"no data moves to it until keel "
                 "unquarantine\"",
                 id);
    else
        keel_log(KEEL_LOG_ERROR, "node_quarantine_failed", "node=%s error=\"%s\"", id, r->errmsg);
    free(id);
}

int64_t coord_now(coord *co) {
    return keel_stallclock_read(&co->clock, (int64_t)(keel_mono_us() / 1000));
}

const char *coord_node_summary(const mapstore_node *n) {
    if (n->membership == MAPSTORE_MEMBER_REMOVED) return "REMOVED";
    if (n->liveness != MAPSTORE_NODE_UP) return mapstore_liveness_name(n->liveness);
    return n->membership == MAPSTORE_MEMBER_DRAINING ? "DRAINING" : "UP";
}

int coord_node_usable(const mapstore_node *n) {
    return n->liveness == MAPSTORE_NODE_UP && n->membership != MAPSTORE_MEMBER_REMOVED;
}

/* A node that went from UP to SUSPECT or DOWN failed once; the fourth
 * failure within an hour quarantines it. */
static void count_failure(coord *co, const char *id, int64_t now) {
    member *m = coord_member(co, id, 1);
    if (!m) return;
    memmove(m->failures_ms, m->failures_ms + 1, sizeof m->failures_ms - sizeof *m->failures_ms);
    m->failures_ms[3] = now;
    if (m->failures_ms[0] && now - m->failures_ms[0] <= 3600 * 1000 &&
        coord_setting_ll(co, "quarantine") && !coord_quarantined(co, id)) {
        mapstore_write w;
        char *arg = strdup(id);
        if (arg && coord_quarantine_write(co, id, 1, &w) == 0 &&
            mapstore_submit(co->ms, &w, quarantined_done, arg) == 0)
            return;
        free(arg);
    }
}

typedef struct liveness_arg {
    coord *co;
    mapstore_node n; /* as the detector judged it */
    mapstore_liveness to;
    char why[32];
} liveness_arg;

static void liveness_done(void *arg, const mapstore_result *r) {
    liveness_arg *a = arg;
    coord *co = a->co;
    member *m = coord_member(co, a->n.id, 0);
    if (m) m->liveness_pending = 0;
    if (r->rc) {
        keel_log(KEEL_LOG_ERROR, "node_state_failed", "node=%s error=\"%s\"", a->n.id, r->errmsg);
    } else {
        if (a->to == MAPSTORE_NODE_SUSPECT) co->detector.suspect_total++;
        if (a->to == MAPSTORE_NODE_DOWN) co->detector.down_total++;
        keel_log(KEEL_LOG_WARN, "node_state",
                 "node=%s from=%s to=%s membership=%s reason=%s version=%llu", a->n.id,
                 mapstore_liveness_name(a->n.liveness), mapstore_liveness_name(a->to),
                 mapstore_membership_name(a->n.membership), a->why,
                 (unsigned long long)mapstore_version(co->ms));
    }
    free(a);
}

/* Submits the change; the detector judges from memory, which shows it once
 * it is durable, and a node with a change in flight is not judged again. */
static void set_liveness(coord *co, const mapstore_node *n, mapstore_liveness to, const char *why,
                         int64_t now) {
    if (n->liveness == to) return;
    member *m = coord_member(co, n->id, 1);
    if (m && m->liveness_pending) return;
    if (n->liveness == MAPSTORE_NODE_UP) count_failure(co, n->id, now);
    liveness_arg *a = calloc(1, sizeof *a);
    if (!a) return;
    a->co = co;
    a->n = *n;
    a->to = to;
    snprintf(a->why, sizeof a->why, "%s", why);
    mapstore_write w;
    mapstore_w_node_set_liveness(&w, n->id, to);
    if (mapstore_submit(co->ms, &w, liveness_done, a)) {
        keel_log(KEEL_LOG_ERROR, "node_state_failed", "node=%s error=\"%s\"", n->id,
                 mapstore_errmsg(co->ms));
        free(a);
        return;
    }
    if ((m = coord_member(co, n->id, 0))) m->liveness_pending = 1;
}

/* The detector's judgement (detector.h) applied to the map store. */
static void check_members(coord *co, int64_t now) {
    mapstore_node *nodes = NULL;
    size_t n = 0;
    if (mapstore_node_list(co->ms, &nodes, &n) || !n) {
        free(nodes);
        return;
    }
    detector_node *in = calloc(n, sizeof *in);
    mapstore_liveness *to = calloc(n, sizeof *to);
    if (!in || !to) goto out;
    for (size_t i = 0; i < n; i++) {
        member *m = coord_member(co, nodes[i].id, 0);
        in[i].liveness = nodes[i].liveness;
        in[i].removed = nodes[i].membership == MAPSTORE_MEMBER_REMOVED;
        in[i].last_heard_ms = m ? m->last_hb_ms : 0;
    }
    /* Late (for the brake): a heartbeat and a half missed, or half the
     * suspect timeout, whichever is longer: a healthy node is never late
     * between two heartbeats, however short the suspect timeout is set. */
    int64_t suspect = coord_setting_ll(co, "node_suspect_after_ms");
    int64_t late = 3 * coord_setting_ll(co, "heartbeat_ms") / 2;
    if (late < suspect / 2) late = suspect / 2;
    detector_policy pol = {.suspect_after_ms = suspect,
                           .late_after_ms = late,
                           .dead_after_ms = coord_setting_ll(co, "node_dead_after_ms"),
                           .hold_ratio = 0.5,
                           .hold_min_nodes = 2};
    int64_t since = co->start_ms > co->clock.last_stall ? co->start_ms : co->clock.last_stall;
    if (co->detector.released_at > since) since = co->detector.released_at;
    detector_result res;
    detector_judge(&pol, now, since, co->detector.held, in, n, to, &res);
    if (res.released) co->detector.released_at = now;
    if (res.held != co->detector.held) {
        keel_log(KEEL_LOG_WARN, res.held ? "detector_held" : "detector_released",
                 "looks_dead=%zu judged=%zu reason=%s", res.looks_dead, res.judged,
                 res.held ? "\"more than half of the cluster looks dead at once: the coordinator "
                            "declares no failure\""
                          : "-");
        co->detector.held = res.held;
        co->detector.held_since = res.held ? now : 0;
    }
    co->detector.held_total += res.held;
    for (size_t i = 0; i < n; i++)
        if (to[i] != nodes[i].liveness)
            set_liveness(co, &nodes[i], to[i],
                         to[i] == MAPSTORE_NODE_DOWN ? "silent" : "missed-heartbeats", now);
out:
    free(in);
    free(to);
    free(nodes);
}

/* The kill switch is reported loudly: a log line every minute while set. */
static void report_pause(coord *co, int64_t now) {
    static int64_t last;
    mapstore_setting ps;
    if (now - last < 60000 || mapstore_setting_get(co->ms, "paused", &ps)) return;
    last = now;
    char q[256];
    keel_log(KEEL_LOG_WARN, "rebalance_paused", "for_s=%.0f reason=%s",
             mapstore_setting_age_ms(&ps, now) / 1000.0,
             keel_log_quote(q, sizeof q, ps.value, strlen(ps.value)));
}

/* Reads the clock often enough that a gap means a stall (stallclock.h). */
static void on_clock_timer(uv_timer_t *t) {
    coord *co = t->data;
    coord_now(co);
    uint64_t us = keel_mono_us();
    if (co->loop_last_us) {
        double late = (double)(us - co->loop_last_us) / 1000.0 - COORD_CLOCK_TICK_MS;
        if (late > co->loop_max_stall_ms) co->loop_max_stall_ms = late;
    }
    co->loop_last_us = us;
    if (co->clock.stalls != co->detector.stalls_logged) {
        keel_log(KEEL_LOG_WARN, "coord_stalled",
                 "stalled_ms=%lld stalls=%llu action=\"every node gets a full suspect period from "
                 "now\"",
                 (long long)(co->clock.credited - co->detector.credited_logged),
                 (unsigned long long)co->clock.stalls);
        co->detector.stalls_logged = co->clock.stalls;
        co->detector.credited_logged = co->clock.credited;
    }
}

static void on_member_timer(uv_timer_t *t) {
    coord *co = t->data;
    int64_t now = coord_now(co);
    /* A map store left stale by a write whose outcome was lost (or by a
     * failed re-read) is read again until a read succeeds, so that memory
     * shows a lost write that applied even if no later write comes. */
    if (co->ms && mapstore_stale(co->ms) && !mapstore_pending(co->ms) &&
        now >= co->stale_reload_ms) {
        co->stale_reload_ms = now + 1000;
        (void)mapstore_reload_submit(co->ms, NULL, NULL);
    }
    check_members(co, now);
    coord_maybe_place(co, now);
    report_pause(co, now);
}

/* ---- Placement ----------------------------------------------------------- */

static int add_nodes(coord *co, int64_t now, const mapstore_node *nodes, size_t nn, plan_model *m) {
    for (size_t k = 0; k < nn; k++) {
        if (nodes[k].membership == MAPSTORE_MEMBER_REMOVED) continue;
        plan_node pn;
        plan_node_default(&pn, nodes[k].id);
        snprintf(pn.rack, sizeof pn.rack, "%s", nodes[k].rack);
        pn.capacity = nodes[k].capacity;
        pn.state = nodes[k].liveness == MAPSTORE_NODE_UP        ? PLAN_NODE_UP
                   : nodes[k].liveness == MAPSTORE_NODE_SUSPECT ? PLAN_NODE_SUSPECT
                                                                : PLAN_NODE_DOWN;
        pn.draining = nodes[k].membership == MAPSTORE_MEMBER_DRAINING;
        /* Quarantined: frozen, so it receives nothing. */
        if (pn.state == PLAN_NODE_UP && coord_quarantined(co, nodes[k].id))
            pn.state = PLAN_NODE_SUSPECT;
        member *mb = coord_member(co, nodes[k].id, 0);
        if (mb) {
            pn.disk_used = (double)mb->disk_used;
            pn.disk_capacity = (double)mb->disk_capacity;
        }
        /* DOWN at once by a graceful stop (KEEL.LEAVE: a rolling restart)
         * is not lost yet: RF is restored (plan_repair.c) only for a node
         * silent for node_dead_after_ms, as DESIGN §12 says. */
        if (pn.state == PLAN_NODE_DOWN && mb && mb->last_hb_ms &&
            now - mb->last_hb_ms < coord_setting_ll(co, "node_dead_after_ms"))
            pn.state = PLAN_NODE_SUSPECT;
        /* Never heard from since this coordinator started: missing data. */
        pn.metrics_age_s = mb && mb->last_hb_ms ? (double)(now - mb->last_hb_ms) / 1000.0 : 1e9;
        if (pn.metrics_age_s < 0) pn.metrics_age_s = 0;
        int idx = plan_model_add_node(m, &pn); /* its index, or a negative KEEL_E* */
        if (idx < 0) return idx;
    }
    return 0;
}

static void plan_settings_from(coord *co, plan_settings *ps) {
    plan_settings_default(ps);
    ps->load_weight = coord_setting_d(co, "load_weight");
    ps->start_ratio = coord_setting_d(co, "start_ratio");
    ps->stop_ratio = coord_setting_d(co, "stop_ratio");
    ps->max_moves = (uint32_t)coord_setting_ll(co, "max_moves_per_round");
    ps->min_gain = coord_setting_d(co, "min_gain");
    ps->min_residence_s = coord_setting_d(co, "min_residence_s");
    ps->disk_low = coord_setting_d(co, "disk_low");
    ps->disk_high = coord_setting_d(co, "disk_high");
    ps->disk_flood = coord_setting_d(co, "disk_flood");
    ps->max_metrics_age_s = 3.0 * (double)coord_setting_ll(co, "heartbeat_ms") / 1000.0;
}

int coord_build_model(coord *co, int64_t now, plan_model *m) {
    mapstore_partition *parts = NULL;
    mapstore_node *nodes = NULL;
    size_t np = 0, nn = 0;
    plan_model_init(m);
    int rc = mapstore_partition_list(co->ms, &parts, &np);
    if (!rc) rc = mapstore_node_list(co->ms, &nodes, &nn);
    if (!rc) rc = plan_model_reserve_parts(m, np);
    if (!rc) rc = add_nodes(co, now, nodes, nn, m);
    for (size_t i = 0; !rc && i < np; i++) {
        plan_part pp;
        plan_part_default(&pp, parts[i].id);
        int owner = parts[i].owner[0] ? plan_model_find_node(m, parts[i].owner) : -1;
        if (owner >= 0) pp.replicas[0] = owner, pp.nreplicas = 1;
        /* RF > 1: every replica, leader first; out-of-ISR ones marked */
        for (unsigned r = 1; owner >= 0 && r < parts[i].nreplicas && r < PLAN_MAX_REPLICAS; r++) {
            int ix = plan_model_find_node(m, parts[i].replicas[r]);
            if (ix < 0) continue; /* a REMOVED node: the replica is gone */
            if (!(parts[i].isr >> r & 1)) pp.lagging |= (uint8_t)(1u << pp.nreplicas);
            pp.replicas[pp.nreplicas++] = ix;
        }
        pp.pinned = parts[i].pinned;
        pp.bytes = (double)co->parts[i].bytes;
        pp.load = co->parts[i].ops;
        int idx = plan_model_add_part(m, &pp);
        rc = idx < 0 ? idx : 0;
    }
    plan_settings_from(co, &m->settings);
    long long rf = coord_setting_ll(co, "replicas");
    /* RF 1: no repair (plan_repair.c) */
    m->settings.replicas = rf > 1 && rf <= PLAN_MAX_REPLICAS ? (uint8_t)rf : 0;
    free(parts);
    free(nodes);
    return rc;
}

typedef struct place_arg {
    coord *co;
    size_t placed, left;
} place_arg;

static void placed_done(void *arg, const mapstore_result *r) {
    place_arg *a = arg;
    a->co->placing = 0;
    if (r->rc)
        keel_log(KEEL_LOG_ERROR, "placement_failed", "error=\"%s\"", r->errmsg);
    else
        keel_log(KEEL_LOG_INFO, "placement", "partitions=%zu left=%zu version=%llu", a->placed,
                 a->left, (unsigned long long)r->version);
    free(a);
}

/* RF > 1 placement state: the model's nodes as coord_place sees them
 * (eligible: UP, not draining, not quarantined; counts: the replicas each
 * holds now) and room for each placed partition's followers. */
typedef struct place_followers {
    coord_place_node *nodes;             /* [model.nnodes] */
    const char *(*ids)[KEEL_RF_MAX - 1]; /* [P], views into the model's node ids */
} place_followers;

static place_followers *place_nodes(const plan_model *model, const mapstore_partition *parts,
                                    size_t np) {
    place_followers *f = calloc(1, sizeof *f);
    if (!f || !(f->nodes = calloc(model->nnodes ? model->nnodes : 1, sizeof *f->nodes)) ||
        !(f->ids = calloc(np ? np : 1, sizeof *f->ids))) {
        if (f) free(f->nodes);
        free(f);
        return NULL;
    }
    for (size_t k = 0; k < model->nnodes; k++) {
        const plan_node *pn = &model->nodes[k];
        f->nodes[k].rack = pn->rack;
        f->nodes[k].eligible = pn->state == PLAN_NODE_UP && !pn->draining && pn->capacity > 0;
    }
    for (size_t i = 0; i < np; i++)
        for (unsigned r = 0; r < parts[i].nreplicas; r++) {
            int k = plan_model_find_node(model, parts[i].replicas[r]);
            if (k >= 0) f->nodes[k].count++;
        }
    return f;
}

/* Bootstrap: every unowned partition goes where the planner's placement
 * puts it (least utilised eligible node), in one map store transaction;
 * at RF > 1 with its followers (coord_place.h), all in the ISR. */
void coord_maybe_place(coord *co, int64_t now) {
    if (co->placing || !co->first_register_ms ||
        now - co->first_register_ms < coord_setting_ll(co, "bootstrap_wait_ms"))
        return;
    mapstore_partition *parts = NULL;
    mapstore_node *nodes = NULL;
    mapstore_placement *pl = NULL;
    place_followers *fol = NULL;
    size_t np = 0, nn = 0, unowned = 0, placed = 0, m = 0, under = 0;
    plan_model model;
    plan_model_init(&model);
    if (mapstore_partition_list(co->ms, &parts, &np) || mapstore_node_list(co->ms, &nodes, &nn))
        goto done;
    for (size_t i = 0; i < np; i++)
        unowned += parts[i].owner[0] == 0;
    if (!unowned) goto done;
    plan_model_close(&model);
    int rc = coord_build_model(co, now, &model);
    if (!rc) rc = plan_place(&model, &placed, NULL);
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "placement_failed", "error=%s", keel_errname(rc));
        goto done;
    }
    if (!placed || !(pl = calloc(placed, sizeof *pl))) goto done;
    int rf, min_insync;
    coord_rf_get(co, &rf, &min_insync);
    if (rf > 1 && !(fol = place_nodes(&model, parts, np))) goto done;
    for (size_t i = 0; i < np && i < model.nparts; i++) {
        if (parts[i].owner[0] || !model.parts[i].nreplicas) continue;
        size_t leader = (size_t)model.parts[i].replicas[0];
        pl[m] = (mapstore_placement){parts[i].id, model.nodes[leader].id, NULL, 0};
        if (fol) { /* RF > 1: the followers (coord_place.h), every replica in the ISR */
            size_t idx[KEEL_RF_MAX];
            size_t nf = coord_place_followers(fol->nodes, model.nnodes, leader,
                                              rf > KEEL_RF_MAX ? KEEL_RF_MAX : rf, idx);
            for (size_t f = 0; f < nf; f++)
                fol->ids[m][f] = model.nodes[idx[f]].id;
            pl[m].followers = fol->ids[m];
            pl[m].nfollowers = (unsigned)nf;
            under += nf + 1 < (size_t)rf;
        }
        m++;
    }
    if (under)
        keel_log(KEEL_LOG_WARN, "placement_under_replicated",
                 "partitions=%zu replicas=%d reason=\"fewer eligible nodes than replicas\"", under,
                 rf);
    mapstore_write w;
    mapstore_w_partition_place(&w, pl, m);
    place_arg *a = malloc(sizeof *a);
    if (a) *a = (place_arg){co, m, unowned - m};
    if (a && mapstore_submit(co->ms, &w, placed_done, a) == 0) {
        co->placing = 1; /* no second placement until this one completes */
    } else {
        keel_log(KEEL_LOG_ERROR, "placement_failed", "error=\"%s\"",
                 a ? mapstore_errmsg(co->ms) : "out of memory");
        free(a);
    }
done:
    if (fol) {
        free(fol->nodes);
        free(fol->ids);
        free(fol);
    }
    plan_model_close(&model);
    free(pl);
    free(parts);
    free(nodes);
}

/* ---- The map as JSON ----------------------------------------------------- */

const kbuf *coord_map_json(coord *co) {
    uint64_t v = mapstore_version(co->ms);
    if (co->map_json.len && co->map_json_version == v) return &co->map_json;
    mapstore_partition *parts = NULL;
    mapstore_node *nodes = NULL;
    size_t np = 0, nn = 0;
    if (mapstore_partition_list(co->ms, &parts, &np) || mapstore_node_list(co->ms, &nodes, &nn)) {
        free(parts);
        return NULL;
    }
    /* The map as the nodes will parse it, written by the one codec
     * (core/mapcodec): removed nodes are left out, and a partition whose
     * owner is not listed is written unowned rather than naming a node the
     * reader cannot find (which would make it refuse the whole map). */
    keel_map m;
    int rc = keel_map_init(&m, (unsigned)np);
    for (size_t k = 0; !rc && k < nn; k++) {
        if (nodes[k].membership == MAPSTORE_MEMBER_REMOVED) continue;
        map_node mn;
        memset(&mn, 0, sizeof mn);
        snprintf(mn.id, sizeof mn.id, "%s", nodes[k].id);
        snprintf(mn.host, sizeof mn.host, "%s", nodes[k].host);
        mn.port = nodes[k].port;
        snprintf(mn.liveness, sizeof mn.liveness, "%s", mapstore_liveness_name(nodes[k].liveness));
        snprintf(mn.membership, sizeof mn.membership, "%s",
                 mapstore_membership_name(nodes[k].membership));
#ifdef MAP_INCARNATION_MAX /* the per-node field of core/mapcodec (issue 11, C3) */
        member *mb = coord_member(co, nodes[k].id, 0);
        if (mb) snprintf(mn.incarnation, sizeof mn.incarnation, "%s", mb->map_incarnation);
#endif
        int idx = keel_map_add(&m, &mn);
        if (idx < 0)
            keel_log(KEEL_LOG_ERROR, "map_node_skipped", "reason=\"%s\"", keel_strerror(idx));
    }
    for (size_t i = 0; !rc && i < np; i++) {
        map_rep r;
        char why[128];
        m.owner[i] = -1;
        m.epoch[i] = parts[i].epoch;
        if (coord_rf_map_rep(&m, &parts[i], &r)) continue;
        if (keel_map_set_rep(&m, (unsigned)i, &r, why, sizeof why)) { /* the store's rules hold */
            keel_log(KEEL_LOG_ERROR, "map_replicas_skipped", "partition=%zu reason=\"%s\"", i, why);
            m.owner[i] = r.node[0];
        }
    }
    m.version = v;
    int rf, min_insync;
    coord_rf_get(co, &rf, &min_insync);
    if (rf > 1) { /* an RF 1 map's text stays what older nodes read */
        m.min_insync = (uint32_t)min_insync;
        m.lease_ms = (uint32_t)coord_setting_ll(co, "replica_lease_ms");
    }
    kbuf *b = &co->map_json;
    b->len = 0;
    if (!rc) rc = keel_map_write_json(&m, co->term, b);
    keel_map_close(&m);
    free(parts);
    free(nodes);
    if (rc) {
        b->len = 0;
        return NULL;
    }
    co->map_json_version = v;
    return b;
}

/* ---- Run ----------------------------------------------------------------- */

/* --id: the election (coord_elect.h); NULL without it. One per process. */
static coord_elect *elect;

static void on_signal(uv_signal_t *sig, int signum) {
    coord *co = sig->data;
    if (co->stopping) return;
    co->stopping = 1;
    keel_log(KEEL_LOG_INFO, "shutdown", "signal=%s", strsignal(signum));
    rserver_flush_now(co->rs);
    rserver_stop(co->rs);
    coord_rebalance_stop(co);
    coord_repmoves_stop(co);
    coord_moves_stop(co);
    coord_rep_stop(co);
    coord_dash_stop(co);
    http_stop(co->http);
    co->http = NULL;
    mapstore_async_stop(co->ms); /* waits for the write under way, drops the queued */
    uv_close((uv_handle_t *)&co->member_timer, NULL);
    uv_close((uv_handle_t *)&co->clock_timer, NULL);
    uv_close((uv_handle_t *)&co->sigint, NULL);
    uv_close((uv_handle_t *)&co->sigterm, NULL);
    coord_elect_unwatch(elect);
}

static const rserver_ops coord_ops = {.dispatch = coord_dispatch, .on_close = coord_conn_closed};

/* Starts the election and waits, as a standby, until this process leads.
 * Nothing is opened before: a standby holds no map; it answers on its port
 * with -NOTLEADER naming the leader (coord_standby.h). */
static int become_leader(const coord_config *c, uv_loop_t *loop, char *err, size_t cap) {
    char addr[COORD_ELECT_ADDR_MAX + 1];
    snprintf(addr, sizeof addr, "%s:%d", c->bind, c->port);
    coord_elect_config ec = {c->etcd, c->etcd_prefix[0] ? c->etcd_prefix : NULL, c->id, addr,
                             c->lease_ttl_s};
    int rc = coord_elect_start(&ec, &elect, err, cap);
    if (rc) return rc;
    keel_log(KEEL_LOG_INFO, "election_started", "id=%s addr=%s", c->id, addr);
    if (coord_standby_wait(loop, elect, c->bind, c->port))
        return snprintf(err, cap, "out of memory"), KEEL_ENOMEM;
    return 0;
}

static int coord_open(coord *co, char *err, size_t cap) {
    char db[PATH_MAX + 16], sec[PATH_MAX + 16];
    paths(&co->cfg, db, sec, sizeof db);
    mapstore_expect want = {.partitions = co->cfg.partitions_given ? co->cfg.partitions : 0};
    int rc = open_map(&co->cfg, &want, &co->ms, err, cap);
    if (rc == KEEL_ENOTFOUND && !co->cfg.etcd[0]) {
        snprintf(err, cap, "no cluster in %s (create one with keel coord --init --dir %s)",
                 co->cfg.dir, co->cfg.dir);
        return rc;
    }
    if (rc) return rc;
    if (elect) { /* every write from now on needs the leader key to be ours */
        coord_elect_view v;
        coord_elect_get(elect, &v);
        if (!v.leading)
            return snprintf(err, cap, "lost the election while opening"), KEEL_ENOTLEADER;
        if ((rc = mapstore_etcd_set_guard(co->ms, v.create_rev))) return rc;
    }
    if ((rc = peerauth_secret_load(sec, &co->secret, err, cap))) return rc;
    char key[PATH_MAX + 16], pub[PATH_MAX + 16];
    key_paths(&co->cfg, key, pub, sizeof key);
    rc = coordkey_load(key, &co->key, err, cap);
    if (rc == KEEL_ENOTFOUND) { /* a cluster made before the key existed */
        if ((rc = coordkey_create(key, pub, err, cap))) return rc;
        rc = coordkey_load(key, &co->key, err, cap);
        keel_log(KEEL_LOG_WARN, "coordinator_key_created", "path=%s", key);
    }
    if (rc) return rc;
    if ((rc = mapstore_bump_term(co->ms, &co->term))) {
        snprintf(err, cap, "cannot record the new term: %s", mapstore_errmsg(co->ms));
        return rc;
    }
    audit_set_term(co->term);
    co->partitions = mapstore_partitions(co->ms);
    co->parts = calloc(co->partitions, sizeof *co->parts);
    if (!co->parts) return snprintf(err, cap, "out of memory"), KEEL_ENOMEM;
    /* Owned partitions mean the cluster was bootstrapped already. */
    mapstore_partition p;
    if (mapstore_partition_get(co->ms, 0, &p) == 0 && p.owner[0]) co->first_register_ms = 1;
    return 0;
}

int coord_run(const coord_config *cfg) {
    char err[MAPSTORE_ERR_MAX + PATH_MAX] = "";
    coord *co = calloc(1, sizeof *co);
    if (!co) return 1;
    co->cfg = *cfg;
    co->loop = uv_default_loop();
    keel_stallclock_init(&co->clock, COORD_CLOCK_TICK_MS, COORD_CLOCK_GAP_MS,
                         (int64_t)(keel_mono_us() / 1000));
    co->start_ms = coord_now(co);
    kbuf_init(&co->map_json);
    keel_log_set_level(cfg->log_level);
    signal(SIGPIPE, SIG_IGN);
    int status = 1;
    if (failpoint_load_env(getenv(FAILPOINT_ENV), err, sizeof err)) goto fail;
    if (cfg->audit_log[0] &&
        audit_open(cfg->audit_log, cfg->id[0] ? cfg->id : "coordinator", err, sizeof err))
        goto fail;
    if (cfg->id[0] && become_leader(cfg, co->loop, err, sizeof err)) goto fail;
    if (cfg->id[0]) { /* the wait as a standby is not a stall of this leader: start afresh */
        keel_stallclock_init(&co->clock, COORD_CLOCK_TICK_MS, COORD_CLOCK_GAP_MS,
                             (int64_t)(keel_mono_us() / 1000));
        co->start_ms = coord_now(co);
    }
    if (coord_open(co, err, sizeof err)) goto fail;
    rserver_config rc = {.bind = cfg->bind,
                         .port = cfg->port,
                         .maxclients = 10000,
                         .max_output = 64u << 20,
                         .auth_required = cfg->requirepass[0] != 0};
    resp_limits_default(&rc.limits);
    rc.limits.max_bulk = 64u << 20;
    /* From here on no map-store write waits on the loop (mapstore.h,
     * "Asynchronous writes"): writes run on the store's worker thread. */
    if (mapstore_async_start(co->ms, co->loop)) {
        snprintf(err, sizeof err, "cannot start the map store's worker: %s",
                 mapstore_errmsg(co->ms));
        goto fail;
    }
    if (rserver_start(co->loop, &rc, &coord_ops, co, &co->rs, err, sizeof err)) goto fail;
    if (coord_dash_start(co)) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    size_t nroutes;
    const http_route *routes = coord_dash_routes(co, &nroutes);
    if (cfg->http_port && http_start(co->loop, cfg->bind, cfg->http_port, routes, nroutes, co,
                                     &co->http, err, sizeof err))
        goto fail;
    if (coord_moves_start(co)) {
        snprintf(err, sizeof err, "cannot load the moves in flight: %s", mapstore_errmsg(co->ms));
        goto fail;
    }
    if (coord_rebalance_start(co) || coord_rep_start(co) || coord_repmoves_start(co)) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    uv_timer_init(co->loop, &co->clock_timer);
    co->clock_timer.data = co;
    uv_timer_start(&co->clock_timer, on_clock_timer, COORD_CLOCK_TICK_MS, COORD_CLOCK_TICK_MS);
    uv_timer_init(co->loop, &co->member_timer);
    co->member_timer.data = co;
    uv_timer_start(&co->member_timer, on_member_timer, 500, 500);
    uv_signal_init(co->loop, &co->sigint);
    uv_signal_init(co->loop, &co->sigterm);
    co->sigint.data = co->sigterm.data = co;
    uv_signal_start(&co->sigint, on_signal, SIGINT);
    uv_signal_start(&co->sigterm, on_signal, SIGTERM);
    if (elect && coord_elect_watch(elect, co->loop)) {
        snprintf(err, sizeof err, "cannot watch the election");
        goto fail;
    }
    keel_log(KEEL_LOG_INFO, "coord_listen",
             "cluster=%s addr=%s:%d term=%llu version=%llu partitions=%u http_port=%d",
             mapstore_cluster_id(co->ms), cfg->bind, cfg->port, (unsigned long long)co->term,
             (unsigned long long)mapstore_version(co->ms), co->partitions, cfg->http_port);
    uv_run(co->loop, UV_RUN_DEFAULT);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "keel coord: %s\n", err);
    keel_log(KEEL_LOG_ERROR, "startup_failed", "reason=\"%s\"", err);
    rserver_stop(co->rs);
    coord_dash_stop(co);
    mapstore_async_stop(co->ms);
    uv_run(co->loop, UV_RUN_NOWAIT);
done:
    coord_elect_stop(elect); /* a leader resigns: a standby takes over at once */
    elect = NULL;
    coord_repmoves_stop(co);
    coord_moves_stop(co);
    coord_rep_stop(co);
    coord_dash_free(co);
    free(co->mv);
    if (co->ms && mapstore_is_async(co->ms)) {
        mapstore_async_stop(co->ms);
        uv_run(co->loop, UV_RUN_NOWAIT); /* its uv_async_t's close */
    }
    mapstore_free(co->ms);
    peerauth_secret_wipe(&co->secret);
    coordkey_free(co->key);
    free(co->members);
    free(co->parts);
    kbuf_close(&co->map_json);
    uv_loop_close(co->loop);
    free(co);
    return status;
}
