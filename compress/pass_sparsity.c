/*
 * compress/pass_sparsity.c - `--sparsity SPEC` (grammar: sparse/sparse_internal.h): zeros a fraction
 * of every linear layer's weights, or N of every M, block by block inside the sequential
 * calibration loop (block l is sparsified from statistics of the already sparsified blocks
 * 0..l-1, then recomputed). Shapes do not change; the zeros are stored as zeros (F32 weights,
 * or a quantized grid's zero code in the joint mode). The algorithms are sparse/'s; this file
 * is the pass: its options, its link with a following quant stage, its steps. docs/sparsity.md.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/edit.h"
#include "sqz/family.h"

static const int m_values[] = {4, 8};
static const int onoff_values[] = {1, 0};
enum { R_RATIO, R_M, R_METHOD, R_LAYERS, R_OWL_M, R_OWL_L, R_DAMP, R_BLOCK, R_AQ, R_AQ_ALPHA, N_ROWS };
static const sqz_opt sparsity_opts[] = {
    [R_RATIO] = {.name = "ratio", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparse_opts, ratio),
                 .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .min = 0, .max = 8, .metavar = "R|N",
                 .help = "the fraction of every linear layer's weights set to zero, in (0, 1); or N of N:M"},
    [R_M] = {.name = "m", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparse_opts, m), .flags = SQZ_OPT_BARE,
             .choices = "4|8", .values = m_values,
             .help = "M of N:M (2:4, 4:8): N of every M consecutive weights of a row are kept"},
    [R_METHOD] = {.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparse_opts, method),
                  .flags = SQZ_OPT_BARE, .choices = "magnitude|wanda|sparsegpt", .def = "sparsegpt",
                  .help = "magnitude |W| (layer-wise), Wanda |W|*||x|| (per output row), SparseGPT (OBS in GPTQ's "
                          "sweep: the kept weights are updated; joint with a following --quant)"},
    [R_LAYERS] = {.name = "layers", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparse_opts, layers),
                  .flags = SQZ_OPT_BARE, .choices = "uniform|owl", .def = "uniform",
                  .help = "the same ratio in every block, or OWL's outlier-weighted ratios (unstructured only)"},
    [R_OWL_M] = {.name = "owl-m", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparse_opts, owl_m),
                 .flags = SQZ_OPT_OPEN_MIN, .min = 0, .max = 1000, .def = "5",
                 .help = "OWL: a score is an outlier above M times the block's mean"},
    [R_OWL_L] = {.name = "owl-lambda", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparse_opts, owl_lambda),
                 .min = 0, .max = 0.5, .def = "0.08", .help = "OWL: block ratios spread over R +- lambda"},
    [R_DAMP] = {.name = "damp", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparse_opts, damp),
                .flags = SQZ_OPT_OPEN_MIN, .min = 0, .max = 10, .def = "0.01",
                .help = "SparseGPT: relative damping of the Hessian (also the joint quantization's)"},
    [R_BLOCK] = {.name = "blocksize", .type = SQZ_OPT_INT, .offset = offsetof(sqz__sparse_opts, blocksize),
                 .min = 8, .max = 4096, .def = "128",
                 .help = "SparseGPT: columns per block (a multiple of M and of the joint format's group)"},
    [R_AQ] = {.name = "gptaq", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__sparse_opts, aq),
              .flags = SQZ_OPT_BARE, .choices = "gptaq|no-gptaq", .values = onoff_values, .def = "no-gptaq",
              .help = "SparseGPT: GPTAQ's correction toward the original model's outputs (as --quant's gptq:gptaq; "
                      "one process, twice the activations' memory)"},
    [R_AQ_ALPHA] = {.name = "gptaq-alpha", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__sparse_opts, aq_alpha),
                    .min = 0, .max = 1, .def = "0.25", .help = "SparseGPT with gptaq: the weight of its correction"},
};
_Static_assert(sizeof sparsity_opts / sizeof sparsity_opts[0] == N_ROWS, "sparsity rows");

/* What a run decides: OWL's per-layer ratios (the model step), the counts for the note. */
typedef struct sparsity_state {
    double layer_ratio[SQZ__SPARSITY_MAX_LAYERS];
    bool have_layer_ratio;
    int64_t zeros, total;
} sparsity_state;

#define GIVEN(r) (given & (1ull << (r)))

static sqz_status sparsity_check(void *args, uint64_t given, const char *spec) {
    sqz__sparse_opts *a = args;
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
    SQZ_RETURN_IF((GIVEN(R_DAMP) || GIVEN(R_BLOCK) || GIVEN(R_AQ) || GIVEN(R_AQ_ALPHA)) &&
                      a->method != SQZ__SPARSE_SPARSEGPT,
                  SQZ_ERR_INVALID_ARG, "--sparsity '%s': '%s' is a SparseGPT option (add ':sparsegpt')", spec,
                  GIVEN(R_DAMP) ? "damp=" : GIVEN(R_BLOCK) ? "blocksize=" : GIVEN(R_AQ) ? "gptaq" : "gptaq-alpha=");
    SQZ_RETURN_IF(GIVEN(R_AQ_ALPHA) && GIVEN(R_AQ) && a->aq == 0, SQZ_ERR_INVALID_ARG,
                  "--sparsity '%s': 'gptaq-alpha=' with 'no-gptaq'", spec);
    if (GIVEN(R_AQ_ALPHA)) a->aq = 1;
    SQZ_RETURN_IF(a->m > 0 && a->blocksize % a->m, SQZ_ERR_INVALID_ARG,
                  "--sparsity '%s': part 'blocksize=%" PRId64 "': a multiple of M (%d)", spec, a->blocksize, a->m);
    return SQZ_OK;
}

static unsigned sparsity_needs(const void *args, unsigned *required) {
    const sqz__sparse_opts *a = args;
    *required = a->method == SQZ__SPARSE_WANDA ? SQZ_QSTAT_X2 : a->method == SQZ__SPARSE_SPARSEGPT ? SQZ_QSTAT_XTX : 0;
    if (a->method == SQZ__SPARSE_SPARSEGPT && a->aq == 1) *required |= SQZ_QSTAT_DXXT;
    return *required | SQZ_QSTAT_SAMPLE;
}

/* The quant stage this one quantizes jointly with (sparsegpt), or NULL. */
static const sqz_compress_spec *joint_spec(const sqz_pass_ctx *c) { return sqz_stage_quant_spec(c->joint); }

static void write_note(sqz_pass_ctx *c, const sqz__sparse_opts *a) {
    const sparsity_state *ss = c->state;
    const sqz_compress_spec *joint = joint_spec(c);
    static const char *names[] = {"magnitude", "wanda", "sparsegpt"};
    char pat[32];
    if (a->m) snprintf(pat, sizeof pat, "%d:%d", a->n, a->m);
    else snprintf(pat, sizeof pat, "%g%s", a->ratio, a->layers ? " owl" : "");
    snprintf(c->stage->note, sizeof c->stage->note,
             "zeroed %" PRId64 " of %" PRId64 " linear weights (%.2f%%), %s by %s%s%s", ss->zeros, ss->total,
             ss->total ? 100.0 * (double)ss->zeros / (double)ss->total : 0.0, pat, names[a->method],
             joint ? ", quantized jointly to " : "", joint ? joint->text : "");
}

static sqz_status sparsity_model_step(sqz_pass_ctx *c, const void *args) {
    const sqz__sparse_opts *a = args;
    sparsity_state *ss = c->state;
    SQZ_RETURN_IF(!sqz_family_get(c->m->hp.family), SQZ_ERR_INVALID_ARG, "--sparsity '%s': family %s has no table",
                  c->stage->spec, sqz_family_name(c->m->hp.family));
    if (a->layers == 1) {
        SQZ_RETURN_IF(c->m->hp.n_layers > SQZ__SPARSITY_MAX_LAYERS, SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': owl supports up to %d blocks", c->stage->spec, SQZ__SPARSITY_MAX_LAYERS);
        SQZ_RETURN_IF(!c->w || !c->session_opts, SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': part 'owl' measures every block first: give --calib FILE", c->stage->spec);
        SQZ_TRY(sqz__sparsity_owl(c->m, c->w, c->session_opts, a, c->o->progress, c->o->progress_user,
                                  ss->layer_ratio));
        ss->have_layer_ratio = true;
    }
    write_note(c, a);
    return SQZ_OK;
}

/* The layers of group g that take the mask: linear weights the policy would quantize, not
 * already quantized by sqz; joint: those the joint target can take, else the others. */
static int group_layers(sqz_pass_ctx *c, const sqz__sparse_opts *a, int32_t layer, const sqz_linear_group *g,
                        bool joint, sqz_tensor **t) {
    const sqz_compress_spec *js = joint_spec(c);
    int n = 0;
    for (int i = 0; i < g->n; i++) {
        sqz_tensor *x = sqz_model_get(c->m, g->roles[i], layer, SQZ_PARAM_WEIGHT);
        if (!x || x->qp || !sqz_quant_policy_wants(x, NULL, &c->o->policy, NULL)) continue;
        if (a->m && x->shape[1] % a->m) continue;
        const bool fits = js && sqz_quant_policy_wants(x, &js->q.target, &c->o->policy, NULL);
        if (fits == joint) t[n++] = x;
    }
    return n;
}

static sqz_status set_f32(sqz_model *m, sqz_tensor *t, float *v) {
    const size_t nb = (size_t)sqz_tensor_nelements(t) * sizeof(float);
    return sqz_tensor_replace(m, t, SQZ_DTYPE_F32, t->ndim, t->shape, v, nb, true);
}

/* The sparse INT8 kernel on a float 2:4 layer's INT8 image (sparse/forward.c). */
static sqz_status check_kernel(const sqz__sparse_opts *a, const float *w, const sqz_tensor *t,
                               const sqz_calib_input *in) {
    const int64_t nx = in && in->x ? in->st.n_x : 0;
    return sqz__sparsity_check_f32(a, w, t->shape[0], t->shape[1], nx ? in->x : NULL, nx);
}

static int64_t count_zeros(const float *v, int64_t n) {
    int64_t z = 0;
    for (int64_t i = 0; i < n; i++) z += v[i] == 0.0f;
    return z;
}

static sqz_status sparsify_group(sqz_pass_ctx *c, const sqz__sparse_opts *a, int32_t layer, const sqz_linear_group *g,
                                 const sqz_calib_block *stats, bool joint) {
    sparsity_state *ss = c->state;
    sqz_tensor *t[SQZ_LINEAR_GROUP_MAX];
    const int n = group_layers(c, a, layer, g, joint, t);
    if (!n) return SQZ_OK;
    const sqz_calib_input *in = stats ? sqz_calib_block_input(stats, g->roles[0]) : NULL;
    const double ratio = ss->have_layer_ratio ? ss->layer_ratio[layer] : a->ratio;
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
        st = sqz__sparsity_joint(c, a, &joint_spec(c)->q, lin, t, n, in, ratio, &ss->zeros);
    } else if (st == SQZ_OK && a->method == SQZ__SPARSE_SPARSEGPT) {
        st = sqz__sparsegpt(lin, n, &in->st, a, ratio, NULL, c->session_opts ? c->session_opts->backend : NULL,
                            c->session_opts ? c->session_opts->n_threads : 0, NULL, v);
        for (int i = 0; i < n && st == SQZ_OK; i++) {
            ss->zeros += count_zeros(v[i], sqz_tensor_nelements(t[i]));
            st = check_kernel(a, v[i], t[i], in);
            if (st == SQZ_OK) st = set_f32(c->m, t[i], v[i]);
            if (st == SQZ_OK) v[i] = NULL;
        }
    } else {
        for (int i = 0; i < n && st == SQZ_OK; i++) {
            int64_t z = 0;
            st = sqz__sparsity_score_prune(w[i], t[i]->shape[0], t[i]->shape[1], a->method, in ? in->st.x2 : NULL,
                                           ratio, a->n, a->m, &z);
            ss->zeros += z;
            if (st == SQZ_OK) st = check_kernel(a, w[i], t[i], in);
            if (st == SQZ_OK) st = set_f32(c->m, t[i], w[i]);
            if (st == SQZ_OK) w[i] = NULL;
        }
    }
    for (int i = 0; i < n; i++) {
        if (st == SQZ_OK) ss->total += sqz_tensor_nelements(t[i]);
        free(w[i]);
        free(v[i]);
    }
    if (st != SQZ_OK) sqz__error_prefix("--sparsity '%s': block %d", c->stage->spec, (int)layer);
    return st;
}

static sqz_status sparsity_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args) {
    const sqz__sparse_opts *a = args;
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    const int ng = sqz_family_linear_groups(c->m, layer, g);
    for (int i = 0; i < ng; i++) {
        if (c->joint) SQZ_TRY(sparsify_group(c, a, layer, &g[i], stats, true));
        SQZ_TRY(sparsify_group(c, a, layer, &g[i], stats, false));
    }
    write_note(c, a);
    return SQZ_OK;
}

/* The quant stage after this one: SparseGPT quantizes jointly (that stage then leaves its layers to
 * this one); magnitude / wanda keep their zeros through the quant stage's own method, except GPTQ
 * (which moves them) and q4_1 (no exact zero); a quant stage before this one is refused. */
static sqz_status sparsity_link(const sqz_recipe *r, int i, sqz_stage_link *links) {
    const sqz__sparse_opts *a = r->stages[i].args;
    const char *spec = r->stages[i].spec;
    for (int k = 0; k < i; k++)
        SQZ_RETURN_IF(sqz_stage_quant_spec(&r->stages[k]), SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s': comes after --quant '%s': give --sparsity first (the quantization then keeps "
                      "its zeros, or runs jointly with sparsegpt)", spec, r->stages[k].spec);
    for (int k = i + 1; k < r->n; k++) {
        const sqz_compress_spec *q = sqz_stage_quant_spec(&r->stages[k]);
        if (!q) continue;
        const char *mn = q->method->name;
        SQZ_RETURN_IF(q->q.target.fmt == SQZ_QFMT_Q4_1, SQZ_ERR_INVALID_ARG,
                      "--sparsity '%s' with --quant '%s': q4_1 has no exact zero (d * code + m): use q4_0, int4 or "
                      "int8", spec, q->text);
        if (a->method == SQZ__SPARSE_SPARSEGPT) {
            SQZ_RETURN_IF(!q->method->rowwise && !q->method->hessian, SQZ_ERR_INVALID_ARG,
                          "--sparsity '%s' with --quant '%s': sparsegpt quantizes jointly in GPTQ's sweep; give the "
                          "quant stage rtn or gptq, not %s", spec, q->text, mn);
            links[i].joint = &r->stages[k];
            links[k].absorbed = true;
        } else {
            SQZ_RETURN_IF(q->method->hessian, SQZ_ERR_INVALID_ARG,
                          "--sparsity '%s' with --quant '%s': GPTQ would move the zeros; use sparsegpt (joint with the "
                          "quantization) or another quant method", spec, q->text);
        }
        break;
    }
    return SQZ_OK;
}

static sqz_status sparsity_check_model(const sqz_stage *s, const sqz_model *m, int64_t *n_layers, bool have_windows) {
    (void)m;
    (void)n_layers;
    const sqz__sparse_opts *a = s->args;
    SQZ_RETURN_IF(a->layers == 1 && !have_windows, SQZ_ERR_INVALID_ARG,
                  "--sparsity '%s': part 'owl' measures every block first: give --calib FILE", s->spec);
    return SQZ_OK;
}

const sqz_pass sqz__pass_sparsity = {
    .name = "sparsity", .metavar = "SPEC",
    .summary = "zero a fraction (R) or N of every M (N:M) of every linear layer's weights by magnitude, Wanda or "
               "SparseGPT, uniform or OWL ratios; sparsegpt quantizes jointly with a following --quant "
               "(docs/sparsity.md)",
    .examples = "0.5 0.5:wanda 2:4:sparsegpt 4:8:magnitude 0.6:wanda:owl 2:4:sparsegpt:damp=0.02 0.5:sparsegpt:gptaq",
    .opts = sparsity_opts, .n_opts = N_ROWS, .args_size = sizeof(sqz__sparse_opts),
    .state_size = sizeof(sparsity_state), .check = sparsity_check, .check_model = sparsity_check_model,
    .link = sparsity_link, .needs = sparsity_needs, .model_step = sparsity_model_step, .run_block = sparsity_block,
};
