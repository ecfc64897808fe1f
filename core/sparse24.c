/*
 * core/sparse24.c - the 2:4 INT8 layout of sqz/sparse.h (packing, unpacking; readers and
 * writers use it, hence core) and the sparsity of a tensor. The GEMM on the packed layout is
 * kernels/cpu/gemm_i8_sp24.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sqz/sparse.h"

/* The 4-bit field of a group (i0 < i1) from its non-zero mask; -1 for more than 2 non-zeros. */
static int group_field(unsigned nz) {
    int idx[2], n = 0;
    for (int b = 0; b < 4; b++)
        if (nz & (1u << b)) {
            if (n == 2) return -1;
            idx[n++] = b;
        }
    for (int b = 0; n < 2 && b < 4; b++) /* fill with the lowest unused index */
        if (!(nz & (1u << b)) && (n == 0 || idx[0] != b)) idx[n++] = b;
    if (idx[0] > idx[1]) {
        const int t = idx[0];
        idx[0] = idx[1];
        idx[1] = t;
    }
    return idx[0] | idx[1] << 2;
}

sqz_status sqz_sp24_pack_i8(const int8_t *w, int64_t n, int64_t k, int8_t *values, uint32_t *meta) {
    SQZ_RETURN_IF(n < 0 || k < 0 || k % 32, SQZ_ERR_INVALID_ARG, "2:4 pack: k = %lld is not a multiple of 32",
                  (long long)k);
    for (int64_t r = 0; r < n; r++) {
        const int8_t *wr = w + r * k;
        for (int64_t g = 0; g < k / 4; g++) {
            unsigned nz = 0;
            for (int b = 0; b < 4; b++) nz |= (unsigned)(wr[4 * g + b] != 0) << b;
            const int f = group_field(nz);
            SQZ_RETURN_IF(f < 0, SQZ_ERR_INVALID_ARG, "2:4 pack: row %lld, columns %lld..%lld hold more than 2 non-zeros",
                          (long long)r, (long long)(4 * g), (long long)(4 * g + 3));
            uint32_t *word = &meta[r * (k / 32) + g / 8];
            if (g % 8 == 0) *word = 0;
            *word |= (uint32_t)f << (4 * (g % 8));
            values[r * (k / 2) + 2 * g] = wr[4 * g + (f & 3)];
            values[r * (k / 2) + 2 * g + 1] = wr[4 * g + (f >> 2)];
        }
    }
    return SQZ_OK;
}

/* The two indices of group g of a row's metadata; false for a field that is not i0 < i1. */
static inline bool field_at(const uint32_t *meta_row, int64_t g, int *i0, int *i1) {
    const unsigned f = (meta_row[g / 8] >> (4 * (g % 8))) & 15u;
    *i0 = (int)(f & 3u);
    *i1 = (int)(f >> 2);
    return *i0 < *i1;
}

sqz_status sqz_sp24_unpack_i8(const int8_t *values, const uint32_t *meta, int64_t n, int64_t k, int8_t *w) {
    SQZ_RETURN_IF(n < 0 || k < 0 || k % 32, SQZ_ERR_INVALID_ARG, "2:4 unpack: k = %lld is not a multiple of 32",
                  (long long)k);
    memset(w, 0, (size_t)(n * k));
    for (int64_t r = 0; r < n; r++)
        for (int64_t g = 0; g < k / 4; g++) {
            int i0, i1;
            SQZ_RETURN_IF(!field_at(meta + r * (k / 32), g, &i0, &i1), SQZ_ERR_INVALID_ARG,
                          "2:4 unpack: row %lld, group %lld: metadata indices %d, %d are not increasing", (long long)r,
                          (long long)g, i0, i1);
            w[r * k + 4 * g + i0] = values[r * (k / 2) + 2 * g];
            w[r * k + 4 * g + i1] = values[r * (k / 2) + 2 * g + 1];
        }
    return SQZ_OK;
}

/* Whether row-major v (rows, cols) has at most nn non-zeros in every mm consecutive columns. */
static bool holds_nm(const float *v, int64_t rows, int64_t cols, int nn, int mm) {
    if (cols % mm) return false;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j += mm) {
            int nz = 0;
            for (int b = 0; b < mm; b++) nz += v[r * cols + j + b] != 0.0f;
            if (nz > nn) return false;
        }
    return true;
}

sqz_status sqz_tensor_sparsity(const sqz_tensor *t, sqz_sparsity_info *out) {
    memset(out, 0, sizeof *out);
    const int64_t n = sqz_tensor_nelements(t);
    float *v = sqz__malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!v) return SQZ_ERR_NOMEM;
    sqz_status st = sqz_tensor_to_f32(t, v);
    if (st == SQZ_OK) {
        out->count = n;
        for (int64_t i = 0; i < n; i++) out->zeros += v[i] == 0.0f;
        if (t->ndim == 2) {
            out->nm_2_4 = holds_nm(v, t->shape[0], t->shape[1], 2, 4);
            out->nm_4_8 = holds_nm(v, t->shape[0], t->shape[1], 4, 8);
        }
    }
    free(v);
    return st;
}
