/*
 * kernels/cpu/linalg.h - the CPU backend's dense linear algebra for the calibration loop
 * (backend_calib.c, chol.c): the functions behind its sgemm, xtx and chol_inv_upper slots
 * (sqz/backend.h), also called directly by the modules above on host memory. Internal.
 */
#ifndef SQZ_KERNELS_CPU_LINALG_H
#define SQZ_KERNELS_CPU_LINALG_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/backend_impl.h"
#include "sqz/backend.h"
#include "sqz/status.h"

/* The upper Cholesky factor U of H^-1 (H^-1 = U^T U) for a symmetric positive definite
 * H (n, n) double row-major, overwritten (strictly lower part 0). SQZ_ERR_NUMERIC when H is
 * not positive definite or the factor is not finite; SQZ_ERR_NOMEM. */
sqz_status sqz__chol_inverse_upper(double *h, int64_t n);

/* In-place lower Cholesky of a (n, n) row-major with leading dimension lda (the strictly upper part
 * untouched): false when a pivot is not positive. The CPU's dpotrf slot, and the step above. */
bool sqz__chol_lower(double *a, int64_t n, int64_t lda);

/* The CPU's tile slots (sqz/backend.h, SQZ_OP_TILES) on host memory: cblas_dgemm, cblas_dtrsm. */
void sqz__dgemm_host(const sqz_dgemm_args *a);
void sqz__dtrsm_host(const sqz_dtrsm_args *a);

/* The observers' statistics on host memory (sqz/backend.h sqz_colstats_args, sqz_cosine_args): the
 * CPU's colstats and cosine slots, and the observers' own arithmetic without a backend. */
void sqz__colstats_host(const sqz_colstats_args *a);
double sqz__cosine_row(const float *a, const float *b, int64_t d);
void sqz__cosine_host(const sqz_cosine_args *a);

/* Rows [a, b) of the upper triangle of X^T X += D^T D, D (nr, n) row-major doubles; h points at
 * row a of the accumulator (row stride n, columns >= a + r of row r are added): the diagonal block
 * by dsyrk, the rest by dgemm. The one arithmetic of the Hessian, plain run and jobs alike. */
void sqz__xtx_panel(const double *d, int64_t nr, int64_t n, int64_t a, int64_t b, double *h);
/* The same with h pointing at element (a, a) of an accumulator of row stride ldh (a row panel). */
void sqz__xtx_panel_ld(const double *d, int64_t nr, int64_t n, int64_t a, int64_t b, double *h, int64_t ldh);

/* Columns per panel of sqz__xtx_panel's callers (fixed: a job's ranks hold different panels). */
enum { SQZ__XTX_PANEL = 128 };

/* The xtx slot on host memory: rows converted to double SQZ_XTX_CHUNK at a time into dbuf
 * (SQZ_XTX_CHUNK * k doubles, the caller's), then sqz__xtx_panel over panels of SQZ__XTX_PANEL
 * columns (a row panel: those of its rows, sqz_xtx_args). beta 0 zeroes the upper triangle (of the
 * panel's rows) first. */
void sqz__xtx_host(const sqz_xtx_args *a, double *dbuf);

/* SQZ_ERR_INVALID_ARG (naming `who`) unless a is the whole matrix or a row panel as sqz_xtx_args
 * allows. */
sqz_status sqz__xtx_check_panel(const sqz_xtx_args *a, const char *who);

/* The CPU backend's table (backend_cpu.c), for sqz_backend_cpu_offload (backend_offload.c). */
const sqz_backend_ops *sqz__cpu_ops(void);

/* The sgemm slot on host memory (cblas_sgemm). */
void sqz__sgemm_host(const sqz_sgemm_args *a);

#endif
