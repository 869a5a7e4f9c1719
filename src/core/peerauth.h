/* peerauth.h - peer authentication over the cluster secret (DESIGN.md §9).
 *
 * Two parts, both free of sockets and event loops:
 *
 *  - The cluster secret: 32 random bytes kept in a file as 64 hex characters
 *    and a newline, mode 0600. peerauth_secret_generate / _write / _load.
 *
 *  - The handshake: HMAC-SHA256 challenge and response with a fresh 32-byte
 *    nonce from each side. One peerauth object per connection side, created
 *    with a role. The caller carries the messages (plain structs of
 *    NUL-terminated strings) in RESP commands and feeds the peer's fields
 *    back in exactly as received (pointer and length, possibly binary):
 *
 *        client                                        server
 *        peerauth_client_hello()      HELLO id_c nonce_c      ->
 *                                 <-  CHALLENGE id_s nonce_s proof_s
 *                                                  peerauth_server_hello()
 *        peerauth_client_challenge()  PROOF proof_c           ->
 *                                                  peerauth_server_proof()
 *
 *    proof_s = HMAC(secret, "keel-auth-v1|server|" || lp(id_s) || lp(id_c)
 *                           || nonce_c || nonce_s)
 *    proof_c = HMAC(secret, "keel-auth-v1|client|" || lp(id_c) || lp(id_s)
 *                           || nonce_s || nonce_c)
 *    where lp(x) is one length byte followed by the bytes of x, and nonces are
 *    the 32 raw bytes (not hex). docs/security.md has the full description.
 *
 * The server proves first, so a client reveals a proof only to a peer that
 * already showed it holds the secret; the labels keep a server proof from
 * passing as a client proof. Every step is one-shot: a malformed, out-of-order
 * or failed step kills the object (every later call fails with the same
 * reason), so a peer gets one guess per challenge. Peer input never asserts.
 *
 * Identity: peerauth_peer_id() returns the id the peer proved, and only once
 * the handshake has succeeded. That id is the identity of the connection;
 * ids inside later payloads must not override it.
 *
 * Threads: a peerauth object belongs to one connection and must not be used
 * from two threads at once. The secret functions are reentrant.
 */
#ifndef KEEL_PEERAUTH_H
#define KEEL_PEERAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define PEERAUTH_SECRET_LEN 32
#define PEERAUTH_NONCE_LEN 32
#define PEERAUTH_MAC_LEN 32
#define PEERAUTH_HEX_LEN 64 /* hex of a secret, nonce or proof */
#define PEERAUTH_ID_MAX 64  /* matches the node's --id limit */

/* ---- Cluster secret -------------------------------------------------- */

/* A plain value; wipe it with peerauth_secret_wipe when done. */
typedef struct peerauth_secret {
    uint8_t key[PEERAUTH_SECRET_LEN];
} peerauth_secret;

/* Fills *out with 32 bytes from getrandom(2).
 * Returns 0, or KEEL_EIO if the kernel cannot supply them. */
int peerauth_secret_generate(peerauth_secret *out);

/* Creates path with mode 0600 and writes the secret as 64 lowercase hex
 * characters and "\n", then fsyncs the file and its directory. Never
 * overwrites: an existing path (even a dangling symlink) gives KEEL_EEXIST.
 * On any failure nothing is left at path.
 * Returns 0, KEEL_EEXIST, or KEEL_EIO; on error a one-line reason naming the
 * path is written into err[0..errcap) (err may be NULL). */
int peerauth_secret_write(const char *path, const peerauth_secret *s, char *err, size_t errcap);

/* Reads a secret file written by peerauth_secret_write. The file must be a
 * regular file (symlinks to one are followed) with no permission bits for
 * group or others, holding exactly 64 hex characters (either case) with an
 * optional single trailing "\n".
 * Returns 0 with *out set, KEEL_ENOTFOUND (no such file), KEEL_EINVAL (bad
 * permissions, length or characters), or KEEL_EIO; on error *out is zeroed
 * and a one-line reason naming the path is written into err (may be NULL). */
int peerauth_secret_load(const char *path, peerauth_secret *out, char *err, size_t errcap);

/* Overwrites the key bytes in a way the compiler cannot elide. */
void peerauth_secret_wipe(peerauth_secret *s);

/* ---- Handshake ------------------------------------------------------- */

typedef enum { PEERAUTH_CLIENT = 1, PEERAUTH_SERVER } peerauth_role;

/* Why a handshake failed, for logs: X(name, log name, KEEL_E* returned).
 * One table, so names and codes cannot disagree. */
#define PEERAUTH_REASON_MAP(X)                                                                     \
    X(NONE, "none", 0)                       /* nothing failed */                                  \
    X(ORDER, "out-of-order", KEEL_EPROTO)    /* step in the wrong state or role */                 \
    X(BAD_ID, "bad-peer-id", KEEL_EINVAL)    /* empty, too long or bad characters */               \
    X(BAD_HEX, "bad-hex", KEEL_EINVAL)       /* nonce or proof not 64 hex chars */                 \
    X(SAME_ID, "own-id", KEEL_EPROTO)        /* peer claims our id: reflection */                  \
    X(NONCE, "reflected-nonce", KEEL_EPROTO) /* peer nonce equals ours */                          \
    X(BAD_PROOF, "bad-proof", KEEL_EPROTO)   /* wrong secret or tampered message */                \
    X(RANDOM, "no-randomness", KEEL_EIO)     /* getrandom failed */                                \
    X(CRYPTO, "hmac-failed", KEEL_ENOMEM)    /* OpenSSL HMAC failed */

typedef enum {
#define PEERAUTH_REASON_ENUM(name, str, code) PEERAUTH_R_##name,
    PEERAUTH_REASON_MAP(PEERAUTH_REASON_ENUM)
#undef PEERAUTH_REASON_ENUM
} peerauth_reason;

/* Message 1, client -> server. Fields are NUL-terminated. */
typedef struct peerauth_hello {
    char id[PEERAUTH_ID_MAX + 1];
    char nonce[PEERAUTH_HEX_LEN + 1];
} peerauth_hello;

/* Message 2, server -> client. */
typedef struct peerauth_challenge {
    char id[PEERAUTH_ID_MAX + 1];
    char nonce[PEERAUTH_HEX_LEN + 1];
    char proof[PEERAUTH_HEX_LEN + 1];
} peerauth_challenge;

/* Message 3, client -> server. */
typedef struct peerauth_proof {
    char proof[PEERAUTH_HEX_LEN + 1];
} peerauth_proof;

typedef struct peerauth peerauth;

/* Returns 1 if id[0..len) is a valid peer id: the one id rule of core/id.h,
 * [A-Za-z0-9._-]{1,64} (the node's --id rule too). */
int peerauth_id_valid(const char *id, size_t len);

/* Creates one side of a handshake. self_id is our own id (copied; must pass
 * peerauth_id_valid); *secret is copied and wiped again by peerauth_free.
 * Returns NULL on out-of-memory or an invalid role or self_id. */
peerauth *peerauth_new(peerauth_role role, const char *self_id, const peerauth_secret *secret);
/* Wipes the secret and frees. NULL is a no-op. */
void peerauth_free(peerauth *a);

/* Client, step 1: draws nonce_c and fills *out with the HELLO to send.
 * Returns 0, KEEL_EPROTO (not a fresh client object) or KEEL_EIO (no
 * randomness); on error *out is left zeroed and the object is dead. */
int peerauth_client_hello(peerauth *a, peerauth_hello *out);

/* Server, step 2: takes the client's HELLO fields as received, draws
 * nonce_s and fills *out with the CHALLENGE to send. Inputs are borrowed
 * for the call only and need not be NUL-terminated.
 * Returns 0, KEEL_EINVAL (malformed id or nonce), KEEL_EPROTO (wrong state
 * or role, our own id, or our own nonce), KEEL_EIO (no randomness) or
 * KEEL_ENOMEM (HMAC failed). On any error the object is dead and
 * peerauth_reason_of() says why. */
int peerauth_server_hello(peerauth *a, const char *id, size_t idlen, const char *nonce_hex,
                          size_t noncelen, peerauth_challenge *out);

/* Client, step 3: checks the server's CHALLENGE and, if proof_s is right,
 * fills *out with the PROOF to send. On success the server is authenticated
 * (peerauth_peer_id gives id_s). Returns 0, KEEL_EINVAL (malformed field),
 * KEEL_EPROTO (wrong state or role, our own id or nonce echoed back, or a
 * wrong proof) or KEEL_ENOMEM; any error kills the object. */
int peerauth_client_challenge(peerauth *a, const char *id, size_t idlen, const char *nonce_hex,
                              size_t noncelen, const char *proof_hex, size_t prooflen,
                              peerauth_proof *out);

/* Server, step 4: checks the client's PROOF. On success the client is
 * authenticated as the id from its HELLO. Returns 0, KEEL_EINVAL (not 64 hex
 * characters), KEEL_EPROTO (wrong state or role, or a wrong proof) or
 * KEEL_ENOMEM; any error kills the object. */
int peerauth_server_proof(peerauth *a, const char *proof_hex, size_t prooflen);

/* Bytes that name one completed handshake: lp(id_c) || lp(id_s) || nonce_c
 * || nonce_s (the client's id and nonce first, whichever side asks). Fresh
 * nonces make it unique to the connection, so a signature over it (the
 * coordinator key, core/coordkey.h) cannot be replayed on another one. */
#define PEERAUTH_BINDING_MAX (2 * (1 + PEERAUTH_ID_MAX) + 2 * PEERAUTH_NONCE_LEN)
/* Writes the binding into out (PEERAUTH_BINDING_MAX bytes) and its length
 * into *n. Returns 0, or KEEL_EPROTO before the handshake has succeeded. */
int peerauth_binding(const peerauth *a, uint8_t *out, size_t *n);

/* 1 once this side has verified the peer's proof, else 0. */
int peerauth_is_authenticated(const peerauth *a);
/* The id the peer proved: NUL-terminated, owned by a, valid until
 * peerauth_free. NULL until peerauth_is_authenticated(a). */
const char *peerauth_peer_id(const peerauth *a);
/* Why the object died, or PEERAUTH_R_NONE. */
peerauth_reason peerauth_reason_of(const peerauth *a);
/* Static kebab-case name of a reason for logs, e.g. "bad-proof". Never NULL. */
const char *peerauth_reason_name(peerauth_reason r);

#endif
