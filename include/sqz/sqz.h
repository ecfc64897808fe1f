/*
 * sqz/sqz.h - the umbrella header of libsqz, the sqz model compression library.
 *
 * libsqz reads transformer checkpoints (safetensors/HF, GGUF, llama2.c) into one model
 * representation (sqz/model.h), transforms them, and writes them back out. Every
 * fallible call returns an sqz_status (sqz/status.h); sqz_last_error() holds the
 * detailed message.
 *
 *   #include <sqz/sqz.h>
 *
 *   sqz_model *m;
 *   if (sqz_model_open("stories260K.bin", NULL, &m) != SQZ_OK) {
 *       fprintf(stderr, "sqz: %s\n", sqz_last_error());
 *       return 1;
 *   }
 *   sqz_save_opts o = {.format = SQZ_FORMAT_GGUF, .dtype = -1};
 *   sqz_status s = sqz_model_save(m, "stories260K.gguf", &o);  // atomic: all or nothing
 *   sqz_model_free(m);
 *
 * Ownership: objects returned through an `out` parameter belong to the caller and are
 * released with their *_free function, which accepts NULL. Strings returned as
 * `const char *` belong to the library.
 */
#ifndef SQZ_H
#define SQZ_H

/* SQZ_VERSION_MAJOR, _MINOR, _PATCH, _STRING: sqz/api.h, which every header includes. */
#include "sqz/backend.h"
#include "sqz/calib.h"
#include "sqz/chat.h"
#include "sqz/compress.h"
#include "sqz/dtype.h"
#include "sqz/edit.h"
#include "sqz/eval.h"
#include "sqz/family.h"
#include "sqz/formats.h"
#include "sqz/io.h"
#include "sqz/layerdrop.h"
#include "sqz/model.h"
#include "sqz/options.h"
#include "sqz/progress.h"
#include "sqz/prune.h"
#include "sqz/qparams.h"
#include "sqz/quant.h"
#include "sqz/runtime.h"
#include "sqz/sparse.h"
#include "sqz/status.h"
#include "sqz/tasks.h"
#include "sqz/tensor.h"
#include "sqz/tokenizer.h"
#include "sqz/vocab.h"

#endif
