/* coord_place.h - where the followers of a newly placed partition go
 * (issue 11 step 4, C7 of the replication contract). Pure: no store, no
 * clock.
 *
 * Bootstrap placement picks each unowned partition's leader with the
 * planner's plan_place (least utilised eligible node, which spreads the
 * leaders). At RF > 1 the other RF - 1 replicas come from here, one
 * partition at a time, greedily:
 *   - on distinct nodes, never the leader, only eligible ones (UP, not
 *     draining, not quarantined: the caller decides);
 *   - anti-affine by rack: a node whose rack already holds a replica of
 *     the partition is taken only when no other node is left (racks ""
 *     count as distinct, as no rack was given);
 *   - spread: among equals, the node holding the fewest replicas so far
 *     (counts[], updated as followers are chosen), then the lowest index
 *     after the leader's (so equal nodes take turns).
 * Fewer eligible nodes than RF: the partition gets what exists (the
 * caller reports under-replication, keel status).
 *
 * Threads: any; the arrays are the caller's.
 */
#ifndef KEEL_COORD_PLACE_H
#define KEEL_COORD_PLACE_H

#include <stddef.h>

typedef struct coord_place_node {
    const char *rack; /* "" = none; borrowed */
    int eligible;     /* may receive a replica */
    unsigned count;   /* replicas it holds (leaders and followers); updated */
} coord_place_node;

/* Chooses up to rf - 1 followers of a partition led by nodes[leader] into
 * out[0..), returns how many (0 when rf <= 1 or none is eligible), and
 * adds one to the count of each chosen node and of the leader. */
size_t coord_place_followers(coord_place_node *nodes, size_t nn, size_t leader, int rf,
                             size_t *out);

#endif
