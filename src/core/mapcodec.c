/* mapcodec.c - the cluster map and its JSON codec; see mapcodec.h.
 *
 * Both directions go through cJSON, so escaping is cJSON's and never a
 * printf between quotes (which is how one id holding '"' used to make every
 * later map unparseable on every node). Numbers are written as raw decimal
 * text (cJSON_CreateRaw) so 64-bit values are exact; the parser reads them
 * through cJSON's doubles, exact up to 2^53, and refuses anything that is
 * not a non-negative integer below 2^64.
 *
 * Per-node fields live in write_node and parse_node only: a field added to
 * map_node needs a line in each.
 *
 * Replicas (issue 11 step 1) are checked in one place, check_rep, which
 * both keel_map_set_rep and the parser use; the writer leaves them out when
 * they are the RF 1 defaults (rep_is_default), so RF 1 text is unchanged.
 */
#include "core/mapcodec.h"
#include "core/err.h"
#include "core/jsonarena.h"
#include "core/num.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The map ------------------------------------------------------------- */

int keel_map_is_pow2_partitions(unsigned p) {
    return p >= KEEL_MIN_PARTITIONS && p <= KEEL_MAX_PARTITIONS && (p & (p - 1)) == 0;
}

int keel_map_init(keel_map *m, unsigned partitions) {
    memset(m, 0, sizeof *m);
    if (!keel_map_is_pow2_partitions(partitions)) return KEEL_EINVAL;
    m->partitions = partitions;
    m->owner = malloc(partitions * sizeof *m->owner);
    m->epoch = calloc(partitions, sizeof *m->epoch);
    m->rep = calloc(partitions, sizeof *m->rep);
    if (!m->owner || !m->epoch || !m->rep) {
        keel_map_close(m);
        return KEEL_ENOMEM;
    }
    for (unsigned i = 0; i < partitions; i++)
        m->owner[i] = -1;
    return 0;
}

void keel_map_close(keel_map *m) {
    free(m->nodes);
    free(m->owner);
    free(m->epoch);
    free(m->rep);
    memset(m, 0, sizeof *m);
}

int keel_map_find_node(const keel_map *m, const char *id) {
    for (size_t i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].id, id) == 0) return (int)i;
    return -1;
}

int keel_map_add(keel_map *m, const map_node *nn) {
    if (!keel_id_validz(nn->id) || !keel_host_validz(nn->host) || nn->port <= 0 || nn->port > 65535)
        return KEEL_EINVAL;
    if (keel_map_find_node(m, nn->id) >= 0) return KEEL_EEXIST;
    map_node *n = realloc(m->nodes, (m->nnodes + 1) * sizeof *n);
    if (!n) return KEEL_ENOMEM;
    m->nodes = n;
    m->nodes[m->nnodes] = *nn;
    return (int)m->nnodes++;
}

int keel_map_add_node(keel_map *m, const char *id, const char *host, int port) {
    map_node n;
    memset(&n, 0, sizeof n);
    if (strlen(id) > KEEL_ID_MAX || strlen(host) > KEEL_HOST_MAX) return KEEL_EINVAL;
    snprintf(n.id, sizeof n.id, "%s", id);
    snprintf(n.host, sizeof n.host, "%s", host);
    n.port = port;
    return keel_map_add(m, &n);
}

/* ---- Replicas ------------------------------------------------------------ */

static int map_fail(char *err, size_t cap, const char *msg) {
    if (err && cap) snprintf(err, cap, "%s", msg);
    return KEEL_EINVAL;
}

void keel_map_get_rep(const keel_map *m, unsigned p, map_rep *out) {
    memset(out, 0, sizeof *out);
    if (p >= m->partitions || m->owner[p] < 0) return;
    /* A rep not led by owner[p] is stale (the owner was set directly
     * afterwards): the owner alone is what the map says then. */
    if (m->rep && m->rep[p].n && m->rep[p].node[0] == m->owner[p]) {
        *out = m->rep[p];
        return;
    }
    out->n = 1;
    out->isr = 1;
    out->node[0] = m->owner[p];
    out->leader_epoch = out->partition_epoch = m->epoch[p];
}

/* The checks of keel_map_set_rep, against m's nodes and the ownership
 * epoch e. */
static int check_rep(const keel_map *m, const map_rep *r, uint64_t e, char *err, size_t cap) {
    if (r->n < 1 || r->n > KEEL_RF_MAX) {
        if (err && cap) snprintf(err, cap, "a partition needs 1 to %d replicas", KEEL_RF_MAX);
        return KEEL_EINVAL;
    }
    for (unsigned i = 0; i < r->n; i++) {
        if (r->node[i] < 0 || (size_t)r->node[i] >= m->nnodes)
            return map_fail(err, cap, "a replica names a node that is not listed");
        for (unsigned j = 0; j < i; j++)
            if (r->node[j] == r->node[i]) {
                if (err && cap)
                    snprintf(err, cap, "replica %s is listed twice", m->nodes[r->node[i]].id);
                return KEEL_EINVAL;
            }
    }
    if (r->isr & ~((1u << r->n) - 1))
        return map_fail(err, cap, "the ISR names a node that is not a replica");
    if (!(r->isr & 1)) return map_fail(err, cap, "the leader (first replica) must be in the ISR");
    if (r->leader_epoch > e || e > r->partition_epoch)
        return map_fail(err, cap, "epochs must satisfy leader_epoch <= epoch <= partition_epoch");
    return 0;
}

int keel_map_set_rep(keel_map *m, unsigned p, const map_rep *r, char *err, size_t cap) {
    if (p >= m->partitions) return map_fail(err, cap, "partition out of range");
    int rc = check_rep(m, r, m->epoch[p], err, cap);
    if (rc) return rc;
    map_rep c;
    memset(&c, 0, sizeof c); /* unused slots zeroed */
    c.n = r->n;
    c.isr = r->isr;
    memcpy(c.node, r->node, r->n * sizeof *r->node);
    c.leader_epoch = r->leader_epoch;
    c.partition_epoch = r->partition_epoch;
    m->rep[p] = c;
    m->owner[p] = c.node[0];
    return 0;
}

map_role keel_map_role(const keel_map *m, unsigned p, int k) {
    map_rep r;
    keel_map_get_rep(m, p, &r);
    for (unsigned i = 0; k >= 0 && i < r.n; i++)
        if (r.node[i] == k)
            return i == 0             ? MAP_ROLE_LEADER
                   : (r.isr >> i) & 1 ? MAP_ROLE_FOLLOWER
                                      : MAP_ROLE_LAGGING;
    return MAP_ROLE_NONE;
}

const char *keel_map_role_name(map_role r) {
    static const char *const names[] = {"none", "leader", "follower", "lagging"};
    return (unsigned)r < sizeof names / sizeof *names ? names[r] : "none";
}

/* 1 if r is what an entry without replication fields reads as. */
static int rep_is_default(const map_rep *r, uint64_t epoch) {
    return r->n == 1 && r->isr == 1 && r->leader_epoch == epoch && r->partition_epoch == epoch;
}

/* ---- Parser -------------------------------------------------------------- */

/* A JSON number that is a non-negative integer below 2^64. */
static int json_u64(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d >= 18446744073709551616.0 || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

/* "HOST:PORT", split at the last ':' (so an IPv6 host keeps its colons). */
static int parse_addr(const char *addr, map_node *n) {
    const char *colon = strrchr(addr, ':');
    if (!colon) return -1;
    size_t hl = (size_t)(colon - addr);
    uint64_t port;
    if (!keel_host_valid(addr, hl) || keel_parse_u64z(colon + 1, &port) || port == 0 ||
        port > 65535)
        return -1;
    memcpy(n->host, addr, hl);
    n->host[hl] = 0;
    n->port = (int)port;
    return 0;
}

/* One element of "nodes" into *n. Unknown fields are ignored. */
static int parse_node(const cJSON *o, map_node *n, char *err, size_t cap) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    const cJSON *addr = cJSON_GetObjectItemCaseSensitive(o, "addr");
    memset(n, 0, sizeof *n);
    if (!cJSON_IsObject(o) || !cJSON_IsString(id) || !cJSON_IsString(addr))
        return map_fail(err, cap, "each node needs string \"id\" and \"addr\"");
    if (!keel_id_validz(id->valuestring))
        return map_fail(err, cap, "a node id breaks the id rule " KEEL_ID_RULE);
    snprintf(n->id, sizeof n->id, "%s", id->valuestring);
    if (parse_addr(addr->valuestring, n)) {
        if (err && cap) snprintf(err, cap, "node %s: addr must be HOST:PORT (port 1-65535)", n->id);
        return KEEL_EINVAL;
    }
    /* Optional upper-case names; anything else is refused, not truncated. */
    static const char *const opt[] = {"liveness", "membership"};
    char *dst[] = {n->liveness, n->membership};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, opt[k]);
        if (!v) continue;
        size_t len = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
        int ok = len > 0 && len <= MAP_STATE_MAX;
        for (size_t i = 0; ok && i < len; i++)
            ok = (v->valuestring[i] >= 'A' && v->valuestring[i] <= 'Z') || v->valuestring[i] == '_';
        if (!ok) {
            if (err && cap) snprintf(err, cap, "node %s: bad \"%s\"", n->id, opt[k]);
            return KEEL_EINVAL;
        }
        memcpy(dst[k], v->valuestring, len + 1);
    }
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(o, "incarnation");
    if (inc) {
        size_t len = cJSON_IsString(inc) ? strlen(inc->valuestring) : 0;
        int ok = len > 0 && len <= MAP_INCARNATION_MAX;
        for (size_t i = 0; ok && i < len; i++) {
            char c = inc->valuestring[i];
            ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        }
        if (!ok) {
            if (err && cap)
                snprintf(err, cap, "node %s: \"incarnation\" must be 1 to %d lower-case hex digits",
                         n->id, MAP_INCARNATION_MAX);
            return KEEL_EINVAL;
        }
        memcpy(n->incarnation, inc->valuestring, len + 1);
    }
    return 0;
}

static int parse_nodes(const cJSON *arr, keel_map *m, char *err, size_t cap) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return map_fail(err, cap, "\"nodes\" must be a non-empty array");
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        map_node n;
        int rc = parse_node(o, &n, err, cap);
        if (rc) return rc;
        rc = keel_map_add(m, &n);
        if (rc == KEEL_EEXIST) {
            if (err && cap) snprintf(err, cap, "duplicate node id \"%s\"", n.id);
            return KEEL_EINVAL;
        }
        if (rc < 0) {
            if (err && cap) snprintf(err, cap, "bad node \"%s\": %s", n.id, keel_strerror(rc));
            return rc == KEEL_ENOMEM ? rc : KEEL_EINVAL;
        }
    }
    return 0;
}

/* A JSON array of listed node ids into idx[0..*n); -1 if it is not one
 * (too long, not strings, unknown id). Duplicates are check_rep's. */
static int parse_id_list(const cJSON *a, const keel_map *m, int32_t *idx, uint8_t *n) {
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > KEEL_RF_MAX) return -1;
    const cJSON *v;
    *n = 0;
    cJSON_ArrayForEach(v, a) {
        if (!cJSON_IsString(v) || !keel_id_validz(v->valuestring)) return -1;
        if ((idx[*n] = keel_map_find_node(m, v->valuestring)) < 0) return -1;
        (*n)++;
    }
    return 0;
}

/* The replication fields of one owner entry (leader `leader`, ownership
 * epoch e) into *r, defaults filled in, checked by check_rep. */
static int parse_rep(const cJSON *o, const keel_map *m, int leader, uint64_t e, map_rep *r,
                     char *err, size_t cap) {
    const cJSON *reps = cJSON_GetObjectItemCaseSensitive(o, "replicas");
    const cJSON *isr = cJSON_GetObjectItemCaseSensitive(o, "isr");
    const cJSON *le = cJSON_GetObjectItemCaseSensitive(o, "leader_epoch");
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(o, "partition_epoch");
    memset(r, 0, sizeof *r);
    r->n = 1;
    r->isr = 1;
    r->node[0] = leader;
    r->leader_epoch = r->partition_epoch = e;
    if (reps && parse_id_list(reps, m, r->node, &r->n)) {
        if (err && cap)
            snprintf(err, cap, "\"replicas\" must be an array of 1 to %d listed node ids",
                     KEEL_RF_MAX);
        return KEEL_EINVAL;
    }
    if (r->n == 0 || r->node[0] != leader)
        return map_fail(err, cap, "\"replicas\" must list the owner (\"node\") first");
    if (isr) {
        int32_t in[KEEL_RF_MAX];
        uint8_t ni;
        if (parse_id_list(isr, m, in, &ni) || ni == 0)
            return map_fail(err, cap, "\"isr\" must be a non-empty array of listed node ids");
        r->isr = 0;
        for (unsigned i = 0; i < ni; i++) {
            unsigned k = 0;
            while (k < r->n && r->node[k] != in[i])
                k++;
            if (k == r->n) return map_fail(err, cap, "the ISR names a node that is not a replica");
            if (r->isr & (1u << k)) return map_fail(err, cap, "the ISR lists a node twice");
            r->isr |= (uint8_t)(1u << k);
        }
    }
    if ((le && json_u64(le, &r->leader_epoch)) || (pe && json_u64(pe, &r->partition_epoch)))
        return map_fail(err, cap,
                        "\"leader_epoch\" and \"partition_epoch\" must be non-negative integers");
    return check_rep(m, r, e, err, cap);
}

static int parse_owners(const cJSON *arr, keel_map *m, char *err, size_t cap) {
    if (!cJSON_IsArray(arr)) return map_fail(err, cap, "\"owners\" must be an array");
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *first = cJSON_GetObjectItemCaseSensitive(o, "first");
        const cJSON *last = cJSON_GetObjectItemCaseSensitive(o, "last");
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(o, "node");
        const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(o, "epoch");
        uint64_t f, l, e = 1;
        if (!cJSON_IsObject(o) || json_u64(first, &f) || !cJSON_IsString(node))
            return map_fail(err, cap, "each owner needs numeric \"first\" and string \"node\"");
        l = f;
        if ((last && json_u64(last, &l)) || (epoch && json_u64(epoch, &e)))
            return map_fail(err, cap, "owner \"last\" and \"epoch\" must be non-negative integers");
        if (l < f || l >= m->partitions) {
            if (err && cap)
                snprintf(err, cap, "owner range %llu-%llu is outside partitions 0-%u",
                         (unsigned long long)f, (unsigned long long)l, m->partitions - 1);
            return KEEL_EINVAL;
        }
        int idx = keel_id_validz(node->valuestring) ? keel_map_find_node(m, node->valuestring) : -1;
        if (idx < 0) return map_fail(err, cap, "an owner names a node that is not listed");
        map_rep r;
        int rc = parse_rep(o, m, idx, e, &r, err, cap);
        if (rc) return rc;
        for (uint64_t p = f; p <= l; p++) {
            if (m->owner[p] >= 0) {
                if (err && cap)
                    snprintf(err, cap, "partition %llu has two owners", (unsigned long long)p);
                return KEEL_EINVAL;
            }
            m->owner[p] = idx;
            m->epoch[p] = e;
            m->rep[p] = r;
        }
    }
    return 0;
}

static int parse_tree(const char *text, keel_map *m, char *err, size_t cap) {
    int rc = KEEL_EINVAL;
    cJSON *root = cJSON_Parse(text);
    if (!root) return map_fail(err, cap, "map is not valid JSON");
    if (!cJSON_IsObject(root)) {
        rc = map_fail(err, cap, "map must be a JSON object");
        goto fail;
    }
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(root, "partitions");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *term = cJSON_GetObjectItemCaseSensitive(root, "term");
    uint64_t p = 1024, v = 1, t = 0;
    if ((parts && json_u64(parts, &p)) || p > KEEL_MAX_PARTITIONS ||
        !keel_map_is_pow2_partitions((unsigned)p)) {
        rc = map_fail(err, cap, "\"partitions\" must be a power of two from 16 to 16384");
        goto fail;
    }
    if ((ver && json_u64(ver, &v)) || (term && json_u64(term, &t))) {
        rc = map_fail(err, cap, "\"version\" and \"term\" must be non-negative integers");
        goto fail;
    }
    const cJSON *mi = cJSON_GetObjectItemCaseSensitive(root, "min_insync");
    const cJSON *lease = cJSON_GetObjectItemCaseSensitive(root, "lease_ms");
    uint64_t mis = 0, lms = 0;
    if ((mi && (json_u64(mi, &mis) || mis < 1 || mis > KEEL_RF_MAX)) ||
        (lease && (json_u64(lease, &lms) || lms < 100 || lms > 60000))) {
        rc = map_fail(err, cap, "\"min_insync\" must be 1..7 and \"lease_ms\" 100..60000");
        goto fail;
    }
    if ((rc = keel_map_init(m, (unsigned)p))) goto fail;
    m->version = v;
    m->term = t;
    m->min_insync = (uint32_t)mis;
    m->lease_ms = (uint32_t)lms;
    if ((rc = parse_nodes(cJSON_GetObjectItemCaseSensitive(root, "nodes"), m, err, cap))) goto fail;
    if ((rc = parse_owners(cJSON_GetObjectItemCaseSensitive(root, "owners"), m, err, cap)))
        goto fail;
    cJSON_Delete(root);
    return 0;
fail:
    cJSON_Delete(root);
    keel_map_close(m);
    return rc;
}

/* The tree lives in a json_arena (core/jsonarena.h): its nodes are freed
 * at once at the end instead of one by one. Nested in another scope (its
 * begin is refused), the parse allocates from the outer scope's arena,
 * freed at that scope's end. */
int keel_map_parse_json(const char *text, keel_map *m, char *err, size_t cap) {
    memset(m, 0, sizeof *m);
    json_arena ar = {0};
    (void)json_arena_begin(&ar);
    int rc = parse_tree(text, m, err, cap);
    json_arena_end(&ar);
    return rc;
}

/* ---- Writer -------------------------------------------------------------- */

/* Adds name: value as exact decimal text. 0 or -1 (out of memory). */
static int add_u64(cJSON *o, const char *name, uint64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    cJSON *raw = cJSON_CreateRaw(num);
    if (!raw) return -1;
    if (!cJSON_AddItemToObject(o, name, raw)) {
        cJSON_Delete(raw);
        return -1;
    }
    return 0;
}

/* One element of "nodes". */
static cJSON *write_node(const map_node *n) {
    cJSON *o = cJSON_CreateObject();
    char addr[KEEL_HOST_MAX + 8];
    snprintf(addr, sizeof addr, "%s:%d", n->host, n->port);
    if (!o || !cJSON_AddStringToObject(o, "id", n->id) ||
        !cJSON_AddStringToObject(o, "addr", addr) ||
        (n->liveness[0] && !cJSON_AddStringToObject(o, "liveness", n->liveness)) ||
        (n->membership[0] && !cJSON_AddStringToObject(o, "membership", n->membership)) ||
        (n->incarnation[0] && !cJSON_AddStringToObject(o, "incarnation", n->incarnation))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* An array of the ids of r's replicas (all, or those in the ISR). */
static cJSON *write_ids(const keel_map *m, const map_rep *r, int isr_only) {
    cJSON *a = cJSON_CreateArray();
    for (unsigned i = 0; a && i < r->n; i++) {
        if (isr_only && !((r->isr >> i) & 1)) continue;
        cJSON *s = cJSON_CreateString(m->nodes[r->node[i]].id);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

static int add_item(cJSON *o, const char *name, cJSON *v) {
    if (!v) return -1;
    if (!cJSON_AddItemToObject(o, name, v)) {
        cJSON_Delete(v);
        return -1;
    }
    return 0;
}

static cJSON *write_owner(const keel_map *m, size_t first, size_t last, const map_rep *r) {
    cJSON *o = cJSON_CreateObject();
    uint64_t epoch = m->epoch[first];
    if (!o || add_u64(o, "first", first) || add_u64(o, "last", last) ||
        !cJSON_AddStringToObject(o, "node", m->nodes[r->node[0]].id) || add_u64(o, "epoch", epoch))
        goto fail;
    if (!rep_is_default(r, epoch) &&
        (add_item(o, "replicas", write_ids(m, r, 0)) || add_item(o, "isr", write_ids(m, r, 1)) ||
         add_u64(o, "leader_epoch", r->leader_epoch) ||
         add_u64(o, "partition_epoch", r->partition_epoch)))
        goto fail;
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* 1 if partitions i and j are written as one run: same owner, epoch and
 * replicas. */
static int same_run(const keel_map *m, size_t i, size_t j) {
    if (m->owner[j] != m->owner[i] || m->epoch[j] != m->epoch[i]) return 0;
    map_rep a, b;
    keel_map_get_rep(m, (unsigned)i, &a);
    keel_map_get_rep(m, (unsigned)j, &b);
    if (a.n != b.n || a.isr != b.isr || a.leader_epoch != b.leader_epoch ||
        a.partition_epoch != b.partition_epoch)
        return 0;
    for (unsigned k = 0; k < a.n; k++)
        if (a.node[k] != b.node[k]) return 0;
    return 1;
}

static int add_to(cJSON *arr, cJSON *item) {
    if (!item) return -1;
    if (!cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* The replicas name nodes of m, led by the owner (a writer never emits a
 * map its own parser would refuse). */
static int write_rep_ok(const keel_map *m, const map_rep *r) {
    if (r->n < 1 || r->n > KEEL_RF_MAX) return 0;
    for (unsigned i = 0; i < r->n; i++)
        if (r->node[i] < 0 || (size_t)r->node[i] >= m->nnodes) return 0;
    return 1;
}

static int write_tree(const keel_map *m, uint64_t term, kbuf *out) {
    cJSON *root = cJSON_CreateObject();
    cJSON *nodes = NULL, *owners = NULL;
    int rc = KEEL_ENOMEM;
    if (!root || add_u64(root, "version", m->version) || add_u64(root, "term", term) ||
        add_u64(root, "partitions", m->partitions) ||
        (m->min_insync && add_u64(root, "min_insync", m->min_insync)) ||
        (m->lease_ms && add_u64(root, "lease_ms", m->lease_ms)) ||
        !(nodes = cJSON_AddArrayToObject(root, "nodes")))
        goto out;
    for (size_t k = 0; k < m->nnodes; k++)
        if (add_to(nodes, write_node(&m->nodes[k]))) goto out;
    if (!(owners = cJSON_AddArrayToObject(root, "owners"))) goto out;
    for (size_t i = 0; i < m->partitions;) { /* runs of one owner, epoch and replicas */
        size_t j = i + 1;
        while (j < m->partitions && same_run(m, i, j))
            j++;
        int32_t o = m->owner[i];
        map_rep r;
        keel_map_get_rep(m, (unsigned)i, &r);
        if (o >= 0 && (size_t)o < m->nnodes && !write_rep_ok(m, &r)) {
            rc = KEEL_EINVAL;
            goto out;
        }
        if (o >= 0 && (size_t)o < m->nnodes && add_to(owners, write_owner(m, i, j - 1, &r)))
            goto out;
        i = j;
    }
    char *text = cJSON_PrintUnformatted(root);
    if (!text) goto out;
    rc = kbuf_appendstr(out, text) ? KEEL_ENOMEM : 0;
    cJSON_free(text);
out:
    cJSON_Delete(root);
    return rc;
}

/* As the parser: the tree and its printed text are arena memory, and the
 * text is copied into out before the scope ends. */
int keel_map_write_json(const keel_map *m, uint64_t term, kbuf *out) {
    json_arena ar = {0};
    (void)json_arena_begin(&ar);
    int rc = write_tree(m, term, out);
    json_arena_end(&ar);
    return rc;
}
