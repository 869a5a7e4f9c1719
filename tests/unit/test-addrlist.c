/* test-addrlist.c - unit tests for src/core/addrlist: the coordinator
 * address list parser behind --coord on nodes and the CLI (issue 12). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/addrlist.h"
#include "core/err.h"

#include <stdio.h>
#include <string.h>

/* One address parses as before lists: host and port. */
static void test_single(void **state) {
    (void)state;
    addrlist l;
    char err[256] = "";
    assert_int_equal(addrlist_parse("127.0.0.1:7400", &l, err, sizeof err), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.a[0].host, "127.0.0.1");
    assert_int_equal(l.a[0].port, 7400);
}

/* Several addresses keep their order; the port is after the last ':'. */
static void test_list_in_order(void **state) {
    (void)state;
    addrlist l;
    char err[256] = "", out[256];
    assert_int_equal(addrlist_parse("a:1,b.example:65535,::1:7400", &l, err, sizeof err), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.a[0].host, "a");
    assert_int_equal(l.a[0].port, 1);
    assert_string_equal(l.a[1].host, "b.example");
    assert_int_equal(l.a[1].port, 65535);
    assert_string_equal(l.a[2].host, "::1");
    assert_int_equal(l.a[2].port, 7400);
    assert_string_equal(addrlist_format(&l, out, sizeof out), "a:1,b.example:65535,::1:7400");
}

/* Exactly ADDRLIST_MAX addresses are accepted, one more is refused. */
static void test_max_addresses(void **state) {
    (void)state;
    char s[1024] = "";
    for (int i = 0; i < ADDRLIST_MAX; i++)
        snprintf(s + strlen(s), sizeof s - strlen(s), "%sh%d:%d", i ? "," : "", i, 7000 + i);
    addrlist l;
    char err[256] = "";
    assert_int_equal(addrlist_parse(s, &l, err, sizeof err), 0);
    assert_int_equal(l.n, ADDRLIST_MAX);
    assert_string_equal(l.a[ADDRLIST_MAX - 1].host, "h15");
    assert_int_equal(l.a[ADDRLIST_MAX - 1].port, 7015);
    strcat(s, ",extra:1");
    assert_int_equal(addrlist_parse(s, &l, err, sizeof err), KEEL_EINVAL);
    assert_int_equal(l.n, 0);
    assert_non_null(strstr(err, "more than 16"));
}

/* Each bad list is refused with a reason naming what is wrong. */
static void test_refused(void **state) {
    (void)state;
    static const struct {
        const char *in, *why;
    } cases[] = {
        {"", "empty address list"},
        {"a:1,,b:2", "empty address"},
        {"a:1,", "empty address"},
        {",a:1", "empty address"},
        {"nocolon", "HOST:PORT"},
        {":7400", "empty host"},
        {"a:", "port"},
        {"a:0", "port"},
        {"a:65536", "port"},
        {"a:-1", "port"},
        {"a:+1", "port"},
        {"a:12x", "port"},
        {"a:1,b:99999", "'b:99999'"},
        {"a :1", "blank"},
        {"a:1, b:2", "blank"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        addrlist l;
        char err[256] = "";
        assert_int_equal(addrlist_parse(cases[i].in, &l, err, sizeof err), KEEL_EINVAL);
        assert_int_equal(l.n, 0);
        if (!strstr(err, cases[i].why)) fail_msg("'%s': got '%s'", cases[i].in, err);
    }
    addrlist l;
    assert_int_equal(addrlist_parse(NULL, &l, NULL, 0), KEEL_EINVAL);
}

/* A host longer than ADDRLIST_HOST_MAX is refused, one of that length is not. */
static void test_host_length(void **state) {
    (void)state;
    char s[600];
    memset(s, 'h', ADDRLIST_HOST_MAX);
    snprintf(s + ADDRLIST_HOST_MAX, sizeof s - ADDRLIST_HOST_MAX, ":1");
    addrlist l;
    char err[512] = "";
    assert_int_equal(addrlist_parse(s, &l, err, sizeof err), 0);
    assert_int_equal((int)strlen(l.a[0].host), ADDRLIST_HOST_MAX);
    memset(s, 'h', ADDRLIST_HOST_MAX + 1);
    snprintf(s + ADDRLIST_HOST_MAX + 1, sizeof s - ADDRLIST_HOST_MAX - 1, ":1");
    assert_int_equal(addrlist_parse(s, &l, err, sizeof err), KEEL_EINVAL);
    assert_non_null(strstr(err, "host too long"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single),        cmocka_unit_test(test_list_in_order),
        cmocka_unit_test(test_max_addresses), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_host_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
