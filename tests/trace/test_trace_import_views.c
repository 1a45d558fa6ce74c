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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pytorch_et_broadcast_root_is_not_the_rank),
        cmocka_unit_test(test_pytorch_et_broadcast_only_files),
        cmocka_unit_test(test_pytorch_et_root_outside_group_refused),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
