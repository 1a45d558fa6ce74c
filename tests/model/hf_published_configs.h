/* hf_published_configs.h - 40 config.json files of published dense
 * decoders (Llama 2 / 3 / 3.1 / 3.2, Code Llama, TinyLlama, Mistral, Qwen2 /
 * 2.5 / 3, Gemma 1 / 2 / 3, Phi-3 / 3.5 / 4-mini, OLMo 2, SmolLM / SmolLM2,
 * InternLM2 / 2.5, GPT-2), their keys typed from the sources named per row
 * (facts: key names and values; the deployment-only keys a transcription
 * added, mlc-llm's context_window_size / prefill_chunk_size /
 * attention_sink_size, left out), with the parameter count published for
 * each and its rounding. Not a test; included by
 * tests/model/test_hf_published.c. */
#ifndef SHARDSIM_TEST_HF_PUBLISHED_CONFIGS_H
#define SHARDSIM_TEST_HF_PUBLISHED_CONFIGS_H

#include <stdint.h>

#include "model/hf_llama3_8b_config.h"

typedef struct {
    const char *model;         /* the Hub repository */
    const char *source;        /* where its keys were read */
    uint64_t published;        /* the count published for it */
    uint64_t unit;             /* its rounding: 1 exact, 1e7 "7.25B", ... */
    const char *published_by;  /* where that count is published */
    const char *json;          /* the config.json text */
} hf_published_t;

static const char hf_pub_0[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 11008, "
    "\"max_position_embeddings\": 2048, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": 32, \"num_key_value_heads\": 32, \"pad_token_id\": 0, \"pretraining_tp\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"tie_word_embeddings\": false, \"torch_dtype\": \"float16\", "
    "\"transformers_version\": \"4.31.0.dev0\", \"use_cache\": true, \"vocab_size\": 32000}";

static const char hf_pub_1[] =
    "{\"_name_or_path\": \"meta-llama/Llama-2-13b-hf\", \"architectures\": [\"LlamaForCausalLM\"], "
    "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 5120, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 13824, \"max_position_embeddings\": 2048, "
    "\"model_type\": \"llama\", \"num_attention_heads\": 40, \"num_hidden_layers\": 40, \"num_key_value_heads\": 40, "
    "\"pad_token_id\": 0, \"pretraining_tp\": 2, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"float16\", \"transformers_version\": \"4.31.0.dev0\", "
    "\"use_cache\": true, \"vocab_size\": 32000}";

static const char hf_pub_2[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 8192, \"initializer_range\": 0.02, \"intermediate_size\": 28672, "
    "\"max_position_embeddings\": 2048, \"model_type\": \"llama\", \"num_attention_heads\": 64, "
    "\"num_hidden_layers\": 80, \"num_key_value_heads\": 8, \"pad_token_id\": 0, \"rms_norm_eps\": 1e-05, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"float16\", \"transformers_version\": \"4.31.0.dev0\", "
    "\"use_cache\": true, \"vocab_size\": 32000}";

static const char hf_pub_3[] =
    "{\"_name_or_path\": \"codellama/CodeLlama-7b-hf\", \"architectures\": [\"LlamaForCausalLM\"], "
    "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 4096, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 11008, \"max_position_embeddings\": 16384, "
    "\"model_type\": \"llama\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32, "
    "\"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 1000000, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.33.0.dev0\", "
    "\"use_cache\": true, \"vocab_size\": 32016}";

static const char hf_pub_5[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"hidden_act\": \"silu\", "
    "\"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 14336, "
    "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.42.3\", \"use_cache\": true, \"vocab_size\": 128256}";

static const char hf_pub_6[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"hidden_act\": \"silu\", "
    "\"hidden_size\": 8192, \"initializer_range\": 0.02, \"intermediate_size\": 28672, "
    "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 64, "
    "\"num_hidden_layers\": 80, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.42.3\", \"use_cache\": true, \"vocab_size\": 128256}";

static const char hf_pub_7[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"head_dim\": 64, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
    "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.45.0.dev0\", \"use_cache\": true, \"vocab_size\": 128256}";

static const char hf_pub_8[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"head_dim\": 128, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 3072, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
    "\"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 24, "
    "\"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.45.0.dev0\", \"use_cache\": true, \"vocab_size\": 128256}";

static const char hf_pub_9[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": 1, \"eos_token_id\": 2, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 5632, "
    "\"max_position_embeddings\": 2048, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": 22, \"num_key_value_heads\": 4, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.35.0\", \"use_cache\": true, \"vocab_size\": 32000}";

static const char hf_pub_10[] =
    "{\"architectures\": [\"MistralForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 14336, "
    "\"max_position_embeddings\": 32768, \"model_type\": \"mistral\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
    "\"sliding_window\": 4096, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.34.0.dev0\", \"use_cache\": true, \"vocab_size\": 32000}";

static const char hf_pub_11[] =
    "{\"architectures\": [\"MistralForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 1, "
    "\"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 4096, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 14336, \"max_position_embeddings\": 32768, \"model_type\": \"mistral\", "
    "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, "
    "\"rope_theta\": 1000000.0, \"sliding_window\": null, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.0.dev0\", \"use_cache\": true, "
    "\"vocab_size\": 32768}";

static const char hf_pub_12[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
    "\"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 24, "
    "\"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char hf_pub_13[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
    "\"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 1536, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 8960, \"max_position_embeddings\": 32768, \"max_window_layers\": 28, "
    "\"model_type\": \"qwen2\", \"num_attention_heads\": 12, \"num_hidden_layers\": 28, \"num_key_value_heads\": 2, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char hf_pub_14[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
    "\"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 3584, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 18944, \"max_position_embeddings\": 32768, \"max_window_layers\": 28, "
    "\"model_type\": \"qwen2\", \"num_attention_heads\": 28, \"num_hidden_layers\": 28, \"num_key_value_heads\": 4, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 131072, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.41.2\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 152064}";

static const char hf_pub_15[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
    "\"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 11008, \"max_position_embeddings\": 32768, \"max_window_layers\": 70, "
    "\"model_type\": \"qwen2\", \"num_attention_heads\": 16, \"num_hidden_layers\": 36, \"num_key_value_heads\": 2, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.1\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char hf_pub_16[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
    "\"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 24, "
    "\"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24, \"num_key_value_heads\": 2, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true, \"use_mrope\": false, "
    "\"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char hf_pub_17[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643, "
    "\"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 3584, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 18944, \"max_position_embeddings\": 131072, \"max_window_layers\": 28, "
    "\"model_type\": \"qwen2\", \"num_attention_heads\": 28, \"num_hidden_layers\": 28, \"num_key_value_heads\": 4, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 131072, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.1\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 152064}";

static const char hf_pub_18[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 1024, \"initializer_range\": 0.02, \"intermediate_size\": 3072, "
    "\"max_position_embeddings\": 40960, \"max_window_layers\": 28, \"model_type\": \"qwen3\", "
    "\"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, "
    "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.51.0\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char hf_pub_19[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\", "
    "\"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 6144, "
    "\"max_position_embeddings\": 40960, \"max_window_layers\": 28, \"model_type\": \"qwen3\", "
    "\"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, "
    "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.51.0\", \"use_cache\": true, "
    "\"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char hf_pub_20[] =
    "{\"architectures\": [\"GemmaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 2, \"eos_token_id\": 1, \"head_dim\": 256, \"hidden_act\": \"gelu\", \"hidden_size\": 2048, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 16384, \"max_position_embeddings\": 8192, "
    "\"model_type\": \"gemma\", \"num_attention_heads\": 8, \"num_hidden_layers\": 18, \"num_key_value_heads\": 1, "
    "\"pad_token_id\": 0, \"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 10000.0, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.38.0.dev0\", \"use_cache\": true, "
    "\"vocab_size\": 256000}";

static const char hf_pub_21[] =
    "{\"architectures\": [\"Gemma2ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": 50.0, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", "
    "\"eos_token_id\": [1, 107], \"final_logit_softcapping\": 30.0, \"head_dim\": 256, "
    "\"hidden_act\": \"gelu_pytorch_tanh\", \"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 2304, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 9216, \"max_position_embeddings\": 8192, "
    "\"model_type\": \"gemma2\", \"num_attention_heads\": 8, \"num_hidden_layers\": 26, \"num_key_value_heads\": 4, "
    "\"pad_token_id\": 0, \"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, "
    "\"sliding_window\": 4096, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.4\", \"use_cache\": true, "
    "\"vocab_size\": 256000}";

static const char hf_pub_22[] =
    "{\"architectures\": [\"Gemma2ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": 50.0, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", "
    "\"dtype\": \"bfloat16\", \"eos_token_id\": 1, \"final_logit_softcapping\": 30.0, \"head_dim\": 256, "
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 2304, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 9216, \"max_position_embeddings\": 8192, \"model_type\": \"gemma2\", "
    "\"num_attention_heads\": 8, \"num_hidden_layers\": 26, \"num_key_value_heads\": 4, \"pad_token_id\": 0, "
    "\"query_pre_attn_scalar\": 224, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"sliding_window\": 4096, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.44.2\", \"use_cache\": true, \"vocab_size\": 256000}";

static const char hf_pub_23[] =
    "{\"architectures\": [\"Gemma2ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": 50.0, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", \"eos_token_id\": 1, "
    "\"final_logit_softcapping\": 30.0, \"head_dim\": 256, \"hidden_act\": \"gelu_pytorch_tanh\", "
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 3584, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 14336, \"max_position_embeddings\": 8192, \"model_type\": \"gemma2\", "
    "\"num_attention_heads\": 16, \"num_hidden_layers\": 42, \"num_key_value_heads\": 8, \"pad_token_id\": 0, "
    "\"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"sliding_window\": 4096, "
    "\"sliding_window_size\": 4096, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.0.dev0\", "
    "\"use_cache\": true, \"vocab_size\": 256000}";

static const char hf_pub_24[] =
    "{\"architectures\": [\"Gemma2ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": 50.0, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", \"eos_token_id\": 1, "
    "\"final_logit_softcapping\": 30.0, \"head_dim\": 128, \"hidden_act\": \"gelu_pytorch_tanh\", "
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 4608, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 36864, \"max_position_embeddings\": 8192, \"model_type\": \"gemma2\", "
    "\"num_attention_heads\": 32, \"num_hidden_layers\": 46, \"num_key_value_heads\": 16, \"pad_token_id\": 0, "
    "\"query_pre_attn_scalar\": 144, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"sliding_window\": 4096, "
    "\"sliding_window_size\": 4096, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.0.dev0\", "
    "\"use_cache\": true, \"vocab_size\": 256000, \"_attn_implementation\": \"eager\"}";

static const char hf_pub_25[] =
    "{\"architectures\": [\"Gemma3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"attn_logit_softcapping\": null, \"bos_token_id\": 2, \"cache_implementation\": \"hybrid\", "
    "\"eos_token_id\": [1, 106], \"final_logit_softcapping\": null, \"head_dim\": 256, "
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 1152, \"initializer_range\": 0.02, "
    "\"intermediate_size\": 6912, \"max_position_embeddings\": 32768, \"model_type\": \"gemma3_text\", "
    "\"num_attention_heads\": 4, \"num_hidden_layers\": 26, \"num_key_value_heads\": 1, \"pad_token_id\": 0, "
    "\"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06, \"rope_local_base_freq\": 10000, "
    "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": 512, \"sliding_window_pattern\": 6, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.50.0.dev0\", \"use_cache\": true, "
    "\"vocab_size\": 262144}";

static const char hf_pub_26[] =
    "{\"_name_or_path\": \"Phi-3-mini-4k-instruct\", \"architectures\": [\"Phi3ForCausalLM\"], "
    "\"attention_dropout\": 0.0, "
    "\"auto_map\": {\"AutoConfig\": \"configuration_phi3.Phi3Config\", \"AutoModelForCausalLM\": \"modeling_phi3.Phi3ForCausalLM\"}, "
    "\"bos_token_id\": 1, \"embd_pdrop\": 0.0, \"eos_token_id\": 32000, \"hidden_act\": \"silu\", \"hidden_size\": 3072, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 8192, \"max_position_embeddings\": 4096, "
    "\"model_type\": \"phi3\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32, "
    "\"original_max_position_embeddings\": 4096, \"pad_token_id\": 32000, \"resid_pdrop\": 0.0, "
    "\"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000.0, \"sliding_window\": 2047, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.39.3\", "
    "\"use_cache\": true, \"vocab_size\": 32064}";

static const char hf_pub_27[] =
    "{\"_name_or_path\": \"Phi-3.5-mini-instruct\", \"architectures\": [\"Phi3ForCausalLM\"], "
    "\"attention_dropout\": 0.0, "
    "\"auto_map\": {\"AutoConfig\": \"configuration_phi3.Phi3Config\", \"AutoModelForCausalLM\": \"modeling_phi3.Phi3ForCausalLM\"}, "
    "\"bos_token_id\": 1, \"embd_pdrop\": 0.0, \"eos_token_id\": 32000, \"hidden_act\": \"silu\", \"hidden_size\": 3072, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 8192, \"max_position_embeddings\": 131072, "
    "\"model_type\": \"phi3\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32, "
    "\"original_max_position_embeddings\": 4096, \"pad_token_id\": 32000, \"resid_pdrop\": 0.0, "
    "\"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"long_factor\": [1.0800000429153442, 1.1100000143051147, 1.1399999856948853, 1.340000033378601, 1.5899999141693115, 1.600000023841858, 1.6200000047683716, 2.620000123977661, 3.2300000190734863, 3.2300000190734863, 4.789999961853027, 7.400000095367432, 7.700000286102295, 9.09000015258789, 12.199999809265137, 17.670000076293945, 24.46000099182129, 28.57000160217285, 30.420001983642578, 30.840002059936523, 32.590003967285156, 32.93000411987305, 42.320003509521484, 44.96000289916992, 50.340003967285156, 50.45000457763672, 57.55000305175781, 57.93000411987305, 58.21000289916992, 60.1400032043457, 62.61000442504883, 62.62000274658203, 62.71000289916992, 63.1400032043457, 63.1400032043457, 63.77000427246094, 63.93000411987305, 63.96000289916992, 63.970001220703125, 64.02999877929688, 64.06999969482422, 64.08000183105469, 64.12000274658203, 64.41000366210938, 64.4800033569336, 64.51000213623047, 64.52999877929688, 64.83999633789062], \"short_factor\": [1.0, 1.0199999809265137, 1.0299999713897705, 1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0499999523162842, 1.0699999332427979, 1.0999999046325684, 1.1099998950958252, 1.1599998474121094, 1.1599998474121094, 1.1699998378753662, 1.2899998426437378, 1.339999794960022, 1.679999828338623, 1.7899998426437378, 1.8199998140335083, 1.8499997854232788, 1.8799997568130493, 1.9099997282028198, 1.9399996995925903, 1.9899996519088745, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0199997425079346, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0299997329711914, 2.0799996852874756, 2.0899996757507324, 2.189999580383301, 2.2199995517730713, 2.5899994373321533, 2.729999542236328, 2.749999523162842, 2.8399994373321533], \"type\": \"longrope\"}, "
    "\"rope_theta\": 10000.0, \"sliding_window\": 262144, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.3\", \"use_cache\": true, "
    "\"attention_bias\": false, \"vocab_size\": 32064}";

static const char hf_pub_28[] =
    "{\"_name_or_path\": \"Phi-4-mini-instruct\", \"architectures\": [\"Phi3ForCausalLM\"], \"attention_bias\": false, "
    "\"attention_dropout\": 0.0, "
    "\"auto_map\": {\"AutoConfig\": \"configuration_phi3.Phi3Config\", \"AutoModelForCausalLM\": \"modeling_phi3.Phi3ForCausalLM\", \"AutoTokenizer\": \"Xenova/gpt-4o\"}, "
    "\"bos_token_id\": 199999, \"embd_pdrop\": 0.0, \"eos_token_id\": 199999, \"full_attn_mod\": 1, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 3072, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
    "\"interpolate_factor\": 1, \"lm_head_bias\": false, \"max_position_embeddings\": 131072, \"mlp_bias\": false, "
    "\"model_type\": \"phi3\", \"num_attention_heads\": 24, \"num_hidden_layers\": 32, \"num_key_value_heads\": 8, "
    "\"original_max_position_embeddings\": 4096, \"pad_token_id\": 199999, \"partial_rotary_factor\": 0.75, "
    "\"resid_pdrop\": 0.0, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"long_factor\": [1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817, 2.187582649, 2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687, 4.279200023, 4.785517845, 5.351743533, 5.984965424, 6.693110555, 7.485043894, 8.370679318, 9.36110372, 10.4687158, 11.70738129, 13.09260651, 14.64173252, 16.37415215, 18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03, 32.1, 32.13, 32.23, 32.6, 32.61, 32.64, 32.66, 32.7, 32.71, 32.93, 32.97, 33.28, 33.49, 33.5, 44.16, 47.77], \"short_factor\": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], \"type\": \"longrope\"}, "
    "\"rope_theta\": 10000.0, \"sliding_window\": 262144, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.45.0\", \"use_cache\": true, \"vocab_size\": 200064}";

static const char hf_pub_29[] =
    "{\"architectures\": [\"Olmo2ForCausalLM\"], \"hidden_act\": \"silu\", \"hidden_size\": 4096, "
    "\"intermediate_size\": 11008, \"max_position_embeddings\": 4096, \"model_type\": \"olmo2\", "
    "\"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 32, \"rms_norm_eps\": 1e-06, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\", "
    "\"transformers_version\": \"4.47.0\", \"use_cache\": true, \"vocab_size\": 100352}";

static const char hf_pub_30[] =
    "{\"architectures\": [\"Olmo2ForCausalLM\"], \"hidden_act\": \"silu\", \"hidden_size\": 5120, "
    "\"intermediate_size\": 13824, \"max_position_embeddings\": 4096, \"model_type\": \"olmo2\", "
    "\"num_attention_heads\": 40, \"num_hidden_layers\": 40, \"num_key_value_heads\": 40, \"rms_norm_eps\": 1e-06, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\", "
    "\"transformers_version\": \"4.47.0\", \"use_cache\": true, \"vocab_size\": 100352}";

static const char hf_pub_31[] =
    "{\"_name_or_path\": \"HuggingFaceTB/cosmo2-135M-webinst-sc2\", \"architectures\": [\"LlamaForCausalLM\"], "
    "\"attention_bias\": false, \"attention_dropout\": 0.0, \"bos_token_id\": 1, \"eos_token_id\": 2, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 576, \"initializer_range\": 0.02, \"intermediate_size\": 1536, "
    "\"max_position_embeddings\": 2048, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 9, "
    "\"num_hidden_layers\": 30, \"num_key_value_heads\": 3, \"pad_token_id\": 2, \"pretraining_tp\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\", \"use_cache\": true, \"vocab_size\": 49152}";

static const char hf_pub_32[] =
    "{\"_name_or_path\": \"HuggingFaceTB/cosmo2-350M-webinst-sc2\", \"architectures\": [\"LlamaForCausalLM\"], "
    "\"attention_bias\": false, \"attention_dropout\": 0.0, \"bos_token_id\": 1, \"eos_token_id\": 2, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 960, \"initializer_range\": 0.02, \"intermediate_size\": 2560, "
    "\"max_position_embeddings\": 2048, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 15, "
    "\"num_hidden_layers\": 32, \"num_key_value_heads\": 5, \"pad_token_id\": 2, \"pretraining_tp\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\", \"use_cache\": true, \"vocab_size\": 49152}";

static const char hf_pub_33[] =
    "{\"_name_or_path\": \"HuggingFaceTB/cosmo2-1.7B-webinst-sc2\", \"architectures\": [\"LlamaForCausalLM\"], "
    "\"attention_bias\": false, \"attention_dropout\": 0.0, \"bos_token_id\": 1, \"eos_token_id\": 2, "
    "\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
    "\"max_position_embeddings\": 2048, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
    "\"num_hidden_layers\": 24, \"num_key_value_heads\": 32, \"pad_token_id\": 2, \"pretraining_tp\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": true, "
    "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\", \"use_cache\": true, \"vocab_size\": 49152}";

static const char hf_pub_34[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 576, "
    "\"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536, \"is_llama_config\": true, "
    "\"max_position_embeddings\": 8192, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 9, "
    "\"num_hidden_layers\": 30, \"num_key_value_heads\": 3, \"pad_token_id\": 2, \"pretraining_tp\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, \"rope_scaling\": null, \"rope_theta\": 100000, "
    "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\", "
    "\"transformers.js_config\": {\"kv_cache_dtype\": {\"q4f16\": \"float16\", \"fp16\": \"float16\"}}, "
    "\"use_cache\": true, \"vocab_size\": 49152}";

static const char hf_pub_35[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
    "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 960, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 2560, \"is_llama_config\": true, "
    "\"max_position_embeddings\": 8192, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 15, "
    "\"num_hidden_layers\": 32, \"num_key_value_heads\": 5, \"pad_token_id\": 2, \"pretraining_tp\": 1, "
    "\"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, \"rope_scaling\": null, \"rope_theta\": 100000, "
    "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\", "
    "\"transformers.js_config\": {\"kv_cache_dtype\": {\"q4f16\": \"float16\", \"fp16\": \"float16\"}}, "
    "\"use_cache\": true, \"vocab_size\": 49152}";

static const char hf_pub_36[] =
    "{\"architectures\": [\"InternLM2ForCausalLM\"], \"attn_implementation\": \"eager\", \"bias\": false, "
    "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 4096, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 14336, \"max_position_embeddings\": 32768, "
    "\"model_type\": \"internlm2\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
    "\"num_key_value_heads\": 8, \"pad_token_id\": 2, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "
    "\"rope_theta\": 1000000, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", "
    "\"transformers_version\": \"4.37.1\", \"use_cache\": true, \"vocab_size\": 92544}";

static const char hf_pub_37[] =
    "{\"architectures\": [\"InternLM2ForCausalLM\"], \"attn_implementation\": \"eager\", \"bias\": false, "
    "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 4096, "
    "\"initializer_range\": 0.02, \"intermediate_size\": 14336, \"max_position_embeddings\": 32768, "
    "\"model_type\": \"internlm2\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
    "\"num_key_value_heads\": 8, \"pad_token_id\": 2, \"rms_norm_eps\": 1e-05, "
    "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}, \"rope_theta\": 1000000, "
    "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.41.0\", "
    "\"use_cache\": true, \"vocab_size\": 92544, \"pretraining_tp\": 1}";

static const char hf_pub_38[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1, "
    "\"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02, "
    "\"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12, "
    "\"n_layer\": 12, \"n_positions\": 1024, \"resid_pdrop\": 0.1, \"summary_activation\": null, "
    "\"summary_first_dropout\": 0.1, \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\", "
    "\"summary_use_proj\": true, "
    "\"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}}, \"vocab_size\": 50257}";

static const char hf_pub_39[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1, "
    "\"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02, "
    "\"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 1024, \"n_head\": 16, "
    "\"n_layer\": 24, \"n_positions\": 1024, \"n_special\": 0, \"predict_special_tokens\": true, \"resid_pdrop\": 0.1, "
    "\"summary_activation\": null, \"summary_first_dropout\": 0.1, \"summary_proj_to_labels\": true, "
    "\"summary_type\": \"cls_index\", \"summary_use_proj\": true, "
    "\"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}}, \"vocab_size\": 50257}";

static const hf_published_t hf_published[] = {
    {"meta-llama/Llama-2-7b-hf",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama2_7b\"",
     6738415616ull, 1ull, "HF num_parameters() (the llama2-7b preset's)", hf_pub_0},
    {"meta-llama/Llama-2-13b-hf",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama2_13b\"",
     13015864320ull, 1ull, "HF num_parameters() (the llama2-13b preset's)", hf_pub_1},
    {"meta-llama/Llama-2-70b-hf",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama2_70b\"",
     68976648192ull, 1ull, "HF num_parameters() (the llama2-70b preset's)", hf_pub_2},
    {"codellama/CodeLlama-7b-hf",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"codellama_7b\"",
     6740000000ull, 10000000ull, "Hub page: 6.74B", hf_pub_3},
    {"meta-llama/Meta-Llama-3-8B",
     "tests/model/hf_llama3_8b_config.h (the file as served)",
     8030261248ull, 1ull, "HF num_parameters() (the llama3-8b preset's)", llama3_8b_config_json},
    {"meta-llama/Llama-3.1-8B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama3_1_8b\"",
     8030261248ull, 1ull, "safetensors index total_size 16,060,522,496 bytes of bf16", hf_pub_5},
    {"meta-llama/Llama-3.1-70B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama3_1_70b\"",
     70553706496ull, 1ull, "HF num_parameters() (the llama3-70b preset's shape)", hf_pub_6},
    {"meta-llama/Llama-3.2-1B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama3_2_1b\"",
     1235814400ull, 1ull, "model card: 1.23B; Hub page 1,235,814,400", hf_pub_7},
    {"meta-llama/Llama-3.2-3B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"llama3_2_3b\"",
     3210000000ull, 10000000ull, "model card: 3.21B", hf_pub_8},
    {"TinyLlama/TinyLlama-1.1B-Chat-v1.0",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"tinyllama_1b_chat_v1.0\"",
     1100048384ull, 1ull, "Hub page: 1,100,048,384", hf_pub_9},
    {"mistralai/Mistral-7B-v0.1",
     "the config.json as transcribed in public projects (mlc-llm's copy renames sliding_window)",
     7241732096ull, 1ull, "HF num_parameters() (the mistral-7b preset's)", hf_pub_10},
    {"mistralai/Mistral-7B-v0.3",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"mistral_7b_v03\"",
     7250000000ull, 10000000ull, "Hub page: 7.25B", hf_pub_11},
    {"Qwen/Qwen2-0.5B-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"qwen2_0_5b\"",
     490000000ull, 10000000ull, "model card: 0.49B", hf_pub_12},
    {"Qwen/Qwen2-1.5B-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"qwen2_1_5b\"",
     1540000000ull, 10000000ull, "model card: 1.54B", hf_pub_13},
    {"Qwen/Qwen2-7B-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"qwen2_7b\"",
     7620000000ull, 10000000ull, "model card: 7.62B", hf_pub_14},
    {"Qwen/Qwen2.5-3B-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"qwen2.5_3b\"",
     3090000000ull, 10000000ull, "model card: Number of Parameters 3.09B", hf_pub_15},
    {"Qwen/Qwen2.5-0.5B",
     "typed from the model repository's config.json (as the earlier tests did)",
     494032768ull, 1ull, "Hub page: 494,032,768", hf_pub_16},
    {"Qwen/Qwen2.5-7B",
     "typed from the model repository's config.json (as the earlier tests did)",
     7615616512ull, 1ull, "Hub page: 7,615,616,512", hf_pub_17},
    {"Qwen/Qwen3-0.6B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"qwen3_0.6b\"",
     600000000ull, 100000000ull, "model card: Number of Parameters 0.6B", hf_pub_18},
    {"Qwen/Qwen3-1.7B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"qwen3_1.7b\"",
     1700000000ull, 100000000ull, "model card: Number of Parameters 1.7B", hf_pub_19},
    {"google/gemma-2b",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gemma_2b\"",
     2510000000ull, 10000000ull, "Hub page: 2.51B", hf_pub_20},
    {"google/gemma-2-2b-it",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gemma2_2b\"",
     2610000000ull, 10000000ull, "Hub page: 2.61B", hf_pub_21},
    {"google/gemma-2-2b-jpn-it",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gemma2_2b-jpn\"",
     2610000000ull, 10000000ull, "Hub page: 2.61B", hf_pub_22},
    {"google/gemma-2-9b",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gemma2_9b\"",
     9240000000ull, 10000000ull, "Hub page: 9.24B", hf_pub_23},
    {"google/gemma-2-27b",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gemma2_27b\"",
     27200000000ull, 100000000ull, "Hub page: 27.2B", hf_pub_24},
    {"google/gemma-3-1b-it",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gemma3_1b_it\"",
     1000000000ull, 100000000ull, "model card: 1B", hf_pub_25},
    {"microsoft/Phi-3-mini-4k-instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at 01ced331 (the entry commented out there)",
     3800000000ull, 100000000ull, "model card: 3.8B parameters", hf_pub_26},
    {"microsoft/Phi-3.5-mini-instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"phi-3_5\"",
     3800000000ull, 100000000ull, "model card: 3.8B parameters", hf_pub_27},
    {"microsoft/Phi-4-mini-instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"phi-4\"",
     3800000000ull, 100000000ull, "model card: 3.8B parameters", hf_pub_28},
    {"allenai/OLMo-2-1124-7B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"olmo2_7b\"",
     7300000000ull, 100000000ull, "Hub page: 7.3B", hf_pub_29},
    {"allenai/OLMo-2-1124-13B",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"olmo2_13b\"",
     13700000000ull, 100000000ull, "Hub page: 13.7B", hf_pub_30},
    {"HuggingFaceTB/SmolLM-135M-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"smollm_135m\"",
     135000000ull, 1000000ull, "model card: 135M", hf_pub_31},
    {"HuggingFaceTB/SmolLM-360M-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"smollm_360m\"",
     362000000ull, 1000000ull, "Hub page: 362M", hf_pub_32},
    {"HuggingFaceTB/SmolLM-1.7B-Instruct",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"smollm_1_7b\"",
     1710000000ull, 10000000ull, "Hub page: 1.71B", hf_pub_33},
    {"HuggingFaceTB/SmolLM2-135M",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"smollm2_135m\"",
     135000000ull, 1000000ull, "model card: 135M", hf_pub_34},
    {"HuggingFaceTB/SmolLM2-360M",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"smollm2_360m\"",
     362000000ull, 1000000ull, "Hub page: 362M", hf_pub_35},
    {"internlm/internlm2-chat-7b",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"internlm2\"",
     7740000000ull, 10000000ull, "Hub page: 7.74B", hf_pub_36},
    {"internlm/internlm2_5-7b-chat",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"internlm2_5_7b\"",
     7740000000ull, 10000000ull, "Hub page: 7.74B", hf_pub_37},
    {"openai-community/gpt2",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gpt2\"",
     124439808ull, 1ull, "HF num_parameters() (the gpt2-124m preset's)", hf_pub_38},
    {"openai-community/gpt2-medium",
     "mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py at d1ea69a8, entry \"gpt2_medium\"",
     354823168ull, 1ull, "HF num_parameters() (the gpt2-350m preset's)", hf_pub_39},
};

#endif
