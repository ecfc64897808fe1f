/*
 * formats/gguf_vocab_bytes.c - the <0xNN> byte tokens a GGUF "llama" (SentencePiece) vocabulary
 * must hold.
 *
 * llama.cpp's SPM tokenizer (llm_tokenizer_spm's resegment) writes a character that is not a
 * token as its bytes, each through llama_vocab::byte_to_token: the "<0xNN>" token, else the
 * one-byte token, else std::out_of_range, which ends the program. An HF BPE tokenizer.json with
 * byte_fallback may have no byte tokens at all (tinystories-656K), so the GGUF writer appends
 * the missing ones after the last token: text "<0xNN>" (llama.cpp's spelling, upper-case hex),
 * type BYTE, score 0 (SentencePiece's score of byte pieces), and the token embedding (and an
 * untied classifier) grows by as many zero rows. Only when the tokens cover the embedding
 * exactly: a padded vocabulary (fewer tokens than rows) keeps its tokens as they are.
 */
#include "formats/gguf_internal.h"

void sqz__gguf_byte_token_text(int byte, char out[7]) {
    static const char hex[] = "0123456789ABCDEF";
    out[0] = '<';
    out[1] = '0';
    out[2] = 'x';
    out[3] = hex[(byte >> 4) & 15];
    out[4] = hex[byte & 15];
    out[5] = '>';
    out[6] = 0;
}

/* The byte llama.cpp's byte_to_token finds under this text ("<0x%02X>"), or -1. */
static int byte_token_of(const char *s) {
    if (!s || strlen(s) != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int k = 3; k < 5; k++) {
        char c = s[k];
        if (c >= '0' && c <= '9') v = v * 16 + (c - '0');
        else if (c >= 'A' && c <= 'F') v = v * 16 + (c - 'A' + 10);
        else return -1;
    }
    return v;
}

int sqz__gguf_missing_bytes(const sqz_model *m, bool missing[256]) {
    for (int b = 0; b < 256; b++) missing[b] = false;
    const sqz_vocab *v = &m->vocab;
    if (v->kind != SQZ_VOCAB_SPM || v->n_tokens <= 0 || !v->tokens) return 0;
    if (m->hp.vocab_size != v->n_tokens) return 0; /* padded: no free ids right after the tokens */
    bool have[256] = {false};
    for (int32_t i = 0; i < v->n_tokens; i++) {
        int b = byte_token_of(v->tokens[i]);
        if (b >= 0) have[b] = true;
    }
    int n = 0;
    for (int b = 0; b < 256; b++) {
        missing[b] = !have[b];
        n += missing[b];
    }
    return n;
}
