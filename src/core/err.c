/* err.c - message and name lookup for the KEEL_E* table in err.h. */
#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>

const char *keel_strerror(int code) {
    switch (code) {
    case KEEL_OK:
        return "ok";
#define KEEL_ERR_MSG(name, msg)                                                                    \
    case KEEL_E##name:                                                                             \
        return msg;
        KEEL_ERRNO_MAP(KEEL_ERR_MSG)
#undef KEEL_ERR_MSG
    default:
        return "unknown error";
    }
}

const char *keel_errname(int code) {
    switch (code) {
    case KEEL_OK:
        return "KEEL_OK";
#define KEEL_ERR_NAME(name, msg)                                                                   \
    case KEEL_E##name:                                                                             \
        return "KEEL_E" #name;
        KEEL_ERRNO_MAP(KEEL_ERR_NAME)
#undef KEEL_ERR_NAME
    default:
        return "KEEL_EUNKNOWN";
    }
}

int keel_errf(char *err, size_t cap, int code, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}
