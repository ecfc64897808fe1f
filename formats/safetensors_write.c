/* formats/safetensors_write.c - placeholder until its owner lands it. */
#include "formats/formats_internal.h"
sqz_status sqz__st_save(const sqz_model *m, const char *path, const sqz_save_opts *o) { (void)m; (void)o; return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: safetensors writer not built yet", path); }
