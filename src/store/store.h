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
 *     "s/<slot u16 BE>"      [keys: u64][bytes: u64][keys with TTL: u64], BE;
 *                            written by a clean close, see store.c
 *     "c/stats"              present only between a clean close and open
 *
 * A slot's keys are therefore one contiguous range: partitions get snapshot
 * iterators, DeleteRange cleanup and size estimates for free.
 *
 * Statistics. keys(slot) counts physical keys, including ones logically
 * expired but not yet swept (as redis-server's DBSIZE does). bytes(slot) is
 * the sum of encoded key + value sizes. Both are exact at all times: kept in
 * memory, saved at a clean close, recounted from the data after a crash
 * (startup then costs one scan of the keys).
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

typedef struct store store;
typedef struct store_txn store_txn;

typedef enum { STORE_FSYNC_ALWAYS, STORE_FSYNC_EVERYSEC, STORE_FSYNC_NO } store_fsync;

typedef struct store_opts {
    store_fsync fsync;     /* default STORE_FSYNC_ALWAYS */
    size_t cache_bytes;    /* block cache; default 64 MiB */
    int create_if_missing; /* default 1 */
} store_opts;

enum { STORE_T_STRING = 0 }; /* value types; more come with hashes, lists... */

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
int store_open(const char *dir, const store_opts *o, store **out, char *err, size_t errcap);
/* Flushes the WAL (fsync) and closes. NULL is a no-op. */
void store_free(store *s);

/* ---- Reads (no transaction) ---------------------------------------------
 * Returns 0 and fills *v, or KEEL_ENOTFOUND if the key is absent or its
 * expiry is <= now_ms, or KEEL_EIO. Release *v with store_value_release. */
int store_get(store *s, unsigned slot, const char *key, size_t klen, int64_t now_ms,
              store_value *v);
void store_value_release(store_value *v);

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
int store_txn_get(store_txn *t, unsigned slot, const char *key, size_t klen, int64_t now_ms,
                  store_value *v);
/* Returns 0, KEEL_ENOMEM or KEEL_EINVAL (klen > 65535 - 2 is refused). */
int store_txn_put(store_txn *t, unsigned slot, const char *key, size_t klen, uint8_t type,
                  int64_t expire_ms, const void *data, size_t len);
/* *existed (may be NULL) is set to 1 if a physical key was removed (even an
 * expired one), else 0. */
int store_txn_del(store_txn *t, unsigned slot, const char *key, size_t klen, int *existed);
/* Commits the txn into the turn (see above). Returns 0, or KEEL_EINVAL if
 * no txn is open. The txn is closed either way. */
int store_txn_commit(store_txn *t);
/* Drops the txn's writes. */
void store_txn_abort(store_txn *t);

/* Group commit: writes the turn's committed txns to RocksDB and makes them
 * durable per the fsync mode (see the top of this file). Cheap when nothing
 * was written since the last call. KEEL_EINVAL while a txn is open.
 * *fsync_us (may be NULL) gets the time spent in fsync, 0 if none.
 * Returns 0 or KEEL_EIO (the caller must not acknowledge that turn's writes). */
int store_sync(store *s, uint64_t *fsync_us);
/* Forces flush + fsync now regardless of mode (the everysec timer). */
int store_sync_wal(store *s, uint64_t *fsync_us);
store_fsync store_fsync_mode(const store *s);

/* ---- Statistics and scans ---------------------------------------------- */
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
long store_scan_slot(store *s, unsigned slot, size_t max, int64_t now_ms, store_key_cb cb,
                     void *arg);

/* Deletes up to max expired keys, resuming from an internal cursor that wraps
 * around the keyspace. Commits its own txn. Returns the number deleted or a
 * negative KEEL_E*. */
long store_sweep_expired(store *s, int64_t now_ms, size_t max);

/* Deletes every key of slots [lo, hi] with DeleteRange and zeroes their
 * statistics. Returns 0 or KEEL_EIO. */
int store_delete_slots(store *s, unsigned lo, unsigned hi);

/* ---- Metadata ------------------------------------------------------------
 * Small named values in the meta column family, written durably (synced)
 * before returning. get returns 0 and a malloc'd copy in *val (caller frees),
 * or KEEL_ENOTFOUND. */
int store_meta_put(store *s, const char *name, const void *val, size_t len);
int store_meta_get(store *s, const char *name, char **val, size_t *len);

#endif
