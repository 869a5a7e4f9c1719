/* coord_rf.h - the replication settings of a cluster and the one switch
 * that says which replication factors Keel serves (issue 11 step 1,
 * docs/replication.md).
 *
 * Two cluster settings, kept in the map store like every other setting:
 *   replicas    RF, copies of each partition, 1..KEEL_RF_MAX
 *   min_insync  in-sync copies a write needs, 1..RF; default 2 for
 *               RF >= 3, else RF (issue 11)
 * `keel coord --init --replicas RF [--min-insync N]` records both;
 * `keel set replicas N` and `keel set min_insync N` change them, through
 * coord_rf_check_change, which keeps 1 <= min_insync <= replicas.
 *
 * The switch. COORD_RF_SERVED_MAX is the largest RF a cluster may be set
 * to: KEEL_RF_MAX since step 4 (the coordinator's placement, ISR, leases
 * and failover, docs/replication.md) joined the node's write path (step
 * 3). COORD_RF_DEFAULT is the 3 (min_insync 2); a cluster that
 * should keep one copy says --replicas 1 at --init.
 *
 * Threads: the coordinator's loop thread (the map store handle's).
 */
#ifndef KEEL_COORD_RF_H
#define KEEL_COORD_RF_H

#include <stddef.h>

#include "coord/mapstore.h"
#include "core/mapcodec.h"

#define COORD_RF_SERVED_MAX KEEL_RF_MAX
#define COORD_RF_DEFAULT 3 /* issue 11: three copies, min_insync 2 */

struct coord;

/* The default min_insync for RF rf: 2 for rf >= 3, else rf. */
int coord_rf_default_min_insync(int rf);

/* 0 if (rf, min_insync) may be set: 1 <= min_insync <= rf <= KEEL_RF_MAX
 * and rf <= COORD_RF_SERVED_MAX. Else KEEL_EINVAL and a one-line reason in
 * err[0..cap) naming the flags or settings (what = "--replicas" style
 * prefix for --init, or "" for keel set). */
int coord_rf_validate(int rf, int min_insync, int for_init, char *err, size_t cap);

/* The cluster's settings as they stand (stored, or the defaults). */
void coord_rf_get(struct coord *co, int *rf, int *min_insync);

/* For `keel set` / SETTING: if name is "replicas" or "min_insync", checks
 * the change (value NULL: a reset to the default) against the other
 * setting and writes 0, or KEEL_EINVAL with "ERR ..." in msg. Any other
 * name: 0. Does not write the store. */
int coord_rf_check_change(struct coord *co, const char *name, const char *value, char *msg,
                          size_t cap);

/* Partition p of the store as a map_rep of m (node indexes of m): replicas
 * whose node m does not list (removed nodes) are left out. Returns 0, or
 * KEEL_ENOTFOUND when p is unowned or its leader is not listed (the map
 * writes it unowned then). */
int coord_rf_map_rep(const keel_map *m, const mapstore_partition *p, map_rep *out);

/* Counts, over the owned partitions, those with fewer replicas than rf
 * and those with an ISR smaller than min_insync. */
void coord_rf_counts(const mapstore_partition *parts, size_t n, int rf, int min_insync,
                     size_t *under_replicated, size_t *under_min_isr);

#endif
