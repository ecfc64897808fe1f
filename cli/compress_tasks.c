/* cli/compress_tasks.c - `sqz compress --eval-task KIND FILE`: the words (the option takes two,
 * as `sqz eval --task KIND FILE` does), the check of the file before any work, and the summary
 * lines of the result against the original on the tasks. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "sqz/tasks.h"

char **sqz_cli_join_eval_task(int argc, char **argv, int *out_argc) {
    char **v = calloc((size_t)argc + 1, sizeof *v);
    if (!v) return NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--eval-task") == 0 && i + 2 < argc && argv[i + 1][0] != '-' && argv[i + 2][0] != '-' &&
            !strchr(argv[i + 1], ':')) {
            size_t l = strlen(argv[i + 1]) + strlen(argv[i + 2]) + 16;
            char *w = malloc(l);
            if (!w) break;
            snprintf(w, l, "--eval-task=%s:%s", argv[i + 1], argv[i + 2]);
            v[n++] = w;
            i += 2;
            continue;
        }
        v[n++] = argv[i];
    }
    *out_argc = n;
    return v;
}

void sqz_cli_join_eval_task_free(int argc, char **orig, int n, char **v) {
    for (int i = 0; v && i < n; i++) {
        bool ours = true;
        for (int j = 0; j < argc && ours; j++) ours = v[i] != orig[j];
        if (ours) free(v[i]);
    }
    free(v);
}

int sqz_cli_eval_task_spec(const char *spec, int *kind, const char **file) {
    const char *c = spec ? strchr(spec, ':') : NULL;
    char k[32] = "";
    if (c && (size_t)(c - spec) < sizeof k) memcpy(k, spec, (size_t)(c - spec));
    *kind = sqz_task_kind_from_name(k);
    if (!c || *kind < 0 || !c[1])
        return sqz_cli_usage_error("compress", "--eval-task '%s': expected KIND FILE, KIND one of hellaswag, "
                                   "winogrande, multiple-choice, jsonl", spec ? spec : "");
    *file = c + 1;
    return 0;
}

sqz_status sqz_cli_eval_task_check(int kind, const char *file, int64_t limit) {
    sqz_tasks *t = NULL;
    sqz_status st = sqz_tasks_read(file, (sqz_task_kind)kind, limit, &t);
    sqz_tasks_free(t);
    return st;
}

void sqz_cli_print_tasks(const sqz_compress_tasks *t) {
    if (!t->done) return;
    printf("tasks        %s %s: %lld tasks, accuracy %.2f%% -> %.2f%% (%+.2f points; McNemar p = %.3g, %s at 5%%), "
           "95%% CI [%.2f%%, %.2f%%]; same choice %.1f%%\n", t->kind, t->file, (long long)t->n,
           100 * t->accuracy_base, 100 * t->accuracy, 100 * t->delta, t->p_value,
           t->p_value < 0.05 ? "significant" : "not significant", 100 * t->ci_lo, 100 * t->ci_hi, 100 * t->agree);
    if (t->has_norm)
        printf("  acc_norm   %.2f%% -> %.2f%% (%+.2f points; McNemar p = %.3g)\n",
               100.0 * (double)t->correct_norm_base / (double)t->n, 100.0 * (double)t->correct_norm / (double)t->n,
               100 * t->delta_norm, t->p_norm);
}
