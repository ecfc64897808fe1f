/*
 * compress/pass_drop.c - `--drop-layers LIST`: removes the listed blocks (explicit indices of
 * the model as it is when the stage runs) with the model-editing API (sqz/edit.h), which
 * renumbers the rest. Choosing the blocks by importance is the layerdrop pass's job; this one
 * is the path every structural pass takes: edit, validate, write.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"
#include "sqz/edit.h"

const sqz_opt sqz__drop_opts[SQZ__DROP_N_OPTS] = {
    {.name = "layers", .type = SQZ_OPT_STRING, .offset = offsetof(sqz__drop_args, list),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .metavar = "LIST",
     .help = "block indices to remove, comma-separated, ranges allowed (3,4 or 2-5)"},
};

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One item "N" or "A-B" of the list into a->layers. */
static sqz_status drop_item(sqz__drop_args *a, const char *item, size_t len, const char *spec) {
    char buf[32], *end;
    SQZ_RETURN_IF(len == 0 || len >= sizeof buf, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': empty or too long item (block indices such as 3,4 or 2-5)", spec);
    memcpy(buf, item, len);
    buf[len] = 0;
    long lo = strtol(buf, &end, 10), hi = lo;
    if (*end == '-' && end != buf) hi = strtol(end + 1, &end, 10);
    SQZ_RETURN_IF(*end || buf[0] == '-' || lo < 0 || hi < lo || hi > 65535, SQZ_ERR_INVALID_ARG,
                  "--drop-layers '%s': bad item '%s' (block indices such as 3,4 or 2-5)", spec, buf);
    for (long l = lo; l <= hi; l++) {
        SQZ_RETURN_IF(a->n >= (int)(sizeof a->layers / sizeof a->layers[0]), SQZ_ERR_INVALID_ARG,
                      "--drop-layers '%s': more than %d blocks", spec, (int)(sizeof a->layers / sizeof a->layers[0]));
        a->layers[a->n++] = (int32_t)l;
    }
    return SQZ_OK;
}

sqz_status sqz__drop_check(void *args, uint64_t given, const char *spec) {
    (void)given;
    sqz__drop_args *a = args;
    a->n = 0;
    for (const char *p = a->list; p;) {
        const char *e = strchr(p, ',');
        SQZ_TRY(drop_item(a, p, e ? (size_t)(e - p) : strlen(p), spec));
        p = e ? e + 1 : NULL;
    }
    qsort(a->layers, (size_t)a->n, sizeof a->layers[0], cmp_i32);
    for (int i = 1; i < a->n; i++)
        SQZ_RETURN_IF(a->layers[i] == a->layers[i - 1], SQZ_ERR_INVALID_ARG, "--drop-layers '%s': block %d listed twice",
                      spec, (int)a->layers[i]);
    a->list = NULL; /* points into the parser's copy: not kept */
    return SQZ_OK;
}

sqz_status sqz__drop_model_step(sqz_pass_ctx *c, const void *args) {
    const sqz__drop_args *a = args;
    const int64_t before = c->m->hp.n_layers;
    for (int i = 0; i < a->n; i++)
        SQZ_RETURN_IF(a->layers[i] >= before, SQZ_ERR_INVALID_ARG,
                      "--drop-layers: block %d does not exist (the model has blocks 0..%lld at this stage)",
                      (int)a->layers[i], (long long)before - 1);
    SQZ_TRY(sqz_model_remove_layers(c->m, a->layers, a->n));
    int k = snprintf(c->stage->note, sizeof c->stage->note, "removed block%s", a->n > 1 ? "s" : "");
    for (int i = 0; i < a->n && k > 0 && (size_t)k < sizeof c->stage->note; i++)
        k += snprintf(c->stage->note + k, sizeof c->stage->note - (size_t)k, "%s %d", i ? "," : "", (int)a->layers[i]);
    if (k > 0 && (size_t)k < sizeof c->stage->note)
        snprintf(c->stage->note + k, sizeof c->stage->note - (size_t)k, " (%lld -> %lld blocks)", (long long)before,
                 (long long)c->m->hp.n_layers);
    return SQZ_OK;
}
