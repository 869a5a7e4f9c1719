/* rep_env.h - everything the replication engines reach outside themselves
 * (DESIGN.md §11, §12; docs/replication.md step 2).
 *
 * The leader (rep_leader.c) and the follower (rep_follower.c) touch time,
 * peers, the coordinator and the node's store only through this
 * environment, like the move engines through move_env.h. The replication
 * simulator (tests/sim/repsim.c) binds it to a simulated clock and network;
 * a production binding (step 3) binds it to libuv, peerlink and the
 * coordinator link. Nothing in the engines reads a global, a clock or a
 * socket of its own, so a simulated run repeats event for event.
 *
 * Timers: the engines have one, the binding's: it calls rep_tick every
 * REP_TICK_MS of its clock (rep_engine.h).
 *
 * Messages are argument vectors (binary-safe, with lengths), the KEEL.REP.*
 * peer commands of rep_engine.h. send is fire-and-forget: messages to one
 * peer arrive in order or not at all; after a loss the binding calls
 * rep_peer_down for that peer (the connection broke), and later messages
 * may flow again on a new connection.
 *
 * Threads: one; every callback runs on the thread that owns the engine.
 */
#ifndef KEEL_REP_ENV_H
#define KEEL_REP_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct rep_env {
    void *ctx; /* passed back to every function below */
    store *st;
    const char *self_id;
    unsigned partitions; /* the slot ranges: 16384 / partitions slots each */

    uint64_t (*now_us)(void *ctx); /* monotonic, this node's own clock */

    /* A KEEL.REP.* message to peer_id. 0, or -1 if it cannot even be queued
     * (then it is lost, as on a broken connection). The vectors are
     * borrowed for the call. Messages sent during a turn leave after the
     * turn's store_sync (group commit), as every reply does; a leader's
     * APPEND, STREAM, SNAP and DIVERGED may leave earlier, once the turn is
     * written (they claim nothing about the sender's durability), never a
     * follower's SUB or ACK. */
    int (*send)(void *ctx, const char *peer_id, int argc, const char **argv, const size_t *len);
    /* A KEEL.REP.ISR proposal to the coordinator (dropped when not
     * connected: the leader proposes again on a later tick). */
    void (*report)(void *ctx, int argc, const char **argv, const size_t *len);
    /* The leader's committed position of p advanced to pos: the replies of
     * every turn whose position is <= pos may leave (rep_committed). */
    void (*committed)(void *ctx, unsigned p, uint64_t pos);

    /* Observation hooks for the simulator's checks; NULL in production.
     * applied: this node now holds position pos of p, written in leader
     * epoch epoch, whose records hash to hash (FNV-1a of the batch bytes).
     * forget: this node's positions of p after pos are gone (truncated,
     * replaced by a copy at pos, or unknown after a restart); a copy calls
     * it with pos 0 and then base. base: after a full copy, the node holds
     * every position <= pos of its leader's history. */
    void (*applied)(void *ctx, unsigned p, uint64_t pos, uint64_t epoch, uint64_t hash);
    void (*forget)(void *ctx, unsigned p, uint64_t pos);
    void (*base)(void *ctx, unsigned p, uint64_t pos);
} rep_env;

/* Test-only protocol mutations (the simulator proves it can fail with
 * them; production never sets any). */
enum {
    REP_MUT_EARLY_REPLY = 1 << 0, /* the leader commits a turn before the ISR acknowledged it */
    REP_MUT_NO_TRUNCATE = 1 << 1, /* a diverged follower keeps its records past the epoch end */
    REP_MUT_NO_LEASE = 1 << 2,    /* the leader serves with no lease (or an expired one) */
    /* rep_restore takes a leader record's end at hi, a position its data may
     * lack (the rule before the power-loss fix: a follower that applied the
     * batch the crash took streams on past it) */
    REP_MUT_RESTORE_HI = 1 << 3,
    /* a follower writes its exact record {hi = the batch} by a write of its
     * own ahead of the batch, not with it (a power loss that keeps the one
     * and not the other leaves a log that claims a batch its data lacks) */
    REP_MUT_RECORD_APART = 1 << 4,
    /* a follower takes a batch's olds even when its data may not hold
     * exactly the previous position (the batch after a copy, which may
     * repeat records the copy holds; the first after a restart) */
    REP_MUT_OLDS_ALWAYS = 1 << 5
};

#endif
