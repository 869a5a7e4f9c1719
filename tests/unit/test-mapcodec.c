/* test-mapcodec.c - unit tests for src/core/id and src/core/mapcodec: the
 * one id rule and the one map codec, written by the coordinator and parsed
 * by every node (issue 10, defect 3). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/id.h"
#include "core/mapcodec.h"

#include <stdio.h>
#include <string.h>

/* The id rule is [A-Za-z0-9._-]{1,64}, nothing else. */
static void test_id_rule(void **state) {
    (void)state;
    char longid[66];
    memset(longid, 'a', sizeof longid);
    longid[65] = 0;
    assert_true(keel_id_validz("n1"));
    assert_true(keel_id_validz("coordinator"));
    assert_true(keel_id_validz("A-b_c.9"));
    assert_true(keel_id_valid(longid, 64));
    assert_false(keel_id_validz(longid));
    const char *bad[] = {"",    "a\"b", "a\\b",     "a b", "a:b", "a,b", "a@b",
                         "a/b", "a\nb", "\xc3\xa9", "a'b", "a{b", "a}b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_false(keel_id_validz(bad[i]));
    assert_false(keel_id_valid("a\0b", 3));
    assert_false(keel_id_validz(NULL));
    assert_true(keel_host_validz("127.0.0.1"));
    assert_true(keel_host_validz("::1"));
    assert_true(keel_host_validz("[fe80::1]"));
    assert_true(keel_host_validz("node-1.example.com"));
    assert_false(keel_host_validz("h\"x"));
    assert_false(keel_host_validz("h x"));
    assert_false(keel_host_validz(""));
}

static void two_node_map(keel_map *m) {
    assert_int_equal(keel_map_init(m, 16), 0);
    assert_int_equal(keel_map_add_node(m, "n1", "127.0.0.1", 7001), 0);
    assert_int_equal(keel_map_add_node(m, "n.2", "::1", 7002), 1);
    for (unsigned p = 0; p < 16; p++) {
        m->owner[p] = p < 5 ? 0 : p < 12 ? 1 : -1;
        m->epoch[p] = p < 3 ? 7 : 9;
    }
    m->version = 42;
}

/* What the writer writes, the parser reads back unchanged; the text keeps
 * the format nodes parse today. */
static void test_roundtrip(void **state) {
    (void)state;
    keel_map m, r;
    two_node_map(&m);
    kbuf b;
    kbuf_init(&b);
    assert_int_equal(keel_map_write_json(&m, 5, &b), 0);
    assert_int_equal(kbuf_append(&b, "", 1), 0);
    assert_string_equal(b.p, "{\"version\":42,\"term\":5,\"partitions\":16,\"nodes\":["
                             "{\"id\":\"n1\",\"addr\":\"127.0.0.1:7001\"},"
                             "{\"id\":\"n.2\",\"addr\":\"::1:7002\"}],\"owners\":["
                             "{\"first\":0,\"last\":2,\"node\":\"n1\",\"epoch\":7},"
                             "{\"first\":3,\"last\":4,\"node\":\"n1\",\"epoch\":9},"
                             "{\"first\":5,\"last\":11,\"node\":\"n.2\",\"epoch\":9}]}");
    char err[128];
    assert_int_equal(keel_map_parse_json(b.p, &r, err, sizeof err), 0);
    assert_int_equal(r.version, 42);
    assert_int_equal(r.term, 5);
    assert_int_equal(r.nnodes, 2);
    assert_string_equal(r.nodes[1].host, "::1");
    assert_int_equal(r.nodes[1].port, 7002);
    for (unsigned p = 0; p < 16; p++) {
        assert_int_equal(r.owner[p], m.owner[p]);
        if (m.owner[p] >= 0) assert_int_equal(r.epoch[p], m.epoch[p]);
    }
    keel_map_close(&r);
    keel_map_close(&m);
    kbuf_close(&b);
}

/* Regression: the coordinator printed ids between quotes unescaped, and the
 * id rules allowed '"' and '\\': one node named a"b made the map invalid JSON
 * and every node refused every later map. Such ids cannot enter a map now. */
static void test_quote_in_id_refused(void **state) {
    (void)state;
    keel_map m;
    assert_int_equal(keel_map_init(&m, 16), 0);
    assert_int_equal(keel_map_add_node(&m, "a\"b", "127.0.0.1", 1), KEEL_EINVAL);
    assert_int_equal(keel_map_add_node(&m, "a\\b", "127.0.0.1", 1), KEEL_EINVAL);
    assert_int_equal(keel_map_add_node(&m, "ok", "h\"x", 1), KEEL_EINVAL);
    assert_int_equal(keel_map_add_node(&m, "ok", "h", 0), KEEL_EINVAL);
    assert_int_equal(m.nnodes, 0);
    keel_map_close(&m);
    char err[128];
    keel_map r;
    const char *txt = "{\"partitions\":16,\"nodes\":[{\"id\":\"a\\\"b\",\"addr\":\"h:1\"}],"
                      "\"owners\":[]}";
    assert_int_equal(keel_map_parse_json(txt, &r, err, sizeof err), KEEL_EINVAL);
    assert_non_null(strstr(err, "id rule"));
}

/* Unknown fields (e.g. the per-node "liveness" and "membership" to come) are
 * ignored at every level. */
static void test_unknown_fields_ignored(void **state) {
    (void)state;
    keel_map r;
    char err[128];
    const char *txt =
        "{\"version\":3,\"future\":{\"x\":[1,2]},\"partitions\":16,\"nodes\":[{\"id\":\"n1\","
        "\"addr\":\"h:1\",\"liveness\":\"ALIVE\",\"membership\":\"ACTIVE\"}],\"owners\":[{"
        "\"first\":"
        "0,\"last\":15,\"node\":\"n1\",\"epoch\":2,\"why\":\"x\"}]}";
    assert_int_equal(keel_map_parse_json(txt, &r, err, sizeof err), 0);
    assert_int_equal(r.version, 3);
    assert_int_equal(r.owner[15], 0);
    keel_map_close(&r);
}

/* A node's liveness and membership (issue 15) round-trip; absent fields
 * (older writers) read as ""; a value that is not an upper-case name is
 * refused. */
static void test_node_states_roundtrip(void **state) {
    (void)state;
    keel_map m, r;
    kbuf b;
    char err[128];
    kbuf_init(&b);
    assert_int_equal(keel_map_init(&m, 16), 0);
    map_node n = {
        .id = "n1", .host = "h", .port = 7, .liveness = "SUSPECT", .membership = "DRAINING"};
    assert_int_equal(keel_map_add(&m, &n), 0);
    assert_int_equal(keel_map_add_node(&m, "n2", "h", 8), 1);
    assert_int_equal(keel_map_write_json(&m, 1, &b), 0);
    kbuf_append(&b, "", 1);
    assert_int_equal(keel_map_parse_json(b.p, &r, err, sizeof err), 0);
    assert_string_equal(r.nodes[0].liveness, "SUSPECT");
    assert_string_equal(r.nodes[0].membership, "DRAINING");
    assert_string_equal(r.nodes[1].liveness, "");
    assert_null(strstr(b.p, "\"n2\",\"addr\":\"h:8\",\"liveness\""));
    keel_map_close(&r);
    keel_map_close(&m);
    kbuf_close(&b);
    const char *bad = "{\"version\":1,\"partitions\":16,\"nodes\":[{\"id\":\"n1\",\"addr\":\"h:1\","
                      "\"liveness\":\"up\\\"x\"}],\"owners\":[]}";
    assert_int_equal(keel_map_parse_json(bad, &r, err, sizeof err), KEEL_EINVAL);
    assert_non_null(strstr(err, "liveness"));
}

/* A node's incarnation (issue 11, C3) round-trips; absent reads as "" and
 * is not written; a value that is not 1..16 lower-case hex digits is
 * refused with a reason. */
static void test_node_incarnation_roundtrip(void **state) {
    (void)state;
    keel_map m, r;
    kbuf b;
    char err[128];
    kbuf_init(&b);
    assert_int_equal(keel_map_init(&m, 16), 0);
    map_node n = {.id = "n1", .host = "h", .port = 7, .incarnation = "0123456789abcdef"};
    assert_int_equal(keel_map_add(&m, &n), 0);
    assert_int_equal(keel_map_add_node(&m, "n2", "h", 8), 1);
    assert_int_equal(keel_map_write_json(&m, 1, &b), 0);
    kbuf_append(&b, "", 1);
    assert_non_null(strstr(b.p, "\"incarnation\":\"0123456789abcdef\""));
    assert_int_equal(keel_map_parse_json(b.p, &r, err, sizeof err), 0);
    assert_string_equal(r.nodes[0].incarnation, "0123456789abcdef");
    assert_string_equal(r.nodes[1].incarnation, "");
    assert_null(strstr(strstr(b.p, "\"n2\""), "incarnation"));
    keel_map_close(&r);
    keel_map_close(&m);
    kbuf_close(&b);
    const char *bad[] = {"\"\"", "\"0123456789abcdef0\"", "\"ABC\"", "\"12g\"", "12"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char txt[256];
        snprintf(txt, sizeof txt,
                 "{\"partitions\":16,\"nodes\":[{\"id\":\"n1\",\"addr\":\"h:1\","
                 "\"incarnation\":%s}],\"owners\":[]}",
                 bad[i]);
        assert_int_equal(keel_map_parse_json(txt, &r, err, sizeof err), KEEL_EINVAL);
        assert_non_null(strstr(err, "incarnation"));
    }
}

/* Bad numbers, ports, ranges and shapes are refused with a reason. */
static void test_parse_refusals(void **state) {
    (void)state;
    const char *bad[] = {
        "[]",
        "{\"partitions\":17,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[]}",
        "{\"partitions\":16.5,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[]}",
        "{\"version\":-1,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[]}",
        "{\"nodes\":[{\"id\":\"n\",\"addr\":\"h:7000abc\"}],\"owners\":[]}",
        "{\"nodes\":[{\"id\":\"n\",\"addr\":\"h:+7\"}],\"owners\":[]}",
        "{\"nodes\":[{\"id\":\"n\",\"addr\":\"h:70000\"}],\"owners\":[]}",
        "{\"nodes\":[{\"id\":\"n\",\"addr\":\"h\"}],\"owners\":[]}",
        "{\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"},{\"id\":\"n\",\"addr\":\"h:2\"}],\"owners\":[]"
        "}",
        "{\"nodes\":[],\"owners\":[]}",
        "{\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":3,"
        "\"last\":16,\"node\":\"n\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":0,"
        "\"node\":\"m\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":0,"
        "\"node\":\"n\"},{\"first\":0,\"node\":\"n\"}]}",
        "{\"partitions\":16,\"nodes\":[{\"id\":\"n\",\"addr\":\"h:1\"}],\"owners\":[{\"first\":0,"
        "\"node\":\"n\",\"epoch\":-2}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        keel_map r;
        char err[128] = "";
        int rc = keel_map_parse_json(bad[i], &r, err, sizeof err);
        if (rc != KEEL_EINVAL) fprintf(stderr, "accepted: %s\n", bad[i]);
        assert_int_equal(rc, KEEL_EINVAL);
        assert_true(err[0] != 0);
        assert_null(r.nodes);
    }
}

/* ---- Replicas (issue 11 step 1) ---- */

/* Three nodes; partitions 0-3 RF 3 (a, b, c) with c lagging, 4-7 RF 1 at
 * the defaults, the rest unowned. */
static void rep_map(keel_map *m) {
    assert_int_equal(keel_map_init(m, 16), 0);
    assert_int_equal(keel_map_add_node(m, "a", "h", 1), 0);
    assert_int_equal(keel_map_add_node(m, "b", "h", 2), 1);
    assert_int_equal(keel_map_add_node(m, "c", "h", 3), 2);
    for (unsigned p = 0; p < 8; p++) {
        m->owner[p] = p < 4 ? 0 : 1;
        m->epoch[p] = 5;
    }
    map_rep r = {.n = 3, .isr = 3, .node = {0, 1, 2}, .leader_epoch = 4, .partition_epoch = 9};
    for (unsigned p = 0; p < 4; p++)
        assert_int_equal(keel_map_set_rep(m, p, &r, NULL, 0), 0);
    m->version = 3;
}

/* Replicas, ISR and both epochs round-trip; RF 1 entries at their defaults
 * are written without them; roles follow from the lists. */
static void test_replicas_roundtrip(void **state) {
    (void)state;
    keel_map m, r;
    kbuf b;
    char err[128];
    rep_map(&m);
    kbuf_init(&b);
    assert_int_equal(keel_map_write_json(&m, 2, &b), 0);
    assert_int_equal(kbuf_append(&b, "", 1), 0);
    assert_string_equal(b.p, "{\"version\":3,\"term\":2,\"partitions\":16,\"nodes\":["
                             "{\"id\":\"a\",\"addr\":\"h:1\"},{\"id\":\"b\",\"addr\":\"h:2\"},"
                             "{\"id\":\"c\",\"addr\":\"h:3\"}],\"owners\":["
                             "{\"first\":0,\"last\":3,\"node\":\"a\",\"epoch\":5,"
                             "\"replicas\":[\"a\",\"b\",\"c\"],\"isr\":[\"a\",\"b\"],"
                             "\"leader_epoch\":4,\"partition_epoch\":9},"
                             "{\"first\":4,\"last\":7,\"node\":\"b\",\"epoch\":5}]}");
    assert_int_equal(keel_map_parse_json(b.p, &r, err, sizeof err), 0);
    for (unsigned p = 0; p < 16; p++) {
        map_rep x, y;
        keel_map_get_rep(&m, p, &x);
        keel_map_get_rep(&r, p, &y);
        assert_memory_equal(&x, &y, sizeof x);
        assert_int_equal(r.owner[p], m.owner[p]);
    }
    map_rep x;
    keel_map_get_rep(&r, 2, &x);
    assert_int_equal(x.n, 3);
    assert_int_equal(x.leader_epoch, 4);
    assert_int_equal(x.partition_epoch, 9);
    assert_int_equal(keel_map_role(&r, 2, 0), MAP_ROLE_LEADER);
    assert_int_equal(keel_map_role(&r, 2, 1), MAP_ROLE_FOLLOWER);
    assert_int_equal(keel_map_role(&r, 2, 2), MAP_ROLE_LAGGING);
    assert_int_equal(keel_map_role(&r, 5, 1), MAP_ROLE_LEADER);
    assert_int_equal(keel_map_role(&r, 5, 0), MAP_ROLE_NONE);
    assert_int_equal(keel_map_role(&r, 12, 0), MAP_ROLE_NONE);
    assert_string_equal(keel_map_role_name(MAP_ROLE_LAGGING), "lagging");
    keel_map_close(&r);
    keel_map_close(&m);
    kbuf_close(&b);
}

/* A map written before replication (no replica fields) reads as RF 1:
 * replicas = isr = [owner], leader epoch = partition epoch = epoch. So does
 * a map whose owners were set directly (owner[] and epoch[] only). */
static void test_old_format_reads_as_rf1(void **state) {
    (void)state;
    keel_map r;
    char err[128];
    const char *old = "{\"version\":7,\"partitions\":16,\"nodes\":[{\"id\":\"n1\",\"addr\":"
                      "\"h:1\"},{\"id\":\"n2\",\"addr\":\"h:2\"}],\"owners\":[{\"first\":0,"
                      "\"last\":9,\"node\":\"n2\",\"epoch\":12},{\"first\":10,\"node\":\"n1\"}]}";
    assert_int_equal(keel_map_parse_json(old, &r, err, sizeof err), 0);
    for (unsigned p = 0; p < 16; p++) {
        map_rep x;
        keel_map_get_rep(&r, p, &x);
        if (p > 10) {
            assert_int_equal(x.n, 0);
            continue;
        }
        assert_int_equal(x.n, 1);
        assert_int_equal(x.isr, 1);
        assert_int_equal(x.node[0], p < 10 ? 1 : 0);
        assert_int_equal(x.leader_epoch, p < 10 ? 12 : 1);
        assert_int_equal(x.partition_epoch, p < 10 ? 12 : 1);
    }
    keel_map_close(&r);
    keel_map m;
    two_node_map(&m);
    map_rep x;
    keel_map_get_rep(&m, 6, &x);
    assert_int_equal(x.n, 1);
    assert_int_equal(x.node[0], 1);
    assert_int_equal(x.leader_epoch, 9);
    assert_int_equal(keel_map_role(&m, 6, 1), MAP_ROLE_LEADER);
    keel_map_close(&m);
}

/* Every broken replica list, ISR or epoch order is refused with a reason. */
static void test_replica_refusals(void **state) {
    (void)state;
    static const char head[] = "{\"partitions\":16,\"nodes\":[{\"id\":\"a\",\"addr\":\"h:1\"},"
                               "{\"id\":\"b\",\"addr\":\"h:2\"},{\"id\":\"c\",\"addr\":\"h:3\"}],"
                               "\"owners\":[{\"first\":0,\"node\":\"a\",\"epoch\":5,";
    static const struct {
        const char *tail, *why;
    } bad[] = {
        {"\"replicas\":[\"b\",\"a\"]}]}", "first"},       /* leader not first */
        {"\"replicas\":[\"a\",\"b\",\"a\"]}]}", "twice"}, /* duplicate replica */
        {"\"replicas\":[\"a\",\"x\"]}]}", "replicas"},    /* unlisted replica */
        {"\"replicas\":[]}]}", "first"},                  /* no replica */
        {"\"replicas\":\"a\"}]}", "replicas"},            /* not an array */
        {"\"replicas\":[\"a\",1]}]}", "replicas"},        /* not a string */
        {"\"replicas\":[\"a\",\"b\",\"c\",\"a\",\"b\",\"c\",\"a\",\"b\"]}]}",
         "replicas"}, /* RF 8 */
        {"\"replicas\":[\"a\",\"b\"],\"isr\":[\"a\",\"c\"]}]}", "not a replica"},
        {"\"replicas\":[\"a\",\"b\"],\"isr\":[\"b\"]}]}", "leader"},
        {"\"replicas\":[\"a\",\"b\"],\"isr\":[]}]}", "isr"},
        {"\"replicas\":[\"a\",\"b\"],\"isr\":[\"a\",\"a\"]}]}", "twice"},
        {"\"isr\":[\"a\",\"b\"]}]}", "not a replica"}, /* ISR beyond the default [a] */
        {"\"leader_epoch\":6}]}", "leader_epoch <= epoch"},
        {"\"partition_epoch\":4}]}", "leader_epoch <= epoch"},
        {"\"partition_epoch\":-1}]}", "non-negative"},
        {"\"leader_epoch\":1.5}]}", "non-negative"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char txt[512], err[128] = "";
        keel_map r;
        snprintf(txt, sizeof txt, "%s%s", head, bad[i].tail);
        int rc = keel_map_parse_json(txt, &r, err, sizeof err);
        if (rc != KEEL_EINVAL || !strstr(err, bad[i].why))
            fprintf(stderr, "case %zu: rc %d err \"%s\"\n", i, rc, err);
        assert_int_equal(rc, KEEL_EINVAL);
        assert_non_null(strstr(err, bad[i].why));
        assert_null(r.nodes);
    }
    /* The same rules through keel_map_set_rep; a refusal changes nothing. */
    keel_map m;
    rep_map(&m);
    map_rep before;
    keel_map_get_rep(&m, 0, &before);
    const map_rep refused[] = {
        {.n = 0, .isr = 1},
        {.n = 8, .isr = 1, .leader_epoch = 5, .partition_epoch = 5},
        {.n = 2, .isr = 1, .node = {0, 0}, .leader_epoch = 5, .partition_epoch = 5},
        {.n = 2, .isr = 1, .node = {0, 3}, .leader_epoch = 5, .partition_epoch = 5},
        {.n = 2, .isr = 2, .node = {0, 1}, .leader_epoch = 5, .partition_epoch = 5},
        {.n = 2, .isr = 5, .node = {0, 1}, .leader_epoch = 5, .partition_epoch = 5},
        {.n = 2, .isr = 3, .node = {0, 1}, .leader_epoch = 6, .partition_epoch = 6},
        {.n = 2, .isr = 3, .node = {0, 1}, .leader_epoch = 5, .partition_epoch = 4},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char err[128] = "";
        assert_int_equal(keel_map_set_rep(&m, 0, &refused[i], err, sizeof err), KEEL_EINVAL);
        assert_true(err[0] != 0);
    }
    map_rep after;
    keel_map_get_rep(&m, 0, &after);
    assert_memory_equal(&before, &after, sizeof before);
    keel_map_close(&m);
}

/* "min_insync" and "lease_ms" round-trip, are absent when zero, and are
 * refused out of range. */
static void test_replication_settings_roundtrip(void **state) {
    (void)state;
    keel_map m, r;
    kbuf b;
    char err[128];
    two_node_map(&m);
    kbuf_init(&b);
    assert_int_equal(keel_map_write_json(&m, 1, &b), 0);
    assert_int_equal(kbuf_append(&b, "", 1), 0);
    assert_null(strstr(b.p, "min_insync"));
    assert_null(strstr(b.p, "lease_ms"));
    m.min_insync = 2;
    m.lease_ms = 2000;
    b.len = 0;
    assert_int_equal(keel_map_write_json(&m, 1, &b), 0);
    assert_int_equal(kbuf_append(&b, "", 1), 0);
    assert_non_null(strstr(b.p, "\"min_insync\":2"));
    assert_non_null(strstr(b.p, "\"lease_ms\":2000"));
    assert_int_equal(keel_map_parse_json(b.p, &r, err, sizeof err), 0);
    assert_int_equal(r.min_insync, 2);
    assert_int_equal(r.lease_ms, 2000);
    keel_map_close(&r);
    static const char *bad[] = {
        "{\"partitions\":16,\"min_insync\":0}", "{\"partitions\":16,\"min_insync\":8}",
        "{\"partitions\":16,\"lease_ms\":99}", "{\"partitions\":16,\"lease_ms\":60001}",
        "{\"partitions\":16,\"lease_ms\":\"2000\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(keel_map_parse_json(bad[i], &r, err, sizeof err), KEEL_EINVAL);
        assert_non_null(strstr(err, "min_insync"));
    }
    keel_map_close(&m);
    kbuf_close(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_rule),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_quote_in_id_refused),
        cmocka_unit_test(test_unknown_fields_ignored),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_node_states_roundtrip),
        cmocka_unit_test(test_node_incarnation_roundtrip),
        cmocka_unit_test(test_replicas_roundtrip),
        cmocka_unit_test(test_old_format_reads_as_rf1),
        cmocka_unit_test(test_replica_refusals),
        cmocka_unit_test(test_replication_settings_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
