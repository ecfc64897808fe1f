/*
 * compress/pass_quant_rotate.c - `--quant auto:bpw=X:try-rotate`: auto's plan made twice, for the
 * model as it stands and for the model rotated as `--rotate all` rotates it (QuaRot's R1 and R2
 * folded into the weights: the same function), each plan measured end to end by auto's
 * calibration trial (mean KLD on calibration windows against the model's own logits), and the
 * better kept.
 *
 * A rotation costs bytes as well as removing outliers: every tensor it touches becomes F32 (the
 * plan then quantizes the matrices), and a tied classifier becomes a tensor of its own (the
 * final norm is folded into it, not into the embedding), which the budget must pay for. The
 * trial weighs both at the same size. Whichever loses is undone exactly: the model's tensors are
 * saved (their structs; the data they point to is kept alive by marking it not owned while the
 * rotated copy exists) and put back, the tensor the untying added removed.
 *
 * Memory: the rotated model's touched tensors in f32 beside the originals (as `--rotate`).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"

/* The model's tensors and hyperparameters as they were, to put back or to let go. */
typedef struct snap {
    sqz_tensor *t;
    int64_t n;
    sqz_hparams hp;
} snap;

/* Saves m's tensor structs; marks every tensor's data not owned, so that a replacement keeps it. */
static sqz_status snap_take(sqz_model *m, snap *s) {
    s->n = m->n_tensors;
    s->hp = m->hp;
    s->t = sqz__malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *s->t);
    if (!s->t) return SQZ_ERR_NOMEM;
    memcpy(s->t, m->tensors, (size_t)s->n * sizeof *s->t);
    for (int64_t i = 0; i < s->n; i++) m->tensors[i].owned = false;
    return SQZ_OK;
}

/* Puts m back as it was: the replacements' data freed, the added tensors removed. */
static void snap_restore(sqz_model *m, snap *s) {
    for (int64_t i = s->n; i < m->n_tensors; i++) {
        if (m->tensors[i].owned) free(m->tensors[i].data);
        free((void *)m->tensors[i].name);
    }
    for (int64_t i = 0; i < s->n; i++) {
        if (m->tensors[i].owned && m->tensors[i].data != s->t[i].data) free(m->tensors[i].data);
        m->tensors[i] = s->t[i];
    }
    m->n_tensors = s->n;
    m->hp = s->hp;
    free(s->t);
    s->t = NULL;
}

/* Keeps m as it is now: the data of the tensors that were replaced is freed if it was owned, the
 * others own their data again as before. */
static void snap_commit(sqz_model *m, snap *s) {
    for (int64_t i = 0; i < s->n; i++) {
        if (m->tensors[i].data == s->t[i].data) m->tensors[i].owned = s->t[i].owned;
        else if (s->t[i].owned) free(s->t[i].data);
    }
    free(s->t);
    s->t = NULL;
}

sqz_status sqz__quant_auto_try_rotate(sqz_pass_ctx *pc, sqz_compress_spec *sp, sqz_qplan **plan, bool *rotated) {
    *plan = NULL;
    *rotated = false;
    sqz_compress_spec s0 = *sp;
    double k0 = NAN, k1 = NAN;
    s0.plan = NULL;
    SQZ_TRY(sqz__quant_auto_plan(pc, &s0, &k0));
    char note0[sizeof pc->stage->note];
    memcpy(note0, pc->stage->note, sizeof note0);
    char *b = pc->stage->note;
    const size_t cap = sizeof pc->stage->note;
    if (sqz__rotate_check_all(pc->m) != SQZ_OK) { /* this family cannot be rotated: the plan as it stands */
        char why[160];
        snprintf(why, sizeof why, "%s", sqz_last_error());
        sqz_clear_error();
        snprintf(b, cap, "rotation not tried (%.80s); %.400s", why, note0); /* the note holds 512 */
        *plan = s0.plan;
        return SQZ_OK;
    }
    snap s;
    sqz_status st = snap_take(pc->m, &s);
    if (st != SQZ_OK) {
        sqz__qplan_free(s0.plan);
        return st;
    }
    sqz_compress_spec s1 = *sp;
    s1.plan = NULL;
    if (!(s1.auto_params > 0)) s1.auto_params = (double)sqz_model_param_count(pc->m); /* the same bytes */
    const double t0 = sqz_now_seconds();
    st = sqz__rotate_all(pc->m);
    const double t_rot = sqz_now_seconds() - t0;
    if (st == SQZ_OK) st = sqz__quant_auto_plan(pc, &s1, &k1);
    if (st != SQZ_OK) {
        snap_restore(pc->m, &s);
        sqz__qplan_free(s0.plan);
        return st;
    }
    char note1[sizeof pc->stage->note];
    memcpy(note1, pc->stage->note, sizeof note1);
    /* the rotated model only when its trial measured lower (no trial: as it stands) */
    *rotated = !isnan(k1) && (isnan(k0) || k1 < k0);
    if (*rotated) {
        snap_commit(pc->m, &s);
        sqz__qplan_free(s0.plan);
        *plan = s1.plan;
    } else {
        snap_restore(pc->m, &s);
        sqz__qplan_free(s1.plan);
        *plan = s0.plan;
    }
    snprintf(b, cap, "rotation trial: as it stands KLD %.5f, rotated (--rotate all, %.1f s) KLD %.5f: kept %s; %.400s",
             k0, t_rot, k1, *rotated ? "rotated" : "as it stands", *rotated ? note1 : note0);
    return SQZ_OK;
}
