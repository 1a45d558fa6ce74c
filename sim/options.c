/* options.c - the checks of the shared options' keyword values (see options.h). */
#include "options.h"

#include <string.h>

#include "commands.h"

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

int sim_opt_exec(const char *cmd, int checkpoint, const char *recompute, const char *attention, const char *autocast,
                 int dropout_given, double dropout, shs_recompute_t *out_recompute,
                 shs_attention_kind_t *out_attention, shs_dtype_t *out_autocast, float *out_dropout) {
    *out_recompute = checkpoint ? SHS_RECOMPUTE_FULL : SHS_RECOMPUTE_NONE;
    if (recompute) {
        static const char *const names[] = {"none", "full", "selective"};
        int k = 0;
        while (k < 3 && strcmp(recompute, names[k])) k++;
        if (k == 3) return sim_usage_error(cmd, "--recompute-granularity takes full, selective or none (got '%s')", recompute);
        if (checkpoint && k != SHS_RECOMPUTE_FULL)
            return sim_usage_error(cmd, "--checkpoint-activations is --recompute-granularity full; it conflicts with "
                                        "--recompute-granularity %s", recompute);
        *out_recompute = (shs_recompute_t)k;
    }
    if (attention) {
        if (!strcmp(attention, "eager")) *out_attention = SHS_ATTENTION_EAGER;
        else if (!strcmp(attention, "flash")) *out_attention = SHS_ATTENTION_FLASH;
        else return sim_usage_error(cmd, "--attention takes eager or flash (got '%s')", attention);
    }
    if (autocast) {
        shs_dtype_t t;
        if (!strcmp(autocast, "off")) t = SHS_DTYPE_DEFAULT;
        else if (shs_dtype_parse(autocast, &t) || (t != SHS_BF16 && t != SHS_F16))
            return sim_usage_error(cmd, "--autocast takes bf16, f16 or off (got '%s')", autocast);
        *out_autocast = t;
    }
    if (dropout_given) *out_dropout = (float)dropout;
    return -1;
}

int sim_ds_config_apply(const char *cmd, const char *path, shs_ds_use_t use, const int given[SHS_DS_NUM_SETTINGS],
                        int no_hidden, shs_ds_config_t *ds, shs_train_config_t *cfg, shs_ds_source_t src[SHS_DS_NUM_SETTINGS]) {
    long hidden = no_hidden ? 0 : cfg->arch == SHS_ARCH_LLAMA ? cfg->llama.hidden : cfg->model.channels;
    if (shs_ds_config_load_for(path, use, ds) != SHS_OK || shs_ds_config_apply(ds, given, hidden, cfg, src) != SHS_OK) {
        sim_error(cmd, "--ds-config %s", shs_last_error());
        return SIM_EXIT_ERROR;
    }
    return -1;
}
