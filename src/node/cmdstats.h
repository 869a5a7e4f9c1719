/* cmdstats.h - per-command and per-error counters for INFO commandstats and
 * errorstats, as redis 7.0 keeps them.
 *
 * calls and usec count executions of a handler (inside EXEC too);
 * failed_calls those whose reply was an error; rejected_calls those refused
 * before the handler ran (arity, NOAUTH, CROSSSLOT, -MOVED). Every error
 * reply is also counted under its first word (errorstat_ERR, _WRONGTYPE...).
 * State lives in the server (s->cstats), created on first use; a failed
 * allocation just drops the count. CONFIG RESETSTAT zeroes it all.
 */
#ifndef KEEL_CMDSTATS_H
#define KEEL_CMDSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "node/cmd.h"

struct cmdstats;

void cmdstats_call(server *s, const cmd_def *d, uint64_t us, int failed);
void cmdstats_rejected(server *s, const cmd_def *d);
/* reply: a RESP error ("-ERR ...\r\n"), len bytes. */
void cmdstats_error(server *s, const char *reply, size_t len);
void cmdstats_reset(server *s);
/* INFO's "# Commandstats" and "# Errorstats" bodies (lines, no header). */
void cmdstats_info_commands(server *s, kbuf *b);
void cmdstats_info_errors(server *s, kbuf *b);
uint64_t cmdstats_total_errors(const server *s);
/* Calls of d since the last RESETSTAT. */
uint64_t cmdstats_calls(server *s, const cmd_def *d);
/* LATENCY HISTOGRAM's value for d: {calls, histogram_usec: {2^k: calls
 * under 2^k us, cumulative}}, only the buckets that hold calls (redis
 * reports its HDR histogram's power-of-2 buckets the same way). */
void cmdstats_write_histogram(cmd_ctx *x, const cmd_def *d);
void cmdstats_free(struct cmdstats *cs);

#endif
