/*
 * sqz/backend.h - the compute backend interface.
 *
 * A backend is a table of function pointers plus its context (both the library's:
 * kernels/cpu/backend_impl.h; a client holds an opaque sqz_backend). The
 * CPU backend is always present; the CUDA backend exists when libsqz was built with
 * SQZ_CUDA, its CUDA module loads and a device is found at run time. Callers ask
 * supports(op, dtype) before dispatching instead of failing inside; optional slots may be
 * NULL and the dispatch helpers below check them.
 *
 * Memory: every pointer passed to an op lives in the backend's memory (host memory
 * for the CPU backend, device memory for CUDA), obtained from alloc() and moved with
 * upload()/download(). Ops run asynchronously on the backend's stream;
 * synchronize() waits for them. Errors come back as sqz_status with the device's own
 * error text in sqz_last_error().
 *
 * Conventions for the GEMM ops: row-major, Y(m, n) = X(m, k) . W(n, k)^T, i.e. W is
 * stored as a linear layer's weight (out_features, in_features), m is the number of
 * tokens.
 */
#ifndef SQZ_BACKEND_H
#define SQZ_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/dtype.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_op {
    SQZ_OP_MATMUL = 0,     /* float X (f32) x W (f32/f16/bf16; on the CPU every GGUF block type too) -> f32 */
    SQZ_OP_GEMM_I8 = 1,    /* W8A8: int8 X with per-token scales x int8 W with per-channel scales */
    SQZ_OP_GEMM_W4A16 = 2, /* int4 W per group x fp16 X -> f16/f32 */
    SQZ_OP_GEMM_I8_SP24 = 3, /* W8A8 with W 2:4 sparse in sqz/sparse.h's layout (w_dtype I8) */
    /* The calibration loop's slots (sqz compress --device; docs/device.md). w_dtype is ignored
     * (pass SQZ_DTYPE_F32) except for SQZ_OP_TO_F32, where it is the source dtype. */
    SQZ_OP_SGEMM = 4,      /* general f32 GEMM with transposes and leading dimensions */
    SQZ_OP_XTX = 5,        /* the Hessian sum H += X^T X in f64 (GPTQ, SparseGPT, OBS) */
    SQZ_OP_CHOL = 6,       /* GPTQ's damped factor: U upper with U^T U = H^-1, f64 */
    SQZ_OP_TO_F32 = 7,     /* weights of a float dtype (f32/f16/bf16) widened to f32 in backend memory;
                              f64 (GPTQ's factor) narrowed, rounded to nearest */
    /* The block forward's slots (a llama block with its activations in backend memory:
     * runtime/device_block.c, docs/device.md). w_dtype is ignored (pass SQZ_DTYPE_F32). */
    SQZ_OP_RMSNORM = 8,    /* y = x / sqrt(mean(x^2) + eps) * w, per row (sqz_rmsnorm_args) */
    SQZ_OP_ROPE = 9,       /* rotary embedding of query / key heads, in place (sqz_rope_args) */
    SQZ_OP_ATTENTION = 10, /* softmax(Q K^T / sqrt(hd)) V, grouped-query, causal or not (sqz_attention_args) */
    SQZ_OP_SILU_MUL = 11,  /* g = silu(g) * u, SwiGLU's gate (sqz_eltwise_args) */
    SQZ_OP_ADD = 12,       /* x += y, the residual (sqz_eltwise_args) */
    SQZ_OP_LAYERNORM = 13, /* y = (x - mean) / sqrt(var + eps) * w + b, per row (sqz_layernorm_args; BERT) */
    SQZ_OP_GELU = 14,      /* x = gelu(x), the erf form (sqz_eltwise_args, y unused; BERT) */
    /* GPTQ's factor in tiles (quant/chol_tiles.c: --gpu-mem below a dense Hessian). w_dtype ignored. */
    SQZ_OP_TILES = 15,     /* the f64 tile slots dgemm, dtrsm, dpotrf (all three or none) */
    /* The observers' other statistics and layer scoring's reduction (calib/observe.c). w_dtype ignored. */
    SQZ_OP_COLSTATS = 16,  /* per-column sums of squares, of |x|, of x and the absmax (sqz_colstats_args) */
    SQZ_OP_COSINE = 17,    /* per-row cosine similarity of two row sets (sqz_cosine_args; ShortGPT's score) */
    SQZ_OP_COUNT
} sqz_op;

/* Kernel variants behind one GEMM op (the `variant` field of the GEMM args). AUTO (0)
 * lets the backend pick per shape; any other value forces that variant and fails with
 * SQZ_ERR_UNSUPPORTED where the backend or the shape cannot run it (tests and
 * `sqz bench kernels` use this to check and time every path). The CPU backend has one
 * variant per op and accepts only AUTO. Values are append-only. */
typedef enum sqz_kernel_variant {
    SQZ_KVAR_AUTO = 0,
    SQZ_KVAR_I8_CUBLASLT = 1,     /* CUDA: cuBLASLt IMMA (int32 out) + scale epilogue kernel */
    SQZ_KVAR_I8_MMA = 2,          /* CUDA: own mma.sync m16n8k32 kernel; x_f32 is quantized by a
                                   * separate per-token kernel first */
    SQZ_KVAR_I8_MMA_FUSED = 3,    /* CUDA: own mma kernel quantizing x_f32 in its prologue (needs x_f32) */
    SQZ_KVAR_W4_MMA = 4,          /* CUDA: int4 dequantized in registers into mma.sync m16n8k16 fragments */
    SQZ_KVAR_W4_DEQUANT_F16 = 5   /* CUDA: int4 -> fp16 scratch, then cuBLAS fp16 GEMM (fp32 accumulate) */
} sqz_kernel_variant;

/* Y = X . W^T (+ bias). x: (m, k) f32; w: (n, k) of w_dtype; bias: (n) f32 or NULL; y: (m, n) f32. */
/* How a product on stored weights treats its f32 input (sqz --activations). */
typedef enum sqz_activations {
    SQZ_ACTIVATIONS_F32 = 0, /* the input as it is: the exact model (eval and calibration's default) */
    SQZ_ACTIVATIONS_Q8 = 1,  /* as ggml-cpu: the input quantized to the weight type's dot-product type (Q8_0,
                        Q8_1, Q8_K; rounded to f16/bf16 for F16/BF16 weights) and multiplied in
                        integers, what llama.cpp computes (generation's default). Only the CPU
                        backend reads it (sqz_session_new refuses q8 on any other, before any
                        work); F32 weights are multiplied as they are. */
} sqz_activations;

typedef struct sqz_matmul_args {
    int64_t m, n, k;
    const float *x;
    const void *w;
    sqz_dtype w_dtype;
    const float *bias;
    float *y;
    sqz_activations acts; /* 0 (SQZ_ACTIVATIONS_F32) unless set */
} sqz_matmul_args;

/* Y[i][j] = x_scale[i] * w_scale[j] * sum_k X[i][k] * W[j][k], int32 accumulation.
 * When x_f32 is non-NULL the backend quantizes it per token (absmax / 127, round to
 * nearest even) into x / x_scale itself (fused prologue); otherwise x and x_scale are
 * given. y is f32 or f16 (y_dtype).
 * Exact definition, shared by every backend (kernels/cpu/gemm_ref.h is the reference):
 * x_scale[i] = absmax_k(x_f32[i][k]) / 127 (IEEE division); x[i][k] = clamp(rint(x_f32[i][k]
 * / x_scale[i]), -127, 127) (round half to even; 0 for a zero row); a row holding a NaN or
 * an infinity gets x_scale NaN and x = 0, so all its outputs are NaN.
 * y[i][j] = ((float)acc * x_scale[i]) * w_scale[j], rounded to f16 (RNE) when y is f16.
 * k <= SQZ_GEMM_I8_MAX_K so that the int32 accumulator cannot overflow. */
#define SQZ_GEMM_I8_MAX_K 131071 /* 131071 * 128 * 128 < 2^31 */
typedef struct sqz_gemm_i8_args {
    int64_t m, n, k;
    const float *x_f32;    /* optional (m, k) */
    int8_t *x;             /* (m, k) */
    float *x_scale;        /* (m) */
    const int8_t *w;       /* (n, k) */
    const float *w_scale;  /* (n) */
    void *y;               /* (m, n) */
    sqz_dtype y_dtype;     /* SQZ_DTYPE_F32 or SQZ_DTYPE_F16 */
    sqz_kernel_variant variant; /* SQZ_KVAR_AUTO (0): the backend picks per shape */
} sqz_gemm_i8_args;

/* Y = X . dequant(W)^T with W int4 per group along k, prepared by prepare_w4; n and k
 * must be those given to prepare_w4 (backends check). k is a multiple of 32. */
typedef struct sqz_gemm_w4_args {
    int64_t m, n, k;
    const uint16_t *x;     /* (m, k) fp16 */
    const void *w;         /* prepared weights (backend layout) */
    void *y;               /* (m, n) */
    sqz_dtype y_dtype;     /* SQZ_DTYPE_F32 or SQZ_DTYPE_F16 */
    sqz_kernel_variant variant; /* SQZ_KVAR_AUTO (0): the backend picks per shape */
} sqz_gemm_w4_args;

/* The 2:4 sparse W8A8 GEMM: the gemm_i8 definition above with W (n, k) given compressed
 * (sqz/sparse.h: values (n, k/2) int8, meta (n, k/32) uint32; k a multiple of 32): the result
 * is bit for bit gemm_i8's on the unpacked W. x_f32 optional as for gemm_i8. */
typedef struct sqz_gemm_i8_sp24_args {
    int64_t m, n, k;
    const float *x_f32;     /* optional (m, k) */
    int8_t *x;              /* (m, k) */
    float *x_scale;         /* (m) */
    const int8_t *values;   /* (n, k/2) */
    const uint32_t *meta;   /* (n, k/32) */
    const float *w_scale;   /* (n) */
    void *y;                /* (m, n) */
    sqz_dtype y_dtype;      /* SQZ_DTYPE_F32 or SQZ_DTYPE_F16 */
} sqz_gemm_i8_sp24_args;

/* Device memory accounting (sqz compress --gpu-mem). Bytes the backend allocated (alloc() and
 * its own scratch and library workspaces), the most it held at once since creation, and the
 * cap (0: none). */
typedef struct sqz_backend_mem {
    size_t in_use, peak, cap;
} sqz_backend_mem;

/* A backend: its table of operations and their context, the library's (kernels/cpu/backend_impl.h).
 * A client creates one below, asks what it supports and runs the products of this header on it. */
typedef struct sqz_backend sqz_backend;


/* The CPU backend (always available). Free with sqz_backend_free. n_threads 0 = all cores.
 * matmul multiplies f32 weights with OpenBLAS (n_threads OpenBLAS threads) and every other dtype
 * with a float view from its stored blocks (docs/kernels.md) on the backend's own pool of
 * n_threads threads; a call made while another thread's call holds the pool runs on the calling
 * thread alone. */
SQZ_API sqz_status sqz_backend_cpu(int n_threads, sqz_backend **out);

/* The BLAS the CPU kernels call (OpenBLAS), the kernels it chose, and what this CPU's feature
 * bits allow (kernels/cpu/blas_info.c). Tiers: 1 SSE, 2 AVX2+FMA, 3 AVX-512, 4 AVX-512 BF16;
 * 0 unknown. `better` names the OPENBLAS_CORETYPE to set when the BLAS chose a lower tier than
 * the CPU allows (an OpenBLAS older than the CPU), else "". */
typedef struct sqz_blas_info {
    char core[32];    /* openblas_get_corename(): "Haswell", "SkylakeX", "Prescott", ... */
    char config[128]; /* openblas_get_config(): version and build options */
    char better[32];  /* "SKYLAKEX", "COOPERLAKE", ... or "" */
    int core_tier, cpu_tier;
} sqz_blas_info;
SQZ_API void sqz_blas_info_get(sqz_blas_info *out);
/* The instruction sets the CPU backend's own kernels run here (after SQZ_QMM_ISA): the float
 * products on stored weights (and which GEMM multiplies many tokens) and the integer ones of
 * --activations q8, e.g. "stored weights avx512 (many tokens: sqz's GEMM avx512), q8 integer
 * products avx512vnni" (kernels/cpu/qidot.c). A static string. */
SQZ_API const char *sqz_cpu_kernels(void);
/* The BLAS's sgemm of two n x n matrices (n <= 8192) on the threads it has: GFLOP/s, the best of
 * three runs; 0 when out of memory. */
SQZ_API double sqz_blas_sgemm_gflops(int n);
/* The CPU backend behind the device interface: the same arithmetic, but it says its memory is
 * not host memory (host_memory false), so callers take their device code paths (allocate,
 * upload, compute, download; here the copies are memcpy), and it keeps the device's memory
 * accounting (mem_stats, set_mem_cap: --gpu-mem). For checking those paths without a GPU
 * (`--device cpu-offload`); slower than sqz_backend_cpu. */
SQZ_API sqz_status sqz_backend_cpu_offload(int n_threads, sqz_backend **out);
/* The CUDA backend on `device` (-1 = first). SQZ_ERR_UNSUPPORTED when built without CUDA
 * or when the CUDA module (libsqz_cuda.so) is not found, SQZ_ERR_DEVICE when it cannot be
 * loaded (no CUDA runtime) or no usable device exists.
 * In a CUDA build the CUDA code and libraries are in that module, which the first call of
 * any CUDA function below loads (once per process, thread-safe): beside libsqz.so (or the
 * program linking libsqz.a), in its ../lib, on the library path, or at $SQZ_CUDA_MODULE.
 * Nothing CUDA is mapped before (docs/kernels.md). */
SQZ_API sqz_status sqz_backend_cuda(int device, sqz_backend **out);
SQZ_API void sqz_backend_free(sqz_backend *b);

/* True if the backend has the op for that weight dtype (slot present and supports() says so). */
SQZ_API bool sqz_backend_supports(const sqz_backend *b, sqz_op op, sqz_dtype w_dtype);

/* The backend's name ("cpu", "cpu-offload", "cuda"): a static string. */
SQZ_API const char *sqz_backend_name(const sqz_backend *b);

/* The products a client can run, on memory of the backend (host memory for the CPU backend:
 * sqz_backend_host_memory), with the definitions of their argument structs above. Each returns
 * SQZ_ERR_UNSUPPORTED when the backend lacks the op (ask sqz_backend_supports first). prepare_w4
 * re-lays out int4 weights (n, k) of dtype src_dtype (Q4_0, Q4_1) from host memory for gemm_w4,
 * into backend memory that sqz_backend_release frees. */
SQZ_API sqz_status sqz_backend_matmul(sqz_backend *b, const sqz_matmul_args *a);
SQZ_API sqz_status sqz_backend_gemm_i8(sqz_backend *b, const sqz_gemm_i8_args *a);
SQZ_API sqz_status sqz_backend_gemm_i8_sp24(sqz_backend *b, const sqz_gemm_i8_sp24_args *a);
SQZ_API sqz_status sqz_backend_prepare_w4(sqz_backend *b, const void *src_host, sqz_dtype src_dtype, int64_t n,
                                          int64_t k, void **prepared);
SQZ_API sqz_status sqz_backend_gemm_w4(sqz_backend *b, const sqz_gemm_w4_args *a);
SQZ_API void sqz_backend_release(sqz_backend *b, void *p);

/* True when the backend's memory is host memory (the CPU backend). */
SQZ_API bool sqz_backend_host_memory(const sqz_backend *b);

/* The backend's device memory accounting (all zero for a backend without it, e.g. the CPU). */
SQZ_API void sqz_backend_mem_stats(const sqz_backend *b, sqz_backend_mem *out);

/* Caps what the backend allocates (--gpu-mem); SQZ_ERR_UNSUPPORTED for a backend without the
 * accounting (the CPU), SQZ_ERR_NOMEM when more than cap is in use already. */
SQZ_API sqz_status sqz_backend_set_mem_cap(sqz_backend *b, size_t cap);
/* Page-locks host memory [p, p + nbytes) for faster copies when b has the host_pin slot (at least
 * min_bytes: smaller buffers gain nothing). Returns whether it did; a pin that fails leaves no
 * error set (copies from unpinned memory are slower, not wrong). A pinned range must be given to
 * sqz_backend_unpin before it is freed. */
SQZ_API bool sqz_backend_pin(const sqz_backend *b, void *p, size_t nbytes, size_t min_bytes);
SQZ_API void sqz_backend_unpin(const sqz_backend *b, void *p);

/* ---- CUDA device facts and kernel timing (what `sqz bench kernels` prints) ----------
 * Built without CUDA, or when the CUDA module cannot be loaded: sqz_cuda_device_count() is
 * 0 and the others return SQZ_ERR_UNSUPPORTED / SQZ_ERR_DEVICE as sqz_backend_cuda does. */

typedef struct sqz_cuda_device_info {
    char name[256];
    int cc_major, cc_minor;      /* compute capability */
    int sm_count;
    double sm_clock_ghz;         /* peak SM clock (cudaDevAttrClockRate) */
    double mem_bandwidth_gbs;    /* theoretical DRAM bandwidth: 2 x memory clock x bus width */
    size_t mem_bytes;            /* global memory */
    size_t l2_bytes;             /* L2 cache */
    /* Dense tensor-core peaks: sqz's per-architecture table of operations per SM per clock
     * (docs/kernels.md) x SMs x clock; 0 when the architecture is not in the table. */
    double peak_f16_tflops;      /* fp16 inputs, fp32 accumulate */
    double peak_i8_tops;         /* int8 inputs, int32 accumulate */
} sqz_cuda_device_info;

/* Number of usable CUDA devices: 0 without CUDA support, driver or device. Never fails. */
SQZ_API int sqz_cuda_device_count(void);
/* Facts about `device` (0-based). SQZ_ERR_DEVICE with the CUDA error text on failure. */
SQZ_API sqz_status sqz_cuda_device_info_get(int device, sqz_cuda_device_info *out);

/* The kernels sqz_cuda_bench_gemm can time. Values are append-only. */
typedef enum sqz_bench_kernel {
    SQZ_BENCH_CUBLAS_F16 = 0,    /* baseline: cublasGemmEx fp16 x fp16 -> fp16, fp32 accumulate */
    SQZ_BENCH_CUBLASLT_I8 = 1,   /* baseline: cuBLASLt IMMA int8 x int8 -> int32, no scales */
    SQZ_BENCH_I8_LT = 2,         /* gemm_i8, SQZ_KVAR_I8_CUBLASLT (int8 in, f16 out, scales applied) */
    SQZ_BENCH_I8_MMA = 3,        /* gemm_i8, SQZ_KVAR_I8_MMA (int8 in, f16 out) */
    SQZ_BENCH_I8_MMA_FUSED = 4,  /* gemm_i8, SQZ_KVAR_I8_MMA_FUSED (f32 in, quantized in the prologue) */
    SQZ_BENCH_W4_Q4_0 = 5,       /* gemm_w4, SQZ_KVAR_W4_MMA on Q4_0 weights, f16 out */
    SQZ_BENCH_W4_Q4_1 = 6,       /* gemm_w4, SQZ_KVAR_W4_MMA on Q4_1 weights, f16 out */
    SQZ_BENCH_W4_DEQUANT_F16 = 7,/* gemm_w4, SQZ_KVAR_W4_DEQUANT_F16 on Q4_0 weights, f16 out */
    SQZ_BENCH_KERNEL_COUNT
} sqz_bench_kernel;

typedef struct sqz_bench_result {
    double seconds;  /* median time of one call */
    double ops;      /* 2 m n k */
    double bytes;    /* minimum DRAM traffic of one call: inputs read once, output written once */
    int calls;       /* calls timed */
} sqz_bench_result;

/* A short name of the kernel ("cublas_f16", "w4_q4_0"), or "invalid". */
SQZ_API const char *sqz_bench_kernel_name(sqz_bench_kernel kernel);

/* Times `kernel` on the CUDA backend `b` (from sqz_backend_cuda) for Y(m, n) = X(m, k) .
 * W(n, k)^T on random data: the weights are replicated in as many buffers as it takes to
 * exceed twice the L2 cache (at most 8) and used in turn so that they come from DRAM;
 * after a warm-up, batches of calls are timed with CUDA events until min_seconds have
 * passed; result->seconds is the median batch time per call. SQZ_ERR_UNSUPPORTED when the
 * kernel cannot run that shape (e.g. cuBLASLt IMMA needs n and k multiples of 4),
 * SQZ_ERR_NOMEM when the device memory does not suffice. */
SQZ_API sqz_status sqz_cuda_bench_gemm(sqz_backend *b, sqz_bench_kernel kernel, int64_t m, int64_t n, int64_t k,
                                       double min_seconds, sqz_bench_result *result);

#ifdef __cplusplus
}
#endif
#endif
