/* test_nccl_model.c - nccl_model.h against values worked by hand from NCCL
 * 2.20.3's src/graph/tuning.cc (NVIDIA/nccl commit b6475625): the tables
 * typed here from that file (not read from src/net/nccl_tables.c), the
 * formulas applied step by step in the comments.
 * Topologies: one DGX A100 node as NCCL's logs and search give it (24
 * channels of 10 GB/s on NVLink, arch 80, LL128 on), its 8 NICs rated 24
 * GB/s; Intel CPUs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "shardsim/nccl_model.h"

static const shs_nccl_topo_t dgx_a100 = {.arch = 80, .intra_pci = 0, .channels_intra = 24, .bw_intra = 10,
                                          .gpus_per_node = 8, .nics_per_node = 8, .nic_gbs = 24, .cpu_amd = 0,
                                          .ll128 = 1};

static void close_to(double got, double want, const char *what) {
    if (fabs(got - want) > 1e-12 * fabs(want) + 1e-18) fail_msg("%s: got %.15g, want %.15g", what, got, want);
}

static double cost(shs_coll_op_t op, shs_net_algo_t a, shs_nccl_proto_t p, double S, int n, int nodes) {
    shs_nccl_cost_t c;
    assert_int_equal(shs_nccl_time(&dgx_a100, op, a, p, S, n, nodes, &c), 0);
    return c.time_s;
}

/* One node, 8 ranks, all-reduce: nsteps 14, busBw 24 x 10 = 240 GB/s.
 *   ring Simple  lat 8.4 + 14 x 3.4 = 56 us,        algBw 240 x 8/14
 *   ring LL128   lat 14 + 14 x 1.9 = 40.6 us,       busBw min(240 x .92, 24 x 20) = 220.8, x 8/14
 *   ring LL      lat 6.6 + 14 x .6 = 15 us,         busBw min(87.7, 240 / 4) = 60, x 8/14
 *   tree Simple  lat 0 + 2 (7 x 28) = 392 us,       busBw min(240 x .92, 24 x 24) = 220.8, / 2
 *   tree LL      lat 6.8 + 2 (7 x .6) = 15.2 us,    busBw min(220.8 / 3.8, 87.7), / 2
 * (S = 2^30: log2(S/64) = 24, no tree correction; S = 8: log2i(0) = 0, factor 1.0 for LL, .9 Simple) */
static void test_one_node_all_reduce(void **state) {
    (void)state;
    const double G = 1073741824.0;
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_RING, SHS_PROTO_SIMPLE, G, 8, 1), 56e-6 + G / (240e9 * 8 / 14), "ring simple");
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_RING, SHS_PROTO_LL128, G, 8, 1), 40.6e-6 + G / (220.8e9 * 8 / 14),
             "ring ll128");
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_RING, SHS_PROTO_LL, G, 8, 1), 15e-6 + G / (60e9 * 8 / 14), "ring ll");
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_TREE, SHS_PROTO_SIMPLE, G, 8, 1), 392e-6 + G / (220.8e9 / 2), "tree simple");
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_TREE, SHS_PROTO_SIMPLE, 8, 8, 1), 392e-6 + 8 / (220.8e9 / 2 * .9),
             "tree simple 8 B");
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_TREE, SHS_PROTO_LL, 8, 8, 1), 15.2e-6 + 8 / (220.8e9 / 3.8 / 2),
             "tree ll 8 B");
    /* NCCL's choice: 8 bytes by LL ring (15 us), 1 GiB by the Simple ring */
    shs_nccl_cost_t c;
    assert_int_equal(shs_nccl_best(&dgx_a100, SHS_OP_ALL_REDUCE, SHS_NUM_ALGOS, SHS_NUM_PROTOS, 8, 8, 1, &c), 0);
    assert_true(c.algo == SHS_ALGO_RING && c.proto == SHS_PROTO_LL);
    close_to(c.time_s, 15e-6 + 8 / (60e9 * 8 / 14), "best 8 B");
    assert_int_equal(shs_nccl_best(&dgx_a100, SHS_OP_ALL_REDUCE, SHS_NUM_ALGOS, SHS_NUM_PROTOS, G, 8, 1, &c), 0);
    assert_true(c.algo == SHS_ALGO_RING && c.proto == SHS_PROTO_SIMPLE && c.channels == 24);
    /* forced: tree only, Simple only */
    assert_int_equal(shs_nccl_best(&dgx_a100, SHS_OP_ALL_REDUCE, SHS_ALGO_TREE, SHS_PROTO_SIMPLE, G, 8, 1, &c), 0);
    close_to(c.time_s, 392e-6 + G / (220.8e9 / 2), "forced tree simple");
}

/* Two nodes of 8 (n = 16), all-gather of S = 1.6e9 B: the multi-node graph
 * has 2 x 8 channels of 24 / 2 GB/s = 192 GB/s; nsteps 15, 1 of them inter.
 *   Simple  lat 8.4 + 14 x max(3.4, 3 x 1) + 1 x 14 = 70 us, algBw 192 x 16/15
 *   LL128   lat 14 + 14 x max(1.9, 1) + 4.0 = 44.6 us, busBw min(192 x .92, 16 x 20) = 176.64
 *   LL      lat 6.6 + 14 x max(.6, 1) + 2.7 = 23.3 us, busBw min(llMaxBw[Intel][2 nodes] 39, 192/4) = 39
 * No tree for all-gather. 192 nodes (1536 ranks), all-reduce of 4e9 B, ring Simple:
 *   nsteps 3070, nInterSteps 384; lat (8.4 + 2686 x 3.4 + 384 x 14) x 1.4 (plateau: 4e9/(16 x 1536) >= 64)
 *   = 20323.56 us; algBw 192 x 1536/3070. */
static void test_multi_node(void **state) {
    (void)state;
    const double S = 1.6e9;
    close_to(cost(SHS_OP_ALL_GATHER, SHS_ALGO_RING, SHS_PROTO_SIMPLE, S, 16, 2), 70e-6 + S / (192e9 * 16 / 15), "simple");
    close_to(cost(SHS_OP_ALL_GATHER, SHS_ALGO_RING, SHS_PROTO_LL128, S, 16, 2), 44.6e-6 + S / (176.64e9 * 16 / 15),
             "ll128");
    close_to(cost(SHS_OP_ALL_GATHER, SHS_ALGO_RING, SHS_PROTO_LL, S, 16, 2), 23.3e-6 + S / (39e9 * 16 / 15), "ll");
    shs_nccl_cost_t c;
    assert_int_equal(shs_nccl_time(&dgx_a100, SHS_OP_ALL_GATHER, SHS_ALGO_TREE, SHS_PROTO_SIMPLE, S, 16, 2, &c), -1);
    close_to(cost(SHS_OP_ALL_REDUCE, SHS_ALGO_RING, SHS_PROTO_SIMPLE, 4e9, 1536, 192),
             (8.4e-6 + 2686 * 3.4e-6 + 384 * 14e-6) * 1.4 + 4e9 / (192e9 * 1536 / 3070), "1536 ranks");
    /* one rank per node (a replica group): one NIC, 2 channels of 12 GB/s; LL128 x 0.7 below 2 per node */
    /*   busBw min(2 x 12 x 0.7, 2 x 20) = 16.8; nsteps 3, all inter: lat 14 + 3 x 4.0 = 26 us */
    close_to(cost(SHS_OP_ALL_GATHER, SHS_ALGO_RING, SHS_PROTO_LL128, S, 4, 4), 26e-6 + S / (16.8e9 * 4 / 3),
             "one per node");
}

/* What NCCL does not have is refused, not priced. */
static void test_refusals_and_names(void **state) {
    (void)state;
    shs_nccl_cost_t c;
    shs_nccl_topo_t no128 = dgx_a100;
    no128.ll128 = 0;
    assert_int_equal(shs_nccl_time(&no128, SHS_OP_ALL_REDUCE, SHS_ALGO_RING, SHS_PROTO_LL128, 1e6, 8, 1, &c), -1);
    assert_int_equal(shs_nccl_time(&dgx_a100, SHS_OP_ALL_REDUCE, SHS_ALGO_DIRECT, SHS_PROTO_SIMPLE, 1e6, 8, 1, &c), -1);
    assert_int_equal(shs_nccl_best(&dgx_a100, SHS_OP_REDUCE_SCATTER, SHS_ALGO_TREE, SHS_NUM_PROTOS, 1e6, 8, 1, &c), -1);
    assert_int_equal(shs_nccl_best(&no128, SHS_OP_ALL_GATHER, SHS_NUM_ALGOS, SHS_PROTO_LL128, 1e6, 8, 1, &c), -1);
    shs_nccl_proto_t p;
    assert_int_equal(shs_nccl_proto_parse("ll128", &p), 0);
    assert_int_equal(p, SHS_PROTO_LL128);
    assert_int_equal(shs_nccl_proto_parse("LL", &p), -1);
    assert_string_equal(shs_nccl_proto_name(SHS_PROTO_SIMPLE), "simple");
    /* one rank: nothing to move */
    assert_int_equal(shs_nccl_time(&dgx_a100, SHS_OP_ALL_REDUCE, SHS_ALGO_RING, SHS_PROTO_SIMPLE, 1e6, 1, 1, &c), 0);
    assert_true(c.time_s == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_node_all_reduce),
        cmocka_unit_test(test_multi_node),
        cmocka_unit_test(test_refusals_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
