/* test-types.c - the data model (DESIGN.md §14): hashes, sets, keyspace
 * commands and the record layout under them, driven through cmd_dispatch on
 * a real store. Replies are compared byte for byte with redis-server 7.0's
 * (tests/integration/test_types diffs against a live one). Also: DEL of a
 * large hash is O(1) and store_gc removes its field records, statistics and
 * digests follow, and the data format is checked and upgraded at open. */
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
#include "node/cmd.h"
#include "node/server.h"

#include "cmd_fixture.h"

typedef cmdfix fixture;

static int setup(void **state) {
    cmdfix *f = cmdfix_new("types", 0);
    f->sync_each = 1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    cmdfix_free(*state);
    return 0;
}

static const char *run(fixture *f, const char *line) {
    return cmdfix_run(f, line);
}
static const char *WT = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

static void hash_basic(void **state) {
    fixture *f = *state;
    EXPECT(f, "HSET h a 1 b 2", ":2\r\n");
    EXPECT(f, "HSET h a 3 c 4", ":1\r\n");
    EXPECT(f, "HGET h a", "$1\r\n3\r\n");
    EXPECT(f, "HGET h zz", "$-1\r\n");
    EXPECT(f, "HMGET h a zz c", "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\n4\r\n");
    EXPECT(f, "HLEN h", ":3\r\n");
    EXPECT(f, "HGETALL h",
           "*6\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n4\r\n");
    EXPECT(f, "HKEYS h", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    EXPECT(f, "HSTRLEN h a", ":1\r\n");
    EXPECT(f, "HEXISTS h b", ":1\r\n");
    EXPECT(f, "HSETNX h b 9", ":0\r\n");
    EXPECT(f, "HINCRBY h a 10", ":13\r\n");
    EXPECT(f, "HINCRBYFLOAT h b 0.5", "$3\r\n2.5\r\n");
    EXPECT(f, "HINCRBY h b 1", "-ERR hash value is not an integer\r\n");
    EXPECT(f, "HINCRBY h a x", "-ERR value is not an integer or out of range\r\n");
    EXPECT(f, "HINCRBYFLOAT h a x", "-ERR value is not a valid float\r\n");
    EXPECT(f, "HSET h a", "-ERR wrong number of arguments for 'hset' command\r\n");
    EXPECT(f, "HMSET h a 1 b", "-ERR wrong number of arguments for 'hmset' command\r\n");
    EXPECT(f, "HDEL h a b zz", ":2\r\n");
    EXPECT(f, "TYPE h", "+hash\r\n");
    EXPECT(f, "GET h", WT);
    EXPECT(f, "SADD h x", WT);
    EXPECT(f, "HDEL h c", ":1\r\n");
    EXPECT(f, "EXISTS h", ":0\r\n"); /* the last field took the key */
    EXPECT(f, "SET s v", "+OK\r\n");
    EXPECT(f, "HGET s a", WT);
    EXPECT(f, "HSET s a 1", WT);
    EXPECT(f, "HSCAN h 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    EXPECT(f, "HSET h f1 1 f2 2 f3 3", ":3\r\n");
    /* A small hash comes back whole whatever COUNT (as redis' listpack). */
    EXPECT(f, "HSCAN h 0 COUNT 2",
           "*2\r\n$1\r\n0\r\n*6\r\n$2\r\nf1\r\n$1\r\n1\r\n$2\r\nf2\r\n$1\r\n2\r\n$2\r\nf3\r\n$"
           "1\r\n3\r\n");
    EXPECT(f, "HSCAN h 0 MATCH *2", "*2\r\n$1\r\n0\r\n*2\r\n$2\r\nf2\r\n$1\r\n2\r\n");
    EXPECT(f, "HRANDFIELD h 0", "*0\r\n");
    EXPECT(f, "HRANDFIELD nosuch", "$-1\r\n");
    assert_int_equal(strncmp(run(f, "HRANDFIELD h -5 WITHVALUES"), "*10\r\n", 5), 0);
    EXPECT(f, "EXPIRE h 100", ":1\r\n");
    EXPECT(f, "TTL h", ":100\r\n");
    EXPECT(f, "HSET h f4 4", ":1\r\n");
    EXPECT(f, "TTL h", ":100\r\n"); /* a field write keeps the key's expiry */
    EXPECT(f, "DBSIZE", ":2\r\n");  /* keys, not field records */
}

static void set_basic(void **state) {
    fixture *f = *state;
    EXPECT(f, "SADD {s}1 a b c", ":3\r\n");
    EXPECT(f, "SADD {s}1 a d", ":1\r\n");
    EXPECT(f, "SCARD {s}1", ":4\r\n");
    EXPECT(f, "SISMEMBER {s}1 a", ":1\r\n");
    EXPECT(f, "SMISMEMBER {s}1 a zz", "*2\r\n:1\r\n:0\r\n");
    EXPECT(f, "SMEMBERS {s}1", "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n");
    EXPECT(f, "SADD {s}2 c d e", ":3\r\n");
    EXPECT(f, "SINTER {s}1 {s}2", "*2\r\n$1\r\nc\r\n$1\r\nd\r\n");
    EXPECT(f, "SUNION {s}1 {s}2", "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n");
    EXPECT(f, "SDIFF {s}1 {s}2", "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    EXPECT(f, "SDIFF {s}1 {s}1", "*0\r\n");
    EXPECT(f, "SINTERSTORE {s}3 {s}1 {s}2", ":2\r\n");
    EXPECT(f, "SMEMBERS {s}3", "*2\r\n$1\r\nc\r\n$1\r\nd\r\n");
    EXPECT(f, "SINTERCARD 2 {s}1 {s}2", ":2\r\n");
    EXPECT(f, "SINTERCARD 2 {s}1 {s}2 LIMIT 1", ":1\r\n");
    EXPECT(f, "SINTERCARD 0 {s}1", "-ERR numkeys should be greater than 0\r\n");
    EXPECT(f, "SINTERCARD 3 {s}1 {s}2",
           "-ERR Number of keys can't be greater than number of args\r\n");
    EXPECT(f, "SINTERCARD 2 {s}1 {s}2 LIMIT -1", "-ERR LIMIT can't be negative\r\n");
    EXPECT(f, "SINTER a b", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "SINTERCARD 2 a b", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "SMOVE {s}1 {s}2 a", ":1\r\n");
    EXPECT(f, "SMOVE {s}1 {s}2 a", ":0\r\n");
    EXPECT(f, "SREM {s}2 a c zz", ":2\r\n");
    EXPECT(f, "SPOP {s}3 -1", "-ERR value is out of range, must be positive\r\n");
    EXPECT(f, "SPOP {s}3 0", "*0\r\n");
    assert_int_equal(strncmp(run(f, "SPOP {s}3 5"), "*2\r\n$1\r\n", 8), 0);
    EXPECT(f, "EXISTS {s}3", ":0\r\n");
    EXPECT(f, "SRANDMEMBER nosuch", "$-1\r\n");
    EXPECT(f, "SRANDMEMBER {s}1 0", "*0\r\n");
    EXPECT(f, "SET {s}str v", "+OK\r\n");
    EXPECT(f, "SADD {s}str a", WT);
    EXPECT(f, "SINTER {s}1 {s}str", WT);
    EXPECT(f, "SSCAN {s}2 0", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nd\r\n$1\r\ne\r\n");
    EXPECT(f, "SSCAN {s}2 x", "-ERR invalid cursor\r\n");
}

static void keyspace(void **state) {
    fixture *f = *state;
    EXPECT(f, "SET {k}a 1", "+OK\r\n");
    EXPECT(f, "HSET {k}h f v", ":1\r\n");
    EXPECT(f, "SADD {k}s m", ":1\r\n");
    EXPECT(f, "TYPE {k}a", "+string\r\n");
    EXPECT(f, "TYPE {k}s", "+set\r\n");
    EXPECT(f, "TYPE nosuch", "+none\r\n");
    EXPECT(f, "KEYS {k}*", "*3\r\n$4\r\n{k}a\r\n$4\r\n{k}h\r\n$4\r\n{k}s\r\n");
    EXPECT(f, "KEYS {k}?", "*3\r\n$4\r\n{k}a\r\n$4\r\n{k}h\r\n$4\r\n{k}s\r\n");
    EXPECT(f, "SCAN 0 TYPE hash", "*2\r\n$1\r\n0\r\n*1\r\n$4\r\n{k}h\r\n");
    EXPECT(f, "SCAN 0 MATCH *s", "*2\r\n$1\r\n0\r\n*1\r\n$4\r\n{k}s\r\n");
    EXPECT(f, "RENAME {k}h {k}h2", "+OK\r\n");
    EXPECT(f, "HGET {k}h2 f", "$1\r\nv\r\n");
    EXPECT(f, "RENAME {k}nosuch {k}x", "-ERR no such key\r\n");
    EXPECT(f, "RENAMENX {k}a {k}s", ":0\r\n");
    EXPECT(f, "COPY {k}s {k}s2", ":1\r\n");
    EXPECT(f, "COPY {k}s {k}s2", ":0\r\n");
    EXPECT(f, "SADD {k}s2 n", ":1\r\n");
    EXPECT(f, "SCARD {k}s", ":1\r\n"); /* the copy is independent */
    EXPECT(f, "COPY {k}s {k}s2 REPLACE", ":1\r\n");
    EXPECT(f, "SCARD {k}s2", ":1\r\n");
    EXPECT(f, "COPY {k}s {k}s DB 0", "-ERR source and destination objects are the same\r\n");
    EXPECT(f, "COPY {k}s {k}t DB x", "-ERR value is not an integer or out of range\r\n");
    EXPECT(f, "RENAME a b", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "TOUCH {k}a {k}nosuch {k}s", ":2\r\n");
    EXPECT(f, "EXPIREAT {k}a 99999999999", ":1\r\n");
    EXPECT(f, "EXPIRETIME {k}a", ":99999999999\r\n");
    EXPECT(f, "PEXPIRETIME {k}a", ":99999999999000\r\n");
    EXPECT(f, "EXPIRETIME {k}s", ":-1\r\n");
    EXPECT(f, "EXPIRETIME nosuch", ":-2\r\n");
    EXPECT(f, "OBJECT ENCODING {k}a", "$3\r\nint\r\n");
    EXPECT(f, "DBSIZE", ":4\r\n");
    EXPECT(f, "FLUSHALL", "+OK\r\n");
    EXPECT(f, "DBSIZE", ":0\r\n");
    EXPECT(f, "RANDOMKEY", "$-1\r\n");
    EXPECT(f, "SCAN 0", "*2\r\n$1\r\n0\r\n*0\r\n");
}

static void strings_more(void **state) {
    fixture *f = *state;
    EXPECT(f, "SETEX k 0 v", "-ERR invalid expire time in 'setex' command\r\n");
    EXPECT(f, "SETEX k 100 v", "+OK\r\n");
    EXPECT(f, "TTL k", ":100\r\n");
    EXPECT(f, "GETEX k PERSIST", "$1\r\nv\r\n");
    EXPECT(f, "TTL k", ":-1\r\n");
    EXPECT(f, "GETEX k EX 10 PERSIST", "-ERR syntax error\r\n");
    EXPECT(f, "SET s hello", "+OK\r\n");
    EXPECT(f, "GETRANGE s 1 3", "$3\r\nell\r\n");
    EXPECT(f, "GETRANGE s -3 -1", "$3\r\nllo\r\n");
    EXPECT(f, "SETRANGE s 6 world", ":11\r\n");
    EXPECT(f, "STRLEN s", ":11\r\n");
    EXPECT(f, "GETRANGE s 6 -1", "$5\r\nworld\r\n");
    EXPECT(f, "SETRANGE s -1 x", "-ERR offset is out of range\r\n");
    EXPECT(f, "SET n 10.5", "+OK\r\n");
    EXPECT(f, "INCRBYFLOAT n 0.1", "$4\r\n10.6\r\n");
    EXPECT(f, "INCRBYFLOAT s 1", "-ERR value is not a valid float\r\n");
    EXPECT(f, "MSETNX {m}a 1 {m}b 2", ":1\r\n");
    EXPECT(f, "MSETNX {m}a 1 {m}c 2", ":0\r\n");
    EXPECT(f, "SETBIT b 7 1", ":0\r\n");
    EXPECT(f, "SETBIT b 7 0", ":1\r\n");
    EXPECT(f, "SETBIT b 7 2", "-ERR bit is not an integer or out of range\r\n");
    EXPECT(f, "SETBIT b -1 1", "-ERR bit offset is not an integer or out of range\r\n");
    EXPECT(f, "SET b \xff\xf0", "+OK\r\n");
    EXPECT(f, "BITCOUNT b", ":12\r\n");
    EXPECT(f, "BITCOUNT b 1 1", ":4\r\n");
    EXPECT(f, "BITCOUNT b 4 11 BIT", ":8\r\n");
    EXPECT(f, "BITPOS b 0", ":12\r\n");
    EXPECT(f, "BITPOS b 1 1", ":8\r\n");
    EXPECT(f, "BITPOS b 2", "-ERR The bit argument must be 1 or 0.\r\n");
    EXPECT(f, "GETBIT b 0", ":1\r\n");
    EXPECT(f, "GETBIT b 100", ":0\r\n");
}

static void list_basic(void **state) {
    fixture *f = *state;
    EXPECT(f, "RPUSH l a b c", ":3\r\n");
    EXPECT(f, "LPUSH l z", ":4\r\n");
    EXPECT(f, "LRANGE l 0 -1", "*4\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    EXPECT(f, "LINDEX l -1", "$1\r\nc\r\n");
    EXPECT(f, "LINDEX l 9", "$-1\r\n");
    EXPECT(f, "LSET l 1 A", "+OK\r\n");
    EXPECT(f, "LSET l 9 A", "-ERR index out of range\r\n");
    EXPECT(f, "LSET nosuch 0 A", "-ERR no such key\r\n");
    EXPECT(f, "LPOP l 2", "*2\r\n$1\r\nz\r\n$1\r\nA\r\n");
    EXPECT(f, "RPOP l", "$1\r\nc\r\n");
    EXPECT(f, "LPOP nosuch 2", "*-1\r\n");
    EXPECT(f, "LPOP l -1", "-ERR value is out of range, must be positive\r\n");
    EXPECT(f, "RPUSH l x y x z x", ":6\r\n");
    EXPECT(f, "LREM l -2 x", ":2\r\n");
    EXPECT(f, "LRANGE l 0 -1", "*4\r\n$1\r\nb\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n");
    EXPECT(f, "LINSERT l BEFORE y Q", ":5\r\n");
    EXPECT(f, "LINSERT l AFTER nosuch Q", ":-1\r\n");
    EXPECT(f, "LPOS l Q", ":2\r\n");
    EXPECT(f, "LTRIM l 1 2", "+OK\r\n");
    EXPECT(f, "LRANGE l 0 -1", "*2\r\n$1\r\nx\r\n$1\r\nQ\r\n");
    EXPECT(f, "LMOVE l l LEFT RIGHT", "$1\r\nx\r\n");
    EXPECT(f, "LRANGE l 0 -1", "*2\r\n$1\r\nQ\r\n$1\r\nx\r\n");
    EXPECT(f, "LLEN l", ":2\r\n");
    EXPECT(f, "TYPE l", "+list\r\n");
    EXPECT(f, "GET l", WT);
    EXPECT(f, "SET s v", "+OK\r\n");
    EXPECT(f, "LPUSH s a", WT);
    EXPECT(f, "LTRIM l 5 9", "+OK\r\n");
    EXPECT(f, "EXISTS l", ":0\r\n");
}

static void zset_basic(void **state) {
    fixture *f = *state;
    EXPECT(f, "ZADD z 1 a 2 b 3 c", ":3\r\n");
    EXPECT(f, "ZADD z XX CH 5 a 9 d", ":1\r\n");
    EXPECT(f, "ZINCRBY z 2.5 a", "$3\r\n7.5\r\n");
    EXPECT(f, "ZRANGE z 0 -1", "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n");
    EXPECT(f, "ZRANGEBYSCORE z (2 +inf", "*2\r\n$1\r\nc\r\n$1\r\na\r\n");
    EXPECT(f, "ZRANK z a", ":2\r\n");
    EXPECT(f, "ZSCORE z b", "$1\r\n2\r\n");
    EXPECT(f, "ZREM z b nosuch", ":1\r\n");
    EXPECT(f, "ZCARD z", ":2\r\n");
    EXPECT(f, "ZADD z NX XX 1 a", "-ERR XX and NX options at the same time are not compatible\r\n");
    EXPECT(f, "TYPE z", "+zset\r\n");
    EXPECT(f, "HSET z f v", WT);
}

/* Physical records of the whole store (keys and field records). */
static uint64_t records(fixture *f, uint64_t *digest) {
    uint64_t x, k;
    assert_int_equal(store_range_digest(f->srv.st, 0, 16383, &x, &k), 0);
    if (digest) *digest = x;
    return k;
}

/* DEL of a 100,000-field hash removes only its metadata record (O(1), so it
 * returns at once); store_gc then deletes every field record through txn
 * deletes, which the digest and counts follow to zero. */
static void del_large_hash(void **state) {
    fixture *f = *state;
    char line[2048];
    for (int b = 0; b < 1000; b++) {
        int n = snprintf(line, sizeof line, "HSET big");
        for (int i = 0; i < 100; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, " f%d v", b * 100 + i);
        EXPECT(f, line, ":100\r\n");
    }
    EXPECT(f, "HLEN big", ":100000\r\n");
    EXPECT(f, "DBSIZE", ":1\r\n");
    assert_int_equal(records(f, NULL), 100001);
    uint64_t t0 = keel_mono_us();
    EXPECT(f, "DEL big", ":1\r\n");
    uint64_t us = keel_mono_us() - t0;
    assert_true(us < 50000); /* one record, not 100,001 */
    EXPECT(f, "DBSIZE", ":0\r\n");
    EXPECT(f, "HLEN big", ":0\r\n");
    EXPECT(f, "HSET big f1 new", ":1\r\n"); /* a new version: the old fields are gone */
    EXPECT(f, "HGETALL big", "*2\r\n$2\r\nf1\r\n$3\r\nnew\r\n");
    assert_true(store_gc_pending(f->srv.st) > 0);
    long total = 0;
    for (int i = 0; i < 1000 && store_gc_pending(f->srv.st); i++) {
        long n = store_gc(f->srv.st, keel_wall_ms(), 2000);
        assert_true(n >= 0);
        total += n;
    }
    assert_int_equal(total, 100000);
    assert_int_equal(store_gc_pending(f->srv.st), 0);
    assert_int_equal(records(f, NULL), 2); /* the new metadata and its field */
    EXPECT(f, "DEL big", ":1\r\n");
    while (store_gc_pending(f->srv.st))
        assert_true(store_gc(f->srv.st, keel_wall_ms(), 2000) >= 0);
    uint64_t dg;
    assert_int_equal(records(f, &dg), 0);
    assert_int_equal(dg, 0);
}

/* Field records of an expired hash are orphans too; statistics survive a
 * clean restart (field records are not keys). */
static void expired_and_restart(void **state) {
    fixture *f = *state;
    EXPECT(f, "HSET h a 1 b 2", ":2\r\n");
    EXPECT(f, "SADD s x y z", ":3\r\n");
    EXPECT(f, "DBSIZE", ":2\r\n");
    store_free(f->srv.st);
    cmdfix_open_store(f);
    EXPECT(f, "DBSIZE", ":2\r\n");
    EXPECT(f, "HGET h b", "$1\r\n2\r\n");
    assert_int_equal(records(f, NULL), 7);
    EXPECT(f, "PEXPIRE h 1", ":1\r\n");
    usleep(5000);
    EXPECT(f, "HGET h a", "$-1\r\n");
    assert_int_equal(store_sweep_expired(f->srv.st, keel_wall_ms(), 100), 1);
    while (store_gc_pending(f->srv.st))
        assert_true(store_gc(f->srv.st, keel_wall_ms(), 100) >= 0);
    assert_int_equal(records(f, NULL), 4); /* the set alone */
}

/* A store written by format 1 (untagged keys) is upgraded at open; a
 * format this build does not know is refused. */
static void format_upgrade(void **state) {
    fixture *f = *state;
    unsigned slot = keel_key_slot("old", 3);
    store_txn *t = store_txn_begin(f->srv.st);
    assert_int_equal(store_txn_put(t, slot, "old", 3, STORE_T_STRING, 0, "v1", 2), 0);
    assert_int_equal(store_txn_commit(t), 0);
    store_free(f->srv.st);
    /* Make it look like format 1: no format record. */
    rocksdb_options_t *o = rocksdb_options_create();
    const char *names[2] = {"default", "meta"};
    const rocksdb_options_t *cfo[2] = {o, o};
    rocksdb_column_family_handle_t *h[2];
    char *err = NULL;
    rocksdb_t *db = rocksdb_open_column_families(o, f->dir, 2, names, cfo, h, &err);
    assert_null(err);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    rocksdb_delete_cf(db, wo, h[1], "c/format", 8, &err);
    assert_null(err);
    rocksdb_column_family_handle_destroy(h[0]);
    rocksdb_column_family_handle_destroy(h[1]);
    rocksdb_close(db);
    cmdfix_open_store(f);
    EXPECT(f, "GET old", "$2\r\nv1\r\n");
    EXPECT(f, "DBSIZE", ":1\r\n");
    store_free(f->srv.st);
    f->srv.st = NULL;
    /* A later format. */
    db = rocksdb_open_column_families(o, f->dir, 2, names, cfo, h, &err);
    assert_null(err);
    rocksdb_put_cf(db, wo, h[1], "c/format", 8, "9", 1, &err);
    assert_null(err);
    rocksdb_column_family_handle_destroy(h[0]);
    rocksdb_column_family_handle_destroy(h[1]);
    rocksdb_close(db);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_options_destroy(o);
    store_opts so;
    store_opts_default(&so);
    char msg[256];
    assert_int_equal(store_open(f->dir, &so, &f->srv.st, msg, sizeof msg), KEEL_ECORRUPT);
    assert_non_null(strstr(msg, "data format"));
    assert_null(f->srv.st); /* teardown's store_free(NULL) is a no-op */
}

/* SCAN visits every key exactly once, whatever COUNT. */
static void scan_complete(void **state) {
    fixture *f = *state;
    char line[64];
    for (int i = 0; i < 500; i++) {
        snprintf(line, sizeof line, "SET key:%d v", i);
        run(f, line);
    }
    int seen[500] = {0};
    unsigned long long cur = 0;
    int calls = 0;
    do {
        snprintf(line, sizeof line, "SCAN %llu COUNT 7", cur);
        const char *r = run(f, line);
        assert_int_equal(sscanf(r, "*2\r\n$%*d\r\n%llu\r\n", &cur), 1);
        for (const char *p = strstr(r, "key:"); p; p = strstr(p + 1, "key:"))
            seen[atoi(p + 4)]++;
        calls++;
    } while (cur != 0 && calls < 10000);
    for (int i = 0; i < 500; i++)
        assert_int_equal(seen[i], 1);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(hash_basic),     T(set_basic),           T(keyspace),       T(strings_more),
        T(del_large_hash), T(expired_and_restart), T(format_upgrade), T(scan_complete),
        T(list_basic),     T(zset_basic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
