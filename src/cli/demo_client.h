/* demo_client.h - the demo's cluster client and its background load.
 *
 * dcc is a small Redis Cluster client over hiredis: it routes each key by
 * slot from CLUSTER SLOTS, follows -MOVED (updating its slot table), retries
 * -TRYAGAIN and lost connections with a short backoff, reads the slot table
 * again from another node when one stops answering (a leader killed: its
 * partitions fail over), and counts what it could not get done within 15 s
 * as a client error. Enough for the demo and its checks;
 * not a general client.
 *
 * dload runs in a thread: a steady mixed load (a SET of a unique value, then
 * a GET of a loaded key) that records the last acknowledged value of every
 * key it writes and the latency of every operation, split by phase, so the
 * demo can report latency before and during a rebalance and check afterwards
 * that no acknowledged write was lost.
 */
#ifndef KEEL_DEMO_CLIENT_H
#define KEEL_DEMO_CLIENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define DCC_MAX_NODES 16

typedef struct dcc {
    int base;                     /* nodes listen on base + 1 .. base + DCC_MAX_NODES */
    int nodes;                    /* asked for the slot table: base + 1 .. base + nodes */
    uint16_t slot_port[16384];    /* 0 = unknown */
    void *ctx[DCC_MAX_NODES + 1]; /* redisContext per node index */
    uint64_t moved, tryagain, reconnects, errors;
    char last_error[160]; /* why the last give-up gave up */
} dcc;

/* Learns the slot table from any node that answers. Returns slots known. */
int dcc_init(dcc *c, int base, int nodes);
void dcc_close(dcc *c);
/* One command on key (argv[1] must be the key). Follows -MOVED (pausing
 * 2 ms from the third redirect of one command on: during a leadership change
 * the old and the new leader can point at each other until both have the
 * new map) and retries -TRYAGAIN and lost connections for up to 15 s.
 * Returns the reply (caller frees with freeReplyObject) or NULL after giving
 * up (counted in errors, the reason in last_error). */
void *dcc_command(dcc *c, int argc, const char **argv, const size_t *lens);

enum { DLOAD_BEFORE, DLOAD_DURING, DLOAD_AFTER, DLOAD_PHASES };

typedef struct dload_lat {
    uint32_t *us; /* latencies in microseconds */
    size_t n, cap;
} dload_lat;

typedef struct dload {
    dcc c;
    int base, nodes;
    long loaded_keys; /* demo:0 .. demo:<loaded-1> hold "value-<i>" */
    long keys;        /* the writer's own keys: demo:w:0 .. demo:w:<keys-1> */
    uint64_t *last;   /* [keys] last acknowledged value number, 0 = none */
    uint64_t seq;     /* value numbers, unique */
    volatile int phase, stop;
    dload_lat lat[DLOAD_PHASES];
    uint64_t ops[DLOAD_PHASES];
    uint64_t wrong_reads; /* a loaded key that read back wrong */
    pthread_t thread;
} dload;

int dload_start(dload *l, int base, int nodes, long loaded_keys, long keys);
/* Stops the thread (joins it). */
void dload_stop(dload *l);
void dload_free(dload *l);
/* Percentile (0..100) of a phase's latencies in ms; 0 with no samples. */
double dload_pct(dload *l, int phase, double pct);
double dload_max(dload *l, int phase);

#endif
