/* test-hiredis-uv.c - net/hiredis_uv: a hiredis async context on a libuv
 * loop, against a plain-socket server in the test.
 *
 * The binding writes hiredis' buffer from a uv_prepare handle instead of
 * polling for writable, and polls for writable only when a write left bytes
 * behind or a connect is in progress. The cases check what a caller relies
 * on: every command's reply arrives, in order; a command larger than the
 * socket buffers still goes out whole once the peer reads, woken by the
 * writable event alone (it fails, at its 5 s watchdog, if a full socket
 * makes the binding try again only at the next unrelated wakeup: checked);
 * a refused dial ends in the connect callback instead of hanging; a context
 * freed from a reply callback (the prepare handle armed) is closed cleanly
 * (ASan build). The server is the test's own: a listening socket accepted
 * without blocking while the test pumps the loop with UV_RUN_NOWAIT, or a
 * thread for the large command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "core/clock.h"
#include "net/hiredis_uv.h"

typedef struct fx {
    uv_loop_t loop;
    int lfd, port;    /* the test server's listening socket */
    int sfd;          /* its accepted connection (-1: none yet) */
    int reading;      /* the server reads (and answers) only while set */
    size_t got;       /* bytes the server has read */
    size_t cmd_bytes; /* each command's size on the wire: one reply per this many */
    size_t answered;  /* replies the server has written */
    redisAsyncContext *ac;
    int connected, disconnected, connect_status;
    int replies, in_order;
    int free_on_reply; /* the reply callback frees the context at this reply */
} fx;

static fx F;

static int listen_any(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t n = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &n);
    *port = ntohs(a.sin_port);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* One step of the test server: accept, read what came, answer "+OK" once
 * per cmd_bytes read. */
static void serve(fx *f) {
    if (f->sfd < 0) {
        f->sfd = accept(f->lfd, NULL, NULL);
        if (f->sfd >= 0) fcntl(f->sfd, F_SETFL, O_NONBLOCK);
    }
    if (f->sfd < 0 || !f->reading) return;
    char buf[65536];
    ssize_t n;
    while ((n = read(f->sfd, buf, sizeof buf)) > 0)
        f->got += (size_t)n;
    while (f->answered < f->got / f->cmd_bytes) {
        assert_int_equal(write(f->sfd, "+OK\r\n", 5), 5);
        f->answered++;
    }
}

/* Pumps loop and server until done(f) or 5 s. */
static void pump(fx *f, int (*done)(fx *)) {
    uint64_t t0 = keel_mono_us();
    while (!done(f) && keel_mono_us() - t0 < 5000000ull) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        serve(f);
    }
}

static void on_connect(const redisAsyncContext *ac, int status) {
    fx *f = ac->data;
    f->connected = 1;
    f->connect_status = status;
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    (void)status;
    fx *f = ac->data;
    f->disconnected = 1;
    f->ac = NULL;
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv) {
    fx *f = ac->data;
    redisReply *rep = r;
    if (!rep) return; /* freed or dropped: the context is going */
    if ((intptr_t)priv != f->replies || rep->type != REDIS_REPLY_STATUS) f->in_order = 0;
    f->replies++;
    if (f->free_on_reply && f->replies == f->free_on_reply) redisAsyncFree(ac);
}

static int setup(void **state) {
    (void)state;
    memset(&F, 0, sizeof F);
    uv_loop_init(&F.loop);
    F.lfd = listen_any(&F.port);
    F.sfd = -1;
    F.reading = 1;
    F.in_order = 1;
    F.cmd_bytes = 14; /* *1\r\n$4\r\nPING\r\n */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (F.ac) redisAsyncFree(F.ac);
    F.ac = NULL;
    for (int i = 0; i < 10; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
    if (F.sfd >= 0) close(F.sfd);
    close(F.lfd);
    assert_int_equal(uv_loop_close(&F.loop), 0); /* every handle closed */
    return 0;
}

static void dial(fx *f, int port) {
    f->ac = redisAsyncConnect("127.0.0.1", port);
    assert_non_null(f->ac);
    assert_int_equal(f->ac->err, 0);
    f->ac->data = f;
    assert_int_equal(hiredis_uv_attach(f->ac, &f->loop), REDIS_OK);
    assert_int_equal(hiredis_uv_attach(f->ac, &f->loop), REDIS_ERR); /* once only */
    redisAsyncSetConnectCallback(f->ac, on_connect);
    redisAsyncSetDisconnectCallback(f->ac, on_disconnect);
}

static int want;
static int got_want(fx *f) {
    return f->replies >= want;
}
static int is_connected(fx *f) {
    return f->connected;
}
static int is_disconnected(fx *f) {
    return f->disconnected;
}

/* Commands queued before the connect completes, then batches of them from
 * inside the loop: every reply, in order. */
static void test_replies_in_order(void **state) {
    (void)state;
    dial(&F, F.port);
    for (intptr_t i = 0; i < 10; i++) /* before the connect: the poll must wait for it */
        assert_int_equal(redisAsyncCommand(F.ac, on_reply, (void *)i, "PING"), REDIS_OK);
    pump(&F, is_connected);
    assert_int_equal(F.connect_status, REDIS_OK);
    want = 10;
    pump(&F, got_want);
    assert_int_equal(F.replies, 10);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 20; i++)
            assert_int_equal(
                redisAsyncCommand(F.ac, on_reply, (void *)(intptr_t)(F.replies + i), "PING"),
                REDIS_OK);
        /* priv counts from the replies so far: each batch is sent after the
         * previous one was answered */
        want = F.replies + 20;
        pump(&F, got_want);
    }
    assert_int_equal(F.replies, 1010);
    assert_true(F.in_order);
    assert_int_equal(F.got, 1010 * 14);
}

/* A command far larger than the socket buffers, while the server (a
 * thread here, blocking) does not read: the first write leaves most of it
 * behind. Once the server reads, the rest must go out on the poll's
 * writable event alone: the loop runs with nothing else to wake it (a
 * watchdog timer at 5 s), so a binding that tried again only at the next
 * unrelated wakeup would leave the reply unanswered. */
typedef struct big_server {
    int lfd;
    size_t want;
    volatile int go; /* start reading */
    int cfd;
    size_t got;
} big_server;

static void *big_serve(void *arg) {
    big_server *b = arg;
    b->cfd = accept(b->lfd, NULL, NULL);
    while (!b->go)
        usleep(1000);
    char buf[65536];
    while (b->cfd >= 0 && b->got < b->want) {
        ssize_t n = read(b->cfd, buf, sizeof buf);
        if (n <= 0) break;
        b->got += (size_t)n;
    }
    if (b->got == b->want && write(b->cfd, "+OK\r\n", 5) != 5) b->got = 0;
    return NULL;
}

static void on_big_reply(redisAsyncContext *ac, void *r, void *priv) {
    (void)priv;
    fx *f = ac->data;
    if (r) f->replies++;
    uv_stop(&f->loop);
}

static void on_watchdog(uv_timer_t *t) {
    uv_stop(t->loop);
}

static void test_large_command_waits_for_room(void **state) {
    (void)state;
    big_server b = {.cfd = -1};
    int port;
    b.lfd = listen_any(&port);
    fcntl(b.lfd, F_SETFL, 0); /* the thread's accept blocks */
    size_t vlen = 16u << 20;
    char hdr[64];
    b.want = (size_t)snprintf(hdr, sizeof hdr, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%zu\r\n", vlen) +
             vlen + 2;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, big_serve, &b), 0);
    dial(&F, port);
    pump(&F, is_connected);
    assert_int_equal(F.connect_status, REDIS_OK);
    char *v = malloc(vlen);
    memset(v, 'x', vlen);
    assert_int_equal(redisAsyncCommand(F.ac, on_big_reply, NULL, "SET k %b", v, vlen), REDIS_OK);
    free(v);
    for (int i = 0; i < 200; i++) /* the first writes: the socket fills */
        uv_run(&F.loop, UV_RUN_NOWAIT);
    assert_int_equal(F.replies, 0);
    b.go = 1;
    uv_timer_t dog;
    uv_timer_init(&F.loop, &dog);
    uv_timer_start(&dog, on_watchdog, 5000, 0);
    uv_run(&F.loop, UV_RUN_DEFAULT); /* until the reply or the watchdog */
    uv_close((uv_handle_t *)&dog, NULL);
    uv_run(&F.loop, UV_RUN_NOWAIT); /* the close completes while dog is in scope */
    assert_int_equal(F.replies, 1);
    pthread_join(th, NULL);
    assert_int_equal(b.got, b.want);
    if (b.cfd >= 0) close(b.cfd);
    close(b.lfd);
}

/* A dial to a port nobody listens on ends in the connect callback with an
 * error (and no handle left open: teardown closes the loop). */
static void test_refused_dial_reports(void **state) {
    (void)state;
    int port;
    int fd = listen_any(&port);
    close(fd); /* the port is free now: nothing listens */
    dial(&F, port);
    assert_int_equal(redisAsyncCommand(F.ac, on_reply, (void *)0, "PING"), REDIS_OK);
    pump(&F, is_connected);
    assert_int_equal(F.connected, 1);
    assert_int_not_equal(F.connect_status, REDIS_OK);
    F.ac = NULL; /* hiredis frees a context whose connect failed */
    assert_int_equal(F.replies, 0);
}

/* The context freed inside a reply callback while more commands are
 * queued (the prepare handle is armed): the remaining callbacks run with
 * NULL, the disconnect callback runs, and both handles close (teardown's
 * uv_loop_close fails otherwise; ASan sees any leak or use after free). */
static void test_free_from_reply_callback(void **state) {
    (void)state;
    dial(&F, F.port);
    pump(&F, is_connected);
    F.free_on_reply = 3;
    for (intptr_t i = 0; i < 5; i++)
        assert_int_equal(redisAsyncCommand(F.ac, on_reply, (void *)i, "PING"), REDIS_OK);
    pump(&F, is_disconnected);
    assert_int_equal(F.disconnected, 1);
    assert_int_equal(F.replies, 3);
    assert_null(F.ac);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replies_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_command_waits_for_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_dial_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_from_reply_callback, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
