/*
 * compress/compress_internal.h - what the files of compress/ share (not public).
 */
#ifndef SQZ_COMPRESS_INTERNAL_H
#define SQZ_COMPRESS_INTERNAL_H

#include "calib/calib_internal.h"
#include "sqz/compress.h"

/* The groups of linear layers of one block that read the same input, in compression order
 * (compress.c). roles[0..n) are the members; `fold` says where a smoothing vector goes. */
typedef enum sqz__fold {
    SQZ__FOLD_NORM = 0,   /* into the norm before the group (attn_norm / ffn_norm) */
    SQZ__FOLD_LINEAR = 1, /* into the rows of the previous linear layer (v before o, up before down) */
    SQZ__FOLD_NONE = 2,   /* nowhere: keep as in_scale, or do not smooth */
} sqz__fold;

typedef struct sqz__lgroup {
    sqz_role roles[3];
    int n;
    sqz__fold fold;
    sqz_role fold_role;   /* the norm or the previous linear layer */
} sqz__lgroup;

/* The groups of block `layer` of m (llama: o, down, q|k|v, gate|up; BERT: o, down, q|k|v, up).
 * Returns their count (<= 4). */
int sqz__block_groups(const sqz_model *m, int32_t layer, sqz__lgroup *g);

/* Replaces tensor t's data with an owned f32 copy of values (n elements), dtype F32. */
sqz_status sqz__tensor_set_f32(sqz_model *m, sqz_tensor *t, const float *values);

#endif
