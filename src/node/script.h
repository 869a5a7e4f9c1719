/* script.h - the Lua 5.1 scripting engine behind EVAL, EVALSHA, EVAL_RO,
 * EVALSHA_RO, SCRIPT and FUNCTION/FCALL, as redis 7.0 serves them.
 *
 * One Lua state per node, created on first use, on the loop thread only.
 * Scripts are cached by the SHA1 of their body (SCRIPT FLUSH drops the
 * cache and the state). A script runs inside the dispatch of the command
 * that started it: one loop turn, so its writes go into the turn's one
 * store batch and one group commit, and no other client's command runs in
 * between. redis.call/pcall go through keel's own command table and
 * handlers (script_call), with redis' checks: unknown command, arity,
 * commands denied to scripts (blocking ones, MULTI, ...), writes from a
 * read-only script, and the cluster rules: every key a script touches is
 * in one slot (the slot of its declared keys, else of the first key it
 * touches) served by this node.
 *
 * Sandbox: the globals and the library tables are read-only proxies (stock
 * Lua 5.1 has no read-only tables: a metatable refuses writes, and
 * setmetatable/rawset refuse the proxies), reading an undefined global is
 * an error, and loadfile/dofile/print/os/io/package/require are absent;
 * loadstring refuses bytecode. Libraries: string, table, math, cjson and
 * bit (Debian's lua-cjson and lua-bitop), cmsgpack (node/script_msgpack,
 * over msgpack-c); struct is not packaged by Debian and is absent.
 *
 * Time limit. After busy-reply-threshold ms (CONFIG SET lua-time-limit or
 * busy-reply-threshold; default 5000) the running script serves the other
 * clients from its count hook (rserver_poll_busy): they get -BUSY, except
 * SCRIPT KILL / FUNCTION KILL, which stop a script that has not written
 * (-UNKILLABLE otherwise).
 *
 * Threads: everything runs on the loop thread.
 */
#ifndef KEEL_SCRIPT_H
#define KEEL_SCRIPT_H

#include "node/cmd.h"

typedef struct script_engine script_engine;

/* EVAL/EVALSHA and their _RO forms: x->argv[1] the body (or the sha when
 * by_sha), argv[2] numkeys, then keys and args. Replies exactly once. */
void script_eval(cmd_ctx *x, int by_sha, int ro);
/* FUNCTION LOAD [REPLACE] code: registers the library's functions. */
void script_function_load(cmd_ctx *x);
/* FCALL / FCALL_RO name numkeys keys... args... */
void script_fcall(cmd_ctx *x, int ro);
/* FUNCTION FLUSH, DELETE, LIST (names only). */
void script_function_flush(cmd_ctx *x);
void script_function_delete(cmd_ctx *x);
void script_function_list(cmd_ctx *x);
/* SCRIPT LOAD / EXISTS / FLUSH, SCRIPT KILL and FUNCTION KILL (is_eval 0). */
void script_load(cmd_ctx *x);
void script_exists(cmd_ctx *x);
void script_flush(cmd_ctx *x);
void script_kill(cmd_ctx *x, int is_eval);

/* 1 while a script has run past the time limit: cmd_dispatch then refuses
 * other clients' commands with script_reply_busy, except those for which
 * script_allowed_busy(d) is 1. */
int script_busy(const server *s);
/* 1 if c is the client a script's redis.call commands run as. */
int script_is_caller(const server *s, const client *c);
int script_allowed_busy(const cmd_def *parent, const cmd_def *d);
void script_reply_busy(cmd_ctx *x);
/* The -BUSY error text script_reply_busy writes (EVAL's or FUNCTION's). */
const char *script_busy_msg(void);

/* CONFIG SET/GET of lua-time-limit and busy-reply-threshold. set returns 1
 * if name is one of them (*bad set when the value is not a number >= 0),
 * 0 otherwise. get appends "value" (decimal) to out for a known name. */
int script_config_set(server *s, const char *name, const char *value, int *bad);
int script_config_get(const server *s, const char *name, char *out, size_t cap);
/* INFO memory's scripting lines (used_memory_lua, number_of_cached_scripts...),
 * appended to b without a section header (info.c's memory section calls it). */
void script_info_memory(const server *s, kbuf *b);
/* Frees the engine (server shutdown); no-op if it never started. */
void script_shutdown(void);

#endif
