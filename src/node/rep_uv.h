/* rep_uv.h - the production binding of the replication engines
 * (rep_engine.h over rep_env.h; docs/replication.md "Step 3 as built").
 *
 * One node_rep per node process in a coordinated cluster. It owns the
 * engine and gives it what the simulator (tests/sim/repsim.c) gives it:
 *
 *   time      keel_mono_us; rep_tick every REP_TICK_MS on a libuv timer
 *   peers     one outgoing peerlink per peer (KEEL.AUTH, as the move data
 *             path), opened on the first message; messages queue while it
 *             connects and leave in order. A link that goes down drops its
 *             queue and calls rep_peer_down; so does the close of a peer's
 *             incoming connection, and a message on a newer incoming
 *             connection than the last one (messages may have been lost),
 *             while messages on an older one are ignored. So "in order or
 *             not at all, and a loss is told" holds on both sides.
 *   group     every message the engine sends is queued and leaves only
 *   commit    after the turn's store_sync (node_rep_seal, or the tick after
 *             its own store_sync): a follower's ACK never precedes the
 *             durability of what it acknowledges.
 *   coord     env->report -> KEEL.REP.ISR over the coordinator link.
 *   replies   a turn that wrote to an RF > 1 partition it leads is sealed
 *             (rserver ops.seal_turn) until rep_committed reaches the
 *             turn's position in every such partition; rserver_release
 *             then lets the replies go, in turn order. Sealed turns that
 *             can never commit (no longer leader in that epoch, or the
 *             lease lost for longer than two leases) are dropped with
 *             rserver_drop_sealed: their clients are disconnected, no reply
 *             claims success.
 *
 * RF 1 partitions (contract C1) never reach the engine: no check, no seal.
 *
 * Threads: the node's loop thread.
 */
#ifndef KEEL_REP_UV_H
#define KEEL_REP_UV_H

#include <stddef.h>
#include <stdint.h>

#include "core/mapcodec.h"
#include "core/peerauth.h"
#include "node/rep_engine.h"

typedef struct server server;
typedef struct client client;
typedef struct node_rep node_rep;

#define NODE_REP_INCARNATION_HEX 16

/* What node_rep_route says about a keyed command. */
enum {
    NODE_REP_SERVE = 0,   /* go on (an RF 1 partition, or the checks passed) */
    NODE_REP_REPLIED = 1, /* an error was appended to out (-TRYAGAIN, -NOREPLICAS) */
    NODE_REP_PTABLE = 2   /* not served here: route as ptable says (-MOVED) */
};

/* Counters for INFO keel (and the binding's own). */
typedef struct node_rep_stats {
    rep_stats eng;
    uint64_t sealed_turns, released_turns, dropped_turns, dropped_clients;
    uint64_t tryagain, noreplicas, follower_reads;
    /* Leadership hand-offs: -MOVED to the target from the leader that
     * resigned; -TRYAGAIN from a follower told so (REP_EHANDOFF). */
    uint64_t handoff_moved, handoff_tryagain;
    uint64_t msgs_out, msgs_in, msgs_dropped, links_down;
    uint64_t leases, lease_denied;
    /* Sealed turns released: the sum and the largest of seal -> release
     * (us), the wait for the ISR's acknowledgements. */
    uint64_t seal_wait_us, seal_wait_max_us;
    uint64_t early_flushes; /* links a leader's batches left on before the turn's fsync */
    size_t sealed_bytes, sealed_clients, pending_turns;
    unsigned leader, follower, lagging; /* RF > 1 partitions by this node's role */
    uint64_t max_lag;                   /* the largest end - committed over partitions led */
} node_rep_stats;

/* Creates the engine over s's store (s->pt must exist), restores every
 * partition's record (rep_restore) and configures from the installed map.
 * incarnation: this process's (hex). Returns NULL with a reason in err. */
node_rep *node_rep_new(server *s, const peerauth_secret *secret, const char *incarnation, char *err,
                       size_t cap);
/* Stops the timer and every link; frees once the loop has closed them. */
void node_rep_free(node_rep *nr);

/* The installed map changed: rep_configure for every RF > 1 partition
 * (C3: a partition this node leads only if the map shows its own
 * incarnation), lease length and heartbeat pace. Returns 0, or a KEEL_E* of
 * the store (the caller stops the node). */
int node_rep_map_changed(node_rep *nr);
/* 1 while no installed map has listed this process's incarnation. */
int node_rep_fresh(const node_rep *nr);

/* Routing of a keyed command of slot slot, partition p, that ptable would
 * serve (serve = 1) or send elsewhere (serve = 0). write: the command may
 * write. readonly: the connection said READONLY. Returns NODE_REP_SERVE,
 * NODE_REP_REPLIED after appending the error to out, or NODE_REP_PTABLE
 * (serve = 0, no follower read, no hand-off); *follower_read is set to 1
 * when a follower serves the read. During a leadership transfer (C5): the
 * leader that answered RESIGN OK replies -MOVED slot to the RESIGN's
 * target; a follower its announcement reached (REP_EHANDOFF) -TRYAGAIN,
 * until their maps name the new leader (docs/replication.md "Rolling
 * restart"). */
int node_rep_route(node_rep *nr, unsigned p, unsigned slot, int serve, int write, int readonly,
                   kbuf *out, int *follower_read);
/* 1 if this node leads some RF > 1 partition (a SIGTERM hands it off). */
int node_rep_leads_any(const node_rep *nr);
/* The sweep filter's replication half (rep_sweep_skip); 0 for NULL. */
int node_rep_sweep_skip(const node_rep *nr, unsigned slot);
/* 1 if partition p has more than one replica in the installed map. */
int node_rep_is_replicated(const node_rep *nr, unsigned p);

/* Before the turn's store_sync (server.c before_flush): writes the turn
 * out (store_write_turn), runs rep_turn_end, and lets the leader's batches
 * leave now, so followers apply and fsync while this node fsyncs. Nothing
 * that can commit or release runs until the store_sync returns (same
 * thread); a reply still waits for both. No-op without RF > 1 (C1). */
void node_rep_presync(node_rep *nr);
/* rserver ops.seal_turn: runs rep_turn_end (the turn's store_sync is done),
 * flushes the queued messages and returns the turn's seal token, or 0. */
uint64_t node_rep_seal(node_rep *nr);
/* 1 when a write-flagged command of this turn was routed to a replicated
 * partition this node leads (whether or not it changed anything): the
 * turn's end may seal its replies (node_rep_seal), so none may leave
 * early. 0 for NULL. */
int node_rep_turn_touched(const node_rep *nr);

/* A heartbeat reply's lease (C2): renews every RF > 1 partition this node
 * leads in the installed map when lease == 1 and that map's version ==
 * version. */
void node_rep_lease(node_rep *nr, int lease, uint64_t version, uint64_t sent_us);

/* A KEEL.REP.* command from an authenticated peer (peer_id) on connection
 * c (client_id): appends one reply to out. */
void node_rep_peer_command(node_rep *nr, uint64_t client_id, const char *peer_id, int argc,
                           char **argv, const size_t *len, kbuf *out);
/* KEEL.REP.RESIGN term p leader-epoch target [p leader-epoch target ...]
 * from the coordinator (contract C5; the caller checked the peer is the
 * coordinator): admits the term (coordlink's directive guard); for each
 * partition p that this node leads in that epoch, stops taking writes of p
 * (-TRYAGAIN) and waits until target acknowledged this node's end
 * position. The request is held until every partition's wait ended, so the
 * partitions of one request are handed over at once, not one round trip
 * after another. Each partition's answer: *2 :end :leader-epoch; after 5 s,
 * or if this node does not (or no longer) lead p in that epoch, -ERR and p
 * serves again; -ERR too many transfers at once beyond RESIGNS_MAX waiting
 * (64). One partition: that answer; k > 1: an array of the k answers in
 * request order. A malformed request or a refused term: one -ERR, nothing
 * done. After an OK writes and reads of p get -MOVED to target
 * (rep_resign_announce tells the followers) until a map changes p's leader
 * or leader epoch. Returns 0 (replied to c->out) or RSERVER_HOLD
 * (rserver_resume follows). */
int node_rep_resign(node_rep *nr, client *c, int argc, char **argv, const size_t *len);

/* An authenticated peer's connection closed. */
void node_rep_peer_closed(node_rep *nr, const client *c, const char *peer_id);

void node_rep_get_stats(node_rep *nr, node_rep_stats *out);
/* INFO lines ("keel_rep_*" in # Replication: partitions by role and the
 * largest uncommitted lag; "rep_*" counters in # Keel). NULL nr (no
 * cluster) writes nothing. */
void node_rep_info_replication(node_rep *nr, kbuf *b);
void node_rep_info_keel(node_rep *nr, kbuf *b);
rep *node_rep_engine(node_rep *nr);

#endif
