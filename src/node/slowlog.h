/* slowlog.h - SLOWLOG GET/LEN/RESET/HELP and the log behind them, as redis
 * 7.0's slowlog.c.
 *
 * Contract. cmd_call offers every executed command (slowlog_record, after
 * its handler; EXEC's queued commands each, EXEC itself not) with its
 * duration. It is logged when slowlog-log-slower-than >= 0 and the duration
 * (µs) is at least that; the log keeps the newest slowlog-max-len entries
 * (CONFIG parameters, read again after each CONFIG SET). An entry is
 * redis' six fields: id (from 0, never reused until restart), unix time
 * (s), duration (µs), the arguments (at most 32: the 32nd says "... (N more
 * arguments)"; an argument over 128 bytes is cut with "... (N more
 * bytes)"; AUTH's arguments are "(redacted)"), the client's address and
 * name. In memory only. Threads: the node's event loop only.
 */
#ifndef KEEL_NODE_SLOWLOG_H
#define KEEL_NODE_SLOWLOG_H

#include "node/cmd.h"

#include <stdint.h>

struct slowlog;

void slowlog_record(cmd_ctx *x, const cmd_def *d, uint64_t duration_us);
void slowlog_free(struct slowlog *sl);

#endif
