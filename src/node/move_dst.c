/* move_dst.c - the stream destination: D's half of a copy (DESIGN §6
 * steps 2-4).
 *
 *           dst_start          copy read out         applied through f
 *   (none) ----------> COPY --------------------> CATCHUP ---------------> APPLIED
 *                        |                           |                        |
 *                        +-- source gone, bad data, a failpoint --> FAILED    |
 *                        +---------------- dst_end (commit, abort) -----------+--> (none)
 *
 * D dials S and pulls: during the copy PULL_DEPTH chunk requests stay in
 * flight (S keeps the cursor, so S's reads overlap with D's writes); the
 * catch-up is one long poll of changes at a time. A copy chunk is queued
 * (pend) and applied APPLY_TURN_BYTES of whole records per loop turn, each
 * slice one lazy transaction (no fsync per batch: VERIFY makes the copy
 * durable); a catch-up reply is applied at once, as one lazy transaction.
 * D reports progress to the coordinator every REPORT_MS, at once when the
 * backlog falls under fence_lag (caught-up), and when the backlog stops
 * reaching new lows for STUCK_TICKS reports (non-converging). A VERIFY is
 * held until D has applied through the fence position f (move.c answers
 * it), at most VERIFY_WAIT_MS.
 *
 * Every effect goes through the move environment (move_env.h).
 */
#include "core/err.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "net/replyshape.h"
#include "node/move_int.h"
#include "node/move_wire.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

in_move *dst_find(moves *mv, uint64_t id) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->in[i] && mv->in[i]->id == id) return mv->in[i];
    return NULL;
}

static void dst_report(in_move *in, const char *phase, const char *reason);
static void dst_pull(in_move *in);

static void resume_verifier(in_move *in) {
    if (!in->verifier) return;
    void *c = in->verifier;
    in->verifier = NULL;
    in->mv->env.resume(in->mv->env.ctx, c);
}

static void dst_fail(in_move *in, const char *why) {
    if (in->phase == IN_FAILED) return;
    in->phase = IN_FAILED;
    snprintf(in->why, sizeof in->why, "%s", why);
    keel_log(KEEL_LOG_WARN, "move_in_failed", "move=%llu partition=%u reason=%s",
             (unsigned long long)in->id, in->p, why);
    dst_report(in, "failed", why);
    resume_verifier(in);
}

static const char *phase_name(const in_move *in) {
    switch (in->phase) {
    case IN_COPY:
        return "copying";
    case IN_CATCHUP:
        return "catching-up";
    case IN_APPLIED:
        return "applied";
    default:
        return "failed";
    }
}

static void dst_report(in_move *in, const char *phase, const char *reason) {
    char id[24], b[24], k[24], lb[24], lm[24], r[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)in->id);
    snprintf(b, sizeof b, "%llu", (unsigned long long)in->bytes);
    snprintf(k, sizeof k, "%llu", (unsigned long long)in->keys);
    if (in->lag_bytes == UINT64_MAX)
        snprintf(lb, sizeof lb, "-1"); /* not known yet */
    else
        snprintf(lb, sizeof lb, "%llu", (unsigned long long)in->lag_bytes);
    snprintf(lm, sizeof lm, "%llu", (unsigned long long)in->lag_ms);
    snprintf(r, sizeof r, "%.0f", in->rate);
    const char *argv[] = {"KEEL.MOVE.REPORT", id, phase, b, k, lb, lm, r, reason ? reason : ""};
    in->mv->env.report(in->mv->env.ctx, 9, argv);
}

static void on_dst_timer(void *arg) {
    in_move *in = arg;
    if (in->verifier && !in->syncing &&
        mv_now_us(in->mv) - in->verify_since_us > VERIFY_WAIT_MS * 1000ull) {
        dst_fail(in, "source-silent-at-fence");
        return;
    }
    in->rate = (double)(in->bytes - in->tick_bytes) * 1000.0 / REPORT_MS;
    in->tick_bytes = in->bytes;
    if (in->phase == IN_CATCHUP) {
        /* The backlog must keep reaching new lows; if it has not for
         * STUCK_TICKS reports while above the fence threshold, writes come
         * in at least as fast as the throttle lets them out. */
        if (in->lag_bytes < in->best_backlog) {
            in->best_backlog = in->lag_bytes;
            in->stuck = 0;
        } else if (in->lag_bytes > in->fence_lag && ++in->stuck >= STUCK_TICKS) {
            in->stuck = 0; /* the coordinator raises the budget or aborts; ask again later */
            keel_log(KEEL_LOG_WARN, "move_not_converging", "move=%llu partition=%u backlog=%llu",
                     (unsigned long long)in->id, in->p, (unsigned long long)in->lag_bytes);
            dst_report(in, "non-converging", "backlog-not-shrinking");
            return;
        }
    }
    if (in->phase != IN_FAILED) dst_report(in, phase_name(in), NULL);
}

static int apply_batch(in_move *in, const char *p, size_t n, int changes, uint64_t *last) {
    store_txn *t = store_txn_begin(in->mv->env.st);
    unsigned lo, hi;
    mv_slot_range(in->mv, in->p, &lo, &hi);
    size_t off = 0;
    while (off < n) {
        if (changes) {
            if (n - off < MOVE_CHANGE_HDR) goto bad;
            *last = move_rd(p + off, 8);
            off += MOVE_CHANGE_HDR;
        }
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t used = move_get_record(p + off, n - off, &slot, &k, &kl, &v, &vl);
        if (!used || slot < lo || slot > hi) goto bad;
        int rc = v ? store_txn_put_raw(t, slot, k, kl, v, vl) : store_txn_del(t, slot, k, kl, NULL);
        if (rc) goto bad;
        if (v && !changes) in->keys++;
        off += used;
    }
    if (store_txn_commit_lazy(t)) goto bad; /* no fsync per turn: VERIFY makes it durable */
    in->bytes += n;
    in->mv->st.bytes_received += n;
    return 0;
bad:
    store_txn_abort(t);
    return KEEL_EPROTO;
}

static void on_changes(void *arg, void *tag, redisReply *r) {
    in_move *in = tag;
    if (in->phase != IN_CATCHUP) return;
    /* [last-pos, fence-pos | -1, backlog-bytes | -1, backlog-ms, records] */
    if (!reply_shape(r, "iiiis")) {
        dst_fail(in, r && r->type == REDIS_REPLY_ERROR ? "source-refused" : "source-unreachable");
        return;
    }
    long long last = r->element[0]->integer, fence = r->element[1]->integer;
    uint64_t applied = in->applied;
    if (r->element[4]->len &&
        apply_batch(in, r->element[4]->str, r->element[4]->len, 1, &applied)) {
        dst_fail(in, "bad-changes");
        return;
    }
    if (FAILPOINT("move.during_catchup") == FP_ERROR) {
        dst_fail(in, "failpoint");
        return;
    }
    in->applied = last > 0 && (uint64_t)last > applied ? (uint64_t)last : applied;
    in->lag_bytes = (uint64_t)r->element[2]->integer;
    in->lag_ms = (uint64_t)r->element[3]->integer;
    if (in->lag_bytes == (uint64_t)-1) {
        dst_fail(in, "source-log-overflow");
        return;
    }
    if (fence >= 0) {
        in->fenced = 1;
        in->fence_pos = (uint64_t)fence;
        if (in->applied >= in->fence_pos) {
            in->phase = IN_APPLIED;
            resume_verifier(in);
            return;
        }
    } else if (in->lag_bytes <= in->fence_lag) {
        uint64_t now = mv_now_us(in->mv);
        if (now - in->last_caught_us > 100000) { /* tell at once, then at most every 100 ms */
            in->last_caught_us = now;
            dst_report(in, "caught-up", NULL);
        }
    }
    dst_pull(in);
}

/* After a chunk arrived or a slice was applied: schedules the next slice,
 * or, with every chunk in and applied, starts the catch-up; pulls more. */
static void dst_copy_progress(in_move *in) {
    if (in->phase != IN_COPY) return;
    if (in->pend.len) {
        in->mv->env.timer_start(in->apply_timer, 0, 0);
    } else if (in->copied && in->pulls == 0) { /* every reply in and applied */
        in->phase = IN_CATCHUP;
        in->best_backlog = UINT64_MAX;
        in->lag_bytes = UINT64_MAX; /* unknown until the first CHANGES reply */
        keel_log(KEEL_LOG_INFO, "move_copy_done", "move=%llu partition=%u bytes=%llu keys=%llu",
                 (unsigned long long)in->id, in->p, (unsigned long long)in->bytes,
                 (unsigned long long)in->keys);
        dst_report(in, "catching-up", NULL);
    }
    dst_pull(in);
}

/* One slice of the queued copy: steps of APPLY_STEP_RECORDS whole records
 * (each one lazy txn) until APPLY_TURN_BYTES or APPLY_TURN_US is used up;
 * at least one record. */
static void on_apply_timer(void *arg) {
    in_move *in = arg;
    if (in->phase != IN_COPY || !in->pend.len) return;
    uint64_t t0 = mv_now_us(in->mv);
    size_t done = 0;
    while (in->pend.len && done < APPLY_TURN_BYTES) {
        size_t n = 0;
        for (int r = 0; r < APPLY_STEP_RECORDS && n < in->pend.len; r++) {
            unsigned slot;
            const char *k, *v;
            size_t kl, vl;
            size_t used =
                move_get_record(in->pend.p + n, in->pend.len - n, &slot, &k, &kl, &v, &vl);
            if (!used) break;
            n += used;
        }
        if (!n) n = in->pend.len; /* malformed: apply_batch rejects it */
        uint64_t unused = 0;
        if (apply_batch(in, in->pend.p, n, 0, &unused)) {
            dst_fail(in, "bad-chunk");
            return;
        }
        kbuf_consume(&in->pend, n);
        done += n;
        if (mv_now_us(in->mv) - t0 >= APPLY_TURN_US) break;
    }
    dst_copy_progress(in);
}

static void on_chunk(void *arg, void *tag, redisReply *r) {
    in_move *in = tag;
    if (in->phase != IN_COPY) return;
    in->pulls--;
    if (!reply_shape(r, "Ss")) { /* ["more" | nil, records] */
        dst_fail(in, r && r->type == REDIS_REPLY_ERROR ? "source-refused" : "source-unreachable");
        return;
    }
    if (kbuf_append(&in->pend, r->element[1]->str, r->element[1]->len)) {
        dst_fail(in, "out-of-memory");
        return;
    }
    if (FAILPOINT("move.during_copy") == FP_ERROR) {
        dst_fail(in, "failpoint");
        return;
    }
    if (r->element[0]->type == REDIS_REPLY_NIL) in->copied = 1;
    dst_copy_progress(in);
}

static void dst_pull(in_move *in) {
    char id[24], n[24], a[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)in->id);
    snprintf(n, sizeof n, "%u", in->phase == IN_COPY ? PULL_BYTES : CHANGES_PULL_BYTES);
    const move_env *E = &in->mv->env;
    int rc = 0;
    if (in->phase == IN_COPY) {
        /* At most PULL_DEPTH requests' worth queued or in flight. */
        while (!rc && !in->copied && in->pulls < PULL_DEPTH &&
               in->pend.len + (size_t)in->pulls * PULL_BYTES < PULL_DEPTH * PULL_BYTES) {
            const char *argv[] = {"KEEL.MOVE.CHUNK", id, "", n};
            if (!(rc = E->link_send(in->link, on_chunk, in, 4, argv))) in->pulls++;
        }
    } else if (in->phase == IN_CATCHUP) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)in->applied);
        const char *argv[] = {"KEEL.MOVE.CHANGES", id, a, n};
        rc = E->link_send(in->link, on_changes, in, 4, argv);
    }
    if (rc) dst_fail(in, "source-unreachable");
}

static void on_link_ready(void *arg) {
    in_move *in = arg;
    keel_log(KEEL_LOG_INFO, "move_in_connected", "move=%llu partition=%u source=%s",
             (unsigned long long)in->id, in->p, in->src);
    dst_pull(in);
}

static void on_link_down(void *arg, const char *why) {
    in_move *in = arg;
    if (in->phase == IN_APPLIED) return; /* nothing more to pull */
    dst_fail(in, "source-unreachable");
}

in_move *dst_start(moves *mv, uint64_t m, unsigned p, uint64_t epoch, const char *src,
                   const char *host, int port, uint64_t fence_lag) {
    in_move *in = calloc(1, sizeof *in);
    if (!in) return NULL;
    const move_env *E = &mv->env;
    in->mv = mv;
    in->id = m, in->p = p, in->epoch = epoch, in->port = port;
    in->fence_lag = fence_lag;
    snprintf(in->src, sizeof in->src, "%s", src);
    snprintf(in->host, sizeof in->host, "%s", host);
    if (!(in->timer = E->timer_new(E->ctx, on_dst_timer, in))) {
        free(in);
        return NULL;
    }
    if (!(in->apply_timer = E->timer_new(E->ctx, on_apply_timer, in))) {
        E->timer_free(in->timer);
        free(in);
        return NULL;
    }
    kbuf_init(&in->pend);
    E->timer_start(in->timer, REPORT_MS, REPORT_MS);
    in->start_us = mv_now_us(mv);
    static const move_link_cbs cbs = {.on_ready = on_link_ready, .on_down = on_link_down};
    in->link = E->link_open(E->ctx, in->host, in->port, in->src, &cbs, in);
    keel_log(KEEL_LOG_INFO, "move_in_started", "move=%llu partition=%u from=%s addr=%s:%d",
             (unsigned long long)m, p, in->src, in->host, in->port);
    return in;
}

void dst_check_link(in_move *in) {
    if (!in->link) dst_fail(in, "source-unreachable");
}

static void on_copy_durable(void *arg, int rc) {
    in_move *in = arg;
    in->syncing = 0;
    if (rc) {
        dst_fail(in, "fsync-failed");
        return;
    }
    in->durable = 1;
    resume_verifier(in);
}

int dst_durable(in_move *in) {
    if (in->durable) return 1;
    if (in->syncing) return 0;
    const move_env *E = &in->mv->env;
    if (E->sync_wal(E->ctx, on_copy_durable, in)) return -1;
    in->syncing = 1;
    return 0;
}

void dst_end(moves *mv, in_move *in) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->in[i] == in) mv->in[i] = NULL;
    if (in->syncing) mv->env.sync_wal_cancel(mv->env.ctx, in);
    if (in->link) mv->env.link_close(in->link);
    void *v = in->verifier;
    mv->env.timer_free(in->timer);
    mv->env.timer_free(in->apply_timer);
    kbuf_close(&in->pend);
    free(in);
    if (v) mv->env.resume(mv->env.ctx, v);
}
