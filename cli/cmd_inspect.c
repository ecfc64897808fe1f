/* cli/cmd_inspect.c - `sqz inspect MODEL [--json] [--tensors]`: what is inside a checkpoint. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef struct inspect_opts {
    const char *path, *tokenizer;
    bool json, no_tensors, sparsity;
} inspect_opts;

static const char *scaling_name(sqz_rope_scaling s) {
    switch (s) {
    case SQZ_ROPE_SCALING_LINEAR: return "linear";
    case SQZ_ROPE_SCALING_LLAMA3: return "llama3";
    case SQZ_ROPE_SCALING_LONGROPE: return "longrope";
    default: return "none";
    }
}

/* What the newer decoders add: partial rotary, rope scaling, sliding-window layers, attention scale. */
static void print_rope_extras(const sqz_model *m) {
    const sqz_hparams *hp = &m->hp;
    if (hp->rope_dim > 0 && hp->rope_dim != hp->head_dim)
        printf("  rotary         %" PRId64 " of %" PRId64 " dimensions per head\n", hp->rope_dim, hp->head_dim);
    if (hp->rope_scaling != SQZ_ROPE_SCALING_NONE) {
        printf("  rope scaling   %s", scaling_name(hp->rope_scaling));
        if (hp->rope_factor > 0) printf(", factor %g", hp->rope_factor);
        if (hp->rope_ctx_orig > 0) printf(", original context %" PRId64, hp->rope_ctx_orig);
        printf("\n");
    }
    if (hp->sliding_window > 0) {
        int64_t n = 0;
        for (int64_t l = 0; l < hp->n_layers; l++) n += m->layers[l].window > 0;
        printf("  sliding window %" PRId64 " positions in %" PRId64 " of %" PRId64 " layers (rope base %g there)\n",
               hp->sliding_window, n, hp->n_layers, hp->rope_theta_local);
    }
    if (hp->attn_scale > 0) printf("  attention      scores times %g\n", hp->attn_scale);
}

static const sqz_opt inspect_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(inspect_opts, path),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED | SQZ_OPT_INPUT, .metavar = "MODEL",
     .help = "an HF directory, a .safetensors, a .gguf, a llama2.c .bin or an ONNX directory sqz wrote"},
    {.name = "json", .type = SQZ_OPT_FLAG, .offset = offsetof(inspect_opts, json),
     .help = "print one JSON object instead of text"},
    {.name = "no-tensors", .type = SQZ_OPT_FLAG, .offset = offsetof(inspect_opts, no_tensors),
     .help = "leave out the tensor list"},
    {.name = "sparsity", .type = SQZ_OPT_FLAG, .offset = offsetof(inspect_opts, sparsity),
     .help = "also read every tensor's values: its fraction of zeros and whether every row is 2:4 / 4:8 "
             "(touches all the data, unlike the rest of inspect)"},
    {.name = "tokenizer", .type = SQZ_OPT_STRING, .offset = offsetof(inspect_opts, tokenizer), .flags = SQZ_OPT_INPUT,
     .metavar = "FILE",
     .help = "llama2.c tokenizer.bin (default: beside the checkpoint)"},
};

static const char inspect_head[] =
    "usage: sqz inspect MODEL [--json] [--no-tensors] [--sparsity] [--tokenizer FILE]\n\n"
    "Shows a checkpoint's architecture and hyperparameters, its parameter count (tied\n"
    "weights counted once), the bytes per dtype and every tensor (name, role, dtype,\n"
    "shape, bytes). MODEL is an HF directory, a .safetensors, a .gguf, a llama2.c .bin or\n"
    "an ONNX directory sqz wrote (its model.onnx), detected by content. Only headers are read, unless --sparsity asks for every tensor's\n"
    "zeros and N:M patterns (docs/sparsity.md).\n";

void sqz_cmd_inspect_usage(FILE *out) {
    const sqz_opt_group g = {NULL, inspect_rows, SQZ_CLI_N(inspect_rows), NULL};
    sqz_cli_help(out, inspect_head, &g, 1);
}

static void human_bytes(double b, char *buf, size_t n) {
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) { b /= 1000; i++; }
    snprintf(buf, n, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

static void human_count(int64_t v, char *buf, size_t n) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" PRId64, v);
    size_t len = strlen(tmp), j = 0;
    for (size_t i = 0; i < len && j + 2 < n; i++) {
        buf[j++] = tmp[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len) buf[j++] = ',';
    }
    buf[j] = 0;
}

typedef struct dtype_sum { int64_t params, bytes, tensors; } dtype_sum;

static void sum_by_dtype(const sqz_model *m, dtype_sum *s) {
    memset(s, 0, sizeof(dtype_sum) * SQZ_DTYPE_COUNT);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        s[t->dtype].params += sqz_tensor_nelements(t);
        s[t->dtype].bytes += (int64_t)t->nbytes;
        s[t->dtype].tensors++;
    }
}

static bool layers_uniform(const sqz_model *m) {
    for (int64_t l = 0; l < m->hp.n_layers; l++) {
        if (m->layers[l].n_heads != m->hp.n_heads || m->layers[l].n_kv_heads != m->hp.n_kv_heads ||
            m->layers[l].d_ff != m->hp.d_ff)
            return false;
    }
    return true;
}

static int print_json(const sqz_model *m, bool tensors, bool sparsity) {
    const sqz_hparams *hp = &m->hp;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", m->source_path);
    cJSON_AddStringToObject(o, "format", sqz_format_name((sqz_format)m->source_format));
    if (m->name) cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "arch", hp->arch);
    cJSON_AddStringToObject(o, "family", sqz_family_name(hp->family));
    cJSON_AddNumberToObject(o, "params", (double)sqz_model_param_count(m));
    cJSON_AddNumberToObject(o, "bytes", (double)sqz_model_data_bytes(m));
    cJSON_AddNumberToObject(o, "n_layers", (double)hp->n_layers);
    cJSON_AddNumberToObject(o, "d_model", (double)hp->d_model);
    cJSON_AddNumberToObject(o, "n_heads", (double)hp->n_heads);
    cJSON_AddNumberToObject(o, "n_kv_heads", (double)hp->n_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", (double)hp->head_dim);
    cJSON_AddNumberToObject(o, "d_ff", (double)hp->d_ff);
    cJSON_AddNumberToObject(o, "vocab_size", (double)hp->vocab_size);
    cJSON_AddNumberToObject(o, "ctx_len", (double)hp->ctx_len);
    cJSON_AddNumberToObject(o, "norm_eps", hp->norm_eps);
    const sqz_family_info *fi = sqz_family_get(hp->family);
    if (fi->positions == SQZ_POS_ROTARY) {
        cJSON_AddNumberToObject(o, "rope_theta", hp->rope_theta);
        cJSON_AddStringToObject(o, "rope_layout", sqz_rope_layout_name(hp->rope_layout));
        cJSON_AddNumberToObject(o, "rope_dim", (double)(hp->rope_dim > 0 ? hp->rope_dim : hp->head_dim));
        cJSON_AddStringToObject(o, "rope_scaling", scaling_name(hp->rope_scaling));
        if (hp->rope_scaling != SQZ_ROPE_SCALING_NONE) cJSON_AddNumberToObject(o, "rope_factor", hp->rope_factor);
        if (hp->sliding_window > 0) {
            cJSON_AddNumberToObject(o, "sliding_window", (double)hp->sliding_window);
            cJSON_AddNumberToObject(o, "rope_theta_local", hp->rope_theta_local);
        }
    } else {
        cJSON_AddNumberToObject(o, "n_token_types", (double)hp->n_token_types);
    }
    cJSON_AddBoolToObject(o, "tied_embeddings", hp->tied_embeddings);
    cJSON_AddBoolToObject(o, "attn_bias", hp->attn_bias);
    if (hp->n_expert > 0) { /* a mixture: d_ff is one expert's width */
        cJSON_AddNumberToObject(o, "n_expert", (double)hp->n_expert);
        cJSON_AddNumberToObject(o, "n_expert_used", (double)hp->n_expert_used);
        cJSON_AddBoolToObject(o, "expert_norm_topk", hp->expert_norm_topk);
        cJSON_AddNumberToObject(o, "params_active", (double)sqz_model_active_param_count(m));
    }
    if (!layers_uniform(m)) {
        cJSON *ls = cJSON_AddArrayToObject(o, "layers");
        for (int64_t l = 0; l < hp->n_layers; l++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "n_heads", (double)m->layers[l].n_heads);
            cJSON_AddNumberToObject(e, "n_kv_heads", (double)m->layers[l].n_kv_heads);
            cJSON_AddNumberToObject(e, "d_ff", (double)m->layers[l].d_ff);
            cJSON_AddItemToArray(ls, e);
        }
    }
    cJSON *tok = cJSON_AddObjectToObject(o, "tokenizer");
    cJSON_AddStringToObject(tok, "model", sqz_vocab_kind_name(m->vocab.kind));
    cJSON_AddNumberToObject(tok, "n_tokens", m->vocab.n_tokens);
    cJSON_AddNumberToObject(tok, "n_merges", m->vocab.n_merges);
    cJSON_AddNumberToObject(tok, "bos", m->vocab.bos);
    cJSON_AddNumberToObject(tok, "eos", m->vocab.eos);
    if (m->vocab.pre) cJSON_AddStringToObject(tok, "pre", m->vocab.pre);
    dtype_sum s[SQZ_DTYPE_COUNT];
    sum_by_dtype(m, s);
    cJSON *bd = cJSON_AddObjectToObject(o, "dtypes");
    for (int d = 0; d < SQZ_DTYPE_COUNT; d++) {
        if (!s[d].tensors) continue;
        cJSON *e = cJSON_AddObjectToObject(bd, sqz_dtype_name((sqz_dtype)d));
        cJSON_AddNumberToObject(e, "tensors", (double)s[d].tensors);
        cJSON_AddNumberToObject(e, "params", (double)s[d].params);
        cJSON_AddNumberToObject(e, "bytes", (double)s[d].bytes);
    }
    if (tensors) {
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const sqz_tensor *t = &m->tensors[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", t->name);
            char role[64];
            snprintf(role, sizeof role, "%s%s", sqz_role_name(t->role), t->param == SQZ_PARAM_BIAS ? ".bias" : "");
            cJSON_AddStringToObject(e, "role", role);
            cJSON_AddNumberToObject(e, "layer", t->layer);
            cJSON_AddStringToObject(e, "dtype", sqz_dtype_name(t->dtype));
            cJSON *sh = cJSON_AddArrayToObject(e, "shape");
            for (int k = 0; k < t->ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[k]));
            cJSON_AddNumberToObject(e, "bytes", (double)t->nbytes);
            sqz_sparsity_info sp;
            if (sparsity && sqz_tensor_sparsity(t, &sp) == SQZ_OK) {
                cJSON_AddNumberToObject(e, "zeros", (double)sp.zeros);
                cJSON_AddNumberToObject(e, "sparsity", sp.count ? (double)sp.zeros / (double)sp.count : 0.0);
                cJSON_AddBoolToObject(e, "nm_2_4", sp.nm_2_4);
                cJSON_AddBoolToObject(e, "nm_4_8", sp.nm_4_8);
            }
            cJSON_AddItemToArray(ts, e);
        }
    }
    char *txt = cJSON_Print(o);
    cJSON_Delete(o);
    if (!txt) {
        fprintf(stderr, "sqz: error: out of memory\n");
        return 1;
    }
    puts(txt);
    free(txt);
    return 0;
}

static void print_text(const sqz_model *m, bool tensors, bool sparsity) {
    const sqz_hparams *hp = &m->hp;
    char a[64], b[64];
    printf("%s: %s checkpoint%s%s\n", m->source_path, sqz_format_name((sqz_format)m->source_format),
           m->name ? ", " : "", m->name ? m->name : "");
    printf("  architecture  %s (%s family)\n", hp->arch, sqz_family_name(hp->family));
    printf("  layers %" PRId64 "  d_model %" PRId64 "  heads %" PRId64 "  kv_heads %" PRId64 "  head_dim %" PRId64
           "  d_ff %" PRId64 "  vocab %" PRId64 "  ctx %" PRId64 "\n",
           hp->n_layers, hp->d_model, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->d_ff, hp->vocab_size,
           hp->ctx_len);
    if (sqz_family_get(hp->family)->positions == SQZ_POS_ROTARY) {
        printf("  norm_eps %g  rope_theta %g  rope rows %s  tied embeddings %s  qkv bias %s\n", hp->norm_eps,
               hp->rope_theta, sqz_rope_layout_name(hp->rope_layout), hp->tied_embeddings ? "yes" : "no",
               hp->attn_bias ? "yes" : "no");
        print_rope_extras(m);
    } else {
        printf("  norm_eps %g  token types %" PRId64 "\n", hp->norm_eps, hp->n_token_types);
    }
    if (!layers_uniform(m)) {
        printf("  per-layer (heads/kv/d_ff):");
        for (int64_t l = 0; l < hp->n_layers; l++)
            printf(" %" PRId64 "/%" PRId64 "/%" PRId64, m->layers[l].n_heads, m->layers[l].n_kv_heads, m->layers[l].d_ff);
        printf("\n");
    }
    if (hp->n_expert > 0) {
        char act[64];
        human_count(sqz_model_active_param_count(m), act, sizeof act);
        printf("  experts       %" PRId64 " per layer of d_ff %" PRId64 ", %" PRId64 " per token (top-k weights %s); "
               "%s parameters active per token\n", hp->n_expert, hp->d_ff, hp->n_expert_used,
               hp->expert_norm_topk ? "renormalised" : "as the softmax gives them", act);
    }
    if (m->vocab.kind != SQZ_VOCAB_NONE) {
        printf("  tokenizer     %s, %d tokens, %d merges, bos %d, eos %d%s%s\n", sqz_vocab_kind_name(m->vocab.kind),
               m->vocab.n_tokens, m->vocab.n_merges, m->vocab.bos, m->vocab.eos, m->vocab.pre ? ", pre " : "",
               m->vocab.pre ? m->vocab.pre : "");
    } else {
        printf("  tokenizer     none found\n");
    }
    int64_t params = sqz_model_param_count(m);
    human_count(params, a, sizeof a);
    human_bytes((double)sqz_model_data_bytes(m), b, sizeof b);
    printf("  parameters    %s (%.3f M), %s of tensor data, %.2f bits/param\n", a, (double)params / 1e6, b,
           params ? 8.0 * (double)sqz_model_data_bytes(m) / (double)params : 0.0);
    dtype_sum s[SQZ_DTYPE_COUNT];
    sum_by_dtype(m, s);
    for (int d = 0; d < SQZ_DTYPE_COUNT; d++) {
        if (!s[d].tensors) continue;
        human_count(s[d].params, a, sizeof a);
        human_bytes((double)s[d].bytes, b, sizeof b);
        printf("    %-6s %4" PRId64 " tensors  %14s params  %12s\n", sqz_dtype_name((sqz_dtype)d), s[d].tensors, a, b);
    }
    if (!tensors) return;
    printf("  tensors (%" PRId64 ")\n", m->n_tensors);
    printf("    %-52s %-22s %-6s %-20s %s%s\n", "name", "role", "dtype", "shape", "bytes",
           sparsity ? "  zeros  N:M" : "");
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        char role[64], shape[64];
        if (t->layer >= 0)
            snprintf(role, sizeof role, "%d.%s%s", t->layer, sqz_role_name(t->role), t->param ? ".bias" : "");
        else
            snprintf(role, sizeof role, "%s%s", sqz_role_name(t->role), t->param ? ".bias" : "");
        int off = 0;
        for (int k = 0; k < t->ndim; k++)
            off += snprintf(shape + off, sizeof shape - (size_t)off, "%s%" PRId64, k ? " x " : "", t->shape[k]);
        printf("    %-52s %-22s %-6s %-20s %zu", t->name, role, sqz_dtype_name(t->dtype), shape, t->nbytes);
        sqz_sparsity_info sp;
        if (sparsity && sqz_tensor_sparsity(t, &sp) == SQZ_OK)
            printf("  %5.1f%%  %s", sp.count ? 100.0 * (double)sp.zeros / (double)sp.count : 0.0,
                   sp.nm_2_4 ? "2:4" : sp.nm_4_8 ? "4:8" : "-");
        printf("\n");
    }
}

int sqz_cmd_inspect(int argc, char **argv) {
    inspect_opts a = {0};
    const sqz_opt_group g = {NULL, inspect_rows, SQZ_CLI_N(inspect_rows), &a};
    const int bad = sqz_cli_parse("inspect", &g, 1, argc, argv, NULL);
    if (bad) return bad;
    sqz_open_opts oo = {.tokenizer_path = a.tokenizer};
    sqz_model *m;
    sqz_status s = sqz_model_open(a.path, &oo, &m);
    if (s != SQZ_OK) return sqz_cli_fail(s);
    int rc = 0;
    if (a.json) rc = print_json(m, !a.no_tensors, a.sparsity);
    else print_text(m, !a.no_tensors, a.sparsity);
    sqz_model_free(m);
    return rc;
}
