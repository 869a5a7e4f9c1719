/* test-planner.c - the planner on hand-built clusters: the seed reference
 * case, triggers and hysteresis, draining, skew, constraints, placement and
 * bad input. Random clusters are in test-planner-props.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "plan_fixtures.h"

/* The seed case: 4 nodes of 16 equal partitions and an empty fifth node. */
static void seed_model(plan_model *m) {
    plan_model_init(m);
    fx_nodes(m, 5, 1, 0);
    for (int i = 0; i < 64; i++)
        fx_part(m, i / 16, 25e9, 0);
}

/* Seed article worked example: exactly 12 moves, all to the new node, 13/13/13/13/12. */
static void seed_reference_case(void **st) {
    plan_model m;
    plan_result r;
    int counts[5];
    seed_model(&m);
    assert_int_equal(fx_round(&m, &r), 12);
    for (size_t i = 0; i < r.nmoves; i++) {
        assert_int_equal(r.moves[i].to, 4);
        assert_int_equal(r.moves[i].why, PLAN_WHY_NEW_NODE);
    }
    fx_counts(&m, counts);
    int want[5] = {13, 13, 13, 13, 12};
    assert_memory_equal(counts, want, sizeof want);
    assert_true(fabs(r.floor - 12.8 * 1.5 / 64) < 1e-9); /* 12.8 partitions of weight 1.5/64 */
    assert_true(r.efficiency <= 1.0 + 1e-9);
    assert_true(fx_has_stop(&r, PLAN_STOP_BALANCED));
    assert_false(r.episode.active);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Planning the seed case's result again makes no move, episode open or not. */
static void seed_replan_is_empty(void **st) {
    plan_model m;
    plan_result r;
    seed_model(&m);
    fx_round(&m, &r);
    plan_result_close(&r);
    for (size_t i = 0; i < m.nparts; i++)
        m.parts[i].since_last_move_s = 1e9; /* even with residence long past */
    assert_int_equal(fx_round(&m, &r), 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_NO_TRIGGER));
    plan_result_close(&r);
    m.episode.active = true;
    assert_int_equal(fx_round(&m, &r), 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_BALANCED));
    plan_result_close(&r);
    plan_model_close(&m);
}

/* The same model gives the same plan, move for move. */
static void deterministic(void **st) {
    plan_model m;
    plan_result a, b;
    seed_model(&m);
    assert_int_equal(plan_run(&m, &a), 0);
    assert_int_equal(plan_run(&m, &b), 0);
    assert_int_equal(a.nmoves, b.nmoves);
    assert_memory_equal(a.moves, b.moves, a.nmoves * sizeof *a.moves);
    plan_result_close(&a);
    plan_result_close(&b);
    plan_model_close(&m);
}

/* A draining node is emptied over rounds, and every move leaves it. */
static void draining_empties_node(void **st) {
    plan_model m;
    plan_result r;
    int counts[4];
    plan_model_init(&m);
    fx_nodes(&m, 4, 1, 0);
    for (int i = 0; i < 40; i++)
        fx_part(&m, i % 4, 100 + i, i % 7);
    m.nodes[2].state = PLAN_NODE_DRAINING;
    m.settings.min_residence_s = 0;
    for (int round = 0; round < 3; round++) {
        fx_round(&m, &r);
        for (size_t i = 0; i < r.nmoves; i++) {
            assert_int_equal(r.moves[i].from, 2);
            assert_int_equal(r.moves[i].why, PLAN_WHY_DRAIN);
        }
        plan_result_close(&r);
    }
    fx_counts(&m, counts);
    assert_int_equal(counts[2], 0);
    assert_int_equal(counts[0] + counts[1] + counts[3], 40);
    plan_model_close(&m);
}

/* Capacity 0 drains like state draining; pinned partitions stay and are reported. */
static void capacity_zero_drains_pinned_stay(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 3, 1, 0);
    for (int i = 0; i < 9; i++)
        fx_part(&m, i % 3, 100, 0);
    m.nodes[0].capacity = 0;
    m.parts[0].pinned = true; /* on n1 */
    m.settings.max_moves = 0;
    fx_round(&m, &r);
    assert_int_equal(r.nmoves, 2);
    for (size_t i = 0; i < r.nmoves; i++)
        assert_int_not_equal(r.moves[i].part, 0);
    assert_int_equal(m.parts[0].replicas[0], 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_DRAIN_BLOCKED));
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Skew: a few partitions hold most bytes, yet rounds end within stop_ratio by bytes. */
static void skew_reaches_stop_ratio(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 4, 1, 0);
    m.settings.load_weight = 0;
    m.settings.min_residence_s = 0;
    for (int i = 0; i < 3; i++)
        fx_part(&m, 0, 200, 0); /* 60% of the bytes, all on n1 */
    for (int i = 0; i < 100; i++)
        fx_part(&m, i % 2, 4, 0);
    size_t rounds = 0;
    while (rounds < 20 && (fx_round(&m, &r) || r.episode.active)) {
        plan_result_close(&r);
        rounds++;
    }
    plan_result_close(&r);
    assert_true(rounds < 20);
    assert_true(fx_bytes_ratio(&m) <= 1.10 + 1e-9);
    plan_model_close(&m);
}

/* A partition bigger than any node's share stays put, and a reason says so. */
static void skew_too_large_says_so(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 4, 1, 0);
    m.settings.load_weight = 0;
    m.settings.min_residence_s = 0;
    fx_part(&m, 0, 600, 0); /* 60% of the bytes */
    for (int i = 0; i < 40; i++)
        fx_part(&m, i % 2, 10, 0);
    fx_round(&m, &r);
    assert_true(fx_has_stop(&r, PLAN_STOP_TOO_LARGE));
    bool found = false;
    for (size_t i = 0; i < r.nstops; i++)
        found |= strcmp(r.stops[i].key, "partition-too-large:0") == 0;
    assert_true(found);
    plan_result_close(&r);
    for (int round = 0; round < 10; round++) {
        fx_round(&m, &r);
        for (size_t i = 0; i < r.nmoves; i++)
            assert_int_not_equal(r.moves[i].part, 0);
        plan_result_close(&r);
    }
    assert_int_equal(m.parts[0].replicas[0], 0);
    assert_int_equal(fx_round(&m, &r), 0); /* settled: no back-and-forth */
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Stale metrics on a live node: empty plan, reason stale-metrics:<node>. */
static void stale_metrics_empty_plan(void **st) {
    plan_model m;
    plan_result r;
    seed_model(&m);
    m.nodes[3].metrics_age_s = 30;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 0);
    assert_int_equal(r.nstops, 1);
    assert_string_equal(r.stops[0].key, "stale-metrics:n4");
    plan_result_close(&r);
    m.nodes[3].state = PLAN_NODE_DOWN; /* a down node's age does not matter */
    assert_int_equal(plan_run(&m, &r), 0);
    assert_false(fx_has_stop(&r, PLAN_STOP_STALE_METRICS));
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Between stop_ratio and start_ratio: nothing starts, but an open episode continues. */
static void hysteresis_dead_band(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 2, 1, 0);
    m.settings.load_weight = 0;
    for (int i = 0; i < 120; i++)
        fx_part(&m, i < 66 ? 0 : 1, 10, 0); /* 66:54, max/mean 1.1 < 1.2 < 1.25 */
    m.parts[0].bytes = 15;                  /* nudge to 1.14 */
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_NO_TRIGGER));
    plan_result_close(&r);
    m.episode.active = true;
    assert_true(fx_round(&m, &r) > 0);
    assert_true(r.imbalance_after <= 1.10);
    assert_false(r.episode.active);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Heterogeneous capacities converge to shares proportional to capacity. */
static void heterogeneous_proportional(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 1, 1, 0);
    fx_nodes(&m, 1, 2, 0);
    fx_nodes(&m, 1, 4, 0);
    for (int i = 0; i < 140; i++)
        fx_part(&m, 0, 1, 0);
    m.settings.max_moves = 0;
    fx_round(&m, &r);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(r.util_after[i] - 1) <= 0.10 + 1e-9);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Ties in gain take the colder partition (less load per byte). */
static void tie_takes_colder(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 2, 1, 0);
    m.settings.load_weight = 0; /* equal weights, different heat */
    fx_part(&m, 0, 100, 50);
    fx_part(&m, 0, 100, 1);
    fx_part(&m, 0, 100, 30);
    fx_part(&m, 0, 100, 20);
    m.settings.max_moves = 1;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 1);
    assert_int_equal(r.moves[0].part_id, 1);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Pinned, in-flight and recently moved partitions never move. */
static void unmovable_partitions_stay(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 2, 1, 0);
    for (int i = 0; i < 8; i++)
        fx_part(&m, 0, 100, 0);
    for (int i = 0; i < 6; i++) {
        m.parts[i].pinned = i < 2;
        m.parts[i].in_flight = i >= 2 && i < 4;
        m.parts[i].since_last_move_s = i >= 4 ? 10 : 1e9;
    }
    m.settings.max_moves = 0;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 2);
    for (size_t i = 0; i < r.nmoves; i++)
        assert_true(r.moves[i].part >= 6);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* A move in flight counts on its destination, so the next round does not correct twice. */
static void moving_to_counts_on_destination(void **st) {
    plan_model m;
    plan_result r;
    seed_model(&m);
    for (int i = 0; i < 12; i++) { /* the seed plan, still running */
        m.parts[(i % 4) * 16 + i / 4].moving_to = 4;
        m.parts[(i % 4) * 16 + i / 4].in_flight = true;
    }
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 0);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Destinations above the low watermark get nothing; a node above high sheds. */
static void disk_watermarks(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 3, 1, 0);
    for (int i = 0; i < 30; i++)
        fx_part(&m, i % 3, 100, 0);
    for (int i = 0; i < 3; i++)
        m.nodes[i].disk_capacity = 1000;
    m.nodes[0].disk_used = 920; /* above high: sheds */
    m.nodes[1].disk_used = 860; /* above low: may not receive */
    m.nodes[2].disk_used = 300;
    fx_round(&m, &r);
    assert_true(r.nmoves >= 1);
    for (size_t i = 0; i < r.nmoves; i++) {
        assert_int_equal(r.moves[i].from, 0);
        assert_int_equal(r.moves[i].to, 2);
        assert_int_equal(r.moves[i].why, PLAN_WHY_DISK_HIGH);
    }
    plan_result_close(&r);
    plan_model_close(&m);
}

/* RF 2: never two replicas on a node, nor in a rack when there are enough racks. */
static void replicas_and_racks(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 4, 1, 2); /* racks r0 (n1, n3) and r1 (n2, n4) */
    for (int i = 0; i < 20; i++) {
        plan_part p;
        plan_part_default(&p, i);
        p.replicas[0] = 0; /* n1 (r0) and n2 (r1) hold everything */
        p.replicas[1] = 1;
        p.nreplicas = 2;
        p.bytes = 10;
        assert_int_equal(plan_model_add_part(&m, &p), 0);
    }
    m.settings.max_moves = 0;
    fx_round(&m, &r);
    assert_true(r.nmoves > 0);
    for (size_t i = 0; i < m.nparts; i++) {
        int a = m.parts[i].replicas[0], b = m.parts[i].replicas[1];
        assert_int_not_equal(a, b);
        assert_int_not_equal(a % 2, b % 2); /* different racks */
    }
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Bootstrap: orphaned partitions go to the least-utilised eligible nodes. */
static void place_orphans(void **st) {
    plan_model m;
    plan_result r;
    int counts[4];
    size_t placed, unplaced;
    plan_model_init(&m);
    fx_nodes(&m, 4, 1, 0);
    m.nodes[3].state = PLAN_NODE_DOWN;
    for (int i = 0; i < 30; i++) {
        plan_part p;
        plan_part_default(&p, i);
        assert_int_equal(plan_model_add_part(&m, &p), 0);
    }
    assert_int_equal(plan_place(&m, &placed, &unplaced), 0);
    assert_int_equal(placed, 30);
    assert_int_equal(unplaced, 0);
    fx_counts(&m, counts);
    assert_int_equal(counts[0], 10);
    assert_int_equal(counts[1], 10);
    assert_int_equal(counts[2], 10);
    assert_int_equal(counts[3], 0);
    assert_int_equal(fx_round(&m, &r), 0);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Bad input gets a clear error code and a message naming the field, never a crash. */
static void bad_input_codes(void **st) {
    plan_model m;
    plan_result r;
    plan_node n;
    plan_part p;
    plan_model_init(&m);
    fx_nodes(&m, 2, 1, 0);
    plan_node_default(&n, "bad");
    n.capacity = -1;
    assert_int_equal(plan_model_add_node(&m, &n), KEEL_EINVAL);
    plan_node_default(&n, "n1");
    assert_int_equal(plan_model_add_node(&m, &n), KEEL_EEXIST);
    plan_part_default(&p, 1);
    p.replicas[0] = 7;
    p.nreplicas = 1;
    assert_int_equal(plan_model_add_part(&m, &p), KEEL_ENOTFOUND);
    fx_part(&m, 0, 1, 0);
    fx_part(&m, 1, 1, 0);
    m.parts[1].id = 0; /* direct edit: duplicate id */
    assert_int_equal(plan_run(&m, &r), KEEL_EEXIST);
    assert_non_null(strstr(r.error, "partitions[1].id"));
    plan_result_close(&r);
    m.parts[1].id = 1;
    m.nodes[1].capacity = -2; /* direct edit: negative capacity */
    assert_int_equal(plan_run(&m, &r), KEEL_EINVAL);
    assert_non_null(strstr(r.error, "nodes[1].capacity"));
    plan_result_close(&r);
    m.nodes[1].capacity = 1;
    m.parts[0].replicas[0] = 9; /* direct edit: unknown node */
    assert_int_equal(plan_run(&m, &r), KEEL_ENOTFOUND);
    assert_int_equal(r.nmoves, 0);
    plan_result_close(&r);
    m.parts[0].replicas[0] = 0;
    m.settings.stop_ratio = 2; /* above start_ratio */
    assert_int_equal(plan_run(&m, &r), KEEL_EINVAL);
    assert_non_null(strstr(r.error, "start_ratio"));
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Bad JSON models are refused with the offending field named. */
static void bad_json_models(void **st) {
    static const struct {
        const char *json, *field;
    } bad[] = {
        {"{\"nodes\": [", "JSON"},
        {"[]", "model"},
        {"{\"partitions\": []}", "nodes"},
        {"{\"nodes\": [{\"id\": \"a\", \"capacity\": -1}]}", "nodes[0].capacity"},
        {"{\"nodes\": [{\"id\": \"a\", \"capacity\": \"1\"}]}", "nodes[0].capacity"},
        {"{\"nodes\": [{\"id\": \"a\"}, {\"id\": \"a\"}]}", "nodes[1].id"},
        {"{\"nodes\": [{\"id\": \"a\", \"state\": \"gone\"}]}", "nodes[0].state"},
        {"{\"nodes\": [{\"id\": \"a\", \"capcity\": 1}]}", "capcity"},
        {"{\"nodes\": [{\"id\": \"a\"}], \"partitions\": [{\"id\": 0, \"replicas\": [\"b\"]}]}",
         "partitions[0].replicas[0]"},
        {"{\"nodes\": [{\"id\": \"a\"}], \"partitions\": [{\"id\": 0}, {\"id\": 0}]}",
         "partitions[1].id"},
        {"{\"nodes\": [{\"id\": \"a\"}], \"partitions\": [{\"id\": -1}]}", "partitions[0].id"},
        {"{\"nodes\": [{\"id\": \"a\"}], \"partitions\": [{\"id\": 0, \"pinned\": 1}]}",
         "partitions[0].pinned"},
        {"{\"nodes\": [{\"id\": \"a\"}], \"settings\": {\"stop_ratio\": \"x\"}}",
         "settings.stop_ratio"},
        {"{\"nodes\": [{\"id\": \"a\"}], \"settings\": {\"max_moves_per_round\": 1.5}}",
         "max_moves_per_round"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        plan_model m;
        char err[256] = "";
        int rc = plan_model_from_json(bad[i].json, &m, err, sizeof err);
        if (rc >= 0 || !strstr(err, bad[i].field))
            fail_msg("case %zu: rc %d err \"%s\", want field %s", i, rc, err, bad[i].field);
        plan_model_close(&m);
    }
}

/* A model written as JSON reads back to the same plan; defaults fill omitted fields. */
static void json_round_trip(void **st) {
    plan_model m, back;
    plan_result a, b;
    char err[256];
    seed_model(&m);
    m.nodes[1].disk_capacity = 1e12;
    m.parts[3].pinned = true;
    char *text = plan_model_to_json(&m);
    assert_non_null(text);
    assert_int_equal(plan_model_from_json(text, &back, err, sizeof err), 0);
    free(text);
    assert_int_equal(back.nparts, 64);
    assert_true(back.parts[3].pinned);
    assert_int_equal(plan_run(&m, &a), 0);
    assert_int_equal(plan_run(&back, &b), 0);
    assert_int_equal(a.nmoves, b.nmoves);
    char *ja = plan_result_to_json(&m, &a, 0);
    assert_non_null(strstr(ja, "\"reasons_for_stopping\""));
    assert_non_null(strstr(ja, "\"efficiency\""));
    free(ja);
    plan_result_close(&a);
    plan_result_close(&b);
    plan_model_close(&back);
    assert_int_equal(plan_model_from_json("{\"nodes\":[{\"id\":\"x\"}]}", &back, err, sizeof err),
                     0);
    assert_true(back.nodes[0].capacity == 1 && back.settings.max_moves == 16);
    assert_true(back.settings.stop_ratio == 1.10 && back.settings.min_residence_s == 600);
    plan_model_close(&back);
    plan_model_close(&m);
}

/* Thousands of byte-mutated models: each parses and plans or is refused, never crashes. */
static void json_mutations_never_crash(void **st) {
    plan_model m;
    seed_model(&m);
    m.nodes[2].state = PLAN_NODE_DRAINING;
    m.nodes[1].disk_capacity = 1e12;
    char *good = plan_model_to_json(&m);
    plan_model_close(&m);
    size_t len = strlen(good);
    char *buf = malloc(len + 1);
    uint64_t rng = 42;
    static const char junk[] = "{}[]\",:-0123456789.eE+ \\nulltruefalse";
    for (int i = 0; i < 3000; i++) {
        memcpy(buf, good, len + 1);
        for (int k = 1 + (int)(fx_rand(&rng) % 4); k > 0; k--)
            buf[fx_rand(&rng) % len] = junk[fx_rand(&rng) % (sizeof junk - 1)];
        if (i % 7 == 0) buf[fx_rand(&rng) % len] = 0; /* truncate */
        char err[256];
        plan_result r;
        if (plan_model_from_json(buf, &m, err, sizeof err) == 0) {
            assert_true(plan_run(&m, &r) == 0);
            plan_result_close(&r);
        } else {
            assert_true(err[0] != 0);
        }
        plan_model_close(&m);
    }
    free(buf);
    free(good);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seed_reference_case),
        cmocka_unit_test(seed_replan_is_empty),
        cmocka_unit_test(deterministic),
        cmocka_unit_test(draining_empties_node),
        cmocka_unit_test(capacity_zero_drains_pinned_stay),
        cmocka_unit_test(skew_reaches_stop_ratio),
        cmocka_unit_test(skew_too_large_says_so),
        cmocka_unit_test(stale_metrics_empty_plan),
        cmocka_unit_test(hysteresis_dead_band),
        cmocka_unit_test(heterogeneous_proportional),
        cmocka_unit_test(tie_takes_colder),
        cmocka_unit_test(unmovable_partitions_stay),
        cmocka_unit_test(moving_to_counts_on_destination),
        cmocka_unit_test(disk_watermarks),
        cmocka_unit_test(replicas_and_racks),
        cmocka_unit_test(place_orphans),
        cmocka_unit_test(bad_input_codes),
        cmocka_unit_test(bad_json_models),
        cmocka_unit_test(json_round_trip),
        cmocka_unit_test(json_mutations_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
