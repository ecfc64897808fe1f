/*
 * compress/sparsity_link.c - a recipe's --sparsity stages and the quant stage after them:
 * SparseGPT quantizes jointly (the quant stage then leaves those layers), the other methods
 * keep their zeros through the quant stage's method (prune/sparsity_pass.c is the pass).
 */
#include <string.h>

#include "compress/compress_internal.h"
#include "prune/sparsity_internal.h"

sqz_status sqz__sparsity_link(const sqz_recipe *r) {
    for (int k = 0; k < r->n; k++)
        if (sqz__quant_stage_spec(&r->stages[k])) ((sqz__quant_args *)r->stages[k].args)->absorbed = false;
    for (int i = 0; i < r->n; i++) {
        if (r->stages[i].pass->run_block != sqz__sparsity_block) continue;
        sqz__sparsity_args *a = r->stages[i].args;
        a->joint = NULL;
        for (int k = 0; k < i; k++)
            SQZ_RETURN_IF(sqz__quant_stage_spec(&r->stages[k]), SQZ_ERR_INVALID_ARG,
                          "--sparsity '%s': comes after --quant '%s': give --sparsity first (the quantization then "
                          "keeps its zeros, or runs jointly with sparsegpt)", r->stages[i].spec, r->stages[k].spec);
        for (int k = i + 1; k < r->n; k++) {
            const sqz_compress_spec *q = sqz__quant_stage_spec(&r->stages[k]);
            if (!q) continue;
            const char *mn = q->method->name;
            SQZ_RETURN_IF(q->q.target.fmt == SQZ_QFMT_Q4_1, SQZ_ERR_INVALID_ARG,
                          "--sparsity '%s' with --quant '%s': q4_1 has no exact zero (d * code + m): use q4_0, int4 "
                          "or int8", r->stages[i].spec, q->text);
            if (a->method == SQZ__SPARSE_SPARSEGPT) {
                SQZ_RETURN_IF(strcmp(mn, "rtn") && strcmp(mn, "gptq"), SQZ_ERR_INVALID_ARG,
                              "--sparsity '%s' with --quant '%s': sparsegpt quantizes jointly in GPTQ's sweep; "
                              "give the quant stage rtn or gptq, not %s", r->stages[i].spec, q->text, mn);
                a->joint = q;
                ((sqz__quant_args *)r->stages[k].args)->absorbed = true;
            } else {
                SQZ_RETURN_IF(!strcmp(mn, "gptq"), SQZ_ERR_INVALID_ARG,
                              "--sparsity '%s' with --quant '%s': GPTQ would move the zeros; use sparsegpt (joint "
                              "with the quantization) or another quant method", r->stages[i].spec, q->text);
            }
            break;
        }
    }
    return SQZ_OK;
}

sqz_status sqz__sparsity_check_recipe(const sqz_recipe *r, bool have_windows) {
    SQZ_TRY(sqz__sparsity_link(r));
    for (int i = 0; i < r->n; i++) {
        if (r->stages[i].pass->run_block != sqz__sparsity_block) continue;
        const sqz__sparsity_args *a = r->stages[i].args;
        SQZ_RETURN_IF(a->layers == 1 && !have_windows, SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': part 'owl' measures every block first: give --calib FILE", r->stages[i].spec);
    }
    return SQZ_OK;
}
