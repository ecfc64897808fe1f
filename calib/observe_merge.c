/*
 * calib/observe_merge.c - observers of consecutive windows merged into one, and observers as
 * bytes for the wire (distributed calibration; the tree they are merged along is described in
 * observe_internal.h). Merging is the observer's own arithmetic: sums add, maxima take the
 * larger, the strided sample rows are appended in window order up to sample_rows (so they are
 * the rows one observer of all windows would keep), histograms merge.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/observe_internal.h"

enum { HAS_X2 = 1, HAS_ABS = 2, HAS_SUMX = 4, HAS_ABSMAX = 8, HAS_XTX = 16, HAS_ROWS = 32, HAS_HIST = 64 };
#define PACK_MAGIC 0x50515a53u /* "SQZP" */

sqz_status sqz__calib_observer_range(int32_t layer, const sqz_calib_observe_opts *o, int64_t w0, int64_t w1,
                                     int64_t ctx, sqz_calib_observer **out) {
    SQZ_TRY(sqz_calib_observer_new(layer, o, out));
    sqz_calib_observer *ob = *out;
    ob->token_base = w0 * ctx;
    const int64_t rows = ((w1 - w0) * ctx + ob->stride - 1) / ob->stride + 1; /* strided rows in range */
    if (rows < ob->rows_cap) ob->rows_cap = rows;
    return SQZ_OK;
}

sqz_status sqz__calib_observer_seal(sqz_calib_observer *ob) {
    const sqz_status s = sqz__calib_xtx_to_host(ob);
    sqz__calib_xtx_free_scratch(ob);
    free(ob->dbuf);
    free(ob->blk_in);
    ob->dbuf = NULL;
    ob->blk_in = NULL;
    ob->dbuf_n_in = 0;
    ob->blk_cap = 0;
    ob->blk_n = 0;
    return s;
}

size_t sqz__calib_observer_bytes(const sqz_calib_observer *ob) {
    size_t b = 0;
    for (int i = 0; ob && i < ob->n_inputs; i++) {
        const obs_input *in = &ob->in[i];
        const size_t n = (size_t)in->n_in;
        if (in->xtx) b += n * n * sizeof(double);
        b += n * sizeof(double) * (size_t)(!!in->sum_x2 + !!in->sum_abs + !!in->sum_x);
        if (in->absmax) b += n * sizeof(float);
        if (in->x) b += (size_t)in->x_cap * n * sizeof(float);
        if (in->hist_init) b += (size_t)in->hist.n_bins * sizeof(double);
    }
    return b;
}

static obs_input *find_roles(sqz_calib_observer *ob, uint32_t roles) {
    for (int i = 0; i < ob->n_inputs; i++)
        if (ob->in[i].roles == roles) return &ob->in[i];
    return NULL;
}

static void add(double *d, const double *s, int64_t n) {
    for (int64_t j = 0; j < n; j++) d[j] += s[j];
}

static sqz_status merge_input(const sqz_calib_observer *dob, obs_input *d, const obs_input *s) {
    const int64_t k = d->n_in;
    if (d->sum_x2 && s->sum_x2) add(d->sum_x2, s->sum_x2, k);
    if (d->sum_abs && s->sum_abs) add(d->sum_abs, s->sum_abs, k);
    if (d->sum_x && s->sum_x) add(d->sum_x, s->sum_x, k);
    if (d->absmax && s->absmax)
        for (int64_t j = 0; j < k; j++)
            if (s->absmax[j] > d->absmax[j]) d->absmax[j] = s->absmax[j];
    if (d->xtx && s->xtx) { /* the upper triangles: all the observers accumulate */
        for (int64_t r = 0; r < k; r++) add(d->xtx + r * k + r, s->xtx + r * k + r, k - r);
        d->host_used = true;
    }
    if (d->x && s->x) {
        int64_t want = dob->o.sample_rows - d->n_x;
        if (want > s->n_x) want = s->n_x;
        if (want > 0) {
            if (d->n_x + want > d->x_cap) {
                float *nx = sqz__realloc(d->x, (size_t)(d->n_x + want) * (size_t)k * sizeof(float));
                if (!nx) return SQZ_ERR_NOMEM;
                d->x = nx;
                d->x_cap = d->n_x + want;
            }
            memcpy(d->x + d->n_x * k, s->x, (size_t)want * (size_t)k * sizeof(float));
            d->n_x += want;
        }
    }
    if (d->hist_init && s->hist_init) SQZ_TRY(sqz_act_hist_merge(&d->hist, &s->hist));
    d->n_tokens += s->n_tokens;
    return SQZ_OK;
}

sqz_status sqz__calib_observer_merge(sqz_calib_observer *dst, const sqz_calib_observer *src) {
    SQZ_TRY(sqz__calib_xtx_to_host(dst));
    SQZ_TRY(sqz__calib_xtx_to_host((sqz_calib_observer *)src)); /* its sums move, not change */
    SQZ_RETURN_IF(dst->layer != src->layer, SQZ_ERR_INVALID_ARG, "calibration: merging block %d into block %d",
                  (int)src->layer, (int)dst->layer);
    SQZ_RETURN_IF(dst->n_inputs != src->n_inputs, SQZ_ERR_INVALID_ARG,
                  "calibration: block %d: windows saw %d and %d linear inputs", (int)dst->layer, dst->n_inputs,
                  src->n_inputs);
    for (int i = 0; i < src->n_inputs; i++) {
        obs_input *d = find_roles(dst, src->in[i].roles);
        SQZ_RETURN_IF(!d || d->n_in != src->in[i].n_in, SQZ_ERR_INVALID_ARG,
                      "calibration: block %d: windows saw different linear inputs", (int)dst->layer);
        SQZ_TRY(merge_input(dst, d, &src->in[i]));
    }
    dst->cos_sum += src->cos_sum;
    if (src->cos_min < dst->cos_min) dst->cos_min = src->cos_min;
    dst->cos_n += src->cos_n;
    return SQZ_OK;
}

sqz_status sqz__calib_observer_take_input(sqz_calib_observer *dst, sqz_calib_observer *src, int j) {
    SQZ_RETURN_IF(dst->n_inputs >= SQZ_CALIB_MAX_INPUTS || j < 0 || j >= src->n_inputs, SQZ_ERR_INVALID_ARG,
                  "calibration: block %d: cannot join the inputs", (int)dst->layer);
    dst->in[dst->n_inputs++] = src->in[j];
    memset(&src->in[j], 0, sizeof src->in[j]);
    return SQZ_OK;
}

sqz_status sqz__calib_observer_stub_input(sqz_calib_observer *dst, uint32_t roles, int64_t n_in) {
    SQZ_RETURN_IF(dst->n_inputs >= SQZ_CALIB_MAX_INPUTS, SQZ_ERR_INVALID_ARG,
                  "calibration: block %d: cannot join the inputs", (int)dst->layer);
    obs_input *in = &dst->in[dst->n_inputs++];
    memset(in, 0, sizeof *in);
    in->roles = roles;
    in->n_in = n_in;
    return SQZ_OK;
}

/* ---- bytes ----------------------------------------------------------------------------- */

typedef struct wbuf {
    uint8_t **p;
    size_t *len, *cap;
    bool failed;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
    if (w->failed || n == 0) return;
    if (*w->len + n > *w->cap) {
        size_t c = *w->cap ? *w->cap : 4096;
        while (c < *w->len + n) c *= 2;
        uint8_t *q = sqz__realloc(*w->p, c);
        if (!q) {
            w->failed = true;
            return;
        }
        *w->p = q;
        *w->cap = c;
    }
    memcpy(*w->p + *w->len, src, n);
    *w->len += n;
}
#define PUT(w, v) put((w), &(v), sizeof(v))

sqz_status sqz__calib_observer_pack(const sqz_calib_observer *ob, int only, uint8_t **buf, size_t *len,
                                    size_t *cap) {
    SQZ_TRY(sqz__calib_xtx_to_host((sqz_calib_observer *)ob)); /* its sums move, not change */
    wbuf w = {buf, len, cap, false};
    const uint32_t magic = PACK_MAGIC, n_inputs = only < 0 ? (uint32_t)ob->n_inputs : 1;
    PUT(&w, magic);
    PUT(&w, ob->layer);
    PUT(&w, n_inputs);
    PUT(&w, ob->cos_sum);
    PUT(&w, ob->cos_min);
    PUT(&w, ob->cos_n);
    for (int i = only < 0 ? 0 : only; i < (only < 0 ? ob->n_inputs : only + 1); i++) {
        const obs_input *in = &ob->in[i];
        const size_t k = (size_t)in->n_in;
        const uint32_t has = (in->sum_x2 ? HAS_X2 : 0) | (in->sum_abs ? HAS_ABS : 0) | (in->sum_x ? HAS_SUMX : 0) |
                             (in->absmax ? HAS_ABSMAX : 0) | (in->xtx ? HAS_XTX : 0) | (in->x ? HAS_ROWS : 0) |
                             (in->hist_init ? HAS_HIST : 0);
        PUT(&w, in->roles);
        PUT(&w, has);
        PUT(&w, in->n_in);
        PUT(&w, in->n_tokens);
        PUT(&w, in->n_x);
        if (in->sum_x2) put(&w, in->sum_x2, k * sizeof(double));
        if (in->sum_abs) put(&w, in->sum_abs, k * sizeof(double));
        if (in->sum_x) put(&w, in->sum_x, k * sizeof(double));
        if (in->absmax) put(&w, in->absmax, k * sizeof(float));
        if (in->xtx) /* upper triangle, row by row */
            for (size_t r = 0; r < k; r++) put(&w, in->xtx + r * k + r, (k - r) * sizeof(double));
        if (in->x) put(&w, in->x, (size_t)in->n_x * k * sizeof(float));
        if (in->hist_init) {
            const sqz_act_hist *h = &in->hist;
            PUT(&w, h->n_bins);
            PUT(&w, h->width);
            PUT(&w, h->total);
            PUT(&w, h->absmax);
            PUT(&w, h->n_zero);
            put(&w, h->counts, (size_t)h->n_bins * sizeof(double));
        }
    }
    return w.failed ? SQZ_ERR_NOMEM : SQZ_OK;
}

#define GET(r, v) sqz__reader_copy((r), &(v), sizeof(v))

static sqz_status unpack_input(sqz__reader *r, sqz_calib_observer *ob, obs_input *in) {
    uint32_t has = 0;
    bool ok = GET(r, in->roles) && GET(r, has) && GET(r, in->n_in) && GET(r, in->n_tokens) && GET(r, in->n_x);
    SQZ_RETURN_IF(!ok || in->n_in < 1 || in->n_in > SQZ_CALIB_MAX_N_IN || in->n_x < 0 ||
                      in->n_x > ob->o.sample_rows,
                  SQZ_ERR_FORMAT, "calibration: a rank's statistics are damaged (input header)");
    const size_t k = (size_t)in->n_in;
    if (has & HAS_X2) ok = ok && (in->sum_x2 = sqz__malloc(k * sizeof(double))) && sqz__reader_copy(r, in->sum_x2, k * 8);
    if (has & HAS_ABS) ok = ok && (in->sum_abs = sqz__malloc(k * sizeof(double))) && sqz__reader_copy(r, in->sum_abs, k * 8);
    if (has & HAS_SUMX) ok = ok && (in->sum_x = sqz__malloc(k * sizeof(double))) && sqz__reader_copy(r, in->sum_x, k * 8);
    if (has & HAS_ABSMAX) ok = ok && (in->absmax = sqz__malloc(k * sizeof(float))) && sqz__reader_copy(r, in->absmax, k * 4);
    if (ok && (has & HAS_XTX)) {
        ok = (in->xtx = sqz__calloc(k * k, sizeof(double))) != NULL;
        in->host_used = true;
        for (size_t row = 0; ok && row < k; row++) ok = sqz__reader_copy(r, in->xtx + row * k + row, (k - row) * sizeof(double));
    }
    if (ok && (has & HAS_ROWS)) {
        in->x_cap = in->n_x > 0 ? in->n_x : 1;
        ok = (in->x = sqz__malloc((size_t)in->x_cap * k * sizeof(float))) &&
             sqz__reader_copy(r, in->x, (size_t)in->n_x * k * sizeof(float));
    }
    if (ok && (has & HAS_HIST)) {
        sqz_act_hist *h = &in->hist;
        sqz_act_hist_init(h);
        in->hist_init = true;
        ok = GET(r, h->n_bins) && GET(r, h->width) && GET(r, h->total) && GET(r, h->absmax) && GET(r, h->n_zero) &&
             h->n_bins >= 0 && h->n_bins <= SQZ_HIST_MAX_BINS;
        ok = ok && (h->counts = sqz__calloc(h->n_bins ? (size_t)h->n_bins : 1, sizeof(double))) &&
             sqz__reader_copy(r, h->counts, (size_t)h->n_bins * sizeof(double));
    }
    SQZ_RETURN_IF(!ok, !r->ok ? SQZ_ERR_FORMAT : SQZ_ERR_NOMEM, "calibration: a rank's statistics %s",
                  !r->ok ? "are damaged (too short)" : "do not fit in memory");
    return SQZ_OK;
}

sqz_status sqz__calib_observer_unpack(sqz__reader *r, const sqz_calib_observe_opts *o, sqz_calib_observer **out) {
    *out = NULL;
    uint32_t magic = 0, n_inputs = 0;
    int32_t layer = 0;
    bool ok = GET(r, magic) && GET(r, layer) && GET(r, n_inputs);
    SQZ_RETURN_IF(!ok || magic != PACK_MAGIC || n_inputs > SQZ_CALIB_MAX_INPUTS, SQZ_ERR_FORMAT,
                  "calibration: a rank's statistics are damaged (header)");
    sqz_calib_observer *ob = NULL;
    SQZ_TRY(sqz_calib_observer_new(layer, o, &ob));
    ok = GET(r, ob->cos_sum) && GET(r, ob->cos_min) && GET(r, ob->cos_n);
    sqz_status st = ok ? SQZ_OK : SQZ_ERROR(SQZ_ERR_FORMAT, "calibration: a rank's statistics are damaged (block)");
    for (uint32_t i = 0; i < n_inputs && st == SQZ_OK; i++) {
        ob->n_inputs = (int)i + 1;
        st = unpack_input(r, ob, &ob->in[i]);
    }
    if (st != SQZ_OK) {
        sqz_calib_observer_free(ob);
        return st;
    }
    *out = ob;
    return SQZ_OK;
}
