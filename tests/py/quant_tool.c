/* tests/py/quant_tool.c - drives quant/ for the Python oracle test (test_quant_oracle.py).
 *
 *   quant_tool hist IN.f32 OUT.bin
 *       |x| histogram of the floats in IN; writes int32 n_bins, f64 width, f64 counts[n_bins],
 *       f32 thresholds (minmax, percentile 99.99, kl).
 *   quant_tool imatrix W.f32 IMAT.f32 N_ROWS N_COLS q4_0|q4_1 OUT.bin
 *       sqz_quant_imatrix of W (N_ROWS, N_COLS) with E[x^2] = IMAT; writes the blocks.
 *   quant_tool gptq-gguf MODEL OUT.gguf OUT_DIR
 *       real activations of MODEL (wiki.test.raw, layer 0) -> GPTQ Q4_0 on q|k|v and gate|up,
 *       GPTQ Q4_1 on o and down (when they fit); attached and saved as GGUF; for every
 *       quantized tensor OUT_DIR/<name>.f32 holds sqz's dequantized values (the values GPTQ
 *       fed back; NAME is the GGUF name blk.0.<role>.weight). Prints "tensor NAME TYPE N_OUT N_IN" lines.
 *       Use models whose q/k rows need no rotary permutation for GGUF (llama2.c, GGUF).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqz/sqz.h"
#include "sqz/quant.h"

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = p ? fread(p, 4, (size_t)sz / 4, f) : 0;
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

static int fail(sqz_status s) {
    fprintf(stderr, "quant_tool: %s\n", sqz_last_error());
    return s == SQZ_OK ? 1 : 2;
}

static int cmd_hist(const char *in, const char *out) {
    size_t n;
    float *x = read_f32(in, &n);
    if (!x) return 1;
    sqz_act_hist h;
    sqz_act_hist_init(&h);
    /* in two batches so that the range may grow */
    sqz_status s = sqz_act_hist_add(&h, x, (int64_t)(n / 3));
    if (s == SQZ_OK) s = sqz_act_hist_add(&h, x + n / 3, (int64_t)(n - n / 3));
    float t[3];
    if (s == SQZ_OK) s = sqz_act_threshold(&h, SQZ_ACT_CALIB_MINMAX, 0, &t[0]);
    if (s == SQZ_OK) s = sqz_act_threshold(&h, SQZ_ACT_CALIB_PERCENTILE, 99.99, &t[1]);
    if (s == SQZ_OK) s = sqz_act_threshold(&h, SQZ_ACT_CALIB_KL, 0, &t[2]);
    if (s != SQZ_OK) return fail(s);
    FILE *f = fopen(out, "wb");
    if (!f) return 1;
    int32_t nb = h.n_bins;
    fwrite(&nb, 4, 1, f);
    fwrite(&h.width, 8, 1, f);
    fwrite(h.counts, 8, (size_t)nb, f);
    fwrite(t, 4, 3, f);
    fclose(f);
    sqz_act_hist_free(&h);
    free(x);
    return 0;
}

static int cmd_imatrix(const char *wp, const char *ip, long rows, long cols, const char *type, const char *out) {
    size_t nw, ni;
    float *w = read_f32(wp, &nw), *im = read_f32(ip, &ni);
    if (!w || !im || nw != (size_t)(rows * cols) || ni != (size_t)cols) return 1;
    sqz_quant_opts o = sqz_quant_default_opts();
    o.target.fmt = strcmp(type, "q4_1") == 0 ? SQZ_QFMT_Q4_1 : SQZ_QFMT_Q4_0;
    sqz_qstats st = {.n_in = cols, .x2 = im};
    sqz_qlinear lin = {.w = w, .n_out = rows, .name = "w"};
    sqz_qmatrix q = {0};
    sqz_status s = sqz_quant_imatrix(&lin, 1, &st, &o, &q, NULL);
    if (s != SQZ_OK) return fail(s);
    int rc = write_file(out, q.data, q.nbytes);
    sqz_qmatrix_free(&q);
    free(w);
    free(im);
    return rc;
}

typedef struct capture {
    int64_t dim[4], n[4], cap;
    float *x[4];
} capture;

static sqz_status hook(void *user, const sqz_hook_event *e) {
    capture *c = user;
    if (e->point != SQZ_HOOK_LINEAR_IN || e->layer != 0) return SQZ_OK;
    const int g = (e->roles & (1u << SQZ_ROLE_ATTN_Q)) ? 0
                  : (e->roles & (1u << SQZ_ROLE_ATTN_OUT)) ? 1
                  : (e->roles & (1u << SQZ_ROLE_FFN_DOWN)) ? 3
                                                           : 2;
    if (!c->x[g]) {
        c->dim[g] = e->dim;
        c->x[g] = malloc((size_t)(c->cap * e->dim) * sizeof(float));
        if (!c->x[g]) return SQZ_ERR_NOMEM;
    }
    if (c->n[g] + e->n_tokens > c->cap) return SQZ_ERR_INVALID_ARG;
    memcpy(c->x[g] + c->n[g] * e->dim, e->x, (size_t)(e->n_tokens * e->dim) * sizeof(float));
    c->n[g] += e->n_tokens;
    return SQZ_OK;
}

static int cmd_gptq_gguf(const char *model, const char *out, const char *dir) {
    sqz_model *m;
    sqz_status s = sqz_model_open(model, NULL, &m);
    if (s != SQZ_OK) return fail(s);
    const char *text = getenv("SQZ_WIKI");
    FILE *f = text ? fopen(text, "rb") : NULL;
    if (!f) { fprintf(stderr, "quant_tool: set SQZ_WIKI to wiki.test.raw\n"); return 1; }
    char *buf = malloc(1 << 16);
    size_t len = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    sqz_tokenizer *tok;
    int32_t *ids;
    size_t n_ids;
    if ((s = sqz_tokenizer_new(&m->vocab, &tok)) != SQZ_OK || (s = sqz_tokenize(tok, buf, len, true, &ids, &n_ids)) != SQZ_OK)
        return fail(s);
    sqz_tokenizer_free(tok);
    free(buf);
    const int64_t win = 256;
    capture c = {.cap = 2 * win};
    sqz_session_opts so = sqz_session_default_opts();
    so.max_tokens = win;
    sqz_session *ses;
    if ((s = sqz_session_new(m, &so, &ses)) != SQZ_OK) return fail(s);
    sqz_session_set_hook(ses, hook, &c);
    float *x = malloc((size_t)win * (size_t)m->hp.d_model * sizeof(float));
    for (int w = 0; w < 2 && (size_t)((w + 1) * win) <= n_ids; w++) {
        if ((s = sqz_session_embed(ses, ids + w * win, NULL, win, 0, x)) != SQZ_OK) return fail(s);
        if ((s = sqz_session_block(ses, 0, x, win, 0)) != SQZ_OK) return fail(s);
    }
    sqz_session_free(ses);
    free(x);
    free(ids);
    static const sqz_role groups[4][3] = {{SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V},
                                          {SQZ_ROLE_ATTN_OUT, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT},
                                          {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_COUNT},
                                          {SQZ_ROLE_FFN_DOWN, SQZ_ROLE_COUNT, SQZ_ROLE_COUNT}};
    for (int g = 0; g < 4; g++) {
        if (!c.x[g] || c.dim[g] % 32) continue;
        sqz_qstats_buf sb;
        if ((s = sqz_qstats_compute(c.x[g], c.n[g], c.dim[g], SQZ_QSTAT_XTX, 0, &sb)) != SQZ_OK) return fail(s);
        sqz_quant_opts o = sqz_quant_default_opts();
        o.target.fmt = g % 2 == 0 ? SQZ_QFMT_Q4_0 : SQZ_QFMT_Q4_1;
        o.act_order = g == 2; /* static grids on the GGUF blocks */
        sqz_qlinear lin[3];
        sqz_tensor *ts[3];
        float *w[3] = {0};
        int n = 0;
        for (int k = 0; k < 3 && groups[g][k] != SQZ_ROLE_COUNT; k++, n++) {
            ts[n] = sqz_model_get(m, groups[g][k], 0, SQZ_PARAM_WEIGHT);
            w[n] = malloc((size_t)sqz_tensor_nelements(ts[n]) * sizeof(float));
            if ((s = sqz_tensor_to_f32(ts[n], w[n])) != SQZ_OK) return fail(s);
            lin[n] = (sqz_qlinear){.w = w[n], .n_out = ts[n]->shape[0], .name = ts[n]->name};
        }
        sqz_qmatrix q[3];
        memset(q, 0, sizeof q);
        if ((s = sqz_quant_gptq(lin, n, &sb.s, &o, q, NULL)) != SQZ_OK) return fail(s);
        for (int k = 0; k < n; k++) {
            float *deq = malloc((size_t)(q[k].n_out * q[k].n_in) * sizeof(float));
            if ((s = sqz_qmatrix_to_f32(&q[k], deq)) != SQZ_OK) return fail(s);
            char path[4096], gname[128];
            snprintf(gname, sizeof gname, "blk.0.%s.weight", sqz_role_name(ts[k]->role));
            snprintf(path, sizeof path, "%s/%s.f32", dir, gname);
            if (write_file(path, deq, (size_t)(q[k].n_out * q[k].n_in) * sizeof(float))) return 1;
            printf("tensor %s %s %lld %lld\n", gname, sqz_dtype_name(q[k].dtype), (long long)q[k].n_out,
                   (long long)q[k].n_in);
            free(deq);
            if ((s = sqz_qmatrix_attach(m, ts[k], &q[k])) != SQZ_OK) return fail(s);
            free(w[k]);
        }
        sqz_qstats_buf_free(&sb);
    }
    for (int g = 0; g < 4; g++) free(c.x[g]);
    sqz_save_opts so2 = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
    if ((s = sqz_model_save(m, out, &so2)) != SQZ_OK) return fail(s);
    sqz_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "hist") == 0) return cmd_hist(argv[2], argv[3]);
    if (argc == 8 && strcmp(argv[1], "imatrix") == 0)
        return cmd_imatrix(argv[2], argv[3], atol(argv[4]), atol(argv[5]), argv[6], argv[7]);
    if (argc == 5 && strcmp(argv[1], "gptq-gguf") == 0) return cmd_gptq_gguf(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: quant_tool hist|imatrix|gptq-gguf ...\n");
    return 1;
}
