/* detector.c - see detector.h for the rules. */
#include "coord/detector.h"

static int64_t silence(int64_t now, int64_t since, const detector_node *d) {
    return now - (d->last_heard_ms > since ? d->last_heard_ms : since);
}

static mapstore_liveness verdict(const detector_policy *p, int64_t now, int64_t since,
                                 const detector_node *d) {
    if (d->removed || d->liveness == MAPSTORE_NODE_DOWN) return d->liveness;
    int64_t silent = silence(now, since, d);
    if (silent > p->dead_after_ms) return MAPSTORE_NODE_DOWN;
    if (silent > p->suspect_after_ms) return MAPSTORE_NODE_SUSPECT;
    return d->liveness; /* UP stays UP; SUSPECT stays SUSPECT until a heartbeat */
}

void detector_judge(const detector_policy *p, int64_t now_ms, int64_t since_ms, int was_held,
                    const detector_node *nodes, size_t n, mapstore_liveness *to,
                    detector_result *res) {
    detector_result r = {0};
    int64_t late = p->late_after_ms > 0 ? p->late_after_ms : p->suspect_after_ms / 2;
    for (size_t i = 0; i < n; i++) {
        to[i] = verdict(p, now_ms, since_ms, &nodes[i]);
        if (nodes[i].removed || nodes[i].liveness == MAPSTORE_NODE_DOWN) continue;
        r.judged++;
        r.looks_dead += to[i] != MAPSTORE_NODE_UP || silence(now_ms, since_ms, &nodes[i]) > late;
        r.changed += to[i] != nodes[i].liveness;
    }
    r.held = r.changed && r.judged >= p->hold_min_nodes &&
             (double)r.looks_dead > p->hold_ratio * (double)r.judged;
    r.released = was_held && !r.held;
    if (r.held || r.released) {
        for (size_t i = 0; i < n; i++)
            to[i] = nodes[i].liveness;
        r.changed = 0;
    }
    if (res) *res = r;
}
