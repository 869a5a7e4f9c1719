/* test-crc64.c - CRC-64/Jones (DUMP payload trailers) against redis'
 * crc64.c check value, and incremental use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/crc64.h"

/* redis' crc64 test: crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9ca. */
static void crc64_check_value(void **st) {
    (void)st;
    assert_true(keel_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caULL);
}

/* Feeding in pieces gives the same as in one go; empty input keeps crc. */
static void crc64_incremental(void **st) {
    (void)st;
    const char *s = "This is a test of the emergency broadcast system.";
    size_t n = strlen(s);
    uint64_t whole = keel_crc64(0, s, n);
    uint64_t part = keel_crc64(keel_crc64(0, s, 10), s + 10, n - 10);
    assert_true(whole == part);
    assert_true(keel_crc64(whole, s, 0) == whole);
    assert_true(keel_crc64(0, "", 0) == 0);
    assert_true(keel_crc64(0, "123456788", 9) != 0xe9c6d914c4b8d9caULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc64_check_value),
        cmocka_unit_test(crc64_incremental),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
