/*
 * runtime/family_ops.c - the runtime's passes of each family, one row per family (the
 * rows of core/family.c say what the family is; these say how it runs). session.c chains
 * embed -> blocks -> head through the row of the session's model.
 */
#include "core/family_internal.h"
#include "runtime/runtime_internal.h"

static const sqz__family_ops ops[] = {
    [SQZ_FAMILY_LLAMA] = {/* .embed = */ sqz__llama_embed, /* .block = */ sqz__llama_block,
                          /* .head = */ sqz__llama_head},
    [SQZ_FAMILY_BERT] = {/* .embed = */ sqz__bert_embed, /* .block = */ sqz__bert_block, /* .head = */ NULL},
    /* the newer decoders run llama's passes: their tensors and hyperparameters switch its parts on */
    [SQZ_FAMILY_QWEN3] = {sqz__llama_embed, sqz__llama_block, sqz__llama_head},
    [SQZ_FAMILY_GEMMA3] = {sqz__llama_embed, sqz__llama_block, sqz__llama_head},
    [SQZ_FAMILY_PHI3] = {sqz__llama_embed, sqz__llama_block, sqz__llama_head},
    [SQZ_FAMILY_QWEN3MOE] = {sqz__llama_embed, sqz__llama_block, sqz__llama_head},
    [SQZ_FAMILY_MIXTRAL] = {sqz__llama_embed, sqz__llama_block, sqz__llama_head},
};
_Static_assert(sizeof ops / sizeof *ops == SQZ_FAMILY_COUNT, "one runtime row per sqz_family");

/* The rows of families registered at run time, by id - SQZ_FAMILY_COUNT. */
#define EXTRA_OPS 4
static const sqz__family_ops *extra[EXTRA_OPS];

const sqz__family_ops *sqz__family_ops_get(sqz_family f) {
    if ((unsigned)f < (unsigned)SQZ_FAMILY_COUNT) return &ops[f];
    if ((unsigned)f - SQZ_FAMILY_COUNT < EXTRA_OPS) return extra[(unsigned)f - SQZ_FAMILY_COUNT];
    return NULL;
}

sqz_status sqz__family_ops_register(sqz_family_info *row, const sqz__family_ops *fops, sqz_family *out) {
    SQZ_RETURN_IF(!fops || !fops->embed || !fops->block || (row->lm_head && !fops->head), SQZ_ERR_INVALID_ARG,
                  "family table: family '%s' needs embed and block passes (and a head for a decoder)", row->name);
    sqz_family f;
    SQZ_TRY(sqz__family_register(row, &f));
    SQZ_RETURN_IF((unsigned)f - SQZ_FAMILY_COUNT >= EXTRA_OPS, SQZ_ERR_UNSUPPORTED,
                  "family table: no free runtime slot for family '%s'", row->name);
    extra[(unsigned)f - SQZ_FAMILY_COUNT] = fops;
    *out = f;
    return SQZ_OK;
}
