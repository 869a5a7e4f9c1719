/* tbucket.c - byte token bucket; see tbucket.h.
 *
 * Credit is counted in byte-microseconds: elapsed_us * rate of it is one
 * rate-second's worth scaled by 1e6, so tokens += credit / 1e6 and the
 * remainder stays in frac. Nothing is lost to rounding, which is what lets
 * the tests check the long-run total exactly.
 *
 * Overflow: with rate and burst <= 2^40, a refill either fills the bucket
 * (decided by comparing elapsed with the time to fill, with no product) or
 * spends less than that time, in which case elapsed * rate is below
 * burst * 1e6 + rate < 2^61.
 */
#include "core/tbucket.h"
#include "core/err.h"

#define US_PER_S 1000000u

int tbucket_init(tbucket *tb, uint64_t rate, uint64_t burst) {
    if (rate > TBUCKET_MAX || burst > TBUCKET_MAX) return KEEL_ERANGE;
    if (rate && !burst) return KEEL_EINVAL;
    *tb = (tbucket){.rate = rate, .burst = burst, .tokens = burst};
    return 0;
}

/* Byte-microseconds of credit still missing for a full bucket. */
static uint64_t deficit(const tbucket *tb) {
    return (tb->burst - tb->tokens) * US_PER_S - tb->frac;
}

static void refill(tbucket *tb, uint64_t now_us) {
    if (!tb->anchored || now_us < tb->last_us) { /* first call, or time went back */
        tb->anchored = 1;
        tb->last_us = now_us;
        return;
    }
    uint64_t elapsed = now_us - tb->last_us;
    tb->last_us = now_us;
    if (!tb->rate || tb->tokens == tb->burst) return;
    uint64_t need = deficit(tb);
    if (elapsed >= (need + tb->rate - 1) / tb->rate) {
        tb->tokens = tb->burst;
        tb->frac = 0;
        return;
    }
    uint64_t credit = elapsed * tb->rate + tb->frac;
    tb->tokens += credit / US_PER_S;
    tb->frac = credit % US_PER_S;
}

int tbucket_set_rate(tbucket *tb, uint64_t now_us, uint64_t rate) {
    if (rate > TBUCKET_MAX) return KEEL_ERANGE;
    if (rate && !tb->burst) return KEEL_EINVAL; /* initialised unlimited with no burst */
    refill(tb, now_us);                         /* settle what was earned at the old rate */
    if (!tb->rate && rate) {
        tb->tokens = tb->burst;
        tb->frac = 0;
    }
    tb->rate = rate;
    return 0;
}

size_t tbucket_take(tbucket *tb, uint64_t now_us, size_t want) {
    refill(tb, now_us);
    if (!tb->rate) return want;
    size_t n = want < tb->tokens ? want : (size_t)tb->tokens;
    tb->tokens -= n;
    return n;
}

uint64_t tbucket_wait_us(tbucket *tb, uint64_t now_us, size_t want) {
    refill(tb, now_us);
    if (!tb->rate) return 0;
    uint64_t w = want < tb->burst ? want : tb->burst;
    if (tb->tokens >= w) return 0;
    uint64_t need = (w - tb->tokens) * US_PER_S - tb->frac;
    return (need + tb->rate - 1) / tb->rate;
}
