/* move_engine.h - the node's move engines as one object, behind an injected
 * environment (move_env.h; DESIGN.md §11).
 *
 * This is the interface both bindings use: production (move_uv.c, through
 * move.h) and the move simulator (tests/sim). The engine executes the
 * KEEL.MOVE.* peer commands - the coordinator's directives and D's data
 * requests - and keeps the move state machine:
 *
 *                 OUT                 FENCE                map gives p away
 *   S: SERVING -------> OUTGOING -------------> FENCED ------------------> RETIRED --CLEANUP--> ABSENT
 *                          |                      |
 *                          +------- ABORT --------+--> SERVING
 *
 *                 IN                  map gives p here
 *   D: ABSENT  -------> INCOMING -------------------------> SERVING
 *      RETIRED             |
 *                          +------- ABORT ----> ABSENT (copy dropped)
 *
 * Every transition into OUTGOING, FENCED, INCOMING or RETIRED is persisted
 * ("part/<p>" in the store's metadata) before the engine acts on it or
 * answers; move_restore reads the records back after a restart.
 *
 * Threads: the thread that owns the environment.
 */
#ifndef KEEL_MOVE_ENGINE_H
#define KEEL_MOVE_ENGINE_H

#include <stdint.h>

#include "node/move_env.h"

typedef struct moves moves;

/* For INFO and /metrics. held..tryagain_total come from the binding's
 * held-request queue (move.h); the engine leaves them 0. */
typedef struct move_stats {
    unsigned outgoing, incoming, fenced, retired;
    uint64_t held, held_total, tryagain_total;
    uint64_t bytes_sent, bytes_received;
    uint64_t cleanups_total, commits_total, aborts_total;
} move_stats;

/* An engine over env (copied; env->ctx and the store and table it names
 * must outlive the engine). mutations: MOVE_MUT_* (0 in production). NULL
 * on out-of-memory. */
moves *move_engine_new(const move_env *env, unsigned mutations);
/* Stops every move in memory (their records stay) and frees. Runs no
 * environment callback but timer_free, link_close and resume. */
void move_engine_free(moves *mv);
const move_env *move_engine_env(const moves *mv);

/* Executes one KEEL.MOVE.* command from authenticated peer c->peer (a NULL
 * peer is refused). Each command's argument count is checked before its
 * handler runs; a directive's term (argv[1]) passes env->check_term first.
 * Returns 0 with the reply in c->out, or MOVE_HELD. */
int move_engine_call(moves *mv, move_call *c, int argc, char **argv, const size_t *len);
/* Connection conn is gone: forgets it as a held data request or VERIFY. */
void move_engine_conn_gone(moves *mv, void *conn);

/* After each map install: settles moves the map committed - a source
 * retires the partition and releases its held requests (-MOVED), a
 * destination serves. */
void move_map_changed(moves *mv);
/* After the map is installed at start-up: puts the persisted move states
 * back into the partition table. Returns 0 or a KEEL_E* (the node must not
 * start on a guess). */
int move_restore(moves *mv);

/* Sweep filter (store_set_sweep_filter): 1 if the expiry sweep must leave
 * slot alone (its partition is INCOMING or FENCED). */
int move_sweep_skip(void *mv, unsigned slot);

void move_engine_stats(const moves *mv, move_stats *out);

#endif
