/* coord_cmd.c - the coordinator's RESP commands and its views of the cluster.
 *
 * Two audiences share the port. Operators: PING, AUTH, QUIT, STATUS, NODES,
 * PARTITIONS (admin commands need AUTH when --requirepass is set). Peers:
 * KEEL.AUTH (the HMAC handshake of core/peerauth), then KEEL.REGISTER,
 * KEEL.HEARTBEAT and KEEL.LEAVE, all refused with -NOPERM on a connection
 * that has not proven the cluster secret; the node id is the one proven in
 * the handshake, never a field of a later command. A heartbeat reply carries
 * the map as a directive (term, sequence) whenever the node's map is older.
 */
#include "coord/coord_defer.h"
#include "coord/coord_elect.h"
#include "coord/coord_int.h"
#include "coord/coord_move.h"
#include "coord/coord_rebalance.h"
#include "coord/coord_repmove.h"
#include "coord/coord_rep.h"
#include "coord/coord_rf.h"
#include "net/peerserve.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/coordkey.h"
#include "core/log.h"
#include "core/num.h"
#include "core/histogram.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void coord_reply_err(cctx *x, const char *msg) {
    resp_w_error(&x->c->out, msg);
}
#define err coord_reply_err

static peer_conn *pconn(cctx *x) {
    if (!x->c->user) x->c->user = calloc(1, sizeof(peer_conn));
    return x->c->user;
}

void coord_conn_closed(void *arg, client *c) {
    coord_defer_closed(arg, c);
    peerserve_close(c->user, c);
    free(c->user);
    c->user = NULL;
}

/* ---- Operator commands --------------------------------------------------- */

static void c_ping(cctx *x) {
    resp_w_simple(&x->c->out, "PONG");
}

static void c_quit(cctx *x) {
    resp_w_simple(&x->c->out, "OK");
    rserver_close_after_reply(x->c);
}

static void c_auth(cctx *x) {
    const char *want = x->co->cfg.requirepass;
    if (!want[0]) {
        err(x, "ERR AUTH <password> called without any password configured for the default "
               "user. Are you sure your configuration is correct?");
        return;
    }
    size_t n = strlen(want);
    const char *pw = x->argv[x->argc - 1];
    if (x->len[x->argc - 1] != n || CRYPTO_memcmp(pw, want, n) != 0) {
        err(x, "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    x->c->authed = 1;
    resp_w_simple(&x->c->out, "OK");
}

/* Utilisation per node: its share of bytes (or of partitions while no bytes
 * are reported) over its capacity, relative to the mean. */
typedef struct node_view {
    mapstore_node n;
    size_t partitions;
    uint64_t bytes, keys;
    double ops, util;
} node_view;

static node_view *node_views(coord *co, size_t *nn, double *imbalance) {
    mapstore_node *nodes = NULL;
    mapstore_partition *parts = NULL;
    size_t np = 0;
    *nn = 0;
    *imbalance = 0;
    if (mapstore_node_list(co->ms, &nodes, nn) || mapstore_partition_list(co->ms, &parts, &np)) {
        free(nodes);
        return NULL;
    }
    node_view *v = calloc(*nn ? *nn : 1, sizeof *v);
    if (!v) goto out;
    uint64_t total_bytes = 0;
    for (size_t k = 0; k < *nn; k++)
        v[k].n = nodes[k];
    for (size_t i = 0; i < np; i++)
        for (size_t k = 0; k < *nn; k++)
            if (!strcmp(parts[i].owner, nodes[k].id)) {
                v[k].partitions++;
                v[k].bytes += co->parts[i].bytes;
                v[k].keys += co->parts[i].keys;
                v[k].ops += co->parts[i].ops;
                total_bytes += co->parts[i].bytes;
            }
    double sum = 0, max = 0;
    size_t live = 0;
    for (size_t k = 0; k < *nn; k++) {
        if (v[k].n.capacity <= 0 || v[k].n.membership == MAPSTORE_MEMBER_REMOVED) continue;
        double share = total_bytes ? (double)v[k].bytes / (double)total_bytes
                                   : (double)v[k].partitions / (double)np;
        v[k].util = share / v[k].n.capacity;
        sum += v[k].util;
        max = fmax(max, v[k].util);
        live++;
    }
    *imbalance = live && sum > 0 ? max / (sum / (double)live) : 0;
out:
    free(nodes);
    free(parts);
    return v;
}

int coord_want_json(const cctx *x) {
    for (int i = 1; i < x->argc; i++)
        if (!strcasecmp(x->argv[i], "json")) return 1;
    return 0;
}

static void settings_json(coord *co, cJSON *arr, int64_t now) {
    for (const setting_def *d = coord_settings; d->name; d++) {
        cJSON *o = cJSON_CreateObject();
        mapstore_setting st;
        int set = mapstore_setting_get(co->ms, d->name, &st) == 0;
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "value", set ? st.value : d->def);
        cJSON_AddBoolToObject(o, "default", !set);
        if (set)
            cJSON_AddNumberToObject(o, "age_s", mapstore_setting_age_ms(&st, now) / 1000.0);
        else
            cJSON_AddNullToObject(o, "age_s");
        cJSON_AddItemToArray(arr, o);
    }
}

void coord_reply_json(cctx *x, cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    if (s)
        resp_w_bulkstr(&x->c->out, s);
    else
        err(x, "ERR out of memory");
    free(s);
    cJSON_Delete(root);
}

/* With --id: who leads, since when, and every coordinator taking part. */
static void election_json(cJSON *r) {
    coord_elect *e = coord_elect_current();
    if (!e) return;
    coord_elect_view v;
    coord_elect_member m[COORD_ELECT_MEMBERS_MAX];
    coord_elect_get(e, &v);
    size_t n = coord_elect_members(e, m, COORD_ELECT_MEMBERS_MAX);
    cJSON *o = cJSON_AddObjectToObject(r, "election");
    cJSON_AddStringToObject(o, "id", coord_elect_id(e));
    cJSON_AddStringToObject(o, "leader", v.leader_id);
    cJSON_AddStringToObject(o, "leader_addr", v.leader_addr);
    cJSON_AddNumberToObject(o, "leader_since_ms", (double)v.since_ms);
    cJSON *a = cJSON_AddArrayToObject(o, "standbys");
    for (size_t i = 0; i < n && i < COORD_ELECT_MEMBERS_MAX; i++)
        if (strcmp(m[i].id, v.leader_id)) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "id", m[i].id);
            cJSON_AddStringToObject(s, "addr", m[i].addr);
            cJSON_AddItemToArray(a, s);
        }
}

/* The replication settings and how far the partitions are from them
 * (coord_rf.h). -1 on a map store error. */
typedef struct rf_view {
    int rf, min_insync;
    size_t under_replicated, under_min_isr;
} rf_view;

static int rf_view_get(coord *co, rf_view *v) {
    mapstore_partition *parts;
    size_t np;
    coord_rf_get(co, &v->rf, &v->min_insync);
    if (mapstore_partition_list(co->ms, &parts, &np)) return -1;
    coord_rf_counts(parts, np, v->rf, v->min_insync, &v->under_replicated, &v->under_min_isr);
    free(parts);
    return 0;
}

static void rf_json(coord *co, cJSON *r) {
    rf_view v;
    if (rf_view_get(co, &v)) return;
    cJSON *o = cJSON_AddObjectToObject(r, "replication");
    cJSON_AddNumberToObject(o, "replicas", v.rf);
    cJSON_AddNumberToObject(o, "min_insync", v.min_insync);
    cJSON_AddNumberToObject(o, "max_served_replicas", COORD_RF_SERVED_MAX);
    cJSON_AddNumberToObject(o, "under_replicated", (double)v.under_replicated);
    cJSON_AddNumberToObject(o, "under_min_insync", (double)v.under_min_isr);
    coord_rep_json(co, o);
}

static void rf_text(coord *co, kbuf *b) {
    rf_view v;
    if (rf_view_get(co, &v)) return;
    kbuf_printf(b, "replication: replicas %d  min_insync %d", v.rf, v.min_insync);
    if (v.under_replicated || v.under_min_isr)
        kbuf_printf(b, "  (%zu partitions under-replicated, %zu below min_insync)",
                    v.under_replicated, v.under_min_isr);
    if (co->rep && v.rf > 1)
        kbuf_printf(b, "  failovers %llu (unclean %llu)", (unsigned long long)co->rep->failovers,
                    (unsigned long long)co->rep->unclean_failovers);
    kbuf_printf(b, "\n");
}

/* The STATUS view as JSON (caller frees); NULL on a map store error. */
static cJSON *status_json(coord *co, int64_t now) {
    size_t nn;
    double imb;
    node_view *v = node_views(co, &nn, &imb);
    if (!v) return NULL;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "cluster", mapstore_cluster_id(co->ms));
    cJSON_AddNumberToObject(r, "map_version", (double)mapstore_version(co->ms));
    cJSON_AddNumberToObject(r, "term", (double)co->term);
    cJSON_AddNumberToObject(r, "partitions", co->partitions);
    election_json(r);
    rf_json(co, r);
    cJSON_AddNumberToObject(r, "imbalance", imb);
    cJSON *nodes = cJSON_AddArrayToObject(r, "nodes");
    for (size_t k = 0; k < nn; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", v[k].n.id);
        cJSON_AddStringToObject(o, "state", coord_node_summary(&v[k].n));
        cJSON_AddStringToObject(o, "liveness", mapstore_liveness_name(v[k].n.liveness));
        cJSON_AddStringToObject(o, "membership", mapstore_membership_name(v[k].n.membership));
        cJSON_AddBoolToObject(o, "quarantined", coord_quarantined(co, v[k].n.id));
        cJSON_AddNumberToObject(o, "partitions", (double)v[k].partitions);
        cJSON_AddNumberToObject(o, "bytes", (double)v[k].bytes);
        cJSON_AddNumberToObject(o, "keys", (double)v[k].keys);
        cJSON_AddNumberToObject(o, "ops", v[k].ops);
        cJSON_AddNumberToObject(o, "utilisation", v[k].util);
        cJSON_AddItemToArray(nodes, o);
    }
    settings_json(co, cJSON_AddArrayToObject(r, "settings"), now);
    cJSON *det = cJSON_AddObjectToObject(r, "detector");
    cJSON_AddBoolToObject(det, "held", co->detector.held);
    if (co->detector.held)
        cJSON_AddNumberToObject(det, "held_for_s",
                                (double)(coord_now(co) - co->detector.held_since) / 1000.0);
    cJSON_AddNumberToObject(det, "coordinator_stalls", (double)co->clock.stalls);
    cJSON_AddNumberToObject(det, "loop_max_stall_ms", co->loop_max_stall_ms);
    cJSON_AddNumberToObject(det, "mapstore_pending", (double)mapstore_pending(co->ms));
    cJSON_AddNumberToObject(det, "coordinator_stalled_s", (double)co->clock.credited / 1000.0);
    mapstore_setting ps;
    if (mapstore_setting_get(co->ms, "paused", &ps) == 0) {
        cJSON *p = cJSON_AddObjectToObject(r, "paused");
        cJSON_AddStringToObject(p, "reason", ps.value);
        cJSON_AddNumberToObject(p, "age_s", mapstore_setting_age_ms(&ps, now) / 1000.0);
    } else {
        cJSON_AddNullToObject(r, "paused");
    }
    free(v);
    return r;
}

void coord_render_status(void *arg, kbuf *out) {
    cJSON *r = status_json(arg, keel_wall_ms());
    char *s = r ? cJSON_PrintUnformatted(r) : NULL;
    kbuf_appendstr(out, s ? s : "{\"error\":\"map store read failed\"}");
    kbuf_append(out, "\n", 1);
    free(s);
    cJSON_Delete(r);
}

/* Replies with the JSON or the text rendering of a view, and frees both. */
void coord_reply_view(cctx *x, cJSON *json, kbuf *text) {
    if (coord_want_json(x)) {
        coord_reply_json(x, json);
    } else {
        cJSON_Delete(json);
        resp_w_bulk(&x->c->out, text->p, text->len);
    }
    kbuf_close(text);
}

static void c_status(cctx *x) {
    coord *co = x->co;
    size_t nn;
    double imb;
    node_view *v = node_views(co, &nn, &imb);
    if (!v) {
        err(x, "ERR map store read failed");
        return;
    }
    if (coord_want_json(x)) {
        free(v);
        cJSON *r = status_json(co, x->now);
        if (r)
            coord_reply_json(x, r);
        else
            err(x, "ERR map store read failed");
        return;
    }
    kbuf b;
    kbuf_init(&b);
    kbuf_printf(&b, "%-16s %-8s %-10s %10s %14s %10s %10s %6s\n", "NODE", "LIVENESS", "MEMBERSHIP",
                "PARTITIONS", "BYTES", "KEYS", "OPS/S", "UTIL");
    for (size_t k = 0; k < nn; k++)
        kbuf_printf(&b, "%-16s %-8s %-10s %10zu %14llu %10llu %10.1f %6.2f\n", v[k].n.id,
                    mapstore_liveness_name(v[k].n.liveness),
                    mapstore_membership_name(v[k].n.membership), v[k].partitions,
                    (unsigned long long)v[k].bytes, (unsigned long long)v[k].keys, v[k].ops,
                    v[k].util);
    if (coord_elect_current()) {
        coord_elect_view ev;
        coord_elect_member m[COORD_ELECT_MEMBERS_MAX];
        coord_elect_get(coord_elect_current(), &ev);
        size_t n = coord_elect_members(coord_elect_current(), m, COORD_ELECT_MEMBERS_MAX);
        kbuf_printf(&b, "\nleader %s (%s) since %.1f s ago; standbys:", ev.leader_id,
                    ev.leader_addr, (double)(keel_wall_ms() - ev.since_ms) / 1000.0);
        for (size_t i = 0; i < n && i < COORD_ELECT_MEMBERS_MAX; i++)
            if (strcmp(m[i].id, ev.leader_id)) kbuf_printf(&b, " %s (%s)", m[i].id, m[i].addr);
        kbuf_printf(&b, "\n");
    }
    kbuf_printf(&b,
                "\nimbalance %.3f (max/mean utilisation)  map version %llu  term %llu  "
                "partitions %u\n",
                imb, (unsigned long long)mapstore_version(co->ms), (unsigned long long)co->term,
                co->partitions);
    rf_text(co, &b);
    kbuf_printf(&b, "\nsettings:\n");
    for (const setting_def *d = coord_settings; d->name; d++) {
        mapstore_setting st;
        if (mapstore_setting_get(co->ms, d->name, &st) == 0)
            kbuf_printf(&b, "  %-24s %-10s set %.0f s ago\n", d->name, st.value,
                        mapstore_setting_age_ms(&st, x->now) / 1000.0);
        else
            kbuf_printf(&b, "  %-24s %-10s default\n", d->name, d->def);
    }
    if (co->detector.held)
        kbuf_printf(&b,
                    "\n*** FAILURE DETECTOR HELD for %.0f s: more than half of the cluster looks "
                    "dead at once; no node is declared SUSPECT or DOWN until that changes ***\n",
                    (double)(coord_now(co) - co->detector.held_since) / 1000.0);
    mapstore_setting ps;
    if (mapstore_setting_get(co->ms, "paused", &ps) == 0)
        kbuf_printf(&b, "\n*** REBALANCING PAUSED for %.0f s: %s (keel resume lifts it) ***\n",
                    mapstore_setting_age_ms(&ps, x->now) / 1000.0, ps.value);
    resp_w_bulk(&x->c->out, b.p, b.len);
    kbuf_close(&b);
    free(v);
}

static void c_nodes(cctx *x) {
    size_t nn;
    double imb;
    node_view *v = node_views(x->co, &nn, &imb);
    if (!v) {
        err(x, "ERR map store read failed");
        return;
    }
    cJSON *arr = cJSON_CreateArray();
    kbuf b;
    kbuf_init(&b);
    kbuf_printf(&b, "%-16s %-8s %-10s %-22s %-8s %8s %10s\n", "NODE", "LIVENESS", "MEMBERSHIP",
                "ADDR", "RACK", "CAPACITY", "PARTITIONS");
    int64_t now = coord_now(x->co);
    for (size_t k = 0; k < nn; k++) {
        const mapstore_node *n = &v[k].n;
        member *m = coord_member(x->co, n->id, 0);
        cJSON *o = cJSON_CreateObject();
        char addr[KEEL_HOST_MAX + 8];
        snprintf(addr, sizeof addr, "%s:%d", n->host, n->port);
        cJSON_AddStringToObject(o, "id", n->id);
        cJSON_AddStringToObject(o, "state", coord_node_summary(n));
        cJSON_AddStringToObject(o, "liveness", mapstore_liveness_name(n->liveness));
        cJSON_AddStringToObject(o, "membership", mapstore_membership_name(n->membership));
        cJSON_AddStringToObject(o, "addr", addr);
        cJSON_AddStringToObject(o, "rack", n->rack);
        cJSON_AddNumberToObject(o, "capacity", n->capacity);
        cJSON_AddNumberToObject(o, "partitions", (double)v[k].partitions);
        if (m && m->last_hb_ms)
            cJSON_AddNumberToObject(o, "heartbeat_age_s", (double)(now - m->last_hb_ms) / 1000.0);
        else
            cJSON_AddNullToObject(o, "heartbeat_age_s");
        cJSON_AddItemToArray(arr, o);
        kbuf_printf(&b, "%-16s %-8s %-10s %-22s %-8s %8.2f %10zu\n", n->id,
                    mapstore_liveness_name(n->liveness), mapstore_membership_name(n->membership),
                    addr, n->rack[0] ? n->rack : "-", n->capacity, v[k].partitions);
    }
    free(v);
    coord_reply_view(x, arr, &b);
}

/* PARTITIONS [NODE id] [JSON] */
static void c_partitions(cctx *x) {
    const char *only = NULL;
    for (int i = 1; i < x->argc; i++) {
        if (!strcasecmp(x->argv[i], "node") && i + 1 < x->argc)
            only = x->argv[++i];
        else if (strcasecmp(x->argv[i], "json")) {
            err(x, "ERR syntax error: PARTITIONS [NODE id] [JSON]");
            return;
        }
    }
    mapstore_partition *parts = NULL;
    size_t np = 0;
    if (mapstore_partition_list(x->co->ms, &parts, &np)) {
        err(x, "ERR map store read failed");
        return;
    }
    unsigned per = 16384u / (unsigned)np;
    cJSON *arr = cJSON_CreateArray();
    kbuf b;
    kbuf_init(&b);
    kbuf_printf(&b, "%-6s %-16s %6s %-11s %12s %10s\n", "ID", "OWNER", "EPOCH", "SLOTS", "BYTES",
                "KEYS");
    for (size_t i = 0; i < np; i++) {
        const mapstore_partition *p = &parts[i];
        if (only && strcmp(p->owner, only)) continue;
        const part_metrics *pm = &x->co->parts[i];
        char slots[24];
        snprintf(slots, sizeof slots, "%zu-%zu", i * per, (i + 1) * per - 1);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", (double)i);
        if (p->owner[0])
            cJSON_AddStringToObject(o, "owner", p->owner);
        else
            cJSON_AddNullToObject(o, "owner");
        cJSON_AddNumberToObject(o, "epoch", (double)p->epoch);
        cJSON *reps = cJSON_AddArrayToObject(o, "replicas"),
              *isr = cJSON_AddArrayToObject(o, "isr");
        for (unsigned k = 0; k < p->nreplicas; k++) {
            cJSON_AddItemToArray(reps, cJSON_CreateString(p->replicas[k]));
            if ((p->isr >> k) & 1) cJSON_AddItemToArray(isr, cJSON_CreateString(p->replicas[k]));
        }
        if (p->owner[0]) cJSON_AddStringToObject(o, "leader", p->owner);
        cJSON_AddNumberToObject(o, "isr_size", __builtin_popcount(p->isr));
        cJSON_AddNumberToObject(o, "leader_epoch", (double)p->leader_epoch);
        cJSON_AddNumberToObject(o, "partition_epoch", (double)p->partition_epoch);
        cJSON_AddStringToObject(o, "slots", slots);
        cJSON_AddNumberToObject(o, "bytes", (double)pm->bytes);
        cJSON_AddNumberToObject(o, "keys", (double)pm->keys);
        cJSON_AddItemToArray(arr, o);
        kbuf_printf(&b, "%-6zu %-16s %6llu %-11s %12llu %10llu", i, p->owner[0] ? p->owner : "-",
                    (unsigned long long)p->epoch, slots, (unsigned long long)pm->bytes,
                    (unsigned long long)pm->keys);
        if (p->nreplicas > 1) { /* RF > 1: the replicas, leader first, and the ISR's size */
            kbuf_printf(&b, "  replicas ");
            for (unsigned k = 0; k < p->nreplicas; k++)
                kbuf_printf(&b, "%s%s%s", k ? "," : "", p->replicas[k],
                            (p->isr >> k) & 1 ? "" : "(out)");
            kbuf_printf(&b, "  isr %d/%u  leader_epoch %llu", __builtin_popcount(p->isr),
                        p->nreplicas, (unsigned long long)p->leader_epoch);
        }
        kbuf_printf(&b, "\n");
    }
    free(parts);
    coord_reply_view(x, arr, &b);
}

/* ---- Peer commands ------------------------------------------------------- */

/* KEEL.AUTH COORDKEY -> [public-key, signature]: proves to an authenticated
 * node that this is the coordinator whose key it pinned (or pins now, at its
 * first join): an Ed25519 signature of this connection's handshake binding,
 * label "server" (core/coordkey.h). */
static void c_keel_coordkey(cctx *x, peer_conn *p) {
    uint8_t b[PEERAUTH_BINDING_MAX];
    size_t n;
    char pub[COORDKEY_PUB_HEX + 1], sig[COORDKEY_SIG_HEX + 1];
    if (!p->peer_id[0] || !x->co->key || peerauth_binding(p->pa, b, &n) ||
        coordkey_sign(x->co->key, "server", b, n, sig)) {
        err(x, "ERR KEEL.AUTH COORDKEY needs an authenticated peer connection");
        return;
    }
    coordkey_public_hex(x->co->key, pub);
    resp_w_array(&x->c->out, 2);
    resp_w_bulkstr(&x->c->out, pub);
    resp_w_bulkstr(&x->c->out, sig);
}

/* KEEL.AUTH HELLO <id> <nonce> | KEEL.AUTH PROOF <proof> | KEEL.AUTH COORDKEY */
static void c_keel_auth(cctx *x) {
    peer_conn *p = pconn(x);
    if (!p) {
        err(x, "ERR out of memory");
        return;
    }
    if (x->argc == 2 && !strcasecmp(x->argv[1], "coordkey")) {
        c_keel_coordkey(x, p);
        return;
    }
    peerserve_auth(p, x->c, COORD_ID, &x->co->secret, NULL, x->argc, x->argv, x->len);
}

/* KEEL.MOVE.REPORT <move> <phase> <bytes> <keys> <lag-bytes> <lag-ms> <rate> [reason] */
static void c_keel_move_report(cctx *x, const char *id) {
    if (coord_move_report(x->co, id, x->argc, x->argv, x->len)) {
        err(x, "ERR bad KEEL.MOVE.REPORT: move phase bytes keys lag-bytes lag-ms rate [reason]");
        return;
    }
    resp_w_simple(&x->c->out, "OK");
}

/* A registration is durable: the node is told OK (and counted live) only
 * from its write's completion. */
typedef struct reg_arg {
    mapstore_node n;
    int exists;
    char incarnation[17]; /* "" = a node without one (RF 1 protocol) */
    int fresh;
} reg_arg;

static void reg_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    reg_arg *a = arg;
    (void)proto;
    if (r->rc) {
        resp_w_errorf(out, "ERR %s", r->errmsg);
        return;
    }
    member *m = coord_member(co, a->n.id, 1);
    int64_t now = coord_now(co);
    if (m) m->last_hb_ms = now;
    if (!co->first_register_ms) co->first_register_ms = now;
    keel_log(KEEL_LOG_INFO, "node_registered", "node=%s addr=%s:%d rack=%s capacity=%g new=%d",
             a->n.id, a->n.host, a->n.port, a->n.rack[0] ? a->n.rack : "-", a->n.capacity,
             !a->exists);
    coord_moves_node_registered(co, a->n.id);
    coord_rep_registered(co, a->n.id, a->incarnation, a->fresh);
    resp_w_simple(out, "OK");
}

/* 1 if s (n bytes) is an incarnation: 1..16 lower-case hex digits (C3). */
static int incarnation_valid(const char *s, size_t n) {
    if (n < 1 || n > 16) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* KEEL.REGISTER <host> <port> <rack> <capacity> [<incarnation> <fresh>] */
static void c_keel_register(cctx *x, const char *id) {
    coord *co = x->co;
    char *end;
    uint64_t port = 0;
    double cap = x->len[4] ? strtod(x->argv[4], &end) : NAN;
    if (keel_parse_u64(x->argv[2], x->len[2], &port) || port == 0 || port > 65535 ||
        !isfinite(cap) || cap < 0 || *end || x->argv[4][0] == ' ') {
        err(x, "ERR bad registration: KEEL.REGISTER host port rack capacity");
        return;
    }
    if (x->argc == 6 ||
        (x->argc == 7 && (!incarnation_valid(x->argv[5], x->len[5]) || x->len[6] != 1 ||
                          (x->argv[6][0] != '0' && x->argv[6][0] != '1')))) {
        err(x, "ERR bad registration: KEEL.REGISTER host port rack capacity [incarnation fresh]: "
               "incarnation 1 to 16 lower-case hex digits, fresh 0 or 1");
        return;
    }
    /* The id was proven in KEEL.AUTH, which enforces the id rule; the host
     * goes into the map every node parses, so it must follow its rule. */
    if (!keel_id_validz(id) || !keel_host_valid(x->argv[1], x->len[1]) ||
        x->len[3] > MAPSTORE_RACK_MAX) {
        err(x, "ERR bad registration: the id must match " KEEL_ID_RULE
               " and the host [A-Za-z0-9._:[]-]{1,64}");
        return;
    }
    mapstore_node old, n = {0};
    int exists = mapstore_node_get(co->ms, id, &old) == 0;
    member *m = coord_member(co, id, 1);
    if (!m) {
        err(x, "ERR out of memory");
        return;
    }
    int64_t now = coord_now(co);
    int live = exists && m->last_hb_ms &&
               now - m->last_hb_ms < coord_setting_ll(co, "node_suspect_after_ms");
    if (live && (strcmp(old.host, x->argv[1]) || old.port != (int)port)) {
        keel_log(KEEL_LOG_WARN, "register_refused", "node=%s addr=%s:%llu live_at=%s:%d", id,
                 x->argv[1], (unsigned long long)port, old.host, old.port);
        char msg[256];
        snprintf(msg, sizeof msg, "ERR node id %s is live at %s:%d", id, old.host, old.port);
        err(x, msg);
        return;
    }
    if (exists && old.membership == MAPSTORE_MEMBER_REMOVED) {
        err(x, "ERR node was removed from the cluster; give it a new id");
        return;
    }
    snprintf(n.id, sizeof n.id, "%s", id);
    snprintf(n.host, sizeof n.host, "%s", x->argv[1]);
    n.port = (int)port;
    snprintf(n.rack, sizeof n.rack, "%s", strcmp(x->argv[3], "-") ? x->argv[3] : "");
    n.capacity = cap;
    n.liveness = MAPSTORE_NODE_UP; /* it just proved it is alive */
    n.membership = exists ? old.membership : MAPSTORE_MEMBER_ACTIVE; /* intent survives restarts */
    reg_arg *a = calloc(1, sizeof *a);
    if (!a) {
        err(x, "ERR out of memory");
        return;
    }
    a->n = n;
    a->exists = exists;
    if (x->argc == 7) {
        snprintf(a->incarnation, sizeof a->incarnation, "%s", x->argv[5]);
        a->fresh = x->argv[6][0] == '1';
    }
    mapstore_write w;
    mapstore_w_node_upsert(&w, &n, x->now);
    if (coord_defer_write(x, &w, reg_done, a)) {
        char msg[MAPSTORE_ERR_MAX + 32];
        snprintf(msg, sizeof msg, "ERR %s", mapstore_errmsg(co->ms));
        err(x, msg);
    }
}

/* A JSON number as a count: 0 unless a finite number in [0, 2^64). The
 * cast of anything else to uint64_t is undefined. */
static uint64_t json_count(const cJSON *v) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble >= 18446744073709551616.0)
        return 0;
    return (uint64_t)v->valuedouble;
}

/* Folds a heartbeat's metrics JSON into the member and its partitions:
 * {"disk_used":N,"disk_capacity":N,"partitions":[[p,bytes,keys,ops],...]}.
 * Peer input: every field is type- and range-checked; a bad entry is
 * skipped. */
static void take_metrics(coord *co, member *m, const char *json) {
    cJSON *r = cJSON_Parse(json);
    if (!r) return;
    const cJSON *du = cJSON_GetObjectItemCaseSensitive(r, "disk_used");
    const cJSON *dc = cJSON_GetObjectItemCaseSensitive(r, "disk_capacity");
    const cJSON *p99 = cJSON_GetObjectItemCaseSensitive(r, "p99_ms");
    const cJSON *p50 = cJSON_GetObjectItemCaseSensitive(r, "p50_ms");
    if (cJSON_IsNumber(p99) && isfinite(p99->valuedouble)) m->p99_ms = p99->valuedouble;
    if (cJSON_IsNumber(p50) && isfinite(p50->valuedouble)) m->p50_ms = p50->valuedouble;
    if (cJSON_IsNumber(du)) m->disk_used = json_count(du);
    if (cJSON_IsNumber(dc)) m->disk_capacity = json_count(dc);
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(r, "partitions"), *e;
    if (!cJSON_IsArray(ps)) ps = NULL;
    cJSON_ArrayForEach(e, ps) {
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 4) continue;
        const cJSON *pv = cJSON_GetArrayItem(e, 0), *ops = cJSON_GetArrayItem(e, 3);
        if (!cJSON_IsNumber(pv) || !cJSON_IsNumber(ops) || !isfinite(ops->valuedouble)) continue;
        double p = pv->valuedouble;
        if (!(p >= 0 && p < co->partitions)) continue;
        part_metrics *pm = &co->parts[(unsigned)p];
        pm->bytes = json_count(cJSON_GetArrayItem(e, 1));
        pm->keys = json_count(cJSON_GetArrayItem(e, 2));
        pm->ops = ops->valuedouble;
    }
    cJSON_Delete(r);
}

typedef struct hb_arg {
    coord *co;
    mapstore_node n; /* as it was when the heartbeat came */
} hb_arg;

static void hb_up_done(void *arg, const mapstore_result *r) {
    hb_arg *a = arg;
    member *m = coord_member(a->co, a->n.id, 0);
    if (m) m->liveness_pending = 0;
    if (r->rc == 0)
        keel_log(KEEL_LOG_INFO, "node_state",
                 "node=%s from=%s to=UP membership=%s reason=heartbeat", a->n.id,
                 mapstore_liveness_name(a->n.liveness), mapstore_membership_name(a->n.membership));
    else
        keel_log(KEEL_LOG_ERROR, "node_state_failed", "node=%s to=UP error=\"%s\"", a->n.id,
                 r->errmsg);
    free(a);
}

/* KEEL.HEARTBEAT <map_version> <metrics-json>
 * -> [term, seq, version, map-json | nil]; seq > 0 marks a map directive. */
static void c_keel_heartbeat(cctx *x, const char *id) {
    coord *co = x->co;
    mapstore_node n;
    uint64_t have;
    if (keel_parse_u64(x->argv[1], x->len[1], &have)) {
        err(x, "ERR bad KEEL.HEARTBEAT: map-version metrics");
        return;
    }
    if (mapstore_node_get(co->ms, id, &n)) {
        err(x, "ERR unknown node: KEEL.REGISTER first");
        return;
    }
    member *m = coord_member(co, id, 1);
    if (!m) {
        err(x, "ERR out of memory");
        return;
    }
    m->last_hb_ms = coord_now(co);
    take_metrics(co, m, x->argv[2]);
    if (n.liveness != MAPSTORE_NODE_UP && n.membership != MAPSTORE_MEMBER_REMOVED &&
        !m->liveness_pending) { /* the reply does not wait for it */
        hb_arg *a = malloc(sizeof *a);
        mapstore_write w;
        mapstore_w_node_set_liveness(&w, id, MAPSTORE_NODE_UP);
        if (a) *a = (hb_arg){co, n};
        if (a && mapstore_submit(co->ms, &w, hb_up_done, a) == 0)
            m->liveness_pending = 1;
        else
            free(a);
    }
    uint64_t v = mapstore_version(co->ms);
    const kbuf *map = have < v ? coord_map_json(co) : NULL;
    /* The lease (C2) goes to nodes that registered with an incarnation;
     * older nodes parse the 4-element reply. */
    int lease = m->rep_proto ? coord_rep_lease(co, m, have, m->last_hb_ms) : -1;
    resp_w_array(&x->c->out, lease >= 0 ? 5 : 4);
    resp_w_int(&x->c->out, (long long)co->term);
    resp_w_int(&x->c->out, map ? (long long)++co->directive_seq : 0);
    resp_w_int(&x->c->out, (long long)v);
    if (map)
        resp_w_bulk(&x->c->out, map->p, map->len);
    else
        resp_w_null(&x->c->out, x->c->proto);
    if (lease >= 0) resp_w_int(&x->c->out, lease);
}

typedef struct leave_arg {
    mapstore_node n;
} leave_arg;

static void leave_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    leave_arg *a = arg;
    (void)proto;
    if (r->rc) {
        keel_log(KEEL_LOG_ERROR, "node_state_persist_failed", "node=%s to=DOWN error=\"%s\"",
                 a->n.id, r->errmsg);
        resp_w_error(out, "ERR map store write failed");
        return;
    }
    keel_log(KEEL_LOG_INFO, "node_state",
             "node=%s from=%s to=DOWN membership=%s reason=graceful-stop", a->n.id,
             mapstore_liveness_name(a->n.liveness), mapstore_membership_name(a->n.membership));
    member *m = coord_member(co, a->n.id, 0);
    if (m) m->last_hb_ms = 0;
    resp_w_simple(out, "OK");
}

/* KEEL.LEAVE: DOWN, durably, before the node hears OK. */
static void c_keel_leave(cctx *x, const char *id) {
    mapstore_node n;
    if (mapstore_node_get(x->co->ms, id, &n) == 0 && n.liveness != MAPSTORE_NODE_DOWN) {
        leave_arg *a = malloc(sizeof *a);
        mapstore_write w;
        mapstore_w_node_set_liveness(&w, id, MAPSTORE_NODE_DOWN);
        if (a) a->n = n;
        if (!a || coord_defer_write(x, &w, leave_done, a)) {
            keel_log(KEEL_LOG_ERROR, "node_state_persist_failed", "node=%s to=DOWN error=\"%s\"",
                     id, a ? mapstore_errmsg(x->co->ms) : "out of memory");
            err(x, "ERR map store write failed");
        }
        return;
    }
    member *m = coord_member(x->co, id, 0);
    if (m) m->last_hb_ms = 0;
    resp_w_simple(&x->c->out, "OK");
}

/* ---- Dispatch ------------------------------------------------------------ */

enum { F_ADMIN = 1, F_PEER = 2, F_NOAUTH = 4 };

typedef struct ccmd {
    const char *name;
    int min_args, max_args; /* including the name; max -1 = any */
    unsigned flags;
    void (*fn)(cctx *x);
    void (*peer_fn)(cctx *x, const char *peer_id);
} ccmd;

static const ccmd table[] = {
    {"ping", 1, 2, 0, c_ping, NULL},
    {"quit", 1, 1, F_NOAUTH, c_quit, NULL},
    {"auth", 2, 3, F_NOAUTH, c_auth, NULL},
    {"status", 1, 2, F_ADMIN, c_status, NULL},
    {"nodes", 1, 2, F_ADMIN, c_nodes, NULL},
    {"partitions", 1, 4, F_ADMIN, c_partitions, NULL},
    {"setting", 3, 4, F_ADMIN, coord_c_setting, NULL},
    {"pause", 1, -1, F_ADMIN, coord_c_pause, NULL},
    {"resume", 1, 1, F_ADMIN, coord_c_resume, NULL},
    {"plan", 1, 2, F_ADMIN, coord_c_plan, NULL},
    {"drain", 2, 2, F_ADMIN, coord_c_drain, NULL},
    {"remove", 2, 2, F_ADMIN, coord_c_remove, NULL},
    {"failpoint", 2, 4, F_ADMIN, coord_c_failpoint, NULL},
    {"unquarantine", 2, 2, F_ADMIN, coord_c_unquarantine, NULL},
    {"move", 3, 5, F_ADMIN, coord_c_move, NULL},
    {"cancel", 2, 2, F_ADMIN, coord_c_cancel, NULL},
    {"moves", 1, 3, F_ADMIN, coord_c_moves, NULL},
    {"promote", 3, 4, F_ADMIN, coord_c_promote, NULL},
    {"failover", 2, 5, F_ADMIN, coord_c_failover, NULL},
    {"keel.auth", 2, 4, F_NOAUTH, c_keel_auth, NULL},
    /* 7 with the node's incarnation and fresh (replication contract C3) */
    {"keel.register", 5, 7, F_PEER | F_NOAUTH, NULL, c_keel_register},
    {"keel.rep.isr", 6, 6, F_PEER | F_NOAUTH, NULL, coord_c_rep_isr},
    {"keel.heartbeat", 3, 3, F_PEER | F_NOAUTH, NULL, c_keel_heartbeat},
    {"keel.leave", 1, 1, F_PEER | F_NOAUTH, NULL, c_keel_leave},
    {"keel.move.report", 8, 9, F_PEER | F_NOAUTH, NULL, c_keel_move_report},
    {"keel.rep.handoff", 1, 2, F_PEER | F_NOAUTH, NULL, coord_c_keel_rep_handoff},
};

int coord_dispatch(void *arg, client *c, int argc, char **argv, const size_t *argvlen) {
    cctx x = {arg, c, argc, argv, argvlen, c->last_ms ? c->last_ms : keel_wall_ms(), 0};
    if (coord_defer_take(arg, c)) return 0; /* a held request's reply is ready */
    const ccmd *d = NULL;
    for (size_t i = 0; i < sizeof table / sizeof *table && !d; i++)
        if (!strcasecmp(argv[0], table[i].name)) d = &table[i];
    char msg[256];
    if (!d) {
        snprintf(msg, sizeof msg, "ERR unknown command '%.64s'", argv[0]);
        err(&x, msg);
        return 0;
    }
    if (argc < d->min_args || (d->max_args >= 0 && argc > d->max_args)) {
        snprintf(msg, sizeof msg, "ERR wrong number of arguments for '%s' command", d->name);
        err(&x, msg);
        return 0;
    }
    if (!c->authed && !(d->flags & F_NOAUTH)) {
        err(&x, "NOAUTH Authentication required.");
        return 0;
    }
    if (d->flags & F_PEER) {
        peer_conn *p = c->user;
        if (!p || !p->peer_id[0]) {
            keel_log(KEEL_LOG_WARN, "peer_command_refused",
                     "addr=%s command=%s reason=unauthenticated", c->addr, d->name);
            err(&x, PEERSERVE_NOPERM);
            return 0;
        }
        d->peer_fn(&x, p->peer_id);
        return x.hold ? RSERVER_HOLD : 0;
    }
    d->fn(&x);
    return x.hold ? RSERVER_HOLD : 0;
}

/* ---- /metrics ------------------------------------------------------------
 * Prometheus conventions (checked by promtool in the tests): HELP and TYPE
 * on every family, base units (seconds, bytes), _total on counters only. */

static void family(kbuf *b, const char *name, const char *type, const char *help) {
    kbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(kbuf *b, const char *name, const char *help, double v) {
    family(b, name, "gauge", help);
    kbuf_printf(b, "%s %.6g\n", name, v);
}

static void counter(kbuf *b, const char *name, const char *help, uint64_t v) {
    family(b, name, "counter", help);
    kbuf_printf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void node_metrics(coord *co, kbuf *b, const node_view *v, size_t nn) {
    family(b, "keel_node_utilisation", "gauge",
           "Share of the cluster's bytes (of partitions while no bytes are reported) over the "
           "node's capacity.");
    for (size_t k = 0; v && k < nn; k++)
        kbuf_printf(b, "keel_node_utilisation{node=\"%s\",state=\"%s\"} %.6f\n", v[k].n.id,
                    coord_node_summary(&v[k].n), v[k].util);
    family(b, "keel_node_bytes", "gauge", "Bytes in the partitions the node owns.");
    for (size_t k = 0; v && k < nn; k++)
        kbuf_printf(b, "keel_node_bytes{node=\"%s\"} %llu\n", v[k].n.id,
                    (unsigned long long)v[k].bytes);
    family(b, "keel_node_keys", "gauge", "Keys in the partitions the node owns.");
    for (size_t k = 0; v && k < nn; k++)
        kbuf_printf(b, "keel_node_keys{node=\"%s\"} %llu\n", v[k].n.id,
                    (unsigned long long)v[k].keys);
    family(b, "keel_node_ops_per_second", "gauge",
           "Smoothed commands per second on the partitions the node owns.");
    for (size_t k = 0; v && k < nn; k++)
        kbuf_printf(b, "keel_node_ops_per_second{node=\"%s\"} %.3f\n", v[k].n.id, v[k].ops);
    family(b, "keel_node_latency_p99_seconds", "gauge",
           "Foreground (read and write) p99 latency over the node's last heartbeat interval.");
    for (size_t k = 0; v && k < nn; k++) {
        member *m = coord_member(co, v[k].n.id, 0);
        kbuf_printf(b, "keel_node_latency_p99_seconds{node=\"%s\"} %.6f\n", v[k].n.id,
                    m ? m->p99_ms / 1000.0 : 0.0);
    }
}

/* Liveness and membership as two families (one series per node, the value
 * 1, the state a label), and the failure detector's own health. */
static void coord_render_detector_metrics(coord *co, kbuf *b, const node_view *v, size_t nn) {
    kbuf_appendstr(b, "# HELP keel_node_liveness A node's liveness (the label; value 1).\n"
                      "# TYPE keel_node_liveness gauge\n");
    for (size_t k = 0; v && k < nn; k++)
        kbuf_printf(b, "keel_node_liveness{node=\"%s\",liveness=\"%s\"} 1\n", v[k].n.id,
                    mapstore_liveness_name(v[k].n.liveness));
    kbuf_appendstr(b, "# HELP keel_node_membership A node's membership (the label; value 1).\n"
                      "# TYPE keel_node_membership gauge\n");
    for (size_t k = 0; v && k < nn; k++)
        kbuf_printf(b, "keel_node_membership{node=\"%s\",membership=\"%s\"} 1\n", v[k].n.id,
                    mapstore_membership_name(v[k].n.membership));
    kbuf_printf(b,
                "# HELP keel_detector_held 1 while the failure-ratio brake holds every verdict.\n"
                "# TYPE keel_detector_held gauge\nkeel_detector_held %d\n"
                "# HELP keel_detector_held_judgements_total Judgements the brake held back.\n"
                "# TYPE keel_detector_held_judgements_total counter\n"
                "keel_detector_held_judgements_total %llu\n"
                "# HELP keel_detector_verdicts_total Nodes the detector declared, by verdict.\n"
                "# TYPE keel_detector_verdicts_total counter\n"
                "keel_detector_verdicts_total{to=\"SUSPECT\"} %llu\n"
                "keel_detector_verdicts_total{to=\"DOWN\"} %llu\n"
                "# HELP keel_coord_stalls_total Times the coordinator found it had not run for "
                "over %d ms.\n"
                "# TYPE keel_coord_stalls_total counter\nkeel_coord_stalls_total %llu\n"
                "# HELP keel_coord_stalled_seconds_total Time the coordinator was stalled (not "
                "counted against nodes).\n"
                "# TYPE keel_coord_stalled_seconds_total counter\n"
                "keel_coord_stalled_seconds_total %.3f\n"
                "# HELP keel_coord_loop_max_stall_seconds The event loop's longest stall since "
                "start (lateness of its 100 ms clock timer).\n"
                "# TYPE keel_coord_loop_max_stall_seconds gauge\n"
                "keel_coord_loop_max_stall_seconds %.3f\n"
                "# HELP keel_mapstore_pending Map-store writes submitted and not yet completed.\n"
                "# TYPE keel_mapstore_pending gauge\nkeel_mapstore_pending %zu\n",
                co->detector.held, (unsigned long long)co->detector.held_total,
                (unsigned long long)co->detector.suspect_total,
                (unsigned long long)co->detector.down_total, COORD_CLOCK_GAP_MS,
                (unsigned long long)co->clock.stalls, (double)co->clock.credited / 1000.0,
                co->loop_max_stall_ms / 1000.0, mapstore_pending(co->ms));
    uint64_t reads, writes;
    mapstore_counters(co->ms, &reads, &writes);
    kbuf_printf(b,
                "# HELP keel_mapstore_reads_total Map store reads that reached the backend "
                "(others are served from memory).\n"
                "# TYPE keel_mapstore_reads_total counter\nkeel_mapstore_reads_total %llu\n"
                "# HELP keel_mapstore_writes_total Map store writes (transactions).\n"
                "# TYPE keel_mapstore_writes_total counter\nkeel_mapstore_writes_total %llu\n",
                (unsigned long long)reads, (unsigned long long)writes);
}

void coord_render_metrics(void *arg, kbuf *b) {
    coord *co = arg;
    size_t nn;
    double imb;
    node_view *v = node_views(co, &nn, &imb);
    gauge(b, "keel_imbalance_ratio", "Max over mean node utilisation (1 = perfectly even).", imb);
    gauge(b, "keel_map_version", "Version of the cluster map.", (double)mapstore_version(co->ms));
    gauge(b, "keel_term", "The coordinator's term (up by one at each start).", (double)co->term);
    node_metrics(co, b, v, nn);
    coord_render_detector_metrics(co, b, v, nn);
    free(v);
    mapstore_setting ps;
    int paused = mapstore_setting_get(co->ms, "paused", &ps) == 0;
    gauge(b, "keel_rebalance_paused", "1 while the kill switch (keel pause) is set.", paused);
    gauge(b, "keel_rebalance_paused_seconds",
          "How long the kill switch has been set (0 = not set).",
          paused ? mapstore_setting_age_ms(&ps, keel_wall_ms()) / 1000.0 : 0.0);
    coord_move_counts mc;
    coord_moves_counts(co, &mc);
    gauge(b, "keel_moves_in_flight", "Moves started and not yet committed or aborted.",
          mc.in_flight);
    gauge(b, "keel_moves_queued", "Moves planned and waiting for a concurrency slot.", mc.queued);
    gauge(b, "keel_moves_awaiting_cleanup", "Committed moves whose old copy is kept.",
          mc.committed_pending_cleanup);
    gauge(b, "keel_move_oldest_age_seconds", "Age of the oldest move in flight (0 = none).",
          mc.oldest_age_s);
    counter(b, "keel_moves_planned_total", "Moves planned (by the operator or the loop).",
            mc.started_total);
    counter(b, "keel_moves_committed_total", "Moves whose new owner became durable.",
            mc.committed_total);
    counter(b, "keel_moves_aborted_total", "Moves aborted.", mc.aborted_total);
    coord_repmove_counts rc; /* RF > 1: add-then-remove moves and transfers */
    coord_repmoves_counts(co, &rc);
    gauge(b, "keel_replica_moves_in_flight", "Replica moves (RF > 1) under way.",
          (double)coord_repmoves_in_flight(co));
    counter(b, "keel_replica_moves_started_total", "Replica moves started.", rc.started);
    counter(b, "keel_replica_moves_done_total", "Replica moves done.", rc.done);
    counter(b, "keel_replica_moves_aborted_total", "Replica moves aborted.", rc.aborted);
    counter(b, "keel_leadership_transfers_total", "Clean leadership transfers committed.",
            rc.transfers);
    counter(b, "keel_resign_requests_total",
            "KEEL.REP.RESIGN requests sent to leaders (one carries up to 32 partitions).",
            rc.resign_requests);
    counter(b, "keel_resign_partitions_total", "Partitions those RESIGN requests carried.",
            rc.resign_partitions);
    gauge(b, "keel_leadership_transfer_max_seconds",
          "Longest transfer: RESIGN sent to the leader change committed.",
          rc.max_transfer_ms / 1000.0);
    counter(b, "keel_move_bytes_total", "Bytes copied by moves, as destinations reported them.",
            mc.bytes_total);
    family(b, "keel_move_write_pause_seconds", "histogram",
           "Write pause of each move: fence sent to the destination serving.");
    histogram_write(b, "keel_move_write_pause_seconds", "", &mc.pause);
    gauge(b, "keel_move_write_pause_max_seconds",
          "Longest write pause since the coordinator started.", mc.max_pause_ms / 1000.0);
    const rebalance_stats *rs = coord_rebalance_stats(co);
    counter(b, "keel_rebalance_rounds_total", "Rebalance rounds that ran the planner.",
            rs->rounds_total);
    counter(b, "keel_rebalance_moves_total", "Moves the rebalance loop enqueued.", rs->moves_total);
    family(b, "keel_rebalance_skipped_total", "counter", "Rounds skipped, by reason.");
    for (int i = 0; i < REBALANCE_SKIP_COUNT; i++)
        kbuf_printf(b, "keel_rebalance_skipped_total{reason=\"%s\"} %llu\n",
                    rebalance_skip_name((rebalance_skip)i), (unsigned long long)rs->skipped[i]);
    if (co->rep) { /* replicated partitions (coord_rep.h) */
        counter(b, "keel_failovers_total",
                "Leader changes by failover (automatic, or keel failover).", co->rep->failovers);
        counter(b, "keel_unclean_failovers_total",
                "Failovers to a replica outside the ISR (keel failover --unclean).",
                co->rep->unclean_failovers);
        counter(b, "keel_reelections_total",
                "New leader epochs after a leader restarted with a new incarnation.",
                co->rep->reelections);
        counter(b, "keel_isr_shrinks_total", "ISR members removed.", co->rep->isr_shrinks);
        counter(b, "keel_isr_expands_total", "ISR members added.", co->rep->isr_expands);
    }
    family(b, "keel_setting_age_seconds", "gauge",
           "Time since each setting that is set was set (settings at their default are absent).");
    int64_t now = keel_wall_ms();
    for (const setting_def *d = coord_settings; d->name; d++) {
        mapstore_setting st;
        if (mapstore_setting_get(co->ms, d->name, &st) == 0)
            kbuf_printf(b, "keel_setting_age_seconds{name=\"%s\"} %.3f\n", d->name,
                        mapstore_setting_age_ms(&st, now) / 1000.0);
    }
}
