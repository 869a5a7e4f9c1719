/* rep_follower.c - the follower's half of replication (rep_engine.h;
 * DESIGN §12).
 *
 *   follower_start --> SUBSCRIBING: KEEL.REP.SUB (last epoch, lo, hi), again
 *   every REP_SUB_RETRY_MS until answered
 *     STREAM from end+1  --> STREAMING: batches applied strictly in order
 *     DIVERGED E (hi > E) --> truncate: SUB asking for a full copy
 *     SNAP first         --> COPYING: the partition dropped, chunks applied;
 *                            the last one sets end = the copy's position
 *   STREAMING --gap, link down--> SUBSCRIBING
 *
 * A batch is applied as one txn committed into the turn: its records and
 * the rep/<p> record [lo = end, hi = pos, epoch cache with (batch epoch,
 * pos) if the batch opens a new epoch], flagged exact
 * (store_txn_meta_put: one store write holds both, so a crash keeps both
 * or neither); the turn's store_sync (per --fsync) makes them durable with
 * one fsync, then the ACK of pos, which the binding sends after that
 * store_sync. (Until 2026-12-03 the record carried the batch as a redo and
 * went to the WAL by a write of its own ahead of the data: two RocksDB
 * writes and the batch stored twice per APPEND.)
 */
#include "core/err.h"
#include "core/log.h"
#include "node/move_wire.h"
#include "node/rep_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The epoch of the last record held: a cache entry starting after end (an
 * epoch this node led without writing, leader_start) holds none, and a
 * leader that never saw that epoch would answer DIVERGED 0 and copy the
 * whole partition (test_replication_nodeloss: a failover then a transfer
 * took the ISR to 1). */
static uint64_t last_held_epoch(const rep_part *pp) {
    for (int i = pp->nec; i-- > 0;)
        if (pp->ec[i].start <= pp->end) return pp->ec[i].epoch;
    return rep_ec_last(pp);
}

static void sub(rep *r, rep_part *pp) {
    uint64_t h = pp->phi > pp->end ? pp->phi : pp->end;
    uint64_t v[] = {pp->p, pp->epoch, last_held_epoch(pp), pp->end, h, pp->want_copy ? 1 : 0};
    pp->fstate = F_SUBSCRIBING;
    pp->sub_us = rep_now(r);
    (void)rep_send_u64s(r, pp->leader, "KEEL.REP.SUB", 6, v, NULL, 0); /* a loss: again on a tick */
}

static void ack(rep *r, rep_part *pp) {
    uint64_t v[] = {pp->p, pp->epoch, pp->end};
    (void)rep_send_u64s(r, pp->leader, "KEEL.REP.ACK", 3, v, NULL, 0);
}

void follower_start(rep *r, rep_part *pp) {
    pp->want_copy = rep_pos0_has_data(r, pp); /* not the leader's history: copied */
    pp->exact = 0; /* a demoted leader's data may hold an unsealed turn */
    sub(r, pp);
}

int follower_on_stream(rep *r, rep_part *pp, uint64_t from) {
    if (pp->fstate != F_SUBSCRIBING) return 0;
    if (from != pp->end + 1) { /* not what was asked: ask again */
        sub(r, pp);
        return 0;
    }
    pp->fstate = F_STREAMING;
    ack(r, pp);
    return 0;
}

int follower_on_diverged(rep *r, rep_part *pp, uint64_t e) {
    if (pp->fstate != F_SUBSCRIBING) return 0;
    r->st.truncations++;
    keel_log(KEEL_LOG_INFO, "rep_truncate", "partition=%u epoch=%llu end=%llu to=%llu", pp->p,
             (unsigned long long)pp->epoch, (unsigned long long)pp->end, (unsigned long long)e);
    if (r->mutations & REP_MUT_NO_TRUNCATE) {
        /* Broken on purpose: claims to end at e and keeps its records past it. */
        rep_log_clear(pp);
        pp->end = pp->plo = pp->phi = e;
        while (pp->nec && pp->ec[pp->nec - 1].start > e)
            pp->nec--;
        int rc = rep_persist(r, pp);
        if (rc) return rc;
        sub(r, pp);
        return 0;
    }
    pp->want_copy = 1; /* truncation by full copy (rep_engine.h) */
    sub(r, pp);
    return 0;
}

/* Whether a record's old state as the leader had it is this follower's
 * too (its data holding exactly the previous position). Only the leader
 * sweeps and gcs a replicated partition (rep_sweep_skip), so replicas at
 * one position hold the same records; but a version before olds swept the
 * partitions it followed, and an upgraded node may still lack expired keys
 * and orphaned fields its leader holds. So not for a record with an expiry,
 * nor for any field record (its key's expiry decides when the gc drops
 * it). Absent ones the leader sends only when its own store never swept
 * as a follower (rep_set_olds_absent). */
static int old_usable(const store_phys *o) {
    return !o->exists || (!o->has_ttl && !(o->type & STORE_T_SUB));
}

/* apply_olds' result for olds that do not parse or do not match the
 * records one to one (the caller applies the batch again by reading). */
#define OLDS_BAD 1

/* What one batch did with its olds, added to rep_stats once it applied. */
typedef struct olds_count {
    uint64_t used, read, verified, mismatched;
} olds_count;

/* Tells the txn one record's old state (olds, rep_engine.h) unless the
 * follower must read its own; 1 in REP_OLD_VERIFY is checked against the
 * data. OLDS_BAD: malformed; KEEL_EPROTO: the txn refused it. */
static int take_old(rep *r, store_txn *t, unsigned slot, const char *k, size_t kl, const char *old,
                    size_t olen, size_t *ooff, olds_count *n) {
    store_phys o;
    int known;
    size_t used = rep_get_old(old + *ooff, olen - *ooff, &o, &known);
    if (!used) return OLDS_BAD;
    *ooff += used;
    if (!known || !old_usable(&o)) {
        n->read++;
        return 0;
    }
    int verify = ++r->olds_seen % REP_OLD_VERIFY == 0, bad = 0;
    if (store_txn_seed(t, slot, k, kl, &o, verify, &bad))
        return KEEL_EPROTO; /* as a failed put would: the batch is not applied */
    n->used++;
    n->verified += verify;
    if (bad) {
        if (!r->st.olds_mismatched && !n->mismatched)
            keel_log(KEEL_LOG_ERROR, "rep_old_mismatch", "slot=%u key_bytes=%zu", slot, kl);
        n->mismatched++;
    }
    return 0;
}

/* The records p[0..n) in one txn, with their olds old[0..olen) when the
 * caller may take them (NULL: every record reads its own); with record,
 * the rep/<p> record too (rep_persist_txn). KEEL_EPROTO: a record that
 * does not parse or lies outside the partition; OLDS_BAD: olds that do
 * not parse or do not match the records one to one (nothing written
 * either way). */
static int apply_olds(rep *r, rep_part *pp, const char *p, size_t n, const char *old, size_t olen,
                      int lazy, int record) {
    store_txn *t = store_txn_begin(r->env.st);
    size_t off = 0, ooff = 0;
    olds_count cnt = {0};
    int rc = KEEL_EPROTO;
    while (off < n) {
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t used = move_get_record(p + off, n - off, &slot, &k, &kl, &v, &vl);
        if (!used || slot < pp->lo_slot || slot > pp->hi_slot) goto bad;
        if (old && (rc = take_old(r, t, slot, k, kl, old, olen, &ooff, &cnt))) goto bad;
        if (!old && !lazy) cnt.read++; /* a batch's record, not a copy's */
        rc = KEEL_EPROTO;
        if (v ? store_txn_put_raw(t, slot, k, kl, v, vl) : store_txn_del(t, slot, k, kl, NULL))
            goto bad;
        off += used;
    }
    if (old && ooff != olen) {
        rc = OLDS_BAD;
        goto bad;
    }
    if (record && (rc = rep_persist_txn(r, pp, t))) goto bad;
    if ((rc = lazy ? store_txn_commit_lazy(t) : store_txn_commit(t))) return rc;
    r->st.olds_used += cnt.used, r->st.olds_read += cnt.read;
    r->st.olds_verified += cnt.verified, r->st.olds_mismatched += cnt.mismatched;
    return 0;
bad:
    store_txn_abort(t);
    return rc;
}

static int apply(rep *r, rep_part *pp, const char *p, size_t n, int lazy, int record) {
    return apply_olds(r, pp, p, n, NULL, 0, lazy, record);
}

int follower_on_snap(rep *r, rep_part *pp, uint64_t pos, int first, int last, const char *cache,
                     size_t clen, const char *rec, size_t rlen) {
    if (first) {
        /* Asked for, or the leader no longer retains what comes next. Not
         * while this node is in the ISR its map shows: dropping its data
         * could lose acknowledged writes (the leader has it removed first). */
        if (pp->fstate != F_SUBSCRIBING && pp->fstate != F_STREAMING) return 0;
        if (rep_in_isr(pp, r->env.self_id)) {
            /* The leader's map has this node out of the ISR, this node's not
             * yet: ask again at the next retry (REP_SUB_RETRY_MS), not now,
             * or the two would trade copies and refusals until the maps meet. */
            pp->want_copy = 1;
            pp->fstate = F_SUBSCRIBING;
            pp->sub_us = rep_now(r);
            return 0;
        }
        if (clen % 16 || clen / 16 > REP_EC_MAX) return KEEL_EPROTO;
        pp->fstate = F_COPYING;
        pp->copying = 1;
        pp->exact = 0;     /* batch pos+1 may repeat records the copy holds */
        rep_log_clear(pp); /* the data is replaced: no batch of the old tail holds */
        pp->plo = 0, pp->phi = UINT64_MAX;
        pp->end = 0;
        int rc = rep_persist(r, pp);
        if (rc) return rc;
        pp->nec = 0;
        for (size_t i = 0; i < clen / 16; i++)
            rep_ec_push(pp, move_rd(cache + 16 * i, 8), move_rd(cache + 16 * i + 8, 8));
        if ((rc = store_delete_slots(r->env.st, pp->lo_slot, pp->hi_slot))) return rc;
        if (r->env.forget) r->env.forget(r->env.ctx, pp->p, 0);
    } else if (pp->fstate != F_COPYING) {
        return 0; /* the rest of a copy this follower gave up */
    }
    int rc = apply(r, pp, rec, rlen, 1, 0);
    if (rc == KEEL_EPROTO) {
        keel_log(KEEL_LOG_WARN, "rep_bad_copy", "partition=%u", pp->p);
        sub(r, pp); /* still copying=1: the leader copies again */
        return 0;
    }
    if (rc) return rc;
    if (!last) return 0;
    pp->copying = 0;
    pp->end = pp->plo = pp->phi = pos;
    if ((rc = rep_persist(r, pp))) return rc; /* writes and syncs the copy too */
    pp->want_copy = 0;
    pp->fstate = F_STREAMING;
    r->st.copies_received++;
    if (r->env.base) r->env.base(r->env.ctx, pp->p, pos);
    keel_log(KEEL_LOG_INFO, "rep_copy_done", "partition=%u pos=%llu", pp->p,
             (unsigned long long)pos);
    ack(r, pp);
    return 0;
}

/* The tail: the newest REP_TAIL_KEEP batches applied (REP_TAIL_BYTES at
 * most), for leader_start if this node is promoted. Best effort: out of
 * memory it is dropped (a promotion then copies, as without it). */
static void tail_keep(rep_part *pp, uint64_t bepoch, uint64_t pos, const char *rec, size_t rlen,
                      const char *old, size_t olen) {
    /* Too big to keep, or not following the tail: the tail restarts here. */
    size_t len = rlen + olen;
    if (len > REP_TAIL_BYTES || rep_log_push(pp, pos, bepoch, rec, rlen, old, olen)) {
        rep_log_clear(pp);
        if (len > REP_TAIL_BYTES) return;
        (void)rep_log_push(pp, pos, bepoch, rec, rlen, old, olen); /* out of memory: no tail */
    }
    size_t bytes = 0, drop = 0;
    for (size_t i = 0; i < pp->nlog; i++)
        bytes += pp->log[i].len;
    while (pp->nlog - drop > REP_TAIL_KEEP || bytes > REP_TAIL_BYTES) {
        bytes -= pp->log[drop].len;
        free(pp->log[drop++].data);
    }
    if (drop) {
        memmove(pp->log, pp->log + drop, (pp->nlog - drop) * sizeof *pp->log);
        pp->nlog -= drop;
    }
}

int follower_on_append(rep *r, rep_part *pp, uint64_t bepoch, uint64_t pos, const char *rec,
                       size_t rlen, const char *old, size_t olen) {
    if (pp->fstate != F_STREAMING) return 0;
    if (pos <= pp->end) return 0; /* sent twice (a resubscription): held already */
    if (pos != pp->end + 1 || bepoch > pp->epoch) {
        sub(r, pp); /* a gap: something was lost */
        return 0;
    }
    /* The record written with the batch: its epoch cache as it is once the
     * batch is held; put back if nothing was written (the cache is copied
     * only for a batch that opens a newer epoch, the one case that changes
     * it). */
    uint64_t plo = pp->plo, phi = pp->phi;
    int nec = pp->nec, opens = rep_ec_last(pp) < bepoch || !pp->nec;
    rep_ec ec[REP_EC_MAX];
    if (opens) memcpy(ec, pp->ec, (size_t)nec * sizeof *ec);
    rep_ec_push(pp, bepoch, pos); /* no-op unless the batch opens a newer epoch */
    pp->plo = pp->end, pp->phi = pos;
    int apart = (r->mutations & REP_MUT_RECORD_APART) != 0, rc = 0;
    if (apart && (rc = rep_persist_apart(r, pp))) return rc;
    /* The olds are this node's only when its data holds exactly end. */
    int take = old && (pp->exact || (r->mutations & REP_MUT_OLDS_ALWAYS));
    rc = apply_olds(r, pp, rec, rlen, take ? old : NULL, take ? olen : 0, 0, !apart);
    /* Olds are self-delimiting and taken in order, so the states seeded
     * before a bad one belong to their records; the rest is read. */
    if (rc == OLDS_BAD) { /* applied by reading instead */
        if (!r->st.olds_bad)
            keel_log(KEEL_LOG_WARN, "rep_bad_olds", "partition=%u pos=%llu", pp->p,
                     (unsigned long long)pos);
        r->st.olds_bad++;
        rc = apply_olds(r, pp, rec, rlen, NULL, 0, 0, !apart);
    }
    if (rc) {
        pp->plo = plo, pp->phi = phi;
        if (opens) pp->nec = nec, memcpy(pp->ec, ec, (size_t)nec * sizeof *ec);
    }
    if (rc == KEEL_EPROTO) {
        keel_log(KEEL_LOG_WARN, "rep_bad_batch", "partition=%u pos=%llu", pp->p,
                 (unsigned long long)pos);
        pp->want_copy = 1;
        sub(r, pp);
        return 0;
    }
    if (rc) return rc;
    pp->end = pos;
    pp->exact = 1;
    r->st.batches_applied++;
    tail_keep(pp, bepoch, pos, rec, rlen, old, old ? olen : 0);
    if (r->env.applied) r->env.applied(r->env.ctx, pp->p, pos, bepoch, rep_hash(rec, rlen));
    ack(r, pp);
    return 0;
}

/* The leader handed p over (KEEL.REP.RESIGNED at its end): until the map
 * names the next leader (rep_configure clears it), clients get
 * REP_EHANDOFF here, not a redirect back to the leader that resigned. */
int follower_on_resigned(rep *r, rep_part *pp, uint64_t end) {
    (void)r;
    if (!pp->resigned)
        keel_log(KEEL_LOG_DEBUG, "rep_leader_resigned",
                 "partition=%u epoch=%llu end=%llu held=%llu", pp->p, (unsigned long long)pp->epoch,
                 (unsigned long long)end, (unsigned long long)pp->end);
    pp->resigned = 1;
    return 0;
}

void follower_peer_down(rep *r, rep_part *pp) {
    (void)r;
    pp->fstate = F_SUBSCRIBING;
    pp->sub_us = 0; /* the next tick asks again */
}

int follower_tick(rep *r, rep_part *pp, uint64_t now) {
    if (pp->fstate == F_IDLE ||
        (pp->fstate == F_SUBSCRIBING && now - pp->sub_us >= REP_SUB_RETRY_MS * 1000ull))
        sub(r, pp);
    return 0;
}
