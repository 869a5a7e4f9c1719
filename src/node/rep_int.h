/* rep_int.h - the replication engines' shared state; private to rep.c (the
 * object, configuration, persistence, dispatch), rep_leader.c and
 * rep_follower.c. Everything outside reaches it through rep_engine.h.
 *
 * The "rep/<p>" metadata record (big-endian):
 *   [lo u64][hi u64][flags u8][n u8] then n x [epoch u64][start u64]
 *   flags: 1 a full copy is under way; 4 exact: written in one store write
 *   with the batch at hi (a follower's), so the data ends at hi; 2 the redo
 *   follows: [batch epoch u64][the records of the batch at hi] (written by
 *   a follower before 2026-12-03 ahead of the batch; a restart applies it
 *   again; only read now). No flag: a leader's {lo, hi = lo + 1}.
 */
#ifndef KEEL_REP_INT_H
#define KEEL_REP_INT_H

#include "core/buf.h"
#include "core/id.h"
#include "node/rep_engine.h"

#define REP_EC_MAX 32 /* leader-epoch cache entries kept; older ones are dropped */

typedef struct rep_ec {
    uint64_t epoch, start; /* the first position written in that leader epoch */
} rep_ec;

/* data[0..rlen): the records; data[rlen..len): their old states (olds in
 * rep_engine.h; none when rlen == len). */
typedef struct rep_batch {
    uint64_t pos, epoch;
    char *data;
    size_t len, rlen;
} rep_batch;

/* The leader's view of one follower. */
typedef struct rep_peer {
    char id[KEEL_ID_MAX + 1];
    int streaming;        /* a SUB was answered: batches from next go out */
    uint64_t acked;       /* durable position it acknowledged */
    uint64_t next;        /* next position to send */
    uint64_t caught_us;   /* last time acked reached the leader's end */
    store_snapshot *snap; /* a full copy being sent (NULL: none) */
    char *cursor;
    size_t curlen;
    uint64_t snap_pos;
    int snap_first;
    int copy_wanted;        /* a copy is due but held (REP_COPY_MAX, backoff) */
    unsigned copy_restarts; /* copies started since the follower last acknowledged one */
    uint64_t copy_started_us;
} rep_peer;

enum { F_IDLE, F_SUBSCRIBING, F_STREAMING, F_COPYING };

/* A SUB stamped with a leader epoch newer than this node's: its sender
 * installed the map first. The latest per sender is kept and run when this
 * node leads that epoch (rep_configure), as if it had arrived then, rather
 * than at the sender's next retry (REP_SUB_RETRY_MS). */
typedef struct rep_early_sub {
    char from[KEEL_ID_MAX + 1]; /* "" unused */
    uint64_t epoch, fe, lo, hi;
    int copy;
} rep_early_sub;

typedef struct rep_part {
    unsigned p, lo_slot, hi_slot;
    int role;
    int fstate;                 /* follower state; beside role, so rep_tick's scan of every
                                 * partition touches one cache line of each */
    uint64_t epoch, part_epoch; /* from the map */
    char leader[KEEL_ID_MAX + 1];
    /* The log, both roles. end: the last position held (exact while the
     * process lives); plo/phi: the persisted record's lo and hi. */
    uint64_t end, plo, phi;
    int copying; /* persisted: a full copy is under way; the data is not a log prefix */
    rep_ec ec[REP_EC_MAX];
    int nec;
    /* Leader. */
    int capture;   /* >= 0: this partition's writes are captured (the shared capture) */
    kbuf pend;     /* this turn's records */
    kbuf pend_old; /* and their old states (olds in rep_engine.h) */
    int in_dirty;  /* listed in rep.dirty (pend got records since the last turn end) */
    /* Retained batches, positions log[0].pos.. end, no gap. A leader's for
     * catch-up; a follower's: the newest it applied by APPEND (its tail,
     * REP_TAIL_KEEP), which leader_start keeps when it ends at end. */
    rep_batch *log;
    size_t nlog, caplog;
    rep_peer peers[REP_RF_MAX];
    int npeers;
    char isr[REP_RF_MAX][KEEL_ID_MAX + 1]; /* both roles: the map's ISR */
    int nisr, min_insync;
    char adding[KEEL_ID_MAX + 1]; /* an expansion proposed at part epoch adding_at */
    uint64_t adding_at, proposed_us;
    uint64_t lease_until;
    uint64_t committed;
    /* Follower (and fstate, above). */
    uint64_t sub_us; /* when the last SUB went */
    int want_copy;
    /* The data holds exactly position end, as the leader's did: the next
     * batch's olds are this node's too. 0 from a restart, a role change or
     * a copy until a batch is applied by reading (rep_engine.h). */
    int exact;
    int resigned; /* the leader announced its resignation in this epoch (REP_EHANDOFF) */
    rep_early_sub early[REP_RF_MAX];
} rep_part;

struct rep {
    rep_env env;
    unsigned mutations;
    /* rep_configure wrote records without syncing them (leader_start,
     * leader_demote): rep_configure_sync, or the next turn end, tick or
     * message, syncs them first. */
    int configure_unsynced;
    uint64_t lease_ms; /* rep_set_lease_ms; REP_LEASE_MS until set */
    /* One change capture over every slot, shared by the partitions led (the
     * store has 8 capture handles; a node may lead hundreds of partitions).
     * Started at the first leader_start; -1 until then. */
    int capture;
    unsigned nparts;
    rep_part *parts;
    /* The partitions whose pend got records since the last rep_turn_end
     * (on_change lists them), so that a turn end visits those instead of
     * every partition (the full scan, twice per loop turn, was 1.5 % of a
     * node's CPU at 1,024 partitions). work: rep_turn_end's copy. */
    unsigned *dirty, *work, ndirty;
    uint64_t olds_seen; /* olds taken, for the 1 in REP_OLD_VERIFY check */
    int no_absent_olds; /* rep_set_olds_absent(0) */
    rep_stats st;       /* st.copies_active: peers with a snapshot, over all parts */
};

static inline uint64_t rep_now(const rep *r) {
    return r->env.now_us(r->env.ctx);
}

/* rep.c */
/* Lists pp for the next rep_turn_end (once: in_dirty). */
void rep_mark_dirty(rep *r, rep_part *pp);
int rep_persist(rep *r, rep_part *pp); /* writes "rep/<p>": plo/phi/copying/ec, synced */
/* The same, unsynced (store_meta_put_lazy): in the WAL after every write
 * before it and before every later one, durable with the next fsync
 * ("Write path speed" in docs/replication.md). A leader's per-turn record. */
int rep_persist_lazy(rep *r, rep_part *pp);
/* A follower's record {lo, hi = the batch's position}, flagged exact, in
 * the txn t that applies the batch (store_txn_meta_put): one store write
 * holds both, so after any crash the data ends exactly where the record
 * says, and the turn's own fsync makes both durable. */
int rep_persist_txn(rep *r, rep_part *pp, store_txn *t);
/* REP_MUT_RECORD_APART only: that record by a lazy write of its own. */
int rep_persist_apart(rep *r, rep_part *pp);
void rep_ec_push(rep_part *pp, uint64_t epoch, uint64_t start);
uint64_t rep_ec_last(const rep_part *pp); /* last epoch in the cache; 0 if none */
uint64_t rep_hash(const char *p, size_t n);
/* One record's old state in olds' encoding (rep_engine.h; NULL: unknown).
 * 0 or -1 (out of memory). */
int rep_put_old(kbuf *b, const store_phys *old);
/* Parses one old state at p[0..n): its size, or 0 if malformed. *known 0:
 * the leader did not know it (the follower reads its own). */
size_t rep_get_old(const char *p, size_t n, store_phys *old, int *known);
void rep_set_isr(rep_part *pp, const rep_config *c);
int rep_in_isr(const rep_part *pp, const char *id);
int rep_sendv(rep *r, const char *peer, int argc, const char **argv, const size_t *len);
/* rep_sendv of "cmd v[0] .. v[n-1] [tail]": n (<= REP_SEND_MAX) numbers in
 * decimal, then tail (tlen bytes, binary) unless it is NULL. Returns what
 * env.send returns, or KEEL_EINVAL for n out of range. */
#define REP_SEND_MAX 8
int rep_send_u64s(rep *r, const char *peer, const char *cmd, int n, const uint64_t *v,
                  const char *tail, size_t tlen);
const char *rep_u64(char *buf, uint64_t v); /* buf of 24 */

/* rep_leader.c */
int leader_start(rep *r, rep_part *pp, const rep_config *c);
/* 1 if pp was never replicated (position 0, no record) but its slots hold
 * data: written before the partition had replicas (at RF 1, or loaded
 * beside replication). Position 0 then is not the empty state, and no
 * follower may be streamed from it: leader_start claims it as position 1,
 * not retained (every follower at 0 is copied), and a follower holding such
 * data asks for a copy (its data is not the leader's history). */
int rep_pos0_has_data(const rep *r, const rep_part *pp);
/* Frees pp's retained batches (either role). */
void rep_log_clear(rep_part *pp);
/* Appends a batch to pp's retained batches (a copy of its records and
 * their olds), which must end at pos - 1 or be empty; KEEL_ENOMEM leaves
 * them as they were. */
int rep_log_push(rep_part *pp, uint64_t pos, uint64_t epoch, const char *rec, size_t rlen,
                 const char *old, size_t olen);
void leader_stop(rep *r, rep_part *pp);
/* Stop leading pp (leader_stop) and record its exact end: {end, end} when
 * the turn so far holds none of its writes, else {end, end + 1} (perhaps).
 * The record is left in the WAL buffer for the caller's sync (rep_stop, and
 * rep_configure_sync: one fsync for every partition). */
int leader_demote_lazy(rep *r, rep_part *pp);
void leader_update(rep *r, rep_part *pp, const rep_config *c); /* same epoch, new ISR */
int leader_turn_end(rep *r, rep_part *pp);
int leader_on_sub(rep *r, rep_part *pp, const char *from, uint64_t last_epoch, uint64_t lo,
                  uint64_t hi, int copy);
void leader_on_ack(rep *r, rep_part *pp, const char *from, uint64_t pos);
void leader_peer_down(rep *r, rep_part *pp, const char *peer);
int leader_tick(rep *r, rep_part *pp, uint64_t now);
int leader_can_write(rep *r, rep_part *pp);
int leader_can_read(rep *r, rep_part *pp);
void leader_announce_resign(rep *r, rep_part *pp);

/* rep_follower.c */
void follower_start(rep *r, rep_part *pp);
int follower_on_stream(rep *r, rep_part *pp, uint64_t from);
int follower_on_diverged(rep *r, rep_part *pp, uint64_t end);
int follower_on_snap(rep *r, rep_part *pp, uint64_t pos, int first, int last, const char *cache,
                     size_t clen, const char *rec, size_t rlen);
/* old/olen: the batch's olds (rep_engine.h), NULL when it came without. */
int follower_on_append(rep *r, rep_part *pp, uint64_t bepoch, uint64_t pos, const char *rec,
                       size_t rlen, const char *old, size_t olen);
int follower_on_resigned(rep *r, rep_part *pp, uint64_t end);
void follower_peer_down(rep *r, rep_part *pp);
int follower_tick(rep *r, rep_part *pp, uint64_t now);

#endif
