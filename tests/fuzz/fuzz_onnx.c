/* tests/fuzz/fuzz_onnx.c - libFuzzer harness for the ONNX reader (formats/onnx_read_pb.c, onnx_read.c,
 * onnx_read_q.c): the protobuf decoder, the initializers and nodes, every quantized form.
 *
 * An input is a directory packed in one buffer: a u32 little-endian length L, L bytes of model.onnx, and the
 * rest as model.onnx.data. The directory also holds a fixed config.json for a tiny llama (d_model 32, one
 * layer, 2 heads of 16, 1 KV head, d_ff 32, vocab 32, 16 positions, tied), the model the seeds were exported
 * from (tests/data/onnx/, make_onnx_seeds.py: f32, f16, q8_0, q4_0, q4_1, q5_0, int4 sym and asym, int8, fp8,
 * fp8_dynamic; MatMulNBits and QDQ). Every tensor the reader accepts is read end to end and dequantized: a data pointer outside
 * a mapping or a bad qparams crashes here; every failure must say why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/formats_internal.h"

static const char config_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32, "
    "\"intermediate_size\": 32, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 1, \"vocab_size\": 32, \"max_position_embeddings\": 16, "
    "\"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": true}";

static char g_dir[4096], g_cfg[4200], g_onnx[4200], g_data[4200];

static void write_all(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

static void cleanup(void) {
    unlink(g_onnx);
    unlink(g_data);
    unlink(g_cfg);
    rmdir(g_dir);
}

static void setup(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/sqz-fuzz-onnx-XXXXXX", base);
    if (!mkdtemp(g_dir)) abort();
    snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_dir);
    snprintf(g_onnx, sizeof g_onnx, "%s/model.onnx", g_dir);
    snprintf(g_data, sizeof g_data, "%s/model.onnx.data", g_dir);
    write_all(g_cfg, config_json, sizeof config_json - 1);
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_dir[0]) setup();
    if (size < 4) return 0;
    size_t n = sqz__rd_u32(data);
    if (n > size - 4) n = size - 4;
    write_all(g_onnx, data + 4, n);
    write_all(g_data, data + 4 + n, size - 4 - n);
    sqz_model *m = sqz_model_new();
    if (!m) return 0;
    sqz_status s = sqz__onnx_open(g_dir, m);
    if (s == SQZ_OK) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            const uint8_t *p = t->data;
            for (size_t k = 0; k < t->nbytes; k++) sink ^= p[k];
            const int64_t ne = sqz_tensor_nelements(t);
            float *f = malloc((size_t)(ne > 0 ? ne : 1) * sizeof *f);
            if (f && sqz_tensor_to_f32(t, f) != SQZ_OK && sqz_last_error()[0] == 0) abort();
            free(f);
        }
        (void)sink;
    } else if (sqz_last_error()[0] == 0) {
        abort(); /* every failure must say why */
    }
    sqz_model_free(m);
    return 0;
}
