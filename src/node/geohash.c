/* geohash.c - geohash arithmetic (geohash.h), written from the algorithm
 * redis' GEO commands use, with its constants and its order of floating
 * point operations, so that scores, positions, distances and the set of
 * boxes a search reads all come out as redis-server's do.
 *
 * Bit layout: in a step-s hash, bit 2i holds latitude bit i and bit 2i+1
 * longitude bit i (of the s-bit fixed-point offsets into their ranges), so
 * the top bit of a 52-bit score is the first longitude bit, as in the
 * standard geohash.
 */
#include "node/geohash.h"

#include <math.h>
#include <stddef.h>

#define EARTH_RADIUS_M 6372797.560856
#define MERCATOR_MAX 20037726.37
#define ALPHABET "0123456789bcdefghjkmnpqrstuvwxyz"

static const geo_range LON_R = {GEO_LONG_MIN, GEO_LONG_MAX};
static const geo_range LAT_R = {GEO_LAT_MIN, GEO_LAT_MAX};

static double deg_rad(double d) {
    return d * (M_PI / 180.0);
}
static double rad_deg(double r) {
    return r / (M_PI / 180.0);
}

/* Bit i of v to bit 2i. */
static uint64_t spread(uint32_t v) {
    uint64_t r = 0;
    for (int i = 0; i < 32; i++)
        r |= (uint64_t)((v >> i) & 1u) << (2 * i);
    return r;
}

/* Bit 2i of v to bit i. */
static uint32_t compact(uint64_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++)
        r |= (uint32_t)((v >> (2 * i)) & 1u) << i;
    return r;
}

int geo_encode(geo_range lon_r, geo_range lat_r, double lon, double lat, int step, geo_bits *h) {
    h->bits = 0;
    h->step = (uint8_t)step;
    if (step < 1 || step > 32) return -1;
    if (lon > GEO_LONG_MAX || lon < GEO_LONG_MIN || lat > GEO_LAT_MAX || lat < GEO_LAT_MIN)
        return -1;
    if (lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max) return -1;
    double lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min);
    double lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min);
    lat_off *= (double)(1ULL << step);
    lon_off *= (double)(1ULL << step);
    h->bits = spread((uint32_t)lat_off) | (spread((uint32_t)lon_off) << 1);
    return 0;
}

int geo_encode_wgs84(double lon, double lat, int step, geo_bits *h) {
    return geo_encode(LON_R, LAT_R, lon, lat, step, h);
}

void geo_decode(geo_range lon_r, geo_range lat_r, geo_bits h, geo_area *a) {
    uint32_t ilat = compact(h.bits), ilon = compact(h.bits >> 1);
    double lat_scale = lat_r.max - lat_r.min, lon_scale = lon_r.max - lon_r.min;
    double div = (double)(1ULL << h.step);
    a->lat.min = lat_r.min + (ilat * 1.0 / div) * lat_scale;
    a->lat.max = lat_r.min + ((uint32_t)(ilat + 1) * 1.0 / div) * lat_scale;
    a->lon.min = lon_r.min + (ilon * 1.0 / div) * lon_scale;
    a->lon.max = lon_r.min + ((uint32_t)(ilon + 1) * 1.0 / div) * lon_scale;
}

/* A score as the integer redis reads it ((uint64_t)score; a negative one
 * as x86 converts it, through int64; NaN cannot be a score). Such scores
 * come only from ZADD: GEOPOS of them matches redis-server's output. */
static uint64_t score_bits(double score) {
    if (score < -9223372036854775808.0) return 1ULL << 63; /* x86's "integer indefinite" */
    if (score < 0) return (uint64_t)(int64_t)score;
    if (score >= 18446744073709551616.0) return 0;
    return (uint64_t)score;
}

void geo_decode_score(double score, double *lon, double *lat) {
    geo_bits h = {score_bits(score), GEO_STEP_MAX};
    geo_area a;
    geo_decode(LON_R, LAT_R, h, &a);
    double x = (a.lon.min + a.lon.max) / 2, y = (a.lat.min + a.lat.max) / 2;
    if (x > GEO_LONG_MAX) x = GEO_LONG_MAX;
    if (x < GEO_LONG_MIN) x = GEO_LONG_MIN;
    if (y > GEO_LAT_MAX) y = GEO_LAT_MAX;
    if (y < GEO_LAT_MIN) y = GEO_LAT_MIN;
    *lon = x;
    *lat = y;
}

uint64_t geo_align52(geo_bits h) {
    return h.bits << (52 - h.step * 2);
}

void geo_hash_string(double score, char out[12]) {
    double lon, lat;
    geo_decode_score(score, &lon, &lat);
    geo_range lon_r = {-180, 180}, lat_r = {-90, 90};
    geo_bits h;
    (void)geo_encode(lon_r, lat_r, lon, lat, GEO_STEP_MAX, &h); /* in range: decoded */
    for (int i = 0; i < 11; i++) {
        /* 52 bits give 10 characters and 2 bits; the 11th is 0, as redis' */
        int idx = i == 10 ? 0 : (int)((h.bits >> (52 - (i + 1) * 5)) & 0x1f);
        out[i] = ALPHABET[idx];
    }
    out[11] = 0;
}

double geo_lat_distance(double lat1, double lat2) {
    return EARTH_RADIUS_M * fabs(deg_rad(lat2) - deg_rad(lat1));
}

double geo_distance(double lon1, double lat1, double lon2, double lat2) {
    double lon1r = deg_rad(lon1), lon2r = deg_rad(lon2);
    double v = sin((lon2r - lon1r) / 2);
    if (v == 0.0) return geo_lat_distance(lat1, lat2); /* same meridian */
    double lat1r = deg_rad(lat1), lat2r = deg_rad(lat2);
    double u = sin((lat2r - lat1r) / 2);
    double a = u * u + cos(lat1r) * cos(lat2r) * v * v;
    return 2.0 * EARTH_RADIUS_M * asin(sqrt(a));
}

/* ---- Covering a shape with boxes --------------------------------------------- */

/* The step whose boxes are about the radius (wider towards the poles). */
static int steps_for_radius(double range_m, double lat) {
    if (range_m == 0) return 26;
    int step = 1;
    while (range_m < MERCATOR_MAX) {
        range_m *= 2;
        step++;
    }
    step -= 2; /* so that the range falls inside the 9 boxes in most cases */
    if (lat > 66 || lat < -66) {
        step--;
        if (lat > 80 || lat < -80) step--;
    }
    if (step < 1) step = 1;
    if (step > 26) step = 26;
    return step;
}

/* min lon, min lat, max lon, max lat of the shape. */
static void bounding_box(const geo_shape *s, double b[4]) {
    double height = s->conversion * (s->box ? s->height / 2 : s->radius);
    double width = s->conversion * (s->box ? s->width / 2 : s->radius);
    const double lat_delta = rad_deg(height / EARTH_RADIUS_M);
    const double lon_delta_top = rad_deg(width / EARTH_RADIUS_M / cos(deg_rad(s->lat + lat_delta)));
    const double lon_delta_bottom =
        rad_deg(width / EARTH_RADIUS_M / cos(deg_rad(s->lat - lat_delta)));
    int south = s->lat < 0; /* the wider edge is the one nearer the equator */
    b[0] = south ? s->lon - lon_delta_bottom : s->lon - lon_delta_top;
    b[2] = south ? s->lon + lon_delta_bottom : s->lon + lon_delta_top;
    b[1] = s->lat - lat_delta;
    b[3] = s->lat + lat_delta;
}

/* One box east (d > 0) or west: the longitude (odd) bits plus or minus one. */
static void move_lon(geo_bits *h, int d) {
    uint64_t x = h->bits & 0xaaaaaaaaaaaaaaaaULL, y = h->bits & 0x5555555555555555ULL;
    uint64_t zz = 0x5555555555555555ULL >> (64 - h->step * 2);
    if (d > 0) {
        x = x + (zz + 1);
    } else {
        x = x | zz;
        x = x - (zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaaULL >> (64 - h->step * 2);
    h->bits = x | y;
}

/* One box north (d > 0) or south: the latitude (even) bits. */
static void move_lat(geo_bits *h, int d) {
    uint64_t x = h->bits & 0xaaaaaaaaaaaaaaaaULL, y = h->bits & 0x5555555555555555ULL;
    uint64_t zz = 0xaaaaaaaaaaaaaaaaULL >> (64 - h->step * 2);
    if (d > 0) {
        y = y + (zz + 1);
    } else {
        y = y | zz;
        y = y - (zz + 1);
    }
    y &= 0x5555555555555555ULL >> (64 - h->step * 2);
    h->bits = x | y;
}

enum { B_SELF, B_N, B_S, B_E, B_W, B_NE, B_NW, B_SE, B_SW };

static void neighbours(geo_bits h, geo_bits b[9]) {
    static const int dir[9][2] = {{0, 0}, {0, 1},  {0, -1}, {1, 0},  {-1, 0},
                                  {1, 1}, {-1, 1}, {1, -1}, {-1, -1}}; /* lon, lat */
    for (int i = 0; i < 9; i++) {
        b[i] = h;
        if (dir[i][0]) move_lon(&b[i], dir[i][0]);
        if (dir[i][1]) move_lat(&b[i], dir[i][1]);
    }
}

static void zero(geo_bits *b) {
    b->bits = 0;
    b->step = 0;
}

void geo_cover(const geo_shape *s, geo_bits boxes[9]) {
    double b[4];
    bounding_box(s, b);
    double radius_m =
        s->box ? sqrt((s->width / 2) * (s->width / 2) + (s->height / 2) * (s->height / 2))
               : s->radius;
    radius_m *= s->conversion;
    int steps = steps_for_radius(radius_m, s->lat);
    geo_bits h;
    geo_area area;
    (void)geo_encode(LON_R, LAT_R, s->lon, s->lat, steps, &h);
    neighbours(h, boxes);
    geo_decode(LON_R, LAT_R, h, &area);
    /* Near a box's edge the step may be too fine for the 9 boxes to hold
     * the whole bounding box: one step coarser then. */
    geo_area n, so, e, w;
    geo_decode(LON_R, LAT_R, boxes[B_N], &n);
    geo_decode(LON_R, LAT_R, boxes[B_S], &so);
    geo_decode(LON_R, LAT_R, boxes[B_E], &e);
    geo_decode(LON_R, LAT_R, boxes[B_W], &w);
    int decrease = n.lat.max < b[3] || so.lat.min > b[1] || e.lon.max < b[2] || w.lon.min > b[0];
    if (steps > 1 && decrease) {
        steps--;
        (void)geo_encode(LON_R, LAT_R, s->lon, s->lat, steps, &h);
        neighbours(h, boxes);
        geo_decode(LON_R, LAT_R, h, &area);
    }
    if (steps >= 2) { /* drop the boxes wholly outside the bounding box */
        if (area.lat.min < b[1]) zero(&boxes[B_S]), zero(&boxes[B_SW]), zero(&boxes[B_SE]);
        if (area.lat.max > b[3]) zero(&boxes[B_N]), zero(&boxes[B_NE]), zero(&boxes[B_NW]);
        if (area.lon.min < b[0]) zero(&boxes[B_W]), zero(&boxes[B_SW]), zero(&boxes[B_NW]);
        if (area.lon.max > b[2]) zero(&boxes[B_E]), zero(&boxes[B_SE]), zero(&boxes[B_NE]);
    }
}

void geo_box_scores(geo_bits h, uint64_t *min, uint64_t *max) {
    *min = geo_align52(h);
    h.bits++;
    *max = geo_align52(h);
}

int geo_within(const geo_shape *s, double lon, double lat, double *dist) {
    if (!s->box) {
        *dist = geo_distance(s->lon, s->lat, lon, lat);
        return *dist <= s->radius * s->conversion;
    }
    double w = s->width * s->conversion, hgt = s->height * s->conversion;
    if (geo_lat_distance(lat, s->lat) > hgt / 2) return 0;
    if (geo_distance(lon, lat, s->lon, lat) > w / 2) return 0;
    *dist = geo_distance(s->lon, s->lat, lon, lat);
    return 1;
}
