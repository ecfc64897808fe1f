/*
 * core/ffn_pad.c - padding a layer's FFN with zero neurons (sqz_model_pad_neurons): the
 * inverse of pruning neurons, used so that a down projection whose input width (d_ff) is not
 * a multiple of a quantization block can be quantized (stories260K's 172 -> 192 for blocks
 * of 32). Every member of the family's neuron structure gains zero rows (gate, up and their
 * biases) or zero columns (down). Exact: a new neuron's pre-activations are 0 (zero rows, zero
 * bias), and whatever act(0) is (silu(0) * 0 = 0, gelu(0) = 0), down multiplies it by a zero
 * column.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sqz/edit.h"
#include "sqz/family.h"

/* The new data of one member: n_new rows / entries (axis 0) or columns (axis 1). */
typedef struct padded {
    sqz_tensor *t;
    sqz_dtype dtype;
    int32_t ndim;
    int64_t shape[SQZ_MAX_DIMS];
    void *data;
    size_t nbytes;
} padded;

static sqz_status pad_member(const sqz_tensor *t, int axis, int64_t n_new, padded *p) {
    const sqz_dtype_traits *tr = sqz__dtype_core(t->dtype);
    SQZ_RETURN_IF(t->qp, SQZ_ERR_UNSUPPORTED, "tensor '%s': quantized by sqz; pad the FFN before quantizing", t->name);
    SQZ_RETURN_IF(!tr || !t->data || t->ndim < 1 || t->ndim > 2, SQZ_ERR_INVALID_ARG,
                  "tensor '%s': cannot be padded (no data, or not 1-D / 2-D)", t->name);
    const int64_t rows = t->shape[0], cols = t->ndim == 2 ? t->shape[1] : 1;
    const int64_t old = axis == 0 ? rows : cols;
    SQZ_RETURN_IF(n_new < old, SQZ_ERR_INVALID_ARG, "tensor '%s': %" PRId64 " neurons, cannot pad to %" PRId64,
                  t->name, old, n_new);
    p->t = (sqz_tensor *)(uintptr_t)t;
    p->ndim = t->ndim;
    p->shape[0] = axis == 0 ? n_new : rows;
    if (t->ndim == 2) p->shape[1] = axis == 1 ? n_new : cols;
    const int64_t ne = p->shape[0] * (t->ndim == 2 ? p->shape[1] : 1);
    if (axis == 0 && (t->ndim == 2 || tr->block_size == 1)) {
        /* whole rows (or entries) appended: zero bytes are the value 0 in every dtype sqz stores
         * (IEEE floats, integers, and GGUF blocks, whose scales are then 0) */
        p->dtype = t->dtype;
        SQZ_RETURN_IF(!sqz_dtype_nbytes(p->dtype, ne, &p->nbytes), SQZ_ERR_SHAPE, "tensor '%s': too large", t->name);
        p->data = sqz__calloc(1, p->nbytes ? p->nbytes : 1);
        if (!p->data) return SQZ_ERR_NOMEM;
        memcpy(p->data, t->data, t->nbytes);
        return SQZ_OK;
    }
    SQZ_RETURN_IF(axis == 0, SQZ_ERR_UNSUPPORTED, "tensor '%s': a 1-D %s tensor cannot be padded", t->name,
                  tr->name);
    if (tr->block_size == 1) { /* columns appended to every row in the same dtype */
        p->dtype = t->dtype;
        SQZ_RETURN_IF(!sqz_dtype_nbytes(p->dtype, ne, &p->nbytes), SQZ_ERR_SHAPE, "tensor '%s': too large", t->name);
        uint8_t *d = sqz__calloc(1, p->nbytes ? p->nbytes : 1);
        if (!d) return SQZ_ERR_NOMEM;
        const size_t ob = (size_t)cols * tr->type_size, nb = (size_t)n_new * tr->type_size;
        for (int64_t r = 0; r < rows; r++) memcpy(d + (size_t)r * nb, (const uint8_t *)t->data + (size_t)r * ob, ob);
        p->data = d;
        return SQZ_OK;
    }
    /* block rows cannot take a partial block: the member becomes f32 (it is about to be
     * quantized to the new width anyway) */
    p->dtype = SQZ_DTYPE_F32;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(SQZ_DTYPE_F32, ne, &p->nbytes), SQZ_ERR_SHAPE, "tensor '%s': too large", t->name);
    float *f = sqz__malloc((size_t)(rows * cols) * sizeof(float));
    float *d = sqz__calloc(1, p->nbytes);
    sqz_status st = f && d ? sqz_tensor_to_f32(t, f) : SQZ_ERR_NOMEM;
    for (int64_t r = 0; st == SQZ_OK && r < rows; r++)
        memcpy(d + r * n_new, f + r * cols, (size_t)cols * sizeof(float));
    free(f);
    if (st != SQZ_OK) {
        free(d);
        return st;
    }
    p->data = d;
    return SQZ_OK;
}

sqz_status sqz_model_pad_neurons(sqz_model *m, int32_t layer, int64_t d_ff) {
    SQZ_TRY(sqz_model_validate(m));
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi, SQZ_ERR_ARCH, "family %d has no row in the family table", (int)m->hp.family);
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers, SQZ_ERR_INVALID_ARG,
                  "layer %d: no such layer (the model has %" PRId64 ")", (int)layer, m->hp.n_layers);
    sqz_layer_dims ld = m->layers[layer];
    SQZ_RETURN_IF(d_ff < ld.d_ff, SQZ_ERR_INVALID_ARG, "layer %d: FFN width %" PRId64 " cannot be padded to %" PRId64,
                  (int)layer, ld.d_ff, d_ff);
    if (d_ff == ld.d_ff) return SQZ_OK;
    const sqz_coupled *c = &fi->structures[SQZ_STRUCT_NEURON];
    padded *p = sqz__calloc((size_t)c->n_members, sizeof *p);
    if (!p) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    int n = 0;
    for (int i = 0; st == SQZ_OK && i < c->n_members; i++) { /* build every member first: atomic */
        const sqz_member *e = &c->members[i];
        sqz_tensor *t = sqz_model_get(m, e->role, layer, e->param);
        if (t) st = pad_member(t, e->axis, d_ff, &p[n++]);
    }
    for (int i = 0; i < n; i++) {
        if (st == SQZ_OK && p[i].data) {
            st = sqz_tensor_replace(m, p[i].t, p[i].dtype, p[i].ndim, p[i].shape, p[i].data, p[i].nbytes, true);
        } else {
            free(p[i].data);
        }
    }
    free(p);
    SQZ_TRY(st);
    ld.d_ff = d_ff;
    SQZ_TRY(sqz_model_set_layer_dims(m, layer, &ld));
    return sqz_model_validate(m);
}
