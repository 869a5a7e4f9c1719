/* test-failpoint.c - named failpoints (DESIGN.md §6, issue 5): spec and
 * $KEEL_FAILPOINTS parsing, the inert default, counted firing, a real pause,
 * a real crash in a forked child, and list/clear. Every case starts and ends
 * with an empty registry (setup/teardown). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/err.h"
#include "core/failpoint.h"

static int clear(void **st) {
    failpoint_clear_all();
    return 0;
}

static const char *list(void) {
    static char buf[1024];
    failpoint_list(buf, sizeof buf);
    return buf;
}

/* Every spec form the grammar allows is accepted and listed back as written. */
static void set_good_specs(void **st) {
    char err[128] = "";
    assert_int_equal(failpoint_set("a", "crash", err, sizeof err), 0);
    assert_int_equal(failpoint_set("b.c_d-9", "error", err, sizeof err), 0);
    assert_int_equal(failpoint_set("p", "pause(0)", err, sizeof err), 0);
    assert_int_equal(failpoint_set("q", "3*pause(600000)", err, sizeof err), 0);
    assert_int_equal(failpoint_set("r", "1000000*error", err, sizeof err), 0);
    assert_string_equal(list(), "a=crash;b.c_d-9=error;p=pause(0);q=3*pause(600000);"
                                "r=1000000*error");
    assert_int_equal(failpoint_set("a", "2*error", err, sizeof err), 0); /* replace in place */
    assert_int_equal(failpoint_set("p", "off", err, sizeof err), 0);
    assert_int_equal(failpoint_set("never-set", "off", err, sizeof err), 0);
    assert_string_equal(list(), "a=2*error;b.c_d-9=error;q=3*pause(600000);r=1000000*error");
}

/* Bad names and bad specs are KEEL_EINVAL with a message, and change nothing. */
static void set_bad_specs(void **st) {
    static const char *const bad_specs[] = {
        "",
        "Crash",
        "crash ",
        " crash",
        "crash()",
        "pause",
        "pause()",
        "pause(x)",
        "pause(-1)",
        "pause(1",
        "pause(1)x",
        "pause(600001)",
        "pause(+5)",
        "0*crash",
        "*crash",
        "-1*crash",
        "1000001*crash",
        "2*off",
        "2**crash",
        "2*",
        "x*crash",
        "2 * crash",
        "error;crash",
        "pause(99999999999999999999)",
    };
    static const char *const bad_names[] = {"",
                                            "Move.x",
                                            "a b",
                                            "a=b",
                                            "a;b",
                                            "move/x",
                                            ("01234567890123456789012345678901234567890123456789"
                                             "012345678901234")};
    char err[128];
    assert_int_equal(failpoint_set("keep", "error", NULL, 0), 0);
    for (size_t i = 0; i < sizeof bad_specs / sizeof *bad_specs; i++) {
        err[0] = 0;
        assert_int_equal(failpoint_set("x", bad_specs[i], err, sizeof err), KEEL_EINVAL);
        assert_true(err[0] != 0);
    }
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        err[0] = 0;
        assert_int_equal(failpoint_set(bad_names[i], "crash", err, sizeof err), KEEL_EINVAL);
        assert_non_null(strstr(err, "name"));
    }
    assert_int_equal(failpoint_set("x", "bogus", NULL, 0), KEEL_EINVAL); /* no err buffer */
    /* A 64-byte name is the longest allowed. */
    assert_int_equal(
        failpoint_set("0123456789012345678901234567890123456789012345678901234567890123", "off",
                      err, sizeof err),
        0);
    assert_string_equal(list(), "keep=error");
    assert_int_equal(failpoint__enabled, 1);
}

/* The registry holds FAILPOINT_MAX; one more is KEEL_ELIMIT, re-setting one is not. */
static void set_full_registry(void **st) {
    char name[16], err[128];
    for (int i = 0; i < FAILPOINT_MAX; i++) {
        snprintf(name, sizeof name, "fp%d", i);
        assert_int_equal(failpoint_set(name, "error", err, sizeof err), 0);
    }
    assert_int_equal(failpoint_set("one.more", "error", err, sizeof err), KEEL_ELIMIT);
    assert_int_equal(failpoint_set("fp0", "crash", err, sizeof err), 0);
    assert_int_equal(failpoint_load_env("fp1=crash;one.more=error", err, sizeof err), KEEL_ELIMIT);
    assert_string_equal(err, "too many failpoints enabled (max 64)");
    /* Frees before it adds, whatever the order of the entries. */
    assert_int_equal(failpoint_load_env("one.more=error;fp1=off", err, sizeof err), 0);
    assert_int_equal(
        failpoint_load_env("fp1=error;fp1=off;two.more=error;fp2=off", err, sizeof err), 0);
    assert_int_equal(failpoint__enabled, FAILPOINT_MAX);
}

/* A good $KEEL_FAILPOINTS value, with blanks and empty entries, applies in full. */
static void env_good(void **st) {
    char err[128] = "";
    assert_int_equal(failpoint_load_env(NULL, err, sizeof err), 0);
    assert_int_equal(failpoint_load_env("", err, sizeof err), 0);
    assert_int_equal(failpoint_load_env(" ; ;", err, sizeof err), 0);
    assert_int_equal(failpoint_load_env("move.after_fence=crash;move.before_commit=2*pause(500)",
                                        err, sizeof err),
                     0);
    assert_string_equal(list(), "move.after_fence=crash;move.before_commit=2*pause(500)");
    /* Additive; a later entry for the same name wins; off removes. */
    assert_int_equal(
        failpoint_load_env(" a = error ;a=3*error;; move.after_fence=off ;", err, sizeof err), 0);
    assert_string_equal(list(), "move.before_commit=2*pause(500);a=3*error");
    /* The listing round-trips. */
    char saved[256];
    failpoint_list(saved, sizeof saved);
    failpoint_clear_all();
    assert_int_equal(failpoint_load_env(saved, err, sizeof err), 0);
    assert_string_equal(list(), saved);
}

/* A bad entry anywhere rejects the whole value, names the entry, and applies nothing. */
static void env_bad_is_all_or_nothing(void **st) {
    static const char *const bad[] = {
        "a=crash;b",           "a=crash;b=",        "a=crash;=error",  "a=crash;B=error",
        "a=crash;b=pause(1)x", "a=crash;b=crash=x", "a=crash;b=2*off", "a crash",
    };
    char err[128];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(failpoint_load_env(bad[i], err, sizeof err), KEEL_EINVAL);
        assert_non_null(strstr(err, "entry"));
        assert_string_equal(list(), "");
    }
    failpoint_load_env("a=crash;b=2*off", err, sizeof err);
    assert_non_null(strstr(err, "entry 2 (b)"));
}

/* Nothing enabled: hits are FP_NONE, through the macro and the function. */
static void inert_by_default(void **st) {
    assert_int_equal(failpoint__enabled, 0);
    assert_int_equal(FAILPOINT("move.after_fence"), FP_NONE);
    assert_int_equal(failpoint_hit("move.after_fence"), FP_NONE);
    /* Enabling one name leaves the others inert, including prefixes and overlong names. */
    assert_int_equal(failpoint_set("move.after_fence", "error", NULL, 0), 0);
    assert_int_equal(FAILPOINT("move.after"), FP_NONE);
    assert_int_equal(FAILPOINT("move.after_fence2"), FP_NONE);
    assert_int_equal(failpoint_hit("0123456789012345678901234567890123456789012345678901234567890"
                                   "12345678"),
                     FP_NONE);
}

/* error fires exactly N times, counting down in the listing, then goes off. */
static void error_counts_down(void **st) {
    assert_int_equal(failpoint_set("move.before_commit", "3*error", NULL, 0), 0);
    assert_int_equal(FAILPOINT("move.before_commit"), FP_ERROR);
    assert_string_equal(list(), "move.before_commit=2*error");
    assert_int_equal(FAILPOINT("move.before_commit"), FP_ERROR);
    assert_int_equal(FAILPOINT("move.before_commit"), FP_ERROR);
    assert_int_equal(FAILPOINT("move.before_commit"), FP_NONE);
    assert_string_equal(list(), "");
    assert_int_equal(failpoint__enabled, 0);
    /* Uncounted fires every time. */
    assert_int_equal(failpoint_set("e", "error", NULL, 0), 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(failpoint_hit("e"), FP_ERROR);
    assert_string_equal(list(), "e=error");
}

/* pause(50) blocks the caller for at least ~50 ms (and not absurdly longer). */
static void pause_sleeps(void **st) {
    assert_int_equal(failpoint_set("move.after_fence", "1*pause(50)", NULL, 0), 0);
    uint64_t t0 = keel_mono_us();
    assert_int_equal(FAILPOINT("move.after_fence"), FP_PAUSE);
    uint64_t dt = keel_mono_us() - t0;
    assert_true(dt >= 45000);
    assert_true(dt < 2000000);
    t0 = keel_mono_us();
    assert_int_equal(FAILPOINT("move.after_fence"), FP_NONE); /* count used up */
    assert_true(keel_mono_us() - t0 < 45000);
}

/* crash ends a forked child with KEEL_FAILPOINT_EXIT_CODE, skipping atexit handlers. */
static void on_exit_marker(void) {
    static const char m[] = "atexit-ran";
    ssize_t w = write(STDOUT_FILENO, m, sizeof m - 1);
    (void)w;
}

static void crash_exits_with_code(void **st) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        atexit(on_exit_marker);
        if (failpoint_set("move.after_commit", "crash", NULL, 0)) _exit(1);
        FAILPOINT("move.after_commit");
        _exit(2); /* not reached */
    }
    close(fds[1]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), KEEL_FAILPOINT_EXIT_CODE);
    char buf[32];
    assert_int_equal(read(fds[0], buf, sizeof buf), 0); /* atexit handler never ran */
    close(fds[0]);
}

/* list reports the full length when truncated; clear_all empties everything. */
static void list_and_clear(void **st) {
    char small[8];
    assert_int_equal(failpoint_list(small, sizeof small), 0);
    assert_string_equal(small, "");
    assert_int_equal(failpoint_set("move.after_fence", "crash", NULL, 0), 0);
    assert_int_equal(failpoint_set("move.before_commit", "2*pause(500)", NULL, 0), 0);
    const char *want = "move.after_fence=crash;move.before_commit=2*pause(500)";
    assert_int_equal(failpoint_list(small, sizeof small), strlen(want));
    assert_string_equal(small, "move.af");
    assert_int_equal(failpoint_list(NULL, 0), strlen(want));
    failpoint_clear_all();
    assert_int_equal(failpoint__enabled, 0);
    assert_string_equal(list(), "");
    assert_int_equal(FAILPOINT("move.after_fence"), FP_NONE);
}

/* Action names come from the X-macro table. */
static void action_names(void **st) {
    assert_string_equal(failpoint_action_name(FP_NONE), "none");
    assert_string_equal(failpoint_action_name(FP_CRASH), "crash");
    assert_string_equal(failpoint_action_name(FP_PAUSE), "pause");
    assert_string_equal(failpoint_action_name(FP_ERROR), "error");
    assert_string_equal(failpoint_action_name((failpoint_action)42), "unknown");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(set_good_specs, clear, clear),
        cmocka_unit_test_setup_teardown(set_bad_specs, clear, clear),
        cmocka_unit_test_setup_teardown(set_full_registry, clear, clear),
        cmocka_unit_test_setup_teardown(env_good, clear, clear),
        cmocka_unit_test_setup_teardown(env_bad_is_all_or_nothing, clear, clear),
        cmocka_unit_test_setup_teardown(inert_by_default, clear, clear),
        cmocka_unit_test_setup_teardown(error_counts_down, clear, clear),
        cmocka_unit_test_setup_teardown(pause_sleeps, clear, clear),
        cmocka_unit_test_setup_teardown(crash_exits_with_code, clear, clear),
        cmocka_unit_test_setup_teardown(list_and_clear, clear, clear),
        cmocka_unit_test(action_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
