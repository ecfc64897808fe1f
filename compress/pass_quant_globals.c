/*
 * compress/pass_quant_globals.c - the global tensors of a whole-model mix (quant/mix.c): the token
 * embedding and the classifier, quantized after the last block to the type the mix gives
 * them (Q6_K / Q8_0 for the output and a tied embedding, the base type for an untied one,
 * F16 where no block fits). They are rounded with the reference quantizer, as llama-quantize
 * does: llama-imatrix collects no importance for the embedding (a row lookup) and none for
 * the output unless asked (--process-output). Where the statistics of the output's input are at
 * hand (sqz's calibration observes it after the last block; an importance matrix with
 * output.weight) the output is rounded by the SPEC's method, as llama-quantize then does: on
 * Qwen2.5-Coder-1.5B, its output alone at Q4_K instead of Q6_K cost a KLD of 0.0146 by the
 * reference quantizer.
 *
 * They are the model's largest matrices (151936 x 1536 each in Qwen2.5), so every pass over them
 * runs on all cores in fixed chunks of rows: the widening to f32, the quantizer (quant/rtn.c) and
 * the measured error, whose sums are added chunk by chunk in row order (the same value for any
 * number of threads).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "kernels/cpu/pool.h"
#include "quant/quant_internal.h"
#include "sqz/edit.h"

enum { CHUNK_ROWS = 512 };

/* Chunks of rows: q's rows dequantized and measured against w. */
typedef struct rows_job {
    sqz_dtype from;
    const uint8_t *src;
    size_t row_bytes;
    int64_t n_out, n_in;
    const float *w;
    float *scratch;      /* CHUNK_ROWS * n_in floats per thread */
    double *num, *den;   /* per chunk */
    _Atomic int failed;
} rows_job;

static void rows_fn(void *ctx, int64_t b, int64_t e, int thread) {
    rows_job *j = ctx;
    for (int64_t c = b; c < e; c++) {
        const int64_t r0 = c * CHUNK_ROWS, nr = j->n_out - r0 < CHUNK_ROWS ? j->n_out - r0 : CHUNK_ROWS;
        const uint8_t *src = j->src + (size_t)r0 * j->row_bytes;
        const float *w = j->w + r0 * j->n_in;
        float *d = j->scratch + (size_t)thread * CHUNK_ROWS * (size_t)j->n_in;
        if (sqz_convert(j->from, src, SQZ_DTYPE_F32, d, nr * j->n_in, NULL) != SQZ_OK) j->failed = 1;
        double num = 0, den = 0;
        for (int64_t i = 0; i < nr * j->n_in; i++) {
            const double x = (double)d[i] - (double)w[i];
            num += x * x;
            den += (double)w[i] * (double)w[i];
        }
        j->num[c] = num;
        j->den[c] = den;
    }
}

/* t as f32 into w: the stored rows widened on every core (a scheme type: its own dequantizer). */
static sqz_status widen(const sqz__pool *pool, const sqz_tensor *t, float *w) {
    if (t->qp) return sqz_tensor_to_f32(t, w);
    return sqz__rows_to_f32(t->dtype, t->data, t->nbytes, t->shape[0], t->shape[1], w, sqz__pool_threads(pool));
}

/* The relative error of q against w (sqrt(sum (q - w)^2 / sum w^2)), or -1 when q's rows cannot be
 * dequantized alone (then the caller measures the whole matrix). */
static double measured_err(sqz__pool *pool, const sqz_qmatrix *q, const float *w) {
    const int64_t nc = (q->n_out + CHUNK_ROWS - 1) / CHUNK_ROWS;
    rows_job j = {.from = q->dtype, .src = q->data, .row_bytes = q->nbytes / (size_t)q->n_out, .n_out = q->n_out,
                  .n_in = q->n_in, .w = w};
    if (q->qp.scheme != SQZ_QSCHEME_NONE || q->nbytes % (size_t)q->n_out) return -1.0;
    j.scratch = sqz__malloc((size_t)sqz__pool_threads(pool) * CHUNK_ROWS * (size_t)q->n_in * sizeof(float));
    j.num = sqz__malloc((size_t)nc * sizeof(double));
    j.den = sqz__malloc((size_t)nc * sizeof(double));
    double num = 0, den = 0;
    if (j.scratch && j.num && j.den) {
        sqz__pool_for(pool, nc, 1, rows_fn, &j);
        for (int64_t c = 0; c < nc; c++) {
            num += j.num[c];
            den += j.den[c];
        }
    }
    const bool ok = j.scratch && j.num && j.den && !j.failed;
    free(j.scratch);
    free(j.num);
    free(j.den);
    if (!ok) return -1.0;
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

/* The method that rounds t to target: the SPEC's for the output when the statistics of its
 * input (in) hold what that method reads and it produces the type without smoothing (imatrix:
 * E[x^2], as llama-quantize uses an importance matrix's output.weight; gptq: X^T X); else the
 * reference quantizer. The token embedding is looked up, not multiplied: it has no input. */
static const sqz_qmethod *method_for(const sqz_compress_spec *sp, const sqz_tensor *t, const sqz_calib_input *in,
                                     const sqz_qtarget *target) {
    const sqz_qmethod *m = sp->method, *rtn = sqz_qmethod_find("rtn");
    if (t->role != SQZ_ROLE_OUTPUT || !in || in->st.n_in != t->shape[1] || m->smooths ||
        !(m->formats & (1u << target->fmt)) || !sqz__qstats_has(&in->st, m->needs))
        return rtn;
    return m;
}

/* q: w (t's values) rounded to target by method mt; the output's statistics in (or NULL). */
static sqz_status round_one(const sqz_qmethod *mt, const sqz_compress_spec *sp, const sqz_tensor *t, const float *w,
                            const sqz_calib_input *in, const sqz_qtarget *target, int threads, sqz_qmatrix *q) {
    if (mt->rowwise) return sqz_quant_rtn_one(w, t->shape[0], t->shape[1], target, q);
    sqz_quant_opts qo = sp->q;
    qo.target = *target;
    qo.threads = threads;
    if (qo.gptaq && !in->st.dxxt) qo.gptaq = false; /* the float stream's pairs: not formed here */
    sqz_qlinear lin = {w, t->shape[0], t->name, false};
    float *smooth = sqz__malloc((size_t)t->shape[1] * sizeof(float));
    if (!smooth) return SQZ_ERR_NOMEM;
    const sqz_status st = mt->run(&lin, 1, &in->st, &qo, q, smooth);
    free(smooth);
    return st;
}

enum { STREAM_ROWS = 8192 };

/* RTN onto GGUF blocks STREAM_ROWS rows at a time: a block type's rows are rounded alone, so the bytes are the
 * whole matrix's, while memory holds one chunk in f32 instead of the matrix (151936 x 2048 floats are 1.2 GB)
 * and the source's pages leave the resident set chunk by chunk. *err: the relative error of the whole. */
static sqz_status rtn_streamed(const sqz__pool *pool, const sqz_tensor *t, const sqz_qtarget *target, sqz_qmatrix *q,
                               double *err) {
    const int64_t rows = t->shape[0], cols = t->shape[1], chunk = rows < STREAM_ROWS ? rows : STREAM_ROWS;
    const size_t src_row = t->nbytes / (size_t)rows;
    float *w = sqz__malloc((size_t)(chunk * cols) * sizeof(float)), *d = sqz__malloc((size_t)(chunk * cols) * 4);
    sqz_status st = w && d ? sqz_qmatrix_alloc(q, target, rows, cols) : SQZ_ERR_NOMEM;
    const size_t q_row = st == SQZ_OK ? q->nbytes / (size_t)rows : 0;
    double num = 0, den = 0;
    for (int64_t r0 = 0; r0 < rows && st == SQZ_OK; r0 += chunk) {
        const int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * src_row;
        st = sqz__rows_to_f32(t->dtype, src, (size_t)nr * src_row, nr, cols, w, sqz__pool_threads(pool));
        sqz_qmatrix c;
        memset(&c, 0, sizeof c);
        if (st == SQZ_OK) st = sqz_quant_rtn_one(w, nr, cols, target, &c);
        if (st == SQZ_OK) memcpy((uint8_t *)q->data + (size_t)r0 * q_row, c.data, (size_t)nr * q_row);
        if (st == SQZ_OK) st = sqz_qmatrix_to_f32(&c, d);
        for (int64_t i = 0; st == SQZ_OK && i < nr * cols; i++) {
            num += ((double)d[i] - (double)w[i]) * ((double)d[i] - (double)w[i]);
            den += (double)w[i] * (double)w[i];
        }
        q->seconds += c.seconds;
        sqz_qmatrix_free(&c);
        if (!t->owned) (void)sqz__mapping_release(src, (size_t)nr * src_row);
    }
    *err = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
    free(w);
    free(d);
    if (st != SQZ_OK) sqz_qmatrix_free(q);
    return st;
}

static sqz_status one(sqz__pool *pool, sqz_model *m, sqz_tensor *t, const sqz_compress_spec *sp,
                      const sqz_type_overrides *ov, const sqz_calib_block *head, int threads,
                      sqz_compress_report *rep) {
    sqz_dtype d = sqz__qplan_type(sp->plan, t), want = SQZ_DTYPE_COUNT; /* auto's plan may take another mix's types */
    if (d == SQZ_DTYPE_COUNT) SQZ_TRY(sqz__mix_type(sp, ov, m, t, &d, &want));
    if (d == t->dtype || t->qp) return SQZ_OK;
    sqz_layer_report row;
    sqz__report_row_init(&row, t);
    if (want != SQZ_DTYPE_COUNT && want != d) snprintf(row.fallback_from, sizeof row.fallback_from, "%s", sqz_dtype_name(want));
    row.weight_err = 0.0; /* these rows have always reported 0 until measured */
    const int64_t n = sqz_tensor_nelements(t);
    sqz_qtarget gt = {SQZ_QFMT_Q8_0, 0};
    const sqz_calib_input *hin = head ? sqz_calib_block_input(head, t->role) : NULL;
    const sqz_qmethod *hm = NULL;
    if (!t->qp && sqz_qformat_from_dtype(d, &gt.fmt) && sqz_qtarget_check(&gt) == SQZ_OK &&
        (hm = method_for(sp, t, hin, &gt))->rowwise) { /* the usual case: streamed */
        sqz_qmatrix q;
        SQZ_TRY(rtn_streamed(pool, t, &gt, &q, &row.weight_err));
        row.quantized = true;
        sqz__report_row_method(&row, hm, ""); /* rtn */
        snprintf(row.format, sizeof row.format, "%s", sqz_qformat_name(gt.fmt));
        row.bits_per_weight = sqz_qmatrix_bits_per_weight(&q);
        row.seconds = q.seconds;
        sqz_status st = sqz_qmatrix_attach(m, t, &q);
        if (st != SQZ_OK) {
            sqz_qmatrix_free(&q);
            sqz__error_prefix("%s", t->name);
            return st;
        }
        return sqz__report_add(rep, &row);
    }
    float *w = sqz__malloc((size_t)n * sizeof(float));
    if (!w) return SQZ_ERR_NOMEM;
    sqz_status st = widen(pool, t, w);
    sqz_qtarget target = {SQZ_QFMT_Q8_0, 0};
    if (st == SQZ_OK && !sqz_qformat_from_dtype(d, &target.fmt)) { /* f16: no block fits */
        uint16_t *h = sqz__malloc((size_t)n * sizeof(uint16_t));
        st = h ? sqz_convert(SQZ_DTYPE_F32, w, SQZ_DTYPE_F16, h, n, NULL) : SQZ_ERR_NOMEM;
        int64_t shape[SQZ_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        if (st == SQZ_OK) st = sqz_tensor_replace(m, t, SQZ_DTYPE_F16, t->ndim, shape, h, (size_t)n * 2, true);
        else free(h);
        snprintf(row.method, sizeof row.method, "float");
        snprintf(row.format, sizeof row.format, "f16");
        snprintf(row.why, sizeof row.why, "%lld columns fit no block of the mix's type: f16", (long long)row.n_in);
        row.bits_per_weight = 16.0;
    } else if (st == SQZ_OK) {
        sqz_qmatrix q;
        SQZ_TRY(sqz_qtarget_check(&target));
        const sqz_calib_input *in = head ? sqz_calib_block_input(head, t->role) : NULL;
        const sqz_qmethod *mt = method_for(sp, t, in, &target);
        st = round_one(mt, sp, t, w, in, &target, threads, &q);
        if (st == SQZ_OK) {
            row.quantized = true;
            sqz__report_row_method(&row, mt, "");
            snprintf(row.format, sizeof row.format, "%s", sqz_qformat_name(target.fmt));
            row.bits_per_weight = sqz_qmatrix_bits_per_weight(&q);
            row.seconds = q.seconds;
            row.weight_err = measured_err(pool, &q, w);
            if (row.weight_err < 0) { /* a scheme's matrix: dequantized whole */
                row.weight_err = 0.0;
                float *deq = sqz__malloc((size_t)n * sizeof(float));
                if (deq && sqz_qmatrix_to_f32(&q, deq) == SQZ_OK) row.weight_err = sqz__rel_err(deq, w, n);
                free(deq);
            }
            st = sqz_qmatrix_attach(m, t, &q);
            if (st != SQZ_OK) sqz_qmatrix_free(&q);
        }
    }
    free(w);
    if (st != SQZ_OK) sqz__error_prefix("%s", t->name);
    return st == SQZ_OK ? sqz__report_add(rep, &row) : st;
}

sqz_status sqz__quant_mix_globals(sqz_model *m, const sqz_compress_spec *sp, const sqz_type_overrides *ov,
                                  int threads, const sqz_calib_block *head, sqz_compress_report *rep) {
    if (!sp->mix) return SQZ_OK;
    static const sqz_role roles[] = {SQZ_ROLE_TOKEN_EMBD, SQZ_ROLE_OUTPUT};
    sqz__pool *pool = NULL;
    sqz_status st = sqz__pool_new(threads, &pool);
    for (size_t i = 0; st == SQZ_OK && i < sizeof roles / sizeof roles[0]; i++) {
        sqz_tensor *t = sqz_model_get(m, roles[i], -1, SQZ_PARAM_WEIGHT);
        if (t && t->ndim == 2) st = one(pool, m, t, sp, ov, head, threads, rep);
    }
    sqz__pool_free(pool);
    return st;
}
