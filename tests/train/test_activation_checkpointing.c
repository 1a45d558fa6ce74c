/* test_activation_checkpointing.c - activation checkpointing per block
 * (--checkpoint-activations): with it on, every stage at every
 * world size equals DDP without it bit for bit, also under fp16 dynamic loss
 * scaling and gradient accumulation; the ACTIVATIONS peak drops to a closed
 * form counted here from the tensor shapes; and the CLI flag works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"


#define NWORLDS 5 /* test_worlds */

/* `make test-full` (SHS_TEST_FULL=1): every variant at every world size
 * (run_record.h); `make test` runs a representative part. */
static int full_sweep(void) { return test_full_sweep(); }

/* test_small_config with 3 blocks, so the recompute of one block must not see another's data. */
static shs_train_config_t small_config(int world) { return test_small_config(world, 3); }

/* Reference: DDP without checkpointing. Every stage with checkpointing on
 * must equal it bit for bit (losses, gradient norms, parameters). */
static void check_checkpointed_stages_match_ddp(shs_train_config_t cfg, int steps) {
    cfg.strategy.kind = SHS_DDP;
    cfg.checkpoint_activations = 0;
    run_record_t ddp;
    record_run(&cfg, &test_corpus, steps, &ddp);
    cfg.checkpoint_activations = 1;
    for (int k = SHS_DDP; k <= SHS_ZERO3; k++) {
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        run_record_t ck;
        record_run(&cfg, &test_corpus, steps, &ck);
        assert_same_run(&ddp, &ck);
        free_record(&ck);
    }
    assert_true(memcmp(ddp.snap[0], ddp.snap[steps - 1], ddp.len * sizeof(float)) != 0);
    free_record(&ddp);
}

static void test_activation_checkpointing_matches_ddp(void **state) {
    for (int w = 0; w < NWORLDS; w++) check_checkpointed_stages_match_ddp(small_config(test_worlds[w]), 3);
}

/* fp16 with dynamic loss scaling (the recompute must see the same f16
 * parameters as the forward) and gradient accumulation (a forward and a
 * recomputing backward per micro-batch), apart and together. */
static void test_activation_checkpointing_fp16_and_accum_match_ddp(void **state) {
    for (int w = 0; w < NWORLDS; w++)
        for (int v = 0; v < 3; v++) {
            if (v < 2 && test_worlds[w] != 3 && test_worlds[w] != 8 && !full_sweep()) continue; /* apart: two sizes */
            shs_train_config_t c = small_config(test_worlds[w]);
            if (v != 1) {
                c.strategy.param_dtype = SHS_F16;
                c.strategy.scaler.init_scale = 1024.0f;
            }
            if (v != 0) c.grad_accum = 2;
            check_checkpointed_stages_match_ddp(c, 2);
        }
}

/* Peak ACTIVATIONS bytes of a GPT model, counted from the tensor shapes
 * (gpt.h): per block, what backward reads
 *   ln1 (BT,C), ln1 mean+rstd 2 (BT), qkv (BT,3C), atty (BT,C),
 *   att (B,NH,T,T), res2 (BT,C), ln2 (BT,C), ln2 mean+rstd 2 (BT),
 *   fch+fch_gelu 2 (BT,4C)
 * and the block output res3 (BT,C); the embedding output (BT,C); the head
 *   lnf (BT,C), lnf mean+rstd 2 (BT), logits+probs 2 (BT,V), losses (BT),
 *   loss sum 1;
 * the backward scratch dres+dbtc 2 (BT,C), dfch+dfch_gelu 2 (BT,4C),
 *   dqkv (BT,3C), dpreatt+datt 2 (B,NH,T,T), dlogits (BT,V), and the
 *   forward-only intermediates every block shares: preatt (B,NH,T,T) and
 *   one c_proj output (BT,C);
 * tokens+targets 2 (BT) int32. Without checkpointing all L blocks keep
 * intermediates and output; with it, L outputs and one shared set of
 * intermediates. */
static size_t expected_activation_bytes(const shs_train_config_t *c, int checkpoint) {
    size_t B = (size_t)c->micro_batch, T = (size_t)c->model.context, C = (size_t)c->model.channels;
    size_t NH = (size_t)c->model.num_heads, L = (size_t)c->model.num_layers, V = 256;
    size_t BT = B * T, BTC = BT * C, att = B * NH * T * T;
    size_t intermediates = BTC + 2 * BT + 3 * BTC + BTC + att + BTC + BTC + 2 * BT + 2 * 4 * BTC;
    size_t output = BTC;
    size_t encoded = BTC;
    size_t head = BTC + 2 * BT + 2 * BT * V + BT + 1;
    size_t scratch = 2 * BTC + 2 * 4 * BTC + 3 * BTC + 2 * att + BT * V + att + BTC;
    size_t blocks = checkpoint ? L * output + intermediates : L * (intermediates + output);
    return sizeof(float) * (encoded + blocks + head + scratch) + sizeof(int32_t) * 2 * BT;
}

static size_t peak_activations(const shs_train_config_t *c, int steps) {
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, c, &test_corpus), SHS_OK);
    float loss;
    for (int s = 0; s < steps; s++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    shs_mem_stats_t m0;
    shs_trainer_mem_stats(t, 0, &m0);
    for (int r = 1; r < c->world_size; r++) {
        shs_mem_stats_t m;
        shs_trainer_mem_stats(t, r, &m);
        assert_int_equal(m.peak[SHS_MEM_ACTIVATIONS], m0.peak[SHS_MEM_ACTIVATIONS]);
    }
    shs_trainer_destroy(t);
    return m0.peak[SHS_MEM_ACTIVATIONS];
}

static void test_activation_checkpointing_activation_memory(void **state) {
    static const struct {
        int L, NH, C, world, strategy;
    } cases[] = {
        {1, 2, 8, 1, SHS_DDP}, {2, 3, 9, 1, SHS_DDP}, {3, 2, 16, 3, SHS_ZERO3}, {3, 4, 16, 2, SHS_ZERO1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shs_train_config_t c = small_config(cases[k].world);
        c.model.num_layers = cases[k].L;
        c.model.num_heads = cases[k].NH;
        c.model.channels = cases[k].C;
        c.strategy.kind = (shs_strategy_kind_t)cases[k].strategy;
        size_t peak[2], want[2];
        for (int ck = 0; ck < 2; ck++) {
            c.checkpoint_activations = ck;
            peak[ck] = peak_activations(&c, 2);
            want[ck] = expected_activation_bytes(&c, ck);
            if (peak[ck] != want[ck])
                fail_msg("L=%d C=%d checkpoint=%d: peak activations %zu bytes, expected %zu", cases[k].L,
                         cases[k].C, ck, peak[ck], want[ck]);
        }
        if (cases[k].L == 1) assert_int_equal(peak[1], peak[0]); /* one block: nothing to share */
        else assert_true(peak[1] < peak[0]);
    }
}

/* The CLI flag: accepted, checked against DDP, and the summary's peak
 * activations (MiB, column "activations") are lower with it. */
static double cli_peak_activations(int checkpoint) {
    char *argv[] = {SHS_BIN_PATH, "train", "--steps", "2", "--world", "2", "--layers", "3", "--channels", "16",
                    "--heads", "2", "--context", "8", "--micro-batch", "2", "--check", "ddp",
                    checkpoint ? "--checkpoint-activations" : NULL, NULL};
    static test_proc_t p;
    test_run_process(argv, 120.0, &p);
    if (p.exit_code != 0) fail_msg("exit %d: %s", p.exit_code, p.err);
    const char *row = strstr(p.out, "peak device memory per rank");
    assert_non_null(row);
    row = strstr(row, "\n    0 ");
    assert_non_null(row);
    double v[4];
    assert_int_equal(sscanf(row, " 0 %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3]), 4);
    return v[3];
}

static void test_activation_checkpointing_cli(void **state) {
    double off = cli_peak_activations(0), on = cli_peak_activations(1);
    shs_train_config_t c = small_config(2);
    c.model = (shs_gpt_config_t){.num_layers = 3, .num_heads = 2, .channels = 16, .context = 8};
    for (int ck = 0; ck < 2; ck++) {
        double want = (double)expected_activation_bytes(&c, ck) / 1048576.0, got = ck ? on : off;
        if (!(got > want - 0.0006 && got < want + 0.0006)) fail_msg("checkpoint=%d: %.3f MiB, expected %.4f", ck, got, want);
    }
    assert_true(on < off);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_checkpointing_matches_ddp),
        cmocka_unit_test(test_activation_checkpointing_fp16_and_accum_match_ddp),
        cmocka_unit_test(test_activation_checkpointing_activation_memory),
        cmocka_unit_test(test_activation_checkpointing_cli),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
