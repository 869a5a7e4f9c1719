/* cmd_save.c - SAVE, BGSAVE, LASTSAVE, SHUTDOWN (save.h).
 *
 * Keel has no RDB file: every acknowledged write is already in the WAL
 * (per --fsync). A "save" here is store_save: the turn written, the WAL
 * fsynced whatever the fsync mode, and the memtables flushed to SST files,
 * so what was acknowledged is durable now and recovery replays nothing.
 * SAVE does all of it on the loop, as redis' SAVE blocks. BGSAVE fsyncs
 * the WAL on the loop (so everything acknowledged before its reply is
 * durable at once) and flushes the memtables on the thread pool; LASTSAVE
 * moves when that flush completes. SHUTDOWN is SIGTERM's graceful stop
 * (server_stop): with SAVE it saves first; with or without NOSAVE the WAL
 * is fsynced, because keel never drops an acknowledged write. The stop runs
 * from a 0 ms timer, outside the handler, and the client's connection is
 * closed without a reply, as redis-server exits without one.
 *
 * Flags as redis 7.0: SAVE and SHUTDOWN are no-multi (refused inside
 * MULTI, which then fails with EXECABORT) and noscript; BGSAVE noscript.
 */
#include "node/save.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "node/cmd.h"

#include <stdlib.h>

void reply_storage(cmd_ctx *x, int rc); /* db.h */

typedef struct save_state {
    server *srv;
    long long last_unix; /* LASTSAVE */
    int last_ok;         /* the last BGSAVE's status */
    int bg_running;      /* a memtable flush on the thread pool */
    int bg_scheduled;    /* BGSAVE SCHEDULE while one ran: run again after */
    int bg_rc;
    uv_work_t work;
    uv_timer_t stop_timer; /* SHUTDOWN: server_stop outside the handler */
    int timer_on;
} save_state;

static save_state *state(server *s) {
    if (!s->save) {
        s->save = calloc(1, sizeof *s->save);
        if (!s->save) return NULL;
        s->save->srv = s;
        s->save->last_unix = s->start_ms / 1000;
        s->save->last_ok = 1;
    }
    return s->save;
}

long long save_last_unix(const server *s) {
    return s->save ? s->save->last_unix : s->start_ms / 1000;
}

int save_bgsave_running(const server *s) {
    return s->save ? s->save->bg_running : 0;
}

static void reply_oom(cmd_ctx *x) {
    reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* ---- SAVE, LASTSAVE ----------------------------------------------------------- */

void cmd_save(cmd_ctx *x) {
    save_state *st = state(x->srv);
    if (!st) {
        reply_oom(x);
        return;
    }
    if (st->bg_running) {
        reply_err(x, "ERR Background save already in progress");
        return;
    }
    int rc = store_save(x->srv->st);
    if (rc) {
        reply_storage(x, rc);
        return;
    }
    st->last_unix = keel_wall_ms() / 1000;
    reply_ok(x);
}

void cmd_lastsave(cmd_ctx *x) {
    resp_w_int(x->out, save_last_unix(x->srv));
}

/* ---- BGSAVE --------------------------------------------------------------------- */

static void bg_work(uv_work_t *w) { /* thread pool: the store stays open (save.h) */
    save_state *st = w->data;
    st->bg_rc = store_flush_memtables(st->srv->st);
}

static int bg_start(save_state *st);

static void bg_done(uv_work_t *w, int status) {
    save_state *st = w->data;
    st->bg_running = 0;
    st->last_ok = status == 0 && st->bg_rc == 0;
    if (st->last_ok) st->last_unix = keel_wall_ms() / 1000;
    keel_log(st->last_ok ? KEEL_LOG_INFO : KEEL_LOG_ERROR, "bgsave_done", "ok=%d error=\"%s\"",
             st->last_ok, st->bg_rc ? keel_strerror(st->bg_rc) : "");
    if (st->bg_scheduled && !st->srv->stopping) {
        st->bg_scheduled = 0;
        if (bg_start(st)) keel_log(KEEL_LOG_ERROR, "bgsave_failed", "scheduled=1");
    }
}

/* The WAL part now, the memtables on the pool. Returns 0 or a KEEL_E*. */
static int bg_start(save_state *st) {
    int rc = store_save_wal(st->srv->st);
    if (rc) return rc;
    st->work.data = st;
    rc = uv_queue_work(st->srv->loop, &st->work, bg_work, bg_done);
    if (rc) return KEEL_EIO;
    st->bg_running = 1;
    return 0;
}

/* BGSAVE [SCHEDULE] */
void cmd_bgsave(cmd_ctx *x) {
    int schedule = 0;
    if (x->argc > 1) {
        if (x->argc == 2 && arg_is(x, 1, "schedule")) {
            schedule = 1;
        } else {
            reply_syntax(x);
            return;
        }
    }
    save_state *st = state(x->srv);
    if (!st) {
        reply_oom(x);
        return;
    }
    if (st->bg_running) {
        if (!schedule) {
            reply_err(x, "ERR Background save already in progress");
            return;
        }
        st->bg_scheduled = 1;
        resp_w_simple(x->out, "Background saving scheduled");
        return;
    }
    int rc = bg_start(st);
    if (rc) {
        reply_storage(x, rc);
        return;
    }
    resp_w_simple(x->out, "Background saving started");
}

/* ---- SHUTDOWN ----------------------------------------------------------------------- */

enum { SD_NOSAVE = 1, SD_SAVE = 2, SD_NOW = 4, SD_FORCE = 8 };

static void on_stop_timer(uv_timer_t *t) {
    save_state *st = t->data;
    server_stop(st->srv, "reason=SHUTDOWN");
}

/* SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT] */
void cmd_shutdown(cmd_ctx *x) {
    unsigned flags = 0;
    int abort_ = 0;
    for (int i = 1; i < x->argc; i++) {
        if (arg_is(x, i, "nosave"))
            flags |= SD_NOSAVE;
        else if (arg_is(x, i, "save"))
            flags |= SD_SAVE;
        else if (arg_is(x, i, "now"))
            flags |= SD_NOW;
        else if (arg_is(x, i, "force"))
            flags |= SD_FORCE;
        else if (arg_is(x, i, "abort"))
            abort_ = 1;
        else {
            reply_syntax(x);
            return;
        }
    }
    if ((abort_ && flags) || ((flags & SD_NOSAVE) && (flags & SD_SAVE))) {
        reply_syntax(x);
        return;
    }
    if (abort_) { /* keel's SHUTDOWN never waits (no replicas to catch up) */
        reply_err(x, "ERR No shutdown in progress.");
        return;
    }
    save_state *st = state(x->srv);
    if (!st) {
        reply_oom(x);
        return;
    }
    if (st->timer_on || x->srv->stopping) { /* already on its way */
        rserver_close_after_reply(x->c);
        return;
    }
    /* The WAL always; SAVE also the memtables. A failed WAL sync is sticky
     * (the group commit then stops the node hard, as for any write). */
    int rc = store_save_wal(x->srv->st);
    if (!rc && (flags & SD_SAVE)) {
        rc = store_flush_memtables(x->srv->st);
        if (rc && (flags & SD_FORCE)) rc = 0;
    }
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "shutdown_failed", "error=\"%s\"", keel_strerror(rc));
        reply_err(x, "ERR Errors trying to SHUTDOWN. Check logs.");
        return;
    }
    if (uv_timer_init(x->srv->loop, &st->stop_timer)) {
        reply_err(x, "ERR Errors trying to SHUTDOWN. Check logs.");
        return;
    }
    st->stop_timer.data = st;
    st->timer_on = 1;
    (void)uv_timer_start(&st->stop_timer, on_stop_timer, 0, 0);
    rserver_close_after_reply(x->c); /* no reply: the connection just closes */
}

/* ---- Lifetime ---------------------------------------------------------------------- */

void save_stop(server *s) {
    save_state *st = s->save;
    if (!st) return;
    st->bg_scheduled = 0;
    if (st->timer_on) uv_close((uv_handle_t *)&st->stop_timer, NULL);
    st->timer_on = 0;
}

void save_free(save_state *st) {
    free(st); /* the loop has ended: no handle or work request is live */
}
