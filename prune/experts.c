/* prune/experts.c - scoring a mixture's experts for removal (`--prune experts=R[:reap|frequency|random]`):
 *   reap       REAP (Lasby et al., "REAP the Experts", Cerebras 2025): the mean over the tokens routed to
 *              expert e of g_e(x) ||f_e(x)||_2, its routing weight times the norm of its output (calib/
 *              observe_experts.c sums it from the runtime's EXPERT_OUT events);
 *   frequency  the tokens routed to e over the calibration windows;
 *   random     a draw seeded by the layer and the expert (the baseline both should beat).
 * An expert no calibration token reached scores 0 by reap and frequency: it goes first. */
#include <stdint.h>

#include "prune/prune_internal.h"

static double draw(int32_t layer, int64_t e) { /* splitmix64 of (layer, e) in [0, 1) */
    uint64_t z = ((uint64_t)(uint32_t)layer << 32 | (uint64_t)e) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

sqz_status sqz__prune_expert_scores(const sqz_calib_block *stats, int32_t layer, int64_t n_expert,
                                    sqz__expert_score how, double *sc) {
    if (how == SQZ__EXPERTS_RANDOM) {
        for (int64_t e = 0; e < n_expert; e++) sc[e] = draw(layer, e);
        return SQZ_OK;
    }
    const sqz_calib_input *in = stats ? sqz_calib_block_input(stats, SQZ_ROLE_FFN_GATE_EXPS) : NULL;
    const float *v = !in ? NULL : how == SQZ__EXPERTS_REAP ? in->mat_reap : in->mat_tokens;
    SQZ_RETURN_IF(!v, SQZ_ERR_INVALID_ARG, "block %d: no per-expert %s from the calibration (the experts' scores "
                  "come from --calib FILE)", (int)layer, how == SQZ__EXPERTS_REAP ? "REAP scores" : "token counts");
    for (int64_t e = 0; e < n_expert; e++) sc[e] = e < in->n_mat ? (double)v[e] : 0.0;
    return SQZ_OK;
}
