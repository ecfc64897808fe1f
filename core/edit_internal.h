/*
 * core/edit_internal.h - what core/model_edit.c and core/family.c share (not public).
 *
 * A slice is a tensor's new contents built before anything changes, so that an edit of many
 * tensors can be made atomic: prepare every slice (any error: discard them all, the model is
 * untouched), then commit them (cannot fail).
 */
#ifndef SQZ_CORE_EDIT_INTERNAL_H
#define SQZ_CORE_EDIT_INTERNAL_H

#include "core/internal.h"
#include "sqz/edit.h"
#include "sqz/qparams.h"

typedef struct sqz__slice {
    sqz_tensor *t;          /* the tensor it will replace the contents of */
    void *data;             /* a heap buffer, owned by the slice until committed */
    size_t nbytes;
    int32_t ndim;
    int64_t shape[2];
    const sqz_qparams *qp;  /* the new parameters (already in the model's store) or NULL */
} sqz__slice;

/* Checks an index list: 1 <= n <= limit, strictly increasing, within [0, limit). `what` names
 * the tensor or structure in the message. SQZ_ERR_INVALID_ARG. */
sqz_status sqz__check_keep(const int64_t *keep, int64_t n, int64_t limit, const char *what);

/* True if t is one of m's tensors (an element of m->tensors). */
bool sqz__tensor_in_model(const sqz_model *m, const sqz_tensor *t);

/* Builds in *out the contents of `src` (a tensor of m, or a view of a pending slice of it)
 * with only keep[0..n) along `axis` (0: rows, 1: columns; a 1-D tensor: its entries either
 * way). out->t = dst. Nothing in the model changes except that new quantization parameters
 * are added to its store. Errors as sqz_tensor_keep_rows / _cols, naming src->name. */
sqz_status sqz__slice_prepare(sqz_model *m, const sqz_tensor *src, sqz_tensor *dst, int axis, const int64_t *keep,
                              int64_t n, sqz__slice *out);
/* A tensor descriptor of the slice's contents (for chaining two slices of one tensor). */
sqz_tensor sqz__slice_view(const sqz__slice *s);
/* Installs the slice into s->t (frees the old data if owned). Cannot fail. */
void sqz__slice_commit(sqz__slice *s);
/* Frees the slice's buffer (its qp stays in the model's store). NULL data is fine. */
void sqz__slice_discard(sqz__slice *s);

/* hp.n_heads / n_kv_heads / d_ff = their largest value over m->layers. */
void sqz__sync_layer_defaults(sqz_model *m);

#endif
