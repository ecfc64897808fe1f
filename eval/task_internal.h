/*
 * eval/task_internal.h - the task set that eval/task_files.c reads and eval/tasks.c scores.
 * Not public.
 */
#ifndef SQZ_TASK_INTERNAL_H
#define SQZ_TASK_INTERNAL_H

#include <stdint.h>

#include "core/internal.h"
#include "sqz/tasks.h"

/* One sequence: text to tokenize, its ids once tokenized. */
typedef struct sqz__tseq {
    char *text;
    size_t len;
    int32_t *ids;
    size_t n_ids;
} sqz__tseq;

/* One task. Sequences by kind:
 *   hellaswag, multiple-choice: seq[i] = context + " " + choice i (n_choices of them);
 *   winogrande: seq[0..1] = first + choice i + second, seq[2..3] = first + choice i;
 *   jsonl: seq[i] = context + continuation i, seq[n_choices] = the context alone. */
typedef struct sqz__task {
    int32_t n_choices, gold; /* gold: the right choice (0-based); multiple-choice: -1 (labels) */
    int32_t *labels;         /* multiple-choice: mc1's labels (1 = right), n_choices of them */
    size_t *choice_bytes;    /* jsonl: each choice's length in bytes (acc_norm) */
    sqz__tseq *seq;
    int32_t n_seq;
} sqz__task;

struct sqz_tasks {
    sqz_task_kind kind;
    char *path;
    sqz__task *t;
    int64_t n, cap;
    bool tokenized;
};

/* What scoring a task asks of the batch (task_batch.c): sequences seq[0..n), the log-probability
 * lp[s][t] of each target t in [from[s], to[s]) (t >= 1: predicted by position t - 1), and, when
 * quirk_tok >= 0, the log-probability of quirk_tok after seq 0's last token (quirk_lp). The
 * batch fills lp and quirk_lp; the other fields are its plan. */
enum { SQZ__MAX_CHOICES = 101 };
typedef struct sqz__ask {
    const sqz__tseq *seq;
    int32_t n;
    size_t from[SQZ__MAX_CHOICES], to[SQZ__MAX_CHOICES];
    int32_t quirk_tok;
    float quirk_lp;
    float *lp[SQZ__MAX_CHOICES];
    /* winogrande's scoring ranges (tasks.c) */
    size_t nb[2], last[2];
    /* the plan: shared prefix [0, k), its rows from position pf at row_pre; sequence s's rows
     * from position first[s] at row_seq[s]; seq 0's last position at quirk_row */
    size_t k, pf, first[SQZ__MAX_CHOICES];
    int64_t row_pre, row_seq[SQZ__MAX_CHOICES], quirk_row;
} sqz__ask;

/* The longest prefix of token ids seq[0..n) share (tasks.c), and their shortest length. */
size_t sqz__tseq_common_prefix(const sqz__tseq *seq, int32_t n, size_t *min_len);

/* The tokens a's sequences take in one window: the shared prefix once, each rest after it. */
int64_t sqz__ask_footprint(sqz__ask *a);
/* Runs asks[0..n) in windows of the session's max_tokens (each ask fits: sqz__ask_footprint),
 * filling their lp (malloc'd; sqz__asks_release frees them) and quirk_lp. *tokens: tokens run. */
sqz_status sqz__asks_run(sqz_session *s, sqz__ask *asks, int64_t n, int64_t *tokens);
void sqz__asks_release(sqz__ask *asks, int64_t n);

/* Appends a task with n_seq empty sequences and n_choices choices; NULL on out of memory. */
sqz__task *sqz__tasks_add(sqz_tasks *ts, int32_t n_choices, int32_t n_seq);
/* Sets a sequence's text to the concatenation of up to three pieces (b, c may be NULL). */
sqz_status sqz__tseq_set(sqz__tseq *s, const char *a, size_t na, const char *b, size_t nb, const char *c, size_t nc);

/* The readers of each kind (task_files.c, task_jsonl.c): data[0..size) is the whole file. */
sqz_status sqz__tasks_parse_hellaswag(sqz_tasks *ts, const char *data, size_t size, int64_t limit);
sqz_status sqz__tasks_parse_winogrande(sqz_tasks *ts, const char *data, size_t size, int64_t limit);
sqz_status sqz__tasks_parse_mc(sqz_tasks *ts, const uint8_t *data, size_t size, int64_t limit);
sqz_status sqz__tasks_parse_jsonl(sqz_tasks *ts, const char *data, size_t size, int64_t limit);

#endif
