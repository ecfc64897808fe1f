/* tests/unit/test_backend_ops.c - every op x every dtype x every backend present, against a reference
 * (issue 52; in the spirit of ggml's test-backend-ops).
 *
 * One static table (kRows) holds a row per (op, dtype) with its shapes, its tolerance in words and
 * the function that builds its inputs, runs the op through the backend table and checks each output
 * element against a double-precision reference computed here from the inputs (backend_ops_*.c).
 * The backends: the CPU backend once per instruction set this CPU runs (SQZ_QMM_ISA picks the
 * stored-weight kernels when the backend is made: scalar, avx2, avx512 with its VNNI integer dots,
 * neon), the offload CPU backend (host_memory false), the fake device of fake_device.h, and CUDA
 * when a device is there (else "skip: cuda: <why>"). One line per (backend, op, dtype): the
 * largest error and the bound at the worst element.
 *
 * The table must keep up with the code: the test FAILS when an op below SQZ_OP_COUNT or a dtype of
 * the dtype table has no row (and no listed reason), and when a backend's supports() says yes to an
 * (op, dtype) pair without a row; the CPU family must run every row it has. So a new op or dtype
 * fails here until someone adds its row. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "backend_ops.h"
#include "fake_device.h"
#include "kernels/cpu/qmatmul.h"
#include "test_util.h"

/* ---- the table ---- */

/* The ops: their names and whether w_dtype means anything to them (else rows pass F32 and
 * supports() is asked with F32 only). An op without an entry fails the test. */
typedef struct bo_op_meta {
    const char *name;
    bool dtype_ignored;
} bo_op_meta;
static const bo_op_meta kOps[SQZ_OP_COUNT] = {
    [SQZ_OP_MATMUL] = {.name = "matmul"},
    [SQZ_OP_GEMM_I8] = {.name = "gemm_i8"},
    [SQZ_OP_GEMM_W4A16] = {.name = "gemm_w4a16"},
    [SQZ_OP_GEMM_I8_SP24] = {.name = "gemm_i8_sp24"},
    [SQZ_OP_SGEMM] = {.name = "sgemm", .dtype_ignored = true},
    [SQZ_OP_XTX] = {.name = "xtx", .dtype_ignored = true},
    [SQZ_OP_CHOL] = {.name = "chol", .dtype_ignored = true},
    [SQZ_OP_TO_F32] = {.name = "to_f32"},
    [SQZ_OP_RMSNORM] = {.name = "rmsnorm", .dtype_ignored = true},
    [SQZ_OP_ROPE] = {.name = "rope", .dtype_ignored = true},
    [SQZ_OP_ATTENTION] = {.name = "attention", .dtype_ignored = true},
    [SQZ_OP_SILU_MUL] = {.name = "silu_mul", .dtype_ignored = true},
    [SQZ_OP_ADD] = {.name = "add", .dtype_ignored = true},
    [SQZ_OP_LAYERNORM] = {.name = "layernorm", .dtype_ignored = true},
    [SQZ_OP_GELU] = {.name = "gelu", .dtype_ignored = true},
    [SQZ_OP_TILES] = {.name = "tiles", .dtype_ignored = true},
    [SQZ_OP_COLSTATS] = {.name = "colstats", .dtype_ignored = true},
    [SQZ_OP_COSINE] = {.name = "cosine", .dtype_ignored = true},
};

#define MM_SHAPES "n 37, k 768; m 1 (fused dot), 3 with bias (tiles), 9 (panels + sgemm)"
#define MM_BOUND "1e-5 of sum|w x| (f32 sums over k)"
#define MM_Q8_BOUND \
    "x's q8 rounding: sum |w| (amax256(x) (1/254 + 2^-11) + 2^-8|x|) + max|w| 2^-10 |x|, + 1e-5 sum|w x|"
#define MATMUL(t)                                                                                          \
    {.op = SQZ_OP_MATMUL, .dtype = t, .shapes = MM_SHAPES, .bound = MM_BOUND, .run = bo_run_matmul,        \
     .arg = SQZ_ACTIVATIONS_F32},                                                                          \
    {.op = SQZ_OP_MATMUL, .dtype = t, .shapes = MM_SHAPES ", acts q8", .bound = MM_Q8_BOUND,               \
     .run = bo_run_matmul, .arg = SQZ_ACTIVATIONS_Q8, .cpu_only = true}
#define I8_EXACT "exact: the bits of sqz/backend.h's definition (int32 sums, then two float products)"
#define W4_BOUND "(2^-11 + 1e-5) sum|w x| (weights as fp16 on CUDA), + 2^-11|y| for f16 out"
#define TO_F32(t) \
    {.op = SQZ_OP_TO_F32, .dtype = t, .shapes = "n 1000 with zeros, subnormals, extremes", \
     .bound = "exact: the bits (f64 rounded to nearest)", .run = bo_run_to_f32}
#define F32 SQZ_DTYPE_F32

static const bo_row kRows[] = {
    MATMUL(SQZ_DTYPE_F32), MATMUL(SQZ_DTYPE_F16), MATMUL(SQZ_DTYPE_BF16), MATMUL(SQZ_DTYPE_Q8_0),
    MATMUL(SQZ_DTYPE_Q4_0), MATMUL(SQZ_DTYPE_Q4_1), MATMUL(SQZ_DTYPE_Q5_0), MATMUL(SQZ_DTYPE_Q5_1),
    MATMUL(SQZ_DTYPE_Q2_K), MATMUL(SQZ_DTYPE_Q3_K), MATMUL(SQZ_DTYPE_Q4_K), MATMUL(SQZ_DTYPE_Q5_K),
    MATMUL(SQZ_DTYPE_Q6_K), MATMUL(SQZ_DTYPE_Q8_K), MATMUL(SQZ_DTYPE_IQ4_NL), MATMUL(SQZ_DTYPE_IQ4_XS),
    MATMUL(SQZ_DTYPE_IQ3_S), MATMUL(SQZ_DTYPE_MXFP4),
    {.op = SQZ_OP_GEMM_I8, .dtype = SQZ_DTYPE_I8,
     .shapes = "m 5 (a zero row), n 37, k 100; x given / x_f32; f32, f16 out",
     .bound = I8_EXACT, .run = bo_run_gemm_i8},
    {.op = SQZ_OP_GEMM_W4A16, .dtype = SQZ_DTYPE_Q4_0, .shapes = "m 1, 5; n 37, k 320; f32, f16 out",
     .bound = W4_BOUND, .run = bo_run_gemm_w4},
    {.op = SQZ_OP_GEMM_W4A16, .dtype = SQZ_DTYPE_Q4_1, .shapes = "m 1, 5; n 37, k 320; f32, f16 out",
     .bound = W4_BOUND, .run = bo_run_gemm_w4},
    {.op = SQZ_OP_GEMM_I8_SP24, .dtype = SQZ_DTYPE_I8,
     .shapes = "m 5 (a zero row), n 37, k 96; x given / x_f32; f32, f16 out",
     .bound = I8_EXACT " on the unpacked W", .run = bo_run_gemm_i8_sp24},
    {.op = SQZ_OP_SGEMM, .dtype = F32,
     .shapes = "(13, 37, 70), the 4 transposes, padded lda/ldb/ldc, beta 0 (C NaN) and 1",
     .bound = "1e-5 of |alpha| sum|a b| + |beta c|", .run = bo_run_sgemm},
    {.op = SQZ_OP_XTX, .dtype = F32,
     .shapes = "m 300 (two chunks), k 150 (two column panels); beta 0 and 1; row panel [128, 150)",
     .bound = "1e-13 of sum|x x| (exact products, f64 sums); lower triangle untouched", .run = bo_run_xtx},
    {.op = SQZ_OP_CHOL, .dtype = F32, .shapes = "n 40, H = X^T X / 80 + 0.1 I",
     .bound = "1e-10 of max|U|; strictly lower 0 exactly", .run = bo_run_chol},
    TO_F32(SQZ_DTYPE_F32), TO_F32(SQZ_DTYPE_F16), TO_F32(SQZ_DTYPE_BF16), TO_F32(SQZ_DTYPE_F64),
    {.op = SQZ_OP_RMSNORM, .dtype = F32, .shapes = "n 5, d 100; out of place and in place",
     .bound = "(d/2 + 4) eps_f32 |y| (any f32 summation order)", .run = bo_run_rmsnorm},
    {.op = SQZ_OP_LAYERNORM, .dtype = F32, .shapes = "n 5, d 100, offset rows; with and without b",
     .bound = "(d + 8) eps_f32 (|y - b| + |w| rstd (mean|x| + std)) + eps|b|", .run = bo_run_layernorm},
    {.op = SQZ_OP_ROPE, .dtype = F32, .shapes = "n 3 at pos 2, 3 heads of 16, row stride + 4; interleaved, half",
     .bound = "2 eps_f32 (|x0| + |x1|); the padding untouched", .run = bo_run_rope},
    {.op = SQZ_OP_ATTENTION, .dtype = F32, .shapes = "n 3 at pos 4, 4 q heads / 2 kv heads of 16, strided; causal, not",
     .bound = "sum p|v| (2 ds + 1e-6 + keys eps), ds = (hd + 2) eps scale sum|q k|", .run = bo_run_attention},
    {.op = SQZ_OP_ATTENTION, .dtype = F32, .shapes = "as above, causal, scale 0.3 and sliding windows 3, 4, 20",
     .bound = "sum p|v| (2 ds + 1e-6 + keys eps), ds = (hd + 2) eps scale sum|q k|", .run = bo_run_attention,
     .arg = 1, .cpu_only = true},
    {.op = SQZ_OP_SILU_MUL, .dtype = F32, .shapes = "n 1003 in [-12, 12]", .bound = "1e-6 |y| (the exp) + 1e-30",
     .run = bo_run_eltwise, .arg = SQZ_OP_SILU_MUL},
    {.op = SQZ_OP_ADD, .dtype = F32, .shapes = "n 1003", .bound = "exact: the f32 sum's bits", .run = bo_run_eltwise,
     .arg = SQZ_OP_ADD},
    {.op = SQZ_OP_GELU, .dtype = F32, .shapes = "n 1003 in [-6, 6]",
     .bound = "|x|/2 (1.5e-7 erf (A&S 7.1.26) + 8 eps) + 4 eps |y|", .run = bo_run_eltwise, .arg = SQZ_OP_GELU},
    {.op = SQZ_OP_TILES, .dtype = F32, .shapes = "dgemm (9, 11, 13) x 4 transposes; dtrsm 4 sides x trans; dpotrf 20",
     .bound = "1e-12 of the magnitude; dpotrf's upper triangle untouched", .run = bo_run_tiles},
    {.op = SQZ_OP_COLSTATS, .dtype = F32, .shapes = "n 50, k 37, onto prior sums; all four and two outputs",
     .bound = "exact: the bits (sums in row order)", .run = bo_run_colstats},
    {.op = SQZ_OP_COSINE, .dtype = F32, .shapes = "n 7 (a zero row), d 100",
     .bound = "exact: the bits (sums in order, ab / sqrt(aa bb))", .run = bo_run_cosine},
};
#define N_ROWS (sizeof kRows / sizeof kRows[0])

/* Pairs deliberately without a row, with why. op SQZ_OP_COUNT: the dtype under every op (it has no
 * row at all); such a listing excuses the dtype from having a row, never a backend from supporting
 * a pair without one. */
typedef struct bo_untested {
    sqz_op op;
    sqz_dtype dtype;
    const char *why;
} bo_untested;
static const bo_untested kUntested[] = {
    {.op = SQZ_OP_COUNT, .dtype = SQZ_DTYPE_I32, .why = "no op takes i32 tensors (token ids, GGUF metadata)"},
    {.op = SQZ_OP_COUNT, .dtype = SQZ_DTYPE_I16, .why = "no op takes i16 tensors (read and converted only)"},
    {.op = SQZ_OP_COUNT, .dtype = SQZ_DTYPE_I64, .why = "no op takes i64 tensors (read and converted only)"},
    {.op = SQZ_OP_COUNT, .dtype = SQZ_DTYPE_U4, .why = "raw 4-bit codes (sqz/qparams.h): no float view, no op"},
    {.op = SQZ_OP_COUNT, .dtype = SQZ_DTYPE_U8, .why = "sparse-24 bitmasks: bytes, no op"},
    {.op = SQZ_OP_COUNT, .dtype = SQZ_DTYPE_F8_E4M3,
     .why = "FP8 values mean nothing without their row scales; no backend op takes them"},
};
#define N_UNTESTED (sizeof kUntested / sizeof kUntested[0])

static const char *op_name(sqz_op op) {
    return (unsigned)op < SQZ_OP_COUNT && kOps[op].name ? kOps[op].name : "(unnamed op)";
}

static bool has_row(sqz_op op, sqz_dtype t) {
    for (size_t i = 0; i < N_ROWS; i++)
        if (kRows[i].op == op && kRows[i].dtype == t) return true;
    return false;
}

static const char *untested_why(sqz_op op, sqz_dtype t) {
    for (size_t i = 0; i < N_UNTESTED; i++)
        if (kUntested[i].op == op && kUntested[i].dtype == t) return kUntested[i].why;
    return NULL;
}

/* ---- shared helpers (backend_ops.h) ---- */

static uint64_t rng_state;
void bo_seed(uint64_t seed) { rng_state = 0x2545F4914F6CDD1Dull ^ (seed * 0x9E3779B97F4A7C15ull); }
uint32_t bo_rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
float bo_rndf(void) { return (float)(bo_rnd() & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f; }

void *bo_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test_backend_ops: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

float *bo_rand(int64_t n, float scale) {
    float *x = bo_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = scale * bo_rndf();
    return x;
}

void bo_fail(bo_res *res, const char *fmt, ...) {
    if (!res->fail) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->why, sizeof res->why, fmt, ap);
        va_end(ap);
    }
    res->fail = true;
}

void bo_check(bo_res *res, const char *what, int64_t i, double got, double ref, double bound) {
    res->checked++;
    if (bound == 0) { /* the bits: NaN is NaN, -0 is not +0 */
        const bool same = (isnan(got) && isnan(ref)) || (got == ref && signbit(got) == signbit(ref));
        if (!same) bo_fail(res, "%s[%lld] = %.9g, reference %.9g (exact)", what, (long long)i, got, ref);
        if (!same) res->worst_ratio = INFINITY, res->worst_err = fabs(got - ref), res->worst_bound = 0;
        if (same || isnan(got) || isnan(ref)) return;
    }
    const double e = fabs(got - ref);
    if (e > res->max_err || isnan(e)) res->max_err = e;
    if (!(e <= bound)) bo_fail(res, "%s[%lld] = %.9g, reference %.9g, error %.3g > bound %.3g", what, (long long)i,
                               got, ref, e, bound);
    const double ratio = bound > 0 ? e / bound : (e > 0 ? INFINITY : 0);
    if (ratio > res->worst_ratio || (res->worst_bound == 0 && ratio == 0) || isnan(e)) {
        res->worst_ratio = isnan(e) ? INFINITY : ratio;
        res->worst_err = e;
        res->worst_bound = bound;
    }
}

void bo_dev_begin(bo_dev *d, const sqz_backend *b, bo_res *res) {
    memset(d, 0, sizeof *d);
    d->b = b;
    d->res = res;
}

bool bo_dev_ok(const bo_dev *d) { return !d->res->fail; }

void bo_call(bo_dev *d, const char *what, sqz_status st) {
    if (st != SQZ_OK) bo_fail(d->res, "%s: %s: %s", what, sqz_status_name(st), sqz_last_error());
}

static const uint8_t kSentinel = 0xA5;

void *bo_put(bo_dev *d, const void *host, size_t bytes) {
    if (!bo_dev_ok(d)) return NULL;
    if (d->n == BO_MAX_BUFS) {
        bo_fail(d->res, "test: more than %d buffers", BO_MAX_BUFS);
        return NULL;
    }
    const sqz_backend_ops *o = d->b->ops;
    void *p = o->alloc(d->b->ctx, bytes + BO_GUARD);
    if (!p) {
        bo_fail(d->res, "alloc(%zu): %s", bytes + BO_GUARD, sqz_last_error());
        return NULL;
    }
    d->p[d->n] = p;
    d->bytes[d->n++] = bytes;
    uint8_t *tmp = bo_malloc(bytes + BO_GUARD);
    if (host) memcpy(tmp, host, bytes);
    else memset(tmp, 0xff, bytes);
    memset(tmp + bytes, kSentinel, BO_GUARD);
    bo_call(d, "upload", o->upload(d->b->ctx, p, tmp, bytes + BO_GUARD));
    free(tmp);
    return p;
}

void bo_get(bo_dev *d, void *host, const void *p, size_t bytes) {
    if (!bo_dev_ok(d)) return;
    const sqz_backend_ops *o = d->b->ops;
    bo_call(d, "synchronize", o->synchronize(d->b->ctx));
    uint8_t *tmp = bo_malloc(bytes + BO_GUARD);
    bo_call(d, "download", o->download(d->b->ctx, tmp, p, bytes + BO_GUARD));
    memcpy(host, tmp, bytes);
    for (size_t i = 0; i < BO_GUARD && bo_dev_ok(d); i++)
        if (tmp[bytes + i] != kSentinel)
            bo_fail(d->res, "a write %zu bytes past the end of a %zu-byte output", i, bytes);
    free(tmp);
}

void bo_dev_free(bo_dev *d, void *p) {
    for (int i = 0; i < d->n; i++) {
        if (d->p[i] == p) {
            d->b->ops->free(d->b->ctx, p);
            d->p[i] = d->p[--d->n];
            d->bytes[i] = d->bytes[d->n];
            return;
        }
    }
}

void bo_dev_end(bo_dev *d) {
    for (int i = 0; i < d->n; i++) d->b->ops->free(d->b->ctx, d->p[i]);
    d->n = 0;
}

/* ---- running the table on one backend ---- */

static int64_t g_lines, g_failed, g_skipped;

/* True when the backend is the CPU backend or made from it (its rows must all run). */
static bool cpu_family(const sqz_backend *b) {
    return strncmp(b->ops->name, "cpu", 3) == 0 || strcmp(b->ops->name, "fake-device") == 0;
}

/* supports() yes for a pair without a row (or a listed reason): a failure, one line each. */
static int64_t check_supports(const char *label, const sqz_backend *b) {
    int64_t bad = 0;
    for (int op = 0; op < SQZ_OP_COUNT; op++) {
        for (int t = 0; t < SQZ_DTYPE_COUNT; t++) {
            if (kOps[op].dtype_ignored && t != SQZ_DTYPE_F32) continue;
            if (!sqz_backend_supports(b, (sqz_op)op, (sqz_dtype)t)) continue;
            if (has_row((sqz_op)op, (sqz_dtype)t) || untested_why((sqz_op)op, (sqz_dtype)t)) continue;
            printf("FAIL %-12s %-12s %-8s supported, but the table has no row for it\n", label, op_name((sqz_op)op),
                   sqz_dtype_name((sqz_dtype)t));
            bad++;
        }
    }
    return bad;
}

static void print_line(const char *label, const bo_row *r, const bo_res *res) {
    printf("%s %-12s %-12s %-8s max err %-9.3g worst err %-9.3g bound %-9.3g (%lld checked) %s\n",
           res->fail ? "FAIL" : "ok  ", label, op_name(r->op), sqz_dtype_name(r->dtype), res->max_err,
           res->worst_err, res->worst_bound, (long long)res->checked, r->shapes);
    if (res->fail)
        printf("     %s %s %s [%s]: %s\n", label, op_name(r->op), sqz_dtype_name(r->dtype), r->bound, res->why);
}

/* Every row on b; returns the failures. */
static int64_t run_table(const char *label, const sqz_backend *b) {
    const bool cpu = cpu_family(b);
    int64_t bad = check_supports(label, b);
    for (size_t i = 0; i < N_ROWS; i++) {
        const bo_row *r = &kRows[i];
        if (!sqz_backend_supports(b, r->op, r->dtype) || (r->cpu_only && !cpu)) {
            if (cpu) {
                printf("FAIL %-12s %-12s %-8s the CPU backend does not support a row of its own\n", label,
                       op_name(r->op), sqz_dtype_name(r->dtype));
                bad++;
            } else {
                printf("skip: %s %s %s [%s]: %s\n", label, op_name(r->op), sqz_dtype_name(r->dtype), r->shapes,
                       r->cpu_only ? "a case of the CPU backend's own" : "not supported by this backend");
                g_skipped++;
            }
            continue;
        }
        bo_res res = {0};
        bo_seed(i + 1);
        r->run(r, b, &res);
        if (!res.fail && res.checked == 0) bo_fail(&res, "the row checked nothing");
        print_line(label, r, &res);
        g_lines++;
        if (res.fail) bad++;
    }
    g_failed += bad;
    return bad;
}

enum { CPU_THREADS = 2 };

/* The CPU backend with the stored-weight kernels of isa (SQZ_QMM_ISA read when it is made). */
static void test_cpu_isa(sqz__qmm_isa isa) {
    char label[32];
    snprintf(label, sizeof label, "cpu-%s", sqz__qmm_isa_name(isa));
    if (!sqz__qmm_isa_runs(isa)) {
        printf("skip: %s: this CPU does not run %s\n", label, sqz__qmm_isa_name(isa));
        g_skipped++;
        SQZ_SKIP("%s: this CPU does not run it", label);
    }
    const char *saved = getenv("SQZ_QMM_ISA");
    char *keep = saved ? strdup(saved) : NULL;
    setenv("SQZ_QMM_ISA", sqz__qmm_isa_name(isa), 1);
    assert_int_equal(sqz__qmm_isa_best(), isa); /* the backend made now takes these kernels */
    sqz_backend *b;
    SQZ_ASSERT_OK(sqz_backend_cpu(CPU_THREADS, &b));
    if (keep) setenv("SQZ_QMM_ISA", keep, 1);
    else unsetenv("SQZ_QMM_ISA");
    free(keep);
    const int64_t bad = run_table(label, b);
    sqz_backend_free(b);
    if (bad) fail_msg("%s: %lld failures", label, (long long)bad);
}

static void test_cpu_scalar(void **state) { (void)state; test_cpu_isa(SQZ__ISA_SCALAR); }
static void test_cpu_avx2(void **state) { (void)state; test_cpu_isa(SQZ__ISA_AVX2); }
static void test_cpu_avx512(void **state) { (void)state; test_cpu_isa(SQZ__ISA_AVX512); }
static void test_cpu_neon(void **state) { (void)state; test_cpu_isa(SQZ__ISA_NEON); }

static void test_cpu_offload(void **state) {
    (void)state;
    sqz_backend *b;
    SQZ_ASSERT_OK(sqz_backend_cpu_offload(CPU_THREADS, &b));
    assert_false(sqz_backend_host_memory(b));
    const int64_t bad = run_table("cpu-offload", b);
    sqz_backend_free(b);
    if (bad) fail_msg("cpu-offload: %lld failures", (long long)bad);
}

static void test_fake_device(void **state) {
    (void)state;
    fake_device f;
    fake_device_init(&f, CPU_THREADS);
    const int64_t bad = run_table("fake-device", &f.b);
    const int64_t live = fake_live;
    fake_device_free(&f);
    if (live != 0) printf("FAIL fake-device: %lld allocations left after the table\n", (long long)live);
    assert_int_equal(live, 0);
    if (bad) fail_msg("fake-device: %lld failures", (long long)bad);
}

static void test_cuda(void **state) {
    (void)state;
    sqz_backend *b = NULL;
    const sqz_status st = sqz_backend_cuda(-1, &b);
    if (st != SQZ_OK) {
        printf("skip: cuda: %s: %s\n", sqz_status_name(st), sqz_last_error());
        g_skipped++;
        SQZ_SKIP("cuda: %s", sqz_last_error());
    }
    const int64_t bad = run_table("cuda", b);
    sqz_backend_free(b);
    if (bad) fail_msg("cuda: %lld failures", (long long)bad);
}

/* Every op has a name and a row; every dtype a row or a listed reason. */
static void test_table_complete(void **state) {
    (void)state;
    int64_t bad = 0;
    for (int op = 0; op < SQZ_OP_COUNT; op++) {
        bool any = false;
        for (size_t i = 0; i < N_ROWS; i++) any = any || kRows[i].op == (sqz_op)op;
        if (!kOps[op].name || !any) {
            printf("FAIL op %d (%s) has no row in the table\n", op, op_name((sqz_op)op));
            bad++;
        }
    }
    for (int t = 0; t < SQZ_DTYPE_COUNT; t++) {
        bool any = false;
        for (size_t i = 0; i < N_ROWS; i++) any = any || kRows[i].dtype == (sqz_dtype)t;
        const char *why = untested_why(SQZ_OP_COUNT, (sqz_dtype)t);
        if (!any && !why) {
            printf("FAIL dtype %s has no row in the table (nor a reason in kUntested)\n", sqz_dtype_name((sqz_dtype)t));
            bad++;
        } else if (!any) {
            printf("note: dtype %s has no row: %s\n", sqz_dtype_name((sqz_dtype)t), why);
        }
    }
    g_failed += bad;
    if (bad) fail_msg("%lld ops or dtypes without a row", (long long)bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_complete), cmocka_unit_test(test_cpu_scalar), cmocka_unit_test(test_cpu_avx2),
        cmocka_unit_test(test_cpu_avx512),     cmocka_unit_test(test_cpu_neon),   cmocka_unit_test(test_cpu_offload),
        cmocka_unit_test(test_fake_device),    cmocka_unit_test(test_cuda),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    printf("backend_ops: %lld lines checked, %lld failed, %lld skipped; %zu rows\n", (long long)g_lines,
           (long long)g_failed, (long long)g_skipped, N_ROWS);
    return rc;
}
