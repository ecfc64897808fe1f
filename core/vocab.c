/* core/vocab.c - lifetime of the tokenizer data a model carries. */
#include <stdlib.h>

#include "sqz/vocab.h"

void sqz_vocab_init(sqz_vocab *v) {
    *v = (sqz_vocab){0};
    v->bos = v->eos = v->unk = v->pad = v->sep = v->cls = v->mask = -1;
}

void sqz_vocab_clear(sqz_vocab *v) {
    if (!v) return;
    if (v->tokens) {
        for (int32_t i = 0; i < v->n_tokens; i++) free(v->tokens[i]);
    }
    if (v->merges) {
        for (int32_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    }
    free(v->tokens);
    free(v->merges);
    free(v->scores);
    free(v->types);
    free(v->pre);
    free(v->chat_template);
    free(v->hf_json);
    free(v->hf_config_json);
    sqz_vocab_init(v);
}

const char *sqz_vocab_kind_name(sqz_vocab_kind k) {
    switch (k) {
    case SQZ_VOCAB_SPM: return "llama";
    case SQZ_VOCAB_BPE: return "gpt2";
    case SQZ_VOCAB_WPM: return "bert";
    default: return "none";
    }
}
