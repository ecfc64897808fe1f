/*
 * quant/chol_tiles.h - GPTQ's factor on a device backend in f64 tiles (chol_tiles.c), so that a
 * Hessian wider than the device memory --gpu-mem leaves can be factored, with the same bits as
 * when every tile fits. Internal.
 */
#ifndef SQZ_QUANT_CHOL_TILES_H
#define SQZ_QUANT_CHOL_TILES_H

#include <stddef.h>
#include <stdint.h>

#include "sqz/backend.h"

enum { SQZ__CHOL_TILE = 512 }; /* rows and columns per tile (fixed: the factor's bits depend on it) */

typedef struct sqz__chol_tiles_stats {
    int64_t tiles;         /* per side */
    int64_t slots;         /* device tiles held at once (beside two temporaries) */
    int64_t loads, stores; /* tiles copied to / from the device */
} sqz__chol_tiles_stats;

/* h (n, n) f64 row-major on the host, symmetric positive definite in its upper triangle (the
 * damped Hessian; the lower triangle is not read), becomes U, upper triangular with U^T U = H^-1
 * and its strictly lower part 0 (kernels/cpu/linalg.h sqz__chol_inverse_upper's contract), formed
 * by be's tile slots (SQZ_OP_TILES) on tiles in be's memory. budget: device bytes the tiles may
 * take (0: every tile of the triangle at once, about n^2 / 2 doubles); the result does not depend
 * on it. SQZ_ERR_NUMERIC when H is not positive definite or U is not finite (h unspecified),
 * SQZ_ERR_NOMEM when the budget cannot hold three tiles (or all, when fewer), the
 * temporaries and a quarter tile of library workspace, SQZ_ERR_UNSUPPORTED without the slots.
 * stats (may be NULL) says what moved. */
sqz_status sqz__chol_tiles(sqz_backend *be, double *h, int64_t n, size_t budget, sqz__chol_tiles_stats *stats);

/* Tests: the tile size (0: SQZ__CHOL_TILE), so that small matrices take many tiles. */
void sqz__chol_tiles_set_size(int64_t t);
int64_t sqz__chol_tiles_size(void);

#endif
