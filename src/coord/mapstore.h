/* mapstore.h - the coordinator's durable cluster map (DESIGN.md §7).
 *
 * The map store is the only authority for the cluster map: cluster identity
 * (id, partition count P), nodes, partition owners and epochs, moves,
 * settings, the coordinator term and the map version. Every mutating call is
 * one atomic transaction: when it returns 0 the change is durable (it
 * survives kill -9 and, on the SQLite backend, power loss); when it returns
 * an error nothing changed.
 *
 * Interface and backends. A `mapstore` is an opaque handle. The calls below
 * validate their arguments (the same way for every backend) and dispatch
 * through a table of backend functions (mapstore_ops, at the end of this
 * file). Two backends return the same handle: SQLite
 * (mapstore_sqlite_create/open, below) and etcd (coord/mapstore_etcd.h, for
 * coordinator HA), so nothing above this header depends on which. Callers
 * never see SQL, keys, files or transactions. Backend-specific error codes
 * and durability notes are in each backend's header.
 *
 * What the map version covers. The version is the version of the routing map
 * that the coordinator pushes to nodes, which a node refuses to go back on.
 * It goes up by exactly one in every transaction that changes something a
 * node's view of the map shows: a partition's owner or epoch, a node added,
 * or a node's host, port or state changed. Heartbeat times, capacity, rack,
 * pinning, settings, moves and the term do not change it.
 *
 * Ownership. A partition's owner changes only through three calls, each of
 * which also adds one to that partition's epoch and one to the map version,
 * in the same transaction: mapstore_partition_set_owner (one partition, by
 * an operator or failover), mapstore_partition_place (bootstrap placement of
 * unowned partitions, many at once, one version bump) and mapstore_move_commit
 * (step 5 of the move protocol, DESIGN §6).
 *
 * Replicas (issue 11 step 1, docs/replication.md). Each partition also has
 * a replica list (leader first: replicas[0] is the owner), an ISR (a subset
 * of the replicas that always holds the leader), a leader epoch and a
 * partition epoch. Three counters, each +1 when:
 *   epoch            the leader or the replica set changes (the ownership
 *                    epoch the move protocol fences on, as before)
 *   leader_epoch     the leader changes
 *   partition_epoch  anything of the above or the ISR changes
 * so leader_epoch <= epoch <= partition_epoch. An ownership change (the
 * three calls above) from A to B makes B the leader: B goes first, A
 * leaves the list, the other replicas stay, the ISR keeps those of them
 * that were in it plus B (mapstore__owner_change; at RF 1 this is
 * replicas = isr = [B]). The replica set and the ISR change otherwise only
 * through mapstore_partition_set_replicas and mapstore_partition_set_isr,
 * each a compare-and-set on the partition epoch (KEEL_EAGAIN when it moved
 * on). Every one of these changes adds one to the map version: nodes see
 * the replicas in the map.
 *
 * Numbers. Epochs, the term, the version, move ids and byte counts are u64 in
 * this API but are kept below 2^63 (SQLite integers are signed); a bump that
 * would pass 2^63 - 1 fails with KEEL_ERANGE. Times are wall-clock ms passed
 * in by the caller: nothing here reads a clock.
 *
 * Errors. Every call returns 0 or a negative KEEL_E* (core/err.h). After a
 * failure on an open handle, mapstore_errmsg() says why in words. The codes
 * mean the same in every call:
 *   KEEL_EINVAL     malformed argument (bad id, state, length, NaN...) or an
 *                   illegal state transition; also an open whose expected
 *                   cluster id or P differs from the store's
 *   KEEL_ERANGE     partition id >= P; a counter would overflow; schema
 *                   version this build does not support
 *   KEEL_ENOTFOUND  no such node, move or setting; no store at path
 *   KEEL_EEXIST     the thing already exists (store at path, move in flight
 *                   for the partition, partition already owned)
 *   KEEL_ECORRUPT   the file is not an SQLite database or fails its
 *                   integrity check, or its Keel tables are inconsistent
 *   KEEL_EWRONGTYPE a valid SQLite database that is not a Keel map store
 *   KEEL_EAGAIN     another process (or handle) has the store open; a
 *                   compare-and-set whose expected partition epoch is no
 *                   longer the partition's (nothing changed)
 *   KEEL_EIO        the backend failed to read or write (disk full, I/O)
 *   KEEL_ENOMEM     out of memory
 *
 * Threads: a handle belongs to one thread; no call is safe concurrently with
 * another on the same handle (after mapstore_async_start the handle's
 * backend runs on a worker thread of its own; see "Asynchronous writes"). Distinct handles (on
 * distinct stores) are independent. A store can be open in one handle of one process at a time.
 */
#ifndef KEEL_MAPSTORE_H
#define KEEL_MAPSTORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* KEEL_MUST_CHECK */

#include "core/mapcodec.h" /* KEEL_ID_MAX, KEEL_HOST_MAX, KEEL_{MIN,MAX}_PARTITIONS */

#define MAPSTORE_CLUSTER_ID_MAX 64 /* generated ids are 32 hex digits */
#define MAPSTORE_RACK_MAX 64
#define MAPSTORE_REASON_MAX 255
#define MAPSTORE_SETTING_NAME_MAX 64
#define MAPSTORE_SETTING_VALUE_MAX 1024
#define MAPSTORE_ERR_MAX 256 /* mapstore_errmsg() and the err buffers fit here */

typedef struct mapstore mapstore;

/* ---- Values ------------------------------------------------------------ */

/* A node has two independent states (DESIGN §7, docs/coordinator.md):
 *
 *   liveness    what the failure detector believes: UP while it heartbeats,
 *               SUSPECT after node_suspect_after_ms of silence, DOWN after
 *               node_dead_after_ms or a graceful stop. Set by the detector
 *               and by heartbeats only.
 *   membership  what the operator intends: ACTIVE, DRAINING (the planner
 *               empties it), REMOVED (final; the id is never reused). Set by
 *               operator commands only.
 *
 * They are kept apart so that a draining node that dies is still judged by
 * its heartbeats (it goes SUSPECT, then DOWN, like any other) and so that a
 * node's intent survives its crashes. Both are stored by name; the order is
 * not part of the format. */
typedef enum {
    MAPSTORE_NODE_UP = 0,
    MAPSTORE_NODE_SUSPECT,
    MAPSTORE_NODE_DOWN,
    MAPSTORE_NODE_NLIVENESS
} mapstore_liveness;

typedef enum {
    MAPSTORE_MEMBER_ACTIVE = 0,
    MAPSTORE_MEMBER_DRAINING,
    MAPSTORE_MEMBER_REMOVED,
    MAPSTORE_MEMBER_N
} mapstore_membership;

/* Move states (DESIGN §6). The legal transitions are
 *   PLANNED -> COPYING -> CATCHING_UP -> FENCED -> COMMITTED -> DONE
 * and PLANNED, COPYING, CATCHING_UP or FENCED -> ABORTED. COMMITTED is
 * entered only by mapstore_move_commit. PLANNED..FENCED are "in flight";
 * COMMITTED still awaits cleanup; DONE and ABORTED are final. */
typedef enum {
    MAPSTORE_MOVE_PLANNED = 0,
    MAPSTORE_MOVE_COPYING,
    MAPSTORE_MOVE_CATCHING_UP,
    MAPSTORE_MOVE_FENCED,
    MAPSTORE_MOVE_COMMITTED,
    MAPSTORE_MOVE_DONE,
    MAPSTORE_MOVE_ABORTED,
    MAPSTORE_MOVE_NSTATES
} mapstore_move_state;

typedef struct mapstore_node {
    char id[KEEL_ID_MAX + 1];         /* the id rule, core/id.h */
    char host[KEEL_HOST_MAX + 1];     /* the host rule, core/id.h */
    int port;                         /* 1..65535 */
    char rack[MAPSTORE_RACK_MAX + 1]; /* 0..64 likewise; "" = none */
    double capacity;                  /* finite, >= 0 */
    mapstore_liveness liveness;
    mapstore_membership membership;
    int64_t registered_at_ms;  /* set by the first upsert; read-only */
    int64_t last_heartbeat_ms; /* see mapstore_node_heartbeat */
} mapstore_node;

typedef struct mapstore_partition {
    unsigned id;                 /* 0..P-1 */
    char owner[KEEL_ID_MAX + 1]; /* node id, or "" when unowned */
    uint64_t epoch;              /* +1 at every change of leader or replica set; 0 = never owned */
    int pinned;                  /* 0 or 1: the planner never moves it */
    /* Replication (see the top of this file). Unused replicas[] slots are
     * all zero bytes, so two equal partitions compare equal with memcmp. */
    unsigned nreplicas;                          /* 0 when unowned, else 1..KEEL_RF_MAX */
    char replicas[KEEL_RF_MAX][KEEL_ID_MAX + 1]; /* replicas[0] == owner */
    unsigned isr;                                /* bit i: replicas[i] in sync; bit 0 set */
    uint64_t leader_epoch;                       /* +1 at every leader change */
    uint64_t partition_epoch;                    /* +1 at every change, ISR included */
} mapstore_partition;

/* One entry of a bootstrap placement (mapstore_partition_place). */
typedef struct mapstore_placement {
    unsigned partition;
    const char *owner; /* borrowed for the call */
    /* RF > 1 (issue 11 step 4): the other replicas, after the owner, all in
     * the ISR at creation (every copy is empty). 0 followers: RF 1 as
     * before. Borrowed for the call, like owner. */
    const char *const *followers;
    unsigned nfollowers; /* 0..KEEL_RF_MAX - 1 */
} mapstore_placement;

typedef struct mapstore_move {
    uint64_t id; /* assigned by mapstore_move_create; never reused */
    unsigned partition;
    char from[KEEL_ID_MAX + 1]; /* owner when planned */
    char to[KEEL_ID_MAX + 1];
    mapstore_move_state state;
    uint64_t epoch; /* the partition's epoch when planned; commit makes it +1 */
    uint64_t bytes; /* progress, as last recorded by mapstore_move_set_bytes */
    int64_t at_ms[MAPSTORE_MOVE_NSTATES];       /* when it entered each state; 0 = never */
    char reason[MAPSTORE_REASON_MAX + 1];       /* why it was planned */
    char abort_reason[MAPSTORE_REASON_MAX + 1]; /* "" unless ABORTED */
} mapstore_move;

typedef struct mapstore_setting {
    char name[MAPSTORE_SETTING_NAME_MAX + 1];   /* 1..64 printable ASCII, no spaces */
    char value[MAPSTORE_SETTING_VALUE_MAX + 1]; /* 0..1024 bytes of text */
    int64_t set_at_ms;
} mapstore_setting;

/* Age of a setting at now_ms, in ms; 0 if the clock went backwards. */
static inline int64_t mapstore_setting_age_ms(const mapstore_setting *s, int64_t now_ms) {
    return now_ms > s->set_at_ms ? now_ms - s->set_at_ms : 0;
}

/* Upper-case names ("UP", "DRAINING", "CATCHING_UP"...), static; "?" for a
 * bad value. */
const char *mapstore_liveness_name(mapstore_liveness s);
const char *mapstore_membership_name(mapstore_membership s);
const char *mapstore_move_state_name(mapstore_move_state s);
/* Parse an exact upper-case name. Return 0, or KEEL_EINVAL. */
int mapstore_liveness_parse(const char *name, mapstore_liveness *out);
int mapstore_membership_parse(const char *name, mapstore_membership *out);
int mapstore_move_state_parse(const char *name, mapstore_move_state *out);
/* 1 if a move may go from state `from` to state `to` (the transitions listed
 * at mapstore_move_state), else 0. */
int mapstore_move_can_advance(mapstore_move_state from, mapstore_move_state to);

/* ---- Creating and opening (SQLite backend) ----------------------------- */

/* What an open must find; a mismatch fails the open with KEEL_EINVAL. */
typedef struct mapstore_expect {
    const char *cluster_id; /* NULL: any */
    unsigned partitions;    /* 0: any */
} mapstore_expect;

/* Creates a new cluster map at path (a file) with P partitions, all unowned
 * at epoch 0, a cluster id of 32 random hex digits (getrandom), term 0 and
 * version 0, then opens it. The file appears complete or not at all: it is
 * built under a temporary name beside path and linked into place.
 *   path     borrowed for the call; its directory must exist
 *   now_ms   recorded as the creation time
 *   out      receives the handle (free with mapstore_free); NULL on failure
 *   err      receives a one-line reason on failure (may be NULL if errcap 0)
 * Errors: KEEL_EINVAL (P not a power of two in 16..16384, NULL arguments),
 * KEEL_EEXIST (anything exists at path, or an SQLite -wal/-shm/-journal file
 * beside it: an existing map is never overwritten), KEEL_EIO, KEEL_ENOMEM,
 * and any error of mapstore_sqlite_open. */
KEEL_MUST_CHECK int mapstore_sqlite_create(const char *path, unsigned partitions, int64_t now_ms,
                                           mapstore **out, char *err, size_t errcap);

/* Opens an existing map store. Never creates, repairs or resets anything: a
 * file that is missing, damaged, of another kind or of another cluster is
 * refused and left as it was.
 *   expect   may be NULL (accept any cluster)
 * Errors: KEEL_ENOTFOUND (nothing at path), KEEL_EINVAL (path not a regular
 * file; expected cluster id or P differs), KEEL_ECORRUPT (not an SQLite
 * database, integrity check failed, Keel tables inconsistent),
 * KEEL_EWRONGTYPE (an SQLite database but not a Keel map store), KEEL_ERANGE
 * (schema version unsupported), KEEL_EAGAIN (open elsewhere), KEEL_EIO,
 * KEEL_ENOMEM. On failure *out is NULL and err holds the reason. */
KEEL_MUST_CHECK int mapstore_sqlite_open(const char *path, const mapstore_expect *expect,
                                         mapstore **out, char *err, size_t errcap);

/* Closes the handle and releases the store. NULL is a no-op. */
void mapstore_free(mapstore *ms);

/* Calls that reached the backend so far: reads (a read is served from the
 * handle's memory once loaded, so these grow only at start and after a
 * failed write) and writes. Either pointer may be NULL. */
void mapstore_counters(const mapstore *ms, uint64_t *reads, uint64_t *writes);

/* Why the last failed call on ms failed, for logs. Never NULL; valid until
 * the next call on ms. */
const char *mapstore_errmsg(const mapstore *ms);

/* ---- Cluster identity, term, version ----------------------------------- */

/* The cluster id, NUL-terminated; valid until mapstore_free. */
const char *mapstore_cluster_id(const mapstore *ms);
/* P, fixed at creation. */
unsigned mapstore_partitions(const mapstore *ms);
/* The current coordinator term (0 in a store that was never started). */
uint64_t mapstore_term(const mapstore *ms);
/* The current map version (see the top of this file). */
uint64_t mapstore_version(const mapstore *ms);

/* Adds one to the term, durably, and returns the new term in *term (may be
 * NULL). A coordinator calls it once at every start, before it sends any
 * directive (DESIGN invariant I3). Errors: KEEL_ERANGE, KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_bump_term(mapstore *ms, uint64_t *term);

/* ---- Nodes -------------------------------------------------------------
 * Nodes are never deleted: a node that leaves becomes REMOVED, so move
 * records and logs can always name it. */

/* Registers node n or updates it. Insert: every field of n, with
 * registered_at_ms = last_heartbeat_ms = now_ms. Update: host, port, rack,
 * capacity, liveness and membership from n, last_heartbeat_ms = now_ms;
 * registered_at_ms is kept. n->registered_at_ms and n->last_heartbeat_ms
 * are ignored. Adds one to the version on insert or when host, port,
 * liveness or membership changed.
 * Errors: KEEL_EINVAL (also: the stored node is REMOVED and n is not),
 * KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_node_upsert(mapstore *ms, const mapstore_node *n, int64_t now_ms);
/* Fills *out with node id. Errors: KEEL_EINVAL, KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_node_get(mapstore *ms, const char *id, mapstore_node *out);
/* All nodes, ordered by id: *out is malloc'd (caller frees with free(); NULL
 * when *n is 0). Errors: KEEL_ENOMEM, KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_node_list(mapstore *ms, mapstore_node **out, size_t *n);
/* Sets a node's liveness; +1 version if it changed (setting the same value
 * is a successful no-op). Errors: KEEL_EINVAL, KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_node_set_liveness(mapstore *ms, const char *id, mapstore_liveness l);
/* Sets a node's membership; +1 version if it changed. REMOVED is final:
 * leaving it fails with KEEL_EINVAL. Errors: KEEL_EINVAL, KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_node_set_membership(mapstore *ms, const char *id,
                                                 mapstore_membership m);
/* Records a heartbeat time. Each call is a synchronous transaction (an
 * fsync): persist heartbeats sparingly (on state changes, or every few
 * seconds), not every heartbeat of every node. Errors: KEEL_EINVAL,
 * KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_node_heartbeat(mapstore *ms, const char *id, int64_t now_ms);

/* ---- Partitions -------------------------------------------------------- */

/* Fills *out with partition p. Errors: KEEL_ERANGE (p >= P). */
KEEL_MUST_CHECK int mapstore_partition_get(mapstore *ms, unsigned p, mapstore_partition *out);
/* All P partitions, ordered by id: *out is malloc'd (caller frees), *n = P.
 * Errors: KEEL_ENOMEM, KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_partition_list(mapstore *ms, mapstore_partition **out, size_t *n);
/* Gives partition p to node owner (NULL: no owner), +1 epoch, +1 version,
 * in one transaction. The new epoch and version go to *epoch and *version
 * (each may be NULL). Errors: KEEL_ERANGE (p >= P, or epoch/version
 * overflow), KEEL_EINVAL (bad id), KEEL_ENOTFOUND (no such node), KEEL_EEXIST
 * (owner already owns p, or owner is NULL and p is unowned: nothing is
 * bumped). */
KEEL_MUST_CHECK int mapstore_partition_set_owner(mapstore *ms, unsigned p, const char *owner,
                                                 uint64_t *epoch, uint64_t *version);
/* Bootstrap placement: gives each listed partition to its owner, +1 to each
 * one's epoch, and +1 to the version once, all in one transaction. Every
 * listed partition must be unowned and listed once; otherwise nothing
 * changes. n == 0 changes nothing and returns 0. pl is borrowed for the
 * call. The new version goes to *version (may be NULL). An entry with
 * followers places RF > 1: replicas = owner then followers, all in the ISR
 * (mapstore__place). Errors: KEEL_ERANGE, KEEL_EINVAL (bad id, partition
 * listed twice, a follower twice or equal to the owner),
 * KEEL_ENOTFOUND (no such node), KEEL_EEXIST (a partition already owned). */
KEEL_MUST_CHECK int mapstore_partition_place(mapstore *ms, const mapstore_placement *pl, size_t n,
                                             uint64_t *version);
/* Sets partition p's ISR to the n ids in isr (any order), partition epoch
 * + 1 and version + 1, if p's partition epoch is still expected_pe. The
 * new partition epoch goes to *pe (may be NULL). The ids must be distinct
 * replicas of p and include its leader.
 * Errors: KEEL_ERANGE (p >= P, overflow), KEEL_EINVAL (bad or duplicate
 * id, n not in 1..KEEL_RF_MAX, p unowned, an id not a replica of p, the
 * leader missing), KEEL_EAGAIN (the partition epoch is not expected_pe:
 * someone else changed p first; re-read it and decide again). */
KEEL_MUST_CHECK int mapstore_partition_set_isr(mapstore *ms, unsigned p, uint64_t expected_pe,
                                               const char *const *isr, size_t n, uint64_t *pe);
/* Sets partition p's replica list to the n ids in replicas (leader first:
 * replicas[0] must be p's owner; the leader changes only by an ownership
 * change), epoch + 1, partition epoch + 1 and version + 1, if p's
 * partition epoch is still expected_pe. The ISR becomes the old ISR
 * without the replicas removed. A move in flight for p is then refused at
 * its commit (its epoch moved on). New partition epoch to *pe (may be
 * NULL). Errors: KEEL_ERANGE, KEEL_EINVAL (bad or duplicate id, n not in
 * 1..KEEL_RF_MAX, p unowned, replicas[0] not the owner), KEEL_ENOTFOUND
 * (no such node), KEEL_EAGAIN (partition epoch not expected_pe). */
KEEL_MUST_CHECK int mapstore_partition_set_replicas(mapstore *ms, unsigned p, uint64_t expected_pe,
                                                    const char *const *replicas, size_t n,
                                                    uint64_t *pe);
/* A change of leader by compare-and-set (issue 11 step 4: failover, and
 * leadership transfer): if p's partition epoch is still expected_pe, leader
 * (a replica of p) becomes replicas[0] and owner, the old leader stays in
 * the list right after it, in the ISR only when old_in_isr and it was in
 * it (a failover leaves it out: it may miss acknowledged writes; a clean
 * transfer keeps it), the others keep their places and ISR bits; the new
 * leader is in the ISR. leader_epoch + 1, epoch + 1, partition epoch + 1,
 * version + 1. leader == the current leader is a re-election in a new
 * leader epoch (a leader that restarted with a new incarnation, C3):
 * the same epochs go up, the lists stay. New partition epoch to *pe (may
 * be NULL). Errors: KEEL_ERANGE, KEEL_EINVAL (bad id, p unowned, leader not
 * a replica of p), KEEL_EAGAIN (partition epoch not expected_pe). */
KEEL_MUST_CHECK int mapstore_partition_set_leader(mapstore *ms, unsigned p, uint64_t expected_pe,
                                                  const char *leader, int old_in_isr, uint64_t *pe);
/* Adds one to the map version and changes nothing else: what nodes see
 * that the store does not hold (a setting they apply, min_insync and
 * replica_lease_ms; a node's incarnation, kept by the coordinator in
 * memory) reaches them with the next heartbeat, which fetches a map only
 * when its version is older. New version to *version (may be NULL).
 * Errors: KEEL_ERANGE, KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_bump_version(mapstore *ms, uint64_t *version);
/* Pins (1) or unpins (0) partition p. Errors: KEEL_ERANGE, KEEL_EINVAL. */
KEEL_MUST_CHECK int mapstore_partition_set_pinned(mapstore *ms, unsigned p, int pinned);

/* ---- Moves ------------------------------------------------------------- */

/* Records a new move of partition p from its current owner to node `to`, as
 * PLANNED at now_ms, with the partition's current epoch. reason (NULL = "")
 * is at most MAPSTORE_REASON_MAX bytes. The new id goes to *id (may be
 * NULL).
 * Errors: KEEL_ERANGE, KEEL_EINVAL (bad id or reason; p unowned; `to`
 * already owns p), KEEL_ENOTFOUND (no node `to`), KEEL_EEXIST (p already has
 * a move in flight). */
KEEL_MUST_CHECK int mapstore_move_create(mapstore *ms, unsigned p, const char *to,
                                         const char *reason, int64_t now_ms, uint64_t *id);
/* Fills *out with move id. Errors: KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_move_get(mapstore *ms, uint64_t id, mapstore_move *out);
/* Moves ordered by id: all of them, or (unfinished != 0) only those not DONE
 * or ABORTED, which is what a restarted coordinator must resume. *out is
 * malloc'd (caller frees; NULL when *n is 0). Errors: KEEL_ENOMEM, KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_move_list(mapstore *ms, int unfinished, mapstore_move **out,
                                       size_t *n);
/* Advances move id to state, recording now_ms as the time it entered that
 * state. Only the transitions listed at mapstore_move_state are legal, and
 * COMMITTED is not reachable this way. abort_reason (NULL = "") is recorded
 * when state is ABORTED and must be NULL otherwise.
 * Errors: KEEL_EINVAL (illegal transition, bad reason), KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_move_advance(mapstore *ms, uint64_t id, mapstore_move_state state,
                                          int64_t now_ms, const char *abort_reason);
/* Records the bytes a move has transferred so far. Errors: KEEL_ERANGE
 * (>= 2^63), KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_move_set_bytes(mapstore *ms, uint64_t id, uint64_t bytes);
/* The commit of DESIGN §6 step 5, in one transaction: the move must be
 * FENCED and its partition still owned by move.from at move.epoch; then
 * owner = move.to, epoch + 1, version + 1, and the move becomes COMMITTED at
 * now_ms. New epoch and version go to *epoch and *version (may be NULL).
 * Errors: KEEL_ENOTFOUND, KEEL_EINVAL (not FENCED, or the partition's owner
 * or epoch changed since the move was planned), KEEL_ERANGE. */
KEEL_MUST_CHECK int mapstore_move_commit(mapstore *ms, uint64_t id, int64_t now_ms, uint64_t *epoch,
                                         uint64_t *version);

/* ---- Settings ---------------------------------------------------------- */

/* Sets name = value (text, NUL-terminated) at now_ms, replacing any old
 * value. Errors: KEEL_EINVAL (bad name, value too long). */
KEEL_MUST_CHECK int mapstore_setting_set(mapstore *ms, const char *name, const char *value,
                                         int64_t now_ms);
/* Fills *out. Errors: KEEL_EINVAL, KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_setting_get(mapstore *ms, const char *name, mapstore_setting *out);
/* Removes a setting (back to its default). Errors: KEEL_EINVAL,
 * KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int mapstore_setting_unset(mapstore *ms, const char *name);
/* All settings ordered by name; *out malloc'd (caller frees; NULL when *n
 * is 0). Errors: KEEL_ENOMEM, KEEL_EIO. */
KEEL_MUST_CHECK int mapstore_setting_list(mapstore *ms, mapstore_setting **out, size_t *n);

/* ---- Asynchronous writes -----------------------------------------------
 * The coordinator's event loop must never wait on the store (issue 12): on
 * etcd one write can take seconds when etcd accepts connections and does
 * not answer. mapstore_async_start moves the handle's writes to a thread of
 * its own; from then on:
 *
 *   - every write is a mapstore_write submitted with mapstore_submit, which
 *     validates it at once (the same checks, codes and errmsg as the
 *     synchronous call) and returns; the backend runs it on the store's
 *     worker thread, and `done` runs later on the loop thread with the
 *     outcome - never inside mapstore_submit, even when the write fails
 *     at once or the backend is SQLite (one path for both backends);
 *   - writes run one at a time, in submission order, and their completions
 *     run in that order: a later write is validated by the backend against
 *     the state the earlier ones left (each etcd transaction is guarded by
 *     the previous one's revision);
 *   - every read (mapstore_*_get, *_list, term, version) is served from the
 *     handle's memory, which mapstore_async_start loads whole and which
 *     changes only on the loop thread, in a completion: a write shows in
 *     reads from its own completion on (not while it is pending), by the
 *     rules stated at each call above;
 *   - a write that fails other than by a refusal (KEEL_EIO, KEEL_EUNKNOWN,
 *     KEEL_EAGAIN, KEEL_ENOTLEADER...) is followed, on the worker, by a
 *     re-read of the whole store; its completion installs what was read, so
 *     the memory again matches the store (an outcome-unknown commit that
 *     applied shows as applied). If that re-read fails too,
 *     mapstore_stale() is 1 until a later re-read succeeds (each later
 *     write re-reads after it runs while stale; mapstore_reload_submit asks
 *     for one);
 *   - the synchronous write calls above fail with KEEL_EINVAL ("asynchronous
 *     handle") and change nothing.
 *
 * Threads: mapstore_async_start, mapstore_submit, the reads and the
 * completions are the loop thread's; the backend runs on the worker only.
 */

typedef enum mapstore_wkind {
    MAPSTORE_W_BUMP_TERM = 0,
    MAPSTORE_W_NODE_UPSERT,
    MAPSTORE_W_NODE_SET_LIVENESS,
    MAPSTORE_W_NODE_SET_MEMBERSHIP,
    MAPSTORE_W_NODE_HEARTBEAT,
    MAPSTORE_W_PARTITION_SET_OWNER,
    MAPSTORE_W_PARTITION_PLACE,
    MAPSTORE_W_PARTITION_SET_PINNED,
    MAPSTORE_W_MOVE_CREATE,
    MAPSTORE_W_MOVE_ADVANCE,
    MAPSTORE_W_MOVE_SET_BYTES,
    MAPSTORE_W_MOVE_COMMIT,
    MAPSTORE_W_SETTING_SET,
    MAPSTORE_W_SETTING_UNSET,
    MAPSTORE_W_RELOAD, /* no write: re-read the whole store into memory */
    MAPSTORE_W_PARTITION_SET_ISR,
    MAPSTORE_W_PARTITION_SET_REPLICAS,
    MAPSTORE_W_PARTITION_SET_LEADER,
    MAPSTORE_W_BUMP_VERSION,
    MAPSTORE_W_NKINDS
} mapstore_wkind;

/* One write, the arguments of the synchronous call of the same name. Build
 * it with the mapstore_w_* helpers below; every string is copied in. */
typedef struct mapstore_write {
    mapstore_wkind kind;
    mapstore_node node;       /* NODE_UPSERT */
    char id[KEEL_ID_MAX + 1]; /* node id; SET_OWNER's owner; MOVE_CREATE's `to` */
    int has_id;               /* SET_OWNER: 0 = no owner */
    unsigned partition;       /* SET_OWNER, SET_PINNED, MOVE_CREATE */
    int value;                /* liveness, membership, pinned or move state */
    uint64_t move;            /* MOVE_ADVANCE, SET_BYTES, COMMIT */
    uint64_t bytes;           /* SET_BYTES */
    int64_t now_ms;
    char name[MAPSTORE_SETTING_NAME_MAX + 1];  /* SETTING_* */
    char text[MAPSTORE_SETTING_VALUE_MAX + 1]; /* setting value, reason, abort reason */
    int has_text;                              /* MOVE_ADVANCE: 0 = no abort reason */
    const mapstore_placement *pl; /* PARTITION_PLACE: borrowed until mapstore_submit returns */
    size_t npl;
    unsigned overflow; /* builders: a string that did not fit (or was NULL): refused */
    /* SET_ISR, SET_REPLICAS: the list; SET_LEADER: ids[0] the leader,
     * value old_in_isr. All three: expected_pe. */
    char ids[KEEL_RF_MAX][KEEL_ID_MAX + 1];
    unsigned nids;
    uint64_t expected_pe;
} mapstore_write;

/* What a write returned: rc as the synchronous call would (0 or KEEL_E*);
 * errmsg its reason (valid during the callback only); the synchronous
 * call's outputs: id (MOVE_CREATE), epoch (SET_OWNER, COMMIT), version
 * (SET_OWNER, PLACE, COMMIT), term (BUMP_TERM). */
typedef struct mapstore_result {
    mapstore_wkind kind;
    int rc;
    const char *errmsg;
    uint64_t id, epoch, version, term;
    mapstore_partition part; /* SET_ISR, SET_REPLICAS, SET_LEADER: p as committed */
} mapstore_result;

/* Runs on the loop thread once per accepted write, in submission order. */
typedef void (*mapstore_done_fn)(void *arg, const mapstore_result *r);

/* Starts the worker thread and a uv_async_t on loop, after loading the whole
 * map into memory (one backend read of each of nodes, partitions, moves and
 * settings, here, synchronously). Errors: KEEL_EINVAL (already started),
 * KEEL_ENOMEM, KEEL_EIO, and the backend's read errors. */
struct uv_loop_s; /* uv_loop_t, <uv.h> */
KEEL_MUST_CHECK int mapstore_async_start(mapstore *ms, struct uv_loop_s *loop);
/* Stops the worker: waits for the write it is running, drops the queued
 * ones and the undelivered completions (their callbacks never run), and
 * closes the uv_async_t (the loop must run once more to finish the close).
 * Safe to call twice; mapstore_free calls it. */
void mapstore_async_stop(mapstore *ms);
/* 1 once mapstore_async_start succeeded (until mapstore_async_stop). */
int mapstore_is_async(const mapstore *ms);
/* Validates w and queues it. 0: accepted, done(arg, result) will run
 * exactly once on the loop thread (unless the handle is stopped first);
 * done may be NULL. Otherwise a KEEL_E* from validation (KEEL_EINVAL,
 * KEEL_ERANGE), KEEL_ENOMEM, or KEEL_EINVAL when the handle is not
 * asynchronous; nothing was queued, done never runs, mapstore_errmsg says
 * why. w is borrowed for the call. */
KEEL_MUST_CHECK int mapstore_submit(mapstore *ms, const mapstore_write *w, mapstore_done_fn done,
                                    void *arg);
/* Queues a re-read of the whole store (MAPSTORE_W_RELOAD); rc of the
 * result is the read's. Same returns as mapstore_submit. */
KEEL_MUST_CHECK int mapstore_reload_submit(mapstore *ms, mapstore_done_fn done, void *arg);
/* Writes accepted whose completion has not run yet. */
size_t mapstore_pending(const mapstore *ms);
/* 1 when memory may differ from the store: a write failed other than by a
 * refusal and the re-read after it failed too. */
int mapstore_stale(const mapstore *ms);

/* Builders: fill *w for one write (w is zeroed first). */
void mapstore_w_bump_term(mapstore_write *w);
void mapstore_w_node_upsert(mapstore_write *w, const mapstore_node *n, int64_t now_ms);
void mapstore_w_node_set_liveness(mapstore_write *w, const char *id, mapstore_liveness l);
void mapstore_w_node_set_membership(mapstore_write *w, const char *id, mapstore_membership m);
void mapstore_w_partition_place(mapstore_write *w, const mapstore_placement *pl, size_t n);
void mapstore_w_move_create(mapstore_write *w, unsigned p, const char *to, const char *reason,
                            int64_t now_ms);
void mapstore_w_move_advance(mapstore_write *w, uint64_t id, mapstore_move_state state,
                             int64_t now_ms, const char *abort_reason);
void mapstore_w_move_set_bytes(mapstore_write *w, uint64_t id, uint64_t bytes);
void mapstore_w_move_commit(mapstore_write *w, uint64_t id, int64_t now_ms);
void mapstore_w_setting_set(mapstore_write *w, const char *name, const char *value, int64_t now_ms);
void mapstore_w_setting_unset(mapstore_write *w, const char *name);
/* The replication writes (issue 11 step 4), as the synchronous calls. */
void mapstore_w_partition_set_isr(mapstore_write *w, unsigned p, uint64_t expected_pe,
                                  const char *const *isr, size_t n);
void mapstore_w_partition_set_replicas(mapstore_write *w, unsigned p, uint64_t expected_pe,
                                       const char *const *replicas, size_t n);
void mapstore_w_partition_set_leader(mapstore_write *w, unsigned p, uint64_t expected_pe,
                                     const char *leader, int old_in_isr);
void mapstore_w_bump_version(mapstore_write *w);

/* ---- Backend interface (for backend implementations only) --------------
 * A backend implements these on its own state (`impl`). mapstore.c has
 * already checked every argument against the contracts above (ids, lengths,
 * enums, p < P, NULL outputs); what needs the stored state (does the node
 * exist, is the transition legal, is the partition owned) is the backend's
 * job. Each mutating function must be one atomic, durable transaction and
 * must report failures with mapstore__errf. term and version return the
 * values committed so far. */
typedef struct mapstore_ops {
    void (*close)(void *impl);
    uint64_t (*term)(void *impl);
    uint64_t (*version)(void *impl);
    int (*bump_term)(mapstore *ms, uint64_t *term);
    int (*node_upsert)(mapstore *ms, const mapstore_node *n, int64_t now_ms);
    int (*node_get)(mapstore *ms, const char *id, mapstore_node *out);
    int (*node_list)(mapstore *ms, mapstore_node **out, size_t *n);
    int (*node_set_liveness)(mapstore *ms, const char *id, mapstore_liveness l);
    int (*node_set_membership)(mapstore *ms, const char *id, mapstore_membership m);
    int (*node_heartbeat)(mapstore *ms, const char *id, int64_t now_ms);
    int (*partition_get)(mapstore *ms, unsigned p, mapstore_partition *out);
    int (*partition_list)(mapstore *ms, mapstore_partition **out, size_t *n);
    int (*partition_set_owner)(mapstore *ms, unsigned p, const char *owner, uint64_t *epoch,
                               uint64_t *version);
    int (*partition_place)(mapstore *ms, const mapstore_placement *pl, size_t n, uint64_t *version);
    int (*partition_set_pinned)(mapstore *ms, unsigned p, int pinned);
    /* Both: on success *out is the partition as committed. */
    int (*partition_set_isr)(mapstore *ms, unsigned p, uint64_t expected_pe, const char *const *isr,
                             size_t n, mapstore_partition *out);
    int (*partition_set_replicas)(mapstore *ms, unsigned p, uint64_t expected_pe,
                                  const char *const *replicas, size_t n, mapstore_partition *out);
    int (*partition_set_leader)(mapstore *ms, unsigned p, uint64_t expected_pe, const char *leader,
                                int old_in_isr, mapstore_partition *out);
    int (*bump_version)(mapstore *ms, uint64_t *version);
    int (*move_create)(mapstore *ms, unsigned p, const char *to, const char *reason, int64_t now_ms,
                       uint64_t *id);
    int (*move_get)(mapstore *ms, uint64_t id, mapstore_move *out);
    int (*move_list)(mapstore *ms, int unfinished, mapstore_move **out, size_t *n);
    int (*move_advance)(mapstore *ms, uint64_t id, mapstore_move_state state, int64_t now_ms,
                        const char *abort_reason);
    int (*move_set_bytes)(mapstore *ms, uint64_t id, uint64_t bytes);
    int (*move_commit)(mapstore *ms, uint64_t id, int64_t now_ms, uint64_t *epoch,
                       uint64_t *version);
    int (*setting_set)(mapstore *ms, const char *name, const char *value, int64_t now_ms);
    int (*setting_get)(mapstore *ms, const char *name, mapstore_setting *out);
    int (*setting_unset)(mapstore *ms, const char *name);
    int (*setting_list)(mapstore *ms, mapstore_setting **out, size_t *n);
} mapstore_ops;

/* Wraps an opened backend in a handle. cluster_id is copied. On success the
 * handle owns impl (mapstore_free calls ops->close); on failure (KEEL_ENOMEM,
 * KEEL_EINVAL) the caller still owns it. */
int mapstore__new(const mapstore_ops *ops, void *impl, const char *cluster_id, unsigned partitions,
                  mapstore **out);
/* The backend state given to mapstore__new. */
void *mapstore__impl(const mapstore *ms);
/* Checks the handle against expect; on mismatch writes the reason to err and
 * returns KEEL_EINVAL. */
int mapstore__check_expect(const mapstore *ms, const mapstore_expect *expect, char *err,
                           size_t errcap);
/* Records why a call failed (for mapstore_errmsg) and returns rc. */
int mapstore__errf(mapstore *ms, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The replication rules of the top of this file, on a partition record,
 * shared by the backends and the handle's cache so that all three apply
 * them alike. None does I/O; the node-existence checks are the backend's.
 *   owner_change  the ownership change to owner (NULL: unowned): all
 *                 three epochs + 1, replicas and ISR as described. The
 *                 caller has checked part_can_bump.
 *   set_isr       checks isr against p (KEEL_EAGAIN, KEEL_EINVAL, as
 *                 mapstore_partition_set_isr) and applies it.
 *   set_replicas  likewise for mapstore_partition_set_replicas.
 *   part_can_bump 0, or KEEL_ERANGE (recorded) if an epoch would pass 2^63-1.
 *   part_check    0 if a stored record keeps every rule (a backend reading
 *                 one that does not reports KEEL_ECORRUPT). */
void mapstore__owner_change(mapstore_partition *p, const char *owner);
int mapstore__set_isr(mapstore *ms, mapstore_partition *p, uint64_t expected_pe,
                      const char *const *isr, size_t n);
int mapstore__set_replicas(mapstore *ms, mapstore_partition *p, uint64_t expected_pe,
                           const char *const *replicas, size_t n);
/* set_leader  likewise for mapstore_partition_set_leader.
 * place       a bootstrap placement entry on an unowned p: owner_change,
 *             then the followers appended, all in the ISR. */
int mapstore__set_leader(mapstore *ms, mapstore_partition *p, uint64_t expected_pe,
                         const char *leader, int old_in_isr);
void mapstore__place(mapstore_partition *p, const mapstore_placement *pl);
int mapstore__part_can_bump(mapstore *ms, const mapstore_partition *p);
int mapstore__part_check(const mapstore_partition *p);
/* 1 if s is a valid id (node id, host, setting name): 1..max bytes, each
 * printable ASCII and not a space. allow_empty admits "". */
int mapstore__valid_id(const char *s, size_t max, int allow_empty);

#endif
