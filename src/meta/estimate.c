/* estimate.c - the ZeRO paper's closed forms (estimate.h).
 * What it is not: the step-time model (src/time/).
 */
#include "shardsim/estimate.h"

#include <string.h>


shs_zero_states_t shs_zero_states(shs_strategy_kind_t kind, double psi, int n, int state_per_param,
                                  shs_offload_t offload, int param_bytes, int grad_bytes) {
    const shs_stage_t *st = shs_strategy_stage(kind); /* what the stage shards (strategy/stages.c) */
    shs_zero_states_t s;
    s.params = 4.0 * psi / (st->shards_params ? n : 1);
    /* below f32: f32 master shards plus a param-dtype replica (ZeRO-1/2) or shard (ZeRO-3) */
    if (param_bytes < 4 && st->regathers_params_after_step) s.params = 4.0 * psi / n + param_bytes * psi;
    if (param_bytes < 4 && st->shards_params) s.params = (4.0 + param_bytes) * psi / n;
    s.grads = (double)grad_bytes * psi / (st->shards_grads ? n : 1);
    s.optim = 4.0 * state_per_param * psi / (st->shards_optimizer ? n : 1);
    if (offload != SHS_OFFLOAD_NONE) s.optim = 0;
    if (offload == SHS_OFFLOAD_PARAMS) s.params = 0;
    return s;
}

shs_zero_states_t shs_zero_paper_states(shs_strategy_kind_t kind, double psi, int n) {
    const shs_stage_t *st = shs_strategy_stage(kind); /* P_os, P_g, P_p: what the stage shards */
    const double K = 12;
    return (shs_zero_states_t){.params = 2 * psi / (st->shards_params ? n : 1),
                               .grads = 2 * psi / (st->shards_grads ? n : 1),
                               .optim = K * psi / (st->shards_optimizer ? n : 1)};
}

double shs_zero_paper_total(shs_strategy_kind_t kind, double psi, int n) {
    shs_zero_states_t s = shs_zero_paper_states(kind, psi, n);
    return s.params + s.grads + s.optim;
}

double shs_zero_paper_volume(shs_strategy_kind_t kind, double psi, int N, int G) {
    if (kind == SHS_HYBRID_SHARD) return 3 * psi + (N / G > 1 ? 2 * psi / G : 0);
    if (kind == SHS_HYBRID_SHARD_ZERO2) return 2 * psi + (N / G > 1 ? 2 * psi / G : 0);
    return kind == SHS_ZERO3 ? 3 * psi : 2 * psi;
}

double shs_zero_paper_sent(shs_strategy_kind_t kind, double psi, int N, int G, double width) {
    const shs_stage_t *st = shs_strategy_stage(kind);
    int hybrid = st->reduce == SHS_GRAD_REDUCE_SCATTER_REPLICAS;
    int n = hybrid ? G : N, R = hybrid ? N / G : 1;
    double group = (st->shards_params ? 3 : 2) * psi * (n - 1) / n; /* gathered in forward and backward */
    double replica = hybrid && R > 1 ? 2 * (psi / G) * (R - 1) / R : 0;
    return (group + replica) * width;
}
