/* coord_standby.h - what a coordinator does while it waits as a standby
 * (issue 12, "finding the leader"; DESIGN.md §13).
 *
 * A coordinator started with --id campaigns (coord_elect.h) and, until it
 * leads, listens on its --port and answers every request - admin or node,
 * authenticated or not, AUTH included - with
 *
 *   -NOTLEADER leader=ID addr=HOST:PORT      (core/notleader.h)
 *
 * naming the leader the election last read (or leader=? addr=? when none is
 * known), and executes nothing. Nodes and the CLI redial the named address
 * at once. A standby holds no map and no secret: the error tells nothing an
 * unauthenticated client could not learn by trying the addresses.
 *
 * It starts listening once the election names another coordinator as the
 * leader (so a cluster's first coordinator, about to win, never answers "no
 * leader"). When the port is taken (several coordinators given one port on
 * one host, as test_etcd_ha does) the standby logs `standby_bind_failed`
 * and holds no port, as before this existed. As soon as this process leads,
 * the standby's listener and every connection to it are closed (clients
 * redial; the leader binds the same port moments later, see coord.c).
 *
 * Threads: the loop thread only.
 */
#ifndef KEEL_COORD_STANDBY_H
#define KEEL_COORD_STANDBY_H

#include "coord/coord_elect.h"

#include <uv.h>

/* Runs loop (which must have no other active handle) as a standby on
 * bind:port until e says this process leads; returns 0 then, with the
 * standby's listener closed and the loop empty again. Logs
 * `election_waiting` every 5 s, as the blocking wait did. Errors: KEEL_ENOMEM. */
int coord_standby_wait(uv_loop_t *loop, coord_elect *e, const char *bind, int port);

#endif
