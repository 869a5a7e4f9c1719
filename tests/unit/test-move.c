/* test-move.c - the node's KEEL.* peer commands (src/node/move.c) driven
 * through move_dispatch on a real store, without sockets: argument counts
 * and number parsing of peer input (issue 10, defect 2). The connection is
 * marked authenticated by setting its proven peer id, as the KEEL.AUTH
 * handshake would; directives reach the handlers through a coordinator
 * link that is started but never runs (its loop is not run), so only its
 * directive guard is used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/cmd.h"
#include "node/coordlink.h"
#include "node/move.h"
#include "core/failpoint.h"

typedef struct fixture {
    char dir[64];
    uv_loop_t loop;
    server srv;
    client c;
} fixture;

static void no_map(void *arg, const char *json, size_t len, uint64_t term, uint64_t seq) {}
static void no_metrics(void *arg, kbuf *out) {}
static uint64_t map_version(void *arg) {
    return 1;
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/keel-test-move-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->srv.loop = &f->loop;
    node_config_default(&f->srv.cfg);
    snprintf(f->srv.cfg.id, sizeof f->srv.cfg.id, "self");
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    char err[256];
    assert_int_equal(store_open(f->dir, &o, &f->srv.st, err, sizeof err), 0);
    f->srv.pt = ptable_new(16, "self");
    f->srv.mx = metrics_new(16);
    keel_map m;
    assert_int_equal(keel_map_init(&m, 16), 0);
    keel_map_add_node(&m, "self", "127.0.0.1", 7000);
    keel_map_add_node(&m, "n2", "127.0.0.2", 7002);
    for (unsigned p = 0; p < 16; p++)
        m.owner[p] = p < 8 ? 0 : 1;
    m.version = 1;
    assert_int_equal(ptable_apply_map(f->srv.pt, &m), 0);
    peerauth_secret sec;
    memset(&sec, 7, sizeof sec);
    coordlink_config cc = {.host = "127.0.0.1",
                           .port = 1,
                           .self_id = "self",
                           .adv_host = "127.0.0.1",
                           .adv_port = 7000,
                           .rack = ""};
    coordlink_cbs cbs = {no_map, no_metrics, map_version};
    f->srv.link = coordlink_start(&f->loop, &cc, &sec, &cbs, f);
    assert_non_null(f->srv.link);
    f->srv.mv = moves_new(&f->srv, &sec, 2000);
    assert_non_null(f->srv.mv);
    f->c.proto = 2;
    f->c.authed = 1;
    snprintf(f->c.addr, sizeof f->c.addr, "127.0.0.9:1");
    kbuf_init(&f->c.out);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    move_conn_closed(f->srv.mv, &f->c);
    moves_free(f->srv.mv);
    coordlink_stop(f->srv.link, 0);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    store_free(f->srv.st);
    ptable_free(f->srv.pt);
    metrics_free(f->srv.mx);
    kbuf_close(&f->c.out);
    uv_loop_close(&f->loop);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Marks the connection as authenticated as peer. */
static void as_peer(fixture *f, const char *peer) {
    node_conn *nc = node_conn_of(&f->c);
    assert_non_null(nc);
    snprintf(nc->peer.peer_id, sizeof nc->peer.peer_id, "%s", peer);
}

/* Runs argv[0..argc) (argv has one poisoned slot after the last, as a
 * server's buffer may: reading it is the bug); returns the reply. */
static const char *run(fixture *f, int argc, const char **args) {
    char *argv[16];
    size_t lens[16];
    assert_true(argc < 15);
    for (int i = 0; i < argc; i++) {
        argv[i] = (char *)args[i];
        lens[i] = strlen(args[i]);
    }
    argv[argc] = (char *)(uintptr_t)8; /* past argc: must never be read */
    lens[argc] = 1u << 30;
    f->c.out.len = 0;
    move_dispatch(f->srv.mv, &f->c, argc, argv, lens);
    static char reply[4096];
    snprintf(reply, sizeof reply, "%.*s", (int)f->c.out.len, f->c.out.p ? f->c.out.p : "");
    return reply;
}

#define RUN(f, ...)                                                                                \
    run(f, (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)),                    \
        (const char *[]){__VA_ARGS__})

/* Regression: a bare KEEL.MOVE.CHUNK from an authenticated peer read
 * argv[1] past argc (for its error message). Every KEEL.* command checks
 * its argument count first. */
static void test_bare_chunk_reads_past_argc(void **state) {
    fixture *f = *state;
    as_peer(f, "n2");
    assert_string_equal(RUN(f, "KEEL.MOVE.CHUNK"),
                        "-ERR wrong number of arguments for 'keel.move.chunk' command\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.CHANGES"),
                        "-ERR wrong number of arguments for 'keel.move.changes' command\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.CHUNK", "1"),
                        "-ERR wrong number of arguments for 'keel.move.chunk' command\r\n");
}

/* Every directive with too few or too many arguments is refused before its
 * handler runs, from the coordinator too. */
static void test_directive_arg_counts(void **state) {
    fixture *f = *state;
    as_peer(f, COORDINATOR_ID);
    const char *names[] = {"KEEL.MOVE.OUT",     "KEEL.MOVE.IN",     "KEEL.MOVE.FENCE",
                           "KEEL.MOVE.VERIFY",  "KEEL.MOVE.COMMIT", "KEEL.MOVE.ABORT",
                           "KEEL.MOVE.CLEANUP", "KEEL.MOVE.RATE"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *r = run(f, 1, &names[i]);
        assert_true(strncmp(r, "-ERR wrong number of arguments", 30) == 0);
        const char *two[] = {names[i], "1"};
        r = run(f, 2, two);
        assert_true(strncmp(r, "-ERR wrong number of arguments", 30) == 0);
        const char *many[] = {names[i], "1", "1", "1", "1", "1", "1", "1", "1", "1", "1"};
        r = run(f, 11, many);
        assert_true(strncmp(r, "-ERR wrong number of arguments", 30) == 0);
    }
    assert_true(strncmp(RUN(f, "KEEL.MOVE.STATE"), "-ERR wrong number", 17) == 0);
}

/* Regression: the node's u64 arguments went through strtoull, which took
 * "18446744073709551616" as UINT64_MAX, " 5" as 5 and "+5" as 5. */
static void test_directive_numbers_strict(void **state) {
    fixture *f = *state;
    as_peer(f, COORDINATOR_ID);
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "18446744073709551616", "0"),
                        "-ERR bad KEEL.MOVE.ABORT: term move partition\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", " 5", "0"),
                        "-ERR bad KEEL.MOVE.ABORT: term move partition\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "+5", "0"),
                        "-ERR bad KEEL.MOVE.ABORT: term move partition\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "5", "0x1"),
                        "-ERR bad KEEL.MOVE.ABORT: term move partition\r\n");
    assert_true(strncmp(RUN(f, "KEEL.MOVE.ABORT", "18446744073709551616", "5", "0"), "-ERR ", 5) ==
                0);
    /* Peer names in directives follow the id and host rules. */
    assert_string_equal(RUN(f, "KEEL.MOVE.OUT", "1", "5", "0", "1", "a\"b", "1000"),
                        "-ERR bad KEEL.MOVE.OUT: term move partition epoch destination rate\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.IN", "1", "5", "9", "1", "n2", "h\"x", "7002"),
                        "-ERR bad KEEL.MOVE.IN: term move partition epoch source host port "
                        "[fence-lag-bytes]\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.IN", "1", "5", "9", "1", "n2", "h", "70000"),
                        "-ERR bad KEEL.MOVE.IN: term move partition epoch source host port "
                        "[fence-lag-bytes]\r\n");
    /* The optional fence-lag-bytes (the coordinator's fence_lag_bytes) is a
     * strict number too. */
    assert_string_equal(RUN(f, "KEEL.MOVE.IN", "1", "5", "9", "1", "n2", "h", "7002", "1e6"),
                        "-ERR bad KEEL.MOVE.IN: term move partition epoch source host port "
                        "[fence-lag-bytes]\r\n");
    /* A well-formed one still goes through. */
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "5", "0"), "+OK\r\n");
}

/* Data requests name a move; an unknown one is an error, never a crash. */
static void test_data_request_unknown_move(void **state) {
    fixture *f = *state;
    as_peer(f, "n2");
    assert_string_equal(RUN(f, "KEEL.MOVE.CHUNK", "99", "", "1000"),
                        "-ERR no outgoing move 99 here\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.CHUNK", "-1", "", "1000"),
                        "-ERR no outgoing move -1 here\r\n");
}

/* Regression (issue 10, defect 5): a move record that could not be read or
 * parsed was taken as "no record", so KEEL.MOVE.STATE left a FENCED
 * partition out of its list (the coordinator reads that as a lost move) and
 * ABORT/CLEANUP acted as if nothing was recorded. It is an error now. */
static void test_state_load_error_is_not_no_record(void **state) {
    fixture *f = *state;
    as_peer(f, COORDINATOR_ID);
    assert_int_equal(store_meta_put(f->srv.st, "part/3", "FENCED x 1 -", 12), 0);
    ptable_set_state(f->srv.pt, 3, PART_FENCED);
    assert_string_equal(RUN(f, "KEEL.MOVE.STATE", "1"),
                        "-ERR cannot read the partition state: corrupt data\r\n");
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "5", "3"),
                        "-ERR cannot read the partition state: corrupt data\r\n");
    assert_int_equal(store_meta_put(f->srv.st, "part/3", "FENCED 5 1 n2", 13), 0);
    const char *r = RUN(f, "KEEL.MOVE.STATE", "1");
    assert_string_equal(r, "*1\r\n*4\r\n:3\r\n$6\r\nFENCED\r\n:5\r\n:0\r\n");
}

/* A move-state write that fails (store.meta_put) is an error reply, and the
 * partition keeps its state. */
static void test_abort_persist_failure_is_an_error(void **state) {
    fixture *f = *state;
    as_peer(f, COORDINATOR_ID);
    assert_int_equal(store_meta_put(f->srv.st, "part/2", "FENCED 6 1 n2", 13), 0);
    ptable_set_state(f->srv.pt, 2, PART_FENCED);
    assert_int_equal(failpoint_set("store.meta_put", "1*error", NULL, 0), 0);
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "6", "2"),
                        "-ERR cannot persist the partition state\r\n");
    failpoint_clear_all();
    assert_int_equal(ptable_state(f->srv.pt, 2), PART_FENCED);
    assert_string_equal(RUN(f, "KEEL.MOVE.ABORT", "1", "6", "2"), "+OK\r\n");
    assert_int_equal(ptable_state(f->srv.pt, 2), PART_SERVING);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_bare_chunk_reads_past_argc),        T(test_directive_arg_counts),
        T(test_directive_numbers_strict),          T(test_data_request_unknown_move),
        T(test_state_load_error_is_not_no_record), T(test_abort_persist_failure_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
