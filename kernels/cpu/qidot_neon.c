/*
 * kernels/cpu/qidot_neon.c - the integer products of qidot.h with NEON with the dot-product extension (sdot).
 * (Being written: the table is empty, every type takes the scalar kernel.)
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_NEON
const sqz__idot_fn sqz__idot_neon[SQZ_DTYPE_COUNT] = {NULL};
#else
typedef int sqz__qidot_neon_empty; /* ISO C: a translation unit is not empty */
#endif
