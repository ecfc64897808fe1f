/*
 * runtime/generate.c - sampling and the generation loop (prefill the prompt, then one
 * token at a time over the key/value cache), as llama2.c's generate() does.
 */
#include <math.h>
#include <stdlib.h>

#include "runtime/runtime_internal.h"

/* xorshift64* (Vigna 2016): small, fast, good enough for sampling. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, 1) with 24 bits. */
static float rng_f32(uint64_t *s) { return (float)(rng_next(s) >> 40) / 16777216.0f; }

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++) {
        if (x[i] > x[best]) best = i;
    }
    return (int32_t)best;
}

typedef struct {
    float p;
    int32_t id;
} prob_id;

static int cmp_desc(const void *a, const void *b) {
    float pa = ((const prob_id *)a)->p, pb = ((const prob_id *)b)->p;
    if (pa != pb) return pa < pb ? 1 : -1;
    return ((const prob_id *)a)->id - ((const prob_id *)b)->id;
}

int32_t sqz_sample(float *logits, int64_t vocab, const sqz_sample_opts *o, uint64_t *rng) {
    if (!o || !(o->temperature > 0.0f)) return argmax(logits, vocab);
    float mx = logits[argmax(logits, vocab)];
    double sum = 0;
    for (int64_t i = 0; i < vocab; i++) {
        logits[i] = expf((logits[i] - mx) / o->temperature);
        sum += logits[i];
    }
    for (int64_t i = 0; i < vocab; i++) logits[i] = (float)(logits[i] / sum);
    float r = rng_f32(rng);
    if (o->top_p > 0.0f && o->top_p < 1.0f) {
        /* Nucleus sampling (Holtzman et al. 2019): the smallest set of most likely tokens whose
         * mass reaches top_p. Candidates below (1 - top_p) / (vocab - 1) cannot be in it. */
        prob_id *c = malloc((size_t)vocab * sizeof *c);
        if (c) {
            float cutoff = (1.0f - o->top_p) / (float)(vocab > 1 ? vocab - 1 : 1);
            int64_t n = 0;
            for (int64_t i = 0; i < vocab; i++) {
                if (logits[i] >= cutoff) c[n++] = (prob_id){logits[i], (int32_t)i};
            }
            qsort(c, (size_t)n, sizeof *c, cmp_desc);
            double cum = 0;
            int64_t last = n - 1;
            for (int64_t i = 0; i < n; i++) {
                cum += c[i].p;
                if (cum > o->top_p) { last = i; break; }
            }
            double target = r * cum, acc = 0;
            int32_t pick = c[last].id;
            for (int64_t i = 0; i <= last; i++) {
                acc += c[i].p;
                if (target < acc) { pick = c[i].id; break; }
            }
            free(c);
            return pick;
        }
    }
    double acc = 0;
    for (int64_t i = 0; i < vocab; i++) {
        acc += logits[i];
        if (r < acc) return (int32_t)i;
    }
    return (int32_t)(vocab - 1);
}

sqz_status sqz_generate(sqz_session *s, const int32_t *prompt, int64_t n_prompt, int64_t n_new, int32_t eos,
                        const sqz_sample_opts *o, sqz_token_fn on_token, void *user, int32_t *out, int64_t *n_out) {
    *n_out = 0;
    SQZ_RETURN_IF(n_prompt < 1 || n_new < 0, SQZ_ERR_INVALID_ARG, "generate: need a prompt of at least one token");
    SQZ_RETURN_IF(n_prompt > s->max_tokens || n_new > s->max_tokens - n_prompt, SQZ_ERR_INVALID_ARG,
                  "generate: %lld prompt + %lld new tokens exceed the session's %lld positions", (long long)n_prompt,
                  (long long)n_new, (long long)s->max_tokens);
    int64_t vocab = s->m->hp.vocab_size;
    float *logits = sqz__malloc((size_t)vocab * sizeof(float));
    if (!logits) return SQZ_ERR_NOMEM;
    uint64_t rng = o && o->seed ? o->seed : 0x9E3779B97F4A7C15ULL;
    sqz_status st = sqz_forward(s, prompt, n_prompt, 0, n_prompt - 1, logits);
    int64_t pos = n_prompt;
    while (st == SQZ_OK && *n_out < n_new) {
        int32_t next = sqz_sample(logits, vocab, o, &rng);
        if (next == eos) break;
        out[(*n_out)++] = next;
        if (on_token && !on_token(user, next)) break;
        if (*n_out == n_new) break;
        st = sqz_forward(s, &next, 1, pos, 0, logits);
        pos++;
    }
    free(logits);
    return st;
}
