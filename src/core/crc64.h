/* crc64.h - CRC-64/Jones, the checksum redis puts at the end of a DUMP
 * payload (reflected, polynomial 0xad93d23594c935a9, init 0, no final xor;
 * crc64("123456789") = 0xe9c6d914c4b8d9ca). Pure; any thread (the table is
 * built once, on first use, by the loop thread's first call or any other:
 * building it twice writes the same values).
 */
#ifndef KEEL_CRC64_H
#define KEEL_CRC64_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc over p[0..len): pass 0 to start. */
uint64_t keel_crc64(uint64_t crc, const void *p, size_t len);

#endif
