/*
 * kernels/cpu/widen.h - large matrices widened to f32 on a pool: the rows of a float or GGUF
 * block dtype are independent, so chunks of rows convert in parallel to the serial bytes.
 */
#ifndef SQZ_KERNELS_CPU_WIDEN_H
#define SQZ_KERNELS_CPU_WIDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/pool.h"
#include "sqz/dtype.h"

/* dst (n_rows, n_in) f32 = n_rows rows of dtype `from` (row_bytes each, at src) widened on pool p
 * (NULL: the calling thread) in chunks of 64 rows. Returns false when a chunk could not be
 * converted (dst then partly written: the caller's serial path names the problem). */
bool sqz__widen_rows(sqz__pool *p, sqz_dtype from, const void *src, size_t row_bytes, int64_t n_rows, int64_t n_in,
                     float *dst);

#endif
