/* coordkey.c - the coordinator's Ed25519 key; see coordkey.h.
 *
 * The private key is stored as its 32-byte seed in the cluster secret's
 * file format, so peerauth_secret_write/_load do the careful file handling
 * (0600, no overwrite, fsync, permission check on load). Signing and
 * verifying use OpenSSL's one-shot EVP_DigestSign/Verify, as Ed25519
 * requires.
 */
#include "core/coordkey.h"
#include "core/peerauth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LABEL_PREFIX "keel-coordkey-v1|"

struct coordkey {
    EVP_PKEY *pkey;
    uint8_t pub[COORDKEY_PUB_LEN];
};

static void hex_encode(const uint8_t *in, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[2 * n] = 0;
}

static int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Exactly 2n hex characters into out[0..n). */
static int hex_decode(const char *s, size_t len, uint8_t *out, size_t n) {
    if (!s || len != 2 * n) return -1;
    for (size_t i = 0; i < n; i++) {
        int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int coordkey_pub_valid(const char *hex, size_t len) {
    uint8_t b[COORDKEY_PUB_LEN];
    return hex_decode(hex, len, b, sizeof b) == 0;
}

/* The signed message: prefix, label, "|", binding. Returns its length or 0. */
static size_t message(const char *label, const uint8_t *binding, size_t n, uint8_t *out,
                      size_t cap) {
    size_t pl = strlen(LABEL_PREFIX), ll = strlen(label);
    if (pl + ll + 1 + n > cap) return 0;
    memcpy(out, LABEL_PREFIX, pl);
    memcpy(out + pl, label, ll);
    out[pl + ll] = '|';
    memcpy(out + pl + ll + 1, binding, n);
    return pl + ll + 1 + n;
}

static int from_seed(const peerauth_secret *seed, coordkey **out) {
    coordkey *k = calloc(1, sizeof *k);
    if (!k) return KEEL_ENOMEM;
    k->pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed->key, sizeof seed->key);
    size_t pl = sizeof k->pub;
    if (!k->pkey || EVP_PKEY_get_raw_public_key(k->pkey, k->pub, &pl) != 1 || pl != sizeof k->pub) {
        coordkey_free(k);
        return KEEL_ENOMEM;
    }
    *out = k;
    return 0;
}

int coordkey_create(const char *key_path, const char *pub_path, char *err, size_t cap) {
    peerauth_secret seed;
    int rc = peerauth_secret_generate(&seed);
    if (rc) return keel_errf(err, cap, rc, "no randomness for the coordinator key");
    if ((rc = peerauth_secret_write(key_path, &seed, err, cap))) {
        peerauth_secret_wipe(&seed);
        return rc;
    }
    coordkey *k = NULL;
    rc = from_seed(&seed, &k);
    peerauth_secret_wipe(&seed);
    if (rc) {
        unlink(key_path);
        return keel_errf(err, cap, rc, "cannot make an Ed25519 key (OpenSSL)");
    }
    char hex[COORDKEY_PUB_HEX + 2];
    coordkey_public_hex(k, hex);
    coordkey_free(k);
    strcat(hex, "\n");
    int fd = open(pub_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, hex, strlen(hex)) != (ssize_t)strlen(hex) || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        unlink(key_path);
        if (fd >= 0) unlink(pub_path);
        return keel_errf(err, cap, e == EEXIST ? KEEL_EEXIST : KEEL_EIO, "cannot write %s: %s",
                         pub_path, strerror(e));
    }
    close(fd);
    return 0;
}

int coordkey_load(const char *key_path, coordkey **out, char *err, size_t cap) {
    *out = NULL;
    peerauth_secret seed;
    int rc = peerauth_secret_load(key_path, &seed, err, cap);
    if (rc) return rc;
    rc = from_seed(&seed, out);
    peerauth_secret_wipe(&seed);
    if (rc) return keel_errf(err, cap, rc, "cannot load the Ed25519 key in %s", key_path);
    return 0;
}

void coordkey_free(coordkey *k) {
    if (!k) return;
    EVP_PKEY_free(k->pkey);
    OPENSSL_cleanse(k, sizeof *k);
    free(k);
}

void coordkey_public_hex(const coordkey *k, char out[COORDKEY_PUB_HEX + 1]) {
    hex_encode(k->pub, sizeof k->pub, out);
}

int coordkey_sign(const coordkey *k, const char *label, const uint8_t *binding, size_t n,
                  char sig_hex[COORDKEY_SIG_HEX + 1]) {
    uint8_t msg[512], sig[COORDKEY_SIG_LEN];
    size_t ml = message(label, binding, n, msg, sizeof msg), sl = sizeof sig;
    if (!ml) return KEEL_EINVAL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
             EVP_DigestSign(ctx, sig, &sl, msg, ml) == 1 && sl == sizeof sig;
    EVP_MD_CTX_free(ctx);
    if (!ok) return KEEL_ENOMEM;
    hex_encode(sig, sizeof sig, sig_hex);
    return 0;
}

int coordkey_verify(const char *pub_hex, size_t publen, const char *label, const uint8_t *binding,
                    size_t n, const char *sig_hex, size_t siglen) {
    uint8_t pub[COORDKEY_PUB_LEN], sig[COORDKEY_SIG_LEN], msg[512];
    if (hex_decode(pub_hex, publen, pub, sizeof pub) ||
        hex_decode(sig_hex, siglen, sig, sizeof sig))
        return KEEL_EINVAL;
    size_t ml = message(label, binding, n, msg, sizeof msg);
    if (!ml) return KEEL_EINVAL;
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, sizeof pub);
    EVP_MD_CTX *ctx = pk ? EVP_MD_CTX_new() : NULL;
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pk) == 1 &&
             EVP_DigestVerify(ctx, sig, sizeof sig, msg, ml) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pk);
    return ok ? 0 : KEEL_EPROTO;
}
