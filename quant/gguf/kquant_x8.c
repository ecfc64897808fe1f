/*
 * quant/gguf/kquant_x8.c - the K-quants' scale searches on 8 sub-blocks at once, one sub-block per
 * AVX2 lane: make_qkx3_quants (use_mad false; make_qkx2_quants without MAD is the same search) of
 * the 8 sub-blocks of 32 of a Q4_K / Q5_K super-block, and make_qx_quants of 8 of the 16 sub-blocks
 * of 16 of a Q6_K one, for the reference and importance-weighted quantizers (RTN, imatrix rounding,
 * GPTQ's static grids, the mixes' K-quant layers).
 *
 * Each lane runs the scalar search of kquant_search.c step for step: the same IEEE operations in
 * the same order on the same values (C's left-to-right products and sums, no fused multiply-add:
 * the target is "avx2" alone), the same comparisons (ordered, so NaN compares false as in C) and
 * ggml's nearest_int as the same integer bit trick. So the results are the scalar search's bits
 * (test_kquant_x8 compares them on real and adversarial blocks); only the 8 searches run side by
 * side. Without AVX2 (another ISA, or an x86 that lacks it) the caller runs the scalar search.
 */
#include "quant/gguf/kquant_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define T __attribute__((target("avx2")))

/* ggml's nearest_int on 8 lanes: (bits(v + 1.5 * 2^23) & 0x7fffff) - 0x400000. */
T static inline __m256i nearest8(__m256 v) {
    const __m256i b = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

/* MAXI(0, MINI(nmax, l)) */
T static inline __m256i clamp8(__m256i l, __m256i nmax) {
    return _mm256_max_epi32(_mm256_setzero_si256(), _mm256_min_epi32(nmax, l));
}

T static inline __m256 pick(__m256 keep, __m256 take, __m256 mask) { return _mm256_blendv_ps(keep, take, mask); }

typedef struct lanes {
    __m256 x[32], w[32];
    __m256i L[32], Laux[32];
    __m256 min, max, sum_w, sum_x;
} lanes;

/* min, max, sum_w, sum_x as the scalar loop forms them (element 0 first, then 1..31). */
T static void init(lanes *v) {
    v->min = v->max = v->x[0];
    v->sum_w = v->w[0];
    v->sum_x = _mm256_mul_ps(v->sum_w, v->x[0]);
    for (int i = 1; i < 32; ++i) {
        v->min = pick(v->min, v->x[i], _mm256_cmp_ps(v->x[i], v->min, _CMP_LT_OQ));
        v->max = pick(v->max, v->x[i], _mm256_cmp_ps(v->x[i], v->max, _CMP_GT_OQ));
        v->sum_w = _mm256_add_ps(v->sum_w, v->w[i]);
        v->sum_x = _mm256_add_ps(v->sum_x, _mm256_mul_ps(v->w[i], v->x[i]));
    }
    v->min = pick(v->min, _mm256_setzero_ps(), _mm256_cmp_ps(v->min, _mm256_setzero_ps(), _CMP_GT_OQ));
}

/* sum_i w (scale * L + min - x)^2 over the lanes' codes L. */
T static __m256 weighted_err(const lanes *v, const __m256i *L, __m256 scale, __m256 min) {
    __m256 e = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) {
        __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, _mm256_cvtepi32_ps(L[i])), min), v->x[i]);
        diff = _mm256_mul_ps(diff, diff);
        e = _mm256_add_ps(e, _mm256_mul_ps(v->w[i], diff));
    }
    return e;
}

/* One candidate iscale about the current min: the codes into Laux and the sums of the fit. */
T static void fit(lanes *v, __m256 iscale, __m256 min, __m256i nmax, __m256 *sum_l, __m256 *sum_l2, __m256 *sum_xl) {
    __m256 sl = _mm256_setzero_ps(), sl2 = _mm256_setzero_ps(), sxl = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i) {
        const __m256i l = clamp8(nearest8(_mm256_mul_ps(iscale, _mm256_sub_ps(v->x[i], min))), nmax);
        v->Laux[i] = l;
        const __m256 wl = _mm256_mul_ps(v->w[i], _mm256_cvtepi32_ps(l));
        sl = _mm256_add_ps(sl, wl);
        sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(wl, _mm256_cvtepi32_ps(l)));
        sxl = _mm256_add_ps(sxl, _mm256_mul_ps(wl, v->x[i]));
    }
    *sum_l = sl, *sum_l2 = sl2, *sum_xl = sxl;
}

/* The scalar search's loop: each candidate scale is taken about the best min found so far (the
 * scalar code reads `min` after updating it), so the range and the codes move with it. */
T static void search(lanes *v, int nmax, float rmin, float rdelta, int nstep, __m256 *scale_out, __m256 *min_out) {
    const __m256i nm = _mm256_set1_epi32(nmax);
    __m256 min = v->min;
    __m256 iscale = _mm256_div_ps(_mm256_set1_ps((float)nmax), _mm256_sub_ps(v->max, min));
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.0f), iscale);
    for (int i = 0; i < 32; ++i) v->L[i] = clamp8(nearest8(_mm256_mul_ps(iscale, _mm256_sub_ps(v->x[i], min))), nm);
    __m256 best = weighted_err(v, v->L, scale, min);
    for (int is = 0; is <= nstep; ++is) {
        iscale = _mm256_div_ps(_mm256_set1_ps(rmin + rdelta * is + nmax), _mm256_sub_ps(v->max, min));
        __m256 sum_l, sum_l2, sum_xl;
        fit(v, iscale, min, nm, &sum_l, &sum_l2, &sum_xl);
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(v->sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
        const __m256 ok = _mm256_cmp_ps(D, _mm256_setzero_ps(), _CMP_GT_OQ);
        __m256 ts = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(v->sum_w, sum_xl), _mm256_mul_ps(v->sum_x, sum_l)), D);
        __m256 tm = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_l2, v->sum_x), _mm256_mul_ps(sum_l, sum_xl)), D);
        const __m256 pos = _mm256_cmp_ps(tm, _mm256_setzero_ps(), _CMP_GT_OQ);
        tm = pick(tm, _mm256_setzero_ps(), pos);
        ts = pick(ts, _mm256_div_ps(sum_xl, sum_l2), pos);
        const __m256 mad = weighted_err(v, v->Laux, ts, tm);
        const __m256 upd = _mm256_and_ps(ok, _mm256_cmp_ps(mad, best, _CMP_LT_OQ));
        if (_mm256_movemask_ps(upd) == 0) continue;
        const __m256i ui = _mm256_castps_si256(upd);
        for (int i = 0; i < 32; ++i) v->L[i] = _mm256_blendv_epi8(v->L[i], v->Laux[i], ui);
        best = pick(best, mad, upd);
        scale = pick(scale, ts, upd);
        min = pick(min, tm, upd);
    }
    *scale_out = scale;
    *min_out = min;
}

T static bool qkx3_x8(int nmax, const float *x, const float *weights, uint8_t *L, float *scales, float *the_mins,
                      float rmin, float rdelta, int nstep) {
    lanes v;
    const __m256i idx = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
    for (int i = 0; i < 32; ++i) {
        v.x[i] = _mm256_i32gather_ps(x + i, idx, 4);
        v.w[i] = _mm256_i32gather_ps(weights + i, idx, 4);
    }
    init(&v);
    const __m256 min0 = v.min;
    const __m256 flat = _mm256_cmp_ps(v.max, v.min, _CMP_LE_OQ); /* the scalar search returns early */
    __m256 scale, min;
    search(&v, nmax, rmin, rdelta, nstep, &scale, &min);
    scale = pick(scale, _mm256_setzero_ps(), flat);
    min = pick(min, min0, flat);
    const __m256i zero_l = _mm256_castps_si256(flat);
    _mm256_storeu_ps(scales, scale);
    _mm256_storeu_ps(the_mins, _mm256_xor_ps(min, _mm256_set1_ps(-0.0f))); /* C's -min: the sign flipped */
    int32_t lane[8];
    for (int i = 0; i < 32; ++i) {
        _mm256_storeu_si256((__m256i *)lane, _mm256_andnot_si256(zero_l, v.L[i]));
        for (int j = 0; j < 8; ++j) L[32 * j + i] = (uint8_t)lane[j];
    }
    return true;
}

/* ---- make_qx_quants (Q6_K: n = 16, signed codes about 0) on 8 sub-blocks ---------------------- */

/* Codes l = MAXI(-nmax, MINI(nmax - 1, nearest(iscale x))) and the sums of their fit. */
T static void qx_fit(const __m256 *x, const __m256 *w, __m256 iscale, int nmax, __m256i *l_out, __m256 *sumlx,
                     __m256 *suml2) {
    const __m256i lo = _mm256_set1_epi32(-nmax), hi = _mm256_set1_epi32(nmax - 1);
    __m256 slx = _mm256_setzero_ps(), sl2 = _mm256_setzero_ps();
    for (int i = 0; i < 16; ++i) {
        const __m256i l = _mm256_max_epi32(lo, _mm256_min_epi32(hi, nearest8(_mm256_mul_ps(iscale, x[i]))));
        l_out[i] = l;
        const __m256 lf = _mm256_cvtepi32_ps(l);
        slx = _mm256_add_ps(slx, _mm256_mul_ps(_mm256_mul_ps(w[i], x[i]), lf));
        sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w[i], lf), lf));
    }
    *sumlx = slx, *suml2 = sl2;
}

T static void qx_x8(int nmax, const float *x, int8_t *L, const float *qw, float *scales) {
    const __m256i idx = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
    __m256 xv[16], wv[16], amax = _mm256_setzero_ps(), max = _mm256_setzero_ps();
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < 16; ++i) {
        xv[i] = _mm256_i32gather_ps(x + i, idx, 4);
        wv[i] = qw ? _mm256_i32gather_ps(qw + i, idx, 4) : _mm256_mul_ps(xv[i], xv[i]);
        const __m256 ax = _mm256_andnot_ps(sign, xv[i]);
        const __m256 gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
        amax = pick(amax, ax, gt);
        max = pick(max, xv[i], gt);
    }
    const __m256 flat = _mm256_cmp_ps(amax, _mm256_set1_ps(SQZ__GROUP_MAX_EPS), _CMP_LT_OQ);
    __m256i Lv[16], La[16];
    __m256 sumlx, suml2;
    qx_fit(xv, wv, _mm256_div_ps(_mm256_set1_ps((float)-nmax), max), nmax, Lv, &sumlx, &suml2);
    __m256 scale = pick(_mm256_setzero_ps(), _mm256_div_ps(sumlx, suml2),
                        _mm256_cmp_ps(suml2, _mm256_setzero_ps(), _CMP_NEQ_UQ)); /* C's `suml2 ?` */
    __m256 best = _mm256_mul_ps(scale, sumlx);
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        qx_fit(xv, wv, _mm256_div_ps(_mm256_set1_ps(-(nmax + 0.1f * is)), max), nmax, La, &sumlx, &suml2);
        const __m256 upd = _mm256_and_ps(_mm256_cmp_ps(suml2, _mm256_setzero_ps(), _CMP_GT_OQ),
                                         _mm256_cmp_ps(_mm256_mul_ps(sumlx, sumlx), _mm256_mul_ps(best, suml2),
                                                       _CMP_GT_OQ));
        if (_mm256_movemask_ps(upd) == 0) continue;
        const __m256i ui = _mm256_castps_si256(upd);
        for (int i = 0; i < 16; ++i) Lv[i] = _mm256_blendv_epi8(Lv[i], La[i], ui);
        scale = pick(scale, _mm256_div_ps(sumlx, suml2), upd);
        best = pick(best, _mm256_mul_ps(scale, sumlx), upd);
    }
    _mm256_storeu_ps(scales, pick(scale, _mm256_setzero_ps(), flat));
    const __m256i keep = _mm256_xor_si256(_mm256_castps_si256(flat), _mm256_set1_epi32(-1));
    int32_t lane[8];
    for (int i = 0; i < 16; ++i) { /* flat sub-blocks: codes 0 (not nmax: the scalar early return) */
        const __m256i code = _mm256_and_si256(_mm256_add_epi32(Lv[i], _mm256_set1_epi32(nmax)), keep);
        _mm256_storeu_si256((__m256i *)lane, code);
        for (int j = 0; j < 8; ++j) L[16 * j + i] = (int8_t)lane[j];
    }
}

static bool x8_off; /* sqz__kquant_x8_set(false): tests compare whole quantizations both ways */

static bool have_avx2(void) {
    static int have = -1;
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return have == 1 && !x8_off;
}

void sqz__kquant_x8_set(bool on) { x8_off = !on; }

bool sqz__make_qkx3_quants_x8(int nmax, const float *x, const float *weights, uint8_t *L, float *scales,
                              float *the_mins, float rmin, float rdelta, int nstep) {
    if (nstep < 1 || !have_avx2()) return false;
    return qkx3_x8(nmax, x, weights, L, scales, the_mins, rmin, rdelta, nstep);
}

bool sqz__make_qx_quants_x8(int nmax, const float *x, int8_t *L, const float *qw, float *scales) {
    if (!have_avx2()) return false;
    qx_x8(nmax, x, L, qw, scales);
    return true;
}

#else
void sqz__kquant_x8_set(bool on) { (void)on; }

bool sqz__make_qx_quants_x8(int nmax, const float *x, int8_t *L, const float *qw, float *scales) {
    (void)nmax, (void)x, (void)L, (void)qw, (void)scales;
    return false;
}

bool sqz__make_qkx3_quants_x8(int nmax, const float *x, const float *weights, uint8_t *L, float *scales,
                              float *the_mins, float rmin, float rdelta, int nstep) {
    (void)nmax, (void)x, (void)weights, (void)L, (void)scales, (void)the_mins, (void)rmin, (void)rdelta,
        (void)nstep;
    return false;
}
#endif
