/* core/model_edit.c - structural edits of a model (sqz/edit.h): replacing a tensor's data,
 * keeping rows / columns, removing layers, per-layer dimensions. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/edit_internal.h"

/* ---- index lists and helpers ------------------------------------------------------------ */

sqz_status sqz__check_keep(const int64_t *keep, int64_t n, int64_t limit, const char *what) {
    SQZ_RETURN_IF(n < 1 || n > limit || !keep, SQZ_ERR_INVALID_ARG, "%s: keeping %" PRId64 " of %" PRId64
                  " is not possible (keep at least one, at most all)", what, n, limit);
    for (int64_t i = 0; i < n; i++) {
        SQZ_RETURN_IF(keep[i] < 0 || keep[i] >= limit, SQZ_ERR_INVALID_ARG,
                      "%s: index %" PRId64 " is outside [0, %" PRId64 ")", what, keep[i], limit);
        SQZ_RETURN_IF(i > 0 && keep[i] <= keep[i - 1], SQZ_ERR_INVALID_ARG,
                      "%s: indices must be strictly increasing (%" PRId64 " after %" PRId64 ")", what, keep[i],
                      keep[i - 1]);
    }
    return SQZ_OK;
}

bool sqz__tensor_in_model(const sqz_model *m, const sqz_tensor *t) {
    return m && t && m->tensors && t >= m->tensors && t < m->tensors + m->n_tensors;
}

void sqz__sync_layer_defaults(sqz_model *m) {
    sqz_hparams *hp = &m->hp;
    if (!m->layers || hp->n_layers <= 0) return;
    sqz_layer_dims mx = m->layers[0];
    for (int64_t l = 1; l < hp->n_layers; l++) {
        const sqz_layer_dims *ld = &m->layers[l];
        if (ld->n_heads > mx.n_heads) mx.n_heads = ld->n_heads;
        if (ld->n_kv_heads > mx.n_kv_heads) mx.n_kv_heads = ld->n_kv_heads;
        if (ld->d_ff > mx.d_ff) mx.d_ff = ld->d_ff;
        if (ld->n_expert > mx.n_expert) mx.n_expert = ld->n_expert;
    }
    hp->n_heads = mx.n_heads;
    hp->n_kv_heads = mx.n_kv_heads;
    hp->d_ff = mx.d_ff;
    hp->n_expert = mx.n_expert;
}

/* ---- slices ----------------------------------------------------------------------------- */

/* Runs of consecutive kept indices: run r copies [start[r], start[r] + len[r]). Returns the
 * run count; starts/lens hold n entries. */
static int64_t make_runs(const int64_t *keep, int64_t n, int64_t *start, int64_t *len) {
    int64_t r = 0;
    for (int64_t i = 0; i < n; i++) {
        if (r > 0 && keep[i] == start[r - 1] + len[r - 1]) {
            len[r - 1]++;
        } else {
            start[r] = keep[i];
            len[r++] = 1;
        }
    }
    return r;
}

/* Copies the kept elements of every row: src (rows, cols) of `esz`-byte elements -> dst
 * (rows, n). */
static sqz_status copy_cols(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols, size_t esz,
                            const int64_t *keep, int64_t n) {
    int64_t *start = sqz__malloc(2 * (size_t)n * sizeof *start);
    if (!start) return SQZ_ERR_NOMEM;
    int64_t *len = start + n;
    const int64_t nr = make_runs(keep, n, start, len);
    for (int64_t i = 0; i < rows; i++) {
        const uint8_t *s = src + (size_t)i * (size_t)cols * esz;
        for (int64_t r = 0; r < nr; r++) {
            memcpy(dst, s + (size_t)start[r] * esz, (size_t)len[r] * esz);
            dst += (size_t)len[r] * esz;
        }
    }
    free(start);
    return SQZ_OK;
}

/* New quantization parameters for rows keep[0..n) of qp (sqz__qparams_clone), kept in m's store. */
static sqz_status qp_keep_rows(sqz_model *m, const sqz_qparams *qp, const int64_t *keep, int64_t n,
                               const sqz_qparams **out) {
    sqz_qparams *c = sqz__qparams_clone(qp, keep, n);
    if (!c) return SQZ_ERR_NOMEM;
    SQZ_TRY(sqz_model_keep(m, c)); /* frees c on failure */
    *out = c;
    return SQZ_OK;
}

/* Rows of a 2-D tensor: whole row bytes are copied (any dtype). */
static sqz_status slice_rows(sqz_model *m, const sqz_tensor *src, const int64_t *keep, int64_t n, sqz__slice *o) {
    SQZ_RETURN_IF(src->qp && src->qp->n_out != src->shape[0], SQZ_ERR_INVALID_ARG,
                  "tensor '%s': quantization parameters for %" PRId64 " rows, the tensor has %" PRId64, src->name,
                  src->qp->n_out, src->shape[0]);
    const size_t row_bytes = src->nbytes / (size_t)src->shape[0];
    o->nbytes = row_bytes * (size_t)n;
    o->data = sqz__malloc(o->nbytes ? o->nbytes : 1);
    if (!o->data) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++)
        memcpy((uint8_t *)o->data + (size_t)i * row_bytes, (const uint8_t *)src->data + (size_t)keep[i] * row_bytes,
               row_bytes);
    o->ndim = 2;
    o->shape[0] = n;
    o->shape[1] = src->shape[1];
    if (src->qp) {
        sqz_status st = qp_keep_rows(m, src->qp, keep, n, &o->qp);
        if (st != SQZ_OK) {
            sqz__slice_discard(o);
            return st;
        }
    }
    return SQZ_OK;
}

/* Columns of a 2-D tensor, or entries of a 1-D one: scalar dtypes only. */
static sqz_status slice_cols(const sqz_tensor *src, const int64_t *keep, int64_t n, sqz__slice *o) {
    const sqz_dtype_traits *tr = sqz__dtype_core(src->dtype);
    SQZ_RETURN_IF(src->qp, SQZ_ERR_UNSUPPORTED, "tensor '%s': cannot drop %s of an sqz-quantized (%s) tensor: its "
                  "quantization parameters describe every column (groups, g_idx, in_scale); prune before quantizing",
                  src->name, src->ndim == 1 ? "entries" : "columns", tr->name);
    SQZ_RETURN_IF(tr->block_size != 1, SQZ_ERR_UNSUPPORTED, "tensor '%s': cannot drop %s of a block-quantized %s "
                  "tensor: a block of %" PRId64 " shares one scale; prune before quantizing or convert it to f32 first",
                  src->name, src->ndim == 1 ? "entries" : "columns", tr->name, tr->block_size);
    const int64_t rows = src->ndim == 1 ? 1 : src->shape[0], cols = src->shape[src->ndim - 1];
    o->nbytes = (size_t)rows * (size_t)n * tr->type_size;
    o->data = sqz__malloc(o->nbytes ? o->nbytes : 1);
    if (!o->data) return SQZ_ERR_NOMEM;
    sqz_status st = copy_cols(src->data, o->data, rows, cols, tr->type_size, keep, n);
    if (st != SQZ_OK) {
        sqz__slice_discard(o);
        return st;
    }
    o->ndim = src->ndim;
    o->shape[0] = src->ndim == 1 ? n : rows;
    o->shape[1] = src->ndim == 1 ? 1 : n;
    return SQZ_OK;
}

sqz_status sqz__slice_prepare(sqz_model *m, const sqz_tensor *src, sqz_tensor *dst, int axis, const int64_t *keep,
                              int64_t n, sqz__slice *out) {
    memset(out, 0, sizeof *out);
    out->t = dst;
    SQZ_RETURN_IF(!sqz__dtype_core(src->dtype), SQZ_ERR_INVALID_ARG, "tensor '%s': invalid dtype", src->name);
    SQZ_RETURN_IF(src->ndim < 1 || src->ndim > 2, SQZ_ERR_INVALID_ARG,
                  "tensor '%s': %d dimensions; only 1-D and 2-D tensors can keep rows or columns", src->name,
                  (int)src->ndim);
    SQZ_RETURN_IF(!src->data, SQZ_ERR_INVALID_ARG, "tensor '%s' has no data", src->name);
    SQZ_RETURN_IF(axis != 0 && axis != 1, SQZ_ERR_INVALID_ARG, "tensor '%s': axis %d", src->name, axis);
    const bool rows = src->ndim == 2 && axis == 0;
    const int64_t limit = src->ndim == 1 ? src->shape[0] : src->shape[axis];
    char what[160];
    snprintf(what, sizeof what, "tensor '%s': %s", src->name, src->ndim == 1 ? "entries" : rows ? "rows" : "columns");
    SQZ_TRY(sqz__check_keep(keep, n, limit, what));
    return rows ? slice_rows(m, src, keep, n, out) : slice_cols(src, keep, n, out);
}

sqz_tensor sqz__slice_view(const sqz__slice *s) {
    sqz_tensor v = *s->t;
    v.data = s->data;
    v.nbytes = s->nbytes;
    v.ndim = s->ndim;
    v.shape[0] = s->shape[0];
    v.shape[1] = s->ndim == 2 ? s->shape[1] : 1;
    v.owned = true;
    v.qp = s->qp;
    return v;
}

void sqz__slice_commit(sqz__slice *s) {
    sqz_tensor *t = s->t;
    if (t->owned && t->data != s->data) free(t->data);
    t->data = s->data;
    t->nbytes = s->nbytes;
    t->ndim = s->ndim;
    t->shape[0] = s->shape[0];
    t->shape[1] = s->ndim == 2 ? s->shape[1] : 1;
    t->owned = true;
    t->qp = s->qp;
    s->data = NULL;
}

void sqz__slice_discard(sqz__slice *s) {
    free(s->data);
    s->data = NULL;
}

/* ---- public: one tensor ----------------------------------------------------------------- */

static sqz_status keep_along(sqz_model *m, sqz_tensor *t, int axis, const int64_t *keep, int64_t n) {
    SQZ_RETURN_IF(!sqz__tensor_in_model(m, t), SQZ_ERR_INVALID_ARG, "tensor '%s' is not one of the model's tensors",
                  t && t->name ? t->name : "(null)");
    sqz__slice s;
    SQZ_TRY(sqz__slice_prepare(m, t, t, axis, keep, n, &s));
    sqz__slice_commit(&s);
    return SQZ_OK;
}

sqz_status sqz_tensor_keep_rows(sqz_model *m, sqz_tensor *t, const int64_t *keep, int64_t n_keep) {
    return keep_along(m, t, 0, keep, n_keep);
}

sqz_status sqz_tensor_keep_cols(sqz_model *m, sqz_tensor *t, const int64_t *keep, int64_t n_keep) {
    return keep_along(m, t, 1, keep, n_keep);
}

/* Checks the arguments of sqz_tensor_replace; sets *nel to the element count. */
static sqz_status check_replace(const sqz_model *m, const sqz_tensor *t, sqz_dtype dtype, int32_t ndim,
                                const int64_t *shape, const void *data, size_t nbytes) {
    SQZ_RETURN_IF(!sqz__tensor_in_model(m, t), SQZ_ERR_INVALID_ARG, "tensor '%s' is not one of the model's tensors",
                  t && t->name ? t->name : "(null)");
    const sqz_dtype_traits *tr = sqz__dtype_core(dtype);
    SQZ_RETURN_IF(!tr, SQZ_ERR_INVALID_ARG, "tensor '%s': invalid dtype %d", t->name, (int)dtype);
    SQZ_RETURN_IF(!data, SQZ_ERR_INVALID_ARG, "tensor '%s': no data given", t->name);
    SQZ_RETURN_IF(ndim < 1 || ndim > SQZ_MAX_DIMS || !shape, SQZ_ERR_INVALID_ARG, "tensor '%s': %d dimensions",
                  t->name, (int)ndim);
    int64_t nel = 1;
    for (int32_t i = 0; i < ndim; i++) {
        SQZ_RETURN_IF(shape[i] < 1 || !sqz__mul_i64(nel, shape[i], &nel), SQZ_ERR_SHAPE,
                      "tensor '%s': dimension %d is %" PRId64, t->name, (int)i, shape[i]);
    }
    SQZ_RETURN_IF(shape[ndim - 1] % tr->block_size != 0, SQZ_ERR_SHAPE,
                  "tensor '%s': rows of %" PRId64 " elements are not whole %s blocks of %" PRId64, t->name,
                  shape[ndim - 1], tr->name, tr->block_size);
    size_t want;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(dtype, nel, &want) || want != nbytes, SQZ_ERR_SHAPE,
                  "tensor '%s': %zu bytes given, %" PRId64 " elements of %s take %zu", t->name, nbytes, nel, tr->name,
                  want);
    return SQZ_OK;
}

sqz_status sqz_tensor_replace(sqz_model *m, sqz_tensor *t, sqz_dtype dtype, int32_t ndim, const int64_t *shape,
                              void *data, size_t nbytes, bool take) {
    sqz_status st = check_replace(m, t, dtype, ndim, shape, data, nbytes);
    if (st != SQZ_OK) {
        if (take && !(sqz__tensor_in_model(m, t) && t->data == data)) free(data);
        return st;
    }
    if (t->owned && t->data != data) free(t->data);
    t->data = data;
    t->nbytes = nbytes;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < SQZ_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->owned = take;
    t->qp = NULL;
    return SQZ_OK;
}

/* ---- public: per-layer dimensions -------------------------------------------------------- */

sqz_status sqz_model_set_layer_dims(sqz_model *m, int32_t layer, const sqz_layer_dims *d) {
    SQZ_RETURN_IF(!m->layers || layer < 0 || layer >= m->hp.n_layers, SQZ_ERR_INVALID_ARG,
                  "layer %d: no such layer (the model has %" PRId64 ")", (int)layer, m->hp.n_layers);
    SQZ_RETURN_IF(!d || d->n_heads < 1 || d->n_kv_heads < 1 || d->d_ff < 1 || d->n_heads % d->n_kv_heads != 0,
                  SQZ_ERR_INVALID_ARG, "layer %d: %" PRId64 " heads, %" PRId64 " KV heads, d_ff %" PRId64
                  " are not valid (each >= 1, heads a multiple of KV heads)", (int)layer, d ? d->n_heads : 0,
                  d ? d->n_kv_heads : 0, d ? d->d_ff : 0);
    m->layers[layer] = *d;
    sqz__sync_layer_defaults(m);
    return SQZ_OK;
}

/* ---- public: removing layers ------------------------------------------------------------- */

/* t's name with its layer component replaced by new_layer (malloc'd; NULL on out of memory).
 * The component is the first dot-delimited run of digits whose value is t->layer. */
static char *renamed(const sqz_tensor *t, int32_t new_layer) {
    const char *s = t->name;
    for (const char *b = s; *b;) {
        const char *e = b;
        while (*e >= '0' && *e <= '9') e++;
        const bool whole = e > b && (*e == '.' || *e == 0) && (b == s || b[-1] == '.') && e - b <= 9;
        if (whole && strtol(b, NULL, 10) == t->layer)
            return sqz__asprintf("%.*s%d%s", (int)(b - s), s, (int)new_layer, e);
        const char *dot = strchr(e, '.');
        if (!dot) break;
        b = dot + 1;
    }
    return sqz__asprintf("blk.%d.%s.%s", (int)new_layer, sqz_role_name(t->role),
                         t->param == SQZ_PARAM_BIAS ? "bias" : "weight");
}

/* old layer -> new layer, or -1 for removed ones (n_layers entries). */
static sqz_status layer_map(const sqz_model *m, const int32_t *layers, int64_t n, int32_t **out) {
    const int64_t nl = m->hp.n_layers;
    SQZ_RETURN_IF(n < 0 || (n > 0 && !layers), SQZ_ERR_INVALID_ARG, "removing layers: bad list of %" PRId64, n);
    SQZ_RETURN_IF(n >= nl, SQZ_ERR_INVALID_ARG, "removing %" PRId64 " of %" PRId64 " layers leaves no layer", n, nl);
    for (int64_t i = 0; i < n; i++) {
        SQZ_RETURN_IF(layers[i] < 0 || layers[i] >= nl, SQZ_ERR_INVALID_ARG,
                      "removing layers: layer %d is outside [0, %" PRId64 ")", (int)layers[i], nl);
        SQZ_RETURN_IF(i > 0 && layers[i] <= layers[i - 1], SQZ_ERR_INVALID_ARG,
                      "removing layers: indices must be strictly increasing (%d after %d)", (int)layers[i],
                      (int)layers[i - 1]);
    }
    int32_t *map = sqz__malloc((size_t)nl * sizeof *map);
    if (!map) return SQZ_ERR_NOMEM;
    int32_t next = 0;
    for (int64_t l = 0, i = 0; l < nl; l++) {
        if (i < n && layers[i] == l) {
            map[l] = -1;
            i++;
        } else {
            map[l] = next++;
        }
    }
    *out = map;
    return SQZ_OK;
}

/* The new names of the tensors that move to another layer index (NULL entries elsewhere). */
static sqz_status new_names(const sqz_model *m, const int32_t *map, char ***out) {
    char **names = sqz__calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof *names);
    if (!names) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->layer < 0 || map[t->layer] < 0 || map[t->layer] == t->layer) continue;
        names[i] = renamed(t, map[t->layer]);
        if (!names[i]) {
            for (int64_t j = 0; j < i; j++) free(names[j]);
            free(names);
            return SQZ_ERR_NOMEM;
        }
    }
    *out = names;
    return SQZ_OK;
}

/* Drops the removed layers' tensors and renumbers the others (cannot fail). */
static void compact_tensors(sqz_model *m, const int32_t *map, char **names) {
    int64_t j = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        if (t->layer >= 0 && map[t->layer] < 0) {
            if (t->owned) free(t->data);
            free(t->name);
            continue;
        }
        if (names[i]) {
            free(t->name);
            t->name = names[i];
        }
        if (t->layer >= 0) t->layer = map[t->layer];
        m->tensors[j++] = *t;
    }
    m->n_tensors = j;
}

sqz_status sqz_model_remove_layers(sqz_model *m, const int32_t *layers, int64_t n) {
    if (n == 0) return SQZ_OK;
    SQZ_TRY(sqz_model_validate(m));
    int32_t *map = NULL;
    SQZ_TRY(layer_map(m, layers, n, &map));
    const int64_t nl = m->hp.n_layers - n;
    char **names = NULL;
    sqz_layer_dims *dims = sqz__malloc((size_t)nl * sizeof *dims);
    sqz_status st = dims ? new_names(m, map, &names) : SQZ_ERR_NOMEM;
    if (st != SQZ_OK) {
        free(dims);
        free(map);
        return st;
    }
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        if (map[l] >= 0) dims[map[l]] = m->layers[l];
    }
    compact_tensors(m, map, names);
    free(names);
    free(map);
    free(m->layers);
    m->layers = dims;
    m->hp.n_layers = nl;
    sqz__sync_layer_defaults(m);
    return sqz_model_validate(m);
}
