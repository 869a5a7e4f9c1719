/* test-planner-props.c - planner properties over seeded random clusters.
 * Every failure prints its seed; rerun one with PLAN_SEED=<seed>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "plan_fixtures.h"

#define CLUSTERS 1000

static uint64_t first_seed(void) {
    const char *s = getenv("PLAN_SEED");
    return s ? strtoull(s, NULL, 10) : 1;
}

static size_t clusters(void) {
    return getenv("PLAN_SEED") ? 1 : CLUSTERS;
}

static int pick(uint64_t *r, int n) {
    return (int)(fx_rand(r) % (uint64_t)n);
}

/* Random nodes: capacities, racks and (when wild) states and full disks. */
static void gen_nodes(plan_model *m, uint64_t *r, bool wild) {
    static const double caps[] = {0.5, 1, 1, 1, 2, 3};
    int n = 2 + pick(r, 11), racks = pick(r, 4);
    bool hetero = pick(r, 3) == 0;
    for (int i = 0; i < n; i++) {
        fx_nodes(m, 1, hetero ? caps[pick(r, 6)] : 1, 0);
        plan_node *nd = &m->nodes[m->nnodes - 1];
        if (racks) snprintf(nd->rack, sizeof nd->rack, "r%d", pick(r, racks));
        if (!wild) continue;
        int st = pick(r, 100);
        nd->state = st < 8    ? PLAN_NODE_DRAINING
                    : st < 12 ? PLAN_NODE_SUSPECT
                    : st < 15 ? PLAN_NODE_DOWN
                              : PLAN_NODE_UP;
        if (pick(r, 10) < 3) {
            nd->disk_capacity = 1e9;
            nd->disk_used = (0.3 + 0.67 * fx_unit(r)) * 1e9;
        }
    }
}

/* Random partitions, skewed over the first nodes; RF 2 in some wild clusters. */
static void gen_parts(plan_model *m, uint64_t *r, bool wild, bool tame_sizes) {
    int P = tame_sizes ? 100 + pick(r, 300) : 8 + pick(r, 300);
    int rf = wild && m->nnodes >= 3 && pick(r, 5) == 0 ? 2 : 1;
    bool loads = pick(r, 5) < 3;
    double skew = 1 + 3 * fx_unit(r);
    for (int i = 0; i < P; i++) {
        plan_part p;
        plan_part_default(&p, (uint64_t)i * 7 + 3);
        int first = (int)(m->nnodes * pow(fx_unit(r), skew));
        for (int k = 0; k < rf; k++)
            p.replicas[k] = (int32_t)((first + k * (1 + pick(r, (int)m->nnodes - 1))) % m->nnodes);
        p.nreplicas = (uint8_t)(rf == 2 && p.replicas[0] == p.replicas[1] ? 1 : rf);
        p.bytes = tame_sizes ? 50 + 100 * fx_unit(r) : pow(10, 1 + 3 * fx_unit(r));
        p.load = loads ? pow(fx_unit(r), 3) * 1000 : 0;
        if (wild) {
            p.pinned = pick(r, 100) < 4;
            p.in_flight = pick(r, 100) < 3;
            p.since_last_move_s = pick(r, 100) < 15 ? 100 : 1e9;
        }
        if (plan_model_add_part(m, &p)) abort();
    }
}

static void gen_cluster(plan_model *m, uint64_t seed, bool wild) {
    static const uint32_t budgets[] = {16, 0, 5, 64};
    static const double lws[] = {0.5, 0, 1};
    uint64_t r = seed * 0x9e3779b97f4a7c15ULL + 1;
    plan_model_init(m);
    gen_nodes(m, &r, wild);
    gen_parts(m, &r, wild, !wild);
    if (pick(&r, 5) == 0) fx_nodes(m, 1, 1, 0); /* a new, empty node */
    m->settings.max_moves = wild ? budgets[pick(&r, 4)] : 0;
    m->settings.load_weight = lws[pick(&r, 3)];
    if (!wild) m->settings.min_residence_s = 0;
}

/* ---- Constraint checker --------------------------------------------------- */

static int live_racks(const plan_model *m) {
    int n = 0;
    for (size_t i = 0; i < m->nnodes; i++) {
        const plan_node *a = &m->nodes[i];
        if (a->state != PLAN_NODE_UP && a->state != PLAN_NODE_DRAINING) continue;
        bool seen = false;
        for (size_t j = 0; j < i && a->rack[0] && !seen; j++) {
            const plan_node *b = &m->nodes[j];
            seen = (b->state == PLAN_NODE_UP || b->state == PLAN_NODE_DRAINING) &&
                   strcmp(a->rack, b->rack) == 0;
        }
        n += !seen;
    }
    return n;
}

static bool same_rack(const plan_model *m, int a, int b) {
    return m->nodes[a].rack[0] && strcmp(m->nodes[a].rack, m->nodes[b].rack) == 0;
}

/* Returns NULL or what one move broke; reps and disk track earlier moves. */
static const char *broken(const plan_model *m, const plan_move *mv, int32_t *reps, double *disk,
                          int racks) {
    const plan_part *p = &m->parts[mv->part];
    const plan_node *to = &m->nodes[mv->to], *from = &m->nodes[mv->from];
    if (p->pinned) return "moved a pinned partition";
    if (p->in_flight || p->moving_to >= 0) return "moved a partition in flight";
    if (p->since_last_move_s < m->settings.min_residence_s) return "moved within min_residence";
    if (reps[mv->replica] != mv->from) return "from is not where the replica is";
    if (from->state == PLAN_NODE_SUSPECT || from->state == PLAN_NODE_DOWN)
        return "moved off a frozen node";
    if (to->state != PLAN_NODE_UP || to->capacity <= 0) return "destination not up or draining";
    if (to->disk_capacity > 0 && disk[mv->to] + p->bytes > m->settings.disk_low * to->disk_capacity)
        return "destination above its low watermark";
    for (int k = 0; k < p->nreplicas; k++) {
        if (k == mv->replica) continue;
        if (reps[k] == mv->to) return "two replicas on one node";
        if (racks >= p->nreplicas && same_rack(m, reps[k], mv->to)) return "two replicas in a rack";
    }
    disk[mv->from] -= p->bytes;
    disk[mv->to] += p->bytes;
    reps[mv->replica] = mv->to;
    return NULL;
}

static void check_constraints(const plan_model *m, const plan_result *r, uint64_t seed) {
    double disk[64];
    int racks = live_racks(m);
    int32_t(*reps)[PLAN_MAX_REPLICAS] = malloc((m->nparts + 1) * sizeof *reps);
    for (size_t i = 0; i < m->nparts; i++)
        memcpy(reps[i], m->parts[i].replicas, sizeof reps[i]);
    for (size_t i = 0; i < m->nnodes; i++)
        disk[i] = m->nodes[i].disk_used;
    for (size_t i = 0; i < r->nmoves; i++) {
        const char *why = broken(m, &r->moves[i], reps[r->moves[i].part], disk, racks);
        if (why) fail_msg("seed %llu: move %zu: %s", (unsigned long long)seed, i, why);
    }
    free(reps);
}

static plan_model copy_model(const plan_model *m) {
    plan_model c = *m;
    c.nodes = malloc(m->nnodes * sizeof *c.nodes);
    c.parts = malloc(m->nparts * sizeof *c.parts);
    memcpy(c.nodes, m->nodes, m->nnodes * sizeof *c.nodes);
    memcpy(c.parts, m->parts, m->nparts * sizeof *c.parts);
    c.nodes_cap = m->nnodes;
    c.parts_cap = m->nparts;
    return c;
}

/* No constraint is ever broken, on any random cluster. */
static void no_constraint_broken(void **st) {
    uint64_t s0 = first_seed();
    size_t moves = 0, overshoots = 0, replicated = 0;
    for (uint64_t seed = s0; seed < s0 + clusters(); seed++) {
        plan_model m;
        plan_result r;
        gen_cluster(&m, seed, true);
        if (plan_run(&m, &r)) fail_msg("seed %llu: %s", (unsigned long long)seed, r.error);
        check_constraints(&m, &r, seed);
        moves += r.nmoves;
        for (size_t i = 0; i < r.nmoves; i++) {
            overshoots += r.moves[i].overshoot;
            replicated += m.parts[r.moves[i].part].nreplicas > 1;
        }
        plan_result_close(&r);
        plan_model_close(&m);
    }
    print_message("constraints: %zu moves checked (%zu overshoots, %zu of replicated "
                  "partitions)\n",
                  moves, overshoots, replicated);
    assert_true(moves > clusters() || getenv("PLAN_SEED"));
}

/* A node above its high watermark with a partition to shed does shed. */
static void high_watermark_sheds(void **st) {
    uint64_t s0 = first_seed();
    size_t checked = 0;
    for (uint64_t seed = s0; seed < s0 + clusters(); seed++) {
        plan_model m;
        plan_result r;
        gen_cluster(&m, seed, true);
        m.settings.max_moves = 0;
        if (plan_run(&m, &r)) fail_msg("seed %llu: %s", (unsigned long long)seed, r.error);
        for (size_t i = 0; i < r.nnodes; i++) {
            const plan_node *n = &m.nodes[i];
            if (n->state != PLAN_NODE_UP || n->disk_capacity <= 0 ||
                n->disk_used <= m.settings.disk_high * n->disk_capacity)
                continue;
            bool shed = false, blocked = false;
            for (size_t k = 0; k < r.nmoves; k++)
                shed |= r.moves[k].from == (int32_t)i;
            for (size_t k = 0; k < r.nstops; k++)
                blocked |= r.stops[k].code == PLAN_STOP_NO_DESTINATION ||
                           r.stops[k].code == PLAN_STOP_STUCK;
            size_t movable = 0;
            for (size_t k = 0; k < m.nparts; k++) {
                const plan_part *p = &m.parts[k];
                movable += p->nreplicas == 1 && p->replicas[0] == (int32_t)i && !p->pinned &&
                           !p->in_flight && p->since_last_move_s >= m.settings.min_residence_s;
            }
            if (movable && !shed && !blocked)
                fail_msg("seed %llu: %s above high watermark did not shed",
                         (unsigned long long)seed, n->id);
            checked += movable > 0;
        }
        plan_result_close(&r);
        plan_model_close(&m);
    }
    assert_true(checked > 20);
}

/* Any stale live node empties the plan with reason stale-metrics:<node>. */
static void stale_metrics_never_move(void **st) {
    uint64_t s0 = first_seed();
    for (uint64_t seed = s0; seed < s0 + clusters(); seed++) {
        plan_model m;
        plan_result r;
        gen_cluster(&m, seed, true);
        size_t victim = seed % m.nnodes;
        m.nodes[victim].state = PLAN_NODE_UP;
        m.nodes[victim].metrics_age_s = 3.5;
        if (plan_run(&m, &r)) fail_msg("seed %llu: %s", (unsigned long long)seed, r.error);
        char key[PLAN_STOP_KEY_MAX];
        snprintf(key, sizeof key, "stale-metrics:%s", m.nodes[victim].id);
        if (r.nmoves || !r.nstops || strcmp(r.stops[0].key, key))
            fail_msg("seed %llu: stale metrics on %s but %zu moves", (unsigned long long)seed,
                     m.nodes[victim].id, r.nmoves);
        plan_result_close(&r);
        plan_model_close(&m);
    }
}

/* Returns true when move b of round 2 undoes move a of round 1 or reverses its flow. */
static bool undoes(const plan_result *r1, const plan_move *b) {
    bool from_dst = false, to_src = false;
    for (size_t i = 0; i < r1->nmoves; i++) {
        const plan_move *a = &r1->moves[i];
        if (a->part == b->part && a->replica == b->replica && b->to == a->from) return true;
        from_dst |= a->to == b->from;
        to_src |= a->from == b->to;
    }
    return from_dst && to_src;
}

static size_t replan_moves[2]; /* round-2 moves checked, without and with expiry */

static void replan_check(plan_model *m, uint64_t seed, bool expire) {
    plan_result r1, r2;
    plan_model next = copy_model(m);
    if (plan_run(&next, &r1) || plan_apply(&next, &r1))
        fail_msg("seed %llu", (unsigned long long)seed);
    if (expire) /* residence long past: only the planner's own logic prevents undoing */
        for (size_t i = 0; i < r1.nmoves; i++)
            next.parts[r1.moves[i].part].since_last_move_s =
                m->parts[r1.moves[i].part].since_last_move_s;
    if (plan_run(&next, &r2)) fail_msg("seed %llu: %s", (unsigned long long)seed, r2.error);
    replan_moves[expire] += r2.nmoves;
    for (size_t i = 0; i < r2.nmoves; i++)
        if (undoes(&r1, &r2.moves[i]))
            fail_msg("seed %llu%s: round 2 move %zu (part %llu %s->%s) undoes round 1",
                     (unsigned long long)seed, expire ? " (residence expired)" : "", i,
                     (unsigned long long)r2.moves[i].part_id, next.nodes[r2.moves[i].from].id,
                     next.nodes[r2.moves[i].to].id);
    plan_result_close(&r1);
    plan_result_close(&r2);
    plan_model_close(&next);
}

/* Applying a plan and planning again never undoes a move, even once residence expires. */
static void replan_never_undoes(void **st) {
    uint64_t s0 = first_seed();
    for (uint64_t seed = s0; seed < s0 + clusters(); seed++) {
        plan_model m;
        gen_cluster(&m, seed, (seed & 1) != 0);
        replan_check(&m, seed, false);
        replan_check(&m, seed, true);
        plan_model_close(&m);
    }
    print_message("replan: %zu second-round moves checked (%zu with residence expired)\n",
                  replan_moves[0] + replan_moves[1], replan_moves[1]);
}

/* Plans rounds until the episode closes; returns rounds (or -1) and the moved weight. */
static int converge(plan_model *m, double *moved, double *floor0) {
    plan_result r;
    *moved = 0;
    for (int round = 0; round < 12; round++) {
        fx_round(m, &r);
        if (round == 0) *floor0 = r.floor;
        *moved += r.moved;
        bool open = r.episode.active;
        plan_result_close(&r);
        if (!open) return round + 1;
    }
    return -1;
}

static void jitter(plan_model *m, uint64_t *r, double eps) {
    for (size_t i = 0; i < m->nparts; i++) {
        m->parts[i].bytes *= 1 + eps * (2 * fx_unit(r) - 1);
        m->parts[i].load *= 1 + eps * (2 * fx_unit(r) - 1);
    }
}

/* After convergence, noise that stays inside the dead band makes no move. */
static void noise_in_dead_band_no_move(void **st) {
    uint64_t s0 = first_seed();
    size_t checked = 0, converged = 0;
    for (uint64_t seed = s0; seed < s0 + clusters(); seed++) {
        plan_model m;
        plan_result r;
        double moved, floor0;
        uint64_t rng = seed;
        gen_cluster(&m, seed, false);
        if (converge(&m, &moved, &floor0) < 0) goto next;
        converged++;
        jitter(&m, &rng, 0.03);
        for (int open = 0; open < 2; open++) {
            m.episode.active = open;
            if (plan_run(&m, &r)) fail_msg("seed %llu: %s", (unsigned long long)seed, r.error);
            double band = open ? m.settings.stop_ratio : m.settings.start_ratio;
            bool inside = r.imbalance_before <= band && r.min_ratio_before >= 1 / band;
            if (inside && r.nmoves)
                fail_msg("seed %llu: noise inside the dead band (%s) made %zu moves",
                         (unsigned long long)seed, open ? "episode open" : "closed", r.nmoves);
            checked += inside;
            plan_result_close(&r);
        }
    next:
        plan_model_close(&m);
    }
    print_message("noise: %zu of %d clusters converged, %zu dead-band checks\n", converged,
                  (int)clusters(), checked);
    assert_true(converged * 10 >= clusters() * 9);
    assert_true(checked * 2 >= converged);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, size_t n, double *p90) {
    qsort(v, n, sizeof *v, cmp_double);
    *p90 = n ? v[n * 9 / 10] : 0;
    return n ? v[n / 2] : 0;
}

/* Median efficiency (moved / floor) stays <= 1.10, per round and per whole episode. */
static void efficiency_median(void **st) {
    uint64_t s0 = first_seed();
    size_t n1 = 0, n2 = 0, N = clusters();
    double *round_eff = malloc(N * sizeof(double)), *episode_eff = malloc(N * sizeof(double));
    for (uint64_t seed = s0; seed < s0 + N; seed++) {
        plan_model m;
        plan_result r;
        double moved, floor0;
        gen_cluster(&m, seed, true);
        if (plan_run(&m, &r)) fail_msg("seed %llu: %s", (unsigned long long)seed, r.error);
        if (r.nmoves && r.floor > 0) round_eff[n1++] = r.efficiency;
        plan_result_close(&r);
        plan_model_close(&m);
        gen_cluster(&m, seed, false);
        if (converge(&m, &moved, &floor0) > 0 && floor0 > 0 && moved > 0)
            episode_eff[n2++] = moved / floor0;
        plan_model_close(&m);
    }
    double p90a, p90b, a = median_of(round_eff, n1, &p90a), b = median_of(episode_eff, n2, &p90b);
    print_message("efficiency: one round median %.3f p90 %.3f (n=%zu); whole episode median "
                  "%.3f p90 %.3f (n=%zu)\n",
                  a, p90a, n1, b, p90b, n2);
    free(round_eff);
    free(episode_eff);
    assert_true(n1 > N / 4 && n2 > N / 4);
    assert_true(a <= 1.10);
    assert_true(b <= 1.10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_constraint_broken),       cmocka_unit_test(high_watermark_sheds),
        cmocka_unit_test(stale_metrics_never_move),   cmocka_unit_test(replan_never_undoes),
        cmocka_unit_test(noise_in_dead_band_no_move), cmocka_unit_test(efficiency_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
