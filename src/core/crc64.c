/* crc64.c - CRC-64/Jones, byte-table driven (see crc64.h). */
#include "core/crc64.h"

#define POLY 0x95ac9329ac4bc9b5ULL /* 0xad93d23594c935a9, bit-reflected */

static uint64_t table[256];
static int ready;

static void build(void) {
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[i] = c;
    }
    ready = 1;
}

uint64_t keel_crc64(uint64_t crc, const void *p, size_t len) {
    if (!ready) build();
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return crc;
}
