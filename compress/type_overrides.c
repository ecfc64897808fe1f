/*
 * compress/type_overrides.c - llama-quantize's per-tensor type overrides on top of a whole-model
 * mix: --token-embedding-type TYPE, --output-tensor-type TYPE and --tensor-type PATTERN=TYPE,
 * chosen as llama.cpp's llama_tensor_get_type does (src/llama-quant.cpp):
 *
 *   1. the token embedding takes --token-embedding-type, the output --output-tensor-type, as
 *      given (no fallback);
 *   2. else the first PATTERN found (std::regex_search: anywhere in the name) in the tensor's
 *      GGUF name (blk.N.ROLE.weight, token_embd.weight, output.weight) gives its TYPE, then the
 *      width fallback;
 *   3. else the mix's rules, where a tied token embedding takes --output-tensor-type when given;
 *      the layer index of the attn_v / ffn_down rules is llama.cpp's running count of the tensors
 *      of that role that reached the rules: tensors a pattern chose are not counted.
 *
 * Patterns are PCRE2 (already sqz's tokenizers' regex engine): its syntax is a superset of the
 * ECMAScript grammar std::regex uses by default for what a tensor pattern needs (classes, \d,
 * alternation, anchors, quantifiers), which POSIX regex.h lacks (\d, non-greedy). As
 * llama-quantize does, a PATTERN is lowercased and a TYPE is a GGML type name in any case.
 */
#include <stdlib.h>
#include <string.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "compress/compress_internal.h"
#include "quant/quant_internal.h"

#define MAX_ITEMS 64

struct sqz_type_overrides {
    sqz_dtype token_embd, output; /* SQZ_DTYPE_COUNT: not given */
    int n;
    pcre2_code *re[MAX_ITEMS];
    sqz_dtype type[MAX_ITEMS];
    char text[MAX_ITEMS][128];
};

void sqz_type_overrides_free(sqz_type_overrides *ov) {
    if (!ov) return;
    for (int i = 0; i < ov->n; i++) pcre2_code_free(ov->re[i]);
    free(ov);
}

/* A GGUF block type sqz writes, by its GGML name in any case. */
static sqz_status parse_type(const char *opt, const char *name, sqz_dtype *out) {
    sqz_qformat f;
    SQZ_RETURN_IF(!sqz_dtype_from_name(name, out) || !sqz_qformat_from_dtype(*out, &f) || !sqz_qformat_is_gguf(f),
                  SQZ_ERR_INVALID_ARG, "%s: '%s' is not a type sqz writes (q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, "
                  "q4_k, q5_k, q6_k; a matrix stays float with --keep-float)", opt, name);
    return SQZ_OK;
}

static sqz_status add_item(sqz_type_overrides *ov, const char *item) {
    const char *eq = item ? strrchr(item, '=') : NULL;
    SQZ_RETURN_IF(!eq || eq == item || !eq[1], SQZ_ERR_INVALID_ARG,
                  "--tensor-type '%s': expected PATTERN=TYPE (e.g. attn_v=q8_0, 'blk\\.[0-3]\\.ffn_down=q6_k')",
                  item ? item : "");
    SQZ_RETURN_IF(ov->n >= MAX_ITEMS, SQZ_ERR_INVALID_ARG, "--tensor-type: more than %d patterns", MAX_ITEMS);
    SQZ_RETURN_IF((size_t)(eq - item) >= sizeof ov->text[0], SQZ_ERR_INVALID_ARG,
                  "--tensor-type '%.40s...': the pattern is longer than %zu bytes", item, sizeof ov->text[0] - 1);
    char *pat = ov->text[ov->n];
    for (size_t i = 0; i < (size_t)(eq - item); i++)
        pat[i] = (char)(item[i] >= 'A' && item[i] <= 'Z' ? item[i] - 'A' + 'a' : item[i]);
    pat[eq - item] = 0;
    SQZ_TRY(parse_type("--tensor-type", eq + 1, &ov->type[ov->n]));
    int err = 0;
    PCRE2_SIZE at = 0;
    ov->re[ov->n] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, 0, &err, &at, NULL);
    if (!ov->re[ov->n]) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "--tensor-type '%s': the pattern does not compile at offset %zu: %s",
                         item, (size_t)at, (const char *)msg);
    }
    ov->n++;
    return SQZ_OK;
}

sqz_status sqz_type_overrides_new(const char *token_embd, const char *output, const char *const *items, int n_items,
                                  sqz_type_overrides **out) {
    *out = NULL;
    sqz_type_overrides *ov = sqz__calloc(1, sizeof *ov);
    if (!ov) return SQZ_ERR_NOMEM;
    ov->token_embd = ov->output = SQZ_DTYPE_COUNT;
    sqz_status st = SQZ_OK;
    if (token_embd) st = parse_type("--token-embedding-type", token_embd, &ov->token_embd);
    if (st == SQZ_OK && output) st = parse_type("--output-tensor-type", output, &ov->output);
    for (int i = 0; i < n_items && st == SQZ_OK; i++) st = add_item(ov, items[i]);
    if (st != SQZ_OK) {
        sqz_type_overrides_free(ov);
        return st;
    }
    *out = ov;
    return SQZ_OK;
}

/* The tensor's name as llama.cpp's GGUF files have it. */
static void gguf_name(const sqz_tensor *t, char *buf, size_t cap) {
    if (t->layer >= 0) snprintf(buf, cap, "blk.%d.%s.weight", (int)t->layer, sqz_role_name(t->role));
    else snprintf(buf, cap, "%s.weight", sqz_role_name(t->role));
}

/* The type of the first pattern found in t's name, or SQZ_DTYPE_COUNT. */
static sqz_dtype pattern_type(const sqz_type_overrides *ov, const sqz_tensor *t) {
    if (!ov || !ov->n) return SQZ_DTYPE_COUNT;
    char name[96];
    gguf_name(t, name, sizeof name);
    sqz_dtype d = SQZ_DTYPE_COUNT;
    for (int i = 0; i < ov->n && d == SQZ_DTYPE_COUNT; i++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(ov->re[i], NULL);
        if (md && pcre2_match(ov->re[i], (PCRE2_SPTR)name, strlen(name), 0, 0, md, NULL) >= 0) d = ov->type[i];
        pcre2_match_data_free(md);
    }
    return d;
}

sqz_status sqz__mix_type(const sqz_compress_spec *sp, const sqz_type_overrides *ov, const sqz_model *m,
                         const sqz_tensor *t, sqz_dtype *out, sqz_dtype *wanted) {
    sqz_dtype w_;
    if (!wanted) wanted = &w_;
    const bool imatrix = sp->method->needs != 0;
    if (!sp->mix || !sqz__qmix_quantizes(t)) {
        *out = *wanted = sqz_qmix_type(sp->mix, m, t, imatrix);
        return SQZ_OK;
    }
    if (!ov) {
        *wanted = sqz__qmix_wanted_at(sp->mix, m, t, imatrix, t->layer);
        *out = sqz__qmix_fallback(*wanted, sqz_tensor_row_len(t));
        return SQZ_OK;
    }
    sqz_dtype d = t->role == SQZ_ROLE_TOKEN_EMBD ? ov->token_embd : t->role == SQZ_ROLE_OUTPUT ? ov->output
                                                                                                : SQZ_DTYPE_COUNT;
    if (d != SQZ_DTYPE_COUNT) { /* as given: llama-quantize applies no fallback here */
        const int64_t block = sqz_dtype_info(d)->block_size;
        SQZ_RETURN_IF(t->shape[1] % block, SQZ_ERR_INVALID_ARG, "%s: %s has %lld columns, not a multiple of %s's %lld",
                      t->role == SQZ_ROLE_OUTPUT ? "--output-tensor-type" : "--token-embedding-type", t->name,
                      (long long)t->shape[1], sqz_dtype_name(d), (long long)block);
        *out = *wanted = d;
        return SQZ_OK;
    }
    if ((d = pattern_type(ov, t)) != SQZ_DTYPE_COUNT) {
        *out = sqz__qmix_fallback(*wanted = d, sqz_tensor_row_len(t));
        return SQZ_OK;
    }
    if (t->role == SQZ_ROLE_TOKEN_EMBD && m->hp.tied_embeddings && ov->output != SQZ_DTYPE_COUNT) {
        *out = sqz__qmix_fallback(*wanted = ov->output, t->shape[1]);
        return SQZ_OK;
    }
    /* llama.cpp's running index: the tensors of this role in earlier blocks that no pattern chose */
    int64_t i = 0;
    for (int32_t l = 0; t->layer > 0 && l < t->layer; l++) {
        const sqz_tensor *e = sqz_model_get(m, t->role, l, SQZ_PARAM_WEIGHT);
        if (e && sqz__qmix_quantizes(e) && pattern_type(ov, e) == SQZ_DTYPE_COUNT) i++;
    }
    *wanted = sqz__qmix_wanted_at(sp->mix, m, t, imatrix, t->layer >= 0 ? i : t->layer);
    *out = sqz__qmix_fallback(*wanted, sqz_tensor_row_len(t));
    return SQZ_OK;
}
