/* coord_int.h - the coordinator's private state, shared by coord.c (process,
 * membership, placement) and coord_cmd.c (commands and views). */
#ifndef KEEL_COORD_INT_H
#define KEEL_COORD_INT_H

#include <stdint.h>
#include <uv.h>

#include "coord/coord.h"
#include "coord/mapstore.h"
#include "core/buf.h"
#include "core/directive.h"
#include "core/peerauth.h"
#include "core/stallclock.h"
#include "net/peerserve.h" /* client.user is a peer_conn */
#include "net/rserver.h"

#define COORD_ID "coordinator" /* the id the coordinator proves in KEEL.AUTH */

/* What heartbeats tell us about a node; memory only. */
typedef struct member {
    char id[KEEL_ID_MAX + 1];
    int64_t last_hb_ms; /* on coord_now(); 0 = not heard from since this coordinator started */
    uint64_t bytes, keys;
    double ops;
    uint64_t disk_used, disk_capacity;
    double p50_ms, p99_ms;  /* foreground latency over the last heartbeat interval */
    int64_t failures_ms[4]; /* the last 4 times it went UP -> SUSPECT/DOWN (coord_now) */
    int liveness_pending;   /* a liveness write for it is submitted, not yet completed */
    /* Replication (coord_rep.h). */
    int rep_proto;               /* registered with an incarnation: 5-element heartbeat replies */
    int64_t lease_sent_ms;       /* coord_now() of the last lease-1 reply; 0 = none yet */
    uint64_t lease_hold_version; /* lease 0 until it reports a map version >= this */
    char incarnation[17];        /* the process's, as registered; "" = unknown */
    char map_incarnation[17];    /* the one the map lists (C3: once its consequences commit) */
    int incarnation_pending;     /* a new incarnation whose consequences are being committed */
    int incarnation_bumping;     /* its map version bump is in flight */
} member;

/* Per-partition metrics from the owner's heartbeats. */
typedef struct part_metrics {
    uint64_t bytes, keys;
    double ops;
} part_metrics;

/* A setting the coordinator knows: its default and its range (all numeric). */
typedef struct setting_def {
    const char *name;
    const char *def;
    const char *help;
    double min, max;
} setting_def;

typedef struct coord {
    coord_config cfg;
    uv_loop_t *loop;
    mapstore *ms;
    peerauth_secret secret;
    struct coordkey *key; /* the coordinator's Ed25519 key (core/coordkey.h) */
    uint64_t term;
    uint64_t directive_seq;  /* per term: every map sent is a new directive */
    int64_t stale_reload_ms; /* next re-read of a stale map store (on_member_timer) */
    rserver *rs;
    struct http_server *http;
    uv_timer_t member_timer;
    uv_timer_t clock_timer; /* reads `clock` every COORD_CLOCK_TICK_MS, so stalls are seen */
    keel_stallclock clock;  /* every duration the coordinator measures: coord_now() */
    struct {
        int held;            /* the failure-ratio brake holds (detector.h) */
        uint64_t held_total; /* judgements it held */
        int64_t held_since;  /* coord_now() when it started holding; 0 = not holding */
        int64_t released_at; /* coord_now() when it last let go: silence counts from then */
        uint64_t suspect_total, down_total;
        uint64_t stalls_logged; /* clock.stalls when the last stall was logged */
        int64_t credited_logged;
    } detector;
    uv_signal_t sigint, sigterm;
    member *members;
    size_t nmembers;
    part_metrics *parts; /* [P] */
    unsigned partitions;
    int64_t first_register_ms; /* coord_now() */
    int64_t start_ms;          /* coord_now() at start */
    int stopping;
    struct coord_moves_state *mv;            /* the move executor (coord_move.c) */
    struct coord_repmoves_state *repmv;      /* replica moves at RF > 1 (coord_repmove.c) */
    struct coord_rebalance_state *rebalance; /* the control loop (coord_rebalance.c) */
    struct coord_dash_state *dash;           /* the dashboard (coord_dash.c) */
    struct coord_history *history;           /* its charts' history (coord_history.h) */
    struct coord_deferred *deferred; /* commands held for a map-store write (coord_defer.h) */
    struct coord_rep_state *rep;     /* ISR, leases, failover (coord_rep.h) */
    int placing;                     /* a bootstrap placement is submitted, not completed */
    /* The loop's longest stall: the largest lateness of clock_timer (its
     * interval between two runs minus COORD_CLOCK_TICK_MS), since start. */
    uint64_t loop_last_us;
    double loop_max_stall_ms;
    /* The map as JSON, rebuilt when the version changes. */
    kbuf map_json;
    uint64_t map_json_version;
} coord;

#define COORD_CLOCK_TICK_MS 100
#define COORD_CLOCK_GAP_MS 1000 /* a longer gap between clock reads is a coordinator stall */

/* The coordinator's clock for every duration (timeouts, silence, ages): a
 * monotonic ms clock that stops while the coordinator itself is stalled
 * (core/stallclock.h). The wall clock is only for records people read. */
int64_t coord_now(coord *co);

/* A node's one-word summary for views and old scripts: REMOVED, else DOWN
 * or SUSPECT when not UP, else DRAINING, else UP. */
const char *coord_node_summary(const mapstore_node *n);
/* Live and a member: liveness UP and membership not REMOVED. */
int coord_node_usable(const mapstore_node *n);

extern const setting_def coord_settings[];
/* The value of a known setting (stored or default), as an integer. */
long long coord_setting_ll(coord *co, const char *name);
double coord_setting_d(coord *co, const char *name);
const setting_def *coord_setting_find(const char *name);

struct plan_model;
/* The planner's model of the cluster at now_ms (coord_now()): nodes, owners, per-partition
 * bytes and load from heartbeats, metrics ages, planner settings. Returns 0
 * or a negative KEEL_E*; close the model either way. */
int coord_build_model(coord *co, int64_t now_ms, struct plan_model *m);
struct plan_result;
/* The planner's dry run, as `keel plan` and the next rebalance round see
 * it: builds m, annotates moves in flight and the hysteresis state, runs
 * the planner into r. Returns 0 or a negative KEEL_E* (r->error may say
 * why); close both m and r either way. */
int coord_plan_now(coord *co, int64_t now_ms, struct plan_model *m, struct plan_result *r);

/* A command being executed (coord_cmd.c, coord_ops.c). */
typedef struct cctx {
    coord *co;
    client *c;
    int argc;
    char **argv;
    const size_t *len;
    int64_t now;
    int hold; /* the handler held the request (coord_defer.h): no reply yet */
} cctx;

void coord_reply_err(cctx *x, const char *msg);
int coord_want_json(const cctx *x);
struct cJSON;
/* Replies root as a JSON bulk string (and frees it). */
void coord_reply_json(cctx *x, struct cJSON *root);
/* Replies json if the command asked for JSON, else text; frees both. */
void coord_reply_view(cctx *x, struct cJSON *json, kbuf *text);
/* Operator controls (coord_ops.c). */
void coord_c_setting(cctx *x);
void coord_c_pause(cctx *x);
void coord_c_resume(cctx *x);
void coord_c_plan(cctx *x);
void coord_c_drain(cctx *x);
void coord_c_remove(cctx *x);
void coord_c_failpoint(cctx *x);
void coord_c_unquarantine(cctx *x);
void coord_c_move(cctx *x);
void coord_c_cancel(cctx *x);
void coord_c_moves(cctx *x);

member *coord_member(coord *co, const char *id, int create);
/* Quarantine (DESIGN §7): a node that failed more than 3 times in an hour
 * receives no data until an operator clears it. Kept in the setting
 * "quarantined" (space-separated ids) so it survives restarts. */
int coord_quarantined(coord *co, const char *id);
/* Builds the write that adds (on) or removes id: 0 and *w, 1 when there is
 * nothing to write (removing an id from an empty list: the setting is
 * absent), KEEL_ELIMIT when the list would not fit. */
int coord_quarantine_write(coord *co, const char *id, int on, mapstore_write *w);
/* The current map as JSON (cached per version). NULL on failure. */
const kbuf *coord_map_json(coord *co);
/* Places unowned partitions on UP nodes if the bootstrap wait is over. */
void coord_maybe_place(coord *co, int64_t now_ms);

/* coord_cmd.c */
int coord_dispatch(void *arg, client *c, int argc, char **argv, const size_t *argvlen);
void coord_conn_closed(void *arg, client *c);
void coord_render_metrics(void *arg, kbuf *out);
void coord_render_status(void *arg, kbuf *out); /* the STATUS JSON */

#endif
