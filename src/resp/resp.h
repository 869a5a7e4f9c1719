/* resp.h - RESP parsing and writing. Bytes in, frames out; no I/O, no clock.
 *
 * Two parsers share one set of limits:
 *  - resp_req: the server side. A request is an array of bulk strings
 *    ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") or an inline command line
 *    ("GET k\r\n", quotes as in redis-cli). Nested arrays or other types in a
 *    request are a protocol error, as in redis-server.
 *  - resp_reader: the client/peer side. Any RESP2 or RESP3 value, nested up
 *    to max_depth, returned as a tree.
 *
 * Both are incremental: feed any prefix of the stream, get KEEL_EAGAIN
 * ("need more bytes") until a frame is complete. KEEL_EPROTO ("protocol
 * error") is distinct and final for that stream: the caller replies with the
 * message and closes the connection. Every limit is checked before the bytes
 * it guards are allocated, and memory held for a partial frame grows only
 * with the bytes actually received, never with a length the peer declared.
 *
 * Not thread-safe; one parser per connection.
 */
#ifndef KEEL_RESP_H
#define KEEL_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

typedef struct resp_limits {
    size_t max_bulk;   /* longest bulk string; default 512 MiB */
    size_t max_args;   /* most arguments in one request; default 1048576 */
    size_t max_inline; /* longest inline line or header line; default 64 KiB */
    size_t max_query;  /* most bytes buffered for one request; default 1 GiB */
    int max_depth;     /* deepest nesting for resp_reader; default 7 */
} resp_limits;

/* Fills l with the defaults above. */
void resp_limits_default(resp_limits *l);

/* ---- Server-side request parser ---------------------------------------- */

typedef struct resp_req resp_req;

/* Returns a new parser that copies *limits (NULL = defaults), or NULL on
 * out-of-memory. Free with resp_req_free (NULL is a no-op). */
resp_req *resp_req_new(const resp_limits *limits);
void resp_req_free(resp_req *p);

/* Feeds buf[0..len). Always sets *consumed to the bytes taken; the caller
 * drops those and keeps the rest for the next call. The parser copies what it
 * needs, so the caller may reuse buf after the call.
 * Returns:
 *   1            a complete request is ready: read it with resp_req_argc /
 *                resp_req_argv / resp_req_argvlen. Call resp_req_feed again
 *                (with the unconsumed rest) for the next one. A request with
 *                zero arguments (an empty inline line) is skipped, never
 *                returned.
 *   KEEL_EAGAIN  all input consumed, request incomplete.
 *   KEEL_EPROTO  protocol error; resp_req_error() gives the Redis text, such
 *                as "Protocol error: invalid multibulk length". The parser is
 *                then dead: every later feed returns KEEL_EPROTO.
 *   KEEL_ENOMEM  allocation failed; treat as fatal for the connection.
 * Error texts (match redis-server where it has one):
 *   "Protocol error: invalid multibulk length"   (*-10, *abc, *3000000000)
 *   "Protocol error: invalid bulk length"        ($-5, $blabla, > max_bulk)
 *   "Protocol error: expected '$', got 'X'"
 *   "Protocol error: too big mbulk count string" / "too big bulk count string"
 *   "Protocol error: too big inline request"
 *   "Protocol error: unbalanced quotes in request"
 *   "Protocol error: expected CRLF after bulk"   (keel is stricter than Redis)
 *   "Protocol error: query buffer limit exceeded"
 * Header lines must end in "\r\n" and hold only an optional '-' and digits. */
int resp_req_feed(resp_req *p, const char *buf, size_t len, size_t *consumed);

/* The ready request. Pointers are owned by the parser and valid until the next
 * resp_req_feed or resp_req_free. Each argument is also NUL-terminated. */
int resp_req_argc(const resp_req *p);
char **resp_req_argv(const resp_req *p);
const size_t *resp_req_argvlen(const resp_req *p);
/* Static or parser-owned text of the last KEEL_EPROTO; "" if none. */
const char *resp_req_error(const resp_req *p);
/* Bytes the parser currently holds for a partial request (for INFO). */
size_t resp_req_pending_bytes(const resp_req *p);

/* ---- Generic value reader (replies, peer streams) ---------------------- */

typedef enum {
    RESP_T_SIMPLE = 1, /* +  */
    RESP_T_ERROR,      /* -  */
    RESP_T_INT,        /* :  */
    RESP_T_BULK,       /* $  */
    RESP_T_ARRAY,      /* *  */
    RESP_T_NULL,       /* _, $-1, *-1 */
    RESP_T_DOUBLE,     /* ,  */
    RESP_T_BOOL,       /* #  */
    RESP_T_BIGNUM,     /* (  */
    RESP_T_VERBATIM,   /* =  (str keeps the "txt:" prefix) */
    RESP_T_BULKERR,    /* !  */
    RESP_T_MAP,        /* %  (n = pairs; elems holds 2n values) */
    RESP_T_SET,        /* ~  */
    RESP_T_ATTR,       /* |  (returned like a map) */
    RESP_T_PUSH,       /* >  */
} resp_type;

typedef struct resp_value {
    resp_type type;
    long long integer; /* INT, BOOL (0/1) */
    double dbl;        /* DOUBLE */
    char *str;         /* SIMPLE, ERROR, BULK, BIGNUM, VERBATIM, BULKERR; NUL-terminated */
    size_t len;        /* length of str */
    size_t n;          /* element count: ARRAY, SET, PUSH; pairs for MAP, ATTR */
    struct resp_value **elems;
} resp_value;

typedef struct resp_reader resp_reader;

resp_reader *resp_reader_new(const resp_limits *limits);
void resp_reader_free(resp_reader *r);
/* Same contract as resp_req_feed, but returns one value: 1 with *out set
 * (caller owns it; free with resp_value_free), KEEL_EAGAIN, KEEL_EPROTO
 * (resp_reader_error() says why, e.g. nesting beyond max_depth), or
 * KEEL_ENOMEM. */
int resp_reader_feed(resp_reader *r, const char *buf, size_t len, size_t *consumed,
                     resp_value **out);
const char *resp_reader_error(const resp_reader *r);
void resp_value_free(resp_value *v);

/* ---- Writer ------------------------------------------------------------ */
/* Each appends one frame to b and returns 0 or KEEL_ENOMEM. proto is 2 or 3:
 * RESP3-only types degrade to their RESP2 forms as redis-server does. */

int resp_w_simple(kbuf *b, const char *s);  /* +s */
int resp_w_error(kbuf *b, const char *msg); /* -msg; CR/LF become spaces */
int resp_w_errorf(kbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int resp_w_int(kbuf *b, long long v);                /* :v */
int resp_w_bulk(kbuf *b, const void *p, size_t len); /* $len */
int resp_w_bulkstr(kbuf *b, const char *s);
int resp_w_null(kbuf *b, int proto);              /* $-1 | _ */
int resp_w_null_array(kbuf *b, int proto);        /* *-1 | _ */
int resp_w_array(kbuf *b, size_t n);              /* *n */
int resp_w_map(kbuf *b, int proto, size_t pairs); /* *2n | %n */
int resp_w_set(kbuf *b, int proto, size_t n);     /* *n | ~n */
int resp_w_double(kbuf *b, int proto, double v);  /* bulk "%.17g" | ,v */
int resp_w_bool(kbuf *b, int proto, int v);       /* :0/:1 | #f/#t */
int resp_w_verbatim(kbuf *b, int proto, const char *fmt3, const void *p, size_t len);
/* bulk | =len+4 fmt3: */

#endif
