/* test-rserver.c - rserver's held requests (a dispatch that returns
 * RSERVER_HOLD pauses its connection until rserver_resume) and sealed turns
 * (a turn's replies wait for rserver_release).
 *
 * Each case starts a real rserver on a loopback port of a private uv loop
 * and talks to it through plain blocking sockets, read without blocking
 * while the test pumps the loop with UV_RUN_NOWAIT. The test dispatch holds
 * "HOLD <arg>" unless a pass is available (f.passes), answers "RELEASE" by
 * resuming the held client from inside its own dispatch, and answers
 * anything else "+OK <arg>". Run under ASan (make build-asan) the cases also
 * show that held clients are freed on disconnect and on rserver_stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "core/clock.h"
#include "net/rserver.h"
#include "resp/resp.h"

static int64_t now_ms(void) {
    return (int64_t)(keel_mono_us() / 1000);
}

/* ---- Fixture ----------------------------------------------------------- */

typedef struct fixture {
    uv_loop_t loop;
    rserver *rs;
    int port;
    int passes;       /* HOLD dispatches that may pass before they hold again */
    client *held;     /* the client whose HOLD is held, as the owner tracks it */
    int holds;        /* RSERVER_HOLD returns */
    int closes;       /* on_close calls */
    int held_closes;  /* on_close calls for a client that was held */
    client *released; /* RELEASE's target, reported back to the test */
    int sealing;      /* seal_turn seals every turn while set */
    uint64_t token;   /* the last seal token handed out */
    int seals;        /* seal_turn calls that sealed */
    int seal_calls;   /* seal_turn calls, sealing or not */
    int probe_fd;     /* > 0: before_flush reads what this client socket has got */
    char probe[256];  /* ... into here */
    size_t probe_len;
    int probe_calls;
    int clean;          /* what turn_clean answers */
    int busy_probe_fd;  /* > 0: BUSY's loop reads what this client has got */
    char busy_got[256]; /* ... into here, while the busy dispatch runs */
    size_t busy_len;
} fixture;

static fixture f;

static int recv_some(int fd, char *buf, size_t cap, size_t *len);

static int t_dispatch(void *arg, client *c, int argc, char **argv, const size_t *argvlen) {
    fixture *fx = arg;
    (void)argvlen;
    const char *a1 = argc > 1 ? argv[1] : "";
    if (!strcasecmp(argv[0], "HOLD")) {
        if (fx->passes == 0) {
            fx->holds++;
            fx->held = c;
            return RSERVER_HOLD;
        }
        fx->passes--;
        if (fx->held == c) fx->held = NULL;
    } else if (!strcasecmp(argv[0], "RELEASE")) {
        /* Resume another client from inside this one's dispatch. */
        client *h = fx->held;
        fx->passes += argc > 1 ? atoi(a1) : 1;
        fx->released = h;
        rserver_resume(h);
    } else if (!strcasecmp(argv[0], "RELSEAL")) {
        /* Releases every seal from inside a dispatch, as a follower's ACK
         * arriving during a turn does. */
        rserver_release(fx->rs, fx->token);
    } else if (!strcasecmp(argv[0], "BUSY")) {
        /* A script running past its time limit: serves the others through
         * rserver_poll_busy for a1 ms, noting what the probed client got. */
        int64_t end = now_ms() + atoi(a1);
        int sent = 0;
        while (now_ms() < end) {
            rserver_poll_busy(fx->rs, c);
            if (fx->busy_probe_fd <= 0) continue;
            (void)recv_some(fx->busy_probe_fd, fx->busy_got, sizeof fx->busy_got, &fx->busy_len);
            /* Once its queued replies are in, the probe asks again: now it is
             * served by the busy poll itself. */
            if (!sent && strstr(fx->busy_got, "a2")) {
                sent = 1;
                if (send(fx->busy_probe_fd, "PING a3\r\n", 9, 0) != 9) abort();
            }
        }
    } else if (!strcasecmp(argv[0], "SILENT")) {
        /* A request that answers nothing (a one-way replication message);
         * with "touch" its turn end must still run as for a reply. */
        if (!strcasecmp(a1, "touch")) rserver_touch(c);
        return 0;
    } else if (!strcasecmp(argv[0], "QUIT")) {
        rserver_close_after_reply(c);
    } else if (!strcasecmp(argv[0], "OOMREPLY")) {
        /* Half a reply, then an append that fails as out of memory does. */
        resp_w_array(&c->out, 2);
        resp_w_bulk(&c->out, "x", 1);
        if (kbuf_reserve(&c->out, (size_t)-1) == 0) abort();
        return 0;
    }
    char line[128];
    snprintf(line, sizeof line, "OK %s", a1);
    resp_w_simple(&c->out, line);
    return 0;
}

static void t_on_close(void *arg, client *c) {
    fixture *fx = arg;
    fx->closes++;
    if (rserver_is_held(c)) fx->held_closes++;
    if (fx->held == c) fx->held = NULL;
}

/* Seals every turn while f.sealing, as a replicating node's turn waits for
 * its followers. */
static uint64_t t_seal_turn(void *arg) {
    fixture *fx = arg;
    fx->seal_calls++;
    if (!fx->sealing) return 0;
    fx->seals++;
    return ++fx->token;
}

/* The store's answer: nothing of this turn awaits its group commit. */
static int t_turn_clean(void *arg) {
    return ((fixture *)arg)->clean;
}

/* The turn's group commit: records what the probed client has received
 * before it (the turn's own replies must not have left yet). */
static int t_before_flush(void *arg) {
    fixture *fx = arg;
    if (fx->probe_fd > 0 && !fx->probe_len) { /* until it first got something */
        fx->probe_calls++;
        (void)recv_some(fx->probe_fd, fx->probe, sizeof fx->probe, &fx->probe_len);
    }
    return 0;
}

static const rserver_ops t_ops = {.dispatch = t_dispatch,
                                  .on_close = t_on_close,
                                  .seal_turn = t_seal_turn,
                                  .before_flush = t_before_flush,
                                  .turn_clean = t_turn_clean};

static int setup(void **state) {
    (void)state;
    memset(&f, 0, sizeof f);
    assert_int_equal(uv_loop_init(&f.loop), 0);
    rserver_config cfg = {.bind = "127.0.0.1", .maxclients = 100, .max_output = 1 << 20};
    resp_limits_default(&cfg.limits);
    srand((unsigned)(time(NULL) ^ getpid()));
    char err[256];
    for (int i = 0; i < 50; i++) { /* a random high port; retry if taken */
        cfg.port = 20000 + rand() % 40000;
        if (rserver_start(&f.loop, &cfg, &t_ops, &f, &f.rs, err, sizeof err) == 0) {
            f.port = cfg.port;
            return 0;
        }
        uv_run(&f.loop, UV_RUN_NOWAIT); /* the failed listener's close */
    }
    fail_msg("no free port: %s", err);
    return -1;
}

static int teardown(void **state) {
    (void)state;
    rserver_stop(f.rs);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    return 0;
}

/* Turns the loop without blocking for about ms milliseconds. */
static void pump(int ms) {
    int64_t end = now_ms() + ms;
    do {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        usleep(1000);
    } while (now_ms() < end);
}

static int connect_client(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    pump(5); /* accepted */
    return fd;
}

static void send_str(int fd, const char *s) {
    size_t n = strlen(s);
    assert_int_equal(send(fd, s, n, 0), (ssize_t)n);
}

/* Appends whatever fd has to buf (NUL-terminated); returns -1 on EOF. */
static int recv_some(int fd, char *buf, size_t cap, size_t *len) {
    for (;;) {
        ssize_t n = recv(fd, buf + *len, cap - 1 - *len, MSG_DONTWAIT);
        if (n > 0) {
            *len += (size_t)n;
            buf[*len] = '\0';
            continue;
        }
        if (n == 0) return -1;
        return 0; /* EAGAIN */
    }
}

/* Pumps until fd has sent exactly `want`, failing on anything else. */
static void expect_reply(int fd, const char *want) {
    char buf[4096];
    size_t len = 0, wl = strlen(want);
    buf[0] = '\0';
    int64_t end = now_ms() + 2000;
    while (len < wl && now_ms() < end) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        if (recv_some(fd, buf, sizeof buf, &len) < 0) break;
        if (len < wl) usleep(1000);
    }
    pump(10);
    recv_some(fd, buf, sizeof buf, &len);
    assert_string_equal(buf, want);
}

/* Pumps for a while and checks that fd has received nothing. */
static void expect_silence(int fd) {
    char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    pump(30);
    assert_int_equal(recv_some(fd, buf, sizeof buf, &len), 0);
    assert_string_equal(buf, "");
}

/* ---- Cases ------------------------------------------------------------- */

/* A held request holds back the pipelined requests behind it; resume sends
 * all the replies in request order. */
static void test_hold_pipelined_then_resume_in_order(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "ECHO first\r\nHOLD x\r\nECHO a\r\nECHO b\r\n");
    expect_reply(fd, "+OK first\r\n"); /* earlier replies of the turn still leave */
    assert_int_equal(f.holds, 1);
    assert_non_null(f.held);
    assert_true(rserver_is_held(f.held));
    expect_silence(fd);
    f.passes = 1;
    rserver_resume(f.held);
    assert_null(f.held);
    expect_reply(fd, "+OK x\r\n+OK a\r\n+OK b\r\n");
    close(fd);
}

/* A request that holds again when resumed keeps the connection paused. */
static void test_resume_holds_again(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\nECHO a\r\n");
    pump(10);
    client *c = f.held;
    assert_non_null(c);
    rserver_resume(c); /* no pass: holds again */
    assert_int_equal(f.holds, 2);
    assert_true(rserver_is_held(c));
    expect_silence(fd);
    f.passes = 1;
    rserver_resume(c);
    assert_false(rserver_is_held(c));
    expect_reply(fd, "+OK x\r\n+OK a\r\n");
    close(fd);
}

/* Saved input that holds again at a later HOLD keeps the rest after it. */
static void test_saved_input_holds_again_at_next_hold(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\nECHO a\r\nHOLD y\r\nECHO b\r\n");
    pump(10);
    assert_int_equal(f.holds, 1);
    f.passes = 1;
    rserver_resume(f.held);
    assert_int_equal(f.holds, 2);
    assert_non_null(f.held);
    expect_reply(fd, "+OK x\r\n+OK a\r\n");
    f.passes = 1;
    rserver_resume(f.held);
    expect_reply(fd, "+OK y\r\n+OK b\r\n");
    close(fd);
}

/* Bytes sent after the hold are not executed while held, and a request
 * split across them is parsed whole on resume. */
static void test_input_after_hold_waits_and_split_request_completes(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\nECHO a\r\nEC");
    pump(10);
    send_str(fd, "HO b\r\nECHO c\r\n");
    expect_silence(fd);
    f.passes = 1;
    rserver_resume(f.held);
    expect_reply(fd, "+OK x\r\n+OK a\r\n+OK b\r\n+OK c\r\n");
    close(fd);
}

/* Other clients are served while one is held, and one of them can resume it
 * from inside its own dispatch. */
static void test_other_clients_served_and_resume_from_dispatch(void **state) {
    (void)state;
    int a = connect_client(), b = connect_client();
    send_str(a, "HOLD x\r\nECHO a\r\n");
    pump(10);
    client *held = f.held;
    assert_non_null(held);
    send_str(b, "ECHO b1\r\n");
    expect_reply(b, "+OK b1\r\n");
    expect_silence(a);
    send_str(b, "RELEASE 1\r\nECHO b2\r\n");
    expect_reply(b, "+OK 1\r\n+OK b2\r\n");
    assert_ptr_equal(f.released, held);
    expect_reply(a, "+OK x\r\n+OK a\r\n");
    close(a);
    close(b);
}

static void on_resume_timer(uv_timer_t *t) {
    (void)t; /* not closed here: a closing handle would keep poll awake too */
    rserver_resume(f.held);
}

static void on_watchdog(uv_timer_t *t) {
    *(int *)t->data = 1;
}

/* Resumed from a timer, the reply leaves in that loop iteration instead of
 * after poll sleeps until the next event (here a 2 s watchdog). */
static void test_resume_from_timer_does_not_wait_for_next_event(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\n");
    pump(10);
    assert_non_null(f.held);
    f.passes = 1;
    uv_timer_t resume, watchdog;
    int fired = 0;
    uv_timer_init(&f.loop, &resume);
    uv_timer_init(&f.loop, &watchdog);
    watchdog.data = &fired;
    uv_timer_start(&resume, on_resume_timer, 5, 0);
    uv_timer_start(&watchdog, on_watchdog, 2000, 0);
    char buf[256];
    size_t len = 0;
    buf[0] = '\0';
    while (!fired && len < 7) {
        uv_run(&f.loop, UV_RUN_ONCE); /* may block in poll */
        recv_some(fd, buf, sizeof buf, &len);
    }
    assert_false(fired);
    assert_string_equal(buf, "+OK x\r\n");
    uv_close((uv_handle_t *)&resume, NULL);
    uv_close((uv_handle_t *)&watchdog, NULL);
    pump(5);
    close(fd);
}

/* Input behind a held request is kept up to 64 KiB, then left to TCP; on
 * resume every request behind it is answered, in order. */
static void test_held_input_bounded_then_all_answered(void **state) {
    (void)state;
    enum { N = 20000 }; /* 160 KB of "ECHO a\r\n" behind the hold */
    int fd = connect_client();
    send_str(fd, "HOLD x\r\n");
    pump(10);
    client *c = f.held;
    assert_non_null(c);
    char *req = malloc(N * 8 + 1);
    assert_non_null(req);
    for (int i = 0; i < N; i++)
        memcpy(req + i * 8, "ECHO a\r\n", 8);
    req[N * 8] = '\0';
    size_t sent = 0;
    int64_t end = now_ms() + 5000;
    while (sent < (size_t)N * 8 && now_ms() < end) { /* until the kernel is full */
        ssize_t n = send(fd, req + sent, (size_t)N * 8 - sent, MSG_DONTWAIT);
        if (n > 0) sent += (size_t)n;
        uv_run(&f.loop, UV_RUN_NOWAIT);
        if (n <= 0) usleep(1000);
        if (c->saved.len >= 65536 && !c->reading && n <= 0) break;
    }
    pump(20);
    assert_true(sent > 65536 + 8); /* loopback buffers take more than this */
    assert_int_equal(c->saved.len, 65536);
    assert_false(c->reading);
    f.passes = 1;
    rserver_resume(c);
    /* Read the replies while the rest of the requests go in. */
    size_t want = 7 + (size_t)N * 7, got = 0;
    char *buf = malloc(want + 1);
    assert_non_null(buf);
    end = now_ms() + 10000;
    while (got < want && now_ms() < end) {
        if (sent < (size_t)N * 8) {
            ssize_t n = send(fd, req + sent, (size_t)N * 8 - sent, MSG_DONTWAIT);
            if (n > 0) sent += (size_t)n;
        }
        uv_run(&f.loop, UV_RUN_NOWAIT);
        ssize_t n = recv(fd, buf + got, want - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        else
            usleep(500);
    }
    assert_int_equal(got, want);
    assert_memory_equal(buf, "+OK x\r\n", 7);
    for (size_t i = 0; i < N; i++)
        assert_memory_equal(buf + 7 + i * 7, "+OK a\r\n", 7);
    free(buf);
    free(req);
    close(fd);
}

/* A held client that disconnects is reported to on_close and freed. */
static void test_held_client_disconnect_closes(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\nECHO a\r\n");
    pump(10);
    assert_non_null(f.held);
    close(fd);
    pump(30);
    assert_int_equal(f.closes, 1);
    assert_int_equal(f.held_closes, 1);
    assert_null(f.held);
    rserver_stats st;
    rserver_get_stats(f.rs, &st);
    assert_int_equal(st.clients, 0);
}

/* QUIT behind a held request closes the connection only after the replies
 * before it, once resumed, and nothing after QUIT is executed. */
static void test_quit_behind_hold_closes_after_resume(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\nQUIT\r\nECHO never\r\n");
    pump(10);
    expect_silence(fd);
    f.passes = 1;
    rserver_resume(f.held);
    expect_reply(fd, "+OK x\r\n+OK \r\n");
    char buf[64];
    size_t len = 0;
    assert_int_equal(recv_some(fd, buf, sizeof buf, &len), -1); /* EOF */
    assert_int_equal(len, 0);
    assert_int_equal(f.closes, 1);
    close(fd);
}

/* Regression (issue 10, defect 5): a reply writer that ran out of memory
 * mid-reply left half a reply in the output ("*2" and one element), and the
 * next reply was read as its second element: the connection was
 * desynchronised. Now the half reply is dropped, the replies before it
 * leave, and the connection closes; nothing after it is executed. */
static void test_oom_mid_reply_closes_connection(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "ECHO a\r\nOOMREPLY\r\nECHO never\r\n");
    expect_reply(fd, "+OK a\r\n");
    char buf[64];
    size_t len = 0;
    pump(20);
    assert_int_equal(recv_some(fd, buf, sizeof buf, &len), -1); /* EOF */
    assert_int_equal(len, 0);
    assert_int_equal(f.closes, 1);
    close(fd);
}

/* rserver_stop with a held client (and saved input) frees everything. */
static void test_stop_with_held_client(void **state) {
    (void)state;
    int fd = connect_client();
    send_str(fd, "HOLD x\r\nECHO a\r\nECHO b\r\n");
    pump(10);
    assert_non_null(f.held);
    rserver_stop(f.rs);
    rserver_resume(f.held); /* closing: does nothing */
    uv_run(&f.loop, UV_RUN_DEFAULT);
    f.rs = NULL;
    assert_int_equal(f.closes, 1);
    assert_null(f.held);
    close(fd);
}

/* ---- Sealed turns --------------------------------------------------------- */

/* A sealed turn's reply waits for its release, then leaves. */
static void test_sealed_reply_waits_for_release(void **state) {
    (void)state;
    int fd = connect_client();
    f.sealing = 1;
    send_str(fd, "SET a\r\n");
    expect_silence(fd);
    assert_int_equal(f.seals, 1);
    size_t bytes, clients;
    rserver_sealed_stats(f.rs, &bytes, &clients);
    assert_int_equal(bytes, strlen("+OK a\r\n"));
    assert_int_equal(clients, 1);
    f.sealing = 0;
    rserver_release(f.rs, f.token - 1); /* an older token releases nothing */
    expect_silence(fd);
    rserver_release(f.rs, f.token);
    expect_reply(fd, "+OK a\r\n");
    rserver_sealed_stats(f.rs, &bytes, &clients);
    assert_int_equal(bytes, 0);
    assert_int_equal(clients, 0);
    close(fd);
}

/* Turns release in order; a later unsealed turn's reply waits behind the
 * client's last seal and leaves with it. */
static void test_sealed_turns_release_in_order(void **state) {
    (void)state;
    int fd = connect_client();
    f.sealing = 1;
    send_str(fd, "SET A\r\n");
    pump(10);
    uint64_t t1 = f.token;
    send_str(fd, "SET B\r\n");
    pump(10);
    uint64_t t2 = f.token;
    assert_true(t2 > t1);
    f.sealing = 0;
    send_str(fd, "SET C\r\n");
    expect_silence(fd);
    rserver_release(f.rs, t1);
    expect_reply(fd, "+OK A\r\n");
    rserver_release(f.rs, t2);
    expect_reply(fd, "+OK B\r\n+OK C\r\n");
    send_str(fd, "SET D\r\n"); /* nothing sealed any more: at once */
    expect_reply(fd, "+OK D\r\n");
    close(fd);
}

/* A client with nothing sealed is not delayed by another's sealed reply,
 * and output made after a release but before its turn end stays behind the
 * released bytes. */
static void test_unsealed_client_not_delayed(void **state) {
    (void)state;
    int a = connect_client();
    int b = connect_client();
    f.sealing = 1;
    send_str(a, "SET a1\r\n");
    expect_silence(a);
    f.sealing = 0;
    send_str(b, "SET b1\r\n");
    expect_reply(b, "+OK b1\r\n");
    expect_silence(a);
    send_str(a, "SET a2\r\n");
    expect_silence(a); /* behind a1's seal */
    rserver_release(f.rs, f.token);
    expect_reply(a, "+OK a1\r\n+OK a2\r\n");
    close(a);
    close(b);
}

/* QUIT behind a sealed reply closes only after that reply has left. */
static void test_quit_behind_seal_closes_after_release(void **state) {
    (void)state;
    int fd = connect_client();
    f.sealing = 1;
    send_str(fd, "SET q\r\nQUIT\r\n");
    expect_silence(fd);
    assert_int_equal(f.closes, 0);
    f.sealing = 0;
    rserver_release(f.rs, f.token);
    expect_reply(fd, "+OK q\r\n+OK \r\n");
    char buf[64];
    size_t len = 0;
    assert_int_equal(recv_some(fd, buf, sizeof buf, &len), -1); /* EOF */
    assert_int_equal(f.closes, 1);
    close(fd);
}

/* A reply released during a turn leaves before that turn's before_flush
 * (it waits for nothing of that turn: a replicated write's reply must not
 * wait out the fsync of the next turn), while the turn's own replies still
 * wait for it. */
static void test_released_reply_leaves_before_next_flush(void **state) {
    (void)state;
    int fd = connect_client();
    f.sealing = 1;
    send_str(fd, "SET a1\r\n");
    expect_silence(fd);
    f.sealing = 0;
    f.probe_fd = fd;
    send_str(fd, "RELSEAL\r\n"); /* releases a1; its own reply is this turn's */
    expect_reply(fd, "+OK \r\n");
    assert_true(f.probe_calls >= 1);
    assert_string_equal(f.probe, "+OK a1\r\n"); /* a1 before the flush, RELSEAL's reply after */
    close(fd);
}

/* A request that answers nothing leaves no client pending, so its turn
 * end skips ops.seal_turn; rserver_touch makes that turn end run as for a
 * reply (a follower's one-way APPEND: its ACK leaves from seal_turn). Nothing
 * is written to the client either way. */
static void test_touch_runs_seal_turn_for_silent_request(void **state) {
    (void)state;
    int fd = connect_client();
    int before = f.seal_calls;
    send_str(fd, "SILENT\r\n");
    expect_silence(fd);
    assert_int_equal(f.seal_calls, before); /* what rserver_touch is for */
    send_str(fd, "SILENT touch\r\n");
    expect_silence(fd);
    assert_int_equal(f.seal_calls, before + 1);
    send_str(fd, "PING x\r\n"); /* the connection still serves, in order */
    expect_reply(fd, "+OK x\r\n");
    close(fd);
}

/* drop_sealed closes the clients holding sealed replies, unanswered, and
 * leaves the others alone. */
static void test_drop_sealed_closes_unanswered(void **state) {
    (void)state;
    int a = connect_client();
    int b = connect_client();
    f.sealing = 1;
    send_str(a, "SET lost\r\n");
    expect_silence(a);
    f.sealing = 0;
    assert_int_equal(rserver_drop_sealed(f.rs), 1);
    pump(10);
    char buf[64];
    size_t len = 0;
    assert_int_equal(recv_some(a, buf, sizeof buf, &len), -1); /* EOF, no reply */
    assert_int_equal(len, 0);
    assert_int_equal(f.closes, 1);
    rserver_release(f.rs, f.token); /* nothing left to release: harmless */
    send_str(b, "SET kept\r\n");
    expect_reply(b, "+OK kept\r\n");
    close(a);
    close(b);
}

/* A reply queued in the turn a busy dispatch starts in (its command came in
 * the same read batch, just before) leaves during the busy dispatch when
 * the turn is clean, and then the client is served (its next request is
 * answered by the busy poll); when the turn is not clean it waits for the
 * turn end, and the client is left alone meanwhile. The old rserver_poll_busy skipped such a client
 * for the whole dispatch either way (redis's scripting.tcl "Timedout script does not cause a false
 * dead client" hung on it). */
static void busy_serves_reply_queued_before(int clean) {
    int a = connect_client();
    int b = connect_client();
    pump(20); /* both accepted */
    f.clean = clean;
    f.busy_probe_fd = a;
    send_str(a, "PING a1\r\nPING a2\r\n");
    usleep(20000);
    send_str(b, "BUSY 300\r\n"); /* one loop iteration reads a, then b */
    pump(400);
    if (clean)
        assert_string_equal(f.busy_got, "+OK a1\r\n+OK a2\r\n+OK a3\r\n");
    else
        assert_int_equal(f.busy_len, 0);
    expect_reply(b, "+OK 300\r\n");
    if (!clean) expect_reply(a, "+OK a1\r\n+OK a2\r\n");
    close(a);
    close(b);
}

static void test_busy_sends_clean_turn_reply(void **state) {
    (void)state;
    busy_serves_reply_queued_before(1);
}

static void test_busy_holds_unclean_turn_reply(void **state) {
    (void)state;
    busy_serves_reply_queued_before(0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_busy_sends_clean_turn_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_holds_unclean_turn_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hold_pipelined_then_resume_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_holds_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_saved_input_holds_again_at_next_hold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_input_after_hold_waits_and_split_request_completes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_clients_served_and_resume_from_dispatch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resume_from_timer_does_not_wait_for_next_event, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_held_input_bounded_then_all_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_client_disconnect_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quit_behind_hold_closes_after_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_with_held_client, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oom_mid_reply_closes_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sealed_reply_waits_for_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sealed_turns_release_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unsealed_client_not_delayed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quit_behind_seal_closes_after_release, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drop_sealed_closes_unanswered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_released_reply_leaves_before_next_flush, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_touch_runs_seal_turn_for_silent_request, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
