/* coord_movecmd.c - the operator's move commands (admin-authenticated):
 *
 *   MOVE <partition> <node> [JSON]   plans a move; replies its id
 *                                    (JSON: {"id": N})
 *   CANCEL <move>                    aborts a move that has not committed
 *   MOVES [JSON] [ALL]               moves in flight and the 20 most recent
 *                                    finished ones (ALL: every finished one
 *                                    the coordinator keeps: partition moves
 *                                    all, replica moves the last 64)
 *
 * The executor (coord_move.c) does the work; these only parse and render.
 */
#include "coord/coord_defer.h"
#include "coord/coord_int.h"
#include "coord/coord_move.h"
#include "coord/coord_repmove.h"
#include "core/err.h"

#include "core/num.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RECENT 20

static int parse_u64(const char *s, uint64_t *out) {
    return keel_parse_u64z(s, out) ? -1 : 0; /* no sign, no blanks, no overflow */
}

/* MOVE and CANCEL reply once the record is durable (coord_defer.h). */
typedef struct move_wait {
    coord_deferred *d;
    int json;
} move_wait;

/* The command failed before anything was submitted: reply at once. */
static void abandon(coord *co, move_wait *w) {
    kbuf *out = coord_defer_out(w->d);
    out->len = 0;
    coord_defer_drop(co, w->d);
    free(w);
}

static void created(coord *co, int rc, uint64_t id, const char *err, void *arg) {
    move_wait *w = arg;
    kbuf *out = coord_defer_out(w->d);
    if (rc) {
        resp_w_errorf(out, "ERR %s", err);
    } else if (w->json) {
        char num[32];
        snprintf(num, sizeof num, "{\"id\":%llu}", (unsigned long long)id);
        resp_w_bulkstr(out, num);
    } else {
        resp_w_int(out, (long long)id);
    }
    coord_defer_done(co, w->d);
    free(w);
}

static void cancelled(coord *co, int rc, uint64_t id, const char *err, void *arg) {
    move_wait *w = arg;
    (void)id;
    kbuf *out = coord_defer_out(w->d);
    if (rc)
        resp_w_errorf(out, "ERR %s", err);
    else
        resp_w_simple(out, "OK");
    coord_defer_done(co, w->d);
    free(w);
}

void coord_c_move(cctx *x) {
    uint64_t p;
    char err[320], msg[360];
    if (parse_u64(x->argv[1], &p) || p > 0xffffffffu) {
        snprintf(msg, sizeof msg, "ERR partition must be a number, got '%.64s'", x->argv[1]);
        coord_reply_err(x, msg);
        return;
    }
    if (x->argc == 4 && strcasecmp(x->argv[3], "json")) {
        coord_reply_err(x, "ERR syntax: MOVE <partition> <node> [JSON]");
        return;
    }
    mapstore_partition part;
    if (p < x->co->partitions && mapstore_partition_get(x->co->ms, (unsigned)p, &part) == 0 &&
        part.nreplicas > 1) { /* RF > 1: the leader's replica moves, add-then-remove */
        int64_t id =
            coord_repmove_create(x->co, (unsigned)p, RMOVE_MOVE, x->argv[2], part.replicas[0],
                                 x->argv[2], "operator", err, sizeof err);
        if (id < 0) {
            snprintf(msg, sizeof msg, "ERR %s", err);
            coord_reply_err(x, msg);
        } else if (coord_want_json(x)) {
            char num[64];
            snprintf(num, sizeof num, "{\"id\":%lld,\"kind\":\"replica\"}", (long long)id);
            resp_w_bulkstr(&x->c->out, num);
        } else {
            resp_w_int(&x->c->out, id);
        }
        return;
    }
    move_wait *w = calloc(1, sizeof *w);
    if (!w || !(w->d = coord_defer_hold(x))) {
        free(w);
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    w->json = coord_want_json(x);
    if (coord_move_create(x->co, (unsigned)p, x->argv[2], "operator", created, w, err,
                          sizeof err)) {
        x->hold = 0;
        abandon(x->co, w);
        snprintf(msg, sizeof msg, "ERR %s", err);
        coord_reply_err(x, msg);
    }
}

void coord_c_cancel(cctx *x) {
    uint64_t id;
    char err[320], msg[360];
    if (parse_u64(x->argv[1], &id)) {
        snprintf(msg, sizeof msg, "ERR move id must be a number, got '%.64s'", x->argv[1]);
        coord_reply_err(x, msg);
        return;
    }
    move_wait *w = calloc(1, sizeof *w);
    if (!w || !(w->d = coord_defer_hold(x))) {
        free(w);
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    if (coord_move_cancel(x->co, id, cancelled, w, err, sizeof err)) {
        x->hold = 0;
        abandon(x->co, w);
        snprintf(msg, sizeof msg, "ERR %s", err);
        coord_reply_err(x, msg);
    }
}

static void human_bytes(char *out, size_t cap, double b) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4)
        b /= 1024, i++;
    snprintf(out, cap, i ? "%.1f%s" : "%.0f%s", b, u[i]);
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

void coord_c_moves(cctx *x) {
    int all = 0;
    for (int i = 1; i < x->argc; i++) {
        if (!strcasecmp(x->argv[i], "all"))
            all = 1;
        else if (strcasecmp(x->argv[i], "json")) {
            coord_reply_err(x, "ERR syntax: MOVES [JSON] [ALL]");
            return;
        }
    }
    cJSON *arr = cJSON_CreateArray();
    coord_moves_json(x->co, arr, all ? (size_t)-1 : RECENT);
    coord_repmoves_json(x->co, arr, all ? (size_t)-1 : RECENT); /* RF > 1: "kind": "replica" */
    kbuf b;
    kbuf_init(&b);
    kbuf_printf(&b, "%-6s %-6s %-12s %-12s %-11s %-12s %10s %11s %10s %7s %9s %s\n", "ID", "PART",
                "FROM", "TO", "STATE", "PHASE", "BYTES", "RATE", "LAG", "ETA", "PAUSE", "REASON");
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        char bytes[24], rate[24], lag[24], eta[16], pause[16];
        if (!strcmp(str(o, "kind"), "replica")) { /* add-then-remove: its step as PHASE */
            double p = num(o, "transfer_pause_ms");
            snprintf(pause, sizeof pause, p >= 0 ? "%.1fms" : "-", p);
            kbuf_printf(&b, "r%-5.0f %-6.0f %-12.12s %-12.12s %-11s %-23s %9s %s %s\n",
                        num(o, "id"), num(o, "partition"), str(o, "from"), str(o, "to"),
                        str(o, "state"), str(o, "step"), pause, str(o, "type"), str(o, "reason"));
            continue;
        }
        human_bytes(bytes, sizeof bytes, num(o, "bytes"));
        human_bytes(rate, sizeof rate, num(o, "rate_bps"));
        strcat(rate, "/s");
        human_bytes(lag, sizeof lag, num(o, "lag_bytes"));
        double e = num(o, "eta_s"), p = num(o, "write_pause_ms");
        snprintf(eta, sizeof eta, e >= 0 ? "%.1fs" : "-", e);
        snprintf(pause, sizeof pause, p >= 0 ? "%.1fms" : "-", p);
        kbuf_printf(&b, "%-6.0f %-6.0f %-12.12s %-12.12s %-11s %-12s %10s %11s %10s %7s %9s %s\n",
                    num(o, "id"), num(o, "partition"), str(o, "from"), str(o, "to"),
                    str(o, "state"), str(o, "phase"), bytes, rate, lag, eta, pause,
                    str(o, "reason"));
    }
    coord_reply_view(x, arr, &b);
}
