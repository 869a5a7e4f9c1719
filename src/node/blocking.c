/* blocking.c - see blocking.h.
 *
 * State. One `blocking` per server (s->blk, made on first block): a hash
 * table of the keys someone waits on (bkey, each with a FIFO of bwait
 * entries), the list of ready keys, a min-heap of deadlines and one timer.
 * Each client's state is a block_state hung on its node_conn (made on first
 * block, freed at close), holding one bwait per distinct key.
 *
 * A block_state is "linked" while its request is held here: its bwaits are
 * on their keys' FIFOs, it is on the all-blocked list, and (with a
 * deadline) on the heap. Re-dispatching it (resume()) sets `resuming`; the
 * handler's blocking_run() clears it and either replies (unlink) or blocks
 * again in place. If resuming is still set when rserver_resume returns, the
 * handler never ran - routing answered -MOVED, or the request was held for
 * a fenced partition - and the state is unlinked then.
 */
#include "node/blocking.h"

#include "core/clock.h"
#include "node/move.h" /* node_conn */
#include "node/ptable.h"
#include "node/script.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KEY_BUCKETS 4096

struct block_state;

typedef struct bwait {
    struct block_state *st;
    struct bkey *key;
    struct bwait *prev, *next; /* on key->head..tail, oldest first */
} bwait;

typedef struct bkey {
    char *k;
    size_t kl;
    bwait *head, *tail;
    int ready;          /* on the ready list */
    struct bkey *hnext; /* hash chain */
    struct bkey *rnext; /* ready list */
} bkey;

typedef struct block_state {
    client *c;
    int linked, resuming;
    blocking_reason reason;
    uint64_t serial;     /* bumped by every fresh block */
    int64_t deadline_ms; /* monotonic; 0 = none */
    size_t hi;           /* index in the heap while linked with a deadline */
    unsigned slot;
    bwait *w;
    int nw, wcap;
    char *save; /* blocking_spec.save, copied */
    size_t savelen;
    int keep_trying;
    struct block_state *prev, *next; /* all blocked */
} block_state;

typedef struct blocking {
    bkey *keys[KEY_BUCKETS];
    bkey *ready_head, *ready_tail;
    block_state *all;
    size_t nblocked;
    block_state **heap;
    size_t hn, hcap;
    uv_timer_t timer;
    int timer_init;
    int64_t due_ms; /* monotonic ms the timer fires at; 0 when stopped */
    int serving;
} blocking;

static int64_t mono_ms(void) {
    return (int64_t)(keel_mono_us() / 1000);
}

static unsigned key_hash(const char *k, size_t kl) {
    unsigned h = 2166136261u;
    for (size_t i = 0; i < kl; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h & (KEY_BUCKETS - 1);
}

static bkey **key_slot(blocking *b, const char *k, size_t kl) {
    bkey **pp = &b->keys[key_hash(k, kl)];
    while (*pp && !((*pp)->kl == kl && memcmp((*pp)->k, k, kl) == 0))
        pp = &(*pp)->hnext;
    return pp;
}

/* Frees key bk if nobody waits on it and it is not on the ready list. */
static void key_maybe_free(blocking *b, bkey *bk) {
    if (bk->head || bk->ready) return;
    bkey **pp = key_slot(b, bk->k, bk->kl);
    if (*pp == bk) *pp = bk->hnext;
    free(bk->k);
    free(bk);
}

/* ---- The deadline heap ----------------------------------------------------- */

static void heap_swap(blocking *b, size_t i, size_t j) {
    block_state *t = b->heap[i];
    b->heap[i] = b->heap[j];
    b->heap[j] = t;
    b->heap[i]->hi = i;
    b->heap[j]->hi = j;
}

static void heap_up(blocking *b, size_t i) {
    while (i > 0 && b->heap[(i - 1) / 2]->deadline_ms > b->heap[i]->deadline_ms) {
        heap_swap(b, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(blocking *b, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < b->hn && b->heap[l]->deadline_ms < b->heap[m]->deadline_ms) m = l;
        if (r < b->hn && b->heap[r]->deadline_ms < b->heap[m]->deadline_ms) m = r;
        if (m == i) return;
        heap_swap(b, i, m);
        i = m;
    }
}

static int heap_push(blocking *b, block_state *st) {
    if (b->hn == b->hcap) {
        size_t cap = b->hcap ? b->hcap * 2 : 64;
        block_state **h = realloc(b->heap, cap * sizeof *h);
        if (!h) return -1;
        b->heap = h;
        b->hcap = cap;
    }
    st->hi = b->hn;
    b->heap[b->hn++] = st;
    heap_up(b, st->hi);
    return 0;
}

static void heap_remove(blocking *b, block_state *st) {
    size_t i = st->hi;
    if (i >= b->hn || b->heap[i] != st) return;
    b->hn--;
    if (i != b->hn) {
        b->heap[i] = b->heap[b->hn];
        b->heap[i]->hi = i;
        heap_down(b, i);
        heap_up(b, i);
    }
}

/* ---- Linking ---------------------------------------------------------------- */

static void unlink_state(blocking *b, block_state *st) {
    if (!st->linked) return;
    for (int i = 0; i < st->nw; i++) {
        bwait *w = &st->w[i];
        bkey *bk = w->key;
        if (w->prev)
            w->prev->next = w->next;
        else
            bk->head = w->next;
        if (w->next)
            w->next->prev = w->prev;
        else
            bk->tail = w->prev;
        w->prev = w->next = NULL;
        key_maybe_free(b, bk);
    }
    st->nw = 0;
    if (st->deadline_ms) heap_remove(b, st);
    if (st->prev)
        st->prev->next = st->next;
    else
        b->all = st->next;
    if (st->next) st->next->prev = st->prev;
    st->prev = st->next = NULL;
    st->linked = 0;
    st->resuming = 0;
    b->nblocked--;
}

static void timer_arm(blocking *b);

/* Queues st on the keys of x (sp), with deadline (0 = none). */
static int link_state(blocking *b, block_state *st, cmd_ctx *x, const blocking_spec *sp,
                      int64_t deadline_ms) {
    if (st->wcap < sp->nkeys) {
        bwait *w = realloc(st->w, (size_t)sp->nkeys * sizeof *w);
        if (!w) return -1;
        st->w = w;
        st->wcap = sp->nkeys;
    }
    st->nw = 0;
    st->deadline_ms = deadline_ms;
    if (deadline_ms && heap_push(b, st)) return -1;
    st->linked = 1; /* from here unlink_state undoes everything */
    st->prev = NULL;
    st->next = b->all;
    if (b->all) b->all->prev = st;
    b->all = st;
    b->nblocked++;
    for (int i = 0; i < sp->nkeys; i++) {
        const char *k = x->argv[sp->first_key + i];
        size_t kl = x->argvlen[sp->first_key + i];
        int dup = 0;
        for (int j = 0; j < st->nw && !dup; j++)
            dup = st->w[j].key->kl == kl && memcmp(st->w[j].key->k, k, kl) == 0;
        if (dup) continue; /* BLPOP k k: one place in the queue (redis' blockForKeys) */
        bkey **pp = key_slot(b, k, kl), *bk = *pp;
        if (!bk) {
            bk = calloc(1, sizeof *bk);
            if (!bk || !(bk->k = malloc(kl ? kl : 1))) {
                free(bk);
                unlink_state(b, st);
                return -1;
            }
            memcpy(bk->k, k, kl);
            bk->kl = kl;
            *pp = bk;
        }
        bwait *w = &st->w[st->nw++];
        w->st = st;
        w->key = bk;
        w->next = NULL;
        w->prev = bk->tail;
        if (bk->tail)
            bk->tail->next = w;
        else
            bk->head = w;
        bk->tail = w;
    }
    free(st->save);
    st->save = NULL;
    st->savelen = 0;
    if (sp->savelen) {
        if (!(st->save = malloc(sp->savelen))) {
            unlink_state(b, st);
            return -1;
        }
        memcpy(st->save, sp->save, sp->savelen);
        st->savelen = sp->savelen;
    }
    st->keep_trying = sp->keep_trying;
    st->serial++;
    st->slot = x->slot;
    st->reason = BLOCK_READY;
    timer_arm(b);
    return 0;
}

/* ---- Resuming ------------------------------------------------------------- */

/* Re-dispatches st's held request for `why`; afterwards st is unlinked
 * unless the handler blocked it again in place. */
static void resume(blocking *b, block_state *st, blocking_reason why) {
    st->reason = why;
    st->resuming = 1;
    uint64_t serial = st->serial;
    rserver_resume(st->c);
    if (st->linked && st->serial == serial && st->resuming) unlink_state(b, st);
}

static void on_timer(uv_timer_t *t);

/* Runs the timer at the earliest deadline, and at most BLOCKING_CHECK_MS
 * from its last run; never later than it is set for already (so clients
 * blocking often cannot postpone the route check). */
static void timer_arm(blocking *b) {
    if (!b->timer_init) return;
    if (!b->nblocked) {
        uv_timer_stop(&b->timer);
        b->due_ms = 0;
        return;
    }
    int64_t now = mono_ms(), due = now + BLOCKING_CHECK_MS;
    if (b->hn && b->heap[0]->deadline_ms < due) due = b->heap[0]->deadline_ms;
    if (b->due_ms && b->due_ms <= due) return;
    b->due_ms = due;
    uv_timer_start(&b->timer, on_timer, (uint64_t)(due > now ? due - now : 0), 0);
}

static void on_timer(uv_timer_t *t) {
    server *s = t->data;
    blocking *b = s->blk;
    b->due_ms = 0;
    b->serving = 1;
    int64_t now = mono_ms();
    while (b->hn && b->heap[0]->deadline_ms <= now) {
        block_state *st = b->heap[0];
        resume(b, st, BLOCK_TIMEOUT);
        if (st->linked && b->hn && b->heap[0] == st) unlink_state(b, st); /* never loop */
    }
    /* Slots that moved away: -MOVED through the request's own routing. The
     * list may change under a resume; restart from the head after each. */
    for (int again = 1; again;) {
        again = 0;
        for (block_state *st = b->all; st; st = st->next) {
            route r;
            ptable_route(s->pt, st->slot, &r);
            if (r.kind == ROUTE_MOVED || r.kind == ROUTE_DOWN) {
                resume(b, st, BLOCK_READY);
                if (st->linked) unlink_state(b, st); /* still served by nobody here */
                again = 1;
                break;
            }
        }
    }
    b->serving = 0;
    blocking_serve(s); /* what the timed-out requests' pipelined writes readied */
    timer_arm(b);
}

/* ---- The API -------------------------------------------------------------- */

static blocking *blk_get(server *s) {
    if (!s->blk) {
        s->blk = calloc(1, sizeof *s->blk);
        if (!s->blk) return NULL;
        uv_timer_init(s->loop, &s->blk->timer);
        s->blk->timer.data = s;
        s->blk->timer_init = 1;
    }
    return s->blk;
}

static block_state *state_of(client *c, int create) {
    node_conn *nc = create ? node_conn_of(c) : c->user;
    if (!nc) return NULL;
    if (!nc->block && create) {
        nc->block = calloc(1, sizeof *nc->block);
        if (nc->block) nc->block->c = c;
    }
    return nc->block;
}

/* redis 7.0.15's getTimeoutFromObjectOrReply(UNIT_SECONDS) with string2ld.
 * Returns 0 and *ms (0 = forever, -1 = time out at once, else a relative
 * timeout), or -1 after replying. */
static int parse_timeout(cmd_ctx *x, int i, long long *ms, int unit_ms) {
    if (unit_ms) { /* UNIT_MILLISECONDS: an integer */
        long long t;
        if (arg_ll(x->argv[i], x->argvlen[i], &t)) {
            reply_err(x, "ERR timeout is not an integer or out of range");
            return -1;
        }
        if (t < 0) {
            reply_err(x, "ERR timeout is negative");
            return -1;
        }
        *ms = t > LLONG_MAX - keel_wall_ms() ? -1 : t;
        return 0;
    }
    const char *s = x->argv[i];
    size_t n = x->argvlen[i];
    char buf[5 * 1024];
    long double v = 0;
    int ok = n > 0 && n < sizeof buf;
    if (ok) {
        memcpy(buf, s, n);
        buf[n] = 0;
        char *end;
        errno = 0;
        v = strtold(buf, &end);
        if (isspace((unsigned char)buf[0]) || end[0] != 0 ||
            (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) || isnan(v))
            ok = 0;
    }
    if (!ok) {
        reply_err(x, "ERR timeout is not a float or out of range");
        return -1;
    }
    long double f = ceill(v * 1000.0L); /* milliseconds, rounded up: 0.0001 s is 1 ms */
    /* (long long) of a value outside its range (inf included) is what x86
     * gives: LLONG_MIN, so redis calls 1e400 and inf negative. */
    long long t =
        f >= 9223372036854775808.0L || f < -9223372036854775808.0L ? LLONG_MIN : (long long)f;
    if (t < 0) {
        reply_err(x, "ERR timeout is negative");
        return -1;
    }
    /* Past LLONG_MAX - now redis' absolute deadline wraps negative and the
     * client times out at its next check: at once here too. */
    *ms = t > LLONG_MAX - keel_wall_ms() ? -1 : t;
    return 0;
}

static void reply_null(cmd_ctx *x, int null_array) {
    if (null_array)
        resp_w_null_array(x->out, x->proto);
    else
        resp_w_null(x->out, x->proto);
}

void blocking_run(cmd_ctx *x, const blocking_spec *sp) {
    long long ms;
    block_state *st = x->can_block ? state_of(x->c, 0) : NULL;
    int again = st && st->linked && st->resuming; /* this request, re-dispatched */
    blocking *b = x->srv->blk;
    if (again) st->resuming = 0;
    if (parse_timeout(x, sp->timeout_arg, &ms, sp->timeout_ms)) {
        if (again) unlink_state(b, st);
        return;
    }
    if (again && st->reason != BLOCK_READY) {
        if (st->reason == BLOCK_UNBLOCKED)
            reply_err(x, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
        else
            reply_null(x, 1); /* a timeout: a null array for every list command */
        unlink_state(b, st);
        return;
    }
    if (sp->try_serve(x, again, sp->arg)) {
        if (again) unlink_state(b, st);
        return;
    }
    if (again) { /* nothing for it yet: it keeps its place and deadline */
        x->hold = RSERVER_HOLD;
        return;
    }
    if (!x->can_block) {
        reply_null(x, sp->null_array);
        return;
    }
    int64_t deadline = ms == 0 ? 0 : ms < 0 ? mono_ms() : mono_ms() + ms;
    if (!(b = blk_get(x->srv)) || !(st = state_of(x->c, 1)) || link_state(b, st, x, sp, deadline)) {
        reply_err(x, "ERR out of memory");
        return;
    }
    x->hold = RSERVER_HOLD;
}

const void *blocking_saved(cmd_ctx *x, size_t *len) {
    block_state *st = x->can_block && x->c ? state_of(x->c, 0) : NULL;
    if (!st || !st->linked || !st->save) {
        *len = 0;
        return NULL;
    }
    *len = st->savelen;
    return st->save;
}

void blocking_touch(server *s, const char *k, size_t kl) {
    blocking *b = s->blk;
    if (!b || !b->nblocked) return;
    bkey *bk = *key_slot(b, k, kl);
    if (!bk || bk->ready || !bk->head) return;
    bk->ready = 1;
    bk->rnext = NULL;
    if (b->ready_tail)
        b->ready_tail->rnext = bk;
    else
        b->ready_head = bk;
    b->ready_tail = bk;
}

void blocking_touch_all(server *s) {
    blocking *b = s->blk;
    if (!b || !b->nblocked) return;
    for (size_t i = 0; i < KEY_BUCKETS; i++)
        for (bkey *bk = b->keys[i]; bk; bk = bk->hnext)
            blocking_touch(s, bk->k, bk->kl);
}

void blocking_serve(server *s) {
    blocking *b = s->blk;
    if (!b || b->serving || !b->ready_head) return;
    /* A script past its time limit is still running (SCRIPT KILL, served
     * from rserver_poll_busy, ends here): its waiters would be answered
     * -BUSY. The script's own dispatch serves them when it returns. */
    if (script_busy(s)) return;
    b->serving = 1;
    while (b->ready_head) {
        bkey *bk = b->ready_head;
        b->ready_head = bk->rnext;
        if (!b->ready_head) b->ready_tail = NULL;
        bk->rnext = NULL;
        /* Kept alive while its waiters run: ready is cleared only after.
         * skip counts the waiters at the head that stayed blocked but let
         * the next ones be tried (keep_trying: stream readers). */
        size_t skip = 0;
        for (;;) {
            bwait *w = bk->head;
            for (size_t i = 0; i < skip && w; i++)
                w = w->next;
            if (!w) break;
            block_state *st = w->st;
            uint64_t serial = st->serial;
            resume(b, st, BLOCK_READY);
            if (st->linked && st->serial == serial) { /* blocked again */
                if (!st->keep_trying) break;          /* the key is empty */
                skip++;
            }
        }
        bk->ready = 0;
        key_maybe_free(b, bk);
    }
    b->serving = 0;
    timer_arm(b);
}

size_t blocking_count(const server *s) {
    return s->blk ? s->blk->nblocked : 0;
}

int blocking_is_blocked(const server *s, const client *c) {
    (void)s;
    const node_conn *nc = c->user;
    return nc && nc->block && nc->block->linked;
}

int blocking_unblock(server *s, unsigned long long id, int as_error) {
    blocking *b = s->blk;
    if (!b) return 0;
    for (block_state *st = b->all; st; st = st->next) {
        if (st->c->id != id) continue;
        int was_serving = b->serving;
        b->serving = 1; /* its pipelined writes are served below, not inside */
        resume(b, st, as_error ? BLOCK_UNBLOCKED : BLOCK_TIMEOUT);
        if (st->linked) unlink_state(b, st);
        b->serving = was_serving;
        timer_arm(b);
        return 1;
    }
    return 0;
}

void cmd_client_unblock(cmd_ctx *x) {
    int as_error = 0;
    if (x->argc > 4) {
        reply_err(x, "ERR unknown subcommand or wrong number of arguments for 'unblock'. Try "
                     "CLIENT HELP.");
        return;
    }
    if (x->argc == 4) {
        if (!strcasecmp(x->argv[3], "error"))
            as_error = 1;
        else if (strcasecmp(x->argv[3], "timeout")) {
            reply_err(x, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return;
        }
    }
    long long id;
    if (arg_ll(x->argv[2], x->argvlen[2], &id)) {
        reply_not_int(x);
        return;
    }
    resp_w_int(x->out, blocking_unblock(x->srv, (unsigned long long)id, as_error));
}

void blocking_conn_closed(server *s, client *c) {
    node_conn *nc = c->user;
    if (!nc || !nc->block) return;
    if (s->blk) unlink_state(s->blk, nc->block);
    free(nc->block->w);
    free(nc->block->save);
    free(nc->block);
    nc->block = NULL;
    if (s->blk) timer_arm(s->blk);
}

static void on_timer_closed(uv_handle_t *h) {
    blocking *b = h->data;
    free(b->heap);
    free(b);
}

void blocking_free(server *s) {
    blocking *b = s->blk;
    if (!b) return;
    s->blk = NULL;
    for (size_t i = 0; i < KEY_BUCKETS; i++)
        while (b->keys[i]) {
            bkey *bk = b->keys[i];
            b->keys[i] = bk->hnext;
            free(bk->k);
            free(bk);
        }
    for (block_state *st = b->all; st; st = st->next)
        st->linked = 0; /* their clients are closing; blocking_conn_closed frees them */
    b->timer.data = b;
    uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}
