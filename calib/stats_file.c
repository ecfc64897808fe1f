/*
 * calib/stats_file.c - the statistics file (.sqzs): writer and reader. The layout is
 * documented in sqz/calib.h. Every record carries its length and a zlib crc32 of its
 * payload; the reader checks both before it looks inside, and every count inside against
 * the bytes left.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "calib/calib_internal.h"

#define HEADER_BYTES 104
#define MAX_LAYERS (1 << 16)

static const char MAGIC[8] = {'S', 'Q', 'Z', 'S', 'T', 'A', 'T', '1'};
static const char TAG_BLK[4] = {'B', 'L', 'K', '0'}, TAG_LIN[4] = {'L', 'I', 'N', '0'}, TAG_END[4] = {'E', 'N', 'D', '0'};

/* ======================================================================================
 * writer
 * ====================================================================================== */

struct sqz_stats_writer {
    sqz_outfile *f;
    char *path;
    unsigned have;
    uLong crc;         /* of the record being written */
    uint64_t n_records;
    uint8_t buf[1 << 16];
};

static sqz_status w_raw(sqz_stats_writer *w, const void *p, size_t n) {
    w->crc = crc32(w->crc, p, (uInt)n);
    return sqz_outfile_write(w->f, p, n);
}

static sqz_status w_u32(sqz_stats_writer *w, uint32_t v) {
    uint8_t b[4];
    sqz__wr_u32(b, v);
    return w_raw(w, b, 4);
}

static sqz_status w_u64(sqz_stats_writer *w, uint64_t v) {
    uint8_t b[8];
    sqz__wr_u64(b, v);
    return w_raw(w, b, 8);
}

static sqz_status w_f64(sqz_stats_writer *w, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return w_u64(w, u);
}

static sqz_status w_f32s(sqz_stats_writer *w, const float *v, int64_t n) {
    const int64_t per = (int64_t)sizeof w->buf / 4;
    for (int64_t i = 0; i < n; i += per) {
        int64_t k = n - i < per ? n - i : per;
        for (int64_t j = 0; j < k; j++) {
            uint32_t u;
            memcpy(&u, &v[i + j], 4);
            sqz__wr_u32(w->buf + 4 * j, u);
        }
        SQZ_TRY(w_raw(w, w->buf, (size_t)k * 4));
    }
    return SQZ_OK;
}

static sqz_status w_f64s(sqz_stats_writer *w, const double *v, int64_t n) {
    const int64_t per = (int64_t)sizeof w->buf / 8;
    for (int64_t i = 0; i < n; i += per) {
        int64_t k = n - i < per ? n - i : per;
        for (int64_t j = 0; j < k; j++) {
            uint64_t u;
            memcpy(&u, &v[i + j], 8);
            sqz__wr_u64(w->buf + 8 * j, u);
        }
        SQZ_TRY(w_raw(w, w->buf, (size_t)k * 8));
    }
    return SQZ_OK;
}

static sqz_status record_begin(sqz_stats_writer *w, const char tag[4], uint64_t len) {
    SQZ_TRY(sqz_outfile_write(w->f, tag, 4));
    uint8_t b[12];
    sqz__wr_u32(b, 0);
    sqz__wr_u64(b + 4, len);
    SQZ_TRY(sqz_outfile_write(w->f, b, 12));
    w->crc = crc32(0L, Z_NULL, 0);
    return SQZ_OK;
}

static sqz_status record_end(sqz_stats_writer *w) {
    uint8_t b[4];
    sqz__wr_u32(b, (uint32_t)w->crc);
    w->n_records++;
    return sqz_outfile_write(w->f, b, 4);
}

void sqz_stats_writer_abort(sqz_stats_writer *w) {
    if (!w) return;
    sqz_outfile_abort(w->f);
    free(w->path);
    free(w);
}

sqz_status sqz_stats_writer_open(const char *path, const sqz_model *m, const sqz_calib_windows *win, unsigned have,
                                 int64_t sample_rows, sqz_stats_writer **out) {
    *out = NULL;
    SQZ_RETURN_IF(!path || !m || !win, SQZ_ERR_INVALID_ARG, "statistics file: missing arguments");
    SQZ_RETURN_IF(m->hp.n_expert > 0, SQZ_ERR_UNSUPPORTED, "%s: a statistics file does not hold a mixture's "
                  "per-expert statistics yet: calibrate within compress (--calib FILE)", path);
    sqz_stats_writer *w = sqz__calloc(1, sizeof *w);
    if (!w) return SQZ_ERR_NOMEM;
    w->have = have;
    w->path = sqz__strdup(path);
    sqz_status st = w->path ? sqz_outfile_open(path, &w->f) : SQZ_ERR_NOMEM;
    if (st != SQZ_OK) {
        free(w->path);
        free(w);
        return st;
    }
    uint8_t h[HEADER_BYTES];
    memset(h, 0, sizeof h);
    memcpy(h, MAGIC, 8);
    sqz__wr_u32(h + 8, 1);
    sqz__wr_u32(h + 12, have);
    sqz__wr_u32(h + 16, (uint32_t)m->hp.n_layers);
    sqz__wr_u32(h + 20, (uint32_t)m->hp.d_model);
    sqz__wr_u32(h + 24, (uint32_t)m->hp.vocab_size);
    size_t al = strlen(m->hp.arch);
    memcpy(h + 32, m->hp.arch, al < 32 ? al : 32);
    sqz__wr_u64(h + 64, (uint64_t)win->n_windows);
    sqz__wr_u64(h + 72, (uint64_t)win->ctx);
    sqz__wr_u64(h + 80, win->seed);
    sqz__wr_u64(h + 88, (uint64_t)win->n_text_tokens);
    sqz__wr_u32(h + 96, (uint32_t)sample_rows);
    sqz__wr_u32(h + 100, (uint32_t)crc32(0L, h, 100));
    st = sqz_outfile_write(w->f, h, sizeof h);
    if (st != SQZ_OK) {
        sqz_stats_writer_abort(w);
        return st;
    }
    *out = w;
    return SQZ_OK;
}

static uint64_t lin_payload_len(const sqz_calib_input *in, unsigned have) {
    uint64_t k = (uint64_t)in->st.n_in, len = 4 + 4 + 8 + 8 + 4;
    if (have & SQZ_QSTAT_X2) len += 4 * k;
    if (have & SQZ_QSTAT_ABSMAX) len += 4 * k;
    if (have & SQZ_QSTAT_ABSMEAN) len += 4 * k;
    if (have & SQZ_QSTAT_XTX) len += 8 * (k * (k + 1) / 2);
    if (have & SQZ_QSTAT_SAMPLE) len += 8 + 4 * (uint64_t)in->st.n_x * k;
    if (have & SQZ_QSTAT_HIST) len += 4 + 4 + 8 + 8 + 4 + 4 + 8 + 8 * (uint64_t)in->hist.n_bins;
    return len;
}

/* Statistics are never written non-finite (finite weights whose activations overflow): the
 * error names the block, the statistic and the channel. */
static sqz_status check_finite(const float *p, int64_t n, int32_t layer, const char *what) {
    for (int64_t c = 0; p && c < n; c++)
        SQZ_RETURN_IF(!isfinite(p[c]), SQZ_ERR_FORMAT, "calibration: block %d: %s of input channel %lld is %g: the "
                      "activations overflow", layer, what, (long long)c, (double)p[c]);
    return SQZ_OK;
}

static sqz_status write_input(sqz_stats_writer *w, int32_t layer, const sqz_calib_input *in) {
    unsigned have = in->have & w->have &
                    (SQZ_QSTAT_X2 | SQZ_QSTAT_ABSMAX | SQZ_QSTAT_ABSMEAN | SQZ_QSTAT_XTX | SQZ_QSTAT_SAMPLE |
                     SQZ_QSTAT_HIST);
    const int64_t k = in->st.n_in;
    if (have & SQZ_QSTAT_X2) SQZ_TRY(check_finite(in->x2, k, layer, "E[x^2]"));
    if (have & SQZ_QSTAT_ABSMAX) SQZ_TRY(check_finite(in->absmax, k, layer, "max |x|"));
    if (have & SQZ_QSTAT_ABSMEAN) SQZ_TRY(check_finite(in->absmean, k, layer, "E|x|"));
    SQZ_TRY(record_begin(w, TAG_LIN, lin_payload_len(in, have)));
    SQZ_TRY(w_u32(w, (uint32_t)layer));
    SQZ_TRY(w_u32(w, in->roles));
    SQZ_TRY(w_u64(w, (uint64_t)k));
    SQZ_TRY(w_u64(w, (uint64_t)in->st.n_tokens));
    SQZ_TRY(w_u32(w, have));
    if (have & SQZ_QSTAT_X2) SQZ_TRY(w_f32s(w, in->x2, k));
    if (have & SQZ_QSTAT_ABSMAX) SQZ_TRY(w_f32s(w, in->absmax, k));
    if (have & SQZ_QSTAT_ABSMEAN) SQZ_TRY(w_f32s(w, in->absmean, k));
    if (have & SQZ_QSTAT_XTX)
        for (int64_t r = 0; r < k; r++) SQZ_TRY(w_f64s(w, in->xtx + r * k + r, k - r));
    if (have & SQZ_QSTAT_SAMPLE) {
        SQZ_TRY(w_u64(w, (uint64_t)in->st.n_x));
        SQZ_TRY(w_f32s(w, in->x, in->st.n_x * k));
    }
    if (have & SQZ_QSTAT_HIST) {
        const sqz_act_hist *h = &in->hist;
        SQZ_TRY(w_u32(w, (uint32_t)h->n_bins));
        SQZ_TRY(w_u32(w, 0));
        SQZ_TRY(w_f64(w, h->width));
        SQZ_TRY(w_f64(w, h->total));
        SQZ_TRY(w_f32s(w, &h->absmax, 1));
        SQZ_TRY(w_u32(w, 0));
        SQZ_TRY(w_u64(w, (uint64_t)h->n_zero));
        SQZ_TRY(w_f64s(w, h->counts, h->n_bins));
    }
    return record_end(w);
}

sqz_status sqz_stats_writer_add(sqz_stats_writer *w, const sqz_calib_block *b) {
    SQZ_TRY(record_begin(w, TAG_BLK, 4 + 4 + 8 + 8 + 8));
    SQZ_TRY(w_u32(w, (uint32_t)b->layer));
    SQZ_TRY(w_u32(w, (uint32_t)b->n_inputs));
    SQZ_TRY(w_u64(w, (uint64_t)b->n_tokens));
    SQZ_TRY(w_f64(w, b->cos_mean));
    SQZ_TRY(w_f64(w, b->cos_min));
    SQZ_TRY(record_end(w));
    for (int i = 0; i < b->n_inputs; i++) SQZ_TRY(write_input(w, b->layer, &b->in[i]));
    return SQZ_OK;
}

sqz_status sqz_stats_writer_commit(sqz_stats_writer *w) {
    sqz_status st = record_begin(w, TAG_END, 8);
    if (st == SQZ_OK) st = w_u64(w, w->n_records);
    if (st == SQZ_OK) st = record_end(w);
    if (st != SQZ_OK) {
        sqz_stats_writer_abort(w);
        return st;
    }
    st = sqz_outfile_commit(w->f);
    free(w->path);
    free(w);
    return st;
}
