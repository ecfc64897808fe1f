/*
 * compress/pass_cast.c - `--cast DTYPE`: stores the float tensors that no other stage quantized
 * in f16, bf16 or f32, exactly as `sqz convert --dtype` would, but as a stage of a recipe: after
 * a quant stage it halves what stayed f32 (the token embedding and classifier of an int8 or
 * int4 model, layers kept float by the policy or --keep-float) without a second command.
 *
 *   SPEC := DTYPE (':' PART)*      DTYPE: f16 | bf16 | f32
 *   PART := matrices | all         which float tensors: the 2-D weights (linear layers,
 *                                  embeddings, classifier; norms and biases stay as they are,
 *                                  llama.cpp's habit), or every float tensor
 *   e.g. f16  bf16  f16:all  f32
 *
 * Tensors already in a block-quantized type or quantized by sqz (t->qp) are never touched; a
 * tensor already in DTYPE is left as it is. Converting from F32 to F16 rounds to nearest even
 * (values beyond f16's range become infinities, which sqz_model_save's finiteness check then
 * refuses, naming the tensor). One tensor is converted at a time (sqz_convert): the stage holds
 * the converted copies (what the output file will hold) and one f32 copy of a tensor in passing.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/edit.h"

typedef struct cast_args {
    int dtype; /* SQZ_DTYPE_F16, _BF16 or _F32 */
    int all;   /* 0: 2-D weights only, 1: every float tensor */
} cast_args;

static const int dtype_values[] = {SQZ_DTYPE_F16, SQZ_DTYPE_BF16, SQZ_DTYPE_F32};

static const sqz_opt cast_opts[] = {
    {.name = "dtype", .type = SQZ_OPT_CHOICE, .offset = offsetof(cast_args, dtype),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .choices = "f16|bf16|f32", .values = dtype_values,
     .metavar = "DTYPE", .help = "the float type the float tensors are stored in"},
    {.name = "which", .type = SQZ_OPT_CHOICE, .offset = offsetof(cast_args, all), .flags = SQZ_OPT_BARE,
     .choices = "matrices|all", .def = "matrices",
     .help = "the 2-D float weights (norms and biases stay as they are), or every float tensor"},
};

static bool wants(const cast_args *a, const sqz_tensor *t) {
    const sqz_dtype_traits *tr = sqz_dtype_info(t->dtype);
    if (!tr || !tr->is_float || t->qp || t->dtype == (sqz_dtype)a->dtype) return false;
    return a->all || (t->param == SQZ_PARAM_WEIGHT && t->ndim == 2);
}

static sqz_status cast_one(sqz_model *m, sqz_tensor *t, sqz_dtype d) {
    const int64_t n = sqz_tensor_nelements(t);
    size_t nb = 0;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(d, n, &nb), SQZ_ERR_SHAPE, "--cast: tensor '%s': %" PRId64 " elements", t->name, n);
    SQZ_RETURN_IF(!t->data, SQZ_ERR_INVALID_ARG, "--cast: tensor '%s' has no data", t->name);
    void *out = sqz__malloc(nb ? nb : 1);
    sqz_status st = out ? sqz_convert(t->dtype, t->data, d, out, n, NULL) : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz_tensor_replace(m, t, d, t->ndim, t->shape, out, nb, true);
    if (st == SQZ_OK) return SQZ_OK; /* the model owns out */
    sqz__error_prefix("--cast: tensor '%s'", t->name);
    free(out);
    return st;
}

static sqz_status cast_model_step(sqz_pass_ctx *c, const void *args) {
    const cast_args *a = args;
    const int64_t before = sqz_model_data_bytes(c->m);
    int64_t n_cast = 0;
    for (int64_t i = 0; i < c->m->n_tensors; i++) {
        sqz_tensor *t = &c->m->tensors[i];
        if (!wants(a, t)) continue;
        SQZ_TRY(cast_one(c->m, t, (sqz_dtype)a->dtype));
        n_cast++;
    }
    snprintf(c->stage->note, sizeof c->stage->note,
             "cast %" PRId64 " float tensor(s) to %s (%.1f MB -> %.1f MB of tensor data)%s", n_cast,
             sqz_dtype_name((sqz_dtype)a->dtype), (double)before / 1e6, (double)sqz_model_data_bytes(c->m) / 1e6,
             a->all ? "" : "; norms and biases as they were");
    return SQZ_OK;
}

const sqz_pass sqz__pass_cast = {
    .name = "cast", .metavar = "DTYPE",
    .summary = "store the float tensors no stage quantized in f16, bf16 or f32 (the 2-D weights, or all)",
    .examples = "f16 bf16 f16:all f32",
    .opts = cast_opts, .n_opts = (int)(sizeof cast_opts / sizeof cast_opts[0]), .args_size = sizeof(cast_args),
    .reshapes = true, /* the stored tensors change: a later stage calibrates on a fresh session */
    .model_step = cast_model_step,
};
