/* dump.h - DUMP's payload of a key (cmd_dump.c has the format), for DUMP
 * itself and for MIGRATE (cmd_migrate.c), which sends it to the target's
 * RESTORE and, when the target took it, compares it again before deleting
 * the key. Threads: the node's event loop only. */
#ifndef KEEL_NODE_DUMP_H
#define KEEL_NODE_DUMP_H

#include "node/cmd.h"

#include <stddef.h>
#include <stdint.h>

/* Writes the payload of key k (in x->slot) to out (emptied first; the
 * caller owns it) and its absolute expiry (0: none) to *expire_ms.
 * Returns 0, KEEL_ENOTFOUND (absent or expired), or a KEEL_E* storage
 * error. No txn may be open. */
int dump_payload(cmd_ctx *x, const char *k, size_t kl, kbuf *out, int64_t *expire_ms);

#endif
