/* cli/llamacpp.c - llama.cpp's spellings that a command does not take, each with sqz's: rows
 * flagged SQZ_OPT_REFUSE (sqz/options.h), one table per command, that sqz_cli_parse adds to the
 * command's own groups (so "unknown option '-ngl' (...)" says what to write instead) and that
 * the command's help lists. The spellings that mean the same as an sqz option are not here:
 * they are short names and aliases in the commands' own tables (-m, -f, -c, -t, --file,
 * --ctx-size). docs/llamacpp.md is the whole table. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define NO(word, why) {.name = word, .type = SQZ_OPT_FLAG, .flags = SQZ_OPT_REFUSE, .help = why}
#define GPU_WHY "llama.cpp's GPU offload; sqz: --device cuda where the command has it"

#define QUANTIZE_ONLY                                                                                              \
    NO("--keep-split", "llama-quantize's; refused: sqz writes one .gguf file"),                                      \
    NO("--prune-layers", "llama-quantize's; sqz: sqz compress --drop-layers SPEC (docs/layerdrop.md)"),               \
    NO("--override-kv", "llama.cpp's; not in sqz"), NO("--dry-run", "llama-quantize's; not in sqz"),                   \
    NO("--include-weights", "llama-quantize's; not in sqz: the importance matrix serves every tensor it covers"),     \
    NO("--exclude-weights", "llama-quantize's; not in sqz: the importance matrix serves every tensor it covers"),     \
    NO("--tensor-type-file", "llama-quantize's; sqz: --tensor-type PATTERN=TYPE, repeated")

static const sqz_opt eval_refused[] = {
    NO("--kl-divergence-base", "llama.cpp's; sqz: --base-logits FILE to read one (llama.cpp's files too), "
                               "--save-base FILE to write"),
    NO("--kl-divergence", "llama.cpp's; sqz: --base-logits FILE (or --base MODEL) gives the KL divergence"),
    NO("-b", "llama.cpp's batch size; not needed: sqz runs a chunk at once"),
    NO("--batch-size", "llama.cpp's; not needed: sqz runs a chunk at once"),
    NO("-ub", "llama.cpp's micro-batch size; not needed"),
    NO("-ngl", GPU_WHY),
    NO("--n-gpu-layers", GPU_WHY),
    NO("-fa", "llama.cpp's flash attention switch; not needed"),
    NO("--ppl-stride", "llama.cpp's strided perplexity; sqz: the chunked protocol only (--ctx, --chunks)"),
    NO("--hellaswag-tasks", "llama-perplexity's N tasks at random; sqz: --tasks-limit N takes the first N"),
    NO("--winogrande-tasks", "llama-perplexity's N tasks at random; sqz: --tasks-limit N takes the first N"),
    NO("--multiple-choice-tasks", "llama-perplexity's N tasks at random; sqz: --tasks-limit N takes the first N"),
    NO("-bf", "llama.cpp's binary prompt file; sqz: -f FILE reads a multiple-choice .bin as it is"),
    NO("--binary-file", "llama.cpp's binary prompt file; sqz: -f FILE reads a multiple-choice .bin as it is"),
    NO("-np", "llama.cpp's parallel sequences; not needed: sqz packs as many tasks into a window as --ctx holds"),
};

static const sqz_opt compress_refused[] = {
    NO("-c", "llama.cpp's context; sqz: --calib-ctx T (calibration windows) or --eval-ctx N (evaluation)"),
    NO("--ctx-size", "llama.cpp's context; sqz: --calib-ctx T (calibration windows) or --eval-ctx N (evaluation)"),
    NO("--pure", "llama-quantize's; sqz: ':pure' in the SPEC (--quant q4_0:pure), or sqz quantize --pure"),
    NO("--allow-requantize", "llama-quantize's; not needed: sqz compress quantizes quantized weights (dequantized "
                             "first)"),
    NO("--leave-output-tensor", "llama-quantize's; sqz: --keep-float output"),
    QUANTIZE_ONLY,
    NO("-ngl", GPU_WHY),
    NO("--n-gpu-layers", GPU_WHY),
};

static const sqz_opt quantize_refused[] = {QUANTIZE_ONLY};

static const sqz_opt calibrate_refused[] = {
    NO("-c", "llama-imatrix's context; sqz: --calib-ctx T"),
    NO("--ctx-size", "llama-imatrix's context; sqz: --calib-ctx T"),
    NO("--chunks", "llama-imatrix's; sqz: --calib-samples N windows of --calib-ctx T tokens"),
    NO("-ngl", GPU_WHY),
    NO("--n-gpu-layers", GPU_WHY),
};

typedef struct refused_table {
    const char *cmd;
    const sqz_opt *rows;
    int n;
} refused_table;

static const refused_table tables[] = {
    {"eval", eval_refused, SQZ_CLI_N(eval_refused)},
    {"compress", compress_refused, SQZ_CLI_N(compress_refused)},
    {"calibrate", calibrate_refused, SQZ_CLI_N(calibrate_refused)},
    {"quantize", quantize_refused, SQZ_CLI_N(quantize_refused)},
};

const sqz_opt *sqz_cli_llamacpp_refused(const char *cmd, int *n) {
    for (int i = 0; i < SQZ_CLI_N(tables); i++)
        if (!strcmp(tables[i].cmd, cmd)) {
            *n = tables[i].n;
            return tables[i].rows;
        }
    *n = 0;
    return NULL;
}

void sqz_cli_llamacpp_help(FILE *out, const char *cmd) {
    int n = 0;
    const sqz_opt *rows = sqz_cli_llamacpp_refused(cmd, &n);
    if (!n) return;
    const sqz_opt_group g = {NULL, rows, n, NULL};
    char *list = sqz_opts_help_argv(&g, 1);
    fprintf(out, "\nllama.cpp's spellings this command refuses, with sqz's (docs/llamacpp.md):\n%s",
            list ? list : "  (out of memory)\n");
    free(list);
}
