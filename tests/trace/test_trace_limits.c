/* test_trace_limits.c - what the fuzz targets' hardening pinned down:
 * absurd sizes are refused by shs_trace_append whichever reader produced
 * them (the text reader had no byte limit; Kineto's element limit let
 * elements x item size past 1 PiB), error texts that wrap the previous
 * error are not garbled (vsnprintf onto its own argument was undefined),
 * a per-rank size made total on a communicator grown later saturates
 * instead of wrapping, and the in-memory entry point the fuzzers use
 * (shs_trace_load_buffer) detects, forces and numbers like the file
 * loader. The text reader's fast decimal path must return strtod's double
 * bit for bit; the import benchmark's trace loads back whole and
 * consistent. A text trace's 'world N' bounds every rank it names: a
 * communicator member, a record's rank or a peer at N or beyond is refused
 * with file:line (it used to grow the world silently). Expected values are
 * the inputs' own numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench/trace_bench.h"
#include "shardsim/trace_import.h"
#include "trace/trace_util.h"

static shs_status_t load_text(const char *name, const char *text, shs_trace_format_t fmt, shs_trace_t **t) {
    shs_trace_input_t in = {.name = name, .buf = text, .len = strlen(text), .rank = -1, .world = 0};
    return shs_trace_load_buffer(t, &in, fmt);
}

static void expect_refused(const char *name, const char *text, shs_trace_format_t fmt, const char *needle) {
    shs_trace_t *t = NULL;
    shs_status_t st = load_text(name, text, fmt, &t);
    if (st == SHS_OK) fail_msg("%s: accepted, want an error with '%s'", name, needle);
    assert_null(t);
    if (!strstr(shs_last_error(), needle)) fail_msg("%s: want '%s' in '%s'", name, needle, shs_last_error());
}

#define HDR "shardsim-trace 1\nworld 2\ncomm w 2 0,1\n"

static void test_text_sizes_above_the_limit_are_refused(void **state) {
    (void)state;
    /* 2^63 bytes per rank: all_gather's whole buffer (x2) used to wrap to 0 (count 0 = unknown, so the
     * bytes alone are judged; a count that disagrees with them is refused earlier, test_trace_import_refusals) */
    expect_refused("huge-part.trace", HDR "0 w 0 all_gather 0 f32 - - - - 9223372036854775808 rank - - -\n",
                   SHS_TFMT_SHARDSIM, "huge-part.trace:4: rank 0: all_gather of 0 elements, 9223372036854775808 bytes");
    /* 2^62 f32 elements: count x 4 = 2^64 */
    expect_refused("huge-count.trace", HDR "1 w 0 all_reduce 4611686018427387904 f32 sum - - - 4 rank - - -\n",
                   SHS_TFMT_SHARDSIM, "huge-count.trace:4: rank 1: all_reduce of 4611686018427387904 elements");
    /* 2^49 bytes per rank is under 1 PiB, but all_gather's whole buffer on 4 ranks is 2^51 */
    expect_refused("huge-total.trace",
                   "shardsim-trace 1\nworld 4\ncomm w 4 0,1,2,3\n"
                   "0 w 0 all_gather 0 - - - - - 562949953421312 rank - - -\n",
                   SHS_TFMT_SHARDSIM, "above the 1125899906842624-byte limit");
    /* exactly 1 PiB in all is accepted */
    shs_trace_t *t;
    if (load_text("at-limit.trace", HDR "0 w 0 all_gather 0 - - - - - 562949953421312 rank - - -\n",
                  SHS_TFMT_SHARDSIM, &t) != SHS_OK)
        fail_msg("%s", shs_last_error());
    assert_int_equal(shs_trace_rec_bytes(t, &t->ranks[0].recs[0], SHS_BYTES_TOTAL), (uint64_t)1 << 50);
    shs_trace_free(t);
}

static void test_text_ranks_beyond_the_declared_world_are_refused(void **state) {
    (void)state;
    expect_refused("grp.trace", "shardsim-trace 1\nworld 2\ncomm g 2 0,5\n", SHS_TFMT_SHARDSIM,
                   "grp.trace:3: communicator 'g' names rank 5, beyond the world of 2 ranks declared at line 2");
    expect_refused("rec.trace", HDR "2 w 0 all_reduce 1 f32 sum - - - 4 rank - - -\n", SHS_TFMT_SHARDSIM,
                   "rec.trace:4: rank '2' is not in 0..1");
    expect_refused("peer.trace", HDR "0 w 0 send 1 f32 - - 7 0 4 rank - - -\n", SHS_TFMT_SHARDSIM,
                   "peer.trace:4: rank 0: send peer 7 outside the world of 2 ranks");
    /* a communicator before the world line, then a smaller world */
    expect_refused("late.trace", "shardsim-trace 1\ncomm g 2 0,5\nworld 2\n", SHS_TFMT_SHARDSIM,
                   "late.trace:3: 'world 2', but rank 5 is already named");
    /* without a world line the communicators define it, as before */
    shs_trace_t *t;
    if (load_text("nodecl.trace", "shardsim-trace 1\ncomm g 2 0,5\n", SHS_TFMT_SHARDSIM, &t) != SHS_OK)
        fail_msg("%s", shs_last_error());
    assert_int_equal(t->world, 6);
    shs_trace_free(t);
}

/* A byte count that is not whole elements of the record's dtype (0 bytes
 * for 4 f32 elements: an element size of 0; 15 bytes) used to be taken. */
static void test_text_bytes_not_whole_elements_are_refused(void **state) {
    (void)state;
    expect_refused("z.trace", HDR "0 w 0 all_reduce 4 f32 sum - - - 0 rank - - -\n", SHS_TFMT_SHARDSIM,
                   "z.trace:4: byte count 0 does not hold 4 whole f32 elements of 4 bytes");
    expect_refused("o.trace", HDR "0 w 0 all_gather 4 bf16 - - - - 15 rank - - -\n", SHS_TFMT_SHARDSIM,
                   "o.trace:4: byte count 15 does not hold 4 whole bf16 elements of 2 bytes");
    shs_trace_t *t = NULL; /* count unknown (0) with whole elements: taken */
    if (load_text("u.trace", HDR "0 w 0 all_reduce 0 f32 sum - - - 16 rank - - -\n", SHS_TFMT_SHARDSIM, &t) != SHS_OK)
        fail_msg("%s", shs_last_error());
    assert_int_equal(t->ranks[0].recs[0].bytes, 16);
    shs_trace_free(t);
}

static void test_wrapped_error_text_is_intact(void **state) {
    (void)state;
#ifdef SHS_HAVE_JANSSON
    /* 10^15 f32 elements: under the element limit, 4 x 10^15 bytes above the byte limit */
    expect_refused("k.json",
                   "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"record_param_comms\",\"ts\":1,\"dur\":1,\"args\":"
                   "{\"Collective name\":\"allreduce\",\"dtype\":\"Float\",\"In msg nelems\":1000000000000000,"
                   "\"Group size\":2}}]}",
                   SHS_TFMT_KINETO,
                   "k.json: traceEvents[0]: rank 0: all_reduce of 1000000000000000 elements, 4000000000000000 bytes");
#endif
    shs_set_error(SHS_PARSE, "inner %d", 42);
    shs_set_error(SHS_PARSE, "outer: %s (%s)", shs_last_error(), "x");
    assert_string_equal(shs_last_error(), "outer: inner 42 (x)");
}

static void test_total_saturates_on_a_grown_comm(void **state) {
    (void)state;
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 0), SHS_OK);
    int c;
    assert_int_equal(shs_trace_grow_identity_comm(t, "world", 1, &c), SHS_OK);
    shs_trace_rec_t r = shs_trace_rec_init();
    r.op = SHS_OP_ALL_GATHER;
    r.comm = c;
    r.bytes = (uint64_t)1 << 49; /* fine on 1 rank */
    assert_int_equal(shs_trace_append(t, &r), SHS_OK);
    assert_int_equal(shs_trace_grow_identity_comm(t, "world", SHS_TRACE_MAX_WORLD, &c), SHS_OK);
    /* 2^49 x 2^16 = 2^65 does not fit: saturate, not wrap to 0 */
    assert_true(shs_trace_rec_bytes(t, &t->ranks[0].recs[0], SHS_BYTES_TOTAL) == UINT64_MAX);
    assert_int_equal(shs_trace_rec_bytes(t, &t->ranks[0].recs[0], SHS_BYTES_PER_RANK), (uint64_t)1 << 49);
    shs_trace_free(t);
}

static void test_load_buffer_detects_forces_and_numbers(void **state) {
    (void)state;
    const char *astra = "DATA\n2\nl0 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1\nl1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 32 1\n";
    shs_trace_t *t;
    shs_trace_input_t in = {.name = "w.txt", .buf = astra, .len = strlen(astra), .rank = -1, .world = 3};
    if (shs_trace_load_buffer(&t, &in, SHS_TFMT_UNKNOWN) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_string_equal(t->format, "astra");
    assert_int_equal(t->world, 3);
    /* weight gradients in reverse layer order: l1 (32 B) then l0 (64 B), numbered 0, 1 */
    for (int r = 0; r < 3; r++) {
        assert_int_equal(t->ranks[r].n, 2);
        assert_int_equal(t->ranks[r].recs[0].bytes, 32);
        assert_int_equal(t->ranks[r].recs[0].seq, 0);
        assert_int_equal(t->ranks[r].recs[1].bytes, 64);
        assert_int_equal(t->ranks[r].recs[1].seq, 1);
    }
    shs_trace_free(t);
    /* forced: the NCCL reader skips lines that are not NCCL's, so nothing is
     * read: refused, not an empty trace of --world ranks */
    in.name = "w.log";
    t = NULL;
    assert_int_equal(shs_trace_load_buffer(&t, &in, SHS_TFMT_NCCL), SHS_PARSE);
    assert_null(t);
    if (!strstr(shs_last_error(), "w.log: has no communication record of any rank (empty, or not nccl output)"))
        fail_msg("%s", shs_last_error());
    expect_refused("junk.bin", "\x01\x02 not a trace", SHS_TFMT_UNKNOWN, "junk.bin: unrecognized trace format");
}

static void test_fast_decimals_equal_strtod(void **state) {
    (void)state;
    uint64_t x = 88172645463325252ull; /* xorshift64 */
    char buf[64];
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int frac = (int)(x % 8), digits = 1 + (int)((x >> 8) % 15);
        uint64_t m = (x >> 16) % 1000000000000000ull;
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)m);
        size_t len = strlen(buf) > (size_t)digits ? (size_t)digits : strlen(buf);
        buf[len] = 0;
        if (frac && frac < (int)len) { /* put a point frac digits from the end */
            memmove(buf + len - frac + 1, buf + len - frac, (size_t)frac + 1);
            buf[len - frac] = '.';
        }
        double fast, ref = strtod(buf, NULL);
        assert_int_equal(shs__parse_double(buf, strlen(buf), &fast), 0);
        if (memcmp(&fast, &ref, sizeof ref) != 0) fail_msg("'%s': %.17g vs strtod %.17g", buf, fast, ref);
    }
    /* forms the fast path leaves to strtod, and refusals */
    double v;
    assert_int_equal(shs__parse_double("1e3", 3, &v), 0);
    assert_true(v == 1000.0);
    assert_int_equal(shs__parse_double("1234567890.1234567", 18, &v), 0); /* 17 digits */
    assert_true(v == strtod("1234567890.1234567", NULL));
    assert_int_equal(shs__parse_double("-2.5", 4, &v), 0);
    assert_true(v == -2.5);
    assert_int_equal(shs__parse_double("1.", 2, &v), 0);
    assert_true(v == 1.0);
    assert_int_equal(shs__parse_double("1.2.3", 5, &v), -1);
    assert_int_equal(shs__parse_double("inf", 3, &v), -1);
    assert_int_equal(shs__parse_double("", 0, &v), -1);
}

static void test_import_bench_trace_loads_whole_and_consistent(void **state) {
    (void)state;
    shs_trace_bench_t b;
    if (shs_trace_bench_import(64 * 100 + 5, 64, NULL, &b) != SHS_OK) fail_msg("%s", shs_last_error());
    /* 100 per rank (the 5 left over are not generated); 8 shard groups, 8 replica groups, the world */
    assert_int_equal(b.records, 6400);
    assert_int_equal(b.world, 64);
    assert_int_equal(b.files, 64);
    assert_int_equal(b.comms, 17);
    assert_int_equal(b.issues, 0);
    /* per rank 100 = 2 steps of 49 + 2 forward all-gathers: 12+24 shard calls and 12 replica calls and 1
     * loss per step -> per step 8 x 36 + 8 x 12 + 1 = 385 instances, then 8 x 2 -> 2 x 385 + 16 = 786 */
    assert_int_equal(b.coll_completed, 786);
    assert_true(b.file_bytes > 6400 * 40);
    assert_true(b.load_s > 0 && b.check_s >= 0);
    assert_int_equal(shs_trace_bench_import(10, 64, NULL, &b), SHS_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_sizes_above_the_limit_are_refused),
        cmocka_unit_test(test_text_ranks_beyond_the_declared_world_are_refused),
        cmocka_unit_test(test_text_bytes_not_whole_elements_are_refused),
        cmocka_unit_test(test_wrapped_error_text_is_intact),
        cmocka_unit_test(test_total_saturates_on_a_grown_comm),
        cmocka_unit_test(test_load_buffer_detects_forces_and_numbers),
        cmocka_unit_test(test_fast_decimals_equal_strtod),
        cmocka_unit_test(test_import_bench_trace_loads_whole_and_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
