/*
 * sqz/layerdrop.h - choosing which whole blocks (layers) of a decoder to remove, by measured
 * importance, and repairing the removal without training.
 *
 * Scores, all from one run over calibration windows (sqz_layerdrop_score):
 *   bi[l]       block influence (ShortGPT): 1 - E_t[cos(x_in_t, x_out_t)] of block l over
 *               every token t of every window; small = the block changes little.
 *   ang[l][n]   angular distance (Gromov et al., "The Unreasonable Ineffectiveness of the
 *               Deeper Layers") between the input of block l and the input of block l + n
 *               (the input of "block n_layers" is the last block's output, before the final
 *               norm): E_t[arccos(cos(x_l,t, x_{l+n},t)) / pi], in [0, 1], for every run of n
 *               consecutive blocks; small = the run can go.
 *   kld[l]      the measured cost of removing block l alone: mean KL(full || without l) of the
 *               next-token distributions over the second half of each window's positions (the
 *               perplexity protocol's scored half), on the first kld_windows windows. The
 *               direct answer and the costly one: about n_layers / 2 forward passes per window.
 * Windows are the calibration windows: `sqz compress --eval TEXT` holds chunks that overlap
 * them out, so the scores never see the evaluation text.
 *
 * Methods (how N blocks are chosen):
 *   bi        the N blocks of lowest bi
 *   angular   the run of N consecutive blocks [l, l + N) of lowest ang[l][N]
 *   kld       the N blocks of lowest kld
 *   last      the last N blocks (baseline)
 *   random    N distinct blocks drawn from `seed` (baseline)
 * Iterative (bi, angular, kld): remove the best block (angular: the best run of 1), score the
 * shortened model again, repeat N times.
 *
 * Compensation (ReplaceMe, training-free): for every maximal run of removed blocks [a, b]
 * after a kept block p = a - 1, a linear map T (d_model x d_model) is fitted by least squares
 * on the calibration windows so that the kept block's MLP output M (its down projection's
 * output) mapped by T, plus the residual Y that entered the MLP, gives what blocks a..b would
 * have produced from p's output L:
 *     T = argmin ||M T - (L - Y)||_F^2 + lambda ||T - I||_F^2,  lambda = ridge * tr(M^T M) / d
 * (the ridge pulls T towards the identity, so the fitted error is never above the error
 * without compensation). T is folded into p's down projection, W_down <- T^T W_down (and its
 * bias, if any), which becomes F32: the model keeps its architecture. Runs are fitted in
 * order, each on the model with the earlier runs already compensated. A run starting at
 * block 0 has no block before it and is not compensated (said in the result).
 *
 * Decoders (llama family) only: SQZ_ERR_UNSUPPORTED for an encoder.
 */
#ifndef SQZ_LAYERDROP_H
#define SQZ_LAYERDROP_H

#include <stdbool.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/calib.h"
#include "sqz/model.h"
#include "sqz/runtime.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SQZ_LAYERDROP_METHOD_MAP(X)                                       \
    X(LIST, "list", "explicit block indices")                             \
    X(BI, "bi", "lowest block influence 1 - E[cos(in, out)] (ShortGPT)")  \
    X(ANGULAR, "angular", "the run of N blocks of lowest angular distance (Gromov et al.)") \
    X(KLD, "kld", "lowest measured KLD of the model without that block alone") \
    X(LAST, "last", "the last N blocks (baseline)")                       \
    X(RANDOM, "random", "N blocks drawn at random from seed (baseline)")

typedef enum sqz_layerdrop_method {
#define SQZ__LD_ENUM(name, word, help) SQZ_LAYERDROP_##name,
    SQZ_LAYERDROP_METHOD_MAP(SQZ__LD_ENUM)
#undef SQZ__LD_ENUM
    SQZ_LAYERDROP_METHOD_COUNT
} sqz_layerdrop_method;

/* The method's word ("bi"); "invalid" when out of range. Static. */
SQZ_API const char *sqz_layerdrop_method_name(sqz_layerdrop_method m);

/* Scores of the blocks that were active in one scoring run (see the header comment). */
typedef struct sqz_layerdrop_scores {
    int32_t n_layers;   /* blocks of the model */
    int32_t n_active;   /* blocks that ran (the others were skipped) */
    int32_t *active;    /* n_active block indices, increasing (owned) */
    double *bi;         /* n_layers; NaN for a skipped block (owned) */
    double *ang;        /* (n_active + 1) x (n_active + 1): ang[i * (n_active + 1) + j] is the
                           angular distance between the inputs of active blocks i < j (j =
                           n_active: the last output); 0 elsewhere (owned) */
    double *kld;        /* n_layers mean KLD without that block; NaN if not measured or skipped */
    double *top1;       /* n_layers top-1 agreement without that block; NaN likewise */
    int64_t n_windows, n_tokens;  /* windows and tokens of the bi / angular run */
    int64_t kld_windows, kld_tokens; /* windows and scored tokens of the KLD run; 0 if none */
    double seconds;
} sqz_layerdrop_scores;

/* The angular distance of the run of n active blocks starting at active position i
 * (i + n <= n_active); NaN out of range. */
SQZ_API double sqz_layerdrop_ang(const sqz_layerdrop_scores *s, int32_t i, int32_t n);

/* Frees what s owns and zeroes it. NULL is fine. */
SQZ_API void sqz_layerdrop_scores_free(sqz_layerdrop_scores *s);

typedef struct sqz_layerdrop_score_opts {
    const bool *skip;         /* n_layers flags: blocks to skip (as if removed); NULL = none */
    bool kld;                 /* also measure kld / top1 (costly) */
    int64_t kld_windows;      /* KLD on the first K windows; 0 = all */
    sqz_progress_fn progress; /* optional: done / total in block passes */
    void *progress_user;
} sqz_layerdrop_score_opts;

/*
 * Scores the blocks of the decoder run by session s (made on the model whose blocks are
 * scored, max_tokens >= w->ctx) on every window of w. *out is owned by the caller
 * (sqz_layerdrop_scores_free); zeroed on error. The windows run through the session's step
 * API (sqz_session_embed / _block / _head); its hook is not touched. Memory: (n_active + 1) x ctx x d_model floats of states,
 * and with kld two (ctx / 2) x vocab logit buffers.
 * Errors: SQZ_ERR_UNSUPPORTED (an encoder), SQZ_ERR_INVALID_ARG (windows longer than the
 * session's cache, every block skipped), SQZ_ERR_NOMEM, the forward pass's errors.
 */
SQZ_API sqz_status sqz_layerdrop_score(sqz_session *s, const sqz_calib_windows *w, const sqz_layerdrop_score_opts *o,
                                       sqz_layerdrop_scores *out);

typedef struct sqz_layerdrop_opts {
    sqz_layerdrop_method method;
    int32_t count;            /* blocks to remove, 1 <= count < n_layers (ignored for LIST) */
    const int32_t *list;      /* LIST: the blocks, increasing; n_list of them */
    int32_t n_list;
    bool iterative;           /* bi, angular, kld: one at a time, scoring again after each */
    bool compensate;          /* fit and fold the ReplaceMe maps (sqz_layerdrop_compensate) */
    bool all_scores;          /* measure kld too when the method does not need it */
    uint64_t seed;            /* random */
    int64_t kld_windows;      /* see sqz_layerdrop_score_opts; 0 = all */
    double ridge;             /* compensation's relative ridge; 0 = 1e-4 */
    sqz_progress_fn progress; /* optional */
    void *progress_user;
} sqz_layerdrop_opts;

/* Defaults: LIST, no count, not iterative, no compensation, seed 1, kld_windows 8, ridge 1e-4. */
SQZ_API sqz_layerdrop_opts sqz_layerdrop_default_opts(void);

/* One block of the model as it was before removal. */
typedef struct sqz_layerdrop_layer {
    int32_t layer;
    double bi;          /* from the first scoring run (the whole model); NaN if not scored */
    double angular;     /* ang of the run of `count` blocks starting here; NaN past the end */
    double kld, top1;   /* removing this block alone; NaN if not measured */
    int32_t step;       /* 0: kept; k >= 1: removed (iterative: at step k; else 1) */
} sqz_layerdrop_layer;

/* One fitted compensation map. */
typedef struct sqz_layerdrop_comp {
    int32_t into;          /* the kept block whose down projection took T */
    int32_t first, last;   /* the run of removed blocks it stands for */
    double err_before;     /* ||O - L||_F / ||L||_F on the calibration windows: p's output O vs
                              the removed run's output L, without T */
    double err_after;      /* the same with T folded in */
} sqz_layerdrop_comp;

typedef struct sqz_layerdrop_result {
    sqz_layerdrop_method method;
    bool iterative, compensated;
    int32_t n_layers;            /* blocks before removal */
    int32_t count;               /* blocks removed */
    sqz_layerdrop_layer *layers; /* n_layers rows (owned) */
    int32_t *removed;            /* count block indices, increasing (owned) */
    sqz_layerdrop_comp *comp;    /* n_comp maps (owned) */
    int32_t n_comp;
    char note[160];              /* what could not be done ("run 0-1 starts at block 0: not compensated") */
    int64_t n_windows, n_tokens; /* of the first scoring run (0 when nothing was scored) */
    int64_t kld_windows, kld_tokens;
    double seconds_score, seconds_comp;
} sqz_layerdrop_result;

/* Frees what r owns and zeroes it. NULL is fine. */
SQZ_API void sqz_layerdrop_result_free(sqz_layerdrop_result *r);

/*
 * Chooses o->count blocks of m by o->method (or takes o->list), compensates when asked, and
 * removes them (sqz_model_remove_layers): m has n_layers - count blocks after. w (calibration
 * windows) is needed by bi, angular, kld and compensation, and may be NULL otherwise; so
 * (may be NULL: defaults) makes the sessions (max_tokens is set from w). *res is filled
 * (free with sqz_layerdrop_result_free) with the scores and the choice, also on failure with
 * what was done. On failure before the removal the model may hold compensated down
 * projections but still has all its blocks.
 * Errors: SQZ_ERR_INVALID_ARG (count out of [1, n_layers), a bad list, windows missing for a
 * method that needs them, iterative with last / random / list), SQZ_ERR_UNSUPPORTED (an
 * encoder), the scoring, compensation and editing errors.
 */
SQZ_API sqz_status sqz_layerdrop_run(sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                                     const sqz_layerdrop_opts *o, sqz_layerdrop_result *res);

/* Chooses o->count blocks without running anything: by o->method from sc, the scores of the
 * whole model (every block active; bi, angular, kld need theirs measured), or the baselines
 * (last, random: sc may be NULL). out (capacity n_layers) gets the blocks, increasing. For
 * comparing methods on one set of scores; iterative choices need sqz_layerdrop_run.
 * Errors: SQZ_ERR_INVALID_ARG (count out of [1, n_layers), LIST, iterative, scores missing or
 * of another model), SQZ_ERR_NUMERIC (fewer finite scores than blocks to choose). */
SQZ_API sqz_status sqz_layerdrop_choose(const sqz_layerdrop_scores *sc, int32_t n_layers, const sqz_layerdrop_opts *o,
                                        int32_t *out);

/*
 * Fits and folds the compensation maps for removing removed[0..n) (increasing) from m, which
 * still has every block; appends one row per map to res->comp (res may hold a choice
 * already). Sessions are made from so (max_tokens from w). The blocks are not removed here.
 * Errors: SQZ_ERR_INVALID_ARG, SQZ_ERR_UNSUPPORTED (an encoder), SQZ_ERR_NUMERIC (a system
 * that is not positive definite), the forward pass's and editing errors.
 */
SQZ_API sqz_status sqz_layerdrop_compensate(sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                                            const int32_t *removed, int32_t n, double ridge, sqz_layerdrop_result *res);

#ifdef __cplusplus
}
#endif
#endif
