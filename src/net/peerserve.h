/* peerserve.h - the server side of KEEL.AUTH on an rserver connection.
 *
 * Both the coordinator and the nodes accept cluster peers on their RESP port:
 * a peer proves the cluster secret with the mutual handshake of core/peerauth
 * (KEEL.AUTH HELLO <id> <nonce>, then KEEL.AUTH PROOF <proof>), after which
 * the connection's identity is the id it proved. Nothing else about a peer is
 * trusted: ids inside later commands never override it.
 *
 * The owner keeps one peer_conn per connection (zeroed to start), passes
 * KEEL.AUTH commands to peerserve_auth, asks peerserve_peer before running a
 * peer command, and calls peerserve_close when the connection closes.
 *
 * Threads: the loop thread of the rserver.
 */
#ifndef KEEL_PEERSERVE_H
#define KEEL_PEERSERVE_H

#include <stddef.h>

#include "core/peerauth.h"
#include "net/rserver.h"

/* The id only the coordinator may hold: proving it takes the cluster secret
 * and, where a coordinator key is pinned, a signature with that key
 * (core/coordkey.h). */
#define PEERSERVE_COORDINATOR_ID "coordinator"

typedef struct peer_conn {
    peerauth *pa;
    char peer_id[PEERAUTH_ID_MAX + 1]; /* set once authenticated */
    int coord_pending; /* proved "coordinator" with the secret; the key proof is due */
} peer_conn;

/* Runs one KEEL.AUTH step for client c and appends its reply to c->out:
 * the challenge, +OK, or an error (after which c is closed: one guess per
 * connection). self_id is the id we prove; argv[0] is "KEEL.AUTH".
 *
 * coord_pub: NULL where no peer may be the coordinator by key (the
 * coordinator itself), else the pinned coordinator public key in hex ("" if
 * none is pinned yet). A peer that proves the id "coordinator" with the
 * secret is then not yet authenticated: it must send KEEL.AUTH COORD <sig>,
 * an Ed25519 signature of this handshake's binding with the pinned key
 * (label "client", core/coordkey.h). Without a pinned key, or with a wrong
 * signature, it is refused and the connection closed: the secret alone
 * never makes a peer the coordinator. */
void peerserve_auth(peer_conn *p, client *c, const char *self_id, const peerauth_secret *secret,
                    const char *coord_pub, int argc, char **argv, const size_t *len);
/* The proven peer id, or NULL while the handshake has not succeeded. */
const char *peerserve_peer(const peer_conn *p);
/* Logs a handshake the peer abandoned, and frees the handshake state. */
void peerserve_close(peer_conn *p, const client *c);

/* The reply for a peer command on a connection that has not authenticated. */
#define PEERSERVE_NOPERM "NOPERM this command needs an authenticated cluster peer (KEEL.AUTH)"

#endif
