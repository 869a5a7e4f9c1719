/* move_wire.h - the records a stream carries (the move protocol's copy and
 * change stream; replication reuses them).
 *
 *   chunk record:  [slot u16][klen u32][key][vlen u32][value]
 *   change record: [pos u64][t_us u64] + a chunk record
 *
 * all big-endian; vlen MOVE_DEL (0xffffffff) marks a delete, with no value.
 * Keys and values are the store's raw records (store_txn_put_raw), so every
 * type travels with no type-specific code.
 */
#ifndef KEEL_MOVE_WIRE_H
#define KEEL_MOVE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define MOVE_DEL 0xffffffffu
#define MOVE_CHANGE_HDR 16 /* pos + t_us before each change record */

void move_be16(char *p, unsigned v);
void move_be32(char *p, uint32_t v);
void move_be64(char *p, uint64_t v);
uint64_t move_rd(const char *p, int n); /* n big-endian bytes */

/* Appends [slot][klen][key][vlen][val] (val NULL = delete). 0 or -1 (out
 * of memory; b may hold part of the record). */
int move_put_record(kbuf *b, unsigned slot, const char *k, size_t klen, const char *v,
                    size_t vlen);
/* Parses one record at p[0..n); returns its size, or 0 if malformed (too
 * short, a slot >= 16384, or a length past n). *v is NULL for a delete. */
size_t move_get_record(const char *p, size_t n, unsigned *slot, const char **k, size_t *klen,
                       const char **v, size_t *vlen);

#endif
