/*
 * kernels/cpu/pool.h - a small fork-join thread pool: the CPU backend splits the matrix
 * products on stored weights over it (qmatmul.h), the runtime its element-wise work and
 * attention (f32 products run on OpenBLAS's own threads). Lives here, below runtime/, so
 * that both can use it.
 */
#ifndef SQZ_KERNELS_CPU_POOL_H
#define SQZ_KERNELS_CPU_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "sqz/status.h"

typedef struct sqz__pool sqz__pool;

/* fn processes items [begin, end) on worker `thread` (0 = the calling thread). */
typedef void (*sqz__pool_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* A pool of n_threads threads counting the caller (n_threads - 1 are started). n_threads <= 0:
 * the number of online cores. */
sqz_status sqz__pool_new(int n_threads, sqz__pool **out);
/* Joins and frees. NULL is fine. */
void sqz__pool_free(sqz__pool *p);
/* Sets how long waiters poll before sleeping (nanoseconds; 0: sleep at once) and returns the
 * previous value: a caller about to hand the cores to another pool of threads (OpenBLAS's) sets 0
 * for that stretch so that this pool's idle threads do not compete with them. */
int64_t sqz__pool_set_spin(sqz__pool *p, int64_t ns);
/* Threads including the caller. */
int sqz__pool_threads(const sqz__pool *p);
/* A buffer of at least `bytes` owned by the pool (slot 0, 1 or 2; its contents are not kept when it
 * grows), kept until sqz__pool_free: the products' panels and quantized activations, which a
 * fresh allocation per product paid for in page faults (36 MB panels of the 1.5 B's ffn_down
 * zeroed again for each product). NULL when out of memory. The pool's caller only (not reentrant). */
void *sqz__pool_scratch(sqz__pool *p, int slot, size_t bytes);
/* Runs fn over [0, n) split in chunks of at least `grain` items, and returns when all are done.
 * Runs inline when one chunk covers everything. Not reentrant. */
void sqz__pool_for(sqz__pool *p, int64_t n, int64_t grain, sqz__pool_fn fn, void *ctx);

#endif
