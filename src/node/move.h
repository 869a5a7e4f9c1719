/* move.h - a node's side of the partition move protocol (DESIGN.md §5, §6;
 * docs/moves.md has the whole flow).
 *
 * The coordinator drives every move with directives it pushes over an
 * authenticated connection to the node (KEEL.MOVE.OUT/IN/FENCE/VERIFY/
 * COMMIT/ABORT/CLEANUP/RATE/STATE, each carrying the coordinator's term). The
 * destination D pulls the data from the source S over its own authenticated
 * connection (KEEL.MOVE.CHUNK, then KEEL.MOVE.CHANGES) and reports progress
 * to the coordinator (KEEL.MOVE.REPORT on its coordinator link).
 *
 * Partition states (ptable) and, for the move states, this module's
 * records: every transition into OUTGOING, FENCED, INCOMING or RETIRED is
 * written durably to the store's metadata ("part/<p>") before the node acts
 * on it or acknowledges it. On restart (move_restore) INCOMING and FENCED
 * stay as they were - INCOMING answers -MOVED, FENCED holds - until the
 * coordinator says how the move ended; RETIRED keeps its data until the
 * coordinator's CLEANUP; an OUTGOING move cannot resume (its change capture
 * was in memory), so the partition serves and the coordinator aborts it.
 *
 * Holding: a request for a FENCED partition is held (rserver), at most
 * hold_max_ms and at most MOVE_HOLD_MAX requests; past either it gets
 * -TRYAGAIN. A held request is re-executed when the fence ends: served after
 * an abort, -MOVED after a commit.
 *
 * The engines (move.c, move_src.c, move_dst.c) are reached through
 * move_engine.h and see the world through move_env.h; this header is their
 * production binding (move_uv.c).
 *
 * Threads: the node's loop thread.
 */
#ifndef KEEL_MOVE_H
#define KEEL_MOVE_H

#include <stdint.h>

#include "core/peerauth.h"
#include "net/peerserve.h"
#include "node/holdq.h"
#include "node/move_engine.h"
#include "node/server.h"

#define MOVE_HOLD_MAX HOLDQ_MAX /* requests held at once, all partitions (node/holdq.h) */

/* Per-connection state of a node (client.user). */
typedef struct node_conn {
    peer_conn peer;
    client *c;
    int held;           /* 1 while on the held list */
    int tryagain;       /* the held request is to be answered -TRYAGAIN */
    unsigned held_p;    /* the partition it waits for */
    int64_t held_since; /* monotonic ms */
    int waits_verify;   /* a KEEL.MOVE.VERIFY waiting for the catch-up */
    int waits_data;     /* a KEEL.MOVE.CHUNK/CHANGES waiting for data or tokens */
    int readonly;       /* READONLY: reads of replicated partitions may be served here as
                         * a follower (node/rep_uv.h) */
    int rep_oneway;     /* KEEL.REP.ONEWAY: replication messages here get no reply */
    struct node_conn *hprev, *hnext;

    struct multi_state *multi; /* MULTI queue and watches (multi.c); NULL until used */
    struct block_state *block; /* blocked on keys (blocking.c); NULL until used */
} node_conn;

/* Creates the node's move state. secret: the cluster secret (copied). */
moves *moves_new(server *s, const peerauth_secret *secret, int hold_max_ms);
/* Stops every move in memory (their records stay) and frees. */
void moves_free(moves *mv);

/* The connection state of c, created on first use (NULL on out-of-memory). */
node_conn *node_conn_of(client *c);
/* rserver on_close: drops c from every wait list and frees its state. */
void move_conn_closed(moves *mv, client *c);

/* Executes a KEEL.* command (peer handshake, directives, the data path).
 * Returns 0 or RSERVER_HOLD (see rserver.h). */
int move_dispatch(moves *mv, client *c, int argc, char **argv, const size_t *len);

/* Routing of a key command for a FENCED partition p: returns RSERVER_HOLD
 * after queueing c, or 0 after replying -TRYAGAIN (hold_max passed, or the
 * queue is full). */
int move_hold(moves *mv, client *c, unsigned p);

/* For INFO and /metrics: the engine's counts and the held queue's. */
void move_get_stats(const moves *mv, move_stats *out);

#endif
