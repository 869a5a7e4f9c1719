/* plan.c - `keel plan --model FILE [--json]`: a dry run of the planner on a
 * cluster model read from a JSON file (docs/planner.md). Prints every move
 * with its reason, the floor and efficiency, and why planning stopped.
 *
 * Exit status: 0 with a plan (even an empty one), 2 for a bad command line
 * or a model that does not read, parse or pass the schema (the message names
 * the field), 1 for anything else (out of memory).
 */
#include "core/err.h"
#include "planner/planner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_MODEL_MAX (1024L * 1024 * 1024) /* refuse model files above 1 GiB */

static void plan_usage(FILE *f) {
    fputs("usage: keel plan --model FILE [--json]\n"
          "       keel plan --coord HOST:PORT[,...] [--json] [--password PW]\n"
          "  Plans one rebalance round for the cluster described in FILE (JSON; see\n"
          "  docs/planner.md) and prints the moves with their reasons.\n"
          "  With --coord, asks a running coordinator for a dry run on live metrics.\n"
          "  --json   print the plan as one JSON object instead of a table\n",
          f);
}

/* Reads a whole file. Returns a malloc'd NUL-terminated buffer or NULL with
 * a message in err. */
static char *read_file(const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "--model %s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, room = 0;
    for (;;) {
        if (room - len < 65536) {
            room = room ? room * 2 : 1 << 16;
            char *nb = (long)room > PLAN_MODEL_MAX + 65536 ? NULL : realloc(buf, room + 1);
            if (!nb) {
                snprintf(err, cap, "--model %s: too large or out of memory", path);
                goto fail;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, room - len, f);
        len += n;
        if (n == 0) break;
    }
    if (ferror(f)) {
        snprintf(err, cap, "--model %s: read error", path);
        goto fail;
    }
    fclose(f);
    buf[len] = 0;
    if (strlen(buf) != len) {
        snprintf(err, cap, "--model %s: contains a NUL byte, not JSON", path);
        free(buf);
        return NULL;
    }
    return buf;
fail:
    fclose(f);
    free(buf);
    return NULL;
}

static const char *fmt_ratio(double r, char *buf, size_t cap) {
    if (isnan(r))
        snprintf(buf, cap, "-");
    else if (isinf(r))
        snprintf(buf, cap, "drain");
    else
        snprintf(buf, cap, "%.3f", r);
    return buf;
}

static void print_moves(const plan_model *m, const plan_result *r) {
    if (!r->nmoves) return;
    printf("\n  %4s  %-10s  %-12s  %-12s  %-10s  %s\n", "#", "partition", "from", "to", "why",
           "reason");
    for (size_t i = 0; i < r->nmoves; i++) {
        const plan_move *mv = &r->moves[i];
        char text[320];
        plan_move_describe(m, mv, text, sizeof text);
        printf("  %4zu  %-10llu  %-12s  %-12s  %-10s  %s\n", i + 1, (unsigned long long)mv->part_id,
               m->nodes[mv->from].id, m->nodes[mv->to].id, plan_why_name(mv->why), text);
    }
}

static void print_nodes(const plan_model *m, const plan_result *r) {
    printf("\n  %-12s  %-9s  %8s  %11s  %11s\n", "node", "state", "capacity", "util before",
           "util after");
    for (size_t i = 0; i < m->nnodes; i++) {
        char b[24], a[24];
        printf("  %-12s  %-9s  %8.3g  %11s  %11s\n", m->nodes[i].id,
               plan_node_state_name(m->nodes[i].state), m->nodes[i].capacity,
               fmt_ratio(r->util_before[i], b, sizeof b), fmt_ratio(r->util_after[i], a, sizeof a));
    }
}

static void print_table(const plan_model *m, const plan_result *r) {
    printf("plan: %zu move%s for %zu nodes and %zu partitions\n", r->nmoves,
           r->nmoves == 1 ? "" : "s", m->nnodes, m->nparts);
    printf("imbalance (max/mean): %.3f -> %.3f   min/mean: %.3f -> %.3f\n", r->imbalance_before,
           r->imbalance_after, r->min_ratio_before, r->min_ratio_after);
    printf("moved %.4f of floor %.4f (efficiency %.3f); bytes moved %.0f, bytes floor %.0f\n",
           r->moved, r->floor, r->efficiency, r->moved_bytes, r->floor_bytes);
    printf("episode: %s (round %u)\n", r->episode.active ? "open" : "closed", r->episode.rounds);
    print_moves(m, r);
    print_nodes(m, r);
    printf("\nreasons for stopping:\n");
    for (size_t i = 0; i < r->nstops; i++)
        printf("  %s: %s\n", r->stops[i].key, r->stops[i].text);
}

static int parse_args(int argc, char **argv, const char **model, int *json) {
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            *json = 1;
        } else if (!strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "keel plan: --model needs a file\n");
                return -1;
            }
            *model = argv[++i];
        } else {
            fprintf(stderr, "keel plan: unknown flag '%s'\n", argv[i]);
            return -1;
        }
    }
    if (!*model) {
        fprintf(stderr, "keel plan: --model FILE is required\n");
        return -1;
    }
    return 0;
}

static int plan_model_file(const char *path, int json) {
    char err[512];
    char *text = read_file(path, err, sizeof err);
    if (!text) {
        fprintf(stderr, "keel plan: %s\n", err);
        return 2;
    }
    plan_model m;
    plan_result r = {0};
    int rc = plan_model_from_json(text, &m, err, sizeof err);
    free(text);
    if (rc) {
        fprintf(stderr, "keel plan: %s: %s\n", path, rc == KEEL_ENOMEM ? "out of memory" : err);
        plan_model_close(&m);
        return rc == KEEL_ENOMEM ? 1 : 2;
    }
    int status = 0;
    if ((rc = plan_run(&m, &r))) {
        fprintf(stderr, "keel plan: %s: %s\n", path, r.error[0] ? r.error : keel_strerror(rc));
        status = rc == KEEL_ENOMEM ? 1 : 2;
    } else if (json) {
        char *s = plan_result_to_json(&m, &r, 1);
        if (s)
            printf("%s\n", s);
        else
            fprintf(stderr, "keel plan: out of memory\n");
        status = s ? 0 : 1;
        free(s);
    } else {
        print_table(&m, &r);
    }
    plan_result_close(&r);
    plan_model_close(&m);
    return status;
}

int admin_main(const char *name, int argc, char **argv); /* admin.c */

int plan_main(int argc, char **argv, const char *self) {
    const char *model = NULL;
    int json = 0;
    (void)self;
    for (int i = 0; i < argc; i++) /* against a live coordinator: a dry run there */
        if (!strcmp(argv[i], "--coord")) return admin_main("plan", argc, argv);
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        plan_usage(stdout);
        return 0;
    }
    if (parse_args(argc, argv, &model, &json)) {
        plan_usage(stderr);
        return 2;
    }
    return plan_model_file(model, json);
}
