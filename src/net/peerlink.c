/* peerlink.c - see peerlink.h.
 *
 *   DIAL --connected--> HELLO --challenge proven--> PROOF --+OK--> READY
 *                                                     |  (with cbs.sign)
 *                                                     +--+OK--> COORD --+OK--> READY
 *     any failure, error reply or disconnect -----------------------> DOWN
 *
 * The struct lives until both the owner has closed it and hiredis has let go
 * of the context (refs), so no hiredis callback ever sees freed memory.
 */
#include "net/peerlink.h"
#include "core/coordkey.h"
#include "core/err.h"
#include "core/log.h"
#include "net/hiredis_uv.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { S_DIAL, S_HELLO, S_PROOF, S_COORD, S_READY, S_DOWN } link_state;

struct peerlink {
    redisAsyncContext *ac;
    peerauth *pa;
    peerauth_secret secret;
    char self_id[PEERAUTH_ID_MAX + 1], expect[PEERAUTH_ID_MAX + 1], addr[300];
    peerlink_cbs cbs;
    void *arg;
    link_state state;
    int closed;       /* by the owner: no more callbacks */
    int refs;         /* the owner, the hiredis context while attached, each command in flight,
                       * the handshake timer until closed */
    uv_timer_t timer; /* the handshake must finish in HANDSHAKE_MS */
    int timer_open;
};

#define HANDSHAKE_MS 3000

/* One command in flight; holds a reference on its link. */
typedef struct pending {
    peerlink *l;
    peerlink_reply_fn cb;
    void *tag;
} pending;

static void unref(peerlink *l) {
    if (--l->refs > 0) return;
    peerauth_free(l->pa);
    peerauth_secret_wipe(&l->secret);
    free(l);
}

/* Lets go of the hiredis context now: its pending callbacks run with NULL
 * (possibly later, if we are inside one of its callbacks) and it never calls
 * back into this link again. */
static void drop_ac(peerlink *l) {
    redisAsyncContext *ac = l->ac;
    if (!ac) return;
    l->ac = NULL;
    ac->data = NULL;
    redisAsyncFree(ac);
    unref(l);
}

static void timer_closed(uv_handle_t *h) {
    unref(h->data);
}

static void stop_timer(peerlink *l) {
    if (!l->timer_open) return;
    l->timer_open = 0;
    uv_close((uv_handle_t *)&l->timer, timer_closed);
}

static void go_down(peerlink *l, const char *why) {
    if (l->state == S_DOWN) return;
    l->state = S_DOWN;
    stop_timer(l);
    drop_ac(l);
    if (!l->closed && l->cbs.on_down) l->cbs.on_down(l->arg, l, why);
}

static void become_ready(peerlink *l) {
    l->state = S_READY;
    stop_timer(l);
    if (!l->closed && l->cbs.on_ready) l->cbs.on_ready(l->arg, l);
}

static void on_coord(redisAsyncContext *ac, void *reply, void *priv) {
    peerlink *l = ac->data;
    redisReply *r = reply;
    if (!l || l->state != S_COORD) return;
    if (!r || r->type != REDIS_REPLY_STATUS) {
        go_down(l, r && r->type == REDIS_REPLY_ERROR ? r->str : "coordinator-key-refused");
        return;
    }
    become_ready(l);
}

static void on_proof(redisAsyncContext *ac, void *reply, void *priv) {
    peerlink *l = ac->data;
    redisReply *r = reply;
    if (!l || l->state != S_PROOF) return;
    if (!r || r->type != REDIS_REPLY_STATUS) {
        go_down(l, r && r->type == REDIS_REPLY_ERROR ? r->str : "auth-refused");
        return;
    }
    if (l->cbs.sign) { /* the coordinator: prove the key too */
        unsigned char b[PEERAUTH_BINDING_MAX];
        size_t n;
        char sig[COORDKEY_SIG_HEX + 1];
        if (peerauth_binding(l->pa, b, &n) || l->cbs.sign(l->arg, b, n, sig)) {
            go_down(l, "coordinator-key-sign-failed");
            return;
        }
        const char *argv[] = {"KEEL.AUTH", "COORD", sig};
        l->state = S_COORD;
        redisAsyncCommandArgv(ac, on_coord, NULL, 3, argv, NULL);
        return;
    }
    l->state = S_READY;
    stop_timer(l);
    if (!l->closed && l->cbs.on_ready) l->cbs.on_ready(l->arg, l);
}

int peerlink_take_challenge(peerauth *pa, const redisReply *r, peerauth_proof *out,
                            const char **why) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        *why = r && r->type == REDIS_REPLY_ERROR ? "auth-refused" : "bad-challenge";
        return -1;
    }
    redisReply **e = r->element;
    if (e[0]->type != REDIS_REPLY_STRING || e[1]->type != REDIS_REPLY_STRING ||
        e[2]->type != REDIS_REPLY_STRING ||
        peerauth_client_challenge(pa, e[0]->str, e[0]->len, e[1]->str, e[1]->len, e[2]->str,
                                  e[2]->len, out)) {
        *why = pa ? peerauth_reason_name(peerauth_reason_of(pa)) : "no-handshake";
        return -1;
    }
    return 0;
}

static void on_challenge(redisAsyncContext *ac, void *reply, void *priv) {
    peerlink *l = ac->data;
    if (!l || l->state != S_HELLO) return;
    peerauth_proof proof;
    const char *why;
    if (peerlink_take_challenge(l->pa, reply, &proof, &why)) {
        go_down(l, why);
        return;
    }
    if (l->expect[0] && strcmp(peerauth_peer_id(l->pa), l->expect) != 0) {
        keel_log(KEEL_LOG_WARN, "peer_unexpected", "addr=%s expected=%s proved=%s", l->addr,
                 l->expect, peerauth_peer_id(l->pa));
        go_down(l, "unexpected-peer-id");
        return;
    }
    const char *argv[] = {"KEEL.AUTH", "PROOF", proof.proof};
    l->state = S_PROOF;
    redisAsyncCommandArgv(ac, on_proof, NULL, 3, argv, NULL);
}

static void on_connect(const redisAsyncContext *ac, int status) {
    peerlink *l = ac->data;
    if (!l) return;
    if (status != REDIS_OK) { /* hiredis frees the context after this */
        ((redisAsyncContext *)ac)->data = NULL;
        l->ac = NULL;
        go_down(l, "connect-failed");
        unref(l);
        return;
    }
    peerauth_hello h;
    if (!(l->pa = peerauth_new(PEERAUTH_CLIENT, l->self_id, &l->secret)) ||
        peerauth_client_hello(l->pa, &h)) {
        go_down(l, "auth-setup");
        return;
    }
    const char *argv[] = {"KEEL.AUTH", "HELLO", h.id, h.nonce};
    l->state = S_HELLO;
    redisAsyncCommandArgv(l->ac, on_challenge, NULL, 4, argv, NULL);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    peerlink *l = ac->data;
    if (!l) return;
    l->ac = NULL;
    go_down(l, "connection-lost");
    unref(l);
}
static void on_handshake_timeout(uv_timer_t *t) {
    go_down(t->data, "handshake-timeout");
}

peerlink *peerlink_open(uv_loop_t *loop, const char *host, int port, const char *self_id,
                        const char *expect_id, const peerauth_secret *secret,
                        const peerlink_cbs *cbs, void *arg) {
    peerlink *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    snprintf(l->self_id, sizeof l->self_id, "%s", self_id);
    snprintf(l->expect, sizeof l->expect, "%s", expect_id ? expect_id : "");
    snprintf(l->addr, sizeof l->addr, "%s:%d", host, port);
    l->secret = *secret;
    l->cbs = *cbs;
    l->arg = arg;
    l->refs = 1;
    l->ac = redisAsyncConnect(host, port);
    if (!l->ac || l->ac->err) {
        keel_log(KEEL_LOG_WARN, "peer_dial_failed", "addr=%s err=\"%s\"", l->addr,
                 l->ac ? l->ac->errstr : "out of memory");
        if (l->ac) redisAsyncFree(l->ac);
        unref(l);
        return NULL;
    }
    if (hiredis_uv_attach(l->ac, loop) != REDIS_OK) {
        redisAsyncFree(l->ac);
        unref(l);
        return NULL;
    }
    l->ac->data = l;
    l->refs++;
    redisAsyncSetConnectCallback(l->ac, on_connect);
    redisAsyncSetDisconnectCallback(l->ac, on_disconnect);
    /* A peer that accepts but never answers (stopped, wedged) must not hold
     * the link in a handshake forever. */
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    l->timer_open = 1;
    l->refs++;
    uv_timer_start(&l->timer, on_handshake_timeout, HANDSHAKE_MS, 0);
    return l;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    pending *p = priv;
    peerlink *l = p->l;
    if (!l->closed && p->cb) p->cb(l->arg, p->tag, reply);
    free(p);
    unref(l);
}

int peerlink_send(peerlink *l, peerlink_reply_fn cb, void *tag, int argc, const char **argv,
                  const size_t *lens) {
    if (!l || l->state != S_READY || !l->ac) return KEEL_EAGAIN;
    pending *p = malloc(sizeof *p);
    if (!p) return KEEL_ENOMEM;
    *p = (pending){l, cb, tag};
    if (redisAsyncCommandArgv(l->ac, on_reply, p, argc, argv, lens) != REDIS_OK) {
        free(p);
        return KEEL_EAGAIN;
    }
    l->refs++;
    return 0;
}

int peerlink_send_oneway(peerlink *l, int argc, const char **argv, const size_t *lens) {
    if (!l || l->state != S_READY || !l->ac) return KEEL_EAGAIN;
    /* As redisAsyncCommand refuses: a context on its way out sends nothing. */
    if (l->ac->c.flags & (REDIS_DISCONNECTING | REDIS_FREEING)) return KEEL_EAGAIN;
    char *cmd = NULL;
    int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (n < 0) return KEEL_ENOMEM;
    /* Into the output buffer with no callback queued: the peer sends no
     * reply, and hiredis would take any reply for the next command's. */
    int rc = redisAppendFormattedCommand(&l->ac->c, cmd, (size_t)n);
    redisFreeCommand(cmd);
    if (rc != REDIS_OK) return KEEL_ENOMEM;
    if (l->ac->ev.addWrite) l->ac->ev.addWrite(l->ac->ev.data);
    return 0;
}

int peerlink_ready(const peerlink *l) {
    return l && l->state == S_READY;
}

void peerlink_push(peerlink *l) {
    if (l && !l->closed && l->state == S_READY && l->ac) redisAsyncHandleWrite(l->ac);
}

const char *peerlink_addr(const peerlink *l) {
    return l ? l->addr : "-";
}

void peerlink_close(peerlink *l) {
    if (!l) return;
    l->closed = 1;
    l->state = S_DOWN;
    stop_timer(l);
    drop_ac(l);
    unref(l);
}
