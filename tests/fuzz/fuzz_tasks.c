/* tests/fuzz/fuzz_tasks.c - libFuzzer harness for the task files of `sqz eval --task`
 * (eval/task_files.c, task_jsonl.c): llama.cpp's binary multiple-choice files first, and the
 * text kinds (hellaswag, winogrande, jsonl) on the same bytes. An accepted file's every task must
 * have its choices (2..100 for multiple-choice and jsonl's limits, 4 for hellaswag, 2 for
 * winogrande), each a sequence of text, a gold index in range (or mc1's labels); a refused one
 * must say why. Seeds: tests/data/tasks/ (the fixtures) and tests/data/hostile/tasks/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/task_internal.h"

static void check(const sqz_tasks *t) {
    for (int64_t i = 0; i < t->n; i++) {
        const sqz__task *k = &t->t[i];
        if (k->n_choices < 1 || k->n_choices > 100 || k->n_seq < k->n_choices || !k->seq) abort();
        if (t->kind != SQZ_TASK_MULTIPLE_CHOICE && (k->gold < 0 || k->gold >= k->n_choices)) abort();
        if (t->kind == SQZ_TASK_MULTIPLE_CHOICE && !k->labels) abort();
        for (int32_t s = 0; s < k->n_seq; s++)
            if (!k->seq[s].text || strlen(k->seq[s].text) > k->seq[s].len) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t size) {
    for (int k = 0; k < SQZ_TASK_KIND_COUNT; k++) {
        sqz_clear_error();
        sqz_tasks *t = NULL;
        if (sqz_tasks_parse("fuzz.tasks", (sqz_task_kind)k, d, size, 0, &t) != SQZ_OK) {
            if (getenv("SQZ_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", sqz_last_error());
            if (sqz_last_error()[0] == 0 || t) abort(); /* every failure says why, and leaves nothing */
            continue;
        }
        check(t);
        sqz_tasks_free(t);
    }
    return 0;
}
