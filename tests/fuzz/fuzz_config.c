/* tests/fuzz/fuzz_config.c - libFuzzer harness for config.json and HF tensor names.
 *
 * The input is read as config.json; whatever is accepted must write back to a config
 * that reads to the same hyperparameters, or be refused by the writer with a reason (a
 * round-trip property, aborts otherwise).
 * The input is also taken as a tensor name for both families: a name that parses must
 * be rebuilt by sqz__hf_name_make into a name that parses to the same (role, layer, param).
 * Seeds: tests/data/hostile/config/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/formats_internal.h"

static void check_config(const uint8_t *data, size_t size) {
    sqz_model *a = sqz_model_new(), *b = sqz_model_new();
    if (!a || !b) abort();
    if (sqz__hf_config_read((const char *)data, size, "config.json", a) == SQZ_OK) {
        /* The writer refuses, with a reason, configs transformers would reject (a hidden size
         * that is not a multiple of the heads, per-layer dimensions, ...) that the reader still
         * accepts; a refusal without a reason is the bug. */
        sqz_clear_error();
        char *text = sqz__hf_config_write(a);
        if (!text) {
            if (!*sqz_last_error()) abort();
            sqz_model_free(a);
            sqz_model_free(b);
            return;
        }
        if (sqz__hf_config_read(text, strlen(text), "written config.json", b) != SQZ_OK) abort();
        const sqz_hparams *x = &a->hp, *y = &b->hp;
        if (strcmp(x->arch, y->arch) != 0 || x->family != y->family || x->n_layers != y->n_layers ||
            x->d_model != y->d_model || x->n_heads != y->n_heads || x->n_kv_heads != y->n_kv_heads ||
            x->head_dim != y->head_dim || x->d_ff != y->d_ff || x->vocab_size != y->vocab_size ||
            x->ctx_len != y->ctx_len || x->n_token_types != y->n_token_types || x->norm_eps != y->norm_eps ||
            x->rope_theta != y->rope_theta || x->rope_layout != y->rope_layout || x->act != y->act ||
            x->tied_embeddings != y->tied_embeddings || x->attn_bias != y->attn_bias ||
            a->vocab.bos != b->vocab.bos || a->vocab.eos != b->vocab.eos)
            abort();
        free(text);
    }
    sqz_model_free(a);
    sqz_model_free(b);
}

static void check_name(const uint8_t *data, size_t size) {
    if (size > 256) return;
    char name[257];
    memcpy(name, data, size);
    name[size] = 0;
    for (int f = SQZ_FAMILY_LLAMA; f <= SQZ_FAMILY_BERT; f++) {
        sqz_role r, r2;
        int32_t l, l2;
        sqz_param p, p2;
        if (sqz__hf_name_parse((sqz_family)f, name, &r, &l, &p) != SQZ__HF_TENSOR) continue;
        char buf[256];
        if (!sqz__hf_name_make((sqz_family)f, r, l, p, buf, sizeof buf)) abort();
        if (sqz__hf_name_parse((sqz_family)f, buf, &r2, &l2, &p2) != SQZ__HF_TENSOR) abort();
        if (r != r2 || l != l2 || p != p2) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_config(data, size);
    check_name(data, size);
    return 0;
}
