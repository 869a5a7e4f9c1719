/* test-zset.c - sorted sets (DESIGN.md §14): the store's descending range
 * scan (store_scan_range_rev, bounds past a slot's last record), the score
 * index kept in step with the member records by every write, ranges by
 * rank/score/lex both ways, pops, the set algebra, and the format 2 -> 3
 * upgrade that adds index records to sorted sets written before it. Replies
 * are redis-server 7.0's (tests/integration/test_types diffs against one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/crc16.h"
#include "core/err.h"
#include "core/zscore.h"
#include "node/cmd.h"
#include "node/server.h"

#include "cmd_fixture.h"

typedef cmdfix fixture;

static int setup(void **state) {
    cmdfix *f = cmdfix_new("zset", 0);
    f->sync_each = 1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    cmdfix_free(*state);
    return 0;
}
static const char *WT = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

static int collect(void *arg, const char *rk, size_t rkl, const store_value *v) {
    (void)v;
    char *out = arg;
    size_t n = strlen(out);
    snprintf(out + n, 256 - n, "%.*s,", (int)(rkl - 1), rk + 1);
    return 0;
}

/* store_scan_range_rev: descending, [from, to), skip/max, and an upper
 * bound past the slot's last record (a previous report said it found
 * nothing there) while the next slot holds records. */
static void scan_rev(void **state) {
    fixture *f = *state;
    store_txn *t = store_txn_begin(f->srv.st);
    const char *ks[] = {"\x01"
                        "a",
                        "\x01"
                        "b",
                        "\x01"
                        "c",
                        "\x01"
                        "d"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(store_txn_put(t, 5, ks[i], 2, STORE_T_SUB | STORE_T_SET, 0, "", 0), 0);
    assert_int_equal(store_txn_put(t, 6,
                                   "\x01"
                                   "a",
                                   2, STORE_T_SUB | STORE_T_SET, 0, "", 0),
                     0);
    assert_int_equal(store_txn_put(t, 4,
                                   "\x01"
                                   "z",
                                   2, STORE_T_SUB | STORE_T_SET, 0, "", 0),
                     0);
    assert_int_equal(store_txn_commit(t), 0);
    char out[256] = "";
    assert_int_equal(
        store_scan_range_rev(f->srv.st, 5, "\x01", 1, "\x02", 1, 0, 100, 0, collect, out), 4);
    assert_string_equal(out, "d,c,b,a,");
    out[0] = 0;
    assert_int_equal(store_scan_range_rev(f->srv.st, 5,
                                          "\x01"
                                          "b",
                                          2,
                                          "\x01"
                                          "d",
                                          2, 0, 100, 0, collect, out),
                     2);
    assert_string_equal(out, "c,b,");
    out[0] = 0;
    assert_int_equal(
        store_scan_range_rev(f->srv.st, 5, "", 0, "\xff\xff", 2, 1, 2, 0, collect, out), 2);
    assert_string_equal(out, "c,b,");
    out[0] = 0;
    assert_int_equal(
        store_scan_range_rev(f->srv.st, 5, "\x00", 1, "\x01", 1, 0, 100, 0, collect, out), 0);
    assert_int_equal(store_scan_range_rev(f->srv.st, 7, "", 0, "\xff", 1, 0, 100, 0, collect, out),
                     0);
    assert_int_equal(store_scan_range_rev(f->srv.st, 5, "", 0, NULL, 0, 0, 100, 0, collect, out),
                     KEEL_EINVAL);
}

/* Physical records of the whole store. */
static uint64_t records(fixture *f) {
    uint64_t x, k;
    assert_int_equal(store_range_digest(f->srv.st, 0, 16383, &x, &k), 0);
    return k;
}

/* Each member is two records (member + index); every write keeps them in
 * step, and DEL leaves both to store_gc. */
static void index_in_step(void **state) {
    fixture *f = *state;
    EXPECT(f, "ZADD z 1 a 2 b 3 c", ":3\r\n");
    assert_int_equal(records(f), 7);
    EXPECT(f, "ZADD z 5 a", ":0\r\n");
    assert_int_equal(records(f), 7); /* the old index record went */
    EXPECT(f, "ZRANGE z 0 -1 WITHSCORES",
           "*6\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\na\r\n$1\r\n5\r\n");
    EXPECT(f, "ZREVRANGE z 0 0", "*1\r\n$1\r\na\r\n");
    EXPECT(f, "ZRANGE z +inf -inf BYSCORE REV LIMIT 1 1", "*1\r\n$1\r\nc\r\n");
    EXPECT(f, "ZRANGE z (2 5 BYSCORE", "*2\r\n$1\r\nc\r\n$1\r\na\r\n");
    EXPECT(f, "ZRANK z a", ":2\r\n");
    EXPECT(f, "ZREVRANK z a", ":0\r\n");
    EXPECT(f, "ZCOUNT z (2 +inf", ":2\r\n");
    EXPECT(f, "ZREM z b", ":1\r\n");
    assert_int_equal(records(f), 5);
    EXPECT(f, "ZPOPMIN z", "*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_int_equal(records(f), 3);
    EXPECT(f, "ZINCRBY z -10 a", "$2\r\n-5\r\n");
    EXPECT(f, "ZADD z -inf m +inf n 0 o", ":3\r\n");
    EXPECT(f, "ZRANGE z 0 -1", "*4\r\n$1\r\nm\r\n$1\r\na\r\n$1\r\no\r\n$1\r\nn\r\n");
    EXPECT(f, "ZPOPMAX z 2", "*4\r\n$1\r\nn\r\n$3\r\ninf\r\n$1\r\no\r\n$1\r\n0\r\n");
    EXPECT(f, "ZREMRANGEBYSCORE z -inf (0", ":2\r\n");
    EXPECT(f, "EXISTS z", ":0\r\n");
    assert_int_equal(records(f), 0);
    EXPECT(f, "ZADD {t}z 0 a 0 b 0 c 0 d", ":4\r\n");
    EXPECT(f, "ZRANGEBYLEX {t}z (a [c", "*2\r\n$1\r\nb\r\n$1\r\nc\r\n");
    EXPECT(f, "ZREVRANGEBYLEX {t}z + - LIMIT 0 2", "*2\r\n$1\r\nd\r\n$1\r\nc\r\n");
    EXPECT(f, "ZLEXCOUNT {t}z - (c", ":2\r\n");
    EXPECT(f, "ZRANGESTORE {t}y {t}z 1 2", ":2\r\n");
    EXPECT(f, "COPY {t}y {t}w", ":1\r\n");
    EXPECT(f, "ZRANGE {t}w 0 -1 REV", "*2\r\n$1\r\nc\r\n$1\r\nb\r\n");
    EXPECT(f, "ZUNIONSTORE {t}u 2 {t}z {t}w WEIGHTS 1 2", ":4\r\n");
    EXPECT(f, "ZRANGE {t}u 0 -1 WITHSCORES",
           "*8\r\n$1\r\na\r\n$1\r\n0\r\n$1\r\nb\r\n$1\r\n0\r\n$1\r\nc\r\n$1\r\n0\r\n$1\r\nd\r\n$"
           "1\r\n0\r\n");
    EXPECT(f, "DEL {t}z {t}y {t}w {t}u", ":4\r\n");
    while (store_gc_pending(f->srv.st))
        assert_true(store_gc(f->srv.st, keel_wall_ms(), 100) >= 0);
    assert_int_equal(records(f), 0); /* members and index records collected */
    EXPECT(f, "SET s v", "+OK\r\n");
    EXPECT(f, "ZPOPMIN s", WT);
}

/* A format-2 store (sorted sets with member records only) gets its score
 * index at open: ranges and ranks then work, and the format is 3. */
static void format2_upgrade(void **state) {
    fixture *f = *state;
    unsigned slot = keel_key_slot("old", 3);
    const uint64_t ver = 77;
    char meta[16], rk[64], val[8];
    for (int i = 0; i < 8; i++) {
        meta[i] = (char)(ver >> (56 - 8 * i));
        meta[8 + i] = (char)(i == 7 ? 3 : 0);
    }
    store_txn *t = store_txn_begin(f->srv.st);
    assert_int_equal(store_txn_put(t, slot, "\x00old", 4, STORE_T_ZSET, 0, meta, 16), 0);
    const char *mem[3] = {"a", "b", "c"};
    const double sc[3] = {3.5, -1, 2};
    for (int m = 0; m < 3; m++) {
        size_t pl = store_sub_prefix(rk, "old", 3, ver);
        rk[pl] = mem[m][0];
        uint64_t u;
        memcpy(&u, &sc[m], 8);
        for (int i = 0; i < 8; i++)
            val[i] = (char)(u >> (56 - 8 * i));
        assert_int_equal(store_txn_put(t, slot, rk, pl + 1, STORE_T_SUB | STORE_T_ZSET, 0, val, 8),
                         0);
    }
    assert_int_equal(store_txn_commit(t), 0);
    store_free(f->srv.st);
    rocksdb_options_t *o = rocksdb_options_create();
    const char *names[2] = {"default", "meta"};
    const rocksdb_options_t *cfo[2] = {o, o};
    rocksdb_column_family_handle_t *h[2];
    char *err = NULL;
    rocksdb_t *db = rocksdb_open_column_families(o, f->dir, 2, names, cfo, h, &err);
    assert_null(err);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_put_cf(db, wo, h[1], "c/format", 8, "2", 1, &err);
    assert_null(err);
    rocksdb_column_family_handle_destroy(h[0]);
    rocksdb_column_family_handle_destroy(h[1]);
    rocksdb_close(db);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_options_destroy(o);
    cmdfix_open_store(f);
    assert_int_equal(records(f), 7); /* metadata, 3 members, 3 index records */
    EXPECT(f, "ZRANGE old 0 -1", "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n");
    EXPECT(f, "ZRANK old a", ":2\r\n");
    EXPECT(f, "ZPOPMAX old", "*2\r\n$1\r\na\r\n$3\r\n3.5\r\n");
    assert_int_equal(records(f), 5);
    store_free(f->srv.st);
    o = rocksdb_options_create();
    cfo[0] = cfo[1] = o;
    db = rocksdb_open_column_families(o, f->dir, 2, names, cfo, h, &err);
    assert_null(err);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    size_t fl = 0;
    char *fmt = rocksdb_get_cf(db, ro, h[1], "c/format", 8, &fl, &err);
    assert_null(err);
    assert_non_null(fmt);
    assert_int_equal(fl, 1);
    assert_int_equal(fmt[0], '3');
    rocksdb_free(fmt);
    rocksdb_readoptions_destroy(ro);
    rocksdb_column_family_handle_destroy(h[0]);
    rocksdb_column_family_handle_destroy(h[1]);
    rocksdb_close(db);
    rocksdb_options_destroy(o);
    cmdfix_open_store(f); /* format 3 now: opens as is */
    assert_int_equal(records(f), 5);
    EXPECT(f, "ZRANGE old 0 -1 WITHSCORES", "*4\r\n$1\r\nb\r\n$2\r\n-1\r\n$1\r\nc\r\n$1\r\n2\r\n");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(scan_rev),
        T(index_in_step),
        T(format2_upgrade),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
