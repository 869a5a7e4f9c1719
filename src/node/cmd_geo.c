/* cmd_geo.c - the GEO commands over sorted sets, as redis 7.0's geo.c:
 * a member's score is its 52-bit geohash (geohash.h). GEOADD is ZADD with
 * encoded scores (the request rewritten and handed to cmd_zadd, as redis
 * does; INFO commandstats still counts geoadd, since cmd_call records the
 * command dispatched). GEOPOS / GEODIST / GEOHASH decode member scores.
 * GEOSEARCH, GEOSEARCHSTORE, GEORADIUS[BYMEMBER][_RO] share one search:
 * the 9 boxes of geo_cover read in redis' order, each a score range of the
 * index in ascending (score, member) order, each point kept if within the
 * shape; then sorted by distance if asked (COUNT without ANY implies ASC),
 * and replied or stored (STORE: geohash scores, STOREDIST: distances in
 * the request's unit). Replies and errors are byte for byte redis'; the
 * order of argument checks is redis' georadiusGeneric's. */
#include "node/cmd.h"
#include "core/err.h"
#include "node/geohash.h"
#include "node/zset.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cmd_zadd(cmd_ctx *x); /* cmd_zset.c */

/* ---- Arguments ------------------------------------------------------------------- */

/* Metres per unit, or -1 after replying. */
static double parse_unit(cmd_ctx *x, int i) {
    if (arg_is(x, i, "m")) return 1;
    if (arg_is(x, i, "km")) return 1000;
    if (arg_is(x, i, "ft")) return 0.3048;
    if (arg_is(x, i, "mi")) return 1609.34;
    reply_err(x, "ERR unsupported unit provided. please use M, KM, FT, MI");
    return -1;
}

/* argv[i], argv[i+1] as longitude, latitude within redis' limits. */
static int parse_lonlat(cmd_ctx *x, int i, double *lon, double *lat) {
    if (zs_arg_double(x->argv[i], x->argvlen[i], lon) ||
        zs_arg_double(x->argv[i + 1], x->argvlen[i + 1], lat)) {
        reply_err(x, "ERR value is not a valid float");
        return -1;
    }
    if (*lon < GEO_LONG_MIN || *lon > GEO_LONG_MAX || *lat < GEO_LAT_MIN || *lat > GEO_LAT_MAX) {
        reply_errf(x, "ERR invalid longitude,latitude pair %f,%f", *lon, *lat);
        return -1;
    }
    return 0;
}

/* argv[i] radius, argv[i+1] unit. */
static int parse_radius(cmd_ctx *x, int i, geo_shape *s) {
    double r;
    if (zs_arg_double(x->argv[i], x->argvlen[i], &r)) {
        reply_err(x, "ERR need numeric radius");
        return -1;
    }
    if (r < 0) {
        reply_err(x, "ERR radius cannot be negative");
        return -1;
    }
    s->radius = r;
    s->box = 0;
    return (s->conversion = parse_unit(x, i + 1)) < 0 ? -1 : 0;
}

/* argv[i] width, argv[i+1] height, argv[i+2] unit. */
static int parse_box(cmd_ctx *x, int i, geo_shape *s) {
    double w, h;
    if (zs_arg_double(x->argv[i], x->argvlen[i], &w)) {
        reply_err(x, "ERR need numeric width");
        return -1;
    }
    if (zs_arg_double(x->argv[i + 1], x->argvlen[i + 1], &h)) {
        reply_err(x, "ERR need numeric height");
        return -1;
    }
    if (h < 0 || w < 0) {
        reply_err(x, "ERR height or width cannot be negative");
        return -1;
    }
    s->width = w;
    s->height = h;
    s->box = 1;
    return (s->conversion = parse_unit(x, i + 2)) < 0 ? -1 : 0;
}

/* redis' addReplyHumanLongDouble: "%.17f" without trailing zeros, a bulk
 * string in RESP2, a double (",...") with the same digits in RESP3. */
static void reply_coord(cmd_ctx *x, double v) {
    char buf[64];
    int l = snprintf(buf, sizeof buf, "%.17f", v);
    if (l < 0) l = 0;
    if (memchr(buf, '.', (size_t)l)) {
        while (l > 0 && buf[l - 1] == '0')
            l--;
        if (l > 0 && buf[l - 1] == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') buf[0] = '0', l = 1;
    if (x->proto == 3) {
        (void)kbuf_append(x->out, ",", 1);
        (void)kbuf_append(x->out, buf, (size_t)l);
        (void)kbuf_append(x->out, "\r\n", 2);
        return;
    }
    resp_w_bulk(x->out, buf, (size_t)l);
}

/* redis' addReplyDoubleDistance: "%.4f" as a bulk string in both protocols. */
static void reply_dist(cmd_ctx *x, double d) {
    char buf[128];
    int l = snprintf(buf, sizeof buf, "%.4f", d);
    resp_w_bulk(x->out, buf, l < 0 ? 0 : (size_t)l);
}

/* ---- GEOADD ------------------------------------------------------------------------ */

/* GEOADD key [NX|XX] [CH] lon lat member [lon lat member ...] */
void cmd_geoadd(cmd_ctx *x) {
    int xx = 0, nx = 0, first = 2;
    for (; first < x->argc; first++) {
        if (arg_is(x, first, "nx"))
            nx = 1;
        else if (arg_is(x, first, "xx"))
            xx = 1;
        else if (!arg_is(x, first, "ch"))
            break;
    }
    if ((x->argc - first) % 3 || (xx && nx)) {
        reply_syntax(x);
        return;
    }
    int n = (x->argc - first) / 3, argc = first + 2 * n;
    char **argv = calloc((size_t)argc, sizeof *argv);
    size_t *lens = calloc((size_t)argc, sizeof *lens);
    char *nums = malloc((size_t)(n ? n : 1) * 24);
    if (!argv || !lens || !nums) {
        reply_err(x, "OOM command not allowed when used memory > 'maxmemory'.");
        goto out;
    }
    argv[0] = "zadd";
    lens[0] = 4;
    for (int i = 1; i < first; i++) {
        argv[i] = x->argv[i];
        lens[i] = x->argvlen[i];
    }
    for (int i = 0; i < n; i++) {
        double lon, lat;
        if (parse_lonlat(x, first + 3 * i, &lon, &lat)) goto out;
        geo_bits h;
        (void)geo_encode_wgs84(lon, lat, GEO_STEP_MAX, &h); /* in range: checked */
        char *num = nums + 24 * i;
        int l = snprintf(num, 24, "%llu", (unsigned long long)geo_align52(h));
        argv[first + 2 * i] = num;
        lens[first + 2 * i] = (size_t)l;
        argv[first + 2 * i + 1] = x->argv[first + 3 * i + 2];
        lens[first + 2 * i + 1] = x->argvlen[first + 3 * i + 2];
    }
    cmd_ctx z = *x;
    z.argc = argc;
    z.argv = argv;
    z.argvlen = lens;
    cmd_zadd(&z); /* its syntax error when no element is given, as redis' */
out:
    free(argv);
    free(lens);
    free(nums);
}

/* ---- GEOPOS, GEODIST, GEOHASH ------------------------------------------------------- */

/* The score of member argv[i] of the key argv[1] (o; r from obj_lookup). */
static int member_score(cmd_ctx *x, int r, const obj *o, int i, double *s) {
    return r > 0 ? zs_score(x, NULL, x->argv[1], x->argvlen[1], o, x->argv[i], x->argvlen[i], s)
                 : KEEL_ENOTFOUND;
}

/* GEOPOS key [member ...] */
void cmd_geopos(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, x->argv[1], x->argvlen[1], STORE_T_ZSET, &o);
    if (r < 0) return;
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        double s, lon, lat;
        if (member_score(x, r, &o, i, &s)) {
            resp_w_null_array(x->out, x->proto);
            continue;
        }
        geo_decode_score(s, &lon, &lat);
        resp_w_array(x->out, 2);
        reply_coord(x, lon);
        reply_coord(x, lat);
    }
}

/* GEODIST key member1 member2 [M|KM|FT|MI] */
void cmd_geodist(cmd_ctx *x) {
    double to_m = 1;
    if (x->argc == 5) {
        if ((to_m = parse_unit(x, 4)) < 0) return;
    } else if (x->argc > 5) {
        reply_syntax(x);
        return;
    }
    obj o;
    int r = obj_lookup(x, NULL, x->argv[1], x->argvlen[1], STORE_T_ZSET, &o);
    if (r < 0) return;
    double s1, s2;
    if (member_score(x, r, &o, 2, &s1) || member_score(x, r, &o, 3, &s2)) {
        resp_w_null(x->out, x->proto);
        return;
    }
    double a[2], b[2];
    geo_decode_score(s1, &a[0], &a[1]);
    geo_decode_score(s2, &b[0], &b[1]);
    reply_dist(x, geo_distance(a[0], a[1], b[0], b[1]) / to_m);
}

/* GEOHASH key [member ...] */
void cmd_geohash(cmd_ctx *x) {
    obj o;
    int r = obj_lookup(x, NULL, x->argv[1], x->argvlen[1], STORE_T_ZSET, &o);
    if (r < 0) return;
    resp_w_array(x->out, (size_t)(x->argc - 2));
    for (int i = 2; i < x->argc; i++) {
        double s;
        if (member_score(x, r, &o, i, &s)) {
            resp_w_null(x->out, x->proto);
            continue;
        }
        char buf[12];
        geo_hash_string(s, buf);
        resp_w_bulk(x->out, buf, 11);
    }
}

/* ---- The search ---------------------------------------------------------------------- */

enum {
    G_COORDS = 1,    /* GEORADIUS: lon lat at argv[2..3] */
    G_MEMBER = 2,    /* GEORADIUSBYMEMBER: member at argv[2] */
    G_SEARCH = 4,    /* GEOSEARCH: FROM... / BY... options */
    G_SEARCHSTO = 8, /* GEOSEARCHSTORE dst src ... */
    G_NOSTORE = 16,  /* the _RO forms */
};
enum { SORT_NONE, SORT_ASC, SORT_DESC };

/* One point found. */
typedef struct gpoint {
    size_t mo, ml; /* member bytes in the search's zlist buffer */
    double score, dist, lon, lat;
} gpoint;

typedef struct gresult {
    gpoint *p;
    size_t n, cap;
} gresult;

static int gresult_add(gresult *g, gpoint pt) {
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        gpoint *np = realloc(g->p, cap * sizeof *np);
        if (!np) return KEEL_ENOMEM;
        g->p = np;
        g->cap = cap;
    }
    g->p[g->n++] = pt;
    return 0;
}

static int by_dist_asc(const void *a, const void *b) {
    const gpoint *p = a, *q = b;
    return (p->dist > q->dist) - (p->dist < q->dist);
}
static int by_dist_desc(const void *a, const void *b) {
    return by_dist_asc(b, a);
}

/* Reads the boxes of s from key k (o) into g (members in all), stopping
 * once limit points are found (0: no limit). Returns 0 or a KEEL_E*. */
static int search(cmd_ctx *x, const char *k, size_t kl, const obj *o, const geo_shape *s,
                  size_t limit, zlist *all, gresult *g) {
    geo_bits boxes[9];
    geo_cover(s, boxes);
    int last = -1;
    for (int i = 0; i < 9; i++) {
        if (boxes[i].bits == 0 && boxes[i].step == 0) continue;
        /* with a very large radius neighbours coincide: read each once */
        if (last > 0 && boxes[i].bits == boxes[last].bits && boxes[i].step == boxes[last].step)
            continue;
        if (g->n && limit && g->n >= limit) break;
        uint64_t min, max;
        geo_box_scores(boxes[i], &min, &max);
        zs_srange r = {(double)min, (double)max, 0, 1};
        size_t from = all->n;
        long n = zs_range_score(x, k, kl, o, &r, 0, 0, SIZE_MAX, all);
        if (n < 0) return (int)n;
        for (size_t j = from; j < all->n; j++) {
            gpoint pt = {all->e[j].mo, all->e[j].ml, all->e[j].s, 0, 0, 0};
            geo_decode_score(pt.score, &pt.lon, &pt.lat);
            if (geo_within(s, pt.lon, pt.lat, &pt.dist)) {
                int rc = gresult_add(g, pt);
                if (rc) return rc;
            }
            if (g->n && limit && g->n >= limit) break;
        }
        last = i;
    }
    return 0;
}

/* The parsed request. */
typedef struct greq {
    geo_shape shape;
    const char *store;
    size_t storel;
    int storedist, withdist, withhash, withcoord, any, sort;
    long long count;
    int from_member, from_loc, by_radius, by_box;
    const char *member; /* FROMMEMBER / BYMEMBER: resolved after the key is read */
    size_t memberl;
} greq;

/* Sets q->shape's centre from member q->member of k (o). */
static int centre_from_member(cmd_ctx *x, const char *k, size_t kl, const obj *o, greq *q) {
    double s;
    int rc = zs_score(x, NULL, k, kl, o, q->member, q->memberl, &s);
    if (rc == KEEL_ENOTFOUND) {
        reply_err(x, "ERR could not decode requested zset member");
        return -1;
    }
    if (rc) {
        reply_storage(x, rc);
        return -1;
    }
    geo_decode_score(s, &q->shape.lon, &q->shape.lat);
    return 0;
}

/* redis' georadiusGeneric option loop, from argv[base]. r: the source
 * exists. Returns 0 or -1 after replying. */
static int parse_options(cmd_ctx *x, int base, unsigned flags, int r, const obj *o, greq *q) {
    const char *k = x->argv[(flags & G_SEARCHSTO) ? 2 : 1];
    size_t kl = x->argvlen[(flags & G_SEARCHSTO) ? 2 : 1];
    int remaining = x->argc - base;
    for (int i = 0; i < remaining; i++) {
        int a = base + i;
        if (arg_is(x, a, "withdist")) {
            q->withdist = 1;
        } else if (arg_is(x, a, "withhash")) {
            q->withhash = 1;
        } else if (arg_is(x, a, "withcoord")) {
            q->withcoord = 1;
        } else if (arg_is(x, a, "any")) {
            q->any = 1;
        } else if (arg_is(x, a, "asc")) {
            q->sort = SORT_ASC;
        } else if (arg_is(x, a, "desc")) {
            q->sort = SORT_DESC;
        } else if (arg_is(x, a, "count") && i + 1 < remaining) {
            if (arg_ll(x->argv[a + 1], x->argvlen[a + 1], &q->count)) {
                reply_not_int(x);
                return -1;
            }
            if (q->count <= 0) {
                reply_err(x, "ERR COUNT must be > 0");
                return -1;
            }
            i++;
        } else if ((arg_is(x, a, "store") || arg_is(x, a, "storedist")) && i + 1 < remaining &&
                   !(flags & (G_NOSTORE | G_SEARCH))) {
            q->storedist = arg_is(x, a, "storedist");
            q->store = x->argv[a + 1];
            q->storel = x->argvlen[a + 1];
            i++;
        } else if (arg_is(x, a, "storedist") && (flags & G_SEARCHSTO)) {
            q->storedist = 1;
        } else if (arg_is(x, a, "frommember") && i + 1 < remaining && (flags & G_SEARCH) &&
                   !q->from_loc) {
            q->member = x->argv[a + 1];
            q->memberl = x->argvlen[a + 1];
            if (r > 0 && centre_from_member(x, k, kl, o, q)) return -1;
            q->from_member = 1;
            i++;
        } else if (arg_is(x, a, "fromlonlat") && i + 2 < remaining && (flags & G_SEARCH) &&
                   !q->from_member) {
            if (parse_lonlat(x, a + 1, &q->shape.lon, &q->shape.lat)) return -1;
            q->from_loc = 1;
            i += 2;
        } else if (arg_is(x, a, "byradius") && i + 2 < remaining && (flags & G_SEARCH) &&
                   !q->by_box) {
            if (parse_radius(x, a + 1, &q->shape)) return -1;
            q->by_radius = 1;
            i += 2;
        } else if (arg_is(x, a, "bybox") && i + 3 < remaining && (flags & G_SEARCH) &&
                   !q->by_radius) {
            if (parse_box(x, a + 1, &q->shape)) return -1;
            q->by_box = 1;
            i += 3;
        } else {
            reply_syntax(x);
            return -1;
        }
    }
    if (q->store && (q->withdist || q->withhash || q->withcoord)) {
        reply_errf(x, "ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                   (flags & G_SEARCHSTO) ? "GEOSEARCHSTORE" : "STORE option in GEORADIUS");
        return -1;
    }
    if ((flags & G_SEARCH) && !(q->from_member || q->from_loc)) {
        reply_errf(x, "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %.*s",
                   (int)x->argvlen[0], x->argv[0]);
        return -1;
    }
    if ((flags & G_SEARCH) && !(q->by_radius || q->by_box)) {
        reply_errf(x, "ERR exactly one of BYRADIUS and BYBOX can be specified for %.*s",
                   (int)x->argvlen[0], x->argv[0]);
        return -1;
    }
    if (q->any && !q->count) {
        reply_err(x, "ERR the ANY argument requires COUNT argument");
        return -1;
    }
    return 0;
}

/* Replaces q->store with the points found (empty: deletes it). */
static void store_result(cmd_ctx *x, const greq *q, const zlist *all, const gpoint *p, size_t n) {
    zlist l;
    zlist_init(&l);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = zlist_add(&l, all->buf.p + p[i].mo, p[i].ml,
                       q->storedist ? p[i].dist / q->shape.conversion : p[i].score);
    if (rc) {
        reply_storage(x, rc);
    } else {
        store_txn *t = store_txn_begin(x->srv->st);
        rc = zs_store(x, t, q->store, q->storel, &l);
        if (db_finish(x, t, rc) == 0) resp_w_int(x->out, (long long)n);
    }
    zlist_free(&l);
}

static void reply_points(cmd_ctx *x, const greq *q, const zlist *all, const gpoint *p, size_t n) {
    size_t opts = (size_t)(q->withdist + q->withhash + q->withcoord);
    resp_w_array(x->out, n);
    for (size_t i = 0; i < n; i++) {
        if (opts) resp_w_array(x->out, opts + 1);
        resp_w_bulk(x->out, all->buf.p + p[i].mo, p[i].ml);
        if (q->withdist) reply_dist(x, p[i].dist / q->shape.conversion);
        if (q->withhash) resp_w_int(x->out, (long long)p[i].score);
        if (q->withcoord) {
            resp_w_array(x->out, 2);
            reply_coord(x, p[i].lon);
            reply_coord(x, p[i].lat);
        }
    }
}

static void georadius_generic(cmd_ctx *x, unsigned flags) {
    int src = (flags & G_SEARCHSTO) ? 2 : 1;
    const char *k = x->argv[src];
    size_t kl = x->argvlen[src];
    obj o;
    int r = obj_lookup(x, NULL, k, kl, STORE_T_ZSET, &o);
    if (r < 0) return;
    greq q;
    memset(&q, 0, sizeof q);
    int base;
    if (flags & G_COORDS) {
        base = 6;
        if (parse_lonlat(x, 2, &q.shape.lon, &q.shape.lat) || parse_radius(x, 4, &q.shape)) return;
    } else if (flags & G_MEMBER) {
        base = 5;
        if (r > 0) {
            q.member = x->argv[2];
            q.memberl = x->argvlen[2];
            if (centre_from_member(x, k, kl, &o, &q) || parse_radius(x, 3, &q.shape)) return;
        }
    } else {
        base = src + 1;
        if (flags & G_SEARCHSTO) {
            q.store = x->argv[1];
            q.storel = x->argvlen[1];
        }
    }
    if (parse_options(x, base, flags, r, &o, &q)) return;
    if (r == 0) { /* no source: the destination goes, as redis' */
        if (q.store) {
            q.shape.conversion = 1;
            store_result(x, &q, NULL, NULL, 0);
        } else {
            resp_w_array(x->out, 0);
        }
        return;
    }
    if (q.count && q.sort == SORT_NONE && !q.any) q.sort = SORT_ASC; /* the nearest N */
    zlist all;
    zlist_init(&all);
    gresult g = {0};
    int rc = search(x, k, kl, &o, &q.shape, q.any ? (size_t)q.count : 0, &all, &g);
    if (rc) {
        reply_storage(x, rc);
        goto out;
    }
    size_t n = g.n;
    if (q.count && (size_t)q.count < n) n = (size_t)q.count;
    if (q.sort != SORT_NONE && g.n > 1) /* qsort(NULL, 0) is undefined */
        qsort(g.p, g.n, sizeof *g.p, q.sort == SORT_ASC ? by_dist_asc : by_dist_desc);
    if (q.store)
        store_result(x, &q, &all, g.p, n);
    else
        reply_points(x, &q, &all, g.p, n);
out:
    free(g.p);
    zlist_free(&all);
}

/* GEORADIUS key lon lat radius unit [WITH...] [COUNT n [ANY]] [ASC|DESC] [STORE k] [STOREDIST k] */
void cmd_georadius(cmd_ctx *x) {
    georadius_generic(x, G_COORDS);
}
void cmd_georadius_ro(cmd_ctx *x) {
    georadius_generic(x, G_COORDS | G_NOSTORE);
}
/* GEORADIUSBYMEMBER key member radius unit ... */
void cmd_georadiusbymember(cmd_ctx *x) {
    georadius_generic(x, G_MEMBER);
}
void cmd_georadiusbymember_ro(cmd_ctx *x) {
    georadius_generic(x, G_MEMBER | G_NOSTORE);
}
/* GEOSEARCH key FROMMEMBER m|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit ... */
void cmd_geosearch(cmd_ctx *x) {
    georadius_generic(x, G_SEARCH);
}
/* GEOSEARCHSTORE dst src ... [STOREDIST] */
void cmd_geosearchstore(cmd_ctx *x) {
    georadius_generic(x, G_SEARCH | G_SEARCHSTO);
}
