/* coord_ops.c - operator controls on the coordinator: settings, the kill
 * switch, the planner's dry run, drain and remove (DESIGN.md §7).
 *
 *   SETTING SET <name> <value> | SETTING RESET <name>
 *   PAUSE [reason...] | RESUME
 *   PLAN [JSON]          the next round's moves, as the planner would make
 *                        them now, with reasons, floor and efficiency
 *   DRAIN <node>         the node becomes DRAINING: the planner empties it
 *   REMOVE <node>        REMOVED, refused while it still owns a partition
 *   UNQUARANTINE <node>  a quarantined node may receive data again
 *   FAILPOINT SET <name> <spec> | FAILPOINT LIST | FAILPOINT CLEAR
 *                        the coordinator's failpoints (core/failpoint), for
 *                        fault tests; admin-authenticated like the rest
 *
 * Every change is one map store transaction and one log line. Settings carry
 * the time they were set, so STATUS and /metrics show their age. The pause
 * is the setting "paused" (its value is the reason); while it is set STATUS
 * and /metrics report it with its age, and the rebalance loop (which comes
 * with the move protocol) must start no move.
 */
#include "coord/coord_defer.h"
#include "coord/coord_int.h"
#include "coord/coord_move.h"
#include "coord/coord_rebalance.h"
#include "coord/coord_rep.h"
#include "coord/coord_rf.h"
#include "core/err.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "planner/planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void store_err(cctx *x) {
    char msg[MAPSTORE_ERR_MAX + 16];
    snprintf(msg, sizeof msg, "ERR %s", mapstore_errmsg(x->co->ms));
    coord_reply_err(x, msg);
}

static int parse_setting(const setting_def *d, const char *v, char *why, size_t cap) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x)) {
        snprintf(why, cap, "ERR %s must be a number, got '%s'", d->name, v);
        return -1;
    }
    if (x < d->min || x > d->max) {
        snprintf(why, cap, "ERR %s must be from %g to %g, got %s", d->name, d->min, d->max, v);
        return -1;
    }
    return 0;
}

/* Every control below replies from its write's completion (coord_defer.h):
 * OK means the change is durable. */

typedef struct setting_arg {
    const setting_def *d;
    double before;
    int reset;
    char by[64];
    char reason[MAPSTORE_SETTING_VALUE_MAX + 1];
} setting_arg;

static setting_arg *new_arg(cctx *x) {
    setting_arg *a = calloc(1, sizeof *a);
    if (a) snprintf(a->by, sizeof a->by, "%s", x->c->addr);
    return a;
}

static void setting_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    setting_arg *a = arg;
    (void)proto;
    if (r->rc && !(a->reset && r->rc == KEEL_ENOTFOUND)) {
        resp_w_errorf(out, "ERR %s", r->errmsg);
        return;
    }
    keel_log(KEEL_LOG_INFO, "setting_changed", "name=%s value=%g previous=%g by=%s", a->d->name,
             coord_setting_d(co, a->d->name), a->before, a->by);
    coord_rep_setting_changed(co, a->d->name); /* nodes apply some: a new map version (C4) */
    resp_w_simple(out, "OK");
}

/* Submits w for x with fn making the reply; on a refusal at once replies
 * the store's reason. */
static void submit(cctx *x, const mapstore_write *w, coord_defer_fn fn, void *a) {
    if (!a) {
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    if (coord_defer_write(x, w, fn, a)) store_err(x);
}

void coord_c_setting(cctx *x) {
    char msg[256];
    const setting_def *d = coord_setting_find(x->argv[2]);
    if (!d) {
        snprintf(msg, sizeof msg, "ERR unknown setting '%.64s'", x->argv[2]);
        coord_reply_err(x, msg);
        return;
    }
    mapstore_write w;
    int is_set = !strcasecmp(x->argv[1], "set") && x->argc == 4;
    if ((is_set || (!strcasecmp(x->argv[1], "reset") && x->argc == 3)) &&
        (coord_rf_check_change(x->co, d->name, is_set ? x->argv[3] : NULL, msg, sizeof msg) ||
         coord_rep_check_setting(x->co, d->name, is_set ? x->argv[3] : NULL, msg, sizeof msg))) {
        coord_reply_err(x, msg);
        return;
    }
    if (is_set) {
        if (parse_setting(d, x->argv[3], msg, sizeof msg)) {
            coord_reply_err(x, msg);
            return;
        }
        mapstore_w_setting_set(&w, d->name, x->argv[3], x->now);
    } else if (!strcasecmp(x->argv[1], "reset") && x->argc == 3) {
        mapstore_w_setting_unset(&w, d->name);
    } else {
        coord_reply_err(x, "ERR syntax: SETTING SET <name> <value> | SETTING RESET <name>");
        return;
    }
    setting_arg *a = new_arg(x);
    if (a) {
        a->d = d;
        a->before = coord_setting_d(x->co, d->name);
        a->reset = w.kind == MAPSTORE_W_SETTING_UNSET;
    }
    submit(x, &w, setting_done, a);
}

static void pause_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    setting_arg *a = arg;
    (void)co, (void)proto;
    if (r->rc) {
        resp_w_errorf(out, "ERR %s", r->errmsg);
        return;
    }
    char q[256];
    keel_log(KEEL_LOG_WARN, "rebalance_paused", "reason=%s by=%s",
             keel_log_quote(q, sizeof q, a->reason, strlen(a->reason)), a->by);
    resp_w_simple(out, "OK");
}

void coord_c_pause(cctx *x) {
    char reason[MAPSTORE_SETTING_VALUE_MAX + 1] = "";
    size_t n = 0;
    for (int i = 1; i < x->argc && n + x->len[i] + 2 < sizeof reason; i++)
        n += (size_t)snprintf(reason + n, sizeof reason - n, "%s%s", i > 1 ? " " : "", x->argv[i]);
    if (!reason[0]) snprintf(reason, sizeof reason, "operator");
    mapstore_write w;
    mapstore_w_setting_set(&w, "paused", reason, x->now);
    setting_arg *a = new_arg(x);
    if (a) snprintf(a->reason, sizeof a->reason, "%s", reason);
    submit(x, &w, pause_done, a);
}

static void resume_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    setting_arg *a = arg;
    (void)co, (void)proto;
    if (r->rc && r->rc != KEEL_ENOTFOUND) {
        resp_w_errorf(out, "ERR %s", r->errmsg);
        return;
    }
    if (!r->rc) keel_log(KEEL_LOG_WARN, "rebalance_resumed", "by=%s", a->by);
    resp_w_simple(out, "OK");
}

void coord_c_resume(cctx *x) {
    mapstore_write w;
    mapstore_w_setting_unset(&w, "paused");
    submit(x, &w, resume_done, new_arg(x));
}

/* The human form of a plan: one line per move, then the summary. */
static void plan_text(const plan_model *m, const plan_result *r, kbuf *b) {
    for (size_t i = 0; i < r->nmoves; i++) {
        char line[512];
        plan_move_describe(m, &r->moves[i], line, sizeof line);
        kbuf_printf(b, "move partition %llu %s -> %s  %s\n",
                    (unsigned long long)r->moves[i].part_id, m->nodes[r->moves[i].from].id,
                    m->nodes[r->moves[i].to].id, line);
    }
    kbuf_printf(b, "%zu moves  floor %.4f  moved %.4f  efficiency %.3f  imbalance %.3f -> %.3f\n",
                r->nmoves, r->floor, r->moved, r->efficiency, r->imbalance_before,
                r->imbalance_after);
    for (size_t i = 0; i < r->nstops; i++)
        kbuf_printf(b, "stop: %s (%s)\n", r->stops[i].key, r->stops[i].text);
}

int coord_plan_now(coord *co, int64_t now, plan_model *m, plan_result *r) {
    memset(r, 0, sizeof *r);
    int rc = coord_build_model(co, now, m);
    if (!rc) { /* exactly what the loop's next round would see */
        coord_moves_annotate(co, m);
        m->episode = coord_rebalance_episode(co);
        rc = plan_run(m, r);
    }
    return rc;
}

void coord_c_plan(cctx *x) {
    plan_model m;
    plan_result r;
    int rc = coord_plan_now(x->co, coord_now(x->co), &m, &r);
    if (rc) {
        char msg[320];
        snprintf(msg, sizeof msg, "ERR cannot plan: %s", r.error[0] ? r.error : keel_strerror(rc));
        coord_reply_err(x, msg);
    } else if (coord_want_json(x)) {
        char *json = plan_result_to_json(&m, &r, 0);
        if (json)
            resp_w_bulkstr(&x->c->out, json);
        else
            coord_reply_err(x, "ERR out of memory");
        free(json);
    } else {
        kbuf b;
        kbuf_init(&b);
        plan_text(&m, &r, &b);
        mapstore_setting st;
        if (mapstore_setting_get(x->co->ms, "paused", &st) == 0)
            kbuf_printf(&b, "rebalancing is PAUSED (%s): this plan would not run\n", st.value);
        resp_w_bulk(&x->c->out, b.p, b.len);
        kbuf_close(&b);
    }
    plan_result_close(&r);
    plan_model_close(&m);
}

static int owned_partitions(coord *co, const char *id, size_t *n) {
    mapstore_partition *parts = NULL;
    size_t np = 0;
    int rc = mapstore_partition_list(co->ms, &parts, &np);
    *n = 0;
    for (size_t i = 0; !rc && i < np; i++)
        *n += !strcmp(parts[i].owner, id);
    free(parts);
    return rc;
}

typedef struct membership_arg {
    mapstore_node n;
    mapstore_membership to;
    char by[64];
} membership_arg;

static void membership_done(coord *co, const mapstore_result *r, void *arg, kbuf *out, int proto) {
    membership_arg *a = arg;
    (void)co, (void)proto;
    if (r->rc) {
        resp_w_errorf(out, "ERR %s", r->errmsg);
        return;
    }
    keel_log(KEEL_LOG_WARN, "node_membership",
             "node=%s from=%s to=%s liveness=%s reason=operator by=%s", a->n.id,
             mapstore_membership_name(a->n.membership), mapstore_membership_name(a->to),
             mapstore_liveness_name(a->n.liveness), a->by);
    resp_w_simple(out, "OK");
}

static void set_membership(cctx *x, mapstore_membership to) {
    mapstore_node n;
    char msg[256];
    if (mapstore_node_get(x->co->ms, x->argv[1], &n)) {
        snprintf(msg, sizeof msg, "ERR no node '%.64s'", x->argv[1]);
        coord_reply_err(x, msg);
        return;
    }
    if (n.membership == MAPSTORE_MEMBER_REMOVED) {
        snprintf(msg, sizeof msg, "ERR node %s was removed from the cluster", n.id);
        coord_reply_err(x, msg);
        return;
    }
    size_t owned = 0;
    if (to == MAPSTORE_MEMBER_REMOVED) {
        if (owned_partitions(x->co, n.id, &owned)) {
            store_err(x);
            return;
        }
        if (owned) {
            snprintf(msg, sizeof msg,
                     "ERR node %s still owns %zu partitions: drain it and wait until it owns none",
                     n.id, owned);
            coord_reply_err(x, msg);
            return;
        }
    }
    mapstore_write w;
    mapstore_w_node_set_membership(&w, n.id, to);
    membership_arg *a = calloc(1, sizeof *a);
    if (a) {
        a->n = n;
        a->to = to;
        snprintf(a->by, sizeof a->by, "%s", x->c->addr);
    }
    submit(x, &w, membership_done, a);
}

void coord_c_drain(cctx *x) {
    set_membership(x, MAPSTORE_MEMBER_DRAINING);
}

void coord_c_remove(cctx *x) {
    set_membership(x, MAPSTORE_MEMBER_REMOVED);
}

void coord_c_failpoint(cctx *x) {
    char msg[320];
    if (!strcasecmp(x->argv[1], "set") && x->argc == 4) {
        char why[256];
        if (failpoint_set(x->argv[2], x->argv[3], why, sizeof why)) {
            snprintf(msg, sizeof msg, "ERR %s", why);
            coord_reply_err(x, msg);
            return;
        }
        keel_log(KEEL_LOG_WARN, "failpoint_set", "name=%s spec=%s by=%s", x->argv[2], x->argv[3],
                 x->c->addr);
        resp_w_simple(&x->c->out, "OK");
    } else if (!strcasecmp(x->argv[1], "list") && x->argc == 2) {
        char buf[4096];
        size_t n = failpoint_list(buf, sizeof buf);
        resp_w_bulk(&x->c->out, buf, n < sizeof buf ? n : sizeof buf - 1);
    } else if (!strcasecmp(x->argv[1], "clear") && x->argc == 2) {
        failpoint_clear_all();
        resp_w_simple(&x->c->out, "OK");
    } else {
        coord_reply_err(
            x, "ERR syntax: FAILPOINT SET <name> <spec> | FAILPOINT LIST | FAILPOINT CLEAR");
    }
}

static void unquarantine_done(coord *co, const mapstore_result *r, void *arg, kbuf *out,
                              int proto) {
    setting_arg *a = arg; /* reason: the node id */
    (void)proto;
    if (r->rc && r->rc != KEEL_ENOTFOUND) {
        resp_w_errorf(out, "ERR %s", r->errmsg);
        return;
    }
    member *m = coord_member(co, a->reason, 0);
    if (m) memset(m->failures_ms, 0, sizeof m->failures_ms);
    keel_log(KEEL_LOG_WARN, "node_unquarantined", "node=%s by=%s", a->reason, a->by);
    resp_w_simple(out, "OK");
}

void coord_c_unquarantine(cctx *x) {
    char msg[320];
    if (!coord_quarantined(x->co, x->argv[1])) {
        snprintf(msg, sizeof msg, "ERR node %.64s is not quarantined", x->argv[1]);
        coord_reply_err(x, msg);
        return;
    }
    mapstore_write w;
    int rc = coord_quarantine_write(x->co, x->argv[1], 0, &w);
    if (rc < 0) {
        coord_reply_err(x, "ERR the quarantine list is full");
        return;
    }
    if (rc == 1) { /* cannot happen: it is quarantined, so the list holds it */
        coord_reply_err(x, "ERR node is not quarantined");
        return;
    }
    setting_arg *a = new_arg(x);
    if (a) snprintf(a->reason, sizeof a->reason, "%s", x->argv[1]);
    submit(x, &w, unquarantine_done, a);
}
