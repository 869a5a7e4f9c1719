/* addrlist.c - see addrlist.h. */
#include "core/addrlist.h"
#include "core/err.h"
#include "core/num.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int bad(addrlist *out, char *err, size_t cap, const char *what, const char *el, size_t len) {
    out->n = 0;
    if (cap) snprintf(err, cap, "%s in '%.*s'", what, (int)(len > 300 ? 300 : len), el);
    return KEEL_EINVAL;
}

static int parse_one(const char *el, size_t len, addrlist_entry *e, addrlist *out, char *err,
                     size_t cap) {
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
        if (el[i] == ' ' || el[i] == '\t' || el[i] == '\r' || el[i] == '\n')
            return bad(out, err, cap, "blank in address", el, len);
        if (el[i] == ':') colon = el + i;
    }
    if (!colon) return bad(out, err, cap, "address must be HOST:PORT", el, len);
    size_t hlen = (size_t)(colon - el), plen = len - hlen - 1;
    if (hlen == 0) return bad(out, err, cap, "empty host", el, len);
    if (hlen > ADDRLIST_HOST_MAX) return bad(out, err, cap, "host too long", el, len);
    uint64_t port;
    if (keel_parse_u64(colon + 1, plen, &port) || port == 0 || port > 65535)
        return bad(out, err, cap, "port must be 1..65535", el, len);
    memcpy(e->host, el, hlen);
    e->host[hlen] = 0;
    e->port = (int)port;
    return 0;
}

int addrlist_parse(const char *s, addrlist *out, char *err, size_t cap) {
    out->n = 0;
    if (!s || !*s) return bad(out, err, cap, "empty address list", "", 0);
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == ADDRLIST_MAX) {
            out->n = 0;
            if (cap) snprintf(err, cap, "more than %d addresses in '%.300s'", ADDRLIST_MAX, s);
            return KEEL_EINVAL;
        }
        if (len == 0) {
            if (cap) snprintf(err, cap, "empty address (number %d) in '%.300s'", n + 1, s);
            return KEEL_EINVAL;
        }
        int rc = parse_one(p, len, &out->a[n], out, err, cap);
        if (rc) return rc;
        n++;
        if (!comma) break;
        p = comma + 1;
    }
    out->n = n;
    return 0;
}

const char *addrlist_format(const addrlist *l, char *buf, size_t cap) {
    if (!cap) return buf;
    buf[0] = 0;
    size_t used = 0;
    for (int i = 0; i < l->n && used < cap; i++) {
        int w =
            snprintf(buf + used, cap - used, "%s%s:%d", i ? "," : "", l->a[i].host, l->a[i].port);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}
