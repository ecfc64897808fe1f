/*
 * runtime/session.c - sessions: tensor tables, scratch, rotary tables, the key/value
 * cache, and the public forward entry points that chain embed -> blocks -> head.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "runtime/runtime_internal.h"

sqz_session_opts sqz_session_default_opts(void) {
    sqz_session_opts o = {0, 0, SQZ_WEIGHTS_CACHE, NULL, SQZ_ACTIVATIONS_F32, false};
    return o;
}

const sqz_tensor *sqz__st(const sqz_session *s, sqz_role role, int32_t layer, sqz_param param) {
    if (layer < 0) return s->glob[role][param];
    return s->lt[layer].t[role][param];
}

sqz_status sqz__hook(sqz_session *s, sqz_hook_point pt, int32_t layer, uint32_t roles, const float *x, int64_t n,
                     int64_t dim, int64_t pos) {
    return sqz__hook_dev(s, pt, layer, roles, x, NULL, n, dim, pos);
}

sqz_status sqz__hook_dev(sqz_session *s, sqz_hook_point pt, int32_t layer, uint32_t roles, const float *x,
                         const float *x_dev, int64_t n, int64_t dim, int64_t pos) {
    if (!s->hook) return SQZ_OK;
    sqz_hook_event e = {pt, layer, roles, x, n, dim, pos, x_dev, x_dev ? s->be : NULL, 0, NULL};
    return s->hook(s->hook_user, &e);
}

void sqz_session_set_hook(sqz_session *s, sqz_hook_fn fn, void *user) {
    s->hook = fn;
    s->hook_user = fn ? user : NULL;
}

const sqz_model *sqz_session_model(const sqz_session *s) { return s->m; }
int64_t sqz_session_max_tokens(const sqz_session *s) { return s->max_tokens; }
int sqz_session_threads(const sqz_session *s) { return s->pool ? sqz__pool_threads(s->pool) : 1; }
sqz_activations sqz_session_activations(const sqz_session *s) { return s->acts; }
int64_t sqz_session_bytes(const sqz_session *s) { return s->scratch_bytes + s->wcache_bytes + s->wres_bytes; }

void sqz_session_free(sqz_session *s) {
    if (!s) return;
    sqz__dev_unpin_all(s);
    sqz__resident_free(s);
    if (s->wcache) {
        for (int64_t i = 0; i < s->n_wcache; i++) free(s->wcache[i]);
        free(s->wcache);
    }
    free(s->lt);
    free(s->rope_cos);
    free(s->rope_sin);
    free(s->rope_cos_l);
    free(s->rope_sin_l);
    free(s->kcache);
    free(s->vcache);
    free(s->kv_off);
    free(s->kv_valid);
    free(s->h);
    free(s->q);
    free(s->att);
    free(s->ff_a);
    free(s->ff_b);
    free(s->scores);
    free(s->qg);
    free(s->panel);
    free(s->panel_out);
    free(s->xq);
    sqz__moe_free(s);
    sqz__pool_free(s->pool);
    sqz__dev_free(s);
    if (s->own_be) sqz_backend_free(s->be);
    free(s);
}

/* Allocates rows * cols floats, adding to the session's byte count; overflow-checked. */
static sqz_status alloc_f32(sqz_session *s, int64_t rows, int64_t cols, float **out) {
    size_t n, bytes;
    if (rows < 1) rows = 1;
    if (cols < 1) cols = 1;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)rows, (size_t)cols, &n) || !sqz__mul_size(n, sizeof(float), &bytes),
                  SQZ_ERR_NOMEM, "runtime: scratch of %lld x %lld floats overflows", (long long)rows, (long long)cols);
    *out = sqz__malloc(bytes);
    if (!*out) return SQZ_ERR_NOMEM;
    s->scratch_bytes += (int64_t)bytes;
    sqz__dev_pin(s, *out, bytes); /* a device session's products copy these rows across the bus */
    return SQZ_OK;
}

static sqz_status build_tables(sqz_session *s) {
    const sqz_model *m = s->m;
    s->lt = sqz__calloc((size_t)m->hp.n_layers, sizeof *s->lt);
    s->wcache = sqz__calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof *s->wcache);
    if (!s->lt || !s->wcache) return SQZ_ERR_NOMEM;
    s->n_wcache = m->n_tensors;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->role < 0 || t->role >= SQZ_ROLE_COUNT || (t->param != SQZ_PARAM_WEIGHT && t->param != SQZ_PARAM_BIAS))
            continue;
        if (t->layer < 0) s->glob[t->role][t->param] = t;
        else if (t->layer < m->hp.n_layers) s->lt[t->layer].t[t->role][t->param] = t;
    }
    s->classifier = s->glob[SQZ_ROLE_OUTPUT][SQZ_PARAM_WEIGHT];
    if (!s->classifier && s->fam->lm_head) s->classifier = s->glob[SQZ_ROLE_TOKEN_EMBD][SQZ_PARAM_WEIGHT];
    return SQZ_OK;
}

/* Largest in_features over every matrix (stream-mode panel width). */
static int64_t max_row_len(const sqz_model *m) {
    int64_t k = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (m->tensors[i].ndim >= 2 && sqz_tensor_row_len(&m->tensors[i]) > k) k = sqz_tensor_row_len(&m->tensors[i]);
    }
    return k;
}

/* The rotary tables: full-attention layers with the model's scaling (linear positions, llama 3's
 * divisors, longrope's short or long factors by the session's context as llama.cpp and transformers
 * choose them, its attention factor); sliding-window layers with their own base and no scaling
 * (Gemma 3's rope_local_base_freq). */
static sqz_status rope_setup(sqz_session *s) {
    const sqz_model *m = s->m;
    const sqz_hparams *hp = &m->hp;
    const int64_t T = s->max_tokens;
    s->rope_dim = hp->rope_dim > 0 ? hp->rope_dim : hp->head_dim;
    SQZ_RETURN_IF(s->rope_dim % 2 != 0 || s->rope_dim > hp->head_dim, SQZ_ERR_ARCH,
                  "%s: %lld rotated dimensions of a head of %lld", m->source_path, (long long)s->rope_dim,
                  (long long)hp->head_dim);
    sqz__rope_spec g = {.theta = hp->rope_theta, .dim = s->rope_dim, .mscale = hp->rope_attn_factor};
    if (hp->rope_scaling == SQZ_ROPE_SCALING_LINEAR) g.pos_scale = hp->rope_freq_scale;
    sqz_role div = SQZ_ROLE_ROPE_FREQS;
    if (hp->rope_scaling == SQZ_ROPE_SCALING_LONGROPE)
        div = hp->rope_ctx_orig > 0 && T > hp->rope_ctx_orig ? SQZ_ROLE_ROPE_FACTORS_LONG : SQZ_ROLE_ROPE_FACTORS_SHORT;
    SQZ_TRY(sqz__param(s, div, -1, SQZ_PARAM_WEIGHT, &g.divisors));
    SQZ_TRY(alloc_f32(s, T, s->rope_dim / 2, &s->rope_cos));
    SQZ_TRY(alloc_f32(s, T, s->rope_dim / 2, &s->rope_sin));
    sqz__rope_tables(&g, T, s->rope_cos, s->rope_sin);
    bool sliding = false;
    for (int64_t l = 0; l < hp->n_layers; l++) sliding = sliding || m->layers[l].window > 0;
    if (!sliding) return SQZ_OK;
    const sqz__rope_spec loc = {.theta = hp->rope_theta_local > 0 ? hp->rope_theta_local : hp->rope_theta,
                                .dim = s->rope_dim};
    SQZ_TRY(alloc_f32(s, T, s->rope_dim / 2, &s->rope_cos_l));
    SQZ_TRY(alloc_f32(s, T, s->rope_dim / 2, &s->rope_sin_l));
    sqz__rope_tables(&loc, T, s->rope_cos_l, s->rope_sin_l);
    return SQZ_OK;
}

static sqz_status setup(sqz_session *s, const sqz_session_opts *o) {
    const sqz_model *m = s->m;
    const sqz_hparams *hp = &m->hp;
    s->fam = sqz_family_get(hp->family);
    s->ops = sqz__family_ops_get(hp->family);
    SQZ_RETURN_IF(!s->fam || !s->ops, SQZ_ERR_ARCH, "%s: the runtime runs llama and BERT families, not family %d",
                  m->source_path, (int)hp->family);
    SQZ_TRY(sqz_model_validate(m));
    s->d = hp->d_model;
    s->hd = hp->head_dim;
    const bool rotary = s->fam->positions == SQZ_POS_ROTARY;
    if (rotary) {
        SQZ_RETURN_IF(hp->head_dim % 2 != 0, SQZ_ERR_ARCH, "%s: odd head_dim %lld cannot be rotated",
                      m->source_path, (long long)hp->head_dim);
        SQZ_RETURN_IF(hp->rope_layout != SQZ_ROPE_INTERLEAVED && hp->rope_layout != SQZ_ROPE_HALF, SQZ_ERR_ARCH,
                      "%s: llama model without a rotary layout", m->source_path);
        SQZ_RETURN_IF(!(hp->rope_theta > 0), SQZ_ERR_ARCH, "%s: rope_theta %g", m->source_path,
                      (double)hp->rope_theta);
    }
    int64_t T = o->max_tokens;
    if (T <= 0) T = hp->ctx_len > 0 && hp->ctx_len < 2048 ? hp->ctx_len : 2048;
    SQZ_RETURN_IF(T > (1 << 24), SQZ_ERR_INVALID_ARG, "runtime: max_tokens %lld is beyond the supported 16M",
                  (long long)T);
    if (s->fam->positions == SQZ_POS_ABSOLUTE) {
        /* Positions cannot go beyond the position embeddings. */
        const sqz_tensor *pe = sqz_model_get(m, SQZ_ROLE_POS_EMBD, -1, SQZ_PARAM_WEIGHT);
        if (pe && T > pe->shape[0]) T = pe->shape[0];
    }
    s->max_tokens = T;
    s->wmode = o->weights;

    SQZ_TRY(build_tables(s));
    SQZ_TRY(sqz__check_weights(s));
    if (!o->map_weights && sqz_backend_host_memory(s->be)) { /* copies in huge pages (resident.c) */
        s->wres = sqz__calloc((size_t)(s->n_wcache ? s->n_wcache : 1), sizeof *s->wres);
        if (!s->wres) return SQZ_ERR_NOMEM;
    }
    s->kv_off = sqz__calloc((size_t)hp->n_layers, sizeof *s->kv_off);
    s->kv_valid = sqz__calloc((size_t)hp->n_layers, sizeof *s->kv_valid);
    if (!s->kv_off || !s->kv_valid) return SQZ_ERR_NOMEM;
    int64_t kv_total = 0;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        int64_t q = ld->n_heads * s->hd, kv = ld->n_kv_heads * s->hd;
        if (q > s->max_q) s->max_q = q;
        if (kv > s->max_kv) s->max_kv = kv;
        if (ld->d_ff > s->max_ff) s->max_ff = ld->d_ff;
        if (ld->n_heads / ld->n_kv_heads > s->max_group) s->max_group = ld->n_heads / ld->n_kv_heads;
        s->kv_off[l] = kv_total;
        int64_t add;
        SQZ_RETURN_IF(!sqz__mul_i64(kv, T, &add) || add > INT64_MAX - kv_total, SQZ_ERR_NOMEM,
                      "runtime: key/value cache size overflows");
        kv_total += add;
    }
    s->max_k = max_row_len(m);
    /* sgemm takes int sizes. */
    SQZ_RETURN_IF(s->max_q > INT_MAX || s->max_ff > INT_MAX || s->max_k > INT_MAX || hp->vocab_size > INT_MAX,
                  SQZ_ERR_ARCH, "runtime: dimensions beyond the BLAS int range");
    SQZ_TRY(alloc_f32(s, kv_total, 1, &s->kcache));
    SQZ_TRY(alloc_f32(s, kv_total, 1, &s->vcache));
    SQZ_TRY(alloc_f32(s, T, s->d > s->max_q ? s->d : s->max_q, &s->h));
    SQZ_TRY(alloc_f32(s, T, s->max_q, &s->q));
    SQZ_TRY(alloc_f32(s, T, s->d > s->max_q ? s->d : s->max_q, &s->att)); /* also a mixture's output (d) */
    SQZ_TRY(alloc_f32(s, T, s->max_ff, &s->ff_a));
    SQZ_TRY(alloc_f32(s, T, s->max_ff, &s->ff_b));
    SQZ_TRY(sqz__moe_setup(s));
    int64_t qb = T < SQZ__QBLOCK ? T : SQZ__QBLOCK;
    SQZ_TRY(alloc_f32(s, s->max_group * qb, T, &s->scores));
    SQZ_TRY(alloc_f32(s, s->max_group * qb, s->hd, &s->qg));
    s->dot = sqz__qmm_dot(sqz__qmm_isa_best());
    if (s->wmode == SQZ_WEIGHTS_STREAM) {
        SQZ_TRY(alloc_f32(s, SQZ__PANEL_ROWS, s->max_k, &s->panel));
        SQZ_TRY(alloc_f32(s, T, SQZ__PANEL_ROWS, &s->panel_out));
    }
    if (rotary) SQZ_TRY(rope_setup(s));
    return sqz__pool_new(o->n_threads, &s->pool);
}

sqz_status sqz_session_new(const sqz_model *m, const sqz_session_opts *opts, sqz_session **out) {
    *out = NULL;
    SQZ_RETURN_IF(!m, SQZ_ERR_INVALID_ARG, "runtime: no model");
    sqz_session_opts o = opts ? *opts : sqz_session_default_opts();
    SQZ_RETURN_IF(o.weights != SQZ_WEIGHTS_CACHE && o.weights != SQZ_WEIGHTS_STREAM, SQZ_ERR_INVALID_ARG,
                  "runtime: unknown weight mode %d", (int)o.weights);
    sqz_session *s = sqz__calloc(1, sizeof *s);
    if (!s) return SQZ_ERR_NOMEM;
    s->m = m;
    sqz_status st;
    if (o.activations != SQZ_ACTIVATIONS_F32 && (o.activations != SQZ_ACTIVATIONS_Q8 ||
                                         (o.backend && strcmp(o.backend->ops->name, "cpu") != 0))) {
        free(s);
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "runtime: activations mode %d on backend '%s' (q8 runs on the CPU)",
                         (int)o.activations, o.backend ? o.backend->ops->name : "cpu");
    }
    s->acts = o.activations;
    if (o.backend) {
        s->be = o.backend;
        const bool dev = !sqz_backend_host_memory(s->be);
        if (dev && (!sqz_backend_supports(s->be, SQZ_OP_MATMUL, SQZ_DTYPE_F32) || !s->be->ops->alloc)) {
            free(s);
            return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "runtime: backend '%s' has no f32 matmul on its memory",
                             o.backend->ops->name);
        }
        if (dev && (st = sqz__dev_init(s)) != SQZ_OK) {
            free(s);
            return st;
        }
    } else {
        st = sqz_backend_cpu(o.n_threads, &s->be);
        if (st != SQZ_OK) { free(s); return st; }
        s->own_be = true;
    }
    st = setup(s, &o);
    if (st != SQZ_OK) {
        sqz_session_free(s);
        return st;
    }
    *out = s;
    return SQZ_OK;
}

/* ---- forward ---------------------------------------------------------------------------- */

static sqz_status check_window(const sqz_session *s, const int32_t *tokens, int64_t n, int64_t pos) {
    SQZ_RETURN_IF(n < 0 || pos < 0 || n > s->max_tokens || pos > s->max_tokens - n, SQZ_ERR_INVALID_ARG,
                  "runtime: window of %lld tokens at position %lld exceeds the session's %lld positions",
                  (long long)n, (long long)pos, (long long)s->max_tokens);
    SQZ_RETURN_IF(n > 0 && !tokens, SQZ_ERR_INVALID_ARG, "runtime: no tokens");
    for (int64_t i = 0; i < n; i++) {
        SQZ_RETURN_IF(tokens[i] < 0 || tokens[i] >= s->m->hp.vocab_size, SQZ_ERR_INVALID_ARG,
                      "runtime: token id %d at index %lld is outside the vocabulary [0, %lld)", tokens[i],
                      (long long)i, (long long)s->m->hp.vocab_size);
    }
    return SQZ_OK;
}

static sqz_status check_cache(const sqz_session *s, int32_t layer, int64_t pos) {
    SQZ_RETURN_IF(pos > s->kv_valid[layer], SQZ_ERR_INVALID_ARG,
                  "runtime: layer %d: position %lld continues a window whose cache holds only %lld positions",
                  layer, (long long)pos, (long long)s->kv_valid[layer]);
    return SQZ_OK;
}

sqz_status sqz_session_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, int64_t pos,
                             float *x) {
    SQZ_TRY(check_window(s, tokens, n, pos));
    return s->ops->embed(s, tokens, types, n, pos, x);
}

sqz_status sqz_session_block(sqz_session *s, int32_t layer, float *x, int64_t n, int64_t pos) {
    SQZ_RETURN_IF(layer < 0 || layer >= s->m->hp.n_layers, SQZ_ERR_INVALID_ARG, "runtime: no layer %d", layer);
    SQZ_RETURN_IF(n < 0 || pos < 0 || pos + n > s->max_tokens, SQZ_ERR_INVALID_ARG,
                  "runtime: window [%lld, %lld) exceeds the session's %lld positions", (long long)pos,
                  (long long)(pos + n), (long long)s->max_tokens);
    SQZ_TRY(check_cache(s, layer, pos));
    if (n == 0) return SQZ_OK;
    return s->ops->block(s, layer, x, n, pos);
}

sqz_status sqz_session_head(sqz_session *s, const float *x, int64_t n, int64_t logits_from, float *logits) {
    SQZ_RETURN_IF(!s->fam->lm_head, SQZ_ERR_ARCH, "%s: an encoder has no classifier head", s->m->source_path);
    SQZ_RETURN_IF(n < 0 || n > s->max_tokens || logits_from < 0 || logits_from > n, SQZ_ERR_INVALID_ARG,
                  "runtime: logits from %lld of %lld tokens", (long long)logits_from, (long long)n);
    return s->ops->head(s, x, n, logits_from, logits);
}

static sqz_status run_blocks(sqz_session *s, float *x, int64_t n, int64_t pos) {
    for (int32_t l = 0; l < (int32_t)s->m->hp.n_layers; l++) {
        SQZ_TRY(check_cache(s, l, pos));
        SQZ_TRY(s->ops->block(s, l, x, n, pos));
    }
    return SQZ_OK;
}

/* The residual stream of a whole window, (n, d_model). */
static sqz_status alloc_x(sqz_session *s, int64_t n, float **x) {
    size_t bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)(n > 0 ? n : 1), (size_t)s->d * sizeof(float), &bytes), SQZ_ERR_NOMEM,
                  "runtime: window too large");
    *x = sqz__malloc(bytes);
    return *x ? SQZ_OK : SQZ_ERR_NOMEM;
}

sqz_status sqz_forward(sqz_session *s, const int32_t *tokens, int64_t n, int64_t pos, int64_t logits_from,
                       float *logits) {
    SQZ_RETURN_IF(!s->fam->lm_head, SQZ_ERR_ARCH,
                  "%s: sqz_forward runs decoders; use sqz_encode or sqz_embed for an encoder", s->m->source_path);
    SQZ_TRY(check_window(s, tokens, n, pos));
    SQZ_RETURN_IF(logits_from < 0 || logits_from > n, SQZ_ERR_INVALID_ARG,
                  "runtime: logits_from %lld outside [0, %lld]", (long long)logits_from, (long long)n);
    if (n == 0) return SQZ_OK;
    float *x = NULL;
    SQZ_TRY(alloc_x(s, n, &x));
    sqz_status st = sqz_session_embed(s, tokens, NULL, n, pos, x);
    if (st == SQZ_OK) st = run_blocks(s, x, n, pos);
    if (st == SQZ_OK) st = s->ops->head(s, x, n, logits_from, logits);
    free(x);
    return st;
}

sqz_status sqz_encode(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, float *hidden) {
    SQZ_RETURN_IF(s->fam->lm_head, SQZ_ERR_ARCH, "%s: sqz_encode runs encoders", s->m->source_path);
    SQZ_RETURN_IF(n < 1, SQZ_ERR_INVALID_ARG, "runtime: empty sequence");
    SQZ_TRY(sqz_session_embed(s, tokens, types, n, 0, hidden));
    return run_blocks(s, hidden, n, 0);
}

sqz_status sqz_embed(sqz_session *s, const int32_t *tokens, const int32_t *types, int64_t n, bool normalize,
                     float *out) {
    float *x = NULL;
    SQZ_TRY(alloc_x(s, n, &x));
    sqz_status st = sqz_encode(s, tokens, types, n, x);
    if (st == SQZ_OK) {
        int64_t d = s->d;
        for (int64_t c = 0; c < d; c++) {
            double acc = 0;
            for (int64_t i = 0; i < n; i++) acc += x[i * d + c];
            out[c] = (float)(acc / (double)n);
        }
        if (normalize) {
            double ss = 0;
            for (int64_t c = 0; c < d; c++) ss += (double)out[c] * out[c];
            /* torch.nn.functional.normalize: x / max(||x||, 1e-12) */
            double nrm = sqrt(ss);
            float inv = (float)(1.0 / (nrm > 1e-12 ? nrm : 1e-12));
            for (int64_t c = 0; c < d; c++) out[c] *= inv;
        }
    }
    free(x);
    return st;
}

/* ---- cost model ---- */
double sqz_forward_flops(const sqz_model *m, int64_t n, int64_t n_logits) {
    const sqz_hparams *hp = &m->hp;
    const sqz_family_info *fi = sqz_family_get(hp->family);
    if (!fi) return 0;
    double f = 0, N = (double)n;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        double qd = (double)(ld->n_heads * hp->head_dim), kvd = (double)(ld->n_kv_heads * hp->head_dim);
        double d = (double)hp->d_model, ff = (double)ld->d_ff;
        double ffn = (fi->gated_ffn ? 3 : 2) * d * ff; /* gate, up, down or up, down */
        f += 2 * N * (d * qd + 2 * d * kvd + qd * d + ffn);
        /* QK^T and PV: causal keeps n(n+1)/2 pairs, bidirectional n^2 */
        double pairs = fi->causal ? N * (N + 1) / 2 : N * N;
        f += 2 * 2 * pairs * qd;
    }
    if (fi->lm_head) f += 2 * (double)n_logits * (double)hp->d_model * (double)hp->vocab_size;
    return f;
}
