/* test-resp.c - unit tests for src/resp: request parser, value reader, writer.
 *
 * Request frames are fed whole, split at every byte, pipelined, and hostile;
 * each case says in one line what it checks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "resp/resp.h"

/* ---- Helpers ------------------------------------------------------------ */

#define S(lit) lit, sizeof(lit) - 1

static resp_req *req_with(size_t max_bulk, size_t max_args, size_t max_inline, size_t max_query) {
    resp_limits l;
    resp_limits_default(&l);
    if (max_bulk) l.max_bulk = max_bulk;
    if (max_args) l.max_args = max_args;
    if (max_inline) l.max_inline = max_inline;
    if (max_query) l.max_query = max_query;
    resp_req *p = resp_req_new(&l);
    assert_non_null(p);
    return p;
}

/* Checks the ready request against a NULL-terminated list of C strings. */
static void check_args(resp_req *p, ...) {
    va_list ap;
    va_start(ap, p);
    int i = 0;
    char **argv = resp_req_argv(p);
    const size_t *lens = resp_req_argvlen(p);
    for (const char *want; (want = va_arg(ap, const char *)); i++) {
        assert_true(i < resp_req_argc(p));
        assert_int_equal(lens[i], strlen(want));
        assert_memory_equal(argv[i], want, lens[i]);
        assert_int_equal(argv[i][lens[i]], '\0');
    }
    va_end(ap);
    assert_int_equal(resp_req_argc(p), i);
}

/* Feeds a whole buffer to a fresh default parser; expects a protocol error
 * with the given text. */
static void expect_proto(const char *buf, size_t len, const char *msg) {
    resp_req *p = resp_req_new(NULL);
    size_t c;
    int rc;
    size_t off = 0;
    while ((rc = resp_req_feed(p, buf + off, len - off, &c)) == 1)
        off += c;
    assert_int_equal(rc, KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), msg);
    resp_req_free(p);
}

/* Expects exactly one request from buf, all bytes consumed. */
static void feed_one(resp_req *p, const char *buf, size_t len) {
    size_t c;
    assert_int_equal(resp_req_feed(p, buf, len, &c), 1);
    assert_int_equal(c, len);
}

static const char SET_FRAME[] = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";

/* ---- Request parser: well-formed input ----------------------------------- */

/* resp_limits_default fills in the documented defaults. */
static void limits_defaults(void **state) {
    resp_limits l;
    resp_limits_default(&l);
    assert_int_equal(l.max_bulk, 512u * 1024 * 1024);
    assert_int_equal(l.max_args, 1048576);
    assert_int_equal(l.max_inline, 64 * 1024);
    assert_int_equal(l.max_query, 1024u * 1024 * 1024);
    assert_int_equal(l.max_depth, 7);
}

/* A complete multibulk frame yields one request, NUL-terminated arguments. */
static void req_complete_frame(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S(SET_FRAME));
    check_args(p, "SET", "key", "value", NULL);
    assert_int_equal(resp_req_pending_bytes(p), 0);
    resp_req_free(p);
}

/* Split in two at every byte: the first part is need-more, the rest completes. */
static void req_every_split_point(void **state) {
    size_t len = sizeof(SET_FRAME) - 1;
    for (size_t k = 0; k < len; k++) {
        resp_req *p = resp_req_new(NULL);
        size_t c;
        assert_int_equal(resp_req_feed(p, SET_FRAME, k, &c), KEEL_EAGAIN);
        assert_int_equal(c, k);
        feed_one(p, SET_FRAME + k, len - k);
        check_args(p, "SET", "key", "value", NULL);
        resp_req_free(p);
    }
}

/* Fed one byte at a time: need-more for every byte but the last. */
static void req_byte_by_byte(void **state) {
    size_t len = sizeof(SET_FRAME) - 1, c;
    resp_req *p = resp_req_new(NULL);
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i + 1 < len; i++) {
            assert_int_equal(resp_req_feed(p, SET_FRAME + i, 1, &c), KEEL_EAGAIN);
            assert_int_equal(c, 1);
            assert_int_equal(resp_req_argc(p), 0);
        }
        assert_int_equal(resp_req_feed(p, SET_FRAME + len - 1, 1, &c), 1);
        check_args(p, "SET", "key", "value", NULL);
    }
    resp_req_free(p);
}

/* Several frames in one buffer come out one per call, consuming each exactly. */
static void req_pipelined(void **state) {
    static const char buf[] = "*1\r\n$4\r\nPING\r\n"
                              "*2\r\n$3\r\nGET\r\n$1\r\na\r\n"
                              "ECHO hi\r\n"
                              "*2\r\n$3\r\nGET\r\n$1\r\nb\r\n*1\r\n$4\r\nPI";
    resp_req *p = resp_req_new(NULL);
    size_t off = 0, c;
    assert_int_equal(resp_req_feed(p, buf + off, sizeof(buf) - 1 - off, &c), 1);
    assert_int_equal(c, 14);
    check_args(p, "PING", NULL);
    off += c;
    assert_int_equal(resp_req_feed(p, buf + off, sizeof(buf) - 1 - off, &c), 1);
    check_args(p, "GET", "a", NULL);
    off += c;
    assert_int_equal(resp_req_feed(p, buf + off, sizeof(buf) - 1 - off, &c), 1);
    assert_int_equal(c, 9);
    check_args(p, "ECHO", "hi", NULL);
    off += c;
    assert_int_equal(resp_req_feed(p, buf + off, sizeof(buf) - 1 - off, &c), 1);
    check_args(p, "GET", "b", NULL);
    off += c;
    assert_int_equal(resp_req_feed(p, buf + off, sizeof(buf) - 1 - off, &c), KEEL_EAGAIN);
    assert_int_equal(off + c, sizeof(buf) - 1);
    assert_true(resp_req_pending_bytes(p) > 0);
    feed_one(p, S("NG\r\n"));
    check_args(p, "PING", NULL);
    resp_req_free(p);
}

/* The caller may overwrite its buffer after feed: arguments are copies. */
static void req_args_are_copies(void **state) {
    char buf[sizeof(SET_FRAME)];
    memcpy(buf, SET_FRAME, sizeof(buf));
    resp_req *p = resp_req_new(NULL);
    feed_one(p, buf, sizeof(buf) - 1);
    memset(buf, 'X', sizeof(buf));
    check_args(p, "SET", "key", "value", NULL);
    resp_req_free(p);
}

/* A bulk argument holding NUL bytes is kept whole (binary safe). */
static void req_binary_bulk(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("*2\r\n$3\r\nSET\r\n$5\r\na\0b\0c\r\n"));
    assert_int_equal(resp_req_argc(p), 2);
    assert_int_equal(resp_req_argvlen(p)[1], 5);
    assert_memory_equal(resp_req_argv(p)[1], "a\0b\0c", 6);
    resp_req_free(p);
}

/* "$0" is a valid empty argument. */
static void req_empty_bulk(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("*2\r\n$0\r\n\r\n$1\r\nx\r\n"));
    check_args(p, "", "x", NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("*2\r\n$0\r\n"), &c), KEEL_EAGAIN);
    feed_one(p, S("\r\n$0\r\n\r\n"));
    check_args(p, "", "", NULL);
    resp_req_free(p);
}

/* "*0", "*-1" and any other negative count ("*-10", as redis' ll <= 0) are
 * empty requests and are skipped, never returned. */
static void req_empty_multibulk_skipped(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("*0\r\n*-1\r\n*-10\r\n*-9223372036854775808\r\n*1\r\n$4\r\nPING\r\n"));
    check_args(p, "PING", NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("*0\r\n"), &c), KEEL_EAGAIN);
    assert_int_equal(c, 4);
    assert_int_equal(resp_req_pending_bytes(p), 0);
    resp_req_free(p);
}

/* Many requests through one parser reuse its buffers and stay correct. */
static void req_reuse_many(void **state) {
    resp_req *p = resp_req_new(NULL);
    char buf[64], val[16];
    for (int i = 0; i < 5000; i++) {
        int vl = snprintf(val, sizeof(val), "v%d", i);
        int n = snprintf(buf, sizeof(buf), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n", vl, val);
        feed_one(p, buf, (size_t)n);
        check_args(p, "SET", "k", val, NULL);
    }
    resp_req_free(p);
}

/* A request with many arguments is parsed whole; the next small one is fine. */
static void req_many_args_then_small(void **state) {
    size_t n = 3000;
    char *buf = malloc(16 + n * 8);
    size_t len = (size_t)sprintf(buf, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(buf + len, "$1\r\n%c\r\n", 'a' + (int)(i % 26));
    resp_req *p = resp_req_new(NULL);
    feed_one(p, buf, len);
    assert_int_equal(resp_req_argc(p), 3000);
    assert_string_equal(resp_req_argv(p)[2999], "j"); /* 2999 % 26 == 9 */
    feed_one(p, S("*1\r\n$4\r\nPING\r\n"));
    check_args(p, "PING", NULL);
    free(buf);
    resp_req_free(p);
}

/* ---- Request parser: inline commands -------------------------------------- */

/* Inline lines end in "\r\n" or "\n" and split on runs of whitespace. */
static void inline_simple(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("GET  k\r\n"));
    check_args(p, "GET", "k", NULL);
    feed_one(p, S("\tSET k\tv \n"));
    check_args(p, "SET", "k", "v", NULL);
    resp_req_free(p);
}

/* Double and single quotes group words, as in redis-cli. */
static void inline_quotes(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("SET \"a b\" 'c d' \"\" x\"y z\"\r\n"));
    check_args(p, "SET", "a b", "c d", "", "xy z", NULL);
    resp_req_free(p);
}

/* Escapes inside "..." (\n \r \t \b \a \\ \" \xHH) and '...' (\'). */
static void inline_escapes(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("E \"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\" 'it\\'s' '\\n'\r\n"));
    check_args(p, "E", "AJ\n\r\t\b\a\\\"q", "it's", "\\n", NULL);
    resp_req_free(p);
}

/* "\xZZ" is not a hex escape: the backslash rule keeps the 'x'. */
static void inline_bad_hex_escape(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("E \"\\xZZ\"\r\n"));
    check_args(p, "E", "xZZ", NULL);
    resp_req_free(p);
}

/* An unterminated quote is a protocol error. */
static void inline_unbalanced_quotes(void **state) {
    expect_proto(S("GET \"abc\r\n"), "Protocol error: unbalanced quotes in request");
    expect_proto(S("GET 'abc\n"), "Protocol error: unbalanced quotes in request");
}

/* A closing quote followed by a non-space is a protocol error. */
static void inline_quote_then_text(void **state) {
    expect_proto(S("GET \"a\"b\r\n"), "Protocol error: unbalanced quotes in request");
    expect_proto(S("GET 'a'b\r\n"), "Protocol error: unbalanced quotes in request");
}

/* Empty and all-blank lines are skipped; the next command is returned. */
static void inline_empty_line_skipped(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("\r\n\n   \r\nPING\r\n"));
    check_args(p, "PING", NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("\r\n"), &c), KEEL_EAGAIN);
    assert_int_equal(c, 2);
    resp_req_free(p);
}

/* An inline line split at every byte gives the same arguments. */
static void inline_every_split_point(void **state) {
    static const char line[] = "SET \"a b\" 'c'\r\n";
    size_t len = sizeof(line) - 1;
    for (size_t k = 0; k < len; k++) {
        resp_req *p = resp_req_new(NULL);
        size_t c;
        assert_int_equal(resp_req_feed(p, line, k, &c), KEEL_EAGAIN);
        feed_one(p, line + k, len - k);
        check_args(p, "SET", "a b", "c", NULL);
        resp_req_free(p);
    }
}

/* A NUL in an inline line ends it, as sdssplitargs's C string does. */
static void inline_nul_ends_line(void **state) {
    resp_req *p = resp_req_new(NULL);
    feed_one(p, S("GET k\0junk\r\n"));
    check_args(p, "GET", "k", NULL);
    resp_req_free(p);
}

/* A line longer than max_inline fails without its newline; max_inline fits. */
static void inline_too_big(void **state) {
    size_t max = 64 * 1024;
    char *buf = malloc(max + 2);
    memset(buf, 'a', max + 1);
    buf[max] = '\n';
    resp_req *p = resp_req_new(NULL);
    feed_one(p, buf, max + 1);
    assert_int_equal(resp_req_argvlen(p)[0], max);
    resp_req_free(p);

    buf[max] = 'a';
    p = resp_req_new(NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, buf, max, &c), KEEL_EAGAIN);
    assert_int_equal(resp_req_feed(p, buf, 1, &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: too big inline request");
    resp_req_free(p);
    free(buf);
}

/* More inline words than max_args is rejected as a too-big inline request. */
static void inline_max_args(void **state) {
    resp_req *p = req_with(0, 2, 0, 0);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("a b c\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: too big inline request");
    resp_req_free(p);
}

/* ---- Request parser: hostile frames --------------------------------------- */

/* Non-numeric multibulk counts, "-0" and negatives past a long long are
 * invalid (other negatives are empty requests, see above). */
static void hostile_bad_mbulk_count(void **state) {
    expect_proto(S("*-9223372036854775809\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*abc\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*-\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*+1\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*01\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*-0\r\n"), "Protocol error: invalid multibulk length");
}

/* A count above max_args fails at once, even before its CRLF arrives. */
static void hostile_huge_mbulk_count(void **state) {
    expect_proto(S("*3000000000\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*3000000000"), "Protocol error: invalid multibulk length");
    expect_proto(S("*99999999999999999999999999\r\n"), "Protocol error: invalid multibulk length");
}

/* Bulk lengths: negative, non-numeric, over max_bulk, leading zero. */
static void hostile_bad_bulk_len(void **state) {
    expect_proto(S("*1\r\n$2000000000\r\n"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$2000000000"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$blabla\r\n"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$blabla"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$-5\r\n"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$-1\r\n"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$03\r\nabc\r\n"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$\r\n"), "Protocol error: invalid bulk length");
}

/* Header lines must end in CRLF: a bare CR or LF is invalid. */
static void hostile_header_crlf(void **state) {
    expect_proto(S("*1\rX"), "Protocol error: invalid multibulk length");
    expect_proto(S("*1\n$1\r\na\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*1\r\n$1\ra\r\n"), "Protocol error: invalid bulk length");
    expect_proto(S("*1\r\n$1\na\r\n"), "Protocol error: invalid bulk length");
}

/* A NUL inside a header line is invalid. */
static void hostile_nul_in_header(void **state) {
    expect_proto(S("*1\0\r\n"), "Protocol error: invalid multibulk length");
    expect_proto(S("*1\r\n$3\0\r\nabc\r\n"), "Protocol error: invalid bulk length");
}

/* The bulk payload must be followed by exactly CRLF. */
static void hostile_missing_bulk_crlf(void **state) {
    expect_proto(S("*1\r\n$3\r\nabcXY"), "Protocol error: expected CRLF after bulk");
    expect_proto(S("*1\r\n$3\r\nabc\rX"), "Protocol error: expected CRLF after bulk");
    expect_proto(S("*1\r\n$3\r\nabc\n\r"), "Protocol error: expected CRLF after bulk");
    expect_proto(S("*2\r\n$3\r\nabcd\r\n"), "Protocol error: expected CRLF after bulk");
}

/* A truncated frame is need-more, never an error. */
static void hostile_truncated_is_eagain(void **state) {
    static const char *parts[] = {
        "*", "*2", "*2\r", "*2\r\n$", "*2\r\n$3\r", "*2\r\n$3\r\nGE", "*2\r\n$3\r\nGET\r"};
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        resp_req *p = resp_req_new(NULL);
        size_t c;
        assert_int_equal(resp_req_feed(p, parts[i], strlen(parts[i]), &c), KEEL_EAGAIN);
        assert_int_equal(c, strlen(parts[i]));
        resp_req_free(p);
    }
}

/* An element that is not a bulk string (here a nested array) is refused. */
static void hostile_nested_array(void **state) {
    expect_proto(S("*1\r\n*1\r\n$1\r\na\r\n"), "Protocol error: expected '$', got '*'");
    expect_proto(S("*2\r\n$1\r\na\r\n:1\r\n"), "Protocol error: expected '$', got ':'");
    expect_proto(S("*1\r\n\x01"), "Protocol error: expected '$', got '?'");
}

/* "*1048576" alone allocates no 1M-entry argv; memory follows arrivals. */
static void hostile_1m_count_no_argv(void **state) {
    resp_req *p = resp_req_new(NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("*1048576\r\n"), &c), KEEL_EAGAIN);
    assert_true(resp_req_pending_bytes(p) < 1024);
    for (int i = 0; i < 3; i++)
        assert_int_equal(resp_req_feed(p, S("$3\r\nabc\r\n"), &c), KEEL_EAGAIN);
    assert_true(resp_req_pending_bytes(p) < 1024);
    resp_req_free(p);
}

/* A declared 512 MiB bulk with 10 bytes sent holds about 10 bytes. */
static void hostile_big_bulk_partial(void **state) {
    resp_req *p = resp_req_new(NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("*1\r\n$536870912\r\n0123456789"), &c), KEEL_EAGAIN);
    assert_true(resp_req_pending_bytes(p) >= 10);
    assert_true(resp_req_pending_bytes(p) < 1024);
    resp_req_free(p);
}

/* Counts above a configured max_args are invalid; at the limit they pass. */
static void hostile_max_args(void **state) {
    resp_req *p = req_with(0, 2, 0, 0);
    size_t c;
    feed_one(p, S("*2\r\n$1\r\na\r\n$1\r\nb\r\n"));
    assert_int_equal(resp_req_feed(p, S("*3\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: invalid multibulk length");
    resp_req_free(p);
}

/* A bulk above a configured max_bulk is invalid; at the limit it passes. */
static void hostile_max_bulk(void **state) {
    resp_req *p = req_with(4, 0, 0, 0);
    size_t c;
    feed_one(p, S("*1\r\n$4\r\nabcd\r\n"));
    assert_int_equal(resp_req_feed(p, S("*1\r\n$5\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: invalid bulk length");
    resp_req_free(p);
}

/* A request whose bytes exceed max_query fails at the header declaring them. */
static void hostile_max_query(void **state) {
    resp_req *p = req_with(0, 0, 0, 32);
    size_t c;
    /* 4 + 4 + 3 + 2 + 4 + 5 + 2 = 24 bytes: fits. */
    feed_one(p, S("*2\r\n$3\r\nSET\r\n$5\r\nvalue\r\n"));
    assert_int_equal(resp_req_feed(p, S("*2\r\n$3\r\nSET\r\n$40\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: query buffer limit exceeded");
    resp_req_free(p);

    p = req_with(0, 0, 0, 8);
    assert_int_equal(resp_req_feed(p, S("GET somekey\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: query buffer limit exceeded");
    resp_req_free(p);

    p = req_with(0, 0, 0, 3);
    assert_int_equal(resp_req_feed(p, S("*1\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: query buffer limit exceeded");
    resp_req_free(p);
}

/* Header lines longer than max_inline are "too big ... count string". */
static void hostile_long_count_string(void **state) {
    resp_req *p = req_with(0, 0, 3, 0);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("*1000"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: too big mbulk count string");
    resp_req_free(p);
    p = req_with(0, 0, 3, 0);
    assert_int_equal(resp_req_feed(p, S("*1\r\n$1000\r\n"), &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: too big bulk count string");
    resp_req_free(p);
}

/* After a protocol error every feed fails, consuming nothing. */
static void hostile_error_is_final(void **state) {
    resp_req *p = resp_req_new(NULL);
    size_t c;
    assert_int_equal(resp_req_feed(p, S("*x"), &c), KEEL_EPROTO);
    assert_true(c <= 2);
    assert_int_equal(resp_req_feed(p, S("*1\r\n$4\r\nPING\r\n"), &c), KEEL_EPROTO);
    assert_int_equal(c, 0);
    assert_int_equal(resp_req_feed(p, NULL, 0, &c), KEEL_EPROTO);
    assert_string_equal(resp_req_error(p), "Protocol error: invalid multibulk length");
    resp_req_free(p);
}

/* A fresh parser reports no error, and freeing NULL is a no-op. */
static void req_no_error_and_free_null(void **state) {
    resp_req *p = resp_req_new(NULL);
    assert_string_equal(resp_req_error(p), "");
    size_t c = 99;
    assert_int_equal(resp_req_feed(p, NULL, 0, &c), KEEL_EAGAIN);
    assert_int_equal(c, 0);
    resp_req_free(p);
    resp_req_free(NULL);
}

/* ---- Reader --------------------------------------------------------------- */

static resp_value *read_one(const char *buf, size_t len) {
    resp_reader *r = resp_reader_new(NULL);
    resp_value *v = NULL;
    size_t c;
    assert_int_equal(resp_reader_feed(r, buf, len, &c, &v), 1);
    assert_int_equal(c, len);
    assert_non_null(v);
    resp_reader_free(r);
    return v;
}

static void read_fails(const resp_limits *l, const char *buf, size_t len) {
    resp_reader *r = resp_reader_new(l);
    resp_value *v = NULL;
    size_t c;
    int rc;
    size_t off = 0;
    while ((rc = resp_reader_feed(r, buf + off, len - off, &c, &v)) == 1) {
        resp_value_free(v);
        off += c;
    }
    assert_int_equal(rc, KEEL_EPROTO);
    assert_null(v);
    assert_true(strlen(resp_reader_error(r)) > 0);
    assert_int_equal(resp_reader_feed(r, S("+OK\r\n"), &c, &v), KEEL_EPROTO);
    resp_reader_free(r);
}

/* Strings: simple, error, bulk, verbatim (prefix kept), blob error, bignum. */
static void reader_string_types(void **state) {
    resp_value *v = read_one(S("+OK\r\n"));
    assert_int_equal(v->type, RESP_T_SIMPLE);
    assert_string_equal(v->str, "OK");
    resp_value_free(v);
    v = read_one(S("-ERR bad\r\n"));
    assert_int_equal(v->type, RESP_T_ERROR);
    assert_string_equal(v->str, "ERR bad");
    resp_value_free(v);
    v = read_one(S("$5\r\na\0b\r\n\r\n"));
    assert_int_equal(v->type, RESP_T_BULK);
    assert_int_equal(v->len, 5);
    assert_memory_equal(v->str, "a\0b\r\n", 6);
    resp_value_free(v);
    v = read_one(S("$0\r\n\r\n"));
    assert_int_equal(v->type, RESP_T_BULK);
    assert_int_equal(v->len, 0);
    assert_string_equal(v->str, "");
    resp_value_free(v);
    v = read_one(S("=8\r\ntxt:hi\r\n\r\n"));
    assert_int_equal(v->type, RESP_T_VERBATIM);
    assert_string_equal(v->str, "txt:hi\r\n");
    resp_value_free(v);
    v = read_one(S("!9\r\nERR oops!\r\n"));
    assert_int_equal(v->type, RESP_T_BULKERR);
    assert_string_equal(v->str, "ERR oops!");
    resp_value_free(v);
    v = read_one(S("(-3492890328409238509324850943850943825024385\r\n"));
    assert_int_equal(v->type, RESP_T_BIGNUM);
    assert_string_equal(v->str, "-3492890328409238509324850943850943825024385");
    resp_value_free(v);
}

/* Integers at both extremes; overflow and junk are protocol errors. */
static void reader_integers(void **state) {
    resp_value *v = read_one(S(":9223372036854775807\r\n"));
    assert_int_equal(v->type, RESP_T_INT);
    assert_true(v->integer == INT64_MAX);
    resp_value_free(v);
    v = read_one(S(":-9223372036854775808\r\n"));
    assert_true(v->integer == INT64_MIN);
    resp_value_free(v);
    read_fails(NULL, S(":9223372036854775808\r\n"));
    read_fails(NULL, S(":12a\r\n"));
    read_fails(NULL, S(":\r\n"));
}

/* Null in its three spellings, booleans, and doubles incl. inf and nan. */
static void reader_null_bool_double(void **state) {
    static const char *nulls[] = {"_\r\n", "$-1\r\n", "*-1\r\n"};
    for (int i = 0; i < 3; i++) {
        resp_value *v = read_one(nulls[i], strlen(nulls[i]));
        assert_int_equal(v->type, RESP_T_NULL);
        resp_value_free(v);
    }
    resp_value *v = read_one(S("#t\r\n"));
    assert_int_equal(v->type, RESP_T_BOOL);
    assert_int_equal(v->integer, 1);
    resp_value_free(v);
    v = read_one(S("#f\r\n"));
    assert_int_equal(v->integer, 0);
    resp_value_free(v);
    v = read_one(S(",3.25\r\n"));
    assert_int_equal(v->type, RESP_T_DOUBLE);
    assert_true(v->dbl == 3.25);
    resp_value_free(v);
    v = read_one(S(",-1.5e10\r\n"));
    assert_true(v->dbl == -1.5e10);
    resp_value_free(v);
    v = read_one(S(",inf\r\n"));
    assert_true(isinf(v->dbl) && v->dbl > 0);
    resp_value_free(v);
    v = read_one(S(",-inf\r\n"));
    assert_true(isinf(v->dbl) && v->dbl < 0);
    resp_value_free(v);
    v = read_one(S(",nan\r\n"));
    assert_true(isnan(v->dbl));
    resp_value_free(v);
    read_fails(NULL, S(",0x10\r\n"));
    read_fails(NULL, S(",1.5x\r\n"));
    read_fails(NULL, S("#x\r\n"));
    read_fails(NULL, S("_x\r\n"));
    read_fails(NULL, S("$-2\r\n"));
    read_fails(NULL, S("=-1\r\n"));
}

/* Aggregates: array, map (n = pairs), set, push, nested, and empty. */
static void reader_aggregates(void **state) {
    resp_value *v = read_one(S("*3\r\n:1\r\n*2\r\n+a\r\n$1\r\nb\r\n*0\r\n"));
    assert_int_equal(v->type, RESP_T_ARRAY);
    assert_int_equal(v->n, 3);
    assert_int_equal(v->elems[0]->integer, 1);
    assert_int_equal(v->elems[1]->n, 2);
    assert_string_equal(v->elems[1]->elems[1]->str, "b");
    assert_int_equal(v->elems[2]->type, RESP_T_ARRAY);
    assert_int_equal(v->elems[2]->n, 0);
    resp_value_free(v);
    v = read_one(S("%2\r\n+k1\r\n:1\r\n+k2\r\n_\r\n"));
    assert_int_equal(v->type, RESP_T_MAP);
    assert_int_equal(v->n, 2);
    assert_string_equal(v->elems[2]->str, "k2");
    assert_int_equal(v->elems[3]->type, RESP_T_NULL);
    resp_value_free(v);
    v = read_one(S("~2\r\n+a\r\n+b\r\n"));
    assert_int_equal(v->type, RESP_T_SET);
    assert_int_equal(v->n, 2);
    resp_value_free(v);
    v = read_one(S(">3\r\n+message\r\n+ch\r\n$2\r\nhi\r\n"));
    assert_int_equal(v->type, RESP_T_PUSH);
    assert_string_equal(v->elems[2]->str, "hi");
    resp_value_free(v);
    read_fails(NULL, S("%-1\r\n"));
    read_fails(NULL, S("*-2\r\n"));
}

/* A top-level attribute is returned first; a nested one is dropped. */
static void reader_attributes(void **state) {
    static const char buf[] = "|1\r\n+ttl\r\n:5\r\n+OK\r\n"
                              "*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n";
    resp_reader *r = resp_reader_new(NULL);
    resp_value *v;
    size_t c, off = 0;
    assert_int_equal(resp_reader_feed(r, buf, sizeof(buf) - 1, &c, &v), 1);
    assert_int_equal(v->type, RESP_T_ATTR);
    assert_int_equal(v->n, 1);
    assert_string_equal(v->elems[0]->str, "ttl");
    resp_value_free(v);
    off += c;
    assert_int_equal(resp_reader_feed(r, buf + off, sizeof(buf) - 1 - off, &c, &v), 1);
    assert_string_equal(v->str, "OK");
    resp_value_free(v);
    off += c;
    assert_int_equal(resp_reader_feed(r, buf + off, sizeof(buf) - 1 - off, &c, &v), 1);
    assert_int_equal(v->type, RESP_T_ARRAY);
    assert_int_equal(v->n, 2);
    assert_int_equal(v->elems[0]->integer, 1);
    assert_int_equal(v->elems[1]->integer, 2);
    resp_value_free(v);
    assert_int_equal(off + c, sizeof(buf) - 1);
    resp_reader_free(r);
}

/* Split at every byte, a nested RESP3 reply still reads the same. */
static void reader_every_split_point(void **state) {
    static const char buf[] = "*4\r\n%1\r\n+k\r\n~1\r\n,1.5\r\n$3\r\nabc\r\n=7\r\ntxt:xyz\r\n"
                              ">1\r\n#t\r\n";
    size_t len = sizeof(buf) - 1;
    for (size_t k = 0; k < len; k++) {
        resp_reader *r = resp_reader_new(NULL);
        resp_value *v;
        size_t c;
        assert_int_equal(resp_reader_feed(r, buf, k, &c, &v), KEEL_EAGAIN);
        assert_int_equal(c, k);
        assert_null(v);
        assert_int_equal(resp_reader_feed(r, buf + k, len - k, &c, &v), 1);
        assert_int_equal(c, len - k);
        assert_int_equal(v->n, 4);
        assert_true(v->elems[0]->elems[1]->elems[0]->dbl == 1.5);
        assert_string_equal(v->elems[2]->str, "txt:xyz");
        assert_int_equal(v->elems[3]->elems[0]->integer, 1);
        resp_value_free(v);
        resp_reader_free(r);
    }
}

/* Byte-by-byte feeding of several pipelined replies. */
static void reader_byte_by_byte_pipelined(void **state) {
    static const char buf[] = "+OK\r\n:42\r\n$3\r\nfoo\r\n";
    resp_reader *r = resp_reader_new(NULL);
    resp_value *v;
    size_t c;
    int got = 0;
    for (size_t i = 0; i < sizeof(buf) - 1; i++) {
        int rc = resp_reader_feed(r, buf + i, 1, &c, &v);
        assert_int_equal(c, 1);
        if (rc == 1) {
            got++;
            resp_value_free(v);
        } else {
            assert_int_equal(rc, KEEL_EAGAIN);
        }
    }
    assert_int_equal(got, 3);
    resp_reader_free(r);
}

/* Nesting up to max_depth is fine; one level more is a protocol error. */
static void reader_max_depth(void **state) {
    char buf[128];
    size_t n = 0;
    for (int i = 0; i < 7; i++)
        n += (size_t)sprintf(buf + n, "*1\r\n");
    n += (size_t)sprintf(buf + n, ":1\r\n");
    resp_value *v = read_one(buf, n);
    resp_value_free(v);

    n = 0;
    for (int i = 0; i < 8; i++)
        n += (size_t)sprintf(buf + n, "*1\r\n");
    n += (size_t)sprintf(buf + n, ":1\r\n");
    read_fails(NULL, buf, n);

    resp_limits l;
    resp_limits_default(&l);
    l.max_depth = 1;
    read_fails(&l, S("*1\r\n%0\r\n"));
}

/* Bad type bytes, bare LF, bulk over max_bulk, missing CRLF, bad verbatim. */
static void reader_hostile(void **state) {
    read_fails(NULL, S("?x\r\n"));
    read_fails(NULL, S("+OK\n"));
    read_fails(NULL, S("+OK\rX"));
    read_fails(NULL, S("$3\r\nabcX\r\n"));
    read_fails(NULL, S("=3\r\nabc\r\n"));
    read_fails(NULL, S("=4\r\nabcd\r\n"));
    read_fails(NULL, S("(12a\r\n"));
    read_fails(NULL, S("(\r\n"));
    resp_limits l;
    resp_limits_default(&l);
    l.max_bulk = 4;
    read_fails(&l, S("$5\r\n"));
    l.max_inline = 4;
    read_fails(&l, S("+hello"));
}

/* A value whose wire bytes exceed max_query fails, by line or by bulk. */
static void reader_max_query(void **state) {
    resp_limits l;
    resp_limits_default(&l);
    l.max_query = 15;
    resp_value *v;
    resp_reader *r = resp_reader_new(&l);
    size_t c;
    assert_int_equal(resp_reader_feed(r, S("*2\r\n:1\r\n:2\r\n"), &c, &v), 1);
    resp_value_free(v);
    resp_reader_free(r);
    read_fails(&l, S("*3\r\n:1\r\n:2\r\n:3\r\n"));
    read_fails(&l, S("*2\r\n:1\r\n$10\r\n"));
}

/* An error inside a partial aggregate frees it and leaves the reader dead. */
static void reader_error_mid_aggregate(void **state) {
    read_fails(NULL, S("*3\r\n$1\r\na\r\n*2\r\n:1\r\n?\r\n"));
}

/* ---- Writer --------------------------------------------------------------- */

static void expect_buf(kbuf *b, const char *want, size_t len) {
    assert_int_equal(b->len, len);
    assert_memory_equal(b->p, want, len);
    b->len = 0;
}

#define EXPECT(b, lit) expect_buf(b, lit, sizeof(lit) - 1)

/* Simple strings, errors (CR/LF become spaces), errorf, integers. */
static void writer_scalars(void **state) {
    kbuf b;
    kbuf_init(&b);
    assert_int_equal(resp_w_simple(&b, "OK"), 0);
    EXPECT(&b, "+OK\r\n");
    assert_int_equal(resp_w_error(&b, "ERR a\r\nb"), 0);
    EXPECT(&b, "-ERR a  b\r\n");
    assert_int_equal(resp_w_errorf(&b, "ERR %s %d", "x", 7), 0);
    EXPECT(&b, "-ERR x 7\r\n");
    char big[1000];
    memset(big, 'e', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(resp_w_errorf(&b, "%s\n", big), 0);
    assert_int_equal(b.len, 1 + 999 + 1 + 2);
    assert_int_equal(b.p[1000], ' ');
    b.len = 0;
    assert_int_equal(resp_w_int(&b, 0), 0);
    EXPECT(&b, ":0\r\n");
    assert_int_equal(resp_w_int(&b, -42), 0);
    EXPECT(&b, ":-42\r\n");
    assert_int_equal(resp_w_int(&b, INT64_MIN), 0);
    EXPECT(&b, ":-9223372036854775808\r\n");
    assert_int_equal(resp_w_int(&b, INT64_MAX), 0);
    EXPECT(&b, ":9223372036854775807\r\n");
    kbuf_close(&b);
}

/* Bulk strings, binary and empty, and headers for arrays. */
static void writer_bulk_array(void **state) {
    kbuf b;
    kbuf_init(&b);
    assert_int_equal(resp_w_bulk(&b, "a\0b", 3), 0);
    EXPECT(&b, "$3\r\na\0b\r\n");
    assert_int_equal(resp_w_bulk(&b, NULL, 0), 0);
    EXPECT(&b, "$0\r\n\r\n");
    assert_int_equal(resp_w_bulkstr(&b, "hello"), 0);
    EXPECT(&b, "$5\r\nhello\r\n");
    assert_int_equal(resp_w_array(&b, 12), 0);
    EXPECT(&b, "*12\r\n");
    kbuf_close(&b);
}

/* RESP3-only types degrade to their RESP2 forms with proto 2. */
static void writer_proto2(void **state) {
    kbuf b;
    kbuf_init(&b);
    resp_w_null(&b, 2);
    EXPECT(&b, "$-1\r\n");
    resp_w_null_array(&b, 2);
    EXPECT(&b, "*-1\r\n");
    resp_w_map(&b, 2, 3);
    EXPECT(&b, "*6\r\n");
    resp_w_set(&b, 2, 4);
    EXPECT(&b, "*4\r\n");
    resp_w_bool(&b, 2, 1);
    EXPECT(&b, ":1\r\n");
    resp_w_bool(&b, 2, 0);
    EXPECT(&b, ":0\r\n");
    resp_w_double(&b, 2, 1.5);
    EXPECT(&b, "$3\r\n1.5\r\n");
    resp_w_double(&b, 2, 0.1);
    EXPECT(&b, "$19\r\n0.10000000000000001\r\n");
    resp_w_double(&b, 2, INFINITY);
    EXPECT(&b, "$3\r\ninf\r\n");
    resp_w_double(&b, 2, -INFINITY);
    EXPECT(&b, "$4\r\n-inf\r\n");
    resp_w_double(&b, 2, -NAN);
    EXPECT(&b, "$3\r\nnan\r\n");
    resp_w_verbatim(&b, 2, "txt", "hi", 2);
    EXPECT(&b, "$2\r\nhi\r\n");
    kbuf_close(&b);
}

/* RESP3 forms with proto 3. */
static void writer_proto3(void **state) {
    kbuf b;
    kbuf_init(&b);
    resp_w_null(&b, 3);
    EXPECT(&b, "_\r\n");
    resp_w_null_array(&b, 3);
    EXPECT(&b, "_\r\n");
    resp_w_map(&b, 3, 3);
    EXPECT(&b, "%3\r\n");
    resp_w_set(&b, 3, 4);
    EXPECT(&b, "~4\r\n");
    resp_w_bool(&b, 3, 1);
    EXPECT(&b, "#t\r\n");
    resp_w_bool(&b, 3, 0);
    EXPECT(&b, "#f\r\n");
    resp_w_double(&b, 3, 1.5);
    EXPECT(&b, ",1.5\r\n");
    resp_w_double(&b, 3, -INFINITY);
    EXPECT(&b, ",-inf\r\n");
    resp_w_double(&b, 3, NAN);
    EXPECT(&b, ",nan\r\n");
    resp_w_verbatim(&b, 3, "txt", "hi", 2);
    EXPECT(&b, "=6\r\ntxt:hi\r\n");
    resp_w_verbatim(&b, 3, "toolong", "", 0);
    EXPECT(&b, "=4\r\ntxt:\r\n");
    kbuf_close(&b);
}

/* What the writer produces, the reader reads back (proto 3). */
static void writer_reader_roundtrip(void **state) {
    kbuf b;
    kbuf_init(&b);
    resp_w_map(&b, 3, 1);
    resp_w_bulkstr(&b, "k");
    resp_w_array(&b, 3);
    resp_w_double(&b, 3, -2.5);
    resp_w_bool(&b, 3, 1);
    resp_w_verbatim(&b, 3, "mkd", "# x", 3);
    resp_value *v = read_one(b.p, b.len);
    assert_int_equal(v->type, RESP_T_MAP);
    assert_string_equal(v->elems[0]->str, "k");
    assert_true(v->elems[1]->elems[0]->dbl == -2.5);
    assert_int_equal(v->elems[1]->elems[1]->integer, 1);
    assert_string_equal(v->elems[1]->elems[2]->str, "mkd:# x");
    resp_value_free(v);
    kbuf_close(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limits_defaults),
        cmocka_unit_test(req_complete_frame),
        cmocka_unit_test(req_every_split_point),
        cmocka_unit_test(req_byte_by_byte),
        cmocka_unit_test(req_pipelined),
        cmocka_unit_test(req_args_are_copies),
        cmocka_unit_test(req_binary_bulk),
        cmocka_unit_test(req_empty_bulk),
        cmocka_unit_test(req_empty_multibulk_skipped),
        cmocka_unit_test(req_reuse_many),
        cmocka_unit_test(req_many_args_then_small),
        cmocka_unit_test(req_no_error_and_free_null),
        cmocka_unit_test(inline_simple),
        cmocka_unit_test(inline_quotes),
        cmocka_unit_test(inline_escapes),
        cmocka_unit_test(inline_bad_hex_escape),
        cmocka_unit_test(inline_unbalanced_quotes),
        cmocka_unit_test(inline_quote_then_text),
        cmocka_unit_test(inline_empty_line_skipped),
        cmocka_unit_test(inline_every_split_point),
        cmocka_unit_test(inline_nul_ends_line),
        cmocka_unit_test(inline_too_big),
        cmocka_unit_test(inline_max_args),
        cmocka_unit_test(hostile_bad_mbulk_count),
        cmocka_unit_test(hostile_huge_mbulk_count),
        cmocka_unit_test(hostile_bad_bulk_len),
        cmocka_unit_test(hostile_header_crlf),
        cmocka_unit_test(hostile_nul_in_header),
        cmocka_unit_test(hostile_missing_bulk_crlf),
        cmocka_unit_test(hostile_truncated_is_eagain),
        cmocka_unit_test(hostile_nested_array),
        cmocka_unit_test(hostile_1m_count_no_argv),
        cmocka_unit_test(hostile_big_bulk_partial),
        cmocka_unit_test(hostile_max_args),
        cmocka_unit_test(hostile_max_bulk),
        cmocka_unit_test(hostile_max_query),
        cmocka_unit_test(hostile_long_count_string),
        cmocka_unit_test(hostile_error_is_final),
        cmocka_unit_test(reader_string_types),
        cmocka_unit_test(reader_integers),
        cmocka_unit_test(reader_null_bool_double),
        cmocka_unit_test(reader_aggregates),
        cmocka_unit_test(reader_attributes),
        cmocka_unit_test(reader_every_split_point),
        cmocka_unit_test(reader_byte_by_byte_pipelined),
        cmocka_unit_test(reader_max_depth),
        cmocka_unit_test(reader_hostile),
        cmocka_unit_test(reader_max_query),
        cmocka_unit_test(reader_error_mid_aggregate),
        cmocka_unit_test(writer_scalars),
        cmocka_unit_test(writer_bulk_array),
        cmocka_unit_test(writer_proto2),
        cmocka_unit_test(writer_proto3),
        cmocka_unit_test(writer_reader_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
