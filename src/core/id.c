/* id.c - see id.h. */
#include "core/id.h"

#include <string.h>

static int id_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int keel_id_valid(const char *s, size_t len) {
    if (!s || len == 0 || len > KEEL_ID_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if (!id_char((unsigned char)s[i])) return 0;
    return 1;
}

int keel_id_validz(const char *s) {
    return s && keel_id_valid(s, strnlen(s, KEEL_ID_MAX + 1));
}

int keel_host_valid(const char *s, size_t len) {
    if (!s || len == 0 || len > KEEL_HOST_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!id_char(c) && c != ':' && c != '[' && c != ']') return 0;
    }
    return 1;
}

int keel_host_validz(const char *s) {
    return s && keel_host_valid(s, strnlen(s, KEEL_HOST_MAX + 1));
}
