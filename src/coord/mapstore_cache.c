/* mapstore_cache.c - the map store's read cache (see mapstore_int.h). */
#include "coord/mapstore_int.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* Asynchronous mode: the backend is the worker's; memory is loaded whole at
 * the start and replaced whole after a re-read, so this does not happen. */
static int not_loaded(mapstore *ms) {
    return mapstore__errf(ms, KEEL_EIO, "map store: the map is not in memory");
}

int msc_nodes(mapstore *ms) {
    if (ms->c.have_nodes) return 0;
    if (ms->async) return not_loaded(ms);
    ms->reads++;
    int rc = ms->ops->node_list(ms, &ms->c.nodes, &ms->c.nn);
    ms->c.have_nodes = rc == 0;
    return rc;
}

int msc_parts(mapstore *ms) {
    if (ms->c.have_parts) return 0;
    if (ms->async) return not_loaded(ms);
    size_t n = 0;
    ms->reads++;
    int rc = ms->ops->partition_list(ms, &ms->c.parts, &n);
    if (!rc && n != ms->partitions) {
        free(ms->c.parts);
        ms->c.parts = NULL;
        return mapstore__errf(ms, KEEL_ECORRUPT, "%zu partitions listed, P is %u", n,
                              ms->partitions);
    }
    ms->c.have_parts = rc == 0;
    return rc;
}

int msc_moves(mapstore *ms) {
    if (ms->c.have_moves) return 0;
    if (ms->async) return not_loaded(ms);
    ms->reads++;
    int rc = ms->ops->move_list(ms, 0, &ms->c.moves, &ms->c.nm);
    ms->c.have_moves = rc == 0;
    return rc;
}

int msc_settings(mapstore *ms) {
    if (ms->c.have_settings) return 0;
    if (ms->async) return not_loaded(ms);
    ms->reads++;
    int rc = ms->ops->setting_list(ms, &ms->c.settings, &ms->c.ns);
    ms->c.have_settings = rc == 0;
    return rc;
}

void msc_free(mapstore *ms) {
    free(ms->c.nodes);
    free(ms->c.parts);
    free(ms->c.moves);
    free(ms->c.settings);
    memset(&ms->c, 0, sizeof ms->c);
}

void msc_drop(mapstore *ms) {
    if (ms->async) { /* keep serving what is there; a re-read replaces it */
        ms->stale = 1;
        return;
    }
    msc_free(ms);
}

static void cache_free(ms_cache *c) {
    free(c->nodes);
    free(c->parts);
    free(c->moves);
    free(c->settings);
    memset(c, 0, sizeof *c);
}

int msc_load_all(mapstore *ms, ms_cache *c) {
    size_t np = 0;
    memset(c, 0, sizeof *c);
    int rc = ms->ops->node_list(ms, &c->nodes, &c->nn);
    if (!rc) rc = ms->ops->partition_list(ms, &c->parts, &np);
    if (!rc && np != ms->partitions)
        rc =
            mapstore__errf(ms, KEEL_ECORRUPT, "%zu partitions listed, P is %u", np, ms->partitions);
    if (!rc) rc = ms->ops->move_list(ms, 0, &c->moves, &c->nm);
    if (!rc) rc = ms->ops->setting_list(ms, &c->settings, &c->ns);
    if (rc) {
        cache_free(c);
        return rc;
    }
    c->have_nodes = c->have_parts = c->have_moves = c->have_settings = 1;
    return 0;
}

mapstore_node *msc_node(mapstore *ms, const char *id) {
    for (size_t i = 0; ms->c.have_nodes && i < ms->c.nn; i++)
        if (!strcmp(ms->c.nodes[i].id, id)) return &ms->c.nodes[i];
    return NULL;
}

mapstore_move *msc_move(mapstore *ms, uint64_t id) {
    size_t lo = 0, hi = ms->c.have_moves ? ms->c.nm : 0; /* sorted by id */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ms->c.moves[mid].id == id) return &ms->c.moves[mid];
        if (ms->c.moves[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

mapstore_setting *msc_setting(mapstore *ms, const char *name) {
    for (size_t i = 0; ms->c.have_settings && i < ms->c.ns; i++)
        if (!strcmp(ms->c.settings[i].name, name)) return &ms->c.settings[i];
    return NULL;
}

/* Inserts *item (of size sz) into the sorted array *arr of *n, before the
 * first element that compares greater. */
static int insert_sorted(void **arr, size_t *n, size_t sz, const void *item,
                         int (*cmp)(const void *, const void *)) {
    char *a = realloc(*arr, (*n + 1) * sz);
    if (!a) return KEEL_ENOMEM;
    size_t at = *n;
    while (at > 0 && cmp(a + (at - 1) * sz, item) > 0)
        at--;
    memmove(a + (at + 1) * sz, a + at * sz, (*n - at) * sz);
    memcpy(a + at * sz, item, sz);
    *arr = a;
    (*n)++;
    return 0;
}

static int cmp_node(const void *a, const void *b) {
    return strcmp(((const mapstore_node *)a)->id, ((const mapstore_node *)b)->id);
}

static int cmp_setting(const void *a, const void *b) {
    return strcmp(((const mapstore_setting *)a)->name, ((const mapstore_setting *)b)->name);
}

static int cmp_move(const void *a, const void *b) {
    uint64_t x = ((const mapstore_move *)a)->id, y = ((const mapstore_move *)b)->id;
    return x < y ? -1 : x > y;
}

int msc_put_node(mapstore *ms, const mapstore_node *n, int64_t now_ms) {
    if (!ms->c.have_nodes) return 0;
    mapstore_node *old = msc_node(ms, n->id);
    if (old) { /* the update rules of mapstore_node_upsert */
        int64_t reg = old->registered_at_ms;
        *old = *n;
        old->registered_at_ms = reg;
        old->last_heartbeat_ms = now_ms;
        return 0;
    }
    mapstore_node c = *n;
    c.registered_at_ms = c.last_heartbeat_ms = now_ms;
    int rc = insert_sorted((void **)&ms->c.nodes, &ms->c.nn, sizeof c, &c, cmp_node);
    if (rc) msc_drop(ms);
    return rc;
}

void msc_heartbeat(mapstore *ms, const char *id, int64_t now_ms) {
    mapstore_node *n = msc_node(ms, id);
    if (n) n->last_heartbeat_ms = now_ms;
}

int msc_add_move(mapstore *ms, const mapstore_move *m) {
    if (!ms->c.have_moves) return 0;
    int rc = insert_sorted((void **)&ms->c.moves, &ms->c.nm, sizeof *m, m, cmp_move);
    if (rc) msc_drop(ms);
    return rc;
}

int msc_put_setting(mapstore *ms, const char *name, const char *value, int64_t now_ms) {
    if (!ms->c.have_settings) return 0;
    mapstore_setting *s = msc_setting(ms, name);
    mapstore_setting n;
    if (!s) {
        memset(&n, 0, sizeof n);
        s = &n;
    }
    strcpy(s->name, name); /* both lengths were checked by the caller */
    strcpy(s->value, value);
    s->set_at_ms = now_ms;
    if (s != &n) return 0;
    int rc = insert_sorted((void **)&ms->c.settings, &ms->c.ns, sizeof n, &n, cmp_setting);
    if (rc) msc_drop(ms);
    return rc;
}

void msc_del_setting(mapstore *ms, const char *name) {
    mapstore_setting *s = msc_setting(ms, name);
    if (!s) return;
    size_t at = (size_t)(s - ms->c.settings);
    memmove(s, s + 1, (ms->c.ns - at - 1) * sizeof *s);
    ms->c.ns--;
}
