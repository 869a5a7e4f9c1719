/* mapstore_sqlite.c - the map store on an embedded SQLite database (see
 * mapstore.h for the contract and docs/mapstore.md for the schema).
 *
 * Durability. The database runs in WAL mode with synchronous=FULL: COMMIT
 * returns only after the WAL is fsynced, so every call that returns 0 has
 * made its change durable. Every mutating call runs as one BEGIN IMMEDIATE ..
 * COMMIT (in_tx); the do_* functions run inside it, and any failure rolls the
 * whole call back. Foreign keys are on, so an owner, a move's nodes and a
 * move's partition always exist.
 *
 * Identity. The file carries application_id 'KEEL' and user_version = the
 * schema version in its SQLite header, and a one-row `cluster` table with the
 * cluster id, P, the term and the map version. Open checks all of these and
 * runs PRAGMA quick_check before anything else may write, and it never
 * writes to a file it has not validated: a garbage file is refused untouched.
 *
 * Creation is all-or-nothing: the whole store is built under a temporary
 * name beside the target (in rollback-journal mode, then switched to WAL)
 * and link(2)ed into place, which fails if the target exists. A crash during
 * creation leaves at most a stray temporary file, never a half-made map.
 *
 * One writer. The connection uses locking_mode=EXCLUSIVE and takes its write
 * lock at open, keeping it until close: a second coordinator on the same
 * store is refused (KEEL_EAGAIN) instead of silently sharing it.
 *
 * Caches. term and version are kept in memory (the lock makes this process
 * their only writer). Inside a transaction the do_* functions update
 * tx_term/tx_version, copied to term/version only after COMMIT succeeds.
 *
 * All SQL is static text; user data goes through bound parameters only.
 */
#include "coord/mapstore.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/failpoint.h"
#include "core/id.h"

#define MSQ_APP_ID 1262830924 /* 0x4b45454c, "KEEL": PRAGMA application_id */
#define MSQ_SCHEMA_VERSION 3  /* PRAGMA user_version; 1 and 2 are migrated at open */
#define MSQ_STR_(x) #x
#define MSQ_STR(x) MSQ_STR_(x)
#define MSQ_U63 "9223372036854775807"

/* Schema version 3 (docs/mapstore.md). Run once, at creation, inside the
 * creating transaction. Version 2 split version 1's node `state` into
 * liveness and membership (see migrate_v1); version 3 added each
 * partition's replicas, ISR, leader epoch and partition epoch (see
 * migrate_v2). Replicas and ISR are node ids joined by ',' (the id rule
 * has no ','), leader first; '' when unowned. */
/* clang-format off */
/* The version 3 partition columns, as CREATE TABLE and ALTER TABLE both
 * spell them (sep between them). */
#define PART_REP_COLUMNS(sep)                                                                      \
    " replicas TEXT NOT NULL DEFAULT ''" sep                                                       \
    " isr TEXT NOT NULL DEFAULT ''" sep                                                            \
    " leader_epoch INTEGER NOT NULL DEFAULT 0 CHECK (leader_epoch >= 0)" sep                       \
    " partition_epoch INTEGER NOT NULL DEFAULT 0 CHECK (partition_epoch >= 0)"
#define NODES_TABLE(name)                                                                          \
    "CREATE TABLE " name " ("                                                                      \
    " id TEXT PRIMARY KEY NOT NULL,"                                                               \
    " host TEXT NOT NULL,"                                                                         \
    " port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"                                     \
    " rack TEXT NOT NULL,"                                                                         \
    " capacity REAL NOT NULL CHECK (capacity >= 0),"                                               \
    " liveness TEXT NOT NULL CHECK (liveness IN ('UP','SUSPECT','DOWN')),"                         \
    " membership TEXT NOT NULL CHECK (membership IN ('ACTIVE','DRAINING','REMOVED')),"             \
    " registered_at_ms INTEGER NOT NULL,"                                                          \
    " last_heartbeat_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;"
static const char schema_sql[] =
    "PRAGMA application_id = " MSQ_STR(MSQ_APP_ID) ";"
    "PRAGMA user_version = " MSQ_STR(MSQ_SCHEMA_VERSION) ";"
    "CREATE TABLE cluster ("
    " singleton INTEGER PRIMARY KEY CHECK (singleton = 1),"
    " cluster_id TEXT NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 64),"
    " partitions INTEGER NOT NULL CHECK (partitions BETWEEN 16 AND 16384"
    "  AND (partitions & (partitions - 1)) = 0),"
    " term INTEGER NOT NULL CHECK (term >= 0),"
    " map_version INTEGER NOT NULL CHECK (map_version >= 0),"
    " created_at_ms INTEGER NOT NULL) STRICT;"
    NODES_TABLE("nodes")
    "CREATE TABLE partitions ("
    " id INTEGER PRIMARY KEY CHECK (id >= 0),"
    " owner TEXT REFERENCES nodes(id),"
    " epoch INTEGER NOT NULL CHECK (epoch >= 0),"
    " pinned INTEGER NOT NULL CHECK (pinned IN (0, 1)),"
    PART_REP_COLUMNS(",") ") STRICT;"
    "CREATE INDEX partitions_owner ON partitions(owner);"
    "CREATE TABLE moves ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " partition INTEGER NOT NULL REFERENCES partitions(id),"
    " from_node TEXT NOT NULL REFERENCES nodes(id),"
    " to_node TEXT NOT NULL REFERENCES nodes(id),"
    " state TEXT NOT NULL CHECK (state IN ('PLANNED','COPYING','CATCHING_UP','FENCED',"
    "  'COMMITTED','DONE','ABORTED')),"
    " epoch INTEGER NOT NULL CHECK (epoch >= 0),"
    " bytes INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0),"
    " reason TEXT NOT NULL,"
    " abort_reason TEXT NOT NULL DEFAULT '',"
    " planned_at_ms INTEGER NOT NULL,"
    " copying_at_ms INTEGER NOT NULL DEFAULT 0,"
    " catching_up_at_ms INTEGER NOT NULL DEFAULT 0,"
    " fenced_at_ms INTEGER NOT NULL DEFAULT 0,"
    " committed_at_ms INTEGER NOT NULL DEFAULT 0,"
    " done_at_ms INTEGER NOT NULL DEFAULT 0,"
    " aborted_at_ms INTEGER NOT NULL DEFAULT 0,"
    " CHECK (from_node <> to_node)) STRICT;"
    "CREATE UNIQUE INDEX moves_one_in_flight ON moves(partition)"
    " WHERE state IN ('PLANNED','COPYING','CATCHING_UP','FENCED');"
    "CREATE INDEX moves_unfinished ON moves(id) WHERE state NOT IN ('DONE','ABORTED');"
    "CREATE TABLE settings ("
    " name TEXT PRIMARY KEY NOT NULL,"
    " value TEXT NOT NULL,"
    " set_at_ms INTEGER NOT NULL) STRICT, WITHOUT ROWID;";
/* clang-format on */

#define NODE_COLS                                                                                  \
    "id, host, port, rack, capacity, liveness, membership, registered_at_ms, last_heartbeat_ms"
#define PART_COLS "id, owner, epoch, pinned, replicas, isr, leader_epoch, partition_epoch"
#define MOVE_COLS                                                                                  \
    "id, partition, from_node, to_node, state, epoch, bytes, reason, abort_reason,"                \
    " planned_at_ms, copying_at_ms, catching_up_at_ms, fenced_at_ms, committed_at_ms,"             \
    " done_at_ms, aborted_at_ms"
#define IN_FLIGHT "('PLANNED','COPYING','CATCHING_UP','FENCED')"
/* Puts a move in state ?2 at time ?3: stamps that state's column only. */
#define AT(col, st) " " col " = CASE ?2 WHEN '" st "' THEN ?3 ELSE " col " END,"
/* clang-format off */
#define MOVE_ADVANCE_SQL                                                                           \
    "UPDATE moves SET"                                                                             \
    AT("copying_at_ms", "COPYING")                                                                 \
    AT("catching_up_at_ms", "CATCHING_UP")                                                         \
    AT("fenced_at_ms", "FENCED")                                                                   \
    AT("committed_at_ms", "COMMITTED")                                                             \
    AT("done_at_ms", "DONE")                                                                       \
    AT("aborted_at_ms", "ABORTED")                                                                 \
    " abort_reason = CASE ?2 WHEN 'ABORTED' THEN ?4 ELSE abort_reason END,"                        \
    " state = ?2 WHERE id = ?1"
/* clang-format on */

/* Prepared statements, by index. */
#define MSQ_STATEMENTS(X)                                                                          \
    X(BEGIN, "BEGIN IMMEDIATE")                                                                    \
    X(COMMIT, "COMMIT")                                                                            \
    X(ROLLBACK, "ROLLBACK")                                                                        \
    X(CLUSTER_GET, "SELECT cluster_id, partitions, term, map_version FROM cluster"                 \
                   " WHERE singleton = 1")                                                         \
    X(PART_SHAPE, "SELECT count(*), min(id), max(id) FROM partitions")                             \
    X(BUMP_TERM, "UPDATE cluster SET term = term + 1 WHERE singleton = 1 AND term < " MSQ_U63      \
                 " RETURNING term")                                                                \
    X(BUMP_VERSION, "UPDATE cluster SET map_version = map_version + 1 WHERE singleton = 1"         \
                    " AND map_version < " MSQ_U63 " RETURNING map_version")                        \
    X(NODE_GET, "SELECT " NODE_COLS " FROM nodes WHERE id = ?1")                                   \
    X(NODE_LIST, "SELECT " NODE_COLS " FROM nodes ORDER BY id")                                    \
    X(NODE_INSERT,                                                                                 \
      "INSERT INTO nodes (" NODE_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)")             \
    X(NODE_UPDATE, "UPDATE nodes SET host = ?2, port = ?3, rack = ?4, capacity = ?5,"              \
                   " liveness = ?6, membership = ?7, last_heartbeat_ms = ?8 WHERE id = ?1")        \
    X(NODE_SET_LIVENESS, "UPDATE nodes SET liveness = ?2 WHERE id = ?1")                           \
    X(NODE_SET_MEMBERSHIP, "UPDATE nodes SET membership = ?2 WHERE id = ?1")                       \
    X(NODE_HEARTBEAT, "UPDATE nodes SET last_heartbeat_ms = ?2 WHERE id = ?1")                     \
    X(PART_GET, "SELECT " PART_COLS " FROM partitions WHERE id = ?1")                              \
    X(PART_LIST, "SELECT " PART_COLS " FROM partitions ORDER BY id")                               \
    X(PART_INSERT, "INSERT INTO partitions (id, owner, epoch, pinned) VALUES (?1, NULL, 0, 0)")    \
    X(PART_PUT, "UPDATE partitions SET owner = ?2, epoch = ?3, replicas = ?4, isr = ?5,"           \
                " leader_epoch = ?6, partition_epoch = ?7 WHERE id = ?1")                          \
    X(PART_SET_PINNED, "UPDATE partitions SET pinned = ?2 WHERE id = ?1")                          \
    X(MOVE_INSERT, "INSERT INTO moves (partition, from_node, to_node, state, epoch, reason,"       \
                   " planned_at_ms) VALUES (?1, ?2, ?3, 'PLANNED', ?4, ?5, ?6) RETURNING id")      \
    X(MOVE_GET, "SELECT " MOVE_COLS " FROM moves WHERE id = ?1")                                   \
    X(MOVE_LIST, "SELECT " MOVE_COLS " FROM moves ORDER BY id")                                    \
    X(MOVE_LIST_UNFINISHED, "SELECT " MOVE_COLS " FROM moves"                                      \
                            " WHERE state NOT IN ('DONE','ABORTED') ORDER BY id")                  \
    X(MOVE_IN_FLIGHT, "SELECT id FROM moves WHERE partition = ?1 AND state IN " IN_FLIGHT)         \
    X(MOVE_ADVANCE, MOVE_ADVANCE_SQL)                                                              \
    X(MOVE_SET_BYTES, "UPDATE moves SET bytes = ?2 WHERE id = ?1")                                 \
    X(SET_PUT, "INSERT INTO settings (name, value, set_at_ms) VALUES (?1, ?2, ?3)"                 \
               " ON CONFLICT (name) DO UPDATE SET value = excluded.value,"                         \
               " set_at_ms = excluded.set_at_ms")                                                  \
    X(SET_GET, "SELECT name, value, set_at_ms FROM settings WHERE name = ?1")                      \
    X(SET_LIST, "SELECT name, value, set_at_ms FROM settings ORDER BY name")                       \
    X(SET_DEL, "DELETE FROM settings WHERE name = ?1")

enum {
#define MSQ_ENUM(name, sql) ST_##name,
    MSQ_STATEMENTS(MSQ_ENUM)
#undef MSQ_ENUM
        ST__COUNT
};

static const char *const stmt_sql[ST__COUNT] = {
#define MSQ_SQL(name, sql) sql,
    MSQ_STATEMENTS(MSQ_SQL)
#undef MSQ_SQL
};

typedef struct msq {
    sqlite3 *db;
    sqlite3_stmt *st[ST__COUNT];
    uint64_t term, version;       /* committed */
    uint64_t tx_term, tx_version; /* inside the open transaction */
} msq;

/* ---- Errors -------------------------------------------------------------- */

static int keel_code(int src) {
    switch (src & 0xff) {
    case SQLITE_NOMEM:
        return KEEL_ENOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return KEEL_ECORRUPT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return KEEL_EAGAIN;
    case SQLITE_CONSTRAINT:
        if (src == SQLITE_CONSTRAINT_FOREIGNKEY) return KEEL_ENOTFOUND;
        if (src == SQLITE_CONSTRAINT_UNIQUE || src == SQLITE_CONSTRAINT_PRIMARYKEY)
            return KEEL_EEXIST;
        return KEEL_EINVAL;
    default:
        return KEEL_EIO;
    }
}

/* Records an SQLite failure on ms and returns its KEEL_E*. */
static int sq_fail(mapstore *ms, msq *q, int src, const char *what) {
    return mapstore__errf(ms, keel_code(src), "%s: %s", what, sqlite3_errmsg(q->db));
}

static void seterr(char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errcap, const char *fmt, ...) {
    if (!err || !errcap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
    for (char *c = err; *c; c++) /* one line: SQLite's messages may hold newlines */
        if (*c == '\n') *c = ' ';
}

/* ---- Statements ------------------------------------------------------------- */

/* Returns statement i, reset and with no bindings. */
static sqlite3_stmt *stmt(msq *q, int i) {
    sqlite3_reset(q->st[i]);
    sqlite3_clear_bindings(q->st[i]);
    return q->st[i];
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Steps st to completion, expecting no rows. */
static int step_done(mapstore *ms, msq *q, sqlite3_stmt *st, const char *what) {
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    return src == SQLITE_DONE ? 0 : sq_fail(ms, q, src, what);
}

/* Steps st once: 1 for a row (left current), 0 for none, or a KEEL_E*. */
static int step_row(mapstore *ms, msq *q, sqlite3_stmt *st, const char *what) {
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) return 1;
    sqlite3_reset(st);
    return src == SQLITE_DONE ? 0 : sq_fail(ms, q, src, what);
}

/* Runs an UPDATE .. RETURNING of one integer: 0 and *v, KEEL_ERANGE when no
 * row matched (a guard in its WHERE failed), or a KEEL_E*. */
static int step_returning(mapstore *ms, msq *q, sqlite3_stmt *st, const char *what, uint64_t *v) {
    int rc = step_row(ms, q, st, what);
    if (rc < 0) return rc;
    if (rc == 0) return KEEL_ERANGE;
    *v = (uint64_t)sqlite3_column_int64(st, 0);
    /* Finish the statement so the UPDATE is applied before the next one. */
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(ms, q, rc, what);
}

/* Copies text column col into dst[cap]; NULL becomes "". KEEL_ECORRUPT if it
 * does not fit (the store only ever holds validated values). */
static int col_text(sqlite3_stmt *st, int col, char *dst, size_t cap) {
    const unsigned char *s = sqlite3_column_text(st, col);
    size_t n = s ? (size_t)sqlite3_column_bytes(st, col) : 0;
    if (n >= cap || (s && memchr(s, 0, n))) return KEEL_ECORRUPT;
    memcpy(dst, s ? (const char *)s : "", n);
    dst[n] = 0;
    return 0;
}

static int col_u64(sqlite3_stmt *st, int col, uint64_t *v) {
    int64_t x = sqlite3_column_int64(st, col);
    if (x < 0) return KEEL_ECORRUPT;
    *v = (uint64_t)x;
    return 0;
}

static int corrupt_row(mapstore *ms, const char *table) {
    return mapstore__errf(ms, KEEL_ECORRUPT, "malformed row in table %s", table);
}

/* ---- Transactions ------------------------------------------------------------- */

typedef int (*tx_fn)(mapstore *ms, msq *q, void *arg);

/* Runs fn(arg) as one durable transaction: all of it, or (on any error)
 * none of it. */
static int in_tx(mapstore *ms, tx_fn fn, void *arg) {
    msq *q = mapstore__impl(ms);
    int rc;
    q->tx_term = q->term;
    q->tx_version = q->version;
    if ((rc = step_done(ms, q, stmt(q, ST_BEGIN), "begin"))) return rc;
    if ((rc = fn(ms, q, arg))) goto fail;
    if (FAILPOINT("mapstore.commit") == FP_ERROR) {
        rc = mapstore__errf(ms, KEEL_EIO, "commit: failpoint mapstore.commit");
        goto fail;
    }
    if ((rc = step_done(ms, q, stmt(q, ST_COMMIT), "commit"))) goto fail;
    q->term = q->tx_term;
    q->version = q->tx_version;
    return 0;
fail:
    if (!sqlite3_get_autocommit(q->db)) {
        sqlite3_step(stmt(q, ST_ROLLBACK));
        sqlite3_reset(q->st[ST_ROLLBACK]);
    }
    return rc;
}

static int do_bump_version(mapstore *ms, msq *q) {
    int rc = step_returning(ms, q, stmt(q, ST_BUMP_VERSION), "bump version", &q->tx_version);
    if (rc == KEEL_ERANGE) return mapstore__errf(ms, rc, "map version would overflow");
    return rc;
}

static int do_bump_term(mapstore *ms, msq *q, void *arg) {
    int rc = step_returning(ms, q, stmt(q, ST_BUMP_TERM), "bump term", &q->tx_term);
    if (rc == KEEL_ERANGE) return mapstore__errf(ms, rc, "term would overflow");
    return rc;
}

/* ---- Row readers ------------------------------------------------------------- */

static int read_node(sqlite3_stmt *st, mapstore_node *n) {
    char live[16], member[16];
    if (col_text(st, 0, n->id, sizeof n->id) || col_text(st, 1, n->host, sizeof n->host) ||
        col_text(st, 3, n->rack, sizeof n->rack) || col_text(st, 5, live, sizeof live) ||
        col_text(st, 6, member, sizeof member) || mapstore_liveness_parse(live, &n->liveness) ||
        mapstore_membership_parse(member, &n->membership))
        return KEEL_ECORRUPT;
    n->port = sqlite3_column_int(st, 2);
    n->capacity = sqlite3_column_double(st, 4);
    n->registered_at_ms = sqlite3_column_int64(st, 7);
    n->last_heartbeat_ms = sqlite3_column_int64(st, 8);
    return 0;
}

/* Splits text column col (ids joined by ',') into ids[]; '' is none. */
static int col_ids(sqlite3_stmt *st, int col, char ids[][KEEL_ID_MAX + 1], unsigned *n) {
    char buf[KEEL_RF_MAX * (KEEL_ID_MAX + 1) + 1];
    if (col_text(st, col, buf, sizeof buf)) return KEEL_ECORRUPT;
    *n = 0;
    if (!buf[0]) return 0;
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = 0;
        if (*n == KEEL_RF_MAX || !keel_id_validz(tok)) return KEEL_ECORRUPT;
        snprintf(ids[(*n)++], KEEL_ID_MAX + 1, "%s", tok);
    }
    return 0;
}

static int read_partition(sqlite3_stmt *st, mapstore_partition *p) {
    char isr[KEEL_RF_MAX][KEEL_ID_MAX + 1];
    unsigned ni;
    memset(p, 0, sizeof *p);
    p->id = (unsigned)sqlite3_column_int64(st, 0);
    p->pinned = sqlite3_column_int(st, 3);
    if (col_text(st, 1, p->owner, sizeof p->owner) || col_u64(st, 2, &p->epoch) ||
        col_ids(st, 4, p->replicas, &p->nreplicas) || col_ids(st, 5, isr, &ni) ||
        col_u64(st, 6, &p->leader_epoch) || col_u64(st, 7, &p->partition_epoch))
        return KEEL_ECORRUPT;
    for (unsigned i = 0; i < ni; i++) {
        unsigned k = 0;
        while (k < p->nreplicas && strcmp(p->replicas[k], isr[i]))
            k++;
        if (k == p->nreplicas || (p->isr >> k) & 1) return KEEL_ECORRUPT;
        p->isr |= 1u << k;
    }
    return mapstore__part_check(p);
}

/* ids[0..n) joined by ',' (all, or those whose bit is set in mask). */
static void join_ids(const mapstore_partition *p, unsigned mask, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (unsigned i = 0; i < p->nreplicas; i++)
        if ((mask >> i) & 1)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", p->replicas[i]);
}

static int read_move(sqlite3_stmt *st, mapstore_move *m) {
    char state[16];
    memset(m, 0, sizeof *m);
    if (col_u64(st, 0, &m->id) || col_text(st, 2, m->from, sizeof m->from) ||
        col_text(st, 3, m->to, sizeof m->to) || col_text(st, 4, state, sizeof state) ||
        mapstore_move_state_parse(state, &m->state) || col_u64(st, 5, &m->epoch) ||
        col_u64(st, 6, &m->bytes) || col_text(st, 7, m->reason, sizeof m->reason) ||
        col_text(st, 8, m->abort_reason, sizeof m->abort_reason))
        return KEEL_ECORRUPT;
    m->partition = (unsigned)sqlite3_column_int64(st, 1);
    for (int i = 0; i < MAPSTORE_MOVE_NSTATES; i++)
        m->at_ms[i] = sqlite3_column_int64(st, 9 + i);
    return 0;
}

static int read_setting(sqlite3_stmt *st, mapstore_setting *s) {
    if (col_text(st, 0, s->name, sizeof s->name) || col_text(st, 1, s->value, sizeof s->value))
        return KEEL_ECORRUPT;
    s->set_at_ms = sqlite3_column_int64(st, 2);
    return 0;
}

typedef int (*row_fn)(sqlite3_stmt *st, void *out);

/* Reads the one row of a bound statement into out: 0, KEEL_ENOTFOUND (no
 * row, nothing recorded: the caller words it), or a KEEL_E*. */
static int get_one(mapstore *ms, msq *q, sqlite3_stmt *st, row_fn read, void *out,
                   const char *table) {
    int rc = step_row(ms, q, st, table);
    if (rc <= 0) return rc ? rc : KEEL_ENOTFOUND;
    rc = read(st, out);
    sqlite3_reset(st);
    return rc ? corrupt_row(ms, table) : 0;
}

/* Reads every row of st into a malloc'd array of elem-sized records. */
static int get_all(mapstore *ms, msq *q, sqlite3_stmt *st, row_fn read, size_t elem, void **out,
                   size_t *n, const char *table) {
    char *arr = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = step_row(ms, q, st, table)) == 1) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char *na = realloc(arr, ncap * elem);
            if (!na) goto nomem;
            arr = na, cap = ncap;
        }
        if (read(st, arr + len * elem)) goto corrupt;
        len++;
    }
    if (rc < 0) goto fail;
    *out = arr;
    *n = len;
    return 0;
nomem:
    rc = mapstore__errf(ms, KEEL_ENOMEM, "out of memory listing %s", table);
    goto fail;
corrupt:
    rc = corrupt_row(ms, table);
fail:
    sqlite3_reset(st);
    free(arr);
    return rc;
}

/* Wrappers that make the typed readers fit row_fn. */
static int row_node(sqlite3_stmt *st, void *o) {
    return read_node(st, o);
}
static int row_partition(sqlite3_stmt *st, void *o) {
    return read_partition(st, o);
}
static int row_move(sqlite3_stmt *st, void *o) {
    return read_move(st, o);
}
static int row_setting(sqlite3_stmt *st, void *o) {
    return read_setting(st, o);
}

/* ---- Lookups used inside transactions ---------------------------------------- */

static int get_node(mapstore *ms, msq *q, const char *id, mapstore_node *n) {
    sqlite3_stmt *st = stmt(q, ST_NODE_GET);
    bind_text(st, 1, id);
    int rc = get_one(ms, q, st, row_node, n, "nodes");
    if (rc == KEEL_ENOTFOUND) return mapstore__errf(ms, rc, "no node %s", id);
    return rc;
}

static int get_partition(mapstore *ms, msq *q, unsigned p, mapstore_partition *out) {
    sqlite3_stmt *st = stmt(q, ST_PART_GET);
    sqlite3_bind_int64(st, 1, p);
    int rc = get_one(ms, q, st, row_partition, out, "partitions");
    if (rc == KEEL_ENOTFOUND) return mapstore__errf(ms, KEEL_ECORRUPT, "partition %u missing", p);
    return rc;
}

static int get_move(mapstore *ms, msq *q, uint64_t id, mapstore_move *m) {
    sqlite3_stmt *st = stmt(q, ST_MOVE_GET);
    sqlite3_bind_int64(st, 1, (int64_t)id);
    int rc = get_one(ms, q, st, row_move, m, "moves");
    if (rc == KEEL_ENOTFOUND) return mapstore__errf(ms, rc, "no move %llu", (unsigned long long)id);
    return rc;
}

/* Writes partition record np (owner, epochs, replicas, ISR; pinned stays). */
static int put_partition(mapstore *ms, msq *q, const mapstore_partition *np) {
    char reps[KEEL_RF_MAX * (KEEL_ID_MAX + 1) + 1], isr[sizeof reps];
    join_ids(np, (1u << np->nreplicas) - 1, reps, sizeof reps);
    join_ids(np, np->isr, isr, sizeof isr);
    sqlite3_stmt *st = stmt(q, ST_PART_PUT);
    sqlite3_bind_int64(st, 1, np->id);
    bind_text(st, 2, np->owner[0] ? np->owner : NULL);
    sqlite3_bind_int64(st, 3, (int64_t)np->epoch);
    bind_text(st, 4, reps);
    bind_text(st, 5, isr);
    sqlite3_bind_int64(st, 6, (int64_t)np->leader_epoch);
    sqlite3_bind_int64(st, 7, (int64_t)np->partition_epoch);
    return step_done(ms, q, st, "write partition");
}

/* Gives partition p to owner (NULL: none) by the ownership-change rule
 * (mapstore__owner_change) and returns its new epoch in *epoch. place:
 * only if it is unowned (else KEEL_EEXIST). */
static int set_owner_row(mapstore *ms, msq *q, unsigned p, const char *owner,
                         const mapstore_placement *place, uint64_t *epoch) {
    mapstore_partition part;
    int rc;
    if ((rc = get_partition(ms, q, p, &part))) return rc;
    if (place && part.owner[0])
        return mapstore__errf(ms, KEEL_EEXIST, "partition %u is already owned", p);
    if ((rc = mapstore__part_can_bump(ms, &part))) return rc;
    if (place)
        mapstore__place(&part, place);
    else
        mapstore__owner_change(&part, owner);
    if ((rc = put_partition(ms, q, &part))) return rc;
    *epoch = part.epoch;
    return 0;
}

/* ---- Backend: term, nodes ---------------------------------------------------- */

static uint64_t sq_term(void *impl) {
    return ((msq *)impl)->term;
}

static uint64_t sq_version(void *impl) {
    return ((msq *)impl)->version;
}

static int sq_bump_term(mapstore *ms, uint64_t *term) {
    int rc = in_tx(ms, do_bump_term, NULL);
    if (!rc && term) *term = ((msq *)mapstore__impl(ms))->term;
    return rc;
}

typedef struct node_arg {
    const mapstore_node *n;
    int64_t now_ms;
} node_arg;

static void bind_node(sqlite3_stmt *st, const mapstore_node *n, int64_t now_ms) {
    bind_text(st, 1, n->id);
    bind_text(st, 2, n->host);
    sqlite3_bind_int(st, 3, n->port);
    bind_text(st, 4, n->rack);
    sqlite3_bind_double(st, 5, n->capacity);
    bind_text(st, 6, mapstore_liveness_name(n->liveness));
    bind_text(st, 7, mapstore_membership_name(n->membership));
    sqlite3_bind_int64(st, 8, now_ms);
}

static int do_node_upsert(mapstore *ms, msq *q, void *arg) {
    node_arg *a = arg;
    mapstore_node old;
    int rc = get_node(ms, q, a->n->id, &old);
    if (rc && rc != KEEL_ENOTFOUND) return rc;
    int insert = rc == KEEL_ENOTFOUND;
    if (!insert && old.membership == MAPSTORE_MEMBER_REMOVED &&
        a->n->membership != MAPSTORE_MEMBER_REMOVED)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s was removed", a->n->id);
    sqlite3_stmt *st = stmt(q, insert ? ST_NODE_INSERT : ST_NODE_UPDATE);
    bind_node(st, a->n, a->now_ms);
    if ((rc = step_done(ms, q, st, "upsert node"))) return rc;
    if (insert || strcmp(old.host, a->n->host) || old.port != a->n->port ||
        old.liveness != a->n->liveness || old.membership != a->n->membership)
        return do_bump_version(ms, q);
    return 0;
}

static int sq_node_upsert(mapstore *ms, const mapstore_node *n, int64_t now_ms) {
    node_arg a = {n, now_ms};
    return in_tx(ms, do_node_upsert, &a);
}

static int sq_node_get(mapstore *ms, const char *id, mapstore_node *out) {
    return get_node(ms, mapstore__impl(ms), id, out);
}

static int sq_node_list(mapstore *ms, mapstore_node **out, size_t *n) {
    msq *q = mapstore__impl(ms);
    return get_all(ms, q, stmt(q, ST_NODE_LIST), row_node, sizeof **out, (void **)out, n, "nodes");
}

/* Sets one of a node's two state columns (liveness or membership). */
typedef struct state_arg {
    const char *id;
    int is_membership;
    int value;
} state_arg;

static int do_node_set(mapstore *ms, msq *q, void *arg) {
    state_arg *a = arg;
    mapstore_node old;
    int rc = get_node(ms, q, a->id, &old);
    if (rc) return rc;
    int cur = a->is_membership ? (int)old.membership : (int)old.liveness;
    if (cur == a->value) return 0;
    if (a->is_membership && old.membership == MAPSTORE_MEMBER_REMOVED)
        return mapstore__errf(ms, KEEL_EINVAL, "node %s was removed", a->id);
    sqlite3_stmt *st = stmt(q, a->is_membership ? ST_NODE_SET_MEMBERSHIP : ST_NODE_SET_LIVENESS);
    bind_text(st, 1, a->id);
    bind_text(st, 2,
              a->is_membership ? mapstore_membership_name((mapstore_membership)a->value)
                               : mapstore_liveness_name((mapstore_liveness)a->value));
    if ((rc = step_done(ms, q, st, "set node state"))) return rc;
    return do_bump_version(ms, q);
}

static int sq_node_set_liveness(mapstore *ms, const char *id, mapstore_liveness l) {
    state_arg a = {id, 0, (int)l};
    return in_tx(ms, do_node_set, &a);
}

static int sq_node_set_membership(mapstore *ms, const char *id, mapstore_membership m) {
    state_arg a = {id, 1, (int)m};
    return in_tx(ms, do_node_set, &a);
}

static int do_node_heartbeat(mapstore *ms, msq *q, void *arg) {
    node_arg *a = arg;
    sqlite3_stmt *st = stmt(q, ST_NODE_HEARTBEAT);
    bind_text(st, 1, a->n->id);
    sqlite3_bind_int64(st, 2, a->now_ms);
    int rc = step_done(ms, q, st, "heartbeat");
    if (!rc && sqlite3_changes(q->db) == 0)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no node %s", a->n->id);
    return rc;
}

static int sq_node_heartbeat(mapstore *ms, const char *id, int64_t now_ms) {
    mapstore_node n;
    snprintf(n.id, sizeof n.id, "%s", id);
    node_arg a = {&n, now_ms};
    return in_tx(ms, do_node_heartbeat, &a);
}

/* ---- Backend: partitions ----------------------------------------------------- */

static int sq_partition_get(mapstore *ms, unsigned p, mapstore_partition *out) {
    return get_partition(ms, mapstore__impl(ms), p, out);
}

static int sq_partition_list(mapstore *ms, mapstore_partition **out, size_t *n) {
    msq *q = mapstore__impl(ms);
    return get_all(ms, q, stmt(q, ST_PART_LIST), row_partition, sizeof **out, (void **)out, n,
                   "partitions");
}

typedef struct owner_arg {
    unsigned p;
    const char *owner;
    uint64_t epoch; /* out */
} owner_arg;

static int do_set_owner(mapstore *ms, msq *q, void *arg) {
    owner_arg *a = arg;
    mapstore_partition part;
    mapstore_node n;
    int rc;
    if ((rc = get_partition(ms, q, a->p, &part))) return rc;
    if (a->owner && (rc = get_node(ms, q, a->owner, &n))) return rc;
    if (strcmp(part.owner, a->owner ? a->owner : "") == 0)
        return mapstore__errf(ms, KEEL_EEXIST, "partition %u: owner is already %s", a->p,
                              a->owner ? a->owner : "none");
    if ((rc = set_owner_row(ms, q, a->p, a->owner, NULL, &a->epoch))) return rc;
    return do_bump_version(ms, q);
}

static int sq_partition_set_owner(mapstore *ms, unsigned p, const char *owner, uint64_t *epoch,
                                  uint64_t *version) {
    owner_arg a = {p, owner, 0};
    int rc = in_tx(ms, do_set_owner, &a);
    if (rc) return rc;
    if (epoch) *epoch = a.epoch;
    if (version) *version = ((msq *)mapstore__impl(ms))->version;
    return 0;
}

typedef struct place_arg {
    const mapstore_placement *pl;
    size_t n;
} place_arg;

static int do_place(mapstore *ms, msq *q, void *arg) {
    place_arg *a = arg;
    mapstore_node node;
    uint64_t epoch;
    int rc;
    for (size_t i = 0; i < a->n; i++) {
        if ((rc = get_node(ms, q, a->pl[i].owner, &node))) return rc;
        for (unsigned f = 0; f < a->pl[i].nfollowers; f++)
            if ((rc = get_node(ms, q, a->pl[i].followers[f], &node))) return rc;
        if ((rc = set_owner_row(ms, q, a->pl[i].partition, a->pl[i].owner, &a->pl[i], &epoch)))
            return rc;
    }
    return do_bump_version(ms, q);
}

static int sq_partition_place(mapstore *ms, const mapstore_placement *pl, size_t n,
                              uint64_t *version) {
    place_arg a = {pl, n};
    int rc = in_tx(ms, do_place, &a);
    if (!rc && version) *version = ((msq *)mapstore__impl(ms))->version;
    return rc;
}

typedef struct pin_arg {
    unsigned p;
    int pinned;
} pin_arg;

static int do_set_pinned(mapstore *ms, msq *q, void *arg) {
    pin_arg *a = arg;
    sqlite3_stmt *st = stmt(q, ST_PART_SET_PINNED);
    sqlite3_bind_int64(st, 1, a->p);
    sqlite3_bind_int(st, 2, a->pinned);
    return step_done(ms, q, st, "set pinned");
}

static int sq_partition_set_pinned(mapstore *ms, unsigned p, int pinned) {
    pin_arg a = {p, pinned};
    return in_tx(ms, do_set_pinned, &a);
}

/* A compare-and-set of partition p's ISR or replica list. */
typedef struct cas_arg {
    unsigned p;
    uint64_t expected_pe;
    const char *const *ids;
    size_t n;
    int replicas;           /* 0: the ISR, 1: the replica list, 2: the leader (ids[0]) */
    int old_in_isr;         /* the leader's change */
    mapstore_partition out; /* the partition as written */
} cas_arg;

static int do_partition_cas(mapstore *ms, msq *q, void *arg) {
    cas_arg *a = arg;
    mapstore_node node;
    int rc;
    if ((rc = get_partition(ms, q, a->p, &a->out))) return rc;
    for (size_t i = 0; a->replicas == 1 && i < a->n; i++)
        if ((rc = get_node(ms, q, a->ids[i], &node))) return rc;
    rc = a->replicas == 2 ? mapstore__set_leader(ms, &a->out, a->expected_pe, a->ids[0],
                                                 a->old_in_isr)
         : a->replicas    ? mapstore__set_replicas(ms, &a->out, a->expected_pe, a->ids, a->n)
                          : mapstore__set_isr(ms, &a->out, a->expected_pe, a->ids, a->n);
    if (rc || (rc = put_partition(ms, q, &a->out))) return rc;
    return do_bump_version(ms, q);
}

static int sq_partition_set_isr(mapstore *ms, unsigned p, uint64_t expected_pe,
                                const char *const *isr, size_t n, mapstore_partition *out) {
    cas_arg a = {p, expected_pe, isr, n, 0, 0, {0}};
    int rc = in_tx(ms, do_partition_cas, &a);
    if (!rc) *out = a.out;
    return rc;
}

static int sq_partition_set_replicas(mapstore *ms, unsigned p, uint64_t expected_pe,
                                     const char *const *replicas, size_t n,
                                     mapstore_partition *out) {
    cas_arg a = {p, expected_pe, replicas, n, 1, 0, {0}};
    int rc = in_tx(ms, do_partition_cas, &a);
    if (!rc) *out = a.out;
    return rc;
}

static int sq_partition_set_leader(mapstore *ms, unsigned p, uint64_t expected_pe,
                                   const char *leader, int old_in_isr, mapstore_partition *out) {
    cas_arg a = {p, expected_pe, &leader, 1, 2, old_in_isr, {0}};
    int rc = in_tx(ms, do_partition_cas, &a);
    if (!rc) *out = a.out;
    return rc;
}

static int do_bump_version_tx(mapstore *ms, msq *q, void *arg) {
    (void)arg;
    return do_bump_version(ms, q);
}

static int sq_bump_version(mapstore *ms, uint64_t *version) {
    int rc = in_tx(ms, do_bump_version_tx, NULL);
    if (!rc && version) *version = ((msq *)mapstore__impl(ms))->version;
    return rc;
}

/* ---- Backend: moves ---------------------------------------------------------- */

typedef struct move_arg {
    uint64_t id; /* in, or out for create */
    unsigned p;
    const char *to, *reason;
    mapstore_move_state state;
    int64_t now_ms;
    uint64_t bytes; /* in (set_bytes) */
    uint64_t epoch; /* out (commit) */
} move_arg;

/* KEEL_EEXIST if partition p has a move in flight. */
static int check_no_move(mapstore *ms, msq *q, unsigned p) {
    sqlite3_stmt *st = stmt(q, ST_MOVE_IN_FLIGHT);
    sqlite3_bind_int64(st, 1, p);
    int rc = step_row(ms, q, st, "moves");
    if (rc <= 0) return rc;
    long long id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return mapstore__errf(ms, KEEL_EEXIST, "partition %u already has move %lld in flight", p, id);
}

static int do_move_create(mapstore *ms, msq *q, void *arg) {
    move_arg *a = arg;
    mapstore_partition part;
    mapstore_node n;
    int rc;
    if ((rc = get_partition(ms, q, a->p, &part)) || (rc = get_node(ms, q, a->to, &n))) return rc;
    if (!part.owner[0]) return mapstore__errf(ms, KEEL_EINVAL, "partition %u has no owner", a->p);
    if (strcmp(part.owner, a->to) == 0)
        return mapstore__errf(ms, KEEL_EINVAL, "partition %u is already on %s", a->p, a->to);
    if ((rc = check_no_move(ms, q, a->p))) return rc;
    sqlite3_stmt *st = stmt(q, ST_MOVE_INSERT);
    sqlite3_bind_int64(st, 1, a->p);
    bind_text(st, 2, part.owner);
    bind_text(st, 3, a->to);
    sqlite3_bind_int64(st, 4, (int64_t)part.epoch);
    bind_text(st, 5, a->reason);
    sqlite3_bind_int64(st, 6, a->now_ms);
    rc = step_returning(ms, q, st, "create move", &a->id);
    return rc == KEEL_ERANGE ? sq_fail(ms, q, SQLITE_ERROR, "create move") : rc;
}

static int sq_move_create(mapstore *ms, unsigned p, const char *to, const char *reason,
                          int64_t now_ms, uint64_t *id) {
    move_arg a = {.p = p, .to = to, .reason = reason, .now_ms = now_ms};
    int rc = in_tx(ms, do_move_create, &a);
    if (!rc && id) *id = a.id;
    return rc;
}

static int sq_move_get(mapstore *ms, uint64_t id, mapstore_move *out) {
    if (id > (uint64_t)INT64_MAX)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)id);
    return get_move(ms, mapstore__impl(ms), id, out);
}

static int sq_move_list(mapstore *ms, int unfinished, mapstore_move **out, size_t *n) {
    msq *q = mapstore__impl(ms);
    sqlite3_stmt *st = stmt(q, unfinished ? ST_MOVE_LIST_UNFINISHED : ST_MOVE_LIST);
    return get_all(ms, q, st, row_move, sizeof **out, (void **)out, n, "moves");
}

/* Writes the move's new state and its entry time (and abort reason). */
static int set_move_state(mapstore *ms, msq *q, uint64_t id, mapstore_move_state state,
                          int64_t now_ms, const char *abort_reason) {
    sqlite3_stmt *st = stmt(q, ST_MOVE_ADVANCE);
    sqlite3_bind_int64(st, 1, (int64_t)id);
    bind_text(st, 2, mapstore_move_state_name(state));
    sqlite3_bind_int64(st, 3, now_ms);
    bind_text(st, 4, abort_reason ? abort_reason : "");
    return step_done(ms, q, st, "advance move");
}

static int do_move_advance(mapstore *ms, msq *q, void *arg) {
    move_arg *a = arg;
    mapstore_move m;
    int rc;
    if ((rc = get_move(ms, q, a->id, &m))) return rc;
    if (!mapstore_move_can_advance(m.state, a->state))
        return mapstore__errf(ms, KEEL_EINVAL, "move %llu: %s -> %s is not a legal transition",
                              (unsigned long long)a->id, mapstore_move_state_name(m.state),
                              mapstore_move_state_name(a->state));
    return set_move_state(ms, q, a->id, a->state, a->now_ms, a->reason);
}

static int sq_move_advance(mapstore *ms, uint64_t id, mapstore_move_state state, int64_t now_ms,
                           const char *abort_reason) {
    if (id > (uint64_t)INT64_MAX)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)id);
    move_arg a = {.id = id, .state = state, .now_ms = now_ms, .reason = abort_reason};
    return in_tx(ms, do_move_advance, &a);
}

static int do_move_set_bytes(mapstore *ms, msq *q, void *arg) {
    move_arg *a = arg;
    sqlite3_stmt *st = stmt(q, ST_MOVE_SET_BYTES);
    sqlite3_bind_int64(st, 1, (int64_t)a->id);
    sqlite3_bind_int64(st, 2, (int64_t)a->bytes);
    int rc = step_done(ms, q, st, "set move bytes");
    if (!rc && sqlite3_changes(q->db) == 0)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)a->id);
    return rc;
}

static int sq_move_set_bytes(mapstore *ms, uint64_t id, uint64_t bytes) {
    if (id > (uint64_t)INT64_MAX)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)id);
    move_arg a = {.id = id, .bytes = bytes};
    return in_tx(ms, do_move_set_bytes, &a);
}

static int do_move_commit(mapstore *ms, msq *q, void *arg) {
    move_arg *a = arg;
    mapstore_move m;
    mapstore_partition part;
    int rc;
    if ((rc = get_move(ms, q, a->id, &m))) return rc;
    if (m.state != MAPSTORE_MOVE_FENCED)
        return mapstore__errf(ms, KEEL_EINVAL, "move %llu is %s, not FENCED",
                              (unsigned long long)a->id, mapstore_move_state_name(m.state));
    if ((rc = get_partition(ms, q, m.partition, &part))) return rc;
    if (strcmp(part.owner, m.from) || part.epoch != m.epoch)
        return mapstore__errf(ms, KEEL_EINVAL,
                              "move %llu: partition %u is now %s at epoch %llu, not %s at %llu",
                              (unsigned long long)a->id, m.partition, part.owner,
                              (unsigned long long)part.epoch, m.from, (unsigned long long)m.epoch);
    if ((rc = set_owner_row(ms, q, m.partition, m.to, 0, &a->epoch)) ||
        (rc = set_move_state(ms, q, a->id, MAPSTORE_MOVE_COMMITTED, a->now_ms, NULL)))
        return rc;
    return do_bump_version(ms, q);
}

static int sq_move_commit(mapstore *ms, uint64_t id, int64_t now_ms, uint64_t *epoch,
                          uint64_t *version) {
    if (id > (uint64_t)INT64_MAX)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no move %llu", (unsigned long long)id);
    move_arg a = {.id = id, .now_ms = now_ms};
    int rc = in_tx(ms, do_move_commit, &a);
    if (rc) return rc;
    if (epoch) *epoch = a.epoch;
    if (version) *version = ((msq *)mapstore__impl(ms))->version;
    return 0;
}

/* ---- Backend: settings ------------------------------------------------------- */

typedef struct setting_arg {
    const char *name, *value;
    int64_t now_ms;
} setting_arg;

static int do_setting_set(mapstore *ms, msq *q, void *arg) {
    setting_arg *a = arg;
    sqlite3_stmt *st = stmt(q, ST_SET_PUT);
    bind_text(st, 1, a->name);
    bind_text(st, 2, a->value);
    sqlite3_bind_int64(st, 3, a->now_ms);
    return step_done(ms, q, st, "set setting");
}

static int sq_setting_set(mapstore *ms, const char *name, const char *value, int64_t now_ms) {
    setting_arg a = {name, value, now_ms};
    return in_tx(ms, do_setting_set, &a);
}

static int sq_setting_get(mapstore *ms, const char *name, mapstore_setting *out) {
    msq *q = mapstore__impl(ms);
    sqlite3_stmt *st = stmt(q, ST_SET_GET);
    bind_text(st, 1, name);
    int rc = get_one(ms, q, st, row_setting, out, "settings");
    if (rc == KEEL_ENOTFOUND) return mapstore__errf(ms, rc, "no setting %s", name);
    return rc;
}

static int do_setting_unset(mapstore *ms, msq *q, void *arg) {
    setting_arg *a = arg;
    sqlite3_stmt *st = stmt(q, ST_SET_DEL);
    bind_text(st, 1, a->name);
    int rc = step_done(ms, q, st, "unset setting");
    if (!rc && sqlite3_changes(q->db) == 0)
        return mapstore__errf(ms, KEEL_ENOTFOUND, "no setting %s", a->name);
    return rc;
}

static int sq_setting_unset(mapstore *ms, const char *name) {
    setting_arg a = {name, NULL, 0};
    return in_tx(ms, do_setting_unset, &a);
}

static int sq_setting_list(mapstore *ms, mapstore_setting **out, size_t *n) {
    msq *q = mapstore__impl(ms);
    return get_all(ms, q, stmt(q, ST_SET_LIST), row_setting, sizeof **out, (void **)out, n,
                   "settings");
}

/* ---- Open, close --------------------------------------------------------------- */

static void msq_close(void *impl) {
    msq *q = impl;
    if (!q) return;
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(q->st[i]);
    sqlite3_close(q->db);
    free(q);
}

static const mapstore_ops sqlite_ops = {
    .close = msq_close,
    .term = sq_term,
    .version = sq_version,
    .bump_term = sq_bump_term,
    .node_upsert = sq_node_upsert,
    .node_get = sq_node_get,
    .node_list = sq_node_list,
    .node_set_liveness = sq_node_set_liveness,
    .node_set_membership = sq_node_set_membership,
    .node_heartbeat = sq_node_heartbeat,
    .partition_get = sq_partition_get,
    .partition_list = sq_partition_list,
    .partition_set_owner = sq_partition_set_owner,
    .partition_place = sq_partition_place,
    .partition_set_pinned = sq_partition_set_pinned,
    .partition_set_isr = sq_partition_set_isr,
    .partition_set_replicas = sq_partition_set_replicas,
    .partition_set_leader = sq_partition_set_leader,
    .bump_version = sq_bump_version,
    .move_create = sq_move_create,
    .move_get = sq_move_get,
    .move_list = sq_move_list,
    .move_advance = sq_move_advance,
    .move_set_bytes = sq_move_set_bytes,
    .move_commit = sq_move_commit,
    .setting_set = sq_setting_set,
    .setting_get = sq_setting_get,
    .setting_unset = sq_setting_unset,
    .setting_list = sq_setting_list,
};

/* Runs one PRAGMA (static text) and returns its first column as an integer
 * in *v, or its text in txt[cap] (either may be NULL). */
static int pragma(sqlite3 *db, const char *sql, int64_t *v, char *txt, size_t cap) {
    sqlite3_stmt *st;
    int src = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (src != SQLITE_OK) return src;
    src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
        if (v) *v = sqlite3_column_int64(st, 0);
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (txt) snprintf(txt, cap, "%s", t ? (const char *)t : "");
        src = SQLITE_OK;
    } else if (src == SQLITE_DONE) {
        src = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return src;
}

/* Reports an SQLite failure during open. */
static int open_fail(sqlite3 *db, int src, const char *path, const char *what, char *err,
                     size_t errcap) {
    int rc = keel_code(src);
    if (rc == KEEL_EAGAIN)
        seterr(err, errcap, "%s: map store is in use by another process or handle", path);
    else if (rc == KEEL_ECORRUPT)
        seterr(err, errcap, "%s: corrupt or not a database (%s): refusing to use it", path,
               sqlite3_errmsg(db));
    else
        seterr(err, errcap, "%s: %s: %s", path, what, sqlite3_errmsg(db));
    return rc;
}

/* The SQLite header: is this a Keel map store of a schema we know? The first
 * read of the file; nothing is written before it passes. */
static int check_header(sqlite3 *db, const char *path, int64_t *version, char *err, size_t errcap) {
    int64_t app = 0, ver = 0;
    int src;
    if ((src = pragma(db, "PRAGMA locking_mode = EXCLUSIVE", NULL, NULL, 0)) ||
        (src = pragma(db, "PRAGMA application_id", &app, NULL, 0)) ||
        (src = pragma(db, "PRAGMA user_version", &ver, NULL, 0)))
        return open_fail(db, src, path, "reading header", err, errcap);
    if (app != MSQ_APP_ID) {
        seterr(err, errcap,
               "%s: an SQLite database but not a Keel map store (application_id %#llx)", path,
               (unsigned long long)app);
        return KEEL_EWRONGTYPE;
    }
    if (ver < 1 || ver > MSQ_SCHEMA_VERSION) {
        seterr(err, errcap, "%s: map store schema version %lld, this build supports 1 to %d", path,
               (long long)ver, MSQ_SCHEMA_VERSION);
        return KEEL_ERANGE;
    }
    *version = ver;
    return 0;
}

/* Schema 1 -> 2, in place and in one transaction: version 1's single node
 * `state` (UP, SUSPECT, DOWN, DRAINING, REMOVED) becomes liveness and
 * membership. DRAINING was only said of live nodes, so it becomes UP +
 * DRAINING (the detector judges it afresh from the coordinator's start);
 * REMOVED becomes DOWN + REMOVED; the others keep their liveness and are
 * ACTIVE. The nodes table is rebuilt (SQLite cannot change a CHECK in
 * place), with foreign keys off for the swap and checked before the commit,
 * as SQLite's documented table-rebuild procedure does. A crash at any
 * point leaves a whole version 1 or a whole version 2 file. */
/* clang-format off */
static const char migrate_v1_sql[] =
    "BEGIN IMMEDIATE;"
    NODES_TABLE("nodes_v2")
    "INSERT INTO nodes_v2 (id, host, port, rack, capacity, liveness, membership,"
    " registered_at_ms, last_heartbeat_ms)"
    " SELECT id, host, port, rack, capacity,"
    "  CASE state WHEN 'DRAINING' THEN 'UP' WHEN 'REMOVED' THEN 'DOWN' ELSE state END,"
    "  CASE state WHEN 'DRAINING' THEN 'DRAINING' WHEN 'REMOVED' THEN 'REMOVED' ELSE 'ACTIVE' END,"
    "  registered_at_ms, last_heartbeat_ms FROM nodes;"
    "DROP TABLE nodes;"
    "ALTER TABLE nodes_v2 RENAME TO nodes;"
    "PRAGMA user_version = 2;";
/* clang-format on */

static int migrate_v1(sqlite3 *db, const char *path, char *err, size_t errcap) {
    char fk[100] = "";
    int src = pragma(db, "PRAGMA foreign_keys = OFF", NULL, NULL, 0);
    if (!src) src = sqlite3_exec(db, migrate_v1_sql, NULL, NULL, NULL);
    if (!src) src = pragma(db, "PRAGMA foreign_key_check", NULL, fk, sizeof fk);
    if (!src && fk[0]) src = SQLITE_CONSTRAINT;
    if (!src) src = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (src) {
        int rc = open_fail(db, src, path, "migrating schema 1 to 2", err, errcap);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        pragma(db, "PRAGMA foreign_keys = ON", NULL, NULL, 0);
        return rc == KEEL_EAGAIN ? KEEL_EIO : rc;
    }
    if ((src = pragma(db, "PRAGMA foreign_keys = ON", NULL, NULL, 0)))
        return open_fail(db, src, path, "migrating schema 1 to 2", err, errcap);
    return 0;
}

/* Schema 2 -> 3, in place and in one transaction: every partition gets
 * the replication columns at RF 1 (replicas = isr = its owner, '' when
 * unowned; leader epoch = partition epoch = its epoch, which keeps
 * leader_epoch <= epoch <= partition_epoch), and the cluster settings
 * replicas and min_insync are recorded as 1 unless already set. ADD COLUMN
 * changes no existing row, so no table is rebuilt. A crash at any point
 * leaves a whole version 2 or a whole version 3 file. */
/* clang-format off */
static const char migrate_v2_sql[] =
    "BEGIN IMMEDIATE;"
    "ALTER TABLE partitions ADD COLUMN" PART_REP_COLUMNS("; ALTER TABLE partitions ADD COLUMN") ";"
    "UPDATE partitions SET replicas = coalesce(owner, ''), isr = coalesce(owner, ''),"
    " leader_epoch = epoch, partition_epoch = epoch;"
    "INSERT INTO settings (name, value, set_at_ms)"
    " SELECT 'replicas', '1', created_at_ms FROM cluster WHERE singleton = 1"
    " ON CONFLICT (name) DO NOTHING;"
    "INSERT INTO settings (name, value, set_at_ms)"
    " SELECT 'min_insync', '1', created_at_ms FROM cluster WHERE singleton = 1"
    " ON CONFLICT (name) DO NOTHING;"
    "PRAGMA user_version = 3;"
    "COMMIT;";
/* clang-format on */

static int migrate_v2(sqlite3 *db, const char *path, char *err, size_t errcap) {
    int src = sqlite3_exec(db, migrate_v2_sql, NULL, NULL, NULL);
    if (src) {
        int rc = open_fail(db, src, path, "migrating schema 2 to 3", err, errcap);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return rc == KEEL_EAGAIN ? KEEL_EIO : rc;
    }
    return 0;
}

/* quick_check, then the connection settings, then take the write lock. */
static int check_and_configure(sqlite3 *db, const char *path, char *err, size_t errcap) {
    char txt[200] = "";
    int64_t fk = 0;
    int src;
    if ((src = pragma(db, "PRAGMA quick_check(1)", NULL, txt, sizeof txt)))
        return open_fail(db, src, path, "integrity check", err, errcap);
    if (strcmp(txt, "ok") != 0) {
        seterr(err, errcap, "%s: integrity check failed (%s): refusing to use it", path, txt);
        return KEEL_ECORRUPT;
    }
    if ((src = pragma(db, "PRAGMA journal_mode = WAL", NULL, txt, sizeof txt)) ||
        (src = pragma(db, "PRAGMA synchronous = FULL", NULL, NULL, 0)) ||
        (src = pragma(db, "PRAGMA foreign_keys = ON", NULL, NULL, 0)) ||
        (src = pragma(db, "PRAGMA foreign_keys", &fk, NULL, 0)) ||
        (src = sqlite3_exec(db, "BEGIN IMMEDIATE; COMMIT", NULL, NULL, NULL)))
        return open_fail(db, src, path, "configuring", err, errcap);
    if (strcmp(txt, "wal") != 0 || fk != 1) {
        seterr(err, errcap, "%s: cannot enable WAL mode and foreign keys", path);
        return KEEL_EIO;
    }
    return 0;
}

static int prepare_all(msq *q, const char *path, char *err, size_t errcap) {
    for (int i = 0; i < ST__COUNT; i++) {
        int src =
            sqlite3_prepare_v3(q->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &q->st[i], NULL);
        if (src == SQLITE_ERROR) {
            seterr(err, errcap, "%s: Keel tables missing or malformed (%s)", path,
                   sqlite3_errmsg(q->db));
            return KEEL_ECORRUPT;
        }
        if (src) return open_fail(q->db, src, path, "preparing", err, errcap);
    }
    return 0;
}

/* Reads the cluster row and checks that the partitions table is 0..P-1 and
 * that every reference resolves. */
static int load_cluster(msq *q, const char *path, char *id, size_t idcap, unsigned *parts,
                        char *err, size_t errcap) {
    sqlite3_stmt *st = q->st[ST_CLUSTER_GET];
    int64_t p = 0, n = -1, lo = -1, hi = -1, t = -1, v = -1;
    char fk[100] = "";
    if (sqlite3_step(st) == SQLITE_ROW) {
        if (col_text(st, 0, id, idcap)) id[0] = 0;
        p = sqlite3_column_int64(st, 1);
        t = sqlite3_column_int64(st, 2);
        v = sqlite3_column_int64(st, 3);
    }
    sqlite3_reset(st);
    st = q->st[ST_PART_SHAPE];
    if (sqlite3_step(st) == SQLITE_ROW) {
        n = sqlite3_column_int64(st, 0);
        lo = sqlite3_column_int64(st, 1);
        hi = sqlite3_column_int64(st, 2);
    }
    sqlite3_reset(st);
    /* Any row (its first column names the table) is a dangling reference. */
    int src = pragma(q->db, "PRAGMA foreign_key_check", NULL, fk, sizeof fk);
    if (src || !id[0] || t < 0 || v < 0 || !keel_map_is_pow2_partitions((unsigned)p) ||
        p > KEEL_MAX_PARTITIONS || n != p || lo != 0 || hi != p - 1 || fk[0]) {
        seterr(err, errcap, "%s: cluster metadata inconsistent (P %lld, %lld partition rows)", path,
               (long long)p, (long long)n);
        return KEEL_ECORRUPT;
    }
    *parts = (unsigned)p;
    q->term = q->tx_term = (uint64_t)t;
    q->version = q->tx_version = (uint64_t)v;
    return 0;
}

/* Opens path read-write without creating it. */
static int open_db(const char *path, sqlite3 **db, char *err, size_t errcap) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        seterr(err, errcap, "%s: %s", path, strerror(e));
        return e == ENOENT ? KEEL_ENOTFOUND : KEEL_EIO;
    }
    if (!S_ISREG(sb.st_mode)) {
        seterr(err, errcap, "%s: not a regular file", path);
        return KEEL_EINVAL;
    }
    if (sb.st_size == 0) {
        seterr(err, errcap, "%s: empty file, not a map store: refusing to use it", path);
        return KEEL_ECORRUPT;
    }
    int src = sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE, NULL);
    if (src != SQLITE_OK) return open_fail(*db, src, path, "open", err, errcap);
    sqlite3_extended_result_codes(*db, 1);
    return 0;
}

int mapstore_sqlite_open(const char *path, const mapstore_expect *expect, mapstore **out, char *err,
                         size_t errcap) {
    char id[MAPSTORE_CLUSTER_ID_MAX + 1] = "";
    unsigned parts = 0;
    int64_t schema = 0;
    mapstore *ms = NULL;
    msq *q;
    int rc;
    seterr(err, errcap, "%s", "");
    if (!out || !path) return KEEL_EINVAL;
    *out = NULL;
    if (!(q = calloc(1, sizeof *q))) return KEEL_ENOMEM;
    if ((rc = open_db(path, &q->db, err, errcap))) goto fail;
    if ((rc = check_header(q->db, path, &schema, err, errcap))) goto fail;
    if ((rc = check_and_configure(q->db, path, err, errcap))) goto fail;
    if (schema == 1 && (rc = migrate_v1(q->db, path, err, errcap))) goto fail;
    if (schema <= 2 && (rc = migrate_v2(q->db, path, err, errcap))) goto fail;
    if ((rc = prepare_all(q, path, err, errcap))) goto fail;
    if ((rc = load_cluster(q, path, id, sizeof id, &parts, err, errcap))) goto fail;
    if ((rc = mapstore__new(&sqlite_ops, q, id, parts, &ms))) goto fail;
    if ((rc = mapstore__check_expect(ms, expect, err, errcap))) {
        mapstore_free(ms);
        return rc;
    }
    *out = ms;
    return 0;
fail:
    msq_close(q);
    return rc;
}

/* ---- Create --------------------------------------------------------------------- */

/* 32 hex digits from 16 bytes of getrandom. */
static int gen_cluster_id(char *out, size_t cap) {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0 && errno != EINTR) return KEEL_EIO;
        if (r > 0) got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof b && 2 * i + 2 < cap; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* KEEL_EEXIST if path or any SQLite companion file of it exists: a stray
 * -wal beside a fresh database would be replayed into it. */
static int refuse_existing(const char *path, char *err, size_t errcap) {
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[4096];
    struct stat sb;
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
        if ((size_t)snprintf(p, sizeof p, "%s%s", path, sfx[i]) >= sizeof p) {
            seterr(err, errcap, "path too long");
            return KEEL_EINVAL;
        }
        if (lstat(p, &sb) == 0) {
            seterr(err, errcap, "%s already exists: refusing to create a map store over it", p);
            return KEEL_EEXIST;
        }
    }
    return 0;
}

static int insert_rows(sqlite3 *db, const char *id, unsigned parts, int64_t now_ms) {
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(db,
                                 "INSERT INTO cluster (singleton, cluster_id, partitions, term,"
                                 " map_version, created_at_ms) VALUES (1, ?1, ?2, 0, 0, ?3)",
                                 -1, &st, NULL);
    if (src) return src;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, parts);
    sqlite3_bind_int64(st, 3, now_ms);
    src = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    sqlite3_finalize(st);
    if (src || (src = sqlite3_prepare_v2(db, stmt_sql[ST_PART_INSERT], -1, &st, NULL))) return src;
    for (unsigned p = 0; p < parts && !src; p++) {
        sqlite3_bind_int64(st, 1, p);
        src = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return src;
}

/* Builds a complete store in the (empty) file tmp, then switches it to WAL
 * mode and closes it, so that it is complete on disk. */
static int build_store(const char *tmp, const char *id, unsigned parts, int64_t now_ms, char *err,
                       size_t errcap) {
    sqlite3 *db = NULL;
    char mode[16] = "";
    int src = sqlite3_open_v2(tmp, &db, SQLITE_OPEN_READWRITE, NULL);
    if (!src) src = pragma(db, "PRAGMA synchronous = FULL", NULL, NULL, 0);
    if (!src) src = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    if (!src) src = sqlite3_exec(db, schema_sql, NULL, NULL, NULL);
    if (!src) src = insert_rows(db, id, parts, now_ms);
    if (!src) src = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (!src) src = pragma(db, "PRAGMA journal_mode = WAL", NULL, mode, sizeof mode);
    if (!src && strcmp(mode, "wal") != 0) src = SQLITE_CANTOPEN;
    int rc = src ? keel_code(src) : 0;
    if (rc) seterr(err, errcap, "%s: creating map store: %s", tmp, sqlite3_errmsg(db));
    if (sqlite3_close(db) != SQLITE_OK && !rc) {
        seterr(err, errcap, "%s: closing new map store failed", tmp);
        rc = KEEL_EIO;
    }
    return rc == KEEL_EAGAIN ? KEEL_EIO : rc;
}

/* fsyncs a file or directory by name. */
static int fsync_path(const char *p, int dir) {
    int fd = open(p, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
    if (fd < 0) return KEEL_EIO;
    int r = fsync(fd);
    close(fd);
    return r ? KEEL_EIO : 0;
}

/* Links the finished tmp file to path (never replacing anything) and makes
 * the new name durable. */
static int publish(const char *tmp, const char *path, char *err, size_t errcap) {
    char dir[4096];
    if (fsync_path(tmp, 0)) {
        seterr(err, errcap, "%s: fsync: %s", tmp, strerror(errno));
        return KEEL_EIO;
    }
    if (link(tmp, path) != 0) {
        int e = errno;
        seterr(err, errcap, "%s: %s", path, strerror(e));
        return e == EEXIST ? KEEL_EEXIST : KEEL_EIO;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = 0;
    else if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    fsync_path(dir, 1); /* best effort: the name is already visible */
    return 0;
}

static void remove_tmp(const char *tmp) {
    char p[4200];
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
        snprintf(p, sizeof p, "%s%s", tmp, sfx[i]);
        unlink(p);
    }
}

int mapstore_sqlite_create(const char *path, unsigned partitions, int64_t now_ms, mapstore **out,
                           char *err, size_t errcap) {
    char id[MAPSTORE_CLUSTER_ID_MAX + 1], tmp[4200];
    int rc, fd;
    seterr(err, errcap, "%s", "");
    if (!path || !out) return KEEL_EINVAL;
    *out = NULL;
    if (!keel_map_is_pow2_partitions(partitions)) {
        seterr(err, errcap, "partitions must be a power of two from %d to %d, not %u",
               KEEL_MIN_PARTITIONS, KEEL_MAX_PARTITIONS, partitions);
        return KEEL_EINVAL;
    }
    if ((rc = refuse_existing(path, err, errcap))) return rc;
    if ((rc = gen_cluster_id(id, sizeof id))) {
        seterr(err, errcap, "getrandom: %s", strerror(errno));
        return rc;
    }
    snprintf(tmp, sizeof tmp, "%s.creating-XXXXXX", path);
    if ((fd = mkstemp(tmp)) < 0) {
        seterr(err, errcap, "%s: %s", tmp, strerror(errno));
        return KEEL_EIO;
    }
    close(fd);
    if ((rc = build_store(tmp, id, partitions, now_ms, err, errcap))) goto fail;
    if ((rc = publish(tmp, path, err, errcap))) goto fail;
    remove_tmp(tmp);
    mapstore_expect ex = {id, partitions};
    return mapstore_sqlite_open(path, &ex, out, err, errcap);
fail:
    remove_tmp(tmp);
    return rc;
}
