/* mapstore_etcd.h - the map store on etcd (issue 12, DESIGN §13): the same
 * handle and contract as mapstore.h, kept under a key prefix of an etcd v3
 * cluster reached through its JSON gateway (coord/etcd_client.h).
 *
 * Layout (docs/mapstore.md has the details). Under the prefix:
 *   meta            cluster id, P, term, version, next move id, last write id
 *   parts/NNN       partitions NNN*256 .. NNN*256+255 (owner, epoch, pinned,
 *                   and replicas, ISR, leader and partition epoch when they
 *                   are not the RF 1 defaults; older entries read as RF 1)
 *   node/ID         one node
 *   move/NNNN...    one move (20-digit zero-padded id, so keys sort by id)
 *   set/NAME        one setting
 * Values are JSON; 64-bit numbers are JSON strings.
 *
 * Every mutating call is ONE etcd transaction (at most 65 operations and,
 * with ids of up to 64 bytes, well under 1.5 MiB except a bootstrap
 * placement of 16384 partitions with the longest ids; a transaction over
 * etcd's limits is refused before it is sent, with KEEL_ELIMIT) that
 * compares meta's mod revision with the one this handle last saw and
 * rewrites meta with a new write id. So a write applies only on top of the
 * state the handle validated it against; a write by anyone else in between
 * makes it fail (KEEL_EAGAIN: the handle then reloads everything).
 *
 * Outcome unknown. When a commit's answer does not come (timeout, broken
 * connection, etcd 5xx), the handle settles it at once: it sends a fence,
 * a transaction guarded by the same old revision that only rewrites meta.
 *   - the fence applies: the lost commit can never apply (its guard is
 *     stale now); the write is sent once more on the new revision (an etcd
 *     member lost, a raft election under way), and if that one is fenced
 *     off too, the call returns KEEL_EIO and nothing changed;
 *   - the fence is refused and meta carries the commit's write id: the
 *     commit applied; the call returns 0 as if it had answered;
 *   - anything else (the fence is lost too, or a third writer): the call
 *     returns KEEL_EUNKNOWN and the handle reloads before its next call.
 *     The caller must not treat KEEL_EUNKNOWN as "nothing changed".
 *
 * Threads and blocking: the HTTP runs on the client's worker thread, and
 * each backend call waits for its answer: a write at most 4 x (timeout_ms +
 * 250 ms) (the commit and its fence, twice) plus one reload. On a handle
 * made asynchronous (mapstore_async_start, mapstore.h) that wait is the map
 * store's worker thread's, never the caller's loop; reads are served from
 * memory. Handle use is one thread's at a time, as in mapstore.h.
 *
 * Errors besides mapstore.h's: KEEL_EUNKNOWN (above), KEEL_EAGAIN (the map
 * changed under this handle), KEEL_ELIMIT (a transaction over etcd's
 * limits), KEEL_EIO (etcd unreachable or refused the request: nothing
 * changed), KEEL_EPROTO (an answer that is not what etcd sends).
 *
 * Test hooks (failpoints, core/failpoint.h), each for the next commit:
 *   mapstore.commit            error: fail with KEEL_EIO before sending
 *   mapstore.etcd.drop         error: lose the request (it never applies)
 *   mapstore.etcd.lose_reply   error: send it, lose the answer (it applied)
 *   mapstore.etcd.move_commit.drop, mapstore.etcd.move_commit.lose_reply
 *                              the same, for mapstore_move_commit only
 *   mapstore.etcd.fence.drop   error: lose the settling fence too, so the
 *                              call returns KEEL_EUNKNOWN
 */
#ifndef KEEL_MAPSTORE_ETCD_H
#define KEEL_MAPSTORE_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "coord/mapstore.h"

#define MAPSTORE_ETCD_PREFIX_MAX 128
#define MAPSTORE_ETCD_DEFAULT_PREFIX "/keel/"
#define MAPSTORE_ETCD_DEFAULT_TIMEOUT_MS 2000
#define MAPSTORE_ETCD_CHUNK 256         /* partitions per parts/ key */
#define MAPSTORE_ETCD_MAX_OPS 128       /* etcd --max-txn-ops default */
#define MAPSTORE_ETCD_MAX_BYTES 1572864 /* etcd --max-request-bytes default */

/* Where the map lives. urls: "http://h:p[,http://h:p...]" (etcd_client.h);
 * prefix: 1..128 printable bytes ending in '/', e.g. "/keel/prod/";
 * timeout_ms: bound of one request (100..60000). */
typedef struct mapstore_etcd_config {
    const char *urls;
    const char *prefix;
    int timeout_ms;
} mapstore_etcd_config;

/* Creates a cluster map with P partitions under an EMPTY prefix (any key
 * under it, a Keel map or not, is refused with KEEL_EEXIST naming what is
 * there), in one transaction that also refuses if meta appeared meanwhile,
 * then opens it. Errors: KEEL_EINVAL (bad P, URL or prefix), KEEL_EEXIST,
 * KEEL_EIO, KEEL_EUNKNOWN (the creation's answer was lost: look at the
 * prefix before running it again), KEEL_ENOMEM. */
KEEL_MUST_CHECK int mapstore_etcd_create(const mapstore_etcd_config *cfg, unsigned partitions,
                                         int64_t now_ms, mapstore **out, char *err, size_t errcap);

/* Opens the map under the prefix, reading all of it once. Errors:
 * KEEL_ENOTFOUND (no meta key under the prefix), KEEL_EWRONGTYPE (meta is
 * not a Keel map), KEEL_ERANGE (a format this build does not know),
 * KEEL_ECORRUPT (keys missing or malformed), KEEL_EINVAL (bad arguments,
 * or expect differs), KEEL_EIO, KEEL_ENOMEM. Unlike SQLite, a second open
 * of the same prefix is not refused: concurrent writers are detected per
 * write (KEEL_EAGAIN), and leader election (not built yet) is what keeps
 * one writer. */
KEEL_MUST_CHECK int mapstore_etcd_open(const mapstore_etcd_config *cfg,
                                       const mapstore_expect *expect, mapstore **out, char *err,
                                       size_t errcap);

/* Guards every later write of ms by the leader key (PREFIX "leader") having
 * been created at revision leader_create_rev (coord_elect.h): a write after
 * the key was deleted or re-created by another coordinator fails with
 * KEEL_ENOTLEADER and changes nothing. 0 turns the guard off.
 * Errors: KEEL_EINVAL (not an etcd handle, negative revision). */
KEEL_MUST_CHECK int mapstore_etcd_set_guard(mapstore *ms, int64_t leader_create_rev);

/* 1 if ms is an etcd map store. */
int mapstore_is_etcd(const mapstore *ms);

/* How commits of an etcd handle ended, for tests and metrics. */
typedef struct mapstore_etcd_stats {
    uint64_t commits;         /* transactions that applied (answered or settled) */
    uint64_t conflicts;       /* refused: the map changed under the handle */
    uint64_t settled_applied; /* answer lost; the fence showed it applied */
    uint64_t settled_void;    /* answer lost; the fence made sure it never applies */
    uint64_t unknown;         /* could not be settled: KEEL_EUNKNOWN */
    uint64_t retries;         /* writes resent once after their lost copy was fenced off */
    uint64_t reloads;         /* full reads of the prefix */
} mapstore_etcd_stats;

/* Fills *st (zeros for a handle of another backend). */
void mapstore_etcd_get_stats(const mapstore *ms, mapstore_etcd_stats *st);

#endif
