/* model_choice.c - a config.json or Llama preset into a train config, and
 * its header line (model_choice.h). */
#include "model_choice.h"

#include <stdio.h>

#include "args.h"

int sim_model_set_llama(const char *cmd, const char *what, const shs_llama_config_t *llama, int sliding_window, int T,
                        int default_T, shs_train_config_t *c) {
    int cap = llama->max_position;
    const char *cap_key = "max_position_embeddings";
    if (sliding_window > 0 && sliding_window < cap) {
        cap = sliding_window;
        cap_key = "sliding_window (attention within a window is not modelled)";
    }
    if (T > cap) return sim_usage_error(cmd, "--context %d: %s takes at most %d (%s)", T, what, cap, cap_key);
    c->arch = SHS_ARCH_LLAMA;
    c->llama = *llama;
    c->model.context = T > 0 ? T : default_T < cap ? default_T : cap;
    return -1;
}

int sim_model_set_hf(const char *cmd, const char *path, const shs_hf_config_t *h, int T, int default_T,
                     shs_train_config_t *c) {
    if (h->arch == SHS_ARCH_LLAMA) return sim_model_set_llama(cmd, path, &h->llama, h->sliding_window, T, default_T, c);
    if (T > h->gpt.context)
        return sim_usage_error(cmd, "--context %d: %s takes at most %d (n_positions)", T, path, h->gpt.context);
    c->arch = SHS_ARCH_GPT;
    c->model = h->gpt;
    c->model.context = T > 0 ? T : default_T < h->gpt.context ? default_T : h->gpt.context;
    return -1;
}

void sim_model_describe(char *buf, size_t n, const char *name, const shs_train_config_t *c, uint64_t params) {
    char p[48] = "";
    if (params) snprintf(p, sizeof p, ", %llu params", (unsigned long long)params);
    if (c->arch == SHS_ARCH_LLAMA) {
        const shs_llama_config_t *l = &c->llama;
        snprintf(buf, n, "%s: llama L=%d C=%d NH=%d NKV=%d I=%d V=%d T=%d%s%s%s", name, l->num_layers,
                 l->hidden, l->num_heads, l->num_kv_heads, l->intermediate, l->vocab, c->model.context,
                 l->tie_word_embeddings ? ", tied head" : "", l->qkv_bias ? ", qkv bias" : "", p);
    } else {
        snprintf(buf, n, "%s: gpt L=%d C=%d NH=%d T=%d V=%d%s", name, c->model.num_layers,
                 c->model.channels, c->model.num_heads, c->model.context, shs_gpt_vocab(&c->model), p);
    }
}
