/* peerserve.c - see peerserve.h. */
#include "net/peerserve.h"
#include "core/coordkey.h"
#include "core/log.h"
#include "resp/resp.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* KEEL.AUTH COORD <sig>: the key proof of a peer that proved "coordinator".
 * Returns 1 if it holds, else 0 with *why set. */
static int coord_proof(peer_conn *p, const char *coord_pub, const char *sig, size_t siglen,
                       const char **why) {
    uint8_t b[PEERAUTH_BINDING_MAX];
    size_t n;
    if (!p->coord_pending) return *why = "out-of-order", 0;
    if (!coord_pub || !coord_pub[0]) return *why = "no-pinned-coordinator-key", 0;
    if (peerauth_binding(p->pa, b, &n)) return *why = "out-of-order", 0;
    if (coordkey_verify(coord_pub, strlen(coord_pub), "client", b, n, sig, siglen))
        return *why = "bad-coordinator-signature", 0;
    return 1;
}

void peerserve_auth(peer_conn *p, client *c, const char *self_id, const peerauth_secret *secret,
                    const char *coord_pub, int argc, char **argv, const size_t *len) {
    if (argc == 4 && !strcasecmp(argv[1], "hello") && !p->pa) {
        p->pa = peerauth_new(PEERAUTH_SERVER, self_id, secret);
        peerauth_challenge ch;
        if (p->pa && peerauth_server_hello(p->pa, argv[2], len[2], argv[3], len[3], &ch) == 0) {
            resp_w_array(&c->out, 3);
            resp_w_bulkstr(&c->out, ch.id);
            resp_w_bulkstr(&c->out, ch.nonce);
            resp_w_bulkstr(&c->out, ch.proof);
            return;
        }
    } else if (argc == 3 && !strcasecmp(argv[1], "proof") && p->pa && !p->peer_id[0] &&
               !p->coord_pending && peerauth_server_proof(p->pa, argv[2], len[2]) == 0) {
        const char *id = peerauth_peer_id(p->pa);
        if (coord_pub && !strcmp(id, PEERSERVE_COORDINATOR_ID)) {
            p->coord_pending = 1; /* the secret is not enough: the key proof is next */
            resp_w_simple(&c->out, "OK");
            return;
        }
        snprintf(p->peer_id, sizeof p->peer_id, "%s", id);
        keel_log(KEEL_LOG_INFO, "peer_authenticated", "peer=%s addr=%s", p->peer_id, c->addr);
        resp_w_simple(&c->out, "OK");
        return;
    } else if (argc == 3 && !strcasecmp(argv[1], "coord") && p->pa) {
        const char *why = NULL;
        if (coord_proof(p, coord_pub, argv[2], len[2], &why)) {
            p->coord_pending = 0;
            snprintf(p->peer_id, sizeof p->peer_id, "%s", PEERSERVE_COORDINATOR_ID);
            keel_log(KEEL_LOG_INFO, "peer_authenticated", "peer=%s addr=%s key=pinned", p->peer_id,
                     c->addr);
            resp_w_simple(&c->out, "OK");
            return;
        }
        p->coord_pending = 0;
        keel_log(KEEL_LOG_WARN, "coordinator_refused", "addr=%s reason=%s", c->addr, why);
        resp_w_error(&c->out, "NOPERM coordinator key not proven");
        rserver_close_after_reply(c);
        return;
    }
    const char *why = p->pa ? peerauth_reason_name(peerauth_reason_of(p->pa)) : "bad-request";
    keel_log(KEEL_LOG_WARN, "peer_auth_failed", "addr=%s reason=%s", c->addr, why);
    resp_w_error(&c->out, "ERR peer authentication failed");
    rserver_close_after_reply(c);
}

const char *peerserve_peer(const peer_conn *p) {
    return p && p->peer_id[0] ? p->peer_id : NULL;
}

void peerserve_close(peer_conn *p, const client *c) {
    if (!p) return;
    /* A peer that gave up mid-handshake: typically it found our proof wrong,
     * i.e. it holds another secret. */
    if (p->pa && !p->peer_id[0] && peerauth_reason_of(p->pa) == PEERAUTH_R_NONE)
        keel_log(KEEL_LOG_WARN, "peer_auth_failed", "addr=%s reason=abandoned", c->addr);
    peerauth_free(p->pa);
    p->pa = NULL;
}
