/*
 * kernels/cpu/qidot_ref.c - the scalar reference of the integer products (qidot.h): the
 * activation quantizers and one kernel per weight type, written for clarity. Every vector
 * variant's integer sums must equal these bit for bit (tests/unit/test_qidot.c).
 *
 * Per block (or sub-block) each kernel forms the exact int32 sum of weight codes times
 * activation codes, folds in the sub-block scales as integers, and adds the block's term to an
 * f32 sum: (weight scale * activation scale) * (float)sum, minus the minimum's term.
 */
#include <math.h>
#include <string.h>

#include "core/dequant.h"
#include "kernels/cpu/qidot.h"
#include "sqz/dtype.h"

#define H2F(h) sqz_fp16_to_fp32(h)

/* ---- activation quantizers ------------------------------------------------------------- */

/* ggml's x86 quantize_row_q8_0: d = amax / 127 (kept as fp16), q = rint(x * (127 / amax)).
 * Returns d before its fp16 rounding; *sum gets sum(q). */
static float q8_block32(const float *x, float *d_fp16, int8_t *qs, int32_t *sum) {
    float amax = 0.0f;
    int finite = 1;
    for (int j = 0; j < 32; j++) {
        finite &= isfinite(x[j]) != 0;
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    *sum = 0;
    if (!finite) { /* NaN out, as the float path gives */
        *d_fp16 = NAN;
        memset(qs, 0, 32);
        return NAN;
    }
    const float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (!isfinite(id)) id = 0.0f; /* amax below 127 / FLT_MAX: d rounds to fp16 zero, so do the codes */
    *d_fp16 = H2F(sqz_fp32_to_fp16(d));
    for (int j = 0; j < 32; j++) {
        const float v = rintf(x[j] * id); /* the default rounding mode: half to even */
        qs[j] = (int8_t)(v > 127.0f ? 127 : v < -128.0f ? -128 : (int)v);
        *sum += qs[j];
    }
    return d;
}

static void quantize_q8_0(const float *x, sqz__aq8_0 *y, int64_t k) {
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t sum;
        q8_block32(x + 32 * b, &y[b].d, y[b].qs, &sum);
    }
}

static void quantize_q8_1(const float *x, sqz__aq8_1 *y, int64_t k) {
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t sum;
        const float d = q8_block32(x + 32 * b, &y[b].d, y[b].qs, &sum);
        y[b].s = d * (float)sum;
    }
}

/* ggml's quantize_row_q8_K_ref: the signed value of largest magnitude maps to -127. */
static void quantize_q8_K(const float *x, sqz__aq8_K *y, int64_t k) {
    for (int64_t b = 0; b < k / 256; b++, x += 256) {
        float max = 0.0f, amax = 0.0f;
        int finite = 1;
        for (int j = 0; j < 256; j++) {
            finite &= isfinite(x[j]) != 0;
            if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
        }
        memset(y[b].qs, 0, sizeof y[b].qs);
        memset(y[b].bsums, 0, sizeof y[b].bsums);
        if (!finite || amax == 0.0f || !isfinite(-127.0f / max)) { /* a tiny block is a zero one (d 0) */
            y[b].d = finite ? 0.0f : NAN;
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            const int v = (int)rintf(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v > 127 ? 127 : v);
            y[b].bsums[j / 16] = (int16_t)(y[b].bsums[j / 16] + y[b].qs[j]);
        }
        y[b].d = 1.0f / iscale;
    }
}

sqz__aq_kind sqz__aq_kind_of(sqz_dtype t) {
    switch (t) {
    case SQZ_DTYPE_Q8_0: case SQZ_DTYPE_Q4_0: case SQZ_DTYPE_Q5_0: case SQZ_DTYPE_IQ4_NL:
    case SQZ_DTYPE_MXFP4: return SQZ__AQ_Q8_0;
    case SQZ_DTYPE_Q4_1: case SQZ_DTYPE_Q5_1: return SQZ__AQ_Q8_1;
    case SQZ_DTYPE_Q2_K: case SQZ_DTYPE_Q3_K: case SQZ_DTYPE_Q4_K: case SQZ_DTYPE_Q5_K: case SQZ_DTYPE_Q6_K:
    case SQZ_DTYPE_IQ4_XS: case SQZ_DTYPE_IQ3_S: return SQZ__AQ_Q8_K;
    case SQZ_DTYPE_F16: return SQZ__AQ_F16;
    case SQZ_DTYPE_BF16: return SQZ__AQ_BF16;
    default: return SQZ__AQ_NONE;
    }
}

size_t sqz__aq_row_bytes(sqz__aq_kind kind, int64_t k) {
    switch (kind) {
    case SQZ__AQ_Q8_0: return (size_t)(k / 32) * sizeof(sqz__aq8_0);
    case SQZ__AQ_Q8_1: return (size_t)(k / 32) * sizeof(sqz__aq8_1);
    case SQZ__AQ_Q8_K: return (size_t)(k / 256) * sizeof(sqz__aq8_K);
    default: return (size_t)k * sizeof(float);
    }
}

void sqz__aq_quantize(sqz__aq_kind kind, const float *x, void *dst, int64_t k) {
    float *f = dst;
    switch (kind) {
    case SQZ__AQ_Q8_0: quantize_q8_0(x, dst, k); break;
    case SQZ__AQ_Q8_1: quantize_q8_1(x, dst, k); break;
    case SQZ__AQ_Q8_K: quantize_q8_K(x, dst, k); break;
    case SQZ__AQ_F16:
        for (int64_t i = 0; i < k; i++) f[i] = sqz_fp16_to_fp32(sqz_fp32_to_fp16(x[i]));
        break;
    case SQZ__AQ_BF16:
        for (int64_t i = 0; i < k; i++) f[i] = sqz_bf16_to_fp32(sqz_fp32_to_bf16(x[i]));
        break;
    default:
        if (f != x) memcpy(f, x, (size_t)k * sizeof(float));
    }
}

/* ---- 32-element blocks against Q8_0 / Q8_1 ----------------------------------------------- */

/* Element j (0..31) of a block of nibbles: low nibbles 0..15, high nibbles 16..31. */
static inline int nib(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }
/* The fifth bit of element j from a Q5 block's 4 qh bytes. */
static inline int bit5(const uint8_t *qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

float sqz__idot_q8_0_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q8_0 *w = row;
    const sqz__aq8_0 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += w[b].qs[j] * a[b].qs[j];
        sum += (H2F(w[b].d) * a[b].d) * (float)s;
    }
    return sum;
}

float sqz__idot_q4_0_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q4_0 *w = row;
    const sqz__aq8_0 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += (nib(w[b].qs, j) - 8) * a[b].qs[j];
        sum += (H2F(w[b].d) * a[b].d) * (float)s;
    }
    return sum;
}

float sqz__idot_q5_0_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q5_0 *w = row;
    const sqz__aq8_0 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += ((nib(w[b].qs, j) | bit5(w[b].qh, j) << 4) - 16) * a[b].qs[j];
        sum += (H2F(w[b].d) * a[b].d) * (float)s;
    }
    return sum;
}

float sqz__idot_iq4_nl_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_iq4_nl *w = row;
    const sqz__aq8_0 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += sqz__kvalues_iq4nl[nib(w[b].qs, j)] * a[b].qs[j];
        sum += (H2F(w[b].d) * a[b].d) * (float)s;
    }
    return sum;
}

/* MXFP4: w = 2^(e-128) kvalues_fp4[q] (E2M1 doubled); ggml_vec_dot_mxfp4_q8_0's order: dx times the
 * block's power of two, times the integer sum. */
float sqz__idot_mxfp4_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_mxfp4 *w = row;
    const sqz__aq8_0 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += sqz__kvalues_fp4[nib(w[b].qs, j)] * a[b].qs[j];
        sum += (a[b].d * sqz__e8m0_half(w[b].e)) * (float)s;
    }
    return sum;
}

/* Q4_1 / Q5_1: w = d q + m, so sum w x = d dx sum(q qx) + m s. */
float sqz__idot_q4_1_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q4_1 *w = row;
    const sqz__aq8_1 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += nib(w[b].qs, j) * a[b].qs[j];
        sum += (H2F(w[b].d) * a[b].d) * (float)s + H2F(w[b].m) * a[b].s;
    }
    return sum;
}

float sqz__idot_q5_1_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q5_1 *w = row;
    const sqz__aq8_1 *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int j = 0; j < 32; j++) s += (nib(w[b].qs, j) | bit5(w[b].qh, j) << 4) * a[b].qs[j];
        sum += (H2F(w[b].d) * a[b].d) * (float)s + H2F(w[b].m) * a[b].s;
    }
    return sum;
}

/* ---- 256-element super-blocks against Q8_K -------------------------------------------------- */

/* sum over the 16 sub-blocks of 16 of scale[i] * sum(q x) and of min[i] * bsums[i] (Q2_K). */
float sqz__idot_q2_K_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q2_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        int32_t isum = 0, msum = 0;
        for (int e = 0; e < 256; e++) { /* element e: half e/128, shift 2 ((e%128)/32), byte e%32 */
            const int q = (w[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            isum += (w[b].scales[e / 16] & 15) * q * a[b].qs[e];
        }
        for (int i = 0; i < 16; i++) msum += (w[b].scales[i] >> 4) * a[b].bsums[i];
        sum += (H2F(w[b].d) * a[b].d) * (float)isum - (H2F(w[b].dmin) * a[b].d) * (float)msum;
    }
    return sum;
}

/* Q3_K's 16 six-bit scales (offset 32) from its 12 bytes. */
static void q3k_scales(const uint8_t *p, int *sc) {
    for (int i = 0; i < 16; i++) {
        const int lo = i < 8 ? p[i] & 15 : p[i - 8] >> 4;
        const int hi = (p[8 + i % 4] >> (2 * (i / 4))) & 3;
        sc[i] = (lo | hi << 4) - 32;
    }
}

float sqz__idot_q3_K_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q3_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        int sc[16];
        q3k_scales(w[b].scales, sc);
        int32_t isum = 0;
        for (int e = 0; e < 256; e++) { /* 2 low bits as Q2_K; -4 unless bit (e/32) of hmask[e%32] */
            const int lo = (w[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int q = lo - ((w[b].hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
            isum += sc[e / 16] * q * a[b].qs[e];
        }
        sum += (H2F(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and minimums; the minimums against the
 * activation sums (bsums, two per sub-block). five: Q5_K's qh adds 16. */
static float q45k(const uint16_t d, const uint16_t dmin, const uint8_t *scales, const uint8_t *qs,
                  const uint8_t *qh, const sqz__aq8_K *a) {
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, mn;
        sqz__get_scale_min_k4(s, scales, &sc, &mn);
        int32_t t = 0;
        for (int l = 0; l < 32; l++) { /* sub-block s: bytes 32 (s/2), low nibble for even s */
            int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
            if (qh) q |= ((qh[l] >> s) & 1) << 4;
            t += q * a->qs[32 * s + l];
        }
        isum += sc * t;
        msum += mn * (a->bsums[2 * s] + a->bsums[2 * s + 1]);
    }
    return (H2F(d) * a->d) * (float)isum - (H2F(dmin) * a->d) * (float)msum;
}

float sqz__idot_q4_K_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q4_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) sum += q45k(w[b].d, w[b].dmin, w[b].scales, w[b].qs, NULL, &a[b]);
    return sum;
}

float sqz__idot_q5_K_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q5_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) sum += q45k(w[b].d, w[b].dmin, w[b].scales, w[b].qs, w[b].qh, &a[b]);
    return sum;
}

float sqz__idot_q6_K_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_q6_K *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        int32_t isum = 0;
        for (int e = 0; e < 256; e++) { /* half h, quarter j of it, position l */
            const int h = e / 128, j = (e % 128) / 32, l = e % 32;
            const uint8_t ql = w[b].ql[64 * h + 32 * (j % 2) + l];
            const int q = ((j < 2 ? ql & 15 : ql >> 4) | ((w[b].qh[32 * h + l] >> (2 * j)) & 3) << 4) - 32;
            isum += w[b].scales[e / 16] * q * a[b].qs[e];
        }
        sum += (H2F(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}

float sqz__idot_iq4_xs_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_iq4_xs *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        int32_t isum = 0;
        for (int s = 0; s < 8; s++) {
            const int ls = ((w[b].scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((w[b].scales_h >> (2 * s)) & 3) << 4;
            int32_t t = 0;
            for (int j = 0; j < 32; j++) t += sqz__kvalues_iq4nl[nib(w[b].qs + 16 * s, j)] * a[b].qs[32 * s + j];
            isum += (ls - 32) * t;
        }
        sum += (H2F(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}

/* IQ3_S: sub-block s of 32 has scale 1 + 2 (4-bit), 8 groups of 4 magnitudes from the grid
 * (9-bit index: qs byte + bit from qh[s]) and a sign bit per weight. */
float sqz__idot_iq3_s_ref(const void *row, const void *xq, int64_t k) {
    const sqz_block_iq3_s *w = row;
    const sqz__aq8_K *a = xq;
    float sum = 0.0f;
    for (int64_t b = 0; b < k / 256; b++) {
        int32_t isum = 0;
        for (int s = 0; s < 8; s++) {
            const int ls = 2 * ((w[b].scales[s / 2] >> (4 * (s % 2))) & 15) + 1;
            int32_t t = 0;
            for (int g = 0; g < 8; g++) { /* group g: elements 32 s + 4 g .. + 4 */
                const int idx = w[b].qs[8 * s + g] | (((w[b].qh[s] >> g) & 1) << 8);
                for (int j = 0; j < 4; j++) {
                    const int e = 4 * g + j, mag = (sqz__iq3s_grid[idx] >> (8 * j)) & 255;
                    const int neg = (w[b].signs[4 * s + e / 8] >> (e % 8)) & 1;
                    t += (neg ? -mag : mag) * a[b].qs[32 * s + e];
                }
            }
            isum += ls * t;
        }
        sum += (H2F(w[b].d) * a[b].d) * (float)isum;
    }
    return sum;
}
