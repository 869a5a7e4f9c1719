/* jsonarena.c - cJSON's allocations of one scope from a bump arena; see
 * jsonarena.h.
 *
 * Blocks grow by doubling from ARENA_FIRST, so a 138 KB map (about 1 MB of
 * cJSON nodes and strings) takes a handful of mallocs instead of tens of
 * thousands. A free inside the scope asks "is this pointer in one of my
 * blocks?" (a few compares) and does nothing if so, else calls free: that
 * is how a tree built outside the scope can still be deleted inside it.
 */
#include "core/jsonarena.h"
#include "core/err.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define ARENA_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_OFF 1
#endif
#endif
#ifndef ARENA_OFF
#define ARENA_OFF 0
#endif

#define ARENA_FIRST ((size_t)64 << 10)
#define ARENA_ALIGN 16
/* The largest block of a scope, up to this size, is kept for the thread's
 * next scope: freeing and re-mapping ~1 MB per map (and faulting its pages
 * in again) cost more than the mallocs it saves. */
#define ARENA_KEEP ((size_t)8 << 20)

struct json_arena_blk {
    json_arena_blk *next;
    size_t size, used; /* bytes of data[] */
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

static _Thread_local json_arena *cur;
/* Kept from the last scope; never freed at thread exit (only the long-lived
 * loop threads parse maps). */
static _Thread_local json_arena_blk *spare;

static int in_arena(const json_arena *a, const void *p) {
    for (const json_arena_blk *b = a->head; b; b = b->next)
        if ((const unsigned char *)p >= b->data && (const unsigned char *)p < b->data + b->size)
            return 1;
    return 0;
}

static void *arena_alloc(json_arena *a, size_t n) {
    if (n > SIZE_MAX / 4) return NULL; /* the rounding and doubling below cannot wrap */
    n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    json_arena_blk *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = b ? b->size * 2 : ARENA_FIRST;
        while (size < n)
            size *= 2;
        json_arena_blk *nb = malloc(sizeof *nb + size);
        if (!nb) return NULL;
        nb->next = b;
        nb->size = size;
        nb->used = 0;
        a->head = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    a->allocs++;
    return p;
}

static void *hook_malloc(size_t n) {
    json_arena *a = cur;
    return a && !ARENA_OFF ? arena_alloc(a, n) : malloc(n);
}

static void hook_free(void *p) {
    json_arena *a = cur;
    if (p && a && !ARENA_OFF && in_arena(a, p)) return; /* freed at json_arena_end */
    free(p);
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void install_hooks(void) {
    if (ARENA_OFF) return; /* cJSON keeps malloc and free, which ASan checks */
    cJSON_Hooks h = {hook_malloc, hook_free};
    cJSON_InitHooks(&h);
}

void json_arena_init(void) {
    (void)pthread_once(&hooks_once, install_hooks);
}

int json_arena_enabled(void) {
    return !ARENA_OFF;
}

int json_arena_begin(json_arena *a) {
    json_arena_init();
    if (cur) return KEEL_EINVAL;
    a->head = spare; /* empty: used = 0 */
    spare = NULL;
    a->allocs = 0;
    a->open = 1;
    cur = a;
    return 0;
}

void json_arena_end(json_arena *a) {
    if (!a || !a->open) return;
    if (cur == a) cur = NULL;
    json_arena_blk *keep = NULL;
    for (json_arena_blk *b = a->head; b; b = b->next)
        if (b->size <= ARENA_KEEP && (!keep || b->size > keep->size)) keep = b;
    for (json_arena_blk *b = a->head, *n; b; b = n) {
        n = b->next;
        if (b != keep) free(b);
    }
    if (keep) { /* spare is NULL here: begin took it, and scopes do not nest */
        keep->next = NULL;
        keep->used = 0;
        spare = keep;
    }
    a->head = NULL;
    a->open = 0;
}
