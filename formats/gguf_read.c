/* formats/gguf_read.c - placeholder until its owner lands it. */
#include "formats/formats_internal.h"
sqz_status sqz__gguf_open(const char *path, sqz_model *m) { (void)m; return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: GGUF reader not built yet", path); }
