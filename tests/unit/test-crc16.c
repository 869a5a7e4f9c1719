/* test-crc16.c - CRC16 and the {hashtag} rule against the Redis Cluster
 * spec's reference values. (tests/integration/test_crc16 compares many more
 * keys against a live redis-server.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/crc16.h"

/* The spec's check value: CRC16("123456789") = 0x31C3. */
static void crc16_check_value(void **st) {
    assert_int_equal(keel_crc16("123456789", 9), 0x31C3);
}

/* Well-known slots that every Redis Cluster client agrees on. */
static void slot_known_keys(void **st) {
    assert_int_equal(keel_key_slot("foo", 3), 12182);
    assert_int_equal(keel_key_slot("bar", 3), 5061);
    assert_int_equal(keel_key_slot("", 0), 0);
}

/* A non-empty tag hashes only the tag. */
static void slot_hashtag(void **st) {
    unsigned user = keel_key_slot("user1000", 8);
    assert_int_equal(keel_key_slot("{user1000}.following", 20), user);
    assert_int_equal(keel_key_slot("{user1000}.followers", 20), user);
    assert_int_equal(keel_key_slot("a{user1000}b", 12), user);
}

/* Edge cases: "{}" and "{" and "}{" hash the whole key; only the first tag counts. */
static void slot_hashtag_edges(void **st) {
    assert_int_equal(keel_key_slot("{}", 2), keel_crc16("{}", 2) & 16383);
    assert_int_equal(keel_key_slot("foo{}{bar}", 10), keel_crc16("foo{}{bar}", 10) & 16383);
    assert_int_equal(keel_key_slot("{", 1), keel_crc16("{", 1) & 16383);
    assert_int_equal(keel_key_slot("}{", 2), keel_crc16("}{", 2) & 16383);
    assert_int_equal(keel_key_slot("foo{{bar}}zap", 13), keel_key_slot("{bar", 4));
    assert_int_equal(keel_key_slot("foo{bar}{zap}", 13), keel_key_slot("bar", 3));
}

/* Keys are binary: a NUL inside the key or the tag is hashed like any byte. */
static void slot_binary(void **st) {
    assert_int_equal(keel_key_slot("a\0b", 3), keel_crc16("a\0b", 3) & 16383);
    assert_int_equal(keel_key_slot("x{a\0b}y", 7), keel_key_slot("a\0b", 3));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc16_check_value), cmocka_unit_test(slot_known_keys),
        cmocka_unit_test(slot_hashtag),      cmocka_unit_test(slot_hashtag_edges),
        cmocka_unit_test(slot_binary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
