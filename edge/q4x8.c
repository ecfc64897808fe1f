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

void sqze_q4_0_to_x8(const uint8_t *plain, uint8_t *x8, uint64_t rows, uint64_t cols) {
    const uint64_t nb = cols / 32;
    for (uint64_t g = 0; g < rows / 8; g++)
        for (uint64_t b = 0; b < nb; b++) {
            uint8_t *o = x8 + (g * nb + b) * 144;
            for (uint64_t i = 0; i < 8; i++) {
                const uint8_t *p = plain + ((8 * g + i) * nb + b) * 18;
                memcpy(o + 2 * i, p, 2);
                memcpy(o + 16 + 8 * i, p + 2, 8);
                memcpy(o + 80 + 8 * i, p + 10, 8);
            }
        }
}

void sqze_q4_0_from_x8(const uint8_t *x8, uint8_t *plain, uint64_t rows, uint64_t cols) {
    const uint64_t nb = cols / 32;
    for (uint64_t g = 0; g < rows / 8; g++)
        for (uint64_t b = 0; b < nb; b++) {
            const uint8_t *o = x8 + (g * nb + b) * 144;
            for (uint64_t i = 0; i < 8; i++) {
                uint8_t *p = plain + ((8 * g + i) * nb + b) * 18;
                memcpy(p, o + 2 * i, 2);
                memcpy(p + 2, o + 16 + 8 * i, 8);
                memcpy(p + 10, o + 80 + 8 * i, 8);
            }
        }
}
