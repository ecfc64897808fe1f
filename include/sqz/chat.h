/*
 * sqz/chat.h - chat templates: a conversation rendered into the prompt text a chat model was
 * trained on.
 *
 * Models carry their template as Jinja source (GGUF tokenizer.chat_template, tokenizer_config.json
 * chat_template). sqz does not interpret Jinja: it recognises the template's family by markers in
 * its text (ChatML's <|im_start|>, Llama 3's <|start_header_id|>, ...) and renders that family
 * with its own code, one row of a table per family (runtime/chat.c; docs/generate.md says why and
 * which templates were checked against Jinja's output). A template with none of the markers, or
 * with content sqz cannot reproduce (a date computed at render time), is refused; the caller may
 * then name a format itself.
 *
 *   const sqz_chat_msg msgs[] = {{"system", "Be brief."}, {"user", "What is 2+2?"}};
 *   char *prompt;
 *   if (sqz_chat_apply(NULL, model->vocab.chat_template, "<s>", "</s>", msgs, 2, true, &prompt) == SQZ_OK) {
 *       ... tokenize with SQZ_TOKENIZE_PARSE_SPECIAL (the text holds the special tokens) ...
 *       free(prompt);
 *   }
 */
#ifndef SQZ_CHAT_H
#define SQZ_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "sqz/api.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One message: role "system", "user" or "assistant"; content UTF-8. Borrowed. */
typedef struct sqz_chat_msg {
    const char *role;
    const char *content;
} sqz_chat_msg;

/* The name of the format the template text belongs to ("chatml", "llama3", ...), or NULL when
 * none of the rows recognises it (tmpl NULL: NULL). Static strings. */
SQZ_API const char *sqz_chat_detect(const char *tmpl);

/* Whether name is one of the formats. */
SQZ_API bool sqz_chat_format_known(const char *name);

/* The format names, '|'-separated ("chatml|llama3|..."), for help and errors. Static. */
SQZ_API const char *sqz_chat_format_names(void);

/*
 * Renders msgs[0..n) as format `format` (NULL: the one sqz_chat_detect finds in tmpl), opening
 * the assistant's turn when add_generation_prompt (as transformers' apply_chat_template). tmpl
 * (may be NULL with a format) also supplies what the family leaves to the template: a default
 * system message written in it (SmolLM2's, Qwen2.5's) and whether it starts with the BOS text.
 * bos / eos: the vocabulary's BOS and EOS token text ("" or NULL when it has none). A system
 * message may only come first. *out gets the text, NUL-terminated; the caller frees it.
 * Returns SQZ_OK; SQZ_ERR_INVALID_ARG (unknown format naming the known ones, an unrecognised
 * template, a role the format has no place for); SQZ_ERR_NOMEM.
 */
SQZ_API sqz_status sqz_chat_apply(const char *format, const char *tmpl, const char *bos, const char *eos,
                                  const sqz_chat_msg *msgs, size_t n, bool add_generation_prompt, char **out);

#ifdef __cplusplus
}
#endif
#endif
