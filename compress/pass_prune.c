/*
 * compress/pass_prune.c - `--prune SPEC`: removes a fraction of every layer's attention heads
 * and / or FFN neurons, block by block inside the sequential calibration loop (block l is
 * scored and compensated on statistics of the already pruned blocks 0..l-1), scored and
 * compensated as sqz/prune.h describes (the algorithms: prune/). docs/pruning.md.
 *
 *   SPEC  := PART (':' PART)*
 *   PART  := 'heads=' R | 'ffn=' R          fraction of each layer's heads / FFN neurons, [0, 1)
 *          | 'params=' R                    or a fraction of all attention+FFN parameters, placed
 *                                           across layers and kinds by standardized scores (FLAP)
 *          | 'channels=' R                  fraction of the hidden channels, the whole model (Minitron)
 *          | magnitude | wanda | flap | obs  the score (default flap)
 *          | auto | none | bias | lsq | both the compensation (default auto: bias for flap,
 *                                           lsq for obs, none for magnitude and wanda)
 *          | 'damp=' X                      relative damping of the Hessian (obs, lsq)
 *          | 'align=' N                     kept FFN widths a multiple of N (default 32: llama.cpp's
 *                                           quantized rows are blocks of 32; 1 = the exact ratio)
 *          | uniform                        heads=: the same number of heads and KV heads in every
 *                                           layer (a plain HF config.json holds the result)
 *          | 'experts=' R                   fraction of each mixture layer's experts (router rows with them)
 *          | reap | frequency | random       their score (default reap; prune/experts.c)
 *   e.g. ffn=0.3  heads=0.25:ffn=0.25:obs  ffn=0.3:flap:none  ffn=0.2:wanda:lsq  heads=0.34:uniform
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "prune/prune_internal.h"

static const int comp_values[] = {-1, SQZ_PRUNE_COMP_NONE, SQZ_PRUNE_COMP_BIAS, SQZ_PRUNE_COMP_LSQ,
                                  SQZ_PRUNE_COMP_BOTH};

enum { R_HEADS, R_FFN, R_PARAMS, R_CHANNELS, R_SCORE, R_COMP, R_DAMP, R_ALIGN, R_UNIFORM, R_EXPERTS, R_ESCORE,
       N_ROWS };
static const sqz_opt prune_opts[] = {
    [R_HEADS] = {.name = "heads", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__prune_opts, heads), .min = 0,
                 .max = 1, .def = "0",
                 .help = "fraction of each layer's attention heads to remove, below 1 (GQA: whole KV groups or "
                         "the same number of query heads in every group, n_heads stays a multiple of n_kv_heads)"},
    [R_FFN] = {.name = "ffn", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__prune_opts, ffn), .min = 0, .max = 1,
               .def = "0", .help = "fraction of each layer's FFN neurons to remove, below 1"},
    [R_PARAMS] = {.name = "params", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__prune_opts, params), .min = 0,
                  .max = 1, .def = "0",
                  .help = "instead of heads= / ffn=: fraction of all attention+FFN parameters to remove, placed "
                          "across layers, heads and neurons by scores standardized per layer (FLAP's adaptive "
                          "structure; per-layer widths: GGUF output)"},
    [R_CHANNELS] = {.name = "channels", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__prune_opts, channels),
                    .min = 0, .max = 1, .def = "0",
                    .help = "fraction of the hidden channels to remove across the whole model (embedding columns, "
                            "norms, every input column and output row; llama family), scored by the activations "
                            "every layer reads (magnitude: by the weights), before heads / neurons"},
    [R_SCORE] = {.name = "score", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__prune_opts, score),
                 .flags = SQZ_OPT_BARE, .choices = "magnitude|wanda|flap|obs", .def = "flap",
                 .help = "importance: weight magnitude, Wanda-sp |W|*||x||, FLAP's fluctuation Var(x)*||W||^2, "
                         "OBS reconstruction error from the Hessian"},
    [R_COMP] = {.name = "comp", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__prune_opts, comp),
                .flags = SQZ_OPT_BARE, .choices = "auto|none|bias|lsq|both", .values = comp_values, .def = "auto",
                .help = "compensation: FLAP's bias (E[x] of the removed inputs into the output bias), least-squares "
                        "W_K += W_S H_SK H_KK^-1, both; auto: bias for flap, lsq for obs, none otherwise"},
    [R_DAMP] = {.name = "damp", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__prune_opts, damp),
                .flags = SQZ_OPT_OPEN_MIN, .min = 0, .max = 10, .def = "0.01",
                .help = "relative damping of the Hessian (obs, lsq)"},
    [R_ALIGN] = {.name = "align", .type = SQZ_OPT_INT, .offset = offsetof(sqz__prune_opts, align), .min = 1,
                 .max = 4096, .def = "32",
                 .help = "kept FFN widths are a multiple of N where d_ff is (GGUF blocks of 32 need it to quantize "
                         "the down rows; 1 = the exact ratio)"},
    [R_UNIFORM] = {.name = "uniform", .type = SQZ_OPT_FLAG, .offset = offsetof(sqz__prune_opts, uniform),
                   .help = "with heads=: remove the same number of heads and of KV heads in every layer, so a plain "
                           "HF config.json holds the result (--to safetensors); GQA: one more calibration pass picks "
                           "the KV split keeping the most score over all layers, each layer's scores its heads"},
    [R_EXPERTS] = {.name = "experts", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__prune_opts, experts), .min = 0,
                   .max = 1, .def = "0",
                   .help = "fraction of each mixture layer's experts to remove (the router's rows with them; the same "
                           "count in every layer, at least top-k kept), scored on the calibration by reap / frequency"},
    [R_ESCORE] = {.name = "expert-score", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__prune_opts, expert_score),
                  .flags = SQZ_OPT_BARE, .choices = "reap|frequency|random", .def = "reap",
                  .help = "experts=: REAP (routing weight x expert output norm over its tokens), routing frequency, or "
                          "a seeded random draw (the baseline)"},
};
_Static_assert(sizeof prune_opts / sizeof prune_opts[0] == N_ROWS, "prune rows");

/* What a run decides: params='s plan (the model step), the totals of the note before the stage. */
typedef struct prune_state {
    int32_t plan_heads[SQZ__PRUNE_MAX_LAYERS], plan_ffn[SQZ__PRUNE_MAX_LAYERS];
    int64_t h0, n0, d0;
    int64_t uni_kv, uni_per; /* uniform: the shape every layer keeps (KV groups x query heads), 0 until chosen */
    int64_t e0;              /* the experts before the stage */
} prune_state;

sqz_prune_comp sqz__prune_comp_of(const sqz__prune_opts *a) {
    if (a->comp >= 0) return (sqz_prune_comp)a->comp;
    return a->score == SQZ_PRUNE_FLAP ? SQZ_PRUNE_COMP_BIAS
           : a->score == SQZ_PRUNE_OBS ? SQZ_PRUNE_COMP_LSQ
                                       : SQZ_PRUNE_COMP_NONE;
}

static sqz_status prune_check(void *args, uint64_t given, const char *spec) {
    sqz__prune_opts *a = args;
    SQZ_RETURN_IF(a->heads >= 1, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'heads=%g': a fraction below 1 (1 removes every head)", spec, a->heads);
    SQZ_RETURN_IF(a->ffn >= 1, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'ffn=%g': a fraction below 1 (1 removes every FFN neuron)", spec, a->ffn);
    SQZ_RETURN_IF(a->params >= 1, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'params=%g': a fraction below 1 (1 removes every head and neuron)", spec,
                  a->params);
    SQZ_RETURN_IF(a->params > 0 && (given & ((1ull << R_HEADS) | (1ull << R_FFN))), SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'params=%g' places the removal itself: give it or heads= / ffn=, not both",
                  spec, a->params);
    SQZ_RETURN_IF(a->channels >= 1, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'channels=%g': a fraction below 1 (1 removes every channel)", spec, a->channels);
    SQZ_RETURN_IF(a->uniform && a->heads <= 0, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'uniform' shapes heads=: give heads=R with it (ffn= and channels= are "
                  "uniform already; params= places per-layer widths)", spec);
    SQZ_RETURN_IF(a->experts >= 1, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'experts=%g': a fraction below 1 (1 removes every expert)", spec, a->experts);
    SQZ_RETURN_IF(a->heads <= 0 && a->ffn <= 0 && a->params <= 0 && a->channels <= 0 && a->experts <= 0,
                  SQZ_ERR_INVALID_ARG, "--prune '%s': nothing to remove (give heads=R and/or ffn=R, or params=R, "
                  "and/or channels=R, or experts=R; R in (0, 1))", spec);
    return SQZ_OK;
}

static unsigned prune_needs(const void *args, unsigned *required) {
    const sqz__prune_opts *a = args;
    *required = sqz_prune_score_needs((sqz_prune_score)a->score) | sqz_prune_comp_needs(sqz__prune_comp_of(a));
    if (a->channels > 0 && a->score != SQZ_PRUNE_MAGNITUDE) *required |= SQZ_QSTAT_X2;
    if (a->experts > 0 && a->expert_score != SQZ__EXPERTS_RANDOM) *required |= SQZ_QSTAT_X2; /* the observer's counts */
    return *required;
}

static int64_t to_remove(double ratio, int64_t n) { return (int64_t)llround(ratio * (double)n); }

/* FFN neurons to remove from a layer of n, r asked: the kept count rounded to the nearest
 * multiple of align (at least align) when n is a multiple of it. */
static int64_t ffn_remove(const sqz__prune_opts *a, int64_t n, int64_t r) {
    if (a->align <= 1 || n % a->align || n <= a->align) return r;
    int64_t keep = (n - r + a->align / 2) / a->align * a->align;
    if (keep < a->align) keep = a->align;
    return n - keep;
}

/* Totals of the model's heads and FFN neurons. */
static void totals(const sqz_model *m, int64_t *heads, int64_t *neurons) {
    *heads = *neurons = 0;
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        *heads += m->layers[l].n_heads;
        *neurons += m->layers[l].d_ff;
    }
}

static int64_t total_experts(const sqz_model *m) {
    int64_t e = 0;
    for (int64_t l = 0; l < m->hp.n_layers; l++) e += m->layers[l].n_expert;
    return e;
}

static void write_note(sqz_pass_ctx *c, const sqz__prune_opts *a, int64_t h0, int64_t n0, int64_t d0) {
    int64_t h, n;
    totals(c->m, &h, &n);
    if (a->experts > 0) {
        const prune_state *ps = c->state;
        snprintf(c->stage->note, sizeof c->stage->note, "experts %" PRId64 " -> %" PRId64 " (score %s), heads %" PRId64
                 " -> %" PRId64, ps->e0, total_experts(c->m),
                 a->expert_score == SQZ__EXPERTS_REAP ? "reap" : a->expert_score == SQZ__EXPERTS_FREQUENCY ? "frequency"
                                                                                                   : "random", h0, h);
        return;
    }
    snprintf(c->stage->note, sizeof c->stage->note,
             "heads %" PRId64 " -> %" PRId64 ", FFN neurons %" PRId64 " -> %" PRId64 ", hidden %" PRId64 " -> %" PRId64
             " (score %s, compensation %s)",
             h0, h, n0, n, d0, c->m->hp.d_model, sqz_prune_score_name((sqz_prune_score)a->score),
             sqz_prune_comp_name(sqz__prune_comp_of(a)));
}

/* Every layer keeps a head and an FFN neuron; hidden channels only where the family can lose them. */
static sqz_status check_model(const sqz__prune_opts *a, const char *spec, const sqz_model *m) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi, SQZ_ERR_INVALID_ARG, "--prune '%s': family %s has no pruning table",
                  spec, sqz_family_name(m->hp.family));
    SQZ_RETURN_IF(fi->heads_fill_width && (a->heads > 0 || a->params > 0), SQZ_ERR_INVALID_ARG,
                  "--prune '%s': %s's attention width must stay the hidden size (llama.cpp's %s loads attn_output as "
                  "d_model x d_model): prune ffn= instead", spec, fi->name, fi->name);
    const sqz_prune_comp comp = sqz__prune_comp_of(a);
    SQZ_RETURN_IF(fi->no_out_bias && (a->heads > 0 || a->ffn > 0 || a->params > 0) &&
                      (comp == SQZ_PRUNE_COMP_BIAS || comp == SQZ_PRUNE_COMP_BOTH),
                  SQZ_ERR_INVALID_ARG, "--prune '%s': the %s compensation puts a bias on o_proj / down_proj, which "
                  "%s has none of (llama.cpp's %s loads none): give ':lsq' (least squares, from --calib) or ':none'",
                  spec, comp == SQZ_PRUNE_COMP_BOTH ? "'both'" : "bias (flap's default)", fi->name, fi->name);
    for (int32_t l = 0; l < m->hp.n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        SQZ_RETURN_IF(a->heads > 0 && to_remove(a->heads, ld->n_heads) >= ld->n_heads, SQZ_ERR_INVALID_ARG,
                      "--prune '%s': part 'heads=%g' removes every head of layer %d (%" PRId64 " heads)", spec,
                      a->heads, (int)l, ld->n_heads);
        SQZ_RETURN_IF(a->ffn > 0 && to_remove(a->ffn, ld->d_ff) >= ld->d_ff, SQZ_ERR_INVALID_ARG,
                      "--prune '%s': part 'ffn=%g' removes every FFN neuron of layer %d (%" PRId64 ")", spec, a->ffn,
                      (int)l, ld->d_ff);
    }
    /* the family row says whether it can (BERT cannot: post-LayerNorm re-centres the residual
     * stream over whatever channels are left after every residual add, and BertModel derives
     * head_dim from hidden_size, which would then disagree with the heads) */
    SQZ_RETURN_IF(a->experts > 0 && !fi->experts, SQZ_ERR_INVALID_ARG, "--prune '%s': part 'experts=%g': %s has "
                  "no experts (a mixture's layers do)", spec, a->experts, sqz_family_name(m->hp.family));
    for (int64_t l = 0; a->experts > 0 && l < m->hp.n_layers; l++) {
        const int64_t e = m->layers[l].n_expert;
        SQZ_RETURN_IF(e - to_remove(a->experts, e) < m->hp.n_expert_used, SQZ_ERR_INVALID_ARG,
                      "--prune '%s': part 'experts=%g' keeps %" PRId64 " of layer %d's %" PRId64 " experts, fewer than "
                      "the %" PRId64 " every token is routed to", spec, a->experts, e - to_remove(a->experts, e), (int)l,
                      e, m->hp.n_expert_used);
    }
    SQZ_RETURN_IF(a->ffn > 0 && fi->structures[SQZ_STRUCT_NEURON].n_members == 0, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'ffn=%g': %s blocks have no dense FFN neurons (a mixture of experts; pruning "
                  "whole experts is still to come): prune heads= instead", spec, a->ffn, sqz_family_name(m->hp.family));
    SQZ_RETURN_IF(a->channels > 0 && !fi->prune_channels, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'channels=%g': %s blocks cannot lose hidden channels (%s): prune heads= / "
                  "ffn= instead", spec, a->channels, sqz_family_name(m->hp.family),
                  !fi->pre_norm ? "the norm after each residual add re-centres over the kept ones"
                  : fi->embed_scale_sqrt_d ? "its embeddings are scaled by sqrt(d_model), which llama.cpp takes from the "
                                             "width it reads: a narrower model would be scaled otherwise"
                                           : "the family's table row does not allow it");
    SQZ_RETURN_IF(a->channels > 0 && sqz__prune_channels_remove(a, m->hp.d_model) >= m->hp.d_model,
                  SQZ_ERR_INVALID_ARG, "--prune '%s': part 'channels=%g' removes every hidden channel (%lld)", spec,
                  a->channels, (long long)m->hp.d_model);
    return SQZ_OK;
}

/* Every layer keeps at least one head and one neuron (checked again: the model may have
 * changed since sqz_recipe_check_model); biases for the compensation; the note. */
static sqz_status prune_check_model(const sqz_stage *s, const sqz_model *m, int64_t *n_layers, bool have_windows) {
    (void)n_layers;
    (void)have_windows;
    return check_model(s->args, s->spec, m);
}

/* An output with one set of layer dims (an HF config.json): the widths this stage leaves agree
 * across layers, heads x head_dim stays hidden_size where the family's HF config has no
 * head_dim of its own (BERT), and hidden_size a multiple of the heads (transformers' LlamaConfig
 * checks it). Decided from the counts alone, before any work. */
static sqz_status prune_check_uniform(const sqz_stage *s, const sqz_model *m) {
    const sqz__prune_opts *a = s->args;
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    /* the families whose llama.cpp loader sizes every layer alike have no per-layer GGUF either */
    const char *holder = fi && fi->gguf_uniform
                             ? "neither a plain HF config.json nor llama.cpp's loader for this family can hold"
                             : "a plain HF config.json cannot hold";
    const char *out = fi && fi->gguf_uniform ? "" : " or write GGUF (--to gguf: per-layer arrays)";
    SQZ_RETURN_IF(a->params > 0, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'params=%g' gives every layer its own widths, which %s: prune "
                  "heads=R:uniform / ffn=R%s", s->spec, a->params, holder, out);
    const sqz_layer_dims *ld = &m->layers[0];
    int64_t heads = ld->n_heads, kept;
    int shapes = 1;
    if (a->heads > 0) SQZ_TRY(sqz_prune_heads_shapes(ld->n_heads, ld->n_kv_heads, to_remove(a->heads, ld->n_heads),
                                                     &kept, &shapes));
    SQZ_RETURN_IF(a->heads > 0 && shapes > 1 && !a->uniform, SQZ_ERR_INVALID_ARG,
                  "--prune '%s': part 'heads=%g' keeps %" PRId64 " of %" PRId64 " heads in %d possible splits over %"
                  PRId64 " KV groups, each layer's scores choosing its own, which %s: add ':uniform' "
                  "(every layer the same split)%s", s->spec, a->heads, kept, ld->n_heads, shapes, ld->n_kv_heads, holder,
                  out);
    if (a->heads > 0) heads = kept;
    const int64_t d = m->hp.d_model - (a->channels > 0 ? sqz__prune_channels_remove(a, m->hp.d_model) : 0);
    SQZ_RETURN_IF(fi && !fi->hf_head_dim && heads * m->hp.head_dim != d, SQZ_ERR_INVALID_ARG,
                  "--prune '%s' leaves %" PRId64 " heads of %" PRId64 " in hidden_size %" PRId64 ", which %s's HF "
                  "config cannot state (it derives head_dim from hidden_size / heads): write GGUF (--to gguf)",
                  s->spec, heads, m->hp.head_dim, d, sqz_family_name(m->hp.family));
    SQZ_RETURN_IF(d % heads, SQZ_ERR_INVALID_ARG,
                  "--prune '%s' leaves %" PRId64 " heads and hidden_size %" PRId64 ", not a multiple of them, which "
                  "transformers' config refuses: write GGUF (--to gguf) or choose another ratio", s->spec, heads, d);
    return SQZ_OK;
}

static sqz_status prune_model_step(sqz_pass_ctx *c, const void *args) {
    const sqz__prune_opts *a = args;
    prune_state *ps = c->state;
    sqz_model *m = c->m;
    SQZ_TRY(check_model(a, c->stage->spec, m));
    const sqz__prune_env env = {c->w, c->session_opts, c->o->progress, c->o->progress_user, c->stage->spec};
    const int64_t d0 = m->hp.d_model;
    if (a->channels > 0) SQZ_TRY(sqz__prune_channels(m, a, &env));
    const sqz_prune_comp comp = sqz__prune_comp_of(a);
    if (a->params > 0) SQZ_TRY(sqz__prune_plan(m, a, &env, ps->plan_heads, ps->plan_ffn));
    if (a->uniform)
        SQZ_TRY(sqz__prune_uniform_shape(m, a, &env, to_remove(a->heads, m->layers[0].n_heads), &ps->uni_kv,
                                         &ps->uni_per));
    if (comp == SQZ_PRUNE_COMP_BIAS || comp == SQZ_PRUNE_COMP_BOTH) {
        int64_t added; /* fixed before the calibration session is made (pipeline.c: a fresh one) */
        SQZ_TRY(sqz_prune_add_biases(m, a->heads > 0 || a->params > 0, a->ffn > 0 || a->params > 0, &added));
    }
    int64_t h0, n0;
    totals(m, &h0, &n0);
    ps->h0 = h0, ps->n0 = n0, ps->d0 = d0;
    ps->e0 = total_experts(m);
    write_note(c, a, h0, n0, d0);
    if (!c->rep) return SQZ_OK;
    if (!c->rep->prune) c->rep->prune = sqz__calloc(1, sizeof *c->rep->prune);
    SQZ_RETURN_IF(!c->rep->prune, SQZ_ERR_NOMEM, "--prune '%s': out of memory for the report", c->stage->spec);
    return sqz__prune_record_open(c->rep->prune, m, (sqz_prune_score)a->score, comp, c->stage->spec, d0);
}

static const sqz_qstats *input_of(const sqz_calib_block *stats, sqz_role role) {
    const sqz_calib_input *in = sqz_calib_block_input(stats, role);
    return in ? &in->st : NULL;
}

/* The heads layer ld keeps; uniform: in the shape the model step chose for every layer. */
static sqz_status choose_heads(const prune_state *ps, sqz_layer_dims ld, const double *sc, int64_t remove,
                               int64_t *keep, int64_t *n_keep) {
    if (!ps->uni_kv) return sqz_prune_choose_heads(ld.n_heads, ld.n_kv_heads, sc, remove, keep, n_keep);
    *n_keep = ps->uni_kv * ps->uni_per;
    return sqz_prune_choose_heads_shape(ld.n_heads, ld.n_kv_heads, sc, ps->uni_kv, ps->uni_per, keep);
}

static sqz_status prune_heads(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const sqz__prune_opts *a) {
    const prune_state *ps = c->state;
    const sqz_layer_dims ld = c->m->layers[layer];
    const sqz_qstats *st = input_of(stats, SQZ_ROLE_ATTN_OUT);
    double *sc = sqz__malloc((size_t)ld.n_heads * sizeof(double));
    int64_t *keep = sqz__malloc((size_t)ld.n_heads * sizeof(int64_t)), n_keep = 0;
    sqz_status rc = sc && keep ? SQZ_OK : SQZ_ERR_NOMEM;
    if (rc == SQZ_OK) rc = sqz_prune_scores(c->m, layer, SQZ_STRUCT_HEAD, (sqz_prune_score)a->score, st, a->damp, sc);
    const int64_t remove = a->params > 0 ? ps->plan_heads[layer] : to_remove(a->heads, ld.n_heads);
    if (rc == SQZ_OK) rc = choose_heads(ps, ld, sc, remove, keep, &n_keep);
    if (rc == SQZ_OK) rc = sqz_prune_apply(c->m, layer, SQZ_STRUCT_HEAD, keep, n_keep, sqz__prune_comp_of(a), st, a->damp);
    if (rc == SQZ_OK && c->rep) sqz__prune_record_heads(c->rep->prune, c->m, layer, sc, keep, n_keep);
    free(sc);
    free(keep);
    return rc;
}

static sqz_status prune_ffn(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const sqz__prune_opts *a) {
    const prune_state *ps = c->state;
    const int64_t n = c->m->layers[layer].d_ff;
    const int64_t remove = ffn_remove(a, n, a->params > 0 ? ps->plan_ffn[layer] : to_remove(a->ffn, n));
    if (remove == 0) return SQZ_OK;
    const sqz_qstats *st = input_of(stats, SQZ_ROLE_FFN_DOWN);
    double *sc = sqz__malloc((size_t)n * sizeof(double));
    int64_t *keep = sqz__malloc((size_t)n * sizeof(int64_t));
    sqz_status rc = sc && keep ? SQZ_OK : SQZ_ERR_NOMEM;
    if (rc == SQZ_OK) rc = sqz_prune_scores(c->m, layer, SQZ_STRUCT_NEURON, (sqz_prune_score)a->score, st, a->damp, sc);
    if (rc == SQZ_OK) sqz_prune_choose_top(n, sc, remove, keep);
    if (rc == SQZ_OK) rc = sqz_prune_apply(c->m, layer, SQZ_STRUCT_NEURON, keep, n - remove, sqz__prune_comp_of(a), st, a->damp);
    if (rc == SQZ_OK && c->rep) sqz__prune_record_ffn(c->rep->prune, c->m, layer, sc, n, keep, n - remove);
    free(sc);
    free(keep);
    return rc;
}

/* The layer's experts scored and the lowest removed, the router's rows with them. */
static sqz_status prune_experts(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats,
                                const sqz__prune_opts *a) {
    const int64_t n = c->m->layers[layer].n_expert, remove = to_remove(a->experts, n);
    if (remove == 0) return SQZ_OK;
    double *sc = sqz__malloc((size_t)n * sizeof(double));
    int64_t *keep = sqz__malloc((size_t)n * sizeof(int64_t));
    sqz_status rc = sc && keep ? SQZ_OK : SQZ_ERR_NOMEM;
    if (rc == SQZ_OK) rc = sqz__prune_expert_scores(stats, layer, n, (sqz__expert_score)a->expert_score, sc);
    if (rc == SQZ_OK) sqz_prune_choose_top(n, sc, remove, keep);
    if (rc == SQZ_OK) rc = sqz_model_keep_experts(c->m, layer, keep, n - remove);
    free(sc);
    free(keep);
    return rc;
}

static sqz_status prune_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args) {
    const sqz__prune_opts *a = args;
    const prune_state *ps = c->state;
    if (a->experts > 0) SQZ_TRY(prune_experts(c, layer, stats, a));
    if (a->heads > 0 || (a->params > 0 && ps->plan_heads[layer] > 0)) SQZ_TRY(prune_heads(c, layer, stats, a));
    if (a->ffn > 0 || a->params > 0) SQZ_TRY(prune_ffn(c, layer, stats, a));
    write_note(c, a, ps->h0, ps->n0, ps->d0);
    return SQZ_OK;
}

const sqz_pass sqz__pass_prune = {
    .name = "prune", .metavar = "SPEC",
    .summary = "remove a fraction of every layer's attention heads / FFN neurons, scored and compensated from "
               "calibration statistics (docs/pruning.md)",
    .examples = "ffn=0.3 heads=0.25:ffn=0.25:obs ffn=0.3:flap:none ffn=0.2:wanda:lsq heads=0.34:uniform "
                "experts=0.25 experts=0.5:frequency",
    .opts = prune_opts, .n_opts = N_ROWS, .args_size = sizeof(sqz__prune_opts), .state_size = sizeof(prune_state),
    .reshapes = true, .changes_widths = true, .check = prune_check, .check_model = prune_check_model,
    .check_uniform = prune_check_uniform,
    .needs = prune_needs, .model_step = prune_model_step, .run_block = prune_block,
};
