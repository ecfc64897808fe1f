/* formats/export.c - what every writer shares: the public save entry point, the
 * dtype each tensor is written with, and the q/k row order for rotary embeddings. */
#include <stdlib.h>

#include "formats/bundle_internal.h"
#include "formats/gguf_internal.h"

sqz_status sqz_model_save(const sqz_model *m, const char *path, const sqz_save_opts *o) {
    SQZ_RETURN_IF(!o, SQZ_ERR_INVALID_ARG, "sqz_model_save: options are required");
    SQZ_RETURN_IF(o->dtype >= SQZ_DTYPE_COUNT, SQZ_ERR_INVALID_ARG, "sqz_model_save: invalid dtype %d", o->dtype);
    const sqz_status fin = sqz_model_check_finite(m); /* a model that computes NaN is never written */
    if (fin != SQZ_OK) {
        sqz__error_prefix("%s: not written", path);
        return fin;
    }
    return sqz__format_save(m, path, o); /* the format table's writer (detect.c) */
}

sqz_status sqz_model_check_target(const sqz_model *m, const sqz_save_opts *o) {
    SQZ_RETURN_IF(!m || !o, SQZ_ERR_INVALID_ARG, "sqz_model_check_target: NULL argument");
    const sqz__format_row *r = sqz__format_get(o->format); /* the format table's check (detect.c) */
    SQZ_RETURN_IF(!r || !r->check, SQZ_ERR_UNSUPPORTED, "sqz cannot write the %s format", sqz_format_name(o->format));
    return r->check(m, o);
}

sqz_status sqz__tensors_check(const sqz_model *m, const sqz_save_opts *o) {
    const bool hf = sqz_format_info(o->format)->hf_layouts;
    const bool fused = hf && sqz_family_get(m->hp.family)->hf_fused &&
                       !(o->dtype >= 0 && sqz_dtype_info((sqz_dtype)o->dtype)->is_float);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        sqz_role mem[3];
        SQZ_RETURN_IF(fused && sqz__hf_fused(m->hp.family, t->role, mem, NULL) != 0 &&
                          (t->qp || (sqz__st_block_linear(t) && !o->gguf_blocks_float)),
                      SQZ_ERR_UNSUPPORTED, "tensor '%s': %s's HF files fuse it with its neighbours, which sqz's "
                      "quantized HF layouts do not hold: write GGUF, or give a float --dtype", t->name,
                      sqz_family_name(m->hp.family));
        sqz_dtype d = sqz__export_dtype(t, o, o->format);
        bool asked = o->dtype >= 0 && d == (sqz_dtype)o->dtype;
        if (d == t->dtype && !t->qp) continue;
        if (t->qp && hf && o->dtype < 0) continue; /* the hf_format layout */
        if (hf && o->dtype < 0 && sqz_dtype_info(t->dtype)->is_quantized) {
            /* a GGUF block linear in the layout exactly or refused (st_blocks.c); the embedding and
             * the classifier stay float, dequantized exactly to f32 */
            if (sqz__st_block_linear(t) && !o->gguf_blocks_float)
                SQZ_TRY(sqz__st_block_check(sqz__st_layout_get(o->hf_format), t));
            continue;
        }
        if (asked) continue;
        if (d == SQZ_DTYPE_F32 && sqz_dtype_info(t->dtype)->is_float && !t->qp) continue; /* widening is exact */
        return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': %s cannot hold %s%s (it would become %s); choose a dtype "
                         "with --dtype, or another target", t->name, sqz_format_name(o->format),
                         sqz_dtype_name(t->dtype), t->qp ? " with sqz quantization parameters" : "",
                         sqz_dtype_name(d));
    }
    return SQZ_OK;
}

sqz_rope_layout sqz__target_rope(const sqz_model *m, sqz_format target) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    if (!fi || fi->positions != SQZ_POS_ROTARY) return SQZ_ROPE_NONE;
    const sqz__format_row *r = sqz__format_get(target); /* the format table's order (detect.c) */
    return r && r->rope ? r->rope(m) : SQZ_ROPE_INTERLEAVED;
}

static bool is_matrix_role(const sqz_tensor *t) { return t->param == SQZ_PARAM_WEIGHT && t->ndim == 2; }

sqz_dtype sqz__export_dtype(const sqz_tensor *t, const sqz_save_opts *o, sqz_format target) {
    const sqz__format_row *r = sqz__format_get(target);
    const bool every = r && r->dtype_every_tensor;
    /* sqz's INT8/INT4 schemes (t->qp) have no dtype of their own elsewhere: their dequantized values */
    sqz_dtype d = t->qp ? SQZ_DTYPE_F32 : t->dtype;
    if (o->dtype >= 0) {
        const sqz_dtype_traits *want = sqz_dtype_info((sqz_dtype)o->dtype);
        bool applies = every ? sqz_dtype_info(d)->is_float || sqz_dtype_info(d)->is_quantized : is_matrix_role(t);
        if (applies && sqz_tensor_row_len(t) % want->block_size == 0) d = (sqz_dtype)o->dtype;
        else if (!every && !is_matrix_role(t)) d = SQZ_DTYPE_F32;
    }
    if (r && r->has_dtype && !r->has_dtype(d)) d = SQZ_DTYPE_F32;
    return d;
}

void sqz__rope_permute_rows(const uint8_t *src, uint8_t *dst, int64_t n_heads, int64_t head_dim, size_t row_bytes,
                            sqz_rope_layout from, sqz_rope_layout to) {
    const int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        for (int64_t i = 0; i < 2; i++) {
            for (int64_t j = 0; j < half; j++) {
                /* HALF row i*half + j <-> INTERLEAVED row 2*j + i (convert_hf_to_gguf.py permute) */
                int64_t r_half = h * head_dim + i * half + j;
                int64_t r_int = h * head_dim + 2 * j + i;
                int64_t r_src = from == SQZ_ROPE_HALF ? r_half : r_int;
                int64_t r_dst = to == SQZ_ROPE_HALF ? r_half : r_int;
                memcpy(dst + (size_t)r_dst * row_bytes, src + (size_t)r_src * row_bytes, row_bytes);
            }
        }
    }
    (void)from;
}

/* sqz_convert of a tensor's values; a scheme-quantized tensor (t->qp) is dequantized first. */
static sqz_status convert_values(const sqz_tensor *t, sqz_dtype to, void *dst, int64_t n, float *scratch) {
    if (!t->qp) return sqz_convert(t->dtype, t->data, to, dst, n, scratch);
    float *f = sqz__malloc((size_t)n * sizeof(float));
    if (!f) return SQZ_ERR_NOMEM;
    sqz_status s = sqz_tensor_to_f32(t, f);
    if (s == SQZ_OK) s = sqz_convert(SQZ_DTYPE_F32, f, to, dst, n, scratch);
    free(f);
    return s;
}

sqz_status sqz__tensor_export(const sqz_model *m, const sqz_tensor *t, sqz_dtype to, sqz_rope_layout rope, void *dst,
                              size_t cap, float *scratch) {
    int64_t n = sqz_tensor_nelements(t);
    size_t nb;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(to, n, &nb) || nb > cap, SQZ_ERR_SHAPE, "tensor '%s': cannot hold %lld elements "
                  "of %s in %zu bytes", t->name, (long long)n, sqz_dtype_name(to), cap);
    bool permute = (t->role == SQZ_ROLE_ATTN_Q || t->role == SQZ_ROLE_ATTN_K) && rope != SQZ_ROPE_NONE &&
                   m->hp.rope_layout != SQZ_ROPE_NONE && rope != m->hp.rope_layout;
    if (!permute) {
        sqz_status s = convert_values(t, to, dst, n, scratch);
        if (s != SQZ_OK) sqz__error_prefix("tensor '%s'", t->name);
        return s;
    }
    const sqz_layer_dims *ld = &m->layers[t->layer];
    int64_t heads = t->role == SQZ_ROLE_ATTN_Q ? ld->n_heads : ld->n_kv_heads;
    int64_t hd = m->hp.head_dim;
    SQZ_RETURN_IF(t->shape[0] != heads * hd || hd % 2 != 0, SQZ_ERR_SHAPE,
                  "tensor '%s': %lld rows are not %lld heads of %lld", t->name, (long long)t->shape[0],
                  (long long)heads, (long long)hd);
    uint8_t *tmp = sqz__malloc(nb);
    if (!tmp) return SQZ_ERR_NOMEM;
    sqz_status s = convert_values(t, to, tmp, n, scratch);
    if (s == SQZ_OK) {
        sqz__rope_permute_rows(tmp, dst, heads, hd, nb / (size_t)t->shape[0], m->hp.rope_layout, rope);
    } else {
        sqz__error_prefix("tensor '%s'", t->name);
    }
    free(tmp);
    return s;
}
