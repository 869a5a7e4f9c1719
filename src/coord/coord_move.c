/* coord_move.c - the move executor; see coord_move.h and docs/moves.md.
 *
 * One cmove per move not yet DONE or ABORTED-and-acknowledged. drive() looks
 * at a move's durable state and sends whatever directive is due; reply
 * callbacks advance the state and call drive() again, so the fence, verify,
 * commit and redirect steps follow each other without waiting for a tick.
 * A 20 ms timer catches everything else: links that came back, timeouts,
 * cleanups that fell due.
 */
#include "coord/coord_move.h"
#include "coord/coord_elect.h"
#include "coord/coord_history.h"
#include "coord/coord_int.h"
#include "coord/coord_links.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/coordkey.h"
#include "core/failpoint.h"
#include "core/num.h"
#include "net/replyshape.h"
#include "core/log.h"
#include "net/peerlink.h"
#include "planner/planner.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 20
#define RECENT_PAUSES 256

/* Within FENCED: FENCE sent to S, then VERIFY to D, then the commit. */
typedef enum {
    FENCE_NONE = 0,       /* not started here (a FENCED record from before a restart) */
    FENCE_SENT,           /* KEEL.MOVE.FENCE to S; awaiting f and S's digest */
    FENCE_VERIFYING,      /* KEEL.MOVE.VERIFY f to D; awaiting D's digest at f */
    FENCE_COMMITTING,     /* digests equal: the map store commit is under way */
    FENCE_COMMIT_UNKNOWN, /* the commit's outcome is unknown (KEEL_EUNKNOWN): the move stays
                             FENCED, the record is re-read and the commit retried; never
                             aborted for it (issue 12) */
} fence_step;

typedef coord_link nlink; /* coord_links.h */

typedef struct cmove {
    mapstore_move rec; /* mirror of the durable record */
    char phase[24];    /* the destination's last reported phase */
    uint64_t bytes, keys, lag_bytes, lag_ms, total;
    double rate_bps;
    uint64_t budget; /* move_bytes_per_sec for this move; 0 = unlimited */
    int64_t last_report_ms, started_ms;
    int out_acked, in_acked;
    unsigned out_gen, in_gen; /* link generation at the acknowledgement */
    int busy_s, busy_d;       /* a directive in flight to S / D */
    fence_step fence_step;    /* the critical section's sub-steps (DESIGN §6 steps 4-5) */
    uint64_t fence_us;        /* when FENCE was sent (monotonic) */
    int64_t fence_ms;
    int64_t commit_retry_ms; /* FENCE_COMMIT_UNKNOWN: next re-read (coord_now) */
    uint64_t f, digest_s, keys_s;
    int need_commit_s, need_commit_d, need_abort_s, need_abort_d, cleanup_sent;
    double pause_ms; /* fence sent -> destination serving; < 0 unknown */
    int lag_known;   /* the last report measured lag_bytes */
    /* Map-store writes (issue 12: submitted, never waited for). While any
     * is in flight drive() sends nothing: the move goes on from the
     * completion, which sees the durable outcome. */
    int writes;     /* submitted for this move, not yet completed */
    int aborting;   /* the ABORTED record is submitted */
    int committing; /* mapstore_move_commit is submitted */
    struct cmove *next;
} cmove;

typedef struct pause_rec { /* what a finished move leaves in memory */
    uint64_t id;
    double ms;      /* write pause */
    uint64_t total; /* partition bytes when planned */
} pause_rec;

struct coord_moves_state {
    coord *co;
    int stopping; /* coord_moves_stop ran: callbacks still in flight do nothing */
    coord_links links;
    cmove *moves;
    uv_timer_t timer;
    pause_rec pauses[RECENT_PAUSES]; /* write pauses of finished moves */
    size_t npause;
    coord_move_counts counts;
    /* Concurrency, counted once per tick (may_start runs for every queued
     * move on every tick: no map-store query or full scan per move). */
    long long max_all;        /* max_moves_cluster, or max(1, live nodes / 2) */
    long long active;         /* moves started and not yet committed or aborted */
    int64_t *last_commit_ms;  /* [P] when each partition last changed owner */
    struct mv_wait *creating; /* moves whose record is submitted, not yet created */
};

typedef struct coord_moves_state cms;

static cms *state_of(coord *co) {
    return co->mv;
}

/* ---- Links ------------------------------------------------------------------ */

static void reconcile(cms *x, nlink *l);

static void on_link_ready(void *arg, coord_link *l) {
    reconcile(arg, l);
}

static nlink *link_get(cms *x, const char *id) {
    return coord_links_get(&x->links, id);
}

static nlink *link_ready_for(cms *x, const char *id, int64_t now) {
    return coord_links_ready_for(&x->links, id, now);
}

/* ---- Moves ------------------------------------------------------------------ */

/* x NULL: the executor is not running (a standby, or before start): none. */
static cmove *find(cms *x, uint64_t id) {
    for (cmove *m = x ? x->moves : NULL; m; m = m->next)
        if (m->rec.id == id) return m;
    return NULL;
}

static void remember_pause(cms *x, uint64_t id, double ms, uint64_t total) {
    x->pauses[x->npause++ % RECENT_PAUSES] = (pause_rec){id, ms, total};
}

static const pause_rec *recall(cms *x, uint64_t id) {
    for (size_t i = 0; i < RECENT_PAUSES && i < x->npause; i++)
        if (x->pauses[i].id == id) return &x->pauses[i];
    return NULL;
}

static void drop(cms *x, cmove *m) {
    cmove **pp = &x->moves;
    while (*pp && *pp != m)
        pp = &(*pp)->next;
    if (*pp) *pp = m->next;
    remember_pause(x, m->rec.id, m->pause_ms, m->total);
    free(m);
}

static cmove *track(cms *x, const mapstore_move *rec) {
    cmove *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->rec = *rec;
    m->pause_ms = -1;
    m->last_report_ms = m->started_ms = coord_now(x->co);
    snprintf(m->phase, sizeof m->phase, "planned");
    cmove **pp = &x->moves; /* keep id order */
    while (*pp)
        pp = &(*pp)->next;
    *pp = m;
    return m;
}

static int refresh(cms *x, cmove *m) {
    return mapstore_move_get(x->co->ms, m->rec.id, &m->rec);
}

static void drive(cms *x, cmove *m);

/* ---- Map-store writes ---------------------------------------------------------
 * Every write of a move is submitted (mapstore_submit) with a completion
 * that runs on the loop: m->writes counts them, and drive() does nothing
 * for a move with a write in flight, so no directive goes out that the
 * write's outcome could contradict. The completion looks the move up again
 * by id (it may be gone) and drives it once its last write is back. */

typedef struct mv_wait mv_wait;
typedef void (*mv_fn)(cms *x, cmove *m, const mapstore_result *r, mv_wait *w);
typedef void (*mv_notify)(coord *co, int rc, uint64_t id, const char *err, void *arg);

struct mv_wait {
    cms *x;
    uint64_t id; /* the move; 0 for a creation */
    mv_fn fn;
    int64_t now; /* wall clock of the record */
    char reason[MAPSTORE_REASON_MAX + 1];
    unsigned p;               /* creation: the partition */
    char to[KEEL_ID_MAX + 1]; /* creation: the destination */
    mv_notify notify;         /* the operator's command waiting, if any */
    void *notify_arg;
    struct mv_wait *next; /* x->creating */
};

static void on_mv_done(void *arg, const mapstore_result *r) {
    mv_wait *w = arg;
    cms *x = w->x;
    if (!x->stopping) {
        cmove *m = w->id ? find(x, w->id) : NULL;
        if (m && m->writes) m->writes--;
        w->fn(x, m, r, w);
        m = w->id ? find(x, w->id) : NULL;
        if (m && !m->writes && !x->stopping) drive(x, m);
    } else {
        for (mv_wait **pp = &x->creating; *pp; pp = &(*pp)->next)
            if (*pp == w) {
                *pp = w->next; /* a creation never completed: forget it */
                break;
            }
    }
    free(w);
}

/* Submits w for move m (NULL: a creation) with fn as its completion.
 * Returns the wait record (the caller may fill it before the loop runs
 * again), or NULL when the write was refused at once (logged). */
static mv_wait *mv_submit(cms *x, cmove *m, const mapstore_write *mw, mv_fn fn) {
    mv_wait *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->x = x;
    w->id = m ? m->rec.id : 0;
    w->fn = fn;
    if (mapstore_submit(x->co->ms, mw, on_mv_done, w)) {
        keel_log(KEEL_LOG_ERROR, "move_write_refused", "move=%llu error=\"%s\"",
                 (unsigned long long)w->id, mapstore_errmsg(x->co->ms));
        free(w);
        return NULL;
    }
    if (m) m->writes++;
    return w;
}

static void bytes_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    (void)x;
    if (r->rc)
        keel_log(KEEL_LOG_WARN, "move_progress_persist_failed", "move=%llu error=\"%s\"",
                 (unsigned long long)w->id, r->errmsg);
    else if (m)
        m->rec.bytes = (uint64_t)w->now; /* the bytes written, kept in now */
}

/* Progress bytes are persisted at phase changes only (copy done, fence,
 * commit, abort): a report every few hundred ms is memory, not an fsync.
 * A failure is logged: the figure is for people, the outcome does not
 * depend on it. */
static void persist_bytes(cms *x, cmove *m) {
    if (m->bytes == m->rec.bytes) return;
    mapstore_write w;
    mapstore_w_move_set_bytes(&w, m->rec.id, m->bytes);
    mv_wait *a = mv_submit(x, m, &w, bytes_done);
    if (a) a->now = (int64_t)m->bytes;
}

static void aborted_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    if (m) m->aborting = 0;
    if (w->notify) w->notify(x->co, r->rc, w->id, r->errmsg, w->notify_arg);
    if (r->rc) {
        keel_log(KEEL_LOG_ERROR, "move_abort_failed", "move=%llu error=\"%s\"",
                 (unsigned long long)w->id, r->errmsg);
        return;
    }
    if (!m) return;
    refresh(x, m);
    coord_history_event(x->co->history, w->now, m->rec.id, m->rec.partition, HISTORY_MOVE_ABORT);
    snprintf(m->phase, sizeof m->phase, "aborting");
    x->counts.aborted_total++;
    x->counts.last_end_ms = coord_now(x->co);
    int loud = !strcmp(w->reason, "checksum-mismatch");
    keel_log(loud ? KEEL_LOG_ERROR : KEEL_LOG_WARN, "move_aborted",
             "move=%llu partition=%u from=%s to=%s reason=%s", (unsigned long long)m->rec.id,
             m->rec.partition, m->rec.from, m->rec.to, w->reason);
    m->need_abort_s = m->out_acked || m->busy_s || 1;
    m->need_abort_d = 1;
    m->fence_step = FENCE_NONE;
}

/* Records the abort durably; its completion lets drive() tell the nodes.
 * Returns 0 (submitted), or KEEL_EINVAL: committed (only forward after the
 * commit), an abort already submitted, or the commit in flight (its
 * outcome decides; a move is never aborted over it). */
static int abort_move_notify(cms *x, cmove *m, const char *reason, mv_notify notify, void *arg) {
    int64_t now = keel_wall_ms(); /* for the record */
    if (m->rec.state >= MAPSTORE_MOVE_COMMITTED || m->aborting || m->committing) return KEEL_EINVAL;
    persist_bytes(x, m);
    mapstore_write w;
    mapstore_w_move_advance(&w, m->rec.id, MAPSTORE_MOVE_ABORTED, now, reason);
    mv_wait *a = mv_submit(x, m, &w, aborted_done);
    if (!a) return KEEL_EIO;
    a->now = now;
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    a->notify = notify;
    a->notify_arg = arg;
    m->aborting = 1;
    return 0;
}

static void abort_move(cms *x, cmove *m, const char *reason) {
    (void)abort_move_notify(x, m, reason, NULL, NULL);
}

/* ---- Directive replies --------------------------------------------------------
 * tag = (move id << 4) | kind. The move may be gone or in another state by
 * the time a reply arrives; each handler checks. */

enum {
    K_OUT = 1,
    K_IN,
    K_FENCE,
    K_VERIFY,
    K_COMMIT_S,
    K_COMMIT_D,
    K_ABORT_S,
    K_ABORT_D,
    K_CLEANUP,
    K_RATE,
    K_STATE
};

static void *tag_of(uint64_t id, int kind) {
    return (void *)(uintptr_t)(id << 4 | (uint64_t)kind);
}

static const char *err_text(redisReply *r) {
    return !r ? "node-unreachable" : r->type == REDIS_REPLY_ERROR ? r->str : "bad-reply";
}

static void commit_move(cms *x, cmove *m);

static void copying_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    if (!m || r->rc) return;
    refresh(x, m);
    coord_history_event(x->co->history, w->now, m->rec.id, m->rec.partition, HISTORY_MOVE_START);
    m->last_report_ms = coord_now(x->co);
    snprintf(m->phase, sizeof m->phase, "copying");
}

static void done_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    if (!m) return;
    if (r->rc) {
        m->cleanup_sent = 0; /* the cleanup is sent again */
        return;
    }
    keel_log(KEEL_LOG_INFO, "move_done", "move=%llu partition=%u", (unsigned long long)w->id,
             m->rec.partition);
    drop(x, m);
}

/* Submits DONE for a committed move; 0, or the submit's refusal. */
static int finish(cms *x, cmove *m, int64_t wall) {
    mapstore_write w;
    mapstore_w_move_advance(&w, m->rec.id, MAPSTORE_MOVE_DONE, wall, NULL);
    mv_wait *a = mv_submit(x, m, &w, done_done);
    if (!a) return KEEL_EIO;
    a->now = wall;
    return 0;
}

static void on_reply(void *arg, void *tag, redisReply *r) {
    nlink *l = arg;
    cms *x = l->set->arg;
    if (x->stopping) return;
    uint64_t id = (uintptr_t)tag >> 4;
    int kind = (int)((uintptr_t)tag & 15);
    cmove *m = find(x, id);
    if (!m) return;
    int ok_status = r && r->type == REDIS_REPLY_STATUS;
    int64_t now = keel_wall_ms(); /* for records */
    switch (kind) {
    case K_OUT:
        m->busy_s = 0;
        if (m->rec.state != MAPSTORE_MOVE_PLANNED) break;
        if (!ok_status) {
            abort_move(x, m, r ? "source-refused" : "source-unreachable");
            if (r)
                keel_log(KEEL_LOG_WARN, "move_refused", "move=%llu node=%s error=\"%s\"",
                         (unsigned long long)id, l->id, err_text(r));
            return;
        }
        m->out_acked = 1;
        m->out_gen = l->gen;
        break;
    case K_IN:
        m->busy_d = 0;
        if (m->rec.state != MAPSTORE_MOVE_PLANNED) break;
        if (!ok_status) {
            if (r)
                keel_log(KEEL_LOG_WARN, "move_refused", "move=%llu node=%s error=\"%s\"",
                         (unsigned long long)id, l->id, err_text(r));
            abort_move(x, m, r ? "destination-refused" : "destination-unreachable");
            return;
        }
        m->in_acked = 1;
        m->in_gen = l->gen;
        if (!m->aborting) {
            mapstore_write w;
            mapstore_w_move_advance(&w, id, MAPSTORE_MOVE_COPYING, now, NULL);
            mv_wait *a = mv_submit(x, m, &w, copying_done);
            if (a) a->now = now;
        }
        break;
    case K_FENCE:
        m->busy_s = 0;
        if (m->rec.state != MAPSTORE_MOVE_FENCED || m->fence_step != FENCE_SENT) break;
        if (!reply_shape(r, "iii")) { /* [f, digest, keys] */
            keel_log(KEEL_LOG_WARN, "move_fence_failed", "move=%llu error=\"%s\"",
                     (unsigned long long)id, err_text(r));
            abort_move(x, m, "fence-failed");
            return;
        }
        m->f = (uint64_t)r->element[0]->integer;
        m->digest_s = (uint64_t)r->element[1]->integer;
        m->keys_s = (uint64_t)r->element[2]->integer;
        m->fence_step = FENCE_VERIFYING;
        break;
    case K_VERIFY:
        m->busy_d = 0;
        if (m->rec.state != MAPSTORE_MOVE_FENCED || m->fence_step != FENCE_VERIFYING) break;
        if (!reply_shape(r, "ii")) { /* [digest, keys] */
            keel_log(KEEL_LOG_WARN, "move_verify_failed", "move=%llu error=\"%s\"",
                     (unsigned long long)id, err_text(r));
            abort_move(x, m, "verify-failed");
            return;
        }
        uint64_t dd = (uint64_t)r->element[0]->integer, kd = (uint64_t)r->element[1]->integer;
        if (dd != m->digest_s || kd != m->keys_s) {
            keel_log(KEEL_LOG_ERROR, "move_checksum_mismatch",
                     "move=%llu partition=%u f=%llu source_digest=%016llx source_keys=%llu "
                     "destination_digest=%016llx destination_keys=%llu",
                     (unsigned long long)id, m->rec.partition, (unsigned long long)m->f,
                     (unsigned long long)m->digest_s, (unsigned long long)m->keys_s,
                     (unsigned long long)dd, (unsigned long long)kd);
            abort_move(x, m, "checksum-mismatch");
            return;
        }
        m->fence_step = FENCE_COMMITTING;
        commit_move(x, m);
        return;
    case K_COMMIT_D:
        m->busy_d = 0;
        if (ok_status) {
            m->need_commit_d = 0;
            if (m->pause_ms < 0 && m->fence_us) {
                m->pause_ms = (double)(keel_mono_us() - m->fence_us) / 1000.0;
                x->counts.last_pause_ms = m->pause_ms;
                if (m->pause_ms > x->counts.max_pause_ms) x->counts.max_pause_ms = m->pause_ms;
                histogram_observe(&x->counts.pause, m->pause_ms / 1000.0);
            }
        } else if (r) {
            keel_log(KEEL_LOG_WARN, "move_commit_push_failed", "move=%llu node=%s error=\"%s\"",
                     (unsigned long long)id, l->id, err_text(r));
        }
        break;
    case K_COMMIT_S:
        m->busy_s = 0;
        if (ok_status) m->need_commit_s = 0;
        if (!m->need_commit_s && !m->need_commit_d)
            snprintf(m->phase, sizeof m->phase, "awaiting-cleanup");
        break;
    case K_ABORT_S:
        m->busy_s = 0;
        if (ok_status) m->need_abort_s = 0;
        break;
    case K_ABORT_D:
        m->busy_d = 0;
        if (ok_status) m->need_abort_d = 0;
        break;
    case K_CLEANUP:
        m->busy_s = 0;
        if (ok_status && m->rec.state == MAPSTORE_MOVE_COMMITTED && finish(x, m, now) == 0)
            return; /* its completion drops it */
        m->cleanup_sent = 0;
        break;
    case K_RATE:
        break;
    }
    drive(x, m);
}

static int send_to(cms *x, cmove *m, const char *node, int kind, int argc, const char **argv,
                   const size_t *lens) {
    nlink *l = link_ready_for(x, node, coord_now(x->co));
    if (!l || !coord_elect_may_act()) return -1; /* a deposed leader sends nothing */
    return peerlink_send(l->pl, on_reply, tag_of(m->rec.id, kind), argc, argv, lens) ? -1 : 0;
}

/* ---- The commit ---------------------------------------------------------------- */

static void committed(cms *x, cmove *m, int64_t now, uint64_t epoch, uint64_t version);

/* The commit's outcome, from its completion: an unknown outcome, or any
 * failure of a retry other than a refusal, keeps the move FENCED
 * (aborting a commit that may have applied could leave two owners);
 * step_fence re-reads the record and retries. */
static void commit_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    int rc = r->rc;
    if (!m) return;
    m->committing = 0;
    if (rc && rc != KEEL_EINVAL && rc != KEEL_ENOTFOUND &&
        (rc == KEEL_EUNKNOWN || m->fence_step == FENCE_COMMIT_UNKNOWN)) {
        keel_log(KEEL_LOG_WARN, "move_commit_unknown", "move=%llu error=\"%s\"",
                 (unsigned long long)m->rec.id, r->errmsg);
        m->fence_step = FENCE_COMMIT_UNKNOWN;
        m->commit_retry_ms = coord_now(x->co) + 1000;
        return;
    }
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "move_commit_failed", "move=%llu error=\"%s\"",
                 (unsigned long long)m->rec.id, r->errmsg);
        abort_move(x, m, "commit-failed");
        return;
    }
    committed(x, m, w->now, r->epoch, r->version);
}

/* Submits the commit; the move waits (drive sends nothing) until its
 * completion. */
static void commit_move(cms *x, cmove *m) {
    int64_t now = keel_wall_ms(); /* for the record, and min_residence across restarts */
    if (FAILPOINT("move.before_commit") == FP_ERROR) {
        abort_move(x, m, "failpoint");
        return;
    }
    if (m->committing) return;
    persist_bytes(x, m);
    mapstore_write w;
    mapstore_w_move_commit(&w, m->rec.id, now);
    mv_wait *a = mv_submit(x, m, &w, commit_done);
    if (!a) { /* refused before it was queued: nothing was sent, as a failed commit */
        mapstore_result r = {
            .kind = MAPSTORE_W_MOVE_COMMIT, .rc = KEEL_EIO, .errmsg = mapstore_errmsg(x->co->ms)};
        mv_wait tmp = {.x = x, .id = m->rec.id, .now = now};
        commit_done(x, m, &r, &tmp);
        return;
    }
    a->now = now;
    m->committing = 1;
}

/* The commit of m applied (answered, or found on a re-read). */
static void committed(cms *x, cmove *m, int64_t now, uint64_t epoch, uint64_t version) {
    coord *co = x->co;
    refresh(x, m);
    coord_history_event(co->history, now, m->rec.id, m->rec.partition, HISTORY_MOVE_COMMIT);
    x->counts.committed_total++;
    x->counts.last_end_ms = coord_now(co);
    if (x->last_commit_ms) x->last_commit_ms[m->rec.partition] = now;
    keel_log(KEEL_LOG_INFO, "move_committed",
             "move=%llu partition=%u from=%s to=%s epoch=%llu version=%llu keys=%llu",
             (unsigned long long)m->rec.id, m->rec.partition, m->rec.from, m->rec.to,
             (unsigned long long)epoch, (unsigned long long)version, (unsigned long long)m->keys_s);
    FAILPOINT("move.after_commit");
    snprintf(m->phase, sizeof m->phase, "redirecting");
    m->need_commit_d = m->need_commit_s = 1;
    m->busy_s = m->busy_d = 0;
    drive(x, m);
}

/* ---- Drive --------------------------------------------------------------------- */

static void num(char *buf, size_t cap, uint64_t v) {
    snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* Live and a member (any membership but REMOVED, so a draining node's
 * moves go on while it is up, and stop when it is SUSPECT or DOWN). */
static int node_is_up(cms *x, const char *id) {
    mapstore_node n;
    return mapstore_node_get(x->co->ms, id, &n) == 0 && coord_node_usable(&n);
}

/* Concurrency: may a PLANNED move start now? */
/* Started (OUT sent or acknowledged) and not yet committed or aborted. */
static int is_active(const cmove *o) {
    return (o->rec.state > MAPSTORE_MOVE_PLANNED && o->rec.state < MAPSTORE_MOVE_COMMITTED) ||
           (o->rec.state == MAPSTORE_MOVE_PLANNED && (o->out_acked || o->busy_s));
}

static int may_start(cms *x, cmove *m) {
    coord *co = x->co;
    mapstore_setting ps; /* the kill switch holds back the planner's moves, not an operator's */
    if (strcmp(m->rec.reason, "operator") != 0 && mapstore_setting_get(co->ms, "paused", &ps) == 0)
        return 0;
    if (x->active >= x->max_all) return 0; /* the cluster is full: no scan */
    long long max_in = coord_setting_ll(co, "max_moves_in_per_node");
    long long max_out = coord_setting_ll(co, "max_moves_out_per_node");
    long long in = 0, out = 0;
    for (cmove *o = x->moves; o; o = o->next) {
        if (!is_active(o) || o == m) continue;
        in += !strcmp(o->rec.to, m->rec.to);
        out += !strcmp(o->rec.from, m->rec.from);
    }
    return in < max_in && out < max_out;
}

/* Recounts the concurrency figures may_start uses (each tick). */
static void count_concurrency(cms *x) {
    coord *co = x->co;
    x->max_all = coord_setting_ll(co, "max_moves_cluster");
    if (x->max_all <= 0) {
        mapstore_node *nodes = NULL;
        size_t nn = 0, up = 0;
        if (mapstore_node_list(co->ms, &nodes, &nn) == 0)
            for (size_t i = 0; i < nn; i++)
                up += coord_node_usable(&nodes[i]);
        free(nodes);
        x->max_all = up / 2 > 1 ? (long long)(up / 2) : 1;
    }
    x->active = 0;
    for (cmove *o = x->moves; o; o = o->next)
        x->active += is_active(o);
}

/* ---- The state machine: one step function per durable state ----------------------
 *
 *   PLANNED --start: OUT to S, then IN to D--> COPYING --reports--> CATCHING_UP
 *      |                                          |                     |
 *      +-- node-unavailable (after stall timeout) +-- node-unavailable, +-- lag <= fence_lag_bytes:
 *                                                     stalled               start_fence
 *   FENCED --fence: FENCE to S, VERIFY to D, digests equal--> COMMITTED (commit_move)
 *      +-- fence-timeout, coordinator-restart --> ABORTED
 *   COMMITTED --redirect: COMMIT to D then S; clean: CLEANUP after cleanup_after_s--> DONE
 *   ABORTED --tell: ABORT to S and D until both acknowledge--> forgotten
 *
 * Every transition to a durable state goes through the map store first
 * (abort_move, commit_move, start_fence, the reply handlers); the steps below
 * only send what the state calls for and apply the state's timeouts, measured
 * on coord_now(). */

typedef struct step {
    cms *x;
    cmove *m;
    coord *co;
    int64_t now; /* coord_now(): timeouts */
    char id[24], p[24], e[24], t[24];
} step;

static void step_start(step *s) {
    cms *x = s->x;
    cmove *m = s->m;
    if (!node_is_up(x, m->rec.from) || !node_is_up(x, m->rec.to)) {
        if (s->now - m->started_ms > coord_setting_ll(s->co, "move_stall_timeout_ms"))
            abort_move(x, m, "node-unavailable");
        return;
    }
    if (!m->out_acked && !m->busy_s) {
        if (!may_start(x, m)) return;
        char rate[24];
        num(rate, sizeof rate, m->budget);
        const char *argv[] = {"KEEL.MOVE.OUT", s->t, s->id, s->p, s->e, m->rec.to, rate};
        if (send_to(x, m, m->rec.from, K_OUT, 7, argv, NULL) == 0) {
            m->busy_s = 1;
            m->started_ms = s->now;
            x->active++;
        }
    } else if (m->out_acked && !m->in_acked && !m->busy_d) {
        mapstore_node src;
        if (mapstore_node_get(s->co->ms, m->rec.from, &src)) return;
        char port[16], lag[24]; /* D reports caught-up by the coordinator's threshold */
        snprintf(port, sizeof port, "%d", src.port);
        num(lag, sizeof lag, (uint64_t)coord_setting_ll(s->co, "fence_lag_bytes"));
        const char *argv[] = {"KEEL.MOVE.IN", s->t,     s->id, s->p, s->e,
                              m->rec.from,    src.host, port,  lag};
        if (send_to(x, m, m->rec.to, K_IN, 9, argv, NULL) == 0) m->busy_d = 1;
    }
}

static void step_watch_copy(step *s) {
    cmove *m = s->m;
    if (!node_is_up(s->x, m->rec.from) || !node_is_up(s->x, m->rec.to))
        abort_move(s->x, m, "node-unavailable");
    else if (s->now - m->last_report_ms > coord_setting_ll(s->co, "move_stall_timeout_ms"))
        abort_move(s->x, m, "stalled");
}

/* FENCE_COMMIT_UNKNOWN: re-read the record (a reload of the map store) at
 * most once a second; COMMITTED means the lost commit applied, FENCED that
 * it did not (or not yet: the retry's own guard then fails, and it is
 * re-read again). */
static void retry_commit(step *s) {
    cmove *m = s->m;
    mapstore_move rec;
    mapstore_partition p;
    if (s->now < m->commit_retry_ms) return;
    m->commit_retry_ms = s->now + 1000;
    /* Memory matches the store once a re-read succeeded (the one after
     * the lost commit, or this one): until then, only ask for one. */
    if (mapstore_stale(s->co->ms)) {
        if (!mapstore_pending(s->co->ms)) (void)mapstore_reload_submit(s->co->ms, NULL, NULL);
        return;
    }
    if (mapstore_move_get(s->co->ms, m->rec.id, &rec)) return;
    if (rec.state == MAPSTORE_MOVE_FENCED) {
        commit_move(s->x, m);
    } else if (rec.state == MAPSTORE_MOVE_COMMITTED &&
               mapstore_partition_get(s->co->ms, rec.partition, &p) == 0) {
        keel_log(KEEL_LOG_INFO, "move_commit_settled", "move=%llu applied=1",
                 (unsigned long long)rec.id);
        committed(s->x, m, rec.at_ms[MAPSTORE_MOVE_COMMITTED], p.epoch,
                  mapstore_version(s->co->ms));
    }
}

static void step_fence(step *s) {
    cms *x = s->x;
    cmove *m = s->m;
    if (m->fence_step == FENCE_COMMIT_UNKNOWN) {
        retry_commit(s);
        return;
    }
    if (m->fence_step == FENCE_NONE) { /* fenced before a restart of ours: cannot resume */
        abort_move(x, m, "coordinator-restart");
        return;
    }
    if (s->now - m->fence_ms > coord_setting_ll(s->co, "fence_timeout_ms")) {
        abort_move(x, m, "fence-timeout");
        return;
    }
    if (m->fence_step == FENCE_SENT && !m->busy_s) {
        const char *argv[] = {"KEEL.MOVE.FENCE", s->t, s->id};
        if (send_to(x, m, m->rec.from, K_FENCE, 3, argv, NULL) == 0) {
            m->busy_s = 1;
            m->fence_us = keel_mono_us();
        }
    } else if (m->fence_step == FENCE_VERIFYING && !m->busy_d) {
        char f[24];
        num(f, sizeof f, m->f);
        const char *argv[] = {"KEEL.MOVE.VERIFY", s->t, s->id, f};
        if (send_to(x, m, m->rec.to, K_VERIFY, 4, argv, NULL) == 0) m->busy_d = 1;
    }
}

static void step_committed(step *s) {
    cms *x = s->x;
    cmove *m = s->m;
    coord *co = s->co;
    if (m->need_commit_d || m->need_commit_s) {
        const kbuf *map = coord_map_json(co);
        if (!map) return;
        const char *argv[] = {"KEEL.MOVE.COMMIT", s->t, s->id, map->p};
        size_t lens[] = {16, strlen(s->t), strlen(s->id), map->len};
        /* D first: the source's held requests are about to be sent there. */
        if (m->need_commit_d && !m->busy_d &&
            send_to(x, m, m->rec.to, K_COMMIT_D, 4, argv, lens) == 0)
            m->busy_d = 1;
        if (m->need_commit_s && !m->busy_s &&
            send_to(x, m, m->rec.from, K_COMMIT_S, 4, argv, lens) == 0)
            m->busy_s = 1;
        return;
    }
    /* cleanup_after_s runs from the durable commit record, across restarts. */
    int64_t wall = keel_wall_ms();
    int64_t due =
        m->rec.at_ms[MAPSTORE_MOVE_COMMITTED] + coord_setting_ll(co, "cleanup_after_s") * 1000;
    if (wall < due || m->busy_s || m->cleanup_sent) return;
    mapstore_node src;
    if (mapstore_node_get(co->ms, m->rec.from, &src) == 0 &&
        src.membership == MAPSTORE_MEMBER_REMOVED) { /* nothing left to clean */
        (void)finish(x, m, wall);                    /* its completion drops it */
        return;
    }
    const char *argv[] = {"KEEL.MOVE.CLEANUP", s->t, s->id, s->p};
    if (send_to(x, m, m->rec.from, K_CLEANUP, 4, argv, NULL) == 0) m->busy_s = m->cleanup_sent = 1;
}

static void step_tell_abort(step *s) {
    cms *x = s->x;
    cmove *m = s->m;
    const char *argv[] = {"KEEL.MOVE.ABORT", s->t, s->id, s->p};
    if (m->need_abort_s && !m->busy_s && send_to(x, m, m->rec.from, K_ABORT_S, 4, argv, NULL) == 0)
        m->busy_s = 1;
    if (m->need_abort_d && !m->busy_d && send_to(x, m, m->rec.to, K_ABORT_D, 4, argv, NULL) == 0)
        m->busy_d = 1;
    mapstore_node a, b;
    /* A node that was removed can never acknowledge. */
    if (mapstore_node_get(s->co->ms, m->rec.from, &a) == 0 &&
        a.membership == MAPSTORE_MEMBER_REMOVED)
        m->need_abort_s = 0;
    if (mapstore_node_get(s->co->ms, m->rec.to, &b) == 0 && b.membership == MAPSTORE_MEMBER_REMOVED)
        m->need_abort_d = 0;
    if (!m->need_abort_s && !m->need_abort_d && !m->busy_s && !m->busy_d) drop(x, m);
}

static void step_forget(step *s) {
    drop(s->x, s->m);
}

/* What each durable state does on a tick, by name (for the state diagram
 * above and for reading logs). */
static const struct {
    const char *name;
    void (*fn)(step *s);
} steps[MAPSTORE_MOVE_NSTATES] = {
    [MAPSTORE_MOVE_PLANNED] = {"start", step_start},
    [MAPSTORE_MOVE_COPYING] = {"watch-copy", step_watch_copy},
    [MAPSTORE_MOVE_CATCHING_UP] = {"watch-copy", step_watch_copy},
    [MAPSTORE_MOVE_FENCED] = {"fence", step_fence},
    [MAPSTORE_MOVE_COMMITTED] = {"redirect-and-clean", step_committed},
    [MAPSTORE_MOVE_DONE] = {"forget", step_forget},
    [MAPSTORE_MOVE_ABORTED] = {"tell-abort", step_tell_abort},
};

static void drive(cms *x, cmove *m) {
    if (m->writes) return; /* a write in flight: its completion drives */
    step s = {.x = x, .m = m, .co = x->co, .now = coord_now(x->co)};
    num(s.id, sizeof s.id, m->rec.id);
    num(s.p, sizeof s.p, m->rec.partition);
    num(s.e, sizeof s.e, m->rec.epoch);
    num(s.t, sizeof s.t, x->co->term);
    if ((unsigned)m->rec.state < MAPSTORE_MOVE_NSTATES && steps[m->rec.state].fn)
        steps[m->rec.state].fn(&s);
    else
        step_forget(&s);
}

static void fenced_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    (void)w;
    if (!m || r->rc) return;
    refresh(x, m);
    m->fence_step = FENCE_SENT;
    m->fence_ms = coord_now(x->co);
}

static void start_fence(cms *x, cmove *m) {
    if (m->rec.state != MAPSTORE_MOVE_CATCHING_UP || m->fence_step != FENCE_NONE || m->writes ||
        m->aborting)
        return;
    persist_bytes(x, m);
    mapstore_write w;
    mapstore_w_move_advance(&w, m->rec.id, MAPSTORE_MOVE_FENCED, keel_wall_ms(), NULL);
    (void)mv_submit(x, m, &w, fenced_done);
}

/* Fence only on a measured backlog under fence_lag_bytes: the fence
 * drains the rest while writes are held. */
static void maybe_fence(cms *x, cmove *m) {
    if (m->rec.state == MAPSTORE_MOVE_CATCHING_UP && m->lag_known &&
        (!strcmp(m->phase, "catching-up") || !strcmp(m->phase, "caught-up")) &&
        m->lag_bytes <= (uint64_t)coord_setting_ll(x->co, "fence_lag_bytes"))
        start_fence(x, m);
}

static void catching_up_done(cms *x, cmove *m, const mapstore_result *r, mv_wait *w) {
    (void)w;
    if (!m || r->rc) return;
    refresh(x, m);
    maybe_fence(x, m); /* the report that moved it on may have been its last before the fence */
}

/* ---- Node restarts ----------------------------------------------------------------- */

static void on_state(void *arg, void *tag, redisReply *r) {
    nlink *l = arg;
    cms *x = l->set->arg;
    if (x->stopping || !r || r->type != REDIS_REPLY_ARRAY) return;
    unsigned gen = (unsigned)(uintptr_t)tag;
    /* Moves this node had taken up on an earlier connection must still be
     * live there; if not, it restarted and lost them. */
    for (cmove *m = x->moves, *next; m; m = next) {
        next = m->next;
        if (m->rec.state >= MAPSTORE_MOVE_COMMITTED) continue;
        int is_s = !strcmp(m->rec.from, l->id) && m->out_acked && m->out_gen < gen;
        int is_d = !strcmp(m->rec.to, l->id) && m->in_acked && m->in_gen < gen;
        if (!is_s && !is_d) continue;
        int live = 0;
        for (size_t i = 0; i < r->elements; i++) {
            redisReply *e = r->element[i];
            if (reply_shape(e, "isii") && (uint64_t)e->element[2]->integer == m->rec.id &&
                e->element[3]->integer)
                live = 1;
        }
        if (!live) abort_move(x, m, "node-restarted");
    }
    /* Records of moves that ended while the node was away. */
    char t[24];
    num(t, sizeof t, x->co->term);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i];
        /* [p, state, move, active]; anything else is skipped */
        if (!reply_shape(e, "isii") || e->element[0]->integer < 0 ||
            e->element[0]->integer >= (long long)x->co->partitions)
            continue;
        uint64_t mid = (uint64_t)e->element[2]->integer;
        if (find(x, mid)) continue;
        mapstore_move rec;
        char id[24], p[24];
        num(id, sizeof id, mid);
        num(p, sizeof p, (uint64_t)e->element[0]->integer);
        int known = mapstore_move_get(x->co->ms, mid, &rec) == 0;
        const char *st = e->element[1]->str;
        if (!coord_elect_may_act()) return;
        if (known && rec.state == MAPSTORE_MOVE_DONE && !strcmp(st, "RETIRED")) {
            const char *argv[] = {"KEEL.MOVE.CLEANUP", t, id, p};
            peerlink_send(l->pl, NULL, NULL, 4, argv, NULL);
        } else if (!known || rec.state == MAPSTORE_MOVE_ABORTED) {
            const char *argv[] = {"KEEL.MOVE.ABORT", t, id, p};
            peerlink_send(l->pl, NULL, NULL, 4, argv, NULL);
        }
    }
}

static void reconcile(cms *x, nlink *l) {
    l->want_reconcile = 0;
    char t[24];
    num(t, sizeof t, x->co->term);
    const char *argv[] = {"KEEL.MOVE.STATE", t};
    if (!coord_elect_may_act()) return;
    peerlink_send(l->pl, on_state, (void *)(uintptr_t)l->gen, 2, argv, NULL);
}

void coord_moves_node_registered(coord *co, const char *id) {
    cms *x = state_of(co);
    if (!x) return;
    nlink *l = link_get(x, id);
    if (!l) return;
    if (l->pl && l->ready) {
        reconcile(x, l); /* the link survived: ask now */
        return;
    }
    l->retry_ms = 0; /* dial now (the tick retries); link_ready reconciles */
    l->want_reconcile = 1;
    link_ready_for(x, id, coord_now(co));
}

/* ---- Reports from destinations -------------------------------------------------------- */

int coord_move_report(coord *co, const char *from, int argc, char **argv, const size_t *len) {
    cms *x = state_of(co);
    if (argc < 8 || argc > 9) return KEEL_EINVAL;
    uint64_t id, bytes, keys, lag = 0, lag_ms;
    /* "-1": the catch-up has not answered yet */
    int lag_known = !(len[5] == 2 && !memcmp(argv[5], "-1", 2));
    char *end;
    double rate = len[7] && argv[7][0] != ' ' ? strtod(argv[7], &end) : NAN;
    if (keel_parse_u64(argv[1], len[1], &id) || keel_parse_u64(argv[3], len[3], &bytes) ||
        keel_parse_u64(argv[4], len[4], &keys) ||
        (lag_known && keel_parse_u64(argv[5], len[5], &lag)) ||
        keel_parse_u64(argv[6], len[6], &lag_ms) || !isfinite(rate) || *end || rate < 0)
        return KEEL_EINVAL;
    if (!x) return 0;
    cmove *m = find(x, id);
    if (!m || strcmp(m->rec.to, from) != 0) return 0; /* only D reports, about its own move */
    const char *phase = argv[2];
    m->last_report_ms = coord_now(co);
    snprintf(m->phase, sizeof m->phase, "%s", phase);
    if (bytes > m->bytes) x->counts.bytes_total += bytes - m->bytes;
    m->bytes = bytes;
    m->keys = keys;
    m->lag_bytes = lag;
    m->lag_ms = lag_ms;
    m->lag_known = lag_known;
    m->rate_bps = rate;
    const char *reason = argc > 8 && argv[8][0] ? argv[8] : NULL;
    if (m->rec.state >= MAPSTORE_MOVE_FENCED) return 0;
    if (!strcmp(phase, "failed")) {
        abort_move(x, m, reason ? reason : "destination-failed");
        return 0;
    }
    if (!strcmp(phase, "non-converging")) {
        uint64_t max = (uint64_t)coord_setting_ll(co, "move_bytes_per_sec_max");
        if (m->budget && m->budget < max) {
            uint64_t nb = m->budget * 2 < max ? m->budget * 2 : max;
            keel_log(KEEL_LOG_WARN, "move_budget_raised", "move=%llu from=%llu to=%llu",
                     (unsigned long long)m->rec.id, (unsigned long long)m->budget,
                     (unsigned long long)nb);
            m->budget = nb;
            char t[24], id[24], r[24];
            num(t, sizeof t, co->term);
            num(id, sizeof id, m->rec.id);
            num(r, sizeof r, nb);
            const char *av[] = {"KEEL.MOVE.RATE", t, id, r};
            send_to(x, m, m->rec.from, K_RATE, 4, av, NULL);
            return 0;
        }
        abort_move(x, m, "non-converging");
        return 0;
    }
    if (m->rec.state == MAPSTORE_MOVE_COPYING && strcmp(phase, "copying") != 0 && !m->writes &&
        !m->aborting) {
        persist_bytes(x, m);
        mapstore_write w;
        mapstore_w_move_advance(&w, m->rec.id, MAPSTORE_MOVE_CATCHING_UP, keel_wall_ms(), NULL);
        (void)mv_submit(x, m, &w, catching_up_done);
    }
    maybe_fence(x, m);
    return 0;
}

/* ---- Operator entry points ------------------------------------------------------------- */

/* The move's record is durable: track it and start driving it. */
static void created_done(cms *x, cmove *unused, const mapstore_result *r, mv_wait *w) {
    coord *co = x->co;
    (void)unused;
    for (mv_wait **pp = &x->creating; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    mapstore_move rec;
    int rc = r->rc;
    const char *why = r->errmsg;
    if (!rc && mapstore_move_get(co->ms, r->id, &rec)) rc = KEEL_EIO, why = "lost the new move";
    cmove *m = rc ? NULL : track(x, &rec);
    if (!rc && !m) rc = KEEL_ENOMEM, why = "out of memory";
    if (rc) {
        keel_log(KEEL_LOG_WARN, "move_create_failed", "partition=%u to=%s error=\"%s\"", w->p,
                 w->to, why);
        if (w->notify) w->notify(co, rc, 0, why, w->notify_arg);
        return;
    }
    m->budget = (uint64_t)coord_setting_ll(co, "move_bytes_per_sec");
    m->total = co->parts[w->p].bytes;
    x->counts.started_total++;
    keel_log(KEEL_LOG_INFO, "move_planned", "move=%llu partition=%u from=%s to=%s reason=%s",
             (unsigned long long)rec.id, w->p, rec.from, w->to, w->reason);
    if (w->notify) w->notify(co, 0, rec.id, NULL, w->notify_arg);
    count_concurrency(x);
    drive(x, m);
}

int coord_move_create(coord *co, unsigned p, const char *to, const char *reason,
                      coord_move_done done, void *arg, char *err, size_t cap) {
    cms *x = state_of(co);
    mapstore_partition part;
    mapstore_node n;
    if (p >= co->partitions)
        return snprintf(err, cap, "partition %u out of range (0..%u)", p, co->partitions - 1),
               KEEL_ERANGE;
    if (mapstore_partition_get(co->ms, p, &part) || !part.owner[0])
        return snprintf(err, cap, "partition %u has no owner yet", p), KEEL_EINVAL;
    if (mapstore_node_get(co->ms, to, &n))
        return snprintf(err, cap, "no node %s", to), KEEL_ENOTFOUND;
    if (n.liveness != MAPSTORE_NODE_UP || n.membership != MAPSTORE_MEMBER_ACTIVE)
        return snprintf(err, cap, "node %s is %s, not UP", to, coord_node_summary(&n)), KEEL_EINVAL;
    if (coord_quarantined(co, to))
        return snprintf(err, cap, "node %s is quarantined (keel unquarantine %s)", to, to),
               KEEL_EINVAL;
    if (!strcmp(part.owner, to))
        return snprintf(err, cap, "node %s already owns partition %u", to, p), KEEL_EINVAL;
    if (!node_is_up(x, part.owner))
        return snprintf(err, cap, "the owner %s of partition %u is not UP", part.owner, p),
               KEEL_EINVAL;
    for (cmove *m = x->moves; m; m = m->next)
        if (m->rec.partition == p && m->rec.state < MAPSTORE_MOVE_COMMITTED)
            return snprintf(err, cap, "partition %u already has move %llu (%s)", p,
                            (unsigned long long)m->rec.id, mapstore_move_state_name(m->rec.state)),
                   KEEL_EEXIST;
    for (mv_wait *w = x->creating; w; w = w->next)
        if (w->p == p)
            return snprintf(err, cap, "partition %u already has a move being recorded", p),
                   KEEL_EEXIST;
    mapstore_write w;
    mapstore_w_move_create(&w, p, to, reason, keel_wall_ms());
    mv_wait *a = mv_submit(x, NULL, &w, created_done);
    if (!a) return snprintf(err, cap, "%s", mapstore_errmsg(co->ms)), KEEL_EIO;
    a->p = p;
    snprintf(a->to, sizeof a->to, "%s", to);
    snprintf(a->reason, sizeof a->reason, "%s", reason ? reason : "");
    a->notify = done;
    a->notify_arg = arg;
    a->next = x->creating;
    x->creating = a;
    return 0;
}

int coord_move_cancel(coord *co, uint64_t id, coord_move_done done, void *arg, char *err,
                      size_t cap) {
    cms *x = state_of(co);
    cmove *m = find(x, id);
    mapstore_move rec;
    if (!m) {
        if (mapstore_move_get(co->ms, id, &rec))
            return snprintf(err, cap, "no move %llu", (unsigned long long)id), KEEL_ENOTFOUND;
        return snprintf(err, cap, "move %llu already ended (%s)", (unsigned long long)id,
                        mapstore_move_state_name(rec.state)),
               KEEL_EINVAL;
    }
    if (m->rec.state >= MAPSTORE_MOVE_COMMITTED)
        return snprintf(err, cap, "move %llu is %s: after the commit a move only goes forward",
                        (unsigned long long)id, mapstore_move_state_name(m->rec.state)),
               KEEL_EINVAL;
    if (m->committing)
        return snprintf(err, cap, "move %llu is committing: its outcome decides",
                        (unsigned long long)id),
               KEEL_EINVAL;
    if (m->aborting)
        return snprintf(err, cap, "move %llu is already being aborted", (unsigned long long)id),
               KEEL_EINVAL;
    int rc = abort_move_notify(x, m, "cancelled", done, arg);
    if (rc) return snprintf(err, cap, "%s", mapstore_errmsg(co->ms)), rc;
    return 0;
}

/* ---- Views ---------------------------------------------------------------------------- */

static void move_json(cms *x, cJSON *o, const mapstore_move *r, const cmove *m, int64_t now) {
    cJSON_AddNumberToObject(o, "id", (double)r->id);
    cJSON_AddNumberToObject(o, "partition", r->partition);
    cJSON_AddStringToObject(o, "from", r->from);
    cJSON_AddStringToObject(o, "to", r->to);
    cJSON_AddStringToObject(o, "state", mapstore_move_state_name(r->state));
    cJSON_AddStringToObject(o, "phase", m ? m->phase : "");
    /* Waiting for a concurrency slot: planned, and OUT not yet sent. */
    cJSON_AddBoolToObject(o, "queued",
                          m && r->state == MAPSTORE_MOVE_PLANNED && !m->out_acked && !m->busy_s);
    uint64_t bytes = m && m->bytes > r->bytes ? m->bytes : r->bytes;
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    /* Finished moves: from memory while the coordinator remembers them, else
     * the bytes the move copied (the size when planned is not stored). */
    const pause_rec *pr = m ? NULL : recall(x, r->id);
    cJSON_AddNumberToObject(o, "total_bytes",
                            m    ? (double)m->total
                            : pr ? (double)pr->total
                                 : (double)r->bytes);
    cJSON_AddNumberToObject(o, "keys", m ? (double)m->keys : 0);
    cJSON_AddNumberToObject(o, "rate_bps", m ? m->rate_bps : 0);
    cJSON_AddNumberToObject(o, "lag_bytes", m ? (double)m->lag_bytes : 0);
    cJSON_AddNumberToObject(o, "lag_ms", m ? (double)m->lag_ms : 0);
    double eta = -1;
    if (m && m->rate_bps > 0 && r->state < MAPSTORE_MOVE_FENCED) {
        double left = m->total > bytes ? (double)(m->total - bytes) : 0;
        eta = (left + (double)m->lag_bytes) / m->rate_bps;
    }
    if (eta >= 0)
        cJSON_AddNumberToObject(o, "eta_s", eta);
    else
        cJSON_AddNullToObject(o, "eta_s");
    double pause = m ? m->pause_ms : pr ? pr->ms : -1;
    if (pause >= 0)
        cJSON_AddNumberToObject(o, "write_pause_ms", pause);
    else
        cJSON_AddNullToObject(o, "write_pause_ms");
    cJSON_AddStringToObject(o, "reason",
                            r->state == MAPSTORE_MOVE_ABORTED ? r->abort_reason : r->reason);
    cJSON_AddStringToObject(o, "planned_because", r->reason);
    int64_t start = r->at_ms[MAPSTORE_MOVE_PLANNED];
    int64_t end = r->state == MAPSTORE_MOVE_DONE      ? r->at_ms[MAPSTORE_MOVE_DONE]
                  : r->state == MAPSTORE_MOVE_ABORTED ? r->at_ms[MAPSTORE_MOVE_ABORTED]
                                                      : now;
    cJSON_AddNumberToObject(o, "age_s", (double)(end - start) / 1000.0);
    if (r->at_ms[MAPSTORE_MOVE_COMMITTED])
        cJSON_AddNumberToObject(o, "time_to_commit_s",
                                (double)(r->at_ms[MAPSTORE_MOVE_COMMITTED] - start) / 1000.0);
    cJSON_AddNumberToObject(o, "planned_at_ms", (double)start);
}

void coord_moves_json(coord *co, cJSON *arr, size_t recent) {
    cms *x = state_of(co);
    int64_t now = keel_wall_ms();
    mapstore_move *all = NULL;
    size_t n = 0;
    if (mapstore_move_list(co->ms, 0, &all, &n)) return;
    size_t finished = 0, skip;
    for (size_t i = 0; i < n; i++)
        finished += !find(x, all[i].id);
    skip = finished > recent ? finished - recent : 0;
    for (size_t i = 0; i < n; i++) {
        const cmove *m = find(x, all[i].id);
        if (!m && skip) {
            skip--;
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        move_json(x, o, m ? &m->rec : &all[i], m, now);
        cJSON_AddItemToArray(arr, o);
    }
    free(all);
}

void coord_moves_counts(coord *co, coord_move_counts *out) {
    cms *x = state_of(co);
    memset(out, 0, sizeof *out);
    if (!x) return;
    *out = x->counts;
    out->in_flight = out->queued = out->committed_pending_cleanup = 0;
    out->oldest_age_s = 0;
    int64_t now = keel_wall_ms();
    for (cmove *m = x->moves; m; m = m->next) {
        if (m->rec.state == MAPSTORE_MOVE_PLANNED && !m->out_acked && !m->busy_s)
            out->queued++;
        else if (m->rec.state < MAPSTORE_MOVE_COMMITTED)
            out->in_flight++;
        else if (m->rec.state == MAPSTORE_MOVE_COMMITTED)
            out->committed_pending_cleanup++;
        if (m->rec.state < MAPSTORE_MOVE_COMMITTED) {
            double age = (double)(now - m->rec.at_ms[MAPSTORE_MOVE_PLANNED]) / 1000.0;
            if (age > out->oldest_age_s) out->oldest_age_s = age;
        }
    }
}

/* ---- Life cycle ------------------------------------------------------------------------ */

static void on_tick(uv_timer_t *t) {
    cms *x = t->data;
    int64_t now = coord_now(x->co);
    count_concurrency(x);
    for (cmove *m = x->moves, *next; m; m = next) {
        next = m->next;
        /* Keep the links of every unfinished move up: a node that restarted
         * is noticed when its link comes back (reconcile), not by a timeout. */
        link_ready_for(x, m->rec.from, now);
        link_ready_for(x, m->rec.to, now);
        drive(x, m);
    }
    for (nlink *l = x->links.head; l; l = l->next)
        if (l->want_reconcile) link_ready_for(x, l->id, now);
}

void coord_moves_annotate(coord *co, plan_model *pm) {
    cms *x = state_of(co);
    if (!x) return;
    int64_t now = keel_wall_ms(); /* residence spans restarts: measured from the records */
    for (size_t i = 0; i < pm->nparts; i++) {
        plan_part *pp = &pm->parts[i];
        if (pp->id < co->partitions && x->last_commit_ms[pp->id])
            pp->since_last_move_s = (double)(now - x->last_commit_ms[pp->id]) / 1000.0;
        if (pp->since_last_move_s < 0) pp->since_last_move_s = 0;
    }
    for (cmove *m = x->moves; m; m = m->next) {
        if (m->rec.state >= MAPSTORE_MOVE_COMMITTED || m->rec.partition >= pm->nparts) continue;
        plan_part *pp = &pm->parts[m->rec.partition];
        if (pp->id != m->rec.partition) continue; /* coord_build_model lists them in order */
        pp->in_flight = true;
        pp->moving_to = plan_model_find_node(pm, m->rec.to);
    }
    for (mv_wait *w = x->creating; w; w = w->next) { /* being recorded: in flight already */
        if (w->p >= pm->nparts || pm->parts[w->p].id != w->p) continue;
        pm->parts[w->p].in_flight = true;
        pm->parts[w->p].moving_to = plan_model_find_node(pm, w->to);
    }
}

int coord_moves_start(coord *co) {
    cms *x = calloc(1, sizeof *x);
    if (!x) return KEEL_ENOMEM;
    x->co = co;
    co->mv = x;
    coord_links_init(&x->links, co, on_link_ready, x);
    if (!(x->last_commit_ms = calloc(co->partitions, sizeof *x->last_commit_ms)))
        return KEEL_ENOMEM;
    mapstore_move *list = NULL;
    size_t n = 0;
    int rc = mapstore_move_list(co->ms, 0, &list, &n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) /* residence survives a restart */
        if (list[i].at_ms[MAPSTORE_MOVE_COMMITTED] && list[i].partition < co->partitions)
            x->last_commit_ms[list[i].partition] = list[i].at_ms[MAPSTORE_MOVE_COMMITTED];
    free(list);
    list = NULL;
    if ((rc = mapstore_move_list(co->ms, 1, &list, &n))) return rc;
    int64_t now = keel_wall_ms();
    for (size_t i = 0; i < n; i++) {
        cmove *m = track(x, &list[i]);
        if (!m) continue;
        m->budget = (uint64_t)coord_setting_ll(co, "move_bytes_per_sec");
        if (list[i].state < MAPSTORE_MOVE_COMMITTED) {
            /* Its in-memory half (capture, copy, fence position) died with
             * the previous coordinator: abort, durably, then tell both. */
            abort_move(x, m, "coordinator-restart");
        } else {
            keel_log(KEEL_LOG_INFO, "move_resumed", "move=%llu partition=%u state=%s",
                     (unsigned long long)list[i].id, list[i].partition,
                     mapstore_move_state_name(list[i].state));
            m->need_commit_d = m->need_commit_s = 1;
        }
    }
    free(list);
    (void)now;
    uv_timer_init(co->loop, &x->timer);
    x->timer.data = x;
    uv_timer_start(&x->timer, on_tick, TICK_MS, TICK_MS);
    return 0;
}

void coord_moves_stop(coord *co) {
    cms *x = state_of(co);
    if (!x || x->stopping) return;
    x->stopping = 1;
    uv_timer_stop(&x->timer);
    uv_close((uv_handle_t *)&x->timer, NULL);
    coord_links_close(&x->links);
    while (x->moves) {
        cmove *m = x->moves;
        x->moves = m->next;
        free(m);
    }
    free(x->last_commit_ms);
    x->last_commit_ms = NULL;
}
