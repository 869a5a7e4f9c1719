/* movesim.h - a deterministic simulator of the partition move protocol
 * (DESIGN.md §11; docs/simulation.md).
 *
 * One process, one thread, one seed: a coordinator model and 3-7 nodes. Each
 * node runs the real move engines (node/move_engine.h) over a real RocksDB
 * store (in its own temporary directory), the real partition table and the
 * real directive guard; only the environment is simulated - clock, timers,
 * network, disks' write errors, crashes. A client workload writes unique
 * keys and reads acknowledged ones while the coordinator model starts,
 * cancels and drives moves as coord_move.c does, and faults are injected.
 *
 * After every event the simulator checks the invariants:
 *   I1  at most one node routes a partition's writes to itself (SERVE);
 *   I2  no acknowledged write is lost: a read of an acknowledged key returns
 *       its value, and at the end every acknowledged key is on its owner;
 *   I3  map versions and partition epochs a node holds never go down;
 *   L   once faults stop, every move ends DONE or ABORTED.
 * The first violation stops the run and is described in the result.
 *
 * A run is a pure function of its options: rerunning a seed gives the same
 * events in the same order (trace_hash and events are equal).
 */
#ifndef KEEL_MOVESIM_H
#define KEEL_MOVESIM_H

#include <stdint.h>

/* Mutations of the coordinator model (the node engine's are MOVE_MUT_*). */
enum {
    SIM_MUT_COMMIT_UNVERIFIED = 1 << 0 /* commit right after FENCE, without VERIFY */
};

typedef struct movesim_opts {
    uint64_t seed;
    int nodes;                /* 3..7; 0 = chosen by the seed */
    unsigned node_mutations;  /* MOVE_MUT_* for every node's engine */
    unsigned coord_mutations; /* SIM_MUT_* */
    uint64_t fault_ms;        /* simulated time with faults; 0 = 6000 */
    int no_faults;            /* 1: no faults at all (moves and clients only) */
    int verbose;              /* 1: print events to stderr */
    const char *dir;          /* where the stores live; NULL = $TMPDIR or /tmp */
} movesim_opts;

typedef struct movesim_result {
    int violation;    /* 0: none */
    char what[512];   /* the first violation */
    uint64_t events;  /* events executed */
    uint64_t trace;   /* hash of every event's kind, node and time */
    uint64_t sim_ms;  /* simulated time at the end */
    unsigned moves_done, moves_aborted, moves_started;
    uint64_t writes_acked, reads_checked, faults;
    unsigned crashes, restarts, drops, pauses, clock_steps, disk_errors, coord_restarts;
} movesim_result;

/* Runs one simulation. Returns 0 (see r->violation) or -1 if the simulator
 * itself could not run (a store could not be opened; r->what says why). */
int movesim_run(const movesim_opts *o, movesim_result *r);

#endif
