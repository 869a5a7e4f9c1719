/* store_types.c - the data model's record keys (DESIGN.md §14): format
 * check and upgrade at open, range scans, versions, and the background
 * cleanup of orphaned field records. The layout is in store.h and
 * docs/storage-format.md.
 *
 * Why a sweep and not a RocksDB compaction filter: the store keeps exact
 * per-slot counts, byte totals and digests of every physical record, and
 * a move's fence compares the digests of source and destination. A
 * compaction filter drops records behind the store's back, at times that
 * differ between the two nodes, so digests would diverge and counts drift.
 * store_gc deletes orphans through ordinary txn deletes instead: counted,
 * digested, and reported to change captures (a destination applies the
 * source's cleanup), skipping slots the sweep filter protects. DEL stays
 * O(1); the cleanup costs one seek per live key and one delete per orphan,
 * a bounded number per call.
 */
#include "store/store_int.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/zscore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT_KEY "c/format"
#define MIGRATE_BATCH 10000u

size_t store_rkey(char *out, const char *k, size_t kl) {
    if (kl > STORE_UKEY_MAX) return 0;
    out[0] = STORE_TAG_KEY;
    if (kl) memcpy(out + 1, k, kl);
    return kl + 1;
}

size_t store_sub_prefix(char *out, const char *k, size_t kl, uint64_t version) {
    if (kl > STORE_UKEY_MAX) return 0;
    out[0] = STORE_TAG_SUB;
    put_be16(out + 1, (unsigned)kl);
    if (kl) memcpy(out + 3, k, kl);
    put_be64(out + 3 + kl, version);
    return kl + 11;
}

size_t store_zidx_prefix(char *out, const char *k, size_t kl, uint64_t version) {
    size_t n = store_sub_prefix(out, k, kl, version);
    if (n) out[0] = STORE_TAG_ZIDX;
    return n;
}

uint64_t store_new_version(store *s) {
    uint64_t v = (uint64_t)keel_wall_us();
    if (v <= s->last_version) v = s->last_version + 1;
    s->last_version = v;
    return v;
}

void store__gc_mark(store *s, unsigned slot) {
    if (slot >= STORE_SLOTS || s->gc_slot[slot]) return;
    s->gc_slot[slot] = 1;
    s->gc_pending++;
}

unsigned store_gc_pending(const store *s) {
    return s->gc_pending;
}

/* ---- Format ---------------------------------------------------------------- */

/* One format upgrade: fn sees every data record in key order with a scratch
 * key buffer nk of KEY_MAX + 8 bytes and adds what it rewrites to wb; it
 * returns 1 for a record it rewrote, 2 for one it had to skip (unreadable
 * in the new format either way), 0 for one it leaves alone. The walk writes
 * in batches of MIGRATE_BATCH, then, in the last batch, sets c/format to
 * STORE_FORMAT and drops the clean marker (so open_stats recounts), and
 * syncs the WAL. Idempotent as long as fn is: a crash before c/format is
 * set redoes the same work at the next open. */
typedef int (*migrate_fn)(rocksdb_writebatch_t *wb, rocksdb_column_family_handle_t *cf,
                          const char *k, size_t kl, const char *v, size_t vl, char *nk);

static int migrate_walk(store *s, int from, const char *what, migrate_fn fn) {
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(ro, 0);
    rocksdb_readoptions_set_total_order_seek(ro, 1);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    char *rerr = NULL;
    size_t n = 0, total = 0, skipped = 0;
    char *nk = malloc(KEY_MAX + 8);
    int rc = nk ? 0 : KEEL_ENOMEM;
    for (rocksdb_iter_seek_to_first(it); !rc && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        int r = fn(wb, s->cf_data, k, kl, v, vl, nk);
        if (r == 2) skipped++;
        if (r != 1) continue;
        total++;
        if (++n == MIGRATE_BATCH) {
            rocksdb_write(s->db, s->wopts, wb, &rerr);
            if (rerr) rc = store__rerr_log("store_migrate", rerr);
            rocksdb_writebatch_clear(wb);
            n = 0;
        }
    }
    if (!rc) rocksdb_iter_get_error(it, &rerr);
    if (!rc && rerr) rc = store__rerr_log("store_migrate", rerr);
    const char f = '0' + STORE_FORMAT;
    rocksdb_writebatch_delete_cf(wb, s->cf_meta, "c/stats", 7);
    rocksdb_writebatch_put_cf(wb, s->cf_meta, FORMAT_KEY, strlen(FORMAT_KEY), &f, 1);
    if (!rc) rocksdb_write(s->db, s->wopts, wb, &rerr);
    if (!rc && rerr) rc = store__rerr_log("store_migrate", rerr);
    if (!rc) rocksdb_flush_wal(s->db, 1, &rerr);
    if (!rc && rerr) rc = store__rerr_log("store_migrate", rerr);
    free(nk);
    rocksdb_writebatch_destroy(wb);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    if (!rc)
        keel_log(KEEL_LOG_INFO, "store_format_upgrade", "from=%d to=%d %s=%zu skipped=%zu", from,
                 STORE_FORMAT, what, total, skipped);
    return rc;
}

/* Format 1 -> 2: every key [slot][user key] becomes [slot][0x00][user key]. */
static int v1_record(rocksdb_writebatch_t *wb, rocksdb_column_family_handle_t *cf, const char *k,
                     size_t kl, const char *v, size_t vl, char *nk) {
    if (kl < KEY_PREFIX) return 0;
    if (kl + 1 > KEY_MAX) return 2; /* cannot carry a tag; unreadable either way */
    memcpy(nk, k, KEY_PREFIX);
    nk[KEY_PREFIX] = STORE_TAG_KEY;
    memcpy(nk + KEY_PREFIX + 1, k + KEY_PREFIX, kl - KEY_PREFIX);
    rocksdb_writebatch_delete_cf(wb, cf, k, kl);
    rocksdb_writebatch_put_cf(wb, cf, nk, kl + 1, v, vl);
    return 1;
}

static int migrate_v1(store *s) {
    return migrate_walk(s, 1, "keys", v1_record);
}

/* Format 2 -> 3: a score-index record for every sorted-set member record
 * (tag 0x01, type 0x83, an 8-byte IEEE-754 score). Orphaned members get one
 * too; store_gc removes both. */
static int v2_record(rocksdb_writebatch_t *wb, rocksdb_column_family_handle_t *cf, const char *k,
                     size_t kl, const char *v, size_t vl, char *nk) {
    if (kl < KEY_PREFIX + 3 || k[KEY_PREFIX] != STORE_TAG_SUB || vl != VAL_HDR + 8 ||
        (uint8_t)v[0] != (STORE_T_SUB | STORE_T_ZSET))
        return 0;
    size_t plen = KEY_PREFIX + 3 + get_be16(k + KEY_PREFIX + 1) + 8;
    if (kl < plen) return 0;
    if (kl + ZSCORE_LEN > KEY_MAX) return 2; /* no room for the score: unreadable as an index */
    static const char hdr[VAL_HDR] = {(char)(STORE_T_SUB | STORE_T_ZSET)};
    uint64_t bits = get_be64(v + VAL_HDR);
    double d;
    memcpy(&d, &bits, 8);
    memcpy(nk, k, plen);
    nk[KEY_PREFIX] = STORE_TAG_ZIDX;
    zscore_encode(nk + plen, d);
    memcpy(nk + plen + ZSCORE_LEN, k + plen, kl - plen);
    rocksdb_writebatch_put_cf(wb, cf, nk, kl + ZSCORE_LEN, hdr, sizeof hdr);
    return 1;
}

static int migrate_v2(store *s) {
    return migrate_walk(s, 2, "zset_index_records", v2_record);
}

int store__format_open(store *s, char *err, size_t errcap) {
    char *rerr = NULL;
    size_t vl = 0;
    char *f =
        rocksdb_get_cf(s->db, s->ropts, s->cf_meta, FORMAT_KEY, strlen(FORMAT_KEY), &vl, &rerr);
    if (rerr) return store__rerr_log("store_format", rerr);
    if (f) {
        int v2 = vl == 1 && f[0] == '2';
        int ok = v2 || (vl == 1 && f[0] == '0' + STORE_FORMAT);
        if (!ok && err && errcap)
            snprintf(err, errcap, "cannot open store in %s: data format '%.*s' is not %d", s->dir,
                     (int)(vl < 8 ? vl : 8), f, STORE_FORMAT);
        rocksdb_free(f);
        if (v2) return migrate_v2(s);
        return ok ? 0 : KEEL_ECORRUPT;
    }
    /* No format record: a new store, or one written by format 1. */
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_total_order_seek(ro, 1);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    rocksdb_iter_seek_to_first(it);
    int empty = !rocksdb_iter_valid(it);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    if (!empty) return migrate_v1(s);
    const char c = '0' + STORE_FORMAT;
    rocksdb_put_cf(s->db, s->wopts, s->cf_meta, FORMAT_KEY, strlen(FORMAT_KEY), &c, 1, &rerr);
    if (!rerr) rocksdb_flush_wal(s->db, 1, &rerr);
    return rerr ? store__rerr_log("store_format", rerr) : 0;
}

/* ---- Range scans ------------------------------------------------------------ */

long store_scan_range(store *s, unsigned slot, const char *from, size_t fromlen, const char *to,
                      size_t tolen, size_t skip, size_t max, int64_t now_ms, store_rec_cb cb,
                      void *arg) {
    if (slot >= STORE_SLOTS || !cb || s->txn.open || fromlen > KEY_MAX - KEY_PREFIX ||
        (to && tolen > KEY_MAX - KEY_PREFIX))
        return KEEL_EINVAL;
    if (max == 0) return 0;
    int wrc = store__turn_write(s); /* iterators see only the DB */
    if (wrc) return wrc;
    char *lo = malloc(KEY_PREFIX + fromlen + 1), *hi = malloc(KEY_PREFIX + tolen + 1);
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return KEEL_ENOMEM;
    }
    put_be16(lo, slot);
    if (fromlen) memcpy(lo + KEY_PREFIX, from, fromlen);
    size_t hil = KEY_PREFIX;
    if (to) {
        put_be16(hi, slot);
        if (tolen) memcpy(hi + KEY_PREFIX, to, tolen);
        hil += tolen;
    } else {
        put_be16(hi, slot + 1);
    }
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_prefix_same_as_start(ro, 1);
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi, hil);
    /* pinned: each step's key stays where the memtable holds it, so the
     * iterator does not copy it into its own buffer (the value is copied
     * by cb anyway; nothing is kept past the scan) */
    rocksdb_readoptions_set_pin_data(ro, 1);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    long n = 0;
    for (rocksdb_iter_seek(it, lo, KEY_PREFIX + fromlen); rocksdb_iter_valid(it) && (size_t)n < max;
         rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (kl < KEY_PREFIX || vl < VAL_HDR) continue;
        int64_t exp = (int64_t)get_be64(v + 1);
        if (exp != 0 && exp <= now_ms) continue;
        if (skip) {
            skip--;
            continue;
        }
        store_value sv = {
            .type = (uint8_t)v[0], .expire_ms = exp, .data = v + VAL_HDR, .len = vl - VAL_HDR};
        n++;
        if (cb(arg, k + KEY_PREFIX, kl - KEY_PREFIX, &sv)) break;
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) n = store__rerr_log("store_scan", rerr);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    free(lo);
    free(hi);
    return n;
}

/* Descending scan. A prefix-mode iterator (prefix_same_as_start, the
 * memtable prefix bloom) finds nothing on SeekForPrev here (test-zset
 * scan_rev), so this one is total-order, bounded below by from, and stops
 * at the first record outside [from, to) of the slot. */
long store_scan_range_rev(store *s, unsigned slot, const char *from, size_t fromlen, const char *to,
                          size_t tolen, size_t skip, size_t max, int64_t now_ms, store_rec_cb cb,
                          void *arg) {
    if (slot >= STORE_SLOTS || !cb || !to || s->txn.open || fromlen > KEY_MAX - KEY_PREFIX ||
        tolen > KEY_MAX - KEY_PREFIX)
        return KEEL_EINVAL;
    if (max == 0) return 0;
    int wrc = store__turn_write(s);
    if (wrc) return wrc;
    char *lo = malloc(KEY_PREFIX + fromlen + 1), *hi = malloc(KEY_PREFIX + tolen + 1);
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return KEEL_ENOMEM;
    }
    put_be16(lo, slot);
    if (fromlen) memcpy(lo + KEY_PREFIX, from, fromlen);
    size_t lol = KEY_PREFIX + fromlen, hil = KEY_PREFIX + tolen;
    put_be16(hi, slot);
    if (tolen) memcpy(hi + KEY_PREFIX, to, tolen);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_total_order_seek(ro, 1);
    rocksdb_readoptions_set_iterate_lower_bound(ro, lo, lol);
    /* and the upper one: without it a seek_for_prev past the range's last
     * record walks every deleted record (and range tombstone) above it */
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi, hil);
    rocksdb_readoptions_set_pin_data(ro, 1); /* as in store_scan_range */
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    long n = 0;
    rocksdb_iter_seek_for_prev(it, hi, hil);
    for (; rocksdb_iter_valid(it) && (size_t)n < max; rocksdb_iter_prev(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (kl < KEY_PREFIX || get_be16(k) != slot) break;
        size_t m = kl < hil ? kl : hil;
        int c = memcmp(k, hi, m);
        if (c > 0 || (c == 0 && kl >= hil)) continue; /* at or past to */
        c = memcmp(k, lo, kl < lol ? kl : lol);
        if (c < 0 || (c == 0 && kl < lol)) break; /* before from */
        if (vl < VAL_HDR) continue;
        int64_t exp = (int64_t)get_be64(v + 1);
        if (exp != 0 && exp <= now_ms) continue;
        if (skip) {
            skip--;
            continue;
        }
        store_value sv = {
            .type = (uint8_t)v[0], .expire_ms = exp, .data = v + VAL_HDR, .len = vl - VAL_HDR};
        n++;
        if (cb(arg, k + KEY_PREFIX, kl - KEY_PREFIX, &sv)) break;
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) n = store__rerr_log("store_scan", rerr);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    free(lo);
    free(hi);
    return n;
}

/* ---- Cleanup of orphaned field records ----------------------------------- */

/* Cleans one slot from the gc cursor. Returns 1 when the slot is done, 0
 * when the budget ran out (the cursor then names where to resume), or a
 * negative KEEL_E*. */
static int gc_slot(store *s, unsigned slot, int64_t now_ms, size_t *budget, long *deleted) {
    store_txn *t = &s->txn;
    char lo[KEY_PREFIX + 1], hi[KEY_PREFIX + 1];
    put_be16(lo, slot);
    lo[KEY_PREFIX] = STORE_TAG_SUB;
    put_be16(hi, slot);
    hi[KEY_PREFIX] = STORE_TAG_ZIDX + 1; /* field and score-index records */
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(ro, 0);
    rocksdb_readoptions_set_prefix_same_as_start(ro, 1);
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi, sizeof hi);
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(s->db, ro, s->cf_data);
    char *grp = malloc(KEY_MAX + 8); /* the current key's [slot][1][klen][key] */
    size_t grplen = 0;
    uint64_t live = 0; /* its live version, 0 = none */
    int rc = grp ? 0 : KEEL_ENOMEM;
    if (s->gc_keylen)
        rocksdb_iter_seek(it, s->gc_key, s->gc_keylen);
    else
        rocksdb_iter_seek(it, lo, sizeof lo);
    while (!rc && rocksdb_iter_valid(it) && *budget > 0) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        (*budget)--;
        size_t ukl = kl >= KEY_PREFIX + 3 ? get_be16(k + KEY_PREFIX + 1) : 0;
        size_t plen = KEY_PREFIX + 3 + ukl; /* [slot][1][klen][key] */
        int wellformed = kl >= plen + 8 && vl >= VAL_HDR;
        uint64_t ver = wellformed ? get_be64(k + plen) : 0;
        if (wellformed && (grplen != plen || memcmp(grp, k, plen) != 0)) {
            memcpy(grp, k, plen);
            grplen = plen;
            live = 0;
            char *rk = malloc(ukl + 1);
            if (!rk) {
                rc = KEEL_ENOMEM;
                break;
            }
            store_value mv;
            size_t rkl = store_rkey(rk, k + KEY_PREFIX + 3, ukl);
            int g = rkl ? store_txn_get(t, slot, rk, rkl, now_ms, &mv) : KEEL_ENOTFOUND;
            free(rk);
            if (g == 0) {
                if (type_compound(mv.type) && mv.len >= 8) live = get_be64(mv.data);
                store_value_release(&mv);
            } else if (g != KEEL_ENOTFOUND) {
                rc = g;
                break;
            }
        }
        if (wellformed && live && ver == live) { /* skip the live version's records */
            char *nx = malloc(plen + 8);
            if (!nx) {
                rc = KEEL_ENOMEM;
                break;
            }
            memcpy(nx, k, plen);
            put_be64(nx + plen, ver + 1);
            rocksdb_iter_seek(it, nx, plen + 8);
            free(nx);
            continue;
        }
        int ttl = vl >= VAL_HDR && get_be64(v + 1) != 0;
        if ((rc = store__txn_del_known(t, slot, k, kl, vl, ttl, kv_hash(k, kl, v, vl),
                                       vl ? (uint8_t)v[0] : 0)))
            break;
        (*deleted)++;
        rocksdb_iter_next(it);
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(it, &rerr);
    if (rerr) rc = store__rerr_log("store_gc", rerr);
    int finished = !rocksdb_iter_valid(it);
    if (!rc && !finished) {
        size_t kl;
        const char *k = rocksdb_iter_key(it, &kl);
        char *p = realloc(s->gc_key, kl);
        if (!p)
            rc = KEEL_ENOMEM;
        else {
            s->gc_key = p;
            memcpy(p, k, kl);
            s->gc_keylen = kl;
        }
    }
    free(grp);
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    return rc ? rc : finished;
}

long store_gc(store *s, int64_t now_ms, size_t max) {
    store_txn *t = &s->txn;
    if (t->open) return KEEL_EINVAL;
    if (max == 0 || s->gc_pending == 0) return 0;
    int wrc = store__turn_write(s);
    if (wrc) return wrc;
    size_t budget = max;
    long deleted = 0;
    int rc = 0;
    uint64_t t0 = keel_mono_us();
    store_txn_begin(s);
    for (unsigned n = 0; n < STORE_SLOTS && budget > 0 && s->gc_pending; n++) {
        unsigned slot = s->gc_cursor;
        if (s->gc_slot[slot] && !(s->sweep_skip && s->sweep_skip(s->sweep_skip_arg, slot))) {
            rc = gc_slot(s, slot, now_ms, &budget, &deleted);
            if (rc <= 0) break; /* an error, or resume inside this slot */
            /* Finished. Marks set meanwhile by our own deletes do not count:
             * they name the records just removed. */
            s->gc_slot[slot] = 0;
            s->gc_pending--;
        }
        s->gc_cursor = (slot + 1) % STORE_SLOTS;
        s->gc_keylen = 0;
    }
    if (rc < 0) {
        store_txn_abort(t);
        return rc;
    }
    /* Lazy: an orphan is invisible, so its delete need not be durable (one
     * lost in a crash is found again: open marks every slot with field
     * records), and a gc run costs no fsync of its own. */
    if ((rc = store_txn_commit_lazy(t))) return rc;
    if (deleted)
        keel_log(KEEL_LOG_DEBUG, "store_gc", "deleted=%ld us=%llu", deleted,
                 (unsigned long long)(keel_mono_us() - t0));
    return deleted;
}
