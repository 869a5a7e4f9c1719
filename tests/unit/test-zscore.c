/* test-zscore.c - the sorted-set score encoding (core/zscore.h): byte order
 * equals numeric order, on edge cases and random doubles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/zscore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_enc(double a, double b) {
    char ea[8], eb[8];
    zscore_encode(ea, a);
    zscore_encode(eb, b);
    return memcmp(ea, eb, 8);
}

static int sign(int v) {
    return (v > 0) - (v < 0);
}

/* Byte order of encodings equals numeric order on fixed edge cases. */
static void edge_order(void **state) {
    (void)state;
    const double v[] = {-INFINITY, -1e308, -1.5, -1.0, -4.9e-324, 0.0,
                        4.9e-324,  1.0,    1.5,  1e308, INFINITY};
    size_t n = sizeof v / sizeof v[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            assert_int_equal(sign(cmp_enc(v[i], v[j])), (v[i] > v[j]) - (v[i] < v[j]));
}

/* -0 and +0 encode to the same bytes, and decode to +0. */
static void negative_zero_is_zero(void **state) {
    (void)state;
    char a[8], b[8];
    zscore_encode(a, -0.0);
    zscore_encode(b, 0.0);
    assert_memory_equal(a, b, 8);
    double d = zscore_decode(a);
    assert_true(d == 0 && !signbit(d));
}

static double rnd_double(void) {
    switch (rand() % 4) {
    case 0: /* any bit pattern that is not NaN */
        for (;;) {
            uint64_t u = 0;
            for (int i = 0; i < 4; i++)
                u = u << 16 | (uint64_t)(rand() & 0xffff);
            double d;
            memcpy(&d, &u, 8);
            if (!isnan(d)) return d;
        }
    case 1:
        return (rand() % 2001 - 1000) / 7.0;
    case 2:
        return (rand() % 2 ? 1 : -1) * ldexp(rand() / (double)RAND_MAX, rand() % 2100 - 1075);
    default:
        return (double)(rand() % 11 - 5);
    }
}

/* 200,000 random pairs, negatives and subnormals included: memcmp of the
 * encodings orders them as < does, and decode(encode(d)) == d. */
static void random_order_and_roundtrip(void **state) {
    (void)state;
    srand(12345);
    for (int i = 0; i < 200000; i++) {
        double a = rnd_double(), b = rnd_double();
        assert_int_equal(sign(cmp_enc(a, b)), (a > b) - (a < b));
        char e[8];
        zscore_encode(e, a);
        double back = zscore_decode(e);
        assert_true(back == a);
        if (a != 0) assert_memory_equal(&back, &a, 8); /* exact bits, not just == */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edge_order),
        cmocka_unit_test(negative_zero_is_zero),
        cmocka_unit_test(random_order_and_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
