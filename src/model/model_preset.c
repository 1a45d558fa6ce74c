/* model_preset.c - GPT-2 / GPT-3 and Llama-family shapes, and the GPT's
 * parameter-count closed form (model_preset.h).
 * Sources: GPT-2, Radford et al. 2019 Table 2 (L, d_model) with the
 * released configs (n_head 12/16/20/25, n_ctx 1024, vocab 50257); the exact
 * totals are what the released checkpoints hold with the tied head
 * (Hugging Face transformers' num_parameters() of gpt2, gpt2-medium,
 * gpt2-large, gpt2-xl). GPT-3, Brown et al. 2020 Table 2.1 (n_layers,
 * d_model, n_heads; n_ctx 2048; GPT-2's tokenizer, vocab 50257). The paper
 * gives 13B's d_model as 5140 with 40 heads of 128, which do not multiply
 * out; 5120 = 40 x 128 is used, as in Megatron-LM's and EleutherAI's
 * reproductions.
 *
 * The Llama family: each shape is its Hugging Face config.json (the keys
 * hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads, vocab_size, max_position_embeddings, rms_norm_eps,
 * rope_theta, rope_scaling, tie_word_embeddings), as published in the
 * model repositories named in each row (Meta's are gated; the same files
 * are transcribed in many public projects, which is where they were read
 * here; rope_theta is absent from the Llama 2 files and defaults to 10000
 * in LlamaConfig). The published counts are the exact totals the model
 * cards and Hugging Face report (num_parameters() of the released
 * checkpoints: 6,738,415,616 for Llama-2-7b-hf, ...). All seven equal the
 * count of the shape by shs_llama_num_params' formula (checked in
 * tests/model/test_hf_config.c, which computes it independently). */
#include "shardsim/model_preset.h"

#include <string.h>

#define GPT2_V 50257
#define MPT_V 50368 /* llm-foundry's yamls: vocab_size 50368 (the GPT-NeoX-20B tokenizer, padded) */
#define LLAMA2_V 32000
#define LLAMA3_V 128256

/* A GPT row: name, shape, published count, its rounding, source. */
#define GPT_ROW(name, ...) {name, __VA_ARGS__, SHS_ARCH_GPT, {0}, 0}
/* A Llama-family row: name, default context, published count, source,
 * {L, C, NH, NKV, I, V, max_position, rms_norm_eps, rope_theta, rope_scaling, tied, qkv_bias}, window. */
#define LLAMA_ROW(name, T, count, source, ...) {name, {0, 0, 0, T, 0}, count, 1, source, SHS_ARCH_LLAMA, __VA_ARGS__}
#define NO_SCALING {SHS_ROPE_SCALING_NONE, 0, 0, 0, 0}

static const shs_model_preset_t presets[] = {
    GPT_ROW("gpt2-124m", {12, 12, 768, 1024, GPT2_V}, 124439808ull, 1, "GPT-2 small: 124,439,808 (HF gpt2)"),
    GPT_ROW("gpt2-350m", {24, 16, 1024, 1024, GPT2_V}, 354823168ull, 1, "GPT-2 medium: 354,823,168 (HF gpt2-medium)"),
    GPT_ROW("gpt2-774m", {36, 20, 1280, 1024, GPT2_V}, 774030080ull, 1, "GPT-2 large: 774,030,080 (HF gpt2-large)"),
    GPT_ROW("gpt2-1.5b", {48, 25, 1600, 1024, GPT2_V}, 1557611200ull, 1, "GPT-2 XL: 1,557,611,200 (HF gpt2-xl)"),
    GPT_ROW("gpt3-6.7b", {32, 32, 4096, 2048, GPT2_V}, 6700000000ull, 100000000ull, "GPT-3 6.7B (Brown et al. 2020, Table 2.1)"),
    GPT_ROW("gpt3-13b", {40, 40, 5120, 2048, GPT2_V}, 13000000000ull, 1000000000ull,
     "GPT-3 13B (Brown et al. 2020, Table 2.1: 13.0B with d_model 5140; 12.85B with 5120)"),
    GPT_ROW("gpt3-175b", {96, 96, 12288, 2048, GPT2_V}, 175000000000ull, 1000000000ull,
     "GPT-3 175B (Brown et al. 2020, Table 2.1: 175.0B)"),
    /* MPT as llm-foundry's throughput benchmarks ran it (scripts/train/yamls/pretrain/mpt-*.yaml: d_model,
     * n_heads, n_layers, expansion_ratio 4, vocab 50368): learned position embeddings, biases and LayerNorm
     * biases (MPTConfig's defaults then, not the ALiBi, bias-free MPT-7B release): the NumParams column of
     * scripts/train/benchmarking/README.md equals this GPT's count at every sequence length */
    GPT_ROW("mpt-1b", {24, 16, 2048, 2048, MPT_V}, 1315950592ull, 1, "MPT 1B (llm-foundry benchmarks, NumParams at T 2048)"),
    GPT_ROW("mpt-3b", {32, 20, 2560, 2048, MPT_V}, 2651837440ull, 1, "MPT 3B (llm-foundry benchmarks, NumParams at T 2048)"),
    GPT_ROW("mpt-7b", {32, 32, 4096, 2048, MPT_V}, 6658859008ull, 1, "MPT 7B (llm-foundry benchmarks, NumParams at T 2048)"),
    GPT_ROW("mpt-13b", {40, 40, 5120, 2048, MPT_V}, 12853954560ull, 1, "MPT 13B (llm-foundry benchmarks, NumParams at T 2048)"),
    GPT_ROW("mpt-30b", {48, 56, 7168, 2048, MPT_V}, 29975214080ull, 1, "MPT 30B (llm-foundry benchmarks, NumParams at T 2048)"),
    GPT_ROW("mpt-70b", {80, 64, 8192, 2048, MPT_V}, 64862437376ull, 1, "MPT 70B (llm-foundry benchmarks, NumParams at T 2048)"),
    /* meta-llama/Llama-2-7b-hf: 4096, 11008, 32 layers, 32 heads, 32 kv heads, 32000, 4096, 1e-05 */
    LLAMA_ROW("llama2-7b", 4096, 6738415616ull, "Llama 2 7B: 6,738,415,616 (HF meta-llama/Llama-2-7b-hf)",
              {32, 4096, 32, 32, 11008, LLAMA2_V, 4096, 1e-5f, 10000.0, NO_SCALING, 0, 0}, 0),
    /* meta-llama/Llama-2-13b-hf: 5120, 13824, 40, 40, 40, 32000, 4096, 1e-05 */
    LLAMA_ROW("llama2-13b", 4096, 13015864320ull, "Llama 2 13B: 13,015,864,320 (HF meta-llama/Llama-2-13b-hf)",
              {40, 5120, 40, 40, 13824, LLAMA2_V, 4096, 1e-5f, 10000.0, NO_SCALING, 0, 0}, 0),
    /* meta-llama/Llama-2-70b-hf: 8192, 28672, 80, 64, 8 (GQA), 32000, 4096, 1e-05 */
    LLAMA_ROW("llama2-70b", 4096, 68976648192ull, "Llama 2 70B: 68,976,648,192 (HF meta-llama/Llama-2-70b-hf)",
              {80, 8192, 64, 8, 28672, LLAMA2_V, 4096, 1e-5f, 10000.0, NO_SCALING, 0, 0}, 0),
    /* meta-llama/Meta-Llama-3-8B: 4096, 14336, 32, 32, 8, 128256, 8192, 1e-05, rope_theta 500000.0
     * (the whole file: tests/model/hf_llama3_8b_config.h) */
    LLAMA_ROW("llama3-8b", 8192, 8030261248ull, "Llama 3 8B: 8,030,261,248 (HF meta-llama/Meta-Llama-3-8B)",
              {32, 4096, 32, 8, 14336, LLAMA3_V, 8192, 1e-5f, 500000.0, NO_SCALING, 0, 0}, 0),
    /* meta-llama/Meta-Llama-3-70B: 8192, 28672, 80, 64, 8, 128256, 8192, 1e-05, 500000.0 */
    LLAMA_ROW("llama3-70b", 8192, 70553706496ull, "Llama 3 70B: 70,553,706,496 (HF meta-llama/Meta-Llama-3-70B)",
              {80, 8192, 64, 8, 28672, LLAMA3_V, 8192, 1e-5f, 500000.0, NO_SCALING, 0, 0}, 0),
    /* meta-llama/Llama-3.1-405B: 16384, 53248, 126, 128, 8, 128256, 131072, 1e-05, 500000.0,
     * rope_scaling {rope_type llama3, factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0,
     * original_max_position_embeddings 8192}: the default context is that pre-training 8192
     * (shs_hf_config_context's rule) */
    LLAMA_ROW("llama3.1-405b", 8192, 405853388800ull, "Llama 3.1 405B: 405,853,388,800 (HF meta-llama/Llama-3.1-405B)",
              {126, 16384, 128, 8, 53248, LLAMA3_V, 131072, 1e-5f, 500000.0,
               {SHS_ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 8192}, 0, 0}, 0),
    /* mistralai/Mistral-7B-v0.1: 4096, 14336, 32, 32, 8, 32000, 32768, 1e-05, rope_theta 10000.0,
     * sliding_window 4096: the default context is the window */
    LLAMA_ROW("mistral-7b", 4096, 7241732096ull, "Mistral 7B v0.1: 7,241,732,096 (HF mistralai/Mistral-7B-v0.1)",
              {32, 4096, 32, 8, 14336, LLAMA2_V, 32768, 1e-5f, 10000.0, NO_SCALING, 0, 0}, 4096),
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
