/*
 * eval/perplexity.c - perplexity with llama.cpp's protocol (tools/perplexity, perplexity()),
 * and with a base the KL-divergence statistics of its kl_divergence() (mean KLD, percentiles,
 * same-top fraction, RMS of the change in the probability of the next token).
 */
#include <math.h>
#include <stdlib.h>

#include "eval/eval_internal.h"
#include "sqz/family.h"

sqz_eval_opts sqz_eval_default_opts(void) {
    sqz_eval_opts o;
    memset(&o, 0, sizeof o);
    o.ctx = 512;
    o.bos = -1;
    o.add_bos = -1;
    return o;
}

int64_t sqz_eval_default_ctx(const sqz_model *m) {
    const int64_t dflt = sqz_family_get(m->hp.family)->eval_ctx, trained = m->hp.ctx_len;
    return trained > 0 && trained < dflt ? trained : dflt;
}

void sqz_eval_result_free(sqz_eval_result *r) {
    if (!r) return;
    free(r->kld_values);
    memset(r, 0, sizeof *r);
}

/* Running sums over scored positions. */
typedef struct acc {
    double nll, nll2, nll_b, nll_b2, kld, kld2, dp2, max_dp;
    int64_t count, same_top;
} acc;

typedef struct run {
    sqz_session *model, *base;
    const sqz_eval_opts *o;
    sqz__logits_reader rd;
    bool have_rd;
    sqz__logits_writer *wr;
    int64_t vocab, ctx, first, n_score;
    float *lm, *lb;   /* (ctx - first) x vocab logits of the model and the base */
    int32_t *chunk;
    acc a;
    float *kld_values;
} run;

static sqz_status open_base_logits(run *R, const int32_t *tokens, int64_t n_chunks, int add_bos, int32_t bos) {
    const char *path = R->o->base_logits;
    SQZ_TRY(sqz__logits_reader_open(path, &R->rd));
    R->have_rd = true;
    const sqz__logits_header *h = &R->rd.h;
    SQZ_RETURN_IF((int64_t)h->n_vocab != R->vocab, SQZ_ERR_INVALID_ARG,
                  "%s: base logits over %u tokens, the model's vocabulary has %lld", path, h->n_vocab,
                  (long long)R->vocab);
    SQZ_RETURN_IF((int64_t)h->ctx != R->ctx, SQZ_ERR_INVALID_ARG, "%s: base logits were saved with ctx %u, not %lld",
                  path, h->ctx, (long long)R->ctx);
    SQZ_RETURN_IF((int64_t)h->n_chunks < n_chunks, SQZ_ERR_INVALID_ARG,
                  "%s: base logits cover %u chunks, this evaluation needs %lld (use --chunks)", path, h->n_chunks,
                  (long long)n_chunks);
    /* llama.cpp's files do not record BOS: llama-perplexity applies the model's setting, as here */
    SQZ_RETURN_IF(!R->rd.llama && ((int)h->add_bos != add_bos || (add_bos && h->bos != bos)), SQZ_ERR_INVALID_ARG,
                  "%s: base logits were saved with another BOS setting", path);
    for (int64_t i = 0; i < n_chunks * R->ctx; i++) {
        SQZ_RETURN_IF((int32_t)sqz__rd_u32(R->rd.tokens + 4 * i) != tokens[i], SQZ_ERR_INVALID_ARG,
                      "%s: base logits were saved for other text (token %lld differs: %d vs %d)", path, (long long)i,
                      (int32_t)sqz__rd_u32(R->rd.tokens + 4 * i), tokens[i]);
    }
    return SQZ_OK;
}

/* Scores one chunk whose model logits (and live base logits) are in R->lm / R->lb. */
static sqz_status score_chunk(run *R, const int32_t *tokens, int64_t c) {
    int64_t V = R->vocab;
    bool with_base = R->base || R->have_rd;
    for (int64_t j = 0; j < R->n_score; j++) {
        const float *lm = R->lm + j * V;
        int32_t target = tokens[c * R->ctx + R->first + j + 1];
        sqz__lsm sm = sqz__log_softmax(lm, V);
        double nll = sm.max + sm.lse - (double)lm[target];
        R->a.nll += nll;
        R->a.nll2 += nll * nll;
        if (R->wr) SQZ_TRY(sqz__logits_writer_row(R->wr, R->base ? R->lb + j * V : lm, target));
        if (!with_base) continue;
        double nll_b, kld;
        int32_t top_b;
        if (R->base) {
            const float *lb = R->lb + j * V;
            sqz__lsm sb = sqz__log_softmax(lb, V);
            nll_b = sb.max + sb.lse - (double)lb[target];
            kld = sqz__kld_rows(lb, &sb, lm, &sm, V);
            top_b = sb.argmax;
        } else {
            sqz__base_row b = sqz__logits_reader_row(&R->rd, (uint64_t)(c * R->n_score + j));
            nll_b = b.nll;
            kld = sqz__kld_stored(&b, (uint32_t)V, lm, &sm);
            top_b = b.argmax;
        }
        double dp = exp(-nll) - exp(-nll_b);
        R->a.nll_b += nll_b;
        R->a.nll_b2 += nll_b * nll_b;
        R->a.kld += kld;
        R->a.kld2 += kld * kld;
        R->a.dp2 += dp * dp;
        if (fabs(dp) > R->a.max_dp) R->a.max_dp = fabs(dp);
        R->a.same_top += sm.argmax == top_b;
        R->kld_values[R->a.count] = (float)kld;
        R->a.count++;
    }
    if (!with_base) R->a.count += R->n_score;
    return SQZ_OK;
}

static void mean_err(double sum, double sum2, int64_t n, double *mean, double *err) {
    *mean = sum / (double)n;
    double var = sum2 / (double)n - *mean * *mean;
    *err = var > 0 && n > 1 ? sqrt(var / (double)(n - 1)) : 0;
}

static sqz_status run_chunks(run *R, const int32_t *tokens, int64_t n_chunks, int add_bos, int32_t bos) {
    for (int64_t c = 0; c < n_chunks; c++) {
        memcpy(R->chunk, tokens + c * R->ctx, (size_t)R->ctx * sizeof *R->chunk);
        if (add_bos) R->chunk[0] = bos;
        SQZ_TRY(sqz_forward(R->model, R->chunk, R->ctx, 0, R->first, R->lm));
        if (R->base) SQZ_TRY(sqz_forward(R->base, R->chunk, R->ctx, 0, R->first, R->lb));
        SQZ_TRY(score_chunk(R, tokens, c));
        if (R->o->progress) R->o->progress(R->o->progress_user, (c + 1) * R->ctx, n_chunks * R->ctx);
    }
    return SQZ_OK;
}

/* True if [s, e) overlaps one of the non-empty excluded spans. */
static bool excluded(const sqz_eval_opts *o, int64_t s, int64_t e) {
    for (int64_t i = 0; i < o->n_exclude; i++) {
        const int64_t a = o->exclude[i][0], b = o->exclude[i][1];
        if (a < b && a < e && s < b) return true;
    }
    return false;
}

/* The chunks to evaluate, back to back in *sel: without spans the first n_chunks chunks of the
 * text in place (*sel = tokens, *owned NULL); with spans those of the text's chunks that overlap
 * none, copied into *owned (malloc'd; the caller frees it). */
static sqz_status select_chunks(const int32_t *tokens, int64_t n_tokens, const sqz_eval_opts *o, const int32_t **sel,
                                int32_t **owned, int64_t *n_chunks, int64_t *n_excluded) {
    const int64_t ctx = o->ctx, n_grid = n_tokens / ctx;
    *sel = tokens;
    *owned = NULL;
    *n_excluded = 0;
    if (o->n_exclude == 0) {
        *n_chunks = o->max_chunks > 0 && o->max_chunks < n_grid ? o->max_chunks : n_grid;
        return SQZ_OK;
    }
    SQZ_RETURN_IF(o->n_exclude < 0 || !o->exclude, SQZ_ERR_INVALID_ARG, "eval: %lld excluded spans at %p",
                  (long long)o->n_exclude, (const void *)o->exclude);
    for (int64_t i = 0; i < o->n_exclude; i++)
        SQZ_RETURN_IF(o->exclude[i][0] < 0 || o->exclude[i][1] < o->exclude[i][0], SQZ_ERR_INVALID_ARG,
                      "eval: excluded span %lld is [%lld, %lld): not a range of token positions", (long long)i,
                      (long long)o->exclude[i][0], (long long)o->exclude[i][1]);
    int32_t *buf = sqz__malloc((size_t)(n_grid * ctx) * sizeof *buf);
    if (!buf) return SQZ_ERR_NOMEM;
    int64_t k = 0;
    for (int64_t c = 0; c < n_grid && (o->max_chunks <= 0 || k < o->max_chunks); c++) {
        if (excluded(o, c * ctx, (c + 1) * ctx)) {
            (*n_excluded)++;
            continue;
        }
        memcpy(buf + k * ctx, tokens + c * ctx, (size_t)ctx * sizeof *buf);
        k++;
    }
    if (k == 0) {
        free(buf);
        return SQZ_ERROR(SQZ_ERR_INVALID_ARG,
                         "eval: every one of the %lld chunks of %lld tokens overlaps one of the %lld excluded spans: "
                         "no held-out text is left (a longer text, or a smaller ctx)",
                         (long long)n_grid, (long long)ctx, (long long)o->n_exclude);
    }
    *sel = buf;
    *owned = buf;
    *n_chunks = k;
    return SQZ_OK;
}

sqz_status sqz_eval_perplexity(sqz_session *model, const int32_t *tokens, int64_t n_tokens, const sqz_eval_opts *opts,
                               sqz_eval_result *r) {
    memset(r, 0, sizeof *r);
    sqz_eval_opts o = opts ? *opts : sqz_eval_default_opts();
    const sqz_model *m = sqz_session_model(model);
    SQZ_RETURN_IF(!sqz_family_get(m->hp.family)->lm_head, SQZ_ERR_ARCH,
                  "eval: perplexity needs a decoder; %s is an encoder (compare embeddings with a base instead)",
                  m->source_path ? m->source_path : "the model");
    SQZ_RETURN_IF(o.ctx < 4 || o.ctx > sqz_session_max_tokens(model) ||
                      (o.base && o.ctx > sqz_session_max_tokens(o.base)), SQZ_ERR_INVALID_ARG,
                  "eval: ctx %lld outside [4, %lld]", (long long)o.ctx, (long long)sqz_session_max_tokens(model));
    SQZ_RETURN_IF(n_tokens < 2 * o.ctx, SQZ_ERR_INVALID_ARG,
                  "eval: the text has %lld tokens; a context of %lld needs at least %lld (as llama.cpp)",
                  (long long)n_tokens, (long long)o.ctx, (long long)(2 * o.ctx));
    SQZ_RETURN_IF(o.base && o.base_logits, SQZ_ERR_INVALID_ARG, "eval: give a base model or base logits, not both");
    int64_t vocab = m->hp.vocab_size;
    if (o.base) {
        const sqz_model *b = sqz_session_model(o.base);
        SQZ_RETURN_IF(!sqz_family_get(b->hp.family)->lm_head || b->hp.vocab_size != vocab, SQZ_ERR_INVALID_ARG,
                      "eval: the base has a vocabulary of %lld, the model %lld", (long long)b->hp.vocab_size,
                      (long long)vocab);
    }
    int add_bos = o.add_bos >= 0 ? (o.add_bos != 0) : m->vocab.add_bos;
    int32_t bos = o.bos >= 0 ? o.bos : m->vocab.bos;
    SQZ_RETURN_IF(add_bos && (bos < 0 || bos >= vocab), SQZ_ERR_INVALID_ARG, "eval: no valid BOS id (%d)", bos);
    const int32_t *sel = NULL;
    int32_t *owned = NULL;
    int64_t n_chunks = 0, n_excluded = 0;
    SQZ_TRY(select_chunks(tokens, n_tokens, &o, &sel, &owned, &n_chunks, &n_excluded));

    run R;
    memset(&R, 0, sizeof R);
    R.model = model;
    R.base = o.base;
    R.o = &o;
    R.vocab = vocab;
    R.ctx = o.ctx;
    R.first = o.ctx / 2;
    R.n_score = o.ctx - 1 - R.first;
    size_t rows = (size_t)(o.ctx - R.first), bytes;
    sqz_status st = SQZ_OK;
    if (!sqz__mul_size(rows * (size_t)vocab, sizeof(float), &bytes)) {
        free(owned);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "eval: too large");
    }
    R.lm = sqz__malloc(bytes);
    R.lb = o.base ? sqz__malloc(bytes) : NULL;
    R.chunk = sqz__malloc((size_t)o.ctx * sizeof *R.chunk);
    R.kld_values = sqz__malloc((size_t)(n_chunks * R.n_score) * sizeof(float));
    if (!R.lm || (o.base && !R.lb) || !R.chunk || !R.kld_values) st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK && o.base_logits) st = open_base_logits(&R, sel, n_chunks, add_bos, bos);
    if (st == SQZ_OK && o.save_base) {
        sqz__logits_header h = {(uint32_t)vocab, (uint32_t)o.ctx, (uint32_t)n_chunks, (uint32_t)R.first,
                                (uint32_t)add_bos, bos, (uint64_t)(n_chunks * o.ctx)};
        st = sqz__logits_writer_open(o.save_base, &h, sel, o.save_base_scratch, &R.wr);
    }
    double t0 = sqz_now_seconds();
    if (st == SQZ_OK) st = run_chunks(&R, sel, n_chunks, add_bos, bos);
    if (R.wr) {
        sqz_status ws = sqz__logits_writer_close(R.wr, st == SQZ_OK);
        if (st == SQZ_OK) st = ws;
    }
    if (st == SQZ_OK) {
        int64_t n = R.a.count;
        r->seconds = sqz_now_seconds() - t0;
        r->ctx = o.ctx;
        r->activations = sqz_session_activations(model);
        r->n_chunks = n_chunks;
        r->n_tokens = n_tokens;
        r->n_excluded = n_excluded;
        r->tokens_scored = n;
        r->tokens_per_s = r->seconds > 0 ? (double)(n_chunks * o.ctx) / r->seconds : 0;
        double err;
        mean_err(R.a.nll, R.a.nll2, n, &r->nll_mean, &err);
        r->ppl = exp(r->nll_mean);
        r->ppl_stderr = err * r->ppl;
        if (o.base || o.base_logits) {
            double nb;
            r->has_base = true;
            mean_err(R.a.nll_b, R.a.nll_b2, n, &nb, &err);
            r->ppl_base = exp(nb);
            r->ppl_base_stderr = err * r->ppl_base;
            r->delta_ppl = r->ppl - r->ppl_base;
            mean_err(R.a.kld, R.a.kld2, n, &r->kld_mean, &r->kld_stderr);
            r->kld_p99 = sqz__percentile(R.kld_values, n, 0.99);
            r->kld_p999 = sqz__percentile(R.kld_values, n, 0.999);
            r->kld_max = sqz__percentile(R.kld_values, n, 1.0);
            r->top1_agree = (double)R.a.same_top / (double)n;
            r->rms_dp = sqrt(R.a.dp2 / (double)n);
            r->max_dp = R.a.max_dp;
            r->kld_values = R.kld_values;
            R.kld_values = NULL;
        }
    }
    if (R.have_rd) sqz__logits_reader_close(&R.rd);
    free(R.lm);
    free(R.lb);
    free(R.chunk);
    free(R.kld_values);
    free(owned);
    return st;
}
