/* mapstore_etcd.c - the map store on etcd (see mapstore_etcd.h for the
 * layout, the transaction rule and outcome-unknown settling, and
 * docs/mapstore.md).
 *
 * The mirror. The handle keeps the whole stored map in memory (meta, nodes,
 * partitions, moves, settings), read once at open with one range request
 * over the prefix. Every write is validated against the mirror and sent as
 * one transaction guarded by meta's mod revision as the mirror last saw it:
 * if the transaction applies, nothing else changed the map since, so the
 * mirror plus this write is exactly what etcd holds, and the write is
 * applied to the mirror. If it does not apply (another writer), or its
 * outcome could not be settled, the mirror is marked stale and the next
 * call reloads it first.
 *
 * Each write sets meta's write_id to one more than the last; the settle
 * after a lost answer reads it back (see tx_settle).
 *
 * Threads: one thread at a time (the owner, or the map store's worker once
 * the handle is asynchronous); HTTP runs on the etcd_client's worker thread,
 * and each call waits for its answer (mapstore_etcd.h).
 */
#include "coord/mapstore_etcd.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "coord/etcd_client.h"
#include "coord/mapstore.h"
#include "coord/mapstore_int.h" /* the handle's ops, for mapstore_is_etcd */
#include "core/err.h"
#include "core/failpoint.h"
#include "core/id.h"

#define ME_FORMAT 1
#define ME_U63 ((uint64_t)INT64_MAX)
#define ME_RETRIES 1 /* resends of a write whose lost copy was fenced off */

typedef struct me_meta {
    char cluster_id[MAPSTORE_CLUSTER_ID_MAX + 1];
    unsigned partitions;
    uint64_t term, version, next_move, write_id;
    int64_t created_at_ms;
} me_meta;

typedef struct me {
    etcd_client *c;
    char prefix[MAPSTORE_ETCD_PREFIX_MAX + 1];
    me_meta meta;         /* as committed */
    int64_t meta_rev;     /* meta's mod revision as last seen */
    int stale;            /* the mirror may differ from etcd: reload first */
    mapstore_node *nodes; /* sorted by id */
    size_t nn;
    mapstore_partition *parts; /* [P] */
    mapstore_move *moves;      /* sorted by id */
    size_t nm;
    mapstore_setting *settings; /* sorted by name */
    size_t ns;
    mapstore_etcd_stats st;
    int is_move_commit; /* the commit under way is mapstore_move_commit's (failpoints) */
    int64_t guard_rev;  /* > 0: writes also need PREFIX "leader" created at this revision */
    int not_leader;     /* the last refused txn failed on guard_rev */
} me;

static const mapstore_ops etcd_ops;

/* ---- JSON values ------------------------------------------------------------ */

static cJSON *add_u64(cJSON *o, const char *name, uint64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    return cJSON_AddStringToObject(o, name, num);
}

static cJSON *add_i64(cJSON *o, const char *name, int64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%lld", (long long)v);
    return cJSON_AddStringToObject(o, name, num);
}

/* A string field into dst[cap]: 0, or -1 if absent, not a string or too
 * long. */
static int get_str(const cJSON *o, const char *name, char *dst, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap) return -1;
    strcpy(dst, v->valuestring);
    return 0;
}

/* A 64-bit field written by add_i64: a string of decimal digits, optionally
 * signed. 0, or -1. */
static int get_i64(const cJSON *o, const char *name, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v) || !v->valuestring[0]) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v->valuestring, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

static int get_u63(const cJSON *o, const char *name, uint64_t *out) {
    int64_t x;
    if (get_i64(o, name, &x) || x < 0) return -1;
    *out = (uint64_t)x;
    return 0;
}

static char *print_free(cJSON *o) {
    char *t = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return t;
}

static char *meta_text(const me_meta *m) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddNumberToObject(o, "format", ME_FORMAT) ||
        !cJSON_AddStringToObject(o, "kind", "keel-map") ||
        !cJSON_AddStringToObject(o, "cluster_id", m->cluster_id) ||
        !cJSON_AddNumberToObject(o, "partitions", m->partitions) || !add_u64(o, "term", m->term) ||
        !add_u64(o, "version", m->version) || !add_u64(o, "next_move", m->next_move) ||
        !add_u64(o, "write_id", m->write_id) || !add_i64(o, "created_at_ms", m->created_at_ms)) {
        cJSON_Delete(o);
        return NULL;
    }
    return print_free(o);
}

/* Parses meta: 0, KEEL_EWRONGTYPE (not a Keel map), KEEL_ERANGE (unknown
 * format), KEEL_ECORRUPT. */
static int meta_parse(const char *text, me_meta *m) {
    cJSON *o = cJSON_Parse(text);
    char kind[16] = "";
    int rc = 0;
    memset(m, 0, sizeof *m);
    if (!cJSON_IsObject(o) || get_str(o, "kind", kind, sizeof kind) || strcmp(kind, "keel-map")) {
        rc = KEEL_EWRONGTYPE;
    } else {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "format");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "partitions");
        if (!cJSON_IsNumber(f) || f->valuedouble != ME_FORMAT)
            rc = KEEL_ERANGE;
        else if (!cJSON_IsNumber(p) ||
                 get_str(o, "cluster_id", m->cluster_id, sizeof m->cluster_id) ||
                 !m->cluster_id[0] || get_u63(o, "term", &m->term) ||
                 get_u63(o, "version", &m->version) || get_u63(o, "next_move", &m->next_move) ||
                 get_u63(o, "write_id", &m->write_id) ||
                 get_i64(o, "created_at_ms", &m->created_at_ms) ||
                 !keel_map_is_pow2_partitions((unsigned)p->valuedouble) ||
                 p->valuedouble != (double)(unsigned)p->valuedouble)
            rc = KEEL_ECORRUPT;
        else
            m->partitions = (unsigned)p->valuedouble;
    }
    cJSON_Delete(o);
    return rc;
}

static char *node_text(const mapstore_node *n) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "id", n->id) ||
        !cJSON_AddStringToObject(o, "host", n->host) ||
        !cJSON_AddNumberToObject(o, "port", n->port) ||
        !cJSON_AddStringToObject(o, "rack", n->rack) ||
        !cJSON_AddNumberToObject(o, "capacity", n->capacity) ||
        !cJSON_AddStringToObject(o, "liveness", mapstore_liveness_name(n->liveness)) ||
        !cJSON_AddStringToObject(o, "membership", mapstore_membership_name(n->membership)) ||
        !add_i64(o, "registered_at_ms", n->registered_at_ms) ||
        !add_i64(o, "last_heartbeat_ms", n->last_heartbeat_ms)) {
        cJSON_Delete(o);
        return NULL;
    }
    return print_free(o);
}

static int node_parse(const cJSON *o, mapstore_node *n) {
    char live[16], member[16];
    memset(n, 0, sizeof *n);
    const cJSON *port = cJSON_GetObjectItemCaseSensitive(o, "port");
    const cJSON *cap = cJSON_GetObjectItemCaseSensitive(o, "capacity");
    if (get_str(o, "id", n->id, sizeof n->id) || get_str(o, "host", n->host, sizeof n->host) ||
        get_str(o, "rack", n->rack, sizeof n->rack) || get_str(o, "liveness", live, sizeof live) ||
        get_str(o, "membership", member, sizeof member) ||
        mapstore_liveness_parse(live, &n->liveness) ||
        mapstore_membership_parse(member, &n->membership) || !cJSON_IsNumber(port) ||
        !cJSON_IsNumber(cap) || get_i64(o, "registered_at_ms", &n->registered_at_ms) ||
        get_i64(o, "last_heartbeat_ms", &n->last_heartbeat_ms) || !keel_id_validz(n->id))
        return KEEL_ECORRUPT;
    n->port = (int)port->valuedouble;
    n->capacity = cap->valuedouble;
    return 0;
}

static char *move_text(const mapstore_move *m) {
    cJSON *o = cJSON_CreateObject(), *at = NULL;
    int ok =
        o && add_u64(o, "id", m->id) && cJSON_AddNumberToObject(o, "partition", m->partition) &&
        cJSON_AddStringToObject(o, "from", m->from) && cJSON_AddStringToObject(o, "to", m->to) &&
        cJSON_AddStringToObject(o, "state", mapstore_move_state_name(m->state)) &&
        add_u64(o, "epoch", m->epoch) && add_u64(o, "bytes", m->bytes) &&
        cJSON_AddStringToObject(o, "reason", m->reason) &&
        cJSON_AddStringToObject(o, "abort_reason", m->abort_reason) &&
        (at = cJSON_AddObjectToObject(o, "at_ms"));
    for (int i = 0; ok && i < MAPSTORE_MOVE_NSTATES; i++)
        ok = add_i64(at, mapstore_move_state_name((mapstore_move_state)i), m->at_ms[i]) != NULL;
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return print_free(o);
}

static int move_parse(const cJSON *o, mapstore_move *m) {
    char state[16];
    memset(m, 0, sizeof *m);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "partition");
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "at_ms");
    if (get_u63(o, "id", &m->id) || !cJSON_IsNumber(p) || p->valuedouble < 0 ||
        get_str(o, "from", m->from, sizeof m->from) || get_str(o, "to", m->to, sizeof m->to) ||
        get_str(o, "state", state, sizeof state) || mapstore_move_state_parse(state, &m->state) ||
        get_u63(o, "epoch", &m->epoch) || get_u63(o, "bytes", &m->bytes) ||
        get_str(o, "reason", m->reason, sizeof m->reason) ||
        get_str(o, "abort_reason", m->abort_reason, sizeof m->abort_reason) || !cJSON_IsObject(at))
        return KEEL_ECORRUPT;
    m->partition = (unsigned)p->valuedouble;
    for (int i = 0; i < MAPSTORE_MOVE_NSTATES; i++)
        if (get_i64(at, mapstore_move_state_name((mapstore_move_state)i), &m->at_ms[i]))
            return KEEL_ECORRUPT;
    return 0;
}

static char *setting_text(const mapstore_setting *s) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "name", s->name) ||
        !cJSON_AddStringToObject(o, "value", s->value) || !add_i64(o, "set_at_ms", s->set_at_ms)) {
        cJSON_Delete(o);
        return NULL;
    }
    return print_free(o);
}

static int setting_parse(const cJSON *o, mapstore_setting *s) {
    memset(s, 0, sizeof *s);
    if (get_str(o, "name", s->name, sizeof s->name) ||
        get_str(o, "value", s->value, sizeof s->value) || get_i64(o, "set_at_ms", &s->set_at_ms))
        return KEEL_ECORRUPT;
    return 0;
}

/* Chunk k of parts[P]: [[owner, "epoch", pinned], ...], each entry
 * followed by [replicas], [isr], "leader_epoch", "partition_epoch" unless
 * those are the RF 1 defaults (replicas = isr = [owner] or none, both
 * epochs = epoch), so an RF 1 store's chunks read the same in older builds
 * and entries an older build wrote read as RF 1. */
static unsigned chunk_count(unsigned partitions) {
    return (partitions + MAPSTORE_ETCD_CHUNK - 1) / MAPSTORE_ETCD_CHUNK;
}

static int rep_is_default(const mapstore_partition *p) {
    unsigned n = p->owner[0] ? 1 : 0;
    return p->nreplicas == n && p->isr == n && p->leader_epoch == p->epoch &&
           p->partition_epoch == p->epoch;
}

/* Appends the replication fields of p to entry e. 0, or -1 (memory). */
static int rep_append(cJSON *e, const mapstore_partition *p) {
    cJSON *r = cJSON_CreateArray(), *i = cJSON_CreateArray();
    if (!r || !i || !cJSON_AddItemToArray(e, r)) {
        cJSON_Delete(r);
        cJSON_Delete(i);
        return -1;
    }
    if (!cJSON_AddItemToArray(e, i)) {
        cJSON_Delete(i);
        return -1;
    }
    for (unsigned k = 0; k < p->nreplicas; k++) {
        if (!cJSON_AddItemToArray(r, cJSON_CreateString(p->replicas[k]))) return -1;
        if ((p->isr >> k) & 1 && !cJSON_AddItemToArray(i, cJSON_CreateString(p->replicas[k])))
            return -1;
    }
    char num[24];
    snprintf(num, sizeof num, "%llu", (unsigned long long)p->leader_epoch);
    if (!cJSON_AddItemToArray(e, cJSON_CreateString(num))) return -1;
    snprintf(num, sizeof num, "%llu", (unsigned long long)p->partition_epoch);
    return cJSON_AddItemToArray(e, cJSON_CreateString(num)) ? 0 : -1;
}

static char *chunk_text(const mapstore_partition *parts, unsigned partitions, unsigned k) {
    cJSON *a = cJSON_CreateArray();
    unsigned lo = k * MAPSTORE_ETCD_CHUNK, hi = lo + MAPSTORE_ETCD_CHUNK;
    if (hi > partitions) hi = partitions;
    for (unsigned p = lo; a && p < hi; p++) {
        cJSON *e = cJSON_CreateArray();
        char num[24];
        snprintf(num, sizeof num, "%llu", (unsigned long long)parts[p].epoch);
        if (!e || !cJSON_AddItemToArray(a, e) ||
            !cJSON_AddItemToArray(e, cJSON_CreateString(parts[p].owner)) ||
            !cJSON_AddItemToArray(e, cJSON_CreateString(num)) ||
            !cJSON_AddItemToArray(e, cJSON_CreateNumber(parts[p].pinned)) ||
            (!rep_is_default(&parts[p]) && rep_append(e, &parts[p]))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return print_free(a);
}

/* A decimal string below 2^63 into *out: 0, or -1. */
static int str_u63(const cJSON *v, uint64_t *out) {
    char *end;
    if (!cJSON_IsString(v) || !v->valuestring[0]) return -1;
    errno = 0;
    unsigned long long x = strtoull(v->valuestring, &end, 10);
    if (errno || *end || x > ME_U63 || v->valuestring[0] == '-') return -1;
    *out = x;
    return 0;
}

/* The replication fields of an entry (elements 3..6) into p. */
static int rep_parse(const cJSON *e, mapstore_partition *p) {
    const cJSON *r = cJSON_GetArrayItem(e, 3), *i = cJSON_GetArrayItem(e, 4), *v;
    if (!cJSON_IsArray(r) || !cJSON_IsArray(i) || cJSON_GetArraySize(r) > KEEL_RF_MAX ||
        str_u63(cJSON_GetArrayItem(e, 5), &p->leader_epoch) ||
        str_u63(cJSON_GetArrayItem(e, 6), &p->partition_epoch))
        return KEEL_ECORRUPT;
    cJSON_ArrayForEach(v, r) {
        if (!cJSON_IsString(v) || !keel_id_validz(v->valuestring)) return KEEL_ECORRUPT;
        strcpy(p->replicas[p->nreplicas++], v->valuestring);
    }
    cJSON_ArrayForEach(v, i) {
        unsigned k = 0;
        while (cJSON_IsString(v) && k < p->nreplicas && strcmp(p->replicas[k], v->valuestring))
            k++;
        if (!cJSON_IsString(v) || k == p->nreplicas || (p->isr >> k) & 1) return KEEL_ECORRUPT;
        p->isr |= 1u << k;
    }
    return 0;
}

static int chunk_parse(const cJSON *a, mapstore_partition *parts, unsigned partitions, unsigned k) {
    unsigned lo = k * MAPSTORE_ETCD_CHUNK, hi = lo + MAPSTORE_ETCD_CHUNK;
    if (hi > partitions) hi = partitions;
    if (!cJSON_IsArray(a) || (unsigned)cJSON_GetArraySize(a) != hi - lo) return KEEL_ECORRUPT;
    unsigned p = lo;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        const cJSON *o = cJSON_GetArrayItem(e, 0), *ep = cJSON_GetArrayItem(e, 1),
                    *pin = cJSON_GetArrayItem(e, 2);
        int size = cJSON_GetArraySize(e);
        mapstore_partition *x = &parts[p];
        memset(x, 0, sizeof *x);
        if (!cJSON_IsString(o) || strlen(o->valuestring) > KEEL_ID_MAX || str_u63(ep, &x->epoch) ||
            !cJSON_IsNumber(pin) || (pin->valuedouble != 0 && pin->valuedouble != 1) ||
            (size != 3 && size != 7))
            return KEEL_ECORRUPT;
        x->id = p;
        strcpy(x->owner, o->valuestring);
        x->pinned = (int)pin->valuedouble;
        if (size == 7) {
            if (rep_parse(e, x)) return KEEL_ECORRUPT;
        } else { /* the RF 1 defaults */
            x->leader_epoch = x->partition_epoch = x->epoch;
            if (x->owner[0]) {
                strcpy(x->replicas[0], x->owner);
                x->nreplicas = x->isr = 1;
            }
        }
        if (mapstore__part_check(x)) return KEEL_ECORRUPT;
        p++;
    }
    return 0;
}

/* ---- Keys -------------------------------------------------------------------- */

static void key_meta(const me *e, char *k, size_t cap) {
    snprintf(k, cap, "%smeta", e->prefix);
}
static void key_chunk(const me *e, unsigned c, char *k, size_t cap) {
    snprintf(k, cap, "%sparts/%03u", e->prefix, c);
}
static void key_node(const me *e, const char *id, char *k, size_t cap) {
    snprintf(k, cap, "%snode/%s", e->prefix, id);
}
static void key_move(const me *e, uint64_t id, char *k, size_t cap) {
    snprintf(k, cap, "%smove/%020llu", e->prefix, (unsigned long long)id);
}
static void key_setting(const me *e, const char *name, char *k, size_t cap) {
    snprintf(k, cap, "%sset/%s", e->prefix, name);
}

#define KEY_MAX (MAPSTORE_ETCD_PREFIX_MAX + 80)

/* ---- Requests ------------------------------------------------------------------ */

/* A range request over [key, range_end) (range_end NULL: key alone). */
static int range(me *e, const char *key, const char *range_end, int count_only, cJSON **reply) {
    cJSON *b = cJSON_CreateObject();
    char *k = etcd_b64(key, strlen(key)),
         *re = range_end ? etcd_b64(range_end, strlen(range_end)) : NULL;
    int ok = b && k && (!range_end || re) && cJSON_AddStringToObject(b, "key", k) &&
             (!re || cJSON_AddStringToObject(b, "range_end", re)) &&
             (!count_only || cJSON_AddTrueToObject(b, "count_only"));
    free(k);
    free(re);
    char *txt = ok ? cJSON_PrintUnformatted(b) : NULL;
    cJSON_Delete(b);
    *reply = NULL;
    if (!txt) return KEEL_ENOMEM;
    int rc = etcd_post(e->c, "/v3/kv/range", txt, reply);
    free(txt);
    return rc;
}

/* The text of a kv's key or value, malloc'd; NULL if absent or not base64. */
static char *kv_text(const cJSON *kv, const char *field) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, field);
    char *out = NULL;
    size_t n;
    if (!v) return strdup(""); /* the gateway omits empty values */
    if (!cJSON_IsString(v) || etcd_unb64(v->valuestring, &out, &n)) return NULL;
    if (strlen(out) != n) { /* a NUL inside: never written by Keel */
        free(out);
        return NULL;
    }
    return out;
}

/* Reads meta from a range answer into *m and its mod revision into *rev.
 * KEEL_ENOTFOUND when absent. */
static int meta_from_range(const cJSON *reply, me_meta *m, int64_t *rev) {
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(reply, "kvs");
    if (cJSON_GetArraySize(kvs) < 1) return KEEL_ENOTFOUND;
    const cJSON *kv = cJSON_GetArrayItem(kvs, 0);
    char *v = kv_text(kv, "value");
    if (!v) return KEEL_ECORRUPT;
    int rc = meta_parse(v, m);
    free(v);
    if (rev) *rev = etcd_json_i64(kv, "mod_revision");
    return rc;
}

static int read_meta(me *e, me_meta *m, int64_t *rev, char *err, size_t cap) {
    char k[KEY_MAX];
    cJSON *r;
    key_meta(e, k, sizeof k);
    int rc = range(e, k, NULL, 0, &r);
    if (rc) {
        cJSON_Delete(r);
        return keel_errf(err, cap, rc, "etcd: reading %s: %s", k, etcd_client_errmsg(e->c));
    }
    rc = meta_from_range(r, m, rev);
    cJSON_Delete(r);
    return rc;
}

/* ---- The mirror ------------------------------------------------------------------ */

static int cmp_node(const void *a, const void *b) {
    return strcmp(((const mapstore_node *)a)->id, ((const mapstore_node *)b)->id);
}
static int cmp_move(const void *a, const void *b) {
    uint64_t x = ((const mapstore_move *)a)->id, y = ((const mapstore_move *)b)->id;
    return x < y ? -1 : x > y;
}
static int cmp_setting(const void *a, const void *b) {
    return strcmp(((const mapstore_setting *)a)->name, ((const mapstore_setting *)b)->name);
}

/* Appends item to *arr (of *n, capacity doubling by realloc each time it
 * is full; callers sort afterwards or insert in order). */
static int push(void **arr, size_t *n, size_t sz, const void *item) {
    char *a = realloc(*arr, (*n + 1) * sz);
    if (!a) return KEEL_ENOMEM;
    memcpy(a + *n * sz, item, sz);
    *arr = a;
    (*n)++;
    return 0;
}

typedef struct mirror {
    me_meta meta;
    int64_t meta_rev;
    int have_meta;
    mapstore_node *nodes;
    size_t nn;
    mapstore_partition *parts;
    unsigned char *chunk_seen;
    mapstore_move *moves;
    size_t nm;
    mapstore_setting *settings;
    size_t ns;
} mirror;

static void mirror_free(mirror *m) {
    free(m->nodes);
    free(m->parts);
    free(m->chunk_seen);
    free(m->moves);
    free(m->settings);
    memset(m, 0, sizeof *m);
}

/* One kv of the prefix into the mirror being built. */
static int load_kv(const char *prefix, const char *key, const char *val, int64_t mod_rev, mirror *m,
                   char *err, size_t cap) {
    const char *rest = key + strlen(prefix);
    int rc = 0;
    if (!strcmp(rest, "meta")) {
        rc = meta_parse(val, &m->meta);
        if (rc == KEEL_EWRONGTYPE)
            return keel_errf(err, cap, rc, "%s is not a Keel map (no kind keel-map)", key);
        if (rc == KEEL_ERANGE)
            return keel_errf(err, cap, rc, "%s: map format this build does not know", key);
        m->have_meta = 1;
        m->meta_rev = mod_rev;
        return rc ? keel_errf(err, cap, rc, "%s: malformed", key) : 0;
    }
    if (strncmp(rest, "node/", 5) && strncmp(rest, "move/", 5) && strncmp(rest, "set/", 4) &&
        strncmp(rest, "parts/", 6))
        return 0; /* not the map's (a future leader key, say) */
    cJSON *o = cJSON_Parse(val);
    if (!o) return keel_errf(err, cap, KEEL_ECORRUPT, "%s: not JSON", key);
    if (!strncmp(rest, "node/", 5)) {
        mapstore_node n;
        if (!(rc = node_parse(o, &n)) && strcmp(n.id, rest + 5)) rc = KEEL_ECORRUPT;
        if (!rc) rc = push((void **)&m->nodes, &m->nn, sizeof n, &n);
    } else if (!strncmp(rest, "move/", 5)) {
        mapstore_move mv;
        char want[32];
        rc = move_parse(o, &mv);
        snprintf(want, sizeof want, "%020llu", (unsigned long long)mv.id);
        if (!rc && strcmp(want, rest + 5)) rc = KEEL_ECORRUPT;
        if (!rc) rc = push((void **)&m->moves, &m->nm, sizeof mv, &mv);
    } else if (!strncmp(rest, "set/", 4)) {
        mapstore_setting s;
        if (!(rc = setting_parse(o, &s)) && strcmp(s.name, rest + 4)) rc = KEEL_ECORRUPT;
        if (!rc) rc = push((void **)&m->settings, &m->ns, sizeof s, &s);
    } else if (!strncmp(rest, "parts/", 6)) {
        /* parsed after meta (which gives P): keys sort "meta" < "parts/" */
        char *end;
        unsigned long k = strtoul(rest + 6, &end, 10);
        if (!m->have_meta || *end || k >= chunk_count(m->meta.partitions) || m->chunk_seen[k]++)
            rc = KEEL_ECORRUPT;
        else
            rc = chunk_parse(o, m->parts, m->meta.partitions, (unsigned)k);
    }
    cJSON_Delete(o);
    if (rc == KEEL_ENOMEM) return keel_errf(err, cap, rc, "out of memory");
    return rc ? keel_errf(err, cap, rc, "%s: malformed", key) : 0;
}

/* Reads everything under the prefix into *m. */
static int load_mirror(me *e, mirror *m, char *err, size_t cap) {
    memset(m, 0, sizeof *m);
    char *end = etcd_prefix_end(e->prefix);
    cJSON *r = NULL;
    int rc = end ? range(e, e->prefix, end, 0, &r) : KEEL_ENOMEM;
    free(end);
    if (rc) {
        cJSON_Delete(r);
        return keel_errf(err, cap, rc, "etcd: reading %s: %s", e->prefix,
                         rc == KEEL_ENOMEM ? "out of memory" : etcd_client_errmsg(e->c));
    }
    e->st.reloads++;
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(r, "kvs"), *kv;
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "more"))) {
        cJSON_Delete(r);
        return keel_errf(err, cap, KEEL_ELIMIT, "etcd: %s: range answer truncated", e->prefix);
    }
    cJSON_ArrayForEach(kv, kvs) {
        char *k = kv_text(kv, "key"), *v = kv_text(kv, "value");
        if (!k || !v || strncmp(k, e->prefix, strlen(e->prefix)))
            rc = keel_errf(err, cap, KEEL_EPROTO, "etcd: a key outside the prefix or not base64");
        if (!rc && !strcmp(k + strlen(e->prefix), "meta")) {
            rc = load_kv(e->prefix, k, v, etcd_json_i64(kv, "mod_revision"), m, err, cap);
            if (!rc && !(m->parts = calloc(m->meta.partitions, sizeof *m->parts))) rc = KEEL_ENOMEM;
            if (!rc && !(m->chunk_seen = calloc(chunk_count(m->meta.partitions), 1)))
                rc = KEEL_ENOMEM;
        } else if (!rc) {
            rc = load_kv(e->prefix, k, v, 0, m, err, cap);
        }
        free(k);
        free(v);
        if (rc) break;
    }
    cJSON_Delete(r);
    if (!rc && !m->have_meta)
        rc = keel_errf(err, cap, KEEL_ENOTFOUND, "no Keel map under etcd prefix %s", e->prefix);
    for (unsigned k = 0; !rc && k < chunk_count(m->meta.partitions); k++)
        if (!m->chunk_seen[k])
            rc = keel_errf(err, cap, KEEL_ECORRUPT, "%sparts/%03u missing", e->prefix, k);
    if (rc) {
        mirror_free(m);
        return rc;
    }
    if (m->nn) qsort(m->nodes, m->nn, sizeof *m->nodes, cmp_node); /* qsort(NULL, 0): UB */
    if (m->nm) qsort(m->moves, m->nm, sizeof *m->moves, cmp_move);
    if (m->ns) qsort(m->settings, m->ns, sizeof *m->settings, cmp_setting);
    return 0;
}

/* Replaces the handle's mirror with m (taken over). */
static void adopt(me *e, mirror *m) {
    free(e->nodes);
    free(e->parts);
    free(e->moves);
    free(e->settings);
    free(m->chunk_seen);
    e->meta = m->meta;
    e->meta_rev = m->meta_rev;
    e->nodes = m->nodes, e->nn = m->nn;
    e->parts = m->parts;
    e->moves = m->moves, e->nm = m->nm;
    e->settings = m->settings, e->ns = m->ns;
    e->stale = 0;
    memset(m, 0, sizeof *m);
}

/* Reloads the mirror if it may be stale. */
static int fresh(mapstore *ms, me *e) {
    if (!e->stale) return 0;
    char err[MAPSTORE_ERR_MAX];
    mirror m;
    int rc = load_mirror(e, &m, err, sizeof err);
    if (rc) return mapstore__errf(ms, rc, "%s", err);
    if (strcmp(m.meta.cluster_id, mapstore_cluster_id(ms)) ||
        m.meta.partitions != mapstore_partitions(ms)) {
        mirror_free(&m);
        return mapstore__errf(ms, KEEL_ECORRUPT, "etcd prefix %s now holds another map", e->prefix);
    }
    adopt(e, &m);
    return 0;
}

static mapstore_node *find_node(me *e, const char *id) {
    mapstore_node key;
    snprintf(key.id, sizeof key.id, "%s", id);
    return e->nn ? bsearch(&key, e->nodes, e->nn, sizeof key, cmp_node) : NULL;
}
static mapstore_move *find_move(me *e, uint64_t id) {
    mapstore_move key;
    key.id = id;
    return e->nm ? bsearch(&key, e->moves, e->nm, sizeof key, cmp_move) : NULL;
}
static mapstore_setting *find_setting(me *e, const char *name) {
    mapstore_setting key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return e->ns ? bsearch(&key, e->settings, e->ns, sizeof key, cmp_setting) : NULL;
}

/* Puts item into the sorted array (replacing an equal one). */
static int upsert_sorted(void **arr, size_t *n, size_t sz, const void *item,
                         int (*cmp)(const void *, const void *)) {
    char *a = *arr;
    size_t at = 0;
    while (at < *n && cmp(a + at * sz, item) < 0)
        at++;
    if (at < *n && cmp(a + at * sz, item) == 0) {
        memcpy(a + at * sz, item, sz);
        return 0;
    }
    if (!(a = realloc(*arr, (*n + 1) * sz))) return KEEL_ENOMEM;
    memmove(a + (at + 1) * sz, a + at * sz, (*n - at) * sz);
    memcpy(a + at * sz, item, sz);
    *arr = a;
    (*n)++;
    return 0;
}

/* After a successful write, a failed mirror update only means: reload. */
static void mirror_put(me *e, void **arr, size_t *n, size_t sz, const void *item,
                       int (*cmp)(const void *, const void *)) {
    if (upsert_sorted(arr, n, sz, item, cmp)) e->stale = 1;
}

/* ---- Transactions ------------------------------------------------------------------ */

typedef struct me_tx {
    cJSON *body, *ok;
    int ops;
    size_t bytes;
    int oom;
} me_tx;

/* A txn guarded by meta's mod revision == rev; on failure it reads meta. */
static void tx_begin(me *e, me_tx *t, int64_t rev) {
    char k[KEY_MAX];
    memset(t, 0, sizeof *t);
    key_meta(e, k, sizeof k);
    t->body = cJSON_CreateObject();
    cJSON *cmp = t->body ? cJSON_AddArrayToObject(t->body, "compare") : NULL;
    t->ok = t->body ? cJSON_AddArrayToObject(t->body, "success") : NULL;
    cJSON *fail = t->body ? cJSON_AddArrayToObject(t->body, "failure") : NULL;
    if (!cmp || !t->ok || !fail || !etcd_cmp(cmp, k, "MOD", "EQUAL", rev) || !etcd_op_get(fail, k))
        t->oom = 1;
    if (e->guard_rev) { /* responses[1] of the failure branch: the leader key */
        snprintf(k, sizeof k, "%sleader", e->prefix);
        if (!etcd_cmp(cmp, k, "CREATE", "EQUAL", e->guard_rev) || !etcd_op_get(fail, k)) t->oom = 1;
    }
}

/* After a refused txn of a guarded handle: 1 if the leader key is not ours
 * any more (absent, or created at another revision). */
static int guard_lost(const me *e, const cJSON *reply) {
    if (!e->guard_rev) return 0;
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(reply, "responses"), 1),
            "response_range"),
        "kvs");
    const cJSON *kv = cJSON_GetArrayItem(kvs, 0);
    return !kv || etcd_json_i64(kv, "create_revision") != e->guard_rev;
}

static void tx_put(me_tx *t, const char *key, char *value /* taken */) {
    if (!value || !t->ok || !etcd_op_put(t->ok, key, value, 0)) t->oom = 1;
    t->ops++;
    t->bytes += strlen(key) + (value ? strlen(value) : 0) + 16;
    free(value);
}

static void tx_del(me_tx *t, const char *key) {
    if (!t->ok || !etcd_op_del(t->ok, key)) t->oom = 1;
    t->ops++;
    t->bytes += strlen(key) + 16;
}

/* Sends t; 0 with *applied (1: the guard held) and the answer's header
 * revision in *rev and its failure-branch meta in *seen (if any). */
static int tx_send(me *e, me_tx *t, int fault, int *applied, int64_t *rev, me_meta *seen,
                   int *have_seen, int64_t *seen_rev) {
    char *txt = cJSON_PrintUnformatted(t->body);
    cJSON *r = NULL;
    *have_seen = 0;
    e->not_leader = 0;
    if (!txt) return KEEL_ENOMEM;
    int rc = etcd_post_ex(e->c, "/v3/kv/txn", txt, fault, &r);
    free(txt);
    if (rc) {
        cJSON_Delete(r);
        return rc;
    }
    *applied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
    *rev = etcd_revision(r);
    if (!*applied) {
        const cJSON *rr = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "responses"), 0),
            "response_range");
        *have_seen = rr && meta_from_range(rr, seen, seen_rev) == 0;
        e->not_leader = guard_lost(e, r);
    }
    cJSON_Delete(r);
    return *rev > 0 ? 0 : KEEL_EPROTO;
}

static int conflict(mapstore *ms, me *e) {
    e->stale = 1;
    e->st.conflicts++;
    if (e->not_leader)
        return mapstore__errf(ms, KEEL_ENOTLEADER,
                              "etcd: %sleader is no longer this coordinator's (created at "
                              "revision %lld): not the leader, nothing written",
                              e->prefix, (long long)e->guard_rev);
    return mapstore__errf(ms, KEEL_EAGAIN,
                          "etcd: the map under %s was changed by another writer (another "
                          "coordinator?); reloaded, nothing written",
                          e->prefix);
}

/* The answer to a commit of nm, guarded by old_rev, was lost. A fence (a
 * txn under the same guard that only rewrites meta, with a later write id)
 * settles it: if the fence applies, the commit never can; if the fence is
 * refused because meta carries the commit's write id, the commit applied. */
static int tx_settle(mapstore *ms, me *e, const me_meta *nm, int64_t old_rev, const char *why,
                     int *voided) {
    char k[KEY_MAX];
    me_tx t;
    me_meta fence = e->meta, seen;
    fence.write_id = nm->write_id + 1;
    key_meta(e, k, sizeof k);
    tx_begin(e, &t, old_rev);
    tx_put(&t, k, meta_text(&fence));
    int applied = 0, have_seen = 0;
    int64_t rev = 0, seen_rev = 0;
    int fault = FAILPOINT("mapstore.etcd.fence.drop") == FP_ERROR ? ETCD_FAULT_DROP : 0;
    int rc =
        t.oom ? KEEL_ENOMEM : tx_send(e, &t, fault, &applied, &rev, &seen, &have_seen, &seen_rev);
    cJSON_Delete(t.body);
    if (rc == 0 && applied) {
        e->meta = fence;
        e->meta_rev = rev;
        e->st.settled_void++;
        *voided = 1;
        return mapstore__errf(ms, KEEL_EIO,
                              "etcd: commit got no answer (%s); fenced off, nothing changed", why);
    }
    if (rc == 0 && !applied && e->not_leader && !(have_seen && seen.write_id == nm->write_id)) {
        e->stale = 1;
        e->st.unknown++;
        return mapstore__errf(ms, KEEL_ENOTLEADER,
                              "etcd: commit got no answer (%s) and this coordinator is no longer "
                              "the leader",
                              why);
    }
    if (rc == 0 && have_seen && seen.write_id == nm->write_id) {
        e->meta = *nm;
        e->meta_rev = seen_rev;
        e->st.settled_applied++;
        e->st.commits++;
        return 0;
    }
    e->stale = 1;
    e->st.unknown++;
    return mapstore__errf(ms, KEEL_EUNKNOWN,
                          "etcd: commit got no answer (%s) and its outcome could not be settled "
                          "(%s)",
                          why, rc ? etcd_client_errmsg(e->c) : "meta changed by another writer");
}

/* The test fault for the next send (failpoints, mapstore_etcd.h). */
static int test_fault(const me *e) {
    if (FAILPOINT("mapstore.etcd.drop") == FP_ERROR ||
        (e->is_move_commit && FAILPOINT("mapstore.etcd.move_commit.drop") == FP_ERROR))
        return ETCD_FAULT_DROP;
    if (FAILPOINT("mapstore.etcd.lose_reply") == FP_ERROR ||
        (e->is_move_commit && FAILPOINT("mapstore.etcd.move_commit.lose_reply") == FP_ERROR))
        return ETCD_FAULT_LOSE_REPLY;
    return ETCD_FAULT_NONE;
}

/* Points t, refused by a fence, at the fence's revision and a write id
 * after it: compare[0] and the last success op (meta) are replaced. */
static int tx_rearm(me *e, me_tx *t, me_meta *cur) {
    char k[KEY_MAX], num[24];
    cur->write_id = e->meta.write_id + 1;
    key_meta(e, k, sizeof k);
    snprintf(num, sizeof num, "%lld", (long long)e->meta_rev);
    cJSON *cmp0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t->body, "compare"), 0);
    cJSON *rv = cJSON_CreateString(num);
    char *text = meta_text(cur);
    int ok = cmp0 && rv && text && cJSON_ReplaceItemInObjectCaseSensitive(cmp0, "mod_revision", rv);
    if (!ok) cJSON_Delete(rv);
    if (ok) cJSON_DeleteItemFromArray(t->ok, cJSON_GetArraySize(t->ok) - 1);
    ok = ok && etcd_op_put(t->ok, k, text, 0);
    free(text);
    e->st.retries += ok;
    return ok ? 0 : KEEL_ENOMEM;
}

/* Commits t with meta nm (a copy of e->meta with write_id + 1 and whatever
 * the write changes): 0 (applied; e->meta = nm; the caller then updates
 * the mirror), or an error after which nothing changed, except
 * KEEL_EUNKNOWN (see mapstore_etcd.h). Frees t. */
static int tx_commit(mapstore *ms, me *e, me_tx *t, const me_meta *nm) {
    char k[KEY_MAX];
    key_meta(e, k, sizeof k);
    tx_put(t, k, meta_text(nm));
    int rc = 0, fault = ETCD_FAULT_NONE;
    if (t->oom)
        rc = mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    else if (t->ops > MAPSTORE_ETCD_MAX_OPS || t->bytes > MAPSTORE_ETCD_MAX_BYTES - 4096)
        rc = mapstore__errf(ms, KEEL_ELIMIT,
                            "etcd: this write needs %d operations and %zu bytes, over etcd's "
                            "limits (%d, %d)",
                            t->ops, t->bytes, MAPSTORE_ETCD_MAX_OPS, MAPSTORE_ETCD_MAX_BYTES);
    else if (FAILPOINT("mapstore.commit") == FP_ERROR)
        rc = mapstore__errf(ms, KEEL_EIO, "commit: failpoint mapstore.commit");
    if (rc) {
        cJSON_Delete(t->body);
        return rc;
    }
    int applied = 0, have_seen = 0;
    int64_t rev = 0, seen_rev = 0;
    me_meta seen, cur = *nm;
    for (int attempt = 0;; attempt++) {
        int64_t old_rev = e->meta_rev;
        fault = test_fault(e);
        rc = tx_send(e, t, fault, &applied, &rev, &seen, &have_seen, &seen_rev);
        if (rc == KEEL_EUNKNOWN || rc == KEEL_EPROTO) {
            char why[ETCD_ERR_MAX];
            int voided = 0;
            snprintf(why, sizeof why, "%s", etcd_client_errmsg(e->c));
            rc = tx_settle(ms, e, &cur, old_rev, why, &voided);
            /* Fenced off: nothing changed and the lost copy never can, so the
             * same write is sent once more on the fence's revision (an etcd
             * member lost, a raft election under way). */
            if (voided && attempt < ME_RETRIES && tx_rearm(e, t, &cur) == 0) continue;
            break;
        }
        if (rc) {
            rc = mapstore__errf(ms, rc, "etcd: %s", etcd_client_errmsg(e->c));
        } else if (!applied) {
            rc = conflict(ms, e);
        } else {
            e->meta = cur;
            e->meta_rev = rev;
            e->st.commits++;
        }
        break;
    }
    cJSON_Delete(t->body);
    t->body = NULL;
    return rc;
}

/* meta for the next write: write_id + 1. */
static me_meta next_meta(const me *e) {
    me_meta m = e->meta;
    m.write_id++;
    return m;
}

static int bump_version(mapstore *ms, me_meta *m) {
    if (m->version >= ME_U63) return mapstore__errf(ms, KEEL_ERANGE, "map version would overflow");
    m->version++;
    return 0;
}

/* ---- Backend: term, nodes ------------------------------------------------------------ */

static uint64_t me_term(void *impl) {
    return ((me *)impl)->meta.term;
}

static uint64_t me_version(void *impl) {
    return ((me *)impl)->meta.version;
}

#define ME_BEGIN(ms, e, t)                                                                         \
    me *e = mapstore__impl(ms);                                                                    \
    int rc = fresh(ms, e);                                                                         \
    if (rc) return rc;                                                                             \
    me_tx t;                                                                                       \
    char key[KEY_MAX];                                                                             \
    (void)t, (void)key

static int me_bump_term(mapstore *ms, uint64_t *term) {
    ME_BEGIN(ms, e, t);
    me_meta nm = next_meta(e);
    if (nm.term >= ME_U63) return mapstore__errf(ms, KEEL_ERANGE, "term would overflow");
    nm.term++;
    tx_begin(e, &t, e->meta_rev);
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    if (term) *term = nm.term;
    return 0;
}

static int me_node_upsert(mapstore *ms, const mapstore_node *n, int64_t now_ms) {
    ME_BEGIN(ms, e, t);
    const mapstore_node *old = find_node(e, n->id);
    if (old && old->membership == MAPSTORE_MEMBER_REMOVED &&
        n->membership != MAPSTORE_MEMBER_REMOVED)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s was removed", n->id);
    mapstore_node c = *n;
    c.registered_at_ms = old ? old->registered_at_ms : now_ms;
    c.last_heartbeat_ms = now_ms;
    me_meta nm = next_meta(e);
    if ((!old || strcmp(old->host, n->host) || old->port != n->port ||
         old->liveness != n->liveness || old->membership != n->membership) &&
        (rc = bump_version(ms, &nm)))
        return rc;
    tx_begin(e, &t, e->meta_rev);
    key_node(e, n->id, key, sizeof key);
    tx_put(&t, key, node_text(&c));
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    mirror_put(e, (void **)&e->nodes, &e->nn, sizeof c, &c, cmp_node);
    return 0;
}

static int no_node(mapstore *ms, const char *id) {
    return mapstore__errf(ms, KEEL_ENOTFOUND, "no node %s", id);
}

static int me_node_get(mapstore *ms, const char *id, mapstore_node *out) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    const mapstore_node *n = find_node(e, id);
    if (!n) return no_node(ms, id);
    *out = *n;
    return 0;
}

/* A malloc'd copy of n items (NULL when n is 0). */
static int copy_arr(mapstore *ms, const void *src, size_t n, size_t sz, void **out) {
    *out = NULL;
    if (!n) return 0;
    if (!(*out = malloc(n * sz))) return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
    memcpy(*out, src, n * sz);
    return 0;
}

static int me_node_list(mapstore *ms, mapstore_node **out, size_t *n) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    *n = e->nn;
    return copy_arr(ms, e->nodes, e->nn, sizeof **out, (void **)out);
}

/* Writes node c (a changed copy of a stored node) with meta nm. */
static int put_node(mapstore *ms, me *e, const mapstore_node *c, const me_meta *nm) {
    me_tx t;
    char key[KEY_MAX];
    tx_begin(e, &t, e->meta_rev);
    key_node(e, c->id, key, sizeof key);
    tx_put(&t, key, node_text(c));
    int rc = tx_commit(ms, e, &t, nm);
    if (!rc) *find_node(e, c->id) = *c;
    return rc;
}

static int me_node_set_liveness(mapstore *ms, const char *id, mapstore_liveness l) {
    ME_BEGIN(ms, e, t);
    const mapstore_node *old = find_node(e, id);
    if (!old) return no_node(ms, id);
    if (old->liveness == l) return 0;
    mapstore_node c = *old;
    c.liveness = l;
    me_meta nm = next_meta(e);
    if ((rc = bump_version(ms, &nm))) return rc;
    return put_node(ms, e, &c, &nm);
}

static int me_node_set_membership(mapstore *ms, const char *id, mapstore_membership m) {
    ME_BEGIN(ms, e, t);
    const mapstore_node *old = find_node(e, id);
    if (!old) return no_node(ms, id);
    if (old->membership == m) return 0;
    if (old->membership == MAPSTORE_MEMBER_REMOVED)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s was removed", id);
    mapstore_node c = *old;
    c.membership = m;
    me_meta nm = next_meta(e);
    if ((rc = bump_version(ms, &nm))) return rc;
    return put_node(ms, e, &c, &nm);
}

static int me_node_heartbeat(mapstore *ms, const char *id, int64_t now_ms) {
    ME_BEGIN(ms, e, t);
    const mapstore_node *old = find_node(e, id);
    if (!old) return no_node(ms, id);
    mapstore_node c = *old;
    c.last_heartbeat_ms = now_ms;
    me_meta nm = next_meta(e);
    return put_node(ms, e, &c, &nm);
}

/* ---- Backend: partitions ---------------------------------------------------------- */

static int me_partition_get(mapstore *ms, unsigned p, mapstore_partition *out) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    *out = e->parts[p];
    return 0;
}

static int me_partition_list(mapstore *ms, mapstore_partition **out, size_t *n) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    *n = e->meta.partitions;
    return copy_arr(ms, e->parts, e->meta.partitions, sizeof **out, (void **)out);
}

/* Adds a put of partition np's chunk, as if partition np.id were np, to t. */
static void tx_put_partition(me *e, me_tx *t, const mapstore_partition *np) {
    char key[KEY_MAX];
    mapstore_partition keep = e->parts[np->id];
    e->parts[np->id] = *np;
    key_chunk(e, np->id / MAPSTORE_ETCD_CHUNK, key, sizeof key);
    tx_put(t, key, chunk_text(e->parts, e->meta.partitions, np->id / MAPSTORE_ETCD_CHUNK));
    e->parts[np->id] = keep;
}

static int me_partition_set_owner(mapstore *ms, unsigned p, const char *owner, uint64_t *epoch,
                                  uint64_t *version) {
    ME_BEGIN(ms, e, t);
    if (owner && !find_node(e, owner)) return no_node(ms, owner);
    mapstore_partition np = e->parts[p];
    if (strcmp(np.owner, owner ? owner : "") == 0)
        return mapstore__errf(ms, KEEL_EEXIST, "partition %u: owner is already %s", p,
                              owner ? owner : "none");
    if ((rc = mapstore__part_can_bump(ms, &np))) return rc;
    me_meta nm = next_meta(e);
    if ((rc = bump_version(ms, &nm))) return rc;
    mapstore__owner_change(&np, owner);
    tx_begin(e, &t, e->meta_rev);
    tx_put_partition(e, &t, &np);
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    e->parts[p] = np;
    if (epoch) *epoch = np.epoch;
    if (version) *version = nm.version;
    return 0;
}

static int me_partition_place(mapstore *ms, const mapstore_placement *pl, size_t n,
                              uint64_t *version) {
    ME_BEGIN(ms, e, t);
    unsigned P = e->meta.partitions, nc = chunk_count(P);
    mapstore_partition *np = malloc(P * sizeof *np);
    unsigned char *touched = calloc(nc, 1);
    me_meta nm = next_meta(e);
    if (!np || !touched) {
        rc = mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(np, e->parts, P * sizeof *np);
    for (size_t i = 0; i < n && !rc; i++) {
        mapstore_partition *x = &np[pl[i].partition];
        for (unsigned f = 0; f < pl[i].nfollowers && !rc; f++)
            if (!find_node(e, pl[i].followers[f])) rc = no_node(ms, pl[i].followers[f]);
        if (rc) break;
        if (!find_node(e, pl[i].owner))
            rc = no_node(ms, pl[i].owner);
        else if (x->owner[0])
            rc = mapstore__errf(ms, KEEL_EEXIST, "partition %u is already owned", x->id);
        else
            rc = mapstore__part_can_bump(ms, x);
        if (rc) break;
        mapstore__place(x, &pl[i]);
        touched[x->id / MAPSTORE_ETCD_CHUNK] = 1;
    }
    if (rc || (rc = bump_version(ms, &nm))) goto out;
    tx_begin(e, &t, e->meta_rev);
    for (unsigned k = 0; k < nc; k++) {
        if (!touched[k]) continue;
        key_chunk(e, k, key, sizeof key);
        tx_put(&t, key, chunk_text(np, P, k));
    }
    if ((rc = tx_commit(ms, e, &t, &nm))) goto out;
    free(e->parts);
    e->parts = np;
    np = NULL;
    if (version) *version = nm.version;
out:
    free(np);
    free(touched);
    return rc;
}

static int me_partition_set_pinned(mapstore *ms, unsigned p, int pinned) {
    ME_BEGIN(ms, e, t);
    if (e->parts[p].pinned == pinned) return 0;
    mapstore_partition np = e->parts[p];
    np.pinned = pinned;
    me_meta nm = next_meta(e);
    tx_begin(e, &t, e->meta_rev);
    tx_put_partition(e, &t, &np);
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    e->parts[p] = np;
    return 0;
}

/* A compare-and-set of partition p's ISR (replicas 0) or replica list,
 * guarded like every write by meta's revision. */
static int partition_cas(mapstore *ms, unsigned p, uint64_t expected_pe, const char *const *ids,
                         size_t n, int replicas, mapstore_partition *out) {
    ME_BEGIN(ms, e, t);
    for (size_t i = 0; replicas == 1 && i < n; i++)
        if (!find_node(e, ids[i])) return no_node(ms, ids[i]);
    mapstore_partition np = e->parts[p];
    /* replicas: 0 the ISR, 1 the list, 2 the leader ids[0] (n: old_in_isr) */
    rc = replicas == 2 ? mapstore__set_leader(ms, &np, expected_pe, ids[0], (int)n)
         : replicas    ? mapstore__set_replicas(ms, &np, expected_pe, ids, n)
                       : mapstore__set_isr(ms, &np, expected_pe, ids, n);
    if (rc) return rc;
    me_meta nm = next_meta(e);
    if ((rc = bump_version(ms, &nm))) return rc;
    tx_begin(e, &t, e->meta_rev);
    tx_put_partition(e, &t, &np);
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    e->parts[p] = np;
    *out = np;
    return 0;
}

static int me_partition_set_isr(mapstore *ms, unsigned p, uint64_t expected_pe,
                                const char *const *isr, size_t n, mapstore_partition *out) {
    return partition_cas(ms, p, expected_pe, isr, n, 0, out);
}

static int me_partition_set_replicas(mapstore *ms, unsigned p, uint64_t expected_pe,
                                     const char *const *replicas, size_t n,
                                     mapstore_partition *out) {
    return partition_cas(ms, p, expected_pe, replicas, n, 1, out);
}

static int me_partition_set_leader(mapstore *ms, unsigned p, uint64_t expected_pe,
                                   const char *leader, int old_in_isr, mapstore_partition *out) {
    return partition_cas(ms, p, expected_pe, &leader, (size_t)(old_in_isr != 0), 2, out);
}

static int me_bump_version(mapstore *ms, uint64_t *version) {
    ME_BEGIN(ms, e, t);
    me_meta nm = next_meta(e);
    if ((rc = bump_version(ms, &nm))) return rc;
    tx_begin(e, &t, e->meta_rev);
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    if (version) *version = nm.version;
    return 0;
}

/* ---- Backend: moves ------------------------------------------------------------------ */

static int no_move(mapstore *ms, uint64_t id) {
    return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)id);
}

static int in_flight(mapstore_move_state s) {
    return s <= MAPSTORE_MOVE_FENCED;
}

static int me_move_create(mapstore *ms, unsigned p, const char *to, const char *reason,
                          int64_t now_ms, uint64_t *id) {
    ME_BEGIN(ms, e, t);
    const mapstore_partition *part = &e->parts[p];
    if (!find_node(e, to)) return no_node(ms, to);
    if (!part->owner[0]) return mapstore__errf(ms, KEEL_EINVAL, "partition %u has no owner", p);
    if (strcmp(part->owner, to) == 0)
        return mapstore__errf(ms, KEEL_EINVAL, "partition %u is already on %s", p, to);
    for (size_t i = 0; i < e->nm; i++)
        if (e->moves[i].partition == p && in_flight(e->moves[i].state))
            return mapstore__errf(ms, KEEL_EEXIST, "partition %u already has move %llu in flight",
                                  p, (unsigned long long)e->moves[i].id);
    me_meta nm = next_meta(e);
    if (nm.next_move >= ME_U63) return mapstore__errf(ms, KEEL_ERANGE, "move ids exhausted");
    mapstore_move m;
    memset(&m, 0, sizeof m);
    m.id = nm.next_move++;
    m.partition = p;
    snprintf(m.from, sizeof m.from, "%s", part->owner);
    snprintf(m.to, sizeof m.to, "%s", to);
    m.state = MAPSTORE_MOVE_PLANNED;
    m.epoch = part->epoch;
    m.at_ms[MAPSTORE_MOVE_PLANNED] = now_ms;
    snprintf(m.reason, sizeof m.reason, "%s", reason);
    tx_begin(e, &t, e->meta_rev);
    key_move(e, m.id, key, sizeof key);
    tx_put(&t, key, move_text(&m));
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    mirror_put(e, (void **)&e->moves, &e->nm, sizeof m, &m, cmp_move);
    if (id) *id = m.id;
    return 0;
}

static int me_move_get(mapstore *ms, uint64_t id, mapstore_move *out) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    const mapstore_move *m = find_move(e, id);
    if (!m) return no_move(ms, id);
    *out = *m;
    return 0;
}

static int me_move_list(mapstore *ms, int unfinished, mapstore_move **out, size_t *n) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    if (!unfinished) {
        *n = e->nm;
        return copy_arr(ms, e->moves, e->nm, sizeof **out, (void **)out);
    }
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < e->nm; i++) {
        if (e->moves[i].state == MAPSTORE_MOVE_DONE || e->moves[i].state == MAPSTORE_MOVE_ABORTED)
            continue;
        if (push((void **)out, n, sizeof **out, &e->moves[i])) {
            free(*out);
            *out = NULL;
            *n = 0;
            return mapstore__errf(ms, KEEL_ENOMEM, "out of memory");
        }
    }
    return 0;
}

/* Writes move c (a changed copy of a stored move), and optionally a
 * partition, with meta nm. */
static int put_move(mapstore *ms, me *e, const mapstore_move *c, const mapstore_partition *np,
                    const me_meta *nm) {
    me_tx t;
    char key[KEY_MAX];
    tx_begin(e, &t, e->meta_rev);
    key_move(e, c->id, key, sizeof key);
    tx_put(&t, key, move_text(c));
    if (np) tx_put_partition(e, &t, np);
    int rc = tx_commit(ms, e, &t, nm);
    if (rc) return rc;
    *find_move(e, c->id) = *c;
    if (np) e->parts[np->id] = *np;
    return 0;
}

static int me_move_advance(mapstore *ms, uint64_t id, mapstore_move_state state, int64_t now_ms,
                           const char *abort_reason) {
    ME_BEGIN(ms, e, t);
    const mapstore_move *old = find_move(e, id);
    if (!old) return no_move(ms, id);
    if (!mapstore_move_can_advance(old->state, state))
        return mapstore__errf(ms, KEEL_EINVAL, "move %llu: %s -> %s is not a legal transition",
                              (unsigned long long)id, mapstore_move_state_name(old->state),
                              mapstore_move_state_name(state));
    mapstore_move c = *old;
    c.state = state;
    c.at_ms[state] = now_ms;
    if (state == MAPSTORE_MOVE_ABORTED)
        snprintf(c.abort_reason, sizeof c.abort_reason, "%s", abort_reason ? abort_reason : "");
    me_meta nm = next_meta(e);
    return put_move(ms, e, &c, NULL, &nm);
}

static int me_move_set_bytes(mapstore *ms, uint64_t id, uint64_t bytes) {
    ME_BEGIN(ms, e, t);
    const mapstore_move *old = find_move(e, id);
    if (!old) return no_move(ms, id);
    mapstore_move c = *old;
    c.bytes = bytes;
    me_meta nm = next_meta(e);
    return put_move(ms, e, &c, NULL, &nm);
}

static int me_move_commit(mapstore *ms, uint64_t id, int64_t now_ms, uint64_t *epoch,
                          uint64_t *version) {
    ME_BEGIN(ms, e, t);
    const mapstore_move *old = find_move(e, id);
    if (!old) return no_move(ms, id);
    if (old->state != MAPSTORE_MOVE_FENCED)
        return mapstore__errf(ms, KEEL_EINVAL, "move %llu is %s, not FENCED",
                              (unsigned long long)id, mapstore_move_state_name(old->state));
    mapstore_partition np = e->parts[old->partition];
    if (strcmp(np.owner, old->from) || np.epoch != old->epoch)
        return mapstore__errf(
            ms, KEEL_EINVAL, "move %llu: partition %u is now %s at epoch %llu, not %s at %llu",
            (unsigned long long)id, old->partition, np.owner, (unsigned long long)np.epoch,
            old->from, (unsigned long long)old->epoch);
    if ((rc = mapstore__part_can_bump(ms, &np))) return rc;
    me_meta nm = next_meta(e);
    if ((rc = bump_version(ms, &nm))) return rc;
    mapstore_move c = *old;
    c.state = MAPSTORE_MOVE_COMMITTED;
    c.at_ms[MAPSTORE_MOVE_COMMITTED] = now_ms;
    mapstore__owner_change(&np, c.to);
    e->is_move_commit = 1;
    rc = put_move(ms, e, &c, &np, &nm);
    e->is_move_commit = 0;
    if (rc) return rc;
    if (epoch) *epoch = np.epoch;
    if (version) *version = nm.version;
    return 0;
}

/* ---- Backend: settings ------------------------------------------------------------- */

static int me_setting_set(mapstore *ms, const char *name, const char *value, int64_t now_ms) {
    ME_BEGIN(ms, e, t);
    mapstore_setting s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", name);
    snprintf(s.value, sizeof s.value, "%s", value);
    s.set_at_ms = now_ms;
    me_meta nm = next_meta(e);
    tx_begin(e, &t, e->meta_rev);
    key_setting(e, name, key, sizeof key);
    tx_put(&t, key, setting_text(&s));
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    mirror_put(e, (void **)&e->settings, &e->ns, sizeof s, &s, cmp_setting);
    return 0;
}

static int me_setting_get(mapstore *ms, const char *name, mapstore_setting *out) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    const mapstore_setting *s = find_setting(e, name);
    if (!s) return mapstore__errf(ms, KEEL_ENOTFOUND, "no setting %s", name);
    *out = *s;
    return 0;
}

static int me_setting_unset(mapstore *ms, const char *name) {
    ME_BEGIN(ms, e, t);
    mapstore_setting *s = find_setting(e, name);
    if (!s) return mapstore__errf(ms, KEEL_ENOTFOUND, "no setting %s", name);
    me_meta nm = next_meta(e);
    tx_begin(e, &t, e->meta_rev);
    key_setting(e, name, key, sizeof key);
    tx_del(&t, key);
    if ((rc = tx_commit(ms, e, &t, &nm))) return rc;
    s = find_setting(e, name);
    size_t at = (size_t)(s - e->settings);
    memmove(s, s + 1, (e->ns - at - 1) * sizeof *s);
    e->ns--;
    return 0;
}

static int me_setting_list(mapstore *ms, mapstore_setting **out, size_t *n) {
    me *e = mapstore__impl(ms);
    int rc = fresh(ms, e);
    if (rc) return rc;
    *n = e->ns;
    return copy_arr(ms, e->settings, e->ns, sizeof **out, (void **)out);
}

/* ---- Open, create, close ----------------------------------------------------------- */

static void me_close(void *impl) {
    me *e = impl;
    if (!e) return;
    etcd_client_free(e->c);
    free(e->nodes);
    free(e->parts);
    free(e->moves);
    free(e->settings);
    free(e);
}

static const mapstore_ops etcd_ops = {
    .close = me_close,
    .term = me_term,
    .version = me_version,
    .bump_term = me_bump_term,
    .node_upsert = me_node_upsert,
    .node_get = me_node_get,
    .node_list = me_node_list,
    .node_set_liveness = me_node_set_liveness,
    .node_set_membership = me_node_set_membership,
    .node_heartbeat = me_node_heartbeat,
    .partition_get = me_partition_get,
    .partition_list = me_partition_list,
    .partition_set_owner = me_partition_set_owner,
    .partition_place = me_partition_place,
    .partition_set_pinned = me_partition_set_pinned,
    .partition_set_isr = me_partition_set_isr,
    .partition_set_replicas = me_partition_set_replicas,
    .partition_set_leader = me_partition_set_leader,
    .bump_version = me_bump_version,
    .move_create = me_move_create,
    .move_get = me_move_get,
    .move_list = me_move_list,
    .move_advance = me_move_advance,
    .move_set_bytes = me_move_set_bytes,
    .move_commit = me_move_commit,
    .setting_set = me_setting_set,
    .setting_get = me_setting_get,
    .setting_unset = me_setting_unset,
    .setting_list = me_setting_list,
};

int mapstore_etcd_set_guard(mapstore *ms, int64_t leader_create_rev) {
    if (!mapstore_is_etcd(ms) || leader_create_rev < 0) return KEEL_EINVAL;
    ((me *)mapstore__impl(ms))->guard_rev = leader_create_rev;
    return 0;
}

int mapstore_is_etcd(const mapstore *ms) {
    return ms && ms->ops == &etcd_ops;
}

void mapstore_etcd_get_stats(const mapstore *ms, mapstore_etcd_stats *st) {
    memset(st, 0, sizeof *st);
    if (mapstore_is_etcd(ms)) *st = ((const me *)mapstore__impl(ms))->st;
}

static int valid_prefix(const char *p) {
    size_t n = p ? strlen(p) : 0;
    if (n < 1 || n > MAPSTORE_ETCD_PREFIX_MAX || p[n - 1] != '/') return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f) return 0;
    return 1;
}

/* A handle's backend state with its client started. */
static int me_new(const mapstore_etcd_config *cfg, me **out, char *err, size_t cap) {
    *out = NULL;
    const char *prefix = cfg->prefix ? cfg->prefix : MAPSTORE_ETCD_DEFAULT_PREFIX;
    if (!valid_prefix(prefix))
        return keel_errf(err, cap, KEEL_EINVAL,
                         "etcd prefix '%s': 1..%d printable bytes, no spaces, ending in '/'",
                         prefix, MAPSTORE_ETCD_PREFIX_MAX);
    me *e = calloc(1, sizeof *e);
    if (!e) return keel_errf(err, cap, KEEL_ENOMEM, "out of memory");
    snprintf(e->prefix, sizeof e->prefix, "%s", prefix);
    int rc = etcd_client_new(cfg->urls,
                             cfg->timeout_ms ? cfg->timeout_ms : MAPSTORE_ETCD_DEFAULT_TIMEOUT_MS,
                             &e->c, err, cap);
    if (rc) {
        free(e);
        return rc;
    }
    *out = e;
    return 0;
}

int mapstore_etcd_open(const mapstore_etcd_config *cfg, const mapstore_expect *expect,
                       mapstore **out, char *err, size_t errcap) {
    me *e = NULL;
    mirror m;
    keel_errf(err, errcap, 0, "%s", "");
    if (!out || !cfg || !cfg->urls) return keel_errf(err, errcap, KEEL_EINVAL, "no etcd URL");
    *out = NULL;
    int rc = me_new(cfg, &e, err, errcap);
    if (rc) return rc;
    if ((rc = load_mirror(e, &m, err, errcap))) goto fail;
    adopt(e, &m);
    mapstore *ms = NULL;
    if ((rc = mapstore__new(&etcd_ops, e, e->meta.cluster_id, e->meta.partitions, &ms))) {
        keel_errf(err, errcap, rc, "out of memory");
        goto fail;
    }
    if ((rc = mapstore__check_expect(ms, expect, err, errcap))) {
        mapstore_free(ms);
        return rc;
    }
    *out = ms;
    return 0;
fail:
    me_close(e);
    return rc;
}

static int gen_cluster_id(char *out, size_t cap) {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0 && errno != EINTR) return KEEL_EIO;
        if (r > 0) got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof b && 2 * i + 2 < cap; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* KEEL_EEXIST, naming what is there, if anything is under the prefix. */
static int refuse_nonempty(me *e, char *err, size_t cap) {
    char *end = etcd_prefix_end(e->prefix);
    cJSON *r = NULL;
    int rc = end ? range(e, e->prefix, end, 1, &r) : KEEL_ENOMEM;
    free(end);
    int64_t count = rc ? 0 : etcd_json_i64(r, "count");
    cJSON_Delete(r);
    if (rc) return keel_errf(err, cap, rc, "etcd: %s", etcd_client_errmsg(e->c));
    if (count == 0) return 0;
    me_meta m;
    if (read_meta(e, &m, NULL, err, cap) == 0)
        return keel_errf(err, cap, KEEL_EEXIST,
                         "etcd prefix %s already holds cluster %s (%u partitions): refusing to "
                         "create a map over it",
                         e->prefix, m.cluster_id, m.partitions);
    return keel_errf(err, cap, KEEL_EEXIST,
                     "etcd prefix %s is not empty (%lld keys) and holds no Keel map: refusing "
                     "to create a map over it",
                     e->prefix, (long long)count);
}

int mapstore_etcd_create(const mapstore_etcd_config *cfg, unsigned partitions, int64_t now_ms,
                         mapstore **out, char *err, size_t errcap) {
    me *e = NULL;
    keel_errf(err, errcap, 0, "%s", "");
    if (!out || !cfg || !cfg->urls) return keel_errf(err, errcap, KEEL_EINVAL, "no etcd URL");
    *out = NULL;
    if (!keel_map_is_pow2_partitions(partitions))
        return keel_errf(err, errcap, KEEL_EINVAL,
                         "partitions must be a power of two from %d to %d, not %u",
                         KEEL_MIN_PARTITIONS, KEEL_MAX_PARTITIONS, partitions);
    int rc = me_new(cfg, &e, err, errcap);
    if (rc) return rc;
    if ((rc = refuse_nonempty(e, err, errcap))) goto out;
    me_meta m;
    memset(&m, 0, sizeof m);
    if ((rc = gen_cluster_id(m.cluster_id, sizeof m.cluster_id))) {
        keel_errf(err, errcap, rc, "getrandom: %s", strerror(errno));
        goto out;
    }
    m.partitions = partitions;
    m.next_move = 1;
    m.write_id = 1;
    m.created_at_ms = now_ms;
    mapstore_partition *parts = calloc(partitions, sizeof *parts);
    me_tx t;
    char key[KEY_MAX];
    /* create_revision == 0: meta does not exist yet */
    memset(&t, 0, sizeof t);
    t.body = cJSON_CreateObject();
    cJSON *cmp = t.body ? cJSON_AddArrayToObject(t.body, "compare") : NULL;
    t.ok = t.body ? cJSON_AddArrayToObject(t.body, "success") : NULL;
    key_meta(e, key, sizeof key);
    if (!parts || !cmp || !etcd_cmp(cmp, key, "CREATE", "EQUAL", 0)) t.oom = 1;
    tx_put(&t, key, meta_text(&m));
    for (unsigned k = 0; parts && k < chunk_count(partitions); k++) {
        for (unsigned p = k * MAPSTORE_ETCD_CHUNK;
             p < partitions && p < (k + 1) * MAPSTORE_ETCD_CHUNK; p++)
            parts[p].id = p;
        key_chunk(e, k, key, sizeof key);
        tx_put(&t, key, chunk_text(parts, partitions, k));
    }
    free(parts);
    int applied = 0, have_seen = 0;
    int64_t rev = 0, seen_rev = 0;
    me_meta seen;
    rc = t.oom ? KEEL_ENOMEM
               : tx_send(e, &t, ETCD_FAULT_NONE, &applied, &rev, &seen, &have_seen, &seen_rev);
    cJSON_Delete(t.body);
    if (rc == KEEL_EUNKNOWN || rc == KEEL_EPROTO) {
        me_meta now;
        char ignore[8];
        if (read_meta(e, &now, NULL, ignore, sizeof ignore) == 0 &&
            !strcmp(now.cluster_id, m.cluster_id))
            rc = 0, applied = 1;
        else
            rc = keel_errf(err, errcap, KEEL_EUNKNOWN,
                           "etcd: the creation of cluster %s got no answer (%s): look at %s "
                           "(etcdctl get --prefix %s) before trying again",
                           m.cluster_id, etcd_client_errmsg(e->c), e->prefix, e->prefix);
        if (rc) goto out;
    } else if (rc) {
        keel_errf(err, errcap, rc, "etcd: %s",
                  rc == KEEL_ENOMEM ? "out of memory" : etcd_client_errmsg(e->c));
        goto out;
    }
    if (!applied) {
        rc =
            keel_errf(err, errcap, KEEL_EEXIST,
                      "etcd prefix %s: a map appeared there while it was being created", e->prefix);
        goto out;
    }
    me_close(e);
    e = NULL;
    mapstore_expect ex = {m.cluster_id, partitions};
    return mapstore_etcd_open(cfg, &ex, out, err, errcap);
out:
    me_close(e);
    return rc;
}
