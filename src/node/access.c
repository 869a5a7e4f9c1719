/* access.c - the per-key access clock (see access.h): an open-addressing
 * (linear probing) hash table of key -> (last access ms, LFU counter),
 * growing to 2 * ACCESS_MAX slots, then evicting by sampling. */
#include "node/access.h"
#include "core/clock.h"
#include "core/crc64.h"
#include "core/err.h"
#include "node/introspect.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct entry {
    char *key; /* NULL: empty slot */
    size_t kl;
    int64_t last_ms;
    uint8_t lfu;
    int64_t lfu_ms; /* when lfu was last decayed */
} entry;

struct access_table {
    entry *e;
    size_t cap, n; /* cap a power of two, n <= cap / 2 */
    int64_t floor_ms;
    unsigned gen; /* s->config_gen the three below were read at (+1) */
    int lfu_mode;
    long long log_factor, decay_min;
};

#define LFU_INIT 5

static struct access_table *table(server *s) {
    if (s->access) return s->access;
    struct access_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cap = 1024;
    t->e = calloc(t->cap, sizeof *t->e);
    if (!t->e) {
        free(t);
        return NULL;
    }
    t->floor_ms = keel_wall_ms(); /* nothing seen before the table existed */
    s->access = t;
    return t;
}

static size_t hash(const char *k, size_t kl) {
    return (size_t)keel_crc64(0, k, kl);
}

static entry *find(struct access_table *t, const char *k, size_t kl) {
    for (size_t i = hash(k, kl) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        entry *e = &t->e[i];
        if (!e->key || (e->kl == kl && !memcmp(e->key, k, kl))) return e;
    }
}

/* Rehashes every entry into a table of cap slots (growth only). */
static int grow(struct access_table *t, size_t cap) {
    entry *old = t->e;
    size_t oldcap = t->cap;
    entry *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return KEEL_ENOMEM;
    t->e = fresh, t->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key) *find(t, old[i].key, old[i].kl) = old[i];
    free(old);
    return 0;
}

/* Removes slot i by backward shift (linear probing keeps no tombstones). */
static void remove_at(struct access_table *t, size_t i) {
    size_t mask = t->cap - 1;
    free(t->e[i].key);
    t->e[i].key = NULL;
    t->n--;
    for (size_t j = (i + 1) & mask; t->e[j].key; j = (j + 1) & mask) {
        size_t home = hash(t->e[j].key, t->e[j].kl) & mask;
        /* move j back to i unless its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        t->e[i] = t->e[j];
        t->e[j].key = NULL;
        i = j;
    }
}

/* Evicts the least recently used of a few sampled entries (redis' own
 * eviction samples too): O(1), no pause. floor keeps the newest access
 * evicted, so an absent key's idle time stays a lower bound. */
static void evict_one(struct access_table *t) {
    size_t mask = t->cap - 1, victim = t->cap;
    for (int k = 0; k < 16; k++) {
        size_t i = (size_t)rand() & mask;
        while (!t->e[i].key)
            i = (i + 1) & mask;
        if (victim == t->cap || t->e[i].last_ms < t->e[victim].last_ms) victim = i;
    }
    if (t->e[victim].last_ms > t->floor_ms) t->floor_ms = t->e[victim].last_ms;
    remove_at(t, victim);
}

/* The key's entry, created (at floor, LFU_INIT; *created = 1) if absent;
 * NULL on OOM. */
static entry *get_new(server *s, const char *k, size_t kl, int *created) {
    struct access_table *t = table(s);
    *created = 0;
    if (!t) return NULL;
    entry *e = find(t, k, kl);
    if (e->key) return e;
    *created = 1;
    if (t->n >= ACCESS_MAX) {
        evict_one(t);
        e = find(t, k, kl);
    } else if (t->n + 1 > t->cap / 2) {
        if (grow(t, t->cap * 2)) return NULL;
        e = find(t, k, kl);
    }
    if (!(e->key = malloc(kl ? kl : 1))) return NULL;
    memcpy(e->key, k, kl);
    e->kl = kl;
    e->last_ms = t->floor_ms;
    e->lfu = LFU_INIT;
    e->lfu_ms = keel_wall_ms();
    t->n++;
    return e;
}

size_t access_count(const server *s) {
    return s->access ? s->access->n : 0;
}

static entry *get(server *s, const char *k, size_t kl) {
    int created;
    return get_new(s, k, kl, &created);
}

static long long param(server *s, const char *name, long long def) {
    const char *v = config_value(s, name); /* introspect.h */
    return v ? strtoll(v, NULL, 10) : def;
}

/* Re-reads maxmemory-policy and the lfu-* parameters after a CONFIG SET. */
static struct access_table *fresh(server *s) {
    struct access_table *t = table(s);
    if (!t || t->gen == s->config_gen + 1) return t;
    const char *pol = config_value(s, "maxmemory-policy");
    t->lfu_mode = pol && strstr(pol, "lfu") != NULL;
    t->log_factor = param(s, "lfu-log-factor", 10);
    t->decay_min = param(s, "lfu-decay-time", 1);
    t->gen = s->config_gen + 1;
    return t;
}

int access_lfu_mode(server *s) {
    struct access_table *t = fresh(s);
    return t ? t->lfu_mode : 0;
}

/* redis' LFUDecrAndReturn: one step down per lfu-decay-time minutes. */
static int decayed(server *s, entry *e, int64_t now) {
    long long period = s->access ? s->access->decay_min : 1;
    long long steps = period > 0 ? (now - e->lfu_ms) / 60000 / period : 0;
    if (steps <= 0) return e->lfu;
    e->lfu_ms = now;
    e->lfu = steps > e->lfu ? 0 : (uint8_t)(e->lfu - steps);
    return e->lfu;
}

static void touch(cmd_ctx *x, const char *k, size_t kl) {
    struct access_table *t = fresh(x->srv);
    int created;
    entry *e = t ? get_new(x->srv, k, kl, &created) : NULL;
    if (!e) return; /* out of memory: the clock is advisory, the command ran */
    e->last_ms = x->now_ms;
    int c = decayed(x->srv, e, x->now_ms);
    if (t->lfu_mode && c < 255 &&
        !created) { /* a new key starts at LFU_INIT, as redis */ /* redis' LFULogIncr, kept only
                                                                    under an LFU policy */
        double base = c - LFU_INIT < 0 ? 0 : c - LFU_INIT;
        double p = 1.0 / (base * (double)t->log_factor + 1);
        if ((double)rand() / RAND_MAX < p) e->lfu++;
    }
}

void access_touch_cmd(cmd_ctx *x, const cmd_def *d) {
    static const char *const notouch[] = {"type",        "ttl",    "pttl",  "exists", "expiretime",
                                          "pexpiretime", "object", "usage", "restore"};
    for (size_t i = 0; i < sizeof notouch / sizeof *notouch; i++)
        if (!strcmp(d->name, notouch[i])) return;
    if (d->keynum > 0) {
        long long nk;
        if (d->keynum >= x->argc || arg_ll(x->argv[d->keynum], x->argvlen[d->keynum], &nk) ||
            nk < 0 || nk > x->argc - d->keynum - 1)
            return;
        for (long long i = 0; i < nk; i++)
            touch(x, x->argv[d->keynum + 1 + i], x->argvlen[d->keynum + 1 + i]);
        return;
    }
    if (d->first_key <= 0) return;
    int last = d->last_key < 0 ? x->argc + d->last_key : d->last_key;
    int step = d->key_step > 0 ? d->key_step : 1;
    for (int i = d->first_key; i <= last && i < x->argc; i += step)
        touch(x, x->argv[i], x->argvlen[i]);
}

long long access_idle_s(cmd_ctx *x, const char *k, size_t kl) {
    struct access_table *t = table(x->srv);
    if (!t) return 0;
    entry *e = find(t, k, kl);
    int64_t last = e->key ? e->last_ms : t->floor_ms;
    return x->now_ms > last ? (x->now_ms - last) / 1000 : 0;
}

int access_freq(cmd_ctx *x, const char *k, size_t kl) {
    entry *e = fresh(x->srv) ? get(x->srv, k, kl) : NULL;
    return e ? decayed(x->srv, e, x->now_ms) : LFU_INIT;
}

int access_set_idle(cmd_ctx *x, const char *k, size_t kl, long long idle_s) {
    entry *e = get(x->srv, k, kl);
    if (!e) return KEEL_ENOMEM;
    e->last_ms = x->now_ms - (idle_s > x->now_ms / 1000 ? x->now_ms : idle_s * 1000);
    return 0;
}

int access_set_freq(cmd_ctx *x, const char *k, size_t kl, int freq) {
    entry *e = get(x->srv, k, kl);
    if (!e) return KEEL_ENOMEM;
    e->lfu = (uint8_t)freq;
    e->lfu_ms = x->now_ms;
    return 0;
}

void access_free(struct access_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->e[i].key);
    free(t->e);
    free(t);
}
