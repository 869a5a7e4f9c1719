/* test-etcd-client.c - unit tests for src/coord/etcd_client: base64, the
 * JSON helpers and txn builders, argument checks, and requests against a
 * real etcd started for the run (etcd_fixture.h): put and range, a
 * create-if-absent txn, failing over from a dead endpoint, no endpoint, an
 * endpoint that never answers (the call returns within its deadline), and
 * the two test faults (a dropped request did not apply; a lost answer
 * did). Without an etcd binary the etcd cases are skipped with a notice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "etcd_fixture.h"

#include "coord/etcd_client.h"
#include "core/err.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static etcd_fixture etcd;
static int have_etcd;

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static etcd_client *client(const char *urls, int timeout_ms) {
    etcd_client *c = NULL;
    char err[ETCD_ERR_MAX] = "";
    int rc = etcd_client_new(urls, timeout_ms, &c, err, sizeof err);
    if (rc) fprintf(stderr, "etcd_client_new: %s\n", err);
    assert_int_equal(rc, 0);
    return c;
}

#define NEED_ETCD()                                                                                \
    do {                                                                                           \
        if (!have_etcd) skip();                                                                    \
    } while (0)

/* The value of key (text) in etcd, malloc'd, or NULL when absent. */
static char *get_value(etcd_client *c, const char *key) {
    char *k = etcd_b64(key, strlen(key)), body[512];
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", k);
    free(k);
    cJSON *r = NULL;
    assert_int_equal(etcd_post(c, "/v3/kv/range", body, &r), 0);
    cJSON *kvs = cJSON_GetObjectItemCaseSensitive(r, "kvs");
    char *out = NULL;
    size_t n;
    if (cJSON_GetArraySize(kvs) == 1) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(kvs, 0), "value");
        assert_int_equal(etcd_unb64(cJSON_IsString(v) ? v->valuestring : "", &out, &n), 0);
    }
    cJSON_Delete(r);
    return out;
}

/* Puts key = value by a one-op txn with an optional create-if-absent
 * compare; returns the txn's "succeeded" (the gateway omits false). */
static int txn_put(etcd_client *c, const char *key, const char *value, int if_absent, int fault,
                   int *rc_out) {
    cJSON *body = cJSON_CreateObject();
    cJSON *cmp = cJSON_AddArrayToObject(body, "compare");
    cJSON *ok = cJSON_AddArrayToObject(body, "success");
    if (if_absent) assert_non_null(etcd_cmp(cmp, key, "CREATE", "EQUAL", 0));
    assert_non_null(etcd_op_put(ok, key, value, 0));
    char *txt = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    cJSON *r = NULL;
    int rc = etcd_post_ex(c, "/v3/kv/txn", txt, fault, &r);
    free(txt);
    if (rc_out) *rc_out = rc;
    int succeeded = rc == 0 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
    if (rc == 0) assert_true(etcd_revision(r) > 0);
    cJSON_Delete(r);
    return succeeded;
}

/* ---- Helpers (no etcd) ------------------------------------------------------ */

static void test_b64_roundtrip(void **state) {
    (void)state;
    const char *cases[] = {"", "a", "ab", "abc", "abcd", "/keel/c1/meta", "\xff\x00\x01"};
    size_t lens[] = {0, 1, 2, 3, 4, 13, 3};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *e = etcd_b64(cases[i], lens[i]);
        assert_non_null(e);
        assert_int_equal(strlen(e), 4 * ((lens[i] + 2) / 3));
        char *d = NULL;
        size_t n = 99;
        assert_int_equal(etcd_unb64(e, &d, &n), 0);
        assert_int_equal(n, lens[i]);
        assert_memory_equal(d, cases[i], n);
        assert_int_equal(d[n], 0);
        free(e);
        free(d);
    }
    char *e = etcd_b64("foo", 3);
    assert_string_equal(e, "Zm9v");
    free(e);
    char *d;
    size_t n;
    assert_int_equal(etcd_unb64("Zm9", &d, &n), KEEL_EPROTO);  /* not a multiple of 4 */
    assert_int_equal(etcd_unb64("Z!9v", &d, &n), KEEL_EPROTO); /* not base64 */
}

static void test_json_helpers(void **state) {
    (void)state;
    cJSON *o = cJSON_Parse("{\"a\":\"9223372036854775807\",\"b\":42,\"header\":"
                           "{\"revision\":\"17\"}}");
    assert_non_null(o);
    assert_int_equal(etcd_json_i64(o, "a"), INT64_MAX); /* strings: no double rounding */
    assert_int_equal(etcd_json_i64(o, "b"), 42);
    assert_int_equal(etcd_json_i64(o, "missing"), 0); /* the gateway omits zeros */
    assert_int_equal(etcd_revision(o), 17);
    cJSON_Delete(o);
    char *e = etcd_prefix_end("/keel/c1/");
    assert_string_equal(e, "/keel/c10");
    free(e);
}

static void test_builders(void **state) {
    (void)state;
    cJSON *arr = cJSON_CreateArray();
    assert_non_null(etcd_cmp(arr, "k", "MOD", "EQUAL", 5));
    assert_non_null(etcd_op_put(arr, "k", "v", 7));
    assert_non_null(etcd_op_del(arr, "k"));
    char *txt = cJSON_PrintUnformatted(arr);
    assert_string_equal(txt,
                        "[{\"key\":\"aw==\",\"target\":\"MOD\",\"result\":\"EQUAL\","
                        "\"mod_revision\":\"5\"},"
                        "{\"request_put\":{\"key\":\"aw==\",\"value\":\"dg==\",\"lease\":\"7\"}},"
                        "{\"request_delete_range\":{\"key\":\"aw==\"}}]");
    free(txt);
    cJSON_Delete(arr);
}

static void test_new_refuses_bad_arguments(void **state) {
    (void)state;
    etcd_client *c = (etcd_client *)1;
    char err[ETCD_ERR_MAX] = "";
    assert_int_equal(etcd_client_new("", 1000, &c, err, sizeof err), KEEL_EINVAL);
    assert_null(c);
    assert_int_equal(etcd_client_new("https://x:1", 1000, &c, err, sizeof err), KEEL_EINVAL);
    assert_non_null(strstr(err, "http://"));
    assert_int_equal(etcd_client_new("http://x:1", 50, &c, err, sizeof err), KEEL_EINVAL);
    assert_int_equal(
        etcd_client_new("http://a:1,http://a:2,http://a:3,http://a:4,http://a:5,http://a:6,"
                        "http://a:7,http://a:8,http://a:9",
                        1000, &c, err, sizeof err),
        KEEL_EINVAL);
    assert_non_null(strstr(err, "more than"));
    c = client("http://127.0.0.1:1/", 1000); /* a trailing slash is dropped */
    assert_string_equal(etcd_client_endpoint(c), "http://127.0.0.1:1");
    etcd_client_free(c);
    etcd_client_free(NULL);
}

/* Nothing listens: nothing was sent, so the answer is KEEL_EIO, not unknown. */
static void test_no_endpoint_is_eio(void **state) {
    (void)state;
    char urls[64];
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d", etcd_fixture_port());
    etcd_client *c = client(urls, 1000);
    cJSON *r = (cJSON *)1;
    assert_int_equal(etcd_post(c, "/v3/kv/range", "{}", &r), KEEL_EIO);
    assert_null(r);
    assert_true(strlen(etcd_client_errmsg(c)) > 0);
    etcd_client_free(c);
}

/* An endpoint that accepts connections and never answers: the call returns
 * KEEL_EUNKNOWN (the request was sent) within its deadline. */
static void test_silent_endpoint_times_out(void **state) {
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 8), 0); /* the kernel completes connects; no one reads */
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char urls[64];
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d", ntohs(a.sin_port));
    etcd_client *c = client(urls, 300);
    cJSON *r = NULL;
    int64_t t0 = mono_ms();
    assert_int_equal(etcd_post(c, "/v3/kv/range", "{}", &r), KEEL_EUNKNOWN);
    int64_t took = mono_ms() - t0;
    assert_true(took >= 250);
    assert_true(took <= 300 + 250 + 200); /* timeout + the caller's slack + scheduling */
    etcd_client_free(c);
    close(fd);
}

/* ---- Against etcd ----------------------------------------------------------- */

static void test_put_and_range(void **state) {
    (void)state;
    NEED_ETCD();
    etcd_client *c = client(etcd.url, 2000);
    assert_true(txn_put(c, "/t/a", "value with \"quotes\" and \xc3\xa9", 0, 0, NULL));
    char *v = get_value(c, "/t/a");
    assert_non_null(v);
    assert_string_equal(v, "value with \"quotes\" and \xc3\xa9");
    free(v);
    assert_null(get_value(c, "/t/absent"));
    assert_string_equal(etcd_client_endpoint(c), etcd.url);
    etcd_client_free(c);
}

/* A create-if-absent compare succeeds once; the second txn does nothing. */
static void test_txn_compare(void **state) {
    (void)state;
    NEED_ETCD();
    etcd_client *c = client(etcd.url, 2000);
    assert_true(txn_put(c, "/t/once", "first", 1, 0, NULL));
    assert_false(txn_put(c, "/t/once", "second", 1, 0, NULL));
    char *v = get_value(c, "/t/once");
    assert_string_equal(v, "first");
    free(v);
    etcd_client_free(c);
}

/* A dead first endpoint costs one refused connect; the next one answers. */
static void test_fails_over_dead_endpoint(void **state) {
    (void)state;
    NEED_ETCD();
    char urls[160];
    snprintf(urls, sizeof urls, "http://127.0.0.1:%d,%s", etcd_fixture_port(), etcd.url);
    etcd_client *c = client(urls, 2000);
    assert_true(txn_put(c, "/t/failover", "x", 0, 0, NULL));
    assert_string_equal(etcd_client_endpoint(c), etcd.url);
    etcd_client_free(c);
}

/* The test faults: a dropped request returns KEEL_EUNKNOWN and did not
 * apply; a request whose answer is lost returns KEEL_EUNKNOWN and did. */
static void test_faults(void **state) {
    (void)state;
    NEED_ETCD();
    etcd_client *c = client(etcd.url, 2000);
    int rc = 0;
    assert_false(txn_put(c, "/t/dropped", "x", 0, ETCD_FAULT_DROP, &rc));
    assert_int_equal(rc, KEEL_EUNKNOWN);
    assert_null(get_value(c, "/t/dropped"));
    assert_false(txn_put(c, "/t/lost", "y", 0, ETCD_FAULT_LOSE_REPLY, &rc));
    assert_int_equal(rc, KEEL_EUNKNOWN);
    char *v = get_value(c, "/t/lost");
    assert_non_null(v);
    assert_string_equal(v, "y");
    free(v);
    etcd_client_free(c);
}

/* A 4xx answer (a malformed request) did nothing: KEEL_EIO with the reason. */
static void test_bad_request_is_eio(void **state) {
    (void)state;
    NEED_ETCD();
    etcd_client *c = client(etcd.url, 2000);
    cJSON *r = NULL;
    assert_int_equal(etcd_post(c, "/v3/kv/range", "{\"key\":", &r), KEEL_EIO);
    assert_non_null(strstr(etcd_client_errmsg(c), "HTTP 4"));
    etcd_client_free(c);
}

static int start_etcd(void **state) {
    (void)state;
    if (!etcd_fixture_available("test-etcd-client etcd cases")) return 0;
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_roundtrip),
        cmocka_unit_test(test_json_helpers),
        cmocka_unit_test(test_builders),
        cmocka_unit_test(test_new_refuses_bad_arguments),
        cmocka_unit_test(test_no_endpoint_is_eio),
        cmocka_unit_test(test_silent_endpoint_times_out),
        cmocka_unit_test(test_put_and_range),
        cmocka_unit_test(test_txn_compare),
        cmocka_unit_test(test_fails_over_dead_endpoint),
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_bad_request_is_eio),
    };
    return cmocka_run_group_tests(tests, start_etcd, stop_etcd);
}
