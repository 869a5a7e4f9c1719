/* test-repstep.c - the replica-move step table (coord/coord_repstep): each
 * kind of move driven against a model of the map store's partition record,
 * with redundancy checked at every map state the move goes through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "coord/coord_repstep.h"
#include "core/err.h"

#include <stdio.h>
#include <string.h>

/* ---- A model of the partition record and of the store's CAS writes ----- */

static mapstore_partition part(const char *ids, unsigned isr) {
    mapstore_partition p;
    memset(&p, 0, sizeof p);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", ids);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        snprintf(p.replicas[p.nreplicas++], KEEL_ID_MAX + 1, "%s", t);
    snprintf(p.owner, sizeof p.owner, "%s", p.replicas[0]);
    p.isr = isr;
    p.epoch = p.leader_epoch = 1;
    p.partition_epoch = 1;
    return p;
}

/* The store's set_replicas: the list as given, ISR bits kept by id. */
static void set_replicas(mapstore_partition *p, const rmove_action *a) {
    assert_int_equal(a->expected_pe, p->partition_epoch);
    mapstore_partition q = *p;
    memset(q.replicas, 0, sizeof q.replicas);
    q.isr = 0;
    for (unsigned i = 0; i < a->nids; i++) {
        snprintf(q.replicas[i], KEEL_ID_MAX + 1, "%s", a->ids[i]);
        if (rmove_in_isr(p, a->ids[i])) q.isr |= 1u << i;
    }
    q.nreplicas = a->nids;
    assert_string_equal(q.replicas[0], p->replicas[0]); /* the leader stays first */
    q.epoch++, q.partition_epoch++;
    *p = q;
}

static void set_isr_member(mapstore_partition *p, const char *id) {
    int i = rmove_replica_index(p, id);
    assert_true(i >= 0);
    p->isr |= 1u << i;
    p->partition_epoch++;
}

/* repcoord's set_leader with old_in_isr: leader first, old leader after it. */
static void set_leader(mapstore_partition *p, const char *leader) {
    mapstore_partition q = *p;
    int il = rmove_replica_index(p, leader);
    assert_true(il > 0 && rmove_in_isr(p, leader));
    memset(q.replicas, 0, sizeof q.replicas);
    q.isr = 1;
    unsigned n = 0;
    snprintf(q.replicas[n++], KEEL_ID_MAX + 1, "%s", leader);
    for (unsigned i = 0; i < p->nreplicas; i++) {
        if ((int)i == il) continue;
        if (p->isr >> i & 1) q.isr |= 1u << n;
        snprintf(q.replicas[n++], KEEL_ID_MAX + 1, "%s", p->replicas[i]);
    }
    snprintf(q.owner, sizeof q.owner, "%s", leader);
    q.leader_epoch++, q.epoch++, q.partition_epoch++;
    *p = q;
}

static unsigned isr_n(const mapstore_partition *p) {
    unsigned n = 0;
    for (unsigned i = 0; i < p->nreplicas; i++)
        n += p->isr >> i & 1;
    return n;
}

static const char *down_node = "";
static int up(void *arg, const char *id) {
    (void)arg;
    return strcmp(id, down_node) != 0;
}

static rmove mk(rmove_kind k, const char *add, const char *remove, const char *lead_to) {
    rmove m;
    memset(&m, 0, sizeof m);
    m.kind = k;
    snprintf(m.add, sizeof m.add, "%s", add);
    snprintf(m.remove, sizeof m.remove, "%s", remove);
    snprintf(m.lead_to, sizeof m.lead_to, "%s", lead_to);
    m.rf = 3;
    m.min_insync = 2;
    return m;
}

/* Drives mv to its end, following the store; the leader answers RESIGN OK
 * at once and the added replica joins the ISR on the second look. Returns
 * the last action; steps[] gets the steps seen (distinct, in order). */
static rmove_action drive(rmove *mv, mapstore_partition *p, rmove_step *steps, int *nsteps) {
    rmove_action a;
    int waits = 0;
    *nsteps = 0;
    for (int i = 0; i < 40; i++) {
        rmove_next(mv, p, 0, 1000, up, NULL, &a);
        if (!*nsteps || steps[*nsteps - 1] != a.step) steps[(*nsteps)++] = a.step;
        if (rmove_replica_index(p, mv->add) >= 0) mv->added = 1;
        /* redundancy: never fewer than rf replicas nor 2 in the ISR */
        assert_true(p->nreplicas >= mv->rf);
        assert_true(isr_n(p) >= 2);
        switch (a.act) {
        case RACT_SET_REPLICAS:
            set_replicas(p, &a);
            break;
        case RACT_WAIT:
            if (a.step == RSTEP_CATCHING_UP && ++waits >= 2) set_isr_member(p, mv->add);
            break;
        case RACT_RESIGN:
            assert_string_equal(a.leader, p->replicas[0]);
            assert_int_equal(a.leader_epoch, p->leader_epoch);
            mv->resigned_le = a.leader_epoch;
            snprintf(mv->resign_to, sizeof mv->resign_to, "%s", a.target);
            break;
        case RACT_SET_LEADER:
            set_leader(p, a.target);
            break;
        default:
            return a;
        }
    }
    fail_msg("move did not end");
    return a;
}

/* ---- Cases --------------------------------------------------------------- */

/* A follower moves: adding, catching up, removing, done; RF 3 throughout. */
static void move_follower(void **st) {
    mapstore_partition p = part("a,c,d", 7);
    rmove mv = mk(RMOVE_MOVE, "b", "c", "");
    rmove_step steps[8];
    int n;
    rmove_action a = drive(&mv, &p, steps, &n);
    assert_int_equal(a.act, RACT_DONE);
    assert_int_equal(n, 4);
    assert_int_equal(steps[0], RSTEP_ADDING);
    assert_int_equal(steps[1], RSTEP_CATCHING_UP);
    assert_int_equal(steps[2], RSTEP_REMOVING);
    assert_int_equal(steps[3], RSTEP_DONE);
    assert_int_equal(p.nreplicas, 3);
    assert_string_equal(p.replicas[0], "a");
    assert_true(rmove_in_isr(&p, "b"));
    assert_int_equal(rmove_replica_index(&p, "c"), -1);
    assert_int_equal(p.leader_epoch, 1); /* no leader change */
}

/* The leader moves: transfer (RESIGN, then the leader change) before removal. */
static void move_leader_transfers_first(void **st) {
    mapstore_partition p = part("a,c,d", 7);
    rmove mv = mk(RMOVE_MOVE, "b", "a", "b");
    rmove_step steps[8];
    int n;
    rmove_action a = drive(&mv, &p, steps, &n);
    assert_int_equal(a.act, RACT_DONE);
    assert_int_equal(n, 5);
    assert_int_equal(steps[2], RSTEP_TRANSFERRING);
    assert_int_equal(steps[3], RSTEP_REMOVING);
    assert_string_equal(p.replicas[0], "b");
    assert_int_equal(p.leader_epoch, 2);
    assert_int_equal(rmove_replica_index(&p, "a"), -1);
    assert_int_equal(p.nreplicas, 3);
}

/* No leader change is committed before the leader's RESIGN OK at the
 * current leader epoch, nor with an OK from an older epoch. */
static void transfer_needs_resign_at_this_epoch(void **st) {
    mapstore_partition p = part("a,b,c", 7);
    rmove mv = mk(RMOVE_PROMOTE, "", "", "b");
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_RESIGN);
    assert_string_equal(a.leader, "a");
    assert_string_equal(a.target, "b");
    assert_int_equal(a.leader_epoch, 1);
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a); /* no answer yet: asks again */
    assert_int_equal(a.act, RACT_RESIGN);
    mv.resigned_le = 1;
    snprintf(mv.resign_to, sizeof mv.resign_to, "c"); /* OK for another target */
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_RESIGN);
    snprintf(mv.resign_to, sizeof mv.resign_to, "b");
    p.leader_epoch = 2, p.epoch = 2, p.partition_epoch = 2; /* a failover meanwhile */
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_RESIGN);
    assert_int_equal(a.leader_epoch, 2);
    mv.resigned_le = 2;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_SET_LEADER);
    assert_int_equal(a.expected_pe, 2);
    set_leader(&p, "b");
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_DONE);
    assert_true(rmove_in_isr(&p, "a")); /* the old leader stays, in sync */
}

/* The target is lost after the leader's RESIGN OK: the leader refuses the
 * partition until its epoch changes, so the move re-elects it in a new
 * leader epoch before it aborts (found by repsim, seed 2141). */
static void abort_after_resign_ok_reelects_the_leader(void **st) {
    (void)st;
    mapstore_partition p = part("a,b,c", 7);
    rmove mv = mk(RMOVE_PROMOTE, "", "", "b");
    mv.resigned_le = 1;
    snprintf(mv.resign_to, sizeof mv.resign_to, "b");
    p.isr = 5; /* b left the ISR after the OK */
    rmove_action a;
    rmove_next(&mv, &p, 5000, 1000, up, NULL, &a); /* timed out */
    assert_int_equal(a.act, RACT_SET_LEADER);
    assert_string_equal(a.target, "a");
    assert_int_equal(a.leader_epoch, 1);
    p.leader_epoch = 2, p.epoch = 2, p.partition_epoch = 2; /* the re-election */
    rmove_next(&mv, &p, 5000, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_ABORT);
    assert_int_equal(a.nids, 0);
}

/* A failover moved the leadership off the source meanwhile: no transfer,
 * straight to removal. */
static void failover_during_move_skips_transfer(void **st) {
    mapstore_partition p = part("a,c,d,b", 15);
    rmove mv = mk(RMOVE_MOVE, "b", "a", "b");
    mv.added = 1;
    set_leader(&p, "c");
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_SET_REPLICAS);
    assert_int_equal(a.step, RSTEP_REMOVING);
    assert_int_equal(a.nids, 3);
    assert_string_equal(a.ids[0], "c");
}

/* Catching up too long aborts and takes the added replica out again. */
static void catch_up_timeout_aborts(void **st) {
    mapstore_partition p = part("a,c,d,b", 7); /* b listed, not in the ISR */
    rmove mv = mk(RMOVE_MOVE, "b", "c", "");
    mv.added = 1;
    rmove_action a;
    rmove_next(&mv, &p, 500, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_WAIT);
    assert_int_equal(a.step, RSTEP_CATCHING_UP);
    rmove_next(&mv, &p, 1001, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_ABORT);
    assert_int_equal(a.nids, 3);
    for (unsigned i = 0; i < a.nids; i++)
        assert_string_not_equal(a.ids[i], "b");
    /* a replica this move did not add is never taken out by its abort */
    mv.added = 0;
    rmove_next(&mv, &p, 1001, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_ABORT);
    assert_int_equal(a.nids, 0);
}

/* A destination that is down before it was added: aborted, nothing written. */
static void destination_down_aborts(void **st) {
    mapstore_partition p = part("a,c,d", 7);
    rmove mv = mk(RMOVE_MOVE, "b", "c", "");
    down_node = "b";
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    down_node = "";
    assert_int_equal(a.act, RACT_ABORT);
    assert_int_equal(a.nids, 0);
}

/* The added replica vanished (an ISR or repair change by someone else). */
static void added_replica_vanished_aborts(void **st) {
    mapstore_partition p = part("a,c,d", 7);
    rmove mv = mk(RMOVE_MOVE, "b", "c", "");
    mv.added = 1;
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_ABORT);
}

/* Removal never drops below RF replicas or min_insync in the ISR, unless
 * the replica removed is on a node that is down. */
static void removal_keeps_redundancy(void **st) {
    mapstore_partition p = part("a,b,c", 7);
    rmove mv = mk(RMOVE_REMOVE, "", "c", "");
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_WAIT); /* 3 replicas, RF 3 */
    assert_int_equal(a.step, RSTEP_REMOVING);
    down_node = "c";
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    down_node = "";
    assert_int_equal(a.act, RACT_SET_REPLICAS); /* c is lost anyway */
    p = part("a,b,c,d", 1 | 8);                 /* ISR a, d */
    mv = mk(RMOVE_REMOVE, "", "d", "");
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_WAIT); /* ISR would be a alone */
    mv = mk(RMOVE_REMOVE, "", "b", "");
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_SET_REPLICAS);
}

/* Lowering RF removes the leader's replica only after a transfer to an
 * in-sync follower that is up. */
static void remove_leader_picks_in_sync_follower(void **st) {
    mapstore_partition p = part("a,b,c,d", 1 | 4 | 8); /* b out of the ISR */
    rmove mv = mk(RMOVE_REMOVE, "", "a", "");
    down_node = "c";
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    down_node = "";
    assert_int_equal(a.act, RACT_RESIGN);
    assert_string_equal(a.target, "d");
    rmove_step steps[8];
    int n;
    a = drive(&mv, &p, steps, &n);
    assert_int_equal(a.act, RACT_DONE);
    assert_int_equal(rmove_replica_index(&p, "a"), -1);
    assert_int_equal(p.nreplicas, 3);
}

/* A coordinator restart loses the move's memory: from the map alone a move
 * whose replica is in sync resumes at the removal. */
static void resumes_from_the_map(void **st) {
    mapstore_partition p = part("a,c,d,b", 15);
    rmove mv = mk(RMOVE_MOVE, "b", "c", ""); /* added = 0: nothing remembered */
    rmove_action a;
    rmove_next(&mv, &p, 0, 1000, up, NULL, &a);
    assert_int_equal(a.act, RACT_SET_REPLICAS);
    assert_int_equal(a.step, RSTEP_REMOVING);
}

/* rmove_check refuses plans that cannot work, with a reason. */
static void check_refuses(void **st) {
    mapstore_partition p = part("a,b,c", 1 | 2);
    char err[256];
    rmove mv = mk(RMOVE_PROMOTE, "", "", "c");
    assert_int_equal(rmove_check(&mv, &p, err, sizeof err), KEEL_EINVAL);
    assert_non_null(strstr(err, "ISR"));
    mv = mk(RMOVE_PROMOTE, "", "", "a");
    assert_int_equal(rmove_check(&mv, &p, err, sizeof err), KEEL_EEXIST);
    mv = mk(RMOVE_PROMOTE, "", "", "b");
    assert_int_equal(rmove_check(&mv, &p, err, sizeof err), 0);
    mv = mk(RMOVE_MOVE, "b", "a", "b");
    assert_int_equal(rmove_check(&mv, &p, err, sizeof err), KEEL_EEXIST);
    mv = mk(RMOVE_MOVE, "e", "x", "");
    assert_int_equal(rmove_check(&mv, &p, err, sizeof err), KEEL_EINVAL);
    mapstore_partition none;
    memset(&none, 0, sizeof none);
    mv = mk(RMOVE_ADD, "e", "", "");
    assert_int_equal(rmove_check(&mv, &none, err, sizeof err), KEEL_EINVAL);
    assert_string_equal(rmove_step_name(RSTEP_TRANSFERRING), "transferring leadership");
    assert_string_equal(rmove_kind_name(RMOVE_PROMOTE), "promote");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(move_follower),
        cmocka_unit_test(move_leader_transfers_first),
        cmocka_unit_test(transfer_needs_resign_at_this_epoch),
        cmocka_unit_test(failover_during_move_skips_transfer),
        cmocka_unit_test(catch_up_timeout_aborts),
        cmocka_unit_test(destination_down_aborts),
        cmocka_unit_test(added_replica_vanished_aborts),
        cmocka_unit_test(removal_keeps_redundancy),
        cmocka_unit_test(remove_leader_picks_in_sync_follower),
        cmocka_unit_test(resumes_from_the_map),
        cmocka_unit_test(check_refuses),
        cmocka_unit_test(abort_after_resign_ok_reelects_the_leader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
