/* test-coordkey.c - unit tests for src/core/coordkey (the coordinator's
 * Ed25519 key, issue 10 defect 6) and peerauth_binding, which it signs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/coordkey.h"
#include "core/peerauth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/keel-test-coordkey-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static coordkey *make_key(const char *name, char *pub_file_hex) {
    char key[128], pub[128], err[256] = "";
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    snprintf(pub, sizeof pub, "%s/%s.pub", dir, name);
    assert_int_equal(coordkey_create(key, pub, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(coordkey_create(key, pub, err, sizeof err),
                     KEEL_EEXIST); /* never overwrites */
    if (pub_file_hex) {
        FILE *f = fopen(pub, "r");
        assert_non_null(f);
        assert_non_null(fgets(pub_file_hex, COORDKEY_PUB_HEX + 2, f));
        pub_file_hex[COORDKEY_PUB_HEX] = 0;
        fclose(f);
    }
    coordkey *k = NULL;
    assert_int_equal(coordkey_load(key, &k, err, sizeof err), 0);
    return k;
}

/* A signature verifies with the key's public half, and with nothing else:
 * not another key, another label, another binding or a flipped bit. */
static void test_sign_verify(void **state) {
    char pubfile[COORDKEY_PUB_HEX + 2], pub[COORDKEY_PUB_HEX + 1], pub2[COORDKEY_PUB_HEX + 1];
    coordkey *k = make_key("a", pubfile), *k2 = make_key("b", NULL);
    coordkey_public_hex(k, pub);
    coordkey_public_hex(k2, pub2);
    assert_string_equal(pub, pubfile);
    assert_string_not_equal(pub, pub2);
    const uint8_t b[] = "binding-bytes";
    char sig[COORDKEY_SIG_HEX + 1];
    assert_int_equal(coordkey_sign(k, "client", b, sizeof b, sig), 0);
    assert_int_equal(strlen(sig), COORDKEY_SIG_HEX);
    assert_int_equal(coordkey_verify(pub, 64, "client", b, sizeof b, sig, 128), 0);
    assert_int_equal(coordkey_verify(pub2, 64, "client", b, sizeof b, sig, 128), KEEL_EPROTO);
    assert_int_equal(coordkey_verify(pub, 64, "server", b, sizeof b, sig, 128), KEEL_EPROTO);
    assert_int_equal(coordkey_verify(pub, 64, "client", b, sizeof b - 1, sig, 128), KEEL_EPROTO);
    sig[5] = sig[5] == '0' ? '1' : '0';
    assert_int_equal(coordkey_verify(pub, 64, "client", b, sizeof b, sig, 128), KEEL_EPROTO);
    assert_int_equal(coordkey_verify(pub, 63, "client", b, sizeof b, sig, 128), KEEL_EINVAL);
    assert_int_equal(coordkey_verify(pub, 64, "client", b, sizeof b, "zz", 2), KEEL_EINVAL);
    assert_true(coordkey_pub_valid(pub, 64));
    assert_false(coordkey_pub_valid("xyz", 3));
    coordkey_free(k);
    coordkey_free(k2);
    coordkey_free(NULL);
}

/* Both ends of one handshake compute the same binding; another handshake
 * (fresh nonces) gives another one, so a signature cannot be replayed. */
static void test_binding_per_handshake(void **state) {
    peerauth_secret sec;
    memset(&sec, 3, sizeof sec);
    uint8_t bc[PEERAUTH_BINDING_MAX], bs[PEERAUTH_BINDING_MAX], first[PEERAUTH_BINDING_MAX];
    size_t nc, ns, nfirst = 0;
    for (int round = 0; round < 2; round++) {
        peerauth *c = peerauth_new(PEERAUTH_CLIENT, "coordinator", &sec);
        peerauth *s = peerauth_new(PEERAUTH_SERVER, "n1", &sec);
        peerauth_hello h;
        peerauth_challenge ch;
        peerauth_proof pr;
        assert_int_equal(peerauth_binding(c, bc, &nc), KEEL_EPROTO); /* not yet */
        assert_int_equal(peerauth_client_hello(c, &h), 0);
        assert_int_equal(
            peerauth_server_hello(s, h.id, strlen(h.id), h.nonce, strlen(h.nonce), &ch), 0);
        assert_int_equal(peerauth_client_challenge(c, ch.id, strlen(ch.id), ch.nonce,
                                                   strlen(ch.nonce), ch.proof, strlen(ch.proof),
                                                   &pr),
                         0);
        assert_int_equal(peerauth_server_proof(s, pr.proof, strlen(pr.proof)), 0);
        assert_int_equal(peerauth_binding(c, bc, &nc), 0);
        assert_int_equal(peerauth_binding(s, bs, &ns), 0);
        assert_int_equal(nc, ns);
        assert_memory_equal(bc, bs, nc);
        assert_int_equal(nc, 1 + 11 + 1 + 2 + 64);
        if (round == 0) {
            memcpy(first, bc, nc);
            nfirst = nc;
        } else {
            assert_true(nfirst != nc || memcmp(first, bc, nc) != 0);
        }
        peerauth_free(c);
        peerauth_free(s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sign_verify, setup, teardown),
        cmocka_unit_test(test_binding_per_handshake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
