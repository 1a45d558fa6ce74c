/* test_trace_cli.c - `shardsim replay` as a user runs it: consistent traces
 * replay and exit 0 with per-op counts; inconsistent ones exit 1 naming the
 * ranks and sequence number; malformed files exit 1 with one error line
 * naming the file. Every run has a wall-clock limit: a hang fails. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/trace.h"
#include "shardsim/trace_import.h"
#include "harness.h"

static test_proc_t proc;

/* shardsim replay PATH [a1 [a2]] (a NULL ends the arguments). */
static const test_proc_t *replay(const char *path, const char *a1, const char *a2) {
    return test_shardsim(60.0, "replay", path, a1, a2, NULL);
}

static void expect(const test_proc_t *p, int code, const char *needle_out, const char *needle_err) {
    if (p->exit_code != code || (needle_out && !strstr(p->out, needle_out)) || (needle_err && !strstr(p->err, needle_err)))
        fail_msg("want exit %d, '%s' in stdout, '%s' in stderr; got exit %d\nstdout:\n%s\nstderr:\n%s", code,
                 needle_out ? needle_out : "", needle_err ? needle_err : "", p->exit_code, p->out, p->err);
}

static void test_replay_nccl_log(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/nccl-log/fsdp-4rank-bf16.log", test_shared_dir());
    const test_proc_t *p = replay(path, "--max-bytes", "256KiB");
    expect(p, 0, "consistency: OK", NULL);
    assert_non_null(strstr(p->out, "format nccl, 4 ranks"));
    assert_non_null(strstr(p->out, "replay on 4 threads"));
    /* 4 ranks x 12 all-gathers */
    assert_non_null(strstr(p->out, "all_gather              48"));
}

static void test_replay_reports_mismatch(void **state) {
    (void)state;
    const test_proc_t *p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", NULL, NULL);
    expect(p, 1, "comm world: rank 2 skipped all_reduce seq 1 (line 7), which rank 0 issued", NULL);
    assert_null(strstr(p->out, "replay on"));
    p = replay(SHS_SOURCE_DIR "/traces/cases/count-mismatch.trace", "--check-only", NULL);
    expect(p, 1, "count differs: rank 0", NULL);
}

/* --world above the files: the added ranks are named missing; a world the
 * thread replay cannot run is refused before the analysis, not after it. */
static void test_replay_world_beyond_files(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/chakra-et/microbench/all_reduce_8npus_1MB", test_shared_dir());
    const test_proc_t *p = test_shardsim(60.0, "replay", path, "--world", "16", "--check-only", NULL);
    expect(p, 0, "ranks 8-15: missing: no file and no record of them", NULL);
    snprintf(path, sizeof path, "%s/traces/astra-sim/text-workloads/microAllReduce.txt", test_shared_dir());
    p = test_shardsim(60.0, "replay", path, "--world", "2048", NULL, NULL);
    expect(p, 1, NULL, "2048 ranks: the replay runs one thread per rank (1..1024)");
    assert_null(strstr(p->out, "consistency:")); /* no analysis ran first */
}

static void test_replay_bad_input(void **state) {
    (void)state;
    char path[] = "/tmp/shardsim-replay-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *txt = "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n0 world 0 all_gather -3 f32 - - - - 4 rank - - -\n";
    assert_int_equal(write(fd, txt, strlen(txt)), (ssize_t)strlen(txt));
    close(fd);
    const test_proc_t *p = replay(path, NULL, NULL);
    expect(p, 1, NULL, ":4: bad count");
    assert_non_null(strstr(p->err, path));
    unlink(path);
    p = replay("/nonexistent/trace", NULL, NULL);
    expect(p, 1, NULL, "no such file");
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--format", "bogus");
    expect(p, 2, NULL, "unknown format");
    /* options: an unknown one is named as such, even as the last argument;
     * zero sizes are refused with the value */
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--bogus", NULL);
    expect(p, 2, NULL, "shardsim replay: error: unknown option '--bogus'");
    /* --algo picks the algorithm of --network's estimates: alone it would be ignored */
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--algo", "tree");
    expect(p, 2, NULL, "shardsim replay: error: --algo tree needs --network");
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--compare-algorithms", NULL);
    expect(p, 2, NULL, "--compare-algorithms needs --network");
    /* booleans: bare, or with a word; a word that is none is named with its option */
    char nccl[1024];
    snprintf(nccl, sizeof nccl, "%s/traces/nccl-log/fsdp-4rank-bf16.log", test_shared_dir());
    p = replay(nccl, "--check-only=false", "--max-bytes=256KiB");
    expect(p, 0, "\nreplay on 4 threads", NULL);
    p = replay("--check-only", nccl, NULL);
    expect(p, 0, "consistency: OK", NULL);
    assert_null(strstr(p->out, "replay on"));
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--check-only", "perhaps");
    expect(p, 2, NULL, "unexpected argument 'perhaps' after --check-only");
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--format", "--check-only");
    expect(p, 2, NULL, "option --format needs a value, not the option '--check-only'");
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--mem-limit", "0");
    expect(p, 2, NULL, "--mem-limit: must be > 0, not 0");
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--max-bytes", "0");
    expect(p, 2, NULL, "--max-bytes: must be > 0, not 0");
    p = replay(SHS_SOURCE_DIR "/traces/cases/skip-op.trace", "--max-bytes", "abc");
    expect(p, 2, NULL, "--max-bytes: 'abc' is not a size");
    /* a file with no recognizable record is not a consistent (empty) trace */
    char empty[] = "/tmp/shardsim-replay-XXXXXX";
    fd = mkstemp(empty);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "garbage\n", 8), 8);
    close(fd);
    p = replay(empty, "--format", "nccl");
    expect(p, 1, NULL, "has no communication record of any rank (empty, or not nccl output)");
    unlink(empty);
}

static void test_replay_network(void **state) {
    (void)state;
    char path[1024], yml[1024];
    snprintf(path, sizeof path, "%s/traces/chakra-et/microbench/all_reduce_8npus_1MB", test_shared_dir());
    snprintf(yml, sizeof yml, "%s/traces/astra-sim/network/Ring_8npus.yml", test_shared_dir());
    char *argv[] = {(char *)SHS_BIN_PATH, "replay", path, "--network", yml, "--check-only", NULL};
    test_run_process(argv, 60.0, &proc);
    /* ASTRA-sim's rules (GB = 2^30 bytes, ASTRA-sim's default system: E =
     * 10 ns, one chunk): 10 + 14 x (floor(500 + 131072 / 53.6870912) + 10) =
     * 41324 ns; algbw 1 MiB / 41.324 us = 25.37 GB/s, busbw x 1.75 = 44.41 */
    expect(&proc, 0, "timing (ASTRA-sim analytical", NULL);
    assert_non_null(strstr(proc.out, "dimension 1: Ring of 8, 50 GB/s (1 GB = 2^30 bytes), 500 ns per hop"));
    assert_non_null(strstr(proc.out, "all_reduce             1     1.00 MiB        0.041      25.37      44.41"));
    assert_non_null(strstr(proc.out, "top 1 calls by time"));
    /* no compute in the trace: all of the call is exposed on every rank */
    assert_non_null(strstr(proc.out, "rank 0    communication        0.041  exposed        0.041  (waiting for peers 0.000"));
    assert_non_null(strstr(proc.out, "rank 7    communication        0.041  exposed        0.041"));
    /* no --system: the defaults say so, and no key is claimed as read */
    assert_non_null(strstr(proc.out, "scheduling-policy FIFO (default) orders concurrent collectives only\n"));
    assert_null(strstr(proc.out, "TFLOPS read"));
    /* the algorithm of an ASTRA-sim network is the system JSON's */
    expect(test_shardsim(60.0, "replay", path, "--network", yml, "--compare-algorithms", NULL), 2, NULL,
           "system JSON's *-implementation");
    /* microAllReduce (1 MiB) with Ring_4chunks.json: 4 chunks of 10 + 14 x
     * 1120 + 7 x 60 = 16110 ns: 64.440 us (test_astra_timing.c works it) */
    char wl[1024], sys[1024];
    snprintf(wl, sizeof wl, "%s/traces/astra-sim/text-workloads/microAllReduce.txt", test_shared_dir());
    snprintf(sys, sizeof sys, "%s/traces/astra-sim/system/Ring_4chunks.json", test_shared_dir());
    const test_proc_t *q = test_shardsim(60.0, "replay", wl, "--network", yml, "--system", sys, "--check-only", NULL);
    expect(q, 0, "4 splits, 1 active chunk per dimension, endpoint delay 10 ns, local-mem-bw 1600 GB/s", NULL);
    assert_non_null(strstr(q->out, "      0.064 ms  all_reduce"));
    /* Ring_4chunks.json gives scheduling-policy and peak-perf, not local-reduction-delay */
    assert_non_null(strstr(q->out, "scheduling-policy LIFO orders concurrent collectives only; peak-perf 900 TFLOPS read"));
    assert_null(strstr(q->out, "local-reduction-delay"));
    /* 16 ranks on an 8-NPU network: refused, naming both */
    q = test_shardsim(60.0, "replay", wl, "--world", "16", "--network", yml, "--check-only", NULL);
    expect(q, 1, NULL, "the trace has 16 ranks, the network only 8 NPUs");
    /* a --system file that is not JSON (here the .yml) is refused */
    expect(test_shardsim(60.0, "replay", wl, "--network", yml, "--system", yml, NULL), 1, NULL, "malformed JSON");
    const test_proc_t *p = replay(path, "--network", "no-such-preset");
    expect(p, 2, NULL, "unknown network preset");
}

/* ASTRA-sim HYBRID_DATA_MODEL with --network NET.yml: the model groups are
 * the network's first dimension (npus_count[0] = 2: ranks {0,1}, ...), the
 * data groups ranks 2 apart ({0,2,4,6}), as ASTRA-sim 1.0's Workload.cc
 * assigns them; a --first-dim that disagrees with the network is refused. */
static void test_replay_hybrid_first_dim_from_network(void **state) {
    (void)state;
    char yml[] = "/tmp/shardsim-net-XXXXXX";
    int fd = mkstemp(yml);
    assert_true(fd >= 0);
    const char *net = "topology: [ Ring, Switch ]\nnpus_count: [ 2, 4 ]\nbandwidth: [ 50.0, 25.0 ]\n"
                      "latency: [ 500.0, 700.0 ]\n";
    assert_int_equal(write(fd, net, strlen(net)), (ssize_t)strlen(net));
    close(fd);
    char wl[1024];
    snprintf(wl, sizeof wl, "%s/traces/astra-sim/text-workloads/MLP_HybridParallel_Data_Model.txt", test_shared_dir());
    const test_proc_t *p = test_shardsim(60.0, "replay", wl, "--world", "8", "--network", yml, "--check-only", NULL);
    expect(p, 0, "comm model0: 2 ranks [0,1]", NULL);
    assert_non_null(strstr(p->out, "comm model3: 2 ranks [6,7]"));
    assert_non_null(strstr(p->out, "comm data0: 4 ranks [0,2,4,6]"));
    assert_non_null(strstr(p->out, "comm data1: 4 ranks [1,3,5,7]"));
    /* the same value given explicitly is accepted; another one is refused, naming both */
    p = test_shardsim(60.0, "replay", wl, "--world", "8", "--network", yml, "--first-dim", "2", "--check-only", NULL);
    expect(p, 0, "comm model0: 2 ranks [0,1]", NULL);
    p = test_shardsim(60.0, "replay", wl, "--world", "8", "--network", yml, "--first-dim", "4", "--check-only", NULL);
    expect(p, 2, NULL, "--first-dim 4 disagrees with");
    assert_non_null(strstr(p->err, "first dimension has 2 NPUs"));
    unlink(yml);
}

/* calls of `op` in a table line "  <op>   <calls> ..." of `text`, or -1 */
static long table_calls(const char *text, const char *op) {
    char key[64];
    snprintf(key, sizeof key, "  %s ", op);
    const char *p = strstr(text, key);
    long n = -1;
    if (p) sscanf(p + strlen(key), "%ld", &n);
    return n;
}

/* train --trace records every collective: the recorded calls (counted by
 * replay over all ranks) equal N x the per-rank calls of train's summary,
 * which comes from the communicator's own counters, not the recorder. */
static void test_train_trace_round_trip(void **state) {
    (void)state;
    char dir[] = "/tmp/shardsim-rec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *argv[] = {(char *)SHS_BIN_PATH, "train", "--steps", "2", "--world", "4", "--strategy", "zero3",
                    "--trace", dir, NULL};
    test_run_process(argv, 120.0, &proc);
    expect(&proc, 0, "collectives of 4 ranks written to", NULL);
    const char *summary = strstr(proc.out, "\nsummary");
    assert_non_null(summary);
    long ag = table_calls(summary, "all_gather"), rs = table_calls(summary, "reduce_scatter"),
         ar = table_calls(summary, "all_reduce");
    assert_true(ag > 0 && rs > 0 && ar == 2);
    const test_proc_t *p = replay(dir, "--check-only", NULL);
    expect(p, 0, "consistency: OK", NULL);
    assert_int_equal(table_calls(p->out, "all_gather"), 4 * ag);
    assert_int_equal(table_calls(p->out, "reduce_scatter"), 4 * rs);
    assert_int_equal(table_calls(p->out, "all_reduce"), 4 * ar);
    /* ZeRO-3 reduce-scatters each of the 6 units once per step (README) */
    assert_int_equal(rs, 12);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "grep -c ' fwd/block2$' %s/rank1.trace > %s/count", dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/count", dir);
    FILE *f = fopen(cmd, "r");
    int n = 0;
    assert_int_equal(fscanf(f, "%d", &n), 1);
    fclose(f);
    assert_int_equal(n, 2); /* block2's forward all-gather, once per step */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Records of communicator `c` in `t`, all ranks; each (rank, c) must number
 * its calls 0, 1, ... except the world communicator, whose sequence numbers
 * 0 and 1 went to the strategy's two splits (not records). */
static long comm_records(const shs_trace_t *t, int c, int first_seq) {
    long n = 0;
    for (int r = 0; r < t->world; r++) {
        int64_t next = first_seq;
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            if (x->comm != c) continue;
            if (x->seq != next) fail_msg("rank %d comm %s: seq %lld, want %lld", r, t->comms[c].name,
                                         (long long)x->seq, (long long)next);
            next++;
            n++;
        }
    }
    return n;
}

static void assert_members(const shs_trace_t *t, const char *name, int a, int b) {
    int c = shs_trace_find_comm(t, name);
    if (c < 0) fail_msg("no communicator '%s' in the trace", name);
    assert_int_equal(t->comms[c].size, 2);
    assert_int_equal(t->comms[c].ranks[0], a);
    assert_int_equal(t->comms[c].ranks[1], b);
}

/* train --trace under hybrid sharding records the strategy's
 * sub-communicators too. World 4, G = 2, S = 2 steps, L = 2 layers, so
 * U = L + 2 = 4 units (embedding, 2 blocks, final layernorm). Per rank and
 * step: on its shard group 2U all-gathers (forward, and again in backward:
 * resharded after forward) and U reduce-scatters; on its replica group U
 * AVG all-reduces of its shard; on the world 1 loss all-reduce. Shard
 * groups are G consecutive ranks (the split at world seq 0, color rank/G),
 * replica groups the ranks equal mod G (seq 1, color rank%G). */
static void test_train_trace_hybrid_subcomms(void **state) {
    (void)state;
    enum { N = 4, G = 2, S = 2, L = 2, U = L + 2 };
    char dir[] = "/tmp/shardsim-rec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *argv[] = {(char *)SHS_BIN_PATH, "train", "--steps", "2", "--world", "4", "--strategy", "hybrid_shard",
                    "--shard-group-size", "2", "--layers", "2", "--channels", "32", "--heads", "2", "--context", "16",
                    "--trace", dir, NULL};
    test_run_process(argv, 120.0, &proc);
    expect(&proc, 0, "in 4 units", NULL);
    assert_non_null(strstr(proc.out, "trace: 136 collectives of 4 ranks written to"));
    const char *summary = strstr(proc.out, "\nsummary");
    assert_non_null(summary);
    /* the communicators' own counters, per rank */
    assert_int_equal(table_calls(summary, "all_gather"), 2 * U * S);
    assert_int_equal(table_calls(summary, "reduce_scatter"), U * S);
    assert_int_equal(table_calls(summary, "all_reduce"), (U + 1) * S);

    shs_trace_t *t;
    shs_trace_load_opts_t lo = {0};
    assert_int_equal(shs_trace_load(&t, dir, &lo), SHS_OK);
    assert_int_equal(t->world, N);
    assert_int_equal(t->ncomms, 1 + N / G + G);
    assert_int_equal(shs_trace_find_comm(t, "world"), 0);
    assert_members(t, "world/0@0", 0, 1);
    assert_members(t, "world/1@0", 2, 3);
    assert_members(t, "world/0@1", 0, 2);
    assert_members(t, "world/1@1", 1, 3);
    assert_int_equal(comm_records(t, 0, 2), N * S);
    for (int c = 1; c < t->ncomms; c++) {
        int shard = strstr(t->comms[c].name, "@0") != NULL;
        assert_int_equal(comm_records(t, c, 0), shard ? G * 3 * U * S : (N / G) * U * S);
    }
    assert_int_equal(shs_trace_num_records(t), N * (3 * U * S + U * S + S));
    /* ops by communicator: gathers and reduce-scatters on the shard groups,
     * all-reduces on the replica groups and the world; a sub-communicator's
     * calls carry the unit marker the trainer set on the world */
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            const char *name = t->comms[x->comm].name, *marker = shs_trace_str(t, x->marker);
            if (x->op == SHS_OP_ALL_REDUCE) assert_null(strstr(name, "@0"));
            else assert_non_null(strstr(name, "@0"));
            if (x->comm == 0) {
                assert_string_equal(marker, "loss");
                continue;
            }
            int bwd = strncmp(marker, "bwd/", 4) == 0;
            if (!(bwd || strncmp(marker, "fwd/", 4) == 0) || strlen(marker) < 5 ||
                (x->op != SHS_OP_ALL_GATHER && !bwd))
                fail_msg("rank %d %s seq %lld: marker '%s'", r, name, (long long)x->seq, marker);
        }
    shs_trace_free(t);

    const test_proc_t *p = replay(dir, NULL, NULL);
    expect(p, 0, "consistency: OK", NULL);
    assert_non_null(strstr(p->out, "5 communicators, 136 records"));
    assert_non_null(strstr(p->out, "replay on 4 threads"));
    const char *replayed = strstr(p->out, "replay on");
    assert_int_equal(table_calls(replayed, "all_gather"), N * 2 * U * S);
    assert_int_equal(table_calls(replayed, "reduce_scatter"), N * U * S);
    assert_int_equal(table_calls(replayed, "all_reduce"), N * (U + 1) * S);
    /* Chakra ET holds one communicator: refused before the replay runs */
    p = replay(dir, "--export-chakra", "/tmp/shardsim-hybrid-chakra");
    expect(p, 1, NULL, "only one (the world) can be written");
    assert_null(strstr(p->out, "replay on"));
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A directory of rank files: a stray file of another kind is skipped, but
 * a damaged rank file (named like the others) is read as their format and
 * its error names it. */
static void test_replay_damaged_rank_file(void **state) {
    (void)state;
    char dir[] = "/tmp/shardsim-dmg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp %s/traces/recorded/zero3/rank*.trace %s/ && echo notes > %s/README.md", SHS_SOURCE_DIR,
             dir, dir);
    assert_int_equal(system(cmd), 0);
    const test_proc_t *p = replay(dir, "--check-only", NULL);
    expect(p, 0, "(1 files of no known format skipped)", NULL);
    char rank2[512];
    snprintf(rank2, sizeof rank2, "%s/rank2.trace", dir);
    FILE *f = fopen(rank2, "w");
    assert_non_null(f);
    fputs("0 world 0 all_gather\n", f); /* the header is gone */
    fclose(f);
    p = replay(dir, "--check-only", NULL);
    expect(p, 1, NULL, "rank2.trace:1: not a shardsim trace");
    assert_non_null(strstr(p->err, "the other .trace files"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_nccl_log),
        cmocka_unit_test(test_replay_reports_mismatch),
        cmocka_unit_test(test_replay_bad_input),
        cmocka_unit_test(test_replay_world_beyond_files),
        cmocka_unit_test(test_train_trace_round_trip),
        cmocka_unit_test(test_train_trace_hybrid_subcomms),
        cmocka_unit_test(test_replay_network),
        cmocka_unit_test(test_replay_hybrid_first_dim_from_network),
        cmocka_unit_test(test_replay_damaged_rank_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
