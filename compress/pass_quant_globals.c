/*
 * compress/pass_quant_globals.c - the global tensors of a whole-model mix (quant/mix.c): the token
 * embedding and the classifier, quantized after the last block to the type the mix gives
 * them (Q6_K / Q8_0 for the output and a tied embedding, the base type for an untied one,
 * F16 where no block fits). They are rounded with the reference quantizer, as llama-quantize
 * does: llama-imatrix collects no importance for the embedding (a row lookup) and none for
 * the output unless asked (--process-output).
 */
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "quant/quant_internal.h"
#include "sqz/edit.h"

static sqz_status one(sqz_model *m, sqz_tensor *t, const sqz_compress_spec *sp, const sqz_type_overrides *ov,
                      sqz_compress_report *rep) {
    sqz_dtype d = sqz__qplan_type(sp->plan, t); /* auto's plan may take another mix's types */
    if (d == SQZ_DTYPE_COUNT) SQZ_TRY(sqz__mix_type(sp, ov, m, t, &d));
    if (d == t->dtype || t->qp) return SQZ_OK;
    sqz_layer_report row;
    sqz__report_row_init(&row, t);
    row.weight_err = 0.0; /* these rows have always reported 0 until measured */
    const int64_t n = sqz_tensor_nelements(t);
    float *w = sqz__malloc((size_t)n * sizeof(float));
    if (!w) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_tensor_to_f32(t, w);
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
        st = sqz_quant_rtn_one(w, t->shape[0], t->shape[1], &target, &q);
        if (st == SQZ_OK) {
            row.quantized = true;
            snprintf(row.method, sizeof row.method, "rtn");
            snprintf(row.format, sizeof row.format, "%s", sqz_qformat_name(target.fmt));
            row.bits_per_weight = sqz_qmatrix_bits_per_weight(&q);
            row.seconds = q.seconds;
            float *deq = sqz__malloc((size_t)n * sizeof(float));
            if (deq && sqz_qmatrix_to_f32(&q, deq) == SQZ_OK) row.weight_err = sqz__rel_err(deq, w, n);
            free(deq);
            st = sqz_qmatrix_attach(m, t, &q);
            if (st != SQZ_OK) sqz_qmatrix_free(&q);
        }
    }
    free(w);
    if (st != SQZ_OK) sqz__error_prefix("%s", t->name);
    return st == SQZ_OK ? sqz__report_add(rep, &row) : st;
}

sqz_status sqz__quant_mix_globals(sqz_model *m, const sqz_compress_spec *sp, const sqz_type_overrides *ov,
                                  sqz_compress_report *rep) {
    if (!sp->mix) return SQZ_OK;
    static const sqz_role roles[] = {SQZ_ROLE_TOKEN_EMBD, SQZ_ROLE_OUTPUT};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        sqz_tensor *t = sqz_model_get(m, roles[i], -1, SQZ_PARAM_WEIGHT);
        if (t && t->ndim == 2) SQZ_TRY(one(m, t, sp, ov, rep));
    }
    return SQZ_OK;
}
