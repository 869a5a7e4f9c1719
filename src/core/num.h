/* num.h - the one strict decimal number parser for peer and client input
 * (issue 10, defect 2).
 *
 * strtoull and friends skip leading blanks, accept a sign (even "-1" for an
 * unsigned type, which wraps), clamp on overflow with only errno to say so,
 * and stop at the first non-digit, leaving the caller to remember to check
 * the end pointer. Every number that arrives from a peer, a client or a
 * record on disk goes through these instead.
 *
 * Grammar (the whole of s[0..len), nothing skipped):
 *
 *   u64 := digit+                 value <= UINT64_MAX
 *   i64 := ["-"] digit+           INT64_MIN <= value <= INT64_MAX
 *
 * No blanks, no "+", no "0x", no trailing bytes, no empty string. Leading
 * zeros are accepted ("007" is 7). A NUL inside s[0..len) is a non-digit.
 *
 * Threads: pure functions, callable from any thread.
 */
#ifndef KEEL_NUM_H
#define KEEL_NUM_H

#include <stddef.h>
#include <stdint.h>

/* Parses s[0..len) as a u64 into *out. On failure *out is unchanged.
 * Returns 0, KEEL_EINVAL (empty, a sign, or a non-digit anywhere; also s
 * NULL) or KEEL_ERANGE (digits only, but above UINT64_MAX). */
int keel_parse_u64(const char *s, size_t len, uint64_t *out);

/* Parses s[0..len) as an i64 into *out. On failure *out is unchanged.
 * Returns 0, KEEL_EINVAL or KEEL_ERANGE (outside INT64_MIN..INT64_MAX). */
int keel_parse_i64(const char *s, size_t len, int64_t *out);

/* The same for a NUL-terminated string. */
int keel_parse_u64z(const char *s, uint64_t *out);
int keel_parse_i64z(const char *s, int64_t *out);

#endif
