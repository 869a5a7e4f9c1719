/* test-jsonarena.c - cJSON's allocations of one scope from a bump arena
 * (core/jsonarena.h): the same text in and out, scopes per thread, no
 * nesting, and trees from outside a scope freed normally inside it. In an
 * AddressSanitizer build the arena is off; the cases then check only that
 * everything still works (ASan checks the frees). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/jsonarena.h"
#include "core/mapcodec.h"

static const char *DOC = "{\"version\":7,\"nodes\":[{\"id\":\"n1\",\"addr\":\"127.0.0.1:1\"},"
                         "{\"id\":\"n\\\"2\",\"addr\":\"h:2\"}],\"owners\":[1,2,3,\"x\"]}";

static char *roundtrip(const char *text) {
    cJSON *t = cJSON_Parse(text);
    assert_non_null(t);
    char *out = cJSON_PrintUnformatted(t);
    assert_non_null(out);
    char *copy = strdup(out);
    cJSON_free(out);
    cJSON_Delete(t);
    return copy;
}

/* Parsing and printing inside a scope gives the text they give outside,
 * and the allocations came from the arena. */
static void same_text_in_scope(void **st) {
    char *outside = roundtrip(DOC);
    json_arena a = {0};
    assert_int_equal(json_arena_begin(&a), 0);
    char *inside = roundtrip(DOC);
    if (json_arena_enabled())
        assert_true(a.allocs > 10);
    else
        assert_int_equal(a.allocs, 0);
    json_arena_end(&a);
    assert_string_equal(inside, outside);
    free(inside);
    free(outside);
    json_arena_end(&a); /* a closed scope: no-op */
}

/* A second begin on the thread is refused and changes nothing: the open
 * scope keeps serving; ending the refused one does nothing. */
static void no_nesting(void **st) {
    json_arena a = {0}, b = {0};
    assert_int_equal(json_arena_begin(&a), 0);
    assert_int_equal(json_arena_begin(&b), KEEL_EINVAL);
    size_t before = a.allocs;
    char *s = roundtrip(DOC);
    json_arena_end(&b);
    if (json_arena_enabled()) assert_true(a.allocs > before);
    assert_int_equal(b.allocs, 0);
    char *s2 = roundtrip(DOC); /* still in a's scope after b's end */
    assert_string_equal(s, s2);
    json_arena_end(&a);
    assert_int_equal(json_arena_begin(&b), 0); /* free again */
    json_arena_end(&b);
    free(s);
    free(s2);
}

/* A tree built before the scope is deleted inside it (malloc memory, freed
 * by free), and one built after the scope is ordinary memory again. */
static void outside_tree_freed_inside(void **st) {
    cJSON *before = cJSON_Parse(DOC);
    assert_non_null(before);
    json_arena a = {0};
    assert_int_equal(json_arena_begin(&a), 0);
    cJSON_Delete(before);
    json_arena_end(&a);
    size_t n = a.allocs;
    cJSON *after = cJSON_Parse(DOC);
    assert_non_null(after);
    assert_int_equal(a.allocs, n);
    cJSON_Delete(after);
}

/* Allocations larger than a block (a 1 MiB string) are served too. */
static void large_allocation(void **st) {
    size_t n = (size_t)1 << 20;
    char *big = malloc(n + 3);
    assert_non_null(big);
    big[0] = '"';
    memset(big + 1, 'x', n);
    big[n + 1] = '"';
    big[n + 2] = 0;
    json_arena a = {0};
    assert_int_equal(json_arena_begin(&a), 0);
    cJSON *t = cJSON_Parse(big);
    assert_non_null(t);
    assert_true(cJSON_IsString(t));
    assert_int_equal(strlen(t->valuestring), n);
    cJSON_Delete(t);
    json_arena_end(&a);
    free(big);
}

/* Every allocation is 16-byte aligned, and a second scope (starting on the
 * block the first kept) with more than that block's worth of allocations
 * still hands out distinct, writable memory. */
static void aligned_and_reused(void **st) {
    for (int round = 0; round < 2; round++) {
        json_arena a = {0};
        assert_int_equal(json_arena_begin(&a), 0);
        cJSON *arr = cJSON_CreateArray();
        assert_non_null(arr);
        for (int i = 0; i < 20000; i++) { /* ~1 MB of items: several blocks */
            cJSON *it = cJSON_CreateString("0123456789abcdef");
            assert_non_null(it);
            if (json_arena_enabled()) assert_int_equal((uintptr_t)it % 16, 0);
            assert_true(cJSON_AddItemToArray(arr, it));
        }
        int n = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, arr) {
            assert_string_equal(it->valuestring, "0123456789abcdef");
            n++;
        }
        assert_int_equal(n, 20000);
        cJSON_Delete(arr);
        json_arena_end(&a);
    }
}

/* mapcodec inside a caller's scope (its own begin is refused): the map it
 * parsed and the text it wrote are the caller's copies and outlive the
 * scope; written again outside any scope, the text is the same. */
static void map_codec_inside_a_scope(void **st) {
    keel_map m;
    assert_int_equal(keel_map_init(&m, 16), 0);
    assert_true(keel_map_add_node(&m, "n1", "127.0.0.1", 7001) >= 0);
    assert_true(keel_map_add_node(&m, "n2", "127.0.0.1", 7002) >= 0);
    for (unsigned p = 0; p < 16; p++)
        m.owner[p] = (int32_t)(p % 2);
    m.version = 9;
    kbuf in_scope, outside;
    kbuf_init(&in_scope);
    kbuf_init(&outside);
    keel_map back;
    char err[128];
    json_arena a = {0};
    assert_int_equal(json_arena_begin(&a), 0);
    assert_int_equal(keel_map_write_json(&m, 4, &in_scope), 0);
    assert_int_equal(kbuf_append(&in_scope, "", 1), 0);
    assert_int_equal(keel_map_parse_json(in_scope.p, &back, err, sizeof err), 0);
    json_arena_end(&a);
    assert_int_equal(back.version, 9);
    assert_int_equal(back.nnodes, 2);
    assert_string_equal(back.nodes[1].id, "n2");
    for (unsigned p = 0; p < 16; p++)
        assert_int_equal(back.owner[p], (int32_t)(p % 2));
    assert_int_equal(keel_map_write_json(&back, 4, &outside), 0);
    assert_int_equal(kbuf_append(&outside, "", 1), 0);
    assert_string_equal(outside.p, in_scope.p);
    keel_map_close(&back);
    keel_map_close(&m);
    kbuf_close(&in_scope);
    kbuf_close(&outside);
}

static json_arena *main_arena;

static void *other_thread(void *arg) {
    size_t before = main_arena->allocs;
    cJSON *t = cJSON_Parse(DOC);
    char *s = t ? cJSON_PrintUnformatted(t) : NULL;
    *(int *)arg = t && s && main_arena->allocs == before;
    cJSON_free(s);
    cJSON_Delete(t);
    return NULL;
}

/* A scope on one thread does not touch another thread's allocations. */
static void other_threads_unaffected(void **st) {
    json_arena a = {0};
    assert_int_equal(json_arena_begin(&a), 0);
    main_arena = &a;
    int ok = 0;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &ok), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(ok);
    json_arena_end(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_text_in_scope),        cmocka_unit_test(no_nesting),
        cmocka_unit_test(outside_tree_freed_inside), cmocka_unit_test(large_allocation),
        cmocka_unit_test(aligned_and_reused),        cmocka_unit_test(map_codec_inside_a_scope),
        cmocka_unit_test(other_threads_unaffected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
