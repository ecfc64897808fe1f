/* formats/llama2c.c - placeholder until its owner lands it. */
#include "formats/formats_internal.h"
sqz_status sqz__llama2c_open(const char *path, const char *tokenizer_path, sqz_model *m) { (void)m; (void)tokenizer_path; return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: llama2.c reader not built yet", path); }
