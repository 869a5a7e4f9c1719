/* coord_isr.c - ISR changes of replicated partitions (issue 11 step 4,
 * contract C4; coord_rep.h).
 *
 * Two sources, one rule: every change is a compare-and-set on the
 * partition epoch (mapstore_partition_set_isr), so a proposal made on a
 * map that moved on loses and is decided again.
 *   - The leader's engine proposes (rep_leader.c `propose`):
 *     KEEL.REP.ISR p partition_epoch leader_epoch shrink|expand node.
 *     Accepted only from the node that leads p at that leader epoch;
 *     expand only of a listed replica that is UP and not a restarted
 *     process still being settled (C3); the leader is never removed. A
 *     shrink may take the ISR below min_insync (writes then get
 *     -NOREPLICAS). The reply is +OK once the change is durable, or an
 *     error; the change reaches the nodes with the map.
 *   - The coordinator shrinks on its own, while the leader is UP: a
 *     follower that is SUSPECT, DOWN or removed, or that restarted (a new
 *     incarnation: its copy may have lost unsynced writes).
 */
#include "coord/coord_defer.h"
#include "coord/coord_rep.h"
#include "core/err.h"
#include "core/log.h"
#include "core/num.h"
#include "resp/resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct isr_arg {
    unsigned p;
    int expand;
    char node[KEEL_ID_MAX + 1];
    char why[32];
} isr_arg;

static void count(coord *co, const isr_arg *a, const mapstore_result *r) {
    coord_rep_state *st = co->rep;
    if (!st) return;
    st->parts[a->p].busy = 0;
    if (r->rc) {
        keel_log(KEEL_LOG_WARN, "isr_change_failed", "partition=%u %s=%s error=\"%s\"", a->p,
                 a->expand ? "add" : "remove", a->node, r->errmsg);
        return;
    }
    if (a->expand)
        st->isr_expands++;
    else
        st->isr_shrinks++;
    keel_log(KEEL_LOG_INFO, a->expand ? "isr_expand" : "isr_shrink",
             "partition=%u node=%s reason=%s isr=%u partition_epoch=%llu version=%llu", a->p,
             a->node, a->why, (unsigned)__builtin_popcount(r->part.isr),
             (unsigned long long)r->part.partition_epoch, (unsigned long long)r->version);
}

/* The leader's proposal, answered from the write's completion. */
static void proposal_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    (void)proto;
    count(co, arg, r);
    if (r->rc)
        resp_w_errorf(out, "ERR %s", r->errmsg);
    else
        resp_w_simple(out, "OK");
}

/* The coordinator's own shrink. */
static void shrink_done(void *arg, const mapstore_result *r) {
    void **a = arg;
    count(a[0], a[1], r);
    free(a[1]);
    free(a);
}

/* p's ISR as ids, with node added (expand) or removed; n to *n. */
static void isr_ids(const mapstore_partition *p, unsigned mask, const char **ids, size_t *n) {
    *n = 0;
    for (unsigned i = 0; i < p->nreplicas; i++)
        if ((mask >> i) & 1) ids[(*n)++] = p->replicas[i];
}

static int refuse(cctx *x, const char *msg) {
    if (x->co->rep) x->co->rep->isr_refused++;
    coord_reply_err(x, msg);
    return 0;
}

void coord_c_rep_isr(cctx *x, const char *id) {
    coord *co = x->co;
    char msg[320];
    uint64_t p, pe, le;
    int expand = !strcasecmp(x->argv[4], "expand");
    if (keel_parse_u64(x->argv[1], x->len[1], &p) || p >= co->partitions ||
        keel_parse_u64(x->argv[2], x->len[2], &pe) || keel_parse_u64(x->argv[3], x->len[3], &le) ||
        (!expand && strcasecmp(x->argv[4], "shrink"))) {
        refuse(x, "ERR bad KEEL.REP.ISR: partition partition_epoch leader_epoch shrink|expand node");
        return;
    }
    const char *node = x->argv[5];
    mapstore_partition part;
    if (!co->rep || mapstore_partition_get(co->ms, (unsigned)p, &part)) {
        refuse(x, "ERR map store read failed");
        return;
    }
    if (part.nreplicas < 2) {
        snprintf(msg, sizeof msg, "ERR partition %llu has one replica: no ISR to change",
                 (unsigned long long)p);
        refuse(x, msg);
        return;
    }
    if (strcmp(part.owner, id) || part.leader_epoch != le) {
        snprintf(msg, sizeof msg,
                 "ERR %s does not lead partition %llu at leader epoch %llu (leader %s, epoch %llu)",
                 id, (unsigned long long)p, (unsigned long long)le,
                 part.owner[0] ? part.owner : "-", (unsigned long long)part.leader_epoch);
        refuse(x, msg);
        return;
    }
    if (part.partition_epoch != pe) {
        snprintf(msg, sizeof msg,
                 "ERR partition %llu is at partition epoch %llu, not %llu: decide again on the "
                 "newer map",
                 (unsigned long long)p, (unsigned long long)part.partition_epoch,
                 (unsigned long long)pe);
        refuse(x, msg);
        return;
    }
    int k = -1;
    for (unsigned i = 0; i < part.nreplicas; i++)
        if (!strcmp(part.replicas[i], node)) k = (int)i;
    if (k < 0) {
        snprintf(msg, sizeof msg, "ERR %.64s is not a replica of partition %llu", node,
                 (unsigned long long)p);
        refuse(x, msg);
        return;
    }
    if (k == 0 && !expand) {
        refuse(x, "ERR the leader is never removed from the ISR");
        return;
    }
    unsigned mask = expand ? part.isr | (1u << k) : part.isr & ~(1u << k);
    if (mask == part.isr) { /* already so */
        resp_w_simple(&x->c->out, "OK");
        return;
    }
    if (expand) {
        mapstore_node n;
        member *m = coord_member(co, node, 0);
        if (mapstore_node_get(co->ms, node, &n) || !coord_node_usable(&n) ||
            (m && m->incarnation_pending)) {
            snprintf(msg, sizeof msg,
                     "ERR %.64s is not UP (or restarted and is being settled): not added to the "
                     "ISR of partition %llu",
                     node, (unsigned long long)p);
            refuse(x, msg);
            return;
        }
    }
    coord_rep_part *rp = &co->rep->parts[p];
    if (rp->busy || rp->take != REP_TAKE_NONE) {
        snprintf(msg, sizeof msg, "ERR partition %llu has a change in flight; retry",
                 (unsigned long long)p);
        refuse(x, msg);
        return;
    }
    const char *ids[KEEL_RF_MAX];
    size_t n;
    isr_ids(&part, mask, ids, &n);
    isr_arg *a = calloc(1, sizeof *a);
    if (!a) {
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    *a = (isr_arg){(unsigned)p, expand, {0}, "leader"};
    snprintf(a->node, sizeof a->node, "%s", node);
    mapstore_write w;
    mapstore_w_partition_set_isr(&w, (unsigned)p, pe, ids, n);
    if (coord_defer_write(x, &w, proposal_done, a)) {
        snprintf(msg, sizeof msg, "ERR %s", mapstore_errmsg(co->ms));
        coord_reply_err(x, msg);
        return;
    }
    rp->busy = 1;
}

int coord_isr_shrink_tick(coord *co, const mapstore_partition *p, int64_t now) {
    (void)now;
    unsigned mask = p->isr;
    const char *why = NULL, *first = NULL;
    for (unsigned i = 1; i < p->nreplicas; i++) {
        if (!((p->isr >> i) & 1)) continue;
        mapstore_node n;
        member *m = coord_member(co, p->replicas[i], 0);
        const char *w = NULL;
        if (mapstore_node_get(co->ms, p->replicas[i], &n))
            w = "unknown";
        else if (!coord_node_usable(&n))
            w = n.membership == MAPSTORE_MEMBER_REMOVED ? "removed"
                                                        : mapstore_liveness_name(n.liveness);
        else if (m && m->incarnation_pending)
            w = "restarted";
        if (!w) continue;
        mask &= ~(1u << i);
        if (!first) first = p->replicas[i], why = w;
    }
    if (mask == p->isr) return 0;
    const char *ids[KEEL_RF_MAX];
    size_t n;
    isr_ids(p, mask, ids, &n);
    void **arg = calloc(2, sizeof *arg);
    isr_arg *a = calloc(1, sizeof *a);
    if (!arg || !a) goto fail;
    *a = (isr_arg){p->id, 0, {0}, {0}};
    snprintf(a->node, sizeof a->node, "%s", first);
    snprintf(a->why, sizeof a->why, "%s", why);
    arg[0] = co;
    arg[1] = a;
    mapstore_write w;
    mapstore_w_partition_set_isr(&w, p->id, p->partition_epoch, ids, n);
    if (mapstore_submit(co->ms, &w, shrink_done, arg)) goto fail;
    co->rep->parts[p->id].busy = 1;
    return 1;
fail:
    free(a);
    free(arg);
    return 0;
}
