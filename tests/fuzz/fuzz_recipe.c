/* tests/fuzz/fuzz_recipe.c - libFuzzer harness for recipe JSON (compress/recipe.c:
 * sqz__recipe_parse, what sqz_recipe_load runs on the file's text; the passes' SPEC parsers
 * and checks behind it).
 *
 * The input is parsed as a recipe. On success the recipe is written back as JSON
 * (sqz_recipe_json, the report's form) and that is parsed again: it must be accepted and give
 * the same stages (pass and SPEC). On failure the recipe must be unchanged and a message left.
 * Seeds: tests/data/recipe/ (the recipes of docs/compress.md and tests); dictionary:
 * tests/fuzz/recipe.dict. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sqz_clear_error();
    sqz_recipe r;
    memset(&r, 0, sizeof r);
    sqz_status s = sqz__recipe_parse(&r, "fuzz.json", (const char *)data, size);
    if (s != SQZ_OK) {
        if (getenv("SQZ_FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", sqz_last_error());
        if (r.n != 0 || sqz_last_error()[0] == 0) abort();
        sqz_recipe_free(&r);
        return 0;
    }
    for (int i = 0; i < r.n; i++) (void)sqz_stage_quant_spec(&r.stages[i]);
    char *json = sqz_recipe_json(&r);
    if (json) {
        sqz_recipe r2;
        memset(&r2, 0, sizeof r2);
        if (sqz__recipe_parse(&r2, "fuzz.json (written back)", json, strlen(json)) != SQZ_OK || r2.n != r.n) abort();
        for (int i = 0; i < r.n; i++)
            if (r2.stages[i].pass != r.stages[i].pass || strcmp(r2.stages[i].spec, r.stages[i].spec) != 0) abort();
        sqz_recipe_free(&r2);
        free(json);
    }
    sqz_recipe_free(&r);
    return 0;
}
