/* rserver.c - RESP connections on libuv; see rserver.h for the turn.
 *
 * Life of a request: on_read feeds bytes to the client's parser (one shared
 * 64 KiB read buffer: each read is consumed whole before the next), every
 * complete request goes to ops.dispatch, and a client with output joins the
 * pending list. on_turn_end runs before_flush, then flushes each pending
 * client with one write. Back-pressure: a client whose unsent output passes
 * max_output stops being read until its write completes.
 *
 * Holding. A request whose dispatch returns RSERVER_HOLD pauses its client:
 * parsing stops right after it and the unparsed rest of the read moves from
 * the shared read buffer into the client's own c->saved. The held request's
 * argv is the parser's, untouched because nothing is fed to that parser
 * until rserver_resume re-dispatches it. A held client is still read, but
 * only into c->saved and only up to SAVED_MAX bytes; then reading stops and
 * the kernel, then TCP, hold the rest. Reading on is what lets a disconnect
 * (EOF, reset) close a held client and reach ops.on_close while its request
 * waits: libuv reports a hang-up only to a reader. (A client that pipelined
 * SAVED_MAX bytes behind its held request and then hung up is noticed when
 * it is resumed.) Invariants: c->saved is non-empty only while c->held, and
 * c->saved.len <= SAVED_MAX. rserver_resume may run from any callback, even
 * inside another client's dispatch: it touches only c's own buffers and the
 * pending list (a push, safe at any time), and starts the kick idle handle
 * so that the loop does not sleep in poll before the turn end that sends the
 * reply.
 *
 * Sealed turns. At a sealed turn end every pending client's not-yet-ready
 * output (c->out past c->out_ready) moves to c->sealed with a mark (token,
 * end offset); a client that already has marks does the same at an unsealed
 * turn end but extends its last mark instead, so its order holds. Release
 * moves the released prefix of c->sealed into c->out right after the ready
 * bytes (older than anything dispatched since) and marks the client pending;
 * everything left in c->out after a turn end counts as ready. Invariants:
 * marks are in token order with increasing ends, the last end is
 * c->sealed.len, and a client with marks is never closed by close_after_flush
 * until they are gone.
 *
 * Teardown: rserver_stop closes every handle; the struct is freed when the
 * last close callback has run (refs counts open handles), so no callback ever
 * sees freed memory.
 */
#include "net/rserver.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Most input kept for a held client: one read buffer's worth. */
#define SAVED_MAX 65536

struct rserver_mark {
    uint64_t t;
    size_t end;
};

struct rserver {
    uv_loop_t *loop;
    rserver_config cfg;
    char bind[64];
    const rserver_ops *ops;
    void *arg;
    uv_tcp_t listener;
    uv_check_t turn_end;
    uv_idle_t kick; /* active while resumed output waits for a turn end */
    client *clients;
    client *pending;
    uint64_t next_client_id;
    uint64_t last_seal, released;
    rserver_stats stats;
    int refs; /* open uv handles */
    int stopping;
    char readbuf[SAVED_MAX];
};

static void rs_unref(rserver *rs) {
    if (--rs->refs == 0 && rs->stopping) free(rs);
}

static void on_handle_closed(uv_handle_t *h) {
    rs_unref(h->data);
}

/* ---- Clients ------------------------------------------------------------- */

static void on_client_closed(uv_handle_t *h) {
    client *c = h->data;
    rserver *rs = c->rs;
    if (c->pending) {
        client **pp = &rs->pending;
        while (*pp && *pp != c)
            pp = &(*pp)->next_pending;
        if (*pp) *pp = c->next_pending;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        rs->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    rs->stats.clients--;
    if (rs->ops->on_close) rs->ops->on_close(rs->arg, c);
    resp_req_free(c->parser);
    kbuf_close(&c->out);
    kbuf_close(&c->wbuf);
    kbuf_close(&c->saved);
    kbuf_close(&c->sealed);
    free(c->marks);
    free(c);
    rs_unref(rs);
}

static void client_close(client *c) {
    if (c->closing) return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, on_client_closed);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_kick(uv_idle_t *h) {
    (void)h; /* its being active is the point: poll does not sleep */
}

static void client_mark_pending(client *c) {
    if (c->pending) return;
    c->pending = 1;
    c->next_pending = c->rs->pending;
    c->rs->pending = c;
}

void rserver_touch(client *c) {
    if (c && !c->closing) client_mark_pending(c);
}

void rserver_close_after_reply(client *c) {
    c->close_after_flush = 1;
}

client *rserver_clients(rserver *rs) {
    return rs ? rs->clients : NULL;
}

void rserver_kill(client *c) {
    client_close(c);
}

void rserver_wake(client *c) {
    if (c->closing) return;
    client_mark_pending(c);
    if (!c->rs->stopping) uv_idle_start(&c->rs->kick, on_kick);
}

void rserver_set_maxclients(rserver *rs, int maxclients) {
    if (rs) rs->cfg.maxclients = maxclients;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    client *c = h->data;
    size_t n = sizeof c->rs->readbuf;
    (void)suggested;
    if (c->held) n = SAVED_MAX - c->saved.len; /* > 0: reading stops at the cap */
    *buf = uv_buf_init(c->rs->readbuf, (unsigned)n);
}

static void client_read_start(client *c) {
    if (c->reading || c->closing || c->close_after_flush) return;
    if (c->held && c->saved.len >= SAVED_MAX) return;
    c->reading = 1;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* Output a client holds that has not reached the kernel. */
static size_t client_backlog(const client *c) {
    return c->out.len + c->wbuf.len + c->sealed.len;
}

static void on_write(uv_write_t *req, int status) {
    client *c = req->data;
    c->writing = 0;
    c->wbuf.len = 0;
    if (status < 0) {
        client_close(c);
        return;
    }
    if (c->closing) return;
    /* Replies queued meanwhile may belong to the current turn, not yet
     * through before_flush: they leave from the turn-end check only. */
    if (c->out.len || c->close_after_flush) client_mark_pending(c);
    if (!c->reading && client_backlog(c) < c->rs->cfg.max_output) client_read_start(c);
}

/* Writes c->out[0..n) (0 < n <= c->out.len; not while c->writing): what
 * the socket takes now, the rest by one uv_write from c->wbuf; the bytes
 * past n stay in c->out. Returns -1 if c was closed. */
static int client_write(client *c, size_t n) {
    uv_buf_t b = uv_buf_init(c->out.p, (unsigned)n);
    int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (w == UV_EAGAIN) w = 0;
    if (w < 0) {
        client_close(c);
        return -1;
    }
    size_t rest = n - (size_t)w;
    if (!rest) {
        kbuf_consume(&c->out, n);
        return 0;
    }
    if (n == c->out.len) { /* all of it: the buffers trade places, nothing is copied */
        kbuf tmp = c->wbuf;
        c->wbuf = c->out;
        c->out = tmp;
        c->out.len = 0;
        b = uv_buf_init(c->wbuf.p + w, (unsigned)rest);
    } else { /* a prefix: its rest to wbuf, the bytes after it stay */
        c->wbuf.len = 0;
        if (kbuf_append(&c->wbuf, c->out.p + w, rest)) {
            client_close(c);
            return -1;
        }
        kbuf_consume(&c->out, n);
        b = uv_buf_init(c->wbuf.p, (unsigned)rest);
    }
    c->writing = 1;
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write)) {
        c->writing = 0;
        client_close(c);
        return -1;
    }
    return 0;
}

static void client_flush(client *c) {
    if (c->writing || c->closing) return;
    if (c->out.len) {
        if (client_write(c, c->out.len) || c->writing) return;
        if (c->out.cap > (1u << 20)) kbuf_shrink(&c->out, 16384);
    }
    if (c->close_after_flush && !c->nmarks) client_close(c);
}

static void protocol_error(client *c, const char *msg) {
    char q[160];
    keel_log(KEEL_LOG_WARN, "protocol_error", "client=%llu addr=%s reason=%s",
             (unsigned long long)c->id, c->addr, keel_log_quote(q, sizeof q, msg, strlen(msg)));
    resp_w_errorf(&c->out, "ERR %s", msg);
    rserver_close_after_reply(c);
}

/* Hands the parser's ready request to ops.dispatch; a hold leaves it in the
 * parser, untouched, for rserver_resume. */
static void client_dispatch(client *c) {
    rserver *rs = c->rs;
    size_t before = c->out.len;
    c->out.oom = 0;
    int rc = rs->ops->dispatch(rs->arg, c, resp_req_argc(c->parser), resp_req_argv(c->parser),
                               resp_req_argvlen(c->parser));
    if (c->out.oom) {
        /* A writer ran out of memory mid-reply: what follows "before" may be
         * half a reply, and sending it would desynchronise the client. Drop
         * it, let the complete replies before it leave, and close. */
        c->out.len = before;
        c->out.oom = 0;
        c->held = 0;
        keel_log(KEEL_LOG_WARN, "reply_out_of_memory", "addr=%s action=close", c->addr);
        rserver_close_after_reply(c);
        return;
    }
    if (rc == RSERVER_HOLD) {
        assert(c->out.len == before); /* a held request has no reply yet */
        c->held = 1;
    }
}

/* Parses and dispatches requests from buf[0..len) until the bytes run out, a
 * request is held, or the client is on its way out. Returns the bytes
 * consumed; the caller keeps the rest if c is now held. */
static size_t client_feed(client *c, const char *buf, size_t len) {
    size_t off = 0;
    while (off < len && !c->close_after_flush && !c->closing && !c->held) {
        size_t used = 0;
        int rc = resp_req_feed(c->parser, buf + off, len - off, &used);
        off += used;
        if (rc == 1) {
            c->rs->stats.total_commands++;
            client_dispatch(c);
            continue;
        }
        if (rc == KEEL_EAGAIN) break;
        protocol_error(c, rc == KEEL_EPROTO ? resp_req_error(c->parser)
                                            : "out of memory reading request");
    }
    return off;
}

/* After a batch: queue the output for the turn end, and stop reading while
 * the client is closing, over its output backlog, or held with a full
 * c->saved. */
static void client_after_batch(client *c) {
    if (c->out.len || c->close_after_flush) client_mark_pending(c);
    if (c->reading && ((c->held && c->saved.len >= SAVED_MAX) || c->close_after_flush ||
                       client_backlog(c) > c->rs->cfg.max_output)) {
        uv_read_stop((uv_stream_t *)&c->tcp); /* on_write or rserver_resume restarts */
        c->reading = 0;
    }
}

/* Keeps unparsed input of a held client in its own buffer: the shared read
 * buffer is overwritten by the next read of any client. */
static void client_save(client *c, const char *p, size_t n) {
    if (kbuf_append(&c->saved, p, n)) {
        keel_log(KEEL_LOG_WARN, "client_closed", "client=%llu addr=%s reason=\"out of memory\"",
                 (unsigned long long)c->id, c->addr);
        client_close(c);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    client *c = stream->data;
    if (nread < 0) {
        client_close(c);
        return;
    }
    size_t len = (size_t)nread;
    if (c->held) { /* behind the held request: keep, do not parse */
        client_save(c, buf->base, len);
        client_after_batch(c);
        return;
    }
    /* One clock read per batch: every command parsed from it sees the same
     * time, as redis-server's command time snapshot does. */
    c->last_ms = keel_wall_ms();
    size_t off = client_feed(c, buf->base, len);
    if (c->held && off < len) client_save(c, buf->base + off, len - off);
    client_after_batch(c);
}

void rserver_resume(client *c) {
    if (!c || !c->held || c->closing) return;
    rserver *rs = c->rs;
    c->held = 0;
    /* The request runs now: handlers that read the batch time see this. */
    c->last_ms = keel_wall_ms();
    client_dispatch(c);
    if (!c->held && c->saved.len) {
        /* Only on_read grows c->saved, and never from inside a dispatch, so
         * the pointer stays valid through the dispatches. */
        size_t off = client_feed(c, c->saved.p, c->saved.len);
        if (c->held)
            kbuf_consume(&c->saved, off);
        else
            kbuf_close(&c->saved); /* all parsed, or the client is closing */
    }
    client_after_batch(c);
    if (!c->closing && client_backlog(c) <= rs->cfg.max_output) client_read_start(c);
    /* Output made outside the poll phase (a timer, say) must not wait for
     * the next wakeup: an active idle handle keeps poll from sleeping. */
    if (c->pending && !rs->stopping) uv_idle_start(&rs->kick, on_kick);
}

void rserver_poll_busy(rserver *rs, const client *self) {
    static char buf[16384];
    int clean = rs->ops->turn_clean && rs->ops->turn_clean(rs->arg);
    for (client *c = rs->clients; c; c = c->next) {
        if (c == self || c->closing || c->close_after_flush || c->held || c->writing ||
            !c->reading || c->nmarks)
            continue;
        if (c->out.len) { /* queued before the busy dispatch (see rserver.h) */
            size_t n = clean ? c->out.len : c->out_ready;
            if (n) {
                if (client_write(c, n)) continue; /* closed */
                c->out_ready = c->out_ready > n ? c->out_ready - n : 0;
            }
            /* The rest of this turn's waits for its end; a write in flight
             * must not be overtaken by the replies below. */
            if (c->out.len || c->writing) continue;
        }
        uv_os_fd_t fd;
        if (uv_fileno((const uv_handle_t *)&c->tcp, &fd)) continue;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) continue; /* EOF and errors: libuv sees them again later */
        c->last_ms = keel_wall_ms();
        client_feed(c, buf, (size_t)n);
        if (!c->out.len) continue;
        uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
        int w = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (w > 0) kbuf_consume(&c->out, (size_t)w);
        if (c->out.len || c->close_after_flush) client_mark_pending(c); /* the rest at turn end */
    }
}

int rserver_is_held(const client *c) {
    return c && c->held;
}

static void peer_name(client *c) {
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    char ip[48] = "?";
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) != 0) return;
    uv_ip_name((struct sockaddr *)&ss, ip, sizeof ip);
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(c->addr, sizeof c->addr, "%s:%d", ip, port);
    sl = sizeof ss;
    if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        uv_ip_name((struct sockaddr *)&ss, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        snprintf(c->laddr, sizeof c->laddr, "%s:%d", ip, port);
    }
    uv_os_fd_t fd;
    c->fd = uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 ? (int)fd : -1;
}

static void on_connection(uv_stream_t *listener, int status) {
    rserver *rs = listener->data;
    if (status < 0 || rs->stopping) return;
    client *c = calloc(1, sizeof *c);
    if (!c) return;
    uv_tcp_init(rs->loop, &c->tcp);
    c->tcp.data = c;
    c->rs = rs;
    rs->refs++;
    rs->stats.clients++;
    c->next = rs->clients;
    if (rs->clients) rs->clients->prev = c;
    rs->clients = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp)) {
        client_close(c);
        return;
    }
    c->id = ++rs->next_client_id;
    c->proto = 2;
    c->authed = !rs->cfg.auth_required;
    c->created_ms = c->last_ms = keel_wall_ms();
    peer_name(c);
    if (rs->stats.clients > (size_t)rs->cfg.maxclients) {
        rs->stats.rejected_connections++;
        resp_w_error(&c->out, "ERR max number of clients reached");
        rserver_close_after_reply(c);
        client_mark_pending(c);
        return;
    }
    rs->stats.total_connections++;
    if (!(c->parser = resp_req_new(&rs->cfg.limits))) {
        client_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    client_read_start(c);
}

/* ---- The turn ------------------------------------------------------------ */

/* Sets aside c's output of this turn (past out_ready) under token t, or
 * behind its last mark when t is 0. Returns 0, or -1 out of memory. */
static int client_seal(client *c, uint64_t t) {
    size_t n = c->out.len - c->out_ready;
    if (t && c->nmarks == c->capmarks) {
        size_t cap = c->capmarks ? 2 * c->capmarks : 4;
        struct rserver_mark *m = realloc(c->marks, cap * sizeof *m);
        if (!m) return -1;
        c->marks = m;
        c->capmarks = cap;
    }
    if (kbuf_append(&c->sealed, c->out.p + c->out_ready, n)) return -1;
    c->out.len = c->out_ready;
    if (t)
        c->marks[c->nmarks++] = (struct rserver_mark){t, c->sealed.len};
    else
        c->marks[c->nmarks - 1].end = c->sealed.len;
    return 0;
}

/* Sends c's ready bytes (c->out up to out_ready: replies of earlier turns,
 * released seals) now, not after this turn's before_flush: they wait for
 * nothing of this turn, and a released reply would otherwise wait out the
 * fsync of a turn it is not part of. This turn's output (past out_ready)
 * stays. Returns -1 if c was closed. */
static int client_flush_ready(client *c) {
    if (c->writing || c->closing || !c->out_ready) return 0;
    if (client_write(c, c->out_ready)) return -1;
    c->out_ready = 0;
    return 0;
}

static void on_turn_end(uv_check_t *h) {
    rserver *rs = h->data;
    uv_idle_stop(&rs->kick);
    if (rs->ops->seal_turn) /* only an owner that seals has released replies waiting */
        for (client *c = rs->pending; c; c = c->next_pending)
            (void)client_flush_ready(c);
    if (rs->ops->before_flush && rs->ops->before_flush(rs->arg)) return;
    uint64_t t = 0;
    if (rs->ops->seal_turn && rs->pending) {
        t = rs->ops->seal_turn(rs->arg);
        assert(t == 0 || t > rs->last_seal);
        if (t) rs->last_seal = t;
    }
    client *c = rs->pending;
    rs->pending = NULL;
    while (c) {
        client *next = c->next_pending;
        c->pending = 0;
        c->next_pending = NULL;
        if ((t || c->nmarks) && c->out.len > c->out_ready && !c->closing && client_seal(c, t)) {
            keel_log(KEEL_LOG_WARN, "client_closed", "client=%llu addr=%s reason=\"out of memory\"",
                     (unsigned long long)c->id, c->addr);
            client_close(c);
        }
        client_flush(c);
        c->out_ready = c->out.len;
        c = next;
    }
}

void rserver_release(rserver *rs, uint64_t t) {
    if (!rs || t <= rs->released) return;
    rs->released = t;
    int woke = 0;
    for (client *c = rs->clients; c; c = c->next) {
        if (!c->nmarks || c->closing) continue;
        size_t k = 0;
        while (k < c->nmarks && c->marks[k].t <= t)
            k++;
        if (!k) continue;
        size_t n = c->marks[k - 1].end;
        /* c->out = ready bytes, then the released replies, then the rest. */
        if (kbuf_reserve(&c->out, n)) {
            keel_log(KEEL_LOG_WARN, "client_closed", "client=%llu addr=%s reason=\"out of memory\"",
                     (unsigned long long)c->id, c->addr);
            client_close(c);
            continue;
        }
        memmove(c->out.p + c->out_ready + n, c->out.p + c->out_ready, c->out.len - c->out_ready);
        memcpy(c->out.p + c->out_ready, c->sealed.p, n);
        c->out.len += n;
        c->out_ready += n;
        kbuf_consume(&c->sealed, n);
        for (size_t i = k; i < c->nmarks; i++)
            c->marks[i - k] = (struct rserver_mark){c->marks[i].t, c->marks[i].end - n};
        c->nmarks -= k;
        client_mark_pending(c);
        woke = 1;
    }
    if (woke && !rs->stopping) uv_idle_start(&rs->kick, on_kick);
}

size_t rserver_drop_sealed(rserver *rs) {
    size_t n = 0;
    for (client *c = rs ? rs->clients : NULL; c; c = c->next) {
        if (!c->nmarks || c->closing) continue;
        keel_log(KEEL_LOG_WARN, "client_closed",
                 "client=%llu addr=%s reason=\"sealed replies dropped\"", (unsigned long long)c->id,
                 c->addr);
        client_close(c);
        n++;
    }
    return n;
}

void rserver_sealed_stats(const rserver *rs, size_t *bytes, size_t *clients) {
    size_t b = 0, n = 0;
    for (const client *c = rs ? rs->clients : NULL; c; c = c->next)
        if (c->nmarks && !c->closing) {
            b += c->sealed.len;
            n++;
        }
    *bytes = b;
    *clients = n;
}

void rserver_flush_now(rserver *rs) {
    on_turn_end(&rs->turn_end);
}

/* ---- Life cycle ---------------------------------------------------------- */

int rserver_start(uv_loop_t *loop, const rserver_config *cfg, const rserver_ops *ops, void *arg,
                  rserver **out, char *err, size_t errcap) {
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(cfg->bind, cfg->port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(cfg->bind, cfg->port, (struct sockaddr_in6 *)&addr);
    if (rc) {
        snprintf(err, errcap, "bad bind address %s", cfg->bind);
        return KEEL_EINVAL;
    }
    rserver *rs = calloc(1, sizeof *rs);
    if (!rs) return KEEL_ENOMEM;
    rs->loop = loop;
    rs->cfg = *cfg;
    snprintf(rs->bind, sizeof rs->bind, "%s", cfg->bind);
    rs->cfg.bind = rs->bind;
    rs->ops = ops;
    rs->arg = arg;
    uv_tcp_init(loop, &rs->listener);
    rs->listener.data = rs;
    rs->refs = 1;
    if ((rc = uv_tcp_bind(&rs->listener, (struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&rs->listener, 511, on_connection))) {
        snprintf(err, errcap, "cannot listen on %s:%d: %s", cfg->bind, cfg->port, uv_strerror(rc));
        rs->stopping = 1;
        uv_close((uv_handle_t *)&rs->listener, on_handle_closed);
        return KEEL_EIO;
    }
    uv_check_init(loop, &rs->turn_end);
    rs->turn_end.data = rs;
    rs->refs++;
    uv_check_start(&rs->turn_end, on_turn_end);
    uv_idle_init(loop, &rs->kick);
    rs->kick.data = rs;
    rs->refs++;
    *out = rs;
    return 0;
}

void rserver_stop(rserver *rs) {
    if (!rs || rs->stopping) return;
    rs->stopping = 1;
    for (client *c = rs->clients; c; c = c->next)
        client_close(c);
    uv_close((uv_handle_t *)&rs->listener, on_handle_closed);
    uv_close((uv_handle_t *)&rs->turn_end, on_handle_closed);
    uv_close((uv_handle_t *)&rs->kick, on_handle_closed);
}

void rserver_get_stats(const rserver *rs, rserver_stats *out) {
    if (rs)
        *out = rs->stats;
    else
        memset(out, 0, sizeof *out);
}
