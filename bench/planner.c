/* planner.c - bench/planner: keel's planner against the seed article's
 * reference greedy loop (the anchor), on the same clusters, in one run.
 *
 * Clusters: 16,384 partitions on 100 nodes and 1,000,000 partitions on
 * 1,000 nodes. Each starts imbalanced the way the issue asks: the last node
 * was just added and is empty, the others hold the partitions round-robin,
 * and 10% of the partitions (chosen at random) are hot, with 10x the load.
 * Bytes vary uniformly in [0.5, 1.5] x 64 MiB; base load in [0.5, 1.5] x 10/s.
 *
 * Both planners plan the whole rebalance (no per-round budget) with the same
 * weight, w(p) = bytes/total_bytes + 0.5 * load/total_load, and the same
 * stop ratio, 1.10. The figures for each are measured here, from its moves,
 * by one function, so they compare like with like:
 *   plan_ms               wall time of planning (keel: median of 3 runs)
 *   moves                 number of moves
 *   moved_over_floor      moved weight / movement floor (DESIGN §8)
 *   bytes_moved_over_floor  moved bytes / bytes floor
 *   final_max_over_mean   max u/mean after applying the moves
 *
 * The anchor is a line-for-line C version of plan_moves() in
 * seeds/002_15f3d273cfaae3d5.txt: each move takes the most utilised node,
 * scans EVERY partition for those on it, and pairs each with the least
 * utilised eligible node. One liberty, in the anchor's favour: Python's
 * `for dst in sorted(live, key=util)` re-sorts the nodes for every partition
 * scanned; utilisation cannot change during the scan, so the C version
 * sorts once per move. Same moves, less time. If the anchor would run over
 * --anchor-budget seconds (default 60) it stops there: its moves are capped,
 * the JSON says so, and the two are compared by time per move.
 *
 * Output: ONE JSON object on stdout; progress on stderr. Exit status 0
 * unless something failed to run. Not a test: CTest does not run it.
 * Flags: --quick (the small cluster only), --seed N, --anchor-budget S.
 */
#include "core/err.h"
#include "planner/planner.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOAD_WEIGHT 0.5
#define STOP_RATIO 1.10

typedef struct cluster {
    const char *name;
    size_t P, N;
    int32_t *owner; /* [P] initial owner */
    double *bytes, *load, *w;
    double *cap; /* [N] */
} cluster;

typedef struct outcome {
    double plan_ms, per_move_us;
    size_t moves;
    double moved_over_floor, bytes_moved_over_floor, final_max_over_mean;
    bool capped;
} outcome;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) {
    return (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* ---- Clusters ------------------------------------------------------------- */

static int cluster_build(cluster *c, const char *name, size_t P, size_t N, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->name = name, c->P = P, c->N = N;
    c->owner = malloc(P * sizeof *c->owner);
    c->bytes = malloc(P * sizeof *c->bytes);
    c->load = malloc(P * sizeof *c->load);
    c->w = malloc(P * sizeof *c->w);
    c->cap = malloc(N * sizeof *c->cap);
    if (!c->owner || !c->bytes || !c->load || !c->w || !c->cap) return KEEL_ENOMEM;
    double tb = 0, tl = 0;
    for (size_t i = 0; i < P; i++) {
        c->owner[i] = (int32_t)(i % (N - 1)); /* node N-1 is the new, empty one */
        c->bytes[i] = (0.5 + rng_unit(&seed)) * 64.0 * 1048576;
        c->load[i] = (0.5 + rng_unit(&seed)) * 10;
        tb += c->bytes[i];
    }
    for (size_t hot = 0; hot < P / 10;) { /* 10% hot, distinct */
        size_t i = rng_next(&seed) % P;
        if (c->load[i] >= 50) continue;
        c->load[i] *= 10;
        hot++;
    }
    for (size_t i = 0; i < P; i++)
        tl += c->load[i];
    for (size_t i = 0; i < P; i++)
        c->w[i] = c->bytes[i] / tb + LOAD_WEIGHT * c->load[i] / tl;
    for (size_t n = 0; n < N; n++)
        c->cap[n] = 1;
    return 0;
}

static void cluster_free(cluster *c) {
    free(c->owner);
    free(c->bytes);
    free(c->load);
    free(c->w);
    free(c->cap);
}

/* ---- One yardstick for both planners -------------------------------------- */

typedef struct move {
    size_t part;
    int32_t from, to;
} move;

/* Floors before, and max u/mean after applying moves[0..n). */
static void judge(const cluster *c, const move *mv, size_t n, outcome *o) {
    double *W = calloc(c->N, sizeof *W), *B = calloc(c->N, sizeof *B);
    double tw = 0, tb = 0, tc = 0, fw = 0, fb = 0, mw = 0, mb = 0, mx = 0;
    for (size_t i = 0; i < c->P; i++)
        W[c->owner[i]] += c->w[i], B[c->owner[i]] += c->bytes[i];
    for (size_t k = 0; k < c->N; k++)
        tw += W[k], tb += B[k], tc += c->cap[k];
    for (size_t k = 0; k < c->N; k++) {
        fw += fmax(0, W[k] - tw * c->cap[k] / tc);
        fb += fmax(0, B[k] - tb * c->cap[k] / tc);
    }
    for (size_t i = 0; i < n; i++) {
        double w = c->w[mv[i].part], b = c->bytes[mv[i].part];
        W[mv[i].from] -= w, W[mv[i].to] += w;
        mw += w, mb += b;
    }
    for (size_t k = 0; k < c->N; k++)
        if (c->cap[k] > 0) mx = fmax(mx, W[k] / c->cap[k] / (tw / tc));
    o->moves = n;
    o->moved_over_floor = fw > 0 ? mw / fw : 0;
    o->bytes_moved_over_floor = fb > 0 ? mb / fb : 0;
    o->final_max_over_mean = mx;
    free(W);
    free(B);
}

static double initial_max_over_mean(const cluster *c) {
    outcome o;
    judge(c, NULL, 0, &o);
    return o.final_max_over_mean;
}

/* ---- Keel ----------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_keel(const cluster *c, outcome *o, char *err, size_t cap) {
    plan_model m;
    plan_result r = {0};
    double t[3];
    int rc;
    plan_model_init(&m);
    m.settings.max_moves = 0; /* plan the whole rebalance in one call */
    m.settings.load_weight = LOAD_WEIGHT;
    m.settings.stop_ratio = STOP_RATIO;
    for (size_t n = 0; n < c->N; n++) {
        plan_node nd;
        char id[16];
        snprintf(id, sizeof id, "n%zu", n + 1);
        plan_node_default(&nd, id);
        nd.capacity = c->cap[n];
        if ((rc = plan_model_add_node(&m, &nd)) < 0) goto done;
    }
    if ((rc = plan_model_reserve_parts(&m, c->P))) goto done;
    for (size_t i = 0; i < c->P; i++) {
        plan_part p;
        plan_part_default(&p, i);
        p.replicas[0] = c->owner[i];
        p.nreplicas = 1;
        p.bytes = c->bytes[i];
        p.load = c->load[i];
        if ((rc = plan_model_add_part(&m, &p))) goto done;
    }
    for (int k = 0; k < 3; k++) {
        plan_result_close(&r);
        double t0 = now_s();
        rc = plan_run(&m, &r);
        t[k] = (now_s() - t0) * 1e3;
        if (rc) {
            snprintf(err, cap, "plan_run: %s", r.error[0] ? r.error : keel_strerror(rc));
            goto done;
        }
    }
    qsort(t, 3, sizeof *t, cmp_double);
    move *mv = malloc((r.nmoves ? r.nmoves : 1) * sizeof *mv);
    if (!mv) {
        rc = KEEL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < r.nmoves; i++)
        mv[i] = (move){r.moves[i].part, r.moves[i].from, r.moves[i].to};
    judge(c, mv, r.nmoves, o);
    free(mv);
    o->plan_ms = t[1];
    o->per_move_us = r.nmoves ? t[1] * 1e3 / (double)r.nmoves : 0;
    fprintf(stderr, "planner: keel %s: %zu moves in %.1f ms (own floor %.4f, efficiency %.4f)\n",
            c->name, r.nmoves, t[1], r.floor, r.efficiency);
done:
    if (rc && !err[0]) snprintf(err, cap, "keel: %s", keel_strerror(rc));
    plan_result_close(&r);
    plan_model_close(&m);
    return rc;
}

/* ---- The anchor: plan_moves() of the seed article, in C -------------------- */

typedef struct anchor {
    const cluster *c;
    int32_t *assign;
    double *load; /* per node */
    int32_t *order;
    double total, total_cap;
} anchor;

/* util(n): load/capacity, inf for a draining node holding load, else 0. */
static double util(const anchor *a, int32_t n) {
    double cp = a->c->cap[n];
    if (cp) return a->load[n] / cp;
    return a->load[n] ? INFINITY : 0.0;
}

static double target(const anchor *a, int32_t n) {
    return a->total * a->c->cap[n] / a->total_cap;
}

static const anchor *sort_ctx;
static int cmp_util(const void *x, const void *y) {
    int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    double ui = util(sort_ctx, i), uj = util(sort_ctx, j);
    if (ui != uj) return ui < uj ? -1 : 1;
    return (i > j) - (i < j); /* Python's sort is stable */
}

/* literal: re-sort the nodes for every partition scanned, as the Python
 * `for dst in sorted(live, key=util)` does; otherwise once per move. */
static int run_anchor(const cluster *c, double budget_s, bool literal, outcome *o) {
    anchor a = {.c = c};
    size_t nlive = 0, nmoves = 0, cap_moves = c->P;
    move *mv = malloc(cap_moves * sizeof *mv);
    a.assign = malloc(c->P * sizeof *a.assign);
    a.load = calloc(c->N, sizeof *a.load);
    a.order = malloc(c->N * sizeof *a.order);
    if (!mv || !a.assign || !a.load || !a.order) return KEEL_ENOMEM;
    memcpy(a.assign, c->owner, c->P * sizeof *a.assign);
    double t0 = now_s();
    for (size_t i = 0; i < c->P; i++)
        a.load[a.assign[i]] += c->w[i];
    for (size_t n = 0; n < c->N; n++) {
        a.total_cap += c->cap[n];
        a.total += a.load[n];
        if (c->cap[n] > 0) a.order[nlive++] = (int32_t)n; /* live */
    }
    double mean = a.total / a.total_cap;
    o->capped = false;
    while (nmoves < cap_moves) {
        int32_t src = 0, low = a.order[0];
        for (size_t n = 1; n < c->N; n++) /* max(nodes, key=util): first of equals */
            if (util(&a, (int32_t)n) > util(&a, src)) src = (int32_t)n;
        for (size_t k = 1; k < nlive; k++) /* min(live, key=util) */
            if (util(&a, a.order[k]) < util(&a, low)) low = a.order[k];
        if (util(&a, src) <= STOP_RATIO * mean && util(&a, low) >= mean / STOP_RATIO)
            break; /* inside the dead band */
        sort_ctx = &a;
        if (!literal) qsort(a.order, nlive, sizeof *a.order, cmp_util); /* sorted(live, ...) */
        bool found = false;
        double best_gain = 0;
        size_t best_part = 0;
        int32_t best_dst = -1;
        for (size_t part = 0; part < c->P; part++) { /* every partition, every move */
            if (a.assign[part] != src) continue;
            if (literal) qsort(a.order, nlive, sizeof *a.order, cmp_util);
            double w = c->w[part];
            for (size_t k = 0; k < nlive; k++) {
                int32_t dst = a.order[k];
                if (dst == src) continue; /* RF = 1: no other replicas, no racks */
                double ts = target(&a, src), td = target(&a, dst);
                double before = pow(a.load[src] - ts, 2) + pow(a.load[dst] - td, 2);
                double after = pow(a.load[src] - w - ts, 2) + pow(a.load[dst] + w - td, 2);
                double gain = before - after;
                if (!found || gain > best_gain) {
                    found = true;
                    best_gain = gain, best_part = part, best_dst = dst;
                }
                break; /* least-loaded valid dst only */
            }
        }
        if (!found || best_gain <= 0) break; /* nothing helps; stop, do not thrash */
        a.assign[best_part] = best_dst;
        a.load[src] -= c->w[best_part];
        a.load[best_dst] += c->w[best_part];
        mv[nmoves++] = (move){best_part, src, best_dst};
        if (now_s() - t0 > budget_s) {
            o->capped = true;
            break;
        }
    }
    double ms = (now_s() - t0) * 1e3;
    judge(c, mv, nmoves, o);
    o->plan_ms = ms;
    o->per_move_us = nmoves ? ms * 1e3 / (double)nmoves : 0;
    fprintf(stderr, "planner: anchor%s %s: %zu moves in %.1f ms%s\n", literal ? " (literal)" : "",
            c->name, nmoves, ms, o->capped ? " (capped by the time budget)" : "");
    free(mv);
    free(a.assign);
    free(a.load);
    free(a.order);
    return 0;
}

/* ---- Report --------------------------------------------------------------- */

static void put_outcome(const char *key, const outcome *o, bool anchor) {
    printf("      \"%s\": {\"plan_ms\": %.3f, \"time_per_move_us\": %.3f, \"moves\": %zu, "
           "\"moved_over_floor\": %.4f, \"bytes_moved_over_floor\": %.4f, "
           "\"final_max_over_mean\": %.4f",
           key, o->plan_ms, o->per_move_us, o->moves, o->moved_over_floor,
           o->bytes_moved_over_floor, o->final_max_over_mean);
    if (anchor) printf(", \"capped\": %s", o->capped ? "true" : "false");
    printf("}");
}

typedef struct result {
    cluster c;
    double initial;
    outcome keel, anchor, literal;
    double ratio, ratio_literal; /* anchor / keel: whole plans, or per move if capped */
} result;

static double time_ratio(const outcome *anchor, const outcome *keel) {
    if (anchor->capped) return anchor->per_move_us / fmax(keel->per_move_us, 1e-9);
    return anchor->plan_ms / fmax(keel->plan_ms, 1e-9);
}

static const char *basis(const outcome *anchor) {
    return anchor->capped ? "time per move" : "whole plan";
}

static void put_capped(const char *key, const outcome *o, double budget_s) {
    if (!o->capped) return;
    printf(",\n      \"%s_note\": \"would run over %g s: stopped after %zu moves, so its "
           "moves, efficiency and final ratio are partial and its time ratio compares time per "
           "move\"",
           key, budget_s, o->moves);
}

static void put_result(const result *r, double budget_s, bool last) {
    printf("    {\"name\": \"%s\", \"partitions\": %zu, \"nodes\": %zu, "
           "\"initial_max_over_mean\": %.4f,\n",
           r->c.name, r->c.P, r->c.N, r->initial);
    put_outcome("keel", &r->keel, false);
    printf(",\n");
    put_outcome("anchor", &r->anchor, true);
    printf(",\n");
    put_outcome("anchor_literal", &r->literal, true);
    printf(",\n      \"same_moves_as_anchor\": %s",
           r->keel.moves == r->anchor.moves &&
                   fabs(r->keel.final_max_over_mean - r->anchor.final_max_over_mean) < 1e-9
               ? "true"
               : "false");
    printf(",\n      \"time_ratio\": %.1f, \"time_ratio_basis\": \"%s\"", r->ratio,
           basis(&r->anchor));
    printf(",\n      \"time_ratio_literal\": %.1f, \"time_ratio_literal_basis\": \"%s\"",
           r->ratio_literal, basis(&r->literal));
    put_capped("anchor", &r->anchor, budget_s);
    put_capped("anchor_literal", &r->literal, budget_s);
    printf("}%s\n", last ? "" : ",");
}

/* The bar is against a faithful port of the seed's loop, which
 * re-sorts the nodes for every partition it scans (anchor_literal). The
 * hoisted variant is reported beside it, as the stricter comparison. */
static void put_targets(const result *big) {
    bool t1 = big->keel.plan_ms < 1000, t2 = big->keel.moved_over_floor <= 1.10,
         t3 = big->ratio_literal >= 100;
    printf("  \"targets\": {\"cluster\": \"%s\", \"against\": \"anchor_literal (the seed's "
           "loop as written)\",\n",
           big->c.name);
    printf("    \"plan_under_1s\": {\"value_ms\": %.3f, \"pass\": %s},\n", big->keel.plan_ms,
           t1 ? "true" : "false");
    printf("    \"efficiency_le_1.10\": {\"value\": %.4f, \"pass\": %s},\n",
           big->keel.moved_over_floor, t2 ? "true" : "false");
    printf("    \"time_ratio_ge_100\": {\"value\": %.1f, \"basis\": \"%s\", \"pass\": %s},\n",
           big->ratio_literal, basis(&big->literal), t3 ? "true" : "false");
    printf("    \"time_ratio_vs_hoisted_anchor\": {\"value\": %.1f, \"basis\": \"%s\"}}\n",
           big->ratio, basis(&big->anchor));
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        size_t P, N;
    } sizes[] = {{"16384x100", 16384, 100}, {"1000000x1000", 1000000, 1000}};
    bool quick = false;
    uint64_t seed = 42;
    double budget = 60;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--anchor-budget") && i + 1 < argc)
            budget = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_planner [--quick] [--seed N] [--anchor-budget S]\n");
            return 2;
        }
    }
    size_t n = quick ? 1 : 2;
    result res[2];
    char err[512] = "";
    for (size_t k = 0; k < n; k++) {
        result *r = &res[k];
        if (cluster_build(&r->c, sizes[k].name, sizes[k].P, sizes[k].N, seed + k) ||
            run_keel(&r->c, &r->keel, err, sizeof err) ||
            run_anchor(&r->c, budget, false, &r->anchor) ||
            run_anchor(&r->c, budget, true, &r->literal)) {
            fprintf(stderr, "bench_planner: %s\n", err[0] ? err : "out of memory");
            return 1;
        }
        r->initial = initial_max_over_mean(&r->c);
        r->ratio = time_ratio(&r->anchor, &r->keel);
        r->ratio_literal = time_ratio(&r->literal, &r->keel);
    }
    printf("{\"bench\": \"planner\", \"seed\": %llu, \"anchor_budget_s\": %g,\n",
           (unsigned long long)seed, budget);
    printf("  \"setup\": \"last node just added (empty); partitions round-robin on the others; "
           "10%% hot (10x load); bytes U[0.5,1.5] x 64 MiB; w = bytes share + 0.5 load share; "
           "stop_ratio 1.10; no move budget\",\n");
    printf("  \"anchor\": \"seed article plan_moves() in C: scans every partition per move; "
           "the node sort hoisted out of the partition loop (same moves, faster)\",\n");
    printf("  \"anchor_literal\": \"the same, re-sorting the nodes for every partition scanned, "
           "as the Python does\",\n");
    printf("  \"clusters\": [\n");
    for (size_t k = 0; k < n; k++)
        put_result(&res[k], budget, k + 1 == n);
    printf("  ],\n");
    put_targets(&res[n - 1]);
    printf("}\n");
    for (size_t k = 0; k < n; k++)
        cluster_free(&res[k].c);
    return 0;
}
