/* log.h - one line per event, key=value fields, to stderr.
 *
 *   ts=2026-11-30T10:00:00.123Z level=info event=listen port=7000
 *
 * The caller writes the fields after "event=...": keel_log(KEEL_LOG_INFO,
 * "listen", "port=%d", port). Values that may contain spaces should be
 * quoted by the caller (use %s with keel_log_quote() for untrusted text).
 * Thread-safe: each line is formatted then written with one write(2).
 */
#ifndef KEEL_LOG_H
#define KEEL_LOG_H

#include <stddef.h>

enum { KEEL_LOG_DEBUG, KEEL_LOG_INFO, KEEL_LOG_WARN, KEEL_LOG_ERROR };

/* Lines below this level are dropped. Default KEEL_LOG_INFO. */
void keel_log_set_level(int level);
/* Parses "debug|info|warn|error". Returns 0 or KEEL_EINVAL. */
int keel_log_parse_level(const char *s, int *level);
void keel_log(int level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes s[0..n) as a double-quoted, escaped value into out (size cap,
 * truncating). Returns out. */
const char *keel_log_quote(char *out, size_t cap, const char *s, size_t n);

#endif
