/* test-loopstat.c - the event-loop turn measure behind keel_loop_turn_seconds
 * and INFO's loop_turn_max_us (loopstat.h). The bookkeeping is driven with
 * simulated times; one case runs a real libuv loop to show that time blocked
 * in the poll is not counted and a busy callback is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "node/loopstat.h"

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull

/* Max, slow count and histogram follow the observations. */
static void observe_counts(void **st) {
    loopstat *ls = loopstat_new();
    assert_non_null(ls);
    loopstat_observe(ls, 20 * US, (20 * US) / 2, 1 * SEC);
    loopstat_observe(ls, 3 * MS, (3 * MS) / 2, 1 * SEC + 10 * MS);
    loopstat_observe(ls, 1 * MS, (1 * MS) / 2, 1 * SEC + 20 * MS); /* exactly 1 ms: not slow */
    loopstat_observe(ls, 400 * US, (400 * US) / 2, 1 * SEC + 30 * MS);
    loopstat_stats s;
    loopstat_get(ls, &s);
    assert_int_equal(s.turns, 4);
    assert_int_equal(s.slow_turns, 1);
    assert_int_equal(s.max_ns, 3 * MS);
    assert_int_equal(s.hist->total, 4);
    assert_int_equal(s.hist->count[0], 1); /* <= 50 us */
    assert_int_equal(s.hist->count[3], 1); /* (250 us, 500 us] */
    assert_int_equal(s.hist->count[4], 1); /* (500 us, 1 ms] */
    assert_int_equal(s.hist->count[6], 1); /* (2.5 ms, 5 ms] */
    loopstat_free(ls);
}

/* The window max reports the previous completed second only. */
static void window_rolls(void **st) {
    loopstat *ls = loopstat_new();
    loopstat_stats s;
    loopstat_observe(ls, 7 * MS, (7 * MS) / 2, 10 * SEC); /* opens the window [10 s, 11 s) */
    loopstat_get(ls, &s);
    assert_int_equal(s.window_max_ns, 0); /* nothing completed yet */
    loopstat_observe(ls, 2 * MS, (2 * MS) / 2, 10 * SEC + 500 * MS);
    loopstat_observe(ls, 100 * US, (100 * US) / 2, 11 * SEC); /* closes it */
    loopstat_get(ls, &s);
    assert_int_equal(s.window_max_ns, 7 * MS);
    assert_int_equal(s.window_cpu_max_ns, 7 * MS / 2);
    assert_int_equal(s.window_end_ns, 11 * SEC);
    loopstat_observe(ls, 300 * US, (300 * US) / 2, 11 * SEC + 900 * MS);
    loopstat_observe(ls, 50 * US, (50 * US) / 2, 12 * SEC + 1 * MS); /* closes [11 s, 12 s) */
    loopstat_get(ls, &s);
    assert_int_equal(s.window_max_ns, 300 * US);
    assert_int_equal(s.max_ns, 7 * MS); /* since start */
    kbuf b;
    kbuf_init(&b);
    loopstat_info(ls, &b);
    assert_int_equal(kbuf_append(&b, "", 1), 0); /* NUL-terminated for strstr */
    assert_non_null(strstr(b.p, "loop_turns:5\r\n"));
    assert_non_null(strstr(b.p, "loop_turns_over_1ms:2\r\n"));
    assert_non_null(strstr(b.p, "loop_turn_max_us:7000\r\n"));
    assert_non_null(strstr(b.p, "loop_turn_max_1s_us:300\r\n"));
    assert_non_null(strstr(b.p, "loop_turn_1s_end_ms:12000\r\n"));
    assert_non_null(strstr(b.p, "loop_turn_cpu_max_us:3500\r\n"));
    assert_non_null(strstr(b.p, "loop_turn_cpu_max_1s_us:150\r\n"));
    kbuf_close(&b);
    kbuf_init(&b);
    loopstat_metrics(ls, &b);
    assert_int_equal(kbuf_append(&b, "", 1), 0);
    assert_non_null(strstr(b.p, "keel_loop_turn_seconds_count 5\n"));
    assert_non_null(strstr(b.p, "keel_loop_turn_cpu_seconds_count 5\n"));
    assert_non_null(strstr(b.p, "keel_loop_turn_max_seconds 0.007000000\n"));
    assert_non_null(strstr(b.p, "keel_loop_turns_slow_total 2\n"));
    kbuf_close(&b);
    loopstat_free(ls);
}

typedef struct {
    int fired;
    uint64_t spin_ns;
} timer_ctx;

/* Waits (blocked in the poll), then keeps the loop busy for spin_ns. */
static void on_timer(uv_timer_t *t) {
    timer_ctx *c = t->data;
    c->fired++;
    uint64_t t0 = uv_hrtime();
    while (uv_hrtime() - t0 < c->spin_ns) {
    }
}

/* A real loop: three 40 ms idle waits, each followed by a 6 ms busy
 * callback. The busy turns are seen (>= 6 ms); the waits are not (a turn
 * that counted them would be >= 40 ms). */
static void real_loop_busy_not_idle(void **st) {
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    loopstat *ls = loopstat_new();
    assert_int_equal(loopstat_start(ls, &loop), 0);
    uv_timer_t t;
    timer_ctx c = {0, 6 * MS};
    uv_timer_init(&loop, &t);
    t.data = &c;
    uv_timer_start(&t, on_timer, 40, 40);
    while (c.fired < 3)
        uv_run(&loop, UV_RUN_ONCE);
    uv_timer_stop(&t);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    loopstat_stats s;
    loopstat_get(ls, &s);
    assert_true(s.turns >= 3);
    assert_true(s.slow_turns >= 3);
    assert_true(s.max_ns >= 6 * MS);
    assert_true(s.max_ns < 40 * MS); /* a loaded machine may add a little, not a wait */
    assert_true(s.cpu_max_ns > 0);
    assert_true(s.cpu_max_ns <= s.max_ns + 1 * MS); /* CPU time fits in the busy time */
    loopstat_free(ls); /* closes the handle: the loop must run once more */
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* The handle is unref'd: a loop with nothing else to do returns. */
static void does_not_keep_loop_alive(void **st) {
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    loopstat *ls = loopstat_new();
    assert_int_equal(loopstat_start(ls, &loop), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    loopstat_free(ls);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&loop), 0);
    loopstat_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observe_counts),
        cmocka_unit_test(window_rolls),
        cmocka_unit_test(real_loop_busy_not_idle),
        cmocka_unit_test(does_not_keep_loop_alive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
