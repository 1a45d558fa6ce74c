/* options.c - the checks of the shared options' keyword values (see options.h). */
#include "options.h"

int sim_opt_dtype(const char *cmd, const char *opt, const char *val, shs_dtype_t *out) {
    shs_dtype_t t;
    if (shs_dtype_parse(val, &t) || (t != SHS_F32 && t != SHS_BF16 && t != SHS_F16))
        return sim_usage_error(cmd, "%s takes f32, bf16 or f16 (got '%s')", opt, val);
    *out = t;
    return -1;
}

int sim_opt_optimizer(const char *cmd, const char *val, shs_optim_config_t *out) {
    shs_optim_kind_t k;
    if (shs_optim_parse(val, &k)) return sim_usage_error(cmd, "--optimizer: unknown optimizer '%s': use adamw or sgd", val);
    *out = shs_optim_default(k);
    return -1;
}
