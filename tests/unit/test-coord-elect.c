/* test-coord-elect.c - unit tests for src/coord/coord_elect against a real
 * etcd (etcd_fixture.h): exactly one of two candidates leads, the standby
 * names the leader and its address, a leader that resigns hands over at
 * once, and a leader whose lease is revoked behind its back stops counting
 * as leading within its deadline. Skipped with a notice without an etcd
 * binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "etcd_fixture.h"

#include "coord/coord_elect.h"
#include "coord/etcd_client.h"
#include "core/clock.h"
#include "core/err.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static etcd_fixture etcd;
static int have_etcd;

#define NEED_ETCD()                                                                                \
    do {                                                                                           \
        if (!have_etcd) skip();                                                                    \
    } while (0)

static coord_elect *candidate(const char *prefix, const char *id, const char *addr) {
    coord_elect_config c = {etcd.url, prefix, id, addr, 2};
    coord_elect *e = NULL;
    char err[256] = "";
    int rc = coord_elect_start(&c, &e, err, sizeof err);
    if (rc) fprintf(stderr, "coord_elect_start: %s\n", err);
    assert_int_equal(rc, 0);
    return e;
}

/* Waits up to ms for e's view to name leader (any when NULL). */
static void wait_named(coord_elect *e, const char *leader, int ms) {
    coord_elect_view v;
    int64_t end = (int64_t)(keel_mono_us() / 1000) + ms;
    do {
        coord_elect_get(e, &v);
        if (v.leader_id[0] && (!leader || !strcmp(v.leader_id, leader))) return;
        usleep(20000);
    } while ((int64_t)(keel_mono_us() / 1000) < end);
    fail_msg("no leader %s named within %d ms (have '%s')", leader ? leader : "", ms, v.leader_id);
}

static void test_bad_config(void **state) {
    (void)state;
    coord_elect *e = (coord_elect *)1;
    char err[256];
    coord_elect_config c = {"http://127.0.0.1:1", "/p/", "bad id", "h:1", 0};
    assert_int_equal(coord_elect_start(&c, &e, err, sizeof err), KEEL_EINVAL);
    assert_null(e);
    c.id = "c1";
    c.ttl_s = 1;
    assert_int_equal(coord_elect_start(&c, &e, err, sizeof err), KEEL_EINVAL);
    coord_elect_stop(NULL);
}

static void test_one_leads_other_waits(void **state) {
    (void)state;
    NEED_ETCD();
    coord_elect *a = candidate("/elect-1/", "c1", "127.0.0.1:7001");
    assert_int_equal(coord_elect_wait(a, 5000), 1);
    coord_elect *b = candidate("/elect-1/", "c2", "127.0.0.1:7002");
    wait_named(b, "c1", 3000);
    coord_elect_view va, vb;
    coord_elect_get(a, &va);
    coord_elect_get(b, &vb);
    assert_true(va.leading);
    assert_true(va.create_rev > 0);
    assert_true(va.deadline_ms > (int64_t)(keel_mono_us() / 1000));
    assert_false(vb.leading);
    assert_string_equal(vb.leader_addr, "127.0.0.1:7001");
    assert_int_equal(coord_elect_wait(b, 800), 0); /* still a standby well past a keepalive */
    /* a resigns (revokes its lease): b leads well before a TTL would pass */
    int64_t t0 = (int64_t)(keel_mono_us() / 1000);
    coord_elect_stop(a);
    assert_int_equal(coord_elect_wait(b, 1500), 1);
    assert_true((int64_t)(keel_mono_us() / 1000) - t0 < 1500);
    coord_elect_get(b, &vb);
    assert_true(vb.create_rev > va.create_rev);
    assert_string_equal(vb.leader_id, "c2");
    coord_elect_stop(b);
}

/* The lease revoked by someone else (the leader key goes with it): the
 * leader hears TTL 0 at its next keepalive (at most TTL/3 later) and stops
 * leading on that key. */
static void test_revoked_lease_stops_leading(void **state) {
    (void)state;
    NEED_ETCD();
    coord_elect *a = candidate("/elect-2/", "c1", "127.0.0.1:7001");
    assert_int_equal(coord_elect_wait(a, 5000), 1);
    coord_elect_view v0;
    coord_elect_get(a, &v0);
    /* find the lease on the leader key and revoke it directly */
    etcd_client *c = NULL;
    char err[ETCD_ERR_MAX], body[256];
    assert_int_equal(etcd_client_new(etcd.url, 2000, &c, err, sizeof err), 0);
    char *k = etcd_b64("/elect-2/leader", 15);
    snprintf(body, sizeof body, "{\"key\":\"%s\"}", k);
    free(k);
    cJSON *r = NULL;
    assert_int_equal(etcd_post(c, "/v3/kv/range", body, &r), 0);
    int64_t lease =
        etcd_json_i64(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "kvs"), 0), "lease");
    cJSON_Delete(r);
    assert_true(lease != 0);
    snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)lease);
    assert_int_equal(etcd_post(c, "/v3/lease/revoke", body, &r), 0);
    cJSON_Delete(r);
    etcd_client_free(c);
    int64_t end = (int64_t)(keel_mono_us() / 1000) + 2000;
    coord_elect_view v;
    do {
        coord_elect_get(a, &v);
        if (!v.leading || v.create_rev != v0.create_rev) break;
        usleep(5000);
    } while ((int64_t)(keel_mono_us() / 1000) < end);
    /* it stopped leading on the revoked key (it may already have won a new
     * key, a new leadership with a later revision) */
    assert_true(!v.leading || v.create_rev > v0.create_rev);
    coord_elect_stop(a);
}

static int start_etcd(void **state) {
    (void)state;
    if (!etcd_fixture_available("test-coord-elect")) return 0;
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
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_one_leads_other_waits),
        cmocka_unit_test(test_revoked_lease_stops_leading),
    };
    return cmocka_run_group_tests(tests, start_etcd, stop_etcd);
}
