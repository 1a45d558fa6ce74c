/* test_bench.c - the benchmark's arithmetic and output, not its speed:
 * nccl-tests bus-bandwidth factors and minimal-traffic closed forms, sizes
 * and counts per op, and `shardsim bench` output (text rows start with the
 * size and end with busbw; JSON parses and has every row). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

#include "harness.h"
#include "bench/bench.h"
#include "shardsim/net.h"

static void test_busbw_factors_and_traffic(void **state) {
    (void)state;
    assert_true(shs_net_busbw_factor(SHS_OP_ALL_REDUCE, 4) == 1.5);
    assert_true(shs_net_busbw_factor(SHS_OP_ALL_GATHER, 4) == 0.75);
    assert_true(shs_net_busbw_factor(SHS_OP_REDUCE_SCATTER, 8) == 0.875);
    assert_true(shs_net_busbw_factor(SHS_OP_BROADCAST, 8) == 1.0);
    assert_true(shs_net_busbw_factor(SHS_OP_ALL_TO_ALL, 4) == 0.75); /* nccl-tests alltoall.cu: (n-1)/n */
    assert_true(shs_bench_min_traffic(SHS_OP_ALL_REDUCE, 4, 1000) == 8000.0);
    assert_true(shs_bench_min_traffic(SHS_OP_ALL_GATHER, 4, 1000) == 5000.0);
    assert_true(shs_bench_min_traffic(SHS_OP_REDUCE_SCATTER, 4, 1000) == 5000.0);
    assert_true(shs_bench_min_traffic(SHS_OP_BROADCAST, 4, 1000) == 5000.0);
    /* sendrecv (nccl-tests sendrecv.cu): factor 1; each rank's message read and written once */
    assert_true(shs_net_busbw_factor(SHS_OP_SEND, 4) == 1.0);
    assert_true(shs_bench_min_traffic(SHS_OP_SEND, 4, 1000) == 8000.0);
}

static void test_matmul_rate_and_peak(void **state) {
    (void)state;
    assert_true(shs_bench_matmul_gflops(16, 24, 40, 1) > 0);
    shs_cpu_peak_t p;
    shs_bench_cpu_peak(&p);
    assert_true(p.cores >= 1);
    /* f32 lanes per register from the ISA's width: SSE2 128 bits, AVX and
     * AVX2 256, AVX-512 512 bits: the ISAs' register widths */
    static const struct { const char *isa; int floats; } lanes[] = {
        {"sse2", 4}, {"avx", 8}, {"avx2", 8}, {"avx512f", 16}};
    int known = 0;
    for (size_t i = 0; i < sizeof lanes / sizeof lanes[0]; i++)
        if (strcmp(p.isa, lanes[i].isa) == 0) {
            assert_int_equal(p.vector_floats, lanes[i].floats);
            known = 1;
        }
    if (!known) fail_msg("unknown ISA '%s'", p.isa);
    assert_true(p.peak_gflops == shs_bench_peak_gflops(p.cores, p.ghz, p.vector_floats, p.fma, p.fma_units));
}

/* The peak formula against hand-worked machines: flops per cycle per core
 * are lanes x 2 (FMA) x pipes. */
static void test_peak_formula(void **state) {
    (void)state;
    /* 2 cores at 3 GHz, AVX2 with FMA, 2 pipes: 2 x 3 x 8 x 2 x 2 = 192 */
    assert_true(shs_bench_peak_gflops(2, 3.0, 8, 1, 2) == 192.0);
    /* 1 core at 2.5 GHz, SSE2 without FMA, 2 pipes: 1 x 2.5 x 4 x 1 x 2 = 20 */
    assert_true(shs_bench_peak_gflops(1, 2.5, 4, 0, 2) == 20.0);
    /* 16 cores at 2 GHz, AVX-512 with FMA, 1 pipe: 16 x 2 x 16 x 2 = 1024 */
    assert_true(shs_bench_peak_gflops(16, 2.0, 16, 1, 1) == 1024.0);
}

static void test_collective_sizes(void **state) {
    (void)state;
    shs_world_t *w;
    shs_world_config_t cfg = {.world_size = 3, .device_mem = SIZE_MAX, .timeout_ms = 20000, .name = "b"};
    assert_int_equal(shs_world_create(&w, &cfg), SHS_OK);
    static const shs_coll_op_t ops[] = {SHS_OP_ALL_REDUCE, SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER, SHS_OP_BROADCAST};
    for (int ip = 0; ip < 2; ip++) {
        for (int i = 0; i < 4; i++) {
            shs_bench_coll_t r;
            assert_int_equal(shs_bench_collective(w, ops[i], 3010, ip, 0.001, &r), SHS_OK);
            assert_int_equal(r.bytes, 3000); /* whole f32 elements, a multiple of N */
            assert_int_equal(r.count, 750);
            assert_true(r.iters >= 3);
            assert_true(r.time_us > 0);
            assert_true(r.busbw == r.algbw * shs_net_busbw_factor(ops[i], 3));
        }
    }
    shs_world_destroy(w);
}

/* sendrecv: one message of whole f32 elements per rank (no multiple of N),
 * busbw = algbw; in place is refused. */
static void test_sendrecv_sizes(void **state) {
    (void)state;
    shs_world_t *w;
    shs_world_config_t cfg = {.world_size = 3, .device_mem = SIZE_MAX, .timeout_ms = 20000, .name = "b"};
    assert_int_equal(shs_world_create(&w, &cfg), SHS_OK);
    shs_bench_coll_t r;
    assert_int_equal(shs_bench_collective(w, SHS_OP_SEND, 3010, 0, 0.001, &r), SHS_OK);
    assert_int_equal(r.bytes, 3008);
    assert_int_equal(r.count, 752);
    assert_true(r.iters >= 3 && r.time_us > 0);
    assert_true(r.busbw == r.algbw);
    assert_int_equal(shs_bench_collective(w, SHS_OP_SEND, 3010, 1, 0.001, &r), SHS_INVALID_ARG);
    shs_world_destroy(w);
    char *argv[] = {SHS_BIN_PATH, "bench", "--only", "p2p", "--world", "2", "--min-bytes", "1K", "--max-bytes", "4K",
                    "--seconds", "0.005", NULL};
    static test_proc_t p;
    test_run_process(argv, 120, &p);
    assert_int_equal(p.exit_code, 0);
    assert_non_null(strstr(p.out, "# sendrecv  nranks 2"));
    int rows = 0;
    for (char *line = strtok(p.out, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        unsigned long size, count;
        double t, algbw, busbw;
        char naive[8];
        assert_int_equal(sscanf(line, "%lu %lu %*s %*s %lf %*f %*f %7s %lf %lf", &size, &count, &t, naive, &algbw,
                                &busbw), 6);
        assert_int_equal(size, 1024ul << (2 * rows));
        assert_int_equal(count, size / 4);
        assert_true(t > 0);
        assert_string_equal(naive, "-"); /* no naive yardstick for point-to-point */
        assert_true(algbw == busbw);
        rows++;
    }
    assert_int_equal(rows, 2);
}

/* The naive yardstick runs every op at odd world sizes (slices of unequal
 * length), including one rank, and refuses a world of none. */
static void test_naive_yardstick(void **state) {
    (void)state;
    static const shs_coll_op_t ops[] = {SHS_OP_ALL_REDUCE, SHS_OP_ALL_GATHER, SHS_OP_REDUCE_SCATTER, SHS_OP_BROADCAST};
    for (int n = 1; n <= 3; n++)
        for (int i = 0; i < 4; i++) assert_true(shs_bench_naive_us(ops[i], n, 3010, 0.001) > 0);
    assert_true(shs_bench_naive_us(SHS_OP_ALL_REDUCE, 0, 1024, 0.001) < 0);
}

static void test_cli_text_rows(void **state) {
    (void)state;
    char *argv[] = {SHS_BIN_PATH, "bench", "--only", "coll", "--world", "2", "--op", "reduce_scatter", "--min-bytes",
                    "1K", "--max-bytes", "16K", "--seconds", "0.005", NULL};
    static test_proc_t p;
    test_run_process(argv, 120, &p);
    assert_int_equal(p.exit_code, 0);
    int rows = 0;
    for (char *line = strtok(p.out, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        unsigned long size;
        double cols[6];
        char type[8], op[8];
        /* size count type redop time memcpy traffic/ x-naive algbw busbw */
        assert_int_equal(sscanf(line, "%lu %*u %7s %7s %lf %lf %lf %lf %lf %lf", &size, type, op, &cols[0], &cols[1],
                                &cols[2], &cols[3], &cols[4], &cols[5]), 9);
        assert_int_equal(size, 1024ul << (2 * rows));   /* 1K, 4K, 16K: nccl-tests -f 4 */
        /* time > 0; the last column is busbw (>= 0: it may print 0.000 when
         * the machine is so loaded that a 1 KiB call takes milliseconds) */
        assert_true(cols[0] > 0);
        assert_true(cols[1] > 0); /* memcpy bandwidth of the same run */
        assert_true(cols[3] > 0); /* the naive design was timed beside it */
        assert_true(cols[5] == cols[5] && cols[5] >= 0);
        assert_string_equal(op, "sum");
        rows++;
    }
    assert_int_equal(rows, 3);
    char *bad[] = {SHS_BIN_PATH, "bench", "--op", "all_to_all", NULL};
    test_run_process(bad, 60, &p);
    assert_int_equal(p.exit_code, 2);
    assert_non_null(strstr(p.err, "unknown --op all_to_all"));
    /* JSON holds coll, train and matmul: text-only tables are refused, not dropped */
    char *json_trace[] = {SHS_BIN_PATH, "bench", "--only", "trace", "--format", "json", NULL};
    test_run_process(json_trace, 60, &p);
    assert_int_equal(p.exit_code, 2);
    assert_non_null(strstr(p.err, "--format json covers coll, train and matmul"));
    char *mpi[] = {SHS_BIN_PATH, "bench", "--backend", "mpi", NULL};
    test_run_process(mpi, 60, &p);
    assert_int_equal(p.exit_code, 2);
    assert_non_null(strstr(p.err, "--backend takes cpu, thread, cuda or cuda-nccl"));
    char *zero[] = {SHS_BIN_PATH, "bench", "--min-bytes", "0", NULL};
    test_run_process(zero, 60, &p);
    assert_int_equal(p.exit_code, 2);
    assert_non_null(strstr(p.err, "--min-bytes must be at least 1 byte"));
    /* a factor that rounds to the same size gives each row once, and sizes
     * below one element per rank are skipped with a note */
    char *fine[] = {SHS_BIN_PATH, "bench", "--only", "coll", "--world", "2", "--op", "all_gather", "--min-bytes", "4",
                    "--max-bytes", "30", "--factor", "1.01", "--seconds", "0.002", NULL};
    test_run_process(fine, 60, &p);
    assert_int_equal(p.exit_code, 0);
    assert_non_null(strstr(p.out, "sizes below 8 bytes skipped"));
    rows = 0;
    for (char *line = strtok(p.out, "\n"); line; line = strtok(NULL, "\n"))
        if (line[0] != '#') rows++;
    assert_int_equal(rows, 3); /* 8, 16, 24 */
}

#ifdef SHS_HAVE_JANSSON
static void test_cli_json(void **state) {
    (void)state;
    char *argv[] = {SHS_BIN_PATH, "bench", "--only", "coll", "--world", "2", "--world", "3", "--op",
                    "all_reduce", "--min-bytes", "4K", "--max-bytes", "8K", "--factor", "2", "--seconds", "0.005",
                    "--format", "json", NULL};
    static test_proc_t p;
    test_run_process(argv, 300, &p);
    assert_int_equal(p.exit_code, 0);
    json_error_t err;
    json_t *root = json_loads(p.out, 0, &err);
    if (!root) fail_msg("bench JSON does not parse: %s (line %d)\n%s", err.text, err.line, p.out);
    json_t *coll = json_object_get(root, "collectives");
    assert_int_equal(json_array_size(coll), 4); /* 2 worlds x 2 sizes */
    json_t *row = json_array_get(coll, 3);
    assert_int_equal(json_integer_value(json_object_get(row, "nranks")), 3);
    assert_int_equal(json_integer_value(json_object_get(row, "size_bytes")), 8184); /* 8K rounded to 12-byte multiples */
    assert_true(json_real_value(json_object_get(row, "busbw_GBps")) > 0);
    assert_true(json_real_value(json_object_get(row, "naive_time_us")) > 0);
    assert_int_equal(json_array_size(json_object_get(root, "matmul")), 0); /* not asked for */
    json_decref(root);
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busbw_factors_and_traffic),
        cmocka_unit_test(test_collective_sizes),
        cmocka_unit_test(test_sendrecv_sizes),
        cmocka_unit_test(test_matmul_rate_and_peak),
        cmocka_unit_test(test_peak_formula),
        cmocka_unit_test(test_naive_yardstick),
        cmocka_unit_test(test_cli_text_rows),
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_cli_json),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
