/*
 * sqz/progress.h - the progress of long work, on stderr.
 *
 * On a terminal: "\r<label>  41.2% 123.4/299.0 MB  56.7 MB/s  eta 3s", redrawn at most ten
 * times a second. Otherwise (a log file, a pipe, CI, nohup): plain lines, no '\r', one when
 * the work starts, one about every 10 s (done/total, rate, ETA) and one when it ends:
 *   sqz progress: compress: started
 *   sqz progress: compress: 12/60 blocks (20.0%), 0.40 blocks/s, eta 120 s
 *   sqz progress: compress: done, 60/60 blocks in 150.2 s
 * The environment variable SQZ_PROGRESS overrides the choice: 0 shows nothing, 1 the terminal
 * form, "lines" the plain lines.
 */
#ifndef SQZ_PROGRESS_H
#define SQZ_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

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
/* How a progress may be shown: AUTO (as above), LINES_ONLY (the plain lines, nothing on a
 * terminal: for a command whose terminal output is its own progress, such as generated text),
 * OFF (nothing, e.g. --quiet). */
typedef enum { SQZ_PROGRESS_AUTO, SQZ_PROGRESS_LINES_ONLY, SQZ_PROGRESS_OFF } sqz_progress_mode;
/* sqz_progress_start with a mode (sqz_progress_start is mode AUTO). */
SQZ_API sqz_progress *sqz_progress_start_mode(const char *label, int64_t total, const char *unit,
                                              sqz_progress_mode mode);
SQZ_API void sqz_progress_update(sqz_progress *p, int64_t done);
/* Ends the line (prints the final state and a newline when shown) and frees p. */
SQZ_API void sqz_progress_end(sqz_progress *p);
/* An sqz_progress_fn adapter: user is an sqz_progress*. */
SQZ_API void sqz_progress_cb(void *user, int64_t done, int64_t total);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC: unaffected by changes to the wall time) from
 * an arbitrary origin, as a double: only differences mean anything. The one clock the library and
 * the CLI time their work with (t0 = sqz_now_seconds(); ...; sqz_now_seconds() - t0). */
SQZ_API double sqz_now_seconds(void);

/* When the environment sets SQZ_PROFILE=1: where this process's time went so far, phase by
 * phase (forward products, attention, observers, GPTQ's steps, ...), one line each
 * ("profile  <seconds> s  <count>x  <phase>") to f; nothing otherwise. Phases nest, so the
 * rows do not add up to the wall time. */
SQZ_API void sqz_profile_print(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
