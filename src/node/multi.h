/* multi.h - transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, as redis
 * 7.0 serves them in cluster mode.
 *
 * Queueing. Between MULTI and EXEC, cmd_dispatch checks each command as it
 * would execute it (unknown command, arity, NOAUTH, CROSSSLOT, -MOVED) and
 * then, instead of executing it, copies it into the client's queue and
 * replies +QUEUED. A refusal at queue time flags the transaction: EXEC then
 * replies -EXECABORT. EXEC routes all the queued commands together, as
 * redis' getNodeByQuery does (-CROSSSLOT, -MOVED, or held while a move
 * fences the partition), then runs them one after the other inside its own
 * dispatch: one loop turn, so one store batch and one group commit, and no
 * other client's command in between.
 *
 * Watching. The node keeps a table of the keys some client watches, each
 * with a write counter. Every key write of the command layer (db_put,
 * db_del of a key that existed, sub_put, sub_del: db.c) bumps the counter of
 * its key when it is watched. WATCH records the counter and whether the key
 * was live; EXEC fails (a null array) if a counter moved, or a key live at
 * WATCH is not live any more (expired, swept, flushed, or moved away).
 *
 * Threads: everything runs on the loop thread.
 */
#ifndef KEEL_MULTI_H
#define KEEL_MULTI_H

#include "node/cmd.h"

/* 1 if c is between MULTI and EXEC/DISCARD. */
int multi_active(const client *c);
/* A command refused at queue time: the transaction will abort. No-op
 * outside MULTI. */
void multi_flag(client *c);
/* Copies the command in x (d its definition, resolved subcommand included;
 * has_keys and x->slot from routing) into c's queue and replies +QUEUED
 * (or an error on out-of-memory, which flags the transaction). */
void multi_queue(cmd_ctx *x, const cmd_def *d, int has_keys);
/* EXEC in MULTI refused before it runs (its arity): replies -EXECABORT
 * with the reason (why, without "ERR ") and ends the transaction, as
 * redis' execCommandAbort. */
void multi_exec_abort(cmd_ctx *x, const char *why);
/* EXEC in MULTI. Returns 0 after replying, or RSERVER_HOLD (nothing
 * replied, the transaction kept) when the slot's partition is fenced. */
int multi_exec(cmd_ctx *x);
/* The write hook: a command changed the key k (bytes, borrowed). */
void multi_touch(server *s, const char *k, size_t kl);
/* rserver on_close: drops c's transaction and watches. Before
 * move_conn_closed, which frees c->user. */
void multi_conn_closed(server *s, client *c);
/* Frees the watch table; every client must have been closed first. */
void multi_server_free(server *s);

/* Handlers (cmd_table.c). */
void cmd_multi(cmd_ctx *x);
void cmd_exec(cmd_ctx *x);
void cmd_discard(cmd_ctx *x);
void cmd_watch(cmd_ctx *x);
void cmd_unwatch(cmd_ctx *x);

#endif
