/* edge/crc32.c - CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), zlib's crc32(), eight
 * bytes a step (slicing-by-8: eight 256-entry tables, 8 KB, built on first use; the bytewise
 * loop took a tenth of a short sqz-edge run checking a 77 MB bundle). */
#include "edge/crypto.h"

static uint32_t table[8][256];
static int table_ready;

static void make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
    table_ready = 1;
}

static uint32_t le32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint32_t sqze_crc32(uint32_t crc, const void *p, size_t n) {
    if (!table_ready) make_table();
    const uint8_t *b = p;
    crc = ~crc;
    for (; n >= 8; n -= 8, b += 8) {
        const uint32_t lo = le32(b) ^ crc, hi = le32(b + 4);
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
              table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
    }
    for (; n > 0; n--, b++) crc = table[0][(crc ^ *b) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
