/* core/tensor.c - tensor roles, element counts and dtype conversion. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "core/internal.h"
#include "sqz/qparams.h"
#include "sqz/tensor.h"

static const char *const role_names[] = {
#define X(name, gguf, per_layer) gguf,
    SQZ_ROLE_MAP(X)
#undef X
};
static const bool role_per_layer[] = {
#define X(name, gguf, per_layer) per_layer,
    SQZ_ROLE_MAP(X)
#undef X
};

const char *sqz_role_name(sqz_role r) {
    if ((unsigned)r >= SQZ_ROLE_COUNT) return "invalid";
    return role_names[r];
}

bool sqz_role_per_layer(sqz_role r) { return (unsigned)r < SQZ_ROLE_COUNT && role_per_layer[r]; }

bool sqz_role_from_name(const char *name, sqz_role *out) {
    for (int i = 0; i < SQZ_ROLE_COUNT; i++) {
        if (strcmp(name, role_names[i]) == 0) { *out = (sqz_role)i; return true; }
    }
    return false;
}

int64_t sqz_tensor_nelements(const sqz_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int64_t sqz_tensor_row_len(const sqz_tensor *t) { return t->ndim > 0 ? t->shape[t->ndim - 1] : 1; }

int64_t sqz_tensor_nrows(const sqz_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i + 1 < t->ndim; i++) n *= t->shape[i];
    return n;
}

sqz_status sqz_tensor_to_f32(const sqz_tensor *t, float *dst) {
    const sqz_dtype_traits *tr = sqz__dtype_core(t->dtype);
    SQZ_RETURN_IF(!tr || !tr->to_f32, SQZ_ERR_UNSUPPORTED, "tensor '%s': dtype %s has no float view",
                  t->name, sqz_dtype_name(t->dtype));
    SQZ_RETURN_IF(!t->data, SQZ_ERR_INVALID_ARG, "tensor '%s' has no data", t->name);
    if (t->qp) { /* integer values + scales (sqz/qparams.h, core/qparams.c) */
        sqz_status st = sqz_qparams_to_f32(t->qp, t->dtype, t->data, t->nbytes, dst);
        if (st != SQZ_OK) sqz__error_prefix("tensor '%s'", t->name);
        return st;
    }
    tr->to_f32(t->data, dst, sqz_tensor_nelements(t));
    return SQZ_OK;
}

/* The first non-finite value of x[0..n), or -1. */
static int64_t first_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

static sqz_status nonfinite_error(const sqz_tensor *t, float v, int64_t at) {
    const int64_t row_len = sqz_tensor_row_len(t) > 0 ? sqz_tensor_row_len(t) : 1;
    return SQZ_ERROR(SQZ_ERR_FORMAT, "tensor '%s': %s at row %lld, column %lld (a non-finite weight)", t->name,
                     isnan(v) ? "nan" : v > 0 ? "+inf" : "-inf", (long long)(at / row_len),
                     (long long)(at % row_len));
}

sqz_status sqz_tensor_check_finite(const sqz_tensor *t) {
    const sqz_dtype_traits *tr = sqz__dtype_core(t->dtype);
    if (!t->data || !tr || !tr->to_f32 || (!tr->is_float && !tr->is_quantized && !t->qp)) return SQZ_OK;
    const int64_t n = sqz_tensor_nelements(t);
    if (t->qp) {
        float *all = sqz__malloc((size_t)n * sizeof(float));
        if (!all) return SQZ_ERR_NOMEM;
        sqz_status st = sqz_tensor_to_f32(t, all);
        const int64_t at = st == SQZ_OK ? first_nonfinite(all, n) : -1;
        if (at >= 0) st = nonfinite_error(t, all[at], at);
        free(all);
        return st;
    }
    const int64_t nb = n / tr->block_size;
    const int64_t bad = tr->is_quantized ? sqz__first_nonfinite_block(t->dtype, t->data, nb, tr->type_size) : -2;
    if (bad == -1) return SQZ_OK; /* every scale finite: every weight is */
    if (bad >= 0) {               /* the value and place of the first non-finite weight of that block */
        float v[SQZ_QK_K];
        tr->to_f32((const uint8_t *)t->data + (size_t)bad * tr->type_size, v, tr->block_size);
        const int64_t at = first_nonfinite(v, tr->block_size);
        return nonfinite_error(t, at >= 0 ? v[at] : NAN, bad * tr->block_size + (at >= 0 ? at : 0));
    }
    enum { CHUNK = 1 << 16 }; /* elements; a multiple of every block size */
    float *buf = sqz__malloc(CHUNK * sizeof(float));
    if (!buf) return SQZ_ERR_NOMEM;
    const size_t chunk_bytes = (size_t)(CHUNK / tr->block_size) * tr->type_size;
    sqz_status st = SQZ_OK;
    for (int64_t off = 0; off < n && st == SQZ_OK; off += CHUNK) {
        const int64_t k = n - off < CHUNK ? n - off : CHUNK;
        tr->to_f32((const uint8_t *)t->data + (size_t)(off / CHUNK) * chunk_bytes, buf, k);
        const int64_t at = first_nonfinite(buf, k);
        if (at >= 0) st = nonfinite_error(t, buf[at], off + at);
    }
    free(buf);
    return st;
}

bool sqz__is_rms_norm_role(int r) {
    switch (r) {
    case SQZ_ROLE_ATTN_NORM: case SQZ_ROLE_FFN_NORM: case SQZ_ROLE_OUTPUT_NORM: case SQZ_ROLE_ATTN_Q_NORM:
    case SQZ_ROLE_ATTN_K_NORM: case SQZ_ROLE_ATTN_POST_NORM: case SQZ_ROLE_FFN_POST_NORM:
        return true;
    default:
        return false;
    }
}
