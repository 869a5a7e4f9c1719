/* simkit.c - the simulators' random source and event queue (a binary
 * min-heap on (at, seq)); see simkit.h. */
#include "simkit.h"

#include <stdlib.h>

uint64_t simkit_rnd(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t simkit_rnd_in(uint64_t *state, uint64_t lo, uint64_t hi) {
    return lo + simkit_rnd(state) % (hi - lo + 1);
}

int simkit_chance(uint64_t *state, unsigned per_mille) {
    return simkit_rnd(state) % 1000 < per_mille;
}

static int before(const simkit_slot *a, const simkit_slot *b) {
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void swap(simkit_slot *a, simkit_slot *b) {
    simkit_slot t = *a;
    *a = *b;
    *b = t;
}

void simkit_push(simkit_queue *q, uint64_t at, uint64_t seq, void *p) {
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 1024;
        q->v = realloc(q->v, q->cap * sizeof *q->v);
        if (!q->v) abort();
    }
    size_t i = q->n++;
    q->v[i] = (simkit_slot){at, seq, p};
    while (i && before(&q->v[i], &q->v[(i - 1) / 2])) {
        swap(&q->v[i], &q->v[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

void *simkit_pop(simkit_queue *q) {
    if (!q->n) return NULL;
    void *top = q->v[0].p;
    q->v[0] = q->v[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->n && before(&q->v[l], &q->v[m])) m = l;
        if (r < q->n && before(&q->v[r], &q->v[m])) m = r;
        if (m == i) break;
        swap(&q->v[i], &q->v[m]);
        i = m;
    }
    return top;
}

void simkit_queue_free(simkit_queue *q) {
    free(q->v);
    q->v = NULL;
    q->n = q->cap = 0;
}
