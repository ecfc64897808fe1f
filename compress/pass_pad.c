/*
 * compress/pass_pad.c - `--pad-ffn M`: pads every layer's FFN with zero neurons up to the next
 * multiple of M (sqz_model_pad_neurons, sqz/family.h), exactly, so that a down projection whose
 * input width is not a multiple of a quantization block is quantized instead of kept float
 * (stories260K: FFN 172 -> 192 for the blocks of 32 of q4_0, 256 for the K-quants).
 *
 * sqz_recipe_pad_for_quant inserts this stage by itself where a quant stage needs it: before
 * the block loop of the first quant stage whose group divides d_model (so that gate and up are
 * quantized too: zero rows kept float would cost more than they save) but not some layer's FFN width
 * (or that follows a prune stage), so after any prune or drop-layers stage: the step pads the
 * widths that quant stage will see.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/family.h"

typedef struct pad_args {
    int64_t multiple;
} pad_args;

static const sqz_opt pad_opts[] = {
    {.name = "multiple", .type = SQZ_OPT_INT, .offset = offsetof(pad_args, multiple),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .min = 2, .max = 4096, .metavar = "M",
     .help = "pad every FFN width up to the next multiple of M (32: the GGUF blocks of q4_0 / q8_0; 256: the "
             "K-quants)"},
};

static sqz_status pad_model_step(sqz_pass_ctx *c, const void *args) {
    const pad_args *a = args;
    sqz_model *m = c->m;
    int64_t n_pad = 0, from = 0, to = 0;
    for (int32_t l = 0; l < m->hp.n_layers; l++) {
        const int64_t d = m->layers[l].d_ff, want = (d + a->multiple - 1) / a->multiple * a->multiple;
        if (want == d) continue;
        sqz_status st = sqz_model_pad_neurons(m, l, want);
        if (st != SQZ_OK) {
            sqz__error_prefix("--pad-ffn '%s': layer %d", c->stage->spec, (int)l);
            return st;
        }
        if (!n_pad++) from = d, to = want;
    }
    if (n_pad)
        snprintf(c->stage->note, sizeof c->stage->note,
                 "padded the FFN of %" PRId64 " layer(s) with zero neurons to a multiple of %" PRId64
                 " (%" PRId64 " -> %" PRId64 " in the first; exact)",
                 n_pad, a->multiple, from, to);
    else
        snprintf(c->stage->note, sizeof c->stage->note, "every FFN width is already a multiple of %" PRId64,
                 a->multiple);
    return SQZ_OK;
}

const sqz_pass sqz__pass_pad_ffn = {
    .name = "pad-ffn", .metavar = "M",
    .summary = "pad every FFN with zero neurons to a multiple of M (exact), so that ffn_down fits the blocks of a "
               "following --quant; added by itself before a quant stage that needs it",
    .examples = "32 256", .opts = pad_opts, .n_opts = (int)(sizeof pad_opts / sizeof pad_opts[0]),
    .args_size = sizeof(pad_args), .reshapes = true, .changes_widths = true, .pads_ffn = true,
    .model_step = pad_model_step,
};

sqz_status sqz_recipe_pad_for_quant(sqz_recipe *r, const sqz_model *m, int *inserted) {
    if (inserted) *inserted = -1;
    int first = -1;
    int64_t multiple = 0;
    bool pruned = false; /* a prune stage before changes the widths: pad whatever they become */
    for (int k = 0; k < r->n; k++) {
        if (r->stages[k].pass->pads_ffn) return SQZ_OK; /* the user's own */
        pruned = pruned || r->stages[k].pass->changes_widths;
        const sqz_compress_spec *sp = sqz_stage_quant_spec(&r->stages[k]);
        if (!sp || !sp->method || sp->q.target.fmt == SQZ_QFMT_I8) continue;
        /* worth it only when gate/up (input width d_model) take the same blocks: zero rows of a
         * float gate/up cost more than the quantized down saves */
        if (!sqz_qtarget_fits(&sp->q.target, m->hp.d_model)) continue;
        bool needs = pruned;
        for (int32_t l = 0; l < m->hp.n_layers && !needs; l++)
            needs = !sqz_qtarget_fits(&sp->q.target, m->layers[l].d_ff);
        if (!needs) continue;
        if (first < 0) first = k;
        if (sp->q.target.group > multiple) multiple = sp->q.target.group; /* 32 .. 256: powers of two */
    }
    if (first < 0) return SQZ_OK;
    int pos = first;
    while (sqz__stage_joins_previous(r, pos)) pos--;
    char spec[32];
    snprintf(spec, sizeof spec, "%" PRId64, multiple);
    SQZ_TRY(sqz_recipe_add(r, sqz__pass_pad_ffn.name, spec));
    const sqz_stage s = r->stages[r->n - 1];
    memmove(&r->stages[pos + 1], &r->stages[pos], (size_t)(r->n - 1 - pos) * sizeof *r->stages);
    r->stages[pos] = s;
    if (inserted) *inserted = pos;
    return SQZ_OK;
}
