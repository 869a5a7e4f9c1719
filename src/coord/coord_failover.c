/* coord_failover.c - leases, failover and incarnations of replicated
 * partitions (issue 11 step 4, DESIGN §12, contract C2, C3, C5's failover);
 * see coord_rep.h.
 *
 * One tick every COORD_REP_TICK_MS walks the RF > 1 partitions; each is in
 * one of these states (memory only), and has at most one write in flight:
 *
 *   steady --leader SUSPECT/DOWN, operator FAILOVER, leader restarted-->
 *   taking away (from = leader; from's heartbeats get lease 0)
 *     --target chosen (UP, in the ISR unless unclean) and from cannot hold
 *       a lease (C2 (a); a restarted leader's old process is gone)-->
 *   committing: set_leader(p, pe, target), leader epoch + 1, epoch + 1,
 *     the old leader stays a replica out of the ISR (a failover's new
 *     leader may lack nothing acknowledged: it was in the ISR; the old one
 *     may hold unacknowledged writes and truncates when it follows)
 *   --committed--> steady; from keeps lease 0 until it reports that version
 *   --refused (the partition moved on: EAGAIN)--> decided again next tick
 *   --leader back UP before the commit (automatic only)--> steady
 *
 * The steady state also runs the coordinator's own ISR shrinks
 * (coord_isr.c). The rules the simulator's coordinator model proved
 * (tests/sim/repsim.c) are the same: fail over only to an ISR member, with
 * leader epoch + 1, once 1.05 x the lease + a margin has passed since the
 * last lease granted to the old leader.
 */
#include "coord/coord_defer.h"
#include "coord/coord_rep.h"
#include "coord/coord_repmove.h"
#include "coord/coord_rf.h"
#include "core/err.h"
#include "core/log.h"
#include "core/num.h"
#include "resp/resp.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const take_names[] = {"none", "leader-unreachable", "operator", "restarted"};

int64_t coord_lease_wait_ms(int64_t lease_ms) {
    return lease_ms * 105 / 100 + 50;
}

int coord_lease_gone(int64_t now_ms, int64_t last_grant_ms, int64_t start_ms, int64_t lease_ms) {
    int64_t t = last_grant_ms > start_ms ? last_grant_ms : start_ms;
    return now_ms - t >= coord_lease_wait_ms(lease_ms);
}

int coord_failover_pick(const mapstore_partition *p, const int *up, const unsigned *leads,
                        int unclean, const char *to) {
    int best = -1, best_in = 0;
    unsigned best_leads = 0;
    for (unsigned i = 1; i < p->nreplicas && i < KEEL_RF_MAX; i++) {
        if (!up[i] || (to && *to && strcmp(p->replicas[i], to))) continue;
        int in = (p->isr >> i) & 1;
        if (!in && !unclean) continue;
        unsigned l = leads ? leads[i] : 0;
        if (best < 0 || in > best_in || (in == best_in && l < best_leads)) {
            best = (int)i;
            best_in = in;
            best_leads = l;
        }
    }
    return best;
}

/* ---- Leases (C2) --------------------------------------------------------- */

int coord_rep_lease(coord *co, member *m, uint64_t have, int64_t now) {
    coord_rep_state *st = co->rep;
    if (m->incarnation_pending) return 0;
    if (m->lease_hold_version && have < m->lease_hold_version) return 0;
    for (unsigned p = 0; st && p < co->partitions; p++)
        if (st->parts[p].take != REP_TAKE_NONE && !strcmp(st->parts[p].from, m->id)) return 0;
    m->lease_sent_ms = now;
    return 1;
}

/* ---- Settings (C2, C4) --------------------------------------------------- */

static void bump_done(void *arg, const mapstore_result *r) {
    char *why = arg;
    if (r->rc)
        keel_log(KEEL_LOG_ERROR, "map_version_bump_failed", "reason=%s error=\"%s\"", why,
                 r->errmsg);
    free(why);
}

/* A new map version for what nodes see and the store does not hold. */
static void bump_version(coord *co, const char *why) {
    mapstore_write w;
    char *arg = strdup(why);
    mapstore_w_bump_version(&w);
    if (!arg || mapstore_submit(co->ms, &w, bump_done, arg)) {
        keel_log(KEEL_LOG_ERROR, "map_version_bump_failed", "reason=%s error=\"%s\"", why,
                 arg ? mapstore_errmsg(co->ms) : "out of memory");
        free(arg);
    }
}

void coord_rep_setting_changed(coord *co, const char *name) {
    if (!strcmp(name, "min_insync") || !strcmp(name, "replica_lease_ms") ||
        !strcmp(name, "replicas"))
        bump_version(co, name);
}

int coord_rep_check_setting(coord *co, const char *name, const char *value, char *msg, size_t cap) {
    int is_lease = !strcmp(name, "replica_lease_ms"),
        is_susp = !strcmp(name, "node_suspect_after_ms"), is_rf = !strcmp(name, "replicas");
    if (!is_lease && !is_susp && !is_rf) return 0;
    int rf, mi;
    coord_rf_get(co, &rf, &mi);
    long long lease = coord_setting_ll(co, "replica_lease_ms"),
              susp = coord_setting_ll(co, "node_suspect_after_ms");
    const setting_def *d = coord_setting_find(name);
    long long v = value ? atoll(value) : (d ? atoll(d->def) : 0);
    if (is_lease) lease = v;
    if (is_susp) susp = v;
    if (is_rf) rf = (int)v;
    if (rf <= 1) return 0; /* RF 1 has no leases (C1) */
    if (susp < coord_lease_wait_ms(lease)) {
        snprintf(msg, cap,
                 "ERR node_suspect_after_ms (%lld) must be at least replica_lease_ms * 1.05 + 50 "
                 "(%lld) at RF > 1: a failover waits out the old leader's lease after suspecting "
                 "it; lower replica_lease_ms or raise node_suspect_after_ms first",
                 susp, (long long)coord_lease_wait_ms(lease));
        return KEEL_EINVAL;
    }
    return 0;
}

/* ---- Incarnations (C3) --------------------------------------------------- */

static void inc_done(void *arg, const mapstore_result *r) {
    coord *co = ((void **)arg)[0];
    char *id = ((char **)arg)[1];
    member *m = coord_member(co, id, 0);
    if (m) {
        m->incarnation_bumping = 0;
        if (r->rc == 0) {
            memcpy(m->map_incarnation, m->incarnation, sizeof m->map_incarnation);
            m->incarnation_pending = 0;
            keel_log(KEEL_LOG_INFO, "incarnation_committed", "node=%s incarnation=%s version=%llu",
                     id, m->incarnation, (unsigned long long)r->version);
        } else {
            keel_log(KEEL_LOG_ERROR, "incarnation_commit_failed", "node=%s error=\"%s\"", id,
                     r->errmsg);
        }
    }
    free(id);
    free(arg);
}

/* A new incarnation's consequences all committed: publish it. */
static void inc_publish(coord *co, member *m) {
    void **arg = calloc(2, sizeof *arg);
    char *id = strdup(m->id);
    mapstore_write w;
    mapstore_w_bump_version(&w);
    if (!arg || !id) goto fail;
    arg[0] = co;
    arg[1] = id;
    if (mapstore_submit(co->ms, &w, inc_done, arg)) goto fail;
    m->incarnation_bumping = 1;
    return;
fail:
    free(id);
    free(arg);
}

void coord_rep_registered(coord *co, const char *id, const char *inc, int fresh) {
    member *m = coord_member(co, id, 1);
    coord_rep_state *st = co->rep;
    if (!m) return;
    m->rep_proto = inc[0] != 0;
    if (!inc[0] || !strcmp(m->incarnation, inc)) return; /* RF 1 node, or the same life */
    if (!m->incarnation[0] && !fresh) { /* this coordinator restarted: taken as it says */
        snprintf(m->incarnation, sizeof m->incarnation, "%s", inc);
        memcpy(m->map_incarnation, m->incarnation, sizeof m->map_incarnation);
        co->map_json.len = 0; /* rebuilt with it; the bump makes nodes fetch it */
        keel_log(KEEL_LOG_INFO, "incarnation_adopted", "node=%s incarnation=%s", id, inc);
        bump_version(co, "incarnation");
        return;
    }
    keel_log(KEEL_LOG_WARN, "incarnation_new", "node=%s previous=%s incarnation=%s fresh=%d", id,
             m->incarnation[0] ? m->incarnation : "-", inc, fresh);
    snprintf(m->incarnation, sizeof m->incarnation, "%s", inc);
    m->incarnation_pending = 1;
    mapstore_partition *parts = NULL;
    size_t np = 0;
    if (!st || mapstore_partition_list(co->ms, &parts, &np)) return;
    for (size_t p = 0; p < np && p < co->partitions; p++)
        if (parts[p].nreplicas > 1 && !strcmp(parts[p].owner, id) &&
            st->parts[p].stale_le <= parts[p].leader_epoch)
            st->parts[p].stale_le = parts[p].leader_epoch + 1;
    free(parts);
}

/* 1 while a consequence of m's new incarnation is not committed: it is a
 * follower in an ISR, or leads in a leader epoch of its previous life. */
static int inc_remaining(coord *co, const member *m, const mapstore_partition *parts, size_t np) {
    for (size_t p = 0; p < np; p++) {
        const mapstore_partition *x = &parts[p];
        if (x->nreplicas < 2) continue;
        for (unsigned i = 1; i < x->nreplicas; i++)
            if (((x->isr >> i) & 1) && !strcmp(x->replicas[i], m->id)) return 1;
        if (!strcmp(x->owner, m->id) && co->rep->parts[p].stale_le > x->leader_epoch) return 1;
    }
    return 0;
}

/* ---- Failover ------------------------------------------------------------ */

typedef struct fo_arg {
    coord *co;
    unsigned p;
    rep_take_reason take;
    int unclean; /* the target was not in the ISR */
    char from[KEEL_ID_MAX + 1], to[KEEL_ID_MAX + 1];
    int64_t decided_ms;
} fo_arg;

/* Ends p's take-away; answers a held operator request with err (NULL:
 * the success reply was written already). */
static void take_end(coord *co, coord_rep_part *rp, const char *err) {
    if (rp->reply) {
        if (err) resp_w_error(coord_defer_out(rp->reply), err);
        coord_defer_done(co, rp->reply);
        rp->reply = NULL;
    }
    rp->take = REP_TAKE_NONE;
    rp->unclean = 0;
    rp->from[0] = rp->to[0] = 0;
    rp->decided_ms = 0;
    rp->blocked_logged = 0;
}

static void failover_done(void *arg, const mapstore_result *r) {
    fo_arg *a = arg;
    coord *co = a->co;
    coord_rep_state *st = co->rep;
    if (!st) { /* stopping */
        free(a);
        return;
    }
    coord_rep_part *rp = &st->parts[a->p];
    rp->busy = 0;
    int64_t now = coord_now(co);
    if (r->rc) {
        keel_log(KEEL_LOG_WARN, "failover_failed", "partition=%u from=%s to=%s error=\"%s\"", a->p,
                 a->from, a->to, r->errmsg);
        if (r->rc != KEEL_EAGAIN) { /* EAGAIN: the partition moved on; decide again */
            char msg[MAPSTORE_ERR_MAX + 32];
            snprintf(msg, sizeof msg, "ERR failover of partition %u failed: %s", a->p, r->errmsg);
            take_end(co, rp, msg);
        }
        free(a);
        return;
    }
    member *old = coord_member(co, a->from, 0);
    if (old && old->lease_hold_version < r->version) old->lease_hold_version = r->version;
    double ms = (double)(now - a->decided_ms);
    if (a->take == REP_TAKE_REELECT) {
        st->reelections++;
    } else {
        st->failovers++;
        st->last_failover_ms = ms;
        if (ms > st->max_failover_ms) st->max_failover_ms = ms;
    }
    if (a->unclean) st->unclean_failovers++;
    const mapstore_partition *np = &r->part;
    keel_log(a->unclean ? KEEL_LOG_WARN : KEEL_LOG_INFO,
             a->unclean ? "failover_unclean" : "failover",
             "partition=%u from=%s to=%s reason=%s leader_epoch=%llu epoch=%llu isr=%u "
             "decided_to_commit_ms=%.0f version=%llu",
             a->p, a->from, a->to, take_names[a->take], (unsigned long long)np->leader_epoch,
             (unsigned long long)np->epoch, (unsigned)__builtin_popcount(np->isr), ms,
             (unsigned long long)r->version);
    if (rp->reply) {
        char txt[256];
        snprintf(txt, sizeof txt, "OK partition %u: leader %s, leader epoch %llu%s", a->p, a->to,
                 (unsigned long long)np->leader_epoch,
                 a->unclean ? " (unclean: it was not in the ISR)" : "");
        resp_w_simple(coord_defer_out(rp->reply), txt);
    }
    take_end(co, rp, NULL);
    /* The new leader and the followers fetch the map now, not at their next
     * heartbeat (up to heartbeat_ms later). */
    coord_repmoves_nudge(co, np);
    free(a);
}

/* Liveness of every replica of p, for coord_failover_pick: UP, a member
 * (not removed), and not a restarted process still being settled. */
static void replicas_up(coord *co, const mapstore_partition *p, int *up) {
    for (unsigned i = 0; i < p->nreplicas; i++) {
        mapstore_node n;
        member *m = coord_member(co, p->replicas[i], 0);
        up[i] = mapstore_node_get(co->ms, p->replicas[i], &n) == 0 && coord_node_usable(&n) &&
                !(m && m->incarnation_pending);
    }
}

/* Decides or advances p's take-away; 1 if it submitted a write. */
static int failover_step(coord *co, const mapstore_partition *p, const unsigned *leads_by_node,
                         const mapstore_node *nodes, size_t nn, int64_t now) {
    coord_rep_part *rp = &co->rep->parts[p->id];
    mapstore_node ln;
    int leader_up = mapstore_node_get(co->ms, p->owner, &ln) == 0 && coord_node_usable(&ln);
    if (rp->stale_le && p->leader_epoch >= rp->stale_le) rp->stale_le = 0;
    if (rp->take == REP_TAKE_NONE) {
        if (rp->stale_le)
            rp->take = REP_TAKE_REELECT;
        else if (!leader_up)
            rp->take = REP_TAKE_AUTO;
        else
            return 0;
        snprintf(rp->from, sizeof rp->from, "%s", p->owner);
        rp->decided_ms = now;
        keel_log(KEEL_LOG_WARN, "failover_decided", "partition=%u leader=%s reason=%s", p->id,
                 p->owner, take_names[rp->take]);
    }
    if (strcmp(p->owner, rp->from)) { /* someone else changed the leader */
        take_end(co, rp, rp->reply ? "ERR the partition's leader changed meanwhile" : NULL);
        return 0;
    }
    if (rp->take == REP_TAKE_AUTO && leader_up && !rp->stale_le) {
        keel_log(KEEL_LOG_INFO, "failover_cancelled", "partition=%u leader=%s reason=leader-up",
                 p->id, p->owner);
        take_end(co, rp, NULL);
        return 0;
    }
    int up[KEEL_RF_MAX];
    unsigned leads[KEEL_RF_MAX] = {0};
    replicas_up(co, p, up);
    for (unsigned i = 0; i < p->nreplicas; i++)
        for (size_t k = 0; k < nn; k++)
            if (!strcmp(nodes[k].id, p->replicas[i])) leads[i] = leads_by_node[k];
    int pick = coord_failover_pick(p, up, leads, rp->unclean, rp->to);
    if (pick < 0 && rp->take == REP_TAKE_REELECT) pick = 0; /* C3: else to itself */
    if (pick < 0) {
        if (rp->take == REP_TAKE_OPERATOR) {
            take_end(co, rp,
                     rp->to[0] ? "ERR the target is not UP (or was restarted and is settling)"
                               : "ERR no UP in-sync replica to promote; --unclean allows any UP "
                                 "replica");
        } else if (!rp->blocked_logged) {
            rp->blocked_logged = 1;
            keel_log(KEEL_LOG_ERROR, "failover_blocked",
                     "partition=%u leader=%s isr=%u reason=\"no in-sync replica is UP: the "
                     "partition is unavailable until one is (keel failover %u --unclean promotes "
                     "any replica, losing what it lacks)\"",
                     p->id, p->owner, (unsigned)__builtin_popcount(p->isr), p->id);
        }
        return 0;
    }
    /* C2 (a): the old leader cannot hold a lease any more. A restarted
     * leader's previous process is gone, and its new one is held at lease 0. */
    member *lm = coord_member(co, p->owner, 0);
    if (rp->take != REP_TAKE_REELECT &&
        !coord_lease_gone(now, lm ? lm->lease_sent_ms : 0, co->start_ms,
                          coord_setting_ll(co, "replica_lease_ms")))
        return 0;
    fo_arg *a = calloc(1, sizeof *a);
    if (!a) return 0;
    *a = (fo_arg){co, p->id, rp->take, !((p->isr >> pick) & 1), {0}, {0}, rp->decided_ms};
    snprintf(a->from, sizeof a->from, "%s", p->owner);
    snprintf(a->to, sizeof a->to, "%s", p->replicas[pick]);
    mapstore_write w;
    mapstore_w_partition_set_leader(&w, p->id, p->partition_epoch, p->replicas[pick], 0);
    if (mapstore_submit(co->ms, &w, failover_done, a)) {
        keel_log(KEEL_LOG_ERROR, "failover_failed", "partition=%u error=\"%s\"", p->id,
                 mapstore_errmsg(co->ms));
        free(a);
        return 0;
    }
    rp->busy = 1;
    return 1;
}

static void on_tick(uv_timer_t *t) {
    coord *co = t->data;
    coord_rep_state *st = co->rep;
    if (co->stopping || !st || mapstore_stale(co->ms)) return;
    int64_t now = coord_now(co);
    mapstore_partition *parts = NULL;
    mapstore_node *nodes = NULL;
    unsigned *leads = NULL;
    size_t np = 0, nn = 0;
    if (mapstore_partition_list(co->ms, &parts, &np) || mapstore_node_list(co->ms, &nodes, &nn))
        goto out;
    if (!(leads = calloc(nn ? nn : 1, sizeof *leads))) goto out;
    for (size_t p = 0; p < np; p++)
        for (size_t k = 0; k < nn; k++)
            if (parts[p].owner[0] && !strcmp(nodes[k].id, parts[p].owner)) leads[k]++;
    for (size_t p = 0; p < np && p < co->partitions; p++) {
        if (parts[p].nreplicas < 2 || !parts[p].owner[0] || st->parts[p].busy) continue;
        if (!failover_step(co, &parts[p], leads, nodes, nn, now) &&
            st->parts[p].take == REP_TAKE_NONE)
            coord_isr_shrink_tick(co, &parts[p], now);
    }
    for (size_t i = 0; i < co->nmembers; i++) {
        member *m = &co->members[i];
        if (m->incarnation_pending && !m->incarnation_bumping && !inc_remaining(co, m, parts, np))
            inc_publish(co, m);
    }
out:
    free(leads);
    free(parts);
    free(nodes);
}

int coord_rep_start(coord *co) {
    coord_rep_state *st = calloc(1, sizeof *st);
    if (!st || !(st->parts = calloc(co->partitions ? co->partitions : 1, sizeof *st->parts))) {
        free(st);
        return KEEL_ENOMEM;
    }
    co->rep = st;
    uv_timer_init(co->loop, &st->timer);
    st->timer.data = co;
    uv_timer_start(&st->timer, on_tick, COORD_REP_TICK_MS, COORD_REP_TICK_MS);
    return 0;
}

static void timer_closed(uv_handle_t *h) {
    coord_rep_state *st = (coord_rep_state *)((char *)h - offsetof(coord_rep_state, timer));
    free(st->parts);
    free(st);
}

void coord_rep_stop(coord *co) {
    coord_rep_state *st = co->rep;
    if (!st) return;
    co->rep = NULL;
    uv_timer_stop(&st->timer);
    uv_close((uv_handle_t *)&st->timer, timer_closed);
}

/* ---- FAILOVER p [TO node] [UNCLEAN] -------------------------------------- */

void coord_c_failover(cctx *x) {
    coord *co = x->co;
    coord_rep_state *st = co->rep;
    char msg[512];
    uint64_t p;
    const char *to = "";
    int unclean = 0;
    if (keel_parse_u64(x->argv[1], x->len[1], &p) || p >= co->partitions) {
        snprintf(msg, sizeof msg, "ERR partition must be a number from 0 to %u, got '%.32s'",
                 co->partitions - 1, x->argv[1]);
        coord_reply_err(x, msg);
        return;
    }
    for (int i = 2; i < x->argc; i++) {
        if (!strcasecmp(x->argv[i], "to") && i + 1 < x->argc)
            to = x->argv[++i];
        else if (!strcasecmp(x->argv[i], "unclean"))
            unclean = 1;
        else {
            coord_reply_err(x, "ERR syntax: FAILOVER <partition> [TO <node>] [UNCLEAN]");
            return;
        }
    }
    mapstore_partition part;
    if (!st || mapstore_partition_get(co->ms, (unsigned)p, &part)) {
        coord_reply_err(x, "ERR map store read failed");
        return;
    }
    if (!part.owner[0]) {
        snprintf(msg, sizeof msg, "ERR partition %llu has no leader yet", (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    if (part.nreplicas < 2) {
        snprintf(msg, sizeof msg,
                 "ERR partition %llu has one replica (RF 1): there is nothing to fail over to "
                 "(keel move moves it)",
                 (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    int k = -1;
    for (unsigned i = 0; to[0] && i < part.nreplicas; i++)
        if (!strcmp(part.replicas[i], to)) k = (int)i;
    if (to[0] && k < 0) {
        snprintf(msg, sizeof msg, "ERR %.64s is not a replica of partition %llu", to,
                 (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    if (k == 0) {
        snprintf(msg, sizeof msg, "ERR %.64s already leads partition %llu", to,
                 (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    if (k > 0 && !((part.isr >> k) & 1) && !unclean) {
        snprintf(msg, sizeof msg,
                 "ERR %.64s is not in the ISR of partition %llu: its copy may miss acknowledged "
                 "writes; add --unclean to promote it anyway",
                 to, (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    mapstore_node ln;
    int leader_up = mapstore_node_get(co->ms, part.owner, &ln) == 0 && coord_node_usable(&ln);
    if (leader_up && !to[0]) {
        snprintf(msg, sizeof msg,
                 "ERR the leader %s of partition %llu is UP and healthy: name the new leader with "
                 "--to NODE (keel promote hands over without losing writes)",
                 part.owner, (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    coord_rep_part *rp = &st->parts[p];
    if (rp->busy || rp->reply || (rp->take != REP_TAKE_NONE && rp->take != REP_TAKE_AUTO)) {
        snprintf(msg, sizeof msg, "ERR partition %llu has a leader change in flight; retry",
                 (unsigned long long)p);
        coord_reply_err(x, msg);
        return;
    }
    coord_deferred *d = coord_defer_hold(x);
    if (!d) {
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    if (rp->take == REP_TAKE_NONE) {
        rp->decided_ms = coord_now(co);
        snprintf(rp->from, sizeof rp->from, "%s", part.owner);
    }
    rp->take = REP_TAKE_OPERATOR;
    rp->unclean = unclean;
    snprintf(rp->to, sizeof rp->to, "%s", to);
    rp->reply = d;
    keel_log(KEEL_LOG_WARN, "failover_requested", "partition=%llu leader=%s to=%s unclean=%d by=%s",
             (unsigned long long)p, part.owner, to[0] ? to : "-", unclean, x->c->addr);
}

/* ---- Views --------------------------------------------------------------- */

void coord_rep_json(coord *co, cJSON *o) {
    coord_rep_state *st = co->rep;
    if (!st) return;
    size_t pending = 0;
    for (unsigned p = 0; p < co->partitions; p++)
        pending += st->parts[p].take != REP_TAKE_NONE;
    cJSON_AddNumberToObject(o, "failovers", (double)st->failovers);
    cJSON_AddNumberToObject(o, "unclean_failovers", (double)st->unclean_failovers);
    cJSON_AddNumberToObject(o, "reelections", (double)st->reelections);
    cJSON_AddNumberToObject(o, "failovers_pending", (double)pending);
    cJSON_AddNumberToObject(o, "isr_shrinks", (double)st->isr_shrinks);
    cJSON_AddNumberToObject(o, "isr_expands", (double)st->isr_expands);
    cJSON_AddNumberToObject(o, "isr_refused", (double)st->isr_refused);
    cJSON_AddNumberToObject(o, "last_failover_ms", st->last_failover_ms);
    cJSON_AddNumberToObject(o, "max_failover_ms", st->max_failover_ms);
    cJSON_AddNumberToObject(o, "lease_ms", (double)coord_setting_ll(co, "replica_lease_ms"));
}
