/*
 * kernels/cpu/qidot_avx2.c - the integer products of qidot.h with AVX2 (maddubs/madd).
 * (Being written: the table is empty, every type takes the scalar kernel.)
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
const sqz__idot_fn sqz__idot_avx2[SQZ_DTYPE_COUNT] = {NULL};
#else
typedef int sqz__qidot_avx2_empty; /* ISO C: a translation unit is not empty */
#endif
