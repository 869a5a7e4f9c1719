/* crc16.c - CRC16-CCITT (XMODEM: poly 0x1021, init 0) with a 256-entry table
 * generated once at first use; see crc16.h for the hashtag rule. */
#include "core/crc16.h"

#include <string.h>

static uint16_t crc_table[256];

/* Runs before main(), so lookups never race with initialisation. */
__attribute__((constructor)) static void crc16_init_table(void) {
    for (unsigned i = 0; i < 256; i++) {
        uint16_t c = (uint16_t)(i << 8);
        for (int j = 0; j < 8; j++)
            c = (c & 0x8000) ? (uint16_t)((c << 1) ^ 0x1021) : (uint16_t)(c << 1);
        crc_table[i] = c;
    }
}

uint16_t keel_crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ (uint8_t)buf[i]) & 0xff]);
    return crc;
}

unsigned keel_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t start = (size_t)(open - key) + 1;
        const char *close = memchr(key + start, '}', len - start);
        /* "{}" (empty tag) hashes the whole key, as Redis does. */
        if (close && close > key + start) {
            len = (size_t)(close - (key + start));
            key += start;
        }
    }
    return keel_crc16(key, len) & (KEEL_SLOTS - 1);
}
