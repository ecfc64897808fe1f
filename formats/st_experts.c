/*
 * formats/st_experts.c - a mixture's experts between HF checkpoints, which store one tensor per expert
 * ("model.layers.3.mlp.experts.5.up_proj.weight", Mixtral's "block_sparse_moe.experts.5.w3"), and sqz's
 * model, which holds each layer's experts stacked in one (n_expert, rows, cols) tensor per role, as GGUF's
 * ffn_*_exps and llama.cpp do.
 *
 * Reading copies each expert's matrix into its stacked tensor, a scratch file's mapping kept by the model
 * (core's sqz__map_spill): each expert's pages, source and copy, are dropped from memory once copied, so
 * an HF mixture is assembled one expert at a time and then paged in block by block like a GGUF one
 * (heap memory instead where no scratch file can be made); every expert of every stacked role must be
 * present, in one float dtype and one shape.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "formats/formats_internal.h"

sqz_status sqz__st_add_expert(sqz_model *m, const sqz__st_view *v, sqz_role role, int32_t layer, sqz_param param,
                              int32_t x, int32_t *counts) {
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers || param != SQZ_PARAM_WEIGHT, SQZ_ERR_FORMAT,
                  "%s: tensor '%s': no expert weight of this model", v->file, v->name);
    const sqz_layer_dims *ld = &m->layers[layer];
    SQZ_RETURN_IF(x >= ld->n_expert, SQZ_ERR_FORMAT, "%s: tensor '%s': expert %d, but the config has %" PRId64,
                  v->file, v->name, (int)x, ld->n_expert);
    const sqz_dtype_traits *tr = sqz_dtype_info(v->dtype);
    SQZ_RETURN_IF(v->ndim != 2 || !tr || !tr->is_float, SQZ_ERR_FORMAT,
                  "%s: tensor '%s': an expert's matrix must be 2-D floats (%d dimensions of %s)", v->file, v->name,
                  (int)v->ndim, sqz_dtype_name(v->dtype));
    size_t one;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(v->dtype, v->shape[0] * v->shape[1], &one), SQZ_ERR_SHAPE,
                  "%s: tensor '%s': size overflows", v->file, v->name);
    sqz_tensor *t = sqz_model_get(m, role, layer, param);
    if (!t) {
        char name[160];
        snprintf(name, sizeof name, "blk.%d.%s.weight", (int)layer, sqz_role_name(role));
        size_t all;
        SQZ_RETURN_IF(!sqz__mul_size(one, (size_t)ld->n_expert, &all), SQZ_ERR_SHAPE,
                      "%s: tensor '%s': %" PRId64 " experts overflow", v->file, v->name, ld->n_expert);
        sqz_tensor nt = {.name = name, .role = role, .layer = layer, .param = param, .dtype = v->dtype, .ndim = 3,
                         .shape = {ld->n_expert, v->shape[0], v->shape[1], 1}, .nbytes = all};
        sqz_mapping *spill = NULL;
        if (all && sqz__map_spill(all, &spill) == SQZ_OK) {
            SQZ_TRY(sqz_model_keep_mapping(m, spill));
            nt.data = (void *)(uintptr_t)spill->data;
        } else {
            sqz_clear_error();
            nt.owned = true;
            if (!(nt.data = sqz__calloc(1, all ? all : 1))) return SQZ_ERR_NOMEM;
        }
        if (!(t = sqz_model_add_tensor(m, &nt))) {
            if (nt.owned) free(nt.data);
            return SQZ_ERR_NOMEM;
        }
    }
    SQZ_RETURN_IF(t->dtype != v->dtype || t->shape[1] != v->shape[0] || t->shape[2] != v->shape[1], SQZ_ERR_FORMAT,
                  "%s: tensor '%s': %" PRId64 " x %" PRId64 " %s, where the layer's other experts are %" PRId64
                  " x %" PRId64 " %s", v->file, v->name, v->shape[0], v->shape[1], sqz_dtype_name(v->dtype),
                  t->shape[1], t->shape[2], sqz_dtype_name(t->dtype));
    uint8_t *dst = (uint8_t *)t->data + (size_t)x * one;
    memcpy(dst, v->data, one);
    (void)sqz__mapping_release(v->data, one); /* both are file pages again (not heap: nothing done) */
    (void)sqz__mapping_release(dst, one);
    counts[t - m->tensors]++;
    return SQZ_OK;
}

sqz_status sqz__st_experts_check(const sqz_model *m, const int32_t *counts, const char *path) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        if (t->ndim != 3 || t->shape[0] == counts[i]) continue;
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: layer %d has %d of its %" PRId64 " experts' %s matrices", path,
                         (int)t->layer, (int)counts[i], t->shape[0], sqz_role_name(t->role));
    }
    return SQZ_OK;
}
