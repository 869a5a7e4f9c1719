/* migrate.h - MIGRATE (cmd_migrate.c): keys sent to another server with
 * RESTORE, the network part on the libuv thread pool so the loop never
 * waits on the target; the source keys deleted (unless COPY) only if they
 * are unchanged since they were dumped.
 *
 * The state (the jobs in flight, by client) is made lazily in
 * server.migrate. Threads: the node's event loop, except the job's
 * network part (hiredis, blocking, with the request's timeout), which
 * touches nothing but the job.
 */
#ifndef KEEL_NODE_MIGRATE_H
#define KEEL_NODE_MIGRATE_H

#include "node/server.h"

/* From server.c's on_close: a job of c finishes without a reply. */
void migrate_conn_closed(server *s, client *c);
/* Frees the state once the loop has ended (no job can be in flight: the
 * loop runs until their completions). NULL does nothing. */
void migrate_free(struct migrate_state *st);

#endif
