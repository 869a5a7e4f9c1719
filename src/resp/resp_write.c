/* resp_write.c - RESP2/RESP3 frame writers; see resp.h.
 *
 * Design. Each writer reserves the frame's full size once and formats in
 * place, with hand-rolled integer formatting instead of printf, because these
 * run once or more per reply on the hot path. A writer either appends its
 * whole frame or (on KEEL_ENOMEM) leaves the buffer unchanged.
 *
 * RESP3-only types degrade as redis-server does: null -> "$-1"/"*-1", map ->
 * flat array of 2n, set -> array, double -> bulk string, bool -> integer,
 * verbatim -> plain bulk without its "txt:" prefix. Text that must stay on
 * one line (simple strings and errors) has CR and LF replaced by spaces, so
 * a caller can never break the framing.
 */
#include "resp/resp.h"
#include "core/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest "<type><int>\r\n" header: 1 + 20 digits with sign + 2. */
#define HDR_MAX 24

/* kbuf_reserve, minus the call when there is room already (the usual case). */
static inline int w_room(kbuf *b, size_t n) {
    return b->cap - b->len >= n ? 0 : kbuf_reserve(b, n);
}

/* Writes v in decimal at dst; returns the length (at most 20). Counts the
 * digits first so they can be written in place, last digit first. */
static size_t fmt_u64(char *dst, uint64_t v) {
    size_t n = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        n++;
    for (size_t i = n; i-- > 0; v /= 10)
        dst[i] = (char)('0' + v % 10);
    return n;
}

static size_t fmt_i64(char *dst, long long v) {
    if (v >= 0) return fmt_u64(dst, (uint64_t)v);
    dst[0] = '-';
    return 1 + fmt_u64(dst + 1, 0 - (uint64_t)v);
}

/* Writes "<type><v>\r\n" into already reserved space. */
static void put_hdr(kbuf *b, char type, long long v) {
    char *o = b->p + b->len;
    o[0] = type;
    size_t n = 1 + fmt_i64(o + 1, v);
    o[n] = '\r';
    o[n + 1] = '\n';
    b->len += n + 2;
}

static int w_hdr(kbuf *b, char type, long long v) {
    if (w_room(b, HDR_MAX)) return KEEL_ENOMEM;
    put_hdr(b, type, v);
    return 0;
}

/* Counts beyond LLONG_MAX cannot be real; they are clamped rather than
 * wrapped to a negative count. */
static long long count_ll(size_t n) {
    return n > (size_t)INT64_MAX ? INT64_MAX : (long long)n;
}

static int w_lit(kbuf *b, const char *s) {
    return kbuf_append(b, s, strlen(s));
}

/* "<type>text\r\n" with CR/LF in text turned into spaces. */
static int w_line(kbuf *b, char type, const char *s, size_t n) {
    if (n > SIZE_MAX - 3 || w_room(b, n + 3)) return KEEL_ENOMEM;
    char *o = b->p + b->len;
    *o++ = type;
    for (size_t i = 0; i < n; i++)
        o[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    o[n] = '\r';
    o[n + 1] = '\n';
    b->len += n + 3;
    return 0;
}

int resp_w_simple(kbuf *b, const char *s) {
    return w_line(b, '+', s, strlen(s));
}

int resp_w_error(kbuf *b, const char *msg) {
    return w_line(b, '-', msg, strlen(msg));
}

int resp_w_errorf(kbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) return resp_w_error(b, "ERR bad error format");
    if ((size_t)n < sizeof(small)) return w_line(b, '-', small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) return KEEL_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = w_line(b, '-', big, (size_t)n);
    free(big);
    return rc;
}

int resp_w_int(kbuf *b, long long v) {
    return w_hdr(b, ':', v);
}

int resp_w_bulk(kbuf *b, const void *p, size_t len) {
    if (len > SIZE_MAX - HDR_MAX - 2 || w_room(b, HDR_MAX + len + 2)) return KEEL_ENOMEM;
    put_hdr(b, '$', count_ll(len));
    if (len) memcpy(b->p + b->len, p, len);
    b->p[b->len + len] = '\r';
    b->p[b->len + len + 1] = '\n';
    b->len += len + 2;
    return 0;
}

int resp_w_bulkstr(kbuf *b, const char *s) {
    return resp_w_bulk(b, s, strlen(s));
}

int resp_w_null(kbuf *b, int proto) {
    return w_lit(b, proto == 3 ? "_\r\n" : "$-1\r\n");
}

int resp_w_null_array(kbuf *b, int proto) {
    return w_lit(b, proto == 3 ? "_\r\n" : "*-1\r\n");
}

int resp_w_array(kbuf *b, size_t n) {
    return w_hdr(b, '*', count_ll(n));
}

int resp_w_map(kbuf *b, int proto, size_t pairs) {
    if (proto == 3) return w_hdr(b, '%', count_ll(pairs));
    return w_hdr(b, '*', count_ll(pairs > SIZE_MAX / 2 ? SIZE_MAX : pairs * 2));
}

int resp_w_set(kbuf *b, int proto, size_t n) {
    return w_hdr(b, proto == 3 ? '~' : '*', count_ll(n));
}

/* Formats v like redis-server: "%.17g", with "inf", "-inf" and "nan"
 * spelled out (glibc would print "-nan" for some NaNs). */
static int fmt_double(char *dst, size_t cap, double v) {
    if (isnan(v)) return snprintf(dst, cap, "nan");
    if (isinf(v)) return snprintf(dst, cap, v > 0 ? "inf" : "-inf");
    return snprintf(dst, cap, "%.17g", v);
}

int resp_w_double(kbuf *b, int proto, double v) {
    char tmp[64];
    int n = fmt_double(tmp, sizeof(tmp), v);
    if (proto != 3) return resp_w_bulk(b, tmp, (size_t)n);
    return w_line(b, ',', tmp, (size_t)n);
}

int resp_w_bool(kbuf *b, int proto, int v) {
    if (proto == 3) return w_lit(b, v ? "#t\r\n" : "#f\r\n");
    return w_lit(b, v ? ":1\r\n" : ":0\r\n");
}

/* fmt3 names the format, e.g. "txt" or "mkd"; one that is not exactly three
 * characters would corrupt the frame, so "txt" is used instead. */
int resp_w_verbatim(kbuf *b, int proto, const char *fmt3, const void *p, size_t len) {
    if (proto != 3) return resp_w_bulk(b, p, len);
    if (!fmt3 || strlen(fmt3) != 3) fmt3 = "txt";
    if (len > SIZE_MAX - HDR_MAX - 6 || w_room(b, HDR_MAX + 4 + len + 2)) return KEEL_ENOMEM;
    put_hdr(b, '=', count_ll(len + 4));
    char *o = b->p + b->len;
    memcpy(o, fmt3, 3);
    o[3] = ':';
    if (len) memcpy(o + 4, p, len);
    o[4 + len] = '\r';
    o[5 + len] = '\n';
    b->len += len + 6;
    return 0;
}
