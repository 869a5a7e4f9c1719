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
 *    "nodes":  [{"id": ID, "addr": "HOST:PORT", "incarnation": HEX}, ...],
 *    "owners": [{"first": F, "last": L, "node": ID, "epoch": E,
 *                "replicas": [ID, ...], "isr": [ID, ...],
 *                "leader_epoch": LE, "partition_epoch": PE}, ...]}
 *
 * Top level, optional, for replication (issue 11): "min_insync" (1..7, the
 * in-sync copies a write needs; absent = 1) and "lease_ms" (how long a
 * leader's lease lasts from the heartbeat that renewed it, 100..60000;
 * absent = 0, the node's default). Written only when non-zero.
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
 * Replication (issue 11 step 1, docs/replication.md). Per owner range:
 * "replicas" (leader first, so replicas[0] is "node"; 1..KEEL_RF_MAX listed
 * nodes, no duplicates), "isr" (the in-sync replicas: non-empty, a subset of
 * "replicas" without duplicates, holding the leader), "leader_epoch" (+1 at
 * every leader change) and "partition_epoch" (+1 at every change of the
 * partition's replication state: leader, replica set or ISR; an ISR change
 * is a compare-and-set on it). "epoch" keeps its meaning: the ownership
 * epoch the move protocol fences on and -MOVED carries, +1 at every change
 * of leader or replica set but not of the ISR alone. Hence always
 * leader_epoch <= epoch <= partition_epoch, which the parser checks. All
 * four are optional: an entry without them (an older writer, or RF 1 at
 * its defaults) reads as replicas = isr = [node], leader_epoch =
 * partition_epoch = epoch, and the writer leaves them out exactly when they
 * have those values, so an RF 1 map's text is what older nodes read today.
 * A node's role in a partition follows from the lists: leader (first),
 * follower (in "isr"), or lagging follower (listed but not in "isr").
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
#define MAP_INCARNATION_MAX 16 /* hex digits of a 64-bit value */

typedef struct map_node {
    char id[KEEL_ID_MAX + 1];     /* the id rule */
    char host[KEEL_HOST_MAX + 1]; /* the host rule */
    int port;                     /* 1..65535 */
    /* The coordinator's view (docs/coordinator.md), for nodes and tools to
     * show; "" when absent (older writers). Upper-case names. */
    char liveness[MAP_STATE_MAX + 1];   /* UP, SUSPECT, DOWN */
    char membership[MAP_STATE_MAX + 1]; /* ACTIVE, DRAINING */
    /* The node process's incarnation (issue 11, C3 of the replication
     * contract): 1..16 lower-case hex digits, written by the coordinator
     * once every consequence of that incarnation is committed; "" when
     * absent. A node leads an RF > 1 partition only while the map shows
     * its own incarnation here. */
    char incarnation[MAP_INCARNATION_MAX + 1];
} map_node;

/* Replication factor bounds (docs/replication.md). */
#define KEEL_RF_MAX 7

/* The replicas of one partition. node[] indexes the map's nodes[]; node[0]
 * is the leader and equals owner[p]; bit i of isr says node[i] is in sync.
 * n == 0 in an owned partition means "the RF 1 default" (replicas = isr =
 * [owner], both epochs = epoch), so code that sets only owner[] and
 * epoch[] keeps making valid RF 1 maps; read it with keel_map_get_rep. */
typedef struct map_rep {
    uint8_t n;   /* 0..KEEL_RF_MAX */
    uint8_t isr; /* bit mask over node[0..n) */
    int32_t node[KEEL_RF_MAX];
    uint64_t leader_epoch, partition_epoch;
} map_rep;

/* A node's role in one partition (keel_map_role). */
typedef enum {
    MAP_ROLE_NONE = 0, /* not a replica */
    MAP_ROLE_LEADER,   /* replicas[0] */
    MAP_ROLE_FOLLOWER, /* a replica in the ISR */
    MAP_ROLE_LAGGING,  /* a replica not in the ISR */
} map_role;

/* A full cluster map. owner[i] indexes nodes[], or -1 when unowned. */
typedef struct keel_map {
    uint64_t version;
    uint64_t term; /* the coordinator term it was written under; 0 if absent */
    uint32_t min_insync; /* 0 = absent (reads as 1) */
    uint32_t lease_ms;   /* 0 = absent (the node's default) */
    unsigned partitions;
    size_t nnodes;
    map_node *nodes;
    int32_t *owner;  /* [partitions] */
    uint64_t *epoch; /* [partitions] */
    map_rep *rep;    /* [partitions], see map_rep */
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

/* The replicas of partition p as they read (the RF 1 default filled in;
 * n == 0 when p is unowned or out of range). */
void keel_map_get_rep(const keel_map *m, unsigned p, map_rep *out);
/* Sets partition p's replicas (and owner[p] = r->node[0]) after checking
 * them: 1 <= n <= KEEL_RF_MAX, listed nodes, no duplicates, isr a
 * non-empty subset of node[0..n) holding node[0], leader_epoch <= epoch[p]
 * <= partition_epoch. epoch[p] is not changed. Returns 0 or KEEL_EINVAL
 * (reason in err[0..cap), may be NULL). */
int keel_map_set_rep(keel_map *m, unsigned p, const map_rep *r, char *err, size_t cap);
/* Node index k's role in partition p. */
map_role keel_map_role(const keel_map *m, unsigned p, int k);
/* "leader", "follower", "lagging" or "none"; static. */
const char *keel_map_role_name(map_role r);

/* Parses a map (the format above) from NUL-terminated text into *m, which
 * the caller later closes. On error returns KEEL_EINVAL (or KEEL_ENOMEM),
 * leaves *m zeroed and writes a one-line reason into err[0..cap). */
int keel_map_parse_json(const char *text, keel_map *m, char *err, size_t cap);

/* Appends m as JSON (the format above, with "term": term) to out.
 * Returns 0, KEEL_EINVAL (a partition's replicas name no node of m: set
 * them through keel_map_set_rep) or KEEL_ENOMEM (out may then hold a
 * partial text; the caller discards it). */
int keel_map_write_json(const keel_map *m, uint64_t term, kbuf *out);

#endif
