/*
 * compress/pass_quant.c - the quantization pass: its SPEC declared as option rows (parsed by
 * the generic parser of sqz/options.h), the rules between options, the statistics it needs,
 * and run_block (compress/pass_quant_block.c). sqz_compress_spec_parse is this pass's parser.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "quant/quant_internal.h"


enum { F_INT8, F_W8A8, F_INT4, F_Q8_0, F_Q4_0, F_Q4_1, F_Q2_K, F_Q3_K, F_Q4_K, F_Q5_K, F_Q6_K, F_Q5_0, F_Q5_1,
       F_IQ4_NL, F_IQ4_XS, F_IQ3_S, F_MXFP4, F_FP8, F_FP8_DYNAMIC, F_FP8_STATIC, F_NVFP4, F_Q3_K_M, F_Q4_K_M, F_Q5_K_M, F_Q3_K_S, F_Q3_K_L, F_Q4_K_S, F_Q5_K_S,
       F_IQ3_M, F_MXFP4_MOE, F_AUTO, N_FORMATS };
/* The format rows: the SPEC's name and the quantization format it writes (a mix: its base type's;
 * auto: the type it measures from). The choices of the format option are these names, joined once. */
static const struct { const char *name; sqz_qformat fmt; } formats[N_FORMATS] = {
    [F_INT8] = {"int8", SQZ_QFMT_I8},        [F_W8A8] = {"w8a8", SQZ_QFMT_I8},     [F_INT4] = {"int4", SQZ_QFMT_I4_SYM},
    [F_Q8_0] = {"q8_0", SQZ_QFMT_Q8_0},      [F_Q4_0] = {"q4_0", SQZ_QFMT_Q4_0},   [F_Q4_1] = {"q4_1", SQZ_QFMT_Q4_1},
    [F_Q2_K] = {"q2_k", SQZ_QFMT_Q2_K},      [F_Q3_K] = {"q3_k", SQZ_QFMT_Q3_K},   [F_Q4_K] = {"q4_k", SQZ_QFMT_Q4_K},
    [F_Q5_K] = {"q5_k", SQZ_QFMT_Q5_K},      [F_Q6_K] = {"q6_k", SQZ_QFMT_Q6_K},   [F_Q5_0] = {"q5_0", SQZ_QFMT_Q5_0},
    [F_Q5_1] = {"q5_1", SQZ_QFMT_Q5_1},      [F_IQ4_NL] = {"iq4_nl", SQZ_QFMT_IQ4_NL},
    [F_IQ4_XS] = {"iq4_xs", SQZ_QFMT_IQ4_XS}, [F_IQ3_S] = {"iq3_s", SQZ_QFMT_IQ3_S}, [F_MXFP4] = {"mxfp4", SQZ_QFMT_MXFP4},
    [F_FP8] = {"fp8", SQZ_QFMT_FP8},         [F_FP8_DYNAMIC] = {"fp8_dynamic", SQZ_QFMT_FP8},
    [F_FP8_STATIC] = {"fp8_static", SQZ_QFMT_FP8},
    [F_NVFP4] = {"nvfp4", SQZ_QFMT_NVFP4},
    [F_Q3_K_M] = {"q3_k_m", SQZ_QFMT_Q3_K},  [F_Q4_K_M] = {"q4_k_m", SQZ_QFMT_Q4_K}, [F_Q5_K_M] = {"q5_k_m", SQZ_QFMT_Q5_K},
    [F_Q3_K_S] = {"q3_k_s", SQZ_QFMT_Q3_K},  [F_Q3_K_L] = {"q3_k_l", SQZ_QFMT_Q3_K}, [F_Q4_K_S] = {"q4_k_s", SQZ_QFMT_Q4_K},
    [F_Q5_K_S] = {"q5_k_s", SQZ_QFMT_Q5_K},  [F_IQ3_M] = {"iq3_m", SQZ_QFMT_IQ3_S},
    [F_MXFP4_MOE] = {"mxfp4_moe", SQZ_QFMT_MXFP4},   [F_AUTO] = {"auto", SQZ_QFMT_Q4_K},
};
static char format_choices[256];
/* the formats that name a whole-model mix of quant/mix.c (llama.cpp's ftypes) */
#define FIRST_MIX F_Q3_K_M
#define ACT_DYNAMIC 3
static const int act_values[] = {SQZ_ACT_CALIB_MINMAX, SQZ_ACT_CALIB_PERCENTILE, SQZ_ACT_CALIB_KL, ACT_DYNAMIC};
static const int group_values[] = {32, 64, 128};
static const int onoff_values[] = {1, 0};
/* GPTAQ is off unless asked for: on SmolLM2-135M it cut GPTQ's mean KLD by a fifth, on
 * Qwen2.5-Coder-0.5B by 2.5% (within the noise, top-1 lower), for 1.7x-3.7x the compress time, a
 * second stream of activations, and no MPI job of several ranks (docs/quality.md, "GPTAQ").
 * "gptaq" here makes it the default; where the statistics cannot carry dXX^T (a statistics file)
 * the default then runs plain GPTQ (q.gptaq_optional). */
#define GPTAQ_DEFAULT "no-gptaq"

/* The method choices are the names of the method table (quant/methods.c), joined once. */
static char method_choices[256];
static pthread_once_t method_once = PTHREAD_ONCE_INIT;
static void method_init(void) {
    for (int i = 0; i < N_FORMATS; i++) {
        if (i) strncat(format_choices, "|", sizeof format_choices - strlen(format_choices) - 1);
        strncat(format_choices, formats[i].name, sizeof format_choices - strlen(format_choices) - 1);
    }
    int n = 0;
    const sqz_qmethod *m = sqz_qmethods(&n);
    for (int i = 0; i < n; i++) {
        if (i) strncat(method_choices, "|", sizeof method_choices - strlen(method_choices) - 1);
        strncat(method_choices, m[i].name, sizeof method_choices - strlen(method_choices) - 1);
    }
}

#define ROW(...) {__VA_ARGS__}
static sqz_opt quant_opts[] = {
    ROW(.name = "format", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, format),
        .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .choices = NULL /* format_choices */,
        .help = "int8 (W8A16 per channel), w8a8 (+ INT8 activations), int4 (per group), q8_0 / q4_0 / q4_1 "
                "/ q5_0 / q5_1 (GGUF blocks of 32, llama.cpp's exact grids), q2_k ... q6_k (GGUF K-quants, "
                "super-blocks of 256), iq4_nl / iq4_xs (GGUF 4-bit codes into llama.cpp's non-linear table: "
                "blocks of 32, super-blocks of 256 with 6-bit block scales), mxfp4 (GGUF MXFP4, OCP microscaling FP4: "
                "E2M1 values times a power of two per 32, 4.25 bits; rtn is llama.cpp's bytes, imatrix searches the "
                "scale, gptq), fp8 (FP8 E4M3 weights, a scale per output channel: compressed-tensors' naive-quantized, "
                "W8A16-FP8; rtn or gptq), fp8_dynamic (the same with activations quantized to FP8 per token at run time, "
                "W8A8-FP8, llm-compressor's FP8_DYNAMIC), fp8_static (the same with one FP8 activation scale per layer, "
                "absmax / 448 of its calibration inputs: llm-compressor's FP8 scheme, what vLLM runs as static "
                "W8A8-FP8; needs --calib or --stats), nvfp4 (E2M1 values, an FP8 scale per 16 columns and a global scale "
                "shared by q/k/v and by gate/up: compressed-tensors' nvfp4-pack-quantized, NVFP4A16, 4.5 bits; rtn, imatrix or gptq), iq3_s (GGUF 3.44-bit lattice codebook: groups "
                "of 4 weights, super-blocks of 256; rtn, imatrix and gptq), q3_k_s / q3_k_m / q3_k_l / q4_k_s / "
                "q4_k_m / q5_k_s / q5_k_m / iq3_m (llama.cpp's whole-model mixes of those names; iq3_m: IQ3_S with "
                "Q4_K attn_v, attn_output and the first eighth of ffn_down), mxfp4_moe (llama.cpp's MXFP4_MOE: a mixture's "
                "experts MXFP4, every other matrix Q8_0): a format that names one of llama-quantize's types writes its file (':pure' below), auto "
                "(a type per matrix from its measured sensitivity, to the size bpw= asks)"),
    ROW(.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, method), .flags = SQZ_OPT_BARE,
        .choices = NULL /* method_choices */, .def = "rtn",
        .help = "imatrix: q4_0/q4_1/q5_0/q5_1/q2_k..q6_k/iq4_nl/iq4_xs/iq3_s/mxfp4/nvfp4; smoothquant: w8a8; gptq: every format "
                "(iq3_s: codewords of 4 columns); awq: not the k-quants, q5_0/q5_1, iq4, iq3_s or mxfp4"),
    ROW(.name = "act", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, act), .flags = SQZ_OPT_BARE,
        .choices = "minmax|percentile|entropy|dynamic", .values = act_values, .def = "minmax",
        .help = "w8a8: how activation scales are calibrated (dynamic: per token at run time)"),
    ROW(.name = "group", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, group), .flags = SQZ_OPT_BARE,
        .choices = "g32|g64|g128", .values = group_values, .def = "g128", .help = "int4: columns per group"),
    ROW(.name = "scheme", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, asym), .flags = SQZ_OPT_BARE,
        .choices = "sym|asym", .def = "sym", .help = "int4: symmetric, or with zero points"),
    ROW(.name = "order", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, order), .flags = SQZ_OPT_BARE,
        .choices = "act-order|no-act-order", .values = onoff_values, .def = "act-order",
        .help = "gptq: columns by decreasing Hessian diagonal, or in order"),
    ROW(.name = "groups", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, groups), .flags = SQZ_OPT_BARE,
        .choices = "static-groups|dynamic-groups", .values = onoff_values, .def = "static-groups",
        .help = "gptq: grids from the original weights, or built as the columns are reached"),
    ROW(.name = "damp", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__quant_args, damp), .flags = SQZ_OPT_OPEN_MIN,
        .min = 0, .max = 10, .def = "0.01", .help = "gptq: relative damping of the Hessian"),
    ROW(.name = "shrink", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__quant_args, shrink), .min = 0, .max = 1,
        .help = "gptq: shrink the Hessian's off-diagonal by this fraction toward its diagonal, against "
                "fitting the calibration rows (1: no error feedback; default: inputs / (inputs + calibration "
                "tokens), e.g. 0.69 for an 8960-wide ffn_down from 4096 tokens, near 0 from many tokens)"),
    ROW(.name = "gptaq", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, aq), .flags = SQZ_OPT_BARE,
        .choices = "gptaq|no-gptaq", .values = onoff_values, .def = GPTAQ_DEFAULT,
        .help = "gptq: GPTAQ (Li et al. 2025): fit the original model's outputs W X, not W X~, from a second "
                "stream through the original blocks (one process; twice the activations' memory)"),
    ROW(.name = "gptaq-alpha", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__quant_args, aq_alpha), .min = 0,
        .max = 1, .def = "0.25", .help = "gptq:gptaq: the weight of GPTAQ's correction term"),
    ROW(.name = "alpha", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__quant_args, alpha), .min = 0, .max = 1,
        .help = "smoothquant: fixed migration strength (default: searched per layer)"),
    ROW(.name = "pct", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__quant_args, pct), .min = 50, .max = 100,
        .def = "99.99", .help = "w8a8:percentile: the percentile of |x|"),
    ROW(.name = "mix", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, mix), .flags = SQZ_OPT_BARE,
        .choices = "mix|pure", .values = onoff_values, .def = "mix",
        .help = "a format that names one of llama-quantize's types (q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q6_k, "
                "iq3_s, iq4_nl, iq4_xs) means llama-quantize's file, its whole-model mix (the default: token "
                "embedding and output quantized too, the output q6_k, q4_0/q5_0's first ffn_down q4_1/q5_1 with "
                "calibration, q2_k's attn_v/ffn_down/attn_output q3_k, iq4's attn_v q5_k with grouped-query "
                "heads); pure: every block matrix in the format, the embedding and output left as they are "
                "(q3_k / q4_k / q5_k, which llama-quantize reads as *_k_m, need one of the two words; the "
                "*_k_s/_k_m/_k_l formats are mixes)"),
    ROW(.name = "bpw", .type = SQZ_OPT_FLOAT, .offset = offsetof(sqz__quant_args, bpw), .min = 2, .max = 16,
        .help = "auto: the size asked, bits per parameter of the whole model (embedding, norms included)"),
    ROW(.name = "rotation", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, rot), .flags = SQZ_OPT_BARE,
        .choices = "try-rotate|no-rotate", .values = onoff_values, .def = "no-rotate",
        .help = "auto: also plan the model rotated as --rotate all rotates it, and keep the rotated or the "
                "unrotated model, whichever the calibration trial measures better at the same size (twice "
                "auto's planning time; the f32 copies of the rotated tensors in memory)"),
    ROW(.name = "search", .type = SQZ_OPT_CHOICE, .offset = offsetof(sqz__quant_args, search), .flags = SQZ_OPT_BARE,
        .choices = "refine|exact", .values = onoff_values, .def = "exact",
        .help = "imatrix / rtn / gptq's imatrix candidate onto iq3_s: refine: after llama.cpp's quantizer, "
                "sqz's search of the block scales with the codewords chosen at the scales stored (llama.cpp "
                "rounds the scales after choosing them), kept where the weighted error is lower (about 12% "
                "lower on Qwen2.5-Coder-1.5B's matrices); exact: llama.cpp's bytes"),
};
enum { R_FORMAT, R_METHOD, R_ACT, R_GROUP, R_SCHEME, R_ORDER, R_GROUPS, R_DAMP, R_SHRINK, R_AQ, R_AQ_ALPHA, R_ALPHA, R_PCT,
       R_MIX, R_BPW, R_ROT, R_SEARCH, N_ROWS };
_Static_assert(sizeof quant_opts / sizeof quant_opts[0] == N_ROWS, "quant rows");

/* Fills in what the rows cannot say statically (the method names). Idempotent. */
static void quant_init(void) {
    pthread_once(&method_once, method_init);
    quant_opts[R_METHOD].choices = method_choices;
    quant_opts[R_FORMAT].choices = format_choices;
}

static const sqz_opt *rows(void) {
    quant_init();
    return quant_opts;
}

#define GIVEN(r) (given & (1ull << (r)))
#define FMT_BIT(f) (1u << (unsigned)(f))

/* The SPEC names of a method's formats (the qformat table's names, sqz's own spelled as the SPEC does). */
static const char *format_list(unsigned formats) {
    static _Thread_local char buf[320];
    buf[0] = 0;
    for (int f = 0; f < SQZ_QFMT_COUNT; f++) {
        if (!(formats & FMT_BIT(f)) || (f == SQZ_QFMT_I4_ASYM && (formats & FMT_BIT(SQZ_QFMT_I4_SYM)))) continue;
        const char *name = f == SQZ_QFMT_I8 ? "int8/w8a8" : f == SQZ_QFMT_I4_SYM ? "int4" : f == SQZ_QFMT_I4_ASYM
                           ? "int4:asym" : f == SQZ_QFMT_FP8 ? "fp8/fp8_dynamic" : sqz_qformat_name((sqz_qformat)f);
        if (buf[0]) strncat(buf, ", ", sizeof buf - strlen(buf) - 1);
        strncat(buf, name, sizeof buf - strlen(buf) - 1);
    }
    return buf;
}

static const char *act_name(int act) {
    static const char *names[] = {"minmax", "percentile", "entropy", "dynamic"};
    for (int i = 0; i < 4; i++)
        if (act_values[i] == act) return names[i];
    return "?";
}

/* The formats that llama-quantize reads as its *_k_m mix (its aliases Q3_K, Q4_K, Q5_K): ambiguous alone. */
static bool k_alias(int format) { return format == F_Q3_K || format == F_Q4_K || format == F_Q5_K; }

/* Does the SPEC mean a whole-model mix? A *_k_s/_k_m/_k_l/iq3_m/auto format always; a format that
 * names one of llama-quantize's types unless ':pure' (what a llama.cpp user means by it); int8,
 * int4, w8a8 never. */
static bool mix_on(const sqz__quant_args *a, uint64_t given, const char *fmt_name) {
    if (a->format >= FIRST_MIX) return true;
    if (GIVEN(R_MIX)) return a->mix == 1;
    return sqz_qmix_find(fmt_name) != NULL;
}

/* Which options need which format or method. */
static sqz_status check_applies(const sqz__quant_args *a, uint64_t given, const char *spec, const sqz_qmethod *me,
                                bool mix) {
    const char *mn = me->name;
    const bool w8a8 = a->format == F_W8A8, int4 = a->format == F_INT4;
    SQZ_RETURN_IF(GIVEN(R_ACT) && !w8a8, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': '%s' calibrates activations, which only w8a8 quantizes", spec, act_name(a->act));
    SQZ_RETURN_IF(GIVEN(R_GROUP) && !int4, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': group size 'g%d' applies to int4 only (GGUF formats use blocks of 32)", spec, a->group);
    SQZ_RETURN_IF(GIVEN(R_SCHEME) && !int4, SQZ_ERR_INVALID_ARG, "SPEC '%s': '%s' applies to int4 only", spec,
                  a->asym ? "asym" : "sym");
    SQZ_RETURN_IF(me->quantizes_acts && !w8a8, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': %s quantizes activations: use w8a8:%s", spec, mn, mn);
    SQZ_RETURN_IF(me->weight_only && w8a8, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': %s is weight-only (for w8a8 use smoothquant)", spec, mn);
    SQZ_RETURN_IF((GIVEN(R_ORDER) || GIVEN(R_GROUPS) || GIVEN(R_DAMP) || GIVEN(R_SHRINK)) && !me->hessian,
                  SQZ_ERR_INVALID_ARG, "SPEC '%s': '%s' is a GPTQ option (add ':gptq')", spec,
                  GIVEN(R_ORDER) ? "act-order" : GIVEN(R_GROUPS) ? "static-groups" : GIVEN(R_DAMP) ? "damp=" : "shrink=");
    SQZ_RETURN_IF((GIVEN(R_AQ) || GIVEN(R_AQ_ALPHA)) && !me->hessian, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': '%s' is a GPTQ option (add ':gptq')", spec,
                  GIVEN(R_AQ) ? (a->aq ? "gptaq" : "no-gptaq") : "gptaq-alpha=");
    SQZ_RETURN_IF(GIVEN(R_AQ_ALPHA) && GIVEN(R_AQ) && !a->aq, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': 'gptaq-alpha=' with 'no-gptaq'", spec);
    SQZ_RETURN_IF(GIVEN(R_ALPHA) && !me->searches_alpha, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': 'alpha=' is a SmoothQuant option", spec);
    SQZ_RETURN_IF(GIVEN(R_PCT) && !(GIVEN(R_ACT) && a->act == SQZ_ACT_CALIB_PERCENTILE), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': 'pct=' needs the percentile activation calibration", spec);
    /* refine searches IQ3_S blocks: a single format must be iq3_s, a mix or auto may hold some (overrides) */
    SQZ_RETURN_IF(GIVEN(R_SEARCH) && a->search == 1 && a->format < FIRST_MIX && a->format != F_IQ3_S &&
                      !mix,
                  SQZ_ERR_INVALID_ARG, "SPEC '%s': 'refine' searches IQ3_S blocks, and this SPEC writes none (use "
                  "iq3_s, a mix or auto)", spec);
    SQZ_RETURN_IF(GIVEN(R_SEARCH) && a->search == 1 && !me->refines,
                  SQZ_ERR_INVALID_ARG, "SPEC '%s': 'refine' applies to rtn, imatrix and gptq", spec);
    SQZ_RETURN_IF(GIVEN(R_ROT) && a->rot && a->format != F_AUTO, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': 'try-rotate' is an auto option (auto:bpw=X:try-rotate); for a fixed format put "
                  "--rotate all before --quant", spec);
    return SQZ_OK;
}

static sqz_status quant_check(void *args, uint64_t given, const char *spec) {
    sqz__quant_args *a = args;
    int n_methods = 0;
    const sqz_qmethod *method = &sqz_qmethods(&n_methods)[a->method];
    SQZ_TRY(check_applies(a, given, spec, method, mix_on(a, given, formats[a->format].name)));
    sqz_quant_opts q = sqz_quant_default_opts();
    q.target.fmt = formats[a->format].fmt;
    const sqz_qmix *mix = NULL;
    SQZ_RETURN_IF((a->format == F_AUTO) != (GIVEN(R_BPW) != 0), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': %s", spec, a->format == F_AUTO ? "auto needs the size: auto:bpw=4.5" : "'bpw=' needs auto");
    SQZ_RETURN_IF(k_alias(a->format) && !GIVEN(R_MIX), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': llama-quantize reads %s as %s_m: say %s_m for that mix, or %s:pure for every block "
                  "matrix in %s", spec, formats[a->format].name, formats[a->format].name, formats[a->format].name,
                  formats[a->format].name, formats[a->format].name);
    SQZ_RETURN_IF(!GIVEN(R_MIX) && method->smooths && sqz_qmix_find(formats[a->format].name), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': %s means llama-quantize's %s mix, whose layers of one input may differ in type, which "
                  "%s's smoothing cannot serve: add ':pure' (every block matrix %s, the embedding and output as "
                  "they are)", spec, formats[a->format].name, formats[a->format].name, method->name, formats[a->format].name);
    if (mix_on(a, given, formats[a->format].name)) {
        /* auto: the embedding and output as Q4_K_M has them; the block matrices as planned */
        mix = sqz_qmix_find(a->format == F_AUTO ? "q4_k_m" : formats[a->format].name);
        char names[256];
        if (!mix) sqz__qmix_names(names, sizeof names);
        SQZ_RETURN_IF(!mix, SQZ_ERR_INVALID_ARG, "SPEC '%s': llama.cpp has no whole-model mix for %s (mixes: %s)", spec,
                      formats[a->format].name, names);
        SQZ_RETURN_IF(method->smooths, SQZ_ERR_INVALID_ARG,
                      "SPEC '%s': %s smooths the inputs of layers that a mix gives different types: use rtn, imatrix "
                      "or gptq", spec, method->name);
    }
    SQZ_RETURN_IF(GIVEN(R_MIX) && a->mix == 0 && a->format >= FIRST_MIX, SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': %s is a mix; for every matrix in one type use %.4s", spec, formats[a->format].name,
                  formats[a->format].name);
    if (a->format == F_W8A8) q.act_mode = SQZ_ACT_STATIC_TENSOR;
    if (a->format == F_FP8_DYNAMIC) q.act_mode = SQZ_ACT_DYNAMIC_TOKEN; /* W8A8-FP8: per token at run time */
    if (a->format == F_FP8_STATIC) q.act_mode = SQZ_ACT_STATIC_TENSOR;  /* W8A8-FP8: one calibrated scale */
    if (a->format == F_INT4) q.target = (sqz_qtarget){a->asym ? SQZ_QFMT_I4_ASYM : SQZ_QFMT_I4_SYM, a->group};
    if (GIVEN(R_ACT)) {
        if (a->act == ACT_DYNAMIC) q.act_mode = SQZ_ACT_DYNAMIC_TOKEN;
        else q.act_calib = (sqz_act_calib)a->act;
    }
    if (GIVEN(R_DAMP)) q.percdamp = a->damp;
    q.gptq_shrink = GIVEN(R_SHRINK) ? a->shrink : SQZ_GPTQ_SHRINK_AUTO;
    if (GIVEN(R_ALPHA)) q.sq_alpha = (float)a->alpha;
    if (GIVEN(R_PCT)) q.act_percentile = a->pct;
    SQZ_RETURN_IF(!(method->formats & FMT_BIT(q.target.fmt)), SQZ_ERR_INVALID_ARG,
                  "SPEC '%s': method '%s' does not produce %s (it supports %s)", spec, method->name,
                  formats[a->format].name, format_list(method->formats));
    /* GPTQ processes columns by decreasing Hessian diagonal unless told not to (on SmolLM2-135M
     * it cuts the mean KLD of q4_0 from 0.23 to 0.14), with groups built from the original
     * weights, so that int4 needs no g_idx (dynamic groups measured no better: docs/quantization.md) */
    q.act_order = GIVEN(R_ORDER) ? a->order == 1 : method->hessian;
    q.static_groups = a->groups != 0;
    q.refine = a->search == 1;
    q.gptaq = method->hessian && (a->aq == 1 || GIVEN(R_AQ_ALPHA));
    q.gptaq_alpha = a->aq_alpha;
    /* GPTAQ by default (GPTAQ_DEFAULT "gptaq", not named): plain GPTQ where the statistics cannot
     * carry dXX^T (a statistics file); named, that is an error */
    q.gptaq_optional = q.gptaq && !GIVEN(R_AQ) && !GIVEN(R_AQ_ALPHA);
    SQZ_TRY(sqz_qtarget_check(&q.target));
    memset(&a->spec, 0, sizeof a->spec);
    snprintf(a->spec.text, sizeof a->spec.text, "%s", spec);
    a->spec.method = method;
    a->spec.q = q;
    a->spec.mix = mix;
    a->spec.auto_bpw = a->format == F_AUTO ? a->bpw : 0.0;
    return SQZ_OK;
}

sqz_status sqz_compress_spec_parse(const char *spec, sqz_compress_spec *out) {
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(!spec || !*spec, SQZ_ERR_INVALID_ARG,
                  "SPEC is empty (e.g. int8, w8a8:smoothquant, int4:gptq:g128, q4_0:awq)");
    SQZ_RETURN_IF(strlen(spec) >= sizeof out->text, SQZ_ERR_INVALID_ARG, "SPEC '%.40s...' is too long", spec);
    sqz__quant_args a;
    memset(&a, 0, sizeof a);
    uint64_t given = 0;
    SQZ_TRY(sqz_opts_defaults(rows(), N_ROWS, &a));
    SQZ_TRY(sqz_opts_parse_spec(rows(), N_ROWS, spec, "SPEC", &a, &given));
    SQZ_TRY(quant_check(&a, given, spec));
    *out = a.spec;
    return SQZ_OK;
}

unsigned sqz_compress_needs(const sqz_compress_spec *spec) {
    unsigned n = spec->method->needs | SQZ_QSTAT_SAMPLE;
    n |= spec->method->optional & SQZ_QSTAT_ABSMEAN; /* E|x| whenever the method can use it (awq) */
    if (spec->q.gptaq) n |= SQZ_QSTAT_DXXT;
    if (spec->q.act_mode == SQZ_ACT_STATIC_TENSOR)
        n |= spec->q.act_calib == SQZ_ACT_CALIB_MINMAX ? SQZ_QSTAT_ABSMAX : SQZ_QSTAT_HIST;
    return n;
}

/* Statistics without which the method cannot run (sample rows only for validation otherwise;
 * AWQ falls back to the sample rows for E|x|). */
unsigned sqz__quant_required(const sqz_compress_spec *sp) {
    unsigned need = sqz_compress_needs(sp);
    if (!(sp->method->needs & SQZ_QSTAT_SAMPLE)) need &= ~(unsigned)SQZ_QSTAT_SAMPLE;
    if (sp->q.gptaq_optional) need &= ~(unsigned)SQZ_QSTAT_DXXT;
    return need & ~(unsigned)SQZ_QSTAT_ABSMEAN;
}

static unsigned quant_needs(const void *args, unsigned *required) {
    const sqz__quant_args *a = args;
    *required = sqz__quant_required(&a->spec);
    return sqz_compress_needs(&a->spec);
}

/* The run's state: auto:bpw='s plan, made at block 0, freed after the last block or by fini. */
typedef struct quant_state {
    sqz_qplan *plan;
} quant_state;

static sqz_status quant_block(sqz_pass_ctx *c, int32_t layer, const sqz_calib_block *stats, const void *args) {
    const sqz__quant_args *a = args;
    quant_state *qs = c->state;
    sqz_compress_opts o = *c->o;
    o.spec = a->spec;
    if (!o.backend && c->session_opts) o.backend = c->session_opts->backend; /* --device */
    if (!o.threads && c->session_opts) o.threads = c->session_opts->n_threads;
    if (a->spec.auto_bpw > 0 && !qs->plan) { /* the plan of auto:bpw=, once (try-rotate: the model step's) */
        o.spec.plan = NULL;
        sqz_status st = sqz__quant_auto_plan(c, &o.spec, NULL);
        qs->plan = o.spec.plan;
        SQZ_TRY(st);
    }
    o.spec.plan = qs->plan;
    /* an override that does not fit the embedding or the output fails before any work, not after it */
    for (int r = 0; layer == 0 && o.overrides && a->spec.mix && r < 2; r++) {
        const sqz_tensor *t = sqz_model_get(c->m, r ? SQZ_ROLE_OUTPUT : SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
        sqz_dtype d;
        if (t && t->ndim == 2) SQZ_TRY(sqz__mix_type(&a->spec, o.overrides, c->m, t, &d, NULL));
    }
    return sqz__compress_block(c->m, layer, stats, &o, c->keep, c->rep);
}

/* A mix also quantizes the token embedding and the output, once the blocks are done; the output
 * with the statistics of its input where there are some (head: NULL otherwise). */
static sqz_status quant_head(sqz_pass_ctx *c, const sqz_calib_block *head, const void *args) {
    const sqz__quant_args *a = args;
    quant_state *qs = c->state;
    sqz_compress_spec sp = a->spec;
    sp.plan = qs->plan;
    const int threads = c->o->threads ? c->o->threads : c->session_opts ? c->session_opts->n_threads : 0;
    const double t0 = sqz__prof_begin();
    sqz_status st = sqz__quant_mix_globals(c->m, &sp, c->o->overrides, threads, head, c->rep);
    sqz__prof_end(SQZ__PROF_GLOBALS, t0);
    sqz__qplan_free(qs->plan);
    qs->plan = NULL;
    return st;
}

/* auto:bpw=X:try-rotate: before the block loop, the plan of the model as it stands and rotated;
 * the better stays (quant_state.plan), the loop then calibrates on a fresh session. */
static bool quant_steps(const void *args) {
    const sqz__quant_args *a = args;
    return a->spec.auto_bpw > 0 && a->rot;
}

static sqz_status quant_model_step(sqz_pass_ctx *c, const void *args) {
    const sqz__quant_args *a = args;
    quant_state *qs = c->state;
    sqz_compress_spec sp = a->spec;
    bool rotated = false;
    sqz__qplan_free(qs->plan);
    qs->plan = NULL;
    SQZ_TRY(sqz__quant_auto_try_rotate(c, &sp, &qs->plan, &rotated));
    c->changed = rotated;
    return SQZ_OK;
}

static void quant_fini(void *state) {
    quant_state *qs = state;
    sqz__qplan_free(qs->plan);
    qs->plan = NULL;
}

static const sqz_compress_spec *quant_spec(const void *args) { return &((const sqz__quant_args *)args)->spec; }

/* What the model allows: a mixture's experts onto GGUF types only, and not by auto:bpw's plan yet. */
static sqz_status quant_check_model(const sqz_stage *s, const sqz_model *m, int64_t *n_layers, bool have_windows) {
    (void)n_layers;
    (void)have_windows;
    return sqz__experts_check(m, quant_spec(s->args));
}

/* Every layer's result depends on its own input only, unless the method folds smoothing vectors
 * into other layers (AWQ, SmoothQuant). */
static bool quant_partitions(const void *args) { return !quant_spec(args)->method->smooths; }

const sqz_pass sqz__pass_quant = {
    .name = "quant", .metavar = "SPEC", .label = "SPEC",
    .summary = "quantize the linear layers of every block (RTN, imatrix, GPTQ, AWQ, SmoothQuant)",
    .examples = "int8 w8a8:smoothquant int4:gptq:g128:act-order q4_0:imatrix q4_0:awq q4_1:gptq q4_k:gptq:gptaq",
    .opts = quant_opts, .n_opts = N_ROWS, .args_size = sizeof(sqz__quant_args), .state_size = sizeof(quant_state),
    .init = quant_init, .check = quant_check, .check_model = quant_check_model, .needs = quant_needs,
    .quant_spec = quant_spec,
    .partitions = quant_partitions, .model_step = quant_model_step, .steps = quant_steps, .run_block = quant_block,
    .run_head = quant_head, .fini = quant_fini,
};
