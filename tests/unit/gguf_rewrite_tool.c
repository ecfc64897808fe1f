/*
 * tests/unit/gguf_rewrite_tool.c - opens a model with sqz and writes it as GGUF.
 *
 *   gguf_rewrite_tool IN OUT [keep|f32|f16|q8_0|...] [--prune-demo]
 *
 * For the Python oracle tests (tests/py/test_gguf_oracle.py, test_gguf_llamacpp.py), which
 * check the output with the gguf package and llama.cpp. Prints the parameter count split as
 * "params TOTAL embedding EMB rest REST".
 *
 * --prune-demo makes layers differ the way a pruning pass would (the structure only, by
 * slicing whole blocks; no importance scores): layer 1 keeps 2/3 of its FFN width, layer 2
 * drops its last KV head group (3 of 9 query heads), so the writer must emit per-layer
 * head_count / head_count_kv / feed_forward_length arrays.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/sqz.h"

/* Keeps the first `rows` rows and the first `cols` columns of a 2-D tensor (cols whole blocks). */
static int slice(sqz_tensor *t, int64_t rows, int64_t cols) {
    size_t row_in = t->nbytes / (size_t)t->shape[0], row_out;
    if (!sqz_dtype_nbytes(t->dtype, cols, &row_out) || rows > t->shape[0] || cols > t->shape[1]) return -1;
    unsigned char *p = malloc((size_t)rows * row_out);
    if (!p) return -1;
    for (int64_t r = 0; r < rows; r++) {
        memcpy(p + (size_t)r * row_out, (unsigned char *)t->data + (size_t)r * row_in, row_out);
    }
    if (t->owned) free(t->data);
    t->data = p;
    t->owned = true;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->nbytes = (size_t)rows * row_out;
    return 0;
}

static int prune_demo(sqz_model *m) {
    if (m->hp.n_layers < 3) return -1;
    sqz_layer_dims *l1 = &m->layers[1], *l2 = &m->layers[2];
    int64_t d = m->hp.d_model, hd = m->hp.head_dim;
    int64_t ff = l1->d_ff * 2 / 3 / 32 * 32;
    int64_t kv = l2->n_kv_heads - 1, heads = l2->n_heads / l2->n_kv_heads * kv;
    if (slice(sqz_model_get(m, SQZ_ROLE_FFN_GATE, 1, SQZ_PARAM_WEIGHT), ff, d) ||
        slice(sqz_model_get(m, SQZ_ROLE_FFN_UP, 1, SQZ_PARAM_WEIGHT), ff, d) ||
        slice(sqz_model_get(m, SQZ_ROLE_FFN_DOWN, 1, SQZ_PARAM_WEIGHT), d, ff) ||
        slice(sqz_model_get(m, SQZ_ROLE_ATTN_Q, 2, SQZ_PARAM_WEIGHT), heads * hd, d) ||
        slice(sqz_model_get(m, SQZ_ROLE_ATTN_K, 2, SQZ_PARAM_WEIGHT), kv * hd, d) ||
        slice(sqz_model_get(m, SQZ_ROLE_ATTN_V, 2, SQZ_PARAM_WEIGHT), kv * hd, d) ||
        slice(sqz_model_get(m, SQZ_ROLE_ATTN_OUT, 2, SQZ_PARAM_WEIGHT), d, heads * hd))
        return -1;
    l1->d_ff = ff;
    l2->n_heads = heads;
    l2->n_kv_heads = kv;
    return sqz_model_validate(m) == SQZ_OK ? 0 : -1;
}

int main(int argc, char **argv) {
    int prune = argc == 5 && strcmp(argv[4], "--prune-demo") == 0;
    if (argc < 3 || argc > 5 || (argc == 5 && !prune)) {
        fprintf(stderr, "usage: %s IN OUT [keep|DTYPE] [--prune-demo]\n", argv[0]);
        return 2;
    }
    sqz_save_opts o = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
    if (argc >= 4 && strcmp(argv[3], "keep") != 0) {
        sqz_dtype d;
        if (!sqz_dtype_from_name(argv[3], &d)) {
            fprintf(stderr, "%s: unknown dtype '%s'\n", argv[0], argv[3]);
            return 2;
        }
        o.dtype = (int)d;
    }
    sqz_model *m;
    if (sqz_model_open(argv[1], NULL, &m) != SQZ_OK) {
        fprintf(stderr, "%s\n", sqz_last_error());
        return 1;
    }
    if (prune && prune_demo(m) != 0) {
        fprintf(stderr, "%s: cannot prune: %s\n", argv[1], sqz_last_error());
        sqz_model_free(m);
        return 1;
    }
    const sqz_tensor *e = sqz_model_get(m, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT);
    long long total = (long long)sqz_model_param_count(m);
    long long embd = e ? (long long)sqz_tensor_nelements(e) : 0;
    printf("params %lld embedding %lld rest %lld\n", total, embd, total - embd);
    sqz_status s = sqz_model_save(m, argv[2], &o);
    if (s != SQZ_OK) fprintf(stderr, "%s\n", sqz_last_error());
    sqz_model_free(m);
    return s == SQZ_OK ? 0 : 1;
}
