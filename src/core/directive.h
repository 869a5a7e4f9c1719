/* directive.h - admission of coordinator directives on a node (DESIGN.md §6
 * invariant I3, §9).
 *
 * A node keeps one directive_guard and asks it about every directive before
 * acting on it. The caller supplies what it knows from the connection and the
 * directive's header; the guard decides and remembers:
 *
 *   - from_coordinator: the directive arrived on a connection whose peer
 *     authenticated (peerauth) as the coordinator. Never taken from a field of
 *     the directive itself.
 *   - term: the coordinator term the directive carries.
 *   - seq: the directive's sequence number within that term. The coordinator
 *     numbers its directives strictly increasingly within a term, starting
 *     anywhere.
 *
 * Rules, checked in this order:
 *   1. not from the coordinator connection    -> DIRECTIVE_NOT_COORDINATOR
 *   2. term below the highest term accepted    -> DIRECTIVE_STALE_TERM
 *   3. term more than DIRECTIVE_TERM_JUMP_MAX above the highest term
 *      accepted (once one was)                 -> DIRECTIVE_TERM_JUMP
 *      (one directive could otherwise raise the guard to near 2^64 and lock
 *      every later coordinator out; the real coordinator's term rises by
 *      one per restart, so a node misses more than 1000 restarts only if it
 *      was away for all of them - it then needs its directive mark cleared
 *      by an operator, docs/security.md)
 *   4. same term, seq <= last accepted seq     -> DIRECTIVE_REPLAYED
 *      (a replay or a reordering; both are dropped)
 *   5. otherwise accept; a higher term replaces the highest term and starts a
 *      new sequence window at seq.
 * A rejected directive never changes the guard. Consequently no (term, seq)
 * is accepted twice and accepted terms never decrease.
 *
 * The guard is pure state: no I/O, no clock, no logging. The caller logs a
 * rejection at WARN with directive_verdict_name().
 *
 * Threads: owned by the node's event loop thread; not thread-safe.
 */
#ifndef KEEL_DIRECTIVE_H
#define KEEL_DIRECTIVE_H

#include <stdint.h>

/* X(name, log name). One table, so verdicts and names cannot disagree. */
#define DIRECTIVE_VERDICT_MAP(X)                                                                   \
    X(ACCEPT, "accepted")                                                                          \
    X(NOT_COORDINATOR, "not-coordinator")                                                          \
    X(STALE_TERM, "stale-term")                                                                    \
    X(REPLAYED, "replayed-directive")                                                              \
    X(TERM_JUMP, "term-jump")

/* How far one directive may raise the term over the highest one accepted. */
#define DIRECTIVE_TERM_JUMP_MAX 1000u

/* DIRECTIVE_ACCEPT is 0; every other verdict is a reason to drop. */
typedef enum {
#define DIRECTIVE_VERDICT_ENUM(name, str) DIRECTIVE_##name,
    DIRECTIVE_VERDICT_MAP(DIRECTIVE_VERDICT_ENUM)
#undef DIRECTIVE_VERDICT_ENUM
} directive_verdict;

typedef struct directive_guard directive_guard;

/* Returns a guard that has accepted nothing, or NULL on out-of-memory. Free
 * with directive_guard_free (NULL is a no-op). */
directive_guard *directive_guard_new(void);
void directive_guard_free(directive_guard *g);

/* Decides on one directive and, if it is accepted, records (term, seq).
 * Returns DIRECTIVE_ACCEPT or the reason it was rejected (see the rules
 * above). Never fails otherwise. */
directive_verdict directive_admit(directive_guard *g, int from_coordinator, uint64_t term,
                                  uint64_t seq);

/* Admission of a directive that carries a term but no sequence number: the
 * move directives, which are idempotent by move id, so a repeat is harmless
 * and must be answered again rather than dropped. Rules 1 to 3 above; a
 * higher term is accepted and becomes the highest term (with seq 0, so the
 * new coordinator's numbered directives still pass). */
directive_verdict directive_admit_term(directive_guard *g, int from_coordinator, uint64_t term);

/* Sets *term and *seq to the last accepted directive and returns 1, or
 * returns 0 (outputs untouched) if nothing has been accepted yet. Lets the
 * node persist the high-water mark. */
int directive_guard_last(const directive_guard *g, uint64_t *term, uint64_t *seq);

/* Seeds the guard as if (term, seq) had just been accepted, e.g. from a mark
 * the node persisted before a restart. Only moves forward: returns 0, or
 * KEEL_ERANGE (guard unchanged) if (term, seq) is not above the current
 * mark. */
int directive_guard_restore(directive_guard *g, uint64_t term, uint64_t seq);

/* Static kebab-case name for logs, e.g. "replayed-directive". Never NULL. */
const char *directive_verdict_name(directive_verdict v);

#endif
