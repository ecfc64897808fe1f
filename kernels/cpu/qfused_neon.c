/*
 * kernels/cpu/qfused_neon.c - the fused one-token kernels (qmatmul.h's dot1 slot) with aarch64
 * NEON: the generation step's y[j] = W[j] . x read straight from the blocks, each block once, its
 * values never stored. The math is qfused_avx512.c's, on 4-lane vectors:
 *
 * Where a block or sub-block of 32 has one scale (Q8_0, Q4_0/1, Q5_0/1, Q4_K, Q5_K, IQ4_NL,
 * IQ4_XS, IQ3_S), the scale and the minimum are factored out: sum w x = d (sum q x) + m (sum x), the
 * codes widened to floats (vmovl, vcvtq) and multiplied into a per-block sum that is scaled once,
 * the sums of x (xs) formed once per product for every row. That is the dot product of the
 * scalar dequantizer's weights up to float rounding (another order and grouping of the same
 * sums). The 16-element sub-blocks (Q2_K, Q3_K, Q6_K) form each weight as the scalar dequantizer
 * does (code times scale, minus the minimum: this file is compiled with -ffp-contract=off) and
 * FMA it. Several accumulators keep the FMA chains independent.
 *
 * tests/cli/test_qdot_aarch64.sh cross-compiles this file with core's scalar dequantizers and
 * tests/unit/qdot_main.c and runs it under qemu-aarch64: every kernel against the dequantized
 * weights' double dot product within 1e-5 of the sum of |w x|.
 */
#include "kernels/cpu/qmatmul.h"

#if SQZ__QMM_NEON
#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"

#define INLINE static inline __attribute__((always_inline))

/* IEEE half bits to float (exact, as sqz_fp16_to_fp32 for finite values). */
INLINE float h2f(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* The fp16 field at p as a float. */
INLINE float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h2f(h);
}

/* sum q x over 16 signed codes and x[0..16) as 4 lanes (two FMA chains). */
INLINE float32x4_t dot16_s8(int8x16_t q, const float *x) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
    float32x4_t a = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vld1q_f32(x));
    float32x4_t b = vmulq_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), vld1q_f32(x + 4));
    a = vfmaq_f32(a, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vld1q_f32(x + 8));
    b = vfmaq_f32(b, vcvtq_f32_s32(vmovl_high_s16(hi)), vld1q_f32(x + 12));
    return vaddq_f32(a, b);
}

/* The same over 16 unsigned codes. */
INLINE float32x4_t dot16_u8(uint8x16_t q, const float *x) {
    const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_high_u8(q);
    float32x4_t a = vmulq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))), vld1q_f32(x));
    float32x4_t b = vmulq_f32(vcvtq_f32_u32(vmovl_high_u16(lo)), vld1q_f32(x + 4));
    a = vfmaq_f32(a, vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))), vld1q_f32(x + 8));
    b = vfmaq_f32(b, vcvtq_f32_u32(vmovl_high_u16(hi)), vld1q_f32(x + 12));
    return vaddq_f32(a, b);
}

/* a += w x for 16 signed codes, w = code * ds (- ms when sub: Q2_K's minimum), formed as the
 * scalar dequantizer forms it, then multiplied into the sum. */
INLINE float32x4_t fma16_w(int8x16_t q, float ds, float ms, int sub, const float *x, float32x4_t a) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
    const int32x4_t c[4] = {vmovl_s16(vget_low_s16(lo)), vmovl_high_s16(lo), vmovl_s16(vget_low_s16(hi)),
                            vmovl_high_s16(hi)};
    const float32x4_t m = vdupq_n_f32(ms);
    SQZ__UNROLL(4)
    for (int g = 0; g < 4; g++) {
        float32x4_t w = vmulq_n_f32(vcvtq_f32_s32(c[g]), ds);
        if (sub) w = vsubq_f32(w, m);
        a = vfmaq_f32(a, w, vld1q_f32(x + 4 * g));
    }
    return a;
}

/* Byte j (0..15) = 16 where bit j of the two bytes at p is set (Q5's fifth bits). */
INLINE uint8x16_t fifth16(const uint8_t *p) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8(p[0]), vdup_n_u8(p[1]));
    return vandq_u8(vtstq_u8(v, vld1q_u8(bit)), vdupq_n_u8(16));
}

/* sum q x over one 32-element block of nibble codes (16 bytes: low nibbles elements 0..15, high
 * 16..31), plus 16 where the element's bit of qh is set (qh: the 4 bytes of Q5's fifth bits;
 * NULL: none). */
INLINE float32x4_t t32_nib(const uint8_t *qs, const uint8_t *qh, const float *x) {
    const uint8x16_t r = vld1q_u8(qs);
    uint8x16_t lo = vandq_u8(r, vdupq_n_u8(15)), hi = vshrq_n_u8(r, 4);
    if (qh) {
        lo = vorrq_u8(lo, fifth16(qh));
        hi = vorrq_u8(hi, fifth16(qh + 2));
    }
    return vaddq_f32(dot16_u8(lo, x), dot16_u8(hi, x + 16));
}

/* The 32-element nibble types: w = d q + c with c = off * d (Q4_0: -8, Q5_0: -16) or the block's
 * m (Q4_1, Q5_1): sum w x = d (sum q x) + c (sum x), the sums of x from xs. Blocks of `bs` bytes
 * hold d at 0, m at 2 (with_min), the 5th bits after them (five), then the 16 nibble bytes. */
INLINE float dot_nib32(const uint8_t *b, size_t bs, int with_min, int five, float off, const float *x,
                       const float *xs, int64_t k) {
    const size_t qo = (with_min ? 4 : 2) + (five ? 4 : 0);
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    float c = 0.0f;
    const int64_t nb = k / 32;
    for (int64_t i = 0; i < nb; i += 2, b += 2 * bs, x += 64) { /* two blocks, two accumulators */
        a0 = vfmaq_n_f32(a0, t32_nib(b + qo, five ? b + qo - 4 : NULL, x), f16_at(b));
        c += f16_at(b + (with_min ? 2 : 0)) * xs[i];
        if (i + 1 == nb) break;
        const uint8_t *b1 = b + bs;
        a1 = vfmaq_n_f32(a1, t32_nib(b1 + qo, five ? b1 + qo - 4 : NULL, x + 32), f16_at(b1));
        c += f16_at(b1 + (with_min ? 2 : 0)) * xs[i + 1];
    }
    return vaddvq_f32(vaddq_f32(a0, a1)) + (with_min ? c : off * c);
}

float sqz__qdot1_q4_0_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q4_0), 0, 0, -8.0f, x, xs, k);
}

float sqz__qdot1_q4_1_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q4_1), 1, 0, 0.0f, x, xs, k);
}

float sqz__qdot1_q5_0_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q5_0), 0, 1, -16.0f, x, xs, k);
}

float sqz__qdot1_q5_1_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    return dot_nib32(vx, sizeof(sqz_block_q5_1), 1, 1, 0.0f, x, xs, k);
}

/* sum q x over the 32 signed codes of one Q8_0 block. */
INLINE float32x4_t t32_s8(const int8_t *q, const float *x) {
    return vaddq_f32(dot16_s8(vld1q_s8(q), x), dot16_s8(vld1q_s8(q + 16), x + 16));
}

/* Q8_0: w = d q; sum q x per block (codes widened to floats), then times d. */
float sqz__qdot1_q8_0_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q8_0 *b = vx;
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    const int64_t nb = k / SQZ_QK8_0;
    for (int64_t i = 0; i < nb; i += 2, x += 2 * SQZ_QK8_0) { /* two blocks, two accumulators */
        a0 = vfmaq_n_f32(a0, t32_s8(b[i].qs, x), h2f(b[i].d));
        if (i + 1 == nb) break;
        a1 = vfmaq_n_f32(a1, t32_s8(b[i + 1].qs, x + 32), h2f(b[i + 1].d));
    }
    return vaddvq_f32(vaddq_f32(a0, a1));
}

/* The scales of a Q4_K / Q5_K super-block (12 packed bytes) times d into ds[8]; mins +=
 * (dmin m_j) xs_j over its 8 sub-blocks of 32. */
INLINE float32x4_t k_scales(const uint8_t *scales, float d, float dmin, const float *xs, float ds[8],
                            float32x4_t mins) {
    uint8_t sc[8], mn[8];
    sqz__k4_scales_mins(scales, sc, mn);
    const uint16x8_t m16 = vmovl_u8(vld1_u8(mn)), s16 = vmovl_u8(vld1_u8(sc));
    vst1q_f32(ds, vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(s16))), d));
    vst1q_f32(ds + 4, vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(s16)), d));
    mins = vfmaq_f32(mins, vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(m16))), dmin), vld1q_f32(xs));
    return vfmaq_f32(mins, vmulq_n_f32(vcvtq_f32_u32(vmovl_high_u16(m16)), dmin), vld1q_f32(xs + 4));
}

/* Q4_K / Q5_K: w = (d sc_j) q - (dmin m_j) for sub-block j of 32, q plus 16 where the 5th bit is
 * set (five: Q5_K's qh, 32 bytes after the scales). Per sub-block t_j = sum q x (codes widened to
 * floats, no per-weight scale), then a += (d sc_j) t_j; the minima once per super-block as a
 * vector of 4, (dmin m) . xs. Blocks of bs bytes: d, dmin, 12 scale bytes, [qh], 128 nibble bytes. */
_Static_assert(offsetof(sqz_block_q4_K, qs) == 4 + SQZ_K_SCALE_SIZE, "k_dot: Q4_K's layout");
_Static_assert(offsetof(sqz_block_q5_K, qs) == 4 + SQZ_K_SCALE_SIZE + SQZ_QK_K / 8, "k_dot: Q5_K's layout");
INLINE float k_dot(const uint8_t *b, size_t bs, int five, const float *x, const float *xs, int64_t k) {
    const uint8x16_t m4 = vdupq_n_u8(15), sixteen = vdupq_n_u8(16);
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, mins = a0;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++, b += bs, xs += 8) {
        float ds[8];
        mins = k_scales(b + 4, f16_at(b), f16_at(b + 2), xs, ds, mins);
        const uint8_t *qh = b + 4 + SQZ_K_SCALE_SIZE, *q = qh + (five ? SQZ_QK_K / 8 : 0);
        const uint8x16_t h0 = five ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = five ? vld1q_u8(qh + 16) : h0;
        for (int j = 0; j < 4; j++, q += 32, x += 64) { /* bytes 32j..: sub-blocks 2j (low nibbles), 2j + 1 */
            const uint8x16_t r0 = vld1q_u8(q), r1 = vld1q_u8(q + 16);
            uint8x16_t l0 = vandq_u8(r0, m4), l1 = vandq_u8(r1, m4), u0 = vshrq_n_u8(r0, 4), u1 = vshrq_n_u8(r1, 4);
            if (five) { /* bit 2j of qh[l]: element l of sub-block 2j; bit 2j + 1: of sub-block 2j + 1 */
                const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * j))), bh = vdupq_n_u8((uint8_t)(2u << (2 * j)));
                l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(h0, bl), sixteen));
                l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(h1, bl), sixteen));
                u0 = vorrq_u8(u0, vandq_u8(vtstq_u8(h0, bh), sixteen));
                u1 = vorrq_u8(u1, vandq_u8(vtstq_u8(h1, bh), sixteen));
            }
            a0 = vfmaq_n_f32(a0, vaddq_f32(dot16_u8(l0, x), dot16_u8(l1, x + 16)), ds[2 * j]);
            a1 = vfmaq_n_f32(a1, vaddq_f32(dot16_u8(u0, x + 32), dot16_u8(u1, x + 48)), ds[2 * j + 1]);
        }
    }
    return vaddvq_f32(vaddq_f32(a0, a1)) - vaddvq_f32(mins);
}

INLINE float hsum4(const float32x4_t a[4]) {
    return vaddvq_f32(vaddq_f32(vaddq_f32(a[0], a[1]), vaddq_f32(a[2], a[3])));
}

#define ZERO4 {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)}

float sqz__qdot1_q4_K_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    return k_dot(vx, sizeof(sqz_block_q4_K), 0, x, xs, k);
}

float sqz__qdot1_q5_K_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    return k_dot(vx, sizeof(sqz_block_q5_K), 1, x, xs, k);
}

/* The 16 scales of a Q6_K block times d, as the scalar dequantizer forms them (d * sc). */
INLINE void q6_scales(const int8_t *sc, float d, float ds[16]) {
    const int8x16_t s = vld1q_s8(sc);
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    vst1q_f32(ds, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
    vst1q_f32(ds + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
    vst1q_f32(ds + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
    vst1q_f32(ds + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
}

/* Q6_K: per half super-block of 128, element l + 32 s (l < 32, s < 4) is nibble s / 2 of
 * ql[l + 32 (s % 2)] with bits 2s..2s+1 of qh[l] above it, minus 32; sub-block of 16:
 * (l + 32 s) / 16, weight (d sc) code. */
float sqz__qdot1_q6_K_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q6_K *b = vx;
    const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    float32x4_t a[4] = ZERO4;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        float ds[16];
        q6_scales(b[i].scales, h2f(b[i].d), ds);
        SQZ__UNROLL(2)
        for (int half = 0; half < 2; half++, x += 128) {
            const uint8_t *ql = b[i].ql + 64 * half, *qh = b[i].qh + 32 * half;
            const float *dh = ds + 8 * half;
            SQZ__UNROLL(2)
            for (int c = 0; c < 2; c++) { /* l = 16c .. 16c + 15: sub-blocks c, 2 + c, 4 + c, 6 + c */
                const uint8x16_t L0 = vld1q_u8(ql + 16 * c), L1 = vld1q_u8(ql + 32 + 16 * c);
                const uint8x16_t H = vld1q_u8(qh + 16 * c);
                const uint8x16_t q[4] = {
                    vorrq_u8(vandq_u8(L0, m4), vandq_u8(vshlq_n_u8(H, 4), m2)),
                    vorrq_u8(vandq_u8(L1, m4), vandq_u8(vshlq_n_u8(H, 2), m2)),
                    vorrq_u8(vshrq_n_u8(L0, 4), vandq_u8(H, m2)),
                    vorrq_u8(vshrq_n_u8(L1, 4), vandq_u8(vshrq_n_u8(H, 2), m2)),
                };
                SQZ__UNROLL(4)
                for (int s = 0; s < 4; s++) {
                    const int8x16_t cs = vsubq_s8(vreinterpretq_s8_u8(q[s]), off);
                    a[s] = fma16_w(cs, dh[2 * s + c], 0.0f, 0, x + 32 * s + 16 * c, a[s]);
                }
            }
        }
    }
    return hsum4(a);
}

/* The 2-bit codes of Q2_K / Q3_K: element 32j + l (l < 32) of a half super-block is bits
 * 2j..2j+1 of byte l of its 32 code bytes; sub-block of 16: 2j + l / 16 (g below). */
INLINE uint8x16_t codes2(const uint8_t *q, int g) {
    return vandq_u8(vshlq_u8(vld1q_u8(q + 16 * (g & 1)), vdupq_n_s8((int8_t)-(2 * (g >> 1)))), vdupq_n_u8(3));
}

/* Q2_K: w = (d sc) q - (dmin m), scale and minimum nibbles of one byte per sub-block of 16. */
float sqz__qdot1_q2_K_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q2_K *b = vx;
    float32x4_t a[4] = ZERO4;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
        for (int half = 0; half < 2; half++, x += 128) {
            const uint8_t *q = b[i].qs + 32 * half, *sc = b[i].scales + 8 * half;
            SQZ__UNROLL(8)
            for (int g = 0; g < 8; g++) {
                const float dl = d * (float)(sc[g] & 0xF), ml = dmin * (float)(sc[g] >> 4);
                a[g & 3] = fma16_w(vreinterpretq_s8_u8(codes2(q, g)), dl, ml, 1, x + 16 * g, a[g & 3]);
            }
        }
    }
    return hsum4(a);
}

/* Q3_K: w = d (sc - 32) (q - 4 + 4 h), q the 2 bits as Q2_K's, h bit 4 half + j of hmask[l]. */
float sqz__qdot1_q3_K_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_q3_K *b = vx;
    const uint8x16_t four = vdupq_n_u8(4);
    float32x4_t a[4] = ZERO4;
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = h2f(b[i].d);
        int8_t sc[16];
        sqz__q3_K_scales(b[i].scales, sc);
        const uint8x16_t hm[2] = {vld1q_u8(b[i].hmask), vld1q_u8(b[i].hmask + 16)};
        for (int half = 0; half < 2; half++, x += 128) {
            const uint8_t *q = b[i].qs + 32 * half;
            SQZ__UNROLL(8)
            for (int g = 0; g < 8; g++) {
                const uint8x16_t h = vtstq_u8(hm[g & 1], vdupq_n_u8((uint8_t)(1u << (4 * half + (g >> 1)))));
                const int8x16_t c = vreinterpretq_s8_u8(vsubq_u8(codes2(q, g), vbicq_u8(four, h)));
                const float dl = d * (float)(sc[8 * half + g] - 32);
                a[g & 3] = fma16_w(c, dl, 0.0f, 0, x + 16 * g, a[g & 3]);
            }
        }
    }
    return hsum4(a);
}

/* sum kvalues[q] x over one 32-element block of IQ4 nibble codes (16 bytes: low nibbles elements
 * 0..15, high 16..31): the table is one register and TBL looks the codes up. */
INLINE float32x4_t t32_iq4(const uint8_t *qs, int8x16_t lut, const float *x) {
    const uint8x16_t r = vld1q_u8(qs);
    const int8x16_t lo = vqtbl1q_s8(lut, vandq_u8(r, vdupq_n_u8(15))), hi = vqtbl1q_s8(lut, vshrq_n_u8(r, 4));
    return vaddq_f32(dot16_s8(lo, x), dot16_s8(hi, x + 16));
}

/* IQ4_NL: w = d kvalues[q]; per block sum kvalues[q] x, then times d. */
float sqz__qdot1_iq4_nl_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq4_nl *b = vx;
    const int8x16_t lut = vld1q_s8(sqz__kvalues_iq4nl);
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    const int64_t nb = k / SQZ_QK4_NL;
    for (int64_t i = 0; i < nb; i += 2, x += 2 * SQZ_QK4_NL) { /* two blocks, two accumulators */
        a0 = vfmaq_n_f32(a0, t32_iq4(b[i].qs, lut, x), h2f(b[i].d));
        if (i + 1 == nb) break;
        a1 = vfmaq_n_f32(a1, t32_iq4(b[i + 1].qs, lut, x + 32), h2f(b[i + 1].d));
    }
    return vaddvq_f32(vaddq_f32(a0, a1));
}

/* MXFP4: w = 2^(e-128) kvalues_fp4[q]; IQ4_NL's kernel with the E2M1 table. */
float sqz__qdot1_mxfp4_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_mxfp4 *b = vx;
    const int8x16_t lut = vld1q_s8(sqz__kvalues_fp4);
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    const int64_t nb = k / SQZ_QK_MXFP4;
    for (int64_t i = 0; i < nb; i += 2, x += 2 * SQZ_QK_MXFP4) { /* two blocks, two accumulators */
        a0 = vfmaq_n_f32(a0, t32_iq4(b[i].qs, lut, x), sqz__e8m0_half(b[i].e));
        if (i + 1 == nb) break;
        a1 = vfmaq_n_f32(a1, t32_iq4(b[i + 1].qs, lut, x + 32), sqz__e8m0_half(b[i + 1].e));
    }
    return vaddvq_f32(vaddq_f32(a0, a1));
}

/* IQ4_XS: w = d (ls_j - 32) kvalues[q] for sub-block j of 32 (6-bit ls_j: 4 low bits in
 * scales_l, 2 high in scales_h). */
float sqz__qdot1_iq4_xs_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq4_xs *b = vx;
    const int8x16_t lut = vld1q_s8(sqz__kvalues_iq4nl);
    float32x4_t a[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = h2f(b[i].d);
        SQZ__UNROLL(8)
        for (int ib = 0; ib < SQZ_QK_K / 32; ib++, x += 32) {
            const int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b[i].scales_h >> 2 * ib) & 3) << 4);
            a[ib & 1] = vfmaq_n_f32(a[ib & 1], t32_iq4(b[i].qs + 16 * ib, lut, x), d * (float)(ls - 32));
        }
    }
    return vaddvq_f32(vaddq_f32(a[0], a[1]));
}

/* IQ3_S: per sub-block of 32, 8 codewords of 4 odd magnitudes from the 512-entry grid (index: a
 * qs byte and bit k of qh[sub-block]) and a sign bit a weight: sum (level * sign) x, then times
 * db = d (1 + 2 s). */
INLINE int8x16_t iq3s_16(const uint8_t *qs, int qh, int k0, const uint8_t *signs) {
    const uint32_t g[4] = {sqz__iq3s_grid[qs[0] | ((qh << (8 - k0)) & 256)],
                           sqz__iq3s_grid[qs[1] | ((qh << (7 - k0)) & 256)],
                           sqz__iq3s_grid[qs[2] | ((qh << (6 - k0)) & 256)],
                           sqz__iq3s_grid[qs[3] | ((qh << (5 - k0)) & 256)]};
    const int8x16_t lv = vreinterpretq_s8_u32(vld1q_u32(g));
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t sg = vcombine_u8(vdup_n_u8(signs[0]), vdup_n_u8(signs[1]));
    const uint8x16_t neg = vtstq_u8(sg, vld1q_u8(bit));
    return vbslq_s8(neg, vnegq_s8(lv), lv);
}

float sqz__qdot1_iq3_s_neon(const void *vx, const float *x, const float *xs, int64_t k) {
    (void)xs;
    const sqz_block_iq3_s *b = vx;
    float32x4_t a[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    for (int64_t i = 0; i < k / SQZ_QK_K; i++) {
        const float d = h2f(b[i].d);
        for (int ib = 0; ib < SQZ_QK_K / 32; ib++, x += 32) {
            const uint8_t *qs = b[i].qs + 8 * ib, *sg = b[i].signs + 4 * ib;
            const int qh = b[i].qh[ib];
            const float32x4_t t = vaddq_f32(dot16_s8(iq3s_16(qs, qh, 0, sg), x),
                                            dot16_s8(iq3s_16(qs + 4, qh, 4, sg + 2), x + 16));
            const float db = d * (1 + 2 * ((b[i].scales[ib / 2] >> 4 * (ib % 2)) & 0xf));
            a[ib & 1] = vfmaq_n_f32(a[ib & 1], t, db);
        }
    }
    return vaddvq_f32(vaddq_f32(a[0], a[1]));
}

#else
typedef int sqz__qfused_neon_unused; /* ISO C: a translation unit is not empty */
#endif
