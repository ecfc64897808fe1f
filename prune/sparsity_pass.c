/*
 * prune/sparsity_pass.c - `--sparsity SPEC` (grammar: sparsity_internal.h): zeros a fraction
 * of every linear layer's weights, or N of every M, block by block inside the sequential
 * calibration loop (block l is sparsified from statistics of the already sparsified blocks
 * 0..l-1, then recomputed). Shapes do not change; the zeros are stored as zeros (F32 weights,
 * or a quantized grid's zero code in the joint mode). Its row is in compress/passes.c;
 * docs/sparsity.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prune/sparsity_internal.h"
#include "sqz/edit.h"
#include "sqz/family.h"

static const int m_values[] = {4, 8};
enum { R_RATIO, R_M, R_METHOD, R_LAYERS, R_OWL_M, R_OWL_L, R_DAMP, R_BLOCK, N_ROWS };
const sqz_opt sqz__sparsity_opts[SQZ__SPARSITY_N_OPTS] = {
    [R_RATIO] = {.name = "ratio", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparsity_args, ratio),
                 .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .min = 0, .max = 8, .metavar = "R|N",
                 .help = "the fraction of every linear layer's weights set to zero, in (0, 1); or N of N:M"},
    [R_M] = {.name = "m", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparsity_args, m), .flags = SQZ_OPT_BARE,
             .choices = "4|8", .values = m_values,
             .help = "M of N:M (2:4, 4:8): N of every M consecutive weights of a row are kept"},
    [R_METHOD] = {.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparsity_args, method),
                  .flags = SQZ_OPT_BARE, .choices = "magnitude|wanda|sparsegpt", .def = "sparsegpt",
                  .help = "magnitude |W| (layer-wise), Wanda |W|*||x|| (per output row), SparseGPT (OBS in GPTQ's "
                          "sweep: the kept weights are updated; joint with a following --quant)"},
    [R_LAYERS] = {.name = "layers", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparsity_args, layers),
                  .flags = SQZ_OPT_BARE, .choices = "uniform|owl", .def = "uniform",
                  .help = "the same ratio in every block, or OWL's outlier-weighted ratios (unstructured only)"},
    [R_OWL_M] = {.name = "owl-m", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparsity_args, owl_m),
                 .flags = SQZ_OPT_OPEN_MIN, .min = 0, .max = 1000, .def = "5",
                 .help = "OWL: a score is an outlier above M times the block's mean"},
    [R_OWL_L] = {.name = "owl-lambda", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparsity_args, owl_lambda),
                 .min = 0, .max = 0.5, .def = "0.08", .help = "OWL: block ratios spread over R +- lambda"},
    [R_DAMP] = {.name = "damp", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparsity_args, damp),
                .flags = SQZ_OPT_OPEN_MIN, .min = 0, .max = 10, .def = "0.01",
                .help = "SparseGPT: relative damping of the Hessian (also the joint quantization's)"},
    [R_BLOCK] = {.name = "blocksize", .type = SQZ_OPT_INT, .offset = offsetof(sqz__sparsity_args, blocksize),
                 .min = 8, .max = 4096, .def = "128",
                 .help = "SparseGPT: columns per block (a multiple of M and of the joint format's group)"},
};
_Static_assert(N_ROWS == SQZ__SPARSITY_N_OPTS, "sparsity rows");

#define GIVEN(r) (given & (1ull << (r)))

sqz_status sqz__sparsity_check(void *args, uint64_t given, const char *spec) {
    sqz__sparsity_args *a = args;
    if (a->m > 0) {
        const int n = (int)a->ratio;
        SQZ_RETURN_IF((double)n != a->ratio || n < 1 || n >= a->m, SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': part '%g': N of N:M must be an integer in [1, %d)", spec, a->ratio, a->m);
        a->n = n;
        SQZ_RETURN_IF(a->layers == 1, SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': part 'owl' spreads unstructured ratios; N:M is the same in every layer", spec);
    } else {
        SQZ_RETURN_IF(!(a->ratio > 0 && a->ratio < 1), SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': part '%g': a fraction in (0, 1), or N:M (2:4, 4:8)", spec, a->ratio);
    }
    SQZ_RETURN_IF((GIVEN(R_OWL_M) || GIVEN(R_OWL_L)) && a->layers != 1, SQZ_ERR_INVALID_ARG,
                  "--sparsity '%s': '%s' is an OWL option (add ':owl')", spec, GIVEN(R_OWL_M) ? "owl-m=" : "owl-lambda=");
    SQZ_RETURN_IF((GIVEN(R_DAMP) || GIVEN(R_BLOCK)) && a->method != SQZ__SPARSE_SPARSEGPT, SQZ_ERR_INVALID_ARG,
                  "--sparsity '%s': '%s' is a SparseGPT option (add ':sparsegpt')", spec,
                  GIVEN(R_DAMP) ? "damp=" : "blocksize=");
    SQZ_RETURN_IF(a->m > 0 && a->blocksize % a->m, SQZ_ERR_INVALID_ARG,
                  "--sparsity '%s': part 'blocksize=%" PRId64 "': a multiple of M (%d)", spec, a->blocksize, a->m);
    return SQZ_OK;
}

unsigned sqz__sparsity_needs(const void *args, unsigned *required) {
    const sqz__sparsity_args *a = args;
    *required = a->method == SQZ__SPARSE_WANDA ? SQZ_QSTAT_X2 : a->method == SQZ__SPARSE_SPARSEGPT ? SQZ_QSTAT_XTX : 0;
    return *required | SQZ_QSTAT_SAMPLE;
}

static void write_note(sqz_pass_ctx *c, const sqz__sparsity_args *a) {
    static const char *names[] = {"magnitude", "wanda", "sparsegpt"};
    char pat[32];
    if (a->m) snprintf(pat, sizeof pat, "%d:%d", a->n, a->m);
    else snprintf(pat, sizeof pat, "%g%s", a->ratio, a->layers ? " owl" : "");
    snprintf(c->stage->note, sizeof c->stage->note,
             "zeroed %" PRId64 " of %" PRId64 " linear weights (%.2f%%), %s by %s%s%s", a->zeros, a->total,
             a->total ? 100.0 * (double)a->zeros / (double)a->total : 0.0, pat, names[a->method],
             a->joint ? ", quantized jointly to " : "", a->joint ? a->joint->text : "");
}

/* The per-run state lives in the stage's args (as --prune's plan): reset here. */
sqz_status sqz__sparsity_model_step(sqz_pass_ctx *c, const void *args) {
    sqz__sparsity_args *a = (sqz__sparsity_args *)(uintptr_t)args;
    a->zeros = a->total = 0;
    a->have_layer_ratio = false;
    SQZ_RETURN_IF(!sqz_family_get(c->m->hp.family), SQZ_ERR_INVALID_ARG, "--sparsity '%s': family %s has no table",
                  c->stage->spec, sqz_family_name(c->m->hp.family));
    if (a->layers == 1) SQZ_TRY(sqz__sparsity_owl(c, a));
    write_note(c, a);
    return SQZ_OK;
}

/* The layers of group g that take the mask: linear weights the policy would quantize, not
 * already quantized by sqz; joint: those the joint target can take, else the others. */
static int group_layers(sqz_pass_ctx *c, const sqz__sparsity_args *a, int32_t layer, const sqz_linear_group *g,
                        bool joint, sqz_tensor **t) {
    int n = 0;
    for (int i = 0; i < g->n; i++) {
        sqz_tensor *x = sqz_model_get(c->m, g->roles[i], layer, SQZ_PARAM_WEIGHT);
        if (!x || x->qp || !sqz_quant_policy_wants(x, NULL, &c->o->policy, NULL)) continue;
        if (a->m && x->shape[1] % a->m) continue;
        const bool fits = a->joint && sqz_quant_policy_wants(x, &a->joint->q.target, &c->o->policy, NULL);
        if (fits == joint) t[n++] = x;
    }
    return n;
}

static sqz_status set_f32(sqz_model *m, sqz_tensor *t, float *v) {
    const size_t nb = (size_t)sqz_tensor_nelements(t) * sizeof(float);
    return sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, v, nb, true);
}

/* The sparse INT8 kernel on a float 2:4 layer's INT8 image (sparsity_forward.c). */
static sqz_status check_kernel(const sqz__sparsity_args *a, const float *w, const sqz_tensor *t,
                               const sqz_calib_input *in) {
    const int64_t nx = in && in->x ? in->st.n_x : 0;
    return sqz__sparsity_check_f32(a, w, t->shape[0], t->shape[1], nx ? in->x : NULL, nx);
}

static int64_t count_zeros(const float *v, int64_t n) {
    int64_t z = 0;
    for (int64_t i = 0; i < n; i++) z += v[i] == 0.0f;
    return z;
}

static sqz_status sparsify_group(sqz_pass_ctx *c, sqz__sparsity_args *a, int32_t layer, const sqz_linear_group *g,
                                 const sqz_calib_block *stats, bool joint) {
    sqz_tensor *t[SQZ_LINEAR_GROUP_MAX];
    const int n = group_layers(c, a, layer, g, joint, t);
    if (!n) return SQZ_OK;
    const sqz_calib_input *in = stats ? sqz_calib_block_input(stats, g->roles[0]) : NULL;
    const double ratio = a->have_layer_ratio ? a->layer_ratio[layer] : a->ratio;
    float *w[SQZ_LINEAR_GROUP_MAX] = {0}, *v[SQZ_LINEAR_GROUP_MAX] = {0};
    sqz_qlinear lin[SQZ_LINEAR_GROUP_MAX];
    sqz_status st = SQZ_OK;
    for (int i = 0; i < n && st == SQZ_OK; i++) {
        const int64_t ne = sqz_tensor_nelements(t[i]);
        w[i] = sqz__malloc((size_t)ne * sizeof(float));
        v[i] = a->method == SQZ__SPARSE_SPARSEGPT && !joint ? sqz__malloc((size_t)ne * sizeof(float)) : NULL;
        st = w[i] && (v[i] || a->method != SQZ__SPARSE_SPARSEGPT || joint) ? sqz_tensor_to_f32(t[i], w[i])
                                                                               : SQZ_ERR_NOMEM;
        lin[i] = (sqz_qlinear){w[i], t[i]->shape[0], t[i]->name, false};
    }
    if (st == SQZ_OK && a->method == SQZ__SPARSE_WANDA)
        st = in && in->st.x2 ? SQZ_OK : SQZ_ERROR(SQZ_ERR_INVALID_ARG, "--sparsity: wanda needs E[x^2] of block %d", (int)layer);
    if (st == SQZ_OK && a->method == SQZ__SPARSE_SPARSEGPT && (!in || !in->st.xtx))
        st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "--sparsity: sparsegpt needs the Hessian of block %d", (int)layer);
    if (st == SQZ_OK && joint) {
        st = sqz__sparsity_joint(c, a, layer, lin, t, n, in, ratio);
    } else if (st == SQZ_OK && a->method == SQZ__SPARSE_SPARSEGPT) {
        st = sqz__sparsegpt(lin, n, &in->st, a, ratio, NULL, NULL, v);
        for (int i = 0; i < n && st == SQZ_OK; i++) {
            a->zeros += count_zeros(v[i], sqz_tensor_nelements(t[i]));
            st = check_kernel(a, v[i], t[i], in);
            if (st == SQZ_OK) st = set_f32(c->m, t[i], v[i]);
            if (st == SQZ_OK) v[i] = NULL;
        }
    } else {
        for (int i = 0; i < n && st == SQZ_OK; i++) {
            int64_t z = 0;
            st = sqz__sparsity_score_prune(w[i], t[i]->shape[0], t[i]->shape[1], a->method, in ? in->st.x2 : NULL,
                                           ratio, a->n, a->m, &z);
            a->zeros += z;
            if (st == SQZ_OK) st = check_kernel(a, w[i], t[i], in);
            if (st == SQZ_OK) st = set_f32(c->m, t[i], w[i]);
            if (st == SQZ_OK) w[i] = NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        if (st == SQZ_OK) a->total += sqz_tensor_nelements(t[i]);
        free(w[i]);
        free(v[i]);
    }
    if (st != SQZ_OK) sqz__error_prefix("--sparsity '%s': block %d", c->stage->spec, (int)layer);
    return st;
}

sqz_status sqz__sparsity_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args) {
    sqz__sparsity_args *a = (sqz__sparsity_args *)(uintptr_t)args;
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    const int ng = sqz_family_linear_groups(c->m, layer, g);
    for (int i = 0; i < ng; i++) {
        if (a->joint) SQZ_TRY(sparsify_group(c, a, layer, &g[i], stats, true));
        SQZ_TRY(sparsify_group(c, a, layer, &g[i], stats, false));
    }
    write_note(c, a);
    return SQZ_OK;
}
