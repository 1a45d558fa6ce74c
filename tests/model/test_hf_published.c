/* test_hf_published.c - 40 published config.json files of dense decoder
 * families (tests/model/hf_published_configs.h, each citing where its keys
 * were read) through the config reader (hf_config.h): every one accepted,
 * its parameter count equal to the count published for it (exactly, or at
 * the published rounding), and equal to the count summed here from the
 * config's tensor list; the family features its keys say, checked for one
 * file of each family. Prints the table (file, published, shardsim,
 * accepted).
 * Independent references: the published counts (model cards, Hub pages,
 * HF num_parameters(), safetensors totals: the row says which), and the
 * count by hand below (not through the library).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/hf_published_configs.h"
#include "shardsim/hf_config.h"
#include "shardsim/model_preset.h"

#define NUM_FILES (sizeof hf_published / sizeof hf_published[0])

#ifdef SHS_HAVE_JANSSON

/* Parameters of a parsed shape from its tensors: per layer one C per
 * RMSNorm, q (QD x C), k and v (KVD x C), o (C x QD), gate, up, down (3 C
 * I), q/k/v biases (QD + 2 KVD) with qkv_bias or attention_bias, the o bias
 * (C) with attention_bias, q/k norms (2 HD per head, QD + KVD whole);
 * embedding V C, final norm C, head V C unless tied. gpt2: 12 L C^2 + 13 L
 * C + (V + T) C + 2 C. */
static uint64_t count_by_hand(const shs_hf_config_t *h) {
    if (h->arch == SHS_ARCH_GPT) {
        uint64_t L = (uint64_t)h->gpt.num_layers, C = (uint64_t)h->gpt.channels, V = (uint64_t)h->gpt.vocab;
        uint64_t T = (uint64_t)h->gpt.context;
        return 12 * L * C * C + 13 * L * C + (V + T) * C + 2 * C;
    }
    const shs_llama_config_t *c = &h->llama;
    uint64_t C = (uint64_t)c->hidden, NH = (uint64_t)c->num_heads, NKV = (uint64_t)c->num_kv_heads;
    uint64_t HD = c->head_dim ? (uint64_t)c->head_dim : C / NH, QD = NH * HD, KVD = NKV * HD;
    uint64_t I = (uint64_t)c->intermediate, V = (uint64_t)c->vocab, L = (uint64_t)c->num_layers;
    unsigned norms = c->norms ? c->norms : 5u;
    uint64_t nnorms = (norms & 1) + (norms >> 1 & 1) + (norms >> 2 & 1) + (norms >> 3 & 1);
    uint64_t layer = nnorms * C + C * QD + 2 * C * KVD + QD * C + 3 * C * I;
    if (c->qkv_bias || c->attention_bias) layer += QD + 2 * KVD;
    if (c->attention_bias) layer += C;
    if (c->qk_norm == SHS_QK_NORM_HEAD) layer += 2 * HD;
    if (c->qk_norm == SHS_QK_NORM_ALL) layer += QD + KVD;
    return L * layer + V * C + C + (c->tie_word_embeddings ? 0 : V * C);
}

static uint64_t count_of(const shs_hf_config_t *h) {
    return h->arch == SHS_ARCH_GPT ? shs_gpt_num_params(&h->gpt) : shs_llama_num_params(&h->llama);
}

static uint64_t rounded(uint64_t x, uint64_t unit) { return (x + unit / 2) / unit * unit; }

static void parse_file(size_t i, shs_hf_config_t *h) {
    const hf_published_t *f = &hf_published[i];
    if (shs_hf_config_parse(f->json, strlen(f->json), f->model, h) != SHS_OK)
        fail_msg("%s: refused: %s", f->model, shs_last_error());
}

/* Every file accepted with its published count; the table. */
static void test_all_accepted_with_published_counts(void **state) {
    (void)state;
    printf("%-36s %-16s %16s %8s  %s\n", "file", "model_type", "shardsim", "ratio", "published (by)");
    for (size_t i = 0; i < NUM_FILES; i++) {
        const hf_published_t *f = &hf_published[i];
        shs_hf_config_t h;
        parse_file(i, &h);
        uint64_t n = count_of(&h);
        printf("%-36s %-16s %16llu %8.5f  %llu (%s)\n", f->model, h.model_type, (unsigned long long)n,
               (double)n / (double)f->published, (unsigned long long)f->published, f->published_by);
        if (n != count_by_hand(&h)) fail_msg("%s: %llu by the library, %llu by hand", f->model,
                                             (unsigned long long)n, (unsigned long long)count_by_hand(&h));
        if (rounded(n, f->unit) != f->published)
            fail_msg("%s: %llu parameters round to %llu, the published %llu", f->model, (unsigned long long)n,
                     (unsigned long long)rounded(n, f->unit), (unsigned long long)f->published);
        assert_true(shs_hf_config_context(&h) >= 1);
    }
    assert_int_equal(NUM_FILES, 40);
}

static const shs_hf_config_t *find(const char *model, shs_hf_config_t *h) {
    for (size_t i = 0; i < NUM_FILES; i++)
        if (!strcmp(hf_published[i].model, model)) {
            parse_file(i, h);
            return h;
        }
    fail_msg("no file %s", model);
    return NULL;
}

/* What each family's keys say, one file each. */
static void test_family_features(void **state) {
    (void)state;
    shs_hf_config_t h;
    const shs_llama_config_t *c = &find("google/gemma-2-9b", &h)->llama;
    assert_int_equal(c->head_dim, 256); /* 3584 / 16 = 224: head_dim is its own */
    assert_int_equal(c->act, SHS_LLAMA_ACT_GELU_TANH);
    assert_int_equal(c->norms, 15u);
    assert_true(c->norm_plus_one && c->embed_scale && c->tie_word_embeddings);
    assert_true(c->attn_softcap == 50.0f && c->final_softcap == 30.0f && c->query_pre_attn_scalar == 256);
    assert_int_equal(c->sliding_window, 4096);
    assert_int_equal(shs_llama_layer_window(c, 0), 4096);
    assert_int_equal(shs_llama_layer_window(c, 1), 0);
    c = &find("google/gemma-2-27b", &h)->llama;
    assert_true(c->query_pre_attn_scalar == 144 && c->head_dim == 128);
    c = &find("google/gemma-3-1b-it", &h)->llama;
    assert_int_equal(c->qk_norm, SHS_QK_NORM_HEAD);
    assert_int_equal(c->sliding_window, 512);
    assert_int_equal(c->window_pattern, 6);
    assert_int_equal(shs_llama_layer_window(c, 5), 0);
    assert_int_equal(shs_llama_layer_window(c, 6), 512);
    assert_true(c->rope_local_theta == 10000 && c->rope_theta == 1000000);
    assert_true(c->attn_softcap == 0 && c->final_softcap == 0);
    c = &find("google/gemma-2b", &h)->llama; /* hidden_act "gelu": ignored for gelu_pytorch_tanh */
    assert_int_equal(c->act, SHS_LLAMA_ACT_GELU_TANH);
    assert_int_equal(c->num_kv_heads, 1);
    c = &find("Qwen/Qwen3-0.6B", &h)->llama;
    assert_int_equal(c->head_dim, 128); /* 1024 / 16 = 64 */
    assert_int_equal(c->qk_norm, SHS_QK_NORM_HEAD);
    assert_true(c->tie_word_embeddings && !c->qkv_bias && c->sliding_window == 0);
    c = &find("mistralai/Mistral-7B-v0.1", &h)->llama;
    assert_int_equal(c->sliding_window, 4096);
    assert_int_equal(shs_llama_layer_window(c, 0), 4096);
    assert_int_equal(shs_hf_config_context(&h), 32768); /* no longer capped by the window */
    c = &find("microsoft/Phi-3-mini-4k-instruct", &h)->llama;
    assert_int_equal(c->names, SHS_LLAMA_NAMES_PHI3);
    assert_int_equal(c->sliding_window, 2047);
    c = &find("microsoft/Phi-3.5-mini-instruct", &h)->llama;
    assert_int_equal(c->rope_scaling.kind, SHS_ROPE_SCALING_LONGROPE);
    assert_int_equal(c->rope_scaling.num_factors, 48);
    assert_true(c->rope_scaling.long_factor[0] == 1.0800000429153442f);
    assert_int_equal(c->rope_scaling.original_max_position_embeddings, 4096);
    assert_int_equal(shs_hf_config_context(&h), 4096);
    assert_string_equal(shs_hf_config_context_key(&h), "original_max_position_embeddings");
    assert_non_null(strstr(h.notes, "sliding_window 262144")); /* beyond max_position_embeddings 131072 */
    c = &find("microsoft/Phi-4-mini-instruct", &h)->llama;
    assert_int_equal(c->rotary_dim, 96); /* 128 x 0.75 */
    assert_true(c->tie_word_embeddings);
    c = &find("allenai/OLMo-2-1124-7B", &h)->llama;
    assert_int_equal(c->norms, (unsigned)(SHS_LLAMA_NORM_ATTN_OUT | SHS_LLAMA_NORM_MLP_OUT));
    assert_int_equal(c->qk_norm, SHS_QK_NORM_ALL);
    c = &find("internlm/internlm2_5-7b-chat", &h)->llama;
    assert_int_equal(c->names, SHS_LLAMA_NAMES_INTERNLM2);
    assert_int_equal(c->rope_scaling.kind, SHS_ROPE_SCALING_DYNAMIC);
    assert_non_null(strstr(h.notes, "dynamic"));
    c = &find("meta-llama/Llama-2-13b-hf", &h)->llama; /* the early revision's pretraining_tp 2 */
    assert_non_null(strstr(h.notes, "pretraining_tp 2"));
    c = &find("HuggingFaceTB/SmolLM2-135M", &h)->llama; /* is_llama_config, rope_interleaved false */
    assert_int_equal(c->num_kv_heads, 3);
    assert_string_equal(h.notes, "");
}

/* The presets beside the files: their shapes are the files' and their
 * published counts the same. */
static void test_presets_match_files(void **state) {
    (void)state;
    static const struct {
        const char *preset, *model;
    } pairs[] = {
        {"llama3.1-8b", "meta-llama/Llama-3.1-8B"},    {"llama3.2-1b", "meta-llama/Llama-3.2-1B"},
        {"llama3.2-3b", "meta-llama/Llama-3.2-3B"},    {"mistral-7b", "mistralai/Mistral-7B-v0.1"},
        {"qwen2.5-7b", "Qwen/Qwen2.5-7B"},              {"qwen3-0.6b", "Qwen/Qwen3-0.6B"},
        {"gemma-2b", "google/gemma-2b"},               {"gemma2-9b", "google/gemma-2-9b"},
        {"gemma2-27b", "google/gemma-2-27b"},          {"gemma3-1b", "google/gemma-3-1b-it"},
        {"phi3-mini", "microsoft/Phi-3-mini-4k-instruct"}, {"olmo2-7b", "allenai/OLMo-2-1124-7B"},
        {"olmo2-13b", "allenai/OLMo-2-1124-13B"},       {"internlm2.5-7b", "internlm/internlm2_5-7b-chat"},
        {"smollm2-360m", "HuggingFaceTB/SmolLM2-360M"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const shs_model_preset_t *p = shs_model_preset_find(pairs[i].preset);
        if (!p) fail_msg("no preset %s", pairs[i].preset);
        shs_hf_config_t h;
        find(pairs[i].model, &h);
        if (shs_llama_num_params(&p->llama) != shs_llama_num_params(&h.llama))
            fail_msg("%s: %llu parameters, the file %llu", pairs[i].preset,
                     (unsigned long long)shs_llama_num_params(&p->llama),
                     (unsigned long long)shs_llama_num_params(&h.llama));
        if (rounded(shs_llama_num_params(&p->llama), p->published_unit) != p->published_params)
            fail_msg("%s: its count does not round to its published %llu", pairs[i].preset,
                     (unsigned long long)p->published_params);
        char a[256], b[256];
        shs_llama_describe_extras(&p->llama, a, sizeof a);
        shs_llama_describe_extras(&h.llama, b, sizeof b);
        if (strcmp(a, b)) fail_msg("%s: extensions '%s', the file's '%s'", pairs[i].preset, a, b);
        assert_int_equal(p->llama.sliding_window, h.llama.sliding_window);
        assert_int_equal(p->llama.max_position, h.llama.max_position);
        assert_true(p->llama.rope_theta == h.llama.rope_theta);
    }
}

#else

/* Built without jansson: each file refused naming the library. */
static void test_without_jansson(void **state) {
    (void)state;
    shs_hf_config_t h;
    assert_int_equal(shs_hf_config_parse(hf_published[0].json, strlen(hf_published[0].json), "c.json", &h),
                     SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "libjansson-dev"));
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_all_accepted_with_published_counts),
        cmocka_unit_test(test_family_features),
        cmocka_unit_test(test_presets_match_files),
#else
        cmocka_unit_test(test_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
