/* cli/calib_common.c - what `sqz calibrate` and `sqz compress` share: the calibration
 * options, reading the text into windows, and the session that runs them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return false;
    *v = x;
    return true;
}

void sqz_cli_calib_defaults(sqz_cli_calib *c) {
    memset(c, 0, sizeof *c);
    c->samples = SQZ_CALIB_DEFAULT_SAMPLES;
    c->ctx = SQZ_CALIB_DEFAULT_CTX;
    c->seed = SQZ_CALIB_DEFAULT_SEED;
    c->sample_rows = -1;
}

int sqz_cli_calib_option(const char *cmd, sqz_cli_calib *c, int argc, char **argv, int *i) {
    const char *o = argv[*i];
    bool has = *i + 1 < argc;
    int64_t v;
    if ((!strcmp(o, "--calib") || !strcmp(o, "--text")) && has) c->text = argv[++*i];
    else if (!strcmp(o, "--tokenizer") && has) c->tokenizer = argv[++*i];
    else if ((!strcmp(o, "--calib-samples") || !strcmp(o, "--samples")) && has) {
        if (!parse_i64(argv[++*i], 1, 1 << 20, &c->samples))
            return sqz_cli_usage_error(cmd, "bad %s '%s' (1 or more windows)", o, argv[*i]);
    } else if ((!strcmp(o, "--calib-ctx") || !strcmp(o, "--ctx")) && has) {
        if (!parse_i64(argv[++*i], 2, 1 << 20, &c->ctx))
            return sqz_cli_usage_error(cmd, "bad %s '%s' (2 or more tokens)", o, argv[*i]);
    } else if (!strcmp(o, "--seed") && has) {
        if (!parse_i64(argv[++*i], 0, INT64_MAX, &v)) return sqz_cli_usage_error(cmd, "bad --seed '%s'", argv[*i]);
        c->seed = (uint64_t)v;
    } else if (!strcmp(o, "--sample-rows") && has) {
        if (!parse_i64(argv[++*i], 0, 1 << 20, &c->sample_rows))
            return sqz_cli_usage_error(cmd, "bad --sample-rows '%s'", argv[*i]);
    } else if (!strcmp(o, "--threads") && has) {
        if (!parse_i64(argv[++*i], 0, 1024, &v)) return sqz_cli_usage_error(cmd, "bad --threads '%s'", argv[*i]);
        c->threads = (int)v;
    } else {
        return -1;
    }
    return 0;
}

sqz_status sqz_cli_calib_open(const sqz_cli_calib *c, const sqz_model *m, sqz_backend *be, sqz_calib_windows *w,
                              sqz_session **s) {
    char *text = NULL;
    size_t len = 0;
    sqz_tokenizer *tok = NULL;
    *s = NULL;
    memset(w, 0, sizeof *w);
    sqz_status st = sqz_read_file(c->text, (size_t)1 << 31, &text, &len);
    if (st == SQZ_OK) st = sqz_tokenizer_new(&m->vocab, &tok);
    if (st == SQZ_OK) st = sqz_calib_windows_make(tok, text, len, c->samples, c->ctx, c->seed, w);
    free(text);
    sqz_tokenizer_free(tok);
    if (st == SQZ_OK) {
        sqz_session_opts so = sqz_session_default_opts();
        so.n_threads = c->threads;
        so.max_tokens = c->ctx;
        so.backend = be;
        st = sqz_session_new(m, &so, s);
    }
    if (st != SQZ_OK) sqz_calib_windows_free(w);
    return st;
}
