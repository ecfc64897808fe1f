/*
 * compress/quant_auto.c - the plan of `--quant auto:bpw=X`: one calibration pass over the
 * model as it is (E[x^2] of every linear input, no recompute), the sensitivity of every
 * block matrix to every candidate type (quant/auto.c), and the allocation to the size budget.
 * The token embedding and the output take Q4_K_M's types (Q6_K / Q8_0, llama.cpp's choice)
 * and count as fixed bytes, as do norms and biases; the block matrices share the rest:
 *   budget = bpw * parameters / 8 - fixed bytes.
 * The plan is made when the quant stage reaches block 0 and freed after the last block.
 */
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"

static const sqz_role linear_roles[] = {SQZ_ROLE_ATTN_Q,   SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V,  SQZ_ROLE_ATTN_OUT,
                                        SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP, SQZ_ROLE_FFN_DOWN};
#define N_LIN ((int)(sizeof linear_roles / sizeof linear_roles[0]))

typedef struct collector {
    sqz_model *m;
    bool imatrix;
    sqz_qauto_tensor *t; /* [n_layers * N_LIN] */
    bool *have;
} collector;

static sqz_status measure_block(void *user, sqz_session *s, int32_t layer, const sqz_calib_block *b) {
    (void)s;
    collector *c = user;
    if (layer < 0 || layer >= c->m->hp.n_layers) return SQZ_OK;
    for (int k = 0; k < N_LIN; k++) {
        const sqz_tensor *t = sqz_model_get(c->m, linear_roles[k], layer, SQZ_PARAM_WEIGHT);
        if (!t || t->ndim != 2) continue;
        const sqz_calib_input *in = b ? sqz_calib_block_input(b, linear_roles[k]) : NULL;
        const float *x2 = in && in->x2 && in->st.n_in == t->shape[1] ? in->x2 : NULL;
        const int64_t n = sqz_tensor_nelements(t);
        float *w = sqz__malloc((size_t)n * sizeof(float));
        if (!w) return SQZ_ERR_NOMEM;
        sqz_status st = sqz_tensor_to_f32(t, w);
        if (st == SQZ_OK)
            st = sqz_qauto_measure(w, t->shape[0], t->shape[1], x2, c->imatrix, &c->t[layer * N_LIN + k]);
        free(w);
        SQZ_TRY(st);
        c->have[layer * N_LIN + k] = true;
    }
    return SQZ_OK;
}

void sqz__qplan_free(sqz_qplan *p) {
    if (!p) return;
    free(p->type);
    free(p);
}

/* Bytes of everything the plan does not choose: norms, biases, and the embedding / output in
 * the mix's type. */
static double fixed_bytes(const sqz_model *m, const sqz_compress_spec *sp) {
    double b = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const sqz_tensor *t = &m->tensors[i];
        bool planned = false;
        for (int k = 0; k < N_LIN && t->param == SQZ_PARAM_WEIGHT && t->ndim == 2; k++)
            planned = planned || t->role == linear_roles[k];
        if (planned) continue;
        size_t nb = t->nbytes;
        if (t->ndim == 2 && (t->role == SQZ_ROLE_TOKEN_EMBD || t->role == SQZ_ROLE_OUTPUT) && sp->mix)
            (void)sqz_dtype_nbytes(sqz_qmix_type(sp->mix, m, t, false), sqz_tensor_nelements(t), &nb);
        b += (double)nb;
    }
    return b;
}

sqz_status sqz__quant_auto_plan(sqz_pass_ctx *pc, sqz_compress_spec *sp) {
    sqz_model *m = pc->m;
    SQZ_RETURN_IF(!pc->w || !pc->session_opts, SQZ_ERR_INVALID_ARG,
                  "--quant '%s': auto measures every layer's sensitivity on calibration text first: give --calib "
                  "FILE", sp->text);
    const int64_t nl = m->hp.n_layers, nt = nl * N_LIN;
    collector c = {m, !strcmp(sp->method->name, "imatrix"), sqz__calloc((size_t)nt, sizeof(sqz_qauto_tensor)),
                   sqz__calloc((size_t)nt, sizeof(bool))};
    sqz_qplan *plan = sqz__calloc(1, sizeof *plan);
    sqz_status st = c.t && c.have && plan ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK) {
        plan->n_layers = (int32_t)nl;
        plan->type = sqz__malloc((size_t)nl * SQZ_ROLE_COUNT * sizeof(sqz_dtype));
        if (!plan->type) st = SQZ_ERR_NOMEM;
        for (int64_t i = 0; plan->type && i < nl * SQZ_ROLE_COUNT; i++) plan->type[i] = SQZ_DTYPE_COUNT;
    }
    sqz_session *s = NULL;
    if (st == SQZ_OK) {
        sqz_session_opts so = *pc->session_opts;
        so.max_tokens = pc->w->ctx;
        st = sqz_session_new(m, &so, &s);
    }
    if (st == SQZ_OK) {
        sqz_calib_run_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.observe.needs = SQZ_QSTAT_X2;
        ro.on_block = measure_block;
        ro.user = &c;
        st = sqz_calib_run(s, pc->w, &ro);
    }
    sqz_session_free(s);
    const double target = sp->auto_bpw * (double)sqz_model_param_count(m) / 8.0;
    const double fixed = st == SQZ_OK ? fixed_bytes(m, sp) : 0;
    double used = 0;
    if (st == SQZ_OK) st = sqz_qauto_solve(c.t, nt, target - fixed, &used);
    int counts[SQZ_QFMT_COUNT] = {0};
    for (int64_t i = 0; st == SQZ_OK && i < nt; i++) {
        if (!c.have[i] || c.t[i].chosen < 0) continue;
        const sqz_qformat f = c.t[i].fmt[c.t[i].chosen];
        plan->type[(i / N_LIN) * SQZ_ROLE_COUNT + linear_roles[i % N_LIN]] = sqz_qformat_dtype(f);
        counts[f]++;
    }
    if (st == SQZ_OK) {
        plan->bytes_target = target;
        plan->bytes_planned = used + fixed;
        size_t k = (size_t)snprintf(pc->stage->note, sizeof pc->stage->note,
                                    "auto: %.3f bpw asked, %.3f planned (%.0f bytes of %.0f):", sp->auto_bpw,
                                    8.0 * (used + fixed) / (double)sqz_model_param_count(m), used + fixed, target);
        for (int f = 0; f < SQZ_QFMT_COUNT && k < sizeof pc->stage->note; f++)
            if (counts[f])
                k += (size_t)snprintf(pc->stage->note + k, sizeof pc->stage->note - k, " %d %s", counts[f],
                                      sqz_qformat_name((sqz_qformat)f));
    }
    free(c.t);
    free(c.have);
    if (st != SQZ_OK) {
        sqz__qplan_free(plan);
        return st;
    }
    sp->plan = plan;
    return SQZ_OK;
}

sqz_dtype sqz__qplan_type(const sqz_qplan *p, const sqz_tensor *t) {
    if (!p || t->layer < 0 || t->layer >= p->n_layers || t->param != SQZ_PARAM_WEIGHT) return SQZ_DTYPE_COUNT;
    return p->type[(int64_t)t->layer * SQZ_ROLE_COUNT + t->role];
}
