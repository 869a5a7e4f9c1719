/* err.h - Keel error codes.
 *
 * Every fallible function returns 0 on success or a negative KEEL_E* code.
 * Names and messages come from one X-macro table, so they cannot disagree.
 */
#ifndef KEEL_ERR_H
#define KEEL_ERR_H

#include <stddef.h>

#define KEEL_ERRNO_MAP(X)                                                                          \
    X(NOMEM, "out of memory")                                                                      \
    X(INVAL, "invalid argument")                                                                   \
    X(PROTO, "protocol error")                                                                     \
    X(AGAIN, "need more data")                                                                     \
    X(LIMIT, "limit exceeded")                                                                     \
    X(IO, "i/o error")                                                                             \
    X(NOTFOUND, "not found")                                                                       \
    X(CORRUPT, "corrupt data")                                                                     \
    X(EXIST, "already exists")                                                                     \
    X(WRONGTYPE, "wrong type")                                                                     \
    X(RANGE, "value out of range")                                                                 \
    X(UNKNOWN, "outcome unknown")                                                                  \
    X(NOTLEADER, "not the leader")

enum {
    KEEL_OK = 0,
#define KEEL_ERR_ENUM(name, msg) KEEL_E##name,
    KEEL_EFIRST_ = -1000,
    KEEL_ERRNO_MAP(KEEL_ERR_ENUM)
#undef KEEL_ERR_ENUM
        KEEL_ELAST_
};

/* On a call whose result must not be ignored: every store and map store
 * call, whose errors are durability errors (issue 10, defect 5). The build
 * turns the warning into an error (-Werror=unused-result). */
#define KEEL_MUST_CHECK __attribute__((warn_unused_result))

/* Static message for a KEEL_E* code (or "unknown error"). Never NULL. */
const char *keel_strerror(int code);
/* Static upper-case name such as "KEEL_ENOMEM". Never NULL. */
const char *keel_errname(int code);
/* Formats a one-line reason into err[0..cap) (skipped when err is NULL or
 * cap is 0) and returns code: `return keel_errf(err, cap, KEEL_EINVAL,
 * "bad x: %s", v);`. */
int keel_errf(char *err, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
