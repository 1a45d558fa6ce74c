/* test_trace_perfetto.c - Chrome / Perfetto trace JSON export, read back
 * with jansson: a recorded trace's slices per rank, their times and args
 * against the recorded text files themselves (parsed here line by line,
 * not through the trace loader); a trace without times laid out by the
 * network estimate (hand-computed) or sequentially; `replay
 * --export-perfetto` end to end. Without jansson only the refusal is
 * checked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_perfetto.h"

#define RECORDED SHS_SOURCE_DIR "/traces/recorded/zero3"

static char out_path[64];

static int setup(void **state) {
    (void)state;
    snprintf(out_path, sizeof out_path, "/tmp/shardsim-perfetto-%d.json", (int)getpid());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(out_path);
    return 0;
}

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

/* One record line of a shardsim-trace file, as its fields read. */
typedef struct {
    int rank;
    long seq;
    char comm[32], op[32], dtype[16], marker[64];
    unsigned long long count, bytes;
    double t0, t1;
} line_t;

/* Record lines of RECORDED/rank<r>.trace (header, comm and comment lines skipped). */
static int read_lines(int r, line_t *out, int max) {
    char path[512], buf[512];
    snprintf(path, sizeof path, "%s/rank%d.trace", RECORDED, r);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    int n = 0;
    while (fgets(buf, sizeof buf, f)) {
        line_t l;
        char redop[16], root[8], peer[8], tag[8], scope[8];
        if (sscanf(buf, "%d %31s %ld %31s %llu %15s %15s %7s %7s %7s %llu %7s %lf %lf %63s", &l.rank, l.comm, &l.seq,
                   l.op, &l.count, l.dtype, redop, root, peer, tag, &l.bytes, scope, &l.t0, &l.t1, l.marker) != 15)
            continue;
        assert_true(n < max);
        out[n++] = l;
    }
    fclose(f);
    return n;
}

static json_t *load_json(const char *path) {
    json_error_t e;
    json_t *root = json_load_file(path, 0, &e);
    if (!root) fail_msg("%s:%d: %s", path, e.line, e.text);
    return root;
}

static void expect_str(json_t *obj, const char *key, const char *want) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0)
        fail_msg("args.%s: want '%s', got '%s'", key, want, json_is_string(v) ? json_string_value(v) : "(not a string)");
}

static void expect_int(json_t *obj, const char *key, long long want) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) != want)
        fail_msg("%s: want %lld, got %lld", key, want, json_is_integer(v) ? (long long)json_integer_value(v) : -1LL);
}

static void test_recorded_trace_slices_match_the_files(void **state) {
    (void)state;
    shs_trace_t *t;
    if (shs_trace_load(&t, RECORDED, NULL) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_perfetto_opts_t po = {0};
    if (shs_trace_export_perfetto(t, out_path, &po) != SHS_OK) fail_msg("%s", shs_last_error());
    /* traces/README.md: ZeRO-3 at world 4, 2 steps of 12 all-gathers + 6 reduce-scatters + the loss */
    assert_int_equal(po.slices, 4 * 38);
    assert_int_equal(po.recorded, 4 * 38);
    shs_trace_free(t);

    json_t *root = load_json(out_path);
    json_t *ev = json_object_get(root, "traceEvents");
    assert_true(json_is_array(ev));
    static line_t lines[4][64];
    int nlines[4], seen[4] = {0}, names[4] = {0};
    double last_ts[4] = {-1, -1, -1, -1};
    for (int r = 0; r < 4; r++) {
        nlines[r] = read_lines(r, lines[r], 64);
        assert_int_equal(nlines[r], 38);
    }
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        assert_non_null(ph);
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        assert_true(pid >= 0 && pid < 4);
        expect_int(e, "tid", pid);
        if (strcmp(ph, "M") == 0) {
            const char *name = json_string_value(json_object_get(e, "name"));
            if (strcmp(name, "thread_name") == 0) {
                char want[16];
                snprintf(want, sizeof want, "rank %d", pid);
                expect_str(json_object_get(e, "args"), "name", want);
                names[pid]++;
            }
            continue;
        }
        assert_string_equal(ph, "X");
        assert_true(seen[pid] < nlines[pid]);
        const line_t *l = &lines[pid][seen[pid]++];
        double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
        /* times in microseconds, as the file states them (3 decimals) */
        if (fabs(ts - l->t0) > 1e-6 || fabs(dur - (l->t1 - l->t0)) > 1e-6)
            fail_msg("rank %d seq %ld: ts %.6f dur %.6f, file %.3f..%.3f", pid, l->seq, ts, dur, l->t0, l->t1);
        assert_true(ts >= last_ts[pid]);
        last_ts[pid] = ts;
        expect_str(e, "name", l->op);
        json_t *args = json_object_get(e, "args");
        assert_true(json_is_object(args));
        expect_str(args, "comm", l->comm);
        expect_int(args, "seq", l->seq);
        expect_str(args, "op", l->op);
        expect_int(args, "count", (long long)l->count);
        expect_str(args, "dtype", l->dtype);
        expect_int(args, "bytes", (long long)l->bytes);
        expect_str(args, "marker", l->marker);
        expect_str(args, "time", "recorded");
    }
    for (int r = 0; r < 4; r++) {
        assert_int_equal(seen[r], nlines[r]);
        assert_int_equal(names[r], 1);
    }
    json_decref(root);
}

/* An 8-rank world with two 1 MiB all-reduces per rank and no times. */
static shs_trace_t *untimed_trace(void) {
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 8), SHS_OK);
    int c;
    assert_int_equal(shs_trace_add_comm(t, "world", 8, NULL, &c), SHS_OK);
    for (int r = 0; r < 8; r++)
        for (int k = 0; k < 2; k++) {
            shs_trace_rec_t x = shs_trace_rec_init();
            x.rank = r;
            x.comm = c;
            x.seq = k;
            x.op = SHS_OP_ALL_REDUCE;
            x.dtype = SHS_F32;
            x.redop = SHS_SUM;
            x.count = 262144;
            x.bytes = 1048576;
            assert_int_equal(shs_trace_append(t, &x), SHS_OK);
        }
    return t;
}

/* The X events of rank `pid`, in file order: ts and dur into arrays. */
static int slices_of(json_t *root, int pid, double *ts, double *dur, int max, const char **time_src) {
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(json_object_get(root, "traceEvents"), i, e) {
        if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0) continue;
        if (json_integer_value(json_object_get(e, "pid")) != pid) continue;
        assert_true(n < max);
        ts[n] = json_number_value(json_object_get(e, "ts"));
        dur[n] = json_number_value(json_object_get(e, "dur"));
        *time_src = json_string_value(json_object_get(json_object_get(e, "args"), "time"));
        assert_true(json_is_null(json_object_get(json_object_get(e, "args"), "marker")));
        n++;
    }
    return n;
}

static void test_untimed_trace_network_estimate_and_sequential(void **state) {
    (void)state;
    shs_trace_t *t = untimed_trace();
    shs_net_t net;
    assert_int_equal(shs_net_preset("ring-50", &net), SHS_OK);
    shs_perfetto_opts_t po = {.net = &net, .algo = SHS_ALGO_RING};
    if (shs_trace_export_perfetto(t, out_path, &po) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(po.estimated, 16);
    assert_int_equal(po.recorded, 0);
    json_t *root = load_json(out_path);
    double ts[4], dur[4];
    const char *src = NULL;
    /* ring all-reduce of 1 MiB on 8 ranks at 50 GB/s, 500 ns: 2*7*(500e-9 + 1048576/(8*50e9)) s = 43.70016 us */
    for (int r = 0; r < 8; r++) {
        assert_int_equal(slices_of(root, r, ts, dur, 4, &src), 2);
        assert_true(fabs(dur[0] - 43.70016) < 1e-6 && fabs(dur[1] - 43.70016) < 1e-6);
        assert_true(fabs(ts[0]) < 1e-9 && fabs(ts[1] - 43.70016) < 1e-6);
    }
    assert_string_equal(src, "estimate (ring, ring-50)");
    json_decref(root);

    po = (shs_perfetto_opts_t){0};
    if (shs_trace_export_perfetto(t, out_path, &po) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(po.sequential, 16);
    root = load_json(out_path);
    assert_int_equal(slices_of(root, 7, ts, dur, 4, &src), 2);
    assert_true(fabs(ts[0]) < 1e-9 && fabs(dur[0] - 1) < 1e-9 && fabs(ts[1] - 1) < 1e-9 && fabs(dur[1] - 1) < 1e-9);
    assert_string_equal(src, "sequential");
    json_decref(root);
    shs_trace_free(t);
}

/* Kineto events at epoch microseconds (as the profiler writes them) go
 * through the export and come back exactly: each slice's ts is the very
 * double the Kineto file's ts parses to, ts + dur the file's ts + dur,
 * and reading them back as the Kineto reader does (us x 1e-6) gives the
 * imported record's start and end bit for bit. 15 significant digits
 * moved these times by up to 5 us; for the third, start x 1e6 is not the
 * file's ts (a neighbouring double is). */
static void test_epoch_times_round_trip_exactly(void **state) {
    (void)state;
    static const char kin[] =
        "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}, \"traceEvents\": [\n"
        "{\"ph\": \"X\", \"name\": \"record_param_comms\", \"ts\": 1700000000123456.789, \"dur\": 12.345, \"args\": "
        "{\"Collective name\": \"allreduce\", \"In msg nelems\": 4, \"dtype\": \"Float\"}},\n"
        "{\"ph\": \"X\", \"name\": \"record_param_comms\", \"ts\": 1700000000999999.999, \"dur\": 0.001, \"args\": "
        "{\"Collective name\": \"allreduce\", \"In msg nelems\": 4, \"dtype\": \"Float\"}},\n"
        "{\"ph\": \"X\", \"name\": \"record_param_comms\", \"ts\": 1700000131105868.8, \"dur\": 3.5, \"args\": "
        "{\"Collective name\": \"allreduce\", \"In msg nelems\": 4, \"dtype\": \"Float\"}},\n"
        "{\"ph\": \"X\", \"name\": \"record_param_comms\", \"ts\": 1712345678901234.5, \"dur\": 1000000.25, \"args\": "
        "{\"Collective name\": \"allreduce\", \"In msg nelems\": 4, \"dtype\": \"Float\"}}]}\n";
    /* the file's numbers as doubles (the compiler and jansson both round to nearest) */
    const double want_ts[4] = {1700000000123456.789, 1700000000999999.999, 1700000131105868.8, 1712345678901234.5};
    const double want_dur[4] = {12.345, 0.001, 3.5, 1000000.25};
    shs_trace_input_t in = {.name = "epoch.json", .buf = kin, .len = sizeof kin - 1, .rank = 0};
    shs_trace_t *t = NULL;
    if (shs_trace_load_buffer(&t, &in, SHS_TFMT_KINETO) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(t->ranks[0].n, 4);
    if (shs_trace_export_perfetto(t, out_path, NULL) != SHS_OK) fail_msg("%s", shs_last_error());
    json_t *root = load_json(out_path);
    double ts[4], dur[4];
    const char *src = NULL;
    assert_int_equal(slices_of(root, 0, ts, dur, 4, &src), 4);
    for (int i = 0; i < 4; i++) {
        const shs_trace_rec_t *r = &t->ranks[0].recs[i];
        double end_file = want_ts[i] + want_dur[i], end_back = ts[i] + dur[i];
        assert_memory_equal(&ts[i], &want_ts[i], sizeof(double));
        assert_memory_equal(&end_back, &end_file, sizeof(double));
        double s = ts[i] * 1e-6, e = (ts[i] + dur[i]) * 1e-6;
        assert_memory_equal(&s, &r->t_start, sizeof(double));
        assert_memory_equal(&e, &r->t_end, sizeof(double));
    }
    json_decref(root);
    shs_trace_free(t);
}

static void test_cli_export(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    char *argv[] = {(char *)SHS_BIN_PATH, "replay", SHS_SOURCE_DIR "/traces/recorded/ddp", "--check-only",
                    "--export-perfetto", out_path, NULL};
    test_run_process(argv, 60.0, p);
    if (p->exit_code != 0 || !strstr(p->out, "Chrome/Perfetto trace JSON, 4 tracks, 16 slices: 16 recorded times"))
        fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", p->exit_code, p->out, p->err);
    json_t *root = load_json(out_path);
    expect_str(json_object_get(root, "otherData"), "source_format", "shardsim");
    json_decref(root);
    char *bad[] = {(char *)SHS_BIN_PATH, "replay", SHS_SOURCE_DIR "/traces/recorded/ddp", "--check-only",
                   "--export-perfetto", "/nonexistent-dir/x.json", NULL};
    test_run_process(bad, 60.0, p);
    if (p->exit_code != 1 || !strstr(p->err, "/nonexistent-dir/x.json: cannot create"))
        fail_msg("exit %d\nstderr:\n%s", p->exit_code, p->err);
    free(p);
}

#else

static void test_refused_without_jansson(void **state) {
    (void)state;
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 1), SHS_OK);
    assert_int_equal(shs_trace_export_perfetto(t, out_path, NULL), SHS_UNSUPPORTED);
    assert_non_null(strstr(shs_last_error(), "jansson"));
    shs_trace_free(t);
}

#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_recorded_trace_slices_match_the_files),
        cmocka_unit_test(test_untimed_trace_network_estimate_and_sequential),
        cmocka_unit_test(test_epoch_times_round_trip_exactly),
        cmocka_unit_test(test_cli_export),
#else
        cmocka_unit_test(test_refused_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
