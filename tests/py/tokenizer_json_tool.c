/* tests/py/tokenizer_json_tool.c - lets tests/py/test_tokenizer_json.py drive the tokenizer
 * readers and writers of formats/ (internal functions, so a test program, not the CLI).
 *
 *   tokenizer_json_tool write SRC OUTDIR [VOCAB_SIZE]
 *       SRC: a tokenizer.json (tokenizer_config.json beside it is used), a llama2.c
 *       tokenizer .bin (VOCAB_SIZE tokens), or any model sqz_model_open takes. Forgets the
 *       verbatim HF texts and writes OUTDIR/tokenizer.json and OUTDIR/tokenizer_config.json
 *       as synthesised by sqz, and OUTDIR/vocab.json, a dump of the vocab.
 *   tokenizer_json_tool dump TOKENIZER_JSON OUT
 *       Reads a tokenizer.json (+ tokenizer_config.json beside it) and dumps the vocab to OUT.
 * The dump: {"kind", "tokens", "scores" (non-finite as strings), "types", "merges", "bos", "eos",
 * "unk", "pad", "sep", "cls", "mask", "add_bos", "add_eos", "add_space_prefix"}.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

static int die(const char *what) {
    fprintf(stderr, "tokenizer_json_tool: %s: %s\n", what, sqz_last_error());
    return 1;
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

static sqz_status read_json(const char *path, sqz_vocab *v) {
    char *json = NULL, *cfg = NULL;
    size_t len = 0;
    SQZ_TRY(sqz_read_file(path, SQZ__MAX_JSON, &json, &len));
    char *dir = sqz__dirname(path);
    char *cpath = dir ? sqz__path_join(dir, "tokenizer_config.json") : NULL;
    if (cpath && sqz__is_file(cpath) && sqz_read_file(cpath, SQZ__MAX_JSON, &cfg, NULL) != SQZ_OK) cfg = NULL;
    sqz_status s = sqz__tokenizer_json_read(json, len, cfg, path, v);
    free(json);
    free(cfg);
    free(dir);
    free(cpath);
    return s;
}

static int write_text(const char *dir, const char *name, char *text) {
    if (!text) return die(name);
    char *p = sqz__path_join(dir, name);
    FILE *f = p ? fopen(p, "wb") : NULL;
    if (!f) { fprintf(stderr, "cannot write %s\n", p ? p : name); free(p); free(text); return 1; }
    fputs(text, f);
    fclose(f);
    free(p);
    free(text);
    return 0;
}

static char *dump(const sqz_vocab *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", sqz_vocab_kind_name(v->kind));
    cJSON *t = cJSON_AddArrayToObject(o, "tokens");
    cJSON *s = v->scores ? cJSON_AddArrayToObject(o, "scores") : NULL;
    cJSON *ty = v->types ? cJSON_AddArrayToObject(o, "types") : NULL;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        cJSON_AddItemToArray(t, cJSON_CreateString(v->tokens[i]));
        if (s) {
            float x = v->scores[i];
            cJSON_AddItemToArray(s, isfinite(x) ? cJSON_CreateNumber(x)
                                                : cJSON_CreateString(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"));
        }
        if (ty) cJSON_AddItemToArray(ty, cJSON_CreateNumber(v->types[i]));
    }
    cJSON *m = cJSON_AddArrayToObject(o, "merges");
    for (int32_t i = 0; i < v->n_merges; i++) cJSON_AddItemToArray(m, cJSON_CreateString(v->merges[i]));
    const struct { const char *k; int32_t id; } ids[] = {{"bos", v->bos}, {"eos", v->eos}, {"unk", v->unk},
                                                         {"pad", v->pad}, {"sep", v->sep}, {"cls", v->cls},
                                                         {"mask", v->mask}};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) cJSON_AddNumberToObject(o, ids[i].k, ids[i].id);
    cJSON_AddBoolToObject(o, "add_bos", v->add_bos);
    cJSON_AddBoolToObject(o, "add_eos", v->add_eos);
    cJSON_AddBoolToObject(o, "add_space_prefix", v->add_space_prefix);
    char *out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "write") == 0) {
        const char *src = argv[2], *out = argv[3];
        sqz_vocab v;
        sqz_vocab_init(&v);
        sqz_model *m = NULL;
        if (ends_with(src, ".json")) {
            if (read_json(src, &v) != SQZ_OK) return die(src);
        } else if (argc >= 5) {
            if (sqz__llama2c_tokenizer_read(src, (int32_t)atoi(argv[4]), &v) != SQZ_OK) return die(src);
        } else {
            if (sqz_model_open(src, NULL, &m) != SQZ_OK) return die(src);
            v = m->vocab;
            sqz_vocab_init(&m->vocab);
            sqz_model_free(m);
        }
        free(v.hf_json);
        free(v.hf_config_json);
        v.hf_json = v.hf_config_json = NULL;
        int rc = write_text(out, "tokenizer.json", sqz__tokenizer_json_write(&v));
        if (!rc) rc = write_text(out, "tokenizer_config.json", sqz__tokenizer_config_write(&v));
        if (!rc) rc = write_text(out, "vocab.json", dump(&v));
        sqz_vocab_clear(&v);
        return rc;
    }
    if (argc == 4 && strcmp(argv[1], "dump") == 0) {
        sqz_vocab v;
        sqz_vocab_init(&v);
        if (read_json(argv[2], &v) != SQZ_OK) return die(argv[2]);
        char *text = dump(&v);
        sqz_vocab_clear(&v);
        FILE *f = fopen(argv[3], "wb");
        if (!f || !text) { free(text); return 1; }
        fputs(text, f);
        fclose(f);
        free(text);
        return 0;
    }
    fprintf(stderr, "usage: tokenizer_json_tool write SRC OUTDIR [VOCAB_SIZE] | dump TOKENIZER_JSON OUT\n");
    return 2;
}
