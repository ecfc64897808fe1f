/*
 * calib/observe_internal.h - the observer's state, shared by observe.c (collecting) and
 * observe_merge.c (merging the observers of consecutive windows, packing one for the wire).
 */
#ifndef SQZ_CALIB_OBSERVE_INTERNAL_H
#define SQZ_CALIB_OBSERVE_INTERNAL_H

#include "kernels/cpu/backend_impl.h"
#include "calib/calib_internal.h"
#include "kernels/cpu/linalg.h"

enum { XTX_CHUNK = SQZ_XTX_CHUNK }; /* rows converted to double per update of X^T X */
enum { SQZ__PANEL_ROWS = SQZ__XTX_PANEL }; /* X^T X is formed in panels of this many rows (fixed: a job's
                                   ranks hold different panels, calib/panel.c) */

/* The one arithmetic of the Hessian, plain run and jobs alike: sqz__xtx_panel (kernels/cpu/linalg.h). */

typedef struct obs_input {
    uint32_t roles;
    int64_t n_in;
    int64_t n_tokens;
    double *xtx;           /* (n_in, n_in): upper triangle accumulated */
    double *sum_x2, *sum_abs, *sum_x;
    float *absmax;
    float *x;              /* (x_cap, n_in) */
    int64_t n_x, x_cap;
    sqz_act_hist hist;
    bool hist_init;
    void **dev_hp;         /* device backend, no --gpu-mem: the upper triangle's row panels
                              (observe_xtx.c) accumulated there, one allocation each */
    double *hacc;          /* device backend under --gpu-mem: the panels' sums kept on the host
                              between updates (xtx itself, or its own when xtx holds sums) */
    bool dev_used;         /* the panels hold a sum (else the next update has beta 0) */
    void *dev_cs;          /* device backend: sum_x2, sum_abs, sum_x (k doubles each) and absmax (k
                              floats) continued there from the host's (colstats), until the flush */
    bool host_used;        /* xtx holds sums already (a device sum is added, not copied, into it) */
    double *dxxt;          /* (n_in, n_in) GPTAQ's sum (x - x~) x~^T, full (observe_dx.c) */
} obs_input;

/* One input of a mixture's experts (their gate|up input, or their down input), per expert
 * (observe_experts.c). */
typedef struct obs_experts {
    uint32_t roles;
    int64_t n_in;
    int64_t n_mat;         /* experts seen so far: the largest index + 1 */
    int64_t *n_tokens;     /* (n_mat) */
    double **sum_x2;       /* (n_mat) of (n_in), NULL until the expert's first rows */
    double **xtx;          /* (n_mat) of (n_in, n_in), upper triangle, from an expert's n_in-th token on; NULL
                              when X^T X is not collected */
    float **rows;          /* (n_mat) of (n_in, n_in): an expert's rows until it has seen n_in tokens */
} obs_experts;
enum { SQZ__MAX_EXPERT_INPUTS = 2 };

/* GPTAQ: the rows of one linear input in the ORIGINAL model for the current window. */
typedef struct sqz__calib_captured {
    uint32_t roles;
    int64_t n_in;
    float *x;              /* (n_tokens, n_in) */
    size_t cap;            /* floats */
    int64_t n_tokens, used; /* rows captured / rows paired so far */
} sqz__calib_captured;

/* GPTAQ: what the float model's stream gave block `layer`'s linear inputs for one window
 * (observe_dx.c), and the observer's conversion buffers for dXX^T. */
typedef struct sqz__calib_capture {
    int32_t layer;
    int n_inputs;
    sqz__calib_captured in[SQZ_CALIB_MAX_INPUTS];
    double *dd, *dx;       /* (SQZ_XTX_CHUNK, d_cap) each: x - x~ and x~ in double */
    int64_t d_cap;
} sqz__calib_capture;

struct sqz_calib_observer {
    int32_t layer;
    obs_experts xin[SQZ__MAX_EXPERT_INPUTS]; /* a mixture's experts' inputs (observe_experts.c) */
    int n_xin;
    double *xbuf;          /* rows of an expert event in double, for dsyrk */
    int64_t xbuf_n;
    double *reap;          /* (n_reap) per expert: sum of routing weight x ||output|| (EXPERT_OUT events) */
    int64_t n_reap;
    sqz_calib_observe_opts o;
    int64_t stride;        /* sample every stride-th row */
    obs_input in[SQZ_CALIB_MAX_INPUTS];
    int n_inputs;
    double *dbuf;          /* (XTX_CHUNK, max n_in) */
    int64_t dbuf_n_in;
    void *dev_x;           /* device backend: an event's rows uploaded (dev_x_bytes) */
    size_t dev_x_bytes;
    void *dev_pan;         /* under --gpu-mem: the one device panel every update passes through */
    size_t dev_pan_bytes;
    double *stage;         /* a panel's host copy on its way (stage_bytes; page-locked when it can be) */
    size_t stage_bytes;
    bool stage_pinned;
    float *dev_blk;        /* a device copy of the block input for layer scoring's cosines ... */
    double *dev_cos;       /* ... and the window's cosines there (dev_blk_n rows of dim floats) */
    int64_t dev_blk_n;
    float *blk_in;         /* copy of the block input of the current window */
    size_t blk_cap;        /* floats */
    int64_t blk_n, blk_d;
    double cos_sum, cos_min;
    int64_t cos_n;
    int64_t token_base;    /* index, among all calibration tokens, of the first one observed */
    int64_t rows_cap;      /* at most this many sample rows can fall into what it observes */
    double hist_w0[SQZ_CALIB_MAX_INPUTS]; /* histogram bin width of each input (in the order they
                                             are met) as the first window set it; 0: its own */
    sqz__calib_capture *pair; /* GPTAQ: the float model's rows of the current window (borrowed) */
};

/* Adding one token's cosine (sqz__cosine_row, kernels/cpu/linalg.h: the block_io statistics'
 * arithmetic, also the cosine slot's) to the block's sums. */
void sqz__calib_cos_add(sqz_calib_observer *ob, double c);

/* ---- distributed calibration (calib/observe_merge.c, calib/reduce.c) --------------------
 * The statistics of a block are the merge of per-window observers along one fixed binary
 * tree over the windows (sqz__calib_tree_split), whatever the number of ranks: every
 * floating-point sum is then formed by the same additions of the same operands, and the
 * statistics are the same bits on 1, 2 or N ranks. */

/* An observer of block `layer` for the windows [w0, w1) of n_windows windows of ctx tokens. */
sqz_status sqz__calib_observer_range(int32_t layer, const sqz_calib_observe_opts *o, int64_t w0, int64_t w1,
                                     int64_t ctx, sqz_calib_observer **out);
/* dst += src, src observing the windows right after dst's: sums add, maxima take the larger,
 * sample rows are appended (up to sample_rows), histograms merge (sqz_act_hist_merge). */
sqz_status sqz__calib_observer_merge(sqz_calib_observer *dst, const sqz_calib_observer *src);
/* Brings device sums to the host (sqz__calib_xtx_to_host) and frees the scratch buffers (an
 * observer that will observe no more). */
sqz_status sqz__calib_observer_seal(sqz_calib_observer *ob);
/* Bytes of statistics it holds (the accumulators, not the scratch). */
size_t sqz__calib_observer_bytes(const sqz_calib_observer *ob);
/* The observer as bytes (native byte order: ranks of one architecture), appended to *buf
 * (realloc'd to *cap, *len updated): all its inputs (only < 0) or input `only` alone. */
sqz_status sqz__calib_observer_pack(const sqz_calib_observer *ob, int only, uint8_t **buf, size_t *len,
                                    size_t *cap);
/* Moves input j of src to the end of dst's inputs (src keeps an empty slot). */
sqz_status sqz__calib_observer_take_input(sqz_calib_observer *dst, sqz_calib_observer *src, int j);
/* Appends to dst an input of width n_in read by `roles` with no statistics. */
sqz_status sqz__calib_observer_stub_input(sqz_calib_observer *dst, uint32_t roles, int64_t n_in);
/* An observer from packed bytes at r (checked against the bytes left); `o` as the packer's. */
sqz_status sqz__calib_observer_unpack(sqz__reader *r, const sqz_calib_observe_opts *o, sqz_calib_observer **out);

/* ---- X^T X through the observe options' backend (calib/observe_xtx.c) ---- */
/* SQZ_ERR_UNSUPPORTED when o->backend lacks what the Hessian needs (when it is collected). */
sqz_status sqz__calib_xtx_check(const sqz_calib_observe_opts *o);
/* The upper triangle of input in's X^T X += x^T x, x (n, in->n_in): host, host-memory backend
 * (same bits) or device (the sum stays there until sqz__calib_xtx_to_host; x_dev, when not NULL,
 * holds the same rows in the backend's memory and is used instead of uploading x). */
sqz_status sqz__calib_xtx_add(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev,
                              int64_t n);
/* Every input's device sums into the host's: xtx (added when the host holds sums already), the
 * column statistics (copied: they continued the host's), and their device memory freed; nothing
 * without a device backend. */
sqz_status sqz__calib_xtx_to_host(sqz_calib_observer *ob);
/* The column statistics of input in (sum_x2, sum_abs, sum_x, absmax) over rows x (n, in->n_in):
 * on a device backend from x_dev (the same rows there, or NULL: on the host) through its colstats
 * slot, else on the host; the same bits either way (sqz/backend.h). */
sqz_status sqz__calib_colstats_add(sqz_calib_observer *ob, obs_input *in, const float *x, const float *x_dev,
                                   int64_t n);
/* Layer scoring's cosines of the window's block input (ob->blk_in, n rows) and its output x (x_dev:
 * the same rows on the device, or NULL), added in row order (sqz__calib_cos_add). */
sqz_status sqz__calib_cosines_add(sqz_calib_observer *ob, const float *x, const float *x_dev, int64_t n, int64_t d);
/* Frees an input's device sum (what it held is lost) / the observer's upload buffer. */
void sqz__calib_xtx_free_input(sqz_calib_observer *ob, obs_input *in);
void sqz__calib_xtx_free_scratch(sqz_calib_observer *ob);

/* Where the tree splits [a, b) (b - a >= 2): a + the largest power of two below b - a. */
static inline int64_t sqz__calib_tree_split(int64_t a, int64_t b) {
    int64_t p = 1;
    while (p * 2 < b - a) p *= 2;
    return a + p;
}


/* ---- GPTAQ's dXX^T (calib/observe_dx.c) ---- */
/* A hook for sqz_session_set_hook: keeps the rows of every linear input of block c->layer. */
sqz_status sqz__calib_capture_hook(void *capture, const sqz_hook_event *e);
/* Forgets the rows captured (keeps the buffers) and sets the block. */
void sqz__calib_capture_reset(sqz__calib_capture *c, int32_t layer);
/* Frees the buffers and zeroes c. NULL is fine. */
void sqz__calib_capture_free(sqz__calib_capture *c);
/* in->dxxt += (xf - x)^T x for the next n captured rows xf of the same input (ob->pair).
 * SQZ_ERR_INVALID_ARG when the float stream has no such rows; SQZ_ERR_NOMEM. */
sqz_status sqz__calib_dxxt_add(sqz_calib_observer *ob, obs_input *in, const float *x, int64_t n);
/* Pairs observer ob with the capture of the current window (NULL: none). */
static inline void sqz__calib_observer_pair(sqz_calib_observer *ob, sqz__calib_capture *c) { ob->pair = c; }

/* A mixture's expert event (in_expert > 0) into the observer's per-expert sums; finish appends one block input
 * per expert input (n_mat experts); free releases them (observe_experts.c). */
sqz_status sqz__calib_expert_add(sqz_calib_observer *ob, const sqz_hook_event *e);
sqz_status sqz__calib_expert_out(sqz_calib_observer *ob, const sqz_hook_event *e);
sqz_status sqz__calib_experts_finish(sqz_calib_observer *ob, sqz_calib_block *out);
void sqz__calib_experts_free(sqz_calib_observer *ob);

#endif
