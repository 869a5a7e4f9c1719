/* coord_move.h - the coordinator's move executor (DESIGN.md §6, §7;
 * docs/moves.md).
 *
 * The executor owns every move from PLANNED to DONE or ABORTED. Its durable
 * truth is the map store's move records; in memory it keeps what it needs to
 * drive them: progress from the destination's reports, the directives each
 * node still has to acknowledge, and timings.
 *
 * It reaches each node over a connection of its own (net/peerlink,
 * authenticated as "coordinator") and pushes directives that carry the
 * coordinator's term: KEEL.MOVE.OUT/IN to start, FENCE, VERIFY, COMMIT,
 * ABORT, CLEANUP, RATE and STATE (to settle what a node restart left). The
 * fence-to-commit path is driven by replies, never by a timer tick.
 *
 * Rules it keeps:
 *  - a move commits only through mapstore_move_commit, after the source's and
 *    the destination's digests at the fence position are equal;
 *  - an abort is recorded durably before any node hears of it, and a
 *    committed move only goes forward;
 *  - directives are repeated until acknowledged (nodes treat repeats as
 *    no-ops), so a node that was away settles when it returns;
 *  - a restarted coordinator aborts every move it finds before COMMITTED and
 *    finishes every COMMITTED one.
 *
 * Threads: the coordinator's loop thread.
 */
#ifndef KEEL_COORD_MOVE_H
#define KEEL_COORD_MOVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/histogram.h"

typedef struct coord coord;
typedef struct cJSON cJSON;

/* Loads unfinished moves (aborting or finishing them, see above) and starts
 * the executor's timer. Returns 0 or a negative KEEL_E*. */
int coord_moves_start(coord *co);
/* Closes node connections and frees; records stay in the map store. */
void coord_moves_stop(coord *co);

/* Runs on the loop when a move's record write completes: rc 0 and the
 * move's id, or a KEEL_E* and the reason (err, valid during the call). */
typedef void (*coord_move_done)(coord *co, int rc, uint64_t id, const char *err, void *arg);

/* Plans a move of partition p to node `to` (operator or planner). Checks: p
 * in range and owned, `to` a known node that is UP and not the owner, no
 * move in flight (or being recorded) for p. Returns 0 once the record is
 * submitted to the map store (it is never waited for): done(co, rc, id,...)
 * runs later, once, when it is durable (or failed); done may be NULL.
 * Otherwise a negative KEEL_E* with a one-line reason in err, and done
 * never runs. */
int coord_move_create(coord *co, unsigned p, const char *to, const char *reason,
                      coord_move_done done, void *arg, char *err, size_t cap);
/* Cancels a move that has not committed: submits its abort with reason
 * "cancelled"; done runs when the abort is durable (or failed).
 * KEEL_ENOTFOUND (no such move), KEEL_EINVAL (already committed or ended,
 * committing, or already aborting). */
int coord_move_cancel(coord *co, uint64_t id, coord_move_done done, void *arg, char *err,
                      size_t cap);

/* A node (re)registered: it may have restarted with move records of moves
 * that ended meanwhile (a fence, an incoming copy, a retired copy). The
 * executor (re)connects to it and settles them (KEEL.MOVE.STATE). */
void coord_moves_node_registered(coord *co, const char *id);

/* KEEL.MOVE.REPORT from node `from`: argv[1..] = move phase bytes keys
 * lag-bytes lag-ms rate reason (argc 8 or 9). Every number is parsed
 * strictly (core/num.h; lag-bytes may be "-1": not known yet). Returns 0
 * (also for a report about a move that is not its own, which is ignored)
 * or KEEL_EINVAL for a malformed report, which changes nothing. */
int coord_move_report(coord *co, const char *from, int argc, char **argv, const size_t *len);

/* Appends the moves in flight and the most recent finished ones (up to
 * `recent`), newest last, as JSON objects to arr. */
void coord_moves_json(coord *co, cJSON *arr, size_t recent);
struct plan_model;
/* Marks in m (built by coord_build_model) what the planner must know about
 * moves: partitions with a move not yet committed are in flight (their
 * weight counted at the destination), and each partition's time since its
 * last commit (min_residence). */
void coord_moves_annotate(coord *co, struct plan_model *m);

/* Counts for /metrics and STATUS. */
typedef struct coord_move_counts {
    unsigned in_flight, queued, committed_pending_cleanup;
    double oldest_age_s;
    uint64_t started_total, committed_total, aborted_total;
    uint64_t bytes_total; /* bytes copied by moves, as destinations reported them */
    double last_pause_ms, max_pause_ms;
    histogram pause;     /* write pauses (fence sent -> destination serving), seconds */
    int64_t last_end_ms; /* coord_now() when a move last committed or aborted; 0 = never */
} coord_move_counts;
void coord_moves_counts(coord *co, coord_move_counts *out);

#endif
