/* holdq.c - see holdq.h. */
#include "node/holdq.h"

#include "core/clock.h"
#include "node/move.h" /* node_conn, node_conn_of */
#include "resp/resp.h"

static int64_t mono_ms(void) {
    return (int64_t)(keel_mono_us() / 1000);
}

void holdq_unlink(holdq *q, node_conn *nc) {
    if (!nc->held) return;
    if (nc->hprev)
        nc->hprev->hnext = nc->hnext;
    else
        q->head = nc->hnext;
    if (nc->hnext) nc->hnext->hprev = nc->hprev;
    nc->hprev = nc->hnext = NULL;
    nc->held = 0;
    q->held--;
}

void holdq_resume(client *c) {
    c->last_ms = keel_wall_ms(); /* the request runs now, not when it arrived */
    rserver_resume(c);
}

void holdq_release(holdq *q, long p, int tryagain) {
    node_conn *nc = q->head;
    while (nc) {
        node_conn *next = nc->hnext;
        if (p < 0 || nc->held_p == (unsigned)p) {
            holdq_unlink(q, nc);
            nc->tryagain = tryagain;
            holdq_resume(nc->c);
        }
        nc = next;
    }
}

static void on_timer(uv_timer_t *t) {
    holdq *q = t->data;
    int64_t now = mono_ms();
    node_conn *nc = q->head;
    while (nc) {
        node_conn *next = nc->hnext;
        if (now - nc->held_since >= q->hold_max_ms) {
            holdq_unlink(q, nc);
            nc->tryagain = 1;
            holdq_resume(nc->c);
        }
        nc = next;
    }
    if (!q->head) {
        uv_timer_stop(t);
        q->timer_on = 0;
    }
}

void holdq_init(holdq *q, uv_loop_t *loop, int hold_max_ms) {
    q->head = NULL;
    q->timer_on = 0;
    q->hold_max_ms = hold_max_ms > 0 ? hold_max_ms : 2000;
    q->held = q->held_total = q->tryagain_total = 0;
    uv_timer_init(loop, &q->timer);
    q->timer.data = q;
}

void holdq_close(holdq *q, uv_close_cb close_cb, void *data) {
    while (q->head)
        holdq_unlink(q, q->head);
    q->timer.data = data;
    uv_close((uv_handle_t *)&q->timer, close_cb);
}

int holdq_hold(holdq *q, client *c, unsigned p) {
    node_conn *nc = node_conn_of(c);
    if (nc && nc->tryagain) {
        nc->tryagain = 0;
        q->tryagain_total++;
        resp_w_error(&c->out, "TRYAGAIN partition is moving; retry");
        return 0;
    }
    if (!nc || q->held >= HOLDQ_MAX) {
        q->tryagain_total++;
        resp_w_error(&c->out, "TRYAGAIN partition is moving; retry");
        return 0;
    }
    nc->held = 1;
    nc->held_p = p;
    nc->held_since = mono_ms();
    nc->hprev = NULL;
    nc->hnext = q->head;
    if (q->head) q->head->hprev = nc;
    q->head = nc;
    q->held++;
    q->held_total++;
    if (!q->timer_on) {
        uv_timer_start(&q->timer, on_timer, 10, 10);
        q->timer_on = 1;
    }
    return RSERVER_HOLD;
}

long holdq_find_unfenced(const holdq *q, int (*still_fenced)(unsigned p, void *arg), void *arg) {
    for (const node_conn *nc = q->head; nc; nc = nc->hnext)
        if (!still_fenced(nc->held_p, arg)) return (long)nc->held_p;
    return -1;
}
