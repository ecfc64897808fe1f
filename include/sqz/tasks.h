/*
 * sqz/tasks.h - accuracy on tasks: HellaSwag, WinoGrande, multiple choice (MMLU, ARC,
 * TruthfulQA) and lm-evaluation-harness-style JSONL, scored as llama.cpp's perplexity tool
 * scores them, and the paired comparison of two models on the same tasks.
 *
 * Files (read as llama-perplexity reads them; a malformed file is refused whole, naming the file
 * and the place):
 *   hellaswag        6 lines a task: context, gold index 0..3, four endings. Each ending is
 *                    scored on "context ending": the mean log-probability of its tokens after the
 *                    prefix the four sequences share.
 *   winogrande       CSV lines "index,sentence,choice1,choice2,answer(1|2)"; the sentence holds
 *                    one "_". Each choice is put in the blank; the tokens after the choice are
 *                    scored (all of the tokens after the shared prefix when either sequence has 3
 *                    or fewer of them), the last one left out, as llama-perplexity does, including
 *                    its use of the first sequence's last logits for the second's first token when
 *                    the choice is not skipped.
 *   multiple-choice  llama.cpp's binary files (mmlu-validation.bin, arc-*-validation.bin,
 *                    truthful-qa-validation.bin): u32 n_task | u32 offset[n_task] | per task:
 *                    string question | mc1 | mc2, where string = u32 size + bytes and an answer
 *                    set = u32 n (<= 100) | n strings | i32 label[n]. Scored on "question answer"
 *                    over mc1 like hellaswag; right when the best answer's label is 1.
 *   jsonl            one JSON object a line: {"context": str, "choices": [str, ...], "gold": i};
 *                    lm-evaluation-harness's protocol: "context" + " " + choice, the continuation
 *                    being the tokens after those of the context (trailing spaces of the context
 *                    move to the continuation); acc = best sum of log-probabilities, acc_norm =
 *                    best sum divided by the choice's length in bytes.
 * Tokens: the model's tokenizer with its special tokens (BOS when the vocabulary adds one), as
 * llama.cpp's common_tokenize(.., true).
 *
 * Evaluation: as llama-perplexity batches them, each task's shared prefix once and each ending
 * after it in the same window (sqz_forward_spans), as many tasks to a window as the session's
 * max_tokens holds. Log-probabilities are f32 logits' log-softmax in double.
 *
 *   sqz_tasks *t;
 *   sqz_tasks_read("hellaswag_val_full.txt", SQZ_TASK_HELLASWAG, 0, &t);
 *   sqz_tasks_tokenize(t, tok);
 *   sqz_task_result r;
 *   sqz_eval_tasks(session, t, NULL, &r);   // session max_tokens = sqz_tasks_window(t, vocab)
 *   printf("%lld / %lld\n", (long long)r.correct, (long long)r.n);
 *   sqz_task_result_free(&r);
 */
#ifndef SQZ_TASKS_H
#define SQZ_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/progress.h"
#include "sqz/runtime.h"
#include "sqz/status.h"
#include "sqz/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_task_kind {
    SQZ_TASK_HELLASWAG = 0,
    SQZ_TASK_WINOGRANDE = 1,
    SQZ_TASK_MULTIPLE_CHOICE = 2,
    SQZ_TASK_JSONL = 3,
    SQZ_TASK_KIND_COUNT
} sqz_task_kind;

/* "hellaswag", "winogrande", "multiple-choice", "jsonl"; NULL when out of range. */
SQZ_API const char *sqz_task_kind_name(sqz_task_kind k);
/* The kind named `name` (the names above), or -1. */
SQZ_API int sqz_task_kind_from_name(const char *name);

typedef struct sqz_tasks sqz_tasks;

/*
 * Reads the tasks of a file of kind k: the first `limit` of them (0 = all; llama-perplexity's
 * --*-tasks N picks N at random instead). The whole file is checked, even beyond limit.
 * Errors: SQZ_ERR_IO, SQZ_ERR_FORMAT (message: the file, the line or byte offset, the reason),
 * SQZ_ERR_INVALID_ARG (a kind out of range), SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_tasks_read(const char *path, sqz_task_kind k, int64_t limit, sqz_tasks **out);
/* The same from bytes in memory; path names them in messages. */
SQZ_API sqz_status sqz_tasks_parse(const char *path, sqz_task_kind k, const void *data, size_t size, int64_t limit,
                                   sqz_tasks **out);
SQZ_API void sqz_tasks_free(sqz_tasks *t);
SQZ_API int64_t sqz_tasks_count(const sqz_tasks *t);
SQZ_API sqz_task_kind sqz_tasks_kind(const sqz_tasks *t);

/* Tokenizes every sequence the tasks will evaluate (again, if called twice). Errors: the
 * tokenizer's, SQZ_ERR_NOMEM. */
SQZ_API sqz_status sqz_tasks_tokenize(sqz_tasks *t, const sqz_tokenizer *tok);
/* The most tokens one task takes in a window (its shared prefix once, then each sequence's rest;
 * after sqz_tasks_tokenize, 0 before): the session's max_tokens must reach it. */
SQZ_API int64_t sqz_tasks_max_tokens(const sqz_tasks *t);
/* The window to give the session (max_tokens): tasks are packed into windows of this many
 * tokens, each window one pass over the weights. 512, fewer when the window's logits (rows x
 * vocab floats) would pass 256 MB, and never less than sqz_tasks_max_tokens. */
SQZ_API int64_t sqz_tasks_window(const sqz_tasks *t, int64_t vocab);
/* The tokens evaluated in all (shared prefixes once): the work, for progress and speed. */
SQZ_API int64_t sqz_tasks_total_tokens(const sqz_tasks *t);

typedef struct sqz_task_opts {
    sqz_progress_fn progress; /* optional: done/total in tokens evaluated */
    void *progress_user;
} sqz_task_opts;

/* The outcome of one task. */
typedef struct sqz_task_outcome {
    int32_t choice;      /* the best-scored choice */
    int32_t choice_norm; /* jsonl: the best after dividing by the choice's bytes; else = choice */
    bool correct, correct_norm;
    bool tie; /* the two best scores (of the headline metric) lie within 1e-6 of each other */
    double best, second; /* the two best scores of the headline metric (second: -inf with one choice) */
} sqz_task_outcome;

typedef struct sqz_task_result {
    sqz_task_kind kind;
    int64_t n;       /* tasks scored */
    int64_t correct; /* headline metric: llama-perplexity's for its kinds, acc for jsonl */
    double accuracy, ci_lo, ci_hi;  /* correct / n, 95% Wilson score interval (llama.cpp's) */
    int64_t correct_norm;           /* jsonl: acc_norm (others: = correct) */
    double accuracy_norm, ci_norm_lo, ci_norm_hi;
    int64_t n_ties;                 /* tasks whose decision is a tie within 1e-6 */
    int64_t n_choices;              /* all the choices of all the tasks (random chance = n / n_choices) */
    sqz_activations activations;    /* the session's */
    int64_t tokens;                 /* tokens evaluated */
    double seconds;
    sqz_task_outcome *outcomes;     /* n of them, owned */
} sqz_task_result;

/*
 * Scores every task of t (tokenized) with the decoder in s. Errors: SQZ_ERR_INVALID_ARG (not
 * tokenized, a sequence longer than the session's max_tokens, vocabulary mismatch), SQZ_ERR_ARCH
 * (an encoder), the forward pass's errors. *r owns outcomes: sqz_task_result_free.
 */
SQZ_API sqz_status sqz_eval_tasks(sqz_session *s, const sqz_tasks *t, const sqz_task_opts *o, sqz_task_result *r);
SQZ_API void sqz_task_result_free(sqz_task_result *r);

/* The paired comparison of a model and a base on the same tasks. */
typedef struct sqz_task_delta {
    int64_t n, both, only_model, only_base, neither; /* right in both, in the model only, ... */
    double delta;    /* accuracy(model) - accuracy(base) */
    double p_value;  /* McNemar's exact test (two-sided binomial on the discordant pairs) */
    double agree;    /* fraction of tasks where both chose the same answer */
} sqz_task_delta;

/* Compares two results over the same tasks (same n); `norm` compares the jsonl acc_norm
 * decisions. SQZ_ERR_INVALID_ARG when the counts differ. */
SQZ_API sqz_status sqz_task_compare(const sqz_task_result *model, const sqz_task_result *base, bool norm,
                                    sqz_task_delta *d);

/* McNemar's exact two-sided p-value for b and c discordant pairs: min(1, 2 P[X <= min(b, c)]),
 * X ~ Binomial(b + c, 1/2); 1 when b + c = 0. */
SQZ_API double sqz_mcnemar_exact(int64_t b, int64_t c);

/* The 95% Wilson score interval of k successes in n trials (llama-perplexity's). */
SQZ_API void sqz_wilson95(int64_t k, int64_t n, double *lo, double *hi);

/*
 * The result as JSON text: {"task": kind, "file": .., "model": .., "n", "correct", "accuracy",
 * "ci95": [lo, hi], "ties", "activations", "seconds", "tokens", "choices" and "right" (each task's choice, and 1/0),
 * and for jsonl "correct_norm",
 * "accuracy_norm", "ci95_norm"; with a base (base and d non-NULL): "base": {"model", "correct",
 * "accuracy", "ci95", ...}, "delta", "mcnemar_p", "both", "only_model", "only_base", "neither",
 * "agree"}. Labels may be NULL. malloc'd (free()), NULL on out of memory.
 */
SQZ_API char *sqz_task_report_json(const sqz_task_result *r, const char *file, const char *model,
                                   const sqz_task_result *base, const char *base_model, const sqz_task_delta *d);

#ifdef __cplusplus
}
#endif
#endif
