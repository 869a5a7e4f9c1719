/* ptable.h - the node's cluster map and partition table (DESIGN.md §2, §5).
 *
 * The map says which node owns each partition and at which epoch; the
 * partition table adds this node's local state for each partition. Routing a
 * slot is one array lookup. Today the map comes from --own all or a --map
 * file; the coordinator will drive the same interface (ptable_apply_map).
 *
 * Partition i of P holds slots [i*16384/P, (i+1)*16384/P). P is a power of
 * two from 16 to 16384.
 *
 * Threads: owned by the node's event loop thread.
 */
#ifndef KEEL_PTABLE_H
#define KEEL_PTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/mapcodec.h"

typedef enum {
    PART_ABSENT = 0, /* never held here: -MOVED */
    PART_SERVING,    /* owner at epoch e */
    PART_OUTGOING,   /* owner, streaming a copy (move protocol) */
    PART_FENCED,     /* owner, holding requests (move protocol) */
    PART_INCOMING,   /* receiving a copy: -MOVED to the owner */
    PART_RETIRED,    /* moved away, data kept until cleanup: -MOVED */
} part_state;

/* The map type and its JSON codec live in core/mapcodec.h. */

static inline unsigned keel_slot_partition(unsigned slot, unsigned partitions) {
    return slot / (16384u / partitions);
}

typedef struct ptable ptable;

/* Creates a table for this node (self_id, borrowed for the call) with an
 * empty map of P partitions. NULL on bad P or out-of-memory. */
ptable *ptable_new(unsigned partitions, const char *self_id);
void ptable_free(ptable *t);

/* Installs map m (ownership transferred on success; m is zeroed). A map
 * whose version is lower than the current one is refused (KEEL_ERANGE) and
 * left with the caller; so is one with a different P (KEEL_EINVAL).
 * Partitions the map gives to this node become SERVING at the map's epoch
 * (an INCOMING one too: the map is the commit), except OUTGOING and FENCED,
 * which the move protocol settles; partitions it served before and no longer
 * owns become RETIRED. */
int ptable_apply_map(ptable *t, keel_map *m);

typedef enum { ROUTE_SERVE, ROUTE_MOVED, ROUTE_DOWN, ROUTE_HOLD } route_kind;

typedef struct route {
    route_kind kind;
    unsigned partition;
    const map_node *owner; /* ROUTE_MOVED: borrowed, valid until the next apply */
} route;

/* Routes a slot: SERVE if this node serves its partition, HOLD while it is
 * FENCED (move.h), MOVED to the owner in the current map, or DOWN when nobody
 * else owns it. */
void ptable_route(const ptable *t, unsigned slot, route *out);

const keel_map *ptable_map(const ptable *t);
unsigned ptable_partitions(const ptable *t);
const char *ptable_self_id(const ptable *t);
part_state ptable_state(const ptable *t, unsigned partition);
/* Sets this node's state of a partition (the move protocol, move.c). The
 * caller has persisted it first; the map is unchanged. */
void ptable_set_state(ptable *t, unsigned partition, part_state s);
const char *part_state_name(part_state s);
/* Highest epoch among partitions this node owns (0 if none). */
uint64_t ptable_self_epoch(const ptable *t);
/* Index of this node in the current map, or -1. */
int ptable_self_index(const ptable *t);
/* This node's role in partition p by the current map's replicas (leader,
 * follower, lagging follower, or none; core/mapcodec.h). The node keeps
 * every partition's replicas as the map gives them but does not act on
 * them yet: it serves only what it leads (issue 11 step 3 adds the rest,
 * docs/replication.md). */
map_role ptable_role(const ptable *t, unsigned p);

#endif
