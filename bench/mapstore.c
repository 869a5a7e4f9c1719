/* bench/mapstore.c - map store write latency, SQLite against etcd, in one
 * run (issue 12: "move commit latency, etcd against SQLite").
 *
 * For each backend: a fresh map of P = 1024 partitions in the same temporary
 * directory (etcd: a single-member etcd started here, its data directory
 * there too; tests/unit/etcd_fixture.h), two nodes, a bootstrap placement,
 * then MOVES moves of the whole lifecycle, each timed per call:
 * move_create, three move_advance (COPYING, CATCHING_UP, FENCED),
 * move_commit and the advance to DONE. Prints one JSON object: per backend
 * and per call kind, the count, p50, p99 and max in microseconds, and the
 * ratio of the commit's p50 etcd / SQLite. Every call is checked; a failure
 * aborts the run with the map store's reason.
 *
 *   build/bench_mapstore [MOVES]      (default 200)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/etcd_fixture.h"
#include "coord/mapstore.h"
#include "coord/mapstore_etcd.h"
#include "core/clock.h"

enum { K_CREATE, K_ADVANCE, K_COMMIT, K_DONE, K_N };
static const char *const kind_name[K_N] = {"move_create", "move_advance", "move_commit",
                                           "move_done"};

typedef struct series {
    double *us;
    size_t n;
} series;

static void add(series *s, double us) {
    s->us = realloc(s->us, (s->n + 1) * sizeof *s->us);
    if (!s->us) exit(1);
    s->us[s->n++] = us;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(series *s, double q) {
    qsort(s->us, s->n, sizeof *s->us, cmp_d);
    size_t i = (size_t)(q * (double)(s->n - 1) + 0.5);
    return s->us[i];
}

static void must(mapstore *ms, int rc, const char *what) {
    if (rc == 0) return;
    fprintf(stderr, "bench_mapstore: %s: %s\n", what, mapstore_errmsg(ms));
    exit(1);
}

static double now_us(void) {
    return (double)keel_mono_us();
}

/* Runs the moves on ms; fills s[K_N]. */
static void run(mapstore *ms, int moves, series *s) {
    mapstore_node n;
    memset(&n, 0, sizeof n);
    snprintf(n.host, sizeof n.host, "127.0.0.1");
    n.capacity = 1;
    for (int i = 0; i < 2; i++) {
        snprintf(n.id, sizeof n.id, "n%d", i + 1);
        n.port = 7001 + i;
        must(ms, mapstore_node_upsert(ms, &n, 1), "node_upsert");
    }
    unsigned P = mapstore_partitions(ms);
    mapstore_placement *pl = calloc(P, sizeof *pl);
    for (unsigned p = 0; p < P; p++)
        pl[p] = (mapstore_placement){p, p % 2 ? "n2" : "n1"};
    must(ms, mapstore_partition_place(ms, pl, P, NULL), "partition_place");
    free(pl);
    for (int i = 0; i < moves; i++) {
        unsigned p = (unsigned)i % P;
        mapstore_partition part;
        must(ms, mapstore_partition_get(ms, p, &part), "partition_get");
        const char *to = strcmp(part.owner, "n1") ? "n1" : "n2";
        uint64_t id;
        double t = now_us();
        must(ms, mapstore_move_create(ms, p, to, "bench", 2, &id), "move_create");
        add(&s[K_CREATE], now_us() - t);
        for (int st = MAPSTORE_MOVE_COPYING; st <= MAPSTORE_MOVE_FENCED; st++) {
            t = now_us();
            must(ms, mapstore_move_advance(ms, id, (mapstore_move_state)st, 3, NULL), "advance");
            add(&s[K_ADVANCE], now_us() - t);
        }
        t = now_us();
        must(ms, mapstore_move_commit(ms, id, 4, NULL, NULL), "move_commit");
        add(&s[K_COMMIT], now_us() - t);
        t = now_us();
        must(ms, mapstore_move_advance(ms, id, MAPSTORE_MOVE_DONE, 5, NULL), "done");
        add(&s[K_DONE], now_us() - t);
    }
}

static void print_backend(const char *name, series *s, int last) {
    printf("  \"%s\": {", name);
    for (int k = 0; k < K_N; k++)
        printf("%s\"%s\": {\"n\": %zu, \"p50_us\": %.0f, \"p99_us\": %.0f, \"max_us\": %.0f}",
               k ? ", " : "", kind_name[k], s[k].n, pct(&s[k], 0.5), pct(&s[k], 0.99),
               pct(&s[k], 1.0));
    printf("}%s\n", last ? "" : ",");
}

int main(int argc, char **argv) {
    int moves = argc > 1 ? atoi(argv[1]) : 200;
    if (moves < 1) moves = 200;
    if (!etcd_fixture_available("bench_mapstore")) return 0;
    char dir[] = "/tmp/keel-bench-mapstore-XXXXXX", path[128], err[MAPSTORE_ERR_MAX];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/map.db", dir);
    series sq[K_N] = {{0}}, et[K_N] = {{0}};
    mapstore *ms = NULL;
    if (mapstore_sqlite_create(path, 1024, 1, &ms, err, sizeof err)) {
        fprintf(stderr, "bench_mapstore: %s\n", err);
        return 1;
    }
    run(ms, moves, sq);
    mapstore_free(ms);
    unlink(path);
    rmdir(dir);
    etcd_fixture fx;
    if (etcd_fixture_start(&fx)) {
        fprintf(stderr, "bench_mapstore: etcd did not start\n");
        return 1;
    }
    mapstore_etcd_config cfg = {fx.url, "/bench/", 5000};
    if (mapstore_etcd_create(&cfg, 1024, 1, &ms, err, sizeof err)) {
        fprintf(stderr, "bench_mapstore: %s\n", err);
        etcd_fixture_stop(&fx);
        return 1;
    }
    run(ms, moves, et);
    mapstore_free(ms);
    etcd_fixture_stop(&fx);
    printf("{\n  \"moves\": %d, \"partitions\": 1024,\n", moves);
    print_backend("sqlite", sq, 0);
    print_backend("etcd", et, 0);
    printf("  \"commit_p50_etcd_over_sqlite\": %.2f\n}\n",
           pct(&et[K_COMMIT], 0.5) / pct(&sq[K_COMMIT], 0.5));
    return 0;
}
