/* main.c - the keel binary: dispatches on the first argument to a subcommand
 * table. Each subcommand owns its flags and its exit status. */
#include "core/jsonarena.h"
#include "core/log.h"
#include "node/config.h"
#include "node/server.h"

#include <stdio.h>
#include <string.h>

int demo_main(int argc, char **argv, const char *self);         /* demo.c */
int coord_main(int argc, char **argv, const char *self);        /* coord_main.c */
int status_main(int argc, char **argv, const char *self);       /* admin.c */
int nodes_main(int argc, char **argv, const char *self);        /* admin.c */
int partitions_main(int argc, char **argv, const char *self);   /* admin.c */
int set_main(int argc, char **argv, const char *self);          /* admin.c */
int unset_main(int argc, char **argv, const char *self);        /* admin.c */
int pause_main(int argc, char **argv, const char *self);        /* admin.c */
int resume_main(int argc, char **argv, const char *self);       /* admin.c */
int drain_main(int argc, char **argv, const char *self);        /* admin.c */
int remove_main(int argc, char **argv, const char *self);       /* admin.c */
int move_main(int argc, char **argv, const char *self);         /* admin.c */
int unquarantine_main(int argc, char **argv, const char *self); /* admin.c */
int cancel_main(int argc, char **argv, const char *self);       /* admin.c */
int moves_main(int argc, char **argv, const char *self);        /* admin.c */
int promote_main(int argc, char **argv, const char *self);      /* admin.c */
int failover_main(int argc, char **argv, const char *self);     /* admin.c */
int plan_main(int argc, char **argv, const char *self);         /* plan.c */
int sim_main(int argc, char **argv, const char *self);          /* sim.c */

static int node_main(int argc, char **argv, const char *self) {
    node_config cfg;
    char err[512];
    node_config_default(&cfg);
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        fputs(node_config_usage(), stdout);
        return 0;
    }
    if (node_config_parse(&cfg, argc, argv, err, sizeof err)) {
        fprintf(stderr, "keel node: %s\n", err);
        return 2;
    }
    return server_run(&cfg);
}

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv, const char *self);
    const char *help;
} subcommands[] = {
    {"node", node_main, "run a data node (keel node --help)"},
    {"demo", demo_main, "start a node, load sample keys, show how to connect"},
    {"plan", plan_main, "dry-run the rebalance planner on a model file (keel plan --help)"},
    {"sim", sim_main, "simulate rebalancing round by round from a scenario file (keel sim --help)"},
    {"coord", coord_main, "run the coordinator, or create a cluster with --init"},
    {"status", status_main,
     "cluster status from the coordinator (--coord HOST:PORT[,...] [--json])"},
    {"nodes", nodes_main, "nodes known to the coordinator"},
    {"partitions", partitions_main, "partitions, owners and epochs [--node ID]"},
    {"set", set_main, "change a coordinator setting: keel set NAME VALUE"},
    {"unset", unset_main, "put a setting back to its default"},
    {"pause", pause_main, "kill switch: start no new move [--reason TEXT]"},
    {"resume", resume_main, "lift the kill switch"},
    {"drain", drain_main, "mark a node DRAINING: the planner empties it"},
    {"remove", remove_main, "mark an empty node REMOVED"},
    {"unquarantine", unquarantine_main, "let a quarantined node receive data again"},
    {"move", move_main, "move a partition: keel move PARTITION NODE [--json]"},
    {"cancel", cancel_main, "cancel a move that has not committed: keel cancel MOVE"},
    {"moves", moves_main, "moves in flight and recent ones [--json] [--all] [--watch]"},
    {"promote", promote_main, "transfer a partition's leadership (RF > 1): keel promote P NODE"},
    {"failover", failover_main,
     "promote a new leader of a replicated partition: keel failover P [--to NODE] [--unclean]"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: keel <command> [flags]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        fprintf(f, "  %-6s %s\n", subcommands[i].name, subcommands[i].help);
}

int main(int argc, char **argv) {
    json_arena_init(); /* cJSON's hooks, before any thread uses cJSON */
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        if (!strcmp(argv[1], subcommands[i].name))
            return subcommands[i].fn(argc - 2, argv + 2, argv[0]);
    fprintf(stderr, "keel: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
