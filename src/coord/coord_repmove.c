/* coord_repmove.c - the replica-move executor; see coord_repmove.h.
 *
 * One rm per replica move. drive() reads the partition, asks the step
 * table (coord_repstep.c) what is due and starts it; a write's completion or
 * the RESIGN reply clears `busy` and drives the move again at once, so a
 * transfer's RESIGN -> leader change -> removal follow each other without
 * waiting for a tick. A 50 ms timer catches the rest (the ISR expansion
 * committed by coord_isr.c, links that came back, timeouts, hand-off
 * deadlines). Nothing here waits on the map store (issue 12): every write
 * is submitted and completes on the loop.
 */
#include "coord/coord_repmove.h"
#include "coord/coord_elect.h"
#include "coord/coord_int.h"
#include "coord/coord_links.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "planner/planner.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 50
#define RESIGN_RETRY_MS 200 /* after a refused or lost RESIGN */
#define RESIGN_BATCH_MAX 32 /* partitions per KEEL.REP.RESIGN (a node holds 64 at once) */
#define RESIGN_QUEUE_MAX 1024
#define WRITE_RETRY_MS 200 /* after a write that failed (not a CAS miss) */
#define KEEP_FINISHED 64   /* finished moves kept for `keel moves` */
#define NUDGES_MAX 32      /* nudges waiting for a link at once */
#define NUDGE_WAIT_MS 2000 /* a waiting nudge is dropped after this (a heartbeat came) */

typedef struct rm {
    rmove mv;
    rmove_step step;
    int finished; /* DONE or ABORTED */
    int busy;     /* a write or a RESIGN in flight */
    int aborting; /* the abort's write is in flight */
    int64_t retry_ms;
    int64_t end_ms;          /* coord_now() at the end */
    int64_t created_wall_ms; /* for people */
    uint64_t resign_us;      /* keel_mono_us() when the first RESIGN of this leader epoch went */
    double transfer_ms;      /* RESIGN sent -> leader change committed; < 0 none */
    uint64_t total_bytes;    /* the partition's bytes when planned, if a replica is added */
    char reason[64];
    char abort_reason[128];
    void (*on_end)(coord *co, uint64_t id, const char *abort_reason, double transfer_ms, void *arg);
    void *on_end_arg;
    struct rm *next;
} rm;

typedef struct handoff {
    char node[KEEL_ID_MAX + 1];
    int64_t deadline_ms;
    uint64_t *ids;
    size_t n;
    unsigned moved;          /* its transfers that committed (handoff_move_end) */
    coord_handoff_done done; /* NULL: polled (coord_repmove_handoff_status) */
    void *arg;
    /* A polled hand-off once ended: its result, kept for the node's next
     * poll until HANDOFF_KEEP_MS after the end. */
    int ended;
    unsigned left;
    int64_t ended_ms;
    struct handoff *next;
} handoff;

#define HANDOFF_KEEP_MS 60000

struct resign_tag;

typedef struct coord_repmoves_state {
    coord *co;
    int stopping;
    int handles; /* open libuv handles; the state is freed when the last closes */
    coord_links links;
    uv_timer_t timer;
    /* RESIGNs asked for in this loop iteration, sent at its end by rflush
     * (a 0 ms timer) as one KEEL.REP.RESIGN per leader of up to
     * RESIGN_BATCH_MAX partitions: a hand-off's transfers are then held on
     * the node together, not one after another on the one link. */
    uv_timer_t rflush;
    struct resign_tag *rq[RESIGN_QUEUE_MAX];
    size_t nrq;
    rm *head;
    uint64_t next_id;
    handoff *handoffs;
    coord_repmove_counts counts;
    /* Nudges that found no ready link: sent when it is (on_link_ready, the
     * tick) until their deadline, so a leader change reaches every replica
     * at once even over a link dialled just now. */
    struct pending_nudge {
        char id[KEEL_ID_MAX + 1];
        int64_t until_ms;
    } nudges[NUDGES_MAX];
} rms;

static rms *state_of(coord *co) {
    return co->repmv;
}

static rm *find(rms *x, uint64_t id) {
    for (rm *m = x->head; m; m = m->next)
        if (m->mv.id == id) return m;
    return NULL;
}

static int node_up(void *arg, const char *id) {
    rms *x = arg;
    mapstore_node n;
    return mapstore_node_get(x->co->ms, id, &n) == 0 && coord_node_usable(&n);
}

/* A promotion copies nothing: RESIGN is bounded by 5 s on the node, so a
 * transfer that has not committed in 30 s will not (and `keel promote`
 * waits for the answer). */
#define PROMOTE_TIMEOUT_MS 30000

static int64_t timeout_ms(rms *x, const rm *m) {
    int64_t t = coord_setting_ll(x->co, "replica_move_timeout_ms");
    return m->mv.kind == RMOVE_PROMOTE && t > PROMOTE_TIMEOUT_MS ? PROMOTE_TIMEOUT_MS : t;
}

/* Drops the oldest finished moves beyond KEEP_FINISHED. */
static void trim(rms *x) {
    size_t kept = 0;
    for (rm **pp = &x->head; *pp;) {
        rm *m = *pp;
        if (m->finished && ++kept > KEEP_FINISHED) {
            *pp = m->next;
            free(m);
        } else {
            pp = &m->next;
        }
    }
}

static void finish(rms *x, rm *m, const char *abort_reason) {
    if (m->finished) return;
    m->finished = 1;
    m->busy = 0;
    m->end_ms = coord_now(x->co);
    m->step = abort_reason ? RSTEP_ABORTED : RSTEP_DONE;
    if (abort_reason) snprintf(m->abort_reason, sizeof m->abort_reason, "%s", abort_reason);
    if (abort_reason)
        x->counts.aborted++;
    else
        x->counts.done++;
    keel_log(abort_reason ? KEEL_LOG_WARN : KEEL_LOG_INFO,
             abort_reason ? "replica_move_aborted" : "replica_move_done",
             "id=%llu type=%s partition=%u add=%s remove=%s lead_to=%s ms=%lld "
             "transfer_ms=%.1f reason=\"%s\"",
             (unsigned long long)m->mv.id, rmove_kind_name(m->mv.kind), m->mv.partition,
             m->mv.add[0] ? m->mv.add : "-", m->mv.remove[0] ? m->mv.remove : "-",
             m->mv.lead_to[0] ? m->mv.lead_to : "-", (long long)(m->end_ms - m->mv.started_ms),
             m->transfer_ms, abort_reason ? abort_reason : m->reason);
    if (m->on_end) m->on_end(x->co, m->mv.id, abort_reason, m->transfer_ms, m->on_end_arg);
    m->on_end = NULL;
}

/* ---- Writes ------------------------------------------------------------- */

typedef enum { W_REPLICAS = 0, W_LEADER, W_ABORT } wkind;

typedef struct rm_wait {
    rms *x;
    uint64_t id;
    wkind kind;
    char why[128]; /* W_ABORT: the reason */
} rm_wait;

static void drive(rms *x, rm *m);
static void nudge_replicas(rms *x, const mapstore_partition *p);

static void on_written(void *arg, const mapstore_result *r) {
    rm_wait *w = arg;
    rms *x = w->x;
    rm *m = x->stopping ? NULL : find(x, w->id);
    if (m) {
        m->busy = 0;
        if (w->kind == W_ABORT) {
            if (r->rc)
                keel_log(KEEL_LOG_WARN, "replica_move_abort_write_failed", "id=%llu error=\"%s\"",
                         (unsigned long long)w->id, r->errmsg);
            finish(x, m, w->why); /* the planner's repair removes what is left over */
        } else if (r->rc == KEEL_EAGAIN) {
            /* the partition changed under us: decide again on the new record */
        } else if (r->rc) {
            keel_log(KEEL_LOG_WARN, "replica_move_write_failed", "id=%llu step=%s error=\"%s\"",
                     (unsigned long long)w->id, rmove_step_name(m->step), r->errmsg);
            m->retry_ms = coord_now(x->co) + WRITE_RETRY_MS;
        } else if (w->kind == W_LEADER) {
            m->transfer_ms = m->resign_us ? (double)(keel_mono_us() - m->resign_us) / 1000.0 : -1;
            x->counts.transfers++;
            x->counts.last_transfer_ms = m->transfer_ms;
            if (m->transfer_ms > x->counts.max_transfer_ms)
                x->counts.max_transfer_ms = m->transfer_ms;
            keel_log(KEEL_LOG_INFO, "leadership_transferred",
                     "id=%llu partition=%u leader=%s leader_epoch=%llu ms=%.1f",
                     (unsigned long long)w->id, m->mv.partition, r->part.replicas[0],
                     (unsigned long long)r->part.leader_epoch, m->transfer_ms);
            nudge_replicas(x, &r->part);
        }
        if (!m->finished && !x->stopping) drive(x, m);
    }
    free(w);
}

static int submit(rms *x, rm *m, const mapstore_write *mw, wkind kind, const char *why) {
    rm_wait *w = calloc(1, sizeof *w);
    if (!w) return KEEL_ENOMEM;
    *w = (rm_wait){.x = x, .id = m->mv.id, .kind = kind};
    if (why) snprintf(w->why, sizeof w->why, "%s", why);
    int rc = mapstore_submit(x->co->ms, mw, on_written, w);
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "replica_move_write_refused", "id=%llu error=\"%s\"",
                 (unsigned long long)m->mv.id, mapstore_errmsg(x->co->ms));
        free(w);
        m->retry_ms = coord_now(x->co) + WRITE_RETRY_MS;
        return rc;
    }
    m->busy = 1;
    return 0;
}

static void submit_replicas(rms *x, rm *m, const rmove_action *a, wkind kind, const char *why) {
    const char *ids[KEEL_RF_MAX];
    for (unsigned i = 0; i < a->nids; i++)
        ids[i] = a->ids[i];
    mapstore_write w;
    mapstore_w_partition_set_replicas(&w, m->mv.partition, a->expected_pe, ids, a->nids);
    if (submit(x, m, &w, kind, why) && kind == W_ABORT) finish(x, m, why);
}

static void submit_leader(rms *x, rm *m, const rmove_action *a) {
    mapstore_write w;
    mapstore_w_partition_set_leader(&w, m->mv.partition, a->expected_pe, a->target, 1);
    (void)submit(x, m, &w, W_LEADER, NULL); /* refused: retried after WRITE_RETRY_MS */
}

/* ---- Nudges ----------------------------------------------------------------- */

static void on_nudge(void *arg, void *tag, redisReply *r) {
    (void)arg, (void)tag, (void)r; /* best effort: the next heartbeat brings the map anyway */
}

static int nudge_send(rms *x, const char *id) {
    coord_link *l = coord_links_ready_for(&x->links, id, coord_now(x->co));
    if (!l) return -1; /* dialling (coord_links_ready_for started it) */
    const char *argv[] = {"KEEL.REP.NUDGE"};
    (void)peerlink_send(l->pl, on_nudge, NULL, 1, argv, NULL);
    return 0;
}

static void nudge_later(rms *x, const char *id) {
    int64_t now = coord_now(x->co);
    struct pending_nudge *free_slot = NULL;
    for (int i = 0; i < NUDGES_MAX; i++) {
        struct pending_nudge *n = &x->nudges[i];
        if (n->id[0] && !strcmp(n->id, id)) free_slot = n; /* one per node is enough */
        if (!free_slot && (!n->id[0] || n->until_ms < now)) free_slot = n;
    }
    if (!free_slot) return; /* best effort: its next heartbeat brings the map */
    snprintf(free_slot->id, sizeof free_slot->id, "%s", id);
    free_slot->until_ms = now + NUDGE_WAIT_MS;
}

/* Sends the waiting nudges whose link is ready; drops the expired ones. */
static void nudges_flush(rms *x) {
    int64_t now = coord_now(x->co);
    for (int i = 0; i < NUDGES_MAX; i++) {
        struct pending_nudge *n = &x->nudges[i];
        if (n->id[0] && (n->until_ms < now || nudge_send(x, n->id) == 0)) n->id[0] = 0;
    }
}

static void on_link_ready(void *arg, coord_link *l) {
    (void)l;
    nudges_flush(arg);
}

/* After a leader change commits (a transfer here, a failover in
 * coord_failover.c): every replica heartbeats at once, so the new leader
 * gets the map and its lease, and the old one the map that sends its
 * clients on, without waiting for their next heartbeat. A replica whose link
 * is not ready is nudged as soon as it is. */
static void nudge_replicas(rms *x, const mapstore_partition *p) {
    for (unsigned i = 0; i < p->nreplicas; i++)
        if (nudge_send(x, p->replicas[i])) nudge_later(x, p->replicas[i]);
}

void coord_repmoves_nudge(coord *co, const mapstore_partition *p) {
    rms *x = state_of(co);
    if (x && !x->stopping) nudge_replicas(x, p);
}

/* ---- RESIGN --------------------------------------------------------------- */

typedef struct resign_tag {
    rms *x;
    uint64_t id, le;
    char target[KEEL_ID_MAX + 1];
    char leader[KEEL_ID_MAX + 1];
    unsigned p;
} resign_tag;

/* *2 :end-position :leader_epoch, the epoch the one we asked about. */
static int resign_ok(const redisReply *r, uint64_t le) {
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
           r->element[0]->type == REDIS_REPLY_INTEGER &&
           r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer >= 0 &&
           (uint64_t)r->element[1]->integer == le;
}

/* One partition's answer (r NULL: the link went down); frees t. */
static void resign_done(resign_tag *t, const redisReply *r) {
    rms *x = t->x;
    rm *m = x->stopping ? NULL : find(x, t->id);
    if (m && !m->finished) {
        m->busy = 0;
        if (resign_ok(r, t->le)) {
            m->mv.resigned_le = t->le;
            snprintf(m->mv.resign_to, sizeof m->mv.resign_to, "%s", t->target);
            drive(x, m); /* straight on to the leader change */
        } else {
            keel_log(KEEL_LOG_WARN, "resign_refused", "id=%llu partition=%u error=\"%s\"",
                     (unsigned long long)t->id, m->mv.partition,
                     !r                             ? "link down"
                     : r->type == REDIS_REPLY_ERROR ? r->str
                                                    : "bad reply");
            m->retry_ms = coord_now(x->co) + RESIGN_RETRY_MS;
        }
    }
    free(t);
}

typedef struct resign_batch {
    size_t n;
    resign_tag *t[RESIGN_BATCH_MAX];
} resign_batch;

/* One answer for one partition, an array of n answers for n > 1; anything
 * else (an error for the whole request, the link down) is every one's. */
static void on_resign(void *arg, void *tag, redisReply *r) {
    (void)arg;
    resign_batch *b = tag;
    int each = b->n > 1 && r && r->type == REDIS_REPLY_ARRAY && r->elements == b->n;
    for (size_t i = 0; i < b->n; i++)
        resign_done(b->t[i], each ? r->element[i] : r);
    free(b);
}

static void unbusy(rms *x, resign_tag *t) {
    rm *m = find(x, t->id);
    if (m) m->busy = 0; /* the next tick tries again */
    free(t);
}

/* Sends b (all to one leader) as one KEEL.REP.RESIGN; on failure the moves
 * are free to try again. */
static void resign_send(rms *x, resign_batch *b) {
    coord_link *l = coord_links_ready_for(&x->links, b->t[0]->leader, coord_now(x->co));
    const char *argv[2 + 3 * RESIGN_BATCH_MAX];
    char term[24], nums[RESIGN_BATCH_MAX][2][24];
    snprintf(term, sizeof term, "%llu", (unsigned long long)x->co->term);
    int argc = 0;
    argv[argc++] = "KEEL.REP.RESIGN";
    argv[argc++] = term;
    for (size_t i = 0; i < b->n; i++) {
        snprintf(nums[i][0], sizeof nums[i][0], "%u", b->t[i]->p);
        snprintf(nums[i][1], sizeof nums[i][1], "%llu", (unsigned long long)b->t[i]->le);
        argv[argc++] = nums[i][0];
        argv[argc++] = nums[i][1];
        argv[argc++] = b->t[i]->target;
    }
    if (l && coord_elect_may_act() && peerlink_send(l->pl, on_resign, b, argc, argv, NULL) == 0) {
        keel_log(KEEL_LOG_INFO, "resign_sent", "leader=%s partitions=%zu", b->t[0]->leader, b->n);
        x->counts.resign_requests++;
        x->counts.resign_partitions += b->n;
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        unbusy(x, b->t[i]);
    free(b);
}

static void on_rflush(uv_timer_t *h) {
    rms *x = h->data;
    while (x->nrq) {
        resign_batch *b = calloc(1, sizeof *b);
        if (!b) { /* out of memory: every move tries again from the tick */
            for (size_t i = 0; i < x->nrq; i++)
                unbusy(x, x->rq[i]);
            x->nrq = 0;
            return;
        }
        const char *leader = x->rq[0]->leader;
        size_t keep = 0;
        for (size_t i = 0; i < x->nrq; i++) {
            resign_tag *t = x->rq[i];
            if (b->n < RESIGN_BATCH_MAX && strcmp(t->leader, leader) == 0)
                b->t[b->n++] = t;
            else
                x->rq[keep++] = t;
        }
        x->nrq = keep;
        resign_send(x, b);
    }
}

static void send_resign(rms *x, rm *m, const rmove_action *a) {
    coord_link *l = coord_links_ready_for(&x->links, a->leader, coord_now(x->co));
    if (!l || !coord_elect_may_act()) return; /* dialling: the next tick tries again */
    if (x->nrq == RESIGN_QUEUE_MAX) on_rflush(&x->rflush);
    resign_tag *t = calloc(1, sizeof *t);
    if (!t) return;
    *t = (resign_tag){.x = x, .id = m->mv.id, .le = a->leader_epoch};
    snprintf(t->target, sizeof t->target, "%s", a->target);
    snprintf(t->leader, sizeof t->leader, "%s", a->leader);
    t->p = m->mv.partition;
    x->rq[x->nrq++] = t;
    if (!uv_is_active((uv_handle_t *)&x->rflush)) uv_timer_start(&x->rflush, on_rflush, 0, 0);
    if (!m->resign_us) m->resign_us = keel_mono_us();
    m->busy = 1;
}

/* ---- Driving -------------------------------------------------------------- */

static void drive(rms *x, rm *m) {
    coord *co = x->co;
    if (m->finished || m->busy || x->stopping) return;
    int64_t now = coord_now(co);
    if (now < m->retry_ms) return;
    mapstore_partition p;
    if (mapstore_partition_get(co->ms, m->mv.partition, &p)) return;
    if (rmove_replica_index(&p, m->mv.add) >= 0) m->mv.added = 1;
    rmove_action a;
    rmove_next(&m->mv, &p, now, timeout_ms(x, m), node_up, x, &a);
    if (a.step != m->step && a.act != RACT_ABORT)
        keel_log(KEEL_LOG_INFO, "replica_move_step", "id=%llu partition=%u step=\"%s\"",
                 (unsigned long long)m->mv.id, m->mv.partition, rmove_step_name(a.step));
    if (a.act != RACT_ABORT) m->step = a.step;
    switch (a.act) {
    case RACT_WAIT:
        break;
    case RACT_SET_REPLICAS:
        submit_replicas(x, m, &a, W_REPLICAS, NULL);
        break;
    case RACT_RESIGN:
        /* Dial every replica now, so the nudges after the commit find ready
         * links (a link dialled only then costs a heartbeat interval). */
        for (unsigned i = 0; i < p.nreplicas; i++)
            (void)coord_links_ready_for(&x->links, p.replicas[i], now);
        send_resign(x, m, &a);
        break;
    case RACT_SET_LEADER:
        submit_leader(x, m, &a);
        break;
    case RACT_DONE:
        finish(x, m, NULL);
        break;
    case RACT_ABORT:
        if (a.nids)
            submit_replicas(x, m, &a, W_ABORT, a.why);
        else
            finish(x, m, a.why);
        break;
    }
}

static void check_handoffs(rms *x);

static void on_tick(uv_timer_t *t) {
    rms *x = t->data;
    if (x->stopping) return;
    for (rm *m = x->head; m; m = m->next)
        drive(x, m);
    check_handoffs(x);
    nudges_flush(x);
    trim(x);
}

/* ---- Creation ------------------------------------------------------------- */

static int replicated(coord *co, const mapstore_partition *p) {
    return p->nreplicas > 1 || coord_setting_ll(co, "replicas") > 1;
}

static rm *busy_for(rms *x, unsigned p) {
    for (rm *m = x->head; m; m = m->next)
        if (!m->finished && m->mv.partition == p) return m;
    return NULL;
}

static int known(rms *x, const char *id, int must_be_up, char *err, size_t cap) {
    mapstore_node n;
    if (mapstore_node_get(x->co->ms, id, &n))
        return keel_errf(err, cap, KEEL_ENOTFOUND, "no node '%s'", id);
    if (must_be_up && !coord_node_usable(&n))
        return keel_errf(err, cap, KEEL_EINVAL, "node %s is %s, not UP", id,
                         coord_node_summary(&n));
    return 0;
}

static int64_t create(coord *co, unsigned p, rmove_kind kind, const char *add, const char *remove,
                      const char *lead_to, const char *reason, char *err, size_t cap, rm **out) {
    rms *x = state_of(co);
    int rc;
    if (!x) return keel_errf(err, cap, KEEL_EINVAL, "the replica-move executor is not running");
    mapstore_partition part;
    if (p >= co->partitions || mapstore_partition_get(co->ms, p, &part))
        return keel_errf(err, cap, KEEL_ERANGE, "no partition %u (0..%u)", p, co->partitions - 1);
    if (!replicated(co, &part))
        return keel_errf(err, cap, KEEL_EINVAL,
                         "partition %u has one replica (RF 1): use MOVE, which copies and fences",
                         p);
    if (busy_for(x, p))
        return keel_errf(err, cap, KEEL_EEXIST, "a replica move of partition %u is under way", p);
    if (add && add[0] && (rc = known(x, add, 1, err, cap))) return rc;
    if (lead_to && lead_to[0] && (rc = known(x, lead_to, 1, err, cap))) return rc;
    if (remove && remove[0] && (rc = known(x, remove, 0, err, cap))) return rc;
    rm *m = calloc(1, sizeof *m);
    if (!m) return keel_errf(err, cap, KEEL_ENOMEM, "out of memory");
    m->mv.id = ++x->next_id;
    m->mv.partition = p;
    m->mv.kind = kind;
    snprintf(m->mv.add, sizeof m->mv.add, "%s", add ? add : "");
    snprintf(m->mv.remove, sizeof m->mv.remove, "%s", remove ? remove : "");
    snprintf(m->mv.lead_to, sizeof m->mv.lead_to, "%s", lead_to ? lead_to : "");
    long long rf = coord_setting_ll(co, "replicas");
    m->mv.rf = kind == RMOVE_REMOVE ? (unsigned)(rf > 0 ? rf : 1)
                                    : (unsigned)(part.nreplicas > rf ? part.nreplicas : rf);
    if (kind == RMOVE_ADD && !m->mv.remove[0]) m->mv.rf = part.nreplicas + 1;
    m->mv.min_insync = (unsigned)coord_setting_ll(co, "min_insync");
    m->mv.started_ms = coord_now(co);
    m->created_wall_ms = keel_wall_ms();
    m->transfer_ms = -1;
    if (m->mv.add[0] && co->parts && p < co->partitions) m->total_bytes = co->parts[p].bytes;
    snprintf(m->reason, sizeof m->reason, "%s", reason ? reason : "operator");
    if ((rc = rmove_check(&m->mv, &part, err, cap))) {
        free(m);
        return rc;
    }
    m->next = x->head;
    x->head = m;
    x->counts.started++;
    keel_log(KEEL_LOG_INFO, "replica_move_started",
             "id=%llu type=%s partition=%u add=%s remove=%s lead_to=%s reason=\"%s\"",
             (unsigned long long)m->mv.id, rmove_kind_name(kind), p, m->mv.add[0] ? m->mv.add : "-",
             m->mv.remove[0] ? m->mv.remove : "-", m->mv.lead_to[0] ? m->mv.lead_to : "-",
             m->reason);
    if (out) *out = m;
    /* Driven from the next tick, never from here: a command's reply that
     * waits for the move's end must not complete inside its own dispatch. */
    return (int64_t)m->mv.id;
}

int64_t coord_repmove_create(coord *co, unsigned p, rmove_kind kind, const char *add,
                             const char *remove, const char *lead_to, const char *reason, char *err,
                             size_t cap) {
    return create(co, p, kind, add, remove, lead_to, reason, err, cap, NULL);
}

int64_t coord_repmove_promote(coord *co, unsigned p, const char *to,
                              void (*on_end)(coord *, uint64_t, const char *, double, void *),
                              void *arg, char *err, size_t cap) {
    rm *m = NULL;
    int64_t id = create(co, p, RMOVE_PROMOTE, NULL, NULL, to, "promote", err, cap, &m);
    if (id > 0 && m) {
        m->on_end = on_end;
        m->on_end_arg = arg;
    }
    return id;
}

int coord_repmove_cancel(coord *co, uint64_t id) {
    rms *x = state_of(co);
    rm *m = x ? find(x, id) : NULL;
    if (!m || m->finished) return KEEL_ENOTFOUND;
    mapstore_partition p;
    if (!m->busy && mapstore_partition_get(co->ms, m->mv.partition, &p) == 0) {
        rmove_action a;
        rmove_next(&m->mv, &p, INT64_MAX / 2, 1, node_up, x, &a); /* timed out: the abort */
        if (a.act == RACT_ABORT && a.nids) {
            submit_replicas(x, m, &a, W_ABORT, "cancelled");
            return 0;
        }
    }
    finish(x, m, "cancelled");
    return 0;
}

size_t coord_repmoves_in_flight(coord *co) {
    rms *x = state_of(co);
    size_t n = 0;
    for (rm *m = x ? x->head : NULL; m; m = m->next)
        n += !m->finished;
    return n;
}

int coord_repmoves_busy(coord *co, unsigned p) {
    rms *x = state_of(co);
    return x && busy_for(x, p) != NULL;
}

static size_t start_logged(coord *co, unsigned p, rmove_kind k, const char *add, const char *remove,
                           const char *lead_to, const char *why) {
    char err[256];
    if (coord_repmove_create(co, p, k, add, remove, lead_to, why, err, sizeof err) > 0) return 1;
    keel_log(KEEL_LOG_WARN, "rebalance_replica_move_refused", "partition=%u type=%s error=\"%s\"",
             p, rmove_kind_name(k), err);
    return 0;
}

size_t coord_repmoves_enqueue(coord *co, const struct plan_model *m, const struct plan_result *r) {
    size_t n = 0;
    for (size_t i = 0; i < r->nmoves; i++) {
        const plan_move *pm = &r->moves[i];
        if (m->parts[pm->part].nreplicas < 2) continue; /* RF 1: coord_move.c */
        const char *to = m->nodes[pm->to].id;
        n += start_logged(co, (unsigned)pm->part_id, RMOVE_MOVE, to, m->nodes[pm->from].id,
                          pm->replica == 0 ? to : "", plan_why_name(pm->why));
    }
    for (size_t i = 0; i < r->nrepairs; i++) {
        const plan_repair *rp = &r->repairs[i];
        const char *node = m->nodes[rp->node].id;
        if (rp->kind == PLAN_REPAIR_ADD)
            n += start_logged(co, (unsigned)rp->part_id, RMOVE_ADD, node,
                              rp->replace >= 0 ? m->nodes[rp->replace].id : "", "",
                              rp->replace >= 0 ? "restore-rf" : "raise-rf");
        else
            n += start_logged(co, (unsigned)rp->part_id, RMOVE_REMOVE, "", node, "", "lower-rf");
    }
    for (size_t i = 0; i < r->nleads; i++) {
        const plan_lead *ld = &r->leads[i];
        n += start_logged(co, (unsigned)ld->part_id, RMOVE_PROMOTE, "", "", m->nodes[ld->to].id,
                          "leader-load");
    }
    return n;
}

void coord_repmoves_annotate(coord *co, struct plan_model *pm) {
    rms *x = state_of(co);
    for (rm *m = x ? x->head : NULL; m; m = m->next)
        if (!m->finished)
            for (size_t i = 0; i < pm->nparts; i++)
                if (pm->parts[i].id == m->mv.partition) pm->parts[i].in_flight = true;
}

void coord_repmoves_counts(coord *co, coord_repmove_counts *out) {
    rms *x = state_of(co);
    memset(out, 0, sizeof *out);
    if (x) *out = x->counts;
}

/* ---- Views ---------------------------------------------------------------- */

static cJSON *rm_json(coord *co, const rm *m) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)m->mv.id);
    cJSON_AddStringToObject(o, "kind", "replica");
    cJSON_AddStringToObject(o, "type", rmove_kind_name(m->mv.kind));
    cJSON_AddNumberToObject(o, "partition", m->mv.partition);
    cJSON_AddStringToObject(o, "from", m->mv.remove);
    cJSON_AddStringToObject(o, "to", m->mv.add[0] ? m->mv.add : m->mv.lead_to);
    cJSON_AddStringToObject(o, "lead_to", m->mv.lead_to);
    cJSON_AddStringToObject(o, "step", rmove_step_name(m->step));
    cJSON_AddStringToObject(o, "state",
                            m->finished ? (m->abort_reason[0] ? "ABORTED" : "DONE") : "IN_FLIGHT");
    cJSON_AddStringToObject(o, "reason", m->reason);
    cJSON_AddStringToObject(o, "abort_reason", m->abort_reason);
    int64_t end = m->finished ? m->end_ms : coord_now(co);
    cJSON_AddNumberToObject(o, "age_s", (double)(end - m->mv.started_ms) / 1000.0);
    cJSON_AddNumberToObject(o, "started_at_ms", (double)m->created_wall_ms);
    if (m->transfer_ms >= 0) cJSON_AddNumberToObject(o, "transfer_pause_ms", m->transfer_ms);
    cJSON_AddNumberToObject(o, "total_bytes",
                            (double)m->total_bytes); /* copied to the new replica */
    return o;
}

void coord_repmoves_json(coord *co, cJSON *arr, size_t recent) {
    rms *x = state_of(co);
    if (!x) return;
    size_t n = 0, finished = 0;
    for (rm *m = x->head; m; m = m->next)
        n++, finished += m->finished;
    const rm **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return;
    size_t k = 0, skip = finished > recent ? finished - recent : 0;
    for (rm *m = x->head; m; m = m->next)
        v[k++] = m; /* newest first */
    for (size_t i = k; i-- > 0;) {
        if (v[i]->finished && skip) {
            skip--;
            continue;
        }
        cJSON *o = rm_json(co, v[i]);
        if (o) cJSON_AddItemToArray(arr, o);
    }
    free(v);
}

/* ---- Hand-off (KEEL.REP.HANDOFF at a node's SIGTERM) ----------------------- */

static unsigned still_leads(coord *co, const char *node) {
    mapstore_partition *parts = NULL;
    size_t n = 0;
    unsigned left = 0;
    if (mapstore_partition_list(co->ms, &parts, &n)) return 0;
    for (size_t i = 0; i < n; i++)
        left += parts[i].nreplicas > 1 && strcmp(parts[i].replicas[0], node) == 0;
    free(parts);
    return left;
}

static void handoff_end(rms *x, handoff *h) {
    unsigned left = still_leads(x->co, h->node);
    keel_log(left ? KEEL_LOG_WARN : KEEL_LOG_INFO, "handoff_done", "node=%s moved=%u left=%u",
             h->node, h->moved, left);
    if (h->done) h->done(x->co, h->moved, left, h->arg);
    h->ended = 1;
    h->left = left;
    h->ended_ms = coord_now(x->co);
}

static void handoff_free(handoff *h) {
    free(h->ids);
    free(h);
}

static void check_handoffs(rms *x) {
    int64_t now = coord_now(x->co);
    for (handoff **pp = &x->handoffs; *pp;) {
        handoff *h = *pp;
        if (h->ended) { /* polled, and not yet fetched */
            if (now - h->ended_ms < HANDOFF_KEEP_MS) {
                pp = &h->next;
                continue;
            }
            *pp = h->next;
            handoff_free(h);
            continue;
        }
        int open = 0;
        for (size_t i = 0; i < h->n && !open; i++) {
            rm *m = find(x, h->ids[i]);
            open = m && !m->finished;
        }
        if (open && now < h->deadline_ms) {
            pp = &h->next;
            continue;
        }
        handoff_end(x, h);
        if (!h->done) { /* polled: kept for the node's next poll */
            pp = &h->next;
            continue;
        }
        *pp = h->next;
        handoff_free(h);
    }
}

/* A hand-off's transfer ended (rm.on_end): counted if it committed. */
static void handoff_move_end(coord *co, uint64_t id, const char *abort_reason, double transfer_ms,
                             void *arg) {
    (void)transfer_ms, (void)arg;
    rms *x = state_of(co);
    if (!x || abort_reason) return;
    for (handoff *h = x->handoffs; h; h = h->next)
        for (size_t i = 0; i < h->n; i++)
            if (h->ids[i] == id) { /* a move is one hand-off's */
                if (!h->ended) h->moved++;
                return;
            }
}

/* Leaderships per node, to spread what the leaving node led. */
static unsigned leads_of(const mapstore_partition *parts, size_t n, const char *node) {
    unsigned k = 0;
    for (size_t i = 0; i < n; i++)
        k += parts[i].nreplicas && strcmp(parts[i].replicas[0], node) == 0;
    return k;
}

#define HANDOFF_TALLY 64

typedef struct tally { /* leaderships given out by this hand-off, per node */
    char id[HANDOFF_TALLY][KEEL_ID_MAX + 1];
    unsigned k[HANDOFF_TALLY], n;
} tally;

static unsigned *tally_of(tally *t, const char *id) {
    for (unsigned i = 0; i < t->n; i++)
        if (strcmp(t->id[i], id) == 0) return &t->k[i];
    if (t->n == HANDOFF_TALLY) return NULL;
    snprintf(t->id[t->n], sizeof t->id[0], "%s", id);
    t->k[t->n] = 0;
    return &t->k[t->n++];
}

/* The in-sync follower that is up and leads least, counting what this
 * hand-off already gave it. */
static const char *handoff_target(rms *x, const mapstore_partition *p,
                                  const mapstore_partition *parts, size_t n, tally *t) {
    const char *best = NULL;
    unsigned best_k = 0;
    for (unsigned r = 1; r < p->nreplicas; r++) {
        if (!(p->isr >> r & 1) || !node_up(x, p->replicas[r])) continue;
        unsigned *given = tally_of(t, p->replicas[r]);
        unsigned k = leads_of(parts, n, p->replicas[r]) + (given ? *given : 0);
        if (!best || k < best_k) best = p->replicas[r], best_k = k;
    }
    unsigned *given = best ? tally_of(t, best) : NULL;
    if (given) ++*given;
    return best;
}

int coord_repmove_handoff(coord *co, const char *node, int64_t timeout, coord_handoff_done done,
                          void *arg) {
    rms *x = state_of(co);
    mapstore_partition *parts = NULL;
    size_t n = 0;
    if (!x || mapstore_partition_list(co->ms, &parts, &n)) return KEEL_EINVAL;
    handoff *h = calloc(1, sizeof *h);
    if (h) h->ids = calloc(n ? n : 1, sizeof *h->ids);
    if (!h || !h->ids) {
        free(h);
        free(parts);
        return KEEL_ENOMEM;
    }
    snprintf(h->node, sizeof h->node, "%s", node);
    h->deadline_ms = coord_now(co) + timeout;
    h->done = done;
    h->arg = arg;
    tally t = {.n = 0};
    for (size_t i = 0; i < n; i++) {
        const mapstore_partition *p = &parts[i];
        if (p->nreplicas < 2 || strcmp(p->replicas[0], node) != 0) continue;
        rm *busy = busy_for(x, p->id);
        if (busy) { /* a move under way for p: wait for it too */
            h->ids[h->n++] = busy->mv.id;
            continue;
        }
        const char *to = handoff_target(x, p, parts, n, &t);
        char err[256];
        if (!to) {
            keel_log(KEEL_LOG_WARN, "handoff_no_target", "node=%s partition=%u", node, p->id);
            continue;
        }
        rm *m = NULL;
        int64_t id =
            create(co, p->id, RMOVE_PROMOTE, NULL, NULL, to, "handoff", err, sizeof err, &m);
        if (id > 0) {
            h->ids[h->n++] = (uint64_t)id;
            if (m && !m->on_end) m->on_end = handoff_move_end;
        } else
            keel_log(KEEL_LOG_WARN, "handoff_refused", "node=%s partition=%u error=\"%s\"", node,
                     p->id, err);
    }
    free(parts);
    keel_log(KEEL_LOG_INFO, "handoff_started", "node=%s transfers=%zu", node, h->n);
    h->next = x->handoffs;
    x->handoffs = h; /* answered from a tick (even with nothing to transfer) */
    return 0;
}

/* Takes h off the list and frees it. */
static void handoff_drop(rms *x, handoff *h) {
    for (handoff **pp = &x->handoffs; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    handoff_free(h);
}

static handoff *handoff_of(rms *x, const char *node, int polled) {
    for (handoff *h = x->handoffs; h; h = h->next)
        if (!strcmp(h->node, node) && (!polled || !h->done)) return h;
    return NULL;
}

int coord_repmove_handoff_start(coord *co, const char *node, int64_t timeout_ms) {
    rms *x = state_of(co);
    if (!x) return KEEL_EINVAL;
    handoff *h = handoff_of(x, node, 1);
    if (h && !h->ended) return 0; /* one under way: the node polls it */
    if (h) handoff_drop(x, h);    /* an old result nobody fetched: a new stop */
    return coord_repmove_handoff(co, node, timeout_ms, NULL, NULL);
}

int coord_repmove_handoff_status(coord *co, const char *node, unsigned *moved, unsigned *left) {
    rms *x = state_of(co);
    handoff *h = x ? handoff_of(x, node, 1) : NULL;
    if (!h) return -1;
    if (!h->ended) return 1;
    *moved = h->moved;
    *left = h->left;
    handoff_drop(x, h);
    return 0;
}

/* ---- Life cycle ------------------------------------------------------------- */

int coord_repmoves_start(coord *co) {
    rms *x = calloc(1, sizeof *x);
    if (!x) return KEEL_ENOMEM;
    x->co = co;
    coord_links_init(&x->links, co, on_link_ready, x);
    uv_timer_init(co->loop, &x->timer);
    x->timer.data = x;
    uv_timer_init(co->loop, &x->rflush);
    x->rflush.data = x;
    x->handles = 2;
    uv_timer_start(&x->timer, on_tick, TICK_MS, TICK_MS);
    co->repmv = x;
    return 0;
}

static void on_closed(uv_handle_t *h) {
    rms *x = h->data;
    if (--x->handles == 0) free(x);
}

void coord_repmoves_stop(coord *co) {
    rms *x = state_of(co);
    if (!x || x->stopping) return;
    x->stopping = 1;
    coord_links_close(&x->links);
    for (handoff *h = x->handoffs, *next; h; h = next) {
        next = h->next;
        handoff_free(h);
    }
    for (rm *m = x->head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    x->head = NULL;
    for (size_t i = 0; i < x->nrq; i++)
        free(x->rq[i]);
    x->nrq = 0;
    uv_timer_stop(&x->timer);
    uv_close((uv_handle_t *)&x->timer, on_closed);
    uv_timer_stop(&x->rflush);
    uv_close((uv_handle_t *)&x->rflush, on_closed);
    co->repmv = NULL;
}
