/* test_cluster.c - the per-level cluster pricing of collectives that
 * `compare` uses (trace_net.h's shs_net_time with NICs per node, the GPU
 * presets of estimate.h). Expected seconds are worked by hand from the
 * hierarchical form
 *   t = base + (r-1) a_intra + (N-1) a_inter
 *       + S (r-1)/r / B_nvlink + S (N-1)/N / (r x nics x B_nic / gpn)
 * and the preset constants from the datasheets (DGX A100: 8 x 200 Gb/s
 * HDR, NVLink 3 300 GB/s per direction; NCCL 2.20.3 Simple latencies
 * 8.4 us per call, 3.4 us per NVLink step, 14 us per network step).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "shardsim/estimate.h"
#include "shardsim/net.h"

static void assert_close(double got, double want) {
    if (fabs(got - want) > 1e-12 * fabs(want)) fail_msg("got %.15g, want %.15g", got, want);
}

static void test_presets_nics(void **state) {
    (void)state;
    shs_hw_t a, h, h2;
    assert_int_equal(shs_hw_preset("a100", &a), SHS_OK);
    assert_int_equal(shs_hw_preset("h100-sxm", &h), SHS_OK);
    assert_int_equal(shs_hw_preset("h200", &h2), SHS_OK);
    assert_int_equal(a.net.nics_per_node, 8);
    assert_close(a.net.nic_bw, 25e9);  /* 200 Gb/s HDR / 8 bits */
    assert_int_equal(h.net.nics_per_node, 8);
    assert_close(h.net.nic_bw, 50e9);  /* 400 Gb/s NDR / 8 bits */
    assert_int_equal(h2.net.nics_per_node, 8);
    assert_close(h2.net.nic_bw, 50e9);
}

/* 2 DGX A100 nodes, n = 16, r = 8, N = 2, S = 1.6e9 B, B_net = 8 x 25e9 = 200e9:
 *   latency 8.4 + 7 x 3.4 + 1 x 14 = 46.2 us
 *   NVLink  1.6e9 x 7/8 / 300e9 = 4.6666...e-3 s
 *   NICs    1.6e9 x 1/2 / 200e9 = 4e-3 s
 * all-gather and reduce-scatter alike; ring all-reduce twice that. */
static void test_two_nodes(void **state) {
    (void)state;
    shs_hw_t a;
    assert_int_equal(shs_hw_preset("a100", &a), SHS_OK);
    double want = 46.2e-6 + 1.6e9 * 7 / 8 / 300e9 + 4e-3;
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, 1.6e9, 16, 2), want);
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_REDUCE_SCATTER, 1.6e9, 16, 2), want);
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_REDUCE, 1.6e9, 16, 2), 8.4e-6 + 2 * (want - 8.4e-6));
    /* within one node the NICs play no part: NCCL's ring, 7 NVLink steps on 8 ranks */
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, 1.6e9, 8, 1),
                 8.4e-6 + 7 * 3.4e-6 + 1.6e9 * 7 / 8 / 300e9);
}

/* 48 DGX A100 nodes (384 GPUs), r = 8, N = 48, S = 3.84e9 B:
 *   latency 8.4 + 7 x 3.4 + 47 x 14 = 690.2 us
 *   NVLink  3.84e9 x 7/8 / 300e9 = 11.2e-3 s
 *   NICs    3.84e9 x 47/48 / 200e9 = 18.8e-3 s  -> 30.6902e-3 s.
 * One rank per node (a hybrid replica group), r = 1, N = 4, S = 4e8 B:
 * B_net = one rank's share 8 x 25e9 / 8 = 25e9:
 *   8.4 + 3 x 14 = 50.4 us + 4e8 x 3/4 / 25e9 = 12e-3 s. */
static void test_forty_eight_nodes(void **state) {
    (void)state;
    shs_hw_t a;
    assert_int_equal(shs_hw_preset("a100", &a), SHS_OK);
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, 3.84e9, 384, 48), 30.6902e-3);
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, 4e8, 4, 4), 50.4e-6 + 12e-3);
    /* 4 NICs of 100 Gb/s: B_net = 8 x 4 x 12.5e9 / 8 = 50e9 -> NICs 3.84e9 x 47/48 / 50e9 = 75.2e-3 s */
    a.net.nics_per_node = 4;
    a.net.nic_bw = 12.5e9;
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, 3.84e9, 384, 48),
                 690.2e-6 + 11.2e-3 + 75.2e-3);
    /* no NICs: the flat ring over inter_bw as before (NCCL's 383 steps, 47 of them network) */
    a.net.nics_per_node = 0;
    assert_close(shs_net_time(&a.net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, 3.84e9, 384, 48),
                 8.4e-6 + 336 * 3.4e-6 + 47 * 14e-6 + 3.84e9 * 383 / 384 / 25e9);
}

/* A step of hand-made segments on a network with no latency, 1e9 B/s on one
 * node, 1e12 FLOP/s: a 2-rank all-gather / reduce-scatter of 2e9 bytes takes
 * 2e9 x 1/2 / 1e9 = 1 s, an all-reduce of 0.5e9 bytes 2 x 0.5e9 x 1/2 / 1e9
 * = 0.5 s, 1e12 FLOPs 1 s. */
typedef struct {
    shs_step_seg_kind_t kind;
    double flops;
    shs_coll_op_t op[2];
    double bytes[2];
} seg_spec_t;

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
                calls[nc++] = (shs_meta_call_t){spec[i].op[k], (uint64_t)spec[i].bytes[k], 2, 0, i};
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
    shs_hw_t hw = {0};
    hw.peak_flops_16 = hw.peak_flops_32 = 1e12;
    hw.hbm_bw = 1e12;
    hw.net.gpus_per_node = 8;
    hw.net.intra_bw = hw.net.inter_bw = 1e9;
    shs_step_estimate_t e;
    shs_estimate_step(&cfg, &res, &r, &hw, 1.0, SHS_ALGO_RING, &e);
    return e;
}

/* Prefetch depth one: unit i+1's all-gather runs under unit i's compute,
 * a unit's reduce-scatter after its compute. Compute-bound two-unit step
 * (F0 F1 B1 B0 optim loss; all-gathers 1 s, forward 2 s, backward 4 s,
 * reduce-scatters 1 s, optimizer 0.5 s, loss all-reduce 0.5 s):
 *   comm  AG0 [0,1] AG1 [1,2] AG1' [3,4] AG0' [5,6] RS1 [9,10] RS0 [13,14]
 *   comp  F0 [1,3] F1 [3,5] B1 [5,9] B0 [9,13] optim [14,14.5] loss AR [14.5,15]
 *   exposed = 15 - 12.5 = 2.5 s: the first all-gather, the last
 *   reduce-scatter and the loss all-reduce (a unit's own max(0, comm -
 *   compute) would say 0.5 s).
 * Communication-bound forward (all-gathers 3 s, compute 1 s):
 *   AG0 [0,3] F0 [3,4] AG1 [3,6] F1 [6,7]: exposed = 7 - 2 = 5 s. */
static void test_prefetch_overlap(void **state) {
    (void)state;
    const seg_spec_t step[] = {
        {SHS_STEP_SEG_FORWARD, 2e12, {SHS_OP_ALL_GATHER}, {2e9}},
        {SHS_STEP_SEG_FORWARD, 2e12, {SHS_OP_ALL_GATHER}, {2e9}},
        {SHS_STEP_SEG_BACKWARD, 4e12, {SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER}, {2e9, 2e9}},
        {SHS_STEP_SEG_BACKWARD, 4e12, {SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER}, {2e9, 2e9}},
        {SHS_STEP_SEG_OPTIM, 0.5e12, {SHS_OP_ALL_GATHER}, {0}},
        {SHS_STEP_SEG_LOSS, 0, {SHS_OP_ALL_REDUCE}, {0.5e9}},
    };
    shs_step_estimate_t e = estimate(step, 6);
    assert_close(e.compute_s, 12.5);
    assert_close(e.comm_s, 6.5);
    assert_close(e.exposed_comm_s, 2.5);
    assert_close(e.step_s, 15);
    const seg_spec_t bound[] = {
        {SHS_STEP_SEG_FORWARD, 1e12, {SHS_OP_ALL_GATHER}, {6e9}},
        {SHS_STEP_SEG_FORWARD, 1e12, {SHS_OP_ALL_GATHER}, {6e9}},
    };
    e = estimate(bound, 2);
    assert_close(e.exposed_comm_s, 5);
    assert_close(e.step_s, 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_nics),
        cmocka_unit_test(test_two_nodes),
        cmocka_unit_test(test_forty_eight_nodes),
        cmocka_unit_test(test_prefetch_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
