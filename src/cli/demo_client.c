/* demo_client.c - see demo_client.h. */
#include "cli/demo_client.h"
#include "core/clock.h"
#include "core/crc16.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ATTEMPTS 2000       /* per command: redirects, TRYAGAIN and reconnects */
#define GIVE_UP_US 15000000 /* and at most this long: a failover takes seconds */

static redisContext *node_ctx(dcc *c, int port) {
    int i = port - c->base;
    if (i < 1 || i > DCC_MAX_NODES) return NULL;
    if (c->ctx[i]) return c->ctx[i];
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!r || r->err) {
        redisFree(r);
        return NULL;
    }
    redisSetTimeout(r, tv);
    c->ctx[i] = r;
    return r;
}

static void drop_ctx(dcc *c, int port) {
    int i = port - c->base;
    if (i < 1 || i > DCC_MAX_NODES || !c->ctx[i]) return;
    redisFree(c->ctx[i]);
    c->ctx[i] = NULL;
    c->reconnects++;
}

/* Reads CLUSTER SLOTS from the first node that answers, skipping port
 * `avoid` (one that just refused us). Returns the slots covered. */
static int refresh(dcc *c, int nodes, int avoid) {
    int covered = 0;
    for (int k = 1; k <= nodes && !covered; k++) {
        if (c->base + k == avoid) continue;
        redisContext *r = node_ctx(c, c->base + k);
        redisReply *rep = r ? redisCommand(r, "CLUSTER SLOTS") : NULL;
        for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
            redisReply *e = rep->element[i];
            if (e->elements < 3) continue;
            for (long s = e->element[0]->integer; s <= e->element[1]->integer; s++, covered++)
                c->slot_port[s] = (uint16_t)e->element[2]->element[1]->integer;
        }
        freeReplyObject(rep);
    }
    return covered;
}

int dcc_init(dcc *c, int base, int nodes) {
    memset(c, 0, sizeof *c);
    c->base = base;
    c->nodes = nodes;
    return refresh(c, nodes, 0);
}

void dcc_close(dcc *c) {
    for (int i = 0; i <= DCC_MAX_NODES; i++)
        if (c->ctx[i]) redisFree(c->ctx[i]), c->ctx[i] = NULL;
}

void *dcc_command(dcc *c, int argc, const char **argv, const size_t *lens) {
    size_t klen = lens ? lens[1] : strlen(argv[1]);
    unsigned slot = keel_key_slot(argv[1], klen);
    uint64_t t0 = keel_mono_us();
    int refused = 0, moved = 0, tryagain = 0, lost = 0, attempt = 0;
    for (; attempt < ATTEMPTS && keel_mono_us() - t0 < GIVE_UP_US; attempt++) {
        int port = c->slot_port[slot] ? c->slot_port[slot] : c->base + 1;
        redisContext *r = node_ctx(c, port);
        if (!r || refused >= 2) { /* that node is gone: ask the others (a failover) */
            if (r) drop_ctx(c, port);
            if (refresh(c, c->nodes ? c->nodes : DCC_MAX_NODES, port) > 0) refused = 0;
            usleep(50000);
            continue;
        }
        redisReply *rep = redisCommandArgv(r, argc, argv, lens);
        if (!rep) { /* lost: reconnect and retry */
            drop_ctx(c, port);
            refused++, lost++;
            usleep(10000);
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "MOVED ", 6)) {
            const char *colon = strrchr(rep->str, ':');
            if (colon) c->slot_port[slot] = (uint16_t)atoi(colon + 1);
            c->moved++;
            freeReplyObject(rep);
            if (++moved > 2) usleep(2000);
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "TRYAGAIN", 8)) {
            c->tryagain++, tryagain++;
            freeReplyObject(rep);
            usleep(5000);
            continue;
        }
        return rep;
    }
    c->errors++;
    snprintf(c->last_error, sizeof c->last_error,
             "%s %.*s gave up after %.1f s and %d attempts (%d -MOVED, %d -TRYAGAIN, %d lost)",
             argv[0], (int)(klen > 40 ? 40 : klen), argv[1], (double)(keel_mono_us() - t0) / 1e6,
             attempt, moved, tryagain, lost);
    return NULL;
}

/* ---- Background load ----------------------------------------------------- */

static void lat_add(dload_lat *l, uint64_t us) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 65536;
        uint32_t *p = realloc(l->us, cap * sizeof *p);
        if (!p) return;
        l->us = p, l->cap = cap;
    }
    l->us[l->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void *load_main(void *arg) {
    dload *l = arg;
    char key[48], val[48], want[48];
    uint64_t i = 0;
    while (!l->stop) {
        long k = (long)(i % (uint64_t)l->keys);
        uint64_t v = ++l->seq;
        int phase = l->phase;
        snprintf(key, sizeof key, "demo:w:%ld", k);
        snprintf(val, sizeof val, "w-%llu", (unsigned long long)v);
        const char *set[] = {"SET", key, val};
        uint64_t t0 = keel_mono_us();
        redisReply *r = dcc_command(&l->c, 3, set, NULL);
        lat_add(&l->lat[phase], keel_mono_us() - t0);
        l->ops[phase]++;
        if (r && r->type == REDIS_REPLY_STATUS) l->last[k] = v; /* acknowledged */
        freeReplyObject(r);
        if (l->loaded_keys) {
            long g = (long)((i * 7919) % (uint64_t)l->loaded_keys);
            snprintf(key, sizeof key, "demo:%ld", g);
            snprintf(want, sizeof want, "value-%ld", g);
            const char *get[] = {"GET", key};
            t0 = keel_mono_us();
            r = dcc_command(&l->c, 2, get, NULL);
            lat_add(&l->lat[phase], keel_mono_us() - t0);
            l->ops[phase]++;
            if (r && (r->type != REDIS_REPLY_STRING || strncmp(r->str, want, strlen(want))))
                l->wrong_reads++;
            freeReplyObject(r);
        }
        i++;
    }
    return NULL;
}

int dload_start(dload *l, int base, int nodes, long loaded_keys, long keys) {
    memset(l, 0, sizeof *l);
    l->base = base, l->nodes = nodes, l->loaded_keys = loaded_keys, l->keys = keys;
    if (!(l->last = calloc((size_t)keys, sizeof *l->last))) return -1;
    if (dcc_init(&l->c, base, nodes) != 16384) return -1;
    return pthread_create(&l->thread, NULL, load_main, l) ? -1 : 0;
}

void dload_stop(dload *l) {
    l->stop = 1;
    pthread_join(l->thread, NULL);
}

void dload_free(dload *l) {
    dcc_close(&l->c);
    free(l->last);
    for (int p = 0; p < DLOAD_PHASES; p++)
        free(l->lat[p].us);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

double dload_pct(dload *l, int phase, double pct) {
    dload_lat *t = &l->lat[phase];
    if (!t->n) return 0;
    qsort(t->us, t->n, sizeof *t->us, cmp_u32);
    size_t i = (size_t)(pct / 100.0 * (double)(t->n - 1) + 0.5);
    return t->us[i] / 1000.0;
}

double dload_max(dload *l, int phase) {
    return dload_pct(l, phase, 100);
}
