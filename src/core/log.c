/* log.c - structured one-line logging; see log.h. */
#include "core/log.h"
#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int log_level = KEEL_LOG_INFO;
static const char *level_names[] = {"debug", "info", "warn", "error"};

void keel_log_set_level(int level) {
    log_level = level;
}

int keel_log_parse_level(const char *s, int *level) {
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, level_names[i]) == 0) {
            *level = i;
            return 0;
        }
    return KEEL_EINVAL;
}

void keel_log(int level, const char *event, const char *fmt, ...) {
    if (level < log_level) return;
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s event=%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), level_names[level & 3], event);
    if (fmt && *fmt && n < (int)sizeof line - 2) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
        if (m > 0) n += m;
    }
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

const char *keel_log_quote(char *out, size_t cap, const char *s, size_t n) {
    size_t o = 0;
    if (cap < 3) {
        if (cap) out[0] = 0;
        return out;
    }
    out[o++] = '"';
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 32 || c > 126) {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = 0;
    return out;
}
