/* server.c - the node's event loop; see server.h for the turn structure.
 *
 * Life of a request: on_read feeds bytes to the client's RESP parser; each
 * complete request is dispatched (cmd.c), whose reply lands in client.out and
 * puts the client on the pending list. on_turn_end (uv_check, after the poll
 * phase) calls store_sync() - the group commit - and only then flushes every
 * pending client with one write each. A write that the kernel does not take
 * whole continues as a uv_write; replies produced meanwhile wait in out and
 * go through the same check, so nothing leaves before its sync.
 *
 * Start-up order matters: flags, data directory, node id and map are all
 * checked before the listener binds, so a bad configuration never opens a
 * port.
 */
#include "node/server.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "node/cmd.h"
#include "node/http.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SWEEP_INTERVAL_MS 100
#define SWEEP_KEYS_PER_RUN 200

void node_render_metrics(void *arg, kbuf *out); /* info.c */

/* ---- Clients ------------------------------------------------------------- */

static void on_client_closed(uv_handle_t *h) {
    client *c = h->data;
    server *s = c->srv;
    if (c->pending) { /* unlink from the pending list */
        client **pp = &s->pending;
        while (*pp && *pp != c)
            pp = &(*pp)->next_pending;
        if (*pp) *pp = c->next_pending;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        s->clients = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nclients--;
    resp_req_free(c->parser);
    kbuf_close(&c->out);
    kbuf_close(&c->wbuf);
    free(c);
}

static void client_close(client *c) {
    if (c->closing) return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->tcp, on_client_closed);
}

static void client_mark_pending(client *c) {
    if (c->pending) return;
    c->pending = 1;
    c->next_pending = c->srv->pending;
    c->srv->pending = c;
}

void server_close_after_reply(client *c) {
    c->close_after_flush = 1;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    client *c = h->data;
    /* One shared buffer: on_read consumes it entirely before the next read. */
    *buf = uv_buf_init(c->srv->readbuf, sizeof c->srv->readbuf);
}

static void client_read_start(client *c) {
    if (c->reading || c->closing || c->close_after_flush) return;
    c->reading = 1;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
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
    /* Replies queued meanwhile may belong to the current, unsynced turn:
     * they leave through the turn-end check, never from here. */
    if (c->out.len || c->close_after_flush) client_mark_pending(c);
    if (!c->reading && c->out.len < c->srv->cfg.max_output) client_read_start(c);
}

static void client_flush(client *c) {
    if (c->writing || c->closing) return;
    if (c->out.len) {
        uv_buf_t b = uv_buf_init(c->out.p, (unsigned)c->out.len);
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n == UV_EAGAIN) n = 0;
        if (n < 0) {
            client_close(c);
            return;
        }
        if ((size_t)n < c->out.len) { /* hand the rest to a uv_write */
            kbuf tmp = c->wbuf;
            c->wbuf = c->out;
            c->out = tmp;
            c->out.len = 0;
            b = uv_buf_init(c->wbuf.p + n, (unsigned)(c->wbuf.len - (size_t)n));
            c->writing = 1;
            c->wreq.data = c;
            if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_write)) {
                c->writing = 0;
                client_close(c);
            }
            return;
        }
        c->out.len = 0;
        if (c->out.cap > (1u << 20)) kbuf_shrink(&c->out, 16384);
    }
    if (c->close_after_flush) client_close(c);
}

static void protocol_error(client *c, const char *msg) {
    char q[160];
    keel_log(KEEL_LOG_WARN, "protocol_error", "client=%llu addr=%s reason=%s",
             (unsigned long long)c->id, c->addr, keel_log_quote(q, sizeof q, msg, strlen(msg)));
    resp_w_errorf(&c->out, "ERR %s", msg);
    server_close_after_reply(c);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    client *c = stream->data;
    server *s = c->srv;
    if (nread < 0) {
        client_close(c);
        return;
    }
    /* One clock read per batch: every command parsed from it sees the same
     * time, as redis-server's command time snapshot does. */
    c->last_ms = s->now_ms = keel_wall_ms();
    size_t off = 0, len = (size_t)nread;
    while (off < len && !c->close_after_flush) {
        size_t used = 0;
        int rc = resp_req_feed(c->parser, buf->base + off, len - off, &used);
        off += used;
        if (rc == 1) {
            s->total_commands++;
            cmd_dispatch(s, c, resp_req_argc(c->parser), resp_req_argv(c->parser),
                         resp_req_argvlen(c->parser));
            continue;
        }
        if (rc == KEEL_EAGAIN) break;
        protocol_error(c, rc == KEEL_EPROTO ? resp_req_error(c->parser)
                                            : "out of memory reading request");
    }
    if (c->out.len || c->close_after_flush) client_mark_pending(c);
    if (c->close_after_flush || c->out.len + c->wbuf.len > s->cfg.max_output) {
        uv_read_stop(stream); /* back-pressure: resume when the backlog drains */
        c->reading = 0;
    }
}

static void on_connection(uv_stream_t *listener, int status) {
    server *s = listener->data;
    if (status < 0) return;
    client *c = calloc(1, sizeof *c);
    if (!c) return;
    uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    c->srv = s;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    s->nclients++;
    c->next = s->clients;
    if (s->clients) s->clients->prev = c;
    s->clients = c;
    c->id = ++s->next_client_id;
    c->proto = 2;
    c->authed = s->cfg.requirepass[0] == 0;
    c->created_ms = c->last_ms = keel_wall_ms();
    kbuf_init(&c->out);
    kbuf_init(&c->wbuf);
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    char ip[48] = "?";
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        uv_ip_name((struct sockaddr *)&ss, ip, sizeof ip);
        int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        snprintf(c->addr, sizeof c->addr, "%s:%d", ip, port);
    }
    if (s->nclients > (size_t)s->cfg.maxclients) {
        s->rejected_connections++;
        resp_w_error(&c->out, "ERR max number of clients reached");
        server_close_after_reply(c);
        client_mark_pending(c);
        return;
    }
    s->total_connections++;
    c->parser = resp_req_new(&s->cfg.limits);
    if (!c->parser) {
        client_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    client_read_start(c);
}

/* ---- The turn ------------------------------------------------------------ */

static void on_turn_end(uv_check_t *h) {
    server *s = h->data;
    uint64_t fsync_us = 0;
    int rc = store_sync(s->st, &fsync_us);
    if (rc) {
        /* The WAL state after a failed sync is unknown (fsyncgate): do not
         * acknowledge anything, stop hard, let recovery sort it out. */
        keel_log(KEEL_LOG_ERROR, "fsync_failed", "error=\"%s\" action=exit", keel_strerror(rc));
        _exit(2);
    }
    if (fsync_us) {
        metrics_fsync(s->mx, fsync_us);
        s->last_fsync_us = fsync_us;
    }
    client *c = s->pending;
    s->pending = NULL;
    while (c) {
        client *next = c->next_pending;
        c->pending = 0;
        c->next_pending = NULL;
        client_flush(c);
        c = next;
    }
}

static void on_sweep(uv_timer_t *t) {
    server *s = t->data;
    long n = store_sweep_expired(s->st, keel_wall_ms(), SWEEP_KEYS_PER_RUN);
    if (n > 0) s->expired_keys += (uint64_t)n;
}

static void on_second(uv_timer_t *t) {
    server *s = t->data;
    metrics_tick(s->mx, 1.0);
    if (store_fsync_mode(s->st) == STORE_FSYNC_EVERYSEC) {
        uint64_t us = 0;
        if (store_sync_wal(s->st, &us) == 0 && us) metrics_fsync(s->mx, us);
    }
}

static void close_handle(uv_handle_t *h, void *arg) {
    if (uv_is_closing(h)) return;
    if (h->type == UV_TCP && h != (uv_handle_t *)&((server *)arg)->listener) {
        client_close(h->data);
        return;
    }
    uv_close(h, NULL);
}

static http_server *metrics_http;

static void on_signal(uv_signal_t *sig, int signum) {
    server *s = sig->data;
    if (s->stopping) return;
    s->stopping = 1;
    keel_log(KEEL_LOG_INFO, "shutdown", "signal=%s clients=%zu", strsignal(signum), s->nclients);
    on_turn_end(&s->turn_end); /* flush what the last turn produced */
    http_stop(metrics_http);
    metrics_http = NULL;
    uv_walk(s->loop, close_handle, s);
}

/* ---- Start-up ------------------------------------------------------------ */

static int load_node_id(server *s, char *err, size_t cap) {
    char *val = NULL;
    size_t len = 0;
    int rc = store_meta_get(s->st, "node_id", &val, &len);
    if (rc == 0) {
        char stored[65];
        snprintf(stored, sizeof stored, "%.*s", (int)len, val);
        free(val);
        if (s->cfg.id[0] && strcmp(stored, s->cfg.id) != 0) {
            snprintf(err, cap, "data directory %s belongs to node %s, not %s", s->cfg.dir, stored,
                     s->cfg.id);
            return KEEL_EINVAL;
        }
        snprintf(s->cfg.id, sizeof s->cfg.id, "%s", stored);
        return 0;
    }
    if (rc != KEEL_ENOTFOUND) {
        snprintf(err, cap, "cannot read node id: %s", keel_strerror(rc));
        return rc;
    }
    if (!s->cfg.id[0]) { /* 40 hex characters, like a Redis Cluster node id */
        unsigned char r[20];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
            snprintf(err, cap, "getrandom failed: %s", strerror(errno));
            return KEEL_EIO;
        }
        for (int i = 0; i < 20; i++)
            snprintf(s->cfg.id + 2 * i, 3, "%02x", r[i]);
    }
    if ((rc = store_meta_put(s->st, "node_id", s->cfg.id, strlen(s->cfg.id)))) {
        snprintf(err, cap, "cannot store node id: %s", keel_strerror(rc));
        return rc;
    }
    return 0;
}

static int read_file(const char *path, char **out, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot open map file %s: %s", path, strerror(errno));
        return KEEL_EIO;
    }
    kbuf b;
    kbuf_init(&b);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < (16u << 20))
        kbuf_append(&b, chunk, n);
    int bad = ferror(f);
    fclose(f);
    if (bad || kbuf_append(&b, "", 1)) {
        kbuf_close(&b);
        snprintf(err, cap, "cannot read map file %s", path);
        return KEEL_EIO;
    }
    *out = b.p;
    return 0;
}

static int load_map(server *s, keel_map *m, char *err, size_t cap) {
    if (s->cfg.own_all) {
        int rc = keel_map_init(m, s->cfg.partitions);
        if (rc || keel_map_add_node(m, s->cfg.id, s->cfg.announce_host, s->cfg.port) < 0) {
            snprintf(err, cap, "cannot build map: %s", keel_strerror(rc ? rc : KEEL_EINVAL));
            keel_map_close(m);
            return KEEL_EINVAL;
        }
        m->version = 1;
        for (unsigned p = 0; p < m->partitions; p++)
            m->owner[p] = 0, m->epoch[p] = 1;
        return 0;
    }
    char *text = NULL, sub[200];
    int rc = read_file(s->cfg.map_file, &text, err, cap);
    if (rc) return rc;
    rc = keel_map_parse_json(text, m, sub, sizeof sub);
    free(text);
    if (rc) {
        snprintf(err, cap, "bad map file %s: %s", s->cfg.map_file, sub);
        return rc;
    }
    if (keel_map_find_node(m, s->cfg.id) < 0) {
        snprintf(err, cap, "map file %s does not list this node (--id %s)", s->cfg.map_file,
                 s->cfg.id);
        keel_map_close(m);
        return KEEL_EINVAL;
    }
    return 0;
}

/* The partition count is part of the data directory's identity. */
static int check_partitions(server *s, unsigned p, char *err, size_t cap) {
    char *val = NULL, want[16];
    size_t len = 0;
    snprintf(want, sizeof want, "%u", p);
    int rc = store_meta_get(s->st, "partitions", &val, &len);
    if (rc == KEEL_ENOTFOUND) return store_meta_put(s->st, "partitions", want, strlen(want));
    if (rc) return rc;
    int same = len == strlen(want) && memcmp(val, want, len) == 0;
    if (!same)
        snprintf(err, cap, "data directory %s was created with %.*s partitions, not %u", s->cfg.dir,
                 (int)len, val, p);
    free(val);
    return same ? 0 : KEEL_EINVAL;
}

static int server_open(server *s, char *err, size_t cap) {
    store_opts so;
    store_opts_default(&so);
    so.fsync = s->cfg.fsync;
    int rc = store_open(s->cfg.dir, &so, &s->st, err, cap);
    if (rc) return rc;
    if ((rc = load_node_id(s, err, cap))) return rc;
    keel_map m;
    if ((rc = load_map(s, &m, err, cap))) return rc;
    if ((rc = check_partitions(s, m.partitions, err, cap))) {
        keel_map_close(&m);
        return rc;
    }
    s->pt = ptable_new(m.partitions, s->cfg.id);
    s->mx = metrics_new(m.partitions);
    if (!s->pt || !s->mx || ptable_apply_map(s->pt, &m)) {
        keel_map_close(&m);
        snprintf(err, cap, "out of memory building the partition table");
        return KEEL_ENOMEM;
    }
    return 0;
}

static int server_listen(server *s, char *err, size_t cap) {
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(s->cfg.bind, s->cfg.port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(s->cfg.bind, s->cfg.port, (struct sockaddr_in6 *)&addr);
    if (rc) {
        snprintf(err, cap, "bad --bind address %s", s->cfg.bind);
        return KEEL_EINVAL;
    }
    uv_tcp_init(s->loop, &s->listener);
    s->listener.data = s;
    if ((rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection))) {
        snprintf(err, cap, "cannot listen on %s:%d: %s", s->cfg.bind, s->cfg.port, uv_strerror(rc));
        return KEEL_EIO;
    }
    return 0;
}

static void server_start_handles(server *s) {
    uv_check_init(s->loop, &s->turn_end);
    s->turn_end.data = s;
    uv_check_start(&s->turn_end, on_turn_end);
    uv_timer_init(s->loop, &s->sweep_timer);
    s->sweep_timer.data = s;
    uv_timer_start(&s->sweep_timer, on_sweep, SWEEP_INTERVAL_MS, SWEEP_INTERVAL_MS);
    uv_timer_init(s->loop, &s->second_timer);
    s->second_timer.data = s;
    uv_timer_start(&s->second_timer, on_second, 1000, 1000);
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
}

int server_run(const node_config *cfg) {
    char err[512] = "";
    int status = 1;
    server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->cfg = *cfg;
    s->loop = uv_default_loop();
    s->start_ms = keel_wall_ms();
    keel_log_set_level(cfg->log_level);
    signal(SIGPIPE, SIG_IGN);
    unsigned char r[20];
    if (getrandom(r, sizeof r, 0) == (ssize_t)sizeof r)
        for (int i = 0; i < 20; i++)
            snprintf(s->runid + 2 * i, 3, "%02x", r[i]);
    if (server_open(s, err, sizeof err) || server_listen(s, err, sizeof err)) goto fail;
    if (cfg->metrics_port && http_start(s->loop, cfg->bind, cfg->metrics_port, node_render_metrics,
                                        s, &metrics_http, err, sizeof err))
        goto fail;
    server_start_handles(s);
    keel_log(KEEL_LOG_INFO, "listen",
             "id=%s addr=%s:%d fsync=%s partitions=%u owned=%s keys=%llu metrics_port=%d",
             s->cfg.id, cfg->bind, cfg->port, store_fsync_name(cfg->fsync),
             ptable_partitions(s->pt), cfg->own_all ? "all" : "map",
             (unsigned long long)store_total_keys(s->st), cfg->metrics_port);
    uv_run(s->loop, UV_RUN_DEFAULT);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "keel node: %s\n", err);
    keel_log(KEEL_LOG_ERROR, "startup_failed", "reason=\"%s\"", err);
    if (s->listener.data) uv_close((uv_handle_t *)&s->listener, NULL);
    uv_run(s->loop, UV_RUN_NOWAIT);
done:
    store_free(s->st);
    ptable_free(s->pt);
    metrics_free(s->mx);
    uv_loop_close(s->loop);
    if (status == 0) keel_log(KEEL_LOG_INFO, "stopped", "");
    free(s);
    return status;
}
