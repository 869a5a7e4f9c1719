/* plan_model.c - the planner's cluster model: defaults, building, checking,
 * applying a plan, and names.
 *
 * The model is plain data the caller owns; nothing here caches anything about
 * it, so a caller may edit the arrays between rounds. That is why plan_run
 * re-checks the whole model every time (plan_model_check): the check is
 * linear in partitions (one hash set of ids) and cheap next to planning.
 */
#include "planner/plan_int.h"
#include "core/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void plan_settings_default(plan_settings *s) {
    s->load_weight = 0.5;
    s->start_ratio = 1.25;
    s->stop_ratio = 1.10;
    s->max_moves = 16;
    s->min_gain = 0;
    s->min_residence_s = 600;
    s->disk_low = 0.85;
    s->disk_high = 0.90;
    s->disk_flood = 0.95;
    s->max_metrics_age_s = 3;
}

void plan_node_default(plan_node *n, const char *id) {
    memset(n, 0, sizeof *n);
    snprintf(n->id, sizeof n->id, "%s", id ? id : "");
    n->capacity = 1;
    n->state = PLAN_NODE_UP;
}

void plan_part_default(plan_part *p, uint64_t id) {
    memset(p, 0, sizeof *p);
    p->id = id;
    p->moving_to = -1;
    p->since_last_move_s = 1e9;
    for (int i = 0; i < PLAN_MAX_REPLICAS; i++)
        p->replicas[i] = -1;
}

void plan_model_init(plan_model *m) {
    memset(m, 0, sizeof *m);
    plan_settings_default(&m->settings);
}

void plan_model_close(plan_model *m) {
    if (!m) return;
    free(m->nodes);
    free(m->parts);
    plan_model_init(m);
}

int plan_model_find_node(const plan_model *m, const char *id) {
    for (size_t i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].id, id) == 0) return (int)i;
    return -1;
}

/* ---- Field checks shared by add_* and check ------------------------------- */

/* Finite and >= 0. Upper bounds keep sums over 2^29 partitions finite. */
static int nonneg(double x) {
    return isfinite(x) && x >= 0 && x <= PLAN_NUM_MAX;
}

int plan__check_node(const plan_node *n, size_t i, char *err, size_t cap) {
    if (!n->id[0] || memchr(n->id, 0, sizeof n->id) == NULL)
        return keel_errf(err, cap, KEEL_EINVAL, "nodes[%zu].id: must be a non-empty string", i);
    if (!memchr(n->rack, 0, sizeof n->rack))
        return keel_errf(err, cap, KEEL_EINVAL, "nodes[%zu].rack: too long", i);
    if (!nonneg(n->capacity) || n->capacity > PLAN_CAPACITY_MAX)
        return keel_errf(err, cap, KEEL_EINVAL, "nodes[%zu].capacity: must be 0..%g (node %s)", i,
                         PLAN_CAPACITY_MAX, n->id);
    if ((unsigned)n->state > PLAN_NODE_DRAINING)
        return keel_errf(err, cap, KEEL_EINVAL, "nodes[%zu].state: unknown state %d", i,
                         (int)n->state);
    if (!nonneg(n->disk_used) || !nonneg(n->disk_capacity))
        return keel_errf(err, cap, KEEL_EINVAL, "nodes[%zu].disk_used/disk_capacity: must be >= 0",
                         i);
    if (!nonneg(n->metrics_age_s))
        return keel_errf(err, cap, KEEL_EINVAL, "nodes[%zu].metrics_age_s: must be >= 0", i);
    return 0;
}

int plan__check_part(const plan_part *p, size_t i, size_t nnodes, char *err, size_t cap) {
    if (p->nreplicas > PLAN_MAX_REPLICAS)
        return keel_errf(err, cap, KEEL_EINVAL, "partitions[%zu].replicas: more than %d", i,
                         PLAN_MAX_REPLICAS);
    for (int r = 0; r < p->nreplicas; r++) {
        int32_t n = p->replicas[r];
        if (n < 0 || (size_t)n >= nnodes)
            return keel_errf(err, cap, KEEL_ENOTFOUND, "partitions[%zu].replicas[%d]: no node %d",
                             i, r, (int)n);
        for (int q = 0; q < r; q++)
            if (p->replicas[q] == n)
                return keel_errf(err, cap, KEEL_EINVAL,
                                 "partitions[%zu].replicas: node %d holds two replicas", i, (int)n);
    }
    if (p->moving_to < -1 || (p->moving_to >= 0 && (size_t)p->moving_to >= nnodes))
        return keel_errf(err, cap, KEEL_ENOTFOUND, "partitions[%zu].moving_to: no node %d", i,
                         (int)p->moving_to);
    if (p->moving_to >= 0 && p->nreplicas == 0)
        return keel_errf(err, cap, KEEL_EINVAL, "partitions[%zu].moving_to: partition has no owner",
                         i);
    if (!nonneg(p->bytes))
        return keel_errf(err, cap, KEEL_EINVAL, "partitions[%zu].bytes: must be >= 0", i);
    if (!nonneg(p->load))
        return keel_errf(err, cap, KEEL_EINVAL, "partitions[%zu].load: must be >= 0", i);
    if (!(p->since_last_move_s >= 0))
        return keel_errf(err, cap, KEEL_EINVAL, "partitions[%zu].since_last_move_s: must be >= 0",
                         i);
    return 0;
}

static int check_settings(const plan_settings *s, char *err, size_t cap) {
    if (!nonneg(s->load_weight))
        return keel_errf(err, cap, KEEL_EINVAL, "settings.load_weight: must be >= 0");
    if (!isfinite(s->stop_ratio) || s->stop_ratio < 1)
        return keel_errf(err, cap, KEEL_EINVAL, "settings.stop_ratio: must be >= 1");
    if (!isfinite(s->start_ratio) || s->start_ratio < s->stop_ratio)
        return keel_errf(err, cap, KEEL_EINVAL, "settings.start_ratio: must be >= stop_ratio");
    if (!nonneg(s->min_gain))
        return keel_errf(err, cap, KEEL_EINVAL, "settings.min_gain: must be >= 0");
    if (!nonneg(s->min_residence_s))
        return keel_errf(err, cap, KEEL_EINVAL, "settings.min_residence: must be >= 0");
    if (!(s->disk_low > 0 && s->disk_low <= s->disk_high && s->disk_high <= s->disk_flood &&
          s->disk_flood <= 1))
        return keel_errf(err, cap, KEEL_EINVAL,
                         "settings.disk_low/disk_high/disk_flood: need 0 < low <= high <= flood "
                         "<= 1");
    if (s->replicas > PLAN_MAX_REPLICAS)
        return keel_errf(err, cap, KEEL_EINVAL, "settings.replicas: must be 0..%d",
                         PLAN_MAX_REPLICAS);
    if (!(s->max_metrics_age_s > 0) || isnan(s->max_metrics_age_s))
        return keel_errf(err, cap, KEEL_EINVAL, "settings.max_metrics_age: must be > 0");
    return 0;
}

/* ---- Building ------------------------------------------------------------- */

int plan_model_add_node(plan_model *m, const plan_node *n) {
    int rc = plan__check_node(n, m->nnodes, NULL, 0);
    if (rc) return rc;
    if (plan_model_find_node(m, n->id) >= 0) return KEEL_EEXIST;
    if (m->nnodes >= INT32_MAX) return KEEL_ENOMEM;
    if (m->nnodes == m->nodes_cap) {
        size_t cap = m->nodes_cap ? m->nodes_cap * 2 : 8;
        plan_node *p = realloc(m->nodes, cap * sizeof *p);
        if (!p) return KEEL_ENOMEM;
        m->nodes = p;
        m->nodes_cap = cap;
    }
    m->nodes[m->nnodes] = *n;
    return (int)m->nnodes++;
}

int plan_model_reserve_parts(plan_model *m, size_t n) {
    if (m->nparts + n <= m->parts_cap) return 0;
    size_t cap = m->parts_cap ? m->parts_cap : 64;
    while (cap < m->nparts + n)
        cap *= 2;
    if (cap > UINT32_MAX) return KEEL_ENOMEM; /* plan_run indexes parts with u32 */
    plan_part *p = realloc(m->parts, cap * sizeof *p);
    if (!p) return KEEL_ENOMEM;
    m->parts = p;
    m->parts_cap = cap;
    return 0;
}

int plan_model_add_part(plan_model *m, const plan_part *p) {
    int rc = plan__check_part(p, m->nparts, m->nnodes, NULL, 0);
    if (rc) return rc;
    if ((rc = plan_model_reserve_parts(m, 1))) return rc;
    m->parts[m->nparts++] = *p;
    return 0;
}

/* ---- Whole-model check ---------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

uint64_t plan__hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return mix64(h);
}

size_t plan__pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* Finds a duplicate partition id with an open-addressing set of indexes.
 * Returns the index of the second occurrence, SIZE_MAX if none, or
 * SIZE_MAX - 1 on out-of-memory. */
static size_t dup_part_id(const plan_model *m) {
    /* Models are usually built in id order (the coordinator lists partitions
     * by id): strictly increasing ids cannot repeat, and checking that is one
     * pass with no allocation - half of plan_run at 10^6 partitions. */
    size_t i = 1;
    while (i < m->nparts && m->parts[i - 1].id < m->parts[i].id)
        i++;
    if (i >= m->nparts) return SIZE_MAX;
    size_t cap = plan__pow2_at_least(m->nparts * 2 + 1);
    uint32_t *slot = malloc(cap * sizeof *slot);
    if (!slot) return SIZE_MAX - 1;
    memset(slot, 0xff, cap * sizeof *slot);
    size_t found = SIZE_MAX;
    for (size_t i = 0; i < m->nparts && found == SIZE_MAX; i++) {
        size_t h = mix64(m->parts[i].id) & (cap - 1);
        while (slot[h] != UINT32_MAX && m->parts[slot[h]].id != m->parts[i].id)
            h = (h + 1) & (cap - 1);
        if (slot[h] != UINT32_MAX) found = i;
        slot[h] = (uint32_t)i;
    }
    free(slot);
    return found;
}

static int check_node_ids(const plan_model *m, char *err, size_t cap) {
    size_t hcap = plan__pow2_at_least(m->nnodes * 2 + 1);
    int32_t *slot = malloc(hcap * sizeof *slot);
    if (!slot) return KEEL_ENOMEM;
    memset(slot, 0xff, hcap * sizeof *slot);
    int rc = 0;
    for (size_t i = 0; i < m->nnodes && !rc; i++) {
        size_t h = plan__hash_str(m->nodes[i].id) & (hcap - 1);
        while (slot[h] >= 0 && strcmp(m->nodes[slot[h]].id, m->nodes[i].id) != 0)
            h = (h + 1) & (hcap - 1);
        if (slot[h] >= 0)
            rc = keel_errf(err, cap, KEEL_EEXIST, "nodes[%zu].id: duplicate node id \"%s\"", i,
                           m->nodes[i].id);
        slot[h] = (int32_t)i;
    }
    free(slot);
    return rc;
}

int plan_model_check(const plan_model *m, char *err, size_t cap) {
    int rc;
    if ((rc = check_settings(&m->settings, err, cap))) return rc;
    if (m->nnodes > INT32_MAX || m->nparts >= UINT32_MAX)
        return keel_errf(err, cap, KEEL_EINVAL, "model: too many nodes or partitions");
    for (size_t i = 0; i < m->nnodes; i++)
        if ((rc = plan__check_node(&m->nodes[i], i, err, cap))) return rc;
    if ((rc = check_node_ids(m, err, cap))) return rc;
    for (size_t i = 0; i < m->nparts; i++)
        if ((rc = plan__check_part(&m->parts[i], i, m->nnodes, err, cap))) return rc;
    size_t d = dup_part_id(m);
    if (d == SIZE_MAX - 1) return KEEL_ENOMEM;
    if (d != SIZE_MAX)
        return keel_errf(err, cap, KEEL_EEXIST, "partitions[%zu].id: duplicate partition id %llu",
                         d, (unsigned long long)m->parts[d].id);
    return 0;
}

/* ---- Applying a plan ------------------------------------------------------ */

static int slot_of(const plan_part *p, int32_t node) {
    for (int r = 0; r < p->nreplicas; r++)
        if (p->replicas[r] == node) return r;
    return -1;
}

/* One repair on p; KEEL_EINVAL when it does not fit p as it is now. */
static int apply_repair(plan_part *p, const plan_repair *rp, size_t nnodes) {
    if (rp->node < 0 || (size_t)rp->node >= nnodes) return KEEL_EINVAL;
    if (rp->kind == PLAN_REPAIR_REMOVE) {
        int r = slot_of(p, rp->node);
        if (r <= 0 || p->nreplicas < 2) return KEEL_EINVAL; /* the leader stays */
        memmove(&p->replicas[r], &p->replicas[r + 1],
                (size_t)(p->nreplicas - r - 1) * sizeof p->replicas[0]);
        p->replicas[--p->nreplicas] = -1;
        p->lagging = (uint8_t)((p->lagging & ((1u << r) - 1)) | ((p->lagging >> (r + 1)) << r));
        return 0;
    }
    if (rp->kind != PLAN_REPAIR_ADD || slot_of(p, rp->node) >= 0) return KEEL_EINVAL;
    int r = rp->replace >= 0 ? slot_of(p, rp->replace) : p->nreplicas;
    if (r < 0 || r >= PLAN_MAX_REPLICAS) return KEEL_EINVAL;
    if (r == p->nreplicas) p->nreplicas++;
    p->replicas[r] = rp->node;
    p->lagging &= (uint8_t) ~(1u << r); /* as if it had caught up */
    return 0;
}

static int apply_lead(plan_part *p, const plan_lead *ld) {
    if (ld->replica == 0 || ld->replica >= p->nreplicas || p->replicas[0] != ld->from ||
        p->replicas[ld->replica] != ld->to)
        return KEEL_EINVAL;
    p->replicas[ld->replica] = ld->from;
    p->replicas[0] = ld->to;
    return 0;
}

static int apply_all(plan_model *m, plan_part *parts, const plan_result *r) {
    for (size_t i = 0; i < r->nmoves; i++) {
        const plan_move *mv = &r->moves[i];
        if (mv->part >= m->nparts || mv->to < 0 || (size_t)mv->to >= m->nnodes) return KEEL_EINVAL;
        plan_part *p = &parts[mv->part];
        if (mv->replica >= p->nreplicas || p->replicas[mv->replica] != mv->from) return KEEL_EINVAL;
        p->replicas[mv->replica] = mv->to;
        p->since_last_move_s = 0;
    }
    for (size_t i = 0; i < r->nrepairs; i++) {
        if (r->repairs[i].part >= m->nparts) return KEEL_EINVAL;
        int rc = apply_repair(&parts[r->repairs[i].part], &r->repairs[i], m->nnodes);
        if (rc) return rc;
    }
    for (size_t i = 0; i < r->nleads; i++) {
        if (r->leads[i].part >= m->nparts) return KEEL_EINVAL;
        int rc = apply_lead(&parts[r->leads[i].part], &r->leads[i]);
        if (rc) return rc;
    }
    return 0;
}

/* Applied to a copy first, so that a plan that does not match leaves m
 * unchanged. */
int plan_apply(plan_model *m, const plan_result *r) {
    if (!r->nrepairs && !r->nleads) { /* moves only: check all, then apply in place */
        for (size_t i = 0; i < r->nmoves; i++) {
            const plan_move *mv = &r->moves[i];
            if (mv->part >= m->nparts || mv->to < 0 || (size_t)mv->to >= m->nnodes)
                return KEEL_EINVAL;
            const plan_part *p = &m->parts[mv->part];
            if (mv->replica >= p->nreplicas || p->replicas[mv->replica] != mv->from)
                return KEEL_EINVAL;
        }
        int rc = apply_all(m, m->parts, r);
        if (!rc) m->episode = r->episode;
        return rc;
    }
    plan_part *copy = malloc((m->nparts ? m->nparts : 1) * sizeof *copy);
    if (!copy) return KEEL_ENOMEM;
    memcpy(copy, m->parts, m->nparts * sizeof *copy);
    int rc = apply_all(m, copy, r);
    if (!rc) {
        memcpy(m->parts, copy, m->nparts * sizeof *copy);
        m->episode = r->episode;
    }
    free(copy);
    return rc;
}

/* ---- Names ---------------------------------------------------------------- */

static const char *const state_names[] = {"up", "suspect", "down", "draining"};
static const char *const why_names[] = {"imbalance", "new-node", "drain", "disk-high",
                                        "disk-flood"};

const char *plan_node_state_name(plan_node_state s) {
    return (unsigned)s <= PLAN_NODE_DRAINING ? state_names[s] : "unknown";
}

int plan_node_state_parse(const char *s, plan_node_state *out) {
    for (int i = 0; i <= PLAN_NODE_DRAINING; i++)
        if (strcmp(s, state_names[i]) == 0) {
            *out = (plan_node_state)i;
            return 0;
        }
    return KEEL_EINVAL;
}

const char *plan_why_name(plan_why w) {
    return (unsigned)w <= PLAN_WHY_DISK_FLOOD ? why_names[w] : "unknown";
}

/* Human-scaled bytes: "12.0 MB". */
const char *plan__fmt_bytes(double b, char *buf, size_t cap) {
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (b >= 1000 && u < 5) {
        b /= 1000;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
    return buf;
}

static const char *fmt_util(double u, char *buf, size_t cap) {
    if (isinf(u))
        snprintf(buf, cap, "drain");
    else
        snprintf(buf, cap, "%.3f", u);
    return buf;
}

int plan_move_describe(const plan_model *m, const plan_move *mv, char *buf, size_t cap) {
    char by[32], u[4][24];
    const char *from = mv->from >= 0 && (size_t)mv->from < m->nnodes ? m->nodes[mv->from].id : "?";
    const char *to = mv->to >= 0 && (size_t)mv->to < m->nnodes ? m->nodes[mv->to].id : "?";
    return snprintf(buf, cap, "%s: %s %s -> %s, %s %s -> %s, %s, load %.1f/s, gain %.4g%s",
                    plan_why_name(mv->why), from, fmt_util(mv->src_util_before, u[0], 24),
                    fmt_util(mv->src_util_after, u[1], 24), to,
                    fmt_util(mv->dst_util_before, u[2], 24), fmt_util(mv->dst_util_after, u[3], 24),
                    plan__fmt_bytes(mv->bytes, by, sizeof by), mv->load, mv->gain,
                    mv->overshoot ? " (overshoot: no partition fitted)" : "");
}
