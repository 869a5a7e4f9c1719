/* test-walsync.c - the node's off-loop WAL fsync (node/walsync.h) on a real
 * store and a real libuv loop: a request is answered after the fsync, never
 * inside walsync_request; requests made while one is in flight get the next
 * fsync; one fsync answers every request waiting for it; nothing to sync is
 * answered too; a cancelled request is never answered; free joins the
 * worker with an fsync in flight. "Durable" is checked through the store:
 * after the answer, store_wal_sync_begin finds nothing unsynced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/walsync.h"

typedef struct fixture {
    char dir[64];
    uv_loop_t loop;
    store *st;
    walsync *w;
    int answers[4], rcs[4], inside;
} fixture;

static fixture *F;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/keel-test-walsync-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    char err[256];
    assert_int_equal(store_open(f->dir, &o, &f->st, err, sizeof err), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_non_null(f->w = walsync_new(&f->loop, f->st));
    F = f;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    walsync_free(f->w);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    store_free(f->st);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void put(fixture *f, const char *k) {
    store_txn *t = store_txn_begin(f->st);
    assert_int_equal(store_txn_put(t, 1, k, strlen(k), 0, 0, "v", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_sync(f->st, NULL), 0); /* to the OS, not fsynced (--fsync no) */
}

static void on_done(void *arg, int rc) {
    int i = (int)(intptr_t)arg;
    assert_int_equal(F->inside, 0); /* never from inside walsync_request */
    F->answers[i]++;
    F->rcs[i] = rc;
}

static void request(fixture *f, int i) {
    f->inside = 1;
    assert_int_equal(walsync_request(f->w, on_done, (void *)(intptr_t)i), 0);
    f->inside = 0;
}

static void run_until_idle(fixture *f) {
    for (int n = 0; n < 5000 && walsync_busy(f->w); n++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    assert_false(walsync_busy(f->w));
}

/* Nothing left unsynced: a begin finds no fsync to do. */
static void assert_all_durable(fixture *f) {
    store_wal_sync ws;
    assert_int_equal(store_wal_sync_begin(f->st, &ws), 0);
}

static void answered_after_fsync(void **state) {
    fixture *f = *state;
    put(f, "a");
    store_wal_sync ws;
    assert_int_equal(store_wal_sync_begin(f->st, &ws), 1); /* unsynced now */
    store_wal_sync_run(f->st, &ws);
    assert_int_equal(store_wal_sync_end(f->st, &ws), 0);
    put(f, "b");
    request(f, 0);
    assert_int_equal(f->answers[0], 0);
    run_until_idle(f);
    assert_int_equal(f->answers[0], 1);
    assert_int_equal(f->rcs[0], 0);
    assert_all_durable(f);
}

static void nothing_to_sync_is_answered(void **state) {
    fixture *f = *state;
    request(f, 0);
    run_until_idle(f);
    assert_int_equal(f->answers[0], 1);
    assert_int_equal(f->rcs[0], 0);
}

/* Requests while one is in flight are answered by the next fsync, which
 * covers their writes; the two waiting are answered by one fsync. */
static void later_requests_get_the_next_fsync(void **state) {
    fixture *f = *state;
    put(f, "a");
    request(f, 0);
    put(f, "b"); /* after the first fsync's begin */
    request(f, 1);
    request(f, 2);
    run_until_idle(f);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(f->answers[i], 1);
        assert_int_equal(f->rcs[i], 0);
    }
    assert_all_durable(f);
}

static void cancelled_never_answered(void **state) {
    fixture *f = *state;
    put(f, "a");
    request(f, 0); /* in flight */
    request(f, 1); /* waiting */
    request(f, 2);
    walsync_cancel(f->w, (void *)(intptr_t)0);
    walsync_cancel(f->w, (void *)(intptr_t)1);
    run_until_idle(f);
    assert_int_equal(f->answers[0], 0);
    assert_int_equal(f->answers[1], 0);
    assert_int_equal(f->answers[2], 1);
}

/* A callback that requests again (the move engine resumes a held VERIFY
 * whose re-run lets the next VERIFY on the same connection ask for its own
 * fsync) is answered too: that request once vanished with the batch being
 * answered. */
static void on_done_again(void *arg, int rc) {
    on_done(arg, rc);
    put(F, "later");
    assert_int_equal(walsync_request(F->w, on_done, (void *)(intptr_t)1), 0);
}

static void request_from_callback_answered(void **state) {
    fixture *f = *state;
    put(f, "a");
    assert_int_equal(walsync_request(f->w, on_done_again, (void *)(intptr_t)0), 0);
    run_until_idle(f);
    assert_int_equal(f->answers[0], 1);
    assert_int_equal(f->answers[1], 1);
    assert_int_equal(f->rcs[1], 0);
    assert_all_durable(f);
}

/* free with an fsync in flight joins the worker; no callback runs. */
static void free_in_flight(void **state) {
    fixture *f = *state;
    put(f, "a");
    request(f, 0);
    walsync_free(f->w);
    f->w = NULL;
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->answers[0], 0);
}

static void count_fsync(void *arg) {
    ++*(int *)arg;
}

/* --fsync always: a turn whose writes a walsync begin already handed to the
 * OS (an off-loop fsync not yet run) still fsyncs at its store_sync, since
 * its replies leave right after it (before the fix: no fsync, dirty was
 * clear). */
static void sync_after_begin_fsyncs(void **state) {
    fixture *f = *state;
    char dir[96], err[256];
    snprintf(dir, sizeof dir, "%s/always", f->dir);
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_ALWAYS;
    store *st = NULL;
    assert_int_equal(store_open(dir, &o, &st, err, sizeof err), 0);
    int fsyncs = 0;
    store_set_fsync_hook(st, count_fsync, &fsyncs);
    store_txn *t = store_txn_begin(st);
    assert_int_equal(store_txn_put(t, 1, "k", 1, 0, 0, "v", 1), 0);
    assert_int_equal(store_txn_commit(t), 0);
    store_wal_sync ws;
    assert_int_equal(store_wal_sync_begin(st, &ws), 1); /* to the OS, not fsynced */
    assert_int_equal(fsyncs, 0);
    assert_int_equal(store_sync(st, NULL), 0); /* the turn's end */
    assert_int_equal(fsyncs, 1);
    store_wal_sync_run(st, &ws);
    assert_int_equal(store_wal_sync_end(st, &ws), 0);
    assert_int_equal(store_sync(st, NULL), 0); /* nothing new: no fsync */
    int after = fsyncs;
    assert_int_equal(store_sync(st, NULL), 0);
    assert_int_equal(fsyncs, after);
    store_free(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(answered_after_fsync, setup, teardown),
        cmocka_unit_test_setup_teardown(nothing_to_sync_is_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(later_requests_get_the_next_fsync, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_never_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(request_from_callback_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(free_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(sync_after_begin_fsyncs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
