/* edge/crc32.c - CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), zlib's crc32(). A 256-entry
 * table computed at compile time would be 1 KB of source; it is built on first use instead. */
#include "edge/crypto.h"

static uint32_t table[256];
static int table_ready;

static void make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    table_ready = 1;
}

uint32_t sqze_crc32(uint32_t crc, const void *p, size_t n) {
    if (!table_ready) make_table();
    const uint8_t *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ b[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
