/* notleader.h - the error a standby coordinator answers with, naming the
 * leader (issue 12, "finding the leader"; DESIGN.md §13).
 *
 * A coordinator that takes part in an election (--id) but does not lead
 * listens on its --port anyway and answers EVERY request, admin or node,
 * authenticated or not, with one RESP error:
 *
 *   -NOTLEADER leader=ID addr=HOST:PORT        who leads, and where it serves
 *   -NOTLEADER leader=? addr=?                 no coordinator is known to lead
 *
 * and executes nothing. Nodes (node/coordlink.c) and the CLI (cli/admin.c)
 * redial the named address at once; with no address named they go on down
 * their --coord list as after a refused connection.
 *
 * Threads: pure functions, callable from any thread.
 */
#ifndef KEEL_NOTLEADER_H
#define KEEL_NOTLEADER_H

#include "core/addrlist.h"

#include <stddef.h>

#define NOTLEADER_PREFIX "NOTLEADER "

/* Writes the error text (without the leading '-') into buf[cap]: id and addr
 * may be NULL or "" when no leader is known. Returns buf. */
const char *notleader_format(char *buf, size_t cap, const char *id, const char *addr);

/* Parses an error reply's text s[len] (hiredis' r->str, without '-').
 * Returns 0 with *out (and id[idcap] when id is not NULL) set when it is a
 * NOTLEADER error naming an address; KEEL_ENOTFOUND when it is one that
 * names none (leader=?); KEEL_EINVAL when it is not a NOTLEADER error or its
 * address is malformed. */
int notleader_parse(const char *s, size_t len, addrlist_entry *out, char *id, size_t idcap);

/* The index of host:port in l; when absent it is appended (if l has room)
 * and its new index returned. -1 when absent and l is full. */
int addrlist_find_or_add(addrlist *l, const addrlist_entry *e);

#endif
