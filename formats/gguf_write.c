/* formats/gguf_write.c - placeholder until its owner lands it. */
#include "formats/formats_internal.h"
sqz_status sqz__gguf_save(const sqz_model *m, const char *path, const sqz_save_opts *o) { (void)m; (void)o; return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: GGUF writer not built yet", path); }
