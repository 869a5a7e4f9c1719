/* planner.h - the rebalance planner (DESIGN.md §8): a cluster model in, moves
 * with reasons out.
 *
 * A pure library. It does no I/O, reads no clock and keeps no global state:
 * every call depends only on its arguments, so the coordinator, `keel plan`,
 * `keel sim` and the tests all run the same code on the same inputs and get
 * the same plan, bit for bit.
 *
 * Typical round (the coordinator and the simulator both do this):
 *
 *     plan_model m;                    // plan_model_init, add nodes, parts
 *     plan_result r;
 *     if ((rc = plan_run(&m, &r)))     // r.error says why (bad model)
 *         ...
 *     for (size_t i = 0; i < r.nmoves; i++) ... r.moves[i] ...
 *     plan_apply(&m, &r);              // or execute the moves for real
 *     plan_result_close(&r);
 *
 * The model is a plain struct of arrays the caller owns and may edit in place
 * between rounds (change loads, owners, states). Nodes and partitions refer
 * to each other by index into m->nodes / m->parts; ids are for people.
 *
 * Units. Weight is dimensionless: w(p) = bytes(p)/total_bytes +
 * load_weight * load(p)/total_load, summed over all replicas of all
 * partitions, so the whole cluster weighs 1 + load_weight. A quantity that is
 * zero everywhere falls back to counting replicas. Utilisation is
 * u(n) = sum of w on n / capacity(n); every ratio this API reports is
 * u(n) / mean, where mean = (weight on live nodes) / (capacity of live nodes).
 *
 * Replicated partitions (nreplicas > 1, or any partition when
 * settings.replicas > 1) weigh their bytes term only, on every replica: their
 * request load is served by the leader alone and is balanced by leadership
 * transfers (plan_result.leads, no data copied), not by moving data. RF 1
 * partitions weigh as above. A round with repairs (RF restoration,
 * plan_result.repairs) plans nothing else: redundancy first, balance after.
 *
 * Threads: none of these functions touch shared state. Distinct models may be
 * planned on distinct threads; one model must not be mutated while planned.
 */
#ifndef KEEL_PLANNER_H
#define KEEL_PLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLAN_ID_MAX 64       /* longest node id or rack name, in bytes */
#define PLAN_MAX_REPLICAS 7  /* replicas per partition (the map allows 1..7) */
#define PLAN_MAX_STOPS 16    /* reasons_for_stopping kept per plan */
#define PLAN_STOP_KEY_MAX 96 /* "stale-metrics:<node id>" fits */
#define PLAN_STOP_TEXT_MAX 200
#define PLAN_NUM_MAX 1e21     /* bytes, load, disk, ages: larger is refused */
#define PLAN_CAPACITY_MAX 1e9 /* relative capacity */

/* ---- Model ---------------------------------------------------------------- */

/* A node's liveness. Draining (membership intent) is the separate field
 * plan_node.draining; PLAN_NODE_DRAINING is kept as shorthand for "up and
 * draining" (JSON "state": "draining"). A draining node that is SUSPECT or
 * DOWN is frozen like any other dead node. */
typedef enum {
    PLAN_NODE_UP = 0,   /* serving; eligible as a destination */
    PLAN_NODE_SUSPECT,  /* missed heartbeats: frozen (neither source nor destination) */
    PLAN_NODE_DOWN,     /* past node_dead_after: frozen */
    PLAN_NODE_DRAINING, /* up and being emptied: the same as UP with draining set */
} plan_node_state;

typedef struct plan_node {
    char id[PLAN_ID_MAX + 1];   /* unique, non-empty */
    char rack[PLAN_ID_MAX + 1]; /* "" = a rack of its own */
    double capacity;            /* relative, >= 0; 0 = draining. Default 1 */
    plan_node_state state;
    bool draining;        /* membership DRAINING: source only while up. capacity 0 is the same */
    double disk_used;     /* bytes, >= 0 */
    double disk_capacity; /* bytes, >= 0; 0 = unknown: watermarks do not apply */
    double metrics_age_s; /* age of the node's last metrics, >= 0 */
} plan_node;

typedef struct plan_part {
    uint64_t id;                         /* unique */
    int32_t replicas[PLAN_MAX_REPLICAS]; /* node indexes, owner first */
    uint8_t nreplicas;                   /* 0 = orphaned: see plan_place() */
    bool pinned;                         /* never moved */
    bool in_flight;                      /* a move is under way: not movable */
    int32_t moving_to;                   /* in-flight destination of replica 0, or -1.
                                          * When set, the partition's weight counts on
                                          * that node (so a round planned while moves
                                          * run does not correct twice); implies
                                          * in_flight. */
    double bytes;                        /* >= 0 */
    double load;                         /* smoothed ops/s, >= 0 */
    double since_last_move_s;            /* >= 0; a never-moved partition: a large number */
    uint8_t lagging;                     /* bit r set: replicas[r] is out of the ISR. A
                                          * leadership transfer only goes to a replica
                                          * in sync. 0 (all in sync) by default */
} plan_part;

typedef struct plan_settings {
    double load_weight;       /* weight of the load term; default 0.5 */
    double start_ratio;       /* episode starts above (or below 1/x); default 1.25 */
    double stop_ratio;        /* episode ends inside [1/x, x]; default 1.10 */
    uint32_t max_moves;       /* max_moves_per_round; default 16; 0 = no limit */
    double min_gain;          /* a move must reduce the sum of squared distances
                               * from target by more than min_gain * (mean node
                               * target)^2. Default 0: any improvement */
    double min_residence_s;   /* default 600 */
    double disk_low;          /* fraction of disk: no moves in above it; 0.85 */
    double disk_high;         /* above it the node sheds; 0.90 */
    double disk_flood;        /* above it the node sheds before anything else; 0.95 */
    double max_metrics_age_s; /* older metrics on a live node: no plan; default 3 */
    uint8_t replicas;         /* target RF: partitions with fewer live replicas get more,
                               * with more lose some (plan_repair below). 0 (default)
                               * = no repair: every partition keeps its count */
} plan_settings;

/* Hysteresis carried from one round to the next: plan_run reads it from the
 * model and returns the next value in plan_result.episode. */
typedef struct plan_episode {
    bool active;      /* a rebalance episode is open */
    uint32_t rounds;  /* rounds the open episode has run (0 when closed) */
    bool lead_active; /* a leader-load episode (leadership transfers) is open */
} plan_episode;

typedef struct plan_model {
    plan_node *nodes; /* [nnodes], owned; index = node number */
    size_t nnodes, nodes_cap;
    plan_part *parts; /* [nparts], owned */
    size_t nparts, parts_cap;
    plan_settings settings;
    plan_episode episode; /* the previous round's state */
} plan_model;

/* Fills s with the defaults listed above. */
void plan_settings_default(plan_settings *s);
/* A node with the given id (truncated to PLAN_ID_MAX) and every other field at
 * its default: capacity 1, state up, no rack, no disk figures, fresh metrics. */
void plan_node_default(plan_node *n, const char *id);
/* A partition with the given id, no replicas, nothing pinned or in flight,
 * moving_to -1 and since_last_move_s = 1e9 (never moved). */
void plan_part_default(plan_part *p, uint64_t id);

/* Empty model with default settings and a closed episode. Never fails. */
void plan_model_init(plan_model *m);
/* Frees the arrays and resets m to empty. Safe on a zeroed model. */
void plan_model_close(plan_model *m);

/* Appends a copy of *n. Returns the new node's index (>= 0), or KEEL_EINVAL
 * (empty id, negative/non-finite/too large number, unknown state), KEEL_EEXIST (id
 * already present) or KEEL_ENOMEM. The model is unchanged on error. */
int plan_model_add_node(plan_model *m, const plan_node *n);
/* Appends a copy of *p. Returns 0, KEEL_EINVAL (negative/non-finite/too large number,
 * nreplicas > PLAN_MAX_REPLICAS, a node twice in replicas), KEEL_ENOTFOUND (a
 * replica or moving_to that is not a node index) or KEEL_ENOMEM. Duplicate
 * partition ids are found by plan_model_check, not here (that needs a hash
 * over all ids). */
int plan_model_add_part(plan_model *m, const plan_part *p);
/* Reserves room for n more partitions. Returns 0 or KEEL_ENOMEM. */
int plan_model_reserve_parts(plan_model *m, size_t n);
/* Index of the node with this id, or -1. O(nodes). */
int plan_model_find_node(const plan_model *m, const char *id);

/* Validates the whole model, including direct edits made to its arrays: every
 * field's range, node and partition ids unique, replica indexes valid and
 * distinct, settings consistent (1 <= stop_ratio <= start_ratio,
 * 0 < disk_low <= disk_high <= disk_flood <= 1, ...). Returns 0, or
 * KEEL_EINVAL / KEEL_EEXIST / KEEL_ENOTFOUND with a message naming the field
 * ("partitions[3].replicas[0]: no node 7") in err (cap bytes, may be NULL/0), or
 * KEEL_ENOMEM. */
int plan_model_check(const plan_model *m, char *err, size_t cap);

/* ---- Plan ----------------------------------------------------------------- */

/* Why a move was made, from the source's point of view first. */
typedef enum {
    PLAN_WHY_IMBALANCE = 0, /* source above target, destination below */
    PLAN_WHY_NEW_NODE,      /* destination was empty at the start of the round */
    PLAN_WHY_DRAIN,         /* source is draining */
    PLAN_WHY_DISK_HIGH,     /* source above its high disk watermark */
    PLAN_WHY_DISK_FLOOD,    /* source above its flood disk watermark */
} plan_why;

typedef struct plan_move {
    size_t part;      /* index into m->parts */
    uint64_t part_id; /* m->parts[part].id, for convenience */
    uint8_t replica;  /* which slot of replicas[] moves (0 = the owner) */
    int32_t from, to; /* node indexes */
    plan_why why;
    double bytes, load; /* the partition's, copied from the model */
    double weight;      /* w(p) as defined above */
    double gain;        /* reduction of the sum over both nodes of
                         * (weight - target)^2, divided by (mean node target)^2 */
    /* u/mean of source and destination, before and after this move, in plan
     * order (each move sees the ones before it). INFINITY for a node of
     * capacity 0 that still holds weight. */
    double src_util_before, src_util_after;
    double dst_util_before, dst_util_after;
    bool overshoot; /* the partition was bigger than both the source's excess
                     * and the destination's deficit: taken only because no
                     * partition fitted (granularity), see docs/planner.md */
} plan_move;

/* RF restoration (settings.replicas > 0). ADD puts a new replica of part on
 * node; when replace >= 0 it stands in for the replica on that DOWN node,
 * which the executor removes once the new one is in sync (add, then remove:
 * redundancy never drops). REMOVE drops the replica on node (a DOWN node's
 * first, then the follower on the fullest node; never the leader). */
typedef enum { PLAN_REPAIR_ADD = 0, PLAN_REPAIR_REMOVE } plan_repair_kind;

typedef struct plan_repair {
    size_t part;      /* index into m->parts */
    uint64_t part_id; /* m->parts[part].id */
    plan_repair_kind kind;
    int32_t node;    /* node index: where the replica is added / removed */
    int32_t replace; /* ADD: node index of the DOWN replica it replaces, or -1 */
    uint8_t live;    /* live replicas (not on DOWN nodes) before this repair */
    double bytes;    /* the partition's bytes (copied for an ADD) */
} plan_repair;

/* A leadership transfer: replicas[replica] (node to, in sync) becomes the
 * leader of part instead of replicas[0] (node from). No data moves. */
typedef struct plan_lead {
    size_t part;
    uint64_t part_id;
    uint8_t replica; /* slot of the new leader in replicas[] */
    int32_t from, to;
    double load;                             /* the partition's load */
    double from_fill_before, to_fill_before; /* leader load / its target */
    double from_fill_after, to_fill_after;
} plan_lead;

typedef enum {
    PLAN_STOP_NO_TRIGGER = 0,   /* "no-trigger": no episode, nothing to do */
    PLAN_STOP_BALANCED,         /* "balanced": inside the dead band, episode over */
    PLAN_STOP_BUDGET,           /* "budget": max_moves reached */
    PLAN_STOP_NO_GAIN,          /* "no-gain": no allowed move gains > min_gain */
    PLAN_STOP_NO_DESTINATION,   /* "no-destination": nothing eligible below target */
    PLAN_STOP_STALE_METRICS,    /* "stale-metrics:<node>": plan is empty */
    PLAN_STOP_TOO_LARGE,        /* "partition-too-large:<id>": bigger than any node's share */
    PLAN_STOP_STUCK,            /* "stuck:<node>": above target, nothing on it may move */
    PLAN_STOP_DRAIN_BLOCKED,    /* "drain-blocked:<node>": partitions left that may not move */
    PLAN_STOP_NO_CAPACITY,      /* "no-capacity": no live node with capacity > 0 */
    PLAN_STOP_REPAIRING,        /* "repairing": RF restoration planned; no balancing this round */
    PLAN_STOP_UNDER_REPLICATED, /* "under-replicated:<id>": no node may take a replica */
    PLAN_STOP_LEADERS_BALANCED, /* "leaders-balanced": leader load inside the dead band */
} plan_stop_code;

typedef struct plan_stop {
    plan_stop_code code;
    char key[PLAN_STOP_KEY_MAX];   /* stable, machine-readable: "stale-metrics:n3" */
    char text[PLAN_STOP_TEXT_MAX]; /* one sentence for people */
} plan_stop;

typedef struct plan_result {
    plan_move *moves; /* [nmoves], owned; in the order they should run */
    size_t nmoves;
    /* Movement floor (DESIGN §8): sum over nodes of max(0, weight - target),
     * in weight units, measured before the plan. moved = sum of moved
     * weights; efficiency = moved / floor (0 when floor is 0). The _bytes
     * variants measure bytes alone: bytes moved, and the bytes floor. */
    double floor, moved, efficiency;
    double floor_bytes, moved_bytes;
    /* Max u/mean and min u/mean over live nodes of capacity > 0, before the
     * plan and after applying it (1.0 = perfectly even). */
    double imbalance_before, imbalance_after;
    double min_ratio_before, min_ratio_after;
    double *util_before, *util_after; /* [nnodes] u/mean, owned; NAN for frozen
                                       * nodes, INFINITY for capacity 0 holding weight */
    size_t nnodes;
    plan_repair *repairs; /* [nrepairs], owned: RF restoration, most urgent first */
    size_t nrepairs;
    plan_lead *leads; /* [nleads], owned: leadership transfers, planned only in a
                       * round without moves or repairs */
    size_t nleads;
    /* Leader load (replicated partitions) max and min over target among
     * nodes that may lead, before and after the transfers; 1.0 when none. */
    double lead_imbalance_before, lead_imbalance_after;
    plan_episode episode; /* pass to the next round (plan_apply copies it) */
    plan_stop stops[PLAN_MAX_STOPS];
    size_t nstops;
    char error[256]; /* set when plan_run fails on a bad model */
} plan_result;

/* Plans one round for m. out is overwritten (any previous content is NOT
 * freed: close it first). m is borrowed for the call and not modified.
 *
 * Returns 0 with the plan in *out (possibly no moves: see out->stops), or
 * KEEL_EINVAL / KEEL_EEXIST / KEEL_ENOTFOUND for a model that fails
 * plan_model_check (out->error names the field, out has no moves), or
 * KEEL_ENOMEM. On every return out may be passed to plan_result_close.
 *
 * Cost: O(P + N log N + M (log N + log P)) for P partitions, N nodes and M
 * moves, plus sorting the partitions of each node that sheds. */
int plan_run(const plan_model *m, plan_result *out);
/* Frees out's arrays and zeroes it. Safe on a zeroed result. */
void plan_result_close(plan_result *r);

/* Applies r's moves, repairs and leadership transfers to m as if they had
 * completed at once: each moved replica changes node, since_last_move_s
 * becomes 0; an ADD appends its replica (in the replaced DOWN replica's slot
 * when replace >= 0), a REMOVE deletes its slot keeping the leader first; a
 * transfer swaps replicas[0] with the new leader's slot. m->episode becomes
 * r->episode. r must come from plan_run on this model, unchanged since.
 * Returns 0 or KEEL_EINVAL (an action that does not match m; m unchanged). */
int plan_apply(plan_model *m, const plan_result *r);

/* Places every orphaned partition (nreplicas == 0) of m: in decreasing weight
 * order, each goes to the eligible node (up, capacity > 0, below its low disk
 * watermark) of least utilisation, counting what was placed before it. Writes
 * replicas[0] and nreplicas = 1. *placed and *unplaced (may be NULL) count the
 * partitions placed and those left orphaned because no node is eligible.
 * Returns 0, a plan_model_check error, or KEEL_ENOMEM. Used at bootstrap. */
int plan_place(plan_model *m, size_t *placed, size_t *unplaced);

/* ---- Names and text ------------------------------------------------------- */

/* "up", "suspect", "down", "draining". Never NULL. */
const char *plan_node_state_name(plan_node_state s);
/* Parses one of those names. Returns 0 or KEEL_EINVAL. */
int plan_node_state_parse(const char *s, plan_node_state *out);
/* "imbalance", "new-node", "drain", "disk-high", "disk-flood". Never NULL. */
const char *plan_why_name(plan_why w);
/* One line for people: "drain: n3 inf -> inf, n5 0.81 -> 0.83, 12.0 MB,
 * load 40.0/s, gain 0.0021". Returns the length it wanted (snprintf-like). */
int plan_move_describe(const plan_model *m, const plan_move *mv, char *buf, size_t cap);

/* ---- JSON (plan_json.c) --------------------------------------------------- */

/* Parses the JSON model format of docs/planner.md into m (initialised here;
 * close it even on error). Any field left out takes its default. Returns 0,
 * or KEEL_EINVAL (not JSON, wrong type, bad value, unknown node, duplicate
 * id...) with a message naming the field in err, or KEEL_ENOMEM. The parsed
 * model also passes plan_model_check. */
int plan_model_from_json(const char *text, plan_model *m, char *err, size_t cap);
/* The model as JSON in the same format (all fields written). Returns a
 * malloc'd NUL-terminated string the caller frees, or NULL on out-of-memory. */
char *plan_model_to_json(const plan_model *m);
/* The plan as one JSON object: moves [{partition, from, to, replica, reason:
 * {why, text, src_util_before, ...}}], floor, moved, efficiency,
 * imbalance_before, imbalance_after, reasons_for_stopping [keys],
 * stop_details [{key, text}], episode, nodes [{id, util_before, util_after}].
 * Infinite or undefined ratios are written as null. Returns a malloc'd string
 * (caller frees) or NULL on out-of-memory. pretty != 0 indents it. */
char *plan_result_to_json(const plan_model *m, const plan_result *r, int pretty);

#endif
