/* plan_place.c - placement of new and orphaned partitions (bootstrap, and
 * partitions whose replicas were all dropped).
 *
 * Largest first onto the least-utilised eligible node (longest-processing-
 * time order), counting what was placed before, so a fresh cluster starts
 * inside the dead band instead of needing an episode. Same weights and
 * eligibility rules as plan_run: up, capacity > 0, and room below the low
 * disk watermark for the partition's bytes.
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>

typedef struct orphan {
    double w;
    uint64_t id;
    uint32_t part;
} orphan;

static int cmp_orphan(const void *a, const void *b) {
    const orphan *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Node weights and the eligible heap (fill = weight / capacity). */
static int place_nodes(plan_ctx *c) {
    const plan_model *m = c->m;
    for (size_t i = 0; i < m->nparts; i++) {
        const plan_part *p = &m->parts[i];
        for (int r = 0; r < p->nreplicas; r++)
            c->nd[plan__node_of(p, r)].W += plan__weight(c, p);
    }
    int rc = plan__heap_init(&c->dst, c->N, false);
    if (rc) return rc;
    for (size_t i = 0; i < c->N; i++) {
        const plan_node *n = &m->nodes[i];
        pnode *pn = &c->nd[i];
        pn->T = pn->cap = n->capacity;
        pn->disk = n->disk_used;
        bool disk_ok =
            n->disk_capacity <= 0 || n->disk_used <= m->settings.disk_low * n->disk_capacity;
        if (n->state == PLAN_NODE_UP && n->capacity > 0 && disk_ok)
            plan__heap_push(c, &c->dst, (int32_t)i);
    }
    return 0;
}

static bool disk_fits(const plan_ctx *c, int32_t n, double bytes) {
    const plan_node *pn = &c->m->nodes[n];
    return pn->disk_capacity <= 0 ||
           c->nd[n].disk + bytes <= c->m->settings.disk_low * pn->disk_capacity;
}

/* Least-utilised node with room for the bytes; -1 if none. */
static int32_t place_one(plan_ctx *c, const orphan *o) {
    double bytes = c->m->parts[o->part].bytes;
    int32_t tried[PLAN_TRY_DESTS], got = -1;
    int nt = 0;
    while (got < 0 && nt < PLAN_TRY_DESTS && c->dst.n) {
        int32_t d = c->dst.a[0];
        plan__heap_remove(c, &c->dst, d);
        tried[nt++] = d;
        if (disk_fits(c, d, bytes)) got = d;
    }
    if (got >= 0) {
        c->nd[got].W += o->w;
        c->nd[got].disk += bytes;
    }
    for (int i = 0; i < nt; i++)
        plan__heap_push(c, &c->dst, tried[i]);
    return got;
}

int plan_place(plan_model *m, size_t *placed, size_t *unplaced) {
    size_t nplaced = 0, nleft = 0, norph = 0;
    int rc = plan_model_check(m, NULL, 0);
    if (rc) return rc;
    plan_ctx c = {.m = m, .s = &m->settings, .N = m->nnodes};
    orphan *o = NULL;
    c.nd = calloc(c.N ? c.N : 1, sizeof *c.nd);
    for (size_t i = 0; i < m->nparts; i++)
        norph += m->parts[i].nreplicas == 0;
    o = malloc((norph ? norph : 1) * sizeof *o);
    if (!c.nd || !o) {
        rc = KEEL_ENOMEM;
        goto done;
    }
    plan__weight_constants(&c);
    if ((rc = place_nodes(&c))) goto done;
    for (size_t i = 0, k = 0; i < m->nparts; i++)
        if (m->parts[i].nreplicas == 0)
            o[k++] = (orphan){plan__weight(&c, &m->parts[i]), m->parts[i].id, (uint32_t)i};
    qsort(o, norph, sizeof *o, cmp_orphan);
    for (size_t k = 0; k < norph; k++) {
        int32_t n = place_one(&c, &o[k]);
        if (n < 0) {
            nleft++;
            continue;
        }
        m->parts[o[k].part].replicas[0] = n;
        m->parts[o[k].part].nreplicas = 1;
        nplaced++;
    }
done:
    if (placed) *placed = nplaced;
    if (unplaced) *unplaced = rc ? norph : nleft;
    free(o);
    free(c.nd);
    plan__heap_close(&c.dst);
    return rc;
}
