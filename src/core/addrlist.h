/* addrlist.h - a list of coordinator addresses, HOST:PORT[,HOST:PORT...]
 * (issue 12, "finding the leader").
 *
 * Nodes (--coord) and the CLI (--coord) take the addresses of every
 * coordinator and try them in order; a standby answers with -NOTLEADER
 * naming the leader (core/notleader.h), which the client dials next.
 *
 * Grammar (the whole string, nothing skipped):
 *
 *   list := addr ("," addr)*          1 to ADDRLIST_MAX addresses
 *   addr := host ":" port             host: 1..255 bytes, no ',' nor blank;
 *                                     the port is the text after the LAST
 *                                     ':' (decimal, 1..65535, core/num)
 *
 * An empty element ("a:1,,b:2", a trailing ","), a missing or bad port, a
 * host too long or more than ADDRLIST_MAX addresses are refused, with a
 * message naming the offending element.
 *
 * Threads: pure functions, callable from any thread.
 */
#ifndef KEEL_ADDRLIST_H
#define KEEL_ADDRLIST_H

#include <stddef.h>

#define ADDRLIST_MAX 16
#define ADDRLIST_HOST_MAX 255

typedef struct addrlist_entry {
    char host[ADDRLIST_HOST_MAX + 1];
    int port;
} addrlist_entry;

typedef struct addrlist {
    int n; /* 1..ADDRLIST_MAX once parsed */
    addrlist_entry a[ADDRLIST_MAX];
} addrlist;

/* Parses s into *out. Returns 0, or KEEL_EINVAL with a one-line reason in
 * err[cap] (err may be NULL when cap is 0); *out is then left with n == 0. */
int addrlist_parse(const char *s, addrlist *out, char *err, size_t cap);

/* Writes "h1:p1,h2:p2,..." into buf[cap] (truncated, always terminated
 * when cap > 0). Returns buf. */
const char *addrlist_format(const addrlist *l, char *buf, size_t cap);

#endif
