/* test_trace_import_views.c - whose calls a file holds: PyTorch execution
 * traces as one process's view (a broadcast's rank field is its root,
 * PyTorch's opts.rootRank; the group's other members are not traced), and
 * the groups ASTRA-sim 1.0 HYBRID workloads imply (Workload.cc:
 * decode_involved_dimensions, the iterate_* loops). Expected values are
 * worked by hand from those sources. Needs jansson and protobuf-c: without
 * either it does not compile, and `make test` leaves it out and says so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_PROTOBUF_C)
#error "test_trace_import_views needs jansson and protobuf-c (make deps); make test leaves it out otherwise"
#endif

static shs_trace_t *load_as(const char *path, shs_trace_format_t fmt, int world) {
    shs_trace_load_opts_t o = {.format = fmt, .world = world};
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, &o) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static size_t issues(const shs_trace_t *t) {
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 16), SHS_OK);
    size_t n = rep.total;
    for (size_t i = 0; i < rep.n; i++) fprintf(stderr, "  issue: %s\n", rep.issues[i].text);
    shs_trace_report_free(&rep);
    return n;
}

/* A positional record_param_comms node (schema 1.0.2, as the 1.0.2-chakra
 * file writes them): [tensors, seq, pg backend id, rank field, name,
 * in_splits, out_splits, world size], tensors on `dev`. */
static int et_node(char *b, size_t cap, int id, const char *name, int rank_field, const char *dev) {
    return snprintf(b, cap,
                    "{\"id\": %d, \"name\": \"record_param_comms\", \"inputs\": {\"values\": [[[14, 15, 0, 256, 4, \"%s\"]],"
                    " %d, 77, %d, \"%s\", [], [], 2], \"types\": [\"GenericList[Tensor(float)]\", \"Int\", \"Int\", \"Int\","
                    " \"String\", \"GenericList[]\", \"GenericList[]\", \"Int\"]}, \"outputs\": {\"values\": [], \"types\": []},"
                    " \"attrs\": []}",
                    id, dev, id, rank_field, name);
}

static const char *et_file(const char *fname, const char *const *names, const int *rank_fields, int n, const char *dev) {
    static char buf[8192];
    size_t k = (size_t)snprintf(buf, sizeof buf,
                                "{\"schema\": \"1.0.2-chakra.0.0.4\", \"nodes\": [{\"id\": 3, \"name\": \"## process_group:init ##\","
                                " \"inputs\": {\"values\": [\"[{\\\"pg_name\\\": \\\"0\\\", \\\"backend_id\\\": 77, \\\"ranks\\\": [],"
                                " \\\"group_size\\\": 2}]\"], \"types\": [\"String\"]}}");
    for (int i = 0; i < n; i++) {
        buf[k++] = ',';
        k += (size_t)et_node(buf + k, sizeof buf - k, 10 + i, names[i], rank_fields[i], dev);
    }
    k += (size_t)snprintf(buf + k, sizeof buf - k, "]}");
    return test_tmp_write(fname, buf, k);
}

/* Rank 1's trace: an all_reduce (rank field 1), then a broadcast from root 0
 * (rank field 0 = opts.rootRank). One rank, the broadcast's root 0; it used
 * to be refused as two ranks in one file. */
static void test_pytorch_et_broadcast_root_is_not_the_rank(void **state) {
    (void)state;
    static const char *const names[] = {"allreduce", "broadcast"};
    static const int fields[] = {1, 0};
    shs_trace_t *t = load_as(et_file("bcast.json", names, fields, 2, "cuda:1"), SHS_TFMT_PYTORCH_ET, 0);
    assert_int_equal(t->world, 2);
    assert_int_equal(t->ranks[0].n, 0);
    assert_int_equal(t->ranks[1].n, 2);
    assert_int_equal(t->ranks[1].recs[0].op, SHS_OP_ALL_REDUCE);
    assert_int_equal(t->ranks[1].recs[1].op, SHS_OP_BROADCAST);
    assert_int_equal(t->ranks[1].recs[1].root, 0);
    assert_false(shs_trace_rank_traced(t, 0));
    assert_int_equal(issues(t), 0);
    shs_trace_free(t);
}

/* Both ranks' files, each a broadcast from root 1 only: the issuing rank is
 * the tensors' device (cuda:0, cuda:1), the root 1 on both; consistent. */
static void test_pytorch_et_broadcast_only_files(void **state) {
    (void)state;
    static const char *const names[] = {"broadcast"};
    static const int fields[] = {1};
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bc", test_tmpdir);
    if (mkdir(dir, 0755)) fail_msg("mkdir %s", dir);
    et_file("bc/r0.json", names, fields, 1, "cuda:0");
    et_file("bc/r1.json", names, fields, 1, "cuda:1");
    shs_trace_t *t = load_as(dir, SHS_TFMT_UNKNOWN, 0);
    assert_int_equal(t->world, 2);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(t->ranks[r].n, 1);
        assert_int_equal(t->ranks[r].recs[0].root, 1);
        assert_true(shs_trace_rank_traced(t, r));
    }
    assert_int_equal(issues(t), 0);
    shs_trace_free(t);
}

/* A broadcast root beyond the group of 2 is garbage: refused naming the node. */
static void test_pytorch_et_root_outside_group_refused(void **state) {
    (void)state;
    static const char *const names[] = {"broadcast"};
    static const int fields[] = {5};
    const char *p = et_file("bad-root.json", names, fields, 1, "cuda:0");
    shs_trace_load_opts_t o = {.format = SHS_TFMT_PYTORCH_ET};
    shs_trace_t *t = NULL;
    assert_int_not_equal(shs_trace_load(&t, p, &o), SHS_OK);
    if (!strstr(shs_last_error(), "node 10: root 5 outside its process group of 2 ranks") || !strstr(shs_last_error(), p))
        fail_msg("%s", shs_last_error());
}

static shs_trace_t *load_astra(const char *text, int world, int first_dim) {
    shs_trace_load_opts_t o = {.format = SHS_TFMT_ASTRA, .world = world, .first_dim = first_dim};
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, test_tmp_write("w.txt", text, strlen(text)), &o) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static void assert_comm(const shs_trace_t *t, int c, const char *name, int n, int first, int stride) {
    assert_string_equal(t->comms[c].name, name);
    assert_int_equal(t->comms[c].size, n);
    for (int k = 0; k < n; k++) assert_int_equal(t->comms[c].ranks[k], first + k * stride);
}

/* MLP_HybridParallel_Data_Model.txt (HYBRID_DATA_MODEL, 6 layers: fwd
 * ALLGATHER, ig and wg ALLREDUCE) on 16 ranks with a first dimension of 4:
 * forward and input gradients on the model group (4 consecutive ranks),
 * weight gradients on the data group (ranks 4 apart); no input gradient for
 * layer 0 (Workload.cc: index > 0). Per rank 6 + 5 + 6 = 17 calls. */
static void test_astra_hybrid_data_model_real(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/astra-sim/text-workloads/MLP_HybridParallel_Data_Model.txt", test_shared_dir());
    shs_trace_load_opts_t o = {.format = SHS_TFMT_UNKNOWN, .world = 16, .first_dim = 4};
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, &o) != SHS_OK) fail_msg("%s", shs_last_error());
    const shs_trace_rank_t *r5 = &t->ranks[5];
    assert_int_equal(r5->n, 17);
    const shs_trace_rec_t *x = &r5->recs[0]; /* fwd layer_64_2_mlp0 ALLGATHER 37632 */
    assert_int_equal(x->op, SHS_OP_ALL_GATHER);
    assert_comm(t, x->comm, "model1", 4, 4, 1);
    assert_int_equal(x->bytes, 37632);
    assert_int_equal(x->scope, SHS_BYTES_PER_RANK);
    x = &r5->recs[6]; /* bwd-ig of the last layer, mlp5, on the model group */
    assert_int_equal(x->op, SHS_OP_ALL_REDUCE);
    assert_string_equal(shs_trace_str(t, x->marker), "bwd-ig/layer_64_2_mlp5");
    assert_comm(t, x->comm, "model1", 4, 4, 1);
    x = &r5->recs[7]; /* bwd-wg of mlp5 on the data group of rank 5: 1, 5, 9, 13 */
    assert_string_equal(shs_trace_str(t, x->marker), "bwd-wg/layer_64_2_mlp5");
    assert_comm(t, x->comm, "data1", 4, 1, 4);
    assert_string_equal(shs_trace_str(t, r5->recs[14].marker), "bwd-ig/layer_64_2_mlp1");
    assert_string_equal(shs_trace_str(t, r5->recs[16].marker), "bwd-wg/layer_64_2_mlp0");
    assert_int_equal(issues(t), 0);
    shs_trace_free(t);
}

/* HYBRID_MODEL_DATA: the first dimension (2) is the data group; the model
 * group strides by it. HYBRID_TRANSFORMER: M = 4 from line 1, layer 0's
 * input gradient issued too. */
static void test_astra_hybrid_groups(void **state) {
    (void)state;
    shs_trace_t *t = load_astra("HYBRID_MODEL_DATA\n1\nl0 -1 1 ALLREDUCE 64 1 ALLREDUCE 32 1 ALLREDUCE 16 1\n", 8, 2);
    assert_int_equal(t->ranks[3].n, 2); /* fwd (model), wg (data); no ig for layer 0 */
    assert_comm(t, t->ranks[3].recs[0].comm, "model1", 4, 1, 2);
    assert_comm(t, t->ranks[3].recs[1].comm, "data1", 2, 2, 1);
    assert_int_equal(t->ranks[3].recs[1].bytes, 16);
    shs_trace_free(t);
    t = load_astra("HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n2\n"
                   "a -1 1 ALLREDUCE 64 1 ALLREDUCE 32 1 ALLREDUCE 16 1\nb -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", 8, 0);
    const shs_trace_rank_t *r6 = &t->ranks[6];
    assert_int_equal(r6->n, 4); /* fwd a (model), wg b (data), ig a (model), wg a (data) */
    assert_string_equal(shs_trace_str(t, r6->recs[0].marker), "fwd/a");
    assert_comm(t, r6->recs[0].comm, "model1", 4, 4, 1);
    assert_string_equal(shs_trace_str(t, r6->recs[1].marker), "bwd-wg/b");
    assert_comm(t, r6->recs[1].comm, "data2", 2, 2, 4);
    assert_string_equal(shs_trace_str(t, r6->recs[2].marker), "bwd-ig/a");
    assert_string_equal(shs_trace_str(t, r6->recs[3].marker), "bwd-wg/a");
    assert_int_equal(issues(t), 0);
    shs_trace_free(t);
}

/* HYBRID_DLRM 1 (last bottom layer 1), 4 layers: layer 0's all-to-all
 * forward on all ranks, the others' forwards not issued; backward wg 3, wg 2,
 * then layer 0's ig (after layer B+1 = 2), wg 1, wg 0. DATA: weight
 * gradients only, even where the line names forward comms. */
static void test_astra_dlrm_and_data_order(void **state) {
    (void)state;
    shs_trace_t *t = load_astra("HYBRID_DLRM 1\n4\n"
                                "e -1 1 ALLTOALL 64 1 ALLTOALL 64 1 ALLREDUCE 8 1\n"
                                "b -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n"
                                "t1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n"
                                "t2 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", 4, 0);
    static const char *const want[] = {"fwd/e", "bwd-wg/t2", "bwd-wg/t1", "bwd-ig/e", "bwd-wg/b", "bwd-wg/e"};
    assert_int_equal(t->ranks[2].n, 6);
    for (int k = 0; k < 6; k++) assert_string_equal(shs_trace_str(t, t->ranks[2].recs[k].marker), want[k]);
    assert_int_equal(t->ranks[2].recs[0].op, SHS_OP_ALL_TO_ALL);
    shs_trace_free(t);
    t = load_astra("DATA\n1\nl -1 1 ALLGATHER 64 1 ALLREDUCE 32 1 ALLREDUCE 16 1\n", 4, 0);
    assert_int_equal(t->ranks[0].n, 1);
    assert_string_equal(shs_trace_str(t, t->ranks[0].recs[0].marker), "bwd-wg/l");
    shs_trace_free(t);
}

static void expect_astra_error(const char *text, int world, int first_dim, const char *needle) {
    shs_trace_load_opts_t o = {.format = SHS_TFMT_ASTRA, .world = world, .first_dim = first_dim};
    shs_trace_t *t = NULL;
    const char *p = test_tmp_write("bad.txt", text, strlen(text));
    assert_int_not_equal(shs_trace_load(&t, p, &o), SHS_OK);
    if (!strstr(shs_last_error(), needle) || !strstr(shs_last_error(), p)) fail_msg("want '%s' in: %s", needle, shs_last_error());
}

/* Groups that cannot be built are refused at line 1, never guessed. */
static void test_astra_hybrid_refusals(void **state) {
    (void)state;
    const char *dm = "HYBRID_DATA_MODEL\n1\nl -1 1 ALLREDUCE 64 1 ALLREDUCE 32 1 ALLREDUCE 16 1\n";
    expect_astra_error(dm, 8, 0, "bad.txt:1: this workload runs model- and data-parallel comms on the network's dimensions");
    expect_astra_error(dm, 8, 3, "bad.txt:1: a group of 3 consecutive ranks does not divide the 8 ranks");
    expect_astra_error("HYBRID_TRANSFORMER\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 8, 0,
                       "bad.txt:1: HYBRID_TRANSFORMER wants 'model_parallel_NPU_group: M'");
    expect_astra_error("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
                       8, 0, "bad.txt:1: workload type HYBRID_TRANSFORMER_FWD_IN_BCKWD is not supported");
    expect_astra_error("PIPELINE\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n", 8, 0, "bad.txt:1: unknown workload type 'PIPELINE'");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_et_broadcast_root_is_not_the_rank),
        cmocka_unit_test(test_pytorch_et_broadcast_only_files),
        cmocka_unit_test(test_pytorch_et_root_outside_group_refused),
        cmocka_unit_test(test_astra_hybrid_data_model_real),
        cmocka_unit_test(test_astra_hybrid_groups),
        cmocka_unit_test(test_astra_dlrm_and_data_order),
        cmocka_unit_test(test_astra_hybrid_refusals),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
