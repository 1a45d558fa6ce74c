/* test_trace_diagnosis.c - what the consistency analysis says about an
 * inconsistent NCCL log or shardsim trace: a rank that skipped calls is
 * named with the op, the opCount as NCCL prints it (hexadecimal), the log
 * line of the call on a rank that has it and how many calls after it it
 * lacks; mismatches and deadlocks name the log lines of both calls.
 * Inputs are built here as NCCL's COLL lines (its documented format, see
 * ../shared/traces/README.md) whose line numbers follow by arithmetic from
 * how they are written; expected texts are written out by hand.
 * And no false alarm: the benchmark's large consistent log is clean.
 * Not the importers' parsing (test_trace_import*.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench/trace_bench.h"
#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"

#define RANKS 4
#define CALLS 20

/* How a rank's call i departs from the common one. */
typedef enum { SAME, SKIP, COUNT_999, DTYPE_BF16 } how_t;

/* A 4-rank log without Init lines (the rank is the [cudaDev]): CALLS
 * all-gathers of 64 * (i + 1) f32 elements, call i written as one line per
 * rank in rank order, so that with nothing skipped rank r's call i is
 * line 4 * i + r + 1. how(r, i) changes rank r's call i; a rank's opCount
 * counts its own calls, as NCCL's does. */
static char *nccl_log(how_t (*how)(int r, int i)) {
    size_t cap = (size_t)RANKS * CALLS * 200 + 1, n = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    int op_count[RANKS] = {0};
    for (int i = 0; i < CALLS; i++)
        for (int r = 0; r < RANKS; r++) {
            how_t h = how(r, i);
            if (h == SKIP) continue;
            n += (size_t)snprintf(b + n, cap - n,
                                  "node:%d:%d [%d] NCCL INFO AllGather: opCount %x sendbuff 0x7f0000 recvbuff "
                                  "0x7f8000 count %d datatype %d op 0 root 0 comm 0x55a0 [nranks=4] stream 0x66\n",
                                  100 + r, 100 + r, r, op_count[r]++, h == COUNT_999 ? 999 : 64 * (i + 1),
                                  h == DTYPE_BF16 ? 9 : 7);
        }
    return b;
}

/* The issues of a log, checked; keeps up to 8. */
static shs_trace_report_t check_log(const char *log) {
    shs_trace_input_t in = {.name = "job.log", .buf = log, .len = strlen(log), .rank = -1};
    shs_trace_t *t = NULL;
    if (shs_trace_load_buffer(&t, &in, SHS_TFMT_NCCL) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    shs_trace_free(t);
    return rep;
}

static how_t skip_middle(int r, int i) { return r == 2 && (i == 0xf || i == 0x10) ? SKIP : SAME; }
static how_t skip_end(int r, int i) { return r == 1 && i >= 18 ? SKIP : SAME; }
static how_t skip_one(int r, int i) { return r == 3 && i == 4 ? SKIP : SAME; }
static how_t bad_count(int r, int i) { return r == 3 && i == 5 ? COUNT_999 : SAME; }
static how_t bad_dtype(int r, int i) { return r == 1 && i == 7 ? DTYPE_BF16 : SAME; }

/* Rank 2 skips calls 0xf and 0x10 and goes on: its opCounts 0xf.. are the
 * others' 0x11..; rank 0's call 0xf is line 4 * 15 + 1 = 61. Then ranks
 * 0, 1 and 3 wait at opCount 0x12 for rank 2, which finished its 18 calls;
 * rank 0's call 0x12 is line 4 * 18 + 1 - 2 (the two lines rank 2 did not
 * write) = 71. */
static void test_skipped_in_the_middle(void **state) {
    (void)state;
    char *log = nccl_log(skip_middle);
    shs_trace_report_t rep = check_log(log);
    assert_true(rep.n >= 2);
    assert_string_equal(rep.issues[0].text,
                        "comm world: rank 2 skipped all_gather opCount 0xf (log line 61) and the 1 call after it, "
                        "which rank 0 issued");
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISSING);
    assert_int_equal(rep.issues[0].rank, 2);
    assert_int_equal(rep.issues[0].other, 0);
    assert_int_equal(rep.issues[0].seq, 0xf);
    assert_string_equal(rep.issues[1].text,
                        "rank 0 blocks forever in comm world opCount 0x12 all_gather(count=1216, dtype=f32, "
                        "bytes=4864/rank) (log line 71): rank 2 has finished its 18 calls");
    shs_trace_report_free(&rep);
    free(log);
}

/* Rank 1 stops before its calls 18 and 19: rank 0's call 0x12 is line 73. */
static void test_skipped_at_the_end(void **state) {
    (void)state;
    char *log = nccl_log(skip_end);
    shs_trace_report_t rep = check_log(log);
    assert_true(rep.n >= 1);
    assert_string_equal(rep.issues[0].text,
                        "comm world: rank 1 skipped all_gather opCount 0x12 (log line 73) and the 1 call after it, "
                        "which rank 0 issued");
    assert_int_equal(rep.issues[0].seq, 0x12);
    shs_trace_report_free(&rep);
    free(log);
}

/* One call skipped: no "and the ... after it"; rank 0's call 4 is line 17. */
static void test_one_call_skipped(void **state) {
    (void)state;
    char *log = nccl_log(skip_one);
    shs_trace_report_t rep = check_log(log);
    assert_true(rep.n >= 1);
    assert_string_equal(rep.issues[0].text, "comm world: rank 3 skipped all_gather opCount 0x4 (log line 17), which "
                                            "rank 0 issued");
    shs_trace_report_free(&rep);
    free(log);
}

/* Rank 3's call 5 (line 4 * 5 + 4 = 24) has count 999 where rank 0's
 * (line 21) has 64 * 6 = 384: a mismatch, not a skip (same number of calls). */
static void test_mismatched_count(void **state) {
    (void)state;
    char *log = nccl_log(bad_count);
    shs_trace_report_t rep = check_log(log);
    assert_int_equal(rep.total, 1);
    assert_string_equal(rep.issues[0].text,
                        "comm world opCount 0x5: count differs: rank 0 all_gather(count=384, dtype=f32, "
                        "bytes=1536/rank) (log line 21) vs rank 3 all_gather(count=999, dtype=f32, bytes=3996/rank) "
                        "(log line 24)");
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISMATCH);
    shs_trace_report_free(&rep);
    free(log);
}

/* Rank 1's call 7 (line 30) is bf16 where rank 0's (line 29) is f32. */
static void test_mismatched_dtype(void **state) {
    (void)state;
    char *log = nccl_log(bad_dtype);
    shs_trace_report_t rep = check_log(log);
    assert_int_equal(rep.total, 1);
    assert_string_equal(rep.issues[0].text,
                        "comm world opCount 0x7: dtype differs: rank 0 all_gather(count=512, dtype=f32, "
                        "bytes=2048/rank) (log line 29) vs rank 1 all_gather(count=512, dtype=bf16, bytes=1024/rank) "
                        "(log line 30)");
    shs_trace_report_free(&rep);
    free(log);
}

/* shardsim's text format numbers calls per communicator: a rank that skips
 * one leaves a gap in its seqs. Rank 1 has seq 0, 2 (lines 8, 9) where
 * rank 0 has seq 0, 1, 2 (lines 5, 6, 7), all the same all_reduce: named
 * by seq and line. */
static void test_shardsim_gap(void **state) {
    (void)state;
    const char *txt = "shardsim-trace 1\n"
                      "world 2\n"
                      "comm world 2 0,1\n"
                      "# rank comm seq op count dtype redop root peer tag bytes scope t_start_us t_end_us marker\n"
                      "0 world 0 all_reduce 4 f32 sum - - - 16 rank - - -\n"
                      "0 world 1 all_reduce 4 f32 sum - - - 16 rank - - -\n"
                      "0 world 2 all_reduce 4 f32 sum - - - 16 rank - - -\n"
                      "1 world 0 all_reduce 4 f32 sum - - - 16 rank - - -\n"
                      "1 world 2 all_reduce 4 f32 sum - - - 16 rank - - -\n";
    shs_trace_input_t in = {.name = "gap.trace", .buf = txt, .len = strlen(txt), .rank = -1};
    shs_trace_t *t = NULL;
    if (shs_trace_load_buffer(&t, &in, SHS_TFMT_SHARDSIM) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->ranks[1].recs[1].src_line, 9);
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    assert_true(rep.n >= 1);
    assert_string_equal(rep.issues[0].text, "comm world: rank 1 skipped all_reduce seq 1 (line 6), which rank 0 issued");
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* The NCCL benchmark's log (trace_bench.h) of 100 calls per rank on 64
 * ranks: each 49-call step is 36 calls on the rank's 8-rank shard group,
 * 12 on its replica group and 1 on the world, so 100 calls are 2 steps
 * and 2 shard calls: 8 groups x 74 + 8 x 24 + 2 = 786 instances. */
static void test_large_consistent_log_is_clean(void **state) {
    (void)state;
    shs_trace_bench_t b;
    if (shs_trace_bench_import_nccl(64 * 100 + 5, 64, NULL, &b) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(b.records, 6400);
    assert_int_equal(b.world, 64);
    assert_int_equal(b.comms, 17);
    assert_int_equal(b.issues, 0);
    assert_int_equal(b.coll_completed, 786);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skipped_in_the_middle), cmocka_unit_test(test_skipped_at_the_end),
        cmocka_unit_test(test_one_call_skipped),      cmocka_unit_test(test_mismatched_count),
        cmocka_unit_test(test_mismatched_dtype),      cmocka_unit_test(test_shardsim_gap),
        cmocka_unit_test(test_large_consistent_log_is_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
