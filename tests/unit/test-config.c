/* test-config.c - `keel node` flag parsing: good flags, and every bad one
 * refused with a message before anything is opened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/err.h"
#include "node/config.h"

static int parse(node_config *c, char *err, size_t cap, int argc, const char **argv) {
    node_config_default(c);
    return node_config_parse(c, argc, (char **)argv, err, cap);
}

/* A full valid command line fills every field. */
static void config_ok(void **st) {
    node_config c;
    char err[256];
    const char *a[] = {"--port",
                       "7000",
                       "--dir",
                       "/tmp/x",
                       "--own",
                       "all",
                       "--fsync=everysec",
                       "--metrics-port",
                       "9100",
                       "--max-bulk",
                       "1024",
                       "--requirepass",
                       "pw",
                       "--block-cache-mb",
                       "512"};
    assert_int_equal(parse(&c, err, sizeof err, 15, a), 0);
    assert_int_equal(c.block_cache_bytes, (size_t)512 << 20);
    assert_int_equal(c.port, 7000);
    assert_string_equal(c.dir, "/tmp/x");
    assert_true(c.own_all);
    assert_int_equal(c.fsync, STORE_FSYNC_EVERYSEC);
    assert_int_equal(c.metrics_port, 9100);
    assert_int_equal(c.limits.max_bulk, 1024);
    assert_string_equal(c.requirepass, "pw");
    assert_string_equal(c.announce_host, "127.0.0.1");
}

/* fsync defaults to always. */
static void config_defaults(void **st) {
    node_config c;
    char err[256];
    const char *a[] = {"--port", "7000", "--dir", "d", "--own", "all"};
    assert_int_equal(parse(&c, err, sizeof err, 6, a), 0);
    assert_int_equal(c.fsync, STORE_FSYNC_ALWAYS);
    assert_int_equal(c.partitions, 1024);
}

/* Each bad command line fails with a message naming the problem. */
static void config_bad(void **st) {
    struct {
        int argc;
        const char *argv[10];
        const char *needle;
    } cases[] = {
        {6, {"--port", "abc", "--dir", "d", "--own", "all"}, "--port"},
        {6, {"--port", "70000", "--dir", "d", "--own", "all"}, "--port"},
        {4, {"--port", "1", "--own", "all"}, "--dir is required"},
        {4, {"--dir", "d", "--own", "all"}, "--port is required"},
        {8, {"--port", "1", "--dir", "d", "--own", "all", "--fsync", "sometimes"}, "--fsync"},
        {8,
         {"--port", "1", "--dir", "d", "--own", "all", "--block-cache-mb", "4"},
         "--block-cache-mb"},
        {8,
         {"--port", "1", "--dir", "d", "--own", "all", "--block-cache-mb", "x"},
         "--block-cache-mb"},
        {7, {"--port", "1", "--dir", "d", "--own", "all", "--bogus"}, "unknown flag"},
        {6, {"--port", "1", "--dir", "d", "--own", "some"}, "--own"},
        {8, {"--port", "1", "--dir", "d", "--own", "all", "--map", "f"}, "mutually exclusive"},
        {4, {"--port", "1", "--dir", "d"}, "--own all, --map FILE or --coord"},
        {6, {"--port", "1", "--dir", "d", "--coord", "h:1"}, "--secret-file"},
        {6, {"--port", "1", "--dir", "d", "--coord", "nocolon"}, "HOST:PORT"},
        {6, {"--port", "1", "--dir", "d", "--coord", "a:1,,b:2"}, "empty address"},
        {6, {"--port", "1", "--dir", "d", "--coord", "a:1,b:0"}, "'b:0'"},
        {6,
         {"--port", "1", "--dir", "d", "--coord",
          "a:1,a:2,a:3,a:4,a:5,a:6,a:7,a:8,a:9,a:10,a:11,a:12,a:13,a:14,a:15,a:16,a:17"},
         "more than 16"},
        {10,
         {"--port", "1", "--dir", "d", "--coord", "h:1", "--secret-file", "s", "--capacity", "-1"},
         "--capacity"},
        {6, {"--port", "1", "--dir", "d", "--map", "f"}, "--id"},
        {7, {"--port", "1", "--dir", "d", "--own", "all", "--fsync"}, "needs a value"},
        {8, {"--port", "1", "--dir", "d", "--own", "all", "--partitions", "1000"}, "power of two"},
        {8, {"--port", "1", "--dir", "d", "--own", "all", "--metrics-port", "1"}, "differ"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        node_config c;
        char err[256] = "";
        assert_int_equal(parse(&c, err, sizeof err, cases[i].argc, cases[i].argv), KEEL_EINVAL);
        if (!strstr(err, cases[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].needle);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_ok),
        cmocka_unit_test(config_defaults),
        cmocka_unit_test(config_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
