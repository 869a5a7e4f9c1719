/* mapcodec.h - the cluster map and its one JSON codec (issue 10, defect 3).
 *
 * The coordinator writes the map (keel_map_write_json) into heartbeat
 * replies and KEEL.MOVE.COMMIT; every node parses it (keel_map_parse_json),
 * as it parses a --map file. Both sides use this one module, so what one
 * writes the other reads, and a string is escaped by a real JSON writer
 * (cJSON) rather than printed between quotes.
 *
 * Format (docs/configuration.md):
 *
 *   {"version": V, "term": T, "partitions": P,
 *    "nodes":  [{"id": ID, "addr": "HOST:PORT"}, ...],
 *    "owners": [{"first": F, "last": L, "node": ID, "epoch": E}, ...]}
 *
 * "term" is written by the coordinator and optional on input; "version"
 * defaults to 1, "partitions" to 1024, "last" to "first", "epoch" to 1. The
 * parser ignores fields it does not know, at every level, so a writer may
 * add fields (per node: put them in map_node, write them in write_node and
 * read them in parse_node in mapcodec.c) without breaking older readers.
 * Numbers are written exactly (decimal text, not doubles).
 *
 * Checks on input: ids follow the id rule and hosts the host rule
 * (core/id.h), ports are 1..65535 written as plain decimals, numbers are
 * non-negative integers, owner ranges lie within the partitions, name a
 * listed node and do not overlap. Node ids are unique.
 *
 * Threads: pure (no I/O, no globals); any thread.
 */
#ifndef KEEL_MAPCODEC_H
#define KEEL_MAPCODEC_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/id.h"

#define KEEL_MIN_PARTITIONS 16
#define KEEL_MAX_PARTITIONS 16384

/* One node of the map. New per-node fields go here (see above). */
#define MAP_STATE_MAX 15

typedef struct map_node {
    char id[KEEL_ID_MAX + 1];     /* the id rule */
    char host[KEEL_HOST_MAX + 1]; /* the host rule */
    int port;                     /* 1..65535 */
    /* The coordinator's view (docs/coordinator.md), for nodes and tools to
     * show; "" when absent (older writers). Upper-case names. */
    char liveness[MAP_STATE_MAX + 1];   /* UP, SUSPECT, DOWN */
    char membership[MAP_STATE_MAX + 1]; /* ACTIVE, DRAINING */
} map_node;

/* A full cluster map. owner[i] indexes nodes[], or -1 when unowned. */
typedef struct keel_map {
    uint64_t version;
    uint64_t term; /* the coordinator term it was written under; 0 if absent */
    unsigned partitions;
    size_t nnodes;
    map_node *nodes;
    int32_t *owner;  /* [partitions] */
    uint64_t *epoch; /* [partitions] */
} keel_map;

/* Allocates an empty map for P partitions (all unowned, no nodes).
 * Returns 0, KEEL_EINVAL (bad P) or KEEL_ENOMEM. */
int keel_map_init(keel_map *m, unsigned partitions);
/* Frees what m holds and zeroes it; a zeroed map is a no-op. */
void keel_map_close(keel_map *m);
/* Appends a copy of *n; returns its index, KEEL_EINVAL (id, host or port
 * breaks its rule), KEEL_EEXIST (the id is already there) or KEEL_ENOMEM. */
int keel_map_add(keel_map *m, const map_node *n);
/* keel_map_add with only the id, host and port. */
int keel_map_add_node(keel_map *m, const char *id, const char *host, int port);
/* The index of node id, or -1. */
int keel_map_find_node(const keel_map *m, const char *id);
int keel_map_is_pow2_partitions(unsigned p);

/* Parses a map (the format above) from NUL-terminated text into *m, which
 * the caller later closes. On error returns KEEL_EINVAL (or KEEL_ENOMEM),
 * leaves *m zeroed and writes a one-line reason into err[0..cap). */
int keel_map_parse_json(const char *text, keel_map *m, char *err, size_t cap);

/* Appends m as JSON (the format above, with "term": term) to out.
 * Returns 0, or KEEL_ENOMEM (out may then hold a partial text; the caller
 * discards it). */
int keel_map_write_json(const keel_map *m, uint64_t term, kbuf *out);

#endif
