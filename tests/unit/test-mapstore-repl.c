/* test-mapstore-repl.c - the map store's replication fields (issue 11
 * step 1): schema 3 and its in-place migration from real version 2 and
 * version 1 files built with the old SQL, the RF 1 reading of old data on
 * both backends, and ISR / replica-set changes by compare-and-set on the
 * partition epoch, on both backends.
 *
 * Like test-mapstore, the backend-neutral cases run in group "sqlite" and
 * again in group "etcd" (a throwaway etcd, etcd_fixture.h; skipped with a
 * notice when there is no etcd binary). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tmpdir.h"

#include "etcd_fixture.h"

#include "coord/etcd_client.h"
#include "coord/mapstore.h"
#include "coord/mapstore_etcd.h"
#include "core/err.h"

#include <uv.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOW 1700000000000LL

typedef struct fx {
    char dir[TMPDIR_MAX];
    char path[128];
    char prefix[64];
    mapstore *ms;
} fx;

static int use_etcd;
static etcd_fixture etcd;

static mapstore_etcd_config etcd_cfg(const fx *f) {
    mapstore_etcd_config c = {etcd.url, f->prefix, 5000};
    return c;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (tmpdir_make(f->dir, "test-msrepl")) return -1;
    snprintf(f->path, sizeof f->path, "%s/map.db", f->dir);
    static unsigned seq;
    snprintf(f->prefix, sizeof f->prefix, "/test-msrepl/%d-%u/", (int)getpid(), ++seq);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    mapstore_free(f->ms);
    tmpdir_remove(f->dir);
    free(f);
    return 0;
}

static void create(fx *f, unsigned partitions) {
    char err[MAPSTORE_ERR_MAX];
    mapstore_etcd_config c = etcd_cfg(f);
    int rc = use_etcd ? mapstore_etcd_create(&c, partitions, NOW, &f->ms, err, sizeof err)
                      : mapstore_sqlite_create(f->path, partitions, NOW, &f->ms, err, sizeof err);
    if (rc) fprintf(stderr, "create: %s\n", err);
    assert_int_equal(rc, 0);
}

static void reopen(fx *f) {
    char err[MAPSTORE_ERR_MAX];
    mapstore_free(f->ms);
    f->ms = NULL;
    mapstore_etcd_config c = etcd_cfg(f);
    int rc = use_etcd ? mapstore_etcd_open(&c, NULL, &f->ms, err, sizeof err)
                      : mapstore_sqlite_open(f->path, NULL, &f->ms, err, sizeof err);
    if (rc) fprintf(stderr, "open: %s\n", err);
    assert_int_equal(rc, 0);
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

static void raw_sql(const char *path, const char *sql) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc) fprintf(stderr, "raw sql: %s\n", msg ? msg : "?");
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
}

static int64_t raw_int(const char *path, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* Partition p reads as RF 1 on `owner` at epoch e: replicas = isr =
 * [owner], leader epoch = partition epoch = e (unowned: no replicas). */
static void assert_rf1(mapstore *ms, unsigned p, const char *owner, uint64_t e) {
    mapstore_partition x;
    assert_int_equal(mapstore_partition_get(ms, p, &x), 0);
    assert_string_equal(x.owner, owner);
    assert_int_equal(x.epoch, e);
    assert_int_equal(x.leader_epoch, e);
    assert_int_equal(x.partition_epoch, e);
    if (!owner[0]) {
        assert_int_equal(x.nreplicas, 0);
        assert_int_equal(x.isr, 0);
        return;
    }
    assert_int_equal(x.nreplicas, 1);
    assert_string_equal(x.replicas[0], owner);
    assert_int_equal(x.isr, 1);
}

/* ---- Old files, built with the old SQL ---------------------------------- */

/* The version 2 DDL as Keel's schema-2 build ran it (src/coord/
 * mapstore_sqlite.c before schema 3), with the node table named by NODES. */
#define OLD_CLUSTER_AND_REST(nodes_ddl, version)                                                   \
    "PRAGMA application_id = 1262830924;"                                                          \
    "PRAGMA user_version = " version ";"                                                           \
    "CREATE TABLE cluster ("                                                                       \
    " singleton INTEGER PRIMARY KEY CHECK (singleton = 1),"                                        \
    " cluster_id TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 64),"                       \
    " partitions INTEGER NOT NULL CHECK (partitions BETWEEN 16 AND 16384"                          \
    "  AND (partitions & (partitions - 1)) = 0),"                                                  \
    " term INTEGER NOT NULL CHECK (term >= 0),"                                                    \
    " map_version INTEGER NOT NULL CHECK (map_version >= 0),"                                      \
    " created_at_ms INTEGER NOT NULL) STRICT;" nodes_ddl "CREATE TABLE partitions ("               \
    " id INTEGER PRIMARY KEY CHECK (id >= 0),"                                                     \
    " owner TEXT REFERENCES nodes(id),"                                                            \
    " epoch INTEGER NOT NULL CHECK (epoch >= 0),"                                                  \
    " pinned INTEGER NOT NULL CHECK (pinned IN (0, 1))) STRICT;"                                   \
    "CREATE INDEX partitions_owner ON partitions(owner);"                                          \
    "CREATE TABLE moves ("                                                                         \
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"                                                       \
    " partition INTEGER NOT NULL REFERENCES partitions(id),"                                       \
    " from_node TEXT NOT NULL REFERENCES nodes(id),"                                               \
    " to_node TEXT NOT NULL REFERENCES nodes(id),"                                                 \
    " state TEXT NOT NULL CHECK (state IN ('PLANNED','COPYING','CATCHING_UP','FENCED',"            \
    "  'COMMITTED','DONE','ABORTED')),"                                                            \
    " epoch INTEGER NOT NULL CHECK (epoch >= 0),"                                                  \
    " bytes INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0),"                                        \
    " reason TEXT NOT NULL,"                                                                       \
    " abort_reason TEXT NOT NULL DEFAULT '',"                                                      \
    " planned_at_ms INTEGER NOT NULL,"                                                             \
    " copying_at_ms INTEGER NOT NULL DEFAULT 0,"                                                   \
    " catching_up_at_ms INTEGER NOT NULL DEFAULT 0,"                                               \
    " fenced_at_ms INTEGER NOT NULL DEFAULT 0,"                                                    \
    " committed_at_ms INTEGER NOT NULL DEFAULT 0,"                                                 \
    " done_at_ms INTEGER NOT NULL DEFAULT 0,"                                                      \
    " aborted_at_ms INTEGER NOT NULL DEFAULT 0,"                                                   \
    " CHECK (from_node <> to_node)) STRICT;"                                                       \
    "CREATE UNIQUE INDEX moves_one_in_flight ON moves(partition)"                                  \
    " WHERE state IN ('PLANNED','COPYING','CATCHING_UP','FENCED');"                                \
    "CREATE INDEX moves_unfinished ON moves(id) WHERE state NOT IN ('DONE','ABORTED');"            \
    "CREATE TABLE settings ("                                                                      \
    " name TEXT PRIMARY KEY NOT NULL,"                                                             \
    " value TEXT NOT NULL,"                                                                        \
    " set_at_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;"

static const char v2_ddl[] = OLD_CLUSTER_AND_REST(
    "CREATE TABLE nodes ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " host TEXT NOT NULL,"
    " port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
    " rack TEXT NOT NULL,"
    " capacity REAL NOT NULL CHECK (capacity >= 0),"
    " liveness TEXT NOT NULL CHECK (liveness IN ('UP','SUSPECT','DOWN')),"
    " membership TEXT NOT NULL CHECK (membership IN ('ACTIVE','DRAINING','REMOVED')),"
    " registered_at_ms INTEGER NOT NULL,"
    " last_heartbeat_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;",
    "2");

static const char v1_ddl[] = OLD_CLUSTER_AND_REST(
    "CREATE TABLE nodes ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " host TEXT NOT NULL,"
    " port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
    " rack TEXT NOT NULL,"
    " capacity REAL NOT NULL CHECK (capacity >= 0),"
    " state TEXT NOT NULL CHECK (state IN ('UP','SUSPECT','DOWN','DRAINING','REMOVED')),"
    " registered_at_ms INTEGER NOT NULL,"
    " last_heartbeat_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;",
    "1");

/* The same data in both: 16 partitions, n1 owns 0-5 at epoch 1, n2 owns
 * 6-11 at epoch 4, 12-14 unowned at epoch 0, 15 unowned at epoch 3 (it was
 * owned once); one move, a setting, term 7, version 9. */
static const char old_data[] =
    "INSERT INTO cluster VALUES (1, 'abcdef0123456789abcdef0123456789', 16, 7, 9, 1000);"
    "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 15)"
    " INSERT INTO partitions SELECT i,"
    "  CASE WHEN i < 6 THEN 'n1' WHEN i < 12 THEN 'n2' ELSE NULL END,"
    "  CASE WHEN i < 6 THEN 1 WHEN i < 12 THEN 4 WHEN i = 15 THEN 3 ELSE 0 END, 0 FROM s;"
    "INSERT INTO moves (partition, from_node, to_node, state, epoch, reason, planned_at_ms)"
    " VALUES (6, 'n2', 'n1', 'PLANNED', 4, 'test', 1001);"
    "INSERT INTO settings VALUES ('paused', 'old', 1002);";

static const char v2_nodes[] =
    "INSERT INTO nodes VALUES ('n1', '127.0.0.1', 7001, '', 1.0, 'UP', 'ACTIVE', 1000, 1000);"
    "INSERT INTO nodes VALUES ('n2', '127.0.0.1', 7002, '', 1.0, 'DOWN', 'DRAINING', 1000, 1000);";
static const char v1_nodes[] =
    "INSERT INTO nodes VALUES ('n1', '127.0.0.1', 7001, '', 1.0, 'UP', 1000, 1000);"
    "INSERT INTO nodes VALUES ('n2', '127.0.0.1', 7002, '', 1.0, 'DRAINING', 1000, 1000);";

/* Opens an old file and checks what it must read as: every partition RF 1
 * with its owner and epoch, the replication settings recorded as 1, the
 * rest kept. Then a change to the new fields survives a second open (which
 * does not migrate again: the file is already version 3). */
/* Closes f->ms (it holds the file's lock) and reads user_version. */
static int64_t closed_user_version(fx *f) {
    mapstore_free(f->ms);
    f->ms = NULL;
    return raw_int(f->path, "PRAGMA user_version");
}

static void check_migrated(fx *f) {
    reopen(f);
    assert_int_equal(closed_user_version(f), 3);
    reopen(f);
    assert_int_equal(mapstore_term(f->ms), 7);
    assert_int_equal(mapstore_version(f->ms), 9);
    for (unsigned p = 0; p < 16; p++)
        assert_rf1(f->ms, p,
                   p < 6    ? "n1"
                   : p < 12 ? "n2"
                            : "",
                   p < 6     ? 1
                   : p < 12  ? 4
                   : p == 15 ? 3
                             : 0);
    mapstore_setting st;
    assert_int_equal(mapstore_setting_get(f->ms, "replicas", &st), 0);
    assert_string_equal(st.value, "1");
    assert_int_equal(st.set_at_ms, 1000);
    assert_int_equal(mapstore_setting_get(f->ms, "min_insync", &st), 0);
    assert_string_equal(st.value, "1");
    assert_int_equal(mapstore_setting_get(f->ms, "paused", &st), 0);
    assert_string_equal(st.value, "old");
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, 1, &m), 0);
    assert_int_equal(m.epoch, 4);
    /* New fields are written and kept; a second open leaves them. */
    const char *reps[] = {"n1", "n2"};
    uint64_t pe;
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 3, 1, reps, 2, &pe), 0);
    assert_int_equal(pe, 2);
    assert_int_equal(mapstore_setting_set(f->ms, "min_insync", "2", NOW), 0);
    assert_int_equal(closed_user_version(f), 3);
    reopen(f);
    mapstore_partition x;
    assert_int_equal(mapstore_partition_get(f->ms, 3, &x), 0);
    assert_int_equal(x.nreplicas, 2);
    assert_string_equal(x.replicas[1], "n2");
    assert_int_equal(x.partition_epoch, 2);
    assert_int_equal(mapstore_setting_get(f->ms, "min_insync", &st), 0);
    assert_string_equal(st.value, "2");
    assert_rf1(f->ms, 0, "n1", 1);
    mapstore_free(f->ms);
    f->ms = NULL;
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM partitions WHERE replicas = 'n1,n2'"),
                     1);
}

/* A version 2 file migrates in place to 3 and reads as RF 1. */
static void test_v2_file_migrates_to_rf1(void **state) {
    fx *f = *state;
    char sql[8192];
    snprintf(sql, sizeof sql, "BEGIN;%s%s%sCOMMIT;", v2_ddl, v2_nodes, old_data);
    raw_sql(f->path, sql);
    assert_int_equal(raw_int(f->path, "PRAGMA user_version"), 2);
    check_migrated(f);
}

/* A version 1 file migrates in place through 2 to 3 and reads as RF 1. */
static void test_v1_file_migrates_to_rf1(void **state) {
    fx *f = *state;
    char sql[8192];
    snprintf(sql, sizeof sql, "BEGIN;%s%s%sCOMMIT;", v1_ddl, v1_nodes, old_data);
    raw_sql(f->path, sql);
    assert_int_equal(raw_int(f->path, "PRAGMA user_version"), 1);
    reopen(f);
    mapstore_node n;
    assert_int_equal(mapstore_node_get(f->ms, "n2", &n), 0);
    assert_int_equal(n.membership, MAPSTORE_MEMBER_DRAINING);
    check_migrated(f);
}

/* The version 1 file an old build really wrote (tests/fixtures) reads as
 * RF 1 with its owners and epochs. */
static void test_v1_fixture_reads_rf1(void **state) {
    fx *f = *state;
    FILE *in = fopen(KEEL_FIXTURES "/map-v1.db", "rb"), *out = fopen(f->path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
    reopen(f);
    static const char *const owner[16] = {"n1", "n2", "n3", "n4", "n2", "n1", "n2", "n3",
                                          "n4", "n3", "n1", "n2", "n3", "n4", "n4", "n1"};
    for (unsigned p = 0; p < 16; p++)
        assert_rf1(f->ms, p, owner[p], p == 4 || p == 9 || p == 14 ? 2 : 1);
}

/* ---- Both backends --------------------------------------------------------- */

static void three_nodes(fx *f) {
    create(f, 16);
    add_node(f->ms, "a", 7001);
    add_node(f->ms, "b", 7002);
    add_node(f->ms, "c", 7003);
}

/* A new store's partitions are unowned with no replicas; placement gives
 * RF 1 with all three epochs 1. */
static void test_place_is_rf1(void **state) {
    fx *f = *state;
    three_nodes(f);
    assert_rf1(f->ms, 0, "", 0);
    mapstore_placement pl[] = {{0, "a"}, {1, "b"}};
    assert_int_equal(mapstore_partition_place(f->ms, pl, 2, NULL), 0);
    assert_rf1(f->ms, 0, "a", 1);
    assert_rf1(f->ms, 1, "b", 1);
    reopen(f);
    assert_rf1(f->ms, 1, "b", 1);
}

/* ISR and replica-set changes are compare-and-sets on the partition epoch:
 * each bumps it (and the version); a stale expectation is KEEL_EAGAIN and
 * changes nothing; an ownership change keeps the other replicas. */
static void test_isr_compare_and_set(void **state) {
    fx *f = *state;
    three_nodes(f);
    uint64_t e, pe, v;
    assert_int_equal(mapstore_partition_set_owner(f->ms, 0, "a", &e, NULL), 0);
    const char *abc[] = {"a", "b", "c"};
    v = mapstore_version(f->ms);
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 0, 1, abc, 3, &pe), 0);
    assert_int_equal(pe, 2);
    assert_int_equal(mapstore_version(f->ms), v + 1);
    mapstore_partition x;
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_int_equal(x.nreplicas, 3);
    assert_int_equal(x.isr, 1); /* new replicas are not in sync yet */
    assert_int_equal(x.epoch, 2);
    assert_int_equal(x.leader_epoch, 1);
    /* The ISR grows by CAS; the ownership epoch does not move. */
    const char *cba[] = {"c", "b", "a"};
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 2, cba, 3, &pe), 0);
    assert_int_equal(pe, 3);
    assert_int_equal(mapstore_version(f->ms), v + 2);
    /* A stale expected partition epoch loses, and changes nothing. */
    const char *a[] = {"a"};
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 2, a, 1, NULL), KEEL_EAGAIN);
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 0, 2, a, 1, NULL), KEEL_EAGAIN);
    assert_int_equal(mapstore_version(f->ms), v + 2);
    /* Bad ISRs are refused. */
    const char *bc[] = {"b", "c"}, *ax[] = {"a", "x"}, *aa[] = {"a", "a"}, *bad[] = {"a\"b"};
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 3, bc, 2, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 3, ax, 2, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 3, aa, 2, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 3, bad, 1, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 3, a, 0, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_isr(f->ms, 5, 0, a, 1, NULL),
                     KEEL_EINVAL); /* unowned */
    assert_int_equal(mapstore_partition_set_isr(f->ms, 16, 3, a, 1, NULL), KEEL_ERANGE);
    /* Bad replica lists are refused. */
    const char *ba[] = {"b", "a"}, *az[] = {"a", "zz"};
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 0, 3, ba, 2, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 0, 3, az, 2, NULL), KEEL_ENOTFOUND);
    const char *eight[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 0, 3, eight, 8, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_version(f->ms), v + 2);
    /* The ISR shrinks; it persists. */
    const char *ac[] = {"a", "c"};
    assert_int_equal(mapstore_partition_set_isr(f->ms, 0, 3, ac, 2, &pe), 0);
    reopen(f);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_int_equal(x.isr, 5); /* a and c */
    assert_int_equal(x.partition_epoch, 4);
    assert_int_equal(x.epoch, 2);
    /* An ownership change to c: c leads, a leaves, b stays (out of sync). */
    assert_int_equal(mapstore_partition_set_owner(f->ms, 0, "c", &e, NULL), 0);
    assert_int_equal(e, 3);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_int_equal(x.nreplicas, 2);
    assert_string_equal(x.replicas[0], "c");
    assert_string_equal(x.replicas[1], "b");
    assert_int_equal(x.isr, 1);
    assert_int_equal(x.leader_epoch, 2);
    assert_int_equal(x.partition_epoch, 5);
    mapstore_partition y;
    reopen(f);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &y), 0);
    assert_memory_equal(&x, &y, sizeof x);
    /* Dropping a replica drops it from the ISR too. */
    const char *c1[] = {"c"};
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 0, 5, c1, 1, &pe), 0);
    assert_int_equal(pe, 6);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_int_equal(x.nreplicas, 1);
    assert_int_equal(x.isr, 1);
    assert_int_equal(x.epoch, 4);
    assert_int_equal(x.leader_epoch, 2);
    assert_int_equal(x.replicas[1][0], 0); /* unused slots are zero */
}

/* Issue 11 step 4: an RF 3 bootstrap placement lists the followers after
 * the owner, every replica in the ISR (all copies empty), epochs 1; a
 * follower that is the owner, twice, or unknown is refused whole. */
static void test_place_with_followers(void **state) {
    fx *f = *state;
    three_nodes(f);
    const char *bc[] = {"b", "c"}, *ca[] = {"c", "a"};
    mapstore_placement pl[] = {{0, "a", bc, 2}, {1, "b", ca, 2}, {2, "c", NULL, 0}};
    uint64_t v = mapstore_version(f->ms);
    assert_int_equal(mapstore_partition_place(f->ms, pl, 3, NULL), 0);
    assert_int_equal(mapstore_version(f->ms), v + 1);
    for (int pass = 0; pass < 2; pass++) {
        mapstore_partition x;
        assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
        assert_int_equal(x.nreplicas, 3);
        assert_string_equal(x.replicas[0], "a");
        assert_string_equal(x.replicas[1], "b");
        assert_string_equal(x.replicas[2], "c");
        assert_int_equal(x.isr, 7);
        assert_int_equal(x.epoch, 1);
        assert_int_equal(x.leader_epoch, 1);
        assert_int_equal(x.partition_epoch, 1);
        assert_int_equal(mapstore_partition_get(f->ms, 1, &x), 0);
        assert_string_equal(x.replicas[2], "a");
        assert_int_equal(x.isr, 7);
        assert_rf1(f->ms, 2, "c", 1);
        reopen(f);
    }
    const char *dup[] = {"b", "b"}, *self[] = {"d"}, *unknown[] = {"zz"};
    mapstore_placement bad1[] = {{3, "a", dup, 2}}, bad2[] = {{3, "d", self, 1}},
                       bad3[] = {{3, "a", unknown, 1}};
    add_node(f->ms, "d", 7004);
    v = mapstore_version(f->ms);
    assert_int_equal(mapstore_partition_place(f->ms, bad1, 1, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_place(f->ms, bad2, 1, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_place(f->ms, bad3, 1, NULL), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_version(f->ms), v);
    assert_rf1(f->ms, 3, "", 0);
}

/* A leader change by CAS (failover, transfer): the new leader first, the
 * old one right after it, out of the ISR unless asked to stay; leader
 * epoch, epoch and partition epoch + 1; a re-election of the leader bumps
 * the epochs only; stale or bad requests change nothing. */
static void test_set_leader(void **state) {
    fx *f = *state;
    three_nodes(f);
    const char *bc[] = {"b", "c"};
    mapstore_placement pl[] = {{0, "a", bc, 2}};
    assert_int_equal(mapstore_partition_place(f->ms, pl, 1, NULL), 0);
    uint64_t pe, v = mapstore_version(f->ms);
    assert_int_equal(mapstore_partition_set_leader(f->ms, 0, 1, "c", 0, &pe), 0);
    assert_int_equal(pe, 2);
    assert_int_equal(mapstore_version(f->ms), v + 1);
    mapstore_partition x, y;
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_string_equal(x.owner, "c");
    assert_string_equal(x.replicas[0], "c");
    assert_string_equal(x.replicas[1], "a");
    assert_string_equal(x.replicas[2], "b");
    assert_int_equal(x.isr, 1 | 4); /* c and b; a out */
    assert_int_equal(x.leader_epoch, 2);
    assert_int_equal(x.epoch, 2);
    reopen(f);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &y), 0);
    assert_memory_equal(&x, &y, sizeof x);
    /* A clean transfer keeps the old leader in the ISR. */
    assert_int_equal(mapstore_partition_set_leader(f->ms, 0, 2, "b", 1, &pe), 0);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_string_equal(x.replicas[0], "b");
    assert_string_equal(x.replicas[1], "c");
    assert_string_equal(x.replicas[2], "a");
    assert_int_equal(x.isr, 3);
    /* Re-election in a new leader epoch: same lists. */
    assert_int_equal(mapstore_partition_set_leader(f->ms, 0, 3, "b", 0, &pe), 0);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &y), 0);
    assert_int_equal(y.leader_epoch, 4);
    assert_int_equal(y.epoch, 4);
    assert_int_equal(y.partition_epoch, 4);
    assert_int_equal(y.isr, 3);
    assert_string_equal(y.replicas[0], "b");
    v = mapstore_version(f->ms);
    assert_int_equal(mapstore_partition_set_leader(f->ms, 0, 3, "c", 0, NULL), KEEL_EAGAIN);
    assert_int_equal(mapstore_partition_set_leader(f->ms, 0, 4, "zz", 0, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_leader(f->ms, 5, 0, "a", 0, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_version(f->ms), v);
    /* The version alone goes up. */
    uint64_t nv;
    assert_int_equal(mapstore_bump_version(f->ms, &nv), 0);
    assert_int_equal(nv, v + 1);
    reopen(f);
    assert_int_equal(mapstore_version(f->ms), v + 1);
}

static void count_done(void *arg, const mapstore_result *r) {
    int *n = arg;
    assert_int_equal(r->rc, 0);
    (*n)++;
}

/* The replication writes have asynchronous forms: ISR, replicas, leader,
 * version, and a placement with followers, each shown in memory from its
 * completion on and in the store after a reopen. */
static void test_async_replication_writes(void **state) {
    fx *f = *state;
    three_nodes(f);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(mapstore_async_start(f->ms, &loop), 0);
    const char *bc[] = {"b", "c"}, *ab[] = {"a", "b"}, *abc[] = {"a", "b", "c"};
    mapstore_placement pl[] = {{0, "a", bc, 2}};
    mapstore_write w;
    int done = 0;
    mapstore_w_partition_place(&w, pl, 1);
    assert_int_equal(mapstore_submit(f->ms, &w, count_done, &done), 0);
    mapstore_w_partition_set_isr(&w, 0, 1, ab, 2); /* pe 1 -> 2 */
    assert_int_equal(mapstore_submit(f->ms, &w, count_done, &done), 0);
    mapstore_w_partition_set_leader(&w, 0, 2, "b", 0); /* pe 3 */
    assert_int_equal(mapstore_submit(f->ms, &w, count_done, &done), 0);
    const char *ba[] = {"b", "a"};
    mapstore_w_partition_set_replicas(&w, 0, 3, ba, 2); /* c dropped, pe 4 */
    assert_int_equal(mapstore_submit(f->ms, &w, count_done, &done), 0);
    mapstore_w_bump_version(&w);
    assert_int_equal(mapstore_submit(f->ms, &w, count_done, &done), 0);
    mapstore_w_partition_set_isr(&w, 0, 4, abc, 3); /* refused at submit: 3 ids are fine, */
    assert_int_equal(mapstore_submit(f->ms, &w, NULL, NULL), 0); /* c is no replica: at run */
    mapstore_w_partition_set_isr(&w, 0, 4, abc, 0);
    assert_int_equal(mapstore_submit(f->ms, &w, NULL, NULL), KEEL_EINVAL);
    while (mapstore_pending(f->ms))
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(done, 5);
    mapstore_partition x, y;
    assert_int_equal(mapstore_partition_get(f->ms, 0, &x), 0);
    assert_string_equal(x.owner, "b");
    assert_int_equal(x.nreplicas, 2);
    assert_string_equal(x.replicas[1], "a");
    assert_int_equal(x.isr, 1); /* a left the ISR at the failover */
    assert_int_equal(x.partition_epoch, 4);
    assert_int_equal(x.leader_epoch, 2);
    uint64_t v = mapstore_version(f->ms);
    mapstore_async_stop(f->ms);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(uv_loop_close(&loop), 0);
    reopen(f);
    assert_int_equal(mapstore_partition_get(f->ms, 0, &y), 0);
    assert_memory_equal(&x, &y, sizeof x);
    assert_int_equal(mapstore_version(f->ms), v);
}

/* A move commit is an ownership change by the same rule, and a replica
 * change during a move makes its commit refuse (the epoch moved on). */
static void test_move_commit_keeps_followers(void **state) {
    fx *f = *state;
    three_nodes(f);
    uint64_t id, e;
    assert_int_equal(mapstore_partition_set_owner(f->ms, 2, "a", NULL, NULL), 0);
    const char *ab[] = {"a", "b"};
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 2, 1, ab, 2, NULL), 0);
    assert_int_equal(mapstore_partition_set_isr(f->ms, 2, 2, ab, 2, NULL), 0);
    assert_int_equal(mapstore_move_create(f->ms, 2, "c", "test", NOW, &id), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_CATCHING_UP, NOW, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_FENCED, NOW, NULL), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW, &e, NULL), 0);
    mapstore_partition x;
    assert_int_equal(mapstore_partition_get(f->ms, 2, &x), 0);
    assert_string_equal(x.replicas[0], "c");
    assert_string_equal(x.replicas[1], "b");
    assert_int_equal(x.nreplicas, 2);
    assert_int_equal(x.isr, 3);
    assert_int_equal(x.epoch, e);
    assert_int_equal(x.leader_epoch, 2);
    assert_int_equal(x.partition_epoch, 4);
    /* A second move, fenced by a replica change under it. */
    assert_int_equal(mapstore_move_create(f->ms, 2, "a", "test", NOW, &id), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_CATCHING_UP, NOW, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_FENCED, NOW, NULL), 0);
    const char *c1[] = {"c"};
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 2, 4, c1, 1, NULL), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW, NULL, NULL), KEEL_EINVAL);
    reopen(f);
    mapstore_partition y;
    assert_int_equal(mapstore_partition_get(f->ms, 2, &y), 0);
    assert_string_equal(y.owner, "c");
    assert_int_equal(y.nreplicas, 1);
}

/* ---- etcd: entries an older build wrote ------------------------------------ */

static void raw_put(const char *key, const char *value) {
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
    cJSON_Delete(b);
    cJSON_Delete(r);
    etcd_client_free(c);
}

/* A parts/ chunk in the old three-field form ([owner, "epoch", pinned])
 * reads as RF 1, and a CAS on it works from there; a malformed
 * replication entry is refused as corrupt. */
static void test_etcd_old_chunk_reads_rf1(void **state) {
    fx *f = *state;
    three_nodes(f);
    char key[160], chunk[2048];
    size_t len = 0;
    len += (size_t)snprintf(chunk + len, sizeof chunk - len, "[");
    for (unsigned p = 0; p < 16; p++)
        len += (size_t)snprintf(chunk + len, sizeof chunk - len, "%s[\"%s\",\"%u\",0]",
                                p ? "," : "", p < 8 ? "a" : "b", p + 1);
    snprintf(chunk + len, sizeof chunk - len, "]");
    snprintf(key, sizeof key, "%sparts/000", f->prefix);
    raw_put(key, chunk);
    reopen(f);
    for (unsigned p = 0; p < 16; p++)
        assert_rf1(f->ms, p, p < 8 ? "a" : "b", p + 1);
    const char *ab[] = {"a", "b"};
    uint64_t pe;
    assert_int_equal(mapstore_partition_set_replicas(f->ms, 3, 4, ab, 2, &pe), 0);
    assert_int_equal(pe, 5);
    reopen(f);
    mapstore_partition x;
    assert_int_equal(mapstore_partition_get(f->ms, 3, &x), 0);
    assert_int_equal(x.nreplicas, 2);
    assert_rf1(f->ms, 2, "a", 3);
    /* A seven-field entry whose ISR misses the leader is corrupt. */
    mapstore_free(f->ms);
    f->ms = NULL;
    len =
        (size_t)snprintf(chunk, sizeof chunk, "[[\"a\",\"1\",0,[\"a\",\"b\"],[\"b\"],\"1\",\"1\"]");
    for (unsigned p = 1; p < 16; p++)
        len += (size_t)snprintf(chunk + len, sizeof chunk - len, ",[\"\",\"0\",0]");
    snprintf(chunk + len, sizeof chunk - len, "]");
    raw_put(key, chunk);
    char err[MAPSTORE_ERR_MAX];
    mapstore_etcd_config c = etcd_cfg(f);
    assert_int_equal(mapstore_etcd_open(&c, NULL, &f->ms, err, sizeof err), KEEL_ECORRUPT);
    assert_null(f->ms);
}

static int group_sqlite(void **state) {
    (void)state;
    use_etcd = 0;
    return 0;
}

static int group_etcd(void **state) {
    (void)state;
    if (etcd_fixture_start(&etcd)) {
        fprintf(stderr, "etcd is installed but did not start\n");
        return -1;
    }
    use_etcd = 1;
    return 0;
}

static int group_etcd_end(void **state) {
    (void)state;
    etcd_fixture_stop(&etcd);
    use_etcd = 0;
    return 0;
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest sqlite_only[] = {
        T(test_v2_file_migrates_to_rf1),  T(test_v1_file_migrates_to_rf1),
        T(test_v1_fixture_reads_rf1),     T(test_place_is_rf1),
        T(test_isr_compare_and_set),      T(test_move_commit_keeps_followers),
        T(test_place_with_followers),     T(test_set_leader),
        T(test_async_replication_writes),
    };
    const struct CMUnitTest both[] = {
        T(test_place_is_rf1),
        T(test_isr_compare_and_set),
        T(test_move_commit_keeps_followers),
        T(test_place_with_followers),
        T(test_set_leader),
        T(test_async_replication_writes),
        T(test_etcd_old_chunk_reads_rf1),
    };
    int failed = cmocka_run_group_tests_name("sqlite", sqlite_only, group_sqlite, NULL);
    if (etcd_fixture_available("test-mapstore-repl group etcd"))
        failed += cmocka_run_group_tests_name("etcd", both, group_etcd, group_etcd_end);
    return failed;
}
