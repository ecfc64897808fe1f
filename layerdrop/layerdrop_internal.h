/*
 * layerdrop/layerdrop_internal.h - what the files of layerdrop/ share (not public).
 */
#ifndef SQZ_LAYERDROP_INTERNAL_H
#define SQZ_LAYERDROP_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/internal.h"
#include "sqz/layerdrop.h"
#include "sqz/progress.h"

/* Refuses models the scoring and compensation cannot run (encoders). `what` starts the message. */
sqz_status sqz__ld_check_decoder(const sqz_model *m, const char *what);

/* A session on m for windows of w (so may be NULL: defaults; max_tokens = w->ctx). */
sqz_status sqz__ld_session(const sqz_model *m, const sqz_calib_windows *w, const sqz_session_opts *so,
                           sqz_session **out);

/* Runs window x (n rows, already embedded) through the active blocks active[from..to) in
 * place. */
sqz_status sqz__ld_blocks(sqz_session *s, const int32_t *active, int32_t from, int32_t to, float *x, int64_t n);

#endif
