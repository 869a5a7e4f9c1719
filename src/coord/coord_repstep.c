/* coord_repstep.c - the replica-move step table; see coord_repstep.h.
 *
 * rmove_next walks the move's three phases in order and stops at the first
 * one not finished in the map: (A) the added replica listed and in the ISR,
 * (B) the wanted leader leading, (C) the removed replica gone. Each phase
 * reads only the partition record, so the answer is the same whoever asks
 * and however often: the executor may call it on every tick.
 */
#include "coord/coord_repstep.h"
#include "core/err.h"

#include <stdio.h>
#include <string.h>

static const char *const step_names[] = {
    "adding", "catching up", "in sync", "transferring leadership", "removing", "done", "aborted"};
static const char *const kind_names[] = {"move", "add", "remove", "promote"};

const char *rmove_step_name(rmove_step s) {
    return (unsigned)s <= RSTEP_ABORTED ? step_names[s] : "?";
}

const char *rmove_kind_name(rmove_kind k) {
    return (unsigned)k <= RMOVE_PROMOTE ? kind_names[k] : "?";
}

int rmove_replica_index(const mapstore_partition *p, const char *id) {
    if (!id || !id[0]) return -1;
    for (unsigned i = 0; i < p->nreplicas; i++)
        if (strcmp(p->replicas[i], id) == 0) return (int)i;
    return -1;
}

int rmove_in_isr(const mapstore_partition *p, const char *id) {
    int i = rmove_replica_index(p, id);
    return i >= 0 && (p->isr >> i & 1);
}

static unsigned isr_count(const mapstore_partition *p) {
    unsigned n = 0;
    for (unsigned i = 0; i < p->nreplicas; i++)
        n += p->isr >> i & 1;
    return n;
}

static void copy_id(char *dst, const char *src) {
    snprintf(dst, KEEL_ID_MAX + 1, "%s", src);
}

/* out->ids = p's replicas, plus add (if not NULL), minus drop (if not NULL). */
static void list_with(rmove_action *out, const mapstore_partition *p, const char *add,
                      const char *drop) {
    out->nids = 0;
    for (unsigned i = 0; i < p->nreplicas; i++)
        if (!drop || strcmp(p->replicas[i], drop) != 0)
            copy_id(out->ids[out->nids++], p->replicas[i]);
    if (add && out->nids < KEEL_RF_MAX) copy_id(out->ids[out->nids++], add);
}

static void wait_for(rmove_action *out, rmove_step step, const char *why) {
    out->act = RACT_WAIT;
    out->step = step;
    out->why = why;
}

/* Gives up; takes the added replica out again only while the original
 * replicas are all still there and it does not lead (nothing is lost). */
static void abort_move(const rmove *mv, const mapstore_partition *p, rmove_action *out,
                       const char *why) {
    if (mv->resigned_le && mv->resigned_le == p->leader_epoch) {
        /* The leader answered RESIGN OK in this epoch: it refuses p until a
         * map changes p's leader or leader epoch. Re-elect it (leader epoch
         * + 1, same leader) before giving up, or p stays unwritable while
         * its leader is up (repsim seed 2141). The next call aborts. */
        out->act = RACT_SET_LEADER;
        out->step = RSTEP_TRANSFERRING;
        out->why = why;
        copy_id(out->leader, p->replicas[0]);
        copy_id(out->target, p->replicas[0]);
        return;
    }
    out->act = RACT_ABORT;
    out->step = RSTEP_ABORTED;
    out->why = why;
    out->nids = 0;
    int ia = rmove_replica_index(p, mv->add);
    if (mv->added && ia > 0 && (!mv->remove[0] || rmove_replica_index(p, mv->remove) >= 0))
        list_with(out, p, NULL, mv->add);
}

static int is_up(rmove_up_fn up, void *arg, const char *id) {
    return !up || up(arg, id);
}

/* Phase A: 1 when done (or nothing to add), 0 when *out holds the action. */
static int phase_add(const rmove *mv, const mapstore_partition *p, int timed_out, rmove_up_fn up,
                     void *arg, rmove_action *out) {
    if (!mv->add[0]) return 1;
    int ia = rmove_replica_index(p, mv->add);
    int remove_listed = rmove_replica_index(p, mv->remove) >= 0;
    if (ia < 0) {
        if (mv->added) {
            abort_move(mv, p, out, "the added replica was removed from the partition");
        } else if (mv->kind == RMOVE_MOVE && !remove_listed) {
            abort_move(mv, p, out, "the source is no longer a replica");
        } else if (!is_up(up, arg, mv->add)) {
            abort_move(mv, p, out, "the destination is not up");
        } else if (p->nreplicas >= KEEL_RF_MAX) {
            abort_move(mv, p, out, "the replica list is full");
        } else if (timed_out) {
            abort_move(mv, p, out, "timed out adding the replica");
        } else {
            out->act = RACT_SET_REPLICAS;
            out->step = RSTEP_ADDING;
            list_with(out, p, mv->add, NULL);
        }
        return 0;
    }
    if (rmove_in_isr(p, mv->add)) return 1;
    if (mv->remove[0] && !remove_listed && mv->kind == RMOVE_MOVE) return 1; /* past removal */
    if (!is_up(up, arg, mv->add))
        abort_move(mv, p, out, "the destination is not up");
    else if (timed_out)
        abort_move(mv, p, out, "timed out catching up");
    else
        wait_for(out, RSTEP_CATCHING_UP, "the new replica is catching up (not in the ISR yet)");
    return 0;
}

/* The in-sync, up follower other than avoid to lead: add first, then the
 * first listed. "" when none. */
static const char *pick_leader(const rmove *mv, const mapstore_partition *p, const char *avoid,
                               rmove_up_fn up, void *arg) {
    if (mv->add[0] && strcmp(mv->add, avoid) != 0 && rmove_in_isr(p, mv->add) &&
        is_up(up, arg, mv->add))
        return mv->add;
    for (unsigned i = 1; i < p->nreplicas; i++)
        if ((p->isr >> i & 1) && strcmp(p->replicas[i], avoid) != 0 &&
            is_up(up, arg, p->replicas[i]))
            return p->replicas[i];
    return "";
}

/* Phase B: the wanted leader leads. */
static int phase_lead(const rmove *mv, const mapstore_partition *p, int timed_out, rmove_up_fn up,
                      void *arg, rmove_action *out) {
    const char *leader = p->replicas[0];
    int remove_leads = mv->remove[0] && strcmp(leader, mv->remove) == 0;
    /* A promotion wants its target; otherwise only a leader about to be
     * removed hands over (to lead_to if given, else an in-sync follower),
     * whoever led when the move started. */
    const char *want = mv->kind == RMOVE_PROMOTE ? mv->lead_to
                       : !remove_leads           ? ""
                       : mv->lead_to[0]          ? mv->lead_to
                                                 : pick_leader(mv, p, mv->remove, up, arg);
    if (remove_leads && !want[0]) {
        if (timed_out)
            abort_move(mv, p, out, "no in-sync follower to take the leadership");
        else
            wait_for(out, RSTEP_TRANSFERRING,
                     "no in-sync follower that is up to take the leadership");
        return 0;
    }
    if (!want[0] || strcmp(leader, want) == 0) return 1;
    if (rmove_replica_index(p, want) < 0) {
        abort_move(mv, p, out, "the new leader is not a replica");
        return 0;
    }
    if (!rmove_in_isr(p, want) || !is_up(up, arg, want)) {
        if (timed_out)
            abort_move(mv, p, out, "the new leader is not in sync");
        else
            wait_for(out, RSTEP_TRANSFERRING, "the new leader is not in the ISR or not up");
        return 0;
    }
    out->step = RSTEP_TRANSFERRING;
    copy_id(out->leader, leader);
    copy_id(out->target, want);
    if (mv->resigned_le == p->leader_epoch && strcmp(mv->resign_to, want) == 0) {
        out->act = RACT_SET_LEADER; /* C5: the leader answered OK at this epoch */
    } else if (timed_out) {
        abort_move(mv, p, out, "timed out transferring the leadership");
    } else {
        out->act = RACT_RESIGN;
    }
    return 0;
}

/* Phase C: the removed replica gone, never below rf replicas nor below
 * min(min_insync, rf) in the ISR (a replica on a node that is down holds
 * nothing anyone can read: removing it takes no redundancy away). */
static int phase_remove(const rmove *mv, const mapstore_partition *p, rmove_up_fn up, void *arg,
                        rmove_action *out) {
    int ir = rmove_replica_index(p, mv->remove);
    if (ir < 0) return 1;
    if (ir == 0) {
        wait_for(out, RSTEP_TRANSFERRING, "the replica to remove leads");
        return 0;
    }
    int down = !is_up(up, arg, mv->remove);
    unsigned need_isr = mv->min_insync < mv->rf ? mv->min_insync : mv->rf;
    unsigned isr_left = isr_count(p) - (unsigned)((p->isr >> ir) & 1);
    if (!down && (p->nreplicas - 1 < mv->rf || isr_left < need_isr)) {
        wait_for(out, RSTEP_REMOVING, "removing now would leave fewer than RF copies in sync");
        return 0;
    }
    out->act = RACT_SET_REPLICAS;
    out->step = RSTEP_REMOVING;
    list_with(out, p, NULL, mv->remove);
    return 0;
}

void rmove_next(const rmove *mv, const mapstore_partition *p, int64_t now_ms, int64_t timeout_ms,
                rmove_up_fn up, void *arg, rmove_action *out) {
    memset(out, 0, sizeof *out);
    out->expected_pe = p->partition_epoch;
    out->leader_epoch = p->leader_epoch;
    if (!p->nreplicas) {
        abort_move(mv, p, out, "the partition has no owner");
        return;
    }
    int timed_out = timeout_ms > 0 && now_ms - mv->started_ms > timeout_ms;
    if (!phase_add(mv, p, timed_out, up, arg, out)) return;
    if (!phase_lead(mv, p, timed_out, up, arg, out)) return;
    if (!phase_remove(mv, p, up, arg, out)) return;
    out->act = RACT_DONE;
    out->step = RSTEP_DONE;
}

int rmove_check(const rmove *mv, const mapstore_partition *p, char *err, size_t cap) {
    if (!p->nreplicas) return keel_errf(err, cap, KEEL_EINVAL, "partition %u has no owner", p->id);
    if (mv->add[0] && rmove_replica_index(p, mv->add) >= 0)
        return keel_errf(err, cap, KEEL_EEXIST, "%s already holds a replica of partition %u",
                         mv->add, p->id);
    if (mv->add[0] && p->nreplicas >= KEEL_RF_MAX)
        return keel_errf(err, cap, KEEL_EINVAL, "partition %u already has %d replicas", p->id,
                         KEEL_RF_MAX);
    if (mv->remove[0] && rmove_replica_index(p, mv->remove) < 0)
        return keel_errf(err, cap, KEEL_EINVAL, "%s holds no replica of partition %u", mv->remove,
                         p->id);
    if (mv->kind == RMOVE_PROMOTE) {
        if (rmove_replica_index(p, mv->lead_to) < 0)
            return keel_errf(err, cap, KEEL_EINVAL, "%s holds no replica of partition %u",
                             mv->lead_to, p->id);
        if (strcmp(p->replicas[0], mv->lead_to) == 0)
            return keel_errf(err, cap, KEEL_EEXIST, "%s already leads partition %u", mv->lead_to,
                             p->id);
        if (!rmove_in_isr(p, mv->lead_to))
            return keel_errf(err, cap, KEEL_EINVAL,
                             "%s is not in the ISR of partition %u: only an in-sync replica may "
                             "lead (keel failover --unclean for the unclean case)",
                             mv->lead_to, p->id);
    }
    if (mv->kind == RMOVE_MOVE && (!mv->add[0] || !mv->remove[0]))
        return keel_errf(err, cap, KEEL_EINVAL, "a replica move needs a source and a destination");
    return 0;
}
