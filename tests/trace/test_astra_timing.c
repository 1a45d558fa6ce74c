/* test_astra_timing.c - ASTRA-sim analytical timing (trace_astra_model.h):
 * one test per rule, each expected time worked out by hand below from the
 * rules listed with their ASTRA-sim source files in
 * src/trace/replay/trace_astra_model.c, not from shardsim.
 *
 * Notation: E endpoint delay (ns); a send over h hops of a dimension with
 * bandwidth B GB/s and latency l ns costs T = floor(h l + bytes / (B 2^30 /
 * 1e9)) ns; 50 GB/s = 53.6870912 B/ns, 100 GB/s = 107.3741824 B/ns, 25 GB/s
 * = 26.8435456 B/ns. A ring phase of K steps: E + K (T + E) + (processed
 * packets) x 3 floor(msg / local-mem-bw). MiB = 1048576 bytes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifndef SHS_HAVE_JANSSON
#error "test_astra_timing reads ASTRA-sim system JSON: needs jansson (make deps)"
#endif

#include "harness.h"
#include "shardsim/trace_astra_model.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_net.h"

#define MiB 1048576ull

static shs_astra_net_t net_file(const char *name, const char *text) {
    shs_astra_net_t n;
    const char *p = test_tmp_write(name, text, strlen(text));
    if (shs_astra_net_load(p, &n) != SHS_OK) fail_msg("%s", shs_last_error());
    return n;
}

static shs_astra_net_t ring_net(int npus) {
    char text[256], name[64];
    snprintf(text, sizeof text, "topology: [ Ring ]\nnpus_count: [ %d ]  # NPUs\nbandwidth: [ 50.0 ]  # GB/s\n"
             "latency: [ 500.0 ]  # ns\n", npus);
    snprintf(name, sizeof name, "ring%d.yml", npus);
    return net_file(name, text);
}

static shs_astra_net_t one_dim(const char *topo) {
    char text[256], name[64];
    snprintf(text, sizeof text, "topology: [ %s ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n", topo);
    snprintf(name, sizeof name, "%s.yml", topo);
    return net_file(name, text);
}

static shs_astra_sys_t sys_json(const char *name, const char *json) {
    shs_astra_sys_t s;
    const char *p = test_tmp_write(name, json, strlen(json));
    if (shs_astra_sys_load(p, &s) != SHS_OK) fail_msg("%s", shs_last_error());
    return s;
}

static shs_astra_sys_t defaults(void) {
    shs_astra_sys_t s;
    shs_astra_sys_default(&s);
    return s;
}

static double ns_of(const shs_astra_net_t *n, const shs_astra_sys_t *s, shs_astra_coll_t c, uint64_t bytes) {
    double ns;
    if (shs_astra_coll_ns(n, s, c, bytes, NULL, &ns) != SHS_OK) fail_msg("%s", shs_last_error());
    return ns;
}

/* Units: GB = 2^30 bytes, ns latency, default system (E = 10, one chunk).
 * Ring neighbours 1 hop. all-reduce of D on n: msg D/n, K = 2(n-1);
 * all-gather of D in all (ASTRA-sim size D/n per rank) and reduce-scatter of
 * D (no local-mem-bw: no processing): msg D/n, K = n-1.
 *   n=4,  1 MiB: msg 262144 -> 4882.8125 + 500 -> T 5382: AR 10+6*5392 = 32362, AG = RS = 10+3*5392 = 16186
 *   n=8,  1 MiB: msg 131072 -> 2441.40625 -> T 2941: AR 10+14*2951 = 41324, AG/RS 10+7*2951 = 20667
 *   n=16, 1 MiB: msg 65536 -> 1220.703125 -> T 1720: AR 10+30*1730 = 51910, AG/RS 10+15*1730 = 25960
 *   n=4, 64 MiB: msg 16777216 -> 312500 -> T 313000: AR 10+6*313010 = 1878070, AG/RS 10+3*313010 = 939040
 *   n=8, 64 MiB: msg 8388608 -> 156250 -> T 156750: AR 10+14*156760 = 2194650, AG/RS 10+7*156760 = 1097330
 *   n=16,64 MiB: msg 4194304 -> 78125 -> T 78625: AR 10+30*78635 = 2359060, AG/RS 10+15*78635 = 1179535 */
static void test_units_ring_collectives(void **state) {
    (void)state;
    static const struct { int n; uint64_t D; double ar, ag; } c[] = {
        {4, MiB, 32362, 16186}, {8, MiB, 41324, 20667}, {16, MiB, 51910, 25960},
        {4, 64 * MiB, 1878070, 939040}, {8, 64 * MiB, 2194650, 1097330}, {16, 64 * MiB, 2359060, 1179535},
    };
    shs_astra_sys_t s = defaults();
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        shs_astra_net_t n = ring_net(c[i].n);
        assert_true(n.bw_gbps[0] == 50 && n.lat_ns[0] == 500 && n.npus[0] == c[i].n);
        assert_true(ns_of(&n, &s, SHS_ASTRA_AR, c[i].D) == c[i].ar);
        assert_true(ns_of(&n, &s, SHS_ASTRA_AG, c[i].D / (uint64_t)c[i].n) == c[i].ag);
        assert_true(ns_of(&n, &s, SHS_ASTRA_RS, c[i].D) == c[i].ag);
    }
}

/* Switch: every send 2 hops: 8 NPUs, 1 MiB all-reduce: T = floor(1000 +
 * 2441.40625) = 3441, 10 + 14*3451 = 48324. FullyConnected: 1 hop, as the
 * ring's neighbour: 41324. */
static void test_switch_two_hops_fully_connected_one(void **state) {
    (void)state;
    shs_astra_sys_t s = defaults();
    shs_astra_net_t sw = one_dim("Switch"), fc = one_dim("FullyConnected");
    assert_true(ns_of(&sw, &s, SHS_ASTRA_AR, MiB) == 48324);
    assert_true(ns_of(&fc, &s, SHS_ASTRA_AR, MiB) == 41324);
}

/* direct all-to-all of 1 MiB per rank on 8 NPUs: msg 131072 to every peer
 * at once, 2E + the slowest: Ring farthest peer 4 hops: floor(2000 +
 * 2441.40625) = 4441 -> 4461; FullyConnected 2941 -> 2961; Switch 3441 ->
 * 3461. Ring implementation: K = 8*7/2 = 28 steps to the neighbour:
 * 10 + 28*2951 = 82638. */
static void test_all_to_all_direct_and_ring(void **state) {
    (void)state;
    shs_astra_sys_t s = sys_json("direct.json", "{\"all-to-all-implementation\": [\"direct\"]}");
    shs_astra_net_t r = one_dim("Ring"), fc = one_dim("FullyConnected"), sw = one_dim("Switch");
    assert_true(ns_of(&r, &s, SHS_ASTRA_A2A, MiB) == 4461);
    assert_true(ns_of(&fc, &s, SHS_ASTRA_A2A, MiB) == 2961);
    assert_true(ns_of(&sw, &s, SHS_ASTRA_A2A, MiB) == 3461);
    shs_astra_sys_t d = defaults();
    assert_true(ns_of(&r, &d, SHS_ASTRA_A2A, MiB) == 82638);
}

/* 2-D [Ring 4 (100 GB/s, 100 ns), Switch 2 (25 GB/s, 1000 ns)], 1 MiB
 * all-reduce, one chunk.
 * baseline: all-reduce on dim 1: msg 262144 -> 2441.40625 + 100 -> T 2541,
 *   10 + 6*2551 = 15316; then on dim 2 of the same 1 MiB: msg 524288 ->
 *   19531.25 + 2000 -> 21531, 10 + 2*21541 = 43092; sum 58408.
 * localBWAware: reduce-scatter dim 1: 10 + 3*2551 = 7663 leaves 262144;
 *   all-reduce dim 2: msg 131072 -> 4882.8125 + 2000 -> 6882, 10 + 2*6892 =
 *   13794; all-gather dim 1 of 262144: msg 262144, 7663; sum 29120.
 * Chunks pipeline across dimensions: baseline, 2 splits, 1 active: chunk
 *   524288: dim 1 msg 131072 -> 1220.703125 + 100 -> 1320, 10 + 6*1330 =
 *   7990; dim 2 msg 262144 -> 9765.625 + 2000 -> 11765, 10 + 2*11775 =
 *   23560; chunk 2 waits for dim 2: 7990 + 23560 + 23560 = 55110. */
static void test_two_dimensions(void **state) {
    (void)state;
    shs_astra_net_t n = net_file("2d.yml", "topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\n"
                                           "bandwidth: [ 100, 25 ]\nlatency: [ 100, 1000 ]\n");
    assert_int_equal(n.dims, 2);
    assert_int_equal(shs_astra_net_npus(&n), 8);
    shs_astra_sys_t base = defaults();
    assert_true(ns_of(&n, &base, SHS_ASTRA_AR, MiB) == 58408);
    shs_astra_sys_t bw = sys_json("bw.json", "{\"collective-optimization\": \"localBWAware\"}");
    assert_true(ns_of(&n, &bw, SHS_ASTRA_AR, MiB) == 29120);
    shs_astra_sys_t two = sys_json("two.json", "{\"preferred-dataset-splits\": 2}");
    assert_true(ns_of(&n, &two, SHS_ASTRA_AR, MiB) == 55110);
}

/* preferred-dataset-splits 4 on Ring 8, 1 MiB all-reduce: chunk 262144,
 * msg 32768 -> 610.3515625 + 500 -> 1110; a chunk 10 + 14*1120 = 15690;
 * 1 active: 4 in a row 62760; 2 active: 2 waves 31380; 4 active: 15690.
 * A chunk smaller than the NPUs grows to them: 16 bytes / 4 = 4 < 8, so 4
 * chunks of 8 bytes, msg 1 -> T 500: 4 * (10 + 14*510) = 28600. */
static void test_chunks_and_active_chunks(void **state) {
    (void)state;
    shs_astra_net_t n = ring_net(8);
    shs_astra_sys_t a1 = sys_json("a1.json", "{\"preferred-dataset-splits\": 4, \"active-chunks-per-dimension\": 1}");
    shs_astra_sys_t a2 = sys_json("a2.json", "{\"preferred-dataset-splits\": 4, \"active-chunks-per-dimension\": 2}");
    shs_astra_sys_t a4 = sys_json("a4.json", "{\"preferred-dataset-splits\": 4, \"active-chunks-per-dimension\": 4}");
    assert_true(ns_of(&n, &a1, SHS_ASTRA_AR, MiB) == 62760);
    assert_true(ns_of(&n, &a2, SHS_ASTRA_AR, MiB) == 31380);
    assert_true(ns_of(&n, &a4, SHS_ASTRA_AR, MiB) == 15690);
    assert_true(ns_of(&n, &a1, SHS_ASTRA_AR, 16) == 28600);
}

/* endpoint-delay 100 on Ring 8, 1 MiB all-reduce: 100 + 14*(2941 + 100) = 42674 */
static void test_endpoint_delay(void **state) {
    (void)state;
    shs_astra_net_t n = ring_net(8);
    shs_astra_sys_t s = sys_json("ep.json", "{\"endpoint-delay\": 100}");
    assert_true(ns_of(&n, &s, SHS_ASTRA_AR, MiB) == 42674);
}

/* local-mem-bw 1600 GB/s (1e9): each of the n-1 reducing steps 3 x
 * floor(131072 / 1600) = 3*81 = 243: all-reduce 41324 + 7*243 = 43025,
 * reduce-scatter 20667 + 1701 = 22368, all-gather unchanged 20667.
 * local-reduction-delay is used in no ASTRA-sim 2.0 timing: 50 changes
 * nothing. */
static void test_local_reduction(void **state) {
    (void)state;
    shs_astra_net_t n = ring_net(8);
    shs_astra_sys_t s = sys_json("mem.json", "{\"local-mem-bw\": 1600}");
    assert_true(ns_of(&n, &s, SHS_ASTRA_AR, MiB) == 43025);
    assert_true(ns_of(&n, &s, SHS_ASTRA_RS, MiB) == 22368);
    assert_true(ns_of(&n, &s, SHS_ASTRA_AG, MiB / 8) == 20667);
    shs_astra_sys_t r = sys_json("red.json", "{\"local-mem-bw\": 1600, \"local-reduction-delay\": 50}");
    assert_true(ns_of(&n, &r, SHS_ASTRA_AR, MiB) == 43025);
}

/* all-reduce implementations, Ring 8, 1 MiB, E = 10:
 * direct: msg 131072 to all peers, twice: 3E + 2*4441 = 8912.
 * halvingDoubling: 6 steps of 524288 (1 hop), 262144 (2), 131072 (4),
 *   131072 (4), 262144 (2), 524288 (1): T = 10265, 5882, 4441, 4441, 5882,
 *   10265, sum 41176, + 7E = 41246; with local-mem-bw 1600 the 2nd and 3rd
 *   packets are reduced: 3*floor(262144/1600) + 3*floor(131072/1600) =
 *   489 + 243: 41978.
 * doubleBinaryTree: in-order tree 0..6 under root 7; leaves 0,2,4,6 ->
 *   1 or 5 (1 hop), 1,5 -> 3 (2 hops), 3 -> 7 (4 hops); every message 1 MiB
 *   (19531.25 ns): T1 20031, T2 20531, T4 21531. Up: leaves send at 10, 1 and
 *   5 at 10+20031+10 = 20051, 3 at 20051+20531+10 = 40592, 7 receives at
 *   62123 and sends at 62133; 3 receives 83664, sends 83674; 1 receives
 *   104205, sends 104215; leaves receive 124246 and end at 124256. */
static void test_all_reduce_implementations(void **state) {
    (void)state;
    shs_astra_net_t n = ring_net(8);
    shs_astra_sys_t dir = sys_json("d.json", "{\"all-reduce-implementation\": [\"direct\"]}");
    shs_astra_sys_t hd = sys_json("hd.json", "{\"all-reduce-implementation\": [\"halvingDoubling\"]}");
    shs_astra_sys_t hdm = sys_json("hdm.json", "{\"all-reduce-implementation\": [\"halvingDoubling\"], "
                                               "\"local-mem-bw\": 1600}");
    shs_astra_sys_t dbt = sys_json("dbt.json", "{\"all-reduce-implementation\": [\"doubleBinaryTree\"]}");
    shs_astra_sys_t ring = sys_json("r.json", "{\"all-reduce-implementation\": [\"ring\"]}");
    assert_true(ns_of(&n, &ring, SHS_ASTRA_AR, MiB) == 41324);
    assert_true(ns_of(&n, &dir, SHS_ASTRA_AR, MiB) == 8912);
    assert_true(ns_of(&n, &hd, SHS_ASTRA_AR, MiB) == 41246);
    assert_true(ns_of(&n, &hdm, SHS_ASTRA_AR, MiB) == 41978);
    assert_true(ns_of(&n, &dbt, SHS_ASTRA_AR, MiB) == 124256);
}

/* The real files: microAllReduce.txt (ALLREDUCE 1048576) on Ring_8npus.yml
 * with Ring_4chunks.json (localBWAware, 4 splits, 1 active, endpoint 10,
 * local-mem-bw 1600): chunk 262144, msg 32768 -> T 1110, reduction 3 x
 * floor(20.48) = 60 on 7 steps: 10 + 14*1120 + 7*60 = 16110 a chunk, 4 in a
 * row: 64440 ns. Timed through the replay's own path (shs_net_load,
 * shs_net_set_system, shs_net_rec_time). */
static void test_real_files_micro_all_reduce(void **state) {
    (void)state;
    char net_path[1024], sys_path[1024], wl[1024];
    snprintf(net_path, sizeof net_path, "%s/traces/astra-sim/network/Ring_8npus.yml", test_shared_dir());
    snprintf(sys_path, sizeof sys_path, "%s/traces/astra-sim/system/Ring_4chunks.json", test_shared_dir());
    snprintf(wl, sizeof wl, "%s/traces/astra-sim/text-workloads/microAllReduce.txt", test_shared_dir());
    shs_net_t net;
    assert_int_equal(shs_net_load(net_path, &net), SHS_OK);
    assert_int_equal(shs_net_set_system(&net, sys_path), SHS_OK);
    shs_trace_t *t;
    shs_trace_load_opts_t lo = {0};
    if (shs_trace_load(&t, wl, &lo) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->world, 8);
    assert_int_equal(shs_astra_check_trace(&net.anet, &net.asys, t), SHS_OK);
    double s = shs_net_rec_time(&net, SHS_ALGO_RING, t, &t->ranks[0].recs[0]);
    assert_true(fabs(s - 64440e-9) < 1e-15);
    shs_trace_free(t);
    /* the HGX file: Switch 8, 400 GB/s, 936.25 ns; 1 MiB, 4 splits, 2
     * active, local-mem-bw 3350: msg 32768 -> 32768/429.4967296 = 76.29...
     * + 1872.5 -> 1948; reduction 3*floor(9.78) = 27; a chunk 10 + 14*1958 +
     * 7*27 = 27611; 2 waves: 55222 */
    snprintf(net_path, sizeof net_path, "%s/traces/astra-sim/network/HGX-H100-validated.yml", test_shared_dir());
    snprintf(sys_path, sizeof sys_path, "%s/traces/astra-sim/system/HGX-H100-validated.json", test_shared_dir());
    assert_int_equal(shs_net_load(net_path, &net), SHS_OK);
    assert_int_equal(shs_net_set_system(&net, sys_path), SHS_OK);
    assert_true(ns_of(&net.anet, &net.asys, SHS_ASTRA_AR, MiB) == 55222);
}

/* All-to-all from a file to the model. ASTRA-sim hands a Chakra node's
 * comm_size (and a 1.0 text workload's size) to Sys::generate_all_to_all
 * unchanged: a rank's whole send buffer, of which the ring sends size / n
 * per step (astra-sim/system/Sys.cc generate_collective, collective_algorithm/
 * Ring.cc). all_to_all_4npus_1MB (comm_size 1048576) on Ring_4npus.yml,
 * default system: msg 262144 -> floor(500 + 4882.8125) = 5382, K = 4*3/2 =
 * 6 steps: 10 + 6*5392 = 32362 ns. With Ring_4chunks.json (4 splits, 1
 * active, all-to-all not reduced): chunk 262144, msg 65536 -> floor(500 +
 * 1220.703125) = 1720, 10 + 6*1730 = 10390 a chunk, 4 in a row 41560 ns.
 * The same size from ASTRA-sim 1.0's own microAllToAll.txt (astra-sim/
 * astra-sim @c94c746 inputs/workload/ASTRA-sim-1.0/microAllToAll.txt,
 * typed here byte for byte, CRLF line ends included) on 4 ranks times the
 * same. */
static void test_real_files_all_to_all(void **state) {
    (void)state;
    char net_path[1024], sys_path[1024], dir[1024];
    snprintf(net_path, sizeof net_path, "%s/traces/astra-sim/network/Ring_4npus.yml", test_shared_dir());
    snprintf(sys_path, sizeof sys_path, "%s/traces/astra-sim/system/Ring_4chunks.json", test_shared_dir());
    snprintf(dir, sizeof dir, "%s/traces/chakra-et/microbench/all_to_all_4npus_1MB", test_shared_dir());
    static const char wl[] = "MICRO\r\n1\r\nconv1 -1 5 NONE 0 5 NONE 0 5  ALLTOALL 1048576 5\r\n";
    const char *paths[2] = {dir, NULL};
    char wl_path[1024];
    snprintf(wl_path, sizeof wl_path, "%s", test_tmp_write("microAllToAll.txt", wl, strlen(wl)));
    paths[1] = wl_path;
    for (int k = 0; k < 2; k++) {
        shs_net_t net;
        assert_int_equal(shs_net_load(net_path, &net), SHS_OK);
        shs_trace_t *t;
        shs_trace_load_opts_t lo = {.world = 4};
        if (shs_trace_load(&t, paths[k], &lo) != SHS_OK) fail_msg("%s", shs_last_error());
        assert_int_equal(t->world, 4);
        assert_int_equal(t->ranks[2].n, 1);
        const shs_trace_rec_t *r = &t->ranks[2].recs[0];
        assert_int_equal(r->op, SHS_OP_ALL_TO_ALL);
        assert_int_equal(shs_astra_check_trace(&net.anet, &net.asys, t), SHS_OK);
        double s = shs_net_rec_time(&net, SHS_ALGO_RING, t, r);
        if (fabs(s - 32362e-9) > 1e-15) fail_msg("%s: %.0f ns, want 32362", paths[k], s * 1e9);
        assert_int_equal(shs_net_set_system(&net, sys_path), SHS_OK);
        s = shs_net_rec_time(&net, SHS_ALGO_RING, t, r);
        if (fabs(s - 41560e-9) > 1e-15) fail_msg("%s with 4 chunks: %.0f ns, want 41560", paths[k], s * 1e9);
        shs_trace_free(t);
    }
}

/* ASTRA-sim 1.0's Transformer_HybridParallel.txt (astra-sim/astra-sim
 * @c94c746 inputs/workload/ASTRA-sim-1.0/: its header, tab-separated with
 * CRLF, and its first two layers typed here; the count cut to 2) on the
 * 1-D Ring_8npus.yml. model_parallel_NPU_group 4 ends inside the one
 * dimension: ASTRA-sim splits it (Sys::break_dimension) into logical
 * dimensions of 4 (neighbours 1 position apart) and 2 (4 positions apart:
 * 4 hops the shorter way round 8). Default system, E = 10 ns, 50 GB/s =
 * 53.6870912 B/ns, 500 ns a hop:
 *   Embedding fwd ALLGATHER 8388608 on the model group (n 4): msg 8388608
 *     -> floor(500 + 156250) = 156750, K 3: 10 + 3*156760 = 470290 ns;
 *   Q1 ig ALLREDUCE 8388608 on the model group: msg 2097152 -> floor(500 +
 *     39062.5) = 39562, K 6: 10 + 6*39572 = 237442 ns;
 *   Q1 wg ALLREDUCE 33554432 on the data group (n 2): msg 16777216 ->
 *     floor(4*500 + 312500) = 314500, K 2: 10 + 2*314510 = 629030 ns. */
static void test_transformer_on_one_dimension(void **state) {
    (void)state;
    static const char wl[] =
        "HYBRID_TRANSFORMER\tmodel_parallel_NPU_group: 4\t\t\t\t\t\t\t\t\t\t\r\n2\t\t\t\t\t\t\t\t\t\t\t\r\n"
        "Embedding\t-1\t300\tALLGATHER\t8388608\t1\tNONE\t0\t1\tNONE\t0\t10\r\n"
        "Q1\t-1\t3145728\tNONE\t0\t2162688\tALLREDUCE\t8388608\t2228224\tALLREDUCE\t33554432\t10\r\n";
    char net_path[1024];
    snprintf(net_path, sizeof net_path, "%s/traces/astra-sim/network/Ring_8npus.yml", test_shared_dir());
    shs_net_t net;
    assert_int_equal(shs_net_load(net_path, &net), SHS_OK);
    shs_trace_t *t;
    shs_trace_load_opts_t lo = {.world = 8};
    if (shs_trace_load(&t, test_tmp_write("transformer.txt", wl, strlen(wl)), &lo) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->astra_mp_group, 4);
    if (shs_astra_check_trace(&net.anet, &net.asys, t) != SHS_OK) fail_msg("%s", shs_last_error());
    /* rank 5: model group {4..7}, data group {1, 5}; order fwd Embedding, then Q1 ig, Q1 wg, Embedding ig (none) */
    static const double want_ns[] = {470290, 237442, 629030};
    assert_int_equal(t->ranks[5].n, 3);
    for (int i = 0; i < 3; i++) {
        double s = shs_net_rec_time(&net, SHS_ALGO_RING, t, &t->ranks[5].recs[i]);
        if (fabs(s - want_ns[i] * 1e-9) > 1e-15) fail_msg("call %d: %.0f ns, want %.0f", i, s * 1e9, want_ns[i]);
    }
    assert_int_equal(t->comms[t->ranks[5].recs[2].comm].size, 2);
    shs_trace_free(t);
    /* the split as ASTRA-sim makes it, with the system's list grown by a copy */
    shs_astra_net_t n = ring_net(8);
    shs_astra_sys_t s = sys_json("hd2.json", "{\"all-reduce-implementation\": [\"direct\"]}");
    assert_int_equal(shs_astra_break_dimension(&n, &s, 2), SHS_OK);
    assert_int_equal(n.dims, 2);
    assert_true(n.npus[0] == 2 && n.npus[1] == 4 && n.stride[1] == 2 && n.span[1] == 8 && n.phys[1] == 0);
    assert_true(s.nimpl[SHS_ASTRA_AR] == 2 && s.impl[SHS_ASTRA_AR][1] == SHS_ASTRA_DIRECT);
    shs_astra_net_t m = ring_net(8);
    shs_astra_sys_t d = defaults();
    assert_int_equal(shs_astra_break_dimension(&m, &d, 3), SHS_INVALID_ARG); /* 3 does not split 8 */
    assert_non_null(strstr(shs_last_error(), "model_parallel_NPU_group 3"));
}

/* ASTRA-sim 1.0's DLRM_HybridParallel.txt (@c94c746, typed here; "HYBRID_
 * DLRM 4": layer 0's input-gradient all-to-all goes after layer 5's weight
 * gradient): read whole, each rank issues 2 all-to-alls (fwd, layer 0's
 * ig). Cut to its first 5 layers, layer 5 is gone and the ig would be lost:
 * refused at line 1. */
static void test_dlrm_last_bottom_layer(void **state) {
    (void)state;
    static const char layers[] =
        "Embedding\t-1\t300\tALLTOALL\t98304\t300\tALLTOALL\t98304\t300\tNONE\t0\t98\r\n"
        "MLP_Bottom_0\t-1\t1280\tNONE\t0\t794\tNONE\t0\t896\tALLREDUCE\t13312\t13\r\n"
        "MLP_Bottom_1\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\r\n"
        "MLP_Bottom_2\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\r\n"
        "MLP_Bottom_3\t-1\t800\tNONE\t0\t1280\tNONE\t0\t800\tALLREDUCE\t16384\t16\r\n"
        "MLP_Top_0\t-1\t6400\tNONE\t0\t6400\tNONE\t0\t4480\tALLREDUCE\t1064960\t1065\r\n"
        "MLP_Top_1\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\r\n"
        "MLP_Top_2\t-1\t2560\tNONE\t0\t2560\tNONE\t0\t1792\tALLREDUCE\t524288\t524\r\n";
    char text[2048];
    snprintf(text, sizeof text, "HYBRID_DLRM\t4\t\t\t\t\t\t\t\t\t\t\t\r\n8\t\t\t\t\t\t\t\t\t\t\t\r\n%s", layers);
    shs_trace_t *t;
    shs_trace_load_opts_t lo = {.world = 8};
    if (shs_trace_load(&t, test_tmp_write("DLRM_HybridParallel.txt", text, strlen(text)), &lo) != SHS_OK)
        fail_msg("%s", shs_last_error());
    int a2a = 0;
    for (size_t i = 0; i < t->ranks[3].n; i++) a2a += t->ranks[3].recs[i].op == SHS_OP_ALL_TO_ALL;
    assert_int_equal(a2a, 2);
    shs_trace_free(t);
    const char *five = strstr(layers, "MLP_Top_0");
    snprintf(text, sizeof text, "HYBRID_DLRM\t4\t\t\t\t\t\t\t\t\t\t\t\r\n5\t\t\t\t\t\t\t\t\t\t\t\r\n%.*s",
             (int)(five - layers), layers);
    const char *p = test_tmp_write("cut.txt", text, strlen(text));
    assert_int_equal(shs_trace_load(&t, p, &lo), SHS_PARSE);
    if (!strstr(shs_last_error(), "cut.txt:1: HYBRID_DLRM's last bottom layer 4 needs a layer after it"))
        fail_msg("%s", shs_last_error());
}

/* refusals: a 16-rank trace on 8 NPUs names both; bad system keys and
 * values name file and key; halvingDoubling on 6 NPUs; a bad network line */
static void test_refusals(void **state) {
    (void)state;
    shs_astra_net_t n = ring_net(8);
    shs_astra_sys_t s = defaults(), out;
    shs_trace_t *t;
    int id;
    assert_int_equal(shs_trace_create(&t, 16), SHS_OK);
    assert_int_equal(shs_trace_add_comm(t, "world", 16, NULL, &id), SHS_OK);
    assert_int_equal(shs_astra_check_trace(&n, &s, t), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "16 ranks"));
    assert_non_null(strstr(shs_last_error(), "8 NPUs"));
    shs_trace_free(t);
    const char *p = test_tmp_write("unknown.json", "{\"foo\": 1}", 10);
    assert_int_equal(shs_astra_sys_load(p, &out), SHS_PARSE);
    assert_non_null(strstr(shs_last_error(), "unknown.json"));
    assert_non_null(strstr(shs_last_error(), "\"foo\""));
    static const char *const bad[] = {
        "{\"all-reduce-implementation\": [\"oneRing\"]}", "{\"scheduling-policy\": \"EXPLICIT\"}",
        "{\"model-shared-bus\": 1}", "{\"active-chunks-per-dimension\": 0}", "{\"endpoint-delay\": \"ten\"}",
        "{\"all-gather-implementation\": [\"direct4\"]}",
    };
    static const char *const key[] = {"all-reduce-implementation", "scheduling-policy", "model-shared-bus",
                                      "active-chunks-per-dimension", "endpoint-delay", "all-gather-implementation"};
    for (int i = 0; i < 6; i++) {
        p = test_tmp_write("bad.json", bad[i], strlen(bad[i]));
        assert_int_equal(shs_astra_sys_load(p, &out), SHS_PARSE);
        assert_non_null(strstr(shs_last_error(), "bad.json"));
        assert_non_null(strstr(shs_last_error(), key[i]));
    }
    shs_astra_net_t six = ring_net(6);
    shs_astra_sys_t hd = sys_json("hd6.json", "{\"all-reduce-implementation\": [\"halvingDoubling\"]}");
    double ns;
    assert_int_equal(shs_astra_coll_ns(&six, &hd, SHS_ASTRA_AR, MiB, NULL, &ns), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "6 NPUs"));
    shs_astra_net_t bad_net;
    const char *torus = "topology: [ Torus ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n";
    p = test_tmp_write("bad.yml", torus, strlen(torus));
    assert_int_equal(shs_astra_net_load(p, &bad_net), SHS_PARSE);
    assert_non_null(strstr(shs_last_error(), "bad.yml:1"));
    assert_non_null(strstr(shs_last_error(), "Torus"));
    const char *one = "topology: [ Ring ]\nnpus_count: [ 1 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n";
    p = test_tmp_write("one.yml", one, strlen(one));
    assert_int_equal(shs_astra_net_load(p, &bad_net), SHS_PARSE);
    assert_non_null(strstr(shs_last_error(), "one.yml:2"));
}

static void expect_net_error(const char *name, const char *text, const char *needle) {
    shs_astra_net_t n;
    const char *p = test_tmp_write(name, text, strlen(text));
    assert_int_equal(shs_astra_net_load(p, &n), SHS_PARSE);
    if (!strstr(shs_last_error(), needle) || !strstr(shs_last_error(), name))
        fail_msg("want '%s' and %s in: %s", needle, name, shs_last_error());
}

/* Numbers beyond any real network (1e308 GB/s printed "inf" ms, 1e-300 GB/s
 * a 300-digit time), keys given twice (the last used to win), an empty
 * file: refused, naming the bound, the key and the line. */
static void test_out_of_range_and_duplicate_keys(void **state) {
    (void)state;
#define NET(bw, lat, npus) "topology: [ Ring ]\nnpus_count: [ " npus " ]\nbandwidth: [ " bw " ]\nlatency: [ " lat " ]\n"
    expect_net_error("bwhi.yml", NET("1e308", "500", "8"), "bwhi.yml:3: bandwidth entry 1 '1e308': want GB/s in 1e-3..1e6");
    expect_net_error("bwlo.yml", NET("1e-300", "500", "8"), "bwlo.yml:3: bandwidth entry 1 '1e-300': want GB/s in 1e-3..1e6");
    expect_net_error("lathi.yml", NET("50", "1e308", "8"), "lathi.yml:4: latency entry 1 '1e308': want ns in 0..1e9");
    expect_net_error("npus.yml", NET("50", "500", "4294967296"), "npus.yml:2: npus_count entry 1 '4294967296': want an integer in 2..1048576");
    expect_net_error("empty.yml", "# nothing\n", "empty.yml: no topology/npus_count/bandwidth/latency keys");
    expect_net_error("dup.yml", NET("50", "500", "8") "npus_count: [ 4 ]\n", "dup.yml:5: key 'npus_count' given twice (first at line 2)");
    /* the bounds themselves load */
    shs_astra_net_t n;
    const char *edge = NET("1e6", "1e9", "2");
    if (shs_astra_net_load(test_tmp_write("edge.yml", edge, strlen(edge)), &n) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_true(n.bw_gbps[0] == 1e6 && n.lat_ns[0] == 1e9);
#undef NET
    shs_astra_sys_t s;
    const char *ed = "{\"endpoint-delay\": 1e300}";
    assert_int_equal(shs_astra_sys_load(test_tmp_write("ed.json", ed, strlen(ed)), &s), SHS_PARSE);
    assert_non_null(strstr(shs_last_error(), "\"endpoint-delay\": want ns in 0..1e9"));
    const char *dup = "{\"endpoint-delay\": 10,\n \"endpoint-delay\": 100000}";
    assert_int_equal(shs_astra_sys_load(test_tmp_write("dup.json", dup, strlen(dup)), &s), SHS_PARSE);
    if (!strstr(shs_last_error(), "dup.json:2") || !strstr(shs_last_error(), "duplicate"))
        fail_msg("%s", shs_last_error());
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_ring_collectives),
        cmocka_unit_test(test_switch_two_hops_fully_connected_one),
        cmocka_unit_test(test_all_to_all_direct_and_ring),
        cmocka_unit_test(test_two_dimensions),
        cmocka_unit_test(test_chunks_and_active_chunks),
        cmocka_unit_test(test_endpoint_delay),
        cmocka_unit_test(test_local_reduction),
        cmocka_unit_test(test_all_reduce_implementations),
        cmocka_unit_test(test_real_files_micro_all_reduce),
        cmocka_unit_test(test_real_files_all_to_all),
        cmocka_unit_test(test_transformer_on_one_dimension),
        cmocka_unit_test(test_dlrm_last_bottom_layer),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_out_of_range_and_duplicate_keys),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
