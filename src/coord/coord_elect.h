/* coord_elect.h - leader election of coordinators on etcd (issue 12).
 *
 * Several `keel coord --etcd URL --id C` processes share one map prefix; one
 * leads. The election runs on a thread of its own with its own etcd client,
 * so its keepalives never wait behind map writes or the event loop:
 *
 *   1. grant a lease of ttl_s seconds (POST /v3/lease/grant);
 *   2. campaign: one transaction that creates PREFIX "leader" = {id, addr}
 *      with the lease only if the key does not exist (create_revision == 0);
 *      otherwise read who leads. Standbys retry every 200 ms;
 *   3. keep the lease alive every ttl/3; each keepalive's answer extends the
 *      deadline to (the time measured BEFORE it was sent) + TTL. The leader
 *      counts as leading only while now < deadline, so it stops acting when
 *      its lease may have expired, not when it hears from etcd that it has.
 *
 * A leader's map writes are guarded by the leader key's create revision
 * (mapstore_etcd_set_guard): once the key is gone or belongs to another
 * process, a deposed leader's writes fail with KEEL_ENOTLEADER. The term the
 * nodes check is bumped by the new leader's first (guarded) write, so it is
 * higher than any term of an earlier leader.
 *
 * What the coordinator does with it (coord.c): a standby waits before it
 * opens the map or binds its port, logging who leads; once leading it opens
 * the map (one read), bumps the term and runs; coord_elect_watch checks
 * every 50 ms and ends the process (exit status 3, "leadership_lost") as
 * soon as it is no longer leading, so that a supervisor restarts it as a
 * standby.
 *
 * Threads: the election thread is internal; every function here may be
 * called from any one thread (state is read under a mutex).
 */
#ifndef KEEL_COORD_ELECT_H
#define KEEL_COORD_ELECT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define COORD_ELECT_ID_MAX 64
#define COORD_ELECT_ADDR_MAX 96
#define COORD_ELECT_DEFAULT_TTL_S 3
#define COORD_ELECT_EXIT_LOST 3 /* exit status of a coordinator that lost the lead */

typedef struct coord_elect coord_elect;

typedef struct coord_elect_config {
    const char *urls;   /* etcd URLs (etcd_client.h) */
    const char *prefix; /* the map's prefix; the key is PREFIX "leader" */
    const char *id;     /* this coordinator, 1..64 bytes of the id rule */
    const char *addr;   /* where it serves, host:port (for standbys to name) */
    int ttl_s;          /* lease TTL, 2..60 (0: the default, 3) */
} coord_elect_config;

typedef struct coord_elect_view {
    int leading;                            /* this process leads and its deadline has not passed */
    int64_t create_rev;                     /* when leading: the leader key's create revision */
    int64_t since_ms;                       /* when leading: wall-clock ms it became leader */
    int64_t deadline_ms;                    /* when leading: monotonic ms the lease may expire at */
    char leader_id[COORD_ELECT_ID_MAX + 1]; /* "" when no one is known to lead */
    char leader_addr[COORD_ELECT_ADDR_MAX + 1];
} coord_elect_view;

/* The coordinators taking part (each keeps PREFIX "coordinators/ID" =
 * {id, addr} alive with its lease), as last read by the election thread
 * (every second): copies up to max into out, returns how many there are.
 * For `keel status`. */
typedef struct coord_elect_member {
    char id[COORD_ELECT_ID_MAX + 1];
    char addr[COORD_ELECT_ADDR_MAX + 1];
} coord_elect_member;
#define COORD_ELECT_MEMBERS_MAX 16
size_t coord_elect_members(coord_elect *e, coord_elect_member *out, size_t max);
/* The election of this process (the one coord_elect_start made and
 * coord_elect_stop has not stopped), or NULL. */
coord_elect *coord_elect_current(void);
/* 1 if this process may send directives now: it takes no part in an
 * election, or it leads and its lease deadline has not passed. Checked by
 * the move executor before every directive, so that a leader whose loop
 * was held in an etcd request past its deadline sends nothing before its
 * watch timer ends it. */
int coord_elect_may_act(void);
/* This process's id. */
const char *coord_elect_id(const coord_elect *e);

/* Starts the election thread. Errors: KEEL_EINVAL (bad config), KEEL_ENOMEM,
 * KEEL_EIO (thread or client). */
int coord_elect_start(const coord_elect_config *cfg, coord_elect **out, char *err, size_t cap);
/* Stops the thread; a leader revokes its lease (so a standby takes over
 * without waiting for the TTL). NULL is a no-op. */
void coord_elect_stop(coord_elect *e);
void coord_elect_get(coord_elect *e, coord_elect_view *v);
/* Blocks until this process leads (1), or timeout_ms passed (0). */
int coord_elect_wait(coord_elect *e, int timeout_ms);
/* From the loop thread: a timer that ends the process with
 * COORD_ELECT_EXIT_LOST as soon as it no longer leads. */
int coord_elect_watch(coord_elect *e, uv_loop_t *loop);
/* Closes that timer (at shutdown, before the loop ends); NULL is a no-op. */
void coord_elect_unwatch(coord_elect *e);

#endif
