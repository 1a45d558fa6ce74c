/* model_preset.c - GPT-2 / GPT-3 shapes and the parameter-count closed form
 * (model_preset.h).
 * Sources: GPT-2, Radford et al. 2019 Table 2 (L, d_model) with the
 * released configs (n_head 12/16/20/25, n_ctx 1024, vocab 50257); the exact
 * totals are what the released checkpoints hold with the tied head
 * (Hugging Face transformers' num_parameters() of gpt2, gpt2-medium,
 * gpt2-large, gpt2-xl). GPT-3, Brown et al. 2020 Table 2.1 (n_layers,
 * d_model, n_heads; n_ctx 2048; GPT-2's tokenizer, vocab 50257). The paper
 * gives 13B's d_model as 5140 with 40 heads of 128, which do not multiply
 * out; 5120 = 40 x 128 is used, as in Megatron-LM's and EleutherAI's
 * reproductions. */
#include "shardsim/model_preset.h"

#include <string.h>

#define GPT2_V 50257

static const shs_model_preset_t presets[] = {
    {"gpt2-124m", {12, 12, 768, 1024, GPT2_V}, 124439808ull, 1, "GPT-2 small: 124,439,808 (HF gpt2)"},
    {"gpt2-350m", {24, 16, 1024, 1024, GPT2_V}, 354823168ull, 1, "GPT-2 medium: 354,823,168 (HF gpt2-medium)"},
    {"gpt2-774m", {36, 20, 1280, 1024, GPT2_V}, 774030080ull, 1, "GPT-2 large: 774,030,080 (HF gpt2-large)"},
    {"gpt2-1.5b", {48, 25, 1600, 1024, GPT2_V}, 1557611200ull, 1, "GPT-2 XL: 1,557,611,200 (HF gpt2-xl)"},
    {"gpt3-6.7b", {32, 32, 4096, 2048, GPT2_V}, 6700000000ull, 100000000ull, "GPT-3 6.7B (Brown et al. 2020, Table 2.1)"},
    {"gpt3-13b", {40, 40, 5120, 2048, GPT2_V}, 13000000000ull, 1000000000ull,
     "GPT-3 13B (Brown et al. 2020, Table 2.1: 13.0B with d_model 5140; 12.85B with 5120)"},
    {"gpt3-175b", {96, 96, 12288, 2048, GPT2_V}, 175000000000ull, 1000000000ull,
     "GPT-3 175B (Brown et al. 2020, Table 2.1: 175.0B)"},
};

const shs_model_preset_t *shs_model_presets(int *count) {
    *count = (int)(sizeof presets / sizeof presets[0]);
    return presets;
}

const shs_model_preset_t *shs_model_preset_find(const char *name) {
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) return &presets[i];
    return NULL;
}

uint64_t shs_gpt_num_params(const shs_gpt_config_t *c) {
    uint64_t L = (uint64_t)c->num_layers, C = (uint64_t)c->channels, T = (uint64_t)c->context;
    uint64_t V = (uint64_t)shs_gpt_vocab(c);
    return 12 * L * C * C + 13 * L * C + (V + T) * C + 2 * C;
}
