/* test-tbucket.c - the byte token bucket behind move_bytes_per_sec
 * (DESIGN.md §6 step 2). Time is simulated: every case passes microseconds
 * in, so the checks are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/tbucket.h"

#define MS 1000u
#define SEC 1000000u

/* init rejects out-of-range and useless settings and leaves tb untouched. */
static void init_limits(void **st) {
    tbucket tb = {.rate = 7};
    assert_int_equal(tbucket_init(&tb, TBUCKET_MAX + 1, 1), KEEL_ERANGE);
    assert_int_equal(tbucket_init(&tb, 1, TBUCKET_MAX + 1), KEEL_ERANGE);
    assert_int_equal(tbucket_init(&tb, 1, 0), KEEL_EINVAL);
    assert_int_equal(tb.rate, 7);
    assert_int_equal(tbucket_init(&tb, TBUCKET_MAX, TBUCKET_MAX), 0);
    assert_int_equal(tbucket_init(&tb, 0, 0), 0);
    assert_int_equal(tbucket_set_rate(&tb, 0, 5), KEEL_EINVAL); /* no burst to refill */
    assert_int_equal(tbucket_set_rate(&tb, 0, TBUCKET_MAX + 1), KEEL_ERANGE);
}

/* A fresh bucket grants its burst at once, then only what the rate earns. */
static void burst_then_rate(void **st) {
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, 1000, 4000), 0);
    uint64_t t = 5 * SEC; /* any start time */
    assert_int_equal(tbucket_take(&tb, t, 3000), 3000);
    assert_int_equal(tbucket_take(&tb, t, 3000), 1000); /* partial: only what is left */
    assert_int_equal(tbucket_take(&tb, t, 3000), 0);
    assert_int_equal(tbucket_take(&tb, t + 1 * MS, 3000), 1);
    assert_int_equal(tbucket_take(&tb, t + 1500 * MS, 3000), 1499);
    assert_int_equal(tbucket_take(&tb, t + 1500 * MS, 0), 0);
    /* A long idle refills only up to the burst. */
    assert_int_equal(tbucket_take(&tb, t + 3600ull * SEC, 100000), 4000);
}

/* 10 s in 1 ms steps, always hungry: the total is exactly burst + rate * 10 s. */
static void long_window_never_exceeds_rate(void **st) {
    const uint64_t rate = 1234567, burst = 65536; /* rate not a multiple of 1000 */
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, rate, burst), 0);
    uint64_t total = 0, worst_window = 0;
    uint64_t per_step[10001];
    for (uint64_t i = 0; i <= 10000; i++) {
        per_step[i] = tbucket_take(&tb, i * MS, 1 << 20);
        total += per_step[i];
        if (i >= 1000) { /* any 1 s window after the first: no more than rate + 1 byte */
            uint64_t w = 0;
            for (uint64_t j = i - 999; j <= i; j++)
                w += per_step[j];
            if (w > worst_window) worst_window = w;
        }
    }
    assert_true(total <= rate * 10 + burst);
    assert_int_equal(total, rate * 10 + burst);
    assert_true(worst_window <= rate + burst);
}

/* wait_us is exact: want is available at now + w and not at now + w - 1. */
static void wait_us_exact(void **st) {
    static const uint64_t rates[] = {1, 3, 1000, 999983, 64ull << 20};
    static const size_t wants[] = {1, 7, 1000, 4096, 65536};
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++)
        for (size_t k = 0; k < sizeof wants / sizeof *wants; k++) {
            tbucket a, b;
            assert_int_equal(tbucket_init(&a, rates[r], 65536), 0);
            assert_int_equal(tbucket_take(&a, 100, 65536), 65536);
            tbucket_take(&a, 877, 1 << 20); /* drain again, leaving a fraction of a byte */
            b = a;
            uint64_t w = tbucket_wait_us(&a, 877, wants[k]);
            assert_true(w > 0);
            assert_int_equal(tbucket_take(&a, 877 + w, wants[k]), wants[k]);
            assert_true(tbucket_take(&b, 877 + w - 1, wants[k]) < wants[k]);
        }
    /* Nothing to wait for when it is already there; more than the burst waits for a full bucket. */
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, 1000, 100), 0);
    assert_int_equal(tbucket_wait_us(&tb, 0, 100), 0);
    assert_int_equal(tbucket_take(&tb, 0, 100), 100);
    assert_int_equal(tbucket_wait_us(&tb, 0, 1000000), 100 * MS);
    assert_int_equal(tbucket_take(&tb, 100 * MS, 1000000), 100);
}

/* Time going backwards grants nothing and re-anchors; it never stalls. */
static void clock_backwards(void **st) {
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, 1000, 1000), 0);
    assert_int_equal(tbucket_take(&tb, 10 * SEC, 1000), 1000);
    assert_int_equal(tbucket_take(&tb, 9 * SEC, 1000), 0);            /* back 1 s: no credit */
    assert_int_equal(tbucket_take(&tb, 9 * SEC + 10 * MS, 1000), 10); /* earns from 9 s */
    assert_int_equal(tbucket_take(&tb, 0, 1000), 0);                  /* back to 0 */
    assert_int_equal(tbucket_wait_us(&tb, 0, 5), 5 * MS);
    assert_int_equal(tbucket_take(&tb, 5 * MS, 1000), 5);
}

/* A rate change settles credit at the old rate first, then earns at the new one. */
static void rate_change(void **st) {
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, 1000, 1 << 20), 0);
    assert_int_equal(tbucket_take(&tb, 0, 1 << 20), 1 << 20);
    assert_int_equal(tbucket_set_rate(&tb, 1 * SEC, 10000), 0); /* 1000 earned at the old rate */
    assert_int_equal(tbucket_take(&tb, 2 * SEC, 1 << 20), 1000 + 10000);
    assert_int_equal(tbucket_set_rate(&tb, 2 * SEC, 10), 0);
    assert_int_equal(tbucket_wait_us(&tb, 2 * SEC, 10), 1 * SEC);
    assert_int_equal(tbucket_take(&tb, 3 * SEC, 1 << 20), 10);
    /* To unlimited and back: limited again starts full. */
    assert_int_equal(tbucket_set_rate(&tb, 3 * SEC, 0), 0);
    assert_int_equal(tbucket_take(&tb, 3 * SEC, 100 << 20), 100 << 20);
    assert_int_equal(tbucket_set_rate(&tb, 3 * SEC, 10), 0);
    assert_int_equal(tbucket_take(&tb, 3 * SEC, 2 << 20), 1 << 20);
    assert_int_equal(tbucket_take(&tb, 3 * SEC, 1), 0);
}

/* Rate 0 grants everything and never waits. */
static void unlimited(void **st) {
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, 0, 0), 0);
    assert_int_equal(tbucket_take(&tb, 0, SIZE_MAX), SIZE_MAX);
    assert_int_equal(tbucket_take(&tb, 0, 1 << 30), 1 << 30);
    assert_int_equal(tbucket_wait_us(&tb, 0, SIZE_MAX), 0);
}

/* The largest rate and burst, over a long idle and a huge jump, neither overflow nor overshoot. */
static void extremes_no_overflow(void **st) {
    tbucket tb;
    assert_int_equal(tbucket_init(&tb, TBUCKET_MAX, TBUCKET_MAX), 0);
    assert_int_equal(tbucket_take(&tb, 0, SIZE_MAX), TBUCKET_MAX);
    assert_int_equal(tbucket_take(&tb, UINT64_MAX, SIZE_MAX), TBUCKET_MAX);
    assert_int_equal(tbucket_init(&tb, 1, TBUCKET_MAX), 0);
    assert_int_equal(tbucket_take(&tb, 0, SIZE_MAX), TBUCKET_MAX);
    assert_int_equal(tbucket_wait_us(&tb, 0, SIZE_MAX), TBUCKET_MAX * SEC);
    assert_int_equal(tbucket_take(&tb, TBUCKET_MAX * SEC - 1, SIZE_MAX), TBUCKET_MAX - 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_limits),
        cmocka_unit_test(burst_then_rate),
        cmocka_unit_test(long_window_never_exceeds_rate),
        cmocka_unit_test(wait_us_exact),
        cmocka_unit_test(clock_backwards),
        cmocka_unit_test(rate_change),
        cmocka_unit_test(unlimited),
        cmocka_unit_test(extremes_no_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
