/* store_move.c - the store side of partition moves (DESIGN.md §6): snapshots,
 * chunked range copy, change capture and range checksums. See store.h for the
 * contracts.
 *
 * Iteration. The 2-byte slot prefix is the prefix extractor, so an iterator
 * sees a well-ordered stream only within one slot (prefix_same_as_start)
 * unless it asks for total order. Range copy and checksum walk slot by slot with one
 * prefix iterator per call, re-seeking at each slot's first key: a seek picks
 * the prefix afresh, and the iterator turns invalid at the end of the slot.
 *
 * Snapshots. RocksDB iterators see only the DB, never the turn overlay, so a
 * snapshot first writes the turn batch out (store__turn_write); from then on
 * it holds every committed command. Its sequence is the latest one right
 * after creation: the store has one thread, so no write can come between.
 *
 * Checksums. store_range_checksum hashes every key of the range (kv_hash,
 * store_int.h); store_range_digest reads the same XOR from the per-slot
 * digests store.c maintains on every commit, for the fence's write pause.
 *
 * Change capture. The turn overlay (store_int.h: txn->ents) keeps each key
 * the turn wrote with its absolute final state, so when turn_write hands the
 * batch to RocksDB it also reports the overlay's written entries to every
 * capture covering their slot. That reports only writes RocksDB accepted, in
 * turn (= commit) order, each key once per turn, and costs nothing when no
 * capture is active (ncaptures == 0).
 *
 * Invariants: captures[i].active entries number exactly ncaptures; a
 * snapshot never outlives its store.
 */
#include "store/store_int.h"
#include "core/err.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

struct store_snapshot {
    store *s;
    const rocksdb_snapshot_t *snap;
    uint64_t seq;
};

/* ---- Snapshots ------------------------------------------------------------ */

store_snapshot *store_snapshot_new(store *s) {
    if (s->txn.open) {
        keel_log(KEEL_LOG_ERROR, "store_snapshot", "err=txn-open");
        return NULL;
    }
    if (store__turn_write(s)) return NULL; /* logged */
    store_snapshot *snap = calloc(1, sizeof *snap);
    if (!snap) {
        keel_log(KEEL_LOG_ERROR, "store_snapshot", "err=nomem");
        return NULL;
    }
    snap->s = s;
    snap->snap = rocksdb_create_snapshot(s->db);
    snap->seq = rocksdb_get_latest_sequence_number(s->db);
    return snap;
}

void store_snapshot_free(store_snapshot *snap) {
    if (!snap) return;
    rocksdb_release_snapshot(snap->s->db, snap->snap);
    free(snap);
}

uint64_t store_snapshot_seq(const store_snapshot *snap) {
    return snap->seq;
}

/* ---- Slot-by-slot range iteration ----------------------------------------- */

/* A walk over slots [lo, hi] in encoded-key order. */
typedef struct range_iter {
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it;
    unsigned slot, hi;
} range_iter;

static void range_open(range_iter *r, store *s, const store_snapshot *snap, unsigned lo,
                       unsigned hi) {
    r->ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_fill_cache(r->ro, 0); /* a bulk scan; keep the hot set */
    rocksdb_readoptions_set_prefix_same_as_start(r->ro, 1);
    if (snap) rocksdb_readoptions_set_snapshot(r->ro, snap->snap);
    r->it = rocksdb_create_iterator_cf(s->db, r->ro, s->cf_data);
    r->slot = lo;
    r->hi = hi;
}

/* Positions on the first key of slot r->slot or a later one in the range.
 * Returns 1 on a key, 0 at the end of the range. */
static int range_settle(range_iter *r) {
    for (;;) {
        if (rocksdb_iter_valid(r->it)) {
            size_t kl;
            const char *k = rocksdb_iter_key(r->it, &kl);
            if (kl >= KEY_PREFIX && get_be16(k) == r->slot) return 1;
        }
        char *rerr = NULL;
        rocksdb_iter_get_error(r->it, &rerr);
        if (rerr) { /* surfaced by range_close */
            rocksdb_free(rerr);
            return 0;
        }
        if (r->slot >= r->hi) return 0;
        char p[KEY_PREFIX];
        put_be16(p, ++r->slot);
        rocksdb_iter_seek(r->it, p, KEY_PREFIX);
    }
}

/* Starts at the first key of the range, or strictly after the encoded key
 * after. Returns 1 on a key, 0 at the end. */
static int range_start(range_iter *r, const char *after, size_t afterlen) {
    if (!after) {
        char p[KEY_PREFIX];
        put_be16(p, r->slot);
        rocksdb_iter_seek(r->it, p, KEY_PREFIX);
        return range_settle(r);
    }
    r->slot = get_be16(after);
    rocksdb_iter_seek(r->it, after, afterlen);
    if (rocksdb_iter_valid(r->it)) {
        size_t kl;
        const char *k = rocksdb_iter_key(r->it, &kl);
        if (kl == afterlen && memcmp(k, after, kl) == 0) rocksdb_iter_next(r->it);
    }
    return range_settle(r);
}

static int range_next(range_iter *r) {
    rocksdb_iter_next(r->it);
    return range_settle(r);
}

/* Frees the walk. Returns 0 or KEEL_EIO if the iterator failed. */
static int range_close(range_iter *r, const char *event) {
    char *rerr = NULL;
    rocksdb_iter_get_error(r->it, &rerr);
    rocksdb_iter_destroy(r->it);
    rocksdb_readoptions_destroy(r->ro);
    return rerr ? store__rerr_log(event, rerr) : 0;
}

static int range_ok(const store *s, const store_snapshot *snap, unsigned lo, unsigned hi) {
    return lo <= hi && hi < STORE_SLOTS && (!snap || snap->s == s);
}

/* ---- Range copy ----------------------------------------------------------- */

long store_copy_range(store *s, const store_snapshot *snap, unsigned slot_lo, unsigned slot_hi,
                      const char *after, size_t afterlen, size_t max_bytes, store_kv_cb cb,
                      void *arg, char **next, size_t *nextlen) {
    *next = NULL;
    *nextlen = 0;
    if (!snap || !cb || !range_ok(s, snap, slot_lo, slot_hi)) return KEEL_EINVAL;
    if (after && (afterlen < KEY_PREFIX || afterlen > KEY_MAX || get_be16(after) < slot_lo ||
                  get_be16(after) > slot_hi))
        return KEEL_EINVAL;
    range_iter r;
    range_open(&r, s, snap, slot_lo, slot_hi);
    long n = 0;
    size_t bytes = 0;
    int more = 0, stop = 0;
    char *last = NULL;
    size_t lastlen = 0;
    for (int ok = range_start(&r, after, afterlen); ok; ok = range_next(&r)) {
        if (stop || (n > 0 && bytes >= max_bytes)) {
            more = 1; /* a key remains: resume after the last one delivered */
            break;
        }
        size_t kl, vl;
        const char *k = rocksdb_iter_key(r.it, &kl);
        const char *v = rocksdb_iter_value(r.it, &vl);
        if (vl < VAL_HDR) {
            keel_log(KEEL_LOG_ERROR, "store_copy_corrupt", "slot=%u vlen=%zu", r.slot, vl);
            n = KEEL_ECORRUPT;
            break;
        }
        /* Kept before cb: the iterator's key is only valid until it moves. */
        if (kl > lastlen || !last) {
            char *p = realloc(last, kl);
            if (!p) {
                n = KEEL_ENOMEM;
                break;
            }
            last = p;
        }
        memcpy(last, k, kl);
        lastlen = kl;
        n++;
        bytes += kl + vl;
        stop = cb(arg, r.slot, k + KEY_PREFIX, kl - KEY_PREFIX, v, vl) != 0;
    }
    int rc = range_close(&r, "store_copy_range");
    if (rc && n >= 0) n = rc;
    if (n < 0 || !more) {
        free(last);
        return n;
    }
    *next = last;
    *nextlen = lastlen;
    return n;
}

/* ---- Checksum ------------------------------------------------------------- */

int store_range_checksum(store *s, const store_snapshot *snap, unsigned slot_lo, unsigned slot_hi,
                         uint64_t *xor_out, uint64_t *keys_out) {
    *xor_out = 0;
    if (keys_out) *keys_out = 0;
    if (!range_ok(s, snap, slot_lo, slot_hi)) return KEEL_EINVAL;
    if (!snap) {
        if (s->txn.open) return KEEL_EINVAL;
        int rc = store__turn_write(s); /* iterators see only the DB */
        if (rc) return rc;
    }
    range_iter r;
    range_open(&r, s, snap, slot_lo, slot_hi);
    uint64_t x = 0, keys = 0;
    for (int ok = range_start(&r, NULL, 0); ok; ok = range_next(&r)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(r.it, &kl);
        const char *v = rocksdb_iter_value(r.it, &vl);
        x ^= kv_hash(k, kl, v, vl);
        keys++;
    }
    int rc = range_close(&r, "store_range_checksum");
    if (rc) return rc;
    *xor_out = x;
    if (keys_out) *keys_out = keys;
    return 0;
}

/* The digests are the checksum's per-slot terms, kept up to date at every
 * commit (store.c), so this equals the scan above without reading a key. */
int store_range_digest(store *s, unsigned slot_lo, unsigned slot_hi, uint64_t *xor_out,
                       uint64_t *keys_out) {
    *xor_out = 0;
    if (keys_out) *keys_out = 0;
    if (!range_ok(s, NULL, slot_lo, slot_hi) || s->txn.open) return KEEL_EINVAL;
    uint64_t x = 0, keys = 0;
    for (unsigned slot = slot_lo; slot <= slot_hi; slot++) {
        slot_stat st = store__slot_view(s, slot);
        x ^= st.digest;
        keys += st.keys;
    }
    *xor_out = x;
    if (keys_out) *keys_out = keys;
    return 0;
}

/* ---- Change capture ------------------------------------------------------- */

int store_capture_start(store *s, unsigned slot_lo, unsigned slot_hi, store_change_cb cb,
                        void *arg) {
    if (!cb || !range_ok(s, NULL, slot_lo, slot_hi) || s->txn.open) return KEEL_EINVAL;
    if (s->ncaptures == STORE_CAPTURES) return KEEL_ELIMIT;
    int rc = store__turn_write(s); /* earlier commits belong to the snapshot */
    if (rc) return rc;
    for (unsigned i = 0; i < STORE_CAPTURES; i++) {
        store_capture *c = &s->captures[i];
        if (c->active) continue;
        *c = (store_capture){.active = 1, .lo = slot_lo, .hi = slot_hi, .cb = cb, .arg = arg};
        s->ncaptures++;
        keel_log(KEEL_LOG_DEBUG, "store_capture_start", "handle=%u lo=%u hi=%u", i, slot_lo,
                 slot_hi);
        return (int)i;
    }
    return KEEL_ELIMIT; /* unreachable while the invariant holds */
}

int store_capture_stop(store *s, int handle) {
    if (handle < 0 || (unsigned)handle >= STORE_CAPTURES || !s->captures[handle].active ||
        s->txn.open)
        return KEEL_EINVAL;
    int rc = store__turn_write(s); /* report what was committed up to now */
    s->captures[handle] = (store_capture){0};
    s->ncaptures--;
    keel_log(KEEL_LOG_DEBUG, "store_capture_stop", "handle=%d", handle);
    return rc;
}

void store__capture_emit(store *s) {
    const store_txn *t = &s->txn;
    for (size_t i = 0; i < t->nents; i++) {
        const txn_entry *e = &t->ents[i];
        if (!e->written || e->klen < KEY_PREFIX) continue;
        const char *k = t->arena.p + e->koff;
        unsigned slot = get_be16(k);
        const char *v = e->exists ? t->arena.p + e->voff : NULL;
        size_t vl = e->exists ? e->vlen : 0;
        for (unsigned c = 0; c < STORE_CAPTURES; c++) {
            const store_capture *cap = &s->captures[c];
            if (cap->active && slot >= cap->lo && slot <= cap->hi)
                cap->cb(cap->arg, slot, k + KEY_PREFIX, e->klen - KEY_PREFIX, v, vl,
                        e->orig_known ? &e->orig : NULL);
        }
    }
}
