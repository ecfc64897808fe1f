/*
 * sqz/dist.h - the few collectives distributed calibration needs (mpi/), over MPI when sqz is
 * built with SQZ_MPI and started by an MPI launcher (`mpirun -np N sqz ...`), otherwise one
 * process of rank 0 in a world of size 1, where every call below is a copy or nothing.
 *
 * calib/ and compress/ call this interface, never MPI: the library builds, links and runs the
 * same without MPI. Every call is collective unless it says otherwise: every rank calls it, in
 * the same order, with the same root and count. Errors are SQZ_ERR_IO naming the call and the
 * rank; a rank that fails must end the job (sqz_dist_abort), or the others wait for it forever.
 *
 * Sizes are bytes (size_t); buffers larger than MPI's int count are sent in pieces.
 *
 *   sqz_dist_init(&argc, &argv);          // MPI_Init when launched by mpirun, else nothing
 *   if (sqz_dist_rank() == 0) write_outputs();
 *   sqz_dist_finalize();
 */
#ifndef SQZ_DIST_H
#define SQZ_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts MPI when this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMIX_RANK
 * or PMI_RANK in the environment) and sqz was built with MPI; otherwise does nothing. Not
 * collective in the single-process case. Call once, before anything else of this header. */
SQZ_API sqz_status sqz_dist_init(int *argc, char ***argv);
/* Ends MPI (after a barrier). Nothing when MPI was not started. */
SQZ_API void sqz_dist_finalize(void);
/* Ends every rank of the job at once with exit status `code` (MPI_Abort); without MPI, nothing
 * (the caller returns its status as usual). Not collective. */
SQZ_API void sqz_dist_abort(int code);

/* This process's rank (0 without MPI) and the number of ranks (1 without MPI). Not collective. */
SQZ_API int sqz_dist_rank(void);
SQZ_API int sqz_dist_size(void);
/* Whether this build has MPI (SQZ_MPI). Not collective. */
SQZ_API bool sqz_dist_built(void);
/* True when this process was started by mpirun and joined the job (even as its only rank):
 * calibration then merges per-window statistics along the fixed tree that makes any number of
 * ranks give the same bits; false for a plain run, which accumulates in window order with one
 * set of statistics (calib/driver.c). */
SQZ_API bool sqz_dist_launched(void);

SQZ_API sqz_status sqz_dist_barrier(void);
/* buf[0..n) of rank `root` into buf[0..n) of every rank. */
SQZ_API sqz_status sqz_dist_bcast(void *buf, size_t n, int root);
/* x[i] = max over ranks of x[i] (exact: the result does not depend on the ranks' order). */
SQZ_API sqz_status sqz_dist_max_f64(double *x, size_t n);
/* x[i] = sum over ranks of x[i], added in rank order 0, 1, ..., N-1 on every rank (the same
 * bits on every rank; the sum of one rank's x alone is x). */
SQZ_API sqz_status sqz_dist_sum_f64(double *x, size_t n);
/* Every rank's mine[0..n) (n may differ between ranks) concatenated in rank order, into a
 * buffer *all (malloc'd, the caller frees it) of sum(counts) bytes on every rank; counts
 * (size_t[sqz_dist_size()], caller's) receives each rank's n. */
SQZ_API sqz_status sqz_dist_allgatherv(const void *mine, size_t n, uint8_t **all, size_t *counts);
/* The same, but only `root` receives (*all and counts are set on root only; NULL elsewhere). */
SQZ_API sqz_status sqz_dist_gatherv(const void *mine, size_t n, int root, uint8_t **all, size_t *counts);

/* Point to point (not collective): buf[0..n) to rank `to`, and n bytes from rank `from` into
 * buf[0..n), which must be the size sent. Messages between two ranks arrive in the order sent.
 * A rank never sends to itself. */
SQZ_API sqz_status sqz_dist_send(const void *buf, size_t n, int to);
SQZ_API sqz_status sqz_dist_recv(void *buf, size_t n, int from);

/* Bytes this rank has sent since sqz_dist_init (what it contributed to every collective),
 * and zero for the single process. Not collective. */
SQZ_API uint64_t sqz_dist_bytes_sent(void);

#ifdef __cplusplus
}
#endif
#endif
