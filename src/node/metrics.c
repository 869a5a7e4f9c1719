/* metrics.c - see metrics.h. Histograms are core/histogram.h's. */
#include "node/metrics.h"

#include <math.h>
#include <stdlib.h>

metrics *metrics_new(unsigned partitions) {
    metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->partitions = partitions;
    m->part_ops = calloc(partitions, sizeof *m->part_ops);
    m->part_ops_prev = calloc(partitions, sizeof *m->part_ops_prev);
    m->part_rate = calloc(partitions, sizeof *m->part_rate);
    if (!m->part_ops || !m->part_ops_prev || !m->part_rate) {
        metrics_free(m);
        return NULL;
    }
    return m;
}

void metrics_free(metrics *m) {
    if (!m) return;
    free(m->part_ops);
    free(m->part_ops_prev);
    free(m->part_rate);
    free(m);
}

static void hist_add(histogram *h, uint64_t us) {
    histogram_observe(h, (double)us / 1e6);
}

void metrics_op(metrics *m, int cls, int partition, uint64_t us) {
    m->ops[cls]++;
    hist_add(&m->latency[cls], us);
    if (partition >= 0 && (unsigned)partition < m->partitions) m->part_ops[partition]++;
}

void metrics_fsync(metrics *m, uint64_t us) {
    hist_add(&m->fsync, us);
}

void metrics_tick(metrics *m, double dt_s) {
    if (dt_s <= 0) return;
    double alpha = 1.0 - exp(-dt_s / 5.0);
    for (unsigned p = 0; p < m->partitions; p++) {
        double inst = (double)(m->part_ops[p] - m->part_ops_prev[p]) / dt_s;
        m->part_rate[p] += alpha * (inst - m->part_rate[p]);
        if (m->part_rate[p] < 1e-3) m->part_rate[p] = 0;
        m->part_ops_prev[p] = m->part_ops[p];
    }
}
