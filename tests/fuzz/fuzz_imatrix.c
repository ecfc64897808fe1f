/* tests/fuzz/fuzz_imatrix.c - libFuzzer harness for the reader of llama-imatrix's importance
 * matrices (calib/imatrix_read.c: `sqz compress --imatrix FILE`, GGUF and legacy .dat layouts).
 *
 * Each input goes to sqz__imatrix_parse (the whole reader after the mmap). An accepted file has
 * every entry's values read end to end at the length it claims (an overrun crashes under ASan),
 * each finite and >= 0, every name NUL-terminated; it is then mapped onto a small llama-shaped
 * model (2 blocks, d_model 64, d_ff 172: stories260K's widths) with sqz__imatrix_to_stats, whose
 * accepted result must have every input's width equal to its tensors'. Every refusal leaves a
 * message. Seeds: tests/data/imatrix/ (files llama-imatrix wrote on stories260K). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/calib_internal.h"
#include "sqz/model.h"

static sqz_model *small_model(void) {
    sqz_model *m = sqz_model_new();
    if (!m) abort();
    m->hp.n_layers = 2;
    m->hp.d_model = 64;
    m->hp.n_heads = 8;
    m->hp.n_kv_heads = 4;
    m->hp.head_dim = 8;
    m->hp.d_ff = 172;
    m->hp.vocab_size = 512;
    if (sqz_model_init_layers(m) != SQZ_OK) abort();
    static const struct {
        sqz_role role;
        int64_t out, in;
    } mats[] = {{SQZ_ROLE_ATTN_Q, 64, 64},   {SQZ_ROLE_ATTN_K, 32, 64},   {SQZ_ROLE_ATTN_V, 32, 64},
                {SQZ_ROLE_ATTN_OUT, 64, 64}, {SQZ_ROLE_FFN_GATE, 172, 64}, {SQZ_ROLE_FFN_UP, 172, 64},
                {SQZ_ROLE_FFN_DOWN, 64, 172}};
    static float zero[172 * 64];
    for (int32_t l = 0; l < 2; l++)
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, sqz_role_name(mats[i].role));
            sqz_tensor t = {.name = name, .dtype = SQZ_DTYPE_F32, .ndim = 2, .shape = {mats[i].out, mats[i].in},
                            .role = mats[i].role, .layer = l, .param = SQZ_PARAM_WEIGHT, .data = zero,
                            .nbytes = (size_t)(mats[i].out * mats[i].in) * sizeof(float)};
            if (!sqz_model_add_tensor(m, &t)) abort();
        }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sqz_model *m;
    if (!m) m = small_model();
    sqz_clear_error();
    sqz__imatrix im;
    if (sqz__imatrix_parse("fuzz.imatrix", data, size, &im) != SQZ_OK) {
        if (im.n || im.e || sqz_last_error()[0] == 0) abort();
        return 0;
    }
    for (int64_t i = 0; i < im.n; i++) {
        if (!memchr(im.e[i].name, 0, sizeof im.e[i].name) || im.e[i].n < 1) abort();
        for (int64_t j = 0; j < im.e[i].n; j++)
            if (!(im.e[i].v[j] >= 0.0f) || !isfinite(im.e[i].v[j])) abort();
    }
    sqz_calib_stats *st = NULL;
    sqz_clear_error();
    if (sqz__imatrix_to_stats("fuzz.imatrix", &im, m, &st) != SQZ_OK) {
        if (st || sqz_last_error()[0] == 0) abort();
    } else {
        for (int64_t b = 0; b < st->n_blocks; b++)
            for (int i = 0; i < st->blocks[b].n_inputs; i++) {
                const sqz_calib_input *in = &st->blocks[b].in[i];
                for (int r = 0; r < SQZ_ROLE_COUNT; r++) {
                    if (!(in->roles & SQZ__ROLE_BIT(r))) continue;
                    const sqz_tensor *t = sqz_model_get(m, (sqz_role)r, st->blocks[b].layer, SQZ_PARAM_WEIGHT);
                    if (!t || t->shape[1] != in->st.n_in || !in->st.x2) abort();
                }
            }
        sqz_calib_stats_free(st);
    }
    sqz__imatrix_free(&im);
    return 0;
}
