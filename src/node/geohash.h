/* geohash.h - the geohash arithmetic of redis' GEO commands, bit for bit:
 * a point is a 52-bit integer (26 bits of longitude and 26 of latitude,
 * interleaved, longitude in the odd bits), stored as a sorted-set score.
 * Longitude spans -180..180, latitude -85.05112878..85.05112878 (the
 * Web-Mercator limits redis indexes); GEOHASH re-encodes over the standard
 * -90..90 for its base32 string. A search covers the shape with the box of
 * the centre and its 8 neighbours at a step (precision) chosen from the
 * radius, then filters by exact distance (haversine, redis' earth radius).
 *
 * Pure arithmetic, no I/O, no allocation: any thread.
 */
#ifndef KEEL_NODE_GEOHASH_H
#define KEEL_NODE_GEOHASH_H

#include <stdint.h>

#define GEO_STEP_MAX 26 /* bits per coordinate: 52 in all */
#define GEO_LAT_MIN -85.05112878
#define GEO_LAT_MAX 85.05112878
#define GEO_LONG_MIN -180.0
#define GEO_LONG_MAX 180.0

typedef struct geo_bits {
    uint64_t bits;
    uint8_t step; /* 0 with bits 0: "no box" (an excluded neighbour) */
} geo_bits;

typedef struct geo_range {
    double min, max;
} geo_range;

typedef struct geo_area {
    geo_range lon, lat;
} geo_area;

/* Encodes (lon, lat) at step over the ranges lon_r, lat_r. Returns 0, or -1
 * when a coordinate is outside redis' limits or its range, or step is not
 * 1..32 (then *h is left with bits 0). */
int geo_encode(geo_range lon_r, geo_range lat_r, double lon, double lat, int step, geo_bits *h);
/* Over redis' ranges (GEOADD's encoding). */
int geo_encode_wgs84(double lon, double lat, int step, geo_bits *h);
/* The area of box h over the given ranges. */
void geo_decode(geo_range lon_r, geo_range lat_r, geo_bits h, geo_area *a);
/* The point a score stands for: the centre of its step-26 box, clamped to
 * redis' limits (GEOPOS, distances). */
void geo_decode_score(double score, double *lon, double *lat);
/* h's bits aligned to 52 (the score of the box's first point). */
uint64_t geo_align52(geo_bits h);

/* GEOHASH's 11-character base32 string of a score (re-encoded over the
 * standard ranges), NUL-terminated in out[12]. */
void geo_hash_string(double score, char out[12]);

/* Metres between two points (redis' haversine, earth radius 6372797.560856). */
double geo_distance(double lon1, double lat1, double lon2, double lat2);
/* Metres along a meridian between two latitudes. */
double geo_lat_distance(double lat1, double lat2);

/* A search shape: a circle (radius) or a box (width x height), in the
 * units of conversion (metres per unit), centred at (lon, lat). */
typedef struct geo_shape {
    int box;
    double lon, lat;
    double conversion;
    double radius;        /* circle */
    double width, height; /* box */
} geo_shape;

/* The 9 boxes to scan for s: [0] the centre's, then north, south, east,
 * west, north-east, north-west, south-east, south-west, as redis orders
 * them; an excluded box has step 0 and bits 0. */
void geo_cover(const geo_shape *s, geo_bits boxes[9]);
/* The score range [*min, *max) of a box. */
void geo_box_scores(geo_bits h, uint64_t *min, uint64_t *max);
/* 1 if the point (lon, lat) lies in s, with *dist its distance in metres
 * from the centre; 0 otherwise. */
int geo_within(const geo_shape *s, double lon, double lat, double *dist);

#endif
