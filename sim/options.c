/* options.c - the checks of the shared options' keyword values (see options.h). */
#include "options.h"

#include <stdio.h>
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

/* One spelling of the recompute policy: its option text and what it names. */
typedef struct {
    const char *spelling;
    shs_recompute_t r;
    int every;
} ac_spelling_t;

static const char *ac_label(char *buf, size_t n, const ac_spelling_t *a) {
    char l[48];
    shs_recompute_label(l, sizeof l, a->r, a->every);
    snprintf(buf, n, "%s%s", l,
             a->r == SHS_RECOMPUTE_SELECTIVE      ? " (Megatron's: the attention core)"
             : a->r == SHS_RECOMPUTE_SELECTIVE_OP ? " (torchtitan's op-level policy)"
             : a->r == SHS_RECOMPUTE_EVERY_N      ? " (torchtitan's: every N-th block in full)"
                                                  : "");
    return buf;
}

/* --ac-mode and --selective-ac-option into *a. -1 to go on, else a usage error. */
static int parse_ac_mode(const char *cmd, const sim_exec_args_t *in, ac_spelling_t *a) {
    static char spelling[160];
    if (in->ac_option && (!in->ac_mode || strcmp(in->ac_mode, "selective")))
        return sim_usage_error(cmd, "--selective-ac-option %s applies with --ac-mode selective (%s%s)", in->ac_option,
                               in->ac_mode ? "got --ac-mode " : "no --ac-mode given", in->ac_mode ? in->ac_mode : "");
    if (!strcmp(in->ac_mode, "none") || !strcmp(in->ac_mode, "full")) {
        a->r = in->ac_mode[0] == 'n' ? SHS_RECOMPUTE_NONE : SHS_RECOMPUTE_FULL;
        snprintf(spelling, sizeof spelling, "--ac-mode %s", in->ac_mode);
    } else if (!strcmp(in->ac_mode, "selective")) {
        const char *opt = in->ac_option ? in->ac_option : "2"; /* torchtitan's default */
        long n;
        char err[128];
        if (!strcmp(opt, "op")) {
            a->r = SHS_RECOMPUTE_SELECTIVE_OP;
        } else if (sim_parse_int(opt, -(1L << 30), 1L << 30, &n, err, sizeof err)) {
            return sim_usage_error(cmd, "--selective-ac-option takes op or a block count N >= 1 (got '%s')", opt);
        } else if (n < 1) {
            return sim_usage_error(cmd, "--selective-ac-option %s: N must be >= 1 (every N-th block recomputes)", opt);
        } else {
            a->r = SHS_RECOMPUTE_EVERY_N;
            a->every = (int)n;
        }
        snprintf(spelling, sizeof spelling, "--ac-mode selective %s%s", in->ac_option ? "--selective-ac-option " : "",
                 in->ac_option ? opt : "(--selective-ac-option 2 by default)");
    } else {
        return sim_usage_error(cmd, "--ac-mode takes none, full or selective (got '%s')", in->ac_mode);
    }
    a->spelling = spelling;
    return -1;
}

int sim_opt_exec(const char *cmd, const sim_exec_args_t *in, shs_train_config_t *cfg) {
    ac_spelling_t given[3];
    int n = 0, rc;
    if (in->checkpoint) given[n++] = (ac_spelling_t){"--checkpoint-activations", SHS_RECOMPUTE_FULL, 0};
    if (in->recompute) {
        static const char *const names[] = {"none", "full", "selective"};
        int k = 0;
        while (k < 3 && strcmp(in->recompute, names[k])) k++;
        if (k == 3)
            return sim_usage_error(cmd, "--recompute-granularity takes full, selective or none (got '%s')",
                                   in->recompute);
        static char spelling[64];
        snprintf(spelling, sizeof spelling, "--recompute-granularity %s", in->recompute);
        given[n++] = (ac_spelling_t){spelling, (shs_recompute_t)k, 0};
    }
    if (in->ac_mode || in->ac_option) {
        given[n] = (ac_spelling_t){0};
        if ((rc = parse_ac_mode(cmd, in, &given[n])) >= 0) return rc;
        n++;
    }
    for (int k = 1; k < n; k++)
        if (given[k].r != given[0].r || given[k].every != given[0].every) {
            char a[96], b[96];
            return sim_usage_error(cmd, "%s conflicts with %s: they name different recompute policies (%s, %s); "
                                        "give one",
                                   given[0].spelling, given[k].spelling, ac_label(a, sizeof a, &given[0]),
                                   ac_label(b, sizeof b, &given[k]));
        }
    cfg->recompute = n ? given[0].r : SHS_RECOMPUTE_NONE;
    cfg->recompute_every = n ? given[0].every : 0;
    if (in->attention) {
        if (!strcmp(in->attention, "eager")) cfg->attention = SHS_ATTENTION_EAGER;
        else if (!strcmp(in->attention, "flash")) cfg->attention = SHS_ATTENTION_FLASH;
        else return sim_usage_error(cmd, "--attention takes eager or flash (got '%s')", in->attention);
    }
    if (in->autocast) {
        shs_dtype_t t;
        if (!strcmp(in->autocast, "off")) t = SHS_DTYPE_DEFAULT;
        else if (shs_dtype_parse(in->autocast, &t) || (t != SHS_BF16 && t != SHS_F16))
            return sim_usage_error(cmd, "--autocast takes bf16, f16 or off (got '%s')", in->autocast);
        cfg->autocast = t;
    }
    if (in->dropout_given) cfg->dropout = (float)in->dropout;
    return -1;
}

const char *sim_recompute_note(const shs_train_config_t *cfg) {
    if (cfg->recompute == SHS_RECOMPUTE_SELECTIVE && cfg->attention == SHS_ATTENTION_FLASH)
        return "Megatron's selective recompute drops eager attention's s^2 probabilities; flash attention keeps "
               "none, so it keeps what no recompute keeps and recomputes nothing";
    return NULL;
}

int sim_opt_exec_check_model(const char *cmd, const shs_train_config_t *cfg) {
    int L = cfg->arch == SHS_ARCH_LLAMA ? cfg->llama.num_layers : cfg->model.num_layers;
    if (cfg->recompute == SHS_RECOMPUTE_EVERY_N && cfg->recompute_every > L)
        return sim_usage_error(cmd, "--selective-ac-option %d: the model has %d blocks, so no block would recompute "
                                    "(N must be <= %d)", cfg->recompute_every, L, L);
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
