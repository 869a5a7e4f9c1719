/* test-stream.c - the stream encoding's pure parts (node/stream.h): id
 * parsing as redis 7.0's streamGenericParseIDOrReply, id arithmetic at
 * the edges, record fields in id order, and the group lag estimates
 * (streamEstimateDistanceFromFirstEverEntry, streamRangeHasTombstones).
 * The commands themselves are diffed against redis-server by
 * tests/integration/test_streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "node/stream.h"

static int parse(const char *s, sid *id, uint64_t missing, int strict, int *seq_given) {
    return sid_parse(NULL, s, strlen(s), id, missing, strict, seq_given);
}

/* Valid forms: ms, ms-seq, ms-* (when allowed), - and + unless strict. */
static void parse_valid(void **st) {
    (void)st;
    sid id;
    int given = -1;
    assert_int_equal(parse("5", &id, 7, 1, NULL), 0);
    assert_true(id.ms == 5 && id.seq == 7);
    assert_int_equal(parse("5-3", &id, 0, 1, &given), 0);
    assert_true(id.ms == 5 && id.seq == 3 && given == 1);
    assert_int_equal(parse("5-*", &id, 0, 1, &given), 0);
    assert_true(id.ms == 5 && id.seq == 0 && given == 0);
    assert_int_equal(parse("-", &id, 0, 0, NULL), 0);
    assert_true(id.ms == 0 && id.seq == 0);
    assert_int_equal(parse("+", &id, 0, 0, NULL), 0);
    assert_true(id.ms == UINT64_MAX && id.seq == UINT64_MAX);
    assert_int_equal(parse("18446744073709551615-18446744073709551615", &id, 0, 1, NULL), 0);
    assert_true(id.ms == UINT64_MAX && id.seq == UINT64_MAX);
}

/* Invalid forms are refused, never half-parsed. */
static void parse_invalid(void **st) {
    (void)st;
    sid id;
    const char *bad[] = {"",
                         "x",
                         "1-x",
                         "-1",
                         "1-",
                         "1--1",
                         "+1",
                         " 1",
                         "1 ",
                         "18446744073709551616",
                         "1-18446744073709551616",
                         "1-*"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(parse(bad[i], &id, 0, 1, NULL), -1);
    assert_int_equal(parse("-", &id, 0, 1, NULL), -1); /* strict */
    assert_int_equal(parse("+", &id, 0, 1, NULL), -1);
    int ex;
    assert_int_equal(sid_parse_interval(NULL, "(5-1", 4, &id, &ex, 0), 0);
    assert_true(ex && id.ms == 5 && id.seq == 1);
    assert_int_equal(sid_parse_interval(NULL, "(-", 2, &id, &ex, 0), -1);
}

/* Increment and decrement carry across ms, and refuse to wrap. */
static void id_arith(void **st) {
    (void)st;
    sid a = {1, UINT64_MAX};
    assert_int_equal(sid_incr(&a), 0);
    assert_true(a.ms == 2 && a.seq == 0);
    assert_int_equal(sid_decr(&a), 0);
    assert_true(a.ms == 1 && a.seq == UINT64_MAX);
    sid max = {UINT64_MAX, UINT64_MAX}, zero = {0, 0};
    assert_int_equal(sid_incr(&max), -1);
    assert_int_equal(sid_decr(&zero), -1);
    char b[SID_STRLEN];
    assert_int_equal(sid_fmt(b, max), 41);
    assert_string_equal(b, "18446744073709551615-18446744073709551615");
}

/* Entry fields sort as ids: ms first, then seq, big-endian. */
static void field_order(void **st) {
    (void)st;
    char a[17], b[17], c[17];
    sf_entry(a, (sid){1, UINT64_MAX});
    sf_entry(b, (sid){2, 0});
    sf_entry(c, (sid){256, 0});
    assert_true(memcmp(a, b, 17) < 0);
    assert_true(memcmp(b, c, 17) < 0);
    char p1[64], p2[64];
    size_t l1 = sf_pel(p1, "g", 1, (sid){9, 9}), l2 = sf_pel(p2, "gg", 2, (sid){0, 0});
    assert_int_equal(l1, 3 + 1 + 16);
    /* one group's PEL never interleaves with a longer-named one's */
    assert_true(memcmp(p1, p2, 3) < 0 && l2 == 3 + 2 + 16);
}

/* The read-counter estimates of redis 7.0, case by case. */
static void lag_estimates(void **st) {
    (void)st;
    smeta m = {0};
    assert_int_equal(st_estimate_distance(&m, (sid){5, 0}), 0); /* never used */
    m.added = 10;
    m.length = 10;
    m.first = (sid){1, 0};
    m.last = (sid){10, 0};
    assert_int_equal(st_estimate_distance(&m, (sid){10, 0}), 10);                /* the last */
    assert_true(st_estimate_distance(&m, (sid){11, 0}) == ENTRIES_READ_INVALID); /* future */
    assert_int_equal(st_estimate_distance(&m, (sid){1, 0}), 1);                  /* the first */
    assert_int_equal(st_estimate_distance(&m, (sid){0, 5}), 0);                  /* before it */
    assert_true(st_estimate_distance(&m, (sid){5, 0}) == ENTRIES_READ_INVALID);  /* inside */
    assert_int_equal(st_range_has_tombstones(&m, NULL, NULL), 0);
    m.maxdel = (sid){4, 0};
    assert_int_equal(st_range_has_tombstones(&m, NULL, NULL), 1);
    sid after = {5, 0};
    assert_int_equal(st_range_has_tombstones(&m, &after, NULL), 0);
    assert_true(st_estimate_distance(&m, (sid){0, 5}) == ENTRIES_READ_INVALID); /* fragmented */
    m.length = 0;
    assert_int_equal(st_estimate_distance(&m, (sid){3, 0}), 10); /* empty: added */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_valid), cmocka_unit_test(parse_invalid), cmocka_unit_test(id_arith),
        cmocka_unit_test(field_order), cmocka_unit_test(lag_estimates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
