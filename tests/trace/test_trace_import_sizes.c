/* test_trace_import_sizes.c - one operation written in every format reads
 * back as the same bytes in the same scope, all-to-all's bus-bandwidth
 * factor, Chakra files as the converter writes them (host-side c10d
 * nodes beside the GPU nodes that carry the communication), and mismatch
 * diagnoses naming each call's position in Chakra and PyTorch ET files.
 * Expected values are closed forms of NCCL's / nccl-tests' definitions:
 * one rank's input of B bytes on N ranks is a whole buffer of N x B for
 * all_gather, B for reduce_scatter, all_reduce and all_to_all (a rank's
 * send buffer, B / N to each peer). Needs jansson and protobuf-c: without
 * either it does not compile, and `make test` leaves it out and says so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_net.h"
#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_PROTOBUF_C)
#error "test_trace_import_sizes needs jansson and protobuf-c (make deps); make test leaves it out otherwise"
#endif
#include "et_def.pb-c.h"

#define N 8
#define IN_BYTES 1048576u      /* one rank's input buffer: 1 MiB of f32 */
#define IN_ELEMS (IN_BYTES / 4)

/* ---- a small Chakra writer: GlobalMetadata then Nodes, varint32-framed ---- */

typedef struct {
    uint64_t id;
    const char *name;
    int type;               /* ChakraProtoMsg__NodeType */
    int comm_type;          /* < 0: no comm_type attribute */
    int64_t comm_size;      /* < 0: no comm_size attribute */
    int is_cpu_op;          /* < 0: no is_cpu_op attribute */
} cnode_t;

static size_t put_varint(unsigned char *b, size_t v) {
    size_t k = 0;
    do {
        b[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return k;
}

static const char *chakra_file(const char *name, const cnode_t *nodes, int nn) {
    static unsigned char buf[1 << 14];
    size_t n = 0;
    ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    gm.version = (char *)"0.0.4";
    size_t l = chakra_proto_msg__global_metadata__get_packed_size(&gm);
    n += put_varint(buf + n, l);
    n += chakra_proto_msg__global_metadata__pack(&gm, buf + n);
    for (int i = 0; i < nn; i++) {
        ChakraProtoMsg__AttributeProto a[3], *ap[3];
        int na = 0;
        const char *names[3] = {"comm_type", "comm_size", "is_cpu_op"};
        int64_t vals[3] = {nodes[i].comm_type, nodes[i].comm_size, nodes[i].is_cpu_op};
        for (int k = 0; k < 3; k++) {
            if (vals[k] < 0) continue;
            chakra_proto_msg__attribute_proto__init(&a[na]);
            a[na].name = (char *)names[k];
            if (k == 2) {
                a[na].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL;
                a[na].bool_val = vals[k] != 0;
            } else {
                a[na].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
                a[na].int64_val = vals[k];
            }
            ap[na] = &a[na];
            na++;
        }
        ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
        nd.id = nodes[i].id;
        nd.name = (char *)nodes[i].name;
        nd.type = (ChakraProtoMsg__NodeType)nodes[i].type;
        nd.n_attr = (size_t)na;
        nd.attr = ap;
        l = chakra_proto_msg__node__get_packed_size(&nd);
        assert_true(n + l + 5 < sizeof buf);
        n += put_varint(buf + n, l);
        n += chakra_proto_msg__node__pack(&nd, buf + n);
    }
    return test_tmp_write(name, buf, n);
}

/* ---- the same call in every format ---------------------------------------- */

typedef struct {
    shs_coll_op_t op;
    int chakra;                 /* CollectiveCommType */
    const char *astra, *torch, *nccl;
    uint64_t in_elems, out_elems, nccl_count;
    uint64_t total, per_rank;   /* expected bytes, closed forms */
} op_case_t;

static const op_case_t cases[] = {
    {SHS_OP_ALL_TO_ALL, 6, "ALLTOALL", "all_to_all", "AllToAll:", IN_ELEMS, IN_ELEMS, IN_ELEMS / N, IN_BYTES,
     IN_BYTES / N},
    {SHS_OP_ALL_GATHER, 2, "ALLGATHER", "_allgather_base", "AllGather:", IN_ELEMS, IN_ELEMS * N, IN_ELEMS,
     (uint64_t)IN_BYTES * N, IN_BYTES},
    {SHS_OP_REDUCE_SCATTER, 7, "REDUCESCATTER", "reduce_scatter_tensor", "ReduceScatter:", IN_ELEMS, IN_ELEMS / N,
     IN_ELEMS / N, IN_BYTES, IN_BYTES / N},
    {SHS_OP_ALL_REDUCE, 0, "ALLREDUCE", "allreduce", "AllReduce:", IN_ELEMS, IN_ELEMS, IN_ELEMS, IN_BYTES, IN_BYTES},
};

#define RANKS "[0, 1, 2, 3, 4, 5, 6, 7]"

static shs_trace_t *load_as(const char *path, shs_trace_format_t fmt, int world) {
    shs_trace_load_opts_t o = {.format = fmt, .world = world};
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, &o) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

/* The call of `c` on rank 7 of 8 in format `fmt`, written and read back. */
static shs_trace_t *write_and_load(const op_case_t *c, shs_trace_format_t fmt) {
    char s[2048];
    switch (fmt) {
    case SHS_TFMT_CHAKRA: {
        cnode_t nd = {1, "coll", CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, c->chakra, IN_BYTES, 0};
        return load_as(chakra_file("op.7.et", &nd, 1), fmt, 0);
    }
    case SHS_TFMT_ASTRA:
        snprintf(s, sizeof s, "MICRO\n1\nl0 -1 0 NONE 0 0 NONE 0 0 %s %u 0\n", c->astra, IN_BYTES);
        return load_as(test_tmp_write("op.txt", s, strlen(s)), fmt, N);
    case SHS_TFMT_PYTORCH_ET:
        snprintf(s, sizeof s,
                 "{\"schema\": \"1.0.2\", \"nodes\": [{\"id\": 1, \"name\": \"## process_group:init ##\", \"inputs\": "
                 "{\"values\": [\"[{\\\"pg_name\\\": \\\"0\\\", \\\"backend_id\\\": 5, \\\"ranks\\\": " RANKS
                 ", \\\"group_size\\\": 8}]\"], \"types\": [\"String\"]}},"
                 " {\"id\": 2, \"name\": \"record_param_comms\", \"inputs\": {\"values\": [], \"types\": []}, \"attrs\": ["
                 "{\"name\": \"collective_name\", \"value\": \"%s\"}, {\"name\": \"in_msg_nelems\", \"value\": %llu},"
                 "{\"name\": \"out_msg_nelems\", \"value\": %llu}, {\"name\": \"dtype\", \"value\": \"Float\"},"
                 "{\"name\": \"pg_name\", \"value\": \"0\"}, {\"name\": \"rank\", \"value\": 7}]}]}",
                 c->torch, (unsigned long long)c->in_elems, (unsigned long long)c->out_elems);
        return load_as(test_tmp_write("op.json", s, strlen(s)), fmt, 0);
    case SHS_TFMT_KINETO:
        snprintf(s, sizeof s,
                 "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 7, \"world_size\": 8},"
                 " \"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 1,"
                 " \"tid\": 1, \"ts\": 200, \"dur\": 30, \"args\": {\"Collective name\": \"%s\", \"In msg nelems\": %llu,"
                 " \"Out msg nelems\": %llu, \"Group size\": 8, \"dtype\": \"Float\", \"Process Group Name\": \"0\","
                 " \"Process Group Ranks\": \"" RANKS "\", \"Rank\": 7}}]}",
                 c->torch, (unsigned long long)c->in_elems, (unsigned long long)c->out_elems);
        return load_as(test_tmp_write("kineto.json", s, strlen(s)), fmt, 0);
    case SHS_TFMT_FLIGHT:
        snprintf(s, sizeof s,
                 "{\"version\": \"2.4\", \"rank\": 7, \"pg_config\": {\"0\": {\"name\": \"0\", \"desc\": \"default_pg\","
                 " \"ranks\": \"" RANKS "\"}}, \"entries\": [{\"record_id\": 0, \"pg_id\": 0, \"process_group\": [\"0\","
                 " \"default_pg\"], \"collective_seq_id\": 1, \"p2p_seq_id\": 0, \"op_id\": 1, \"profiling_name\":"
                 " \"nccl:%s\", \"time_created_ns\": 1000, \"input_sizes\": [[%llu]], \"input_dtypes\": [\"Float\"],"
                 " \"output_sizes\": [[%llu]], \"output_dtypes\": [\"Float\"], \"state\": \"completed\", \"is_p2p\": false}]}",
                 c->torch, (unsigned long long)c->in_elems, (unsigned long long)c->out_elems);
        return load_as(test_tmp_write("flight.json", s, strlen(s)), fmt, 0);
    case SHS_TFMT_HOROVOD: /* rank 0's timeline: 8 readiness ticks, the op's output tensor in the closing E */
        snprintf(s, sizeof s,
                 "[{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"t\"}},\n"
                 "{\"ph\": \"B\", \"name\": \"NEGOTIATE_%s\", \"ts\": 1, \"pid\": 1},\n"
                 "{\"ph\": \"X\", \"name\": \"0\", \"ts\": 2, \"pid\": 1, \"dur\": 0},\n"
                 "{\"ph\": \"X\", \"name\": \"7\", \"ts\": 3, \"pid\": 1, \"dur\": 0},\n"
                 "{\"ph\": \"E\", \"ts\": 4, \"pid\": 1},\n"
                 "{\"ph\": \"B\", \"name\": \"%s\", \"ts\": 5, \"pid\": 1},\n"
                 "{\"ph\": \"E\", \"ts\": 9, \"pid\": 1, \"args\": {\"dtype\": \"float32\", \"shape\": \"[%llu]\"}}]",
                 c->astra, c->astra, (unsigned long long)c->out_elems);
        return load_as(test_tmp_write("timeline.json", s, strlen(s)), fmt, 0);
    case SHS_TFMT_NCCL:
        snprintf(s, sizeof s,
                 "h:1:1 [7] NCCL INFO %s opCount 0 sendbuff 0x1 recvbuff 0x2 count %llu datatype 7 op 0 root 0 comm 0x5"
                 " [nranks=8] stream 0x6\n",
                 c->nccl, (unsigned long long)c->nccl_count);
        return load_as(test_tmp_write("op.log", s, strlen(s)), fmt, 0);
    default: /* shardsim: the whole buffer written with scope total */
        snprintf(s, sizeof s, "shardsim-trace 1\nworld 8\ncomm world 8 0,1,2,3,4,5,6,7\n"
                 "7 world 0 %s %llu f32 - - - - %llu total - - -\n", shs_coll_op_name(c->op),
                 (unsigned long long)c->nccl_count, (unsigned long long)c->total);
        return load_as(test_tmp_write("op.trace", s, strlen(s)), fmt, 0);
    }
}

/* Every format, every op: rank 7's one call has the closed-form bytes in
 * both scopes (Chakra's all-to-all comm_size used to be taken as one
 * peer's block and charged 8 times, and so was Horovod's all-to-all output
 * tensor; ASTRA-sim text all-gather sizes as the whole output, 8 times too
 * small). */
static void test_same_call_same_bytes(void **state) {
    (void)state;
    static const shs_trace_format_t fmts[] = {SHS_TFMT_SHARDSIM, SHS_TFMT_NCCL, SHS_TFMT_PYTORCH_ET, SHS_TFMT_CHAKRA,
                                              SHS_TFMT_ASTRA, SHS_TFMT_KINETO, SHS_TFMT_FLIGHT, SHS_TFMT_HOROVOD};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
            shs_trace_t *t = write_and_load(&cases[k], fmts[f]);
            const char *what = shs_coll_op_name(cases[k].op), *fn = shs_trace_format_name(fmts[f]);
            if (t->world != N || t->ranks[7].n != 1) fail_msg("%s %s: world %d, %zu calls on rank 7", fn, what, t->world, t->ranks[7].n);
            const shs_trace_rec_t *r = &t->ranks[7].recs[0];
            if (r->op != cases[k].op) fail_msg("%s %s: read as %s", fn, what, shs_coll_op_name(r->op));
            uint64_t tot = shs_trace_rec_bytes(t, r, SHS_BYTES_TOTAL), per = shs_trace_rec_bytes(t, r, SHS_BYTES_PER_RANK);
            if (tot != cases[k].total || per != cases[k].per_rank)
                fail_msg("%s %s: total %llu (want %llu), per rank %llu (want %llu)", fn, what, (unsigned long long)tot,
                         (unsigned long long)cases[k].total, (unsigned long long)per, (unsigned long long)cases[k].per_rank);
            shs_trace_free(t);
        }
}

/* The real 8-rank 1 MiB all-to-all from ASTRA-sim's microbenchmarks (Chakra)
 * costs what the same collective written as an ASTRA-sim text workload
 * costs: on ring-50 (50 GB/s, 500 ns a step) 7 steps of 1 MiB / 8 each,
 * 7 x 500 ns + 7 x 131072 B / 50e9 B/s = 21.85 us. */
static void test_chakra_and_astra_all_to_all_cost_the_same(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/chakra-et/microbench/all_to_all_8npus_1MB", test_shared_dir());
    shs_trace_t *ch = load_as(path, SHS_TFMT_UNKNOWN, 0);
    const char *txt = "MICRO\n1\na2a -1 0 NONE 0 0 NONE 0 0 ALLTOALL 1048576 0\n";
    shs_trace_t *as = load_as(test_tmp_write("a2a.txt", txt, strlen(txt)), SHS_TFMT_ASTRA, 8);
    shs_net_t net;
    assert_int_equal(shs_net_preset("ring-50", &net), SHS_OK);
    double want = 7 * 500e-9 + 7 * 131072.0 / 50e9;
    for (int r = 0; r < 8; r++) {
        double a = shs_net_rec_time(&net, SHS_ALGO_RING, ch, &ch->ranks[r].recs[0]);
        double b = shs_net_rec_time(&net, SHS_ALGO_RING, as, &as->ranks[r].recs[0]);
        if (fabs(a - want) > 1e-12 * want || fabs(b - want) > 1e-12 * want)
            fail_msg("rank %d: chakra %.9g s, astra %.9g s, want %.9g s", r, a, b, want);
    }
    shs_trace_free(ch);
    shs_trace_free(as);
}

/* nccl-tests alltoall.cu: busBw = algBw x (nranks-1)/nranks. */
static void test_all_to_all_busbw_factor(void **state) {
    (void)state;
    for (int n = 2; n <= 16; n++) {
        double want = (double)(n - 1) / n;
        assert_true(shs_net_busbw_factor(SHS_OP_ALL_TO_ALL, n) == want);
        assert_true(shs_net_busbw_factor(SHS_OP_ALL_TO_ALLV, n) == want);
    }
    assert_true(shs_net_busbw_factor(SHS_OP_ALL_TO_ALL, 8) == 0.875);
}

/* As Chakra's converter writes a step: host-side c10d nodes (is_cpu_op 1, no
 * comm_type) beside the GPU kernel nodes that carry the communication, and
 * a compute node. Read: the two GPU collectives only, in order, with their
 * sizes (the whole file used to be refused at the first host node). */
static void test_chakra_converter_host_nodes_skipped(void **state) {
    (void)state;
    const int coll = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, comp = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
    const cnode_t nodes[] = {
        {4, "c10d::allreduce_", coll, -1, -1, 1},
        {5, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", coll, 0, 4096, 0},
        {6, "aten::mm", comp, -1, -1, 1},
        {7, "c10d::_allgather_base_", coll, -1, 1024, 1},
        {8, "ncclDevKernel_AllGather_RING_LL", coll, 2, 1024, 0},
    };
    shs_trace_t *t = load_as(chakra_file("conv.1.et", nodes, 5), SHS_TFMT_CHAKRA, 0);
    assert_int_equal(t->world, 2);
    assert_int_equal(t->ranks[1].n, 2);
    assert_int_equal(t->ranks[1].recs[0].op, SHS_OP_ALL_REDUCE);
    assert_int_equal(t->ranks[1].recs[0].bytes, 4096);
    assert_int_equal(t->ranks[1].recs[1].op, SHS_OP_ALL_GATHER);
    assert_int_equal(t->ranks[1].recs[1].bytes, 1024);
    assert_string_equal(shs_trace_str(t, t->ranks[1].recs[1].marker), "ncclDevKernel_AllGather_RING_LL");
    shs_trace_free(t);
}

static void expect_chakra_error(const char *path, const char *needle) {
    shs_trace_load_opts_t o = {.format = SHS_TFMT_CHAKRA};
    shs_trace_t *t = NULL;
    assert_int_not_equal(shs_trace_load(&t, path, &o), SHS_OK);
    assert_null(t);
    if (!strstr(shs_last_error(), needle) || !strstr(shs_last_error(), path))
        fail_msg("want '%s' and the path in: %s", needle, shs_last_error());
}

/* A GPU collective node without comm_type, or with one out of range, is
 * refused naming the record, the node id and its name. */
static void test_chakra_errors_name_the_node(void **state) {
    (void)state;
    const int coll = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
    const cnode_t a[] = {{4, "c10d::allreduce_", coll, -1, -1, 1}, {9, "ncclKernel_mystery", coll, -1, 64, 0}};
    expect_chakra_error(chakra_file("notype.0.et", a, 2),
                        "record 2 (node 9 'ncclKernel_mystery'): GPU collective node without a comm_type");
    const cnode_t b[] = {{12, "weird", coll, 42, 64, 0}};
    expect_chakra_error(chakra_file("badtype.0.et", b, 1),
                        "record 1 (node 12 'weird'): comm_type 42 is not a CollectiveCommType (0..9)");
    const cnode_t d[] = {{14, "nosize-host", coll, -1, -1, -1}}; /* no is_cpu_op: not known to be host-side */
    expect_chakra_error(chakra_file("nocpu.0.et", d, 1), "record 1 (node 14 'nosize-host'): GPU collective node without");
}

/* A fresh subdirectory `name` of the test's temporary directory. */
static const char *tmp_subdir(const char *name, char *dir, size_t n) {
    const char *f = test_tmp_write("probe", "", 0);
    snprintf(dir, n, "%.*s/%s", (int)(strrchr(f, '/') - f), f, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    return dir;
}

/* The first issue of checking the trace in directory dir, which must be one. */
static void expect_issue(const char *dir, shs_trace_format_t fmt, const char *needle1, const char *needle2) {
    shs_trace_t *t = load_as(dir, fmt, 0);
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 4), SHS_OK);
    if (rep.n < 1 || !strstr(rep.issues[0].text, needle1) || !strstr(rep.issues[0].text, needle2))
        fail_msg("want '%s' and '%s' in the first issue, got %zu: %s", needle1, needle2, rep.n,
                 rep.n ? rep.issues[0].text : "");
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* A size mismatch in Chakra files names each call's record (node messages
 * from 1, as the importer's errors count them): rank 1's all-gather is
 * record 3, after a compute node. */
static void test_chakra_mismatch_names_records(void **state) {
    (void)state;
    const int coll = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE, comp = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE;
    char dir[600], f[700];
    tmp_subdir("chakra-mm", dir, sizeof dir);
    const cnode_t r0[] = {{1, "ar", coll, 0, 4096, 0}, {2, "ag", coll, 2, 1024, 0}};
    const cnode_t r1[] = {{1, "ar", coll, 0, 4096, 0}, {2, "mm", comp, -1, -1, 1}, {3, "ag", coll, 2, 2048, 0}};
    snprintf(f, sizeof f, "chakra-mm/op.0.et");
    chakra_file(f, r0, 2);
    snprintf(f, sizeof f, "chakra-mm/op.1.et");
    chakra_file(f, r1, 3);
    expect_issue(dir, SHS_TFMT_CHAKRA, "rank 0 all_gather(bytes=1024/rank, marker=ag) (record 2)",
                 "rank 1 all_gather(bytes=2048/rank, marker=ag) (record 3)");
}

/* The same in PyTorch ET: each call is named by its index in "nodes". */
static void test_pytorch_et_mismatch_names_nodes(void **state) {
    (void)state;
#define ET_PG "{\"id\": 1, \"name\": \"## process_group:init ##\", \"inputs\": {\"values\": [\"[{\\\"pg_name\\\": " \
              "\\\"0\\\", \\\"backend_id\\\": 5, \\\"ranks\\\": [0, 1], \\\"group_size\\\": 2}]\"], \"types\": [\"String\"]}}"
#define ET_RPC(id, coll, n, rank) "{\"id\": " #id ", \"name\": \"record_param_comms\", \"inputs\": {\"values\": [], " \
              "\"types\": []}, \"attrs\": [{\"name\": \"collective_name\", \"value\": \"" coll "\"}, {\"name\": " \
              "\"in_msg_nelems\", \"value\": " #n "}, {\"name\": \"dtype\", \"value\": \"Float\"}, {\"name\": " \
              "\"pg_name\", \"value\": \"0\"}, {\"name\": \"rank\", \"value\": " #rank "}]}"
    static const char e0[] = "{\"schema\": \"1.0.2\", \"nodes\": [" ET_PG ", " ET_RPC(2, "allreduce", 64, 0) ", "
                             ET_RPC(3, "allreduce", 32, 0) "]}";
    static const char e1[] = "{\"schema\": \"1.0.2\", \"nodes\": [" ET_PG ", " ET_RPC(2, "allreduce", 64, 1) ", "
                             "{\"id\": 3, \"name\": \"aten::mm\"}, " ET_RPC(4, "allreduce", 48, 1) "]}";
#undef ET_PG
#undef ET_RPC
    char dir[600];
    tmp_subdir("et-mm", dir, sizeof dir);
    test_tmp_write("et-mm/et.0.json", e0, strlen(e0));
    test_tmp_write("et-mm/et.1.json", e1, strlen(e1));
    expect_issue(dir, SHS_TFMT_PYTORCH_ET, "rank 0 all_reduce(count=32, dtype=f32, op=sum, bytes=128/rank) (nodes[2])",
                 "rank 1 all_reduce(count=48, dtype=f32, op=sum, bytes=192/rank) (nodes[3])");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_call_same_bytes),
        cmocka_unit_test(test_chakra_and_astra_all_to_all_cost_the_same),
        cmocka_unit_test(test_all_to_all_busbw_factor),
        cmocka_unit_test(test_chakra_converter_host_nodes_skipped),
        cmocka_unit_test(test_chakra_errors_name_the_node),
        cmocka_unit_test(test_chakra_mismatch_names_records),
        cmocka_unit_test(test_pytorch_et_mismatch_names_nodes),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
