/* latency.h - LATENCY HISTOGRAM / LATEST / HISTORY / RESET / DOCTOR / HELP,
 * as redis 7.0's latency monitor, for the events keel can see.
 *
 * Contract. HISTOGRAM reads the per-command histograms of cmdstats.h. The
 * event monitor samples one event kind, "command" (a command, or
 * "fast-command" for a CMD_FAST one, whose handler took at least
 * latency-monitor-threshold ms; 0 disables it, as in redis): cmd_call
 * offers each command with latency_record. Per event, the last 160 samples
 * (unix time s, latency ms; one per second, the max of that second) and the
 * all-time max are kept, in memory only. Threads: the node's event loop.
 */
#ifndef KEEL_NODE_LATENCY_H
#define KEEL_NODE_LATENCY_H

#include "node/cmd.h"

#include <stdint.h>

struct latency_mon;

void latency_record(cmd_ctx *x, const cmd_def *d, uint64_t duration_us);
void latency_free(struct latency_mon *m);

#endif
