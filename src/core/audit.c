/* audit.c - see audit.h. One descriptor per process, O_APPEND, one write(2)
 * per line. */
#include "core/audit.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int audit_fd = -1;
static char audit_who[80];
static _Atomic uint64_t audit_term;
static atomic_int audit_failed;

int audit_open(const char *path, const char *who, char *err, size_t cap) {
    if (!path || !*path || !who || !*who)
        return snprintf(err, cap, "--audit-log needs a file name"), KEEL_EINVAL;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return snprintf(err, cap, "--audit-log %s: %s", path, strerror(errno)), KEEL_EIO;
    if (audit_fd >= 0) close(audit_fd);
    audit_fd = fd;
    snprintf(audit_who, sizeof audit_who, "%s", who);
    return 0;
}

int audit_enabled(void) {
    return audit_fd >= 0;
}

void audit_set_term(uint64_t term) {
    audit_term = term;
}

static void line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char *fmt, ...) {
    if (audit_fd < 0) return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "ts_ms=%lld who=%s pid=%d ", (long long)keel_wall_ms(),
                     audit_who, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) return;
    size_t len = (size_t)n +
                 ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    if (write(audit_fd, buf, len) != (ssize_t)len && !atomic_exchange(&audit_failed, 1))
        keel_log(KEEL_LOG_ERROR, "audit_write_failed", "error=\"%s\"", strerror(errno));
}

void audit_map_write(const char *op, int rc, uint64_t term, uint64_t version) {
    line("kind=map_write op=%s term=%llu rc=%s version=%llu", op,
         (unsigned long long)(term ? term : audit_term), rc ? keel_errname(rc) : "0",
         (unsigned long long)version);
}

void audit_directive(const char *via, uint64_t term, uint64_t seq) {
    line("kind=directive_accepted via=%s term=%llu seq=%llu", via, (unsigned long long)term,
         (unsigned long long)seq);
}

void audit_close(void) {
    if (audit_fd >= 0) close(audit_fd);
    audit_fd = -1;
    audit_term = 0;
}
