/* cli/bench_util.c - what the benchmarks share: the default text, CPU time, and greedy
 * generation speed. */
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"

const char *sqz_cli_bench_text(void) {
    static char buf[4096];
    const char *d = getenv("SQZ_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/data/wiki.test.raw", d && *d ? d : "../shared");
    return buf;
}

double sqz_cli_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sqz_status sqz_cli_gen_speed(const sqz_model *m, const sqz_session_opts *base, const int32_t *ids, int64_t gen,
                             double tps[2]) {
    sqz_session *s = NULL;
    sqz_session_opts so = *base;
    so.max_tokens = 16 + gen;
    sqz_status st = sqz_session_new(m, &so, &s);
    if (st != SQZ_OK) return st;
    int32_t *out = malloc((size_t)gen * sizeof *out);
    int64_t n_out = 0;
    sqz_sample_opts sp = {0};
    st = out ? sqz_generate(s, ids, 16, 1, -1, &sp, NULL, NULL, out, &n_out) : SQZ_ERR_NOMEM;
    tps[0] = tps[1] = 0;
    for (int rep = 0; rep < 3 && st == SQZ_OK; rep++) {
        const double t0 = sqz_cli_now_s(), c0 = sqz_cli_cpu_s();
        st = sqz_generate(s, ids, 16, gen, -1, &sp, NULL, NULL, out, &n_out);
        const double dt = sqz_cli_now_s() - t0, dc = sqz_cli_cpu_s() - c0;
        if (dt > 0 && (double)n_out / dt > tps[0]) tps[0] = (double)n_out / dt;
        if (dc > 0 && (double)n_out / dc > tps[1]) tps[1] = (double)n_out / dc;
    }
    free(out);
    sqz_session_free(s);
    return st;
}
