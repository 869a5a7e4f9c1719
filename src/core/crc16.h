/* crc16.h - Redis Cluster key hashing.
 *
 * keel_crc16 is CRC16-CCITT (XMODEM), as in the Redis Cluster spec.
 * keel_key_slot applies the {hashtag} rule: if the key has a '{' followed
 * later by a '}' with at least one byte between them, only the bytes between
 * the first '{' and the first '}' after it are hashed. Pure; any thread.
 */
#ifndef KEEL_CRC16_H
#define KEEL_CRC16_H

#include <stddef.h>
#include <stdint.h>

#define KEEL_SLOTS 16384

uint16_t keel_crc16(const char *buf, size_t len);
/* Returns the slot in [0, 16384) for key[0..len). key may contain NULs. */
unsigned keel_key_slot(const char *key, size_t len);

#endif
