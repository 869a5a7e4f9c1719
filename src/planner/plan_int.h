/* plan_int.h - planner internals shared by planner.c, plan_greedy.c,
 * plan_place.c and plan_json.c. Not part of the public API (planner.h).
 *
 * Working state of one plan_run, all of it private to that call:
 *
 *   pnode[N]   per node: weights, targets, disk, role, and its slice
 *              [lo, hi) of items[] (only nodes that shed get a slice).
 *   items[]    movable replicas of shedding nodes. Each slice is sorted on
 *              first use by (weight asc, coldness desc, part asc), so the
 *              coldest of equal weights sits rightmost of its run.
 *   alive[]    union-find "largest live item <= i" over items[]: a moved
 *              item is unlinked in O(α) and never scanned again.
 *   heaps      sources by (class desc, fill desc, index), destinations by
 *              (fill asc, index); indexed so keys change in O(log N).
 *
 * fill(n) = weight(n) / target(n): 1.0 is exactly on target. Targets come
 * from water-filling (see planner.c), so they are reachable.
 */
#ifndef KEEL_PLAN_INT_H
#define KEEL_PLAN_INT_H

#include "planner/planner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLAN_PART_BITS 29    /* items pack a part index in 29 bits */
#define PLAN_TRY_ITEMS 64    /* candidates tried per (source, destination) */
#define PLAN_TRY_DESTS 8     /* destinations tried per source step */
#define PLAN_SKIP_ITEMS 4096 /* candidates already placed on the destination, skipped */

enum { CLS_NONE = -1, CLS_NORMAL = 0, CLS_DISK_HIGH = 1, CLS_DRAIN = 2, CLS_FLOOD = 3 };

typedef struct pitem {
    double w;           /* weight */
    float cold;         /* load per byte: the tie-break */
    uint32_t part : 29; /* index into m->parts */
    uint32_t rep : 3;   /* replica slot */
} pitem;

typedef struct pnode {
    double cap;    /* effective capacity: 0 when draining */
    double W;      /* weight now (moves applied so far) */
    double F;      /* fixed weight: may not move this round */
    double T;      /* target (water-filled) */
    double T0;     /* plain target cap * mean, for the floor */
    double bytes;  /* bytes now */
    double disk;   /* disk used now */
    int32_t rack;  /* rack number */
    int cls;       /* CLS_*: class as a source, CLS_NONE if it does not shed */
    bool live;     /* up or draining (not suspect/down) */
    bool draining; /* live with effective capacity 0 */
    bool eligible; /* may receive: up, capacity > 0, disk below low */
    bool was_empty;
    bool sorted;
    bool stuck; /* left the source heap before reaching its target */
    int stuck_why;
    uint32_t nmov;   /* movable items (counted for every live node) */
    uint32_t lo, hi; /* slice of items[]; lo == hi when none */
    uint32_t first;  /* smallest index in the slice that may be alive */
} pnode;

typedef struct pheap {
    int32_t *a;   /* node indexes in heap order */
    int32_t *pos; /* [N] position in a, or -1 */
    size_t n;
    bool max; /* source heap (max) or destination heap (min) */
} pheap;

/* Moved replicas of multi-replica partitions this round, for the replica and
 * rack checks (RF = 1 never touches it). Open addressing on part index. */
typedef struct pmoved {
    uint32_t *key; /* part index + 1; 0 = empty */
    int32_t (*reps)[PLAN_MAX_REPLICAS];
    size_t cap, n;
} pmoved;

typedef struct plan_ctx {
    const plan_model *m;
    const plan_settings *s;
    plan_result *out;
    size_t N;
    pnode *nd;
    pitem *items;
    int32_t *alive;
    size_t nitems;
    double kb, kl, kc; /* w(p) = bytes*kb + load*kl + kc (RF 1) */
    double kcb;        /* w(p) = bytes*kb + kcb for a replicated partition */
    size_t repairs_cap, leads_cap;
    double mean;    /* plain mean utilisation: W_live / C_live */
    double lambda;  /* water level: target = max(F, lambda * cap) */
    double tavg2;   /* (mean node target)^2: gain unit */
    double c_max;   /* largest capacity that may receive */
    int32_t nracks; /* racks with a live node (after start_heaps) */
    pheap src, dst;
    pmoved moved;
    double hi_fill, lo_fill; /* max fill of receivers, min fill of normal senders */
    size_t moves_cap;
    size_t too_large; /* partitions fixed because too large */
    bool budget_hit;
    bool refused; /* this step found allowed candidates but no gain */
} plan_ctx;

/* plan_model.c: field checks with a message naming the field by its JSON
 * path ("nodes[2].capacity", "partitions[7].replicas[0]"). */
int plan__check_node(const plan_node *n, size_t i, char *err, size_t cap);
int plan__check_part(const plan_part *p, size_t i, size_t nnodes, char *err, size_t cap);
uint64_t plan__hash_str(const char *s);
size_t plan__pow2_at_least(size_t n);
const char *plan__fmt_bytes(double b, char *buf, size_t cap);

/* planner.c */
void plan__weight_constants(plan_ctx *c);
double plan__weight(const plan_ctx *c, const plan_part *p);
int plan__node_of(const plan_part *p, int r); /* node a replica's weight counts on */
double plan__fill(const pnode *n);
double plan__ratio(const plan_ctx *c, const pnode *n); /* u/mean for reports */
void plan__stop(plan_result *r, plan_stop_code code, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* True for a partition whose load is its leader's alone (see planner.h). */
bool plan__replicated(const plan_ctx *c, const plan_part *p);
/* Live racks: racks with an up or draining node. */
int32_t plan__live_racks(const plan_ctx *c);

/* plan_repair.c: RF restoration into c->out->repairs, updating node weights.
 * Returns 0 or KEEL_ENOMEM. Does nothing when settings.replicas is 0. */
int plan__repair(plan_ctx *c);
/* plan_lead.c: leadership transfers for leader-load skew into c->out->leads,
 * at most budget of them (0 = no limit), with the episode's lead_active
 * hysteresis. Returns 0 or KEEL_ENOMEM. */
int plan__leads(plan_ctx *c, uint32_t budget);

/* plan_greedy.c: the move loop. Returns 0 or KEEL_ENOMEM. */
int plan__greedy(plan_ctx *c);
/* plan_heap.c: the source heap (max) orders by (class desc, fill desc,
 * index); the destination heap (min) by (fill asc, index). */
int plan__heap_init(pheap *h, size_t n, bool max);
void plan__heap_close(pheap *h);
void plan__heap_push(const plan_ctx *c, pheap *h, int32_t x);
void plan__heap_remove(const plan_ctx *c, pheap *h, int32_t x);
/* Restores order after node x's key changed; no-op if x is not in h. */
void plan__heap_fix(const plan_ctx *c, pheap *h, int32_t x);

#endif
