/* histogram.h - fixed-bucket latency histograms and their Prometheus text.
 *
 * Buckets are fixed and shared by every histogram, from 50 us to 5 s, so an
 * observation is a short scan of constants. Used by the node's metrics and
 * by the coordinator (write pauses). Not thread-safe: one owner thread.
 */
#ifndef KEEL_HISTOGRAM_H
#define KEEL_HISTOGRAM_H

#include <stdint.h>

#include "core/buf.h"

#define HISTOGRAM_BUCKETS 16

typedef struct histogram {
    uint64_t count[HISTOGRAM_BUCKETS + 1]; /* last = +Inf */
    uint64_t total;
    double sum_s;
} histogram;

/* Upper bounds of the buckets, seconds. */
extern const double histogram_bounds[HISTOGRAM_BUCKETS];

/* Adds one observation of `seconds` to h. */
void histogram_observe(histogram *h, double seconds);
/* Appends h in Prometheus text form (name_bucket, _sum, _count); labels may
 * be "" or "class=\"read\"". */
void histogram_write(kbuf *b, const char *name, const char *labels, const histogram *h);

#endif
