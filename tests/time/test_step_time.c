/* test_step_time.c - the step-time model (step_time.h, gpu.h) against values
 * worked by hand: the GPU tables against their datasheets and NCCL's
 * search, every constant the model needs checked (a planted missing one
 * is named), GEMM tile and wave quantization, each kernel class's price,
 * the two-stream schedule with prefetch and the SMs NCCL holds, and
 * autocast priced at the 16-bit peak.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/status.h"
#include "shardsim/step_time.h"
#include "shardsim/train.h"

static void close_to(double got, double want, const char *what) {
    if (fabs(got - want) > 1e-12 * fabs(want) + 1e-18) fail_msg("%s: got %.15g, want %.15g", what, got, want);
}

/* Datasheets (A100 80 GB SXM4: 108 SMs, 312 / 156 TFLOP/s, 2.039 TB/s;
 * H100 SXM5: 132 SMs, 989.4 / 494.7, 3.35 TB/s; H200: 4.8 TB/s, 141 GB)
 * and what NCCL's logs and search give (24 channels sharing 240 / 360 GB/s;
 * 8 NICs rated 24 / 48 GB/s). */
static void test_presets(void **state) {
    (void)state;
    shs_hw_t a, h, h2;
    assert_int_equal(shs_hw_preset("a100", &a), SHS_OK);
    assert_int_equal(shs_hw_preset("h100-sxm", &h), SHS_OK);
    assert_int_equal(shs_hw_preset("h200", &h2), SHS_OK);
    assert_true(a.sms == 108 && a.peak_flops_16 == 312e12 && a.peak_flops_32 == 156e12 && a.hbm_bw == 2.039e12);
    assert_true(h.sms == 132 && h.peak_flops_16 == 989.4e12 && h.peak_flops_32 == 494.7e12 && h.hbm_bw == 3.35e12);
    assert_true(h2.sms == 132 && h2.peak_flops_16 == 989.4e12 && h2.hbm_bw == 4.8e12 && h2.mem_bytes == 141e9);
    assert_true(a.nccl.channels_intra == 24 && a.nccl.channels_intra * a.nccl.bw_intra == 240 && a.nccl.nic_gbs == 24 && a.nccl.nics_per_node == 8);
    assert_true(h.nccl.channels_intra == 24 && h.nccl.channels_intra * h.nccl.bw_intra == 360 && h.nccl.nic_gbs == 48 && h.nccl.nics_per_node == 8);
    assert_true(a.attn_fwd_eff == 0.73 && a.attn_bwd_eff == 0.63); /* Dao 2023 §4.1 */
    close_to(h.attn_fwd_eff * 989.4e12, 335e12, "H100 FlashAttention-2");
    assert_true(a.arch == 80 && h.arch == 90 && h2.arch == 90);
    assert_int_equal(shs_hw_validate(&a), SHS_OK);
    assert_int_equal(shs_hw_validate(&h), SHS_OK);
    assert_int_equal(shs_hw_validate(&h2), SHS_OK);
    assert_int_equal(shs_hw_preset("tpu", &a), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "unknown GPU preset 'tpu' (a100, h100-sxm, h100-hbm2e, h200)"));
}

/* A GPU without a constant the model needs is refused, naming it. */
static void test_validate_names_the_missing_constant(void **state) {
    (void)state;
    static const struct {
        size_t offset;
        int is_int;
        const char *name;
    } fields[] = {
        {offsetof(shs_hw_t, sms), 1, "SM count"},
        {offsetof(shs_hw_t, peak_flops_16), 0, "16-bit peak FLOP/s"},
        {offsetof(shs_hw_t, hbm_bw), 0, "HBM bandwidth"},
        {offsetof(shs_hw_t, gemm_eff), 0, "GEMM efficiency"},
        {offsetof(shs_hw_t, attn_bwd_eff), 0, "attention backward efficiency"},
        {offsetof(shs_hw_t, nccl) + offsetof(shs_nccl_topo_t, nic_gbs), 0, "NIC bandwidth"},
        {offsetof(shs_hw_t, nccl) + offsetof(shs_nccl_topo_t, channels_intra), 1, "NCCL channels within a node"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        shs_hw_t h;
        assert_int_equal(shs_hw_preset("h100-sxm", &h), SHS_OK);
        char *p = (char *)&h + fields[i].offset;
        if (fields[i].is_int) *(int *)p = 0;
        else *(double *)p = 0;
        assert_int_equal(shs_hw_validate(&h), SHS_INVALID_ARG);
        if (!strstr(shs_last_error(), fields[i].name) || !strstr(shs_last_error(), "GPU 'h100-sxm' has no"))
            fail_msg("%s: %s", fields[i].name, shs_last_error());
    }
    shs_hw_t h;
    assert_int_equal(shs_hw_preset("a100", &h), SHS_OK);
    h.gemm_eff = 1.5; /* a fraction of the peak */
    assert_int_equal(shs_hw_validate(&h), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "GEMM efficiency (got 1.5; the step-time model needs a value in (0, 1])"));
}

/* Tiles of 256 x 128 over 132 SMs (H100):
 *   16384 x 4096: 64 x 32 = 2048 tiles, 16 waves: q = 2048 / (16 x 132) = 0.96969...
 *   1000 x 1000: 4 x 8 = 32 tiles of which 1e6 / (32 x 32768) is used, one
 *   wave of 32 / 132 SMs: q = 0.95367... x 0.24242... (either orientation) */
static void test_gemm_quantization(void **state) {
    (void)state;
    shs_hw_t h;
    assert_int_equal(shs_hw_preset("h100-sxm", &h), SHS_OK);
    close_to(shs_gemm_quantization(&h, 16384, 4096), 2048.0 / (16 * 132), "16384 x 4096");
    close_to(shs_gemm_quantization(&h, 1000, 1000), 1e6 / (32 * 32768.0) * (32.0 / 132), "1000 x 1000");
    /* 300 x 256: 256-row tiles 2 x 2 = 4 (76800 / 131072 used), 128-row tiles 3 x 1 = 3 (76800 / 98304 used) */
    close_to(shs_gemm_quantization(&h, 300, 256), 76800.0 / 98304 * (3.0 / 132), "the better orientation");
}

/* Each class: bf16 GEMM 2mnk / (989.4e12 x eff x q), or its bytes when
 * memory bound; flash forward FLOPs / (peak x 335/989.4 x causal share x
 * waves); elementwise bytes / 2 (bf16 activations) at 3.35 TB/s;
 * the optimizer's f32 bytes at 3.35 TB/s. */
static void test_kernel_prices(void **state) {
    (void)state;
    shs_hw_t h;
    assert_int_equal(shs_hw_preset("h100-sxm", &h), SHS_OK);
    shs_train_config_t tc = shs_train_default_config();
    tc.strategy.param_dtype = SHS_BF16;
    shs_kernel_env_t env = shs_kernel_env(&tc, &h, 0);
    assert_true(env.matmul_dtype == SHS_BF16 && env.act_bytes == 2 && env.gemm_eff == h.gemm_eff);
    shs_kernel_info_t g = {.cls = SHS_KERNEL_GEMM, .name = "matmul_forward", .m = 16384, .n = 4096, .k = 4096};
    close_to(shs_kernel_time(&h, &env, &g, 3), 3 * 2.0 * 16384 * 4096 * 4096 / (989.4e12 * h.gemm_eff * (2048.0 / 2112)),
             "GEMM");
    /* k = 1: 2 m n FLOPs, (m + n + m n) x 2 bytes: memory bound */
    shs_kernel_info_t thin = {.cls = SHS_KERNEL_GEMM, .name = "matmul_forward", .m = 4096, .n = 4096, .k = 1};
    close_to(shs_kernel_time(&h, &env, &thin, 1), (4096.0 + 4096 + 4096.0 * 4096) * 2 / 3.35e12, "thin GEMM");
    /* flash forward, B NH = 64, T = 2048, HD = 128: nb = 16 blocks; causal share 2048 x 2049 / (16 x 17 x 128^2);
     * 64 x 16 = 1024 thread blocks in 8 waves of 132 */
    double pairs = 64.0 * 2048 * 2049 / 2, flops = pairs * (4 * 128 + 5);
    shs_kernel_info_t fa = {.cls = SHS_KERNEL_ATTENTION, .name = "attention_forward_flash", .flash = 1, .m = 64,
                            .n = 2048, .k = 128, .flops = flops};
    double q = 2048.0 * 2049 / (16 * 17 * 16384.0) * (1024.0 / (8 * 132));
    close_to(shs_kernel_time(&h, &env, &fa, 1), flops / (989.4e12 * (335 / 989.4) * q), "flash forward");
    shs_kernel_info_t el = {.cls = SHS_KERNEL_ELEMENTWISE, .name = "gelu_forward", .bytes = 8e9};
    close_to(shs_kernel_time(&h, &env, &el, 10), 4e9 / 3.35e12, "elementwise, bf16 activations");
    shs_kernel_info_t opt = {.cls = SHS_KERNEL_OPTIMIZER, .name = "adamw_update", .bytes = 28e9};
    close_to(shs_kernel_time(&h, &env, &opt, 1), 28e9 / 3.35e12, "optimizer");
    /* an f32 model: TF32 for the GEMM, f32 activations */
    tc.strategy.param_dtype = SHS_F32;
    env = shs_kernel_env(&tc, &h, 0.5);
    assert_true(env.matmul_dtype == SHS_F32 && env.act_bytes == 4 && env.gemm_eff == 0.5);
    close_to(shs_kernel_time(&h, &env, &g, 1), 2.0 * 16384 * 4096 * 4096 / (494.7e12 * 0.5 * (2048.0 / 2112)), "TF32");
    close_to(shs_kernel_time(&h, &env, &el, 1), 8e9 / 3.35e12, "elementwise, f32");
    /* autocast bf16 over f32 parameters (PyTorch AMP): the 16-bit peak */
    tc.autocast = SHS_BF16;
    env = shs_kernel_env(&tc, &h, 0);
    assert_true(env.matmul_dtype == SHS_BF16 && env.act_bytes == 2);
}

/* ---- the schedule ----------------------------------------------------------- */

/* A GPU for hand-worked schedules: 2 SMs (NCCL's one channel leaves one:
 * overlapped compute takes twice as long), 1e12 FLOP/s at efficiency 1,
 * one NCCL channel of 1 GB/s in a node. Forced ring Simple on 2 ranks:
 * all-gather / reduce-scatter of S bytes: 8.4 + 1 x 3.4 = 11.8 us + S / 2e9;
 * all-reduce: 8.4 + 2 x 3.4 = 15.2 us + S / 1e9. */
static shs_hw_t hand_gpu(void) {
    shs_hw_t hw = {.name = "hand", .arch = 80, .sms = 2, .peak_flops_16 = 1e12, .peak_flops_32 = 1e12, .hbm_bw = 1e12,
                   .pcie_bw = 1e9, .host_bw = 1e9, .tile_m = 1, .tile_n = 1, .gemm_eff = 1, .attn_fwd_eff = 1,
                   .attn_bwd_eff = 1, .attn_block = 1};
    hw.nccl = (shs_nccl_topo_t){.arch = 80, .channels_intra = 1, .bw_intra = 1, .gpus_per_node = 8, .nics_per_node = 8,
                                .nic_gbs = 1, .ll128 = 0};
    return hw;
}

typedef struct {
    shs_step_seg_kind_t kind;
    double flops;
    shs_coll_op_t op[2];
    double bytes[2];
    int ahead[2]; /* a prefetch for the next unit */
} seg_spec_t;

/* hand-made segments without kernel records: each segment's FLOPs as GEMMs */
static shs_step_estimate_t estimate(const seg_spec_t *spec, int nsegs) {
    shs_step_segment_t segs[8] = {0};
    shs_meta_call_t calls[16] = {0};
    int nc = 0;
    for (int i = 0; i < nsegs; i++) {
        segs[i].kind = spec[i].kind;
        segs[i].flops = (uint64_t)spec[i].flops;
        segs[i].calls_begin = (uint64_t)nc;
        for (int k = 0; k < 2; k++)
            if (spec[i].bytes[k] > 0)
                calls[nc++] = (shs_meta_call_t){spec[i].op[k], (uint64_t)spec[i].bytes[k], 2, 0, i, spec[i].ahead[k]};
        segs[i].calls_end = (uint64_t)nc;
    }
    shs_meta_config_t cfg = {0};
    cfg.train.world_size = 2;
    cfg.train.strategy.param_dtype = SHS_F32;
    cfg.steps = 1;
    shs_meta_result_t res = {0};
    shs_meta_rank_result_t r = {0};
    r.segments = segs;
    r.num_segments = nsegs;
    r.calls = calls;
    r.num_calls = (size_t)nc;
    shs_hw_t hw = hand_gpu();
    shs_time_opts_t opts = {0, SHS_ALGO_RING, SHS_PROTO_SIMPLE};
    shs_step_estimate_t e;
    shs_estimate_step(&cfg, &res, &r, &hw, &opts, &e);
    return e;
}

/* Prefetch depth one and the SMs NCCL holds. Two units (F0 F1 B1 B0 optim
 * loss): all-gathers and reduce-scatters of 2e9 B take a = 1 s + 11.8 us,
 * forward 2 s, backward 4 s, optimizer 0.5 s, the loss all-reduce of 0.5e9
 * B r = 0.5 s + 15.2 us:
 *   comm  AG0 [0,a]; AG1 [a,2a] under F0, which takes a longer (f = 2):
 *         F0 [a, 2a+2], F1 [2a+2, 2a+4]; AG1' [2a+2, 3a+2] under F1 -> F1
 *         ends 3a+4, B1 [3a+4, 3a+8]; AG0' [3a+4, 4a+4] under B1 -> B1 ends
 *         4a+8, B0 [4a+8, 4a+12]; RS1 [3a+8, 4a+8] (after B1's end at 3a+8,
 *         before B0 starts: no overlap); RS0 [4a+12, 5a+12]; optim [5a+12,
 *         5a+12.5]; loss AR [.., 5a+12.5+r]
 *   compute 12.5, slowdown 3a, exposed = step - both = 2a + r, step 5a + 13 + r - 0.5.
 * Communication-bound forward (all-gathers of 6e9 B: a = 3 s + 11.8 us,
 * compute 1 s): AG0 [0,a] F0 [a, a+1] slowed by AG1's first second -> a+2;
 * F1 [2a, 2a+1]: slowdown 1, exposed 2a+1 - 3 = 2a - 2. */
static void test_schedule(void **state) {
    (void)state;
    const double a = 1 + 11.8e-6, r = 0.5 + 15.2e-6;
    const seg_spec_t step[] = {
        {SHS_STEP_SEG_FORWARD, 2e12, {SHS_OP_ALL_GATHER}, {2e9}, {0}},
        {SHS_STEP_SEG_FORWARD, 2e12, {SHS_OP_ALL_GATHER}, {2e9}, {0}},
        {SHS_STEP_SEG_BACKWARD, 4e12, {SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER}, {2e9, 2e9}, {0}},
        {SHS_STEP_SEG_BACKWARD, 4e12, {SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER}, {2e9, 2e9}, {0}},
        {SHS_STEP_SEG_OPTIM, 0.5e12, {SHS_OP_ALL_GATHER}, {0}, {0}},
        {SHS_STEP_SEG_LOSS, 0, {SHS_OP_ALL_REDUCE}, {0.5e9}, {0}},
    };
    shs_step_estimate_t e = estimate(step, 6);
    close_to(e.compute_s, 12.5, "compute");
    close_to(e.comm_s, 6 * a + r, "comm");
    close_to(e.slowdown_s, 3 * a, "slowdown");
    close_to(e.exposed_comm_s, 2 * a + r, "exposed");
    close_to(e.step_s, 5 * a + 12.5 + r, "step");
    close_to(e.gemm_s, 12.5, "the FLOPs as GEMMs");
    const double b = 3 + 11.8e-6;
    const seg_spec_t bound[] = {
        {SHS_STEP_SEG_FORWARD, 1e12, {SHS_OP_ALL_GATHER}, {6e9}, {0}},
        {SHS_STEP_SEG_FORWARD, 1e12, {SHS_OP_ALL_GATHER}, {6e9}, {0}},
    };
    e = estimate(bound, 2);
    close_to(e.slowdown_s, 1, "bound slowdown");
    close_to(e.exposed_comm_s, 2 * b - 2, "bound exposed");
    close_to(e.step_s, 2 * b + 1, "bound step");
    /* A prefetch (the strategy gathers F1 while F0 starts): F0's own
     * all-gather [0,a] gates F0; F1's, queued behind it [a,2a], runs under
     * F0 (stretched by a) and gates F1: F0 [a, 2a+2], F1 [2a+2, 2a+4];
     * exposed a, slowdown a. */
    const seg_spec_t ahead[] = {
        {SHS_STEP_SEG_FORWARD, 2e12, {SHS_OP_ALL_GATHER, SHS_OP_ALL_GATHER}, {2e9, 2e9}, {0, 1}},
        {SHS_STEP_SEG_FORWARD, 2e12, {SHS_OP_ALL_GATHER}, {0}, {0}},
    };
    e = estimate(ahead, 2);
    close_to(e.slowdown_s, a, "prefetch slowdown");
    close_to(e.exposed_comm_s, a, "prefetch exposed");
    close_to(e.step_s, 2 * a + 4, "prefetch step");
    /* a prefetch that outlasts its unit's compute gates the next: 6e9 B (b) under a 1 s F0 */
    const seg_spec_t late[] = {
        {SHS_STEP_SEG_FORWARD, 1e12, {SHS_OP_ALL_GATHER, SHS_OP_ALL_GATHER}, {2e9, 6e9}, {0, 1}},
        {SHS_STEP_SEG_FORWARD, 1e12, {SHS_OP_ALL_GATHER}, {0}, {0}},
    };
    /* F0 [a, a+1] stretched by 1 -> a+2; F1 waits for a + b: [a+b, a+b+1] */
    e = estimate(late, 2);
    close_to(e.slowdown_s, 1, "late slowdown");
    close_to(e.step_s, a + b + 1, "late step");
}

/* ---- a meta run priced ------------------------------------------------------- */

static shs_step_estimate_t priced(shs_dtype_t param, shs_dtype_t autocast, shs_meta_result_t *keep) {
    shs_meta_config_t mc = {.steps = 2};
    mc.train = shs_train_default_config();
    mc.train.model = (shs_gpt_config_t){.num_layers = 2, .num_heads = 8, .channels = 1024, .context = 1024};
    mc.train.world_size = 8;
    mc.train.micro_batch = 4;
    mc.train.strategy.kind = SHS_ZERO3;
    mc.train.strategy.param_dtype = param;
    mc.train.autocast = autocast;
    mc.train.attention = SHS_ATTENTION_FLASH;
    shs_meta_result_t res;
    assert_int_equal(shs_meta_run(&mc, &res), SHS_OK);
    shs_hw_t h;
    assert_int_equal(shs_hw_preset("h100-sxm", &h), SHS_OK);
    shs_step_estimate_t e;
    shs_estimate_step(&mc, &res, &res.ranks[0], &h, NULL, &e);
    if (keep) {
        *keep = res;
        /* every record priced once: the parts add up to the compute */
        shs_kernel_env_t env = shs_kernel_env(&mc.train, &h, 0);
        double sum = 0;
        for (size_t i = 0; i < res.ranks[0].num_kernel_log; i++)
            sum += shs_kernel_time(&h, &env, &res.ranks[0].kernel_log[i].info, res.ranks[0].kernel_log[i].count);
        close_to(e.compute_s, sum, "records priced");
        close_to(e.gemm_s + e.attention_s + e.elementwise_s + e.optimizer_s, e.compute_s, "parts");
        assert_true(e.gemm_s > 0 && e.attention_s > 0 && e.elementwise_s > 0 && e.optimizer_s > 0);
    } else {
        shs_meta_result_free(&res);
    }
    return e;
}

/* PyTorch AMP (f32 parameters, autocast bf16) runs its matmuls at the
 * 16-bit peak: the GEMMs cost what the bf16 model's do, half of the f32
 * model's (TF32 is half the bf16 peak; these GEMMs are compute bound).
 * (Before the kernels were priced one by one, the whole AMP step ran at
 * the TF32 peak: twice the bf16 step.) */
static void test_autocast_at_the_16_bit_peak(void **state) {
    (void)state;
    shs_meta_result_t res;
    shs_step_estimate_t bf16 = priced(SHS_BF16, 0, &res);
    shs_meta_result_free(&res);
    shs_step_estimate_t amp = priced(SHS_F32, SHS_BF16, NULL);
    shs_step_estimate_t f32 = priced(SHS_F32, 0, NULL);
    close_to(amp.gemm_s, bf16.gemm_s, "amp = bf16");
    close_to(f32.gemm_s, 2 * bf16.gemm_s, "f32 = 2 x bf16");
    /* the rest differs by AMP's casts and its f32 all-gathers, not by a halved peak */
    assert_true(amp.step_s < 0.75 * f32.step_s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_validate_names_the_missing_constant),
        cmocka_unit_test(test_gemm_quantization),
        cmocka_unit_test(test_kernel_prices),
        cmocka_unit_test(test_schedule),
        cmocka_unit_test(test_autocast_at_the_16_bit_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
