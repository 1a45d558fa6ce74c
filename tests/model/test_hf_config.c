/* test_hf_config.c - the Llama-family presets (model_preset.h) and the
 * Hugging Face config.json reader (hf_config.h).
 *
 * Independent references: the parameter counts published for each model
 * (typed from the issue and the model cards), the count of a Llama shape
 * computed here from the layer list of llama.h (not through the library),
 * and the public Meta-Llama-3-8B config.json, typed into
 * hf_llama3_8b_config.h. Refusals are fed the offending key and must name
 * the file and the key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "hf_llama3_8b_config.h"
#include "shardsim/hf_config.h"
#include "shardsim/model_preset.h"

/* Parameters of a Llama, from its tensors: per layer two RMSNorm weights
 * (C each), q_proj (NH*HD x C), k_proj and v_proj (NKV*HD x C each), o_proj
 * (C x NH*HD), gate_proj and up_proj (I x C), down_proj (C x I), q/k/v
 * biases with qkv_bias; embed_tokens V x C; the final norm C; lm_head V x C
 * unless tied. */
static uint64_t count_llama(uint64_t L, uint64_t C, uint64_t NH, uint64_t NKV, uint64_t I, uint64_t V, int tied,
                            int qkv_bias) {
    uint64_t HD = C / NH;
    uint64_t q = NH * HD * C, k = NKV * HD * C, v = k, o = C * NH * HD;
    uint64_t mlp = I * C + I * C + C * I;
    uint64_t bias = qkv_bias ? NH * HD + 2 * NKV * HD : 0;
    uint64_t layer = C + q + k + v + bias + o + C + mlp;
    return L * layer + V * C + C + (tied ? 0 : V * C);
}

static uint64_t count_cfg(const shs_llama_config_t *c) {
    return count_llama((uint64_t)c->num_layers, (uint64_t)c->hidden, (uint64_t)c->num_heads,
                       (uint64_t)c->num_kv_heads, (uint64_t)c->intermediate, (uint64_t)c->vocab,
                       c->tie_word_embeddings, c->qkv_bias);
}

/* The seven presets: their published counts (the numbers, which
 * the model cards and HF num_parameters() give), and the count of each
 * preset's shape by the layer list above equal to it. */
static void test_llama_presets(void **state) {
    (void)state;
    static const struct {
        const char *name;
        uint64_t published;
    } want[] = {
        {"llama2-7b", 6738415616ull},     {"llama2-13b", 13015864320ull},  {"llama2-70b", 68976648192ull},
        {"llama3-8b", 8030261248ull},     {"llama3-70b", 70553706496ull},  {"llama3.1-405b", 405853388800ull},
        {"mistral-7b", 7241732096ull},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const shs_model_preset_t *p = shs_model_preset_find(want[i].name);
        assert_non_null(p);
        assert_int_equal(p->arch, SHS_ARCH_LLAMA);
        assert_int_equal(p->published_params, want[i].published);
        assert_int_equal(p->published_unit, 1);
        assert_int_equal(count_cfg(&p->llama), want[i].published);
        assert_int_equal(shs_llama_num_params(&p->llama), want[i].published); /* the library's closed form */
        assert_int_equal(shs_llama_config_validate(&p->llama), SHS_OK);
        assert_true(p->cfg.context >= 1 && p->cfg.context <= p->llama.max_position);
    }
    /* two shapes by hand: Llama 2 7B is MHA, 70B GQA with 8 kv heads */
    assert_int_equal(count_llama(32, 4096, 32, 32, 11008, 32000, 0, 0), 6738415616ull);
    assert_int_equal(count_llama(80, 8192, 64, 8, 28672, 32000, 0, 0), 68976648192ull);
    const shs_model_preset_t *p = shs_model_preset_find("llama3.1-405b");
    assert_int_equal(p->llama.rope_scaling.kind, SHS_ROPE_SCALING_LLAMA3);
    assert_int_equal(p->llama.rope_scaling.original_max_position_embeddings, 8192);
    assert_true(p->llama.rope_scaling.factor == 8.0 && p->llama.rope_scaling.high_freq_factor == 4.0);
    assert_int_equal(p->llama.max_position, 131072);
    assert_int_equal(p->cfg.context, 8192); /* pre-training's context, original_max_position_embeddings */
    p = shs_model_preset_find("mistral-7b");
    assert_int_equal(p->llama.sliding_window, 4096); /* on every layer */
    assert_int_equal(shs_llama_layer_window(&p->llama, 0), 4096);
    assert_int_equal(shs_llama_layer_window(&p->llama, 31), 4096);
    assert_int_equal(p->cfg.context, 8192); /* Jiang et al. 2023, Table 1: context_len 8192 */
    assert_int_equal(p->llama.max_position, 32768);
    assert_null(shs_model_preset_find("llama4"));
}

#ifdef SHS_HAVE_JANSSON

static void parse_ok(const char *text, shs_hf_config_t *out) {
    shs_status_t st = shs_hf_config_parse(text, strlen(text), "c.json", out);
    if (st != SHS_OK) fail_msg("parse failed: %s\n--- text:\n%s", shs_last_error(), text);
}

/* The public Meta-Llama-3-8B config.json, read from a file: the shape of
 * the llama3-8b preset and its published count. */
static void test_llama3_8b_file(void **state) {
    (void)state;
    const char *path = test_tmp_write("config.json", llama3_8b_config_json, strlen(llama3_8b_config_json));
    shs_hf_config_t h;
    assert_int_equal(shs_hf_config_load(path, &h), SHS_OK);
    assert_string_equal(h.model_type, "llama");
    assert_int_equal(h.arch, SHS_ARCH_LLAMA);
    assert_int_equal(h.torch_dtype, SHS_BF16);
    assert_int_equal(count_cfg(&h.llama), 8030261248ull);
    assert_int_equal(shs_llama_num_params(&h.llama), 8030261248ull);
    const shs_llama_config_t *a = &h.llama, *b = &shs_model_preset_find("llama3-8b")->llama;
    assert_int_equal(a->num_layers, 32);
    assert_int_equal(a->hidden, 4096);
    assert_int_equal(a->num_heads, 32);
    assert_int_equal(a->num_kv_heads, 8);
    assert_int_equal(a->intermediate, 14336);
    assert_int_equal(a->vocab, 128256);
    assert_int_equal(a->max_position, 8192);
    assert_true(a->rms_norm_eps == 1e-5f);
    assert_true(a->rope_theta == 500000.0);
    assert_int_equal(a->rope_scaling.kind, SHS_ROPE_SCALING_NONE);
    assert_int_equal(a->tie_word_embeddings, 0);
    assert_int_equal(a->qkv_bias, 0);
    /* the preset is the same shape */
    assert_int_equal(a->num_layers, b->num_layers);
    assert_int_equal(a->hidden, b->hidden);
    assert_int_equal(a->num_kv_heads, b->num_kv_heads);
    assert_int_equal(a->intermediate, b->intermediate);
    assert_int_equal(a->vocab, b->vocab);
    assert_int_equal(a->max_position, b->max_position);
    assert_true(a->rms_norm_eps == b->rms_norm_eps && a->rope_theta == b->rope_theta);
    assert_int_equal(shs_hf_config_context(&h), 8192);
    assert_int_equal(h.gpt.context, 8192);
    assert_string_equal(h.not_applied, "");
}

/* Keys absent take HF's defaults: num_key_value_heads = num_attention_heads
 * (MHA), rms_norm_eps 1e-6, rope_theta 10000, untied. */
static void test_defaults(void **state) {
    (void)state;
    shs_hf_config_t h;
    parse_ok("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
             " \"intermediate_size\": 96, \"vocab_size\": 300, \"max_position_embeddings\": 128}", &h);
    assert_int_equal(h.llama.num_kv_heads, 4);
    assert_true(h.llama.rms_norm_eps == 1e-6f);
    assert_true(h.llama.rope_theta == 10000.0);
    assert_int_equal(h.llama.tie_word_embeddings, 0);
    assert_int_equal(h.torch_dtype, SHS_DTYPE_DEFAULT);
    /* 2 (64+3*64*64+... ) by the layer list: L=2 C=64 NH=NKV=4 I=96 V=300 untied */
    assert_int_equal(count_cfg(&h.llama), 2ull * (2 * 64 + 4 * 64 * 64 + 3 * 64 * 96) + 2 * 300 * 64 + 64);
}

/* Llama 3.1's rope_scaling, the newer torch_dtype name "dtype", a tied head. */
static void test_rope_scaling_llama3(void **state) {
    (void)state;
    shs_hf_config_t h;
    parse_ok("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": 1, \"intermediate_size\": 96, \"vocab_size\": 300, \"max_position_embeddings\": 512,"
             " \"tie_word_embeddings\": true, \"dtype\": \"float32\","
             " \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0,"
             " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}}", &h);
    assert_int_equal(h.llama.rope_scaling.kind, SHS_ROPE_SCALING_LLAMA3);
    assert_true(h.llama.rope_scaling.factor == 32.0 && h.llama.rope_scaling.low_freq_factor == 1.0);
    assert_true(h.llama.rope_scaling.high_freq_factor == 4.0);
    assert_int_equal(h.llama.rope_scaling.original_max_position_embeddings, 8192);
    assert_int_equal(h.llama.num_kv_heads, 1); /* MQA */
    assert_int_equal(h.llama.tie_word_embeddings, 1);
    assert_int_equal(h.torch_dtype, SHS_F32);
    assert_int_equal(shs_hf_config_context(&h), 512); /* max_position_embeddings, shorter than 8192 */
    parse_ok("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
             " \"intermediate_size\": 96, \"vocab_size\": 300, \"max_position_embeddings\": 131072,"
             " \"rope_scaling\": {\"factor\": 8.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0,"
             " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}}", &h);
    assert_int_equal(shs_hf_config_context(&h), 8192); /* Llama 3.1: pre-training's context */
}

/* Mistral's sliding window is modelled on every layer and no longer caps
 * the default context (MistralConfig's default window 4096 when the key is
 * absent); Qwen2 has q/k/v biases (the count grows by NH*HD + 2*NKV*HD per
 * layer). */
static void test_mistral_qwen2(void **state) {
    (void)state;
    shs_hf_config_t h;
    parse_ok("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 300,"
             " \"max_position_embeddings\": 1024, \"sliding_window\": 256}", &h);
    assert_int_equal(h.llama.sliding_window, 256);
    assert_int_equal(h.llama.window_pattern, 0);
    assert_int_equal(h.llama.window_first_layer, 0);
    assert_int_equal(shs_hf_config_context(&h), 1024);
    parse_ok("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
             " \"intermediate_size\": 96, \"vocab_size\": 300, \"max_position_embeddings\": 1024, \"sliding_window\": null}",
             &h);
    assert_int_equal(h.llama.sliding_window, 0);
    assert_int_equal(shs_hf_config_context(&h), 1024);
    parse_ok("{\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
             " \"intermediate_size\": 96, \"vocab_size\": 300, \"max_position_embeddings\": 8192}", &h);
    assert_int_equal(h.llama.sliding_window, 4096); /* MistralConfig(sliding_window=4096) */
    /* Qwen2.5-0.5B's config.json (Qwen/Qwen2.5-0.5B): 494,032,768 parameters, tied */
    parse_ok("{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
             " \"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02,"
             " \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 24,"
             " \"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24,"
             " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768,"
             " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\","
             " \"use_cache\": true, \"use_mrope\": false, \"use_sliding_window\": false, \"vocab_size\": 151936}", &h);
    assert_int_equal(h.llama.qkv_bias, 1);
    assert_int_equal(h.llama.sliding_window, 0); /* use_sliding_window false: no window */
    assert_int_equal(count_cfg(&h.llama), 494032768ull);
    assert_int_equal(count_llama(24, 896, 14, 2, 4864, 151936, 1, 0) + 24ull * (896 + 2 * 128), 494032768ull);
}

/* gpt2's own keys, from the public gpt2 config.json: the GPT-2 small preset,
 * and its dropouts listed as not applied. */
static void test_gpt2(void **state) {
    (void)state;
    static const char text[] =
        "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1,"
        " \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02,"
        " \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12,"
        " \"n_layer\": 12, \"n_positions\": 1024, \"resid_pdrop\": 0.1, \"summary_activation\": null,"
        " \"summary_first_dropout\": 0.1, \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\","
        " \"summary_use_proj\": true, \"task_specific_params\": {\"text-generation\": {\"do_sample\": true,"
        " \"max_length\": 50}}, \"vocab_size\": 50257}";
    shs_hf_config_t h;
    parse_ok(text, &h);
    assert_int_equal(h.arch, SHS_ARCH_GPT);
    assert_int_equal(h.gpt.num_layers, 12);
    assert_int_equal(h.gpt.num_heads, 12);
    assert_int_equal(h.gpt.channels, 768);
    assert_int_equal(h.gpt.context, 1024);
    assert_int_equal(h.gpt.vocab, 50257);
    assert_int_equal(shs_gpt_num_params(&h.gpt), 124439808ull); /* HF gpt2's num_parameters() */
    assert_string_equal(h.not_applied, "attn_pdrop 0.1, embd_pdrop 0.1, resid_pdrop 0.1");
}

/* Each refusal names the file and the key. */
static void test_refusals(void **state) {
    (void)state;
#define LL "\"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 96, " \
           "\"vocab_size\": 300, \"max_position_embeddings\": 128"
#define G2 "\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4, \"n_positions\": 32, \"vocab_size\": 300"
    static const struct {
        const char *text, *want1, *want2;
    } cases[] = {
        {"{\"model_type\": \"falcon\", " LL "}", "\"model_type\"", "'falcon' is not modelled"},
        {"{" LL "}", "missing key \"model_type\"", ""},
        {"{\"model_type\": \"llama\", \"hidden_size\": 64}", "missing key \"num_hidden_layers\"", ""},
        {"{\"model_type\": \"llama\", \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 96, "
         "\"vocab_size\": 300, \"max_position_embeddings\": 128}", "missing key \"hidden_size\"", ""},
        {"{\"model_type\": \"llama\", " LL ", \"attention_bias\": 1}", "\"attention_bias\"", "true or false"},
        {"{\"model_type\": \"llama\", " LL ", \"mlp_bias\": true}", "\"mlp_bias\"", "not modelled"},
        {"{\"model_type\": \"llama\", " LL ", \"hidden_act\": \"gelu\"}", "\"hidden_act\"", "'gelu' is not modelled"},
        {"{\"model_type\": \"llama\", " LL ", \"head_dim\": 7}", "head_dim 7", "even"},
        {"{\"model_type\": \"llama\", " LL ", \"pretraining_tp\": 0}", "\"pretraining_tp\"", "positive integer"},
        {"{\"model_type\": \"llama\", " LL ", \"attention_dropout\": 0.1}", "\"attention_dropout\"", "not modelled"},
        {"{\"model_type\": \"llama\", " LL ", \"num_key_value_heads\": 3}", "\"num_key_value_heads\"", "does not divide"},
        {"{\"model_type\": \"llama\", " LL ", \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 2.0}}",
         "\"rope_scaling\"", "'yarn' is not modelled"},
        {"{\"model_type\": \"llama\", " LL ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}",
         "\"rope_scaling\"", "missing \"low_freq_factor\""},
        {"{\"model_type\": \"llama\", " LL ", \"quantization_config\": {}}", "\"quantization_config\"", "not modelled"},
        {"{\"model_type\": \"llama\", " LL ", \"sliding_window\": 64}", "\"sliding_window\"",
         "not modelled for model_type llama"},
        {"{\"model_type\": \"llama\", " LL ", \"torch_dtype\": \"float64\"}", "\"torch_dtype\"", "'float64'"},
        {"{\"model_type\": \"llama\", " LL ", \"num_key_value_heads\": 0}", "\"num_key_value_heads\"", "positive integer"},
        {"{\"model_type\": \"llama\", " LL ", \"model_type\": \"llama\"}", "c.json:1:", "duplicate object key"},
        {"{\"model_type\": \"qwen2\", " LL ", \"use_sliding_window\": true, \"sliding_window\": null}",
         "\"use_sliding_window\"", "sliding_window is null"},
        {"{\"model_type\": \"qwen2\", " LL ", \"attention_bias\": true}", "\"attention_bias\"",
         "not modelled for model_type qwen2"},
        {"{" G2 ", \"activation_function\": \"relu\"}", "\"activation_function\"", "'relu' is not modelled"},
        {"{" G2 ", \"tie_word_embeddings\": false}", "\"tie_word_embeddings\"", "not modelled"},
        {"{" G2 ", \"layer_norm_epsilon\": 1e-6}", "\"layer_norm_epsilon\"", "not modelled"},
        {"{" G2 ", \"n_inner\": 128}", "\"n_inner\"", "not modelled"},
        {"{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4, \"vocab_size\": 300}",
         "missing key \"n_positions\"", ""},
        {"{\"model_type\": \"llama\",\n \"hidden_size\": 64,,}", "c.json:2:", "malformed JSON"},
        {"[1]", "want a JSON object", ""},
    };
#undef LL
#undef G2
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        shs_hf_config_t h;
        shs_status_t st = shs_hf_config_parse(cases[i].text, strlen(cases[i].text), "c.json", &h);
        const char *e = shs_last_error();
        if (st == SHS_OK || !strstr(e, "c.json") || !strstr(e, cases[i].want1) || !strstr(e, cases[i].want2))
            fail_msg("case %zu: status %d, error '%s'; want '%s' and '%s'\n--- text:\n%s", i, (int)st, e,
                     cases[i].want1, cases[i].want2, cases[i].text);
    }
    /* a missing file names its path */
    shs_hf_config_t h;
    assert_int_not_equal(shs_hf_config_load("/nonexistent/config.json", &h), SHS_OK);
    assert_non_null(strstr(shs_last_error(), "/nonexistent/config.json"));
}

/* Keys that real published config.json files carry and that change no
 * number: gpt2-medium's n_special 0 and predict_special_tokens (typed from
 * its public config.json), a recent save_pretrained's
 * _attn_implementation_autoset, older output_past and _num_labels, newer
 * transformers' qwen2 layer_types (all full_attention); the public
 * Llama-3.2-1B and TinyLlama-1.1B-Chat-v1.0 config.json files as published.
 * Each gives the shape its keys say, and the default context's key. */
static void test_published_keys(void **state) {
    (void)state;
    static const char gpt2_medium[] =
        "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1,"
        " \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02,"
        " \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 1024, \"n_head\": 16,"
        " \"n_layer\": 24, \"n_positions\": 1024, \"n_special\": 0, \"predict_special_tokens\": true,"
        " \"resid_pdrop\": 0.1, \"summary_activation\": null, \"summary_first_dropout\": 0.1,"
        " \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\", \"summary_use_proj\": true,"
        " \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}},"
        " \"vocab_size\": 50257, \"output_past\": true, \"_num_labels\": 1, \"_attn_implementation_autoset\": true}";
    shs_hf_config_t h;
    parse_ok(gpt2_medium, &h);
    assert_int_equal(h.arch, SHS_ARCH_GPT);
    assert_int_equal(h.gpt.num_layers, 24);
    assert_int_equal(h.gpt.channels, 1024);
    assert_int_equal(h.gpt.num_heads, 16);
    assert_int_equal(shs_gpt_num_params(&h.gpt), 354823168ull); /* HF gpt2-medium's num_parameters() */
    assert_string_equal(shs_hf_config_context_key(&h), "n_positions");
    static const char qwen2[] =
        "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
        " \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 300,"
        " \"max_position_embeddings\": 128, \"use_sliding_window\": false, \"sliding_window\": null,"
        " \"max_window_layers\": 3, \"layer_types\": [\"full_attention\", \"full_attention\", \"full_attention\"],"
        " \"_attn_implementation_autoset\": true, \"_name_or_path\": \"x\"}";
    parse_ok(qwen2, &h);
    assert_int_equal(h.llama.num_layers, 3);
    assert_int_equal(h.llama.qkv_bias, 1);
    static const char llama32_1b[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
        " \"bos_token_id\": 128000, \"eos_token_id\": 128001, \"head_dim\": 64, \"hidden_act\": \"silu\","
        " \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192,"
        " \"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\","
        " \"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1,"
        " \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0,"
        " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"},"
        " \"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
        " \"transformers_version\": \"4.45.0.dev0\", \"use_cache\": true, \"vocab_size\": 128256}";
    parse_ok(llama32_1b, &h);
    assert_int_equal(count_cfg(&h.llama), 1235814400ull); /* Llama-3.2-1B's published count */
    assert_int_equal(shs_hf_config_context(&h), 8192);
    assert_string_equal(shs_hf_config_context_key(&h), "rope_scaling.original_max_position_embeddings");
    static const char tinyllama[] =
        "{\"_name_or_path\": \"/data/tianduo/tinyllama-ft/checkpoint-3000\", \"architectures\": [\"LlamaForCausalLM\"],"
        " \"attention_bias\": false, \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\","
        " \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 5632,"
        " \"max_position_embeddings\": 2048, \"model_type\": \"llama\", \"num_attention_heads\": 32,"
        " \"num_hidden_layers\": 22, \"num_key_value_heads\": 4, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05,"
        " \"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false,"
        " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.35.0\", \"use_cache\": true,"
        " \"vocab_size\": 32000}";
    parse_ok(tinyllama, &h);
    assert_int_equal(count_cfg(&h.llama), 1100048384ull); /* TinyLlama-1.1B's published count */
    assert_string_equal(shs_hf_config_context_key(&h), "max_position_embeddings");
}

/* What still is refused among those keys, and the messages of numbers out
 * of range: each names the file and the key, and says what is wrong. */
static void test_published_keys_refusals(void **state) {
    (void)state;
#define LL "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 96, " \
           "\"max_position_embeddings\": 128"
#define G2 "\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_layer\": 1, \"n_head\": 4, \"n_positions\": 32, \"vocab_size\": 300"
    static const struct {
        const char *text, *want1, *want2;
    } cases[] = {
        {"{" G2 ", \"n_special\": 2}", "\"n_special\"", "0 only"},
        {"{" G2 ", \"predict_special_tokens\": 1}", "\"predict_special_tokens\"", "true or false"},
        {"{\"model_type\": \"qwen2\", " LL ", \"vocab_size\": 300, \"layer_types\": [\"full_attention\", "
         "\"sliding_attention\"]}", "\"layer_types\"", "use_sliding_window gives no window"},
        {"{\"model_type\": \"qwen2\", " LL ", \"vocab_size\": 300, \"layer_types\": [\"full_attention\"]}",
         "\"layer_types\"", "has 1 entries, num_hidden_layers is 2"},
        {"{\"model_type\": \"llama\", " LL ", \"vocab_size\": 300, \"rope_parameters\": {}}", "\"rope_parameters\"",
         "not modelled"},
        {"{\"model_type\": \"llama\", " LL ", \"vocab_size\": 1000000000000}", "\"vocab_size\"",
         "1000000000000 is too large: at most 2147483647"},
        {"{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
         "\"intermediate_size\": 1099511627776, \"max_position_embeddings\": 128, \"vocab_size\": 300}",
         "\"intermediate_size\"", "1099511627776 is too large: at most 2147483647"},
        {"{\"model_type\": \"llama\", " LL ", \"vocab_size\": 300, \"rms_norm_eps\": 1e300}", "\"rms_norm_eps\"",
         "1e+300 is out of range"},
        {"{\"model_type\": \"llama\", " LL ", \"vocab_size\": 300, \"rms_norm_eps\": 1e-60}", "\"rms_norm_eps\"",
         "1e-60 is out of range"},
    };
#undef LL
#undef G2
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        shs_hf_config_t h;
        shs_status_t st = shs_hf_config_parse(cases[i].text, strlen(cases[i].text), "c.json", &h);
        const char *e = shs_last_error();
        if (st == SHS_OK || !strstr(e, "c.json") || !strstr(e, cases[i].want1) || !strstr(e, cases[i].want2))
            fail_msg("case %zu: status %d, error '%s'; want '%s' and '%s'\n--- text:\n%s", i, (int)st, e,
                     cases[i].want1, cases[i].want2, cases[i].text);
    }
}

#else

/* Built without jansson: a clear refusal naming the library and its package. */
static void test_without_jansson(void **state) {
    (void)state;
    shs_hf_config_t h;
    assert_int_equal(shs_hf_config_parse(llama3_8b_config_json, strlen(llama3_8b_config_json), "c.json", &h),
                     SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "built without jansson"));
    assert_non_null(strstr(shs_last_error(), "libjansson-dev"));
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_presets),
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_llama3_8b_file),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_rope_scaling_llama3),
        cmocka_unit_test(test_mistral_qwen2),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_published_keys),
        cmocka_unit_test(test_published_keys_refusals),
#else
        cmocka_unit_test(test_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
