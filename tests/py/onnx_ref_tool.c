/* tests/py/onnx_ref_tool.c - sqz's own forward pass and greedy generation for the ONNX export test
 * (test_onnx_export.py), through the public API only.
 *
 *   onnx_ref_tool MODEL IDS.i32 LOGITS.f32 N_NEW TOKENS.i32
 *       IDS: the prompt (little-endian int32); LOGITS: the logits of every prompt position
 *       (n * vocab f32, one sqz_forward at pos 0); TOKENS: sqz_generate's greedy tokens after the
 *       prompt, at most N_NEW, stopping at the model's EOS (not stored), as `sqz generate` does.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sqz/sqz.h"

static int fail(const char *what) {
    fprintf(stderr, "onnx_ref_tool: %s: %s\n", what, sqz_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: onnx_ref_tool MODEL IDS.i32 LOGITS.f32 N_NEW TOKENS.i32\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) return 1;
    int32_t ids[4096];
    int64_t n = (int64_t)fread(ids, sizeof ids[0], 4096, f);
    fclose(f);
    const int64_t n_new = atoll(argv[4]);
    sqz_model *m = NULL;
    if (sqz_model_open(argv[1], NULL, &m) != SQZ_OK) return fail(argv[1]);
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = n + n_new + 1;
    sqz_session *s = NULL;
    if (sqz_session_new(m, &so, &s) != SQZ_OK) return fail("session");
    const int64_t V = m->hp.vocab_size;
    float *logits = malloc((size_t)(n * V) * sizeof(float));
    int32_t *out = malloc((size_t)(n_new + 1) * sizeof(int32_t));
    int64_t n_out = 0;
    if (!logits || !out) return 1;
    if (sqz_forward(s, ids, n, 0, 0, logits) != SQZ_OK) return fail("forward");
    sqz_sample_opts greedy = {0};
    if (sqz_generate(s, ids, n, n_new, m->vocab.eos, &greedy, NULL, NULL, out, &n_out) != SQZ_OK) return fail("generate");
    FILE *lf = fopen(argv[3], "wb"), *tf = fopen(argv[5], "wb");
    if (!lf || !tf) return 1;
    fwrite(logits, sizeof(float), (size_t)(n * V), lf);
    fwrite(out, sizeof(int32_t), (size_t)n_out, tf);
    fclose(lf);
    fclose(tf);
    free(logits);
    free(out);
    sqz_session_free(s);
    sqz_model_free(m);
    return 0;
}
