/* optim.c - AdamW / SGD steps over a range, through the device kernels. */
#include "shardsim/optim.h"

#include <math.h>
#include <string.h>

#include "core/names.h"

shs_optim_config_t shs_optim_default(shs_optim_kind_t kind) {
    shs_optim_config_t c = {.kind = kind, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    c.weight_decay = kind == SHS_OPTIM_ADAMW ? 0.01f : 0.0f;
    return c;
}

#define OPTIM_NAME(id, name) name,
static const char *const optim_names[] = {SHS_OPTIM_MAP(OPTIM_NAME)};
#undef OPTIM_NAME

const char *shs_optim_name(shs_optim_kind_t kind) { return shs__name_of(optim_names, SHS_NUM_OPTIMS, (int)kind, "invalid"); }

int shs_optim_parse(const char *name, shs_optim_kind_t *out) {
    int k = shs__name_find(optim_names, SHS_NUM_OPTIMS, name);
    if (k >= 0) *out = (shs_optim_kind_t)k;
    return k >= 0 ? 0 : -1;
}

int shs_optim_state_per_param(const shs_optim_config_t *cfg) {
    if (cfg->kind == SHS_OPTIM_ADAMW) return 2;
    return cfg->momentum != 0.0f ? 1 : 0;
}

void shs_optim_step(shs_device_t *dev, const shs_optim_config_t *cfg, long step, float *param,
                    const float *grad, float *state, size_t n) {
    if (n == 0) return;
    if (cfg->kind == SHS_OPTIM_ADAMW) {
        shs_adamw_hparams_t hp = {
            .lr = cfg->lr, .beta1 = cfg->beta1, .beta2 = cfg->beta2, .eps = cfg->eps,
            .weight_decay = cfg->weight_decay,
            .bias_correction1 = cfg->no_bias_correction ? 1.0f : (float)(1.0 - pow((double)cfg->beta1, (double)step)),
            .bias_correction2_sqrt = cfg->no_bias_correction ? 1.0f
                                                             : (float)sqrt(1.0 - pow((double)cfg->beta2, (double)step)),
        };
        shs_adamw_update(dev, param, grad, state, state + n, n, &hp);
    } else {
        shs_sgd_update(dev, param, grad, cfg->momentum != 0.0f ? state : NULL, n, cfg->lr, cfg->momentum,
                       cfg->weight_decay);
    }
}
