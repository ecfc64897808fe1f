/* cli/cmd_eval.c - `sqz eval MODEL --text FILE`: perplexity with llama.cpp's protocol, and with
 * a base model (or its saved logits) the KL divergence, top-1 agreement and delta perplexity;
 * for encoders, the cosine similarity of sentence embeddings against a base. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sqz/family.h"
#include "sqz/tasks.h"
#include "sqz/tokenizer.h"

typedef struct eval_args {
    const char *path, *text, *base, *base_logits, *save_base, *json, *tokpath, *dump, *hold_out;
    const char *task, *task_file; /* --task KIND FILE (FILE: the second word, or --text) */
    int64_t ctx, chunks, threads; /* ctx -1: sqz_eval_default_ctx; chunks 0: all */
    int64_t tasks_limit;
    int64_t held_windows, held_ctx, held_seed; /* --hold-out N:T:SEED (held_windows 0: none) */
    int acts;                                  /* sqz_activations */
    bool stream, quiet;
    bool hellaswag, winogrande, multiple_choice; /* llama-perplexity's spellings of --task KIND */
} eval_args;

static const sqz_opt eval_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, path),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED | SQZ_OPT_INPUT, .metavar = "MODEL", .short_name = 'm',
     .help = "the model to evaluate"},
    {.name = "file", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, task_file),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_INPUT, .metavar = "FILE", .help = "with --task: the task file"},
    {.name = "text", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, text),
     .flags = SQZ_OPT_INPUT, .short_name = 'f', .alias = "file",
     .metavar = "FILE", .help = "the text, e.g. wiki.test.raw (with --task: the task file)"},
    {.name = "task", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, task), .metavar = "KIND",
     .help = "accuracy on tasks instead of perplexity: hellaswag (hellaswag_val_full.txt), winogrande "
             "(winogrande-debiased-eval.csv), multiple-choice (llama.cpp's mmlu-/arc-/truthful-qa-validation.bin) or "
             "jsonl ({\"context\", \"choices\", \"gold\"} a line: acc and acc_norm), scored as llama-perplexity "
             "--hellaswag/--winogrande/--multiple-choice and lm-evaluation-harness score them; the file follows KIND "
             "or comes with --text; with --base both models, the delta and McNemar's exact test"},
    {.name = "hellaswag", .type = SQZ_OPT_FLAG, .offset = offsetof(eval_args, hellaswag),
     .help = "llama-perplexity's spelling of --task hellaswag (the file from -f)"},
    {.name = "winogrande", .type = SQZ_OPT_FLAG, .offset = offsetof(eval_args, winogrande),
     .help = "llama-perplexity's spelling of --task winogrande (the file from -f)"},
    {.name = "multiple-choice", .type = SQZ_OPT_FLAG, .offset = offsetof(eval_args, multiple_choice),
     .help = "llama-perplexity's spelling of --task multiple-choice (the file from -f)"},
    {.name = "tasks-limit", .type = SQZ_OPT_INT, .offset = offsetof(eval_args, tasks_limit), .min = 1,
     .max = (int64_t)1 << 40, .metavar = "N",
     .help = "with --task: the first N tasks only (llama-perplexity's --hellaswag-tasks N picks N at random)"},
    {.name = "ctx", .type = SQZ_OPT_INT, .offset = offsetof(eval_args, ctx), .min = 4, .max = 1 << 20,
     .short_name = 'c', .alias = "ctx-size",
     .help = "decoders: chunk length, 512 by default; encoders: longest sentence, 256 by default; a default is "
             "capped by the model's trained context, a larger N given here is used with a warning; with --task: the "
             "window tasks are packed into (512 tokens, fewer for a large vocabulary, at least the largest task)"},
    {.name = "chunks", .type = SQZ_OPT_INT, .offset = offsetof(eval_args, chunks), .min = 1, .max = 1 << 30,
     .metavar = "K", .help = "evaluate the first K chunks only (encoders: K lines); all by default"},
    {.name = "hold-out", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, hold_out), .metavar = "N:T:SEED",
     .help = "decoders: skip the chunks that overlap the N calibration windows of T tokens that `sqz compress "
             "--calib FILE --calib-samples N --calib-ctx T --seed SEED` cuts from this text (FILE = --text), as "
             "`compress --eval` does; --chunks then counts the chunks kept"},
    {.name = "base", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, base), .flags = SQZ_OPT_INPUT,
     .metavar = "BASE",
     .help = "the reference model"},
    {.name = "base-logits", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, base_logits), .flags = SQZ_OPT_INPUT,
     .metavar = "F",
     .help = "a base's logits saved with --save-base (same text, ctx, chunks)"},
    {.name = "save-base", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, save_base), .flags = SQZ_OPT_OUTPUT,
     .metavar = "F",
     .help = "save the base's logits (the model's own without --base) to F"},
    {.name = "json", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, json), .flags = SQZ_OPT_OUTPUT,
     .metavar = "OUT",
     .help = "write the report as JSON"},
    {.name = "threads", .type = SQZ_OPT_INT, .offset = offsetof(eval_args, threads), .min = 0, .max = 1024,
     .short_name = 't', .def = "0", .help = "CPU threads, 0 for all cores"},
    {.name = "tokenizer", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, tokpath), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "llama2.c tokenizer.bin (default: beside the checkpoint)"},
    {.name = "dump-tokens", .type = SQZ_OPT_STRING, .offset = offsetof(eval_args, dump), .flags = SQZ_OPT_OUTPUT,
     .metavar = "F",
     .help = "write the text's token ids to F (int32 little-endian), to check the numbers elsewhere"},
    {.name = "activations", .type = SQZ_OPT_CHOICE, .offset = offsetof(eval_args, acts), .choices = "f32|q8",
     .def = "f32", .help = SQZ_CLI_ACTIVATIONS_HELP},
    {.name = "stream-weights", .type = SQZ_OPT_FLAG, .offset = offsetof(eval_args, stream),
     .help = "sqz's int8/int4 scheme weights: dequantize at every use instead of keeping f32 "
             "copies (less memory; float and GGUF weights are always multiplied from their blocks)"},
};

static const char eval_head[] =
    "usage: sqz eval MODEL --text FILE [--ctx N] [--chunks K] [--hold-out N:T:SEED]\n"
    "       sqz eval MODEL --task KIND FILE [--tasks-limit N] [--base BASE] [--json OUT] ...\n"
    "                [--base BASE | --base-logits F] [--save-base F] [--json OUT] [--threads N]\n"
    "                [--tokenizer FILE] [--dump-tokens F] [--activations f32|q8] [--stream-weights]\n\n"
    "Decoders: perplexity of FILE as llama.cpp's perplexity tool computes it (the text is\n"
    "tokenized once, cut into chunks of N tokens whose first token becomes BOS when the\n"
    "vocabulary adds BOS, and the second half of each chunk is scored), with its standard\n"
    "error. With a base: delta ppl, KL divergence (base || model: mean, 99th and 99.9th\n"
    "percentiles, maximum), top-1 agreement and RMS of the change in p(next token).\n"
    "Encoders: cosine similarity of the sentence embeddings of model and base over the\n"
    "non-blank lines of FILE (mean, 1st percentile, minimum).\n\n"
    "Context: without --ctx, 512 tokens (encoders 256) capped by the context the model was\n"
    "trained on, the same rule as `sqz compress --eval`; an --ctx beyond the trained context\n"
    "is used, with a one-line warning (positions past it were never trained: llama.cpp warns\n"
    "alike). `sqz compress --eval` prints the `sqz eval` line that reproduces its figures.\n\n"
    "Memory: the model file (mapped: pages are read, not copied), the KV cache (2 x layers x\n"
    "ctx x kv width floats), one chunk's activations and logits (ctx x vocabulary floats), per\n"
    "model (twice with a base). Weights are multiplied from their stored blocks (F32/F16/BF16 and\n"
    "every GGUF type): nothing proportional to the model in f32, except f32 copies of sqz's own\n"
    "int8/int4 scheme weights without --stream-weights. The logits and the KV cache are checked\n"
    "against the machine's memory before anything is allocated.\n";

void sqz_cmd_eval_usage(FILE *out) {
    const sqz_opt_group g[] = {{NULL, eval_rows, SQZ_CLI_N(eval_rows), NULL}, {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, eval_head, g, 2);
}

static int parse_args(int argc, char **argv, eval_args *a) {
    memset(a, 0, sizeof *a);
    a->ctx = -1;
    const sqz_opt_group g[] = {{NULL, eval_rows, SQZ_CLI_N(eval_rows), a}, {NULL, &sqz_cli_quiet_opt, 1, &a->quiet}};
    const int bad = sqz_cli_parse("eval", g, 2, argc, argv, NULL);
    if (bad) return bad;
    if (a->base && a->base_logits) return sqz_cli_usage_error("eval", "--base and --base-logits exclude each other");
    const char *spelt = a->hellaswag ? "hellaswag" : a->winogrande ? "winogrande" : a->multiple_choice ?
                        "multiple-choice" : NULL;
    if (a->hellaswag + a->winogrande + a->multiple_choice > 1 || (spelt && a->task && strcmp(spelt, a->task) != 0))
        return sqz_cli_usage_error("eval", "one kind of task a run: --task KIND, --hellaswag, --winogrande or "
                                   "--multiple-choice");
    if (spelt) a->task = spelt;
    if (a->task) {
        if (sqz_task_kind_from_name(a->task) < 0)
            return sqz_cli_usage_error("eval", "--task '%s': expected hellaswag, winogrande, multiple-choice or jsonl",
                                       a->task);
        if (a->task_file && a->text)
            return sqz_cli_usage_error("eval", "--task: the task file is given twice ('%s' and --text '%s')",
                                       a->task_file, a->text);
        if (!a->task_file && !a->text)
            return sqz_cli_usage_error("eval", "--task %s needs its file: sqz eval MODEL --task %s FILE", a->task,
                                       a->task);
        const char *no = a->chunks ? "--chunks" : a->hold_out ? "--hold-out" : a->base_logits ? "--base-logits"
                         : a->save_base ? "--save-base" : a->dump ? "--dump-tokens" : NULL;
        if (no) return sqz_cli_usage_error("eval", "%s applies to perplexity, not to --task", no);
        return 0;
    }
    if (a->task_file)
        return sqz_cli_usage_error("eval", "unexpected '%s': the text comes with --text FILE (a task file with "
                                   "--task KIND FILE)", a->task_file);
    if (a->tasks_limit) return sqz_cli_usage_error("eval", "--tasks-limit applies to --task");
    if (!a->text) return sqz_cli_usage_error("eval", "missing --text FILE (or --task KIND FILE)");
    if (a->hold_out) {
        long long n = 0, t = 0, seed = 0;
        int used = 0;
        if (sscanf(a->hold_out, "%lld:%lld:%lld%n", &n, &t, &seed, &used) != 3 || a->hold_out[used] || n < 1 ||
            n > (1 << 24) || t < 2 || t > (1 << 24) || seed < 0)
            return sqz_cli_usage_error("eval", "--hold-out '%s': expected N:T:SEED (windows 1..%d, tokens per window "
                                       "2..%d, seed >= 0), e.g. 128:512:1234", a->hold_out, 1 << 24, 1 << 24);
        a->held_windows = n, a->held_ctx = t, a->held_seed = seed;
    }
    return 0;
}

/* The resources of one run, freed together. */
typedef struct eval_ctx {
    sqz_model *m, *mb;
    sqz_tokenizer *tok;
    sqz_backend *be;
    sqz_session *s, *sb;
    char *text;
    size_t text_len;
    int32_t *ids;
    size_t n_ids;
    sqz_eval_result r;
    bool reported; /* the error is printed already */
} eval_ctx;

static void eval_ctx_free(eval_ctx *c) {
    sqz_eval_result_free(&c->r);
    sqz_session_free(c->s);
    sqz_session_free(c->sb);
    sqz_backend_free(c->be);
    sqz_tokenizer_free(c->tok);
    sqz_model_free(c->m);
    sqz_model_free(c->mb);
    free(c->text);
    free(c->ids);
}

static sqz_status dump_tokens(const char *path, const int32_t *ids, size_t n) {
    uint8_t *b = malloc(n * 4 + 1);
    if (!b) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)ids[i];
        for (int k = 0; k < 4; k++) b[4 * i + (size_t)k] = (uint8_t)(u >> (8 * k));
    }
    sqz_status st = sqz_cli_write_file(path, b, n * 4);
    free(b);
    return st;
}

static sqz_status new_session(const sqz_model *m, const eval_args *a, sqz_backend *be, int64_t max_tokens,
                              sqz_session **s) {
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = (int)a->threads;
    so.max_tokens = max_tokens;
    so.weights = a->stream ? SQZ_WEIGHTS_STREAM : SQZ_WEIGHTS_CACHE;
    so.backend = be;
    so.activations = (sqz_activations)a->acts;
    return sqz_session_new(m, &so, s);
}

static sqz_status open_session(const char *path, const eval_args *a, sqz_backend *be, int64_t max_tokens,
                               sqz_model **m, sqz_session **s) {
    sqz_open_opts oo = {.tokenizer_path = a->tokpath};
    sqz_status st = sqz_model_open(path, &oo, m);
    if (st == SQZ_OK) sqz_cli_model_warnings(path, *m);
    if (st == SQZ_OK) st = sqz_model_check_finite(*m);
    return st == SQZ_OK ? new_session(*m, a, be, max_tokens, s) : st;
}

static void print_decoder(const eval_args *a, const sqz_eval_result *r) {
    printf("model        %s\n", a->path);
    printf("text         %s: %lld tokens, ctx %lld, %lld chunks, %lld tokens scored", a->text,
           (long long)r->n_tokens, (long long)r->ctx, (long long)r->n_chunks, (long long)r->tokens_scored);
    if (a->hold_out) printf(" (%lld chunks held out)", (long long)r->n_excluded);
    printf("\n");
    printf("activations  %s\n", sqz_cli_activations_name(r->activations));
    printf("ppl          %.4f +/- %.4f\n", r->ppl, r->ppl_stderr);
    if (r->has_base) {
        printf("base         %s\n", a->base ? a->base : a->base_logits);
        printf("ppl_base     %.4f +/- %.4f\n", r->ppl_base, r->ppl_base_stderr);
        printf("delta_ppl    %+.4f (%+.3f%%)\n", r->delta_ppl, 100.0 * r->delta_ppl / r->ppl_base);
        printf("kld          mean %.6f +/- %.6f  p99 %.6f  p99.9 %.6f  max %.6f\n", r->kld_mean, r->kld_stderr,
               r->kld_p99, r->kld_p999, r->kld_max);
        printf("same top     %.3f%%\n", 100.0 * r->top1_agree);
        printf("rms dp       %.4f%%  (max %.4f%%)\n", 100.0 * r->rms_dp, 100.0 * r->max_dp);
    }
    printf("time         %.2f s, %.1f tokens/s\n", r->seconds, r->tokens_per_s);
}

static bool finite_result(const sqz_eval_result *r) {
    return isfinite(r->ppl) && (!r->has_base || (isfinite(r->ppl_base) && isfinite(r->kld_mean)));
}

/* --hold-out N:T:SEED: the spans of the calibration windows `sqz compress` cuts from the same
 * ids (sqz_calib_windows_from_ids, as sqz_calib_windows_make), into *spans (malloc'd). */
static sqz_status hold_out_spans(const eval_args *a, const eval_ctx *c, int64_t (**spans)[2]) {
    sqz_calib_windows w;
    sqz_status st = sqz_calib_windows_from_ids(c->ids, (int64_t)c->n_ids, -1, a->held_windows, a->held_ctx,
                                               (uint64_t)a->held_seed, &w);
    if (st != SQZ_OK) return st;
    *spans = malloc((size_t)w.n_windows * sizeof **spans);
    for (int64_t i = 0; *spans && i < w.n_windows; i++) {
        (*spans)[i][0] = w.starts[i];
        (*spans)[i][1] = w.starts[i] + w.ctx;
    }
    sqz_calib_windows_free(&w);
    return *spans ? SQZ_OK : SQZ_ERR_NOMEM;
}

static sqz_status eval_decoder(const eval_args *a, eval_ctx *c) {
    const int64_t ctx = a->ctx;
    int64_t(*spans)[2] = NULL;
    sqz_status st = sqz_tokenize(c->tok, c->text, c->text_len, true, &c->ids, &c->n_ids);
    if (st == SQZ_OK && a->dump) st = dump_tokens(a->dump, c->ids, c->n_ids);
    if (st == SQZ_OK && a->held_windows) st = hold_out_spans(a, c, &spans);
    if (st == SQZ_OK) st = new_session(c->m, a, c->be, ctx, &c->s);
    if (st == SQZ_OK && a->base) st = open_session(a->base, a, c->be, ctx, &c->mb, &c->sb);
    if (st != SQZ_OK) {
        free(spans);
        return st;
    }
    sqz_eval_opts o = sqz_eval_default_opts();
    o.ctx = ctx;
    o.max_chunks = a->chunks;
    o.base = c->sb;
    o.base_logits = a->base_logits;
    o.save_base = a->save_base;
    o.exclude = (const int64_t(*)[2])spans;
    o.n_exclude = spans ? a->held_windows : 0;
    int64_t n_chunks = (int64_t)c->n_ids / ctx;
    if (a->chunks > 0 && a->chunks < n_chunks) n_chunks = a->chunks;
    sqz_progress *p = sqz_cli_progress(a->quiet, "eval", n_chunks * ctx, "tokens");
    o.progress = sqz_progress_cb;
    o.progress_user = p;
    st = sqz_eval_perplexity(c->s, c->ids, (int64_t)c->n_ids, &o, &c->r);
    sqz_progress_end(p);
    free(spans);
    if (st == SQZ_OK && !finite_result(&c->r)) {
        /* finite weights, yet the activations overflowed: never a "ppl nan" with exit 0 */
        if (c->r.has_base)
            fprintf(stderr, "sqz: error: %s on %s: the result is not finite (ppl %g, base ppl %g, KLD %g): the "
                    "activations overflow\n", a->path, a->text, c->r.ppl, c->r.ppl_base, c->r.kld_mean);
        else
            fprintf(stderr, "sqz: error: %s on %s: ppl %g is not finite: the activations overflow\n", a->path,
                    a->text, c->r.ppl);
        c->reported = true;
        return SQZ_ERR_FORMAT;
    }
    if (st == SQZ_OK) print_decoder(a, &c->r);
    return st;
}

/* Encoders: one sequence per non-blank line of the text. */
static sqz_status eval_encoder(const eval_args *a, eval_ctx *c) {
    const int64_t ctx = a->ctx;
    sqz_status st = new_session(c->m, a, c->be, ctx, &c->s);
    if (st == SQZ_OK) st = open_session(a->base, a, c->be, ctx, &c->mb, &c->sb);
    int64_t cap = 64, n = 0;
    int32_t **seqs = calloc((size_t)cap, sizeof *seqs);
    int64_t *lens = calloc((size_t)cap, sizeof *lens);
    if (!seqs || !lens) st = SQZ_ERR_NOMEM;
    for (size_t i = 0; st == SQZ_OK && i < c->text_len && (a->chunks <= 0 || n < a->chunks);) {
        size_t j = i;
        while (j < c->text_len && c->text[j] != '\n') j++;
        bool blank = true;
        for (size_t k = i; k < j && blank; k++) blank = c->text[k] == ' ' || c->text[k] == '\t' || c->text[k] == '\r';
        if (!blank) {
            if (n == cap) {
                cap *= 2;
                int32_t **ns = realloc(seqs, (size_t)cap * sizeof *ns);
                int64_t *nl = ns ? realloc(lens, (size_t)cap * sizeof *nl) : NULL;
                if (ns) seqs = ns;
                if (nl) lens = nl;
                if (!ns || !nl) { st = SQZ_ERR_NOMEM; break; }
            }
            size_t len;
            st = sqz_tokenize(c->tok, c->text + i, j - i, true, &seqs[n], &len);
            if (st != SQZ_OK) break;
            /* Truncate as sentence-transformers does, keeping the final [SEP]. */
            if ((int64_t)len > ctx) {
                seqs[n][ctx - 1] = seqs[n][len - 1];
                len = (size_t)ctx;
            }
            lens[n++] = (int64_t)len;
        }
        i = j + 1;
    }
    if (st == SQZ_OK) st = sqz_eval_embeddings(c->s, c->sb, (const int32_t *const *)seqs, lens, n, &c->r);
    for (int64_t i = 0; seqs && i < n; i++) free(seqs[i]);
    free(seqs);
    free(lens);
    if (st == SQZ_OK) {
        printf("model        %s\n", a->path);
        printf("base         %s\n", a->base);
        printf("text         %s: %lld sentences, %lld tokens\n", a->text, (long long)c->r.n_sentences,
               (long long)c->r.n_tokens);
        printf("cosine       mean %.6f  p1 %.6f  min %.6f\n", c->r.cos_mean, c->r.cos_p1, c->r.cos_min);
        printf("time         %.2f s, %.1f tokens/s\n", c->r.seconds, c->r.tokens_per_s);
    }
    return st;
}

/* Warns in one line when --ctx goes beyond the trained context (llama.cpp: "n_ctx_train <
 * n_ctx"); after the size checks, so that a refused run says one thing. */
static void warn_ctx(const eval_args *a, const sqz_model *m) {
    if (m->hp.ctx_len > 0 && a->ctx > m->hp.ctx_len)
        fprintf(stderr, "sqz eval: warning: --ctx %lld is beyond the %lld tokens %s was trained on (n_ctx_train < "
                "n_ctx): positions past them were never trained, the figures are not comparable\n",
                (long long)a->ctx, (long long)m->hp.ctx_len, a->path);
}

/* The logits of a chunk (--ctx x vocabulary floats) and the KV cache, for the model and the base,
 * against the memory, before any is allocated: 0, or the usage error's exit status. */
static int check_sizes(const eval_args *a, const sqz_model *m) {
    const int64_t ctx = a->ctx;
    const sqz_size_term t[] = {{"--ctx", ctx}, {"vocab_size", m->hp.vocab_size}, {"bytes per float", 4},
                               {"models", a->base || a->base_logits ? 2 : 1}};
    const sqz_hparams *hp = &m->hp;
    const sqz_size_term kv[] = {{"--ctx", ctx}, {"layers", hp->n_layers},
                                {"keys and values", 2 * hp->n_kv_heads * hp->head_dim}, {"bytes per float", 4},
                                {"models", a->base || a->base_logits ? 2 : 1}};
    if (sqz_opts_check_size("the logits of a chunk", t, 4, sqz_cli_memory_limit(), "the memory") == SQZ_OK &&
        sqz_opts_check_size("the KV cache", kv, 5, sqz_cli_memory_limit(), "the memory") == SQZ_OK)
        return 0;
    return sqz_cli_usage_error("eval", "%s", sqz_last_error());
}

int sqz_cmd_eval(int argc, char **argv) {
    eval_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (a.task) {
        const sqz_cli_task_args t = {.model = a.path, .base = a.base, .file = a.task_file ? a.task_file : a.text,
                                     .json = a.json, .tokpath = a.tokpath, .kind = sqz_task_kind_from_name(a.task),
                                     .limit = a.tasks_limit, .ctx = a.ctx > 0 ? a.ctx : 0, .threads = a.threads,
                                     .acts = a.acts, .stream = a.stream, .quiet = a.quiet};
        return sqz_cli_eval_tasks(&t);
    }
    eval_ctx c;
    memset(&c, 0, sizeof c);
    sqz_open_opts oo = {.tokenizer_path = a.tokpath};
    sqz_status st = sqz_read_file(a.text, (size_t)1 << 31, &c.text, &c.text_len);
    if (st == SQZ_OK) st = sqz_backend_cpu((int)a.threads, &c.be);
    if (st == SQZ_OK) st = sqz_model_open(a.path, &oo, &c.m);
    if (st == SQZ_OK) sqz_cli_model_warnings(a.path, c.m);
    if (st == SQZ_OK && c.text_len == 0) { /* not "the text has 1 tokens" (the BOS alone) */
        fprintf(stderr, "sqz: error: %s: the text is empty (0 tokens)\n", a.text);
        c.reported = true;
        st = SQZ_ERR_INVALID_ARG;
    }
    const bool ctx_given = a.ctx > 0;
    if (st == SQZ_OK && !ctx_given) a.ctx = sqz_eval_default_ctx(c.m);
    if (st == SQZ_OK && (rc = check_sizes(&a, c.m)) != 0) {
        eval_ctx_free(&c);
        return rc;
    }
    if (st == SQZ_OK && ctx_given) warn_ctx(&a, c.m);
    if (st == SQZ_OK) st = sqz_model_check_finite(c.m);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&c.m->vocab, &c.tok);
    if (st == SQZ_OK) {
        if (!sqz_family_get(c.m->hp.family)->lm_head) {
            if (!a.base || a.hold_out) {
                eval_ctx_free(&c);
                return sqz_cli_usage_error("eval", a.base ? "--hold-out selects a decoder's chunks; an encoder's "
                                           "sentences are not held out" : "an encoder is evaluated against a base: "
                                           "give --base BASE");
            }
            st = eval_encoder(&a, &c);
        } else {
            st = eval_decoder(&a, &c);
        }
    }
    if (st == SQZ_OK && a.json) {
        char *j = sqz_eval_report_json(&c.r, a.path, a.base ? a.base : a.base_logits, a.text);
        st = j ? sqz_cli_write_file(a.json, j, strlen(j)) : SQZ_ERR_NOMEM;
        free(j);
    }
    rc = st == SQZ_OK ? 0 : c.reported ? 1 : sqz_cli_fail(st);
    eval_ctx_free(&c);
    return rc;
}
