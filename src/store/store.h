/* store.h - the node's RocksDB: key encoding, values with expiry, per-slot
 * statistics, group commit.
 *
 * On-disk format (DESIGN.md §3):
 *
 *   column family "default"  data
 *     key    [slot: u16 big-endian][user key bytes]
 *     value  [type: u8][expire-at ms: u64 big-endian, 0 = none][payload]
 *   column family "meta"     node-local metadata
 *     "m/<name>"             free-form metadata (store_meta_get/put)
 *     "s/<slot u16 BE>"      [keys: u64][bytes: u64][keys with TTL: u64]
 *                            [digest: u64], BE; written by a clean close,
 *                            see store.c
 *     "c/stats"              present only between a clean close and open;
 *                            value "2", the version of the "s/" records.
 *                            Any other value (an older release wrote "1"
 *                            and 24-byte records) makes open recount.
 *
 * A slot's keys are therefore one contiguous range: partitions get snapshot
 * iterators, DeleteRange cleanup and size estimates for free.
 *
 * Statistics. keys(slot) counts physical keys, including ones logically
 * expired but not yet swept (as redis-server's DBSIZE does). bytes(slot) is
 * the sum of encoded key + value sizes. digest(slot) is the slot's term of
 * store_range_checksum (store_range_digest). All are exact at all times: kept
 * in memory, saved at a clean close, recounted from the data after a crash
 * (startup then costs one scan of the keys and one hash of every byte).
 *
 * Durability. Writes go to RocksDB with manual WAL flush: nothing reaches
 * the OS until store_sync(). The server calls store_sync() once per event-loop
 * turn, before any reply of that turn leaves (group commit):
 *   STORE_FSYNC_ALWAYS    flush + fsync the WAL every turn that wrote
 *   STORE_FSYNC_EVERYSEC  flush every turn; fsync at most once a second
 *                         (the caller's timer calls store_sync_wal())
 *   STORE_FSYNC_NO        flush every turn; never fsync (the OS decides)
 * In every mode an acknowledged write survives kill -9 of the process; with
 * ALWAYS it also survives power loss.
 *
 * Threads: one thread (the node's event loop) owns a store. Nothing here is
 * safe to call concurrently.
 */
#ifndef KEEL_STORE_H
#define KEEL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* KEEL_MUST_CHECK */

typedef struct store store;
typedef struct store_txn store_txn;

typedef enum { STORE_FSYNC_ALWAYS, STORE_FSYNC_EVERYSEC, STORE_FSYNC_NO } store_fsync;

typedef struct store_opts {
    store_fsync fsync;     /* default STORE_FSYNC_ALWAYS */
    size_t cache_bytes;    /* block cache; default 64 MiB */
    int create_if_missing; /* default 1 */
    /* RocksDB's memtable size, which also sizes each WAL file it
     * preallocates; default 64 MiB. Small stores (the move simulator's) use
     * less, so opening one does not allocate 70 MB. */
    size_t write_buffer_bytes;
} store_opts;

/* Value types (the first byte of every value). A compound key (hash, set,
 * ...) is one metadata record, whose payload is [version u64 BE][size u64
 * BE], plus one record per field or member, typed STORE_T_SUB | its key's
 * type, under the record keys below (docs/storage-format.md). */
enum {
    STORE_T_STRING = 0,
    STORE_T_HASH = 1,
    STORE_T_SET = 2,
    STORE_T_ZSET = 3,
    STORE_T_LIST = 4,
    STORE_T_STREAM = 5, /* node/stream.h */
    STORE_T_SUB = 0x80  /* flag: a field/member record, not a key */
};

/* A value read from the store. data/len stay valid until store_value_release,
 * whatever else happens on the store or txn meanwhile (a txn write of the
 * same key included). Every successful get must be released. */
typedef struct store_value {
    uint8_t type;
    int64_t expire_ms; /* absolute wall-clock ms; 0 = no expiry */
    const char *data;
    size_t len;
    void *priv_;    /* internal; do not touch */
    int priv_kind_; /* internal */
} store_value;

void store_opts_default(store_opts *o);
/* Parses "always|everysec|no". Returns 0 or KEEL_EINVAL. */
int store_fsync_parse(const char *s, store_fsync *out);
const char *store_fsync_name(store_fsync f);

/* Opens (creating if allowed) the store in dir. On failure returns a negative
 * KEEL_E* and writes a human-readable reason (from RocksDB or the OS) into
 * err[0..errcap). The directory must be writable; a path that is a file, is
 * unreadable, or holds a corrupt DB fails with KEEL_EIO or KEEL_ECORRUPT. */
KEEL_MUST_CHECK int store_open(const char *dir, const store_opts *o, store **out, char *err,
                               size_t errcap);
/* Flushes the WAL (fsync) and closes. NULL is a no-op. */
void store_free(store *s);

/* ---- Reads (no transaction) ---------------------------------------------
 * Returns 0 and fills *v, or KEEL_ENOTFOUND if the key is absent or its
 * expiry is <= now_ms, or KEEL_EIO. Release *v with store_value_release. */
KEEL_MUST_CHECK int store_get(store *s, unsigned slot, const char *key, size_t klen, int64_t now_ms,
                              store_value *v);
void store_value_release(store_value *v);

/* A record's physical state, as the statistics and digests see it: absent
 * (exists 0, the rest 0), or present (perhaps expired) with an encoded value
 * of vlen bytes, an expiry or not, the value's type byte, kv_hash of key and
 * value, and a compound key's version (0 for other types). */
typedef struct store_phys {
    int exists, has_ttl;
    uint8_t type;
    size_t vlen;
    uint64_t hash, ver;
} store_phys;

/* ---- Writes ------------------------------------------------------------
 * A txn is one command's writes. It reads its own writes. Commit adds them,
 * atomically, to the current turn: from then on every read (store_get,
 * store_txn_get, scans) sees them and the statistics include them, and the
 * next store_sync() hands the whole turn to RocksDB in one write before
 * flushing the WAL. Abort drops only this txn's writes. A store has one txn
 * object, reused: begin returns it; begin while one is open is a programming
 * error. Plain store_get never sees an open txn's writes. Expired values are
 * invisible to store_txn_get exactly as to store_get. */
store_txn *store_txn_begin(store *s);
KEEL_MUST_CHECK int store_txn_get(store_txn *t, unsigned slot, const char *key, size_t klen,
                                  int64_t now_ms, store_value *v);
/* Returns 0, KEEL_ENOMEM or KEEL_EINVAL (klen > 65535 - 2 is refused). */
KEEL_MUST_CHECK int store_txn_put(store_txn *t, unsigned slot, const char *key, size_t klen,
                                  uint8_t type, int64_t expire_ms, const void *data, size_t len);
/* Puts an already encoded value (the [type][expire-at] header followed by the
 * payload, as store_copy_range and the change capture hand them out) - the
 * destination side of a partition move. Apart from taking the header from
 * encoded_value it is exactly store_txn_put: same overlay, same statistics
 * (keys, bytes and keys with TTL, replacing any physical value). The value is
 * copied; encoded_value is borrowed for the call only. An expiry in the past
 * is stored as is (the key is then invisible and swept like any other).
 * Returns 0, KEEL_ENOMEM, or KEEL_EINVAL if no txn is open, slot >= 16384,
 * the key is too long, encoded_value is NULL, vlen < 9 (no room for the
 * header) or the expire-at field is negative as an int64. */
KEEL_MUST_CHECK int store_txn_put_raw(store_txn *t, unsigned slot, const char *key, size_t klen,
                                      const void *encoded_value, size_t vlen);
/* store_txn_put and store_txn_del for a record whose physical state the
 * caller knows from another record that every txn keeps in step with it (a
 * sorted set's score-index record and its member record, zset.h), so the
 * DB read that keeps the statistics exact is skipped: put_absent claims
 * the record is physically absent (not even expired), del_present that it
 * is present with type type, no expiry and the payload data[0..len). What
 * this turn wrote to the record still wins over the claim. A wrong claim
 * corrupts the per-slot counts and digests (a move's fence would then
 * refuse), so a debug build (no NDEBUG) checks it against the DB and
 * asserts. No expiry is written. Returns 0, KEEL_ENOMEM or KEEL_EINVAL
 * (no txn open, slot >= 16384, key too long, len but no data). */
KEEL_MUST_CHECK int store_txn_put_absent(store_txn *t, unsigned slot, const char *key, size_t klen,
                                         uint8_t type, const void *data, size_t len);
KEEL_MUST_CHECK int store_txn_del_present(store_txn *t, unsigned slot, const char *key, size_t klen,
                                          uint8_t type, const void *data, size_t len);
/* Tells the open txn the record's physical state, so that a following put
 * or delete of it makes no DB read for the statistics: a replica applying
 * a leader's records passes the state the leader's change capture reported
 * (store_change_cb's old), which is its own state too when both hold the
 * same position. What this turn already knows of the record wins (no-op).
 * With verify the DB is read anyway and its state used: *mismatch (may be
 * NULL) is then set to 1 when the claim differed, else 0. A wrong claim
 * taken unverified corrupts the per-slot counts and digests (a move's fence
 * would then refuse). Returns 0, KEEL_ENOMEM, KEEL_EIO (the verifying read
 * failed) or KEEL_EINVAL (no txn open, slot >= 16384, key too long, old
 * NULL). */
KEEL_MUST_CHECK int store_txn_seed(store_txn *t, unsigned slot, const char *key, size_t klen,
                                   const store_phys *old, int verify, int *mismatch);
/* *existed (may be NULL) is set to 1 if a physical key was removed (even an
 * expired one), else 0. */
KEEL_MUST_CHECK int store_txn_del(store_txn *t, unsigned slot, const char *key, size_t klen,
                                  int *existed);
/* Commits the txn into the turn (see above). Returns 0, or KEEL_EINVAL if
 * no txn is open. The txn is closed either way. */
KEEL_MUST_CHECK int store_txn_commit(store_txn *t);
/* Commits like store_txn_commit, except that the turn's group commit does
 * not flush or fsync the WAL for these writes: they become durable at the
 * next store_sync that does so for other writes, or at store_sync_wal (the
 * everysec timer, or an explicit call). For data no client can see yet - a
 * partition being copied in, whose destination calls store_sync_wal before
 * its copy may commit - so a copy costs no fsync per turn. */
KEEL_MUST_CHECK int store_txn_commit_lazy(store_txn *t);
/* Drops the txn's writes. */
void store_txn_abort(store_txn *t);

/* Group commit: writes the turn's committed txns to RocksDB and makes them
 * durable per the fsync mode (see the top of this file). Cheap when nothing
 * was written since the last call. KEEL_EINVAL while a txn is open.
 * *fsync_us (may be NULL) gets the time spent in fsync, 0 if none.
 * Returns 0 or KEEL_EIO (the caller must not acknowledge that turn's writes).
 *
 * Failure is sticky. Once a write of the turn batch (here or in any call
 * that writes it out early: scans, snapshots, captures, metadata, the
 * sweep, slot deletion) or a WAL flush has failed, the data on disk is
 * unknown: the batch and its statistics deltas are dropped, and this and
 * every later store_sync, store_sync_wal and store_meta_put return the
 * same error. The node stops without sending any reply of the turn;
 * store_free then saves no statistics, so the next open recounts.
 * Statistics and digests apply only once RocksDB accepted the batch;
 * until then the readers add the turn's pending deltas. */
KEEL_MUST_CHECK int store_sync(store *s, uint64_t *fsync_us);
/* The first half of store_sync: the turn's committed txns written to
 * RocksDB (memtable and WAL buffer, not flushed: not durable yet) and the
 * change captures told, so the caller can act on the turn's records (send
 * them to replicas) before the store_sync that makes them durable.
 * Returns 0, KEEL_EINVAL (a txn open) or the sticky failure. */
KEEL_MUST_CHECK int store_write_turn(store *s);
/* 1 when store_sync would have nothing of the current turn to make
 * durable: no strict (non-lazy) txn or metadata write committed since the
 * last store_sync, nothing written out early and not yet synced (at
 * --fsync always), and no failure. A reply of such a turn claims nothing
 * that is not durable yet, so it may leave before the turn's end
 * (rserver_poll_busy, during a busy script). An open txn (the running
 * script's) does not count. */
int store_turn_clean(const store *s);
/* The sticky failure (see store_sync): 0, or the KEEL_E* of the first
 * failed write or WAL flush. */
int store_failed(const store *s);
/* Forces flush + fsync now regardless of mode. Waits for the fsync on the
 * calling thread; the node uses the off-loop form below instead. */
KEEL_MUST_CHECK int store_sync_wal(store *s, uint64_t *fsync_us);

/* The same fsync off the owning thread, in three steps (node/walsync.h runs
 * them on a libuv worker):
 *   store_wal_sync_begin (owner): writes the turn and hands the WAL to the
 *     OS, as store_sync does; returns 1 when an fsync is needed (then run
 *     and end must follow, in that order), 0 when nothing written is
 *     unsynced (done: it is all durable), or the sticky failure.
 *   store_wal_sync_run (any one thread, while the owner goes on writing):
 *     the fsync. RocksDB's SyncWAL does not block writes from other
 *     threads; it touches nothing of the store but the DB handle and ws.
 *   store_wal_sync_end (owner): records the outcome. 0: every write handed
 *     to the WAL before begin is durable (later ones are not, unless
 *     another sync covered them). Otherwise the store is failed, as after a
 *     failed store_sync (fsyncgate), and the error is returned.
 * One sync may be in flight per store; store_free must not run while one
 * is. */
typedef struct store_wal_sync {
    uint64_t gen; /* the store's flush generation at begin */
    char *rerr;   /* RocksDB's error from run, owned until end */
    uint64_t us;  /* the fsync's duration */
} store_wal_sync;
KEEL_MUST_CHECK int store_wal_sync_begin(store *s, store_wal_sync *ws);
void store_wal_sync_run(store *s, store_wal_sync *ws);
KEEL_MUST_CHECK int store_wal_sync_end(store *s, store_wal_sync *ws);
store_fsync store_fsync_mode(const store *s);
/* Test-only observation (the replication simulator's power-loss model,
 * tests/sim/repsim.c): fn(arg) runs on the owner thread right after each
 * WAL fsync of this store that covers everything handed to the WAL before
 * it (store_meta_put, store_sync_wal, a store_sync in ALWAYS mode, a slot
 * deletion, store_wal_sync_end when nothing was flushed since begin).
 * Not for the fsyncs inside store_open and store_free. fn must not call
 * back into the store. NULL clears it; production sets none. */
void store_set_fsync_hook(store *s, void (*fn)(void *arg), void *arg);

/* ---- Snapshots on demand (store_save.c): SAVE, BGSAVE, SHUTDOWN SAVE -----
 * store_save_wal: the turn's committed txns written and the WAL fsynced now,
 * whatever the fsync mode (as store_sync + store_sync_wal; owner thread, no
 * txn open). store_flush_memtables: the memtables of every column family
 * written out to SST files, waiting for it; safe from another thread while
 * the owner goes on (RocksDB's Flush is), as long as the store stays open.
 * store_save: both, on the owner thread. Return 0 or KEEL_EIO (a sticky
 * failure as store_sync for the WAL part; a failed memtable flush is
 * returned only), KEEL_EINVAL with a txn open, KEEL_ENOMEM. */
KEEL_MUST_CHECK int store_save_wal(store *s);
KEEL_MUST_CHECK int store_flush_memtables(store *s);
KEEL_MUST_CHECK int store_save(store *s);

/* ---- Statistics and scans ----------------------------------------------
 * keys in store_slot_stats and store_total_keys count keys: records whose
 * type lacks STORE_T_SUB (field records are counted in bytes and in the
 * digests' key counts, not here). */
void store_slot_stats(const store *s, unsigned slot, uint64_t *keys, uint64_t *bytes);
uint64_t store_total_keys(const store *s);
uint64_t store_total_bytes(const store *s);
/* Keys that carry an expiry (expired or not yet swept). */
uint64_t store_total_expires(const store *s);

/* Calls cb for up to max keys of slot, in key order (user key bytes only,
 * without the slot prefix). Stops early if cb returns non-zero. Expired keys
 * are skipped. Returns the number of keys passed to cb, or a negative
 * KEEL_E*. */
typedef int (*store_key_cb)(void *arg, const char *key, size_t klen);
KEEL_MUST_CHECK long store_scan_slot(store *s, unsigned slot, size_t max, int64_t now_ms,
                                     store_key_cb cb, void *arg);

/* Deletes up to max expired keys, resuming from an internal cursor that wraps
 * around the keyspace. Commits its own txn. Slots the sweep filter skips are
 * neither read nor changed, and cost no budget: the call goes on to the next
 * slot. Returns the number deleted or a negative KEEL_E*; KEEL_EINVAL while
 * a txn is open. */
KEEL_MUST_CHECK long store_sweep_expired(store *s, int64_t now_ms, size_t max);

/* Installs a filter the expiry sweep asks before touching a slot: skip(arg,
 * slot) non-zero means leave the slot alone this time. NULL removes it.
 * A node uses it to keep the sweep out of partitions it is receiving or has
 * fenced, whose copies on the two nodes must not diverge. The filter is asked
 * only about slots holding keys with a TTL, at most once per slot per
 * store_sweep_expired call, and is asked again on every call (its answer may
 * change). skip runs inside the sweep's txn and must not call into the store.
 * arg is borrowed until the filter is replaced or removed. */
void store_set_sweep_filter(store *s, int (*skip)(void *arg, unsigned slot), void *arg);

/* Deletes every key of slots [lo, hi] with DeleteRange and zeroes their
 * statistics. Returns 0 or KEEL_EIO. */
KEEL_MUST_CHECK int store_delete_slots(store *s, unsigned lo, unsigned hi);

/* ---- Partition moves (DESIGN.md §6), store_move.c -------------------------
 * The source of a move takes a snapshot, copies the partition's slot range at
 * that snapshot in chunks (store_copy_range), and streams the changes made
 * after it (a change capture). The destination applies both with
 * store_txn_put_raw / store_txn_del. At the fence both sides compare
 * store_range_digest (no scan, so it fits in the write pause), which equals
 * store_range_checksum. A gapless copy + catch-up needs the snapshot and the
 * capture to start with no txn commit in between (for example one right after
 * the other in the same handler): the snapshot then holds every write
 * committed before it and the capture reports exactly the later ones. */

typedef struct store_snapshot store_snapshot;

/* Takes a consistent read view of the whole store. The current turn's
 * committed txns are written to RocksDB first (not fsynced; that stays with
 * store_sync), so the snapshot includes every committed command. Returns the
 * snapshot, owned by the caller and released with store_snapshot_free before
 * store_free; or NULL if a txn is open (programming error), on a RocksDB
 * write error, or out of memory (each is logged). While it lives RocksDB
 * keeps every version it can see, so space grows with the write rate: free
 * it when the copy is done. */
store_snapshot *store_snapshot_new(store *s);
/* Releases the snapshot. NULL is a no-op. */
void store_snapshot_free(store_snapshot *snap);
/* The RocksDB sequence number the snapshot reads at (DESIGN.md pos0): every
 * write with a sequence <= it is in the snapshot, none above it. */
uint64_t store_snapshot_seq(const store_snapshot *snap);

/* Receives one key of a range copy: slot, the user key (without the slot
 * prefix) and the encoded value ([type u8][expire-at u64 BE][payload], vlen
 * >= 9). The pointers are valid only during the call. Return 0 to go on,
 * non-zero to stop the copy after this key. */
typedef int (*store_kv_cb)(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                           size_t vlen);

/* Copies part of slots [slot_lo, slot_hi] as the snapshot sees them: calls cb
 * for each key in encoded-key order (slot, then user key bytes) starting
 * strictly after the encoded key after[0..afterlen) ([slot u16 BE][user key],
 * as a previous call returned in *next), or from the start of slot_lo when
 * after is NULL. It stops before a key once the keys and values delivered
 * reach max_bytes (encoded sizes), having delivered at least one key, so every
 * call makes progress; max_bytes bounds the work of one call and the caller's
 * event-loop time. Expired but unswept values are delivered like any other:
 * they are data, and expire on the destination at the same instant.
 * Writes made after the snapshot are never seen.
 *
 * Outputs: *next gets a malloc'd copy (caller frees) of the last delivered
 * encoded key, to pass back as after; NULL when the range is finished, which
 * it reports as soon as it knows (a call that delivered the last key sets
 * NULL). *nextlen gets its length (0 with NULL). On error both are NULL/0.
 *
 * Returns the number of keys delivered, or KEEL_EINVAL (snap NULL or of
 * another store, cb NULL, slot_lo > slot_hi, slot_hi >= 16384, after shorter
 * than 2 bytes or outside the range), KEEL_ECORRUPT (a value shorter than its
 * header), KEEL_ENOMEM or KEEL_EIO. May be called while a txn is open: it
 * reads only the snapshot. */
KEEL_MUST_CHECK long store_copy_range(store *s, const store_snapshot *snap, unsigned slot_lo,
                                      unsigned slot_hi, const char *after, size_t afterlen,
                                      size_t max_bytes, store_kv_cb cb, void *arg, char **next,
                                      size_t *nextlen);

/* Receives one change: slot, user key, and the key's new encoded value, or
 * val == NULL (vlen 0) for a delete. old is the record's physical state
 * before the writes this call reports (the state at the turn's start, or
 * at the turn's last early write-out), or NULL where the store does not
 * know it without a read (a gc or sweep delete of a record no command of
 * the turn touched). The pointers are valid only during the call. The
 * callback runs inside whichever store call writes the turn (most often
 * store_sync) and must not call into the store; copy what it needs. */
typedef void (*store_change_cb)(void *arg, unsigned slot, const char *key, size_t klen,
                                const char *val, size_t vlen, const store_phys *old);

/* Starts capturing the writes to slots [slot_lo, slot_hi]: each txn put and
 * delete committed after this call (client commands, store_txn_put_raw and
 * the expiry sweep alike) is reported to cb when the turn batch is handed to
 * RocksDB, i.e. at the store_sync() of that turn or an earlier internal write
 * (scans, snapshots, store_meta_put...), and only if RocksDB accepted it: a
 * turn whose write failed is not reported, just as it is not acknowledged.
 * Turns come in commit order. Within one turn each written key is reported
 * once, with its final state in that turn (a put then a delete of the same
 * key is one delete; values are absolute, so applying them in this order
 * reproduces the source), keys in the order the turn first touched them.
 * A delete may be reported for a key that did not exist at the start of the
 * turn; applying it is a no-op. store_delete_slots is NOT reported (it is a
 * DeleteRange outside any txn): do not delete a range under capture.
 * Writes committed before this call are not reported: the current turn is
 * written out first. Up to 8 captures may be active; ranges may overlap
 * (each capture gets its own calls). cb and arg are borrowed until
 * store_capture_stop. Returns a handle >= 0, or KEEL_EINVAL (cb NULL,
 * slot_lo > slot_hi, slot_hi >= 16384, a txn open), KEEL_ELIMIT (8 already
 * active) or KEEL_EIO (writing the current turn failed; no capture started). */
KEEL_MUST_CHECK int store_capture_start(store *s, unsigned slot_lo, unsigned slot_hi,
                                        store_change_cb cb, void *arg);
/* Stops a capture. The current turn is written out first, so every write
 * committed before this call has been reported when it returns, and nothing
 * after. Returns 0; KEEL_EINVAL for a handle not active or while a txn is
 * open (the capture then stays active); KEEL_EIO if writing the turn failed
 * (the capture is stopped anyway, and that turn's writes are lost as with
 * store_sync). */
KEEL_MUST_CHECK int store_capture_stop(store *s, int handle);

/* An order-independent checksum of slots [slot_lo, slot_hi]: the XOR over all
 * physical keys (expired but unswept ones included) of
 *   splitmix64_final(FNV-1a-64([klen u32 BE][encoded key][encoded value]))
 * where the encoded key carries the slot prefix and the encoded value its
 * header; the length prefix keeps (key, value) splits apart and the
 * splitmix64 finalizer mixes FNV's weak high bits. *xor_out gets the XOR,
 * *keys_out (may be NULL) the number of keys. Two stores holding the same keys
 * and values in the range give the same result whatever the write order,
 * flushes or compactions. Not cryptographic: it detects divergence, not an
 * adversary. Reads at snap, or the current data when snap is NULL (the turn
 * is then written out first and no txn may be open). Costs one scan of the
 * range: run it on a partition, not the keyspace, from the loop.
 * Returns 0 or KEEL_EINVAL (bad range, snap of another store, a txn open with
 * snap NULL), KEEL_EIO. */
KEEL_MUST_CHECK int store_range_checksum(store *s, const store_snapshot *snap, unsigned slot_lo,
                                         unsigned slot_hi, uint64_t *xor_out, uint64_t *keys_out);

/* The same value store_range_checksum(s, NULL, lo, hi, ...) would compute,
 * from per-slot digests the store keeps up to date on every write: O(hi-lo+1),
 * no scan, no I/O. Includes every committed txn (the current turn too).
 * *xor_out gets the XOR, *keys_out (may be NULL) the number of physical keys
 * (store_slot_stats' count); both are 0 on error. The digests follow every
 * way data changes: txn puts (raw too) and deletes, aborts, the expiry sweep,
 * store_delete_slots, and restarts (saved at a clean close, recomputed after
 * a crash). Costs the write path one FNV pass over each key and value it
 * writes or replaces, over bytes it already holds.
 * Returns 0 or KEEL_EINVAL (bad range, or a txn open). */
KEEL_MUST_CHECK int store_range_digest(store *s, unsigned slot_lo, unsigned slot_hi,
                                       uint64_t *xor_out, uint64_t *keys_out);

/* ---- Data model (DESIGN.md §14), store_types.c ---------------------------
 * The store's key argument is a record key, stored after the slot prefix.
 * Data format 3 (docs/storage-format.md) tags every record key:
 *   [0x00][user key]                                  a key: string value or
 *                                                     compound metadata
 *   [0x01][user klen u16 BE][user key][version u64 BE][field]
 *                                                     a field/member record
 *   [0x02][user klen u16 BE][user key][version u64 BE][score 8][member]
 *                                                     a sorted set's score-
 *                                                     index record (format 3;
 *                                                     score as core/zscore.h)
 * so a slot's keys sort before its field records and a key's fields of one
 * version are one contiguous range. DEL of a compound key drops only the
 * metadata record; the field records of versions no metadata names
 * (orphans) are deleted in the background by store_gc, through ordinary txn
 * deletes, so statistics, digests and change captures stay exact. The format
 * version is kept in the meta column family ("c/format") and checked at
 * open: a format-1 store (untagged keys) and a format-2 store (sorted sets
 * without score-index records) are upgraded in place, a later format is
 * refused. store_gc treats index records (tag 0x02) as field records. */
#define STORE_FORMAT 3
#define STORE_TAG_KEY 0x00
#define STORE_TAG_SUB 0x01
#define STORE_TAG_ZIDX 0x02
#define STORE_META_LEN 16u    /* [version][size] */
#define STORE_UKEY_MAX 65500u /* user key bytes a record key may hold */

/* Writes the record key of user key k[0..kl) ([0x00][k]) into out (room
 * for kl + 1). Returns its length, or 0 when kl > STORE_UKEY_MAX. */
size_t store_rkey(char *out, const char *k, size_t kl);
/* Writes the field-record prefix [0x01][kl u16][k][version] into out (room
 * for kl + 11). Returns its length, or 0 when kl > STORE_UKEY_MAX. Append
 * the field to get the record key. */
size_t store_sub_prefix(char *out, const char *k, size_t kl, uint64_t version);
/* Writes the score-index prefix [0x02][kl u16][k][version] into out (room
 * for kl + 11). Returns its length, or 0 when kl > STORE_UKEY_MAX. Append
 * the encoded score (core/zscore.h) and the member to get the record key. */
size_t store_zidx_prefix(char *out, const char *k, size_t kl, uint64_t version);
/* A fresh version for a compound key created now: unique among the
 * store's versions (wall-clock microseconds, bumped past the last one). */
uint64_t store_new_version(store *s);

/* Receives one record of store_scan_range: the record key (after the slot
 * prefix) and its decoded live value, valid only during the call. Return
 * non-zero to stop. */
typedef int (*store_rec_cb)(void *arg, const char *rkey, size_t rklen, const store_value *v);
/* Calls cb for the live records of slot whose record keys lie in
 * [from, to) in key order (to NULL: to the end of the slot), after skipping
 * the first skip of them, up to max records. The turn is written out first;
 * no txn may be open. Returns the number passed to cb (skipped ones not
 * counted), or KEEL_EINVAL, KEEL_EIO. */
long store_scan_range(store *s, unsigned slot, const char *from, size_t fromlen, const char *to,
                      size_t tolen, size_t skip, size_t max, int64_t now_ms, store_rec_cb cb,
                      void *arg);
/* store_scan_range in descending key order: the live records of slot in
 * [from, to), the last first, skipping the first skip (from the top), up
 * to max. to is required here (NULL is KEEL_EINVAL); it may lie past the
 * slot's last record. Same rules and returns as store_scan_range. */
long store_scan_range_rev(store *s, unsigned slot, const char *from, size_t fromlen, const char *to,
                          size_t tolen, size_t skip, size_t max, int64_t now_ms, store_rec_cb cb,
                          void *arg);
/* Background cleanup: examines up to max field records of slots that may
 * hold orphans (marked when a compound key's metadata is deleted, replaced
 * by another version or expired, when field records arrive by
 * store_txn_put_raw, and for every slot holding field records at open), and
 * deletes those no live metadata of the same version names. Skips a key's
 * live range with one seek. Honours the sweep filter. Commits its own txn.
 * Returns the number deleted, or KEEL_EINVAL (a txn open), KEEL_EIO. */
KEEL_MUST_CHECK long store_gc(store *s, int64_t now_ms, size_t max);
/* Slots still marked for store_gc (0 once every orphan is gone). */
unsigned store_gc_pending(const store *s);

/* ---- Metadata ------------------------------------------------------------
 * Small named values in the meta column family, written durably (synced)
 * before returning. get returns 0 and a malloc'd copy in *val (caller frees),
 * or KEEL_ENOTFOUND. */
KEEL_MUST_CHECK int store_meta_put(store *s, const char *name, const void *val, size_t len);
/* store_meta_put without the flush and fsync: the record goes to the WAL
 * after every write committed before it and before every later one, and is
 * durable with the next store_sync that flushes and fsyncs other writes (or
 * store_sync_wal). A crash keeps a prefix of the WAL: if a later write
 * survives, so does this record. For the replication position records
 * (node/rep.c), which must precede the next data, not be synced on their own.
 * A failed write fails the store (sticky, as store_sync). Returns 0,
 * KEEL_EINVAL (a txn open), KEEL_ENOMEM or KEEL_EIO. */
KEEL_MUST_CHECK int store_meta_put_lazy(store *s, const char *name, const void *val, size_t len);
/* A metadata record written with the open txn t: it commits or aborts with
 * t, and reaches RocksDB in the turn's one write, after the turn's data, so
 * a crash keeps both or neither (the WAL record of a write batch is whole
 * or absent). Durable as t's writes are (store_txn_commit: the turn's
 * fsync). store_meta_get sees it once the turn is written (store_sync or
 * store_write_turn). For a record that must describe exactly the data
 * written with it (a follower's replication position, node/rep.c).
 * Returns 0, KEEL_EINVAL (no txn open, no name, len but no val) or
 * KEEL_ENOMEM (the caller must then abort t). */
KEEL_MUST_CHECK int store_txn_meta_put(store_txn *t, const char *name, const void *val, size_t len);
KEEL_MUST_CHECK int store_meta_get(store *s, const char *name, char **val, size_t *len);

#endif
