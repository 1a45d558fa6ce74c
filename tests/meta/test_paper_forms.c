/* test_paper_forms.c - what the meta backend measures for GPT shapes,
 * against published closed forms (the expected numbers come from the
 * papers' formulas, not from shardsim):
 *  - Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
 *    Transformer Models", arXiv 2205.05198) Table 2, no-parallelism row:
 *    activation bytes per layer sbh(34 + 5as/h) with 2-byte activations,
 *    eager attention and dropout; 2sbh with full recompute; 34sbh with
 *    selective recompute; flash attention drops the 5as/h term too (it
 *    keeps a 4-byte log-sum-exp per row, 4asb, instead); torchtitan's
 *    policies as derived in the rows (op-level, every 2nd block). shardsim also
 *    keeps the two LayerNorms' mean and rstd (f32, 16sb), which the paper
 *    leaves out: the measured bytes are the form plus exactly that.
 *  - Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training
 *    on GPU Clusters Using Megatron-LM") Eq. 2, parameters
 *    P = 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)), for the GPT shapes of its
 *    Table 1 (V = 51200, s = 2048), and the billions that table prints;
 *    and Eq. 3, FLOPs per iteration with full recompute,
 *    96 B s l h^2 (1 + s/(6h) + V/(16lh)).
 *  - The configuration Narayanan et al. Table 2 ran (GPT-3 175B, ZeRO-3
 *    with checkpointing on 384 A100-80GB, micro-batch 4) fits in compare.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/gpt.h"
#include "shardsim/meta_run.h"
#include "shardsim/train.h"

/* ACTIVATIONS bytes a GPT of `layers` blocks allocates on a meta device. */
static size_t activation_bytes(shs_gpt_config_t cfg, int layers, int B, const shs_gpt_exec_t *ex) {
    cfg.num_layers = layers;
    shs_device_t *dev = NULL;
    assert_int_equal(shs_device_create_meta(&dev, 0, SIZE_MAX), SHS_OK);
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &cfg), SHS_OK);
    shs_model_t *m = NULL;
    assert_int_equal(shs_gpt_create_ex(&m, &lo, &cfg, dev, B, ex), SHS_OK);
    shs_mem_stats_t st;
    shs_device_mem_stats(dev, &st);
    shs_model_destroy(m);
    shs_layout_free(&lo);
    shs_device_destroy(dev);
    return st.current[SHS_MEM_ACTIVATIONS];
}

/* Per layer: what one more block adds (everything shared cancels). */
static size_t per_layer(shs_gpt_config_t cfg, int B, const shs_gpt_exec_t *ex) {
    return activation_bytes(cfg, 2, B, ex) - activation_bytes(cfg, 1, B, ex);
}

static void test_korthikanti_table2(void **state) {
    static const struct {
        uint64_t s, b, h, a;
    } shapes[] = {{64, 2, 48, 4}, {128, 1, 64, 8}, {32, 3, 40, 5}, {256, 2, 96, 12}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        uint64_t s = shapes[k].s, b = shapes[k].b, h = shapes[k].h, a = shapes[k].a;
        shs_gpt_config_t cfg = {.num_layers = 1, .num_heads = (int)a, .channels = (int)h, .context = (int)s, .vocab = 64};
        shs_gpt_exec_t ex = {.autocast = SHS_BF16, .param_dtype = SHS_BF16, .dropout = 0.1f, .seed = 1};
        uint64_t sbh = s * b * h, stats = 16 * s * b;
        /* sbh (34 + 5as/h) = 34 sbh + 5 a s^2 b, an integer */
        uint64_t eager = 34 * sbh + 5 * a * s * s * b, selective = 34 * sbh, full = 2 * sbh, flash = 34 * sbh + 4 * a * s * b;
        struct {
            const char *what;
            shs_recompute_t rc;
            shs_attention_kind_t at;
            uint64_t want;
        } rows[] = {
            {"eager, no recompute", SHS_RECOMPUTE_NONE, SHS_ATTENTION_EAGER, eager + stats},
            {"selective recompute", SHS_RECOMPUTE_SELECTIVE, SHS_ATTENTION_EAGER, selective + stats},
            {"full recompute", SHS_RECOMPUTE_FULL, SHS_ATTENTION_EAGER, full},
            {"flash", SHS_RECOMPUTE_NONE, SHS_ATTENTION_FLASH, flash + stats},
            {"flash + full recompute", SHS_RECOMPUTE_FULL, SHS_ATTENTION_FLASH, full},
            /* torchtitan's op-level SAC: GPT-2's projections all have biases (aten.addmm, not
             * saved), so a block keeps its output and, with flash, the attention kernel's output
             * (2sbh) and log-sum-exp (4asb) */
            {"op-level SAC, eager", SHS_RECOMPUTE_SELECTIVE_OP, SHS_ATTENTION_EAGER, full},
            {"op-level SAC, flash", SHS_RECOMPUTE_SELECTIVE_OP, SHS_ATTENTION_FLASH, full + 2 * sbh + 4 * a * s * b},
        };
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            ex.recompute = rows[r].rc;
            ex.attention = rows[r].at;
            size_t got = per_layer(cfg, (int)b, &ex);
            if (rows[r].rc == SHS_RECOMPUTE_FULL) { /* every 2nd block: of two more, one keeps all, one its output */
                ex.recompute = SHS_RECOMPUTE_EVERY_N;
                ex.recompute_every = 2;
                size_t two = activation_bytes(cfg, 4, (int)b, &ex) - activation_bytes(cfg, 2, (int)b, &ex);
                uint64_t want = (rows[r].at == SHS_ATTENTION_FLASH ? flash : eager) + stats + full;
                if (two != want)
                    fail_msg("s=%llu b=%llu h=%llu a=%llu every 2nd block, %s: %zu bytes per two layers, form %llu",
                             (unsigned long long)s, (unsigned long long)b, (unsigned long long)h,
                             (unsigned long long)a, shs_attention_name(rows[r].at), two, (unsigned long long)want);
            }
            if (got != rows[r].want)
                fail_msg("s=%llu b=%llu h=%llu a=%llu %s: %zu bytes per layer, Korthikanti form %llu", (unsigned long long)s,
                         (unsigned long long)b, (unsigned long long)h, (unsigned long long)a, rows[r].what, got,
                         (unsigned long long)rows[r].want);
        }
    }
}

/* Narayanan et al. 2021 Table 1: hidden size, layers, heads, and the
 * parameter count it prints (billions). */
static const struct {
    int h, l, a;
    double billions;
} narayanan[] = {
    {2304, 24, 24, 1.7},     {3072, 30, 32, 3.6},     {4096, 36, 32, 7.5},    {6144, 40, 48, 18.4},
    {8192, 48, 64, 39.1},    {10240, 60, 80, 76.1},   {12288, 80, 96, 145.6}, {16384, 96, 128, 310.1},
    {20480, 105, 128, 529.6}, {25600, 128, 160, 1008.0},
};

static void test_narayanan_eq2_parameters(void **state) {
    const double V = 51200, s = 2048;
    for (size_t k = 0; k < sizeof narayanan / sizeof narayanan[0]; k++) {
        double h = narayanan[k].h, l = narayanan[k].l;
        double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
        shs_gpt_config_t cfg = {.num_layers = narayanan[k].l, .num_heads = narayanan[k].a, .channels = narayanan[k].h,
                                .context = 2048, .vocab = 51200};
        shs_layout_t lo;
        assert_int_equal(shs_gpt_layout_create(&lo, &cfg), SHS_OK);
        uint64_t measured = 0;
        for (int u = 0; u < lo.num_units; u++) measured += lo.units[u].numel;
        shs_layout_free(&lo);
        /* Eq. 2 leaves out the final LayerNorm's weight and bias: 2h */
        double want = round(eq2) + 2 * h;
        if ((double)measured != want)
            fail_msg("h=%d l=%d: %llu parameters, Eq. 2 + 2h = %.0f", narayanan[k].h, narayanan[k].l,
                     (unsigned long long)measured, want);
        /* and the table's printed billions (one decimal) */
        if (!(fabs(eq2 / 1e9 - narayanan[k].billions) <= 0.05 + 1e-9))
            fail_msg("h=%d: Eq. 2 gives %.3f B, Table 1 prints %.1f", narayanan[k].h, eq2 / 1e9, narayanan[k].billions);
    }
}

/* Eq. 3 counts the GEMMs of forward, backward and the recomputed forward,
 * attention as full (non-causal) s x s products. The meta backend counts
 * causal attention (T(T+1)/2 pairs: about half of Eq. 3's s/(6h) term)
 * and adds the bias additions and softmax arithmetic to the matmul
 * FLOPs; Eq. 3 must agree within those: measured / Eq. 3 - 1 within
 * [-s/(12h) - 1%, +1%]. */
static void test_narayanan_eq3_flops(void **state) {
    const double V = 51200, s = 2048;
    for (size_t k = 0; k < 3; k++) {
        double h = narayanan[k].h, l = narayanan[k].l, B = 1;
        shs_meta_config_t mc = {.steps = 1};
        mc.train = shs_train_default_config();
        mc.train.model = (shs_gpt_config_t){.num_layers = narayanan[k].l, .num_heads = narayanan[k].a,
                                            .channels = narayanan[k].h, .context = 2048, .vocab = 51200};
        mc.train.world_size = 1;
        mc.train.micro_batch = 1;
        mc.train.strategy.kind = SHS_DDP;
        mc.train.recompute = SHS_RECOMPUTE_FULL;
        mc.train.device_mem = SIZE_MAX;
        shs_meta_result_t r;
        assert_int_equal(shs_meta_run(&mc, &r), SHS_OK);
        double measured = (double)r.ranks[0].kernels.matmul_flops;
        shs_meta_result_free(&r);
        double eq3 = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
        double rel = measured / eq3 - 1;
        if (!(rel >= -s / (12 * h) - 0.01 && rel <= 0.01))
            fail_msg("h=%.0f l=%.0f: %.6g matmul FLOPs, Eq. 3 %.6g (%+.3f%%)", h, l, measured, eq3, 100 * rel);
    }
}

/* torchtitan's op-level SAC on the GPT: its projections all have biases
 * (aten.addmm, not saved), so the recompute reruns qkv, attn c_proj and
 * c_fc (2 bt C OC + bt OC each, with the bias) and, with eager attention,
 * the attention core (flash's outputs are saved); mlp c_proj and its
 * residual follow the last value backward reads and are not rerun. */
static void test_op_level_recompute_flops(void **state) {
    const double C = 48, T = 64, B = 2, NH = 4, L = 3, bt = B * T;
    double proj = 2 * bt * C * 3 * C + bt * 3 * C + 2 * bt * C * C + bt * C + 2 * bt * C * 4 * C + bt * 4 * C;
    double core = B * NH * T * (T + 1) / 2 * (4 * (C / NH) + 5);
    double got[2][2];
    for (int flash = 0; flash < 2; flash++)
        for (int op = 0; op < 2; op++) {
            shs_meta_config_t mc = {.steps = 1};
            mc.train = shs_train_default_config();
            mc.train.model = (shs_gpt_config_t){.num_layers = (int)L, .num_heads = (int)NH, .channels = (int)C,
                                                .context = (int)T, .vocab = 64};
            mc.train.world_size = 1;
            mc.train.micro_batch = (int)B;
            mc.train.strategy.kind = SHS_DDP;
            mc.train.device_mem = SIZE_MAX;
            mc.train.attention = flash ? SHS_ATTENTION_FLASH : SHS_ATTENTION_EAGER;
            mc.train.recompute = op ? SHS_RECOMPUTE_SELECTIVE_OP : SHS_RECOMPUTE_NONE;
            shs_meta_result_t r;
            assert_int_equal(shs_meta_run(&mc, &r), SHS_OK);
            got[flash][op] = (double)r.ranks[0].kernels.matmul_flops;
            shs_meta_result_free(&r);
        }
    for (int flash = 0; flash < 2; flash++) {
        double want = L * (proj + (flash ? 0 : core)), added = got[flash][1] - got[flash][0];
        if (added != want) fail_msg("%s: op-level SAC adds %.17g matmul FLOPs, form %.17g", flash ? "flash" : "eager",
                                    added, want);
    }
}

/* GPT-3 175B, ZeRO-3 with checkpointing, 384 x A100-80GB, micro-batch 4
 * (Narayanan et al. 2021 Table 2 ran it): fits with bf16 autocast and
 * flash attention. */
static void test_gpt3_175b_zero3_ckpt_fits(void **state) {
    char *argv[] = {SHS_BIN_PATH, "compare", "--model", "gpt3-175b", "--gpu", "a100", "--world", "384", "--micro-batch",
                    "4", "--strategies", "zero3", "--variants", "all", "--autocast", "bf16", "--attention", "flash",
                    "--format", "csv", NULL};
    static test_proc_t p;
    test_run_process(argv, 300.0, &p);
    if (p.exit_code != 0) fail_msg("exit %d: %s", p.exit_code, p.err);
    const char *row = strstr(p.out, "\nzero3+ckpt,");
    assert_non_null(row);
    /* name,strategy,checkpointing,offload, then 10 byte/formula fields, peak_bytes, fits */
    char name[32], strat[16], off[16];
    int ck, fits;
    double f[10];
    size_t peak;
    int n = sscanf(row + 1, "%31[^,],%15[^,],%d,%15[^,],%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%zu,%d", name, strat,
                   &ck, off, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &peak, &fits);
    assert_int_equal(n, 16);
    assert_int_equal(fits, 1);
    assert_true(peak <= (size_t)80e9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_korthikanti_table2),
        cmocka_unit_test(test_narayanan_eq2_parameters),
        cmocka_unit_test(test_narayanan_eq3_flops),
        cmocka_unit_test(test_op_level_recompute_flops),
        cmocka_unit_test(test_gpt3_175b_zero3_ckpt_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
