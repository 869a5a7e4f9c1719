/* sim.h - `keel sim`: scenario files and the round-by-round simulator.
 * Private to src/cli (sim.c, sim_scenario.c, sim_run.c). The file format and
 * the output columns are documented in docs/simulator.md.
 *
 * Two layers, like the planner itself:
 *   sim_scenario_parse  text in, scenario out. No I/O: the caller reads the
 *                       file and passes its bytes and its name (for
 *                       "file:line: message" errors).
 *   sim_run             drives the planner (src/planner/planner.h) round by
 *                       round over a simulated cluster and hands each round's
 *                       figures to a callback. No I/O and no clock either:
 *                       simulated time advances by round_s per round, and all
 *                       randomness comes from one seeded generator, so a run
 *                       is a pure function of (scenario, seed).
 */
#ifndef KEEL_CLI_SIM_H
#define KEEL_CLI_SIM_H

#include "planner/planner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_SEL_MAX 16          /* ranges in one partition selector */
#define SIM_ROUNDS_MAX 1000000  /* longest run */
#define SIM_NODES_MAX 10000     /* nodes, including those added by events */
#define SIM_PARTS_MAX 10000000  /* partitions */
#define SIM_LINE_MAX 4096       /* longest scenario line, in bytes */
#define SIM_EVENT_TEXT_MAX 96   /* "add-node:n5" as printed in a row */
#define SIM_ROW_EVENTS_TEXT 512 /* all events of one round, ';'-joined */

/* Partition selector: "all", or up to SIM_SEL_MAX inclusive id ranges. */
typedef struct sim_range {
    uint64_t lo, hi;
} sim_range;

typedef struct sim_sel {
    bool all;
    uint8_t n;
    sim_range r[SIM_SEL_MAX];
} sim_sel;

typedef enum {
    SIM_EV_ADD_NODE = 0, /* a new, empty, up node joins */
    SIM_EV_REMOVE_NODE,  /* decommission: drain, then REMOVED once empty */
    SIM_EV_DRAIN,        /* state draining (stays a member) */
    SIM_EV_UNDRAIN,      /* back to up */
    SIM_EV_FAIL_NODE,    /* state down: frozen; moves to or from it abort */
    SIM_EV_RECOVER_NODE, /* back to up */
    SIM_EV_SET_CAPACITY, /* value = new capacity */
    SIM_EV_STALE,        /* the node's metrics are stale for this round */
    SIM_EV_SET_LOAD,     /* true load of the selected partitions = value */
    SIM_EV_SET_BYTES,    /* true bytes of the selected partitions = value */
    SIM_EV_SET,          /* planner setting `setting` = value */
} sim_ev_kind;

typedef struct sim_event {
    uint32_t round; /* 1-based */
    int line;       /* in the scenario file, for messages */
    sim_ev_kind kind;
    plan_node node; /* add-node: the new node; other node events: node.id */
    sim_sel sel;    /* set-load, set-bytes */
    double value;
    int setting; /* SIM_EV_SET: index in the settings table (sim_setting_*) */
} sim_event;

typedef struct sim_scenario {
    plan_model model;    /* the cluster at round 1 (true bytes and loads), settings */
    uint32_t rounds;     /* default 40 */
    uint64_t seed;       /* noise seed; default 1 */
    double round_s;      /* simulated seconds per round (rebalance_interval); 10 */
    double rate;         /* bytes/s of one move; 0 = moves complete instantly */
    uint32_t max_in;     /* concurrent moves into one node; 0 = unlimited; 2 */
    uint32_t max_out;    /* concurrent moves out of one node; 0 = unlimited; 2 */
    int64_t max_cluster; /* concurrent moves in the cluster; 0 = unlimited;
                          * -1 (default) = max(1, up nodes / 2) */
    double noise_load;   /* relative per-partition load noise, in [0, 1) */
    double noise_node;   /* relative per-node load factor noise, in [0, 1) */
    double noise_bytes;  /* relative per-partition bytes noise, in [0, 1) */
    sim_event *events;   /* [nevents], owned, sorted by (round, line) */
    size_t nevents, events_cap;
} sim_scenario;

/* Empty scenario with the defaults above and default planner settings. */
void sim_scenario_init(sim_scenario *sc);
/* Frees everything and re-initialises. Safe on an initialised scenario. */
void sim_scenario_close(sim_scenario *sc);

/* Parses scenario text (len bytes, NUL not required) into sc, which must be
 * freshly initialised. name is used only in messages. Returns 0, or
 * KEEL_EINVAL with "name:line: message" in err (cap bytes), or KEEL_ENOMEM.
 * On error sc may hold part of the scenario: close it. */
int sim_scenario_parse(sim_scenario *sc, const char *name, const char *text, size_t len, char *err,
                       size_t cap);

/* Planner settings by the names scenario files and --set use ("stop_ratio",
 * "max_moves", ...). Returns the table index or -1. */
int sim_setting_find(const char *name);
/* Sets setting idx of s to v. Returns 0 or KEEL_EINVAL (v not allowed for
 * that setting, e.g. a non-integer max_moves). The settings as a whole are
 * checked by plan_model_check. */
int sim_setting_set(plan_settings *s, int idx, double v);
/* The name of setting idx, or "unknown". Never NULL. */
const char *sim_setting_name(int idx);
/* The scenario word of an event kind ("add-node"), or "unknown". */
const char *sim_event_name(sim_ev_kind kind);
/* Every setting name, space-separated, for messages. */
const char *sim_setting_names(void);

/* Parses a number with an optional decimal suffix (k, M, G, T: powers of
 * 1000) or binary one (Ki, Mi, Gi, Ti). Rejects NaN, infinities and
 * trailing text. Returns 0 or KEEL_EINVAL. */
int sim_parse_num(const char *s, double *out);

/* ---- Running -------------------------------------------------------------- */

/* One round, as sim_run reports it. The state is taken at the end of the
 * round (time_s), after the moves that finished during it. Ratios and the
 * floor use true (noise-free) bytes and loads and the planner's weight
 * w(p) = bytes/total_bytes + load_weight * load/total_load. */
typedef struct sim_row {
    uint32_t round;
    double time_s;
    double max_over_mean, min_over_mean; /* over up nodes of capacity > 0 */
    size_t moves;                        /* planned this round */
    double bytes_moved;                  /* bytes of those moves */
    double bytes_transferred;            /* bytes copied during the round */
    size_t in_flight;                    /* planned moves not yet finished */
    double cum_bytes_moved;              /* bytes_moved summed over rounds */
    double floor;                        /* cumulative movement floor, weight units */
    double cum_moved_over_floor;         /* cumulative moved weight / floor */
    bool episode_open;                   /* planner episode after this round */
    size_t why[PLAN_WHY_DISK_FLOOD + 1]; /* moves this round by plan_why */
    const char *events;                  /* this round's events: "add-node:n5;..." */
    const plan_model *model;             /* as the planner saw it (noisy); borrowed */
    const plan_result *plan;             /* this round's plan; borrowed */
} sim_row;

/* Called once per round; a non-zero return stops the run and is returned by
 * sim_run. row and everything it points to are valid only during the call. */
typedef int (*sim_row_fn)(const sim_row *row, void *arg);

/* Runs sc (borrowed, not modified) for sc->rounds rounds with noise seed
 * sc->seed. Returns 0, the callback's non-zero value, KEEL_ENOMEM, or a
 * planner error (KEEL_EINVAL...) with a message in err. */
int sim_run(const sim_scenario *sc, sim_row_fn fn, void *arg, char *err, size_t cap);

#endif
