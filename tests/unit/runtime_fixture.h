/* tests/unit/runtime_fixture.h - reads the SQZREF1 reference fixtures of tests/data/runtime/
 * (written by tests/ref/fixture.py; the format is described there and in that folder's README). */
#ifndef SQZ_TEST_RUNTIME_FIXTURE_H
#define SQZ_TEST_RUNTIME_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_row {
    int32_t pos;
    int32_t *cols; /* NULL when dense */
    float *vals;
} ref_row;

typedef struct ref_case {
    int32_t *ids, *out;
    uint32_t n_ids, n_out, n_rows, n_cols;
    ref_row *rows;
} ref_case;

typedef struct ref_file {
    uint32_t n_cases;
    ref_case *cases;
    uint8_t *buf;
} ref_file;

static int ref__take(const uint8_t *b, size_t n, size_t *off, void *dst, size_t bytes) {
    if (bytes > n - *off) return 0;
    memcpy(dst, b + *off, bytes);
    *off += bytes;
    return 1;
}

static int ref__array(const uint8_t *b, size_t n, size_t *off, uint32_t count, size_t elem, void **out) {
    *out = NULL;
    if ((size_t)count > (n - *off) / elem) return 0;
    *out = malloc(count ? count * elem : 1);
    return *out && ref__take(b, n, off, *out, count * elem);
}

static void ref_free(ref_file *f) {
    if (!f) return;
    for (uint32_t i = 0; f->cases && i < f->n_cases; i++) {
        ref_case *c = &f->cases[i];
        for (uint32_t r = 0; c->rows && r < c->n_rows; r++) {
            free(c->rows[r].cols);
            free(c->rows[r].vals);
        }
        free(c->rows);
        free(c->ids);
        free(c->out);
    }
    free(f->cases);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

/* Returns 1 on success (little-endian hosts only, as every machine sqz runs on). */
static int ref_load(const char *path, ref_file *f) {
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->buf = malloc(sz > 0 ? (size_t)sz : 1);
    size_t n = f->buf ? fread(f->buf, 1, (size_t)sz, fp) : 0;
    fclose(fp);
    size_t off = 8;
    if (n < 12 || memcmp(f->buf, "SQZREF1\n", 8) != 0) goto bad;
    if (!ref__take(f->buf, n, &off, &f->n_cases, 4) || f->n_cases > 1000) goto bad;
    f->cases = calloc(f->n_cases ? f->n_cases : 1, sizeof *f->cases);
    if (!f->cases) goto bad;
    for (uint32_t i = 0; i < f->n_cases; i++) {
        ref_case *c = &f->cases[i];
        uint32_t dense;
        if (!ref__take(f->buf, n, &off, &c->n_ids, 4) || !ref__array(f->buf, n, &off, c->n_ids, 4, (void **)&c->ids))
            goto bad;
        if (!ref__take(f->buf, n, &off, &c->n_out, 4) || !ref__array(f->buf, n, &off, c->n_out, 4, (void **)&c->out))
            goto bad;
        if (!ref__take(f->buf, n, &off, &c->n_rows, 4) || !ref__take(f->buf, n, &off, &c->n_cols, 4) ||
            !ref__take(f->buf, n, &off, &dense, 4) || c->n_rows > 4096)
            goto bad;
        c->rows = calloc(c->n_rows ? c->n_rows : 1, sizeof *c->rows);
        if (!c->rows) goto bad;
        for (uint32_t r = 0; r < c->n_rows; r++) {
            ref_row *row = &c->rows[r];
            if (!ref__take(f->buf, n, &off, &row->pos, 4)) goto bad;
            if (!dense && !ref__array(f->buf, n, &off, c->n_cols, 4, (void **)&row->cols)) goto bad;
            if (!ref__array(f->buf, n, &off, c->n_cols, 4, (void **)&row->vals)) goto bad;
        }
    }
    return 1;
bad:
    ref_free(f);
    return 0;
}

/* max |got[col] - ref| / max |ref| over a row's stored entries (got: a full row of logits, or
 * the values themselves when dense). */
static double ref_rel_err(const ref_row *row, uint32_t n_cols, const float *got) {
    double num = 0, den = 0;
    for (uint32_t j = 0; j < n_cols; j++) {
        double g = got[row->cols ? row->cols[j] : (int32_t)j], r = row->vals[j];
        if (fabs(g - r) > num) num = fabs(g - r);
        if (fabs(r) > den) den = fabs(r);
    }
    return den > 0 ? num / den : num;
}

#endif
