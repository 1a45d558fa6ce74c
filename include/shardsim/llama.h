/* llama.h - a Llama-family decoder written against the device interface.
 *
 * What it is: the config of a Llama-architecture model (Touvron et al.
 * 2023) and of the dense decoders built from the same parts (Hugging Face
 * LlamaConfig / MistralConfig / Qwen2Config / Qwen3Config / GemmaConfig /
 * Gemma2Config / Gemma3TextConfig / Phi3Config / Olmo2Config / InternLM2's
 * config names), its parameter layout in wrap units, deterministic
 * initialization, and forward / backward passes that get every unit's
 * parameters and gradients from a strategy and do all math through
 * device.h: token embedding (no position embedding; Gemma scales it by
 * sqrt(C)); L decoder layers of grouped-query causal attention with rotary
 * position embeddings (full or partial, optionally per-layer sliding
 * windows, soft-capped scores, q/k RMSNorms) and a gated MLP (SwiGLU, or
 * GeGLU with GELU's tanh form), with residuals and RMSNorms before and/or
 * after each branch; a final RMSNorm; an LM head, untied (its own weight)
 * or tied to the embedding, optionally soft-capped. Biases only where the
 * family has them (Qwen2's q/k/v, attention_bias's q/k/v/o).
 * What it is not: a tokenizer (shardsim trains on byte tokens: a training
 * config's vocabulary must be >= 256), the GPT (gpt.h), a mixture of
 * experts, or a config-file reader (hf_config.h).
 *
 * Legend: B sequences per rank, T context, C hidden_size, NH heads, NKV
 * key/value heads, HD head dim (head_dim, or C / NH), QD = NH*HD, KVD =
 * NKV*HD, R rotary dim, I intermediate_size, L layers, V vocabulary.
 *
 * Wrap units, in order (FSDP transformer_auto_wrap_policy on the decoder
 * layer, with the embedding and the head as their own units):
 *   unit 0        "embed"   embed_tokens (V,C)
 *   unit 1..L     "layerI"  the layer's tensors (shs_llama_layout_create),
 *                           for Llama: input_layernorm (C), q_proj (QD,C),
 *                           k_proj (KVD,C), v_proj (KVD,C), [q/k/v biases],
 *                           o_proj (C,QD), post_attention_layernorm (C),
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
    SHS_ROPE_SCALING_LLAMA3,   /* HF rope_type "llama3" (Llama 3.1): factor, low_freq_factor,
                                * high_freq_factor, original_max_position_embeddings */
    SHS_ROPE_SCALING_LINEAR,   /* HF "linear": every inverse frequency divided by factor */
    SHS_ROPE_SCALING_LONGROPE, /* HF "longrope" (Phi-3's "su"): inv_freq[i] = 1 / (ext[i] theta^(2i/R)),
                                * ext = short_factor, or long_factor when a batch's positions reach past
                                * original_max_position_embeddings; cos and sin times attention_factor */
    SHS_ROPE_SCALING_DYNAMIC,  /* HF "dynamic" NTK: changes theta only for positions past
                                * max_position_embeddings, which no run reaches: the plain RoPE */
} shs_rope_scaling_kind_t;

#define SHS_LONGROPE_MAX_FACTORS 256 /* short_factor / long_factor entries (R / 2) */

typedef struct {
    shs_rope_scaling_kind_t kind;
    double factor;                    /* llama3, linear, dynamic */
    double low_freq_factor;           /* llama3 */
    double high_freq_factor;          /* llama3 */
    int original_max_position_embeddings; /* llama3, longrope (Phi-3's top-level key) */
    double attention_factor;          /* longrope: the cos/sin scale (HF's default:
                                       * sqrt(1 + ln(f) / ln(original)), f = max_position / original,
                                       * 1 when f <= 1) */
    int num_factors;                  /* longrope: entries of each list, R / 2 */
    float short_factor[SHS_LONGROPE_MAX_FACTORS], long_factor[SHS_LONGROPE_MAX_FACTORS]; /* longrope */
} shs_rope_scaling_t;

/* The gated MLP's activation on gate_proj: act(gate) * up. */
typedef enum {
    SHS_LLAMA_ACT_SILU = 0,  /* SwiGLU (hidden_act "silu") */
    SHS_LLAMA_ACT_GELU_TANH, /* GeGLU with GELU's tanh form (Gemma's "gelu_pytorch_tanh") */
} shs_llama_act_t;

/* Where a decoder layer has RMSNorms (bits of shs_llama_config_t.norms). */
enum {
    SHS_LLAMA_NORM_ATTN_IN = 1,  /* on the attention's input (Llama's input_layernorm) */
    SHS_LLAMA_NORM_ATTN_OUT = 2, /* on its output before the residual add (Gemma 2, OLMo 2:
                                  * post_attention_layernorm) */
    SHS_LLAMA_NORM_MLP_IN = 4,   /* on the MLP's input (Llama's post_attention_layernorm,
                                  * Gemma 2's pre_feedforward_layernorm) */
    SHS_LLAMA_NORM_MLP_OUT = 8,  /* on its output (post_feedforward_layernorm) */
};
#define SHS_LLAMA_NORMS_PRE (SHS_LLAMA_NORM_ATTN_IN | SHS_LLAMA_NORM_MLP_IN) /* Llama's, the 0 value */

typedef enum {
    SHS_QK_NORM_NONE = 0,
    SHS_QK_NORM_HEAD, /* RMSNorm of each head's HD channels of q and k, weights (HD) each, before RoPE
                       * (Qwen3, Gemma 3) */
    SHS_QK_NORM_ALL,  /* RMSNorm of the whole q (QD) and k (KVD) projections, weights (QD), (KVD)
                       * (OLMo 2) */
} shs_qk_norm_t;

/* Tensor names and the projections' layout. */
typedef enum {
    SHS_LLAMA_NAMES_HF = 0, /* model.layers.N.self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, ... */
    SHS_LLAMA_NAMES_PHI3,   /* self_attn.qkv_proj (QD+2KVD,C): rows q, k, v; mlp.gate_up_proj (2I,C):
                             * rows gate, up */
    SHS_LLAMA_NAMES_INTERNLM2, /* model.tok_embeddings, attention.wqkv (QD+2KVD,C) with rows grouped per
                                * key/value head (its NH/NKV query heads, then its key, then its value),
                                * attention.wo, attention_norm, ffn_norm, feed_forward.w1 (gate),
                                * w3 (up), w2 (down), output */
} shs_llama_names_t;

typedef struct {
    int num_layers;          /* num_hidden_layers, L >= 1 */
    int hidden;              /* hidden_size, C >= 1 */
    int num_heads;           /* num_attention_heads, NH >= 1 */
    int num_kv_heads;        /* num_key_value_heads, NKV >= 1, divides NH */
    int intermediate;        /* intermediate_size, I >= 1 */
    int vocab;               /* vocab_size, V >= 1 */
    int max_position;        /* max_position_embeddings (the longest context it takes) */
    float rms_norm_eps;      /* rms_norm_eps, > 0 */
    double rope_theta;       /* rope_theta, > 0 */
    shs_rope_scaling_t rope_scaling;
    int tie_word_embeddings; /* 1: the head reuses embed_tokens */
    int qkv_bias;            /* 1: q/k/v projections have biases (Qwen2) */
    /* the decoder extensions; the zero value of each is Llama's */
    int head_dim;            /* HD; 0: C / NH (which must divide) */
    int rotary_dim;          /* R, even, <= HD; 0: HD (partial_rotary_factor) */
    int attention_bias;      /* 1: q/k/v/o projections have biases (attention_bias, InternLM2's bias) */
    shs_llama_act_t act;
    unsigned norms;          /* SHS_LLAMA_NORM_* bits; 0: SHS_LLAMA_NORMS_PRE */
    shs_qk_norm_t qk_norm;
    int norm_plus_one;       /* 1: every RMSNorm multiplies by (1 + w), w initialized 0 (Gemma) */
    int embed_scale;         /* 1: embeddings times sqrt(C) (Gemma), the factor rounded to the
                              * residual stream's dtype (shs_llama_embed_scale) */
    double query_pre_attn_scalar; /* > 0: scores scaled by its ^-1/2 (Gemma 2/3); 0: HD^-1/2 */
    float attn_softcap;      /* > 0: scores soft-capped (Gemma 2's attn_logit_softcapping) */
    float final_softcap;     /* > 0: logits soft-capped (final_logit_softcapping) */
    int sliding_window;      /* W > 0: windowed layers attend the keys t2 > t - W; 0: none */
    int window_pattern;      /* which layers are windowed (with W): 0 every layer from window_first_layer
                              * on; P >= 2: layer l iff (l + 1) % P != 0 (Gemma 2: 2, Gemma 3: 6) */
    int window_first_layer;  /* pattern 0: layers below it attend fully (Qwen2's max_window_layers) */
    double rope_local_theta; /* > 0: windowed layers' RoPE theta, unscaled (Gemma 3's rope_local_base_freq) */
    shs_llama_names_t names;
} shs_llama_config_t;

/* Check a config: SHS_INVALID_ARG naming the field (HF's key name). */
shs_status_t shs_llama_config_validate(const shs_llama_config_t *cfg);

/* HD, R and the norm bits with their defaults applied. */
int shs_llama_head_dim(const shs_llama_config_t *cfg);
int shs_llama_rotary_dim(const shs_llama_config_t *cfg);
unsigned shs_llama_norms(const shs_llama_config_t *cfg);
/* The window of layer l (0 <= l < L): sliding_window if the layer is
 * windowed, else 0. */
int shs_llama_layer_window(const shs_llama_config_t *cfg, int l);

/* The attention term's width per token for context T: the sum over layers
 * of QD = NH*HD times the keys a query reads (T, or min(T, W) on a windowed
 * layer); L C T for a plain Llama. */
double shs_llama_attention_width(const shs_llama_config_t *cfg, int T);

/* Parameters, from the layout: per layer C per RMSNorm, C*QD + 2*C*KVD
 * (q, k, v) + QD*C (o) + 3*C*I (gate, up, down), QD + 2*KVD q/k/v biases
 * (qkv_bias or attention_bias) and C o bias (attention_bias), q/k norms
 * 2*HD (per head) or QD + KVD (whole); embed V*C; norm C; head V*C unless
 * tied. */
uint64_t shs_llama_num_params(const shs_llama_config_t *cfg);

/* Which RoPE frequencies shs_llama_inv_freq computes. */
typedef enum {
    SHS_ROPE_FREQ_GLOBAL = 0, /* rope_theta with rope_scaling (longrope: short_factor) */
    SHS_ROPE_FREQ_LONG,       /* longrope's long_factor */
    SHS_ROPE_FREQ_LOCAL,      /* rope_local_theta, unscaled (Gemma 3's windowed layers) */
} shs_rope_freq_t;

/* The RoPE inverse frequencies (R/2 values): inv_freq[i] = 1 / theta^(2i/R),
 * computed in f64 and rounded to f32, then rope_scaling applied as HF's
 * _compute_llama3_parameters, _compute_linear_scaling_rope_parameters,
 * _compute_longrope_parameters do (longrope: 1 / (ext[i] theta^(2i/R))). */
void shs_llama_inv_freq(const shs_llama_config_t *cfg, shs_rope_freq_t which, float *inv_freq);
/* The factor RoPE's cos and sin are multiplied by: longrope's
 * attention_factor (given, or HF's default), else 1. */
float shs_llama_rope_mscale(const shs_llama_config_t *cfg);

/* The embedding multiplier sqrt(C) as HF forms it: the f64 square root
 * rounded to f32, then to `dtype` (the embedding's dtype: Gemma's
 * normalizer is a tensor of hidden_states.dtype, so bf16 weights give
 * sqrt(3072) = 55.5). 1 without embed_scale. */
float shs_llama_embed_scale(const shs_llama_config_t *cfg, shs_dtype_t dtype);

/* The config's extensions over a plain Llama as "key=value" words
 * (e.g. " hd=256 act=gelu_tanh norms=15 ..."), "" for a plain Llama: what
 * a checkpoint's model line adds to identify the architecture. */
void shs_llama_describe_extras(const shs_llama_config_t *cfg, char *buf, size_t n);

/* Build the layout (units above). Init: weights N(0, 0.02) (HF
 * initializer_range), norms 1 (0 with norm_plus_one), biases 0. Errors:
 * SHS_INVALID_ARG, SHS_HOST_OOM. */
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
 * down_proj and the residual after them, unless an output norm follows
 * down_proj: then it and the norm run again); EVERY_N as the GPT. The
 * families count their own linears in forward order: Phi-3's qkv_proj and
 * gate_up_proj and InternLM2's wqkv are one each, a biased one (Qwen2's
 * q/k/v, attention_bias's q/k/v/o, InternLM2's bias) is not counted; a
 * saved projection that a norm reads (q/k before Qwen3's, Gemma 3's, OLMo
 * 2's q/k norms; o_proj and down_proj before Gemma 2/3's and OLMo 2's
 * output norms) is the norm's input, kept instead of recomputed.
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
 * The families' parts (HF's modeling files, where their modules cast):
 *   a branch without an input norm (OLMo 2) has its projections read A
 *     casts of the R input, stored as the norm outputs above (none when R
 *     is A: they read the input itself);
 *   q/k norms (Qwen3, Gemma 3, OLMo 2): their input, the A projection, and
 *     rstd (f32); the norm and RoPE run in f32 and round to A once, Gemma
 *     3's and OLMo 2's norm output rounded to A before RoPE too (their
 *     modules return the input's dtype; Qwen3's LlamaRMSNorm returns f32
 *     w times its rounded normalized input, not emulated);
 *   output norms (Gemma 2/3, OLMo 2: .to(input_dtype) / type_as): their
 *     input, o_proj's / down_proj's A output, and rstd; their output
 *     rounded to A before the residual add;
 *   GeGLU as SwiGLU (gelu_tanh(gate)*up in f32 rounded once); soft-capped
 *     scores inside the attention kernels (f32); soft-capped logits
 *     rounded to A again (the cap runs on the head's A output);
 *   the embedding times sqrt(C) rounded to R (HF Gemma's normalizer is a
 *     tensor of the embedding's dtype: shs_llama_embed_scale(cfg, R)).
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
