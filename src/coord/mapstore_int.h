/* mapstore_int.h - the map store handle and its read cache, shared by
 * mapstore.c (validation and dispatch) and mapstore_cache.c (the cache).
 * Not for use outside the map store.
 *
 * The cache. The coordinator reads the map all the time (every setting on
 * every tick, the node list on every heartbeat and round, the partitions
 * for every view and plan) and writes it rarely. The handle therefore keeps
 * the whole map in memory: each of nodes, partitions, moves and settings is
 * read from the backend once, on first use, and after that every read is
 * served from memory. Every successful write is applied to the cache by the
 * same rules the backend applies (mapstore.h states them: epoch + 1 on an
 * ownership change, phase times on a move advance, and so on); a refused
 * write changed nothing (the contract) and leaves the cache as it is; any
 * other failure (I/O, memory) drops the whole cache, so the next read
 * reloads what the backend holds. Nothing here changes what a call returns, only where it is read
 * from; test-mapstore checks the cache against a fresh open after random
 * sequences of calls.
 *
 * reads and writes count calls that reached the backend (keel_mapstore_*
 * in the coordinator's /metrics): in steady state only writes grow.
 *
 * Threads: the handle's thread only, like the handle.
 */
#ifndef KEEL_MAPSTORE_INT_H
#define KEEL_MAPSTORE_INT_H

#include "coord/mapstore.h"

typedef struct ms_cache {
    int have_nodes, have_parts, have_moves, have_settings;
    mapstore_node *nodes; /* sorted by id */
    size_t nn;
    mapstore_partition *parts; /* [P] by id */
    mapstore_move *moves;      /* sorted by id */
    size_t nm;
    mapstore_setting *settings; /* sorted by name */
    size_t ns;
} ms_cache;

struct mapstore {
    const mapstore_ops *ops;
    void *impl;
    unsigned partitions;
    char cluster_id[MAPSTORE_CLUSTER_ID_MAX + 1];
    char errmsg[MAPSTORE_ERR_MAX];
    ms_cache c;
    uint64_t reads, writes; /* backend calls */
};

/* Load one part of the cache if it is not loaded yet (one backend read).
 * Return 0 or the backend's error. */
int msc_nodes(mapstore *ms);
int msc_parts(mapstore *ms);
int msc_moves(mapstore *ms);
int msc_settings(mapstore *ms);
/* Forget everything (after a failed write). */
void msc_drop(mapstore *ms);
void msc_free(mapstore *ms);

/* Lookups in loaded parts; NULL when absent. */
mapstore_node *msc_node(mapstore *ms, const char *id);
mapstore_move *msc_move(mapstore *ms, uint64_t id);
mapstore_setting *msc_setting(mapstore *ms, const char *name);

/* Apply a successful write to whatever is loaded. 0, or KEEL_ENOMEM (the
 * cache is then dropped, and the write still stands). */
int msc_put_node(mapstore *ms, const mapstore_node *n, int64_t now_ms);
void msc_heartbeat(mapstore *ms, const char *id, int64_t now_ms);
int msc_add_move(mapstore *ms, const mapstore_move *m);
int msc_put_setting(mapstore *ms, const char *name, const char *value, int64_t now_ms);
void msc_del_setting(mapstore *ms, const char *name);

#endif
