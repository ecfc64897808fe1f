/*
 * eval/embeddings.c - encoders: cosine similarity of sentence embeddings, model vs base.
 */
#include <math.h>
#include <stdlib.h>

#include "eval/eval_internal.h"
#include "sqz/family.h"

sqz_status sqz_eval_embeddings(sqz_session *model, sqz_session *base, const int32_t *const *seqs,
                               const int64_t *lens, int64_t n, sqz_eval_result *r) {
    memset(r, 0, sizeof *r);
    const sqz_model *mm = sqz_session_model(model), *mb = sqz_session_model(base);
    SQZ_RETURN_IF(sqz_family_get(mm->hp.family)->lm_head || sqz_family_get(mb->hp.family)->lm_head, SQZ_ERR_ARCH,
                  "eval: embedding similarity needs two encoders");
    SQZ_RETURN_IF(mm->hp.d_model != mb->hp.d_model, SQZ_ERR_INVALID_ARG,
                  "eval: embeddings of %lld and %lld dimensions cannot be compared", (long long)mm->hp.d_model,
                  (long long)mb->hp.d_model);
    int64_t d = mm->hp.d_model;
    float *em = sqz__malloc((size_t)d * sizeof(float)), *eb = sqz__malloc((size_t)d * sizeof(float));
    float *cos = sqz__malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    sqz_status st = em && eb && cos ? SQZ_OK : SQZ_ERR_NOMEM;
    const double t0 = sqz_now_seconds();
    int64_t k = 0, toks = 0;
    double sum = 0;
    for (int64_t i = 0; st == SQZ_OK && i < n; i++) {
        if (lens[i] <= 0) continue;
        /* Longer sequences are cut to the shorter window of the two sessions. */
        int64_t len = lens[i];
        if (len > sqz_session_max_tokens(model)) len = sqz_session_max_tokens(model);
        if (len > sqz_session_max_tokens(base)) len = sqz_session_max_tokens(base);
        st = sqz_embed(model, seqs[i], NULL, len, true, em);
        if (st == SQZ_OK) st = sqz_embed(base, seqs[i], NULL, len, true, eb);
        if (st != SQZ_OK) break;
        double dot = 0, nm = 0, nb = 0;
        for (int64_t c = 0; c < d; c++) {
            dot += (double)em[c] * eb[c];
            nm += (double)em[c] * em[c];
            nb += (double)eb[c] * eb[c];
        }
        double cs = nm > 0 && nb > 0 ? dot / sqrt(nm * nb) : 0;
        cos[k++] = (float)cs;
        sum += cs;
        toks += len;
    }
    const double t1 = sqz_now_seconds();
    if (st == SQZ_OK && k == 0) st = SQZ_ERROR(SQZ_ERR_INVALID_ARG, "eval: no non-empty sentences to embed");
    if (st == SQZ_OK) {
        r->is_encoder = true;
        r->has_base = true;
        r->n_sentences = k;
        r->cos_mean = sum / (double)k;
        r->cos_p1 = sqz__percentile(cos, k, 0.01);
        r->cos_min = sqz__percentile(cos, k, 0.0);
        r->n_tokens = toks;
        r->seconds = t1 - t0;
        r->tokens_per_s = r->seconds > 0 ? (double)toks / r->seconds : 0;
    }
    free(em);
    free(eb);
    free(cos);
    return st;
}
