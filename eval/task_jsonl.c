/*
 * eval/task_jsonl.c - lm-evaluation-harness-style multiple choice, one JSON document a line:
 *   {"context": "...", "choices": ["...", ...], "gold": i}
 * Each choice is the continuation " " + choice of the context (lm-eval's target_delimiter); the
 * context's trailing blanks move to the continuation, as lm-eval's _encode_pair does. The
 * sequences: context + continuation per choice, and the context alone (where the continuation's
 * tokens begin).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/task_internal.h"

/* The context without its trailing whitespace (moved to the continuation), as lm-eval. */
static size_t context_len(const char *c) {
    size_t n = strlen(c);
    while (n > 0 && (c[n - 1] == ' ' || c[n - 1] == '\t' || c[n - 1] == '\n' || c[n - 1] == '\r')) n--;
    return n;
}

static sqz_status add_doc(sqz_tasks *ts, const cJSON *ctx, const cJSON *ch, int gold) {
    const int32_t n = (int32_t)cJSON_GetArraySize(ch);
    sqz__task *t = sqz__tasks_add(ts, n, n + 1);
    if (!t || !(t->choice_bytes = calloc((size_t)n, sizeof *t->choice_bytes))) return SQZ_ERR_NOMEM;
    t->gold = gold;
    const char *c = ctx->valuestring;
    const size_t nc = context_len(c), full = strlen(c);
    for (int32_t i = 0; i < n; i++) {
        const char *s = cJSON_GetArrayItem(ch, i)->valuestring;
        t->choice_bytes[i] = strlen(s);
        /* context (trimmed) + its trailing blanks + " " + choice */
        char *tail = malloc(full - nc + 2);
        if (!tail) return SQZ_ERR_NOMEM;
        memcpy(tail, c + nc, full - nc);
        tail[full - nc] = ' ';
        sqz_status st = sqz__tseq_set(&t->seq[i], c, nc, tail, full - nc + 1, s, strlen(s));
        free(tail);
        SQZ_TRY(st);
    }
    return sqz__tseq_set(&t->seq[n], c, nc, NULL, 0, NULL, 0);
}

/* Checks one document; its reason on a bad one, NULL when it is good. */
static const char *check_doc(const cJSON *d, const cJSON **ctx, const cJSON **ch, int *gold) {
    if (!cJSON_IsObject(d)) return "not a JSON object";
    *ctx = cJSON_GetObjectItemCaseSensitive(d, "context");
    *ch = cJSON_GetObjectItemCaseSensitive(d, "choices");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(d, "gold");
    if (!cJSON_IsString(*ctx)) return "\"context\" is missing or not a string";
    if (!cJSON_IsArray(*ch) || cJSON_GetArraySize(*ch) < 2) return "\"choices\" is not an array of 2 or more strings";
    if (cJSON_GetArraySize(*ch) > 100) return "\"choices\" has more than 100 strings";
    const cJSON *e;
    cJSON_ArrayForEach(e, *ch) {
        if (!cJSON_IsString(e)) return "\"choices\" holds something other than a string";
        if (!e->valuestring[0]) return "\"choices\" holds an empty string";
    }
    if (!cJSON_IsNumber(g) || g->valuedouble != floor(g->valuedouble)) return "\"gold\" is not an integer";
    /* range first: converting a double outside int's range is undefined (fuzz_tasks: 8.9e120) */
    if (!(g->valuedouble >= 0 && g->valuedouble < (double)cJSON_GetArraySize(*ch)))
        return "\"gold\" is not the index of one of the choices";
    *gold = (int)g->valuedouble;
    if (!context_len((*ctx)->valuestring)) return "\"context\" is empty (nothing to condition the choices on)";
    return NULL;
}

sqz_status sqz__tasks_parse_jsonl(sqz_tasks *ts, const char *data, size_t size, int64_t limit) {
    int64_t lineno = 0;
    for (size_t i = 0; i < size;) {
        size_t j = i;
        while (j < size && data[j] != '\n') j++;
        lineno++;
        size_t k = i;
        while (k < j && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r')) k++;
        if (k == j) {
            i = j + 1;
            continue;
        }
        SQZ_RETURN_IF(memchr(data + i, 0, j - i), SQZ_ERR_FORMAT, "%s:%lld: a NUL byte", ts->path, (long long)lineno);
        const char *end = NULL;
        cJSON *d = cJSON_ParseWithLengthOpts(data + i, j - i, &end, 0);
        SQZ_RETURN_IF(!d, SQZ_ERR_FORMAT, "%s:%lld: not JSON (at column %lld)", ts->path, (long long)lineno,
                      (long long)((end ? end : cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : data + i) - (data + i)) + 1);
        const cJSON *ctx = NULL, *ch = NULL;
        int gold = 0;
        const char *why = check_doc(d, &ctx, &ch, &gold);
        sqz_status st = why ? SQZ_ERROR(SQZ_ERR_FORMAT, "%s:%lld: %s", ts->path, (long long)lineno, why) : SQZ_OK;
        if (st == SQZ_OK && (!limit || ts->n < limit)) st = add_doc(ts, ctx, ch, gold);
        cJSON_Delete(d);
        SQZ_TRY(st);
        i = j + 1;
    }
    return SQZ_OK;
}
