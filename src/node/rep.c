/* rep.c - the replication engine object (rep_engine.h): partitions, the
 * map's configuration, the persisted log record, and the dispatch of
 * KEEL.REP.* messages to the leader (rep_leader.c) and the follower
 * (rep_follower.c). Every effect goes through rep_env.h.
 */
#include "core/err.h"
#include "core/log.h"
#include "core/num.h"
#include "node/move_wire.h"
#include "node/rep_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rep_u64(char *buf, uint64_t v) {
    snprintf(buf, 24, "%llu", (unsigned long long)v);
    return buf;
}

uint64_t rep_hash(const char *p, size_t n) { /* FNV-1a */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

/* olds (rep_engine.h): flags, then what they say is there. */
enum { OLD_PRESENT = 1, OLD_TTL = 2, OLD_VER = 4, OLD_UNKNOWN = 0x80 };

int rep_put_old(kbuf *b, const store_phys *old) {
    char e[1 + 1 + 4 + 8 + 8];
    size_t n = 1;
    if (!old) {
        e[0] = (char)OLD_UNKNOWN;
    } else if (!old->exists) {
        e[0] = 0;
    } else {
        if (old->vlen > UINT32_MAX) return kbuf_append(b, (char[]){(char)OLD_UNKNOWN}, 1);
        e[0] = (char)(OLD_PRESENT | (old->has_ttl ? OLD_TTL : 0) | (old->ver ? OLD_VER : 0));
        e[1] = (char)old->type;
        move_be32(e + 2, (uint32_t)old->vlen);
        move_be64(e + 6, old->hash);
        n = 14;
        if (old->ver) move_be64(e + 14, old->ver), n = 22;
    }
    return kbuf_append(b, e, n);
}

size_t rep_get_old(const char *p, size_t n, store_phys *old, int *known) {
    if (!n) return 0;
    unsigned f = (uint8_t)p[0];
    *old = (store_phys){0};
    *known = 0;
    if (f == OLD_UNKNOWN) return 1;
    if (f & ~(unsigned)(OLD_PRESENT | OLD_TTL | OLD_VER)) return 0;
    *known = 1;
    if (!(f & OLD_PRESENT)) return f ? 0 : 1;
    size_t need = (f & OLD_VER) ? 22 : 14;
    if (n < need) return 0;
    old->exists = 1;
    old->has_ttl = (f & OLD_TTL) != 0;
    old->type = (uint8_t)p[1];
    old->vlen = (size_t)move_rd(p + 2, 4);
    old->hash = move_rd(p + 6, 8);
    old->ver = (f & OLD_VER) ? move_rd(p + 14, 8) : 0;
    return need;
}

int rep_sendv(rep *r, const char *peer, int argc, const char **argv, const size_t *len) {
    return r->env.send(r->env.ctx, peer, argc, argv, len);
}

int rep_send_u64s(rep *r, const char *peer, const char *cmd, int n, const uint64_t *v,
                  const char *tail, size_t tlen) {
    if (n < 0 || n > REP_SEND_MAX) return KEEL_EINVAL;
    char num[REP_SEND_MAX][24];
    const char *argv[REP_SEND_MAX + 2];
    size_t len[REP_SEND_MAX + 2];
    int argc = 0;
    argv[argc] = cmd, len[argc++] = strlen(cmd);
    for (int i = 0; i < n; i++)
        argv[argc] = rep_u64(num[i], v[i]), len[argc++] = strlen(num[i]);
    if (tail) argv[argc] = tail, len[argc++] = tlen;
    return rep_sendv(r, peer, argc, argv, len);
}

void rep_ec_push(rep_part *pp, uint64_t epoch, uint64_t start) {
    if (pp->nec && pp->ec[pp->nec - 1].epoch >= epoch) return;
    if (pp->nec == REP_EC_MAX) { /* the oldest goes: a follower that old is copied */
        memmove(pp->ec, pp->ec + 1, (REP_EC_MAX - 1) * sizeof *pp->ec);
        pp->nec--;
    }
    pp->ec[pp->nec].epoch = epoch;
    pp->ec[pp->nec].start = start;
    pp->nec++;
}

uint64_t rep_ec_last(const rep_part *pp) {
    return pp->nec ? pp->ec[pp->nec - 1].epoch : 0;
}

void rep_set_isr(rep_part *pp, const rep_config *c) {
    pp->nisr = 0;
    for (int i = 0; i < c->nisr && i < REP_RF_MAX; i++)
        snprintf(pp->isr[pp->nisr++], KEEL_ID_MAX + 1, "%s", c->isr[i]);
}

int rep_in_isr(const rep_part *pp, const char *id) {
    for (int i = 0; i < pp->nisr; i++)
        if (strcmp(pp->isr[i], id) == 0) return 1;
    return 0;
}

static void meta_name(char *b, size_t cap, unsigned p) {
    snprintf(b, cap, "rep/%u", p);
}

enum { P_SYNCED, P_LAZY, P_TXN, P_LAZY_EXACT /* REP_MUT_RECORD_APART only */ };

/* The record; P_TXN writes it into the open txn t, flagged exact (4): it
 * and the data it describes reach the store in one write. */
static int persist(rep *r, rep_part *pp, int how, store_txn *t) {
    size_t n = 18 + (size_t)pp->nec * 16;
    char b[18 + REP_EC_MAX * 16];
    move_be64(b, pp->plo);
    move_be64(b + 8, pp->phi);
    b[16] = (char)((pp->copying ? 1 : 0) | (how == P_TXN || how == P_LAZY_EXACT ? 4 : 0));
    b[17] = (char)pp->nec;
    for (int i = 0; i < pp->nec; i++) {
        move_be64(b + 18 + 16 * i, pp->ec[i].epoch);
        move_be64(b + 26 + 16 * i, pp->ec[i].start);
    }
    char name[32];
    meta_name(name, sizeof name, pp->p);
    int rc = how == P_TXN      ? store_txn_meta_put(t, name, b, n)
             : how != P_SYNCED ? store_meta_put_lazy(r->env.st, name, b, n)
                               : store_meta_put(r->env.st, name, b, n);
    if (how == P_SYNCED)
        r->st.records_synced++;
    else
        r->st.records_lazy++;
    return rc;
}

int rep_persist(rep *r, rep_part *pp) {
    return persist(r, pp, P_SYNCED, NULL);
}

int rep_persist_lazy(rep *r, rep_part *pp) {
    return persist(r, pp, P_LAZY, NULL);
}

int rep_persist_txn(rep *r, rep_part *pp, store_txn *t) {
    return persist(r, pp, P_TXN, t);
}

int rep_persist_apart(rep *r, rep_part *pp) {
    return persist(r, pp, P_LAZY_EXACT, NULL);
}

/* A record with a redo (flag 2; written by Keel before 2026-12-03, whose
 * follower wrote the record with the batch it was about to apply, then the
 * batch): applies it again, so the log ends exactly at hi. Records are
 * absolute values: applying them twice is applying them once. Kept so that
 * a store such a version left after a crash restores. */
static int restore_redo(rep *r, rep_part *pp, uint64_t bepoch, const char *p, size_t n) {
    store_txn *t = store_txn_begin(r->env.st);
    size_t off = 0;
    while (off < n) {
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t used = move_get_record(p + off, n - off, &slot, &k, &kl, &v, &vl);
        if (!used || slot < pp->lo_slot || slot > pp->hi_slot) {
            store_txn_abort(t);
            return KEEL_ECORRUPT;
        }
        int rc = v ? store_txn_put_raw(t, slot, k, kl, v, vl) : store_txn_del(t, slot, k, kl, NULL);
        if (rc) {
            store_txn_abort(t);
            return rc;
        }
        off += used;
    }
    int rc = store_txn_commit(t);
    if (rc) return rc;
    pp->end = pp->plo = pp->phi;
    if ((rc = rep_persist(r, pp))) return rc; /* writes and syncs the batch first */
    if (r->env.applied) r->env.applied(r->env.ctx, pp->p, pp->phi, bepoch, rep_hash(p, n));
    return 0;
}

rep *rep_new(const rep_env *env, unsigned mutations) {
    if (!env || !env->partitions || 16384 % env->partitions) return NULL;
    rep *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->env = *env;
    r->mutations = mutations;
    r->lease_ms = REP_LEASE_MS;
    r->capture = -1;
    r->nparts = env->partitions;
    r->parts = calloc(r->nparts, sizeof *r->parts);
    r->dirty = calloc(r->nparts, sizeof *r->dirty);
    r->work = calloc(r->nparts, sizeof *r->work);
    if (!r->parts || !r->dirty || !r->work) {
        free(r->parts);
        free(r->dirty);
        free(r->work);
        free(r);
        return NULL;
    }
    unsigned per = 16384u / r->nparts;
    for (unsigned p = 0; p < r->nparts; p++) {
        rep_part *pp = &r->parts[p];
        pp->p = p;
        pp->lo_slot = p * per;
        pp->hi_slot = pp->lo_slot + per - 1;
        pp->capture = -1;
        kbuf_init(&pp->pend);
        kbuf_init(&pp->pend_old);
    }
    return r;
}

void rep_free(rep *r) {
    if (!r) return;
    for (unsigned p = 0; p < r->nparts; p++) {
        rep_part *pp = &r->parts[p];
        if (pp->role == REP_LEADER) leader_stop(r, pp);
        rep_log_clear(pp); /* a follower's tail */
        kbuf_close(&pp->pend);
        kbuf_close(&pp->pend_old);
        free(pp->log);
    }
    if (r->capture >= 0 && store_capture_stop(r->env.st, r->capture))
        keel_log(KEEL_LOG_ERROR, "rep_capture_stop_failed", "shared=1");
    free(r->parts);
    free(r->dirty);
    free(r->work);
    free(r);
}

int rep_stop(rep *r) {
    if (!r) return 0;
    int rc = 0;
    for (unsigned p = 0; p < r->nparts; p++) {
        rep_part *pp = &r->parts[p];
        if (pp->role != REP_LEADER) continue;
        int prc = leader_demote_lazy(r, pp); /* every led partition, one fsync */
        if (!rc) rc = prc;
        pp->role = REP_NONE;
    }
    if (!rc) rc = store_sync_wal(r->env.st, NULL);
    return rc;
}

int rep_pos0_has_data(const rep *r, const rep_part *pp) {
    if (pp->end || pp->nec || pp->copying || pp->plo || pp->phi) return 0;
    for (unsigned slot = pp->lo_slot; slot <= pp->hi_slot; slot++) {
        uint64_t keys, bytes;
        store_slot_stats(r->env.st, slot, &keys, &bytes);
        if (bytes) return 1;
    }
    return 0;
}

int rep_restore(rep *r) {
    for (unsigned p = 0; p < r->nparts; p++) {
        rep_part *pp = &r->parts[p];
        char name[32], *v = NULL;
        size_t n = 0;
        meta_name(name, sizeof name, p);
        int rc = store_meta_get(r->env.st, name, &v, &n);
        if (rc == KEEL_ENOTFOUND) continue; /* never replicated: position 0 */
        if (rc) return rc;
        size_t ecn = n >= 18 ? (size_t)(unsigned char)v[17] : 0, base = 18 + ecn * 16;
        int flags = n >= 18 ? v[16] : 0;
        if (n < 18 || ecn > REP_EC_MAX || n < base || ((flags & 2) ? n < base + 8 : n != base) ||
            (flags & ~7)) {
            free(v);
            keel_log(KEEL_LOG_ERROR, "rep_record_corrupt", "partition=%u len=%zu", p, n);
            return KEEL_ECORRUPT;
        }
        pp->plo = move_rd(v, 8);
        pp->phi = move_rd(v + 8, 8);
        pp->copying = flags & 1;
        pp->nec = (int)ecn;
        for (int i = 0; i < pp->nec; i++) {
            pp->ec[i].epoch = move_rd(v + 18 + 16 * i, 8);
            pp->ec[i].start = move_rd(v + 26 + 16 * i, 8);
        }
        if (pp->copying) { /* a copy was cut short: the data is no log prefix */
            free(v);
            pp->plo = 0;
            pp->phi = UINT64_MAX;
            pp->nec = 0;
            pp->end = 0;
        } else if (flags & 2) { /* a follower's batch, perhaps not applied: again */
            rc = restore_redo(r, pp, move_rd(v + base, 8), v + base + 8, n - base - 8);
            free(v);
            if (rc) return rc;
        } else if (flags & 4) { /* a follower's, written with the batch at hi */
            free(v);
            pp->end = pp->phi;
        } else {
            free(v);
            /* A leader's record {lo, hi = lo + 1}: the data holds every
             * position <= lo, and perhaps hi (the next turn's data precedes
             * its record in the WAL; a power loss may keep the one and not
             * the other). Its batches left before its own fsync, so another
             * replica may hold hi although this node lost it: the log ends
             * at lo, hi stays "perhaps" (phi). As a follower its SUB says
             * both (lo, hi): the leader streams from lo + 1 if it holds hi
             * in the same epoch (re-applying absolute values), else answers
             * DIVERGED; as a leader, leader_start claims (lo, hi] as a
             * position no follower is streamed. docs/replication.md
             * "Power loss". */
            pp->end = (r->mutations & REP_MUT_RESTORE_HI) ? pp->phi : pp->plo;
        }
        pp->epoch = rep_ec_last(pp);
        if (r->env.forget) r->env.forget(r->env.ctx, p, pp->end);
    }
    return 0;
}

static int is_self(const rep *r, const char *id) {
    return id && strcmp(id, r->env.self_id) == 0;
}

/* Runs the kept SUBs of pp's epoch if it leads (rep_early_sub), and drops
 * every SUB kept for that epoch or an older one. */
static int early_subs_run(rep *r, rep_part *pp) {
    int rc = 0;
    for (int i = 0; i < REP_RF_MAX; i++) {
        rep_early_sub *e = &pp->early[i];
        if (!e->from[0] || e->epoch > pp->epoch) continue;
        if (!rc && e->epoch == pp->epoch && pp->role == REP_LEADER) {
            r->st.early_subs++;
            rc = leader_on_sub(r, pp, e->from, e->fe, e->lo, e->hi, e->copy);
        }
        e->from[0] = 0;
    }
    return rc;
}

/* Keeps a SUB of a newer epoch than pp's: the latest per sender, in a free
 * slot or over the oldest (a replica set has at most REP_RF_MAX members). */
static void early_sub_keep(rep_part *pp, const char *from, const uint64_t *n) {
    rep_early_sub *slot = NULL;
    for (int i = 0; i < REP_RF_MAX && !slot; i++)
        if (!strcmp(pp->early[i].from, from)) slot = &pp->early[i];
    for (int i = 0; i < REP_RF_MAX && !slot; i++)
        if (!pp->early[i].from[0]) slot = &pp->early[i];
    if (!slot) {
        slot = &pp->early[0];
        for (int i = 1; i < REP_RF_MAX; i++)
            if (pp->early[i].epoch < slot->epoch) slot = &pp->early[i];
    }
    if (slot->from[0] && !strcmp(slot->from, from) && slot->epoch > n[1]) return; /* older */
    snprintf(slot->from, sizeof slot->from, "%s", from);
    slot->epoch = n[1], slot->fe = n[2], slot->lo = n[3], slot->hi = n[4];
    slot->copy = n[5] != 0;
}

int rep_configure(rep *r, unsigned p, const rep_config *c) {
    if (p >= r->nparts || !c) return KEEL_EINVAL;
    rep_part *pp = &r->parts[p];
    if (c->leader_epoch < pp->epoch) return 0;
    if (c->leader_epoch == pp->epoch && c->part_epoch <= pp->part_epoch && pp->role != REP_NONE)
        return 0;
    int role = REP_NONE;
    if (is_self(r, c->leader))
        role = REP_LEADER;
    else
        for (int i = 0; i < c->nreplicas; i++)
            if (is_self(r, c->replicas[i])) role = REP_FOLLOWER;
    int same = c->leader_epoch == pp->epoch && role == pp->role &&
               strcmp(pp->leader, c->leader ? c->leader : "") == 0;
    pp->part_epoch = c->part_epoch;
    pp->min_insync = c->min_insync;
    rep_set_isr(pp, c);
    if (same) {
        if (role == REP_LEADER) leader_update(r, pp, c);
        return 0;
    }
    if (pp->role == REP_LEADER) {
        int rc = leader_demote_lazy(r, pp); /* synced by rep_configure_sync */
        if (rc) return rc;
        r->configure_unsynced = 1;
    }
    if (role == REP_NONE) rep_log_clear(pp); /* no replica: its data may go (cleanup) */
    pp->role = role;
    pp->epoch = c->leader_epoch;
    snprintf(pp->leader, sizeof pp->leader, "%s", c->leader ? c->leader : "");
    pp->fstate = F_IDLE;
    pp->resigned = 0; /* a new leader epoch: whoever leads now has not resigned */
    if (role == REP_LEADER) {
        int rc = leader_start(r, pp, c);
        return rc ? rc : early_subs_run(r, pp);
    }
    early_subs_run(r, pp); /* not leading this epoch: only drops them */
    if (role == REP_FOLLOWER) follower_start(r, pp);
    return 0;
}

int rep_configure_sync(rep *r) {
    if (!r->configure_unsynced) return 0;
    int rc = store_sync_wal(r->env.st, NULL);
    if (!rc) r->configure_unsynced = 0;
    return rc;
}

/* Not the leader: REP_EHANDOFF while the leader's resignation holds. */
static int not_leader(const rep *r, unsigned p) {
    if (p >= r->nparts) return REP_ENOTLEADER;
    const rep_part *pp = &r->parts[p];
    return pp->role == REP_FOLLOWER && pp->resigned ? REP_EHANDOFF : REP_ENOTLEADER;
}

int rep_write_check(rep *r, unsigned p) {
    if (p >= r->nparts || r->parts[p].role != REP_LEADER) return not_leader(r, p);
    return leader_can_write(r, &r->parts[p]);
}

int rep_read_check(rep *r, unsigned p) {
    if (p >= r->nparts || r->parts[p].role != REP_LEADER) return not_leader(r, p);
    return leader_can_read(r, &r->parts[p]);
}

int rep_resign_announce(rep *r, unsigned p) {
    if (p >= r->nparts || r->parts[p].role != REP_LEADER) return KEEL_EINVAL;
    leader_announce_resign(r, &r->parts[p]);
    return 0;
}

void rep_lease(rep *r, unsigned p, uint64_t leader_epoch, uint64_t sent_us) {
    if (p >= r->nparts) return;
    rep_part *pp = &r->parts[p];
    if (pp->role != REP_LEADER || pp->epoch != leader_epoch) return;
    uint64_t until = sent_us + r->lease_ms * 1000ull;
    if (until > pp->lease_until) pp->lease_until = until;
}

void rep_set_lease_ms(rep *r, unsigned ms) {
    r->lease_ms = ms ? ms : REP_LEASE_MS;
}

static int cmp_unsigned(const void *a, const void *b) {
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

int rep_turn_end(rep *r) {
    int src = rep_configure_sync(r); /* a caller that did not: nothing acts first */
    if (src) return src;
    /* The listed partitions, in partition order as a full scan would visit
     * them; listed again by on_change if records arrive meanwhile. */
    while (r->ndirty) {
        unsigned n = r->ndirty;
        memcpy(r->work, r->dirty, n * sizeof *r->work);
        r->ndirty = 0;
        qsort(r->work, n, sizeof *r->work, cmp_unsigned);
        for (unsigned i = 0; i < n; i++)
            r->parts[r->work[i]].in_dirty = 0;
        for (unsigned i = 0; i < n; i++) {
            rep_part *pp = &r->parts[r->work[i]];
            if (pp->role != REP_LEADER || !pp->pend.len) continue;
            int rc = leader_turn_end(r, pp);
            if (rc) { /* this one and the rest stay listed for the next call */
                for (unsigned j = i; j < n; j++)
                    rep_mark_dirty(r, &r->parts[r->work[j]]);
                return rc;
            }
        }
    }
    return 0;
}

void rep_mark_dirty(rep *r, rep_part *pp) {
    if (pp->in_dirty) return;
    pp->in_dirty = 1;
    r->dirty[r->ndirty++] = pp->p;
}

uint64_t rep_end(const rep *r, unsigned p) {
    return p < r->nparts ? r->parts[p].end : 0;
}
uint64_t rep_committed(const rep *r, unsigned p) {
    return p < r->nparts ? r->parts[p].committed : 0;
}
uint64_t rep_epoch(const rep *r, unsigned p) {
    return p < r->nparts ? r->parts[p].epoch : 0;
}
uint64_t rep_peer_acked(const rep *r, unsigned p, const char *peer) {
    if (p >= r->nparts || r->parts[p].role != REP_LEADER) return 0;
    const rep_part *pp = &r->parts[p];
    for (int i = 0; i < pp->npeers; i++)
        if (strcmp(pp->peers[i].id, peer) == 0)
            return pp->peers[i].streaming ? pp->peers[i].acked : 0;
    return 0;
}

int rep_role(const rep *r, unsigned p) {
    return p < r->nparts ? r->parts[p].role : REP_NONE;
}

/* ---- Messages ---------------------------------------------------------------- */

typedef struct msg {
    rep *r;
    rep_part *pp;
    const char *from;
    int argc;
    const char **argv;
    const size_t *len;
    uint64_t n[6]; /* argv[1..] parsed as integers where the table says so */
} msg;

static int m_sub(msg *m) {
    if (m->pp->role != REP_LEADER) return 0; /* a stale follower; the map will tell it */
    return leader_on_sub(m->r, m->pp, m->from, m->n[2], m->n[3], m->n[4], m->n[5] != 0);
}
static int m_ack(msg *m) {
    if (m->pp->role == REP_LEADER) leader_on_ack(m->r, m->pp, m->from, m->n[2]);
    return 0;
}
/* Leader -> follower messages count only from the leader this node follows. */
static int from_leader(msg *m) {
    return m->pp->role == REP_FOLLOWER && strcmp(m->pp->leader, m->from) == 0;
}
static int m_stream(msg *m) {
    return from_leader(m) ? follower_on_stream(m->r, m->pp, m->n[2]) : 0;
}
static int m_diverged(msg *m) {
    return from_leader(m) ? follower_on_diverged(m->r, m->pp, m->n[2]) : 0;
}
static int m_snap(msg *m) {
    if (!from_leader(m)) return 0;
    return follower_on_snap(m->r, m->pp, m->n[2], m->n[3] != 0, m->n[4] != 0, m->argv[6], m->len[6],
                            m->argv[7], m->len[7]);
}
static int m_resigned(msg *m) {
    return from_leader(m) ? follower_on_resigned(m->r, m->pp, m->n[2]) : 0;
}
static int m_append(msg *m) {
    if (!from_leader(m)) return 0;
    return follower_on_append(m->r, m->pp, m->n[2], m->n[3], m->argv[5], m->len[5],
                              m->argc > 6 ? m->argv[6] : NULL, m->argc > 6 ? m->len[6] : 0);
}

/* name, argument count, optional trailing arguments, how many leading
 * arguments (after the name) are integers, handler. Every message carries p
 * and the leader epoch first. */
static const struct {
    const char *name;
    int argc, opt, nints;
    int (*fn)(msg *m);
} msgs[] = {
    {"KEEL.REP.SUB", 7, 0, 6, m_sub},           {"KEEL.REP.ACK", 4, 0, 3, m_ack},
    {"KEEL.REP.STREAM", 4, 0, 3, m_stream},     {"KEEL.REP.DIVERGED", 4, 0, 3, m_diverged},
    {"KEEL.REP.SNAP", 8, 0, 5, m_snap},         {"KEEL.REP.APPEND", 6, 1, 4, m_append},
    {"KEEL.REP.RESIGNED", 4, 0, 3, m_resigned},
};

int rep_msg_downgrade(int argc, const char **argv, const size_t *len) {
    static const char append[] = "KEEL.REP.APPEND";
    if (argc == 7 && len[0] == sizeof append - 1 && memcmp(argv[0], append, len[0]) == 0) return 6;
    return argc;
}

int rep_msg_early(int argc, const char **argv, const size_t *len) {
    static const char *const names[] = {"KEEL.REP.APPEND", "KEEL.REP.STREAM", "KEEL.REP.SNAP",
                                        "KEEL.REP.DIVERGED", "KEEL.REP.RESIGNED"};
    if (argc < 1) return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (len[0] == strlen(names[i]) && memcmp(argv[0], names[i], len[0]) == 0) return 1;
    return 0;
}

int rep_message(rep *r, const char *from, int argc, const char **argv, const size_t *len) {
    if (argc < 1 || !from) return KEEL_EPROTO;
    int src = rep_configure_sync(r);
    if (src) return src;
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        if (strlen(msgs[i].name) != len[0] || memcmp(msgs[i].name, argv[0], len[0])) continue;
        if (argc < msgs[i].argc || argc > msgs[i].argc + msgs[i].opt) return KEEL_EPROTO;
        msg m = {.r = r, .from = from, .argc = argc, .argv = argv, .len = len};
        for (int k = 1; k <= msgs[i].nints; k++)
            if (keel_parse_u64(argv[k], len[k], &m.n[k - 1])) return KEEL_EPROTO;
        if (m.n[0] >= r->nparts) return KEEL_EPROTO;
        m.pp = &r->parts[m.n[0]];
        /* n[1] is the sender's leader epoch: only the current one counts,
         * but a SUB of the next one is kept for it (rep_early_sub). */
        if (msgs[i].fn == m_sub && m.n[1] > m.pp->epoch && strlen(from) <= KEEL_ID_MAX)
            early_sub_keep(m.pp, from, m.n);
        if (m.n[1] != m.pp->epoch) return 0;
        return msgs[i].fn(&m);
    }
    return KEEL_EPROTO;
}

void rep_peer_down(rep *r, const char *peer) {
    for (unsigned p = 0; p < r->nparts; p++) {
        rep_part *pp = &r->parts[p];
        if (pp->role == REP_LEADER)
            leader_peer_down(r, pp, peer);
        else if (pp->role == REP_FOLLOWER && strcmp(pp->leader, peer) == 0)
            follower_peer_down(r, pp);
    }
}

void rep_set_olds_absent(rep *r, int on) {
    r->no_absent_olds = !on;
}

int rep_sweep_skip(const rep *r, unsigned slot) {
    unsigned p = slot / (16384u / r->nparts);
    if (p >= r->nparts) return 0;
    const rep_part *pp = &r->parts[p];
    if (pp->role == REP_LEADER) return pp->capture < 0;
    if (pp->role == REP_FOLLOWER) return 1;
    return pp->end || pp->plo || pp->phi || pp->nec || pp->copying;
}

int rep_tick(rep *r) {
    int src = rep_configure_sync(r);
    if (src) return src;
    uint64_t now = rep_now(r); /* one reading for the whole scan */
    for (unsigned p = 0; p < r->nparts; p++) {
        rep_part *pp = &r->parts[p];
        int rc = pp->role == REP_LEADER     ? leader_tick(r, pp, now)
                 : pp->role == REP_FOLLOWER ? follower_tick(r, pp, now)
                                            : 0;
        if (rc) return rc;
    }
    return 0;
}

void rep_get_stats(const rep *r, rep_stats *out) {
    *out = r->st;
}
