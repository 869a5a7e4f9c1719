/* test-cmd.c - command handlers driven through cmd_dispatch on a real store,
 * without sockets, so the ASan/UBSan build covers every handler. Replies are
 * compared byte for byte (the texts come from redis-server 7.0; the
 * integration test test_compat diffs against a live one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crc16.h"
#include "node/access.h"
#include "node/cmd.h"
#include "node/cmdstats.h"
#include "node/introspect.h"
#include "node/multi.h"

#include "cmd_fixture.h"

typedef cmdfix fixture;

static int setup(void **state) {
    cmdfix *f = cmdfix_new("cmd", 1);
    f->sync_each = 0;
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

/* GET/SET/DEL/EXISTS basics. */
static void strings_basic(void **state) {
    fixture *f = *state;
    EXPECT(f, "GET k", "$-1\r\n");
    EXPECT(f, "SET k hello", "+OK\r\n");
    EXPECT(f, "GET k", "$5\r\nhello\r\n");
    EXPECT(f, "STRLEN k", ":5\r\n");
    EXPECT(f, "APPEND k !!", ":7\r\n");
    EXPECT(f, "EXISTS k k", ":2\r\n");
    EXPECT(f, "DEL k", ":1\r\n");
    EXPECT(f, "DEL k", ":0\r\n");
    EXPECT(f, "DBSIZE", ":0\r\n");
}

/* SET's NX/XX/GET/KEEPTTL options and their conflicts. */
static void set_options(void **state) {
    fixture *f = *state;
    EXPECT(f, "SET k v XX", "$-1\r\n");
    EXPECT(f, "SET k v NX", "+OK\r\n");
    EXPECT(f, "SET k w NX", "$-1\r\n");
    EXPECT(f, "SET k w NX GET", "$1\r\nv\r\n");
    EXPECT(f, "SET k w GET", "$1\r\nv\r\n");
    EXPECT(f, "SET k v NX XX", "-ERR syntax error\r\n");
    EXPECT(f, "SET k v EX 10 PX 10", "-ERR syntax error\r\n");
    EXPECT(f, "SET k v EX", "-ERR syntax error\r\n");
    EXPECT(f, "SET k v EX 10 EX 20", "+OK\r\n"); /* last wins */
    EXPECT(f, "TTL k", ":20\r\n");
    EXPECT(f, "SET k v EX 0", "-ERR invalid expire time in 'set' command\r\n");
    EXPECT(f, "SET k v EX abc", "-ERR value is not an integer or out of range\r\n");
    EXPECT(f, "SET k v PX 9223372036854775807", "-ERR invalid expire time in 'set' command\r\n");
    EXPECT(f, "SET k v EX 100", "+OK\r\n");
    EXPECT(f, "TTL k", ":100\r\n");
    EXPECT(f, "SET k v2 KEEPTTL", "+OK\r\n");
    EXPECT(f, "TTL k", ":100\r\n");
    EXPECT(f, "SET k v3", "+OK\r\n");
    EXPECT(f, "TTL k", ":-1\r\n");
    EXPECT(f, "SET k v EXAT 1", "+OK\r\n"); /* in the past: the key is gone */
    EXPECT(f, "EXISTS k", ":0\r\n");
}

/* Counters: parsing, overflow and the errors redis gives. */
static void counters(void **state) {
    fixture *f = *state;
    EXPECT(f, "INCR n", ":1\r\n");
    EXPECT(f, "INCRBY n 41", ":42\r\n");
    EXPECT(f, "DECR n", ":41\r\n");
    EXPECT(f, "DECRBY n 50", ":-9\r\n");
    EXPECT(f, "INCRBY n x", "-ERR value is not an integer or out of range\r\n");
    EXPECT(f, "DECRBY n -9223372036854775808", "-ERR decrement would overflow\r\n");
    EXPECT(f, "SET n 9223372036854775807", "+OK\r\n");
    EXPECT(f, "INCR n", "-ERR increment or decrement would overflow\r\n");
    EXPECT(f, "SET n 012", "+OK\r\n");
    EXPECT(f, "INCR n", "-ERR value is not an integer or out of range\r\n");
    EXPECT(f, "SET n abc", "+OK\r\n");
    EXPECT(f, "INCR n", "-ERR value is not an integer or out of range\r\n");
}

/* EXPIRE options, TTL/PTTL and PERSIST. */
static void expiry(void **state) {
    fixture *f = *state;
    EXPECT(f, "TTL k", ":-2\r\n");
    EXPECT(f, "EXPIRE k 10", ":0\r\n");
    EXPECT(f, "SET k v", "+OK\r\n");
    EXPECT(f, "EXPIRE k 10 XX", ":0\r\n");
    EXPECT(f, "EXPIRE k 10 NX", ":1\r\n");
    EXPECT(f, "EXPIRE k 20 NX", ":0\r\n");
    EXPECT(f, "EXPIRE k 5 GT", ":0\r\n");
    EXPECT(f, "EXPIRE k 50 GT", ":1\r\n");
    EXPECT(f, "EXPIRE k 60 LT", ":0\r\n");
    EXPECT(f, "TTL k", ":50\r\n");
    EXPECT(f, "EXPIRE k 1 NX XX",
           "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n");
    EXPECT(f, "EXPIRE k 1 GT LT", "-ERR GT and LT options at the same time are not compatible\r\n");
    EXPECT(f, "EXPIRE k 1 FOO", "-ERR Unsupported option FOO\r\n");
    EXPECT(f, "EXPIRE k 9223372036854775807", "-ERR invalid expire time in 'expire' command\r\n");
    EXPECT(f, "PERSIST k", ":1\r\n");
    EXPECT(f, "PERSIST k", ":0\r\n");
    EXPECT(f, "PTTL k", ":-1\r\n");
    EXPECT(f, "PEXPIRE k -1", ":1\r\n"); /* in the past: deleted */
    EXPECT(f, "GET k", "$-1\r\n");
}

/* GETSET, GETDEL, SETNX, MGET, MSET. */
static void multi_and_swap(void **state) {
    fixture *f = *state;
    EXPECT(f, "SETNX a 1", ":1\r\n");
    EXPECT(f, "SETNX a 2", ":0\r\n");
    EXPECT(f, "GETSET a 3", "$1\r\n1\r\n");
    EXPECT(f, "GETDEL a", "$1\r\n3\r\n");
    EXPECT(f, "GETDEL a", "$-1\r\n");
    EXPECT(f, "MSET {t}a 1 {t}b 2", "+OK\r\n");
    EXPECT(f, "MGET {t}a {t}b {t}c", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n");
    EXPECT(f, "MSET {t}a 1 {t}b", "-ERR wrong number of arguments for 'mset' command\r\n");
    EXPECT(f, "MSET a 1 b 2", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "DEL {t}a {t}b {t}c", ":2\r\n");
}

/* Dispatch errors: unknown command, arity, subcommands, routing. */
static void dispatch_errors(void **state) {
    fixture *f = *state;
    EXPECT(f, "FOO a b", "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n");
    EXPECT(f, "GET", "-ERR wrong number of arguments for 'get' command\r\n");
    EXPECT(f, "GET a b", "-ERR wrong number of arguments for 'get' command\r\n");
    EXPECT(f, "CLUSTER", "-ERR wrong number of arguments for 'cluster' command\r\n");
    EXPECT(f, "CLUSTER KEYSLOT",
           "-ERR wrong number of arguments for 'cluster|keyslot' command\r\n");
    EXPECT(f, "cluster foo", "-ERR unknown subcommand 'foo'. Try CLUSTER HELP.\r\n");
    EXPECT(f, "SELECT 1", "-ERR SELECT is not allowed in cluster mode\r\n");
    EXPECT(f, "KEEL.MAP x",
           "-NOPERM this command needs an authenticated cluster peer (KEEL.AUTH)\r\n");
    EXPECT(f, "SELECT x", "-ERR value is not an integer or out of range\r\n");
    EXPECT(f, "SELECT 0", "+OK\r\n");
    /* "foo" is slot 12182, partition 11: ours. Find a key in partition 0. */
    EXPECT(f, "GET foo", "$-1\r\n");
    char line[64], want[128];
    int i = 0;
    while (keel_key_slot(line, (size_t)snprintf(line, sizeof line, "k%d", i)) >= 1024)
        i++;
    snprintf(line, sizeof line, "GET k%d", i);
    char key[32];
    snprintf(key, sizeof key, "k%d", i);
    snprintf(want, sizeof want, "-MOVED %u 127.0.0.2:7002\r\n", keel_key_slot(key, strlen(key)));
    EXPECT(f, line, want);
}

/* AUTH and NOAUTH with --requirepass. */
static void auth(void **state) {
    fixture *f = *state;
    EXPECT(f, "AUTH x",
           "-ERR AUTH <password> called without any password configured for the default user. Are "
           "you sure your configuration is correct?\r\n");
    EXPECT(f, "AUTH someuser pw",
           "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    snprintf(f->srv.cfg.requirepass, sizeof f->srv.cfg.requirepass, "secret");
    f->c.authed = 0;
    EXPECT(f, "GET k", "-NOAUTH Authentication required.\r\n");
    EXPECT(f, "AUTH wrong", "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    EXPECT(f, "AUTH default secret", "+OK\r\n");
    EXPECT(f, "GET k", "$-1\r\n");
}

/* A value of another type is refused with WRONGTYPE by string commands. */
static void wrongtype(void **state) {
    fixture *f = *state;
    unsigned slot = keel_key_slot("h", 1);
    store_txn *t = store_txn_begin(f->srv.st);
    /* the record key of user key "h" is [0x00]"h" (store.h, data model) */
    assert_int_equal(store_txn_put(t, slot, "\0h", 2, 7 /* not a string */, 0, "x", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    const char *wt = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    EXPECT(f, "GET h", wt);
    EXPECT(f, "INCR h", wt);
    EXPECT(f, "APPEND h x", wt);
    EXPECT(f, "SET h v GET", wt);
    EXPECT(f, "MGET h", "*1\r\n$-1\r\n");
    EXPECT(f, "SET h v", "+OK\r\n"); /* plain SET overwrites any type */
    EXPECT(f, "GET h", "$1\r\nv\r\n");
}

/* RESP3 after HELLO 3: nulls and maps change shape. */
static void resp3(void **state) {
    fixture *f = *state;
    const char *r = run(f, "HELLO 3");
    assert_memory_equal(r, "%7\r\n", 4);
    assert_int_equal(f->c.proto, 3);
    EXPECT(f, "GET missing", "_\r\n");
    EXPECT(f, "HELLO 4", "-NOPROTO unsupported protocol version\r\n");
}

/* CLUSTER views merge adjacent partitions into ranges. */
static void cluster_views(void **state) {
    fixture *f = *state;
    const char *r = run(f, "CLUSTER NODES");
    assert_non_null(
        strstr(r, "self 127.0.0.1:7000@17000 myself,master - 0 0 0 connected 1024-16383"));
    assert_non_null(strstr(r, "other 127.0.0.2:7002@17002 master - 0 0 0 connected 0-1023"));
    r = run(f, "CLUSTER SLOTS");
    assert_memory_equal(r, "*2\r\n*3\r\n:0\r\n:1023\r\n", 19);
    EXPECT(f, "CLUSTER KEYSLOT foo", ":12182\r\n");
    EXPECT(f, "CLUSTER MYID", "$4\r\nself\r\n");
    EXPECT(f, "SET {x}1 a", "+OK\r\n");
    EXPECT(f, "SET {x}2 b", "+OK\r\n");
    char line[64], want[64];
    snprintf(line, sizeof line, "CLUSTER COUNTKEYSINSLOT %u", keel_key_slot("x", 1));
    EXPECT(f, line, ":2\r\n");
    snprintf(line, sizeof line, "CLUSTER GETKEYSINSLOT %u 1", keel_key_slot("x", 1));
    snprintf(want, sizeof want, "*1\r\n$4\r\n{x}1\r\n");
    EXPECT(f, line, want);
    EXPECT(f, "CLUSTER COUNTKEYSINSLOT 16384", "-ERR Invalid slot\r\n");
    EXPECT(f, "CLUSTER GETKEYSINSLOT 0 -1", "-ERR Invalid slot or number of keys\r\n");
    EXPECT(f, "CLUSTER GETKEYSINSLOT 0 abc", "-ERR value is not an integer or out of range\r\n");
}

/* COMMAND reports arity and key positions for cluster clients. */
static void command_info(void **state) {
    fixture *f = *state;
    const char *r = run(f, "COMMAND INFO mset");
    assert_memory_equal(r, "*1\r\n*10\r\n$4\r\nmset\r\n:-3\r\n", 24);
    assert_non_null(strstr(r, ":1\r\n:-1\r\n:2\r\n"));
    r = run(f, "COMMAND INFO nosuch");
    EXPECT(f, "COMMAND INFO nosuch", "*1\r\n$-1\r\n");
    EXPECT(f, "COMMAND GETKEYS mset a 1 b 2", "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
}

/* Runs line as client c (a second connection of the same node). */
static const char *run_as(fixture *f, client *c, const char *line) {
    client save = f->c;
    f->c = *c;
    const char *r = run(f, line);
    *c = f->c;
    f->c = save;
    return r;
}

/* A key of the given tag-free prefix whose slot is in [lo, hi]. */
static void key_in(char *out, size_t cap, const char *prefix, unsigned lo, unsigned hi) {
    for (int i = 0;; i++) {
        snprintf(out, cap, "%s%d", prefix, i);
        unsigned s = keel_key_slot(out, strlen(out));
        if (s >= lo && s <= hi) return;
    }
}

/* MULTI/EXEC/DISCARD: queueing, the array of replies, errors inside. */
static void multi_exec_basic(void **state) {
    fixture *f = *state;
    EXPECT(f, "EXEC", "-ERR EXEC without MULTI\r\n");
    EXPECT(f, "DISCARD", "-ERR DISCARD without MULTI\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "MULTI", "-ERR MULTI calls can not be nested\r\n");
    EXPECT(f, "SET {t}a 1", "+QUEUED\r\n");
    EXPECT(f, "INCR {t}a", "+QUEUED\r\n");
    EXPECT(f, "LPUSH {t}a x", "+QUEUED\r\n");
    EXPECT(f, "GET {t}a", "+QUEUED\r\n");
    EXPECT(f, "PING", "+QUEUED\r\n");
    EXPECT(f, "WATCH {t}a", "-ERR WATCH inside MULTI is not allowed\r\n");
    EXPECT(f, "EXEC",
           "*5\r\n+OK\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of "
           "value\r\n$1\r\n2\r\n+PONG\r\n");
    EXPECT(f, "EXEC", "-ERR EXEC without MULTI\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC", "*0\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "SET {t}a 9", "+QUEUED\r\n");
    EXPECT(f, "DISCARD", "+OK\r\n");
    EXPECT(f, "GET {t}a", "$1\r\n2\r\n");
    f->c.proto = 3;
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "GET nosuch", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "*1\r\n_\r\n");
}

/* Queue-time refusals flag the transaction: EXEC answers -EXECABORT. */
static void multi_execabort(void **state) {
    fixture *f = *state;
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "SET {t}a 1", "+QUEUED\r\n");
    EXPECT(f, "NOSUCH x", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n");
    EXPECT(f, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
    EXPECT(f, "EXISTS {t}a", ":0\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "GET", "-ERR wrong number of arguments for 'get' command\r\n");
    EXPECT(f, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "MSET a 1 b 2", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC x",
           "-EXECABORT Transaction discarded because of: wrong number of arguments "
           "for 'exec' command\r\n");
    EXPECT(f, "EXEC", "-ERR EXEC without MULTI\r\n");
    /* -MOVED at queue time: slots 0-1023 are served elsewhere. */
    char k[32], line[64];
    key_in(k, sizeof k, "m", 0, 1023);
    EXPECT(f, "MULTI", "+OK\r\n");
    snprintf(line, sizeof line, "SET %s 1", k);
    const char *r = run(f, line);
    assert_memory_equal(r, "-MOVED ", 7);
    EXPECT(f, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
    /* Commands each in one slot but in two together: -CROSSSLOT at EXEC. */
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "SET {a}x 1", "+QUEUED\r\n");
    EXPECT(f, "SET {b}x 1", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "EXEC", "-ERR EXEC without MULTI\r\n");
    EXPECT(f, "EXISTS {a}x", ":0\r\n");
    EXPECT(f, "WATCH a b", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
}

/* WATCH: a write by another client, or by the same one, a DEL, an expiry,
 * fails EXEC with a null array; UNWATCH, EXEC and DISCARD forget. */
static void watch_cas(void **state) {
    fixture *f = *state;
    client c2 = {.proto = 2, .authed = 1, .id = 8};
    kbuf_init(&c2.out);
    EXPECT(f, "SET {t}a 1", "+OK\r\n");
    EXPECT(f, "WATCH {t}a {t}b", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "SET {t}a 2"), "+OK\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "INCR {t}a", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "*-1\r\n");
    EXPECT(f, "GET {t}a", "$1\r\n2\r\n");
    /* EXEC forgot the watch: the next one runs. */
    assert_string_equal(run_as(f, &c2, "SET {t}a 3"), "+OK\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "INCR {t}a", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "*1\r\n:4\r\n");
    /* Untouched watches let EXEC run; a write to another key does not count. */
    EXPECT(f, "WATCH {t}a {t}nosuch", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "SET {t}other 1"), "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "DEL {t}nosuch"), ":0\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "GET {t}a", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "*1\r\n$1\r\n4\r\n");
    /* UNWATCH forgets. */
    EXPECT(f, "WATCH {t}a", "+OK\r\n");
    EXPECT(f, "UNWATCH", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "SET {t}a 5"), "+OK\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "GET {t}a", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "*1\r\n$1\r\n5\r\n");
    /* DISCARD forgets too. */
    EXPECT(f, "WATCH {t}a", "+OK\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "DISCARD", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "SET {t}a 6"), "+OK\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC", "*0\r\n");
    /* A DEL by another client, a hash field, the client's own write. */
    EXPECT(f, "WATCH {t}a", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "DEL {t}a"), ":1\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC", "*-1\r\n");
    EXPECT(f, "HSET {t}h f 1", ":1\r\n");
    EXPECT(f, "WATCH {t}h", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "HSET {t}h f 2"), ":0\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC", "*-1\r\n");
    EXPECT(f, "WATCH {t}a", "+OK\r\n");
    EXPECT(f, "SET {t}a 7", "+OK\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC", "*-1\r\n");
    /* No change, no abort: SREM of no member, SMOVE of a member dst has
     * (redis' "SMOVE only notify dstset when the addition is successful"). */
    EXPECT(f, "SADD {t}src a b", ":2\r\n");
    EXPECT(f, "SADD {t}dst a", ":1\r\n");
    EXPECT(f, "WATCH {t}dst", "+OK\r\n");
    assert_string_equal(run_as(f, &c2, "SREM {t}dst zz"), ":0\r\n");
    assert_string_equal(run_as(f, &c2, "SMOVE {t}src {t}dst a"), ":1\r\n");
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "SADD {t}dst c", "+QUEUED\r\n");
    EXPECT(f, "EXEC", "*1\r\n:1\r\n");
    EXPECT(f, "SCARD {t}dst", ":2\r\n");
    /* Expiry: live at WATCH, gone at EXEC. */
    EXPECT(f, "SET {t}e v PX 20", "+OK\r\n");
    EXPECT(f, "WATCH {t}e", "+OK\r\n");
    usleep(40000);
    f->c.last_ms = 0;
    EXPECT(f, "MULTI", "+OK\r\n");
    EXPECT(f, "EXEC", "*-1\r\n");
    /* A second client's watches go with it. */
    assert_string_equal(run_as(f, &c2, "WATCH {t}a"), "+OK\r\n");
    multi_conn_closed(&f->srv, &c2);
    free(c2.user);
    kbuf_close(&c2.out);
}

/* SORT, DUMP/RESTORE and OBJECT's clock through dispatch (keys tagged {k},
 * a slot this node serves). */
static void sort_dump_object(void **state) {
    fixture *f = *state;
    EXPECT(f, "RPUSH {k}l 3 1 2", ":3\r\n");
    EXPECT(f, "SORT {k}l", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    EXPECT(f, "SORT {k}l DESC LIMIT 0 2", "*2\r\n$1\r\n3\r\n$1\r\n2\r\n");
    EXPECT(f, "SORT {k}l BY nosort", "*3\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n");
    EXPECT(f, "SORT {k}l STORE {k}d", ":3\r\n");
    EXPECT(f, "LRANGE {k}d 0 -1", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    EXPECT(f, "SORT {k}l STORE k2", "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    EXPECT(f, "SORT_RO {k}l STORE {k}d", "-ERR syntax error\r\n");
    EXPECT(f, "MSET {k}w_1 30 {k}w_2 10 {k}w_3 20", "+OK\r\n");
    EXPECT(f, "SORT {k}l BY {k}w_* GET #", "*3\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n");
    EXPECT(f, "SORT {k}l BY w_*",
           "-ERR BY option of SORT denied in Cluster mode unless the pattern starts with a hash "
           "tag of the sorted key's slot\r\n");
    EXPECT(f, "SADD {k}s b a x", ":3\r\n");
    EXPECT(f, "SORT {k}s", "-ERR One or more scores can't be converted into double\r\n");
    EXPECT(f, "SORT {k}s ALPHA DESC", "*3\r\n$1\r\nx\r\n$1\r\nb\r\n$1\r\na\r\n");
    EXPECT(f, "SET {k}str v", "+OK\r\n");
    EXPECT(f, "SORT {k}str",
           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");

    /* DUMP a list, RESTORE it elsewhere: the payload is binary, so dispatch it directly */
    (void)run(f, "DUMP {k}l"); /* binary: read f->c.out, not run's C string */
    const char *r = f->c.out.p;
    assert_int_equal(r[0], '$');
    char *end;
    long n = strtol(r + 1, &end, 10);
    assert_true(n > 10 && end[0] == '\r');
    char payload[256];
    assert_true((size_t)n < sizeof payload);
    memcpy(payload, end + 2, (size_t)n);
    char *argv[4] = {"RESTORE", "{k}r", "0", payload};
    size_t lens[4] = {7, 4, 1, (size_t)n};
    f->c.out.len = 0;
    cmd_dispatch(&f->srv, &f->c, 4, argv, lens);
    assert_int_equal(f->c.out.len, 5);
    assert_memory_equal(f->c.out.p, "+OK\r\n", 5);
    EXPECT(f, "LRANGE {k}r 0 -1", "*3\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n");
    f->c.out.len = 0;
    cmd_dispatch(&f->srv, &f->c, 4, argv, lens);
    EXPECT(f, "PING", "+PONG\r\n");
    payload[n - 1] ^= 1; /* the CRC's last byte */
    argv[1] = "{k}r2";
    lens[1] = 5;
    f->c.out.len = 0;
    cmd_dispatch(&f->srv, &f->c, 4, argv, lens);
    const char *want = "-ERR DUMP payload version or checksum are wrong\r\n";
    assert_int_equal(f->c.out.len, strlen(want));
    assert_memory_equal(f->c.out.p, want, strlen(want));
    EXPECT(f, "RESTORE {k}l 0 xxxxxxxxxxxx", "-BUSYKEY Target key name already exists.\r\n");
    EXPECT(f, "DUMP {k}nosuch", "$-1\r\n");

    EXPECT(f, "OBJECT IDLETIME {k}l", ":0\r\n");
    EXPECT(f, "OBJECT IDLETIME {k}nosuch", "$-1\r\n");
    EXPECT(f, "OBJECT FREQ {k}l",
           "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please "
           "note that when switching between policies at runtime LRU and LFU data will take "
           "some time to adjust.\r\n");
    EXPECT(f, "CONFIG SET maxmemory-policy allkeys-lfu", "+OK\r\n");
    EXPECT(f, "OBJECT FREQ {k}w_1", ":5\r\n");
    EXPECT(f, "CONFIG SET maxmemory-policy noeviction", "+OK\r\n");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(strings_basic),   T(set_options),     T(counters),     T(expiry),
        T(multi_and_swap),  T(dispatch_errors), T(auth),         T(wrongtype),
        T(resp3),           T(cluster_views),   T(command_info), T(multi_exec_basic),
        T(multi_execabort), T(watch_cas),       T(sort_dump_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
