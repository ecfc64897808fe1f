/*
 * formats/llama2c.c - Karpathy's llama2.c legacy checkpoint (export.py "legacy_export", version 0).
 *
 * Layout (little-endian; see llama2.c run.c, Config / TransformerWeights / memory_map_weights):
 *   int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
 *     (vocab_size < 0: an unshared classifier wcls follows at the end; > 0: tied to the embedding)
 *   float32 token_embedding_table  (vocab, dim)
 *   float32 rms_att_weight         (layer, dim)
 *   float32 wq                     (layer, n_heads*head_size, dim)     each layer torch (out, in)
 *   float32 wk                     (layer, n_kv_heads*head_size, dim)
 *   float32 wv                     (layer, n_kv_heads*head_size, dim)
 *   float32 wo                     (layer, dim, n_heads*head_size)
 *   float32 rms_ffn_weight         (layer, dim)
 *   float32 w1                     (layer, hidden, dim)                gate
 *   float32 w2                     (layer, dim, hidden)                down
 *   float32 w3                     (layer, hidden, dim)                up
 *   float32 rms_final_weight       (dim)
 *   float32 freq_cis_real          (seq_len, head_size/2)              derived: skipped
 *   float32 freq_cis_imag          (seq_len, head_size/2)              derived: skipped
 *   float32 wcls                   (vocab, dim)                        only when vocab_size < 0
 * run.c's comments write wq as (layer, dim, n_heads*head_size), but its matmul computes
 * xout[i] = sum_j w[i*n + j] * x[j], i.e. every layer's matrix is (out, in) row-major, which is
 * what torch's Linear.weight.numpy().tobytes() gives export.py. Those are the shapes used here.
 *
 * The whole file must be exactly the size the header predicts. Tensors borrow from the mapping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "formats/formats_internal.h"

#define L2C_HEADER_BYTES 28
/* Dimensions are only bounded by the exact-size check (every one of them multiplies into the
 * predicted size); layers are capped where sqz_model_init_layers caps them, to name the file. */
#define L2C_MAX_LAYERS 100000

/* One stacked array of the file: name pattern ("%d" for the layer when per-layer), role,
 * rows x cols per layer (cols 0: a vector of rows elements). */
typedef struct l2c_array {
    const char *name;
    sqz_role role;
    int64_t rows, cols;
    bool per_layer;
} l2c_array;

typedef struct l2c_config {
    int64_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len, head_size;
    bool shared;
} l2c_config;

static sqz_status read_config(const char *path, const sqz_mapping *map, l2c_config *c) {
    SQZ_RETURN_IF(map->size < L2C_HEADER_BYTES, SQZ_ERR_FORMAT,
                  "%s: %zu bytes, too short for the 28-byte llama2.c header", path, map->size);
    int64_t h[7];
    for (int i = 0; i < 7; i++) h[i] = (int32_t)sqz__rd_u32(map->data + 4 * i);
    c->dim = h[0];
    c->hidden = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->shared = h[5] > 0;
    c->vocab = h[5] < 0 ? -h[5] : h[5]; /* int64: INT32_MIN negates safely */
    c->seq_len = h[6];
    SQZ_RETURN_IF(c->dim <= 0, SQZ_ERR_FORMAT, "%s: header: dim %" PRId64 " out of range",
                  path, c->dim);
    SQZ_RETURN_IF(c->hidden <= 0, SQZ_ERR_FORMAT,
                  "%s: header: hidden_dim %" PRId64 " out of range", path, c->hidden);
    SQZ_RETURN_IF(c->n_layers <= 0 || c->n_layers > L2C_MAX_LAYERS, SQZ_ERR_FORMAT,
                  "%s: header: n_layers %" PRId64 " out of range", path, c->n_layers);
    SQZ_RETURN_IF(c->n_heads <= 0 || c->n_heads > c->dim, SQZ_ERR_FORMAT,
                  "%s: header: n_heads %" PRId64 " out of range for dim %" PRId64, path, c->n_heads, c->dim);
    SQZ_RETURN_IF(c->dim % c->n_heads != 0, SQZ_ERR_FORMAT, "%s: header: n_heads %" PRId64
                  " does not divide dim %" PRId64, path, c->n_heads, c->dim);
    SQZ_RETURN_IF(c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0,
                  SQZ_ERR_FORMAT, "%s: header: n_kv_heads %" PRId64 " must divide n_heads %" PRId64, path,
                  c->n_kv_heads, c->n_heads);
    c->head_size = c->dim / c->n_heads;
    SQZ_RETURN_IF(c->head_size % 2 != 0, SQZ_ERR_FORMAT,
                  "%s: header: head size %" PRId64 " is odd, rotary embeddings need pairs", path, c->head_size);
    SQZ_RETURN_IF(c->vocab == 0 || c->vocab > SQZ__MAX_VOCAB, SQZ_ERR_FORMAT,
                  "%s: header: vocab_size %" PRId64 " out of range", path, h[5]);
    SQZ_RETURN_IF(c->seq_len <= 0, SQZ_ERR_FORMAT,
                  "%s: header: seq_len %" PRId64 " out of range", path, c->seq_len);
    return SQZ_OK;
}

/* Fills arrays[] in file order; returns their count. */
static int l2c_arrays(const l2c_config *c, l2c_array *a) {
    const int64_t d = c->dim, q = c->n_heads * c->head_size, kv = c->n_kv_heads * c->head_size, f = c->hidden;
    int n = 0;
    a[n++] = (l2c_array){"tok_embeddings.weight", SQZ_ROLE_TOKEN_EMBD, c->vocab, d, false};
    a[n++] = (l2c_array){"layers.%d.attention_norm.weight", SQZ_ROLE_ATTN_NORM, d, 0, true};
    a[n++] = (l2c_array){"layers.%d.attention.wq.weight", SQZ_ROLE_ATTN_Q, q, d, true};
    a[n++] = (l2c_array){"layers.%d.attention.wk.weight", SQZ_ROLE_ATTN_K, kv, d, true};
    a[n++] = (l2c_array){"layers.%d.attention.wv.weight", SQZ_ROLE_ATTN_V, kv, d, true};
    a[n++] = (l2c_array){"layers.%d.attention.wo.weight", SQZ_ROLE_ATTN_OUT, d, q, true};
    a[n++] = (l2c_array){"layers.%d.ffn_norm.weight", SQZ_ROLE_FFN_NORM, d, 0, true};
    a[n++] = (l2c_array){"layers.%d.feed_forward.w1.weight", SQZ_ROLE_FFN_GATE, f, d, true};
    a[n++] = (l2c_array){"layers.%d.feed_forward.w2.weight", SQZ_ROLE_FFN_DOWN, d, f, true};
    a[n++] = (l2c_array){"layers.%d.feed_forward.w3.weight", SQZ_ROLE_FFN_UP, f, d, true};
    a[n++] = (l2c_array){"norm.weight", SQZ_ROLE_OUTPUT_NORM, d, 0, false};
    /* freq_cis_real + freq_cis_imag: role unused, name NULL marks "skip". */
    a[n++] = (l2c_array){NULL, SQZ_ROLE_COUNT, 2 * c->seq_len, c->head_size / 2, false};
    if (!c->shared) a[n++] = (l2c_array){"output.weight", SQZ_ROLE_OUTPUT, c->vocab, d, false};
    return n;
}

/* Floats in one array (all layers). False on overflow. */
static bool array_floats(const l2c_config *c, const l2c_array *a, int64_t *out) {
    int64_t n = a->rows;
    if (a->cols && !sqz__mul_i64(n, a->cols, &n)) return false;
    if (a->per_layer && !sqz__mul_i64(n, c->n_layers, &n)) return false;
    *out = n;
    return true;
}

/* Finds the tokenizer: the given path, else tokenizer.bin beside the checkpoint, else
 * tok<vocab>.bin beside it. *out is NULL (no tokenizer) or a malloc'd path. */
static sqz_status find_tokenizer(const char *path, const char *tokenizer_path, int64_t vocab, char **out) {
    *out = NULL;
    if (tokenizer_path) {
        struct stat st;
        SQZ_RETURN_IF(stat(tokenizer_path, &st) != 0, SQZ_ERR_NOT_FOUND, "%s: tokenizer file not found",
                      tokenizer_path);
        SQZ_RETURN_IF(!S_ISREG(st.st_mode), SQZ_ERR_IO, "%s: a %s, not a regular file", tokenizer_path,
                      sqz__file_kind(st.st_mode));
        *out = sqz__strdup(tokenizer_path);
        return *out ? SQZ_OK : SQZ_ERR_NOMEM;
    }
    char *dir = sqz__dirname(path);
    if (!dir) return SQZ_ERR_NOMEM;
    char name[32];
    snprintf(name, sizeof name, "tok%" PRId64 ".bin", vocab);
    const char *cands[2] = {"tokenizer.bin", name};
    for (int i = 0; i < 2; i++) {
        char *p = sqz__path_join(dir, cands[i]);
        if (!p) { free(dir); return SQZ_ERR_NOMEM; }
        if (sqz__is_file(p)) { *out = p; break; }
        free(p);
    }
    free(dir);
    return SQZ_OK;
}

static char *model_name(const char *path) {
    const char *b = sqz__basename(path);
    size_t n = strlen(b);
    if (n > 4 && strcmp(b + n - 4, ".bin") == 0) n -= 4;
    return sqz__strndup(b, n);
}

sqz_status sqz__llama2c_open(const char *path, const char *tokenizer_path, sqz_model *m) {
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    SQZ_TRY(sqz_model_keep_mapping(m, map)); /* unmapped with the model, or at once on failure */

    l2c_config c = {0};
    SQZ_TRY(read_config(path, map, &c));

    l2c_array arr[16];
    int n_arr = l2c_arrays(&c, arr);
    /* Total floats the header predicts, overflow-checked. */
    int64_t total = 0;
    for (int i = 0; i < n_arr; i++) {
        int64_t n;
        SQZ_RETURN_IF(!array_floats(&c, &arr[i], &n) || __builtin_add_overflow(total, n, &total), SQZ_ERR_FORMAT,
                      "%s: header (dim %" PRId64 ", hidden %" PRId64 ", layers %" PRId64 ", vocab %" PRId64
                      ", seq_len %" PRId64 ") predicts a size that overflows", path, c.dim, c.hidden, c.n_layers,
                      c.vocab, c.seq_len);
    }
    int64_t expect;
    SQZ_RETURN_IF(!sqz__mul_i64(total, 4, &expect) || __builtin_add_overflow(expect, L2C_HEADER_BYTES, &expect),
                  SQZ_ERR_FORMAT, "%s: header predicts a size that overflows", path);
    SQZ_RETURN_IF((uint64_t)expect != (uint64_t)map->size, SQZ_ERR_FORMAT,
                  "%s: header (dim %" PRId64 ", hidden %" PRId64 ", layers %" PRId64 ", heads %" PRId64
                  ", kv heads %" PRId64 ", vocab %" PRId64 " %s, seq_len %" PRId64 ") predicts %" PRId64
                  " bytes, the file has %zu (%s)",
                  path, c.dim, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab,
                  c.shared ? "shared" : "unshared", c.seq_len, expect, map->size,
                  (uint64_t)expect > (uint64_t)map->size ? "truncated" : "trailing bytes");

    sqz_hparams *hp = &m->hp;
    snprintf(hp->arch, sizeof hp->arch, "llama");
    hp->family = SQZ_FAMILY_LLAMA;
    hp->n_layers = c.n_layers;
    hp->d_model = c.dim;
    hp->n_heads = c.n_heads;
    hp->n_kv_heads = c.n_kv_heads;
    hp->head_dim = c.head_size;
    hp->d_ff = c.hidden;
    hp->vocab_size = c.vocab;
    hp->ctx_len = c.seq_len;
    hp->n_token_types = 0;
    hp->norm_eps = 1e-5f;     /* llama2.c model.py ModelArgs.norm_eps; run.c rmsnorm */
    hp->rope_theta = 10000.f; /* run.c: 1 / 10000^(head_dim_index / head_size) */
    hp->rope_layout = SQZ_ROPE_INTERLEAVED; /* run.c rotates pairs (2i, 2i+1) */
    hp->act = SQZ_ACT_SILU;
    hp->tied_embeddings = c.shared;
    hp->attn_bias = false;
    SQZ_TRY(sqz_model_init_layers(m));

    /* Tensors in file order; per-layer tensors are slices of the stacked arrays. */
    size_t off = L2C_HEADER_BYTES;
    for (int i = 0; i < n_arr; i++) {
        const l2c_array *a = &arr[i];
        int64_t per = a->rows * (a->cols ? a->cols : 1); /* checked above */
        if (!a->name) {
            off += (size_t)per * 4;
            continue;
        }
        int64_t nl = a->per_layer ? c.n_layers : 1;
        for (int64_t l = 0; l < nl; l++) {
            char name[96];
            snprintf(name, sizeof name, a->name, (int)l);
            sqz_tensor t = {0};
            t.name = name;
            t.role = a->role;
            t.param = SQZ_PARAM_WEIGHT;
            t.layer = a->per_layer ? (int32_t)l : -1;
            t.dtype = SQZ_DTYPE_F32;
            t.ndim = a->cols ? 2 : 1;
            t.shape[0] = a->rows;
            t.shape[1] = a->cols ? a->cols : 1;
            t.shape[2] = t.shape[3] = 1;
            t.nbytes = (size_t)per * 4;
            t.data = (void *)(map->data + off); /* borrowed, read-only */
            t.owned = false;
            if (!sqz_model_add_tensor(m, &t)) return SQZ_ERR_NOMEM;
            off += t.nbytes;
        }
    }

    m->name = model_name(path);
    if (!m->name) return SQZ_ERR_NOMEM;

    char *tok = NULL;
    SQZ_TRY(find_tokenizer(path, tokenizer_path, c.vocab, &tok));
    if (tok) {
        sqz_status s = sqz__llama2c_tokenizer_read(tok, (int32_t)c.vocab, &m->vocab);
        free(tok);
        SQZ_TRY(s);
    }
    return SQZ_OK;
}
