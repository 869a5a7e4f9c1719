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
 *      the nodes that were not already DOWN look dead (would be SUSPECT or
 *      DOWN, or are already late: silent past late_after_ms), and there are
 *      at least hold_min_nodes of them, nothing is declared and `held` is
 *      set. Counting the late as well catches a collective silence whose
 *      heartbeats were staggered: the first node past the suspect timeout
 *      is not condemned while the others are about to be. When most of the cluster looks dead at
 * once, the observer is the likelier fault (Kvrocks' controller stops failing over above a failure
 * ratio for the same reason). When the brake lets go, that judgement declares nothing either
 * (`released` is set) and the caller counts silence afresh from then, as after a stall: the nodes
 * reconnecting one by one after an observer fault must not be condemned for the time the observer
 * could not hear them.
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
    int64_t late_after_ms; /* late enough to count for the brake; 0 = suspect_after_ms / 2.
                            * The coordinator uses max(1.5 heartbeats, suspect / 2). */
    double hold_ratio;     /* 0.5: hold when more than half look dead at once */
    size_t hold_min_nodes; /* 2: a single live node is never held */
} detector_policy;

typedef struct detector_node {
    mapstore_liveness liveness; /* now */
    int removed;                /* membership REMOVED: not judged, not counted */
    int64_t last_heard_ms;      /* last heartbeat or registration; 0 = never */
} detector_node;

typedef struct detector_result {
    size_t changed;    /* entries of `to` that differ from the input liveness */
    size_t looks_dead; /* judged SUSPECT or DOWN, or late; not counting those already DOWN */
    size_t judged;     /* nodes not removed and not already DOWN */
    int held;          /* the brake held back every change */
    int released;      /* the brake was held and is not now: nothing declared */
} detector_result;

/* Fills to[i] with the liveness node i should have at now_ms (its input
 * liveness when nothing changes, when held or when released). since_ms:
 * silence before it does not count (the latest of coordinator start, end of
 * its last stall, last release of the brake). was_held: the previous
 * judgement's `held`. Returns the counts in *res (may be NULL). nodes and
 * to are arrays of n. */
void detector_judge(const detector_policy *p, int64_t now_ms, int64_t since_ms, int was_held,
                    const detector_node *nodes, size_t n, mapstore_liveness *to,
                    detector_result *res);

#endif
