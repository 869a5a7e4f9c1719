/* coord_main.c - `keel coord`: flag parsing, then --init or run. */
#include "coord/coord.h"

#include <stdio.h>
#include <string.h>

int coord_main(int argc, char **argv, const char *self) {
    coord_config cfg;
    char err[512];
    coord_config_default(&cfg);
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        fputs(coord_usage(), stdout);
        return 0;
    }
    if (coord_config_parse(&cfg, argc, argv, err, sizeof err)) {
        fprintf(stderr, "keel coord: %s\n", err);
        return 2;
    }
    return cfg.init ? coord_init(&cfg) : coord_run(&cfg);
}
