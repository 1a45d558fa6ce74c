/* test_llama_train.c - training a Llama (train.h arch SHS_ARCH_LLAMA): ZeRO-1,
 * ZeRO-2, ZeRO-3 and hybrid sharding with one replica bit-identical to DDP
 * (with several replicas hybrid sums in another order, as for the GPT) (eager, flash,
 * full and selective recompute, tied head with q/k/v biases, size-based
 * wrapping of decoder layers, autocast bf16 and f16 with f32 or 16-bit
 * parameters), autocast changing the run, the safetensors export's Hugging
 * Face names, and the refusals of what the Llama does not do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/safetensors.h"
#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

#define STEPS 3

/* GQA (4 heads, 2 key/value heads of 6), untied. Units: embed 6144,
 * layer 4656, norm 24, lm_head 6144 elements: 3 and 5 pad some of them. */
static shs_train_config_t llama_config(int world, shs_strategy_kind_t kind) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.arch = SHS_ARCH_LLAMA;
    cfg.llama = (shs_llama_config_t){.num_layers = 2, .hidden = 24, .num_heads = 4, .num_kv_heads = 2,
                                     .intermediate = 40, .vocab = 256, .max_position = 64, .rms_norm_eps = 1e-5f,
                                     .rope_theta = 10000.0};
    cfg.model.context = 16;
    cfg.world_size = world;
    cfg.micro_batch = 2;
    cfg.strategy.kind = kind;
    cfg.strategy.bucket_bytes = 8192; /* several DDP buckets */
    cfg.timeout_ms = 20000;
    return cfg;
}

typedef struct {
    const char *what;
    int world, G, tied, bias;
    shs_recompute_t recompute;
    shs_attention_kind_t attention;
    size_t wrap;
    shs_dtype_t autocast, param;
    int every;
} lcase_t;

static void check_equivalence(const lcase_t *c) {
    shs_train_config_t cfg = llama_config(c->world, SHS_DDP);
    cfg.llama.tie_word_embeddings = c->tied;
    cfg.llama.qkv_bias = c->bias;
    cfg.recompute = c->recompute;
    cfg.recompute_every = c->every;
    cfg.attention = c->attention;
    cfg.wrap_min_params = c->wrap;
    cfg.autocast = c->autocast;
    cfg.strategy.param_dtype = c->param;
    run_record_t ddp = {0};
    record_run(&cfg, &test_corpus, STEPS, &ddp);
    shs_strategy_kind_t kinds[] = {SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_HYBRID_SHARD};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (kinds[k] == SHS_HYBRID_SHARD && !c->G) continue;
        cfg.strategy.kind = kinds[k];
        cfg.strategy.shard_group_size = kinds[k] == SHS_HYBRID_SHARD ? c->G : 0;
        run_record_t z = {0};
        record_run(&cfg, &test_corpus, STEPS, &z);
        assert_int_equal(z.len, ddp.len);
        assert_same_run(&ddp, &z);
        free_record(&z);
    }
    /* training moved the parameters: the comparison was not vacuous (three
     * steps on different batches need not lower the loss) */
    assert_memory_not_equal(ddp.snap[0], ddp.snap[STEPS - 1], ddp.len * sizeof(float));
    free_record(&ddp);
}

static void test_zero_stages_equal_ddp(void **state) {
    (void)state;
    const lcase_t cases[] = {
        {.what = "eager N=3", .world = 3},
        {.what = "eager N=4 hybrid G=4 (one replica: ZeRO-3's bits)", .world = 4, .G = 4},
        {.what = "flash full recompute N=5", .world = 5, .recompute = SHS_RECOMPUTE_FULL,
         .attention = SHS_ATTENTION_FLASH},
        {.what = "tied qkv_bias selective N=2", .world = 2, .tied = 1, .bias = 1,
         .recompute = SHS_RECOMPUTE_SELECTIVE},
        {.what = "size-based wrap N=3", .world = 3, .wrap = 1},
        {.what = "autocast bf16 f32 params eager N=3", .world = 3, .autocast = SHS_BF16},
        {.what = "autocast bf16 bf16 params flash full recompute N=4", .world = 4, .autocast = SHS_BF16,
         .param = SHS_BF16, .attention = SHS_ATTENTION_FLASH, .recompute = SHS_RECOMPUTE_FULL},
        {.what = "autocast f16 f16 params (loss scaling) tied qkv_bias selective N=2", .world = 2, .tied = 1,
         .bias = 1, .autocast = SHS_F16, .param = SHS_F16, .recompute = SHS_RECOMPUTE_SELECTIVE},
        {.what = "autocast bf16 op-level SAC flash N=4", .world = 4, .autocast = SHS_BF16,
         .recompute = SHS_RECOMPUTE_SELECTIVE_OP, .attention = SHS_ATTENTION_FLASH},
        {.what = "op-level SAC eager qkv_bias N=3", .world = 3, .bias = 1, .recompute = SHS_RECOMPUTE_SELECTIVE_OP},
        {.what = "autocast bf16 bf16 params every 2nd layer N=4", .world = 4, .autocast = SHS_BF16,
         .param = SHS_BF16, .recompute = SHS_RECOMPUTE_EVERY_N, .every = 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_equivalence(&cases[i]);
}

/* Autocast is not ignored: bf16 autocast moves the losses away from the
 * f32 run's, and f32 and bf16 parameters (f32 or bf16 residual stream)
 * give different runs. */
static void test_autocast_changes_the_run(void **state) {
    (void)state;
    shs_train_config_t cfg = llama_config(2, SHS_ZERO3);
    run_record_t plain = {0}, f32p = {0}, bf16p = {0};
    record_run(&cfg, &test_corpus, STEPS, &plain);
    cfg.autocast = SHS_BF16;
    record_run(&cfg, &test_corpus, STEPS, &f32p);
    cfg.strategy.param_dtype = SHS_BF16;
    record_run(&cfg, &test_corpus, STEPS, &bf16p);
    assert_memory_not_equal(plain.loss, f32p.loss, sizeof plain.loss);
    assert_memory_not_equal(f32p.loss, bf16p.loss, sizeof plain.loss);
    free_record(&plain);
    free_record(&f32p);
    free_record(&bf16p);
}

/* Size-based wrapping groups consecutive decoder layers only: with 4
 * layers of 4656 elements and min 9000, two groups of two; embed, norm and
 * lm_head stay units of their own. */
static void test_wrap_groups_decoder_layers(void **state) {
    (void)state;
    shs_train_config_t cfg = llama_config(2, SHS_ZERO3);
    cfg.llama.num_layers = 4;
    cfg.wrap_min_params = 9000;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    const shs_layout_t *lo = shs_trainer_layout(t);
    assert_int_equal(lo->num_units, 5);
    assert_string_equal(lo->units[0].name, "embed");
    assert_int_equal(lo->units[1].numel, 2 * 4656);
    assert_int_equal(lo->units[2].numel, 2 * 4656);
    assert_string_equal(lo->units[3].name, "norm");
    assert_string_equal(lo->units[4].name, "lm_head");
    float loss;
    assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    shs_trainer_destroy(t);
}

/* --export-safetensors writes the Hugging Face Llama names unchanged. */
static void test_safetensors_hf_names(void **state) {
    (void)state;
    shs_train_config_t cfg = llama_config(2, SHS_ZERO3);
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    char path[] = "/tmp/shs_llama_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(shs_export_safetensors(t, path), SHS_OK);
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    size_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
    char *h = calloc(hl + 1, 1);
    assert_int_equal(fread(h, 1, hl, f), hl);
    fclose(f);
    const char *names[] = {"\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[256,24]",
                           "\"model.layers.1.self_attn.k_proj.weight\":{\"dtype\":\"F32\",\"shape\":[12,24]",
                           "\"model.layers.0.mlp.down_proj.weight\":{\"dtype\":\"F32\",\"shape\":[24,40]",
                           "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[24]",
                           "\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[256,24]"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strstr(h, names[i])) fail_msg("header lacks %s: %s", names[i], h);
    free(h);
    close(fd);
    unlink(path);
    shs_trainer_destroy(t);
}

static void test_refusals(void **state) {
    (void)state;
    shs_trainer_t *t = NULL;
    shs_train_config_t cfg = llama_config(2, SHS_ZERO3);
    cfg.llama.vocab = 200; /* byte tokens need 256 */
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "vocab_size"));
    cfg = llama_config(2, SHS_ZERO3);
    cfg.model.context = 65; /* beyond max_position_embeddings 64 */
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "max_position_embeddings"));
    cfg = llama_config(2, SHS_ZERO3);
    cfg.llama.num_kv_heads = 3;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "num_key_value_heads"));
    cfg = llama_config(2, SHS_ZERO3);
    cfg.dropout = 0.1f;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "dropout"));
    assert_null(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_stages_equal_ddp),
        cmocka_unit_test(test_autocast_changes_the_run),
        cmocka_unit_test(test_wrap_groups_decoder_layers),
        cmocka_unit_test(test_safetensors_hf_names),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
