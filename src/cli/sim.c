/* sim.c - `keel sim SCENARIO [flags]`: reads a scenario file, applies the
 * command-line overrides, runs it (sim_run.c) and prints one line per round,
 * CSV with a header or JSON (docs/simulator.md lists the columns).
 *
 * Exit status: 0 after the last round; 2 for a bad command line or a bad
 * scenario file ("file:line: message" on stderr); 1 for anything else (out
 * of memory, a planner error, a write error on stdout).
 */
#include "cli/sim.h"
#include "core/err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_FILE_MAX (64L * 1024 * 1024) /* refuse scenario files above 64 MiB */

typedef struct sim_opts {
    const char *path;
    bool json, header, moves;
    bool has_seed, has_rounds, has_rate;
    uint64_t seed;
    uint32_t rounds;
    double rate;
    const char *sets[32]; /* NAME=VALUE, applied in order */
    int nsets;
} sim_opts;

static void sim_usage(FILE *f) {
    fputs("usage: keel sim SCENARIO [--json] [--seed N] [--rounds N] [--rate BYTES_PER_S]\n"
          "                [--set NAME=VALUE]... [--no-header] [--moves]\n"
          "  Runs the rebalance planner round by round over the simulated cluster that\n"
          "  SCENARIO describes (a text file, see docs/simulator.md; '-' reads stdin), and\n"
          "  prints one line per round: CSV with a header, or JSON with --json.\n"
          "  --json        one JSON object per line instead of CSV\n"
          "  --seed N      noise seed (default: the file's `seed`, else 1)\n"
          "  --rounds N    rounds to run (default: the file's `rounds`, else 40)\n"
          "  --rate B      bytes/s copied by one move; 0 = moves land at once\n"
          "  --set K=V     planner setting, e.g. --set stop_ratio=1.05 (repeatable)\n"
          "  --no-header   CSV without its header line\n"
          "  --moves       also print every planned move with its reason on stderr\n",
          f);
}

/* ---- Input ---------------------------------------------------------------- */

static char *read_all(const char *path, size_t *len, char *err, size_t cap) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t room = 0;
    *len = 0;
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (room - *len < 4096) {
            room = room ? room * 2 : 65536;
            char *nb = (long)room > SIM_FILE_MAX * 2 ? NULL : realloc(buf, room);
            if (!nb) {
                snprintf(err, cap, "%s: larger than %ld bytes or out of memory", path,
                         SIM_FILE_MAX);
                goto fail;
            }
            buf = nb;
        }
        size_t n = fread(buf + *len, 1, room - *len, f);
        *len += n;
        if (n == 0) break;
    }
    if (ferror(f)) {
        snprintf(err, cap, "%s: read error", path);
        goto fail;
    }
    if (f != stdin) fclose(f);
    return buf;
fail:
    if (f != stdin) fclose(f);
    free(buf);
    return NULL;
}

/* ---- Output --------------------------------------------------------------- */

static void put_num(double v, const char *fmt, bool json) {
    if (isfinite(v))
        printf(fmt, v);
    else
        fputs(json ? "null" : "", stdout);
}

static void put_json_str(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* Items of a ';'-separated list as a JSON array of strings. */
static void put_json_list(const char *s) {
    putchar('[');
    for (bool first = true; *s; first = false) {
        const char *end = strchr(s, ';');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (!first) putchar(',');
        put_json_str(s, n);
        s += n + (end != NULL);
    }
    putchar(']');
}

static void put_why(const sim_row *row, bool json) {
    bool first = true;
    if (json) putchar('{');
    for (int w = 0; w <= PLAN_WHY_DISK_FLOOD; w++) {
        if (!row->why[w]) continue;
        printf(json ? "%s\"%s\":%zu" : "%s%s:%zu",
               first  ? ""
               : json ? ","
                      : ";",
               plan_why_name((plan_why)w), row->why[w]);
        first = false;
    }
    if (json) putchar('}');
}

static void put_stops(const plan_result *r, bool json) {
    if (json) putchar('[');
    for (size_t i = 0; i < r->nstops; i++) {
        if (i) putchar(json ? ',' : ';');
        if (json)
            put_json_str(r->stops[i].key, strlen(r->stops[i].key));
        else
            fputs(r->stops[i].key, stdout);
    }
    if (json) putchar(']');
}

static const char csv_header[] =
    "round,time_s,max_over_mean,min_over_mean,moves,bytes_moved,bytes_transferred,in_flight,"
    "cum_bytes_moved,floor,cum_moved_over_floor,episode,events,why,stops";

static void put_csv(const sim_row *row) {
    printf("%u,%.10g,", row->round, row->time_s);
    put_num(row->max_over_mean, "%.4f,", false);
    put_num(row->min_over_mean, "%.4f,", false);
    printf("%zu,%.0f,%.0f,%zu,%.0f,", row->moves, row->bytes_moved, row->bytes_transferred,
           row->in_flight, row->cum_bytes_moved);
    printf("%.6g,%.4f,%s,%s,", row->floor, row->cum_moved_over_floor,
           row->episode_open ? "open" : "closed", row->events);
    put_why(row, false);
    putchar(',');
    put_stops(row->plan, false);
    putchar('\n');
}

static void put_json(const sim_row *row) {
    printf("{\"round\":%u,\"time_s\":%.10g,\"max_over_mean\":", row->round, row->time_s);
    put_num(row->max_over_mean, "%.6g", true);
    fputs(",\"min_over_mean\":", stdout);
    put_num(row->min_over_mean, "%.6g", true);
    printf(",\"moves\":%zu,\"bytes_moved\":%.0f,\"bytes_transferred\":%.0f,\"in_flight\":%zu,"
           "\"cum_bytes_moved\":%.0f,\"floor\":%.6g,\"cum_moved_over_floor\":%.6g,"
           "\"episode_open\":%s,\"events\":",
           row->moves, row->bytes_moved, row->bytes_transferred, row->in_flight,
           row->cum_bytes_moved, row->floor, row->cum_moved_over_floor,
           row->episode_open ? "true" : "false");
    put_json_list(row->events);
    fputs(",\"why\":", stdout);
    put_why(row, true);
    fputs(",\"stops\":", stdout);
    put_stops(row->plan, true);
    fputs("}\n", stdout);
}

static int on_row(const sim_row *row, void *arg) {
    const sim_opts *o = arg;
    if (o->moves)
        for (size_t i = 0; i < row->plan->nmoves; i++) {
            const plan_move *mv = &row->plan->moves[i];
            char text[320];
            plan_move_describe(row->model, mv, text, sizeof text);
            fprintf(stderr, "round %u: partition %llu %s -> %s: %s\n", row->round,
                    (unsigned long long)mv->part_id, row->model->nodes[mv->from].id,
                    row->model->nodes[mv->to].id, text);
        }
    if (o->json)
        put_json(row);
    else
        put_csv(row);
    return ferror(stdout) ? KEEL_EIO : 0;
}

/* ---- Flags ---------------------------------------------------------------- */

static int flag_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || errno || *end || end == v || v[0] == '-' || x < lo || x > hi) {
        fprintf(stderr, "keel sim: %s needs a whole number from %llu to %llu, got '%s'\n", flag,
                (unsigned long long)lo, (unsigned long long)hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, sim_opts *o) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x;
        if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--no-header")) {
            o->header = false;
        } else if (!strcmp(a, "--moves")) {
            o->moves = true;
        } else if (!strcmp(a, "--seed")) {
            if (flag_u64(a, v, 0, UINT64_MAX, &o->seed)) return -1;
            o->has_seed = true, i++;
        } else if (!strcmp(a, "--rounds")) {
            if (flag_u64(a, v, 1, SIM_ROUNDS_MAX, &x)) return -1;
            o->rounds = (uint32_t)x, o->has_rounds = true, i++;
        } else if (!strcmp(a, "--rate")) {
            if (!v || sim_parse_num(v, &o->rate) || o->rate < 0) {
                fprintf(stderr, "keel sim: --rate needs bytes per second >= 0, got '%s'\n",
                        v ? v : "");
                return -1;
            }
            o->has_rate = true, i++;
        } else if (!strcmp(a, "--set")) {
            if (!v || !strchr(v, '=') || o->nsets == (int)(sizeof o->sets / sizeof *o->sets)) {
                fprintf(stderr, "keel sim: --set needs NAME=VALUE (at most 32 of them)\n");
                return -1;
            }
            o->sets[o->nsets++] = v, i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "keel sim: unknown flag '%s'\n", a);
            return -1;
        } else if (o->path) {
            fprintf(stderr, "keel sim: one scenario file only (got '%s' and '%s')\n", o->path, a);
            return -1;
        } else {
            o->path = a;
        }
    }
    if (!o->path) fprintf(stderr, "keel sim: a SCENARIO file is required\n");
    return o->path ? 0 : -1;
}

/* Applies the flags over what the file said. Returns 0 or -1 (message out). */
static int apply_overrides(const sim_opts *o, sim_scenario *sc) {
    char msg[256];
    if (o->has_seed) sc->seed = o->seed;
    if (o->has_rounds) sc->rounds = o->rounds;
    if (o->has_rate) sc->rate = o->rate;
    for (int i = 0; i < o->nsets; i++) {
        char name[64];
        const char *eq = strchr(o->sets[i], '=');
        size_t n = (size_t)(eq - o->sets[i]);
        double v;
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1),
                 o->sets[i]);
        int idx = sim_setting_find(name);
        if (idx < 0 || sim_parse_num(eq + 1, &v) || sim_setting_set(&sc->model.settings, idx, v)) {
            fprintf(stderr, "keel sim: --set %s: unknown setting or bad value (settings: %s)\n",
                    o->sets[i], sim_setting_names());
            return -1;
        }
    }
    if (plan_model_check(&sc->model, msg, sizeof msg)) {
        fprintf(stderr, "keel sim: --set: %s\n", msg);
        return -1;
    }
    return 0;
}

int sim_main(int argc, char **argv, const char *self) {
    sim_opts o = {.header = true};
    sim_scenario sc;
    char err[512];
    size_t len;
    int status = 2;
    (void)self;
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        sim_usage(stdout);
        return 0;
    }
    if (parse_args(argc, argv, &o)) {
        sim_usage(stderr);
        return 2;
    }
    char *text = read_all(o.path, &len, err, sizeof err);
    if (!text) {
        fprintf(stderr, "keel sim: %s\n", err);
        return 2;
    }
    sim_scenario_init(&sc);
    const char *name = strcmp(o.path, "-") == 0 ? "<stdin>" : o.path;
    int rc = sim_scenario_parse(&sc, name, text, len, err, sizeof err);
    free(text);
    if (rc) {
        fprintf(stderr, "keel sim: %s\n", rc == KEEL_ENOMEM ? "out of memory" : err);
        status = rc == KEEL_ENOMEM ? 1 : 2;
        goto done;
    }
    if (apply_overrides(&o, &sc)) goto done;
    if (!o.json && o.header) printf("%s\n", csv_header);
    err[0] = 0;
    rc = sim_run(&sc, on_row, &o, err, sizeof err);
    if (fflush(stdout) && !rc) rc = KEEL_EIO;
    status = rc ? 1 : 0;
    if (rc) fprintf(stderr, "keel sim: %s\n", err[0] ? err : keel_strerror(rc));
done:
    sim_scenario_close(&sc);
    return status;
}
