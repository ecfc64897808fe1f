/* cli/cmd_generate.c - `sqz generate MODEL -p PROMPT -n N`: text from a decoder, greedy at
 * temperature 0 (llama2.c's run.c behaviour: the prompt is tokenized with BOS when the
 * vocabulary wants one, generation stops at a control token such as BOS or EOS). With --chat
 * the prompt is one user message (after --system's) rendered by the model's chat template
 * (sqz/chat.h) and tokenized with its special tokens; the template decides the BOS. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sqz/chat.h"
#include "sqz/tokenizer.h"

typedef struct gen_opts {
    const char *path, *prompt, *tokenizer, *system, *chat_format;
    int64_t n_new, threads, seed; /* seed < 0: the time */
    double temp, top_p;
    int acts; /* sqz_activations */
    bool ids, stream, quiet, chat, no_think;
} gen_opts;

/* The prompt may be empty (BOS alone), which SQZ_OPT_STRING refuses. */
static sqz_status set_text(void *dst, const sqz_opt *o, const char *value) {
    memcpy((char *)dst + o->offset, &value, sizeof value);
    return SQZ_OK;
}

static const sqz_opt gen_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(gen_opts, path),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED | SQZ_OPT_INPUT, .metavar = "MODEL",
     .help = "a decoder checkpoint"},
    {.name = "prompt", .type = SQZ_OPT_STRING, .offset = offsetof(gen_opts, prompt), .metavar = "TEXT",
     .short_name = 'p', .set = set_text, .help = "text to continue (default: empty, i.e. from BOS alone)"},
    {.name = "tokens", .type = SQZ_OPT_INT, .offset = offsetof(gen_opts, n_new), .min = 0, .max = 1 << 30,
     .def = "256", .short_name = 'n', .help = "new tokens to generate"},
    {.name = "temp", .type = SQZ_OPT_FLOAT, .offset = offsetof(gen_opts, temp), .min = 0, .max = 100, .def = "0",
     .metavar = "T", .help = "sampling temperature, 0 for greedy decoding"},
    {.name = "top-p", .type = SQZ_OPT_FLOAT, .offset = offsetof(gen_opts, top_p), .flags = SQZ_OPT_OPEN_MIN,
     .min = 0, .max = 1, .def = "0.9", .metavar = "P", .help = "nucleus sampling threshold (when T > 0)"},
    {.name = "seed", .type = SQZ_OPT_INT, .offset = offsetof(gen_opts, seed), .metavar = "S",
     .help = "random seed for sampling (default, or negative: the time)"},
    {.name = "threads", .type = SQZ_OPT_INT, .offset = offsetof(gen_opts, threads), .min = 0, .max = 1024,
     .short_name = 't', .def = "0", .help = "CPU threads, 0 for all cores"},
    {.name = "tokenizer", .type = SQZ_OPT_STRING, .offset = offsetof(gen_opts, tokenizer), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "llama2.c tokenizer.bin (default: beside the checkpoint)"},
    {.name = "chat", .type = SQZ_OPT_FLAG, .offset = offsetof(gen_opts, chat),
     .help = "the prompt is a user message: render it with the model's chat template (GGUF "
             "tokenizer.chat_template, tokenizer_config.json's chat_template) and open the assistant's turn"},
    {.name = "system", .type = SQZ_OPT_STRING, .offset = offsetof(gen_opts, system), .metavar = "TEXT",
     .help = "with --chat: a system message before the prompt"},
    {.name = "chat-format", .type = SQZ_OPT_STRING, .offset = offsetof(gen_opts, chat_format), .metavar = "NAME",
     .help = "with --chat: render as NAME instead of recognising the model's template: qwen3, qwen3-nothink, "
             "chatml, llama3.2, llama3.1, llama3, gemma, phi3, phi4, llama2 or mistral"},
    {.name = "no-think", .type = SQZ_OPT_FLAG, .offset = offsetof(gen_opts, no_think),
     .help = "with --chat on a Qwen3 template: its enable_thinking=false (the answer opens with an empty "
             "<think></think> block); --chat-format qwen3-nothink"},
    {.name = "ids", .type = SQZ_OPT_FLAG, .offset = offsetof(gen_opts, ids),
     .help = "print the generated token ids instead of text"},
    {.name = "activations", .type = SQZ_OPT_CHOICE, .offset = offsetof(gen_opts, acts), .choices = "f32|q8",
     .def = "q8", .help = SQZ_CLI_ACTIVATIONS_HELP " (generation's default: what the deployed runtime computes)"},
    {.name = "stream-weights", .type = SQZ_OPT_FLAG, .offset = offsetof(gen_opts, stream),
     .help = "sqz's int8/int4 scheme weights: dequantize at every use instead of keeping f32 "
             "copies (less memory; float and GGUF weights are always multiplied from their blocks)"},
};

static const char gen_head[] =
    "usage: sqz generate MODEL [-p PROMPT] [-n N] [--temp T] [--top-p P] [--seed S]\n"
    "                      [--chat [--system TEXT] [--chat-format NAME] [--no-think]]\n"
    "                      [--threads N] [--tokenizer FILE] [--ids] [--activations f32|q8]\n"
    "                      [--stream-weights]\n\n"
    "Continues PROMPT (default: empty, i.e. from BOS alone) with up to N new tokens\n"
    "(default 256) and prints the prompt and the continuation. Temperature 0 (the\n"
    "default) is greedy decoding; it stops early at a control token (BOS, EOS).\n"
    "--chat answers PROMPT as a chat model: the model's chat template, recognised by\n"
    "its family (docs/generate.md), makes it a user turn and opens the assistant's.\n";

void sqz_cmd_generate_usage(FILE *out) {
    const sqz_opt_group g[] = {{NULL, gen_rows, SQZ_CLI_N(gen_rows), NULL}, {NULL, &sqz_cli_quiet_opt, 1, NULL}};
    sqz_cli_help(out, gen_head, g, 2);
}

typedef struct gen_state {
    const sqz_tokenizer *tok;
    int32_t *ids;   /* prompt + generated so far */
    int64_t n_ids;
    size_t printed; /* bytes of the decoded text already written */
    bool print_ids;
    sqz_status st;
    sqz_progress *progress; /* plain lines into a log only: on a terminal the text is the progress */
    int64_t n_new;
} gen_state;

/* Prints what the new token adds to the decoded text (decoding the whole sequence keeps SPM's
 * leading-space rule and multi-byte characters split over byte tokens right). */
static bool on_token(void *user, int32_t token) {
    gen_state *g = user;
    g->ids[g->n_ids++] = token;
    sqz_progress_update(g->progress, ++g->n_new);
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

/* The longest window a session holds (runtime/session.c). */
#define GEN_MAX_TOKENS (1 << 24)

/* -n against the session's window and the key/value cache against the memory, before
 * anything of that size is allocated: 0, or the usage error's exit status. */
static int check_sizes(const sqz_model *m, int64_t n_prompt, int64_t n_new) {
    const int64_t total = n_prompt + 1 + n_new; /* both at most 2^30: no overflow */
    if (total > GEN_MAX_TOKENS)
        return sqz_cli_usage_error("generate", "-n %lld: %lld prompt tokens + %lld new is more than the %d "
                                   "positions a session holds", (long long)n_new, (long long)n_prompt,
                                   (long long)n_new, GEN_MAX_TOKENS);
    const sqz_size_term t[] = {{"(prompt tokens + -n)", total}, {"layers", m->hp.n_layers},
                               {"K and V", 2}, {"kv heads x head_dim", m->hp.n_kv_heads * m->hp.head_dim},
                               {"bytes per float", 4}};
    if (sqz_opts_check_size("the key/value cache", t, 5, sqz_cli_memory_limit(), "the memory") != SQZ_OK)
        return sqz_cli_usage_error("generate", "%s", sqz_last_error());
    return 0;
}

/* The token text of a special id, or "". */
static const char *token_text(const sqz_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens && v->tokens[id] ? v->tokens[id] : "";
}

/* --chat: the prompt as a user turn (after --system's message) in the model's chat template,
 * tokenized with its special tokens and without the vocabulary's BOS (the template writes it
 * where it wants one, as transformers' apply_chat_template does); *text gets the rendered
 * prompt. A template sqz does not recognise names the model and --chat-format. */
static int chat_prompt(const gen_opts *a, const sqz_model *m, const sqz_tokenizer *tok, char **text, int32_t **ids,
                       size_t *n, sqz_status *st) {
    const sqz_chat_msg msgs[2] = {{"system", a->system ? a->system : ""}, {"user", a->prompt}};
    const sqz_vocab *v = &m->vocab;
    const char *fmt = a->chat_format;
    if (a->no_think) {
        const char *d = fmt ? fmt : sqz_chat_detect(v->chat_template);
        if (!d || (strcmp(d, "qwen3") != 0 && strcmp(d, "qwen3-nothink") != 0)) {
            fprintf(stderr, "sqz: error: %s: --no-think switches a Qwen3 template's thinking off; this model's "
                    "template is %s\n", a->path, d ? d : "not one sqz recognises");
            *st = SQZ_OK;
            return 1;
        }
        fmt = "qwen3-nothink";
    }
    *st = sqz_chat_apply(fmt, v->chat_template, token_text(v, v->bos), token_text(v, v->eos),
                         a->system ? msgs : msgs + 1, a->system ? 2 : 1, true, text);
    if (*st == SQZ_ERR_INVALID_ARG) { /* the model's template: its file, and the way out */
        fprintf(stderr, "sqz: error: %s: %s (--chat-format NAME)\n", a->path, sqz_last_error());
        *st = SQZ_OK;
        return 1;
    }
    if (*st == SQZ_OK) *st = sqz_tokenize_ex(tok, *text, strlen(*text), SQZ_TOKENIZE_PARSE_SPECIAL, ids, n);
    return 0;
}

int sqz_cmd_generate(int argc, char **argv) {
    gen_opts a = {.prompt = "", .seed = -1};
    const sqz_opt_group grp[] = {{NULL, gen_rows, SQZ_CLI_N(gen_rows), &a}, {NULL, &sqz_cli_quiet_opt, 1, &a.quiet}};
    const int bad = sqz_cli_parse("generate", grp, 2, argc, argv, NULL);
    if (bad) return bad;
    if ((a.system || a.chat_format || a.no_think) && !a.chat)
        return sqz_cli_usage_error("generate", "--%s applies to --chat: add --chat",
                                   a.system ? "system" : a.chat_format ? "chat-format" : "no-think");
    if (a.chat_format && !sqz_chat_format_known(a.chat_format))
        return sqz_cli_usage_error("generate", "--chat-format '%s': not a format (%s)", a.chat_format,
                                   sqz_chat_format_names());
    const char *path = a.path, *prompt = a.prompt;
    const int64_t n_new = a.n_new, threads = a.threads, seed = a.seed;
    const bool print_ids = a.ids;

    sqz_open_opts oo = {.tokenizer_path = a.tokenizer};
    sqz_model *m = NULL;
    sqz_tokenizer *tok = NULL;
    sqz_backend *be = NULL;
    sqz_session *s = NULL;
    int32_t *prompt_ids = NULL, *out = NULL;
    char *chat_text = NULL;
    gen_state g = {0};
    size_t n_prompt = 0;
    int rc = 1;
    sqz_status st = sqz_model_open(path, &oo, &m);
    if (st == SQZ_OK) sqz_cli_model_warnings(path, m);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&m->vocab, &tok);
    if (st == SQZ_OK && a.chat && chat_prompt(&a, m, tok, &chat_text, &prompt_ids, &n_prompt, &st)) goto done;
    if (st == SQZ_OK && !a.chat) st = sqz_tokenize(tok, prompt, strlen(prompt), true, &prompt_ids, &n_prompt);
    if (st != SQZ_OK) goto done;
    if ((rc = check_sizes(m, (int64_t)n_prompt, n_new)) != 0) goto done;
    rc = 1;
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
    so.weights = a.stream ? SQZ_WEIGHTS_STREAM : SQZ_WEIGHTS_CACHE;
    so.activations = (sqz_activations)a.acts;
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
        /* --chat prints the rendered prompt, special tokens included; the continuation is
         * what the decoded text (special tokens left out) adds after the prompt's */
        if (chat_text) fputs(chat_text, stdout);
        else fwrite(text, 1, len, stdout);
        fflush(stdout);
        g.printed = len;
        free(text);
    }
    sqz_sample_opts sa = {(float)a.temp, (float)a.top_p, seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL)};
    int64_t n_out = 0, n_start = g.n_ids;
    const double t0 = sqz_now_seconds();
    if (!a.quiet) g.progress = sqz_progress_start_mode("generate", n_new, "tokens", SQZ_PROGRESS_LINES_ONLY);
    st = sqz_generate(s, g.ids, g.n_ids, n_new, -1, &sa, on_token, &g, out, &n_out);
    const double t1 = sqz_now_seconds();
    /* a control token ends generation early: that is done, not stopped short */
    if (st == SQZ_OK && g.st == SQZ_OK) sqz_progress_cb(g.progress, g.n_new, g.n_new);
    sqz_progress_end(g.progress);
    g.progress = NULL;
    if (st == SQZ_OK) st = g.st;
    if (st != SQZ_OK) goto done;
    if (!print_ids) printf("\n");
    if (isatty(STDERR_FILENO)) {
        double sec = t1 - t0;
        fprintf(stderr, "sqz generate: %lld prompt + %lld new tokens in %.2f s (%.1f tokens/s), activations %s\n",
                (long long)n_start, (long long)n_out, sec, sec > 0 ? (double)n_out / sec : 0.0, a.acts ? "q8" : "f32");
    }
    rc = 0;
done:
    if (st != SQZ_OK) rc = sqz_cli_fail(st);
    sqz_session_free(s);
    sqz_backend_free(be);
    sqz_tokenizer_free(tok);
    sqz_model_free(m);
    free(prompt_ids);
    free(chat_text);
    free(g.ids);
    free(out);
    return rc;
}
