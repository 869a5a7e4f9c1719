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

/* One queued write (mapstore_async.c): a copy of the write, with its own
 * copy of a placement, and what the worker found. */
typedef struct ms_placed {
    unsigned partition;
    char owner[KEEL_ID_MAX + 1];
    char followers[KEEL_RF_MAX - 1][KEEL_ID_MAX + 1];
    const char *fptr[KEEL_RF_MAX - 1]; /* views into followers */
} ms_placed;

typedef struct ms_job {
    mapstore_write w;
    ms_placed *placed;      /* PARTITION_PLACE: owned copy of w.pl */
    mapstore_placement *pl; /* views into placed, for the backend call */
    mapstore_result r;      /* rc and outputs */
    char err[MAPSTORE_ERR_MAX];
    int want_fresh;         /* re-read the store after running (the handle was stale) */
    int have_fresh;         /* fresh holds a complete re-read */
    ms_cache fresh;         /* the re-read, installed by the completion */
    uint64_t term, version; /* the backend's after the job */
    int reads;              /* backend reads of the re-read */
    mapstore_done_fn done;
    void *arg;
    struct ms_job *next;
} ms_job;

typedef struct ms_async ms_async; /* mapstore_async.c */

struct mapstore {
    const mapstore_ops *ops;
    void *impl;
    unsigned partitions;
    char cluster_id[MAPSTORE_CLUSTER_ID_MAX + 1];
    char errmsg[MAPSTORE_ERR_MAX];
    ms_cache c;
    uint64_t reads, writes; /* backend calls */
    /* Asynchronous mode (mapstore.h). Loop thread: async, stale, term,
     * version, pending; the worker writes only werr (through
     * mapstore__errf, which picks it on the worker thread) and the job. */
    ms_async *async;
    int stale;
    uint64_t term, version; /* as of the last completion */
    size_t pending;
    char werr[MAPSTORE_ERR_MAX];
};

/* The write table (mapstore.c): per kind, the argument checks (loop
 * thread, no I/O), the backend call (the worker in asynchronous mode) and
 * the update of memory after success (loop thread). */
typedef struct ms_wop {
    const char *name;
    int (*check)(mapstore *ms, const mapstore_write *w);
    int (*run)(mapstore *ms, ms_job *j);
    void (*apply)(mapstore *ms, const ms_job *j);
} ms_wop;
extern const ms_wop ms_wops[MAPSTORE_W_NKINDS];
/* 1 if rc is a refusal (changed nothing, memory stays valid). */
int ms_refusal(int rc);
/* 1 if the write counts in mapstore_counters' writes. */
int ms_counted(const mapstore_write *w);
/* Loads a complete copy of the store into *c (worker or owner thread). */
int msc_load_all(mapstore *ms, ms_cache *c);
/* 1 on the store's worker thread (mapstore__errf writes werr there). */
int ms_on_worker(void);

/* Load one part of the cache if it is not loaded yet (one backend read).
 * Return 0 or the backend's error. */
int msc_nodes(mapstore *ms);
int msc_parts(mapstore *ms);
int msc_moves(mapstore *ms);
int msc_settings(mapstore *ms);
/* Forget everything (after a failed write). Asynchronous mode: keeps the
 * memory and marks the handle stale instead (reads never reach the backend
 * from the loop). */
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
