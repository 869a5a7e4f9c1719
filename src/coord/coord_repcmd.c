/* coord_repcmd.c - the commands of replica moves (issue 11 step 5):
 *
 *   PROMOTE <partition> <node> [JSON]   operator (admin): a clean leadership
 *                                       transfer to an in-sync replica; the
 *                                       reply waits until it committed or
 *                                       aborted: +OK / {"id","transfer_ms"}
 *   KEEL.REP.HANDOFF                    peer (a node at SIGTERM): transfer
 *                                       each RF > 1 partition it leads to an
 *                                       in-sync follower; the reply
 *                                       *2 :moved :left comes when all ended
 *                                       or after COORD_HANDOFF_MS
 *   KEEL.REP.HANDOFF START|STATUS       the same, answered at once so that
 *                                       the node's heartbeats (its leases,
 *                                       its ISR proposals) go on meanwhile:
 *                                       START begins it (+HANDING-OFF);
 *                                       STATUS is +HANDING-OFF until it
 *                                       ended, then *2 :moved :left once;
 *                                       -ERR no hand-off under way
 *
 * PROMOTE and the plain HANDOFF hold their connection (coord_defer.h): the
 * loop never waits. A held HANDOFF also holds the node's heartbeats behind
 * it on that connection, which is why nodes use START and STATUS.
 * The executor (coord_repmove.c) does the work; these parse and reply.
 */
#include "coord/coord_defer.h"
#include "coord/coord_int.h"
#include "coord/coord_repmove.h"
#include "core/err.h"
#include "core/log.h"
#include "core/num.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define COORD_HANDOFF_MS 10000 /* issue 11: SIGTERM hands off within 10 s in all */

typedef struct promote_wait {
    coord_deferred *d;
    int json;
} promote_wait;

static void promoted(coord *co, uint64_t id, const char *abort_reason, double transfer_ms,
                     void *arg) {
    promote_wait *w = arg;
    kbuf *out = coord_defer_out(w->d);
    if (abort_reason) {
        resp_w_errorf(out, "ERR promotion aborted: %s", abort_reason);
    } else if (w->json) {
        char buf[96];
        snprintf(buf, sizeof buf, "{\"id\":%llu,\"transfer_ms\":%.3f}", (unsigned long long)id,
                 transfer_ms);
        resp_w_bulkstr(out, buf);
    } else {
        resp_w_simple(out, "OK");
    }
    coord_defer_done(co, w->d);
    free(w);
}

void coord_c_promote(cctx *x) {
    uint64_t p;
    char err[320], msg[360];
    if (keel_parse_u64z(x->argv[1], &p) || p > 0xffffffffu) {
        snprintf(msg, sizeof msg, "ERR partition must be a number, got '%.64s'", x->argv[1]);
        coord_reply_err(x, msg);
        return;
    }
    if (x->argc == 4 && strcasecmp(x->argv[3], "json")) {
        coord_reply_err(x, "ERR syntax: PROMOTE <partition> <node> [JSON]");
        return;
    }
    promote_wait *w = calloc(1, sizeof *w);
    if (!w || !(w->d = coord_defer_hold(x))) {
        free(w);
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    w->json = coord_want_json(x);
    if (coord_repmove_promote(x->co, (unsigned)p, x->argv[2], promoted, w, err, sizeof err) < 0) {
        x->hold = 0;
        kbuf *out = coord_defer_out(w->d);
        out->len = 0;
        coord_defer_drop(x->co, w->d);
        free(w);
        snprintf(msg, sizeof msg, "ERR %s", err);
        coord_reply_err(x, msg);
    }
}

static void handed_off(coord *co, unsigned moved, unsigned left, void *arg) {
    coord_deferred *d = arg;
    kbuf *out = coord_defer_out(d);
    resp_w_array(out, 2);
    resp_w_int(out, moved);
    resp_w_int(out, left);
    coord_defer_done(co, d);
}

void coord_c_keel_rep_handoff(cctx *x, const char *id) {
    if (x->argc == 2) {
        unsigned moved = 0, left = 0;
        int st;
        if (!strcasecmp(x->argv[1], "start")) {
            if (coord_repmove_handoff_start(x->co, id, COORD_HANDOFF_MS)) {
                coord_reply_err(x, "ERR hand-off failed: the map store cannot be read");
                return;
            }
            resp_w_simple(&x->c->out, "HANDING-OFF");
        } else if (!strcasecmp(x->argv[1], "status")) {
            if ((st = coord_repmove_handoff_status(x->co, id, &moved, &left)) < 0) {
                coord_reply_err(x, "ERR no hand-off under way");
            } else if (st > 0) {
                resp_w_simple(&x->c->out, "HANDING-OFF");
            } else {
                resp_w_array(&x->c->out, 2);
                resp_w_int(&x->c->out, moved);
                resp_w_int(&x->c->out, left);
            }
        } else {
            coord_reply_err(x, "ERR bad KEEL.REP.HANDOFF: [START|STATUS]");
        }
        return;
    }
    coord_deferred *d = coord_defer_hold(x);
    if (!d) {
        coord_reply_err(x, "ERR out of memory");
        return;
    }
    if (coord_repmove_handoff(x->co, id, COORD_HANDOFF_MS, handed_off, d)) {
        x->hold = 0;
        coord_defer_drop(x->co, d);
        coord_reply_err(x, "ERR hand-off failed: the map store cannot be read");
    }
}
