/*
 * sparse/mask.c - choosing which weights become zero from a score: the k lowest of a
 * whole matrix (magnitude, SparseGPT's block threshold), of each row (Wanda compares weights
 * of one output only), or of every M consecutive weights of a row (N:M). Ties are broken by
 * position (lower index first), so every choice is deterministic on every libc.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sparse/sparse_internal.h"

typedef struct key {
    float s;
    int64_t i;
} key;

static int cmp_key(const void *a, const void *b) {
    const key *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Marks the k lowest of n scores read at stride 1 from s into p. keys: room for n. */
static void lowest(const float *s, int64_t n, int64_t k, uint8_t *p, key *keys) {
    memset(p, 0, (size_t)n);
    if (k <= 0) return;
    if (k >= n) {
        memset(p, 1, (size_t)n);
        return;
    }
    for (int64_t i = 0; i < n; i++) keys[i] = (key){isnan(s[i]) ? INFINITY : s[i], i};
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    for (int64_t i = 0; i < k; i++) p[keys[i].i] = 1;
}

sqz_status sqz__sparsity_lowest(const float *score, int64_t count, int64_t k, uint8_t *prune) {
    key *keys = sqz__malloc((size_t)count * sizeof *keys);
    if (!keys) return SQZ_ERR_NOMEM;
    lowest(score, count, k, prune, keys);
    free(keys);
    return SQZ_OK;
}

sqz_status sqz__sparsity_row_lowest(const float *score, int64_t ld, int64_t rows, int64_t cols, int64_t k,
                                    uint8_t *prune, int64_t ld_p) {
    key *keys = sqz__malloc((size_t)cols * sizeof *keys);
    if (!keys) return SQZ_ERR_NOMEM;
    for (int64_t r = 0; r < rows; r++) lowest(score + r * ld, cols, k, prune + r * ld_p, keys);
    free(keys);
    return SQZ_OK;
}

void sqz__sparsity_nm_lowest(const float *score, int64_t ld, int64_t rows, int64_t cols, int n, int m,
                             uint8_t *prune, int64_t ld_p) {
    key keys[64];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j + m <= cols; j += m) lowest(score + r * ld + j, m, m - n, prune + r * ld_p + j, keys);
}

sqz_status sqz__sparsity_score_prune(float *w, int64_t n_out, int64_t n_in, int method, const float *x2,
                                     double ratio, int n, int m, int64_t *zeros) {
    const int64_t count = n_out * n_in;
    float *sc = sqz__malloc((size_t)count * sizeof(float));
    uint8_t *p = sqz__malloc((size_t)count);
    sqz_status st = sc && p ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        for (int64_t r = 0; r < n_out; r++)
            for (int64_t j = 0; j < n_in; j++) {
                const float a = fabsf(w[r * n_in + j]);
                sc[r * n_in + j] = method == SQZ__SPARSE_WANDA ? a * sqrtf(x2[j] > 0 ? x2[j] : 0.0f) : a;
            }
        if (m > 0) sqz__sparsity_nm_lowest(sc, n_in, n_out, n_in, n, m, p, n_in);
        else if (method == SQZ__SPARSE_WANDA) /* per output (Wanda's comparison group) */
            st = sqz__sparsity_row_lowest(sc, n_in, n_out, n_in, (int64_t)llround(ratio * (double)n_in), p, n_in);
        else /* layer-wise, as the magnitude baseline of the SparseGPT and Wanda papers */
            st = sqz__sparsity_lowest(sc, count, (int64_t)llround(ratio * (double)count), p);
    }
    int64_t z = 0;
    for (int64_t i = 0; st == SQZ_OK && i < count; i++)
        if (p[i]) w[i] = 0.0f;
    for (int64_t i = 0; st == SQZ_OK && i < count; i++) z += w[i] == 0.0f;
    *zeros = z;
    free(sc);
    free(p);
    return st;
}

bool sqz__sparsity_is_nm(const float *w, int64_t n_out, int64_t n_in, int n, int m) {
    if (m <= 0 || n_in % m) return false;
    for (int64_t r = 0; r < n_out; r++)
        for (int64_t j = 0; j < n_in; j += m) {
            int nz = 0;
            for (int k = 0; k < m; k++) nz += w[r * n_in + j + k] != 0.0f;
            if (nz > n) return false;
        }
    return true;
}
