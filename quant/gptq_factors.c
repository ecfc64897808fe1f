/*
 * quant/gptq_factors.c - sqz_gptq_factors: GPTQ's prepared factor kept between calls on the same
 * statistics (sqz_quant_opts.factors). A mix quantizes q, k and v (and gate and up) one layer at a
 * time, each to its own type, but they read one input: its damped, permuted Hessian is factored
 * once and its U, column order and GPTAQ's P (with their device copies) serve every member. The
 * factor depends on the statistics, the damping, the act order (and IQ3_S's grouping of 4 columns
 * under it), GPTAQ and the backend, never on the target's grid, so the bytes are those of a fresh
 * factor.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_impl.h"
#include "quant/gptq_internal.h"

struct sqz_gptq_factors {
    bool full;
    sqz__gptq_key key;
    sqz_backend *be;
    const float *u, *pm;
    void *du, *dp;
    const int64_t *perm;
    const uint8_t *dead;
};

sqz_gptq_factors *sqz_gptq_factors_new(void) { return sqz__calloc(1, sizeof(sqz_gptq_factors)); }

static void drop(sqz_gptq_factors *f) {
    if (!f->full) return;
    if (f->be && f->be->ops->free) {
        if (f->du) f->be->ops->free(f->be->ctx, f->du);
        if (f->dp) f->be->ops->free(f->be->ctx, f->dp);
    }
    free((void *)f->u);
    free((void *)f->pm);
    free((void *)f->perm);
    free((void *)f->dead);
    memset(f, 0, sizeof *f);
}

void sqz_gptq_factors_free(sqz_gptq_factors *f) {
    if (!f) return;
    drop(f);
    free(f);
}

sqz__gptq_key sqz__gptq_key_of(const sqz_qstats *st, const sqz_quant_opts *o) {
    sqz__gptq_key k;
    memset(&k, 0, sizeof k); /* padding too: keys are compared with memcmp */
    k.st = st;
    k.xtx = st->xtx;
    k.dxxt = o->gptaq ? st->dxxt : NULL;
    k.n = st->n_in;
    k.percdamp = o->percdamp;
    k.shrink = o->gptq_shrink;
    k.gptaq_alpha = o->gptaq ? o->gptaq_alpha : 0;
    k.act_order = o->act_order;
    k.iq3_groups = o->act_order && o->target.fmt == SQZ_QFMT_IQ3_S;
    k.gptaq = o->gptaq;
    k.be = o->backend;
    return k;
}

bool sqz__gptq_factors_take(const sqz_gptq_factors *f, const sqz__gptq_key *k, gptq_ctx *c) {
    if (!f || !f->full || memcmp(&f->key, k, sizeof *k) != 0) return false;
    c->u = f->u;
    c->du = f->du;
    c->perm = f->perm;
    c->dead = f->dead;
    c->pm = f->pm;
    c->dp = f->dp;
    c->borrowed = true;
    return true;
}

void sqz__gptq_factors_keep(sqz_gptq_factors *f, const sqz__gptq_key *k, gptq_ctx *c) {
    if (!f) return;
    drop(f);
    *f = (sqz_gptq_factors){.full = true, .key = *k, .be = c->be, .u = c->u, .pm = c->pm, .du = c->du,
                            .dp = c->dp, .perm = c->perm, .dead = c->dead};
    c->borrowed = true;
}
