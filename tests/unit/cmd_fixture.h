/* cmd_fixture.h - a node's command layer on a real store, without sockets,
 * for the unit tests that drive handlers through cmd_dispatch (test-cmd,
 * test-types, test-zset).
 *
 * cmdfix_new makes a fresh RocksDB store in a temporary directory (fsync
 * off), a 16-partition table owned by "self" (with other_node, partition 0,
 * slots 0-1023, belongs to "other" at 127.0.0.2:7002, for -MOVED cases) and
 * one authenticated RESP2 client. cmdfix_run splits a line at spaces, runs
 * it as one request and returns the reply text (valid until the next run);
 * with f->sync_each the turn is synced after each command, as the server
 * does. cmdfix_free frees everything and removes the directory.
 *
 * Included by one test file each: everything here is static. */
#ifndef KEEL_TESTS_CMD_FIXTURE_H
#define KEEL_TESTS_CMD_FIXTURE_H

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
#include "node/multi.h"
#include "node/server.h"

typedef struct cmdfix {
    char dir[64];
    server srv;
    client c;
    int sync_each;
    char reply[1 << 16];
} cmdfix;

static void cmdfix_open_store(cmdfix *f) {
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    char err[256];
    int rc = store_open(f->dir, &o, &f->srv.st, err, sizeof err);
    if (rc) fprintf(stderr, "store_open: %s\n", err);
    assert_int_equal(rc, 0);
}

static cmdfix *cmdfix_new(const char *name, int other_node) {
    cmdfix *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/keel-test-%s-XXXXXX", name);
    assert_non_null(mkdtemp(f->dir));
    node_config_default(&f->srv.cfg);
    cmdfix_open_store(f);
    f->srv.pt = ptable_new(16, "self");
    f->srv.mx = metrics_new(16);
    keel_map m;
    assert_int_equal(keel_map_init(&m, 16), 0);
    keel_map_add_node(&m, "self", "127.0.0.1", 7000);
    if (other_node) keel_map_add_node(&m, "other", "127.0.0.2", 7002);
    for (unsigned p = 0; p < 16; p++)
        m.owner[p] = other_node && p == 0 ? 1 : 0;
    m.version = 1;
    assert_int_equal(ptable_apply_map(f->srv.pt, &m), 0);
    f->c.proto = 2;
    f->c.authed = 1;
    f->c.id = 7;
    kbuf_init(&f->c.out);
    return f;
}

static void cmdfix_free(cmdfix *f) {
    multi_conn_closed(&f->srv, &f->c);
    free(f->c.user);
    multi_server_free(&f->srv);
    server_cmd_state_free(&f->srv);
    store_free(f->srv.st);
    ptable_free(f->srv.pt);
    metrics_free(f->srv.mx);
    kbuf_close(&f->c.out);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
}

static const char *cmdfix_run(cmdfix *f, const char *line) {
    char *argv[256], buf[4096];
    size_t lens[256];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *tok = strtok(buf, " "); tok && argc < 256; tok = strtok(NULL, " ")) {
        argv[argc] = tok;
        lens[argc++] = strlen(tok);
    }
    f->c.out.len = 0;
    cmd_dispatch(&f->srv, &f->c, argc, argv, lens);
    if (f->sync_each) assert_int_equal(store_sync(f->srv.st, NULL), 0);
    snprintf(f->reply, sizeof f->reply, "%.*s", (int)f->c.out.len, f->c.out.p ? f->c.out.p : "");
    return f->reply;
}

#define EXPECT(f, line, want) assert_string_equal(cmdfix_run(f, line), want)

#endif
