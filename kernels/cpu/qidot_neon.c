/*
 * kernels/cpu/qidot_neon.c - the integer products of qidot.h with NEON and the dot-product
 * extension (sdot, vdotq_s32): every weight type's codes as int8 lanes, 4 products of 4 code pairs
 * a lane per sdot, so each block's (or sub-block's) sum of weight codes times activation codes is
 * an exact int32, the sub-block scales folded in as integers (vmlaq_n_s32), as qidot_ref.c forms
 * them: the same int32 sums bit for bit. Only the f32 sums across blocks take another order (the
 * 32-element types scale 4 blocks at once as a vector).
 *
 * The table is used only where the CPU reports ASIMDDP (qidot.c), so the file is compiled for
 * the dot-product extension whatever -march the build gives (a target pragma, or clang's
 * attribute). tests/cli/test_qdot_aarch64.sh cross-compiles it with qidot_ref.c and
 * tests/unit/qdot_main.c and runs it under qemu-aarch64 -cpu max: every kernel against the scalar
 * one, bit-equal with unit scales, within 1e-5 of sum |terms| with random ones.
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_NEON
#if !defined(__ARM_FEATURE_DOTPROD) && defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#define SQZ__QIDOT_POP 1
#elif !defined(__ARM_FEATURE_DOTPROD)
/* GCC: "+dotprod" alone does not inline arm_neon.h's sdot (compiled for armv8.2-a+dotprod) */
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
#include <arm_neon.h>
#include <stddef.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"

#define INLINE static inline __attribute__((always_inline))

/* sdot: acc lane i + the products of bytes 4i..4i+3 of a and b. Older clang (14) declares
 * vdotq_s32 only where the whole file is compiled for dotprod; its builtin takes the attribute. */
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD) && __has_builtin(__builtin_neon_vdotq_v)
#define SDOT(acc, a, b) ((int32x4_t)__builtin_neon_vdotq_v((int8x16_t)(acc), (a), (b), 34))
#else
#define SDOT(acc, a, b) vdotq_s32(acc, a, b)
#endif

#define SQZ__IDOT_NEON(t) SQZ__IDOT_DECL(t, neon)
SQZ__IDOT_TYPES(SQZ__IDOT_NEON)
SQZ__IDOT_NEON(mxfp4)

/* IEEE half bits to float (exact; NaN and Inf kept). */
INLINE float h2f(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* acc + the sdot products of two 16-code weight vectors with the 32 activation codes at q. */
INLINE int32x4_t dot32(int32x4_t acc, int8x16_t w0, int8x16_t w1, const int8_t *q) {
    return SDOT(SDOT(acc, w0, vld1q_s8(q)), w1, vld1q_s8(q + 16));
}

/* The 4 lane sums of s[0..3]: lane i = the sum of s[i]'s lanes. */
INLINE int32x4_t hsum4_s32(const int32x4_t s[4]) {
    return vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
}

/* Byte j (0..15) = 16 where bit j of the two bytes at p is set (Q5's fifth bits). */
INLINE uint8x16_t fifth16(const uint8_t *p) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8(p[0]), vdup_n_u8(p[1]));
    return vandq_u8(vtstq_u8(v, vld1q_u8(bit)), vdupq_n_u8(16));
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ----------------------------------------------- */

enum { B_Q8_0, B_Q4_0, B_Q4_1, B_Q5_0, B_Q5_1, B_IQ4_NL };

/* Lanes whose sum is the block at b's sum of codes times the 32 activation codes at q (t: one of
 * B_*, a constant where inlined). Nibble blocks: low nibbles elements 0..15, high 16..31. */
INLINE int32x4_t blk32(int t, const void *b, const int8_t *q) {
    const uint8x16_t m4 = vdupq_n_u8(15);
    int8x16_t w0, w1;
    uint8x16_t r, lo, hi;
    switch (t) {
    case B_Q8_0: {
        const sqz_block_q8_0 *x = b;
        w0 = vld1q_s8(x->qs), w1 = vld1q_s8(x->qs + 16);
        break;
    }
    case B_Q4_0: case B_Q4_1: case B_IQ4_NL: {
        r = vld1q_u8(t == B_Q4_0 ? ((const sqz_block_q4_0 *)b)->qs
                     : t == B_Q4_1 ? ((const sqz_block_q4_1 *)b)->qs : ((const sqz_block_iq4_nl *)b)->qs);
        lo = vandq_u8(r, m4), hi = vshrq_n_u8(r, 4);
        if (t == B_IQ4_NL) {
            const int8x16_t kv = vld1q_s8(sqz__kvalues_iq4nl);
            w0 = vqtbl1q_s8(kv, lo), w1 = vqtbl1q_s8(kv, hi);
        } else if (t == B_Q4_0) {
            w0 = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
            w1 = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
        } else {
            w0 = vreinterpretq_s8_u8(lo), w1 = vreinterpretq_s8_u8(hi);
        }
        break;
    }
    default: { /* Q5_0, Q5_1: the fifth bits add 16 */
        const uint8_t *qh = t == B_Q5_0 ? ((const sqz_block_q5_0 *)b)->qh : ((const sqz_block_q5_1 *)b)->qh;
        r = vld1q_u8(t == B_Q5_0 ? ((const sqz_block_q5_0 *)b)->qs : ((const sqz_block_q5_1 *)b)->qs);
        lo = vorrq_u8(vandq_u8(r, m4), fifth16(qh)), hi = vorrq_u8(vshrq_n_u8(r, 4), fifth16(qh + 2));
        w0 = vreinterpretq_s8_u8(lo), w1 = vreinterpretq_s8_u8(hi);
        if (t == B_Q5_0) w0 = vsubq_s8(w0, vdupq_n_s8(16)), w1 = vsubq_s8(w1, vdupq_n_s8(16));
    }
    }
    return dot32(vdupq_n_s32(0), w0, w1, q);
}

/* The weight block's d and (Q4_1, Q5_1) m fields. */
INLINE uint16_t blk_d(const void *b) { return *(const uint16_t *)b; } /* every block starts with d */
INLINE uint16_t blk_m(int t, const void *b) {
    return t == B_Q4_1 ? ((const sqz_block_q4_1 *)b)->m : ((const sqz_block_q5_1 *)b)->m;
}

/* sum over k / 32 blocks of (dw da) isum (+ m s for Q4_1, Q5_1): 4 blocks at a time, their 4 int32
 * sums converted and scaled as one vector; the rest one by one. ws: the weight block's bytes. */
INLINE float dot_blk32(int t, const uint8_t *w, size_t ws, const void *xq, int64_t k) {
    const int with_min = t == B_Q4_1 || t == B_Q5_1;
    const sqz__aq8_0 *a0 = xq;
    const sqz__aq8_1 *a1 = xq;
    const int64_t nb = k / 32;
    float32x4_t acc = vdupq_n_f32(0), accm = acc;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        int32x4_t s[4];
        uint16_t dw[4], mw[4];
        float da[4], sa[4];
        for (int j = 0; j < 4; j++) {
            const uint8_t *b = w + (size_t)(i + j) * ws;
            s[j] = blk32(t, b, with_min ? a1[i + j].qs : a0[i + j].qs);
            dw[j] = blk_d(b);
            da[j] = with_min ? a1[i + j].d : a0[i + j].d;
            if (with_min) mw[j] = blk_m(t, b), sa[j] = a1[i + j].s;
        }
        const float32x4_t d = vmulq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(dw))), vld1q_f32(da));
        acc = vfmaq_f32(acc, d, vcvtq_f32_s32(hsum4_s32(s)));
        if (with_min) accm = vfmaq_f32(accm, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(mw))), vld1q_f32(sa));
    }
    float sum = vaddvq_f32(vaddq_f32(acc, accm));
    for (; i < nb; i++) {
        const uint8_t *b = w + (size_t)i * ws;
        const int32_t s = vaddvq_s32(blk32(t, b, with_min ? a1[i].qs : a0[i].qs));
        sum += (h2f(blk_d(b)) * (with_min ? a1[i].d : a0[i].d)) * (float)s;
        if (with_min) sum += h2f(blk_m(t, b)) * a1[i].s;
    }
    return sum;
}

float sqz__idot_q8_0_neon(const void *row, const void *xq, int64_t k) {
    return dot_blk32(B_Q8_0, row, sizeof(sqz_block_q8_0), xq, k);
}
float sqz__idot_q4_0_neon(const void *row, const void *xq, int64_t k) {
    return dot_blk32(B_Q4_0, row, sizeof(sqz_block_q4_0), xq, k);
}
float sqz__idot_q4_1_neon(const void *row, const void *xq, int64_t k) {
    return dot_blk32(B_Q4_1, row, sizeof(sqz_block_q4_1), xq, k);
}
float sqz__idot_q5_0_neon(const void *row, const void *xq, int64_t k) {
    return dot_blk32(B_Q5_0, row, sizeof(sqz_block_q5_0), xq, k);
}
float sqz__idot_q5_1_neon(const void *row, const void *xq, int64_t k) {
    return dot_blk32(B_Q5_1, row, sizeof(sqz_block_q5_1), xq, k);
}
float sqz__idot_iq4_nl_neon(const void *row, const void *xq, int64_t k) {
    return dot_blk32(B_IQ4_NL, row, sizeof(sqz_block_iq4_nl), xq, k);
}

/* MXFP4: the E2M1 table (doubled) looked up by TBL, dx times the block's power of two times the sum,
 * block by block in the reference's order. */
float sqz__idot_mxfp4_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_mxfp4 *w = row;
    const sqz__aq8_0 *a = xq;
    const int8x16_t kv = vld1q_s8(sqz__kvalues_fp4);
    float sum = 0.0f;
    for (int64_t i = 0; i < k / 32; i++) {
        const uint8x16_t r = vld1q_u8(w[i].qs);
        const int8x16_t w0 = vqtbl1q_s8(kv, vandq_u8(r, vdupq_n_u8(15))), w1 = vqtbl1q_s8(kv, vshrq_n_u8(r, 4));
        const int32_t s = vaddvq_s32(dot32(vdupq_n_s32(0), w0, w1, a[i].qs));
        sum += (a[i].d * sqz__e8m0_half(w[i].e)) * (float)s;
    }
    return sum;
}

/* ---- 256-element super-blocks against Q8_K ------------------------------------------------- */

#define S8(v) vreinterpretq_s8_u8(v)

/* One Q4_K / Q5_K super-block (qh: Q5_K's fifth bits, NULL for Q4_K): sum over the 8 sub-blocks
 * of 32 of sc_s (sum q x) and of m_s (the sub-block's two bsums), as qidot_ref.c's q45k. */
INLINE float q45k_blk(uint16_t d, uint16_t dmin, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                      const sqz__aq8_K *a) {
    uint8_t sc[8], mn[8];
    sqz__k4_scales_mins(scales, sc, mn);
    const int16x8_t bs = vpaddq_s16(vld1q_s16(a->bsums), vld1q_s16(a->bsums + 8)); /* per sub-block */
    const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    const int32_t msum = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(m16), vget_low_s16(bs)), m16, bs));
    const uint8x16_t m4 = vdupq_n_u8(15), sixteen = vdupq_n_u8(16);
    const uint8x16_t h0 = qh ? vld1q_u8(qh) : vdupq_n_u8(0), h1 = qh ? vld1q_u8(qh + 16) : h0;
    const int32x4_t zero = vdupq_n_s32(0);
    int32x4_t acc = zero;
    const int8_t *q8 = a->qs;
    SQZ__UNROLL(4)
    for (int j = 0; j < 4; j++, qs += 32, q8 += 64) { /* bytes 32j..: sub-blocks 2j (low nibbles), 2j + 1 */
        const uint8x16_t r0 = vld1q_u8(qs), r1 = vld1q_u8(qs + 16);
        uint8x16_t l0 = vandq_u8(r0, m4), l1 = vandq_u8(r1, m4), u0 = vshrq_n_u8(r0, 4), u1 = vshrq_n_u8(r1, 4);
        if (qh) { /* bit s of qh[l]: element l of sub-block s */
            const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * j))), bu = vdupq_n_u8((uint8_t)(2u << (2 * j)));
            l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(h0, bl), sixteen));
            l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(h1, bl), sixteen));
            u0 = vorrq_u8(u0, vandq_u8(vtstq_u8(h0, bu), sixteen));
            u1 = vorrq_u8(u1, vandq_u8(vtstq_u8(h1, bu), sixteen));
        }
        acc = vmlaq_n_s32(acc, dot32(zero, S8(l0), S8(l1), q8), sc[2 * j]);
        acc = vmlaq_n_s32(acc, dot32(zero, S8(u0), S8(u1), q8 + 32), sc[2 * j + 1]);
    }
    const int32_t isum = vaddvq_s32(acc);
    return (h2f(d) * a->d) * (float)isum - (h2f(dmin) * a->d) * (float)msum;
}

float sqz__idot_q4_K_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_q4_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) sum += q45k_blk(w[b].d, w[b].dmin, w[b].scales, w[b].qs, NULL, &a[b]);
    return sum;
}

float sqz__idot_q5_K_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_q5_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++)
        sum += q45k_blk(w[b].d, w[b].dmin, w[b].scales, w[b].qs, w[b].qh, &a[b]);
    return sum;
}

/* Q6_K: per half of 128, quarter j (32 elements): the nibbles of ql[32 (j % 2) ..] (low for
 * j < 2), bits 2j, 2j + 1 of qh above them, minus 32; one scale per 16. */
float sqz__idot_q6_K_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_q6_K *w = row;
    const sqz__aq8_K *a = xq;
    const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
    const int8x16_t m32 = vdupq_n_s8(32);
    const int32x4_t zero = vdupq_n_s32(0);
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        const uint8_t *ql = w[b].ql, *qh = w[b].qh;
        const int8_t *sc = w[b].scales, *q8 = a[b].qs;
        int32x4_t acc = zero;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, q8 += 128) {
            const uint8x16_t l[4] = {vld1q_u8(ql), vld1q_u8(ql + 16), vld1q_u8(ql + 32), vld1q_u8(ql + 48)};
            const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
            SQZ__UNROLL(4)
            for (int j = 0; j < 4; j++) {
                const uint8x16_t c0 = l[2 * (j % 2)], c1 = l[2 * (j % 2) + 1];
                const int8x16_t sh = vdupq_n_s8((int8_t)(4 - 2 * j)); /* bits 2j, 2j + 1 to 4, 5 */
                const uint8x16_t n0 = j < 2 ? vandq_u8(c0, m4) : vshrq_n_u8(c0, 4);
                const uint8x16_t n1 = j < 2 ? vandq_u8(c1, m4) : vshrq_n_u8(c1, 4);
                const int8x16_t q0 = vsubq_s8(S8(vorrq_u8(n0, vandq_u8(vshlq_u8(h0, sh), m30))), m32);
                const int8x16_t q1 = vsubq_s8(S8(vorrq_u8(n1, vandq_u8(vshlq_u8(h1, sh), m30))), m32);
                acc = vmlaq_n_s32(acc, SDOT(zero, q0, vld1q_s8(q8 + 32 * j)), sc[2 * j]);
                acc = vmlaq_n_s32(acc, SDOT(zero, q1, vld1q_s8(q8 + 32 * j + 16)), sc[2 * j + 1]);
            }
        }
        sum += (h2f(w[b].d) * a[b].d) * (float)vaddvq_s32(acc);
    }
    return sum;
}

/* The 2-bit codes of Q2_K / Q3_K (element 128h + 32j + l: bits 2j of qs[32h + l]) times the
 * activation codes, one integer scale per 16 (sc), summed into acc; Q3_K (hmask non-NULL)
 * subtracts 4 where bit 4h + j of hmask[l] is clear. */
INLINE int32x4_t k2_codes(const uint8_t *qs, const uint8_t *hmask, const int8_t *sc, const int8_t *q8) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    const int32x4_t zero = vdupq_n_s32(0);
    const uint8x16_t hm0 = hmask ? vld1q_u8(hmask) : vdupq_n_u8(0), hm1 = hmask ? vld1q_u8(hmask + 16) : hm0;
    int32x4_t acc = zero;
    for (int h = 0; h < 2; h++, qs += 32, q8 += 128, sc += 8) {
        const uint8x16_t r0 = vld1q_u8(qs), r1 = vld1q_u8(qs + 16);
        SQZ__UNROLL(4)
        for (int j = 0; j < 4; j++) {
            const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * j));
            int8x16_t q0 = S8(vandq_u8(vshlq_u8(r0, sh), m3)), q1 = S8(vandq_u8(vshlq_u8(r1, sh), m3));
            if (hmask) {
                const uint8x16_t bit = vdupq_n_u8((uint8_t)(1u << (4 * h + j))), four = vdupq_n_u8(4);
                q0 = vsubq_s8(q0, S8(vbicq_u8(four, vtstq_u8(hm0, bit))));
                q1 = vsubq_s8(q1, S8(vbicq_u8(four, vtstq_u8(hm1, bit))));
            }
            acc = vmlaq_n_s32(acc, SDOT(zero, q0, vld1q_s8(q8 + 32 * j)), sc[2 * j]);
            acc = vmlaq_n_s32(acc, SDOT(zero, q1, vld1q_s8(q8 + 32 * j + 16)), sc[2 * j + 1]);
        }
    }
    return acc;
}

/* Q2_K: scales in the low nibbles, minimums (high nibbles) against the 16 bsums. */
float sqz__idot_q2_K_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_q2_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        const uint8x16_t s = vld1q_u8(w[b].scales), mn = vshrq_n_u8(s, 4);
        int8_t sc[16];
        vst1q_s8(sc, S8(vandq_u8(s, vdupq_n_u8(15))));
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn))), m1 = vreinterpretq_s16_u16(vmovl_high_u8(mn));
        const int16x8_t b0 = vld1q_s16(a[b].bsums), b1 = vld1q_s16(a[b].bsums + 8);
        int32x4_t m = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
        m = vmlal_high_s16(m, m0, b0);
        m = vmlal_s16(m, vget_low_s16(m1), vget_low_s16(b1));
        m = vmlal_high_s16(m, m1, b1);
        const int32_t isum = vaddvq_s32(k2_codes(w[b].qs, NULL, sc, a[b].qs)), msum = vaddvq_s32(m);
        sum += (h2f(w[b].d) * a[b].d) * (float)isum - (h2f(w[b].dmin) * a[b].d) * (float)msum;
    }
    return sum;
}

/* Q3_K: 16 six-bit scales (offset 32) from 12 bytes, four at a time in 32-bit words. */
float sqz__idot_q3_K_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_q3_K *w = row;
    const sqz__aq8_K *a = xq;
    const uint32_t k2 = 0x0f0f0f0f, k3 = 0x03030303;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        uint32_t u[3], o[4];
        memcpy(u, w[b].scales, 12);
        o[0] = (u[0] & k2) | ((u[2] & k3) << 4);               /* scales 0..3 */
        o[1] = (u[1] & k2) | (((u[2] >> 2) & k3) << 4);        /* 4..7 */
        o[2] = ((u[0] >> 4) & k2) | (((u[2] >> 4) & k3) << 4); /* 8..11 */
        o[3] = ((u[1] >> 4) & k2) | (((u[2] >> 6) & k3) << 4); /* 12..15 */
        int8_t sc[16];
        vst1q_s8(sc, vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(o)), vdupq_n_s8(32)));
        const int32_t isum = vaddvq_s32(k2_codes(w[b].qs, w[b].hmask, sc, a[b].qs));
        sum += (h2f(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}

/* IQ4_XS: sub-block s of 32 (16 nibble bytes, as IQ4_NL) through the non-linear table, times its
 * 6-bit scale minus 32. */
float sqz__idot_iq4_xs_neon(const void *row, const void *xq, int64_t k) {
    const sqz_block_iq4_xs *w = row;
    const sqz__aq8_K *a = xq;
    const int8x16_t kv = vld1q_s8(sqz__kvalues_iq4nl);
    const uint8x16_t m4 = vdupq_n_u8(15);
    const int32x4_t zero = vdupq_n_s32(0);
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        int32x4_t acc = zero;
        for (int s = 0; s < 8; s++) {
            const int ls = ((w[b].scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((w[b].scales_h >> (2 * s)) & 3) << 4;
            const uint8x16_t r = vld1q_u8(w[b].qs + 16 * s);
            const int32x4_t t = dot32(zero, vqtbl1q_s8(kv, vandq_u8(r, m4)), vqtbl1q_s8(kv, vshrq_n_u8(r, 4)),
                                      a[b].qs + 32 * s);
            acc = vmlaq_n_s32(acc, t, ls - 32);
        }
        sum += (h2f(w[b].d) * a[b].d) * (float)vaddvq_s32(acc);
    }
    return sum;
}

/* IQ3_S: per sub-block of 32, the 8 grid words (4 magnitudes each; 9-bit indices), negated where
 * the sign bit is set ((m ^ n) - n with n = -1), times the odd scale 1 + 2 s. */
float sqz__idot_iq3_s_neon(const void *row, const void *xq, int64_t k) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    static const uint8_t sel[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                    2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const sqz_block_iq3_s *w = row;
    const sqz__aq8_K *a = xq;
    const uint8x16_t bv = vld1q_u8(bits), sel0 = vld1q_u8(sel), sel1 = vld1q_u8(sel + 16);
    const int32x4_t zero = vdupq_n_s32(0);
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        const uint8_t *qs = w[b].qs;
        int32x4_t acc = zero;
        for (int s = 0; s < 8; s++, qs += 8) {
            uint32_t g[8], sg;
            for (int j = 0; j < 8; j++) g[j] = sqz__iq3s_grid[qs[j] | (((w[b].qh[s] >> j) & 1) << 8)];
            memcpy(&sg, w[b].signs + 4 * s, 4);
            const uint8x16_t sb = vreinterpretq_u8_u32(vdupq_n_u32(sg));
            const int8x16_t n0 = S8(vtstq_u8(vqtbl1q_u8(sb, sel0), bv)), n1 = S8(vtstq_u8(vqtbl1q_u8(sb, sel1), bv));
            const int8x16_t w0 = vsubq_s8(veorq_s8(vreinterpretq_s8_u32(vld1q_u32(g)), n0), n0);
            const int8x16_t w1 = vsubq_s8(veorq_s8(vreinterpretq_s8_u32(vld1q_u32(g + 4)), n1), n1);
            const int ls = 2 * ((w[b].scales[s / 2] >> (4 * (s % 2))) & 15) + 1;
            acc = vmlaq_n_s32(acc, dot32(zero, w0, w1, a[b].qs + 32 * s), ls);
        }
        sum += (h2f(w[b].d) * a[b].d) * (float)vaddvq_s32(acc);
    }
    return sum;
}

const sqz__idot_fn sqz__idot_neon[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = sqz__idot_q8_0_neon,     [SQZ_DTYPE_Q4_0] = sqz__idot_q4_0_neon,
    [SQZ_DTYPE_Q4_1] = sqz__idot_q4_1_neon,     [SQZ_DTYPE_Q5_0] = sqz__idot_q5_0_neon,
    [SQZ_DTYPE_Q5_1] = sqz__idot_q5_1_neon,     [SQZ_DTYPE_IQ4_NL] = sqz__idot_iq4_nl_neon,
    [SQZ_DTYPE_MXFP4] = sqz__idot_mxfp4_neon,
    [SQZ_DTYPE_Q2_K] = sqz__idot_q2_K_neon,     [SQZ_DTYPE_Q3_K] = sqz__idot_q3_K_neon,
    [SQZ_DTYPE_Q4_K] = sqz__idot_q4_K_neon,     [SQZ_DTYPE_Q5_K] = sqz__idot_q5_K_neon,
    [SQZ_DTYPE_Q6_K] = sqz__idot_q6_K_neon,     [SQZ_DTYPE_IQ4_XS] = sqz__idot_iq4_xs_neon,
    [SQZ_DTYPE_IQ3_S] = sqz__idot_iq3_s_neon,
};
#ifdef SQZ__QIDOT_POP
#pragma clang attribute pop
#endif
#else
typedef int sqz__qidot_neon_empty; /* ISO C: a translation unit is not empty */
#endif
