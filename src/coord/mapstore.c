/* mapstore.c - the backend-neutral half of the map store: the handle,
 * argument validation, state names, and dispatch to a backend's mapstore_ops.
 *
 * Validation lives here, not in the backends, so SQLite today and etcd later
 * refuse exactly the same inputs with exactly the same codes; a backend only
 * checks what needs its stored state (does the node exist, is the transition
 * legal). The handle caches the two facts that never change after creation,
 * the cluster id and P, so range checks cost no I/O.
 *
 * Invariant: a call that fails validation has not reached the backend, and
 * has set errmsg.
 *
 * Reads are served from the handle's cache (mapstore_int.h), loaded from
 * the backend once; writes go to the backend and, when they succeed, are
 * applied to the cache by the rules mapstore.h states.
 */
#include "coord/mapstore.h"
#include "coord/mapstore_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/audit.h"
#include "core/err.h"
#include "core/id.h"

static const char *const liveness_names[MAPSTORE_NODE_NLIVENESS] = {"UP", "SUSPECT", "DOWN"};

static const char *const membership_names[MAPSTORE_MEMBER_N] = {"ACTIVE", "DRAINING", "REMOVED"};

static const char *const move_names[MAPSTORE_MOVE_NSTATES] = {
    "PLANNED", "COPYING", "CATCHING_UP", "FENCED", "COMMITTED", "DONE", "ABORTED",
};

/* ---- Names ---------------------------------------------------------------- */

const char *mapstore_liveness_name(mapstore_liveness s) {
    return (unsigned)s < MAPSTORE_NODE_NLIVENESS ? liveness_names[s] : "?";
}

const char *mapstore_membership_name(mapstore_membership s) {
    return (unsigned)s < MAPSTORE_MEMBER_N ? membership_names[s] : "?";
}

const char *mapstore_move_state_name(mapstore_move_state s) {
    return (unsigned)s < MAPSTORE_MOVE_NSTATES ? move_names[s] : "?";
}

static int parse_name(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return KEEL_EINVAL;
}

int mapstore_liveness_parse(const char *name, mapstore_liveness *out) {
    int i = parse_name(liveness_names, MAPSTORE_NODE_NLIVENESS, name);
    if (i < 0) return i;
    *out = (mapstore_liveness)i;
    return 0;
}

int mapstore_membership_parse(const char *name, mapstore_membership *out) {
    int i = parse_name(membership_names, MAPSTORE_MEMBER_N, name);
    if (i < 0) return i;
    *out = (mapstore_membership)i;
    return 0;
}

int mapstore_move_state_parse(const char *name, mapstore_move_state *out) {
    int i = parse_name(move_names, MAPSTORE_MOVE_NSTATES, name);
    if (i < 0) return i;
    *out = (mapstore_move_state)i;
    return 0;
}

/* The legal successors of each move state, as bit masks (see mapstore.h). */
#define MV(s) (1u << MAPSTORE_MOVE_##s)
static const unsigned move_next[MAPSTORE_MOVE_NSTATES] = {
    [MAPSTORE_MOVE_PLANNED] = MV(COPYING) | MV(ABORTED),
    [MAPSTORE_MOVE_COPYING] = MV(CATCHING_UP) | MV(ABORTED),
    [MAPSTORE_MOVE_CATCHING_UP] = MV(FENCED) | MV(ABORTED),
    [MAPSTORE_MOVE_FENCED] = MV(COMMITTED) | MV(ABORTED),
    [MAPSTORE_MOVE_COMMITTED] = MV(DONE),
};
#undef MV

int mapstore_move_can_advance(mapstore_move_state from, mapstore_move_state to) {
    if ((unsigned)from >= MAPSTORE_MOVE_NSTATES || (unsigned)to >= MAPSTORE_MOVE_NSTATES) return 0;
    return (move_next[from] >> to) & 1u;
}

/* ---- Handle and backend helpers -------------------------------------------- */

int mapstore__new(const mapstore_ops *ops, void *impl, const char *cluster_id, unsigned partitions,
                  mapstore **out) {
    if (!ops || !cluster_id || strlen(cluster_id) > MAPSTORE_CLUSTER_ID_MAX) return KEEL_EINVAL;
    mapstore *ms = calloc(1, sizeof *ms);
    if (!ms) return KEEL_ENOMEM;
    ms->ops = ops;
    ms->impl = impl;
    ms->partitions = partitions;
    strcpy(ms->cluster_id, cluster_id);
    *out = ms;
    return 0;
}

void *mapstore__impl(const mapstore *ms) {
    return ms->impl;
}

int mapstore__errf(mapstore *ms, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ms->errmsg, sizeof ms->errmsg, fmt, ap);
    va_end(ap);
    for (char *c = ms->errmsg; *c; c++) /* one line, for logs */
        if (*c == '\n') *c = ' ';
    return rc;
}

int mapstore__valid_id(const char *s, size_t max, int allow_empty) {
    if (!s) return 0;
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= max || (unsigned char)s[n] <= ' ' || (unsigned char)s[n] >= 0x7f) return 0;
    return n > 0 || allow_empty;
}

int mapstore__check_expect(const mapstore *ms, const mapstore_expect *expect, char *err,
                           size_t errcap) {
    if (!expect) return 0;
    if (expect->cluster_id && strcmp(expect->cluster_id, ms->cluster_id) != 0) {
        if (errcap)
            snprintf(err, errcap, "map store belongs to cluster %s, expected cluster %s",
                     ms->cluster_id, expect->cluster_id);
        return KEEL_EINVAL;
    }
    if (expect->partitions && expect->partitions != ms->partitions) {
        if (errcap)
            snprintf(err, errcap, "map store has %u partitions, expected %u", ms->partitions,
                     expect->partitions);
        return KEEL_EINVAL;
    }
    return 0;
}

void mapstore_free(mapstore *ms) {
    if (!ms) return;
    ms->ops->close(ms->impl);
    msc_free(ms);
    free(ms);
}

void mapstore_counters(const mapstore *ms, uint64_t *reads, uint64_t *writes) {
    if (reads) *reads = ms->reads;
    if (writes) *writes = ms->writes;
}

/* Counts a backend write. A refusal (bad argument for the stored state,
 * not found, exists, range) changed nothing, by the contract, and keeps the
 * cache; any other failure (I/O, memory, corruption) drops it, so the next
 * read reloads what the backend holds. */
static int counted(mapstore *ms, int rc) {
    ms->writes++;
    if (rc && rc != KEEL_EINVAL && rc != KEEL_ENOTFOUND && rc != KEEL_EEXIST && rc != KEEL_ERANGE)
        msc_drop(ms);
    return rc;
}

/* A write that changes the map: counted, and on the audit log (core/audit.h).
 * Heartbeats are counted only: no backend stores them. */
static int wrote(mapstore *ms, int rc) {
    if (audit_enabled()) audit_map_write("write", rc, 0, ms->ops->version(ms->impl));
    return counted(ms, rc);
}

/* A malloc'd copy of n items (NULL when n is 0). */
static int copy_out(mapstore *ms, const void *src, size_t n, size_t sz, void **out) {
    *out = NULL;
    if (!n) return 0;
    if (!(*out = malloc(n * sz))) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    memcpy(*out, src, n * sz);
    return 0;
}

const char *mapstore_errmsg(const mapstore *ms) {
    return ms->errmsg;
}

/* ---- Validation -------------------------------------------------------------- */

/* Each check returns 0 or records the reason and returns a KEEL_E*. */

static int check_id(mapstore *ms, const char *what, const char *id) {
    if (keel_id_validz(id)) return 0;
    return mapstore__errf(ms, KEEL_EINVAL, "%s: not a valid id (" KEEL_ID_RULE ")", what);
}

static int check_part(mapstore *ms, unsigned p) {
    if (p < ms->partitions) return 0;
    return mapstore__errf(ms, KEEL_ERANGE, "partition %u out of range (P = %u)", p, ms->partitions);
}

static int check_reason(mapstore *ms, const char *reason) {
    if (!reason || strlen(reason) <= MAPSTORE_REASON_MAX) return 0;
    return mapstore__errf(ms, KEEL_EINVAL, "reason longer than %d bytes", MAPSTORE_REASON_MAX);
}

static int check_out(mapstore *ms, const void *a, const void *b) {
    if (a && b) return 0;
    return mapstore__errf(ms, KEEL_EINVAL, "NULL output argument");
}

static int check_node(mapstore *ms, const mapstore_node *n) {
    int rc;
    if ((rc = check_out(ms, n, n))) return rc;
    if ((rc = check_id(ms, "node id", n->id))) return rc;
    if (!keel_host_validz(n->host))
        return mapstore__errf(ms, KEEL_EINVAL, "node %s: bad host", n->id);
    if (n->port < 1 || n->port > 65535)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s: port %d not in 1..65535", n->id, n->port);
    if (!mapstore__valid_id(n->rack, MAPSTORE_RACK_MAX, 1))
        return mapstore__errf(ms, KEEL_EINVAL, "node %s: bad rack", n->id);
    if (!isfinite(n->capacity) || n->capacity < 0)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s: capacity must be finite and >= 0", n->id);
    if ((unsigned)n->liveness >= MAPSTORE_NODE_NLIVENESS)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s: invalid liveness %d", n->id,
                              (int)n->liveness);
    if ((unsigned)n->membership >= MAPSTORE_MEMBER_N)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s: invalid membership %d", n->id,
                              (int)n->membership);
    return 0;
}

static int check_setting_name(mapstore *ms, const char *name) {
    if (mapstore__valid_id(name, MAPSTORE_SETTING_NAME_MAX, 0)) return 0;
    return mapstore__errf(ms, KEEL_EINVAL, "not a valid setting name");
}

/* Every partition in range, every owner a valid id, no partition twice. */
static int check_placement(mapstore *ms, const mapstore_placement *pl, size_t n) {
    if (n == 0) return 0;
    if (!pl) return mapstore__errf(ms, KEEL_EINVAL, "NULL placement");
    unsigned char *seen = calloc(ms->partitions, 1);
    if (!seen) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if ((rc = check_part(ms, pl[i].partition)) || (rc = check_id(ms, "owner", pl[i].owner)))
            break;
        if (seen[pl[i].partition]++)
            rc = mapstore__errf(ms, KEEL_EINVAL, "partition %u placed twice", pl[i].partition);
    }
    free(seen);
    return rc;
}

/* ---- Identity, term, version ------------------------------------------------ */

const char *mapstore_cluster_id(const mapstore *ms) {
    return ms->cluster_id;
}

unsigned mapstore_partitions(const mapstore *ms) {
    return ms->partitions;
}

uint64_t mapstore_term(const mapstore *ms) {
    return ms->ops->term(ms->impl);
}

uint64_t mapstore_version(const mapstore *ms) {
    return ms->ops->version(ms->impl);
}

int mapstore_bump_term(mapstore *ms, uint64_t *term) {
    int rc = ms->ops->bump_term(ms, term);
    if (audit_enabled())
        audit_map_write("bump_term", rc, rc ? 0 : *term, ms->ops->version(ms->impl));
    return rc;
}

/* ---- Nodes ------------------------------------------------------------------ */

int mapstore_node_upsert(mapstore *ms, const mapstore_node *n, int64_t now_ms) {
    int rc;
    if ((rc = check_node(ms, n))) return rc;
    if ((rc = wrote(ms, ms->ops->node_upsert(ms, n, now_ms)))) return rc;
    (void)msc_put_node(ms, n, now_ms); /* ENOMEM dropped the cache: still correct */
    return 0;
}

int mapstore_node_get(mapstore *ms, const char *id, mapstore_node *out) {
    int rc;
    if ((rc = check_id(ms, "node id", id)) || (rc = check_out(ms, out, out))) return rc;
    if ((rc = msc_nodes(ms))) return rc;
    const mapstore_node *n = msc_node(ms, id);
    if (!n) return mapstore__errf(ms, KEEL_ENOTFOUND, "no node %s", id);
    *out = *n;
    return 0;
}

int mapstore_node_list(mapstore *ms, mapstore_node **out, size_t *n) {
    int rc;
    if ((rc = check_out(ms, out, n))) return rc;
    if ((rc = msc_nodes(ms))) return rc;
    *n = ms->c.nn;
    return copy_out(ms, ms->c.nodes, ms->c.nn, sizeof **out, (void **)out);
}

int mapstore_node_set_liveness(mapstore *ms, const char *id, mapstore_liveness l) {
    int rc;
    if ((rc = check_id(ms, "node id", id))) return rc;
    if ((unsigned)l >= MAPSTORE_NODE_NLIVENESS)
        return mapstore__errf(ms, KEEL_EINVAL, "invalid liveness %d", (int)l);
    if ((rc = wrote(ms, ms->ops->node_set_liveness(ms, id, l)))) return rc;
    mapstore_node *n = msc_node(ms, id);
    if (n) n->liveness = l;
    return 0;
}

int mapstore_node_set_membership(mapstore *ms, const char *id, mapstore_membership m) {
    int rc;
    if ((rc = check_id(ms, "node id", id))) return rc;
    if ((unsigned)m >= MAPSTORE_MEMBER_N)
        return mapstore__errf(ms, KEEL_EINVAL, "invalid membership %d", (int)m);
    if ((rc = wrote(ms, ms->ops->node_set_membership(ms, id, m)))) return rc;
    mapstore_node *n = msc_node(ms, id);
    if (n) n->membership = m;
    return 0;
}

int mapstore_node_heartbeat(mapstore *ms, const char *id, int64_t now_ms) {
    int rc;
    if ((rc = check_id(ms, "node id", id))) return rc;
    if ((rc = counted(ms, ms->ops->node_heartbeat(ms, id, now_ms)))) return rc;
    msc_heartbeat(ms, id, now_ms);
    return 0;
}

/* ---- Partitions ------------------------------------------------------------- */

int mapstore_partition_get(mapstore *ms, unsigned p, mapstore_partition *out) {
    int rc;
    if ((rc = check_part(ms, p)) || (rc = check_out(ms, out, out))) return rc;
    if ((rc = msc_parts(ms))) return rc;
    *out = ms->c.parts[p];
    return 0;
}

int mapstore_partition_list(mapstore *ms, mapstore_partition **out, size_t *n) {
    int rc;
    if ((rc = check_out(ms, out, n))) return rc;
    if ((rc = msc_parts(ms))) return rc;
    *n = ms->partitions;
    return copy_out(ms, ms->c.parts, ms->partitions, sizeof **out, (void **)out);
}

int mapstore_partition_set_owner(mapstore *ms, unsigned p, const char *owner, uint64_t *epoch,
                                 uint64_t *version) {
    int rc;
    if ((rc = check_part(ms, p))) return rc;
    if (owner && (rc = check_id(ms, "owner", owner))) return rc;
    uint64_t e = 0;
    if ((rc = wrote(ms, ms->ops->partition_set_owner(ms, p, owner, &e, version)))) return rc;
    if (epoch) *epoch = e;
    if (ms->c.have_parts) {
        mapstore__owner_change(&ms->c.parts[p], owner);
        if (ms->c.parts[p].epoch != e) msc_drop(ms); /* cannot happen: the rules are shared */
    }
    return 0;
}

int mapstore_partition_place(mapstore *ms, const mapstore_placement *pl, size_t n,
                             uint64_t *version) {
    int rc;
    if ((rc = check_placement(ms, pl, n))) return rc;
    if (n == 0) {
        if (version) *version = mapstore_version(ms);
        return 0;
    }
    if ((rc = wrote(ms, ms->ops->partition_place(ms, pl, n, version)))) return rc;
    for (size_t i = 0; ms->c.have_parts && i < n; i++) /* each placed: owner, epochs + 1 */
        mapstore__owner_change(&ms->c.parts[pl[i].partition], pl[i].owner);
    return 0;
}

/* n distinct valid ids, 1..KEEL_RF_MAX of them. */
static int check_id_list(mapstore *ms, const char *what, const char *const *ids, size_t n) {
    if (n < 1 || n > KEEL_RF_MAX || !ids)
        return mapstore__errf(ms, KEEL_EINVAL, "%s: 1 to %d node ids, not %zu", what, KEEL_RF_MAX,
                              n);
    int rc;
    for (size_t i = 0; i < n; i++) {
        if ((rc = check_id(ms, what, ids[i]))) return rc;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(ids[i], ids[j]))
                return mapstore__errf(ms, KEEL_EINVAL, "%s: %s listed twice", what, ids[i]);
    }
    return 0;
}

int mapstore_partition_set_isr(mapstore *ms, unsigned p, uint64_t expected_pe,
                               const char *const *isr, size_t n, uint64_t *pe) {
    int rc;
    if ((rc = check_part(ms, p)) || (rc = check_id_list(ms, "ISR", isr, n))) return rc;
    mapstore_partition np;
    /* A lost race (KEEL_EAGAIN) drops the cache in wrote(): another writer
     * may have changed the store, so the next read reloads it. */
    if ((rc = wrote(ms, ms->ops->partition_set_isr(ms, p, expected_pe, isr, n, &np)))) return rc;
    if (pe) *pe = np.partition_epoch;
    if (ms->c.have_parts) ms->c.parts[p] = np;
    return 0;
}

int mapstore_partition_set_replicas(mapstore *ms, unsigned p, uint64_t expected_pe,
                                    const char *const *replicas, size_t n, uint64_t *pe) {
    int rc;
    if ((rc = check_part(ms, p)) || (rc = check_id_list(ms, "replicas", replicas, n))) return rc;
    mapstore_partition np;
    if ((rc = wrote(ms, ms->ops->partition_set_replicas(ms, p, expected_pe, replicas, n, &np))))
        return rc;
    if (pe) *pe = np.partition_epoch;
    if (ms->c.have_parts) ms->c.parts[p] = np;
    return 0;
}

/* ---- Replication rules (shared with the backends) ------------------------ */

int mapstore__part_can_bump(mapstore *ms, const mapstore_partition *p) {
    if (p->partition_epoch < (uint64_t)INT64_MAX && p->epoch < (uint64_t)INT64_MAX) return 0;
    return mapstore__errf(ms, KEEL_ERANGE, "partition %u: epoch would overflow", p->id);
}

/* Index of id among p's replicas, or -1. */
static int rep_index(const mapstore_partition *p, const char *id) {
    for (unsigned i = 0; i < p->nreplicas; i++)
        if (!strcmp(p->replicas[i], id)) return (int)i;
    return -1;
}

/* Rebuilds p's list from ids[0..n) (borrowed, may alias p) and their ISR
 * bits, zeroing the unused slots. */
static void put_list(mapstore_partition *p, char ids[][KEEL_ID_MAX + 1], const int *in, size_t n) {
    char tmp[KEEL_RF_MAX][KEEL_ID_MAX + 1];
    memset(tmp, 0, sizeof tmp);
    unsigned isr = 0;
    for (size_t i = 0; i < n; i++) {
        snprintf(tmp[i], sizeof tmp[i], "%s", ids[i]);
        if (in[i]) isr |= 1u << i;
    }
    memcpy(p->replicas, tmp, sizeof tmp);
    p->nreplicas = (unsigned)n;
    p->isr = isr;
}

void mapstore__owner_change(mapstore_partition *p, const char *owner) {
    char ids[KEEL_RF_MAX][KEEL_ID_MAX + 1];
    int in[KEEL_RF_MAX];
    size_t n = 0;
    if (owner && *owner) {
        snprintf(ids[n], sizeof ids[n], "%s", owner);
        in[n++] = 1;
        for (unsigned i = 1; i < p->nreplicas && n < KEEL_RF_MAX; i++) /* the old followers */
            if (strcmp(p->replicas[i], owner)) {
                snprintf(ids[n], sizeof ids[n], "%s", p->replicas[i]);
                in[n++] = (p->isr >> i) & 1;
            }
    }
    put_list(p, ids, in, n);
    snprintf(p->owner, sizeof p->owner, "%s", owner ? owner : "");
    p->epoch++;
    p->leader_epoch++;
    p->partition_epoch++;
}

/* The compare-and-set checks both changes share. */
static int cas_check(mapstore *ms, const mapstore_partition *p, uint64_t expected_pe) {
    if (!p->owner[0] || !p->nreplicas)
        return mapstore__errf(ms, KEEL_EINVAL, "partition %u has no owner", p->id);
    if (p->partition_epoch != expected_pe)
        return mapstore__errf(
            ms, KEEL_EAGAIN, "partition %u is at partition epoch %llu, not the expected %llu",
            p->id, (unsigned long long)p->partition_epoch, (unsigned long long)expected_pe);
    return mapstore__part_can_bump(ms, p);
}

int mapstore__set_isr(mapstore *ms, mapstore_partition *p, uint64_t expected_pe,
                      const char *const *isr, size_t n) {
    int rc = cas_check(ms, p, expected_pe);
    if (rc) return rc;
    unsigned mask = 0;
    for (size_t i = 0; i < n; i++) {
        int k = rep_index(p, isr[i]);
        if (k < 0)
            return mapstore__errf(ms, KEEL_EINVAL, "partition %u: %s is not a replica", p->id,
                                  isr[i]);
        mask |= 1u << k;
    }
    if (!(mask & 1))
        return mapstore__errf(ms, KEEL_EINVAL, "partition %u: the ISR must hold the leader %s",
                              p->id, p->owner);
    p->isr = mask;
    p->partition_epoch++;
    return 0;
}

int mapstore__set_replicas(mapstore *ms, mapstore_partition *p, uint64_t expected_pe,
                           const char *const *replicas, size_t n) {
    int rc = cas_check(ms, p, expected_pe);
    if (rc) return rc;
    if (strcmp(replicas[0], p->owner))
        return mapstore__errf(ms, KEEL_EINVAL,
                              "partition %u: the first replica must be the leader %s (the leader "
                              "changes by an ownership change)",
                              p->id, p->owner);
    char ids[KEEL_RF_MAX][KEEL_ID_MAX + 1];
    int in[KEEL_RF_MAX];
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%s", replicas[i]);
        int k = rep_index(p, replicas[i]);
        in[i] = k >= 0 && ((p->isr >> k) & 1);
    }
    put_list(p, ids, in, n);
    p->epoch++;
    p->partition_epoch++;
    return 0;
}

int mapstore__part_check(const mapstore_partition *p) {
    if (p->nreplicas > KEEL_RF_MAX) return KEEL_ECORRUPT;
    if (!p->owner[0]) return p->nreplicas || p->isr ? KEEL_ECORRUPT : 0;
    if (!p->nreplicas || strcmp(p->replicas[0], p->owner) || !(p->isr & 1) ||
        (p->isr >> p->nreplicas) || p->leader_epoch > p->epoch || p->epoch > p->partition_epoch)
        return KEEL_ECORRUPT;
    for (unsigned i = 0; i < p->nreplicas; i++) {
        if (!keel_id_validz(p->replicas[i])) return KEEL_ECORRUPT;
        for (unsigned j = 0; j < i; j++)
            if (!strcmp(p->replicas[i], p->replicas[j])) return KEEL_ECORRUPT;
    }
    return 0;
}

int mapstore_partition_set_pinned(mapstore *ms, unsigned p, int pinned) {
    int rc;
    if ((rc = check_part(ms, p))) return rc;
    if (pinned != 0 && pinned != 1)
        return mapstore__errf(ms, KEEL_EINVAL, "pinned must be 0 or 1, not %d", pinned);
    if ((rc = wrote(ms, ms->ops->partition_set_pinned(ms, p, pinned)))) return rc;
    if (ms->c.have_parts) ms->c.parts[p].pinned = pinned;
    return 0;
}

/* ---- Moves ------------------------------------------------------------------ */

int mapstore_move_create(mapstore *ms, unsigned p, const char *to, const char *reason,
                         int64_t now_ms, uint64_t *id) {
    int rc;
    if ((rc = check_part(ms, p)) || (rc = check_id(ms, "move destination", to)) ||
        (rc = check_reason(ms, reason)))
        return rc;
    /* The new record is built from the partition as it is now. */
    if ((rc = msc_parts(ms))) return rc;
    uint64_t mid = 0;
    mapstore_partition part = ms->c.parts[p];
    if ((rc = wrote(ms, ms->ops->move_create(ms, p, to, reason ? reason : "", now_ms, &mid))))
        return rc;
    if (id) *id = mid;
    mapstore_move m;
    memset(&m, 0, sizeof m);
    m.id = mid;
    m.partition = p;
    snprintf(m.from, sizeof m.from, "%s", part.owner);
    snprintf(m.to, sizeof m.to, "%s", to);
    m.state = MAPSTORE_MOVE_PLANNED;
    m.epoch = part.epoch;
    m.at_ms[MAPSTORE_MOVE_PLANNED] = now_ms;
    snprintf(m.reason, sizeof m.reason, "%s", reason ? reason : "");
    (void)msc_add_move(ms, &m);
    return 0;
}

int mapstore_move_get(mapstore *ms, uint64_t id, mapstore_move *out) {
    int rc;
    if ((rc = check_out(ms, out, out))) return rc;
    if ((rc = msc_moves(ms))) return rc;
    const mapstore_move *m = msc_move(ms, id);
    if (!m) return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)id);
    *out = *m;
    return 0;
}

int mapstore_move_list(mapstore *ms, int unfinished, mapstore_move **out, size_t *n) {
    int rc;
    if ((rc = check_out(ms, out, n))) return rc;
    if ((rc = msc_moves(ms))) return rc;
    if (!unfinished) {
        *n = ms->c.nm;
        return copy_out(ms, ms->c.moves, ms->c.nm, sizeof **out, (void **)out);
    }
    size_t k = 0;
    for (size_t i = 0; i < ms->c.nm; i++)
        k += ms->c.moves[i].state != MAPSTORE_MOVE_DONE &&
             ms->c.moves[i].state != MAPSTORE_MOVE_ABORTED;
    *out = NULL;
    *n = k;
    if (!k) return 0;
    if (!(*out = malloc(k * sizeof **out))) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    k = 0;
    for (size_t i = 0; i < ms->c.nm; i++)
        if (ms->c.moves[i].state != MAPSTORE_MOVE_DONE &&
            ms->c.moves[i].state != MAPSTORE_MOVE_ABORTED)
            (*out)[k++] = ms->c.moves[i];
    return 0;
}

int mapstore_move_advance(mapstore *ms, uint64_t id, mapstore_move_state state, int64_t now_ms,
                          const char *abort_reason) {
    int rc;
    if ((unsigned)state >= MAPSTORE_MOVE_NSTATES)
        return mapstore__errf(ms, KEEL_EINVAL, "invalid move state %d", (int)state);
    if (state == MAPSTORE_MOVE_COMMITTED)
        return mapstore__errf(ms, KEEL_EINVAL,
                              "a move becomes COMMITTED only by "
                              "mapstore_move_commit");
    if (abort_reason && state != MAPSTORE_MOVE_ABORTED)
        return mapstore__errf(ms, KEEL_EINVAL, "an abort reason needs state ABORTED");
    if ((rc = check_reason(ms, abort_reason))) return rc;
    if ((rc = wrote(
             ms, ms->ops->move_advance(ms, id, state, now_ms, abort_reason ? abort_reason : ""))))
        return rc;
    mapstore_move *m = msc_move(ms, id);
    if (m) {
        m->state = state;
        m->at_ms[state] = now_ms;
        if (state == MAPSTORE_MOVE_ABORTED)
            snprintf(m->abort_reason, sizeof m->abort_reason, "%s",
                     abort_reason ? abort_reason : "");
    }
    return 0;
}

int mapstore_move_set_bytes(mapstore *ms, uint64_t id, uint64_t bytes) {
    if (bytes > (uint64_t)INT64_MAX)
        return mapstore__errf(ms, KEEL_ERANGE, "move bytes %llu too large",
                              (unsigned long long)bytes);
    int rc = wrote(ms, ms->ops->move_set_bytes(ms, id, bytes));
    mapstore_move *m = rc ? NULL : msc_move(ms, id);
    if (m) m->bytes = bytes;
    return rc;
}

int mapstore_move_commit(mapstore *ms, uint64_t id, int64_t now_ms, uint64_t *epoch,
                         uint64_t *version) {
    uint64_t e = 0;
    int rc = wrote(ms, ms->ops->move_commit(ms, id, now_ms, &e, version));
    if (rc) return rc;
    if (epoch) *epoch = e;
    mapstore_move *m = msc_move(ms, id);
    if (!m) { /* not cached: its partition's row cannot be updated from it */
        if (ms->c.have_parts) msc_drop(ms);
        return 0;
    }
    m->state = MAPSTORE_MOVE_COMMITTED;
    m->at_ms[MAPSTORE_MOVE_COMMITTED] = now_ms;
    if (ms->c.have_parts) {
        mapstore_partition *c = &ms->c.parts[m->partition];
        mapstore__owner_change(c, m->to);
        if (c->epoch != e) msc_drop(ms); /* cannot happen: the rules are shared */
    }
    return 0;
}

/* ---- Settings --------------------------------------------------------------- */

int mapstore_setting_set(mapstore *ms, const char *name, const char *value, int64_t now_ms) {
    int rc;
    if ((rc = check_setting_name(ms, name))) return rc;
    if (!value || strlen(value) > MAPSTORE_SETTING_VALUE_MAX)
        return mapstore__errf(ms, KEEL_EINVAL, "setting %s: value missing or longer than %d", name,
                              MAPSTORE_SETTING_VALUE_MAX);
    if ((rc = wrote(ms, ms->ops->setting_set(ms, name, value, now_ms)))) return rc;
    (void)msc_put_setting(ms, name, value, now_ms);
    return 0;
}

int mapstore_setting_get(mapstore *ms, const char *name, mapstore_setting *out) {
    int rc;
    if ((rc = check_setting_name(ms, name)) || (rc = check_out(ms, out, out))) return rc;
    if ((rc = msc_settings(ms))) return rc;
    const mapstore_setting *st = msc_setting(ms, name);
    if (!st) return mapstore__errf(ms, KEEL_ENOTFOUND, "no setting %s", name);
    *out = *st;
    return 0;
}

int mapstore_setting_unset(mapstore *ms, const char *name) {
    int rc;
    if ((rc = check_setting_name(ms, name))) return rc;
    if ((rc = wrote(ms, ms->ops->setting_unset(ms, name)))) return rc;
    msc_del_setting(ms, name);
    return 0;
}

int mapstore_setting_list(mapstore *ms, mapstore_setting **out, size_t *n) {
    int rc;
    if ((rc = check_out(ms, out, n))) return rc;
    if ((rc = msc_settings(ms))) return rc;
    *n = ms->c.ns;
    return copy_out(ms, ms->c.settings, ms->c.ns, sizeof **out, (void **)out);
}
