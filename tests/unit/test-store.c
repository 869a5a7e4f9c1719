/* test-store.c - unit tests for src/store: encoding, txns, statistics,
 * expiry, scans, slot deletion, metadata and durability. Each case gets a
 * fresh temporary directory (mkdtemp), removed afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tmpdir.h"

#include "core/err.h"
#include "core/failpoint.h"
#include "store/store.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOW 1700000000000LL

typedef struct fx {
    char dir[TMPDIR_MAX];
    store *s;
} fx;

static store *open_dir(const char *dir, store_fsync mode) {
    store_opts o;
    store_opts_default(&o);
    o.fsync = mode;
    o.cache_bytes = 8 << 20;
    store *s = NULL;
    char err[256];
    int rc = store_open(dir, &o, &s, err, sizeof err);
    if (rc) fprintf(stderr, "store_open: %s\n", err);
    assert_int_equal(rc, 0);
    assert_non_null(s);
    return s;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (!f || tmpdir_make(f->dir, "test-store")) return -1;
    f->s = open_dir(f->dir, STORE_FSYNC_NO);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    store_free(f->s);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

static void reopen(fx *f, store_fsync mode) {
    store_free(f->s);
    f->s = open_dir(f->dir, mode);
}

/* Puts one key in its own txn. */
static void put(store *s, unsigned slot, const char *k, size_t kl, const char *v, size_t vl,
                int64_t exp) {
    store_txn *t = store_txn_begin(s);
    assert_int_equal(store_txn_put(t, slot, k, kl, STORE_T_STRING, exp, v, vl), 0);
    assert_int_equal(store_txn_commit(t), 0);
}

static void put_str(store *s, unsigned slot, const char *k, const char *v) {
    put(s, slot, k, strlen(k), v, strlen(v), 0);
}

static int del(store *s, unsigned slot, const char *k) {
    int existed = -1;
    store_txn *t = store_txn_begin(s);
    assert_int_equal(store_txn_del(t, slot, k, strlen(k), &existed), 0);
    assert_int_equal(store_txn_commit(t), 0);
    return existed;
}

static void check_value(store *s, unsigned slot, const char *k, size_t kl, const char *v,
                        size_t vl) {
    store_value sv;
    assert_int_equal(store_get(s, slot, k, kl, NOW, &sv), 0);
    assert_int_equal(sv.len, vl);
    assert_memory_equal(sv.data, v, vl);
    store_value_release(&sv);
}

static void check_missing(store *s, unsigned slot, const char *k) {
    store_value sv;
    assert_int_equal(store_get(s, slot, k, strlen(k), NOW, &sv), KEEL_ENOTFOUND);
    store_value_release(&sv);
}

static void check_stats(store *s, unsigned slot, uint64_t keys, uint64_t bytes) {
    uint64_t k, b;
    store_slot_stats(s, slot, &k, &b);
    assert_int_equal(k, keys);
    assert_int_equal(b, bytes);
}

/* Encoded size of one key/value pair: slot prefix + key, header + payload. */
static uint64_t esize(size_t kl, size_t vl) {
    return 2 + kl + 9 + vl;
}

/* fsync modes parse case-insensitively and name themselves back. */
static void test_fsync_parse_name(void **state) {
    (void)state;
    store_fsync f;
    assert_int_equal(store_fsync_parse("always", &f), 0);
    assert_int_equal(f, STORE_FSYNC_ALWAYS);
    assert_int_equal(store_fsync_parse("EverySec", &f), 0);
    assert_int_equal(f, STORE_FSYNC_EVERYSEC);
    assert_int_equal(store_fsync_parse("no", &f), 0);
    assert_int_equal(f, STORE_FSYNC_NO);
    assert_int_equal(store_fsync_parse("sometimes", &f), KEEL_EINVAL);
    assert_int_equal(store_fsync_parse("", &f), KEEL_EINVAL);
    assert_string_equal(store_fsync_name(STORE_FSYNC_ALWAYS), "always");
    assert_string_equal(store_fsync_name(STORE_FSYNC_EVERYSEC), "everysec");
    assert_string_equal(store_fsync_name(STORE_FSYNC_NO), "no");
}

/* Defaults are always / 64 MiB / create. */
static void test_opts_default(void **state) {
    (void)state;
    store_opts o;
    store_opts_default(&o);
    assert_int_equal(o.fsync, STORE_FSYNC_ALWAYS);
    assert_int_equal(o.cache_bytes, 64u << 20);
    assert_int_equal(o.create_if_missing, 1);
    store_free(NULL);
}

/* put, get and del of one key, with stats following. */
static void test_put_get_del(void **state) {
    fx *f = *state;
    put_str(f->s, 7, "foo", "bar");
    check_value(f->s, 7, "foo", 3, "bar", 3);
    check_missing(f->s, 8, "foo");
    check_stats(f->s, 7, 1, esize(3, 3));
    assert_int_equal(store_total_keys(f->s), 1);
    assert_int_equal(store_total_bytes(f->s), esize(3, 3));
    assert_int_equal(del(f->s, 7, "foo"), 1);
    check_missing(f->s, 7, "foo");
    assert_int_equal(del(f->s, 7, "foo"), 0);
    check_stats(f->s, 7, 0, 0);
    assert_int_equal(store_total_keys(f->s), 0);
}

/* Type and expiry round-trip; keys and values may hold NULs. */
static void test_binary_key_value(void **state) {
    fx *f = *state;
    const char k[] = {'a', 0, 'b', 0};
    const char v[] = {0, 1, 0, 2, 0};
    store_txn *t = store_txn_begin(f->s);
    assert_int_equal(store_txn_put(t, 0, k, sizeof k, 3, NOW + 5000, v, sizeof v), 0);
    assert_int_equal(store_txn_put(t, 16383, "", 0, STORE_T_STRING, 0, NULL, 0), 0);
    assert_int_equal(store_txn_commit(t), 0);
    store_value sv;
    assert_int_equal(store_get(f->s, 0, k, sizeof k, NOW, &sv), 0);
    assert_int_equal(sv.type, 3);
    assert_int_equal(sv.expire_ms, NOW + 5000);
    assert_int_equal(sv.len, sizeof v);
    assert_memory_equal(sv.data, v, sizeof v);
    store_value_release(&sv);
    check_missing(f->s, 0, "a"); /* a prefix is a different key */
    assert_int_equal(store_get(f->s, 16383, "", 0, NOW, &sv), 0);
    assert_int_equal(sv.len, 0);
    assert_int_equal(sv.expire_ms, 0);
    store_value_release(&sv);
}

/* Overwriting a key keeps keys and replaces the old size in bytes. */
static void test_overwrite_bytes(void **state) {
    fx *f = *state;
    put_str(f->s, 5, "k", "short");
    check_stats(f->s, 5, 1, esize(1, 5));
    put_str(f->s, 5, "k", "a much longer value");
    check_stats(f->s, 5, 1, esize(1, 19));
    put_str(f->s, 5, "k", "");
    check_stats(f->s, 5, 1, esize(1, 0));
    put_str(f->s, 5, "k2", "xy");
    check_stats(f->s, 5, 2, esize(1, 0) + esize(2, 2));
    assert_int_equal(store_total_bytes(f->s), esize(1, 0) + esize(2, 2));
}

/* Stats persist exactly across close and reopen. */
static void test_stats_after_reopen(void **state) {
    fx *f = *state;
    char k[16];
    for (int i = 0; i < 50; i++) {
        snprintf(k, sizeof k, "key%d", i);
        put_str(f->s, (unsigned)(i % 3), k, "value");
    }
    del(f->s, 0, "key0");
    put_str(f->s, 1, "key1", "v");
    uint64_t keys[3], bytes[3];
    for (unsigned i = 0; i < 3; i++)
        store_slot_stats(f->s, i, &keys[i], &bytes[i]);
    uint64_t tk = store_total_keys(f->s), tb = store_total_bytes(f->s);
    assert_int_equal(tk, 49);
    reopen(f, STORE_FSYNC_NO);
    for (unsigned i = 0; i < 3; i++)
        check_stats(f->s, i, keys[i], bytes[i]);
    assert_int_equal(store_total_keys(f->s), tk);
    assert_int_equal(store_total_bytes(f->s), tb);
}

/* A txn sees its own put before commit; store_get does not. */
static void test_txn_reads_own_writes(void **state) {
    fx *f = *state;
    store_txn *t = store_txn_begin(f->s);
    store_value v;
    assert_int_equal(store_txn_get(t, 1, "k", 1, NOW, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_txn_put(t, 1, "k", 1, STORE_T_STRING, 0, "v1", 2), 0);
    assert_int_equal(store_txn_get(t, 1, "k", 1, NOW, &v), 0);
    assert_int_equal(v.len, 2);
    assert_memory_equal(v.data, "v1", 2);
    store_value_release(&v);
    check_missing(f->s, 1, "k");
    assert_int_equal(store_txn_commit(t), 0);
    check_value(f->s, 1, "k", 1, "v1", 2);
}

/* A value read in a txn stays valid across later reads, writes and the
 * commit, until it is released (GETSET replies with it after the put). */
static void test_txn_value_outlives_ops(void **state) {
    fx *f = *state;
    put_str(f->s, 3, "k", "old-value");
    store_txn *t = store_txn_begin(f->s);
    store_value v, w;
    assert_int_equal(store_txn_get(t, 3, "k", 1, NOW, &v), 0);
    assert_int_equal(store_txn_put(t, 3, "k", 1, STORE_T_STRING, 0, "new", 3), 0);
    assert_int_equal(store_txn_get(t, 3, "k", 1, NOW, &w), 0);
    assert_memory_equal(w.data, "new", 3);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(v.len, 9);
    assert_memory_equal(v.data, "old-value", 9);
    store_value_release(&v);
    store_value_release(&w);
}

/* Keys with a TTL are counted, follow overwrites and deletes, and survive a
 * clean reopen. */
static void test_expires_count(void **state) {
    fx *f = *state;
    put(f->s, 5, "a", 1, "v", 1, NOW + 1000);
    put(f->s, 5, "b", 1, "v", 1, NOW + 1000);
    put(f->s, 6, "c", 1, "v", 1, 0);
    assert_int_equal(store_total_expires(f->s), 2);
    put(f->s, 5, "a", 1, "v", 1, 0); /* TTL removed */
    assert_int_equal(store_total_expires(f->s), 1);
    store_txn *t = store_txn_begin(f->s);
    int existed = 0;
    assert_int_equal(store_txn_del(t, 5, "b", 1, &existed), 0);
    assert_int_equal(existed, 1);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_total_expires(f->s), 0);
    put(f->s, 6, "d", 1, "v", 1, NOW + 5);
    reopen(f, STORE_FSYNC_ALWAYS);
    assert_int_equal(store_total_expires(f->s), 1);
    assert_int_equal(store_total_keys(f->s), 3);
}

/* Within one turn (no store_sync between), an aborted command restores the
 * key to what the earlier, committed command of the turn wrote, stats too. */
static void test_turn_abort_restores(void **state) {
    fx *f = *state;
    put_str(f->s, 9, "k", "first");
    uint64_t keys, bytes;
    store_slot_stats(f->s, 9, &keys, &bytes);
    store_txn *t = store_txn_begin(f->s);
    assert_int_equal(store_txn_put(t, 9, "k", 1, STORE_T_STRING, 0, "second", 6), 0);
    assert_int_equal(store_txn_put(t, 9, "new", 3, STORE_T_STRING, 0, "x", 1), 0);
    int existed = 0;
    assert_int_equal(store_txn_del(t, 9, "k", 1, &existed), 0);
    assert_int_equal(existed, 1);
    check_value(f->s, 9, "k", 1, "first", 5); /* plain reads see committed state */
    store_txn_abort(t);
    check_value(f->s, 9, "k", 1, "first", 5);
    check_missing(f->s, 9, "new");
    check_stats(f->s, 9, keys, bytes);
    t = store_txn_begin(f->s); /* the overlay still answers the txn path */
    store_value v;
    assert_int_equal(store_txn_get(t, 9, "k", 1, NOW, &v), 0);
    assert_memory_equal(v.data, "first", 5);
    store_value_release(&v);
    store_txn_abort(t);
    assert_int_equal(store_sync(f->s, NULL), 0);
    reopen(f, STORE_FSYNC_ALWAYS);
    check_value(f->s, 9, "k", 1, "first", 5);
    check_missing(f->s, 9, "new");
    check_stats(f->s, 9, keys, bytes);
}

/* Two puts of one key in a txn count one key, sized by the last value. */
static void test_txn_put_twice_one_key(void **state) {
    fx *f = *state;
    store_txn *t = store_txn_begin(f->s);
    assert_int_equal(store_txn_put(t, 2, "k", 1, STORE_T_STRING, 0, "first", 5), 0);
    assert_int_equal(store_txn_put(t, 2, "other", 5, STORE_T_STRING, 0, "o", 1), 0);
    assert_int_equal(store_txn_put(t, 2, "k", 1, STORE_T_STRING, 0, "second!", 7), 0);
    assert_int_equal(store_txn_commit(t), 0);
    check_stats(f->s, 2, 2, esize(1, 7) + esize(5, 1));
    check_value(f->s, 2, "k", 1, "second!", 7);
}

/* get-then-put (the SET path) and put-then-del in one txn keep stats exact. */
static void test_txn_get_put_del_stats(void **state) {
    fx *f = *state;
    put_str(f->s, 3, "a", "12345");
    store_txn *t = store_txn_begin(f->s);
    store_value v;
    assert_int_equal(store_txn_get(t, 3, "a", 1, NOW, &v), 0);
    store_value_release(&v);
    assert_int_equal(store_txn_put(t, 3, "a", 1, STORE_T_STRING, 0, "1", 1), 0);
    assert_int_equal(store_txn_put(t, 3, "b", 1, STORE_T_STRING, 0, "22", 2), 0);
    int existed = 0;
    assert_int_equal(store_txn_del(t, 3, "b", 1, &existed), 0);
    assert_int_equal(existed, 1);
    assert_int_equal(store_txn_get(t, 3, "b", 1, NOW, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_txn_del(t, 3, "b", 1, &existed), 0);
    assert_int_equal(existed, 0);
    assert_int_equal(store_txn_commit(t), 0);
    check_stats(f->s, 3, 1, esize(1, 1));
    check_missing(f->s, 3, "b");
}

/* Abort drops the writes and their stats; the txn is reusable after. */
static void test_txn_abort(void **state) {
    fx *f = *state;
    put_str(f->s, 4, "keep", "1");
    store_txn *t = store_txn_begin(f->s);
    assert_int_equal(store_txn_put(t, 4, "new", 3, STORE_T_STRING, 0, "x", 1), 0);
    assert_int_equal(store_txn_del(t, 4, "keep", 4, NULL), 0);
    store_txn_abort(t);
    check_missing(f->s, 4, "new");
    check_value(f->s, 4, "keep", 4, "1", 1);
    check_stats(f->s, 4, 1, esize(4, 1));
    t = store_txn_begin(f->s);
    assert_int_equal(store_txn_commit(t), 0); /* empty commit */
    check_stats(f->s, 4, 1, esize(4, 1));
}

/* Bad slots, oversized keys and negative expiry are refused, not crashes. */
static void test_invalid_args(void **state) {
    fx *f = *state;
    static char big[65534];
    store_value v;
    store_txn *t = store_txn_begin(f->s);
    assert_int_equal(store_txn_put(t, 16384, "k", 1, 0, 0, "v", 1), KEEL_EINVAL);
    assert_int_equal(store_txn_put(t, 0, big, sizeof big, 0, 0, "v", 1), KEEL_EINVAL);
    assert_int_equal(store_txn_put(t, 0, big, sizeof big - 1, 0, 0, "v", 1), 0);
    assert_int_equal(store_txn_put(t, 0, "k", 1, 0, -5, "v", 1), KEEL_EINVAL);
    assert_int_equal(store_txn_get(t, 0, big, sizeof big, NOW, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_get(f->s, 16384, "k", 1, NOW, &v), KEEL_EINVAL);
    assert_int_equal(store_get(f->s, 0, big, sizeof big - 1, NOW, &v), 0);
    store_value_release(&v);
    check_stats(f->s, 0, 1, esize(sizeof big - 1, 1));
    uint64_t k = 9, b = 9;
    store_slot_stats(f->s, 99999, &k, &b);
    assert_int_equal(k + b, 0);
    assert_int_equal(store_delete_slots(f->s, 5, 4), KEEL_EINVAL);
    assert_int_equal(store_delete_slots(f->s, 0, 16384), KEEL_EINVAL);
}

/* Expired values are invisible to store_get and store_txn_get but still
 * counted, and a del of one reports it existed. */
static void test_expiry_hides(void **state) {
    fx *f = *state;
    put(f->s, 9, "old", 3, "x", 1, NOW - 1);
    put(f->s, 9, "now", 3, "x", 1, NOW);
    put(f->s, 9, "new", 3, "x", 1, NOW + 1);
    check_missing(f->s, 9, "old");
    check_missing(f->s, 9, "now");
    check_value(f->s, 9, "new", 3, "x", 1);
    store_txn *t = store_txn_begin(f->s);
    store_value v;
    assert_int_equal(store_txn_get(t, 9, "old", 3, NOW, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_txn_get(t, 9, "new", 3, NOW, &v), 0);
    assert_int_equal(v.expire_ms, NOW + 1);
    store_value_release(&v);
    store_txn_abort(t);
    check_stats(f->s, 9, 3, 3 * esize(3, 1));
    assert_int_equal(del(f->s, 9, "old"), 1);
    check_stats(f->s, 9, 2, 2 * esize(3, 1));
}

/* Overwriting an expired key (txn_get said not found) still counts one key. */
static void test_put_over_expired(void **state) {
    fx *f = *state;
    put(f->s, 9, "k", 1, "expired", 7, NOW - 10);
    store_txn *t = store_txn_begin(f->s);
    store_value v;
    assert_int_equal(store_txn_get(t, 9, "k", 1, NOW, &v), KEEL_ENOTFOUND);
    assert_int_equal(store_txn_put(t, 9, "k", 1, STORE_T_STRING, 0, "v", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    check_stats(f->s, 9, 1, esize(1, 1));
}

/* The sweep deletes expired keys only, across slots, and fixes the stats. */
static void test_sweep_deletes_expired(void **state) {
    fx *f = *state;
    char k[16];
    for (int i = 0; i < 30; i++) {
        snprintf(k, sizeof k, "k%02d", i);
        put(f->s, (unsigned)(i % 5) * 1000, k, 3, "v", 1, i % 2 ? NOW - 1 : 0);
    }
    assert_int_equal(store_total_keys(f->s), 30);
    long total = 0, n;
    while ((n = store_sweep_expired(f->s, NOW, 4)) > 0) {
        assert_true(n <= 4);
        total += n;
    }
    assert_int_equal(n, 0);
    assert_int_equal(total, 15);
    assert_int_equal(store_total_keys(f->s), 15);
    assert_int_equal(store_total_bytes(f->s), 15 * esize(3, 1));
    for (unsigned s = 0; s < 5; s++)
        check_stats(f->s, s * 1000, 3, 3 * esize(3, 1));
    reopen(f, STORE_FSYNC_NO);
    assert_int_equal(store_total_keys(f->s), 15);
}

/* The sweep resumes from its cursor, wraps around the keyspace, and stops at
 * the cursor so no key is deleted (or counted) twice within one call. */
static void test_sweep_wraps(void **state) {
    fx *f = *state;
    char k[16];
    for (int i = 0; i < 30; i++) {
        snprintf(k, sizeof k, "k%02d", i);
        put(f->s, 100, k, 3, "v", 1, NOW + 100);
    }
    /* Nothing expired yet: examines 20 keys (max 1 x 20), leaving the cursor
     * at k20. */
    assert_int_equal(store_sweep_expired(f->s, NOW, 1), 0);
    assert_int_equal(store_sweep_expired(f->s, NOW + 100, 3), 3); /* k20..k22 */
    check_missing(f->s, 100, "k20");
    check_value(f->s, 100, "k00", 3, "v", 1);
    /* k23..k29 finish the slot; a call visits each slot at most once, so
     * k00..k19 go on the next call, which starts the slot from its first key. */
    assert_int_equal(store_sweep_expired(f->s, NOW + 100, 1000), 7);
    check_value(f->s, 100, "k00", 3, "v", 1);
    assert_int_equal(store_sweep_expired(f->s, NOW + 100, 1000), 20);
    check_stats(f->s, 100, 0, 0);
    assert_int_equal(store_total_keys(f->s), 0);
    assert_int_equal(store_sweep_expired(f->s, NOW + 100, 1000), 0);
}

typedef struct collected {
    int n, stop_after;
    char keys[16][16];
} collected;

static int collect(void *arg, const char *key, size_t klen) {
    collected *c = arg;
    assert_true(klen < 16);
    memcpy(c->keys[c->n], key, klen);
    c->keys[c->n][klen] = 0;
    c->n++;
    return c->stop_after && c->n >= c->stop_after;
}

/* Scans see writes committed earlier in the same turn. */
static void test_turn_visible_to_scan(void **state) {
    fx *f = *state;
    put_str(f->s, 11, "a", "1");
    put_str(f->s, 11, "b", "2");
    collected c = {0};
    assert_int_equal(store_scan_slot(f->s, 11, 10, NOW, collect, &c), 2);
    assert_string_equal(c.keys[1], "b");
}

/* scan_slot yields one slot's live keys in order, honouring max and stop. */
static void test_scan_slot(void **state) {
    fx *f = *state;
    put_str(f->s, 10, "c", "1");
    put_str(f->s, 10, "a", "1");
    put(f->s, 10, "b", 1, "1", 1, NOW - 1);
    put_str(f->s, 10, "d", "1");
    put_str(f->s, 9, "z", "1");
    put_str(f->s, 11, "0", "1");
    put_str(f->s, 16383, "last", "1");
    collected c = {0};
    assert_int_equal(store_scan_slot(f->s, 10, 100, NOW, collect, &c), 3);
    assert_string_equal(c.keys[0], "a");
    assert_string_equal(c.keys[1], "c");
    assert_string_equal(c.keys[2], "d");
    memset(&c, 0, sizeof c);
    assert_int_equal(store_scan_slot(f->s, 10, 2, NOW, collect, &c), 2);
    assert_string_equal(c.keys[1], "c");
    memset(&c, 0, sizeof c);
    c.stop_after = 1;
    assert_int_equal(store_scan_slot(f->s, 10, 100, NOW, collect, &c), 1);
    memset(&c, 0, sizeof c);
    assert_int_equal(store_scan_slot(f->s, 16383, 100, NOW, collect, &c), 1);
    assert_string_equal(c.keys[0], "last");
    memset(&c, 0, sizeof c);
    assert_int_equal(store_scan_slot(f->s, 12, 100, NOW, collect, &c), 0);
    assert_int_equal(store_scan_slot(f->s, 16384, 100, NOW, collect, &c), KEEL_EINVAL);
}

/* delete_slots removes exactly [lo, hi], zeroes their stats durably. */
static void test_delete_slots(void **state) {
    fx *f = *state;
    for (unsigned s = 19; s <= 23; s++) {
        put_str(f->s, s, "a", "1");
        put_str(f->s, s, "b", "22");
    }
    put_str(f->s, 16383, "z", "1");
    assert_int_equal(store_delete_slots(f->s, 20, 22), 0);
    for (unsigned s = 20; s <= 22; s++) {
        check_stats(f->s, s, 0, 0);
        check_missing(f->s, s, "a");
    }
    check_stats(f->s, 19, 2, esize(1, 1) + esize(1, 2));
    check_value(f->s, 23, "b", 1, "22", 2);
    assert_int_equal(store_total_keys(f->s), 5);
    collected c = {0};
    assert_int_equal(store_scan_slot(f->s, 21, 100, NOW, collect, &c), 0);
    reopen(f, STORE_FSYNC_NO);
    check_stats(f->s, 21, 0, 0);
    assert_int_equal(store_total_keys(f->s), 5);
    assert_int_equal(store_delete_slots(f->s, 0, 16383), 0);
    assert_int_equal(store_total_keys(f->s), 0);
    assert_int_equal(store_total_bytes(f->s), 0);
    check_missing(f->s, 16383, "z");
    put_str(f->s, 20, "a", "1"); /* the range accepts new writes */
    check_stats(f->s, 20, 1, esize(1, 1));
}

/* Metadata round-trips (binary, overwrite), is absent until put, and is
 * kept apart from data and slot statistics. */
static void test_meta(void **state) {
    fx *f = *state;
    char *v;
    size_t n;
    assert_int_equal(store_meta_get(f->s, "node_id", &v, &n), KEEL_ENOTFOUND);
    assert_null(v);
    assert_int_equal(store_meta_put(f->s, "node_id", "abc", 3), 0);
    assert_int_equal(store_meta_put(f->s, "blob", "\0\1\0", 3), 0);
    assert_int_equal(store_meta_put(f->s, "node_id", "abcdef", 6), 0);
    assert_int_equal(store_meta_put(f->s, "empty", NULL, 0), 0);
    reopen(f, STORE_FSYNC_NO);
    assert_int_equal(store_meta_get(f->s, "node_id", &v, &n), 0);
    assert_int_equal(n, 6);
    assert_string_equal(v, "abcdef");
    free(v);
    assert_int_equal(store_meta_get(f->s, "blob", &v, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(v, "\0\1\0", 3);
    free(v);
    assert_int_equal(store_meta_get(f->s, "empty", &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
    assert_int_equal(store_total_keys(f->s), 0);
}

/* Opening a regular file as the data directory fails cleanly. */
static void test_open_regular_file(void **state) {
    fx *f = *state;
    char path[128], err[256] = "";
    snprintf(path, sizeof path, "%s/file", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    store *s = (store *)1;
    assert_int_equal(store_open(path, NULL, &s, err, sizeof err), KEEL_EIO);
    assert_null(s);
    assert_non_null(strstr(err, "cannot use data directory"));
    assert_non_null(strstr(err, "Not a directory"));
    snprintf(path, sizeof path, "%s/file/sub", f->dir);
    assert_int_equal(store_open(path, NULL, &s, err, sizeof err), KEEL_EIO);
    assert_non_null(strstr(err, "Not a directory"));
}

/* Missing directories are created (with parents) unless creation is off. */
static void test_open_missing_dir(void **state) {
    fx *f = *state;
    char path[128], err[256];
    store_opts o;
    store_opts_default(&o);
    o.create_if_missing = 0;
    store *s = NULL;
    snprintf(path, sizeof path, "%s/a/b", f->dir);
    assert_int_equal(store_open(path, &o, &s, err, sizeof err), KEEL_EIO);
    assert_non_null(strstr(err, "No such file or directory"));
    o.create_if_missing = 1;
    assert_int_equal(store_open(path, &o, &s, err, sizeof err), 0);
    store_free(s);
}

/* A second open of a live store and a corrupt CURRENT fail with a message. */
static void test_open_locked_or_corrupt(void **state) {
    fx *f = *state;
    char err[512] = "";
    store *s = NULL;
    assert_int_equal(store_open(f->dir, NULL, &s, err, sizeof err), KEEL_EIO);
    assert_null(s);
    assert_true(strlen(err) > 0);
    store_free(f->s);
    f->s = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/CURRENT", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("garbage-without-newline", fp);
    fclose(fp);
    err[0] = 0;
    int rc = store_open(f->dir, NULL, &s, err, sizeof err);
    assert_true(rc == KEEL_ECORRUPT || rc == KEEL_EIO);
    assert_null(s);
    assert_non_null(strstr(err, "cannot open store in"));
}

/* store_sync is a no-op when idle and fsyncs only in always mode. */
static void test_sync_modes_idle(void **state) {
    fx *f = *state;
    store_fsync modes[] = {STORE_FSYNC_ALWAYS, STORE_FSYNC_EVERYSEC, STORE_FSYNC_NO};
    for (int i = 0; i < 3; i++) {
        reopen(f, modes[i]);
        assert_int_equal(store_fsync_mode(f->s), modes[i]);
        uint64_t us = 99;
        assert_int_equal(store_sync(f->s, &us), 0);
        assert_int_equal(us, 0);
        put_str(f->s, 1, "k", "v");
        assert_int_equal(store_sync(f->s, NULL), 0);
        assert_int_equal(store_sync_wal(f->s, &us), 0);
        assert_int_equal(store_sync_wal(f->s, &us), 0);
        assert_int_equal(us, 0);
    }
}

/* Data committed and synced survives store_free + reopen in every mode. */
static void test_sync_reopen_each_mode(void **state) {
    fx *f = *state;
    store_fsync modes[] = {STORE_FSYNC_ALWAYS, STORE_FSYNC_EVERYSEC, STORE_FSYNC_NO};
    const char *keys[] = {"always", "everysec", "no"};
    for (int i = 0; i < 3; i++) {
        reopen(f, modes[i]);
        put_str(f->s, 42, keys[i], "durable");
        assert_int_equal(store_sync(f->s, NULL), 0);
    }
    reopen(f, STORE_FSYNC_ALWAYS);
    for (int i = 0; i < 3; i++)
        check_value(f->s, 42, keys[i], strlen(keys[i]), "durable", 7);
    check_stats(f->s, 42, 3, esize(6, 7) + esize(8, 7) + esize(2, 7));
}

/* Child process: opens dir, puts metadata (durable by itself), commits one
 * key, syncs if asked, then dies by SIGKILL. */
static void kill9_child(const char *dir, store_fsync mode, int sync) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        store_opts o;
        store_opts_default(&o);
        o.fsync = mode;
        store *s = NULL;
        if (store_open(dir, &o, &s, NULL, 0)) _exit(1);
        if (store_meta_put(s, "id", "n1", 2)) _exit(1);
        store_txn *t = store_txn_begin(s);
        if (store_txn_put(t, 7, "k", 1, STORE_T_STRING, 0, "v", 1)) _exit(1);
        if (store_txn_commit(t)) _exit(1);
        if (sync && store_sync(s, NULL)) _exit(1);
        raise(SIGKILL);
        _exit(1);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* A synced write survives kill -9 in every mode, stats included; an
 * unsynced one does not reach the WAL (why replies wait for store_sync),
 * while metadata is durable without store_sync. */
static void test_sync_survives_kill9(void **state) {
    fx *f = *state;
    store_free(f->s);
    f->s = NULL;
    store_fsync modes[] = {STORE_FSYNC_ALWAYS, STORE_FSYNC_EVERYSEC, STORE_FSYNC_NO};
    for (int i = 0; i < 3; i++) {
        char dir[128];
        snprintf(dir, sizeof dir, "%s/m%d", f->dir, i);
        kill9_child(dir, modes[i], 1);
        store *s = open_dir(dir, STORE_FSYNC_NO);
        check_value(s, 7, "k", 1, "v", 1);
        check_stats(s, 7, 1, esize(1, 1));
        store_free(s);
    }
    char dir[128];
    snprintf(dir, sizeof dir, "%s/unsynced", f->dir);
    kill9_child(dir, STORE_FSYNC_NO, 0);
    store *s = open_dir(dir, STORE_FSYNC_NO);
    check_missing(s, 7, "k");
    check_stats(s, 7, 0, 0);
    char *v;
    size_t n;
    assert_int_equal(store_meta_get(s, "id", &v, &n), 0);
    assert_int_equal(n, 2);
    free(v);
    store_free(s);
}

/* Regression (issue 10, defect 1): a rocksdb_write that failed mid-turn (here
 * through the scan's turn write) used to clear the batch, so the turn-end
 * store_sync found nothing pending, returned 0, and the turn's earlier
 * replies went out for writes that were never stored. The failure is
 * sticky: every later sync fails too. */
static void test_failed_turn_write_is_sticky(void **state) {
    fx *f = *state;
    put_str(f->s, 5, "acked", "1");
    assert_int_equal(failpoint_set("store.turn_write", "1*error", NULL, 0), 0);
    collected c = {0};
    assert_true(store_scan_slot(f->s, 5, 10, NOW, collect, &c) < 0);
    failpoint_clear_all();
    assert_int_not_equal(store_sync(f->s, NULL), 0);
    assert_int_not_equal(store_sync(f->s, NULL), 0); /* and stays failed */
    assert_int_not_equal(store_sync_wal(f->s, NULL), 0);
    assert_int_not_equal(store_meta_put(f->s, "x", "1", 1), 0);
}

/* Regression (issue 10, defect 1): the counts and the digest of a turn
 * whose write failed were applied anyway, so a later clean close saved
 * wrong digests and every move of the partition failed checksum-mismatch.
 * They apply only once RocksDB accepted the batch. */
static void test_failed_turn_write_keeps_stats(void **state) {
    fx *f = *state;
    put_str(f->s, 6, "kept", "1");
    assert_int_equal(store_sync(f->s, NULL), 0);
    uint64_t x0, k0;
    assert_int_equal(store_range_digest(f->s, 6, 6, &x0, &k0), 0);
    put_str(f->s, 6, "lost", "2");
    check_stats(f->s, 6, 2, 2 * esize(4, 1)); /* the turn sees its own writes */
    assert_int_equal(failpoint_set("store.turn_write", "1*error", NULL, 0), 0);
    assert_int_not_equal(store_sync(f->s, NULL), 0);
    failpoint_clear_all();
    check_stats(f->s, 6, 1, esize(4, 1));
    assert_int_equal(store_total_keys(f->s), 1);
    uint64_t x1, k1;
    assert_int_equal(store_range_digest(f->s, 6, 6, &x1, &k1), 0);
    assert_int_equal(k1, k0);
    assert_true(x1 == x0);
    check_missing(f->s, 6, "lost");
    /* A failed store never vouches for its statistics: reopening recounts
     * what is really there. */
    reopen(f, STORE_FSYNC_NO);
    check_stats(f->s, 6, 1, esize(4, 1));
    check_value(f->s, 6, "kept", 4, "1", 1);
}

/* The store.meta_put failpoint fails a metadata write without writing. */
static void test_meta_put_failpoint(void **state) {
    fx *f = *state;
    char *v;
    size_t n;
    assert_int_equal(failpoint_set("store.meta_put", "1*error", NULL, 0), 0);
    assert_int_equal(store_meta_put(f->s, "m", "1", 1), KEEL_EIO);
    failpoint_clear_all();
    assert_int_equal(store_meta_get(f->s, "m", &v, &n), KEEL_ENOTFOUND);
    assert_int_equal(store_meta_put(f->s, "m", "1", 1), 0);
}

/* store_txn_meta_put: a metadata record that commits or aborts with its txn
 * and reaches RocksDB in the turn's one write (after the data, so a crash
 * keeps both or neither): visible once the turn is written; an aborted
 * txn's record is gone with its data; a failed turn write stores neither;
 * the last of two records of one name in a turn wins; bad calls refused. */
static void test_txn_meta_put(void **state) {
    fx *f = *state;
    char *v;
    size_t n;
    store_txn *t = store_txn_begin(f->s);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_txn_meta_put(t, "m", "1", 1), KEEL_EINVAL); /* closed */
    t = store_txn_begin(f->s);
    assert_int_equal(store_txn_meta_put(t, NULL, "1", 1), KEEL_EINVAL);
    assert_int_equal(store_txn_meta_put(t, "m", NULL, 1), KEEL_EINVAL);
    assert_int_equal(store_txn_put(t, 7, "a", 1, STORE_T_STRING, 0, "x", 1), 0);
    assert_int_equal(store_txn_meta_put(t, "m", "1", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_meta_get(f->s, "m", &v, &n), KEEL_ENOTFOUND); /* turn not written */
    t = store_txn_begin(f->s); /* aborted: neither its data nor its record */
    assert_int_equal(store_txn_put(t, 7, "b", 1, STORE_T_STRING, 0, "y", 1), 0);
    assert_int_equal(store_txn_meta_put(t, "gone", "2", 1), 0);
    store_txn_abort(t);
    t = store_txn_begin(f->s); /* a second record of "m" in the turn: it wins */
    assert_int_equal(store_txn_meta_put(t, "m", "22", 2), 0);
    assert_int_equal(store_txn_meta_put(t, "empty", NULL, 0), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_sync(f->s, NULL), 0);
    assert_int_equal(store_meta_get(f->s, "m", &v, &n), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(v, "22", 2);
    free(v);
    assert_int_equal(store_meta_get(f->s, "empty", &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
    assert_int_equal(store_meta_get(f->s, "gone", &v, &n), KEEL_ENOTFOUND);
    check_value(f->s, 7, "a", 1, "x", 1);
    check_missing(f->s, 7, "b");
    /* A record alone in a turn (no data) is written and synced too. */
    t = store_txn_begin(f->s);
    assert_int_equal(store_txn_meta_put(t, "alone", "3", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    reopen(f, STORE_FSYNC_ALWAYS); /* a clean close writes and syncs the turn */
    assert_int_equal(store_meta_get(f->s, "alone", &v, &n), 0);
    free(v);
    /* The turn's write fails: neither the data nor the record is stored. */
    t = store_txn_begin(f->s);
    assert_int_equal(store_txn_put(t, 7, "c", 1, STORE_T_STRING, 0, "z", 1), 0);
    assert_int_equal(store_txn_meta_put(t, "fp", "4", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(failpoint_set("store.turn_write", "1*error", NULL, 0), 0);
    assert_int_not_equal(store_sync(f->s, NULL), 0);
    failpoint_clear_all();
    reopen(f, STORE_FSYNC_NO);
    assert_int_equal(store_meta_get(f->s, "fp", &v, &n), KEEL_ENOTFOUND);
    check_missing(f->s, 7, "c");
}

/* RocksDB's LOG does not grow with the group commits: Debian's librocksdb
 * defaults to DEBUG, where every FlushWAL wrote a line (one per turn, 500
 * here); at INFO none does. */
static void test_rocksdb_log_quiet(void **state) {
    fx *f = *state;
    reopen(f, STORE_FSYNC_ALWAYS);
    char k[32];
    for (int i = 0; i < 500; i++) {
        snprintf(k, sizeof k, "k%d", i);
        put_str(f->s, 3, k, "v");
        assert_int_equal(store_sync(f->s, NULL), 0);
    }
    char path[TMPDIR_MAX + 8];
    snprintf(path, sizeof path, "%s/LOG", f->dir);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[1024];
    int flushes = 0, debug = 0;
    while (fgets(line, sizeof line, fp)) {
        flushes += strstr(line, "FlushWAL") != NULL;
        debug += strstr(line, "[DEBUG]") != NULL;
    }
    fclose(fp);
    assert_int_equal(flushes, 0);
    assert_int_equal(debug, 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fsync_parse_name),
        cmocka_unit_test(test_opts_default),
        T(test_put_get_del),
        T(test_binary_key_value),
        T(test_overwrite_bytes),
        T(test_stats_after_reopen),
        T(test_txn_reads_own_writes),
        T(test_txn_put_twice_one_key),
        T(test_txn_value_outlives_ops),
        T(test_expires_count),
        T(test_turn_abort_restores),
        T(test_turn_visible_to_scan),
        T(test_txn_get_put_del_stats),
        T(test_txn_abort),
        T(test_txn_meta_put),
        T(test_invalid_args),
        T(test_expiry_hides),
        T(test_put_over_expired),
        T(test_sweep_deletes_expired),
        T(test_sweep_wraps),
        T(test_scan_slot),
        T(test_delete_slots),
        T(test_meta),
        T(test_open_regular_file),
        T(test_open_missing_dir),
        T(test_open_locked_or_corrupt),
        T(test_sync_modes_idle),
        T(test_sync_reopen_each_mode),
        T(test_sync_survives_kill9),
        T(test_failed_turn_write_is_sticky),
        T(test_failed_turn_write_keeps_stats),
        T(test_meta_put_failpoint),
        T(test_rocksdb_log_quiet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
