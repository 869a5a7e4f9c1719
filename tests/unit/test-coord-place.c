/* test-coord-place.c - followers of a newly placed partition (coord_place.h,
 * issue 11 step 4, C7): distinct nodes, never the leader, only eligible
 * ones, anti-affine by rack, spread evenly, and what exists when there are
 * fewer nodes than RF. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "coord/coord_place.h"

#include <string.h>

static void nodes_init(coord_place_node *n, size_t nn, const char *const *racks) {
    memset(n, 0, nn * sizeof *n);
    for (size_t i = 0; i < nn; i++) {
        n[i].rack = racks ? racks[i] : "";
        n[i].eligible = 1;
    }
}

/* RF 3 on 4 nodes, 64 partitions with leaders taking turns: every replica
 * set is 3 distinct nodes led by its leader, and each node holds 48. */
static void test_distinct_and_spread(void **state) {
    (void)state;
    coord_place_node n[4];
    nodes_init(n, 4, NULL);
    for (size_t p = 0; p < 64; p++) {
        size_t out[6], leader = p % 4;
        assert_int_equal(coord_place_followers(n, 4, leader, 3, out), 2);
        assert_true(out[0] != leader && out[1] != leader && out[0] != out[1]);
        assert_true(out[0] < 4 && out[1] < 4);
    }
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(n[i].count, 48);
}

/* Racks a, a, b, c: with RF 3 no partition has two replicas in rack a
 * while b and c are free. */
static void test_rack_anti_affinity(void **state) {
    (void)state;
    const char *racks[] = {"a", "a", "b", "c"};
    coord_place_node n[4];
    nodes_init(n, 4, racks);
    for (size_t p = 0; p < 32; p++) {
        size_t out[6], leader = p % 4;
        assert_int_equal(coord_place_followers(n, 4, leader, 3, out), 2);
        const char *r[3] = {racks[leader], racks[out[0]], racks[out[1]]};
        assert_true(strcmp(r[0], r[1]) && strcmp(r[0], r[2]) && strcmp(r[1], r[2]));
    }
    /* Two racks, RF 3: the third copy shares a rack (rather than none). */
    const char *two[] = {"a", "a", "b"};
    coord_place_node m[3];
    nodes_init(m, 3, two);
    size_t out[6];
    assert_int_equal(coord_place_followers(m, 3, 0, 3, out), 2);
    assert_int_equal(out[0], 2); /* rack b first */
    assert_int_equal(out[1], 1);
}

/* Ineligible nodes (down, draining, quarantined) get nothing; fewer
 * eligible nodes than RF gives what exists; RF 1 gives no followers. */
static void test_eligible_and_short(void **state) {
    (void)state;
    coord_place_node n[3];
    nodes_init(n, 3, NULL);
    n[1].eligible = 0;
    size_t out[6];
    assert_int_equal(coord_place_followers(n, 3, 0, 3, out), 1);
    assert_int_equal(out[0], 2);
    assert_int_equal(n[1].count, 0);
    assert_int_equal(coord_place_followers(n, 3, 2, 1, out), 0);
    assert_int_equal(n[2].count, 2); /* its leadership counts */
    assert_int_equal(coord_place_followers(n, 3, 3, 3, out), 0); /* no such leader */
    coord_place_node one[1];
    nodes_init(one, 1, NULL);
    assert_int_equal(coord_place_followers(one, 1, 0, 3, out), 0);
}

/* Existing counts steer followers to the emptier nodes. */
static void test_fills_emptier_nodes(void **state) {
    (void)state;
    coord_place_node n[4];
    nodes_init(n, 4, NULL);
    n[1].count = 10;
    size_t out[6];
    assert_int_equal(coord_place_followers(n, 4, 0, 3, out), 2);
    assert_true(out[0] != 1 && out[1] != 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_and_spread),
        cmocka_unit_test(test_rack_anti_affinity),
        cmocka_unit_test(test_eligible_and_short),
        cmocka_unit_test(test_fills_emptier_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
