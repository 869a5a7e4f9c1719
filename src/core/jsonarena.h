/* jsonarena.h - cJSON's allocations of one scope from a bump arena.
 *
 * Parsing or writing the cluster map (138 KB at 1,024 partitions, RF 3)
 * makes cJSON allocate and free tens of thousands of small objects: in a
 * microbenchmark of mapcodec, malloc and free were 42 % of the time. Inside
 * a scope opened with json_arena_begin, every allocation cJSON makes on the
 * calling thread comes from the arena instead, a free of an arena pointer
 * does nothing, and json_arena_end returns all of it at once.
 *
 * Contract:
 *   - Every cJSON tree, string and printed text allocated in the scope is
 *     arena memory: it must not be used or freed after json_arena_end (copy
 *     the text out first). Free it, if at all, with cJSON_free or
 *     cJSON_Delete inside the scope, never with free().
 *   - Memory cJSON allocated outside any scope is still malloc's, and a
 *     cJSON_Delete or cJSON_free of it inside a scope frees it normally.
 *   - Scopes are per thread (thread-local) and do not nest: begin while a
 *     scope is open on the thread returns KEEL_EINVAL and changes nothing.
 *     Other threads are not affected.
 *   - cJSON's hooks are process-wide. json_arena_init installs them; call it
 *     once at start, before other threads use cJSON (main does). begin calls
 *     it too, for single-threaded programs such as the unit tests; a
 *     multi-threaded program that skips json_arena_init races on the hooks.
 *   - A nested begin is refused, and the code inside keeps allocating from
 *     the outer scope's arena.
 *   - Each thread keeps its largest block (up to 8 MiB) between scopes, and
 *     does not free it at thread exit.
 *   - Under AddressSanitizer the arena is off (begin and end only track the
 *     scope), so that ASan still checks every cJSON allocation.
 *
 * Thread safety: begin/end/alloc touch only the calling thread's arena.
 */
#ifndef KEEL_JSONARENA_H
#define KEEL_JSONARENA_H

#include <stddef.h>

typedef struct json_arena_blk json_arena_blk;

typedef struct json_arena {
    json_arena_blk *head; /* newest block first; NULL before the first alloc */
    size_t allocs;        /* allocations served by the arena in this scope */
    int open;
} json_arena;

/* Installs cJSON's hooks (once per process; later calls do nothing). */
void json_arena_init(void);
/* 1 when scopes allocate from arenas, 0 in an AddressSanitizer build. */
int json_arena_enabled(void);
/* Opens a scope on this thread with *a (the caller's storage, until end).
 * Returns 0, or KEEL_EINVAL when a scope is already open on this thread. */
int json_arena_begin(json_arena *a);
/* Closes the scope opened with *a and frees every block; a closed or zeroed
 * *a is a no-op. */
void json_arena_end(json_arena *a);

#endif
