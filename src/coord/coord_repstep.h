/* coord_repstep.h - the replica-move step table (issue 11 step 5, DESIGN.md
 * §12 "Moves become add-then-remove"): pure, no I/O, no clock of its own.
 *
 * A replica move (rmove) changes one partition's replica set or leader:
 *
 *   kind     add      remove   lead_to        what it does
 *   MOVE     B        A        B if A leads   add B, wait until B is in the
 *                                             ISR, move the leadership to B
 *                                             when A leads, remove A
 *   ADD      B        X or ""  -              add B, wait for the ISR, remove
 *                                             X (a DOWN replica it replaces)
 *   REMOVE   -        A        "" (any)       if A leads, transfer to an
 *                                             in-sync follower; remove A
 *   PROMOTE  -        -        T              transfer the leadership to T
 *
 * rmove_next() looks at the partition as the map store holds it now and says
 * what is due: every decision is re-derived from the map (B listed? in the
 * ISR? who leads, at which leader epoch?), so an executor that lost its
 * memory (a coordinator restart) can resume or abort from the map alone; the
 * only remembered facts are "B was seen in the list" (to tell a replica that
 * vanished from one not yet added) and the leader epoch at which the leader
 * answered OK to KEEL.REP.RESIGN (a transfer commits only after that, C5).
 *
 * Steps, as `keel moves` shows them:
 *
 *   adding --B listed--> catching up --B in ISR--> in sync
 *     in sync --A leads--> transferring leadership --B leads--> removing
 *     in sync --A follows--> removing --A gone--> done
 *   any step before removing --timeout, B lost, node gone--> aborted
 *
 * Redundancy never drops: a removal is due only when the replicas left are
 * at least rf and the ISR left has at least min(min_insync, rf) members, a
 * transfer only to a member of the ISR. An abort removes B again only if B
 * was added by this move and A is still listed.
 *
 * Threads: any (pure functions over their arguments).
 */
#ifndef KEEL_COORD_REPSTEP_H
#define KEEL_COORD_REPSTEP_H

#include <stdint.h>

#include "coord/mapstore.h"

typedef enum {
    RMOVE_MOVE = 0,
    RMOVE_ADD,
    RMOVE_REMOVE,
    RMOVE_PROMOTE,
} rmove_kind;

/* The steps; names in rmove_step_name. */
typedef enum {
    RSTEP_ADDING = 0,
    RSTEP_CATCHING_UP,
    RSTEP_IN_SYNC,
    RSTEP_TRANSFERRING,
    RSTEP_REMOVING,
    RSTEP_DONE,
    RSTEP_ABORTED,
} rmove_step;

typedef struct rmove {
    uint64_t id;
    unsigned partition;
    rmove_kind kind;
    char add[KEEL_ID_MAX + 1];       /* the replica to add, or "" */
    char remove[KEEL_ID_MAX + 1];    /* the replica to remove, or "" */
    char lead_to[KEEL_ID_MAX + 1];   /* the leader wanted, or "" = any in-sync follower
                                      * (only when remove leads) */
    unsigned rf;                     /* never fewer replicas than this after a removal */
    unsigned min_insync;             /* nor fewer ISR members than min(min_insync, rf) */
    int added;                       /* add was seen listed (by this move) */
    uint64_t resigned_le;            /* the leader answered OK to RESIGN at this leader
                                      * epoch; 0 = not (leader epochs start at 1) */
    char resign_to[KEEL_ID_MAX + 1]; /* the target of that RESIGN */
    int64_t started_ms;              /* rmove_next's now at creation: timeouts */
} rmove;

/* What is due now. */
typedef enum {
    RACT_WAIT = 0,     /* nothing to do until the map changes (why says what) */
    RACT_SET_REPLICAS, /* CAS the replica list to ids (expected_pe) */
    RACT_RESIGN,       /* KEEL.REP.RESIGN partition leader_epoch target to the leader */
    RACT_SET_LEADER,   /* CAS leader = target, the old leader kept in the ISR; target ==
                        * the leader: a re-election in a new leader epoch (a move that
                        * gives up after the leader's RESIGN OK, which fences it) */
    RACT_DONE,
    RACT_ABORT, /* give up (why); if nids > 0, first CAS the list to ids */
} rmove_act;

typedef struct rmove_action {
    rmove_act act;
    rmove_step step; /* the step the move is in, for `keel moves` */
    char ids[KEEL_RF_MAX][KEEL_ID_MAX + 1];
    unsigned nids;
    char leader[KEEL_ID_MAX + 1]; /* RESIGN: whom to send it to */
    char target[KEEL_ID_MAX + 1]; /* RESIGN, SET_LEADER */
    uint64_t expected_pe, leader_epoch;
    const char *why; /* WAIT, ABORT: a static phrase */
} rmove_action;

/* Is node id up (UP liveness, not REMOVED)? For picking transfer targets
 * and aborting moves to lost nodes. */
typedef int (*rmove_up_fn)(void *arg, const char *id);

/* The next action for mv on partition p (as the map store holds it), at
 * now_ms (any monotonic milliseconds, the same clock as mv->started_ms);
 * timeout_ms bounds the time before the removal (catching up, transfer).
 * Writes *out; never fails. A move whose partition is unowned, or whose
 * add/remove/lead_to is not a valid plan for p, is aborted with a reason. */
void rmove_next(const rmove *mv, const mapstore_partition *p, int64_t now_ms, int64_t timeout_ms,
                rmove_up_fn up, void *arg, rmove_action *out);

/* Checks a new move against p before it is started: 0, or KEEL_EINVAL /
 * KEEL_EEXIST with a reason in err (add already a replica, remove not a
 * replica, lead_to not in the ISR, the list full, ...). */
int rmove_check(const rmove *mv, const mapstore_partition *p, char *err, size_t cap);

/* Index of id in p's replicas, or -1. 1 if replicas[i] is in the ISR. */
int rmove_replica_index(const mapstore_partition *p, const char *id);
int rmove_in_isr(const mapstore_partition *p, const char *id);

/* "adding", "catching up", "in sync", "transferring leadership",
 * "removing", "done", "aborted"; "move", "add", "remove", "promote". */
const char *rmove_step_name(rmove_step s);
const char *rmove_kind_name(rmove_kind k);

#endif
