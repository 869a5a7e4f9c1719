/* repsim.c - the replication simulator (repsim.h; docs/replication.md).
 *
 * One simulated clock, one event queue ordered by (time, sequence number):
 * a seed decides every interleaving. A node's "turn" is one event: its
 * handler runs, the store writes the turn out, the engines seal the turn's
 * batches (rep_turn_end) and the leader's data messages leave; then the
 * turn's fsync, a window of simulated time the node blocks in, and only at
 * its end the replies and the other messages - the real node's order
 * (node_turn_end). A failed turn write stops the node with its replies
 * unsent; a crash is a power loss that keeps the WAL's synced prefix and
 * some of the rest (wal_cut).
 *
 *   clients --SET/GET--> node: rep_write_check / rep_read_check, the store
 *   leader engine --APPEND/STREAM/SNAP--> follower engine --ACK--> leader
 *   node --heartbeat--> coordinator model --lease grants, map--> nodes
 *   leader --ISR proposal--> coordinator (compare-and-set on the partition epoch)
 *
 * The coordinator model is self-contained (not core/mapcodec or
 * coord/mapstore): per partition replicas (leader first), ISR, leader epoch,
 * partition epoch, and the incarnation of every node, which the map carries
 * so that a restarted node never acts on leadership given to its previous
 * life.
 */
#include "repsim.h"
#include "simkit.h"

#include "core/buf.h"
#include "core/crc16.h"
#include "core/err.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "coord/coord_repstep.h"
#include "node/rep_engine.h"
#include "store/store.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define P 8    /* partitions */
#define MAXN 5 /* nodes */
#define RF 3
#define MIN_INSYNC 2
#define CLIENTS 6
#define PRELOAD 400 /* keys on every replica before the run (position 0) */
#define HB_MS 50    /* node -> coordinator heartbeats */
#define SUSPECT_MS 300
#define CTICK_MS 20
#define MAP_PUSH_MS 500
#define CLIENT_TIMEOUT_MS 1500
#define SETTLE_MS 7000 /* after the faults */
#define QUIET_MS 3000  /* clients stop this long before the end */
/* The coordinator promotes only after the old leader's lease is over on the
 * old leader's clock: clocks run at most 2% slow, so 5% is a bound. */
#define LEASE_WAIT_US ((uint64_t)(REP_LEASE_MS * 1050ull + 20000ull))
/* Replica moves (the coordinator's executor over coord_repstep.c). */
#define MOVES_MAX 3          /* moves running at once, one per partition */
#define MOVE_START_PM 25     /* per mille per coordinator tick: a new move starts */
#define MOVE_TIMEOUT_MS 3000 /* replica_move_timeout_ms (600000 in production) */
#define MOVE_ABORT_PM 3      /* per mille per tick: the coordinator gives a move up */
#define RESIGN_MS 1000       /* a RESIGN waits this long for its target (5 s in rep_uv.c) */
#define RESIGN_RETRY_MS 200  /* after a refused or lost RESIGN (coord_repmove.c) */
#define HANDOFF_MS 2000      /* a SIGTERM hand-off's bound (10 s in production) */

typedef struct sim sim;
typedef struct ev ev;
typedef void (*ev_fn)(sim *w, ev *e);

enum {
    K_MSG = 1,
    K_PEERDOWN,
    K_HB,
    K_MAP,
    K_ISR,
    K_TICK,
    K_HBT,
    K_CREQ,
    K_CREP,
    K_CTIMEOUT,
    K_CNEXT,
    K_CTICK,
    K_FAULT,
    K_RESTART,
    K_RESIGN,
    K_RESIGNR,
    K_SYNCDONE, /* a node's fsync window ends: the turn is durable */
    K_WCRASH    /* power loss inside a node's fsync window (an armed fault) */
};

typedef struct cpart {
    int rep[MAXN], nrep;    /* node indexes, any order (the leader among them); a move
                             * step changes the list (RF + 1 while a replica is added) */
    int leader, leader_inc; /* the leader and the incarnation it was made leader in */
    unsigned isr;           /* bit per node index */
    uint64_t lepoch, pepoch;
    int failing;       /* no more lease grants to the leader; promote once it ran out */
    uint64_t grant_at; /* world us at which the last granted heartbeat arrived */
} cpart;

typedef struct cmap {
    cpart part[P];
    int inc[MAXN]; /* the incarnation the coordinator knows of each node */
} cmap;
/* A node acts on leadership only if the map gave it to its own incarnation
 * (leader_inc): a map that made its previous life leader is not for it. */

struct ev {
    uint64_t at, seq;
    int kind;
    int node, inc; /* node >= 0: a turn of that node, if still incarnation inc */
    ev_fn fn;
    int a, b;
    uint64_t u, u2, u3, u4;
    int argc;
    char **argv;
    size_t *len;
    char s1[48], s2[48];
    cmap *map;
};

typedef struct shadow { /* what a node holds of one partition's log (R4, R5) */
    uint64_t base;      /* every position <= base (a full copy) */
    uint64_t *hash, *epoch;
    uint8_t *pend; /* 1: applied since the node's last fsync (not durable yet) */
    size_t cap;
} shadow;

typedef struct spend { /* a position applied and not yet covered by an fsync */
    unsigned p;
    uint64_t pos, hash, tag; /* tag: the node's apply_tag when it was applied */
} spend;

typedef struct pendw { /* a write waiting for its turn's commit */
    int client;
    uint64_t gen, epoch, pos, hash;
    unsigned p;
} pendw;

typedef struct snode {
    sim *w;
    int i, up, inc, fail_next_sync;
    char id[8], dir[300];
    store *st;
    rep *rp;
    uint64_t paused_until, cut_until;
    int64_t clock_off;
    double rate;
    ev **out;
    size_t nout, capout;
    pendw *pw;
    size_t npw, cappw;
    cmap view; /* the last map applied */
    uint64_t seen_epoch[P];
    uint64_t served_epoch[P]; /* the last epoch it served p in (R2 checked) */
    shadow sh[P];
    /* Power loss (docs/replication.md "Power loss"): the newest WAL file and
     * how much of it the last fsync covered; the positions applied since;
     * the fsync window of the turn in flight (the node runs nothing in it). */
    char wal[64];
    uint64_t wal_synced;
    spend *pend;
    size_t npend, cappend;
    uint64_t apply_tag;
    int win_open, win_more; /* win_more: written during the window (a mutation) */
    uint64_t sync_until, win_tag, win_size;
    size_t win_nout; /* messages queued before the window: they leave at its end */
    char win_wal[64];
    int crash_arm; /* a fault: power loss inside the next fsync window */
    uint64_t arm_at;
    /* The binding's leadership transfer (rep_uv.c, C5), modelled: writes of
     * p are refused while refuse_le[p] is the leader epoch it leads p in. */
    uint64_t refuse_le[P], resign_ok_le[P]; /* resign_ok_le: answered OK (T1) */
    int resign_to[P];                       /* ... to this target */
    struct {
        int active, target;
        uint64_t le, deadline_us, token;
    } rs[P];
} snode;

typedef struct smove {         /* one replica move the coordinator model executes */
    int active, busy, handoff; /* handoff: part of a SIGTERM hand-off */
    rmove mv;
    uint64_t busy_until, retry_at;
} smove;

typedef struct acked {
    char key[24], val[40];
    unsigned p;
} acked;

typedef struct wreg { /* a client write in a leader's batch: (p, batch hash) -> key = val */
    unsigned p;
    uint64_t hash;
    size_t next; /* chain in its bucket; SIZE_MAX ends it */
    char key[24], val[40];
} wreg;
#define REG_BUCKETS 4096

typedef struct sclient {
    int id, busy, is_read, attempts, target;
    uint64_t gen, seq;
    char key[24], val[40];
    unsigned p;
    long want;
    int owner[P];
} sclient;

struct sim {
    repsim_opts o;
    repsim_result *r;
    uint64_t rng, now, seq;
    simkit_queue q; /* pending events */
    int n;
    snode nodes[MAXN];
    uint64_t conn_gen[MAXN][MAXN];
    uint64_t last_at[MAXN + 1][MAXN + 1]; /* FIFO per pair; index MAXN: coordinator */
    cmap cm;                              /* the coordinator's, authoritative */
    uint64_t last_hb[MAXN];
    int hb_inc[MAXN]; /* the incarnation of the last heartbeat */
    sclient clients[CLIENTS];
    acked *acks;
    size_t nacks, capacks;
    wreg *reg; /* every batch's writes, to tell what a cut WAL kept */
    size_t nreg, capreg, rbuck[REG_BUCKETS];
    uint64_t slow_until, fault_end, end, last_push;
    int down; /* nodes crashed and not yet restarted */
    smove mv[P];
    uint64_t next_move;
    int ho_node, ho_inc; /* a SIGTERM hand-off under way (-1: none) */
    uint64_t ho_deadline;
    struct { /* the last transfer committed away from a leader (T1) */
        int from, inc;
        uint64_t le;
    } xfer[P];
};

static void violation(sim *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(sim *w, const char *fmt, ...) {
    if (w->r->violation) return;
    w->r->violation = 1;
    char msg[420];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w->r->what, sizeof w->r->what, "seed %llu at %.3f s: %s",
             (unsigned long long)w->o.seed, w->now / 1e6, msg);
}

static void trace(sim *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(sim *w, const char *fmt, ...) {
    if (!w->o.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%10.3f ", w->now / 1e6);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static uint64_t rnd(sim *w) { /* splitmix64 (simkit.h) */
    return simkit_rnd(&w->rng);
}
static uint64_t rnd_in(sim *w, uint64_t lo, uint64_t hi) { /* [lo, hi] */
    return simkit_rnd_in(&w->rng, lo, hi);
}
static int chance(sim *w, unsigned per_mille) {
    return simkit_chance(&w->rng, per_mille);
}

/* ---- Events ------------------------------------------------------------------- */

/* The event queue orders by (at, seq): simkit.h. */
static void heap_push(sim *w, ev *e) {
    simkit_push(&w->q, e->at, e->seq, e);
}

static ev *heap_pop(sim *w) {
    return simkit_pop(&w->q);
}

static ev *ev_new(sim *w, int kind, uint64_t at, int node, ev_fn fn) {
    ev *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->kind = kind;
    e->at = at < w->now ? w->now : at;
    e->node = node;
    e->inc = node >= 0 ? w->nodes[node].inc : -1;
    e->fn = fn;
    return e;
}

static void ev_free(ev *e) {
    for (int i = 0; i < e->argc; i++)
        free(e->argv[i]);
    free(e->argv);
    free(e->len);
    free(e->map);
    free(e);
}

static void schedule(sim *w, ev *e) {
    e->seq = ++w->seq;
    heap_push(w, e);
}

/* One message's delay: 50-1500 us, one in fifty 5-20 ms more, up to 40 ms
 * more during a delay burst. */
static uint64_t net_delay(sim *w) {
    uint64_t d = rnd_in(w, 50, 1500);
    if (chance(w, 20)) d += rnd_in(w, 5000, 20000);
    if (w->now < w->slow_until) d += rnd_in(w, 0, 40000);
    return d;
}

/* Schedules a message from src to dst (node index, MAXN: the coordinator,
 * -1: a client) after a network delay, in order per pair. */
static void net_send(sim *w, int src, int dst, ev *e) {
    uint64_t at = w->now + net_delay(w);
    if (src >= 0 && dst >= 0) {
        if (at < w->last_at[src][dst]) at = w->last_at[src][dst];
        w->last_at[src][dst] = at;
    }
    e->at = at;
    schedule(w, e);
}

/* A node's messages leave at the end of its turn. */
static void send_from(snode *n, ev *e) {
    if (n->nout == n->capout) {
        n->capout = n->capout ? n->capout * 2 : 16;
        n->out = realloc(n->out, n->capout * sizeof *n->out);
        if (!n->out) abort();
    }
    n->out[n->nout++] = e;
}

/* ---- Shadow logs ------------------------------------------------------------------ */

static void sh_grow(shadow *s, uint64_t pos) {
    if (pos < s->cap) return;
    size_t cap = s->cap ? s->cap : 256;
    while (cap <= pos)
        cap *= 2;
    s->hash = realloc(s->hash, cap * sizeof *s->hash);
    s->epoch = realloc(s->epoch, cap * sizeof *s->epoch);
    s->pend = realloc(s->pend, cap * sizeof *s->pend);
    if (!s->hash || !s->epoch || !s->pend) abort();
    memset(s->hash + s->cap, 0, (cap - s->cap) * sizeof *s->hash);
    memset(s->epoch + s->cap, 0, (cap - s->cap) * sizeof *s->epoch);
    memset(s->pend + s->cap, 0, (cap - s->cap) * sizeof *s->pend);
    s->cap = cap;
}

static int sh_holds(const shadow *s, uint64_t pos, uint64_t hash) {
    return pos <= s->base || (pos < s->cap && s->hash[pos] == hash);
}

/* Held and covered by an fsync: what a power loss cannot take. */
static int sh_durable(const shadow *s, uint64_t pos, uint64_t hash) {
    return pos <= s->base || (pos < s->cap && s->hash[pos] == hash && !s->pend[pos]);
}

static uint64_t sh_at(const shadow *s, uint64_t pos) {
    return pos < s->cap ? s->hash[pos] : 0;
}

/* The positions applied with a tag <= upto are durable now (an fsync that
 * covers them completed). */
static void sh_synced(snode *n, uint64_t upto) {
    size_t k = 0;
    for (size_t i = 0; i < n->npend; i++) {
        spend *e = &n->pend[i];
        if (e->tag > upto) {
            n->pend[k++] = *e;
            continue;
        }
        shadow *s = &n->sh[e->p];
        if (e->pos < s->cap && s->hash[e->pos] == e->hash) s->pend[e->pos] = 0;
    }
    n->npend = k;
}

static void n_applied(void *ctx, unsigned p, uint64_t pos, uint64_t epoch, uint64_t hash) {
    snode *n = ctx;
    sim *w = n->w;
    shadow *s = &n->sh[p];
    hash |= 1; /* 0 marks "not held" */
    if (w->o.verbose > 1)
        trace(w, "%s applied %u/%llu (tag %llu)", n->id, p, (unsigned long long)pos,
              (unsigned long long)n->apply_tag);
    sh_grow(s, pos + 1);
    if (s->hash[pos] && s->hash[pos] != hash)
        violation(w,
                  "R5: %s applied position %llu of partition %u twice with different "
                  "contents (epochs %llu, %llu)",
                  n->id, (unsigned long long)pos, p, (unsigned long long)s->epoch[pos],
                  (unsigned long long)epoch);
    if (pos > 0 && pos - 1 < s->cap && s->hash[pos - 1] && s->epoch[pos - 1] > epoch)
        violation(w, "R5: leader epoch goes down along %s's log of partition %u at %llu", n->id, p,
                  (unsigned long long)pos);
    s->hash[pos] = hash;
    s->epoch[pos] = epoch;
    s->pend[pos] = 1;
    if (n->npend == n->cappend) {
        n->cappend = n->cappend ? n->cappend * 2 : 64;
        n->pend = realloc(n->pend, n->cappend * sizeof *n->pend);
        if (!n->pend) abort();
    }
    n->pend[n->npend++] = (spend){p, pos, hash, n->apply_tag};
}

static void n_forget(void *ctx, unsigned p, uint64_t pos) {
    snode *n = ctx;
    shadow *s = &n->sh[p];
    for (uint64_t i = pos + 1; i < s->cap; i++) {
        s->hash[i] = s->epoch[i] = 0;
        s->pend[i] = 0;
    }
    if (s->base > pos) s->base = pos;
}

static void n_base(void *ctx, unsigned p, uint64_t pos) {
    snode *n = ctx;
    n_forget(ctx, p, 0);
    n->sh[p].base = pos;
}

/* ---- Power loss: the WAL's synced prefix ------------------------------------------------
 *
 * The stores run with --fsync no: store_sync hands the turn to the OS and
 * the simulator models the fsync itself, as a window after it (the turn's
 * second half waits for its end). The newest RocksDB *.log and its size
 * are recorded whenever an fsync completes (a window's end, or an fsync
 * the engines make themselves through store_meta_put: store_set_fsync_hook).
 * A power loss keeps exactly that synced prefix plus some prefix of the
 * rest: the newest log is cut at a point between the synced size and its
 * end. RocksDB's point-in-time WAL recovery (the default) replays what
 * survives and drops a torn last record. Older logs are taken as synced
 * (RocksDB syncs a closed WAL before the flush that retires it), and only
 * the newest is cut, so no SST ever holds data past the cut. */

static uint64_t log_number(const char *name) {
    size_t n = strlen(name);
    if (n < 5 || strcmp(name + n - 4, ".log") != 0) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i + 4 < n; i++) {
        if (name[i] < '0' || name[i] > '9') return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    return v;
}

/* The newest WAL file of dir and its size; name "" when there is none. */
static void wal_newest(const char *dir, char *name, size_t cap, uint64_t *size) {
    name[0] = 0;
    *size = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    uint64_t best = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t v = log_number(de->d_name);
        if (v > best) {
            best = v;
            snprintf(name, cap, "%s", de->d_name);
        }
    }
    closedir(d);
    if (!name[0]) return;
    char path[400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &sb) == 0) *size = (uint64_t)sb.st_size;
}

/* store_set_fsync_hook: everything written so far is durable. */
static void n_fsynced(void *ctx) {
    snode *n = ctx;
    wal_newest(n->dir, n->wal, sizeof n->wal, &n->wal_synced);
    sh_synced(n, UINT64_MAX);
}

/* The power cut, after store_free wrote out what the process had: the
 * newest log keeps its synced prefix and a random part of the rest (all of
 * it, as kill -9 leaves it; none of it; or a uniform point; lossy: not
 * all of it). */
static void wal_cut(sim *w, snode *n, int lossy) {
    char name[64];
    uint64_t size;
    wal_newest(n->dir, name, sizeof name, &size);
    if (!name[0]) return;
    uint64_t lo = strcmp(name, n->wal) == 0 ? n->wal_synced : 0;
    if (lo >= size) return;
    unsigned how = lossy ? 1 + (unsigned)(rnd(w) % 2) : (unsigned)(rnd(w) % 3);
    uint64_t cut = how == 0 ? size : how == 1 ? lo : rnd_in(w, lo, size);
    if (cut == size) return;
    char path[400];
    snprintf(path, sizeof path, "%s/%s", n->dir, name);
    if (truncate(path, (off_t)cut)) {
        violation(w, "%s: truncate %s: cannot cut the WAL", n->id, path);
        return;
    }
    w->r->power_cuts++;
    w->r->bytes_cut += size - cut;
    trace(w, "%s power loss: %s cut at %llu of %llu (synced %llu)", n->id, name,
          (unsigned long long)cut, (unsigned long long)size, (unsigned long long)lo);
}

/* The batches' writes (key = val), by (p, batch hash): after a power loss,
 * whether the data kept a position applied since the last fsync. */
static size_t reg_bucket(unsigned p, uint64_t hash) {
    return (size_t)((hash ^ (p * 0x9e3779b97f4a7c15ull)) % REG_BUCKETS);
}

static void reg_add(sim *w, unsigned p, uint64_t hash, const char *key, const char *val) {
    if (w->nreg == w->capreg) {
        w->capreg = w->capreg ? w->capreg * 2 : 4096;
        w->reg = realloc(w->reg, w->capreg * sizeof *w->reg);
        if (!w->reg) abort();
    }
    size_t b = reg_bucket(p, hash);
    wreg *e = &w->reg[w->nreg];
    e->p = p, e->hash = hash, e->next = w->rbuck[b];
    snprintf(e->key, sizeof e->key, "%s", key);
    snprintf(e->val, sizeof e->val, "%s", val);
    w->rbuck[b] = w->nreg++;
}

/* 1 if n's store holds every write of batch (p, hash). */
static int batch_in_store(sim *w, snode *n, unsigned p, uint64_t hash) {
    int held = 1;
    for (size_t i = w->rbuck[reg_bucket(p, hash)]; i != SIZE_MAX && held; i = w->reg[i].next) {
        wreg *e = &w->reg[i];
        if (e->p != p || e->hash != hash) continue;
        store_value v;
        int rc =
            store_get(n->st, keel_key_slot(e->key, strlen(e->key)), e->key, strlen(e->key), 0, &v);
        held = rc == 0 && v.len == strlen(e->val) && !memcmp(v.data, e->val, v.len);
        if (rc == 0) store_value_release(&v);
    }
    return held;
}

/* After a restart, before rep_restore: the positions applied after the last
 * fsync before the crash are held only if the cut kept their data. */
static void sh_after_cut(sim *w, snode *n) {
    for (size_t i = 0; i < n->npend; i++) {
        spend *e = &n->pend[i];
        shadow *s = &n->sh[e->p];
        if (e->pos >= s->cap || s->hash[e->pos] != e->hash) continue;
        s->pend[e->pos] = 0;
        if (!batch_in_store(w, n, e->p, e->hash)) {
            s->hash[e->pos] = s->epoch[e->pos] = 0;
            w->r->positions_lost++;
        }
    }
    n->npend = 0;
}

/* ---- The node's environment ---------------------------------------------------------- */

static uint64_t n_now_us(void *ctx) {
    snode *n = ctx;
    return (uint64_t)((double)n->w->now * n->rate) + (uint64_t)n->clock_off;
}

static int node_by_id(sim *w, const char *id) {
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->nodes[i].id, id) == 0) return i;
    return -1;
}

static void ev_msg(sim *w, ev *e);

static int n_send(void *ctx, const char *peer, int argc, const char **argv, const size_t *len) {
    snode *n = ctx;
    sim *w = n->w;
    int j = node_by_id(w, peer);
    if (j < 0) return -1;
    ev *e = ev_new(w, K_MSG, 0, j, ev_msg);
    e->a = n->i;
    e->u = w->conn_gen[n->i][j];
    e->argc = argc;
    e->argv = calloc((size_t)argc, sizeof *e->argv);
    e->len = calloc((size_t)argc, sizeof *e->len);
    if (!e->argv || !e->len) abort();
    for (int i = 0; i < argc; i++) {
        e->argv[i] = malloc(len[i] + 1);
        if (!e->argv[i]) abort();
        memcpy(e->argv[i], argv[i], len[i]);
        e->argv[i][len[i]] = 0;
        e->len[i] = len[i];
    }
    e->u2 = (uint64_t)j; /* the destination, for the flush */
    send_from(n, e);
    return 0;
}

static void ev_isr(sim *w, ev *e);

static void n_report(void *ctx, int argc, const char **argv, const size_t *len) {
    snode *n = ctx;
    sim *w = n->w;
    if (argc != 6) return;
    ev *e = ev_new(w, K_ISR, 0, -1, ev_isr);
    e->a = n->i;
    e->u = strtoull(argv[1], NULL, 10);  /* p */
    e->u2 = strtoull(argv[2], NULL, 10); /* partition epoch */
    e->u3 = strtoull(argv[3], NULL, 10); /* leader epoch */
    snprintf(e->s1, sizeof e->s1, "%.*s", (int)len[4], argv[4]);
    snprintf(e->s2, sizeof e->s2, "%.*s", (int)len[5], argv[5]);
    e->u4 = (uint64_t)-1; /* to the coordinator */
    send_from(n, e);
}

static void n_committed(void *ctx, unsigned p, uint64_t pos) {
    (void)ctx, (void)p, (void)pos; /* the turn end releases what is committed */
}

/* ---- Node life --------------------------------------------------------------------- */

static void ev_tick(sim *w, ev *e);
static void ev_hbt(sim *w, ev *e);
static void ev_restart(sim *w, ev *e);

/* A node timer: ms of the node's own clock. */
static void node_timer(sim *w, snode *n, int kind, ev_fn fn, uint64_t ms) {
    ev *e = ev_new(w, kind, w->now + (uint64_t)(ms * 1000.0 / n->rate), n->i, fn);
    schedule(w, e);
}

static int node_start(sim *w, snode *n) {
    store_opts so;
    store_opts_default(&so);
    so.fsync = STORE_FSYNC_NO; /* the fsync is the simulator's (the window, wal_cut) */
    so.cache_bytes = 1u << 20;
    so.write_buffer_bytes = 1u << 20;
    char err[256];
    if (store_open(n->dir, &so, &n->st, err, sizeof err)) {
        snprintf(w->r->what, sizeof w->r->what, "store_open %s: %s", n->dir, err);
        return -1;
    }
    /* What the recovery kept is durable now (RocksDB flushes it at open). */
    sh_after_cut(w, n);
    wal_newest(n->dir, n->wal, sizeof n->wal, &n->wal_synced);
    store_set_fsync_hook(n->st, n_fsynced, n);
    n->win_open = n->win_more = n->crash_arm = 0;
    n->sync_until = 0;
    rep_env env = {.ctx = n,
                   .st = n->st,
                   .self_id = n->id,
                   .partitions = P,
                   .now_us = n_now_us,
                   .send = n_send,
                   .report = n_report,
                   .committed = n_committed,
                   .applied = n_applied,
                   .forget = n_forget,
                   .base = n_base};
    n->rp = rep_new(&env, w->o.node_mutations);
    if (!n->rp) {
        snprintf(w->r->what, sizeof w->r->what, "out of memory");
        return -1;
    }
    if (rep_restore(n->rp)) {
        violation(w, "%s: rep_restore failed", n->id);
        return 0;
    }
    n->up = 1;
    memset(&n->view, 0, sizeof n->view);
    memset(n->seen_epoch, 0, sizeof n->seen_epoch);
    memset(n->served_epoch, 0, sizeof n->served_epoch);
    memset(n->refuse_le, 0, sizeof n->refuse_le);
    memset(n->resign_ok_le, 0, sizeof n->resign_ok_le);
    memset(n->rs, 0, sizeof n->rs);
    node_timer(w, n, K_TICK, ev_tick, REP_TICK_MS);
    node_timer(w, n, K_HBT, ev_hbt, 1);
    return 0;
}

static void conn_break(sim *w, int i, int j) {
    w->conn_gen[i][j]++;
    w->conn_gen[j][i]++;
    for (int k = 0; k < 2; k++) {
        int at = k ? j : i, other = k ? i : j;
        if (!w->nodes[at].up) continue;
        ev *e = ev_new(w, K_PEERDOWN, w->now + rnd_in(w, 100, 2000), at, NULL);
        e->a = other;
        schedule(w, e);
    }
}

/* power: 1 the machine loses power (wal_cut), 2 the same with a cut that
 * loses some of the unsynced tail; 0 a clean stop. */
/* Adds n's engine counters to the result (before they go with the engines). */
static void collect_stats(sim *w, snode *n) {
    rep_stats s;
    rep_get_stats(n->rp, &s);
    w->r->copies += (unsigned)s.copies_received;
    w->r->truncations += (unsigned)s.truncations;
    w->r->olds_used += s.olds_used;
    w->r->olds_read += s.olds_read;
    w->r->olds_mismatched += s.olds_mismatched;
    if (s.olds_mismatched)
        violation(w, "R6: %s took %llu old state(s) with batches that differed from its data",
                  n->id, (unsigned long long)s.olds_mismatched);
}

static void node_crash(sim *w, snode *n, const char *why, int power) {
    if (!n->up) return;
    trace(w, "%s CRASH (%s)", n->id, why);
    for (size_t i = 0; i < n->nout; i++)
        ev_free(n->out[i]); /* never left */
    n->nout = 0;
    n->npw = 0;
    collect_stats(w, n);
    if (!power && rep_stop(n->rp)) /* a clean stop records exact ends (rep_uv.c) */
        violation(w, "%s: rep_stop failed", n->id);
    rep_free(n->rp);
    n->rp = NULL;
    store_free(n->st);
    n->st = NULL;
    if (power) wal_cut(w, n, power == 2);
    n->up = 0;
    n->inc++;
    n->paused_until = n->cut_until = 0;
    for (int j = 0; j < w->n; j++)
        if (j != n->i) conn_break(w, n->i, j);
    w->r->crashes++;
    w->down++;
    ev *e = ev_new(w, K_RESTART, w->now + rnd_in(w, 150000, 1500000), -1, ev_restart);
    e->a = n->i;
    schedule(w, e);
}

static void ev_restart(sim *w, ev *e) {
    snode *n = &w->nodes[e->a];
    if (n->up) return;
    trace(w, "%s RESTART (incarnation %d)", n->id, n->inc);
    w->down--;
    if (node_start(w, n)) violation(w, "restart failed: %s", w->r->what);
}

static void reply_client(sim *w, snode *n, int client, uint64_t gen, int code, const char *val,
                         int moved, const pendw *pw);

static void check_ack(sim *w, snode *n, const pendw *pw);
static void ev_syncdone(sim *w, ev *e);
static void ev_wcrash(sim *w, ev *e);

/* The replies of committed turns (R4 checked as each leaves). */
static void release_replies(sim *w, snode *n) {
    size_t k = 0;
    for (size_t i = 0; i < n->npw; i++) {
        pendw *pw = &n->pw[i];
        int leading = rep_role(n->rp, pw->p) == REP_LEADER && rep_epoch(n->rp, pw->p) == pw->epoch;
        if (leading && pw->pos && pw->pos <= rep_committed(n->rp, pw->p)) {
            check_ack(w, n, pw);
            reply_client(w, n, pw->client, pw->gen, 0, NULL, -1, pw);
            continue;
        }
        if (leading) n->pw[k++] = *pw; /* else: never acknowledged; the client times out */
    }
    n->npw = k;
}

/* The turn's second half, once its fsync completed: replies of committed
 * turns, then the other messages (ACK, SUB, ISR proposals, heartbeats,
 * RESIGN replies) queued before the fsync began (nsend of them; later ones,
 * queued during an asynchronous fsync - a mutation - wait for the next). */
static void turn_finish(sim *w, snode *n, size_t nsend) {
    release_replies(w, n);
    for (size_t i = 0; i < nsend; i++) {
        ev *e = n->out[i];
        if (e->kind == K_MSG)
            net_send(w, n->i, (int)e->u2, e);
        else if (e->kind == K_ISR || e->kind == K_HB || e->kind == K_RESIGNR) {
            if (n->cut_until > w->now) {
                ev_free(e);
                continue;
            }
            net_send(w, n->i, MAXN, e);
        } else
            net_send(w, n->i, -1, e);
    }
    memmove(n->out, n->out + nsend, (n->nout - nsend) * sizeof *n->out);
    n->nout -= nsend;
}

/* A message that may leave before the turn's fsync: the leader's data
 * (rep_msg_early); with REPSIM_MUT_EARLY_ACK also the follower's ACK. */
static int leaves_early(sim *w, const ev *e) {
    if (e->kind != K_MSG) return 0;
    if (rep_msg_early(e->argc, (const char **)e->argv, e->len)) return 1;
    return (w->o.coord_mutations & REPSIM_MUT_EARLY_ACK) && e->argc > 0 &&
           strcmp(e->argv[0], "KEEL.REP.ACK") == 0;
}

/* The end of a node's turn, in rep_uv.c's order (node_rep_presync, then
 * before_flush): the turn written (not yet durable), the batches sealed,
 * the leader's data messages out (early: not for a tick, which syncs
 * before it sends, as on_tick), the turn handed to the OS; then, if that
 * left anything unsynced, the fsync window: 0.1-2 ms, one in twenty 3-30 ms
 * longer, during which the node runs nothing (the loop thread blocks in
 * fsync), and only at its end (ev_syncdone) the replies and the other
 * messages. A failed turn write stops the node with its replies unsent. */
static void node_turn_end(sim *w, snode *n, int early) {
    if (!n->up) return;
    int arm = n->fail_next_sync;
    char err[64];
    if (arm) (void)failpoint_set("store.turn_write", "error", err, sizeof err);
    int rc = store_write_turn(n->st);
    if (arm) {
        (void)failpoint_set("store.turn_write", "off", err, sizeof err);
        n->fail_next_sync = 0;
    }
    if (rc) {
        w->r->disk_errors++;
        node_crash(w, n, "turn write failed", 1);
        return;
    }
    if ((rc = rep_turn_end(n->rp))) {
        node_crash(w, n, "seal failed", 1);
        return;
    }
    size_t kept = 0, sent = 0;
    for (size_t i = 0; i < n->nout; i++) {
        ev *e = n->out[i];
        if (early && leaves_early(w, e)) {
            net_send(w, n->i, (int)e->u2, e);
            sent++;
        } else {
            n->out[kept++] = e;
        }
    }
    n->nout = kept;
    for (size_t i = 0; i < n->npw; i++) { /* this turn's writes get the turn's position */
        pendw *pw = &n->pw[i];
        if (pw->pos || rep_role(n->rp, pw->p) != REP_LEADER || rep_epoch(n->rp, pw->p) != pw->epoch)
            continue;
        pw->pos = rep_end(n->rp, pw->p);
        pw->hash = sh_at(&n->sh[pw->p], pw->pos);
        sclient *c = &w->clients[pw->client];
        if (pw->hash && c->gen == pw->gen) reg_add(w, pw->p, pw->hash, c->key, c->val);
    }
    if ((rc = store_sync(n->st, NULL))) { /* --fsync no: to the OS, the fsync is the window */
        w->r->disk_errors++;
        node_crash(w, n, "turn sync failed", 1);
        return;
    }
    if (w->o.coord_mutations & REPSIM_MUT_REPLY_BEFORE_SYNC) release_replies(w, n);
    if (n->win_open) { /* REPSIM_MUT_REPLY_BEFORE_SYNC only: a later fsync covers it */
        n->win_more = 1;
        return;
    }
    char name[64];
    uint64_t size;
    wal_newest(n->dir, name, sizeof name, &size);
    if (!n->npend && strcmp(name, n->wal) == 0 && size <= n->wal_synced) {
        turn_finish(w, n, n->nout); /* nothing to fsync */
        return;
    }
    uint64_t d = rnd_in(w, 100, 2000);
    if (chance(w, 50)) d += rnd_in(w, 3000, 30000);
    n->win_open = 1;
    n->win_tag = n->apply_tag++;
    n->win_size = size;
    n->win_nout = n->nout;
    snprintf(n->win_wal, sizeof n->win_wal, "%s", name);
    n->sync_until = w->now + d;
    w->r->sync_windows++;
    if (w->o.verbose > 1)
        trace(w, "%s fsync window %llu until %.6f (%zu positions unsynced, %zu messages sent)",
              n->id, (unsigned long long)n->win_tag, n->sync_until / 1e6, n->npend, sent);
    ev *e = ev_new(w, K_SYNCDONE, n->sync_until, n->i, ev_syncdone);
    schedule(w, e);
    /* The armed fault: power goes inside this window, best one whose batches
     * already left (a follower may apply them before the leader's tail is
     * synced), else any window once armed for 300 ms. */
    if (n->crash_arm && (sent || w->now - n->arm_at > 300000)) {
        n->crash_arm = 0;
        ev *c = ev_new(w, K_WCRASH, w->now + rnd_in(w, d / 2, d - 1), -1, ev_wcrash);
        c->a = n->i;
        c->b = n->inc;
        c->u = n->win_tag;
        schedule(w, c);
    }
}

/* A node's fsync window ends: its turn is durable; the second half runs. */
static void ev_syncdone(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    if (!n->win_open) return;
    n->win_open = 0;
    n->sync_until = 0;
    if (strcmp(n->wal, n->win_wal) != 0 || n->win_size > n->wal_synced) {
        snprintf(n->wal, sizeof n->wal, "%s", n->win_wal);
        n->wal_synced = n->win_size;
    }
    sh_synced(n, n->win_tag);
    if (w->o.verbose > 1)
        trace(w, "%s fsync window %llu done, %zu unsynced", n->id, (unsigned long long)n->win_tag,
              n->npend);
    turn_finish(w, n, n->win_nout);
    if (n->win_more) { /* written during the window: its own fsync now */
        n->win_more = 0;
        node_turn_end(w, n, 0);
    }
}

/* Power loss inside the window it was armed for (if the node is still in
 * it, and no other node is down). */
static void ev_wcrash(sim *w, ev *e) {
    snode *n = &w->nodes[e->a];
    if (!n->up || n->inc != e->b || !n->win_open || n->win_tag != e->u) return;
    if (w->down || w->ho_node == n->i) return;
    w->r->window_crashes++;
    node_crash(w, n, "power loss inside the fsync window", 2);
}

/* ---- Node events --------------------------------------------------------------------- */

static void ev_msg(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    if (e->u != w->conn_gen[e->a][n->i]) return; /* the connection broke meanwhile */
    int rc = rep_message(n->rp, w->nodes[e->a].id, e->argc, (const char **)e->argv, e->len);
    if (rc && rc != KEEL_EPROTO) node_crash(w, n, "store error in a message", 1);
}

static void resign_tick(sim *w, snode *n);

static void ev_tick(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    if (rep_tick(n->rp)) node_crash(w, n, "store error in a tick", 1);
    if (n->up) resign_tick(w, n);
    if (n->up) node_timer(w, n, K_TICK, ev_tick, REP_TICK_MS);
}

static void ev_hb(sim *w, ev *e);

static void ev_hbt(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    ev *h = ev_new(w, K_HB, 0, -1, ev_hb);
    h->a = n->i;
    h->b = n->inc;
    h->u = n_now_us(n);
    send_from(n, h);
    node_timer(w, n, K_HBT, ev_hbt, HB_MS);
}

static const char *nid(sim *w, int i) {
    return i >= 0 && i < w->n ? w->nodes[i].id : "";
}

static int popcount(unsigned v) {
    return __builtin_popcount(v);
}

/* R2: every acknowledged write of p is in n's store. */
static void check_new_leader(sim *w, snode *n, unsigned p) {
    for (size_t i = 0; i < w->nacks; i++) {
        acked *a = &w->acks[i];
        if (a->p != p) continue;
        store_value v;
        unsigned slot = keel_key_slot(a->key, strlen(a->key));
        int rc = store_get(n->st, slot, a->key, strlen(a->key), 0, &v);
        int same = rc == 0 && v.len == strlen(a->val) && !memcmp(v.data, a->val, v.len);
        if (rc == 0) store_value_release(&v);
        if (!same) {
            violation(w, "R2: new leader %s of partition %u (epoch %llu) lacks acknowledged %s",
                      n->id, p, (unsigned long long)rep_epoch(n->rp, p), a->key);
            return;
        }
    }
}

/* The binding's hand-over (rep_uv.c node_rep_route): once a leader answered
 * RESIGN OK it sends p's clients to the RESIGN's target (-MOVED), whose
 * engine answers REP_EHANDOFF (-TRYAGAIN) until its map names it. *to: the
 * target. */
static int n_handed_over(snode *n, unsigned p, int *to) {
    if (!n->resign_ok_le[p] || n->resign_ok_le[p] != rep_epoch(n->rp, p) ||
        rep_role(n->rp, p) != REP_LEADER)
        return 0;
    *to = n->resign_to[p];
    return 1;
}

/* The binding's write check: the engine's, -TRYAGAIN while a RESIGN holds
 * the partition (C5), -MOVED to the target once it answered OK. */
static int n_write_check(snode *n, unsigned p, int *to) {
    if (!(n->w->o.coord_mutations & REPSIM_MUT_WRITE_AFTER_RESIGN) && n_handed_over(n, p, to))
        return REP_ENOTLEADER;
    int rc = rep_write_check(n->rp, p);
    if (rc == REP_OK && n->refuse_le[p] && n->refuse_le[p] == rep_epoch(n->rp, p))
        rc = REP_ENOLEASE;
    return rc;
}

/* The binding's read check: the engine's (a leader under its lease), and
 * -MOVED to the target once it answered RESIGN OK (rep_uv.c resigned_le;
 * without it, seed 2000 fails R3: the old leader, cut off from the
 * coordinator after its OK, still served reads under its lease while the
 * target took writes). */
static int n_read_check(snode *n, unsigned p, int *to) {
    if (!(n->w->o.coord_mutations & REPSIM_MUT_READ_AFTER_RESIGN) && n_handed_over(n, p, to))
        return REP_ENOTLEADER;
    return rep_read_check(n->rp, p);
}

static void node_apply_map(sim *w, snode *n, const cmap *m) {
    for (unsigned p = 0; p < P; p++) {
        const cpart *c = &m->part[p];
        if (c->leader == n->i && c->leader_inc != n->inc) continue; /* given to my previous life */
        rep_config rc = {.leader_epoch = c->lepoch,
                         .part_epoch = c->pepoch,
                         .leader = nid(w, c->leader),
                         .min_insync = MIN_INSYNC};
        for (int k = 0; k < c->nrep; k++)
            rc.replicas[rc.nreplicas++] = nid(w, c->rep[k]);
        for (int k = 0; k < w->n; k++)
            if (c->isr & (1u << k)) rc.isr[rc.nisr++] = nid(w, k);
        int was = rep_role(n->rp, p);
        uint64_t old = rep_epoch(n->rp, p);
        if (rep_configure(n->rp, p, &rc)) {
            node_crash(w, n, "store error in configure", 1);
            return;
        }
        uint64_t now_e = rep_epoch(n->rp, p);
        if (now_e < n->seen_epoch[p])
            violation(w, "R5: %s's leader epoch of partition %u went down %llu -> %llu", n->id, p,
                      (unsigned long long)n->seen_epoch[p], (unsigned long long)now_e);
        n->seen_epoch[p] = now_e;
        if (rep_role(n->rp, p) == REP_LEADER && (was != REP_LEADER || old != now_e))
            trace(w, "%s leads partition %u in epoch %llu", n->id, p, (unsigned long long)now_e);
        if (c->pepoch >= n->view.part[p].pepoch) n->view.part[p] = *c;
    }
    /* As rep_uv.c does after a map: the records of every partition, one fsync. */
    if (rep_configure_sync(n->rp)) node_crash(w, n, "store error in configure", 1);
}

/* A map push, or a heartbeat reply (e->u2: partitions whose lease it renews;
 * e->u: when the heartbeat left, on the node's clock). */
static void ev_map(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    if (n->cut_until > w->now) return;
    node_apply_map(w, n, e->map);
    if (!n->up) return;
    for (unsigned p = 0; p < P; p++)
        if (e->u2 & (1u << p)) rep_lease(n->rp, p, e->map->part[p].lepoch, e->u);
}

static void reply_client(sim *w, snode *n, int client, uint64_t gen, int code, const char *val,
                         int moved, const pendw *pw);

static void ev_creq(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    unsigned p = (unsigned)e->u2;
    int to = n->view.part[p].leader;
    int code = e->b ? n_read_check(n, p, &to) : n_write_check(n, p, &to);
    if (code != REP_OK) {
        if (code == REP_ENOREPLICAS) w->r->noreplicas++;
        if (code == REP_EHANDOFF) w->r->handoff_tryagain++;
        if (code == REP_ENOTLEADER && to != n->view.part[p].leader) w->r->handoff_moved++;
        reply_client(w, n, e->a, e->u, code, NULL, to, NULL);
        return;
    }
    unsigned slot = keel_key_slot(e->s1, strlen(e->s1));
    if (e->b) {
        store_value v;
        int rc = store_get(n->st, slot, e->s1, strlen(e->s1), 0, &v);
        char val[48] = "";
        if (rc == 0) {
            snprintf(val, sizeof val, "%.*s", (int)v.len, v.data);
            store_value_release(&v);
        }
        reply_client(w, n, e->a, e->u, REP_OK, rc == 0 ? val : NULL, -1, NULL);
        return;
    }
    store_txn *t = store_txn_begin(n->st);
    if (store_txn_put(t, slot, e->s1, strlen(e->s1), STORE_T_STRING, 0, e->s2, strlen(e->s2)) ||
        store_txn_commit(t)) {
        violation(w, "%s: a client write failed in the store", n->id);
        return;
    }
    if (n->npw == n->cappw) {
        n->cappw = n->cappw ? n->cappw * 2 : 32;
        n->pw = realloc(n->pw, n->cappw * sizeof *n->pw);
        if (!n->pw) abort();
    }
    n->pw[n->npw++] = (pendw){.client = e->a, .gen = e->u, .p = p, .epoch = rep_epoch(n->rp, p)};
}

/* ---- The coordinator model ------------------------------------------------------------ */

static void push_map(sim *w, int i, unsigned grants, uint64_t sent_us) {
    snode *n = &w->nodes[i];
    if (!n->up || n->cut_until > w->now) return;
    ev *e = ev_new(w, K_MAP, 0, i, ev_map);
    e->map = malloc(sizeof *e->map);
    if (!e->map) abort();
    *e->map = w->cm;
    e->u = sent_us;
    e->u2 = grants;
    net_send(w, MAXN, i, e);
}

static void push_all(sim *w) {
    for (int i = 0; i < w->n; i++)
        push_map(w, i, 0, 0);
    w->last_push = w->now;
}

static int alive(sim *w, int i) {
    return w->last_hb[i] && w->now - w->last_hb[i] < SUSPECT_MS * 1000ull &&
           w->hb_inc[i] == w->cm.inc[i];
}

static void ev_hb(sim *w, ev *e) {
    int i = e->a;
    snode *n = &w->nodes[i];
    if (n->cut_until > w->now) return;
    int changed = 0;
    if (e->b != w->cm.inc[i]) {          /* a new incarnation: out of every ISR it was in */
        if (e->b < w->cm.inc[i]) return; /* a heartbeat of an older life, late */
        w->cm.inc[i] = e->b;
        for (unsigned p = 0; p < P; p++) {
            cpart *c = &w->cm.part[p];
            if (c->leader == i) {
                c->failing = 1; /* promoted again (epoch + 1), maybe itself if sole ISR member */
            } else if ((c->isr & (1u << i)) && popcount(c->isr) > 1) {
                c->isr &= ~(1u << i);
                c->pepoch++;
                w->r->isr_shrinks++;
            }
        }
        changed = 1;
        trace(w, "coordinator: %s registers incarnation %d", n->id, e->b);
    }
    w->last_hb[i] = w->now;
    w->hb_inc[i] = e->b;
    unsigned grants = 0;
    for (unsigned p = 0; p < P; p++) {
        cpart *c = &w->cm.part[p];
        if (c->leader == i && !c->failing) {
            grants |= 1u << p;
            c->grant_at = w->now;
        }
    }
    if (changed) push_all(w);
    push_map(w, i, grants, e->u);
}

static void ev_isr(sim *w, ev *e) {
    int i = e->a;
    if (w->nodes[i].cut_until > w->now) return;
    unsigned p = (unsigned)e->u;
    if (p >= P) return;
    cpart *c = &w->cm.part[p];
    int id = node_by_id(w, e->s2);
    if (c->pepoch != e->u2 || c->lepoch != e->u3 || c->leader != i || id < 0 || id == i) return;
    int member = 0;
    for (int k = 0; k < c->nrep; k++)
        member |= c->rep[k] == id;
    if (!member) return;
    if (!strcmp(e->s1, "shrink") && (c->isr & (1u << id))) {
        c->isr &= ~(1u << id);
        w->r->isr_shrinks++;
    } else if (!strcmp(e->s1, "expand") && !(c->isr & (1u << id))) {
        c->isr |= 1u << id;
        w->r->isr_expands++;
    } else {
        return;
    }
    c->pepoch++; /* the compare-and-set */
    trace(w, "coordinator: partition %u ISR %s %s (epoch %llu)", p, e->s1, e->s2,
          (unsigned long long)c->pepoch);
    push_all(w);
}

static void failover(sim *w, unsigned p) {
    cpart *c = &w->cm.part[p];
    if (w->now < c->grant_at + LEASE_WAIT_US) return; /* its lease may still run */
    int pick = -1;
    if (w->o.coord_mutations & REPSIM_MUT_PROMOTE_NON_ISR)
        for (int k = 0; k < c->nrep && pick < 0; k++) {
            int j = c->rep[k];
            if (j != c->leader && !(c->isr & (1u << j)) && alive(w, j)) pick = j;
        }
    for (int k = 0; k < c->nrep && pick < 0; k++) { /* an ISR member other than the old leader */
        int j = c->rep[k];
        if (j != c->leader && (c->isr & (1u << j)) && alive(w, j)) pick = j;
    }
    if (pick < 0 && (c->isr & (1u << c->leader)) && alive(w, c->leader))
        pick = c->leader; /* the old leader, back with a new life, the ISR's only member */
    if (pick < 0) return; /* offline until an ISR member is back */
    if (pick != c->leader && popcount(c->isr) > 1) c->isr &= ~(1u << c->leader);
    c->isr |= 1u << pick;
    trace(w, "coordinator: partition %u fails over %s -> %s, epoch %llu", p, nid(w, c->leader),
          nid(w, pick), (unsigned long long)c->lepoch + 1);
    c->leader = pick;
    c->leader_inc = w->cm.inc[pick];
    c->lepoch++;
    c->pepoch++;
    c->failing = 0;
    c->grant_at = 0;
    w->r->failovers++;
    push_all(w);
}

/* ---- Replica moves and leadership transfer (C5) ------------------------------------------
 *
 * The coordinator model's executor drives each move by the real step table
 * (coord/coord_repstep.c, rmove_next) over its map, as coord_repmove.c does
 * over the map store: add a replica (CAS of the list; the leader starts
 * streaming to it, the ISR grows through the leader's proposal, ev_isr),
 * transfer the leadership (KEEL.REP.RESIGN to the leader, then leader =
 * target, leader epoch + 1 once it answered OK), remove a replica (CAS).
 * The node side of RESIGN models the binding (rep_uv.c node_rep_resign):
 * the engines have no resign primitive of their own.
 *
 * Checked on every change a move step commits (the map's history, entry by
 * entry: the entry before and the entry after):
 *   M1  a removal never takes the leader, never leaves fewer than RF
 *       replicas, never leaves the ISR below min_insync when it takes an
 *       in-sync replica, and takes an in-sync replica only once the replica
 *       that replaces it (the move's add) is in the ISR;
 *   M2  a leadership transfer goes to a member of the ISR;
 * after every event:
 *   T1  a leader that answered RESIGN OK for (p, e), or whose leadership of p
 *       in e was transferred away, accepts no write of p in epoch e. */

static void resign_reply(sim *w, snode *n, unsigned p, uint64_t le, uint64_t token, int ok,
                         uint64_t end);
static void ev_resignr(sim *w, ev *e);

/* Node side: KEEL.REP.RESIGN p le target (e->u p, e->u2 le, e->a target, e->u3 the move). */
static void ev_resign(sim *w, ev *e) {
    snode *n = &w->nodes[e->node];
    unsigned p = (unsigned)e->u;
    if (n->cut_until > w->now || p >= P) return; /* lost on the cut link */
    if (rep_role(n->rp, p) != REP_LEADER || rep_epoch(n->rp, p) != e->u2 || n->rs[p].active) {
        resign_reply(w, n, p, e->u2, e->u3, 0, 0);
        return;
    }
    n->rs[p].active = 1;
    n->rs[p].target = e->a;
    n->rs[p].le = e->u2;
    n->rs[p].token = e->u3;
    n->rs[p].deadline_us = n_now_us(n) + RESIGN_MS * 1000ull;
    if (!(w->o.coord_mutations & REPSIM_MUT_WRITE_AFTER_RESIGN))
        n->refuse_le[p] = e->u2; /* no new write from now on */
    trace(w, "%s resigning partition %u (epoch %llu) to %s", n->id, p, (unsigned long long)e->u2,
          nid(w, e->a));
}

/* Each tick: a waiting RESIGN is done once its target acknowledged the end
 * and the end is committed, or fails at its deadline or when the node no
 * longer leads p in that epoch (then it serves again). */
static void resign_tick(sim *w, snode *n) {
    for (unsigned p = 0; p < P; p++) {
        if (!n->rs[p].active) continue;
        uint64_t le = n->rs[p].le, end = rep_end(n->rp, p);
        int leading = rep_role(n->rp, p) == REP_LEADER && rep_epoch(n->rp, p) == le;
        if (leading && rep_peer_acked(n->rp, p, nid(w, n->rs[p].target)) >= end &&
            rep_committed(n->rp, p) >= end) {
            n->resign_ok_le[p] = le;
            n->resign_to[p] = n->rs[p].target;
            (void)rep_resign_announce(n->rp, p); /* its followers stop sending clients back */
            resign_reply(w, n, p, le, n->rs[p].token, 1, end);
        } else if (!leading || n_now_us(n) >= n->rs[p].deadline_us) {
            if (n->refuse_le[p] == le) n->refuse_le[p] = 0;
            resign_reply(w, n, p, le, n->rs[p].token, 0, 0);
        } else {
            continue;
        }
        n->rs[p].active = 0;
    }
}

static void resign_reply(sim *w, snode *n, unsigned p, uint64_t le, uint64_t token, int ok,
                         uint64_t end) {
    ev *e = ev_new(w, K_RESIGNR, 0, -1, ev_resignr);
    e->a = n->i;
    e->b = ok;
    e->u = p, e->u2 = le, e->u3 = token, e->u4 = end;
    trace(w, "%s RESIGN of partition %u epoch %llu: %s", n->id, p, (unsigned long long)le,
          ok ? "OK" : "error");
    send_from(n, e);
}

/* The partition as the map store would hold it: the leader first. */
static void to_mp(sim *w, unsigned p, mapstore_partition *mp) {
    const cpart *c = &w->cm.part[p];
    memset(mp, 0, sizeof *mp);
    mp->id = p;
    snprintf(mp->owner, sizeof mp->owner, "%s", nid(w, c->leader));
    snprintf(mp->replicas[mp->nreplicas], sizeof mp->replicas[0], "%s", nid(w, c->leader));
    if (c->isr & (1u << c->leader)) mp->isr |= 1u << mp->nreplicas;
    mp->nreplicas++;
    for (int k = 0; k < c->nrep; k++) {
        int j = c->rep[k];
        if (j == c->leader) continue;
        if (c->isr & (1u << j)) mp->isr |= 1u << mp->nreplicas;
        snprintf(mp->replicas[mp->nreplicas++], sizeof mp->replicas[0], "%s", nid(w, j));
    }
    mp->leader_epoch = c->lepoch;
    mp->partition_epoch = mp->epoch = c->pepoch;
}

static int mv_up(void *arg, const char *id) {
    sim *w = arg;
    int j = node_by_id(w, id);
    return j >= 0 && alive(w, j);
}

static int listed(const cpart *c, int j) {
    for (int k = 0; k < c->nrep; k++)
        if (c->rep[k] == j) return 1;
    return 0;
}

/* A move step's new replica list (the CAS succeeded): M1, then commit. */
static void commit_list(sim *w, unsigned p, smove *m, char ids[][KEEL_ID_MAX + 1], unsigned nids) {
    cpart *c = &w->cm.part[p], before = *c;
    cpart after = before;
    after.nrep = 0;
    unsigned mask = 0;
    for (unsigned k = 0; k < nids && after.nrep < MAXN; k++) {
        int j = node_by_id(w, ids[k]);
        if (j < 0 || (mask & (1u << j))) continue;
        after.rep[after.nrep++] = j;
        mask |= 1u << j;
    }
    after.isr = before.isr & mask;
    after.pepoch++;
    int add = node_by_id(w, m->mv.add);
    for (int k = 0; k < before.nrep; k++) {
        int j = before.rep[k];
        if (listed(&after, j)) continue;
        if (j == before.leader)
            violation(w, "M1: move %llu removed the leader %s of partition %u",
                      (unsigned long long)m->mv.id, nid(w, j), p);
        else if (after.nrep < RF)
            violation(w, "M1: move %llu (%s) left partition %u with %d replicas (RF %d)",
                      (unsigned long long)m->mv.id, rmove_kind_name(m->mv.kind), p, after.nrep, RF);
        else if ((before.isr & (1u << j)) && popcount(after.isr) < MIN_INSYNC)
            violation(w, "M1: move %llu removed in-sync %s of partition %u, leaving an ISR of %d",
                      (unsigned long long)m->mv.id, nid(w, j), p, popcount(after.isr));
        else if ((before.isr & (1u << j)) && add >= 0 && add != j && listed(&after, add) &&
                 !(after.isr & (1u << add)))
            violation(w,
                      "M1: move %llu removed in-sync %s of partition %u before its replacement %s "
                      "is in the ISR",
                      (unsigned long long)m->mv.id, nid(w, j), p, nid(w, add));
    }
    *c = after;
    trace(w, "coordinator: move %llu partition %u replicas now %d (epoch %llu)",
          (unsigned long long)m->mv.id, p, c->nrep, (unsigned long long)c->pepoch);
    push_all(w);
}

/* A transfer commits: leader = target, leader epoch + 1 (the old leader
 * stays a replica, in the ISR). M2 first. */
static void commit_leader(sim *w, unsigned p, smove *m, int target) {
    cpart *c = &w->cm.part[p];
    if (target < 0 || !listed(c, target) || !(c->isr & (1u << target))) {
        violation(w,
                  "M2: move %llu transferred the leadership of partition %u to %s, not in the "
                  "ISR",
                  (unsigned long long)m->mv.id, p, nid(w, target));
        return;
    }
    if (target == c->leader) { /* a re-election: the move gives up after RESIGN OK */
        trace(w, "coordinator: partition %u re-elects %s, epoch %llu (move %llu)", p,
              nid(w, target), (unsigned long long)c->lepoch + 1, (unsigned long long)m->mv.id);
        c->leader_inc = w->cm.inc[target];
        c->lepoch++;
        c->pepoch++;
        c->failing = 0;
        w->r->reelections++;
        push_all(w);
        return;
    }
    w->xfer[p].from = c->leader;
    w->xfer[p].inc = c->leader_inc;
    w->xfer[p].le = c->lepoch;
    trace(w, "coordinator: partition %u leadership %s -> %s, epoch %llu (move %llu)", p,
          nid(w, c->leader), nid(w, target), (unsigned long long)c->lepoch + 1,
          (unsigned long long)m->mv.id);
    c->leader = target;
    c->leader_inc = w->cm.inc[target];
    c->lepoch++;
    c->pepoch++;
    c->failing = 0;
    c->grant_at = 0;
    w->r->transfers++;
    /* The old leader learns of it from its next heartbeat's reply, as real
     * nodes learn every map (the coordinator pushes none): the others now. */
    for (int i = 0; i < w->n; i++)
        if (i != w->xfer[p].from) push_map(w, i, 0, 0);
}

static void send_resign(sim *w, unsigned p, smove *m, const rmove_action *a) {
    int l = node_by_id(w, a->leader), t = node_by_id(w, a->target);
    if (l < 0 || t < 0) return;
    m->busy = 1;
    m->busy_until = w->now + (RESIGN_MS + 500) * 1000ull; /* a reply lost on a cut link */
    w->r->resigns++;
    if (!w->nodes[l].up || w->nodes[l].cut_until > w->now) return;
    ev *e = ev_new(w, K_RESIGN, 0, l, ev_resign);
    e->u = p, e->u2 = a->leader_epoch, e->u3 = m->mv.id;
    e->a = t;
    net_send(w, MAXN, l, e);
}

/* Coordinator side of the RESIGN reply (e->a from, e->b ok, e->u p, e->u2 le, e->u3 move). */
static void ev_resignr(sim *w, ev *e) {
    unsigned p = (unsigned)e->u;
    if (w->nodes[e->a].cut_until > w->now || p >= P) return;
    smove *m = &w->mv[p];
    if (!m->active || m->mv.id != e->u3) return;
    m->busy = 0;
    if (e->b) {
        m->mv.resigned_le = e->u2;
        snprintf(m->mv.resign_to, sizeof m->mv.resign_to, "%s",
                 m->mv.kind == RMOVE_PROMOTE || m->mv.lead_to[0] ? m->mv.lead_to : "");
    } else {
        w->r->resign_errors++;
        m->retry_at = w->now + RESIGN_RETRY_MS * 1000ull;
    }
}

/* One move, one step: what rmove_next says is due. */
static void move_step(sim *w, unsigned p, smove *m) {
    cpart *c = &w->cm.part[p];
    mapstore_partition mp;
    to_mp(w, p, &mp);
    if (rmove_replica_index(&mp, m->mv.add) >= 0) m->mv.added = 1;
    int64_t now_ms = (int64_t)(w->now / 1000);
    rmove_action a;
    if (chance(w, MOVE_ABORT_PM)) /* the coordinator gives up: as coord_repmove.c's abort */
        rmove_next(&m->mv, &mp, INT64_MAX / 2, 1, mv_up, w, &a);
    else
        rmove_next(&m->mv, &mp, now_ms, MOVE_TIMEOUT_MS, mv_up, w, &a);
    if ((w->o.coord_mutations & REPSIM_MUT_REMOVE_BEFORE_ISR) && a.act == RACT_WAIT &&
        a.step == RSTEP_CATCHING_UP && rmove_replica_index(&mp, m->mv.remove) > 0) {
        a.act = RACT_SET_REPLICAS; /* broken: the source goes before the new copy is in sync */
        a.nids = 0;
        for (unsigned k = 0; k < mp.nreplicas; k++)
            if (strcmp(mp.replicas[k], m->mv.remove) != 0)
                snprintf(a.ids[a.nids++], sizeof a.ids[0], "%s", mp.replicas[k]);
    }
    int add = node_by_id(w, m->mv.add);
    if ((w->o.coord_mutations & REPSIM_MUT_TRANSFER_NON_ISR) && a.act == RACT_WAIT &&
        a.step == RSTEP_CATCHING_UP && add >= 0 && alive(w, add)) {
        /* broken: the new copy leads while it still catches up (the old
         * leader resigned to an in-sync follower) */
        if (m->mv.resigned_le == c->lepoch) {
            commit_leader(w, p, m, add);
            return;
        }
        for (int k = 0; k < c->nrep; k++) {
            int j = c->rep[k];
            if (j != c->leader && (c->isr & (1u << j)) && alive(w, j)) {
                a.act = RACT_RESIGN;
                snprintf(a.leader, sizeof a.leader, "%s", nid(w, c->leader));
                snprintf(a.target, sizeof a.target, "%s", nid(w, j));
                send_resign(w, p, m, &a);
                return;
            }
        }
    }
    switch (a.act) {
    case RACT_WAIT:
        break;
    case RACT_SET_REPLICAS:
        if (a.expected_pe == c->pepoch) commit_list(w, p, m, a.ids, a.nids);
        break;
    case RACT_RESIGN:
        if (m->mv.resign_to[0] == 0 && m->mv.kind != RMOVE_PROMOTE && !m->mv.lead_to[0])
            snprintf(m->mv.lead_to, sizeof m->mv.lead_to, "%s", a.target); /* fix the pick */
        send_resign(w, p, m, &a);
        if (w->o.coord_mutations & REPSIM_MUT_COMMIT_BEFORE_RESIGN) { /* broken: no OK awaited */
            m->busy = 0;
            commit_leader(w, p, m, node_by_id(w, a.target));
        }
        break;
    case RACT_SET_LEADER: {
        if (a.leader_epoch != c->lepoch) break;
        int t = node_by_id(w, a.target);
        if (w->o.coord_mutations & REPSIM_MUT_TRANSFER_NON_ISR) /* broken: any replica */
            for (int k = 0; k < c->nrep; k++) {
                int j = c->rep[k];
                if (j != c->leader && !(c->isr & (1u << j)) && alive(w, j)) t = j;
            }
        commit_leader(w, p, m, t);
        break;
    }
    case RACT_DONE:
        m->active = 0;
        w->r->moves_done++;
        trace(w, "coordinator: move %llu of partition %u done", (unsigned long long)m->mv.id, p);
        break;
    case RACT_ABORT:
        if (a.nids && a.expected_pe == c->pepoch) commit_list(w, p, m, a.ids, a.nids);
        m->active = 0;
        w->r->moves_aborted++;
        trace(w, "coordinator: move %llu of partition %u aborted: %s", (unsigned long long)m->mv.id,
              p, a.why);
        break;
    }
}

/* A new random move on a partition with none: MOVE (a replica, perhaps the
 * leader, to a node not listed), ADD (replacing a replica that is down, or
 * one more copy), REMOVE (of a copy beyond RF), PROMOTE (an in-sync
 * follower). rmove_check must accept it, as the coordinator's command does. */
static void move_start(sim *w) {
    int running = 0;
    for (unsigned p = 0; p < P; p++)
        running += w->mv[p].active;
    if (running >= MOVES_MAX) return;
    unsigned p = (unsigned)(rnd(w) % P);
    if (w->mv[p].active) return;
    cpart *c = &w->cm.part[p];
    int spare[MAXN], nspare = 0;
    for (int j = 0; j < w->n; j++)
        if (!listed(c, j)) spare[nspare++] = j;
    smove m = {.active = 1};
    m.mv.partition = p;
    m.mv.rf = RF;
    m.mv.min_insync = MIN_INSYNC;
    m.mv.started_ms = (int64_t)(w->now / 1000);
    int pick = c->rep[rnd(w) % (uint64_t)c->nrep];
    unsigned kind = (unsigned)(rnd(w) % 4);
    if (kind == RMOVE_REMOVE && c->nrep <= RF) kind = RMOVE_ADD;
    if (kind == RMOVE_ADD && !nspare) kind = RMOVE_PROMOTE;
    if (kind == RMOVE_MOVE && !nspare) kind = RMOVE_PROMOTE;
    m.mv.kind = (rmove_kind)kind;
    switch (kind) {
    case RMOVE_MOVE:
        snprintf(m.mv.add, sizeof m.mv.add, "%s", nid(w, spare[rnd(w) % (uint64_t)nspare]));
        snprintf(m.mv.remove, sizeof m.mv.remove, "%s", nid(w, pick));
        if (pick == c->leader) snprintf(m.mv.lead_to, sizeof m.mv.lead_to, "%s", m.mv.add);
        break;
    case RMOVE_ADD:
        snprintf(m.mv.add, sizeof m.mv.add, "%s", nid(w, spare[rnd(w) % (uint64_t)nspare]));
        for (int k = 0; k < c->nrep; k++)
            if (!alive(w, c->rep[k]) && c->rep[k] != c->leader)
                snprintf(m.mv.remove, sizeof m.mv.remove, "%s", nid(w, c->rep[k]));
        if (!m.mv.remove[0] && c->nrep > RF) return;
        break;
    case RMOVE_REMOVE:
        snprintf(m.mv.remove, sizeof m.mv.remove, "%s", nid(w, pick));
        break;
    default:
        if (pick == c->leader || !(c->isr & (1u << pick))) return;
        snprintf(m.mv.lead_to, sizeof m.mv.lead_to, "%s", nid(w, pick));
    }
    mapstore_partition mp;
    to_mp(w, p, &mp);
    char err[160];
    if (rmove_check(&m.mv, &mp, err, sizeof err)) return;
    m.mv.id = ++w->next_move;
    w->mv[p] = m;
    w->r->moves++;
    trace(w, "coordinator: move %llu: %s partition %u add %s remove %s lead_to %s",
          (unsigned long long)m.mv.id, rmove_kind_name(m.mv.kind), p, m.mv.add, m.mv.remove,
          m.mv.lead_to);
}

/* SIGTERM (coord_repmove_handoff, modelled): the node asks the coordinator
 * to hand off what it leads; a PROMOTE to an in-sync follower that is up
 * for each led partition with no move under way (those it waits for too);
 * the node stops when they are all over, or at the deadline. */
static void handoff_start(sim *w, snode *n) {
    if (w->ho_node >= 0 || !n->up) return;
    w->ho_node = n->i;
    w->ho_inc = n->inc;
    w->ho_deadline = w->now + HANDOFF_MS * 1000ull;
    w->r->handoffs++;
    trace(w, "%s SIGTERM: hand-off", n->id);
    for (unsigned p = 0; p < P; p++) {
        cpart *c = &w->cm.part[p];
        if (c->leader != n->i) continue;
        if (w->mv[p].active) {
            w->mv[p].handoff = 1;
            continue;
        }
        int to = -1;
        for (int k = 0; k < c->nrep && to < 0; k++) {
            int j = c->rep[k];
            if (j != c->leader && (c->isr & (1u << j)) && alive(w, j)) to = j;
        }
        if (to < 0) continue;
        smove m = {.active = 1, .handoff = 1};
        m.mv.partition = p;
        m.mv.kind = RMOVE_PROMOTE;
        m.mv.rf = RF;
        m.mv.min_insync = MIN_INSYNC;
        m.mv.started_ms = (int64_t)(w->now / 1000);
        snprintf(m.mv.lead_to, sizeof m.mv.lead_to, "%s", nid(w, to));
        mapstore_partition mp;
        to_mp(w, p, &mp);
        char err[160];
        if (rmove_check(&m.mv, &mp, err, sizeof err)) continue;
        m.mv.id = ++w->next_move;
        w->mv[p] = m;
        w->r->moves++;
    }
}

static void handoff_tick(sim *w) {
    if (w->ho_node < 0) return;
    snode *n = &w->nodes[w->ho_node];
    int open = 0;
    for (unsigned p = 0; p < P; p++)
        open |= w->mv[p].active && w->mv[p].handoff;
    if (open && w->now < w->ho_deadline && n->up && n->inc == w->ho_inc) return;
    for (unsigned p = 0; p < P; p++) {
        w->mv[p].handoff = 0;
        w->r->handoff_left += w->cm.part[p].leader == w->ho_node;
    }
    w->ho_node = -1;
    if (n->up && n->inc == w->ho_inc) node_crash(w, n, "SIGTERM, after the hand-off", 0);
}

static void moves_tick(sim *w) {
    if (w->now < w->fault_end && w->now > 200000 && chance(w, MOVE_START_PM)) move_start(w);
    handoff_tick(w);
    for (unsigned p = 0; p < P && !w->r->violation; p++) {
        smove *m = &w->mv[p];
        if (!m->active) continue;
        if (m->busy && w->now < m->busy_until) continue;
        m->busy = 0;
        if (w->now < m->retry_at) continue;
        move_step(w, p, m);
    }
}

/* A node a running move depends on (its source, destination or the
 * partition's leader), for the crash faults; -1 when no move runs. */
static int move_victim(sim *w) {
    unsigned p0 = (unsigned)(rnd(w) % P);
    for (unsigned i = 0; i < P; i++) {
        unsigned p = (p0 + i) % P;
        smove *m = &w->mv[p];
        if (!m->active) continue;
        int cand[3] = {node_by_id(w, m->mv.add), node_by_id(w, m->mv.remove), w->cm.part[p].leader};
        int j = cand[rnd(w) % 3];
        if (j < 0) j = cand[2];
        return j;
    }
    return -1;
}

static void ev_ctick(sim *w, ev *e) {
    (void)e;
    for (unsigned p = 0; p < P; p++) {
        cpart *c = &w->cm.part[p];
        for (int k = 0; k < c->nrep; k++) { /* followers down: out of the ISR */
            int j = c->rep[k];
            if (j != c->leader && (c->isr & (1u << j)) && !alive(w, j) && popcount(c->isr) > 1) {
                c->isr &= ~(1u << j);
                c->pepoch++;
                w->r->isr_shrinks++;
                trace(w, "coordinator: partition %u drops %s (down) from the ISR", p, nid(w, j));
                push_all(w);
            }
        }
        if (!alive(w, c->leader)) c->failing = 1;
        if (c->failing) failover(w, p);
    }
    moves_tick(w);
    if (w->now - w->last_push >= MAP_PUSH_MS * 1000ull) push_all(w);
    ev *t = ev_new(w, K_CTICK, w->now + CTICK_MS * 1000ull, -1, ev_ctick);
    schedule(w, t);
}

/* ---- Clients -------------------------------------------------------------------------- */

static void ev_cnext(sim *w, ev *e);
static void ev_crep(sim *w, ev *e);
static void ev_ctimeout(sim *w, ev *e);

static void client_send(sim *w, sclient *c) {
    int t = c->owner[c->p];
    if (t < 0 || t >= w->n) t = (int)(rnd(w) % (uint64_t)w->n);
    c->target = t;
    ev *e = ev_new(w, K_CREQ, 0, t, ev_creq);
    e->a = c->id;
    e->b = c->is_read;
    e->u = c->gen;
    e->u2 = c->p;
    snprintf(e->s1, sizeof e->s1, "%s", c->key);
    snprintf(e->s2, sizeof e->s2, "%s", c->val);
    net_send(w, -1, t, e);
}

static void client_next(sim *w, sclient *c, uint64_t after_us) {
    c->busy = 0;
    c->gen++;
    ev *e = ev_new(w, K_CNEXT, w->now + after_us, -1, ev_cnext);
    e->a = c->id;
    e->u = c->gen;
    schedule(w, e);
}

static void ev_cnext(sim *w, ev *e) {
    sclient *c = &w->clients[e->a];
    if (e->u != c->gen || w->now > w->end - QUIET_MS * 1000ull) return;
    c->busy = 1;
    c->attempts = 0;
    c->is_read = w->nacks && chance(w, 300);
    if (c->is_read) {
        c->want = (long)(rnd(w) % w->nacks);
        snprintf(c->key, sizeof c->key, "%s", w->acks[c->want].key);
        c->val[0] = 0;
    } else {
        c->seq++;
        snprintf(c->key, sizeof c->key, "c%d-%llu", c->id, (unsigned long long)c->seq);
        snprintf(c->val, sizeof c->val, "v%llu-%d-%llu", (unsigned long long)(w->o.seed % 100000),
                 c->id, (unsigned long long)c->seq);
    }
    c->p = keel_key_slot(c->key, strlen(c->key)) / (16384u / P);
    ev *t = ev_new(w, K_CTIMEOUT, w->now + CLIENT_TIMEOUT_MS * 1000ull, -1, ev_ctimeout);
    t->a = c->id;
    t->u = c->gen;
    schedule(w, t);
    client_send(w, c);
}

static void ev_ctimeout(sim *w, ev *e) {
    sclient *c = &w->clients[e->a];
    if (e->u != c->gen || !c->busy) return;
    c->owner[c->p] = -1; /* ask someone else next time */
    client_next(w, c, 1000);
}

static void reply_client(sim *w, snode *n, int client, uint64_t gen, int code, const char *val,
                         int moved, const pendw *pw) {
    ev *e = ev_new(w, K_CREP, 0, -1, ev_crep);
    e->a = client;
    e->b = code;
    e->u = gen;
    e->u4 = (uint64_t)n->i;
    e->u2 = (uint64_t)(int64_t)moved;
    if (val) {
        snprintf(e->s2, sizeof e->s2, "%s", val);
        e->argc = 0;
        e->s1[0] = 1; /* found */
    }
    if (pw) e->u2 = pw->pos, e->u3 = pw->hash;
    send_from(n, e);
}

/* R4, as the reply of an acknowledged write leaves its leader n: the
 * write's position, with its contents, is durable (applied, and covered by
 * a completed fsync) on at least min_insync replicas and on every member
 * of the coordinator's ISR; and every ISR member's log agrees with the
 * leader's at every position up to it (past the later of their full
 * copies): a member that lacks a batch the leader holds, or holds one the
 * leader lacks or holds otherwise, would answer with a different history
 * once it leads. */
static void check_ack(sim *w, snode *n, const pendw *pw) {
    const cpart *cp = &w->cm.part[pw->p];
    const shadow *ls = &n->sh[pw->p];
    int holders = 0;
    for (int k = 0; k < cp->nrep && !w->r->violation; k++) {
        int j = cp->rep[k];
        const shadow *s = &w->nodes[j].sh[pw->p];
        int h = sh_durable(s, pw->pos, pw->hash);
        holders += h;
        if (!(cp->isr & (1u << j))) continue;
        if (!h) {
            violation(w,
                      "R4: %s acknowledged at position %llu of partition %u, which ISR member %s "
                      "does not hold durably (%s)",
                      w->clients[pw->client].key, (unsigned long long)pw->pos, pw->p, nid(w, j),
                      sh_holds(s, pw->pos, pw->hash) ? "not yet synced" : "absent");
            return;
        }
        if (j == n->i) continue;
        uint64_t from = (s->base > ls->base ? s->base : ls->base) + 1;
        for (uint64_t q = from; q < pw->pos; q++)
            if (sh_at(s, q) != sh_at(ls, q)) {
                violation(w,
                          "R4: ISR member %s and leader %s of partition %u disagree at position "
                          "%llu (%s there, %s here) below acknowledged %llu",
                          nid(w, j), n->id, pw->p, (unsigned long long)q,
                          sh_at(s, q) ? "held" : "absent", sh_at(ls, q) ? "held" : "absent",
                          (unsigned long long)pw->pos);
                return;
            }
    }
    if (holders < MIN_INSYNC && !w->r->violation)
        violation(w, "R4: %s acknowledged with %d durable cop%s of position %llu (min_insync %d)",
                  w->clients[pw->client].key, holders, holders == 1 ? "y" : "ies",
                  (unsigned long long)pw->pos, MIN_INSYNC);
}

static void ev_cretry(sim *w, ev *e) {
    sclient *c = &w->clients[e->a];
    if (e->u == c->gen && c->busy) client_send(w, c);
}

static void ev_crep(sim *w, ev *e) {
    sclient *c = &w->clients[e->a];
    if (e->u != c->gen || !c->busy) return;
    if (e->b == REP_OK) {
        c->owner[c->p] = (int)e->u4;
        if (c->is_read) {
            acked *a = &w->acks[c->want];
            w->r->reads_checked++;
            if (!e->s1[0] || strcmp(e->s2, a->val) != 0)
                violation(w, "R3: read of acknowledged %s at leader %s returned %s", a->key,
                          nid(w, (int)e->u4), e->s1[0] ? e->s2 : "nil");
        } else {
            if (w->nacks == w->capacks) {
                w->capacks = w->capacks ? w->capacks * 2 : 4096;
                w->acks = realloc(w->acks, w->capacks * sizeof *w->acks);
                if (!w->acks) abort();
            }
            acked *a = &w->acks[w->nacks++];
            snprintf(a->key, sizeof a->key, "%s", c->key);
            snprintf(a->val, sizeof a->val, "%s", c->val);
            a->p = c->p;
            w->r->writes_acked++;
        }
        client_next(w, c, rnd_in(w, 0, 3000));
        return;
    }
    if (++c->attempts > 20) {
        client_next(w, c, 10000);
        return;
    }
    if (e->b == REP_ENOTLEADER) {
        int to = (int)(int64_t)e->u2;
        c->owner[c->p] = to >= 0 && to != (int)e->u4 ? to : -1;
        client_send(w, c);
        return;
    }
    /* TRYAGAIN (no lease) or NOREPLICAS: again a little later. */
    ev *r = ev_new(w, K_CNEXT, w->now + 50000, -1, ev_cretry);
    r->a = c->id;
    r->u = c->gen;
    schedule(w, r);
}

/* ---- Faults ------------------------------------------------------------------------------ */

static void ev_fault(sim *w, ev *e) {
    (void)e;
    if (w->now >= w->fault_end) return;
    int i = (int)(rnd(w) % (uint64_t)w->n);
    snode *n = &w->nodes[i];
    unsigned f = (unsigned)(rnd(w) % 100);
    w->r->faults++;
    if (f < 14) {
        if (chance(w, 500)) { /* the source, the destination or the leader of a move */
            int v = move_victim(w);
            if (v >= 0) n = &w->nodes[v];
        }
        if (n->up && w->down == 0 && w->ho_node < 0) {
            if (chance(w, 300)) {
                handoff_start(w, n); /* a graceful stop */
            } else if (chance(w, 700)) {
                /* Power loss inside the node's next fsync window (node_turn_end),
                 * most often a leader's: its batches left, its tail unsynced. */
                if (chance(w, 700)) n = &w->nodes[w->cm.part[rnd(w) % P].leader];
                n->crash_arm = 1;
                n->arm_at = w->now;
                trace(w, "%s armed: power loss in its next fsync window", n->id);
            } else {
                node_crash(w, n, "power loss", 1);
            }
        }
    } else if (f < 34) {
        int j = (int)(rnd(w) % (uint64_t)w->n);
        if (j != i) {
            trace(w, "drop %s <-> %s", n->id, w->nodes[j].id);
            conn_break(w, i, j);
            w->r->drops++;
        }
    } else if (f < 48) {
        if (n->up) {
            n->cut_until = w->now + rnd_in(w, 200000, 2000000);
            trace(w, "%s cut off from the coordinator until %.3f", n->id, n->cut_until / 1e6);
            w->r->cuts++;
        }
    } else if (f < 62) {
        if (n->up && n->paused_until <= w->now) {
            n->paused_until = w->now + rnd_in(w, 50000, 1000000);
            trace(w, "%s paused until %.3f", n->id, n->paused_until / 1e6);
            w->r->pauses++;
        }
    } else if (f < 72) {
        n->clock_off += (int64_t)rnd_in(w, 10000, 300000); /* steps forward only: monotonic */
        w->r->clock_steps++;
    } else if (f < 88) {
        w->slow_until = w->now + rnd_in(w, 100000, 800000);
    } else {
        if (n->up) n->fail_next_sync = 1;
    }
    ev *t = ev_new(w, K_FAULT, w->now + rnd_in(w, 80000, 350000), -1, ev_fault);
    schedule(w, t);
}

/* ---- Checks ------------------------------------------------------------------------------ */

/* R1 and R2 (a leader serves only holding every acknowledged write: checked
 * the first time it may serve in an epoch; a map that made it leader in an
 * epoch already over, delivered late, gives it no lease and is no failover). */
static void check_r1(sim *w) {
    for (unsigned p = 0; p < P; p++) {
        int who = -1;
        for (int i = 0; i < w->n; i++) {
            snode *n = &w->nodes[i];
            if (!n->up || n->paused_until > w->now) continue;
            if (rep_read_check(n->rp, p) == REP_OK && n->served_epoch[p] != rep_epoch(n->rp, p)) {
                n->served_epoch[p] = rep_epoch(n->rp, p);
                check_new_leader(w, n, p);
            }
            int to;
            if (n_write_check(n, p, &to) != REP_OK) continue;
            uint64_t e = rep_epoch(n->rp, p);
            if (n->resign_ok_le[p] == e) {
                violation(w,
                          "T1: %s accepts writes of partition %u in epoch %llu after answering "
                          "RESIGN OK",
                          n->id, p, (unsigned long long)e);
                return;
            }
            if (w->xfer[p].from == i && w->xfer[p].inc == n->inc && w->xfer[p].le == e) {
                violation(w,
                          "T1: %s accepts writes of partition %u in epoch %llu after its "
                          "leadership was transferred to %s",
                          n->id, p, (unsigned long long)e, w->nodes[w->cm.part[p].leader].id);
                return;
            }
            if (who >= 0) {
                violation(w,
                          "R1: %s (epoch %llu) and %s (epoch %llu) both accept writes for "
                          "partition %u",
                          w->nodes[who].id, (unsigned long long)rep_epoch(w->nodes[who].rp, p),
                          n->id, (unsigned long long)rep_epoch(n->rp, p), p);
                return;
            }
            who = i;
        }
        if (who < 0) continue;
        /* R3 at every instant: while a leader accepts writes in epoch e, no
         * node serves leader reads of p in an older epoch (it would miss
         * what the new leader acknowledges). */
        uint64_t we = rep_epoch(w->nodes[who].rp, p);
        for (int i = 0; i < w->n; i++) {
            snode *n = &w->nodes[i];
            if (i == who || !n->up || n->paused_until > w->now) continue;
            int to;
            if (n_read_check(n, p, &to) == REP_OK && rep_epoch(n->rp, p) < we) {
                violation(w,
                          "R3: %s serves reads of partition %u in epoch %llu while %s accepts "
                          "writes in epoch %llu",
                          n->id, p, (unsigned long long)rep_epoch(n->rp, p), w->nodes[who].id,
                          (unsigned long long)we);
                return;
            }
        }
    }
}

static void check_end(sim *w) {
    unsigned per = 16384u / P;
    for (unsigned p = 0; p < P && !w->r->violation; p++) {
        cpart *c = &w->cm.part[p];
        snode *l = &w->nodes[c->leader];
        int to;
        if (!l->up || n_write_check(l, p, &to) != REP_OK) {
            violation(w, "L: partition %u has no leader accepting writes at the end (%s, %s)", p,
                      l->id, l->up ? "refuses" : "down");
            return;
        }
        if (popcount(c->isr) < MIN_INSYNC) {
            violation(w, "L: partition %u ends with an ISR of %d", p, popcount(c->isr));
            return;
        }
        uint64_t lx, lk, x, k;
        if (store_range_digest(l->st, p * per, p * per + per - 1, &lx, &lk)) abort();
        for (int j = 0; j < w->n; j++) {
            if (!(c->isr & (1u << j)) && j != c->leader) continue;
            snode *f = &w->nodes[j];
            if (!f->up || store_range_digest(f->st, p * per, p * per + per - 1, &x, &k)) {
                violation(w, "L: ISR member %s of partition %u is down at the end", f->id, p);
                return;
            }
            /* The kept statistics against the data itself: a follower that
             * applied a batch with old states its data did not have counts
             * keys and digests that are not there. */
            uint64_t sx, sk;
            if (store_range_checksum(f->st, NULL, p * per, p * per + per - 1, &sx, &sk)) abort();
            if (sx != x || sk != k) {
                violation(w,
                          "L: %s's kept digest of partition %u differs from its data (%llu "
                          "keys kept, %llu scanned)",
                          f->id, p, (unsigned long long)k, (unsigned long long)sk);
                return;
            }
            if (j == c->leader) continue;
            if (x != lx || k != lk)
                violation(w,
                          "L: ISR member %s of partition %u differs from leader %s (%llu vs "
                          "%llu keys)",
                          f->id, p, l->id, (unsigned long long)k, (unsigned long long)lk);
        }
        check_new_leader(w, l, p); /* every acknowledged key, on its leader */
    }
}

/* ---- The run ----------------------------------------------------------------------------- */

static void rm_rf(const char *dir) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {
    }
}

static int preload(sim *w) {
    for (int k = 0; k < PRELOAD; k++) {
        if (w->nacks == w->capacks) {
            w->capacks = w->capacks ? w->capacks * 2 : 4096;
            w->acks = realloc(w->acks, w->capacks * sizeof *w->acks);
            if (!w->acks) abort();
        }
        acked *a = &w->acks[w->nacks++];
        snprintf(a->key, sizeof a->key, "pre-%d", k);
        snprintf(a->val, sizeof a->val, "p%d-%llu", k, (unsigned long long)(rnd(w) % 1000000));
        unsigned slot = keel_key_slot(a->key, strlen(a->key));
        a->p = slot / (16384u / P);
        for (int r = 0; r < w->cm.part[a->p].nrep; r++) {
            snode *n = &w->nodes[w->cm.part[a->p].rep[r]];
            store_txn *t = store_txn_begin(n->st);
            if (store_txn_put(t, slot, a->key, strlen(a->key), STORE_T_STRING, 0, a->val,
                              strlen(a->val)) ||
                store_txn_commit(t))
                return -1;
        }
    }
    for (int i = 0; i < w->n; i++)
        if (store_sync(w->nodes[i].st, NULL)) return -1;
    return 0;
}

int repsim_run(const repsim_opts *o, repsim_result *r) {
    memset(r, 0, sizeof *r);
    sim *w = calloc(1, sizeof *w);
    if (!w) return -1;
    w->o = *o;
    w->r = r;
    w->rng = o->seed * 0x2545f4914f6cdd1dull + 7;
    w->n = o->nodes ? o->nodes : 3 + (int)(rnd(w) % 3);
    if (w->n < 3) w->n = 3;
    if (w->n > MAXN) w->n = MAXN;
    w->ho_node = -1;
    for (size_t b = 0; b < REG_BUCKETS; b++)
        w->rbuck[b] = SIZE_MAX;
    w->fault_end = (o->fault_ms ? o->fault_ms : 6000) * 1000ull;
    w->end = w->fault_end + SETTLE_MS * 1000ull;
    const char *base = o->dir                          ? o->dir
                       : access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                       : getenv("TMPDIR")              ? getenv("TMPDIR")
                                                       : "/tmp";
    char root[256];
    snprintf(root, sizeof root, "%s/repsim-%d-%llu", base, (int)getpid(),
             (unsigned long long)o->seed);
    rm_rf(root);
    mkdir(root, 0700);
    int rc = 0;
    for (unsigned p = 0; p < P; p++) {
        cpart *c = &w->cm.part[p];
        c->nrep = RF;
        for (int k = 0; k < RF; k++)
            c->rep[k] = (int)((p + (unsigned)k) % (unsigned)w->n);
        c->leader = c->rep[0];
        c->isr = (1u << c->rep[0]) | (1u << c->rep[1]) | (1u << c->rep[2]);
        c->lepoch = c->pepoch = 1;
        w->xfer[p].from = -1;
    }
    for (int i = 0; i < w->n; i++) {
        snode *n = &w->nodes[i];
        n->w = w, n->i = i;
        snprintf(n->id, sizeof n->id, "n%d", i);
        snprintf(n->dir, sizeof n->dir, "%s/%s", root, n->id);
        n->rate = 0.98 + (double)(rnd(w) % 4001) / 100000.0; /* 0.98 .. 1.02 */
        n->clock_off = (int64_t)rnd_in(w, 0, 1000000000);
        if (node_start(w, n)) {
            rc = -1;
            goto done;
        }
    }
    if (preload(w)) {
        snprintf(r->what, sizeof r->what, "preload failed");
        rc = -1;
        goto done;
    }
    for (int i = 0; i < w->n; i++) {
        w->last_hb[i] = 1; /* as if each had just registered */
        w->hb_inc[i] = w->cm.inc[i] = w->nodes[i].inc;
        node_apply_map(w, &w->nodes[i], &w->cm);
    }
    for (int c = 0; c < CLIENTS; c++) {
        sclient *cl = &w->clients[c];
        cl->id = c;
        for (unsigned p = 0; p < P; p++)
            cl->owner[p] = -1;
        client_next(w, cl, rnd_in(w, 0, 20000));
    }
    schedule(w, ev_new(w, K_CTICK, CTICK_MS * 1000ull, -1, ev_ctick));
    schedule(w, ev_new(w, K_FAULT, 300000, -1, ev_fault));
    uint64_t trace_h = 0xcbf29ce484222325ull;
    while (!r->violation) {
        ev *e = heap_pop(w);
        if (!e || e->at > w->end) {
            if (e) ev_free(e);
            break;
        }
        w->now = e->at;
        r->events++;
        trace_h = (trace_h ^ (uint64_t)e->kind) * 0x100000001b3ull;
        trace_h = (trace_h ^ (uint64_t)(e->node + 1)) * 0x100000001b3ull;
        trace_h = (trace_h ^ e->at) * 0x100000001b3ull;
        if (o->verbose > 1) trace(w, "event %d node %d", e->kind, e->node);
        if (e->node >= 0) {
            snode *n = &w->nodes[e->node];
            if (!n->up || n->inc != e->inc) {
                ev_free(e);
                continue;
            }
            if (n->paused_until > w->now) { /* frozen: runs after, in the same order */
                e->at = n->paused_until;
                schedule(w, e);
                continue;
            }
            /* In its fsync window the loop thread blocks: the rest waits
             * (unless the fsync is made asynchronous, a mutation). */
            if (e->kind != K_SYNCDONE && n->win_open &&
                !(o->coord_mutations & REPSIM_MUT_REPLY_BEFORE_SYNC)) {
                e->at = n->sync_until;
                schedule(w, e);
                continue;
            }
            if (e->kind == K_PEERDOWN)
                rep_peer_down(n->rp, w->nodes[e->a].id);
            else
                e->fn(w, e);
            if (e->kind != K_SYNCDONE) node_turn_end(w, n, e->kind != K_TICK);
        } else {
            e->fn(w, e);
        }
        ev_free(e);
        check_r1(w);
    }
    if (!r->violation) {
        w->now = w->end;
        check_end(w);
    }
    r->trace = trace_h;
    r->sim_ms = w->now / 1000;
    for (int i = 0; i < w->n; i++)
        if (w->nodes[i].rp) collect_stats(w, &w->nodes[i]);
done:
    for (int i = 0; i < w->n; i++) {
        snode *n = &w->nodes[i];
        for (size_t k = 0; k < n->nout; k++)
            ev_free(n->out[k]);
        free(n->out);
        free(n->pw);
        free(n->pend);
        rep_free(n->rp);
        store_free(n->st);
        for (unsigned p = 0; p < P; p++) {
            free(n->sh[p].hash);
            free(n->sh[p].epoch);
            free(n->sh[p].pend);
        }
    }
    while (w->q.n)
        ev_free(heap_pop(w));
    simkit_queue_free(&w->q);
    free(w->acks);
    free(w->reg);
    free(w);
    rm_rf(root);
    return rc;
}
