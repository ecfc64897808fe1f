/*
 * kernels/cpu/qidot4_vnni.c - the 4-token integer products of qidot.h with AVX-512 VNNI.
 * (Being written: the table is empty, every type takes the one-row kernel per token.)
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
const sqz__idot4_fn sqz__idot4_vnni[SQZ_DTYPE_COUNT] = {NULL};
#else
typedef int sqz__qidot4_vnni_empty; /* ISO C: a translation unit is not empty */
#endif
