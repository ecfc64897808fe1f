/*
 * kernels/cpu/w4_pack.c - packer, unpacker and dequantizer of the prepared int4 layout
 * (the layout is documented in w4_pack.h).
 */
#include <string.h>

#include "core/blocks.h"
#include "core/internal.h"
#include "kernels/cpu/w4_pack.h"

sqz_status sqz__w4_layout_init(sqz_dtype dtype, int64_t n, int64_t k, sqz_w4_layout *out) {
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(dtype != SQZ_DTYPE_Q4_0 && dtype != SQZ_DTYPE_Q4_1, SQZ_ERR_INVALID_ARG,
                  "prepare_w4: weights of dtype %s (q4_0 or q4_1 expected)", sqz_dtype_name(dtype));
    SQZ_RETURN_IF(n < 1 || k < SQZ_W4_GROUP || k % SQZ_W4_GROUP != 0, SQZ_ERR_INVALID_ARG,
                  "prepare_w4: weight shape (%lld, %lld): n must be >= 1 and k a positive multiple of %d",
                  (long long)n, (long long)k, SQZ_W4_GROUP);
    out->dtype = dtype;
    out->n = n;
    out->k = k;
    out->n_tiles = n / SQZ_W4_TILE_N + (n % SQZ_W4_TILE_N != 0);
    out->k_steps = k / SQZ_W4_KSTEP;
    out->groups = k / SQZ_W4_GROUP;
    const size_t block = dtype == SQZ_DTYPE_Q4_0 ? sizeof(sqz_block_q4_0) : sizeof(sqz_block_q4_1);
    size_t q_bytes, d_bytes, total;
    bool ok = sqz__mul_size((size_t)out->n_tiles, (size_t)out->k_steps, &q_bytes) &&
              sqz__mul_size(q_bytes, SQZ_W4_STEP_BYTES, &q_bytes) &&
              sqz__mul_size((size_t)out->n_tiles, (size_t)out->groups, &d_bytes) &&
              sqz__mul_size(d_bytes, SQZ_W4_SCALE_BYTES, &d_bytes) && sqz__add_size(q_bytes, d_bytes, &total) &&
              sqz__mul_size((size_t)out->groups, block, &out->src_row_bytes);
    if (ok && dtype == SQZ_DTYPE_Q4_1) ok = sqz__add_size(total, d_bytes, &total);
    SQZ_RETURN_IF(!ok, SQZ_ERR_INVALID_ARG, "prepare_w4: weight shape (%lld, %lld) overflows", (long long)n,
                  (long long)k);
    out->q_offset = 0;
    out->d_offset = q_bytes;
    out->m_offset = q_bytes + d_bytes;
    out->total = total;
    return SQZ_OK;
}

/* Byte offsets inside one GGUF block. */
static size_t qs_offset(sqz_dtype t) { return t == SQZ_DTYPE_Q4_0 ? 2 : 4; }

/* Offset of block (row, group) in a GGUF weight. */
static size_t block_off(const sqz_w4_layout *L, int64_t row, int64_t group) {
    const size_t bsize = L->dtype == SQZ_DTYPE_Q4_0 ? sizeof(sqz_block_q4_0) : sizeof(sqz_block_q4_1);
    return (size_t)row * L->src_row_bytes + (size_t)group * bsize;
}

/* Nibble e (0..31) of a block: low nibbles are elements 0..15, high nibbles 16..31. */
static unsigned block_nibble(const uint8_t *qs, int e) {
    return e < 16 ? (qs[e] & 0x0Fu) : (qs[e - 16] >> 4);
}

/* Offset of lane's 16 bytes of (tile, step) in the prepared buffer. */
static size_t lane_off(const sqz_w4_layout *L, int64_t tile, int64_t step, int lane) {
    return L->q_offset + ((size_t)(tile * L->k_steps + step) * 32 + (size_t)lane) * 16;
}

void sqz__w4_pack(const sqz_w4_layout *L, const void *vsrc, void *vdst) {
    const uint8_t *src = vsrc;
    uint8_t *dst = vdst;
    const size_t qs_off = qs_offset(L->dtype);
    for (int64_t tile = 0; tile < L->n_tiles; tile++) {
        for (int64_t step = 0; step < L->k_steps; step++) {
            const int64_t group = step / 2;
            for (int lane = 0; lane < 32; lane++) {
                uint8_t *chunk = dst + lane_off(L, tile, step, lane);
                for (int w = 0; w < 4; w++) {
                    uint32_t word = 0;
                    for (int p = 0; p < 8; p++) {
                        int kk, nn;
                        sqz_w4_nibble_coord(lane, w, p, &kk, &nn);
                        const int64_t row = tile * SQZ_W4_TILE_N + nn;
                        if (row >= L->n) continue; /* padding column: q = 0, d = 0 */
                        const int e = (int)(step % 2) * SQZ_W4_KSTEP + kk;
                        const unsigned q = block_nibble(src + block_off(L, row, group) + qs_off, e);
                        word |= (uint32_t)q << (4 * p);
                    }
                    sqz__wr_u32(chunk + 4 * w, word);
                }
            }
        }
        for (int64_t group = 0; group < L->groups; group++) {
            uint8_t *d = dst + L->d_offset + (size_t)(tile * L->groups + group) * SQZ_W4_SCALE_BYTES;
            uint8_t *m = dst + L->m_offset + (size_t)(tile * L->groups + group) * SQZ_W4_SCALE_BYTES;
            for (int c = 0; c < SQZ_W4_TILE_N; c++) {
                const int64_t row = tile * SQZ_W4_TILE_N + c;
                const int pos = sqz_w4_scale_pos(c);
                uint16_t dv = 0, mv = 0;
                if (row < L->n) {
                    const uint8_t *b = src + block_off(L, row, group);
                    dv = sqz__rd_u16(b);
                    if (L->dtype == SQZ_DTYPE_Q4_1) mv = sqz__rd_u16(b + 2);
                }
                sqz__wr_u16(d + 2 * pos, dv);
                if (L->dtype == SQZ_DTYPE_Q4_1) sqz__wr_u16(m + 2 * pos, mv);
            }
        }
    }
}

void sqz__w4_unpack(const sqz_w4_layout *L, const void *vprep, void *vdst) {
    const uint8_t *prep = vprep;
    uint8_t *dst = vdst;
    memset(dst, 0, (size_t)L->n * L->src_row_bytes);
    const size_t qs_off = qs_offset(L->dtype);
    for (int64_t tile = 0; tile < L->n_tiles; tile++) {
        for (int64_t step = 0; step < L->k_steps; step++) {
            const int64_t group = step / 2;
            for (int lane = 0; lane < 32; lane++) {
                const uint8_t *chunk = prep + lane_off(L, tile, step, lane);
                for (int w = 0; w < 4; w++) {
                    const uint32_t word = sqz__rd_u32(chunk + 4 * w);
                    for (int p = 0; p < 8; p++) {
                        int kk, nn;
                        sqz_w4_nibble_coord(lane, w, p, &kk, &nn);
                        const int64_t row = tile * SQZ_W4_TILE_N + nn;
                        if (row >= L->n) continue;
                        const int e = (int)(step % 2) * SQZ_W4_KSTEP + kk;
                        uint8_t *qs = dst + block_off(L, row, group) + qs_off;
                        const uint8_t q = (uint8_t)((word >> (4 * p)) & 0x0Fu);
                        if (e < 16) qs[e] = (uint8_t)((qs[e] & 0xF0u) | q);
                        else qs[e - 16] = (uint8_t)((qs[e - 16] & 0x0Fu) | (q << 4));
                    }
                }
            }
        }
        for (int64_t group = 0; group < L->groups; group++) {
            const uint8_t *d = prep + L->d_offset + (size_t)(tile * L->groups + group) * SQZ_W4_SCALE_BYTES;
            const uint8_t *m = prep + L->m_offset + (size_t)(tile * L->groups + group) * SQZ_W4_SCALE_BYTES;
            for (int c = 0; c < SQZ_W4_TILE_N; c++) {
                const int64_t row = tile * SQZ_W4_TILE_N + c;
                if (row >= L->n) break;
                uint8_t *b = dst + block_off(L, row, group);
                const int pos = sqz_w4_scale_pos(c);
                sqz__wr_u16(b, sqz__rd_u16(d + 2 * pos));
                if (L->dtype == SQZ_DTYPE_Q4_1) sqz__wr_u16(b + 2, sqz__rd_u16(m + 2 * pos));
            }
        }
    }
}

void sqz__w4_dequant_rows(const sqz_w4_layout *L, const void *vprep, int64_t row0, int64_t rows, float *out) {
    const uint8_t *prep = vprep;
    const int64_t t0 = row0 / SQZ_W4_TILE_N, t1 = (row0 + rows - 1) / SQZ_W4_TILE_N;
    const int q41 = L->dtype == SQZ_DTYPE_Q4_1;
    for (int64_t tile = t0; rows > 0 && tile <= t1; tile++) {
        for (int64_t group = 0; group < L->groups; group++) {
            /* the group's 64 scales (and minimums) by column, widened once */
            float dv[SQZ_W4_TILE_N], mv[SQZ_W4_TILE_N];
            const uint8_t *d = prep + L->d_offset + (size_t)(tile * L->groups + group) * SQZ_W4_SCALE_BYTES;
            const uint8_t *m = prep + L->m_offset + (size_t)(tile * L->groups + group) * SQZ_W4_SCALE_BYTES;
            for (int c = 0; c < SQZ_W4_TILE_N; c++) {
                dv[c] = sqz_fp16_to_fp32(sqz__rd_u16(d + 2 * sqz_w4_scale_pos(c)));
                mv[c] = q41 ? sqz_fp16_to_fp32(sqz__rd_u16(m + 2 * sqz_w4_scale_pos(c))) : 0.0f;
            }
            for (int64_t step = 2 * group; step < 2 * group + 2; step++) {
                for (int lane = 0; lane < 32; lane++) {
                    const uint8_t *chunk = prep + lane_off(L, tile, step, lane);
                    for (int w = 0; w < 4; w++) {
                        const uint32_t word = sqz__rd_u32(chunk + 4 * w);
                        for (int p = 0; p < 8; p++) {
                            int kk, nn;
                            sqz_w4_nibble_coord(lane, w, p, &kk, &nn);
                            const int64_t row = tile * SQZ_W4_TILE_N + nn;
                            if (row < row0 || row >= row0 + rows) continue;
                            const int q = (int)((word >> (4 * p)) & 0x0Fu);
                            /* the GGUF reference's arithmetic (quant/gguf/quant_ref.c) */
                            const float v = q41 ? q * dv[nn] + mv[nn] : (q - 8) * dv[nn];
                            out[(row - row0) * L->k + step * SQZ_W4_KSTEP + kk] = v;
                        }
                    }
                }
            }
        }
    }
}
