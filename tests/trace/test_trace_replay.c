/* test_trace_replay.c - the functional replay's timing and `replay`'s
 * refusal of ranks beyond the world. A capped call's time is scaled to the
 * trace's size linearly: on a hand-written trace whose all_reduce and
 * all_gather calls exceed --max-bytes, each op's scaled time equals its
 * measured time x the closed-form ratio trace bytes / moved bytes (moved =
 * floor(cap / (itemsize x n)) elements x itemsize, n = ranks for
 * all_gather, 1 for all_reduce), in the library's stats and in the CLI's
 * report, which names the scaling; an uncapped broadcast keeps its
 * measured time. A text trace whose communicator names a rank beyond its
 * 'world' line, or a trace with more ranks than --world, exits 1 naming
 * the file. Every run has a wall-clock limit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_replay.h"

/* 2 ranks, cap 1 KiB:
 *   all_reduce 4096 f32 = 16384 B, capped to 1024/4 = 256 elements, 1024 B: ratio 16
 *   all_gather 1024 f32 = 4096 B per rank, whole 8192 B; capped to
 *     1024/(4 x 2) = 128 elements, 512 B per rank: ratio 8
 *   broadcast 16 f32 = 64 B: not capped */
#define CAP 1024
#define AR_COUNT 4096
#define AG_COUNT 1024
#define BC_COUNT 16
static const char *trace_text =
    "shardsim-trace 1\nworld 2\ncomm w 2 0,1\n"
    "0 w 0 all_reduce 4096 f32 sum - - - 16384 rank - - -\n"
    "1 w 0 all_reduce 4096 f32 sum - - - 16384 rank - - -\n"
    "0 w 1 all_gather 1024 f32 - - - - 4096 rank - - -\n"
    "1 w 1 all_gather 1024 f32 - - - - 4096 rank - - -\n"
    "0 w 2 all_reduce 4096 f32 sum - - - 16384 rank - - -\n"
    "1 w 2 all_reduce 4096 f32 sum - - - 16384 rank - - -\n"
    "0 w 3 broadcast 16 f32 - 0 - - 64 rank - - -\n"
    "1 w 3 broadcast 16 f32 - 0 - - 64 rank - - -\n"
    "0 w 4 all_gather 1024 f32 - - - - 4096 rank - - -\n"
    "1 w 4 all_gather 1024 f32 - - - - 4096 rank - - -\n";

/* trace bytes / moved bytes of one rank's part, from the cap */
static double ratio(uint64_t count, int n) {
    uint64_t moved = (CAP / (4 * (uint64_t)n)) * 4;
    return (double)(count * 4) / (double)moved;
}

static void test_capped_times_scale_by_trace_over_moved_bytes(void **state) {
    (void)state;
    shs_trace_t *t = NULL;
    shs_trace_input_t in = {.name = "scale.trace", .buf = trace_text, .len = strlen(trace_text), .rank = -1};
    if (shs_trace_load_buffer(&t, &in, SHS_TFMT_SHARDSIM) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_replay_opts_t o = {.max_bytes = CAP, .timeout_ms = 30000};
    shs_replay_stats_t s;
    if (shs_trace_replay(t, &o, &s) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(s.capped, 2 * 4); /* 2 ranks x (2 all_reduce + 2 all_gather) */
    assert_int_equal(s.timed_ranks, 2);
    const struct { shs_coll_op_t op; double ratio; uint64_t whole; } want[] = {
        {SHS_OP_ALL_REDUCE, ratio(AR_COUNT, 1), CAP},
        {SHS_OP_ALL_GATHER, ratio(AG_COUNT, 2), 2 * (CAP / 8) * 4},
        {SHS_OP_BROADCAST, 1.0, BC_COUNT * 4},
    };
    assert_true(want[0].ratio == 16.0 && want[1].ratio == 8.0);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int k = want[i].op;
        double m = s.call_seconds[k], sc = s.scaled_seconds[k];
        assert_int_equal(s.ranks[k], 2);
        assert_true(m > 0);
        if (fabs(sc - m * want[i].ratio) > 1e-12 * sc)
            fail_msg("%s: scaled %.9g s, want measured %.9g s x %g", shs_coll_op_name(want[i].op), sc, m, want[i].ratio);
        /* nccl-tests bytes: the whole buffer per call, summed over ranks and calls */
        uint64_t ncalls = s.calls[k] / 2;
        assert_true(s.alg_bytes[k] == (double)(2 * ncalls * want[i].whole));
    }
    /* busbw factors at n = 2: all_reduce 2(n-1)/n = 1, all_gather (n-1)/n = 1/2, broadcast 1 */
    assert_true(s.bus_bytes[SHS_OP_ALL_REDUCE] == s.alg_bytes[SHS_OP_ALL_REDUCE]);
    assert_true(s.bus_bytes[SHS_OP_ALL_GATHER] == s.alg_bytes[SHS_OP_ALL_GATHER] / 2);
    shs_trace_free(t);
}

/* shardsim replay PATH [a1 [a2]] (a NULL ends the arguments). */
static const test_proc_t *replay(const char *path, const char *a1, const char *a2) {
    return test_shardsim(60.0, "replay", path, a1, a2, NULL);
}

static const char *write_file(const char *name, const char *text) { return test_tmp_write(name, text, strlen(text)); }

/* The timing row of `op` in the report: measured and scaled ms. */
static void row(const char *out, const char *op, double *measured, double *scaled) {
    const char *head = strstr(out, "measured ms");
    if (!head) fail_msg("no timing table in:\n%s", out);
    char key[40];
    snprintf(key, sizeof key, "\n  %s ", op);
    const char *r = strstr(head, key);
    if (!r || sscanf(r + strlen(key), "%lf %lf", measured, scaled) != 2) fail_msg("no '%s' timing row in:\n%s", op, out);
}

static void test_cli_reports_scaled_times(void **state) {
    (void)state;
    const test_proc_t *p = replay(write_file("scale.trace", trace_text), "--max-bytes", "1KiB");
    if (p->exit_code != 0) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
    assert_non_null(strstr(p->out, "8 calls capped at 1.00 KiB"));
    assert_non_null(strstr(p->out, "scaled ms = each capped call's measured time x trace bytes / moved bytes"));
    assert_non_null(strstr(p->out, "linear extrapolation"));
    const struct { const char *op; double ratio; } want[] = {
        {"all_reduce", ratio(AR_COUNT, 1)}, {"all_gather", ratio(AG_COUNT, 2)}, {"broadcast", 1.0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double m, sc;
        row(p->out, want[i].op, &m, &sc);
        /* printed to 1e-6 ms: rounding of both columns */
        if (fabs(sc - m * want[i].ratio) > 0.5e-6 * (1 + want[i].ratio) + 1e-12)
            fail_msg("%s: scaled %.6f ms, want %.6f x %g\n%s", want[i].op, sc, m, want[i].ratio, p->out);
    }
    double m, sc;
    row(p->out, "total", &m, &sc);
    assert_true(sc > m);
    /* without a cap: measured only, no scaled column */
    p = replay(write_file("scale.trace", trace_text), NULL, NULL);
    assert_int_equal(p->exit_code, 0);
    assert_non_null(strstr(p->out, "measured ms"));
    assert_null(strstr(p->out, "scaled ms"));
}

static void test_cli_refuses_ranks_beyond_the_world(void **state) {
    (void)state;
    const char *path = write_file("beyond.trace", "shardsim-trace 1\nworld 2\ncomm g 2 0,5\n"
                                                  "0 g 0 all_reduce 1 f32 sum - - - 4 rank - - -\n");
    const test_proc_t *p = replay(path, NULL, NULL);
    char want[600];
    snprintf(want, sizeof want, "%s:3: communicator 'g' names rank 5, beyond the world of 2 ranks", path);
    if (p->exit_code != 1 || !strstr(p->err, want) || strstr(p->out, "never issues"))
        fail_msg("want exit 1 and '%s'; got exit %d\n%s\n%s", want, p->exit_code, p->out, p->err);
    /* --world N below the ranks a trace names */
    path = write_file("four.trace", "shardsim-trace 1\nworld 4\ncomm w 4 0,1,2,3\n");
    p = replay(path, "--world", "2");
    if (p->exit_code != 1 || !strstr(p->err, "the trace has 4 ranks, more than --world 2"))
        fail_msg("want exit 1 for --world 2; got exit %d\n%s\n%s", p->exit_code, p->out, p->err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capped_times_scale_by_trace_over_moved_bytes),
        cmocka_unit_test(test_cli_reports_scaled_times),
        cmocka_unit_test(test_cli_refuses_ranks_beyond_the_world),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
