/* hf_config.h - a Hugging Face transformers config.json as a shardsim model
 * shape.
 *
 * What it is: a reader of the config.json that sits beside a model's
 * weights on the Hub, for model_type "llama", "mistral", "qwen2" (Llama
 * architecture: llama.h) and "gpt2" (gpt.h), through jansson (model_type
 * exactly as transformers' AutoConfig matches it: lower case). Every key
 * of the file is either taken into the shape, checked against what
 * shardsim models and refused by name when it would change the numbers, or
 * accepted as changing nothing shardsim computes. An unknown key is
 * refused by name too: nothing is silently ignored.
 * Accepted as not changing the numbers (the rule):
 *   - every key starting with '_': transformers' private bookkeeping
 *     (_name_or_path, _attn_implementation, _attn_implementation_autoset,
 *     _commit_hash, _num_labels, ...), never a hyperparameter;
 *   - token ids (bos/eos/pad/sep/decoder_start_token_id), architectures,
 *     model_type, transformers_version, tokenizer_class, torch_dtype/dtype
 *     (read as the param dtype), the inference cache (use_cache and its
 *     older name output_past), output switches (return_dict,
 *     output_hidden_states, output_attentions), gradient_checkpointing
 *     (recomputation gives the same numbers), initializer_range (shardsim
 *     initializes as llama.h / gpt.h say), the classification heads'
 *     id2label / label2id / summary_*, task_specific_params;
 *   - keys whose value here is the one shardsim models: layer_types when
 *     every entry is "full_attention" (else refused naming the layer),
 *     gpt2's n_special 0 with predict_special_tokens (moot without special
 *     tokens), and the checked keys below.
 * Everything else (generation settings, quantization_config, the newer
 * rope_parameters form, ...) is refused.
 * What it is not: a tokenizer or weight loader, or the whole of
 * PretrainedConfig.
 *
 * Llama family (LlamaConfig / MistralConfig / Qwen2Config keys):
 *   required: hidden_size, num_hidden_layers, num_attention_heads,
 *     intermediate_size, vocab_size, max_position_embeddings
 *   with HF's defaults when absent: num_key_value_heads (= num_attention_heads,
 *     as the HF configs do), rms_norm_eps (1e-6), rope_theta (10000),
 *     tie_word_embeddings (false), rope_scaling (null)
 *   checked: hidden_act "silu"; attention_bias and mlp_bias false (llama);
 *     head_dim absent, null or hidden_size / num_attention_heads;
 *     pretraining_tp 1; attention_dropout 0; rope_scaling null or rope_type
 *     (or the older "type") "llama3" with factor, low_freq_factor,
 *     high_freq_factor, original_max_position_embeddings (other rope types,
 *     e.g. linear, dynamic, yarn, are refused by name)
 *   mistral: sliding_window (null or a window W) is kept in sliding_window:
 *     a run is exact only for contexts <= W (shardsim's attention has no
 *     window), which the caller checks
 *   qwen2: q/k/v projections have biases (qkv_bias = 1), the one way its
 *     decoder differs from Llama's; use_sliding_window true and use_mrope
 *     true are refused; sliding_window and max_window_layers only apply
 *     with use_sliding_window, so they are accepted when it is false
 * gpt2 (GPT2Config keys): n_embd, n_layer, n_head, vocab_size, n_positions
 *   (or n_ctx) required; activation_function "gelu_new" (GELU's tanh form,
 *   shardsim's), layer_norm_epsilon 1e-5, n_inner null or 4 n_embd,
 *   tie_word_embeddings true, scale_attn_weights true,
 *   scale_attn_by_inverse_layer_idx and reorder_and_upcast_attn false. The
 *   dropout probabilities (attn_pdrop, embd_pdrop, resid_pdrop) are training
 *   settings that shardsim takes from --dropout: they are listed in
 *   not_applied.
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
    char model_type[16];       /* "llama", "mistral", "qwen2" or "gpt2" */
    shs_model_arch_t arch;     /* SHS_ARCH_LLAMA or SHS_ARCH_GPT (gpt2) */
    shs_llama_config_t llama;  /* SHS_ARCH_LLAMA: the shape (validated: shs_llama_config_validate) */
    shs_gpt_config_t gpt;      /* SHS_ARCH_GPT: the shape (context = n_positions); SHS_ARCH_LLAMA:
                                * only context, set to shs_hf_config_context's value */
    shs_dtype_t torch_dtype;   /* SHS_F32, SHS_BF16, SHS_F16; SHS_DTYPE_DEFAULT when not given */
    int sliding_window;        /* mistral: the attention window W when one is set; 0 none */
    char not_applied[160];     /* keys present that shardsim does not apply (the gpt2 dropouts
                                * when nonzero), "key value" separated by ", "; "" none */
} shs_hf_config_t;

/* Parse config.json text (len bytes; `name` names it in messages, e.g. the
 * path). Errors: SHS_PARSE naming `name` and the key (malformed JSON with
 * its line, unknown model_type, a missing required key, a wrong type, a
 * value shardsim does not model, a number too large for an int or out of
 * an f32's range, an unknown key); SHS_INVALID_ARG from
 * validating the shape (naming the HF key); SHS_UNSUPPORTED when built
 * without jansson (features.h's words). */
shs_status_t shs_hf_config_parse(const char *text, size_t len, const char *name, shs_hf_config_t *out);

/* Read and parse the file at `path`. Errors: as shs_hf_config_parse, and
 * SHS_IO naming the path. */
shs_status_t shs_hf_config_load(const char *path, shs_hf_config_t *out);

/* The context a run takes by default: gpt2 n_positions; the Llama family
 * max_position_embeddings, or when shorter rope_scaling's
 * original_max_position_embeddings (Llama 3.1: the pre-training context,
 * 8192, where max_position_embeddings is the 131072 of the long-context
 * stage) or the sliding window. A run may ask for more, up to
 * max_position_embeddings (and the window). */
int shs_hf_config_context(const shs_hf_config_t *cfg);

/* The config.json key shs_hf_config_context's value comes from:
 * "n_positions", "max_position_embeddings",
 * "rope_scaling.original_max_position_embeddings" or "sliding_window". */
const char *shs_hf_config_context_key(const shs_hf_config_t *cfg);

#endif
