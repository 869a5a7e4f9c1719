/* metrics.h - counters and histograms of one node, and their Prometheus text.
 *
 * Updated only on the loop thread; rendered on the loop thread too (the HTTP
 * thread asks the loop for a rendering, see http.h), so nothing here needs a
 * lock.
 */
#ifndef KEEL_METRICS_H
#define KEEL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/histogram.h"

typedef struct metrics {
    unsigned partitions;
    uint64_t ops[3];         /* by cmd_class */
    histogram latency[3];    /* by cmd_class, seconds */
    histogram fsync;         /* seconds */
    uint64_t *part_ops;      /* [partitions] since start */
    uint64_t *part_ops_prev; /* at the last tick */
    double *part_rate;       /* [partitions] smoothed ops/s */
} metrics;

/* NULL on out-of-memory. */
metrics *metrics_new(unsigned partitions);
void metrics_free(metrics *m);
/* Records one command of class cls (0..2) on partition p (or -1) that took
 * us microseconds. */
void metrics_op(metrics *m, int cls, int partition, uint64_t us);
void metrics_fsync(metrics *m, uint64_t us);
/* Folds the ops since the last tick into the per-partition rates; dt_s is
 * the time since the last tick. Exponential smoothing, ~5 s horizon. */
void metrics_tick(metrics *m, double dt_s);

#endif
