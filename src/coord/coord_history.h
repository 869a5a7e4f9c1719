/* coord_history.h - the short history behind the dashboard's charts.
 *
 * A fixed-size ring of one sample per second (HISTORY_SAMPLES: one hour),
 * each with the cluster's imbalance, the move traffic and up to
 * HISTORY_NODES node columns (utilisation, ops/s, latency), and a ring of
 * the last HISTORY_EVENTS move starts and ends (the charts' annotations).
 * All memory is allocated once by coord_history_new and never grows:
 * sizeof(coord_history), about 2.5 MB (the exact figure is
 * coord_history_bytes()). When a ring is full the oldest entry is
 * overwritten.
 *
 * Node columns are handed out in the order nodes are first seen and kept
 * for the life of the history, so a column always means the same node.
 * Nodes past the HISTORY_NODES-th are not charted (the dashboard's node
 * table still lists them).
 *
 * Pure data: no clock, no I/O. Threads: one thread (the coordinator's loop).
 */
#ifndef KEEL_COORD_HISTORY_H
#define KEEL_COORD_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define HISTORY_SAMPLES 3600
#define HISTORY_NODES 32
#define HISTORY_EVENTS 1024
#define HISTORY_ID_MAX 64

typedef struct history_node {
    float bytes_ratio;    /* utilisation by bytes over the live nodes' mean; NaN = not live */
    float load_ratio;     /* the same by load (ops/s) */
    float ops;            /* ops/s */
    float p50_ms, p99_ms; /* foreground latency over the last heartbeat interval */
} history_node;

typedef struct history_sample {
    int64_t t_ms;         /* wall clock */
    float imbalance;      /* max/mean utilisation by bytes */
    float imbalance_load; /* max/mean by load */
    float moved_bps;      /* bytes per second copied by moves since the last sample */
    float throttle_bps;   /* move_bytes_per_sec x moves in flight; 0 = unlimited */
    uint16_t in_flight, queued;
    uint16_t ncols; /* node columns in use when sampled */
    history_node nodes[HISTORY_NODES];
} history_sample;

typedef enum {
    HISTORY_MOVE_START,  /* the destination accepted it: copying began */
    HISTORY_MOVE_COMMIT, /* the new owner is durable */
    HISTORY_MOVE_ABORT,
} history_event_kind;

typedef struct history_event {
    int64_t t_ms;
    uint64_t move;
    uint32_t partition;
    uint32_t kind; /* history_event_kind */
} history_event;

typedef struct coord_history coord_history;

/* A new, empty history. NULL on out-of-memory. */
coord_history *coord_history_new(void);
/* NULL is a no-op. */
void coord_history_free(coord_history *h);
/* The memory one history holds, in bytes (fixed). */
size_t coord_history_bytes(void);

/* The column of node `id`, given out on first use. Returns the column
 * (0..HISTORY_NODES-1), KEEL_ELIMIT when every column is taken, or
 * KEEL_EINVAL for an id longer than HISTORY_ID_MAX. */
int coord_history_column(coord_history *h, const char *id);
/* Columns given out so far, and the node id of column c (borrowed until the
 * history is freed; NULL out of range). */
size_t coord_history_ncols(const coord_history *h);
const char *coord_history_col_id(const coord_history *h, size_t c);

/* Appends a copy of s (the oldest sample is dropped when full). Samples
 * are kept in time order: one older than the newest (the wall clock stepped
 * back) empties the sample ring first, so the history restarts from s
 * rather than stopping until the clock catches up. Events are kept. */
void coord_history_add(coord_history *h, const history_sample *s);
/* Samples held (at most HISTORY_SAMPLES), and sample i, 0 = oldest
 * (borrowed until the next add; NULL out of range). */
size_t coord_history_count(const coord_history *h);
const history_sample *coord_history_at(const coord_history *h, size_t i);
/* The index of the first sample newer than since_ms (count when none). */
size_t coord_history_first_after(const coord_history *h, int64_t since_ms);

/* Records a move event (NULL h is a no-op, for tests without a history). */
void coord_history_event(coord_history *h, int64_t t_ms, uint64_t move, uint32_t partition,
                         history_event_kind kind);
size_t coord_history_nevents(const coord_history *h);
/* Event i, 0 = oldest; NULL out of range. */
const history_event *coord_history_event_at(const coord_history *h, size_t i);
const char *coord_history_event_name(uint32_t kind);

#endif
