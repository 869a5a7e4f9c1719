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
    /* The worker thread of an asynchronous handle has its own buffer; its
     * completion copies it to errmsg on the loop thread. */
    char *dst = ms->async && ms_on_worker() ? ms->werr : ms->errmsg;
    va_start(ap, fmt);
    vsnprintf(dst, MAPSTORE_ERR_MAX, fmt, ap);
    va_end(ap);
    for (char *c = dst; *c; c++) /* one line, for logs */
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
    mapstore_async_stop(ms);
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
        if (pl[i].nfollowers > KEEL_RF_MAX - 1 || (pl[i].nfollowers && !pl[i].followers)) {
            rc = mapstore__errf(ms, KEEL_EINVAL, "partition %u: 0 to %d followers, not %u",
                                pl[i].partition, KEEL_RF_MAX - 1, pl[i].nfollowers);
            break;
        }
        for (unsigned f = 0; f < pl[i].nfollowers && !rc; f++) {
            if ((rc = check_id(ms, "follower", pl[i].followers[f]))) break;
            if (!strcmp(pl[i].followers[f], pl[i].owner))
                rc = mapstore__errf(ms, KEEL_EINVAL, "partition %u: %s listed twice",
                                    pl[i].partition, pl[i].owner);
            for (unsigned g = 0; g < f && !rc; g++)
                if (!strcmp(pl[i].followers[f], pl[i].followers[g]))
                    rc = mapstore__errf(ms, KEEL_EINVAL, "partition %u: %s listed twice",
                                        pl[i].partition, pl[i].followers[f]);
        }
        if (rc) break;
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

/* Asynchronous mode: the backend's figures belong to the worker; the loop
 * reads the copies the last completion left. */
uint64_t mapstore_term(const mapstore *ms) {
    return ms->async ? ms->term : ms->ops->term(ms->impl);
}

uint64_t mapstore_version(const mapstore *ms) {
    return ms->async ? ms->version : ms->ops->version(ms->impl);
}

/* ---- Writes: builders -------------------------------------------------------
 * A write carries copies of its strings. A string that does not fit (or a
 * NULL where one is needed) sets a bit in w->overflow, and the check then
 * refuses it with the message the synchronous call always gave. */

enum { OV_ID = 1, OV_NAME = 2, OV_TEXT = 4 };

static void put_str(mapstore_write *w, char *dst, size_t cap, const char *src, unsigned bit) {
    dst[0] = 0;
    if (!src || strlen(src) >= cap)
        w->overflow |= bit;
    else
        memcpy(dst, src, strlen(src) + 1);
}

static void w_init(mapstore_write *w, mapstore_wkind kind) {
    memset(w, 0, sizeof *w);
    w->kind = kind;
}

void mapstore_w_bump_term(mapstore_write *w) {
    w_init(w, MAPSTORE_W_BUMP_TERM);
}

void mapstore_w_node_upsert(mapstore_write *w, const mapstore_node *n, int64_t now_ms) {
    w_init(w, MAPSTORE_W_NODE_UPSERT);
    if (n)
        w->node = *n;
    else
        w->overflow |= OV_ID;
    w->now_ms = now_ms;
}

void mapstore_w_node_set_liveness(mapstore_write *w, const char *id, mapstore_liveness l) {
    w_init(w, MAPSTORE_W_NODE_SET_LIVENESS);
    put_str(w, w->id, sizeof w->id, id, OV_ID);
    w->value = (int)l;
}

void mapstore_w_node_set_membership(mapstore_write *w, const char *id, mapstore_membership m) {
    w_init(w, MAPSTORE_W_NODE_SET_MEMBERSHIP);
    put_str(w, w->id, sizeof w->id, id, OV_ID);
    w->value = (int)m;
}

static void w_node_heartbeat(mapstore_write *w, const char *id, int64_t now_ms) {
    w_init(w, MAPSTORE_W_NODE_HEARTBEAT);
    put_str(w, w->id, sizeof w->id, id, OV_ID);
    w->now_ms = now_ms;
}

static void w_partition_set_owner(mapstore_write *w, unsigned p, const char *owner) {
    w_init(w, MAPSTORE_W_PARTITION_SET_OWNER);
    w->partition = p;
    w->has_id = owner != NULL;
    if (owner) put_str(w, w->id, sizeof w->id, owner, OV_ID);
}

void mapstore_w_partition_place(mapstore_write *w, const mapstore_placement *pl, size_t n) {
    w_init(w, MAPSTORE_W_PARTITION_PLACE);
    w->pl = pl;
    w->npl = n;
}

static void w_partition_set_pinned(mapstore_write *w, unsigned p, int pinned) {
    w_init(w, MAPSTORE_W_PARTITION_SET_PINNED);
    w->partition = p;
    w->value = pinned;
}

void mapstore_w_move_create(mapstore_write *w, unsigned p, const char *to, const char *reason,
                            int64_t now_ms) {
    w_init(w, MAPSTORE_W_MOVE_CREATE);
    w->partition = p;
    put_str(w, w->id, sizeof w->id, to, OV_ID);
    put_str(w, w->text, MAPSTORE_REASON_MAX + 1, reason ? reason : "", OV_TEXT);
    w->now_ms = now_ms;
}

void mapstore_w_move_advance(mapstore_write *w, uint64_t id, mapstore_move_state state,
                             int64_t now_ms, const char *abort_reason) {
    w_init(w, MAPSTORE_W_MOVE_ADVANCE);
    w->move = id;
    w->value = (int)state;
    w->now_ms = now_ms;
    w->has_text = abort_reason != NULL;
    if (abort_reason) put_str(w, w->text, MAPSTORE_REASON_MAX + 1, abort_reason, OV_TEXT);
}

void mapstore_w_move_set_bytes(mapstore_write *w, uint64_t id, uint64_t bytes) {
    w_init(w, MAPSTORE_W_MOVE_SET_BYTES);
    w->move = id;
    w->bytes = bytes;
}

void mapstore_w_move_commit(mapstore_write *w, uint64_t id, int64_t now_ms) {
    w_init(w, MAPSTORE_W_MOVE_COMMIT);
    w->move = id;
    w->now_ms = now_ms;
}

void mapstore_w_setting_set(mapstore_write *w, const char *name, const char *value,
                            int64_t now_ms) {
    w_init(w, MAPSTORE_W_SETTING_SET);
    put_str(w, w->name, sizeof w->name, name, OV_NAME);
    put_str(w, w->text, sizeof w->text, value, OV_TEXT);
    w->now_ms = now_ms;
}

void mapstore_w_setting_unset(mapstore_write *w, const char *name) {
    w_init(w, MAPSTORE_W_SETTING_UNSET);
    put_str(w, w->name, sizeof w->name, name, OV_NAME);
}

static void w_ids(mapstore_write *w, unsigned p, uint64_t expected_pe, const char *const *ids,
                  size_t n) {
    w->partition = p;
    w->expected_pe = expected_pe;
    if (!ids || n < 1 || n > KEEL_RF_MAX) {
        w->overflow |= OV_ID;
        return;
    }
    w->nids = (unsigned)n;
    for (size_t i = 0; i < n; i++)
        put_str(w, w->ids[i], sizeof w->ids[i], ids[i], OV_ID);
}

void mapstore_w_partition_set_isr(mapstore_write *w, unsigned p, uint64_t expected_pe,
                                  const char *const *isr, size_t n) {
    w_init(w, MAPSTORE_W_PARTITION_SET_ISR);
    w_ids(w, p, expected_pe, isr, n);
}

void mapstore_w_partition_set_replicas(mapstore_write *w, unsigned p, uint64_t expected_pe,
                                       const char *const *replicas, size_t n) {
    w_init(w, MAPSTORE_W_PARTITION_SET_REPLICAS);
    w_ids(w, p, expected_pe, replicas, n);
}

void mapstore_w_partition_set_leader(mapstore_write *w, unsigned p, uint64_t expected_pe,
                                     const char *leader, int old_in_isr) {
    w_init(w, MAPSTORE_W_PARTITION_SET_LEADER);
    w_ids(w, p, expected_pe, &leader, 1);
    w->value = old_in_isr != 0;
}

void mapstore_w_bump_version(mapstore_write *w) {
    w_init(w, MAPSTORE_W_BUMP_VERSION);
}

/* ---- Writes: checks (no I/O, any time) ----------------------------------------- */

static int w_id(mapstore *ms, const mapstore_write *w, const char *what) {
    if (w->overflow & OV_ID)
        return mapstore__errf(ms, KEEL_EINVAL, "%s: not a valid id (" KEEL_ID_RULE ")", what);
    return check_id(ms, what, w->id);
}

static int w_reason(mapstore *ms, const mapstore_write *w) {
    if (w->overflow & OV_TEXT)
        return mapstore__errf(ms, KEEL_EINVAL, "reason longer than %d bytes", MAPSTORE_REASON_MAX);
    return 0;
}

static int w_name(mapstore *ms, const mapstore_write *w) {
    if (w->overflow & OV_NAME) return mapstore__errf(ms, KEEL_EINVAL, "not a valid setting name");
    return check_setting_name(ms, w->name);
}

static int c_none(mapstore *ms, const mapstore_write *w) {
    (void)ms, (void)w;
    return 0;
}

static int c_node_upsert(mapstore *ms, const mapstore_write *w) {
    if (w->overflow & OV_ID) return check_out(ms, NULL, NULL);
    return check_node(ms, &w->node);
}

static int c_node_set_liveness(mapstore *ms, const mapstore_write *w) {
    int rc;
    if ((rc = w_id(ms, w, "node id"))) return rc;
    if ((unsigned)w->value >= MAPSTORE_NODE_NLIVENESS)
        return mapstore__errf(ms, KEEL_EINVAL, "invalid liveness %d", w->value);
    return 0;
}

static int c_node_set_membership(mapstore *ms, const mapstore_write *w) {
    int rc;
    if ((rc = w_id(ms, w, "node id"))) return rc;
    if ((unsigned)w->value >= MAPSTORE_MEMBER_N)
        return mapstore__errf(ms, KEEL_EINVAL, "invalid membership %d", w->value);
    return 0;
}

static int c_node_heartbeat(mapstore *ms, const mapstore_write *w) {
    return w_id(ms, w, "node id");
}

static int c_partition_set_owner(mapstore *ms, const mapstore_write *w) {
    int rc;
    if ((rc = check_part(ms, w->partition))) return rc;
    return w->has_id ? w_id(ms, w, "owner") : 0;
}

static int c_partition_place(mapstore *ms, const mapstore_write *w) {
    return check_placement(ms, w->pl, w->npl);
}

static int c_partition_set_pinned(mapstore *ms, const mapstore_write *w) {
    int rc;
    if ((rc = check_part(ms, w->partition))) return rc;
    if (w->value != 0 && w->value != 1)
        return mapstore__errf(ms, KEEL_EINVAL, "pinned must be 0 or 1, not %d", w->value);
    return 0;
}

static int c_move_create(mapstore *ms, const mapstore_write *w) {
    int rc;
    if ((rc = check_part(ms, w->partition)) || (rc = w_id(ms, w, "move destination")) ||
        (rc = w_reason(ms, w)))
        return rc;
    return 0;
}

static int c_move_advance(mapstore *ms, const mapstore_write *w) {
    if ((unsigned)w->value >= MAPSTORE_MOVE_NSTATES)
        return mapstore__errf(ms, KEEL_EINVAL, "invalid move state %d", w->value);
    if (w->value == MAPSTORE_MOVE_COMMITTED)
        return mapstore__errf(ms, KEEL_EINVAL,
                              "a move becomes COMMITTED only by "
                              "mapstore_move_commit");
    if (w->has_text && w->value != MAPSTORE_MOVE_ABORTED)
        return mapstore__errf(ms, KEEL_EINVAL, "an abort reason needs state ABORTED");
    return w_reason(ms, w);
}

static int c_move_set_bytes(mapstore *ms, const mapstore_write *w) {
    if (w->bytes > (uint64_t)INT64_MAX)
        return mapstore__errf(ms, KEEL_ERANGE, "move bytes %llu too large",
                              (unsigned long long)w->bytes);
    return 0;
}

static int c_setting_set(mapstore *ms, const mapstore_write *w) {
    int rc;
    if ((rc = w_name(ms, w))) return rc;
    if (w->overflow & OV_TEXT)
        return mapstore__errf(ms, KEEL_EINVAL, "setting %s: value missing or longer than %d",
                              w->name, MAPSTORE_SETTING_VALUE_MAX);
    return 0;
}

static int c_setting_unset(mapstore *ms, const mapstore_write *w) {
    return w_name(ms, w);
}

static int check_id_list(mapstore *ms, const char *what, const char *const *ids, size_t n);

/* The list of a replication write, as pointers into w. */
static size_t w_list(const mapstore_write *w, const char *ptr[KEEL_RF_MAX]) {
    for (unsigned i = 0; i < w->nids && i < KEEL_RF_MAX; i++)
        ptr[i] = w->ids[i];
    return w->nids;
}

static int c_partition_list(mapstore *ms, const mapstore_write *w, const char *what) {
    const char *ids[KEEL_RF_MAX];
    int rc;
    if ((rc = check_part(ms, w->partition))) return rc;
    if (w->overflow & OV_ID)
        return mapstore__errf(ms, KEEL_EINVAL, "%s: 1 to %d valid node ids (" KEEL_ID_RULE ")",
                              what, KEEL_RF_MAX);
    return check_id_list(ms, what, ids, w_list(w, ids));
}

static int c_partition_set_isr(mapstore *ms, const mapstore_write *w) {
    return c_partition_list(ms, w, "ISR");
}

static int c_partition_set_replicas(mapstore *ms, const mapstore_write *w) {
    return c_partition_list(ms, w, "replicas");
}

static int c_partition_set_leader(mapstore *ms, const mapstore_write *w) {
    return c_partition_list(ms, w, "leader");
}

/* ---- Writes: the backend calls --------------------------------------------------- */

static int r_bump_term(mapstore *ms, ms_job *j) {
    return ms->ops->bump_term(ms, &j->r.term);
}

static int r_node_upsert(mapstore *ms, ms_job *j) {
    return ms->ops->node_upsert(ms, &j->w.node, j->w.now_ms);
}

static int r_node_set_liveness(mapstore *ms, ms_job *j) {
    return ms->ops->node_set_liveness(ms, j->w.id, (mapstore_liveness)j->w.value);
}

static int r_node_set_membership(mapstore *ms, ms_job *j) {
    return ms->ops->node_set_membership(ms, j->w.id, (mapstore_membership)j->w.value);
}

static int r_node_heartbeat(mapstore *ms, ms_job *j) {
    return ms->ops->node_heartbeat(ms, j->w.id, j->w.now_ms);
}

static int r_partition_set_owner(mapstore *ms, ms_job *j) {
    return ms->ops->partition_set_owner(ms, j->w.partition, j->w.has_id ? j->w.id : NULL,
                                        &j->r.epoch, &j->r.version);
}

static int r_partition_place(mapstore *ms, ms_job *j) {
    if (!j->w.npl) { /* nothing to place: no transaction */
        j->r.version = ms->ops->version(ms->impl);
        return 0;
    }
    return ms->ops->partition_place(ms, j->pl, j->w.npl, &j->r.version);
}

static int r_partition_set_pinned(mapstore *ms, ms_job *j) {
    return ms->ops->partition_set_pinned(ms, j->w.partition, j->w.value);
}

static int r_move_create(mapstore *ms, ms_job *j) {
    return ms->ops->move_create(ms, j->w.partition, j->w.id, j->w.text, j->w.now_ms, &j->r.id);
}

static int r_move_advance(mapstore *ms, ms_job *j) {
    return ms->ops->move_advance(ms, j->w.move, (mapstore_move_state)j->w.value, j->w.now_ms,
                                 j->w.has_text ? j->w.text : "");
}

static int r_move_set_bytes(mapstore *ms, ms_job *j) {
    return ms->ops->move_set_bytes(ms, j->w.move, j->w.bytes);
}

static int r_move_commit(mapstore *ms, ms_job *j) {
    return ms->ops->move_commit(ms, j->w.move, j->w.now_ms, &j->r.epoch, &j->r.version);
}

static int r_setting_set(mapstore *ms, ms_job *j) {
    return ms->ops->setting_set(ms, j->w.name, j->w.text, j->w.now_ms);
}

static int r_setting_unset(mapstore *ms, ms_job *j) {
    return ms->ops->setting_unset(ms, j->w.name);
}

static int r_partition_set_isr(mapstore *ms, ms_job *j) {
    const char *ids[KEEL_RF_MAX];
    size_t n = w_list(&j->w, ids);
    int rc = ms->ops->partition_set_isr(ms, j->w.partition, j->w.expected_pe, ids, n, &j->r.part);
    if (!rc) j->r.version = ms->ops->version(ms->impl);
    return rc;
}

static int r_partition_set_replicas(mapstore *ms, ms_job *j) {
    const char *ids[KEEL_RF_MAX];
    size_t n = w_list(&j->w, ids);
    int rc =
        ms->ops->partition_set_replicas(ms, j->w.partition, j->w.expected_pe, ids, n, &j->r.part);
    if (!rc) j->r.version = ms->ops->version(ms->impl);
    return rc;
}

static int r_partition_set_leader(mapstore *ms, ms_job *j) {
    int rc = ms->ops->partition_set_leader(ms, j->w.partition, j->w.expected_pe, j->w.ids[0],
                                           j->w.value, &j->r.part);
    if (!rc) j->r.version = ms->ops->version(ms->impl);
    return rc;
}

static int r_bump_version(mapstore *ms, ms_job *j) {
    return ms->ops->bump_version(ms, &j->r.version);
}

static int r_reload(mapstore *ms, ms_job *j) {
    (void)ms;
    j->want_fresh = 1; /* the re-read after the call is the whole job */
    return 0;
}

/* ---- Writes: memory after success (the rules of mapstore.h) ---------------------- */

static void a_none(mapstore *ms, const ms_job *j) {
    (void)ms, (void)j;
}

static void a_node_upsert(mapstore *ms, const ms_job *j) {
    (void)msc_put_node(ms, &j->w.node, j->w.now_ms); /* ENOMEM dropped the cache: still correct */
}

static void a_node_set_liveness(mapstore *ms, const ms_job *j) {
    mapstore_node *n = msc_node(ms, j->w.id);
    if (n) n->liveness = (mapstore_liveness)j->w.value;
}

static void a_node_set_membership(mapstore *ms, const ms_job *j) {
    mapstore_node *n = msc_node(ms, j->w.id);
    if (n) n->membership = (mapstore_membership)j->w.value;
}

static void a_node_heartbeat(mapstore *ms, const ms_job *j) {
    msc_heartbeat(ms, j->w.id, j->w.now_ms);
}

static void a_partition_set_owner(mapstore *ms, const ms_job *j) {
    if (!ms->c.have_parts) return;
    mapstore_partition *c = &ms->c.parts[j->w.partition];
    mapstore__owner_change(c, j->w.has_id ? j->w.id : NULL);
    if (c->epoch != j->r.epoch) msc_drop(ms); /* cannot happen: the rules are shared */
}

static void a_partition_place(mapstore *ms, const ms_job *j) {
    for (size_t i = 0; ms->c.have_parts && i < j->w.npl; i++) { /* each placed: owner, epoch + 1 */
        mapstore__place(&ms->c.parts[j->pl[i].partition], &j->pl[i]);
    }
}

static void a_partition_set_pinned(mapstore *ms, const ms_job *j) {
    if (ms->c.have_parts) ms->c.parts[j->w.partition].pinned = j->w.value;
}

/* The new record is built from the partition as it was when the move was
 * created: a move creation changes no partition, so as it is now. */
static void a_move_create(mapstore *ms, const ms_job *j) {
    if (!ms->c.have_moves) return;
    if (!ms->c.have_parts) { /* cannot build the record: forget the moves */
        msc_drop(ms);
        return;
    }
    const mapstore_partition *part = &ms->c.parts[j->w.partition];
    mapstore_move m;
    memset(&m, 0, sizeof m);
    m.id = j->r.id;
    m.partition = j->w.partition;
    snprintf(m.from, sizeof m.from, "%s", part->owner);
    snprintf(m.to, sizeof m.to, "%s", j->w.id);
    m.state = MAPSTORE_MOVE_PLANNED;
    m.epoch = part->epoch;
    m.at_ms[MAPSTORE_MOVE_PLANNED] = j->w.now_ms;
    snprintf(m.reason, sizeof m.reason, "%s", j->w.text);
    (void)msc_add_move(ms, &m);
}

static void a_move_advance(mapstore *ms, const ms_job *j) {
    mapstore_move *m = msc_move(ms, j->w.move);
    if (!m) return;
    m->state = (mapstore_move_state)j->w.value;
    m->at_ms[m->state] = j->w.now_ms;
    if (m->state == MAPSTORE_MOVE_ABORTED)
        snprintf(m->abort_reason, sizeof m->abort_reason, "%s", j->w.has_text ? j->w.text : "");
}

static void a_move_set_bytes(mapstore *ms, const ms_job *j) {
    mapstore_move *m = msc_move(ms, j->w.move);
    if (m) m->bytes = j->w.bytes;
}

static void a_move_commit(mapstore *ms, const ms_job *j) {
    mapstore_move *m = msc_move(ms, j->w.move);
    if (!m) { /* not cached: its partition's row cannot be updated from it */
        if (ms->c.have_parts) msc_drop(ms);
        return;
    }
    m->state = MAPSTORE_MOVE_COMMITTED;
    m->at_ms[MAPSTORE_MOVE_COMMITTED] = j->w.now_ms;
    if (ms->c.have_parts) {
        mapstore_partition *c = &ms->c.parts[m->partition];
        mapstore__owner_change(c, m->to);
        if (c->epoch != j->r.epoch) msc_drop(ms); /* cannot happen: the rules are shared */
    }
}

/* The backend returned the partition as committed: memory takes it. */
static void a_partition_cas(mapstore *ms, const ms_job *j) {
    if (ms->c.have_parts) ms->c.parts[j->w.partition] = j->r.part;
}

static void a_setting_set(mapstore *ms, const ms_job *j) {
    (void)msc_put_setting(ms, j->w.name, j->w.text, j->w.now_ms);
}

static void a_setting_unset(mapstore *ms, const ms_job *j) {
    msc_del_setting(ms, j->w.name);
}

const ms_wop ms_wops[MAPSTORE_W_NKINDS] = {
    [MAPSTORE_W_BUMP_TERM] = {"bump_term", c_none, r_bump_term, a_none},
    [MAPSTORE_W_NODE_UPSERT] = {"node_upsert", c_node_upsert, r_node_upsert, a_node_upsert},
    [MAPSTORE_W_NODE_SET_LIVENESS] = {"node_set_liveness", c_node_set_liveness, r_node_set_liveness,
                                      a_node_set_liveness},
    [MAPSTORE_W_NODE_SET_MEMBERSHIP] = {"node_set_membership", c_node_set_membership,
                                        r_node_set_membership, a_node_set_membership},
    [MAPSTORE_W_NODE_HEARTBEAT] = {"node_heartbeat", c_node_heartbeat, r_node_heartbeat,
                                   a_node_heartbeat},
    [MAPSTORE_W_PARTITION_SET_OWNER] = {"partition_set_owner", c_partition_set_owner,
                                        r_partition_set_owner, a_partition_set_owner},
    [MAPSTORE_W_PARTITION_PLACE] = {"partition_place", c_partition_place, r_partition_place,
                                    a_partition_place},
    [MAPSTORE_W_PARTITION_SET_PINNED] = {"partition_set_pinned", c_partition_set_pinned,
                                         r_partition_set_pinned, a_partition_set_pinned},
    [MAPSTORE_W_MOVE_CREATE] = {"move_create", c_move_create, r_move_create, a_move_create},
    [MAPSTORE_W_MOVE_ADVANCE] = {"move_advance", c_move_advance, r_move_advance, a_move_advance},
    [MAPSTORE_W_MOVE_SET_BYTES] = {"move_set_bytes", c_move_set_bytes, r_move_set_bytes,
                                   a_move_set_bytes},
    [MAPSTORE_W_MOVE_COMMIT] = {"move_commit", c_none, r_move_commit, a_move_commit},
    [MAPSTORE_W_SETTING_SET] = {"setting_set", c_setting_set, r_setting_set, a_setting_set},
    [MAPSTORE_W_SETTING_UNSET] = {"setting_unset", c_setting_unset, r_setting_unset,
                                  a_setting_unset},
    [MAPSTORE_W_RELOAD] = {"reload", c_none, r_reload, a_none},
    [MAPSTORE_W_PARTITION_SET_ISR] = {"partition_set_isr", c_partition_set_isr, r_partition_set_isr,
                                      a_partition_cas},
    [MAPSTORE_W_PARTITION_SET_REPLICAS] = {"partition_set_replicas", c_partition_set_replicas,
                                           r_partition_set_replicas, a_partition_cas},
    [MAPSTORE_W_PARTITION_SET_LEADER] = {"partition_set_leader", c_partition_set_leader,
                                         r_partition_set_leader, a_partition_cas},
    [MAPSTORE_W_BUMP_VERSION] = {"bump_version", c_none, r_bump_version, a_none},
};

int ms_refusal(int rc) {
    return rc == KEEL_EINVAL || rc == KEEL_ENOTFOUND || rc == KEEL_EEXIST || rc == KEEL_ERANGE;
}

/* Writes counted by mapstore_counters: every transaction but the term's
 * (as before the write table existed) and an empty placement. */
int ms_counted(const mapstore_write *w) {
    return w->kind != MAPSTORE_W_BUMP_TERM && w->kind != MAPSTORE_W_RELOAD &&
           !(w->kind == MAPSTORE_W_PARTITION_PLACE && w->npl == 0);
}

/* The synchronous path: check, run, count, apply, on the caller's thread. */
static int write_sync(mapstore *ms, const mapstore_write *w, mapstore_result *r) {
    if (ms->async)
        return mapstore__errf(ms, KEEL_EINVAL,
                              "asynchronous handle: writes go through mapstore_submit");
    const ms_wop *op = &ms_wops[w->kind];
    int rc = op->check(ms, w);
    if (rc) return rc;
    /* A move's record is built from its partition: have the partitions. */
    if (w->kind == MAPSTORE_W_MOVE_CREATE && (rc = msc_parts(ms))) return rc;
    ms_job *j = calloc(1, sizeof *j);
    if (!j) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    j->w = *w;
    j->pl = (mapstore_placement *)w->pl;
    rc = op->run(ms, j);
    if (w->kind == MAPSTORE_W_NODE_HEARTBEAT) /* counted only: no backend stores them */
        rc = counted(ms, rc);
    else if (ms_counted(w))
        rc = wrote(ms, rc);
    else if (w->kind == MAPSTORE_W_BUMP_TERM && audit_enabled())
        audit_map_write("bump_term", rc, rc ? 0 : j->r.term, ms->ops->version(ms->impl));
    if (!rc) op->apply(ms, j);
    *r = j->r;
    free(j);
    return rc;
}

/* ---- The synchronous calls ------------------------------------------------------- */

int mapstore_bump_term(mapstore *ms, uint64_t *term) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_bump_term(&w);
    int rc = write_sync(ms, &w, &r);
    if (!rc && term) *term = r.term;
    return rc;
}

int mapstore_node_upsert(mapstore *ms, const mapstore_node *n, int64_t now_ms) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_node_upsert(&w, n, now_ms);
    return write_sync(ms, &w, &r);
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
    mapstore_write w;
    mapstore_result r;
    mapstore_w_node_set_liveness(&w, id, l);
    return write_sync(ms, &w, &r);
}

int mapstore_node_set_membership(mapstore *ms, const char *id, mapstore_membership m) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_node_set_membership(&w, id, m);
    return write_sync(ms, &w, &r);
}

int mapstore_node_heartbeat(mapstore *ms, const char *id, int64_t now_ms) {
    mapstore_write w;
    mapstore_result r;
    w_node_heartbeat(&w, id, now_ms);
    return write_sync(ms, &w, &r);
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
    mapstore_write w;
    mapstore_result r;
    w_partition_set_owner(&w, p, owner);
    int rc = write_sync(ms, &w, &r);
    if (rc) return rc;
    if (epoch) *epoch = r.epoch;
    if (version) *version = r.version;
    return 0;
}

int mapstore_partition_place(mapstore *ms, const mapstore_placement *pl, size_t n,
                             uint64_t *version) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_partition_place(&w, pl, n);
    int rc = write_sync(ms, &w, &r);
    if (!rc && version) *version = r.version;
    return rc;
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
    if (ms->async) /* not in the write table yet: no asynchronous form */
        return mapstore__errf(ms, KEEL_EINVAL,
                              "asynchronous handle: replica-set writes are synchronous only");
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
    if (ms->async) /* not in the write table yet: no asynchronous form */
        return mapstore__errf(ms, KEEL_EINVAL,
                              "asynchronous handle: replica-set writes are synchronous only");
    if ((rc = check_part(ms, p)) || (rc = check_id_list(ms, "replicas", replicas, n))) return rc;
    mapstore_partition np;
    if ((rc = wrote(ms, ms->ops->partition_set_replicas(ms, p, expected_pe, replicas, n, &np))))
        return rc;
    if (pe) *pe = np.partition_epoch;
    if (ms->c.have_parts) ms->c.parts[p] = np;
    return 0;
}

int mapstore_partition_set_leader(mapstore *ms, unsigned p, uint64_t expected_pe,
                                  const char *leader, int old_in_isr, uint64_t *pe) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_partition_set_leader(&w, p, expected_pe, leader, old_in_isr);
    int rc = write_sync(ms, &w, &r);
    if (!rc && pe) *pe = r.part.partition_epoch;
    return rc;
}

int mapstore_bump_version(mapstore *ms, uint64_t *version) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_bump_version(&w);
    int rc = write_sync(ms, &w, &r);
    if (!rc && version) *version = r.version;
    return rc;
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

int mapstore__set_leader(mapstore *ms, mapstore_partition *p, uint64_t expected_pe,
                         const char *leader, int old_in_isr) {
    int rc = cas_check(ms, p, expected_pe);
    if (rc) return rc;
    int k = rep_index(p, leader);
    if (k < 0)
        return mapstore__errf(ms, KEEL_EINVAL, "partition %u: %s is not a replica", p->id, leader);
    if (k > 0) { /* leader first, the old leader second, the others in place */
        char ids[KEEL_RF_MAX][KEEL_ID_MAX + 1];
        int in[KEEL_RF_MAX];
        size_t n = 0;
        snprintf(ids[n], sizeof ids[n], "%s", leader);
        in[n++] = 1;
        snprintf(ids[n], sizeof ids[n], "%s", p->replicas[0]);
        in[n++] = old_in_isr && (p->isr & 1);
        for (unsigned i = 1; i < p->nreplicas; i++)
            if ((int)i != k) {
                snprintf(ids[n], sizeof ids[n], "%s", p->replicas[i]);
                in[n++] = (p->isr >> i) & 1;
            }
        put_list(p, ids, in, n);
        snprintf(p->owner, sizeof p->owner, "%s", leader);
    }
    p->epoch++;
    p->leader_epoch++;
    p->partition_epoch++;
    return 0;
}

void mapstore__place(mapstore_partition *p, const mapstore_placement *pl) {
    mapstore__owner_change(p, pl->owner);
    for (unsigned f = 0; f < pl->nfollowers && p->nreplicas < KEEL_RF_MAX; f++) {
        snprintf(p->replicas[p->nreplicas], sizeof p->replicas[0], "%s", pl->followers[f]);
        p->isr |= 1u << p->nreplicas;
        p->nreplicas++;
    }
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
    mapstore_write w;
    mapstore_result r;
    w_partition_set_pinned(&w, p, pinned);
    return write_sync(ms, &w, &r);
}

/* ---- Moves ------------------------------------------------------------------ */

int mapstore_move_create(mapstore *ms, unsigned p, const char *to, const char *reason,
                         int64_t now_ms, uint64_t *id) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_move_create(&w, p, to, reason, now_ms);
    int rc = write_sync(ms, &w, &r);
    if (!rc && id) *id = r.id;
    return rc;
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
    mapstore_write w;
    mapstore_result r;
    mapstore_w_move_advance(&w, id, state, now_ms, abort_reason);
    return write_sync(ms, &w, &r);
}

int mapstore_move_set_bytes(mapstore *ms, uint64_t id, uint64_t bytes) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_move_set_bytes(&w, id, bytes);
    return write_sync(ms, &w, &r);
}

int mapstore_move_commit(mapstore *ms, uint64_t id, int64_t now_ms, uint64_t *epoch,
                         uint64_t *version) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_move_commit(&w, id, now_ms);
    int rc = write_sync(ms, &w, &r);
    if (rc) return rc;
    if (epoch) *epoch = r.epoch;
    if (version) *version = r.version;
    return 0;
}

/* ---- Settings --------------------------------------------------------------- */

int mapstore_setting_set(mapstore *ms, const char *name, const char *value, int64_t now_ms) {
    mapstore_write w;
    mapstore_result r;
    mapstore_w_setting_set(&w, name, value, now_ms);
    return write_sync(ms, &w, &r);
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
    mapstore_write w;
    mapstore_result r;
    mapstore_w_setting_unset(&w, name);
    return write_sync(ms, &w, &r);
}

int mapstore_setting_list(mapstore *ms, mapstore_setting **out, size_t *n) {
    int rc;
    if ((rc = check_out(ms, out, n))) return rc;
    if ((rc = msc_settings(ms))) return rc;
    *n = ms->c.ns;
    return copy_out(ms, ms->c.settings, ms->c.ns, sizeof **out, (void **)out);
}
