/* access.h - the per-key access clock behind OBJECT IDLETIME and OBJECT
 * FREQ (redis' LRU/LFU fields), kept beside the store, not in it.
 *
 * Contract. Every command that reads or writes keys records an access for
 * them after it ran (access_touch_cmd, from cmd_call), except those redis
 * looks keys up for with LOOKUP_NOTOUCH (TYPE, TTL, PTTL, EXISTS, OBJECT,
 * EXPIRETIME, PEXPIRETIME, MEMORY USAGE; RESTORE sets its key's clock
 * itself, from IDLETIME or FREQ). Each entry holds the last access
 * (wall-clock ms) and an LFU counter updated as redis' LFULogIncr /
 * LFUDecrAndReturn (lfu-log-factor, lfu-decay-time from CONFIG).
 *
 * The table is bounded (ACCESS_MAX entries). When full, each new key
 * evicts the least recently used of 16 sampled entries, and `floor`
 * remembers the newest access evicted; a key with no entry was therefore
 * last accessed at or before floor (or before the node started), so its
 * idle time is reported as now - floor: a lower bound, as redis' own LRU
 * clock is an approximation. Nothing here is persisted: a
 * restart or a move starts every key's clock at that moment.
 * Threads: the node's event loop only.
 */
#ifndef KEEL_NODE_ACCESS_H
#define KEEL_NODE_ACCESS_H

#include "node/cmd.h"

#include <stddef.h>
#include <stdint.h>

#define ACCESS_MAX (1u << 17)

struct access_table;

/* Records an access to x's command's keys (d's key positions). */
void access_touch_cmd(cmd_ctx *x, const cmd_def *d);
/* Seconds since key k was last accessed (see the contract's floor). */
long long access_idle_s(cmd_ctx *x, const char *k, size_t kl);
/* The key's LFU counter, decayed to now (redis' LFUDecrAndReturn). */
int access_freq(cmd_ctx *x, const char *k, size_t kl);
/* RESTORE IDLETIME / FREQ: sets the key's last access to now - idle_s, or
 * its LFU counter (0..255). Returns 0 or KEEL_ENOMEM. */
int access_set_idle(cmd_ctx *x, const char *k, size_t kl, long long idle_s);
int access_set_freq(cmd_ctx *x, const char *k, size_t kl, int freq);
/* 1 if maxmemory-policy is an LFU one (then OBJECT FREQ answers and
 * OBJECT IDLETIME refuses, as redis). */
int access_lfu_mode(server *s);
/* Entries held (tests). */
size_t access_count(const server *s);
void access_free(struct access_table *t);

#endif
