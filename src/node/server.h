/* server.h - the node's event loop: listener, connections, group commit.
 *
 * One libuv loop thread does everything on the request path. Connections and
 * the turn structure live in net/rserver; the node plugs in command dispatch
 * (cmd.c) and, as the turn's before_flush hook, store_sync(): the turn's
 * writes become durable with one WAL write (and one fsync) before any reply
 * of the turn leaves. So no reply ever reveals data that is not yet durable,
 * and N pipelined or concurrent writes cost one WAL sync.
 */
#ifndef KEEL_SERVER_H
#define KEEL_SERVER_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "core/buf.h"
#include "core/peerauth.h"
#include "node/config.h"
#include "node/loopstat.h"
#include "node/metrics.h"
#include "net/rserver.h"
#include "node/ptable.h"
#include "resp/resp.h"
#include "store/store.h"

typedef struct http_server http_server;
typedef struct coordlink coordlink;
typedef struct moves moves;
typedef struct watch_tab watch_tab;
typedef struct walsync walsync;

typedef struct server {
    uv_loop_t *loop;
    node_config cfg;
    store *st;
    walsync *wsync; /* WAL fsyncs off the loop (walsync.h) */
    ptable *pt;
    metrics *mx;
    loopstat *loops; /* busy time of each loop turn; NULL once stopping */
    rserver *rs;
    http_server *http;
    uv_timer_t sweep_timer;
    uv_timer_t gc_timer; /* store_gc: fields of deleted compound keys */
    uv_timer_t second_timer;
    uv_signal_t sigint, sigterm;
    int64_t start_ms;
    uint64_t expired_keys;
    uint64_t last_fsync_us;
    int stopping;
    char runid[41];
    coordlink *link; /* --coord: the link to the coordinator */
    kbuf first_map;  /* --coord: the first map, before the table exists */
    int have_first_map;
    peerauth_secret secret; /* --coord: the cluster secret */
    int have_secret;
    moves *mv;                /* --coord: the move protocol (move.h) */
    struct node_rep *rep;     /* --coord: replication (rep_uv.h) */
    char incarnation[17];     /* this process's, hex (replication contract C3) */
    uv_timer_t handoff_timer; /* SIGTERM: bounds the wait for KEEL.REP.HANDOFF */
    uv_timer_t handoff_poll;  /* ...and paces its KEEL.REP.HANDOFF STATUS polls */
    int handing_off;          /* SIGTERM seen, waiting for the hand-off */
    int handoff_held;         /* an older coordinator: the plain, held form */
    char stop_why[64];
    char coord_pub[64 + 1];     /* --coord: the pinned coordinator key (hex), "" until first join */
    FILE *epoch_log;            /* --epoch-log */
    watch_tab *watch;           /* WATCHed keys (multi.c), NULL until the first WATCH */
    struct cmdstats *cstats;    /* INFO commandstats/errorstats (cmdstats.c), lazily */
    struct param_state *params; /* CONFIG parameters (cmd_config.c), lazily */
    struct monitor_list *monitors; /* MONITOR clients (cmd_client.c), lazily */
    struct access_table *access;   /* OBJECT IDLETIME/FREQ clock (access.c), lazily */
    struct slowlog *slowlog;       /* SLOWLOG (slowlog.c), lazily */
    struct latency_mon *latency;   /* LATENCY events (latency.c), lazily */
    struct save_state *save;       /* SAVE/BGSAVE/LASTSAVE/SHUTDOWN (cmd_save.c), lazily */
    struct migrate_state *migrate; /* MIGRATE jobs in flight (cmd_migrate.c), lazily */
    unsigned config_gen;           /* bumped by every applied CONFIG SET */
    uint64_t handler_calls;        /* handlers run (cmd_call), for cmd_dispatch */
    struct blocking *blk;          /* clients blocked on keys (blocking.c), NULL until the first */
    uint64_t hb_lat_prev[HISTOGRAM_BUCKETS + 1]; /* latency counts at the last heartbeat */
} server;

/* Opens the store, builds the partition table, binds the ports and runs the
 * loop until SIGINT/SIGTERM. Everything that can fail on configuration
 * (directory, map file, id) fails before any port is opened. Returns the
 * process exit status. */
int server_run(const node_config *cfg);
/* Stops the node gracefully, what SIGTERM/SIGINT do: the turn's replies go
 * out after their sync, listeners and connections close, the coordinator
 * (--coord) is told at once, timers stop; server_run then closes the store
 * (WAL fsynced) and returns 0. why ("signal=...") goes to the log. Loop
 * thread, outside any command handler (SHUTDOWN defers it: cmd_save.c).
 * A second call does nothing. */
void server_stop(server *s, const char *why);
/* Frees the command layer's lazily made state of s (INFO commandstats,
 * CONFIG parameters, MONITOR clients, the access clock, SLOWLOG, LATENCY)
 * and sets the pointers to NULL. For server_run's exit and for tests that
 * run commands on a server struct of their own. */
void server_cmd_state_free(server *s);

/* Keys and bytes of partition p on this node (sums over its slots), and
 * whether it is worth reporting: served here, or still holding data. */
int node_partition_totals(const server *s, unsigned p, uint64_t *keys, uint64_t *bytes);

#endif
