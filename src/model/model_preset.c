/* model_preset.c - GPT-2 / GPT-3 and Llama-family shapes (Llama 2 / 3 /
 * 3.1 / 3.2, Mistral, Qwen2.5 / 3, Gemma 1 / 2 / 3, Phi-3, OLMo 2, InternLM2.5,
 * SmolLM2), and the GPT's parameter-count closed form (model_preset.h).
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
#define GPT_ROW(name, ...) {name, __VA_ARGS__, SHS_ARCH_GPT, {0}}
/* A Llama-family row: name, default context, published count, source, and
 * the shape as designated initializers of shs_llama_config_t. */
#define LLAMA_ROW(name, T, count, source, ...) \
    {name, {0, 0, 0, T, 0}, count, 1, source, SHS_ARCH_LLAMA, {__VA_ARGS__}}
#define LLAMA3_1_SCALING(f) \
    .rope_scaling = {.kind = SHS_ROPE_SCALING_LLAMA3, .factor = f, .low_freq_factor = 1.0, .high_freq_factor = 4.0, \
                     .original_max_position_embeddings = 8192}
#define SHAPE(L, C, NH, NKV, I, V, maxpos) \
    .num_layers = L, .hidden = C, .num_heads = NH, .num_kv_heads = NKV, .intermediate = I, .vocab = V, \
    .max_position = maxpos

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
              SHAPE(32, 4096, 32, 32, 11008, LLAMA2_V, 4096), .rms_norm_eps = 1e-5f, .rope_theta = 10000.0),
    /* meta-llama/Llama-2-13b-hf: 5120, 13824, 40, 40, 40, 32000, 4096, 1e-05 */
    LLAMA_ROW("llama2-13b", 4096, 13015864320ull, "Llama 2 13B: 13,015,864,320 (HF meta-llama/Llama-2-13b-hf)",
              SHAPE(40, 5120, 40, 40, 13824, LLAMA2_V, 4096), .rms_norm_eps = 1e-5f, .rope_theta = 10000.0),
    /* meta-llama/Llama-2-70b-hf: 8192, 28672, 80, 64, 8 (GQA), 32000, 4096, 1e-05 */
    LLAMA_ROW("llama2-70b", 4096, 68976648192ull, "Llama 2 70B: 68,976,648,192 (HF meta-llama/Llama-2-70b-hf)",
              SHAPE(80, 8192, 64, 8, 28672, LLAMA2_V, 4096), .rms_norm_eps = 1e-5f, .rope_theta = 10000.0),
    /* meta-llama/Meta-Llama-3-8B: 4096, 14336, 32, 32, 8, 128256, 8192, 1e-05, rope_theta 500000.0
     * (the whole file: tests/model/hf_llama3_8b_config.h) */
    LLAMA_ROW("llama3-8b", 8192, 8030261248ull, "Llama 3 8B: 8,030,261,248 (HF meta-llama/Meta-Llama-3-8B)",
              SHAPE(32, 4096, 32, 8, 14336, LLAMA3_V, 8192), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0),
    /* meta-llama/Meta-Llama-3-70B: 8192, 28672, 80, 64, 8, 128256, 8192, 1e-05, 500000.0 */
    LLAMA_ROW("llama3-70b", 8192, 70553706496ull, "Llama 3 70B: 70,553,706,496 (HF meta-llama/Meta-Llama-3-70B)",
              SHAPE(80, 8192, 64, 8, 28672, LLAMA3_V, 8192), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0),
    /* meta-llama/Llama-3.1-405B: 16384, 53248, 126, 128, 8, 128256, 131072, 1e-05, 500000.0,
     * rope_scaling {rope_type llama3, factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0,
     * original_max_position_embeddings 8192}: the default context is that pre-training 8192
     * (shs_hf_config_context's rule) */
    LLAMA_ROW("llama3.1-405b", 8192, 405853388800ull, "Llama 3.1 405B: 405,853,388,800 (HF meta-llama/Llama-3.1-405B)",
              SHAPE(126, 16384, 128, 8, 53248, LLAMA3_V, 131072), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0,
              LLAMA3_1_SCALING(8.0)),
    /* mistralai/Mistral-7B-v0.1: 4096, 14336, 32, 32, 8, 32000, 32768, 1e-05, rope_theta 10000.0,
     * sliding_window 4096 on every layer; the default context is the 8192 it trained at (Jiang et al.
     * 2023, Table 1: window_size 4096, context_len 8192) */
    LLAMA_ROW("mistral-7b", 8192, 7241732096ull, "Mistral 7B v0.1: 7,241,732,096 (HF mistralai/Mistral-7B-v0.1)",
              SHAPE(32, 4096, 32, 8, 14336, LLAMA2_V, 32768), .rms_norm_eps = 1e-5f, .rope_theta = 10000.0,
              .sliding_window = 4096),
    /* The rows below: each shape is the config.json typed in tests/model/hf_published_configs.h (whose
     * source each row there names); the default context is shs_hf_config_context's rule on that file
     * (max_position_embeddings, or the pre-training context of Llama 3.1's rope_scaling). Published
     * counts exact where the Hub states them, else as the model card rounds them (published_unit). */
    /* meta-llama/Llama-3.1-8B: Llama 3 8B's shape with rope_scaling llama3 factor 8, 131072 positions */
    LLAMA_ROW("llama3.1-8b", 8192, 8030261248ull, "Llama 3.1 8B: 8,030,261,248 (HF meta-llama/Llama-3.1-8B)",
              SHAPE(32, 4096, 32, 8, 14336, LLAMA3_V, 131072), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0,
              LLAMA3_1_SCALING(8.0)),
    /* meta-llama/Llama-3.1-70B */
    LLAMA_ROW("llama3.1-70b", 8192, 70553706496ull, "Llama 3.1 70B: 70,553,706,496 (HF meta-llama/Llama-3.1-70B)",
              SHAPE(80, 8192, 64, 8, 28672, LLAMA3_V, 131072), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0,
              LLAMA3_1_SCALING(8.0)),
    /* meta-llama/Llama-3.2-1B: 2048, 8192, 16 layers, 32 heads, 8 kv heads (head_dim 64), tied, factor 32 */
    LLAMA_ROW("llama3.2-1b", 8192, 1235814400ull, "Llama 3.2 1B: 1,235,814,400 (HF meta-llama/Llama-3.2-1B)",
              SHAPE(16, 2048, 32, 8, 8192, LLAMA3_V, 131072), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0,
              LLAMA3_1_SCALING(32.0), .tie_word_embeddings = 1),
    /* meta-llama/Llama-3.2-3B: 3072, 8192, 28 layers, 24 heads, 8 kv heads (head_dim 128), tied */
    {"llama3.2-3b", {0, 0, 0, 8192, 0}, 3210000000ull, 10000000ull, "Llama 3.2 3B: 3.21B (model card)",
     SHS_ARCH_LLAMA, {SHAPE(28, 3072, 24, 8, 8192, LLAMA3_V, 131072), .rms_norm_eps = 1e-5f, .rope_theta = 500000.0,
                      LLAMA3_1_SCALING(32.0), .tie_word_embeddings = 1}},
    /* Qwen/Qwen2.5-7B: q/k/v biases, 131072 positions (use_sliding_window false) */
    LLAMA_ROW("qwen2.5-7b", 131072, 7615616512ull, "Qwen2.5 7B: 7,615,616,512 (HF Qwen/Qwen2.5-7B)",
              SHAPE(28, 3584, 28, 4, 18944, 152064, 131072), .rms_norm_eps = 1e-6f, .rope_theta = 1000000.0,
              .qkv_bias = 1),
    /* Qwen/Qwen3-0.6B: head_dim 128 over hidden 1024 / 16 heads, q/k head norms, tied */
    {"qwen3-0.6b", {0, 0, 0, 40960, 0}, 600000000ull, 100000000ull, "Qwen3 0.6B: 0.6B (model card)", SHS_ARCH_LLAMA,
     {SHAPE(28, 1024, 16, 8, 3072, 151936, 40960), .rms_norm_eps = 1e-6f, .rope_theta = 1000000.0, .head_dim = 128,
      .qk_norm = SHS_QK_NORM_HEAD, .tie_word_embeddings = 1}},
    /* google/gemma-2b: GeGLU, (1 + w) norms, scaled embedding, MQA with head_dim 256, tied */
    {"gemma-2b", {0, 0, 0, 8192, 0}, 2510000000ull, 10000000ull, "Gemma 2B: 2.51B (HF google/gemma-2b)", SHS_ARCH_LLAMA,
     {SHAPE(18, 2048, 8, 1, 16384, 256000, 8192), .rms_norm_eps = 1e-6f, .rope_theta = 10000.0,
      .act = SHS_LLAMA_ACT_GELU_TANH, .norm_plus_one = 1, .embed_scale = 1, .tie_word_embeddings = 1}},
    /* google/gemma-2-9b: four norms, soft caps 50 / 30, query_pre_attn_scalar 256, window 4096 on even layers */
    {"gemma2-9b", {0, 0, 0, 8192, 0}, 9240000000ull, 10000000ull, "Gemma 2 9B: 9.24B (HF google/gemma-2-9b)",
     SHS_ARCH_LLAMA,
     {SHAPE(42, 3584, 16, 8, 14336, 256000, 8192), .rms_norm_eps = 1e-6f, .rope_theta = 10000.0, .head_dim = 256,
      .act = SHS_LLAMA_ACT_GELU_TANH, .norms = 15, .norm_plus_one = 1, .embed_scale = 1, .tie_word_embeddings = 1,
      .query_pre_attn_scalar = 256, .attn_softcap = 50.0f, .final_softcap = 30.0f, .sliding_window = 4096,
      .window_pattern = 2}},
    /* google/gemma-2-27b: query_pre_attn_scalar 144 = hidden / heads, head_dim 128 */
    {"gemma2-27b", {0, 0, 0, 8192, 0}, 27200000000ull, 100000000ull, "Gemma 2 27B: 27.2B (HF google/gemma-2-27b)",
     SHS_ARCH_LLAMA,
     {SHAPE(46, 4608, 32, 16, 36864, 256000, 8192), .rms_norm_eps = 1e-6f, .rope_theta = 10000.0, .head_dim = 128,
      .act = SHS_LLAMA_ACT_GELU_TANH, .norms = 15, .norm_plus_one = 1, .embed_scale = 1, .tie_word_embeddings = 1,
      .query_pre_attn_scalar = 144, .attn_softcap = 50.0f, .final_softcap = 30.0f, .sliding_window = 4096,
      .window_pattern = 2}},
    /* google/gemma-3-1b-it: q/k head norms, window 512 but on every 6th layer, rope_local_base_freq 10000 */
    {"gemma3-1b", {0, 0, 0, 32768, 0}, 1000000000ull, 100000000ull, "Gemma 3 1B: 1B (model card)", SHS_ARCH_LLAMA,
     {SHAPE(26, 1152, 4, 1, 6912, 262144, 32768), .rms_norm_eps = 1e-6f, .rope_theta = 1000000.0, .head_dim = 256,
      .act = SHS_LLAMA_ACT_GELU_TANH, .norms = 15, .qk_norm = SHS_QK_NORM_HEAD, .norm_plus_one = 1,
      .embed_scale = 1, .tie_word_embeddings = 1, .query_pre_attn_scalar = 256, .sliding_window = 512,
      .window_pattern = 6, .rope_local_theta = 10000.0}},
    /* microsoft/Phi-3-mini-4k-instruct: fused qkv_proj / gate_up_proj, a window of 2047 on every layer */
    {"phi3-mini", {0, 0, 0, 4096, 0}, 3800000000ull, 100000000ull, "Phi-3 mini 4k: 3.8B (model card)", SHS_ARCH_LLAMA,
     {SHAPE(32, 3072, 32, 32, 8192, 32064, 4096), .rms_norm_eps = 1e-5f, .rope_theta = 10000.0,
      .names = SHS_LLAMA_NAMES_PHI3, .sliding_window = 2047}},
    /* allenai/OLMo-2-1124-7B: norms after attention and MLP, q/k norms over the whole projections */
    {"olmo2-7b", {0, 0, 0, 4096, 0}, 7300000000ull, 100000000ull, "OLMo 2 7B: 7.3B (HF allenai/OLMo-2-1124-7B)",
     SHS_ARCH_LLAMA,
     {SHAPE(32, 4096, 32, 32, 11008, 100352, 4096), .rms_norm_eps = 1e-6f, .rope_theta = 500000.0,
      .norms = SHS_LLAMA_NORM_ATTN_OUT | SHS_LLAMA_NORM_MLP_OUT, .qk_norm = SHS_QK_NORM_ALL}},
    /* allenai/OLMo-2-1124-13B */
    {"olmo2-13b", {0, 0, 0, 4096, 0}, 13700000000ull, 100000000ull, "OLMo 2 13B: 13.7B (HF allenai/OLMo-2-1124-13B)",
     SHS_ARCH_LLAMA,
     {SHAPE(40, 5120, 40, 40, 13824, 100352, 4096), .rms_norm_eps = 1e-6f, .rope_theta = 500000.0,
      .norms = SHS_LLAMA_NORM_ATTN_OUT | SHS_LLAMA_NORM_MLP_OUT, .qk_norm = SHS_QK_NORM_ALL}},
    /* internlm/internlm2_5-7b-chat: wqkv grouped per key/value head, rope_scaling dynamic 2.0 */
    {"internlm2.5-7b", {0, 0, 0, 32768, 0}, 7740000000ull, 10000000ull, "InternLM2.5 7B: 7.74B (HF internlm2_5-7b-chat)",
     SHS_ARCH_LLAMA,
     {SHAPE(32, 4096, 32, 8, 14336, 92544, 32768), .rms_norm_eps = 1e-5f, .rope_theta = 1000000.0,
      .rope_scaling = {.kind = SHS_ROPE_SCALING_DYNAMIC, .factor = 2.0}, .names = SHS_LLAMA_NAMES_INTERNLM2}},
    /* HuggingFaceTB/SmolLM2-360M: tied, 15 heads of 64 */
    {"smollm2-360m", {0, 0, 0, 8192, 0}, 362000000ull, 1000000ull, "SmolLM2 360M: 362M (HF HuggingFaceTB/SmolLM2-360M)",
     SHS_ARCH_LLAMA, {SHAPE(32, 960, 15, 5, 2560, 49152, 8192), .rms_norm_eps = 1e-5f, .rope_theta = 100000.0,
                      .tie_word_embeddings = 1}},
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
