/* plan_repair.c - RF restoration (DESIGN.md §12 "Node loss", issue 11 step 5).
 *
 * With settings.replicas = RF > 0, every placed partition should have RF live
 * replicas (replicas not on a DOWN node; DOWN means past node_dead_after, so
 * a replica there is taken as lost). In order of urgency (fewest live
 * replicas first, then partition id):
 *
 *   live < RF      ADD a replica on the eligible node of least utilisation;
 *                  the first additions name a DOWN replica they replace, so
 *                  the executor removes it once the new one is in sync.
 *   live >= RF     REMOVE replicas on DOWN nodes (what is left of a repair
 *                  whose removal did not happen), then, while more than RF
 *                  remain, a follower out of the ISR, else the follower on
 *                  the fullest node. So a replica move cut short (a
 *                  coordinator restart between its add and its remove)
 *                  ends safely: an added replica still catching up is
 *                  removed again (the move aborted), one in sync stays and
 *                  the fullest holder goes (the move finished).
 *
 * Constraints as for moves: a destination is up, not draining, has capacity
 * and room below its low disk watermark for the partition's bytes, holds no
 * replica of the partition, and, when there are at least RF live racks, is
 * in no rack another live replica of the partition is in. The leader is
 * never removed (a leader on a DOWN node is the failover's business: the
 * partition waits for it). Partitions pinned or with a move in flight are
 * left alone, and every action counts against max_moves.
 *
 * Each action updates the node weights in c->nd, so the later picks of the
 * same round (and the reported utilisations) see it.
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct cand {
    uint32_t part;
    uint8_t live;
} cand;

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->live != y->live) return x->live < y->live ? -1 : 1;
    return x->part < y->part ? -1 : x->part > y->part;
}

static bool is_down(const plan_ctx *c, int32_t n) {
    return c->m->nodes[n].state == PLAN_NODE_DOWN;
}

static uint8_t live_count(const plan_ctx *c, const plan_part *p) {
    uint8_t k = 0;
    for (int r = 0; r < p->nreplicas; r++)
        k += !is_down(c, p->replicas[r]);
    return k;
}

static int push_repair(plan_ctx *c, const plan_repair *rp) {
    plan_result *r = c->out;
    if (r->nrepairs == c->repairs_cap) {
        size_t cap = c->repairs_cap ? c->repairs_cap * 2 : 16;
        plan_repair *a = realloc(r->repairs, cap * sizeof *a);
        if (!a) return KEEL_ENOMEM;
        r->repairs = a;
        c->repairs_cap = cap;
    }
    r->repairs[r->nrepairs++] = *rp;
    return 0;
}

/* reps[0..n) are the partition's replicas as planned so far this round. */
static bool may_receive(const plan_ctx *c, const plan_part *p, const int32_t *reps, int n,
                        int32_t d, bool racks) {
    const plan_node *dn = &c->m->nodes[d];
    const pnode *D = &c->nd[d];
    if (dn->state != PLAN_NODE_UP || D->draining || D->cap <= 0) return false;
    if (dn->disk_capacity > 0 && D->disk + p->bytes > c->s->disk_low * dn->disk_capacity)
        return false;
    for (int k = 0; k < n; k++) {
        if (reps[k] == d) return false;
        if (racks && !is_down(c, reps[k]) && c->nd[reps[k]].rack == D->rack) return false;
    }
    return true;
}

static int32_t pick_destination(const plan_ctx *c, const plan_part *p, const int32_t *reps, int n,
                                double w, bool racks) {
    int32_t best = -1;
    double best_u = INFINITY;
    for (size_t i = 0; i < c->N; i++) {
        if (!may_receive(c, p, reps, n, (int32_t)i, racks)) continue;
        double u = (c->nd[i].W + w) / c->nd[i].cap;
        if (u < best_u) best_u = u, best = (int32_t)i;
    }
    return best;
}

static void under_replicated(plan_ctx *c, const plan_part *p, uint8_t live, size_t *shown) {
    if ((*shown)++ >= 4) return;
    char key[PLAN_STOP_KEY_MAX];
    snprintf(key, sizeof key, "under-replicated:%llu", (unsigned long long)p->id);
    plan__stop(c->out, PLAN_STOP_UNDER_REPLICATED, key,
               "partition %llu has %u live replicas of %u and no node may take another (up, "
               "capacity > 0, disk below low, not holding it, rack anti-affinity)",
               (unsigned long long)p->id, (unsigned)live, (unsigned)c->s->replicas);
}

static bool budget_left(const plan_ctx *c) {
    return !c->s->max_moves || c->out->nrepairs < c->s->max_moves;
}

/* Adds replicas until RF are live; the first ones replace DOWN replicas. */
static int add_missing(plan_ctx *c, uint32_t i, uint8_t live, bool racks, size_t *shown) {
    const plan_part *p = &c->m->parts[i];
    int32_t reps[2 * PLAN_MAX_REPLICAS], dead[PLAN_MAX_REPLICAS];
    int n = 0, ndead = 0;
    for (int r = 0; r < p->nreplicas; r++) {
        reps[n++] = p->replicas[r];
        if (is_down(c, p->replicas[r])) dead[ndead++] = p->replicas[r];
    }
    double w = plan__weight(c, p);
    for (int k = 0; live + k < c->s->replicas && budget_left(c); k++) {
        int32_t d = pick_destination(c, p, reps, n, w, racks);
        if (d < 0) {
            under_replicated(c, p, (uint8_t)(live + k), shown);
            break;
        }
        plan_repair rp = {.part = i,
                          .part_id = p->id,
                          .kind = PLAN_REPAIR_ADD,
                          .node = d,
                          .replace = k < ndead ? dead[k] : -1,
                          .live = (uint8_t)(live + k),
                          .bytes = p->bytes};
        int rc = push_repair(c, &rp);
        if (rc) return rc;
        reps[n++] = d;
        pnode *D = &c->nd[d];
        D->W += w, D->bytes += p->bytes, D->disk += p->bytes;
    }
    return 0;
}

static int remove_one(plan_ctx *c, uint32_t i, int32_t node, uint8_t live) {
    const plan_part *p = &c->m->parts[i];
    plan_repair rp = {.part = i,
                      .part_id = p->id,
                      .kind = PLAN_REPAIR_REMOVE,
                      .node = node,
                      .replace = -1,
                      .live = live,
                      .bytes = p->bytes};
    pnode *N = &c->nd[node];
    if (N->live) {
        double w = plan__weight(c, p);
        N->W -= w, N->bytes -= p->bytes, N->disk -= p->bytes;
    }
    return push_repair(c, &rp);
}

/* Removes DOWN replicas, then followers on the fullest nodes beyond RF. */
static int remove_extra(plan_ctx *c, uint32_t i, uint8_t live) {
    const plan_part *p = &c->m->parts[i];
    bool gone[PLAN_MAX_REPLICAS] = {false};
    int rc;
    for (int r = 1; r < p->nreplicas && budget_left(c); r++) {
        if (!is_down(c, p->replicas[r])) continue;
        if ((rc = remove_one(c, i, p->replicas[r], live))) return rc;
        gone[r] = true;
    }
    for (uint8_t keep = live; keep > c->s->replicas && budget_left(c); keep--) {
        int best = -1;
        double best_u = -1;
        for (int r = 1; r < p->nreplicas; r++) {
            const pnode *N = &c->nd[p->replicas[r]];
            if (gone[r] || is_down(c, p->replicas[r])) continue;
            double u = N->cap > 0 ? N->W / N->cap : 1e300;
            if (p->lagging >> r & 1) u += 1e301; /* out of the ISR: removed first */
            if (u > best_u) best_u = u, best = r;
        }
        if (best < 0) break;
        if ((rc = remove_one(c, i, p->replicas[best], live))) return rc;
        gone[best] = true;
    }
    return 0;
}

static bool needs_repair(const plan_ctx *c, const plan_part *p, uint8_t live) {
    if (p->nreplicas == 0 || p->pinned || p->in_flight || p->moving_to >= 0) return false;
    if (is_down(c, p->replicas[0])) return false; /* waits for the failover */
    return live != c->s->replicas || live != p->nreplicas;
}

int plan__repair(plan_ctx *c) {
    const plan_model *m = c->m;
    if (!c->s->replicas) return 0;
    cand *cs = malloc((m->nparts ? m->nparts : 1) * sizeof *cs);
    if (!cs) return KEEL_ENOMEM;
    size_t n = 0, shown = 0;
    for (size_t i = 0; i < m->nparts; i++) {
        uint8_t live = live_count(c, &m->parts[i]);
        if (needs_repair(c, &m->parts[i], live)) cs[n++] = (cand){(uint32_t)i, live};
    }
    qsort(cs, n, sizeof *cs, cmp_cand);
    bool racks = plan__live_racks(c) >= c->s->replicas;
    int rc = 0;
    for (size_t k = 0; k < n && !rc && budget_left(c); k++) {
        if (cs[k].live < c->s->replicas)
            rc = add_missing(c, cs[k].part, cs[k].live, racks, &shown);
        else
            rc = remove_extra(c, cs[k].part, cs[k].live);
    }
    free(cs);
    return rc;
}
