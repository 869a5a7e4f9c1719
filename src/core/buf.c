/* buf.c - growable byte buffer; see buf.h. Growth doubles, so appends are
 * amortised O(1); consume moves the tail down, which is cheap because callers
 * consume whole frames and the remainder is usually short. */
#include "core/buf.h"
#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kbuf_init(kbuf *b) {
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

void kbuf_close(kbuf *b) {
    free(b->p);
    kbuf_init(b);
}

int kbuf_reserve(kbuf *b, size_t extra) {
    if (extra > (size_t)-1 - b->len) return b->oom = 1, KEEL_ENOMEM;
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) return b->oom = 1, KEEL_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int kbuf_append(kbuf *b, const void *data, size_t n) {
    if (n == 0) return 0;
    int rc = kbuf_reserve(b, n);
    if (rc) return rc;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

int kbuf_appendstr(kbuf *b, const char *s) {
    return kbuf_append(b, s, strlen(s));
}

int kbuf_printf(kbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return KEEL_EINVAL;
    int rc = kbuf_reserve(b, (size_t)n + 1);
    if (rc) return rc;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void kbuf_consume(kbuf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

void kbuf_shrink(kbuf *b, size_t keep) {
    if (keep < b->len) keep = b->len;
    if (b->cap <= keep) return;
    if (keep == 0) {
        kbuf_close(b);
        return;
    }
    char *p = realloc(b->p, keep);
    if (p) {
        b->p = p;
        b->cap = keep;
    }
}
