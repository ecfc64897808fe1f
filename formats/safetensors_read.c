/* formats/safetensors_read.c - placeholder until its owner lands it. */
#include "formats/formats_internal.h"
sqz_status sqz__st_open(const char *path, sqz_model *m) { (void)m; return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: safetensors reader not built yet", path); }
