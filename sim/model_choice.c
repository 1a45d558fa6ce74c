/* model_choice.c - a config.json or Llama preset into a train config, and
 * its header line (model_choice.h). */
#include "model_choice.h"

#include <stdio.h>

#include "args.h"

int sim_model_set_llama(const char *cmd, const char *what, const shs_llama_config_t *llama, int T, int default_T,
                        shs_train_config_t *c) {
    int cap = llama->max_position;
    if (T > cap)
        return sim_usage_error(cmd, "--context %d: %s takes at most %d (max_position_embeddings)", T, what, cap);
    c->arch = SHS_ARCH_LLAMA;
    c->llama = *llama;
    c->model.context = T > 0 ? T : default_T < cap ? default_T : cap;
    return -1;
}

int sim_model_set_hf(const char *cmd, const char *path, const shs_hf_config_t *h, int T, int default_T,
                     shs_train_config_t *c) {
    if (h->arch == SHS_ARCH_LLAMA) return sim_model_set_llama(cmd, path, &h->llama, T, default_T, c);
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
        char hd[24] = "", win[64] = "", more[160] = "";
        if (l->head_dim) snprintf(hd, sizeof hd, " HD=%d", l->head_dim);
        if (l->sliding_window && l->window_pattern)
            snprintf(win, sizeof win, ", window %d on all layers but every %d%s", l->sliding_window, l->window_pattern,
                     l->window_pattern % 10 == 2 && l->window_pattern % 100 != 12 ? "nd"
                     : l->window_pattern % 10 == 3 && l->window_pattern % 100 != 13 ? "rd" : "th");
        else if (l->sliding_window && l->window_first_layer)
            snprintf(win, sizeof win, ", window %d from layer %d", l->sliding_window, l->window_first_layer);
        else if (l->sliding_window)
            snprintf(win, sizeof win, ", window %d", l->sliding_window);
        snprintf(more, sizeof more, "%s%s%s%s%s%s%s%s", l->attention_bias ? ", attention bias" : "",
                 l->act == SHS_LLAMA_ACT_GELU_TANH ? ", GeGLU" : "",
                 l->qk_norm == SHS_QK_NORM_HEAD ? ", q/k head norms" : l->qk_norm == SHS_QK_NORM_ALL ? ", q/k norms" : "",
                 shs_llama_norms(l) & (SHS_LLAMA_NORM_ATTN_OUT | SHS_LLAMA_NORM_MLP_OUT) ? ", post-norms" : "",
                 l->attn_softcap > 0 || l->final_softcap > 0 ? ", soft caps" : "",
                 l->rotary_dim ? ", partial rotary" : "",
                 l->rope_scaling.kind == SHS_ROPE_SCALING_LONGROPE ? ", longrope" : "",
                 l->names == SHS_LLAMA_NAMES_PHI3 ? ", fused qkv/gate_up" : l->names == SHS_LLAMA_NAMES_INTERNLM2
                 ? ", grouped wqkv" : "");
        snprintf(buf, n, "%s: llama L=%d C=%d NH=%d NKV=%d%s I=%d V=%d T=%d%s%s%s%s%s", name, l->num_layers, l->hidden,
                 l->num_heads, l->num_kv_heads, hd, l->intermediate, l->vocab, c->model.context,
                 l->tie_word_embeddings ? ", tied head" : "", l->qkv_bias ? ", qkv bias" : "", win, more, p);
    } else {
        snprintf(buf, n, "%s: gpt L=%d C=%d NH=%d T=%d V=%d%s", name, c->model.num_layers,
                 c->model.channels, c->model.num_heads, c->model.context, shs_gpt_vocab(&c->model), p);
    }
}
