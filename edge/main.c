/*
 * edge/main.c - sqz-edge: run a bundle.
 *
 *   sqz-edge BUNDLE -p PROMPT -n N [--chat [--system TEXT]] [--key PUB] [--ctx N] [--temp T]
 *            [--top-p P] [--seed S] [--activations f32|q8] [--ids] [--dump-logits FILE] [--memory]
 *            [--manifest] [--version]
 *
 * The bundle is mapped and checked (CRCs; the signature and digests with --key), the memory
 * the context needs is printed before anything is allocated, then one arena is allocated and
 * nothing else. Prints the prompt and the continuation (or the new ids with --ids), like
 * `sqz generate`; greedy at temperature 0, stopping at a control token. Errors: one line,
 * exit 1 (2 for usage).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "edge/sqz_edge.h"

/* sqz's version (SQZ_VERSION_STRING in include/sqz/api.h, which this C99 runtime does not
 * include so that it builds alone): ctest cli_edge checks that `sqz-edge --version` and
 * `sqz --version` agree. */
#define SQZ_EDGE_VERSION "0.1.0"

typedef struct args {
    const char *bundle, *prompt, *key, *dump, *system;
    long long n, ctx, seed;
    double temp, top_p;
    int ids, memory_only, manifest, chat, acts;
} args;

static int usage(const char *msg) {
    if (msg) fprintf(stderr, "sqz-edge: %s (see 'sqz-edge --help')\n", msg);
    FILE *o = msg ? stderr : stdout;
    fprintf(o, "usage: sqz-edge BUNDLE [-p PROMPT] [-n N] [--chat [--system TEXT]] [--key PUB] [--ctx N]\n"
               "                [--temp T] [--top-p P] [--seed S] [--activations f32|q8] [--ids]\n"
               "                [--dump-logits FILE] [--memory] [--manifest]\n\n"
               "Runs an sqz bundle (.sqzb): continues PROMPT with up to N new tokens (default 64),\n"
               "greedy at temperature 0, as `sqz generate` does on the same bundle.\n\n"
               "options:\n"
               "  -p, --prompt TEXT     text to continue (default: empty, from BOS alone)\n"
               "  -n, --tokens N        new tokens (default 64)\n"
               "  --chat                PROMPT is a user message to an Instruct model, in ChatML (SmolLM2,\n"
               "                        Qwen2.5): as `sqz generate --chat --chat-format chatml`; the bundle\n"
               "                        carries no template, so no default system message either\n"
               "  --system TEXT         with --chat: a system message before the prompt\n"
               "  --key PUB             verify the Ed25519 signature with this 32-byte public key\n"
               "  --ctx N               context positions to reserve (default: enough for PROMPT and N)\n"
               "  --temp T              sampling temperature, 0 for greedy (default 0)\n"
               "  --top-p P             nucleus threshold when T > 0 (default 0.9)\n"
               "  --seed S              random seed for sampling (default: the time)\n"
               "  --activations A       how the matrix products take their input: q8 (default; as llama.cpp):\n"
               "                        quantized per 32 values to 8-bit codes for q8_0/q4_0/q4_1 weights and\n"
               "                        multiplied in integers, rounded to fp16 for f16 weights; f32: kept in\n"
               "                        f32 (as `sqz generate --activations f32`). f32 weights: f32 either way\n"
               "  --ids                 print the new token ids, one per line\n"
               "  --dump-logits FILE    write the logits of every step (vocab float32 each, little-endian)\n"
               "  --memory              print the memory the context needs and exit\n"
               "  --manifest            print the bundle's manifest (JSON provenance) and exit\n"
               "  --version             print the version and exit\n"
               "One thread: the forward pass runs on the calling thread only (docs/bundle.md, \"Threads\").\n"
               "kernels: %s (q8 activations: %s)\n", sqze_kernels(), sqze_kernels_q8());
    return msg ? 2 : 0;
}

static int num(const char *s, long long lo, long long hi, long long *out) {
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (errno || e == s || *e || v < lo || v > hi) return 1;
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, args *a) {
    a->prompt = "";
    a->n = 64;
    a->seed = -1;
    a->top_p = 0.9;
    a->acts = SQZE_ACTS_Q8;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int val = 1;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) exit(usage(NULL));
        else if (!strcmp(o, "--version")) {
            printf("sqz-edge %s (bundle format %d.x, kernels: %s)\n", SQZ_EDGE_VERSION, SQZB_MAJOR, sqze_kernels());
            exit(0);
        }
        else if (!strcmp(o, "--threads") || !strcmp(o, "-t")) {
            fprintf(stderr, "sqz-edge: %s: sqz-edge runs on one thread (docs/bundle.md, \"Threads\")\n", o);
            return 2;
        }
        else if (!strcmp(o, "--ids")) { a->ids = 1; val = 0; }
        else if (!strcmp(o, "--memory")) { a->memory_only = 1; val = 0; }
        else if (!strcmp(o, "--manifest")) { a->manifest = 1; val = 0; }
        else if (!strcmp(o, "--chat")) { a->chat = 1; val = 0; }
        else if (o[0] != '-' || !o[1]) {
            if (a->bundle) return usage("more than one BUNDLE");
            a->bundle = o;
            val = 0;
        } else if (!v) return usage("an option without its value");
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) a->prompt = v;
        else if (!strcmp(o, "--key")) a->key = v;
        else if (!strcmp(o, "--system")) a->system = v;
        else if (!strcmp(o, "--dump-logits")) a->dump = v;
        else if (!strcmp(o, "--activations")) {
            if (strcmp(v, "f32") && strcmp(v, "q8")) {
                fprintf(stderr, "sqz-edge: --activations '%s': f32 or q8 (see 'sqz-edge --help')\n", v);
                return 2;
            }
            a->acts = !strcmp(v, "q8") ? SQZE_ACTS_Q8 : SQZE_ACTS_F32;
        }
        else if (!strcmp(o, "-n") || !strcmp(o, "--tokens")) { if (num(v, 0, 1 << 24, &a->n)) return usage("-n: 0 to 2^24"); }
        else if (!strcmp(o, "--ctx")) { if (num(v, 1, 1 << 24, &a->ctx)) return usage("--ctx: 1 to 2^24"); }
        else if (!strcmp(o, "--seed")) { if (num(v, -1, 0x7FFFFFFFFFFFFFFFLL, &a->seed)) return usage("--seed: an integer"); }
        else if (!strcmp(o, "--temp") || !strcmp(o, "--top-p")) {
            char *e;
            double d = strtod(v, &e);
            int temp = !strcmp(o, "--temp");
            if (*e || e == v || !(d >= 0) || d > (temp ? 100 : 1)) return usage(temp ? "--temp: 0 to 100" : "--top-p: 0 to 1");
            *(temp ? &a->temp : &a->top_p) = d;
        } else {
            fprintf(stderr, "sqz-edge: unknown option '%s' (see 'sqz-edge --help')\n", o);
            return 2;
        }
        i += val;
    }
    if (!a->bundle) return usage("BUNDLE is required");
    if (a->system && !a->chat) return usage("--system goes with --chat");
    return 0;
}

/* Maps a whole regular file read-only; refuses what is not one. */
static const uint8_t *map_file(const char *path, size_t *size) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", path, S_ISREG(st.st_mode) ? "empty file" : "not a regular file");
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "sqz-edge: error: %s: cannot map: %s\n", path, strerror(errno));
        return NULL;
    }
    *size = (size_t)st.st_size;
    return p;
}

static int read_key(const char *path, uint8_t key[32]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint8_t extra;
    size_t got = fread(key, 1, 32, f);
    int more = fread(&extra, 1, 1, f) == 1;
    fclose(f);
    if (got != 32 || more) {
        fprintf(stderr, "sqz-edge: error: %s: not a 32-byte Ed25519 public key (sqz export --keygen makes PREFIX.pub)\n",
                path);
        return 1;
    }
    return 0;
}

/* ---- --chat: ChatML ----
 * <|im_start|>system\nSYSTEM<|im_end|>\n (with --system) <|im_start|>user\nPROMPT<|im_end|>\n
 * <|im_start|>assistant\n, as runtime/chat.c renders ChatML and sqz's tokenizer reads it: the
 * control tokens by their ids, the text between them tokenized as a whole, no BOS of the
 * vocabulary's (the template writes none; docs/generate.md). */
/* This program's own peak resident memory where the system says it (Linux: VmHWM). A parent's
 * wait4 cannot tell it: a forked child's ru_maxrss counts the parent's pages it held before exec. */
static void print_peak(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) fprintf(stderr, "sqz-edge: peak RSS %lld kB\n", atoll(line + 6));
    fclose(f);
}

static char chat_text[1 << 16]; /* one turn's text, static: the arena is the only allocation */

static int chat_push(sqze_model *m, int32_t id, int64_t *n) {
    if ((uint64_t)*n >= m->ctx) return 1;
    m->tokens[(*n)++] = id;
    return 0;
}

/* Appends <|im_start|>ROLE\nCONTENT (and <|im_end|>\n when close) to m->tokens[*n..), and prints
 * it unless quiet; 0, or 1 with err set. */
static int chat_turn(sqze_model *m, const int32_t mark[2], const char *role, const char *content, int close,
                     int quiet, int64_t *n, char *err, size_t cap) {
    const size_t lr = strlen(role), lc = strlen(content);
    if (lr + 1 + lc >= sizeof chat_text) {
        snprintf(err, cap, "--chat: a message of %zu bytes (at most %zu)", lc, sizeof chat_text - lr - 2);
        return 1;
    }
    memcpy(chat_text, role, lr);
    chat_text[lr] = '\n';
    memcpy(chat_text + lr + 1, content, lc);
    if (chat_push(m, mark[0], n)) goto full;
    int64_t k = sqze_tokenize(m, chat_text, lr + 1 + lc, 0, m->tokens + *n, m->ctx - (uint64_t)*n, err, cap);
    if (k < 0) return 1;
    *n += k;
    if (close && (chat_push(m, mark[1], n) || (k = sqze_tokenize(m, "\n", 1, 0, m->tokens + *n,
                                                                  m->ctx - (uint64_t)*n, err, cap)) < 0))
        goto full;
    if (close) *n += k;
    if (!quiet) printf("<|im_start|>%s\n%s%s", role, content, close ? "<|im_end|>\n" : "");
    return 0;
full:
    snprintf(err, cap, "--chat: the conversation is more than the %u positions of the context (--ctx)",
             (unsigned)m->ctx);
    return 1;
}

/* The ids of the conversation in m->tokens; their count, or -1 after printing the error. */
static int64_t chat_prompt(const args *a, sqze_model *m) {
    char err[256];
    const int32_t mark[2] = {sqze_token_find(m, "<|im_start|>", 12), sqze_token_find(m, "<|im_end|>", 10)};
    if (mark[0] < 0 || mark[1] < 0 || !sqze_token_is_control(m, mark[0]) || !sqze_token_is_control(m, mark[1])) {
        fprintf(stderr, "sqz-edge: error: %s: --chat renders ChatML (SmolLM2, Qwen2.5), and the vocabulary has no "
                        "<|im_start|> / <|im_end|> control tokens\n", a->bundle);
        return -1;
    }
    int64_t n = 0;
    int bad = 0;
    if (a->system) bad = chat_turn(m, mark, "system", a->system, 1, a->ids, &n, err, sizeof err);
    if (!bad) bad = chat_turn(m, mark, "user", a->prompt, 1, a->ids, &n, err, sizeof err);
    if (!bad) bad = chat_turn(m, mark, "assistant", "", 0, a->ids, &n, err, sizeof err);
    if (bad) {
        fflush(stdout);
        fprintf(stderr, "sqz-edge: error: %s: %s\n", a->bundle, err);
        return -1;
    }
    return n;
}

/* The prompt's ids in m->tokens: their count, or -1 after printing the error. */
static int64_t plain_prompt(const args *a, sqze_model *m) {
    char err[256];
    int32_t *ids = m->tokens; /* ctx ids in the arena */
    int64_t n = sqze_tokenize(m, a->prompt, strlen(a->prompt), 1, ids, m->ctx, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", a->bundle, err);
        return -1;
    }
    if (n == 0) {
        if (sqze_bos(m) < 0) {
            fprintf(stderr, "sqz-edge: error: %s: the prompt is empty and the vocabulary has no BOS token\n", a->bundle);
            return -1;
        }
        ids[n++] = sqze_bos(m);
    }
    return n;
}

static int run(const args *a, sqze_model *m, FILE *dump) {
    int32_t *ids = m->tokens;
    const int64_t n = a->chat ? chat_prompt(a, m) : plain_prompt(a, m); /* --chat prints its prompt */
    if (n < 0) return 1;
    if ((uint64_t)n + (uint64_t)a->n > m->ctx) {
        fprintf(stderr, "sqz-edge: error: %lld prompt tokens + %lld new exceed the context of %u (--ctx)\n",
                (long long)n, a->n, (unsigned)m->ctx);
        return 1;
    }
    char piece[4 * SQZB_MAX_TOKEN_LEN + 8];
    int first = !a->chat;
    if (!a->ids && !a->chat) {
        for (int64_t i = 0; i < n; i++) {
            size_t k = sqze_token_text(m, first, ids[i], piece, sizeof piece);
            if (k) first = 0;
            fwrite(piece, 1, k, stdout);
        }
        fflush(stdout);
    }
    const float *logits = NULL;
    int64_t n_prompt = n;
    for (int64_t i = 0; i < n_prompt; i++) logits = sqze_forward(m, ids[i], (uint32_t)i);
    uint64_t rng = a->seed > 0 ? (uint64_t)a->seed : a->seed == 0 ? 0x9E3779B97F4A7C15ULL : (uint64_t)time(NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t made = 0;
    uint32_t pos = (uint32_t)n_prompt;
    while (logits && made < a->n) {
        if (dump && fwrite(logits, 4, m->hp.vocab_size, dump) != m->hp.vocab_size) {
            fprintf(stderr, "sqz-edge: error: %s: cannot write the logits\n", a->dump);
            return 1;
        }
        int32_t next = sqze_sample(m, m->logits, (float)a->temp, (float)a->top_p, &rng);
        made++;
        if (sqze_token_is_control(m, next)) break;
        if (a->ids) {
            printf("%d\n", (int)next);
        } else {
            size_t k = sqze_token_text(m, first, next, piece, sizeof piece);
            if (k) first = 0;
            fwrite(piece, 1, k, stdout);
            fflush(stdout);
        }
        if (made == a->n) break;
        logits = sqze_forward(m, next, pos++);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!a->ids) printf("\n");
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (getenv("SQZ_EDGE_STATS")) {
        fprintf(stderr, "sqz-edge: %lld prompt + %lld new tokens, %.2f s, %.1f tokens/s\n", (long long)n_prompt,
                (long long)made, s, s > 0 ? (double)made / s : 0.0);
        print_peak();
    }
    return 0;
}

int main(int argc, char **argv) {
    args a;
    memset(&a, 0, sizeof a);
    int bad = parse(argc, argv, &a);
    if (bad) return bad;
    uint8_t key[32];
    if (a.key && read_key(a.key, key)) return 1;
    size_t size;
    const uint8_t *data = map_file(a.bundle, &size);
    if (!data) return 1;
    char err[256];
    sqze_bundle b;
    if (sqze_bundle_open(&b, data, size, a.key ? key : NULL, err, sizeof err)) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", a.bundle, err);
        return 1;
    }
    /* enough positions for any tokenization of the prompt: a token spells at least one byte,
     * plus the prefix, BOS and EOS */
    uint64_t ctx = a.ctx ? (uint64_t)a.ctx : strlen(a.prompt) + 3 + (uint64_t)a.n;
    if (!a.ctx && a.chat) ctx += (a.system ? strlen(a.system) : 0) + 24; /* the turns' marks, roles, newlines */
    if (ctx > (1u << 24)) ctx = 1u << 24;
    if (a.manifest) { /* after the checks (and the signature, with --key): provenance one can trust */
        sqze_section s;
        if (sqze_bundle_find(&b, SQZB_KIND_MANIFEST, &s) < 0 || (s.flags & SQZB_S_DEFLATE)) {
            fprintf(stderr, "sqz-edge: error: %s: no plain manifest section\n", a.bundle);
            return 1;
        }
        if (b.sig && !a.key) /* checked for corruption (CRCs), not for who made it */
            fprintf(stderr, "sqz-edge: note: %s is signed; signature not verified (no --key)\n", a.bundle);
        fwrite(s.data, 1, (size_t)s.stored, stdout);
        if (s.stored == 0 || s.data[s.stored - 1] != '\n') printf("\n"); /* a text file ends in one newline */
        return 0;
    }
    if (sqze_model_check(&b, err, sizeof err)) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", a.bundle, err);
        return 1;
    }
    size_t need = sqze_model_memory(&b, (uint32_t)ctx);
    sqze_hparams hp;
    if (!need) {
        fprintf(stderr, "sqz-edge: error: %s: a context of %llu positions is too large to lay out\n", a.bundle,
                (unsigned long long)ctx);
        return 1;
    }
    sqze_hparams_read(&b, &hp, NULL, 0);
    fprintf(stderr, "sqz-edge: %s: %s, %u layers, d_model %u, vocab %u%s; memory for %llu positions: "
                    "%zu bytes of bundle + %zu bytes of arena = %zu bytes\n",
            a.bundle, hp.arch, (unsigned)hp.n_layers, (unsigned)hp.d_model, (unsigned)hp.vocab_size,
            b.verified ? ", signature verified" : b.sig ? ", signature not verified (no --key)" : "",
            (unsigned long long)ctx, size, need, size + need);
    if (a.memory_only) return 0;
    void *arena = NULL;
    if (posix_memalign(&arena, 64, need) != 0) {
        fprintf(stderr, "sqz-edge: error: cannot allocate the arena of %zu bytes\n", need);
        return 1;
    }
    sqze_model m;
    if (sqze_model_init(&m, &b, (uint32_t)ctx, arena, need, err, sizeof err)) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", a.bundle, err);
        free(arena);
        return 1;
    }
    sqze_set_activations(&m, a.acts);
    FILE *dump = NULL;
    if (a.dump && !(dump = fopen(a.dump, "wb"))) {
        fprintf(stderr, "sqz-edge: error: %s: %s\n", a.dump, strerror(errno));
        free(arena);
        return 1;
    }
    int rc = run(&a, &m, dump);
    if (dump && fclose(dump) != 0 && rc == 0) {
        fprintf(stderr, "sqz-edge: error: %s: cannot write the logits\n", a.dump);
        rc = 1;
    }
    free(arena);
    munmap((void *)(uintptr_t)data, size);
    return rc;
}
