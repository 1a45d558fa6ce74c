/* hf_config.h - a Hugging Face transformers config.json as a shardsim model
 * shape.
 *
 * What it is: a reader of the config.json that sits beside a model's
 * weights on the Hub, through jansson, for the dense decoders of the
 * Llama architecture (llama.h) - model_type "llama", "mistral", "qwen2",
 * "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo2" and
 * "internlm2" - and "gpt2" (gpt.h); model_type exactly as transformers'
 * AutoConfig matches it (lower case). Every key of the file is either taken
 * into the shape, checked against what shardsim models and refused by name
 * when it would change the numbers, or accepted as changing nothing
 * shardsim computes. An unknown key is refused by name too: nothing is
 * silently ignored. A shape whose keys contradict each other (a head count
 * that does not divide hidden_size with no head_dim, windowed layers with
 * no window, two spellings of one key disagreeing) is refused naming the
 * keys. Mixtures of experts (mixtral, qwen2_moe, qwen3_moe, deepseek_v2,
 * deepseek_v3, olmoe, phimoe, dbrx, ...) are refused by name: they need
 * expert parallelism. The multimodal "gemma3" is refused pointing at its
 * text model, gemma3_text.
 * Accepted as not changing the numbers (the rule):
 *   - every key starting with '_': transformers' private bookkeeping;
 *   - token ids, architectures, model_type, transformers_version,
 *     tokenizer_class, torch_dtype/dtype (read as the param dtype), the
 *     inference cache (use_cache, output_past, cache_implementation),
 *     output switches, gradient_checkpointing, initializer_range (shardsim
 *     initializes as llama.h / gpt.h say), the classification heads'
 *     id2label / label2id / summary_*, task_specific_params, remote-code
 *     pointers (auto_map), transformers.js's settings
 *     (transformers.js_config), InternLM2's attn_implementation, nanotron's
 *     is_llama_config;
 *   - keys whose value here is what shardsim computes: pretraining_tp (any
 *     value: HF's LlamaForCausalLM then slices q/k/v/o, the MLP and the head
 *     into that many matmuls and adds the partial sums, the same function
 *     in another summation order; shardsim sums each output in one chain
 *     whatever the value, as with 1; said in `notes`), rope_interleaved
 *     false (nanotron's; transformers rotates halves), hidden_act for gemma
 *     (transformers' Gemma ignores it for hidden_activation, PR 29402), a
 *     sliding_window at least max_position_embeddings (no position can
 *     leave it; in `notes`), rope_scaling "dynamic" (NTK scaling changes
 *     theta only past max_position_embeddings, which no run reaches), Phi's
 *     full_attn_mod 1 and interpolate_factor 1 (read by Microsoft's remote
 *     code only), and the checked keys below.
 * What it is not: a tokenizer or weight loader, or the whole of
 * PretrainedConfig.
 *
 * The Llama family. Required: hidden_size, num_hidden_layers,
 * num_attention_heads, intermediate_size, vocab_size,
 * max_position_embeddings. With transformers' defaults when absent:
 * num_key_value_heads (= num_attention_heads), rms_norm_eps (1e-6; olmo2
 * 1e-5), rope_theta (10000; gemma3_text 1e6), tie_word_embeddings (false;
 * gemma* true), head_dim (C / NH; qwen3 128, gemma* 256), rope_scaling
 * (null; llama3, linear, dynamic, and phi3's longrope/su taken, yarn and
 * others refused by name), sliding_window (mistral 4096, gemma2 4096,
 * gemma3_text 4096; qwen2/qwen3 only with use_sliding_window). Checked:
 * hidden_act "silu" (gemma*: hidden_activation "gelu_pytorch_tanh"),
 * attention_dropout 0, mlp_bias false, attention_bias (llama, qwen3, gemma*,
 * olmo2: q/k/v/o biases; phi3: false), use_mrope false.
 * Per family, what differs from Llama (hf_config_llama.c, with the
 * transformers modules that define it):
 *   mistral   a window of sliding_window keys on every layer
 *   qwen2     q/k/v biases; use_sliding_window: windows on the layers from
 *             max_window_layers on (layer_types, when given, says which)
 *   qwen3     q/k RMSNorms per head; attention_bias; windows as qwen2
 *   gemma     GeGLU (gelu_pytorch_tanh), (1 + w) RMSNorms, embeddings times
 *             sqrt(hidden_size), tied head
 *   gemma2    + post-attention and pre/post-feedforward norms, score and
 *             logit soft caps (attn_logit_softcapping,
 *             final_logit_softcapping), query_pre_attn_scalar, a window on
 *             even layers (sliding_window_size, older, must agree)
 *   gemma3_text  gemma2's layer with q/k RMSNorms per head, windows on all
 *             layers but every sliding_window_pattern-th (or layer_types),
 *             rope_local_base_freq on windowed layers, rope_theta (and
 *             rope_scaling) on the others
 *   phi3      fused qkv_proj and gate_up_proj, longrope with the top-level
 *             original_max_position_embeddings, partial_rotary_factor, a
 *             window on every layer when sliding_window is set; resid_pdrop
 *             and embd_pdrop are training settings (`not_applied` when > 0)
 *   olmo2     norms after attention and MLP only, q/k RMSNorms over the
 *             whole projections
 *   internlm2 fused wqkv grouped per key/value head, bias (wqkv and wo),
 *             its own tensor names; head_dim must be hidden_size / heads
 * gpt2 (GPT2Config keys): n_embd, n_layer, n_head, vocab_size, n_positions
 *   (or n_ctx) required; activation_function "gelu_new", layer_norm_epsilon
 *   1e-5, n_inner null or 4 n_embd, tie_word_embeddings true,
 *   scale_attn_weights true, scale_attn_by_inverse_layer_idx and
 *   reorder_and_upcast_attn false; the dropouts are training settings
 *   (--dropout): listed in not_applied.
 * torch_dtype (or its newer name dtype): "float32", "bfloat16", "float16";
 *   absent: SHS_DTYPE_DEFAULT.
 */
#ifndef SHARDSIM_HF_CONFIG_H
#define SHARDSIM_HF_CONFIG_H

#include <stddef.h>

#include "shardsim/dtype.h"
#include "shardsim/gpt.h"
#include "shardsim/llama.h"
#include "shardsim/status.h"
#include "shardsim/train.h"

typedef struct {
    char model_type[16];       /* "llama", ..., "gemma3_text", "internlm2", "gpt2" */
    shs_model_arch_t arch;     /* SHS_ARCH_LLAMA or SHS_ARCH_GPT (gpt2) */
    shs_llama_config_t llama;  /* SHS_ARCH_LLAMA: the shape (validated: shs_llama_config_validate) */
    shs_gpt_config_t gpt;      /* SHS_ARCH_GPT: the shape (context = n_positions); SHS_ARCH_LLAMA:
                                * only context, set to shs_hf_config_context's value */
    shs_dtype_t torch_dtype;   /* SHS_F32, SHS_BF16, SHS_F16; SHS_DTYPE_DEFAULT when not given */
    char not_applied[160];     /* keys present that shardsim does not apply (dropouts when nonzero),
                                * "key value" separated by ", "; "" none */
    char notes[256];           /* keys accepted because their value computes the same here (above),
                                * "key value: why" separated by "; "; "" none */
} shs_hf_config_t;

/* Parse config.json text (len bytes; `name` names it in messages, e.g. the
 * path). Errors: SHS_PARSE naming `name` and the key (malformed JSON with
 * its line, unknown or mixture-of-experts model_type, a missing required
 * key, a wrong type, a value shardsim does not model, keys that contradict
 * each other, a number too large for an int or out of an f32's range, an
 * unknown key); SHS_INVALID_ARG from validating the shape (naming the HF
 * key); SHS_UNSUPPORTED when built without jansson (features.h's words). */
shs_status_t shs_hf_config_parse(const char *text, size_t len, const char *name, shs_hf_config_t *out);

/* Read and parse the file at `path`. Errors: as shs_hf_config_parse, and
 * SHS_IO naming the path. */
shs_status_t shs_hf_config_load(const char *path, shs_hf_config_t *out);

/* The context a run takes by default: gpt2 n_positions; the Llama family
 * max_position_embeddings, or when shorter the pre-training context of a
 * long-context model: rope_scaling's original_max_position_embeddings
 * (Llama 3.1: 8192, where max_position_embeddings is the 131072 of the
 * long-context stage) or Phi-3's original_max_position_embeddings (4096
 * under longrope). A run may ask for more, up to max_position_embeddings. */
int shs_hf_config_context(const shs_hf_config_t *cfg);

/* The config.json key shs_hf_config_context's value comes from:
 * "n_positions", "max_position_embeddings",
 * "rope_scaling.original_max_position_embeddings" or
 * "original_max_position_embeddings". */
const char *shs_hf_config_context_key(const shs_hf_config_t *cfg);

#endif
