/* tests/fuzz/fuzz_st_layout.c - libFuzzer harness for the quantized HF layouts' readers
 * (formats/st_ctensors_read.c with sparse-24-bitmask, st_gptq.c, st_qpack.c; st_layout.c's
 * detection from config.json).
 *
 * An input is config.json, a NUL byte, then model.safetensors: both are fuzzed, so the
 * quantization_config (quant_method, formats, config groups, sparsity_config) varies with the
 * tensors. Every tensor the reader accepts is read end to end, its qparams' scales, zero points
 * and g_idx included, and the model is validated; a failure must leave a message. Seeds:
 * tests/data/st_layout/ (make_st_layout_seeds.py: a one-block llama written by sqz in every
 * layout, W8A8 and its sparse-24-bitmask form). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/formats_internal.h"
#include "sqz/qparams.h"

static char g_dir[4096], g_cfg[4200], g_file[4200];

static void write_all(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

static void cleanup(void) {
    unlink(g_file);
    unlink(g_cfg);
    rmdir(g_dir);
}

static void setup(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/sqz-fuzz-stl-XXXXXX", base);
    if (!mkdtemp(g_dir)) abort();
    snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_dir);
    snprintf(g_file, sizeof g_file, "%s/model.safetensors", g_dir);
    atexit(cleanup);
}

static uint8_t touch(const void *p, size_t n) {
    uint8_t x = 0;
    for (size_t k = 0; k < n; k++) x ^= ((const uint8_t *)p)[k];
    return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    if (!g_dir[0]) setup();
    write_all(g_cfg, data, (size_t)(nul - data));
    write_all(g_file, nul + 1, size - (size_t)(nul - data) - 1);
    sqz_model *m = sqz_model_new();
    if (!m) return 0;
    sqz_status s = sqz__st_open(g_file, m);
    if (s == SQZ_OK) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            sink ^= touch(t->data, t->nbytes);
            const sqz_qparams *qp = t->qp;
            if (!qp) continue;
            const size_t ns = (size_t)(qp->n_out * qp->n_groups);
            sink ^= touch(qp->scales, ns * sizeof(float));
            if (qp->zeros) sink ^= touch(qp->zeros, ns);
            if (qp->g_idx) sink ^= touch(qp->g_idx, (size_t)qp->n_in * sizeof(int32_t));
            if (qp->in_scale) sink ^= touch(qp->in_scale, (size_t)qp->n_in * sizeof(float));
        }
        (void)sink;
        (void)sqz_model_validate(m);
    } else if (sqz_last_error()[0] == 0) {
        abort(); /* every failure must say why */
    }
    sqz_model_free(m);
    return 0;
}
