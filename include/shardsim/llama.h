/* llama.h - a Llama-family decoder written against the device interface.
 *
 * What it is: the config of a Llama-architecture model (Touvron et al.
 * 2023; Hugging Face LlamaConfig / MistralConfig / Qwen2Config names), its
 * parameter layout in wrap units, deterministic initialization, and forward
 * / backward passes that get every unit's parameters and gradients from a
 * strategy and do all math through device.h: token embedding (no position
 * embedding); L decoder layers of pre-RMSNorm grouped-query causal
 * attention with rotary position embeddings and a SwiGLU MLP, with
 * residuals; a final RMSNorm; an LM head, untied (its own weight) or tied
 * to the embedding. No biases, except q/k/v biases for Qwen2.
 * What it is not: a tokenizer (shardsim trains on byte tokens: a training
 * config's vocabulary must be >= 256), the GPT (gpt.h), or a config-file
 * reader (hf_config.h).
 *
 * Legend: B sequences per rank, T context, C hidden_size, NH heads, NKV
 * key/value heads, HD = C / NH head dim, I intermediate_size, L layers,
 * V vocabulary.
 *
 * Wrap units, in order (FSDP transformer_auto_wrap_policy on the decoder
 * layer, with the embedding and the head as their own units):
 *   unit 0        "embed"   embed_tokens (V,C)
 *   unit 1..L     "layerI"  input_layernorm (C), q_proj (NH*HD,C),
 *                           k_proj (NKV*HD,C), v_proj (NKV*HD,C),
 *                           [q_bias (NH*HD), k_bias (NKV*HD), v_bias (NKV*HD)],
 *                           o_proj (C,NH*HD), post_attention_layernorm (C),
 *                           gate_proj (I,C), up_proj (I,C), down_proj (C,I)
 *   unit L+1      "norm"    norm (C)
 *   unit L+2      "lm_head" lm_head (V,C)          (untied only)
 * Tied, the head reuses unit 0 (as the GPT does).
 */
#ifndef SHARDSIM_LLAMA_H
#define SHARDSIM_LLAMA_H

#include <stdint.h>

#include "shardsim/device.h"
#include "shardsim/gpt.h"
#include "shardsim/layout.h"
#include "shardsim/model.h"
#include "shardsim/status.h"

typedef enum {
    SHS_ROPE_SCALING_NONE = 0,
    SHS_ROPE_SCALING_LLAMA3, /* HF rope_type "llama3" (Llama 3.1): factor, low_freq_factor,
                              * high_freq_factor, original_max_position_embeddings */
} shs_rope_scaling_kind_t;

typedef struct {
    shs_rope_scaling_kind_t kind;
    double factor;
    double low_freq_factor;
    double high_freq_factor;
    int original_max_position_embeddings;
} shs_rope_scaling_t;

typedef struct {
    int num_layers;          /* num_hidden_layers, L >= 1 */
    int hidden;              /* hidden_size, C >= 1 */
    int num_heads;           /* num_attention_heads, NH >= 1, divides C; HD = C/NH even */
    int num_kv_heads;        /* num_key_value_heads, NKV >= 1, divides NH */
    int intermediate;        /* intermediate_size, I >= 1 */
    int vocab;               /* vocab_size, V >= 1 */
    int max_position;        /* max_position_embeddings (the longest context it takes) */
    float rms_norm_eps;      /* rms_norm_eps, > 0 */
    double rope_theta;       /* rope_theta, > 0 */
    shs_rope_scaling_t rope_scaling;
    int tie_word_embeddings; /* 1: the head reuses embed_tokens */
    int qkv_bias;            /* 1: q/k/v projections have biases (Qwen2) */
} shs_llama_config_t;

/* Check a config: SHS_INVALID_ARG naming the field (HF's key name). */
shs_status_t shs_llama_config_validate(const shs_llama_config_t *cfg);

/* Parameters, from the layout above: per layer 2C + C*NH*HD*2 + 2*C*NKV*HD
 * (+ NH*HD + 2*NKV*HD with qkv_bias) + 3*C*I; embed V*C; norm C; head V*C
 * unless tied. */
uint64_t shs_llama_num_params(const shs_llama_config_t *cfg);

/* The RoPE inverse frequencies (HD/2 values): inv_freq[i] = 1 / theta^(2i/HD),
 * computed in f64 and rounded to f32, then rope_scaling applied as HF's
 * _compute_llama3_parameters does. */
void shs_llama_inv_freq(const shs_llama_config_t *cfg, float *inv_freq);

/* Build the layout (units above). Init: weights N(0, 0.02) (HF
 * initializer_range), norms 1, biases 0. Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_llama_layout_create(shs_layout_t *layout, const shs_llama_config_t *cfg);

/* A Llama on `dev` for B sequences of T positions per rank, with its
 * activation buffers (category ACTIVATIONS). `ex` as for the GPT (gpt.h):
 * recompute, attention eager / flash, autocast and param_dtype are
 * honoured; dropout is refused (SHS_UNSUPPORTED, naming it) unless zero.
 * Recompute: full keeps each layer's output; Megatron's selective drops
 * the eager probabilities; op-level SAC keeps the layer output, the
 * outputs of the 1st, 3rd, 5th and 7th bias-free projection (q before
 * RoPE, v, gate, down_proj; with q/k/v biases, which are not counted:
 * o_proj and up) and with flash the attention output and log-sum-exp, and
 * recomputes the rest from the layer input (not the saved projections, nor
 * down_proj and the residual after them); EVERY_N as the GPT.
 *
 * Autocast (ex->autocast bf16 or f16 = A; torch.autocast over Hugging
 * Face's LlamaForCausalLM, as gpt.h's emulation and its op lists: linear
 * in A from A-cast inputs with f32 accumulation; RMSNorm, softmax and the
 * loss in f32; SiLU and products of A tensors in A). R, the residual
 * stream's dtype: A when ex->param_dtype is A (the whole model in A, as
 * FSDP MixedPrecision runs it), else f32 (torch's promotion of f32 + A).
 * What each layer stores for backward, as the op that saved it does:
 *   RMSNorm (a fused kernel, f32 inside): its input (the layer input or
 *     res2, R) and rstd (f32); its output is stored as the A cast the
 *     following linears read, one copy per linear when R is f32 (autocast
 *     casts an activation anew for each op: 3 for q/k/v, 2 for gate/up),
 *     one shared copy when R is A;
 *   q and k after RoPE, and v (A: the attention inputs). RoPE is computed
 *     in f32 from the A projection and rounded to A once (HF with an f32
 *     model: q*cos + rotate_half(q)*sin in f32, then the attention's cast;
 *     torchtitan: complex product in f32, type_as once);
 *   eager: the probabilities, computed in f32 and stored in A (a fused
 *     scale-mask-softmax, as the GPT; the output comes from the f32 ones);
 *     flash: the log-sum-exp per row (f32);
 *   the attention output (A, the o_proj input);
 *   res2 and the layer output (R);
 *   gate and up projections and SwiGLU's output (A; a fused SwiGLU, as
 *     the f32 model: silu(gate)*up in f32 rounded once).
 * The final norm's output (A), f32 logits holding A-rounded values, f32
 * softmax and losses. Matmul outputs that are not stored (o_proj,
 * down_proj) are rounded to A before their residual add. Weights and
 * biases are rounded to A at each use when the parameters are not A.
 * Gradients are not rounded (f32 throughout backward), as for the GPT.
 * Known differences from torch eager: unfused SiLU-then-mul keeps
 * silu(gate) too (+A sbI per layer) and rounds it before the product; HF's
 * eager softmax keeps f32 probabilities besides their A cast; torchtitan
 * repeats k and v to NH heads before SDPA (its saved k, v are A sbh each,
 * not A sb kv).
 * Errors: SHS_OUT_OF_MEMORY, SHS_INVALID_ARG, SHS_UNSUPPORTED (the device
 * lacks SHS_KERNELS_LLAMA: the CUDA backend). */
shs_status_t shs_llama_create(shs_model_t **out, const shs_layout_t *layout, const shs_llama_config_t *cfg,
                              shs_device_t *dev, int B, int T, const shs_gpt_exec_t *ex);

#endif
