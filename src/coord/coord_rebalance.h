/* coord_rebalance.h - the rebalancing control loop (DESIGN.md §7).
 *
 * Every rebalance_interval_s the coordinator runs the planner on the nodes'
 * latest metrics and hands the moves it proposes to the move executor
 * (coord_move.h), which starts them within the concurrency limits. A round
 * is skipped, and the reason counted, when:
 *   paused          the kill switch is set (moves in flight still finish);
 *   moves-in-flight a move has not finished: the loop never corrects the
 *                   same imbalance twice;
 *   settling        a move ended less than two heartbeats ago, so the
 *                   metrics do not show it yet;
 *   stale-metrics   some live node's metrics are older than three heartbeats,
 *                   or a node is SUSPECT (the loop never acts on missing data);
 *   no-nodes        no node is UP;
 *   latency         a node reports a foreground p99 above
 *                   latency_objective_ms, and no node is draining or above
 *                   its high disk watermark (those cannot wait).
 * A round that runs may still propose nothing (balanced, inside the dead
 * band, min_residence...): `keel plan` shows why.
 *
 * Threads: the coordinator's loop thread.
 */
#ifndef KEEL_COORD_REBALANCE_H
#define KEEL_COORD_REBALANCE_H

#include <stdint.h>

#include "planner/planner.h"

typedef struct coord coord;

#define REBALANCE_SKIP_MAP(X)                                                                      \
    X(PAUSED, "paused")                                                                            \
    X(IN_FLIGHT, "moves-in-flight")                                                                \
    X(SETTLING, "settling")                                                                        \
    X(STALE, "stale-metrics")                                                                      \
    X(NO_NODES, "no-nodes")                                                                        \
    X(LATENCY, "latency")                                                                          \
    X(ERROR, "error")

typedef enum {
#define REBALANCE_SKIP_ENUM(name, str) REBALANCE_SKIP_##name,
    REBALANCE_SKIP_MAP(REBALANCE_SKIP_ENUM)
#undef REBALANCE_SKIP_ENUM
        REBALANCE_SKIP_COUNT
} rebalance_skip;

typedef struct rebalance_stats {
    uint64_t rounds_total; /* rounds that ran the planner */
    uint64_t moves_total;  /* moves those rounds enqueued */
    uint64_t skipped[REBALANCE_SKIP_COUNT];
    double imbalance; /* max/mean at the last round that ran; 0 before */
    int64_t last_round_ms;
    char last_stop[128]; /* why the last round stopped, as the planner said */
} rebalance_stats;

/* Starts the loop's timer (the interval is re-read every round). */
int coord_rebalance_start(coord *co);
void coord_rebalance_stop(coord *co);
const rebalance_stats *coord_rebalance_stats(const coord *co);
const char *rebalance_skip_name(rebalance_skip s);
struct plan_episode;
/* The hysteresis state the next round starts from (for the dry run). */
struct plan_episode coord_rebalance_episode(const coord *co);

#endif
