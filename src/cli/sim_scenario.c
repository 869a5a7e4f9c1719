/* sim_scenario.c - the scenario file parser of `keel sim`: text in,
 * sim_scenario out, no I/O (docs/simulator.md has the format).
 *
 * One statement per line, words separated by blanks, '#' to the end of the
 * line a comment. The first word picks the statement from a table and each
 * statement parses its own words, so adding a keyword is one function and
 * one table row. Every value is range-checked before it is stored, and
 * every error reads "file:line: message".
 *
 * Checks that span lines run once at the end, over the events sorted by
 * round: a node named by an event exists by then (declared, or added by an
 * earlier add-node), selectors name existing partitions, the planner
 * settings pass plan_model_check after every `set`, and no event falls after
 * the last round. Lines may therefore come in any order, with one exception:
 * `partitions` places on the nodes declared above it.
 *
 * Randomness at parse time (bytes-spread, load-spread) comes from a
 * generator seeded by the line number, never by --seed: the seed drives the
 * metric noise only, so one file always describes one cluster.
 */
#include "cli/sim.h"
#include "core/err.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_WORDS_MAX 64 /* words on one line */

typedef struct parser {
    sim_scenario *sc;
    const char *name;
    int line;
    char *err;
    size_t cap;
    size_t rr;          /* round-robin cursor of the default placement */
    int settings_line;  /* last top-level `set`, for settings errors */
    int place_line;     /* first `place least`, 0 if none */
    int rounds_line;    /* the `rounds` line, 0 if none */
    size_t node_events; /* add-node events, to bound the node count */
    int lines;          /* lines read; whole-file errors point at the last */
} parser;

static int perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *p, const char *fmt, ...) {
    int n = p->line > 0 ? snprintf(p->err, p->cap, "%s:%d: ", p->name, p->line)
                        : snprintf(p->err, p->cap, "%s: ", p->name);
    if (n >= 0 && (size_t)n < p->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return KEEL_EINVAL;
}

/* ---- Numbers, ids, selectors ---------------------------------------------- */

int sim_parse_num(const char *s, double *out) {
    static const struct {
        const char *suffix;
        double mul;
    } units[] = {{"", 1},
                 {"k", 1e3},
                 {"K", 1e3},
                 {"M", 1e6},
                 {"G", 1e9},
                 {"T", 1e12},
                 {"Ki", 1024.0},
                 {"Mi", 1048576.0},
                 {"Gi", 1073741824.0},
                 {"Ti", 1099511627776.0}};
    if (!s || !(isdigit((unsigned char)s[0]) || s[0] == '.' || s[0] == '-' || s[0] == '+'))
        return KEEL_EINVAL;
    if (strpbrk(s, "xXpP")) return KEEL_EINVAL; /* no hex floats */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s) return KEEL_EINVAL;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            v *= units[i].mul;
            if (!isfinite(v)) return KEEL_EINVAL;
            *out = v;
            return 0;
        }
    return KEEL_EINVAL;
}

static int num(parser *p, const char *what, const char *s, double lo, double hi, double *out) {
    if (!s) return perr(p, "%s: missing value", what);
    if (sim_parse_num(s, out) || *out < lo || *out > hi)
        return perr(p, "%s: expected a number from %g to %g, got '%s'", what, lo, hi, s);
    return 0;
}

static int count(parser *p, const char *what, const char *s, double lo, double hi, uint64_t *out) {
    double v;
    int rc = num(p, what, s, lo, hi, &v);
    if (rc) return rc;
    if (v != floor(v)) return perr(p, "%s: expected a whole number, got '%s'", what, s);
    *out = (uint64_t)v;
    return 0;
}

/* Node ids and racks: letters, digits, '_', '.', '-' (no ':' or ',', which
 * the output uses as separators). */
static int ident(parser *p, const char *what, const char *s, char *out) {
    if (!s) return perr(p, "%s: missing", what);
    size_t n = strlen(s);
    if (n == 0 || n > PLAN_ID_MAX)
        return perr(p, "%s: '%s' must be 1 to %d characters", what, s, PLAN_ID_MAX);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return perr(p, "%s: '%s' may hold only letters, digits, '_', '.' and '-'", what, s);
    memcpy(out, s, n + 1);
    return 0;
}

static int u64_of(const char *s, const char *end, uint64_t *out) {
    if (s == end || end - s > 19) return -1;
    uint64_t v = 0;
    for (; s < end; s++) {
        if (!isdigit((unsigned char)*s)) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* "all", or a comma list of partition ids and inclusive ranges "A-B". */
static int selector(parser *p, const char *s, sim_sel *sel) {
    memset(sel, 0, sizeof *sel);
    if (!s) return perr(p, "partition selector: missing (ids like 0,4,8-11, or all)");
    if (strcmp(s, "all") == 0) {
        sel->all = true;
        return 0;
    }
    const char *c = s;
    for (;;) {
        const char *comma = strchr(c, ',');
        const char *end = comma ? comma : c + strlen(c);
        const char *dash = memchr(c, '-', (size_t)(end - c));
        sim_range r;
        if (sel->n == SIM_SEL_MAX)
            return perr(p, "partition selector '%s': more than %d ranges", s, SIM_SEL_MAX);
        if (u64_of(c, dash ? dash : end, &r.lo) || (dash && u64_of(dash + 1, end, &r.hi)))
            return perr(p, "partition selector '%s': expected ids like 0,4,8-11 or all", s);
        if (!dash) r.hi = r.lo;
        if (r.hi < r.lo)
            return perr(p, "partition selector '%s': range %llu-%llu is backwards", s,
                        (unsigned long long)r.lo, (unsigned long long)r.hi);
        sel->r[sel->n++] = r;
        if (!comma) return 0;
        c = comma + 1;
    }
}

/* ---- Planner settings by name --------------------------------------------- */

static const struct {
    const char *name;
    size_t off;
    bool u32;
} settings_tab[] = {
    {"load_weight", offsetof(plan_settings, load_weight), false},
    {"start_ratio", offsetof(plan_settings, start_ratio), false},
    {"stop_ratio", offsetof(plan_settings, stop_ratio), false},
    {"max_moves", offsetof(plan_settings, max_moves), true},
    {"max_moves_per_round", offsetof(plan_settings, max_moves), true},
    {"min_gain", offsetof(plan_settings, min_gain), false},
    {"min_residence", offsetof(plan_settings, min_residence_s), false},
    {"disk_low", offsetof(plan_settings, disk_low), false},
    {"disk_high", offsetof(plan_settings, disk_high), false},
    {"disk_flood", offsetof(plan_settings, disk_flood), false},
    {"max_metrics_age", offsetof(plan_settings, max_metrics_age_s), false},
};

int sim_setting_find(const char *name) {
    for (size_t i = 0; i < sizeof settings_tab / sizeof *settings_tab; i++)
        if (strcmp(name, settings_tab[i].name) == 0) return (int)i;
    return -1;
}

int sim_setting_set(plan_settings *s, int idx, double v) {
    if (idx < 0 || (size_t)idx >= sizeof settings_tab / sizeof *settings_tab || !isfinite(v))
        return KEEL_EINVAL;
    char *field = (char *)s + settings_tab[idx].off;
    if (settings_tab[idx].u32) {
        if (v < 0 || v > UINT32_MAX || v != floor(v)) return KEEL_EINVAL;
        *(uint32_t *)field = (uint32_t)v;
    } else {
        *(double *)field = v;
    }
    return 0;
}

const char *sim_setting_name(int idx) {
    if (idx < 0 || (size_t)idx >= sizeof settings_tab / sizeof *settings_tab) return "unknown";
    return settings_tab[idx].name;
}

const char *sim_setting_names(void) {
    return "load_weight start_ratio stop_ratio max_moves min_gain min_residence disk_low "
           "disk_high disk_flood max_metrics_age";
}

/* plan_model_check on the settings alone (a model with no nodes). */
static int check_settings(const plan_settings *s, char *msg, size_t cap) {
    plan_model scratch;
    plan_model_init(&scratch);
    scratch.settings = *s;
    return plan_model_check(&scratch, msg, cap);
}

static int set_one(parser *p, plan_settings *s, char **w, int nw, int *idx, double *v) {
    if (nw != 2) return perr(p, "set: expected 'set NAME VALUE'");
    *idx = sim_setting_find(w[0]);
    if (*idx < 0)
        return perr(p, "set: unknown setting '%s' (one of: %s)", w[0], sim_setting_names());
    if (sim_parse_num(w[1], v) || sim_setting_set(s, *idx, *v))
        return perr(p, "set %s: bad value '%s'", w[0], w[1]);
    return 0;
}

/* ---- Nodes ---------------------------------------------------------------- */

enum { OPT_STATE = 1, OPT_RACKS = 2, OPT_PREFIX = 4 };

typedef struct node_opts {
    plan_node node;
    uint64_t racks;           /* nodes: spread over racks r1..rK */
    char prefix[PLAN_ID_MAX]; /* nodes: id prefix, default "n" */
} node_opts;

static int node_options(parser *p, char **w, int nw, unsigned allow, node_opts *o) {
    for (int i = 0; i < nw; i += 2) {
        const char *k = w[i], *v = i + 1 < nw ? w[i + 1] : NULL;
        int rc;
        if (!v) return perr(p, "%s: missing value", k);
        if (strcmp(k, "capacity") == 0)
            rc = num(p, "capacity", v, 0, 1e12, &o->node.capacity);
        else if (strcmp(k, "rack") == 0)
            rc = ident(p, "rack", v, o->node.rack);
        else if (strcmp(k, "disk") == 0)
            rc = num(p, "disk", v, 0, 1e18, &o->node.disk_capacity);
        else if (strcmp(k, "state") == 0 && (allow & OPT_STATE))
            rc = plan_node_state_parse(v, &o->node.state)
                     ? perr(p, "state: expected up, suspect, down or draining, got '%s'", v)
                     : 0;
        else if (strcmp(k, "racks") == 0 && (allow & OPT_RACKS))
            rc = count(p, "racks", v, 1, SIM_NODES_MAX, &o->racks);
        else if (strcmp(k, "prefix") == 0 && (allow & OPT_PREFIX))
            rc = strlen(v) > PLAN_ID_MAX - 6 ? perr(p, "prefix: too long")
                                             : ident(p, "prefix", v, o->prefix);
        else
            return perr(p, "unknown node option '%s' (capacity, rack, disk%s%s)", k,
                        allow & OPT_STATE ? ", state" : "",
                        allow & OPT_RACKS ? ", racks, prefix" : "");
        if (rc) return rc;
    }
    return 0;
}

static int add_node(parser *p, const plan_node *n) {
    if (p->sc->model.nnodes >= SIM_NODES_MAX) return perr(p, "more than %d nodes", SIM_NODES_MAX);
    int rc = plan_model_add_node(&p->sc->model, n);
    if (rc == KEEL_EEXIST) return perr(p, "node '%s' is declared twice", n->id);
    if (rc == KEEL_ENOMEM) return rc;
    return rc < 0 ? perr(p, "node '%s': %s", n->id, keel_strerror(rc)) : 0;
}

static int st_node(parser *p, char **w, int nw) {
    node_opts o = {0};
    int rc;
    if (nw < 1) return perr(p, "node: expected 'node ID [capacity C] [rack R] [disk BYTES]'");
    plan_node_default(&o.node, "");
    if ((rc = ident(p, "node id", w[0], o.node.id)) ||
        (rc = node_options(p, w + 1, nw - 1, OPT_STATE, &o)))
        return rc;
    return add_node(p, &o.node);
}

static int st_nodes(parser *p, char **w, int nw) {
    node_opts o = {.prefix = "n"};
    uint64_t n;
    int rc;
    if (nw < 1) return perr(p, "nodes: expected 'nodes N [capacity C] [racks K] ...'");
    plan_node_default(&o.node, "");
    if ((rc = count(p, "nodes", w[0], 1, SIM_NODES_MAX, &n)) ||
        (rc = node_options(p, w + 1, nw - 1, OPT_STATE | OPT_RACKS | OPT_PREFIX, &o)))
        return rc;
    if (o.racks && o.node.rack[0]) return perr(p, "nodes: give rack or racks, not both");
    unsigned next = 1;
    for (uint64_t i = 0; i < n; i++) {
        plan_node nd = o.node;
        do /* the next free PREFIX<k>, so later `nodes` lines continue the count */
            snprintf(nd.id, sizeof nd.id, "%s%u", o.prefix, next++);
        while (plan_model_find_node(&p->sc->model, nd.id) >= 0);
        if (o.racks)
            snprintf(nd.rack, sizeof nd.rack, "r%llu", (unsigned long long)(i % o.racks + 1));
        if ((rc = add_node(p, &nd))) return rc;
    }
    return 0;
}

/* ---- Partitions ----------------------------------------------------------- */

typedef struct qty {
    double base, zipf, spread; /* value = base, Zipf-skewed and/or spread */
} qty;

typedef struct part_opts {
    qty bytes, load;
    int32_t *on; /* node indexes for round-robin, or NULL: all up nodes */
    size_t non;
    bool least, pinned;
} part_opts;

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Value k of n: Zipf rank k scaled so the line's mean stays base, then a
 * uniform spread of +-spread. */
static double qty_value(const qty *q, uint64_t k, uint64_t n, double harmonic, uint64_t *rng) {
    double v = q->base;
    if (q->zipf > 0) v = q->base * (double)n * pow((double)(k + 1), -q->zipf) / harmonic;
    if (q->spread > 0) v *= 1 + q->spread * ((double)(splitmix(rng) >> 11) * 0x1p-52 - 1);
    return v;
}

static double harmonic(const qty *q, uint64_t n) {
    double h = 0;
    for (uint64_t k = 0; q->zipf > 0 && k < n; k++)
        h += pow((double)(k + 1), -q->zipf);
    return h;
}

static int on_list(parser *p, const char *s, part_opts *o) {
    size_t n = 1;
    for (const char *c = s; *c; c++)
        n += *c == ',';
    free(o->on);
    o->on = malloc(n * sizeof *o->on);
    if (!o->on) return KEEL_ENOMEM;
    o->non = 0;
    char id[PLAN_ID_MAX + 1];
    for (const char *c = s;;) {
        const char *end = strchr(c, ',');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        char word[PLAN_ID_MAX + 2];
        if (len == 0 || len > PLAN_ID_MAX) return perr(p, "on: bad node list '%s'", s);
        memcpy(word, c, len);
        word[len] = 0;
        int rc = ident(p, "on", word, id);
        if (rc) return rc;
        int idx = plan_model_find_node(&p->sc->model, id);
        if (idx < 0) return perr(p, "on: unknown node '%s' (declare it above this line)", id);
        o->on[o->non++] = idx;
        if (!end) return 0;
        c = end + 1;
    }
}

static int part_option(parser *p, const char *k, const char *v, part_opts *o) {
    static const struct {
        const char *word;
        size_t off; /* into part_opts */
        double hi;
    } tab[] = {
        {"bytes", offsetof(part_opts, bytes.base), 1e18},
        {"bytes-zipf", offsetof(part_opts, bytes.zipf), 10},
        {"bytes-spread", offsetof(part_opts, bytes.spread), 1},
        {"load", offsetof(part_opts, load.base), 1e15},
        {"load-zipf", offsetof(part_opts, load.zipf), 10},
        {"load-spread", offsetof(part_opts, load.spread), 1},
    };
    for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
        if (strcmp(k, tab[i].word) == 0)
            return num(p, k, v, 0, tab[i].hi, (double *)((char *)o + tab[i].off));
    if (strcmp(k, "on") == 0) return v ? on_list(p, v, o) : perr(p, "on: missing node list");
    if (strcmp(k, "place") == 0) {
        if (v && strcmp(v, "least") == 0)
            o->least = true;
        else if (!v || strcmp(v, "round-robin") != 0)
            return perr(p, "place: expected round-robin or least");
        return 0;
    }
    return perr(p,
                "unknown partitions option '%s' (bytes, bytes-zipf, bytes-spread, load, "
                "load-zipf, load-spread, on, place, pinned)",
                k);
}

/* Where partition k of this line goes, or -1 (orphan: plan_place later). */
static int place_rr(parser *p, const part_opts *o, uint64_t k, int32_t *node) {
    const plan_model *m = &p->sc->model;
    if (o->least) {
        *node = -1;
        return 0;
    }
    if (o->on) {
        *node = o->on[k % o->non];
        return 0;
    }
    for (size_t tries = 0; tries < m->nnodes; tries++) {
        size_t i = p->rr++ % m->nnodes;
        if (m->nodes[i].state == PLAN_NODE_UP && m->nodes[i].capacity > 0) {
            *node = (int32_t)i;
            return 0;
        }
    }
    return perr(p, "partitions: no up node of capacity > 0 declared above this line");
}

static int add_parts(parser *p, uint64_t n, const part_opts *o) {
    plan_model *m = &p->sc->model;
    if (m->nparts + n > SIM_PARTS_MAX) return perr(p, "more than %d partitions", SIM_PARTS_MAX);
    int rc = plan_model_reserve_parts(m, n);
    if (rc) return rc;
    double hb = harmonic(&o->bytes, n), hl = harmonic(&o->load, n);
    uint64_t rng = 0x5eedULL ^ ((uint64_t)p->line << 32);
    for (uint64_t k = 0; k < n; k++) {
        plan_part pt;
        int32_t node;
        plan_part_default(&pt, m->nparts);
        if ((rc = place_rr(p, o, k, &node))) return rc;
        pt.replicas[0] = node;
        pt.nreplicas = node >= 0;
        pt.bytes = qty_value(&o->bytes, k, n, hb, &rng);
        pt.load = qty_value(&o->load, k, n, hl, &rng);
        pt.pinned = o->pinned;
        if ((rc = plan_model_add_part(m, &pt))) return rc;
    }
    if (o->least && !p->place_line) p->place_line = p->line;
    return 0;
}

static int st_partitions(parser *p, char **w, int nw) {
    part_opts o = {0};
    uint64_t n;
    int rc;
    if (nw < 1) return perr(p, "partitions: expected 'partitions N [bytes B] [load L] ...'");
    if ((rc = count(p, "partitions", w[0], 1, SIM_PARTS_MAX, &n))) return rc;
    for (int i = 1; i < nw && !rc; i++) {
        if (strcmp(w[i], "pinned") == 0) {
            o.pinned = true;
            continue;
        }
        rc = part_option(p, w[i], i + 1 < nw ? w[i + 1] : NULL, &o);
        i++; /* the option's value */
    }
    if (!rc) rc = add_parts(p, n, &o);
    free(o.on);
    return rc;
}

/* ---- Run parameters ------------------------------------------------------- */

static int st_rounds(parser *p, char **w, int nw) {
    uint64_t n;
    int rc = nw == 1 ? count(p, "rounds", w[0], 1, SIM_ROUNDS_MAX, &n)
                     : perr(p, "rounds: expected 'rounds N'");
    if (!rc) p->sc->rounds = (uint32_t)n, p->rounds_line = p->line;
    return rc;
}

static int st_seed(parser *p, char **w, int nw) {
    if (nw != 1 || u64_of(w[0], w[0] + strlen(w[0]), &p->sc->seed))
        return perr(p, "seed: expected 'seed N' with N a whole number below 10^19");
    return 0;
}

static int st_round_seconds(parser *p, char **w, int nw) {
    if (nw != 1) return perr(p, "round-seconds: expected 'round-seconds S'");
    int rc = num(p, "round-seconds", w[0], 1e-3, 1e9, &p->sc->round_s);
    return rc;
}

static int st_rate(parser *p, char **w, int nw) {
    if (nw != 1) return perr(p, "rate: expected 'rate BYTES_PER_SECOND' (0 = instant moves)");
    return num(p, "rate", w[0], 0, 1e15, &p->sc->rate);
}

static int st_concurrency(parser *p, char **w, int nw) {
    if (nw == 0 || nw % 2)
        return perr(p, "concurrency: expected 'concurrency [in N] [out N] [cluster N|auto]'");
    for (int i = 0; i < nw; i += 2) {
        uint64_t v;
        int rc = 0;
        if (strcmp(w[i], "cluster") == 0 && strcmp(w[i + 1], "auto") == 0) {
            p->sc->max_cluster = -1;
            continue;
        }
        if ((rc = count(p, w[i], w[i + 1], 0, 1e6, &v))) return rc;
        if (strcmp(w[i], "in") == 0)
            p->sc->max_in = (uint32_t)v;
        else if (strcmp(w[i], "out") == 0)
            p->sc->max_out = (uint32_t)v;
        else if (strcmp(w[i], "cluster") == 0)
            p->sc->max_cluster = (int64_t)v;
        else
            return perr(p, "concurrency: unknown limit '%s' (in, out, cluster)", w[i]);
    }
    return 0;
}

static int noise(parser *p, const char *what, char **w, int nw, double *out) {
    if (nw != 1) return perr(p, "%s: expected '%s F' with 0 <= F < 1", what, what);
    int rc = num(p, what, w[0], 0, 1, out);
    if (!rc && *out >= 1) rc = perr(p, "%s: must be below 1, got '%s'", what, w[0]);
    return rc;
}

static int st_noise(parser *p, char **w, int nw) {
    return noise(p, "noise", w, nw, &p->sc->noise_load);
}
static int st_node_noise(parser *p, char **w, int nw) {
    return noise(p, "node-noise", w, nw, &p->sc->noise_node);
}
static int st_bytes_noise(parser *p, char **w, int nw) {
    return noise(p, "bytes-noise", w, nw, &p->sc->noise_bytes);
}

static int st_set(parser *p, char **w, int nw) {
    int idx;
    double v;
    int rc = set_one(p, &p->sc->model.settings, w, nw, &idx, &v);
    if (!rc) p->settings_line = p->line;
    return rc;
}

/* ---- Events: at round R KIND ... ------------------------------------------ */

static int ev_node(parser *p, char **w, int nw, sim_event *ev) {
    if (nw != 1) return perr(p, "expected exactly one node id");
    return ident(p, "node id", w[0], ev->node.id);
}

static int ev_add_node(parser *p, char **w, int nw, sim_event *ev) {
    node_opts o = {0};
    int rc;
    if (nw < 1) return perr(p, "add-node: expected 'add-node ID [capacity C] [rack R] [disk D]'");
    plan_node_default(&o.node, "");
    if ((rc = ident(p, "node id", w[0], o.node.id)) || (rc = node_options(p, w + 1, nw - 1, 0, &o)))
        return rc;
    ev->node = o.node;
    return 0;
}

static int ev_set_capacity(parser *p, char **w, int nw, sim_event *ev) {
    int rc;
    if (nw != 2) return perr(p, "set-capacity: expected 'set-capacity ID C'");
    if ((rc = ident(p, "node id", w[0], ev->node.id))) return rc;
    return num(p, "capacity", w[1], 0, 1e12, &ev->value);
}

static int ev_set_qty(parser *p, char **w, int nw, sim_event *ev) {
    int rc;
    if (nw != 2) return perr(p, "expected a partition selector and a value");
    if ((rc = selector(p, w[0], &ev->sel))) return rc;
    return num(p, "value", w[1], 0, 1e18, &ev->value);
}

static int ev_set(parser *p, char **w, int nw, sim_event *ev) {
    plan_settings scratch;
    plan_settings_default(&scratch);
    return set_one(p, &scratch, w, nw, &ev->setting, &ev->value);
}

static const struct {
    const char *word;
    sim_ev_kind kind;
    int (*parse)(parser *p, char **w, int nw, sim_event *ev);
} event_tab[] = {
    {"add-node", SIM_EV_ADD_NODE, ev_add_node},
    {"remove-node", SIM_EV_REMOVE_NODE, ev_node},
    {"drain", SIM_EV_DRAIN, ev_node},
    {"undrain", SIM_EV_UNDRAIN, ev_node},
    {"fail-node", SIM_EV_FAIL_NODE, ev_node},
    {"recover-node", SIM_EV_RECOVER_NODE, ev_node},
    {"set-capacity", SIM_EV_SET_CAPACITY, ev_set_capacity},
    {"stale", SIM_EV_STALE, ev_node},
    {"set-load", SIM_EV_SET_LOAD, ev_set_qty},
    {"set-bytes", SIM_EV_SET_BYTES, ev_set_qty},
    {"set", SIM_EV_SET, ev_set},
};

const char *sim_event_name(sim_ev_kind kind) {
    for (size_t i = 0; i < sizeof event_tab / sizeof *event_tab; i++)
        if (event_tab[i].kind == kind) return event_tab[i].word;
    return "unknown";
}

static int st_at(parser *p, char **w, int nw) {
    sim_scenario *sc = p->sc;
    uint64_t round;
    int rc;
    if (nw < 3 || strcmp(w[0], "round") != 0) return perr(p, "at: expected 'at round R EVENT ...'");
    if ((rc = count(p, "at round", w[1], 1, SIM_ROUNDS_MAX, &round))) return rc;
    for (size_t i = 0; i < sizeof event_tab / sizeof *event_tab; i++) {
        if (strcmp(w[2], event_tab[i].word) != 0) continue;
        if (sc->nevents == sc->events_cap) {
            size_t cap = sc->events_cap ? sc->events_cap * 2 : 16;
            sim_event *e = realloc(sc->events, cap * sizeof *e);
            if (!e) return KEEL_ENOMEM;
            sc->events = e;
            sc->events_cap = cap;
        }
        sim_event *ev = &sc->events[sc->nevents];
        memset(ev, 0, sizeof *ev);
        ev->round = (uint32_t)round;
        ev->line = p->line;
        ev->kind = event_tab[i].kind;
        if ((rc = event_tab[i].parse(p, w + 3, nw - 3, ev))) return rc;
        sc->nevents++;
        p->node_events += ev->kind == SIM_EV_ADD_NODE;
        return 0;
    }
    return perr(p,
                "unknown event '%s' (add-node, remove-node, drain, undrain, fail-node, "
                "recover-node, set-capacity, stale, set-load, set-bytes, set)",
                w[2]);
}

/* ---- Lines ---------------------------------------------------------------- */

static const struct {
    const char *word;
    int (*fn)(parser *p, char **w, int nw);
} stmt_tab[] = {
    {"rounds", st_rounds},
    {"seed", st_seed},
    {"round-seconds", st_round_seconds},
    {"rate", st_rate},
    {"concurrency", st_concurrency},
    {"noise", st_noise},
    {"node-noise", st_node_noise},
    {"bytes-noise", st_bytes_noise},
    {"set", st_set},
    {"node", st_node},
    {"nodes", st_nodes},
    {"partitions", st_partitions},
    {"at", st_at},
};

static int statement(parser *p, char *text) {
    char *w[SIM_WORDS_MAX];
    int nw = 0;
    char *hash = strchr(text, '#');
    if (hash) *hash = 0;
    for (char *save = NULL, *t = strtok_r(text, " \t\r\v\f", &save); t;
         t = strtok_r(NULL, " \t\r\v\f", &save)) {
        if (nw == SIM_WORDS_MAX) return perr(p, "more than %d words on one line", SIM_WORDS_MAX);
        w[nw++] = t;
    }
    if (nw == 0) return 0;
    for (size_t i = 0; i < sizeof stmt_tab / sizeof *stmt_tab; i++)
        if (strcmp(w[0], stmt_tab[i].word) == 0) return stmt_tab[i].fn(p, w + 1, nw - 1);
    return perr(p,
                "unknown statement '%s' (rounds, seed, round-seconds, rate, concurrency, "
                "noise, node-noise, bytes-noise, set, node, nodes, partitions, at)",
                w[0]);
}

/* ---- Whole-file checks ---------------------------------------------------- */

static int cmp_event(const void *a, const void *b) {
    const sim_event *x = a, *y = b;
    if (x->round != y->round) return x->round < y->round ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

static bool sel_in_range(const sim_sel *s, size_t nparts) {
    for (int i = 0; i < s->n; i++)
        if (s->r[i].hi >= nparts) return false;
    return true;
}

/* One event against the nodes and settings as they stand at its round. */
static int check_event(parser *p, plan_model *scratch, const sim_event *ev) {
    char msg[256];
    p->line = ev->line;
    if (ev->round > p->sc->rounds)
        return perr(p, "event at round %u comes after the last round (rounds %u)", ev->round,
                    p->sc->rounds);
    switch (ev->kind) {
    case SIM_EV_ADD_NODE: {
        int rc = plan_model_add_node(scratch, &ev->node);
        if (rc == KEEL_EEXIST) return perr(p, "add-node: node '%s' already exists", ev->node.id);
        return rc < 0 ? (rc == KEEL_ENOMEM ? rc : perr(p, "add-node: %s", keel_strerror(rc))) : 0;
    }
    case SIM_EV_SET_LOAD:
    case SIM_EV_SET_BYTES:
        if (!sel_in_range(&ev->sel, p->sc->model.nparts))
            return perr(p, "partition selector names a partition >= %zu (ids run from 0)",
                        p->sc->model.nparts);
        return 0;
    case SIM_EV_SET:
        sim_setting_set(&scratch->settings, ev->setting, ev->value);
        return check_settings(&scratch->settings, msg, sizeof msg) ? perr(p, "set: %s", msg) : 0;
    default:
        if (plan_model_find_node(scratch, ev->node.id) < 0)
            return perr(p, "unknown node '%s' (not declared, nor added by an earlier event)",
                        ev->node.id);
        return 0;
    }
}

static int check_events(parser *p) {
    sim_scenario *sc = p->sc;
    plan_model scratch;
    int rc = 0;
    if (sc->nevents) qsort(sc->events, sc->nevents, sizeof *sc->events, cmp_event);
    plan_model_init(&scratch);
    scratch.settings = sc->model.settings;
    for (size_t i = 0; i < sc->model.nnodes && !rc; i++)
        rc = plan_model_add_node(&scratch, &sc->model.nodes[i]) < 0 ? KEEL_ENOMEM : 0;
    for (size_t i = 0; i < sc->nevents && !rc; i++)
        rc = check_event(p, &scratch, &sc->events[i]);
    plan_model_close(&scratch);
    return rc;
}

static int finish(parser *p) {
    sim_scenario *sc = p->sc;
    char msg[256];
    int rc;
    p->line = p->settings_line;
    if (check_settings(&sc->model.settings, msg, sizeof msg)) return perr(p, "set: %s", msg);
    p->line = p->lines;
    if (sc->model.nnodes == 0)
        return perr(p, "end of file: no nodes (declare some with 'nodes N' or 'node ID')");
    if (sc->model.nnodes + p->node_events > SIM_NODES_MAX)
        return perr(p, "more than %d nodes with those added by events", SIM_NODES_MAX);
    if (p->place_line) {
        size_t unplaced = 0;
        p->line = p->place_line;
        if ((rc = plan_place(&sc->model, NULL, &unplaced)))
            return rc == KEEL_ENOMEM ? rc : perr(p, "place least: %s", keel_strerror(rc));
        if (unplaced)
            return perr(p, "place least: %zu partitions found no eligible node", unplaced);
    }
    if ((rc = plan_model_check(&sc->model, msg, sizeof msg)))
        return rc == KEEL_ENOMEM ? rc : perr(p, "%s", msg);
    return check_events(p);
}

int sim_scenario_parse(sim_scenario *sc, const char *name, const char *text, size_t len, char *err,
                       size_t cap) {
    parser p = {.sc = sc, .name = name, .err = err, .cap = cap};
    char buf[SIM_LINE_MAX + 1];
    size_t pos = 0;
    int rc;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        p.line++;
        if (n > SIM_LINE_MAX) return perr(&p, "line longer than %d bytes", SIM_LINE_MAX);
        memcpy(buf, text + pos, n);
        buf[n] = 0;
        if (strlen(buf) != n) return perr(&p, "NUL byte: not a text file");
        if ((rc = statement(&p, buf))) return rc;
        pos += n + 1;
    }
    p.lines = p.line;
    return finish(&p);
}

void sim_scenario_init(sim_scenario *sc) {
    memset(sc, 0, sizeof *sc);
    plan_model_init(&sc->model);
    sc->rounds = 40;
    sc->seed = 1;
    sc->round_s = 10;
    sc->rate = 100e6;
    sc->max_in = 2;
    sc->max_out = 2;
    sc->max_cluster = -1;
}

void sim_scenario_close(sim_scenario *sc) {
    if (!sc) return;
    plan_model_close(&sc->model);
    free(sc->events);
    sim_scenario_init(sc);
}
