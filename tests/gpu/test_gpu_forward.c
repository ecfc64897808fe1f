/* tests/gpu/test_gpu_forward.c - the CUDA backend's block-forward slots (rmsnorm, rope, attention,
 * silu_mul, add, layernorm, gelu; kernels/cuda/fwd_cuda.cu) against the CPU backend's same slots, on random data
 * of awkward shapes: rmsnorm d = 1, 7, 576, 1536 (and in place); rope both layouts at pos 0 and 5,
 * head_dim 64 and 128, a row stride wider than the heads; attention causal or not, pos 0 and
 * > 0, n = 1, 3, 130, 512, heads 12/2 (GQA), 9/3, 4/4, head_dim 64, 128 (and 256), ldq wider
 * than the heads, more keys than one shared-memory chunk of the kernel (1024); silu_mul / add
 * n = 1 and 1000003. Bounds, per element:
 *   add:       bit for bit (one IEEE addition on both sides);
 *   rope:      |gpu - cpu| <= 4e-7 (|a c| + |b s|) + 1e-30 for the pair (a, b) and the table's
 *              (c, s): the CPU's bits when neither side fuses a*c - b*s into an FMA (the kernel
 *              never does; x86's baseline ISA has none), a rounding of the terms otherwise;
 *   rmsnorm:   |gpu - cpu| <= 1e-6 |cpu| + 1e-30 (the double sum in another order may move the
 *              float 1/rms by an ulp; the rest is the CPU's float expression);
 *   silu_mul:  |gpu - cpu| <= 1e-6 |cpu| + 1e-30 (CUDA's expf, 2 ulp, against the CPU's Cephes
 *              exp, 0.7 ulp, measured: each silu within ~2.5e-7 of the exact value);
 *   attention: |gpu - cpu| <= 1e-5 max|v| (f32 dot products and sums in other orders);
 *   layernorm: |gpu - cpu| <= 1e-6 (|cpu| + |b|) + 1e-30 (d = 1, 384, 1536, with and without bias,
 *              in place), the mean far from 0;
 *   gelu:      |gpu - cpu| <= 1e-7 |x| + 1e-6 |cpu| + 1e-30 (the CPU's erf is A&S 7.1.26, within
 *              1.5e-7 of CUDA's erff), n = 1 and 1000003.
 * NaN must match NaN; columns beyond a row's heads and the bytes around every device buffer
 * (sentinels) must be untouched. Every case prints what it measured. Without a CUDA device the
 * program exits 77. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "gpu_open.h"
#include "test_util.h"

static sqz_backend *gpu, *cpu;
static uint64_t rs = 0x2545F4914F6CDD1Dull;
static float rndf(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((rs >> 11) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
}
static float *rnd_buf(size_t n, float scale) {
    float *p = malloc(4 * n + 4);
    for (size_t i = 0; i < n; i++) p[i] = rndf() * scale;
    return p;
}
static float *dup_buf(const float *p, size_t n) {
    float *q = malloc(4 * n + 4);
    memcpy(q, p, 4 * n);
    return q;
}

/* ---- device buffers with sentinel guards ---- */
enum { GUARD = 256 };
static const uint8_t SENTINEL = 0xA5;
static const float PAD = 7777.0f; /* columns a slot must not write */
typedef struct gbuf { uint8_t *dev; size_t n; } gbuf;

static gbuf gnew(size_t n, const void *init) {
    gbuf g = {gpu->ops->alloc(gpu->ctx, n + 2 * GUARD), n};
    if (!g.dev) fail_msg("alloc %zu: %s", n, sqz_last_error());
    uint8_t *fill = malloc(n + 2 * GUARD);
    memset(fill, SENTINEL, n + 2 * GUARD);
    if (init) memcpy(fill + GUARD, init, n);
    SQZ_ASSERT_OK(gpu->ops->upload(gpu->ctx, g.dev, fill, n + 2 * GUARD));
    free(fill);
    return g;
}
static gbuf gnewf(const float *init, size_t n) { return gnew(4 * n, init); }
static void *gptr(gbuf g) { return g.dev + GUARD; }
static void gget(gbuf g, void *out, const char *what) {
    uint8_t *all = malloc(g.n + 2 * GUARD);
    SQZ_ASSERT_OK(gpu->ops->download(gpu->ctx, all, g.dev, g.n + 2 * GUARD));
    for (size_t i = 0; i < GUARD; i++)
        if (all[i] != SENTINEL || all[GUARD + g.n + i] != SENTINEL) fail_msg("%s: sentinel byte overwritten", what);
    if (out) memcpy(out, all + GUARD, g.n);
    free(all);
}
static void gfree(gbuf g) { gpu->ops->free(gpu->ctx, g.dev); }

/* The CPU slot the case compares with (the CPU backend fills all five). */
#define NEED_CPU(slot) \
    do { if (!cpu->ops->slot) fail_msg("the CPU backend has no " #slot " slot to compare with"); } while (0)

/* Folds one element into *worst: |g - r| / scale, NaN only against NaN. */
static void err_fold(const char *what, size_t i, float g, float r, double scale, double *worst) {
    if (isnan(r) || isnan(g)) {
        if (isnan(r) != isnan(g)) fail_msg("%s: [%zu] = %g, the CPU has %g", what, i, g, r);
        return;
    }
    const double e = fabs((double)g - r) / scale;
    if (!(e <= *worst)) *worst = e;
}

/* ---- rmsnorm ---- */
static void rmsnorm_case(int64_t n, int64_t d, float xs, bool in_place) {
    NEED_CPU(rmsnorm);
    const size_t N = (size_t)(n * d);
    float *x = rnd_buf(N, xs), *w = rnd_buf((size_t)d, 2.0f), *ref = malloc(4 * N + 4), *got = malloc(4 * N + 4);
    sqz_rmsnorm_args a = {.x = x, .w = w, .y = ref, .eps = 1e-5f, .n = n, .d = d};
    SQZ_ASSERT_OK(cpu->ops->rmsnorm(cpu->ctx, &a));
    gbuf dx = gnewf(x, N), dw = gnewf(w, (size_t)d), dy = gnewf(NULL, N);
    a.x = gptr(dx), a.w = gptr(dw), a.y = in_place ? gptr(dx) : gptr(dy);
    SQZ_ASSERT_OK(gpu->ops->rmsnorm(gpu->ctx, &a));
    char what[128];
    snprintf(what, sizeof what, "rmsnorm n=%lld d=%lld |x|<=%g%s", (long long)n, (long long)d, xs,
             in_place ? " in place" : "");
    gget(in_place ? dx : dy, got, what);
    if (!in_place) gget(dx, NULL, what);
    double worst = 0;
    for (size_t i = 0; i < N; i++) err_fold(what, i, got[i], ref[i], 1e-6 * fabs(ref[i]) + 1e-30, &worst);
    printf("%-60s max |gpu-cpu| / (1e-6 |cpu| + 1e-30) %.3g (bound 1)\n", what, worst);
    if (!(worst <= 1.0)) fail_msg("%s: error %g x the bound", what, worst);
    gfree(dx), gfree(dw), gfree(dy);
    free(x), free(w), free(ref), free(got);
}

static void test_rmsnorm(void **state) {
    (void)state;
    rmsnorm_case(3, 1, 1.0f, false);
    rmsnorm_case(5, 7, 1.0f, false);
    rmsnorm_case(130, 576, 1.0f, false);
    rmsnorm_case(17, 1536, 30.0f, false);
    rmsnorm_case(64, 576, 1e-3f, true);
    rmsnorm_case(1, 1536, 1.0f, true);
    sqz_rmsnorm_args bad = {.x = (float *)16, .w = (float *)16, .y = (float *)16, .eps = 1e-5f, .n = -1, .d = 4};
    assert_int_equal(gpu->ops->rmsnorm(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.n = 2, bad.d = 0;
    assert_int_equal(gpu->ops->rmsnorm(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.d = 4, bad.w = NULL;
    assert_int_equal(gpu->ops->rmsnorm(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.n = 0;
    SQZ_ASSERT_OK(gpu->ops->rmsnorm(gpu->ctx, &bad));
}

/* ---- rope ---- */
/* Tables (positions, hd / 2) of angle p theta^(-2i/hd), theta 10000. */
static void rope_tables(int64_t hd, int64_t n_pos, float *cs, float *sn) {
    const int64_t hh = hd / 2;
    for (int64_t p = 0; p < n_pos; p++)
        for (int64_t i = 0; i < hh; i++) {
            const float a = (float)p / powf(10000.0f, (float)(2 * i) / (float)hd);
            cs[p * hh + i] = cosf(a), sn[p * hh + i] = sinf(a);
        }
}

/* The bound's scale for element e of head row v0 (the input): |a c| + |b s| of its pair. */
static double rope_scale(const float *v0, int64_t e, int64_t hd, bool half, const float *cs, const float *sn) {
    const int64_t hh = hd / 2, i = half ? e % hh : e / 2;
    const int64_t ia = half ? i : 2 * i, ib = half ? i + hh : 2 * i + 1;
    return 4e-7 * (fabs((double)v0[ia] * cs[i]) + fabs((double)v0[ib] * sn[i])) + 1e-30;
}

static void rope_case(int64_t n, int64_t n_heads, int64_t hd, int64_t pos, bool half, int64_t pad) {
    NEED_CPU(rope);
    const int64_t ld = n_heads * hd + pad, hh = hd / 2;
    const size_t N = (size_t)(n * ld), T = (size_t)((pos + n) * hh);
    float *x = rnd_buf(N, 3.0f), *cs = malloc(4 * T + 4), *sn = malloc(4 * T + 4);
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = n_heads * hd; j < ld; j++) x[r * ld + j] = PAD;
    rope_tables(hd, pos + n, cs, sn);
    float *ref = dup_buf(x, N), *got = malloc(4 * N + 4);
    sqz_rope_args a = {.x = ref, .ld = ld, .n = n, .n_heads = n_heads, .head_dim = hd, .pos = pos, .half = half,
                       .cos_t = cs, .sin_t = sn};
    SQZ_ASSERT_OK(cpu->ops->rope(cpu->ctx, &a));
    gbuf dx = gnewf(x, N), dc = gnewf(cs, T), ds = gnewf(sn, T);
    a.x = gptr(dx), a.cos_t = gptr(dc), a.sin_t = gptr(ds);
    SQZ_ASSERT_OK(gpu->ops->rope(gpu->ctx, &a));
    char what[128];
    snprintf(what, sizeof what, "rope %s n=%lld heads=%lld hd=%lld pos=%lld ld=%lld", half ? "half" : "interleaved",
             (long long)n, (long long)n_heads, (long long)hd, (long long)pos, (long long)ld);
    gget(dx, got, what);
    gget(dc, NULL, what), gget(ds, NULL, what);
    double worst = 0;
    size_t same = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < ld; j++) {
            const size_t i = (size_t)(r * ld + j);
            if (j >= n_heads * hd) {
                if (got[i] != PAD) fail_msg("%s: x[%lld][%lld] beyond the heads written", what, (long long)r, (long long)j);
                continue;
            }
            const float *c = cs + (pos + r) * hh, *s = sn + (pos + r) * hh;
            err_fold(what, i, got[i], ref[i], rope_scale(x + r * ld + j / hd * hd, j % hd, hd, half, c, s), &worst);
            same += memcmp(&got[i], &ref[i], 4) == 0;
        }
    printf("%-60s max |gpu-cpu| / bound %.3g (bound 1), %zu of %lld bit for bit\n", what, worst, same,
           (long long)(n * n_heads * hd));
    if (!(worst <= 1.0)) fail_msg("%s: error %g x the bound", what, worst);
    gfree(dx), gfree(dc), gfree(ds);
    free(x), free(cs), free(sn), free(ref), free(got);
}

static void test_rope(void **state) {
    (void)state;
    for (int half = 0; half < 2; half++)
        for (int p = 0; p < 2; p++) {
            rope_case(7, 9, 64, p ? 5 : 0, half, 3 * 64 * 2); /* q heads in a fused q|k|v row */
            rope_case(130, 3, 128, p ? 5 : 0, half, 0);
        }
    rope_case(1, 1, 2, 0, true, 0);
    sqz_rope_args bad = {.x = (float *)16, .ld = 63, .n = 1, .n_heads = 1, .head_dim = 64, .cos_t = (float *)16,
                         .sin_t = (float *)16};
    assert_int_equal(gpu->ops->rope(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.ld = 65, bad.head_dim = 65;
    assert_int_equal(gpu->ops->rope(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
}

/* ---- attention ---- */
typedef struct attn_shape {
    int64_t n, pos, n_heads, n_kv_heads, head_dim, q_pad;
    bool causal;
} attn_shape;

static void attention_case(attn_shape s) {
    NEED_CPU(attention);
    const int64_t hd = s.head_dim, ldq = s.n_heads * hd + s.q_pad, ldkv = s.n_kv_heads * hd, ldo = s.n_heads * hd + 5;
    const int64_t keys = s.pos + s.n;
    const size_t NQ = (size_t)(s.n * ldq), NK = (size_t)(keys * ldkv), NO = (size_t)(s.n * ldo);
    const float vs = 3.0f;
    float *q = rnd_buf(NQ, 2.0f), *k = rnd_buf(NK, 1.0f), *v = rnd_buf(NK, vs), *ref = malloc(4 * NO + 4),
          *got = malloc(4 * NO + 4);
    for (size_t i = 0; i < NO; i++) ref[i] = PAD;
    sqz_attention_args a = {.q = q, .ldq = ldq, .k = k, .v = v, .ldkv = ldkv, .out = ref, .ldo = ldo, .n = s.n,
                            .pos = s.pos, .n_heads = s.n_heads, .n_kv_heads = s.n_kv_heads, .head_dim = hd,
                            .causal = s.causal};
    SQZ_ASSERT_OK(cpu->ops->attention(cpu->ctx, &a));
    for (size_t i = 0; i < NO; i++) got[i] = PAD;
    gbuf dq = gnewf(q, NQ), dk = gnewf(k, NK), dv = gnewf(v, NK), dout = gnewf(got, NO);
    a.q = gptr(dq), a.k = gptr(dk), a.v = gptr(dv), a.out = gptr(dout);
    SQZ_ASSERT_OK(gpu->ops->attention(gpu->ctx, &a));
    char what[160];
    snprintf(what, sizeof what, "attention %s n=%lld pos=%lld heads=%lld/%lld hd=%lld ldq=%lld",
             s.causal ? "causal" : "full", (long long)s.n, (long long)s.pos, (long long)s.n_heads,
             (long long)s.n_kv_heads, (long long)hd, (long long)ldq);
    gget(dout, got, what);
    gget(dq, NULL, what), gget(dk, NULL, what), gget(dv, NULL, what);
    double vmax = 0, worst = 0;
    for (size_t i = 0; i < NK; i++) vmax = fmax(vmax, fabs(v[i]));
    for (int64_t i = 0; i < s.n; i++)
        for (int64_t j = 0; j < ldo; j++) {
            const size_t e = (size_t)(i * ldo + j);
            if (j >= s.n_heads * hd) {
                if (got[e] != PAD) fail_msg("%s: out[%lld][%lld] beyond the heads written", what, (long long)i, (long long)j);
                continue;
            }
            if (!isfinite(got[e])) fail_msg("%s: out[%lld][%lld] = %g", what, (long long)i, (long long)j, got[e]);
            err_fold(what, e, got[e], ref[e], 1e-5 * vmax, &worst);
        }
    printf("%-72s max |gpu-cpu| / (1e-5 max|v|) %.3g (bound 1)\n", what, worst);
    if (!(worst <= 1.0)) fail_msg("%s: error %g x the bound", what, worst);
    gfree(dq), gfree(dk), gfree(dv), gfree(dout);
    free(q), free(k), free(v), free(ref), free(got);
}

static void test_attention(void **state) {
    (void)state;
    const attn_shape shapes[] = {
        {1, 0, 12, 2, 64, 0, true},      {1, 0, 4, 4, 128, 0, false},    {3, 5, 9, 3, 128, 0, true},
        {3, 5, 12, 2, 64, 0, false},     {130, 0, 12, 2, 64, 0, true},   {130, 7, 4, 4, 128, 0, false},
        {130, 3, 9, 3, 64, 2 * 3 * 64, true}, /* q in a fused q|k|v row */
        {512, 0, 12, 2, 64, 0, true},    {512, 0, 9, 3, 128, 0, false},
        {512, 1000, 4, 4, 64, 0, true},  {3, 2040, 12, 2, 128, 0, true}, /* keys in two chunks of the kernel */
        {5, 0, 4, 2, 256, 0, true},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) attention_case(shapes[i]);
    sqz_attention_args bad = {.q = (float *)16, .ldq = 64 * 12, .k = (float *)16, .v = (float *)16, .ldkv = 64 * 5,
                              .out = (float *)16, .ldo = 64 * 12, .n = 1, .n_heads = 12, .n_kv_heads = 5,
                              .head_dim = 64, .causal = true};
    assert_int_equal(gpu->ops->attention(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG); /* 12 % 5 */
    bad.n_kv_heads = 4, bad.ldq = 64 * 12 - 1;
    assert_int_equal(gpu->ops->attention(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.ldq = 64 * 12, bad.v = NULL;
    assert_int_equal(gpu->ops->attention(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.n = 0;
    SQZ_ASSERT_OK(gpu->ops->attention(gpu->ctx, &bad));
}

/* ---- silu_mul, add ---- */
static void eltwise_case(bool silu, int64_t n) {
    if (silu) NEED_CPU(silu_mul);
    else NEED_CPU(add);
    const size_t N = (size_t)n;
    float *x = rnd_buf(N, silu ? 20.0f : 1e3f), *y = rnd_buf(N, 2.0f), *got = malloc(4 * N + 4);
    const float special[] = {0.0f, -0.0f, 100.0f, -100.0f, 87.5f, -87.5f, 88.5f, -88.5f, NAN, 1e-30f};
    for (size_t i = 0; N > 20 && i < sizeof special / sizeof special[0]; i++) x[i * (N / 11)] = special[i];
    float *ref = dup_buf(x, N);
    sqz_eltwise_args a = {.x = ref, .y = y, .n = n};
    SQZ_ASSERT_OK(silu ? cpu->ops->silu_mul(cpu->ctx, &a) : cpu->ops->add(cpu->ctx, &a));
    gbuf dx = gnewf(x, N), dy = gnewf(y, N);
    a.x = gptr(dx), a.y = gptr(dy);
    SQZ_ASSERT_OK(silu ? gpu->ops->silu_mul(gpu->ctx, &a) : gpu->ops->add(gpu->ctx, &a));
    char what[64];
    snprintf(what, sizeof what, "%s n=%lld", silu ? "silu_mul" : "add", (long long)n);
    gget(dx, got, what);
    gget(dy, NULL, what);
    double worst = 0;
    size_t differ = 0;
    for (size_t i = 0; i < N; i++) {
        if (silu) err_fold(what, i, got[i], ref[i], 1e-6 * fabs(ref[i]) + 1e-30, &worst);
        else differ += isnan(ref[i]) ? !isnan(got[i]) : memcmp(&got[i], &ref[i], 4) != 0;
    }
    if (silu) printf("%-60s max |gpu-cpu| / (1e-6 |cpu| + 1e-30) %.3g (bound 1)\n", what, worst);
    else printf("%-60s %zu elements differ from the CPU (bound 0)\n", what, differ);
    if (!(worst <= 1.0) || differ) fail_msg("%s: outside the bound", what);
    gfree(dx), gfree(dy);
    free(x), free(y), free(ref), free(got);
}

static void test_eltwise(void **state) {
    (void)state;
    for (int silu = 0; silu < 2; silu++) {
        eltwise_case(silu, 1);
        eltwise_case(silu, 1000003);
    }
    sqz_eltwise_args bad = {.x = (float *)16, .y = NULL, .n = 3};
    assert_int_equal(gpu->ops->silu_mul(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    assert_int_equal(gpu->ops->add(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.n = -1, bad.y = (float *)16;
    assert_int_equal(gpu->ops->add(gpu->ctx, &bad), SQZ_ERR_INVALID_ARG);
    bad.n = 0;
    SQZ_ASSERT_OK(gpu->ops->silu_mul(gpu->ctx, &bad));
}

/* ---- layernorm, gelu (BERT's block) ---- */
static void layernorm_case(int64_t n, int64_t d, bool bias, bool in_place) {
    NEED_CPU(layernorm);
    const size_t N = (size_t)(n * d);
    float *x = rnd_buf(N, 3.0f), *w = rnd_buf((size_t)d, 2.0f), *b = rnd_buf((size_t)d, 1.0f);
    float *ref = malloc(4 * N + 4), *got = malloc(4 * N + 4);
    for (size_t i = 0; i < N; i++) x[i] += 5.0f; /* a mean far from 0 */
    sqz_layernorm_args a = {.x = x, .w = w, .b = bias ? b : NULL, .y = ref, .eps = 1e-12f, .n = n, .d = d};
    SQZ_ASSERT_OK(cpu->ops->layernorm(cpu->ctx, &a));
    gbuf dx = gnewf(x, N), dw = gnewf(w, (size_t)d), db = gnewf(b, (size_t)d), dy = gnewf(NULL, N);
    a.x = gptr(dx), a.w = gptr(dw), a.b = bias ? gptr(db) : NULL, a.y = in_place ? gptr(dx) : gptr(dy);
    SQZ_ASSERT_OK(gpu->ops->layernorm(gpu->ctx, &a));
    char what[128];
    snprintf(what, sizeof what, "layernorm n=%lld d=%lld%s%s", (long long)n, (long long)d, bias ? " bias" : "",
             in_place ? " in place" : "");
    gget(in_place ? dx : dy, got, what);
    double worst = 0;
    for (size_t i = 0; i < N; i++)
        err_fold(what, i, got[i], ref[i], 1e-6 * (fabs(ref[i]) + (bias ? fabs(b[i % (size_t)d]) : 0)) + 1e-30,
                 &worst);
    printf("%-60s max |gpu-cpu| / (1e-6 (|cpu| + |b|) + 1e-30) %.3g (bound 1)\n", what, worst);
    if (!(worst <= 1.0)) fail_msg("%s: error %g x the bound", what, worst);
    gfree(dx), gfree(dw), gfree(db), gfree(dy);
    free(x), free(w), free(b), free(ref), free(got);
}

static void gelu_case(int64_t n) {
    NEED_CPU(gelu);
    const size_t N = (size_t)n;
    float *x = rnd_buf(N, 6.0f), *got = malloc(4 * N + 4);
    float *ref = dup_buf(x, N);
    sqz_eltwise_args a = {.x = ref, .y = NULL, .n = n};
    SQZ_ASSERT_OK(cpu->ops->gelu(cpu->ctx, &a));
    gbuf dx = gnewf(x, N);
    a.x = gptr(dx);
    SQZ_ASSERT_OK(gpu->ops->gelu(gpu->ctx, &a));
    char what[64];
    snprintf(what, sizeof what, "gelu n=%lld", (long long)n);
    gget(dx, got, what);
    double worst = 0;
    /* the CPU's erf (A&S 7.1.26) is within 1.5e-7 of erf: |x| / 2 * 1.5e-7 plus float rounding */
    for (size_t i = 0; i < N; i++)
        err_fold(what, i, got[i], ref[i], 1e-7 * fabs(x[i]) + 1e-6 * fabs(ref[i]) + 1e-30, &worst);
    printf("%-60s max |gpu-cpu| / (1e-7 |x| + 1e-6 |cpu| + 1e-30) %.3g (bound 1)\n", what, worst);
    if (!(worst <= 1.0)) fail_msg("%s: outside the bound", what);
    gfree(dx);
    free(x), free(ref), free(got);
}

static void test_bert_ops(void **state) {
    (void)state;
    layernorm_case(3, 1, true, false);
    layernorm_case(11, 384, true, false);
    layernorm_case(130, 384, false, true);
    layernorm_case(7, 1536, true, true);
    gelu_case(1);
    gelu_case(1000003);
}

static void test_supports(void **state) {
    (void)state;
    const sqz_op ops[] = {SQZ_OP_RMSNORM, SQZ_OP_ROPE,      SQZ_OP_ATTENTION, SQZ_OP_SILU_MUL,
                          SQZ_OP_ADD,     SQZ_OP_LAYERNORM, SQZ_OP_GELU};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        assert_true(sqz_backend_supports(gpu, ops[i], SQZ_DTYPE_F32));
        assert_true(sqz_backend_supports(cpu, ops[i], SQZ_DTYPE_F32));
    }
}

int main(void) {
    const int rc0 = sqz_gpu_open(&gpu, &cpu, "GPU forward tests");
    if (rc0) return rc0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_supports), cmocka_unit_test(test_eltwise),   cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),     cmocka_unit_test(test_attention), cmocka_unit_test(test_bert_ops),
    };
    const int rc = sqz_test_run(tests, NULL, NULL);
    sqz_backend_free(gpu);
    sqz_backend_free(cpu);
    return rc;
}
