/* loopstat.h - how long each turn of the node's event loop keeps it busy.
 *
 * A turn is one iteration of the libuv loop: the I/O callbacks of one poll
 * (request parsing and execution, move chunks applied), the turn-end group
 * commit and flush (rserver's check handle), timers (sweep, gc, move
 * timers) and closes. While a turn runs, nothing else on the node is
 * served, so the longest turn bounds the extra latency any request can see
 * from work queued ahead of it.
 *
 * Measured on the monotonic clock (uv_hrtime) from one uv_prepare callback
 * (just before the loop blocks in epoll) to the next, minus the time the
 * loop spent blocked in epoll in between (uv_metrics_idle_time, enabled
 * with UV_METRICS_IDLE_TIME by loopstat_start). So a turn's figure is busy
 * time only: an idle node waiting 100 ms for its next timer reports turns
 * of microseconds, not 100 ms. Busy time still includes time the thread
 * waited off the CPU inside the turn (an fsync, or being preempted on a
 * loaded machine), so the loop thread's CPU time per turn
 * (CLOCK_THREAD_CPUTIME_ID) is kept too: busy minus CPU is waiting.
 *
 * Everything runs on the loop thread; nothing here takes a lock.
 */
#ifndef KEEL_LOOPSTAT_H
#define KEEL_LOOPSTAT_H

#include <stdint.h>
#include <uv.h>

#include "core/buf.h"
#include "core/histogram.h"

#define LOOPSTAT_SLOW_NS 1000000ull      /* a turn over this counts as slow: 1 ms */
#define LOOPSTAT_WINDOW_NS 1000000000ull /* the "recent max" window: 1 s */

typedef struct loopstat loopstat;

typedef struct loopstat_stats {
    uint64_t turns;             /* turns measured since start */
    uint64_t slow_turns;        /* of which busy longer than LOOPSTAT_SLOW_NS */
    uint64_t max_ns;            /* longest turn since start */
    uint64_t window_max_ns;     /* longest turn in the last completed window */
    uint64_t window_end_ns;     /* when that window ended (uv_hrtime), 0 = none yet */
    uint64_t cpu_max_ns;        /* most CPU time of one turn since start */
    uint64_t window_cpu_max_ns; /* ... in the last completed window */
    const histogram *hist;      /* every turn's busy time, seconds; borrowed from ls */
    const histogram *cpu;       /* every turn's CPU time, seconds; borrowed from ls */
} loopstat_stats;

/* Allocates a measure not attached to any loop (loopstat_observe works on
 * it: used by unit tests). NULL on out-of-memory. */
loopstat *loopstat_new(void);

/* Enables idle-time accounting on loop and starts measuring its turns with
 * an unref'd uv_prepare handle (it does not keep the loop alive). Returns 0,
 * or a negative libuv error (then nothing is attached). Call before the
 * loop runs, at most once per loopstat. */
int loopstat_start(loopstat *ls, uv_loop_t *loop);

/* Records one turn of busy_ns (cpu_ns of it on the CPU) at time now_ns
 * (monotonic): histograms, maxima, the 1 s window (rolled when now_ns passes
 * its end). */
void loopstat_observe(loopstat *ls, uint64_t busy_ns, uint64_t cpu_ns, uint64_t now_ns);

/* Fills *out. The histogram pointer stays valid until loopstat_free. */
void loopstat_get(const loopstat *ls, loopstat_stats *out);

/* Appends INFO lines (loop_turns, loop_turns_over_1ms, loop_turn_max_us,
 * loop_turn_max_1s_us, loop_turn_1s_end_ms (CLOCK_MONOTONIC ms at the end
 * of that second), loop_turn_cpu_max_us, loop_turn_cpu_max_1s_us) and, for
 * loopstat_metrics, the Prometheus families keel_loop_turn_seconds and
 * keel_loop_turn_cpu_seconds (histograms), keel_loop_turn_max_seconds
 * (gauge) and keel_loop_turns_slow_total (counter). */
void loopstat_info(const loopstat *ls, kbuf *b);
void loopstat_metrics(const loopstat *ls, kbuf *b);

/* Stops measuring and frees ls: at once if never started, else once libuv
 * has closed the handle (the loop must run again, as a shutdown does).
 * loopstat_free(NULL) does nothing. */
void loopstat_free(loopstat *ls);

#endif
