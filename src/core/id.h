/* id.h - the one rule for node ids, and the one for hosts (issue 10,
 * defect 3).
 *
 * A node id travels everywhere: --id, the KEEL.AUTH handshake, the map store,
 * the map JSON every node parses, log lines, metric labels. One id that a
 * JSON writer or a log parser does not expect (a '"', a '\', a newline) used
 * to be enough to freeze the cluster: the coordinator printed it unescaped
 * into the map, and every node refused every later map. So ids are plain:
 *
 *   id   := [A-Za-z0-9._-]{1,KEEL_ID_MAX}
 *   host := [A-Za-z0-9._:\[\]-]{1,KEEL_HOST_MAX}   (names, IPv4, IPv6)
 *
 * enforced at --id, at registration (the id proven in KEEL.AUTH), in the
 * map store, and by the map codec on both sides. The map JSON is still
 * written with a real JSON writer (core/mapcodec), so the rule is not what
 * keeps it well formed; it keeps ids and hosts readable in logs, metrics
 * and URLs.
 *
 * Threads: pure; any thread.
 */
#ifndef KEEL_ID_H
#define KEEL_ID_H

#include <stddef.h>

#define KEEL_ID_MAX 64   /* bytes of a node id */
#define KEEL_HOST_MAX 64 /* bytes of a host name or address */

/* 1 if s[0..len) is a valid node id, else 0 (also for s NULL). */
int keel_id_valid(const char *s, size_t len);
/* The same for a NUL-terminated string. */
int keel_id_validz(const char *s);
/* 1 if s[0..len) is a valid host, else 0. */
int keel_host_valid(const char *s, size_t len);
int keel_host_validz(const char *s);

/* The rule, for error messages: "[A-Za-z0-9._-]{1,64}". */
#define KEEL_ID_RULE "[A-Za-z0-9._-]{1,64}"

#endif
