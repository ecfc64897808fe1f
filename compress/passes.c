/*
 * compress/passes.c - THE pass table: one row per pass, in the order --help lists them. Each
 * row (name, options, statistics, checks, steps: sqz_pass in sqz/compress.h) is defined in the
 * pass's own file; a new pass is one line here plus that file. The command line (--NAME SPEC),
 * recipes, the help text, the recipe checks and the pipeline all read this table and nothing
 * else about a pass.
 */
#include <pthread.h>
#include <string.h>

#include "compress/compress_internal.h"

static const sqz_pass *const passes[] = {
    &sqz__pass_drop_layers, /* pass_drop.c */
    &sqz__pass_pad_ffn,     /* pass_pad.c */
    &sqz__pass_quant,       /* pass_quant.c */
    &sqz__pass_prune,       /* pass_prune.c */
    &sqz__pass_sparsity,    /* pass_sparsity.c */
    &sqz__pass_cast,        /* pass_cast.c */
    &sqz__pass_rotate,      /* pass_rotate.c */
};
#define N_PASSES ((int)(sizeof passes / sizeof passes[0]))

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_rows(void) {
    for (int i = 0; i < N_PASSES; i++)
        if (passes[i]->init) passes[i]->init();
}

const sqz_pass *const *sqz_passes(int *n) {
    pthread_once(&init_once, init_rows);
    if (n) *n = N_PASSES;
    return passes;
}

const sqz_pass *sqz_pass_find(const char *name) {
    int n = 0;
    const sqz_pass *const *p = sqz_passes(&n);
    for (int i = 0; name && i < n; i++)
        if (!strcmp(p[i]->name, name)) return p[i];
    return NULL;
}

sqz_pass_help sqz_pass_describe(const sqz_pass *p) {
    return (sqz_pass_help){.name = p->name, .metavar = p->metavar, .summary = p->summary, .examples = p->examples,
                           .opts = p->opts, .n_opts = p->n_opts};
}

unsigned sqz_stage_needs(const sqz_stage *s, unsigned *required) {
    unsigned req = 0, got = s->pass->needs ? s->pass->needs(s->args, &req) : 0;
    if (required) *required = req;
    return got;
}
