/* test-planner-rf.c - the planner at RF > 1 (issue 11 step 5): bytes balanced
 * over every replica, leader load balanced by leadership transfers, RF
 * restored after a node is lost or the setting changes, constraints kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "plan_fixtures.h"

#include <math.h>
#include <string.h>

/* A partition with replicas on nodes a, b, c (leader a). */
static plan_part *rf3_part(plan_model *m, int a, int b, int c, double bytes, double load) {
    plan_part p;
    plan_part_default(&p, m->nparts);
    p.replicas[0] = a, p.replicas[1] = b, p.replicas[2] = c;
    p.nreplicas = 3;
    p.bytes = bytes;
    p.load = load;
    if (plan_model_add_part(m, &p)) abort();
    return &m->parts[m->nparts - 1];
}

/* 4 nodes, RF 3, 64 equal partitions: replica sets rotate over the nodes
 * (48 replicas and 16 leaders per node). */
static void four_node_rf3(plan_model *m, double load) {
    plan_model_init(m);
    fx_nodes(m, 4, 1, 0);
    for (int i = 0; i < 64; i++)
        rf3_part(m, i % 4, (i + 1) % 4, (i + 2) % 4, 1000, load);
    m->settings.replicas = 3;
}

/* Every partition: distinct replicas, none on a DOWN node; returns min and
 * max replica counts. */
static void check_replicas(const plan_model *m, int rf) {
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        assert_int_equal(p->nreplicas, rf);
        for (int a = 0; a < p->nreplicas; a++) {
            assert_int_not_equal(m->nodes[p->replicas[a]].state, PLAN_NODE_DOWN);
            for (int b = a + 1; b < p->nreplicas; b++)
                assert_int_not_equal(p->replicas[a], p->replicas[b]);
        }
    }
}

static double bytes_on(const plan_model *m, int node) {
    double b = 0;
    for (size_t i = 0; i < m->nparts; i++)
        for (int r = 0; r < m->parts[i].nreplicas; r++)
            b += m->parts[i].replicas[r] == node ? m->parts[i].bytes : 0;
    return b;
}

/* The reference: a fifth node joins a 4-node RF 3 cluster with equal
 * bytes; moved bytes / floor <= 1.1 and final max/mean bytes <= 1.10, RF 3
 * kept on distinct nodes, and a further round moves nothing. */
static void fifth_node_rf3(void **st) {
    plan_model m;
    plan_result r;
    four_node_rf3(&m, 10);
    fx_nodes(&m, 1, 1, 0);
    double floor = -1, moved = 0;
    for (int round = 0; round < 20; round++) {
        size_t n = fx_round(&m, &r);
        if (floor < 0) floor = r.floor_bytes;
        moved += r.moved_bytes;
        assert_int_equal(r.nrepairs, 0);
        plan_result_close(&r);
        if (!n) break;
    }
    check_replicas(&m, 3);
    double ratio = fx_bytes_ratio(&m);
    printf("fifth node, RF 3: floor %.0f bytes, moved %.0f bytes, moved/floor %.3f, "
           "final max/mean bytes %.3f\n",
           floor, moved, moved / floor, ratio);
    assert_true(floor > 0);
    assert_true(moved / floor <= 1.1);
    assert_true(ratio <= 1.10);
    assert_int_equal(fx_round(&m, &r), 0);
    assert_int_equal(r.nrepairs, 0);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* A fourth node joins a 3-node RF 3 cluster, 1024 partitions, no move
 * budget (keel demo's shape: every node holds every partition, so every
 * source's heaviest partitions are the same ones). The first round reaches
 * the dead band: no source stops "stuck" because the destination already
 * holds its first candidates (it did, at 1.21x, before PLAN_SKIP_ITEMS). */
static void fourth_node_rf3(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 3, 1, 0);
    for (int i = 0; i < 1024; i++)
        rf3_part(&m, i % 3, (i + 1) % 3, (i + 2) % 3, 1000 + (i * 37) % 200, 5 + (i * 13) % 7);
    m.settings.replicas = 3;
    m.settings.max_moves = 0; /* keel demo: max_moves_per_round 0 */
    fx_nodes(&m, 1, 1, 0);
    double floor = -1, moved = 0;
    int rounds = 0;
    for (; rounds < 10; rounds++) {
        size_t n = fx_round(&m, &r);
        if (floor < 0) floor = r.floor_bytes;
        moved += r.moved_bytes;
        for (size_t k = 0; k < r.nstops; k++) {
            if (!strncmp(r.stops[k].key, "stuck", 5)) print_message("%s\n", r.stops[k].text);
            assert_true(strncmp(r.stops[k].key, "stuck", 5) != 0);
        }
        plan_result_close(&r);
        if (!n) break;
    }
    check_replicas(&m, 3);
    double ratio = fx_bytes_ratio(&m);
    printf("fourth node, RF 3: %d planning round(s) with moves, floor %.0f, moved %.0f, "
           "moved/floor %.3f, max/mean bytes %.3f\n",
           rounds, floor, moved, moved / floor, ratio);
    assert_int_equal(rounds, 1);
    assert_true(moved / floor <= 1.1);
    assert_true(ratio <= 1.10);
    plan_model_close(&m);
}

/* A replicated partition's load is its leader's: leader-load skew on a
 * byte-balanced cluster gives leadership transfers to in-sync followers and
 * no data move; a lagging follower is never chosen. */
static void leader_skew_transfers(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 3, 1, 0);
    for (int i = 0; i < 30; i++) {
        plan_part *p = rf3_part(&m, 0, 1, 2, 1000, 100); /* n1 leads everything */
        if (i % 2) p->lagging = 1u << 2;                 /* n3 out of the ISR */
    }
    m.settings.replicas = 3;
    m.settings.max_moves = 0;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 0);
    assert_int_equal(r.nrepairs, 0);
    assert_true(r.nleads >= 15);
    assert_true(r.lead_imbalance_before > 2.9);
    printf("leader skew: %zu transfers, leader load max/target %.2f -> %.2f\n", r.nleads,
           r.lead_imbalance_before, r.lead_imbalance_after);
    assert_true(r.lead_imbalance_after <= m.settings.stop_ratio + 1e-9);
    for (size_t i = 0; i < r.nleads; i++) {
        const plan_lead *ld = &r.leads[i];
        const plan_part *p = &m.parts[ld->part];
        assert_int_equal(ld->from, 0);
        assert_int_equal(p->replicas[ld->replica], ld->to);
        assert_false(p->lagging >> ld->replica & 1);
    }
    assert_int_equal(plan_apply(&m, &r), 0);
    plan_result_close(&r);
    check_replicas(&m, 3);
    /* balanced now: the next round transfers nothing */
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nleads, 0);
    assert_int_equal(r.nmoves, 0);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Inside the dead band nothing is transferred (hysteresis). */
static void leaders_balanced_no_transfer(void **st) {
    plan_model m;
    plan_result r;
    four_node_rf3(&m, 50);
    m.parts[0].load = 60; /* n1 a little hotter: 1.05x, below start_ratio */
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nleads, 0);
    assert_int_equal(r.nmoves, 0);
    assert_false(r.episode.lead_active);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* A node DOWN (past node_dead_after): each of its replicas is replaced on a
 * node not holding the partition; the adds name the replica they replace,
 * and the bytes copied equal the lost node's bytes. */
static void restore_rf_after_node_loss(void **st) {
    plan_model m;
    plan_result r;
    four_node_rf3(&m, 0);
    fx_nodes(&m, 1, 1, 0); /* n5, so there is room for RF 3 without n2 */
    m.settings.max_moves = 0;
    m.nodes[1].state = PLAN_NODE_DOWN; /* n2 */
    double lost = bytes_on(&m, 1);
    /* partitions n2 leads wait for the failover: fail them over first */
    for (size_t i = 0; i < m.nparts; i++) {
        plan_part *p = &m.parts[i];
        if (p->replicas[0] == 1) {
            p->replicas[0] = p->replicas[1];
            p->replicas[1] = 1;
        }
    }
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nmoves, 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_REPAIRING));
    double copied = 0;
    for (size_t i = 0; i < r.nrepairs; i++) {
        const plan_repair *rp = &r.repairs[i];
        assert_int_equal(rp->kind, PLAN_REPAIR_ADD);
        assert_int_equal(rp->replace, 1);
        assert_int_equal(rp->live, 2);
        assert_int_not_equal(rp->node, 1);
        copied += rp->bytes;
    }
    printf("node lost: %.0f bytes on it, %.0f bytes copied, %zu replicas added\n", lost, copied,
           r.nrepairs);
    assert_true(fabs(copied - lost) < 1e-6);
    assert_int_equal(plan_apply(&m, &r), 0);
    plan_result_close(&r);
    check_replicas(&m, 3);
    /* the new replicas went mostly to the empty n5 */
    assert_true(bytes_on(&m, 4) >= lost / 2);
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 0);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* With racks, the replacement keeps one replica per rack. */
static void restore_rf_rack_anti_affinity(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 6, 1, 3);       /* n1,n4: r0  n2,n5: r1  n3,n6: r2 */
    for (int i = 0; i < 12; i++) /* one replica in each rack */
        rf3_part(&m, i % 3, 3 + (i + 1) % 3, (i + 2) % 3, 100, 0);
    m.settings.replicas = 3;
    m.settings.max_moves = 0;
    m.nodes[3].state = PLAN_NODE_DOWN; /* n4, rack r0 */
    assert_int_equal(plan_run(&m, &r), 0);
    assert_true(r.nrepairs > 0);
    for (size_t i = 0; i < r.nrepairs; i++) {
        const plan_repair *rp = &r.repairs[i];
        const plan_part *p = &m.parts[rp->part];
        assert_int_equal(rp->kind, PLAN_REPAIR_ADD);
        for (int k = 0; k < p->nreplicas; k++) {
            if (p->replicas[k] == rp->replace) continue;
            assert_string_not_equal(m.nodes[p->replicas[k]].rack, m.nodes[rp->node].rack);
        }
    }
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Raising replicas adds; lowering removes followers, never the leader. */
static void change_rf_adds_and_removes(void **st) {
    plan_model m;
    plan_result r;
    four_node_rf3(&m, 0);
    m.settings.max_moves = 0;
    m.settings.replicas = 4;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 64);
    assert_int_equal(plan_apply(&m, &r), 0);
    plan_result_close(&r);
    check_replicas(&m, 4);
    int leaders[4];
    fx_counts(&m, leaders);
    m.settings.replicas = 2;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 128);
    for (size_t i = 0; i < r.nrepairs; i++) {
        assert_int_equal(r.repairs[i].kind, PLAN_REPAIR_REMOVE);
        assert_int_not_equal(r.repairs[i].node, m.parts[r.repairs[i].part].replicas[0]);
    }
    assert_int_equal(plan_apply(&m, &r), 0);
    plan_result_close(&r);
    check_replicas(&m, 2);
    int after[4];
    fx_counts(&m, after);
    assert_memory_equal(leaders, after, sizeof after); /* leaders unchanged */
    for (int n = 0; n < 4; n++) /* removals kept bytes even: 32 replicas each */
        assert_true(fabs(bytes_on(&m, n) - 32000) <= 2000);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* One replica too many (a replica move cut short): the follower out of the
 * ISR goes first, whatever the fill; in sync, the fullest holder. */
static void extra_replica_lagging_first(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 4, 1, 0);
    plan_part *p = rf3_part(&m, 0, 1, 2, 10, 0);
    p->replicas[3] = 3; /* n4: added, still catching up */
    p->nreplicas = 4;
    p->lagging = 1u << 3;
    rf3_part(&m, 1, 2, 0, 10, 0); /* n1..n3 fuller than n4 */
    m.settings.replicas = 3;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 1);
    assert_int_equal(r.repairs[0].kind, PLAN_REPAIR_REMOVE);
    assert_int_equal(r.repairs[0].node, 3);
    plan_result_close(&r);
    m.parts[0].lagging = 0; /* in sync: a fullest holder (not n4, not the leader) */
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 1);
    assert_true(r.repairs[0].node == 1 || r.repairs[0].node == 2);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* Repairs count against max_moves_per_round; stale metrics plan nothing. */
static void repairs_budget_and_stale_metrics(void **st) {
    plan_model m;
    plan_result r;
    four_node_rf3(&m, 0);
    m.settings.replicas = 4;
    m.settings.max_moves = 5;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 5);
    plan_result_close(&r);
    m.nodes[2].metrics_age_s = 100;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 0);
    assert_int_equal(r.nmoves, 0);
    assert_int_equal(r.nleads, 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_STALE_METRICS));
    plan_result_close(&r);
    plan_model_close(&m);
}

/* No node may take a replica (3 nodes, one DOWN, RF 3): said, not forced. */
static void under_replicated_said(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 3, 1, 0);
    rf3_part(&m, 0, 1, 2, 10, 0);
    m.settings.replicas = 3;
    m.nodes[2].state = PLAN_NODE_DOWN;
    assert_int_equal(plan_run(&m, &r), 0);
    assert_int_equal(r.nrepairs, 0);
    assert_true(fx_has_stop(&r, PLAN_STOP_UNDER_REPLICATED));
    plan_result_close(&r);
    plan_model_close(&m);
}

/* plan_apply refuses a repair that does not match and leaves m unchanged. */
static void apply_refuses_mismatch(void **st) {
    plan_model m;
    plan_result r;
    four_node_rf3(&m, 0);
    m.settings.replicas = 4;
    m.settings.max_moves = 0;
    assert_int_equal(plan_run(&m, &r), 0);
    r.repairs[r.nrepairs - 1].node = m.parts[r.repairs[r.nrepairs - 1].part].replicas[0];
    plan_part before = m.parts[r.repairs[0].part];
    assert_int_equal(plan_apply(&m, &r), KEEL_EINVAL);
    assert_memory_equal(&before, &m.parts[r.repairs[0].part], sizeof before);
    plan_result_close(&r);
    plan_model_close(&m);
}

/* RF 1 models plan exactly as before: load still counts on the owner. */
static void rf1_load_still_counts(void **st) {
    plan_model m;
    plan_result r;
    plan_model_init(&m);
    fx_nodes(&m, 2, 1, 0);
    for (int i = 0; i < 10; i++)
        fx_part(&m, 0, 100, i < 5 ? 1000 : 0); /* equal bytes, hot ones on n1 */
    for (int i = 0; i < 10; i++)
        fx_part(&m, 1, 100, 0);
    assert_int_equal(plan_run(&m, &r), 0);
    assert_true(r.nmoves > 0); /* load alone unbalances: data moves at RF 1 */
    assert_int_equal(r.nleads, 0);
    plan_result_close(&r);
    plan_model_close(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifth_node_rf3),
        cmocka_unit_test(fourth_node_rf3),
        cmocka_unit_test(leader_skew_transfers),
        cmocka_unit_test(leaders_balanced_no_transfer),
        cmocka_unit_test(restore_rf_after_node_loss),
        cmocka_unit_test(restore_rf_rack_anti_affinity),
        cmocka_unit_test(change_rf_adds_and_removes),
        cmocka_unit_test(extra_replica_lagging_first),
        cmocka_unit_test(repairs_budget_and_stale_metrics),
        cmocka_unit_test(under_replicated_said),
        cmocka_unit_test(apply_refuses_mismatch),
        cmocka_unit_test(rf1_load_still_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
