/* test-mapstore.c - unit tests for src/coord/mapstore*: create and open,
 * refusal of corrupt, foreign and mismatched stores, every table's round
 * trip across a reopen, the epoch/version rules of ownership changes, move
 * transitions, settings ages, the term, and durability without a close.
 * Each case gets a fresh temporary directory (mkdtemp), removed afterwards.
 * Times are fixed constants: the store never reads a clock.
 *
 * Two backends. Every case that does not reach into SQLite's file runs
 * twice: in the group "sqlite" and in the group "etcd", where create() and
 * reopen() use mapstore_etcd on a throwaway etcd (etcd_fixture.h), each
 * case under a prefix of its own. Without an etcd binary the etcd group is
 * skipped with a notice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tmpdir.h"

#include "etcd_fixture.h"

#include "coord/mapstore.h"
#include "coord/mapstore_etcd.h"
#include "core/err.h"
#include "core/failpoint.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOW 1700000000000LL

typedef struct fx {
    char dir[TMPDIR_MAX];
    char path[128];
    char prefix[64]; /* the etcd backend's key prefix */
    mapstore *ms;
} fx;

static int use_etcd; /* which backend create() and reopen() use */
static etcd_fixture etcd;

static mapstore_etcd_config etcd_cfg(const fx *f) {
    mapstore_etcd_config c = {etcd.url, f->prefix, 5000};
    return c;
}

/* Opens f's store with the current backend. */
static int open_store(fx *f, const mapstore_expect *ex, mapstore **ms, char *err, size_t cap) {
    if (!use_etcd) return mapstore_sqlite_open(f->path, ex, ms, err, cap);
    mapstore_etcd_config c = etcd_cfg(f);
    return mapstore_etcd_open(&c, ex, ms, err, cap);
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    if (tmpdir_make(f->dir, "test-mapstore")) return -1;
    snprintf(f->path, sizeof f->path, "%s/map.db", f->dir);
    static unsigned seq;
    snprintf(f->prefix, sizeof f->prefix, "/test-mapstore/%d-%u/", (int)getpid(), ++seq);
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

/* Creates a store of P partitions at f->path, open in f->ms. */
static void create(fx *f, unsigned partitions) {
    char err[MAPSTORE_ERR_MAX];
    mapstore_etcd_config c = etcd_cfg(f);
    int rc = use_etcd ? mapstore_etcd_create(&c, partitions, NOW, &f->ms, err, sizeof err)
                      : mapstore_sqlite_create(f->path, partitions, NOW, &f->ms, err, sizeof err);
    if (rc) fprintf(stderr, "create: %s\n", err);
    assert_int_equal(rc, 0);
    assert_non_null(f->ms);
}

/* Closes and reopens f->ms (no expectations). */
static void reopen(fx *f) {
    char err[MAPSTORE_ERR_MAX];
    mapstore_free(f->ms);
    f->ms = NULL;
    int rc = open_store(f, NULL, &f->ms, err, sizeof err);
    if (rc) fprintf(stderr, "open: %s\n", err);
    assert_int_equal(rc, 0);
}

/* Opens f->path expecting failure; returns the code and checks err is set. */
static int open_fails(fx *f, const mapstore_expect *ex) {
    char err[MAPSTORE_ERR_MAX] = "";
    mapstore *ms = (mapstore *)1;
    int rc = open_store(f, ex, &ms, err, sizeof err);
    assert_true(rc < 0);
    assert_null(ms);
    assert_true(strlen(err) > 0);
    return rc;
}

static mapstore_node node(const char *id, const char *host, int port) {
    mapstore_node n;
    memset(&n, 0, sizeof n);
    snprintf(n.id, sizeof n.id, "%s", id);
    snprintf(n.host, sizeof n.host, "%s", host);
    n.port = port;
    snprintf(n.rack, sizeof n.rack, "r1");
    n.capacity = 1.0;
    n.liveness = MAPSTORE_NODE_UP;
    n.membership = MAPSTORE_MEMBER_ACTIVE;
    return n;
}

static void add_node(mapstore *ms, const char *id, int port) {
    mapstore_node n = node(id, "127.0.0.1", port);
    assert_int_equal(mapstore_node_upsert(ms, &n, NOW), 0);
}

/* Reads a whole file into a malloc'd buffer. */
static char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    rewind(fp);
    char *buf = malloc(*len + 1);
    assert_int_equal(fread(buf, 1, *len, fp), *len);
    fclose(fp);
    return buf;
}

static void spit(const char *path, const void *data, size_t len) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

static int exists(const char *dir, const char *name) {
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s%s", dir, name);
    return stat(p, &sb) == 0;
}

/* Refusing a bad file must leave it byte for byte as it was, with no
 * SQLite side files created next to it. */
static void check_refused_untouched(fx *f, int want) {
    size_t n0, n1;
    char *before = slurp(f->path, &n0);
    assert_int_equal(open_fails(f, NULL), want);
    char *after = slurp(f->path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    assert_false(exists(f->path, "-wal"));
    assert_false(exists(f->path, "-journal"));
    free(before);
    free(after);
}

/* Runs one SQL statement on the store file directly (to forge damage). */
static void raw_sql(const char *path, const char *sql) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* ---- Create and open ----------------------------------------------------- */

/* A new store has P unowned partitions, a hex cluster id, term and version
 * 0, and reopens to the same identity. */
static void test_create_open_roundtrip(void **state) {
    fx *f = *state;
    create(f, 64);
    char id[MAPSTORE_CLUSTER_ID_MAX + 1];
    strcpy(id, mapstore_cluster_id(f->ms));
    assert_int_equal(strlen(id), 32);
    assert_int_equal(strspn(id, "0123456789abcdef"), 32);
    assert_int_equal(mapstore_partitions(f->ms), 64);
    assert_int_equal(mapstore_term(f->ms), 0);
    assert_int_equal(mapstore_version(f->ms), 0);
    mapstore_free(f->ms);
    char err[MAPSTORE_ERR_MAX];
    mapstore_expect ex = {id, 64};
    assert_int_equal(open_store(f, &ex, &f->ms, err, sizeof err), 0);
    assert_string_equal(mapstore_cluster_id(f->ms), id);
    assert_int_equal(mapstore_partitions(f->ms), 64);
}

/* Two clusters never get the same generated id. */
static void test_cluster_ids_differ(void **state) {
    fx *f = *state;
    create(f, 16);
    char other[160], err[MAPSTORE_ERR_MAX];
    snprintf(other, sizeof other, "%s/other.db", f->dir);
    mapstore *ms2;
    assert_int_equal(mapstore_sqlite_create(other, 16, NOW, &ms2, err, sizeof err), 0);
    assert_string_not_equal(mapstore_cluster_id(f->ms), mapstore_cluster_id(ms2));
    mapstore_free(ms2);
}

/* P must be a power of two in 16..16384; a refused create leaves no file. */
static void test_create_bad_partitions(void **state) {
    fx *f = *state;
    unsigned bad[] = {0, 8, 17, 1000, 32768};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[MAPSTORE_ERR_MAX] = "";
        mapstore *ms = NULL;
        assert_int_equal(mapstore_sqlite_create(f->path, bad[i], NOW, &ms, err, sizeof err),
                         KEEL_EINVAL);
        assert_null(ms);
        assert_true(strlen(err) > 0);
        assert_false(exists(f->path, ""));
    }
    create(f, 16384);
    assert_int_equal(mapstore_partitions(f->ms), 16384);
}

/* Creating over an existing store fails and leaves it intact. */
static void test_create_over_existing_refused(void **state) {
    fx *f = *state;
    create(f, 16);
    char id[MAPSTORE_CLUSTER_ID_MAX + 1], err[MAPSTORE_ERR_MAX];
    strcpy(id, mapstore_cluster_id(f->ms));
    mapstore_free(f->ms);
    f->ms = NULL;
    mapstore *ms = NULL;
    assert_int_equal(mapstore_sqlite_create(f->path, 32, NOW, &ms, err, sizeof err), KEEL_EEXIST);
    assert_null(ms);
    reopen(f);
    assert_string_equal(mapstore_cluster_id(f->ms), id);
    assert_int_equal(mapstore_partitions(f->ms), 16);
}

/* Creating over any file, or beside a stray -wal, fails untouched. */
static void test_create_over_garbage_or_wal_refused(void **state) {
    fx *f = *state;
    char err[MAPSTORE_ERR_MAX], wal[160];
    mapstore *ms = NULL;
    spit(f->path, "hello", 5);
    assert_int_equal(mapstore_sqlite_create(f->path, 16, NOW, &ms, err, sizeof err), KEEL_EEXIST);
    size_t n;
    char *buf = slurp(f->path, &n);
    assert_int_equal(n, 5);
    free(buf);
    unlink(f->path);
    snprintf(wal, sizeof wal, "%s-wal", f->path);
    spit(wal, "x", 1);
    assert_int_equal(mapstore_sqlite_create(f->path, 16, NOW, &ms, err, sizeof err), KEEL_EEXIST);
    assert_false(exists(f->path, ""));
}

/* Creation leaves nothing but the store itself in the directory. */
static void test_create_leaves_no_temp_files(void **state) {
    fx *f = *state;
    create(f, 16);
    mapstore_free(f->ms);
    f->ms = NULL;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", f->dir);
    assert_int_equal(system(cmd), 0);
}

/* Opening a missing path is KEEL_ENOTFOUND and creates nothing. */
static void test_open_missing(void **state) {
    fx *f = *state;
    assert_int_equal(open_fails(f, NULL), KEEL_ENOTFOUND);
    assert_false(exists(f->path, ""));
}

/* A file of garbage is refused as corrupt and left byte for byte as it was. */
static void test_open_garbage_refused(void **state) {
    fx *f = *state;
    char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    spit(f->path, junk, sizeof junk);
    check_refused_untouched(f, KEEL_ECORRUPT);
}

/* An empty file is refused (never initialised into a fresh map). */
static void test_open_empty_file_refused(void **state) {
    fx *f = *state;
    spit(f->path, "", 0);
    assert_int_equal(open_fails(f, NULL), KEEL_ECORRUPT);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_size, 0);
}

/* A real store with a damaged page is refused as corrupt, untouched. */
static void test_open_damaged_page_refused(void **state) {
    fx *f = *state;
    create(f, 1024);
    mapstore_free(f->ms);
    f->ms = NULL;
    size_t n;
    char *buf = slurp(f->path, &n);
    assert_true(n > 3 * 4096);
    memset(buf + 2 * 4096, 0xA5, 4096); /* page 3: part of a table */
    spit(f->path, buf, n);
    free(buf);
    check_refused_untouched(f, KEEL_ECORRUPT);
}

/* An SQLite database of some other program is refused as the wrong type. */
static void test_open_foreign_sqlite_refused(void **state) {
    fx *f = *state;
    raw_sql(f->path, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);");
    check_refused_untouched(f, KEEL_EWRONGTYPE);
}

/* A store of a schema version this build does not know is refused. */
static void test_open_unknown_schema_refused(void **state) {
    fx *f = *state;
    create(f, 16);
    mapstore_free(f->ms);
    f->ms = NULL;
    raw_sql(f->path, "PRAGMA user_version = 99;");
    assert_int_equal(open_fails(f, NULL), KEEL_ERANGE);
}

/* Turns a schema 3 store back into the schema 1 layout, byte for byte the
 * version 1 DDL: one `state` column per node, given per node id, and no
 * replication columns (schema 3) in partitions. */
static void downgrade_to_v1(const char *path, const char *state_case) {
    char sql[2048];
    snprintf(sql, sizeof sql,
             "PRAGMA foreign_keys = OFF; BEGIN;"
             "CREATE TABLE nodes_v1 ("
             " id TEXT PRIMARY KEY NOT NULL,"
             " host TEXT NOT NULL,"
             " port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
             " rack TEXT NOT NULL,"
             " capacity REAL NOT NULL CHECK (capacity >= 0),"
             " state TEXT NOT NULL CHECK (state IN ('UP','SUSPECT','DOWN','DRAINING','REMOVED')),"
             " registered_at_ms INTEGER NOT NULL,"
             " last_heartbeat_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
             "INSERT INTO nodes_v1 SELECT id, host, port, rack, capacity, %s,"
             " registered_at_ms, last_heartbeat_ms FROM nodes;"
             "DROP TABLE nodes; ALTER TABLE nodes_v1 RENAME TO nodes;"
             "ALTER TABLE partitions DROP COLUMN replicas;"
             "ALTER TABLE partitions DROP COLUMN isr;"
             "ALTER TABLE partitions DROP COLUMN leader_epoch;"
             "ALTER TABLE partitions DROP COLUMN partition_epoch;"
             "PRAGMA user_version = 1; COMMIT;",
             state_case);
    raw_sql(path, sql);
}

static int64_t raw_user_version(const char *path) {
    sqlite3 *db;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* A schema 1 store (one node `state`) is migrated in place at open: UP,
 * SUSPECT and DOWN keep their liveness and become ACTIVE; DRAINING becomes
 * UP + DRAINING; REMOVED becomes DOWN + REMOVED. Everything else (owners,
 * epochs, moves, settings, version, term) is kept, and the file is schema 3
 * (through 2) on disk afterwards. */
static void test_open_migrates_v1_node_state(void **state) {
    fx *f = *state;
    create(f, 16);
    const char *ids[] = {"n-up", "n-sus", "n-down", "n-drain", "n-rem"};
    for (int i = 0; i < 5; i++)
        add_node(f->ms, ids[i], 7001 + i);
    uint64_t epoch, version, mid;
    assert_int_equal(mapstore_partition_set_owner(f->ms, 3, "n-drain", &epoch, &version), 0);
    assert_int_equal(mapstore_move_create(f->ms, 3, "n-up", "drain", NOW + 7, &mid), 0);
    assert_int_equal(mapstore_setting_set(f->ms, "paused", "x", NOW + 8), 0);
    uint64_t term;
    assert_int_equal(mapstore_bump_term(f->ms, &term), 0);
    version = mapstore_version(f->ms);
    mapstore_free(f->ms);
    f->ms = NULL;
    downgrade_to_v1(f->path, "CASE id WHEN 'n-sus' THEN 'SUSPECT' WHEN 'n-down' THEN 'DOWN'"
                             " WHEN 'n-drain' THEN 'DRAINING' WHEN 'n-rem' THEN 'REMOVED'"
                             " ELSE 'UP' END");
    assert_int_equal(raw_user_version(f->path), 1);
    reopen(f);
    mapstore_free(f->ms); /* the open handle holds the file's lock */
    f->ms = NULL;
    assert_int_equal(raw_user_version(f->path), 3);
    reopen(f);
    static const struct {
        mapstore_liveness l;
        mapstore_membership m;
    } want[] = {{MAPSTORE_NODE_UP, MAPSTORE_MEMBER_ACTIVE},
                {MAPSTORE_NODE_SUSPECT, MAPSTORE_MEMBER_ACTIVE},
                {MAPSTORE_NODE_DOWN, MAPSTORE_MEMBER_ACTIVE},
                {MAPSTORE_NODE_UP, MAPSTORE_MEMBER_DRAINING},
                {MAPSTORE_NODE_DOWN, MAPSTORE_MEMBER_REMOVED}};
    for (int i = 0; i < 5; i++) {
        mapstore_node g;
        assert_int_equal(mapstore_node_get(f->ms, ids[i], &g), 0);
        assert_int_equal(g.liveness, want[i].l);
        assert_int_equal(g.membership, want[i].m);
        assert_int_equal(g.port, 7001 + i);
        assert_int_equal(g.registered_at_ms, NOW);
    }
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 3, &p), 0);
    assert_string_equal(p.owner, "n-drain");
    assert_int_equal(p.epoch, epoch);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, mid, &m), 0);
    assert_string_equal(m.from, "n-drain");
    assert_int_equal(m.state, MAPSTORE_MOVE_PLANNED);
    mapstore_setting st;
    assert_int_equal(mapstore_setting_get(f->ms, "paused", &st), 0);
    assert_int_equal(mapstore_version(f->ms), version);
    assert_int_equal(mapstore_term(f->ms), term);
    /* Foreign keys still bind the rebuilt table: an owner must exist. */
    assert_int_equal(mapstore_partition_set_owner(f->ms, 4, "nobody", NULL, NULL), KEEL_ENOTFOUND);
    /* And it reopens as a plain schema 3 store. */
    reopen(f);
    mapstore_node g;
    assert_int_equal(mapstore_node_get(f->ms, "n-drain", &g), 0);
    assert_int_equal(g.membership, MAPSTORE_MEMBER_DRAINING);
}

/* The same migration on a file Keel's version 1 build really wrote
 * (tests/fixtures/README.md says how it was made). */
static void test_open_migrates_file_from_version_1(void **state) {
    fx *f = *state;
    size_t len;
    char *img = slurp(KEEL_FIXTURES "/map-v1.db", &len);
    spit(f->path, img, len);
    free(img);
    assert_int_equal(raw_user_version(f->path), 1);
    reopen(f);
    static const struct {
        const char *id;
        mapstore_liveness l;
        mapstore_membership m;
    } want[] = {{"n1", MAPSTORE_NODE_UP, MAPSTORE_MEMBER_ACTIVE},
                {"n2", MAPSTORE_NODE_DOWN, MAPSTORE_MEMBER_ACTIVE},
                {"n3", MAPSTORE_NODE_DOWN, MAPSTORE_MEMBER_ACTIVE},
                {"n4", MAPSTORE_NODE_UP, MAPSTORE_MEMBER_DRAINING},
                {"n5", MAPSTORE_NODE_DOWN, MAPSTORE_MEMBER_REMOVED}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        mapstore_node g;
        assert_int_equal(mapstore_node_get(f->ms, want[i].id, &g), 0);
        assert_int_equal(g.liveness, want[i].l);
        assert_int_equal(g.membership, want[i].m);
    }
    static const char *const owner[16] = {"n1", "n2", "n3", "n4", "n2", "n1", "n2", "n3",
                                          "n4", "n3", "n1", "n2", "n3", "n4", "n4", "n1"};
    mapstore_partition *ps;
    size_t np;
    assert_int_equal(mapstore_partition_list(f->ms, &ps, &np), 0);
    assert_int_equal(np, 16);
    for (unsigned i = 0; i < 16; i++) {
        assert_string_equal(ps[i].owner, owner[i]);
        assert_int_equal(ps[i].epoch, i == 4 || i == 9 || i == 14 ? 2 : 1);
    }
    free(ps);
    mapstore_move *mv;
    size_t nm;
    assert_int_equal(mapstore_move_list(f->ms, 0, &mv, &nm), 0);
    assert_int_equal(nm, 3);
    free(mv);
    mapstore_setting st;
    assert_int_equal(mapstore_setting_get(f->ms, "paused", &st), 0);
    assert_string_equal(st.value, "fixture");
    mapstore_free(f->ms);
    f->ms = NULL;
    assert_int_equal(raw_user_version(f->path), 3);
}

/* A store whose partitions table lost a row is refused as corrupt. */
static void test_open_missing_partition_row_refused(void **state) {
    fx *f = *state;
    create(f, 16);
    mapstore_free(f->ms);
    f->ms = NULL;
    raw_sql(f->path, "DELETE FROM partitions WHERE id = 7;");
    assert_int_equal(open_fails(f, NULL), KEEL_ECORRUPT);
}

/* Opening with a different expected P is refused and changes nothing. */
static void test_open_wrong_partitions_refused(void **state) {
    fx *f = *state;
    create(f, 32);
    mapstore_free(f->ms);
    f->ms = NULL;
    mapstore_expect ex = {NULL, 64};
    assert_int_equal(open_fails(f, &ex), KEEL_EINVAL);
    reopen(f);
    assert_int_equal(mapstore_partitions(f->ms), 32);
}

/* Opening with another cluster's id is refused. */
static void test_open_wrong_cluster_id_refused(void **state) {
    fx *f = *state;
    create(f, 16);
    mapstore_free(f->ms);
    f->ms = NULL;
    mapstore_expect ex = {"0123456789abcdef0123456789abcdef", 16};
    assert_int_equal(open_fails(f, &ex), KEEL_EINVAL);
}

/* A store already open elsewhere cannot be opened a second time. */
static void test_open_twice_refused(void **state) {
    fx *f = *state;
    create(f, 16);
    assert_int_equal(open_fails(f, NULL), KEEL_EAGAIN);
    assert_int_equal(mapstore_bump_term(f->ms, NULL), 0); /* the first is unharmed */
}

/* mapstore_free(NULL) does nothing. */
static void test_free_null(void **state) {
    (void)state;
    mapstore_free(NULL);
}

/* ---- Term ------------------------------------------------------------------- */

/* Each bump adds one and persists across a reopen. */
static void test_term_bump_persists(void **state) {
    fx *f = *state;
    create(f, 16);
    uint64_t t = 0;
    assert_int_equal(mapstore_bump_term(f->ms, &t), 0);
    assert_int_equal(t, 1);
    assert_int_equal(mapstore_bump_term(f->ms, &t), 0);
    assert_int_equal(t, 2);
    reopen(f);
    assert_int_equal(mapstore_term(f->ms), 2);
    assert_int_equal(mapstore_bump_term(f->ms, &t), 0);
    assert_int_equal(t, 3);
    assert_int_equal(mapstore_version(f->ms), 0); /* the term is not the map */
}

/* Counters at 2^63 - 1 refuse to go further, and a refused change rolls
 * back whatever its transaction had already written. */
static void test_counters_at_limit(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    mapstore_free(f->ms);
    f->ms = NULL;
    raw_sql(f->path, "UPDATE cluster SET term = 9223372036854775807,"
                     " map_version = 9223372036854775807;"
                     "UPDATE partitions SET epoch = 9223372036854775807 WHERE id = 1;");
    reopen(f);
    assert_int_equal(mapstore_bump_term(f->ms, NULL), KEEL_ERANGE);
    assert_int_equal(mapstore_term(f->ms), INT64_MAX);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 1, "n1", NULL, NULL), KEEL_ERANGE);
    /* Partition 2's epoch can grow, but the version cannot: all rolled back. */
    assert_int_equal(mapstore_partition_set_owner(f->ms, 2, "n1", NULL, NULL), KEEL_ERANGE);
    reopen(f);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 2, &p), 0);
    assert_string_equal(p.owner, "");
    assert_int_equal(p.epoch, 0);
    assert_int_equal(mapstore_version(f->ms), INT64_MAX);
}

/* ---- Nodes ------------------------------------------------------------------ */

/* Every node field survives a reopen; list is ordered by id. */
static void test_node_roundtrip(void **state) {
    fx *f = *state;
    create(f, 16);
    mapstore_node b = node("node-b", "10.0.0.2", 7002);
    b.capacity = 2.5;
    b.liveness = MAPSTORE_NODE_SUSPECT;
    b.membership = MAPSTORE_MEMBER_DRAINING;
    snprintf(b.rack, sizeof b.rack, "rack-7");
    assert_int_equal(mapstore_node_upsert(f->ms, &b, NOW + 5), 0);
    add_node(f->ms, "node-a", 7001);
    reopen(f);
    mapstore_node g;
    assert_int_equal(mapstore_node_get(f->ms, "node-b", &g), 0);
    assert_string_equal(g.host, "10.0.0.2");
    assert_int_equal(g.port, 7002);
    assert_string_equal(g.rack, "rack-7");
    assert_true(g.capacity == 2.5);
    assert_int_equal(g.liveness, MAPSTORE_NODE_SUSPECT);
    assert_int_equal(g.membership, MAPSTORE_MEMBER_DRAINING);
    assert_int_equal(g.registered_at_ms, NOW + 5);
    assert_int_equal(g.last_heartbeat_ms, NOW + 5);
    mapstore_node *all;
    size_t n;
    assert_int_equal(mapstore_node_list(f->ms, &all, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].id, "node-a");
    assert_string_equal(all[1].id, "node-b");
    free(all);
}

/* An update changes the fields but keeps the registration time. */
static void test_node_update_keeps_registered(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    mapstore_node n = node("n1", "10.1.1.1", 7100);
    n.registered_at_ms = 42; /* ignored */
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW + 1000), 0);
    mapstore_node g;
    assert_int_equal(mapstore_node_get(f->ms, "n1", &g), 0);
    assert_string_equal(g.host, "10.1.1.1");
    assert_int_equal(g.port, 7100);
    assert_int_equal(g.registered_at_ms, NOW);
    assert_int_equal(g.last_heartbeat_ms, NOW + 1000);
}

/* Liveness, membership and heartbeat changes persist, each on its own. */
static void test_node_state_and_heartbeat(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_DRAINING), 0);
    assert_int_equal(mapstore_node_set_liveness(f->ms, "n1", MAPSTORE_NODE_SUSPECT), 0);
    assert_int_equal(mapstore_node_heartbeat(f->ms, "n1", NOW + 3000), 0);
    reopen(f);
    mapstore_node g;
    assert_int_equal(mapstore_node_get(f->ms, "n1", &g), 0);
    assert_int_equal(g.liveness, MAPSTORE_NODE_SUSPECT);
    assert_int_equal(g.membership, MAPSTORE_MEMBER_DRAINING); /* liveness left it alone */
    assert_int_equal(g.last_heartbeat_ms, NOW + 3000);
    assert_int_equal(mapstore_node_set_liveness(f->ms, "n1", MAPSTORE_NODE_DOWN), 0);
    assert_int_equal(mapstore_node_get(f->ms, "n1", &g), 0);
    assert_int_equal(g.membership, MAPSTORE_MEMBER_DRAINING);
}

/* REMOVED is final: neither set_membership nor an upsert brings a node back. */
static void test_node_removed_is_final(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_REMOVED), 0);
    uint64_t v = mapstore_version(f->ms);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_ACTIVE),
                     KEEL_EINVAL);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_DRAINING),
                     KEEL_EINVAL);
    mapstore_node n = node("n1", "127.0.0.1", 7001);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW + 1), KEEL_EINVAL);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_REMOVED), 0);
    assert_int_equal(mapstore_version(f->ms), v); /* refused and no-op calls changed nothing */
    mapstore_node g;
    assert_int_equal(mapstore_node_get(f->ms, "n1", &g), 0);
    assert_int_equal(g.membership, MAPSTORE_MEMBER_REMOVED);
}

/* The version moves with what nodes route by, not with heartbeats. */
static void test_node_changes_and_version(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_version(f->ms), 1); /* a new node */
    mapstore_node n = node("n1", "127.0.0.1", 7001);
    n.capacity = 3;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW + 1), 0);
    assert_int_equal(mapstore_version(f->ms), 1); /* capacity: not routing */
    assert_int_equal(mapstore_node_heartbeat(f->ms, "n1", NOW + 2), 0);
    assert_int_equal(mapstore_version(f->ms), 1);
    n.port = 7009;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW + 3), 0);
    assert_int_equal(mapstore_version(f->ms), 2); /* a new address */
    assert_int_equal(mapstore_node_set_liveness(f->ms, "n1", MAPSTORE_NODE_UP), 0);
    assert_int_equal(mapstore_version(f->ms), 2); /* no change */
    assert_int_equal(mapstore_node_set_liveness(f->ms, "n1", MAPSTORE_NODE_DOWN), 0);
    assert_int_equal(mapstore_version(f->ms), 3);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_ACTIVE), 0);
    assert_int_equal(mapstore_version(f->ms), 3); /* no change */
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_DRAINING), 0);
    assert_int_equal(mapstore_version(f->ms), 4); /* nodes see draining in the map */
}

/* Malformed nodes and unknown ids are errors, not crashes. */
static void test_node_bad_input(void **state) {
    fx *f = *state;
    create(f, 16);
    mapstore_node n = node("", "h", 1);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    assert_true(strlen(mapstore_errmsg(f->ms)) > 0);
    n = node("has space", "h", 1);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n = node("n1", "h", 0);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n = node("n1", "h", 70000);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n = node("n1", "", 1);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n = node("n1", "h", 1);
    n.capacity = -1;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n.capacity = NAN;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n = node("n1", "h", 1);
    n.liveness = (mapstore_liveness)17;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    n = node("n1", "h", 1);
    n.membership = (mapstore_membership)3;
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
    assert_int_equal(mapstore_node_upsert(f->ms, NULL, NOW), KEEL_EINVAL);
    mapstore_node g;
    assert_int_equal(mapstore_node_get(f->ms, "nope", &g), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_node_get(f->ms, NULL, &g), KEEL_EINVAL);
    assert_int_equal(mapstore_node_set_liveness(f->ms, "nope", MAPSTORE_NODE_DOWN), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_node_set_membership(f->ms, "nope", MAPSTORE_MEMBER_DRAINING),
                     KEEL_ENOTFOUND);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_node_set_liveness(f->ms, "n1", (mapstore_liveness)-1), KEEL_EINVAL);
    assert_int_equal(mapstore_node_set_membership(f->ms, "n1", MAPSTORE_MEMBER_N), KEEL_EINVAL);
    assert_int_equal(mapstore_node_heartbeat(f->ms, "nope", NOW), KEEL_ENOTFOUND);
    mapstore_node *all;
    size_t cnt;
    assert_int_equal(mapstore_node_list(f->ms, &all, &cnt), 0);
    assert_int_equal(cnt, 1); /* no refused node slipped in */
    free(all);
    assert_int_equal(mapstore_version(f->ms), 1);
}

/* State names round-trip; unknown names and values are refused. */
static void test_state_names(void **state) {
    (void)state;
    for (int s = 0; s < MAPSTORE_NODE_NLIVENESS; s++) {
        mapstore_liveness out;
        assert_int_equal(mapstore_liveness_parse(mapstore_liveness_name(s), &out), 0);
        assert_int_equal(out, s);
    }
    for (int s = 0; s < MAPSTORE_MEMBER_N; s++) {
        mapstore_membership out;
        assert_int_equal(mapstore_membership_parse(mapstore_membership_name(s), &out), 0);
        assert_int_equal(out, s);
    }
    for (int s = 0; s < MAPSTORE_MOVE_NSTATES; s++) {
        mapstore_move_state out;
        assert_int_equal(mapstore_move_state_parse(mapstore_move_state_name(s), &out), 0);
        assert_int_equal(out, s);
    }
    mapstore_liveness ns;
    mapstore_membership mb;
    assert_int_equal(mapstore_liveness_parse("up", &ns), KEEL_EINVAL);
    assert_int_equal(mapstore_liveness_parse("DRAINING", &ns), KEEL_EINVAL); /* membership */
    assert_int_equal(mapstore_membership_parse("UP", &mb), KEEL_EINVAL);     /* liveness */
    assert_int_equal(mapstore_liveness_parse(NULL, &ns), KEEL_EINVAL);
    assert_string_equal(mapstore_liveness_name((mapstore_liveness)99), "?");
    assert_string_equal(mapstore_membership_name((mapstore_membership)99), "?");
    assert_string_equal(mapstore_move_state_name(MAPSTORE_MOVE_CATCHING_UP), "CATCHING_UP");
}

/* ---- Partitions ------------------------------------------------------------- */

/* A new store lists P partitions, all unowned at epoch 0, unpinned. */
static void test_partitions_initial(void **state) {
    fx *f = *state;
    create(f, 128);
    mapstore_partition *ps;
    size_t n;
    assert_int_equal(mapstore_partition_list(f->ms, &ps, &n), 0);
    assert_int_equal(n, 128);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ps[i].id, i);
        assert_string_equal(ps[i].owner, "");
        assert_int_equal(ps[i].epoch, 0);
        assert_int_equal(ps[i].pinned, 0);
    }
    free(ps);
}

/* set_owner adds one to the epoch and one to the version, durably. */
static void test_set_owner_bumps_epoch_and_version(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    add_node(f->ms, "n2", 7002);
    uint64_t v0 = mapstore_version(f->ms), e, v;
    assert_int_equal(mapstore_partition_set_owner(f->ms, 3, "n1", &e, &v), 0);
    assert_int_equal(e, 1);
    assert_int_equal(v, v0 + 1);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 3, "n2", &e, &v), 0);
    assert_int_equal(e, 2);
    assert_int_equal(v, v0 + 2);
    reopen(f);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 3, &p), 0);
    assert_string_equal(p.owner, "n2");
    assert_int_equal(p.epoch, 2);
    assert_int_equal(mapstore_version(f->ms), v0 + 2);
    assert_int_equal(mapstore_partition_get(f->ms, 4, &p), 0);
    assert_int_equal(p.epoch, 0); /* its neighbours are untouched */
}

/* Unassigning (NULL owner) is an ownership change too. */
static void test_set_owner_null(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 0, "n1", NULL, NULL), 0);
    uint64_t e;
    assert_int_equal(mapstore_partition_set_owner(f->ms, 0, NULL, &e, NULL), 0);
    assert_int_equal(e, 2);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 0, &p), 0);
    assert_string_equal(p.owner, "");
}

/* A refused set_owner changes neither the epoch nor the version. */
static void test_set_owner_refusals_change_nothing(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 2, "n1", NULL, NULL), 0);
    uint64_t v = mapstore_version(f->ms);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 2, "ghost", NULL, NULL), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 2, "n1", NULL, NULL), KEEL_EEXIST);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 16, "n1", NULL, NULL), KEEL_ERANGE);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 1, "bad id", NULL, NULL), KEEL_EINVAL);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 2, &p), 0);
    assert_string_equal(p.owner, "n1");
    assert_int_equal(p.epoch, 1);
    assert_int_equal(mapstore_version(f->ms), v);
    assert_int_equal(mapstore_partition_get(f->ms, 16, &p), KEEL_ERANGE);
    assert_int_equal(mapstore_partition_get(f->ms, UINT32_MAX, &p), KEEL_ERANGE);
}

/* Bootstrap placement of many partitions bumps the version once, and each
 * placed partition's epoch once. */
static void test_place_bumps_version_once(void **state) {
    fx *f = *state;
    create(f, 64);
    add_node(f->ms, "n1", 7001);
    add_node(f->ms, "n2", 7002);
    uint64_t v0 = mapstore_version(f->ms), v;
    mapstore_placement pl[64];
    for (unsigned i = 0; i < 64; i++)
        pl[i] = (mapstore_placement){i, i % 2 ? "n2" : "n1"};
    assert_int_equal(mapstore_partition_place(f->ms, pl, 64, &v), 0);
    assert_int_equal(v, v0 + 1);
    reopen(f);
    assert_int_equal(mapstore_version(f->ms), v0 + 1);
    mapstore_partition *ps;
    size_t n;
    assert_int_equal(mapstore_partition_list(f->ms, &ps, &n), 0);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(ps[i].owner, i % 2 ? "n2" : "n1");
        assert_int_equal(ps[i].epoch, 1);
    }
    free(ps);
    assert_int_equal(mapstore_partition_place(f->ms, pl, 0, &v), 0); /* empty: no commit */
    assert_int_equal(v, v0 + 1);
}

/* One bad entry refuses the whole placement: nothing is placed. */
static void test_place_is_all_or_nothing(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 5, "n1", NULL, NULL), 0);
    uint64_t v = mapstore_version(f->ms);
    mapstore_placement owned[] = {{0, "n1"}, {5, "n1"}};
    assert_int_equal(mapstore_partition_place(f->ms, owned, 2, NULL), KEEL_EEXIST);
    mapstore_placement ghost[] = {{0, "n1"}, {1, "ghost"}};
    assert_int_equal(mapstore_partition_place(f->ms, ghost, 2, NULL), KEEL_ENOTFOUND);
    mapstore_placement twice[] = {{0, "n1"}, {0, "n1"}};
    assert_int_equal(mapstore_partition_place(f->ms, twice, 2, NULL), KEEL_EINVAL);
    mapstore_placement range[] = {{0, "n1"}, {16, "n1"}};
    assert_int_equal(mapstore_partition_place(f->ms, range, 2, NULL), KEEL_ERANGE);
    assert_int_equal(mapstore_partition_place(f->ms, NULL, 3, NULL), KEEL_EINVAL);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 0, &p), 0);
    assert_string_equal(p.owner, "");
    assert_int_equal(p.epoch, 0);
    assert_int_equal(mapstore_version(f->ms), v);
}

/* Pinning persists and is not a map change. */
static void test_pinned_roundtrip(void **state) {
    fx *f = *state;
    create(f, 16);
    assert_int_equal(mapstore_partition_set_pinned(f->ms, 9, 1), 0);
    assert_int_equal(mapstore_partition_set_pinned(f->ms, 9, 2), KEEL_EINVAL);
    assert_int_equal(mapstore_partition_set_pinned(f->ms, 99, 1), KEEL_ERANGE);
    reopen(f);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 9, &p), 0);
    assert_int_equal(p.pinned, 1);
    assert_int_equal(mapstore_version(f->ms), 0);
}

/* ---- Moves ------------------------------------------------------------------ */

/* Two nodes and partition 4 owned by n1 at epoch 1. */
static void move_fixture(fx *f) {
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    add_node(f->ms, "n2", 7002);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 4, "n1", NULL, NULL), 0);
}

/* A move records who, what, why and when through each phase; all of it
 * survives a reopen. */
static void test_move_roundtrip(void **state) {
    fx *f = *state;
    move_fixture(f);
    uint64_t id;
    assert_int_equal(mapstore_move_create(f->ms, 4, "n2", "u(n1)=1.4 gain=0.2", NOW, &id), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW + 1, NULL), 0);
    assert_int_equal(mapstore_move_set_bytes(f->ms, id, 123456789), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_CATCHING_UP, NOW + 2, NULL), 0);
    reopen(f);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.partition, 4);
    assert_string_equal(m.from, "n1");
    assert_string_equal(m.to, "n2");
    assert_int_equal(m.state, MAPSTORE_MOVE_CATCHING_UP);
    assert_int_equal(m.epoch, 1);
    assert_int_equal(m.bytes, 123456789);
    assert_string_equal(m.reason, "u(n1)=1.4 gain=0.2");
    assert_string_equal(m.abort_reason, "");
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_PLANNED], NOW);
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_COPYING], NOW + 1);
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_CATCHING_UP], NOW + 2);
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_FENCED], 0);
}

/* Commit gives the partition to the destination at epoch + 1 and bumps
 * the version, all in one step; the move then finishes as DONE. */
static void test_move_commit(void **state) {
    fx *f = *state;
    move_fixture(f);
    uint64_t id, e, v, v0 = mapstore_version(f->ms);
    assert_int_equal(mapstore_move_create(f->ms, 4, "n2", NULL, NOW, &id), 0);
    assert_int_equal(mapstore_version(f->ms), v0); /* planning is not a map change */
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW + 1, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_CATCHING_UP, NOW + 2, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_FENCED, NOW + 3, NULL), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW + 4, &e, &v), 0);
    assert_int_equal(e, 2);
    assert_int_equal(v, v0 + 1);
    reopen(f);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 4, &p), 0);
    assert_string_equal(p.owner, "n2");
    assert_int_equal(p.epoch, 2);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.state, MAPSTORE_MOVE_COMMITTED);
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_COMMITTED], NOW + 4);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_DONE, NOW + 5, NULL), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW + 6, NULL, NULL), KEEL_EINVAL);
}

/* Commit refuses a move that is not FENCED, or whose partition changed
 * hands since it was planned; nothing changes. */
static void test_move_commit_refusals(void **state) {
    fx *f = *state;
    move_fixture(f);
    uint64_t id;
    assert_int_equal(mapstore_move_create(f->ms, 4, "n2", NULL, NOW, &id), 0);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW, NULL, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_CATCHING_UP, NOW, NULL), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_FENCED, NOW, NULL), 0);
    add_node(f->ms, "n3", 7003);
    assert_int_equal(mapstore_partition_set_owner(f->ms, 4, "n3", NULL, NULL), 0);
    uint64_t v = mapstore_version(f->ms);
    assert_int_equal(mapstore_move_commit(f->ms, id, NOW, NULL, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_move_commit(f->ms, 999, NOW, NULL, NULL), KEEL_ENOTFOUND);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 4, &p), 0);
    assert_string_equal(p.owner, "n3");
    assert_int_equal(mapstore_version(f->ms), v);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.state, MAPSTORE_MOVE_FENCED);
}

/* Only the documented transitions are legal; abort keeps its reason. */
static void test_move_transitions(void **state) {
    fx *f = *state;
    move_fixture(f);
    uint64_t id;
    assert_int_equal(mapstore_move_create(f->ms, 4, "n2", NULL, NOW, &id), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_FENCED, NOW, NULL),
                     KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COMMITTED, NOW, NULL),
                     KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_DONE, NOW, NULL), KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_PLANNED, NOW, NULL),
                     KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, (mapstore_move_state)42, NOW, NULL),
                     KEEL_EINVAL);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW, "why"),
                     KEEL_EINVAL);
    assert_int_equal(
        mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_ABORTED, NOW + 9, "non-converging"), 0);
    assert_int_equal(mapstore_move_advance(f->ms, id, MAPSTORE_MOVE_COPYING, NOW, NULL),
                     KEEL_EINVAL);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, id, &m), 0);
    assert_int_equal(m.state, MAPSTORE_MOVE_ABORTED);
    assert_string_equal(m.abort_reason, "non-converging");
    assert_int_equal(m.at_ms[MAPSTORE_MOVE_ABORTED], NOW + 9);
    assert_true(mapstore_move_can_advance(MAPSTORE_MOVE_FENCED, MAPSTORE_MOVE_ABORTED));
    assert_false(mapstore_move_can_advance(MAPSTORE_MOVE_COMMITTED, MAPSTORE_MOVE_ABORTED));
}

/* A partition has at most one move in flight; list can show only the
 * unfinished ones. */
static void test_move_one_in_flight(void **state) {
    fx *f = *state;
    move_fixture(f);
    add_node(f->ms, "n3", 7003);
    uint64_t a, b;
    assert_int_equal(mapstore_move_create(f->ms, 4, "n2", NULL, NOW, &a), 0);
    assert_int_equal(mapstore_move_create(f->ms, 4, "n3", NULL, NOW, &b), KEEL_EEXIST);
    assert_int_equal(mapstore_move_advance(f->ms, a, MAPSTORE_MOVE_ABORTED, NOW, NULL), 0);
    assert_int_equal(mapstore_move_create(f->ms, 4, "n3", NULL, NOW, &b), 0);
    assert_true(b > a);
    mapstore_move *ms;
    size_t n;
    assert_int_equal(mapstore_move_list(f->ms, 0, &ms, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ms[0].id, a);
    free(ms);
    assert_int_equal(mapstore_move_list(f->ms, 1, &ms, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ms[0].id, b);
    free(ms);
}

/* Bad move input is refused with a specific code. */
static void test_move_bad_input(void **state) {
    fx *f = *state;
    move_fixture(f);
    uint64_t id;
    assert_int_equal(mapstore_move_create(f->ms, 4, "ghost", NULL, NOW, &id), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_move_create(f->ms, 4, "n1", NULL, NOW, &id), KEEL_EINVAL);
    assert_int_equal(mapstore_move_create(f->ms, 5, "n2", NULL, NOW, &id), KEEL_EINVAL);
    assert_int_equal(mapstore_move_create(f->ms, 16, "n2", NULL, NOW, &id), KEEL_ERANGE);
    char longr[MAPSTORE_REASON_MAX + 2];
    memset(longr, 'x', sizeof longr - 1);
    longr[sizeof longr - 1] = 0;
    assert_int_equal(mapstore_move_create(f->ms, 4, "n2", longr, NOW, &id), KEEL_EINVAL);
    mapstore_move m;
    assert_int_equal(mapstore_move_get(f->ms, 1, &m), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_move_get(f->ms, UINT64_MAX, &m), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_move_advance(f->ms, 7, MAPSTORE_MOVE_COPYING, NOW, NULL),
                     KEEL_ENOTFOUND);
    assert_int_equal(mapstore_move_set_bytes(f->ms, 7, 1), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_move_set_bytes(f->ms, 7, UINT64_MAX), KEEL_ERANGE);
    mapstore_move *all;
    size_t n;
    assert_int_equal(mapstore_move_list(f->ms, 0, &all, &n), 0);
    assert_int_equal(n, 0);
    free(all);
}

/* ---- Settings --------------------------------------------------------------- */

/* Settings keep their value and the time set; the age follows from it. */
static void test_settings_roundtrip_and_age(void **state) {
    fx *f = *state;
    create(f, 16);
    assert_int_equal(mapstore_setting_set(f->ms, "rebalance_paused", "1", NOW), 0);
    assert_int_equal(mapstore_setting_set(f->ms, "move_bytes_per_sec", "1000", NOW + 10), 0);
    assert_int_equal(mapstore_setting_set(f->ms, "move_bytes_per_sec", "2000", NOW + 500), 0);
    reopen(f);
    mapstore_setting s;
    assert_int_equal(mapstore_setting_get(f->ms, "move_bytes_per_sec", &s), 0);
    assert_string_equal(s.value, "2000");
    assert_int_equal(s.set_at_ms, NOW + 500);
    assert_int_equal(mapstore_setting_age_ms(&s, NOW + 5500), 5000);
    assert_int_equal(mapstore_setting_age_ms(&s, NOW), 0); /* clock went back */
    mapstore_setting *all;
    size_t n;
    assert_int_equal(mapstore_setting_list(f->ms, &all, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].name, "move_bytes_per_sec");
    assert_string_equal(all[1].name, "rebalance_paused");
    assert_int_equal(all[1].set_at_ms, NOW);
    free(all);
    assert_int_equal(mapstore_version(f->ms), 0); /* settings are not the map */
}

/* Unset removes a setting; bad names and values are refused. */
static void test_settings_unset_and_bad_input(void **state) {
    fx *f = *state;
    create(f, 16);
    assert_int_equal(mapstore_setting_set(f->ms, "x", "", NOW), 0);
    assert_int_equal(mapstore_setting_unset(f->ms, "x"), 0);
    mapstore_setting s;
    assert_int_equal(mapstore_setting_get(f->ms, "x", &s), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_setting_unset(f->ms, "x"), KEEL_ENOTFOUND);
    assert_int_equal(mapstore_setting_set(f->ms, "", "1", NOW), KEEL_EINVAL);
    assert_int_equal(mapstore_setting_set(f->ms, "a b", "1", NOW), KEEL_EINVAL);
    assert_int_equal(mapstore_setting_set(f->ms, "a", NULL, NOW), KEEL_EINVAL);
    char big[MAPSTORE_SETTING_VALUE_MAX + 2];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(mapstore_setting_set(f->ms, "a", big, NOW), KEEL_EINVAL);
    big[MAPSTORE_SETTING_VALUE_MAX] = 0;
    assert_int_equal(mapstore_setting_set(f->ms, "a", big, NOW), 0);
    assert_int_equal(mapstore_setting_get(f->ms, "a", &s), 0);
    assert_int_equal(strlen(s.value), MAPSTORE_SETTING_VALUE_MAX);
}

/* User data is bound, never spliced into SQL: quotes are just bytes. (Node
 * ids can no longer hold quotes - see test_id_rule_enforced - so the quotes
 * travel in a setting and a rack.) */
static void test_quotes_are_data(void **state) {
    fx *f = *state;
    create(f, 16);
    const char *evil = "');DROP_TABLE_nodes;--";
    assert_int_equal(mapstore_setting_set(f->ms, evil, "'\"", NOW), 0);
    mapstore_node n = node("o.brien", "h", 1);
    snprintf(n.rack, sizeof n.rack, "r');--");
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), 0);
    reopen(f);
    mapstore_setting s;
    assert_int_equal(mapstore_setting_get(f->ms, evil, &s), 0);
    assert_string_equal(s.value, "'\"");
    assert_int_equal(mapstore_node_get(f->ms, "o.brien", &n), 0);
    assert_string_equal(n.rack, "r');--");
}

/* Regression (issue 10, defect 3): the map store accepted any printable id,
 * '"' and '\\' included, and the coordinator printed them into the map
 * JSON unescaped. The store now enforces the one id rule [A-Za-z0-9._-]{1,64}
 * (core/id.h) for nodes, owners and move destinations, and the host rule. */
static void test_id_rule_enforced(void **state) {
    fx *f = *state;
    create(f, 16);
    const char *bad[] = {"a\"b", "a\\b", "o'brien", "a{b", "a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mapstore_node n = node(bad[i], "127.0.0.1", 1);
        assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EINVAL);
        assert_int_equal(mapstore_partition_set_owner(f->ms, 1, bad[i], NULL, NULL), KEEL_EINVAL);
    }
    mapstore_node h = node("n1", "h\"x", 1);
    assert_int_equal(mapstore_node_upsert(f->ms, &h, NOW), KEEL_EINVAL);
    mapstore_node *all;
    size_t nn;
    assert_int_equal(mapstore_node_list(f->ms, &all, &nn), 0);
    assert_int_equal(nn, 0);
    free(all);
}

/* ---- Durability ------------------------------------------------------------ */

/* A change acknowledged by a process that then dies without closing the
 * store is there when the store is reopened. */
static void test_durable_without_close(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    mapstore_free(f->ms);
    f->ms = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[MAPSTORE_ERR_MAX];
        mapstore *ms;
        if (mapstore_sqlite_open(f->path, NULL, &ms, err, sizeof err)) _exit(2);
        if (mapstore_bump_term(ms, NULL)) _exit(3);
        if (mapstore_partition_set_owner(ms, 7, "n1", NULL, NULL)) _exit(4);
        if (mapstore_setting_set(ms, "k", "v", NOW)) _exit(5);
        _exit(0); /* no mapstore_free: nothing is flushed or checkpointed */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(exists(f->path, "-wal")); /* the changes live only in the WAL */
    reopen(f);
    assert_int_equal(mapstore_term(f->ms), 1);
    assert_int_equal(mapstore_version(f->ms), 2);
    mapstore_partition p;
    assert_int_equal(mapstore_partition_get(f->ms, 7, &p), 0);
    assert_string_equal(p.owner, "n1");
    assert_int_equal(p.epoch, 1);
    mapstore_setting s;
    assert_int_equal(mapstore_setting_get(f->ms, "k", &s), 0);
}

/* The mapstore.commit failpoint fails a transaction at its COMMIT: the
 * call returns KEEL_EIO and changes nothing, in memory or on disk. */
static void test_commit_failpoint_changes_nothing(void **state) {
    fx *f = *state;
    create(f, 16);
    add_node(f->ms, "n1", 7001);
    uint64_t term = mapstore_term(f->ms), version = mapstore_version(f->ms);
    assert_int_equal(failpoint_set("mapstore.commit", "1*error", NULL, 0), 0);
    mapstore_node n = node("n2", "127.0.0.1", 7002);
    assert_int_equal(mapstore_node_upsert(f->ms, &n, NOW), KEEL_EIO);
    assert_int_equal(failpoint_set("mapstore.commit", "1*error", NULL, 0), 0);
    assert_int_equal(mapstore_bump_term(f->ms, NULL), KEEL_EIO);
    failpoint_clear_all();
    assert_int_equal(mapstore_term(f->ms), term);
    assert_int_equal(mapstore_version(f->ms), version);
    assert_int_equal(mapstore_node_get(f->ms, "n2", &n), KEEL_ENOTFOUND);
    reopen(f);
    assert_int_equal(mapstore_term(f->ms), term);
    assert_int_equal(mapstore_node_get(f->ms, "n2", &n), KEEL_ENOTFOUND);
    add_node(f->ms, "n2", 7002); /* and the store still works */
}

/* ---- The read cache ------------------------------------------------------- */

/* Everything the handle would answer, as one comparable snapshot. */
typedef struct view {
    mapstore_node *nodes;
    size_t nn;
    mapstore_partition *parts;
    size_t np;
    mapstore_move *moves;
    size_t nm;
    mapstore_setting *settings;
    size_t ns;
    uint64_t version, term;
} view;

static void take_view(mapstore *ms, view *v) {
    memset(v, 0, sizeof *v);
    assert_int_equal(mapstore_node_list(ms, &v->nodes, &v->nn), 0);
    assert_int_equal(mapstore_partition_list(ms, &v->parts, &v->np), 0);
    assert_int_equal(mapstore_move_list(ms, 0, &v->moves, &v->nm), 0);
    assert_int_equal(mapstore_setting_list(ms, &v->settings, &v->ns), 0);
    v->version = mapstore_version(ms);
    v->term = mapstore_term(ms);
}

static void free_view(view *v) {
    free(v->nodes);
    free(v->parts);
    free(v->moves);
    free(v->settings);
}

static void same_view(const view *a, const view *b) {
    assert_int_equal(a->nn, b->nn);
    for (size_t i = 0; i < a->nn; i++) {
        assert_string_equal(a->nodes[i].id, b->nodes[i].id);
        assert_string_equal(a->nodes[i].host, b->nodes[i].host);
        assert_int_equal(a->nodes[i].port, b->nodes[i].port);
        assert_int_equal(a->nodes[i].liveness, b->nodes[i].liveness);
        assert_int_equal(a->nodes[i].membership, b->nodes[i].membership);
        assert_int_equal(a->nodes[i].registered_at_ms, b->nodes[i].registered_at_ms);
        assert_int_equal(a->nodes[i].last_heartbeat_ms, b->nodes[i].last_heartbeat_ms);
        assert_true(a->nodes[i].capacity == b->nodes[i].capacity);
    }
    assert_int_equal(a->np, b->np);
    for (size_t i = 0; i < a->np; i++) {
        assert_string_equal(a->parts[i].owner, b->parts[i].owner);
        assert_int_equal(a->parts[i].epoch, b->parts[i].epoch);
        assert_int_equal(a->parts[i].pinned, b->parts[i].pinned);
    }
    assert_int_equal(a->nm, b->nm);
    for (size_t i = 0; i < a->nm; i++) {
        const mapstore_move *x = &a->moves[i], *y = &b->moves[i];
        assert_int_equal(x->id, y->id);
        assert_int_equal(x->partition, y->partition);
        assert_string_equal(x->from, y->from);
        assert_string_equal(x->to, y->to);
        assert_int_equal(x->state, y->state);
        assert_int_equal(x->epoch, y->epoch);
        assert_int_equal(x->bytes, y->bytes);
        assert_memory_equal(x->at_ms, y->at_ms, sizeof x->at_ms);
        assert_string_equal(x->reason, y->reason);
        assert_string_equal(x->abort_reason, y->abort_reason);
    }
    assert_int_equal(a->ns, b->ns);
    for (size_t i = 0; i < a->ns; i++) {
        assert_string_equal(a->settings[i].name, b->settings[i].name);
        assert_string_equal(a->settings[i].value, b->settings[i].value);
        assert_int_equal(a->settings[i].set_at_ms, b->settings[i].set_at_ms);
    }
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->term, b->term);
}

static unsigned xs_next(uint64_t *x, unsigned n) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (unsigned)(*x % n);
}

/* Random calls of every mutating kind (successes and refusals alike), with
 * the cache warm or cold; returns how many whole moves committed. */
static int random_calls(fx *f, uint64_t *rng, int round, int calls) {
    static const char *const ids[] = {"n0", "n1", "n2", "n3"};
    static const char *const names[] = {"paused", "stop_ratio", "quarantined"};
    int commits = 0;
    for (int k = 0; k < calls; k++) {
        int64_t now = NOW + round * 1000 + k;
        const char *id = ids[xs_next(rng, 4)];
        unsigned p = xs_next(rng, 16);
        mapstore_node n =
            node(id, xs_next(rng, 2) ? "127.0.0.1" : "10.0.0.9", 7000 + (int)xs_next(rng, 3));
        uint64_t mid = 1 + xs_next(rng, 12);
        mapstore_move mv;
        mapstore_partition *ps;
        size_t np, kp = 0;
        mapstore_placement pl[16];
        int rc = 0;
        switch (xs_next(rng, 15)) {
        case 0:
            rc = mapstore_node_upsert(f->ms, &n, now);
            break;
        case 1:
            rc = mapstore_node_set_liveness(f->ms, id, (mapstore_liveness)xs_next(rng, 3));
            break;
        case 2:
            rc = mapstore_node_set_membership(f->ms, id, (mapstore_membership)xs_next(rng, 2));
            break;
        case 3:
            rc = mapstore_node_heartbeat(f->ms, id, now);
            break;
        case 4:
            rc = mapstore_partition_set_owner(f->ms, p, xs_next(rng, 5) ? id : NULL, NULL, NULL);
            break;
        case 5:
            rc = mapstore_partition_set_pinned(f->ms, p, (int)xs_next(rng, 2));
            break;
        case 6:
            rc = mapstore_move_create(f->ms, p, id, "r", now, NULL);
            break;
        case 7:
            if (mapstore_move_get(f->ms, mid, &mv) == 0)
                rc = mapstore_move_advance(f->ms, mid, (mapstore_move_state)(mv.state + 1), now,
                                           NULL);
            break;
        case 8:
            rc = mapstore_move_advance(f->ms, mid, MAPSTORE_MOVE_ABORTED, now, "x");
            break;
        case 9:
            rc = mapstore_move_commit(f->ms, mid, now, NULL, NULL);
            break;
        case 10:
            rc = mapstore_move_set_bytes(f->ms, mid, xs_next(rng, 100000));
            break;
        case 11:
            rc = xs_next(rng, 3) ? mapstore_setting_set(f->ms, names[xs_next(rng, 3)], "v1", now)
                                 : mapstore_setting_unset(f->ms, names[xs_next(rng, 3)]);
            break;
        case 12: /* a whole move: create, copy, catch up, fence, commit */
            if (mapstore_move_create(f->ms, p, id, "w", now, &mid) == 0) {
                for (int st = MAPSTORE_MOVE_COPYING; st <= MAPSTORE_MOVE_FENCED; st++)
                    assert_int_equal(
                        mapstore_move_advance(f->ms, mid, (mapstore_move_state)st, now, NULL), 0);
                assert_int_equal(mapstore_move_commit(f->ms, mid, now + 1, NULL, NULL), 0);
                commits++;
            }
            break;
        default: /* bootstrap placement of what is unowned */
            assert_int_equal(mapstore_partition_list(f->ms, &ps, &np), 0);
            for (size_t i = 0; i < np; i++)
                if (!ps[i].owner[0]) pl[kp++] = (mapstore_placement){ps[i].id, id};
            free(ps);
            rc = mapstore_partition_place(f->ms, pl, kp, NULL);
        }
        (void)rc; /* refusals are part of the test: they must change nothing */
    }
    return commits;
}

/* After random sequences of every mutating call, what the cached handle
 * answers equals what a fresh open reads from the file; and once loaded,
 * reads cost no backend read. */
static void test_cache_matches_store(void **state) {
    fx *f = *state;
    create(f, 16);
    uint64_t rng = 88172645463325252ull;
    int commits = 0;
    for (int round = 0; round < 16; round++) {
        if (round % 2) { /* warm: every part loaded before the writes */
            view w;
            take_view(f->ms, &w);
            free_view(&w);
        }
        commits += random_calls(f, &rng, round, 80);
        view a, b, c;
        take_view(f->ms, &a);
        uint64_t r0, r1;
        mapstore_counters(f->ms, &r0, NULL);
        take_view(f->ms, &c); /* served from memory */
        mapstore_counters(f->ms, &r1, NULL);
        assert_int_equal(r1, r0);
        free_view(&c);
        reopen(f);
        take_view(f->ms, &b);
        same_view(&a, &b);
        free_view(&a);
        free_view(&b);
    }
    assert_true(commits >= 5); /* the commit path was exercised, warm and cold */
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

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

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_create_open_roundtrip),
        T(test_cluster_ids_differ),
        T(test_create_bad_partitions),
        T(test_create_over_existing_refused),
        T(test_create_over_garbage_or_wal_refused),
        T(test_create_leaves_no_temp_files),
        T(test_open_missing),
        T(test_open_garbage_refused),
        T(test_open_empty_file_refused),
        T(test_open_damaged_page_refused),
        T(test_open_foreign_sqlite_refused),
        T(test_open_unknown_schema_refused),
        T(test_open_migrates_v1_node_state),
        T(test_open_migrates_file_from_version_1),
        T(test_open_missing_partition_row_refused),
        T(test_open_wrong_partitions_refused),
        T(test_open_wrong_cluster_id_refused),
        T(test_open_twice_refused),
        cmocka_unit_test(test_free_null),
        T(test_term_bump_persists),
        T(test_commit_failpoint_changes_nothing),
        T(test_counters_at_limit),
        T(test_node_roundtrip),
        T(test_node_update_keeps_registered),
        T(test_node_state_and_heartbeat),
        T(test_node_removed_is_final),
        T(test_node_changes_and_version),
        T(test_node_bad_input),
        cmocka_unit_test(test_state_names),
        T(test_partitions_initial),
        T(test_set_owner_bumps_epoch_and_version),
        T(test_set_owner_null),
        T(test_set_owner_refusals_change_nothing),
        T(test_place_bumps_version_once),
        T(test_place_is_all_or_nothing),
        T(test_pinned_roundtrip),
        T(test_move_roundtrip),
        T(test_move_commit),
        T(test_move_commit_refusals),
        T(test_move_transitions),
        T(test_move_one_in_flight),
        T(test_move_bad_input),
        T(test_settings_roundtrip_and_age),
        T(test_settings_unset_and_bad_input),
        T(test_quotes_are_data),
        T(test_id_rule_enforced),
        T(test_durable_without_close),
        T(test_cache_matches_store),
    };
    /* The cases that do not reach into SQLite's file, for the etcd backend. */
    const struct CMUnitTest both[] = {
        T(test_create_open_roundtrip),
        T(test_open_wrong_partitions_refused),
        T(test_open_wrong_cluster_id_refused),
        T(test_term_bump_persists),
        T(test_commit_failpoint_changes_nothing),
        T(test_node_roundtrip),
        T(test_node_update_keeps_registered),
        T(test_node_state_and_heartbeat),
        T(test_node_removed_is_final),
        T(test_node_changes_and_version),
        T(test_node_bad_input),
        T(test_partitions_initial),
        T(test_set_owner_bumps_epoch_and_version),
        T(test_set_owner_null),
        T(test_set_owner_refusals_change_nothing),
        T(test_place_bumps_version_once),
        T(test_place_is_all_or_nothing),
        T(test_pinned_roundtrip),
        T(test_move_roundtrip),
        T(test_move_commit),
        T(test_move_commit_refusals),
        T(test_move_transitions),
        T(test_move_one_in_flight),
        T(test_move_bad_input),
        T(test_settings_roundtrip_and_age),
        T(test_settings_unset_and_bad_input),
        T(test_quotes_are_data),
        T(test_id_rule_enforced),
        T(test_cache_matches_store),
    };
    int failed = cmocka_run_group_tests_name("sqlite", tests, group_sqlite, NULL);
    if (etcd_fixture_available("test-mapstore group etcd"))
        failed += cmocka_run_group_tests_name("etcd", both, group_etcd, group_etcd_end);
    return failed;
}
