/* peerlink.h - an authenticated RESP client connection to a cluster peer.
 *
 * One peerlink is one TCP connection (hiredis async on the caller's libuv
 * loop) that first runs the client side of the KEEL.AUTH handshake
 * (core/peerauth) as self_id and checks that the peer proved the expected id.
 * Used by a node to reach the coordinator and other nodes (a move's data
 * path), and by the coordinator to push directives to nodes.
 *
 * Life cycle: peerlink_open dials at once. on_ready runs once the peer is
 * proven; on_down runs once if the connection fails or is lost at any point
 * (before or after ready). After on_down the link is dead: the owner calls
 * peerlink_close and, if it wants, opens a new one. Commands may be sent only
 * while ready; their callbacks run in order. When the link goes down or is
 * closed, the callbacks of commands still in flight run with reply NULL -
 * unless the link was closed, in which case they do not run at all, so an
 * owner may free its state right after peerlink_close.
 *
 * Threads: the loop thread.
 */
#ifndef KEEL_PEERLINK_H
#define KEEL_PEERLINK_H

#include <stddef.h>
#include <uv.h>

#include "core/peerauth.h"

struct redisReply;
typedef struct peerlink peerlink;

typedef struct peerlink_cbs {
    void (*on_ready)(void *arg, peerlink *l);
    void (*on_down)(void *arg, peerlink *l, const char *why);
    /* Optional (the coordinator): after the secret handshake, the link also
     * proves the coordinator key with KEEL.AUTH COORD <sig> before it is
     * ready. Signs the handshake binding (peerauth_binding) into sig_hex
     * (129 bytes); returns 0 or a negative KEEL_E*. */
    int (*sign)(void *arg, const unsigned char *binding, size_t n, char *sig_hex);
} peerlink_cbs;

/* reply is NULL when the link went down before the reply arrived. It is
 * valid for the call only. */
typedef void (*peerlink_reply_fn)(void *arg, void *tag, struct redisReply *reply);

/* Dials host:port. expect_id: the id the peer must prove (NULL accepts any
 * proven id). Strings and *secret are copied. NULL on out-of-memory or an
 * immediate dial failure (logged). */
peerlink *peerlink_open(uv_loop_t *loop, const char *host, int port, const char *self_id,
                        const char *expect_id, const peerauth_secret *secret,
                        const peerlink_cbs *cbs, void *arg);
/* Sends one command (binary-safe argv; lens NULL = strlen). cb(arg, tag,
 * reply) runs with the reply, or NULL if the link goes down first; cb may be
 * NULL to ignore the reply. Returns 0, or KEEL_EAGAIN when not ready. */
int peerlink_send(peerlink *l, peerlink_reply_fn cb, void *tag, int argc, const char **argv,
                  const size_t *lens);
/* Sends one command the peer answers with nothing (a protocol both ends
 * agreed on first, as KEEL.REP.ONEWAY): no callback is queued, so a reply
 * would be taken for the next command's. In order with peerlink_send.
 * Returns 0, KEEL_EAGAIN when not ready, KEEL_ENOMEM. */
int peerlink_send_oneway(peerlink *l, int argc, const char **argv, const size_t *lens);
int peerlink_ready(const peerlink *l);
/* Writes what peerlink_send queued to the socket now (as much as it takes),
 * instead of at the loop's next writable event: for a caller about to block
 * (a leader's batch leaves before its own fsync). No-op unless ready. */
void peerlink_push(peerlink *l);
/* The peer's "host:port", for logs. */
const char *peerlink_addr(const peerlink *l);
/* The client's step 3 of KEEL.AUTH on a hiredis reply: checks that r is the
 * server's CHALLENGE [id, nonce, proof] and that the proof holds (then the
 * server is authenticated as peerauth_peer_id(pa)), and fills *out with our
 * PROOF. Returns 0, or -1 with *why set to a static reason. Shared by
 * peerlink and the node's coordinator link. */
int peerlink_take_challenge(peerauth *pa, const struct redisReply *r, peerauth_proof *out,
                            const char **why);

/* Disconnects (pending callbacks never run) and frees once the loop has
 * released the connection. NULL is a no-op. */
void peerlink_close(peerlink *l);

#endif
