/* formats/st_gptq.c - GPTQ (placeholder until written) */
#include "formats/formats_internal.h"

static sqz_status gptq_parts(const sqz__st_layout *L, const sqz_tensor *t, sqz__st_part *p, int *n) {
    (void)L; (void)p; *n = 0;
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "tensor '%s': GPTQ output is not written yet", t->name);
}
static char *gptq_config(const sqz__st_layout *L, const sqz_model *m, char *cfg) { (void)L; (void)m; return cfg; }
static bool gptq_is_part(const char *name) { (void)name; return false; }
static sqz_status gptq_attach(sqz_model *m, const void *qc, const sqz__st_view *v, size_t n) {
    (void)m; (void)qc; (void)v; (void)n;
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "GPTQ checkpoints are not read yet");
}
const sqz__st_layout sqz__st_layout_gptq = {SQZ_HF_GPTQ, "gptq", gptq_parts, gptq_config, gptq_is_part, gptq_attach};
const sqz__st_layout sqz__st_layout_gptq_v2 = {SQZ_HF_GPTQ_V2, "gptq", gptq_parts, gptq_config, gptq_is_part, gptq_attach};
