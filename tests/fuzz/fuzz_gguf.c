/* tests/fuzz/fuzz_gguf.c - libFuzzer harness for the GGUF reader.
 *
 * The input is parsed in memory by sqz__gguf_read_mem (the whole reader after the
 * mmap: container, metadata, tensor infos, architecture, tokenizer), then every
 * tensor the reader accepts is read end to end (a data pointer outside the input
 * crashes here) and the model goes through sqz_model_validate. Every failure must
 * leave a message. Seeds: tests/data/hostile/gguf/ and tests/data/gguf/tiny_llama.gguf. */
#include <stdint.h>
#include <stdlib.h>

#include "formats/gguf_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sqz_clear_error();
    sqz_model *m = sqz_model_new();
    if (!m) return 0;
    sqz_status s = sqz__gguf_read_mem("fuzz.gguf", data, size, m);
    if (s == SQZ_OK) {
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            const uint8_t *p = t->data;
            for (size_t k = 0; k < t->nbytes; k++) sink ^= p[k];
        }
        (void)sink;
        s = sqz_model_validate(m);
    }
    if (s != SQZ_OK && sqz_last_error()[0] == 0) abort(); /* every failure must say why */
    sqz_model_free(m);
    return 0;
}
