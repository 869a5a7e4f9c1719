/* rep_engine.h - the node's replication engines, leader and follower, as one
 * object behind an injected environment (rep_env.h; DESIGN.md §12,
 * docs/replication.md).
 *
 * Per partition the node is a leader, a follower or neither, as the map says
 * (rep_configure). Every replica keeps a log position: the number of the
 * last write batch it holds. The leader gives each turn that wrote to the
 * partition the next position, stamps it with its leader epoch and streams
 * it to every follower; a follower applies batches strictly in order and
 * acknowledges its position once the batch is durable.
 *
 *   leader:    configure(leader, e) ----> LEADING (capture on, epoch-cache
 *              entry (e, end+1) persisted) --configure(other)--> capture off
 *   follower:  configure(follower of L, e) --> SUBSCRIBING --STREAM--> STREAMING
 *                     |                            |   ^                 |
 *                     |                  DIVERGED  |   | copy done       | gap, link down,
 *                     |                  (hi > E)  v   |                 | silence
 *                     |                        COPYING-+                 v
 *                     +------------------------------------------- SUBSCRIBING
 *
 * Peer commands (argument vectors; integers in decimal):
 *   F->L  KEEL.REP.SUB p leader-epoch last-epoch lo hi copy
 *         "I follow you in leader-epoch; my log's last epoch is last-epoch;
 *         I hold every position <= lo and perhaps up to hi; copy 1: send me
 *         a full copy". The leader answers one of:
 *   L->F  KEEL.REP.STREAM p leader-epoch from       batches from `from` follow
 *   L->F  KEEL.REP.DIVERGED p leader-epoch E        my log ends epoch last-epoch at E
 *   L->F  KEEL.REP.SNAP p leader-epoch pos first last cache records
 *         a full copy of p at position pos, in chunks (cache: the leader's
 *         epoch cache up to pos, on the first chunk), then batches from pos+1
 *   L->F  KEEL.REP.APPEND p leader-epoch batch-epoch pos records [olds]
 *   F->L  KEEL.REP.ACK p leader-epoch pos
 *   L->F  KEEL.REP.RESIGNED p leader-epoch end
 *         "I handed the leadership over (the binding answered RESIGN OK at
 *         end): take no client to me in leader-epoch" (rep_resign_announce)
 * records are move_wire chunk records ([slot][klen][key][vlen][value]).
 * olds (optional; a version before 2026-12-03 sends none and takes none, see
 * rep_msg_downgrade) is each record's physical state before the batch, in
 * record order: [flags u8], and with flags & 1 (present) [type u8][encoded
 * value bytes u32][kv hash u64], with flags & 4 [version u64]; flags & 2:
 * it has an expiry; flags 0x80: unknown (the follower reads its own). The
 * states are the leader's (its change capture's, store_change_cb old); a
 * follower whose data holds exactly the batch's previous position has the
 * same, so it applies the records without reading each key's old value for
 * its statistics (store_txn_seed). Where its data may hold more than that
 * position (after a copy, whose batch pos+1 may repeat records already in
 * the snapshot; after a restart, a role change, a gap) it reads them
 * instead, for the one batch that brings it back to exactly a position.
 *
 * Truncation (KIP-101): a follower of a new leader asks for the end E of the
 * last epoch it holds records of. If its log may reach past E (hi > E) its
 * records past E are not the leader's, and it truncates before applying
 * anything of the new epoch. Truncation is by full copy: the follower drops
 * the partition and takes the leader's snapshot (simplest correct; records
 * are absolute values, so a per-key undo of the tail is the refinement).
 *
 * Durability. A replica's "rep/<p>" metadata record holds [lo, hi, copying,
 * epoch cache, redo]; it is written (synced) BEFORE the batch at hi is
 * applied, so after any crash the data holds every position <= lo and none
 * > hi. A follower's record carries the batch at hi itself (the redo):
 * rep_restore applies it again (records are absolute values: twice is
 * once), so a follower's log ends exactly at hi. A leader's record says hi =
 * lo + 1 (the next turn's data may reach the disk before its record); since
 * its batches leave before its own fsync, a follower may hold hi although a
 * power loss took it from the leader, so a restarted leader's log ends at
 * lo and hi is "perhaps": its SUB carries both, and the new leader streams
 * from lo + 1 or answers DIVERGED; if it leads again, leader_start claims
 * hi without retaining it and starts the new epoch at lo + 1, so every
 * follower is copied. A leader that steps down or stops cleanly records its
 * exact end (leader_demote, rep_stop).
 *
 * Threads: the thread that owns the environment.
 */
#ifndef KEEL_REP_ENGINE_H
#define KEEL_REP_ENGINE_H

#include <stdint.h>

#include "node/rep_env.h"

#define REP_RF_MAX 5
#define REP_TICK_MS 20 /* the binding calls rep_tick this often */
#define REP_LAG_MAX_MS                                                                             \
    1000 /* replica_lag_max_ms: a follower not caught up for this long leaves the ISR */
#define REP_LEASE_MS 400     /* default of rep_set_lease_ms (the simulator's lease) */
#define REP_SUB_RETRY_MS 200 /* an unanswered SUB is sent again */
#define REP_WINDOW 64        /* batches in flight to one follower */
#define REP_LOG_KEEP 512     /* batches the leader retains for catch-up */
/* The newest batches a follower keeps after applying them (at most this
 * many, and at most REP_TAIL_BYTES of them per partition): promoted, it
 * streams them to a follower one or two batches behind instead of copying
 * the whole partition to it (which takes that follower out of the ISR). */
#define REP_TAIL_KEEP 16
#define REP_TAIL_BYTES (1u << 20)
/* A follower checks 1 in this many old states it takes against its own
 * data (rep_stats olds_verified); every one in a debug build (no NDEBUG). */
#ifdef NDEBUG
#define REP_OLD_VERIFY 256u
#else
#define REP_OLD_VERIFY 1u
#endif
#define REP_COPY_CHUNK (64u << 10)
/* Full copies a leader sends at once, over all its partitions; more wait. */
#define REP_COPY_MAX 4
/* A copy to a follower that started again before the last one finished
 * waits REP_COPY_BACKOFF_MS, doubling per restart up to REP_COPY_BACKOFF_MAX_MS
 * (resync storms: a follower that keeps refusing or losing copies must not
 * keep its leader copying). */
#define REP_COPY_BACKOFF_MS 500
#define REP_COPY_BACKOFF_MAX_MS 5000

typedef struct rep rep;

enum { REP_NONE = 0, REP_LEADER, REP_FOLLOWER };

/* What rep_write_check / rep_read_check say. */
enum {
    REP_OK = 0,
    REP_ENOTLEADER = 1,  /* -MOVED to the leader the map names */
    REP_ENOLEASE = 2,    /* the leader's lease ran out: -TRYAGAIN */
    REP_ENOREPLICAS = 3, /* |ISR| < min_insync: -NOREPLICAS Not enough good replicas to write. */
    /* A follower whose leader announced its resignation in the leader epoch
     * this node knows (KEEL.REP.RESIGNED): the map naming the next leader
     * has not arrived. -TRYAGAIN, not -MOVED back to the leader that
     * resigned (which sends its clients here: docs/replication.md
     * "Rolling restart"). */
    REP_EHANDOFF = 4
};

/* One partition's entry of the map. Strings are borrowed for the call. */
typedef struct rep_config {
    uint64_t leader_epoch, part_epoch;
    const char *leader;
    const char *isr[REP_RF_MAX];
    int nisr;
    const char *replicas[REP_RF_MAX];
    int nreplicas;
    int min_insync;
} rep_config;

/* An engine over env (copied; env->ctx and the store must outlive it).
 * mutations: REP_MUT_* (0 in production). NULL on out-of-memory or a bad
 * env (partitions 0 or not dividing 16384). */
rep *rep_new(const rep_env *env, unsigned mutations);
/* Frees; runs no callback. NULL is a no-op. */
void rep_free(rep *r);
/* A clean stop (SIGTERM), before rep_free and store_free: every partition
 * this node still leads records its exact log end, with one fsync for all
 * (a leader's per-turn record says hi = lo + 1, and a restart would then
 * truncate by full copy: docs/replication.md "Power loss"). What the
 * current turn wrote without a seal keeps that "perhaps" position. The
 * partitions lead no more. Returns 0 or a KEEL_E* (the records keep their
 * old, safe, values). */
int rep_stop(rep *r);
/* After a start: reads each partition's "rep/<p>" record back. Returns 0 or
 * a KEEL_E* (the node must not start on a guess). */
int rep_restore(rep *r);

/* The map says this about p (only a newer part_epoch, or a newer leader
 * epoch, changes anything; an older one is ignored and returns 0). Becomes
 * leader (capture on), follower (subscribes) or neither. Returns 0 or a
 * KEEL_E* (a failed store call: the node stops). */
int rep_configure(rep *r, unsigned p, const rep_config *c);
/* After the rep_configure calls of one map, before this node acts on it:
 * the records they wrote (a new leadership's epoch start, a demoted
 * leader's exact end) are left unsynced, and this makes them durable with
 * one fsync for all (a node that takes over 300 partitions in a failover
 * fsyncs once, not 300 times). rep_turn_end, rep_tick and rep_message call
 * it first too, so nothing of the new epoch (a batch, an ACK, a commit)
 * can precede it. Returns 0 or a KEEL_E* (a failed sync: the node stops). */
int rep_configure_sync(rep *r);

/* May this node take a write / serve a read of p now? REP_OK or REP_E*:
 * REP_ENOTLEADER for a follower or a non-replica, REP_EHANDOFF for a
 * follower whose leader announced its resignation in this leader epoch. */
int rep_write_check(rep *r, unsigned p);
int rep_read_check(rep *r, unsigned p);
/* At the leader of p, once the binding settled a leadership transfer on
 * its side (KEEL.REP.RESIGN answered OK: it takes no more writes, and its
 * end is acknowledged by the target): tells every follower
 * (KEEL.REP.RESIGNED), which answers REP_EHANDOFF until a map with another
 * leader epoch arrives. Returns 0, or KEEL_EINVAL if this node does not
 * lead p. */
int rep_resign_announce(rep *r, unsigned p);
/* The leader's lease for p in leader epoch e, renewed by a heartbeat this
 * node sent at sent_us (its own clock): valid until sent_us + the lease
 * length. Ignored for another epoch. */
void rep_lease(rep *r, unsigned p, uint64_t leader_epoch, uint64_t sent_us);
/* The lease length in ms (the map's lease_ms); 0 restores REP_LEASE_MS.
 * Applies to leases renewed from now on. */
void rep_set_lease_ms(rep *r, unsigned ms);

/* After the turn is written to the store (store_write_turn, or the turn's
 * store_sync): gives the turn's writes to each led partition a position,
 * records it (unsynced: rep_persist_lazy) and streams the batch. The
 * binding may let the batch leave before the turn's fsync, and must then
 * run nothing that commits or releases (rep_message, rep_tick, a release
 * on env->committed) until that fsync succeeded: a reply waits for the
 * leader's own durability and the ISR's acks (docs/replication.md "Write
 * path speed"). Returns 0 or a KEEL_E* (the node stops). */
int rep_turn_end(rep *r);
/* The last position of p this node holds (the position a leader's turn got
 * at rep_turn_end), and the leader's committed position. */
uint64_t rep_end(const rep *r, unsigned p);
uint64_t rep_committed(const rep *r, unsigned p);
uint64_t rep_epoch(const rep *r, unsigned p); /* the leader epoch this node knows for p */
/* At a leader: the durable position follower `peer` acknowledged in this
 * epoch (0 if it is not streaming, or this node does not lead p). */
uint64_t rep_peer_acked(const rep *r, unsigned p, const char *peer);
int rep_role(const rep *r, unsigned p);

/* One KEEL.REP.* message from peer `from`. Returns 0, KEEL_EPROTO (bad
 * message: ignored) or another KEEL_E* (a failed store call: the node
 * stops). */
int rep_message(rep *r, const char *from, int argc, const char **argv, const size_t *len);
/* 1 if a message the engines send is a leader's data message (APPEND,
 * STREAM, SNAP, DIVERGED): it claims nothing about the sender's durability
 * and may leave once the turn is written, before its sync. A follower's SUB
 * and ACK claim positions held durably: 0, they leave after the sync; a
 * leader's RESIGNED claims nothing either: 1. Per
 * partition all messages one node sends another are of one role, so each
 * partition's order is kept. */
int rep_msg_early(int argc, const char **argv, const size_t *len);
/* The connection to peer broke: a follower subscribes again, a leader
 * stops streaming to it until it does. */
void rep_peer_down(rep *r, const char *peer);
/* Every REP_TICK_MS: re-subscriptions, catch-up, ISR proposals. Returns 0 or
 * a KEEL_E*. */
int rep_tick(rep *r);

/* on 0: this node's batches send "absent" old states as unknown (its
 * followers read those records), because this node's data may lack
 * expired keys or orphaned fields its followers hold (a store an older
 * version swept as a follower). 1 (the default): sent as they are. */
void rep_set_olds_absent(rep *r, int on);

/* 1 when the expiry sweep and the gc must leave slot's partition alone on
 * this node: it holds replica data (a log position, a restored record, a
 * copy under way) and does not lead the partition with its writes
 * captured - a follower, or any replica before its map arrives. Only the
 * leader deletes expired keys and orphaned fields of a replicated
 * partition; its deletes reach every replica in its batches, so replicas
 * at one position hold the same records, expired ones too (which the olds
 * rely on), as a Redis replica waits for its master's DEL. */
int rep_sweep_skip(const rep *r, unsigned slot);

/* For a transport whose peer runs a version that takes no olds argument of
 * KEEL.REP.APPEND (see above): the argument count to send instead of argc
 * (the trailing olds dropped; the follower then reads its own). */
int rep_msg_downgrade(int argc, const char **argv, const size_t *len);

/* Counters for INFO and the simulator. */
typedef struct rep_stats {
    uint64_t batches_sent, batches_applied, copies_sent, copies_received, truncations;
    uint64_t isr_proposals;
    uint64_t early_subs;      /* SUBs of the next epoch kept and run when it came (rep_early_sub) */
    uint64_t copies_deferred; /* copy requests held by REP_COPY_MAX or the backoff */
    unsigned copies_active;   /* full copies being sent now */
    /* "rep/<p>" record writes: synced on their own (an fsync each), and
     * unsynced (durable with the turn's fsync; docs/replication.md "Write
     * path speed"). */
    uint64_t records_synced, records_lazy;
    /* Records a follower applied with the leader's old state (no read of
     * its own), and by reading it (no state sent, or the data not exactly
     * at the batch's previous position); of the former, the ones checked
     * against its own data anyway (1 in REP_OLD_VERIFY) and found to differ
     * (a bug: logged, and the record applied with the data's state). */
    uint64_t olds_used, olds_read, olds_verified, olds_mismatched;
    uint64_t olds_bad; /* batches whose olds did not parse: applied by reading */
} rep_stats;
void rep_get_stats(const rep *r, rep_stats *out);

#endif
