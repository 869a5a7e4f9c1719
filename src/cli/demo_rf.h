/* demo_rf.h - the demo's node failure at RF > 1 (issue 11): after the join
 * has rebalanced, with the background load still writing, the node that
 * leads the most partitions is killed with SIGKILL. The demo then measures
 *
 *   failover     from the kill until a write to a partition the victim led
 *                is acknowledged again (a probe key of that partition,
 *                written through the demo's cluster client, which re-reads
 *                the slot table when a node stops answering);
 *   RF restored  from the kill until no partition lists the victim and
 *                every partition has RF replicas, all in sync (the demo
 *                sets node_dead_after_ms short, so the planner replaces the
 *                lost copies within the demo);
 *
 * and the demo's own verify step checks that no acknowledged write was lost.
 *
 * The coordinator is reached through a callback, so this module needs
 * nothing of demo.c but the JSON it asks for (PARTITIONS JSON).
 *
 * Threads: the demo's main thread only.
 */
#ifndef KEEL_DEMO_RF_H
#define KEEL_DEMO_RF_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/types.h>

/* The coordinator's JSON reply to cmd (caller deletes), or NULL. */
typedef cJSON *(*demo_rf_json_fn)(void *arg, const char *cmd);

typedef struct demo_rf {
    int rf; /* replicas; <= 1: nothing to do */
    long base, partitions;
    char victim[16];                 /* "n<i>" */
    int victim_index;                /* i, or 0 before the kill */
    int led;                         /* partitions it led at the kill */
    double failover_ms, restored_ms; /* -1: not seen within the wait */
} demo_rf;

/* The node leading the most partitions ("n<i>"): its index, or 0. */
int demo_rf_pick_victim(demo_rf *r, demo_rf_json_fn json, void *arg);
/* Kills pid (the victim's) with SIGKILL and measures the failover (up to
 * wait_ms) with a probe write; then waits up to restore_ms for RF to be
 * restored. nodes: the cluster's node count (ports base+1..base+nodes).
 * Returns 0 when both were seen, else -1 (figures left at -1). */
int demo_rf_kill_and_measure(demo_rf *r, pid_t pid, int nodes, demo_rf_json_fn json, void *arg,
                             int wait_ms, int restore_ms);

#endif
