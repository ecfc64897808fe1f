/*
 * kernels/cpu/qidot.c - the table of integer-product kernels (qidot.h): for each weight type its
 * scalar reference, and the variant each instruction set takes from its file's table.
 */
#include "kernels/cpu/qidot.h"
#include "kernels/cpu/fgemm.h"

#include <stdio.h>

#if SQZ__QMM_NEON && defined(__linux__)
#include <sys/auxv.h>
#endif

static const sqz__idot_fn ref_rows[SQZ_DTYPE_COUNT] = {
    [SQZ_DTYPE_Q8_0] = sqz__idot_q8_0_ref,     [SQZ_DTYPE_Q4_0] = sqz__idot_q4_0_ref,
    [SQZ_DTYPE_Q4_1] = sqz__idot_q4_1_ref,     [SQZ_DTYPE_Q5_0] = sqz__idot_q5_0_ref,
    [SQZ_DTYPE_Q5_1] = sqz__idot_q5_1_ref,     [SQZ_DTYPE_IQ4_NL] = sqz__idot_iq4_nl_ref,
    [SQZ_DTYPE_Q2_K] = sqz__idot_q2_K_ref,     [SQZ_DTYPE_Q3_K] = sqz__idot_q3_K_ref,
    [SQZ_DTYPE_Q4_K] = sqz__idot_q4_K_ref,     [SQZ_DTYPE_Q5_K] = sqz__idot_q5_K_ref,
    [SQZ_DTYPE_Q6_K] = sqz__idot_q6_K_ref,     [SQZ_DTYPE_IQ4_XS] = sqz__idot_iq4_xs_ref,
    [SQZ_DTYPE_IQ3_S] = sqz__idot_iq3_s_ref,     [SQZ_DTYPE_MXFP4] = sqz__idot_mxfp4_ref,
};

#if SQZ__QMM_X86
static bool has_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}
#endif
#if SQZ__QMM_NEON
static bool has_dotprod(void) {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
    return false;
#endif
}
#endif

/* The variant's table for isa on this CPU, and its name; NULL: the scalar kernels. */
static const sqz__idot_fn *variant(sqz__qmm_isa isa, const char **name) {
    *name = "scalar";
#if SQZ__QMM_X86
    if (isa == SQZ__ISA_AVX512 && has_vnni()) { *name = "avx512vnni"; return sqz__idot_vnni; }
    if (isa == SQZ__ISA_AVX512 || isa == SQZ__ISA_AVX2) { *name = "avx2"; return sqz__idot_avx2; }
#endif
#if SQZ__QMM_NEON
    if (isa == SQZ__ISA_NEON && has_dotprod()) { *name = "neon-dot"; return sqz__idot_neon; }
#endif
    (void)isa;
    return NULL;
}

sqz__aq_quantize_fn sqz__qmm_aq_quantizer(sqz__qmm_isa isa) {
#if SQZ__QMM_X86
    __builtin_cpu_init();
    if (isa == SQZ__ISA_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return sqz__aq_quantize_avx512;
    if ((isa == SQZ__ISA_AVX512 || isa == SQZ__ISA_AVX2) && __builtin_cpu_supports("avx2")) return sqz__aq_quantize_avx2;
#endif
    (void)isa;
    return sqz__aq_quantize;
}

sqz__idot_fn sqz__qmm_idot(sqz_dtype t, sqz__qmm_isa isa) {
    if ((unsigned)t >= SQZ_DTYPE_COUNT || !ref_rows[t]) return NULL;
    const char *name;
    const sqz__idot_fn *v = variant(isa, &name);
    return v && v[t] ? v[t] : ref_rows[t];
}

const char *sqz__qmm_idot_name(sqz_dtype t, sqz__qmm_isa isa) {
    if ((unsigned)t >= SQZ_DTYPE_COUNT || !ref_rows[t]) return "none";
    const char *name;
    const sqz__idot_fn *v = variant(isa, &name);
    return v && v[t] ? name : "scalar";
}

/* The several-token kernel of t (eight tokens or four) where isa takes the VNNI variant, else NULL. */
static sqz__idot4_fn wide(sqz_dtype t, sqz__qmm_isa isa, bool eight) {
    const char *name;
    if ((unsigned)t >= SQZ_DTYPE_COUNT || !ref_rows[t]) return NULL;
#if SQZ__QMM_X86
    if (variant(isa, &name) == sqz__idot_vnni) return (eight ? sqz__idot8_vnni : sqz__idot4_vnni)[t];
#endif
    (void)isa, (void)name, (void)eight;
    return NULL;
}

#if SQZ__QMM_X86
static const sqz__qgemm_impl qgemm_vnni = {sqz__qgemm_vnni_rows, sqz__qgemm_scratch_bytes, sqz__qgemm_xsums,
                                           "avx512vnni"};
static const sqz__qgemm_impl qgemm_avx2 = {sqz__qgemm_avx2_rows, sqz__qgemm_avx2_scratch_bytes,
                                           sqz__qgemm_xsums_avx2, "avx2"};
#endif

const sqz__qgemm_impl *sqz__qmm_qgemm_impl(sqz_dtype t, sqz__qmm_isa isa) {
    const char *name;
    if ((unsigned)t >= SQZ_DTYPE_COUNT || !ref_rows[t]) return NULL;
#if SQZ__QMM_X86
    const sqz__idot_fn *v = variant(isa, &name);
    if (v == sqz__idot_vnni) return sqz__qgemm_vnni_has(t) ? &qgemm_vnni : NULL;
    if (v == sqz__idot_avx2) return sqz__qgemm_avx2_has(t) ? &qgemm_avx2 : NULL;
#endif
    (void)isa, (void)name;
    return NULL;
}

bool sqz__qmm_qgemm(sqz_dtype t, sqz__qmm_isa isa) { return sqz__qmm_qgemm_impl(t, isa) != NULL; }

sqz__idot4_fn sqz__qmm_idot4(sqz_dtype t, sqz__qmm_isa isa) { return wide(t, isa, false); }
sqz__idot4_fn sqz__qmm_idot8(sqz_dtype t, sqz__qmm_isa isa) { return wide(t, isa, true); }

const char *sqz_cpu_kernels(void) {
    static char text[160];
    const sqz__qmm_isa isa = sqz__qmm_isa_best();
    const sqz__fgemm_impl *G = sqz__fgemm_for(isa);
    snprintf(text, sizeof text, "stored weights %s (many tokens: %s%s), q8 integer products %s",
             sqz__qmm_isa_name(isa), G ? "sqz's GEMM " : "sgemm", G ? G->name : "", sqz__qmm_idot_name(SQZ_DTYPE_Q4_K, isa));
    return text;
}
