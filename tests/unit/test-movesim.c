/* test-movesim.c - the move protocol under the deterministic simulator
 * (tests/sim/movesim.h; docs/simulation.md).
 *
 *   ci_seeds     a fixed set of seeds with every fault: no violation
 *   replay       a seed run twice gives the same events, in the same order
 *   mutations    each deliberately broken protocol is caught within the CI
 *                seeds: the simulator can fail
 *   soak         MOVESIM_SECONDS=N: random seeds for N seconds (make sim-soak)
 *
 * MOVESIM_SEEDS overrides the CI seed count; a failure prints the seed, and
 * MOVESIM_SEED=S MOVESIM_VERBOSE=1 replays it with every event printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../sim/movesim.h"
#include "core/log.h"
#include "node/move_env.h"

#ifdef KEEL_SANITIZED
#define CI_SEEDS 6 /* the ASan build runs the same code, slower */
#else
#define CI_SEEDS 20
#endif

#define MUTATION_SEEDS 60 /* a broken protocol must be caught within these */

static unsigned ci_seeds(void) {
    const char *e = getenv("MOVESIM_SEEDS");
    return e && atoi(e) > 0 ? (unsigned)atoi(e) : CI_SEEDS;
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run(uint64_t seed, unsigned node_mut, unsigned coord_mut, movesim_result *r) {
    movesim_opts o = {.seed = seed, .node_mutations = node_mut, .coord_mutations = coord_mut};
    const char *v = getenv("MOVESIM_VERBOSE");
    o.verbose = v ? atoi(v) : 0;
    return movesim_run(&o, r);
}

static void test_ci_seeds(void **state) {
    (void)state;
    const char *one = getenv("MOVESIM_SEED");
    unsigned n = one ? 1 : ci_seeds();
    double t0 = wall();
    unsigned done = 0, aborted = 0, started = 0;
    uint64_t events = 0, acked = 0, reads = 0, faults = 0, sim_ms = 0;
    for (unsigned i = 0; i < n; i++) {
        uint64_t seed = one ? strtoull(one, NULL, 10) : 1000 + i;
        movesim_result r;
        assert_int_equal(run(seed, 0, 0, &r), 0);
        if (r.violation) fail_msg("%s", r.what);
        done += r.moves_done, aborted += r.moves_aborted, started += r.moves_started;
        events += r.events, acked += r.writes_acked, reads += r.reads_checked;
        faults += r.faults, sim_ms += r.sim_ms;
        assert_int_equal(r.moves_done + r.moves_aborted, r.moves_started);
        assert_true(r.writes_acked > 0);
        assert_true(r.reads_checked > 0);
    }
    double dt = wall() - t0;
    assert_true(done > 0); /* moves really commit under faults, not only abort */
    printf("movesim: %u seeds in %.1f s wall (%.0f seeds/min): %u moves (%u done, %u aborted), "
           "%.1f moves/s of wall time, %llu events, %llu writes acked, %llu reads checked, "
           "%llu faults, %.0f s simulated\n",
           n, dt, n / dt * 60, started, done, aborted, started / dt, (unsigned long long)events,
           (unsigned long long)acked, (unsigned long long)reads, (unsigned long long)faults,
           sim_ms / 1e3);
}

static void test_replay(void **state) {
    (void)state;
    movesim_result a, b;
    assert_int_equal(run(4242, 0, 0, &a), 0);
    assert_int_equal(run(4242, 0, 0, &b), 0);
    assert_int_equal(a.violation, 0);
    assert_true(a.events > 1000);
    assert_int_equal(a.events, b.events);
    assert_int_equal(a.trace, b.trace);
    assert_int_equal(a.writes_acked, b.writes_acked);
    assert_int_equal(a.moves_done, b.moves_done);
    assert_int_equal(a.faults, b.faults);
    movesim_result c; /* and another seed is another run */
    assert_int_equal(run(4243, 0, 0, &c), 0);
    assert_true(c.trace != a.trace);
    printf("movesim replay: seed 4242 twice, %llu events, trace %016llx both times\n",
           (unsigned long long)a.events, (unsigned long long)a.trace);
}

/* A broken protocol must be caught within the CI seed set. */
static void caught(const char *name, unsigned node_mut, unsigned coord_mut) {
    unsigned n = MUTATION_SEEDS;
    for (unsigned i = 0; i < n; i++) {
        movesim_result r;
        assert_int_equal(run(1000 + i, node_mut, coord_mut, &r), 0);
        if (r.violation) {
            printf("movesim mutation %s: caught at CI seed %u of %u: %s\n", name, i + 1, n,
                   r.what);
            return;
        }
    }
    fail_msg("mutation %s went unnoticed in %u seeds", name, n);
}

static void test_mutation_fence_timer(void **state) {
    (void)state;
    caught("fence-lifted-on-a-timer", MOVE_MUT_FENCE_TIMER, 0);
}

static void test_mutation_commit_unverified(void **state) {
    (void)state;
    caught("commit-before-verify", 0, SIM_MUT_COMMIT_UNVERIFIED);
}

static void test_mutation_no_fence_record(void **state) {
    (void)state;
    caught("fence-not-persisted", MOVE_MUT_NO_FENCE_RECORD, 0);
}

static void test_soak(void **state) {
    (void)state;
    const char *e = getenv("MOVESIM_SECONDS");
    if (!e || atoi(e) <= 0) skip();
    double until = wall() + atoi(e), t0 = wall();
    uint64_t seed = (uint64_t)time(NULL) * 1000003u, n = 0, moves = 0;
    while (wall() < until) {
        movesim_result r;
        fprintf(stderr, "movesim soak: seed %llu\n", (unsigned long long)seed); /* a crash names it */
        assert_int_equal(run(seed, 0, 0, &r), 0);
        if (r.violation) fail_msg("%s (replay: MOVESIM_SEED=%llu build/test-movesim)", r.what,
                                  (unsigned long long)seed);
        moves += r.moves_started;
        seed++, n++;
    }
    double dt = wall() - t0;
    printf("movesim soak: %llu seeds in %.0f s (%.0f seeds/min), %llu moves, %.1f moves/s\n",
           (unsigned long long)n, dt, n / dt * 60, (unsigned long long)moves, moves / dt);
}

int main(void) {
    keel_log_set_level(KEEL_LOG_ERROR + 1); /* the engines' logs are not the test's output */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ci_seeds),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_mutation_fence_timer),
        cmocka_unit_test(test_mutation_commit_unverified),
        cmocka_unit_test(test_mutation_no_fence_record),
        cmocka_unit_test(test_soak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
