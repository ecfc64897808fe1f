/*
 * edge/q4x8.c - q4_0 in 8-row groups (bundle dtype SQZB_DT_Q4_0_X8): the layout, and where a
 * row's blocks lie in it. The integer kernels (kernels_q8.c) read a block column of 8 rows at
 * once; everything else reads one row through sqze__q4row, in either layout, with the same
 * arithmetic, so a product's result does not depend on the layout except in those kernels.
 */
#include <string.h>

#include "edge/bundle_format.h"
#include "edge/edge_internal.h"

sqze_q4row sqze__q4row(const uint8_t *data, uint32_t dtype, uint32_t r, uint32_t k) {
    const uint64_t nb = k / 32;
    sqze_q4row g;
    if (dtype == SQZB_DT_Q4_0_X8) {
        const uint32_t i = r % 8;
        g.base = data + (uint64_t)(r / 8) * nb * 144;
        g.stride = 144;
        g.d = 2 * i;
        g.qa = 16 + 8 * i;
        g.qb = 80 + 8 * i;
        g.m = 0;
        return g;
    }
    const uint32_t m1 = dtype == SQZB_DT_Q4_1;
    g.stride = m1 ? 20 : 18;
    g.base = data + (uint64_t)r * nb * g.stride;
    g.d = 0;
    g.m = 2;
    g.qa = m1 ? 4 : 2;
    g.qb = g.qa + 8;
    return g;
}

/* Each block of row 8g+i moved between the two layouts: its scale (2 bytes) and two halves of 8
 * code bytes, at these offsets in the plain block and in the group's block column. */
static void move_blocks(const uint8_t *src, uint8_t *dst, uint64_t rows, uint64_t cols, int to_x8) {
    const uint64_t nb = cols / 32;
    static const size_t plain_at[3] = {0, 2, 10}, len[3] = {2, 8, 8};
    for (uint64_t g = 0; g < rows / 8; g++)
        for (uint64_t b = 0; b < nb; b++)
            for (uint64_t i = 0; i < 8; i++) {
                const size_t x8_at[3] = {2 * i, 16 + 8 * i, 80 + 8 * i};
                const size_t xo = (g * nb + b) * 144, po = ((8 * g + i) * nb + b) * 18;
                for (int k = 0; k < 3; k++) {
                    if (to_x8) memcpy(dst + xo + x8_at[k], src + po + plain_at[k], len[k]);
                    else memcpy(dst + po + plain_at[k], src + xo + x8_at[k], len[k]);
                }
            }
}

void sqze_q4_0_to_x8(const uint8_t *plain, uint8_t *x8, uint64_t rows, uint64_t cols) {
    move_blocks(plain, x8, rows, cols, 1);
}

void sqze_q4_0_from_x8(const uint8_t *x8, uint8_t *plain, uint64_t rows, uint64_t cols) {
    move_blocks(x8, plain, rows, cols, 0);
}
