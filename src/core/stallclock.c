/* stallclock.c - see stallclock.h. */
#include "core/stallclock.h"

void keel_stallclock_init(keel_stallclock *c, int64_t tick_ms, int64_t gap_ms, int64_t raw_now) {
    c->tick_ms = tick_ms > 0 ? tick_ms : 1;
    c->gap_ms = gap_ms > c->tick_ms ? gap_ms : 2 * c->tick_ms;
    c->last_raw = raw_now;
    c->credited = 0;
    c->last_stall = 0;
    c->stalls = 0;
    c->longest = 0;
}

int64_t keel_stallclock_read(keel_stallclock *c, int64_t raw_now) {
    if (raw_now < c->last_raw) raw_now = c->last_raw;
    int64_t gap = raw_now - c->last_raw;
    if (gap > c->gap_ms) {
        /* The owner did not run for about gap: a tick of it was its own
         * cadence, the rest it was stalled. */
        int64_t stalled = gap - c->tick_ms;
        c->credited += stalled;
        c->stalls++;
        if (stalled > c->longest) c->longest = stalled;
        c->last_stall = raw_now - c->credited;
    }
    c->last_raw = raw_now;
    return raw_now - c->credited;
}
