/*
 * quant/gguf/iq3.c - the 3-bit lattice quantizer IQ3_S: llama.cpp's quantize_row_iq3_s_impl
 * (ggml-quants.c) and its callers, transcribed operation for operation so that the bytes are
 * identical (tests/py/test_gguf_types.py compares them with libggml's):
 *
 *   quantize_row_iq3_s_ref  quantize_iq3_s of one row without weights (the dtype table's from_f32)
 *   quantize_iq3_s          rows of 256-element super-blocks, weights qw * sqrt(sigma2 + x^2) with
 *                           an importance matrix, x^2 without: what llama-quantize writes for
 *                           IQ3_S with or without --imatrix
 *
 * Each sub-block of 32 is quantized on its own: signs are taken off (one bit a weight), the 32
 * magnitudes become 8 groups of 4 odd levels 1..15 (codes 0..7), and a group must be one of the
 * 512 codewords of iq3s_grid (core/dequant_iq3.c). 19 candidate scales are tried; a group off the
 * grid takes the codeword among its nearest neighbours (3 distance shells, precomputed for every
 * one of the 4096 code combinations off the grid) with the least weighted error; the best scale
 * is refit by weighted least squares. The super-block keeps d = max scale / 31 (stored times
 * 1.033) and a 4-bit s per sub-block, scale ~ d (1 + 2 s).
 *
 * The map and neighbour tables are llama.cpp's iq3xs_init_impl(512), built once (pthread_once)
 * into static arrays and read-only afterwards.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/blocks.h"
#include "core/dequant.h"
#include "quant/gguf/kquant_internal.h"
#include "quant/gguf/quant_gguf.h"

#define QK_K SQZ_QK_K
#define GRID_SIZE 512
#define KMAP_SIZE 4096      /* 4 codes of 3 bits */
#define NWANT 3             /* distance shells of neighbours kept (iq3xs_init_impl: 3 for 512) */
#define NEIGHBOURS_LEN 28317 /* the list's length for this grid: per point off the grid, a count
                               and its neighbours (checked when built) */
#define BS 32               /* IQ3S_BLOCK_SIZE */
#define KMAXQ 8

/* kmap[u]: the grid index of code combination u (code k in bits 3k..3k+2), or -(o + 1) where
 * neighbours[o] is the count of u's neighbours and neighbours[o + 1 ...] their grid indices. */
static int kmap[KMAP_SIZE];
static uint16_t neighbours[NEIGHBOURS_LEN];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static int8_t grid_level(int i, int k) { return (int8_t)((sqz__iq3s_grid[i] >> 8 * k) & 0xff); }

/* iq3_compare_func: by squared distance, then by grid index (a total order: any sort agrees). */
static int cmp_dist(const void *left, const void *right) {
    const int *l = left, *r = right;
    return l[0] < r[0] ? -1 : l[0] > r[0] ? 1 : l[1] < r[1] ? -1 : l[1] > r[1] ? 1 : 0;
}

/* Appends the neighbours of off-grid combination u at neighbours[o]: the grid points of the
 * NWANT nearest distance shells, nearest first. Returns the new end. */
static int add_neighbours(int u, int o) {
    int dist2[2 * GRID_SIZE];
    int8_t pos[4];
    for (int k = 0; k < 4; ++k) pos[k] = (int8_t)(2 * ((u >> 3 * k) & 0x7) + 1);
    for (int j = 0; j < GRID_SIZE; ++j) {
        int d2 = 0;
        for (int k = 0; k < 4; ++k) d2 += (grid_level(j, k) - pos[k]) * (grid_level(j, k) - pos[k]);
        dist2[2 * j + 0] = d2;
        dist2[2 * j + 1] = j;
    }
    qsort(dist2, GRID_SIZE, 2 * sizeof(int), cmp_dist);
    kmap[u] = -(o + 1);
    const int start = o++;
    int d2 = dist2[0], n = 0, nhave = 1;
    for (int j = 0; j < GRID_SIZE; ++j) {
        if (dist2[2 * j] > d2) {
            if (nhave == NWANT) break;
            d2 = dist2[2 * j];
            ++nhave;
        }
        if (o >= NEIGHBOURS_LEN) abort(); /* cannot happen for this grid (see NEIGHBOURS_LEN) */
        neighbours[o++] = (uint16_t)dist2[2 * j + 1];
        ++n;
    }
    neighbours[start] = (uint16_t)n;
    return o;
}

/* iq3xs_init_impl(512): the map of the grid points, then the neighbour lists of the others in
 * order of u (llama.cpp's offsets are this running sum). */
static void tables_build(void) {
    for (int i = 0; i < KMAP_SIZE; ++i) kmap[i] = -1;
    for (int i = 0; i < GRID_SIZE; ++i) {
        int index = 0;
        for (int k = 0; k < 4; ++k) index |= ((grid_level(i, k) - 1) / 2) << 3 * k;
        kmap[index] = i;
    }
    int o = 0;
    for (int u = 0; u < KMAP_SIZE; ++u)
        if (kmap[u] < 0) o = add_neighbours(u, o);
    if (o != NEIGHBOURS_LEN) abort();
}

/* iq3_find_best_neighbour: the neighbour of the off-grid group with the least weighted squared
 * error at this scale; its codes into L[4]. Returns its grid index. */
static int best_neighbour(int u, const float *xval, const float *weight, float scale, int8_t *L) {
    const uint16_t *nb = neighbours - kmap[u] - 1;
    const int num = nb[0];
    float best_d2 = FLT_MAX;
    int grid_index = -1;
    for (int j = 1; j <= num; ++j) {
        float d2 = 0;
        for (int i = 0; i < 4; ++i) {
            const float q = grid_level(nb[j], i);
            const float diff = scale * q - xval[i];
            d2 += weight[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            grid_index = nb[j];
        }
    }
    for (int i = 0; i < 4; ++i) L[i] = (int8_t)((grid_level(grid_index, i) - 1) / 2);
    return grid_index;
}

/* The scratch of one sub-block of 32 (quantize_iq3_s's arrays). */
typedef struct iq3s_sub {
    float weight[BS], xval[BS], waux[BS];
    int8_t L[BS], Laux[BS];
    bool on_grid[BS / 4], on_grid_aux[BS / 4];
    uint8_t signs[BS / 8];
} iq3s_sub;

/* Weights, their square roots, the magnitudes and the sign bits of sub-block xb. */
static void sub_prepare(iq3s_sub *s, const float *xb, const float *qw, float sigma2) {
    if (qw)
        for (int i = 0; i < BS; ++i) s->weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    else
        for (int i = 0; i < BS; ++i) s->weight[i] = xb[i] * xb[i];
    for (int i = 0; i < BS; ++i) s->waux[i] = sqrtf(s->weight[i]);
    for (int k = 0; k < BS / 8; ++k) {
        uint8_t sg = 0;
        for (int i = 0; i < 8; ++i) {
            if (xb[8 * k + i] >= 0) s->xval[8 * k + i] = xb[8 * k + i];
            else {
                s->xval[8 * k + i] = -xb[8 * k + i];
                sg |= (uint8_t)(1 << i);
            }
        }
        s->signs[k] = sg;
    }
}

/* The code (0..7) of magnitude v at inverse scale id: level 2 l + 1 nearest id * v. */
static int level_code(float id, float v) {
    const int l = sqz__nearest_int(0.5f * (id * v - 1));
    return l < 0 ? 0 : l > KMAXQ - 1 ? KMAXQ - 1 : l;
}

/* sum w x q and sum w q^2 over the sub-block with q = 2 L + 1. */
static void sub_sums(const iq3s_sub *s, const int8_t *L, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0;
    for (int i = 0; i < BS; ++i) {
        const float w = s->weight[i];
        const float q = 2 * L[i] + 1;
        sx += w * s->xval[i] * q;
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* The search over 19 scales around max / 15: codes of the best into s->L (on_grid: which groups
 * were on the grid as rounded). Returns its scale (max / 15 when none fits). */
static float sub_search(iq3s_sub *s, float max) {
    float best = 0, scale = max / (2 * KMAXQ - 1);
    for (int k = 0; k < BS / 4; ++k) s->on_grid[k] = false;
    for (int is = -9; is <= 9; ++is) {
        const float id = (2 * KMAXQ - 1 + is * 0.2f) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < BS / 4; ++k) {
            int u = 0;
            for (int i = 0; i < 4; ++i) {
                s->Laux[4 * k + i] = (int8_t)level_code(id, s->xval[4 * k + i]);
                u |= s->Laux[4 * k + i] << 3 * i;
            }
            s->on_grid_aux[k] = kmap[u] >= 0;
            if (kmap[u] < 0) best_neighbour(u, s->xval + 4 * k, s->waux + 4 * k, this_scale, s->Laux + 4 * k);
        }
        float sumqx, sumq2;
        sub_sums(s, s->Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(s->L, s->Laux, BS);
            memcpy(s->on_grid, s->on_grid_aux, sizeof s->on_grid);
        }
    }
    return scale;
}

/* When a group of the best was off the grid: every group re-rounded at the chosen scale (off-grid
 * ones to their best neighbour) and the scale refit. Returns the scale. */
static float sub_refit(iq3s_sub *s, float scale) {
    int n_not_ongrid = 0;
    for (int k = 0; k < BS / 4; ++k)
        if (!s->on_grid[k]) ++n_not_ongrid;
    if (n_not_ongrid == 0 || !(scale > 0)) return scale;
    const float id = 1 / scale;
    for (int k = 0; k < BS / 4; ++k) {
        int u = 0;
        for (int i = 0; i < 4; ++i) u |= level_code(id, s->xval[4 * k + i]) << 3 * i;
        int grid_index = kmap[u];
        if (grid_index < 0) grid_index = best_neighbour(u, s->xval + 4 * k, s->waux + 4 * k, scale, s->L + 4 * k);
        for (int i = 0; i < 4; ++i) s->L[4 * k + i] = (int8_t)((grid_level(grid_index, i) - 1) / 2);
    }
    float sumqx, sumq2;
    sub_sums(s, s->L, &sumqx, &sumq2);
    return sumq2 > 0 ? sumqx / sumq2 : scale;
}

/* One super-block (the loop body of quantize_row_iq3_s_impl over ibl); qw: its 256 weights or
 * NULL. As llama.cpp's, an all-zero sub-block writes nothing and does not advance qs and signs
 * (qh is indexed by sub-block, so it does advance): the groups and signs of the sub-blocks after
 * it land one sub-block early and dequantize to other values. Reproduced, not corrected: it is
 * the file llama.cpp writes (a sub-block of 32 exact zeros followed by a non-zero one). */
static void iq3s_superblock(const float *xbl, sqz_block_iq3_s *y, const float *qw) {
    float scales[QK_K / BS];
    iq3s_sub s;
    memset(y, 0, sizeof *y);
    uint8_t *qs = y->qs, *signs = y->signs;
    float max_scale = 0, sumx2 = 0;
    for (int i = 0; i < QK_K; ++i) sumx2 += xbl[i] * xbl[i];
    const float sigma2 = 2 * sumx2 / QK_K;
    for (int ib = 0; ib < QK_K / BS; ++ib) {
        sub_prepare(&s, xbl + BS * ib, qw ? qw + BS * ib : NULL, sigma2);
        float max = s.xval[0];
        for (int i = 1; i < BS; ++i) max = max > s.xval[i] ? max : s.xval[i]; /* ggml's MAX, NaN included */
        memset(s.L, 0, BS);
        if (!max) {
            scales[ib] = 0;
            continue;
        }
        float scale = sub_refit(&s, sub_search(&s, max));
        if (scale < 0) { /* never expected; flipped so the scale is stored unsigned */
            scale = -scale;
            for (int k = 0; k < BS / 8; ++k) s.signs[k] = (uint8_t)~s.signs[k];
        }
        for (int k = 0; k < BS / 4; ++k) {
            int u = 0;
            for (int i = 0; i < 4; ++i) u |= s.L[4 * k + i] << 3 * i;
            const int grid_index = kmap[u];
            if (grid_index < 0) abort(); /* llama.cpp's "Oops: found point not on grid" */
            qs[k] = (uint8_t)(grid_index & 255);
            y->qh[(ib * BS / 4 + k) / 8] |= (uint8_t)((grid_index >> 8) << ((ib * BS / 4 + k) % 8));
        }
        qs += BS / 4;
        memcpy(signs, s.signs, BS / 8);
        signs += BS / 8;
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale) return;
    const float d = max_scale / 31;
    y->d = sqz_fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / BS; ib += 2) {
        int l1 = sqz__nearest_int(0.5f * (id * scales[ib + 0] - 1));
        l1 = l1 < 0 ? 0 : l1 > 15 ? 15 : l1;
        int l2 = sqz__nearest_int(0.5f * (id * scales[ib + 1] - 1));
        l2 = l2 < 0 ? 0 : l2 > 15 ? 15 : l2;
        y->scales[ib / 2] = (uint8_t)(l1 | (l2 << 4));
    }
}

void sqz__quantize_iq3_s(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *quant_weights) {
    pthread_once(&tables_once, tables_build);
    for (int64_t r = 0; r < nrow; ++r) {
        const float *x = src + r * n_per_row;
        sqz_block_iq3_s *y = (sqz_block_iq3_s *)dst + r * (n_per_row / QK_K);
        for (int64_t i = 0; i < n_per_row / QK_K; ++i)
            iq3s_superblock(x + QK_K * i, &y[i], quant_weights ? quant_weights + QK_K * i : NULL);
    }
}

void sqz__quantize_iq3_s_ref(const float *x, void *y, int64_t n) { sqz__quantize_iq3_s(x, y, 1, n, NULL); }

/* ---- GPTQ onto the codebook (quant/gptq.c) ------------------------------------------------- */

void sqz__iq3s_subscales(const void *block, float *db) {
    const sqz_block_iq3_s *x = block;
    const float d = sqz_fp16_to_fp32(x->d);
    for (int ib = 0; ib < QK_K / BS; ib++) db[ib] = d * (1 + 2 * ((x->scales[ib / 2] >> 4 * (ib % 2)) & 0xf));
}

void sqz__iq3s_group(const float *v, const float *w, float db, int8_t *code, float *q) {
    pthread_once(&tables_once, tables_build);
    if (!(db > 0)) {
        for (int i = 0; i < 4; i++) { code[i] = 1; q[i] = 0.0f; }
        return;
    }
    const float id = 1 / db, ones[4] = {1, 1, 1, 1};
    float mag[4];
    int u = 0;
    for (int i = 0; i < 4; i++) {
        mag[i] = fabsf(v[i]);
        u |= level_code(id, mag[i]) << 3 * i;
    }
    int8_t L[4];
    int gi = kmap[u];
    if (gi < 0) gi = best_neighbour(u, mag, w ? w : ones, db, L);
    for (int i = 0; i < 4; i++) {
        const int level = grid_level(gi, i);
        const float val = db * (float)level; /* as the dequantizer: db * grid value, then the sign */
        const bool neg = v[i] < 0;
        code[i] = (int8_t)(neg ? -level : level);
        q[i] = neg ? -val : val;
    }
}

void sqz__iq3s_repack(const int8_t *code, void *block) {
    pthread_once(&tables_once, tables_build);
    sqz_block_iq3_s *y = block;
    memset(y->qs, 0, sizeof y->qs);
    memset(y->qh, 0, sizeof y->qh);
    memset(y->signs, 0, sizeof y->signs);
    for (int g = 0; g < QK_K / 4; g++) { /* group g: sub-block g / 8, place g % 8 */
        int u = 0;
        for (int i = 0; i < 4; i++) {
            const int c = code[4 * g + i], level = c < 0 ? -c : c;
            u |= ((level - 1) / 2) << 3 * i;
            if (c < 0) y->signs[(4 * g + i) / 8] |= (uint8_t)(1 << ((4 * g + i) % 8));
        }
        const int gi = kmap[u] >= 0 ? kmap[u] : 0; /* always on the grid: sqz__iq3s_group chose it */
        y->qs[g] = (uint8_t)(gi & 255);
        y->qh[g / 8] |= (uint8_t)((gi >> 8) << (g % 8));
    }
}

/* ---- sqz's refinement (sqz__iq3s_refine) ------------------------------------------------------ */

/* The weighted squared error of sub-block x (BS values, weights w) at scale db, its signed levels
 * into code (the codeword of each group at that scale: sqz__iq3s_group). */
static double sub_err(const float *x, const float *w, float db, int8_t *code) {
    double e = 0;
    float q[4];
    for (int g = 0; g < BS / 4; g++) {
        sqz__iq3s_group(x + 4 * g, w + 4 * g, db, code + 4 * g, q);
        for (int i = 0; i < 4; i++) e += (double)w[4 * g + i] * (double)(x[4 * g + i] - q[i]) * (x[4 * g + i] - q[i]);
    }
    return e;
}

void sqz__iq3s_refine(const float *x, const float *qw, void *block) {
    pthread_once(&tables_once, tables_build);
    sqz_block_iq3_s *y = block;
    const float d0 = sqz_fp16_to_fp32(y->d);
    if (!(d0 > 0)) return;
    float sumx2 = 0, w[QK_K];
    for (int i = 0; i < QK_K; ++i) sumx2 += x[i] * x[i];
    const float sigma2 = 2 * sumx2 / QK_K;
    for (int i = 0; i < QK_K; ++i) w[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
    /* the super-block scale near the stored one, then each sub-block's 4-bit scale and codewords
     * chosen together at the scale the dequantizer will use */
    int8_t code[QK_K], best_code[QK_K], c[BS];
    uint8_t best_sc[QK_K / BS / 2] = {0};
    uint16_t best_d = y->d;
    double best = -1;
    for (int k = -2; k <= 2; k++) {
        const uint16_t dh = sqz_fp32_to_fp16(d0 * (1 + 0.025f * (float)k));
        const float d = sqz_fp16_to_fp32(dh);
        if (!(d > 0)) continue;
        uint8_t sc[QK_K / BS / 2] = {0};
        double tot = 0;
        for (int ib = 0; ib < QK_K / BS; ib++) {
            double be = -1;
            for (int l = 0; l < 16; l++) {
                const double e = sub_err(x + BS * ib, w + BS * ib, d * (float)(1 + 2 * l), c);
                if (be < 0 || e < be) {
                    be = e;
                    memcpy(code + BS * ib, c, BS);
                    sc[ib / 2] = (uint8_t)((sc[ib / 2] & (0xf0 >> 4 * (ib % 2))) | (l << 4 * (ib % 2)));
                }
            }
            tot += be;
        }
        if (best < 0 || tot < best) {
            best = tot;
            best_d = dh;
            memcpy(best_sc, sc, sizeof sc);
            memcpy(best_code, code, sizeof code);
        }
    }
    float deq[QK_K];
    sqz__dequantize_iq3_s(y, deq, QK_K);
    double orig = 0;
    for (int i = 0; i < QK_K; i++) orig += (double)w[i] * (double)(x[i] - deq[i]) * (x[i] - deq[i]);
    if (!(best >= 0) || orig <= best) return; /* llama.cpp's block was no worse: kept */
    y->d = best_d;
    memcpy(y->scales, best_sc, sizeof best_sc);
    sqz__iq3s_repack(best_code, y);
}
