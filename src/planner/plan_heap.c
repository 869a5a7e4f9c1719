/* plan_heap.c - indexed binary heaps of node indexes for the planner.
 *
 * Keys are read from the nodes themselves (class and fill), never copied, so
 * after changing a node the caller must call plan__heap_fix on it; positions
 * are tracked per node so that fix and remove are O(log N).
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>

/* ---- Indexed heap --------------------------------------------------------- */

int plan__heap_init(pheap *h, size_t n, bool max) {
    h->a = malloc((n ? n : 1) * sizeof *h->a);
    h->pos = malloc((n ? n : 1) * sizeof *h->pos);
    h->n = 0;
    h->max = max;
    if (!h->a || !h->pos) return KEEL_ENOMEM;
    for (size_t i = 0; i < n; i++)
        h->pos[i] = -1;
    return 0;
}

void plan__heap_close(pheap *h) {
    free(h->a);
    free(h->pos);
    memset(h, 0, sizeof *h);
}

/* True when node x belongs above node y. */
static bool above(const plan_ctx *c, const pheap *h, int32_t x, int32_t y) {
    const pnode *a = &c->nd[x], *b = &c->nd[y];
    if (h->max && a->cls != b->cls) return a->cls > b->cls;
    double fa = plan__fill(a), fb = plan__fill(b);
    if (fa != fb) return h->max ? fa > fb : fa < fb;
    return x < y;
}

static void heap_set(pheap *h, size_t i, int32_t x) {
    h->a[i] = x;
    h->pos[x] = (int32_t)i;
}

static void sift(const plan_ctx *c, pheap *h, size_t i) {
    int32_t x = h->a[i];
    while (i > 0 && above(c, h, x, h->a[(i - 1) / 2])) {
        heap_set(h, i, h->a[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t l = 2 * i + 1, best = i;
        int32_t bx = x;
        if (l < h->n && above(c, h, h->a[l], bx)) best = l, bx = h->a[l];
        if (l + 1 < h->n && above(c, h, h->a[l + 1], bx)) best = l + 1, bx = h->a[l + 1];
        if (best == i) break;
        heap_set(h, i, bx);
        i = best;
    }
    heap_set(h, i, x);
}

void plan__heap_push(const plan_ctx *c, pheap *h, int32_t x) {
    heap_set(h, h->n++, x);
    sift(c, h, h->n - 1);
}

void plan__heap_remove(const plan_ctx *c, pheap *h, int32_t x) {
    int32_t i = h->pos[x];
    if (i < 0) return;
    h->pos[x] = -1;
    if ((size_t)i == --h->n) return;
    heap_set(h, (size_t)i, h->a[h->n]);
    sift(c, h, (size_t)i);
}

void plan__heap_fix(const plan_ctx *c, pheap *h, int32_t x) {
    if (h->pos[x] >= 0) sift(c, h, (size_t)h->pos[x]);
}
