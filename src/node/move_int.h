/* move_int.h - the move engines' shared state; private to move.c (state
 * machine and directives), move_src.c (stream source) and move_dst.c
 * (stream destination). Everything outside reaches it through move.h, and
 * the engines reach the world only through move_env.h.
 */
#ifndef KEEL_MOVE_INT_H
#define KEEL_MOVE_INT_H

#include "core/buf.h"
#include "core/id.h"
#include "core/tbucket.h"
#include "node/move.h"
#include "node/move_env.h"

#define MOVES_MAX 16              /* moves in or out at once on one node */
#define CHUNK_MAX (1u << 20)      /* most bytes a chunk or changes reply may ask for */
/* What D asks for, and how much of it one loop turn applies. A copy chunk
 * is queued on arrival and applied APPLY_TURN_BYTES per turn (a 0 ms timer
 * between slices lets the loop serve everything else); a 256 KiB chunk of
 * small hash fields applied in one turn kept D's loop busy 7 ms on average
 * (bench/move_bighash, docs/benchmarks.md). S reads a chunk in one turn,
 * so PULL_BYTES bounds S's turn. A catch-up reply is applied in one turn,
 * hence its smaller request. */
#define PULL_BYTES (64u << 10)
#define CHANGES_PULL_BYTES (32u << 10)
#define APPLY_TURN_BYTES (16u << 10)
/* A slice also stops after APPLY_TURN_US (env clock; the turn-end write of
 * the slice costs about as much again), checked after every
 * APPLY_STEP_RECORDS records, each step its own txn: on a loaded machine
 * 16 KiB of hash fields took 2.5-5 ms of CPU. */
#define APPLY_TURN_US 250
#define APPLY_STEP_RECORDS 32
#define PULL_DEPTH 2              /* chunk requests D keeps in flight */
#define CHANGES_POLL_MS 100       /* long poll of an empty CHANGES */
#define REPORT_MS 250             /* progress reports to the coordinator */
#define LOG_MAX ((size_t)1 << 30) /* captured bytes S keeps for one move */
#define STUCK_TICKS 12            /* REPORT_MS ticks without a shrinking backlog */
#define FENCE_LAG_DEFAULT (1u << 20)
#define VERIFY_WAIT_MS 5000     /* a source that stops answering fails the move */
#define MUT_FENCE_TIMER_MS 50   /* MOVE_MUT_FENCE_TIMER: the broken source's own timeout */

typedef struct out_move {
    moves *mv;
    uint64_t id, epoch;
    unsigned p;
    char dst[KEEL_ID_MAX + 1];
    store_snapshot *snap; /* NULL once the copy has been read */
    char *cursor;         /* the copy resumes after this encoded key; NULL = start */
    size_t curlen;
    int capture;
    kbuf log;          /* change records */
    size_t head;       /* log bytes before head are acknowledged */
    uint64_t next_pos; /* position of the next change; the first is 1 */
    uint64_t acked;    /* D applied through this position */
    int fenced;
    uint64_t fence_pos;
    uint64_t fenced_us;
    uint64_t digest, digest_keys;
    tbucket tb;
    uint64_t bytes_sent;
    int overflow; /* the log passed LOG_MAX: the move cannot converge */
    void *waiter; /* the connection of a held CHUNK/CHANGES */
    int *waiter_flag;
    int waiter_changes; /* the waiter is a CHANGES long poll (new changes wake it) */
    int waiting_tokens; /* ...or waits for the throttle (only its timer wakes it) */
    int change_woke;    /* the timer was started at 0 by a change: not a deadline */
    move_timer *timer;
    move_timer *mut_timer; /* MOVE_MUT_FENCE_TIMER only */
} out_move;

enum { IN_COPY, IN_CATCHUP, IN_APPLIED, IN_FAILED };

typedef struct in_move {
    moves *mv;
    uint64_t id, epoch;
    uint64_t fence_lag; /* the coordinator's fence_lag_bytes (KEEL.MOVE.IN), else the default */
    unsigned p;
    char src[KEEL_ID_MAX + 1], host[256];
    int port;
    move_link *link;
    int phase;
    int pulls;        /* chunk requests in flight */
    int copied;       /* a chunk reply said the snapshot is exhausted */
    uint64_t applied; /* last change position applied */
    int fenced;
    uint64_t fence_pos;
    uint64_t bytes, keys;
    uint64_t lag_bytes, lag_ms;
    uint64_t start_us, tick_bytes;
    double rate; /* bytes/s over the last tick */
    uint64_t best_backlog;
    int stuck;
    uint64_t last_caught_us;
    void *verifier; /* the connection of a held VERIFY */
    uint64_t verify_since_us; /* a VERIFY waits at most VERIFY_WAIT_MS */
    int syncing, durable;     /* the copy's fsync before VERIFY: in flight, done */
    char why[96];
    move_timer *timer;
    kbuf pend;               /* copy records received, not yet applied */
    move_timer *apply_timer; /* applies the next slice of pend in a later turn */
} in_move;

struct moves {
    move_env env;
    unsigned mutations; /* MOVE_MUT_*; 0 outside the simulator */
    out_move *out[MOVES_MAX];
    in_move *in[MOVES_MAX];
    move_stats st;
};

static inline uint64_t mv_now_us(const moves *mv) {
    return mv->env.now_us(mv->env.ctx);
}

/* Slots of partition p. */
void mv_slot_range(const moves *mv, unsigned p, unsigned *lo, unsigned *hi);

/* ---- Source (move_src.c) ---- */

/* Starts S's part of move m: a change capture of p's slots, then a snapshot
 * with no write in between (gapless, store.h). NULL on failure (nothing
 * started). */
out_move *src_start(moves *mv, uint64_t m, unsigned p, uint64_t epoch, const char *dst,
                    uint64_t rate);
/* Ends S's part: capture off, snapshot freed, a held data request run
 * again (it then finds no move), freed. */
void src_end(moves *mv, out_move *o);
/* Called once the fence is persisted and the turn written: f is the last
 * change position; a held CHANGES is answered now. */
void src_fenced(out_move *o);
/* The data path: KEEL.MOVE.CHUNK and KEEL.MOVE.CHANGES. */
int src_chunk(moves *mv, move_call *c, int argc, char **argv, const size_t *len);
int src_changes(moves *mv, move_call *c, int argc, char **argv, const size_t *len);
out_move *src_find(moves *mv, uint64_t id);

/* ---- Destination (move_dst.c) ---- */

/* Starts D's part: dials S and pulls. NULL on out-of-memory. */
in_move *dst_start(moves *mv, uint64_t m, unsigned p, uint64_t epoch, const char *src,
                   const char *host, int port, uint64_t fence_lag);
/* Fails the move (source-unreachable) if its link could not be started;
 * called once the move is in the table, so the failure is reported. */
void dst_check_link(in_move *in);
void dst_end(moves *mv, in_move *in);
/* VERIFY's durable point: 1 when the applied copy is durable, 0 when its
 * fsync is in flight (hold the VERIFY: the engine resumes it), < 0 when it
 * cannot be started. */
int dst_durable(in_move *in);
in_move *dst_find(moves *mv, uint64_t id);

#endif
