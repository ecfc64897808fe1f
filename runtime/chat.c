/*
 * runtime/chat.c - chat templates by family (sqz/chat.h): one row per family, recognised by
 * markers in the template's Jinja text and rendered by a function of ours. Jinja itself is not
 * interpreted: the families' templates differ in a handful of strings, while a Jinja subset able
 * to run real templates (namespaces, filters, tojson, macros, tool loops) would be a language
 * runtime of its own for untrusted input. llama.cpp's llama_chat_apply_template recognises
 * templates the same way. docs/generate.md lists which templates were checked against Jinja.
 *
 * Every renderer follows its family's template for a conversation of an optional system
 * message, then user and assistant turns, with the generation prompt; what a template does with
 * tools, images or reasoning is not rendered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/runtime_internal.h"
#include "sqz/chat.h"

typedef struct buf {
    char *p;
    size_t n, cap;
    bool ok;
} buf;

static void put_n(buf *b, const char *s, size_t n) {
    if (!b->ok || !s) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->ok = false;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void put(buf *b, const char *s) { put_n(b, s, s ? strlen(s) : 0); }

/* Python's str.strip() / Jinja's trim on ASCII whitespace. */
static void put_trim(buf *b, const char *s) {
    static const char ws[] = " \t\n\r\f\v";
    size_t n = strlen(s), i = 0;
    while (i < n && strchr(ws, s[i])) i++;
    while (n > i && strchr(ws, s[n - 1])) n--;
    put_n(b, s + i, n - i);
}

/* The conversation as the renderers see it: the system message apart. */
typedef struct conv {
    const char *system; /* msgs[0]'s content when it is a system message, or NULL */
    const sqz_chat_msg *msgs;
    size_t n; /* the turns after the system message */
    const char *tmpl, *bos, *eos;
    bool gen;
} conv;

static bool is(const sqz_chat_msg *m, const char *role) { return strcmp(m->role, role) == 0; }
static bool has(const char *tmpl, const char *s) { return tmpl && strstr(tmpl, s); }

/* The template writes the BOS text itself ({{ bos_token }}). */
static void put_bos(buf *b, const conv *c) {
    if (has(c->tmpl, "bos_token")) put(b, c->bos);
}

/* A default system message written in a ChatML template as one string literal,
 * '<|im_start|>system\nTEXT<|im_end|>\n' (SmolLM2, Qwen2.5: used when the conversation has
 * none), with the newline written or escaped: the literal TEXT (no quotes, no expressions),
 * unescaped, into b; false when the template has none. */
static bool chatml_default_system(buf *b, const char *tmpl) {
    static const char open[] = "<|im_start|>system";
    for (const char *p = tmpl ? strstr(tmpl, open) : NULL; p; p = strstr(p + 1, open)) {
        const char *t = p + strlen(open);
        if (*t == '\n') t++;
        else if (t[0] == '\\' && t[1] == 'n') t += 2;
        else continue;
        const char *end = strstr(t, "<|im_end|>");
        if (!end || end == t || strcspn(t, "'\"{}+") < (size_t)(end - t)) continue;
        for (const char *s = t; s < end; s++) {
            if (s[0] == '\\' && s + 1 < end && (s[1] == 'n' || s[1] == '\\')) put_n(b, s[1] == 'n' ? "\n" : "\\", 1), s++;
            else put_n(b, s, 1);
        }
        return true;
    }
    return false;
}

static void render_chatml(buf *b, const conv *c) {
    put_bos(b, c);
    if (c->system) {
        put(b, "<|im_start|>system\n"), put(b, c->system), put(b, "<|im_end|>\n");
    } else {
        buf d = {NULL, 0, 0, true};
        if (chatml_default_system(&d, c->tmpl)) put(b, "<|im_start|>system\n"), put(b, d.p), put(b, "<|im_end|>\n");
        b->ok = b->ok && d.ok;
        free(d.p);
    }
    for (size_t i = 0; i < c->n; i++)
        put(b, "<|im_start|>"), put(b, c->msgs[i].role), put(b, "\n"), put(b, c->msgs[i].content), put(b, "<|im_end|>\n");
    if (c->gen) put(b, "<|im_start|>assistant\n");
}

static void llama3_turn(buf *b, const char *role, const char *content) {
    put(b, "<|start_header_id|>"), put(b, role), put(b, "<|end_header_id|>\n\n"), put_trim(b, content), put(b, "<|eot_id|>");
}

static void render_llama3(buf *b, const conv *c) {
    put_bos(b, c);
    if (c->system) llama3_turn(b, "system", c->system);
    for (size_t i = 0; i < c->n; i++) llama3_turn(b, c->msgs[i].role, c->msgs[i].content);
    if (c->gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 3.1 / 3.3: a system turn always, dated by the template's default date (a template
 * that asks for today's date, strftime_now, as 3.2's, is not rendered). */
static void render_llama31(buf *b, const conv *c) {
    put_bos(b, c);
    put(b, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    if (c->system) put_trim(b, c->system);
    put(b, "<|eot_id|>");
    for (size_t i = 0; i < c->n; i++) llama3_turn(b, c->msgs[i].role, c->msgs[i].content);
    if (c->gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 3.2: 3.1's system turn dated today, as the template's strftime_now("%d %b %Y") writes it
 * (SQZ_CHAT_DATE sets another date: the template's date_string). */
static void render_llama32(buf *b, const conv *c) {
    char date[64];
    const char *env = getenv("SQZ_CHAT_DATE");
    if (env && *env) snprintf(date, sizeof date, "%s", env);
    else {
        const time_t now = time(NULL);
        struct tm tmv;
        if (!localtime_r(&now, &tmv) || !strftime(date, sizeof date, "%d %b %Y", &tmv)) snprintf(date, sizeof date, "26 Jul 2024");
    }
    put_bos(b, c);
    put(b, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
    put(b, date), put(b, "\n\n");
    if (c->system) put_trim(b, c->system);
    put(b, "<|eot_id|>");
    for (size_t i = 0; i < c->n; i++) llama3_turn(b, c->msgs[i].role, c->msgs[i].content);
    if (c->gen) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Qwen3 with enable_thinking false: the generation prompt closes an empty reasoning block. */
static void render_qwen3_nothink(buf *b, const conv *c) {
    render_chatml(b, c);
    if (c->gen) put(b, "<think>\n\n</think>\n\n");
}

/* Phi-4-mini: '<|' + role + '|>' + content + '<|end|>' for every message, system included, no newlines;
 * without a generation prompt the EOS text ends it. */
static void render_phi4(buf *b, const conv *c) {
    if (c->system) put(b, "<|system|>"), put(b, c->system), put(b, "<|end|>");
    for (size_t i = 0; i < c->n; i++)
        put(b, "<|"), put(b, c->msgs[i].role), put(b, "|>"), put(b, c->msgs[i].content), put(b, "<|end|>");
    put(b, c->gen ? "<|assistant|>" : c->eos);
}

/* Gemma: no system role; Gemma 3 puts the system message before the first user turn. */
static void render_gemma(buf *b, const conv *c) {
    put_bos(b, c);
    for (size_t i = 0; i < c->n; i++) {
        put(b, "<start_of_turn>"), put(b, is(&c->msgs[i], "assistant") ? "model" : c->msgs[i].role), put(b, "\n");
        if (i == 0 && c->system) put(b, c->system), put(b, "\n\n");
        put_trim(b, c->msgs[i].content), put(b, "<end_of_turn>\n");
    }
    if (c->gen) put(b, "<start_of_turn>model\n");
}

static void render_phi3(buf *b, const conv *c) {
    put_bos(b, c);
    if (c->system && *c->system) put(b, "<|system|>\n"), put(b, c->system), put(b, "<|end|>\n");
    for (size_t i = 0; i < c->n; i++)
        put(b, "<|"), put(b, c->msgs[i].role), put(b, "|>\n"), put(b, c->msgs[i].content), put(b, "<|end|>\n");
    if (c->gen) put(b, "<|assistant|>\n");
}

/* Llama 2 (and Mistral v1's spaced [INST]): the system message inside the first user turn. */
static void render_llama2(buf *b, const conv *c) {
    const bool sys_block = has(c->tmpl, "<<SYS>>") || !c->tmpl;
    for (size_t i = 0; i < c->n; i++) {
        const sqz_chat_msg *m = &c->msgs[i];
        if (is(m, "user")) {
            buf u = {NULL, 0, 0, true};
            if (i == 0 && c->system && sys_block) put(&u, "<<SYS>>\n"), put(&u, c->system), put(&u, "\n<</SYS>>\n\n");
            else if (i == 0 && c->system) put(&u, c->system), put(&u, "\n\n");
            put(&u, m->content);
            put(b, c->bos), put(b, "[INST] "), put_trim(b, u.ok ? u.p : ""), put(b, " [/INST]");
            b->ok = b->ok && u.ok;
            free(u.p);
        } else {
            put(b, " "), put_trim(b, m->content), put(b, " "), put(b, c->eos);
        }
    }
}

/* Mistral v3 (Tekken: Nemo): [INST]..[/INST] unspaced, the system message before the last
 * user message. */
static void render_mistral(buf *b, const conv *c) {
    put_bos(b, c);
    size_t last = 0;
    for (size_t i = 0; i < c->n; i++)
        if (is(&c->msgs[i], "user")) last = i;
    for (size_t i = 0; i < c->n; i++) {
        const sqz_chat_msg *m = &c->msgs[i];
        if (is(m, "user")) {
            put(b, "[INST]");
            if (i == last && c->system) put(b, c->system), put(b, "\n\n");
            put(b, m->content), put(b, "[/INST]");
        } else {
            put(b, m->content), put(b, c->eos);
        }
    }
}

typedef struct chat_row {
    const char *name;
    const char *all[3];  /* markers the template contains, every one */
    const char *none[6]; /* markers it must not contain: what sqz does not reproduce */
    void (*render)(buf *b, const conv *c);
    bool named_only; /* never detected: asked for by name (a template switch such as Qwen3's thinking) */
} chat_row;

/* Tried in order; the first whose markers match wins. The "none" markers are what the family's
 * renderer does not write: content computed at render time (strftime_now), a reasoning block
 * opened by the generation prompt, trimmed turns, a tool or reasoning system prompt written
 * without a system message, function schemas (macros). Each was found by comparing with Jinja
 * (tests/py/test_chat_templates.py). */
static const chat_row rows[] = {
    {"qwen3", {"<|im_start|>", "enable_thinking is defined and enable_thinking is false", "<think>\\n\\n</think>\\n\\n"},
     {"strftime_now", "<|im_sep|>", "Knowledge Cutoff", "content|trim", "<|vision_start|>", "rwkv"}, render_chatml, false},
    {"qwen3-nothink", {"<|im_start|>", "enable_thinking is defined and enable_thinking is false",
                       "<think>\\n\\n</think>\\n\\n"},
     {"strftime_now", "<|im_sep|>", "Knowledge Cutoff", "content|trim", "<|vision_start|>", "rwkv"},
     render_qwen3_nothink, true},
    {"chatml", {"<|im_start|>", "<|im_end|>"},
     {"strftime_now", "<|im_sep|>", "Knowledge Cutoff", "assistant\\n<think>", "content|trim", "function calling AI model"},
     render_chatml, false},
    {"llama3.2", {"<|start_header_id|>", "Cutting Knowledge Date: December 2023", "strftime_now(\"%d %b %Y\")"},
     {"macro "}, render_llama32, false},
    {"llama3.1", {"<|start_header_id|>", "Cutting Knowledge Date: December 2023", "26 Jul 2024"},
     {"strftime_now", "macro "}, render_llama31, false},
    {"llama3", {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
     {"strftime_now", "Cutting Knowledge Date", "macro ", "functions"}, render_llama3, false},
    {"gemma", {"<start_of_turn>", "<end_of_turn>"}, {"strftime_now"}, render_gemma, false},
    {"phi3", {"<|user|>", "<|assistant|>", "<|end|>"}, {"strftime_now", "reasoning_prompt"}, render_phi3, false},
    {"phi4", {"'<|' + message['role'] + '|>'", "<|end|>", "<|assistant|>"}, {"strftime_now", "reasoning_prompt"},
     render_phi4, false},
    {"llama2", {"[INST] ", " [/INST]"}, {"strftime_now"}, render_llama2, false},
    {"mistral", {"[INST]", "[/INST]"}, {"strftime_now", "[SYSTEM_PROMPT]"}, render_mistral, false},
};
enum { N_ROWS = sizeof rows / sizeof rows[0] };

static bool matches(const chat_row *r, const char *tmpl) {
    for (int i = 0; i < 3 && r->all[i]; i++)
        if (!strstr(tmpl, r->all[i])) return false;
    for (int i = 0; i < 6 && r->none[i]; i++)
        if (strstr(tmpl, r->none[i])) return false;
    return true;
}

const char *sqz_chat_detect(const char *tmpl) {
    for (int i = 0; tmpl && i < N_ROWS; i++)
        if (!rows[i].named_only && matches(&rows[i], tmpl)) return rows[i].name;
    return NULL;
}

const char *sqz_chat_format_names(void) {
    return "qwen3|qwen3-nothink|chatml|llama3.2|llama3.1|llama3|gemma|phi3|phi4|llama2|mistral";
}

static const chat_row *row_named(const char *name) {
    for (int i = 0; i < N_ROWS; i++)
        if (strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

/* The roles: an optional system message first, then user / assistant turns. */
static sqz_status check_msgs(const sqz_chat_msg *msgs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        SQZ_RETURN_IF(!msgs[i].role || !msgs[i].content, SQZ_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
        const bool sys = is(&msgs[i], "system");
        SQZ_RETURN_IF(sys && i > 0, SQZ_ERR_INVALID_ARG, "chat: a system message only comes first (message %zu)", i);
        SQZ_RETURN_IF(!sys && !is(&msgs[i], "user") && !is(&msgs[i], "assistant"), SQZ_ERR_INVALID_ARG,
                      "chat: message %zu: role '%s' (system, user or assistant)", i, msgs[i].role);
    }
    return SQZ_OK;
}

bool sqz_chat_format_known(const char *name) { return name && row_named(name); }

sqz_status sqz_chat_apply(const char *format, const char *tmpl, const char *bos, const char *eos,
                          const sqz_chat_msg *msgs, size_t n, bool add_generation_prompt, char **out) {
    *out = NULL;
    const char *name = format ? format : sqz_chat_detect(tmpl);
    SQZ_RETURN_IF(!format && !tmpl, SQZ_ERR_INVALID_ARG, "no chat template in the model: name a format, one of %s",
                  sqz_chat_format_names());
    SQZ_RETURN_IF(!name, SQZ_ERR_INVALID_ARG, "its chat template is not one sqz renders (no family's markers, or "
                  "content computed when it is rendered): name a format, one of %s", sqz_chat_format_names());
    const chat_row *r = row_named(name);
    SQZ_RETURN_IF(!r, SQZ_ERR_INVALID_ARG, "unknown chat format '%s' (%s)", name, sqz_chat_format_names());
    SQZ_TRY(check_msgs(msgs, n));
    const bool sys = n > 0 && is(&msgs[0], "system");
    const conv c = {sys ? msgs[0].content : NULL, msgs + sys, n - sys, tmpl, bos ? bos : "", eos ? eos : "",
                    add_generation_prompt};
    buf b = {NULL, 0, 0, true};
    put_n(&b, "", 0);
    r->render(&b, &c);
    if (!b.ok) {
        free(b.p);
        return SQZ_ERR_NOMEM;
    }
    *out = b.p;
    return SQZ_OK;
}
