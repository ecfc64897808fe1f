/* tests/unit/test_core.c - status table, dtype table and reference quantizers,
 * fp16/bf16, tensor conversion, atomic outputs, rotary row permutation. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/blocks.h"
#include "core/internal.h"
#include "formats/formats_internal.h"
#include "test_util.h"

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(sqz_status_name(SQZ_OK), "SQZ_OK");
    assert_string_equal(sqz_status_name(SQZ_ERR_FORMAT), "SQZ_ERR_FORMAT");
    assert_string_equal(sqz_status_name((sqz_status)999), "SQZ_UNKNOWN_STATUS");
    assert_string_equal(sqz_status_message(SQZ_ERR_NOMEM), "out of memory");
    sqz_status s = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%s': bad", "f.gguf", "x");
    assert_int_equal(s, SQZ_ERR_FORMAT);
    assert_string_equal(sqz_last_error(), "f.gguf: tensor 'x': bad");
    assert_non_null(strstr(sqz_last_error_location(), "test_core.c:"));
    sqz__error_prefix("outer");
    assert_string_equal(sqz_last_error(), "outer: f.gguf: tensor 'x': bad");
    sqz_clear_error();
    assert_string_equal(sqz_last_error(), "");
}

static void test_dtype_table(void **state) {
    (void)state;
    for (int i = 0; i < SQZ_DTYPE_COUNT; i++) {
        const sqz_dtype_traits *t = sqz_dtype_info((sqz_dtype)i);
        assert_non_null(t);
        assert_non_null(t->name);
        assert_non_null(t->to_f32);
        assert_true(t->block_size >= 1 && t->type_size >= 1);
        sqz_dtype back;
        assert_true(sqz_dtype_from_name(t->name, &back));
        assert_int_equal(back, i);
        if (t->gguf_type >= 0) {
            assert_true(sqz_dtype_from_gguf(t->gguf_type, &back));
            assert_int_equal(back, i);
        }
    }
    assert_null(sqz_dtype_info(SQZ_DTYPE_COUNT));
    /* llama.cpp block sizes */
    assert_int_equal(sqz_dtype_info(SQZ_DTYPE_Q8_0)->type_size, 34);
    assert_int_equal(sqz_dtype_info(SQZ_DTYPE_Q4_0)->type_size, 18);
    assert_int_equal(sqz_dtype_info(SQZ_DTYPE_Q4_1)->type_size, 20);
    assert_int_equal(sqz_dtype_info(SQZ_DTYPE_Q4_K)->type_size, 144);
    assert_int_equal(sqz_dtype_info(SQZ_DTYPE_Q6_K)->type_size, 210);
    size_t nb;
    assert_true(sqz_dtype_nbytes(SQZ_DTYPE_Q4_0, 64, &nb));
    assert_int_equal(nb, 36);
    assert_false(sqz_dtype_nbytes(SQZ_DTYPE_Q4_0, 33, &nb));
    assert_false(sqz_dtype_nbytes(SQZ_DTYPE_F32, INT64_MAX, &nb));
    assert_false(sqz_dtype_nbytes(SQZ_DTYPE_F32, -4, &nb));
}

static void test_fp16_bf16(void **state) {
    (void)state;
    /* exact values, rounding to nearest even, specials */
    assert_int_equal(sqz_fp32_to_fp16(1.0f), 0x3C00);
    assert_int_equal(sqz_fp32_to_fp16(-2.0f), 0xC000);
    assert_int_equal(sqz_fp32_to_fp16(65504.0f), 0x7BFF);
    assert_int_equal(sqz_fp32_to_fp16(1e6f), 0x7C00);
    assert_int_equal(sqz_fp32_to_fp16(5.960464477539063e-08f), 0x0001);
    assert_int_equal(sqz_fp32_to_fp16(1.0f + 1.0f / 2048), 0x3C00); /* tie -> even */
    assert_int_equal(sqz_fp32_to_fp16(1.0f + 3.0f / 2048), 0x3C02);
    assert_true(isnan(sqz_fp16_to_fp32(sqz_fp32_to_fp16(NAN))));
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sqz_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(sqz_fp32_to_fp16(f), h); /* every half round-trips */
    }
    assert_int_equal(sqz_fp32_to_bf16(1.0f), 0x3F80);
    assert_true(sqz_bf16_to_fp32(sqz_fp32_to_bf16(3.140625f)) == 3.140625f);
    assert_int_equal(sqz_fp32_to_bf16(1.00390625f), 0x3F80); /* tie -> even */
}

/* Reference quantizers: error bounds, known bytes, determinism. */
static void fill_wave(float *x, int n, float scale) {
    for (int i = 0; i < n; i++) x[i] = scale * sinf(0.37f * (float)i) * (1.0f + 0.01f * (float)(i % 7));
}

static void test_quant_roundtrip(void **state) {
    (void)state;
    enum { N = 1024 };
    float x[N], y[N];
    fill_wave(x, N, 0.8f);
    const sqz_dtype types[] = {SQZ_DTYPE_Q8_0, SQZ_DTYPE_Q4_0, SQZ_DTYPE_Q4_1, SQZ_DTYPE_F16, SQZ_DTYPE_BF16};
    /* Worst case per format for |x| <= amax: half a step, except Q4_0 whose grid [-8, 7]
     * clips the largest value of the opposite sign by a whole step (llama.cpp's choice). */
    const float amax = 0.8f * 1.06f;
    const float tol[] = {amax / 127 * 0.51f + 1e-3f, amax / 8 * 1.01f + 1e-3f, 2 * amax / 15 * 0.51f + 1e-3f,
                         amax / 2048 + 1e-6f, amax / 256 + 1e-6f};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        const sqz_dtype_traits *tr = sqz_dtype_info(types[t]);
        size_t nb;
        assert_true(sqz_dtype_nbytes(types[t], N, &nb));
        uint8_t *q1 = malloc(nb), *q2 = malloc(nb);
        tr->from_f32(x, q1, N);
        tr->from_f32(x, q2, N);
        assert_memory_equal(q1, q2, nb); /* deterministic */
        tr->to_f32(q1, y, N);
        float maxerr = 0;
        for (int i = 0; i < N; i++) maxerr = fmaxf(maxerr, fabsf(x[i] - y[i]));
        if (maxerr > tol[t]) fail_msg("%s: max error %g > %g", tr->name, maxerr, tol[t]);
        free(q1);
        free(q2);
    }
    /* A known Q4_0 block: max-magnitude element maps to -8 exactly. */
    float b[32] = {0};
    b[0] = -4.0f;
    b[5] = 2.0f;
    sqz_block_q4_0 blk;
    sqz_dtype_info(SQZ_DTYPE_Q4_0)->from_f32(b, &blk, 32);
    assert_int_equal(blk.d, sqz_fp32_to_fp16(0.5f));
    assert_int_equal(blk.qs[0] & 0xF, 0);      /* -4 / 0.5 + 8 = 0 */
    assert_int_equal(blk.qs[5] & 0xF, 12);     /* 2 / 0.5 + 8 = 12 */
    assert_int_equal(blk.qs[1] & 0xF, 8);      /* zero */
    /* All-zero block: zero scale, no division by zero. */
    float z[32] = {0};
    sqz_block_q8_0 q8;
    sqz_dtype_info(SQZ_DTYPE_Q8_0)->from_f32(z, &q8, 32);
    assert_int_equal(q8.d, 0);
}

/* sqz_tensor_check_finite on block types reads the fp16 scales only: it must say exactly what a
 * scan of the dequantized values says (OK, or the first non-finite weight's row and column), for
 * an infinity or NaN written at every even byte offset of one block of every block type. */
static void test_check_finite_blocks(void **state) {
    (void)state;
    enum { ROWS = 3, COLS = 512 };
    static float x[ROWS * COLS], y[ROWS * COLS];
    fill_wave(x, ROWS * COLS, 0.8f);
    for (int d = 0; d < SQZ_DTYPE_COUNT; d++) {
        const sqz_dtype_traits *tr = sqz_dtype_info((sqz_dtype)d);
        if (!tr || !tr->is_quantized || !tr->to_f32 || COLS % tr->block_size) continue;
        size_t nb;
        assert_true(sqz_dtype_nbytes((sqz_dtype)d, ROWS * COLS, &nb));
        uint8_t *q = calloc(1, nb);
        if (tr->from_f32) tr->from_f32(x, q, ROWS * COLS);
        else
            for (size_t i = 0; i < nb; i++) q[i] = (uint8_t)(i * 37u); /* codes and finite scales */
        sqz_tensor t = {.name = "w", .dtype = (sqz_dtype)d, .ndim = 2, .shape = {ROWS, COLS}, .data = q,
                        .nbytes = nb};
        const size_t blk = (size_t)(ROWS * COLS / tr->block_size / 2) * tr->type_size; /* a middle block */
        for (size_t o = 0; o + 1 < tr->type_size; o += 2) {
            for (int v = 0; v < 2; v++) {
                uint8_t saved[2] = {q[blk + o], q[blk + o + 1]};
                q[blk + o] = v ? 0x01 : 0x00; /* 0x7C00 (+inf) or 0x7C01 (nan) as fp16 */
                q[blk + o + 1] = 0x7C;
                tr->to_f32(q, y, ROWS * COLS);
                int64_t at = -1;
                for (int64_t i = 0; i < ROWS * COLS && at < 0; i++)
                    if (!isfinite(y[i])) at = i;
                const sqz_status st = sqz_tensor_check_finite(&t);
                if (at < 0) {
                    if (st != SQZ_OK)
                        fail_msg("%s, offset %zu: %s, but every weight is finite", tr->name, o, sqz_last_error());
                } else {
                    char want[64];
                    snprintf(want, sizeof want, "row %lld, column %lld", (long long)(at / COLS),
                             (long long)(at % COLS));
                    if (st == SQZ_OK || !strstr(sqz_last_error(), want))
                        fail_msg("%s, offset %zu: want \"%s\", got %s", tr->name, o, want,
                                 st ? sqz_last_error() : "ok");
                }
                q[blk + o] = saved[0];
                q[blk + o + 1] = saved[1];
            }
        }
        assert_int_equal(sqz_tensor_check_finite(&t), SQZ_OK);
        free(q);
    }
}

static void test_convert(void **state) {
    (void)state;
    float x[64], y[64];
    fill_wave(x, 64, 2.0f);
    uint16_t h[64];
    uint8_t q[2 * 34];
    SQZ_ASSERT_OK(sqz_convert(SQZ_DTYPE_F32, x, SQZ_DTYPE_F16, h, 64, NULL));
    SQZ_ASSERT_OK(sqz_convert(SQZ_DTYPE_F16, h, SQZ_DTYPE_Q8_0, q, 64, NULL));
    SQZ_ASSERT_OK(sqz_convert(SQZ_DTYPE_Q8_0, q, SQZ_DTYPE_F32, y, 64, NULL));
    for (int i = 0; i < 64; i++) assert_true(fabsf(x[i] - y[i]) < 0.02f);
    assert_int_equal(sqz_convert(SQZ_DTYPE_F32, x, SQZ_DTYPE_Q4_0, q, 33, NULL), SQZ_ERR_SHAPE);
    assert_int_equal(sqz_convert(SQZ_DTYPE_F32, x, SQZ_DTYPE_Q8_K, q, 256, NULL), SQZ_ERR_UNSUPPORTED);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_outfile_atomic(void **state) {
    (void)state;
    const char *dir = sqz_test_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    sqz_outfile *f;
    SQZ_ASSERT_OK(sqz_outfile_open(path, &f));
    SQZ_ASSERT_OK(sqz_outfile_write(f, "abc", 3));
    SQZ_ASSERT_OK(sqz_outfile_pad(f, 8));
    assert_int_equal(sqz_outfile_tell(f), 8);
    assert_false(sqz_test_exists(path)); /* invisible until commit */
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    assert_true(sqz_test_exists(path));
    assert_int_equal(count_entries(dir), 1);
    /* abort leaves nothing and keeps the old file */
    SQZ_ASSERT_OK(sqz_outfile_open(path, &f));
    SQZ_ASSERT_OK(sqz_outfile_write(f, "xyz", 3));
    sqz_outfile_abort(f);
    assert_int_equal(count_entries(dir), 1);
    char *txt;
    size_t n;
    SQZ_ASSERT_OK(sqz_read_file(path, 100, &txt, &n));
    assert_int_equal(n, 8);
    assert_memory_equal(txt, "abc\0\0\0\0\0", 8);
    free(txt);
    unlink(path);
    /* directories */
    snprintf(path, sizeof path, "%s/hf", dir);
    sqz_outdir *d;
    SQZ_ASSERT_OK(sqz_outdir_open(path, &d));
    SQZ_ASSERT_OK(sqz_outdir_file(d, "a.json", &f));
    SQZ_ASSERT_OK(sqz_outfile_write(f, "{}", 2));
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    assert_false(sqz_test_exists(path));
    sqz_outdir_abort(d);
    assert_int_equal(count_entries(dir), 0); /* nothing left behind */
    SQZ_ASSERT_OK(sqz_outdir_open(path, &d));
    SQZ_ASSERT_OK(sqz_outdir_file(d, "a.json", &f));
    SQZ_ASSERT_OK(sqz_outfile_write(f, "{}", 2));
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    SQZ_ASSERT_OK(sqz_outdir_commit(d));
    snprintf(path, sizeof path, "%s/hf/a.json", dir);
    assert_true(sqz_test_exists(path));
    unlink(path);
    snprintf(path, sizeof path, "%s/hf/" SQZ_OUTDIR_MARKER, dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/hf", dir);
    rmdir(path);
    rmdir(dir);
    /* errors name the file */
    assert_int_equal(sqz_outfile_open("/nonexistent-dir/x.bin", &f), SQZ_ERR_IO);
    assert_non_null(strstr(sqz_last_error(), "/nonexistent-dir/x.bin"));
    sqz_mapping *mp;
    assert_int_equal(sqz_map("/nonexistent-file", &mp), SQZ_ERR_IO);
    assert_non_null(strstr(sqz_last_error(), "/nonexistent-file"));
}

/* Writes name/file with text (a helper of test_outdir_replace). */
static void put(const char *dir, const char *name, const char *text) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* An existing directory is replaced as a whole (never merged), and only when sqz wrote it;
 * deferred commits appear together or not at all; a dead process's temporaries are swept. */
static void test_outdir_replace(void **state) {
    (void)state;
    const char *dir = sqz_test_tmpdir();
    char hf[4200], p[4300];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    mkdir(hf, 0755);
    put(hf, "notes.txt", "mine");
    sqz_outdir *d;
    sqz_outfile *f;
    assert_int_equal(sqz_outdir_open(hf, &d), SQZ_ERR_IO); /* not sqz's */
    assert_non_null(strstr(sqz_last_error(), "did not write"));
    SQZ_ASSERT_OK(sqz_outdir_open_ex(hf, SQZ_OUTPUT_REPLACE, &d));
    SQZ_ASSERT_OK(sqz_outdir_file(d, "a.json", &f));
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    SQZ_ASSERT_OK(sqz_outdir_commit(d));
    snprintf(p, sizeof p, "%s/notes.txt", hf);
    assert_false(sqz_test_exists(p)); /* replaced, not merged */
    SQZ_ASSERT_OK(sqz_outdir_open(hf, &d)); /* sqz's own now */
    sqz_outdir_abort(d);
    /* deferred: nothing appears before the end; false removes everything */
    char a[4300], b[4300];
    snprintf(a, sizeof a, "%s/a.bin", dir);
    snprintf(b, sizeof b, "%s/b.bin", dir);
    sqz_io_defer_begin();
    SQZ_ASSERT_OK(sqz_outfile_open(a, &f));
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    assert_false(sqz_test_exists(a));
    SQZ_ASSERT_OK(sqz_io_defer_end(false));
    assert_false(sqz_test_exists(a));
    sqz_io_defer_begin();
    SQZ_ASSERT_OK(sqz_outfile_open(a, &f));
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    SQZ_ASSERT_OK(sqz_outfile_open(b, &f));
    SQZ_ASSERT_OK(sqz_outfile_commit(f));
    SQZ_ASSERT_OK(sqz_io_defer_end(true));
    assert_true(sqz_test_exists(a) && sqz_test_exists(b));
    /* a FIFO is never an output */
    snprintf(p, sizeof p, "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(sqz_outfile_open(p, &f), SQZ_ERR_IO);
    assert_non_null(strstr(sqz_last_error(), "FIFO"));
    /* ... nor an input (refused at once, not waited on) */
    char *txt;
    assert_int_equal(sqz_read_file(p, 100, &txt, NULL), SQZ_ERR_IO);
    assert_non_null(strstr(sqz_last_error(), "not a regular file"));
    unlink(p);
    /* the temporaries of a process that no longer exists go at the next open beside them */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char stale[4300], live[4300];
    snprintf(stale, sizeof stale, "%s/x.bin.sqztmp.%ld.AbCdEf", dir, (long)child);
    snprintf(live, sizeof live, "%s/y.bin.sqztmp.%ld.AbCdEf", dir, (long)getpid());
    put(dir, sqz__basename(stale), "half");
    put(dir, sqz__basename(live), "ours");
    SQZ_ASSERT_OK(sqz_outfile_open(a, &f));
    sqz_outfile_abort(f);
    assert_false(sqz_test_exists(stale));
    assert_true(sqz_test_exists(live));
    unlink(live);
    unlink(a);
    unlink(b);
    snprintf(p, sizeof p, "%s/a.json", hf);
    unlink(p);
    snprintf(p, sizeof p, "%s/" SQZ_OUTDIR_MARKER, hf);
    unlink(p);
    rmdir(hf);
    assert_int_equal(rmdir(dir), 0); /* nothing else left */
}

static void test_rope_permute(void **state) {
    (void)state;
    enum { H = 2, HD = 8, ROWS = H * HD };
    uint8_t src[ROWS], mid[ROWS], back[ROWS];
    for (int i = 0; i < ROWS; i++) src[i] = (uint8_t)i;
    sqz__rope_permute_rows(src, mid, H, HD, 1, SQZ_ROPE_HALF, SQZ_ROPE_INTERLEAVED);
    /* convert_hf_to_gguf.py permute: interleaved[2j + i] = half[i*hd/2 + j] */
    const uint8_t want[HD] = {0, 4, 1, 5, 2, 6, 3, 7};
    assert_memory_equal(mid, want, HD);
    assert_int_equal(mid[HD], HD);
    sqz__rope_permute_rows(mid, back, H, HD, 1, SQZ_ROPE_INTERLEAVED, SQZ_ROPE_HALF);
    assert_memory_equal(back, src, ROWS);
}

static void test_utf8(void **state) {
    (void)state;
    assert_true(sqz__utf8_valid("h\xc3\xa9llo \xe2\x96\x81", 10));
    assert_false(sqz__utf8_valid("\xc0\xaf", 2));        /* overlong */
    assert_false(sqz__utf8_valid("\xed\xa0\x80", 3));    /* surrogate */
    assert_false(sqz__utf8_valid("\xe2\x96", 2));        /* truncated */
    assert_false(sqz__utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names), cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_fp16_bf16),    cmocka_unit_test(test_quant_roundtrip),
        cmocka_unit_test(test_convert),      cmocka_unit_test(test_outfile_atomic),
        cmocka_unit_test(test_check_finite_blocks),
        cmocka_unit_test(test_outdir_replace),
        cmocka_unit_test(test_rope_permute), cmocka_unit_test(test_utf8),
    };
    return sqz_test_run(tests, NULL, NULL);
}
