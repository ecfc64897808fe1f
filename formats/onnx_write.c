/* formats/onnx_write.c - `--to onnx`: a directory in onnxruntime-genai's layout, written atomically:
 *   model.onnx        the ModelProto (graph, no weight bytes: onnx_graph.c)
 *   model.onnx.data   every initializer's bytes, 64-byte aligned, streamed one tensor at a time
 *   genai_config.json the decoder's inputs, outputs and sizes, greedy search defaults
 *   config.json       the model's HF config (hf_config.c, as the HF writer's; optimum's exports carry one too):
 *                     what sqz reads the directory back with (onnx_read.c)
 *   tokenizer.json, tokenizer_config.json (when the model has a vocabulary)
 * Memory: one tensor's parts (plus its intermediate codes) beyond the mappings; the ModelProto
 * holds names and shapes only (docs/onnx.md). */
#include <stdio.h>
#include <stdlib.h>

#include "formats/onnx_internal.h"

#define DATA_FILE "model.onnx.data"

/* What the graph computes: a llama-family decoder (RMSNorm, SwiGLU, rotary positions). */
static sqz_status check_arch(const sqz_model *m) {
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi || !fi->lm_head || !fi->causal || fi->positions != SQZ_POS_ROTARY || fi->norm != SQZ_NORM_RMS ||
                  !fi->pre_norm || !fi->gated_ffn || m->hp.act != SQZ_ACT_SILU,
                  SQZ_ERR_UNSUPPORTED, "the ONNX writer builds llama-family decoders (RMSNorm, SwiGLU, RoPE); %s is "
                  "not one", m->hp.arch);
    SQZ_RETURN_IF(m->hp.rope_layout != SQZ_ROPE_HALF && m->hp.rope_layout != SQZ_ROPE_INTERLEAVED, SQZ_ERR_UNSUPPORTED,
                  "the model has no rotary row order");
    SQZ_RETURN_IF(m->hp.head_dim % 2 != 0, SQZ_ERR_UNSUPPORTED, "head_dim %lld is odd", (long long)m->hp.head_dim);
    const char *beyond = sqz__model_beyond_llama(m);
    SQZ_RETURN_IF(beyond, SQZ_ERR_UNSUPPORTED, "the ONNX writer builds llama's plain block; this %s model has %s",
                  m->hp.arch, beyond);
    return SQZ_OK;
}

sqz_status sqz__onnx_check(const sqz_model *m, const sqz_save_opts *o) {
    SQZ_TRY(check_arch(m));
    sqz__onnx_plan p;
    SQZ_TRY(sqz__onnx_plan_make(m, o, &p));
    sqz__onnx_plan_free(&p);
    return SQZ_OK;
}

static sqz_status write_data(const sqz_model *m, const sqz_save_opts *o, const sqz__onnx_plan *p, sqz_outdir *d) {
    sqz_outfile *f;
    SQZ_TRY(sqz_outdir_file(d, DATA_FILE, &f));
    static const uint8_t zeros[64];
    uint64_t at = 0;
    sqz_status st = SQZ_OK;
    if (o->progress) o->progress(o->progress_user, 0, (int64_t)p->data_bytes);
    for (int64_t i = 0; i < p->n && st == SQZ_OK; i++) {
        const sqz__onnx_entry *e = &p->e[i];
        uint8_t *bufs[SQZ__ONNX_MAX_PARTS] = {NULL, NULL, NULL};
        for (int k = 0; k < e->n_parts && st == SQZ_OK; k++) {
            bufs[k] = sqz__calloc(e->part[k].nbytes ? e->part[k].nbytes : 1, 1);
            if (!bufs[k]) st = SQZ_ERR_NOMEM;
        }
        if (st == SQZ_OK) st = sqz__onnx_entry_bytes(m, p, e, bufs);
        for (int k = 0; k < e->n_parts && st == SQZ_OK; k++) {
            if (at < e->part[k].offset) st = sqz_outfile_write(f, zeros, (size_t)(e->part[k].offset - at));
            if (st == SQZ_OK) st = sqz_outfile_write(f, bufs[k], e->part[k].nbytes);
            at = e->part[k].offset + e->part[k].nbytes;
        }
        for (int k = 0; k < SQZ__ONNX_MAX_PARTS; k++) free(bufs[k]);
        if (st != SQZ_OK) sqz__error_prefix(DATA_FILE ": %s", e->part[0].name);
        else if (o->progress) o->progress(o->progress_user, (int64_t)at, (int64_t)p->data_bytes);
    }
    if (st == SQZ_OK) return sqz_outfile_commit(f);
    sqz_outfile_abort(f);
    return st;
}

static sqz_status write_bytes(sqz_outdir *d, const char *name, const void *data, size_t n) {
    sqz_outfile *f;
    SQZ_TRY(sqz_outdir_file(d, name, &f));
    sqz_status st = sqz_outfile_write(f, data, n);
    if (st != SQZ_OK) {
        sqz_outfile_abort(f);
        return st;
    }
    return sqz_outfile_commit(f);
}

static sqz_status write_owned_text(sqz_outdir *d, const char *name, char *text) {
    if (!text) {
        sqz__error_prefix("%s", name);
        return SQZ_ERR_UNSUPPORTED;
    }
    sqz_status st = write_bytes(d, name, text, strlen(text));
    free(text);
    return st;
}

/* genai_config.json: onnxruntime-genai's description of the decoder (its model builder's keys). */
static char *genai_config(const sqz_model *m, const sqz__onnx_plan *p) {
    /* QDQ: onnxruntime's extended level fuses DequantizeLinear + MatMul into MatMulNBits computing at
     * accuracy level 4 (int8 activations, ~1e-2 off); the basic level keeps the float product. */
    const char *level = p->ops == SQZ__ONNX_OPS_QDQ ? "\"graph_optimization_level\": \"ORT_ENABLE_BASIC\", " : "";
    const sqz_hparams *hp = &m->hp;
    const int32_t eos = m->vocab.eos >= 0 ? m->vocab.eos : 0;
    sqz__bytebuf b = {0};
    sqz__bytebuf_printf(&b, "{\n  \"model\": {\n    \"bos_token_id\": %d,\n    \"context_length\": %lld,\n",
                        m->vocab.bos >= 0 ? m->vocab.bos : 0, (long long)p->rope_len);
    sqz__bytebuf_printf(&b, "    \"decoder\": {\n      \"session_options\": {\"log_id\": \"onnxruntime-genai\", "
                        "%s\"provider_options\": []},\n      \"filename\": \"model.onnx\",\n", level);
    sqz__bytebuf_printf(&b, "      \"head_size\": %lld,\n      \"hidden_size\": %lld,\n", (long long)hp->head_dim,
                        (long long)hp->d_model);
    sqz__bytebuf_printf(&b, "      \"inputs\": {\"input_ids\": \"input_ids\", \"attention_mask\": \"attention_mask\", "
                        "\"position_ids\": \"position_ids\", \"past_key_names\": \"past_key_values.%%d.key\", "
                        "\"past_value_names\": \"past_key_values.%%d.value\"},\n");
    sqz__bytebuf_printf(&b, "      \"outputs\": {\"logits\": \"logits\", \"present_key_names\": \"present.%%d.key\", "
                        "\"present_value_names\": \"present.%%d.value\"},\n");
    sqz__bytebuf_printf(&b, "      \"num_attention_heads\": %lld,\n      \"num_hidden_layers\": %lld,\n"
                        "      \"num_key_value_heads\": %lld\n    },\n", (long long)hp->n_heads,
                        (long long)hp->n_layers, (long long)(hp->n_layers ? m->layers[0].n_kv_heads : hp->n_kv_heads));
    sqz__bytebuf_printf(&b, "    \"eos_token_id\": %d,\n    \"pad_token_id\": %d,\n    \"type\": \"llama\",\n"
                        "    \"vocab_size\": %lld\n  },\n", eos, m->vocab.pad >= 0 ? m->vocab.pad : eos,
                        (long long)hp->vocab_size);
    sqz__bytebuf_printf(&b, "  \"search\": {\n    \"diversity_penalty\": 0.0,\n    \"do_sample\": false,\n"
                        "    \"early_stopping\": true,\n    \"length_penalty\": 1.0,\n    \"max_length\": %lld,\n"
                        "    \"min_length\": 0,\n    \"no_repeat_ngram_size\": 0,\n    \"num_beams\": 1,\n"
                        "    \"num_return_sequences\": 1,\n    \"past_present_share_buffer\": false,\n"
                        "    \"repetition_penalty\": 1.0,\n    \"temperature\": 1.0,\n    \"top_k\": 1,\n"
                        "    \"top_p\": 1.0\n  }\n}\n", (long long)p->rope_len);
    return sqz__bytebuf_str(&b);
}

static sqz_status write_all(const sqz_model *m, const sqz_save_opts *o, const sqz__onnx_plan *p, sqz_outdir *d) {
    sqz__bytebuf proto = {0};
    SQZ_TRY(sqz__onnx_model_proto(m, p, DATA_FILE, &proto));
    sqz_status st = write_data(m, o, p, d);
    if (st == SQZ_OK) st = write_bytes(d, "model.onnx", proto.p, proto.n);
    free(proto.p);
    if (st == SQZ_OK) st = write_owned_text(d, "genai_config.json", genai_config(m, p));
    if (st == SQZ_OK) {
        /* a model an HF config cannot state (per-layer head counts or widths: pruned) is written without it,
         * and cannot be read back (onnx_read.c says why) */
        char *cfg = sqz__hf_config_write(m);
        if (cfg) st = write_owned_text(d, "config.json", cfg);
        else sqz_clear_error();
    }
    if (st == SQZ_OK && (m->vocab.n_tokens > 0 || m->vocab.hf_json)) {
        st = write_owned_text(d, "tokenizer.json", sqz__tokenizer_json_write(&m->vocab));
        if (st == SQZ_OK) st = write_owned_text(d, "tokenizer_config.json", sqz__tokenizer_config_write(&m->vocab));
    }
    return st;
}

sqz_status sqz__onnx_save(const sqz_model *m, const char *path, const sqz_save_opts *o) {
    sqz_status st = sqz_model_validate(m);
    if (st == SQZ_OK) st = check_arch(m);
    if (st != SQZ_OK) {
        sqz__error_prefix("%s: cannot write", path);
        return st;
    }
    sqz__onnx_plan p;
    st = sqz__onnx_plan_make(m, o, &p);
    if (st != SQZ_OK) {
        sqz__error_prefix("%s", path);
        return st;
    }
    sqz_outdir *d = NULL;
    st = sqz_outdir_open_ex(path, o->replace ? SQZ_OUTPUT_REPLACE : 0, &d);
    if (st == SQZ_OK) {
        st = write_all(m, o, &p, d);
        if (st == SQZ_OK) st = sqz_outdir_commit(d);
        else {
            sqz__error_prefix("%s", path);
            sqz_outdir_abort(d);
        }
    }
    sqz__onnx_plan_free(&p);
    return st;
}
