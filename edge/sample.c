/*
 * edge/sample.c - choosing the next token as sqz's runtime/generate.c does (same random
 * stream for the same seed): greedy at temperature 0 (the first maximum), else softmax at
 * the temperature and nucleus sampling (Holtzman et al. 2019) with xorshift64*.
 */
#include <math.h>

#include "edge/edge_internal.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static int32_t argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* (p, id) descending by p, then ascending by id: a total order, so heapsort gives qsort's result */
static int before(const float *p, const int32_t *id, uint32_t a, uint32_t b) {
    return p[a] != p[b] ? p[a] > p[b] : id[a] < id[b];
}
static void swap(float *p, int32_t *id, uint32_t a, uint32_t b) {
    float t = p[a]; p[a] = p[b]; p[b] = t;
    int32_t u = id[a]; id[a] = id[b]; id[b] = u;
}
static void sift(float *p, int32_t *id, uint32_t i, uint32_t n) {
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && before(p, id, c, c + 1)) c++;
        if (!before(p, id, i, c)) return;
        swap(p, id, i, c);
        i = c;
    }
}
/* heapsort with "before" as the order: ascending in it, i.e. the most probable first */
static void sort_desc(float *p, int32_t *id, uint32_t n) {
    for (uint32_t i = n / 2; i-- > 0;) sift(p, id, i, n);
    for (uint32_t e = n; e-- > 1;) {
        swap(p, id, 0, e);
        sift(p, id, 0, e);
    }
}

int32_t sqze_sample(sqze_model *m, float *logits, float temperature, float top_p, uint64_t *rng) {
    uint32_t vocab = m->hp.vocab_size;
    if (!(temperature > 0.0f)) return argmax(logits, vocab);
    float mx = logits[argmax(logits, vocab)];
    double sum = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        logits[i] = expf((logits[i] - mx) / temperature);
        sum += logits[i];
    }
    for (uint32_t i = 0; i < vocab; i++) logits[i] = (float)(logits[i] / sum);
    float r = (float)(rng_next(rng) >> 40) / 16777216.0f;
    if (top_p > 0.0f && top_p < 1.0f) {
        float cutoff = (1.0f - top_p) / (float)(vocab > 1 ? vocab - 1 : 1);
        uint32_t n = 0;
        for (uint32_t i = 0; i < vocab; i++) {
            if (logits[i] >= cutoff) {
                m->probs[n] = logits[i];
                m->prob_ids[n++] = (int32_t)i;
            }
        }
        if (n == 0) return argmax(logits, vocab); /* non-finite logits: nothing passed the cutoff */
        sort_desc(m->probs, m->prob_ids, n);
        double cum = 0;
        uint32_t last = n - 1;
        for (uint32_t i = 0; i < n; i++) {
            cum += m->probs[i];
            if (cum > top_p) { last = i; break; }
        }
        double target = r * cum, acc = 0;
        int32_t pick = m->prob_ids[last];
        for (uint32_t i = 0; i <= last; i++) {
            acc += m->probs[i];
            if (target < acc) { pick = m->prob_ids[i]; break; }
        }
        return pick;
    }
    double acc = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        acc += logits[i];
        if (r < acc) return (int32_t)i;
    }
    return (int32_t)(vocab - 1);
}
