/* stallclock.h - a monotonic clock that stops while its owner is not running.
 *
 * A process judges others by silence: "no heartbeat for 3 s". If the judge
 * itself stalls (SIGSTOP, a VM freeze, a GC-like pause, a 5 s fsync under
 * its map store), the silence it measures on waking is its own, and the
 * messages that prove the others alive are still unread in its sockets.
 * This clock subtracts such stalls: it is read often (a ticker every
 * tick_ms, plus every caller), and any gap between two reads longer than
 * gap_ms is taken as a stall of the reader, of which all but one tick is
 * credited (removed from the clock). Deadlines measured on it are therefore
 * extended by every stall of the process that measures them, which is what
 * a failure detector and a move executor's timeouts need. The wall clock is
 * never involved, so clock steps do not move it either.
 *
 * Pure: the caller passes the raw monotonic reading (keel_mono_us() / 1000
 * in production, a simulated clock in tests). Not thread-safe: one owner.
 */
#ifndef KEEL_STALLCLOCK_H
#define KEEL_STALLCLOCK_H

#include <stdint.h>

typedef struct keel_stallclock {
    int64_t tick_ms;    /* the owner reads the clock at least this often when running */
    int64_t gap_ms;     /* a longer gap between reads is a stall of the owner */
    int64_t last_raw;   /* raw monotonic ms at the last read */
    int64_t credited;   /* total ms removed so far */
    int64_t last_stall; /* clock value (not raw) at the end of the last stall; 0 = none */
    uint64_t stalls;    /* stalls seen */
    int64_t longest;    /* longest stall, ms */
} keel_stallclock;

/* Starts the clock at raw monotonic ms raw_now. tick_ms > 0; gap_ms >
 * tick_ms (a gap of a few ticks is scheduling noise, not a stall). */
void keel_stallclock_init(keel_stallclock *c, int64_t tick_ms, int64_t gap_ms, int64_t raw_now);

/* The clock's value at raw monotonic ms raw_now: raw_now minus every stall
 * credited so far, including one that ends at this read. Never goes back
 * (a raw reading older than the last one is treated as equal to it). */
int64_t keel_stallclock_read(keel_stallclock *c, int64_t raw_now);

#endif
