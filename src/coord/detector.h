/* detector.h - the coordinator's failure detector (DESIGN §7), a pure engine.
 *
 * It turns "when did I last hear from each node" into liveness verdicts:
 * UP -> SUSPECT after suspect_after_ms of silence, UP or SUSPECT -> DOWN
 * after dead_after_ms. (Back to UP is not its business: any heartbeat does
 * that at once.) Membership (ACTIVE, DRAINING) plays no part: a draining
 * node that dies is judged like any other. A REMOVED node is not judged.
 *
 * Two rules keep the detector from blaming others for its own silence:
 *
 *   1. Silence is measured on the caller's stall clock (core/stallclock.h),
 *      and counted only from `since`: the later of the coordinator's start
 *      and the end of its last stall. After a stall every node gets a full
 *      suspect period, as after a restart: what happened while the
 *      coordinator was not reading proves nothing (the heartbeats are still
 *      in its sockets, or the node's link gave up on it and is redialling).
 *   2. A failure-ratio brake: if, in one judgement, more than hold_ratio of
 *      the nodes that were not already DOWN would be SUSPECT or DOWN (and
 *      there are at least hold_min_nodes of them), nothing is declared and
 *      `held` is set. When most of the cluster looks dead at once, the
 *      observer is the likelier fault (Kvrocks' controller stops failing
 *      over above a failure ratio for the same reason).
 *
 * No I/O, no clock, no allocation; times are ms on the caller's clock.
 */
#ifndef KEEL_DETECTOR_H
#define KEEL_DETECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "coord/mapstore.h" /* mapstore_liveness */

typedef struct detector_policy {
    int64_t suspect_after_ms;
    int64_t dead_after_ms;
    double hold_ratio;     /* 0.5: hold when more than half look dead at once */
    size_t hold_min_nodes; /* 3: smaller clusters are never held */
} detector_policy;

typedef struct detector_node {
    mapstore_liveness liveness; /* now */
    int removed;                /* membership REMOVED: not judged, not counted */
    int64_t last_heard_ms;      /* last heartbeat or registration; 0 = never */
} detector_node;

typedef struct detector_result {
    size_t changed;    /* entries of `to` that differ from the input liveness */
    size_t looks_dead; /* nodes judged SUSPECT or DOWN, not counting those already DOWN */
    size_t judged;     /* nodes not removed and not already DOWN */
    int held;          /* the brake held back every change */
} detector_result;

/* Fills to[i] with the liveness node i should have at now_ms (its input
 * liveness when nothing changes or when held). since_ms: silence before it
 * does not count (coordinator start or end of its last stall). Returns the
 * counts in *res (may be NULL). nodes and to are arrays of n. */
void detector_judge(const detector_policy *p, int64_t now_ms, int64_t since_ms,
                    const detector_node *nodes, size_t n, mapstore_liveness *to,
                    detector_result *res);

#endif
