/* formats/tokenizer_llama2c.c - placeholder until its owner lands it. */
#include "formats/formats_internal.h"
sqz_status sqz__llama2c_tokenizer_read(const char *path, int32_t vocab_size, sqz_vocab *v) { (void)vocab_size; (void)v; return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: not built yet", path); }
