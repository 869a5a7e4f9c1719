/* plan_lead.c - leadership transfers for request-load skew (DESIGN.md §12,
 * issue 11 step 5). No data is copied: an in-sync follower becomes leader.
 *
 * Leader load L(n) = sum of load over the replicated partitions n leads (a
 * replicated partition's requests are served by its leader). Nodes that may
 * lead: up, not draining, capacity > 0. Target T(n) = cap(n) * (total leader
 * load on live nodes) / (capacity of the nodes that may lead); fill = L / T.
 *
 * Hysteresis as for bytes: an episode (episode.lead_active) opens when the
 * fullest node's fill passes start_ratio or the emptiest's drops below
 * 1/start_ratio, and closes when every fill is inside [1/stop_ratio,
 * stop_ratio]. Each step takes the fullest node s and, over the partitions
 * it leads (not pinned, no move in flight), the in-sync follower d that may
 * lead with the largest gain 2w(e_s - e_d) - 2w^2 (e = L - T): the same
 * sum-of-squares objective as plan_greedy.c. A node that received
 * leadership this round never sheds in it, and one that shed never
 * receives, so no transfer is undone in the same round.
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROLE_NONE = 0, ROLE_SHED = 1, ROLE_RECV = 2, ROLE_DONE = 3 };

typedef struct lctx {
    double *L, *T;
    uint8_t *role;
    bool *may_lead;
    int32_t *leader; /* per partition: its leader's node as planned so far */
    uint32_t *byn;   /* partitions grouped by original leader */
    uint32_t *off;   /* [N + 1] offsets into byn */
} lctx;

static double lfill(const lctx *l, int32_t n) {
    if (l->T[n] > 0) return l->L[n] / l->T[n];
    return l->L[n] > 0 ? INFINITY : 1.0;
}

static int push_lead(plan_ctx *c, const plan_lead *ld) {
    plan_result *r = c->out;
    if (r->nleads == c->leads_cap) {
        size_t cap = c->leads_cap ? c->leads_cap * 2 : 16;
        plan_lead *a = realloc(r->leads, cap * sizeof *a);
        if (!a) return KEEL_ENOMEM;
        r->leads = a;
        c->leads_cap = cap;
    }
    r->leads[r->nleads++] = *ld;
    return 0;
}

/* Max fill over live leaders and may-lead nodes, min over may-lead nodes. */
static void extremes(const plan_ctx *c, const lctx *l, double *fmax, double *fmin) {
    *fmax = 0;
    *fmin = INFINITY;
    for (size_t i = 0; i < c->N; i++) {
        if (!c->nd[i].live) continue;
        double f = lfill(l, (int32_t)i);
        if ((l->may_lead[i] || l->L[i] > 0) && f > *fmax) *fmax = f;
        if (l->may_lead[i] && f < *fmin) *fmin = f;
    }
    if (*fmin == INFINITY) *fmin = 1;
    if (*fmax == 0 && *fmin == 1) *fmax = 1;
}

static bool movable_lead(const plan_part *p) {
    return p->nreplicas > 1 && !p->pinned && !p->in_flight && p->moving_to < 0;
}

static int setup(plan_ctx *c, lctx *l, double *total) {
    const plan_model *m = c->m;
    size_t N = c->N ? c->N : 1;
    l->L = calloc(N, sizeof *l->L);
    l->T = calloc(N, sizeof *l->T);
    l->role = calloc(N, 1);
    l->may_lead = calloc(N, sizeof *l->may_lead);
    l->off = calloc(N + 1, sizeof *l->off);
    l->leader = malloc((m->nparts ? m->nparts : 1) * sizeof *l->leader);
    l->byn = malloc((m->nparts ? m->nparts : 1) * sizeof *l->byn);
    if (!l->L || !l->T || !l->role || !l->may_lead || !l->off || !l->leader || !l->byn)
        return KEEL_ENOMEM;
    double cap = 0;
    *total = 0;
    for (size_t i = 0; i < c->N; i++) {
        const pnode *n = &c->nd[i];
        l->may_lead[i] = m->nodes[i].state == PLAN_NODE_UP && !n->draining && n->cap > 0;
        if (l->may_lead[i]) cap += n->cap;
    }
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        l->leader[i] = p->nreplicas ? p->replicas[0] : -1;
        if (p->nreplicas < 2 || !c->nd[p->replicas[0]].live) continue;
        l->L[p->replicas[0]] += p->load;
        *total += p->load;
        l->off[p->replicas[0] + 1]++;
    }
    for (size_t i = 0; i < c->N; i++)
        l->off[i + 1] += l->off[i];
    uint32_t *fill = calloc(N, sizeof *fill);
    if (!fill) return KEEL_ENOMEM;
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        if (p->nreplicas < 2 || !c->nd[p->replicas[0]].live) continue;
        int32_t n = p->replicas[0];
        l->byn[l->off[n] + fill[n]++] = (uint32_t)i;
    }
    free(fill);
    for (size_t i = 0; i < c->N; i++)
        l->T[i] = l->may_lead[i] && cap > 0 ? c->nd[i].cap * *total / cap : 0;
    return 0;
}

static void lctx_close(lctx *l) {
    free(l->L);
    free(l->T);
    free(l->role);
    free(l->may_lead);
    free(l->leader);
    free(l->byn);
    free(l->off);
}

/* The fullest node that may still shed, or -1. */
static int32_t top_source(const plan_ctx *c, const lctx *l) {
    int32_t best = -1;
    double bf = 0;
    for (size_t i = 0; i < c->N; i++) {
        if (!c->nd[i].live || l->role[i] == ROLE_RECV || l->role[i] == ROLE_DONE) continue;
        double f = lfill(l, (int32_t)i);
        if (l->L[i] > 0 && f > 1 + 1e-9 && f > bf) bf = f, best = (int32_t)i;
    }
    return best;
}

typedef struct lchoice {
    uint32_t part;
    uint8_t slot;
    double gain;
} lchoice;

static bool best_transfer(const plan_ctx *c, const lctx *l, int32_t s, lchoice *out) {
    const plan_model *m = c->m;
    bool found = false;
    double es = l->L[s] - l->T[s];
    out->gain = 1e-12 * (l->T[s] > 0 ? l->T[s] * l->T[s] : 1);
    for (uint32_t k = l->off[s]; k < l->off[s + 1]; k++) {
        uint32_t i = l->byn[k];
        const plan_part *p = &m->parts[i];
        if (l->leader[i] != s || !movable_lead(p) || p->load <= 0) continue;
        for (int r = 1; r < p->nreplicas; r++) {
            int32_t d = p->replicas[r];
            if (!l->may_lead[d] || l->role[d] == ROLE_SHED || (p->lagging >> r & 1)) continue;
            double w = p->load, ed = l->L[d] - l->T[d];
            double g = 2 * w * (es - ed) - 2 * w * w;
            if (g > out->gain) {
                *out = (lchoice){i, (uint8_t)r, g};
                found = true;
            }
        }
    }
    return found;
}

static int transfer(plan_ctx *c, lctx *l, int32_t s, const lchoice *ch) {
    const plan_part *p = &c->m->parts[ch->part];
    int32_t d = p->replicas[ch->slot];
    plan_lead ld = {.part = ch->part,
                    .part_id = p->id,
                    .replica = ch->slot,
                    .from = s,
                    .to = d,
                    .load = p->load,
                    .from_fill_before = lfill(l, s),
                    .to_fill_before = lfill(l, d)};
    l->L[s] -= p->load;
    l->L[d] += p->load;
    l->leader[ch->part] = d;
    l->role[s] = ROLE_SHED;
    l->role[d] = ROLE_RECV;
    ld.from_fill_after = lfill(l, s);
    ld.to_fill_after = lfill(l, d);
    return push_lead(c, &ld);
}

static bool in_band(const plan_ctx *c, const lctx *l) {
    double fmax, fmin, stop = c->s->stop_ratio;
    extremes(c, l, &fmax, &fmin);
    return fmax <= stop * (1 + 1e-9) && fmin >= (1 - 1e-9) / stop;
}

int plan__leads(plan_ctx *c, uint32_t budget) {
    plan_result *r = c->out;
    lctx l = {0};
    double total, fmax, fmin;
    int rc = setup(c, &l, &total);
    if (rc) goto done;
    extremes(c, &l, &fmax, &fmin);
    r->lead_imbalance_before = r->lead_imbalance_after = total > 0 ? fmax : 1;
    if (total <= 0 || budget == UINT32_MAX) goto done; /* UINT32_MAX: report only */
    double start = c->s->start_ratio;
    if (!c->m->episode.lead_active && fmax <= start && fmin >= 1 / start) goto done;
    while (!in_band(c, &l) && (!budget || r->nleads < budget)) {
        int32_t s = top_source(c, &l);
        if (s < 0) break;
        lchoice ch;
        if (!best_transfer(c, &l, s, &ch)) {
            l.role[s] = ROLE_DONE;
            continue;
        }
        if ((rc = transfer(c, &l, s, &ch))) goto done;
    }
    bool balanced = in_band(c, &l);
    r->episode.lead_active = !balanced;
    if (balanced)
        plan__stop(r, PLAN_STOP_LEADERS_BALANCED, "leaders-balanced",
                   "leader load inside the dead band after %zu leadership transfers", r->nleads);
    extremes(c, &l, &fmax, &fmin);
    r->lead_imbalance_after = fmax;
done:
    lctx_close(&l);
    return rc;
}
