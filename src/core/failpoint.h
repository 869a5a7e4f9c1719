/* failpoint.h - named failpoints for fault-injection tests (DESIGN.md §6,
 * issue 5).
 *
 * A failpoint is a name such as "move.after_fence" that code passes to
 * failpoint_hit() (or FAILPOINT()) at a phase boundary. Until a test or an
 * operator enables it, the call costs one load and one branch and does
 * nothing. Enabled, it does one of:
 *
 *   crash       log, then _exit(KEEL_FAILPOINT_EXIT_CODE): no atexit
 *               handlers, no stdio flush, no RocksDB close - as close to
 *               kill -9 as a process can do to itself, but with a log line.
 *   pause(MS)   log, then sleep MS milliseconds on the calling thread. This
 *               blocks the event loop on purpose: it simulates a stall.
 *   error       log, then return FP_ERROR; the caller takes its failure path.
 *   off         disable.
 *
 * Grammar of a spec (no whitespace inside it):
 *
 *   spec   := [count "*"] action
 *   action := "off" | "crash" | "error" | "pause(" ms ")"
 *   count  := 1..FAILPOINT_COUNT_MAX, decimal   (fire that many times, then off)
 *   ms     := 0..FAILPOINT_PAUSE_MAX_MS, decimal
 *
 * "off" takes no count. Without a count a failpoint fires on every hit.
 *
 * Names are free-form, [a-z0-9._-]{1,FAILPOINT_NAME_MAX}, so a new failpoint
 * needs no registration: the code that hits it is the only declaration.
 * Hitting a name nobody enabled is FP_NONE.
 *
 * Sources: failpoint_set() (an authenticated admin command) and
 * failpoint_load_env() with the value of $KEEL_FAILPOINTS, e.g.
 *
 *   KEEL_FAILPOINTS="move.after_fence=crash;move.before_commit=2*pause(500)"
 *
 * Threads: the registry is process-wide, guarded by a mutex: any thread may
 * set, list or hit failpoints (the coordinator's map store hits them on its
 * worker thread). FAILPOINT()'s fast path reads the count unlocked; a hit
 * racing a set may miss it.
 */
#ifndef KEEL_FAILPOINT_H
#define KEEL_FAILPOINT_H

#include <stddef.h>

/* Exit status of a process stopped by a "crash" failpoint. Tests tell it
 * apart from a real crash (a signal) and from a clean exit (0 or 1). */
#define KEEL_FAILPOINT_EXIT_CODE 86
/* Environment variable read at startup; see failpoint_load_env(). */
#define FAILPOINT_ENV "KEEL_FAILPOINTS"
#define FAILPOINT_NAME_MAX 64 /* bytes, excluding the NUL */
#define FAILPOINT_MAX 64      /* failpoints enabled at once */
#define FAILPOINT_COUNT_MAX 1000000u
#define FAILPOINT_PAUSE_MAX_MS 600000u /* 10 minutes */

/* X(name, log name). One table, so actions and their names cannot disagree. */
#define FAILPOINT_ACTION_MAP(X)                                                                    \
    X(NONE, "none")                                                                                \
    X(CRASH, "crash")                                                                              \
    X(PAUSE, "pause")                                                                              \
    X(ERROR, "error")

/* FP_NONE is 0. */
typedef enum {
#define FAILPOINT_ACTION_ENUM(name, str) FP_##name,
    FAILPOINT_ACTION_MAP(FAILPOINT_ACTION_ENUM)
#undef FAILPOINT_ACTION_ENUM
} failpoint_action;

/* Number of failpoints enabled. Internal: read only by FAILPOINT() so that
 * an inert failpoint is one branch without a call. */
extern unsigned failpoint__enabled;

/* Enables name with spec, replacing its previous spec, or disables it for
 * "off" (disabling a name that is not enabled is not an error).
 * err/cap: on failure a one-line, NUL-terminated message is written there
 * (truncated to cap; err may be NULL when cap is 0). Both strings are
 * borrowed for the call only; the name is copied.
 * Returns 0, KEEL_EINVAL (bad name or bad spec; the registry is unchanged)
 * or KEEL_ELIMIT (FAILPOINT_MAX already enabled). */
int failpoint_set(const char *name, const char *spec, char *err, size_t cap);

/* Applies envval, a list of name=spec entries separated by ';'. Blanks
 * around names and specs and empty entries are ignored; a later entry for
 * the same name wins. Adds to what is already enabled. All or nothing:
 * every entry is checked before any is applied, so on error nothing
 * changes. envval NULL or empty is 0 and does nothing. err/cap as for
 * failpoint_set(); the message names the offending entry.
 * Returns 0, KEEL_EINVAL or KEEL_ELIMIT. */
int failpoint_load_env(const char *envval, char *err, size_t cap);

/* Called at a boundary. If name is not enabled, returns FP_NONE at once.
 * Otherwise logs "event=failpoint name=... action=..." at WARN, counts the
 * hit down (disabling it after its last one), and:
 *   crash: never returns;
 *   pause: sleeps, then returns FP_PAUSE (callers carry on as for FP_NONE);
 *   error: returns FP_ERROR, which the caller turns into its failure path.
 * name is borrowed for the call. */
failpoint_action failpoint_hit(const char *name);

/* The inline fast path: failpoint_hit() only when something is enabled.
 * Use as: if (FAILPOINT("move.before_commit") == FP_ERROR) goto fail; */
#define FAILPOINT(name) (failpoint__enabled ? failpoint_hit(name) : FP_NONE)

/* Renders the enabled failpoints into buf in $KEEL_FAILPOINTS form, in the
 * order they were first enabled, with the remaining count where one is set:
 * "move.after_fence=crash;move.before_commit=1*pause(500)". Empty if none.
 * Writes at most cap bytes, NUL-terminated when cap > 0; returns the length
 * the full text needs (as snprintf does), so a result >= cap means it was
 * truncated. */
size_t failpoint_list(char *buf, size_t cap);

/* Disables every failpoint. */
void failpoint_clear_all(void);

/* Static name of an action, e.g. "crash". Never NULL. */
const char *failpoint_action_name(failpoint_action a);

#endif
