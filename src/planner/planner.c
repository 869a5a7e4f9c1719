/* planner.c - plan_run: from a checked model to targets, triggers and the
 * report around the greedy loop (plan_greedy.c). DESIGN.md §8.
 *
 * One round, in order:
 *   1. Weights. w(p) = bytes/total_bytes + load_weight * load/total_load,
 *      each term falling back to a replica count when its total is zero.
 *      A partition with a move in flight counts on its destination.
 *   2. Fixed weight F(n): replicas that may not move this round (pinned, in
 *      flight, within min_residence, on a frozen node), and partitions too
 *      large for any node's share (w > mean * largest capacity): moving one
 *      only moves the overload, so it stays and a stop reason says so.
 *   3. Targets by water-filling: T(n) = max(F(n), lambda * cap(n)) with
 *      lambda chosen so the targets add up to the live weight. Without fixed
 *      weight this is the proportional share cap(n) * mean; with it, a node
 *      held above its share by what may not move is not counted as room for
 *      others, so the rest converge among themselves instead of chasing an
 *      unreachable mean. Draining nodes target F (what must stay).
 *   4. Missing data: a live node with stale metrics empties the plan.
 *   5. Hysteresis: an episode opens when fill = W/T leaves
 *      [1/start_ratio, start_ratio], a node drains, a disk passes its high
 *      watermark or an empty node joins; it closes only when the planned end
 *      state is inside [1/stop_ratio, stop_ratio] with no forced work left.
 *   6. The greedy loop, then the floor, efficiency and stop reasons.
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-12

/* ---- Small helpers shared with plan_greedy.c ------------------------------ */

bool plan__replicated(const plan_ctx *c, const plan_part *p) {
    return p->nreplicas > 1 || c->s->replicas > 1;
}

double plan__weight(const plan_ctx *c, const plan_part *p) {
    if (plan__replicated(c, p)) return p->bytes * c->kb + c->kcb;
    return p->bytes * c->kb + p->load * c->kl + c->kc;
}

int32_t plan__live_racks(const plan_ctx *c) {
    int32_t n = 0;
    for (size_t i = 0; i < c->N; i++) {
        if (!c->nd[i].live) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = c->nd[j].live && c->nd[j].rack == c->nd[i].rack;
        n += !seen;
    }
    return n;
}

int plan__node_of(const plan_part *p, int r) {
    return r == 0 && p->moving_to >= 0 ? p->moving_to : p->replicas[r];
}

double plan__fill(const pnode *n) {
    if (n->T > 0) return n->W / n->T;
    return n->W > 0 ? INFINITY : 1.0;
}

double plan__ratio(const plan_ctx *c, const pnode *n) {
    if (!n->live) return NAN;
    if (n->cap <= 0) return n->W > 0 ? INFINITY : 0.0;
    if (c->mean <= 0) return 1.0; /* nothing anywhere: perfectly even */
    return n->W / (n->cap * c->mean);
}

void plan__stop(plan_result *r, plan_stop_code code, const char *key, const char *fmt, ...) {
    if (r->nstops >= PLAN_MAX_STOPS) return;
    plan_stop *s = &r->stops[r->nstops++];
    s->code = code;
    snprintf(s->key, sizeof s->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->text, sizeof s->text, fmt, ap);
    va_end(ap);
}

static bool has_stop(const plan_result *r, plan_stop_code code) {
    for (size_t i = 0; i < r->nstops; i++)
        if (r->stops[i].code == code) return true;
    return false;
}

/* ---- 1. Weights and node state -------------------------------------------- */

/* The load term counts only RF 1 partitions (a replicated partition's load
 * is its leader's, balanced by plan_lead.c); with none of those, the load
 * term is absent. At RF 1 everywhere this is the plain formula of §8. */
void plan__weight_constants(plan_ctx *c) {
    const plan_model *m = c->m;
    double tb = 0, tl = 0, count = 0, count1 = 0;
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        int k = p->nreplicas ? p->nreplicas : c->s->replicas > 1 ? c->s->replicas : 1;
        tb += p->bytes * k;
        count += k;
        if (plan__replicated(c, p)) continue;
        tl += p->load * k;
        count1 += k;
    }
    double lw = c->s->load_weight;
    c->kb = tb > 0 ? 1.0 / tb : 0;
    c->kl = tl > 0 ? lw / tl : 0;
    c->kcb = count > 0 && tb <= 0 ? 1.0 / count : 0;
    c->kc = c->kcb;
    if (count1 > 0 && tl <= 0) c->kc += lw / count1;
}

static int32_t rack_number(plan_ctx *c, char (*names)[PLAN_ID_MAX + 1], size_t i) {
    const plan_node *n = &c->m->nodes[i];
    const char *rack = n->rack[0] ? n->rack : NULL;
    if (rack)
        for (int32_t k = 0; k < c->nracks; k++)
            if (strcmp(names[k], rack) == 0) return k;
    snprintf(names[c->nracks], sizeof names[0], "%s", rack ? rack : "");
    return c->nracks++;
}

static int init_nodes(plan_ctx *c) {
    const plan_model *m = c->m;
    char(*names)[PLAN_ID_MAX + 1] = malloc((c->N ? c->N : 1) * sizeof *names);
    if (!names) return KEEL_ENOMEM;
    for (size_t i = 0; i < c->N; i++) {
        const plan_node *n = &m->nodes[i];
        pnode *p = &c->nd[i];
        p->live = n->state == PLAN_NODE_UP || n->state == PLAN_NODE_DRAINING;
        p->draining =
            p->live && (n->state == PLAN_NODE_DRAINING || n->draining || n->capacity <= 0);
        p->cap = p->live && !p->draining ? n->capacity : 0;
        p->disk = n->disk_used;
        p->rack = rack_number(c, names, i); /* "" racks get a number each */
        p->cls = CLS_NONE;
    }
    free(names);
    return 0;
}

static bool movable(const plan_ctx *c, const plan_part *p, int node) {
    return c->nd[node].live && !p->pinned && !p->in_flight && p->moving_to < 0 &&
           p->since_last_move_s >= c->s->min_residence_s;
}

/* Pass over all replicas: live weight, bytes and fixed weight per node. */
static void sum_nodes(plan_ctx *c, double *wmax) {
    const plan_model *m = c->m;
    *wmax = 0;
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        double w = plan__weight(c, p);
        for (int r = 0; r < p->nreplicas; r++) {
            pnode *n = &c->nd[plan__node_of(p, r)];
            if (!n->live) continue;
            n->W += w;
            n->bytes += p->bytes;
            if (movable(c, p, plan__node_of(p, r))) {
                n->nmov++;
                if (w > *wmax) *wmax = w;
            } else {
                n->F += w;
            }
        }
    }
}

static bool too_large(const plan_ctx *c, double w) {
    return w > c->mean * c->c_max * (1 + 1e-9);
}

/* 2. Partitions too large for any share become fixed where they are. */
static void fix_too_large(plan_ctx *c) {
    const plan_model *m = c->m;
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        double w = plan__weight(c, p);
        if (!too_large(c, w)) continue;
        for (int r = 0; r < p->nreplicas; r++) {
            int node = plan__node_of(p, r);
            pnode *n = &c->nd[node];
            if (!movable(c, p, node) || n->draining) continue;
            n->F += w;
            n->nmov--;
            if (c->too_large++ < 4) {
                char key[PLAN_STOP_KEY_MAX];
                snprintf(key, sizeof key, "partition-too-large:%llu", (unsigned long long)p->id);
                plan__stop(c->out, PLAN_STOP_TOO_LARGE, key,
                           "partition %llu weighs %.2fx the share of the largest node; it stays "
                           "on %s, which cannot reach stop_ratio while it holds it",
                           (unsigned long long)p->id, w / (c->mean * c->c_max), m->nodes[node].id);
            }
        }
    }
}

static double disk_frac(const plan_ctx *c, size_t i) {
    double cap = c->m->nodes[i].disk_capacity;
    return cap > 0 ? c->nd[i].disk / cap : 0;
}

/* Plain mean and the largest capacity that may receive. */
static void plain_mean(plan_ctx *c) {
    double W = 0, C = 0, live_cap_max = 0;
    size_t nA = 0;
    c->c_max = 0;
    for (size_t i = 0; i < c->N; i++) {
        pnode *n = &c->nd[i];
        if (!n->live) continue;
        W += n->W;
        C += n->cap;
        nA += n->cap > 0;
        if (n->cap > live_cap_max) live_cap_max = n->cap;
        if (n->cap > 0 && c->m->nodes[i].state == PLAN_NODE_UP &&
            disk_frac(c, i) <= c->s->disk_low && n->cap > c->c_max)
            c->c_max = n->cap;
    }
    if (c->c_max <= 0) c->c_max = live_cap_max;
    c->mean = C > 0 ? W / C : 0;
    double tavg = nA ? W / (double)nA : 0;
    c->tavg2 = tavg > 0 ? tavg * tavg : 1;
}

typedef struct fixed_ratio {
    double r; /* fixed weight per unit capacity */
    int32_t node;
} fixed_ratio;

static int cmp_ratio_desc(const void *a, const void *b) {
    const fixed_ratio *x = a, *y = b;
    if (x->r != y->r) return x->r > y->r ? -1 : 1;
    return x->node - y->node;
}

/* 3. Water-filling: saturate nodes whose fixed weight alone exceeds the
 * level, largest first, until the level stops falling. */
static int water_fill(plan_ctx *c) {
    fixed_ratio *fr = malloc((c->N ? c->N : 1) * sizeof *fr);
    if (!fr) return KEEL_ENOMEM;
    size_t k = 0;
    double pool = 0, cap = 0;
    for (size_t i = 0; i < c->N; i++) {
        pnode *n = &c->nd[i];
        n->T0 = n->cap * c->mean;
        if (!n->live) continue;
        pool += n->draining ? n->W - n->F : n->W;
        if (n->draining) n->T = n->F;
        if (n->cap > 0) {
            fr[k++] = (fixed_ratio){n->F / n->cap, (int32_t)i};
            cap += n->cap;
        }
    }
    qsort(fr, k, sizeof *fr, cmp_ratio_desc);
    size_t sat = 0;
    double lambda = cap > 0 ? pool / cap : 0;
    while (sat < k && fr[sat].r > lambda * (1 + EPS)) {
        pool -= c->nd[fr[sat].node].F;
        cap -= c->nd[fr[sat].node].cap;
        sat++;
        lambda = cap > 0 ? pool / cap : 0;
    }
    c->lambda = lambda;
    for (size_t j = 0; j < k; j++) {
        pnode *n = &c->nd[fr[j].node];
        n->T = j < sat ? n->F : lambda * n->cap;
    }
    free(fr);
    return 0;
}

/* Source class and destination eligibility from the state at round start. */
static void classify(plan_ctx *c) {
    const plan_settings *s = c->s;
    double wlive = 0;
    for (size_t i = 0; i < c->N; i++)
        wlive += c->nd[i].live ? c->nd[i].W : 0;
    for (size_t i = 0; i < c->N; i++) {
        pnode *n = &c->nd[i];
        if (!n->live) continue;
        double f = disk_frac(c, i);
        int cls = CLS_NONE;
        if (f > s->disk_flood)
            cls = CLS_FLOOD;
        else if (n->draining)
            cls = CLS_DRAIN;
        else if (f > s->disk_high)
            cls = CLS_DISK_HIGH;
        else if (plan__fill(n) > 1 + 1e-9)
            cls = CLS_NORMAL;
        n->cls = n->nmov > 0 ? cls : CLS_NONE;
        n->eligible = cls == CLS_NONE && !n->draining && c->m->nodes[i].state == PLAN_NODE_UP &&
                      n->cap > 0 && f <= s->disk_low;
        n->was_empty = n->eligible && n->W <= 0 && wlive > 0;
    }
}

/* Items for every node that sheds; slices sorted lazily by the loop. */
static int build_items(plan_ctx *c) {
    size_t total = 0;
    for (size_t i = 0; i < c->N; i++) {
        pnode *n = &c->nd[i];
        n->lo = (uint32_t)total;
        total += n->cls >= 0 ? n->nmov : 0;
        n->hi = n->first = n->lo;
    }
    c->items = malloc((total ? total : 1) * sizeof *c->items);
    c->alive = malloc((total ? total : 1) * sizeof *c->alive);
    if (!c->items || !c->alive) return KEEL_ENOMEM;
    const plan_model *m = c->m;
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        double w = plan__weight(c, p);
        for (int r = 0; r < p->nreplicas; r++) {
            int node = plan__node_of(p, r);
            pnode *n = &c->nd[node];
            if (n->cls < 0 || !movable(c, p, node) || (!n->draining && too_large(c, w))) continue;
            pitem *it = &c->items[n->hi];
            it->w = w;
            it->cold = p->bytes > 0 ? (float)(p->load / p->bytes) : (p->load > 0 ? INFINITY : 0);
            it->part = (uint32_t)i;
            it->rep = (uint32_t)r;
            c->alive[n->hi] = (int32_t)n->hi;
            n->hi++;
        }
    }
    c->nitems = total;
    return 0;
}

/* ---- 4, 5. Stale metrics and triggers ------------------------------------- */

static bool stale_metrics(plan_ctx *c) {
    bool stale = false;
    for (size_t i = 0; i < c->N; i++) {
        const plan_node *n = &c->m->nodes[i];
        if (!c->nd[i].live || n->metrics_age_s <= c->s->max_metrics_age_s) continue;
        if (!stale) c->out->nstops = 0; /* the only reasons of an empty plan */
        char key[PLAN_STOP_KEY_MAX];
        snprintf(key, sizeof key, "stale-metrics:%s", n->id);
        plan__stop(c->out, PLAN_STOP_STALE_METRICS, key,
                   "metrics of %s are %.1f s old (max %.1f s): the planner does not act on "
                   "missing data",
                   n->id, n->metrics_age_s, c->s->max_metrics_age_s);
        stale = true;
    }
    return stale;
}

/* Extremes of fill: max over live nodes with capacity, min over receivers. */
static void fill_extremes(const plan_ctx *c, double *fmax, double *fmin) {
    *fmax = 0;
    *fmin = INFINITY;
    for (size_t i = 0; i < c->N; i++) {
        const pnode *n = &c->nd[i];
        if (n->live && n->cap > 0 && plan__fill(n) > *fmax) *fmax = plan__fill(n);
        if (n->eligible && plan__fill(n) < *fmin) *fmin = plan__fill(n);
    }
    if (*fmin == INFINITY) *fmin = 1;
}

static bool forced_work(const plan_ctx *c) {
    for (size_t i = 0; i < c->N; i++) {
        const pnode *n = &c->nd[i];
        if (n->cls > CLS_NORMAL && n->nmov > 0 &&
            (n->draining || disk_frac(c, i) > c->s->disk_high))
            return true;
    }
    return false;
}

static bool any_was_empty(const plan_ctx *c) {
    for (size_t i = 0; i < c->N; i++)
        if (c->nd[i].was_empty) return true;
    return false;
}

static bool episode_starts(plan_ctx *c) {
    double fmax, fmin;
    fill_extremes(c, &fmax, &fmin);
    double start = c->s->start_ratio;
    if (c->m->episode.active || forced_work(c) || any_was_empty(c)) return true;
    if (fmax > start || fmin < 1 / start) return true;
    plan__stop(c->out, PLAN_STOP_NO_TRIGGER, "no-trigger",
               "no episode open and none starts: fill %.3f..%.3f inside [1/%.2f, %.2f], nothing "
               "draining or above a disk watermark",
               fmin, fmax, start, start);
    return false;
}

/* ---- 6. Report ------------------------------------------------------------ */

static void ratios(const plan_ctx *c, double *util, double *rmax, double *rmin) {
    *rmax = 0;
    *rmin = INFINITY;
    for (size_t i = 0; i < c->N; i++) {
        const pnode *n = &c->nd[i];
        util[i] = plan__ratio(c, n);
        if (!n->live || n->cap <= 0) continue;
        if (util[i] > *rmax) *rmax = util[i];
        if (util[i] < *rmin) *rmin = util[i];
    }
    if (*rmin == INFINITY) *rmin = *rmax = c->mean > 0 ? 0 : 1;
}

static void floors(plan_ctx *c) {
    double btot = 0, ctot = 0;
    for (size_t i = 0; i < c->N; i++)
        if (c->nd[i].live) {
            btot += c->nd[i].bytes;
            ctot += c->nd[i].cap;
        }
    for (size_t i = 0; i < c->N; i++) {
        const pnode *n = &c->nd[i];
        if (!n->live) continue;
        double tb = ctot > 0 ? btot * n->cap / ctot : 0;
        if (n->W > n->T0) c->out->floor += n->W - n->T0;
        if (n->bytes > tb) c->out->floor_bytes += n->bytes - tb;
    }
}

static void report_stuck(plan_ctx *c) {
    static const char *const why[] = {
        "",
        "no destination may take any of its partitions (replica, rack or disk limits)",
        "every allowed move would overshoot past its destination or gain too little",
        "no eligible destination is below its target",
    };
    /* why 3 is reported once, as no-destination, by the loop */
    size_t shown = 0;
    for (size_t i = 0; i < c->N && shown < 4; i++) {
        const pnode *n = &c->nd[i];
        if (!n->stuck || n->stuck_why == 3 || plan__fill(n) <= c->s->stop_ratio * (1 + 1e-6))
            continue;
        char key[PLAN_STOP_KEY_MAX];
        snprintf(key, sizeof key, "stuck:%s", c->m->nodes[i].id);
        plan__stop(c->out, PLAN_STOP_STUCK, key, "%s stays at %.3fx its target: %s",
                   c->m->nodes[i].id, plan__fill(n), why[n->stuck_why & 3]);
        shown++;
    }
}

/* A drain that cannot finish is said, whether or not the rest is balanced. */
static void report_drain_blocked(plan_ctx *c) {
    for (size_t i = 0; i < c->N; i++) {
        const pnode *n = &c->nd[i];
        if (!n->draining || n->W <= 1e-15 || n->nmov > 0) continue;
        char key[PLAN_STOP_KEY_MAX];
        snprintf(key, sizeof key, "drain-blocked:%s", c->m->nodes[i].id);
        plan__stop(c->out, PLAN_STOP_DRAIN_BLOCKED, key,
                   "%s still holds partitions that may not move now (pinned, in flight, within "
                   "min_residence, or no destination)",
                   c->m->nodes[i].id);
    }
}

/* Closes the episode when the planned end state is inside the dead band. */
static void finish_episode(plan_ctx *c, bool ran) {
    plan_result *r = c->out;
    double fmax, fmin, stop = c->s->stop_ratio;
    fill_extremes(c, &fmax, &fmin);
    bool balanced = fmax <= stop * (1 + 1e-9) && fmin >= 1 / stop * (1 - 1e-9) && !forced_work(c);
    if (ran && balanced)
        plan__stop(r, PLAN_STOP_BALANCED, "balanced",
                   "planned end state inside the dead band: fill %.3f..%.3f within [1/%.2f, "
                   "%.2f]; episode closed",
                   fmin, fmax, stop, stop);
    if (ran && !balanced && c->budget_hit)
        plan__stop(r, PLAN_STOP_BUDGET, "budget",
                   "max_moves_per_round (%u) used; the next round continues the episode",
                   (unsigned)c->s->max_moves);
    if (ran && !balanced) report_stuck(c);
    report_drain_blocked(c); /* even when no episode runs: a drain must say why it waits */
    if (ran && !balanced && !c->budget_hit && !has_stop(r, PLAN_STOP_NO_DESTINATION) &&
        !has_stop(r, PLAN_STOP_STUCK))
        plan__stop(r, PLAN_STOP_NO_GAIN, "no-gain",
                   "no allowed move reduces the imbalance further (fill %.3f..%.3f); the "
                   "episode stays open",
                   fmin, fmax);
    r->episode.active = ran && !balanced;
    r->episode.rounds = r->episode.active ? c->m->episode.rounds + 1 : 0;
}

static void finish(plan_ctx *c) {
    plan_result *r = c->out;
    ratios(c, r->util_after, &r->imbalance_after, &r->min_ratio_after);
    for (size_t i = 0; i < r->nmoves; i++) {
        r->moved += r->moves[i].weight;
        r->moved_bytes += r->moves[i].bytes;
    }
    r->efficiency = r->floor > 0 ? r->moved / r->floor : 0;
}

/* ---- plan_run ------------------------------------------------------------- */

static int setup(plan_ctx *c) {
    int rc;
    double wmax;
    c->N = c->m->nnodes;
    c->nd = calloc(c->N ? c->N : 1, sizeof *c->nd);
    c->out->util_before = calloc(c->N ? c->N : 1, sizeof(double));
    c->out->util_after = calloc(c->N ? c->N : 1, sizeof(double));
    if (!c->nd || !c->out->util_before || !c->out->util_after) return KEEL_ENOMEM;
    c->out->nnodes = c->N;
    plan__weight_constants(c);
    if ((rc = init_nodes(c))) return rc;
    sum_nodes(c, &wmax);
    plain_mean(c);
    if (too_large(c, wmax)) fix_too_large(c);
    if ((rc = water_fill(c))) return rc;
    classify(c);
    floors(c);
    ratios(c, c->out->util_before, &c->out->imbalance_before, &c->out->min_ratio_before);
    return 0;
}

static void ctx_close(plan_ctx *c) {
    free(c->nd);
    free(c->items);
    free(c->alive);
    plan__heap_close(&c->src);
    plan__heap_close(&c->dst);
    free(c->moved.key);
    free(c->moved.reps);
}

static bool no_capacity(plan_ctx *c) {
    for (size_t i = 0; i < c->N; i++)
        if (c->nd[i].live && c->nd[i].cap > 0) return false;
    plan__stop(c->out, PLAN_STOP_NO_CAPACITY, "no-capacity",
               "no live node has capacity > 0: nowhere to move anything");
    return true;
}

int plan_run(const plan_model *m, plan_result *out) {
    memset(out, 0, sizeof *out);
    out->episode = m->episode;
    out->lead_imbalance_before = out->lead_imbalance_after = 1;
    int rc = plan_model_check(m, out->error, sizeof out->error);
    if (rc) return rc;
    if (m->nparts >= (1u << PLAN_PART_BITS)) {
        snprintf(out->error, sizeof out->error, "parts: more than %u partitions",
                 (1u << PLAN_PART_BITS) - 1);
        return KEEL_EINVAL;
    }
    plan_ctx c = {.m = m, .s = &m->settings, .out = out};
    bool ran = false;
    if ((rc = setup(&c))) goto done;
    if (stale_metrics(&c) || no_capacity(&c)) {
        memcpy(out->util_after, out->util_before, c.N * sizeof(double));
        out->imbalance_after = out->imbalance_before;
        out->min_ratio_after = out->min_ratio_before;
        goto done; /* the episode is carried over unchanged */
    }
    if ((rc = plan__repair(&c))) goto done;
    if (out->nrepairs) { /* redundancy first: balancing waits for the next round */
        plan__stop(out, PLAN_STOP_REPAIRING, "repairing",
                   "%zu replica repairs planned to restore RF %u; balancing waits for the next "
                   "round",
                   out->nrepairs, (unsigned)m->settings.replicas);
        finish(&c);
        goto done; /* the episode is carried over unchanged */
    }
    if (episode_starts(&c)) {
        if ((rc = build_items(&c)) || (rc = plan__greedy(&c))) goto done;
        ran = true;
    }
    finish_episode(&c, ran);
    /* Leadership transfers only in a round that moves no data: a move of a
     * leader replica changes leader loads too, and transfers are cheap. */
    if ((rc = plan__leads(&c, out->nmoves ? UINT32_MAX : m->settings.max_moves))) goto done;
    finish(&c);
done:
    ctx_close(&c);
    if (rc) {
        char keep[sizeof out->error];
        memcpy(keep, out->error, sizeof keep);
        plan_result_close(out);
        memcpy(out->error, keep, sizeof keep);
    }
    return rc;
}

void plan_result_close(plan_result *r) {
    if (!r) return;
    free(r->moves);
    free(r->repairs);
    free(r->leads);
    free(r->util_before);
    free(r->util_after);
    memset(r, 0, sizeof *r);
}
