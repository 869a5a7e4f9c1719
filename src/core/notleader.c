/* notleader.c - see notleader.h. */
#include "core/notleader.h"
#include "core/err.h"

#include <stdio.h>
#include <string.h>

const char *notleader_format(char *buf, size_t cap, const char *id, const char *addr) {
    if (!cap) return buf;
    snprintf(buf, cap, NOTLEADER_PREFIX "leader=%s addr=%s", id && *id ? id : "?",
             addr && *addr ? addr : "?");
    return buf;
}

/* The value of " key=" in s[len] up to the next blank, or NULL. */
static const char *field(const char *s, size_t len, const char *key, size_t *vlen) {
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl <= len; i++) {
        if ((i == 0 || s[i - 1] == ' ') && !memcmp(s + i, key, kl)) {
            size_t j = i + kl;
            while (j < len && s[j] != ' ')
                j++;
            *vlen = j - i - kl;
            return s + i + kl;
        }
    }
    return NULL;
}

int notleader_parse(const char *s, size_t len, addrlist_entry *out, char *id, size_t idcap) {
    size_t pl = strlen(NOTLEADER_PREFIX);
    if (!s || len < pl || memcmp(s, NOTLEADER_PREFIX, pl)) return KEEL_EINVAL;
    size_t al = 0, il = 0;
    const char *a = field(s + pl, len - pl, "addr=", &al);
    const char *i = field(s + pl, len - pl, "leader=", &il);
    if (id && idcap) snprintf(id, idcap, "%.*s", i ? (int)il : 1, i ? i : "?");
    if (!a || (al == 1 && a[0] == '?')) return KEEL_ENOTFOUND;
    char one[ADDRLIST_HOST_MAX + 16];
    if (al == 0 || al >= sizeof one) return KEEL_EINVAL;
    memcpy(one, a, al);
    one[al] = 0;
    addrlist l;
    if (addrlist_parse(one, &l, NULL, 0) || l.n != 1) return KEEL_EINVAL;
    *out = l.a[0];
    return 0;
}

int addrlist_find_or_add(addrlist *l, const addrlist_entry *e) {
    for (int k = 0; k < l->n; k++)
        if (l->a[k].port == e->port && !strcmp(l->a[k].host, e->host)) return k;
    if (l->n >= ADDRLIST_MAX) return -1;
    l->a[l->n] = *e;
    return l->n++;
}
