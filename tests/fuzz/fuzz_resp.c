/* fuzz_resp.c - libFuzzer target for src/resp.
 *
 * The input is the byte stream itself, so corpus files are plain RESP. A hash
 * of the input seeds the choice of limits (defaults, or tiny ones so that
 * every limit is reachable in 4 KiB) and of the chunk sizes it is fed in.
 *
 * Invariants checked, for both resp_req and resp_reader:
 *  - consumed <= len; KEEL_EAGAIN consumes everything;
 *  - after KEEL_EPROTO every feed returns KEEL_EPROTO and consumes nothing;
 *  - results do not depend on the split: one whole feed and a chunked feed
 *    give the same frames and the same final status and error text;
 *  - requests: argc in 1..max_args, every argv[i] NUL-terminated at
 *    argvlen[i]; memory held for a partial request stays proportional to
 *    the bytes received; written back with resp_w_array/resp_w_bulk and
 *    parsed again, a request comes out identical;
 *  - values: well-formed trees within max_depth, strings NUL-terminated.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "resp/resp.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c);              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_u64(uint64_t h, uint64_t v) {
    return hash_bytes(h, &v, sizeof(v));
}

/* Chunk sizes: mostly tiny, sometimes large, so both paths are exercised. */
static size_t next_chunk(rng *r, size_t left) {
    uint64_t x = rng_next(r);
    size_t n = (x & 3) ? 1 + (x >> 8) % 8 : 1 + (x >> 8) % 512;
    return n < left ? n : left;
}

/* Outcome of parsing a stream: a hash of the frames, then how it ended. */
typedef struct outcome {
    uint64_t frames;
    int count;
    int rc;
    char err[128];
} outcome;

/* ---- Requests ------------------------------------------------------------ */

static uint64_t check_request(resp_req *p, const resp_limits *l, uint64_t h, kbuf *rewrite) {
    int argc = resp_req_argc(p);
    char **argv = resp_req_argv(p);
    const size_t *lens = resp_req_argvlen(p);
    CHECK(argc >= 1 && (size_t)argc <= l->max_args);
    CHECK(argv && lens);
    h = hash_u64(h, (uint64_t)argc);
    if (rewrite) CHECK(resp_w_array(rewrite, (size_t)argc) == 0);
    for (int i = 0; i < argc; i++) {
        CHECK(argv[i] && argv[i][lens[i]] == '\0');
        h = hash_u64(h, lens[i]);
        h = hash_bytes(h, argv[i], lens[i]);
        if (rewrite) CHECK(resp_w_bulk(rewrite, argv[i], lens[i]) == 0);
    }
    return h;
}

static void after_error(resp_req *p) {
    size_t c = 1;
    CHECK(resp_req_feed(p, "*1\r\n", 4, &c) == KEEL_EPROTO);
    CHECK(c == 0);
}

/* Feeds data whole (r == NULL) or in chunks, as a server would: unconsumed
 * bytes are kept and fed again with the next chunk. */
static void req_run(const uint8_t *data, size_t size, const resp_limits *l, rng *r, outcome *o,
                    kbuf *rewrite) {
    resp_req *p = resp_req_new(l);
    CHECK(p);
    kbuf in;
    kbuf_init(&in);
    size_t off = 0, since_ready = 0;
    memset(o, 0, sizeof(*o));
    o->frames = 14695981039346656037ull;
    o->rc = KEEL_EAGAIN;
    while (off < size || in.len) {
        size_t n = r ? next_chunk(r, size - off) : size - off;
        CHECK(kbuf_append(&in, data + off, n) == 0);
        off += n;
        since_ready += n;
        size_t c;
        int rc = resp_req_feed(p, in.p, in.len, &c);
        CHECK(c <= in.len);
        kbuf_consume(&in, c);
        if (rc == 1) {
            o->frames = check_request(p, l, o->frames, rewrite);
            o->count++;
            since_ready = in.len;
            continue;
        }
        if (rc == KEEL_EAGAIN) {
            CHECK(in.len == 0);
            /* Data, a partial line and argv grow with arrivals; allow for
             * doubling and for small buffers kept from earlier requests. */
            CHECK(resp_req_pending_bytes(p) <= 32 * since_ready + 64 * 1024);
            if (off == size) break;
            continue;
        }
        CHECK(rc == KEEL_EPROTO);
        CHECK(strncmp(resp_req_error(p), "Protocol error: ", 16) == 0);
        snprintf(o->err, sizeof(o->err), "%s", resp_req_error(p));
        o->rc = rc;
        after_error(p);
        break;
    }
    kbuf_close(&in);
    resp_req_free(p);
}

/* Parses a stream the writer produced: must give exactly want's frames. */
static void req_reparse(const kbuf *w, const outcome *want) {
    outcome o;
    resp_limits l;
    resp_limits_default(&l);
    req_run((const uint8_t *)w->p, w->len, &l, NULL, &o, NULL);
    CHECK(o.rc == KEEL_EAGAIN);
    CHECK(o.count == want->count);
    CHECK(o.frames == want->frames);
}

/* ---- Values -------------------------------------------------------------- */

static uint64_t check_value(const resp_value *v, int depth, const resp_limits *l, uint64_t h) {
    CHECK(v);
    CHECK(v->type >= RESP_T_SIMPLE && v->type <= RESP_T_PUSH);
    h = hash_u64(h, (uint64_t)v->type);
    switch (v->type) {
    case RESP_T_SIMPLE:
    case RESP_T_ERROR:
    case RESP_T_BULK:
    case RESP_T_BIGNUM:
    case RESP_T_VERBATIM:
    case RESP_T_BULKERR:
        CHECK(v->str && v->str[v->len] == '\0');
        CHECK(!v->elems);
        return hash_bytes(hash_u64(h, v->len), v->str, v->len);
    case RESP_T_INT:
    case RESP_T_BOOL:
        CHECK(v->type != RESP_T_BOOL || v->integer == 0 || v->integer == 1);
        return hash_u64(h, (uint64_t)v->integer);
    case RESP_T_DOUBLE:
        return hash_bytes(h, &v->dbl, sizeof(v->dbl));
    case RESP_T_NULL:
        return h;
    default:
        break;
    }
    CHECK(depth + 1 <= l->max_depth);
    size_t n = (v->type == RESP_T_MAP || v->type == RESP_T_ATTR) ? 2 * v->n : v->n;
    CHECK(n == 0 || v->elems);
    h = hash_u64(h, n);
    for (size_t i = 0; i < n; i++) {
        CHECK(v->elems[i]->type != RESP_T_ATTR);
        h = check_value(v->elems[i], depth + 1, l, h);
    }
    return h;
}

static void reader_run(const uint8_t *data, size_t size, const resp_limits *l, rng *r, outcome *o) {
    resp_reader *rd = resp_reader_new(l);
    CHECK(rd);
    size_t off = 0;
    memset(o, 0, sizeof(*o));
    o->frames = 14695981039346656037ull;
    o->rc = KEEL_EAGAIN;
    /* The reader needs no caller-side buffer: it keeps partial frames. */
    while (off < size) {
        size_t n = r ? next_chunk(r, size - off) : size - off;
        size_t used = 0;
        while (used < n) {
            size_t c;
            resp_value *v = (resp_value *)1;
            int rc = resp_reader_feed(rd, (const char *)data + off + used, n - used, &c, &v);
            CHECK(c <= n - used);
            used += c;
            if (rc == 1) {
                o->frames = check_value(v, 0, l, o->frames);
                o->count++;
                resp_value_free(v);
                continue;
            }
            CHECK(v == NULL);
            if (rc == KEEL_EAGAIN) {
                CHECK(used == n);
                break;
            }
            CHECK(rc == KEEL_EPROTO);
            snprintf(o->err, sizeof(o->err), "%s", resp_reader_error(rd));
            CHECK(o->err[0]);
            o->rc = rc;
            CHECK(resp_reader_feed(rd, "+OK\r\n", 5, &c, &v) == KEEL_EPROTO && c == 0);
            resp_reader_free(rd);
            return;
        }
        off += n;
    }
    resp_reader_free(rd);
}

static void same_outcome(const outcome *a, const outcome *b) {
    CHECK(a->rc == b->rc);
    CHECK(a->count == b->count);
    CHECK(a->frames == b->frames);
    CHECK(strcmp(a->err, b->err) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t seed = hash_bytes(14695981039346656037ull, data, size);
    rng r = {seed | 1};
    resp_limits l;
    resp_limits_default(&l);
    if (seed & 1) {
        /* Tiny limits so that each can be hit within -max_len. */
        l.max_bulk = 1 + (seed >> 8) % 64;
        l.max_args = 1 + (seed >> 16) % 16;
        l.max_inline = 1 + (seed >> 24) % 64;
        l.max_query = 1 + (seed >> 32) % 512;
        l.max_depth = (int)((seed >> 48) % 5);
    }

    outcome whole, chunked;
    kbuf w;
    kbuf_init(&w);
    req_run(data, size, &l, NULL, &whole, &w);
    req_run(data, size, &l, &r, &chunked, NULL);
    same_outcome(&whole, &chunked);
    req_reparse(&w, &whole);
    kbuf_close(&w);

    reader_run(data, size, &l, NULL, &whole);
    reader_run(data, size, &l, &r, &chunked);
    same_outcome(&whole, &chunked);
    return 0;
}
