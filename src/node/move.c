/* move.c - the move state machine: the coordinator's directives and the
 * partition states they drive (DESIGN.md §5, §6; docs/moves.md has the
 * whole flow).
 *
 *                 OUT                 FENCE                map gives p away
 *   S: SERVING -------> OUTGOING -------------> FENCED ------------------> RETIRED --CLEANUP--> ABSENT
 *                          |                      |
 *                          +------- ABORT --------+--> SERVING
 *
 *                 IN                  map gives p here
 *   D: ABSENT  -------> INCOMING -------------------------> SERVING
 *      RETIRED             |
 *                          +------- ABORT ----> ABSENT (copy dropped)
 *
 * This file owns the directive guard and argument checks (one table,
 * dcmds), the persisted partition records, restore after a restart and the
 * settlement of committed moves when a map arrives. The data path lives in
 * move_src.c (S) and move_dst.c (D). Everything outside the engine - time,
 * timers, links, the coordinator, held requests, map installs - is reached
 * through the environment (move_env.h), so the same code runs under libuv
 * (move_uv.c) and under the simulator (tests/sim).
 */
#include "core/err.h"
#include "core/failpoint.h"
#include "core/id.h"
#include "core/log.h"
#include "core/num.h"
#include "node/move_engine.h"
#include "node/move_int.h"
#include "resp/resp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define COORDINATOR_PEER "coordinator" /* the id the coordinator proves (coordlink.h) */

void mv_slot_range(const moves *mv, unsigned p, unsigned *lo, unsigned *hi) {
    unsigned per = 16384u / ptable_partitions(mv->env.pt);
    *lo = p * per;
    *hi = *lo + per - 1;
}

static int free_slot(void **arr) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (!arr[i]) return i;
    return -1;
}

/* ---- Persisted partition states ------------------------------------------- */

/* Writes part/<p> durably. Returns 0 or the store's KEEL_E* (logged). */
KEEL_MUST_CHECK static int persist(moves *mv, unsigned p, const char *state, uint64_t m,
                                   uint64_t epoch, const char *peer) {
    char name[32], val[160];
    snprintf(name, sizeof name, "part/%u", p);
    int n = snprintf(val, sizeof val, "%s %llu %llu %s", state, (unsigned long long)m,
                     (unsigned long long)epoch, peer && peer[0] ? peer : "-");
    int rc = store_meta_put(mv->env.st, name, val, (size_t)n);
    if (rc)
        keel_log(KEEL_LOG_ERROR, "move_state_persist_failed", "partition=%u state=%s move=%llu", p,
                 state, (unsigned long long)m);
    return rc;
}

/* Reads part/<p>: 1 with the fields filled, 0 if there is no move record
 * (none, or NONE), or a negative KEEL_E*: the store could not be read
 * (KEEL_EIO, KEEL_ENOMEM) or the record is not one persist() writes
 * (KEEL_ECORRUPT). An error is never "no record": a FENCED partition read
 * as unrecorded would serve. Logged. */
KEEL_MUST_CHECK static int load_state(moves *mv, unsigned p, char *state, size_t cap, uint64_t *m,
                                      uint64_t *e) {
    char name[32], *v = NULL;
    size_t len = 0;
    snprintf(name, sizeof name, "part/%u", p);
    int rc = store_meta_get(mv->env.st, name, &v, &len);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "move_state_load_failed", "partition=%u error=\"%s\"", p,
                 keel_strerror(rc));
        return rc;
    }
    /* "STATE m epoch peer", as persist() writes it. */
    char buf[160], *f[4] = {0}, *save = NULL;
    snprintf(buf, sizeof buf, "%.*s", (int)len, v);
    free(v);
    int nf = 0;
    for (char *t = strtok_r(buf, " ", &save); t && nf < 4; t = strtok_r(NULL, " ", &save))
        f[nf++] = t;
    uint64_t mm, ee;
    if (nf < 3 || strlen(f[0]) >= 16 || keel_parse_u64z(f[1], &mm) || keel_parse_u64z(f[2], &ee)) {
        keel_log(KEEL_LOG_ERROR, "move_state_corrupt", "partition=%u len=%zu", p, len);
        return KEEL_ECORRUPT;
    }
    if (!strcmp(f[0], "NONE")) return 0;
    snprintf(state, cap, "%s", f[0]);
    *m = mm, *e = ee;
    return 1;
}

/* ---- Digest --------------------------------------------------------------- */

static int part_digest(moves *mv, unsigned p, uint64_t *x, uint64_t *keys) {
    unsigned lo, hi;
    mv_slot_range(mv, p, &lo, &hi);
    return store_range_digest(mv->env.st, lo, hi, x, keys);
}

/* ---- Test-only mutation: a fence lifted on a timer ------------------------- */

/* MOVE_MUT_FENCE_TIMER: S serves again MUT_FENCE_TIMER_MS after the fence,
 * while the move goes on - the broken protocol the simulator must catch. */
static void on_mut_timer(void *arg) {
    out_move *o = arg;
    if (ptable_state(o->mv->env.pt, o->p) != PART_FENCED) return;
    ptable_set_state(o->mv->env.pt, o->p, PART_SERVING);
    o->mv->env.release_held(o->mv->env.ctx, (long)o->p, 0);
}

static void mut_lift_fence_later(out_move *o) {
    const move_env *E = &o->mv->env;
    if (!o->mut_timer) o->mut_timer = E->timer_new(E->ctx, on_mut_timer, o);
    if (o->mut_timer) E->timer_start(o->mut_timer, MUT_FENCE_TIMER_MS, 0);
}

/* ---- Directives ------------------------------------------------------------ */

typedef struct dctx {
    moves *mv;
    move_call *c;
    int argc;
    char **argv;
    const size_t *len;
} dctx;

static void d_err(dctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void d_err(dctx *x, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp_w_error(x->c->out, msg);
}

/* Argument i as a strict u64 (core/num.h): -1 if absent or not one. */
static int arg_u64(dctx *x, int i, uint64_t *out) {
    if (i >= x->argc) return -1;
    return keel_parse_u64(x->argv[i], x->len[i], out) ? -1 : 0;
}

static int ok_partition(dctx *x, uint64_t p) {
    return p < ptable_partitions(x->mv->env.pt);
}

/* KEEL.MOVE.OUT term m p epoch dst rate */
static int d_out(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, p, e, rate;
    if (arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || arg_u64(x, 4, &e) || arg_u64(x, 6, &rate) ||
        !ok_partition(x, p) || !keel_id_valid(x->argv[5], x->len[5])) {
        d_err(x, "ERR bad KEEL.MOVE.OUT: term move partition epoch destination rate");
        return 0;
    }
    if (src_find(mv, m)) {
        resp_w_simple(x->c->out, "OK");
        return 0;
    }
    part_state st = ptable_state(mv->env.pt, (unsigned)p);
    const keel_map *map = ptable_map(mv->env.pt);
    if (st != PART_SERVING || map->epoch[p] != e) {
        d_err(x,
              "ERR move %llu refused: partition %llu is %s at epoch %llu here, not SERVING at "
              "%llu",
              (unsigned long long)m, (unsigned long long)p, part_state_name(st),
              (unsigned long long)map->epoch[p], (unsigned long long)e);
        return 0;
    }
    int i = free_slot((void **)mv->out);
    if (i < 0) {
        d_err(x, "ERR too many moves on this node");
        return 0;
    }
    char dst[KEEL_ID_MAX + 1];
    snprintf(dst, sizeof dst, "%.*s", (int)x->len[5], x->argv[5]);
    if (persist(mv, (unsigned)p, "OUTGOING", m, e, dst)) {
        d_err(x, "ERR cannot persist the partition state");
        return 0;
    }
    out_move *o = src_start(mv, m, (unsigned)p, e, dst, rate);
    if (!o) {
        /* If this fails the record says OUTGOING with no capture: a restart
         * serves the partition and the coordinator aborts the move. */
        (void)!persist(mv, (unsigned)p, "NONE", m, e, NULL);
        d_err(x, "ERR cannot start the copy");
        return 0;
    }
    mv->out[i] = o;
    ptable_set_state(mv->env.pt, o->p, PART_OUTGOING);
    resp_w_simple(x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.IN term m p epoch src host port [fence-lag-bytes] */
static int d_in(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, p, e, port, lag = FENCE_LAG_DEFAULT;
    if (arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || arg_u64(x, 4, &e) || arg_u64(x, 7, &port) ||
        port == 0 || port > 65535 || !ok_partition(x, p) ||
        !keel_id_valid(x->argv[5], x->len[5]) || !keel_host_valid(x->argv[6], x->len[6]) ||
        (x->argc == 9 && arg_u64(x, 8, &lag))) {
        d_err(x, "ERR bad KEEL.MOVE.IN: term move partition epoch source host port "
                 "[fence-lag-bytes]");
        return 0;
    }
    if (dst_find(mv, m)) {
        resp_w_simple(x->c->out, "OK");
        return 0;
    }
    part_state st = ptable_state(mv->env.pt, (unsigned)p);
    if (st != PART_ABSENT && st != PART_RETIRED) {
        d_err(x, "ERR move %llu refused: partition %llu is %s here", (unsigned long long)m,
              (unsigned long long)p, part_state_name(st));
        return 0;
    }
    int i = free_slot((void **)mv->in);
    if (i < 0) {
        d_err(x, "ERR too many moves on this node");
        return 0;
    }
    char src[KEEL_ID_MAX + 1], host[256];
    snprintf(src, sizeof src, "%.*s", (int)x->len[5], x->argv[5]);
    snprintf(host, sizeof host, "%.*s", (int)x->len[6], x->argv[6]);
    unsigned lo, hi;
    mv_slot_range(mv, (unsigned)p, &lo, &hi);
    /* INCOMING first, then an empty range: leftovers of an earlier stay
     * (a RETIRED copy, or an aborted move's partial one) must not mix in. */
    if (persist(mv, (unsigned)p, "INCOMING", m, e, src) ||
        store_delete_slots(mv->env.st, lo, hi)) {
        d_err(x, "ERR cannot prepare the partition");
        return 0;
    }
    ptable_set_state(mv->env.pt, (unsigned)p, PART_INCOMING);
    in_move *in = dst_start(mv, m, (unsigned)p, e, src, host, (int)port, lag);
    if (!in) {
        d_err(x, "ERR out of memory");
        return 0; /* INCOMING with no move: the coordinator aborts it */
    }
    mv->in[i] = in;
    dst_check_link(in);
    resp_w_simple(x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.FENCE term m -> [f, digest, keys] */
static int d_fence(dctx *x) {
    moves *mv = x->mv;
    uint64_t m;
    out_move *o = arg_u64(x, 2, &m) ? NULL : src_find(mv, m);
    if (!o) {
        d_err(x, "ERR no outgoing move %s here", x->argc > 2 ? x->argv[2] : "?");
        return 0;
    }
    if (o->overflow) {
        d_err(x, "ERR move %llu lost changes (backlog over %zu bytes): it cannot converge",
              (unsigned long long)o->id, LOG_MAX);
        return 0;
    }
    if (o->snap && !o->fenced) { /* a fence before the copy ends would lose the rest */
        d_err(x, "ERR move %llu is still copying", (unsigned long long)o->id);
        return 0;
    }
    if (!o->fenced) {
        if (!(mv->mutations & MOVE_MUT_NO_FENCE_RECORD) &&
            persist(mv, o->p, "FENCED", o->id, o->epoch, o->dst)) {
            d_err(x, "ERR cannot persist the fence");
            return 0;
        }
        ptable_set_state(mv->env.pt, o->p, PART_FENCED);
        o->fenced_us = mv_now_us(mv);
        /* Write out the turn: every change before the fence is now in the
         * log, and nothing after it can reach the partition. */
        if (store_sync(mv->env.st, NULL) || part_digest(mv, o->p, &o->digest, &o->digest_keys)) {
            d_err(x, "ERR cannot take the fence position");
            return 0;
        }
        src_fenced(o);
        keel_log(KEEL_LOG_INFO, "move_fenced", "move=%llu partition=%u f=%llu keys=%llu",
                 (unsigned long long)o->id, o->p, (unsigned long long)o->fence_pos,
                 (unsigned long long)o->digest_keys);
        if (FAILPOINT("move.after_fence") == FP_ERROR) {
            d_err(x, "ERR failpoint move.after_fence");
            return 0;
        }
        if (mv->mutations & MOVE_MUT_FENCE_TIMER) mut_lift_fence_later(o);
    }
    resp_w_array(x->c->out, 3);
    resp_w_int(x->c->out, (long long)o->fence_pos);
    resp_w_int(x->c->out, (long long)o->digest);
    resp_w_int(x->c->out, (long long)o->digest_keys);
    return 0;
}

/* KEEL.MOVE.VERIFY term m f -> [digest, keys] once applied through f. */
static int d_verify(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, f;
    in_move *in = arg_u64(x, 2, &m) || arg_u64(x, 3, &f) ? NULL : dst_find(mv, m);
    if (!in) {
        d_err(x, "ERR no incoming move %s here", x->argc > 2 ? x->argv[2] : "?");
        return 0;
    }
    if (in->phase == IN_FAILED) {
        d_err(x, "ERR move %llu failed: %s", (unsigned long long)m, in->why);
        return 0;
    }
    if (in->phase != IN_APPLIED) {
        in->verifier = x->c->conn; /* held until the catch-up reaches f */
        if (!in->verify_since_us) in->verify_since_us = mv_now_us(mv);
        return MOVE_HELD;
    }
    if (in->fence_pos != f) {
        d_err(x, "ERR fence position mismatch: source said %llu, coordinator %llu",
              (unsigned long long)in->fence_pos, (unsigned long long)f);
        return 0;
    }
    uint64_t dg, keys;
    /* Durable whatever --fsync says: once the coordinator commits, this copy
     * is the only one that serves. The fsync runs off the engine's thread
     * (env->sync_wal) while this VERIFY is held; nothing more is applied to
     * the partition once it is APPLIED, so the durable point stays valid. */
    int d = dst_durable(in);
    if (d == 0) {
        in->verifier = x->c->conn; /* resumed by the fsync's completion */
        return MOVE_HELD;
    }
    if (d < 0 || store_sync(mv->env.st, NULL) || part_digest(mv, in->p, &dg, &keys)) {
        d_err(x, "ERR cannot make the copy durable");
        return 0;
    }
    resp_w_array(x->c->out, 2);
    resp_w_int(x->c->out, (long long)dg);
    resp_w_int(x->c->out, (long long)keys);
    return 0;
}

/* KEEL.MOVE.COMMIT term m map-json: installs the map that gives p to D. */
static int d_commit(dctx *x) {
    moves *mv = x->mv;
    char err[256];
    if (x->argc != 4) {
        d_err(x, "ERR bad KEEL.MOVE.COMMIT: term move map");
        return 0;
    }
    if (mv->env.install_map(mv->env.ctx, x->argv[3], x->len[3], err, sizeof err) < 0) {
        d_err(x, "ERR map refused: %s", err);
        return 0;
    }
    resp_w_simple(x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.ABORT term m p */
static int d_abort(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, p;
    if (x->argc != 4 || arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || !ok_partition(x, p)) {
        d_err(x, "ERR bad KEEL.MOVE.ABORT: term move partition");
        return 0;
    }
    char st[16];
    uint64_t rm = 0, re = 0;
    int rec = load_state(mv, (unsigned)p, st, sizeof st, &rm, &re);
    if (rec < 0) {
        d_err(x, "ERR cannot read the partition state: %s", keel_strerror(rec));
        return 0;
    }
    out_move *o = src_find(mv, m);
    in_move *in = dst_find(mv, m);
    if (rec && rm == m && (!strcmp(st, "OUTGOING") || !strcmp(st, "FENCED"))) {
        if (ptable_map(mv->env.pt)->owner[p] != ptable_self_index(mv->env.pt)) {
            /* The map already gives p away: the move committed. */
            d_err(x, "ERR move %llu committed here; it cannot abort", (unsigned long long)m);
            return 0;
        }
        if (persist(mv, (unsigned)p, "NONE", m, re, NULL)) {
            d_err(x, "ERR cannot persist the partition state");
            return 0;
        }
        ptable_set_state(mv->env.pt, (unsigned)p, PART_SERVING);
        if (o) src_end(mv, o);
        mv->env.release_held(mv->env.ctx, (long)p, 0); /* they run now, here */
        mv->st.aborts_total++;
        keel_log(KEEL_LOG_WARN, "move_aborted", "move=%llu partition=%u role=source",
                 (unsigned long long)m, (unsigned)p);
    } else if (rec && rm == m && !strcmp(st, "INCOMING")) {
        if (in) dst_end(mv, in);
        unsigned lo, hi;
        mv_slot_range(mv, (unsigned)p, &lo, &hi);
        if (store_delete_slots(mv->env.st, lo, hi) || persist(mv, (unsigned)p, "NONE", m, re, NULL)) {
            d_err(x, "ERR cannot drop the copy");
            return 0;
        }
        if (ptable_state(mv->env.pt, (unsigned)p) == PART_INCOMING)
            ptable_set_state(mv->env.pt, (unsigned)p, PART_ABSENT);
        mv->st.aborts_total++;
        keel_log(KEEL_LOG_WARN, "move_aborted", "move=%llu partition=%u role=destination",
                 (unsigned long long)m, (unsigned)p);
    } else {
        if (o) src_end(mv, o); /* memory without a record: nothing durable to undo */
        if (in) dst_end(mv, in);
    }
    resp_w_simple(x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.CLEANUP term m p: deletes a RETIRED copy. */
static int d_cleanup(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, p;
    if (x->argc != 4 || arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || !ok_partition(x, p)) {
        d_err(x, "ERR bad KEEL.MOVE.CLEANUP: term move partition");
        return 0;
    }
    char st[16];
    uint64_t rm = 0, re = 0;
    /* The record says RETIRED, or still FENCED/OUTGOING when the commit
     * reached this node as a map while its move state was gone (restart). */
    int rec = load_state(mv, (unsigned)p, st, sizeof st, &rm, &re);
    if (rec < 0) {
        d_err(x, "ERR cannot read the partition state: %s", keel_strerror(rec));
        return 0;
    }
    if (rec && rm == m && strcmp(st, "INCOMING") != 0 &&
        ptable_state(mv->env.pt, (unsigned)p) == PART_RETIRED) {
        if (FAILPOINT("move.before_cleanup") == FP_ERROR) {
            d_err(x, "ERR failpoint move.before_cleanup");
            return 0;
        }
        unsigned lo, hi;
        mv_slot_range(mv, (unsigned)p, &lo, &hi);
        if (store_delete_slots(mv->env.st, lo, hi) ||
            persist(mv, (unsigned)p, "NONE", m, re, NULL)) {
            d_err(x, "ERR cannot delete the retired copy");
            return 0;
        }
        ptable_set_state(mv->env.pt, (unsigned)p, PART_ABSENT);
        mv->st.cleanups_total++;
        keel_log(KEEL_LOG_INFO, "move_cleanup", "move=%llu partition=%u", (unsigned long long)m,
                 (unsigned)p);
    }
    resp_w_simple(x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.RATE term m bytes-per-sec */
static int d_rate(dctx *x) {
    uint64_t m, rate;
    out_move *o = arg_u64(x, 2, &m) || arg_u64(x, 3, &rate) ? NULL : src_find(x->mv, m);
    if (!o || tbucket_set_rate(&o->tb, mv_now_us(x->mv), rate)) {
        d_err(x, "ERR no outgoing move %s here, or a bad rate", x->argc > 2 ? x->argv[2] : "?");
        return 0;
    }
    keel_log(KEEL_LOG_INFO, "move_rate", "move=%llu rate=%llu", (unsigned long long)m,
             (unsigned long long)rate);
    resp_w_simple(x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.STATE term -> [[p, state, move, active], ...] for every move
 * record, so that a coordinator can settle what a restart left behind. */
static int d_state(dctx *x) {
    moves *mv = x->mv;
    unsigned np = ptable_partitions(mv->env.pt);
    kbuf body;
    kbuf_init(&body);
    size_t n = 0;
    for (unsigned p = 0; p < np; p++) {
        part_state s = ptable_state(mv->env.pt, p);
        if (s == PART_SERVING || s == PART_ABSENT) continue;
        char st[16];
        uint64_t m = 0, e = 0;
        int rec = load_state(mv, p, st, sizeof st, &m, &e);
        if (rec < 0) { /* a partial list would read as "moves lost" */
            kbuf_close(&body);
            d_err(x, "ERR cannot read the partition state: %s", keel_strerror(rec));
            return 0;
        }
        if (!rec) continue;
        int active = (s == PART_INCOMING && dst_find(mv, m)) ||
                     ((s == PART_OUTGOING || s == PART_FENCED) && src_find(mv, m)) ||
                     s == PART_RETIRED;
        resp_w_array(&body, 4);
        resp_w_int(&body, p);
        resp_w_bulkstr(&body, part_state_name(s));
        resp_w_int(&body, (long long)m);
        resp_w_int(&body, active);
        n++;
    }
    resp_w_array(x->c->out, n);
    kbuf_append(x->c->out, body.p, body.len);
    if (body.oom) x->c->out->oom = 1; /* an entry is missing: not a reply to send */
    kbuf_close(&body);
    return 0;
}

void move_map_changed(moves *mv) {
    /* Sources whose partition the map gave away: the move committed. */
    for (int i = 0; i < MOVES_MAX; i++) {
        out_move *o = mv->out[i];
        if (!o || ptable_state(mv->env.pt, o->p) != PART_RETIRED) continue;
        /* On failure the record still says FENCED: with a map that gives p
         * away, a restart reads that as RETIRED too (move_restore). */
        if (persist(mv, o->p, "RETIRED", o->id, o->epoch, o->dst))
            keel_log(KEEL_LOG_ERROR, "move_retire_persist_failed", "move=%llu partition=%u",
                     (unsigned long long)o->id, o->p);
        uint64_t pause_us = o->fenced_us ? mv_now_us(mv) - o->fenced_us : 0;
        keel_log(KEEL_LOG_INFO, "move_committed",
                 "move=%llu partition=%u role=source fenced_for_ms=%.3f", (unsigned long long)o->id,
                 o->p, pause_us / 1000.0);
        mv->st.commits_total++;
        unsigned p = o->p;
        src_end(mv, o);
        mv->env.release_held(mv->env.ctx, p, 0); /* -MOVED to the new owner */
    }
    /* Destinations the map made owners. */
    for (int i = 0; i < MOVES_MAX; i++) {
        in_move *in = mv->in[i];
        if (!in || ptable_state(mv->env.pt, in->p) != PART_SERVING) continue;
        /* The INCOMING record stays: with a map that says this node owns p
         * it means SERVING (move_restore), so clearing it is not worth an
         * fsync on the commit path; the next move of p overwrites it. */
        keel_log(KEEL_LOG_INFO, "move_committed", "move=%llu partition=%u role=destination",
                 (unsigned long long)in->id, in->p);
        mv->st.commits_total++;
        dst_end(mv, in);
    }
    /* Requests held for a partition that is no longer fenced (a fence
     * restored at start-up and settled by this map). */
    mv->env.release_unfenced(mv->env.ctx);
}

int move_restore(moves *mv) {
    unsigned np = ptable_partitions(mv->env.pt);
    const keel_map *map = ptable_map(mv->env.pt);
    int self = ptable_self_index(mv->env.pt);
    for (unsigned p = 0; p < np; p++) {
        char st[16];
        uint64_t m, e;
        int rec = load_state(mv, p, st, sizeof st, &m, &e);
        if (rec < 0) return rec; /* the node must not start on a guess */
        if (!rec) continue;
        int mine = self >= 0 && map->owner[p] == self;
        part_state ps;
        if (!strcmp(st, "INCOMING"))
            ps = mine ? PART_SERVING : PART_INCOMING;
        else if (!strcmp(st, "FENCED"))
            ps = mine ? PART_FENCED : PART_RETIRED; /* held until the coordinator decides */
        else if (!strcmp(st, "OUTGOING"))
            ps = mine ? PART_SERVING : PART_RETIRED; /* the capture is gone: it will abort */
        else
            ps = mine ? PART_SERVING : PART_RETIRED;
        /* A map that gives p away means the move committed while we were
         * down: the copy here is a retired one, kept until CLEANUP. */
        int rc;
        if (ps == PART_RETIRED && strcmp(st, "RETIRED") &&
            (rc = persist(mv, p, "RETIRED", m, e, NULL)))
            return rc;
        ptable_set_state(mv->env.pt, p, ps);
        keel_log(KEEL_LOG_INFO, "move_state_restored", "partition=%u record=%s move=%llu state=%s",
                 p, st, (unsigned long long)m, part_state_name(ps));
    }
    move_map_changed(mv);
    return 0;
}

/* ---- The data path: move_src.c -------------------------------------------- */

static int d_chunk(dctx *x) {
    return src_chunk(x->mv, x->c, x->argc, x->argv, x->len);
}

static int d_changes(dctx *x) {
    return src_changes(x->mv, x->c, x->argc, x->argv, x->len);
}

/* ---- Dispatch --------------------------------------------------------------- */

/* Every peer command checks its argument count here, before its handler or
 * the directive guard sees it: handlers may read argv[0..argc) only, and
 * argc is within [min_args, max_args]. */
typedef struct dcmd {
    const char *name;
    int coordinator;        /* 1: a directive (term first), only from the coordinator */
    int min_args, max_args; /* including the name */
    int (*fn)(dctx *x);
} dcmd;

static const dcmd dcmds[] = {
    {"keel.move.out", 1, 7, 7, d_out},         {"keel.move.in", 1, 8, 9, d_in},
    {"keel.move.fence", 1, 3, 3, d_fence},     {"keel.move.verify", 1, 4, 4, d_verify},
    {"keel.move.commit", 1, 4, 4, d_commit},   {"keel.move.abort", 1, 4, 4, d_abort},
    {"keel.move.cleanup", 1, 4, 4, d_cleanup}, {"keel.move.rate", 1, 4, 4, d_rate},
    {"keel.move.state", 1, 2, 2, d_state},     {"keel.move.chunk", 0, 4, 4, d_chunk},
    {"keel.move.changes", 0, 4, 4, d_changes},
};

int move_engine_call(moves *mv, move_call *c, int argc, char **argv, const size_t *len) {
    if (!c->peer) {
        resp_w_error(c->out, "NOPERM authenticate first (KEEL.AUTH)");
        return 0;
    }
    const dcmd *d = NULL;
    for (size_t i = 0; argc > 0 && i < sizeof dcmds / sizeof *dcmds && !d; i++)
        if (!strcasecmp(argv[0], dcmds[i].name)) d = &dcmds[i];
    if (!d) {
        resp_w_errorf(c->out, "ERR unknown command '%.64s'", argc > 0 ? argv[0] : "");
        return 0;
    }
    dctx x = {mv, c, argc, argv, len};
    if (argc < d->min_args || argc > d->max_args) {
        d_err(&x, "ERR wrong number of arguments for '%s' command", d->name);
        return 0;
    }
    if (d->coordinator) {
        uint64_t term = 0;
        if (arg_u64(&x, 1, &term)) {
            d_err(&x, "ERR %s needs the coordinator term first", d->name);
            return 0;
        }
        directive_verdict v =
            mv->env.check_term(mv->env.ctx, !strcmp(c->peer, COORDINATOR_PEER), term);
        if (v != DIRECTIVE_ACCEPT) {
            keel_log(KEEL_LOG_WARN, "directive_dropped", "command=%s peer=%s reason=%s term=%llu",
                     d->name, c->peer, directive_verdict_name(v), (unsigned long long)term);
            d_err(&x, "NOPERM directive refused: %s", directive_verdict_name(v));
            return 0;
        }
    }
    return d->fn(&x);
}

void move_engine_conn_gone(moves *mv, void *conn) {
    for (int i = 0; i < MOVES_MAX; i++) {
        out_move *o = mv->out[i];
        if (o && o->waiter == conn) {
            o->waiter = NULL;
            o->waiter_flag = NULL;
            mv->env.timer_stop(o->timer);
        }
        if (mv->in[i] && mv->in[i]->verifier == conn) mv->in[i]->verifier = NULL;
    }
}

int move_sweep_skip(void *arg, unsigned slot) {
    moves *mv = arg;
    part_state s =
        ptable_state(mv->env.pt, keel_slot_partition(slot, ptable_partitions(mv->env.pt)));
    return s == PART_INCOMING || s == PART_FENCED;
}

void move_engine_stats(const moves *mv, move_stats *out) {
    memset(out, 0, sizeof *out);
    if (!mv) return;
    *out = mv->st;
    unsigned np = ptable_partitions(mv->env.pt);
    for (unsigned p = 0; p < np; p++) {
        switch (ptable_state(mv->env.pt, p)) {
        case PART_OUTGOING:
            out->outgoing++;
            break;
        case PART_FENCED:
            out->fenced++;
            break;
        case PART_INCOMING:
            out->incoming++;
            break;
        case PART_RETIRED:
            out->retired++;
            break;
        default:
            break;
        }
    }
}

const move_env *move_engine_env(const moves *mv) {
    return &mv->env;
}

moves *move_engine_new(const move_env *env, unsigned mutations) {
    moves *mv = calloc(1, sizeof *mv);
    if (!mv) return NULL;
    mv->env = *env;
    mv->mutations = mutations;
    return mv;
}

void move_engine_free(moves *mv) {
    if (!mv) return;
    for (int i = 0; i < MOVES_MAX; i++) {
        if (mv->out[i]) src_end(mv, mv->out[i]);
        if (mv->in[i]) dst_end(mv, mv->in[i]);
    }
    free(mv);
}
