/* cmd_migrate.c - MIGRATE host port key|"" db timeout [COPY] [REPLACE]
 * [AUTH pw] [AUTH2 user pw] [KEYS key ...], as redis 7.0's migrateCommand
 * replies it, without blocking the event loop (migrate.h).
 *
 * 1. The handler checks the arguments in redis' order, dumps the keys that
 *    exist (dump.h: keel's DUMP payloads, so the target must be a keel
 *    node; a redis-server answers RESTORE with its payload error, which
 *    MIGRATE passes on as redis would) with their TTLs, and if none exists
 *    replies +NOKEY. Otherwise it queues a job and holds the request
 *    (RSERVER_HOLD): the client's later requests wait behind it, the loop
 *    goes on.
 * 2. On the thread pool the job connects (hiredis, the request's timeout
 *    for the connect and for every read and write), pipelines AUTH, SELECT
 *    db and one RESTORE-ASKING key ttl payload [REPLACE] per key, and reads
 *    the replies. A failure is "-IOERR error or timeout connecting to the
 *    client" (the host does not resolve) / "... writing to target instance"
 *    (also a refused or timed-out connect, as redis' non-blocking connect
 *    reports them) / "... reading to target instance", and an error
 *    reply "-ERR Target instance replied with error: ..." (AUTH's, else
 *    SELECT's, else the first RESTORE's), as redis. Redis retries once on
 *    a cached socket that went stale; keel opens a fresh connection per
 *    MIGRATE and does not retry.
 * 3. Back on the loop, for each key the target accepted (all of them only
 *    if AUTH and SELECT succeeded) and unless COPY: the key is dumped
 *    again and deleted only if payload and expiry are what was sent. A
 *    write acknowledged meanwhile is therefore never lost: such a key stays
 *    here (logged as migrate_kept), the target holding the older copy. The
 *    deletes go in one txn, before the reply, so the same group commit
 *    covers both. Then the held request is dispatched again and its
 *    handler replies what the job found (+OK or the error). If this node
 *    no longer serves the keys' slot by then, nothing is deleted and the
 *    re-dispatch replies -MOVED as any request would.
 *
 * Inside MULTI/EXEC and scripts a request cannot be held: MIGRATE is
 * refused there (redis runs it synchronously, blocking everything). */
#include "node/migrate.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "node/cmd.h"
#include "node/db.h"
#include "node/dump.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { IO_NONE, IO_CONNECT, IO_WRITE, IO_READ };

typedef struct mig_key {
    char *k;
    size_t kl;
    kbuf payload;
    int64_t expire_ms;
    long long ttl;
    int ok; /* the target's RESTORE replied +OK (and AUTH and SELECT did) */
} mig_key;

typedef struct mig_job {
    uv_work_t work;
    server *srv;
    client *c; /* NULL once the client has closed */
    unsigned slot;
    char host[256];
    int port;
    long timeout_ms;
    long long db;
    int copy, replace;
    char *user, *pass; /* copies, NULL when absent */
    size_t n;
    mig_key *keys;
    /* results, written by the worker */
    int io_err;
    char target_err[512]; /* "" when the target replied no error */
    /* after completion */
    int done;
    kbuf reply;
    struct mig_job *next;
} mig_job;

typedef struct migrate_state {
    mig_job *jobs;
} migrate_state;

static migrate_state *state(server *s) {
    if (!s->migrate) s->migrate = calloc(1, sizeof *s->migrate);
    return s->migrate;
}

static void job_free(mig_job *j) {
    if (!j) return;
    for (size_t i = 0; i < j->n; i++) {
        free(j->keys[i].k);
        kbuf_close(&j->keys[i].payload);
    }
    free(j->keys);
    free(j->user);
    free(j->pass);
    kbuf_close(&j->reply);
    free(j);
}

static void job_unlink(server *s, mig_job *j) {
    for (mig_job **p = &s->migrate->jobs; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            return;
        }
}

static mig_job *job_of(server *s, const client *c) {
    for (mig_job *j = s->migrate ? s->migrate->jobs : NULL; j; j = j->next)
        if (j->c == c) return j;
    return NULL;
}

void migrate_conn_closed(server *s, client *c) {
    mig_job *j = job_of(s, c);
    if (!j) return;
    if (j->done) { /* completed, its re-dispatch never came: nothing to send */
        job_unlink(s, j);
        job_free(j);
    } else {
        j->c = NULL; /* the job still completes (the deletes), unanswered */
    }
}

void migrate_free(migrate_state *st) {
    if (!st) return;
    while (st->jobs) {
        mig_job *j = st->jobs;
        st->jobs = j->next;
        job_free(j);
    }
    free(st);
}

/* ---- The network part (thread pool) --------------------------------------------- */

/* An error reply's text into j->target_err, once. */
static void target_error(mig_job *j, const redisReply *r) {
    if (j->target_err[0]) return;
    snprintf(j->target_err, sizeof j->target_err, "%.*s", (int)r->len, r->str);
}

static void work(uv_work_t *w) {
    mig_job *j = w->data;
    struct timeval tv = {j->timeout_ms / 1000, (j->timeout_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout(j->host, j->port, tv);
    if (!ctx || ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) {
        /* redis' connect is non-blocking and waits for writability, so a
         * refused or timed-out connect shows up as its first write failing;
         * only an address that does not resolve fails "connecting" */
        j->io_err = ctx && ctx->err == REDIS_ERR_IO ? IO_WRITE : IO_CONNECT;
        if (ctx) redisFree(ctx);
        return;
    }
    if (j->pass) {
        if (j->user)
            redisAppendCommand(ctx, "AUTH %s %s", j->user, j->pass);
        else
            redisAppendCommand(ctx, "AUTH %s", j->pass);
    }
    redisAppendCommand(ctx, "SELECT %lld", j->db);
    for (size_t i = 0; i < j->n; i++) {
        mig_key *k = &j->keys[i];
        char ttl[32];
        int tl = snprintf(ttl, sizeof ttl, "%lld", k->ttl);
        const char *argv[5] = {"RESTORE-ASKING", k->k, ttl, k->payload.p, "REPLACE"};
        size_t lens[5] = {14, k->kl, (size_t)tl, k->payload.len, 7};
        redisAppendCommandArgv(ctx, j->replace ? 5 : 4, argv, lens);
    }
    int done = 0;
    while (!done)
        if (redisBufferWrite(ctx, &done) != REDIS_OK) {
            j->io_err = IO_WRITE;
            redisFree(ctx);
            return;
        }
    redisReply *r = NULL;
    int auth_bad = 0, select_bad = 0;
    if (j->pass) {
        if (redisGetReply(ctx, (void **)&r) != REDIS_OK) goto read_err;
        if (r->type == REDIS_REPLY_ERROR) auth_bad = 1, target_error(j, r);
        freeReplyObject(r);
    }
    if (redisGetReply(ctx, (void **)&r) != REDIS_OK) goto read_err;
    if (r->type == REDIS_REPLY_ERROR) select_bad = 1, target_error(j, r);
    freeReplyObject(r);
    for (size_t i = 0; i < j->n; i++) {
        if (redisGetReply(ctx, (void **)&r) != REDIS_OK) goto read_err;
        if (r->type == REDIS_REPLY_ERROR)
            target_error(j, r);
        else if (!auth_bad && !select_bad)
            j->keys[i].ok = 1;
        freeReplyObject(r);
    }
    redisFree(ctx);
    return;
read_err:
    j->io_err = IO_READ; /* the keys already accepted stay accepted, as redis */
    redisFree(ctx);
}

/* ---- Completion (loop) ------------------------------------------------------------ */

/* Deletes the accepted keys that are unchanged since the dump. Returns 0
 * or a KEEL_E*; *kept counts the keys left because they changed. */
static int delete_unchanged(mig_job *j, cmd_ctx *x, size_t *kept) {
    kbuf now;
    kbuf_init(&now);
    int rc = 0;
    *kept = 0;
    /* dump first (no txn may be open), then delete in one txn */
    int *del = calloc(j->n ? j->n : 1, sizeof *del);
    if (!del) return KEEL_ENOMEM;
    for (size_t i = 0; i < j->n && !rc; i++) {
        mig_key *k = &j->keys[i];
        if (!k->ok) continue;
        int64_t exp;
        int g = dump_payload(x, k->k, k->kl, &now, &exp);
        if (g == KEEL_ENOTFOUND) continue; /* deleted or expired meanwhile */
        if (g) {
            rc = g;
            break;
        }
        if (exp == k->expire_ms && now.len == k->payload.len &&
            memcmp(now.p, k->payload.p, now.len) == 0)
            del[i] = 1;
        else
            ++*kept;
    }
    kbuf_close(&now);
    if (!rc) {
        store_txn *t = store_txn_begin(x->srv->st);
        for (size_t i = 0; i < j->n && !rc; i++)
            if (del[i]) rc = db_del(x, t, j->keys[i].k, j->keys[i].kl, NULL);
        if (rc)
            store_txn_abort(t);
        else
            rc = store_txn_commit(t);
    }
    free(del);
    return rc;
}

static void reply_text(mig_job *j, const char *s) {
    j->reply.len = 0;
    (void)kbuf_appendstr(&j->reply, s);
}

static void after(uv_work_t *w, int status) {
    mig_job *j = w->data;
    server *s = j->srv;
    j->done = 1;
    if (status) j->io_err = IO_CONNECT; /* cancelled: never ran */
    route r;
    ptable_route(s->pt, j->slot, &r);
    kbuf scratch;
    kbuf_init(&scratch);
    cmd_ctx x = {.srv = s,
                 .c = j->c,
                 .out = &scratch,
                 .proto = 2,
                 .slot = j->slot,
                 .partition = r.partition,
                 .now_ms = keel_wall_ms()};
    size_t kept = 0;
    int rc = 0;
    if (r.kind == ROUTE_SERVE && !j->copy) rc = delete_unchanged(j, &x, &kept);
    kbuf_close(&scratch);
    if (kept) keel_log(KEEL_LOG_WARN, "migrate_kept", "keys=%zu reason=changed_since_dump", kept);
    char buf[600];
    if (rc) {
        snprintf(buf, sizeof buf, "-ERR storage error: %s\r\n", keel_strerror(rc));
    } else if (j->target_err[0]) {
        snprintf(buf, sizeof buf, "-ERR Target instance replied with error: %s\r\n", j->target_err);
        for (char *p = buf + 1; p[2]; p++) /* one line, as redis' error replies */
            if (*p == '\r' || *p == '\n') *p = ' ';
    } else if (j->io_err == IO_CONNECT) {
        snprintf(buf, sizeof buf, "-IOERR error or timeout connecting to the client\r\n");
    } else if (j->io_err) {
        snprintf(buf, sizeof buf, "-IOERR error or timeout %s to target instance\r\n",
                 j->io_err == IO_WRITE ? "writing" : "reading");
    } else {
        snprintf(buf, sizeof buf, "+OK\r\n");
    }
    reply_text(j, buf);
    client *c = j->c;
    if (c && r.kind == ROUTE_SERVE) {
        rserver_resume(c); /* the handler sends j->reply and frees j */
        if ((j = job_of(s, c)) == NULL || !j->done) return;
    }
    job_unlink(s, j); /* no one to answer, or the re-dispatch will not reach the handler */
    job_free(j);
    if (c && r.kind != ROUTE_SERVE) rserver_resume(c); /* -MOVED / held by a move */
}

/* ---- The handler ------------------------------------------------------------------- */

static int parse_long(cmd_ctx *x, int i, long long *v) {
    if (arg_ll(x->argv[i], x->argvlen[i], v) || *v < LONG_MIN || *v > LONG_MAX) {
        reply_not_int(x);
        return -1;
    }
    return 0;
}

static char *dupn(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* Fills j with the options; returns the index of the first key and their
 * count, or -1 after replying. */
static int parse(cmd_ctx *x, mig_job *j, int *first, int *num) {
    int pw = 0, us = 0;
    *first = 3;
    *num = 1;
    for (int i = 6; i < x->argc; i++) {
        int more = x->argc - 1 - i;
        if (arg_is(x, i, "copy")) {
            j->copy = 1;
        } else if (arg_is(x, i, "replace")) {
            j->replace = 1;
        } else if (arg_is(x, i, "auth")) {
            if (!more) {
                reply_syntax(x);
                return -1;
            }
            pw = ++i;
            us = 0;
        } else if (arg_is(x, i, "auth2")) {
            if (more < 2) {
                reply_syntax(x);
                return -1;
            }
            us = ++i;
            pw = ++i;
        } else if (arg_is(x, i, "keys")) {
            if (x->argvlen[3] != 0) {
                reply_err(x, "ERR When using MIGRATE KEYS option, the key argument must be set "
                             "to the empty string");
                return -1;
            }
            *first = i + 1;
            *num = x->argc - i - 1;
            break;
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    long long timeout, db;
    if (parse_long(x, 5, &timeout) || parse_long(x, 4, &db)) return -1;
    if (timeout <= 0) timeout = 1000;
    j->timeout_ms = (long)timeout;
    j->db = db;
    if (pw && !(j->pass = dupn(x->argv[pw], x->argvlen[pw]))) return -2;
    if (us && !(j->user = dupn(x->argv[us], x->argvlen[us]))) return -2;
    /* the port as redis reads it (atoi): a bad one fails to connect */
    char port[16];
    snprintf(port, sizeof port, "%.*s", (int)(x->argvlen[2] < 15 ? x->argvlen[2] : 15), x->argv[2]);
    j->port = atoi(port);
    snprintf(j->host, sizeof j->host, "%.*s", (int)x->argvlen[1], x->argv[1]);
    return 0;
}

/* Dumps the keys argv[first..first+num) that exist into j->keys. */
static int dump_keys(cmd_ctx *x, mig_job *j, int first, int num) {
    j->keys = calloc((size_t)(num ? num : 1), sizeof *j->keys);
    if (!j->keys) return KEEL_ENOMEM;
    for (int i = 0; i < num; i++) {
        mig_key *k = &j->keys[j->n];
        kbuf_init(&k->payload);
        int rc =
            dump_payload(x, x->argv[first + i], x->argvlen[first + i], &k->payload, &k->expire_ms);
        if (rc == KEEL_ENOTFOUND) {
            kbuf_close(&k->payload);
            continue;
        }
        if (!rc && !(k->k = dupn(x->argv[first + i], x->argvlen[first + i]))) rc = KEEL_ENOMEM;
        if (rc) {
            kbuf_close(&k->payload);
            return rc;
        }
        k->kl = x->argvlen[first + i];
        k->ttl = 0;
        if (k->expire_ms) {
            k->ttl = k->expire_ms - x->now_ms;
            if (k->ttl < 1) k->ttl = 1;
        }
        j->n++;
    }
    return 0;
}

void cmd_migrate(cmd_ctx *x) {
    mig_job *j = job_of(x->srv, x->c);
    if (j && j->done) { /* the held request again: the job's reply */
        (void)kbuf_append(x->out, j->reply.p, j->reply.len);
        job_unlink(x->srv, j);
        job_free(j);
        return;
    }
    if (!x->can_block || j) {
        reply_err(x, "ERR MIGRATE is not allowed inside MULTI or a script");
        return;
    }
    migrate_state *st = state(x->srv);
    j = calloc(1, sizeof *j);
    if (!st || !j) {
        free(j);
        reply_storage(x, KEEL_ENOMEM);
        return;
    }
    kbuf_init(&j->reply);
    j->srv = x->srv;
    j->c = x->c;
    j->slot = x->slot;
    int first, num, rc = parse(x, j, &first, &num);
    if (rc) {
        if (rc == -2) reply_storage(x, KEEL_ENOMEM);
        job_free(j);
        return;
    }
    if ((rc = dump_keys(x, j, first, num))) {
        reply_storage(x, rc);
        job_free(j);
        return;
    }
    if (j->n == 0) {
        resp_w_simple(x->out, "NOKEY");
        job_free(j);
        return;
    }
    j->work.data = j;
    if (uv_queue_work(x->srv->loop, &j->work, work, after)) {
        reply_err(x, "IOERR error or timeout connecting to the client");
        job_free(j);
        return;
    }
    j->next = st->jobs;
    st->jobs = j;
    x->hold = RSERVER_HOLD; /* answered by the re-dispatch from after() */
}
