/* resp_reader.c - incremental RESP2/RESP3 value reader; see resp.h.
 *
 * Design. As in hiredis's read.c: a stack of open aggregates plus the state
 * of the one scalar being read. A line (type byte up to CRLF) is parsed in
 * place when it lies whole in the fed buffer, and is otherwise gathered in
 * r->line, bounded by max_inline. Bulk payloads are copied into r->data as
 * they arrive and aggregate element arrays grow as elements complete, so
 * neither a declared length nor a declared count ever allocates. The type
 * bytes are dispatched through one table (rd_types).
 *
 * Limits: max_bulk bounds each bulk/verbatim/blob-error payload, max_inline
 * each line, max_depth the nesting (a top-level aggregate has depth 1),
 * max_query the wire bytes of one top-level value. max_args is not applied:
 * replies such as LRANGE legitimately exceed it, and memory grows only with
 * the elements that arrive.
 *
 * Attributes ('|'). A top-level attribute is returned as its own value of
 * type RESP_T_ATTR; the reply it annotates is the next value. One nested
 * inside an aggregate is parsed and dropped, so that it does not count as one
 * of the parent's elements, as RESP3 requires.
 */
#include "resp/resp.h"
#include "core/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum rd_state {
    RD_TYPE,    /* expecting a type byte */
    RD_LINE,    /* gathering the rest of the line */
    RD_LINE_LF, /* the line ended in '\r'; expecting '\n' */
    RD_BULK,    /* copying payload bytes */
    RD_BULK_CR, /* expecting the '\r' after the payload */
    RD_BULK_LF, /* expecting the '\n' after the payload */
    RD_DEAD,    /* after an error */
};

typedef struct rd_frame {
    resp_value *v; /* the open aggregate; v->elems holds have of want */
    size_t want;   /* elements to read: n, or 2n for maps and attributes */
    size_t have;
    size_t cap; /* entries allocated in v->elems */
} rd_frame;

struct resp_reader {
    resp_limits lim;
    enum rd_state state;
    const struct rd_type *type; /* of the value being read */
    kbuf line;                  /* partial line, type byte excluded */
    kbuf data;                  /* partial bulk payload */
    size_t bulk_left;
    rd_frame *stack;
    int depth; /* open aggregates */
    int stack_cap;
    size_t val_bytes; /* wire bytes of the current top-level value */
    char err[96];
};

enum rd_kind { K_STR, K_INT, K_DOUBLE, K_BOOL, K_NULL, K_BIGNUM, K_BULK, K_AGG };

typedef struct rd_type {
    char byte;
    resp_type type;
    enum rd_kind kind;
    int nullable; /* "-1" means null (RESP2 "$-1" and "*-1") */
    int pairs;    /* the count is of key/value pairs */
} rd_type;

static const rd_type rd_types[] = {
    {'+', RESP_T_SIMPLE, K_STR, 0, 0},    {'-', RESP_T_ERROR, K_STR, 0, 0},
    {':', RESP_T_INT, K_INT, 0, 0},       {'$', RESP_T_BULK, K_BULK, 1, 0},
    {'*', RESP_T_ARRAY, K_AGG, 1, 0},     {'_', RESP_T_NULL, K_NULL, 0, 0},
    {',', RESP_T_DOUBLE, K_DOUBLE, 0, 0}, {'#', RESP_T_BOOL, K_BOOL, 0, 0},
    {'(', RESP_T_BIGNUM, K_BIGNUM, 0, 0}, {'=', RESP_T_VERBATIM, K_BULK, 0, 0},
    {'!', RESP_T_BULKERR, K_BULK, 0, 0},  {'%', RESP_T_MAP, K_AGG, 0, 1},
    {'~', RESP_T_SET, K_AGG, 0, 0},       {'|', RESP_T_ATTR, K_AGG, 0, 1},
    {'>', RESP_T_PUSH, K_AGG, 0, 0},
};

/* ---- Helpers ------------------------------------------------------------ */

static int rd_fail(resp_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees the open aggregates: only their first have elements are set. */
static void rd_drop_partial(resp_reader *r) {
    while (r->depth > 0) {
        rd_frame *f = &r->stack[--r->depth];
        for (size_t i = 0; i < f->have; i++)
            resp_value_free(f->v->elems[i]);
        free(f->v->elems);
        free(f->v);
    }
    kbuf_close(&r->data);
    kbuf_close(&r->line);
}

static int rd_fail(resp_reader *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
    rd_drop_partial(r);
    r->state = RD_DEAD;
    return KEEL_EPROTO;
}

static resp_value *val_new(resp_type t) {
    resp_value *v = calloc(1, sizeof(*v));
    if (v) v->type = t;
    return v;
}

/* Parses a signed decimal, overflow-checked, into *out. Returns 0 or -1. */
static int parse_ll(const char *s, size_t n, long long *out) {
    size_t i = 0;
    int neg = n > 0 && s[0] == '-';
    i += (size_t)neg;
    if (i == n) return -1;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    for (; i < n; i++) {
        uint64_t d = (uint64_t)(unsigned char)s[i] - '0';
        if (d > 9 || v > (lim - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = neg ? (long long)(0 - v) : (long long)v;
    return 0;
}

static int parse_double(const char *s, size_t n, double *out) {
    char tmp[400];
    if (n == 0 || n >= sizeof(tmp)) return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    const char *t = tmp + (tmp[0] == '-' || tmp[0] == '+');
    if (!strcmp(t, "inf") || !strcmp(t, "nan")) {
        *out = t[0] == 'i' ? INFINITY : NAN;
        if (tmp[0] == '-') *out = -*out;
        return 0;
    }
    /* strtod alone would also take hex, "infinity" and "nan(...)". */
    if (strspn(tmp, "0123456789.eE+-") != n) return -1;
    char *end;
    *out = strtod(tmp, &end);
    return end == tmp + n ? 0 : -1;
}

/* ---- Building the tree -------------------------------------------------- */

/* A value is complete: returns it (1) if it is top-level, or adds it to the
 * open aggregate, closing every aggregate it completes. */
static int rd_emit(resp_reader *r, resp_value *v, resp_value **out) {
    for (;;) {
        if (r->depth == 0) {
            *out = v;
            r->val_bytes = 0;
            return 1;
        }
        rd_frame *f = &r->stack[r->depth - 1];
        if (v->type == RESP_T_ATTR) {
            resp_value_free(v);
        } else {
            if (f->have == f->cap) {
                size_t cap = f->cap ? f->cap * 2 : 4;
                if (cap > f->want) cap = f->want;
                resp_value **e = realloc(f->v->elems, cap * sizeof(*e));
                if (!e) {
                    resp_value_free(v);
                    return KEEL_ENOMEM;
                }
                f->v->elems = e;
                f->cap = cap;
            }
            f->v->elems[f->have++] = v;
        }
        if (f->have < f->want) return KEEL_EAGAIN;
        v = f->v;
        r->depth--;
    }
}

static int rd_open(resp_reader *r, resp_value *v, size_t want, resp_value **out) {
    if (want == 0) return rd_emit(r, v, out);
    if (r->depth == r->stack_cap) {
        int cap = r->stack_cap ? r->stack_cap * 2 : 8;
        rd_frame *s = realloc(r->stack, (size_t)cap * sizeof(*s));
        if (!s) {
            resp_value_free(v);
            return KEEL_ENOMEM;
        }
        r->stack = s;
        r->stack_cap = cap;
    }
    r->stack[r->depth++] = (rd_frame){v, want, 0, 0};
    return KEEL_EAGAIN;
}

static int rd_str_value(resp_reader *r, const char *s, size_t n, resp_value **out) {
    resp_value *v = val_new(r->type->type);
    if (!v || !(v->str = malloc(n + 1))) {
        free(v);
        return KEEL_ENOMEM;
    }
    memcpy(v->str, s, n);
    v->str[n] = '\0';
    v->len = n;
    return rd_emit(r, v, out);
}

/* A length or count line: "$5", "*3", "%2". */
static int rd_header(resp_reader *r, const char *s, size_t n, resp_value **out) {
    const rd_type *t = r->type;
    long long ll;
    if (parse_ll(s, n, &ll) || ll < -1 || (ll == -1 && !t->nullable))
        return rd_fail(r, "Protocol error: invalid %s length",
                       t->kind == K_BULK ? "bulk" : "aggregate");
    if (ll == -1) {
        resp_value *v = val_new(RESP_T_NULL);
        return v ? rd_emit(r, v, out) : KEEL_ENOMEM;
    }
    uint64_t len = (uint64_t)ll;
    if (t->kind == K_AGG) {
        if (r->depth >= r->lim.max_depth)
            return rd_fail(r, "Protocol error: nesting deeper than %d", r->lim.max_depth);
        if (len > SIZE_MAX / 2) return rd_fail(r, "Protocol error: invalid aggregate length");
        resp_value *v = val_new(t->type);
        if (!v) return KEEL_ENOMEM;
        v->n = (size_t)len;
        return rd_open(r, v, t->pairs ? 2 * v->n : v->n, out);
    }
    if (len > r->lim.max_bulk || (t->type == RESP_T_VERBATIM && len < 4))
        return rd_fail(r, "Protocol error: invalid bulk length");
    if (len + 2 > r->lim.max_query - r->val_bytes)
        return rd_fail(r, "Protocol error: value bigger than max_query");
    r->val_bytes += len + 2;
    r->bulk_left = (size_t)len;
    r->data.len = 0;
    if (kbuf_reserve(&r->data, len < 64 ? len + 1 : 64)) return KEEL_ENOMEM;
    r->state = RD_BULK;
    if (len == 0) r->state = RD_BULK_CR;
    return KEEL_EAGAIN;
}

/* The line s[0..n) after the type byte is complete. */
static int rd_line_done(resp_reader *r, const char *s, size_t n, resp_value **out) {
    const rd_type *t = r->type;
    resp_value *v;
    r->state = RD_TYPE;
    if (n + 3 > r->lim.max_query - r->val_bytes)
        return rd_fail(r, "Protocol error: value bigger than max_query");
    r->val_bytes += n + 3;
    switch (t->kind) {
    case K_STR:
        return rd_str_value(r, s, n, out);
    case K_BIGNUM:
        /* s[n] is '\r' or the NUL of r->line, so strspn stops at n. */
        if (n == (s[0] == '-') || strspn(s + (s[0] == '-'), "0123456789") != n - (s[0] == '-'))
            return rd_fail(r, "Protocol error: bad big number");
        return rd_str_value(r, s, n, out);
    case K_BULK:
    case K_AGG:
        return rd_header(r, s, n, out);
    default:
        break;
    }
    if (!(v = val_new(t->type))) return KEEL_ENOMEM;
    int bad;
    if (t->kind == K_INT) {
        bad = parse_ll(s, n, &v->integer);
    } else if (t->kind == K_DOUBLE) {
        bad = parse_double(s, n, &v->dbl);
    } else if (t->kind == K_BOOL) {
        bad = n != 1 || (s[0] != 't' && s[0] != 'f');
        v->integer = !bad && s[0] == 't';
    } else {
        bad = n != 0; /* K_NULL */
    }
    if (bad) {
        free(v);
        return rd_fail(r, "Protocol error: bad '%c' value", t->byte);
    }
    return rd_emit(r, v, out);
}

/* ---- States ------------------------------------------------------------- */

static int step_type(resp_reader *r, const char *buf, size_t len, size_t *pos, resp_value **out) {
    unsigned char c = (unsigned char)buf[*pos];
    for (size_t i = 0; i < sizeof(rd_types) / sizeof(rd_types[0]); i++) {
        if (rd_types[i].byte == (char)c) {
            r->type = &rd_types[i];
            r->state = RD_LINE;
            r->line.len = 0;
            (*pos)++;
            return KEEL_EAGAIN;
        }
    }
    return rd_fail(r, "Protocol error: got '%c' as reply type byte",
                   c >= 0x20 && c < 0x7f ? c : '?');
}

/* Gathers the line up to '\r'. Lines hold no CR or LF of their own. */
static int step_line(resp_reader *r, const char *buf, size_t len, size_t *pos, resp_value **out) {
    const char *s = buf + *pos;
    size_t avail = len - *pos;
    size_t room = r->lim.max_inline - r->line.len; /* line.len <= max_inline */
    size_t scan = avail <= room ? avail : room + 1;
    size_t k = 0;
    while (k < scan && s[k] != '\r' && s[k] != '\n')
        k++;
    if (k == scan) {
        if (avail > room) return rd_fail(r, "Protocol error: line longer than max_inline");
        if (kbuf_append(&r->line, s, avail)) return KEEL_ENOMEM;
        *pos = len;
        return KEEL_EAGAIN;
    }
    if (s[k] == '\n') return rd_fail(r, "Protocol error: expected CRLF");
    if (k + 1 < avail && r->line.len == 0) {
        /* Whole line in buf: parse it in place. */
        if (s[k + 1] != '\n') return rd_fail(r, "Protocol error: expected CRLF");
        *pos += k + 2;
        return rd_line_done(r, s, k, out);
    }
    if (kbuf_append(&r->line, s, k) || kbuf_reserve(&r->line, 1)) return KEEL_ENOMEM;
    r->line.p[r->line.len] = '\0';
    *pos += k + 1;
    r->state = RD_LINE_LF;
    return KEEL_EAGAIN;
}

static int step_line_lf(resp_reader *r, const char *buf, size_t len, size_t *pos,
                        resp_value **out) {
    if (buf[*pos] != '\n') return rd_fail(r, "Protocol error: expected CRLF");
    (*pos)++;
    return rd_line_done(r, r->line.p, r->line.len, out);
}

static int step_bulk(resp_reader *r, const char *buf, size_t len, size_t *pos, resp_value **out) {
    size_t take = len - *pos;
    if (take > r->bulk_left) take = r->bulk_left;
    int last = take == r->bulk_left;
    if (kbuf_append(&r->data, buf + *pos, take)) return KEEL_ENOMEM;
    *pos += take;
    r->bulk_left -= take;
    if (last) r->state = RD_BULK_CR;
    return KEEL_EAGAIN;
}

static int rd_bulk_done(resp_reader *r, resp_value **out) {
    if (r->type->type == RESP_T_VERBATIM && r->data.p[3] != ':')
        return rd_fail(r, "Protocol error: bad verbatim string");
    resp_value *v = val_new(r->type->type);
    if (!v || kbuf_reserve(&r->data, 1)) {
        free(v);
        return KEEL_ENOMEM;
    }
    /* The payload's buffer becomes the value's string. */
    v->str = r->data.p;
    v->len = r->data.len;
    v->str[v->len] = '\0';
    kbuf_init(&r->data);
    r->state = RD_TYPE;
    return rd_emit(r, v, out);
}

static int step_bulk_cr(resp_reader *r, const char *buf, size_t len, size_t *pos,
                        resp_value **out) {
    if (buf[*pos] != '\r') return rd_fail(r, "Protocol error: expected CRLF after bulk");
    (*pos)++;
    r->state = RD_BULK_LF;
    if (*pos == len) return KEEL_EAGAIN;
    if (buf[*pos] != '\n') return rd_fail(r, "Protocol error: expected CRLF after bulk");
    (*pos)++;
    return rd_bulk_done(r, out);
}

static int step_bulk_lf(resp_reader *r, const char *buf, size_t len, size_t *pos,
                        resp_value **out) {
    if (buf[*pos] != '\n') return rd_fail(r, "Protocol error: expected CRLF after bulk");
    (*pos)++;
    return rd_bulk_done(r, out);
}

typedef int (*rd_step)(resp_reader *r, const char *buf, size_t len, size_t *pos, resp_value **out);

static const rd_step rd_steps[] = {
    [RD_TYPE] = step_type, [RD_LINE] = step_line,       [RD_LINE_LF] = step_line_lf,
    [RD_BULK] = step_bulk, [RD_BULK_CR] = step_bulk_cr, [RD_BULK_LF] = step_bulk_lf,
};

/* ---- Public API ---------------------------------------------------------- */

resp_reader *resp_reader_new(const resp_limits *limits) {
    resp_reader *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    if (limits)
        r->lim = *limits;
    else
        resp_limits_default(&r->lim);
    if (r->lim.max_depth < 0) r->lim.max_depth = 0;
    r->state = RD_TYPE;
    kbuf_init(&r->line);
    kbuf_init(&r->data);
    return r;
}

void resp_reader_free(resp_reader *r) {
    if (!r) return;
    rd_drop_partial(r);
    free(r->stack);
    free(r);
}

int resp_reader_feed(resp_reader *r, const char *buf, size_t len, size_t *consumed,
                     resp_value **out) {
    size_t pos = 0;
    int rc = KEEL_EAGAIN;
    *consumed = 0;
    *out = NULL;
    if (r->state == RD_DEAD) return KEEL_EPROTO;
    while (rc == KEEL_EAGAIN && pos < len)
        rc = rd_steps[r->state](r, buf, len, &pos, out);
    if (rc == KEEL_ENOMEM) {
        snprintf(r->err, sizeof(r->err), "out of memory");
        rd_drop_partial(r);
        r->state = RD_DEAD;
    }
    *consumed = pos;
    return rc;
}

const char *resp_reader_error(const resp_reader *r) {
    return r->err;
}

void resp_value_free(resp_value *v) {
    if (!v) return;
    /* Complete values only: every aggregate holds all its elements. */
    size_t n = v->type == RESP_T_MAP || v->type == RESP_T_ATTR ? 2 * v->n : v->n;
    if (v->elems)
        for (size_t i = 0; i < n; i++)
            resp_value_free(v->elems[i]);
    free(v->elems);
    free(v->str);
    free(v);
}
