/* buf.h - growable byte buffer.
 *
 * A kbuf owns its bytes. Readers consume from the front with kbuf_consume();
 * writers append at the back. Pointers into p are valid only until the next
 * call that may grow the buffer (any append or reserve).
 * Single-threaded: callers serialise access.
 */
#ifndef KEEL_BUF_H
#define KEEL_BUF_H

#include <stddef.h>

typedef struct kbuf {
    char *p;    /* owned; NULL when cap == 0 */
    size_t len; /* bytes in use, starting at p */
    size_t cap; /* bytes allocated */
    /* Set by any reserve or append that failed for want of memory, cleared
     * only by kbuf_init/kbuf_close or by the owner. A writer of a frame in
     * several appends may leave half a frame behind: an owner that sees oom
     * must not send the contents as they are (rserver closes the
     * connection). */
    int oom;
} kbuf;

void kbuf_init(kbuf *b);
/* Frees the bytes and resets to empty. */
void kbuf_close(kbuf *b);
/* Ensures room for extra more bytes. Returns 0 or KEEL_ENOMEM. */
int kbuf_reserve(kbuf *b, size_t extra);
/* Appends n bytes. Returns 0 or KEEL_ENOMEM (buffer unchanged). */
int kbuf_append(kbuf *b, const void *data, size_t n);
int kbuf_appendstr(kbuf *b, const char *s);
/* printf-style append. Returns 0 or KEEL_ENOMEM. */
int kbuf_printf(kbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops n bytes from the front (n <= len). */
void kbuf_consume(kbuf *b, size_t n);
/* Releases memory beyond max(len, keep) bytes, for idle connections. */
void kbuf_shrink(kbuf *b, size_t keep);

#endif
