/* histogram.c - see histogram.h. */
#include "core/histogram.h"

const double histogram_bounds[HISTOGRAM_BUCKETS] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                    0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                                    0.5,     1.0,    2.5,     5.0};

void histogram_observe(histogram *h, double s) {
    int i = 0;
    while (i < HISTOGRAM_BUCKETS && s > histogram_bounds[i])
        i++;
    h->count[i]++;
    h->total++;
    h->sum_s += s;
}

void histogram_write(kbuf *b, const char *name, const char *labels, const histogram *h) {
    const char *sep = labels[0] ? "," : "";
    uint64_t cum = 0;
    for (int i = 0; i < HISTOGRAM_BUCKETS; i++) {
        cum += h->count[i];
        kbuf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, histogram_bounds[i],
                    (unsigned long long)cum);
    }
    kbuf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                (unsigned long long)h->total);
    kbuf_printf(b, "%s_sum%s%s%s %.9f\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
                h->sum_s);
    kbuf_printf(b, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels,
                labels[0] ? "}" : "", (unsigned long long)h->total);
}
