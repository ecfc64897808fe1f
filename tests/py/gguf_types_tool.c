/* tests/py/gguf_types_tool.c - drives the dtype table and the K-quant methods for the Python
 * oracle test (test_gguf_types.py).
 *
 *   gguf_types_tool dequant DTYPE IN.bin N OUT.f32
 *       N elements of DTYPE (raw GGUF blocks in IN) to float with the table's to_f32.
 *   gguf_types_tool quant DTYPE IN.f32 OUT.bin
 *       the table's reference quantizer (from_f32: llama.cpp's quantize_row_*_ref).
 *   gguf_types_tool imatrix FMT W.f32 IMAT.f32 N_ROWS N_COLS OUT.bin
 *       the quantization method "imatrix" of W (N_ROWS, N_COLS) with E[x^2] = IMAT onto
 *       format FMT (q2_k ... q6_k: llama.cpp's quantize_*_K with quant_weights; iq4_nl / iq4_xs:
 *       quantize_iq4_nl / _xs with quant_weights; iq3_s: quantize_iq3_s with quant_weights).
 *   gguf_types_tool rtn FMT W.f32 N_ROWS N_COLS OUT.bin
 *       the quantization method "rtn" onto format FMT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/quant.h"
#include "sqz/sqz.h"

static void *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = p ? fread(p, 1, (size_t)sz, f) : 0;
    fclose(f);
    return p;
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    size_t w = fwrite(p, 1, n, f);
    fclose(f);
    return w != n;
}

static int fail(void) {
    fprintf(stderr, "gguf_types_tool: %s\n", sqz_last_error());
    return 2;
}

static int cmd_convert(const char *type, const char *in, long long n, const char *out, bool to_f32) {
    sqz_dtype t;
    if (!sqz_dtype_from_name(type, &t)) { fprintf(stderr, "gguf_types_tool: unknown dtype %s\n", type); return 1; }
    size_t have, nb;
    void *src = read_all(in, &have);
    if (!to_f32) n = (long long)(have / sizeof(float));
    if (!src || !sqz_dtype_nbytes(t, n, &nb)) return 1;
    if (to_f32 && have != nb) { fprintf(stderr, "gguf_types_tool: %zu bytes, expected %zu\n", have, nb); return 1; }
    const size_t out_bytes = to_f32 ? (size_t)n * sizeof(float) : nb;
    void *dst = malloc(out_bytes ? out_bytes : 1);
    sqz_status s = to_f32 ? sqz_convert(t, src, SQZ_DTYPE_F32, dst, n, NULL)
                          : sqz_convert(SQZ_DTYPE_F32, src, t, dst, n, NULL);
    if (s != SQZ_OK) return fail();
    int rc = write_file(out, dst, out_bytes);
    free(src);
    free(dst);
    return rc;
}

static int cmd_method(const char *method, const char *fmt, const char *wp, const char *ip, long rows, long cols,
                      const char *out) {
    size_t nw, ni = 0;
    float *w = read_all(wp, &nw), *im = ip ? read_all(ip, &ni) : NULL;
    if (!w || nw != (size_t)(rows * cols) * 4 || (ip && ni != (size_t)cols * 4)) return 1;
    sqz_quant_opts o = sqz_quant_default_opts();
    if (!sqz_qformat_from_name(fmt, &o.target.fmt)) { fprintf(stderr, "gguf_types_tool: format %s\n", fmt); return 1; }
    sqz_qstats st = {.n_in = cols, .x2 = im};
    sqz_qlinear lin = {.w = w, .n_out = rows, .name = "w"};
    sqz_qmatrix q = {0};
    const sqz_qmethod *m = sqz_qmethod_find(method);
    if (!m || m->run(&lin, 1, &st, &o, &q, NULL) != SQZ_OK) return fail();
    int rc = write_file(out, q.data, q.nbytes);
    sqz_qmatrix_free(&q);
    free(w);
    free(im);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "dequant") == 0) return cmd_convert(argv[2], argv[3], atoll(argv[4]), argv[5], true);
    if (argc == 5 && strcmp(argv[1], "quant") == 0) return cmd_convert(argv[2], argv[3], 0, argv[4], false);
    if (argc == 8 && strcmp(argv[1], "imatrix") == 0)
        return cmd_method("imatrix", argv[2], argv[3], argv[4], atol(argv[5]), atol(argv[6]), argv[7]);
    if (argc == 7 && strcmp(argv[1], "rtn") == 0)
        return cmd_method("rtn", argv[2], argv[3], NULL, atol(argv[4]), atol(argv[5]), argv[6]);
    fprintf(stderr, "usage: gguf_types_tool dequant|quant|imatrix|rtn ... (see the source)\n");
    return 1;
}
