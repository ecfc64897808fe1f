/*
 * sparse/owl.c - OWL, outlier-weighted layer-wise sparsity (Yin et al. 2024,
 * luuyin/OWL): one calibration pass on the model as it is collects E[x^2] of every block's
 * linear inputs; block l's outlier ratio D_l is the share of Wanda scores |W_ij| * ||x_j|| over
 * all its linear layers that exceed M times their mean; the ratios are spread linearly to
 * [0, 2 lambda], centred on the target density 1 - R, and block l's sparsity is 1 - that
 * (more outliers, fewer zeros), exactly as OWL's reference code.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/sparse_internal.h"
#include "sqz/family.h"

typedef struct owl {
    const sqz__sparse_opts *a;
    const sqz_model *m;
    double *d; /* per block */
} owl;

/* Sum and count of scores above thr (pass 2) or the sum of all (pass 1) over one tensor. */
static sqz_status scan(const sqz_tensor *t, const float *x2, double thr, double *sum, int64_t *above) {
    const int64_t no = t->shape[0], ni = t->shape[1];
    float *w = sqz__malloc((size_t)(no * ni) * sizeof(float));
    if (!w) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_tensor_to_f32(t, w);
    for (int64_t r = 0; st == SQZ_OK && r < no; r++)
        for (int64_t j = 0; j < ni; j++) {
            const double s = fabs((double)w[r * ni + j]) * sqrt(x2[j] > 0 ? (double)x2[j] : 0.0);
            *sum += s;
            *above += s > thr;
        }
    free(w);
    return st;
}

static sqz_status on_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    owl *o = user;
    sqz_linear_group g[SQZ_LINEAR_GROUPS_MAX];
    const int ng = sqz_family_linear_groups(o->m, layer, g);
    double sum = 0, thr;
    int64_t n = 0, above = 0;
    for (int pass = 0; pass < 2; pass++) {
        thr = pass ? o->a->owl_m * sum / (double)(n ? n : 1) : INFINITY;
        for (int i = 0; i < ng; i++) {
            const sqz_calib_input *in = sqz_calib_block_input(b, g[i].roles[0]);
            SQZ_RETURN_IF(!in || !in->st.x2, SQZ_ERR_INVALID_ARG, "--sparsity: owl needs E[x^2] of block %d", (int)layer);
            for (int k = 0; k < g[i].n; k++) {
                const sqz_tensor *t = sqz_model_get(o->m, g[i].roles[k], layer, SQZ_PARAM_WEIGHT);
                if (!t) continue;
                double s = 0;
                if (!pass) n += sqz_tensor_nelements(t);
                SQZ_TRY(scan(t, in->st.x2, thr, &s, &above));
                if (!pass) sum += s;
            }
        }
        if (!pass) above = 0;
    }
    o->d[layer] = n ? (double)above / (double)n : 0.0;
    return SQZ_OK;
}

sqz_status sqz__sparsity_owl(sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                             const sqz__sparse_opts *a, sqz_progress_fn progress, void *progress_user,
                             double *layer_ratio) {
    const int32_t nl = (int32_t)m->hp.n_layers;
    owl o = {a, m, sqz__calloc((size_t)(nl ? nl : 1), sizeof(double))};
    if (!o.d) return SQZ_ERR_NOMEM;
    sqz_session_opts sso = *so;
    sso.max_tokens = w->ctx;
    sqz_session *s = NULL;
    sqz_status st = sqz_session_new(m, &sso, &s);
    if (st == SQZ_OK) {
        sqz_calib_run_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.observe.needs = SQZ_QSTAT_X2;
        ro.on_block = on_block;
        ro.user = &o;
        ro.progress = progress;
        ro.progress_user = progress_user;
        st = sqz_calib_run(s, w, &ro);
    }
    sqz_session_free(s);
    if (st == SQZ_OK) {
        double lo = INFINITY, hi = -INFINITY, mean = 0;
        for (int32_t l = 0; l < nl; l++) {
            lo = fmin(lo, o.d[l]);
            hi = fmax(hi, o.d[l]);
        }
        for (int32_t l = 0; l < nl; l++) {
            o.d[l] = hi > lo ? (o.d[l] - lo) / (hi - lo) * 2.0 * a->owl_lambda : 0.0;
            mean += o.d[l] / nl;
        }
        for (int32_t l = 0; l < nl; l++) {
            const double r = 1.0 - (o.d[l] - mean + (1.0 - a->ratio));
            layer_ratio[l] = fmin(fmax(r, 0.0), 0.99);
        }
    }
    free(o.d);
    return st;
}
