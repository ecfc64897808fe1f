/*
 * calib/driver.c - the sequential block-by-block driver (see sqz/calib.h).
 *
 * X holds the residual stream of every calibration window at the input of the current
 * block. Block l observes on a copy of each window (so that X still holds block l's input
 * after the pass), lets the callback compress the block, then runs the compressed block on
 * X in place: block l + 1 is calibrated on what the compressed blocks 0..l produce, as
 * GPTQ's and AWQ's sequential layer-by-layer procedure does.
 */
#include <stdlib.h>
#include <string.h>

#include "calib/calib_internal.h"

sqz_status sqz_calib_run(sqz_session *s, const sqz_calib_windows *w, const sqz_calib_run_opts *o) {
    SQZ_RETURN_IF(!s || !w || !o || !w->tokens || w->n_windows < 1, SQZ_ERR_INVALID_ARG,
                  "calibration: no windows");
    const sqz_model *m = sqz_session_model(s);
    const int64_t d = m->hp.d_model, ctx = w->ctx, nw = w->n_windows, nl = m->hp.n_layers;
    SQZ_RETURN_IF(ctx > sqz_session_max_tokens(s), SQZ_ERR_INVALID_ARG,
                  "calibration: windows of %lld tokens exceed the session's %lld", (long long)ctx,
                  (long long)sqz_session_max_tokens(s));
    size_t win_floats, all_floats, all_bytes;
    SQZ_RETURN_IF(!sqz__mul_size((size_t)ctx, (size_t)d, &win_floats) ||
                      !sqz__mul_size(win_floats, (size_t)nw, &all_floats) ||
                      !sqz__mul_size(all_floats, sizeof(float), &all_bytes),
                  SQZ_ERR_NOMEM, "calibration: %lld windows x %lld tokens x %lld floats overflow", (long long)nw,
                  (long long)ctx, (long long)d);
    float *x = malloc(all_bytes);
    float *tmp = o->recompute ? malloc(win_floats * sizeof(float)) : NULL;
    if (!x || (o->recompute && !tmp)) {
        free(x);
        free(tmp);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "calibration: cannot hold the activations of %lld windows x %lld tokens "
                         "x %lld (%.1f MB); use fewer samples or a shorter context",
                         (long long)nw, (long long)ctx, (long long)d, (double)all_bytes / 1e6);
    }
    sqz_status st = SQZ_OK;
    for (int64_t i = 0; i < nw && st == SQZ_OK; i++)
        st = sqz_session_embed(s, w->tokens + i * ctx, NULL, ctx, 0, x + (size_t)i * win_floats);

    const int64_t total = nl * nw * (o->recompute ? 2 : 1);
    int64_t done = 0;
    for (int32_t l = 0; l < nl && st == SQZ_OK; l++) {
        sqz_calib_observe_opts oo = o->observe;
        oo.expected_tokens = nw * ctx;
        sqz_calib_observer *ob = NULL;
        sqz_calib_block stats;
        memset(&stats, 0, sizeof stats);
        st = sqz_calib_observer_new(l, &oo, &ob);
        if (st == SQZ_OK) sqz_session_set_hook(s, sqz_calib_observer_hook, ob);
        for (int64_t i = 0; i < nw && st == SQZ_OK; i++) {
            float *xi = x + (size_t)i * win_floats;
            if (tmp) {
                memcpy(tmp, xi, win_floats * sizeof(float));
                xi = tmp;
            }
            st = sqz_session_block(s, l, xi, ctx, 0);
            if (o->progress) o->progress(o->progress_user, ++done, total);
        }
        sqz_session_set_hook(s, NULL, NULL);
        if (st == SQZ_OK) st = sqz_calib_observer_finish(ob, &stats);
        sqz_calib_observer_free(ob);
        if (st == SQZ_OK && o->on_block) st = o->on_block(o->user, s, l, &stats);
        sqz_calib_block_free(&stats);
        for (int64_t i = 0; tmp && i < nw && st == SQZ_OK; i++) {
            st = sqz_session_block(s, l, x + (size_t)i * win_floats, ctx, 0);
            if (o->progress) o->progress(o->progress_user, ++done, total);
        }
        sqz_session_invalidate(s, l); /* the block's float weight copies: one block at a time */
    }
    sqz_session_set_hook(s, NULL, NULL);
    free(x);
    free(tmp);
    return st;
}
