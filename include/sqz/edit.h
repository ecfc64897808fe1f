/*
 * sqz/edit.h - changing a model's structure: replacing a tensor's data, keeping a subset
 * of a tensor's rows or columns, removing whole layers, setting per-layer dimensions.
 *
 * These are the building blocks of the structural passes (layer removal, head / FFN /
 * channel pruning). sqz/family.h applies them to every tensor a structure couples
 * ("keep these heads"); most passes want those functions rather than the ones here.
 *
 *   // drop the last two layers of a model
 *   int32_t drop[2] = {(int32_t)m->hp.n_layers - 2, (int32_t)m->hp.n_layers - 1};
 *   if (sqz_model_remove_layers(m, drop, 2) != SQZ_OK) { ... sqz_last_error() ... }
 *
 * ---- Validation: steps and whole edits ------------------------------------------------
 * A structural change touches several tensors and the per-layer dimensions, which agree
 * again only when all of them are done. So there are two kinds of functions:
 *   steps        sqz_tensor_replace, sqz_tensor_keep_rows, sqz_tensor_keep_cols,
 *                sqz_model_set_layer_dims: check their own arguments only and may leave the
 *                model invalid in between; the caller runs sqz_model_validate (sqz/model.h)
 *                when its multi-step edit is complete, before anything else uses the model.
 *   whole edits  sqz_model_remove_layers here, sqz_model_keep_heads / _neurons / _channels
 *                (sqz/family.h): refuse a model that does not validate, and return a model
 *                that does. They are atomic: on any error the model is unchanged.
 *
 * ---- Memory -----------------------------------------------------------------------------
 * Tensor data borrowed from a file mapping (owned == false) is read-only and is never
 * written: every edit builds a new heap buffer that the model owns (owned == true) and
 * frees the old one only when the model owned it. A tensor's qp (the quantization
 * parameters of sqz/quant.h) lives in the model's store until the model is freed; edits
 * point t->qp at new parameters (or at NULL) and never change the old ones.
 *
 * ---- What an edit invalidates ---------------------------------------------------------
 * Sessions (sqz/runtime.h) made before an edit must be freed and made again: they hold
 * pointers to tensors, float copies of weights and buffers sized by the old dimensions.
 * sqz_model_remove_layers also compacts the model's tensor array: sqz_tensor pointers taken
 * before it (sqz_model_get) are invalid once it has returned SQZ_OK. The other edits keep
 * every tensor where it is (its fields and data change).
 *
 * Index lists (`keep`, `layers`) are strictly increasing and within range; anything else
 * is SQZ_ERR_INVALID_ARG. Errors are one line naming the tensor (or layer) and the reason
 * (sqz_last_error()).
 */
#ifndef SQZ_EDIT_H
#define SQZ_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/dtype.h"
#include "sqz/model.h"
#include "sqz/status.h"
#include "sqz/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Replaces the data of tensor t (one of m's tensors) with `data`: nbytes of dense
 * row-major `dtype` of the given shape (ndim 1..SQZ_MAX_DIMS, outermost first, every
 * entry >= 1; for a block dtype the innermost dimension is a whole number of blocks).
 * nbytes must be exactly sqz_dtype_nbytes(dtype, product of shape).
 *
 * Ownership of `data`:
 *   take == true   the model takes it: it must come from malloc and is freed with free()
 *                  when the model is freed or the tensor's data is replaced again. On an
 *                  error it is freed at once, so the caller never frees it.
 *   take == false  borrowed: the caller keeps it alive and unchanged until the model is
 *                  freed or the tensor's data is replaced again. The model never writes it.
 * The previous data is freed if the model owned it. t->qp becomes NULL: the new data is
 * plain `dtype` values (to attach sqz-quantized data with its parameters, use
 * sqz_qmatrix_attach of sqz/quant.h). Name, role, layer and param stay.
 *
 * A step (see above): the shape is not checked against the architecture.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG (t not in m, data NULL, bad dtype or ndim);
 * SQZ_ERR_SHAPE (shape and nbytes disagree, or a row is not whole blocks).
 */
SQZ_API sqz_status sqz_tensor_replace(sqz_model *m, sqz_tensor *t, sqz_dtype dtype, int32_t ndim,
                                      const int64_t *shape, void *data, size_t nbytes, bool take);

/*
 * Keeps rows keep[0..n_keep) of tensor t, in that order, and drops the others: a 2-D
 * tensor (out, in) becomes (n_keep, in); a 1-D tensor (a bias, a norm weight) keeps those
 * entries. 1 <= n_keep <= rows, keep strictly increasing.
 *
 * Works for every dtype whose rows are whole blocks: float (F32/F16/BF16/F64), integer,
 * GGUF block types (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K: the row bytes are copied unchanged, so
 * the kept rows dequantize exactly as before) and sqz-quantized tensors (t->qp set: the
 * per-row scales and zero points of the kept rows are kept; g_idx and in_scale describe
 * columns and stay). The 1-D case needs a scalar dtype (block size 1).
 *
 * The result is a new heap buffer owned by the model (also when every row is kept); the
 * old data is freed if owned. A step: the model may not validate until the coupled
 * tensors and per-layer dimensions follow.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG (t not in m, no data, more than 2 dimensions, bad
 * index list); SQZ_ERR_UNSUPPORTED (a 1-D tensor of a block dtype); SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_tensor_keep_rows(sqz_model *m, sqz_tensor *t, const int64_t *keep, int64_t n_keep);

/*
 * Keeps columns keep[0..n_keep) of a 2-D tensor t (out, in), which becomes (out, n_keep);
 * for a 1-D tensor the same as sqz_tensor_keep_rows (its entries).
 *
 * Columns of a block-quantized tensor (GGUF Q*, sqz's U4) or of an sqz-quantized one
 * (t->qp != NULL) are refused with SQZ_ERR_UNSUPPORTED naming the tensor: a block mixes
 * columns under one scale, so dropping columns would change the kept ones. Prune before
 * quantizing, or replace the tensor by its float values first (sqz_tensor_to_f32 and
 * sqz_tensor_replace). Scalar dtypes (float and integer) are supported.
 *
 * Ownership and validation as sqz_tensor_keep_rows.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG; SQZ_ERR_UNSUPPORTED; SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_tensor_keep_cols(sqz_model *m, sqz_tensor *t, const int64_t *keep, int64_t n_keep);

/*
 * Removes layers layers[0..n) (strictly increasing, each in [0, n_layers)): frees their
 * tensors, renumbers the tensors of the layers after them (t->layer) and renames them,
 * shrinks m->layers and hp.n_layers. n == 0 changes nothing.
 *
 * Renaming: t->name keeps the source checkpoint's naming ("blk.3.attn_q.weight",
 * "model.layers.3.self_attn.q_proj.weight", "layers.3.attention.wq.weight",
 * "encoder.layer.3.output.dense.bias"): the first dot-delimited component made only of
 * digits whose value is the old layer index is replaced by the new index. A name without
 * such a component becomes the GGUF name "blk.N.<role>.weight|bias". (Writers name
 * tensors from (role, layer, param), so the names matter for messages and
 * sqz_model_find only.)
 *
 * hp.n_heads, hp.n_kv_heads and hp.d_ff, the per-layer defaults, become the largest value
 * over the remaining layers (what the GGUF reader sets for per-layer arrays; the same
 * values when every layer agrees).
 *
 * A whole edit: validates before and after, atomic. Tensor pointers taken before a
 * successful call are invalid after it.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG (bad list, or every layer listed: a model keeps at
 * least one layer); the model's own validation error; SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_model_remove_layers(sqz_model *m, const int32_t *layers, int64_t n);

/*
 * Sets the per-layer dimensions of layer `layer` (heads, KV heads, FFN width) and then
 * hp.n_heads / n_kv_heads / d_ff to their largest value over the layers (as
 * sqz_model_remove_layers). Every value >= 1 and n_heads a multiple of n_kv_heads;
 * head_dim is the model's and does not change.
 *
 * A step: the layer's tensors must be reshaped to match (sqz_tensor_keep_rows/_cols)
 * before sqz_model_validate passes again; sqz_model_keep_heads / _neurons (sqz/family.h)
 * do both.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG (layer out of range, dims out of range).
 */
SQZ_API sqz_status sqz_model_set_layer_dims(sqz_model *m, int32_t layer, const sqz_layer_dims *dims);

#ifdef __cplusplus
}
#endif
#endif
