/* cluster.h - the node's side of a coordinated cluster (--coord): the first
 * map at start-up, map directives at run time, metrics for heartbeats. */
#ifndef KEEL_CLUSTER_H
#define KEEL_CLUSTER_H

#include <stddef.h>

#include "node/server.h"

/* Loads the cluster secret, starts the coordinator link and produces the
 * map to start with: the one persisted in the data directory, or else the
 * first one the coordinator sends (running the loop until it arrives or a
 * signal stops the node). Returns 0 with *m filled, or a negative KEEL_E*
 * with a reason in err. */
int node_cluster_start(server *s, keel_map *m, char *err, size_t cap);
/* Installs a map (JSON) pushed by the coordinator: parsed, refused if older
 * than the current one (or of another partition count), written to the
 * store's WAL, then applied, after which the move protocol settles any
 * partition the map committed (move_map_changed) and replication
 * reconfigures; one fsync at the end makes the map and replication's records
 * durable before anything that acts on them leaves the process (a failed
 * sync stops the node). Must run inside one callback: nothing may be sent
 * between the save and that sync. Returns 1 if installed, 0 if it was not
 * newer than the current map (not an error: the same map arrives by
 * heartbeat and by directive), or a negative KEEL_E* with a reason in err. */
int node_install_map(server *s, const char *json, size_t len, char *err, size_t cap);
/* Tells the coordinator we are leaving (if leave) and drops the link. */
void node_cluster_stop(server *s, int leave);

#endif
