/* test_trace_kineto.c - the PyTorch profiler's (Kineto's) files as HTA and
 * PARAM publish them: a one-rank file is that process's view (HTA's
 * tests/data/nccl_parser_config/nccl_data.json.gz: rank 0 of world_size 2,
 * its NCCL kernels carrying the collective's args); a call whose size the
 * file does not give is refused, not read as 0 bytes (a kernel without "In
 * msg nelems"; HTA's df_index_resolver.json.gz's nccl:all_reduce
 * annotations without "Input Dims"; ncclKernel_* kernels without args);
 * all_to_allv split sizes time the busiest rank (PARAM's DLRM execution
 * traces, dlrm_eg_*.json, seq 150: every rank sends [96, 224, 288, 1664,
 * 592, 96, 192, 240] int32 rows, so rank 3 receives 7 x 1664); and the
 * file is read without a tree of it in memory (jansson's took 9x the
 * file). Event keys and values below are typed from those files (facts);
 * the files themselves are not copied. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#ifndef SHS_HAVE_JANSSON
#error "test_trace_kineto reads PARAM's PyTorch execution traces: needs jansson (make deps)"
#endif

#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_comm_timeline.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_net.h"
#include "trace/trace_files.h"

/* One NCCL kernel event as HTA's nccl_data.json carries it. */
#define HTA_KERNEL(name, ts, dur, coll, nel, dtype)                                                             \
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" name "\", \"pid\": 0, \"tid\": 40, \"ts\": " ts ", \"dur\": " \
    dur ", \"args\": {\"External id\": 12945, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 40, "     \
    "\"correlation\": 60047, \"registers per thread\": 96, \"shared memory\": 87568, \"grid\": [8, 1, 1], "         \
    "\"block\": [544, 1, 1], \"Collective name\": \"" coll "\", \"In msg nelems\": " nel ", \"Out msg nelems\": "   \
    nel ", \"Group size\": 2, \"dtype\": \"" dtype "\", \"In split size\": \"[]\", \"Out split size\": \"[]\", "    \
    "\"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", \"Process Group Ranks\": "       \
    "\"[0, 1]\"}}"

static const char hta_rank0[] =
    "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA A100-PG509-200\"}],\n"
    " \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2, \"pg_count\": 1, \"pg_config\": "
    "[{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\", \"pg_size\": 2, \"ranks\": "
    "[0, 1]}], \"nccl_version\": \"2.17.1\"},\n"
    " \"traceEvents\": [\n"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 2910249, \"tid\": 2919752, \"ts\": "
    "4458676524648.797, \"dur\": 189.626, \"args\": {\"External id\": 2099, \"Collective name\": \"allreduce\", "
    "\"In msg nelems\": 2049000, \"Out msg nelems\": 2049000, \"Group size\": 2, \"dtype\": \"Float\"}},\n"
    "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"nccl:all_reduce\", \"pid\": 0, \"tid\": 40, \"ts\": "
    "4458676965733.014, \"dur\": 5994.892, \"args\": {\"External id\": 9460}},\n"
    HTA_KERNEL("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "4458676423385.774",
               "30.975", "broadcast", "53120", "Float") ",\n"
    HTA_KERNEL("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "4458677009853.422",
               "2636.669", "allreduce", "6637568", "Float") ",\n"
    HTA_KERNEL("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "4458677052057.143",
               "2129.38", "allreduce", "2431040", "Float") "\n"
    " ], \"traceName\": \"/tmp/tmpu3g3sevh.json\", \"displayTimeUnit\": \"ms\", \"baseTimeNanoseconds\": "
    "1711964646000000000}\n";

/* Peak memory: reading a 48 MiB Kineto file of HTA-shaped events takes at
 * most the file's size again (plus the build's fixed costs), where a DOM
 * took 9 times it. Runs first, before any large allocation of this
 * process, so the peak it reads is this import's. */
static void test_memory_without_a_tree(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/big.json", test_tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 0, \"world_size\": 2}, \"traceEvents\": [\n", f);
    size_t bytes = 0;
    for (long k = 0; bytes < ((size_t)48 << 20); k++) {
        int n = fprintf(f, "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 2910249, \"tid\": "
                        "2919752, \"ts\": %ld.797, \"dur\": 189.626, \"args\": {\"External id\": %ld, \"Record function "
                        "id\": %ld, \"Ev Idx\": %ld, \"Input Dims\": [[1024, 4096], [4096, 1024]], \"Input type\": "
                        "[\"float\", \"float\"]}},\n", 4458676524648 + k * 300, k, k, k);
        bytes += (size_t)n;
        if (k % 1000 == 0)
            bytes += (size_t)fprintf(f, HTA_KERNEL("ncclDevKernel_Generic", "%ld.5", "20.5", "allreduce", "6637568",
                                                   "Float") ",\n", 4458676524648 + k * 300 + 100);
    }
    fputs("{\"ph\": \"i\", \"name\": \"end\", \"ts\": 1}]}\n", f);
    assert_int_equal(fclose(f), 0);
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    shs_trace_t *t = trace_load_ok(path);
    getrusage(RUSAGE_SELF, &b);
    assert_true(t->ranks[0].n > 100);
    long grew_kib = b.ru_maxrss - a.ru_maxrss, file_kib = (long)(bytes >> 10);
    long bound = 2 * file_kib + (16 << 10);
#if defined(__SANITIZE_THREAD__)
    bound = 6 * file_kib + (64 << 10); /* TSan keeps 4 bytes of shadow per byte touched */
#endif
    if (grew_kib > bound) fail_msg("the import grew the peak by %ld KiB for a %ld KiB file (bound %ld)", grew_kib, file_kib, bound);
    shs_trace_free(t);
    remove(path);
}

/* HTA's one-rank file: rank 0 of 2. Its calls are rank 0's view; rank 1
 * was not traced here, not skipped, and nothing deadlocks. */
static void test_one_rank_file_is_a_view(void **state) {
    (void)state;
    const char *p = test_tmp_write("nccl_data.json", hta_rank0, strlen(hta_rank0));
    shs_trace_t *t = trace_load_ok(p);
    assert_int_equal(t->world, 2);
    assert_int_equal(t->ranks[0].n, 3); /* the kernels (the preferred kind), in time order */
    assert_int_equal(t->ranks[0].recs[0].op, SHS_OP_BROADCAST);
    assert_true(t->ranks[0].recs[1].bytes == 6637568ull * 4);
    assert_int_equal(t->views, 1);
    assert_false(shs_trace_rank_traced(t, 1));
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    if (rep.total) fail_msg("%zu issues, the first: %s", rep.total, rep.n ? rep.issues[0].text : "");
    shs_trace_report_free(&rep);
    shs_trace_free(t);
    const test_proc_t *r = test_shardsim(60, "replay", p, "--check-only", NULL);
    if (r->exit_code != 0 || !strstr(r->out, "rank 1: not traced")) fail_msg("exit %d:\n%s%s", r->exit_code, r->out, r->err);
}

/* A call the file gives no size for is refused, naming the event. */
static void test_size_required(void **state) {
    (void)state;
    trace_expect_refused("nonel.json",
                   "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_Generic\", \"ts\": 5, "
                   "\"dur\": 2, \"args\": {\"Collective name\": \"allreduce\", \"dtype\": \"Float\"}}]}",
                   "traceEvents[0]: all_reduce without 'In msg nelems': the call's size is unknown");
    /* HTA df_index_resolver.json.gz: record_param_comms without args, nccl:all_reduce annotations without Input Dims */
    trace_expect_refused("annot.json",
                   "{\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 1, \"world_size\": 2}, \"traceEvents\": [\n"
                   "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 783658, \"tid\": 785244, "
                   "\"ts\": 1669783687570204, \"dur\": 134, \"args\": {\"External id\": 7048, \"Ev Idx\": 3975}},\n"
                   "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"nccl:all_reduce\", \"pid\": 783658, \"tid\": "
                   "785244, \"ts\": 1669783687570242, \"dur\": 87, \"args\": {\"External id\": 7049, \"Ev Idx\": 3976}},\n"
                   "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)\", "
                   "\"pid\": 1, \"tid\": 14, \"ts\": 1669783687929439, \"dur\": 15, \"args\": {\"External id\": 153197}}]}",
                   "traceEvents[1]: nccl:all_reduce without 'Input Dims'");
    trace_expect_refused("kname.json",
                   "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": "
                   "\"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)\", \"ts\": 5, \"dur\": 2, \"args\": {}}]}",
                   "traceEvents[0]: kernel 'ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)' carries no 'In msg "
                   "nelems'");
    /* a barrier moves nothing: no size needed */
    const char *bar = "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"ts\": 5, "
                      "\"dur\": 2, \"args\": {\"Collective name\": \"barrier\"}}]}";
    shs_trace_t *t = trace_load_ok(test_tmp_write("barrier.json", bar, strlen(bar)));
    assert_int_equal(t->ranks[0].recs[0].op, SHS_OP_BARRIER);
    shs_trace_free(t);
    /* garbage that used to be read as the world: a group list that is no list */
    trace_expect_refused("pgr.json",
                   "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 5, \"dur\": 2, \"args\": "
                   "{\"Collective name\": \"allreduce\", \"In msg nelems\": 4, \"Process Group Ranks\": \"[0, x]\"}}]}",
                   "traceEvents[0]: 'Process Group Ranks' is not a list of ranks");
}

/* PARAM's DLRM traces, all_to_allv seq 150 (inputs[5], inputs[6] of each
 * rank's node, int32): sends [96, 224, 288, 1664, 592, 96, 192, 240] rows
 * from every rank; rank r receives 8 x in[r]. Bytes it moves to / from the
 * others: r0 max(3296, 7x96) x 4 = 13184, r1 3168 x 4 = 12672, r2 3104 x 4
 * = 12416, r3 max(1728, 7x1664 = 11648) x 4 = 46592, r4 max(2800, 4144) x
 * 4 = 16576, r5 13184, r6 3200 x 4 = 12800, r7 3152 x 4 = 12608. On
 * hgx-h100 (one node of 8, 400e9 B/s, NCCL Simple ring: 8.4 us base, 3.4 us
 * per step), the call lasts as long as rank 3's part: 8.4e-6 + 7 x 3.4e-6 +
 * 46592 / 400e9 s (as even it would be 13568 x 7/8 / 400e9). */
static void test_all_to_allv_splits(void **state) {
    (void)state;
    static const uint64_t want[8] = {13184, 12672, 12416, 46592, 16576, 13184, 12800, 12608};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/traces/pytorch-et/dlrm-8rank", test_shared_dir());
    shs_trace_t *t = trace_load_ok(dir), *one;
    assert_int_equal(shs_trace_create(&one, 8), SHS_OK);
    int wc;
    assert_int_equal(shs_trace_add_comm(one, "world", 8, NULL, &wc), SHS_OK);
    for (int r = 0; r < 8; r++) {
        const shs_trace_rec_t *x = NULL;
        for (size_t i = 0; i < t->ranks[r].n && !x; i++)
            if (t->ranks[r].recs[i].op == SHS_OP_ALL_TO_ALLV && t->ranks[r].recs[i].bytes == 3392 * 4) x = &t->ranks[r].recs[i];
        assert_non_null(x);
        if (x->v_bytes != want[r]) fail_msg("rank %d: v_bytes %llu, want %llu", r, (unsigned long long)x->v_bytes,
                                            (unsigned long long)want[r]);
        shs_trace_rec_t y = *x;
        y.comm = wc;
        y.seq = 0;
        y.t_start = y.t_end = -1;
        assert_int_equal(shs_trace_append(one, &y), SHS_OK);
    }
    shs_net_t net;
    assert_int_equal(shs_net_preset("hgx-h100", &net), SHS_OK);
    shs_trace_comm_timeline_t tl;
    assert_int_equal(shs_trace_comm_timeline(one, &net, SHS_ALGO_RING, &tl), SHS_OK);
    double s = 8.4e-6 + 7 * 3.4e-6 + 46592 / 400e9;
    for (int r = 0; r < 8; r++)
        if (fabs(tl.ranks[r].comm_s - s) > 1e-15) fail_msg("rank %d: %.9g s, want %.9g", r, tl.ranks[r].comm_s, s);
    shs_trace_comm_timeline_free(&tl);
    double *calls;
    assert_int_equal(shs_net_call_times(&net, SHS_ALGO_RING, one, &calls), SHS_OK);
    for (int r = 0; r < 8; r++) assert_true(fabs(calls[r] - s) < 1e-15);
    free(calls);
    /* written in the text format and read back: the same v_bytes */
    const char *p = test_tmp_write("one.trace", "", 0);
    FILE *f = fopen(p, "w");
    assert_int_equal(shs_trace_write_text(one, f, -1), SHS_OK);
    fclose(f);
    shs_trace_t *back = trace_load_ok(p);
    for (int r = 0; r < 8; r++) assert_true(back->ranks[r].recs[0].v_bytes == want[r]);
    shs_trace_free(back);
    shs_trace_free(one);
    shs_trace_free(t);
}

/* Kineto's "In split size" / "Out split size" strings (saveNcclMeta): the
 * same rule; a list the profiler truncated after 30 entries leaves the
 * call even, and the trace says so; a list of the wrong length is refused. */
static void test_kineto_split_strings(void **state) {
    (void)state;
#define A2AV(ins, outs, in_n, out_n)                                                                              \
    "{\"distributedInfo\": {\"rank\": 1, \"world_size\": 2}, \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", " \
    "\"name\": \"ncclDevKernel_Generic\", \"ts\": 5, \"dur\": 2, \"args\": {\"Collective name\": \"all_to_allv\", "   \
    "\"In msg nelems\": " in_n ", \"Out msg nelems\": " out_n ", \"Group size\": 2, \"dtype\": \"Float\", "          \
    "\"In split size\": \"" ins "\", \"Out split size\": \"" outs "\", \"Process Group Name\": \"0\", "               \
    "\"Process Group Ranks\": \"[0, 1]\"}}]}"
    /* rank 1 sends [3 rows, 1 row] of 4 floats (16 elements), receives [5, 1] rows (24): to / from rank 0: 12 and 20
     * elements, so v_bytes = 20 x 4 = 80 */
    const char *a = A2AV("[3, 1]", "[5, 1]", "16", "24");
    shs_trace_t *t = trace_load_ok(test_tmp_write("a2av.json", a, strlen(a)));
    assert_true(t->ranks[1].recs[0].v_bytes == 80);
    assert_string_equal(t->note, "");
    shs_trace_free(t);
    const char *cut = A2AV("[3, ...]", "[5, 1]", "16", "24");
    t = trace_load_ok(test_tmp_write("cut.json", cut, strlen(cut)));
    assert_true(t->ranks[1].recs[0].v_bytes == 0);
    if (!strstr(t->note, "truncated by the profiler")) fail_msg("note: '%s'", t->note);
    shs_trace_free(t);
    trace_expect_refused("three.json", A2AV("[3, 1, 2]", "[5, 1]", "16", "24"),
                   "traceEvents[0]: all_to_allv split sizes: input split sizes name 3 ranks, the group has 2");
    trace_expect_refused("rows.json", A2AV("[3, 2]", "[5, 1]", "16", "24"),
                   "traceEvents[0]: all_to_allv split sizes: input split sizes sum to 5 rows, which do not divide its "
                   "16 elements");
#undef A2AV
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_without_a_tree),
        cmocka_unit_test(test_one_rank_file_is_a_view),
        cmocka_unit_test(test_size_required),
        cmocka_unit_test(test_all_to_allv_splits),
        cmocka_unit_test(test_kineto_split_strings),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
