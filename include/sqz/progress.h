/*
 * sqz/progress.h - a progress line on a terminal for long work.
 *
 * Prints "\r<label>  41.2% 123.4/299.0 MB  56.7 MB/s  eta 3s" to stderr at most
 * ten times a second, and only when stderr is a terminal (or SQZ_PROGRESS=1 is set);
 * otherwise it is silent, so logs and pipes stay clean.
 */
#ifndef SQZ_PROGRESS_H
#define SQZ_PROGRESS_H

#include <stdint.h>

#include "sqz/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A progress callback: done of total units (bytes, blocks, tokens: the caller says which). */
typedef void (*sqz_progress_fn)(void *user, int64_t done, int64_t total);

typedef struct sqz_progress sqz_progress;

/* Starts a progress line. unit is "B" (shown as MB) or a word such as "tokens".
 * Returns NULL on out of memory; every function below accepts NULL. */
SQZ_API sqz_progress *sqz_progress_start(const char *label, int64_t total, const char *unit);
SQZ_API void sqz_progress_update(sqz_progress *p, int64_t done);
/* Ends the line (prints the final state and a newline when shown) and frees p. */
SQZ_API void sqz_progress_end(sqz_progress *p);
/* An sqz_progress_fn adapter: user is an sqz_progress*. */
SQZ_API void sqz_progress_cb(void *user, int64_t done, int64_t total);

#ifdef __cplusplus
}
#endif
#endif
