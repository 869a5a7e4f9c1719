/* coord_rebalance.c - the rebalancing control loop; see coord_rebalance.h. */
#include "coord/coord_rebalance.h"
#include "coord/coord_int.h"
#include "coord/coord_move.h"
#include "coord/coord_repmove.h"
#include "core/clock.h"
#include "core/log.h"
#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 500 /* how often the loop checks whether a round is due */

struct coord_rebalance_state {
    coord *co;
    uv_timer_t timer;
    plan_episode episode;  /* carried from round to round (hysteresis) */
    int64_t last_round_ms; /* when the last round was due; the interval counts from it */
    rebalance_stats st;
    int stopped;
};

const char *rebalance_skip_name(rebalance_skip s) {
    static const char *names[] = {
#define REBALANCE_SKIP_NAME(name, str) str,
        REBALANCE_SKIP_MAP(REBALANCE_SKIP_NAME)
#undef REBALANCE_SKIP_NAME
    };
    return (unsigned)s < REBALANCE_SKIP_COUNT ? names[s] : "?";
}

static void skip(struct coord_rebalance_state *r, rebalance_skip why, const char *detail) {
    r->st.skipped[why]++;
    keel_log(KEEL_LOG_DEBUG, "rebalance_skipped", "reason=%s detail=%s", rebalance_skip_name(why),
             detail ? detail : "-");
}

/* Counts live member nodes; copies the id of a SUSPECT one (if any) into
 * suspect. A DOWN node does not count either way: its metrics are missing,
 * the others' are not, so rounds go on without it (the planner freezes it). */
static int count_up(coord *co, char *suspect, size_t cap) {
    mapstore_node *nodes = NULL;
    size_t n = 0;
    int up = 0;
    suspect[0] = 0;
    if (mapstore_node_list(co->ms, &nodes, &n)) return 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].membership == MAPSTORE_MEMBER_REMOVED) continue;
        up += nodes[i].liveness == MAPSTORE_NODE_UP;
        if (nodes[i].liveness == MAPSTORE_NODE_SUSPECT) snprintf(suspect, cap, "%s", nodes[i].id);
    }
    free(nodes);
    return up;
}

/* The node over the latency objective, if rebalancing should wait for it:
 * NULL when none is, or when a draining node or one above disk_high makes
 * moving urgent. */
static const char *latency_blocker(coord *co) {
    double objective = coord_setting_d(co, "latency_objective_ms");
    if (objective <= 0) return NULL;
    mapstore_node *nodes = NULL;
    size_t n = 0;
    if (mapstore_node_list(co->ms, &nodes, &n)) return NULL;
    const char *slow = NULL;
    int urgent = 0;
    double high = coord_setting_d(co, "disk_high");
    for (size_t i = 0; i < n; i++) {
        member *m = coord_member(co, nodes[i].id, 0);
        if (!coord_node_usable(&nodes[i])) continue;
        if (nodes[i].membership == MAPSTORE_MEMBER_DRAINING) urgent = 1;
        if (!m) continue;
        if (m->disk_capacity && (double)m->disk_used / (double)m->disk_capacity > high) urgent = 1;
        if (nodes[i].membership == MAPSTORE_MEMBER_ACTIVE && m->p99_ms > objective) slow = m->id;
    }
    free(nodes);
    return urgent ? NULL : slow;
}

/* One round: plan on the current metrics and enqueue the moves. */
static void round_run(struct coord_rebalance_state *r, int64_t now) {
    coord *co = r->co;
    mapstore_setting ps;
    if (mapstore_setting_get(co->ms, "paused", &ps) == 0) {
        skip(r, REBALANCE_SKIP_PAUSED, NULL);
        return;
    }
    coord_move_counts mc;
    coord_moves_counts(co, &mc);
    if (mc.in_flight || mc.queued || coord_repmoves_in_flight(co)) {
        skip(r, REBALANCE_SKIP_IN_FLIGHT, NULL);
        return;
    }
    if (mc.last_end_ms && now - mc.last_end_ms < 2 * coord_setting_ll(co, "heartbeat_ms") + 500) {
        skip(r, REBALANCE_SKIP_SETTLING, NULL);
        return;
    }
    char suspect[KEEL_ID_MAX + 1];
    if (!count_up(co, suspect, sizeof suspect)) {
        skip(r, REBALANCE_SKIP_NO_NODES, NULL);
        return;
    }
    /* A SUSPECT node has missed heartbeats: its metrics are stale and it may
     * be back any moment. Planning around it would act on a partial view;
     * wait until it is UP again or declared DOWN (node_dead_after_ms). */
    if (suspect[0]) {
        skip(r, REBALANCE_SKIP_STALE, suspect);
        return;
    }
    const char *slow = latency_blocker(co);
    if (slow) {
        skip(r, REBALANCE_SKIP_LATENCY, slow);
        return;
    }
    plan_model m;
    plan_result res;
    memset(&res, 0, sizeof res);
    int rc = coord_build_model(co, now, &m);
    if (!rc) {
        coord_moves_annotate(co, &m);
        coord_repmoves_annotate(co, &m);
        m.episode = r->episode;
        rc = plan_run(&m, &res);
    }
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "rebalance_failed", "error=\"%s\"", res.error);
        skip(r, REBALANCE_SKIP_ERROR, res.error);
        goto out;
    }
    for (size_t i = 0; i < res.nstops; i++) {
        if (res.stops[i].code == PLAN_STOP_STALE_METRICS) { /* never act on missing data */
            skip(r, REBALANCE_SKIP_STALE, res.stops[i].key);
            goto out;
        }
    }
    r->st.rounds_total++;
    r->st.last_round_ms = now;
    r->st.imbalance = res.imbalance_before;
    r->episode = res.episode;
    snprintf(r->st.last_stop, sizeof r->st.last_stop, "%s", res.nstops ? res.stops[0].key : "");
    size_t queued = coord_repmoves_enqueue(co, &m, &res);
    for (size_t i = 0; i < res.nmoves; i++) {
        const plan_move *pm = &res.moves[i];
        char err[256];
        if (m.parts[pm->part].nreplicas > 1) continue; /* a replica move: enqueued above */
        if (coord_move_create(co, (unsigned)pm->part_id, m.nodes[pm->to].id, plan_why_name(pm->why),
                              NULL, NULL, err, sizeof err) == 0) /* recorded later; logged */
            queued++;
        else
            keel_log(KEEL_LOG_WARN, "rebalance_move_refused", "partition=%llu to=%s reason=\"%s\"",
                     (unsigned long long)pm->part_id, m.nodes[pm->to].id, err);
    }
    r->st.moves_total += queued;
    if (res.nmoves || res.imbalance_before > 1.0 + 1e-9)
        keel_log(KEEL_LOG_INFO, "rebalance_round",
                 "moves=%zu queued=%zu imbalance=%.4f predicted=%.4f floor=%.0f efficiency=%.3f "
                 "stop=%s",
                 res.nmoves, queued, res.imbalance_before, res.imbalance_after, res.floor,
                 res.efficiency, r->st.last_stop[0] ? r->st.last_stop : "-");
out:
    plan_result_close(&res);
    plan_model_close(&m);
}

static void on_tick(uv_timer_t *t) {
    struct coord_rebalance_state *r = t->data;
    int64_t now = coord_now(r->co);
    /* Re-read every tick, so a changed interval applies at once. */
    long long interval = coord_setting_ll(r->co, "rebalance_interval_s");
    if (interval <= 0 || now < r->last_round_ms + interval * 1000) return; /* off, or not due */
    r->last_round_ms = now;
    round_run(r, now);
}

int coord_rebalance_start(coord *co) {
    struct coord_rebalance_state *r = calloc(1, sizeof *r);
    if (!r) return -1;
    r->co = co;
    co->rebalance = r;
    r->last_round_ms = coord_now(co); /* the first round one interval after start */
    uv_timer_init(co->loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_tick, TICK_MS, TICK_MS);
    return 0;
}

static void on_closed(uv_handle_t *h) {
    free(h->data);
}

void coord_rebalance_stop(coord *co) {
    struct coord_rebalance_state *r = co->rebalance;
    if (!r || r->stopped) return;
    r->stopped = 1;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, on_closed);
    co->rebalance = NULL;
}

plan_episode coord_rebalance_episode(const coord *co) {
    plan_episode none = {0};
    return co->rebalance ? co->rebalance->episode : none;
}

const rebalance_stats *coord_rebalance_stats(const coord *co) {
    static const rebalance_stats none;
    return co->rebalance ? &co->rebalance->st : &none;
}
