/* peerserve.c - see peerserve.h. */
#include "net/peerserve.h"
#include "core/log.h"
#include "resp/resp.h"

#include <stdio.h>
#include <strings.h>

void peerserve_auth(peer_conn *p, client *c, const char *self_id, const peerauth_secret *secret,
                    int argc, char **argv, const size_t *len) {
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
    } else if (argc == 3 && !strcasecmp(argv[1], "proof") && p->pa &&
               peerauth_server_proof(p->pa, argv[2], len[2]) == 0) {
        snprintf(p->peer_id, sizeof p->peer_id, "%s", peerauth_peer_id(p->pa));
        keel_log(KEEL_LOG_INFO, "peer_authenticated", "peer=%s addr=%s", p->peer_id, c->addr);
        resp_w_simple(&c->out, "OK");
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
