/*
 * kernels/cpu/attn.h - the CPU's scaled dot-product attention (attn.c): the runtime's attention
 * over its key/value cache and the CPU backend's attention slot. Internal.
 */
#ifndef SQZ_KERNELS_CPU_ATTN_H
#define SQZ_KERNELS_CPU_ATTN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/backend_impl.h"
#include "kernels/cpu/pool.h"
#include "kernels/cpu/qmatmul.h"
#include "sqz/backend.h"

enum { SQZ__ATTN_QBLOCK = 128 }; /* queries per block of the gathered products (causal blocking) */

/* The caller's scratch: scores, at least (group * min(n, QBLOCK), pos + n) floats for the blocked
 * products, or (threads, few_ld) with few_ld >= pos + n for the few-queries path; qg, (group *
 * min(n, QBLOCK), head_dim) floats; dot, the f32 dot product of the few-queries path. */
typedef struct sqz__attn_scratch {
    float *scores;
    int64_t few_ld;
    float *qg;
    sqz__dot_fn dot;
    /* optional (NULL: plain causal): per query i, vis[3i..3i+2] = lo, hi, own: it sees keys
     * [lo, hi) and [own, pos + i] only (sequences batched in one window; causal, no window) */
    const int64_t *vis;
} sqz__attn_scratch;

/* a's attention (sqz/backend.h's definition) on host memory. few: split by query head over the
 * pool (meant for a few queries; the scores scratch then holds a row per pool thread), else the
 * gathered products. The two paths sum in different orders; the caller's choice must not depend
 * on anything but the shapes if its results are to be reproducible. */
void sqz__attention_cpu(sqz__pool *p, const sqz_attention_args *a, const sqz__attn_scratch *w, bool few);

/* Floats of scratch (scores then qg) for a on `threads` threads, and the few path's row stride. */
size_t sqz__attention_scratch_floats(const sqz_attention_args *a, int threads, bool few, int64_t *few_ld);

#endif
