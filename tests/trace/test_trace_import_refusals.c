/* test_trace_import_refusals.c - malformed inputs to every importer, which
 * must fail with SHS_PARSE naming the file and the line or record, among
 * them ranks beyond a declared world size, absurd sizes and times, garbage
 * refused rather than used, and a FIFO that replay refuses instead of
 * blocking on. Needs jansson and protobuf-c: without either it does not
 * compile, and `make test` leaves it out and says so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_PROTOBUF_C)
#error "test_trace_import_refusals needs jansson and protobuf-c (make deps); make test leaves it out otherwise"
#endif
#include "et_def.pb-c.h"

/* ---- malformed input ----------------------------------------------------- */

static void expect_load_error(const char *path, shs_trace_format_t fmt, const char *needle) {
    shs_trace_load_opts_t o = {.format = fmt};
    shs_trace_t *t = NULL;
    shs_status_t st = shs_trace_load(&t, path, &o);
    assert_null(t);
    assert_int_not_equal(st, SHS_OK);
    if (!strstr(shs_last_error(), needle) || !strstr(shs_last_error(), path))
        fail_msg("want '%s' and the path in: %s", needle, shs_last_error());
}

static void test_malformed_inputs(void **state) {
    (void)state;
    char src[1024];
    snprintf(src, sizeof src, "%s/traces/chakra-et/custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et", test_shared_dir());
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 200);
    expect_load_error(test_tmp_write("trunc.0.et", buf, n - 7), SHS_TFMT_CHAKRA, "truncated");
    /* a length prefix pointing at garbage: protobuf-c refuses the message */
    char bad[] = {0x05, 0x0a, 0x01, 'x', 0x12, 0x00, 0x03, (char)0xff, (char)0xff, (char)0xff};
    expect_load_error(test_tmp_write("garbage.0.et", bad, sizeof bad), SHS_TFMT_CHAKRA, "record 1");
    const char *js = "{\"schema\": \"1.0.1\", \"nodes\": [ {\"name\": \"record_param_comms\", \"id\": 3,";
    expect_load_error(test_tmp_write("trunc.json", js, strlen(js)), SHS_TFMT_UNKNOWN, "malformed JSON");
    const char *neg = "{\"schema\": \"1.0.2\", \"nodes\": [{\"name\": \"record_param_comms\", \"id\": 3, \"inputs\": "
                      "{\"values\": [], \"types\": []}, \"attrs\": [{\"name\": \"collective_name\", \"value\": \"allreduce\"},"
                      "{\"name\": \"in_msg_nelems\", \"value\": -5}]}]}";
    expect_load_error(test_tmp_write("neg.json", neg, strlen(neg)), SHS_TFMT_UNKNOWN, "node 3");
    const char *nccl = "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x6\n"
                       "h:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 42 op 0 root 0 comm 0x5 [nranks=2] stream 0x6\n";
    expect_load_error(test_tmp_write("bad.log", nccl, strlen(nccl)), SHS_TFMT_UNKNOWN, ":2: unknown datatype id");
    const char *huge = "h:1:1 [0] NCCL INFO AllGather: opCount 0 sendbuff 0x1 recvbuff 0x2 count 999999999999999999 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x6\n";
    expect_load_error(test_tmp_write("huge.log", huge, strlen(huge)), SHS_TFMT_UNKNOWN, "absurd size");
    const char *astra = "DATA\n3\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1048576 5\n";
    expect_load_error(test_tmp_write("trunc.txt", astra, strlen(astra)), SHS_TFMT_UNKNOWN, "truncated: 1 of 3");
    const char *kin = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"record_param_comms\", \"ts\": 1, \"args\": "
                      "{\"Collective name\": \"frobnicate\"}}]}";
    expect_load_error(test_tmp_write("k.json", kin, strlen(kin)), SHS_TFMT_UNKNOWN, "traceEvents[0]: unknown collective");
    const char *fr = "{\"pg_config\": {\"0\": {\"name\": \"0\", \"ranks\": \"[0, 70000]\"}}, \"entries\": "
                     "[{\"profiling_name\": \"nccl:all_reduce\", \"process_group\": [\"0\", \"x\"], \"collective_seq_id\": 1}]}";
    expect_load_error(test_tmp_write("fr.json", fr, strlen(fr)), SHS_TFMT_UNKNOWN, "entries[0]");
}

/* Ranks beyond a declared world size (PyTorch ET's default group "0",
 * Flight Recorder's default pg, Kineto's distributedInfo.world_size, NCCL's
 * nranks) are refused naming the file and the node, entry or line, instead
 * of growing the world. */
static void test_ranks_beyond_the_declared_world(void **state) {
    (void)state;
#define ET_PGS(list) "{\"schema\": \"1.0.2\", \"nodes\": [{\"name\": \"## process_group:init ##\", \"id\": 2, " \
                     "\"inputs\": {\"values\": [\"" list "\"], \"types\": [\"String\"]}}"
    const char *et_grp = ET_PGS("[{\\\"pg_name\\\": \\\"0\\\", \\\"ranks\\\": [], \\\"group_size\\\": 2}, "
                                "{\\\"pg_name\\\": \\\"1\\\", \\\"ranks\\\": [0, 5], \\\"group_size\\\": 2}]") "]}";
    expect_load_error(test_tmp_write("et-grp.json", et_grp, strlen(et_grp)), SHS_TFMT_UNKNOWN,
                      "node 2: process group '1' names rank 5, beyond the world of 2 ranks");
    const char *et_rank = ET_PGS("[{\\\"pg_name\\\": \\\"0\\\", \\\"ranks\\\": [], \\\"group_size\\\": 2}]")
        ", {\"name\": \"record_param_comms\", \"id\": 5, \"inputs\": {\"values\": [], \"types\": []}, \"attrs\": ["
        "{\"name\": \"collective_name\", \"value\": \"allreduce\"}, {\"name\": \"in_msg_nelems\", \"value\": 4}, "
        "{\"name\": \"dtype\", \"value\": \"Float\"}, {\"name\": \"pg_name\", \"value\": \"0\"}, "
        "{\"name\": \"rank\", \"value\": 3}]}]}";
    expect_load_error(test_tmp_write("et-rank.json", et_rank, strlen(et_rank)), SHS_TFMT_UNKNOWN,
                      "node 5: rank 3 beyond the world of 2 ranks");
#undef ET_PGS
#define FR(pgs, entry, rank) "{\"rank\": " rank ", \"pg_config\": {\"0\": {\"name\": \"0\", \"desc\": \"default_pg\", " \
                             "\"ranks\": \"[0, 1]\"}" pgs "}, \"entries\": [{\"collective_seq_id\": 0, \"p2p_seq_id\": 0, " entry "}]}"
    const char *fr_grp = FR(", \"1\": {\"name\": \"1\", \"ranks\": \"[0, 5]\"}",
                            "\"profiling_name\": \"nccl:all_reduce\", \"process_group\": [\"1\", \"sub\"]", "0");
    expect_load_error(test_tmp_write("fr-grp.json", fr_grp, strlen(fr_grp)), SHS_TFMT_UNKNOWN,
                      "entries[0]: process group '1' names rank 5, beyond the world of 2 ranks");
    const char *fr_peer = FR("", "\"profiling_name\": \"nccl:send 0->7\", \"process_group\": [\"0\", \"default_pg\"]", "0");
    expect_load_error(test_tmp_write("fr-peer.json", fr_peer, strlen(fr_peer)), SHS_TFMT_UNKNOWN,
                      "entries[0]: p2p peer 7 is beyond the world of 2 ranks");
    const char *fr_rank = FR("", "\"profiling_name\": \"nccl:all_reduce\", \"process_group\": [\"0\", \"default_pg\"]", "4");
    expect_load_error(test_tmp_write("fr-rank.json", fr_rank, strlen(fr_rank)), SHS_TFMT_UNKNOWN,
                      "the dumping rank 4 is beyond the world of 2 ranks");
#undef FR
#define KIN(args) "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 2}, \"traceEvents\": [{\"ph\": \"X\", " \
                  "\"name\": \"record_param_comms\", \"ts\": 1, \"args\": {\"Collective name\": \"allreduce\", " \
                  "\"In msg nelems\": 4, \"dtype\": \"Float\", " args "}}]}"
    const char *k_grp = KIN("\"Process Group Name\": \"1\", \"Process Group Ranks\": \"[0, 5]\"");
    expect_load_error(test_tmp_write("k-grp.json", k_grp, strlen(k_grp)), SHS_TFMT_UNKNOWN,
                      "traceEvents[0]: 'Process Group Ranks' names rank 5, beyond distributedInfo.world_size 2");
    const char *k_size = KIN("\"Group size\": 4");
    expect_load_error(test_tmp_write("k-size.json", k_size, strlen(k_size)), SHS_TFMT_UNKNOWN,
                      "traceEvents[0]: 'Group size' 4 is beyond distributedInfo.world_size 2");
#undef KIN
    /* NCCL: a Send's peer (root, comm-local) beyond nranks, with and without Init lines */
    const char *nc = "h:1:1 [0] NCCL INFO Send: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 5 comm 0x5 [nranks=2] stream 0x6\n";
    expect_load_error(test_tmp_write("peer.log", nc, strlen(nc)), SHS_TFMT_UNKNOWN, ":1: peer outside the communicator");
    const char *nci = "h:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xab - Init COMPLETE\n"
                      "h:2:1 [1] NCCL INFO comm 0x7 rank 1 nranks 2 cudaDev 1 busId 2000 commId 0xab - Init COMPLETE\n"
                      "h:1:1 [0] NCCL INFO Send: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 2 comm 0x5 stream 0x6\n";
    expect_load_error(test_tmp_write("peer-init.log", nci, strlen(nci)), SHS_TFMT_UNKNOWN, ":3: peer outside the communicator");
}

/* ---- garbage refused, not used ------------------------------------------ */
/* Each input below carries one garbage value a reader used to take (or
 * drop) silently; the error must name the file, the node / line / entry /
 * record, and the reason. */

/* PyTorch ET 1.0.2 with one default group of 2 and one record_param_comms
 * node (id 5) whose attrs are `attrs`. */
#define ET_ONE(attrs) "{\"schema\": \"1.0.2\", \"nodes\": [{\"name\": \"record_param_comms\", \"id\": 5, \"inputs\": " \
                      "{\"values\": [], \"types\": []}, \"attrs\": [{\"name\": \"collective_name\", \"value\": " \
                      "\"allreduce\"}, {\"name\": \"in_msg_nelems\", \"value\": 4}, {\"name\": \"dtype\", \"value\": " \
                      "\"Float\"}" attrs "]}]}"

static void test_pytorch_et_rank_minus_one_refused(void **state) {
    (void)state;
    /* the file name says rank 1: a -1 used to become 1 */
    const char *a = ET_ONE(", {\"name\": \"rank\", \"value\": -1}");
    expect_load_error(test_tmp_write("et_1.json", a, strlen(a)), SHS_TFMT_UNKNOWN, "node 5: rank -1 is negative");
    /* schema 1.0.1, positional: [tensors, seq, pg, rank, name, ...] with rank -1 */
    const char *p = "{\"schema\": \"1.0.1\", \"nodes\": [{\"name\": \"record_param_comms\", \"id\": 7, \"inputs\": "
                    "[[10, 11, 0, 4, 4, \"cuda:0\"], 1, 0, -1, \"allreduce\", [], []], \"input_types\": "
                    "[\"Tensor(float)\", \"Int\", \"Int\", \"Int\", \"String\", \"GenericList[]\", \"GenericList[]\"]}]}";
    expect_load_error(test_tmp_write("etpos_1.json", p, strlen(p)), SHS_TFMT_UNKNOWN, "node 7: rank -1 is negative");
    /* beyond int: 2^32 + 1 used to wrap to rank 1 */
    const char *w = ET_ONE(", {\"name\": \"rank\", \"value\": 4294967297}");
    expect_load_error(test_tmp_write("etwrap.json", w, strlen(w)), SHS_TFMT_UNKNOWN,
                      "node 5: rank 4294967297 is negative or beyond 65536 ranks");
    /* two ranks in one execution trace (one process's) */
    const char *two = "{\"schema\": \"1.0.2\", \"nodes\": ["
        "{\"name\": \"record_param_comms\", \"id\": 5, \"inputs\": {\"values\": [], \"types\": []}, \"attrs\": ["
        "{\"name\": \"collective_name\", \"value\": \"allreduce\"}, {\"name\": \"in_msg_nelems\", \"value\": 4}, "
        "{\"name\": \"rank\", \"value\": 0}]}, "
        "{\"name\": \"record_param_comms\", \"id\": 6, \"inputs\": {\"values\": [], \"types\": []}, \"attrs\": ["
        "{\"name\": \"collective_name\", \"value\": \"allreduce\"}, {\"name\": \"in_msg_nelems\", \"value\": 4}, "
        "{\"name\": \"rank\", \"value\": 1}]}]}";
    expect_load_error(test_tmp_write("ettwo.json", two, strlen(two)), SHS_TFMT_UNKNOWN,
                      "node 6: rank 1, but node 5 says rank 0");
    /* control: the same node with rank 1 loads, as rank 1 */
    const char *ok = ET_ONE(", {\"name\": \"rank\", \"value\": 1}");
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t o = {0};
    if (shs_trace_load(&t, test_tmp_write("etok.json", ok, strlen(ok)), &o) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->ranks[1].n, 1);
    assert_int_equal(t->ranks[1].recs[0].bytes, 16);
    shs_trace_free(t);
}

/* A tensor descriptor [id, storage, offset, numel, itemsize, device] with
 * itemsize 0 (bytes used to be numel x 1), or one disagreeing with the
 * dtype the node names. */
static void test_pytorch_et_itemsize_zero_refused(void **state) {
    (void)state;
#define ET_TENSOR(t, ty) "{\"schema\": \"1.0.1\", \"nodes\": [{\"name\": \"record_param_comms\", \"id\": 9, \"inputs\": " \
                         "[[10, 11, 0, 1024, " t ", \"cuda:0\"], 1, 0, 0, \"allreduce\", [], []], \"input_types\": " \
                         "[\"" ty "\", \"Int\", \"Int\", \"Int\", \"String\", \"GenericList[]\", \"GenericList[]\"]}]}"
    const char *z = ET_TENSOR("0", "Tensor(float)");
    expect_load_error(test_tmp_write("etis0.json", z, strlen(z)), SHS_TFMT_UNKNOWN,
                      "node 9: input tensor: tensor itemsize 0 is not an element size");
    const char *z2 = ET_TENSOR("0", "Tensor");
    expect_load_error(test_tmp_write("etis0b.json", z2, strlen(z2)), SHS_TFMT_UNKNOWN, "tensor itemsize 0");
    const char *mis = ET_TENSOR("2", "Tensor(float)");
    expect_load_error(test_tmp_write("etmis.json", mis, strlen(mis)), SHS_TFMT_UNKNOWN,
                      "node 9: dtype f32 (4 bytes) but the tensor's itemsize is 2");
#undef ET_TENSOR
}

#define KIN_TS(ts, dur) "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}, \"traceEvents\": [{\"ph\": \"X\", " \
                        "\"name\": \"record_param_comms\", \"ts\": " ts dur ", \"args\": {\"Collective name\": " \
                        "\"allreduce\", \"In msg nelems\": 4, \"dtype\": \"Float\"}}]}"

/* ts 1e300 us used to flow into --network figures 300 digits long; times
 * beyond 2^63 ns (the profiler's 64-bit ns clock) are refused, and an
 * epoch-based ts (2023, 1.7e15 us) still loads. */
static void test_kineto_absurd_ts_refused(void **state) {
    (void)state;
    const char *k = KIN_TS("1e300", ", \"dur\": 5");
    expect_load_error(test_tmp_write("kts.json", k, strlen(k)), SHS_TFMT_UNKNOWN,
                      "traceEvents[0]: 'ts' 1e+300 us is negative or beyond 2^63 ns");
    const char *neg = KIN_TS("-3", "");
    expect_load_error(test_tmp_write("ktsneg.json", neg, strlen(neg)), SHS_TFMT_UNKNOWN,
                      "traceEvents[0]: 'ts' -3 us is negative");
    /* 2^63 ns = 9223372036854775.807 us: 9.3e15 us is just beyond */
    const char *edge = KIN_TS("9.3e15", "");
    expect_load_error(test_tmp_write("ktsedge.json", edge, strlen(edge)), SHS_TFMT_UNKNOWN, "beyond 2^63 ns");
    const char *ok = KIN_TS("1700000000000000", ", \"dur\": 250");
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t o = {0};
    if (shs_trace_load(&t, test_tmp_write("ktsok.json", ok, strlen(ok)), &o) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_true(t->ranks[0].recs[0].t_start == 1.7e9); /* 1.7e15 us; 1e-6 rounds to the nearest double */
    assert_true(fabs(t->ranks[0].recs[0].t_end - t->ranks[0].recs[0].t_start - 250e-6) < 1e-6);
    shs_trace_free(t);
}

/* dur -5 used to drop the call's times silently. */
static void test_kineto_negative_dur_refused(void **state) {
    (void)state;
    const char *k = KIN_TS("10", ", \"dur\": -5");
    expect_load_error(test_tmp_write("kdur.json", k, strlen(k)), SHS_TFMT_UNKNOWN,
                      "traceEvents[0]: 'dur' -5 us is negative");
    const char *s = KIN_TS("10", ", \"dur\": \"5\"");
    expect_load_error(test_tmp_write("kdurs.json", s, strlen(s)), SHS_TFMT_UNKNOWN, "traceEvents[0]: 'dur' is not a number");
}
#undef KIN_TS

/* An unknown dtype name used to count 1 byte per element; torch's real
 * dtypes load with their element sizes (c10 ScalarType: Float8_* 1 byte,
 * ComplexFloat 8, ComplexDouble 16, Short 2) even without a shardsim dtype. */
#define KIN_DT(dt) "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}, \"traceEvents\": [{\"ph\": \"X\", " \
                   "\"name\": \"record_param_comms\", \"ts\": 10, \"args\": {\"Collective name\": " \
                   "\"allreduce\", \"In msg nelems\": 4, \"dtype\": \"" dt "\"}}]}"
static void test_torch_dtype_names(void **state) {
    (void)state;
    const char *bad = KIN_DT("Complex");
    expect_load_error(test_tmp_write("kdt.json", bad, strlen(bad)), SHS_TFMT_UNKNOWN,
                      "traceEvents[0]: dtype 'Complex' is not a torch dtype");
    static const struct { const char *json; uint64_t bytes; int32_t dtype; } ok[] = {
        {KIN_DT("Float8_e4m3fn"), 4 * 1, SHS_TRACE_NONE}, {KIN_DT("Float8_e5m2fnuz"), 4 * 1, SHS_TRACE_NONE},
        {KIN_DT("ComplexFloat"), 4 * 8, SHS_TRACE_NONE},  {KIN_DT("ComplexDouble"), 4 * 16, SHS_TRACE_NONE},
        {KIN_DT("Short"), 4 * 2, SHS_TRACE_NONE},         {KIN_DT("BFloat16"), 4 * 2, SHS_BF16},
        {KIN_DT("Bool"), 4 * 1, SHS_U8},                  {KIN_DT("Double"), 4 * 8, SHS_F64}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        shs_trace_t *t = NULL;
        shs_trace_load_opts_t o = {0};
        if (shs_trace_load(&t, test_tmp_write("kdtok.json", ok[i].json, strlen(ok[i].json)), &o) != SHS_OK)
            fail_msg("%zu: %s", i, shs_last_error());
        assert_int_equal(t->ranks[0].recs[0].bytes, ok[i].bytes);
        assert_int_equal(t->ranks[0].recs[0].dtype, ok[i].dtype);
        shs_trace_free(t);
    }
    const char *fr = "{\"rank\": 0, \"pg_config\": {\"0\": {\"name\": \"0\", \"ranks\": \"[0, 1]\"}}, \"entries\": "
                     "[{\"profiling_name\": \"nccl:all_gather\", \"process_group\": [\"0\", \"d\"], "
                     "\"collective_seq_id\": 1, \"input_sizes\": [[4]], \"input_dtypes\": [\"Complex\"]}]}";
    expect_load_error(test_tmp_write("frdt.json", fr, strlen(fr)), SHS_TFMT_UNKNOWN,
                      "entries[0]: input_dtypes[0] 'Complex' is not a torch dtype");
    const char *et = "{\"schema\": \"1.0.2\", \"nodes\": [{\"name\": \"record_param_comms\", \"id\": 3, \"inputs\": "
                     "{\"values\": [], \"types\": []}, \"attrs\": [{\"name\": \"collective_name\", \"value\": "
                     "\"allreduce\"}, {\"name\": \"group_size\", \"value\": 2}, {\"name\": \"in_msg_nelems\", \"value\": 5}, "
                     "{\"name\": \"dtype\", \"value\": "
                     "\"Complex\"}]}]}";
    expect_load_error(test_tmp_write("etdt.json", et, strlen(et)), SHS_TFMT_UNKNOWN,
                      "node 3: dtype 'Complex' is not a torch dtype");
}
#undef KIN_DT

/* [-1] used to make the line vanish, then "rank 1 never issues all_gather". */
static void test_nccl_device_minus_one_refused(void **state) {
    (void)state;
#define NL(host, dev, comm) host " [" dev "] NCCL INFO AllGather: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 " \
                            "datatype 7 op 0 root 0 comm " comm " [nranks=2] stream 0x6\n"
    const char *a = NL("h:1:1", "0", "0x5") NL("h:2:1", "-1", "0x7");
    expect_load_error(test_tmp_write("devneg.log", a, strlen(a)), SHS_TFMT_UNKNOWN,
                      ":2: malformed collective line: cudaDev '[-1]' is not a device number");
    const char *b = NL("h:1:1", "0", "0x5") NL("h:2:1", "x", "0x7");
    expect_load_error(test_tmp_write("devx.log", b, strlen(b)), SHS_TFMT_UNKNOWN, ":2: malformed collective line");
    /* without Init lines the rank is the cudaDev: two processes on [0] were one rank */
    const char *c = NL("h:1:1", "0", "0x5") NL("h:2:1", "0", "0x7");
    expect_load_error(test_tmp_write("devdup.log", c, strlen(c)), SHS_TFMT_UNKNOWN,
                      ":2: duplicate rank: processes h:1 and h:2 both print cudaDev [0]");
    /* Init lines: two processes claiming rank 0 of one commId */
    const char *d = "h:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0xab - Init COMPLETE\n"
                    "h:2:1 [1] NCCL INFO comm 0x7 rank 0 nranks 2 cudaDev 1 busId 2000 commId 0xab - Init COMPLETE\n";
    expect_load_error(test_tmp_write("initdup.log", d, strlen(d)), SHS_TFMT_UNKNOWN,
                      ":2: duplicate rank: rank 0 of commId ab is claimed by process h:2 and, earlier, by h:1");
    const char *e = "h:1:1 [-1] NCCL INFO comm 0x5 rank 0 nranks 1 cudaDev 0 busId 1000 commId 0xab - Init COMPLETE\n";
    expect_load_error(test_tmp_write("initdev.log", e, strlen(e)), SHS_TFMT_NCCL, ":1: malformed 'Init COMPLETE' line");
    /* control: the same two lines with [1] are two ranks */
    const char *ok = NL("h:1:1", "0", "0x5") NL("h:2:1", "1", "0x7");
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t o = {0};
    if (shs_trace_load(&t, test_tmp_write("devok.log", ok, strlen(ok)), &o) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->ranks[1].n, 1);
    shs_trace_free(t);
#undef NL
}

/* Flight Recorder: negative output sizes, times and durations, a group
 * listing a rank twice. */
static void test_flight_garbage_refused(void **state) {
    (void)state;
#define FRE(extra, ranks) "{\"rank\": 0, \"pg_config\": {\"0\": {\"name\": \"0\", \"ranks\": \"" ranks "\"}}, " \
                          "\"entries\": [{\"profiling_name\": \"nccl:all_gather\", \"process_group\": [\"0\", \"d\"], " \
                          "\"collective_seq_id\": 1, \"input_sizes\": [[4]], \"input_dtypes\": [\"Float\"]" extra "}]}"
    const char *o = FRE(", \"output_sizes\": [[-8]]", "[0, 1]");
    expect_load_error(test_tmp_write("fro.json", o, strlen(o)), SHS_TFMT_UNKNOWN, "entries[0]: output_sizes negative");
    const char *d = FRE(", \"time_created_ns\": 1000, \"duration_ms\": -2", "[0, 1]");
    expect_load_error(test_tmp_write("frd.json", d, strlen(d)), SHS_TFMT_UNKNOWN, "entries[0]: duration_ms -2 is negative");
    const char *tc = FRE(", \"time_created_ns\": 1e300", "[0, 1]");
    expect_load_error(test_tmp_write("frt.json", tc, strlen(tc)), SHS_TFMT_UNKNOWN,
                      "entries[0]: time_created_ns 1e+300 is not a time in 0..2^63 ns");
    const char *dup = FRE("", "[0, 1, 1]");
    expect_load_error(test_tmp_write("frdup.json", dup, strlen(dup)), SHS_TFMT_UNKNOWN,
                      "entries[0]: process group '0': communicator 'pg0': rank 1 listed twice");
    /* state: only the three Flight Recorder writes (its getState: scheduled, started, completed) */
    const char *ex = FRE(", \"state\": \"exploded\"", "[0, 1]");
    expect_load_error(test_tmp_write("frst.json", ex, strlen(ex)), SHS_TFMT_UNKNOWN,
                      "entries[0]: state 'exploded' is not one Flight Recorder writes");
    const char *sc = FRE(", \"state\": \"scheduled\"", "[0, 1]");
    shs_trace_t *ts = NULL;
    shs_trace_load_opts_t so = {0};
    if (shs_trace_load(&ts, test_tmp_write("frsc.json", sc, strlen(sc)), &so) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_trace_free(ts);
    /* control: duration_ms null (no timing) loads without times */
    const char *ok = FRE(", \"time_created_ns\": 1000, \"duration_ms\": null", "[0, 1]");
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t lo = {0};
    if (shs_trace_load(&t, test_tmp_write("frok.json", ok, strlen(ok)), &lo) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_true(fabs(t->ranks[0].recs[0].t_start - 1e-6) < 1e-18); /* 1000 ns, to the rounding of ns -> s */
    shs_trace_free(t);
#undef FRE
}

/* Chakra: a node's start_time_micros beyond 2^63 ns (uint64 in the proto). */
static void test_chakra_absurd_time_refused(void **state) {
    (void)state;
    static unsigned char buf[512];
    size_t n = 0;
    ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    gm.version = (char *)"0.0.4";
    ChakraProtoMsg__AttributeProto a0 = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__INIT, a1 = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__INIT;
    a0.name = (char *)"comm_type";
    a0.value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
    a0.int64_val = 0;
    a1.name = (char *)"comm_size";
    a1.value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
    a1.int64_val = 16;
    ChakraProtoMsg__AttributeProto *attrs[] = {&a0, &a1};
    ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
    nd.id = 1;
    nd.name = (char *)"ar";
    nd.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
    nd.start_time_micros = (uint64_t)1 << 62; /* 4.6e18 us: 2^63 ns is 9.2e15 us */
    nd.n_attr = 2;
    nd.attr = attrs;
    size_t l = chakra_proto_msg__global_metadata__get_packed_size(&gm);
    assert_true(l < 100);
    buf[n++] = (unsigned char)l;
    n += chakra_proto_msg__global_metadata__pack(&gm, buf + n);
    l = chakra_proto_msg__node__get_packed_size(&nd);
    assert_true(l < 100);
    buf[n++] = (unsigned char)l;
    n += chakra_proto_msg__node__pack(&nd, buf + n);
    expect_load_error(test_tmp_write("abs.0.et", buf, n), SHS_TFMT_CHAKRA,
                      "record 1 (node 1 'ar'): start_time_micros 4611686018427387904 + duration_micros 0 is beyond 2^63 ns");
}

/* shardsim's own text: a time of 1e300 us. */
static void test_text_absurd_time_refused(void **state) {
    (void)state;
    const char *x = "shardsim-trace 1\nworld 1\ncomm world 1 0\n"
                    "0 world 0 all_reduce 4 f32 sum - - - 16 rank 1e300 2e300 -\n";
    expect_load_error(test_tmp_write("abs.trace", x, strlen(x)), SHS_TFMT_UNKNOWN, "abs.trace:4: bad time");
}

/* shardsim's own text: bytes that disagree with count x dtype size (1 x f32
 * is 4 bytes) used to load; all_gather's count is one rank's part
 * (trace.h), so 2 x f32 over 2 ranks is 8 bytes 'rank' or 16 'total'. */
static void test_text_bytes_disagree_with_count_refused(void **state) {
    (void)state;
    const char *x = "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                    "0 world 0 all_reduce 1 f32 sum - - - 8 rank - - x\n";
    expect_load_error(test_tmp_write("cnt.trace", x, strlen(x)), SHS_TFMT_UNKNOWN,
                      "cnt.trace:4: count 1 x f32 (4 bytes) = 4 bytes, but the line states 8 bytes");
    const char *ag = "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                     "0 world 0 all_gather 2 f32 - - - - 8 total - - -\n";
    expect_load_error(test_tmp_write("cntag.trace", ag, strlen(ag)), SHS_TFMT_UNKNOWN, "cntag.trace:4: count 2 x f32");
    const char *ok = "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                     "0 world 0 all_gather 2 f32 - - - - 16 total - - -\n1 world 0 all_gather 2 f32 - - - - 8 rank - - -\n";
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t o = {0};
    if (shs_trace_load(&t, test_tmp_write("cntok.trace", ok, strlen(ok)), &o) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_trace_free(t);
}

/* Two files of a directory with records of the same rank (a copied rank
 * file) used to merge into one sequence. */
static void test_directory_duplicate_rank_refused(void **state) {
    (void)state;
    char dir[600], src[1024];
    snprintf(dir, sizeof dir, "%s/duprank", test_tmpdir);
    assert_int_equal(mkdir(dir, 0777), 0);
    snprintf(src, sizeof src, "%s/traces/cases/kineto-2rank/rank0.json", SHS_SOURCE_DIR);
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    test_tmp_write("duprank/a.json", buf, n);
    test_tmp_write("duprank/b.json", buf, n);
    char b[1400];
    snprintf(b, sizeof b, "%s/b.json: has records of rank 0, and so has %s/a.json", dir, dir);
    expect_load_error(dir, SHS_TFMT_UNKNOWN, b);
}

/* A directory whose files are of two formats used to say only "earlier
 * files are ..." : the file that differs, the first file of the other
 * format, and both formats are named. */
static void test_directory_of_mixed_formats_names_both_files(void **state) {
    (void)state;
    char dir[600], src[1024], b[1600];
    snprintf(dir, sizeof dir, "%s/mixed", test_tmpdir);
    assert_int_equal(mkdir(dir, 0777), 0);
    for (int r = 0; r < 2; r++) {
        snprintf(src, sizeof src, "%s/traces/cases/kineto-2rank/rank%d.json", SHS_SOURCE_DIR, r);
        FILE *f = fopen(src, "rb");
        assert_non_null(f);
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        char name[64];
        snprintf(name, sizeof name, "mixed/rank%d.json", r);
        test_tmp_write(name, buf, n);
    }
    const char *r2 = "shardsim-trace 1\nworld 3\ncomm world 3 0,1,2\n2 world 0 all_reduce 4 f32 sum - - - 16 rank - - -\n";
    test_tmp_write("mixed/rank2.trace", r2, strlen(r2));
    snprintf(b, sizeof b, "%s/rank2.trace: is shardsim, but %s/rank0.json (and every file read before it) is kineto",
             dir, dir);
    expect_load_error(dir, SHS_TFMT_UNKNOWN, b);
    const test_proc_t *p = test_shardsim(20, "replay", dir, "--check-only", NULL);
    assert_int_equal(p->exit_code, 1);
    if (!strstr(p->err, b)) fail_msg("stderr: %s", p->err);
}

/* ---- non-regular inputs ------------------------------------------------- */

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "test_trace_import: a FIFO load hung (alarm)\n";
    if (write(2, m, sizeof m - 1) < 0) { /* nothing more to do */ }
    _exit(1);
}

/* A FIFO given to replay used to wait for a writer forever: it is refused
 * at once, as the path and as a directory entry; the library call too.
 * alarm() fails the test instead of hanging CI should the refusal regress. */
static void test_replay_refuses_fifo(void **state) {
    (void)state;
    signal(SIGALRM, on_alarm);
    alarm(60);
    char fifo[600], dir[600], entry[700];
    snprintf(fifo, sizeof fifo, "%s/pipe.trace", test_tmpdir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const test_proc_t *p = test_shardsim(20, "replay", fifo, NULL);
    assert_int_equal(p->exit_code, 1);
    if (!strstr(p->err, fifo) || !strstr(p->err, "is a named pipe (FIFO), not a regular file"))
        fail_msg("stderr: %s", p->err);
    expect_load_error(fifo, SHS_TFMT_UNKNOWN, "is a named pipe (FIFO)");
    expect_load_error(fifo, SHS_TFMT_SHARDSIM, "is a named pipe (FIFO)");
    /* in a trace directory: refused by name, not skipped */
    snprintf(dir, sizeof dir, "%s/fifodir", test_tmpdir);
    assert_int_equal(mkdir(dir, 0777), 0);
    snprintf(entry, sizeof entry, "%s/rank1.trace", dir);
    assert_int_equal(mkfifo(entry, 0600), 0);
    const char *r0 = "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n0 world 0 all_reduce 4 f32 sum - - - 16 rank - - -\n";
    test_tmp_write("fifodir/rank0.trace", r0, strlen(r0));
    p = test_shardsim(20, "replay", dir, "--check-only", NULL);
    assert_int_equal(p->exit_code, 1);
    if (!strstr(p->err, entry) || !strstr(p->err, "is a named pipe (FIFO)")) fail_msg("stderr: %s", p->err);
    /* a character device */
    expect_load_error("/dev/null", SHS_TFMT_UNKNOWN, "is a character device");
    /* a UNIX socket, as the path and in a directory */
    char sock[600];
    snprintf(sock, sizeof sock, "%s/sock.trace", test_tmpdir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof sa.sun_path);
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    expect_load_error(sock, SHS_TFMT_UNKNOWN, "is a socket, not a regular file");
    p = test_shardsim(20, "replay", sock, NULL);
    assert_int_equal(p->exit_code, 1);
    if (!strstr(p->err, sock) || !strstr(p->err, "is a socket")) fail_msg("stderr: %s", p->err);
    close(fd);
    unlink(sock);
    alarm(0);
    unlink(entry);
    unlink(fifo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_inputs),
        cmocka_unit_test(test_ranks_beyond_the_declared_world),
        cmocka_unit_test(test_pytorch_et_rank_minus_one_refused),
        cmocka_unit_test(test_pytorch_et_itemsize_zero_refused),
        cmocka_unit_test(test_kineto_absurd_ts_refused),
        cmocka_unit_test(test_kineto_negative_dur_refused),
        cmocka_unit_test(test_torch_dtype_names),
        cmocka_unit_test(test_nccl_device_minus_one_refused),
        cmocka_unit_test(test_flight_garbage_refused),
        cmocka_unit_test(test_chakra_absurd_time_refused),
        cmocka_unit_test(test_text_absurd_time_refused),
        cmocka_unit_test(test_text_bytes_disagree_with_count_refused),
        cmocka_unit_test(test_directory_duplicate_rank_refused),
        cmocka_unit_test(test_directory_of_mixed_formats_names_both_files),
        cmocka_unit_test(test_replay_refuses_fifo),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
