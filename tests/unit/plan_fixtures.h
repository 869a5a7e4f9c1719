/* plan_fixtures.h - model builders shared by the planner tests. Header-only
 * (static functions) so each test binary stays one .c file for CMake's glob.
 */
#ifndef KEEL_PLAN_FIXTURES_H
#define KEEL_PLAN_FIXTURES_H

#include "core/err.h"
#include "planner/planner.h"

#include <stdio.h>
#include <stdlib.h>

/* Adds n up nodes "n1".."nn" of capacity cap, rack "r<i % racks>" (racks 0: none). */
static inline void fx_nodes(plan_model *m, int n, double cap, int racks) {
    for (int i = 0; i < n; i++) {
        plan_node nd;
        char id[16];
        snprintf(id, sizeof id, "n%d", (int)m->nnodes + 1);
        plan_node_default(&nd, id);
        nd.capacity = cap;
        if (racks) snprintf(nd.rack, sizeof nd.rack, "r%d", i % racks);
        if (plan_model_add_node(m, &nd) < 0) abort();
    }
}

/* Adds a partition with the next id on node `node` (index). */
static inline plan_part *fx_part(plan_model *m, int node, double bytes, double load) {
    plan_part p;
    plan_part_default(&p, m->nparts);
    p.replicas[0] = node;
    p.nreplicas = 1;
    p.bytes = bytes;
    p.load = load;
    if (plan_model_add_part(m, &p)) abort();
    return &m->parts[m->nparts - 1];
}

/* Weight-free view of where things are: partitions per node (nodes <= 64). */
static inline void fx_counts(const plan_model *m, int *counts) {
    for (size_t i = 0; i < m->nnodes; i++)
        counts[i] = 0;
    for (size_t i = 0; i < m->nparts; i++)
        if (m->parts[i].nreplicas) counts[m->parts[i].replicas[0]]++;
}

/* Bytes per node over mean bytes per unit capacity, max over live nodes. */
static inline double fx_bytes_ratio(const plan_model *m) {
    double per[256] = {0}, tot = 0, cap = 0, mx = 0;
    for (size_t i = 0; i < m->nparts; i++)
        for (int r = 0; r < m->parts[i].nreplicas; r++)
            per[m->parts[i].replicas[r]] += m->parts[i].bytes;
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i].state == PLAN_NODE_UP && m->nodes[i].capacity > 0) {
            tot += per[i];
            cap += m->nodes[i].capacity;
        }
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i].state == PLAN_NODE_UP && m->nodes[i].capacity > 0) {
            double r = per[i] / m->nodes[i].capacity / (tot / cap);
            if (r > mx) mx = r;
        }
    return mx;
}

/* Plans, applies and returns the number of moves; aborts on error. */
static inline size_t fx_round(plan_model *m, plan_result *r) {
    int rc = plan_run(m, r);
    if (rc) {
        fprintf(stderr, "plan_run: %s: %s\n", keel_strerror(rc), r->error);
        abort();
    }
    if (plan_apply(m, r)) abort();
    return r->nmoves;
}

static inline int fx_has_stop(const plan_result *r, plan_stop_code code) {
    for (size_t i = 0; i < r->nstops; i++)
        if (r->stops[i].code == code) return 1;
    return 0;
}

/* xorshift64*: reproducible from the printed seed. */
static inline uint64_t fx_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

static inline double fx_unit(uint64_t *s) {
    return (double)(fx_rand(s) >> 11) / 9007199254740992.0;
}

#endif
