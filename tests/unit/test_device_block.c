/* tests/unit/test_device_block.c - the llama block with its activations on a device backend
 * (runtime/device_block.c) on the CPU's slots behind the device interface (cpu-offload), on the
 * real models: stories260K (llama2.c, interleaved rotary), tinystories-656K (HF, rotate_half) and
 * SmolLM2-135M (Q4_1 GGUF, grouped-query 9/3 heads), and the BERT block on all-MiniLM-L6-v2
 * (post-LN, GELU, bidirectional attention): its token states.
 *   - a window from position 0 gives bit for bit the logits of the host block on the same backend
 *     (SQZ_HOST_FORWARD=1: norms, rotary, attention on the host, products on the device), and a
 *     window continuing it (pos > 0, run by the host block from the keys / values the device block
 *     left in the host cache) does too;
 *   - with a hook: the same events in the same order with the same rows, and every LINEAR_IN and
 *     BLOCK_OUT event of the device block offers the same rows in the backend's memory (x_dev);
 *   - the logits agree with a plain CPU session within 1e-4 of the largest |logit| (the products
 *     of stored types differ in float order between the CPU's kernels and f32 products);
 *   - sqz_session_prefetch of every layer before its block (the copies beside the computation,
 *     cpu-offload's memcpy) puts the layer's weights on the device (its memory in use grows) and
 *     leaves the logits bit for bit as they were. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/backend.h"
#include "sqz/model.h"
#include "sqz/runtime.h"
#include "test_util.h"

typedef struct rec {
    uint64_t hash;     /* FNV-1a over every event's header and rows */
    int events, with_dev, dev_mismatch;
    const sqz_backend *be;
} rec;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static sqz_status hook(void *user, const sqz_hook_event *e) {
    rec *r = user;
    const int64_t hdr[] = {e->point, e->layer, e->roles, e->n_tokens, e->dim, e->pos};
    const size_t bytes = (size_t)e->n_tokens * (size_t)e->dim * sizeof(float);
    r->hash = fnv(fnv(r->hash, hdr, sizeof hdr), e->x, bytes);
    r->events++;
    if (e->x_dev) {
        r->with_dev++;
        /* cpu-offload's memory is host memory: the device rows can be read here */
        if (e->backend != r->be || memcmp(e->x, e->x_dev, bytes) != 0) r->dev_mismatch++;
    }
    return SQZ_OK;
}

typedef struct run {
    float *logits; /* (6 + 2) rows: the window's last 4, then the continuation's 2 */
    rec r;
    bool prefetch;      /* in: block by block, sqz_session_prefetch before each */
    int64_t prefetched; /* out: device bytes layer 0's prefetch added */
} run;

/* Window tokens [0, 6) then [6, 8) on a session of backend be (NULL: the CPU), host_fwd choosing the
 * host block; the logits of rows 2..5 and 6..7. */
static void forward(const sqz_model *m, sqz_backend *be, bool host_fwd, bool hooked, const int32_t *ids, run *out) {
    const int64_t V = m->hp.vocab_size;
    if (host_fwd) setenv("SQZ_HOST_FORWARD", "1", 1);
    else unsetenv("SQZ_HOST_FORWARD");
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = 16;
    o.backend = be;
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    memset(&out->r, 0, sizeof out->r);
    out->r.hash = 0xcbf29ce484222325ull;
    out->r.be = be;
    if (hooked) sqz_session_set_hook(s, hook, &out->r);
    out->logits = malloc(sizeof(float) * 6 * (size_t)V);
    if (out->prefetch) { /* block by block, each layer's weights sent ahead */
        float *x = malloc(sizeof(float) * 6 * (size_t)m->hp.d_model);
        SQZ_ASSERT_OK(sqz_session_embed(s, ids, NULL, 6, 0, x));
        for (int32_t l = 0; l < (int32_t)m->hp.n_layers; l++) {
            sqz_backend_mem before, after;
            sqz_backend_mem_stats(be, &before);
            SQZ_ASSERT_OK(sqz_session_prefetch(s, l));
            sqz_backend_mem_stats(be, &after);
            if (l == 0) out->prefetched = (int64_t)after.in_use - (int64_t)before.in_use;
            SQZ_ASSERT_OK(sqz_session_block(s, l, x, 6, 0));
        }
        SQZ_ASSERT_OK(sqz_session_head(s, x, 6, 2, out->logits));
        free(x);
    } else {
        SQZ_ASSERT_OK(sqz_forward(s, ids, 6, 0, 2, out->logits));
    }
    SQZ_ASSERT_OK(sqz_forward(s, ids + 6, 2, 6, 0, out->logits + 4 * V));
    sqz_session_free(s);
    unsetenv("SQZ_HOST_FORWARD");
}

static void check_model(const char *path) {
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(path, NULL, &m));
    const int64_t V = m->hp.vocab_size;
    int32_t ids[8];
    for (int i = 0; i < 8; i++) ids[i] = (int32_t)((i * 7919 + 13) % V);
    sqz_backend *off = NULL;
    SQZ_ASSERT_OK(sqz_backend_cpu_offload(0, &off));
    run dev = {0}, host = {0}, cpu = {0}, dev_h = {0}, host_h = {0}, pre = {.prefetch = true};
    forward(m, off, false, false, ids, &pre);
    forward(m, off, false, false, ids, &dev);
    forward(m, off, true, false, ids, &host);
    forward(m, NULL, false, false, ids, &cpu);
    forward(m, off, false, true, ids, &dev_h);
    forward(m, off, true, true, ids, &host_h);
    const size_t lb = sizeof(float) * 6 * (size_t)V;
    assert_memory_equal(dev.logits, host.logits, lb);
    assert_memory_equal(dev_h.logits, dev.logits, lb);
    assert_memory_equal(pre.logits, dev.logits, lb);
    assert_true(pre.prefetched > 0);
    double mx = 0, d = 0;
    for (int64_t i = 0; i < 6 * V; i++) {
        mx = fmax(mx, fabs(cpu.logits[i]));
        d = fmax(d, fabs((double)dev.logits[i] - cpu.logits[i]));
    }
    print_message("%s: device block == host block (window and continuation); hook events %d (%d with device "
                  "rows); against the CPU session: max |diff| %.3g of max |logit| %.3g; prefetch of layer 0: "
                  "%lld device bytes, the same logits\n",
                  m->source_path, dev_h.r.events, dev_h.r.with_dev, d, mx, (long long)pre.prefetched);
    assert_int_equal(dev_h.r.events, host_h.r.events);
    assert_true(dev_h.r.hash == host_h.r.hash);
    /* LINEAR_IN of q|k|v, o, gate|up, down and BLOCK_OUT of every block of the window */
    assert_int_equal(dev_h.r.with_dev, 5 * (int)m->hp.n_layers);
    assert_int_equal(dev_h.r.dev_mismatch, 0);
    assert_int_equal(host_h.r.with_dev, 0);
    assert_true(d <= 1e-4 * mx);
    run *all[] = {&dev, &host, &cpu, &dev_h, &host_h, &pre};
    for (int i = 0; i < 6; i++) free(all[i]->logits);
    sqz_backend_free(off);
    sqz_model_free(m);
}

/* The encoder: token states of one sequence, device block against host block, hooked and not. */
static void encode(const sqz_model *m, sqz_backend *be, bool host_fwd, bool hooked, const int32_t *ids, int64_t n,
                   float *hidden, rec *r) {
    if (host_fwd) setenv("SQZ_HOST_FORWARD", "1", 1);
    else unsetenv("SQZ_HOST_FORWARD");
    sqz_session_opts o = sqz_session_default_opts();
    o.max_tokens = 32;
    o.backend = be;
    sqz_session *s = NULL;
    SQZ_ASSERT_OK(sqz_session_new(m, &o, &s));
    memset(r, 0, sizeof *r);
    r->hash = 0xcbf29ce484222325ull;
    r->be = be;
    if (hooked) sqz_session_set_hook(s, hook, r);
    SQZ_ASSERT_OK(sqz_encode(s, ids, NULL, n, hidden));
    sqz_session_free(s);
    unsetenv("SQZ_HOST_FORWARD");
}

static void test_minilm(void **state) {
    (void)state;
    const char *p = sqz_test_minilm();
    SQZ_SKIP_UNLESS(p);
    sqz_model *m = NULL;
    SQZ_ASSERT_OK(sqz_model_open(p, NULL, &m));
    enum { N = 11 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(101 + (i * 4051) % (m->hp.vocab_size - 200));
    const size_t hb = sizeof(float) * N * (size_t)m->hp.d_model;
    float *a = malloc(hb), *b = malloc(hb), *c = malloc(hb);
    sqz_backend *off = NULL;
    SQZ_ASSERT_OK(sqz_backend_cpu_offload(0, &off));
    rec ra, rb, rc;
    encode(m, off, false, true, ids, N, a, &ra);
    encode(m, off, true, true, ids, N, b, &rb);
    encode(m, off, false, false, ids, N, c, &rc);
    print_message("%s: device block == host block; hook events %d (%d with device rows)\n", p, ra.events,
                  ra.with_dev);
    assert_memory_equal(a, b, hb);
    assert_memory_equal(a, c, hb);
    assert_int_equal(ra.events, rb.events);
    assert_true(ra.hash == rb.hash);
    /* q|k|v, o, up, down and BLOCK_OUT of every block */
    assert_int_equal(ra.with_dev, 5 * (int)m->hp.n_layers);
    assert_int_equal(ra.dev_mismatch, 0);
    free(a);
    free(b);
    free(c);
    sqz_backend_free(off);
    sqz_model_free(m);
}

static void test_stories260k(void **state) {
    (void)state;
    const char *p = sqz_test_data("models/stories260K/stories260K.bin");
    SQZ_SKIP_UNLESS(p);
    check_model(p);
}

static void test_tinystories(void **state) {
    (void)state;
    const char *p = sqz_test_data("models/tinystories-656K");
    SQZ_SKIP_UNLESS(p);
    check_model(p);
}

static void test_smollm2(void **state) {
    (void)state;
    const char *p = sqz_test_smollm2();
    SQZ_SKIP_UNLESS(p);
    check_model(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_tinystories),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_minilm),
    };
    return sqz_test_run(tests, NULL, NULL);
}
