/* core/experts.c - removing whole experts of a mixture's layer (sqz/family.h, sqz_model_keep_experts): the kept
 * experts' matrices of the stacked FFN_*_EXPS tensors and their rows of the router, every new tensor built before
 * any changes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/edit_internal.h"
#include "sqz/edit.h"
#include "sqz/family.h"

static const sqz_role expert_roles[] = {SQZ_ROLE_FFN_GATE_INP, SQZ_ROLE_FFN_GATE_EXPS, SQZ_ROLE_FFN_UP_EXPS,
                                        SQZ_ROLE_FFN_DOWN_EXPS};
enum { N_ROLES = sizeof expert_roles / sizeof expert_roles[0] };

/* The kept experts of t (outermost dimension: experts) into a new buffer *out of *bytes. */
static sqz_status gather(const sqz_tensor *t, const int64_t *keep, int64_t n, void **out, size_t *bytes) {
    SQZ_RETURN_IF(t->qp, SQZ_ERR_UNSUPPORTED, "tensor '%s': sqz-quantized experts cannot be removed", t->name);
    const size_t each = t->nbytes / (size_t)t->shape[0];
    *bytes = each * (size_t)n;
    uint8_t *p = sqz__malloc(*bytes ? *bytes : 1);
    if (!p) return SQZ_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) memcpy(p + (size_t)i * each, (const uint8_t *)t->data + (size_t)keep[i] * each, each);
    *out = p;
    return SQZ_OK;
}

sqz_status sqz_model_keep_experts(sqz_model *m, int32_t layer, const int64_t *keep, int64_t n) {
    SQZ_TRY(sqz_model_validate(m));
    const sqz_family_info *fi = sqz_family_get(m->hp.family);
    SQZ_RETURN_IF(!fi || !fi->experts, SQZ_ERR_ARCH, "%s has no experts to remove", sqz_family_name(m->hp.family));
    SQZ_RETURN_IF(layer < 0 || layer >= m->hp.n_layers, SQZ_ERR_INVALID_ARG,
                  "layer %d: no such layer (the model has %" PRId64 ")", (int)layer, m->hp.n_layers);
    sqz_layer_dims ld = m->layers[layer];
    char what[64];
    snprintf(what, sizeof what, "layer %d: experts", (int)layer);
    SQZ_TRY(sqz__check_keep(keep, n, ld.n_expert, what));
    SQZ_RETURN_IF(n < m->hp.n_expert_used, SQZ_ERR_INVALID_ARG, "layer %d: %" PRId64 " experts kept, but every token "
                  "is routed to %" PRId64, (int)layer, n, m->hp.n_expert_used);
    void *buf[N_ROLES] = {0};
    size_t bytes[N_ROLES] = {0};
    sqz_tensor *t[N_ROLES];
    sqz_status st = SQZ_OK;
    for (int r = 0; r < N_ROLES && st == SQZ_OK; r++) {
        t[r] = sqz_model_get(m, expert_roles[r], layer, SQZ_PARAM_WEIGHT);
        st = t[r] ? gather(t[r], keep, n, &buf[r], &bytes[r]) : SQZ_OK;
    }
    for (int r = 0; r < N_ROLES && st == SQZ_OK; r++) {
        if (!t[r]) continue;
        int64_t shape[SQZ_MAX_DIMS];
        memcpy(shape, t[r]->shape, sizeof shape);
        shape[0] = n;
        st = sqz_tensor_replace(m, t[r], t[r]->dtype, t[r]->ndim, shape, buf[r], bytes[r], true);
        if (st == SQZ_OK) buf[r] = NULL;
    }
    for (int r = 0; r < N_ROLES; r++) free(buf[r]);
    SQZ_TRY(st);
    ld.n_expert = n;
    SQZ_TRY(sqz_model_set_layer_dims(m, layer, &ld));
    return sqz_model_validate(m);
}
