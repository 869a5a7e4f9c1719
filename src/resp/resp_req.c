/* resp_req.c - the server-side request parser; see resp.h.
 *
 * Design. A byte-driven state machine that never looks back at bytes it has
 * consumed, so a request may be split at any byte. Header numbers ("*3",
 * "$5") are validated and overflow-checked digit by digit against their
 * limit, so a bad header fails at its first bad byte instead of waiting for a
 * CRLF, and every verdict is the same however the stream was split (the
 * fuzzer checks this by comparing one whole feed with a chunked one).
 *
 * Memory. Argument bytes are copied once, straight from the fed buffer, into
 * one arena (p->arena), each followed by a NUL, in order. argv[] is filled
 * only when the request is complete, from the lengths, because the arena may
 * move while it grows. The arena, argv and argvlen are reused across
 * requests, so a steady stream of small requests does no allocation at all.
 * They grow with the arguments that have actually arrived, never with a
 * declared count or length, and are released after a request that made them
 * large, so one big request does not pin memory for the connection's life.
 *
 * Invariants: arena.len == sum over completed args of (argvlen[i] + 1), plus
 * the bytes copied so far of the argument in progress; argc <= argv_cap.
 */
#include "resp/resp.h"
#include "core/err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kept across requests up to these sizes; anything larger is freed when the
 * request that needed it is done. */
#define REQ_KEEP_ARGV 1024
#define REQ_KEEP_ARENA (256 * 1024)
#define REQ_KEEP_LINE (16 * 1024)
#define REQ_ARGV_MIN 16

void resp_limits_default(resp_limits *l) {
    l->max_bulk = 512u * 1024 * 1024;
    l->max_args = 1048576;
    l->max_inline = 64 * 1024;
    l->max_query = 1024u * 1024 * 1024;
    l->max_depth = 7;
}

enum req_state {
    REQ_START,     /* between requests: the next byte picks multibulk or inline */
    REQ_MB_COUNT,  /* inside "*<count>\r\n" */
    REQ_BULK_TYPE, /* expecting the '$' of the next argument */
    REQ_BULK_LEN,  /* inside "$<len>\r\n" */
    REQ_BULK_DATA, /* copying argument bytes */
    REQ_BULK_CR,   /* expecting the '\r' after the argument */
    REQ_BULK_LF,   /* expecting the '\n' after the argument */
    REQ_INLINE,    /* gathering an inline line in p->line */
    REQ_DEAD,      /* after a protocol error */
};

/* A header number being read digit by digit. */
typedef struct hdr_num {
    uint64_t val;
    size_t len;  /* bytes of the line so far, type byte included, CR excluded */
    int ndigits; /* digits seen */
    int neg;     /* saw a leading '-' */
    int cr;      /* saw the '\r'; the '\n' must follow */
} hdr_num;

struct resp_req {
    resp_limits lim;
    enum req_state state;
    int ready;           /* the last feed returned 1; reset on the next feed */
    hdr_num num;         /* header being parsed */
    long long args_left; /* multibulk arguments still expected */
    size_t bulk_left;    /* bytes of the current argument not yet copied */
    size_t req_bytes;    /* wire bytes of this request accounted so far */
    int argc;            /* completed arguments */
    size_t argv_cap;     /* entries allocated in argv and argvlen */
    char **argv;         /* filled only when the request is complete */
    size_t *argvlen;
    kbuf arena; /* argument bytes, each NUL-terminated, in order */
    kbuf line;  /* a partial inline line */
    const char *err;
    char errbuf[64];
};

/* ---- Helpers ------------------------------------------------------------ */

static int req_fail(resp_req *p, const char *msg) {
    p->err = msg;
    p->state = REQ_DEAD;
    return KEEL_EPROTO;
}

/* Drops the request just returned and trims buffers a big request grew. */
static void req_reset(resp_req *p) {
    p->ready = 0;
    p->argc = 0;
    p->req_bytes = 0;
    p->arena.len = 0;
    if (p->arena.cap > REQ_KEEP_ARENA) kbuf_close(&p->arena);
    if (p->line.cap > REQ_KEEP_LINE) kbuf_close(&p->line);
    if (p->argv_cap > REQ_KEEP_ARGV) {
        free(p->argv);
        free(p->argvlen);
        p->argv = NULL;
        p->argvlen = NULL;
        p->argv_cap = 0;
    }
}

/* Makes room for one more argument; growth follows arrivals, so a declared
 * count of a million allocates nothing until arguments actually come. */
static int req_argv_grow(resp_req *p) {
    if ((size_t)p->argc < p->argv_cap) return 0;
    size_t cap = p->argv_cap ? p->argv_cap * 2 : REQ_ARGV_MIN;
    char **argv = realloc(p->argv, cap * sizeof(*argv));
    if (!argv) return KEEL_ENOMEM;
    p->argv = argv;
    size_t *lens = realloc(p->argvlen, cap * sizeof(*lens));
    if (!lens) return KEEL_ENOMEM; /* argv is larger than argv_cap says: harmless */
    p->argvlen = lens;
    p->argv_cap = cap;
    return 0;
}

/* kbuf_reserve, minus the call when there is room already (the usual case). */
static inline int arena_room(resp_req *p, size_t n) {
    return p->arena.cap - p->arena.len >= n ? 0 : kbuf_reserve(&p->arena, n);
}

/* The request in the arena is complete: point argv into it. */
static int req_finish(resp_req *p) {
    size_t off = 0;
    for (int i = 0; i < p->argc; i++) {
        p->argv[i] = p->arena.p + off;
        off += p->argvlen[i] + 1;
    }
    p->ready = 1;
    p->state = REQ_START;
    return 1;
}

/* An empty request ("*0", "*-1", "*-10", a blank inline line) is skipped. */
static void req_skip_empty(resp_req *p) {
    p->argc = 0;
    p->req_bytes = 0;
    p->arena.len = 0;
    p->state = REQ_START;
}

enum { HDR_MORE, HDR_DONE, HDR_BAD, HDR_TOOBIG };

/* Reads header digits up to and including the CRLF. The value must be at
 * most max, or -max_neg..-1 when negative (max_neg == 0: no '-' allowed).
 * Like redis's string2ll: no '+', no leading zeros, no "-0". */
static int hdr_parse(hdr_num *h, const char *buf, size_t len, size_t *pos, uint64_t max,
                     uint64_t max_neg, size_t max_line) {
    size_t i = *pos;
    int rc = HDR_MORE;
    while (i < len) {
        unsigned char c = (unsigned char)buf[i];
        if (h->cr) {
            rc = (c == '\n' && h->ndigits) ? HDR_DONE : HDR_BAD;
            i += rc == HDR_DONE;
            break;
        }
        if (c == '\r') {
            h->cr = 1;
            i++;
            continue;
        }
        if (++h->len > max_line) {
            rc = HDR_TOOBIG;
            break;
        }
        if (c == '-' && h->len == 2 && max_neg) {
            h->neg = 1;
            i++;
            continue;
        }
        uint64_t d = (uint64_t)c - '0';
        uint64_t lim = h->neg ? max_neg : max;
        if (d > 9 || (h->ndigits && h->val == 0) || (h->neg && !h->ndigits && d == 0) || d > lim ||
            h->val > (lim - d) / 10) {
            rc = HDR_BAD;
            break;
        }
        h->val = h->val * 10 + d;
        h->ndigits++;
        i++;
    }
    *pos = i;
    return rc;
}

static void hdr_start(hdr_num *h) {
    memset(h, 0, sizeof(*h));
    h->len = 1; /* the type byte */
}

/* ---- States --------------------------------------------------------------
 * Each step consumes what it can from buf[*pos..len) and returns KEEL_EAGAIN
 * to go on, 1 when a request is complete, or an error. */

/* ---- Fast path -----------------------------------------------------------
 * Most requests arrive whole and plain. req_fast parses such a request in
 * one tight pass; on anything else (incomplete, unusual or invalid) it undoes
 * its work and returns 0, and the state machine parses the same bytes from
 * the same position. So it never decides an error, and the state machine
 * alone defines the protocol: the fast path only has to accept a subset of
 * what the state machine accepts, with identical results and limits. */

/* Reads "<type><digits>\r\n" with 1..18 digits, no leading zero (but "0"),
 * value <= max and the line within max_line. Returns 1 and advances *s, or 0. */
static int fast_num(const char **s, const char *end, char type, uint64_t max, size_t max_line,
                    uint64_t *out) {
    const char *c = *s;
    if (end - c < 4 || c[0] != type || c[1] < '0' || c[1] > '9') return 0;
    uint64_t v = 0;
    const char *d = c + 1;
    for (; d < end && *d >= '0' && *d <= '9'; d++) {
        if (d - c > 18) return 0;
        v = v * 10 + (uint64_t)(*d - '0');
    }
    if (end - d < 2 || d[0] != '\r' || d[1] != '\n' || v > max || (size_t)(d - c) > max_line ||
        (c[1] == '0' && d != c + 2))
        return 0;
    *s = d + 2;
    *out = v;
    return 1;
}

static int req_fast(resp_req *p, const char *buf, size_t len, size_t *pos) {
    const char *start = buf + *pos, *s = start, *end = buf + len;
    uint64_t count, n;
    if (!fast_num(&s, end, '*', p->lim.max_args, p->lim.max_inline, &count) || count == 0) return 0;
    for (uint64_t i = 0; i < count; i++) {
        if (!fast_num(&s, end, '$', p->lim.max_bulk, p->lim.max_inline, &n)) goto bail;
        if ((uint64_t)(end - s) < n + 2 || s[n] != '\r' || s[n + 1] != '\n') goto bail;
        if (req_argv_grow(p) || arena_room(p, n + 1)) goto bail;
        memcpy(p->arena.p + p->arena.len, s, n);
        p->arena.len += n;
        p->arena.p[p->arena.len++] = '\0';
        p->argvlen[p->argc++] = n;
        s += n + 2;
    }
    /* The state machine checks max_query at each bulk header against the
     * bytes up to that bulk's end; the last check is the whole request. */
    if ((size_t)(s - start) > p->lim.max_query) goto bail;
    *pos += (size_t)(s - start);
    return req_finish(p);
bail:
    p->argc = 0;
    p->arena.len = 0;
    return 0;
}

static int step_start(resp_req *p, const char *buf, size_t len, size_t *pos) {
    if (buf[*pos] == '*') {
        if (req_fast(p, buf, len, pos)) return 1;
        (*pos)++;
        hdr_start(&p->num);
        p->state = REQ_MB_COUNT;
    } else {
        p->state = REQ_INLINE;
    }
    return KEEL_EAGAIN;
}

static int step_mb_count(resp_req *p, const char *buf, size_t len, size_t *pos) {
    hdr_num *h = &p->num;
    /* Any negative count is an empty request, as in redis (ll <= 0). */
    switch (
        hdr_parse(h, buf, len, pos, p->lim.max_args, (uint64_t)INT64_MAX + 1, p->lim.max_inline)) {
    case HDR_MORE:
        return KEEL_EAGAIN;
    case HDR_TOOBIG:
        return req_fail(p, "Protocol error: too big mbulk count string");
    case HDR_BAD:
        return req_fail(p, "Protocol error: invalid multibulk length");
    }
    p->req_bytes += h->len + 2;
    if (p->req_bytes > p->lim.max_query)
        return req_fail(p, "Protocol error: query buffer limit exceeded");
    if (h->neg || h->val == 0) {
        req_skip_empty(p);
        return KEEL_EAGAIN;
    }
    p->args_left = (long long)h->val;
    p->state = REQ_BULK_TYPE;
    return KEEL_EAGAIN;
}

static int step_bulk_type(resp_req *p, const char *buf, size_t len, size_t *pos) {
    unsigned char c = (unsigned char)buf[*pos];
    if (c != '$') {
        /* Shown raw like redis-server, but only when printable: the text
         * must stay one clean line. */
        snprintf(p->errbuf, sizeof(p->errbuf), "Protocol error: expected '$', got '%c'",
                 c >= 0x20 && c < 0x7f ? c : '?');
        return req_fail(p, p->errbuf);
    }
    (*pos)++;
    hdr_start(&p->num);
    p->state = REQ_BULK_LEN;
    return KEEL_EAGAIN;
}

/* Copies n argument bytes; last says they end the argument. */
static int arena_put(resp_req *p, const char *src, size_t n, int last) {
    if (arena_room(p, n + (last != 0))) return KEEL_ENOMEM;
    if (n) memcpy(p->arena.p + p->arena.len, src, n); /* src may be NULL when n == 0 */
    p->arena.len += n;
    if (last) p->arena.p[p->arena.len++] = '\0';
    return 0;
}

static int step_bulk_len(resp_req *p, const char *buf, size_t len, size_t *pos) {
    hdr_num *h = &p->num;
    switch (hdr_parse(h, buf, len, pos, p->lim.max_bulk, 0, p->lim.max_inline)) {
    case HDR_MORE:
        return KEEL_EAGAIN;
    case HDR_TOOBIG:
        return req_fail(p, "Protocol error: too big bulk count string");
    case HDR_BAD:
        return req_fail(p, "Protocol error: invalid bulk length");
    }
    /* Checked against the declared length so the bytes are never buffered;
     * val <= max_bulk, so the sum cannot wrap unless the limits are absurd. */
    size_t need = h->len + 2 + (size_t)h->val + 2;
    if (need < h->val || p->req_bytes + need < need || p->req_bytes + need > p->lim.max_query)
        return req_fail(p, "Protocol error: query buffer limit exceeded");
    p->req_bytes += need;
    if (req_argv_grow(p)) return KEEL_ENOMEM;
    p->argvlen[p->argc] = (size_t)h->val;
    p->bulk_left = (size_t)h->val;
    p->state = REQ_BULK_DATA;
    if (p->bulk_left == 0) {
        if (arena_put(p, NULL, 0, 1)) return KEEL_ENOMEM;
        p->state = REQ_BULK_CR;
    }
    return KEEL_EAGAIN;
}

static int step_bulk_data(resp_req *p, const char *buf, size_t len, size_t *pos) {
    size_t take = len - *pos;
    if (take > p->bulk_left) take = p->bulk_left;
    int last = take == p->bulk_left;
    if (arena_put(p, buf + *pos, take, last)) return KEEL_ENOMEM;
    *pos += take;
    p->bulk_left -= take;
    if (last) p->state = REQ_BULK_CR;
    return KEEL_EAGAIN;
}

static int arg_done(resp_req *p) {
    p->argc++;
    if (--p->args_left == 0) return req_finish(p);
    p->state = REQ_BULK_TYPE;
    return KEEL_EAGAIN;
}

static int step_bulk_cr(resp_req *p, const char *buf, size_t len, size_t *pos) {
    if (buf[*pos] != '\r') return req_fail(p, "Protocol error: expected CRLF after bulk");
    (*pos)++;
    p->state = REQ_BULK_LF;
    if (*pos == len) return KEEL_EAGAIN;
    if (buf[*pos] != '\n') return req_fail(p, "Protocol error: expected CRLF after bulk");
    (*pos)++;
    return arg_done(p);
}

static int step_bulk_lf(resp_req *p, const char *buf, size_t len, size_t *pos) {
    if (buf[*pos] != '\n') return req_fail(p, "Protocol error: expected CRLF after bulk");
    (*pos)++;
    return arg_done(p);
}

/* ---- Inline commands ----------------------------------------------------- */

static int is_space(int c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int hex_val(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Byte i of the line, or 0 past its end: sdssplitargs works on a C string, so
 * an embedded NUL ends the line exactly as the end does. */
#define AT(i) ((i) < n ? (unsigned char)s[i] : 0)

/* Reads one token at s[*i] into out; returns bytes written or -1 for
 * unbalanced quotes. Mirrors redis's sdssplitargs, quote rules included. */
static long split_token(const char *s, size_t n, size_t *i, char *out) {
    char *o = out;
    int inq = 0, insq = 0;
    for (;;) {
        int c = AT(*i);
        if (inq) {
            if (c == '\\' && AT(*i + 1) == 'x' && hex_val(AT(*i + 2)) >= 0 &&
                hex_val(AT(*i + 3)) >= 0) {
                *o++ = (char)(hex_val(AT(*i + 2)) * 16 + hex_val(AT(*i + 3)));
                *i += 3;
            } else if (c == '\\' && AT(*i + 1)) {
                static const char from[] = "nrtba", to[] = "\n\r\t\b\a";
                (*i)++;
                c = AT(*i);
                const char *f = strchr(from, c);
                *o++ = f ? to[f - from] : (char)c;
            } else if (c == '"') {
                /* The closing quote must be followed by a space or the end. */
                if (AT(*i + 1) && !is_space(AT(*i + 1))) return -1;
                (*i)++;
                return o - out;
            } else if (!c) {
                return -1;
            } else {
                *o++ = (char)c;
            }
        } else if (insq) {
            if (c == '\\' && AT(*i + 1) == '\'') {
                (*i)++;
                *o++ = '\'';
            } else if (c == '\'') {
                if (AT(*i + 1) && !is_space(AT(*i + 1))) return -1;
                (*i)++;
                return o - out;
            } else if (!c) {
                return -1;
            } else {
                *o++ = (char)c;
            }
        } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0') {
            if (c) (*i)++;
            return o - out;
        } else if (c == '"') {
            inq = 1;
        } else if (c == '\'') {
            insq = 1;
        } else {
            *o++ = (char)c;
        }
        (*i)++;
    }
}

/* Splits line s[0..n) into the arena as arguments. Each token's output is no
 * longer than its input and the NUL after it is paid for by the separator or
 * the quotes that ended it, so n + 1 bytes always suffice. */
static int inline_split(resp_req *p, const char *s, size_t n) {
    if (kbuf_reserve(&p->arena, n + 1)) return KEEL_ENOMEM;
    size_t i = 0;
    for (;;) {
        while (i < n && is_space((unsigned char)s[i]))
            i++;
        if (AT(i) == 0) return 0;
        if ((size_t)p->argc >= p->lim.max_args)
            return req_fail(p, "Protocol error: too big inline request");
        if (req_argv_grow(p)) return KEEL_ENOMEM;
        long w = split_token(s, n, &i, p->arena.p + p->arena.len);
        if (w < 0) return req_fail(p, "Protocol error: unbalanced quotes in request");
        p->arena.len += (size_t)w;
        p->arena.p[p->arena.len++] = '\0';
        p->argvlen[p->argc++] = (size_t)w;
    }
}
#undef AT

/* Gathers a line up to '\n'. A line longer than max_inline (not counting the
 * '\n') fails as soon as that many bytes have arrived, wherever the splits. A
 * line wholly inside buf is split in place without being copied to p->line. */
static int step_inline(resp_req *p, const char *buf, size_t len, size_t *pos) {
    const char *s = buf + *pos;
    size_t avail = len - *pos;
    size_t room = p->lim.max_inline - p->line.len; /* line.len <= max_inline */
    size_t scan = avail <= room ? avail : room + 1;
    const char *nl = memchr(s, '\n', scan);
    if (!nl) {
        if (avail > room) return req_fail(p, "Protocol error: too big inline request");
        if (kbuf_append(&p->line, s, avail)) return KEEL_ENOMEM;
        *pos = len;
        return KEEL_EAGAIN;
    }
    size_t n = (size_t)(nl - s);
    const char *lp = s;
    if (p->line.len) {
        if (kbuf_append(&p->line, s, n)) return KEEL_ENOMEM;
        lp = p->line.p;
        n = p->line.len;
    }
    *pos += (size_t)(nl - s) + 1;
    if (n + 1 > p->lim.max_query) return req_fail(p, "Protocol error: query buffer limit exceeded");
    if (n && lp[n - 1] == '\r') n--;
    int rc = inline_split(p, lp, n);
    p->line.len = 0;
    if (rc) return rc;
    if (p->argc == 0) {
        req_skip_empty(p);
        return KEEL_EAGAIN;
    }
    return req_finish(p);
}

typedef int (*req_step)(resp_req *p, const char *buf, size_t len, size_t *pos);

static const req_step req_steps[] = {
    [REQ_START] = step_start,         [REQ_MB_COUNT] = step_mb_count,
    [REQ_BULK_TYPE] = step_bulk_type, [REQ_BULK_LEN] = step_bulk_len,
    [REQ_BULK_DATA] = step_bulk_data, [REQ_BULK_CR] = step_bulk_cr,
    [REQ_BULK_LF] = step_bulk_lf,     [REQ_INLINE] = step_inline,
};

/* ---- Public API ---------------------------------------------------------- */

resp_req *resp_req_new(const resp_limits *limits) {
    resp_req *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    if (limits)
        p->lim = *limits;
    else
        resp_limits_default(&p->lim);
    /* argc is an int. */
    if (p->lim.max_args > INT32_MAX) p->lim.max_args = INT32_MAX;
    p->state = REQ_START;
    p->err = "";
    kbuf_init(&p->arena);
    kbuf_init(&p->line);
    return p;
}

void resp_req_free(resp_req *p) {
    if (!p) return;
    kbuf_close(&p->arena);
    kbuf_close(&p->line);
    free(p->argv);
    free(p->argvlen);
    free(p);
}

int resp_req_feed(resp_req *p, const char *buf, size_t len, size_t *consumed) {
    size_t pos = 0;
    int rc = KEEL_EAGAIN;
    *consumed = 0;
    if (p->state == REQ_DEAD) return KEEL_EPROTO;
    if (p->ready) req_reset(p);
    while (rc == KEEL_EAGAIN && pos < len)
        rc = req_steps[p->state](p, buf, len, &pos);
    if (rc == KEEL_ENOMEM) {
        /* The partial request may be half-recorded: fatal, as documented. */
        p->err = "out of memory";
        p->state = REQ_DEAD;
    }
    *consumed = pos;
    return rc;
}

int resp_req_argc(const resp_req *p) {
    return p->ready ? p->argc : 0;
}

char **resp_req_argv(const resp_req *p) {
    return p->ready ? p->argv : NULL;
}

const size_t *resp_req_argvlen(const resp_req *p) {
    return p->ready ? p->argvlen : NULL;
}

const char *resp_req_error(const resp_req *p) {
    return p->err;
}

size_t resp_req_pending_bytes(const resp_req *p) {
    if (p->ready || (p->state == REQ_START && p->argc == 0)) return 0;
    return p->arena.len + p->line.len + p->argv_cap * (sizeof(char *) + sizeof(size_t));
}
