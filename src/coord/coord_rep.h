/* coord_rep.h - the coordinator's side of replicated partitions (issue 11
 * step 4; the contract is docs/replication.md "Step 4 as built" and
 * /work/prompts/rep-contract.md C2-C4): ISR changes (coord_isr.c), leases,
 * failover and incarnations (coord_failover.c). Partitions with one replica
 * (RF 1) never enter any of this (C1).
 *
 * State per partition (memory only: a restarted coordinator rebuilds it
 * from the map store and the heartbeats):
 *   busy       one replication write for it is in flight; nothing else is
 *              decided for it until that completes
 *   takeaway   the coordinator decided to take leadership away from `from`
 *              (failover, automatic or by an operator, or a re-election after
 *              a new incarnation): `from` gets lease 0 from that moment until
 *              its heartbeat reports a map version >= the change's (C2), and
 *              the change commits only once `from` cannot hold a lease:
 *              now - its last lease-1 reply >= lease_ms * 1.05 + 50 ms
 *   stale_le   C3: the leader restarted with a new incarnation; the
 *              partition needs a leader epoch >= stale_le
 *
 * Leases (C2). A heartbeat reply carries a fifth element, lease 1 or 0, for
 * nodes that registered with an incarnation (the 7-argument KEEL.REGISTER);
 * older nodes get the 4-element reply they parse. Lease 1 unless a
 * take-away from that node is pending or not yet seen by it, or its new
 * incarnation's consequences are not all committed. The time of the last
 * lease-1 reply is kept per member; before the first one, the coordinator's
 * own start counts (a previous coordinator may have granted one).
 *
 * Threads: the coordinator's loop thread.
 */
#ifndef KEEL_COORD_REP_H
#define KEEL_COORD_REP_H

#include <stddef.h>
#include <stdint.h>

#include "coord/coord_int.h"

struct coord_deferred;

/* Why a partition's leadership is being taken away. */
typedef enum {
    REP_TAKE_NONE = 0,
    REP_TAKE_AUTO,     /* the leader is SUSPECT or DOWN */
    REP_TAKE_OPERATOR, /* keel failover */
    REP_TAKE_REELECT,  /* the leader restarted: new incarnation (C3) */
} rep_take_reason;

typedef struct coord_rep_part {
    int busy;
    rep_take_reason take;
    int unclean;               /* REP_TAKE_OPERATOR with --unclean */
    char from[KEEL_ID_MAX + 1]; /* the leader it is taken from */
    char to[KEEL_ID_MAX + 1];   /* the operator's target, or "" */
    int64_t decided_ms;         /* coord_now() at the decision */
    struct coord_deferred *reply; /* the operator's held FAILOVER, or NULL */
    uint64_t stale_le;
    int blocked_logged; /* "no in-sync replica is UP" was logged for this episode */
} coord_rep_part;

typedef struct coord_rep_state {
    coord_rep_part *parts; /* [P] */
    uv_timer_t timer;
    uint64_t failovers, unclean_failovers, reelections;
    uint64_t isr_shrinks, isr_expands, isr_refused;
    double last_failover_ms; /* decision to commit of the last failover */
    double max_failover_ms;
} coord_rep_state;

#define COORD_REP_TICK_MS 100

/* coord_failover.c --------------------------------------------------------- */

/* Starts the replication tick. 0 or KEEL_ENOMEM. */
int coord_rep_start(coord *co);
void coord_rep_stop(coord *co);

/* The wait, in ms, after the last lease-1 reply before a leader cannot hold
 * its lease any more: lease_ms * 1.05 + 50 (clocks run at most 5% apart,
 * plus a margin for the reply's flight). */
int64_t coord_lease_wait_ms(int64_t lease_ms);
/* 1 if a node last granted a lease at last_grant_ms (coord_now, 0 = never:
 * start_ms counts) cannot hold it at now_ms. */
int coord_lease_gone(int64_t now_ms, int64_t last_grant_ms, int64_t start_ms, int64_t lease_ms);

/* The new leader of p among its replicas 1..n-1: only those with up[i]
 * set; ISR members first (unclean 0: only them), then the replica holding
 * the fewest leaderships (leads[i], may be NULL), then list order. to
 * (NULL or ""): only that replica. Returns its index in p->replicas, or -1
 * when none qualifies. */
int coord_failover_pick(const mapstore_partition *p, const int *up, const unsigned *leads,
                        int unclean, const char *to);

/* The lease element of a heartbeat reply to member m that reports map
 * version have: 1 or 0 (above). Records the grant time when 1. */
int coord_rep_lease(coord *co, member *m, uint64_t have, int64_t now);

/* KEEL.REGISTER's incarnation (C3), called when the registration is
 * durable: inc ("" for a node without one), fresh 0/1. */
void coord_rep_registered(coord *co, const char *id, const char *inc, int fresh);

/* A setting changed: one that nodes apply (min_insync, replica_lease_ms,
 * replicas) gets a new map version so that they fetch it (C4). */
void coord_rep_setting_changed(coord *co, const char *name);

/* For `keel set` / SETTING: node_suspect_after_ms must stay >=
 * coord_lease_wait_ms(replica_lease_ms) (C2). 0, or KEEL_EINVAL with
 * "ERR ..." in msg. value NULL: a reset to the default. */
int coord_rep_check_setting(coord *co, const char *name, const char *value, char *msg, size_t cap);

/* FAILOVER p [TO node] [UNCLEAN] (keel failover). */
void coord_c_failover(cctx *x);

/* Counters and state for keel status / --json. */
struct cJSON;
void coord_rep_json(coord *co, struct cJSON *obj);

/* coord_isr.c -------------------------------------------------------------- */

/* KEEL.REP.ISR p partition_epoch leader_epoch shrink|expand node (C4). */
void coord_c_rep_isr(cctx *x, const char *id);
/* The coordinator's own shrinks: followers SUSPECT or DOWN, or restarted
 * (new incarnation pending). Called by the tick for each RF > 1 partition
 * whose leader is UP and that is not busy; 1 if it submitted a write. */
int coord_isr_shrink_tick(coord *co, const mapstore_partition *p, int64_t now);

#endif
