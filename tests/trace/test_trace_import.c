/* test_trace_import.c - every importer on the real files of
 * ../shared/traces/ (expected values from their README and from counting
 * lines/nodes by hand: grep, awk), the hand-written Kineto and Flight
 * Recorder cases in traces/cases/, and the Chakra export read back. Not
 * malformed inputs (test_trace_import_refusals.c). Needs jansson and
 * protobuf-c: without either it does not compile, and `make test` leaves it
 * out and says so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "run_record.h"
#include "shardsim/train.h"
#include "shardsim/trace_record.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_export_chakra.h"
#include "shardsim/trace_import.h"
#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_PROTOBUF_C)
#error "test_trace_import needs jansson and protobuf-c (make deps); make test leaves it out otherwise"
#endif
#include "et_def.pb-c.h"

static shs_trace_t *load(const char *rel, shs_trace_format_t fmt, int world) {
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/%s", test_shared_dir(), rel);
    shs_trace_load_opts_t o = {.format = fmt, .world = world};
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, &o) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static shs_trace_t *load_case(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/cases/%s", SHS_SOURCE_DIR, name);
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, NULL) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static size_t issues(const shs_trace_t *t, shs_trace_report_t *keep) {
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 16), SHS_OK);
    size_t n = rep.total;
    for (size_t i = 0; i < rep.n && n; i++) fprintf(stderr, "  issue: %s\n", rep.issues[i].text);
    if (keep) *keep = rep;
    else shs_trace_report_free(&rep);
    return n;
}

static int count_op(const shs_trace_t *t, int rank, shs_coll_op_t op) {
    int n = 0;
    for (size_t i = 0; i < t->ranks[rank].n; i++) n += t->ranks[rank].recs[i].op == op;
    return n;
}

/* fsdp-4rank-bf16.log: 4 ranks, each 12 AllGather (bf16), 6 ReduceScatter
 * (f32), 2 AllReduce (grep -c per [rank]); opCount 0..0x13. */
static void test_nccl_log(void **state) {
    (void)state;
    shs_trace_t *t = load("nccl-log/fsdp-4rank-bf16.log", SHS_TFMT_UNKNOWN, 0);
    assert_string_equal(t->format, "nccl");
    assert_int_equal(t->world, 4);
    assert_int_equal(t->ncomms, 1);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(t->ranks[r].n, 20);
        assert_int_equal(count_op(t, r, SHS_OP_ALL_GATHER), 12);
        assert_int_equal(count_op(t, r, SHS_OP_REDUCE_SCATTER), 6);
        assert_int_equal(count_op(t, r, SHS_OP_ALL_REDUCE), 2);
        /* hexadecimal opCount: record 16 is opCount 10 (= 16), the last 13 (= 19) */
        assert_int_equal(t->ranks[r].recs[16].seq, 16);
        assert_int_equal(t->ranks[r].recs[19].seq, 19);
    }
    /* rank 0's first line: AllGather count 294912 datatype 9 (bf16): per rank */
    const shs_trace_rec_t *x = &t->ranks[0].recs[0];
    assert_int_equal(x->dtype, SHS_BF16);
    assert_int_equal(x->count, 294912);
    assert_int_equal(x->bytes, 294912 * 2);
    assert_int_equal(x->scope, SHS_BYTES_PER_RANK);
    assert_int_equal(shs_trace_rec_bytes(t, x, SHS_BYTES_TOTAL), 4 * 294912 * 2);
    /* rank 0's opCount 4: ReduceScatter count 147456 datatype 7 op 0 */
    assert_int_equal(t->ranks[0].recs[4].op, SHS_OP_REDUCE_SCATTER);
    assert_int_equal(t->ranks[0].recs[4].dtype, SHS_F32);
    assert_int_equal(t->ranks[0].recs[4].redop, SHS_SUM);
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
}

/* DLRM: 8 ranks x 13 record_param_comms (3 allreduce, 4 all_to_allv, 1
 * all_to_all, 5 wait), consistent (README). */
static void test_pytorch_et_dlrm(void **state) {
    (void)state;
    shs_trace_t *t = load("pytorch-et/dlrm-8rank", SHS_TFMT_UNKNOWN, 0);
    assert_string_equal(t->format, "pytorch-et");
    assert_int_equal(t->world, 8);
    for (int r = 0; r < 8; r++) {
        assert_int_equal(t->ranks[r].n, 13);
        assert_int_equal(count_op(t, r, SHS_OP_ALL_REDUCE), 3);
        assert_int_equal(count_op(t, r, SHS_OP_ALL_TO_ALLV), 4);
        assert_int_equal(count_op(t, r, SHS_OP_ALL_TO_ALL), 1);
        assert_int_equal(count_op(t, r, SHS_OP_WAIT), 5);
    }
    /* the first allreduce is 394241 floats (tensor descriptor numel 394241, itemsize 4) */
    int found = 0;
    for (size_t i = 0; i < t->ranks[0].n && !found; i++) {
        const shs_trace_rec_t *x = &t->ranks[0].recs[i];
        if (x->op != SHS_OP_ALL_REDUCE) continue;
        assert_int_equal(x->count, 394241);
        assert_int_equal(x->dtype, SHS_F32);
        assert_int_equal(x->bytes, 394241 * 4);
        found = 1;
    }
    assert_true(found);
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
}

/* ET 1.0.2: one rank of a 2-rank group, 10 all_gather + 10 wait: one
 * process's view, so rank 1 was not traced and the check, leaving it out,
 * finds nothing (it used to report rank 1 missing at seq 0). */
static void test_pytorch_et_102_single_rank(void **state) {
    (void)state;
    shs_trace_t *t = load("pytorch-et/chakra-1.0.2/1.0.2-chakra.0.0.4.json", SHS_TFMT_UNKNOWN, 0);
    assert_int_equal(t->world, 2);
    assert_int_equal(t->comms[0].size, 2);
    assert_int_equal(count_op(t, 0, SHS_OP_ALL_GATHER), 10);
    assert_int_equal(count_op(t, 0, SHS_OP_WAIT), 10);
    assert_int_equal(t->ranks[1].n, 0);
    assert_true(shs_trace_rank_traced(t, 0));
    assert_false(shs_trace_rank_traced(t, 1));
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
}

/* Chakra microbenchmarks: one 1 MiB collective per rank (comm_size 1048576). */
static void test_chakra_microbench(void **state) {
    (void)state;
    static const struct { const char *dir; int n; shs_coll_op_t op; } cases[] = {
        {"all_reduce_4npus_1MB", 4, SHS_OP_ALL_REDUCE}, {"all_reduce_8npus_1MB", 8, SHS_OP_ALL_REDUCE},
        {"all_gather_4npus_1MB", 4, SHS_OP_ALL_GATHER}, {"all_gather_8npus_1MB", 8, SHS_OP_ALL_GATHER},
        {"reduce_scatter_4npus_1MB", 4, SHS_OP_REDUCE_SCATTER}, {"reduce_scatter_8npus_1MB", 8, SHS_OP_REDUCE_SCATTER},
        {"all_to_all_4npus_1MB", 4, SHS_OP_ALL_TO_ALL}, {"all_to_all_8npus_1MB", 8, SHS_OP_ALL_TO_ALL}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "chakra-et/microbench/%s", cases[k].dir);
        shs_trace_t *t = load(rel, SHS_TFMT_UNKNOWN, 0);
        assert_string_equal(t->format, "chakra");
        assert_int_equal(t->world, cases[k].n);
        for (int r = 0; r < cases[k].n; r++) {
            assert_int_equal(t->ranks[r].n, 1);
            assert_int_equal(t->ranks[r].recs[0].op, cases[k].op);
            assert_int_equal(t->ranks[r].recs[0].bytes, 1048576);
        }
        assert_int_equal(issues(t, NULL), 0);
        shs_trace_free(t);
    }
}

/* Ring all-reduce from send/recv: 14 sends + 14 recvs per rank (7 compute
 * nodes skipped); every pair matches: 8 x 14 = 112. The .xml is skipped. */
static void test_chakra_ring_p2p(void **state) {
    (void)state;
    shs_trace_t *t = load("chakra-et/custom_ring_allreduce_8npus_1MB", SHS_TFMT_UNKNOWN, 0);
    assert_int_equal(t->world, 8);
    for (int r = 0; r < 8; r++) {
        assert_int_equal(count_op(t, r, SHS_OP_SEND), 14);
        assert_int_equal(count_op(t, r, SHS_OP_RECV), 14);
        assert_int_equal(t->ranks[r].recs[0].peer, (r + 1) % 8);
        assert_int_equal(t->ranks[r].recs[0].bytes, 131072);
    }
    shs_trace_report_t rep;
    assert_int_equal(issues(t, &rep), 0);
    assert_int_equal(rep.p2p_matched, 112);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* ASTRA-sim text: microAllReduce is one 1 MiB all-reduce (wg) per rank;
 * ResNet-50 has 54 layers, each with a weight-gradient ALLREDUCE and no
 * other comm (awk count 54). */
static void test_astra_text(void **state) {
    (void)state;
    shs_trace_t *t = load("astra-sim/text-workloads/microAllReduce.txt", SHS_TFMT_UNKNOWN, 4);
    assert_string_equal(t->format, "astra");
    assert_int_equal(t->world, 4);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(t->ranks[r].n, 1);
        assert_int_equal(t->ranks[r].recs[0].op, SHS_OP_ALL_REDUCE);
        assert_int_equal(t->ranks[r].recs[0].bytes, 1048576);
    }
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
    t = load("astra-sim/text-workloads/Resnet50_DataParallel.txt", SHS_TFMT_UNKNOWN, 2);
    assert_int_equal(t->ranks[1].n, 54);
    /* backward runs the layers in reverse: the first record is the last layer's */
    assert_int_equal(t->ranks[0].recs[53].bytes, 37632); /* conv1's weight gradient, last */
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
}

/* Holistic Trace Analysis' shape: the GPU kernels ("cat": "kernel") carry
 * the collective's args and the device times; the CPU record_param_comms
 * ops carry none, and one kernel is ncclDevKernel_Generic (NCCL >= 2.19
 * names no op). Expected values: the fixture's ts/dur (us) and args. */
static void test_kineto_hta_kernels_carry_times(void **state) {
    (void)state;
    shs_trace_t *t = load_case("kineto-hta-2rank");
    assert_string_equal(t->format, "kineto");
    assert_int_equal(t->world, 2);
    static const double ts[2][2] = {{1000, 2000}, {1005, 2010}}, dur[2][2] = {{40, 50}, {35, 40}};
    for (int r = 0; r < 2; r++) {
        assert_int_equal(t->ranks[r].n, 2);
        const shs_trace_rec_t *a = &t->ranks[r].recs[0], *g = &t->ranks[r].recs[1];
        assert_int_equal(a->op, SHS_OP_ALL_REDUCE);
        assert_int_equal(a->count, 1024);
        assert_int_equal(a->dtype, SHS_F32);
        assert_int_equal(g->op, SHS_OP_ALL_GATHER);
        assert_int_equal(g->dtype, SHS_BF16);
        for (int k = 0; k < 2; k++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[k];
            assert_true(fabs(x->t_start - ts[r][k] * 1e-6) < 1e-15);
            assert_true(fabs(x->t_end - (ts[r][k] + dur[r][k]) * 1e-6) < 1e-15);
        }
    }
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
    /* the timing sees the compute gaps the kernels' times leave (960 us on rank 0) */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/traces/cases/kineto-hta-2rank", SHS_SOURCE_DIR);
    const test_proc_t *p = test_shardsim(60, "replay", dir, "--check-only", "--network", "hgx-h100", NULL);
    assert_int_equal(p->exit_code, 0);
    if (!strstr(p->out, "compute = the gaps the trace recorded between calls") || !strstr(p->out, "compute 0.960"))
        fail_msg("stdout: %s", p->out);
}

static void test_kineto_and_flight_cases(void **state) {
    (void)state;
    shs_trace_t *t = load_case("kineto-2rank");
    assert_string_equal(t->format, "kineto");
    assert_int_equal(t->world, 2);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(t->ranks[r].n, 3); /* the ncclDevKernel event is not counted twice */
        assert_int_equal(t->ranks[r].recs[0].op, SHS_OP_ALL_GATHER);
        assert_int_equal(t->ranks[r].recs[0].bytes, 4096 * 2);
        assert_int_equal(t->ranks[r].recs[1].op, SHS_OP_REDUCE_SCATTER);
        assert_int_equal(t->ranks[r].recs[1].count, 4096);
    }
    assert_int_equal(issues(t, NULL), 0);
    shs_trace_free(t);
    t = load_case("kineto-old-2rank");
    assert_int_equal(t->ranks[0].n, 2);
    assert_int_equal(t->ranks[0].recs[0].count, 1024 * 256);
    assert_int_equal(t->ranks[0].recs[1].op, SHS_OP_BROADCAST);
    assert_int_equal(t->ranks[0].recs[1].dtype, SHS_F16);
    shs_trace_free(t);
    /* rank 1 never issues collective_seq_id 3 (rank 0's entry is 'started') */
    t = load_case("flight-2rank-hang");
    shs_trace_report_t rep;
    assert_true(issues(t, &rep) > 0);
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISSING);
    assert_int_equal(rep.issues[0].seq, 3);
    assert_int_equal(rep.issues[0].rank, 1);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* record -> export Chakra -> import: the same calls, in the same order,
 * with the same byte sizes (Chakra keeps bytes, not counts or dtypes). */
/* Export to Chakra, import back, and compare call by call: op, sequence
 * number, bytes and (to the microsecond Chakra keeps) start time. Twice:
 * the checked-in ZeRO-3 recording, and a fresh one the trainer records
 * here (ZeRO-2 at world 3, 2 steps on the built-in corpus). */
static void chakra_round_trip(shs_trace_t *a, const char *tag) {
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/%s", test_tmpdir, tag);
    if (shs_trace_export_chakra(a, prefix) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_trace_t *b = NULL;
    shs_trace_load_opts_t o = {.format = SHS_TFMT_CHAKRA};
    if (shs_trace_load(&b, test_tmpdir, &o) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(b->world, a->world);
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(b->ranks[r].n, a->ranks[r].n);
        for (size_t i = 0; i < a->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &a->ranks[r].recs[i], *y = &b->ranks[r].recs[i];
            assert_int_equal(y->op, x->op);
            assert_int_equal(y->seq, x->seq);
            assert_int_equal(shs_trace_rec_bytes(b, y, SHS_BYTES_TOTAL), shs_trace_rec_bytes(a, x, SHS_BYTES_TOTAL));
            if (x->t_start > 1e-6) assert_true(y->t_start >= 0 && y->t_start <= x->t_start && x->t_start - y->t_start < 1e-6);
        }
    }
    assert_int_equal(issues(b, NULL), 0);
    shs_trace_free(b);
    for (int r = 0; r < a->world; r++) {
        char p[600];
        snprintf(p, sizeof p, "%s.%d.et", prefix, r);
        unlink(p);
    }
}

static void test_chakra_export_round_trip(void **state) {
    (void)state;
    shs_trace_t *a = load_case("../recorded/zero3");
    chakra_round_trip(a, "z3");
    shs_trace_free(a);

    shs_train_config_t cfg = test_small_config(3, 1);
    cfg.strategy.kind = SHS_ZERO2;
    shs_trace_recorder_t *rec;
    assert_int_equal(shs_trace_recorder_create(&rec, 3), SHS_OK);
    cfg.trace = rec;
    shs_corpus_t corpus;
    shs_corpus_builtin(&corpus);
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &corpus), SHS_OK);
    float loss;
    for (int step = 0; step < 2; step++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    shs_trainer_destroy(t);
    assert_int_equal(shs_trace_recorder_finish(rec, &a), SHS_OK);
    shs_trace_recorder_free(rec);
    assert_true(a->ranks[0].n > 10);
    chakra_round_trip(a, "fresh");
    shs_trace_free(a);
    shs_corpus_free(&corpus);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_log),
        cmocka_unit_test(test_pytorch_et_dlrm),
        cmocka_unit_test(test_pytorch_et_102_single_rank),
        cmocka_unit_test(test_chakra_microbench),
        cmocka_unit_test(test_chakra_ring_p2p),
        cmocka_unit_test(test_astra_text),
        cmocka_unit_test(test_kineto_and_flight_cases),
        cmocka_unit_test(test_kineto_hta_kernels_carry_times),
        cmocka_unit_test(test_chakra_export_round_trip),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
