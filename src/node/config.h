/* config.h - `keel node` settings and their command-line parsing.
 *
 * Parsing is pure: it never touches the data directory or a port, so a bad
 * flag is reported before anything is opened (the node checks the directory
 * next, still before listening).
 */
#ifndef KEEL_CONFIG_H
#define KEEL_CONFIG_H

#include <limits.h>
#include <stddef.h>

#include "core/addrlist.h"
#include "resp/resp.h"
#include "store/store.h"

typedef struct node_config {
    int port;                   /* client port (required) */
    char bind[64];              /* listen address, default 127.0.0.1 */
    char announce_host[64];     /* address put in -MOVED/CLUSTER output; default = bind */
    char dir[PATH_MAX];         /* data directory (required) */
    int own_all;                /* --own all */
    char coord_host[256];       /* --coord HOST:PORT[,...]: join a cluster; the first address */
    int coord_port;             /* 0 = no --coord */
    addrlist coords;            /* every --coord address, tried in order (core/addrlist.h) */
    char secret_file[PATH_MAX]; /* --secret-file, with --coord */
    char rack[65];              /* --rack, with --coord */
    double capacity;            /* --capacity, with --coord (default 1) */
    char map_file[PATH_MAX];    /* --map FILE */
    char id[65];                /* --id; generated and persisted when empty */
    unsigned partitions;        /* --partitions, for --own all; default 1024 */
    store_fsync fsync;          /* --fsync */
    int metrics_port;           /* --metrics-port, 0 = off */
    int partition_metrics;      /* --partition-metrics 0|1: per-partition series (default 1) */
    char requirepass[256];      /* --requirepass, "" = none */
    int maxclients;             /* --maxclients, default 10000 */
    size_t max_output;          /* per-client output backlog before reads pause */
    size_t block_cache_bytes; /* --block-cache-mb: RocksDB's block cache; 0 = the store's default */
    resp_limits limits;       /* --max-bulk, --max-args, --max-query */
    int log_level;            /* --log-level */
    char epoch_log[PATH_MAX]; /* --epoch-log: a line per accepted write (tests) */
    char audit_log[PATH_MAX]; /* --audit-log: a line per accepted directive (core/audit.h) */
    int hold_max_ms;          /* --hold-max-ms: fenced requests wait this long at most */
} node_config;

void node_config_default(node_config *c);
/* Parses argv[0..argc) (flags only, without "node"). Returns 0, or
 * KEEL_EINVAL with a one-line reason in err. */
int node_config_parse(node_config *c, int argc, char **argv, char *err, size_t errcap);
/* Usage text for `keel node --help`. */
const char *node_config_usage(void);

#endif
