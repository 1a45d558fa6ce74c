/* test_hf_cli.c - `shardsim train --hf-config` and `shardsim compare
 * --hf-config / --model <Llama-family preset>` (sim/model_choice.c,
 * sim/train_options.c, sim/cmd_compare.c), run as a child process.
 *
 * Independent references: the published parameter counts (Llama 3 8B
 * 8,030,261,248; Llama 3 70B 70,553,706,496), the public Meta-Llama-3-8B
 * config.json (tests/model/hf_llama3_8b_config.h), DDP's bits (--check ddp)
 * for the sharded run, and the keys each refusal must name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "model/hf_published_configs.h"
#include "run_record.h"
#include "shardsim/features.h"

#define run_args(...) test_shardsim(120.0, __VA_ARGS__)

/* GQA (4 heads, 2 key/value heads), untied head, byte vocabulary */
static const char tiny_llama[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 64,\n"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 96,\n"
    " \"vocab_size\": 256, \"max_position_embeddings\": 128, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0,\n"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\", \"hidden_act\": \"silu\"}\n";

static void expect(const test_proc_t *p, int code, const char *in_out, const char *in_err) {
    if (p->exit_code != code || (in_out && !strstr(p->out, in_out)) || (in_err && !strstr(p->err, in_err)))
        fail_msg("exit %d (want %d); want stdout to hold '%s', stderr '%s'\n--- stdout:\n%s\n--- stderr:\n%s",
                 p->exit_code, code, in_out ? in_out : "", in_err ? in_err : "", p->out, p->err);
}

/* The first check: a tiny GQA Llama with an untied head, ZeRO-3 on
 * 4 ranks, bit-identical to DDP; the header names the file and shape. */
static void test_train_hf_zero3_check(void **state) {
    (void)state;
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) skip();
    const char *f = test_tmp_write("tiny.json", tiny_llama, strlen(tiny_llama));
    const test_proc_t *p = run_args("train", "--hf-config", f, "--world", "4", "--strategy", "zero3", "--check", "ddp",
                                    "--steps", "2", "--context", "32", NULL);
    expect(p, 0, "matched DDP bit for bit", NULL);
    expect(p, 0, "llama L=2 C=64 NH=4 NKV=2 I=96 V=256 T=32", NULL);
    /* 2 (64 + 64*64*2 + 64*32*2 + 3*64*96 + 64) + 2*256*64 + 64, by hand */
    expect(p, 0, "94528 params", NULL);
    expect(p, 0, "torch_dtype f32", NULL);
}

/* compare --model llama3-70b at 64 H100s runs and counts the published
 * parameters; the Llama-3-8B config.json gives the llama3-8b preset's count,
 * and its torch_dtype (bfloat16) is the param dtype unless --param-dtype
 * says otherwise. */
static void test_compare_llama(void **state) {
    (void)state;
    const test_proc_t *p = run_args("compare", "--model", "llama3-70b", "--world", "64", "--gpu", "h100-sxm",
                                    "--variants", "plain", "--strategies", "zero3", NULL);
    expect(p, 0, "70553706496 parameters", NULL);
    expect(p, 0, "llama3-70b: llama L=80 C=8192 NH=64 NKV=8 I=28672 V=128256 T=8192", NULL);
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) return;
    const char *f = test_tmp_write("config.json", llama3_8b_config_json, strlen(llama3_8b_config_json));
    p = run_args("compare", "--hf-config", f, "--variants", "plain", "--strategies", "zero3", "--param-dtype", "f32", NULL);
    expect(p, 0, "8030261248 parameters", NULL);
    expect(p, 0, "param dtype f32", NULL);
    p = run_args("compare", "--hf-config", f, "--variants", "plain", "--strategies", "zero3", NULL);
    expect(p, 0, "8030261248 parameters", NULL);
    expect(p, 0, "param dtype bf16", NULL);
    const char *t = test_tmp_write("tiny.json", tiny_llama, strlen(tiny_llama)); /* torch_dtype float32 */
    p = run_args("compare", "--hf-config", t, "--variants", "plain", "--strategies", "ddp", NULL);
    expect(p, 0, "param dtype f32", NULL); /* not compare's default bf16 */
}

/* Usage errors (exit 2) and bad files (exit 1), each naming what is wrong. */
static void test_refusals(void **state) {
    (void)state;
    const test_proc_t *p = run_args("compare", "--help", NULL);
    expect(p, 0, "llama3.1-405b", NULL);
    p = run_args("compare", "--model", "mistral-7b", "--context", "40000", NULL);
    expect(p, 2, NULL, "max_position_embeddings");
    p = run_args("compare", "--model", "llama3-8b", "--layers", "4", NULL);
    expect(p, 2, NULL, "llama3-8b");
    p = run_args("compare", "--model", "llama3-8b", "--context", "16384", NULL);
    expect(p, 2, NULL, "max_position_embeddings");
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) {
        const char *f = test_tmp_write("tiny.json", tiny_llama, strlen(tiny_llama));
        p = run_args("train", "--hf-config", f, "--steps", "1", NULL);
        expect(p, 1, NULL, "built without jansson");
        return;
    }
    const char *f = test_tmp_write("tiny.json", tiny_llama, strlen(tiny_llama));
    p = run_args("train", "--hf-config", f, "--model-file", f, NULL);
    expect(p, 2, NULL, "--model-file");
    p = run_args("train", "--hf-config", f, "--channels", "128", NULL);
    expect(p, 2, NULL, "--channels");
    p = run_args("compare", "--hf-config", f, "--model", "llama3-8b", NULL);
    expect(p, 2, NULL, "--model");
    p = run_args("train", "--hf-config", f, "--context", "256", NULL);
    expect(p, 2, NULL, "max_position_embeddings");
    static const char small_vocab[] =
        "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
        " \"intermediate_size\": 96, \"vocab_size\": 100, \"max_position_embeddings\": 128}";
    const char *s = test_tmp_write("small.json", small_vocab, strlen(small_vocab));
    p = run_args("train", "--hf-config", s, NULL);
    expect(p, 2, NULL, "vocab_size 100");
    static const char biased[] =
        "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
        " \"intermediate_size\": 96, \"vocab_size\": 300, \"max_position_embeddings\": 128, \"mlp_bias\": true}";
    const char *b = test_tmp_write("biased.json", biased, strlen(biased));
    p = run_args("compare", "--hf-config", b, NULL);
    expect(p, 1, NULL, "\"mlp_bias\"");
    expect(p, 1, NULL, "biased.json");
}

/* Qwen2.5-7B's public config.json (max_position_embeddings 131072, no
 * rope_scaling): compare's default context is the model's capped at
 * compare's 65536, and the header says so; the count is Qwen2.5-7B's
 * published 7,615,616,512. --help says where the default context comes
 * from, Llama-3.1's original_max_position_embeddings included. */
static void test_compare_context_cap(void **state) {
    (void)state;
    const test_proc_t *p = run_args("compare", "--help", NULL);
    expect(p, 0, "rope_scaling.original_max_position_embeddings", NULL);
    expect(p, 0, "(Llama-3.1: 8192)", NULL);
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) return;
    static const char qwen25_7b[] =
        "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
        " \"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 3584, \"initializer_range\": 0.02,"
        " \"intermediate_size\": 18944, \"max_position_embeddings\": 131072, \"max_window_layers\": 28,"
        " \"model_type\": \"qwen2\", \"num_attention_heads\": 28, \"num_hidden_layers\": 28,"
        " \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 131072,"
        " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.1\","
        " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 152064}";
    const char *f = test_tmp_write("qwen2.5-7b-config.json", qwen25_7b, strlen(qwen25_7b));
    p = run_args("compare", "--hf-config", f, "--variants", "plain", "--strategies", "zero3", NULL);
    expect(p, 0, "T=65536", NULL);
    expect(p, 0, "max_position_embeddings 131072 capped at compare's 65536", NULL);
    expect(p, 0, "7615616512 parameters", NULL);
    p = run_args("compare", "--hf-config", f, "--variants", "plain", "--strategies", "zero3", "--context", "4096",
                 NULL);
    expect(p, 0, "T=4096", NULL);
    if (strstr(p->out, "capped")) fail_msg("a given --context is not capped:\n%s", p->out);
}

/* One tiny config.json per family beyond Llama (keys as the families'
 * published files spell them), each with its family's features on, byte
 * vocabulary, f32. */
static const struct {
    const char *family, *json, *shape;
} family_files[] = {
    {"mistral", "{\"model_type\": \"mistral\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 256, "
     "\"max_position_embeddings\": 128, \"sliding_window\": 8, \"torch_dtype\": \"float32\"}", ", window 8"},
    {"qwen2", "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 256, "
     "\"max_position_embeddings\": 128, \"use_sliding_window\": true, \"sliding_window\": 8, "
     "\"max_window_layers\": 1, \"tie_word_embeddings\": true, \"torch_dtype\": \"float32\"}",
     ", qkv bias, window 8 from layer 1"},
    {"qwen3", "{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32, \"intermediate_size\": 96, "
     "\"vocab_size\": 256, \"max_position_embeddings\": 128, \"attention_bias\": true, "
     "\"tie_word_embeddings\": true, \"torch_dtype\": \"float32\"}", " HD=32"},
    {"gemma", "{\"model_type\": \"gemma\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 32, \"intermediate_size\": 96, "
     "\"vocab_size\": 256, \"max_position_embeddings\": 128, \"hidden_act\": \"gelu\", \"torch_dtype\": \"float32\"}",
     ", GeGLU"},
    {"gemma2", "{\"model_type\": \"gemma2\", \"hidden_size\": 64, \"num_hidden_layers\": 3, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, \"intermediate_size\": 96, "
     "\"vocab_size\": 256, \"max_position_embeddings\": 128, \"sliding_window\": 8, \"query_pre_attn_scalar\": 16, "
     "\"attn_logit_softcapping\": 2.0, \"final_logit_softcapping\": 1.5, \"torch_dtype\": \"float32\"}",
     ", soft caps"},
    {"gemma3_text", "{\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"num_hidden_layers\": 3, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 16, \"intermediate_size\": 96, "
     "\"vocab_size\": 256, \"max_position_embeddings\": 128, \"sliding_window\": 8, \"sliding_window_pattern\": 3, "
     "\"query_pre_attn_scalar\": 16, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}, "
     "\"torch_dtype\": \"float32\"}", ", q/k head norms"},
    {"phi3", "{\"model_type\": \"phi3\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 256, "
     "\"max_position_embeddings\": 128, \"original_max_position_embeddings\": 8, \"partial_rotary_factor\": 0.5, "
     "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1.0, 1.5, 2.0, 3.0], "
     "\"long_factor\": [2.0, 3.0, 5.0, 9.0]}, \"sliding_window\": 9, \"embd_pdrop\": 0.0, \"torch_dtype\": \"float32\"}",
     ", partial rotary, longrope"},
    {"olmo2", "{\"model_type\": \"olmo2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 256, "
     "\"max_position_embeddings\": 128, \"torch_dtype\": \"float32\"}", ", q/k norms, post-norms"},
    {"internlm2", "{\"model_type\": \"internlm2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 256, "
     "\"max_position_embeddings\": 128, \"bias\": true, \"torch_dtype\": \"float32\"}", ", attention bias"},
};

/* Each family's tiny config: ZeRO-3 on 4 ranks bit-identical to DDP, the
 * header naming its model_type and its features; and compare accepts it. */
static void test_train_families_zero3_check(void **state) {
    (void)state;
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) skip();
    for (size_t i = 0; i < sizeof family_files / sizeof family_files[0]; i++) {
        const char *f = test_tmp_write("family.json", family_files[i].json, strlen(family_files[i].json));
        const test_proc_t *p = run_args("train", "--hf-config", f, "--world", "4", "--strategy", "zero3", "--check",
                                        "ddp", "--steps", "2", "--context", "16", NULL);
        char mt[64];
        snprintf(mt, sizeof mt, "model_type %s", family_files[i].family);
        expect(p, 0, "matched DDP bit for bit", NULL);
        expect(p, 0, mt, NULL);
        expect(p, 0, family_files[i].shape, NULL);
        if (i % 3 != 1) continue; /* compare for a third of them: its reading is the config reader's */
        p = run_args("compare", "--hf-config", f, "--variants", "plain", "--strategies", "zero3", "--context", "64",
                     NULL);
        expect(p, 0, mt, NULL);
    }
}

/* Mixtures of experts and the multimodal Gemma 3 are refused by name; a
 * pretraining_tp of 2 is accepted and said in the header. */
static void test_family_refusals(void **state) {
    (void)state;
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) skip();
    static const char *const moe[] = {"mixtral", "qwen3_moe", "deepseek_v3", "olmoe"};
    for (size_t i = 0; i < 4; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"model_type\": \"%s\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 256, "
                 "\"max_position_embeddings\": 128}", moe[i]);
        const char *f = test_tmp_write("moe.json", json, strlen(json));
        const test_proc_t *p = run_args("compare", "--hf-config", f, NULL);
        expect(p, 1, NULL, "needs expert parallelism");
        expect(p, 1, NULL, moe[i]);
    }
    static const char gemma3[] = "{\"model_type\": \"gemma3\", \"text_config\": {}}";
    const char *f = test_tmp_write("gemma3.json", gemma3, strlen(gemma3));
    expect(run_args("compare", "--hf-config", f, NULL), 1, NULL, "gemma3_text");
    static const char tp2[] =
        "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
        "\"intermediate_size\": 96, \"vocab_size\": 256, \"max_position_embeddings\": 128, \"pretraining_tp\": 2}";
    f = test_tmp_write("tp2.json", tp2, strlen(tp2));
    const test_proc_t *p = run_args("train", "--hf-config", f, "--steps", "1", NULL);
    expect(p, 0, "pretraining_tp 2", NULL);
    static const char bad_window[] =
        "{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
        "\"intermediate_size\": 96, \"vocab_size\": 256, \"max_position_embeddings\": 128, "
        "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}";
    f = test_tmp_write("bad_window.json", bad_window, strlen(bad_window));
    p = run_args("train", "--hf-config", f, NULL);
    expect(p, 1, NULL, "bad_window.json");
    expect(p, 1, NULL, "\"layer_types\"");
}

/* The 40 published config.json files (tests/model/hf_published_configs.h)
 * through compare: each accepted, and the count it prints rounding to the
 * one published for it. make test runs every 4th (one of each family's
 * rows at least); make test-full all 40. */
static void test_compare_published_files(void **state) {
    (void)state;
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) skip();
    size_t n = sizeof hf_published / sizeof hf_published[0], step = test_full_sweep() ? 1 : 4, ran = 0;
    for (size_t i = 0; i < n; i += step, ran++) {
        const hf_published_t *h = &hf_published[i];
        const char *f = test_tmp_write("published.json", h->json, strlen(h->json));
        const test_proc_t *p = run_args("compare", "--hf-config", f, "--variants", "plain", "--strategies", "zero3",
                                        "--context", "1024", NULL);
        const char *at = strstr(p->out, " parameters");
        if (p->exit_code != 0 || !at) fail_msg("%s: compare exit %d: %s", h->model, p->exit_code, p->err);
        const char *num = at;
        while (num > p->out && num[-1] >= '0' && num[-1] <= '9') num--;
        unsigned long long count = strtoull(num, NULL, 10);
        if ((count + h->unit / 2) / h->unit * h->unit != h->published)
            fail_msg("%s: compare counts %llu, published %llu", h->model, count, (unsigned long long)h->published);
    }
    assert_true(ran >= 10);
}

int main(void) {
    if (access(SHS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_hf_cli: %s is not built (run make)\n", SHS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_hf_zero3_check),
        cmocka_unit_test(test_compare_llama),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_compare_context_cap),
        cmocka_unit_test(test_train_families_zero3_check),
        cmocka_unit_test(test_family_refusals),
        cmocka_unit_test(test_compare_published_files),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
