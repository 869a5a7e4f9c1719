/* move.c - a node's side of the move protocol; see move.h and docs/moves.md.
 *
 * Source S (out_move): at KEEL.MOVE.OUT it starts a change capture of the
 * partition's slots and takes a snapshot right after, in the same handler,
 * so the snapshot holds every write before pos0 and the capture reports
 * exactly the later ones. D pulls the snapshot with KEEL.MOVE.CHUNK and the
 * captured changes with KEEL.MOVE.CHANGES; both are paced by the move's token
 * bucket, and a CHANGES with nothing to send is held (long poll) until a
 * change arrives, the fence is taken or 100 ms pass. At KEEL.MOVE.FENCE S
 * persists FENCED, writes out the turn (so the capture holds every change),
 * notes the last change position f and its digest of the partition.
 *
 * Destination D (in_move): at KEEL.MOVE.IN it persists INCOMING, empties the
 * slot range and dials S. It applies chunks, then changes, each batch as one
 * txn of the current turn, and reports progress to the coordinator every
 * 250 ms, at once when the backlog falls under fence_lag_bytes, and when the
 * backlog stops shrinking (non-converging). KEEL.MOVE.VERIFY f is held until
 * D has applied through f; then D makes its copy durable and answers its
 * digest.
 *
 * Record format on the wire and in S's change log:
 *   chunk record:  [slot u16][klen u32][key][vlen u32][value]
 *   change record: [pos u64][t_us u64][slot u16][klen u32][key][vlen u32][value]
 * all big-endian; vlen MOVE_DEL (0xffffffff) marks a delete, with no value.
 */
#include "node/move.h"
#include "node/holdq.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "core/id.h"
#include "core/num.h"
#include "core/tbucket.h"
#include "net/peerlink.h"
#include "net/replyshape.h"
#include "node/cluster.h"
#include "node/coordlink.h"
#include "resp/resp.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MOVES_MAX 16              /* moves in or out at once on one node */
#define CHUNK_MAX (1u << 20)      /* most bytes a chunk or changes reply may ask for */
#define PULL_BYTES (256u << 10)   /* what D asks for: a reply is applied in one turn */
#define PULL_DEPTH 2              /* chunk requests D keeps in flight */
#define CHANGES_POLL_MS 100       /* long poll of an empty CHANGES */
#define REPORT_MS 250             /* progress reports to the coordinator */
#define LOG_MAX ((size_t)1 << 30) /* captured bytes S keeps for one move */
#define STUCK_TICKS 12            /* REPORT_MS ticks without a shrinking backlog */
#define MOVE_DEL 0xffffffffu
#define FENCE_LAG_DEFAULT (1u << 20)
#define VERIFY_WAIT_MS 5000 /* a source that stops answering fails the move */

/* ---- Encoding ------------------------------------------------------------- */

static void be16(char *p, unsigned v) {
    p[0] = (char)(v >> 8), p[1] = (char)v;
}
static void be32(char *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (char)v;
}
static void be64(char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (char)v;
}
static uint64_t rd(const char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (uint8_t)p[i];
    return v;
}

/* Appends [slot][klen][key][vlen][val] (val NULL = delete). */
static int put_record(kbuf *b, unsigned slot, const char *k, size_t klen, const char *v,
                      size_t vlen) {
    char h[6];
    be16(h, slot);
    be32(h + 2, (uint32_t)klen);
    char l[4];
    be32(l, v ? (uint32_t)vlen : MOVE_DEL);
    if (kbuf_append(b, h, 6) || kbuf_append(b, k, klen) || kbuf_append(b, l, 4)) return -1;
    return v ? kbuf_append(b, v, vlen) : 0;
}

/* Parses one record at p[0..n); returns its size, or 0 if malformed. */
static size_t get_record(const char *p, size_t n, unsigned *slot, const char **k, size_t *klen,
                         const char **v, size_t *vlen) {
    if (n < 10) return 0;
    *slot = (unsigned)rd(p, 2);
    *klen = (size_t)rd(p + 2, 4);
    if (*slot >= 16384 || *klen > n - 10) return 0;
    *k = p + 6;
    uint32_t vl = (uint32_t)rd(p + 6 + *klen, 4);
    size_t used = 10 + *klen;
    if (vl == MOVE_DEL) {
        *v = NULL, *vlen = 0;
        return used;
    }
    if (vl > n - used) return 0;
    *v = p + used, *vlen = vl;
    return used + vl;
}

/* ---- State ---------------------------------------------------------------- */

typedef struct out_move {
    moves *mv;
    uint64_t id, epoch;
    unsigned p;
    char dst[KEEL_ID_MAX + 1];
    store_snapshot *snap; /* NULL once the copy has been read */
    char *cursor;         /* the copy resumes after this encoded key; NULL = start */
    size_t curlen;
    int capture;
    kbuf log;          /* change records */
    size_t head;       /* log bytes before head are acknowledged */
    uint64_t next_pos; /* position of the next change; the first is 1 */
    uint64_t acked;    /* D applied through this position */
    int fenced;
    uint64_t fence_pos;
    uint64_t fenced_us;
    uint64_t digest, digest_keys;
    tbucket tb;
    uint64_t bytes_sent;
    int overflow; /* the log passed LOG_MAX: the move cannot converge */
    client *waiter;
    int waiter_changes; /* the waiter is a CHANGES long poll (new changes wake it) */
    int waiting_tokens; /* ...or waits for the throttle (only its timer wakes it) */
    uv_timer_t timer;
} out_move;

enum { IN_COPY, IN_CATCHUP, IN_APPLIED, IN_FAILED };

typedef struct in_move {
    moves *mv;
    uint64_t id, epoch;
    uint64_t fence_lag; /* the coordinator's fence_lag_bytes (KEEL.MOVE.IN), else the default */
    unsigned p;
    char src[KEEL_ID_MAX + 1], host[256];
    int port;
    peerlink *link;
    int phase;
    int pulls;        /* chunk requests in flight */
    int copied;       /* a chunk reply said the snapshot is exhausted */
    uint64_t applied; /* last change position applied */
    int fenced;
    uint64_t fence_pos;
    uint64_t bytes, keys;
    uint64_t lag_bytes, lag_ms;
    uint64_t start_us, tick_bytes;
    double rate; /* bytes/s over the last tick */
    uint64_t best_backlog;
    int stuck;
    uint64_t last_caught_us;
    client *verifier;
    uint64_t verify_since_us; /* a VERIFY waits at most VERIFY_WAIT_MS */
    char why[96];
    uv_timer_t timer;
} in_move;

struct moves {
    server *s;
    peerauth_secret secret;

    out_move *out[MOVES_MAX];
    in_move *in[MOVES_MAX];
    holdq hq; /* requests for fenced partitions */
    move_stats st;
};

static void slot_range(const moves *mv, unsigned p, unsigned *lo, unsigned *hi) {
    unsigned per = 16384u / ptable_partitions(mv->s->pt);
    *lo = p * per;
    *hi = *lo + per - 1;
}

/* ---- Persisted partition states ------------------------------------------- */

/* Writes part/<p> durably. Returns 0 or the store's KEEL_E* (logged). */
KEEL_MUST_CHECK static int persist(moves *mv, unsigned p, const char *state, uint64_t m,
                                   uint64_t epoch, const char *peer) {
    char name[32], val[160];
    snprintf(name, sizeof name, "part/%u", p);
    int n = snprintf(val, sizeof val, "%s %llu %llu %s", state, (unsigned long long)m,
                     (unsigned long long)epoch, peer && peer[0] ? peer : "-");
    int rc = store_meta_put(mv->s->st, name, val, (size_t)n);
    if (rc)
        keel_log(KEEL_LOG_ERROR, "move_state_persist_failed", "partition=%u state=%s move=%llu", p,
                 state, (unsigned long long)m);
    return rc;
}

/* Reads part/<p>: 1 with the fields filled, 0 if there is no move record
 * (none, or NONE), or a negative KEEL_E*: the store could not be read
 * (KEEL_EIO, KEEL_ENOMEM) or the record is not one persist() writes
 * (KEEL_ECORRUPT). An error is never "no record": a FENCED partition read
 * as unrecorded would serve. Logged. */
KEEL_MUST_CHECK static int load_state(moves *mv, unsigned p, char *state, size_t cap, uint64_t *m,
                                      uint64_t *e) {
    char name[32], *v = NULL;
    size_t len = 0;
    snprintf(name, sizeof name, "part/%u", p);
    int rc = store_meta_get(mv->s->st, name, &v, &len);
    if (rc == KEEL_ENOTFOUND) return 0;
    if (rc) {
        keel_log(KEEL_LOG_ERROR, "move_state_load_failed", "partition=%u error=\"%s\"", p,
                 keel_strerror(rc));
        return rc;
    }
    /* "STATE m epoch peer", as persist() writes it. */
    char buf[160], *f[4] = {0}, *save = NULL;
    snprintf(buf, sizeof buf, "%.*s", (int)len, v);
    free(v);
    int nf = 0;
    for (char *t = strtok_r(buf, " ", &save); t && nf < 4; t = strtok_r(NULL, " ", &save))
        f[nf++] = t;
    uint64_t mm, ee;
    if (nf < 3 || strlen(f[0]) >= 16 || keel_parse_u64z(f[1], &mm) || keel_parse_u64z(f[2], &ee)) {
        keel_log(KEEL_LOG_ERROR, "move_state_corrupt", "partition=%u len=%zu", p, len);
        return KEEL_ECORRUPT;
    }
    if (!strcmp(f[0], "NONE")) return 0;
    snprintf(state, cap, "%s", f[0]);
    *m = mm, *e = ee;
    return 1;
}

/* ---- Held requests (fenced partitions): node/holdq.c -------------------- */

static void release_held(moves *mv, long p, int tryagain) {
    holdq_release(&mv->hq, p, tryagain);
}

node_conn *node_conn_of(client *c) {
    if (!c->user) {
        node_conn *nc = calloc(1, sizeof *nc);
        if (!nc) return NULL;
        nc->c = c;
        c->user = nc;
    }
    return c->user;
}

int move_hold(moves *mv, client *c, unsigned p) {
    return holdq_hold(&mv->hq, c, p);
}

/* ---- Finding moves --------------------------------------------------------- */

static out_move *find_out(moves *mv, uint64_t id) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->out[i] && mv->out[i]->id == id) return mv->out[i];
    return NULL;
}
static in_move *find_in(moves *mv, uint64_t id) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->in[i] && mv->in[i]->id == id) return mv->in[i];
    return NULL;
}
static int free_slot(void **arr) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (!arr[i]) return i;
    return -1;
}

/* ---- Source --------------------------------------------------------------- */

static void out_wake(out_move *o, int forced) {
    if (!o->waiter) return;
    client *c = o->waiter;
    o->waiter = NULL;
    node_conn *nc = c->user;
    if (nc) nc->waits_data = forced ? 2 : 0;
    uv_timer_stop(&o->timer);
    holdq_resume(c);
}

static void on_out_timer(uv_timer_t *t) {
    out_wake(t->data, 1);
}

static void on_out_wake_now(uv_timer_t *t) {
    out_wake(t->data, 0);
}

/* Capture callback: runs inside the store's turn write; only appends. */
static void on_change(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                      size_t vlen) {
    out_move *o = arg;
    if (o->overflow) return;
    char h[16];
    be64(h, o->next_pos++);
    be64(h + 8, keel_mono_us());
    if (o->log.len - o->head > LOG_MAX || kbuf_append(&o->log, h, 16) ||
        put_record(&o->log, slot, key, klen, val, vlen)) {
        o->overflow = 1; /* reported to D, which reports non-converging */
        return;
    }
    /* A long poll waiting for data re-runs now; a request waiting for
     * tokens keeps waiting for them. */
    if (o->waiter && o->waiter_changes && !o->waiting_tokens)
        uv_timer_start(&o->timer, on_out_wake_now, 0, 0);
}

static void out_close_cb(uv_handle_t *h) {
    out_move *o = h->data;
    kbuf_close(&o->log);
    free(o->cursor);
    free(o);
}

/* Ends the source's part: capture off, snapshot freed, waiter answered. */
static void out_end(moves *mv, out_move *o) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->out[i] == o) mv->out[i] = NULL;
    /* A failed stop is a failed turn write: the store is failed (sticky)
     * and the node stops at the end of this turn. */
    if (o->capture >= 0 && store_capture_stop(mv->s->st, o->capture))
        keel_log(KEEL_LOG_ERROR, "move_capture_stop_failed", "move=%llu",
                 (unsigned long long)o->id);
    o->capture = -1;
    store_snapshot_free(o->snap);
    o->snap = NULL;
    client *w = o->waiter;
    o->waiter = NULL;
    uv_timer_stop(&o->timer);
    uv_close((uv_handle_t *)&o->timer, out_close_cb);
    if (w) holdq_resume(w); /* finds no move and says so */
}

/* Positions the log head after every record <= acked. */
static void out_trim(out_move *o, uint64_t acked) {
    if (acked <= o->acked) return;
    o->acked = acked;
    while (o->head < o->log.len) {
        const char *r = o->log.p + o->head;
        if (rd(r, 8) > acked) break;
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t n = get_record(r + 16, o->log.len - o->head - 16, &slot, &k, &kl, &v, &vl);
        if (!n) break;
        o->head += 16 + n;
    }
    if (o->head == o->log.len) {
        o->log.len = o->head = 0;
        if (o->log.cap > (64u << 20)) kbuf_shrink(&o->log, 1u << 20);
    } else if (o->head > (16u << 20) && o->head > o->log.len / 2) {
        kbuf_consume(&o->log, o->head);
        o->head = 0;
    }
}

/* ---- Destination ---------------------------------------------------------- */

static void in_report(in_move *in, const char *phase, const char *reason);
static void in_pull(in_move *in);

static void in_fail(in_move *in, const char *why) {
    if (in->phase == IN_FAILED) return;
    in->phase = IN_FAILED;
    snprintf(in->why, sizeof in->why, "%s", why);
    keel_log(KEEL_LOG_WARN, "move_in_failed", "move=%llu partition=%u reason=%s",
             (unsigned long long)in->id, in->p, why);
    in_report(in, "failed", why);
    if (in->verifier) {
        client *c = in->verifier;
        in->verifier = NULL;
        holdq_resume(c);
    }
}

static const char *in_phase_name(const in_move *in) {
    switch (in->phase) {
    case IN_COPY:
        return "copying";
    case IN_CATCHUP:
        return "catching-up";
    case IN_APPLIED:
        return "applied";
    default:
        return "failed";
    }
}

static void in_report(in_move *in, const char *phase, const char *reason) {
    coordlink *l = in->mv->s->link;
    if (!l) return;
    char id[24], b[24], k[24], lb[24], lm[24], r[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)in->id);
    snprintf(b, sizeof b, "%llu", (unsigned long long)in->bytes);
    snprintf(k, sizeof k, "%llu", (unsigned long long)in->keys);
    if (in->lag_bytes == UINT64_MAX)
        snprintf(lb, sizeof lb, "-1"); /* not known yet */
    else
        snprintf(lb, sizeof lb, "%llu", (unsigned long long)in->lag_bytes);
    snprintf(lm, sizeof lm, "%llu", (unsigned long long)in->lag_ms);
    snprintf(r, sizeof r, "%.0f", in->rate);
    const char *argv[] = {"KEEL.MOVE.REPORT", id, phase, b, k, lb, lm, r, reason ? reason : ""};
    coordlink_send(l, 9, argv, NULL);
}

static void on_in_timer(uv_timer_t *t) {
    in_move *in = t->data;
    if (in->verifier && keel_mono_us() - in->verify_since_us > VERIFY_WAIT_MS * 1000ull) {
        in_fail(in, "source-silent-at-fence");
        return;
    }
    in->rate = (double)(in->bytes - in->tick_bytes) * 1000.0 / REPORT_MS;
    in->tick_bytes = in->bytes;
    if (in->phase == IN_CATCHUP) {
        /* The backlog must keep reaching new lows; if it has not for
         * STUCK_TICKS reports while above the fence threshold, writes come
         * in at least as fast as the throttle lets them out. */
        if (in->lag_bytes < in->best_backlog) {
            in->best_backlog = in->lag_bytes;
            in->stuck = 0;
        } else if (in->lag_bytes > in->fence_lag && ++in->stuck >= STUCK_TICKS) {
            in->stuck = 0; /* the coordinator raises the budget or aborts; ask again later */
            keel_log(KEEL_LOG_WARN, "move_not_converging", "move=%llu partition=%u backlog=%llu",
                     (unsigned long long)in->id, in->p, (unsigned long long)in->lag_bytes);
            in_report(in, "non-converging", "backlog-not-shrinking");
            return;
        }
    }
    if (in->phase != IN_FAILED) in_report(in, in_phase_name(in), NULL);
}

static int apply_chunk(in_move *in, const char *p, size_t n, int changes, uint64_t *last) {
    store_txn *t = store_txn_begin(in->mv->s->st);
    unsigned lo, hi;
    slot_range(in->mv, in->p, &lo, &hi);
    size_t off = 0;
    while (off < n) {
        if (changes) {
            if (n - off < 16) goto bad;
            *last = rd(p + off, 8);
            off += 16;
        }
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t used = get_record(p + off, n - off, &slot, &k, &kl, &v, &vl);
        if (!used || slot < lo || slot > hi) goto bad;
        int rc = v ? store_txn_put_raw(t, slot, k, kl, v, vl) : store_txn_del(t, slot, k, kl, NULL);
        if (rc) goto bad;
        if (v && !changes) in->keys++;
        off += used;
    }
    if (store_txn_commit_lazy(t)) goto bad; /* no fsync per turn: VERIFY makes it durable */
    in->bytes += n;
    in->mv->st.bytes_received += n;
    return 0;
bad:
    store_txn_abort(t);
    return KEEL_EPROTO;
}

static void wake_verifier(in_move *in) {
    if (in->verifier && in->phase == IN_APPLIED) {
        client *c = in->verifier;
        in->verifier = NULL;
        holdq_resume(c);
    }
}

static void on_changes(void *arg, void *tag, redisReply *r) {
    in_move *in = tag;
    if (in->phase != IN_CATCHUP) return;
    /* [last-pos, fence-pos | -1, backlog-bytes | -1, backlog-ms, records] */
    if (!reply_shape(r, "iiiis")) {
        in_fail(in, r && r->type == REDIS_REPLY_ERROR ? "source-refused" : "source-unreachable");
        return;
    }
    long long last = r->element[0]->integer, fence = r->element[1]->integer;
    uint64_t applied = in->applied;
    if (r->element[4]->len &&
        apply_chunk(in, r->element[4]->str, r->element[4]->len, 1, &applied)) {
        in_fail(in, "bad-changes");
        return;
    }
    if (FAILPOINT("move.during_catchup") == FP_ERROR) {
        in_fail(in, "failpoint");
        return;
    }
    in->applied = last > 0 && (uint64_t)last > applied ? (uint64_t)last : applied;
    in->lag_bytes = (uint64_t)r->element[2]->integer;
    in->lag_ms = (uint64_t)r->element[3]->integer;
    if (in->lag_bytes == (uint64_t)-1) {
        in_fail(in, "source-log-overflow");
        return;
    }
    if (fence >= 0) {
        in->fenced = 1;
        in->fence_pos = (uint64_t)fence;
        if (in->applied >= in->fence_pos) {
            in->phase = IN_APPLIED;
            wake_verifier(in);
            return;
        }
    } else if (in->lag_bytes <= in->fence_lag) {
        uint64_t now = keel_mono_us();
        if (now - in->last_caught_us > 100000) { /* tell at once, then at most every 100 ms */
            in->last_caught_us = now;
            in_report(in, "caught-up", NULL);
        }
    }
    in_pull(in);
}

static void on_chunk(void *arg, void *tag, redisReply *r) {
    in_move *in = tag;
    if (in->phase != IN_COPY) return;
    in->pulls--;
    if (!reply_shape(r, "Ss")) { /* ["more" | nil, records] */
        in_fail(in, r && r->type == REDIS_REPLY_ERROR ? "source-refused" : "source-unreachable");
        return;
    }
    uint64_t unused = 0;
    if (apply_chunk(in, r->element[1]->str, r->element[1]->len, 0, &unused)) {
        in_fail(in, "bad-chunk");
        return;
    }
    if (FAILPOINT("move.during_copy") == FP_ERROR) {
        in_fail(in, "failpoint");
        return;
    }
    if (r->element[0]->type == REDIS_REPLY_NIL) in->copied = 1;
    if (in->copied && in->pulls == 0) { /* every reply in: the snapshot is here */
        in->phase = IN_CATCHUP;
        in->best_backlog = UINT64_MAX;
        in->lag_bytes = UINT64_MAX; /* unknown until the first CHANGES reply */
        keel_log(KEEL_LOG_INFO, "move_copy_done", "move=%llu partition=%u bytes=%llu keys=%llu",
                 (unsigned long long)in->id, in->p, (unsigned long long)in->bytes,
                 (unsigned long long)in->keys);
        in_report(in, "catching-up", NULL);
    }
    in_pull(in);
}

/* Sends the next data requests to S: during the copy PULL_DEPTH chunk
 * requests stay in flight (S keeps the cursor, so each continues where the
 * previous one ended) and S's reads overlap with D's writes; the catch-up
 * is one long poll at a time. */
static void in_pull(in_move *in) {
    char id[24], n[24], a[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)in->id);
    snprintf(n, sizeof n, "%u", PULL_BYTES);
    int rc = 0;
    if (in->phase == IN_COPY) {
        while (!rc && !in->copied && in->pulls < PULL_DEPTH) {
            const char *argv[] = {"KEEL.MOVE.CHUNK", id, "", n};
            if (!(rc = peerlink_send(in->link, on_chunk, in, 4, argv, NULL))) in->pulls++;
        }
    } else if (in->phase == IN_CATCHUP) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)in->applied);
        const char *argv[] = {"KEEL.MOVE.CHANGES", id, a, n};
        rc = peerlink_send(in->link, on_changes, in, 4, argv, NULL);
    }
    if (rc) in_fail(in, "source-unreachable");
}

static void in_link_ready(void *arg, peerlink *l) {
    in_move *in = arg;
    keel_log(KEEL_LOG_INFO, "move_in_connected", "move=%llu partition=%u source=%s",
             (unsigned long long)in->id, in->p, in->src);
    in_pull(in);
}

static void in_link_down(void *arg, peerlink *l, const char *why) {
    in_move *in = arg;
    if (in->phase == IN_APPLIED) return; /* nothing more to pull */
    in_fail(in, "source-unreachable");
}

static void in_close_cb(uv_handle_t *h) {
    free(h->data);
}

static void in_end(moves *mv, in_move *in) {
    for (int i = 0; i < MOVES_MAX; i++)
        if (mv->in[i] == in) mv->in[i] = NULL;
    peerlink_close(in->link);
    in->link = NULL;
    client *v = in->verifier;
    in->verifier = NULL;
    uv_timer_stop(&in->timer);
    uv_close((uv_handle_t *)&in->timer, in_close_cb);
    if (v) holdq_resume(v);
}

/* ---- Digest --------------------------------------------------------------- */

static int part_digest(moves *mv, unsigned p, uint64_t *x, uint64_t *keys) {
    unsigned lo, hi;
    slot_range(mv, p, &lo, &hi);
    return store_range_digest(mv->s->st, lo, hi, x, keys);
}

/* ---- Directives ------------------------------------------------------------ */

typedef struct dctx {
    moves *mv;
    client *c;
    node_conn *nc;
    int argc;
    char **argv;
    const size_t *len;
} dctx;

static void d_err(dctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void d_err(dctx *x, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp_w_error(&x->c->out, msg);
}

/* Argument i as a strict u64 (core/num.h): -1 if absent or not one. */
static int arg_u64(dctx *x, int i, uint64_t *out) {
    if (i >= x->argc) return -1;
    return keel_parse_u64(x->argv[i], x->len[i], out) ? -1 : 0;
}

static int ok_partition(dctx *x, uint64_t p) {
    return p < ptable_partitions(x->mv->s->pt);
}

/* KEEL.MOVE.OUT term m p epoch dst rate */
static int d_out(dctx *x) {
    moves *mv = x->mv;
    server *s = mv->s;
    uint64_t m, p, e, rate;
    if (x->argc != 7 || arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || arg_u64(x, 4, &e) ||
        arg_u64(x, 6, &rate) || !ok_partition(x, p) || !keel_id_valid(x->argv[5], x->len[5])) {
        d_err(x, "ERR bad KEEL.MOVE.OUT: term move partition epoch destination rate");
        return 0;
    }
    out_move *o = find_out(mv, m);
    if (o) {
        resp_w_simple(&x->c->out, "OK");
        return 0;
    }
    part_state st = ptable_state(s->pt, (unsigned)p);
    const keel_map *map = ptable_map(s->pt);
    if (st != PART_SERVING || map->epoch[p] != e) {
        d_err(x,
              "ERR move %llu refused: partition %llu is %s at epoch %llu here, not SERVING at "
              "%llu",
              (unsigned long long)m, (unsigned long long)p, part_state_name(st),
              (unsigned long long)map->epoch[p], (unsigned long long)e);
        return 0;
    }
    int i = free_slot((void **)mv->out);
    if (i < 0 || !(o = calloc(1, sizeof *o))) {
        d_err(x, "ERR too many moves on this node");
        return 0;
    }
    o->mv = mv;
    o->id = m, o->p = (unsigned)p, o->epoch = e;
    snprintf(o->dst, sizeof o->dst, "%.*s", (int)x->len[5], x->argv[5]);
    o->next_pos = 1;
    kbuf_init(&o->log);
    tbucket_init(&o->tb, rate, rate ? (rate / 10 > CHUNK_MAX ? rate / 10 : CHUNK_MAX) : CHUNK_MAX);
    if (persist(mv, o->p, "OUTGOING", m, e, o->dst)) {
        kbuf_close(&o->log);
        free(o);
        d_err(x, "ERR cannot persist the partition state");
        return 0;
    }
    unsigned lo, hi;
    slot_range(mv, o->p, &lo, &hi);
    /* Capture, then snapshot, with no command in between: gapless (store.h). */
    o->capture = store_capture_start(s->st, lo, hi, on_change, o);
    o->snap = o->capture >= 0 ? store_snapshot_new(s->st) : NULL;
    if (!o->snap) {
        if (o->capture >= 0 && store_capture_stop(s->st, o->capture))
            keel_log(KEEL_LOG_ERROR, "move_capture_stop_failed", "move=%llu",
                     (unsigned long long)m);
        /* If this fails the record says OUTGOING with no capture: a restart
         * serves the partition and the coordinator aborts the move. */
        (void)!persist(mv, o->p, "NONE", m, e, NULL);
        kbuf_close(&o->log);
        free(o);
        d_err(x, "ERR cannot start the copy");
        return 0;
    }
    uv_timer_init(s->loop, &o->timer);
    o->timer.data = o;
    mv->out[i] = o;
    ptable_set_state(s->pt, o->p, PART_OUTGOING);
    keel_log(KEEL_LOG_INFO, "move_out_started",
             "move=%llu partition=%u to=%s epoch=%llu rate=%llu pos0=%llu", (unsigned long long)m,
             o->p, o->dst, (unsigned long long)e, (unsigned long long)rate,
             (unsigned long long)store_snapshot_seq(o->snap));
    resp_w_simple(&x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.IN term m p epoch src host port [fence-lag-bytes] */
static int d_in(dctx *x) {
    moves *mv = x->mv;
    server *s = mv->s;
    uint64_t m, p, e, port, lag = FENCE_LAG_DEFAULT;
    if (x->argc < 8 || x->argc > 9 || arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || arg_u64(x, 4, &e) ||
        arg_u64(x, 7, &port) || port == 0 || port > 65535 || !ok_partition(x, p) ||
        !keel_id_valid(x->argv[5], x->len[5]) || !keel_host_valid(x->argv[6], x->len[6]) ||
        (x->argc == 9 && arg_u64(x, 8, &lag))) {
        d_err(x, "ERR bad KEEL.MOVE.IN: term move partition epoch source host port "
                 "[fence-lag-bytes]");
        return 0;
    }
    if (find_in(mv, m)) {
        resp_w_simple(&x->c->out, "OK");
        return 0;
    }
    part_state st = ptable_state(s->pt, (unsigned)p);
    if (st != PART_ABSENT && st != PART_RETIRED) {
        d_err(x, "ERR move %llu refused: partition %llu is %s here", (unsigned long long)m,
              (unsigned long long)p, part_state_name(st));
        return 0;
    }
    int i = free_slot((void **)mv->in);
    in_move *in = i < 0 ? NULL : calloc(1, sizeof *in);
    if (!in) {
        d_err(x, "ERR too many moves on this node");
        return 0;
    }
    in->mv = mv;
    in->id = m, in->p = (unsigned)p, in->epoch = e, in->port = (int)port;
    in->fence_lag = lag;
    snprintf(in->src, sizeof in->src, "%.*s", (int)x->len[5], x->argv[5]);
    snprintf(in->host, sizeof in->host, "%.*s", (int)x->len[6], x->argv[6]);
    unsigned lo, hi;
    slot_range(mv, in->p, &lo, &hi);
    /* INCOMING first, then an empty range: leftovers of an earlier stay
     * (a RETIRED copy, or an aborted move's partial one) must not mix in. */
    if (persist(mv, in->p, "INCOMING", m, e, in->src) || store_delete_slots(s->st, lo, hi)) {
        free(in);
        d_err(x, "ERR cannot prepare the partition");
        return 0;
    }
    ptable_set_state(s->pt, in->p, PART_INCOMING);
    peerlink_cbs cbs = {.on_ready = in_link_ready, .on_down = in_link_down};
    in->link =
        peerlink_open(s->loop, in->host, in->port, s->cfg.id, in->src, &mv->secret, &cbs, in);
    uv_timer_init(s->loop, &in->timer);
    in->timer.data = in;
    uv_timer_start(&in->timer, on_in_timer, REPORT_MS, REPORT_MS);
    in->start_us = keel_mono_us();
    mv->in[i] = in;
    keel_log(KEEL_LOG_INFO, "move_in_started", "move=%llu partition=%u from=%s addr=%s:%d",
             (unsigned long long)m, in->p, in->src, in->host, in->port);
    if (!in->link) in_fail(in, "source-unreachable");
    resp_w_simple(&x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.FENCE term m -> [f, digest, keys] */
static int d_fence(dctx *x) {
    moves *mv = x->mv;
    uint64_t m;
    out_move *o = arg_u64(x, 2, &m) ? NULL : find_out(mv, m);
    if (!o) {
        d_err(x, "ERR no outgoing move %s here", x->argc > 2 ? x->argv[2] : "?");
        return 0;
    }
    if (o->overflow) {
        d_err(x, "ERR move %llu lost changes (backlog over %zu bytes): it cannot converge",
              (unsigned long long)o->id, LOG_MAX);
        return 0;
    }
    if (o->snap && !o->fenced) { /* a fence before the copy ends would lose the rest */
        d_err(x, "ERR move %llu is still copying", (unsigned long long)o->id);
        return 0;
    }
    if (!o->fenced) {
        if (persist(mv, o->p, "FENCED", o->id, o->epoch, o->dst)) {
            d_err(x, "ERR cannot persist the fence");
            return 0;
        }
        ptable_set_state(mv->s->pt, o->p, PART_FENCED);
        o->fenced_us = keel_mono_us();
        /* Write out the turn: every change before the fence is now in the
         * log, and nothing after it can reach the partition. */
        if (store_sync(mv->s->st, NULL) || part_digest(mv, o->p, &o->digest, &o->digest_keys)) {
            d_err(x, "ERR cannot take the fence position");
            return 0;
        }
        o->fenced = 1;
        o->fence_pos = o->next_pos - 1;
        keel_log(KEEL_LOG_INFO, "move_fenced", "move=%llu partition=%u f=%llu keys=%llu",
                 (unsigned long long)o->id, o->p, (unsigned long long)o->fence_pos,
                 (unsigned long long)o->digest_keys);
        if (FAILPOINT("move.after_fence") == FP_ERROR) {
            d_err(x, "ERR failpoint move.after_fence");
            return 0;
        }
        out_wake(o, 1);
    }
    resp_w_array(&x->c->out, 3);
    resp_w_int(&x->c->out, (long long)o->fence_pos);
    resp_w_int(&x->c->out, (long long)o->digest);
    resp_w_int(&x->c->out, (long long)o->digest_keys);
    return 0;
}

/* KEEL.MOVE.VERIFY term m f -> [digest, keys] once applied through f. */
static int d_verify(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, f;
    in_move *in = arg_u64(x, 2, &m) || arg_u64(x, 3, &f) ? NULL : find_in(mv, m);
    if (!in) {
        d_err(x, "ERR no incoming move %s here", x->argc > 2 ? x->argv[2] : "?");
        return 0;
    }
    if (in->phase == IN_FAILED) {
        d_err(x, "ERR move %llu failed: %s", (unsigned long long)m, in->why);
        return 0;
    }
    if (in->phase != IN_APPLIED) {
        in->verifier = x->c; /* held until the catch-up reaches f */
        if (!in->verify_since_us) in->verify_since_us = keel_mono_us();
        return RSERVER_HOLD;
    }
    if (in->fence_pos != f) {
        d_err(x, "ERR fence position mismatch: source said %llu, coordinator %llu",
              (unsigned long long)in->fence_pos, (unsigned long long)f);
        return 0;
    }
    uint64_t dg, keys;
    /* Durable whatever --fsync says: once the coordinator commits, this copy
     * is the only one that serves. */
    if (store_sync(mv->s->st, NULL) || store_sync_wal(mv->s->st, NULL) ||
        part_digest(mv, in->p, &dg, &keys)) {
        d_err(x, "ERR cannot make the copy durable");
        return 0;
    }
    resp_w_array(&x->c->out, 2);
    resp_w_int(&x->c->out, (long long)dg);
    resp_w_int(&x->c->out, (long long)keys);
    return 0;
}

/* KEEL.MOVE.COMMIT term m map-json: installs the map that gives p to D. */
static int d_commit(dctx *x) {
    moves *mv = x->mv;
    char err[256];
    if (x->argc != 4) {
        d_err(x, "ERR bad KEEL.MOVE.COMMIT: term move map");
        return 0;
    }
    if (node_install_map(mv->s, x->argv[3], x->len[3], err, sizeof err) < 0) {
        d_err(x, "ERR map refused: %s", err);
        return 0;
    }
    resp_w_simple(&x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.ABORT term m p */
static int d_abort(dctx *x) {
    moves *mv = x->mv;
    server *s = mv->s;
    uint64_t m, p;
    if (x->argc != 4 || arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || !ok_partition(x, p)) {
        d_err(x, "ERR bad KEEL.MOVE.ABORT: term move partition");
        return 0;
    }
    char st[16];
    uint64_t rm = 0, re = 0;
    int rec = load_state(mv, (unsigned)p, st, sizeof st, &rm, &re);
    if (rec < 0) {
        d_err(x, "ERR cannot read the partition state: %s", keel_strerror(rec));
        return 0;
    }
    out_move *o = find_out(mv, m);
    in_move *in = find_in(mv, m);
    if (rec && rm == m && (!strcmp(st, "OUTGOING") || !strcmp(st, "FENCED"))) {
        if (ptable_map(s->pt)->owner[p] != ptable_self_index(s->pt)) {
            /* The map already gives p away: the move committed. */
            d_err(x, "ERR move %llu committed here; it cannot abort", (unsigned long long)m);
            return 0;
        }
        if (persist(mv, (unsigned)p, "NONE", m, re, NULL)) {
            d_err(x, "ERR cannot persist the partition state");
            return 0;
        }
        ptable_set_state(s->pt, (unsigned)p, PART_SERVING);
        if (o) out_end(mv, o);
        release_held(mv, (long)p, 0); /* they run now, here */
        mv->st.aborts_total++;
        keel_log(KEEL_LOG_WARN, "move_aborted", "move=%llu partition=%u role=source",
                 (unsigned long long)m, (unsigned)p);
    } else if (rec && rm == m && !strcmp(st, "INCOMING")) {
        if (in) in_end(mv, in);
        unsigned lo, hi;
        slot_range(mv, (unsigned)p, &lo, &hi);
        if (store_delete_slots(s->st, lo, hi) || persist(mv, (unsigned)p, "NONE", m, re, NULL)) {
            d_err(x, "ERR cannot drop the copy");
            return 0;
        }
        if (ptable_state(s->pt, (unsigned)p) == PART_INCOMING)
            ptable_set_state(s->pt, (unsigned)p, PART_ABSENT);
        mv->st.aborts_total++;
        keel_log(KEEL_LOG_WARN, "move_aborted", "move=%llu partition=%u role=destination",
                 (unsigned long long)m, (unsigned)p);
    } else {
        if (o) out_end(mv, o); /* memory without a record: nothing durable to undo */
        if (in) in_end(mv, in);
    }
    resp_w_simple(&x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.CLEANUP term m p: deletes a RETIRED copy. */
static int d_cleanup(dctx *x) {
    moves *mv = x->mv;
    uint64_t m, p;
    if (x->argc != 4 || arg_u64(x, 2, &m) || arg_u64(x, 3, &p) || !ok_partition(x, p)) {
        d_err(x, "ERR bad KEEL.MOVE.CLEANUP: term move partition");
        return 0;
    }
    char st[16];
    uint64_t rm = 0, re = 0;
    /* The record says RETIRED, or still FENCED/OUTGOING when the commit
     * reached this node as a map while its move state was gone (restart). */
    int rec = load_state(mv, (unsigned)p, st, sizeof st, &rm, &re);
    if (rec < 0) {
        d_err(x, "ERR cannot read the partition state: %s", keel_strerror(rec));
        return 0;
    }
    if (rec && rm == m && strcmp(st, "INCOMING") != 0 &&
        ptable_state(mv->s->pt, (unsigned)p) == PART_RETIRED) {
        if (FAILPOINT("move.before_cleanup") == FP_ERROR) {
            d_err(x, "ERR failpoint move.before_cleanup");
            return 0;
        }
        unsigned lo, hi;
        slot_range(mv, (unsigned)p, &lo, &hi);
        if (store_delete_slots(mv->s->st, lo, hi) ||
            persist(mv, (unsigned)p, "NONE", m, re, NULL)) {
            d_err(x, "ERR cannot delete the retired copy");
            return 0;
        }
        ptable_set_state(mv->s->pt, (unsigned)p, PART_ABSENT);
        mv->st.cleanups_total++;
        keel_log(KEEL_LOG_INFO, "move_cleanup", "move=%llu partition=%u", (unsigned long long)m,
                 (unsigned)p);
    }
    resp_w_simple(&x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.RATE term m bytes-per-sec */
static int d_rate(dctx *x) {
    uint64_t m, rate;
    out_move *o = arg_u64(x, 2, &m) || arg_u64(x, 3, &rate) ? NULL : find_out(x->mv, m);
    if (!o || tbucket_set_rate(&o->tb, keel_mono_us(), rate)) {
        d_err(x, "ERR no outgoing move %s here, or a bad rate", x->argc > 2 ? x->argv[2] : "?");
        return 0;
    }
    keel_log(KEEL_LOG_INFO, "move_rate", "move=%llu rate=%llu", (unsigned long long)m,
             (unsigned long long)rate);
    resp_w_simple(&x->c->out, "OK");
    return 0;
}

/* KEEL.MOVE.STATE term -> [[p, state, move, active], ...] for every move
 * record, so that a coordinator can settle what a restart left behind. */
static int d_state(dctx *x) {
    moves *mv = x->mv;
    unsigned np = ptable_partitions(mv->s->pt);
    kbuf body;
    kbuf_init(&body);
    size_t n = 0;
    for (unsigned p = 0; p < np; p++) {
        part_state s = ptable_state(mv->s->pt, p);
        if (s == PART_SERVING || s == PART_ABSENT) continue;
        char st[16];
        uint64_t m = 0, e = 0;
        int rec = load_state(mv, p, st, sizeof st, &m, &e);
        if (rec < 0) { /* a partial list would read as "moves lost" */
            kbuf_close(&body);
            d_err(x, "ERR cannot read the partition state: %s", keel_strerror(rec));
            return 0;
        }
        if (!rec) continue;
        int active = (s == PART_INCOMING && find_in(mv, m)) ||
                     ((s == PART_OUTGOING || s == PART_FENCED) && find_out(mv, m)) ||
                     s == PART_RETIRED;
        resp_w_array(&body, 4);
        resp_w_int(&body, p);
        resp_w_bulkstr(&body, part_state_name(s));
        resp_w_int(&body, (long long)m);
        resp_w_int(&body, active);
        n++;
    }
    resp_w_array(&x->c->out, n);
    kbuf_append(&x->c->out, body.p, body.len);
    if (body.oom) x->c->out.oom = 1; /* an entry is missing: not a reply to send */
    kbuf_close(&body);
    return 0;
}

/* ---- Data path (D -> S) ---------------------------------------------------- */

typedef struct chunk_ctx {
    kbuf *b;
} chunk_ctx;

static int chunk_cb(void *arg, unsigned slot, const char *key, size_t klen, const char *val,
                    size_t vlen) {
    chunk_ctx *cc = arg;
    return put_record(cc->b, slot, key, klen, val, vlen) ? 1 : 0;
}

/* Finds the move for a data request and checks the caller is its D. */
static out_move *data_move(dctx *x) {
    uint64_t m;
    out_move *o = arg_u64(x, 1, &m) ? NULL : find_out(x->mv, m);
    if (!o) {
        d_err(x, "ERR no outgoing move %.*s here", (int)(x->len[1] > 64 ? 64 : x->len[1]),
              x->argv[1]);
        return NULL;
    }
    if (strcmp(peerserve_peer(&x->nc->peer), o->dst) != 0) {
        d_err(x, "NOPERM move %llu goes to %s", (unsigned long long)m, o->dst);
        return NULL;
    }
    return o;
}

/* Holds the request until wait_us passes (or out_wake). */
static int data_wait(out_move *o, dctx *x, uint64_t wait_us, int changes, int tokens) {
    x->nc->waits_data = 1;
    o->waiter = x->c;
    o->waiter_changes = changes;
    o->waiting_tokens = tokens;
    uv_timer_start(&o->timer, on_out_timer, wait_us / 1000 + 1, 0);
    return RSERVER_HOLD;
}

/* KEEL.MOVE.CHUNK m "" max-bytes -> ["more" | nil, records]: the next part
 * of the snapshot, continuing after the last key sent (S keeps the cursor, so
 * D may pipeline requests); nil once the snapshot is exhausted. */
static int d_chunk(dctx *x) {
    out_move *o = data_move(x);
    if (!o) return 0;
    uint64_t maxb;
    if (x->argc != 4 || x->len[2] || arg_u64(x, 3, &maxb) || maxb == 0) {
        d_err(x, "ERR bad KEEL.MOVE.CHUNK: move \"\" max-bytes");
        return 0;
    }
    if (!o->snap) { /* finished: pipelined requests past the end get nothing */
        resp_w_array(&x->c->out, 2);
        resp_w_null(&x->c->out, x->c->proto);
        resp_w_bulk(&x->c->out, "", 0);
        return 0;
    }
    if (maxb > CHUNK_MAX) maxb = CHUNK_MAX;
    uint64_t now = keel_mono_us();
    size_t want = (size_t)maxb;
    /* Wait for a worthwhile amount of tokens rather than send crumbs; the
     * throttle is never bypassed (one key over the grant at most, since a
     * chunk ends after the key that crosses it). */
    size_t worth = want / 4 < 65536 ? want / 4 : 65536;
    uint64_t wait = tbucket_wait_us(&o->tb, now, worth);
    if (wait) return data_wait(o, x, wait, 0, 1);
    x->nc->waits_data = 0;
    size_t got = tbucket_take(&o->tb, now, want);
    if (!got) got = 1;
    unsigned lo, hi;
    slot_range(x->mv, o->p, &lo, &hi);
    kbuf b;
    kbuf_init(&b);
    chunk_ctx cc = {&b};
    char *next = NULL;
    size_t nextlen = 0;
    long n = store_copy_range(x->mv->s->st, o->snap, lo, hi, o->cursor, o->curlen, got, chunk_cb,
                              &cc, &next, &nextlen);
    if (n < 0) {
        kbuf_close(&b);
        d_err(x, "ERR copy failed: %s", keel_strerror((int)n));
        return 0;
    }
    free(o->cursor);
    o->cursor = next;
    o->curlen = nextlen;
    o->bytes_sent += b.len;
    x->mv->st.bytes_sent += b.len;
    resp_w_array(&x->c->out, 2);
    if (next)
        resp_w_bulk(&x->c->out, "more", 4);
    else
        resp_w_null(&x->c->out, x->c->proto);
    resp_w_bulk(&x->c->out, b.p ? b.p : "", b.len);
    kbuf_close(&b);
    if (!next) { /* copied: let RocksDB drop the versions it kept for us */
        store_snapshot_free(o->snap);
        o->snap = NULL;
    }
    return 0;
}

/* KEEL.MOVE.CHANGES m acked max-bytes
 *   -> [last-pos, fence-pos | -1, backlog-bytes | -1 (overflow), backlog-ms, records] */
static int d_changes(dctx *x) {
    out_move *o = data_move(x);
    if (!o) return 0;
    uint64_t acked, maxb;
    if (x->argc != 4 || arg_u64(x, 2, &acked) || arg_u64(x, 3, &maxb) || maxb == 0) {
        d_err(x, "ERR bad KEEL.MOVE.CHANGES: move acked max-bytes");
        return 0;
    }
    out_trim(o, acked);
    size_t avail = o->log.len - o->head;
    int forced = x->nc->waits_data == 2;
    if (!avail && !o->fenced && !o->overflow && !forced)
        return data_wait(o, x, CHANGES_POLL_MS * 1000, 1, 0);
    uint64_t now = keel_mono_us();
    size_t want = avail < maxb ? avail : (size_t)maxb, got = want;
    if (want && !o->fenced) { /* the fence drains at full speed: it holds writes */
        /* Tokens for at least the first whole record, or a worthwhile part
         * of what is there; then whole records within what was granted. */
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t first =
            16 + get_record(o->log.p + o->head + 16, avail - 16, &slot, &k, &kl, &v, &vl);
        size_t need = want / 4 > first ? (want / 4 < 65536 ? want / 4 : 65536) : first;
        if (need > want) need = want;
        uint64_t wait = tbucket_wait_us(&o->tb, now, need);
        if (wait) return data_wait(o, x, wait, 1, 1);
        got = tbucket_take(&o->tb, now, want);
    }
    x->nc->waits_data = 0;
    /* Whole records up to got bytes (at least one when any is allowed). */
    size_t off = o->head, end = o->head;
    uint64_t last = acked;
    while (end < o->log.len && (end == off ? got > 0 : end - off < got)) {
        unsigned slot;
        const char *k, *v;
        size_t kl, vl;
        size_t n = get_record(o->log.p + end + 16, o->log.len - end - 16, &slot, &k, &kl, &v, &vl);
        if (!n) break;
        last = rd(o->log.p + end, 8);
        end += 16 + n;
    }
    uint64_t backlog = o->log.len - end;
    uint64_t age_ms = 0;
    if (end < o->log.len) age_ms = (now - rd(o->log.p + end + 8, 8)) / 1000;
    o->bytes_sent += end - off;
    x->mv->st.bytes_sent += end - off;
    resp_w_array(&x->c->out, 5);
    resp_w_int(&x->c->out, (long long)last);
    resp_w_int(&x->c->out, o->fenced ? (long long)o->fence_pos : -1);
    resp_w_int(&x->c->out, o->overflow ? -1 : (long long)backlog);
    resp_w_int(&x->c->out, (long long)age_ms);
    resp_w_bulk(&x->c->out, o->log.p ? o->log.p + off : "", end - off);
    return 0;
}

/* ---- Map changes ----------------------------------------------------------- */

static int still_fenced(unsigned p, void *pt) {
    return ptable_state(pt, p) == PART_FENCED;
}

void move_map_changed(moves *mv) {
    server *s = mv->s;
    /* Sources whose partition the map gave away: the move committed. */
    for (int i = 0; i < MOVES_MAX; i++) {
        out_move *o = mv->out[i];
        if (!o || ptable_state(s->pt, o->p) != PART_RETIRED) continue;
        /* On failure the record still says FENCED: with a map that gives p
         * away, a restart reads that as RETIRED too (move_restore). */
        if (persist(mv, o->p, "RETIRED", o->id, o->epoch, o->dst))
            keel_log(KEEL_LOG_ERROR, "move_retire_persist_failed", "move=%llu partition=%u",
                     (unsigned long long)o->id, o->p);
        uint64_t pause_us = o->fenced_us ? keel_mono_us() - o->fenced_us : 0;
        keel_log(KEEL_LOG_INFO, "move_committed",
                 "move=%llu partition=%u role=source fenced_for_ms=%.3f", (unsigned long long)o->id,
                 o->p, pause_us / 1000.0);
        mv->st.commits_total++;
        unsigned p = o->p;
        out_end(mv, o);
        release_held(mv, p, 0); /* -MOVED to the new owner */
    }
    /* Destinations the map made owners. */
    for (int i = 0; i < MOVES_MAX; i++) {
        in_move *in = mv->in[i];
        if (!in || ptable_state(s->pt, in->p) != PART_SERVING) continue;
        /* The INCOMING record stays: with a map that says this node owns p
         * it means SERVING (move_restore), so clearing it is not worth an
         * fsync on the commit path; the next move of p overwrites it. */
        keel_log(KEEL_LOG_INFO, "move_committed", "move=%llu partition=%u role=destination",
                 (unsigned long long)in->id, in->p);
        mv->st.commits_total++;
        in_end(mv, in);
    }
    /* Requests held for a partition that is no longer fenced (a fence
     * restored at start-up and settled by this map). */
    for (long p; (p = holdq_find_unfenced(&mv->hq, still_fenced, s->pt)) >= 0;)
        release_held(mv, p, 0);
}

int move_restore(moves *mv) {
    server *s = mv->s;
    unsigned np = ptable_partitions(s->pt);
    const keel_map *map = ptable_map(s->pt);
    int self = ptable_self_index(s->pt);
    for (unsigned p = 0; p < np; p++) {
        char st[16];
        uint64_t m, e;
        int rec = load_state(mv, p, st, sizeof st, &m, &e);
        if (rec < 0) return rec; /* the node must not start on a guess */
        if (!rec) continue;
        int mine = self >= 0 && map->owner[p] == self;
        part_state ps;
        if (!strcmp(st, "INCOMING"))
            ps = mine ? PART_SERVING : PART_INCOMING;
        else if (!strcmp(st, "FENCED"))
            ps = mine ? PART_FENCED : PART_RETIRED; /* held until the coordinator decides */
        else if (!strcmp(st, "OUTGOING"))
            ps = mine ? PART_SERVING : PART_RETIRED; /* the capture is gone: it will abort */
        else
            ps = mine ? PART_SERVING : PART_RETIRED;
        /* A map that gives p away means the move committed while we were
         * down: the copy here is a retired one, kept until CLEANUP. */
        int rc;
        if (ps == PART_RETIRED && strcmp(st, "RETIRED") &&
            (rc = persist(mv, p, "RETIRED", m, e, NULL)))
            return rc;
        ptable_set_state(s->pt, p, ps);
        keel_log(KEEL_LOG_INFO, "move_state_restored", "partition=%u record=%s move=%llu state=%s",
                 p, st, (unsigned long long)m, part_state_name(ps));
    }
    move_map_changed(mv);
    return 0;
}

/* ---- Dispatch --------------------------------------------------------------- */

/* Every peer command checks its argument count here, before its handler or
 * the directive guard sees it: handlers may read argv[0..argc) only, and
 * argc is within [min_args, max_args]. */
typedef struct dcmd {
    const char *name;
    int coordinator;        /* 1: a directive (term first), only from the coordinator */
    int min_args, max_args; /* including the name */
    int (*fn)(dctx *x);
} dcmd;

static const dcmd dcmds[] = {
    {"keel.move.out", 1, 7, 7, d_out},         {"keel.move.in", 1, 8, 9, d_in},
    {"keel.move.fence", 1, 3, 3, d_fence},     {"keel.move.verify", 1, 4, 4, d_verify},
    {"keel.move.commit", 1, 4, 4, d_commit},   {"keel.move.abort", 1, 4, 4, d_abort},
    {"keel.move.cleanup", 1, 4, 4, d_cleanup}, {"keel.move.rate", 1, 4, 4, d_rate},
    {"keel.move.state", 1, 2, 2, d_state},     {"keel.move.chunk", 0, 4, 4, d_chunk},
    {"keel.move.changes", 0, 4, 4, d_changes},
};

int move_dispatch(moves *mv, client *c, int argc, char **argv, const size_t *len) {
    if (!mv) { /* not in a coordinated cluster: no peers at all */
        keel_log(KEEL_LOG_WARN, "peer_command_refused", "addr=%s reason=no-cluster", c->addr);
        resp_w_error(&c->out, PEERSERVE_NOPERM);
        return 0;
    }
    node_conn *nc = node_conn_of(c);
    if (!nc) {
        resp_w_error(&c->out, "ERR out of memory");
        return 0;
    }
    if (!strcasecmp(argv[0], "keel.auth")) {
        if (!mv) {
            resp_w_error(&c->out, "ERR this node is not in a coordinated cluster");
            return 0;
        }
        peerserve_auth(&nc->peer, c, mv->s->cfg.id, &mv->secret, mv->s->coord_pub, argc, argv, len);
        return 0;
    }
    const dcmd *d = NULL;
    for (size_t i = 0; i < sizeof dcmds / sizeof *dcmds && !d; i++)
        if (!strcasecmp(argv[0], dcmds[i].name)) d = &dcmds[i];
    const char *peer = peerserve_peer(&nc->peer);
    if (!mv || !peer) {
        keel_log(KEEL_LOG_WARN, "peer_command_refused", "addr=%s reason=unauthenticated", c->addr);
        resp_w_error(&c->out, PEERSERVE_NOPERM);
        return 0;
    }
    if (!d) {
        resp_w_errorf(&c->out, "ERR unknown command '%.64s'", argv[0]);
        return 0;
    }
    dctx x = {mv, c, nc, argc, argv, len};
    if (argc < d->min_args || argc > d->max_args) {
        d_err(&x, "ERR wrong number of arguments for '%s' command", d->name);
        return 0;
    }
    if (d->coordinator) {
        uint64_t term = 0;
        if (arg_u64(&x, 1, &term)) {
            d_err(&x, "ERR %s needs the coordinator term first", d->name);
            return 0;
        }
        directive_verdict v =
            coordlink_check_term(mv->s->link, !strcmp(peer, COORDINATOR_ID), term);
        if (v != DIRECTIVE_ACCEPT) {
            keel_log(KEEL_LOG_WARN, "directive_dropped", "command=%s peer=%s reason=%s term=%llu",
                     d->name, peer, directive_verdict_name(v), (unsigned long long)term);
            d_err(&x, "NOPERM directive refused: %s", directive_verdict_name(v));
            return 0;
        }
    }
    return d->fn(&x);
}

void move_conn_closed(moves *mv, client *c) {
    node_conn *nc = c->user;
    if (!nc) return;
    if (mv) {
        holdq_unlink(&mv->hq, nc);
        for (int i = 0; i < MOVES_MAX; i++) {
            if (mv->out[i] && mv->out[i]->waiter == c) {
                mv->out[i]->waiter = NULL;
                uv_timer_stop(&mv->out[i]->timer);
            }
            if (mv->in[i] && mv->in[i]->verifier == c) mv->in[i]->verifier = NULL;
        }
    }
    peerserve_close(&nc->peer, c);
    free(nc);
    c->user = NULL;
}

int move_sweep_skip(void *arg, unsigned slot) {
    moves *mv = arg;
    part_state s = ptable_state(mv->s->pt, keel_slot_partition(slot, ptable_partitions(mv->s->pt)));
    return s == PART_INCOMING || s == PART_FENCED;
}

void move_get_stats(const moves *mv, move_stats *out) {
    memset(out, 0, sizeof *out);
    if (!mv) return;
    *out = mv->st;
    out->held = mv->hq.held;
    out->held_total = mv->hq.held_total;
    out->tryagain_total = mv->hq.tryagain_total;
    unsigned np = ptable_partitions(mv->s->pt);
    for (unsigned p = 0; p < np; p++) {
        switch (ptable_state(mv->s->pt, p)) {
        case PART_OUTGOING:
            out->outgoing++;
            break;
        case PART_FENCED:
            out->fenced++;
            break;
        case PART_INCOMING:
            out->incoming++;
            break;
        case PART_RETIRED:
            out->retired++;
            break;
        default:
            break;
        }
    }
}

moves *moves_new(server *s, const peerauth_secret *secret, int hold_max_ms) {
    moves *mv = calloc(1, sizeof *mv);
    if (!mv) return NULL;
    mv->s = s;
    mv->secret = *secret;
    holdq_init(&mv->hq, s->loop, hold_max_ms);
    return mv;
}

static void moves_closed(uv_handle_t *h) {
    free(h->data);
}

void moves_free(moves *mv) {
    if (!mv) return;
    for (int i = 0; i < MOVES_MAX; i++) {
        if (mv->out[i]) out_end(mv, mv->out[i]);
        if (mv->in[i]) in_end(mv, mv->in[i]);
    }
    peerauth_secret_wipe(&mv->secret);
    holdq_close(&mv->hq, moves_closed, mv);
}
