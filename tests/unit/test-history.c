/* test-history.c - the dashboard's fixed-size history rings
 * (coord/coord_history.h): bounded memory, oldest-first order across the
 * wrap, the since-search, node columns and move events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "coord/coord_history.h"
#include "core/err.h"

static history_sample at_time(int64_t t) {
    history_sample s = {0};
    s.t_ms = t;
    s.imbalance = (float)t;
    return s;
}

/* The memory stays the same however many samples are added, and is under
 * the 3 MB the docs state. */
static void memory_is_bounded(void **st) {
    assert_true(coord_history_bytes() < 3u * 1024 * 1024);
    assert_true(coord_history_bytes() >= HISTORY_SAMPLES * sizeof(history_sample));
}

/* Past HISTORY_SAMPLES, the oldest are dropped and order stays oldest
 * first across the wrap. */
static void ring_keeps_the_newest_hour(void **st) {
    coord_history *h = coord_history_new();
    assert_non_null(h);
    for (int64_t t = 1; t <= HISTORY_SAMPLES + 500; t++) {
        history_sample s = at_time(t * 1000);
        coord_history_add(h, &s);
    }
    assert_int_equal(coord_history_count(h), HISTORY_SAMPLES);
    assert_int_equal(coord_history_at(h, 0)->t_ms, 501 * 1000);
    assert_int_equal(coord_history_at(h, HISTORY_SAMPLES - 1)->t_ms,
                     (HISTORY_SAMPLES + 500) * 1000);
    for (size_t i = 1; i < HISTORY_SAMPLES; i++)
        assert_true(coord_history_at(h, i)->t_ms > coord_history_at(h, i - 1)->t_ms);
    assert_null(coord_history_at(h, HISTORY_SAMPLES));
    coord_history_free(h);
}

/* first_after: strictly newer than since, at both ends and across the wrap. */
static void first_after_finds_the_boundary(void **st) {
    coord_history *h = coord_history_new();
    assert_int_equal(coord_history_first_after(h, 0), 0);
    for (int64_t t = 1; t <= HISTORY_SAMPLES + 10; t++) {
        history_sample s = at_time(t * 1000);
        coord_history_add(h, &s);
    }
    size_t n = coord_history_count(h);
    assert_int_equal(coord_history_first_after(h, 0), 0);
    assert_int_equal(coord_history_first_after(h, 10 * 1000), 0); /* the oldest held is 11 s */
    assert_int_equal(coord_history_first_after(h, 11 * 1000 - 1), 0);
    assert_int_equal(coord_history_first_after(h, 11 * 1000), 1);
    assert_int_equal(coord_history_first_after(h, 100 * 1000), 100 - 11 + 1);
    assert_int_equal(coord_history_first_after(h, (HISTORY_SAMPLES + 10) * 1000), n);
    assert_int_equal(coord_history_first_after(h, INT64_MAX), n);
    coord_history_free(h);
}

/* A sample older than the newest (the wall clock stepped back) restarts
 * the history from it: order holds for the search, and sampling goes on. */
static void clock_step_back_restarts_the_history(void **st) {
    coord_history *h = coord_history_new();
    history_sample a = at_time(2000), b = at_time(3000), c = at_time(1000), d = at_time(1500);
    coord_history_add(h, &a);
    coord_history_add(h, &b);
    coord_history_add(h, &c);
    assert_int_equal(coord_history_count(h), 1);
    assert_int_equal(coord_history_at(h, 0)->t_ms, 1000);
    coord_history_add(h, &d);
    assert_int_equal(coord_history_count(h), 2);
    assert_int_equal(coord_history_first_after(h, 1000), 1);
    coord_history_free(h);
}

/* Columns: stable per id, limited to HISTORY_NODES, long ids refused. */
static void columns_are_stable_and_bounded(void **st) {
    coord_history *h = coord_history_new();
    assert_int_equal(coord_history_column(h, "n1"), 0);
    assert_int_equal(coord_history_column(h, "n2"), 1);
    assert_int_equal(coord_history_column(h, "n1"), 0);
    char id[32];
    for (int i = 3; i <= HISTORY_NODES; i++) {
        snprintf(id, sizeof id, "n%d", i);
        assert_int_equal(coord_history_column(h, id), i - 1);
    }
    assert_int_equal(coord_history_column(h, "one-too-many"), KEEL_ELIMIT);
    assert_int_equal(coord_history_column(h, "n7"), 6);
    char longid[HISTORY_ID_MAX + 2];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = 0;
    assert_int_equal(coord_history_column(h, longid), KEEL_EINVAL);
    assert_int_equal(coord_history_ncols(h), HISTORY_NODES);
    assert_string_equal(coord_history_col_id(h, 1), "n2");
    assert_null(coord_history_col_id(h, HISTORY_NODES));
    coord_history_free(h);
}

/* Events wrap like samples; a NULL history takes events silently. */
static void events_wrap_and_null_is_a_no_op(void **st) {
    coord_history_event(NULL, 1, 1, 1, HISTORY_MOVE_START);
    coord_history *h = coord_history_new();
    for (uint64_t i = 0; i < HISTORY_EVENTS + 3; i++)
        coord_history_event(h, (int64_t)i, i, 7, i % 2 ? HISTORY_MOVE_COMMIT : HISTORY_MOVE_START);
    assert_int_equal(coord_history_nevents(h), HISTORY_EVENTS);
    assert_int_equal(coord_history_event_at(h, 0)->move, 3);
    assert_int_equal(coord_history_event_at(h, HISTORY_EVENTS - 1)->move, HISTORY_EVENTS + 2);
    assert_null(coord_history_event_at(h, HISTORY_EVENTS));
    assert_string_equal(coord_history_event_name(HISTORY_MOVE_ABORT), "abort");
    coord_history_free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memory_is_bounded),
        cmocka_unit_test(ring_keeps_the_newest_hour),
        cmocka_unit_test(first_after_finds_the_boundary),
        cmocka_unit_test(clock_step_back_restarts_the_history),
        cmocka_unit_test(columns_are_stable_and_bounded),
        cmocka_unit_test(events_wrap_and_null_is_a_no_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
