/*
 * compress/eval.c - the compressed model against the original on a text (`sqz compress
 * --eval TEXT`): decoders through eval/'s perplexity with the original as a live base (ppl of
 * both, KL divergence, top-1 agreement), encoders through the cosine of sentence embeddings
 * (one sentence per non-blank line, as `sqz eval`). Chunks or sentences that overlap the
 * calibration windows are held out when the windows are given.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "sqz/compress.h"
#include "sqz/eval.h"
#include "sqz/family.h"
#include "sqz/io.h"
#include "sqz/tokenizer.h"

#define ENCODER_BATCH 64    /* sentences between progress reports */

sqz_compress_eval_opts sqz_compress_eval_default_opts(void) {
    sqz_compress_eval_opts o;
    memset(&o, 0, sizeof o);
    return o;
}

/* One run's state, freed together (ev_free). */
typedef struct ev {
    const sqz_model *mc, *mo;      /* compressed, original */
    const sqz_compress_eval_opts *o;
    const char *label;             /* the text's name in messages */
    const sqz_calib_windows *held; /* windows to hold out, or NULL */
    sqz_tokenizer *tok;
    sqz_session *sc, *so;
    int32_t *ids;                  /* the whole text's ids (decoders; encoders with held) */
    size_t n_ids;
    int64_t ctx;
} ev;

static void ev_free(ev *e) {
    sqz_session_free(e->sc);
    sqz_session_free(e->so);
    sqz_tokenizer_free(e->tok);
    free(e->ids);
}

static sqz_status new_sessions(ev *e) {
    sqz_session_opts so = sqz_session_default_opts();
    so.n_threads = e->o->threads;
    so.max_tokens = e->ctx;
    so.backend = e->o->backend;
    SQZ_TRY(sqz_session_new(e->mc, &so, &e->sc));
    return sqz_session_new(e->mo, &so, &e->so);
}

/* True if [s, t) overlaps one of the held-out windows. */
static bool held_out(const sqz_calib_windows *w, int64_t s, int64_t t) {
    for (int64_t i = 0; w && i < w->n_windows; i++)
        if (s < t && w->starts[i] < t && s < w->starts[i] + w->ctx) return true;
    return false;
}

/* ---- decoders ------------------------------------------------------------------------ */

static sqz_status eval_decoder(ev *e, sqz_compress_eval *out) {
    const int64_t n = (int64_t)e->n_ids;
    SQZ_RETURN_IF(n < 2 * e->ctx, SQZ_ERR_INVALID_ARG,
                  "compress eval: %s has %lld tokens, too few for one chunk of ctx %lld (llama.cpp's protocol needs "
                  "%lld): give a longer text or a smaller ctx", e->label, (long long)n, (long long)e->ctx,
                  (long long)(2 * e->ctx));
    const int64_t nw = e->held ? e->held->n_windows : 0;
    int64_t(*spans)[2] = sqz__malloc((size_t)(nw > 0 ? nw : 1) * sizeof *spans);
    if (!spans) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < nw; i++) {
        spans[i][0] = e->held->starts[i];
        spans[i][1] = e->held->starts[i] + e->held->ctx;
    }
    sqz_status st = new_sessions(e);
    sqz_eval_opts eo = sqz_eval_default_opts();
    eo.ctx = e->ctx;
    eo.max_chunks = e->o->max_chunks;
    eo.base = e->so;
    eo.progress = e->o->progress;
    eo.progress_user = e->o->progress_user;
    eo.exclude = (const int64_t(*)[2])spans;
    eo.n_exclude = nw;
    sqz_eval_result r;
    memset(&r, 0, sizeof r);
    if (st == SQZ_OK) {
        st = sqz_eval_perplexity(e->sc, e->ids, n, &eo, &r);
        if (st != SQZ_OK) sqz__error_prefix("compress eval: %s", e->label);
    }
    if (st == SQZ_OK) {
        out->n_chunks = r.n_chunks;
        out->n_held_out = r.n_excluded;
        out->tokens_scored = r.tokens_scored;
        out->ppl_base = r.ppl_base;
        out->ppl = r.ppl;
        out->delta_ppl = r.delta_ppl;
        out->kld_mean = r.kld_mean;
        out->kld_p99 = r.kld_p99;
        out->top1 = r.top1_agree;
    }
    sqz_eval_result_free(&r);
    free(spans);
    return st;
}

/* ---- encoders ------------------------------------------------------------------------ */

typedef struct sentences {
    int32_t **seqs;
    int64_t *lens;
    int64_t n, cap;
} sentences;

static void sentences_free(sentences *s) {
    for (int64_t i = 0; i < s->n; i++) free(s->seqs[i]);
    free(s->seqs);
    free(s->lens);
}

/* Takes ids (freed on failure too). */
static sqz_status sentences_push(sentences *s, int32_t *ids, int64_t len) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        int32_t **ns = sqz__realloc(s->seqs, (size_t)cap * sizeof *ns);
        if (ns) s->seqs = ns;
        int64_t *nl = ns ? sqz__realloc(s->lens, (size_t)cap * sizeof *nl) : NULL;
        if (nl) s->lens = nl;
        if (!ns || !nl) {
            free(ids);
            return SQZ_ERR_NOMEM;
        }
        s->cap = cap;
    }
    s->seqs[s->n] = ids;
    s->lens[s->n++] = len;
    return SQZ_OK;
}

static bool blank(const char *p, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (p[k] != ' ' && p[k] != '\t' && p[k] != '\r') return false;
    return true;
}

/* The line's ids without its special tokens, body[0..nb), must stand at *cursor in the whole
 * text's ids (as the calibration windows saw them): then [*cursor, *cursor + nb) is the line's
 * span there, and the cursor moves past it. */
static sqz_status place_line(const ev *e, const int32_t *body, int64_t nb, int64_t line, int64_t *cursor) {
    bool ok = *cursor + nb <= (int64_t)e->n_ids;
    for (int64_t k = 0; ok && k < nb; k++) ok = e->ids[*cursor + k] == body[k];
    SQZ_RETURN_IF(!ok, SQZ_ERR_UNSUPPORTED,
                  "compress eval: %s: the tokens of line %lld differ from the whole text's at token %lld, so its "
                  "sentences cannot be held out of the calibration windows: evaluate on another text",
                  e->label, (long long)line, (long long)*cursor);
    *cursor += nb;
    return SQZ_OK;
}

/* One sentence per non-blank line (at most max_chunks), cut to ctx tokens keeping the final
 * [SEP] as sentence-transformers does; lines that overlap a held-out window are counted in
 * *n_held instead. */
static sqz_status collect_sentences(const ev *e, const char *text, size_t len, sentences *S, int64_t *n_held) {
    const int64_t pre = sqz_tokenizer_adds_bos(e->tok), post = sqz_tokenizer_adds_eos(e->tok);
    const int64_t max = e->o->max_chunks;
    int64_t cursor = pre, line = 0;
    for (size_t i = 0; i < len && (max <= 0 || S->n < max); i++) {
        size_t j = i;
        while (j < len && text[j] != '\n') j++;
        line++;
        if (!blank(text + i, j - i)) {
            int32_t *ids;
            size_t n;
            SQZ_TRY(sqz_tokenize(e->tok, text + i, j - i, true, &ids, &n));
            const int64_t nb = (int64_t)n - pre - post, at = cursor;
            sqz_status st = e->held ? place_line(e, ids + pre, nb, line, &cursor) : SQZ_OK;
            if (st == SQZ_OK && held_out(e->held, at, at + nb)) {
                (*n_held)++;
                free(ids);
            } else if (st == SQZ_OK) {
                if ((int64_t)n > e->ctx) {
                    ids[e->ctx - 1] = ids[n - 1];
                    n = (size_t)e->ctx;
                }
                st = sentences_push(S, ids, (int64_t)n);
            } else {
                free(ids);
            }
            SQZ_TRY(st);
        }
        i = j;
    }
    return SQZ_OK;
}

/* Cosine of the embeddings over all sentences, in batches (for progress). */
static sqz_status embed_all(ev *e, const sentences *S, sqz_compress_eval *out) {
    double sum = 0, lo = INFINITY;
    int64_t k = 0, toks = 0;
    for (int64_t b = 0; b < S->n; b += ENCODER_BATCH) {
        const int64_t nb = S->n - b < ENCODER_BATCH ? S->n - b : ENCODER_BATCH;
        sqz_eval_result r;
        sqz_status st = sqz_eval_embeddings(e->sc, e->so, (const int32_t *const *)S->seqs + b, S->lens + b, nb, &r);
        if (st != SQZ_OK) {
            sqz__error_prefix("compress eval: %s", e->label);
            return st;
        }
        sum += r.cos_mean * (double)r.n_sentences;
        lo = fmin(lo, r.cos_min);
        k += r.n_sentences;
        toks += r.n_tokens;
        sqz_eval_result_free(&r);
        if (e->o->progress) e->o->progress(e->o->progress_user, b + nb, S->n);
    }
    out->n_chunks = k;
    out->tokens_scored = toks;
    out->cos_mean = sum / (double)k;
    out->cos_min = lo;
    return SQZ_OK;
}

static sqz_status eval_encoder(ev *e, const char *text, size_t len, sqz_compress_eval *out) {
    sentences S;
    memset(&S, 0, sizeof S);
    int64_t n_held = 0;
    sqz_status st = collect_sentences(e, text, len, &S, &n_held);
    if (st == SQZ_OK && S.n == 0)
        st = n_held ? SQZ_ERROR(SQZ_ERR_INVALID_ARG,
                                "compress eval: every one of the %lld sentences of %s overlaps a calibration window: "
                                "nothing is held out (evaluate on another text)", (long long)n_held, e->label)
                    : SQZ_ERROR(SQZ_ERR_INVALID_ARG, "compress eval: %s has no non-blank line to embed", e->label);
    if (st == SQZ_OK) st = new_sessions(e);
    if (st == SQZ_OK) st = embed_all(e, &S, out);
    out->n_held_out = n_held;
    sentences_free(&S);
    return st;
}

/* ---- the run ------------------------------------------------------------------------- */

static sqz_status check_args(const sqz_model *mc, const sqz_model *mo, const sqz_calib_windows *w,
                             const sqz_compress_eval_opts *o) {
    SQZ_RETURN_IF(o->ctx < 0 || o->max_chunks < 0 || o->threads < 0, SQZ_ERR_INVALID_ARG,
                  "compress eval: negative ctx (%lld), max_chunks (%lld) or threads (%d)", (long long)o->ctx,
                  (long long)o->max_chunks, o->threads);
    /* decoders are compared by their logits (any width: hidden channels may have been pruned);
     * encoders by their embeddings, which need the same width */
    SQZ_RETURN_IF(mc->hp.family != mo->hp.family || mc->hp.vocab_size != mo->hp.vocab_size ||
                      (!sqz_family_get(mc->hp.family)->lm_head && mc->hp.d_model != mo->hp.d_model),
                  SQZ_ERR_INVALID_ARG,
                  "compress eval: the compressed model (%s, vocabulary %lld, width %lld) and the original (%s, %lld, "
                  "%lld) cannot be compared", sqz_family_name(mc->hp.family), (long long)mc->hp.vocab_size,
                  (long long)mc->hp.d_model, sqz_family_name(mo->hp.family), (long long)mo->hp.vocab_size,
                  (long long)mo->hp.d_model);
    SQZ_RETURN_IF(w && (w->ctx < 1 || w->n_windows < 0 || (w->n_windows > 0 && !w->starts)), SQZ_ERR_INVALID_ARG,
                  "compress eval: held-out windows without starts (%lld windows of %lld tokens)",
                  (long long)w->n_windows, (long long)w->ctx);
    return SQZ_OK;
}

static sqz_status run(ev *e, const char *text, size_t len, sqz_compress_eval *out) {
    const sqz_family_info *fi = sqz_family_get(e->mo->hp.family);
    const bool encoder = !fi->lm_head;
    SQZ_RETURN_IF(len == 0, SQZ_ERR_INVALID_ARG, "compress eval: %s: the text is empty (0 tokens)", e->label);
    SQZ_TRY(sqz_tokenizer_new(&e->mo->vocab, &e->tok));
    if (!encoder || e->held) SQZ_TRY(sqz_tokenize(e->tok, text, len, true, &e->ids, &e->n_ids));
    SQZ_RETURN_IF(e->held && e->held->n_text_tokens != (int64_t)e->n_ids, SQZ_ERR_INVALID_ARG,
                  "compress eval: the calibration windows were cut from a text of %lld tokens, %s has %zu: windows "
                  "are held out only of the text they come from", (long long)e->held->n_text_tokens, e->label,
                  e->n_ids);
    e->ctx = e->o->ctx > 0 ? e->o->ctx : sqz_eval_default_ctx(e->mo);
    out->encoder = encoder;
    out->ctx = e->ctx;
    if (e->held) {
        out->held_windows = e->held->n_windows;
        out->held_ctx = e->held->ctx;
        out->held_seed = e->held->seed;
    }
    return encoder ? eval_encoder(e, text, len, out) : eval_decoder(e, out);
}

sqz_status sqz_compress_eval_run(const sqz_model *compressed, const sqz_model *original, const char *text_path,
                                 const char *text, size_t len, const sqz_calib_windows *held,
                                 const sqz_compress_eval_opts *opts, sqz_compress_eval *out) {
    SQZ_RETURN_IF(!out, SQZ_ERR_INVALID_ARG, "compress eval: no result to fill");
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(!compressed || !original || (!text && !text_path), SQZ_ERR_INVALID_ARG,
                  "compress eval: needs the compressed model, the original and a text");
    const sqz_compress_eval_opts o = opts ? *opts : sqz_compress_eval_default_opts();
    SQZ_TRY(check_args(compressed, original, held, &o));
    const double t0 = sqz_now_seconds();
    char *owned = NULL;
    if (!text) {
        SQZ_TRY(sqz_read_file(text_path, (size_t)1 << 31, &owned, &len));
        text = owned;
    }
    ev e = {compressed, original, &o, text_path ? text_path : "the text", held, NULL, NULL, NULL, NULL, 0, 0};
    sqz_status st = run(&e, text, len, out);
    ev_free(&e);
    free(owned);
    if (st != SQZ_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    out->done = true;
    snprintf(out->text, sizeof out->text, "%s", text_path ? text_path : "");
    snprintf(out->tokenizer, sizeof out->tokenizer, "%s", o.tokenizer ? o.tokenizer : "");
    out->seconds = sqz_now_seconds() - t0;
    return SQZ_OK;
}

/* ---- the command that reproduces it -------------------------------------------------- */

/* Appends the bytes of s to buf[*n..cap) as they are; *n counts what was needed. */
static void put_raw(char *buf, size_t cap, size_t *n, const char *s) {
    for (; *s; s++, (*n)++)
        if (*n + 1 < cap) buf[*n] = *s;
}

/* Appends a space and s as one POSIX shell word: as it is when every byte is safe, else
 * single-quoted (a quote inside as '\''). */
static void put_word(char *buf, size_t cap, size_t *n, const char *s) {
    bool plain = s[0] != 0;
    for (const char *p = s; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("_./+-=:,@%", *p);
    put_raw(buf, cap, n, *n ? " " : "");
    if (plain) {
        put_raw(buf, cap, n, s);
        return;
    }
    put_raw(buf, cap, n, "'");
    for (char c[2] = {0, 0}; (c[0] = *s) != 0; s++) put_raw(buf, cap, n, c[0] == '\'' ? "'\\''" : c);
    put_raw(buf, cap, n, "'");
}

size_t sqz_compress_eval_command(const sqz_compress_eval *e, const char *model, const char *out, char *buf,
                                 size_t cap) {
    if (cap) buf[0] = 0;
    if (!e || !e->done || !model || !out || (e->encoder && e->n_held_out > 0)) return 0;
    size_t n = 0;
    char num[96];
    put_raw(buf, cap, &n, "sqz eval");
    put_word(buf, cap, &n, out);
    put_word(buf, cap, &n, "--base");
    put_word(buf, cap, &n, model);
    put_word(buf, cap, &n, "--text");
    put_word(buf, cap, &n, e->text);
    snprintf(num, sizeof num, " --ctx %lld --chunks %lld", (long long)e->ctx, (long long)e->n_chunks);
    put_raw(buf, cap, &n, num);
    if (e->held_windows > 0 && !e->encoder) {
        snprintf(num, sizeof num, " --hold-out %lld:%lld:%llu", (long long)e->held_windows, (long long)e->held_ctx,
                 (unsigned long long)e->held_seed);
        put_raw(buf, cap, &n, num);
    }
    if (e->tokenizer[0]) {
        put_word(buf, cap, &n, "--tokenizer");
        put_word(buf, cap, &n, e->tokenizer);
    }
    if (cap) buf[n < cap ? n : cap - 1] = 0;
    return n;
}
