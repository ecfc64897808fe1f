/*
 * compress/passes.c - THE pass table: one row per pass (name, options, statistics, steps).
 * A new pass is one row here plus its own file; the command line (--NAME SPEC), recipes, the
 * help text and the pipeline all read this table.
 */
#include <string.h>

#include "compress/compress_internal.h"
#include "prune/prune_internal.h"
#include "prune/sparsity_internal.h"

static const sqz_pass passes[] = {
    {.name = "drop-layers", .metavar = "LIST|N:METHOD",
     .summary = "remove whole blocks, by index or N (P%) chosen by importance, optionally compensated (the rest "
                "are renumbered; GGUF and HF outputs say the new count; docs/layerdrop.md)",
     .examples = "3 3,4 2-5 4:bi 25%:kld 8:angular:replaceme 4:bi:iterative 4:last 4:random:seed=3",
     .opts = sqz__drop_opts, .n_opts = SQZ__DROP_N_OPTS, .args_size = sizeof(sqz__drop_args),
     .check = sqz__drop_check, .reshapes = true, .model_step = sqz__drop_model_step},
    {.name = "pad-ffn", .metavar = "M",
     .summary = "pad every FFN with zero neurons to a multiple of M (exact), so that ffn_down fits the blocks of a "
                "following --quant; added by itself before a quant stage that needs it",
     .examples = "32 256", .opts = sqz__pad_opts, .n_opts = SQZ__PAD_N_OPTS, .args_size = sizeof(sqz__pad_args),
     .reshapes = true, .model_step = sqz__pad_model_step},
    {.name = "quant", .metavar = "SPEC",
     .summary = "quantize the linear layers of every block (RTN, imatrix, GPTQ, AWQ, SmoothQuant)",
     .examples = "int8 w8a8:smoothquant int4:gptq:g128:act-order q4_0:imatrix q4_0:awq q4_1:gptq",
     .opts = sqz__quant_opts, .n_opts = SQZ__QUANT_N_OPTS, .args_size = sizeof(sqz__quant_args),
     .check = sqz__quant_check, .needs = sqz__quant_needs, .run_block = sqz__quant_block},
    {.name = "prune", .metavar = "SPEC",
     .summary = "remove a fraction of every layer's attention heads / FFN neurons, scored and compensated from "
                "calibration statistics (docs/pruning.md)",
     .examples = "ffn=0.3 heads=0.25:ffn=0.25:obs ffn=0.3:flap:none ffn=0.2:wanda:lsq",
     .opts = sqz__prune_opts, .n_opts = SQZ__PRUNE_N_OPTS, .args_size = sizeof(sqz__prune_args),
     .check = sqz__prune_check, .needs = sqz__prune_needs, .reshapes = true, .model_step = sqz__prune_model_step,
     .run_block = sqz__prune_block},
    {.name = "sparsity", .metavar = "SPEC",
     .summary = "zero a fraction (R) or N of every M (N:M) of every linear layer's weights by magnitude, Wanda or "
                "SparseGPT, uniform or OWL ratios; sparsegpt quantizes jointly with a following --quant "
                "(docs/sparsity.md)",
     .examples = "0.5 0.5:wanda 2:4:sparsegpt 4:8:magnitude 0.6:wanda:owl 2:4:sparsegpt:damp=0.02",
     .opts = sqz__sparsity_opts, .n_opts = SQZ__SPARSITY_N_OPTS, .args_size = sizeof(sqz__sparsity_args),
     .check = sqz__sparsity_check, .needs = sqz__sparsity_needs, .model_step = sqz__sparsity_model_step,
     .run_block = sqz__sparsity_block},
};

const sqz_pass *sqz_passes(int *n) {
    sqz__quant_opts_init();
    if (n) *n = (int)(sizeof passes / sizeof passes[0]);
    return passes;
}

const sqz_pass *sqz_pass_find(const char *name) {
    int n = 0;
    const sqz_pass *p = sqz_passes(&n);
    for (int i = 0; name && i < n; i++)
        if (!strcmp(p[i].name, name)) return &p[i];
    return NULL;
}
