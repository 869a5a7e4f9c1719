/* test-geohash.c - the geohash arithmetic (node/geohash.h) against the
 * values redis-server 7.0 gives for the documented Sicily example, and the
 * properties a search relies on; plus the argument-dependent key positions
 * of node/getkeys.h. (tests/integration/test_geo compares whole commands
 * with a live redis-server.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "node/geohash.h"
#include "node/getkeys.h"

/* GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania:
 * the scores ZSCORE gives on redis-server. */
static void encode_matches_redis(void **st) {
    geo_bits h;
    assert_int_equal(geo_encode_wgs84(13.361389, 38.115556, GEO_STEP_MAX, &h), 0);
    assert_true(geo_align52(h) == 3479099956230698ULL);
    assert_int_equal(geo_encode_wgs84(15.087269, 37.502669, GEO_STEP_MAX, &h), 0);
    assert_true(geo_align52(h) == 3479447370796909ULL);
}

/* Out-of-range coordinates are refused (GEOADD's "invalid longitude,latitude pair"). */
static void encode_rejects_out_of_range(void **st) {
    geo_bits h;
    assert_int_equal(geo_encode_wgs84(180.0001, 0, GEO_STEP_MAX, &h), -1);
    assert_int_equal(geo_encode_wgs84(0, 85.06, GEO_STEP_MAX, &h), -1);
    assert_int_equal(geo_encode_wgs84(0, -85.06, GEO_STEP_MAX, &h), -1);
    assert_int_equal(geo_encode_wgs84(0, 0, 0, &h), -1);
    assert_int_equal(geo_encode_wgs84(180, 85.05112878, GEO_STEP_MAX, &h), 0);
}

/* GEOPOS prints "%.17f" of the decoded centre: redis' digits. */
static void decode_matches_redis(void **st) {
    double lon, lat;
    char a[64], b[64];
    geo_decode_score(3479099956230698.0, &lon, &lat);
    snprintf(a, sizeof a, "%.17f", lon);
    snprintf(b, sizeof b, "%.17f", lat);
    assert_string_equal(a, "13.36138933897018433");
    assert_string_equal(b, "38.11555639549629859");
}

/* A decoded point re-encodes to the same score. */
static void decode_encode_round_trip(void **st) {
    for (double lon = -179.5; lon < 180; lon += 17.3)
        for (double lat = -85; lat < 85.05; lat += 9.7) {
            geo_bits h, h2;
            assert_int_equal(geo_encode_wgs84(lon, lat, GEO_STEP_MAX, &h), 0);
            double dl, dt;
            geo_decode_score((double)geo_align52(h), &dl, &dt);
            assert_true(fabs(dl - lon) < 1e-5 && fabs(dt - lat) < 1e-5);
            assert_int_equal(geo_encode_wgs84(dl, dt, GEO_STEP_MAX, &h2), 0);
            assert_true(h.bits == h2.bits);
        }
}

/* GEOHASH's strings for the two cities, as redis-server gives them. */
static void hash_string_matches_redis(void **st) {
    char s[12];
    geo_hash_string(3479099956230698.0, s);
    assert_string_equal(s, "sqc8b49rny0");
    geo_hash_string(3479447370796909.0, s);
    assert_string_equal(s, "sqdtr74hyu0");
}

/* GEODIST Sicily Palermo Catania = 166274.1516 on redis-server. */
static void distance_matches_redis(void **st) {
    double a[2], b[2];
    geo_decode_score(3479099956230698.0, &a[0], &a[1]);
    geo_decode_score(3479447370796909.0, &b[0], &b[1]);
    char s[64];
    snprintf(s, sizeof s, "%.4f", geo_distance(a[0], a[1], b[0], b[1]));
    assert_string_equal(s, "166274.1516");
    assert_true(geo_distance(a[0], a[1], a[0], a[1]) == 0);
}

/* Every point within the shape lies in one of the boxes geo_cover returns
 * (the search reads only those): checked on a grid around several centres. */
static void cover_contains_shape(void **st) {
    const double centres[][2] = {{13.36, 38.11}, {-179.9, 0}, {0, 84.9}, {-73.9, 40.7}};
    const double radii_km[] = {0.5, 50, 900};
    for (size_t c = 0; c < 4; c++)
        for (size_t r = 0; r < 3; r++)
            for (int box = 0; box < 2; box++) {
                geo_shape s = {.box = box,
                               .lon = centres[c][0],
                               .lat = centres[c][1],
                               .conversion = 1000,
                               .radius = radii_km[r],
                               .width = 2 * radii_km[r],
                               .height = radii_km[r]};
                geo_bits boxes[9];
                geo_cover(&s, boxes);
                double span = radii_km[r] / 50.0; /* degrees, about the radius */
                for (int i = -20; i <= 20; i++)
                    for (int j = -20; j <= 20; j++) {
                        double lon = s.lon + i * span / 10, lat = s.lat + j * span / 10, d;
                        geo_bits h;
                        if (geo_encode_wgs84(lon, lat, GEO_STEP_MAX, &h)) continue;
                        double dl, dt;
                        geo_decode_score((double)geo_align52(h), &dl, &dt);
                        if (!geo_within(&s, dl, dt, &d)) continue;
                        uint64_t sc = geo_align52(h);
                        int found = 0;
                        for (int b = 0; b < 9 && !found; b++) {
                            if (!boxes[b].step) continue;
                            uint64_t mn, mx;
                            geo_box_scores(boxes[b], &mn, &mx);
                            found = sc >= mn && sc < mx;
                        }
                        assert_true(found);
                    }
            }
}

/* A box search: inside the rectangle only (not merely within its diagonal). */
static void within_box(void **st) {
    geo_shape s = {.box = 1, .lon = 0, .lat = 0, .conversion = 1000, .width = 200, .height = 20};
    double d;
    assert_true(geo_within(&s, 0.8, 0, &d));  /* ~89 km east: inside the 100 km half width */
    assert_false(geo_within(&s, 0, 0.2, &d)); /* ~22 km north: outside the 10 km half height */
    assert_false(geo_within(&s, 1.0, 0, &d)); /* ~111 km east */
}

static int keys(int (*fn)(int, char *const *, const size_t *, int *), int argc, char **argv,
                int *pos) {
    size_t lens[300];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return fn(argc, argv, lens, pos);
}

/* ZUNIONSTORE target 260 key1..key260: 261 keys, the destination first
 * (redis' "COMMAND GETKEYS MORE THAN 256 KEYS"). */
static void getkeys_store_numkeys_many(void **st) {
    static char names[260][8];
    char *argv[263] = {"zunionstore", "target", "260"};
    for (int i = 0; i < 260; i++) {
        snprintf(names[i], sizeof names[i], "key%d", i + 1);
        argv[3 + i] = names[i];
    }
    int pos[263];
    assert_int_equal(keys(getkeys_store_numkeys, 263, argv, pos), 261);
    assert_int_equal(pos[0], 1);
    for (int i = 0; i < 260; i++)
        assert_int_equal(pos[1 + i], 3 + i);
}

/* A numkeys of 0, too large or not a number names no keys. */
static void getkeys_store_numkeys_bad(void **st) {
    int pos[8];
    char *zero[] = {"zunionstore", "t", "0", "a"};
    char *big[] = {"zunionstore", "t", "3", "a", "b"};
    char *nan[] = {"zunionstore", "t", "x", "a"};
    assert_int_equal(keys(getkeys_store_numkeys, 4, zero, pos), -1);
    assert_int_equal(keys(getkeys_store_numkeys, 5, big, pos), -1);
    assert_int_equal(keys(getkeys_store_numkeys, 4, nan, pos), -1);
}

/* GEORADIUS: the key, then STORE's and STOREDIST's keys (redis-server's
 * GETKEYS answers); a trailing STORE without a key names none. */
static void getkeys_georadius_store(void **st) {
    int pos[12];
    char *a[] = {"georadius", "k", "1", "2", "3", "m", "store", "d", "storedist", "e"};
    assert_int_equal(keys(getkeys_georadius, 10, a, pos), 3);
    assert_int_equal(pos[0], 1);
    assert_int_equal(pos[1], 7);
    assert_int_equal(pos[2], 9);
    char *b[] = {"georadius", "k", "1", "2", "3", "m", "store"};
    assert_int_equal(keys(getkeys_georadius, 7, b, pos), 1);
    char *c[] = {"georadiusbymember", "k", "m", "3", "m", "STORE", "d"};
    assert_int_equal(keys(getkeys_georadiusbymember, 7, c, pos), 2);
    assert_int_equal(pos[1], 6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(encode_matches_redis),       cmocka_unit_test(encode_rejects_out_of_range),
        cmocka_unit_test(decode_matches_redis),       cmocka_unit_test(decode_encode_round_trip),
        cmocka_unit_test(hash_string_matches_redis),  cmocka_unit_test(distance_matches_redis),
        cmocka_unit_test(cover_contains_shape),       cmocka_unit_test(within_box),
        cmocka_unit_test(getkeys_store_numkeys_many), cmocka_unit_test(getkeys_store_numkeys_bad),
        cmocka_unit_test(getkeys_georadius_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
