/* formats/onnx_read.c - reading back the ONNX directories sqz writes (docs/onnx.md, "Reading back").
 *
 * DIR (or DIR/model.onnx given directly) holds model.onnx, model.onnx.data, config.json and the
 * tokenizer files. The hyperparameters, the family and the tokenizer come from config.json and
 * tokenizer*.json exactly as an HF directory's (hf_config.c, safetensors_read.c); the weights from
 * model.onnx's initializers, whose names are HF tensor names, plus "_Q" / "_scales" / "_zp" for the
 * parts of a quantized weight (onnx_plan.c): sqz__hf_name_parse maps them back. Norms, biases and the
 * embedding (f32, as stored) stay in the data file's mapping; a float linear weight is stored W^T
 * (K, N) for MatMul and comes back transposed (one owned copy per matrix, as the other readers convert
 * what they cannot use in place); the quantized forms are onnx_read_q.c's. The rotary tables and the
 * graph's small inline constants are not weights. A directory without config.json (an ONNX model sqz
 * did not write, or an older sqz's export) is refused, saying so. */
#include <stdio.h>
#include <stdlib.h>

#include "formats/onnx_internal.h"

#define MAX_CONFIG_BYTES ((size_t)16 << 20)

int sqz__onnx_type_bits(int64_t dt) {
    switch (dt) {
    case SQZ__ONNX_FLOAT: return 32;
    case SQZ__ONNX_FLOAT16: return 16;
    case SQZ__ONNX_UINT8: case SQZ__ONNX_INT8: case SQZ__ONNX_FLOAT8E4M3FN: return 8;
    case SQZ__ONNX_UINT4: case SQZ__ONNX_INT4: return 4;
    default: return 0;
    }
}

static int cmp_span(sqz__pb_span a, sqz__pb_span b) {
    const int c = memcmp(a.p ? a.p : "", b.p ? b.p : "", a.n < b.n ? a.n : b.n);
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

/* qsort's comparators see no context: the arrays being sorted are set here first (one open at a time
 * per thread). */
static _Thread_local const sqz__onnx_proto *sort_pb;
static int cmp_init(const void *a, const void *b) {
    return cmp_span(sort_pb->init[*(const int64_t *)a].name, sort_pb->init[*(const int64_t *)b].name);
}
static sqz__pb_span in_key(const sqz__onnx_proto *pb, int64_t k) { return pb->node[k / 4].in[k % 4]; }
static int cmp_in(const void *a, const void *b) {
    return cmp_span(in_key(sort_pb, *(const int64_t *)a), in_key(sort_pb, *(const int64_t *)b));
}

const sqz__onnx_init *sqz__onnx_rd_init(const sqz__onnx_rd *r, sqz__pb_span name, int64_t *idx) {
    int64_t lo = 0, hi = r->pb->n_init;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const int c = cmp_span(r->pb->init[r->by_name[mid]].name, name);
        if (c == 0) {
            if (idx) *idx = r->by_name[mid];
            return &r->pb->init[r->by_name[mid]];
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const sqz__onnx_node *sqz__onnx_rd_consumer(const sqz__onnx_rd *r, sqz__pb_span name, int slot, const char *op) {
    int64_t lo = 0, hi = r->n_by_in;
    while (lo < hi) { /* the first key >= name */
        const int64_t mid = lo + (hi - lo) / 2;
        if (cmp_span(in_key(r->pb, r->by_in[mid]), name) < 0) lo = mid + 1;
        else hi = mid;
    }
    for (int64_t k = lo; k < r->n_by_in && cmp_span(in_key(r->pb, r->by_in[k]), name) == 0; k++) {
        const sqz__onnx_node *nd = &r->pb->node[r->by_in[k] / 4];
        if (r->by_in[k] % 4 == slot && sqz__pb_is(nd->op, op)) return nd;
    }
    return NULL;
}

const sqz__onnx_node *sqz__onnx_rd_producer(const sqz__onnx_rd *r, sqz__pb_span name) {
    for (int64_t k = 0; k < r->pb->n_node; k++)
        if (sqz__pb_eq(r->pb->node[k].out, name)) return &r->pb->node[k];
    return NULL;
}

static sqz_status make_index(sqz__onnx_rd *r) {
    const sqz__onnx_proto *pb = r->pb;
    r->by_name = sqz__malloc((size_t)(pb->n_init + 1) * sizeof *r->by_name);
    r->by_in = sqz__malloc((size_t)(pb->n_node * 4 + 1) * sizeof *r->by_in);
    if (!r->by_name || !r->by_in) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < pb->n_init; i++) r->by_name[i] = i;
    for (int64_t k = 0; k < pb->n_node; k++)
        for (int s = 0; s < SQZ__ONNX_NODE_INPUTS && s < pb->node[k].n_in; s++) r->by_in[r->n_by_in++] = k * 4 + s;
    sort_pb = pb;
    qsort(r->by_name, (size_t)pb->n_init, sizeof *r->by_name, cmp_init);
    qsort(r->by_in, (size_t)r->n_by_in, sizeof *r->by_in, cmp_in);
    sort_pb = NULL;
    for (int64_t i = 1; i < pb->n_init; i++) {
        const sqz__pb_span a = pb->init[r->by_name[i]].name;
        SQZ_RETURN_IF(cmp_span(pb->init[r->by_name[i - 1]].name, a) == 0, SQZ_ERR_FORMAT,
                      "%s: initializer '%.*s' appears twice", r->file, (int)(a.n > 200 ? 200 : a.n), a.p);
    }
    return SQZ_OK;
}

static bool has_prefix(sqz__pb_span s, const char *pre) {
    const size_t n = strlen(pre);
    return s.n >= n && memcmp(s.p, pre, n) == 0;
}

/* Checks initializer i's name, type, shape and where its bytes are; sets r->data[i], r->nbytes[i]. */
static sqz_status check_init(sqz__onnx_rd *r, int64_t i, const sqz_mapping *data, sqz__pb_span *location) {
    const sqz__onnx_init *t = &r->pb->init[i];
    const int nn = (int)(t->name.n > 200 ? 200 : t->name.n);
    SQZ_RETURN_IF(!t->name.p || !t->name.n || memchr(t->name.p, 0, t->name.n) || !sqz__utf8_valid(t->name.p, t->name.n),
                  SQZ_ERR_FORMAT, "%s: initializer %lld has no name or one that is not UTF-8 text", r->file, (long long)i);
    if (!t->external) {
        /* the graph's small constants ("c_*", raw_data inline) are no weights */
        SQZ_RETURN_IF(!has_prefix(t->name, "c_") || !t->has_raw, SQZ_ERR_FORMAT, "%s: tensor '%.*s': not an "
                      "initializer sqz writes (a weight's data is external, in model.onnx.data)", r->file, nn, t->name.p);
        r->used[i] = true;
        return SQZ_OK;
    }
    const int bits = sqz__onnx_type_bits(t->data_type);
    SQZ_RETURN_IF(!bits, SQZ_ERR_UNSUPPORTED, "%s: tensor '%.*s': ONNX data type %lld is not one sqz writes", r->file,
                  nn, t->name.p, (long long)t->data_type);
    SQZ_RETURN_IF(t->ndim < 1 || t->ndim > 3, SQZ_ERR_FORMAT, "%s: tensor '%.*s': %d dimensions (sqz writes 1 to 3)",
                  r->file, nn, t->name.p, t->ndim);
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        SQZ_RETURN_IF(!sqz__mul_i64(n, t->dims[d], &n) || n > ((int64_t)1 << 56), SQZ_ERR_FORMAT, "%s: tensor '%.*s': "
                      "the element count overflows", r->file, nn, t->name.p);
    const uint64_t want = ((uint64_t)n * (uint64_t)bits + 7) / 8;
    SQZ_RETURN_IF(!t->location.p, SQZ_ERR_FORMAT, "%s: tensor '%.*s': external data without a location", r->file, nn,
                  t->name.p);
    if (!location->p) *location = t->location;
    SQZ_RETURN_IF(!sqz__pb_eq(t->location, *location), SQZ_ERR_FORMAT, "%s: tensor '%.*s': external data in '%.*s', "
                  "not in '%.*s' as the other initializers", r->file, nn, t->name.p, (int)(t->location.n > 200 ? 200 :
                  t->location.n), t->location.p ? t->location.p : "", (int)location->n, location->p);
    SQZ_RETURN_IF(t->has_length && t->length != want, SQZ_ERR_FORMAT, "%s: tensor '%.*s': external data length %llu, "
                  "but its shape and type need %llu bytes", r->file, nn, t->name.p, (unsigned long long)t->length,
                  (unsigned long long)want);
    const uint64_t off = t->has_offset ? t->offset : 0;
    SQZ_RETURN_IF(off > data->size || want > data->size - off, SQZ_ERR_FORMAT, "%s: tensor '%.*s': external data "
                  "[%llu, +%llu) runs past the end of the file (%zu bytes)", r->data_file, nn, t->name.p,
                  (unsigned long long)off, (unsigned long long)want, data->size);
    r->data[i] = data->data + off;
    r->nbytes[i] = want;
    return SQZ_OK;
}

/* A float weight W^T (K, N) f32 or f16 back to (N, K), owned. */
static sqz_status add_transposed(sqz__onnx_rd *r, int64_t i, sqz_tensor *t) {
    const sqz__onnx_init *x = &r->pb->init[i];
    SQZ_RETURN_IF(x->ndim != 2 || (x->data_type != SQZ__ONNX_FLOAT && x->data_type != SQZ__ONNX_FLOAT16),
                  SQZ_ERR_FORMAT, "%s: tensor '%s': a float linear weight is stored W^T, 2-D f32 or f16", r->file,
                  t->name);
    const int64_t K = x->dims[0], N = x->dims[1];
    const size_t es = x->data_type == SQZ__ONNX_FLOAT16 ? 2 : 4;
    t->dtype = es == 2 ? SQZ_DTYPE_F16 : SQZ_DTYPE_F32;
    t->ndim = 2;
    t->shape[0] = N;
    t->shape[1] = K;
    t->nbytes = (size_t)(N * K) * es;
    uint8_t *w = sqz__malloc(t->nbytes ? t->nbytes : 1);
    if (!w) return SQZ_ERR_NOMEM;
    const uint8_t *src = r->data[i];
    for (int64_t c = 0; c < K; c++)
        for (int64_t q = 0; q < N; q++) memcpy(w + (size_t)(q * K + c) * es, src + (size_t)(c * N + q) * es, es);
    t->data = w;
    t->owned = true;
    if (!sqz_model_add_tensor(r->m, t)) {
        free(w);
        return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

/* "sqz dtype NAME" in the doc_string (onnx_graph.c): f32 values of another dtype (the embedding of an export
 * with --dtype, a model's f16 embedding or bf16 norms), given that dtype again when they are exactly its values
 * (converted to it and back, bit for bit): f16, bf16 and the GGUF types of 32 that the reference quantizer gives
 * back exactly. Else (the K-quants and IQ types, whose searches need not give their own values back and cost a
 * quantization at every open; a name sqz does not know) they stay f32, the values as stored. */
static bool cheap_exact(sqz_dtype d) {
    return d == SQZ_DTYPE_F16 || d == SQZ_DTYPE_BF16 || d == SQZ_DTYPE_Q8_0 || d == SQZ_DTYPE_Q4_0 ||
           d == SQZ_DTYPE_Q4_1 || d == SQZ_DTYPE_Q5_0 || d == SQZ_DTYPE_Q5_1;
}

static sqz_status restore_dtype(const sqz__onnx_init *x, sqz_tensor *t) {
    static const char pre[] = "sqz dtype ";
    const size_t np = sizeof pre - 1;
    if (!x->doc.p || x->doc.n <= np || memcmp(x->doc.p, pre, np) != 0) return SQZ_OK;
    char nm[32];
    sqz_dtype d = SQZ_DTYPE_F32;
    const size_t n = x->doc.n - np;
    if (n < sizeof nm) {
        memcpy(nm, x->doc.p + np, n);
        nm[n] = 0;
    }
    if (n >= sizeof nm || !sqz_dtype_from_name(nm, &d) || !cheap_exact(d)) return SQZ_OK;
    const int64_t ne = sqz_tensor_nelements(t), row = sqz_tensor_row_len(t), bs = sqz_dtype_info(d)->block_size;
    size_t nb, rb;
    if (bs < 1 || row < 1 || row % bs || !sqz_dtype_nbytes(d, ne, &nb) || !sqz_dtype_nbytes(d, row, &rb)) return SQZ_OK;
    uint8_t *q = sqz__malloc(nb ? nb : 1);
    float *back = sqz__malloc((size_t)row * sizeof *back);
    sqz_status st = q && back ? SQZ_OK : SQZ_ERR_NOMEM;
    bool same = st == SQZ_OK && sqz_convert(SQZ_DTYPE_F32, t->data, d, q, ne, NULL) == SQZ_OK;
    for (int64_t r0 = 0; same && r0 < ne / row; r0++) /* back to f32 a row at a time: no second copy */
        same = sqz_convert(d, q + (size_t)r0 * rb, SQZ_DTYPE_F32, back, row, NULL) == SQZ_OK &&
               memcmp(back, (const float *)t->data + r0 * row, (size_t)row * sizeof *back) == 0;
    free(back);
    if (!same) {
        free(q);
        if (st == SQZ_OK) sqz_clear_error();
        return st;
    }
    if (t->owned) free(t->data);
    t->dtype = d;
    t->data = q;
    t->nbytes = nb;
    t->owned = true;
    return SQZ_OK;
}

/* Initializer i as the model's tensor (or skipped: the rotary tables, a quantized weight's companions,
 * which their weight reads). */
static sqz_status add_init(sqz__onnx_rd *r, int64_t i) {
    const sqz__onnx_init *x = &r->pb->init[i];
    if (r->used[i] || sqz__pb_is(x->name, "rotary.cos") || sqz__pb_is(x->name, "rotary.sin")) {
        r->used[i] = true;
        return SQZ_OK;
    }
    char name[SQZ__ONNX_NAME + 8];
    SQZ_RETURN_IF(x->name.n >= sizeof name, SQZ_ERR_FORMAT, "%s: tensor '%.*s': name too long for a tensor sqz writes",
                  r->file, 200, x->name.p);
    memcpy(name, x->name.p, x->name.n);
    name[x->name.n] = 0;
    const size_t n = x->name.n;
    const bool quant = n > 2 && strcmp(name + n - 2, "_Q") == 0;
    if (!quant && ((n > 7 && strcmp(name + n - 7, "_scales") == 0) || (n > 3 && strcmp(name + n - 3, "_zp") == 0)))
        return SQZ_OK; /* read with its weight; one no weight read is refused after the loop */
    if (quant) name[n - 2] = 0;
    sqz_tensor t;
    memset(&t, 0, sizeof t);
    SQZ_RETURN_IF(sqz__hf_name_parse(r->m->hp.family, name, &t.role, &t.layer, &t.param) != SQZ__HF_TENSOR,
                  SQZ_ERR_FORMAT, "%s: tensor '%.*s': not a %s tensor name sqz writes", r->file, (int)x->name.n,
                  x->name.p, r->m->hp.arch);
    SQZ_RETURN_IF(t.layer >= r->m->hp.n_layers, SQZ_ERR_FORMAT, "%s: tensor '%s': layer %d, but config.json has %lld",
                  r->file, name, (int)t.layer, (long long)r->m->hp.n_layers);
    SQZ_RETURN_IF(t.role == SQZ_ROLE_OUTPUT && t.param == SQZ_PARAM_WEIGHT && r->m->hp.tied_embeddings, SQZ_ERR_FORMAT,
                  "%s: tensor '%s': config.json ties the classifier to the embedding", r->file, name);
    SQZ_RETURN_IF(sqz_model_get(r->m, t.role, t.layer, t.param), SQZ_ERR_FORMAT, "%s: tensor '%s' appears twice (as "
                  "itself and as quantized parts)", r->file, name);
    t.name = name;
    r->used[i] = true;
    const bool linear = t.param == SQZ_PARAM_WEIGHT && t.role != SQZ_ROLE_TOKEN_EMBD && x->ndim == 2;
    if (quant) return sqz__onnx_read_quant(r, i, &t);
    if (linear) return add_transposed(r, i, &t);
    SQZ_RETURN_IF(x->data_type != SQZ__ONNX_FLOAT, SQZ_ERR_FORMAT, "%s: tensor '%s': ONNX type %lld, sqz writes "
                  "this tensor in f32", r->file, name, (long long)x->data_type);
    t.dtype = SQZ_DTYPE_F32;
    t.ndim = x->ndim;
    for (int d = 0; d < SQZ_MAX_DIMS; d++) t.shape[d] = d < x->ndim ? x->dims[d] : 1;
    t.nbytes = (size_t)r->nbytes[i];
    t.data = (void *)r->data[i]; /* sqz's writer aligns every part to 64 bytes */
    if ((uintptr_t)t.data % sizeof(float) != 0) { /* another offset: an aligned copy, as the safetensors reader */
        t.data = sqz__malloc(t.nbytes ? t.nbytes : 1);
        if (!t.data) return SQZ_ERR_NOMEM;
        memcpy(t.data, r->data[i], t.nbytes);
        t.owned = true;
    }
    sqz_status st = restore_dtype(x, &t);
    if (st != SQZ_OK) {
        if (t.owned) free(t.data);
        return st;
    }
    if (sqz_model_add_tensor(r->m, &t)) return SQZ_OK;
    if (t.owned) free(t.data);
    return SQZ_ERR_NOMEM;
}

static sqz_status add_all(sqz__onnx_rd *r, const sqz_mapping *data) {
    const int64_t n = r->pb->n_init;
    r->data = sqz__calloc((size_t)n + 1, sizeof *r->data);
    r->nbytes = sqz__calloc((size_t)n + 1, sizeof *r->nbytes);
    r->used = sqz__calloc((size_t)n + 1, sizeof *r->used);
    if (!r->data || !r->nbytes || !r->used) return SQZ_ERR_NOMEM;
    SQZ_TRY(make_index(r));
    sqz__pb_span loc = {NULL, 0};
    for (int64_t i = 0; i < n; i++) SQZ_TRY(check_init(r, i, data, &loc));
    for (int64_t i = 0; i < n; i++) SQZ_TRY(add_init(r, i));
    for (int64_t i = 0; i < n; i++) {
        const sqz__pb_span s = r->pb->init[i].name;
        SQZ_RETURN_IF(!r->used[i], SQZ_ERR_FORMAT, "%s: tensor '%.*s': a quantized weight's part that no weight reads",
                      r->file, (int)(s.n > 200 ? 200 : s.n), s.p);
    }
    return SQZ_OK;
}

/* The data file every external initializer names: a plain file name beside model.onnx. */
static sqz_status map_data(sqz__onnx_rd *r, const char *dir, sqz_model *m, const sqz_mapping **out, char **path) {
    sqz__pb_span loc = {NULL, 0};
    for (int64_t i = 0; i < r->pb->n_init && !loc.p; i++)
        if (r->pb->init[i].external) loc = r->pb->init[i].location;
    SQZ_RETURN_IF(!loc.p || !loc.n || loc.n > 255 || memchr(loc.p, '/', loc.n) || memchr(loc.p, 0, loc.n) ||
                  sqz__pb_is(loc, "..") || sqz__pb_is(loc, "."), SQZ_ERR_FORMAT, "%s: %s", r->file, loc.p ?
                  "the external data location is not a file name beside model.onnx" : "no initializer has external data "
                  "(sqz writes every weight to model.onnx.data)");
    char name[256];
    memcpy(name, loc.p, loc.n);
    name[loc.n] = 0;
    *path = sqz__path_join(dir, name);
    if (!*path) return SQZ_ERR_NOMEM;
    r->data_file = *path;
    SQZ_RETURN_IF(!sqz__is_file(*path), SQZ_ERR_NOT_FOUND, "%s: the weights' file %s is missing", r->file, *path);
    sqz_mapping *map;
    SQZ_TRY(sqz_map(*path, &map));
    SQZ_TRY(sqz_model_keep_mapping(m, map));
    *out = map;
    return SQZ_OK;
}

static sqz_status read_config(const char *dir, const char *onnx, sqz_model *m) {
    char *cfg_path = sqz__path_join(dir, "config.json"), *cfg = NULL;
    if (!cfg_path) return SQZ_ERR_NOMEM;
    size_t len = 0;
    sqz_status st = SQZ_OK;
    if (!sqz__is_file(cfg_path))
        st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: no config.json beside it: sqz reads back the ONNX directories it "
                       "writes with their config.json (not those of other tools or older sqz versions, nor a model "
                       "with per-layer sizes an HF config cannot state); re-export the model with this sqz: sqz export "
                       "MODEL --to onnx -o DIR", onnx);
    if (st == SQZ_OK) st = sqz_read_file(cfg_path, MAX_CONFIG_BYTES, &cfg, &len);
    if (st == SQZ_OK) st = sqz__hf_config_read(cfg, len, cfg_path, m);
    free(cfg);
    free(cfg_path);
    return st;
}

static sqz_status open_dir(const char *dir, const char *onnx, sqz_model *m) {
    SQZ_TRY(read_config(dir, onnx, m));
    sqz_mapping *pm = NULL;
    SQZ_TRY(sqz_map(onnx, &pm));
    sqz__onnx_proto pb;
    sqz_status st = sqz__onnx_proto_read(pm->data, pm->size, onnx, &pb);
    if (st != SQZ_OK) {
        sqz_unmap(pm);
        return st;
    }
    if (!sqz__pb_is(pb.producer, "sqz")) {
        const sqz__pb_span p = pb.producer;
        const bool text = p.p && p.n <= 64 && !memchr(p.p, 0, p.n) && sqz__utf8_valid(p.p, p.n);
        st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: written by %s%.*s%s, not by sqz: sqz reads back the ONNX models it "
                       "exports (sqz export MODEL --to onnx); open the checkpoint it was made from instead", onnx,
                       text ? "'" : "another tool", text ? (int)p.n : 0, text ? p.p : "", text ? "'" : "");
        sqz__onnx_proto_free(&pb);
        sqz_unmap(pm);
        return st;
    }
    sqz__onnx_rd r = {.file = onnx, .pb = &pb, .m = m};
    const sqz_mapping *data = NULL;
    char *data_path = NULL;
    st = map_data(&r, dir, m, &data, &data_path);
    if (st == SQZ_OK) st = add_all(&r, data);
    free(r.data);
    free(r.nbytes);
    free(r.used);
    free(r.by_name);
    free(r.by_in);
    free(data_path);
    sqz__onnx_proto_free(&pb);
    sqz_unmap(pm);
    SQZ_TRY(st);
    SQZ_TRY(sqz__hf_tokenizer_read(dir, m));
    if (!m->name) {
        m->name = sqz__strdup(sqz__basename(dir));
        if (!m->name) return SQZ_ERR_NOMEM;
    }
    return sqz_model_validate(m); /* shapes against config.json, named (the message names the model's path) */
}

sqz_status sqz__onnx_open(const char *path, sqz_model *m) {
    const bool is_dir = sqz__is_dir(path);
    char *dir = is_dir ? sqz__strdup(path) : sqz__dirname(path);
    if (!dir) return SQZ_ERR_NOMEM;
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = 0;
    char *onnx = is_dir ? sqz__path_join(dir, "model.onnx") : sqz__strdup(path);
    sqz_status st = onnx ? open_dir(dir, onnx, m) : SQZ_ERR_NOMEM;
    free(onnx);
    free(dir);
    return st;
}

/* A file starting as a ModelProto does: ir_version (field 1, a small varint), then one of the
 * ModelProto's other fields (producer_name 2, producer_version 3, domain 4, model_version 5, doc_string 6,
 * graph 7, opset_import 8). Never a GGUF, safetensors or bundle header (checked first), and never a
 * llama2.c one: its first int32 would be dim >= 0x120000 > 2^20. */
bool sqz__looks_onnx(const uint8_t *p, size_t n, uint64_t file_size) {
    (void)file_size;
    if (n < 4 || p[0] != 0x08 || p[1] == 0 || p[1] > 0x7f) return false;
    const uint8_t t = p[2];
    return t == 0x12 || t == 0x1a || t == 0x22 || t == 0x28 || t == 0x32 || t == 0x3a || t == 0x42;
}
