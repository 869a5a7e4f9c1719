/* server.c - the node process: store, partition table, timers, signals, and
 * an rserver whose turn-end hook is the group commit (see server.h).
 *
 * Start-up order matters: flags, data directory, node id and map are all
 * checked before the listener binds, so a bad configuration never opens a
 * port.
 */
#include "node/server.h"
#include "node/walsync.h"
#include "node/coordlink.h"
#include <hiredis/hiredis.h>
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/failpoint.h"
#include "node/access.h"
#include "node/latency.h"
#include "node/slowlog.h"
#include "node/cluster.h"
#include "node/blocking.h"
#include "node/cmd.h"
#include "node/cmdstats.h"
#include "node/introspect.h"
#include "net/http.h"
#include "node/move.h"
#include "node/multi.h"
#include "node/rep_uv.h"
#include "net/peerserve.h"
#include "node/script.h"
#include "node/save.h"
#include "node/migrate.h"

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
/* The gc of orphaned field records runs on its own timer, in small runs: a
 * run of 2,000 records every 100 ms kept the loop busy 1.2-24 ms per run
 * (bench/move_bighash, DEL of a million-field hash). Now every 20 ms, steps
 * of GC_STEP_RECORDS until GC_RUN_US or GC_RECORDS_PER_RUN (20,000/s at
 * most, as before). */
#define GC_INTERVAL_MS 20
#define GC_RECORDS_PER_RUN 400
#define GC_STEP_RECORDS 50
#define GC_RUN_US 500

void node_render_metrics(void *arg, kbuf *out); /* info.c */

/* ---- The turn ------------------------------------------------------------ */

static int on_request(void *arg, client *c, int argc, char **argv, const size_t *argvlen) {
    return cmd_dispatch(arg, c, argc, argv, argvlen);
}

static void on_close(void *arg, client *c) {
    server *s = arg;
    multi_conn_closed(s, c);
    migrate_conn_closed(s, c);
    client_conn_closed(s, c);
    blocking_conn_closed(s, c);
    node_conn *nc = c->user;
    if (s->rep && nc) node_rep_peer_closed(s->rep, c, peerserve_peer(&nc->peer));
    move_conn_closed(s->mv, c);
}

/* After a successful group commit: replication's turn end (rep_uv.h). */
static uint64_t seal_turn(void *arg) {
    server *s = arg;
    return node_rep_seal(s->rep);
}

/* Group commit, before any reply of the turn leaves. */
static int before_flush(void *arg) {
    server *s = arg;
    if (s->epoch_log) fflush(s->epoch_log); /* before the replies it records leave */
    uint64_t fsync_us = 0;
    node_rep_presync(s->rep); /* RF > 1: the leader's batches leave before the fsync */
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
    return 0;
}

/* During a busy script: may this turn's replies leave before its end?
 * Not if the store has something of the turn to make durable, nor if a
 * write was routed to a replicated partition (its turn end may seal the
 * replies, even of a write that changed nothing: SET NX on a key that
 * exists). The epoch log is flushed first, as before_flush does. */
static int turn_clean(void *arg) {
    server *s = arg;
    if (!store_turn_clean(s->st) || node_rep_turn_touched(s->rep)) return 0;
    if (s->epoch_log) fflush(s->epoch_log);
    return 1;
}

static const rserver_ops node_ops = {.dispatch = on_request,
                                     .before_flush = before_flush,
                                     .on_close = on_close,
                                     .seal_turn = seal_turn,
                                     .turn_clean = turn_clean};

/* A store that has failed (a write or a WAL flush: store_failed) stops the
 * node as a failed group commit does; the timers' paths used to drop it. */
static void stop_if_failed(server *s, const char *what, long rc) {
    keel_log(KEEL_LOG_ERROR, what, "error=\"%s\"", keel_strerror((int)rc));
    if (!store_failed(s->st)) return; /* e.g. out of memory: retried next time */
    if (s->epoch_log) fflush(s->epoch_log);
    keel_log(KEEL_LOG_ERROR, "fsync_failed", "error=\"%s\" action=exit",
             keel_strerror(store_failed(s->st)));
    _exit(2);
}

/* The expiry sweep and the gc leave alone the partitions being moved in or
 * fenced (move_sweep_skip) and the replicated ones this node does not lead
 * (node_rep_sweep_skip). */
static int sweep_skip(void *arg, unsigned slot) {
    server *s = arg;
    return move_sweep_skip(s->mv, slot) || node_rep_sweep_skip(s->rep, slot);
}

static void on_sweep(uv_timer_t *t) {
    server *s = t->data;
    long n = store_sweep_expired(s->st, keel_wall_ms(), SWEEP_KEYS_PER_RUN);
    if (n > 0) s->expired_keys += (uint64_t)n;
    if (n < 0) stop_if_failed(s, "sweep_failed", n);
}

static void on_gc(uv_timer_t *t) {
    server *s = t->data;
    uint64_t t0 = keel_mono_us();
    long done = 0;
    while (done < GC_RECORDS_PER_RUN) {
        long g = store_gc(s->st, keel_wall_ms(), GC_STEP_RECORDS); /* fields of deleted keys */
        if (g < 0) stop_if_failed(s, "gc_failed", g);
        if (g <= 0) break;
        done += g;
        if (keel_mono_us() - t0 >= GC_RUN_US) break;
    }
}

static void on_everysec_synced(void *arg, int rc) {
    server *s = arg;
    if (rc) stop_if_failed(s, "everysec_fsync_failed", rc);
    uint64_t us = walsync_last_us(s->wsync);
    if (us) metrics_fsync(s->mx, us);
}

static void on_second(uv_timer_t *t) {
    server *s = t->data;
    metrics_tick(s->mx, 1.0);
    /* As redis' everysec on its bio thread: the fsync runs off the loop; a
     * second still in flight is not doubled. */
    if (store_fsync_mode(s->st) == STORE_FSYNC_EVERYSEC && !walsync_busy(s->wsync)) {
        int rc = walsync_request(s->wsync, on_everysec_synced, s);
        if (rc) stop_if_failed(s, "everysec_fsync_failed", rc);
    }
}

/* SIGTERM on a node that leads RF > 1 partitions (contract C5): asks the
 * coordinator to hand each one to an in-sync follower (KEEL.REP.HANDOFF
 * START, then STATUS every HANDOFF_POLL_MS until it answers the result),
 * serving meanwhile (writes of a partition being handed over get
 * -TRYAGAIN, then -MOVED), and stops when it ended or after 10 s. The
 * coordinator answers each poll at once, so the heartbeats on the same link
 * (this node's leases, its ISR proposals: a target that must re-enter the
 * ISR first) go on during the hand-off; the plain HANDOFF, held until the
 * end, is the fallback for a coordinator that knows no START. */
#define HANDOFF_MS 10000
#define HANDOFF_POLL_MS 50

static void handoff_closed(uv_handle_t *h) {
    (void)h;
}

static void on_handoff_timeout(uv_timer_t *t) {
    server *s = t->data;
    keel_log(KEEL_LOG_WARN, "handoff_timeout", "ms=%d", HANDOFF_MS);
    server_stop(s, s->stop_why);
}

static void on_handoff(void *arg, struct redisReply *r);

static int handoff_call(server *s, const char *how) {
    const char *argv[] = {"KEEL.REP.HANDOFF", how};
    return coordlink_call(s->link, how ? 2 : 1, argv, NULL, on_handoff, s);
}

static void on_handoff_poll(uv_timer_t *t) {
    server *s = t->data;
    if (s->stopping) return;
    if (handoff_call(s, "STATUS")) {
        keel_log(KEEL_LOG_WARN, "handoff_failed", "reply=\"not connected to the coordinator\"");
        server_stop(s, s->stop_why);
    }
}

static void on_handoff(void *arg, struct redisReply *r) {
    server *s = arg;
    if (s->stopping) return;
    if (r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "HANDING-OFF")) {
        uv_timer_start(&s->handoff_poll, on_handoff_poll, HANDOFF_POLL_MS, 0);
        return;
    }
    if (r && r->type == REDIS_REPLY_ERROR && !s->handoff_held &&
        !strncmp(r->str, "ERR wrong number of arguments", 29) && handoff_call(s, NULL) == 0) {
        s->handoff_held = 1; /* a coordinator that knows no START */
        return;
    }
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER)
        keel_log(KEEL_LOG_INFO, "handoff_done", "moved=%lld left=%lld", r->element[0]->integer,
                 r->element[1]->integer);
    else
        keel_log(KEEL_LOG_WARN, "handoff_failed", "reply=\"%s\"",
                 !r                             ? "link down"
                 : r->type == REDIS_REPLY_ERROR ? r->str
                                                : "unexpected");
    server_stop(s, s->stop_why);
}

static void on_signal(uv_signal_t *sig, int signum) {
    server *s = sig->data;
    char why[64];
    snprintf(why, sizeof why, "signal=%s", strsignal(signum));
    if (signum == SIGTERM && !s->stopping && !s->handing_off && node_rep_leads_any(s->rep)) {
        snprintf(s->stop_why, sizeof s->stop_why, "%s", why);
        if (handoff_call(s, "START") == 0) {
            s->handing_off = 1;
            uv_timer_init(s->loop, &s->handoff_timer);
            s->handoff_timer.data = s;
            uv_timer_start(&s->handoff_timer, on_handoff_timeout, HANDOFF_MS, 0);
            uv_timer_init(s->loop, &s->handoff_poll);
            s->handoff_poll.data = s;
            keel_log(KEEL_LOG_INFO, "handoff_requested", "%s", why);
            return;
        }
        keel_log(KEEL_LOG_WARN, "handoff_failed", "reply=\"not connected to the coordinator\"");
    }
    server_stop(s, why);
}

void server_stop(server *s, const char *why) {
    if (s->stopping) return;
    s->stopping = 1;
    if (s->handing_off) {
        uv_close((uv_handle_t *)&s->handoff_timer, handoff_closed);
        uv_close((uv_handle_t *)&s->handoff_poll, handoff_closed);
    }
    rserver_stats st;
    rserver_get_stats(s->rs, &st);
    keel_log(KEEL_LOG_INFO, "shutdown", "%s clients=%zu", why, st.clients);
    save_stop(s);                        /* SAVE/SHUTDOWN's handles (cmd_save.c) */
    if (s->rs) rserver_flush_now(s->rs); /* the last turn's replies, after their sync */
    rserver_stop(s->rs);
    blocking_free(s);
    node_rep_free(s->rep);
    s->rep = NULL;
    node_cluster_stop(s, 1); /* tells the coordinator at once: no timeout */
    moves_free(s->mv);
    s->mv = NULL;
    http_stop(s->http);
    s->http = NULL;
    if (s->sweep_timer.data) uv_close((uv_handle_t *)&s->sweep_timer, NULL);
    if (s->gc_timer.data) uv_close((uv_handle_t *)&s->gc_timer, NULL);
    if (s->second_timer.data) uv_close((uv_handle_t *)&s->second_timer, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    loopstat_free(s->loops);
    s->loops = NULL;
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
    if (s->cfg.block_cache_bytes) so.cache_bytes = s->cfg.block_cache_bytes;
    int rc = store_open(s->cfg.dir, &so, &s->st, err, cap);
    if (rc) return rc;
    if (!(s->wsync = walsync_new(s->loop, s->st)))
        return snprintf(err, cap, "cannot start the fsync thread"), KEEL_ENOMEM;
    if ((rc = load_node_id(s, err, cap))) return rc;
    keel_map m;
    rc = s->cfg.coord_port ? node_cluster_start(s, &m, err, cap) : load_map(s, &m, err, cap);
    if (rc) return rc;
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
    if (s->have_secret) { /* a coordinated cluster: partitions can move */
        if (!(s->mv = moves_new(s, &s->secret, s->cfg.hold_max_ms)))
            return snprintf(err, cap, "out of memory"), KEEL_ENOMEM;
        if ((rc = move_restore(s->mv)))
            return snprintf(err, cap, "cannot restore partition states"), rc;
        if (!(s->rep = node_rep_new(s, &s->secret, s->incarnation, err, cap))) return KEEL_EIO;
        store_set_sweep_filter(s->st, sweep_skip, s);
    }
    return 0;
}

static int server_listen(server *s, char *err, size_t cap) {
    rserver_config rc = {.bind = s->cfg.bind,
                         .port = s->cfg.port,
                         .maxclients = s->cfg.maxclients,
                         .max_output = s->cfg.max_output,
                         .limits = s->cfg.limits,
                         .auth_required = s->cfg.requirepass[0] != 0};
    return rserver_start(s->loop, &rc, &node_ops, s, &s->rs, err, cap);
}

/* Signals first: a node waiting for its first map must still stop cleanly. */
static void server_start_signals(server *s) {
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
}

static void server_start_timers(server *s) {
    uv_timer_init(s->loop, &s->sweep_timer);
    s->sweep_timer.data = s;
    uv_timer_start(&s->sweep_timer, on_sweep, SWEEP_INTERVAL_MS, SWEEP_INTERVAL_MS);
    uv_timer_init(s->loop, &s->gc_timer);
    s->gc_timer.data = s;
    uv_timer_start(&s->gc_timer, on_gc, GC_INTERVAL_MS, GC_INTERVAL_MS);
    uv_timer_init(s->loop, &s->second_timer);
    s->second_timer.data = s;
    uv_timer_start(&s->second_timer, on_second, 1000, 1000);
    if ((s->loops = loopstat_new()) && loopstat_start(s->loops, s->loop)) {
        keel_log(KEEL_LOG_WARN, "loopstat_unavailable", "");
        loopstat_free(s->loops);
        s->loops = NULL;
    }
}

void server_cmd_state_free(server *s) {
    cmdstats_free(s->cstats);
    config_params_free(s->params);
    monitors_free(s->monitors);
    access_free(s->access);
    slowlog_free(s->slowlog);
    latency_free(s->latency);
    save_free(s->save);
    s->save = NULL;
    migrate_free(s->migrate);
    s->migrate = NULL;
    s->cstats = NULL, s->params = NULL, s->monitors = NULL;
    s->access = NULL, s->slowlog = NULL, s->latency = NULL;
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
    /* A new incarnation every start (C3): 64 random bits. */
    unsigned char inc[8];
    if (getrandom(inc, sizeof inc, 0) != (ssize_t)sizeof inc) {
        fprintf(stderr, "keel node: getrandom failed: %s\n", strerror(errno));
        free(s);
        return 1;
    }
    for (int i = 0; i < 8; i++)
        snprintf(s->incarnation + 2 * i, 3, "%02x", inc[i]);
    kbuf_init(&s->first_map);
    if (failpoint_load_env(getenv(FAILPOINT_ENV), err, sizeof err)) goto fail_early;
    server_start_signals(s);
    if (server_open(s, err, sizeof err) || server_listen(s, err, sizeof err)) goto fail;
    if (cfg->epoch_log[0] && !(s->epoch_log = fopen(cfg->epoch_log, "a"))) {
        snprintf(err, sizeof err, "cannot open --epoch-log %s: %s", cfg->epoch_log,
                 strerror(errno));
        goto fail;
    }
    static const http_route routes[] = {{"/metrics", HTTP_PROMETHEUS, node_render_metrics}};
    if (cfg->metrics_port &&
        http_start(s->loop, cfg->bind, cfg->metrics_port, routes, 1, s, &s->http, err, sizeof err))
        goto fail;
    server_start_timers(s);
    keel_log(KEEL_LOG_INFO, "listen",
             "id=%s addr=%s:%d fsync=%s partitions=%u owned=%s keys=%llu metrics_port=%d",
             s->cfg.id, cfg->bind, cfg->port, store_fsync_name(cfg->fsync),
             ptable_partitions(s->pt),
             cfg->own_all      ? "all"
             : cfg->coord_port ? "coord"
                               : "map",
             (unsigned long long)store_total_keys(s->st), cfg->metrics_port);
    uv_run(s->loop, UV_RUN_DEFAULT);
    status = 0;
    goto done;
fail_early:
    server_start_signals(s); /* the failure path below closes them */
fail:
    fprintf(stderr, "keel node: %s\n", err);
    keel_log(KEEL_LOG_ERROR, "startup_failed", "reason=\"%s\"", err);
    rserver_stop(s->rs);
    node_rep_free(s->rep);
    s->rep = NULL;
    node_cluster_stop(s, 0);
    moves_free(s->mv);
    s->mv = NULL;
    if (!s->stopping) {
        uv_close((uv_handle_t *)&s->sigint, NULL);
        uv_close((uv_handle_t *)&s->sigterm, NULL);
    }
    uv_run(s->loop, UV_RUN_NOWAIT);
done:
    script_shutdown();
    if (s->epoch_log) fclose(s->epoch_log);
    kbuf_close(&s->first_map);
    server_cmd_state_free(s);
    peerauth_secret_wipe(&s->secret);
    walsync_free(s->wsync); /* joins its thread: no fsync runs past here */
    s->wsync = NULL;
    uv_run(s->loop, UV_RUN_NOWAIT); /* its handle's close */
    store_free(s->st);
    ptable_free(s->pt);
    metrics_free(s->mx);
    uv_loop_close(s->loop);
    if (status == 0) keel_log(KEEL_LOG_INFO, "stopped", "");
    free(s);
    return status;
}
