/* test-access.c - the OBJECT IDLETIME/FREQ clock (node/access.c) without a
 * store: idle times, RESTORE's setters, the no-touch commands, and the
 * bounded table's eviction keeping idle times a lower bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "node/access.h"
#include "node/cmd.h"
#include "node/introspect.h"

static const cmd_def get_def = {"get", 2, CMD_READONLY, 1, 1, 1, CLASS_READ, NULL, "string", "",
                                NULL, 0};
static const cmd_def ttl_def = {"ttl", 2, CMD_READONLY, 1, 1, 1, CLASS_READ, NULL, "keyspace", "",
                                NULL, 0};

typedef struct fx {
    server srv;
    client c;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    node_config_default(&f->srv.cfg);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    access_free(f->srv.access);
    config_params_free(f->srv.params);
    free(f);
    return 0;
}

static void touch_at(fx *f, const cmd_def *d, const char *key, int64_t now_ms) {
    char *argv[2] = {(char *)d->name, (char *)key};
    size_t lens[2] = {strlen(d->name), strlen(key)};
    cmd_ctx x = {.srv = &f->srv, .c = &f->c, .argc = 2, .argv = argv, .argvlen = lens,
                 .now_ms = now_ms};
    access_touch_cmd(&x, d);
}

static long long idle_at(fx *f, const char *key, int64_t now_ms) {
    cmd_ctx x = {.srv = &f->srv, .c = &f->c, .now_ms = now_ms};
    return access_idle_s(&x, key, strlen(key));
}

/* GET touches, TTL does not; idle is whole seconds since the last touch. */
static void idle_and_notouch(void **state) {
    fx *f = *state;
    int64_t t0 = keel_wall_ms() + 100000;
    touch_at(f, &get_def, "a", t0);
    assert_int_equal(idle_at(f, "a", t0 + 5500), 5);
    touch_at(f, &ttl_def, "a", t0 + 6000);
    assert_int_equal(idle_at(f, "a", t0 + 9000), 9);
    touch_at(f, &get_def, "a", t0 + 9000);
    assert_int_equal(idle_at(f, "a", t0 + 9999), 0);
}

/* RESTORE IDLETIME/FREQ set the clock; FREQ is only kept under LFU. */
static void setters(void **state) {
    fx *f = *state;
    int64_t now = keel_wall_ms();
    cmd_ctx x = {.srv = &f->srv, .c = &f->c, .now_ms = now};
    assert_int_equal(access_set_idle(&x, "k", 1, 1000), 0);
    assert_int_equal(idle_at(f, "k", now), 1000);
    assert_int_equal(access_set_freq(&x, "k", 1, 100), 0);
    assert_int_equal(access_freq(&x, "k", 1), 100);
    assert_int_equal(access_lfu_mode(&f->srv), 0);
}

/* Past ACCESS_MAX keys, sampled eviction; an evicted key's idle time is
 * then a lower bound of the truth, never more than it, and recent keys
 * keep their exact clock. */
static void eviction_lower_bound(void **state) {
    fx *f = *state;
    int64_t t0 = keel_wall_ms() + 1000000;
    touch_at(f, &get_def, "oldest", t0);
    char key[32];
    unsigned n = ACCESS_MAX + 1000;
    for (unsigned i = 0; i < n; i++) {
        snprintf(key, sizeof key, "k%u", i);
        touch_at(f, &get_def, key, t0 + 1000 + i); /* 1 ms apart */
    }
    assert_int_equal(access_count(&f->srv), ACCESS_MAX);
    int64_t now = t0 + 1000 + n + 60000;
    long long idle = idle_at(f, "oldest", now);
    assert_true(idle <= (now - t0) / 1000);  /* not more than the truth */
    assert_true(idle >= 60);                 /* not less than since the last touch */
    snprintf(key, sizeof key, "k%u", n - 1); /* the newest: still exact */
    assert_int_equal(idle_at(f, key, now), 60);
    /* every key: idle within [60 s, its true idle time] */
    for (unsigned i = 0; i < n; i += 97) {
        snprintf(key, sizeof key, "k%u", i);
        long long got = idle_at(f, key, now), truth = (now - (t0 + 1000 + i)) / 1000;
        assert_true(got >= 60 && got <= truth);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(idle_and_notouch, setup, teardown),
        cmocka_unit_test_setup_teardown(setters, setup, teardown),
        cmocka_unit_test_setup_teardown(eviction_lower_bound, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
