/* coord_dash.h - the operator's dashboard on the coordinator's HTTP port
 * (docs/dashboard.md).
 *
 * Serves, with /metrics and /status:
 *   /                 the page (web/index.html), and its script, style and
 *                     charting library, all embedded in the binary at build
 *                     time (no internet needed);
 *   /api/dashboard    the JSON the page polls every second:
 *                     ?since=MS   only history samples newer than MS (wall
 *                                 clock ms; 0 or absent = the whole hour);
 *                     ?grid=owner|bytes|load  what the partition map colours.
 *                     Any other parameter or a bad value: 400 with
 *                     {"error": "..."}.
 *
 * A 1 s timer samples the cluster into the history (coord_history.h): the
 * imbalance, per-node utilisation and latency, the move traffic. Sampling
 * reads only memory (heartbeat metrics, the executor's counters) plus a
 * cache of owners and nodes that is reloaded from the map store only when
 * the map version changes. A rendering of the cluster's state is cached
 * for one second, so any number of browsers cost one rendering a second.
 *
 * Threads: the coordinator's loop thread (the HTTP thread only serves the
 * embedded files itself; see node/http.h).
 */
#ifndef KEEL_COORD_DASH_H
#define KEEL_COORD_DASH_H

#include <stddef.h>

#include "core/buf.h"
#include "net/http.h"

typedef struct coord coord;

/* Allocates the history (co->history) and starts the sampler. Returns 0 or
 * KEEL_ENOMEM. */
int coord_dash_start(coord *co);
/* Stops the sampler timer (closes its handle). Safe to call twice. */
void coord_dash_stop(coord *co);
/* Frees what coord_dash_start allocated, after the loop has ended. */
void coord_dash_free(coord *co);
/* The coordinator's HTTP routes (borrowed for the life of co). */
const http_route *coord_dash_routes(coord *co, size_t *n);
/* /api/dashboard: see above. Returns 200 or 400 (with {"error":...}). */
int coord_render_dashboard(void *arg, const char *query, kbuf *out);

#endif
