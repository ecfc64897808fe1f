/* cli/bench_model.c - the harness of the model benchmarks (`sqz bench prune`, `sparsity`,
 * `layerdrop`): their shared options and help, the model and its CPU backend, the calibration
 * windows and evaluation ids (bench_util.c), the dense model's logits saved to a temporary file
 * as the base every result is evaluated against, a fresh copy compressed by a recipe, generation
 * speed, and the closing line with the peak memory. Each benchmark keeps only its own rows, runs
 * and tables. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli/cli.h"

void sqz_cli_bench_model_usage(FILE *out, const char *head, const sqz_opt *rows, int n) {
    const sqz_opt_group g[] = {{NULL, sqz_cli_bench_rows, sqz_cli_bench_n_rows, NULL}, {NULL, rows, n, NULL}};
    sqz_cli_help(out, head, g, 2);
}

int sqz_cli_bench_model_parse(const char *cmd, const sqz_opt *rows, int n, void *own, sqz_cli_bench_args *c,
                              int argc, char **argv) {
    const sqz_opt_group g[] = {{NULL, sqz_cli_bench_rows, sqz_cli_bench_n_rows, c}, {NULL, rows, n, own}};
    return sqz_cli_parse(cmd, g, 2, argc, argv, NULL);
}

sqz_status sqz_cli_bench_model_open(sqz_cli_bench_model *H, const char *name, const sqz_cli_bench_args *c) {
    memset(H, 0, sizeof *H);
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows as they are measured, also into a log file */
    snprintf(H->base_file, sizeof H->base_file, "/tmp/sqz_bench_%s_XXXXXX", name);
    const int fd = mkstemp(H->base_file);
    if (fd >= 0) close(fd);
    H->have_base = fd >= 0;
    H->c = c;
    H->calib = c->calib ? c->calib : sqz_cli_bench_text();
    H->eval = c->eval ? c->eval : H->calib;
    H->model = c->path ? c->path : sqz_cli_default_smollm2();
    H->t0 = sqz_now_seconds();
    sqz_status st = H->have_base ? sqz_model_open(H->model, NULL, &H->orig) : SQZ_ERR_IO;
    if (st == SQZ_OK) st = sqz_backend_cpu((int)c->threads, &H->be);
    return st;
}

sqz_status sqz_cli_bench_model_data(sqz_cli_bench_model *H, sqz_session **session) {
    sqz_cli_calib cc;
    sqz_cli_calib_defaults(&cc);
    cc.text = H->calib;
    cc.samples = H->c->n;
    cc.ctx = H->c->ctx;
    cc.threads = H->c->threads;
    return sqz_cli_bench_data_open(H->orig, H->be, &cc, H->eval, &H->d, session);
}

sqz_session_opts sqz_cli_bench_session_opts(const sqz_cli_bench_model *H, int64_t max_tokens) {
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = (int)H->c->threads;
    so.backend = H->be;
    so.max_tokens = max_tokens;
    return so;
}

sqz_status sqz_cli_bench_evaluate(const sqz_cli_bench_model *H, const sqz_model *m, bool save_base,
                                  sqz_eval_result *r) {
    sqz_session *s = NULL;
    const sqz_session_opts so = sqz_cli_bench_session_opts(H, H->c->eval_ctx);
    sqz_eval_opts eo = sqz_cli_bench_eval_opts(&H->d, H->c->eval_ctx, H->c->eval_chunks);
    if (save_base) eo.save_base = H->base_file;
    else eo.base_logits = H->base_file;
    sqz_status st = sqz_session_new(m, &so, &s);
    if (st == SQZ_OK) st = sqz_eval_perplexity(s, H->d.ids, (int64_t)H->d.n_ids, &eo, r);
    sqz_session_free(s);
    return st;
}

sqz_status sqz_cli_bench_compress(const sqz_cli_bench_model *H, const char *const *stages, double *seconds,
                                  sqz_model **out) {
    sqz_model *m = NULL;
    sqz_recipe rc = {0};
    sqz_compress_report rep;
    memset(&rep, 0, sizeof rep);
    sqz_compress_opts co = sqz_compress_default_opts();
    sqz_compress_env env = {.windows = &H->d.w, .session_opts = sqz_cli_bench_session_opts(H, H->d.w.ctx)};
    sqz_status st = sqz_model_open(H->model, NULL, &m);
    for (int i = 0; st == SQZ_OK && stages[i]; i += 2) st = sqz_recipe_add(&rc, stages[i], stages[i + 1]);
    if (st == SQZ_OK) st = sqz_recipe_check_model(&rc, m, true);
    const double t0 = sqz_now_seconds();
    if (st == SQZ_OK) st = sqz_compress_run(m, &rc, &env, &co, &rep);
    *seconds = sqz_now_seconds() - t0;
    sqz_compress_report_free(&rep);
    sqz_recipe_free(&rc);
    if (st == SQZ_OK) *out = m;
    else sqz_model_free(m);
    return st;
}

sqz_status sqz_cli_bench_gen(const sqz_cli_bench_model *H, const sqz_model *m, int64_t gen, double tps[2]) {
    const sqz_session_opts so = sqz_cli_bench_session_opts(H, 0);
    return sqz_cli_gen_speed(m, &so, H->d.ids, gen, tps);
}

void sqz_cli_bench_model_peak(const sqz_cli_bench_model *H) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("\npeak RSS %.1f MB (F32 checkpoint %.1f MB); %.1f s in all\n", (double)ru.ru_maxrss / 1024.0,
           4.0 * (double)sqz_model_param_count(H->orig) / 1e6, sqz_now_seconds() - H->t0);
}

void sqz_cli_bench_model_close(sqz_cli_bench_model *H) {
    if (H->have_base) unlink(H->base_file);
    sqz_cli_bench_data_free(&H->d);
    sqz_backend_free(H->be);
    sqz_model_free(H->orig);
    memset(H, 0, sizeof *H);
}
