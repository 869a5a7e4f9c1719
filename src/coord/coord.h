/* coord.h - `keel coord`: the control plane (DESIGN.md §7, §9).
 *
 * The coordinator is the only durable authority for the cluster map. It keeps
 * the map in a mapstore (SQLite), authenticates peers with the cluster
 * secret (core/peerauth), tracks membership from heartbeats, places
 * partitions when the first nodes join, and serves admin commands (STATUS,
 * NODES, PARTITIONS) to operators over RESP on the same port.
 *
 * On-disk layout of --dir:
 *   map.db          the map store (mapstore_sqlite), unless --etcd
 *   etcd.cluster    with --etcd: the id of the cluster made by --init, which
 *                   the map under --etcd-prefix must have (mapstore_etcd)
 *   cluster.secret  32 random bytes as hex, mode 0600 (peerauth)
 *
 * With --etcd the map store is mapstore_etcd (docs/mapstore.md); with --id
 * as well, the process first waits as a standby until it wins the election
 * (coord_elect.h) and exits with status 3 when it stops leading.
 *
 * Threads: one libuv loop thread (plus the etcd clients' and the election's
 * internal threads).
 */
#ifndef KEEL_COORD_H
#define KEEL_COORD_H

#include <limits.h>
#include <stddef.h>

typedef struct coord_config {
    char dir[PATH_MAX];
    int init;            /* --init: create a cluster and exit */
    unsigned partitions; /* --partitions: P for --init (default 1024); when given to a
                            running coordinator, the store must have this P */
    int partitions_given;
    int port;              /* --port */
    int http_port;         /* --http-port, 0 = off */
    char bind[64];         /* --bind, default 127.0.0.1 */
    char requirepass[256]; /* --requirepass */
    int log_level;
    char etcd[1024];          /* --etcd URL[,URL...]: the map store on etcd; "" = SQLite */
    char etcd_prefix[129];    /* --etcd-prefix, default MAPSTORE_ETCD_DEFAULT_PREFIX */
    int etcd_timeout_ms;      /* --etcd-timeout-ms, default MAPSTORE_ETCD_DEFAULT_TIMEOUT_MS */
    char id[65];              /* --id C: leader election among coordinators (coord_elect.h) */
    int lease_ttl_s;          /* --lease-ttl-s, default COORD_ELECT_DEFAULT_TTL_S */
    int replicas;             /* --replicas RF for --init (0: COORD_RF_DEFAULT, coord_rf.h) */
    int min_insync;           /* --min-insync for --init (0: the default for RF) */
    char audit_log[PATH_MAX]; /* --audit-log: a line per map-store write (core/audit.h) */
} coord_config;

void coord_config_default(coord_config *c);
/* Parses `keel coord` flags. Returns 0 or KEEL_EINVAL with a reason. */
int coord_config_parse(coord_config *c, int argc, char **argv, char *err, size_t errcap);
const char *coord_usage(void);

/* --init: creates DIR/map.db and DIR/cluster.secret; refuses if either
 * exists. Returns the process exit status. */
int coord_init(const coord_config *c);
/* Runs the coordinator until SIGINT/SIGTERM. Returns the exit status. */
int coord_run(const coord_config *c);

#endif
