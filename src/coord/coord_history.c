/* coord_history.c - two fixed rings; see coord_history.h.
 *
 * Each ring is an array with a count and the index of its oldest entry, so
 * the i-th oldest entry is at (first + i) % capacity. Nothing is allocated
 * after coord_history_new: the bound stated in the header is the whole
 * cost, however long the coordinator runs.
 */
#include "coord/coord_history.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>

struct coord_history {
    history_sample samples[HISTORY_SAMPLES];
    size_t first, count;
    history_event events[HISTORY_EVENTS];
    size_t efirst, ecount;
    char cols[HISTORY_NODES][HISTORY_ID_MAX + 1];
    size_t ncols;
};

coord_history *coord_history_new(void) {
    return calloc(1, sizeof(coord_history));
}

void coord_history_free(coord_history *h) {
    free(h);
}

size_t coord_history_bytes(void) {
    return sizeof(coord_history);
}

int coord_history_column(coord_history *h, const char *id) {
    if (strlen(id) > HISTORY_ID_MAX) return KEEL_EINVAL;
    for (size_t c = 0; c < h->ncols; c++)
        if (!strcmp(h->cols[c], id)) return (int)c;
    if (h->ncols == HISTORY_NODES) return KEEL_ELIMIT;
    strcpy(h->cols[h->ncols], id);
    return (int)h->ncols++;
}

size_t coord_history_ncols(const coord_history *h) {
    return h->ncols;
}

const char *coord_history_col_id(const coord_history *h, size_t c) {
    return c < h->ncols ? h->cols[c] : NULL;
}

void coord_history_add(coord_history *h, const history_sample *s) {
    if (h->count && s->t_ms < coord_history_at(h, h->count - 1)->t_ms) h->first = h->count = 0;
    if (h->count < HISTORY_SAMPLES) {
        h->samples[(h->first + h->count++) % HISTORY_SAMPLES] = *s;
    } else {
        h->samples[h->first] = *s;
        h->first = (h->first + 1) % HISTORY_SAMPLES;
    }
}

size_t coord_history_count(const coord_history *h) {
    return h->count;
}

const history_sample *coord_history_at(const coord_history *h, size_t i) {
    return i < h->count ? &h->samples[(h->first + i) % HISTORY_SAMPLES] : NULL;
}

/* Samples are in time order, so a binary search finds the boundary. */
size_t coord_history_first_after(const coord_history *h, int64_t since_ms) {
    size_t lo = 0, hi = h->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (coord_history_at(h, mid)->t_ms <= since_ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void coord_history_event(coord_history *h, int64_t t_ms, uint64_t move, uint32_t partition,
                         history_event_kind kind) {
    if (!h) return;
    history_event e = {t_ms, move, partition, (uint32_t)kind};
    if (h->ecount < HISTORY_EVENTS) {
        h->events[(h->efirst + h->ecount++) % HISTORY_EVENTS] = e;
    } else {
        h->events[h->efirst] = e;
        h->efirst = (h->efirst + 1) % HISTORY_EVENTS;
    }
}

size_t coord_history_nevents(const coord_history *h) {
    return h->ecount;
}

const history_event *coord_history_event_at(const coord_history *h, size_t i) {
    return i < h->ecount ? &h->events[(h->efirst + i) % HISTORY_EVENTS] : NULL;
}

const char *coord_history_event_name(uint32_t kind) {
    switch (kind) {
    case HISTORY_MOVE_START:
        return "start";
    case HISTORY_MOVE_COMMIT:
        return "commit";
    case HISTORY_MOVE_ABORT:
        return "abort";
    }
    return "unknown";
}
