/* test-ptable.c - the JSON map, map installation and slot routing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/err.h"
#include "node/ptable.h"

static const char *two_nodes = "{\"version\":3,\"partitions\":16,"
                               "\"nodes\":[{\"id\":\"n1\",\"addr\":\"127.0.0.1:7001\"},{\"id\":"
                               "\"n2\",\"addr\":\"10.0.0.2:7002\"}],"
                               "\"owners\":[{\"first\":0,\"last\":7,\"node\":\"n1\",\"epoch\":4},{"
                               "\"first\":8,\"last\":14,\"node\":\"n2\"}]}";

/* A valid map parses with nodes, owners, epochs and version. */
static void map_parse_ok(void **st) {
    keel_map m;
    char err[200];
    assert_int_equal(keel_map_parse_json(two_nodes, &m, err, sizeof err), 0);
    assert_int_equal(m.version, 3);
    assert_int_equal(m.partitions, 16);
    assert_int_equal(m.nnodes, 2);
    assert_string_equal(m.nodes[1].host, "10.0.0.2");
    assert_int_equal(m.nodes[1].port, 7002);
    assert_int_equal(m.owner[0], 0);
    assert_int_equal(m.epoch[0], 4);
    assert_int_equal(m.owner[14], 1);
    assert_int_equal(m.epoch[14], 1);
    assert_int_equal(m.owner[15], -1);
    keel_map_close(&m);
}

/* Each malformed map is refused with a reason, never half-parsed. */
static void map_parse_bad(void **st) {
    const char *bad[] = {
        "not json",
        "{\"partitions\":100,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"}],\"owners\":[]}",
        "{\"partitions\":16,\"nodes\":[],\"owners\":[]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"nohost\"}],\"owners\":[]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:99999\"}],\"owners\":[]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"},{\"id\":\"a\",\"addr\":\"h:"
        "2\"}],\"owners\":[]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":0,"
        "\"last\":16,\"node\":\"a\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":0,"
        "\"node\":\"b\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":0,"
        "\"node\":\"a\"},{\"first\":0,\"node\":\"a\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":-1,"
        "\"node\":\"a\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        keel_map m;
        char err[200] = "";
        assert_int_equal(keel_map_parse_json(bad[i], &m, err, sizeof err), KEEL_EINVAL);
        assert_true(strlen(err) > 0);
        assert_null(m.owner);
    }
}

/* n1 serves its partitions, redirects n2's, and reports unowned as down. */
static void route_by_map(void **st) {
    keel_map m;
    char err[200];
    assert_int_equal(keel_map_parse_json(two_nodes, &m, err, sizeof err), 0);
    ptable *t = ptable_new(16, "n1");
    assert_int_equal(ptable_apply_map(t, &m), 0);
    route r;
    ptable_route(t, 0, &r);
    assert_int_equal(r.kind, ROUTE_SERVE);
    ptable_route(t, 8 * 1024, &r); /* partition 8 */
    assert_int_equal(r.kind, ROUTE_MOVED);
    assert_int_equal(r.partition, 8);
    assert_string_equal(r.owner->id, "n2");
    ptable_route(t, 16383, &r); /* partition 15: unowned */
    assert_int_equal(r.kind, ROUTE_DOWN);
    assert_int_equal(ptable_self_epoch(t), 4);
    assert_int_equal(ptable_state(t, 0), PART_SERVING);
    assert_int_equal(ptable_state(t, 8), PART_ABSENT);
    ptable_free(t);
}

/* An older map is refused; a newer one that takes partitions away retires them. */
static void apply_versions(void **st) {
    keel_map m;
    char err[200];
    ptable *t = ptable_new(16, "n1");
    assert_int_equal(keel_map_parse_json(two_nodes, &m, err, sizeof err), 0);
    assert_int_equal(ptable_apply_map(t, &m), 0);
    keel_map older;
    assert_int_equal(keel_map_init(&older, 16), 0);
    older.version = 2;
    assert_int_equal(ptable_apply_map(t, &older), KEEL_ERANGE);
    keel_map_close(&older);
    keel_map wrongp;
    assert_int_equal(keel_map_init(&wrongp, 32), 0);
    wrongp.version = 9;
    assert_int_equal(ptable_apply_map(t, &wrongp), KEEL_EINVAL);
    keel_map_close(&wrongp);
    keel_map newer;
    assert_int_equal(keel_map_init(&newer, 16), 0);
    newer.version = 4;
    assert_true(keel_map_add_node(&newer, "n1", "127.0.0.1", 7001) == 0);
    assert_true(keel_map_add_node(&newer, "n2", "127.0.0.1", 7002) == 1);
    for (unsigned p = 0; p < 16; p++)
        newer.owner[p] = p == 0 ? 0 : 1;
    assert_int_equal(ptable_apply_map(t, &newer), 0);
    assert_int_equal(ptable_state(t, 0), PART_SERVING);
    assert_int_equal(ptable_state(t, 1), PART_RETIRED);
    route r;
    ptable_route(t, 1024, &r);
    assert_int_equal(r.kind, ROUTE_MOVED);
    ptable_free(t);
}

/* Partition counts must be powers of two from 16 to 16384. */
static void partition_counts(void **st) {
    assert_true(keel_map_is_pow2_partitions(16));
    assert_true(keel_map_is_pow2_partitions(16384));
    assert_false(keel_map_is_pow2_partitions(8));
    assert_false(keel_map_is_pow2_partitions(1000));
    assert_false(keel_map_is_pow2_partitions(32768));
    assert_null(ptable_new(100, "x"));
    assert_int_equal(keel_slot_partition(16383, 1024), 1023);
    assert_int_equal(keel_slot_partition(16, 1024), 1);
}

/* A map with replicas: n2 follows partitions 0-7 (in the ISR) and lags on
 * 8 (not in it). The table keeps those roles, but a follower does not
 * serve yet (issue 11 step 3): its slots still go MOVED to the leader. */
static void follower_roles_kept_not_served(void **st) {
    const char *txt =
        "{\"version\":5,\"partitions\":16,\"nodes\":[{\"id\":\"n1\",\"addr\":\"h:1\"},"
        "{\"id\":\"n2\",\"addr\":\"h:2\"}],\"owners\":["
        "{\"first\":0,\"last\":7,\"node\":\"n1\",\"epoch\":3,\"replicas\":[\"n1\",\"n2\"],"
        "\"isr\":[\"n1\",\"n2\"],\"leader_epoch\":2,\"partition_epoch\":6},"
        "{\"first\":8,\"node\":\"n1\",\"epoch\":3,\"replicas\":[\"n1\",\"n2\"],"
        "\"isr\":[\"n1\"]},{\"first\":9,\"last\":15,\"node\":\"n2\"}]}";
    keel_map m;
    char err[200];
    assert_int_equal(keel_map_parse_json(txt, &m, err, sizeof err), 0);
    ptable *t = ptable_new(16, "n2");
    assert_int_equal(ptable_apply_map(t, &m), 0);
    assert_int_equal(ptable_role(t, 0), MAP_ROLE_FOLLOWER);
    assert_int_equal(ptable_role(t, 8), MAP_ROLE_LAGGING);
    assert_int_equal(ptable_role(t, 9), MAP_ROLE_LEADER);
    assert_int_equal(ptable_role(t, 99), MAP_ROLE_NONE);
    map_rep r;
    keel_map_get_rep(ptable_map(t), 3, &r);
    assert_int_equal(r.leader_epoch, 2);
    assert_int_equal(r.partition_epoch, 6);
    route rt;
    ptable_route(t, 0, &rt);
    assert_int_equal(rt.kind, ROUTE_MOVED);
    assert_string_equal(rt.owner->id, "n1");
    assert_int_equal(ptable_state(t, 0), PART_ABSENT);
    ptable_route(t, 9 * 1024, &rt);
    assert_int_equal(rt.kind, ROUTE_SERVE);
    ptable_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(map_parse_ok),     cmocka_unit_test(map_parse_bad),
        cmocka_unit_test(route_by_map),     cmocka_unit_test(apply_versions),
        cmocka_unit_test(partition_counts), cmocka_unit_test(follower_roles_kept_not_served),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
