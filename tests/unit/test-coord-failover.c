/* test-coord-failover.c - the pure rules of the coordinator's failover
 * (coord_rep.h, issue 11 step 4): the choice of the new leader and the
 * lease wait (C2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "coord/coord_rep.h"

#include <stdio.h>
#include <string.h>

static mapstore_partition part(const char *const *ids, unsigned n, unsigned isr) {
    mapstore_partition p;
    memset(&p, 0, sizeof p);
    for (unsigned i = 0; i < n; i++)
        snprintf(p.replicas[i], sizeof p.replicas[i], "%s", ids[i]);
    snprintf(p.owner, sizeof p.owner, "%s", ids[0]);
    p.nreplicas = n;
    p.isr = isr;
    return p;
}

/* Only UP ISR members, never the leader; the one leading fewest wins,
 * then list order. */
static void test_pick_isr_only(void **state) {
    (void)state;
    const char *ids[] = {"a", "b", "c", "d"};
    mapstore_partition p = part(ids, 4, 1 | 2 | 8); /* a, b, d in sync; c out */
    int up[] = {0, 1, 1, 1};
    assert_int_equal(coord_failover_pick(&p, up, NULL, 0, NULL), 1);
    unsigned leads[] = {9, 5, 0, 2};
    assert_int_equal(coord_failover_pick(&p, up, leads, 0, NULL), 3);
    up[1] = up[3] = 0; /* only c (out of sync) is up */
    assert_int_equal(coord_failover_pick(&p, up, leads, 0, NULL), -1);
    up[0] = 1; /* the leader itself is never picked */
    assert_int_equal(coord_failover_pick(&p, up, leads, 0, NULL), -1);
}

/* Unclean: any UP replica, ISR members still first. */
static void test_pick_unclean(void **state) {
    (void)state;
    const char *ids[] = {"a", "b", "c"};
    mapstore_partition p = part(ids, 3, 1 | 4); /* c in sync, b out */
    int up[] = {0, 1, 1};
    assert_int_equal(coord_failover_pick(&p, up, NULL, 1, NULL), 2);
    up[2] = 0;
    assert_int_equal(coord_failover_pick(&p, up, NULL, 1, NULL), 1);
    assert_int_equal(coord_failover_pick(&p, up, NULL, 0, NULL), -1);
}

/* A named target: only it, and only if it qualifies. */
static void test_pick_target(void **state) {
    (void)state;
    const char *ids[] = {"a", "b", "c"};
    mapstore_partition p = part(ids, 3, 1 | 2); /* b in sync, c out */
    int up[] = {1, 1, 1};
    assert_int_equal(coord_failover_pick(&p, up, NULL, 0, "b"), 1);
    assert_int_equal(coord_failover_pick(&p, up, NULL, 0, "c"), -1);
    assert_int_equal(coord_failover_pick(&p, up, NULL, 1, "c"), 2);
    assert_int_equal(coord_failover_pick(&p, up, NULL, 0, "zz"), -1);
    assert_int_equal(coord_failover_pick(&p, up, NULL, 0, ""), 1);
}

/* C2 (a): the old leader cannot hold a lease once lease * 1.05 + 50 ms
 * has passed since the last lease-1 reply; before any reply from this
 * coordinator its start counts. */
static void test_lease_wait(void **state) {
    (void)state;
    assert_int_equal(coord_lease_wait_ms(2000), 2150);
    assert_int_equal(coord_lease_wait_ms(400), 470);
    assert_false(coord_lease_gone(10000 + 2149, 10000, 0, 2000));
    assert_true(coord_lease_gone(10000 + 2150, 10000, 0, 2000));
    /* never granted by this coordinator: from its start */
    assert_false(coord_lease_gone(5000 + 2000, 0, 5000, 2000));
    assert_true(coord_lease_gone(5000 + 2150, 0, 5000, 2000));
    /* a grant before this coordinator started counts from the start */
    assert_false(coord_lease_gone(5000 + 2100, 100, 5000, 2000));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_isr_only),
        cmocka_unit_test(test_pick_unclean),
        cmocka_unit_test(test_pick_target),
        cmocka_unit_test(test_lease_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
