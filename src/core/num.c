/* num.c - strict decimal parsing; see num.h for the grammar.
 *
 * Overflow is checked before each multiply-add (v > (max - d) / 10), so no
 * intermediate ever wraps. The i64 parser accumulates the magnitude as a
 * u64 and compares it with 2^63 (negative) or 2^63 - 1, so INT64_MIN parses
 * without a signed overflow.
 */
#include "core/num.h"
#include "core/err.h"

#include <string.h>

/* Digits only, into *mag, bounded by max. */
static int parse_mag(const char *s, size_t len, uint64_t max, uint64_t *mag) {
    if (!s || len == 0) return KEEL_EINVAL;
    uint64_t v = 0;
    int range = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < '0' || c > '9') return KEEL_EINVAL; /* junk beats overflow */
        uint64_t d = c - '0';
        if (range || v > (max - d) / 10)
            range = 1;
        else
            v = v * 10 + d;
    }
    if (range) return KEEL_ERANGE;
    *mag = v;
    return 0;
}

int keel_parse_u64(const char *s, size_t len, uint64_t *out) {
    uint64_t v;
    int rc = parse_mag(s, len, UINT64_MAX, &v);
    if (rc) return rc;
    *out = v;
    return 0;
}

int keel_parse_i64(const char *s, size_t len, int64_t *out) {
    if (!s) return KEEL_EINVAL;
    int neg = len > 0 && s[0] == '-';
    uint64_t v;
    int rc = parse_mag(s + neg, len - (size_t)neg, neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX, &v);
    if (rc) return rc;
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 0;
}

int keel_parse_u64z(const char *s, uint64_t *out) {
    return keel_parse_u64(s, s ? strlen(s) : 0, out);
}

int keel_parse_i64z(const char *s, int64_t *out) {
    return keel_parse_i64(s, s ? strlen(s) : 0, out);
}
