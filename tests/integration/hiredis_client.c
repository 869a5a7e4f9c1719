/* hiredis_client.c - a real hiredis client against a keel node.
 *
 * Run by tests/integration/test_clients as
 *     hiredis_client HOST PORT
 * against a node that owns every slot. It checks SET/GET/INCR/MGET/DEL
 * replies, then pipelines 1000 SETs and 1000 GETs (appended without reading,
 * then read back in order) and checks every reply. Prints one line per check
 * and exits 0 if all passed, 1 otherwise.
 */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!ok) failures++;
}

/* Runs one command; returns the reply (NULL on I/O error, reported). */
static redisReply *cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (!r) check(0, "command '%s': I/O error: %s", fmt, c->errstr);
    return r;
}

static int is_status(const redisReply *r, const char *s) {
    return r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
}

static int is_string(const redisReply *r, const char *s, size_t len) {
    return r && r->type == REDIS_REPLY_STRING && r->len == len && memcmp(r->str, s, len) == 0;
}

static int is_int(const redisReply *r, long long v) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == v;
}

static void basics(redisContext *c) {
    redisReply *r;
    static const char bin[] = "a\0b\r\nc";

    r = cmd(c, "PING");
    check(is_status(r, "PONG"), "PING -> PONG");
    freeReplyObject(r);

    r = cmd(c, "SET %s %s", "hiredis:k", "hello");
    check(is_status(r, "OK"), "SET -> OK");
    freeReplyObject(r);

    r = cmd(c, "GET %s", "hiredis:k");
    check(is_string(r, "hello", 5), "GET -> hello");
    freeReplyObject(r);

    r = cmd(c, "SET %b %b", "hiredis:bin", (size_t)5, bin, sizeof bin - 1);
    check(is_status(r, "OK"), "SET binary key/value -> OK");
    freeReplyObject(r);

    r = cmd(c, "GET %b", "hiredis:bin", (size_t)5);
    check(is_string(r, bin, sizeof bin - 1), "GET binary value round-trips");
    freeReplyObject(r);

    r = cmd(c, "GET %s", "hiredis:missing");
    check(r && r->type == REDIS_REPLY_NIL, "GET missing -> nil");
    freeReplyObject(r);

    r = cmd(c, "DEL %s", "hiredis:ctr");
    freeReplyObject(r);
    r = cmd(c, "INCR %s", "hiredis:ctr");
    check(is_int(r, 1), "INCR -> 1");
    freeReplyObject(r);
    r = cmd(c, "INCRBY %s %d", "hiredis:ctr", 41);
    check(is_int(r, 42), "INCRBY 41 -> 42");
    freeReplyObject(r);

    r = cmd(c, "MSET %s %s %s %s", "{hr}a", "1", "{hr}b", "2");
    check(is_status(r, "OK"), "MSET same slot -> OK");
    freeReplyObject(r);
    r = cmd(c, "MGET %s %s %s", "{hr}a", "{hr}b", "{hr}nope");
    check(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
              is_string(r->element[0], "1", 1) && is_string(r->element[1], "2", 1) &&
              r->element[2]->type == REDIS_REPLY_NIL,
          "MGET -> [1, 2, nil]");
    freeReplyObject(r);

    r = cmd(c, "MGET %s %s", "a", "b");
    check(r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CROSSSLOT", 9) == 0,
          "MGET across slots -> CROSSSLOT error");
    freeReplyObject(r);

    r = cmd(c, "DEL %s %s", "{hr}a", "{hr}b");
    check(is_int(r, 2), "DEL 2 keys -> 2");
    freeReplyObject(r);
}

static void pipelined(redisContext *c) {
    enum { N = 1000 };
    char key[64], val[64];
    int bad = 0, i;
    redisReply *r;

    for (i = 0; i < N; i++) {
        snprintf(key, sizeof key, "hiredis:pipe:%d", i);
        snprintf(val, sizeof val, "value-%d", i * 7);
        redisAppendCommand(c, "SET %s %s", key, val);
    }
    for (i = 0; i < N; i++) {
        snprintf(key, sizeof key, "hiredis:pipe:%d", i);
        redisAppendCommand(c, "GET %s", key);
    }
    for (i = 0; i < N; i++) {
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            check(0, "pipelined SET %d: I/O error: %s", i, c->errstr);
            return;
        }
        bad += !is_status(r, "OK");
        freeReplyObject(r);
    }
    check(bad == 0, "1000 pipelined SETs -> OK (%d bad)", bad);
    bad = 0;
    for (i = 0; i < N; i++) {
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            check(0, "pipelined GET %d: I/O error: %s", i, c->errstr);
            return;
        }
        snprintf(val, sizeof val, "value-%d", i * 7);
        bad += !is_string(r, val, strlen(val));
        freeReplyObject(r);
    }
    check(bad == 0, "1000 pipelined GETs return their values in order (%d bad)", bad);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s HOST PORT\n", argv[0]);
        return 2;
    }
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectWithTimeout(argv[1], atoi(argv[2]), tv);
    if (!c || c->err) {
        fprintf(stderr, "connect %s:%s: %s\n", argv[1], argv[2], c ? c->errstr : "out of memory");
        redisFree(c);
        return 1;
    }
    redisSetTimeout(c, tv);
    basics(c);
    pipelined(c);
    redisFree(c);
    printf("%s\n", failures ? "hiredis_client: FAILED" : "hiredis_client: all passed");
    return failures ? 1 : 0;
}
