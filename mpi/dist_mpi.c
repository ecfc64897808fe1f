/*
 * mpi/dist_mpi.c - sqz/dist.h over MPI (SQZ_MPI). MPI is started only when an MPI launcher
 * started this process; otherwise every call behaves as dist_none.c does (rank 0 of 1), so
 * `sqz` built with MPI runs alone exactly as without.
 *
 * Communicator errors return (MPI_ERRORS_RETURN) and become SQZ_ERR_IO naming the call and
 * the rank; the caller then ends the job with sqz_dist_abort. Large buffers go in pieces of
 * CHUNK bytes (MPI's counts are int). Byte counts: what this rank's data costs the network,
 * counted once per receiving rank (a broadcast of n bytes from the root to N-1 ranks counts
 * n (N-1) on the root), whatever tree the MPI library uses underneath.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sqz/dist.h"

enum { CHUNK = 1 << 30 };

static bool started;    /* MPI_Init was called here */
static int g_rank, g_size = 1;
static uint64_t g_sent;

static bool launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

static sqz_status mpi_fail(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return SQZ_ERROR(SQZ_ERR_IO, "MPI: rank %d of %d: %s failed: %s", g_rank, g_size, what, msg);
}
#define MPI_TRY(call, what)                       \
    do {                                          \
        int rc_ = (call);                         \
        if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, what); \
    } while (0)

sqz_status sqz_dist_init(int *argc, char ***argv) {
    if (started || !launched()) return SQZ_OK;
    MPI_TRY(MPI_Init(argc, argv), "MPI_Init");
    started = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    return SQZ_OK;
}

void sqz_dist_finalize(void) {
    if (!started) return;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    started = false;
}

void sqz_dist_abort(int code) {
    if (started && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

int sqz_dist_rank(void) { return g_rank; }
int sqz_dist_size(void) { return g_size; }
bool sqz_dist_built(void) { return true; }
bool sqz_dist_launched(void) { return started; }
uint64_t sqz_dist_bytes_sent(void) { return g_sent; }

sqz_status sqz_dist_barrier(void) {
    if (g_size > 1) MPI_TRY(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    return SQZ_OK;
}

sqz_status sqz_dist_bcast(void *buf, size_t n, int root) {
    SQZ_RETURN_IF(root < 0 || root >= g_size, SQZ_ERR_INVALID_ARG, "dist: broadcast from rank %d of %d", root, g_size);
    if (g_size == 1) return SQZ_OK;
    for (size_t off = 0; off < n; off += CHUNK) {
        const int c = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_TRY(MPI_Bcast((uint8_t *)buf + off, c, MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
    }
    if (g_rank == root) g_sent += (uint64_t)n * (uint64_t)(g_size - 1);
    return SQZ_OK;
}

sqz_status sqz_dist_send(const void *buf, size_t n, int to) {
    SQZ_RETURN_IF(to < 0 || to >= g_size || to == g_rank, SQZ_ERR_INVALID_ARG, "dist: rank %d sends to rank %d of %d",
                  g_rank, to, g_size);
    for (size_t off = 0; off < n; off += CHUNK) {
        const int c = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_TRY(MPI_Send((const uint8_t *)buf + off, c, MPI_BYTE, to, 9, MPI_COMM_WORLD), "send");
    }
    g_sent += n;
    return SQZ_OK;
}

sqz_status sqz_dist_recv(void *buf, size_t n, int from) {
    SQZ_RETURN_IF(from < 0 || from >= g_size || from == g_rank, SQZ_ERR_INVALID_ARG,
                  "dist: rank %d receives from rank %d of %d", g_rank, from, g_size);
    for (size_t off = 0; off < n; off += CHUNK) {
        const int c = (int)(n - off < CHUNK ? n - off : CHUNK);
        MPI_TRY(MPI_Recv((uint8_t *)buf + off, c, MPI_BYTE, from, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive");
    }
    return SQZ_OK;
}

sqz_status sqz_dist_max_f64(double *x, size_t n) {
    if (g_size == 1) return SQZ_OK;
    SQZ_RETURN_IF(n > (size_t)CHUNK / sizeof(double), SQZ_ERR_INVALID_ARG, "dist: max of %zu values", n);
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "max-reduce");
    g_sent += (uint64_t)n * sizeof(double) * (uint64_t)(g_size - 1);
    return SQZ_OK;
}

sqz_status sqz_dist_sum_f64(double *x, size_t n) {
    if (g_size == 1) return SQZ_OK;
    size_t *counts = sqz__calloc((size_t)g_size, sizeof *counts);
    uint8_t *all = NULL;
    if (!counts) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_dist_allgatherv(x, n * sizeof(double), &all, counts);
    if (st == SQZ_OK) {
        const double *v = (const double *)all; /* rank r's array at v + r n: added in rank order */
        for (size_t i = 0; i < n; i++) {
            double s = v[i];
            for (int r = 1; r < g_size; r++) s += v[(size_t)r * n + i];
            x[i] = s;
        }
    }
    free(all);
    free(counts);
    return st;
}

/* Every rank's count, into counts (uint64 on the wire). */
static sqz_status gather_counts(size_t n, int root, size_t *counts) {
    uint64_t mine = n, *all = sqz__calloc((size_t)g_size, sizeof *all);
    if (!all) return SQZ_ERR_NOMEM;
    int rc = root < 0 ? MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD)
                      : MPI_Gather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(rc, "gathering sizes");
    }
    if (root < 0 || g_rank == root)
        for (int r = 0; r < g_size; r++) counts[r] = (size_t)all[r];
    free(all);
    return SQZ_OK;
}

static sqz_status alloc_all(const size_t *counts, uint8_t **all, size_t *total) {
    size_t t = 0;
    for (int r = 0; r < g_size; r++)
        SQZ_RETURN_IF(!sqz__add_size(t, counts[r], &t), SQZ_ERR_NOMEM, "dist: gathered sizes overflow");
    *total = t;
    *all = sqz__malloc(t ? t : 1);
    return *all ? SQZ_OK : SQZ_ERR_NOMEM;
}

sqz_status sqz_dist_allgatherv(const void *mine, size_t n, uint8_t **all, size_t *counts) {
    *all = NULL;
    if (g_size == 1) {
        counts[0] = n;
        if (!(*all = sqz__malloc(n ? n : 1))) return SQZ_ERR_NOMEM;
        if (n) memcpy(*all, mine, n);
        return SQZ_OK;
    }
    SQZ_TRY(gather_counts(n, -1, counts));
    size_t total, off = 0;
    SQZ_TRY(alloc_all(counts, all, &total));
    sqz_status st = SQZ_OK;
    for (int r = 0; r < g_size && st == SQZ_OK; r++) { /* rank r broadcasts its bytes into place */
        if (r == g_rank && n) memcpy(*all + off, mine, n);
        st = sqz_dist_bcast(*all + off, counts[r], r);
        off += counts[r];
    }
    if (st != SQZ_OK) {
        free(*all);
        *all = NULL;
    }
    return st;
}

sqz_status sqz_dist_gatherv(const void *mine, size_t n, int root, uint8_t **all, size_t *counts) {
    SQZ_RETURN_IF(root < 0 || root >= g_size, SQZ_ERR_INVALID_ARG, "dist: gather to rank %d of %d", root, g_size);
    *all = NULL;
    if (g_size == 1) return sqz_dist_allgatherv(mine, n, all, counts);
    SQZ_TRY(gather_counts(n, root, counts));
    if (g_rank != root) {
        for (size_t off = 0; off < n; off += CHUNK) {
            const int c = (int)(n - off < CHUNK ? n - off : CHUNK);
            MPI_TRY(MPI_Send((const uint8_t *)mine + off, c, MPI_BYTE, root, 7, MPI_COMM_WORLD), "send to the root");
        }
        g_sent += n;
        return SQZ_OK;
    }
    size_t total, pos = 0;
    SQZ_TRY(alloc_all(counts, all, &total));
    for (int r = 0; r < g_size; r++) {
        if (r == g_rank) {
            if (n) memcpy(*all + pos, mine, n);
        } else {
            for (size_t off = 0; off < counts[r]; off += CHUNK) {
                const int c = (int)(counts[r] - off < CHUNK ? counts[r] - off : CHUNK);
                int rc = MPI_Recv(*all + pos + off, c, MPI_BYTE, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    free(*all);
                    *all = NULL;
                    return mpi_fail(rc, "receive at the root");
                }
            }
        }
        pos += counts[r];
    }
    return SQZ_OK;
}
