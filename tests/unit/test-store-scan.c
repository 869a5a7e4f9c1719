/* test-store-scan.c - store_scan_range and store_scan_range_rev over records
 * split between an SST file and the memtable (the scans' iterators are
 * pinned, store_types.c): after a flush, overwrites and deletes in the
 * memtable, each scan must hand cb every live record of [from, to) in key
 * order, once, with its newest value, honouring skip and max. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tmpdir.h"

#include "core/err.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NOW 1700000000000LL
#define SLOT 9u
#define N 300

typedef struct fx {
    char dir[TMPDIR_MAX];
    store *s;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (tmpdir_make(f->dir, "test-store-scan")) return -1;
    store_opts o;
    store_opts_default(&o);
    o.fsync = STORE_FSYNC_NO;
    o.cache_bytes = 8 << 20;
    char err[256];
    if (store_open(f->dir, &o, &f->s, err, sizeof err)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    store_free(f->s);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* What a scan handed to cb: "key=value" per record, in order. */
typedef struct seen {
    char rec[N][32];
    int n;
} seen;

static int collect(void *arg, const char *rk, size_t rkl, const store_value *v) {
    seen *c = arg;
    assert_true(c->n < N);
    snprintf(c->rec[c->n++], sizeof c->rec[0], "%.*s=%.*s", (int)rkl, rk, (int)v->len, v->data);
    return 0;
}

/* r000..r299 = "a<i>" flushed to an SST; then in the memtable r100..r149 =
 * "b<i>" and r150..r159 deleted. */
static void load(store *s) {
    char k[16], v[16];
    store_txn *t = store_txn_begin(s);
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "r%03d", i);
        snprintf(v, sizeof v, "a%d", i);
        assert_int_equal(store_txn_put(t, SLOT, k, 4, STORE_T_STRING, 0, v, strlen(v)), 0);
    }
    assert_int_equal(store_txn_commit(t), 0);
    assert_int_equal(store_flush_memtables(s), 0);
    t = store_txn_begin(s);
    for (int i = 100; i < 150; i++) {
        snprintf(k, sizeof k, "r%03d", i);
        snprintf(v, sizeof v, "b%d", i);
        assert_int_equal(store_txn_put(t, SLOT, k, 4, STORE_T_STRING, 0, v, strlen(v)), 0);
    }
    for (int i = 150; i < 160; i++) {
        int ex = 0;
        snprintf(k, sizeof k, "r%03d", i);
        assert_int_equal(store_txn_del(t, SLOT, k, 4, &ex), 0);
        assert_int_equal(ex, 1);
    }
    assert_int_equal(store_txn_commit(t), 0);
}

/* The record i as the scans must report it. */
static void want(char *out, size_t cap, int i) {
    snprintf(out, cap, "r%03d=%c%d", i, i >= 100 && i < 150 ? 'b' : 'a', i);
}

static void test_scan_forward(void **state) {
    fx *f = *state;
    load(f->s);
    seen *c = calloc(1, sizeof *c);
    assert_non_null(c);
    char w[32];
    /* [r120, r200), skip 5, max 40: r125..r149 (new values), then r160..r174 */
    long n = store_scan_range(f->s, SLOT, "r120", 4, "r200", 4, 5, 40, NOW, collect, c);
    assert_int_equal(n, 40);
    assert_int_equal(c->n, 40);
    for (int j = 0; j < 40; j++) {
        want(w, sizeof w, j < 25 ? 125 + j : 160 + (j - 25));
        assert_string_equal(c->rec[j], w);
    }
    /* the whole slot: 290 live records, in order */
    c->n = 0;
    n = store_scan_range(f->s, SLOT, "", 0, NULL, 0, 0, N, NOW, collect, c);
    assert_int_equal(n, N - 10);
    for (int j = 0, i = 0; i < N; i++) {
        if (i >= 150 && i < 160) continue;
        want(w, sizeof w, i);
        assert_string_equal(c->rec[j++], w);
    }
    free(c);
}

static void test_scan_reverse(void **state) {
    fx *f = *state;
    load(f->s);
    seen *c = calloc(1, sizeof *c);
    assert_non_null(c);
    char w[32];
    /* [r140, r170) descending, skip 2, max 15: r167..r160, then r149..r143 */
    long n = store_scan_range_rev(f->s, SLOT, "r140", 4, "r170", 4, 2, 15, NOW, collect, c);
    assert_int_equal(n, 15);
    for (int j = 0; j < 15; j++) {
        want(w, sizeof w, j < 8 ? 167 - j : 149 - (j - 8));
        assert_string_equal(c->rec[j], w);
    }
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scan_forward, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_reverse, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
