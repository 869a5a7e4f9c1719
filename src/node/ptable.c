/* ptable.c - cluster map and partition table; see ptable.h.
 *
 * Invariant: state[i] is SERVING/OUTGOING/FENCED only if the current map
 * names this node as owner of i. apply_map enforces it when a map arrives;
 * the move protocol (later) changes states only through this module.
 */
#include "node/ptable.h"
#include "core/err.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ptable {
    char self_id[KEEL_ID_MAX + 1];
    unsigned partitions;
    int self_index; /* in map.nodes, or -1 */
    keel_map map;
    uint8_t *state; /* [partitions] part_state */
};

int keel_map_is_pow2_partitions(unsigned p) {
    return p >= KEEL_MIN_PARTITIONS && p <= KEEL_MAX_PARTITIONS && (p & (p - 1)) == 0;
}

int keel_map_init(keel_map *m, unsigned partitions) {
    memset(m, 0, sizeof *m);
    if (!keel_map_is_pow2_partitions(partitions)) return KEEL_EINVAL;
    m->partitions = partitions;
    m->owner = malloc(partitions * sizeof *m->owner);
    m->epoch = calloc(partitions, sizeof *m->epoch);
    if (!m->owner || !m->epoch) {
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
    memset(m, 0, sizeof *m);
}

int keel_map_find_node(const keel_map *m, const char *id) {
    for (size_t i = 0; i < m->nnodes; i++)
        if (strcmp(m->nodes[i].id, id) == 0) return (int)i;
    return -1;
}

int keel_map_add_node(keel_map *m, const char *id, const char *host, int port) {
    if (!id[0] || strlen(id) > KEEL_ID_MAX || strlen(host) > KEEL_HOST_MAX || port <= 0 ||
        port > 65535 || strchr(id, ' '))
        return KEEL_EINVAL;
    if (keel_map_find_node(m, id) >= 0) return KEEL_EEXIST;
    map_node *n = realloc(m->nodes, (m->nnodes + 1) * sizeof *n);
    if (!n) return KEEL_ENOMEM;
    m->nodes = n;
    n = &m->nodes[m->nnodes];
    snprintf(n->id, sizeof n->id, "%s", id);
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    return (int)m->nnodes++;
}

/* ---- JSON map ------------------------------------------------------------ */

static int map_fail(char *err, size_t cap, const char *msg) {
    snprintf(err, cap, "%s", msg);
    return KEEL_EINVAL;
}

static int parse_nodes(const cJSON *arr, keel_map *m, char *err, size_t cap) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return map_fail(err, cap, "\"nodes\" must be a non-empty array");
    const cJSON *n;
    cJSON_ArrayForEach(n, arr) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(n, "id");
        const cJSON *addr = cJSON_GetObjectItemCaseSensitive(n, "addr");
        if (!cJSON_IsString(id) || !cJSON_IsString(addr))
            return map_fail(err, cap, "each node needs string \"id\" and \"addr\"");
        const char *colon = strrchr(addr->valuestring, ':');
        char host[KEEL_HOST_MAX + 1];
        size_t hl = colon ? (size_t)(colon - addr->valuestring) : 0;
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || hl == 0 || hl > KEEL_HOST_MAX || *end || port <= 0 || port > 65535) {
            snprintf(err, cap, "node %s: addr must be HOST:PORT, got \"%s\"", id->valuestring,
                     addr->valuestring);
            return KEEL_EINVAL;
        }
        memcpy(host, addr->valuestring, hl);
        host[hl] = 0;
        int rc = keel_map_add_node(m, id->valuestring, host, (int)port);
        if (rc == KEEL_EEXIST) {
            snprintf(err, cap, "duplicate node id \"%s\"", id->valuestring);
            return KEEL_EINVAL;
        }
        if (rc < 0) {
            snprintf(err, cap, "bad node \"%s\": %s", id->valuestring, keel_strerror(rc));
            return KEEL_EINVAL;
        }
    }
    return 0;
}

static int parse_owners(const cJSON *arr, keel_map *m, char *err, size_t cap) {
    if (!cJSON_IsArray(arr)) return map_fail(err, cap, "\"owners\" must be an array");
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *first = cJSON_GetObjectItemCaseSensitive(o, "first");
        const cJSON *last = cJSON_GetObjectItemCaseSensitive(o, "last");
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(o, "node");
        const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(o, "epoch");
        if (!cJSON_IsNumber(first) || !cJSON_IsString(node))
            return map_fail(err, cap, "each owner needs numeric \"first\" and string \"node\"");
        double f = first->valuedouble, l = cJSON_IsNumber(last) ? last->valuedouble : f;
        double e = cJSON_IsNumber(epoch) ? epoch->valuedouble : 1;
        if (f < 0 || l < f || l >= m->partitions || f != (double)(unsigned)f ||
            l != (double)(unsigned)l || e < 0) {
            snprintf(err, cap, "owner range %g-%g is outside partitions 0-%u", f, l,
                     m->partitions - 1);
            return KEEL_EINVAL;
        }
        int idx = keel_map_find_node(m, node->valuestring);
        if (idx < 0) {
            snprintf(err, cap, "owner names unknown node \"%s\"", node->valuestring);
            return KEEL_EINVAL;
        }
        for (unsigned p = (unsigned)f; p <= (unsigned)l; p++) {
            if (m->owner[p] >= 0) {
                snprintf(err, cap, "partition %u has two owners", p);
                return KEEL_EINVAL;
            }
            m->owner[p] = idx;
            m->epoch[p] = (uint64_t)e;
        }
    }
    return 0;
}

int keel_map_parse_json(const char *text, keel_map *m, char *err, size_t cap) {
    int rc = KEEL_EINVAL;
    memset(m, 0, sizeof *m);
    cJSON *root = cJSON_Parse(text);
    if (!root) return map_fail(err, cap, "map is not valid JSON");
    const cJSON *parts = cJSON_GetObjectItemCaseSensitive(root, "partitions");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    double p = cJSON_IsNumber(parts) ? parts->valuedouble : 1024;
    if (p != (double)(unsigned)p || !keel_map_is_pow2_partitions((unsigned)p)) {
        rc = map_fail(err, cap, "\"partitions\" must be a power of two from 16 to 16384");
        goto fail;
    }
    if ((rc = keel_map_init(m, (unsigned)p))) goto fail;
    m->version = cJSON_IsNumber(ver) && ver->valuedouble >= 0 ? (uint64_t)ver->valuedouble : 1;
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

/* ---- Partition table ------------------------------------------------------ */

ptable *ptable_new(unsigned partitions, const char *self_id) {
    ptable *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    snprintf(t->self_id, sizeof t->self_id, "%s", self_id);
    t->partitions = partitions;
    t->self_index = -1;
    t->state = calloc(partitions, 1);
    if (!t->state || keel_map_init(&t->map, partitions)) {
        ptable_free(t);
        return NULL;
    }
    return t;
}

void ptable_free(ptable *t) {
    if (!t) return;
    keel_map_close(&t->map);
    free(t->state);
    free(t);
}

int ptable_apply_map(ptable *t, keel_map *m) {
    if (m->partitions != t->partitions) return KEEL_EINVAL;
    if (m->version < t->map.version) return KEEL_ERANGE;
    int self = keel_map_find_node(m, t->self_id);
    for (unsigned p = 0; p < t->partitions; p++) {
        int mine = self >= 0 && m->owner[p] == self;
        part_state s = t->state[p];
        if (mine)
            t->state[p] = (s == PART_OUTGOING || s == PART_FENCED) ? s : PART_SERVING;
        else if (s == PART_SERVING || s == PART_OUTGOING || s == PART_FENCED)
            t->state[p] = PART_RETIRED;
    }
    keel_map_close(&t->map);
    t->map = *m;
    t->self_index = self;
    memset(m, 0, sizeof *m);
    return 0;
}

void ptable_route(const ptable *t, unsigned slot, route *out) {
    unsigned p = keel_slot_partition(slot, t->partitions);
    out->partition = p;
    out->owner = NULL;
    part_state s = t->state[p];
    if (s == PART_SERVING || s == PART_OUTGOING) {
        out->kind = ROUTE_SERVE;
        return;
    }
    if (s == PART_FENCED) {
        out->kind = ROUTE_HOLD;
        return;
    }
    int o = t->map.owner[p];
    if (o < 0 || o == t->self_index) {
        out->kind = ROUTE_DOWN;
        return;
    }
    out->kind = ROUTE_MOVED;
    out->owner = &t->map.nodes[o];
}

const keel_map *ptable_map(const ptable *t) {
    return &t->map;
}
unsigned ptable_partitions(const ptable *t) {
    return t->partitions;
}
const char *ptable_self_id(const ptable *t) {
    return t->self_id;
}
int ptable_self_index(const ptable *t) {
    return t->self_index;
}
void ptable_set_state(ptable *t, unsigned partition, part_state s) {
    if (partition < t->partitions) t->state[partition] = (uint8_t)s;
}

part_state ptable_state(const ptable *t, unsigned partition) {
    return partition < t->partitions ? (part_state)t->state[partition] : PART_ABSENT;
}

const char *part_state_name(part_state s) {
    static const char *names[] = {"ABSENT", "SERVING", "OUTGOING", "FENCED", "INCOMING", "RETIRED"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "UNKNOWN";
}

uint64_t ptable_self_epoch(const ptable *t) {
    uint64_t e = 0;
    for (unsigned p = 0; p < t->partitions; p++)
        if (t->self_index >= 0 && t->map.owner[p] == t->self_index && t->map.epoch[p] > e)
            e = t->map.epoch[p];
    return e;
}
