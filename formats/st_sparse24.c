/*
 * formats/st_sparse24.c - compressed-tensors' "sparse-24-bitmask" form of a 2:4-sparse weight
 * (--hf-format compressed-tensors-sparse24, docs/formats.md). A weight P.weight (n, k) whose every
 * group of 4 consecutive columns of a row holds at most 2 non-zeros is stored as
 *   P.compressed  [n, k / 2] the weight's dtype (F32/F16/BF16, or I8 for W8A8's int-quantized
 *                            values): each group's two kept values in column order, row-major
 *   P.bitmask     U8 [n, ceil(k / 8)]  1 = kept: column c of a row at bit c % 8 of byte c / 8
 *                            (numpy.packbits(..., bitorder="little"))
 *   P.shape       I64 [2, 1] (n, k)
 * Decompression puts the kept values, in row-major order of the set bits, into a zero tensor:
 * dense[mask] = compressed.flatten(). A group with fewer than 2 non-zeros keeps its lowest unused
 * columns (their values are zeros, kept bit for bit, so -0.0 comes back as -0.0). Written by
 * compressed-tensors <= 0.14 and llm-compressor; compressed-tensors 0.15+ and vLLM (since
 * March 2026) refuse it by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"

static bool is_zero(const uint8_t *e, size_t es) {
    switch (es) {
    case 4: return (sqz__rd_u32(e) & 0x7fffffffu) == 0;      /* F32: +0 or -0 */
    case 2: return (sqz__rd_u16(e) & 0x7fffu) == 0;          /* F16 / BF16 */
    default: return e[0] == 0;                               /* I8 */
    }
}

static size_t elem_size(sqz_dtype dt) {
    return dt == SQZ_DTYPE_F32 ? 4 : dt == SQZ_DTYPE_F16 || dt == SQZ_DTYPE_BF16 ? 2 : dt == SQZ_DTYPE_I8 ? 1 : 0;
}

bool sqz__sp24_dtype_ok(sqz_dtype dt) { return elem_size(dt) != 0; }

/* The two columns (within the group at g) that a row keeps: its non-zeros, then its lowest unused
 * columns. False when the group holds more than 2 non-zeros. */
static bool group_keep(const uint8_t *g, size_t es, int keep[2]) {
    int n = 0;
    bool used[4] = {false, false, false, false};
    for (int j = 0; j < 4; j++)
        if (!is_zero(g + (size_t)j * es, es)) {
            if (n == 2) return false;
            keep[n++] = j;
            used[j] = true;
        }
    for (int j = 0; j < 4 && n < 2; j++)
        if (!used[j]) keep[n++] = j;
    if (keep[0] > keep[1]) { const int t = keep[0]; keep[0] = keep[1]; keep[1] = t; }
    return true;
}

bool sqz__sp24_fits(const uint8_t *w, sqz_dtype dt, int64_t n, int64_t k) {
    const size_t es = elem_size(dt);
    if (!es || n < 1 || k < 4 || k % 4) return false;
    int keep[2];
    for (int64_t i = 0; i < n * k; i += 4)
        if (!group_keep(w + (size_t)i * es, es, keep)) return false;
    return true;
}

/* The three parts of w (n, k) of dtype dt (data owned by the parts). */
sqz_status sqz__sp24_parts(const char *name, const uint8_t *w, sqz_dtype dt, int64_t n, int64_t k, sqz__st_part *p,
                           int *np) {
    const size_t es = elem_size(dt), mb = (size_t)(k + 7) / 8;
    SQZ_RETURN_IF(!es || k % 4, SQZ_ERR_UNSUPPORTED, "tensor '%s': sparse-24-bitmask holds F32/F16/BF16/I8 weights "
                  "with a multiple of 4 columns", name);
    sqz__st_part *v = sqz__st_part_new(p, np, "compressed", dt, n, k / 2);
    sqz__st_part *b = sqz__st_part_new(p, np, "bitmask", SQZ_DTYPE_U8, n, (int64_t)mb);
    sqz__st_part *s = sqz__st_part_new(p, np, "shape", SQZ_DTYPE_I64, 2, 1);
    SQZ_TRY(sqz__st_part_alloc(v));
    SQZ_TRY(sqz__st_part_alloc(b));
    SQZ_TRY(sqz__st_part_alloc(s));
    sqz__wr_u64(s->data, (uint64_t)n);
    sqz__wr_u64((uint8_t *)s->data + 8, (uint64_t)k);
    uint8_t *vo = v->data, *bits = b->data;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c += 4) {
            const uint8_t *g = w + (size_t)(r * k + c) * es;
            int keep[2];
            SQZ_RETURN_IF(!group_keep(g, es, keep), SQZ_ERR_INVALID_ARG, "tensor '%s': row %lld, columns %lld..%lld "
                          "hold more than 2 non-zeros (not 2:4)", name, (long long)r, (long long)c, (long long)c + 3);
            for (int j = 0; j < 2; j++) {
                memcpy(vo, g + (size_t)keep[j] * es, es);
                vo += es;
                const int64_t col = c + keep[j];
                bits[(size_t)r * mb + (size_t)col / 8] |= (uint8_t)(1u << (col % 8));
            }
        }
    return SQZ_OK;
}

sqz_status sqz__sp24_decompress(const sqz__st_view *vals, const sqz__st_view *mask, int64_t n, int64_t k,
                                uint8_t *dense) {
    const size_t es = elem_size(vals->dtype), mb = (size_t)(k + 7) / 8, total = (size_t)(n * k / 2);
    const uint8_t *src = vals->data;
    size_t used = 0;
    memset(dense, 0, (size_t)(n * k) * es);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            if (!(mask->data[(size_t)r * mb + (size_t)c / 8] >> (c % 8) & 1)) continue;
            SQZ_RETURN_IF(used == total, SQZ_ERR_FORMAT, "%s: tensor '%s': the bitmask sets more than %zu values",
                          mask->file, mask->name, total);
            memcpy(dense + (size_t)(r * k + c) * es, src + used * es, es);
            used++;
        }
    SQZ_RETURN_IF(used != total, SQZ_ERR_FORMAT, "%s: tensor '%s': the bitmask sets %zu values, the compressed tensor "
                  "holds %zu", mask->file, mask->name, used, total);
    return SQZ_OK;
}
