/*
 * edge/forward.c - one token through a llama-family decoder (sqz's runtime/llama.c, one
 * position at a time):
 *   h = RMSNorm(x) * attn_norm;  q, k, v = h W^T (+ b);  RoPE(q, k);  k, v into the cache
 *   x += Attention(q, K, V) Wo^T                          (causal, grouped-query)
 *   h = RMSNorm(x) * ffn_norm;   x += (silu(h Wg^T) * (h Wu^T)) Wd^T
 *   logits = RMSNorm(x) * output_norm . Wout^T
 * Norms accumulate in double and softmax / SiLU use the same exp as sqz, so that greedy
 * tokens match `sqz generate`; the matrix products read quantized weights in place
 * (edge/kernels.c), never expanded, and take their input in f32 or quantized as llama.cpp does
 * (--activations q8, edge/kernels_q8.c: once per input, q, k and v sharing theirs).
 */
#include <math.h>
#include <string.h>

#include "edge/edge_internal.h"

static void rmsnorm(float *y, const float *x, const float *w, float eps, uint32_t d) {
    double ss = 0;
    for (uint32_t i = 0; i < d; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
    for (uint32_t i = 0; i < d; i++) y[i] = w[i] * (x[i] * inv);
}

/* y = W x (+ b), x as the model's activations say: quantized once for the products that share it */
static void linear(const sqze_w *w, const sqze_w *b, sqze_xin *x, float *y) {
    sqze__matvec_x(w, x, y);
    if (b && b->data) {
        const float *bias = (const float *)b->data;
        for (uint32_t i = 0; i < w->rows; i++) y[i] += bias[i];
    }
}

/* HF: inv_freq = 1 / theta ** (arange(0, hd, 2) / hd), in float32, as kernels/cpu/fwd_ops.c */
static void rope_table(sqze_model *m, uint32_t pos) {
    uint32_t hd = m->hp.head_dim, half = hd / 2;
    for (uint32_t i = 0; i < half; i++) {
        float inv = 1.0f / powf(m->hp.rope_theta, (float)(2 * i) / (float)hd);
        float a = (float)pos * inv;
        m->rope_cos[i] = cosf(a);
        m->rope_sin[i] = sinf(a);
    }
}

static void rope(const sqze_model *m, float *v, uint32_t heads) {
    uint32_t hd = m->hp.head_dim, half = hd / 2;
    const float *cs = m->rope_cos, *sn = m->rope_sin;
    for (uint32_t h = 0; h < heads; h++, v += hd) {
        if (m->hp.rope_layout == 1) { /* interleaved pairs (2i, 2i+1) */
            for (uint32_t i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cs[i] - b * sn[i];
                v[2 * i + 1] = a * sn[i] + b * cs[i];
            }
        } else { /* halves (i, i + hd/2) */
            for (uint32_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * cs[i] - b * sn[i];
                v[i + half] = b * cs[i] + a * sn[i];
            }
        }
    }
}

/* softmax of row[0..len) scaled, as kernels/cpu/fwd_vec.c (max and sum in 8 lanes) */
static void softmax(float *row, uint32_t len, float scale) {
    float lm[8], ls[8];
    for (int k = 0; k < 8; k++) {
        lm[k] = -INFINITY;
        ls[k] = 0.0f;
    }
    uint32_t i = 0, n8 = len & ~7u;
    for (; i < n8; i += 8) {
        for (int k = 0; k < 8; k++) {
            float v = row[i + k] * scale;
            row[i + k] = v;
            lm[k] = v > lm[k] ? v : lm[k];
        }
    }
    float mx = -INFINITY;
    for (; i < len; i++) {
        row[i] *= scale;
        mx = row[i] > mx ? row[i] : mx;
    }
    for (int k = 0; k < 8; k++) mx = lm[k] > mx ? lm[k] : mx;
    for (i = 0; i < len; i++) row[i] = sqze__expf(row[i] - mx);
    for (i = 0; i < n8; i += 8)
        for (int k = 0; k < 8; k++) ls[k] += row[i + k];
    float sum = 0.0f;
    for (; i < len; i++) sum += row[i];
    for (int k = 0; k < 8; k++) sum += ls[k];
    float inv = 1.0f / sum;
    for (i = 0; i < len; i++) row[i] *= inv;
}

static void attention(sqze_model *m, const sqze_layer *L, uint32_t pos) {
    uint32_t hd = m->hp.head_dim, kvd = L->kv_heads * hd, group = L->heads / L->kv_heads;
    float scale = 1.0f / sqrtf((float)hd);
    for (uint32_t h = 0; h < L->heads; h++) {
        const float *q = m->q + (size_t)h * hd;
        uint32_t g = h / group;
        for (uint32_t t = 0; t <= pos; t++) {
            const float *k = L->kcache + (size_t)t * kvd + (size_t)g * hd;
            m->scores[t] = sqze__dot(q, k, hd);
        }
        softmax(m->scores, pos + 1, scale);
        float *o = m->att + (size_t)h * hd;
        memset(o, 0, hd * sizeof *o);
        for (uint32_t t = 0; t <= pos; t++) {
            const float *v = L->vcache + (size_t)t * kvd + (size_t)g * hd;
            float p = m->scores[t];
            for (uint32_t i = 0; i < hd; i++) o[i] += p * v[i];
        }
    }
}

const float *sqze_forward(sqze_model *m, int32_t token, uint32_t pos) {
    const sqze_hparams *hp = &m->hp;
    uint32_t d = hp->d_model;
    if (token < 0 || (uint32_t)token >= hp->vocab_size || pos >= m->ctx) return NULL;
    sqze__row_f32(m->tok_embd.data, m->tok_embd.dtype, (uint32_t)token, d, m->x);
    rope_table(m, pos);
    sqze_xin in;
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        const sqze_layer *L = &m->layers[l];
        uint32_t kvd = L->kv_heads * hp->head_dim;
        float *kc = L->kcache + (size_t)pos * kvd, *vc = L->vcache + (size_t)pos * kvd;
        rmsnorm(m->xb, m->x, (const float *)L->attn_norm.data, hp->norm_eps, d);
        sqze__xin_init(&in, m, m->xb, d);
        linear(&L->wq, &L->bq, &in, m->q);
        linear(&L->wk, &L->bk, &in, kc);
        linear(&L->wv, &L->bv, &in, vc);
        rope(m, m->q, L->heads);
        rope(m, kc, L->kv_heads);
        attention(m, L, pos);
        sqze__xin_init(&in, m, m->att, L->heads * hp->head_dim);
        linear(&L->wo, NULL, &in, m->xb2);
        for (uint32_t i = 0; i < d; i++) m->x[i] += m->xb2[i];
        rmsnorm(m->xb, m->x, (const float *)L->ffn_norm.data, hp->norm_eps, d);
        sqze__xin_init(&in, m, m->xb, d);
        linear(&L->gate, NULL, &in, m->hb);
        linear(&L->up, NULL, &in, m->hb2);
        for (uint32_t i = 0; i < L->d_ff; i++) {
            float g = m->hb[i];
            m->hb[i] = g / (1.0f + sqze__expf(-g)) * m->hb2[i];
        }
        sqze__xin_init(&in, m, m->hb, L->d_ff);
        linear(&L->down, NULL, &in, m->xb2);
        for (uint32_t i = 0; i < d; i++) m->x[i] += m->xb2[i];
    }
    rmsnorm(m->xb, m->x, (const float *)m->out_norm.data, hp->norm_eps, d);
    sqze__xin_init(&in, m, m->xb, d);
    linear(&m->output, NULL, &in, m->logits);
    return m->logits;
}
