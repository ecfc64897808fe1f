/*
 * calib/calib_internal.h - what the files of calib/ share (not public).
 */
#ifndef SQZ_CALIB_INTERNAL_H
#define SQZ_CALIB_INTERNAL_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>

#include "core/internal.h"
#include "sqz/calib.h"
#include "sqz/progress.h"

#define SQZ__ROLE_BIT(r) (1u << (unsigned)(r))

/* sqz_calib_stats_read's parser over a file's bytes (path names it in messages); the result
 * does not point into data. */
sqz_status sqz__calib_stats_read_mem(const char *path, const uint8_t *data, size_t size, sqz_calib_stats **out);

/* ---- llama-imatrix's importance matrix (imatrix_read.c) ---- */
typedef struct sqz__imatrix_entry {
    char name[256]; /* llama.cpp's tensor name: blk.0.attn_q.weight */
    int64_t n;      /* values (n_in times the matrices: 1 for a dense model) */
    float *v;       /* E[x^2] as llama-quantize computes it from the file (owned) */
    int64_t n_mat;  /* the matrices (a mixture's experts) the GGUF layout states, 0 where unknown (.dat) */
    float *counts;  /* (n_mat) tokens of each (GGUF layout), or NULL (owned) */
} sqz__imatrix_entry;

typedef struct sqz__imatrix {
    sqz__imatrix_entry *e;
    int64_t n;
    int32_t chunks, chunk_size; /* imatrix.chunk_count / chunk_size (legacy: chunks only) */
    bool legacy;                /* the .dat layout */
} sqz__imatrix;

/* Parses either layout from memory (GGUF when it starts with "GGUF", else legacy .dat); every
 * failure is SQZ_ERR_FORMAT naming path, the entry and the reason, with *out emptied. */
sqz_status sqz__imatrix_parse(const char *path, const uint8_t *data, size_t size, sqz__imatrix *out);
/* Frees what im owns and zeroes it. NULL is fine. */
void sqz__imatrix_free(sqz__imatrix *im);
/* The statistics of model m from a parsed imatrix (sqz_calib_stats_read_imatrix after the read). */
sqz_status sqz__imatrix_to_stats(const char *path, const sqz__imatrix *im, const sqz_model *m,
                                 sqz_calib_stats **out);

#endif
