/* zscore.h - a sorted set's score as 8 bytes whose byte order (memcmp) is
 * the numeric order of the doubles, for the score-index record keys
 * (docs/storage-format.md). Pure functions, no state; any thread.
 *
 * Encoding: take the IEEE-754 bits of the double as a u64; for a
 * non-negative number set the sign bit, for a negative one invert every
 * bit; write the result big-endian. -0 is encoded as +0 first, so the two
 * zeros are one score (as redis compares them). -inf and +inf are the
 * smallest and largest encodings; NaN is never a score (callers reject
 * it) and has no defined place. Decoding inverts the transform exactly,
 * except that -0 comes back as +0. */
#ifndef KEEL_CORE_ZSCORE_H
#define KEEL_CORE_ZSCORE_H

#include <stdint.h>
#include <string.h>

#define ZSCORE_LEN 8

static inline void zscore_encode(char out[ZSCORE_LEN], double d) {
    uint64_t u;
    if (d == 0) d = 0; /* -0 -> +0 */
    memcpy(&u, &d, 8);
    u = (u & (1ull << 63)) ? ~u : u | (1ull << 63);
    for (int i = 0; i < 8; i++)
        out[i] = (char)(u >> (56 - 8 * i));
}

static inline double zscore_decode(const char *p) {
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = u << 8 | (uint8_t)p[i];
    u = (u & (1ull << 63)) ? u & ~(1ull << 63) : ~u;
    double d;
    memcpy(&d, &u, 8);
    return d;
}

#endif
