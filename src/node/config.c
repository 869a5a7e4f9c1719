/* config.c - `keel node` flag parsing; see config.h. Flags are table-driven:
 * each entry names its flag, whether it takes a value, and a setter that
 * validates the value and reports a precise error. */
#include "node/config.h"
#include "core/err.h"
#include "core/id.h"
#include "core/num.h"
#include "core/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void node_config_default(node_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->bind, sizeof c->bind, "127.0.0.1");
    c->partitions = 1024;
    c->fsync = STORE_FSYNC_ALWAYS;
    c->maxclients = 10000;
    c->max_output = 64u << 20;
    c->hold_max_ms = 2000;
    c->partition_metrics = 1;
    resp_limits_default(&c->limits);
    c->log_level = KEEL_LOG_INFO;
    c->capacity = 1;
}

static int parse_ll(const char *s, long long lo, long long hi, long long *out) {
    int64_t v;
    if (keel_parse_i64z(s, &v) || v < lo || v > hi) return KEEL_EINVAL;
    *out = v;
    return 0;
}

typedef int (*flag_setter)(node_config *c, const char *v, char *err, size_t cap);

static int set_int_range(int *dst, const char *flag, const char *v, long long lo, long long hi,
                         char *err, size_t cap) {
    long long x;
    if (parse_ll(v, lo, hi, &x)) {
        snprintf(err, cap, "%s must be an integer from %lld to %lld, got '%s'", flag, lo, hi, v);
        return KEEL_EINVAL;
    }
    *dst = (int)x;
    return 0;
}

static int set_size(size_t *dst, const char *flag, const char *v, char *err, size_t cap) {
    long long x;
    if (parse_ll(v, 1, (long long)1 << 40, &x)) {
        snprintf(err, cap, "%s must be a positive byte count, got '%s'", flag, v);
        return KEEL_EINVAL;
    }
    *dst = (size_t)x;
    return 0;
}

static int set_str(char *dst, size_t dcap, const char *flag, const char *v, char *err, size_t cap) {
    if (!*v || strlen(v) >= dcap) {
        snprintf(err, cap, "%s must be a non-empty string shorter than %zu bytes", flag, dcap);
        return KEEL_EINVAL;
    }
    snprintf(dst, dcap, "%s", v);
    return 0;
}

static int f_port(node_config *c, const char *v, char *e, size_t n) {
    return set_int_range(&c->port, "--port", v, 1, 65535, e, n);
}
static int f_metrics(node_config *c, const char *v, char *e, size_t n) {
    return set_int_range(&c->metrics_port, "--metrics-port", v, 1, 65535, e, n);
}
static int f_partition_metrics(node_config *c, const char *v, char *e, size_t n) {
    return set_int_range(&c->partition_metrics, "--partition-metrics", v, 0, 1, e, n);
}
static int f_maxclients(node_config *c, const char *v, char *e, size_t n) {
    return set_int_range(&c->maxclients, "--maxclients", v, 1, 1000000, e, n);
}
static int f_dir(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->dir, sizeof c->dir, "--dir", v, e, n);
}
static int f_bind(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->bind, sizeof c->bind, "--bind", v, e, n);
}
static int f_announce(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->announce_host, sizeof c->announce_host, "--announce-host", v, e, n);
}
static int f_map(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->map_file, sizeof c->map_file, "--map", v, e, n);
}
static int f_pass(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->requirepass, sizeof c->requirepass, "--requirepass", v, e, n);
}
static int f_id(node_config *c, const char *v, char *e, size_t n) {
    if (!keel_id_validz(v) || strlen(v) > KEEL_ID_MAX) {
        snprintf(e, n, "--id must match " KEEL_ID_RULE ", got '%.80s'", v);
        return KEEL_EINVAL;
    }
    return set_str(c->id, sizeof c->id, "--id", v, e, n);
}
static int f_own(node_config *c, const char *v, char *e, size_t n) {
    if (strcmp(v, "all") != 0) {
        snprintf(e, n, "--own takes only 'all' (use --map FILE for anything else), got '%s'", v);
        return KEEL_EINVAL;
    }
    c->own_all = 1;
    return 0;
}
static int f_partitions(node_config *c, const char *v, char *e, size_t n) {
    long long x;
    if (parse_ll(v, 16, 16384, &x) || (x & (x - 1))) {
        snprintf(e, n, "--partitions must be a power of two from 16 to 16384, got '%s'", v);
        return KEEL_EINVAL;
    }
    c->partitions = (unsigned)x;
    return 0;
}
static int f_fsync(node_config *c, const char *v, char *e, size_t n) {
    if (store_fsync_parse(v, &c->fsync)) {
        snprintf(e, n, "--fsync must be always, everysec or no, got '%s'", v);
        return KEEL_EINVAL;
    }
    return 0;
}
static int f_loglevel(node_config *c, const char *v, char *e, size_t n) {
    if (keel_log_parse_level(v, &c->log_level)) {
        snprintf(e, n, "--log-level must be debug, info, warn or error, got '%s'", v);
        return KEEL_EINVAL;
    }
    return 0;
}
static int f_coord(node_config *c, const char *v, char *e, size_t n) {
    char why[384];
    if (addrlist_parse(v, &c->coords, why, sizeof why)) {
        snprintf(e, n, "--coord must be HOST:PORT[,HOST:PORT...] (at most %d): %s", ADDRLIST_MAX,
                 why);
        return KEEL_EINVAL;
    }
    snprintf(c->coord_host, sizeof c->coord_host, "%s", c->coords.a[0].host);
    c->coord_port = c->coords.a[0].port;
    return 0;
}
static int f_secret(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->secret_file, sizeof c->secret_file, "--secret-file", v, e, n);
}
static int f_rack(node_config *c, const char *v, char *e, size_t n) {
    if (strpbrk(v, " \t\r\n")) {
        snprintf(e, n, "--rack must not contain spaces");
        return KEEL_EINVAL;
    }
    return set_str(c->rack, sizeof c->rack, "--rack", v, e, n);
}
static int f_capacity(node_config *c, const char *v, char *e, size_t n) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= 0) || x > 1e9) {
        snprintf(e, n, "--capacity must be a number >= 0, got '%s'", v);
        return KEEL_EINVAL;
    }
    c->capacity = x;
    return 0;
}
static int f_max_bulk(node_config *c, const char *v, char *e, size_t n) {
    return set_size(&c->limits.max_bulk, "--max-bulk", v, e, n);
}
static int f_max_args(node_config *c, const char *v, char *e, size_t n) {
    return set_size(&c->limits.max_args, "--max-args", v, e, n);
}
static int f_max_query(node_config *c, const char *v, char *e, size_t n) {
    return set_size(&c->limits.max_query, "--max-query", v, e, n);
}
static int f_max_output(node_config *c, const char *v, char *e, size_t n) {
    return set_size(&c->max_output, "--max-output", v, e, n);
}

static int f_block_cache(node_config *c, const char *v, char *e, size_t n) {
    long long x;
    if (parse_ll(v, 8, 1 << 20, &x)) {
        snprintf(e, n, "--block-cache-mb must be 8..1048576 (MiB), got '%s'", v);
        return KEEL_EINVAL;
    }
    c->block_cache_bytes = (size_t)x << 20;
    return 0;
}

static int f_hold_max(node_config *c, const char *v, char *e, size_t n) {
    long long x;
    if (parse_ll(v, 1, 600000, &x)) {
        snprintf(e, n, "--hold-max-ms must be 1..600000, got '%s'", v);
        return KEEL_EINVAL;
    }
    c->hold_max_ms = (int)x;
    return 0;
}

static int f_epoch_log(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->epoch_log, sizeof c->epoch_log, "--epoch-log", v, e, n);
}

static int f_audit_log(node_config *c, const char *v, char *e, size_t n) {
    return set_str(c->audit_log, sizeof c->audit_log, "--audit-log", v, e, n);
}

static const struct {
    const char *name;
    flag_setter set;
} flags[] = {
    {"--epoch-log", f_epoch_log},
    {"--audit-log", f_audit_log},
    {"--hold-max-ms", f_hold_max},
    {"--port", f_port},
    {"--dir", f_dir},
    {"--bind", f_bind},
    {"--announce-host", f_announce},
    {"--own", f_own},
    {"--map", f_map},
    {"--id", f_id},
    {"--partitions", f_partitions},
    {"--fsync", f_fsync},
    {"--metrics-port", f_metrics},
    {"--partition-metrics", f_partition_metrics},
    {"--requirepass", f_pass},
    {"--maxclients", f_maxclients},
    {"--max-bulk", f_max_bulk},
    {"--max-args", f_max_args},
    {"--max-query", f_max_query},
    {"--max-output", f_max_output},
    {"--block-cache-mb", f_block_cache},
    {"--log-level", f_loglevel},
    {"--coord", f_coord},
    {"--secret-file", f_secret},
    {"--rack", f_rack},
    {"--capacity", f_capacity},
};

int node_config_parse(node_config *c, int argc, char **argv, char *err, size_t cap) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[64];
        const char *eq = strchr(a, '=');
        if (eq && (size_t)(eq - a) < sizeof name) { /* --flag=value */
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        size_t k = 0, nflags = sizeof flags / sizeof *flags;
        while (k < nflags && strcmp(flags[k].name, name) != 0)
            k++;
        if (k == nflags) {
            snprintf(err, cap, "unknown flag '%s' (see keel node --help)", a);
            return KEEL_EINVAL;
        }
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, cap, "%s needs a value", name);
                return KEEL_EINVAL;
            }
            val = argv[++i];
        }
        if (flags[k].set(c, val, err, cap)) return KEEL_EINVAL;
    }
    if (!c->port) return snprintf(err, cap, "--port is required"), KEEL_EINVAL;
    if (!c->dir[0]) return snprintf(err, cap, "--dir is required"), KEEL_EINVAL;
    int modes = c->own_all + (c->map_file[0] != 0) + (c->coord_port != 0);
    if (modes > 1)
        return snprintf(err, cap, "--own all, --map and --coord are mutually exclusive"),
               KEEL_EINVAL;
    if (!modes)
        return snprintf(err, cap, "give --own all, --map FILE or --coord HOST:PORT"), KEEL_EINVAL;
    if (c->coord_port && !c->secret_file[0])
        return snprintf(err, cap, "--coord needs --secret-file (the cluster secret)"), KEEL_EINVAL;
    if (c->map_file[0] && !c->id[0])
        return snprintf(err, cap, "--map needs --id naming this node in the map"), KEEL_EINVAL;
    if (c->metrics_port && c->metrics_port == c->port)
        return snprintf(err, cap, "--metrics-port must differ from --port"), KEEL_EINVAL;
    if (!c->announce_host[0]) snprintf(c->announce_host, sizeof c->announce_host, "%s", c->bind);
    return 0;
}

const char *node_config_usage(void) {
    return "usage: keel node --port N --dir DIR (--own all | --map FILE --id ID |\n"
           "                 --coord HOST:PORT[,HOST:PORT...] --secret-file FILE [--id ID]) "
           "[options]\n"
           "  --rack R, --capacity C      with --coord: placement hints (capacity default 1)\n"
           "  --fsync always|everysec|no  WAL sync policy (default always: group commit)\n"
           "  --bind ADDR                 listen address (default 127.0.0.1)\n"
           "  --announce-host HOST        address clients are redirected to (default --bind)\n"
           "  --partitions P              partitions for --own all (default 1024)\n"
           "  --metrics-port M            serve Prometheus text at http://ADDR:M/metrics\n"
           "  --partition-metrics 0|1     export the per-partition series (default 1; 0 keeps\n"
           "                              the page small when P is large)\n"
           "  --requirepass PW            require AUTH PW from clients\n"
           "  --maxclients N              connection limit (default 10000)\n"
           "  --max-bulk BYTES            longest bulk string (default 536870912)\n"
           "  --max-args N                most arguments per request (default 1048576)\n"
           "  --max-query BYTES           most bytes buffered per request (default 1 GiB)\n"
           "  --max-output BYTES          output backlog before a client's reads pause\n"
           "  --block-cache-mb N          RocksDB block cache in MiB (default 64)\n"
           "  --hold-max-ms MS            longest a request waits on a moving partition\n"
           "                              before -TRYAGAIN (default 2000)\n"
           "  --epoch-log FILE            append \"<unix-us> <partition> <epoch> <node>\" for\n"
           "                              every write served (for ownership checkers)\n"
           "  --audit-log FILE            append a line per directive accepted from the\n"
           "                              coordinator, with its term (core/audit.h)\n"
           "  --log-level L               debug|info|warn|error (default info)\n";
}
