/* test-audit.c - unit tests for src/core/audit: the append-only audit log of
 * map-store writes and accepted directives (issue 12's tests 1-2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/audit.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static int setup(void **state) {
    (void)state;
    snprintf(path, sizeof path, "/tmp/keel-audit-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    audit_close();
    unlink(path);
    return 0;
}

/* The whole file, NUL-terminated (caller frees). */
static char *slurp(void) {
    FILE *f = fopen(path, "r");
    char *b = calloc(1, 8192);
    size_t n = f && b ? fread(b, 1, 8191, f) : 0;
    if (f) fclose(f);
    if (b) b[n] = 0;
    return b;
}

/* Without audit_open nothing is written and nothing fails. */
static void test_off_by_default(void **state) {
    (void)state;
    assert_int_equal(audit_enabled(), 0);
    audit_map_write("write", 0, 1, 1);
    audit_directive("map", 1, 1);
    char *b = slurp();
    assert_string_equal(b, "");
    free(b);
}

/* One line per event, fixed keys first; the term set applies to later
 * writes; a failure is named. */
static void test_lines(void **state) {
    (void)state;
    char err[256];
    assert_int_equal(audit_open(path, "c2", err, sizeof err), 0);
    assert_int_equal(audit_enabled(), 1);
    audit_map_write("bump_term", 0, 5, 41);
    audit_set_term(5);
    audit_map_write("write", 0, 0, 42);
    audit_map_write("write", KEEL_ENOTLEADER, 0, 42);
    audit_directive("command", 5, 0);
    char *b = slurp();
    char *l1 = strtok(b, "\n"), *l2 = strtok(NULL, "\n"), *l3 = strtok(NULL, "\n"),
         *l4 = strtok(NULL, "\n");
    assert_non_null(l4);
    assert_null(strtok(NULL, "\n"));
    assert_true(!strncmp(l1, "ts_ms=", 6));
    assert_non_null(strstr(l1, " who=c2 pid="));
    assert_non_null(strstr(l1, " kind=map_write op=bump_term term=5 rc=0 version=41"));
    assert_non_null(strstr(l2, " kind=map_write op=write term=5 rc=0 version=42"));
    assert_non_null(strstr(l3, " op=write term=5 rc=KEEL_ENOTLEADER version=42"));
    assert_non_null(strstr(l4, " kind=directive_accepted via=command term=5 seq=0"));
    free(b);
}

/* Two writers on one file (two processes in real use) append, never
 * overwrite: O_APPEND. */
static void test_appends(void **state) {
    (void)state;
    char err[256];
    FILE *other = fopen(path, "a");
    assert_non_null(other);
    assert_int_equal(audit_open(path, "n1", err, sizeof err), 0);
    audit_directive("map", 3, 7);
    fputs("ts_ms=1 who=n2 pid=1 kind=directive_accepted via=map term=3 seq=7\n", other);
    fflush(other);
    audit_directive("map", 3, 8);
    fclose(other);
    char *b = slurp();
    const char *a = strstr(b, "who=n1"), *o = strstr(b, "who=n2"), *c = strstr(b, "seq=8");
    assert_true(a && o && c && a < o && o < c);
    free(b);
}

/* A bad path or an empty name is refused with a reason. */
static void test_refused(void **state) {
    (void)state;
    char err[256] = "";
    assert_int_equal(audit_open("/nonexistent-dir/x/audit.log", "c1", err, sizeof err), KEEL_EIO);
    assert_non_null(strstr(err, "/nonexistent-dir/x/audit.log"));
    assert_int_equal(audit_open("", "c1", err, sizeof err), KEEL_EINVAL);
    assert_int_equal(audit_open(path, "", err, sizeof err), KEEL_EINVAL);
    assert_int_equal(audit_enabled(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_off_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_appends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
