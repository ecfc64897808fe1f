/*
 * mpi/dist_none.c - sqz/dist.h without MPI: one process, rank 0 of 1. Every collective is
 * the identity (a gather is a copy of the caller's own bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sqz/dist.h"

sqz_status sqz_dist_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return SQZ_OK;
}
void sqz_dist_finalize(void) {}
void sqz_dist_abort(int code) { (void)code; }
int sqz_dist_rank(void) { return 0; }
int sqz_dist_size(void) { return 1; }
bool sqz_dist_built(void) { return false; }
bool sqz_dist_launched(void) { return false; }
sqz_status sqz_dist_barrier(void) { return SQZ_OK; }
uint64_t sqz_dist_bytes_sent(void) { return 0; }

sqz_status sqz_dist_bcast(void *buf, size_t n, int root) {
    (void)buf;
    (void)n;
    SQZ_RETURN_IF(root != 0, SQZ_ERR_INVALID_ARG, "dist: broadcast from rank %d of 1", root);
    return SQZ_OK;
}

sqz_status sqz_dist_send(const void *buf, size_t n, int to) {
    (void)buf;
    (void)n;
    return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "dist: send to rank %d of 1", to);
}

sqz_status sqz_dist_recv(void *buf, size_t n, int from) {
    (void)buf;
    (void)n;
    return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "dist: receive from rank %d of 1", from);
}

sqz_status sqz_dist_max_f64(double *x, size_t n) {
    (void)x;
    (void)n;
    return SQZ_OK;
}

sqz_status sqz_dist_sum_f64(double *x, size_t n) {
    (void)x;
    (void)n;
    return SQZ_OK;
}

sqz_status sqz_dist_allgatherv(const void *mine, size_t n, uint8_t **all, size_t *counts) {
    *all = sqz__malloc(n ? n : 1);
    if (!*all) return SQZ_ERR_NOMEM;
    if (n) memcpy(*all, mine, n);
    counts[0] = n;
    return SQZ_OK;
}

sqz_status sqz_dist_gatherv(const void *mine, size_t n, int root, uint8_t **all, size_t *counts) {
    SQZ_RETURN_IF(root != 0, SQZ_ERR_INVALID_ARG, "dist: gather to rank %d of 1", root);
    return sqz_dist_allgatherv(mine, n, all, counts);
}
