/*
 * calib/observe.c - observers on the activations of one block: per-channel absmax, E[x^2]
 * (llama.cpp's importance matrix: imatrix.cpp sums x^2 over the tokens of the input of
 * every matrix), E|x| (AWQ's activation magnitude), the Hessian sum x x^T in double (GPTQ:
 * H = 2 X^T X, the factor cancels against the relative damping), |x| histograms (TensorRT's
 * HistogramCalibrator, through sqz_act_hist) and a strided sample of input rows; and the
 * cosine similarity between the block's input and output residual streams.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/observe_internal.h"

static void input_free(sqz_calib_observer *ob, obs_input *in) {
    sqz__calib_xtx_free_input(ob, in);
    free(in->xtx);
    free(in->dxxt);
    free(in->sum_x2);
    free(in->sum_abs);
    free(in->sum_x);
    free(in->absmax);
    free(in->x);
    if (in->hist_init) sqz_act_hist_free(&in->hist);
    memset(in, 0, sizeof *in);
}

void sqz_calib_observer_free(sqz_calib_observer *ob) {
    if (!ob) return;
    for (int i = 0; i < ob->n_inputs; i++) input_free(ob, &ob->in[i]);
    sqz__calib_experts_free(ob);
    sqz__calib_xtx_free_scratch(ob);
    free(ob->dbuf);
    free(ob->blk_in);
    free(ob);
}

sqz_status sqz_calib_observer_new(int32_t layer, const sqz_calib_observe_opts *o, sqz_calib_observer **out) {
    *out = NULL;
    SQZ_RETURN_IF(!o || o->sample_rows < 0, SQZ_ERR_INVALID_ARG, "calibration: bad observer options");
    SQZ_TRY(sqz__calib_xtx_check(o));
    sqz_calib_observer *ob = sqz__calloc(1, sizeof *ob);
    if (!ob) return SQZ_ERR_NOMEM;
    ob->layer = layer;
    ob->o = *o;
    if (!(o->needs & SQZ_QSTAT_SAMPLE) || o->sample_rows == 0) ob->o.needs &= ~(unsigned)SQZ_QSTAT_SAMPLE;
    ob->stride = 1;
    if (o->expected_tokens > 0 && o->sample_rows > 0)
        ob->stride = (o->expected_tokens + o->sample_rows - 1) / o->sample_rows;
    ob->cos_min = 1.0;
    ob->rows_cap = o->sample_rows;
    *out = ob;
    return SQZ_OK;
}

static sqz_status input_alloc(sqz_calib_observer *ob, obs_input *in, uint32_t roles, int64_t n_in) {
    unsigned nd = ob->o.needs;
    in->roles = roles;
    in->n_in = n_in;
    size_t nn;
    if (nd & SQZ_QSTAT_XTX) {
        SQZ_RETURN_IF(!sqz__mul_size((size_t)n_in, (size_t)n_in, &nn) || !sqz__mul_size(nn, sizeof(double), &nn),
                      SQZ_ERR_NOMEM, "calibration: Hessian of %lld inputs overflows", (long long)n_in);
        if (!(in->xtx = sqz__calloc(1, nn))) return SQZ_ERR_NOMEM;
    }
    if ((nd & SQZ_QSTAT_DXXT) && !(in->dxxt = sqz__calloc((size_t)n_in * (size_t)n_in, sizeof(double))))
        return SQZ_ERR_NOMEM;
    if (nd & SQZ_QSTAT_X2 && !(in->sum_x2 = sqz__calloc((size_t)n_in, sizeof(double)))) return SQZ_ERR_NOMEM;
    if (nd & SQZ_QSTAT_ABSMEAN && !(in->sum_abs = sqz__calloc((size_t)n_in, sizeof(double)))) return SQZ_ERR_NOMEM;
    if (nd & SQZ_QSTAT_MEAN && !(in->sum_x = sqz__calloc((size_t)n_in, sizeof(double)))) return SQZ_ERR_NOMEM;
    if (nd & SQZ_QSTAT_ABSMAX && !(in->absmax = sqz__calloc((size_t)n_in, sizeof(float)))) return SQZ_ERR_NOMEM;
    if (nd & SQZ_QSTAT_SAMPLE) {
        in->x_cap = ob->rows_cap < ob->o.sample_rows ? ob->rows_cap : ob->o.sample_rows;
        SQZ_RETURN_IF(!sqz__mul_size((size_t)in->x_cap, (size_t)n_in, &nn) || !sqz__mul_size(nn, sizeof(float), &nn),
                      SQZ_ERR_NOMEM, "calibration: %lld sample rows of %lld overflow", (long long)in->x_cap,
                      (long long)n_in);
        if (!(in->x = sqz__malloc(nn))) return SQZ_ERR_NOMEM;
    }
    if (nd & SQZ_QSTAT_HIST) {
        sqz_act_hist_init(&in->hist);
        in->hist_init = true;
        const double w0 = ob->hist_w0[in - ob->in];
        if (w0 > 0) { /* the bins the first window chose: every window's counts then add exactly */
            if (!(in->hist.counts = sqz__calloc(SQZ_HIST_BINS, sizeof(double)))) return SQZ_ERR_NOMEM;
            in->hist.n_bins = SQZ_HIST_BINS;
            in->hist.width = w0;
        }
    }
    if ((nd & SQZ_QSTAT_XTX) && !ob->o.backend && n_in > ob->dbuf_n_in) {
        free(ob->dbuf);
        ob->dbuf = sqz__malloc((size_t)XTX_CHUNK * (size_t)n_in * sizeof(double));
        if (!ob->dbuf) return SQZ_ERR_NOMEM;
        ob->dbuf_n_in = n_in;
    }
    return SQZ_OK;
}

static sqz_status find_input(sqz_calib_observer *ob, uint32_t roles, int64_t n_in, obs_input **out) {
    for (int i = 0; i < ob->n_inputs; i++) {
        if (ob->in[i].roles != roles) continue;
        SQZ_RETURN_IF(ob->in[i].n_in != n_in, SQZ_ERR_INVALID_ARG,
                      "calibration: block %d: an input changed width from %lld to %lld", (int)ob->layer,
                      (long long)ob->in[i].n_in, (long long)n_in);
        *out = &ob->in[i];
        return SQZ_OK;
    }
    SQZ_RETURN_IF(ob->n_inputs == SQZ_CALIB_MAX_INPUTS, SQZ_ERR_INVALID_ARG,
                  "calibration: block %d has more than %d distinct linear inputs", (int)ob->layer,
                  SQZ_CALIB_MAX_INPUTS);
    SQZ_RETURN_IF(n_in < 1 || n_in > SQZ_CALIB_MAX_N_IN, SQZ_ERR_INVALID_ARG,
                  "calibration: block %d: input width %lld out of range", (int)ob->layer, (long long)n_in);
    obs_input *in = &ob->in[ob->n_inputs++];
    sqz_status st = input_alloc(ob, in, roles, n_in);
    if (st != SQZ_OK) return st;
    *out = in;
    return SQZ_OK;
}

static sqz_status observe_linear(sqz_calib_observer *ob, const sqz_hook_event *e) {
    obs_input *in = NULL;
    SQZ_TRY(find_input(ob, e->roles, e->dim, &in));
    const int64_t k = e->dim, n = e->n_tokens;
    /* the device's own copy of the rows, when the forward left them there */
    const float *x_dev = e->backend == ob->o.backend ? e->x_dev : NULL;
    SQZ_TRY(sqz__calib_colstats_add(ob, in, e->x, x_dev, n));
    for (int64_t t = 0; in->x && t < n; t++)
        if (in->n_x < in->x_cap && (ob->token_base + in->n_tokens + t) % ob->stride == 0)
            memcpy(in->x + in->n_x++ * k, e->x + t * k, (size_t)k * sizeof(float));
    if (in->xtx) SQZ_TRY(sqz__calib_xtx_add(ob, in, e->x, x_dev, n));
    if (in->dxxt) SQZ_TRY(sqz__calib_dxxt_add(ob, in, e->x, n));
    if (in->hist_init) SQZ_TRY(sqz_act_hist_add(&in->hist, e->x, n * k));
    in->n_tokens += n;
    return SQZ_OK;
}

static sqz_status observe_block_in(sqz_calib_observer *ob, const sqz_hook_event *e) {
    size_t need;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)e->n_tokens, (size_t)e->dim, &need), SQZ_ERR_NOMEM,
                  "calibration: block input too large");
    if (need > ob->blk_cap) {
        free(ob->blk_in);
        ob->blk_in = sqz__malloc(need * sizeof(float));
        if (!ob->blk_in) {
            ob->blk_cap = 0;
            return SQZ_ERR_NOMEM;
        }
        ob->blk_cap = need;
    }
    memcpy(ob->blk_in, e->x, need * sizeof(float));
    ob->blk_n = e->n_tokens;
    ob->blk_d = e->dim;
    return SQZ_OK;
}

void sqz__calib_cos_add(sqz_calib_observer *ob, double c) {
    ob->cos_sum += c;
    if (c < ob->cos_min) ob->cos_min = c;
    ob->cos_n++;
}

static sqz_status observe_block_out(sqz_calib_observer *ob, const sqz_hook_event *e) {
    if (ob->blk_n != e->n_tokens || ob->blk_d != e->dim) return SQZ_OK; /* no matching input seen */
    SQZ_TRY(sqz__calib_cosines_add(ob, e->x, e->backend == ob->o.backend ? e->x_dev : NULL, e->n_tokens, e->dim));
    ob->blk_n = 0;
    return SQZ_OK;
}

static sqz_status hook(sqz_calib_observer *ob, const sqz_hook_event *e);

sqz_status sqz_calib_observer_hook(void *observer, const sqz_hook_event *e) {
    sqz_calib_observer *ob = observer;
    if (e->layer != ob->layer) return SQZ_OK;
    const double t0 = sqz__prof_begin();
    const sqz_status st = hook(ob, e);
    sqz__prof_end(SQZ__PROF_OBSERVE, t0);
    return st;
}

static sqz_status hook(sqz_calib_observer *ob, const sqz_hook_event *e) {
    switch (e->point) {
    case SQZ_HOOK_LINEAR_IN:
        if (e->in_expert > 0) return e->roles ? sqz__calib_expert_add(ob, e) : SQZ_OK;
        return e->roles ? observe_linear(ob, e) : SQZ_OK;
    case SQZ_HOOK_BLOCK_IN: return ob->o.block_io ? observe_block_in(ob, e) : SQZ_OK;
    case SQZ_HOOK_BLOCK_OUT: return ob->o.block_io ? observe_block_out(ob, e) : SQZ_OK;
    case SQZ_HOOK_EXPERT_OUT: return sqz__calib_expert_out(ob, e);
    }
    return SQZ_OK;
}

/* The lower triangle of h (k, k) from its upper one, in 64 x 64 tiles: the column reads of a
 * plain loop miss the cache on every element (8960 wide: 40 M misses, most of a second). */
static void mirror_upper(double *h, int64_t k) {
    enum { T = 64 };
    for (int64_t r0 = 0; r0 < k; r0 += T)
        for (int64_t c0 = 0; c0 <= r0; c0 += T)
            for (int64_t r = r0; r < r0 + T && r < k; r++)
                for (int64_t c = c0; c < c0 + T && c < r; c++) h[r * k + c] = h[c * k + r];
}

static float *mean_of(const double *sum, int64_t n, int64_t count) {
    float *v = sqz__malloc((size_t)n * sizeof(float));
    if (!v) return NULL;
    for (int64_t j = 0; j < n; j++) v[j] = count > 0 ? (float)(sum[j] / (double)count) : 0.0f;
    return v;
}

static sqz_status finish(sqz_calib_observer *ob, sqz_calib_block *out);

sqz_status sqz_calib_observer_finish(sqz_calib_observer *ob, sqz_calib_block *out) {
    const double t0 = sqz__prof_begin();
    const sqz_status st = finish(ob, out);
    sqz__prof_end(SQZ__PROF_OBS_FINISH, t0);
    return st;
}

static sqz_status finish(sqz_calib_observer *ob, sqz_calib_block *out) {
    memset(out, 0, sizeof *out);
    SQZ_TRY(sqz__calib_xtx_to_host(ob));
    out->layer = ob->layer;
    out->cos_mean = ob->cos_n ? ob->cos_sum / (double)ob->cos_n : 0.0;
    out->cos_min = ob->cos_n ? ob->cos_min : 0.0;
    for (int i = 0; i < ob->n_inputs; i++) {
        obs_input *in = &ob->in[i];
        sqz_calib_input *d = &out->in[i];
        out->n_inputs = i + 1;
        d->roles = in->roles;
        d->st.n_in = in->n_in;
        d->st.n_tokens = in->n_tokens;
        if (in->n_tokens > out->n_tokens) out->n_tokens = in->n_tokens;
        if (in->sum_x2) {
            if (!(d->x2 = mean_of(in->sum_x2, in->n_in, in->n_tokens))) goto nomem;
            d->have |= SQZ_QSTAT_X2;
        }
        if (in->sum_abs) {
            if (!(d->absmean = mean_of(in->sum_abs, in->n_in, in->n_tokens))) goto nomem;
            d->have |= SQZ_QSTAT_ABSMEAN;
        }
        if (in->sum_x) {
            if (!(d->mean = mean_of(in->sum_x, in->n_in, in->n_tokens))) goto nomem;
            d->have |= SQZ_QSTAT_MEAN;
        }
        if (in->absmax) {
            d->absmax = in->absmax;
            in->absmax = NULL;
            d->have |= SQZ_QSTAT_ABSMAX;
        }
        if (in->xtx) {
            mirror_upper(in->xtx, in->n_in);
            d->xtx = in->xtx;
            in->xtx = NULL;
            d->have |= SQZ_QSTAT_XTX;
        }
        if (in->dxxt) {
            d->dxxt = in->dxxt;
            in->dxxt = NULL;
            d->have |= SQZ_QSTAT_DXXT;
        }
        if (in->x) {
            d->x = in->x;
            d->st.n_x = in->n_x;
            in->x = NULL;
            d->have |= SQZ_QSTAT_SAMPLE;
        }
        if (in->hist_init) {
            d->hist = in->hist;
            in->hist_init = false;
            memset(&in->hist, 0, sizeof in->hist);
            d->have |= SQZ_QSTAT_HIST;
        }
        d->st.xtx = d->xtx;
        d->st.dxxt = d->dxxt;
        d->st.x2 = d->x2;
        d->st.absmax = d->absmax;
        d->st.absmean = d->absmean;
        d->st.mean = d->mean;
        d->st.x = d->x;
        d->st.hist = (d->have & SQZ_QSTAT_HIST) ? &d->hist : NULL;
    }
    if (sqz__calib_experts_finish(ob, out) != SQZ_OK) goto nomem;
    return SQZ_OK;
nomem:
    sqz_calib_block_free(out);
    return SQZ_ERR_NOMEM;
}

const sqz_calib_input *sqz_calib_block_input(const sqz_calib_block *b, sqz_role role) {
    if (!b) return NULL;
    for (int i = 0; i < b->n_inputs; i++)
        if (b->in[i].roles & SQZ__ROLE_BIT(role)) return &b->in[i];
    return NULL;
}

void sqz_calib_block_free(sqz_calib_block *b) {
    if (!b) return;
    for (int i = 0; i < b->n_inputs && i < SQZ_CALIB_MAX_INPUTS; i++) {
        sqz_calib_input *in = &b->in[i];
        free(in->xtx);
        free(in->dxxt);
        free(in->x2);
        free(in->absmax);
        free(in->absmean);
        free(in->mean);
        free(in->x);
        for (int64_t e = 0; in->mat_xtx && e < in->n_mat; e++) free(in->mat_xtx[e]);
        free(in->mat_xtx);
        free(in->mat_tokens);
        free(in->mat_reap);
        if (in->have & SQZ_QSTAT_HIST) sqz_act_hist_free(&in->hist);
    }
    memset(b, 0, sizeof *b);
}
