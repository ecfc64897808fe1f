/*
 * kernels/cpu/qidot_vnni.c - the integer products of qidot.h with AVX-512F/BW/VL with VNNI (dpbusd).
 * (Being written: the table is empty, every type takes the scalar kernel.)
 */
#include "kernels/cpu/qidot.h"

#if SQZ__QMM_X86
const sqz__idot_fn sqz__idot_vnni[SQZ_DTYPE_COUNT] = {NULL};
#else
typedef int sqz__qidot_vnni_empty; /* ISO C: a translation unit is not empty */
#endif
