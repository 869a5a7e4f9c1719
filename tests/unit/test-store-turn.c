/* test-store-turn.c - the turn batch RocksDB is given (store.c turn_batch:
 * each key's final state, once, in key order) and the read-free writes of
 * store_txn_put_absent / store_txn_del_present: after each turn the data
 * read back, the per-slot digests and counts kept on the write path, and a
 * full checksum scan of what RocksDB holds must all agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tmpdir.h"

#include "core/err.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NOW 1700000000000LL
#define SLOT 77u

typedef struct fx {
    char dir[TMPDIR_MAX];
    store *s;
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
    if (tmpdir_make(f->dir, "test-store-turn")) return -1;
    f->s = open_dir(f->dir);
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

static void put(store_txn *t, const char *k, const char *v) {
    assert_int_equal(store_txn_put(t, SLOT, k, strlen(k), STORE_T_STRING, 0, v, strlen(v)), 0);
}

/* The value of k, or NULL if absent; into buf. */
static const char *get(store *s, const char *k, char *buf, size_t cap) {
    store_value v;
    int rc = store_get(s, SLOT, k, strlen(k), NOW, &v);
    if (rc == KEEL_ENOTFOUND) return NULL;
    assert_int_equal(rc, 0);
    assert_true(v.len < cap);
    memcpy(buf, v.data, v.len);
    buf[v.len] = 0;
    store_value_release(&v);
    return buf;
}

/* The write path's digest and count equal a scan of the data. */
static void assert_digest_exact(store *s, uint64_t want_keys) {
    uint64_t xd, kd, xc, kc;
    assert_int_equal(store_range_digest(s, SLOT, SLOT, &xd, &kd), 0);
    assert_int_equal(store_range_checksum(s, NULL, SLOT, SLOT, &xc, &kc), 0);
    assert_int_equal(kd, kc);
    assert_int_equal(xd, xc);
    assert_int_equal(kc, want_keys);
}

/* One turn: a key written by 50 commands, keys written in descending
 * order, a put then a delete, a delete then a put, and an aborted command:
 * what the turn leaves is each key's last committed state. */
static void test_turn_final_state(void **state) {
    fx *f = *state;
    store *s = f->s;
    store_txn *t = store_txn_begin(s);
    put(t, "gone", "x");
    put(t, "back", "old");
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_sync(s, NULL), 0);

    char k[32], v[32], buf[64];
    for (int i = 0; i < 50; i++) {
        t = store_txn_begin(s);
        snprintf(v, sizeof v, "v%d", i);
        put(t, "hot", v);
        snprintf(k, sizeof k, "k%02d", 49 - i);
        put(t, k, v);
        assert_int_equal(store_txn_commit(t), 0);
    }
    int ex = 0;
    t = store_txn_begin(s);
    put(t, "tmp", "1");
    assert_int_equal(store_txn_commit(t), 0);
    t = store_txn_begin(s);
    assert_int_equal(store_txn_del(t, SLOT, "tmp", 3, &ex), 0);
    assert_int_equal(ex, 1);
    assert_int_equal(store_txn_del(t, SLOT, "gone", 4, &ex), 0);
    assert_int_equal(ex, 1);
    assert_int_equal(store_txn_del(t, SLOT, "back", 4, &ex), 0);
    assert_int_equal(store_txn_commit(t), 0);
    t = store_txn_begin(s);
    put(t, "back", "new");
    assert_int_equal(store_txn_commit(t), 0);
    t = store_txn_begin(s); /* aborted: none of it may land */
    put(t, "hot", "aborted");
    put(t, "never", "1");
    store_txn_abort(t);
    assert_int_equal(store_sync(s, NULL), 0);

    assert_string_equal(get(s, "hot", buf, sizeof buf), "v49");
    assert_string_equal(get(s, "k00", buf, sizeof buf), "v49");
    assert_string_equal(get(s, "k49", buf, sizeof buf), "v0");
    assert_string_equal(get(s, "back", buf, sizeof buf), "new");
    assert_null(get(s, "tmp", buf, sizeof buf));
    assert_null(get(s, "gone", buf, sizeof buf));
    assert_null(get(s, "never", buf, sizeof buf));
    assert_digest_exact(s, 52); /* hot, k00..k49, back */

    store_free(s); /* clean close, open: the saved statistics agree too */
    f->s = s = open_dir(f->dir);
    assert_string_equal(get(s, "hot", buf, sizeof buf), "v49");
    assert_digest_exact(s, 52);
}

/* put_absent and del_present keep the statistics exact when the caller's
 * claim is true, also when the turn itself wrote the record before. */
static void test_known_state_writes(void **state) {
    fx *f = *state;
    store *s = f->s;
    const uint8_t ty = STORE_T_SUB | STORE_T_ZSET;
    store_txn *t = store_txn_begin(s);
    assert_int_equal(store_txn_put_absent(t, SLOT, "a", 1, ty, "", 0), 0);
    assert_int_equal(store_txn_put_absent(t, SLOT, "b", 1, ty, "pay", 3), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_sync(s, NULL), 0);
    assert_digest_exact(s, 2);

    t = store_txn_begin(s);
    assert_int_equal(store_txn_del_present(t, SLOT, "a", 1, ty, "", 0), 0);
    assert_int_equal(store_txn_put_absent(t, SLOT, "a", 1, ty, "", 0), 0); /* deleted above */
    assert_int_equal(store_txn_del_present(t, SLOT, "b", 1, ty, "pay", 3), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_sync(s, NULL), 0);
    assert_digest_exact(s, 1);
    t = store_txn_begin(s); /* bad input is refused, not trusted */
    assert_int_equal(store_txn_put_absent(t, SLOT, "c", 1, ty, NULL, 2), KEEL_EINVAL);
    store_txn_abort(t);
    assert_digest_exact(s, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_turn_final_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_known_state_writes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
