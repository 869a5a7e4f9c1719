/* peerauth.c - cluster secret file and the HMAC handshake; see peerauth.h.
 *
 * Handshake state per side (any failure goes to DEAD and stays there):
 *
 *   client: FRESH --client_hello--> SENT_HELLO --client_challenge--> DONE
 *   server: FRESH --server_hello--> SENT_CHALLENGE --server_proof--> DONE
 *
 * Invariants:
 *  - peer_id is published (peerauth_peer_id) only in DONE, i.e. only after
 *    this side checked a MAC that covers it.
 *  - Each object draws one nonce and verifies at most one proof against it,
 *    so a peer gets a single guess per challenge and cannot replay an old
 *    transcript (the verifier's nonce is always fresh).
 *  - A prover always MACs (its label, its id, the verifier's id, the
 *    verifier's nonce, its own nonce); the label ("server" or "client")
 *    is what keeps one role's proof from being reflected as the other's.
 *  - Proofs are compared with CRYPTO_memcmp. The object's copy of the secret
 *    is wiped as soon as it reaches DONE or DEAD, and expected proofs and
 *    secret-file text are wiped after use (OPENSSL_cleanse).
 */
#include "core/peerauth.h"
#include "core/err.h"
#include "core/id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define LABEL_SERVER "keel-auth-v1|server|"
#define LABEL_CLIENT "keel-auth-v1|client|"
#define SECRET_FILE_LEN (PEERAUTH_HEX_LEN + 1) /* hex and "\n" */

_Static_assert(PEERAUTH_ID_MAX <= 255, "peer ids are length-prefixed with one byte");
_Static_assert(sizeof LABEL_SERVER == sizeof LABEL_CLIENT, "make_proof sizes msg by one label");

enum { ST_FRESH, ST_SENT_HELLO, ST_SENT_CHALLENGE, ST_DONE, ST_DEAD };

struct peerauth {
    peerauth_role role;
    int state; /* ST_* */
    peerauth_reason why;
    peerauth_secret secret;
    char self_id[PEERAUTH_ID_MAX + 1];
    size_t self_len;
    char peer_id[PEERAUTH_ID_MAX + 1]; /* claimed until DONE, proven after */
    size_t peer_len;
    uint8_t my_nonce[PEERAUTH_NONCE_LEN];
    uint8_t peer_nonce[PEERAUTH_NONCE_LEN];
};

/* ---- Hex and randomness ------------------------------------------------ */

static void hex_encode(const uint8_t *in, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_nibble(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes exactly 2n hex characters into out[0..n). Returns 0 or -1. */
static int hex_decode(const char *in, size_t len, uint8_t *out, size_t n) {
    if (!in || len != 2 * n) return -1;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_nibble((unsigned char)in[2 * i]);
        int lo = hex_nibble((unsigned char)in[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Fills buf from getrandom(2), retrying on EINTR and short reads. */
static int fill_random(uint8_t *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return KEEL_EIO;
        got += (size_t)r;
    }
    return 0;
}

/* ---- Secret file ------------------------------------------------------- */

int peerauth_secret_generate(peerauth_secret *out) {
    int rc = fill_random(out->key, sizeof out->key);
    if (rc) OPENSSL_cleanse(out, sizeof *out);
    return rc;
}

void peerauth_secret_wipe(peerauth_secret *s) {
    if (s) OPENSSL_cleanse(s, sizeof *s);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsyncs the directory holding path so the new name survives a crash. */
static int fsync_parent(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path); /* keep "/" for "/x" */
        if (n >= sizeof dir) return -1;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int peerauth_secret_write(const char *path, const peerauth_secret *s, char *err, size_t errcap) {
    char text[SECRET_FILE_LEN + 1];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return keel_errf(err, errcap, KEEL_EEXIST,
                         "secret file %s already exists; refusing to overwrite it", path);
    if (fd < 0)
        return keel_errf(err, errcap, KEEL_EIO, "cannot create secret file %s: %s", path,
                         strerror(errno));
    hex_encode(s->key, sizeof s->key, text);
    text[PEERAUTH_HEX_LEN] = '\n';
    /* fchmod: the umask may have cleared bits of 0600, never added any. */
    if (fchmod(fd, 0600) || write_all(fd, text, SECRET_FILE_LEN) || fsync(fd)) goto fail;
    OPENSSL_cleanse(text, sizeof text);
    int closed = close(fd);
    fd = -1;
    if (closed || fsync_parent(path)) goto fail;
    return 0;
fail:;
    int saved = errno;
    OPENSSL_cleanse(text, sizeof text);
    if (fd >= 0) close(fd);
    unlink(path); /* we created it with O_EXCL, so it is ours to remove */
    return keel_errf(err, errcap, KEEL_EIO, "cannot write secret file %s: %s", path,
                     strerror(saved));
}

/* Opens path for reading and checks that it is a private regular file. */
static int open_private(const char *path, char *err, size_t cap) {
    /* O_NONBLOCK so a FIFO planted at path cannot hang the open. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return keel_errf(err, cap, KEEL_ENOTFOUND, "secret file %s does not exist", path);
    if (fd < 0)
        return keel_errf(err, cap, KEEL_EIO, "cannot open secret file %s: %s", path,
                         strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st))
        rc = keel_errf(err, cap, KEEL_EIO, "cannot stat secret file %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = keel_errf(err, cap, KEEL_EINVAL, "secret file %s is not a regular file", path);
    else if (st.st_mode & 077)
        rc = keel_errf(err, cap, KEEL_EINVAL,
                       "secret file %s has mode %04o; group and others must have no access "
                       "(chmod 600 %s)",
                       path, (unsigned)(st.st_mode & 07777), path);
    if (rc) close(fd);
    return rc ? rc : fd;
}

/* Reads up to cap bytes; returns the count or -1. */
static ssize_t read_upto(int fd, char *buf, size_t cap) {
    size_t got = 0;
    while (got < cap) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int peerauth_secret_load(const char *path, peerauth_secret *out, char *err, size_t errcap) {
    char text[SECRET_FILE_LEN + 2]; /* room to notice a file that is too long */
    memset(out, 0, sizeof *out);
    int fd = open_private(path, err, errcap);
    if (fd < 0) return fd;
    ssize_t n = read_upto(fd, text, sizeof text);
    int saved = errno;
    close(fd);
    int rc = 0;
    if (n < 0)
        rc = keel_errf(err, errcap, KEEL_EIO, "cannot read secret file %s: %s", path,
                       strerror(saved));
    else if (n != PEERAUTH_HEX_LEN && !(n == SECRET_FILE_LEN && text[PEERAUTH_HEX_LEN] == '\n'))
        rc = keel_errf(err, errcap, KEEL_EINVAL,
                       "secret file %s must hold 64 hex characters and a newline, found %s%zd "
                       "bytes",
                       path, n == (ssize_t)sizeof text ? "at least " : "", n);
    else if (hex_decode(text, PEERAUTH_HEX_LEN, out->key, sizeof out->key))
        rc = keel_errf(err, errcap, KEEL_EINVAL,
                       "secret file %s holds a character that is not a hex digit", path);
    OPENSSL_cleanse(text, sizeof text);
    if (rc) peerauth_secret_wipe(out);
    return rc;
}

/* ---- Handshake --------------------------------------------------------- */

int peerauth_id_valid(const char *id, size_t len) {
    return len <= PEERAUTH_ID_MAX && keel_id_valid(id, len); /* the one id rule */
}

static const char *const reason_names[] = {
#define PEERAUTH_REASON_STR(name, str, code) [PEERAUTH_R_##name] = str,
    PEERAUTH_REASON_MAP(PEERAUTH_REASON_STR)
#undef PEERAUTH_REASON_STR
};

static const int reason_codes[] = {
#define PEERAUTH_REASON_CODE(name, str, code) [PEERAUTH_R_##name] = code,
    PEERAUTH_REASON_MAP(PEERAUTH_REASON_CODE)
#undef PEERAUTH_REASON_CODE
};

const char *peerauth_reason_name(peerauth_reason r) {
    size_t i = (size_t)r;
    return i < sizeof reason_names / sizeof *reason_names ? reason_names[i] : "unknown";
}

/* Kills the handshake for reason r and returns its KEEL_E* code. The first
 * reason sticks, so later calls report what actually went wrong. */
static int die(peerauth *a, peerauth_reason r) {
    if (a->state != ST_DEAD) {
        a->state = ST_DEAD;
        a->why = r;
        OPENSSL_cleanse(&a->secret, sizeof a->secret);
    }
    return reason_codes[a->why];
}

/* Admits a step only in the given role and state. */
static int expect(peerauth *a, peerauth_role role, int state) {
    if (a->state == ST_DEAD) return reason_codes[a->why];
    if (a->role != role || a->state != state) return die(a, PEERAUTH_R_ORDER);
    return 0;
}

peerauth *peerauth_new(peerauth_role role, const char *self_id, const peerauth_secret *secret) {
    if (role != PEERAUTH_CLIENT && role != PEERAUTH_SERVER) return NULL;
    if (!self_id || !secret || !peerauth_id_valid(self_id, strlen(self_id))) return NULL;
    peerauth *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->role = role;
    a->state = ST_FRESH;
    a->secret = *secret;
    a->self_len = strlen(self_id);
    memcpy(a->self_id, self_id, a->self_len + 1);
    return a;
}

void peerauth_free(peerauth *a) {
    if (!a) return;
    OPENSSL_cleanse(a, sizeof *a);
    free(a);
}

/* Appends one length byte and the id to *p. */
static uint8_t *put_id(uint8_t *p, const char *id, size_t len) {
    *p++ = (uint8_t)len;
    memcpy(p, id, len);
    return p + len;
}

int peerauth_binding(const peerauth *a, uint8_t *out, size_t *n) {
    *n = 0;
    if (!peerauth_is_authenticated(a)) return KEEL_EPROTO;
    int client = a->role == PEERAUTH_CLIENT;
    uint8_t *p = out;
    p = client ? put_id(p, a->self_id, a->self_len) : put_id(p, a->peer_id, a->peer_len);
    p = client ? put_id(p, a->peer_id, a->peer_len) : put_id(p, a->self_id, a->self_len);
    memcpy(p, client ? a->my_nonce : a->peer_nonce, PEERAUTH_NONCE_LEN);
    p += PEERAUTH_NONCE_LEN;
    memcpy(p, client ? a->peer_nonce : a->my_nonce, PEERAUTH_NONCE_LEN);
    p += PEERAUTH_NONCE_LEN;
    *n = (size_t)(p - out);
    return 0;
}

/* The proof this side sends (mine = 1) or expects from the peer (mine = 0):
 * HMAC(secret, label(prover) || lp(prover id) || lp(verifier id)
 *              || verifier nonce || prover nonce). */
static int make_proof(const peerauth *a, int mine, uint8_t out[PEERAUTH_MAC_LEN]) {
    int prover_is_server = (a->role == PEERAUTH_SERVER) == mine;
    const char *label = prover_is_server ? LABEL_SERVER : LABEL_CLIENT;
    uint8_t msg[sizeof LABEL_SERVER + 2 * (1 + PEERAUTH_ID_MAX) + 2 * PEERAUTH_NONCE_LEN];
    uint8_t *p = msg;
    memcpy(p, label, strlen(label));
    p += strlen(label);
    p = mine ? put_id(p, a->self_id, a->self_len) : put_id(p, a->peer_id, a->peer_len);
    p = mine ? put_id(p, a->peer_id, a->peer_len) : put_id(p, a->self_id, a->self_len);
    memcpy(p, mine ? a->peer_nonce : a->my_nonce, PEERAUTH_NONCE_LEN);
    p += PEERAUTH_NONCE_LEN;
    memcpy(p, mine ? a->my_nonce : a->peer_nonce, PEERAUTH_NONCE_LEN);
    p += PEERAUTH_NONCE_LEN;
    unsigned int outlen = 0;
    if (!HMAC(EVP_sha256(), a->secret.key, sizeof a->secret.key, msg, (size_t)(p - msg), out,
              &outlen) ||
        outlen != PEERAUTH_MAC_LEN)
        return -1;
    return 0;
}

/* The peer is proven: publish its id and drop the key we no longer need. */
static void finish(peerauth *a) {
    a->state = ST_DONE;
    OPENSSL_cleanse(&a->secret, sizeof a->secret);
}

/* Checks the peer's hex proof against the one we expect, in constant time. */
static int check_proof(peerauth *a, const char *hex, size_t len) {
    uint8_t got[PEERAUTH_MAC_LEN], want[PEERAUTH_MAC_LEN];
    if (hex_decode(hex, len, got, sizeof got)) return die(a, PEERAUTH_R_BAD_HEX);
    if (make_proof(a, 0, want)) return die(a, PEERAUTH_R_CRYPTO);
    int diff = CRYPTO_memcmp(got, want, sizeof want);
    OPENSSL_cleanse(want, sizeof want);
    return diff ? die(a, PEERAUTH_R_BAD_PROOF) : 0;
}

/* Writes our proof as hex into out[PEERAUTH_HEX_LEN + 1]. */
static int emit_proof(peerauth *a, char *out) {
    uint8_t mac[PEERAUTH_MAC_LEN];
    if (make_proof(a, 1, mac)) return die(a, PEERAUTH_R_CRYPTO);
    hex_encode(mac, sizeof mac, out);
    OPENSSL_cleanse(mac, sizeof mac);
    return 0;
}

/* Validates and stores the peer's id and nonce (after ours is drawn). */
static int take_peer(peerauth *a, const char *id, size_t idlen, const char *nonce_hex,
                     size_t noncelen) {
    if (!peerauth_id_valid(id, idlen)) return die(a, PEERAUTH_R_BAD_ID);
    if (hex_decode(nonce_hex, noncelen, a->peer_nonce, sizeof a->peer_nonce))
        return die(a, PEERAUTH_R_BAD_HEX);
    if (idlen == a->self_len && memcmp(id, a->self_id, idlen) == 0)
        return die(a, PEERAUTH_R_SAME_ID);
    if (memcmp(a->peer_nonce, a->my_nonce, sizeof a->my_nonce) == 0)
        return die(a, PEERAUTH_R_NONCE);
    memcpy(a->peer_id, id, idlen);
    a->peer_id[idlen] = '\0';
    a->peer_len = idlen;
    return 0;
}

int peerauth_client_hello(peerauth *a, peerauth_hello *out) {
    memset(out, 0, sizeof *out);
    int rc = expect(a, PEERAUTH_CLIENT, ST_FRESH);
    if (rc) return rc;
    if (fill_random(a->my_nonce, sizeof a->my_nonce)) return die(a, PEERAUTH_R_RANDOM);
    memcpy(out->id, a->self_id, a->self_len + 1);
    hex_encode(a->my_nonce, sizeof a->my_nonce, out->nonce);
    a->state = ST_SENT_HELLO;
    return 0;
}

int peerauth_server_hello(peerauth *a, const char *id, size_t idlen, const char *nonce_hex,
                          size_t noncelen, peerauth_challenge *out) {
    memset(out, 0, sizeof *out);
    int rc = expect(a, PEERAUTH_SERVER, ST_FRESH);
    if (rc) return rc;
    if (fill_random(a->my_nonce, sizeof a->my_nonce)) return die(a, PEERAUTH_R_RANDOM);
    if ((rc = take_peer(a, id, idlen, nonce_hex, noncelen))) return rc;
    if ((rc = emit_proof(a, out->proof))) return rc;
    memcpy(out->id, a->self_id, a->self_len + 1);
    hex_encode(a->my_nonce, sizeof a->my_nonce, out->nonce);
    a->state = ST_SENT_CHALLENGE;
    return 0;
}

int peerauth_client_challenge(peerauth *a, const char *id, size_t idlen, const char *nonce_hex,
                              size_t noncelen, const char *proof_hex, size_t prooflen,
                              peerauth_proof *out) {
    memset(out, 0, sizeof *out);
    int rc = expect(a, PEERAUTH_CLIENT, ST_SENT_HELLO);
    if (rc) return rc;
    if ((rc = take_peer(a, id, idlen, nonce_hex, noncelen))) return rc;
    if ((rc = check_proof(a, proof_hex, prooflen))) return rc;
    if ((rc = emit_proof(a, out->proof))) return rc;
    finish(a);
    return 0;
}

int peerauth_server_proof(peerauth *a, const char *proof_hex, size_t prooflen) {
    int rc = expect(a, PEERAUTH_SERVER, ST_SENT_CHALLENGE);
    if (rc) return rc;
    if ((rc = check_proof(a, proof_hex, prooflen))) return rc;
    finish(a);
    return 0;
}

int peerauth_is_authenticated(const peerauth *a) {
    return a && a->state == ST_DONE;
}

const char *peerauth_peer_id(const peerauth *a) {
    return peerauth_is_authenticated(a) ? a->peer_id : NULL;
}

peerauth_reason peerauth_reason_of(const peerauth *a) {
    return a ? a->why : PEERAUTH_R_NONE;
}
