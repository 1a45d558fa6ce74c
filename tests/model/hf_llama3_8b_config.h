/* hf_llama3_8b_config.h - the public config.json of Meta-Llama-3-8B, byte
 * for byte as Hugging Face serves it (meta-llama/Meta-Llama-3-8B, gated;
 * the same file ungated at NousResearch/Meta-Llama-3-8B and transcribed in
 * many public projects), with its two-space indent and trailing newline.
 * Not a test; included by tests/model/test_hf_config.c. */
#ifndef SHARDSIM_TEST_HF_LLAMA3_8B_CONFIG_H
#define SHARDSIM_TEST_HF_LLAMA3_8B_CONFIG_H

static const char llama3_8b_config_json[] =
    "{\n"
    "  \"architectures\": [\n"
    "    \"LlamaForCausalLM\"\n"
    "  ],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 128000,\n"
    "  \"eos_token_id\": 128001,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 4096,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 14336,\n"
    "  \"max_position_embeddings\": 8192,\n"
    "  \"model_type\": \"llama\",\n"
    "  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 32,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"pretraining_tp\": 1,\n"
    "  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 500000.0,\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.40.0.dev0\",\n"
    "  \"use_cache\": true,\n"
    "  \"vocab_size\": 128256\n"
    "}\n";

#endif
