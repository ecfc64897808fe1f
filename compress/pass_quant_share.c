/*
 * compress/pass_quant_share.c - a partitioned solve in an MPI job (docs/distributed.md): the rank
 * that owns a linear input's statistics (calib/owner.c) quantized the group of layers reading it
 * alone; here it sends what that changed to every other rank: each member's new bytes and
 * quantization parameters, which members fall back to f16, and the group's report rows. Every
 * rank then holds the same compressed block, attached by the same sqz_qmatrix_attach.
 */
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/dist.h"

#define PUT(b, v) sqz__bytebuf_put((b), &(v), sizeof(v))

static void pack_tensor(sqz__bytebuf *b, const sqz_tensor *t) {
    const int32_t dtype = (int32_t)t->dtype;
    const uint64_t nbytes = t->nbytes;
    const uint8_t has_qp = t->qp != NULL;
    PUT(b, dtype);
    PUT(b, nbytes);
    sqz__bytebuf_put(b, t->data, t->nbytes);
    PUT(b, has_qp);
    if (!has_qp) return;
    const sqz_qparams *q = t->qp;
    PUT(b, *q); /* the fixed fields; the pointers are rewritten on the other side */
    const uint8_t has[3] = {q->zeros != NULL, q->g_idx != NULL, q->in_scale != NULL};
    PUT(b, has);
    const size_t ns = (size_t)q->n_out * (size_t)q->n_groups;
    sqz__bytebuf_put(b, q->scales, ns * sizeof(float));
    if (q->zeros) sqz__bytebuf_put(b, q->zeros, ns);
    if (q->g_idx) sqz__bytebuf_put(b, q->g_idx, (size_t)q->n_in * sizeof(int32_t));
    if (q->in_scale) sqz__bytebuf_put(b, q->in_scale, (size_t)q->n_in * sizeof(float));
}

/* p = copy of the next n bytes of r (malloc'd), or false. */
static bool take(sqz__reader *r, size_t n, void **p) {
    const uint8_t *s = sqz__reader_bytes(r, n);
    if (!s || !(*p = sqz__malloc(n ? n : 1))) return false;
    if (n) memcpy(*p, s, n);
    return true;
}

#define GET(r, v) sqz__reader_copy((r), &(v), sizeof(v))

static sqz_status unpack_tensor(sqz__reader *r, sqz_model *m, sqz_tensor *t) {
    sqz_qmatrix q;
    memset(&q, 0, sizeof q);
    int32_t dtype = 0;
    uint64_t nbytes = 0;
    uint8_t has_qp = 0, has[3] = {0};
    bool ok = GET(r, dtype) && GET(r, nbytes) && dtype >= 0 && dtype < SQZ_DTYPE_COUNT &&
              nbytes <= sqz__reader_left(r) && take(r, (size_t)nbytes, &q.data) && GET(r, has_qp);
    q.dtype = (sqz_dtype)dtype;
    q.nbytes = (size_t)nbytes;
    q.n_out = t->shape[0];
    q.n_in = t->shape[1];
    if (ok && has_qp) {
        ok = GET(r, q.qp) && GET(r, has) && q.qp.n_out == q.n_out && q.qp.n_in == q.n_in && q.qp.n_groups >= 0 &&
             q.qp.n_groups <= q.n_in;
        const size_t ns = ok ? (size_t)q.n_out * (size_t)q.qp.n_groups : 0, ni = (size_t)q.n_in;
        ok = ok && take(r, ns * sizeof(float), (void **)&q.scales_buf);
        ok = ok && (!has[0] || take(r, ns, (void **)&q.zeros_buf));
        ok = ok && (!has[1] || take(r, ni * sizeof(int32_t), (void **)&q.g_idx_buf));
        ok = ok && (!has[2] || take(r, ni * sizeof(float), (void **)&q.in_scale_buf));
        q.qp.scales = q.scales_buf;
        q.qp.zeros = q.zeros_buf;
        q.qp.g_idx = q.g_idx_buf;
        q.qp.in_scale = q.in_scale_buf;
    } else {
        q.qp.scheme = SQZ_QSCHEME_NONE;
    }
    if (!ok) {
        sqz_qmatrix_free(&q);
        return SQZ_ERROR(SQZ_ERR_FORMAT, "compress: tensor '%s' from its owner rank is damaged", t->name);
    }
    const void *old = t->data;
    const size_t old_n = t->nbytes;
    const bool borrowed = !t->owned;
    sqz_status st = sqz_qmatrix_attach(m, t, &q);
    if (st != SQZ_OK) sqz_qmatrix_free(&q);
    else if (borrowed) sqz__release_pages(old, old_n);
    return st;
}

/* The owner's bytes: its report rows of the group, then per member (present, quantized, f16
 * fallback, the tensor when quantized). */
static sqz_status pack(sqz_model *m, int32_t layer, const sqz_linear_group *g, const bool *quantized,
                       const bool *to_f16, const sqz_compress_report *rows, sqz__bytebuf *b) {
    const uint32_t n_rows = (uint32_t)rows->n_layers;
    PUT(b, n_rows);
    sqz__bytebuf_put(b, rows->layers, (size_t)n_rows * sizeof(sqz_layer_report));
    for (int i = 0; i < g->n; i++) {
        const sqz_tensor *t = sqz_model_get(m, g->roles[i], layer, SQZ_PARAM_WEIGHT);
        const uint8_t f[2] = {t && quantized[g->roles[i]], to_f16[g->roles[i]]};
        PUT(b, f);
        if (f[0]) pack_tensor(b, t);
    }
    SQZ_RETURN_IF(b->oom, SQZ_ERR_NOMEM, "compress: block %d: cannot pack a group for the other ranks", (int)layer);
    return SQZ_OK;
}

static sqz_status unpack(sqz_model *m, int32_t layer, const sqz_linear_group *g, bool *quantized, bool *to_f16,
                         sqz_compress_report *rep, sqz__reader *r) {
    uint32_t n_rows = 0;
    SQZ_RETURN_IF(!GET(r, n_rows) || n_rows > 3 * SQZ_LINEAR_GROUPS_MAX, SQZ_ERR_FORMAT,
                  "compress: block %d: a group from its owner rank is damaged", (int)layer);
    for (uint32_t k = 0; k < n_rows; k++) {
        sqz_layer_report row;
        SQZ_RETURN_IF(!GET(r, row), SQZ_ERR_FORMAT, "compress: block %d: a report row is damaged", (int)layer);
        row.tensor[sizeof row.tensor - 1] = row.method[sizeof row.method - 1] = 0;
        row.format[sizeof row.format - 1] = row.why[sizeof row.why - 1] = 0;
        SQZ_TRY(sqz__report_add(rep, &row));
    }
    for (int i = 0; i < g->n; i++) {
        sqz_tensor *t = sqz_model_get(m, g->roles[i], layer, SQZ_PARAM_WEIGHT);
        uint8_t f[2] = {0};
        SQZ_RETURN_IF(!GET(r, f) || (f[0] && !t), SQZ_ERR_FORMAT,
                      "compress: block %d: a group from its owner rank is damaged", (int)layer);
        to_f16[g->roles[i]] = f[1];
        if (!f[0]) continue;
        SQZ_TRY(unpack_tensor(r, m, t));
        quantized[g->roles[i]] = true;
    }
    return SQZ_OK;
}

sqz_status sqz__share_group(sqz_model *m, int32_t layer, const sqz_linear_group *g, int owner, bool *quantized,
                            bool *to_f16, const sqz_compress_report *rows, sqz_compress_report *rep) {
    sqz__bytebuf b = {0};
    sqz_status st = SQZ_OK;
    for (int64_t k = 0; sqz_dist_rank() == owner && k < rows->n_layers && st == SQZ_OK; k++)
        st = sqz__report_add(rep, &rows->layers[k]);
    if (st == SQZ_OK && sqz_dist_rank() == owner) st = pack(m, layer, g, quantized, to_f16, rows, &b);
    uint64_t n = b.n;
    if (st == SQZ_OK) st = sqz_dist_bcast(&n, sizeof n, owner);
    if (st == SQZ_OK && sqz_dist_rank() != owner && !(b.p = sqz__malloc((size_t)n ? (size_t)n : 1)))
        st = SQZ_ERR_NOMEM;
    if (st == SQZ_OK) st = sqz_dist_bcast(b.p, (size_t)n, owner);
    if (st == SQZ_OK && sqz_dist_rank() != owner) {
        sqz__reader r;
        sqz__reader_init(&r, b.p, (size_t)n);
        st = unpack(m, layer, g, quantized, to_f16, rep, &r);
    }
    free(b.p);
    return st;
}
