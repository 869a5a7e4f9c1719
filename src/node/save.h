/* save.h - SAVE, BGSAVE, LASTSAVE and SHUTDOWN (cmd_save.c): keel's meaning
 * of a snapshot is "every acknowledged write durable now, and out of the
 * memtables" (store_save, store.h); SHUTDOWN is the graceful stop SIGTERM
 * does (server_stop, server.h). The state (last save time, a BGSAVE in
 * flight, SHUTDOWN's deferred stop) is made lazily in server.save.
 * Threads: the node's event loop; a BGSAVE's memtable flush runs on the
 * libuv thread pool.
 */
#ifndef KEEL_NODE_SAVE_H
#define KEEL_NODE_SAVE_H

#include "node/server.h"

/* From server_stop: closes the loop handles SHUTDOWN made. A BGSAVE in
 * flight keeps the loop running until it completes (the store stays open
 * until then). s->save may be NULL. */
void save_stop(server *s);
/* Frees the state (after the loop ended). NULL does nothing. */
void save_free(struct save_state *st);
/* LASTSAVE's value: the unix time of the last completed save, or of the
 * node's start before any. */
long long save_last_unix(const server *s);
/* 1 while a BGSAVE's memtable flush runs (INFO rdb_bgsave_in_progress). */
int save_bgsave_running(const server *s);

#endif
