/* coordkey.h - the coordinator's Ed25519 key (issue 10, defect 6;
 * docs/security.md).
 *
 * The cluster secret proves membership, not role: every node holds it, so
 * with the secret alone a node could prove the id "coordinator" and send
 * directives, or raise the term guard and lock the real coordinator out. The
 * coordinator therefore also holds an Ed25519 key pair (OpenSSL EVP), made
 * by `keel coord --init` as coord.key (32-byte seed, hex, mode 0600, the
 * cluster secret's file format) and coord.pub (hex, for operators) next to
 * cluster.secret. A node pins the public half at its first join (its
 * metadata, "coord_pubkey") and from then on accepts the coordinator role
 * only from a peer that signs the fresh handshake it just completed
 * (peerauth_binding: both ids and both nonces) with the pinned key:
 *
 *   sig = Ed25519(key, "keel-coordkey-v1|" label "|" binding)
 *
 * label "server" when the coordinator answers a node's own link, "client"
 * when the coordinator dials a node to send move directives. The nonces
 * make every signature good for one connection only.
 *
 * Threads: a coordkey is immutable after load; the functions are reentrant.
 */
#ifndef KEEL_COORDKEY_H
#define KEEL_COORDKEY_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define COORDKEY_PUB_LEN 32
#define COORDKEY_PUB_HEX 64
#define COORDKEY_SIG_LEN 64
#define COORDKEY_SIG_HEX 128

typedef struct coordkey coordkey;

/* Makes a new key pair: key_path (mode 0600, never overwritten: KEEL_EEXIST)
 * and pub_path (mode 0644, the public half in hex). Returns 0, KEEL_EEXIST,
 * KEEL_EIO or KEEL_ENOMEM, with a one-line reason in err. */
KEEL_MUST_CHECK int coordkey_create(const char *key_path, const char *pub_path, char *err,
                                    size_t cap);

/* Loads key_path (the format and permission checks of
 * peerauth_secret_load). *out is freed with coordkey_free. Returns 0,
 * KEEL_ENOTFOUND, KEEL_EINVAL, KEEL_EIO or KEEL_ENOMEM, reason in err. */
KEEL_MUST_CHECK int coordkey_load(const char *key_path, coordkey **out, char *err, size_t cap);
void coordkey_free(coordkey *k);

/* The public half as 64 lowercase hex characters and a NUL. */
void coordkey_public_hex(const coordkey *k, char out[COORDKEY_PUB_HEX + 1]);

/* Signs "keel-coordkey-v1|" label "|" binding[0..n) into sig_hex (128 hex
 * characters and a NUL). Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_CHECK int coordkey_sign(const coordkey *k, const char *label, const uint8_t *binding,
                                  size_t n, char sig_hex[COORDKEY_SIG_HEX + 1]);

/* Checks sig_hex[0..siglen) against pub_hex[0..publen) for that message.
 * Returns 0 (good), KEEL_EINVAL (malformed key or signature) or
 * KEEL_EPROTO (the signature does not verify). */
KEEL_MUST_CHECK int coordkey_verify(const char *pub_hex, size_t publen, const char *label,
                                    const uint8_t *binding, size_t n, const char *sig_hex,
                                    size_t siglen);

/* 1 if hex[0..len) is 64 lowercase or uppercase hex characters. */
int coordkey_pub_valid(const char *hex, size_t len);

#endif
