/* move_src.c - the stream source: S's half of a copy (DESIGN §6 steps 2-4).
 *
 *            src_start                       src_fenced
 *   (none) -----------> COPYING --snapshot--> STREAMING -------> FENCED
 *                        |        read out      |                 |
 *                        +--------- src_end (commit, abort) ------+--> (none)
 *
 * At src_start S starts a change capture of the partition's slots and takes
 * a snapshot right after, with no write in between, so the snapshot holds
 * every write before pos0 and the capture reports exactly the later ones.
 * D pulls the snapshot with KEEL.MOVE.CHUNK (S keeps the cursor, so D may
 * pipeline) and the captured changes with KEEL.MOVE.CHANGES. Both are paced
 * by the move's token bucket; a CHANGES with nothing to send is held (long
 * poll) until a change arrives, the fence is taken or CHANGES_POLL_MS pass.
 * Once FENCED, CHANGES drains at full speed and reports the fence position
 * f, which tells D where the stream ends.
 *
 * Every effect goes through the move environment (move_env.h).
 */
#include "core/err.h"
#include "core/log.h"
#include "core/num.h"
#include "node/move_int.h"
#include "node/move_wire.h"
#include "resp/resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

out_move *src_find(moves *mv, uint64_t id) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->out[i] && mv->out[i]->id == id) return mv->out[i];
    return NULL;
}

static void src_wake(out_move *o, int forced) {
    if (!o->waiter) return;
    void *c = o->waiter;
    o->waiter = NULL;
    if (o->waiter_flag) *o->waiter_flag = forced ? 2 : 0;
    o->waiter_flag = NULL;
    o->mv->env.timer_stop(o->timer);
    o->mv->env.resume(o->mv->env.ctx, c);
}

/* Capture callback: runs inside the store's turn write; only appends. */
static void on_change(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                      size_t vlen, const store_phys *old) {
    out_move *o = arg;
    (void)old;
    if (o->overflow) return;
    char h[MOVE_CHANGE_HDR];
    move_be64(h, o->next_pos++);
    move_be64(h + 8, mv_now_us(o->mv));
    if (o->log.len - o->head > LOG_MAX || kbuf_append(&o->log, h, sizeof h) ||
        move_put_record(&o->log, slot, key, klen, val, vlen)) {
        o->overflow = 1; /* reported to D, which reports non-converging */
        return;
    }
    /* A long poll waiting for data re-runs now (from the loop, not inside
     * the store's write); a request waiting for tokens keeps waiting. */
    if (o->waiter && o->waiter_changes && !o->waiting_tokens && !o->change_woke) {
        o->change_woke = 1;
        o->mv->env.timer_start(o->timer, 0, 0);
    }
}

/* The wait's timer: its deadline (forced: answer whatever there is), or a
 * change that arrived for a long poll (not forced). */
static void on_src_timer(void *arg) {
    out_move *o = arg;
    int forced = !o->change_woke;
    o->change_woke = 0;
    src_wake(o, forced);
}

out_move *src_start(moves *mv, uint64_t m, unsigned p, uint64_t epoch, const char *dst,
                    uint64_t rate) {
    out_move *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->mv = mv;
    o->id = m, o->p = p, o->epoch = epoch;
    snprintf(o->dst, sizeof o->dst, "%s", dst);
    o->next_pos = 1;
    kbuf_init(&o->log);
    tbucket_init(&o->tb, rate, rate ? (rate / 10 > CHUNK_MAX ? rate / 10 : CHUNK_MAX) : CHUNK_MAX);
    unsigned lo, hi;
    mv_slot_range(mv, p, &lo, &hi);
    /* Capture, then snapshot, with no command in between: gapless (store.h). */
    o->capture = store_capture_start(mv->env.st, lo, hi, on_change, o);
    o->snap = o->capture >= 0 ? store_snapshot_new(mv->env.st) : NULL;
    o->timer = o->snap ? mv->env.timer_new(mv->env.ctx, on_src_timer, o) : NULL;
    if (!o->timer) {
        if (o->capture >= 0 && store_capture_stop(mv->env.st, o->capture))
            keel_log(KEEL_LOG_ERROR, "move_capture_stop_failed", "move=%llu",
                     (unsigned long long)m);
        store_snapshot_free(o->snap);
        kbuf_close(&o->log);
        free(o);
        return NULL;
    }
    keel_log(KEEL_LOG_INFO, "move_out_started",
             "move=%llu partition=%u to=%s epoch=%llu rate=%llu pos0=%llu", (unsigned long long)m,
             p, o->dst, (unsigned long long)epoch, (unsigned long long)rate,
             (unsigned long long)store_snapshot_seq(o->snap));
    return o;
}

void src_end(moves *mv, out_move *o) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->out[i] == o) mv->out[i] = NULL;
    /* A failed stop is a failed turn write: the store is failed (sticky)
     * and the node stops at the end of this turn. */
    if (o->capture >= 0 && store_capture_stop(mv->env.st, o->capture))
        keel_log(KEEL_LOG_ERROR, "move_capture_stop_failed", "move=%llu",
                 (unsigned long long)o->id);
    o->capture = -1;
    store_snapshot_free(o->snap);
    void *w = o->waiter;
    if (o->waiter_flag) *o->waiter_flag = 0;
    mv->env.timer_free(o->timer);
    if (o->mut_timer) mv->env.timer_free(o->mut_timer);
    kbuf_close(&o->log);
    free(o->cursor);
    free(o);
    if (w) mv->env.resume(mv->env.ctx, w); /* finds no move and says so */
}

void src_fenced(out_move *o) {
    o->fenced = 1;
    o->fence_pos = o->next_pos - 1;
    src_wake(o, 1);
}

/* Positions the log head after every record <= acked. */
static void src_trim(out_move *o, uint64_t acked) {
    if (acked <= o->acked) return;
    o->acked = acked;
    while (o->head < o->log.len) {
        const char *r = o->log.p + o->head;
        if (move_rd(r, 8) > acked) break;
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t n = move_get_record(r + MOVE_CHANGE_HDR, o->log.len - o->head - MOVE_CHANGE_HDR,
                                   &slot, &k, &kl, &v, &vl);
        if (!n) break;
        o->head += MOVE_CHANGE_HDR + n;
    }
    if (o->head == o->log.len) {
        o->log.len = o->head = 0;
        if (o->log.cap > (64u << 20)) kbuf_shrink(&o->log, 1u << 20);
    } else if (o->head > (16u << 20) && o->head > o->log.len / 2) {
        kbuf_consume(&o->log, o->head);
        o->head = 0;
    }
}

/* ---- The data path (D -> S) ---------------------------------------------- */

static int arg_u64(int argc, char **argv, const size_t *len, int i, uint64_t *out) {
    if (i >= argc) return -1;
    return keel_parse_u64(argv[i], len[i], out) ? -1 : 0;
}

/* Finds the move for a data request and checks the caller is its D. */
static out_move *data_move(moves *mv, move_call *c, int argc, char **argv, const size_t *len) {
    uint64_t m;
    out_move *o = arg_u64(argc, argv, len, 1, &m) ? NULL : src_find(mv, m);
    if (!o) {
        resp_w_errorf(c->out, "ERR no outgoing move %.*s here",
                      argc > 1 ? (int)(len[1] > 64 ? 64 : len[1]) : 1, argc > 1 ? argv[1] : "?");
        return NULL;
    }
    if (!c->peer || strcmp(c->peer, o->dst) != 0) {
        resp_w_errorf(c->out, "NOPERM move %llu goes to %s", (unsigned long long)m, o->dst);
        return NULL;
    }
    return o;
}

/* Holds the request until wait_us passes (or src_wake). */
static int data_wait(out_move *o, move_call *c, uint64_t wait_us, int changes, int tokens) {
    *c->waits_data = 1;
    o->waiter = c->conn;
    o->waiter_flag = c->waits_data;
    o->waiter_changes = changes;
    o->waiting_tokens = tokens;
    o->change_woke = 0;
    o->mv->env.timer_start(o->timer, wait_us / 1000 + 1, 0);
    return MOVE_HELD;
}

typedef struct chunk_ctx {
    kbuf *b;
} chunk_ctx;

static int chunk_cb(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                    size_t vlen) {
    chunk_ctx *cc = arg;
    return move_put_record(cc->b, slot, key, klen, val, vlen) ? 1 : 0;
}

/* KEEL.MOVE.CHUNK m "" max-bytes -> ["more" | nil, records]: the next part
 * of the snapshot, continuing after the last key sent; nil once the
 * snapshot is exhausted. */
int src_chunk(moves *mv, move_call *c, int argc, char **argv, const size_t *len) {
    out_move *o = data_move(mv, c, argc, argv, len);
    if (!o) return 0;
    uint64_t maxb;
    if (argc != 4 || len[2] || arg_u64(argc, argv, len, 3, &maxb) || maxb == 0) {
        resp_w_error(c->out, "ERR bad KEEL.MOVE.CHUNK: move \"\" max-bytes");
        return 0;
    }
    if (!o->snap) { /* finished: pipelined requests past the end get nothing */
        resp_w_array(c->out, 2);
        resp_w_null(c->out, c->proto);
        resp_w_bulk(c->out, "", 0);
        return 0;
    }
    if (maxb > CHUNK_MAX) maxb = CHUNK_MAX;
    uint64_t now = mv_now_us(mv);
    size_t want = (size_t)maxb;
    /* Wait for a worthwhile amount of tokens rather than send crumbs; the
     * throttle is never bypassed (one key over the grant at most, since a
     * chunk ends after the key that crosses it). */
    size_t worth = want / 4 < 65536 ? want / 4 : 65536;
    uint64_t wait = tbucket_wait_us(&o->tb, now, worth);
    if (wait) return data_wait(o, c, wait, 0, 1);
    *c->waits_data = 0;
    size_t got = tbucket_take(&o->tb, now, want);
    if (!got) got = 1;
    unsigned lo, hi;
    mv_slot_range(mv, o->p, &lo, &hi);
    kbuf b;
    kbuf_init(&b);
    chunk_ctx cc = {&b};
    char *next = NULL;
    size_t nextlen = 0;
    long n = store_copy_range(mv->env.st, o->snap, lo, hi, o->cursor, o->curlen, got, chunk_cb, &cc,
                              &next, &nextlen);
    if (n < 0) {
        kbuf_close(&b);
        resp_w_errorf(c->out, "ERR copy failed: %s", keel_strerror((int)n));
        return 0;
    }
    free(o->cursor);
    o->cursor = next;
    o->curlen = nextlen;
    o->bytes_sent += b.len;
    mv->st.bytes_sent += b.len;
    resp_w_array(c->out, 2);
    if (next)
        resp_w_bulk(c->out, "more", 4);
    else
        resp_w_null(c->out, c->proto);
    resp_w_bulk(c->out, b.p ? b.p : "", b.len);
    kbuf_close(&b);
    if (!next) { /* copied: let RocksDB drop the versions it kept for us */
        store_snapshot_free(o->snap);
        o->snap = NULL;
    }
    return 0;
}

/* KEEL.MOVE.CHANGES m acked max-bytes
 *   -> [last-pos, fence-pos | -1, backlog-bytes | -1 (overflow), backlog-ms, records] */
int src_changes(moves *mv, move_call *c, int argc, char **argv, const size_t *len) {
    out_move *o = data_move(mv, c, argc, argv, len);
    if (!o) return 0;
    uint64_t acked, maxb;
    if (argc != 4 || arg_u64(argc, argv, len, 2, &acked) || arg_u64(argc, argv, len, 3, &maxb) ||
        maxb == 0) {
        resp_w_error(c->out, "ERR bad KEEL.MOVE.CHANGES: move acked max-bytes");
        return 0;
    }
    src_trim(o, acked);
    size_t avail = o->log.len - o->head;
    int forced = *c->waits_data == 2;
    if (!avail && !o->fenced && !o->overflow && !forced)
        return data_wait(o, c, CHANGES_POLL_MS * 1000, 1, 0);
    uint64_t now = mv_now_us(mv);
    size_t want = avail < maxb ? avail : (size_t)maxb, got = want;
    if (want && !o->fenced) { /* the fence drains at full speed: it holds writes */
        /* Tokens for at least the first whole record, or a worthwhile part
         * of what is there; then whole records within what was granted. */
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t first =
            MOVE_CHANGE_HDR + move_get_record(o->log.p + o->head + MOVE_CHANGE_HDR,
                                              avail - MOVE_CHANGE_HDR, &slot, &k, &kl, &v, &vl);
        size_t need = want / 4 > first ? (want / 4 < 65536 ? want / 4 : 65536) : first;
        if (need > want) need = want;
        uint64_t wait = tbucket_wait_us(&o->tb, now, need);
        if (wait) return data_wait(o, c, wait, 1, 1);
        got = tbucket_take(&o->tb, now, want);
    }
    *c->waits_data = 0;
    /* Whole records up to got bytes (at least one when any is allowed). */
    size_t off = o->head, end = o->head;
    uint64_t last = acked;
    while (end < o->log.len && (end == off ? got > 0 : end - off < got)) {
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t n = move_get_record(o->log.p + end + MOVE_CHANGE_HDR,
                                   o->log.len - end - MOVE_CHANGE_HDR, &slot, &k, &kl, &v, &vl);
        if (!n) break;
        last = move_rd(o->log.p + end, 8);
        end += MOVE_CHANGE_HDR + n;
    }
    uint64_t backlog = o->log.len - end;
    uint64_t age_ms = 0;
    if (end < o->log.len) age_ms = (now - move_rd(o->log.p + end + 8, 8)) / 1000;
    o->bytes_sent += end - off;
    mv->st.bytes_sent += end - off;
    resp_w_array(c->out, 5);
    resp_w_int(c->out, (long long)last);
    resp_w_int(c->out, o->fenced ? (long long)o->fence_pos : -1);
    resp_w_int(c->out, o->overflow ? -1 : (long long)backlog);
    resp_w_int(c->out, (long long)age_ms);
    resp_w_bulk(c->out, o->log.p ? o->log.p + off : "", end - off);
    return 0;
}
