/* holdq.h - requests held while their partition is fenced (DESIGN §4, §6).
 *
 * A request for a FENCED partition is not refused: its client is parked
 * (rserver's RSERVER_HOLD) on this queue, in arrival order, until the move
 * ends. Then the partition's requests are re-executed (holdq_release), so
 * they see the outcome: served here after an abort, -MOVED after a commit.
 * A request held longer than hold_max_ms, or one past HOLDQ_MAX held at once,
 * is answered -TRYAGAIN instead. Deadlines are on the monotonic clock.
 *
 *   free --holdq_hold--> held --release / timeout / disconnect--> free
 *
 * Loop thread only.
 */
#ifndef KEEL_HOLDQ_H
#define KEEL_HOLDQ_H

#include <stdint.h>
#include <uv.h>

#include "net/rserver.h"

#define HOLDQ_MAX 10000 /* requests held at once, all partitions */

struct node_conn;

typedef struct holdq {
    struct node_conn *head; /* newest first */
    uv_timer_t timer;       /* runs while anything is held: -TRYAGAIN past hold_max_ms */
    int timer_on;
    int hold_max_ms;
    uint64_t held, held_total, tryagain_total;
} holdq;

/* Sets q up on loop; hold_max_ms <= 0 means 2000. */
void holdq_init(holdq *q, uv_loop_t *loop, int hold_max_ms);
/* Forgets every held request (their clients are closing) and closes the
 * timer; close_cb (may be NULL) runs when libuv has closed it, with the
 * timer's data set to data. */
void holdq_close(holdq *q, uv_close_cb close_cb, void *data);
/* Holds c's request for partition p: returns RSERVER_HOLD, or 0 after
 * writing -TRYAGAIN (the queue is full, out of memory, or this request was
 * released to be answered so). */
int holdq_hold(holdq *q, client *c, unsigned p);
/* Re-executes every request held for partition p (all when p < 0); with
 * tryagain they are answered -TRYAGAIN. */
void holdq_release(holdq *q, long p, int tryagain);
/* Runs a parked request of c again now (rserver_resume), with the client's
 * time set to now: the request runs now, not when it arrived. For any
 * request a node parks (held here, or a peer's long poll). */
void holdq_resume(client *c);
/* Takes nc off the queue if it is on it (its client disconnected). */
void holdq_unlink(holdq *q, struct node_conn *nc);
/* The partition of some held request for which still_fenced(p, arg) is 0,
 * or -1 when every held request's partition is still fenced. */
long holdq_find_unfenced(const holdq *q, int (*still_fenced)(unsigned p, void *arg), void *arg);

#endif
