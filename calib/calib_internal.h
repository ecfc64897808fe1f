/*
 * calib/calib_internal.h - what the files of calib/ share (not public).
 */
#ifndef SQZ_CALIB_INTERNAL_H
#define SQZ_CALIB_INTERNAL_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>

#include "core/internal.h"
#include "sqz/calib.h"

#define SQZ__ROLE_BIT(r) (1u << (unsigned)(r))

static inline double sqz__calib_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* sqz_calib_stats_read's parser over a file's bytes (path names it in messages); the result
 * does not point into data. */
sqz_status sqz__calib_stats_read_mem(const char *path, const uint8_t *data, size_t size, sqz_calib_stats **out);

#endif
