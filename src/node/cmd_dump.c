/* cmd_dump.c - DUMP and RESTORE with a keel payload framed as redis frames
 * its own: the value, then a 2-byte format version and a CRC-64/Jones of
 * everything before it (core/crc64.h), both little-endian.
 *
 * Payload (format version 1; keel's, not RDB: a redis-server cannot read
 * it and keel cannot read redis'):
 *
 *   offset  size  field
 *   0       1     'K' (0x4b), so a redis RDB payload is told apart
 *   1       1     type: STORE_T_STRING, _HASH, _SET, _ZSET or _LIST
 *   string: 2     the value bytes, to the trailer
 *   other:  2     u32 BE n (>= 1), then n times:
 *                   u32 BE flen, field bytes, u32 BE vlen, value bytes
 *                 (the key's field records as stored, in field order: hash
 *                 fields and values, set members, sorted-set members and
 *                 their 8-byte scores, list index records and elements)
 *   len-10  2     format version, u16 LE (1)
 *   len-8   8     CRC-64 of bytes [0, len-8), u64 LE
 *
 * RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f] checks
 * its options, the key (-BUSYKEY unless REPLACE), the TTL, then the
 * trailer ("ERR DUMP payload version or checksum are wrong" for a version
 * above 1, a bad CRC or a payload under 10 bytes), then the body ("ERR Bad
 * data format": fields out of order or repeated, a list whose index records
 * are not consecutive, a score that is not 8 bytes or is NaN, trailing
 * bytes), in redis' order. A TTL already past deletes the key (with
 * REPLACE) and replies +OK, as redis. IDLETIME and FREQ set the key's
 * access clock (access.h) for OBJECT IDLETIME / OBJECT FREQ.
 * The key is written in one txn with db_copy_value (db.h), like COPY.
 */
#include "node/cmd.h"
#include "core/crc64.h"
#include "core/err.h"
#include "node/access.h"
#include "node/db.h"
#include "node/dump.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DUMP_MAGIC 0x4b
#define DUMP_VERSION 1
#define TRAILER 10

static int put_u32(kbuf *b, size_t n) {
    unsigned char p[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                          (unsigned char)(n >> 8), (unsigned char)n};
    return kbuf_append(b, p, 4);
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int add_trailer(kbuf *b) {
    unsigned char v[2] = {DUMP_VERSION & 0xff, DUMP_VERSION >> 8};
    int rc = kbuf_append(b, v, 2);
    if (rc) return rc;
    uint64_t crc = keel_crc64(0, b->p, b->len);
    unsigned char c[8];
    for (int i = 0; i < 8; i++)
        c[i] = (unsigned char)(crc >> (8 * i));
    return kbuf_append(b, c, 8);
}

int dump_payload(cmd_ctx *x, const char *k, size_t kl, kbuf *out, int64_t *expire_ms) {
    store_value sv;
    flist l;
    int rc = db_load_value(x, k, kl, &sv, &l);
    if (rc) {
        flist_free(&l);
        return rc;
    }
    *expire_ms = sv.expire_ms;
    kbuf *b = out;
    b->len = 0;
    unsigned char hdr[2] = {DUMP_MAGIC, sv.type};
    rc = kbuf_append(b, hdr, 2);
    if (!rc && sv.type == STORE_T_STRING) {
        rc = kbuf_append(b, sv.data, sv.len);
    } else if (!rc) {
        rc = put_u32(b, l.n);
        for (size_t i = 0; i < l.n && !rc; i++) {
            rc = put_u32(b, l.e[i].fl);
            if (!rc) rc = kbuf_append(b, flist_f(&l, i), l.e[i].fl);
            if (!rc) rc = put_u32(b, l.e[i].vl);
            if (!rc) rc = kbuf_append(b, flist_v(&l, i), l.e[i].vl);
        }
    }
    if (!rc) rc = add_trailer(b);
    store_value_release(&sv);
    flist_free(&l);
    return rc;
}

void cmd_dump(cmd_ctx *x) {
    kbuf b;
    kbuf_init(&b);
    int64_t expire_ms;
    int rc = dump_payload(x, x->argv[1], x->argvlen[1], &b, &expire_ms);
    if (rc == KEEL_ENOTFOUND)
        resp_w_null(x->out, x->proto);
    else if (rc)
        reply_storage(x, rc);
    else
        resp_w_bulk(x->out, b.p, b.len);
    kbuf_close(&b);
}

/* redis' verifyDumpPayload: the version and the CRC. */
static int verify(const unsigned char *p, size_t len) {
    if (len < TRAILER) return -1;
    unsigned ver = p[len - 10] | (unsigned)p[len - 9] << 8;
    if (ver > DUMP_VERSION) return -1;
    uint64_t crc = 0;
    for (int i = 7; i >= 0; i--)
        crc = crc << 8 | p[len - 8 + i];
    return keel_crc64(0, p, len - 8) == crc ? 0 : -1;
}

static int bytes_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* Parses the body p[0..len) (trailer excluded) into *type, *str (a string's
 * value) or l. Returns 0, or -1 for a bad format. */
static int parse_body(const unsigned char *p, size_t len, uint8_t *type, const char **str,
                      size_t *strlen_out, flist *l) {
    if (len < 2 || p[0] != DUMP_MAGIC) return -1;
    *type = p[1];
    if (*type == STORE_T_STRING) {
        *str = (const char *)p + 2, *strlen_out = len - 2;
        return 0;
    }
    if (*type != STORE_T_HASH && *type != STORE_T_SET && *type != STORE_T_ZSET &&
        *type != STORE_T_LIST)
        return -1;
    size_t pos = 2;
    if (len - pos < 4) return -1;
    uint32_t n = get_u32(p + pos);
    pos += 4;
    if (n == 0) return -1;
    uint64_t prev_idx = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (len - pos < 4) return -1;
        uint32_t fl = get_u32(p + pos);
        pos += 4;
        if (len - pos < fl) return -1;
        const char *f = (const char *)p + pos;
        pos += fl;
        if (len - pos < 4) return -1;
        uint32_t vl = get_u32(p + pos);
        pos += 4;
        if (len - pos < vl) return -1;
        const char *v = (const char *)p + pos;
        pos += vl;
        if (i && bytes_cmp(flist_f(l, i - 1), l->e[i - 1].fl, f, fl) >= 0) return -1;
        if (*type == STORE_T_LIST) {
            if (fl != 8) return -1;
            uint64_t idx = 0;
            for (int k = 0; k < 8; k++)
                idx = idx << 8 | (unsigned char)f[k];
            if (i && idx != prev_idx + 1) return -1;
            prev_idx = idx;
        }
        if (*type == STORE_T_ZSET) {
            if (vl != 8) return -1;
            uint64_t u = 0;
            for (int k = 0; k < 8; k++)
                u = u << 8 | (unsigned char)v[k];
            double d;
            memcpy(&d, &u, 8);
            if (isnan(d)) return -1;
        }
        if (flist_add(l, f, fl, v, vl)) return -2;
    }
    return pos == len ? 0 : -1;
}

void cmd_restore(cmd_ctx *x) {
    int replace = 0, absttl = 0, have_idle = 0, have_freq = 0;
    long long idle = 0, freq = 0;
    for (int j = 4; j < x->argc; j++) {
        int more = x->argc - j - 1;
        long long v;
        if (arg_is(x, j, "replace")) {
            replace = 1;
        } else if (arg_is(x, j, "absttl")) {
            absttl = 1;
        } else if (arg_is(x, j, "idletime") && more >= 1 && !have_freq) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &v)) {
                reply_not_int(x);
                return;
            }
            if (v < 0) {
                reply_err(x, "ERR Invalid IDLETIME value, must be >= 0");
                return;
            }
            have_idle = 1, idle = v, j++;
        } else if (arg_is(x, j, "freq") && more >= 1 && !have_idle) {
            if (arg_ll(x->argv[j + 1], x->argvlen[j + 1], &v)) {
                reply_not_int(x);
                return;
            }
            if (v < 0 || v > 255) {
                reply_err(x, "ERR Invalid FREQ value, must be >= 0 and <= 255");
                return;
            }
            have_freq = 1, freq = v, j++;
        } else {
            reply_syntax(x);
            return;
        }
    }
    const char *k = x->argv[1];
    size_t kl = x->argvlen[1];
    store_value cur;
    int rc = db_get(x, NULL, k, kl, &cur);
    if (rc == 0) {
        store_value_release(&cur);
        if (!replace) {
            reply_err(x, "BUSYKEY Target key name already exists.");
            return;
        }
    } else if (rc != KEEL_ENOTFOUND) {
        reply_storage(x, rc);
        return;
    }
    long long ttl;
    if (arg_ll(x->argv[2], x->argvlen[2], &ttl)) {
        reply_not_int(x);
        return;
    }
    if (ttl < 0) {
        reply_err(x, "ERR Invalid TTL value, must be >= 0");
        return;
    }
    const unsigned char *p = (const unsigned char *)x->argv[3];
    size_t len = x->argvlen[3];
    if (verify(p, len)) {
        reply_err(x, "ERR DUMP payload version or checksum are wrong");
        return;
    }
    uint8_t type = 0;
    const char *str = NULL;
    size_t slen = 0;
    flist l;
    flist_init(&l);
    int pr = parse_body(p, len - TRAILER, &type, &str, &slen, &l);
    if (pr) {
        flist_free(&l);
        if (pr == -2)
            reply_storage(x, KEEL_ENOMEM);
        else
            reply_err(x, "ERR Bad data format");
        return;
    }
    if (ttl && !absttl) {
        if (ttl > INT64_MAX - x->now_ms) ttl = INT64_MAX - x->now_ms; /* redis overflows; clamp */
        ttl += x->now_ms;
    }
    store_txn *t = store_txn_begin(x->srv->st);
    if (ttl && ttl <= x->now_ms) { /* already expired: nothing to create */
        rc = replace ? db_del(x, t, k, kl, NULL) : 0;
    } else {
        store_value sv = {.type = type, .data = str, .len = slen};
        rc = db_copy_value(x, t, &sv, &l, k, kl, ttl);
    }
    flist_free(&l);
    if (db_finish(x, t, rc)) return;
    /* the clock is advisory: out of memory here leaves it unset, the key is written */
    if (have_freq)
        (void)access_set_freq(x, k, kl, (int)freq);
    else
        (void)access_set_idle(x, k, kl, idle);
    reply_ok(x);
}
