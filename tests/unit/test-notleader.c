/* test-notleader.c - unit tests for src/core/notleader: the -NOTLEADER error
 * a standby coordinator answers with, and how clients read it (issue 12). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/notleader.h"

#include <stdio.h>
#include <string.h>

/* What a standby writes is what a client parses back: id and address. */
static void test_round_trip(void **state) {
    (void)state;
    char buf[256], id[65];
    notleader_format(buf, sizeof buf, "c1", "127.0.0.1:7400");
    assert_string_equal(buf, "NOTLEADER leader=c1 addr=127.0.0.1:7400");
    addrlist_entry e;
    assert_int_equal(notleader_parse(buf, strlen(buf), &e, id, sizeof id), 0);
    assert_string_equal(e.host, "127.0.0.1");
    assert_int_equal(e.port, 7400);
    assert_string_equal(id, "c1");
}

/* No leader known: "?" both ways, and the parse says there is no address. */
static void test_no_leader(void **state) {
    (void)state;
    char buf[256], id[65];
    notleader_format(buf, sizeof buf, "", NULL);
    assert_string_equal(buf, "NOTLEADER leader=? addr=?");
    addrlist_entry e;
    assert_int_equal(notleader_parse(buf, strlen(buf), &e, id, sizeof id), KEEL_ENOTFOUND);
    assert_string_equal(id, "?");
}

/* Other errors, a truncated prefix and a malformed address are not followed. */
static void test_not_a_redirect(void **state) {
    (void)state;
    addrlist_entry e;
    const char *bad[] = {"ERR unknown command",
                         "NOTLEADE",
                         "NOTLEADER leader=c1 addr=host",
                         "NOTLEADER leader=c1 addr=h:0",
                         "NOTLEADER leader=c1 addr=:7400",
                         "NOPERM NOTLEADER leader=c1 addr=h:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(notleader_parse(bad[i], strlen(bad[i]), &e, NULL, 0), KEEL_EINVAL);
    /* the length bounds the parse: a NUL-free prefix of a valid error */
    const char *s = "NOTLEADER leader=c1 addr=h:12345 extra";
    assert_int_equal(notleader_parse(s, strlen("NOTLEADER leader=c1 addr=h:12"), &e, NULL, 0), 0);
    assert_int_equal(e.port, 12);
}

/* The address a redirect names is found in the list, or appended once. */
static void test_find_or_add(void **state) {
    (void)state;
    addrlist l;
    assert_int_equal(addrlist_parse("a:1,b:2", &l, NULL, 0), 0);
    addrlist_entry b = {"b", 2}, c = {"c", 3};
    assert_int_equal(addrlist_find_or_add(&l, &b), 1);
    assert_int_equal(l.n, 2);
    assert_int_equal(addrlist_find_or_add(&l, &c), 2);
    assert_int_equal(addrlist_find_or_add(&l, &c), 2);
    assert_int_equal(l.n, 3);
    l.n = ADDRLIST_MAX;
    addrlist_entry d = {"d", 4};
    assert_int_equal(addrlist_find_or_add(&l, &d), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_no_leader),
        cmocka_unit_test(test_not_a_redirect),
        cmocka_unit_test(test_find_or_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
