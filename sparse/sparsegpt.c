/*
 * sparse/sparsegpt.c - SparseGPT (Frantar & Alistarh 2023, IST-DASLab sparsegpt.py) on the
 * GPTQ sweep of quant/gptq.c (sqz__gptq_masked): the same Hessian H = X^T X, relative damping,
 * upper Cholesky factor U of H^-1 and lazy block updates. Only the mask is SparseGPT's:
 *   unstructured  at the start of every block of `blocksize` columns, the fraction `ratio` of
 *                 the block's rows x columns with the lowest w^2 / U_jj^2 (one threshold over
 *                 the block, so rows may differ), from the error-updated weights;
 *   N:M           for each row, when the sweep reaches a group of M columns, the M - N lowest
 *                 w^2 / U_jj^2 of the group (from that row's updated weights).
 * Joint mode (a quant stage follows): the kept weights go to the quant stage's grid in the same
 * sweep and the zeros take the grid's exact zero code (sqz__gptq_masked).
 * GPTAQ (a->aq, or the joint quant stage's gptq:gptaq): the sweep's correction toward the
 * original model's outputs (quant/gptaq.c), the same for a pruned weight as for a rounded one.
 */
#include <math.h>
#include <stdlib.h>

#include "sparse/sparse_internal.h"

typedef struct hook {
    const sqz__sparse_opts *a;
    double ratio;
    float *score; /* rows x cols of the current call */
    sqz_status st;
} hook;

static void select_mask(void *user, const float *w, int64_t ld_w, int64_t rows, int64_t cols, const float *ud,
                        uint8_t *prune, int64_t ld_p) {
    hook *h = user;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) {
            const float v = w[r * ld_w + j], d = ud[j];
            h->score[r * cols + j] = v * v / (d * d);
        }
    if (h->a->m > 0) {
        sqz__sparsity_nm_lowest(h->score, cols, rows, cols, h->a->n, h->a->m, prune, ld_p);
        return;
    }
    uint8_t *p = sqz__malloc((size_t)(rows * cols));
    sqz_status s = p ? sqz__sparsity_lowest(h->score, rows * cols, (int64_t)llround(h->ratio * (double)(rows * cols)), p)
                     : SQZ_ERR_NOMEM;
    for (int64_t r = 0; s == SQZ_OK && r < rows; r++)
        for (int64_t j = 0; j < cols; j++) prune[r * ld_p + j] = p[r * cols + j];
    if (s != SQZ_OK && h->st == SQZ_OK) h->st = s;
    free(p);
}

sqz_status sqz__sparsegpt(const sqz_qlinear *lin, int n_lin, const sqz_qstats *st, const sqz__sparse_opts *a,
                          double ratio, const sqz_quant_opts *q, sqz_backend *be, int threads, sqz_qmatrix *out,
                          float **values) {
    int64_t max_out = 0;
    for (int i = 0; i < n_lin; i++) max_out = lin[i].n_out > max_out ? lin[i].n_out : max_out;
    hook h = {a, ratio, sqz__malloc((size_t)max_out * (size_t)a->blocksize * sizeof(float)), SQZ_OK};
    if (!h.score) return SQZ_ERR_NOMEM;
    sqz_quant_opts o = q ? *q : sqz_quant_default_opts();
    o.blocksize = (int32_t)a->blocksize;
    o.percdamp = a->damp;
    o.backend = be;
    o.threads = threads;
    if (a->aq == 1) {
        o.gptaq = true;
        o.gptaq_alpha = a->aq_alpha;
    }
    const sqz__gptq_mask mk = {.per_row = a->m > 0, .span = a->m > 0 ? a->m : a->blocksize, .quantize = q != NULL,
                               .select = select_mask, .user = &h};
    sqz_status s = sqz__gptq_masked(lin, n_lin, st, &o, &mk, out, values);
    if (s == SQZ_OK && h.st != SQZ_OK) {
        for (int i = 0; q && i < n_lin; i++) sqz_qmatrix_free(&out[i]);
        s = h.st;
    }
    free(h.score);
    return s;
}
