/* store.c - the node's RocksDB; see store.h for the contract and on-disk format.
 *
 * One RocksDB with two column families: "default" holds data, "meta" holds
 * node metadata and the per-slot statistics records. The WAL is flushed by
 * hand (manual_wal_flush): commits only append to RocksDB's in-process WAL
 * buffer, and store_sync() decides when those bytes reach the OS and when they
 * are fsynced. Two flags make that cheap when idle: dirty (committed since the
 * last flush) and unsynced (flushed but not fsynced).
 *
 * Statistics are derived data, kept exact in memory and applied at commit,
 * once RocksDB accepted the batch. They are not written with every commit:
 * store_free() saves them all with a "clean" marker, and store_open() loads
 * them and removes the marker (durably) before any write. After a crash the
 * marker is missing and open recounts every slot with one scan of the keys,
 * so the numbers are exact either way and the write path carries no stat
 * records. Put and del need the size of the physical value they replace
 * (expired or not): the txn remembers every key it read or wrote, so a
 * handler doing get-then-put on one key costs one read.
 *
 * Each slot also keeps a digest, the XOR of kv_hash(key, value) over its
 * keys (store_range_checksum's per-slot term), maintained like the counts:
 * a put XORs in the hash of the new value and out that of the one it
 * replaces, a delete XORs out the old one. The old hash is computed where
 * the txn reads the physical value anyway (db_get) and kept in its overlay
 * entry, so the digest costs one pass over the bytes already in hand and no
 * extra read. Saved with the counts; a crash recount rehashes every key.
 *
 * Group commit inside the store: a txn is a save point in a batch that spans
 * the whole event-loop turn, plus a per-key overlay (hashed when it grows)
 * that gives every later read of the turn - by txn or by store_get - the
 * turn's own writes, without the cost of a WriteBatchWithIndex. store_sync()
 * writes the turn batch with one rocksdb_write and then flushes the WAL.
 * Iterators only see the DB, so every scan first writes out the turn batch.
 *
 * Lifetimes. store_get and store_txn_get hand out a pinned RocksDB slice, or
 * for a value the txn itself wrote, a malloc'd copy. Either is owned by the
 * value (priv_, with priv_kind_ saying which) and freed by
 * store_value_release, so it outlives later txn operations as store.h
 * promises.

 * The move protocol's building blocks (snapshots, range copy, change capture,
 * checksums) live in store_move.c; the structures both files share are in
 * store_int.h. turn_write reports each turn to the active change captures.
 *
 * Sweep: visits only slots whose keys carry a TTL (counted like keys and
 * bytes), slot by slot from a saved cursor, examining at most 20 keys per key
 * it may delete, and at most one full cycle of slots per call. Slots the sweep
 * filter skips cost nothing but the call, so the cycle moves on past them.
 * Metadata values come back NUL-terminated.
 *
 * Invariants: at most one txn is open; memory stats describe exactly the
 * committed data; dirty implies the WAL buffer may hold bytes the OS has not
 * seen.
 */
#include "store/store_int.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/failpoint.h"
#include "core/log.h"

#include <rocksdb/c.h>

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Encodes [slot][key] into out (KEY_MAX bytes). Returns the length, or 0 if
 * the key cannot be stored. */
static size_t encode_key(char *out, unsigned slot, const char *key, size_t klen) {
    if (klen > KEY_MAX - KEY_PREFIX) return 0;
    put_be16(out, slot);
    if (klen) memcpy(out + KEY_PREFIX, key, klen);
    return KEY_PREFIX + klen;
}

static int is_expired(int64_t expire_ms, int64_t now_ms) {
    return expire_ms != 0 && expire_ms <= now_ms;
}

/* Fills v from an encoded value. Returns 0, KEEL_ENOTFOUND (expired) or
 * KEEL_EIO (too short to be ours). */
static int decode_value(const char *p, size_t n, int64_t now_ms, store_value *v) {
    if (n < VAL_HDR) return KEEL_EIO;
    int64_t exp = (int64_t)get_be64(p + 1);
    if (is_expired(exp, now_ms)) return KEEL_ENOTFOUND;
    v->type = (uint8_t)p[0];
    v->expire_ms = exp;
    v->data = p + VAL_HDR;
    v->len = n - VAL_HDR;
    return 0;
}

static void stat_key(char out[4], unsigned slot) {
    out[0] = 's';
    out[1] = '/';
    put_be16(out + 2, slot);
}

__attribute__((format(printf, 3, 4))) static void seterr(char *err, size_t cap, const char *fmt,
                                                         ...) {
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* Logs a RocksDB error and frees it. Always returns KEEL_EIO. */
static int rerr_log(const char *event, char *rerr) {
    char q[512];
    keel_log(KEEL_LOG_ERROR, event, "err=%s",
             keel_log_quote(q, sizeof q, rerr ? rerr : "", rerr ? strlen(rerr) : 0));
    rocksdb_free(rerr);
    return KEEL_EIO;
}

/* ---- Options and names ---------------------------------------------------- */

void store_opts_default(store_opts *o) {
    o->fsync = STORE_FSYNC_ALWAYS;
    o->cache_bytes = DEFAULT_CACHE;
    o->create_if_missing = 1;
    o->write_buffer_bytes = WRITE_BUFFER_BYTES;
}

static const char *fsync_names[] = {"always", "everysec", "no"};

int store_fsync_parse(const char *s, store_fsync *out) {
    if (!s) return KEEL_EINVAL;
    for (int i = 0; i < 3; i++)
        if (strcasecmp(s, fsync_names[i]) == 0) {
            *out = (store_fsync)i;
            return 0;
        }
    return KEEL_EINVAL;
}

const char *store_fsync_name(store_fsync f) {
    return (unsigned)f < 3 ? fsync_names[f] : "unknown";
}

store_fsync store_fsync_mode(const store *s) {
    return s->fsync;
}

/* ---- Open and close ------------------------------------------------------- */

/* mkdir -p. Returns 0 or -1 with errno set. */
static int mkdir_p(const char *dir) {
    char *p = strdup(dir);
    if (!p) return -1;
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) goto fail;
        *c = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) goto fail;
    free(p);
    return 0;
fail:;
    int e = errno;
    free(p);
    errno = e;
    return -1;
}

/* Checks (and creates) the data directory before RocksDB sees it, so a bad
 * path fails with the OS's reason rather than a RocksDB internal one. */
static int check_dir(const char *dir, int create, char *err, size_t cap) {
    struct stat st;
    int e = 0;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) e = ENOTDIR;
    } else if (errno != ENOENT || !create) {
        e = errno;
    } else if (mkdir_p(dir) != 0) {
        e = errno;
    }
    if (!e && access(dir, R_OK | W_OK | X_OK) != 0) e = errno;
    if (!e) return 0;
    seterr(err, cap, "cannot use data directory %s: %s", dir, strerror(e));
    return KEEL_EIO;
}

#define CLEAN_KEY "c/stats" /* present only between a clean close and the next open */
/* The clean marker's value: the format of the "s/" records it vouches for.
 * '1' (and no version) had 24-byte records without the digest; anything but
 * the current version is recounted, never parsed. */
#define STATS_VERSION '2'
#define STATS_REC 32u /* [keys][bytes][keys with TTL][digest], u64 BE each */

static void stats_reset(store *s) {
    memset(s->stats, 0, sizeof s->stats);
    s->total_keys = s->total_bytes = s->total_expires = s->total_subs = 0;
}

/* Loads the "s/<slot>" records saved by a clean close. */
static int load_stats(store *s) {
    int rc = 0;
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, s->ropts, s->cf_meta);
    for (rocksdb_iter_seek(it, "s/", 2); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (kl < 2 || memcmp(k, "s/", 2) != 0) break;
        if (kl != 4 || vl != STATS_REC || get_be16(k + 2) >= STORE_SLOTS) {
            keel_log(KEEL_LOG_ERROR, "store_stats_corrupt", "klen=%zu vlen=%zu", kl, vl);
            rc = KEEL_ECORRUPT;
            break;
        }
        slot_stat *st = &s->stats[get_be16(k + 2)];
        st->keys = get_be64(v);
        st->bytes = get_be64(v + 8);
        st->expires = get_be64(v + 16);
        st->digest = get_be64(v + 24);
        s->total_keys += st->keys;
        s->total_bytes += st->bytes;
        s->total_expires += st->expires;
    }
    /* "t/<slot>": [field records u64], only for slots that hold some; a
     * release without field records wrote none. */
    for (rocksdb_iter_seek(it, "t/", 2); !rc && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (kl < 2 || memcmp(k, "t/", 2) != 0) break;
        if (kl != 4 || vl != 8 || get_be16(k + 2) >= STORE_SLOTS) {
            keel_log(KEEL_LOG_ERROR, "store_stats_corrupt", "klen=%zu vlen=%zu", kl, vl);
            rc = KEEL_ECORRUPT;
            break;
        }
        s->stats[get_be16(k + 2)].subs = get_be64(v);
        s->total_subs += get_be64(v);
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) rc = rerr_log("store_stats_load", rerr);
    rocksdb_iter_destroy(it);
    return rc;
}

/* Recounts every slot from the data itself: the path after a crash. */
static int recount_stats(store *s) {
    stats_reset(s);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(ro, 0);
    rocksdb_readoptions_set_total_order_seek(ro, 1); /* across slot prefixes */
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (kl < KEY_PREFIX || get_be16(k) >= STORE_SLOTS) continue;
        slot_stat *st = &s->stats[get_be16(k)];
        int ttl = vl >= VAL_HDR && get_be64(v + 1) != 0;
        int sub = vl >= 1 && ((uint8_t)v[0] & STORE_T_SUB);
        st->subs += (uint64_t)sub;
        s->total_subs += (uint64_t)sub;
        st->keys++;
        st->bytes += kl + vl;
        st->expires += (uint64_t)ttl;
        st->digest ^= kv_hash(k, kl, v, vl);
        s->total_keys++;
        s->total_bytes += kl + vl;
        s->total_expires += (uint64_t)ttl;
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return rerr ? rerr_log("store_recount", rerr) : 0;
}

/* Makes the in-memory statistics valid, and the on-disk ones stale from now
 * on: a crash before the next clean close must recount. */
static int open_stats(store *s) {
    char *rerr = NULL;
    size_t vl = 0;
    char *marker =
        rocksdb_get_cf(s->db, s->ropts, s->cf_meta, CLEAN_KEY, strlen(CLEAN_KEY), &vl, &rerr);
    if (rerr) return rerr_log("store_stats_open", rerr);
    int clean = marker != NULL;
    int current = clean && vl == 1 && marker[0] == STATS_VERSION;
    rocksdb_free(marker);
    int rc = current ? load_stats(s) : KEEL_ENOTFOUND;
    if (rc) {
        uint64_t t0 = keel_mono_us();
        if ((rc = recount_stats(s))) return rc;
        /* A new store has no marker either; only a recount that found data
         * is news. */
        keel_log(s->total_keys ? KEEL_LOG_INFO : KEEL_LOG_DEBUG, "store_recount",
                 "reason=%s keys=%llu bytes=%llu ms=%llu",
                 !clean     ? "no-clean-close"
                 : !current ? "stats-old-format"
                            : "stats-unreadable",
                 (unsigned long long)s->total_keys, (unsigned long long)s->total_bytes,
                 (unsigned long long)((keel_mono_us() - t0) / 1000));
    }
    if (!clean) return 0;
    rocksdb_delete_cf(s->db, s->wopts, s->cf_meta, CLEAN_KEY, strlen(CLEAN_KEY), &rerr);
    if (rerr) return rerr_log("store_stats_open", rerr);
    rocksdb_flush_wal(s->db, 1, &rerr);
    return rerr ? rerr_log("store_stats_open", rerr) : 0;
}

/* Saves every slot's statistics and the clean marker in one synced batch. */
static int save_stats(store *s) {
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    char a[4], b[4];
    stat_key(a, 0);
    memcpy(b, "s/\xff\xff", 4);
    rocksdb_writebatch_delete_range_cf(wb, s->cf_meta, a, 4, b, 4);
    rocksdb_writebatch_delete_range_cf(wb, s->cf_meta, "t/\0\0", 4, "t/\xff\xff", 4);
    for (unsigned slot = 0; slot < STORE_SLOTS; slot++) {
        const slot_stat *st = &s->stats[slot];
        if (!st->keys && !st->bytes) continue;
        if (st->subs) {
            char tk[4] = {'t', '/'}, tv[8];
            put_be16(tk + 2, slot);
            put_be64(tv, st->subs);
            rocksdb_writebatch_put_cf(wb, s->cf_meta, tk, 4, tv, 8);
        }
        char k[4], v[STATS_REC];
        stat_key(k, slot);
        put_be64(v, st->keys);
        put_be64(v + 8, st->bytes);
        put_be64(v + 16, st->expires);
        put_be64(v + 24, st->digest);
        rocksdb_writebatch_put_cf(wb, s->cf_meta, k, 4, v, STATS_REC);
    }
    const char version = STATS_VERSION;
    rocksdb_writebatch_put_cf(wb, s->cf_meta, CLEAN_KEY, strlen(CLEAN_KEY), &version, 1);
    char *rerr = NULL;
    rocksdb_write(s->db, s->wopts, wb, &rerr);
    rocksdb_writebatch_destroy(wb);
    if (!rerr) rocksdb_flush_wal(s->db, 1, &rerr);
    return rerr ? rerr_log("store_stats_save", rerr) : 0;
}

static void set_options(store *s, const store_opts *o) {
    s->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(s->opts, o->create_if_missing ? 1 : 0);
    rocksdb_options_set_create_missing_column_families(s->opts, 1);
    rocksdb_options_increase_parallelism(s->opts, 2);
    rocksdb_options_set_manual_wal_flush(s->opts, 1);
    /* Write the WAL back in the background as it grows, so that a sync
     * after a long run of unsynced writes (--fsync no, or a partition copied
     * in with lazy commits) finds little left to do. */
    rocksdb_options_set_wal_bytes_per_sync(s->opts, 1u << 20);
    rocksdb_options_set_write_buffer_size(s->opts, o->write_buffer_bytes ? o->write_buffer_bytes
                                                                         : WRITE_BUFFER_BYTES);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(s->opts, 1);
    rocksdb_options_set_bytes_per_sync(s->opts, 1 << 20);
    /* Most SETs write new keys: a memtable bloom makes the stats lookup of
     * an absent key cheap before it reaches the SST blooms. Its size is
     * 1 % of the memtable (640 KiB of 64 MiB, ~8 bits per record of 80 B):
     * a fresh memtable's bloom is allocated and zeroed inside the write that
     * switches memtables, on the loop thread, and at 5 % (3.2 MiB) that
     * write took 3.3-5 ms of CPU against 0.8-1.9 ms at 1 %
     * (docs/benchmarks.md, "The longest turn of a move"). */
    rocksdb_options_set_memtable_whole_key_filtering(s->opts, 1);
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(s->opts, 0.01);
    /* The slot prefix is the prefix extractor: the SST prefix blooms and the
     * memtable bloom are built on it, and iterators stay within one slot
     * (prefix_same_as_start) or ask for total order. */
    rocksdb_options_set_prefix_extractor(s->opts,
                                         rocksdb_slicetransform_create_fixed_prefix(KEY_PREFIX));
    /* The memtable is RocksDB's default skiplist (InlineSkipList: key bytes
     * inline in the node, one cache miss per step), not the hash of per-slot
     * skiplists keel used before (issue 13). That one's buckets are the old
     * SkipList, whose nodes point at their keys (two misses per step), and a
     * compound key puts all its field records in one slot's bucket, so the
     * hash bought nothing for them: with it, perf put 60 % of the node's CPU
     * during unpipelined ZADD in the bucket's FindGreaterOrEqual and key
     * comparator; with the inline skiplist a ZADD costs ~30 % less CPU, and
     * SET/GET the same (docs/benchmarks.md). The inline skiplist also keeps
     * a splice of the last insert, so the sorted runs a move destination
     * applies insert in near-constant time. */

    /* RocksDB's own LOG (DIR/LOG). Debian builds librocksdb without NDEBUG,
     * so its default level is DEBUG, and at DEBUG DBImpl::FlushWAL writes a
     * line for every call: one per group commit, with a localtime and a
     * formatted write on the loop thread, and a file that grew by ~80 bytes
     * per turn for as long as the process ran (1,828 lines for 20,000
     * unpipelined SETs). INFO keeps flushes, compactions and the periodic
     * stats; the file rolls at 16 MiB and RocksDB keeps four files. */
    rocksdb_options_set_info_log_level(s->opts, ROCKSDB_INFO_LEVEL);
    rocksdb_options_set_max_log_file_size(s->opts, ROCKSDB_LOG_ROLL_BYTES);
    rocksdb_options_set_keep_log_file_num(s->opts, 4);

    /* One writer thread: concurrent memtable inserts buy nothing. */
    rocksdb_options_set_allow_concurrent_memtable_write(s->opts, 0);

    s->cache = rocksdb_cache_create_lru(o->cache_bytes ? o->cache_bytes : DEFAULT_CACHE);
    s->bbo = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(s->bbo, s->cache);
    rocksdb_block_based_options_set_filter_policy(s->bbo,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(s->bbo, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(s->bbo, 1);
    rocksdb_options_set_block_based_table_factory(s->opts, s->bbo);

    s->meta_opts = rocksdb_options_create_copy(s->opts);

    s->ropts = rocksdb_readoptions_create();
    s->ropts_sweep = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(s->ropts_sweep, 0);
    s->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(s->wopts, 0);
}

int store_open(const char *dir, const store_opts *o, store **out, char *err, size_t errcap) {
    store_opts def;
    int rc;
    char *rerr = NULL;
    if (err && errcap) err[0] = 0;
    *out = NULL;
    if (!o) {
        store_opts_default(&def);
        o = &def;
    }
    if (!dir || !*dir || (unsigned)o->fsync > STORE_FSYNC_NO) {
        seterr(err, errcap, "invalid store options");
        return KEEL_EINVAL;
    }
    if ((rc = check_dir(dir, o->create_if_missing, err, errcap))) return rc;

    uint64_t t0 = keel_mono_us();
    /* RocksDB's per-thread perf counters cost a TLS lookup per key
     * comparison; nobody reads them. Per thread: the loop thread opens. */
    rocksdb_set_perf_level(1 /* kDisable */);
    store *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        seterr(err, errcap, "out of memory");
        return KEEL_ENOMEM;
    }
    s->fsync = o->fsync;
    s->txn.s = s;
    set_options(s, o);
    s->txn.wb = rocksdb_writebatch_create();
    s->txn.wb_sorted = rocksdb_writebatch_create();
    kbuf_init(&s->txn.arena);
    kbuf_init(&s->txn.metas);

    const char *names[2] = {"default", "meta"};
    const rocksdb_options_t *cfo[2] = {s->opts, s->meta_opts};
    rocksdb_column_family_handle_t *h[2] = {NULL, NULL};
    s->db = rocksdb_open_column_families(s->opts, dir, 2, names, cfo, h, &rerr);
    if (rerr) {
        rc = strncmp(rerr, "Corruption", 10) == 0 ? KEEL_ECORRUPT : KEEL_EIO;
        seterr(err, errcap, "cannot open store in %s: %s", dir, rerr);
        rocksdb_free(rerr);
        goto fail;
    }
    s->cf_data = h[0];
    s->cf_meta = h[1];
    if ((rc = store__format_open(s, err, errcap))) goto fail;
    if ((rc = open_stats(s))) {
        seterr(err, errcap, "cannot open store in %s: cannot read or rebuild statistics", dir);
        goto fail;
    }
    for (unsigned slot = 0; slot < STORE_SLOTS; slot++) /* orphans left by a previous run */
        if (s->stats[slot].subs) store__gc_mark(s, slot);
    keel_log(KEEL_LOG_INFO, "store_open", "dir=%s fsync=%s keys=%llu bytes=%llu ms=%llu", dir,
             store_fsync_name(s->fsync), (unsigned long long)s->total_keys,
             (unsigned long long)s->total_bytes,
             (unsigned long long)((keel_mono_us() - t0) / 1000));
    *out = s;
    return 0;
fail:
    store_free(s);
    return rc;
}

/* Ends the current command's bookkeeping (not the turn batch). */
static void cmd_reset(store_txn *t) {
    for (size_t i = 0; i < t->ntouched; i++)
        t->tidx[t->touched[i].slot] = 0;
    t->ntouched = 0;
    t->nops = 0;
    t->nundo = 0;
    t->nmeta = 0;
    t->open = 0;
}

/* Forgets the turn batch and the overlay. */
static void turn_clear(store_txn *t) {
    rocksdb_writebatch_clear(t->wb);
    rocksdb_writebatch_clear(t->wb_sorted);
    t->turn_ops = t->turn_strict = 0;
    if (t->nents && t->hcap) memset(t->hidx, 0, t->hcap * sizeof *t->hidx);
    t->nents = 0;
    t->arena.len = 0;
    if (t->arena.cap > (4u << 20)) kbuf_shrink(&t->arena, 0);
    t->metas.len = t->metas_mark = 0;
    if (t->metas.cap > (1u << 20)) kbuf_shrink(&t->metas, 0);
}

static uint64_t apply_delta(uint64_t v, int64_t d, unsigned slot) {
    if (d < 0 && (uint64_t)-d > v) {
        keel_log(KEEL_LOG_ERROR, "store_stats_underflow", "slot=%u have=%llu delta=%lld", slot,
                 (unsigned long long)v, (long long)d);
        return 0;
    }
    return v + (uint64_t)d;
}

static uint64_t view_delta(uint64_t v, int64_t d) {
    return d < 0 && (uint64_t)-d > v ? 0 : v + (uint64_t)d;
}

slot_stat store__slot_view(const store *s, unsigned slot) {
    slot_stat st = s->stats[slot];
    if (!s->pend_on[slot]) return st;
    const slot_delta *d = &s->pend[slot];
    st.keys = view_delta(st.keys, d->dkeys);
    st.bytes = view_delta(st.bytes, d->dbytes);
    st.expires = view_delta(st.expires, d->dexpires);
    st.subs = view_delta(st.subs, d->dsubs);
    st.digest ^= d->dxor;
    return st;
}

/* Adds a committed command's deltas to the turn's pending ones. Cannot fail:
 * the pending table has a place for every slot. */
static void pend_add(store *s, const slot_delta *d) {
    slot_delta *p = &s->pend[d->slot];
    if (!s->pend_on[d->slot]) {
        s->pend_on[d->slot] = 1;
        s->pend_list[s->npend++] = d->slot;
        *p = (slot_delta){.slot = d->slot};
    }
    p->dkeys += d->dkeys;
    p->dbytes += d->dbytes;
    p->dexpires += d->dexpires;
    p->dsubs += d->dsubs;
    p->dxor ^= d->dxor;
}

/* Applies (apply != 0) or drops the turn's pending deltas. */
static void pend_finish(store *s, int apply) {
    for (unsigned i = 0; i < s->npend; i++) {
        unsigned slot = s->pend_list[i];
        const slot_delta *d = &s->pend[slot];
        s->pend_on[slot] = 0;
        if (!apply) continue;
        slot_stat *st = &s->stats[slot];
        s->total_keys -= st->keys;
        s->total_bytes -= st->bytes;
        s->total_expires -= st->expires;
        s->total_subs -= st->subs;
        st->keys = apply_delta(st->keys, d->dkeys, slot);
        st->bytes = apply_delta(st->bytes, d->dbytes, slot);
        st->expires = apply_delta(st->expires, d->dexpires, slot);
        st->subs = apply_delta(st->subs, d->dsubs, slot);
        st->digest ^= d->dxor;
        s->total_keys += st->keys;
        s->total_bytes += st->bytes;
        s->total_expires += st->expires;
        s->total_subs += st->subs;
    }
    s->npend = 0;
}

/* Records the first durable-path failure; see store.failed. Returns rc. */
static int set_failed(store *s, int rc) {
    if (!s->failed) {
        s->failed = rc;
        keel_log(KEEL_LOG_ERROR, "store_failed", "error=\"%s\"", keel_strerror(rc));
    }
    return rc;
}

static const char *ent_key(const store_txn *t, const txn_entry *e);

/* One key the turn wrote, for turn_batch's sort. */
struct turn_rec {
    const char *k;
    size_t kl;
    const txn_entry *e;
};

static int key_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int turn_rec_cmp(const void *pa, const void *pb) {
    const struct turn_rec *a = pa, *b = pb;
    return key_cmp(a->k, a->kl, b->k, b->kl);
}

/* The batch turn_write hands RocksDB: the final state of every key the turn
 * wrote (the overlay holds it), one put or delete per key, in key order.
 * Same end state as the turn batch, which has every command's writes in
 * command order; but a key many commands of the turn wrote (a hot
 * compound key's metadata: 50 clients' ZADDs to one set) costs one
 * memtable insert instead of one per command, and inserts in key order
 * reuse the skiplist's splice of the previous one instead of searching
 * from the top (perf: 40 % of the node's CPU during ZADD was memtable
 * inserts). Nothing reads a turn's intermediate states: snapshots,
 * iterators and change captures all begin at a turn boundary. When the
 * turn batch already is that (each key once, in order: a move's copy) or
 * the scratch index cannot grow, the turn batch itself is returned. */
static rocksdb_writebatch_t *turn_batch(store *s) {
    store_txn *t = &s->txn;
    size_t n = 0;
    int sorted = 1;
    const txn_entry *prev = NULL;
    for (size_t i = 0; i < t->nents; i++) {
        const txn_entry *e = &t->ents[i];
        if (!e->written) continue;
        if (prev && sorted && key_cmp(ent_key(t, prev), prev->klen, ent_key(t, e), e->klen) >= 0)
            sorted = 0;
        prev = e;
        n++;
    }
    if (sorted && n == t->turn_ops) return t->wb;
    if (n > t->cap_recs) {
        size_t cap = t->cap_recs ? t->cap_recs : 64;
        while (cap < n)
            cap *= 2;
        struct turn_rec *p = realloc(t->recs, cap * sizeof *p);
        if (!p) return t->wb;
        t->recs = p;
        t->cap_recs = cap;
    }
    n = 0;
    for (size_t i = 0; i < t->nents; i++) {
        const txn_entry *e = &t->ents[i];
        if (e->written) t->recs[n++] = (struct turn_rec){ent_key(t, e), e->klen, e};
    }
    if (!sorted) qsort(t->recs, n, sizeof *t->recs, turn_rec_cmp);
    rocksdb_writebatch_clear(t->wb_sorted);
    for (size_t i = 0; i < n; i++) {
        const txn_entry *e = t->recs[i].e;
        if (e->exists)
            rocksdb_writebatch_put_cf(t->wb_sorted, s->cf_data, t->recs[i].k, t->recs[i].kl,
                                      t->arena.p + e->voff, e->vlen);
        else
            rocksdb_writebatch_delete_cf(t->wb_sorted, s->cf_data, t->recs[i].k, t->recs[i].kl);
    }
    return t->wb_sorted;
}

/* Writes the turn's committed commands to RocksDB (WAL buffer + memtable),
 * applies their statistics, and clears the overlay. A failed write is
 * sticky (store.failed): the batch and its deltas are dropped, and this and
 * every later call return the error, so the turn-end store_sync fails and
 * no reply of the turn leaves. Returns 0 or KEEL_EIO. */
/* The turn's metadata records (store_txn_meta_put), after its data in the
 * batch RocksDB gets: one write, so both survive a crash or neither. */
static rocksdb_writebatch_t *with_metas(store *s, rocksdb_writebatch_t *b) {
    const kbuf *m = &s->txn.metas;
    for (size_t off = 0; off + 8 <= m->len;) {
        uint32_t h[2];
        memcpy(h, m->p + off, sizeof h);
        const char *k = m->p + off + 8;
        rocksdb_writebatch_put_cf(b, s->cf_meta, k, h[0], k + h[0], h[1]);
        off += 8 + (size_t)h[0] + h[1];
    }
    return b;
}

static int turn_write(store *s) {
    store_txn *t = &s->txn;
    int rc = s->failed;
    if (!rc && (t->turn_ops || t->metas.len)) {
        char *rerr = NULL;
        if (FAILPOINT("store.turn_write") == FP_ERROR)
            rerr = strdup("failpoint store.turn_write");
        else
            rocksdb_write(s->db, s->wopts, with_metas(s, turn_batch(s)), &rerr);
        if (rerr) {
            rc = set_failed(s, rerr_log("store_commit", rerr));
        } else {
            if (t->turn_strict)
                s->dirty = 1;
            else
                s->lazy = 1; /* durable at the next fsync, not this turn's */
            /* Only what RocksDB accepted, while the overlay still holds it. */
            if (s->ncaptures) store__capture_emit(s);
        }
    }
    pend_finish(s, rc == 0);
    turn_clear(t);
    return rc;
}

int store__turn_write(store *s) {
    return turn_write(s);
}

int store_write_turn(store *s) {
    if (s->txn.open) return KEEL_EINVAL;
    return turn_write(s);
}

int store__rerr_log(const char *event, char *rerr) {
    return rerr_log(event, rerr);
}

void store_free(store *s) {
    if (!s) return;
    if (s->txn.open) store_txn_abort(&s->txn);
    if (s->db && s->txn.wb && !s->failed) (void)turn_write(s);
    /* After a failure the data is unknown: no clean marker, so the next open
     * recounts from what is really there. */
    if (s->db && !s->failed) (void)save_stats(s); /* also flushes and fsyncs the WAL */
    if (s->cf_data) rocksdb_column_family_handle_destroy(s->cf_data);
    if (s->cf_meta) rocksdb_column_family_handle_destroy(s->cf_meta);
    if (s->db) {
        rocksdb_close(s->db);
        keel_log(KEEL_LOG_INFO, "store_close", "dir=%s keys=%llu", s->dir,
                 (unsigned long long)s->total_keys);
    }
    if (s->txn.wb) rocksdb_writebatch_destroy(s->txn.wb);
    if (s->txn.wb_sorted) rocksdb_writebatch_destroy(s->txn.wb_sorted);
    free(s->txn.recs);
    free(s->txn.touched);
    free(s->txn.undo);
    free(s->txn.ents);
    free(s->txn.hidx);
    kbuf_close(&s->txn.arena);
    kbuf_close(&s->txn.metas);
    if (s->ropts) rocksdb_readoptions_destroy(s->ropts);
    if (s->ropts_sweep) rocksdb_readoptions_destroy(s->ropts_sweep);
    if (s->wopts) rocksdb_writeoptions_destroy(s->wopts);
    if (s->opts) rocksdb_options_destroy(s->opts);
    if (s->meta_opts) rocksdb_options_destroy(s->meta_opts);
    if (s->bbo) rocksdb_block_based_options_destroy(s->bbo);
    if (s->cache) rocksdb_cache_destroy(s->cache);
    free(s->cursor);
    free(s->gc_key);
    free(s->dir);
    free(s);
}

/* ---- Reads ---------------------------------------------------------------- */

/* Point read of an encoded key from the DB. ph (may be NULL) gets the
 * physical value's state, expired or not (a txn about to remember the key:
 * the bytes are at hand only now). On a live value fills v with a pinned
 * slice and returns 0; otherwise KEEL_ENOTFOUND, KEEL_EIO. */
static int db_get(store *s, const char *ek, size_t eklen, int64_t now_ms, store_value *v,
                  store_phys *ph) {
    char *rerr = NULL;
    if (ph) *ph = (store_phys){0};
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned_cf(s->db, s->ropts, s->cf_data, ek, eklen, &rerr);
    if (rerr) return rerr_log("store_get", rerr);
    if (!ps) return KEEL_ENOTFOUND;
    size_t vlen;
    const char *p = rocksdb_pinnableslice_value(ps, &vlen);
    if (ph)
        *ph = (store_phys){.exists = 1,
                           .has_ttl = vlen >= VAL_HDR && get_be64(p + 1) != 0,
                           .type = vlen ? (uint8_t)p[0] : 0,
                           .vlen = vlen,
                           .hash = kv_hash(ek, eklen, p, vlen),
                           .ver = value_version(p, vlen)};
    int rc = decode_value(p, vlen, now_ms, v);
    if (rc) {
        rocksdb_pinnableslice_destroy(ps);
        memset(v, 0, sizeof *v);
        return rc;
    }
    v->priv_ = ps;
    v->priv_kind_ = VALUE_PINNED;
    return 0;
}

static txn_entry *ent_find(store_txn *t, const char *ek, size_t eklen);
static const txn_entry *committed_entry(const store_txn *t, const txn_entry *e);
static int overlay_value(store_txn *t, const txn_entry *e, int64_t now_ms, store_value *v);

int store_get(store *s, unsigned slot, const char *key, size_t klen, int64_t now_ms,
              store_value *v) {
    memset(v, 0, sizeof *v);
    if (slot >= STORE_SLOTS) return KEEL_EINVAL;
    size_t eklen = encode_key(s->kbuf, slot, key, klen);
    if (!eklen) return KEEL_ENOTFOUND; /* too long to have been stored */
    if (s->txn.nents) {                /* this turn may have written the key */
        const txn_entry *e = committed_entry(&s->txn, ent_find(&s->txn, s->kbuf, eklen));
        if (e && e->written) return overlay_value(&s->txn, e, now_ms, v);
    }
    return db_get(s, s->kbuf, eklen, now_ms, v, NULL);
}

/* The physical state of ek in the DB (the value read and released): 0, or
 * KEEL_EIO. */
static int db_phys(store *s, const char *ek, size_t eklen, store_phys *ph) {
    store_value v;
    int rc = db_get(s, ek, eklen, 0, &v, ph);
    if (rc == 0) store_value_release(&v);
    return rc == KEEL_ENOTFOUND ? 0 : rc;
}

void store_value_release(store_value *v) {
    if (!v) return;
    if (v->priv_kind_ == VALUE_PINNED)
        rocksdb_pinnableslice_destroy(v->priv_);
    else if (v->priv_kind_ == VALUE_MALLOC)
        free(v->priv_);
    memset(v, 0, sizeof *v);
}

/* ---- Transactions --------------------------------------------------------- */

store_txn *store_txn_begin(store *s) {
    store_txn *t = &s->txn;
    assert(!t->open);
    if (t->open) {
        keel_log(KEEL_LOG_ERROR, "store_txn_nested", "ops=%zu", t->nops);
        return t;
    }
    t->open = 1;
    t->metas_mark = t->metas.len;
    if (++t->gen == 0) t->gen = 1; /* 0 marks entries never saved for undo */
    rocksdb_writebatch_set_save_point(t->wb);
    return t;
}

static uint32_t key_hash(const char *k, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)k[i]) * 16777619u;
    return h;
}

static const char *ent_key(const store_txn *t, const txn_entry *e) {
    return t->arena.p + e->koff;
}

/* The entry for ek, or NULL. Small txns scan; larger ones use the hash. */
static txn_entry *ent_find(store_txn *t, const char *ek, size_t eklen) {
    if (t->nents <= 8 || !t->hcap) {
        for (size_t i = t->nents; i-- > 0;) {
            txn_entry *e = &t->ents[i];
            if (e->klen == eklen && memcmp(ent_key(t, e), ek, eklen) == 0) return e;
        }
        return NULL;
    }
    for (size_t h = key_hash(ek, eklen) & (t->hcap - 1);; h = (h + 1) & (t->hcap - 1)) {
        uint32_t i = t->hidx[h];
        if (!i) return NULL;
        txn_entry *e = &t->ents[i - 1];
        if (e->klen == eklen && memcmp(ent_key(t, e), ek, eklen) == 0) return e;
    }
}

static void hidx_insert(store_txn *t, size_t i) {
    const txn_entry *e = &t->ents[i];
    size_t h = key_hash(ent_key(t, e), e->klen) & (t->hcap - 1);
    while (t->hidx[h])
        h = (h + 1) & (t->hcap - 1);
    t->hidx[h] = (uint32_t)(i + 1);
}

/* Adds an entry for ek (not yet present). Returns it, or NULL on ENOMEM. */
static txn_entry *ent_add(store_txn *t, const char *ek, size_t eklen) {
    if (t->nents == t->cap_ents) {
        size_t cap = t->cap_ents ? t->cap_ents * 2 : 16;
        txn_entry *p = realloc(t->ents, cap * sizeof *p);
        if (!p) return NULL;
        t->ents = p;
        t->cap_ents = cap;
    }
    size_t koff = t->arena.len;
    if (kbuf_append(&t->arena, ek, eklen)) return NULL;
    txn_entry *e = &t->ents[t->nents];
    *e = (txn_entry){.koff = koff, .klen = eklen};
    t->nents++;
    if (t->nents * 2 > t->hcap && t->nents > 8) { /* grow and rebuild the index */
        size_t cap = t->hcap ? t->hcap * 2 : 64;
        while (cap < t->nents * 2)
            cap *= 2;
        uint32_t *h = calloc(cap, sizeof *h);
        if (!h) {
            t->nents--;
            return NULL;
        }
        free(t->hidx);
        t->hidx = h;
        t->hcap = cap;
        for (size_t i = 0; i < t->nents; i++)
            hidx_insert(t, i);
    } else if (t->hcap) {
        hidx_insert(t, t->nents - 1);
    }
    return e;
}

/* Fills e's physical state, and its orig (the state before the turn's
 * writes: e is new, so nothing of the turn has changed it yet). */
static void ent_fill(txn_entry *e, const store_phys *ph) {
    e->exists = ph->exists;
    e->vlen = ph->vlen;
    e->has_ttl = ph->has_ttl;
    e->hash = ph->hash;
    e->type = ph->type;
    e->ver = ph->ver;
    e->orig = *ph;
    e->orig_known = 1;
}

/* Existence and encoded value size of ek as this txn sees it: from the
 * overlay, else one DB read (remembered). */
static txn_entry *txn_phys(store_txn *t, const char *ek, size_t eklen, int *rc) {
    txn_entry *e = ent_find(t, ek, eklen);
    *rc = 0;
    if (!e) {
        store_phys ph;
        if ((*rc = db_phys(t->s, ek, eklen, &ph))) return NULL;
        if (!(e = ent_add(t, ek, eklen))) {
            *rc = KEEL_ENOMEM;
            return NULL;
        }
        ent_fill(e, &ph);
    }
    return e;
}

/* txn_phys for a record whose physical state the caller knows: absent
 * (hdr NULL), or present with the encoded value hdr + data[0..len). The
 * overlay still wins (this turn may have changed the record); only the DB
 * read is skipped. A debug build reads the DB anyway and asserts the
 * caller's claim, so the tests pin the invariant that makes it true. */
static txn_entry *txn_phys_known(store_txn *t, const char *ek, size_t eklen,
                                 const char hdr[VAL_HDR], const void *data, size_t len, int *rc) {
    txn_entry *e = ent_find(t, ek, eklen);
    *rc = 0;
    if (e) return e;
#ifndef NDEBUG
    {
        store_phys db;
        int g = db_phys(t->s, ek, eklen, &db);
        assert(g == 0);
        assert(db.exists == (hdr != NULL));
        assert(!hdr || (db.vlen == VAL_HDR + len &&
                        db.hash == mix64(fnv1a64(fnv1a64(kv_hash_key(ek, eklen), hdr, VAL_HDR),
                                                 data, len))));
    }
#endif
    if (!(e = ent_add(t, ek, eklen))) {
        *rc = KEEL_ENOMEM;
        return NULL;
    }
    store_phys ph = {0};
    if (hdr) {
        uint8_t type = (uint8_t)hdr[0];
        ph.exists = 1;
        ph.vlen = VAL_HDR + len;
        ph.has_ttl = get_be64(hdr + 1) != 0;
        ph.hash = mix64(fnv1a64(fnv1a64(kv_hash_key(ek, eklen), hdr, VAL_HDR), data, len));
        ph.type = type;
        ph.ver = type_compound(type) && len >= 8 ? get_be64(data) : 0;
    }
    ent_fill(e, &ph);
    return e;
}

static int txn_account(store_txn *t, unsigned slot, int64_t dkeys, int64_t dbytes, int64_t dexpires,
                       int64_t dsubs, uint64_t dxor) {
    if (!t->tidx[slot]) {
        if (t->ntouched == t->cap_touched) {
            size_t cap = t->cap_touched ? t->cap_touched * 2 : 16;
            slot_delta *p = realloc(t->touched, cap * sizeof *p);
            if (!p) return KEEL_ENOMEM;
            t->touched = p;
            t->cap_touched = cap;
        }
        t->touched[t->ntouched] = (slot_delta){.slot = (uint16_t)slot};
        t->tidx[slot] = (uint16_t)++t->ntouched;
    }
    slot_delta *d = &t->touched[t->tidx[slot] - 1];
    d->dkeys += dkeys;
    d->dbytes += dbytes;
    d->dexpires += dexpires;
    d->dsubs += dsubs;
    d->dxor ^= dxor;
    return 0;
}

/* Saves e's state before the current command first changes it. */
static int save_undo(store_txn *t, txn_entry *e) {
    if (e->gen == t->gen) return 0;
    if (t->nundo == t->cap_undo) {
        size_t cap = t->cap_undo ? t->cap_undo * 2 : 16;
        txn_undo *p = realloc(t->undo, cap * sizeof *p);
        if (!p) return KEEL_ENOMEM;
        t->undo = p;
        t->cap_undo = cap;
    }
    e->gen = t->gen;
    t->undo[t->nundo++] = (txn_undo){.idx = (size_t)(e - t->ents), .prev = *e};
    return 0;
}

/* e as committed commands left it: an open command's changes are not
 * visible to plain reads. */
static const txn_entry *committed_entry(const store_txn *t, const txn_entry *e) {
    if (!e || !t->open || e->gen != t->gen) return e;
    for (size_t i = 0; i < t->nundo; i++)
        if (&t->ents[t->undo[i].idx] == e) return &t->undo[i].prev;
    return e;
}

/* A value this turn wrote, as a malloc'd copy (the arena may move). */
static int overlay_value(store_txn *t, const txn_entry *e, int64_t now_ms, store_value *v) {
    if (!e->exists) return KEEL_ENOTFOUND;
    int rc = decode_value(t->arena.p + e->voff, e->vlen, now_ms, v);
    if (rc) return rc;
    char *copy = malloc(v->len ? v->len : 1);
    if (!copy) {
        memset(v, 0, sizeof *v);
        return KEEL_ENOMEM;
    }
    memcpy(copy, v->data, v->len);
    v->data = copy;
    v->priv_ = copy;
    v->priv_kind_ = VALUE_MALLOC;
    return 0;
}

int store_txn_get(store_txn *t, unsigned slot, const char *key, size_t klen, int64_t now_ms,
                  store_value *v) {
    memset(v, 0, sizeof *v);
    if (!t->open) return KEEL_EINVAL;
    if (slot >= STORE_SLOTS) return KEEL_EINVAL;
    store *s = t->s;
    size_t eklen = encode_key(s->kbuf, slot, key, klen);
    if (!eklen) return KEEL_ENOTFOUND;
    txn_entry *e = ent_find(t, s->kbuf, eklen);
    if (e && e->written) return overlay_value(t, e, now_ms, v); /* our own write */
    store_phys ph;
    int rc = db_get(s, s->kbuf, eklen, now_ms, v, e ? NULL : &ph);
    if (rc && rc != KEEL_ENOTFOUND) return rc;
    if (!e) { /* remember the physical state for a following put or del */
        if (!(e = ent_add(t, s->kbuf, eklen))) {
            store_value_release(v);
            return KEEL_ENOMEM;
        }
        ent_fill(e, &ph);
    }
    return rc;
}

/* Puts the value hdr (VAL_HDR bytes, already encoded) + data[0..len): the
 * common part of store_txn_put and store_txn_put_raw. */
static int txn_put_enc(store_txn *t, unsigned slot, const char *key, size_t klen,
                       const char hdr[VAL_HDR], const void *data, size_t len, int raw, int absent) {
    store *s = t->s;
    int64_t expire_ms = (int64_t)get_be64(hdr + 1);
    if (!t->open || slot >= STORE_SLOTS || expire_ms < 0) return KEEL_EINVAL;
    if (len && !data) return KEEL_EINVAL;
    size_t eklen = encode_key(s->kbuf, slot, key, klen);
    if (!eklen) return KEEL_EINVAL;
    int rc;
    txn_entry *e = absent ? txn_phys_known(t, s->kbuf, eklen, NULL, NULL, 0, &rc)
                          : txn_phys(t, s->kbuf, eklen, &rc);
    if (!e) return rc;
    if ((rc = save_undo(t, e))) return rc;
    int exists = e->exists;
    size_t old = e->vlen;
    size_t voff = t->arena.len;
    if (kbuf_append(&t->arena, hdr, VAL_HDR) || kbuf_append(&t->arena, data, len))
        return KEEL_ENOMEM;
    int ttl = expire_ms != 0;
    uint8_t type = (uint8_t)hdr[0];
    uint64_t ver = type_compound(type) && len >= 8 ? get_be64(data) : 0;
    int sub = (type & STORE_T_SUB) != 0;
    uint64_t hash = mix64(fnv1a64(fnv1a64(kv_hash_key(s->kbuf, eklen), hdr, VAL_HDR), data, len));
    if ((rc = txn_account(t, slot, exists ? 0 : 1,
                          (int64_t)(eklen + VAL_HDR + len) - (exists ? (int64_t)(eklen + old) : 0),
                          ttl - (exists && e->has_ttl), sub - (exists && (e->type & STORE_T_SUB)),
                          hash ^ (exists ? e->hash : 0))))
        return rc;
    /* A compound key replaced by another version (or type) orphans its
     * field records; field records arriving raw may be orphans already. */
    if ((exists && type_compound(e->type) && e->ver != ver) || (raw && sub))
        store__gc_mark(s, slot);
    const char *kp[1] = {s->kbuf};
    size_t ks[1] = {eklen};
    const char *vp[2] = {hdr, data ? data : ""};
    size_t vs[2] = {VAL_HDR, len};
    rocksdb_writebatch_putv_cf(t->wb, s->cf_data, 1, kp, ks, 2, vp, vs);
    t->nops++;
    e->exists = e->written = 1;
    e->has_ttl = ttl;
    e->hash = hash;
    e->type = type;
    e->ver = ver;
    e->voff = voff;
    e->vlen = VAL_HDR + len;
    return 0;
}

int store_txn_put(store_txn *t, unsigned slot, const char *key, size_t klen, uint8_t type,
                  int64_t expire_ms, const void *data, size_t len) {
    if (expire_ms < 0) return KEEL_EINVAL;
    char hdr[VAL_HDR];
    hdr[0] = (char)type;
    put_be64(hdr + 1, (uint64_t)expire_ms);
    return txn_put_enc(t, slot, key, klen, hdr, data, len, 0, 0);
}

int store_txn_put_raw(store_txn *t, unsigned slot, const char *key, size_t klen,
                      const void *encoded_value, size_t vlen) {
    if (!encoded_value || vlen < VAL_HDR) return KEEL_EINVAL;
    const char *v = encoded_value;
    return txn_put_enc(t, slot, key, klen, v, v + VAL_HDR, vlen - VAL_HDR, 1, 0);
}

int store_txn_put_absent(store_txn *t, unsigned slot, const char *key, size_t klen, uint8_t type,
                         const void *data, size_t len) {
    char hdr[VAL_HDR] = {(char)type};
    return txn_put_enc(t, slot, key, klen, hdr, data, len, 0, 1);
}

/* Deletes ek, known to exist with an encoded value of vlen bytes whose
 * kv_hash is hash. */
static int txn_del_known(store_txn *t, unsigned slot, const char *ek, size_t eklen, size_t vlen,
                         int has_ttl, uint64_t hash, uint8_t type) {
    int rc = txn_account(t, slot, -1, -(int64_t)(eklen + vlen), -(int64_t)has_ttl,
                         -(int64_t)((type & STORE_T_SUB) != 0), hash);
    if (type_compound(type)) store__gc_mark(t->s, slot); /* its fields are orphans now */
    if (rc) return rc;
    rocksdb_writebatch_delete_cf(t->wb, t->s->cf_data, ek, eklen);
    t->nops++;
    txn_entry *e = ent_find(t, ek, eklen);
    if (!e && !(e = ent_add(t, ek, eklen))) return KEEL_ENOMEM;
    if ((rc = save_undo(t, e))) return rc;
    e->exists = 0;
    e->written = 1;
    e->has_ttl = 0;
    e->hash = 0;
    e->type = 0;
    e->ver = 0;
    e->vlen = 0;
    return 0;
}

int store__txn_del_known(store_txn *t, unsigned slot, const char *ek, size_t eklen, size_t vlen,
                         int has_ttl, uint64_t hash, uint8_t type) {
    return txn_del_known(t, slot, ek, eklen, vlen, has_ttl, hash, type);
}

static int phys_equal(const store_phys *a, const store_phys *b) {
    if (a->exists != b->exists) return 0;
    return !a->exists || (a->has_ttl == b->has_ttl && a->type == b->type && a->vlen == b->vlen &&
                          a->hash == b->hash && a->ver == b->ver);
}

int store_txn_seed(store_txn *t, unsigned slot, const char *key, size_t klen, const store_phys *old,
                   int verify, int *mismatch) {
    store *s = t->s;
    if (mismatch) *mismatch = 0;
    if (!t->open || slot >= STORE_SLOTS || !old) return KEEL_EINVAL;
    size_t eklen = encode_key(s->kbuf, slot, key, klen);
    if (!eklen) return KEEL_EINVAL;
    if (ent_find(t, s->kbuf, eklen)) return 0; /* this turn knows better */
    store_phys ph = *old;
    if (!ph.exists) ph = (store_phys){0};
    if (verify) {
        store_phys db;
        int rc = db_phys(s, s->kbuf, eklen, &db);
        if (rc) return rc;
        if (!phys_equal(&ph, &db) && mismatch) *mismatch = 1;
        ph = db;
    }
    txn_entry *e = ent_add(t, s->kbuf, eklen);
    if (!e) return KEEL_ENOMEM;
    ent_fill(e, &ph);
    return 0;
}

int store_txn_del(store_txn *t, unsigned slot, const char *key, size_t klen, int *existed) {
    store *s = t->s;
    if (existed) *existed = 0;
    if (!t->open || slot >= STORE_SLOTS) return KEEL_EINVAL;
    size_t eklen = encode_key(s->kbuf, slot, key, klen);
    if (!eklen) return 0; /* too long to exist */
    int rc;
    txn_entry *e = txn_phys(t, s->kbuf, eklen, &rc);
    if (!e || !e->exists) return rc;
    if ((rc = txn_del_known(t, slot, s->kbuf, eklen, e->vlen, e->has_ttl, e->hash, e->type)))
        return rc;
    if (existed) *existed = 1;
    return 0;
}

int store_txn_del_present(store_txn *t, unsigned slot, const char *key, size_t klen, uint8_t type,
                          const void *data, size_t len) {
    store *s = t->s;
    if (!t->open || slot >= STORE_SLOTS || (len && !data)) return KEEL_EINVAL;
    size_t eklen = encode_key(s->kbuf, slot, key, klen);
    if (!eklen) return KEEL_EINVAL;
    char hdr[VAL_HDR] = {(char)type};
    int rc;
    txn_entry *e = txn_phys_known(t, s->kbuf, eklen, hdr, data, len, &rc);
    if (!e || !e->exists) return rc;
    return txn_del_known(t, slot, s->kbuf, eklen, e->vlen, e->has_ttl, e->hash, e->type);
}

static int txn_commit(store_txn *t, int lazy) {
    store *s = t->s;
    if (!t->open) return KEEL_EINVAL;
    char *rerr = NULL;
    rocksdb_writebatch_pop_save_point(t->wb, &rerr);
    if (rerr) rerr_log("store_txn_savepoint", rerr);
    t->turn_ops += t->nops;
    if (!lazy) t->turn_strict += t->nops + t->nmeta;
    t->metas_mark = t->metas.len;
    for (size_t i = 0; i < t->ntouched; i++)
        pend_add(s, &t->touched[i]);
    cmd_reset(t);
    return 0;
}

int store_txn_commit(store_txn *t) {
    return txn_commit(t, 0);
}

int store_txn_commit_lazy(store_txn *t) {
    return txn_commit(t, 1);
}

void store_txn_abort(store_txn *t) {
    if (!t || !t->open) return;
    char *rerr = NULL;
    rocksdb_writebatch_rollback_to_save_point(t->wb, &rerr);
    if (rerr) rerr_log("store_txn_rollback", rerr);
    while (t->nundo > 0) { /* newest first, so each entry ends at its oldest state */
        const txn_undo *u = &t->undo[--t->nundo];
        t->ents[u->idx] = u->prev;
    }
    t->metas.len = t->metas_mark;
    cmd_reset(t);
}

/* ---- Durability ----------------------------------------------------------- */

static int flush_wal(store *s, int sync, uint64_t *fsync_us) {
    char *rerr = NULL;
    uint64_t t0 = sync ? keel_mono_us() : 0;
    if (s->failed) return s->failed;
    rocksdb_flush_wal(s->db, (unsigned char)sync, &rerr);
    /* fsyncgate: after a failed flush the WAL's state is unknown. */
    if (rerr) return set_failed(s, rerr_log(sync ? "store_fsync" : "store_flush", rerr));
    if (sync) {
        if (fsync_us) *fsync_us = keel_mono_us() - t0;
        s->unsynced = 0;
    } else {
        s->unsynced = 1;
        s->flush_gen++;
    }
    s->dirty = s->lazy = 0;
    if (sync && s->fsync_hook) s->fsync_hook(s->fsync_hook_arg);
    return 0;
}

void store_set_fsync_hook(store *s, void (*fn)(void *arg), void *arg) {
    s->fsync_hook = fn;
    s->fsync_hook_arg = arg;
}

int store_sync(store *s, uint64_t *fsync_us) {
    if (fsync_us) *fsync_us = 0;
    if (s->txn.open) return KEEL_EINVAL;
    int rc = turn_write(s);
    if (rc) return rc;
    /* --fsync always: writes a walsync begin handed to the OS earlier in
     * this turn (store_wal_sync_begin clears dirty) are not durable until
     * some fsync ends; this turn's replies must not wait for the worker's. */
    int always = s->fsync == STORE_FSYNC_ALWAYS;
    if (!s->dirty && !(always && s->unsynced)) return 0;
    return flush_wal(s, always, fsync_us);
}

int store_failed(const store *s) {
    return s->failed;
}

int store_turn_clean(const store *s) {
    /* turn_strict counts the strict commits' ops and metadata writes;
     * lazy ones (gc, a move's copy) need no fsync before a reply. */
    return !s->failed && !s->txn.turn_strict && !s->dirty &&
           !(s->fsync == STORE_FSYNC_ALWAYS && s->unsynced);
}

int store_sync_wal(store *s, uint64_t *fsync_us) {
    if (fsync_us) *fsync_us = 0;
    if (s->txn.open) return KEEL_EINVAL;
    int rc = turn_write(s);
    if (rc) return rc;
    if (!s->dirty && !s->unsynced && !s->lazy) return 0;
    return flush_wal(s, 1, fsync_us);
}

int store_wal_sync_begin(store *s, store_wal_sync *ws) {
    memset(ws, 0, sizeof *ws);
    if (s->txn.open) return KEEL_EINVAL;
    int rc = turn_write(s);
    if (rc) return rc;
    if (s->dirty || s->lazy) { /* hand the WAL to the OS, without the fsync */
        rc = flush_wal(s, 0, NULL);
        if (rc) return rc;
    }
    if (!s->unsynced) return 0;
    ws->gen = s->flush_gen;
    return 1;
}

void store_wal_sync_run(store *s, store_wal_sync *ws) {
    uint64_t t0 = keel_mono_us();
    rocksdb_flush_wal(s->db, 1, &ws->rerr);
    ws->us = keel_mono_us() - t0;
}

int store_wal_sync_end(store *s, store_wal_sync *ws) {
    if (ws->rerr) {
        char *e = ws->rerr;
        ws->rerr = NULL;
        return set_failed(s, rerr_log("store_fsync", e));
    }
    if (s->failed) return s->failed;
    /* Nothing flushed since begin: all that is in the WAL is durable now. */
    if (s->flush_gen == ws->gen) {
        s->unsynced = 0;
        if (s->fsync_hook) s->fsync_hook(s->fsync_hook_arg);
    }
    return 0;
}

/* ---- Statistics and scans ------------------------------------------------- */

void store_slot_stats(const store *s, unsigned slot, uint64_t *keys, uint64_t *bytes) {
    slot_stat st = slot < STORE_SLOTS ? store__slot_view(s, slot) : (slot_stat){0};
    if (keys) *keys = st.keys - st.subs; /* keys, not their field records */
    if (bytes) *bytes = st.bytes;
}

/* The committed totals adjusted by the turn's pending deltas (which: 0 keys
 * and field records, 1 bytes, 2 keys with a TTL, 3 field records). Unsigned
 * wrap-around makes a negative difference come out right. */
static uint64_t total_view(const store *s, int which) {
    uint64_t v = which == 0   ? s->total_keys
                 : which == 1 ? s->total_bytes
                 : which == 2 ? s->total_expires
                              : s->total_subs;
    for (unsigned i = 0; i < s->npend; i++) {
        unsigned slot = s->pend_list[i];
        slot_stat a = s->stats[slot], b = store__slot_view(s, slot);
        v += which == 0   ? b.keys - a.keys
             : which == 1 ? b.bytes - a.bytes
             : which == 2 ? b.expires - a.expires
                          : b.subs - a.subs;
    }
    return v;
}

uint64_t store_total_keys(const store *s) {
    return total_view(s, 0) - total_view(s, 3);
}

uint64_t store_total_bytes(const store *s) {
    return total_view(s, 1);
}

uint64_t store_total_expires(const store *s) {
    return total_view(s, 2);
}

long store_scan_slot(store *s, unsigned slot, size_t max, int64_t now_ms, store_key_cb cb,
                     void *arg) {
    if (slot >= STORE_SLOTS || !cb || s->txn.open) return KEEL_EINVAL;
    if (max == 0) return 0;
    int wrc = turn_write(s); /* iterators see only the DB */
    if (wrc) return wrc;
    char lo[KEY_PREFIX], hi[KEY_PREFIX];
    put_be16(lo, slot);
    put_be16(hi, slot + 1); /* 0x4000 for the last slot: above every key */
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_prefix_same_as_start(ro, 1);
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi, KEY_PREFIX);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    long n = 0;
    for (rocksdb_iter_seek(it, lo, KEY_PREFIX); rocksdb_iter_valid(it) && (size_t)n < max;
         rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        store_value sv;
        if (kl < KEY_PREFIX || decode_value(v, vl, now_ms, &sv) != 0) continue;
        n++;
        if (cb(arg, k + KEY_PREFIX, kl - KEY_PREFIX)) break;
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) n = rerr_log("store_scan", rerr);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return n;
}

/* Sweeps one slot from the cursor. Returns 1 if the slot is finished, 0 if
 * the budget ran out inside it (the cursor then names the next key), or a
 * negative KEEL_E*. */
static int sweep_slot(store *s, unsigned slot, int64_t now_ms, size_t *budget, size_t max,
                      long *deleted) {
    char lo[KEY_PREFIX], hi[KEY_PREFIX];
    put_be16(lo, slot);
    put_be16(hi, slot + 1);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(ro, 0);
    rocksdb_readoptions_set_prefix_same_as_start(ro, 1);
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi, KEY_PREFIX);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    int rc = 0;
    if (s->cursor_len)
        rocksdb_iter_seek(it, s->cursor, s->cursor_len);
    else
        rocksdb_iter_seek(it, lo, KEY_PREFIX);
    for (; rocksdb_iter_valid(it) && *budget > 0 && (size_t)*deleted < max; rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        (*budget)--;
        if (kl >= KEY_PREFIX && kl <= KEY_MAX && vl >= VAL_HDR &&
            is_expired((int64_t)get_be64(v + 1), now_ms)) {
            if ((rc = txn_del_known(&s->txn, slot, k, kl, vl, 1, kv_hash(k, kl, v, vl),
                                    (uint8_t)v[0])))
                break;
            (*deleted)++;
        }
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) rc = rerr_log("store_sweep", rerr);
    int finished = !rocksdb_iter_valid(it);
    if (!rc && !finished) { /* remember where to resume */
        size_t kl;
        const char *k = rocksdb_iter_key(it, &kl);
        char *p = kl > s->cursor_len || !s->cursor ? realloc(s->cursor, kl) : s->cursor;
        if (!p)
            rc = KEEL_ENOMEM;
        else {
            s->cursor = p;
            memcpy(s->cursor, k, kl);
            s->cursor_len = kl;
        }
    }
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return rc ? rc : finished;
}

long store_sweep_expired(store *s, int64_t now_ms, size_t max) {
    store_txn *t = &s->txn;
    if (t->open) return KEEL_EINVAL; /* would mix our deletes into the caller's txn */
    if (max == 0) return 0;
    int wrc = turn_write(s); /* the iterator sees only the DB; applies the stats */
    if (wrc) return wrc;
    if (s->total_expires == 0) return 0;
    size_t budget = max > SIZE_MAX / SWEEP_EXAMINE_FACTOR ? SIZE_MAX : max * SWEEP_EXAMINE_FACTOR;
    long deleted = 0;
    int rc = 0;
    store_txn_begin(s);
    /* Only slots holding keys with a TTL are visited, one full cycle at most.
     * A skipped slot is passed over like an empty one (cursor reset, no
     * budget), so a filter that skips the slot the cursor was in cannot pin
     * the sweep there. */
    for (unsigned n = 0; n < STORE_SLOTS && budget > 0 && (size_t)deleted < max; n++) {
        unsigned slot = s->sweep_slot;
        if (s->stats[slot].expires && !(s->sweep_skip && s->sweep_skip(s->sweep_skip_arg, slot))) {
            rc = sweep_slot(s, slot, now_ms, &budget, max, &deleted);
            if (rc < 0) break;
            if (rc == 0) break; /* resume inside this slot next time */
        }
        s->sweep_slot = (slot + 1) % STORE_SLOTS;
        s->cursor_len = 0;
    }
    if (rc < 0) {
        store_txn_abort(t);
        return rc;
    }
    if ((rc = store_txn_commit(t))) return rc;
    if (deleted) keel_log(KEEL_LOG_DEBUG, "store_sweep", "deleted=%ld", deleted);
    return deleted;
}

void store_set_sweep_filter(store *s, int (*skip)(void *arg, unsigned slot), void *arg) {
    s->sweep_skip = skip;
    s->sweep_skip_arg = skip ? arg : NULL;
}

int store_delete_slots(store *s, unsigned lo, unsigned hi) {
    if (lo > hi || hi >= STORE_SLOTS || s->txn.open) return KEEL_EINVAL;
    int wrc = turn_write(s); /* the overlay must not outlive the range delete */
    if (wrc) return wrc;
    char a[KEY_PREFIX], b[KEY_PREFIX];
    put_be16(a, lo);
    put_be16(b, hi + 1);
    uint64_t keys = 0;
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_delete_range_cf(wb, s->cf_data, a, KEY_PREFIX, b, KEY_PREFIX);
    for (unsigned slot = lo; slot <= hi; slot++)
        keys += s->stats[slot].keys;
    char *rerr = NULL;
    rocksdb_write(s->db, s->wopts, wb, &rerr);
    rocksdb_writebatch_destroy(wb);
    if (rerr) return set_failed(s, rerr_log("store_delete_slots", rerr));
    s->dirty = 1;
    for (unsigned slot = lo; slot <= hi; slot++) {
        s->total_keys -= s->stats[slot].keys;
        s->total_bytes -= s->stats[slot].bytes;
        s->total_expires -= s->stats[slot].expires;
        s->total_subs -= s->stats[slot].subs;
        s->stats[slot] = (slot_stat){0};
        if (s->gc_slot[slot]) {
            s->gc_slot[slot] = 0;
            s->gc_pending--;
        }
    }
    int rc = flush_wal(s, 1, NULL);
    if (rc) return rc;
    /* Range tombstones slow later reads of the range until compacted away;
     * ask for a background compaction rather than blocking the loop. */
    rocksdb_suggest_compact_range_cf(s->db, s->cf_data, a, KEY_PREFIX, b, KEY_PREFIX, &rerr);
    if (rerr) {
        char q[256];
        keel_log(KEEL_LOG_WARN, "store_compact_suggest", "err=%s",
                 keel_log_quote(q, sizeof q, rerr, strlen(rerr)));
        rocksdb_free(rerr);
    }
    keel_log(KEEL_LOG_INFO, "store_delete_slots", "lo=%u hi=%u keys=%llu", lo, hi,
             (unsigned long long)keys);
    return 0;
}

/* ---- Metadata ------------------------------------------------------------- */

/* "m/<name>" into a malloc'd buffer. */
static char *meta_key(const char *name, size_t *len) {
    size_t n = strlen(name);
    char *k = malloc(n + 2);
    if (!k) return NULL;
    k[0] = 'm';
    k[1] = '/';
    memcpy(k + 2, name, n);
    *len = n + 2;
    return k;
}

/* The turn so far, then name = val, into the WAL buffer (the WAL keeps
 * that order). Returns 0, or a KEEL_E* (logged; *rocks = 1 when RocksDB
 * refused the put). */
static int meta_write(store *s, const char *name, const void *val, size_t len, int *rocks) {
    *rocks = 0;
    if (!name || (len && !val) || s->txn.open) return KEEL_EINVAL;
    int wrc = turn_write(s);
    if (wrc) return wrc;
    size_t kl;
    char *k = meta_key(name, &kl);
    if (!k) return KEEL_ENOMEM;
    char *rerr = NULL;
    if (FAILPOINT("store.meta_put") == FP_ERROR)
        rerr = strdup("failpoint store.meta_put");
    else
        rocksdb_put_cf(s->db, s->wopts, s->cf_meta, k, kl, val ? val : "", len, &rerr);
    free(k);
    if (!rerr) return 0;
    *rocks = 1;
    return rerr_log("store_meta_put", rerr);
}

int store_meta_put(store *s, const char *name, const void *val, size_t len) {
    int rocks, rc = meta_write(s, name, val, len, &rocks);
    if (rc) return rc;
    /* manual_wal_flush: the write is durable only once flushed and synced
     * (the sync covers the turn too). */
    return flush_wal(s, 1, NULL);
}

int store_meta_put_lazy(store *s, const char *name, const void *val, size_t len) {
    int rocks, rc = meta_write(s, name, val, len, &rocks);
    if (rc) return rocks ? set_failed(s, rc) : rc;
    s->lazy = 1; /* in the WAL buffer: durable with the next flush + fsync */
    return 0;
}

int store_txn_meta_put(store_txn *t, const char *name, const void *val, size_t len) {
    if (!t->open || !name || (len && !val) || len > UINT32_MAX) return KEEL_EINVAL;
    size_t kl;
    char *k = meta_key(name, &kl);
    if (!k) return KEEL_ENOMEM;
    uint32_t h[2] = {(uint32_t)kl, (uint32_t)len};
    int bad = kbuf_append(&t->metas, h, sizeof h) || kbuf_append(&t->metas, k, kl) ||
              (len && kbuf_append(&t->metas, val, len));
    free(k);
    if (bad) return KEEL_ENOMEM; /* the caller aborts the txn, which cuts the frame */
    t->nmeta++;
    return 0;
}

int store_meta_get(store *s, const char *name, char **val, size_t *len) {
    *val = NULL;
    *len = 0;
    if (!name) return KEEL_EINVAL;
    size_t kl, vl;
    char *k = meta_key(name, &kl);
    if (!k) return KEEL_ENOMEM;
    char *rerr = NULL;
    char *v = rocksdb_get_cf(s->db, s->ropts, s->cf_meta, k, kl, &vl, &rerr);
    free(k);
    if (rerr) return rerr_log("store_meta_get", rerr);
    if (!v) return KEEL_ENOTFOUND;
    /* Our own copy, NUL-terminated for string metadata, freed with free(). */
    char *out = malloc(vl + 1);
    if (out) {
        memcpy(out, v, vl);
        out[vl] = 0;
    }
    rocksdb_free(v);
    if (!out) return KEEL_ENOMEM;
    *val = out;
    *len = vl;
    return 0;
}
