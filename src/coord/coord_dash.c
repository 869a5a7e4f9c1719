/* coord_dash.c - the dashboard's sampler and JSON; see coord_dash.h.
 *
 * Three pieces:
 *  - a view cache: the nodes and each partition's owner, reloaded from the
 *    map store only when the map version moves (every ownership or state
 *    change bumps it), so the 1 s sampler and the renderer add no map-store
 *    read of their own on a quiet cluster;
 *  - the sampler: once a second, per-node sums of the heartbeat metrics over
 *    the cached owners, into one history sample;
 *  - the renderer of /api/dashboard: the cluster's state as cJSON (cached
 *    for a second, per grid mode), then the history since the caller's
 *    last sample, written by hand (thousands of numbers).
 */
#include "coord/coord_dash.h"
#include "coord/coord_history.h"
#include "coord/coord_int.h"
#include "coord/coord_move.h"
#include "coord/coord_rebalance.h"
#include "coord/coord_repmove.h"
#include "coord/web_assets.h"
#include "core/clock.h"
#include "core/err.h"
#include "planner/planner.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_MS 1000
#define STATE_TTL_MS 1000
#define PLAN_TTL_MS 3000
#define RECENT_MOVES 20
#define MAX_ROUTES 16

enum { GRID_OWNER, GRID_BYTES, GRID_LOAD, GRID__COUNT };
static const char *grid_names[GRID__COUNT] = {"owner", "bytes", "load"};

/* One node as the dashboard sees it. */
typedef struct dnode {
    mapstore_node n;
    int col; /* history column, or < 0 when not charted */
    size_t partitions;
    uint64_t bytes, keys;
    double ops;
    double util_bytes, util_load;   /* share over capacity, as STATUS */
    double ratio_bytes, ratio_load; /* over the live nodes' mean; NAN when not live */
} dnode;

typedef struct coord_dash_state {
    coord *co;
    uv_timer_t timer;
    int timer_open;
    int loaded; /* the cache below holds map version `version` */
    uint64_t version;
    dnode *nodes;
    size_t nn;
    int *owner; /* [P] index into nodes, -1 = unowned */
    double imbalance, imbalance_load;
    uint64_t last_bytes_total;
    int64_t last_sample_ms;
    char *state_json[GRID__COUNT];
    int64_t state_ms[GRID__COUNT];
    char *plan_json;
    int64_t plan_ms;
    http_route routes[MAX_ROUTES];
    size_t nroutes;
} dash;

/* ---- The view cache -------------------------------------------------------------- */

static int reload(dash *d) {
    coord *co = d->co;
    mapstore_node *nodes = NULL;
    mapstore_partition *parts = NULL;
    size_t nn = 0, np = 0;
    int rc = mapstore_node_list(co->ms, &nodes, &nn);
    if (!rc) rc = mapstore_partition_list(co->ms, &parts, &np);
    dnode *v = rc ? NULL : calloc(nn ? nn : 1, sizeof *v);
    if (!rc && !v) rc = KEEL_ENOMEM;
    if (rc) goto fail;
    for (size_t k = 0; k < nn; k++) {
        v[k].n = nodes[k];
        v[k].col = nodes[k].membership == MAPSTORE_MEMBER_REMOVED
                       ? -1
                       : coord_history_column(co->history, nodes[k].id);
    }
    for (size_t i = 0; i < np && i < co->partitions; i++) {
        d->owner[i] = -1;
        for (size_t k = 0; parts[i].owner[0] && k < nn; k++)
            if (!strcmp(parts[i].owner, nodes[k].id)) d->owner[i] = (int)k;
    }
    free(d->nodes);
    d->nodes = v;
    d->nn = nn;
    d->version = mapstore_version(co->ms);
    d->loaded = 1;
    free(nodes);
    free(parts);
    return 0;
fail:
    free(nodes);
    free(parts);
    return rc;
}

static double ratio_max(dash *d, int load, double *mean_out) {
    double sum = 0, max = 0;
    size_t live = 0;
    for (size_t k = 0; k < d->nn; k++) {
        dnode *v = &d->nodes[k];
        if (v->n.capacity <= 0 || v->n.membership == MAPSTORE_MEMBER_REMOVED) continue;
        double u = load ? v->util_load : v->util_bytes;
        sum += u;
        max = fmax(max, u);
        live++;
    }
    *mean_out = live ? sum / (double)live : 0;
    return *mean_out > 0 ? max / *mean_out : 0;
}

/* Per-node sums over the cached owners; the same utilisation as STATUS
 * (share of bytes, or of partitions while no bytes are reported, over
 * capacity), and the same share of load. Returns 0 or a negative KEEL_E*. */
static int compute(dash *d) {
    coord *co = d->co;
    if (!d->loaded || d->version != mapstore_version(co->ms)) {
        int rc = reload(d);
        if (rc) return rc;
    }
    uint64_t total_bytes = 0;
    double total_ops = 0;
    size_t owned = 0;
    for (size_t k = 0; k < d->nn; k++) {
        dnode *v = &d->nodes[k];
        v->partitions = v->bytes = v->keys = 0;
        v->ops = 0;
    }
    for (unsigned i = 0; i < co->partitions; i++) {
        if (d->owner[i] < 0 || (size_t)d->owner[i] >= d->nn) continue;
        dnode *v = &d->nodes[d->owner[i]];
        const part_metrics *pm = &co->parts[i];
        v->partitions++;
        v->bytes += pm->bytes;
        v->keys += pm->keys;
        v->ops += pm->ops;
        total_bytes += pm->bytes;
        total_ops += pm->ops;
        owned++;
    }
    for (size_t k = 0; k < d->nn; k++) {
        dnode *v = &d->nodes[k];
        double pshare = owned ? (double)v->partitions / (double)owned : 0;
        double bshare = total_bytes ? (double)v->bytes / (double)total_bytes : pshare;
        double lshare = total_ops > 0 ? v->ops / total_ops : pshare;
        int live = v->n.capacity > 0 && v->n.membership != MAPSTORE_MEMBER_REMOVED;
        v->util_bytes = live ? bshare / v->n.capacity : 0;
        v->util_load = live ? lshare / v->n.capacity : 0;
    }
    double mb, ml;
    d->imbalance = ratio_max(d, 0, &mb);
    d->imbalance_load = ratio_max(d, 1, &ml);
    for (size_t k = 0; k < d->nn; k++) {
        dnode *v = &d->nodes[k];
        int live = v->n.capacity > 0 && v->n.membership != MAPSTORE_MEMBER_REMOVED;
        v->ratio_bytes = live && mb > 0 ? v->util_bytes / mb : NAN;
        v->ratio_load = live && ml > 0 ? v->util_load / ml : NAN;
    }
    return 0;
}

/* ---- The sampler ------------------------------------------------------------------- */

static void sample(dash *d, int64_t now) {
    coord *co = d->co;
    if (compute(d)) return;
    history_sample s;
    memset(&s, 0, sizeof s);
    s.t_ms = now;
    s.imbalance = (float)d->imbalance;
    s.imbalance_load = (float)d->imbalance_load;
    coord_move_counts mc;
    coord_moves_counts(co, &mc);
    double dt = d->last_sample_ms ? (double)(now - d->last_sample_ms) / 1000.0 : 0;
    if (dt > 0 && mc.bytes_total >= d->last_bytes_total)
        s.moved_bps = (float)((double)(mc.bytes_total - d->last_bytes_total) / dt);
    d->last_bytes_total = mc.bytes_total;
    d->last_sample_ms = now;
    s.in_flight = (uint16_t)(mc.in_flight > 65535 ? 65535 : mc.in_flight);
    s.queued = (uint16_t)(mc.queued > 65535 ? 65535 : mc.queued);
    /* One setting read, and only while something moves. */
    if (mc.in_flight)
        s.throttle_bps = (float)(coord_setting_d(co, "move_bytes_per_sec") * mc.in_flight);
    for (size_t k = 0; k < HISTORY_NODES; k++)
        s.nodes[k].bytes_ratio = s.nodes[k].load_ratio = NAN;
    for (size_t k = 0; k < d->nn; k++) {
        dnode *v = &d->nodes[k];
        if (v->col < 0) continue;
        history_node *hn = &s.nodes[v->col];
        hn->bytes_ratio = (float)v->ratio_bytes;
        hn->load_ratio = (float)v->ratio_load;
        hn->ops = (float)v->ops;
        member *m = coord_member(co, v->n.id, 0);
        if (m) hn->p50_ms = (float)m->p50_ms, hn->p99_ms = (float)m->p99_ms;
    }
    s.ncols = (uint16_t)coord_history_ncols(co->history);
    coord_history_add(co->history, &s);
}

static void on_timer(uv_timer_t *t) {
    dash *d = t->data;
    sample(d, keel_wall_ms());
}

/* ---- State JSON -------------------------------------------------------------------- */

static const char *disk_state(coord *co, const member *m, double *frac) {
    *frac = m && m->disk_capacity ? (double)m->disk_used / (double)m->disk_capacity : NAN;
    if (!isfinite(*frac)) return "unknown";
    if (*frac >= coord_setting_d(co, "disk_flood")) return "flood";
    if (*frac >= coord_setting_d(co, "disk_high")) return "high";
    if (*frac >= coord_setting_d(co, "disk_low")) return "low";
    return "ok";
}

static void add_num_or_null(cJSON *o, const char *k, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void nodes_json(dash *d, cJSON *arr, int64_t now) {
    coord *co = d->co;
    for (size_t k = 0; k < d->nn; k++) {
        dnode *v = &d->nodes[k];
        member *m = coord_member(co, v->n.id, 0);
        cJSON *o = cJSON_CreateObject();
        char addr[KEEL_HOST_MAX + 8];
        snprintf(addr, sizeof addr, "%s:%d", v->n.host, v->n.port);
        cJSON_AddStringToObject(o, "id", v->n.id);
        cJSON_AddStringToObject(o, "addr", addr);
        cJSON_AddStringToObject(o, "state", coord_node_summary(&v->n));
        cJSON_AddStringToObject(o, "liveness", mapstore_liveness_name(v->n.liveness));
        cJSON_AddStringToObject(o, "membership", mapstore_membership_name(v->n.membership));
        cJSON_AddBoolToObject(o, "quarantined", coord_quarantined(co, v->n.id));
        cJSON_AddNumberToObject(o, "capacity", v->n.capacity);
        /* Keel keeps one copy of each partition: every owner is its leader. */
        cJSON_AddNumberToObject(o, "leader_of", (double)v->partitions);
        cJSON_AddNumberToObject(o, "follower_of", 0);
        cJSON_AddNumberToObject(o, "bytes", (double)v->bytes);
        cJSON_AddNumberToObject(o, "keys", (double)v->keys);
        cJSON_AddNumberToObject(o, "ops", v->ops);
        cJSON_AddNumberToObject(o, "util_bytes", v->util_bytes);
        cJSON_AddNumberToObject(o, "util_load", v->util_load);
        add_num_or_null(o, "ratio_bytes", v->ratio_bytes);
        add_num_or_null(o, "ratio_load", v->ratio_load);
        double frac;
        cJSON_AddStringToObject(o, "disk_state", disk_state(co, m, &frac));
        add_num_or_null(o, "disk_fraction", frac);
        cJSON_AddNumberToObject(o, "p50_ms", m ? m->p50_ms : 0);
        cJSON_AddNumberToObject(o, "p99_ms", m ? m->p99_ms : 0);
        add_num_or_null(o, "heartbeat_age_s",
                        m && m->last_hb_ms ? (double)(coord_now(d->co) - m->last_hb_ms) / 1000.0
                                           : NAN);
        cJSON_AddItemToArray(arr, o);
    }
}

/* Every stored setting that differs from its default (and the ones that
 * have no default, such as "quarantined"), with its age. */
static void settings_json(coord *co, cJSON *root, int64_t now) {
    cJSON *eff = cJSON_AddObjectToObject(root, "settings");
    cJSON *changed = cJSON_AddArrayToObject(root, "changed_settings");
    mapstore_setting *all = NULL;
    size_t n = 0;
    if (mapstore_setting_list(co->ms, &all, &n)) all = NULL, n = 0; /* defaults shown */
    for (const setting_def *sd = coord_settings; sd->name; sd++) {
        double v = atof(sd->def);
        for (size_t i = 0; i < n; i++)
            if (!strcmp(all[i].name, sd->name)) v = atof(all[i].value);
        cJSON_AddNumberToObject(eff, sd->name, v);
    }
    for (size_t i = 0; i < n; i++) {
        const setting_def *sd = coord_setting_find(all[i].name);
        if (!strcmp(all[i].name, "paused")) continue; /* the banner shows it */
        if (sd && atof(sd->def) == atof(all[i].value)) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", all[i].name);
        cJSON_AddStringToObject(o, "value", all[i].value);
        if (sd)
            cJSON_AddStringToObject(o, "default", sd->def);
        else
            cJSON_AddNullToObject(o, "default");
        cJSON_AddNumberToObject(o, "age_s", mapstore_setting_age_ms(&all[i], now) / 1000.0);
        cJSON_AddItemToArray(changed, o);
    }
    free(all);
    mapstore_setting ps;
    if (mapstore_setting_get(co->ms, "paused", &ps) == 0) {
        cJSON *p = cJSON_AddObjectToObject(root, "paused");
        cJSON_AddStringToObject(p, "reason", ps.value);
        cJSON_AddNumberToObject(p, "age_s", mapstore_setting_age_ms(&ps, now) / 1000.0);
    } else {
        cJSON_AddNullToObject(root, "paused");
    }
}

/* A move is expected to take its bytes over the throttle plus a few
 * seconds of protocol; one past three times that is flagged. */
static double expected_s(double total_bytes, double throttle) {
    return 5.0 + total_bytes / (throttle > 0 ? throttle : 64.0 * 1024 * 1024);
}

static void moves_json(dash *d, cJSON *root) {
    coord *co = d->co;
    double throttle = coord_setting_d(co, "move_bytes_per_sec");
    cJSON *all = cJSON_CreateArray();
    coord_moves_json(co, all, RECENT_MOVES);
    cJSON *mv = cJSON_AddObjectToObject(root, "moves");
    cJSON *active = cJSON_AddArrayToObject(mv, "active");
    cJSON *recent = cJSON_AddArrayToObject(mv, "recent");
    cJSON *oldest = NULL;
    double oldest_age = -1;
    while (cJSON_GetArraySize(all) > 0) {
        cJSON *o = cJSON_DetachItemFromArray(all, 0);
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(o, "state"));
        int ended = st && (!strcmp(st, "DONE") || !strcmp(st, "ABORTED"));
        double age = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "age_s"));
        double total = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "total_bytes"));
        double exp = expected_s(isfinite(total) ? total : 0, throttle);
        cJSON_AddNumberToObject(o, "expected_s", exp);
        int in_flight = !ended && st && strcmp(st, "COMMITTED") != 0;
        cJSON_AddBoolToObject(o, "overdue", in_flight && age > 3 * exp);
        if (in_flight && age > oldest_age) oldest_age = age, oldest = o;
        /* Committed moves only wait for their cleanup: for the operator they
         * are finished, so they are listed with the recent ones. */
        cJSON_AddItemToArray(in_flight ? active : recent, o);
    }
    cJSON_Delete(all);
    /* The newest RECENT_MOVES only: after a join hundreds may await cleanup. */
    while (cJSON_GetArraySize(recent) > RECENT_MOVES)
        cJSON_DeleteItemFromArray(recent, 0);
    if (oldest) {
        cJSON *o = cJSON_AddObjectToObject(mv, "oldest");
        cJSON_AddNumberToObject(o, "id", cJSON_GetNumberValue(cJSON_GetObjectItem(oldest, "id")));
        cJSON_AddNumberToObject(o, "age_s", oldest_age);
        cJSON_AddNumberToObject(o, "expected_s",
                                cJSON_GetNumberValue(cJSON_GetObjectItem(oldest, "expected_s")));
        cJSON_AddBoolToObject(o, "overdue", cJSON_IsTrue(cJSON_GetObjectItem(oldest, "overdue")));
    } else {
        cJSON_AddNullToObject(mv, "oldest");
    }
    coord_move_counts mc;
    coord_moves_counts(co, &mc);
    cJSON *c = cJSON_AddObjectToObject(mv, "counts");
    cJSON_AddNumberToObject(c, "in_flight", mc.in_flight);
    cJSON_AddNumberToObject(c, "queued", mc.queued);
    cJSON_AddNumberToObject(c, "awaiting_cleanup", mc.committed_pending_cleanup);
    cJSON_AddNumberToObject(c, "planned_total", (double)mc.started_total);
    cJSON_AddNumberToObject(c, "committed_total", (double)mc.committed_total);
    cJSON_AddNumberToObject(c, "aborted_total", (double)mc.aborted_total);
    cJSON_AddNumberToObject(c, "bytes_total", (double)mc.bytes_total);
    cJSON_AddNumberToObject(c, "max_pause_ms", mc.max_pause_ms);
    coord_repmove_counts rc; /* RF > 1: add-then-remove moves and leadership transfers */
    coord_repmoves_counts(co, &rc);
    cJSON *r = cJSON_AddObjectToObject(mv, "replica_counts");
    cJSON_AddNumberToObject(r, "started_total", (double)rc.started);
    cJSON_AddNumberToObject(r, "done_total", (double)rc.done);
    cJSON_AddNumberToObject(r, "aborted_total", (double)rc.aborted);
    cJSON_AddNumberToObject(r, "transfers_total", (double)rc.transfers);
    cJSON_AddNumberToObject(r, "max_transfer_ms", rc.max_transfer_ms);
    cJSON_AddNumberToObject(r, "resign_requests_total", (double)rc.resign_requests);
    cJSON_AddNumberToObject(r, "resign_partitions_total", (double)rc.resign_partitions);
}

/* The planner's dry run, recomputed at most every PLAN_TTL_MS. */
static void plan_json(dash *d, cJSON *root, int64_t now) {
    if (!d->plan_json || now - d->plan_ms >= PLAN_TTL_MS) {
        plan_model m;
        plan_result r;
        int rc = coord_plan_now(d->co, coord_now(d->co), &m, &r); /* metrics ages: monotonic */
        free(d->plan_json);
        d->plan_json = rc ? NULL : plan_result_to_json(&m, &r, 0);
        if (rc) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "error", r.error[0] ? r.error : keel_strerror(rc));
            d->plan_json = cJSON_PrintUnformatted(e);
            cJSON_Delete(e);
        }
        d->plan_ms = now;
        plan_result_close(&r);
        plan_model_close(&m);
    }
    cJSON *p = d->plan_json ? cJSON_Parse(d->plan_json) : NULL;
    cJSON_AddItemToObject(root, "plan", p ? p : cJSON_CreateNull());
}

static void grid_json(dash *d, cJSON *root, int mode) {
    coord *co = d->co;
    cJSON *g = cJSON_AddObjectToObject(root, "grid");
    cJSON_AddStringToObject(g, "mode", grid_names[mode]);
    cJSON *ids = cJSON_AddArrayToObject(g, "nodes");
    for (size_t k = 0; k < d->nn; k++)
        cJSON_AddItemToArray(ids, cJSON_CreateString(d->nodes[k].n.id));
    int *own = malloc((co->partitions ? co->partitions : 1) * sizeof *own);
    if (own) {
        memcpy(own, d->owner, co->partitions * sizeof *own);
        cJSON_AddItemToObject(g, "owners", cJSON_CreateIntArray(own, (int)co->partitions));
        free(own);
    }
    if (mode == GRID_OWNER) return;
    double *vals = malloc((co->partitions ? co->partitions : 1) * sizeof *vals);
    if (!vals) return;
    for (unsigned i = 0; i < co->partitions; i++)
        vals[i] = mode == GRID_BYTES ? (double)co->parts[i].bytes : co->parts[i].ops;
    cJSON_AddItemToObject(g, "values", cJSON_CreateDoubleArray(vals, (int)co->partitions));
    free(vals);
}

static char *state_render(dash *d, int mode, int64_t now) {
    coord *co = d->co;
    if (compute(d)) return NULL;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "cluster", mapstore_cluster_id(co->ms));
    cJSON_AddNumberToObject(r, "term", (double)co->term);
    cJSON_AddNumberToObject(r, "map_version", (double)mapstore_version(co->ms));
    cJSON_AddNumberToObject(r, "partitions", co->partitions);
    cJSON_AddNumberToObject(r, "imbalance", d->imbalance);
    cJSON_AddNumberToObject(r, "imbalance_load", d->imbalance_load);
    settings_json(co, r, now);
    nodes_json(d, cJSON_AddArrayToObject(r, "nodes"), now);
    moves_json(d, r);
    const rebalance_stats *rs = coord_rebalance_stats(co);
    cJSON *rb = cJSON_AddObjectToObject(r, "rebalance");
    cJSON_AddNumberToObject(rb, "rounds_total", (double)rs->rounds_total);
    cJSON_AddNumberToObject(rb, "moves_total", (double)rs->moves_total);
    cJSON_AddStringToObject(rb, "last_stop", rs->last_stop);
    add_num_or_null(rb, "last_round_age_s",
                    rs->last_round_ms ? (double)(coord_now(co) - rs->last_round_ms) / 1000.0 : NAN);
    cJSON *sk = cJSON_AddObjectToObject(rb, "skipped");
    for (int i = 0; i < REBALANCE_SKIP_COUNT; i++)
        cJSON_AddNumberToObject(sk, rebalance_skip_name((rebalance_skip)i), (double)rs->skipped[i]);
    plan_json(d, r, now);
    grid_json(d, r, mode);
    char *s = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    return s;
}

/* ---- History JSON ------------------------------------------------------------------ */

static void num(kbuf *b, double v) {
    if (isfinite(v))
        kbuf_printf(b, "%.4g", v);
    else
        kbuf_appendstr(b, "null");
}

static void col_array(kbuf *b, const history_sample *s, size_t ncols, size_t field) {
    kbuf_appendstr(b, ",[");
    for (size_t c = 0; c < ncols; c++) {
        const history_node *n = &s->nodes[c];
        double v = c >= s->ncols ? NAN
                   : field == 0  ? n->bytes_ratio
                   : field == 1  ? n->load_ratio
                   : field == 2  ? n->ops
                   : field == 3  ? n->p50_ms
                                 : n->p99_ms;
        if (c) kbuf_appendstr(b, ",");
        num(b, v);
    }
    kbuf_appendstr(b, "]");
}

static void history_render(coord *co, int64_t since, kbuf *b) {
    const coord_history *h = co->history;
    size_t ncols = coord_history_ncols(h);
    kbuf_appendstr(b, "{\"columns\":[");
    for (size_t c = 0; c < ncols; c++)
        kbuf_printf(b, "%s\"%s\"", c ? "," : "", coord_history_col_id(h, c));
    kbuf_appendstr(b, "],\"samples\":[");
    size_t n = coord_history_count(h);
    for (size_t i = coord_history_first_after(h, since), first = 1; i < n; i++, first = 0) {
        const history_sample *s = coord_history_at(h, i);
        kbuf_printf(b, "%s[%lld,", first ? "" : ",", (long long)s->t_ms);
        num(b, s->imbalance);
        kbuf_appendstr(b, ",");
        num(b, s->imbalance_load);
        kbuf_appendstr(b, ",");
        num(b, s->moved_bps);
        kbuf_appendstr(b, ",");
        num(b, s->throttle_bps);
        kbuf_printf(b, ",%u,%u", s->in_flight, s->queued);
        for (size_t f = 0; f < 5; f++)
            col_array(b, s, ncols, f);
        kbuf_appendstr(b, "]");
    }
    kbuf_appendstr(b, "],\"events\":[");
    size_t ne = coord_history_nevents(h);
    for (size_t i = 0, first = 1; i < ne; i++) {
        const history_event *e = coord_history_event_at(h, i);
        if (e->t_ms <= since) continue;
        kbuf_printf(b, "%s[%lld,%llu,%u,\"%s\"]", first ? "" : ",", (long long)e->t_ms,
                    (unsigned long long)e->move, e->partition, coord_history_event_name(e->kind));
        first = 0;
    }
    kbuf_appendstr(b, "]}");
}

/* ---- /api/dashboard ---------------------------------------------------------------- */

static int bad_request(kbuf *out, const char *fmt, const char *what) {
    char msg[256], q[300];
    snprintf(msg, sizeof msg, fmt, what);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "error", msg);
    char *s = cJSON_PrintUnformatted(e);
    snprintf(q, sizeof q, "%s\n", s ? s : "{\"error\":\"bad request\"}");
    kbuf_appendstr(out, q);
    free(s);
    cJSON_Delete(e);
    return 400;
}

/* Parses "since=MS&grid=MODE". Returns 0 or 400 with the reason in out. */
static int parse_query(const char *query, int64_t *since, int *mode, kbuf *out) {
    char buf[HTTP_QUERY_MAX + 1];
    snprintf(buf, sizeof buf, "%s", query);
    *since = 0;
    *mode = GRID_OWNER;
    for (char *save = NULL, *kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        char *v = strchr(kv, '=');
        if (v) *v++ = 0;
        if (!strcmp(kv, "since")) {
            char *end;
            errno = 0;
            long long x = v ? strtoll(v, &end, 10) : -1;
            if (!v || !*v || errno || *end || x < 0)
                return bad_request(out, "since must be a non-negative integer (ms), got '%s'",
                                   v ? v : "");
            *since = x;
        } else if (!strcmp(kv, "grid")) {
            int m = -1;
            for (int i = 0; v && i < GRID__COUNT; i++)
                if (!strcmp(v, grid_names[i])) m = i;
            if (m < 0)
                return bad_request(out, "grid must be owner, bytes or load, got '%s'", v ? v : "");
            *mode = m;
        } else {
            return bad_request(out, "unknown parameter '%s' (known: since, grid)", kv);
        }
    }
    return 0;
}

int coord_render_dashboard(void *arg, const char *query, kbuf *out) {
    coord *co = arg;
    dash *d = co->dash;
    int64_t since;
    int mode;
    if (parse_query(query, &since, &mode, out)) return 400;
    int64_t now = keel_wall_ms();
    if (!d->state_json[mode] || now - d->state_ms[mode] >= STATE_TTL_MS) {
        free(d->state_json[mode]);
        d->state_json[mode] = state_render(d, mode, now);
        d->state_ms[mode] = now;
    }
    kbuf_printf(out, "{\"now_ms\":%lld,\"history_bytes\":%zu,\"state\":", (long long)now,
                coord_history_bytes());
    kbuf_appendstr(out, d->state_json[mode] ? d->state_json[mode]
                                            : "{\"error\":\"map store read failed\"}");
    kbuf_appendstr(out, ",\"history\":");
    history_render(co, since, out);
    kbuf_appendstr(out, "}\n");
    return 200;
}

/* ---- Life cycle -------------------------------------------------------------------- */

static void add_route(dash *d, http_route r) {
    if (d->nroutes < MAX_ROUTES) d->routes[d->nroutes++] = r;
}

int coord_dash_start(coord *co) {
    dash *d = calloc(1, sizeof *d);
    if (!d) return KEEL_ENOMEM;
    d->co = co;
    co->dash = d;
    co->history = coord_history_new();
    d->owner = calloc(co->partitions ? co->partitions : 1, sizeof *d->owner);
    if (!co->history || !d->owner) return KEEL_ENOMEM;
    add_route(d, (http_route){"/metrics", HTTP_PROMETHEUS, coord_render_metrics});
    add_route(d, (http_route){"/status", "application/json", coord_render_status});
    add_route(d, (http_route){"/api/dashboard", "application/json", NULL, coord_render_dashboard});
    for (size_t i = 0; i < web_nassets; i++) {
        const web_asset *a = &web_assets[i];
        add_route(d, (http_route){a->path, a->content_type, NULL, NULL, a->data, a->len});
        if (!strcmp(a->path, "/index.html"))
            add_route(d, (http_route){"/", a->content_type, NULL, NULL, a->data, a->len});
    }
    uv_timer_init(co->loop, &d->timer);
    d->timer.data = d;
    d->timer_open = 1;
    uv_timer_start(&d->timer, on_timer, 0, SAMPLE_MS);
    return 0;
}

void coord_dash_stop(coord *co) {
    dash *d = co->dash;
    if (!d || !d->timer_open) return;
    d->timer_open = 0;
    uv_timer_stop(&d->timer);
    uv_close((uv_handle_t *)&d->timer, NULL);
}

void coord_dash_free(coord *co) {
    dash *d = co->dash;
    coord_history_free(co->history);
    co->history = NULL;
    if (!d) return;
    for (int i = 0; i < GRID__COUNT; i++)
        free(d->state_json[i]);
    free(d->plan_json);
    free(d->nodes);
    free(d->owner);
    free(d);
    co->dash = NULL;
}

const http_route *coord_dash_routes(coord *co, size_t *n) {
    *n = co->dash ? co->dash->nroutes : 0;
    return co->dash ? co->dash->routes : NULL;
}
