/* coordlink.c - see coordlink.h. A small state machine over hiredis async:
 *
 *   DOWN --dial--> HELLO --challenge ok--> PROOF --+OK--> COORDKEY --key ok--> REGISTER --+OK-->
 * READY ^                                                                   |
 *     +------ any error, reply error or disconnect (redial after 1 s) ----+
 *
 * READY sends KEEL.HEARTBEAT every heartbeat_ms, one at a time. Each
 * failure moves to the next coordinator address (see next_addr).
 */
#include "node/coordlink.h"
#include "core/audit.h"
#include "core/coordkey.h"
#include "core/directive.h"
#include "core/err.h"
#include "core/log.h"
#include "core/clock.h"
#include "core/notleader.h"
#include "net/hiredis_uv.h"
#include "net/peerlink.h"
#include "net/replyshape.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REDIAL_MS 1000

#define HOST(l) ((l)->coords.a[(l)->cur].host)
#define PORT(l) ((l)->coords.a[(l)->cur].port)

typedef enum { L_DOWN, L_HELLO, L_PROOF, L_COORDKEY, L_REGISTER, L_READY } link_state;

struct coordlink {
    uv_loop_t *loop;
    coordlink_config cfg;
    addrlist coords; /* the coordinator addresses; at least one */
    int cur;         /* the one being dialled or linked */
    int round_fails; /* failures since the last registration, to pace full rounds */
    int redirect;    /* index a standby's -NOTLEADER named, for next_addr; -1 none */
    char self_id[65], adv_host[256], rack[65], incarnation[24];
    char pinned[COORDKEY_PUB_HEX + 1]; /* the coordinator key, "" until the first join */
    peerauth_secret secret;
    coordlink_cbs cbs;
    void *arg;
    redisAsyncContext *ac;
    peerauth *pa;
    link_state state;
    int hb_in_flight;
    int hb_again; /* coordlink_heartbeat_now during one in flight: another after it */
    int stopping;
    int refs;            /* the timer, plus the hiredis context while one exists */
    int fails;           /* consecutive failed attempts, to keep the log readable */
    uint64_t state_ms;   /* when the current dial or heartbeat started (monotonic) */
    uint64_t hb_sent_us; /* when the heartbeat in flight left (keel_mono_us) */
    directive_guard *guard;
    uv_timer_t timer; /* redial in DOWN, heartbeat in READY */
};

static void link_fail(coordlink *l, const char *why, const char *detail);

static void on_timer(uv_timer_t *t);

static void arm(coordlink *l, int ms) {
    if (!l->stopping) uv_timer_start(&l->timer, on_timer, (uint64_t)ms, 0);
}

/* After a failure on the current address: moves to the next one and returns
 * the delay before dialling it - none within a round, REDIAL_MS once every
 * address has failed since the last registration (one address: REDIAL_MS
 * each time, as before lists). */
static int next_addr(coordlink *l) {
    if (l->redirect >= 0) { /* a standby named the leader: go there (core/notleader.h) */
        l->cur = l->redirect;
        l->redirect = -1;
    } else if (l->coords.n > 1)
        l->cur = (l->cur + 1) % l->coords.n;
    if (++l->round_fails < l->coords.n) return 0;
    l->round_fails = 0;
    return REDIAL_MS;
}

static int send_argv(coordlink *l, redisCallbackFn *cb, int argc, const char **argv) {
    return redisAsyncCommandArgv(l->ac, cb, l, argc, argv, NULL);
}

static void on_register(redisAsyncContext *ac, void *r, void *priv);
static void heartbeat_map(coordlink *l, redisReply *r);
static void on_heartbeat(redisAsyncContext *ac, void *r, void *priv);

static void send_register(coordlink *l) {
    char port[16], cap[32];
    snprintf(port, sizeof port, "%d", l->cfg.adv_port);
    snprintf(cap, sizeof cap, "%g", l->cfg.capacity);
    int fresh = l->cbs.fresh ? l->cbs.fresh(l->arg) : 1;
    const char *argv[] = {"KEEL.REGISTER",
                          l->adv_host,
                          port,
                          l->rack[0] ? l->rack : "-",
                          cap,
                          l->incarnation[0] ? l->incarnation : "0",
                          fresh ? "1" : "0"};
    l->state = L_REGISTER;
    send_argv(l, on_register, 7, argv);
}

/* [public-key, signature]: the coordinator's key proof for this handshake. */
static void on_coordkey(redisAsyncContext *ac, void *reply, void *priv) {
    coordlink *l = priv;
    if (l->stopping || l->state == L_DOWN) return;
    redisReply *r = reply;
    uint8_t b[PEERAUTH_BINDING_MAX];
    size_t n;
    if (!reply_shape(r, "ss") || peerauth_binding(l->pa, b, &n) ||
        coordkey_verify(r->element[0]->str, r->element[0]->len, "server", b, n, r->element[1]->str,
                        r->element[1]->len)) {
        keel_log(KEEL_LOG_WARN, "coordinator_refused", "coord=%s:%d reason=key-not-proven", HOST(l),
                 PORT(l));
        link_fail(l, "coordinator-key-not-proven",
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "no valid key proof");
        return;
    }
    const char *pub = r->element[0]->str;
    if (l->pinned[0] && strcasecmp(pub, l->pinned) != 0) {
        keel_log(KEEL_LOG_WARN, "coordinator_refused", "coord=%s:%d reason=key-mismatch key=%.16s",
                 HOST(l), PORT(l), pub);
        link_fail(l, "coordinator-key-mismatch", "not the pinned coordinator key");
        return;
    }
    if (!l->pinned[0]) {
        int rc = l->cbs.pin ? l->cbs.pin(l->arg, pub) : 0;
        if (rc) {
            link_fail(l, "coordinator-key-pin-failed", keel_strerror(rc));
            return;
        }
        snprintf(l->pinned, sizeof l->pinned, "%s", pub);
        keel_log(KEEL_LOG_INFO, "coordinator_key_pinned", "coord=%s:%d key=%s", HOST(l), PORT(l),
                 l->pinned);
    }
    send_register(l);
}

static void on_proof(redisAsyncContext *ac, void *reply, void *priv) {
    coordlink *l = priv;
    if (l->stopping || l->state == L_DOWN) return;
    redisReply *r = reply;
    if (!r || r->type != REDIS_REPLY_STATUS) {
        link_fail(l, "auth-refused", r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
        return;
    }
    const char *argv[] = {"KEEL.AUTH", "COORDKEY"};
    l->state = L_COORDKEY;
    send_argv(l, on_coordkey, 2, argv);
}

static void on_challenge(redisAsyncContext *ac, void *reply, void *priv) {
    coordlink *l = priv;
    if (l->stopping || l->state == L_DOWN) return;
    redisReply *r = reply;
    peerauth_proof proof;
    const char *why;
    if (peerlink_take_challenge(l->pa, r, &proof, &why)) {
        link_fail(l, "coordinator-not-proven", r && r->type == REDIS_REPLY_ERROR ? r->str : why);
        return;
    }
    if (strcmp(peerauth_peer_id(l->pa), COORDINATOR_ID) != 0) {
        link_fail(l, "peer-is-not-the-coordinator", peerauth_peer_id(l->pa));
        return;
    }
    const char *argv[] = {"KEEL.AUTH", "PROOF", proof.proof};
    l->state = L_PROOF;
    send_argv(l, on_proof, 3, argv);
}

static void link_unref(coordlink *l);

static void on_connect(const redisAsyncContext *ac, int status) {
    coordlink *l = ac->data;
    if (!l || l->stopping) return; /* NULL: given up on (link_fail) */
    if (status != REDIS_OK) {      /* hiredis frees the context after this */
        l->ac = NULL;
        l->refs--;
        link_fail(l, "connect-failed", ac->errstr);
        return;
    }
    peerauth_free(l->pa);
    l->pa = peerauth_new(PEERAUTH_CLIENT, l->self_id, &l->secret);
    peerauth_hello h;
    if (!l->pa || peerauth_client_hello(l->pa, &h)) {
        link_fail(l, "auth-setup", "out of memory or randomness");
        return;
    }
    const char *argv[] = {"KEEL.AUTH", "HELLO", h.id, h.nonce};
    l->state = L_HELLO;
    send_argv(l, on_challenge, 4, argv);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    coordlink *l = ac->data;
    if (!l) return;
    l->ac = NULL;
    if (l->stopping) {
        link_unref(l);
        return;
    }
    l->refs--;
    if (l->state != L_DOWN)
        keel_log(KEEL_LOG_WARN, "coord_link_lost", "coord=%s:%d", HOST(l), PORT(l));
    l->state = L_DOWN;
    l->hb_in_flight = 0;
    arm(l, next_addr(l));
}

static void dial(coordlink *l) {
    l->ac = redisAsyncConnect(HOST(l), PORT(l));
    if (!l->ac || l->ac->err) {
        keel_log(KEEL_LOG_WARN, "coord_dial_failed", "coord=%s:%d err=\"%s\"", HOST(l), PORT(l),
                 l->ac ? l->ac->errstr : "out of memory");
        if (l->ac) redisAsyncFree(l->ac);
        l->ac = NULL;
        arm(l, next_addr(l));
        return;
    }
    if (hiredis_uv_attach(l->ac, l->loop) != REDIS_OK) {
        redisAsyncFree(l->ac);
        l->ac = NULL;
        arm(l, next_addr(l));
        return;
    }
    l->ac->data = l;
    l->refs++;
    l->state_ms = keel_mono_us() / 1000;
    redisAsyncSetConnectCallback(l->ac, on_connect);
    redisAsyncSetDisconnectCallback(l->ac, on_disconnect);
    arm(l, l->cfg.heartbeat_ms); /* watches the handshake (on_timer) */
}

/* A standby's -NOTLEADER naming the leader: the next dial goes there (the
 * address is added to the list when it is not in it, room permitting). A
 * redirect counts as one failure of the round, so standbys that name each
 * other (a stale view) still wait REDIAL_MS once per round. */
static void follow_notleader(coordlink *l, const char *detail) {
    addrlist_entry e;
    char id[65];
    if (!detail || notleader_parse(detail, strlen(detail), &e, id, sizeof id)) return;
    int k = addrlist_find_or_add(&l->coords, &e);
    if (k < 0 || k == l->cur) return;
    keel_log(KEEL_LOG_INFO, "coord_redirected", "coord=%s:%d leader=%s to=%s:%d", HOST(l), PORT(l),
             id, e.host, e.port);
    l->redirect = k;
}

static void link_fail(coordlink *l, const char *why, const char *detail) {
    char q[256];
    follow_notleader(l, detail);
    /* Every failure is logged, but a coordinator that stays away costs one
     * WARN line per 30 attempts, not one per second. */
    int level = (l->fails++ % 30) == 0 ? KEEL_LOG_WARN : KEEL_LOG_DEBUG;
    keel_log(level, "coord_link_failed", "coord=%s:%d reason=%s attempt=%d detail=%s", HOST(l),
             PORT(l), why, l->fails,
             keel_log_quote(q, sizeof q, detail ? detail : "", detail ? strlen(detail) : 0));
    l->state = L_DOWN;
    l->hb_in_flight = 0;
    redisAsyncContext *ac = l->ac;
    if (!ac) {
        arm(l, next_addr(l));
        return;
    }
    /* Free, not a graceful disconnect: that would wait for replies a silent
     * coordinator never sends. Pending callbacks run with NULL and return
     * at once (state DOWN); a connected context then calls on_disconnect,
     * which re-arms the dial; an unconnected one never does, so we do. */
    if (!(ac->c.flags & REDIS_CONNECTED)) {
        ac->data = NULL;
        l->ac = NULL;
        l->refs--;
        redisAsyncFree(ac);
        arm(l, next_addr(l));
        return;
    }
    redisAsyncFree(ac);
}

static void send_heartbeat(coordlink *l) {
    if (l->hb_in_flight || !l->ac) return;
    char ver[32];
    snprintf(ver, sizeof ver, "%llu", (unsigned long long)l->cbs.map_version(l->arg));
    kbuf m;
    kbuf_init(&m);
    l->cbs.metrics(l->arg, &m);
    kbuf_append(&m, "", 1);
    const char *argv[] = {"KEEL.HEARTBEAT", ver, m.p ? m.p : "{}"};
    l->hb_in_flight = send_argv(l, on_heartbeat, 3, argv) == REDIS_OK;
    if (l->hb_in_flight) {
        l->hb_sent_us = keel_mono_us();
        l->state_ms = l->hb_sent_us / 1000;
    }
    kbuf_close(&m);
}

static void on_register(redisAsyncContext *ac, void *reply, void *priv) {
    coordlink *l = priv;
    if (l->stopping || l->state == L_DOWN) return;
    redisReply *r = reply;
    if (!r || r->type != REDIS_REPLY_STATUS) {
        link_fail(l, "register-refused", r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
        return;
    }
    keel_log(KEEL_LOG_INFO, "coord_registered", "coord=%s:%d node=%s attempts=%d", HOST(l), PORT(l),
             l->self_id, l->fails + 1);
    l->fails = 0;
    l->round_fails = 0;
    l->state = L_READY;
    send_heartbeat(l);
    arm(l, l->cfg.heartbeat_ms);
}

static void on_heartbeat(redisAsyncContext *ac, void *reply, void *priv) {
    coordlink *l = priv;
    if (l->stopping || l->state == L_DOWN) return;
    redisReply *r = reply;
    l->hb_in_flight = 0;
    /* [term, seq, version, map-json | nil] or, with leases (replication
     * contract C2), [term, seq, version, map-json | nil, lease] */
    int with_lease = reply_shape(r, "iiiSi");
    if ((!with_lease && !reply_shape(r, "iiiS")) || r->element[0]->integer < 0 ||
        r->element[1]->integer < 0 || r->element[2]->integer < 0) {
        link_fail(l, "heartbeat-refused", r && r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        return;
    }
    uint64_t sent_us = l->hb_sent_us, version = (uint64_t)r->element[2]->integer;
    int lease = with_lease && r->element[4]->integer == 1;
    redisReply *map = r->element[3];
    if (map->type == REDIS_REPLY_STRING) heartbeat_map(l, r);
    /* The map callback may stop the link (a fatal store error). */
    if (with_lease && !l->stopping && l->cbs.on_lease)
        l->cbs.on_lease(l->arg, lease, version, sent_us);
    if (l->hb_again && !l->stopping && l->state == L_READY) {
        l->hb_again = 0;
        send_heartbeat(l);
    }
}

/* The map of a heartbeat reply: a directive, admitted through the guard. */
static void heartbeat_map(coordlink *l, redisReply *r) {
    redisReply *map = r->element[3];
    uint64_t term = (uint64_t)r->element[0]->integer, seq = (uint64_t)r->element[1]->integer;
    directive_verdict v = directive_admit(l->guard, 1, term, seq);
    if (v != DIRECTIVE_ACCEPT) {
        keel_log(KEEL_LOG_WARN, "directive_dropped", "reason=%s term=%llu seq=%llu",
                 directive_verdict_name(v), (unsigned long long)term, (unsigned long long)seq);
        return;
    }
    audit_directive("map", term, seq); /* core/audit.h */
    l->cbs.on_map(l->arg, map->str, map->len, term, seq);
}

static void on_timer(uv_timer_t *t) {
    coordlink *l = t->data;
    if (l->stopping) return;
    if (l->state == L_DOWN && !l->ac) {
        dial(l);
        return;
    }
    /* A coordinator that accepted but stopped answering (stopped, wedged,
     * or a connection that died without a reset) is given up on after
     * three heartbeats; the redial finds it again when it is back. */
    uint64_t waited = keel_mono_us() / 1000 - l->state_ms;
    uint64_t limit = 3u * (uint64_t)l->cfg.heartbeat_ms;
    if ((l->state != L_READY || l->hb_in_flight) && waited > limit) {
        link_fail(l, l->state == L_READY ? "heartbeat-timeout" : "handshake-timeout", "no reply");
        return;
    }
    if (l->state == L_READY) {
        send_heartbeat(l);
        arm(l, l->cfg.heartbeat_ms);
    } else {
        arm(l, l->cfg.heartbeat_ms); /* to check the handshake's progress */
    }
}

coordlink *coordlink_start(uv_loop_t *loop, const coordlink_config *cfg,
                           const peerauth_secret *secret, const coordlink_cbs *cbs, void *arg) {
    coordlink *l = calloc(1, sizeof *l);
    if (!l || !(l->guard = directive_guard_new())) {
        free(l);
        return NULL;
    }
    if (cfg->last_term || cfg->last_seq)
        directive_guard_restore(l->guard, cfg->last_term, cfg->last_seq);
    l->loop = loop;
    l->cfg = *cfg;
    if (cfg->coords && cfg->coords->n > 0) {
        l->coords = *cfg->coords;
    } else {
        l->coords.n = 1;
        snprintf(l->coords.a[0].host, sizeof l->coords.a[0].host, "%s", cfg->host);
        l->coords.a[0].port = cfg->port;
    }
    l->cfg.coords = NULL; /* copied above */
    l->redirect = -1;
    snprintf(l->self_id, sizeof l->self_id, "%s", cfg->self_id);
    snprintf(l->adv_host, sizeof l->adv_host, "%s", cfg->adv_host);
    snprintf(l->rack, sizeof l->rack, "%s", cfg->rack ? cfg->rack : "");
    snprintf(l->incarnation, sizeof l->incarnation, "%s", cfg->incarnation ? cfg->incarnation : "");
    l->cfg.incarnation = NULL; /* copied above */
    snprintf(l->pinned, sizeof l->pinned, "%s", cfg->coord_pub ? cfg->coord_pub : "");
    l->cfg.coord_pub = NULL; /* copied above */
    if (l->cfg.heartbeat_ms <= 0) l->cfg.heartbeat_ms = 1000;
    l->secret = *secret;
    l->cbs = *cbs;
    l->arg = arg;
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    l->refs = 1;
    uv_timer_start(&l->timer, on_timer, 0, 0);
    return l;
}

directive_verdict coordlink_check_term(coordlink *l, int from_coordinator, uint64_t term) {
    if (!l) return DIRECTIVE_NOT_COORDINATOR;
    directive_verdict v = directive_admit_term(l->guard, from_coordinator, term);
    if (v == DIRECTIVE_ACCEPT) audit_directive("command", term, 0);
    return v;
}

int coordlink_send(coordlink *l, int argc, const char **argv, const size_t *lens) {
    if (!l || l->state != L_READY || !l->ac) return KEEL_EAGAIN;
    return redisAsyncCommandArgv(l->ac, NULL, NULL, argc, argv, lens) == REDIS_OK ? 0 : KEEL_EAGAIN;
}

typedef struct call_ctx {
    void (*cb)(void *arg, struct redisReply *reply);
    void *arg;
} call_ctx;

static void on_call_reply(redisAsyncContext *ac, void *reply, void *priv) {
    (void)ac;
    call_ctx *k = priv;
    k->cb(k->arg, reply);
    free(k);
}

int coordlink_call(coordlink *l, int argc, const char **argv, const size_t *lens,
                   void (*cb)(void *arg, struct redisReply *reply), void *arg) {
    if (!l || l->state != L_READY || !l->ac) return KEEL_EAGAIN;
    call_ctx *k = malloc(sizeof *k);
    if (!k) return KEEL_ENOMEM;
    k->cb = cb, k->arg = arg;
    if (redisAsyncCommandArgv(l->ac, on_call_reply, k, argc, argv, lens) != REDIS_OK) {
        free(k);
        return KEEL_EAGAIN;
    }
    return 0;
}

void coordlink_heartbeat_now(coordlink *l) {
    if (!l || l->stopping || l->state != L_READY) return;
    if (l->hb_in_flight) {
        l->hb_again = 1;
        return;
    }
    send_heartbeat(l);
}

void coordlink_set_heartbeat_ms(coordlink *l, int ms) {
    if (l && ms > 0) l->cfg.heartbeat_ms = ms;
}

int coordlink_ready(const coordlink *l) {
    return l && l->state == L_READY;
}

static void link_unref(coordlink *l) {
    if (--l->refs > 0) return;
    peerauth_free(l->pa);
    directive_guard_free(l->guard);
    peerauth_secret_wipe(&l->secret);
    free(l);
}

static void on_timer_closed(uv_handle_t *h) {
    link_unref(h->data);
}

void coordlink_stop(coordlink *l, int leave) {
    if (!l || l->stopping) return;
    l->stopping = 1;
    if (l->ac) {
        if (leave && l->state == L_READY) {
            const char *argv[] = {"KEEL.LEAVE"};
            redisAsyncCommandArgv(l->ac, NULL, NULL, 1, argv, NULL);
        }
        redisAsyncDisconnect(l->ac); /* after pending replies; on_disconnect unrefs */
    }
    uv_close((uv_handle_t *)&l->timer, on_timer_closed);
}
