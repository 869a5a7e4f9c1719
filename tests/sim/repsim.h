/* repsim.h - a deterministic simulator of replicated partitions (DESIGN.md
 * §11, §12; docs/replication.md step 2, docs/move-simulation.md).
 *
 * One process, one thread, one seed: a coordinator model and 3-5 nodes, RF 3,
 * min_insync 2. Each node runs the real replication engines
 * (node/rep_engine.h) over a real RocksDB store (in /dev/shm when present);
 * only the environment is simulated - clock (per-node skew and forward
 * steps), timers, network (delays, bursts, dropped connections), crashes,
 * pauses, a cut between a node and the coordinator, failed turn writes;
 * every crash is a power loss (the newest WAL cut between its synced size
 * and its end; each turn's fsync a window the node blocks in). The
 * coordinator model holds replicas, ISR, leader epoch and partition epoch per
 * partition; it commits ISR changes by compare-and-set on the partition
 * epoch, shrinks the ISR of down or restarted followers, grants leases with
 * heartbeat replies and fails over only to an ISR member, with leader epoch
 * + 1, after waiting out the old leader's lease. Clients write unique keys
 * and read acknowledged ones.
 *
 * Checked after every event:
 *   R1  at most one node accepts writes for a partition (rep_write_check);
 *   R5  no position applied twice on a node with different contents, and
 *       the leader epochs along a node's log never go down; the epoch a
 *       node knows for a partition never goes down within its life;
 * when the reply of a write leaves its leader:
 *   R4  at least min_insync replicas hold its position (with its contents)
 *       durably - covered by a completed fsync - and so does every member
 *       of the coordinator's ISR, whose logs agree with the leader's at
 *       every position below it;
 * when a node may first serve a partition in a leader epoch (has a lease):
 *   R2  every acknowledged write of the partition is in its store;
 * on every read:
 *   R3  a read at a leader of an acknowledged key returns its value;
 * when a node's engines stop (crash, restart, the end):
 *   R6  no old state a follower took with a leader's batch differed from
 *       its own data where checked (every one in a debug build);
 * at the end (faults over, clients stopped):
 *   L   every partition has a leader accepting writes and an ISR of at
 *       least min_insync members, each holding the leader's data (digest),
 *       each one's kept digest and key count equal to a scan of its data,
 *       and every acknowledged key is on its leader.
 *
 * A run is a pure function of its options (trace and events repeat).
 */
#ifndef KEEL_REPSIM_H
#define KEEL_REPSIM_H

#include <stdint.h>

/* Mutations of the coordinator model (the engines' are REP_MUT_*). */
enum {
    REPSIM_MUT_PROMOTE_NON_ISR = 1 << 0, /* fail over to a replica outside the ISR when one is up */
    /* Replica moves (the executor over coord_repstep.c, and the modelled
     * binding's RESIGN): */
    REPSIM_MUT_REMOVE_BEFORE_ISR = 1 << 1,    /* remove the source while the new copy catches up */
    REPSIM_MUT_COMMIT_BEFORE_RESIGN = 1 << 2, /* commit a transfer without RESIGN's OK */
    REPSIM_MUT_TRANSFER_NON_ISR = 1 << 3,     /* transfer to a replica outside the ISR */
    REPSIM_MUT_WRITE_AFTER_RESIGN = 1 << 4,   /* the old leader keeps taking writes in RESIGN */
    REPSIM_MUT_READ_AFTER_RESIGN = 1 << 5,    /* ... keeps serving reads after RESIGN OK (the
                                               * binding before the fix: seed 2000, R3) */
    /* The binding's turn end (rep_uv.c): */
    REPSIM_MUT_EARLY_ACK = 1 << 6,        /* a follower's ACK leaves with the early messages, before
                                           * its own fsync */
    REPSIM_MUT_REPLY_BEFORE_SYNC = 1 << 7 /* the fsync runs asynchronously and replies of
                                           * committed turns leave before it completes */
};

typedef struct repsim_opts {
    uint64_t seed;
    int nodes;                /* 3..5; 0 = chosen by the seed */
    unsigned node_mutations;  /* REP_MUT_* for every node's engines */
    unsigned coord_mutations; /* REPSIM_MUT_* */
    uint64_t fault_ms;        /* simulated time with faults; 0 = 6000 */
    int verbose;              /* 1: steps to stderr; 2: every event */
    const char *dir;          /* where the stores live; NULL = /dev/shm, $TMPDIR or /tmp */
} repsim_opts;

typedef struct repsim_result {
    int violation;
    char what[512];
    uint64_t events, trace, sim_ms;
    uint64_t writes_acked, reads_checked, faults;
    unsigned failovers, isr_shrinks, isr_expands, copies, truncations, noreplicas;
    unsigned crashes, drops, pauses, cuts, clock_steps, disk_errors;
    unsigned moves, moves_done, moves_aborted, transfers, resigns, resign_errors;
    unsigned reelections;            /* a move that gave up after RESIGN OK re-elected the leader */
    unsigned handoffs, handoff_left; /* SIGTERM hand-offs; partitions still led at the stop */
    /* Power loss: fsync windows, power losses inside one (the armed fault),
     * crashes that cut unsynced WAL bytes and how many, positions a cut took
     * from a node (applied, not yet synced, gone after the restart). */
    unsigned sync_windows, window_crashes, power_cuts, positions_lost;
    uint64_t bytes_cut;
    /* Client requests a follower answered REP_EHANDOFF (-TRYAGAIN, not a
     * redirect back to the leader that resigned), and those the resigned
     * leader sent to its RESIGN's target. */
    unsigned handoff_tryagain, handoff_moved;
    /* Followers' batch records applied with the leader's old state and by
     * reading their own (rep_engine.h olds), and old states found to differ
     * from the follower's data when checked (R6: must be 0). */
    uint64_t olds_used, olds_read, olds_mismatched;
} repsim_result;

/* Runs one simulation. 0 (see r->violation), or -1 if the simulator itself
 * could not run (r->what says why). */
int repsim_run(const repsim_opts *o, repsim_result *r);

#endif
