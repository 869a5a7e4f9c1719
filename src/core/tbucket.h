/* tbucket.h - a token bucket in bytes, for the per-move throttle
 * move_bytes_per_sec (DESIGN.md §6 step 2).
 *
 * Pure: the caller passes the time in as microseconds from any monotonic
 * source (keel_mono_us() in production, a counter in tests); the bucket
 * never reads a clock, sleeps or logs. Arithmetic is exact integers: credit
 * below one byte is carried over, so over any window the bytes granted are
 * at most burst + floor(rate * elapsed / 1e6), and exactly that when the
 * caller keeps it drained.
 *
 * The bucket starts full (burst bytes available); the first call that
 * passes a time anchors the clock. Rate 0 means unlimited: every request is
 * granted in full and nothing waits.
 *
 * Time going backwards grants nothing and re-anchors at the earlier time.
 * The worst case is one extra burst per backwards step, against the
 * alternative of stalling for as long as the clock jumped back.
 *
 * Threads: a bucket belongs to one move on one thread; not thread-safe.
 * Memory: a plain struct the caller allocates; no _close is needed.
 */
#ifndef KEEL_TBUCKET_H
#define KEEL_TBUCKET_H

#include <stddef.h>
#include <stdint.h>

/* Upper bound for rate (bytes/s) and burst (bytes): 1 TiB. It keeps every
 * product in the refill below 2^64. */
#define TBUCKET_MAX ((uint64_t)1 << 40)

/* Fields are private; read them only through the functions below. */
typedef struct tbucket {
    uint64_t rate;    /* bytes per second; 0 = unlimited */
    uint64_t burst;   /* capacity in bytes */
    uint64_t tokens;  /* bytes available now, <= burst */
    uint64_t frac;    /* credit below one byte, in byte-microseconds, < 1e6 */
    uint64_t last_us; /* time of the last refill */
    int anchored;     /* 0 until a call has passed a time */
} tbucket;

/* Sets tb up full, at rate bytes per second (0 = unlimited) with room for
 * burst bytes. tb is an output; the caller owns it.
 * Returns 0, KEEL_ERANGE (rate or burst above TBUCKET_MAX) or KEEL_EINVAL
 * (burst 0 with a rate: nothing could ever be sent). tb is unchanged on
 * error. */
int tbucket_init(tbucket *tb, uint64_t rate, uint64_t burst);

/* Changes the rate at time now_us, keeping the burst. Credit earned up to
 * now_us is at the old rate; from then on at the new one. Leaving
 * unlimited (rate 0) starts with a full bucket.
 * Returns 0, KEEL_ERANGE (rate above TBUCKET_MAX) or KEEL_EINVAL (a rate
 * for a bucket initialised with burst 0); tb is unchanged on error. */
int tbucket_set_rate(tbucket *tb, uint64_t now_us, uint64_t rate);

/* Refills for the time elapsed up to now_us, then takes and returns the
 * bytes that may be sent now: min(want, available), so 0..want. Callers
 * send that many and call again later for the rest. */
size_t tbucket_take(tbucket *tb, uint64_t now_us, size_t want);

/* Refills up to now_us, then returns how many microseconds from now_us
 * until want bytes are available (0 if they already are). Exact: a
 * tbucket_take(tb, now_us + w, want) with nothing taken in between grants
 * all of want, and one at now_us + w - 1 would not. A want above the burst
 * can never be available at once, so it counts as burst (the time until
 * the bucket is full). Takes nothing. */
uint64_t tbucket_wait_us(tbucket *tb, uint64_t now_us, size_t want);

#endif
