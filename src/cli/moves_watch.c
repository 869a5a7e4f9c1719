/* moves_watch.c - `keel moves --watch`: redraws the moves with progress bars
 * every half second until no move is in flight (or Ctrl-C).
 *
 * A bar shows the copy (bytes against the partition's size at planning
 * time); once copied it shows the catch-up backlog. Finished moves stay
 * listed below with their outcome, write pause and reason. */
#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void bar(char *out, int width, double frac) {
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    int full = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++)
        out[i] = i < full ? '#' : '.';
    out[width] = 0;
}

static int in_flight(const char *state) {
    return !strcmp(state, "PLANNED") || !strcmp(state, "COPYING") ||
           !strcmp(state, "CATCHING_UP") || !strcmp(state, "FENCED");
}

/* One frame (clearing the screen first when tty), with header lines printed
 * under the title; returns the number of moves in flight, or -1 on error.
 * Shared with the demo. */
int moves_render(redisContext *c, int all, int tty, const char *header) {
    redisReply *r = redisCommand(c, all ? "MOVES JSON ALL" : "MOVES JSON");
    if (!r || r->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "keel moves: %s\n", r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
        freeReplyObject(r);
        return -1;
    }
    cJSON *arr = cJSON_Parse(r->str);
    freeReplyObject(r);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        fprintf(stderr, "keel moves: bad reply\n");
        return -1;
    }
    if (tty) fputs("\033[H\033[2J", stdout);
    time_t now = time(NULL);
    char ts[32];
    strftime(ts, sizeof ts, "%H:%M:%S", localtime(&now));
    int active = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) active += in_flight(str(o, "state"));
    printf("keel moves  %s  in flight: %d\n%s\n", ts, active, header ? header : "");
    cJSON_ArrayForEach(o, arr) {
        const char *st = str(o, "state");
        double bytes = num(o, "bytes"), total = num(o, "total_bytes"), lag = num(o, "lag_bytes");
        double rate = num(o, "rate_bps"), eta = num(o, "eta_s"), pause = num(o, "write_pause_ms");
        char b[41];
        double frac = total > 0 ? bytes / total : 0;
        if (!strcmp(st, "CATCHING_UP") || !strcmp(st, "FENCED") || !in_flight(st)) frac = 1;
        if (!strcmp(st, "ABORTED")) frac = 0;
        bar(b, 30, frac);
        printf("#%-5.0f p%-5.0f %s -> %s  %-11s [%s] %5.1f%%  %.1f MiB", num(o, "id"),
               num(o, "partition"), str(o, "from"), str(o, "to"), st, b, frac * 100,
               bytes / 1048576.0);
        if (in_flight(st)) {
            printf("  %.1f MiB/s  lag %.0f KiB / %.0f ms", rate / 1048576.0, lag / 1024.0,
                   num(o, "lag_ms"));
            if (eta >= 0) printf("  eta %.1fs", eta);
        } else {
            if (pause >= 0) printf("  pause %.1f ms", pause);
            if (str(o, "reason")[0]) printf("  (%s)", str(o, "reason"));
        }
        putchar('\n');
    }
    fflush(stdout);
    cJSON_Delete(arr);
    return active;
}

int moves_watch(redisContext *c, int all) {
    int tty = isatty(STDOUT_FILENO);
    for (;;) {
        int n = moves_render(c, all, tty, NULL);
        if (n < 0) return 1;
        /* Stop once nothing is in flight (with nothing in flight from the
         * start, that is after one frame). */
        if (n == 0) return 0;
        usleep(500000);
    }
}
