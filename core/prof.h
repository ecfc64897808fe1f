/*
 * core/prof.h - where a long run's time goes, phase by phase (`SQZ_PROFILE=1 sqz compress ...`).
 *
 * Each phase is one row of SQZ__PROF_PHASES. A caller brackets its work with
 *     const double t0 = sqz__prof_begin();  ...  sqz__prof_end(SQZ__PROF_X, t0);
 * and the seconds and the count are summed process-wide (atomics: any thread may call it). When
 * SQZ_PROFILE is unset, sqz__prof_begin returns 0 and sqz__prof_end does nothing, so the cost is
 * one branch on a cached flag. Phases nest (a product inside a block's forward): each row is its
 * own total, not a share of its parent. sqz__prof_print writes the rows that ran, one per line,
 * to f (the caller: `sqz compress` and `sqz calibrate`, at the end).
 */
#ifndef SQZ_CORE_PROF_H
#define SQZ_CORE_PROF_H

#include <stdbool.h>
#include <stdio.h>

#define SQZ__PROF_PHASES(X)                                                                             \
    X(FWD_LINEAR, "forward: linear products (all)")                                                    \
    X(DEV_WEIGHT, "forward: weights to the device (dequantize/widen + upload)")                        \
    X(DEV_X_UP, "forward: product inputs uploaded")                                                     \
    X(DEV_MATMUL, "forward: device matmul (+ result download in the host block)")                      \
    X(DEV_PREFETCH, "forward: the next block's weights staged and queued (prefetch)")                  \
    X(DEV_BLOCK_XFER, "forward: device block rows down/up (residual, hooks' rows, keys/values; waits)")  \
    X(FWD_ATTN, "forward: attention")                                                                   \
    X(FWD_ELEMWISE, "forward: element-wise ops (norms, rotary, SwiGLU/GELU, residual adds)")            \
    X(CALIB_STATS, "calibration: a block's statistics pass over the windows (forward + observers)")    \
    X(CALIB_BLOCK, "calibration: the block's callback (compress: methods, validation, attach)")        \
    X(CALIB_RECOMPUTE, "calibration: the block's outputs recomputed with its new weights")             \
    X(OBSERVE, "calibration: observers (statistics hooks)")                                             \
    X(OBS_XTX, "calibration: Hessian sums (xtx)")                                                       \
    X(OBS_FINISH, "calibration: a block's statistics sealed (Hessians included)")                     \
    X(OBS_H_DOWN, "calibration: device Hessians to the host")                                           \
    X(GPTQ_PREP, "gptq: damped Cholesky + inverse (prepare)")                                           \
    X(GPTQ_PERMUTE, "gptq: weights permuted (act order)")                                               \
    X(GPTQ_GRIDS, "gptq: static grids (K-quant scale searches)")                                        \
    X(GPTQ_DEV_INIT, "gptq: weights transposed + uploaded")                                             \
    X(GPTQ_SWEEP, "gptq: host row sweeps")                                                              \
    X(GPTQ_XFER, "gptq: column blocks down / errors up")                                                \
    X(GPTQ_ENCODE, "gptq: codes packed into blocks")                                                    \
    X(GLOBALS, "quant: token embedding + output (mix)")

typedef enum {
#define SQZ__PROF_ENUM(id, label) SQZ__PROF_##id,
    SQZ__PROF_PHASES(SQZ__PROF_ENUM)
#undef SQZ__PROF_ENUM
        SQZ__PROF_COUNT
} sqz__prof_phase;

/* Whether SQZ_PROFILE is set (read once). */
bool sqz__prof_on(void);
/* A start time (monotonic seconds) when profiling, else 0. */
double sqz__prof_begin(void);
/* Adds now - t0 to phase p (nothing when t0 is 0: profiling off). */
void sqz__prof_end(sqz__prof_phase p, double t0);
/* The phases that ran, "profile  <seconds> s  <count>x  <label>", one line each; nothing when off. */
void sqz__prof_print(FILE *f);

#endif
