/* cli/cmd_generate.c - `sqz generate MODEL -p PROMPT -n N`: text from a decoder, greedy at
 * temperature 0 (llama2.c's run.c behaviour: the prompt is tokenized with BOS when the
 * vocabulary wants one, generation stops at a control token such as BOS or EOS). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sqz/tokenizer.h"

void sqz_cmd_generate_usage(FILE *out) {
    fprintf(out,
            "usage: sqz generate MODEL [-p PROMPT] [-n N] [--temp T] [--top-p P] [--seed S]\n"
            "                      [--threads N] [--tokenizer FILE] [--ids] [--stream-weights]\n\n"
            "Continues PROMPT (default: empty, i.e. from BOS alone) with up to N new tokens\n"
            "(default 256) and prints the prompt and the continuation. Temperature 0 (the\n"
            "default) is greedy decoding; it stops early at a control token (BOS, EOS).\n\n"
            "  -p, --prompt TEXT   text to continue\n"
            "  -n, --tokens N      new tokens to generate\n"
            "  --temp T            sampling temperature (0 = greedy)\n"
            "  --top-p P           nucleus sampling threshold in (0, 1] (default 0.9 when T > 0)\n"
            "  --seed S            random seed for sampling (default: the time)\n"
            "  --threads N         CPU threads (default: all cores)\n"
            "  --tokenizer FILE    llama2.c tokenizer.bin (default: beside the checkpoint)\n"
            "  --ids               print the generated token ids instead of text\n"
            "  --stream-weights    dequantize weights at every use instead of once (less memory)\n");
}

static bool parse_i64(const char *s, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *v = x;
    return true;
}

static bool parse_f(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return !errno && end != s && !*end;
}

typedef struct gen_state {
    const sqz_tokenizer *tok;
    int32_t *ids;   /* prompt + generated so far */
    int64_t n_ids;
    size_t printed; /* bytes of the decoded text already written */
    bool print_ids;
    sqz_status st;
} gen_state;

/* Prints what the new token adds to the decoded text (decoding the whole sequence keeps SPM's
 * leading-space rule and multi-byte characters split over byte tokens right). */
static bool on_token(void *user, int32_t token) {
    gen_state *g = user;
    g->ids[g->n_ids++] = token;
    if (sqz_token_is_control(g->tok, token)) return false;
    if (g->print_ids) {
        printf("%d\n", token);
        return true;
    }
    char *text;
    size_t len;
    g->st = sqz_detokenize(g->tok, g->ids, (size_t)g->n_ids, false, &text, &len);
    if (g->st != SQZ_OK) return false;
    if (len > g->printed) {
        fwrite(text + g->printed, 1, len - g->printed, stdout);
        fflush(stdout);
        g->printed = len;
    }
    free(text);
    return true;
}

int sqz_cmd_generate(int argc, char **argv) {
    const char *path = NULL, *prompt = "", *tokpath = NULL;
    int64_t n_new = 256, threads = 0, seed = -1;
    double temp = 0, top_p = 0.9;
    bool print_ids = false, stream = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has) prompt = argv[++i];
        else if ((!strcmp(a, "-n") || !strcmp(a, "--tokens")) && has) {
            if (!parse_i64(argv[++i], &n_new) || n_new < 0) return sqz_cli_usage_error("generate", "bad -n '%s'", argv[i]);
        } else if (!strcmp(a, "--temp") && has) {
            if (!parse_f(argv[++i], &temp) || temp < 0) return sqz_cli_usage_error("generate", "bad --temp '%s'", argv[i]);
        } else if (!strcmp(a, "--top-p") && has) {
            if (!parse_f(argv[++i], &top_p) || !(top_p > 0 && top_p <= 1))
                return sqz_cli_usage_error("generate", "bad --top-p '%s'", argv[i]);
        } else if (!strcmp(a, "--seed") && has) {
            if (!parse_i64(argv[++i], &seed)) return sqz_cli_usage_error("generate", "bad --seed '%s'", argv[i]);
        } else if (!strcmp(a, "--threads") && has) {
            if (!parse_i64(argv[++i], &threads) || threads < 0 || threads > 1024)
                return sqz_cli_usage_error("generate", "bad --threads '%s'", argv[i]);
        } else if (!strcmp(a, "--tokenizer") && has) tokpath = argv[++i];
        else if (!strcmp(a, "--ids")) print_ids = true;
        else if (!strcmp(a, "--stream-weights")) stream = true;
        else if (a[0] == '-' && a[1]) return sqz_cli_usage_error("generate", "unknown option or missing value '%s'", a);
        else if (!path) path = a;
        else return sqz_cli_usage_error("generate", "more than one MODEL given ('%s')", a);
    }
    if (!path) return sqz_cli_usage_error("generate", "no MODEL given");

    sqz_open_opts oo = {.tokenizer_path = tokpath};
    sqz_model *m = NULL;
    sqz_tokenizer *tok = NULL;
    sqz_backend *be = NULL;
    sqz_session *s = NULL;
    int32_t *prompt_ids = NULL, *out = NULL;
    gen_state g = {0};
    size_t n_prompt = 0;
    int rc = 1;
    sqz_status st = sqz_model_open(path, &oo, &m);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&m->vocab, &tok);
    if (st == SQZ_OK) st = sqz_tokenize(tok, prompt, strlen(prompt), true, &prompt_ids, &n_prompt);
    if (st != SQZ_OK) goto done;
    /* The sequence: the prompt (or BOS alone when it tokenizes to nothing), then the new tokens. */
    g.ids = malloc(((size_t)n_prompt + 1 + (size_t)n_new) * sizeof *g.ids);
    out = malloc(((size_t)n_new + 1) * sizeof *out);
    if (!g.ids || !out) {
        fprintf(stderr, "sqz generate: out of memory\n");
        goto done;
    }
    memcpy(g.ids, prompt_ids, n_prompt * sizeof *g.ids);
    g.n_ids = (int64_t)n_prompt;
    if (g.n_ids == 0) {
        if (sqz_tokenizer_bos(tok) < 0) {
            fprintf(stderr, "sqz generate: the prompt is empty and the vocabulary has no BOS token\n");
            goto done;
        }
        g.ids[g.n_ids++] = sqz_tokenizer_bos(tok);
    }
    g.tok = tok;
    g.print_ids = print_ids;

    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = (int)threads;
    so.max_tokens = g.n_ids + n_new;
    so.weights = stream ? SQZ_WEIGHTS_STREAM : SQZ_WEIGHTS_CACHE;
    if (m->hp.ctx_len > 0 && so.max_tokens > m->hp.ctx_len) {
        fprintf(stderr, "sqz generate: warning: %lld tokens exceed the model's trained context of %lld\n",
                (long long)so.max_tokens, (long long)m->hp.ctx_len);
    }
    st = sqz_backend_cpu((int)threads, &be);
    so.backend = be;
    if (st == SQZ_OK) st = sqz_session_new(m, &so, &s);
    if (st != SQZ_OK) goto done;

    if (!print_ids) {
        char *text;
        size_t len;
        st = sqz_detokenize(tok, g.ids, (size_t)g.n_ids, false, &text, &len);
        if (st != SQZ_OK) goto done;
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        g.printed = len;
        free(text);
    }
    sqz_sample_opts sa = {(float)temp, (float)top_p, seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL)};
    int64_t n_out = 0, n_start = g.n_ids;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = sqz_generate(s, g.ids, g.n_ids, n_new, -1, &sa, on_token, &g, out, &n_out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st == SQZ_OK) st = g.st;
    if (st != SQZ_OK) goto done;
    if (!print_ids) printf("\n");
    if (isatty(STDERR_FILENO)) {
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        fprintf(stderr, "sqz generate: %lld prompt + %lld new tokens in %.2f s (%.1f tokens/s)\n",
                (long long)n_start, (long long)n_out, sec, sec > 0 ? (double)n_out / sec : 0.0);
    }
    rc = 0;
done:
    if (st != SQZ_OK) rc = sqz_cli_fail(st);
    sqz_session_free(s);
    sqz_backend_free(be);
    sqz_tokenizer_free(tok);
    sqz_model_free(m);
    free(prompt_ids);
    free(g.ids);
    free(out);
    return rc;
}
