/* clock.h - time sources. Wall-clock milliseconds for expiry (stored on
 * disk, so it must survive restarts) and a monotonic clock for latencies. */
#ifndef KEEL_CLOCK_H
#define KEEL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t keel_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t keel_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline uint64_t keel_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
