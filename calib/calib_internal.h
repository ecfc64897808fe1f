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

#endif
