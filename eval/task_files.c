/*
 * eval/task_files.c - the task files llama-perplexity reads (tools/perplexity/perplexity.cpp:
 * hellaswag_score, load_winogrande_from_csv, multiple_choice_score), read the same way, and the
 * task set they fill. A malformed file is refused whole, naming the file and the place.
 */
#include <stdlib.h>
#include <string.h>

#include "eval/task_internal.h"
#include "sqz/io.h"

static const char *const kind_names[SQZ_TASK_KIND_COUNT] = {"hellaswag", "winogrande", "multiple-choice", "jsonl"};

const char *sqz_task_kind_name(sqz_task_kind k) {
    return (unsigned)k < SQZ_TASK_KIND_COUNT ? kind_names[k] : NULL;
}

int sqz_task_kind_from_name(const char *name) {
    for (int k = 0; name && k < SQZ_TASK_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0) return k;
    return -1;
}

sqz__task *sqz__tasks_add(sqz_tasks *ts, int32_t n_choices, int32_t n_seq) {
    if (ts->n == ts->cap) {
        int64_t cap = ts->cap ? 2 * ts->cap : 256;
        sqz__task *t = realloc(ts->t, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        ts->t = t;
        ts->cap = cap;
    }
    sqz__task *t = &ts->t[ts->n];
    memset(t, 0, sizeof *t);
    t->seq = calloc((size_t)n_seq, sizeof *t->seq);
    if (!t->seq) return NULL;
    t->n_seq = n_seq;
    t->n_choices = n_choices;
    t->gold = -1;
    ts->n++;
    return t;
}

sqz_status sqz__tseq_set(sqz__tseq *s, const char *a, size_t na, const char *b, size_t nb, const char *c, size_t nc) {
    s->text = malloc(na + nb + nc + 1);
    if (!s->text) return SQZ_ERR_NOMEM;
    memcpy(s->text, a, na);
    if (nb) memcpy(s->text + na, b, nb);
    if (nc) memcpy(s->text + na + nb, c, nc);
    s->len = na + nb + nc;
    s->text[s->len] = 0;
    return SQZ_OK;
}

void sqz_tasks_free(sqz_tasks *ts) {
    if (!ts) return;
    for (int64_t i = 0; i < ts->n; i++) {
        sqz__task *t = &ts->t[i];
        for (int32_t s = 0; s < t->n_seq; s++) {
            free(t->seq[s].text);
            free(t->seq[s].ids);
        }
        free(t->seq);
        free(t->labels);
        free(t->choice_bytes);
    }
    free(ts->t);
    free(ts->path);
    free(ts);
}

int64_t sqz_tasks_count(const sqz_tasks *t) { return t ? t->n : 0; }
sqz_task_kind sqz_tasks_kind(const sqz_tasks *t) { return t->kind; }

sqz_status sqz_tasks_parse(const char *path, sqz_task_kind k, const void *data, size_t size, int64_t limit,
                           sqz_tasks **out) {
    *out = NULL;
    SQZ_RETURN_IF((unsigned)k >= SQZ_TASK_KIND_COUNT || limit < 0 || (!data && size), SQZ_ERR_INVALID_ARG,
                  "tasks: kind %d, limit %lld", (int)k, (long long)limit);
    sqz_tasks *ts = calloc(1, sizeof *ts);
    if (!ts) return SQZ_ERR_NOMEM;
    ts->kind = k;
    ts->path = sqz__strdup(path ? path : "tasks");
    if (!ts->path) {
        free(ts);
        return SQZ_ERR_NOMEM;
    }
    sqz_status st;
    switch (k) {
    case SQZ_TASK_HELLASWAG: st = sqz__tasks_parse_hellaswag(ts, data, size, limit); break;
    case SQZ_TASK_WINOGRANDE: st = sqz__tasks_parse_winogrande(ts, data, size, limit); break;
    case SQZ_TASK_MULTIPLE_CHOICE: st = sqz__tasks_parse_mc(ts, data, size, limit); break;
    default: st = sqz__tasks_parse_jsonl(ts, data, size, limit); break;
    }
    if (st == SQZ_OK && ts->n == 0) st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: no tasks", ts->path);
    if (st != SQZ_OK) {
        sqz_tasks_free(ts);
        return st;
    }
    *out = ts;
    return SQZ_OK;
}

sqz_status sqz_tasks_read(const char *path, sqz_task_kind k, int64_t limit, sqz_tasks **out) {
    char *data = NULL;
    size_t size = 0;
    *out = NULL;
    SQZ_TRY(sqz_read_file(path, (size_t)1 << 32, &data, &size));
    sqz_status st = sqz_tasks_parse(path, k, data, size, limit, out);
    free(data);
    return st;
}

/* ---- lines, as std::getline splits them ---------------------------------------------------- */

typedef struct line {
    const char *p;
    size_t n;
} line;

/* The lines of data (a final '\n' ends the last line; it does not start an empty one). */
static sqz_status split_lines(const char *data, size_t size, line **out, int64_t *n) {
    int64_t cap = 1;
    for (size_t i = 0; i < size; i++) cap += data[i] == '\n';
    line *l = malloc((size_t)cap * sizeof *l);
    if (!l) return SQZ_ERR_NOMEM;
    int64_t k = 0;
    for (size_t i = 0; i < size;) {
        size_t j = i;
        while (j < size && data[j] != '\n') j++;
        l[k++] = (line){data + i, j - i};
        i = j + 1;
    }
    *out = l;
    *n = k;
    return SQZ_OK;
}

/* A leading integer after optional blanks and sign (std::stoi / operator>>); false if none. */
static bool lead_int(const char *p, size_t n, long *v) {
    char buf[32];
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t')) i++;
    size_t m = n - i < sizeof buf - 1 ? n - i : sizeof buf - 1;
    memcpy(buf, p + i, m);
    buf[m] = 0;
    char *end;
    *v = strtol(buf, &end, 10);
    return end != buf && (buf[0] == '-' || buf[0] == '+' || (buf[0] >= '0' && buf[0] <= '9'));
}

/* ---- hellaswag ----------------------------------------------------------------------------- */

sqz_status sqz__tasks_parse_hellaswag(sqz_tasks *ts, const char *data, size_t size, int64_t limit) {
    line *l;
    int64_t n;
    SQZ_TRY(split_lines(data, size, &l, &n));
    sqz_status st = SQZ_OK;
    if (n % 6 != 0)
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: %lld lines, not a multiple of 6 (a task is 6 lines: context, gold index, "
                       "4 endings): the file is cut or a line is missing", ts->path, (long long)n);
    for (int64_t i = 0; st == SQZ_OK && i < n / 6; i++) {
        const line *c = l + 6 * i;
        long gold;
        if (!lead_int(c[1].p, c[1].n, &gold) || gold < 0 || gold > 3) {
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s:%lld: task %lld's gold index '%.*s' is not 0, 1, 2 or 3", ts->path,
                           (long long)(6 * i + 2), (long long)i, (int)(c[1].n < 40 ? c[1].n : 40), c[1].p);
            break;
        }
        if (limit && i >= limit) continue;
        sqz__task *t = sqz__tasks_add(ts, 4, 4);
        if (!t) st = SQZ_ERR_NOMEM;
        for (int e = 0; st == SQZ_OK && e < 4; e++)
            st = sqz__tseq_set(&t->seq[e], c[0].p, c[0].n, " ", 1, c[2 + e].p, c[2 + e].n);
        if (t) t->gold = (int32_t)gold;
    }
    free(l);
    return st;
}

/* ---- winogrande ---------------------------------------------------------------------------- */

/* One CSV line as load_winogrande_from_csv splits it: the first four commas outside quotes. */
static sqz_status winogrande_line(sqz_tasks *ts, const line *ln, int64_t lineno, bool add) {
    size_t comma[4];
    int k = 0;
    bool quote = false;
    for (size_t i = 0; i < ln->n && k < 4; i++) {
        if (ln->p[i] == '"') quote = !quote;
        else if (ln->p[i] == ',' && !quote) comma[k++] = i;
    }
    SQZ_RETURN_IF(k != 4, SQZ_ERR_FORMAT, "%s:%lld: %d of the 4 commas of \"index,sentence,choice1,choice2,answer\"",
                  ts->path, (long long)lineno, k);
    const char *p = ln->p;
    size_t s0 = comma[0] + 1, sn = comma[1] - comma[0] - 1;
    if (sn >= 2 && p[s0] == '"') s0++, sn -= 2; /* "..." around the sentence */
    const char *u = memchr(p + s0, '_', sn);
    SQZ_RETURN_IF(!u, SQZ_ERR_FORMAT, "%s:%lld: the sentence has no '_' to put the choices in", ts->path,
                  (long long)lineno);
    long answer;
    SQZ_RETURN_IF(!lead_int(p + comma[3] + 1, ln->n - comma[3] - 1, &answer) || answer < 1 || answer > 2,
                  SQZ_ERR_FORMAT, "%s:%lld: the answer '%.*s' is not 1 or 2", ts->path, (long long)lineno,
                  (int)(ln->n - comma[3] - 1 < 20 ? ln->n - comma[3] - 1 : 20), p + comma[3] + 1);
    if (!add) return SQZ_OK;
    sqz__task *t = sqz__tasks_add(ts, 2, 4);
    if (!t) return SQZ_ERR_NOMEM;
    t->gold = (int32_t)answer - 1;
    const char *first = p + s0, *second = u + 1;
    size_t nf = (size_t)(u - first), ns = sn - nf - 1;
    for (int c = 0; c < 2; c++) {
        const char *ch = p + comma[1 + c] + 1;
        size_t nc = comma[2 + c] - comma[1 + c] - 1;
        SQZ_TRY(sqz__tseq_set(&t->seq[c], first, nf, ch, nc, second, ns));
        SQZ_TRY(sqz__tseq_set(&t->seq[2 + c], first, nf, ch, nc, NULL, 0));
    }
    return SQZ_OK;
}

sqz_status sqz__tasks_parse_winogrande(sqz_tasks *ts, const char *data, size_t size, int64_t limit) {
    line *l;
    int64_t n;
    SQZ_TRY(split_lines(data, size, &l, &n));
    sqz_status st = SQZ_OK;
    int64_t added = 0;
    for (int64_t i = 0; st == SQZ_OK && i < n; i++) {
        long v;
        const char *last = l[i].p + l[i].n;
        while (last > l[i].p && last[-1] != ',') last--;
        /* a header line ("index,sentence,option1,option2,answer"): neither end a number */
        if (i == 0 && !lead_int(last, (size_t)(l[i].p + l[i].n - last), &v) && !lead_int(l[i].p, l[i].n, &v))
            continue;
        bool blank = true;
        for (size_t j = 0; j < l[i].n && blank; j++) blank = l[i].p[j] == ' ' || l[i].p[j] == '\r';
        if (blank) continue;
        bool add = !limit || added < limit;
        st = winogrande_line(ts, &l[i], i + 1, add);
        added += add;
    }
    free(l);
    return st;
}

/* ---- multiple-choice (llama.cpp's binary files) -------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t size, off;
    const char *path;
    int64_t task;
} rd;

static sqz_status rd_u32(rd *r, const char *what, uint32_t *v) {
    SQZ_RETURN_IF(r->size - r->off < 4, SQZ_ERR_FORMAT, "%s: task %lld: %s at byte %zu runs past the end (%zu bytes)",
                  r->path, (long long)r->task, what, r->off, r->size);
    *v = sqz__rd_u32(r->p + r->off);
    r->off += 4;
    return SQZ_OK;
}

static sqz_status rd_str(rd *r, const char *what, const uint8_t **s, uint32_t *n) {
    SQZ_TRY(rd_u32(r, what, n));
    SQZ_RETURN_IF(r->size - r->off < *n, SQZ_ERR_FORMAT,
                  "%s: task %lld: %s of %u bytes at byte %zu runs past the end (%zu bytes)", r->path,
                  (long long)r->task, what, *n, r->off, r->size);
    *s = r->p + r->off;
    r->off += *n;
    return SQZ_OK;
}

/* An answer set: u32 n | n strings | i32 labels[n]. With t: mc1, into t's sequences. */
static sqz_status rd_answers(rd *r, const char *set, sqz__task *t, const uint8_t *q, uint32_t nq) {
    uint32_t n = 0;
    SQZ_TRY(rd_u32(r, set, &n));
    SQZ_RETURN_IF(n > 100, SQZ_ERR_FORMAT, "%s: task %lld: %s has %u answers (at most 100)", r->path,
                  (long long)r->task, set, n);
    SQZ_RETURN_IF(t && n == 0, SQZ_ERR_FORMAT, "%s: task %lld: %s has no answers", r->path, (long long)r->task, set);
    if (t && !(t->seq = calloc(n, sizeof *t->seq))) return SQZ_ERR_NOMEM;
    if (t && !(t->labels = calloc(n, sizeof *t->labels))) return SQZ_ERR_NOMEM;
    if (t) t->n_seq = t->n_choices = (int32_t)n;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *a = NULL;
        uint32_t na = 0;
        SQZ_TRY(rd_str(r, "an answer", &a, &na));
        SQZ_RETURN_IF(t && na == 0, SQZ_ERR_FORMAT, "%s: task %lld: %s's answer %u is empty", r->path,
                      (long long)r->task, set, i);
        if (t) SQZ_TRY(sqz__tseq_set(&t->seq[i], (const char *)q, nq, " ", 1, (const char *)a, na));
    }
    SQZ_RETURN_IF(r->size - r->off < 4 * (size_t)n, SQZ_ERR_FORMAT,
                  "%s: task %lld: %s's %u labels at byte %zu run past the end (%zu bytes)", r->path,
                  (long long)r->task, set, n, r->off, r->size);
    for (uint32_t i = 0; t && i < n; i++) t->labels[i] = (int32_t)sqz__rd_u32(r->p + r->off + 4 * i);
    r->off += 4 * (size_t)n;
    return SQZ_OK;
}

sqz_status sqz__tasks_parse_mc(sqz_tasks *ts, const uint8_t *data, size_t size, int64_t limit) {
    rd r = {data, size, 0, ts->path, 0};
    uint32_t n_task;
    SQZ_RETURN_IF(size < 4, SQZ_ERR_FORMAT, "%s: %zu bytes: too short for the task count", ts->path, size);
    n_task = sqz__rd_u32(data);
    SQZ_RETURN_IF(n_task == 0, SQZ_ERR_FORMAT, "%s: no tasks (the count is 0)", ts->path);
    SQZ_RETURN_IF((size - 4) / 4 < n_task, SQZ_ERR_FORMAT,
                  "%s: %u tasks need %llu bytes of offsets; the file has %zu bytes", ts->path, n_task,
                  4ull * n_task + 4, size);
    for (uint32_t i = 0; i < n_task; i++) {
        uint32_t pos = sqz__rd_u32(data + 4 + 4 * (size_t)i);
        SQZ_RETURN_IF(pos < 4 + 4 * (uint64_t)n_task || pos >= size, SQZ_ERR_FORMAT,
                      "%s: task %u's offset %u lies outside the tasks (bytes %llu..%zu)", ts->path, i, pos,
                      4ull * n_task + 4, size);
    }
    r.off = 4 + 4 * (size_t)n_task;
    for (uint32_t i = 0; i < n_task; i++) {
        r.task = i;
        const uint8_t *q = NULL;
        uint32_t nq = 0;
        SQZ_TRY(rd_str(&r, "the question", &q, &nq));
        SQZ_RETURN_IF(nq == 0, SQZ_ERR_FORMAT, "%s: task %u: the question is empty", ts->path, i);
        sqz__task *t = NULL;
        if (!limit || (int64_t)i < limit) {
            if (!(t = sqz__tasks_add(ts, 0, 1))) return SQZ_ERR_NOMEM;
            free(t->seq);
            t->seq = NULL;
            t->n_seq = 0;
        }
        SQZ_TRY(rd_answers(&r, "mc1", t, q, nq));
        SQZ_TRY(rd_answers(&r, "mc2", NULL, NULL, 0));
    }
    return SQZ_OK;
}
