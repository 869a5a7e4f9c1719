/* test-store-move.c - unit tests for the store side of partition moves
 * (store_move.c): snapshots, chunked range copy, raw apply, change capture,
 * range checksums, the incremental range digest and the sweep filter. Each
 * case gets fresh temporary directories (mkdtemp), removed afterwards: a
 * source store "a" and a destination store "b". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tmpdir.h"

#include "core/err.h"
#include "store/store.h"

#include <rocksdb/c.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOW 1700000000000LL

typedef struct fx {
    char dira[TMPDIR_MAX], dirb[TMPDIR_MAX];
    store *a, *b;
} fx;

static store *open_dir(const char *dir) {
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    o.cache_bytes = 8 << 20;
    store *s = NULL;
    char err[256];
    int rc = store_open(dir, &o, &s, err, sizeof err);
    if (rc) fprintf(stderr, "store_open: %s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (tmpdir_make(f->dira, "test-move-a") || tmpdir_make(f->dirb, "test-move-b")) return -1;
    f->a = open_dir(f->dira);
    f->b = open_dir(f->dirb);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    store_free(f->a);
    store_free(f->b);
    tmpdir_remove(f->dira);
    tmpdir_remove(f->dirb);
    free(f);
    return 0;
}

/* Closing and reopening moves the memtable into SST files (WAL recovery
 * flushes), so later reads merge memtable and SSTs. */
static store *reopen(store *s, const char *dir) {
    store_free(s);
    return open_dir(dir);
}

static void put_exp(store *s, unsigned slot, const char *k, const char *v, int64_t exp) {
    store_txn *t = store_txn_begin(s);
    assert_int_equal(store_txn_put(t, slot, k, strlen(k), STORE_T_STRING, exp, v, strlen(v)), 0);
    assert_int_equal(store_txn_commit(t), 0);
}

static void put(store *s, unsigned slot, const char *k, const char *v) {
    put_exp(s, slot, k, v, 0);
}

static void del(store *s, unsigned slot, const char *k) {
    store_txn *t = store_txn_begin(s);
    assert_int_equal(store_txn_del(t, slot, k, strlen(k), NULL), 0);
    assert_int_equal(store_txn_commit(t), 0);
}

static void sync_ok(store *s) {
    assert_int_equal(store_sync(s, NULL), 0);
}

/* ---- Copy collector ------------------------------------------------------- */

typedef struct kv {
    unsigned slot;
    char key[64];
    size_t klen;
    char val[128];
    size_t vlen;
} kv;

typedef struct coll {
    kv items[1024];
    size_t n;
    store *dst; /* if set, each chunk is also applied with store_txn_put_raw */
    store_txn *t;
} coll;

static int collect(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                   size_t vlen) {
    coll *c = arg;
    assert_true(c->n < 1024);
    assert_true(klen < sizeof c->items[0].key && vlen <= sizeof c->items[0].val);
    kv *e = &c->items[c->n++];
    e->slot = slot;
    memcpy(e->key, key, klen);
    e->klen = klen;
    memcpy(e->val, val, vlen);
    e->vlen = vlen;
    if (c->dst) assert_int_equal(store_txn_put_raw(c->t, slot, key, klen, val, vlen), 0);
    return 0;
}

/* Copies [lo, hi] at snap in chunks of about max_bytes; returns the number
 * of calls. Applies to c->dst (one txn per chunk) when set. */
static int copy_all(store *s, const store_snapshot *snap, unsigned lo, unsigned hi,
                    size_t max_bytes, coll *c) {
    char *after = NULL;
    size_t afterlen = 0;
    int calls = 0;
    for (;;) {
        char *next;
        size_t nextlen;
        if (c->dst) c->t = store_txn_begin(c->dst);
        long n = store_copy_range(s, snap, lo, hi, after, afterlen, max_bytes, collect, c, &next,
                                  &nextlen);
        if (c->dst) assert_int_equal(store_txn_commit(c->t), 0);
        assert_true(n >= 0);
        calls++;
        free(after);
        after = next;
        afterlen = nextlen;
        if (!next) break;
        assert_true(n > 0); /* every call that is not the last makes progress */
        assert_true(calls < 10000);
    }
    if (c->dst) sync_ok(c->dst);
    return calls;
}

/* Encoded-key order: slot, then user key bytes (shorter first on a tie). */
static int kv_cmp(const kv *x, const kv *y) {
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    size_t m = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, m);
    if (c) return c;
    return x->klen < y->klen ? -1 : x->klen > y->klen;
}

static const kv *find(const coll *c, unsigned slot, const char *k) {
    for (size_t i = 0; i < c->n; i++)
        if (c->items[i].slot == slot && c->items[i].klen == strlen(k) &&
            memcmp(c->items[i].key, k, c->items[i].klen) == 0)
            return &c->items[i];
    return NULL;
}

static int val_is(const kv *e, const char *payload) {
    return e && e->vlen == 9 + strlen(payload) && memcmp(e->val + 9, payload, e->vlen - 9) == 0;
}

/* Fills slots 100..104 with 40 keys each (values of varying size), half
 * before a reopen (SSTs) and half after (memtable), plus neighbours in 99 and
 * 105 that a copy of [100, 104] must not return. Returns the key count. */
static size_t fill_range(store **s, const char *dir) {
    char k[32], v[96];
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned slot = 100; slot <= 104; slot++)
            for (int i = pass; i < 40; i += 2) {
                snprintf(k, sizeof k, "k%03d", i);
                snprintf(v, sizeof v, "v%u-%d-%.*s", slot, i, i % 50,
                         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
                put(*s, slot, k, v);
                n++;
            }
        put(*s, 99, "outside-lo", "x");
        put(*s, 105, "outside-hi", "x");
        sync_ok(*s);
        if (pass == 0) *s = reopen(*s, dir);
    }
    return n;
}

/* ---- Tests ---------------------------------------------------------------- */

/* A chunked copy returns every key of the range once, in key order, as the
 * snapshot saw it: later puts, overwrites and deletes do not show. */
static void test_copy_chunks_exact_and_ordered(void **state) {
    fx *f = *state;
    size_t want = fill_range(&f->a, f->dira);
    put(f->a, 102, "k005", "committed-not-synced"); /* in the turn, not yet written */
    store_snapshot *snap = store_snapshot_new(f->a);
    assert_non_null(snap);
    /* After the snapshot: none of this may appear. */
    put(f->a, 101, "new-after-snap", "x");
    put(f->a, 103, "k007", "overwritten-after-snap");
    del(f->a, 104, "k010");
    sync_ok(f->a);
    coll *c = calloc(1, sizeof *c);
    int calls = copy_all(f->a, snap, 100, 104, 300, c);
    assert_true(calls > 5);
    assert_int_equal(c->n, want);
    for (size_t i = 1; i < c->n; i++)
        assert_true(kv_cmp(&c->items[i - 1], &c->items[i]) < 0); /* ordered, no duplicate */
    for (size_t i = 0; i < c->n; i++)
        assert_true(c->items[i].slot >= 100 && c->items[i].slot <= 104);
    assert_null(find(c, 101, "new-after-snap"));
    assert_true(val_is(find(c, 103, "k007"), "v103-7-xxxxxxx"));
    assert_non_null(find(c, 104, "k010"));
    assert_true(val_is(find(c, 102, "k005"), "committed-not-synced"));
    /* One big chunk gives the same answer. */
    coll *one = calloc(1, sizeof *one);
    assert_int_equal(copy_all(f->a, snap, 100, 104, SIZE_MAX, one), 1);
    assert_int_equal(one->n, c->n);
    for (size_t i = 0; i < c->n; i++)
        assert_int_equal(kv_cmp(&one->items[i], &c->items[i]), 0);
    free(one);
    free(c);
    store_snapshot_free(snap);
}

/* max_bytes 0 still delivers one key per call; the last call reports the end. */
static void test_copy_one_key_per_call(void **state) {
    fx *f = *state;
    put(f->a, 7, "a", "1");
    put(f->a, 7, "b", "2");
    put(f->a, 9, "c", "3");
    store_snapshot *snap = store_snapshot_new(f->a);
    coll *c = calloc(1, sizeof *c);
    assert_int_equal(copy_all(f->a, snap, 5, 12, 0, c), 3);
    assert_int_equal(c->n, 3);
    /* An empty range is finished at once. */
    char *next = (char *)1;
    size_t nl = 1;
    assert_int_equal(store_copy_range(f->a, snap, 13, 16383, NULL, 0, 100, collect, c, &next, &nl),
                     0);
    assert_null(next);
    assert_int_equal(nl, 0);
    free(c);
    store_snapshot_free(snap);
}

/* A copy applied with store_txn_put_raw reproduces the range: equal
 * checksums, per-slot statistics and TTL counts. */
static void test_copy_into_second_store(void **state) {
    fx *f = *state;
    fill_range(&f->a, f->dira);
    put_exp(f->a, 101, "ttl-live", "t", NOW + 60000);
    put_exp(f->a, 103, "ttl-dead", "t", NOW - 60000);
    store_snapshot *snap = store_snapshot_new(f->a);
    coll *c = calloc(1, sizeof *c);
    c->dst = f->b;
    copy_all(f->a, snap, 100, 104, 500, c);
    uint64_t xa, ka, xb, kb;
    assert_int_equal(store_range_checksum(f->a, snap, 100, 104, &xa, &ka), 0);
    assert_int_equal(store_range_checksum(f->b, NULL, 100, 104, &xb, &kb), 0);
    assert_int_equal(ka, c->n);
    assert_int_equal(kb, ka);
    assert_true(xa == xb);
    assert_true(xa != 0);
    for (unsigned slot = 99; slot <= 105; slot++) {
        uint64_t k1, b1, k2, b2;
        store_slot_stats(f->a, slot, &k1, &b1);
        store_slot_stats(f->b, slot, &k2, &b2);
        if (slot == 99 || slot == 105) {
            assert_int_equal(k2, 0);
            continue;
        }
        assert_int_equal(k1, k2);
        assert_int_equal(b1, b2);
    }
    assert_int_equal(store_total_expires(f->b), 2);
    /* Statistics survive a crash-free reopen and match a recount. */
    f->b = reopen(f->b, f->dirb);
    assert_int_equal(store_range_checksum(f->b, NULL, 100, 104, &xb, &kb), 0);
    assert_true(xa == xb);
    free(c);
    store_snapshot_free(snap);
}

/* Expired but unswept values are copied, with their expiry, and expire on
 * the destination the same way. */
static void test_copy_keeps_expiry(void **state) {
    fx *f = *state;
    put_exp(f->a, 300, "dead", "d", NOW - 1000);
    put_exp(f->a, 300, "live", "l", NOW + 1000);
    put(f->a, 300, "plain", "p");
    store_snapshot *snap = store_snapshot_new(f->a);
    coll *c = calloc(1, sizeof *c);
    c->dst = f->b;
    copy_all(f->a, snap, 300, 300, 1 << 20, c);
    assert_int_equal(c->n, 3);
    const kv *d = find(c, 300, "dead");
    assert_non_null(d);
    int64_t exp = 0;
    for (int i = 1; i <= 8; i++)
        exp = exp << 8 | (uint8_t)d->val[i];
    assert_int_equal(exp, NOW - 1000);
    store_value v;
    assert_int_equal(store_get(f->b, 300, "dead", 4, NOW, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_get(f->b, 300, "dead", 4, NOW - 2000, &v), 0);
    store_value_release(&v);
    assert_int_equal(store_get(f->b, 300, "live", 4, NOW, &v), 0);
    assert_int_equal(v.expire_ms, NOW + 1000);
    store_value_release(&v);
    assert_int_equal(store_get(f->b, 300, "live", 4, NOW + 1000, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_total_expires(f->b), 2);
    assert_int_equal(store_sweep_expired(f->b, NOW, 10), 1);
    assert_int_equal(store_total_expires(f->b), 1);
    free(c);
    store_snapshot_free(snap);
}

/* store_txn_put_raw keeps statistics exactly as store_txn_put does,
 * replacing values with and without TTL. */
static void test_put_raw_stats_match_put(void **state) {
    fx *f = *state;
    char raw[9 + 5];
    raw[0] = STORE_T_STRING;
    int64_t e = NOW + 5000;
    for (int i = 8; i >= 1; i--, e >>= 8)
        raw[i] = (char)e;
    memcpy(raw + 9, "hello", 5);
    /* a: store_txn_put; b: the same through put_raw. */
    put(f->a, 50, "k", "old-value");
    put(f->b, 50, "k", "old-value");
    put_exp(f->a, 50, "k", "hello", NOW + 5000);
    store_txn *t = store_txn_begin(f->b);
    assert_int_equal(store_txn_put_raw(t, 50, "k", 1, raw, sizeof raw), 0);
    assert_int_equal(store_txn_put_raw(t, 50, "n", 1, raw, 9), 0); /* empty payload */
    assert_int_equal(store_txn_commit(t), 0);
    put_exp(f->a, 50, "n", "", NOW + 5000);
    uint64_t k1, b1, k2, b2;
    store_slot_stats(f->a, 50, &k1, &b1);
    store_slot_stats(f->b, 50, &k2, &b2);
    assert_int_equal(k1, 2);
    assert_int_equal(k1, k2);
    assert_int_equal(b1, b2);
    assert_int_equal(store_total_expires(f->a), 2);
    assert_int_equal(store_total_expires(f->b), 2);
    store_value v;
    assert_int_equal(store_get(f->b, 50, "k", 1, NOW, &v), 0); /* from the overlay */
    assert_int_equal(v.len, 5);
    assert_memory_equal(v.data, "hello", 5);
    assert_int_equal(v.expire_ms, NOW + 5000);
    store_value_release(&v);
    uint64_t xa, xb;
    assert_int_equal(store_range_checksum(f->a, NULL, 50, 50, &xa, NULL), 0);
    assert_int_equal(store_range_checksum(f->b, NULL, 50, 50, &xb, NULL), 0);
    assert_true(xa == xb);
}

/* ---- Capture -------------------------------------------------------------- */

typedef struct change {
    unsigned slot;
    char key[32];
    int del;
    char payload[32];
    int64_t exp;
    char val[48]; /* the encoded value, vlen bytes */
    size_t vlen;
    int old_known;
    store_phys old;
} change;

typedef struct changes {
    change items[64];
    size_t n;
} changes;

static void on_change(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                      size_t vlen, const store_phys *old) {
    changes *c = arg;
    assert_true(c->n < 64 && klen < 32);
    change *e = &c->items[c->n++];
    memset(e, 0, sizeof *e);
    e->old_known = old != NULL;
    if (old) e->old = *old;
    if (val && vlen <= sizeof e->val) memcpy(e->val, val, vlen), e->vlen = vlen;
    e->slot = slot;
    memcpy(e->key, key, klen);
    e->del = val == NULL;
    if (val) {
        assert_true(vlen >= 9 && vlen - 9 < 32);
        memcpy(e->payload, val + 9, vlen - 9);
        for (int i = 1; i <= 8; i++)
            e->exp = e->exp << 8 | (uint8_t)val[i];
    } else {
        assert_int_equal(vlen, 0);
    }
}

static void assert_change(const changes *c, size_t i, unsigned slot, const char *key,
                          const char *payload) {
    assert_true(i < c->n);
    assert_int_equal(c->items[i].slot, slot);
    assert_string_equal(c->items[i].key, key);
    if (payload) {
        assert_false(c->items[i].del);
        assert_string_equal(c->items[i].payload, payload);
    } else {
        assert_true(c->items[i].del);
    }
}

/* A capture reports the puts and deletes committed after it started, turn by
 * turn at store_sync, each key once with its final state, in first-touch
 * order; nothing outside its slots, nothing aborted, nothing after stop. */
static void test_capture_turns_and_stop(void **state) {
    fx *f = *state;
    changes *c = calloc(1, sizeof *c);
    put(f->a, 10, "gone", "x");
    put(f->a, 10, "before", "committed before start"); /* same turn as start */
    int h = store_capture_start(f->a, 10, 11, on_change, c);
    assert_true(h >= 0);
    /* Turn 1. */
    put(f->a, 10, "a", "1");
    put(f->a, 11, "b", "b1");
    put(f->a, 10, "a", "2");
    del(f->a, 10, "gone");
    put(f->a, 12, "outside", "x");
    put(f->a, 9, "outside", "x");
    store_txn *t = store_txn_begin(f->a);
    assert_int_equal(store_txn_put(t, 10, "aborted", 7, STORE_T_STRING, 0, "x", 1), 0);
    store_txn_abort(t);
    put(f->a, 11, "tmp", "t");
    del(f->a, 11, "tmp");
    assert_int_equal(c->n, 0); /* nothing until the turn is written */
    sync_ok(f->a);
    assert_int_equal(c->n, 4);
    assert_change(c, 0, 10, "a", "2");
    assert_change(c, 1, 11, "b", "b1");
    assert_change(c, 2, 10, "gone", NULL);
    assert_change(c, 3, 11, "tmp", NULL);
    /* Turn 2: a raw put, a delete, and the sweep's delete of an expired key. */
    put_exp(f->a, 11, "ttl", "t", NOW - 1);
    sync_ok(f->a);
    assert_int_equal(c->n, 5);
    assert_change(c, 4, 11, "ttl", "t");
    assert_int_equal(c->items[4].exp, NOW - 1);
    t = store_txn_begin(f->a);
    char raw[10] = {STORE_T_STRING, 0, 0, 0, 0, 0, 0, 0, 0, 'r'};
    assert_int_equal(store_txn_put_raw(t, 10, "raw", 3, raw, sizeof raw), 0);
    assert_int_equal(store_txn_commit(t), 0);
    del(f->a, 10, "a");
    assert_int_equal(store_sweep_expired(f->a, NOW, 10), 1);
    sync_ok(f->a);
    assert_int_equal(c->n, 8);
    assert_change(c, 5, 10, "raw", "r");
    assert_change(c, 6, 10, "a", NULL);
    assert_change(c, 7, 11, "ttl", NULL);
    /* A scan writes the turn early: reported then, not again at sync. */
    put(f->a, 10, "early", "e");
    uint64_t x;
    assert_int_equal(store_range_checksum(f->a, NULL, 0, 0, &x, NULL), 0);
    assert_int_equal(c->n, 9);
    sync_ok(f->a);
    assert_int_equal(c->n, 9);
    /* Committed before stop but not synced: reported by stop. */
    put(f->a, 11, "last", "l");
    assert_int_equal(store_capture_stop(f->a, h), 0);
    assert_int_equal(c->n, 10);
    assert_change(c, 9, 11, "last", "l");
    put(f->a, 10, "after-stop", "x");
    del(f->a, 11, "b");
    sync_ok(f->a);
    assert_int_equal(c->n, 10);
    assert_int_equal(store_capture_stop(f->a, h), KEEL_EINVAL); /* already stopped */
    free(c);
}

/* Several captures with overlapping ranges each get their own reports, and
 * a freed handle is reused. */
static void test_capture_overlapping(void **state) {
    fx *f = *state;
    changes *c1 = calloc(1, sizeof *c1), *c2 = calloc(1, sizeof *c2);
    int h1 = store_capture_start(f->a, 0, 100, on_change, c1);
    int h2 = store_capture_start(f->a, 50, 16383, on_change, c2);
    assert_true(h1 >= 0 && h2 >= 0 && h1 != h2);
    put(f->a, 10, "x", "1");
    put(f->a, 60, "y", "2");
    put(f->a, 16383, "z", "3");
    sync_ok(f->a);
    assert_int_equal(c1->n, 2);
    assert_int_equal(c2->n, 2);
    assert_change(c1, 1, 60, "y", "2");
    assert_change(c2, 1, 16383, "z", "3");
    assert_int_equal(store_capture_stop(f->a, h1), 0);
    int h3 = store_capture_start(f->a, 0, 0, on_change, c1);
    assert_int_equal(h3, h1);
    assert_int_equal(store_capture_stop(f->a, h3), 0);
    assert_int_equal(store_capture_stop(f->a, h2), 0);
    free(c1);
    free(c2);
}

/* Snapshot + capture started back to back: copy then catch-up reproduces the
 * source exactly (the move's copy and catch-up steps in miniature). */
static void test_snapshot_plus_capture_converges(void **state) {
    fx *f = *state;
    fill_range(&f->a, f->dira);
    changes *ch = calloc(1, sizeof *ch);
    store_snapshot *snap = store_snapshot_new(f->a);
    int h = store_capture_start(f->a, 100, 104, on_change, ch);
    assert_true(h >= 0);
    put(f->a, 100, "k000", "changed");
    put(f->a, 104, "fresh", "f");
    del(f->a, 102, "k003");
    sync_ok(f->a);
    coll *c = calloc(1, sizeof *c);
    c->dst = f->b;
    copy_all(f->a, snap, 100, 104, 700, c);
    assert_int_equal(store_capture_stop(f->a, h), 0);
    store_txn *t = store_txn_begin(f->b);
    for (size_t i = 0; i < ch->n; i++) {
        const change *e = &ch->items[i];
        if (e->del) {
            assert_int_equal(store_txn_del(t, e->slot, e->key, strlen(e->key), NULL), 0);
        } else {
            assert_int_equal(store_txn_put(t, e->slot, e->key, strlen(e->key), STORE_T_STRING,
                                           e->exp, e->payload, strlen(e->payload)),
                             0);
        }
    }
    assert_int_equal(store_txn_commit(t), 0);
    sync_ok(f->b);
    uint64_t xa, ka, xb, kb;
    assert_int_equal(store_range_checksum(f->a, NULL, 100, 104, &xa, &ka), 0);
    assert_int_equal(store_range_checksum(f->b, NULL, 100, 104, &xb, &kb), 0);
    assert_int_equal(ka, kb);
    assert_true(xa == xb);
    assert_true(store_snapshot_seq(snap) > 0);
    free(c);
    free(ch);
    store_snapshot_free(snap);
}

/* ---- Checksum ------------------------------------------------------------- */

/* Same data written in different orders (and through a flush) gives the
 * same checksum; one differing value, key or extra key changes it. */
static void test_checksum_order_independent(void **state) {
    fx *f = *state;
    char k[16], v[16];
    for (int i = 0; i < 60; i++) {
        snprintf(k, sizeof k, "key%d", i);
        snprintf(v, sizeof v, "val%d", i * 7);
        put(f->a, 200 + (unsigned)(i % 3), k, v);
    }
    sync_ok(f->a);
    for (int i = 59; i >= 0; i--) {
        snprintf(k, sizeof k, "key%d", i);
        put(f->b, 200 + (unsigned)(i % 3), k, "placeholder");
        if (i == 30) f->b = reopen(f->b, f->dirb);
    }
    for (int i = 0; i < 60; i += 2) { /* final values, in another order */
        snprintf(k, sizeof k, "key%d", i);
        snprintf(v, sizeof v, "val%d", i * 7);
        put(f->b, 200 + (unsigned)(i % 3), k, v);
    }
    for (int i = 59; i > 0; i -= 2) {
        snprintf(k, sizeof k, "key%d", i);
        snprintf(v, sizeof v, "val%d", i * 7);
        put(f->b, 200 + (unsigned)(i % 3), k, v);
    }
    put(f->b, 199, "outside", "x"); /* outside the range: no effect */
    uint64_t xa, ka, xb, kb;
    assert_int_equal(store_range_checksum(f->a, NULL, 200, 202, &xa, &ka), 0);
    assert_int_equal(store_range_checksum(f->b, NULL, 200, 202, &xb, &kb), 0);
    assert_int_equal(ka, 60);
    assert_int_equal(kb, 60);
    assert_true(xa == xb);
    /* One value differs. */
    put(f->b, 201, "key1", "val8");
    assert_int_equal(store_range_checksum(f->b, NULL, 200, 202, &xb, &kb), 0);
    assert_true(xa != xb);
    put(f->b, 201, "key1", "val7");
    assert_int_equal(store_range_checksum(f->b, NULL, 200, 202, &xb, NULL), 0);
    assert_true(xa == xb);
    /* Only the expiry differs. */
    put_exp(f->b, 201, "key1", "val7", NOW);
    assert_int_equal(store_range_checksum(f->b, NULL, 200, 202, &xb, NULL), 0);
    assert_true(xa != xb);
    put(f->b, 201, "key1", "val7");
    /* A key moved to another slot, same bytes otherwise. */
    del(f->b, 200, "key0");
    put(f->b, 201, "key0", "val0");
    assert_int_equal(store_range_checksum(f->b, NULL, 200, 202, &xb, &kb), 0);
    assert_int_equal(kb, 60);
    assert_true(xa != xb);
    /* The key/value split matters: "ab"="c" is not "a"="bc". */
    uint64_t x1, x2;
    put(f->a, 500, "ab", "c");
    put(f->b, 500, "a", "bc");
    assert_int_equal(store_range_checksum(f->a, NULL, 500, 500, &x1, NULL), 0);
    assert_int_equal(store_range_checksum(f->b, NULL, 500, 500, &x2, NULL), 0);
    assert_true(x1 != x2);
    /* An empty range sums to 0. */
    assert_int_equal(store_range_checksum(f->a, NULL, 9000, 9100, &x1, &ka), 0);
    assert_true(x1 == 0);
    assert_int_equal(ka, 0);
}

/* A checksum at a snapshot ignores later writes. */
static void test_checksum_at_snapshot(void **state) {
    fx *f = *state;
    put(f->a, 1, "a", "1");
    uint64_t x0, x1, x2;
    assert_int_equal(store_range_checksum(f->a, NULL, 0, 16383, &x0, NULL), 0);
    store_snapshot *snap = store_snapshot_new(f->a);
    uint64_t seq = store_snapshot_seq(snap);
    put(f->a, 1, "a", "2");
    put(f->a, 16383, "b", "2");
    sync_ok(f->a);
    assert_int_equal(store_range_checksum(f->a, snap, 0, 16383, &x1, NULL), 0);
    assert_int_equal(store_range_checksum(f->a, NULL, 0, 16383, &x2, NULL), 0);
    assert_true(x0 == x1);
    assert_true(x1 != x2);
    store_snapshot *snap2 = store_snapshot_new(f->a);
    assert_true(store_snapshot_seq(snap2) > seq);
    store_snapshot_free(snap2);
    store_snapshot_free(snap);
    store_snapshot_free(NULL);
}

/* ---- Digest --------------------------------------------------------------- */

#define DG_LO 40u /* the randomized workload writes slots DG_LO..DG_HI... */
#define DG_HI 42u
#define DG_KEYS 40 /* ...with this many user keys each, so turns reuse keys */

/* A check that also works in a forked child, which must never return into
 * cmocka's runner: there it exits with status 2 instead. */
static int in_child;

static void check_failed(const char *what, int line) {
    if (in_child) {
        fprintf(stderr, "child: check failed at line %d: %s\n", line, what);
        _exit(2);
    }
    fail_msg("check failed at line %d: %s", line, what);
}
#define CHECK(c) ((c) ? (void)0 : check_failed(#c, __LINE__))

/* What the randomized workload did, so a test can tell it covered each path. */
typedef struct dg_seen {
    unsigned aborted, swept, range_deleted, reopened;
} dg_seen;

static uint64_t rnd(uint64_t *r) { /* xorshift64* */
    *r ^= *r >> 12;
    *r ^= *r << 25;
    *r ^= *r >> 27;
    return *r * 0x2545f4914f6cdd1dull;
}

/* No expiry (half the time), one in the past (the sweep deletes it) or one
 * in the future. */
static int64_t rnd_exp(uint64_t *r) {
    switch (rnd(r) % 4) {
    case 0:
        return NOW - 1 - (int64_t)(rnd(r) % 100000);
    case 1:
        return NOW + 1 + (int64_t)(rnd(r) % 100000);
    default:
        return 0;
    }
}

/* One random write in the open txn t: a put, a raw put, a get-then-put (as
 * SET does) or a delete, of a random key and binary value. */
static void rnd_op(store_txn *t, uint64_t *r) {
    unsigned slot = DG_LO + (unsigned)(rnd(r) % (DG_HI - DG_LO + 1));
    char k[16], raw[9 + 100];
    size_t kl = (size_t)snprintf(k, sizeof k, "k%02u", (unsigned)(rnd(r) % DG_KEYS));
    size_t vl = (size_t)(rnd(r) % 100);
    int64_t exp = rnd_exp(r);
    raw[0] = STORE_T_STRING;
    for (int i = 8, e = 0; i >= 1; i--, e += 8)
        raw[i] = (char)((uint64_t)exp >> e);
    for (size_t i = 0; i < vl; i++)
        raw[9 + i] = (char)rnd(r);
    store_value old;
    int rc;
    switch (rnd(r) % 5) {
    case 0:
        CHECK(store_txn_put_raw(t, slot, k, kl, raw, 9 + vl) == 0);
        break;
    case 1:
        rc = store_txn_get(t, slot, k, kl, NOW, &old);
        CHECK(rc == 0 || rc == KEEL_ENOTFOUND);
        if (rc == 0) store_value_release(&old);
        /* fall through */
    case 2:
        CHECK(store_txn_put(t, slot, k, kl, STORE_T_STRING, exp, raw + 9, vl) == 0);
        break;
    default:
        CHECK(store_txn_del(t, slot, k, kl, NULL) == 0);
    }
}

/* Opens dir with CHECK, for children. */
static store *open_checked(const char *dir) {
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    store *s = NULL;
    CHECK(store_open(dir, &o, &s, NULL, 0) == 0);
    return s;
}

/* One event-loop turn of the workload on *s: a few commands of a few writes
 * each, one in five aborted, then sometimes a sweep (partial: small max), a
 * range delete of one slot, or (if dir is set) a clean close and reopen. */
static void rnd_turn(store **s, const char *dir, uint64_t *r, dg_seen *seen) {
    for (int c = 1 + (int)(rnd(r) % 6); c > 0; c--) {
        store_txn *t = store_txn_begin(*s);
        for (int n = 1 + (int)(rnd(r) % 4); n > 0; n--)
            rnd_op(t, r);
        if (rnd(r) % 5 == 0) {
            store_txn_abort(t);
            seen->aborted++;
        } else {
            CHECK(store_txn_commit(t) == 0);
        }
    }
    uint64_t x = rnd(r) % 40;
    if (x < 6) {
        long n = store_sweep_expired(*s, NOW, 1 + (size_t)(rnd(r) % 20));
        CHECK(n >= 0);
        seen->swept += (unsigned)n;
    } else if (x == 6) {
        unsigned slot = DG_LO + (unsigned)(rnd(r) % (DG_HI - DG_LO + 1));
        CHECK(store_delete_slots(*s, slot, slot) == 0);
        seen->range_deleted++;
    } else if (x == 7 && dir) {
        store_free(*s);
        *s = open_checked(dir);
        seen->reopened++;
    }
    if (rnd(r) % 2) CHECK(store_sync(*s, NULL) == 0); /* else the turn stays in the overlay */
}

/* store_range_digest equals store_range_checksum on every slot around the
 * workload's, on the workload's range and, if all (the scan visits every
 * slot: slow), on the whole keyspace. All digests are read first, while the
 * turn may still sit in the overlay (a checksum writes it out). */
static void check_digest(store *s, int all) {
    enum { N = DG_HI - DG_LO + 3 };
    uint64_t dx[N + 2], dk[N + 2], cx, ck;
    for (unsigned i = 0; i < N; i++)
        CHECK(store_range_digest(s, DG_LO - 1 + i, DG_LO - 1 + i, &dx[i], &dk[i]) == 0);
    CHECK(store_range_digest(s, DG_LO, DG_HI, &dx[N], &dk[N]) == 0);
    CHECK(store_range_digest(s, 0, 16383, &dx[N + 1], &dk[N + 1]) == 0);
    for (unsigned i = 0; i < N; i++) {
        CHECK(store_range_checksum(s, NULL, DG_LO - 1 + i, DG_LO - 1 + i, &cx, &ck) == 0);
        CHECK(cx == dx[i]);
        CHECK(ck == dk[i]);
    }
    CHECK(store_range_checksum(s, NULL, DG_LO, DG_HI, &cx, &ck) == 0);
    CHECK(cx == dx[N] && ck == dk[N]);
    if (!all) return;
    CHECK(store_range_checksum(s, NULL, 0, 16383, &cx, &ck) == 0);
    CHECK(cx == dx[N + 1] && ck == dk[N + 1]);
}

/* Randomized puts, raw puts, deletes, aborts, overwrites within a turn,
 * partial sweeps of past TTLs, range deletes and clean reopens: after every
 * turn the digest equals the checksum scan. */
static void test_digest_matches_checksum_randomized(void **state) {
    fx *f = *state;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    dg_seen seen = {0};
    int nonzero = 0;
    for (int turn = 0; turn < 400; turn++) {
        rnd_turn(&f->a, f->dira, &r, &seen);
        check_digest(f->a, turn % 50 == 49);
        uint64_t x;
        assert_int_equal(store_range_digest(f->a, DG_LO, DG_HI, &x, NULL), 0);
        nonzero += x != 0;
    }
    /* The run went through every path it is meant to test. */
    assert_true(seen.aborted > 0 && seen.swept > 0 && seen.range_deleted > 0);
    assert_true(seen.reopened > 0);
    assert_true(nonzero > 300);
}

/* A scripted sequence in one turn: a key overwritten by two commands, an
 * aborted command that overwrote then deleted it, a put and delete of a new
 * key; the digest follows, returns to 0 when the slot empties, and matches a
 * second store that reached the same data another way. */
static void test_digest_follows_one_turn(void **state) {
    fx *f = *state;
    uint64_t x0, x1, x, k;
    put(f->a, 7, "k", "one");
    assert_int_equal(store_range_digest(f->a, 7, 7, &x0, &k), 0);
    assert_int_equal(k, 1);
    assert_true(x0 != 0);
    put(f->a, 7, "k", "two");
    put_exp(f->a, 7, "k", "three", NOW - 1);
    assert_int_equal(store_range_digest(f->a, 7, 7, &x1, &k), 0);
    assert_int_equal(k, 1);
    assert_true(x1 != x0);
    store_txn *t = store_txn_begin(f->a);
    assert_int_equal(store_txn_put(t, 7, "k", 1, STORE_T_STRING, 0, "four", 4), 0);
    assert_int_equal(store_txn_put(t, 7, "new", 3, STORE_T_STRING, 0, "n", 1), 0);
    assert_int_equal(store_txn_del(t, 7, "k", 1, NULL), 0);
    assert_int_equal(store_range_digest(f->a, 7, 7, &x, &k), KEEL_EINVAL); /* txn open */
    store_txn_abort(t);
    assert_int_equal(store_range_digest(f->a, 7, 7, &x, &k), 0);
    assert_true(x == x1);
    put(f->a, 7, "tmp", "t");
    del(f->a, 7, "tmp");
    assert_int_equal(store_range_digest(f->a, 7, 7, &x, &k), 0);
    assert_true(x == x1);
    /* b gets the same final data by a raw put of the expired value. */
    char raw[9 + 5] = {STORE_T_STRING};
    int64_t e = NOW - 1;
    for (int i = 8; i >= 1; i--, e >>= 8)
        raw[i] = (char)e;
    memcpy(raw + 9, "three", 5);
    t = store_txn_begin(f->b);
    assert_int_equal(store_txn_put_raw(t, 7, "k", 1, raw, sizeof raw), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_range_digest(f->b, 0, 16383, &x, &k), 0);
    assert_true(x == x1);
    uint64_t c;
    assert_int_equal(store_range_checksum(f->a, NULL, 7, 7, &c, NULL), 0);
    assert_true(c == x1);
    /* The sweep removes the expired value: the slot is empty again. */
    assert_int_equal(store_sweep_expired(f->a, NOW, 10), 1);
    assert_int_equal(store_range_digest(f->a, 0, 16383, &x, &k), 0);
    assert_true(x == 0);
    assert_int_equal(k, 0);
    /* store_delete_slots zeroes the slot's digest. */
    put(f->a, 8, "a", "1");
    put(f->a, 9, "b", "2");
    assert_int_equal(store_range_digest(f->a, 9, 9, &x0, NULL), 0);
    assert_int_equal(store_delete_slots(f->a, 8, 8), 0);
    assert_int_equal(store_range_digest(f->a, 0, 16383, &x, &k), 0);
    assert_true(x == x0);
    assert_int_equal(k, 1);
}

/* A clean close saves the digests; the reopened store reads them back (not
 * recounted: a zeroed field would show) and keeps maintaining them. */
static void test_digest_survives_clean_reopen(void **state) {
    fx *f = *state;
    uint64_t r = 42;
    dg_seen seen = {0};
    for (int turn = 0; turn < 100; turn++)
        rnd_turn(&f->a, NULL, &r, &seen);
    uint64_t x0, k0, x, k;
    assert_int_equal(store_range_digest(f->a, DG_LO, DG_HI, &x0, &k0), 0);
    assert_true(x0 != 0 && k0 > 0);
    f->a = reopen(f->a, f->dira);
    assert_int_equal(store_range_digest(f->a, DG_LO, DG_HI, &x, &k), 0);
    assert_true(x == x0);
    assert_int_equal(k, k0);
    check_digest(f->a, 1);
    for (int turn = 0; turn < 50; turn++) {
        rnd_turn(&f->a, NULL, &r, &seen);
        check_digest(f->a, 0);
    }
}

#define CRASH_ARG "--digest-crash-child" /* argv[1] of the crash child, see below */
enum { CRASH_N = DG_HI - DG_LO + 1 };

/* The crash child's body, in a fresh image of this binary (main dispatches
 * on CRASH_ARG): runs the workload on dir with a clean reopen half way (which
 * removes the clean marker), syncs, writes each slot's digest and key count
 * to fd, and dies by SIGKILL. */
static void crash_child(const char *dir, int fd) {
    in_child = 1;
    uint64_t r = 7, out[2 * CRASH_N];
    dg_seen seen = {0};
    store *s = open_checked(dir);
    for (int turn = 0; turn < 150; turn++)
        rnd_turn(&s, dir, &r, &seen);
    store_free(s);
    s = open_checked(dir);
    for (int turn = 0; turn < 150; turn++)
        rnd_turn(&s, NULL, &r, &seen);
    CHECK(store_sync(s, NULL) == 0);
    for (unsigned i = 0; i < CRASH_N; i++)
        CHECK(store_range_digest(s, DG_LO + i, DG_LO + i, &out[2 * i], &out[2 * i + 1]) == 0);
    CHECK(write(fd, out, sizeof out) == (ssize_t)sizeof out);
    raise(SIGKILL);
    _exit(1);
}

/* After kill -9 (no clean close) open recounts: the digests equal the
 * child's last synced ones and the checksum scan. The child is exec'd, not
 * just forked: a fork of a process that has run RocksDB inherits its thread
 * pool's condition variables with waiters that do not exist in the child,
 * and its first store_open can hang in pthread_cond_signal. */
static void test_digest_recomputed_after_crash(void **state) {
    fx *f = *state;
    char dir[96], fdarg[16];
    snprintf(dir, sizeof dir, "%s/crash", f->dira);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    snprintf(fdarg, sizeof fdarg, "%d", fd[1]);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test-store-move", CRASH_ARG, dir, fdarg, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    uint64_t want[2 * CRASH_N];
    ssize_t got = read(fd[0], want, sizeof want);
    close(fd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_int_equal(got, (ssize_t)sizeof want);
    store *s = open_dir(dir);
    uint64_t any = 0;
    for (unsigned i = 0; i < CRASH_N; i++) {
        uint64_t x, k;
        assert_int_equal(store_range_digest(s, DG_LO + i, DG_LO + i, &x, &k), 0);
        assert_true(x == want[2 * i]);
        assert_int_equal(k, want[2 * i + 1]);
        any |= x;
    }
    assert_true(any != 0);
    check_digest(s, 1);
    store_free(s);
}

/* Rewrites the statistics a clean close left in dir, straight through
 * RocksDB: each "s/" record cut or padded to reclen bytes, its last byte
 * flipped if flip, and the clean marker set to marker. */
static void rewrite_stats(const char *dir, size_t reclen, int flip, const char *marker) {
    rocksdb_options_t *o = rocksdb_options_create();
    const char *names[2] = {"default", "meta"};
    const rocksdb_options_t *cfo[2] = {o, o};
    rocksdb_column_family_handle_t *h[2] = {NULL, NULL};
    char *err = NULL;
    rocksdb_t *db = rocksdb_open_column_families(o, dir, 2, names, cfo, h, &err);
    assert_null(err);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_iterator_t *it = rocksdb_create_iterator_cf(db, ro, h[1]);
    int n = 0;
    for (rocksdb_iter_seek(it, "s/", 2); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const char *k = rocksdb_iter_key(it, &kl);
        const char *v = rocksdb_iter_value(it, &vl);
        if (kl < 2 || memcmp(k, "s/", 2) != 0) break;
        char rec[64] = {0};
        assert_true(vl <= sizeof rec && reclen <= sizeof rec);
        memcpy(rec, v, vl);
        if (flip) rec[reclen - 1] ^= 1;
        rocksdb_writebatch_put_cf(wb, h[1], k, kl, rec, reclen);
        n++;
    }
    assert_true(n > 0);
    rocksdb_writebatch_put_cf(wb, h[1], "c/stats", 7, marker, strlen(marker));
    rocksdb_write(db, wo, wb, &err);
    assert_null(err);
    rocksdb_iter_destroy(it);
    rocksdb_writebatch_destroy(wb);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_readoptions_destroy(ro);
    rocksdb_column_family_handle_destroy(h[0]);
    rocksdb_column_family_handle_destroy(h[1]);
    rocksdb_close(db);
    rocksdb_options_destroy(o);
}

/* Statistics in an older format (marker "1": 24-byte records, or any record
 * under that marker) are recounted, never misread as digests. A record under
 * the current marker is trusted, which shows the rewrite reached the store. */
static void test_digest_old_stats_format_recounts(void **state) {
    fx *f = *state;
    uint64_t r = 3;
    dg_seen seen = {0};
    for (int turn = 0; turn < 60; turn++)
        rnd_turn(&f->a, NULL, &r, &seen);
    uint64_t x0, k0, x, k;
    assert_int_equal(store_range_digest(f->a, 0, 16383, &x0, &k0), 0);
    assert_true(x0 != 0);
    struct {
        size_t reclen;
        int flip;
        const char *marker;
        int trusted;
    } cases[] = {
        {24, 0, "1", 0}, /* the previous release's format */
        {32, 1, "1", 0}, /* the old marker alone forces a recount */
        {32, 1, "3", 0}, /* a later version: not ours to read */
        {24, 0, "2", 0}, /* current marker, short records: unreadable */
        {32, 1, "2", 1}, /* current format: loaded as is */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        store_free(f->a);
        rewrite_stats(f->dira, cases[i].reclen, cases[i].flip, cases[i].marker);
        f->a = open_dir(f->dira);
        assert_int_equal(store_range_digest(f->a, 0, 16383, &x, &k), 0);
        assert_int_equal(k, k0);
        if (cases[i].trusted) {
            assert_true(x != x0);
        } else {
            assert_true(x == x0);
            check_digest(f->a, 1);
        }
    }
}

/* Bad ranges and an open txn are KEEL_EINVAL, with the outputs zeroed. */
static void test_digest_bad_input(void **state) {
    fx *f = *state;
    put(f->a, 5, "k", "v");
    uint64_t x = 1, k = 1;
    assert_int_equal(store_range_digest(f->a, 3, 2, &x, &k), KEEL_EINVAL);
    assert_true(x == 0 && k == 0);
    x = k = 1;
    assert_int_equal(store_range_digest(f->a, 0, 16384, &x, &k), KEEL_EINVAL);
    assert_true(x == 0 && k == 0);
    assert_int_equal(store_range_digest(f->a, 16384, 16384, &x, NULL), KEEL_EINVAL);
    store_txn *t = store_txn_begin(f->a);
    x = k = 1;
    assert_int_equal(store_range_digest(f->a, 0, 10, &x, &k), KEEL_EINVAL);
    assert_true(x == 0 && k == 0);
    store_txn_abort(t);
    assert_int_equal(store_range_digest(f->a, 5, 5, &x, NULL), 0);
    assert_true(x != 0);
    assert_int_equal(store_range_digest(f->a, 16383, 16383, &x, &k), 0);
    assert_true(x == 0 && k == 0);
}

/* ---- Sweep filter --------------------------------------------------------- */

typedef struct skipper {
    unsigned lo, hi;           /* slots to skip */
    unsigned char asked[1024]; /* how often each slot < 1024 was asked about */
} skipper;

static int skip_range(void *arg, unsigned slot) {
    skipper *k = arg;
    if (slot < sizeof k->asked) k->asked[slot]++;
    return slot >= k->lo && slot <= k->hi;
}

/* Puts n keys named <prefix><i> into slot, expired (or live) at NOW. */
static void put_many(store *s, unsigned slot, const char *prefix, int n, int64_t exp) {
    char k[32];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "%s%04d", prefix, i);
        put_exp(s, slot, k, "v", exp);
    }
}

/* A skipped slot is neither read nor changed (no capture report, keys and
 * digest intact) while other slots are swept; the filter is asked only about
 * slots holding TTL keys; removing it lets the sweep in. */
static void test_sweep_filter_skips_slots(void **state) {
    fx *f = *state;
    put_many(f->a, 10, "d", 3, NOW - 1);
    put_many(f->a, 20, "d", 3, NOW - 1);
    put_many(f->a, 30, "d", 3, NOW - 1);
    put_many(f->a, 25, "live", 2, NOW + 60000);
    put_many(f->a, 40, "plain", 2, 0);
    sync_ok(f->a);
    changes *ch = calloc(1, sizeof *ch);
    int h = store_capture_start(f->a, 20, 20, on_change, ch);
    assert_true(h >= 0);
    uint64_t x20;
    assert_int_equal(store_range_digest(f->a, 20, 20, &x20, NULL), 0);
    skipper *sk = calloc(1, sizeof *sk);
    sk->lo = sk->hi = 20;
    store_set_sweep_filter(f->a, skip_range, sk);
    assert_int_equal(store_sweep_expired(f->a, NOW, 100), 6);
    sync_ok(f->a);
    assert_int_equal(ch->n, 0);
    uint64_t keys, x;
    store_slot_stats(f->a, 20, &keys, NULL);
    assert_int_equal(keys, 3);
    assert_int_equal(store_range_digest(f->a, 20, 20, &x, NULL), 0);
    assert_true(x == x20);
    store_slot_stats(f->a, 10, &keys, NULL);
    assert_int_equal(keys, 0);
    store_slot_stats(f->a, 30, &keys, NULL);
    assert_int_equal(keys, 0);
    for (unsigned slot = 0; slot < sizeof sk->asked; slot++)
        assert_int_equal(sk->asked[slot], slot == 10 || slot == 20 || slot == 25 || slot == 30);
    check_digest(f->a, 1);
    store_set_sweep_filter(f->a, NULL, NULL);
    assert_int_equal(store_sweep_expired(f->a, NOW, 100), 3);
    sync_ok(f->a);
    assert_int_equal(ch->n, 3);
    assert_change(ch, 0, 20, "d0000", NULL);
    store_slot_stats(f->a, 20, &keys, NULL);
    assert_int_equal(keys, 0);
    assert_int_equal(store_capture_stop(f->a, h), 0);
    free(sk);
    free(ch);
}

/* A filter that starts skipping the slot the sweep stopped inside does not
 * pin it there, and a skipped slot's many expired keys use none of the
 * budget: the next call sweeps the other slots in full. */
static void test_sweep_filter_does_not_stall(void **state) {
    fx *f = *state;
    put_many(f->a, 20, "d", 200, NOW - 1);
    put_many(f->a, 30, "d", 5, NOW - 1);
    sync_ok(f->a);
    assert_int_equal(store_sweep_expired(f->a, NOW, 1), 1); /* stops inside slot 20 */
    skipper *sk = calloc(1, sizeof *sk);
    sk->lo = sk->hi = 20;
    store_set_sweep_filter(f->a, skip_range, sk);
    /* Without the filter these 5 would come from slot 20. */
    assert_int_equal(store_sweep_expired(f->a, NOW, 5), 5);
    uint64_t keys;
    store_slot_stats(f->a, 30, &keys, NULL);
    assert_int_equal(keys, 0);
    store_slot_stats(f->a, 20, &keys, NULL);
    assert_int_equal(keys, 199);
    assert_int_equal(store_sweep_expired(f->a, NOW, 5), 0); /* nothing else to do */
    sk->lo = 0; /* skip everything: a full cycle, nothing touched */
    sk->hi = 16383;
    assert_int_equal(store_sweep_expired(f->a, NOW, 5), 0);
    store_slot_stats(f->a, 20, &keys, NULL);
    assert_int_equal(keys, 199);
    store_set_sweep_filter(f->a, NULL, sk); /* arg ignored without a filter */
    assert_int_equal(store_sweep_expired(f->a, NOW, 1000), 199);
    store_slot_stats(f->a, 20, &keys, NULL);
    assert_int_equal(keys, 0);
    check_digest(f->a, 1);
    free(sk);
}

/* ---- Bad input ------------------------------------------------------------ */

/* Bad ranges, handles, resume keys and short raw values are KEEL_EINVAL; a
 * ninth capture is KEEL_ELIMIT; a snapshot needs no open txn. */
static void test_bad_input(void **state) {
    fx *f = *state;
    put(f->a, 5, "k", "v");
    store_snapshot *snap = store_snapshot_new(f->a);
    store_snapshot *other = store_snapshot_new(f->b);
    coll *c = calloc(1, sizeof *c);
    char *next = (char *)1;
    size_t nl = 1;
    assert_int_equal(store_copy_range(f->a, snap, 6, 5, NULL, 0, 10, collect, c, &next, &nl),
                     KEEL_EINVAL);
    assert_null(next);
    assert_int_equal(nl, 0);
    assert_int_equal(store_copy_range(f->a, snap, 0, 16384, NULL, 0, 10, collect, c, &next, &nl),
                     KEEL_EINVAL);
    assert_int_equal(store_copy_range(f->a, NULL, 0, 10, NULL, 0, 10, collect, c, &next, &nl),
                     KEEL_EINVAL);
    assert_int_equal(store_copy_range(f->a, other, 0, 10, NULL, 0, 10, collect, c, &next, &nl),
                     KEEL_EINVAL);
    assert_int_equal(store_copy_range(f->a, snap, 0, 10, NULL, 0, 10, NULL, c, &next, &nl),
                     KEEL_EINVAL);
    assert_int_equal(store_copy_range(f->a, snap, 0, 10, "\x00", 1, 10, collect, c, &next, &nl),
                     KEEL_EINVAL);
    assert_int_equal(
        store_copy_range(f->a, snap, 0, 10, "\x00\x0bk", 3, 10, collect, c, &next, &nl),
        KEEL_EINVAL); /* after in slot 11 */
    assert_int_equal(c->n, 0);
    uint64_t x = 1, k = 1;
    assert_int_equal(store_range_checksum(f->a, NULL, 3, 2, &x, &k), KEEL_EINVAL);
    assert_int_equal(store_range_checksum(f->a, NULL, 0, 16384, &x, &k), KEEL_EINVAL);
    assert_int_equal(store_range_checksum(f->a, other, 0, 10, &x, &k), KEEL_EINVAL);
    store_txn *t = store_txn_begin(f->a);
    assert_int_equal(store_txn_put_raw(t, 5, "r", 1, "\0\0\0\0\0\0\0\0", 8), KEEL_EINVAL);
    assert_int_equal(store_txn_put_raw(t, 5, "r", 1, NULL, 9), KEEL_EINVAL);
    assert_int_equal(store_txn_put_raw(t, 16384, "r", 1, "\0\0\0\0\0\0\0\0\0", 9), KEEL_EINVAL);
    assert_int_equal(store_txn_put_raw(t, 5, "r", 1, "\0\x80\0\0\0\0\0\0\0", 9),
                     KEEL_EINVAL);         /* negative expiry */
    assert_null(store_snapshot_new(f->a)); /* txn open */
    assert_int_equal(store_range_checksum(f->a, NULL, 0, 10, &x, &k), KEEL_EINVAL);
    assert_int_equal(store_capture_start(f->a, 0, 1, on_change, NULL), KEEL_EINVAL);
    /* A copy reads only the snapshot: allowed with a txn open. */
    assert_int_equal(store_copy_range(f->a, snap, 0, 10, NULL, 0, 10, collect, c, &next, &nl), 1);
    assert_null(next);
    store_txn_abort(t);
    assert_int_equal(store_capture_start(f->a, 2, 1, on_change, NULL), KEEL_EINVAL);
    assert_int_equal(store_capture_start(f->a, 0, 16384, on_change, NULL), KEEL_EINVAL);
    assert_int_equal(store_capture_start(f->a, 0, 1, NULL, NULL), KEEL_EINVAL);
    assert_int_equal(store_capture_stop(f->a, -1), KEEL_EINVAL);
    assert_int_equal(store_capture_stop(f->a, 8), KEEL_EINVAL);
    assert_int_equal(store_capture_stop(f->a, 0), KEEL_EINVAL);
    changes *ch = calloc(1, sizeof *ch);
    int h[8];
    for (int i = 0; i < 8; i++)
        assert_true((h[i] = store_capture_start(f->a, 0, 0, on_change, ch)) >= 0);
    assert_int_equal(store_capture_start(f->a, 0, 0, on_change, ch), KEEL_ELIMIT);
    for (int i = 0; i < 8; i++)
        assert_int_equal(store_capture_stop(f->a, h[i]), 0);
    free(ch);
    free(c);
    store_snapshot_free(other);
    store_snapshot_free(snap);
}

/* Applies changes c->items[from..) to replica r the way a follower does:
 * each record's old state from the capture told to the txn, checked
 * against r's data (verify), then the record. Returns the mismatches. */
static int mirror(store *r, const changes *c, size_t from) {
    int bad = 0;
    for (size_t i = from; i < c->n; i++) {
        const change *e = &c->items[i];
        store_txn *t = store_txn_begin(r);
        if (e->old_known) {
            int mm = -1;
            assert_int_equal(store_txn_seed(t, e->slot, e->key, strlen(e->key), &e->old, 1, &mm),
                             0);
            assert_true(mm == 0 || mm == 1);
            bad += mm;
        }
        if (e->del)
            assert_int_equal(store_txn_del(t, e->slot, e->key, strlen(e->key), NULL), 0);
        else
            assert_int_equal(store_txn_put_raw(t, e->slot, e->key, strlen(e->key), e->val, e->vlen),
                             0);
        assert_int_equal(store_txn_commit(t), 0);
    }
    sync_ok(r);
    return bad;
}

static void digests_equal(store *a, store *b, unsigned lo, unsigned hi) {
    uint64_t xa, ka, xb, kb, sx, sk;
    assert_int_equal(store_range_digest(a, lo, hi, &xa, &ka), 0);
    assert_int_equal(store_range_digest(b, lo, hi, &xb, &kb), 0);
    assert_int_equal(store_range_checksum(b, NULL, lo, hi, &sx, &sk), 0);
    assert_true(xa == xb && xb == sx);
    assert_int_equal(ka, kb);
    assert_int_equal(kb, sk);
}

/* The capture's old state of each record is the state before the writes
 * it reports (new keys, overwrites, deletes, expiring keys, a key written
 * twice in a turn, a turn written out early); unknown only for a sweep's
 * delete. A replica told those states (store_txn_seed) keeps statistics
 * equal to its data and to the source's. */
static void test_capture_old_states_seed_a_replica(void **state) {
    fx *f = *state;
    changes *c = calloc(1, sizeof *c);
    int h = store_capture_start(f->a, 10, 11, on_change, c);
    assert_true(h >= 0);
    put(f->a, 10, "k", "v1");
    put(f->a, 11, "d", "gone soon");
    put_exp(f->a, 11, "ttl", "t", NOW - 1);
    sync_ok(f->a);
    assert_int_equal(c->n, 3);
    assert_true(c->items[0].old_known && !c->items[0].old.exists);
    assert_int_equal(mirror(f->b, c, 0), 0);
    size_t from = c->n;
    put(f->a, 10, "k", "v2, longer");
    put(f->a, 10, "k", "v3"); /* twice in one turn: one change, old = before the turn */
    del(f->a, 11, "d");
    sync_ok(f->a);
    assert_int_equal(c->n, from + 2);
    const change *k = &c->items[from];
    assert_true(k->old_known && k->old.exists && !k->old.has_ttl);
    assert_int_equal(k->old.vlen, 9 + 2);
    assert_int_equal(k->old.type, STORE_T_STRING);
    assert_int_equal(mirror(f->b, c, from), 0);
    from = c->n;
    put(f->a, 10, "k", "v4");
    uint64_t x;
    assert_int_equal(store_range_checksum(f->a, NULL, 0, 0, &x, NULL), 0); /* written out early */
    put(f->a, 10, "k", "v5"); /* old: v4, the state after the early write */
    sync_ok(f->a);
    assert_int_equal(c->n, from + 2);
    assert_int_equal(c->items[from + 1].old.vlen, 9 + 2);
    assert_int_equal(mirror(f->b, c, from), 0);
    from = c->n;
    assert_int_equal(store_sweep_expired(f->a, NOW, 10), 1); /* "ttl" */
    sync_ok(f->a);
    assert_int_equal(c->n, from + 1);
    assert_false(c->items[from].old_known); /* the sweep's: the replica reads its own */
    assert_int_equal(mirror(f->b, c, from), 0);
    digests_equal(f->a, f->b, 10, 11);
    /* A wrong claim, verified: reported, and the data's state used. */
    store_txn *t = store_txn_begin(f->b);
    store_phys wrong = {0}; /* "k" is there */
    int mm = 0;
    assert_int_equal(store_txn_seed(t, 10, "k", 1, &wrong, 1, &mm), 0);
    assert_int_equal(mm, 1);
    assert_int_equal(store_txn_put(t, 10, "k", 1, STORE_T_STRING, 0, "v6", 2), 0);
    assert_int_equal(store_txn_commit(t), 0);
    sync_ok(f->b);
    put(f->a, 10, "k", "v6");
    sync_ok(f->a);
    digests_equal(f->a, f->b, 10, 11);
    /* What the turn knows wins over a claim; bad input. */
    t = store_txn_begin(f->b);
    assert_int_equal(store_txn_put(t, 10, "n", 1, STORE_T_STRING, 0, "x", 1), 0);
    store_phys present = {.exists = 1, .vlen = 99, .hash = 1};
    assert_int_equal(store_txn_seed(t, 10, "n", 1, &present, 0, NULL), 0);
    assert_int_equal(store_txn_seed(t, 10, "n", 1, NULL, 0, NULL), KEEL_EINVAL);
    assert_int_equal(store_txn_seed(t, 16384, "n", 1, &present, 0, NULL), KEEL_EINVAL);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_txn_seed(t, 10, "n", 1, &present, 0, NULL), KEEL_EINVAL); /* closed */
    sync_ok(f->b);
    put(f->a, 10, "n", "x");
    sync_ok(f->a);
    digests_equal(f->a, f->b, 10, 11);
    /* A wrong claim taken unverified is trusted: the statistics go wrong
     * (which is why a replica takes them only at exactly the same state). */
    t = store_txn_begin(f->b);
    assert_int_equal(store_txn_seed(t, 10, "k", 1, &wrong, 0, NULL), 0);
    assert_int_equal(store_txn_put(t, 10, "k", 1, STORE_T_STRING, 0, "v7", 2), 0);
    assert_int_equal(store_txn_commit(t), 0);
    sync_ok(f->b);
    uint64_t kx, kk, sx, sk;
    assert_int_equal(store_range_digest(f->b, 10, 11, &kx, &kk), 0);
    assert_int_equal(store_range_checksum(f->b, NULL, 10, 11, &sx, &sk), 0);
    assert_int_equal(kk, sk + 1);
    assert_int_equal(store_capture_stop(f->a, h), 0);
    free(c);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], CRASH_ARG) == 0) crash_child(argv[2], atoi(argv[3]));
    const struct CMUnitTest tests[] = {
        T(test_copy_chunks_exact_and_ordered),
        T(test_copy_one_key_per_call),
        T(test_copy_into_second_store),
        T(test_copy_keeps_expiry),
        T(test_put_raw_stats_match_put),
        T(test_capture_turns_and_stop),
        T(test_capture_overlapping),
        T(test_capture_old_states_seed_a_replica),
        T(test_snapshot_plus_capture_converges),
        T(test_checksum_order_independent),
        T(test_checksum_at_snapshot),
        T(test_bad_input),
        T(test_digest_matches_checksum_randomized),
        T(test_digest_follows_one_turn),
        T(test_digest_survives_clean_reopen),
        T(test_digest_recomputed_after_crash),
        T(test_digest_old_stats_format_recounts),
        T(test_digest_bad_input),
        T(test_sweep_filter_skips_slots),
        T(test_sweep_filter_does_not_stall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
