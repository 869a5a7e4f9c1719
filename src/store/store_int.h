/* store_int.h - private to src/store: the structures shared by store.c and
 * store_move.c. Nothing outside src/store may include this.
 *
 * On-disk format (column family "default"):
 *
 *   key    offset 0  u16 BE  slot (0..16383)
 *          offset 2  ...     user key bytes (0..65533)
 *   value  offset 0  u8      type (STORE_T_*)
 *          offset 1  u64 BE  expire-at, wall-clock ms; 0 = no expiry
 *          offset 9  ...     payload
 *
 * Threads: everything here belongs to the store's one owner thread.
 */
#ifndef KEEL_STORE_INT_H
#define KEEL_STORE_INT_H

#include "core/buf.h"
#include "store/store.h"

#include <rocksdb/c.h>

#include <stddef.h>
#include <stdint.h>

#define STORE_CAPTURES 8u /* change captures active at once */

/* One change capture (store_capture_start). active == 0 marks a free entry. */
typedef struct store_capture {
    int active;
    unsigned lo, hi; /* slots, inclusive */
    store_change_cb cb;
    void *arg;
} store_capture;

enum { VALUE_NONE, VALUE_PINNED, VALUE_MALLOC }; /* store_value.priv_kind_ */
#define STORE_SLOTS 16384u
#define KEY_PREFIX 2u            /* slot, u16 big-endian */
#define KEY_MAX 65535u           /* encoded key bytes */
#define VAL_HDR 9u               /* type u8 + expire-at u64 */
#define SWEEP_EXAMINE_FACTOR 20u /* keys examined per key the sweep may delete */
#define DEFAULT_CACHE (64u << 20)
#define WRITE_BUFFER_BYTES (64u << 20)
#define ROCKSDB_INFO_LEVEL 1 /* rocksdb::InfoLogLevel::INFO_LEVEL (c.h names none) */
#define ROCKSDB_LOG_ROLL_BYTES (16u << 20)

/* digest: XOR of kv_hash() over the slot's physical keys, the per-slot term
 * of store_range_checksum, kept like the counts so store_range_digest needs
 * no scan. XOR is its own inverse: replacing a value XORs out the old hash
 * and XORs in the new one, whatever the order of writes. */
typedef struct slot_stat {
    uint64_t keys, bytes, expires; /* expires: keys with a TTL */
    uint64_t digest;
    uint64_t subs; /* of keys: field/member records (type & STORE_T_SUB) */
} slot_stat;

typedef struct slot_delta {
    uint16_t slot;
    int64_t dkeys, dbytes, dexpires, dsubs;
    uint64_t dxor; /* XORed into slot_stat.digest at commit */
} slot_delta;

/* What a txn knows about one key: read from the DB (written == 0) or
 * written by the txn, with the encoded value kept for read-your-writes.
 * Key and value bytes live in the txn's arena, referenced by offset. */
typedef struct txn_entry {
    size_t koff, klen;
    size_t voff; /* encoded value in the arena when written && exists */
    size_t vlen; /* encoded value size (physical, expired or not) */
    int exists;
    int has_ttl;   /* the physical value carries an expiry */
    uint64_t hash; /* kv_hash of the physical key and value when exists */
    uint8_t type;  /* the physical value's type byte when exists */
    uint64_t ver;  /* its version, for a compound key's metadata (else 0) */
    int written;
    uint32_t gen; /* the command that last saved this entry for undo */
    /* The physical state before the turn's writes (the change capture's
     * old), when known: set where the entry is made, never changed. */
    int orig_known;
    store_phys orig;
} txn_entry;

typedef struct txn_undo {
    size_t idx;     /* in ents */
    txn_entry prev; /* the entry before the current command changed it */
} txn_undo;

/* One store_txn spans an event-loop turn. Each command's begin..commit is a
 * save point inside it: commit keeps the command's writes in the turn batch,
 * abort rolls them back (batch save point, plus an undo log for the overlay
 * entries the command changed). store_sync() writes the whole turn batch to
 * RocksDB in one write, then flushes the WAL: one WAL record and one
 * write-path entry per turn instead of per command. */
struct store_txn {
    store *s;
    int open;                 /* a command is between begin and commit/abort */
    uint32_t gen;             /* command counter, for the undo log */
    rocksdb_writebatch_t *wb; /* the turn batch */
    /* The turn's final writes in key order, rebuilt from the overlay at
     * turn_write (store.c: turn_batch), and its scratch index. */
    rocksdb_writebatch_t *wb_sorted;
    struct turn_rec *recs;
    size_t cap_recs;
    size_t nops;        /* puts and deletes of the current command */
    size_t turn_ops;    /* puts and deletes committed this turn */
    size_t turn_strict; /* ...of them, by commands that need the turn's fsync */
    txn_undo *undo;
    size_t nundo, cap_undo;
    slot_delta *touched; /* slots this txn changed, in first-touch order */
    size_t ntouched, cap_touched;
    uint16_t tidx[STORE_SLOTS]; /* slot -> index in touched + 1; 0 = untouched */
    txn_entry *ents;            /* keys this txn has seen */
    size_t nents, cap_ents;
    uint32_t *hidx; /* open-addressing index into ents (+1); size hcap */
    size_t hcap;
    kbuf arena;
    /* Metadata records written with the turn (store_txn_meta_put), framed
     * [u32 klen][u32 vlen][key][value]; metas_mark: the length at the open
     * txn's begin (an abort cuts back to it); nmeta: this txn's. */
    kbuf metas;
    size_t metas_mark, nmeta;
};

struct store {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_options_t *meta_opts;
    rocksdb_block_based_table_options_t *bbo;
    rocksdb_cache_t *cache;
    rocksdb_column_family_handle_t *cf_data, *cf_meta;
    rocksdb_readoptions_t *ropts;
    rocksdb_readoptions_t *ropts_sweep; /* does not fill the block cache */
    rocksdb_writeoptions_t *wopts;      /* sync = 0: store_sync owns durability */
    store_fsync fsync;
    int dirty;          /* committed since the last WAL flush */
    int unsynced;       /* WAL flushed to the OS but not fsynced */
    uint64_t flush_gen; /* WAL flushes to the OS without an fsync (store_wal_sync) */
    int lazy;           /* lazily committed writes not yet flushed (store_txn_commit_lazy) */
    void (*fsync_hook)(void *arg); /* store_set_fsync_hook (the simulator's crash model) */
    void *fsync_hook_arg;
    char *dir;
    uint64_t total_keys, total_bytes, total_expires, total_subs;
    slot_stat stats[STORE_SLOTS];
    uint64_t last_version;          /* store_new_version */
    uint8_t gc_slot[STORE_SLOTS];   /* 1: the slot may hold orphaned sub-records */
    unsigned gc_pending, gc_cursor; /* marked slots; the slot store_gc resumes in... */
    char *gc_key;                   /* ...at this encoded key; len 0 = the slot's start */
    size_t gc_keylen;
    char kbuf[KEY_MAX];  /* encoded-key scratch */
    unsigned sweep_slot; /* the sweep resumes in this slot... */
    char *cursor;        /* ...at this encoded key; len 0 = the slot's start */
    size_t cursor_len;
    int (*sweep_skip)(void *arg, unsigned slot); /* store_set_sweep_filter */
    void *sweep_skip_arg;
    /* The turn's statistics deltas, applied to stats only once RocksDB
     * accepted the turn batch (turn_write); readers see stats + pend. */
    slot_delta pend[STORE_SLOTS];
    uint16_t pend_list[STORE_SLOTS]; /* slots with a pending delta */
    unsigned npend;
    uint8_t pend_on[STORE_SLOTS];
    /* Sticky: the KEEL_E* of the first failed write or WAL flush, 0 if none.
     * The data on disk is then unknown, so every later sync fails with it,
     * no reply of the turn may leave, and close does not save statistics. */
    int failed;
    store_capture captures[STORE_CAPTURES]; /* change captures, see store_move.c */
    unsigned ncaptures;                     /* active entries in captures */
    store_txn txn;
};

/* ---- Encoding ------------------------------------------------------------ */

static inline void put_be16(char *p, unsigned v) {
    p[0] = (char)(v >> 8);
    p[1] = (char)v;
}

static inline unsigned get_be16(const char *p) {
    return (unsigned)(uint8_t)p[0] << 8 | (uint8_t)p[1];
}

static inline void put_be64(char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (char)v;
}

static inline uint64_t get_be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

/* ---- Key-value hash (store_range_checksum, slot digests) ------------------
 * splitmix64_final(FNV-1a-64([klen u32 BE][encoded key][encoded value])).
 * Inline here because the write path (store.c) and the checksum scan
 * (store_move.c) must compute bit-identical values. FNV-1a is streamed, so
 * a value held in pieces (header, payload) hashes like its concatenation. */

static inline uint64_t fnv1a64(uint64_t h, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

/* splitmix64's finalizer: FNV-1a's high bits depend weakly on the last
 * bytes, and the XOR of many hashes needs every bit well mixed. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The FNV state after the length prefix and the encoded key k[0..kl): feed
 * it the encoded value with fnv1a64, then finish with mix64. */
static inline uint64_t kv_hash_key(const char *k, size_t kl) {
    char len[4] = {(char)(kl >> 24), (char)(kl >> 16), (char)(kl >> 8), (char)kl};
    return fnv1a64(fnv1a64(0xcbf29ce484222325ull, len, sizeof len), k, kl);
}

static inline uint64_t kv_hash(const char *k, size_t kl, const char *v, size_t vl) {
    return mix64(fnv1a64(kv_hash_key(k, kl), v, vl));
}

/* ---- Data model (store_types.c) -------------------------------------------
 * A compound type's metadata value carries [version u64][size u64] as its
 * payload; its field records carry the type | STORE_T_SUB. */
static inline int type_compound(uint8_t t) {
    return t >= 1 && t < STORE_T_SUB;
}

/* The version of a compound key's encoded value v[0..n), or 0. */
static inline uint64_t value_version(const char *v, size_t n) {
    return n >= VAL_HDR + 8 && type_compound((uint8_t)v[0]) ? get_be64(v + VAL_HDR) : 0;
}

/* Marks slot as possibly holding orphaned sub-records for store_gc. */
void store__gc_mark(store *s, unsigned slot);
/* Deletes the physical record ek (KEY_PREFIX + record key), known to exist
 * with an encoded value of vlen bytes, type type, kv_hash hash, in the open
 * txn. store.c. */
int store__txn_del_known(store_txn *t, unsigned slot, const char *ek, size_t eklen, size_t vlen,
                         int has_ttl, uint64_t hash, uint8_t type);
/* Checks the data format at open, upgrading a format-1 store (no record
 * tags) in place. Returns 0, KEEL_ECORRUPT (a format this build does not
 * know) or KEEL_EIO. store_types.c. */
int store__format_open(store *s, char *err, size_t errcap);

/* Writes the turn batch to RocksDB, reports it to the active change
 * captures once RocksDB accepted it (store__capture_emit), and clears the
 * overlay. The caller makes sure no txn is open. Returns 0 or KEEL_EIO.
 * Defined in store.c. */
int store__turn_write(store *s);
/* The statistics of slot as the current turn sees them: committed ones
 * plus the turn's pending deltas. store.c. */
slot_stat store__slot_view(const store *s, unsigned slot);
/* Logs a RocksDB error and frees it. Always returns KEEL_EIO. store.c. */
int store__rerr_log(const char *event, char *rerr);
/* Reports the final state of every key the turn wrote to each capture whose
 * range holds the key; called by turn_write once RocksDB accepted the batch.
 * store_move.c. */
void store__capture_emit(store *s);

#endif
