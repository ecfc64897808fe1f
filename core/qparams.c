/*
 * core/qparams.c - sqz's quantized storage (sqz/qparams.h): qparams of I8-per-row and
 * U4-per-group weights, their checks, dequantizers and copies, and U4 packing.
 */
#include <math.h>

#include "core/internal.h"
#include "sqz/qparams.h"

/* ---- U4 packing -------------------------------------------------------------------------- */

void sqz_u4_pack(const uint8_t *codes, int64_t n, uint8_t *packed) {
    for (int64_t i = 0; i < n / 2; i++) packed[i] = (uint8_t)((codes[2 * i] & 0x0F) | (codes[2 * i + 1] << 4));
}

void sqz_u4_unpack(const uint8_t *packed, int64_t n, uint8_t *codes) {
    for (int64_t i = 0; i < n / 2; i++) {
        codes[2 * i] = packed[i] & 0x0F;
        codes[2 * i + 1] = packed[i] >> 4;
    }
}

/* ---- qparams ----------------------------------------------------------------------------- */

static bool finite_nonneg_count(const float *v, int64_t n, bool nonzero) {
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i]) || (nonzero && v[i] == 0.0f)) return false;
    }
    return true;
}

sqz_status sqz_qparams_check(const sqz_qparams *qp, sqz_dtype dtype, size_t nbytes, const char *what) {
    const char *w = what ? what : "quantized weight";
    SQZ_RETURN_IF(!qp, SQZ_ERR_INVALID_ARG, "%s: no quantization parameters", w);
    SQZ_RETURN_IF(qp->n_out < 1 || qp->n_in < 1, SQZ_ERR_INVALID_ARG, "%s: shape (%lld, %lld)", w,
                  (long long)qp->n_out, (long long)qp->n_in);
    int64_t ne;
    SQZ_RETURN_IF(!sqz__mul_i64(qp->n_out, qp->n_in, &ne), SQZ_ERR_INVALID_ARG, "%s: shape overflows", w);
    size_t want;
    if (qp->scheme == SQZ_QSCHEME_I8_ROW) {
        SQZ_RETURN_IF(dtype != SQZ_DTYPE_I8, SQZ_ERR_INVALID_ARG, "%s: scheme i8_row stores i8, not %s", w,
                      sqz_dtype_name(dtype));
        SQZ_RETURN_IF(qp->group_size != qp->n_in || qp->n_groups != 1 || qp->zeros || qp->g_idx,
                      SQZ_ERR_INVALID_ARG, "%s: i8_row has one group per row and no zero points", w);
    } else if (qp->scheme == SQZ_QSCHEME_U4_GROUP) {
        SQZ_RETURN_IF(dtype != SQZ_DTYPE_U4, SQZ_ERR_INVALID_ARG, "%s: scheme u4_group stores u4, not %s", w,
                      sqz_dtype_name(dtype));
        SQZ_RETURN_IF(qp->group_size < 2 || qp->group_size % 2 || qp->n_in % qp->group_size ||
                          qp->n_groups != qp->n_in / qp->group_size,
                      SQZ_ERR_INVALID_ARG, "%s: group size %d does not divide %lld columns into %lld groups", w,
                      (int)qp->group_size, (long long)qp->n_in, (long long)qp->n_groups);
    } else if (qp->scheme == SQZ_QSCHEME_NVFP4) {
        SQZ_RETURN_IF(dtype != SQZ_DTYPE_U4, SQZ_ERR_INVALID_ARG, "%s: scheme nvfp4 stores u4 codes, not %s", w,
                      sqz_dtype_name(dtype));
        SQZ_RETURN_IF(qp->group_size != 16 || qp->n_in % 16 || qp->n_groups != qp->n_in / 16 || qp->zeros || qp->g_idx,
                      SQZ_ERR_INVALID_ARG, "%s: nvfp4 has groups of 16 columns and no zero points", w);
        SQZ_RETURN_IF(!(qp->global_scale > 0.0f) || !isfinite(qp->global_scale), SQZ_ERR_INVALID_ARG,
                      "%s: NVFP4 global scale %g must be positive and finite", w, (double)qp->global_scale);
        SQZ_RETURN_IF(qp->act_mode != SQZ_ACT_FLOAT, SQZ_ERR_INVALID_ARG, "%s: NVFP4 weights with quantized "
                      "activations (W4A4) are not run by sqz", w);
    } else if (qp->scheme == SQZ_QSCHEME_F8_ROW) {
        SQZ_RETURN_IF(dtype != SQZ_DTYPE_F8_E4M3, SQZ_ERR_INVALID_ARG, "%s: scheme f8_row stores f8_e4m3, not %s", w,
                      sqz_dtype_name(dtype));
        SQZ_RETURN_IF(qp->group_size != qp->n_in || qp->n_groups != 1 || qp->zeros || qp->g_idx,
                      SQZ_ERR_INVALID_ARG, "%s: f8_row has one scale per row and no zero points", w);
    } else {
        return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "%s: unknown quantization scheme %d", w, (int)qp->scheme);
    }
    SQZ_RETURN_IF(!sqz_dtype_nbytes(dtype, ne, &want) || want != nbytes, SQZ_ERR_INVALID_ARG,
                  "%s: %zu bytes of data, %lld x %lld %s values need %zu", w, nbytes, (long long)qp->n_out,
                  (long long)qp->n_in, sqz_dtype_name(dtype), want);
    int64_t ns;
    SQZ_RETURN_IF(!sqz__mul_i64(qp->n_out, qp->n_groups, &ns), SQZ_ERR_INVALID_ARG, "%s: groups overflow", w);
    SQZ_RETURN_IF(!qp->scales || !finite_nonneg_count(qp->scales, ns, false), SQZ_ERR_INVALID_ARG,
                  "%s: scales missing or not finite", w);
    for (int64_t i = 0; qp->scheme == SQZ_QSCHEME_NVFP4 && i < ns; i++)
        SQZ_RETURN_IF(!(qp->scales[i] >= 0.0f) || sqz_fp8_e4m3_to_fp32(sqz_fp32_to_fp8_e4m3(qp->scales[i])) != qp->scales[i],
                      SQZ_ERR_INVALID_ARG, "%s: NVFP4 group scale %lld (%g) is not a non-negative FP8 E4M3 value", w,
                      (long long)i, (double)qp->scales[i]);
    SQZ_RETURN_IF(qp->scheme != SQZ_QSCHEME_NVFP4 && qp->global_scale != 0.0f, SQZ_ERR_INVALID_ARG,
                  "%s: a global scale is NVFP4's only", w);
    if (qp->zeros) {
        for (int64_t i = 0; i < ns; i++)
            SQZ_RETURN_IF(qp->zeros[i] > 15, SQZ_ERR_INVALID_ARG, "%s: zero point %d at %lld exceeds 15", w,
                          qp->zeros[i], (long long)i);
    }
    if (qp->g_idx) {
        for (int64_t c = 0; c < qp->n_in; c++)
            SQZ_RETURN_IF(qp->g_idx[c] < 0 || qp->g_idx[c] >= qp->n_groups, SQZ_ERR_INVALID_ARG,
                          "%s: g_idx[%lld] = %d outside [0, %lld)", w, (long long)c, qp->g_idx[c],
                          (long long)qp->n_groups);
    }
    SQZ_RETURN_IF(qp->act_mode != SQZ_ACT_FLOAT && qp->act_mode != SQZ_ACT_DYNAMIC_TOKEN &&
                      qp->act_mode != SQZ_ACT_STATIC_TENSOR,
                  SQZ_ERR_INVALID_ARG, "%s: unknown activation mode %d", w, (int)qp->act_mode);
    if (qp->act_mode == SQZ_ACT_STATIC_TENSOR)
        SQZ_RETURN_IF(!(qp->act_scale > 0.0f) || !isfinite(qp->act_scale), SQZ_ERR_INVALID_ARG,
                      "%s: static activation scale %g must be positive", w, (double)qp->act_scale);
    else
        SQZ_RETURN_IF(qp->act_scale != 0.0f, SQZ_ERR_INVALID_ARG, "%s: activation scale set without static mode",
                      w);
    SQZ_RETURN_IF(qp->act_grid != SQZ_ACT_GRID_SYM127 &&
                      (qp->act_grid != SQZ_ACT_GRID_CTENSORS || qp->act_mode == SQZ_ACT_FLOAT) &&
                      (qp->act_grid != SQZ_ACT_GRID_FP8 || qp->act_mode == SQZ_ACT_FLOAT),
                  SQZ_ERR_INVALID_ARG, "%s: activation grid %d is unknown or set on a weight-only layer", w,
                  (int)qp->act_grid);
    SQZ_RETURN_IF((qp->act_grid == SQZ_ACT_GRID_FP8) != (qp->scheme == SQZ_QSCHEME_F8_ROW && qp->act_mode != SQZ_ACT_FLOAT),
                  SQZ_ERR_INVALID_ARG, "%s: FP8 activations go with FP8 weights (dynamic per token or static per tensor), and FP8 weights "
                  "quantize activations to FP8 only", w);
    if (qp->in_scale)
        SQZ_RETURN_IF(!finite_nonneg_count(qp->in_scale, qp->n_in, true), SQZ_ERR_INVALID_ARG,
                      "%s: input scales must be finite and non-zero", w);
    return SQZ_OK;
}

void sqz_qparams_rows_to_f32(const sqz_qparams *qp, const void *data, int64_t row0, int64_t n_rows, float *out) {
    const int64_t n_in = qp->n_in;
    if (qp->scheme == SQZ_QSCHEME_F8_ROW) {
        const uint8_t *q = (const uint8_t *)data;
        for (int64_t r = 0; r < n_rows; r++) {
            const uint8_t *qr = q + (row0 + r) * n_in;
            const float s = qp->scales[row0 + r];
            float *o = out + r * n_in;
            for (int64_t c = 0; c < n_in; c++) o[c] = sqz_fp8_e4m3_to_fp32(qr[c]) * s;
        }
        return;
    }
    if (qp->scheme == SQZ_QSCHEME_NVFP4) {
        const uint8_t *p = (const uint8_t *)data;
        for (int64_t r = 0; r < n_rows; r++) {
            const int64_t row = row0 + r;
            const uint8_t *pr = p + row * (n_in / 2);
            float *o = out + r * n_in;
            for (int64_t g = 0; g < n_in / 16; g++) {
                const float eff = qp->scales[row * (n_in / 16) + g] / qp->global_scale; /* f32 division */
                for (int64_t c = 16 * g; c < 16 * g + 16; c++) {
                    const int code = (c & 1) ? (pr[c >> 1] >> 4) : (pr[c >> 1] & 0x0F);
                    o[c] = sqz_bf16_to_fp32(sqz_fp32_to_bf16(sqz__e2m1_value(code) * eff));
                }
            }
        }
        return;
    }
    if (qp->scheme == SQZ_QSCHEME_I8_ROW) {
        const int8_t *q = (const int8_t *)data;
        for (int64_t r = 0; r < n_rows; r++) {
            const int8_t *qr = q + (row0 + r) * n_in;
            const float s = qp->scales[row0 + r];
            float *o = out + r * n_in;
            for (int64_t c = 0; c < n_in; c++) o[c] = (float)qr[c] * s;
        }
        return;
    }
    const uint8_t *p = (const uint8_t *)data;
    const int64_t ng = qp->n_groups, gs = qp->group_size;
    for (int64_t r = 0; r < n_rows; r++) {
        const int64_t row = row0 + r;
        const uint8_t *pr = p + row * (n_in / 2);
        const float *sc = qp->scales + row * ng;
        const uint8_t *zr = qp->zeros ? qp->zeros + row * ng : NULL;
        float *o = out + r * n_in;
        for (int64_t c = 0; c < n_in; c++) {
            const int code = (c & 1) ? (pr[c >> 1] >> 4) : (pr[c >> 1] & 0x0F);
            const int64_t g = qp->g_idx ? qp->g_idx[c] : c / gs;
            const int z = zr ? zr[g] : 8;
            o[c] = sc[g] * (float)(code - z);
        }
    }
}

sqz_status sqz_qparams_to_f32(const sqz_qparams *qp, sqz_dtype dtype, const void *data, size_t nbytes, float *out) {
    SQZ_TRY(sqz_qparams_check(qp, dtype, nbytes, NULL));
    sqz_qparams_rows_to_f32(qp, data, 0, qp->n_out, out);
    return SQZ_OK;
}

/* ---- copies ------------------------------------------------------------------------------ */

sqz_qparams *sqz__qparams_clone(const sqz_qparams *qp, const int64_t *keep, int64_t n) {
    if (!keep) n = qp->n_out;
    const size_t ng = (size_t)qp->n_groups, ns = (size_t)n * ng, n_in = (size_t)qp->n_in;
    const size_t off_s = (sizeof(sqz_qparams) + 15) & ~(size_t)15;
    const size_t off_i = off_s + ns * sizeof(float);
    const size_t off_g = off_i + (qp->in_scale ? n_in * sizeof(float) : 0);
    const size_t off_z = off_g + (qp->g_idx ? n_in * sizeof(int32_t) : 0);
    uint8_t *b = sqz__malloc(off_z + (qp->zeros ? ns : 0));
    if (!b) return NULL;
    sqz_qparams *c = (sqz_qparams *)(void *)b;
    *c = *qp;
    c->n_out = n;
    float *sc = (float *)(void *)(b + off_s);
    for (int64_t i = 0; i < n; i++) /* row i of the copy: row keep[i] (or i) of qp */
        memcpy(sc + (size_t)i * ng, qp->scales + (size_t)(keep ? keep[i] : i) * ng, ng * sizeof *sc);
    c->scales = sc;
    if (qp->in_scale) {
        memcpy(b + off_i, qp->in_scale, n_in * sizeof(float));
        c->in_scale = (const float *)(void *)(b + off_i);
    }
    if (qp->g_idx) {
        memcpy(b + off_g, qp->g_idx, n_in * sizeof(int32_t));
        c->g_idx = (const int32_t *)(void *)(b + off_g);
    }
    if (qp->zeros) {
        for (int64_t i = 0; i < n; i++) memcpy(b + off_z + (size_t)i * ng, qp->zeros + (size_t)(keep ? keep[i] : i) * ng, ng);
        c->zeros = b + off_z;
    }
    return c;
}
