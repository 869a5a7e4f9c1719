/* coord_repmove.h - the coordinator's executor of replica moves at RF > 1
 * (issue 11 step 5; DESIGN.md §12 "Moves become add-then-remove",
 * "Leadership transfer", "Graceful stop"; docs/replication.md "Step 5 as
 * built").
 *
 * It drives the step table of coord_repstep.h: every tick (and at once after
 * each write or reply) it reads the partition from the map store, asks
 * rmove_next what is due and does it:
 *
 *   SET_REPLICAS  mapstore_partition_set_replicas (CAS on the partition
 *                 epoch): adds the new replica (which then follows the
 *                 leader and is copied by the replication engine's
 *                 snapshot) or removes the old one
 *   RESIGN        KEEL.REP.RESIGN <term> <p> <leader_epoch> <target> to the
 *                 leader over the coordinator's directive link (C5); the
 *                 leader answers *2 :end-position :leader_epoch once the
 *                 target acknowledged its end, and refuses p from then on
 *   SET_LEADER    mapstore_partition_set_leader(target, old leader kept in
 *                 the ISR): leader_epoch + 1, epoch + 1
 *
 * The ISR expansion that ends "catching up" is the leader's proposal
 * committed by coord_isr.c (repcoord); this executor only waits for it.
 *
 * Replica moves live in memory. A coordinator restart forgets them, and
 * what it leaves is re-derivable from the map: a partition with a replica
 * too many is finished or undone by the planner's repair (plan_repair.c:
 * an added replica not yet in the ISR is removed again, one in sync stays
 * and another goes), and a leader that answered OK to a RESIGN serves
 * again after its 5 s bound. RF 1 partitions never come here: their moves
 * stay coord_move.c's protocol, unchanged.
 *
 * Threads: the coordinator's loop thread.
 */
#ifndef KEEL_COORD_REPMOVE_H
#define KEEL_COORD_REPMOVE_H

#include <stddef.h>
#include <stdint.h>

#include "coord/coord_repstep.h"

typedef struct coord coord;
typedef struct cJSON cJSON;
struct plan_model;

/* Starts the executor's timer and links. Returns 0 or KEEL_ENOMEM. */
int coord_repmoves_start(coord *co);
/* Closes links and frees every move; callbacks in flight do nothing. */
void coord_repmoves_stop(coord *co);

/* After a leader change of p committed: asks every replica of p to
 * heartbeat at once (KEEL.REP.NUDGE), now or as soon as its link is ready,
 * so the new map and the new leader's lease arrive without waiting for the
 * heartbeat interval. Best effort. */
void coord_repmoves_nudge(coord *co, const mapstore_partition *p);

/* Starts a replica move of partition p: kind with add / remove / lead_to
 * as in coord_repstep.h (NULL or "" for none), reason for logs and views.
 * Checks: p in range, RF > 1 for p (replicas > 1 or the setting), no replica
 * move already under way for p, the nodes known and (add, lead_to) UP, and
 * rmove_check. Returns the new move's id (> 0) or a negative KEEL_E* with a
 * one-line reason in err. */
int64_t coord_repmove_create(coord *co, unsigned p, rmove_kind kind, const char *add,
                             const char *remove, const char *lead_to, const char *reason, char *err,
                             size_t cap);
/* `keel promote P NODE`: a PROMOTE move to `to`; on_end(co, id,
 * abort_reason or NULL, transfer_ms, arg) runs once when it ends, from a
 * later tick of the loop. Returns the id or a negative KEEL_E* (err says why;
 * on_end never runs). */
int64_t coord_repmove_promote(coord *co, unsigned p, const char *to,
                              void (*on_end)(coord *co, uint64_t id, const char *abort_reason,
                                             double transfer_ms, void *arg),
                              void *arg, char *err, size_t cap);
/* Cancels a replica move: aborted at once (the added replica taken out
 * again if the original ones are all there). KEEL_ENOTFOUND. */
int coord_repmove_cancel(coord *co, uint64_t id);

/* Moves under way (not done or aborted), and whether one is for p. */
size_t coord_repmoves_in_flight(coord *co);
int coord_repmoves_busy(coord *co, unsigned p);

/* Appends the moves under way and the most recent finished ones (up to
 * recent) to arr as JSON objects: {id, kind: "replica", type, partition,
 * from, to, lead_to, step, state, reason, abort_reason, age_s,
 * transfer_pause_ms}. */
void coord_repmoves_json(coord *co, cJSON *arr, size_t recent);
struct plan_result;
/* Starts what a planner round r (on model m) asks of RF > 1 partitions:
 * each move of a replicated partition as a MOVE (the leadership follows a
 * moved leader replica), each repair as an ADD (removing the DOWN replica
 * it replaces) or a REMOVE, each leadership transfer as a PROMOTE. Refusals
 * are logged. Returns how many started. */
size_t coord_repmoves_enqueue(coord *co, const struct plan_model *m, const struct plan_result *r);
/* Marks partitions with a replica move under way as in flight in m. */
void coord_repmoves_annotate(coord *co, struct plan_model *m);

/* Graceful stop of a node (KEEL.REP.HANDOFF): promotes, for each RF > 1
 * partition it leads, the in-sync follower that is up and leads least.
 * done(co, moved, left, arg) runs once, when every such transfer ended or
 * after timeout_ms (moved: transfers done; left: partitions it still
 * leads), always from a later tick of the loop. Returns 0 (done will run)
 * or KEEL_ENOMEM / KEEL_EINVAL (the executor is not running, or the map
 * store could not be read); done never runs then. */
typedef void (*coord_handoff_done)(coord *co, unsigned moved, unsigned left, void *arg);
/* done NULL: the hand-off is polled instead (coord_repmove_handoff_status). */
int coord_repmove_handoff(coord *co, const char *node, int64_t timeout_ms, coord_handoff_done done,
                          void *arg);
/* KEEL.REP.HANDOFF START / STATUS (a node that keeps heartbeating while it
 * hands off): start starts a polled hand-off of node's leaderships, unless
 * one is under way (then nothing: 0); an ended one's result not yet
 * fetched is dropped. Returns 0 or as coord_repmove_handoff. status: 1
 * under way; 0 ended, with *moved and *left (as done's), and forgotten; -1
 * none (never started, fetched already, or kept past 60 s). */
int coord_repmove_handoff_start(coord *co, const char *node, int64_t timeout_ms);
int coord_repmove_handoff_status(coord *co, const char *node, unsigned *moved, unsigned *left);

/* Counters for STATUS and metrics. */
typedef struct coord_repmove_counts {
    uint64_t started, done, aborted, transfers;
    double last_transfer_ms, max_transfer_ms; /* RESIGN sent -> leader change committed */
    /* KEEL.REP.RESIGN requests sent, and the partitions they carried (a
     * hand-off sends up to 32 partitions of one leader per request) */
    uint64_t resign_requests, resign_partitions;
} coord_repmove_counts;
void coord_repmoves_counts(coord *co, coord_repmove_counts *out);

/* The commands (coord_repcmd.c): PROMOTE <p> <node> [JSON] (admin) and
 * KEEL.REP.HANDOFF (a node, at SIGTERM). */
struct cctx;
void coord_c_promote(struct cctx *x);
void coord_c_keel_rep_handoff(struct cctx *x, const char *id);

#endif
