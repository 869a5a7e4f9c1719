/* coordlink.h - a node's link to the coordinator (DESIGN.md §7, §9).
 *
 * The node dials the coordinator, proves the cluster secret with the mutual
 * KEEL.AUTH handshake (core/peerauth: the coordinator must prove it too, as
 * id "coordinator"), then asks the coordinator to prove its Ed25519 key
 * (KEEL.AUTH COORDKEY: a signature of this handshake, core/coordkey.h) -
 * pinning the key at the first join, refusing any other key later - then
 * registers with KEEL.REGISTER and heartbeats every
 * heartbeat_ms with its metrics. A heartbeat reply carries the map whenever
 * the node's is older: that is a directive (term, seq), admitted through a
 * directive_guard (invariant I3: only this authenticated connection, never a
 * stale term, never a replay) before the node's callback sees it.
 *
 * Several coordinator addresses may be given (issue 12: only the leader
 * listens). The link tries them in order: a refused or failed dial, a failed
 * handshake or a lost link moves it to the next address at once; after a
 * full round of failures it waits a second (the backoff of a single
 * address) before the next round. It logs the address it registered with.
 * All on the node's loop thread.
 */
#ifndef KEEL_COORDLINK_H
#define KEEL_COORDLINK_H

#include <stdint.h>
#include <uv.h>

#include "core/addrlist.h"
#include "core/buf.h"
#include "core/directive.h"
#include "core/peerauth.h"

#define COORDINATOR_ID "coordinator" /* the id the coordinator proves */

typedef struct coordlink coordlink;

typedef struct coordlink_config {
    const char *host; /* the coordinator, when coords is NULL */
    int port;
    const addrlist *coords; /* or every coordinator's address, tried in order (copied) */
    const char *self_id;    /* our node id (proven in the handshake) */
    const char *adv_host;   /* where clients reach us */
    int adv_port;
    const char *rack; /* "" = none */
    double capacity;
    int heartbeat_ms;
    uint64_t last_term, last_seq; /* the last directive admitted before a restart; 0 0 = none */
    const char *coord_pub;        /* the pinned coordinator key (hex), "" or NULL = none yet */
    /* This process's incarnation (hex; replication contract C3), sent in
     * KEEL.REGISTER with `fresh` (cbs.fresh); NULL or "" = "0". */
    const char *incarnation;
} coordlink_config;

typedef struct coordlink_cbs {
    /* An admitted map directive (term, seq): JSON text, valid for the call
     * only. The node persists (term, seq) so that a restart cannot be made
     * to accept it again (see coordlink_config.last_term). */
    void (*on_map)(void *arg, const char *json, size_t len, uint64_t term, uint64_t seq);
    /* Appends this node's metrics JSON for a heartbeat (see coord_cmd.c). */
    void (*metrics)(void *arg, kbuf *out);
    /* The map version the node holds (heartbeats ask for newer ones). */
    uint64_t (*map_version)(void *arg);
    /* First join: the coordinator proved the key pub_hex (64 hex), and no
     * key was pinned. Persist it durably and return 0, or a KEEL_E* to drop
     * the link (it redials). Later links must prove this same key. */
    int (*pin)(void *arg, const char *pub_hex);
    /* KEEL.REGISTER's `fresh`: 1 until this process installed a map that
     * lists its own incarnation, then 0. NULL = 1. */
    int (*fresh)(void *arg);
    /* A heartbeat reply's fifth element (C2): lease 1 or 0, the version it
     * answered, and when that heartbeat left (this node's monotonic clock,
     * keel_mono_us). Runs after on_map of the same reply. A 4-element
     * reply calls nothing. May be NULL. */
    void (*on_lease)(void *arg, int lease, uint64_t version, uint64_t sent_us);
} coordlink_cbs;

/* Starts dialling. Strings in cfg are copied; *secret is copied. Returns
 * NULL on out-of-memory. */
coordlink *coordlink_start(uv_loop_t *loop, const coordlink_config *cfg,
                           const peerauth_secret *secret, const coordlink_cbs *cbs, void *arg);
/* Best-effort KEEL.LEAVE, then disconnects and frees once the loop has
 * closed the handles. NULL is a no-op. */
void coordlink_stop(coordlink *l, int leave);
/* Admits a move directive's term through the link's directive guard
 * (directive_admit_term). A NULL link (no coordinator) refuses. */
directive_verdict coordlink_check_term(coordlink *l, int from_coordinator, uint64_t term);
/* Sends a command to the coordinator and ignores the reply (progress
 * reports). Returns 0, or KEEL_EAGAIN when not registered. */
int coordlink_send(coordlink *l, int argc, const char **argv, const size_t *lens);
/* Sends a command to the coordinator; cb(arg, reply) runs with its reply,
 * or with NULL if the link goes down (or stops) first. Returns 0, or
 * KEEL_EAGAIN / KEEL_ENOMEM (cb never runs). */
struct redisReply;
int coordlink_call(coordlink *l, int argc, const char **argv, const size_t *lens,
                   void (*cb)(void *arg, struct redisReply *reply), void *arg);
/* A heartbeat now (or right after the one in flight), out of turn: the
 * coordinator asked (KEEL.REP.NUDGE) because a map it just committed
 * matters to this node at once (a leadership transfer). No-op when not
 * registered. */
void coordlink_heartbeat_now(coordlink *l);
/* Changes the heartbeat interval (from the next heartbeat on). A leader at
 * RF > 1 heartbeats several times per lease. ms <= 0 is ignored. */
void coordlink_set_heartbeat_ms(coordlink *l, int ms);
/* 1 once registered on the current connection. */
int coordlink_ready(const coordlink *l);

#endif
