/* test_trace_horovod.c - the Horovod timeline importer on hand-written
 * timelines laid out as horovod/common/timeline.cc writes them (the later
 * writer closing the array after every event, the earlier one never
 * closing it): allreduce, allgather and broadcast with the records worked
 * out by hand from the events (count = product of the shape, bytes =
 * count x dtype size, times = the top-level B and E), the world from the
 * readiness ticks or --world, detection, replay --check and the Perfetto
 * export end to end; refusals: a truncated event (with its line and
 * column), an unknown dtype, an E without a B, no ticks and no --world.
 * Without jansson only the refusal is checked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"

/* The later writer: pid 0's start time, one tensor allreduced with
 * negotiation (ticks of ranks 0, 2, 1, 3) and activities, a cycle marker,
 * a second tensor allgathered from the response cache (no negotiation),
 * and the array closed. */
static const char closed[] =
    "[\n"
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"start_time_since_epoch_in_micros\":1700000000000000}},\n"
    "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"sort_index\": 0}},\n"
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"grad w1\"}},\n"
    "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"sort_index\": 1}},\n"
    "{\"ph\": \"B\", \"name\": \"NEGOTIATE_ALLREDUCE\", \"ts\": 100, \"pid\": 1},\n"
    "{\"ph\": \"X\", \"name\": \"0\", \"ts\": 101, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"X\", \"name\": \"2\", \"ts\": 105, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"X\", \"name\": \"1\", \"ts\": 110, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"X\", \"name\": \"3\", \"ts\": 120, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"E\", \"ts\": 121, \"pid\": 1},\n"
    "{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 122, \"pid\": 1},\n"
    "{\"ph\": \"B\", \"name\": \"QUEUE\", \"ts\": 123, \"pid\": 1},\n"
    "{\"ph\": \"E\", \"ts\": 130, \"pid\": 1},\n"
    "{\"ph\": \"B\", \"name\": \"NCCL_ALLREDUCE\", \"ts\": 130, \"pid\": 1},\n"
    "{\"ph\": \"E\", \"ts\": 170, \"pid\": 1},\n"
    "{\"ph\": \"E\", \"ts\": 171, \"pid\": 1, \"args\": {\"dtype\": \"float32\", \"shape\": \"[256, 1024]\"}},\n"
    "{\"ph\": \"i\", \"name\": \"CYCLE_START\", \"ts\": 180, \"s\": \"g\"},\n"
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"args\": {\"name\": \"emb\"}},\n"
    "{\"ph\": \"B\", \"name\": \"ALLGATHER\", \"ts\": 200, \"pid\": 2},\n"
    "{\"ph\": \"B\", \"name\": \"MPI_ALLGATHER\", \"ts\": 210, \"pid\": 2},\n"
    "{\"ph\": \"E\", \"ts\": 250, \"pid\": 2},\n"
    "{\"ph\": \"E\", \"ts\": 260, \"pid\": 2, \"args\": {\"dtype\": \"int64\", \"shape\": \"[8, 3]\"}}]";

/* The earlier writer: "[", every event followed by ",\n", no "]"; a
 * broadcast of a float16 scalar and one of a [3] int32 on 2 ranks, and an
 * allreduce still running when the file was read. */
static const char open_ended[] =
    "[\n"
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"step\"}},\n"
    "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"sort_index\": 1}},\n"
    "{\"ph\": \"B\", \"name\": \"NEGOTIATE_BROADCAST\", \"ts\": 5, \"pid\": 1},\n"
    "{\"ph\": \"X\", \"name\": \"1\", \"ts\": 6, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"X\", \"name\": \"0\", \"ts\": 7, \"pid\": 1, \"dur\": 0},\n"
    "{\"ph\": \"E\", \"ts\": 8, \"pid\": 1},\n"
    "{\"ph\": \"B\", \"name\": \"BROADCAST\", \"ts\": 9, \"pid\": 1},\n"
    "{\"ph\": \"E\", \"ts\": 19, \"pid\": 1, \"args\": {\"dtype\": \"float16\", \"shape\": \"[]\"}},\n"
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"args\": {\"name\": \"ids\"}},\n"
    "{\"ph\": \"B\", \"name\": \"BROADCAST\", \"ts\": 20, \"pid\": 2},\n"
    "{\"ph\": \"E\", \"ts\": 24, \"pid\": 2, \"args\": {\"dtype\": \"int32\", \"shape\": \"[3]\"}},\n"
    "{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 30, \"pid\": 1},\n";

static shs_status_t load_text(shs_trace_t **t, const char *name, const char *text, int world, shs_trace_format_t f) {
    shs_trace_input_t in = {.name = name, .buf = text, .len = strlen(text), .rank = -1, .world = world};
    return shs_trace_load_buffer(t, &in, f);
}

#ifdef SHS_HAVE_JANSSON

/* Every rank's records equal `want` field by field (rank r, seq by
 * position, comm 0, times bit for bit). */
static void expect_all_ranks(const shs_trace_t *t, const shs_trace_rec_t *want, size_t n) {
    for (int r = 0; r < t->world; r++) {
        assert_int_equal(t->ranks[r].n, n);
        for (size_t i = 0; i < n; i++) {
            const shs_trace_rec_t *g = &t->ranks[r].recs[i], *w = &want[i];
            assert_int_equal(g->rank, r);
            assert_int_equal(g->seq, (int64_t)i);
            assert_int_equal(g->comm, 0);
            assert_int_equal(g->op, w->op);
            assert_int_equal(g->dtype, w->dtype);
            assert_int_equal(g->redop, w->redop);
            assert_int_equal(g->root, SHS_TRACE_NONE);
            assert_int_equal(g->peer, SHS_TRACE_NONE);
            assert_int_equal(g->tag, SHS_TRACE_NONE);
            assert_int_equal(g->scope, w->scope);
            assert_int_equal(g->count, w->count);
            assert_int_equal(g->bytes, w->bytes);
            assert_memory_equal(&g->t_start, &w->t_start, sizeof(double));
            assert_memory_equal(&g->t_end, &w->t_end, sizeof(double));
            assert_int_equal(g->marker, w->marker);
        }
    }
}

static void test_closed_array_allreduce_and_allgather(void **state) {
    (void)state;
    shs_trace_t *t = NULL;
    assert_int_equal(shs_trace_detect(closed, strlen(closed)), SHS_TFMT_HOROVOD);
    if (load_text(&t, "timeline.json", closed, 0, SHS_TFMT_UNKNOWN) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_string_equal(t->format, "horovod");
    assert_int_equal(t->world, 4); /* ticks named ranks 0..3 */
    assert_int_equal(t->ncomms, 1);
    assert_int_equal(t->comms[0].size, 4);
    shs_trace_rec_t w[2];
    /* allreduce float32 [256, 1024]: 262144 elements, 1 MiB, 122 .. 171 us */
    w[0] = shs_trace_rec_init();
    w[0].op = SHS_OP_ALL_REDUCE;
    w[0].dtype = SHS_F32;
    w[0].redop = SHS_SUM;
    w[0].count = 262144;
    w[0].bytes = 1048576;
    w[0].t_start = 122 * 1e-6;
    w[0].t_end = 171 * 1e-6;
    w[0].marker = 1; /* the tensor name, its blank as '_' */
    assert_string_equal(shs_trace_str(t, 1), "grad_w1");
    /* allgather int64 [8, 3] output: 24 elements, 192 bytes in all; NCCL's
     * count is one rank's part, 24 / 4 = 6; 200 .. 260 us */
    w[1] = shs_trace_rec_init();
    w[1].op = SHS_OP_ALL_GATHER;
    w[1].dtype = SHS_I64;
    w[1].scope = SHS_BYTES_TOTAL;
    w[1].count = 6;
    w[1].bytes = 192;
    w[1].t_start = 200 * 1e-6;
    w[1].t_end = 260 * 1e-6;
    w[1].marker = 2;
    assert_string_equal(shs_trace_str(t, 2), "emb");
    expect_all_ranks(t, w, 2);
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    assert_int_equal(rep.n, 0);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* Horovod's DataType enum names its types HOROVOD_FLOAT32, HOROVOD_INT64
 * (horovod/common/message.h); a timeline that spells them so reads as the
 * one spelling DataType_Name's float32, int64. A spelling of neither kind
 * is refused. */
static void test_enum_dtype_spelling(void **state) {
    (void)state;
    char text[sizeof closed + 64];
    snprintf(text, sizeof text, "%s", closed);
    char *p = strstr(text, "\"float32\""), *q;
    assert_non_null(p);
    memmove(p + 16, p + 8, strlen(p + 8) + 1); /* "float32" -> "HOROVOD_FLOAT32" */
    memcpy(p, "\"HOROVOD_FLOAT32\"", 17);
    assert_non_null(q = strstr(text, "\"int64\""));
    memmove(q + 14, q + 6, strlen(q + 6) + 1);
    memcpy(q, "\"HOROVOD_INT64\"", 15);
    shs_trace_t *a = NULL, *b = NULL;
    if (load_text(&a, "enum.json", text, 0, SHS_TFMT_UNKNOWN) != SHS_OK) fail_msg("%s", shs_last_error());
    if (load_text(&b, "timeline.json", closed, 0, SHS_TFMT_UNKNOWN) != SHS_OK) fail_msg("%s", shs_last_error());
    for (int r = 0; r < 4; r++)
        for (size_t i = 0; i < 2; i++) {
            assert_int_equal(a->ranks[r].recs[i].dtype, b->ranks[r].recs[i].dtype);
            assert_int_equal(a->ranks[r].recs[i].bytes, b->ranks[r].recs[i].bytes);
        }
    assert_int_equal(a->ranks[0].recs[0].dtype, SHS_F32);
    shs_trace_free(a);
    shs_trace_free(b);
    memcpy(strstr(text, "HOROVOD_FLOAT32"), "HOROVOD_Float32", 15);
    assert_int_equal(load_text(&a, "mixed.json", text, 0, SHS_TFMT_UNKNOWN), SHS_PARSE);
    if (!strstr(shs_last_error(), "unknown dtype 'HOROVOD_Float32'")) fail_msg("%s", shs_last_error());
}

static void test_open_ended_array_broadcasts(void **state) {
    (void)state;
    shs_trace_t *t = NULL;
    assert_int_equal(shs_trace_detect(open_ended, strlen(open_ended)), SHS_TFMT_HOROVOD);
    if (load_text(&t, "old.json", open_ended, 0, SHS_TFMT_HOROVOD) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->world, 2);
    shs_trace_rec_t w[2];
    /* float16 scalar: 1 element, 2 bytes, 9 .. 19 us; int32 [3]: 12 bytes,
     * 20 .. 24 us; the allreduce begun at 30 us never ended: no record */
    w[0] = shs_trace_rec_init();
    w[0].op = SHS_OP_BROADCAST;
    w[0].dtype = SHS_F16;
    w[0].count = 1;
    w[0].bytes = 2;
    w[0].t_start = 9 * 1e-6;
    w[0].t_end = 19 * 1e-6;
    w[0].marker = 1;
    w[1] = shs_trace_rec_init();
    w[1].op = SHS_OP_BROADCAST;
    w[1].dtype = SHS_I32;
    w[1].count = 3;
    w[1].bytes = 12;
    w[1].t_start = 20 * 1e-6;
    w[1].t_end = 24 * 1e-6;
    w[1].marker = 2;
    assert_string_equal(shs_trace_str(t, 1), "step");
    assert_string_equal(shs_trace_str(t, 2), "ids");
    expect_all_ranks(t, w, 2);
    shs_trace_free(t);
}

/* Refused: message names the file and the place. */
static void expect_refusal(const char *text, int world, const char *a, const char *b) {
    shs_trace_t *t = NULL;
    shs_status_t st = load_text(&t, "bad.json", text, world, SHS_TFMT_HOROVOD);
    assert_null(t);
    if (st != SHS_PARSE || !strstr(shs_last_error(), a) || (b && !strstr(shs_last_error(), b)))
        fail_msg("status %d, message: %s (wanted '%s' and '%s')", st, shs_last_error(), a, b ? b : "");
}

static void test_refusals(void **state) {
    (void)state;
    /* the closed file cut inside the allgather's last event: line 23 */
    char cut[sizeof closed];
    memcpy(cut, closed, sizeof closed);
    char *last = strstr(cut, "{\"ph\": \"E\", \"ts\": 260");
    assert_non_null(last);
    last[30] = 0;
    expect_refusal(cut, 0, "bad.json:23:", "truncated");
    /* an unknown dtype, named with its tensor and line */
    char *ty = malloc(sizeof closed + 8);
    assert_non_null(ty);
    strcpy(ty, closed);
    char *f = strstr(ty, "\"int64\"");
    memcpy(f, "\"int99\"", 7);
    expect_refusal(ty, 0, "bad.json:23: tensor 'emb' (pid 2): unknown dtype 'int99'", NULL);
    free(ty);
    expect_refusal("[{\"ph\": \"E\", \"ts\": 1, \"pid\": 4}]", 0, "bad.json:1: tensor '?' (pid 4): \"E\" event without an open", NULL);
    expect_refusal("[{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 1, \"pid\": 1},\n{\"ph\": \"E\", \"ts\": 2, \"pid\": 1}]", 0,
                   "bad.json: no readiness ticks", "--world");
    expect_refusal("[{\"ph\": \"B\", \"name\": \"NEGOTIATE_ALLREDUCE\", \"ts\": 1, \"pid\": 1},\n"
                   "{\"ph\": \"X\", \"name\": \"-1\", \"ts\": 2, \"pid\": 1}]", 0, "bad.json:2:", "tick '-1' is not a rank");
    expect_refusal("[{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 1e300, \"pid\": 1}]", 0, "bad.json:1:", "\"ts\"");
    expect_refusal("[{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 1, \"pid\": 1},\n"
                   "{\"ph\": \"E\", \"ts\": 2, \"pid\": 1, \"args\": {\"dtype\": \"float32\", \"shape\": \"[2, x]\"}}]", 4,
                   "bad.json:2:", "shape");
}

/* No ticks: --world gives the world (rule of the importer's header). */
static void test_world_without_ticks(void **state) {
    (void)state;
    shs_trace_t *t = NULL;
    const char *x = "[{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 1, \"pid\": 1},\n"
                    "{\"ph\": \"E\", \"ts\": 2, \"pid\": 1, \"args\": {\"dtype\": \"float64\", \"shape\": \"[5]\"}}]";
    if (load_text(&t, "w.json", x, 3, SHS_TFMT_HOROVOD) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->world, 3);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(t->ranks[r].n, 1);
        assert_int_equal(t->ranks[r].recs[0].bytes, 40);
    }
    shs_trace_free(t);
}

/* replay --check and --export-perfetto on a timeline file, end to end */
static void test_cli_replay_and_perfetto(void **state) {
    (void)state;
    const char *in = test_tmp_write("timeline.json", closed, strlen(closed));
    char inp[512], outp[512];
    snprintf(inp, sizeof inp, "%s", in);
    snprintf(outp, sizeof outp, "%s/timeline.perfetto.json", test_tmpdir);
    const test_proc_t *p = test_shardsim(60, "replay", inp, "--check-only", "--export-perfetto", outp, NULL);
    if (p->exit_code != 0 || !strstr(p->out, "format horovod, 4 ranks, 1 communicator, 8 records") ||
        !strstr(p->out, "4 tracks, 8 slices: 8 recorded times") || !strstr(p->out, "consistency: OK"))
        fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", p->exit_code, p->out, p->err);
    test_assert_file_starts(outp, "{\"traceEvents\":[");
    p = test_shardsim(60, "replay", inp, "--format", "horovod", "--check-only", "--world", "2", NULL);
    if (p->exit_code != 1 || !strstr(p->err, "4 ranks, more than --world 2"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
}

#else

static void test_refused_without_jansson(void **state) {
    (void)state;
    shs_trace_t *t = NULL;
    assert_int_equal(load_text(&t, "timeline.json", closed, 0, SHS_TFMT_HOROVOD), SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "timeline.json"));
    assert_non_null(strstr(shs_last_error(), "jansson"));
    (void)open_ended;
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_closed_array_allreduce_and_allgather),
        cmocka_unit_test(test_enum_dtype_spelling),
        cmocka_unit_test(test_open_ended_array_broadcasts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_world_without_ticks),
        cmocka_unit_test(test_cli_replay_and_perfetto),
#else
        cmocka_unit_test(test_refused_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
