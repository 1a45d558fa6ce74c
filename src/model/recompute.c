/* recompute.c - what a block keeps under each recompute policy (recompute.h). */
#include "model/recompute.h"

#include <stdio.h>

int shs__ac_block_recomputes(const shs_gpt_exec_t *ex, int l) {
    if (ex->recompute == SHS_RECOMPUTE_FULL) return 1;
    return ex->recompute == SHS_RECOMPUTE_EVERY_N && ex->recompute_every > 0 && (l + 1) % ex->recompute_every == 0;
}

int shs__ac_keeps(const shs_gpt_exec_t *ex, int l, shs__act_role_t role, int mm_saved) {
    if (role == SHS__ACT_OUTPUT) return 1;
    if (shs__ac_block_recomputes(ex, l)) return 0;
    switch (ex->recompute) {
    case SHS_RECOMPUTE_SELECTIVE: return role != SHS__ACT_PROBS && role != SHS__ACT_MM_OUT;
    case SHS_RECOMPUTE_SELECTIVE_OP:
        return mm_saved || (role == SHS__ACT_ATTN_OUT && ex->attention == SHS_ATTENTION_FLASH);
    default: return role != SHS__ACT_MM_OUT; /* none, and the blocks EVERY_N leaves alone */
    }
}

int shs__ac_shared_needed(const shs_gpt_exec_t *ex, int L, shs__act_role_t role, int mm_saved) {
    for (int l = 0; l < L && role != SHS__ACT_MM_OUT; l++)
        if (!shs__ac_keeps(ex, l, role, mm_saved)) return 1;
    return 0;
}

unsigned shs__ac_op_saved_linears(const int *has_bias, int n) {
    unsigned mask = 0;
    int count = 0;
    for (int i = 0; i < n; i++)
        if (!has_bias[i] && ++count % 2 == 1) mask |= 1u << i;
    return mask;
}

const char *shs_recompute_name(shs_recompute_t r) {
    switch (r) {
    case SHS_RECOMPUTE_FULL: return "full";
    case SHS_RECOMPUTE_SELECTIVE: return "selective";
    case SHS_RECOMPUTE_SELECTIVE_OP: return "selective-op";
    case SHS_RECOMPUTE_EVERY_N: return "selective-N";
    default: return "none";
    }
}

const char *shs_recompute_label(char *buf, size_t n, shs_recompute_t r, int every) {
    if (r == SHS_RECOMPUTE_EVERY_N) snprintf(buf, n, "selective-%d", every);
    else snprintf(buf, n, "%s", shs_recompute_name(r));
    return buf;
}
