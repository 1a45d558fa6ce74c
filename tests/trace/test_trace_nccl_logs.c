/* test_trace_nccl_logs.c - NCCL logs as users' tools write them: lines
 * behind a launcher's header (srun --label, Ray, torchrun), Init lines in
 * the layouts NCCL 2.18 to 2.27 print (src/init.cc: "comm %p rank ...
 * commId", "ncclCommInitRank comm ...", ncclCommSplit's "parent %p
 * splitCount %d color %d key %d" without commId), a comm pointer freed and
 * reused, and what the reader must refuse instead of guessing: a call on a
 * communicator no Init line declared, a [nranks=N] other than its
 * communicator's, two communicators of one process without Init lines
 * (with the NCCL_DEBUG_SUBSYS=INIT,COLL hint). The logs are streamed: a
 * file beyond 2 GiB is read (a sparse file, its calls after the 2 GiB
 * mark), and a gzip'd log reads as the plain one.
 * Line layouts are NCCL's own format strings (enqueue.cc, init.cc); the
 * header shapes are the launchers' (Slurm srun --label "N: ", Ray's
 * "(RayTrainWorker pid=P, ip=A) " as in NVIDIA/nccl#1193, torchrun's
 * "[default0]:" / "[rank0]:" written before the line, torch/distributed/
 * elastic/multiprocessing/tail_log.py). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_import.h"
#include "trace/trace_files.h"

/* Two processes, NCCL 2.21's Init line, two all-reduces each, every line
 * behind `hdr0` / `hdr1` (the header of process 0 / 1). */
static char *two_rank_log(const char *hdr0, const char *hdr1) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "%sgpu-a:615:615 [0] NCCL INFO cudaDriverVersion 12040\n"
             "%sgpu-a:615:615 [0] NCCL INFO ncclCommInitRank comm 0x78cfda045840 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
             "busId 18000 commId 0x9b1c3f27d0a9e4b1 - Init COMPLETE\n"
             "%sgpu-b:622:622 [1] NCCL INFO ncclCommInitRank comm 0x7fb4b3e6ee80 rank 1 nranks 2 cudaDev 1 nvmlDev 1 "
             "busId 28000 commId 0x9b1c3f27d0a9e4b1 - Init COMPLETE\n"
             "%sgpu-a:615:18953 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x78d056200000 recvbuff 0x78d056200000 "
             "count 7382228 datatype 7 op 0 root 0 comm 0x78cfda045840 [nranks=2] stream 0x78d07125e5e0\n"
             "%sgpu-b:622:41192 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x7fb52c200000 recvbuff 0x7fb52c200000 "
             "count 7382228 datatype 7 op 0 root 0 comm 0x7fb4b3e6ee80 [nranks=2] stream 0x7fb54524a0f0\n"
             "%sgpu-b:622:41192 [1] NCCL INFO AllReduce: opCount 1 sendbuff 0x7fb486000000 recvbuff 0x7fb486000000 "
             "count 7066572 datatype 9 op 0 root 0 comm 0x7fb4b3e6ee80 [nranks=2] stream 0x7fb54524a0f0\n"
             "%sgpu-a:615:18953 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x796eee000000 recvbuff 0x796eee000000 "
             "count 7066572 datatype 9 op 0 root 0 comm 0x78cfda045840 [nranks=2] stream 0x78d07125e5e0\n",
             hdr0, hdr0, hdr1, hdr0, hdr1, hdr1, hdr0);
    return buf;
}

/* Rank r's calls: 7382228 f32 (29528912 bytes) at seq 0, 7066572 bf16
 * (14133144 bytes) at seq 1, on the 2-rank world. */
static void check_two_ranks(const shs_trace_t *t, const char *what) {
    if (t->world != 2 || t->ncomms != 1 || t->comms[0].size != 2) fail_msg("%s: world %d, %d comms", what, t->world, t->ncomms);
    for (int r = 0; r < 2; r++) {
        if (t->ranks[r].n != 2) fail_msg("%s: rank %d has %zu calls, want 2", what, r, t->ranks[r].n);
        const shs_trace_rec_t *a = &t->ranks[r].recs[0], *b = &t->ranks[r].recs[1];
        assert_int_equal(a->op, SHS_OP_ALL_REDUCE);
        assert_int_equal(a->seq, 0);
        assert_true(a->bytes == 7382228ull * 4);
        assert_int_equal(b->seq, 1);
        assert_int_equal(b->dtype, SHS_BF16);
        assert_true(b->bytes == 7066572ull * 2);
    }
}

/* The same log behind each launcher's header reads as the bare log, its
 * format detected from content (a torchrun log starts with '['). */
static void test_launcher_headers(void **state) {
    (void)state;
    static const struct { const char *name, *h0, *h1; } v[] = {
        {"bare.log", "", ""},
        {"srun.log", "0: ", "1: "},
        {"ray.log", "(RayTrainWorker pid=615, ip=10.72.7.6) ", "(RayTrainWorker pid=622, ip=10.72.12.6) "},
        {"ray-nested.log", "(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=615, ip=10.72.7.6) ",
         "(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=622, ip=10.72.12.6) "},
        {"torchrun.log", "[default0]:", "[default1]:"},
        {"torchrun-rank.log", "[rank0]:", "[rank1]:"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const char *text = two_rank_log(v[i].h0, v[i].h1);
        const char *p = test_tmp_write(v[i].name, text, strlen(text));
        assert_int_equal(shs_trace_detect(text, strlen(text)), SHS_TFMT_NCCL);
        shs_trace_t *t = trace_load_ok(p);
        assert_string_equal(t->format, "nccl");
        check_two_ranks(t, v[i].name);
        shs_trace_free(t);
    }
}

/* NCCL 2.23+: ncclCommSplit prints parent, splitCount, color and key, no
 * commId. Four processes; the world (commId), then a split by rank % 2:
 * color 0 = ranks {0, 2}, color 1 = {1, 3}; each child's rank is its
 * position by key. A call on a child lands on that group's communicator
 * at the right global ranks. */
static void test_split_without_comm_id(void **state) {
    (void)state;
    char text[8192];
    size_t k = 0;
    for (int r = 0; r < 4; r++)
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "node:%d:%d [%d] NCCL INFO ncclCommInitRankConfig comm 0x55%02d000 rank %d nranks 4 "
                              "cudaDev %d nvmlDev %d busId %d8000 commId 0x6b1c3f27d0a9e4b1 - Init COMPLETE\n",
                              100 + r, 100 + r, r, r, r, r, r, r);
    for (int r = 0; r < 4; r++)
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "node:%d:%d [%d] NCCL INFO ncclCommSplit comm 0x66%02d000 rank %d nranks 2 cudaDev %d "
                              "nvmlDev %d busId %d8000 parent 0x55%02d000 splitCount 1 color %d key %d - Init COMPLETE\n",
                              100 + r, 100 + r, r, r, r / 2, r, r, r, r, r % 2, r);
    for (int r = 0; r < 4; r++)
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "node:%d:%d [%d] NCCL INFO AllGather: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1024 "
                              "datatype 7 op 0 root 0 comm 0x66%02d000 [nranks=2] stream 0x9\n",
                              100 + r, 100 + r, r, r);
    shs_trace_t *t = trace_load_ok(test_tmp_write("split.log", text, k));
    assert_int_equal(t->world, 4);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(t->ranks[r].n, 1);
        const shs_trace_comm_t *c = &t->comms[t->ranks[r].recs[0].comm];
        assert_int_equal(c->size, 2);
        assert_int_equal(c->ranks[0], r % 2); /* color r % 2: ranks r % 2 and r % 2 + 2 */
        assert_int_equal(c->ranks[1], r % 2 + 2);
    }
    assert_string_equal(t->note, ""); /* the Init lines said who is who */
    shs_trace_free(t);
}

/* A comm pointer freed (ncclCommDestroy) and handed to the next
 * communicator: calls before the second Init line are on the first. */
static void test_reused_pointer(void **state) {
    (void)state;
    char text[4096];
    size_t k = 0;
#define INIT(p, r, n, id) k += (size_t)snprintf(text + k, sizeof text - k, "h:%d:%d [%d] NCCL INFO comm 0x7000 " \
                                                "rank %d nranks %d cudaDev %d busId 1000 commId " id " - Init COMPLETE\n", \
                                                p, p, p, r, n, p)
#define CALL(r, n, seq) k += (size_t)snprintf(text + k, sizeof text - k, "h:%d:%d [%d] NCCL INFO AllReduce: opCount " \
                                              seq " sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm " \
                                              "0x7000 [nranks=%d] stream 0x9\n", r, r, r, n)
    INIT(0, 0, 2, "0xa");
    INIT(1, 1, 2, "0xa");
    CALL(0, 2, "0");
    CALL(1, 2, "0");
    INIT(0, 0, 1, "0xb"); /* each process alone, on the same pointer */
    INIT(1, 0, 1, "0xc");
    CALL(0, 1, "0");
    CALL(1, 1, "0");
#undef INIT
#undef CALL
    shs_trace_t *t = trace_load_ok(test_tmp_write("reuse.log", text, k));
    for (int r = 0; r < 2; r++) {
        assert_int_equal(t->ranks[r].n, 2);
        assert_int_equal(t->comms[t->ranks[r].recs[0].comm].size, 2);
        assert_int_equal(t->comms[t->ranks[r].recs[1].comm].size, 1);
    }
    shs_trace_free(t);
}

/* Garbage that used to change the result silently is refused, naming the
 * file and line: a call on a pointer no Init line of its process declared
 * (it was merged into the world), a [nranks=3] on a 4-rank communicator
 * (it changed nothing), two communicators of one process without Init
 * lines (merged), and an all-[0] multi-process log without Init lines
 * (Ray: one GPU per process), each with the hint. */
static void test_garbage_refused(void **state) {
    (void)state;
    char text[4096];
    size_t k = 0;
    for (int r = 0; r < 4; r++)
        k += (size_t)snprintf(text + k, sizeof text - k, "h:%d:%d [%d] NCCL INFO comm 0x%d000 rank %d nranks 4 cudaDev %d "
                              "busId 1000 commId 0xab - Init COMPLETE\n", r, r, r, r + 1, r, r);
    size_t base = k;
    k += (size_t)snprintf(text + k, sizeof text - k, "h:2:2 [2] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 "
                          "count 8 datatype 7 op 0 root 0 comm 0x9999 [nranks=4] stream 0x9\n");
    trace_expect_refused("unknown-comm.log", text, ":5: unknown communicator: process h:2 calls on comm 0x9999");
    k = base;
    for (int r = 0; r < 4; r++)
        k += (size_t)snprintf(text + k, sizeof text - k, "h:%d:%d [%d] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 "
                              "recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x%d000 [nranks=%d] stream 0x9\n",
                              r, r, r, r + 1, r == 2 ? 3 : 4);
    trace_expect_refused("nranks.log", text, ":7: nranks disagrees with the communicator: [nranks=3], but communicator "
                   "world of comm 0x3000 has 4 ranks");
    const char *two = "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
                      "root 0 comm 0x5 [nranks=2] stream 0x6\n"
                      "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
                      "root 0 comm 0x8 [nranks=2] stream 0x6\n";
    trace_expect_refused("two-comms.log", two, ":2: two communicators without Init lines: process h:1 calls on comm 0x5 and "
                   "on comm 0x8");
    trace_expect_refused("two-comms2.log", two, "NCCL_DEBUG_SUBSYS=INIT,COLL");
    const char *ray = "(RayTrainWorker pid=615, ip=10.72.7.6) w1:615:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 "
                      "recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x5 [nranks=2] stream 0x6\n"
                      "(RayTrainWorker pid=619, ip=10.72.2.6) w2:619:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 "
                      "recvbuff 0x2 count 8 datatype 7 op 0 root 0 comm 0x9 [nranks=2] stream 0x6\n";
    trace_expect_refused("ray-noinit.log", ray, ":2: duplicate rank: processes w1:615 and w2:619 both print cudaDev [0]");
    trace_expect_refused("ray-noinit2.log", ray, "NCCL_DEBUG_SUBSYS=INIT,COLL");
    const char *nonr = "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
                       "root 0 comm 0x5 stream 0x6\n";
    trace_expect_refused("no-nranks.log", nonr, ":1: communicator size unknown");
    /* a split whose parent has no Init line in its process */
    const char *orphan = "h:1:1 [0] NCCL INFO ncclCommSplit comm 0x66000 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId "
                         "18000 parent 0x55000 splitCount 1 color 0 key 0 - Init COMPLETE\n";
    trace_expect_refused("orphan.log", orphan, ":1: ncclCommSplit of parent comm 0x55000, which process h:1 initialized on no "
                   "earlier 'Init COMPLETE' line");
}

/* Without Init lines the ranks are cudaDev numbers: the trace says so. */
static void test_note_without_init_lines(void **state) {
    (void)state;
    const char *text = "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
                       "root 0 comm 0x5 [nranks=2] stream 0x6\n"
                       "h:2:1 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype 7 op 0 "
                       "root 0 comm 0x7 [nranks=2] stream 0x6\n";
    shs_trace_t *t = trace_load_ok(test_tmp_write("noinit.log", text, strlen(text)));
    assert_int_equal(t->world, 2);
    if (!strstr(t->note, "cudaDev") || !strstr(t->note, "NCCL_DEBUG_SUBSYS=INIT,COLL")) fail_msg("note: '%s'", t->note);
    shs_trace_free(t);
    const test_proc_t *p = test_shardsim(60, "replay", test_tmp_write("noinit.log", text, strlen(text)), "--check-only", NULL);
    assert_int_equal(p->exit_code, 0);
    if (!strstr(p->out, "NCCL_DEBUG_SUBSYS=INIT,COLL")) fail_msg("replay does not pass the note on:\n%s", p->out);
}

/* A log of more than 2 GiB (the whole-file limit) is read, streamed: a
 * sparse file whose Init lines and first calls come first, then 2 GiB of
 * a hole (NUL lines, 16 MiB each, ignored as lines that are not NCCL's),
 * then the second calls. Reading 4 GiB (two passes) takes seconds, so it
 * runs under `make test-full` (SHS_TEST_FULL=1); `make test` reads the
 * same layout with a 64 MiB hole (the window is 1 MiB: the reading is
 * streamed either way). */
static void test_beyond_two_gib(void **state) {
    (void)state;
    const char *full = getenv("SHS_TEST_FULL");
    off_t hole = full && *full && strcmp(full, "0") != 0 ? ((off_t)2 << 30) + 4096 : (off_t)64 << 20;
    char path[512];
    snprintf(path, sizeof path, "%s/big.log", test_tmpdir);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    assert_true(fd >= 0);
    const char *text = two_rank_log("", "");
    const char *second = strstr(text, "gpu-b:622:41192 [1] NCCL INFO AllReduce: opCount 1");
    assert_non_null(second);
    size_t head = (size_t)(second - text);
    assert_true(write(fd, text, head) == (ssize_t)head);
    off_t end = hole;
    long newlines = 1;
    for (off_t at = 16 << 20; at < end; at += 16 << 20, newlines++) assert_true(pwrite(fd, "\n", 1, at) == 1);
    assert_true(pwrite(fd, "\n", 1, end) == 1);
    size_t tail = strlen(second);
    assert_true(pwrite(fd, second, tail, end + 1) == (ssize_t)tail);
    close(fd);
    shs_trace_t *t = trace_load_ok(path);
    check_two_ranks(t, "big.log");
    /* 5 lines, the hole's NUL lines, gpu-b's call, then gpu-a's */
    assert_int_equal(t->ranks[0].recs[1].src_line, 5 + newlines + 2);
    shs_trace_free(t);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launcher_headers),
        cmocka_unit_test(test_split_without_comm_id),
        cmocka_unit_test(test_reused_pointer),
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(test_note_without_init_lines),
        cmocka_unit_test(test_beyond_two_gib),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
