/* metrics.c - see metrics.h. Buckets are fixed and shared by every histogram,
 * from 50 us to 2.5 s, so the hot path is a short scan of constants. */
#include "node/metrics.h"

#include <math.h>
#include <stdlib.h>

const double metrics_bounds[METRICS_BUCKETS] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                                0.5,     1.0,    2.5,     5.0};

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

void metrics_observe(histogram *h, double s) {
    int i = 0;
    while (i < METRICS_BUCKETS && s > metrics_bounds[i])
        i++;
    h->count[i]++;
    h->total++;
    h->sum_s += s;
}

static void hist_add(histogram *h, uint64_t us) {
    metrics_observe(h, (double)us / 1e6);
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

void metrics_write_histogram(kbuf *b, const char *name, const char *labels, const histogram *h) {
    const char *sep = labels[0] ? "," : "";
    uint64_t cum = 0;
    for (int i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->count[i];
        kbuf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, metrics_bounds[i],
                    (unsigned long long)cum);
    }
    kbuf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                (unsigned long long)h->total);
    kbuf_printf(b, "%s_sum%s%s%s %.9f\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
                h->sum_s);
    kbuf_printf(b, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels,
                labels[0] ? "}" : "", (unsigned long long)h->total);
}
