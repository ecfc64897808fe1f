/* tests/fuzz/fuzz_safetensors.c - libFuzzer harness for the safetensors reader.
 *
 * Each input is written as model.safetensors into a private directory that also holds
 * a valid config.json for a tiny llama (the one in tests/data/hostile/safetensors/), so
 * inputs that pass the header checks go on through name mapping, tied embeddings and
 * sqz_model_validate. Every tensor the reader accepts is read end to end: a data pointer
 * outside the mapping crashes here. Seeds: tests/data/hostile/safetensors/ (run_all.sh) and the
 * valid tests/data/safetensors/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/formats_internal.h"

static const char config_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 8, "
    "\"intermediate_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 1, \"vocab_size\": 16, \"max_position_embeddings\": 32, "
    "\"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": true}";

static char g_file[4200];

static void write_all(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

static char g_dir[4096], g_cfg[4200];

static void cleanup(void) {
    unlink(g_file);
    unlink(g_cfg);
    rmdir(g_dir);
}

static void setup(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/sqz-fuzz-st-XXXXXX", base);
    if (!mkdtemp(g_dir)) abort();
    snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_dir);
    write_all(g_cfg, config_json, sizeof config_json - 1);
    snprintf(g_file, sizeof g_file, "%s/model.safetensors", g_dir);
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_file[0]) setup();
    write_all(g_file, data, size);
    sqz_model *m = sqz_model_new();
    if (!m) return 0;
    sqz_status s = sqz__st_open(g_file, m);
    if (s == SQZ_OK) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            const uint8_t *p = t->data;
            for (size_t k = 0; k < t->nbytes; k++) sink ^= p[k];
        }
        (void)sink;
        (void)sqz_model_validate(m);
    } else if (sqz_last_error()[0] == 0) {
        abort(); /* every failure must say why */
    }
    sqz_model_free(m);
    return 0;
}
