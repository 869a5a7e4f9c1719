/* test-mapstore-etcd.c - what only the etcd map store does (the shared
 * contract runs in test-mapstore's "etcd" group): refusing a prefix that is
 * not empty or holds another cluster, refusing what is not a Keel map, the
 * key layout, a whole-P bootstrap placement in one transaction, a second
 * writer detected, writes guarded by the leader key (KEEL_ENOTLEADER once it
 * is another coordinator's), and outcome unknown: a commit whose answer is lost is
 * settled as applied, one that never reached etcd as not applied (and sent
 * again), and one
 * whose fence is lost too returns KEEL_EUNKNOWN and the handle reloads what
 * etcd really holds. A real etcd is started for the run (etcd_fixture.h);
 * without the binary every case is skipped with a notice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "etcd_fixture.h"

#include "coord/etcd_client.h"
#include "coord/mapstore.h"
#include "coord/mapstore_etcd.h"
#include "core/err.h"
#include "core/failpoint.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1700000000000LL

static etcd_fixture etcd;
static int have_etcd;

typedef struct fx {
    char prefix[64];
    mapstore_etcd_config cfg;
    mapstore *ms;
} fx;

static int setup(void **state) {
    static unsigned seq;
    fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    snprintf(f->prefix, sizeof f->prefix, "/test-mapstore-etcd/%d-%u/", (int)getpid(), ++seq);
    f->cfg = (mapstore_etcd_config){etcd.url, f->prefix, 3000};
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    failpoint_clear_all();
    mapstore_free(f->ms);
    free(f);
    return 0;
}

#define NEED_ETCD()                                                                                \
    do {                                                                                           \
        if (!have_etcd) skip();                                                                    \
    } while (0)

static void create(fx *f, unsigned partitions) {
    char err[MAPSTORE_ERR_MAX] = "";
    int rc = mapstore_etcd_create(&f->cfg, partitions, NOW, &f->ms, err, sizeof err);
    if (rc) fprintf(stderr, "create: %s\n", err);
    assert_int_equal(rc, 0);
}

static mapstore *open_ok(fx *f) {
    char err[MAPSTORE_ERR_MAX] = "";
    mapstore *ms = NULL;
    int rc = mapstore_etcd_open(&f->cfg, NULL, &ms, err, sizeof err);
    if (rc) fprintf(stderr, "open: %s\n", err);
    assert_int_equal(rc, 0);
    return ms;
}

static void add_node(mapstore *ms, const char *id, int port) {
    mapstore_node n;
    memset(&n, 0, sizeof n);
    snprintf(n.id, sizeof n.id, "%s", id);
    snprintf(n.host, sizeof n.host, "127.0.0.1");
    n.port = port;
    n.capacity = 1;
    assert_int_equal(mapstore_node_upsert(ms, &n, NOW), 0);
}

/* A raw put with the client, bypassing the map store; returns the
 * revision it was written at. */
static int64_t raw_put(const char *key, const char *value) {
    etcd_client *c = NULL;
    char err[ETCD_ERR_MAX];
    assert_int_equal(etcd_client_new(etcd.url, 3000, &c, err, sizeof err), 0);
    cJSON *b = cJSON_CreateObject(), *r = NULL;
    char *k = etcd_b64(key, strlen(key)), *v = etcd_b64(value, strlen(value));
    cJSON_AddStringToObject(b, "key", k);
    cJSON_AddStringToObject(b, "value", v);
    free(k);
    free(v);
    assert_int_equal(etcd_post_json(c, "/v3/kv/put", b, &r), 0);
    int64_t rev = etcd_revision(r);
    cJSON_Delete(b);
    cJSON_Delete(r);
    etcd_client_free(c);
    return rev;
}

static void raw_del(const char *key) {
    etcd_client *c = NULL;
    char err[ETCD_ERR_MAX], body[256];
    assert_int_equal(etcd_client_new(etcd.url, 3000, &c, err, sizeof err), 0);
    char *k = etcd_b64(key, strlen(key));
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", k);
    free(k);
    cJSON *r = NULL;
    assert_int_equal(etcd_post(c, "/v3/kv/deleterange", body, &r), 0);
    cJSON_Delete(r);
    etcd_client_free(c);
}

/* The keys under prefix, as text, one per line, malloc'd. */
static char *raw_keys(const char *prefix, int *count) {
    etcd_client *c = NULL;
    char err[ETCD_ERR_MAX];
    assert_int_equal(etcd_client_new(etcd.url, 3000, &c, err, sizeof err), 0);
    cJSON *b = cJSON_CreateObject(), *r = NULL;
    char *end = etcd_prefix_end(prefix);
    char *k = etcd_b64(prefix, strlen(prefix)), *e = etcd_b64(end, strlen(end));
    cJSON_AddStringToObject(b, "key", k);
    cJSON_AddStringToObject(b, "range_end", e);
    cJSON_AddTrueToObject(b, "keys_only");
    free(k), free(e), free(end);
    assert_int_equal(etcd_post_json(c, "/v3/kv/range", b, &r), 0);
    cJSON_Delete(b);
    size_t cap = 1, len = 0;
    char *out = calloc(1, 1);
    const cJSON *kv;
    *count = 0;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(r, "kvs")) {
        char *t;
        size_t n;
        assert_int_equal(
            etcd_unb64(cJSON_GetObjectItemCaseSensitive(kv, "key")->valuestring, &t, &n), 0);
        out = realloc(out, cap += n + 1);
        memcpy(out + len, t, n);
        len += n;
        out[len++] = '\n';
        out[len] = 0;
        free(t);
        (*count)++;
    }
    cJSON_Delete(r);
    etcd_client_free(c);
    return out;
}

/* ---- Create and open ----------------------------------------------------------- */

static void test_bad_config_refused(void **state) {
    fx *f = *state;
    NEED_ETCD();
    char err[MAPSTORE_ERR_MAX] = "";
    mapstore *ms = (mapstore *)1;
    mapstore_etcd_config c = {etcd.url, "/no-slash", 0};
    assert_int_equal(mapstore_etcd_create(&c, 16, NOW, &ms, err, sizeof err), KEEL_EINVAL);
    assert_null(ms);
    assert_non_null(strstr(err, "ending in '/'"));
    c.prefix = "/has space/";
    assert_int_equal(mapstore_etcd_open(&c, NULL, &ms, err, sizeof err), KEEL_EINVAL);
    assert_int_equal(mapstore_etcd_create(&f->cfg, 24, NOW, &ms, err, sizeof err), KEEL_EINVAL);
    c = (mapstore_etcd_config){"ftp://x", f->prefix, 0};
    assert_int_equal(mapstore_etcd_open(&c, NULL, &ms, err, sizeof err), KEEL_EINVAL);
}

/* Nothing there: not found, and open creates nothing. */
static void test_open_empty_prefix_not_found(void **state) {
    fx *f = *state;
    NEED_ETCD();
    char err[MAPSTORE_ERR_MAX] = "";
    mapstore *ms = NULL;
    assert_int_equal(mapstore_etcd_open(&f->cfg, NULL, &ms, err, sizeof err), KEEL_ENOTFOUND);
    assert_non_null(strstr(err, f->prefix));
    int n;
    free(raw_keys(f->prefix, &n));
    assert_int_equal(n, 0);
}

/* The layout: meta, one parts/ key per 256 partitions, one key per node. */
static void test_layout(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 1024);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_setting_set(f->ms, "paused", "1", NOW), 0);
    int n;
    char *keys = raw_keys(f->prefix, &n);
    assert_int_equal(n, 1 + 4 + 1 + 1);
    char want[512];
    snprintf(want, sizeof want,
             "%smeta\n%snode/n1\n%sparts/000\n%sparts/001\n%sparts/002\n%sparts/003\n%sset/"
             "paused\n",
             f->prefix, f->prefix, f->prefix, f->prefix, f->prefix, f->prefix, f->prefix);
    assert_string_equal(keys, want);
    free(keys);
}

/* A prefix with any key in it, or with another cluster, is refused, and
 * left as it was. */
static void test_create_refuses_nonempty_prefix(void **state) {
    fx *f = *state;
    NEED_ETCD();
    char key[128], err[MAPSTORE_ERR_MAX] = "";
    snprintf(key, sizeof key, "%sstray", f->prefix);
    raw_put(key, "not a map");
    mapstore *ms = NULL;
    assert_int_equal(mapstore_etcd_create(&f->cfg, 16, NOW, &ms, err, sizeof err), KEEL_EEXIST);
    assert_non_null(strstr(err, "not empty"));
    assert_int_equal(mapstore_etcd_open(&f->cfg, NULL, &ms, err, sizeof err), KEEL_ENOTFOUND);
    int n;
    free(raw_keys(f->prefix, &n));
    assert_int_equal(n, 1);
}

static void test_create_refuses_other_cluster(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    char id[MAPSTORE_CLUSTER_ID_MAX + 1], err[MAPSTORE_ERR_MAX] = "";
    snprintf(id, sizeof id, "%s", mapstore_cluster_id(f->ms));
    mapstore *ms = NULL;
    assert_int_equal(mapstore_etcd_create(&f->cfg, 64, NOW, &ms, err, sizeof err), KEEL_EEXIST);
    assert_non_null(strstr(err, id)); /* names the cluster that is there */
    mapstore_free(f->ms);
    f->ms = open_ok(f);
    assert_string_equal(mapstore_cluster_id(f->ms), id);
    assert_int_equal(mapstore_partitions(f->ms), 16);
}

/* A meta key that is not a Keel map, or of a future format. */
static void test_open_refuses_foreign_meta(void **state) {
    fx *f = *state;
    NEED_ETCD();
    char key[128], err[MAPSTORE_ERR_MAX] = "";
    mapstore *ms = NULL;
    snprintf(key, sizeof key, "%smeta", f->prefix);
    raw_put(key, "{\"hello\":1}");
    assert_int_equal(mapstore_etcd_open(&f->cfg, NULL, &ms, err, sizeof err), KEEL_EWRONGTYPE);
    raw_put(key, "{\"kind\":\"keel-map\",\"format\":99}");
    assert_int_equal(mapstore_etcd_open(&f->cfg, NULL, &ms, err, sizeof err), KEEL_ERANGE);
    assert_null(ms);
}

/* A missing or malformed partition chunk is corruption, not an empty map. */
static void test_open_refuses_damaged_chunk(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 512);
    char key[128], err[MAPSTORE_ERR_MAX] = "";
    snprintf(key, sizeof key, "%sparts/001", f->prefix);
    raw_put(key, "[[\"\",\"0\",0]]"); /* 1 partition where 256 belong */
    mapstore *ms = NULL;
    assert_int_equal(mapstore_etcd_open(&f->cfg, NULL, &ms, err, sizeof err), KEEL_ECORRUPT);
    assert_non_null(strstr(err, "parts/001"));
}

/* P = 16384 with 64-byte owner ids: a whole bootstrap placement is one
 * transaction of 65 operations, within etcd's limits. */
static void test_place_all_in_one_txn(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16384);
    char id[KEEL_ID_MAX + 1];
    memset(id, 'n', KEEL_ID_MAX);
    id[KEEL_ID_MAX] = 0;
    add_node(f->ms, id, 7001);
    mapstore_placement *pl = calloc(16384, sizeof *pl);
    for (unsigned p = 0; p < 16384; p++)
        pl[p] = (mapstore_placement){p, id};
    uint64_t v = 0;
    mapstore_etcd_stats a, b;
    mapstore_etcd_get_stats(f->ms, &a);
    assert_int_equal(mapstore_partition_place(f->ms, pl, 16384, &v), 0);
    mapstore_etcd_get_stats(f->ms, &b);
    assert_int_equal(b.commits, a.commits + 1);
    free(pl);
    mapstore_free(f->ms);
    f->ms = open_ok(f);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 16383, &p), 0);
    assert_string_equal(p.owner, id);
    assert_int_equal(p.epoch, 1);
    assert_int_equal(mapstore_version(f->ms), v);
}

/* Two handles on one prefix: the one whose view is stale is refused
 * (KEEL_EAGAIN), reloads, and its next write applies on the fresh state. */
static void test_second_writer_detected(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    mapstore *other = open_ok(f);
    add_node(f->ms, "n1", 7001);
    mapstore_node n;
    memset(&n, 0, sizeof n);
    snprintf(n.id, sizeof n.id, "n2");
    snprintf(n.host, sizeof n.host, "127.0.0.1");
    n.port = 7002;
    assert_int_equal(mapstore_node_upsert(other, &n, NOW), KEEL_EAGAIN);
    assert_non_null(strstr(mapstore_errmsg(other), "another writer"));
    assert_int_equal(mapstore_node_get(other, "n1", &n), 0); /* reloaded */
    add_node(other, "n2", 7002);
    assert_int_equal(mapstore_version(other), 2);
    mapstore_free(other);
}

/* Writes guarded by the leader key: accepted while the key is the one
 * created at the guard's revision; once it is deleted and re-created (another
 * leader), refused with KEEL_ENOTLEADER, changing nothing. */
static void test_leader_guard(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    char key[128];
    snprintf(key, sizeof key, "%sleader", f->prefix);
    int64_t rev = raw_put(key, "{\"id\":\"c1\"}");
    assert_int_equal(mapstore_etcd_set_guard(f->ms, rev), 0);
    add_node(f->ms, "n1", 7001);
    uint64_t v = mapstore_version(f->ms), t = mapstore_term(f->ms);
    raw_del(key);
    raw_put(key, "{\"id\":\"c2\"}");
    assert_int_equal(mapstore_bump_term(f->ms, NULL), KEEL_ENOTLEADER);
    assert_non_null(strstr(mapstore_errmsg(f->ms), "not the leader"));
    mapstore_node n;
    memset(&n, 0, sizeof n);
    snprintf(n.id, sizeof n.id, "n2");
    snprintf(n.host, sizeof n.host, "127.0.0.1");
    n.port = 7002;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_ENOTLEADER);
    mapstore_free(f->ms);
    f->ms = open_ok(f);
    assert_int_equal(mapstore_version(f->ms), v);
    assert_int_equal(mapstore_term(f->ms), t);
    assert_int_equal(mapstore_node_get(f->ms, "n2", &n), KEEL_ENOTFOUND);
}

/* ---- Outcome unknown ------------------------------------------------------------- */

/* The answer of a commit that applied is lost: the fence is refused, meta
 * carries the commit's write id, and the call returns 0. */
static void test_lost_answer_settled_applied(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(failpoint_set("mapstore.etcd.lose_reply", "1*error", NULL, 0), 0);
    uint64_t e = 0, v = 0;
    assert_int_equal(mapstore_partition_set_owner(f->ms, 3, "n1", &e, &v), 0);
    mapstore_etcd_stats st;
    mapstore_etcd_get_stats(f->ms, &st);
    assert_int_equal(st.settled_applied, 1);
    assert_int_equal(st.settled_void, 0);
    assert_int_equal(e, 1);
    add_node(f->ms, "n2", 7002); /* the handle's revision is right: it can write on */
    mapstore_free(f->ms);
    f->ms = open_ok(f);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 3, &p), 0);
    assert_string_equal(p.owner, "n1");
    assert_int_equal(mapstore_version(f->ms), v + 1);
}

/* A commit that never reached etcd: the fence applies, so it never can,
 * and the write is sent once more and applies (once). Dropped twice, the
 * call returns KEEL_EIO and nothing changed. */
static void test_dropped_commit_fenced_off(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    uint64_t v0 = mapstore_version(f->ms);
    assert_int_equal(failpoint_set("mapstore.etcd.drop", "1*error", NULL, 0), 0);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 3, "n1", NULL, NULL), 0);
    mapstore_etcd_stats st;
    mapstore_etcd_get_stats(f->ms, &st);
    assert_int_equal(st.settled_void, 1);
    assert_int_equal(st.retries, 1);
    assert_int_equal(failpoint_set("mapstore.etcd.drop", "2*error", NULL, 0), 0);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 4, "n1", NULL, NULL), KEEL_EIO);
    assert_non_null(strstr(mapstore_errmsg(f->ms), "nothing changed"));
    mapstore_etcd_get_stats(f->ms, &st);
    assert_int_equal(st.settled_void, 3);
    assert_int_equal(st.retries, 2);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 4, &p), 0);
    assert_string_equal(p.owner, "");
    assert_int_equal(mapstore_partition_set_owner(f->ms, 4, "n1", NULL, NULL), 0); /* retry */
    mapstore_free(f->ms);
    f->ms = open_ok(f);
    assert_int_equal(mapstore_partition_get(f->ms, 3, &p), 0);
    assert_string_equal(p.owner, "n1");
    assert_int_equal(p.epoch, 1); /* applied once, not twice */
    assert_int_equal(mapstore_partition_get(f->ms, 4, &p), 0);
    assert_string_equal(p.owner, "n1");
    assert_int_equal(p.epoch, 1);
    assert_int_equal(mapstore_version(f->ms), v0 + 2);
}

/* The commit's answer and the fence are both lost: KEEL_EUNKNOWN, and the
 * next read reloads what etcd holds (here: the commit applied). A move
 * commit so settled is found COMMITTED, exactly once. */
static void test_unsettled_is_unknown_then_reloaded(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    add_node(f->ms, "n2", 7002);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 5, "n1", NULL, NULL), 0);
    uint64_t id = 0;
    assert_int_equal(mapstore_move_create(f->ms, 5, "n2", "test", NOW, &id), 0);
    for (int s = MAPSTORE_MOVE_COPYING; s <= MAPSTORE_MOVE_FENCED; s++)
        assert_int_equal(mapstore_move_advance(f->ms, id, (mapstore_move_state)s, NOW, NULL), 0);
    assert_int_equal(failpoint_set("mapstore.etcd.move_commit.lose_reply", "1*error", NULL, 0), 0);
    assert_int_equal(failpoint_set("mapstore.etcd.fence.drop", "1*error", NULL, 0), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW + 1, NULL, NULL), KEEL_EUNKNOWN);
    mapstore_etcd_stats st;
    mapstore_etcd_get_stats(f->ms, &st);
    assert_int_equal(st.unknown, 1);
    uint64_t reloads = st.reloads;
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.state, MAPSTORE_MOVE_COMMITTED);
    mapstore_etcd_get_stats(f->ms, &st);
    assert_int_equal(st.reloads, reloads + 1);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 5, &p), 0);
    assert_string_equal(p.owner, "n2");
    assert_int_equal(p.epoch, 2);
    /* A retry of the commit is refused (it is not FENCED any more). */
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW + 2, NULL, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_DONE, NOW + 3, NULL), 0);
}

/* The same with the commit dropped: the reload finds the move still FENCED,
 * and a retry commits it once. */
static void test_unsettled_dropped_then_retried(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    add_node(f->ms, "n2", 7002);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 5, "n1", NULL, NULL), 0);
    uint64_t id = 0, e = 0;
    assert_int_equal(mapstore_move_create(f->ms, 5, "n2", "test", NOW, &id), 0);
    for (int s = MAPSTORE_MOVE_COPYING; s <= MAPSTORE_MOVE_FENCED; s++)
        assert_int_equal(mapstore_move_advance(f->ms, id, (mapstore_move_state)s, NOW, NULL), 0);
    assert_int_equal(failpoint_set("mapstore.etcd.move_commit.drop", "1*error", NULL, 0), 0);
    assert_int_equal(failpoint_set("mapstore.etcd.fence.drop", "1*error", NULL, 0), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW + 1, NULL, NULL), KEEL_EUNKNOWN);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.state, MAPSTORE_MOVE_FENCED);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW + 2, &e, NULL), 0);
    assert_int_equal(e, 2);
    mapstore_free(f->ms);
    f->ms = open_ok(f);
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.state, MAPSTORE_MOVE_COMMITTED);
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_COMMITTED], NOW + 2);
}

/* etcd unreachable: a write fails with KEEL_EIO (nothing was sent) and
 * reads are still served from memory. */
static void test_unreachable_etcd(void **state) {
    fx *f = *state;
    NEED_ETCD();
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    mapstore_free(f->ms);
    f->ms = NULL;
    char urls[160], err[MAPSTORE_ERR_MAX];
    /* the first URL is dead: the open fails over to the live one */
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d,%s", etcd_fixture_port(), etcd.url);
    mapstore_etcd_config c = {urls, f->prefix, 1000};
    assert_int_equal(mapstore_etcd_open(&c, NULL, &f->ms, err, sizeof err), 0);
    mapstore_free(f->ms);
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d", etcd_fixture_port());
    c.urls = urls;
    f->ms = NULL;
    assert_int_equal(mapstore_etcd_open(&c, NULL, &f->ms, err, sizeof err), KEEL_EIO);
}

static int start_etcd(void **state) {
    (void)state;
    if (!etcd_fixture_available("test-mapstore-etcd")) return 0;
    if (etcd_fixture_start(&etcd)) {
        fprintf(stderr, "etcd is installed but did not start\n");
        return -1;
    }
    have_etcd = 1;
    return 0;
}

static int stop_etcd(void **state) {
    (void)state;
    etcd_fixture_stop(&etcd);
    return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_bad_config_refused),
        T(test_open_empty_prefix_not_found),
        T(test_layout),
        T(test_create_refuses_nonempty_prefix),
        T(test_create_refuses_other_cluster),
        T(test_open_refuses_foreign_meta),
        T(test_open_refuses_damaged_chunk),
        T(test_place_all_in_one_txn),
        T(test_second_writer_detected),
        T(test_leader_guard),
        T(test_lost_answer_settled_applied),
        T(test_dropped_commit_fenced_off),
        T(test_unsettled_is_unknown_then_reloaded),
        T(test_unsettled_dropped_then_retried),
        T(test_unreachable_etcd),
    };
    return cmocka_run_group_tests(tests, start_etcd, stop_etcd);
}
