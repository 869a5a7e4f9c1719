/* rep_leader.c - the leader's half of replication (rep_engine.h; DESIGN §12).
 *
 *   leader_start: epoch-cache entry (e, end+1) persisted, change capture of
 *   the partition's slots on (one shared store capture; rep_int.h). Each turn: the captured records
 * become batch end+1 (rep/<p> persisted: lo = end+1, hi = end+2, since the next turn's data reaches
 * the disk before its own record), retained in the log and sent to every streaming follower, at
 * most REP_WINDOW ahead of its ack.
 *
 *   per follower:  (not streaming) --SUB--> STREAMING from lo+1, or
 *                  DIVERGED (its log may pass the end E of its last epoch
 *                  here), or COPYING (asked for, or lo+1 no longer retained)
 *                  --last chunk--> STREAMING from the copy's position + 1
 *
 * Commit: a position is committed once every member of the ISR the leader
 * knows - plus a member whose addition it proposed and the coordinator has
 * not yet settled (a map with a newer partition epoch settles it) - has
 * acknowledged it, and that ISR has at least min_insync members. The caller
 * releases a turn's replies then (env->committed).
 *
 * ISR changes are proposals to the coordinator (env->report), which commits
 * them by compare-and-set on the partition epoch: shrink a member not caught
 * up for REP_LAG_MAX_MS; expand by a follower streaming in this epoch whose
 * ack reached the leader's end.
 *
 * Lease: writes and reads are served only while now < lease_until, renewed
 * by rep_lease from the binding's heartbeats to the coordinator, measured on
 * this node's own clock.
 */
#include "core/err.h"
#include "core/log.h"
#include "node/move_wire.h"
#include "node/rep_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_self(const rep *r, const char *id) {
    return strcmp(id, r->env.self_id) == 0;
}

static rep_peer *peer_find(rep_part *pp, const char *id) {
    for (int i = 0; i < pp->npeers; i++)
        if (strcmp(pp->peers[i].id, id) == 0) return &pp->peers[i];
    return NULL;
}

#define in_isr rep_in_isr

/* The shared capture's callback (rep_int.h): runs inside the store's turn
 * write; appends to the partition's batch when it leads with capture on. */
static void on_change(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                      size_t vlen, const store_phys *old) {
    rep *r = arg;
    unsigned p = slot / (16384u / r->nparts);
    if (p >= r->nparts) return;
    rep_part *pp = &r->parts[p];
    if (pp->role != REP_LEADER || pp->capture < 0) return;
    rep_mark_dirty(r, pp);
    if (old && !old->exists && r->no_absent_olds) old = NULL; /* rep_set_olds_absent */
    if (move_put_record(&pp->pend, slot, key, klen, val, vlen) || rep_put_old(&pp->pend_old, old))
        pp->pend.len = SIZE_MAX / 2;
}

static void peer_copy_end(rep *r, rep_peer *pe) {
    if (pe->snap && r->st.copies_active) r->st.copies_active--;
    pe->copy_wanted = 0;
    store_snapshot_free(pe->snap);
    pe->snap = NULL;
    free(pe->cursor);
    pe->cursor = NULL;
    pe->curlen = 0;
}

int leader_start(rep *r, rep_part *pp, const rep_config *c) {
    uint64_t now = rep_now(r);
    pp->npeers = 0;
    for (int i = 0; i < c->nreplicas && pp->npeers < REP_RF_MAX; i++) {
        if (is_self(r, c->replicas[i])) continue;
        rep_peer *pe = &pp->peers[pp->npeers++];
        memset(pe, 0, sizeof *pe);
        snprintf(pe->id, sizeof pe->id, "%s", c->replicas[i]);
        pe->caught_us = now; /* a grace period before it can be dropped */
    }
    pp->adding[0] = 0;
    pp->lease_until = 0; /* the first heartbeat of this epoch grants it */
    /* What the data may hold past end - a restored leader record's hi
     * (rep_restore), records of a turn not sealed when it stepped down - is
     * claimed (end = phi) but not retained, and the new epoch starts right
     * after end: a follower holding the old position phi finds the old
     * epoch ending before it (DIVERGED), one lacking it finds phi not
     * retained; both are copied from this node's data. */
    if (rep_pos0_has_data(r, pp)) pp->phi = 1; /* the data before replication: position 1 */
    uint64_t start = pp->end + 1;
    if (!pp->copying && pp->phi > pp->end && pp->phi != UINT64_MAX) pp->end = pp->phi;
    pp->committed = pp->end;
    /* The batches this node kept as a follower (its tail) are its log's
     * newest: a follower of the old epoch a batch or two behind is streamed
     * them, not copied out of the ISR. Kept only when they end at end (not
     * under a claimed perhaps-position, nor after a copy). */
    size_t kept = pp->nlog && pp->log[pp->nlog - 1].pos == pp->end ? pp->nlog : 0;
    if (!kept) rep_log_clear(pp);
    rep_ec_push(pp, pp->epoch, start);
    pp->plo = pp->end;
    pp->phi = pp->end + 1;
    /* Unsynced: rep_configure_sync makes every partition's record of one map
     * durable with one fsync, before anything of the new epoch happens. */
    int rc = rep_persist_lazy(r, pp);
    if (rc) return rc;
    r->configure_unsynced = 1;
    kbuf_init(&pp->pend);
    kbuf_init(&pp->pend_old);
    /* rep_persist wrote the turn out: only later writes reach the batch. */
    if (r->capture < 0) {
        r->capture = store_capture_start(r->env.st, 0, 16383, on_change, r);
        if (r->capture < 0) return r->capture;
    }
    pp->capture = r->capture;
    keel_log(KEEL_LOG_INFO, "rep_leading", "partition=%u epoch=%llu end=%llu kept=%zu", pp->p,
             (unsigned long long)pp->epoch, (unsigned long long)pp->end, kept);
    return 0;
}

void rep_log_clear(rep_part *pp) {
    for (size_t i = 0; i < pp->nlog; i++)
        free(pp->log[i].data);
    pp->nlog = 0;
}

/* Room for one more retained batch at log[nlog]; -1 out of memory. */
static int log_room(rep_part *pp) {
    if (pp->nlog < pp->caplog) return 0;
    size_t cap = pp->caplog ? pp->caplog * 2 : 16;
    rep_batch *nl = realloc(pp->log, cap * sizeof *nl);
    if (!nl) return -1;
    pp->log = nl, pp->caplog = cap;
    return 0;
}

int rep_log_push(rep_part *pp, uint64_t pos, uint64_t epoch, const char *rec, size_t rlen,
                 const char *old, size_t olen) {
    if (pp->nlog && pp->log[pp->nlog - 1].pos + 1 != pos) return KEEL_EINVAL;
    char *copy = NULL;
    size_t len = rlen + olen;
    if (log_room(pp) || (len && !(copy = malloc(len)))) return KEEL_ENOMEM;
    if (rlen) memcpy(copy, rec, rlen);
    if (olen) memcpy(copy + rlen, old, olen);
    pp->log[pp->nlog++] =
        (rep_batch){.pos = pos, .epoch = epoch, .data = copy, .len = len, .rlen = rlen};
    return 0;
}

void leader_stop(rep *r, rep_part *pp) {
    pp->capture = -1; /* the shared capture stays: it skips this partition now */
    kbuf_close(&pp->pend);
    kbuf_close(&pp->pend_old);
    rep_log_clear(pp);
    for (int i = 0; i < pp->npeers; i++)
        peer_copy_end(r, &pp->peers[i]);
    pp->npeers = 0;
    pp->lease_until = 0;
    pp->adding[0] = 0;
}

int leader_demote_lazy(rep *r, rep_part *pp) {
    /* The turn so far is written out (its records reach pend); if none is
     * unsealed the log ends exactly at end, and a follower of the next
     * leader need not truncate what it does not hold. */
    int rc = store_write_turn(r->env.st);
    pp->plo = pp->end;
    pp->phi = pp->pend.len ? pp->end + 1 : pp->end;
    if (!rc) rc = rep_persist_lazy(r, pp);
    leader_stop(r, pp);
    return rc;
}

static void propose(rep *r, rep_part *pp, const char *what, const char *id) {
    char a[24], b[24], c[24];
    const char *argv[] = {"KEEL.REP.ISR",
                          rep_u64(a, pp->p),
                          rep_u64(b, pp->part_epoch),
                          rep_u64(c, pp->epoch),
                          what,
                          id};
    size_t len[6];
    for (int i = 0; i < 6; i++)
        len[i] = strlen(argv[i]);
    r->st.isr_proposals++;
    pp->proposed_us = rep_now(r);
    r->env.report(r->env.ctx, 6, argv, len);
}

/* The commit rule (top of file). */
static void leader_commit(rep *r, rep_part *pp) {
    uint64_t c = pp->end;
    if (!(r->mutations & REP_MUT_EARLY_REPLY)) {
        int n = pp->nisr + (in_isr(pp, r->env.self_id) ? 0 : 1);
        if (n < pp->min_insync) return;
        for (int i = 0; i < pp->npeers; i++) {
            rep_peer *pe = &pp->peers[i];
            int counted = in_isr(pp, pe->id) || (pp->adding[0] && !strcmp(pp->adding, pe->id));
            if (counted && pe->acked < c) c = pe->acked;
        }
    }
    if (c > pp->committed) {
        pp->committed = c;
        r->env.committed(r->env.ctx, pp->p, c);
    }
}

/* The replica set changed in the same leader epoch (a replica move adds
 * or removes a follower): peers still listed keep their state, a new one
 * starts as a fresh peer (it subscribes, and is copied or streamed to),
 * one no longer listed is forgotten (its copy, if any, ends). */
static void leader_sync_peers(rep *r, rep_part *pp, const rep_config *c) {
    rep_peer keep[REP_RF_MAX];
    int n = 0;
    uint64_t now = rep_now(r);
    for (int i = 0; i < c->nreplicas && n < REP_RF_MAX; i++) {
        if (is_self(r, c->replicas[i])) continue;
        rep_peer *old = peer_find(pp, c->replicas[i]);
        if (old) {
            keep[n] = *old;
            old->id[0] = 0; /* moved: not freed below */
        } else {
            memset(&keep[n], 0, sizeof keep[n]);
            snprintf(keep[n].id, sizeof keep[n].id, "%s", c->replicas[i]);
            keep[n].caught_us = now; /* a grace period before it can be dropped */
            keel_log(KEEL_LOG_INFO, "rep_peer_added", "partition=%u peer=%s", pp->p,
                     c->replicas[i]);
        }
        n++;
    }
    for (int i = 0; i < pp->npeers; i++)
        if (pp->peers[i].id[0]) {
            keel_log(KEEL_LOG_INFO, "rep_peer_removed", "partition=%u peer=%s", pp->p,
                     pp->peers[i].id);
            peer_copy_end(r, &pp->peers[i]);
        }
    memcpy(pp->peers, keep, (size_t)n * sizeof *keep);
    pp->npeers = n;
}

void leader_update(rep *r, rep_part *pp, const rep_config *c) {
    if (pp->adding[0] && c->part_epoch > pp->adding_at) pp->adding[0] = 0; /* settled */
    leader_sync_peers(r, pp, c);
    leader_commit(r, pp);
}

static rep_batch *log_find(rep_part *pp, uint64_t pos) {
    if (!pp->nlog || pos < pp->log[0].pos || pos > pp->log[pp->nlog - 1].pos) return NULL;
    return &pp->log[pos - pp->log[0].pos];
}

/* The records of a copy chunk. */
static int copy_cb(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                   size_t vlen) {
    return move_put_record(arg, slot, key, klen, val, vlen) ? 1 : 0;
}

static void send_more(rep *r, rep_part *pp, rep_peer *pe);

/* Sends up to 4 chunks of pe's copy; the last one switches it to streaming. */
static int copy_some(rep *r, rep_part *pp, rep_peer *pe) {
    for (int k = 0; k < 4 && pe->snap; k++) {
        kbuf b, cache;
        kbuf_init(&b);
        kbuf_init(&cache);
        char *next = NULL;
        size_t nextlen = 0;
        long n = store_copy_range(r->env.st, pe->snap, pp->lo_slot, pp->hi_slot, pe->cursor,
                                  pe->curlen, REP_COPY_CHUNK, copy_cb, &b, &next, &nextlen);
        if (n < 0) {
            kbuf_close(&b);
            peer_copy_end(r, pe);
            pe->streaming = 0; /* it asks again */
            keel_log(KEEL_LOG_WARN, "rep_copy_failed", "partition=%u to=%s", pp->p, pe->id);
            return 0;
        }
        if (pe->snap_first)
            for (int i = 0; i < pp->nec; i++) {
                if (pp->ec[i].start > pe->snap_pos) break;
                char e[16];
                move_be64(e, pp->ec[i].epoch);
                move_be64(e + 8, pp->ec[i].start);
                if (kbuf_append(&cache, e, 16)) n = KEEL_ENOMEM;
            }
        char a[24], ep[24], ps[24];
        const char *argv[] = {"KEEL.REP.SNAP",
                              rep_u64(a, pp->p),
                              rep_u64(ep, pp->epoch),
                              rep_u64(ps, pe->snap_pos),
                              pe->snap_first ? "1" : "0",
                              next ? "0" : "1",
                              cache.p ? cache.p : "",
                              b.p ? b.p : ""};
        size_t len[8];
        for (int i = 0; i < 6; i++)
            len[i] = strlen(argv[i]);
        len[6] = cache.len, len[7] = b.len;
        (void)rep_sendv(r, pe->id, 8, argv, len); /* a loss breaks the link: it asks again */
        kbuf_close(&b);
        kbuf_close(&cache);
        pe->snap_first = 0;
        free(pe->cursor);
        pe->cursor = next;
        pe->curlen = nextlen;
        if (!next) {
            peer_copy_end(r, pe);
            pe->next = pe->snap_pos + 1;
            r->st.copies_sent++;
        }
    }
    if (!pe->snap) send_more(r, pp, pe);
    return 0;
}

/* How long a copy to pe waits after the last one started, when that one
 * did not arrive: REP_COPY_BACKOFF_MS doubling per restart, at most
 * REP_COPY_BACKOFF_MAX_MS; none for a first copy. */
static uint64_t copy_backoff_us(const rep_peer *pe) {
    if (!pe->copy_restarts) return 0;
    unsigned sh = pe->copy_restarts - 1 > 5 ? 5 : pe->copy_restarts - 1;
    uint64_t ms = (uint64_t)REP_COPY_BACKOFF_MS << sh;
    return (ms > REP_COPY_BACKOFF_MAX_MS ? REP_COPY_BACKOFF_MAX_MS : ms) * 1000;
}

static int copy_may_start(const rep *r, const rep_peer *pe, uint64_t now) {
    return r->st.copies_active < REP_COPY_MAX &&
           (!pe->copy_restarts || now >= pe->copy_started_us + copy_backoff_us(pe));
}

static void start_copy(rep *r, rep_part *pp, rep_peer *pe) {
    peer_copy_end(r, pe);
    uint64_t now = rep_now(r);
    if (!copy_may_start(r, pe, now)) {
        pe->copy_wanted = 1; /* leader_tick starts it */
        pe->streaming = 0;
        r->st.copies_deferred++;
        return;
    }
    /* The turn so far is written out first: its records are in the snapshot
     * and again in batch end+1, which re-applies them (absolute values). */
    pe->snap = store_snapshot_new(r->env.st);
    if (!pe->snap) {
        pe->streaming = 0;
        return;
    }
    r->st.copies_active++;
    pe->copy_restarts++; /* back to 0 when the follower acknowledges the copy */
    pe->copy_started_us = now;
    pe->snap_pos = pp->end;
    pe->snap_first = 1;
    pe->streaming = 1;
    keel_log(KEEL_LOG_INFO, "rep_copy_start", "partition=%u to=%s pos=%llu", pp->p, pe->id,
             (unsigned long long)pe->snap_pos);
    (void)copy_some(r, pp, pe);
}

static int copy_held(const rep_part *pp, const rep_peer *pe) {
    return in_isr(pp, pe->id) || (pp->adding[0] && !strcmp(pp->adding, pe->id));
}

/* A full copy drops the follower's data first: an ISR member must leave the
 * ISR before (it may hold acknowledged writes no other member will hold
 * until it is back). Until then it is not streamed to; the copy stays
 * wanted and leader_tick starts it once the map has it out. The follower
 * may not ask again: a stale SUB (copy=1) that arrives after its copy
 * finished finds it STREAMING, and it would wait for batches for good
 * (a rolling restart at 256 partitions left 8-31 partitions with an ISR of
 * 2 that way). */
static void want_copy(rep *r, rep_part *pp, rep_peer *pe) {
    if (copy_held(pp, pe)) {
        pe->streaming = 0;
        pe->copy_wanted = 1;
        if (rep_now(r) - pp->proposed_us >= 200000ull) propose(r, pp, "shrink", pe->id);
        return;
    }
    start_copy(r, pp, pe);
}

/* KEEL.REP.APPEND p leader-epoch batch-epoch pos records [olds]. */
static int send_append(rep *r, const rep_part *pp, const rep_peer *pe, const rep_batch *b) {
    char num[4][24];
    const char *argv[7] = {"KEEL.REP.APPEND",
                           rep_u64(num[0], pp->p),
                           rep_u64(num[1], pp->epoch),
                           rep_u64(num[2], b->epoch),
                           rep_u64(num[3], b->pos),
                           b->data ? b->data : "",
                           b->data ? b->data + b->rlen : ""};
    size_t len[7] = {15,      strlen(num[0]),  strlen(num[1]), strlen(num[2]), strlen(num[3]),
                     b->rlen, b->len - b->rlen};
    return rep_sendv(r, pe->id, b->len > b->rlen ? 7 : 6, argv, len);
}

static void send_more(rep *r, rep_part *pp, rep_peer *pe) {
    if (!pe->streaming || pe->snap) return;
    while (pe->next <= pp->end && pe->next <= pe->acked + REP_WINDOW) {
        rep_batch *b = log_find(pp, pe->next);
        if (!b) { /* no longer retained: a full copy */
            want_copy(r, pp, pe);
            return;
        }
        if (send_append(r, pp, pe, b)) {
            pe->streaming = 0;
            return;
        }
        r->st.batches_sent++;
        pe->next++;
    }
}

/* Drops retained batches every streaming follower acknowledged, and any
 * beyond REP_LOG_KEEP (a follower that far behind is copied). */
static void log_trim(rep_part *pp) {
    uint64_t keep_from = pp->end + 1;
    for (int i = 0; i < pp->npeers; i++) {
        rep_peer *pe = &pp->peers[i];
        uint64_t need = pe->snap ? pe->snap_pos + 1 : pe->acked + 1;
        if (need < keep_from) keep_from = need;
    }
    if (pp->end >= REP_LOG_KEEP && keep_from < pp->end - REP_LOG_KEEP + 1)
        keep_from = pp->end - REP_LOG_KEEP + 1;
    size_t drop = 0;
    while (drop < pp->nlog && pp->log[drop].pos < keep_from)
        free(pp->log[drop++].data);
    if (drop) {
        memmove(pp->log, pp->log + drop, (pp->nlog - drop) * sizeof *pp->log);
        pp->nlog -= drop;
    }
}

int leader_turn_end(rep *r, rep_part *pp) {
    if (pp->pend.len >= SIZE_MAX / 2) return KEEL_ENOMEM; /* a capture append failed */
    uint64_t pos = pp->end + 1;
    /* The batch is durable (the turn's store_sync). The record that says so
     * goes to the WAL after it, unsynced: it precedes every later turn's
     * data, so a crash that keeps the next turn keeps it too; one that
     * loses it restores end = pos (the previous record's hi), which holds
     * (docs/replication.md "Write path speed"). No fsync of its own. */
    pp->plo = pos;
    pp->phi = pos + 1;
    int rc = rep_persist_lazy(r, pp);
    if (rc) return rc;
    if (log_room(pp)) return KEEL_ENOMEM;
    rep_batch *b = &pp->log[pp->nlog++];
    b->pos = pos, b->epoch = pp->epoch;
    /* The olds after the records, in the one buffer the batch takes; out of
     * memory the batch goes without them (its followers read their own). */
    b->rlen = pp->pend.len;
    if (pp->pend_old.len && kbuf_append(&pp->pend, pp->pend_old.p, pp->pend_old.len))
        pp->pend.len = b->rlen;
    pp->pend_old.len = 0;
    b->len = pp->pend.len;
    b->data = pp->pend.p; /* the batch takes the buffer */
    kbuf_init(&pp->pend);
    pp->end = pos;
    if (r->env.applied)
        r->env.applied(r->env.ctx, pp->p, pos, b->epoch, rep_hash(b->data, b->rlen));
    for (int i = 0; i < pp->npeers; i++)
        send_more(r, pp, &pp->peers[i]);
    leader_commit(r, pp);
    log_trim(pp);
    return 0;
}

/* The end of epoch fe in this leader's log; 0 if fe is not in its cache
 * (the follower's history cannot be matched: it is copied). */
static uint64_t epoch_end(const rep_part *pp, uint64_t fe) {
    if (fe == 0) return pp->nec ? pp->ec[0].start - 1 : pp->end;
    for (int i = 0; i < pp->nec; i++)
        if (pp->ec[i].epoch == fe) return i + 1 < pp->nec ? pp->ec[i + 1].start - 1 : pp->end;
    return 0;
}

int leader_on_sub(rep *r, rep_part *pp, const char *from, uint64_t fe, uint64_t lo, uint64_t hi,
                  int copy) {
    rep_peer *pe = peer_find(pp, from);
    if (!pe) return 0; /* not a replica of p */
    peer_copy_end(r, pe);
    pe->streaming = 0;
    pe->acked = 0; /* until it says what it holds now */
    if (copy) {
        want_copy(r, pp, pe);
        return 0;
    }
    uint64_t e = epoch_end(pp, fe);
    if (e > pp->end) e = pp->end;
    if (hi > e) {
        uint64_t v[] = {pp->p, pp->epoch, e};
        (void)rep_send_u64s(r, pe->id, "KEEL.REP.DIVERGED", 3, v, NULL, 0);
        return 0;
    }
    uint64_t from_pos = lo + 1;
    if (from_pos <= pp->end && !log_find(pp, from_pos)) {
        want_copy(r, pp, pe);
        return 0;
    }
    pe->acked = lo;
    pe->next = from_pos;
    pe->streaming = 1;
    uint64_t v[] = {pp->p, pp->epoch, from_pos};
    if (rep_send_u64s(r, pe->id, "KEEL.REP.STREAM", 3, v, NULL, 0)) {
        pe->streaming = 0;
        return 0;
    }
    send_more(r, pp, pe);
    return 0;
}

void leader_on_ack(rep *r, rep_part *pp, const char *from, uint64_t pos) {
    rep_peer *pe = peer_find(pp, from);
    if (!pe || !pe->streaming) return;
    if (pos > pp->end) pos = pp->end; /* cannot be: it holds only what we sent */
    if (pos > pe->acked) pe->acked = pos;
    if (!pe->snap && pe->copy_restarts && pe->acked >= pe->snap_pos)
        pe->copy_restarts = 0; /* the copy arrived: no backoff for the next one */
    if (pe->acked >= pp->end) pe->caught_us = rep_now(r);
    send_more(r, pp, pe);
    leader_commit(r, pp);
}

void leader_peer_down(rep *r, rep_part *pp, const char *peer) {
    rep_peer *pe = peer_find(pp, peer);
    if (!pe) return;
    peer_copy_end(r, pe);
    pe->streaming = 0;
}

int leader_tick(rep *r, rep_part *pp, uint64_t now) {
    for (int i = 0; i < pp->npeers; i++) {
        rep_peer *pe = &pp->peers[i];
        if (pe->copy_wanted && !copy_held(pp, pe) && copy_may_start(r, pe, now))
            start_copy(r, pp, pe);
        if (pe->snap) (void)copy_some(r, pp, pe);
        send_more(r, pp, pe);
        if (pe->streaming && !pe->snap && pe->acked >= pp->end) pe->caught_us = now;
    }
    int may_propose = now - pp->proposed_us >= 200000ull;
    for (int i = 0; i < pp->npeers && may_propose; i++) {
        rep_peer *pe = &pp->peers[i];
        if (in_isr(pp, pe->id)) {
            if (pe->copy_wanted || now - pe->caught_us > REP_LAG_MAX_MS * 1000ull)
                propose(r, pp, "shrink", pe->id);
        } else if (pp->adding[0] == 0 && pe->streaming && !pe->snap && pe->acked >= pp->end) {
            /* Caught up in this epoch (it subscribed in it): counted from now. */
            snprintf(pp->adding, sizeof pp->adding, "%s", pe->id);
            pp->adding_at = pp->part_epoch;
            propose(r, pp, "expand", pe->id);
        } else if (pp->adding[0] && !strcmp(pp->adding, pe->id)) {
            /* Again: the report may have been lost. Even when it wants a copy
             * now: only a committed change clears adding (leader_update), and
             * a shrink follows at once (above). */
            propose(r, pp, "expand", pe->id);
        }
        may_propose = now - pp->proposed_us >= 200000ull;
    }
    leader_commit(r, pp);
    log_trim(pp);
    return 0;
}

/* KEEL.REP.RESIGNED to every follower (rep_resign_announce): a loss costs
 * only the ping-pong it prevents (the follower answers -MOVED back here
 * until its map names the next leader). */
void leader_announce_resign(rep *r, rep_part *pp) {
    uint64_t v[] = {pp->p, pp->epoch, pp->end};
    for (int i = 0; i < pp->npeers; i++)
        (void)rep_send_u64s(r, pp->peers[i].id, "KEEL.REP.RESIGNED", 3, v, NULL, 0);
}

static int lease_ok(rep *r, rep_part *pp) {
    return (r->mutations & REP_MUT_NO_LEASE) || rep_now(r) < pp->lease_until;
}

int leader_can_write(rep *r, rep_part *pp) {
    if (!lease_ok(r, pp)) return REP_ENOLEASE;
    int n = pp->nisr + (in_isr(pp, r->env.self_id) ? 0 : 1);
    return n < pp->min_insync ? REP_ENOREPLICAS : REP_OK;
}

int leader_can_read(rep *r, rep_part *pp) {
    return lease_ok(r, pp) ? REP_OK : REP_ENOLEASE;
}
