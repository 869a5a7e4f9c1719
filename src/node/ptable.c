/* ptable.c - cluster map and partition table; see ptable.h.
 *
 * Invariant: state[i] is SERVING/OUTGOING/FENCED only if the current map
 * names this node as owner of i. apply_map enforces it when a map arrives;
 * the move protocol (later) changes states only through this module.
 */
#include "node/ptable.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptable {
    char self_id[KEEL_ID_MAX + 1];
    unsigned partitions;
    int self_index; /* in map.nodes, or -1 */
    keel_map map;
    uint8_t *state; /* [partitions] part_state */
};

/* ---- Partition table ------------------------------------------------------ */

ptable *ptable_new(unsigned partitions, const char *self_id) {
    ptable *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->self_id, sizeof t->self_id, "%s", self_id);
    t->partitions = partitions;
    t->self_index = -1;
    t->state = calloc(partitions, 1);
    if (!t->state || keel_map_init(&t->map, partitions)) {
        ptable_free(t);
        return NULL;
    }
    return t;
}

void ptable_free(ptable *t) {
    if (!t) return;
    keel_map_close(&t->map);
    free(t->state);
    free(t);
}

int ptable_apply_map(ptable *t, keel_map *m) {
    if (m->partitions != t->partitions) return KEEL_EINVAL;
    if (m->version < t->map.version) return KEEL_ERANGE;
    int self = keel_map_find_node(m, t->self_id);
    for (unsigned p = 0; p < t->partitions; p++) {
        int mine = self >= 0 && m->owner[p] == self;
        part_state s = t->state[p];
        if (mine)
            t->state[p] = (s == PART_OUTGOING || s == PART_FENCED) ? s : PART_SERVING;
        else if (s == PART_SERVING || s == PART_OUTGOING || s == PART_FENCED)
            t->state[p] = PART_RETIRED;
    }
    keel_map_close(&t->map);
    t->map = *m;
    t->self_index = self;
    memset(m, 0, sizeof *m);
    return 0;
}

void ptable_route(const ptable *t, unsigned slot, route *out) {
    unsigned p = keel_slot_partition(slot, t->partitions);
    out->partition = p;
    out->owner = NULL;
    part_state s = t->state[p];
    if (s == PART_SERVING || s == PART_OUTGOING) {
        out->kind = ROUTE_SERVE;
        return;
    }
    if (s == PART_FENCED) {
        out->kind = ROUTE_HOLD;
        return;
    }
    int o = t->map.owner[p];
    if (o < 0 || o == t->self_index) {
        out->kind = ROUTE_DOWN;
        return;
    }
    out->kind = ROUTE_MOVED;
    out->owner = &t->map.nodes[o];
}

const keel_map *ptable_map(const ptable *t) {
    return &t->map;
}
unsigned ptable_partitions(const ptable *t) {
    return t->partitions;
}
const char *ptable_self_id(const ptable *t) {
    return t->self_id;
}
int ptable_self_index(const ptable *t) {
    return t->self_index;
}
void ptable_set_state(ptable *t, unsigned partition, part_state s) {
    if (partition < t->partitions) t->state[partition] = (uint8_t)s;
}

map_role ptable_role(const ptable *t, unsigned p) {
    return p < t->partitions ? keel_map_role(&t->map, p, t->self_index) : MAP_ROLE_NONE;
}

part_state ptable_state(const ptable *t, unsigned partition) {
    return partition < t->partitions ? (part_state)t->state[partition] : PART_ABSENT;
}

const char *part_state_name(part_state s) {
    static const char *names[] = {"ABSENT", "SERVING", "OUTGOING", "FENCED", "INCOMING", "RETIRED"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "UNKNOWN";
}

uint64_t ptable_self_epoch(const ptable *t) {
    uint64_t e = 0;
    for (unsigned p = 0; p < t->partitions; p++)
        if (t->self_index >= 0 && t->map.owner[p] == t->self_index && t->map.epoch[p] > e)
            e = t->map.epoch[p];
    return e;
}
