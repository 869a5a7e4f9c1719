/* coord_standby.c - see coord_standby.h. A 50 ms timer polls the election
 * (its thread does the etcd work); a small rserver answers every request
 * with -NOTLEADER from the view the timer last read, so a reply never waits
 * on etcd. */
#include "coord/coord_standby.h"
#include "core/err.h"
#include "core/log.h"
#include "core/notleader.h"
#include "net/rserver.h"
#include "resp/resp.h"

#include <stdio.h>
#include <string.h>

#define STANDBY_TICK_MS 50
#define STANDBY_WAIT_LOG_TICKS 100 /* 5 s */

typedef struct standby {
    uv_loop_t *loop;
    coord_elect *e;
    const char *bind;
    int port;
    rserver *rs;
    uv_timer_t timer;
    unsigned ticks;
    int bind_failed; /* tried once and failed: this standby holds no port */
    uint64_t answered;
    coord_elect_view view; /* as of the last tick */
} standby;

static int standby_dispatch(void *arg, client *c, int argc, char **argv, const size_t *argvlen) {
    standby *s = arg;
    (void)argc, (void)argvlen;
    char msg[COORD_ELECT_ID_MAX + COORD_ELECT_ADDR_MAX + 64];
    /* Naming ourselves (the tick that sees us win has not run yet) would
     * send the client back here: say no one is known instead. */
    int self = !strcmp(s->view.leader_id, coord_elect_id(s->e));
    notleader_format(msg, sizeof msg, self ? "" : s->view.leader_id,
                     self ? "" : s->view.leader_addr);
    resp_w_error(&c->out, msg);
    if (s->answered++ == 0)
        keel_log(KEEL_LOG_INFO, "standby_redirect", "client=%s command=%.32s reply=\"%s\"", c->addr,
                 argv[0], msg);
    return 0;
}

static const rserver_ops standby_ops = {.dispatch = standby_dispatch};

static void try_listen(standby *s) {
    rserver_config rc = {
        .bind = s->bind, .port = s->port, .maxclients = 1000, .max_output = 1u << 20};
    resp_limits_default(&rc.limits);
    char err[256] = "";
    if (rserver_start(s->loop, &rc, &standby_ops, s, &s->rs, err, sizeof err) == 0) {
        keel_log(KEEL_LOG_INFO, "standby_listen", "addr=%s:%d", s->bind, s->port);
        return;
    }
    s->rs = NULL;
    s->bind_failed = 1;
    keel_log(KEEL_LOG_WARN, "standby_bind_failed",
             "addr=%s:%d reason=\"%s\" action=\"this standby holds no port; clients find the "
             "leader through their --coord list\"",
             s->bind, s->port, err);
}

static void on_tick(uv_timer_t *t) {
    standby *s = t->data;
    coord_elect_get(s->e, &s->view);
    s->ticks++;
    if (s->view.leading) {
        keel_log(KEEL_LOG_INFO, "standby_done", "id=%s redirects=%llu", coord_elect_id(s->e),
                 (unsigned long long)s->answered);
        rserver_stop(s->rs);
        s->rs = NULL;
        uv_close((uv_handle_t *)&s->timer, NULL);
        return;
    }
    /* Listen once another coordinator is known to lead: before that (the
     * first start of a cluster, where this one is about to win) a client
     * would only hear "no leader". */
    if (!s->rs && !s->bind_failed && s->view.leader_id[0] &&
        strcmp(s->view.leader_id, coord_elect_id(s->e)) != 0)
        try_listen(s);
    if (s->ticks % STANDBY_WAIT_LOG_TICKS == 0)
        keel_log(KEEL_LOG_INFO, "election_waiting", "id=%s leader=%s leader_addr=%s",
                 coord_elect_id(s->e), s->view.leader_id[0] ? s->view.leader_id : "?",
                 s->view.leader_addr[0] ? s->view.leader_addr : "?");
}

int coord_standby_wait(uv_loop_t *loop, coord_elect *e, const char *bind, int port) {
    standby s;
    memset(&s, 0, sizeof s);
    s.loop = loop;
    s.e = e;
    s.bind = bind;
    s.port = port;
    coord_elect_get(e, &s.view);
    if (s.view.leading) return 0;
    uv_timer_init(loop, &s.timer);
    s.timer.data = &s;
    uv_timer_start(&s.timer, on_tick, STANDBY_TICK_MS, STANDBY_TICK_MS);
    uv_run(loop, UV_RUN_DEFAULT); /* until on_tick closed the timer and the server */
    return 0;
}
