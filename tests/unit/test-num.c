/* test-num.c - unit tests for src/core/num: the strict u64/i64 parser that
 * replaced strtoull/strtoll on peer input (issue 10, defect 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/num.h"

#include <string.h>

static int u(const char *s, uint64_t *v) {
    return keel_parse_u64(s, strlen(s), v);
}

static int i(const char *s, int64_t *v) {
    return keel_parse_i64(s, strlen(s), v);
}

/* Plain decimals parse, up to and including UINT64_MAX. */
static void test_u64_accepts(void **state) {
    (void)state;
    uint64_t v = 1;
    assert_int_equal(u("0", &v), 0);
    assert_true(v == 0);
    assert_int_equal(u("007", &v), 0);
    assert_true(v == 7);
    assert_int_equal(u("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
}

/* Regression: strtoull clamped "18446744073709551616" to UINT64_MAX and took
 * "-1" as UINT64_MAX; both are refused now, and *out is left alone. */
static void test_u64_overflow_and_sign_refused(void **state) {
    (void)state;
    uint64_t v = 42;
    assert_int_equal(u("18446744073709551616", &v), KEEL_ERANGE);
    assert_int_equal(u("99999999999999999999999", &v), KEEL_ERANGE);
    assert_int_equal(u("-1", &v), KEEL_EINVAL);
    assert_int_equal(u("+1", &v), KEEL_EINVAL);
    assert_true(v == 42);
}

/* Regression: strtoull skipped leading blanks and stopped at junk. */
static void test_u64_junk_refused(void **state) {
    (void)state;
    uint64_t v = 42;
    assert_int_equal(u("", &v), KEEL_EINVAL);
    assert_int_equal(u(" 1", &v), KEEL_EINVAL);
    assert_int_equal(u("1 ", &v), KEEL_EINVAL);
    assert_int_equal(u("12abc", &v), KEEL_EINVAL);
    assert_int_equal(u("0x10", &v), KEEL_EINVAL);
    assert_int_equal(keel_parse_u64("1\0002", 3, &v), KEEL_EINVAL);
    assert_int_equal(keel_parse_u64(NULL, 0, &v), KEEL_EINVAL);
    assert_int_equal(u("99999999999999999999x", &v), KEEL_EINVAL);
    assert_true(v == 42);
    /* len bounds the parse: the bytes after it are not looked at. */
    assert_int_equal(keel_parse_u64("12junk", 2, &v), 0);
    assert_true(v == 12);
}

/* i64 covers its whole range, INT64_MIN included, and nothing beyond. */
static void test_i64_range(void **state) {
    (void)state;
    int64_t v = 1;
    assert_int_equal(i("-9223372036854775808", &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(i("9223372036854775807", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(i("-0", &v), 0);
    assert_true(v == 0);
    assert_int_equal(i("-5", &v), 0);
    assert_true(v == -5);
    assert_int_equal(i("9223372036854775808", &v), KEEL_ERANGE);
    assert_int_equal(i("-9223372036854775809", &v), KEEL_ERANGE);
    assert_int_equal(i("-", &v), KEEL_EINVAL);
    assert_int_equal(i("--1", &v), KEEL_EINVAL);
    assert_int_equal(i("+1", &v), KEEL_EINVAL);
    assert_int_equal(i("1-", &v), KEEL_EINVAL);
    assert_int_equal(keel_parse_i64z(NULL, &v), KEEL_EINVAL);
    assert_true(v == -5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_accepts),
        cmocka_unit_test(test_u64_overflow_and_sign_refused),
        cmocka_unit_test(test_u64_junk_refused),
        cmocka_unit_test(test_i64_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
