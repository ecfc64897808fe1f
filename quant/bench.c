/*
 * quant/bench.c - the body of `sqz bench compress`: RTN throughput over a model's matrices and
 * GPTQ time per block. Prints nothing; the caller reports.
 */
#include <stdlib.h>
#include <string.h>

#include "quant/quant_internal.h"
#include "sqz/progress.h"

static float *to_f32(const sqz_tensor *t) {
    const int64_t ne = sqz_tensor_nelements(t);
    float *f = sqz__malloc((size_t)ne * sizeof(float));
    if (!f) return NULL;
    if (sqz_tensor_to_f32(t, f) != SQZ_OK) { free(f); return NULL; }
    return f;
}

sqz_status sqz_quant_bench_rtn(const sqz_model *m, const sqz_qtarget *t, sqz_quant_bench *out) {
    memset(out, 0, sizeof *out);
    sqz_qtarget tt = *t;
    SQZ_TRY(sqz_qtarget_check(&tt));
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *x = &m->tensors[i];
        if (!sqz_quant_policy_wants(x, &tt, NULL, NULL)) continue;
        float *w = to_f32(x);
        if (!w) return SQZ_ERROR(SQZ_ERR_NOMEM, "bench: cannot read tensor '%s' as f32", x->name);
        sqz_qmatrix q;
        const double t0 = sqz_now_seconds();
        sqz_status s = sqz_quant_rtn_one(w, x->shape[0], x->shape[1], &tt, &q);
        out->seconds += sqz_now_seconds() - t0;
        free(w);
        SQZ_TRY(s);
        sqz_qmatrix_free(&q);
        out->n_matrices++;
        out->input_bytes += 4.0 * (double)sqz_tensor_nelements(x);
    }
    out->gbps = out->seconds > 0 ? out->input_bytes / out->seconds / 1e9 : 0;
    return SQZ_OK;
}

/* 512 deterministic pseudo-Gaussian rows (sum of 4 uniforms, xorshift64*) with a few louder
 * channels, so that the Hessian is full rank and not trivially diagonal-dominant. */
static float *synthetic_rows(int64_t rows, int64_t n) {
    float *x = sqz__malloc((size_t)rows * (size_t)n * sizeof(float));
    if (!x) return NULL;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < rows * n; i++) {
        float acc = 0;
        for (int k = 0; k < 4; k++) {
            s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
            acc += (float)((s * 2685821657736338717ull) >> 40) / 16777216.0f - 0.5f;
        }
        x[i] = acc * ((i % n) % 61 == 0 ? 8.0f : 1.0f);
    }
    return x;
}

sqz_status sqz_quant_bench_gptq_block(const sqz_model *m, int32_t layer, const sqz_quant_opts *o,
                                      const sqz_qstats *const *stats, double *seconds) {
    *seconds = 0;
    static const sqz_role groups[4][3] = {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V},
                                          {SQZ_ROLE_ATTN_OUT, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT},
                                          {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_COUNT},
                                          {SQZ_ROLE_FFN_DOWN, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT}};
    for (int g = 0; g < 4; g++) {
        sqz_qlinear lin[3];
        float *w[3] = {NULL, NULL, NULL};
        int n = 0;
        int64_t n_in = 0;
        sqz_status s = SQZ_OK;
        for (int k = 0; k < 3 && groups[g][k] != SQZ_ROLE_COUNT; k++) {
            const sqz_tensor *t = sqz_model_get(m, groups[g][k], layer, SQZ_PARAM_WEIGHT);
            if (!t || t->ndim != 2) { s = SQZ_ERROR(SQZ_ERR_NOT_FOUND, "bench: layer %d has no %s", (int)layer,
                                                    sqz_role_name(groups[g][k])); break; }
            if (!(w[n] = to_f32(t))) { s = SQZ_ERR_NOMEM; break; }
            lin[n] = (sqz_qlinear){.w = w[n], .n_out = t->shape[0], .name = t->name};
            n_in = t->shape[1];
            n++;
        }
        sqz_qstats_buf buf = {0};
        const sqz_qstats *st = stats ? stats[g] : NULL;
        if (s == SQZ_OK && !st) {
            float *x = synthetic_rows(512, n_in);
            s = x ? sqz_qstats_compute(x, 512, n_in, SQZ_QSTAT_XTX, 0, &buf) : SQZ_ERR_NOMEM;
            free(x);
            st = &buf.s;
        }
        sqz_qmatrix out[3];
        memset(out, 0, sizeof out);
        if (s == SQZ_OK) {
            const double t0 = sqz_now_seconds();
            s = sqz_quant_gptq(lin, n, st, o, out, NULL);
            *seconds += sqz_now_seconds() - t0;
        }
        for (int k = 0; k < 3; k++) { free(w[k]); sqz_qmatrix_free(&out[k]); }
        sqz_qstats_buf_free(&buf);
        SQZ_TRY(s);
    }
    return SQZ_OK;
}
