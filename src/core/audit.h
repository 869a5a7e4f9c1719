/* audit.h - an append-only audit log of authority (issue 12's tests 1-2):
 * every map-store write a coordinator makes and every directive a node
 * accepts, each with its term, one line each.
 *
 * `keel coord --audit-log FILE` and `keel node --audit-log FILE` open FILE
 * with O_APPEND (created 0600 if absent) and write each line with a single
 * write(2), so several processes may share one file and its line order is
 * the order the kernel appended them: a total order of every write and
 * every acceptance on one host. Lines (space-separated key=value, fixed
 * keys first):
 *
 *   ts_ms=WALL who=ID pid=PID kind=map_write op=OP term=T rc=RC version=V
 *   ts_ms=WALL who=ID pid=PID kind=directive_accepted via=VIA term=T seq=S
 *
 * op: "bump_term" (a coordinator's first write, which makes its term) or
 * "write" (any other map change); rc: 0, or the KEEL_E* name of the failure
 * (a deposed leader's writes fail with KEEL_ENOTLEADER and changed nothing).
 * term: the writing coordinator's term (for bump_term the term it made,
 * or 0 when it failed). via: "map" (a heartbeat reply carrying a map) or
 * "command" (a KEEL.MOVE.* or other coordinator command whose term was
 * admitted). A failed append is reported once on the log and never stops
 * the process: the audit log is evidence for tests and operators, not a
 * store of record.
 *
 * Threads: audit_open before other threads use it; audit_* from any
 * thread (each line is one write(2)).
 */
#ifndef KEEL_AUDIT_H
#define KEEL_AUDIT_H

#include <stddef.h>
#include <stdint.h>

/* Opens path for this process, naming lines with who. Returns 0, KEEL_EINVAL
 * (empty path or who) or KEEL_EIO with a reason in err[cap]. Without a call,
 * every audit_* below does nothing. */
int audit_open(const char *path, const char *who, char *err, size_t cap);
/* 1 once audit_open succeeded. */
int audit_enabled(void);
/* The term later map_write lines carry (the coordinator's, once made). */
void audit_set_term(uint64_t term);
/* A map-store write: op, its result (0 or KEEL_E*), and the map version after
 * it. term 0: the term audit_set_term set. */
void audit_map_write(const char *op, int rc, uint64_t term, uint64_t version);
/* A directive a node accepted. */
void audit_directive(const char *via, uint64_t term, uint64_t seq);
/* Closes the file (tests); audit_* then do nothing again. */
void audit_close(void);

#endif
