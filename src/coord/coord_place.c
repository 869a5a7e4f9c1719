/* coord_place.c - followers of a newly placed partition; see coord_place.h. */
#include "coord/coord_place.h"

#include <string.h>

/* 1 if nodes[k]'s rack already holds one of the chosen replicas. */
static int rack_taken(const coord_place_node *nodes, size_t k, const size_t *chosen, size_t n) {
    if (!nodes[k].rack || !nodes[k].rack[0]) return 0;
    for (size_t i = 0; i < n; i++) {
        const char *r = nodes[chosen[i]].rack;
        if (r && r[0] && !strcmp(r, nodes[k].rack)) return 1;
    }
    return 0;
}

size_t coord_place_followers(coord_place_node *nodes, size_t nn, size_t leader, int rf,
                             size_t *out) {
    if (leader >= nn) return 0;
    nodes[leader].count++;
    size_t chosen[64], n = 1, got = 0;
    chosen[0] = leader;
    while (rf > 1 && got < (size_t)rf - 1 && n < sizeof chosen / sizeof *chosen) {
        size_t best = nn;
        int best_rack = 0;
        for (size_t step = 1; step < nn; step++) {
            size_t k = (leader + step) % nn; /* from the leader on: equal nodes take turns */
            int used = 0;
            for (size_t i = 0; i < n && !used; i++)
                used = chosen[i] == k;
            if (used || !nodes[k].eligible) continue;
            int rack = rack_taken(nodes, k, chosen, n);
            if (best == nn || rack < best_rack ||
                (rack == best_rack && nodes[k].count < nodes[best].count)) {
                best = k;
                best_rack = rack;
            }
        }
        if (best == nn) break;
        nodes[best].count++;
        chosen[n++] = best;
        out[got++] = best;
    }
    return got;
}
