/* test_trace.c - the trace model, shardsim's text format, the recorder hook
 * and the consistency analysis on hand-written cases whose defects are
 * known by construction (traces/cases/ and traces built here). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/trace.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_net.h"
#include "shardsim/trace_record.h"
#include "harness.h"
#include "thread_world.h"

static shs_trace_t *load_case(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/cases/%s", SHS_SOURCE_DIR, name);
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, NULL) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static shs_trace_t *from_text(const char *text) {
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 0), SHS_OK);
    if (shs_trace_read_text(t, text, strlen(text), "mem") != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static void test_text_round_trip(void **state) {
    (void)state;
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 3), SHS_OK);
    int sub, ranks[2] = {2, 0};
    assert_int_equal(shs_trace_add_comm(t, "world", 3, NULL, NULL), SHS_OK);
    assert_int_equal(shs_trace_add_comm(t, "pair", 2, ranks, &sub), SHS_OK);
    shs_trace_rec_t r = shs_trace_rec_init();
    r.rank = 2; r.comm = sub; r.seq = 7; r.op = SHS_OP_BROADCAST; r.count = 3; r.dtype = SHS_BF16; r.root = 1;
    r.bytes = 6; r.t_start = 1.5e-3; r.t_end = 2.25e-3; r.marker = shs_trace_intern(t, "fwd/block3");
    assert_int_equal(shs_trace_append(t, &r), SHS_OK);
    shs_trace_rec_t s = shs_trace_rec_init();
    s.rank = 0; s.comm = 0; s.op = SHS_OP_SEND; s.peer = 1; s.tag = 9; s.bytes = 100;
    assert_int_equal(shs_trace_append(t, &s), SHS_OK);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(shs_trace_write_text(t, f, -1), SHS_OK);
    fclose(f);
    shs_trace_t *u = from_text(buf);
    assert_int_equal(u->world, 3);
    assert_int_equal(u->ncomms, 2);
    int p = shs_trace_find_comm(u, "pair");
    assert_int_equal(u->comms[p].ranks[0], 2);
    assert_int_equal(u->comms[p].ranks[1], 0);
    assert_int_equal(u->ranks[2].n, 1);
    const shs_trace_rec_t *q = &u->ranks[2].recs[0];
    assert_int_equal(q->seq, 7);
    assert_int_equal(q->op, SHS_OP_BROADCAST);
    assert_int_equal(q->dtype, SHS_BF16);
    assert_int_equal(q->root, 1);
    assert_int_equal(q->redop, SHS_TRACE_NONE);
    assert_int_equal(q->bytes, 6);
    assert_true(q->t_start > 1.4999e-3 && q->t_start < 1.5001e-3);
    assert_string_equal(shs_trace_str(u, q->marker), "fwd/block3");
    const shs_trace_rec_t *w = &u->ranks[0].recs[0];
    assert_int_equal(w->op, SHS_OP_SEND);
    assert_int_equal(w->peer, 1);
    assert_int_equal(w->tag, 9);
    assert_true(w->t_start < 0);
    /* writing the re-read trace gives the same text (diff-friendly, stable) */
    char *buf2 = NULL;
    size_t len2 = 0;
    f = open_memstream(&buf2, &len2);
    assert_int_equal(shs_trace_write_text(u, f, -1), SHS_OK);
    fclose(f);
    assert_string_equal(buf, buf2);
    free(buf);
    free(buf2);
    shs_trace_free(t);
    shs_trace_free(u);
}

static void expect_parse_error(const char *text, const char *needle) {
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 0), SHS_OK);
    assert_int_equal(shs_trace_read_text(t, text, strlen(text), "bad.trace"), SHS_PARSE);
    if (!strstr(shs_last_error(), needle)) fail_msg("want '%s' in: %s", needle, shs_last_error());
    shs_trace_free(t);
}

static void test_text_errors_name_file_and_line(void **state) {
    (void)state;
    const char *h = "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n";
    char b[512];
    expect_parse_error("nonsense\n", "bad.trace:1:");
    snprintf(b, sizeof b, "%s0 world 0 all_gather 4 f32 - - - - 16 rank - - -\n0 world 1 frobnicate 4\n", h);
    expect_parse_error(b, "bad.trace:5:");
    snprintf(b, sizeof b, "%s0 world 0 all_gather 4 f99 - - - - 16 rank - - -\n", h);
    expect_parse_error(b, "unknown dtype 'f99'");
    snprintf(b, sizeof b, "%s5 world 0 all_gather 4 f32 - - - - 16 rank - - -\n", h);
    expect_parse_error(b, "bad.trace:4: rank '5'");
    snprintf(b, sizeof b, "%s0 nope 0 all_gather 4 f32 - - - - 16 rank - - -\n", h);
    expect_parse_error(b, "communicator 'nope' is not declared");
    expect_parse_error("shardsim-trace 1\ncomm world 2 0,0\n", "listed twice");
    expect_parse_error("shardsim-trace 1\ncomm world 2 0,99999999\n", "bad.trace:2:");
    snprintf(b, sizeof b, "%s0 world 0 all_gather 99999999999999999999999 f32 - - - - 16 rank - - -\n", h);
    expect_parse_error(b, "bad count");
    snprintf(b, sizeof b, "%s0 world 0 all_gather 4 f32 - - - - 16 rank 10.5 3 -\n", h);
    expect_parse_error(b, "bad.trace:4: the call ends (3 us) before it starts (10.5 us)");
    /* split is a communicator op, no trace record */
    snprintf(b, sizeof b, "%s0 world 0 split 0 - - - - - 0 rank - - -\n", h);
    expect_parse_error(b, "bad.trace:4: unknown op 'split'");
}

/* One op table for communicators and traces: the names of the text format
 * (file header of trace.h, NCCL's collective names), each parsed back to its
 * op, and the kinds the trace checks rely on. */
static void test_op_table_names_and_kinds(void **state) {
    (void)state;
    static const struct { shs_coll_op_t op; const char *name; int coll, p2p; } want[] = {
        {SHS_OP_ALL_GATHER, "all_gather", 1, 0}, {SHS_OP_REDUCE_SCATTER, "reduce_scatter", 1, 0},
        {SHS_OP_ALL_REDUCE, "all_reduce", 1, 0}, {SHS_OP_BROADCAST, "broadcast", 1, 0},
        {SHS_OP_REDUCE, "reduce", 1, 0},         {SHS_OP_BARRIER, "barrier", 1, 0},
        {SHS_OP_SPLIT, "split", 0, 0},           {SHS_OP_ALL_TO_ALL, "all_to_all", 1, 0},
        {SHS_OP_ALL_TO_ALLV, "all_to_allv", 1, 0}, {SHS_OP_GATHER, "gather", 1, 0},
        {SHS_OP_SCATTER, "scatter", 1, 0},       {SHS_OP_SEND, "send", 0, 1},
        {SHS_OP_RECV, "recv", 0, 1},             {SHS_OP_WAIT, "wait", 0, 0},
    };
    assert_int_equal(SHS_NUM_OPS, sizeof want / sizeof want[0]);
    assert_int_equal(SHS_NUM_COLL_OPS, 9); /* all_gather .. recv: what a communicator runs */
    assert_true((int)SHS_OP_SEND < SHS_NUM_COLL_OPS && (int)SHS_OP_RECV < SHS_NUM_COLL_OPS);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(shs_coll_op_name(want[i].op), want[i].name);
        shs_coll_op_t op = SHS_NUM_OPS;
        assert_int_equal(shs_coll_op_parse(want[i].name, &op), 0);
        assert_int_equal(op, want[i].op);
        assert_int_equal(shs_coll_op_is_collective(want[i].op), want[i].coll);
        assert_int_equal(shs_coll_op_is_p2p(want[i].op), want[i].p2p);
    }
    shs_coll_op_t op = SHS_OP_WAIT;
    assert_int_equal(shs_coll_op_parse("allgather", &op), -1);
    assert_int_equal(shs_coll_op_parse(NULL, &op), -1);
    assert_int_equal(op, SHS_OP_WAIT);
    assert_string_equal(shs_coll_op_name(SHS_NUM_OPS), "invalid");
    assert_string_equal(shs_coll_op_name((shs_coll_op_t)-1), "invalid");
    assert_int_equal(shs_coll_op_is_collective(SHS_NUM_OPS), 0);
}

/* ---- recorder ------------------------------------------------------------ */

static shs_trace_recorder_t *g_rec;

static shs_status_t record_fn(tw_rank_t *r) {
    SHS_CHECK(shs_trace_recorder_attach(g_rec, r->comm, r->rank, NULL));
    float buf[8 * 4] = {0};
    shs_comm_set_marker(r->comm, "fwd/block0");
    SHS_CHECK(shs_all_gather(buf + r->rank * 8, buf, 8, SHS_F32, r->comm));
    shs_comm_set_marker(r->comm, "bwd/block0");
    SHS_CHECK(shs_reduce_scatter(buf, buf + r->rank * 8, 8, SHS_F32, SHS_AVG, r->comm));
    shs_comm_set_marker(r->comm, "optim");
    SHS_CHECK(shs_all_reduce(buf, buf, 3, SHS_BF16, SHS_SUM, r->comm));
    return SHS_OK;
}

/* Run fn on 4 ranks with g_rec recording, and return the trace. */
static shs_trace_t *record_4_ranks(tw_fn fn) {
    assert_int_equal(shs_trace_recorder_create(&g_rec, 4), SHS_OK);
    tw_rank_t *ranks = tw_run(4, 10000, fn, NULL);
    tw_assert_all(ranks, 4, SHS_OK);
    free(ranks);
    shs_trace_t *t;
    assert_int_equal(shs_trace_recorder_finish(g_rec, &t), SHS_OK);
    shs_trace_recorder_free(g_rec);
    return t;
}

static void test_recorder_records_every_call(void **state) {
    (void)state;
    shs_trace_t *t = record_4_ranks(record_fn);
    assert_int_equal(t->world, 4);
    assert_int_equal(t->ncomms, 1);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(t->ranks[r].n, 3);
        const shs_trace_rec_t *x = t->ranks[r].recs;
        assert_int_equal(x[0].op, SHS_OP_ALL_GATHER);
        assert_int_equal(x[0].count, 8);
        assert_int_equal(x[0].bytes, 32);
        assert_int_equal(shs_trace_rec_bytes(t, &x[0], SHS_BYTES_TOTAL), 128);
        assert_int_equal(x[1].op, SHS_OP_REDUCE_SCATTER);
        assert_int_equal(x[1].redop, SHS_AVG);
        assert_int_equal(x[2].op, SHS_OP_ALL_REDUCE);
        assert_int_equal(x[2].dtype, SHS_BF16);
        assert_int_equal(x[2].bytes, 6);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(x[k].seq, k);
            assert_true(x[k].t_start >= 0 && x[k].t_end >= x[k].t_start);
        }
        assert_string_equal(shs_trace_str(t, x[0].marker), "fwd/block0");
        assert_string_equal(shs_trace_str(t, x[1].marker), "bwd/block0");
        assert_string_equal(shs_trace_str(t, x[2].marker), "optim");
    }
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    assert_int_equal(rep.total, 0);
    assert_int_equal(rep.coll_completed, 3);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* Splits of a recorded communicator are recorded too: rows = rank/2
 * (key rank), cols = rank%2 (key -rank, so each col lists its higher rank
 * first), three = ranks 0..2 (rank 3 passes no color), and sub = a split of
 * a row. A child without a marker of its own takes its parent's. */
static shs_status_t record_split_fn(tw_rank_t *r) {
    SHS_CHECK(shs_trace_recorder_attach(g_rec, r->comm, r->rank, NULL));
    shs_comm_t *rows = NULL, *cols = NULL, *three = NULL, *sub = NULL;
    float buf[16] = {0};
    shs_status_t st = shs_comm_split(r->comm, r->rank / 2, r->rank, &rows);
    if (st == SHS_OK) st = shs_comm_split(r->comm, r->rank % 2, -r->rank, &cols);
    if (st == SHS_OK) st = shs_comm_split(r->comm, r->rank == 3 ? SHS_SPLIT_NOCOLOR : 0, r->rank, &three);
    shs_comm_set_marker(r->comm, "bwd/block0");
    if (st == SHS_OK) st = shs_all_reduce(buf, buf, 5, SHS_F32, SHS_SUM, rows);
    if (st == SHS_OK) st = shs_comm_split(rows, 0, 0, &sub);
    if (st == SHS_OK) st = shs_all_reduce(buf, buf, 7, SHS_F32, SHS_SUM, sub);
    if (st == SHS_OK) st = shs_all_gather(buf, buf + 8, 3, SHS_F32, cols);
    if (st == SHS_OK && three) {
        shs_comm_set_marker(three, "own");
        st = shs_all_reduce(buf, buf, 2, SHS_F32, SHS_SUM, three);
    }
    shs_comm_set_marker(r->comm, "optim");
    if (st == SHS_OK) st = shs_barrier(r->comm);
    shs_comm_destroy(sub);
    shs_comm_destroy(three);
    shs_comm_destroy(cols);
    shs_comm_destroy(rows);
    return st;
}

static void test_recorder_records_split_communicators(void **state) {
    (void)state;
    shs_trace_t *t = record_4_ranks(record_split_fn);
    /* named "<parent>/<color>@<split's seq on the parent>", in this order
     * whichever rank got there first; members are global ranks by local rank */
    static const struct {
        const char *name;
        int size, ranks[3];
    } want[] = {{"world", 4, {0, 1, 2}},      {"world/0@0", 2, {0, 1}},     {"world/1@0", 2, {2, 3}},
                {"world/0@1", 2, {2, 0}},     {"world/1@1", 2, {3, 1}},     {"world/0@2", 3, {0, 1, 2}},
                {"world/0@0/0@1", 2, {0, 1}}, {"world/1@0/0@1", 2, {2, 3}}};
    assert_int_equal(t->ncomms, 8);
    for (int c = 0; c < 8; c++) {
        assert_string_equal(t->comms[c].name, want[c].name);
        assert_int_equal(t->comms[c].size, want[c].size);
        for (int i = 0; i < want[c].size && i < 3; i++) assert_int_equal(t->comms[c].ranks[i], want[c].ranks[i]);
    }
    for (int r = 0; r < 4; r++) {
        /* rows, sub, cols, three (not rank 3), then the world's barrier at
         * seq 3: the three splits took 0..2 and are not records */
        int n = r == 3 ? 4 : 5;
        assert_int_equal(t->ranks[r].n, n);
        const shs_trace_rec_t *x = t->ranks[r].recs;
        assert_string_equal(t->comms[x[0].comm].name, r < 2 ? "world/0@0" : "world/1@0");
        assert_int_equal(x[0].count, 5);
        assert_string_equal(t->comms[x[1].comm].name, r < 2 ? "world/0@0/0@1" : "world/1@0/0@1");
        assert_int_equal(x[1].count, 7);
        assert_string_equal(t->comms[x[2].comm].name, r % 2 ? "world/1@1" : "world/0@1");
        assert_int_equal(x[2].op, SHS_OP_ALL_GATHER);
        for (int k = 0; k < 3; k++) {
            assert_int_equal(x[k].seq, 0);
            assert_string_equal(shs_trace_str(t, x[k].marker), "bwd/block0");
        }
        if (r < 3) {
            assert_string_equal(t->comms[x[3].comm].name, "world/0@2");
            assert_string_equal(shs_trace_str(t, x[3].marker), "own");
        }
        assert_int_equal(x[n - 1].comm, 0);
        assert_int_equal(x[n - 1].op, SHS_OP_BARRIER);
        assert_int_equal(x[n - 1].seq, 3);
        assert_string_equal(shs_trace_str(t, x[n - 1].marker), "optim");
    }
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    assert_int_equal(rep.total, 0);
    assert_int_equal(rep.coll_completed, 2 + 2 + 2 + 1 + 1);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* ---- analysis on hand-written defects ---------------------------------- */

static shs_trace_report_t check(shs_trace_t *t) {
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 32), SHS_OK);
    return rep;
}

static void test_skipped_op_is_missing_at_its_seq(void **state) {
    (void)state;
    shs_trace_t *t = load_case("skip-op.trace");
    shs_trace_report_t rep = check(t);
    assert_true(rep.total >= 1);
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISSING);
    assert_int_equal(rep.issues[0].seq, 1);
    assert_int_equal(rep.issues[0].rank, 2);
    assert_int_equal(rep.issues[0].other, 0);
    /* ranks 0, 1, 3 wait at seq 1 for rank 2, which waits at seq 2: all four blocked */
    assert_int_equal(rep.ranks_blocked, 4);
    assert_int_equal(rep.coll_completed, 1);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

static void test_count_mismatch_names_ranks_and_seq(void **state) {
    (void)state;
    shs_trace_t *t = load_case("count-mismatch.trace");
    shs_trace_report_t rep = check(t);
    assert_int_equal(rep.total, 1);
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISMATCH);
    assert_int_equal(rep.issues[0].seq, 1);
    assert_int_equal(rep.issues[0].rank, 3);
    assert_int_equal(rep.issues[0].other, 0);
    assert_non_null(strstr(rep.issues[0].text, "count differs"));
    assert_non_null(strstr(rep.issues[0].text, "count=2048"));
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

static void test_dtype_mismatch_names_ranks_and_seq(void **state) {
    (void)state;
    shs_trace_t *t = load_case("dtype-mismatch.trace");
    shs_trace_report_t rep = check(t);
    assert_int_equal(rep.total, 1);
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISMATCH);
    assert_int_equal(rep.issues[0].seq, 2);
    assert_int_equal(rep.issues[0].rank, 1);
    assert_non_null(strstr(rep.issues[0].text, "dtype differs"));
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

static void test_unmatched_p2p(void **state) {
    (void)state;
    shs_trace_t *t = load_case("p2p-unmatched.trace");
    shs_trace_report_t rep = check(t);
    assert_int_equal(rep.total, 2);
    assert_int_equal(rep.ranks_blocked, 1);
    int dead = 0, unsent = 0;
    for (size_t i = 0; i < rep.n; i++) {
        if (rep.issues[i].kind == SHS_ISSUE_DEADLOCK && rep.issues[i].rank == 1 && rep.issues[i].other == 0) dead++;
        if (rep.issues[i].kind == SHS_ISSUE_UNMATCHED_SEND && rep.issues[i].rank == 0 && rep.issues[i].other == 1) unsent++;
    }
    assert_int_equal(dead, 1);
    assert_int_equal(unsent, 1);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* A cross-communicator cycle: rank 0 calls A then B, rank 1 calls B then A;
 * each sequence alone is consistent, the execution deadlocks. */
static void test_cross_comm_order_deadlock(void **state) {
    (void)state;
    shs_trace_t *t = from_text("shardsim-trace 1\nworld 2\ncomm A 2 0,1\ncomm B 2 0,1\n"
                               "0 A 0 barrier 0 - - - - - 0 rank - - -\n0 B 0 barrier 0 - - - - - 0 rank - - -\n"
                               "1 B 0 barrier 0 - - - - - 0 rank - - -\n1 A 0 barrier 0 - - - - - 0 rank - - -\n");
    shs_trace_report_t rep = check(t);
    assert_int_equal(rep.ranks_blocked, 2);
    assert_int_equal(rep.coll_completed, 0);
    for (size_t i = 0; i < rep.n; i++) assert_int_equal(rep.issues[i].kind, SHS_ISSUE_DEADLOCK);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* alpha-beta values computed by hand (trace_net.h formulas; NCCL 2.20.3
 * tuning.cc Simple latencies for the hgx-h100 preset: 8.4 us per call,
 * 3.4 us per NVLink ring step, 14.0 us per network ring step, 28 us per
 * tree level) */
static void test_net_model_hand_values(void **state) {
    (void)state;
    shs_net_t net;
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/astra-sim/network/Ring_8npus.yml", test_shared_dir());
    assert_int_equal(shs_net_load(path, &net), SHS_OK);
    /* ASTRA-sim's GB/s is 2^30 bytes per second */
    assert_true(net.intra_bw == 50.0 * 1073741824.0 && fabs(net.intra_lat - 500e-9) < 1e-18);
    assert_true(net.base_lat == 0 && net.tree_base_lat == 0 && fabs(net.tree_intra_lat - 500e-9) < 1e-18);
    double S = 1048576;
    /* ring: 2*7*(500e-9 + S/(8*50*2^30)) = 14 * 2.94140625e-6 */
    assert_true(fabs(shs_net_time(&net, SHS_ALGO_RING, SHS_OP_ALL_REDUCE, S, 8, 1) - 4.11796875e-5) < 1e-12);
    /* tree, one node: a chain of 8, 2*7*500e-9 + 2*S/(50*2^30) = 7e-6 + 3.90625e-5 */
    assert_true(fabs(shs_net_time(&net, SHS_ALGO_TREE, SHS_OP_ALL_REDUCE, S, 8, 1) - 4.60625e-5) < 1e-12);
    /* direct: 2*(500e-9 + 7*S/(8*50*2^30)) */
    assert_true(fabs(shs_net_time(&net, SHS_ALGO_DIRECT, SHS_OP_ALL_REDUCE, S, 8, 1) - 3.51796875e-5) < 1e-12);
    /* ring all-gather of 4 ranks: 3*(500e-9 + S/(4*50*2^30)) */
    assert_true(fabs(shs_net_time(&net, SHS_ALGO_RING, SHS_OP_ALL_GATHER, S, 4, 1) -
                     3 * (500e-9 + S / (200 * 1073741824.0))) < 1e-15);
    assert_true(shs_net_time(&net, SHS_ALGO_RING, SHS_OP_ALL_REDUCE, S, 1, 1) == 0);
    snprintf(path, sizeof path, "%s/traces/astra-sim/network/HGX-H100-validated.yml", test_shared_dir());
    assert_int_equal(shs_net_load(path, &net), SHS_OK);
    assert_true(net.intra_bw == 400.0 * 1073741824.0 && fabs(net.intra_lat - 936.25e-9) < 1e-18);
    /* 16 ranks over 8-GPU nodes: 2 nodes; the replica pair {0, 8}: 2 nodes, 1 GPU each */
    assert_int_equal(shs_net_preset("hgx-h100", &net), SHS_OK);
    shs_trace_t *t = from_text("shardsim-trace 1\nworld 16\ncomm world 16 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
                               "comm node0 8 0,1,2,3,4,5,6,7\ncomm pair 2 0,8\n"
                               "0 world 0 all_reduce 262144 f32 sum - - - 1048576 rank - - -\n"
                               "0 node0 0 all_reduce 262144 f32 sum - - - 1048576 rank - - -\n"
                               "0 pair 0 all_reduce 262144 f32 sum - - - 1048576 rank - - -\n");
    double inter = shs_net_rec_time(&net, SHS_ALGO_RING, t, &t->ranks[0].recs[0]);
    double intra = shs_net_rec_time(&net, SHS_ALGO_RING, t, &t->ranks[0].recs[1]);
    double pair = shs_net_rec_time(&net, SHS_ALGO_RING, t, &t->ranks[0].recs[2]);
    double tree = shs_net_rec_time(&net, SHS_ALGO_TREE, t, &t->ranks[0].recs[0]);
    /* world: 2*15 = 30 steps, 2*2 = 4 of them over the network, at 50 GB/s */
    assert_true(fabs(inter - (8.4e-6 + 26 * 3.4e-6 + 4 * 14.0e-6 + 30 * S / (16 * 50e9))) < 1e-12);
    /* node0: 14 NVLink steps at 400 GB/s */
    assert_true(fabs(intra - (8.4e-6 + 14 * 3.4e-6 + 14 * S / (8 * 400e9))) < 1e-12);
    /* pair: 2 steps, min(2*2, 2) = 2 over the network */
    assert_true(fabs(pair - (8.4e-6 + 2 * 14.0e-6 + 2 * S / (2 * 50e9))) < 1e-12);
    /* tree over 2 nodes of 8: 0 + 2*((8-1)*28e-6 + log2(2)*28e-6) + 2*S/50e9 */
    assert_true(fabs(tree - (2 * (7 * 28e-6 + 1 * 28e-6) + 2 * S / 50e9)) < 1e-12);
    assert_true(fabs(shs_net_busbw_factor(SHS_OP_ALL_REDUCE, 8) - 1.75) < 1e-15);
    shs_trace_free(t);
}

/* NCCL 2.20.3 tuning.cc's latency of a ring all-reduce on 8 GPUs of one
 * NVLink node under Simple: baseLat[RING][SIMPLE] + nsteps x
 * hwLat[NVLINK][RING][SIMPLE] = 8.4 + 2*(8-1) * 3.4 = 56.0 us; 8 bytes add
 * 2*7/8 * 8 B / 400 GB/s = 3.5e-11 s. */
static void test_net_small_all_reduce_is_nccl_latency(void **state) {
    (void)state;
    shs_net_t net;
    assert_int_equal(shs_net_preset("hgx-h100", &net), SHS_OK);
    double t = shs_net_time(&net, SHS_ALGO_RING, SHS_OP_ALL_REDUCE, 8, 8, 1);
    double want = 56.0e-6 + 3.5e-11;
    if (fabs(t - want) > 1e-15) fail_msg("8-byte ring all_reduce on 8 GPUs: %.17g s, want %.17g s", t, want);
    /* the barrier is the same all-reduce of nothing */
    assert_true(fabs(shs_net_time(&net, SHS_ALGO_RING, SHS_OP_BARRIER, 0, 8, 1) - 56.0e-6) < 1e-15);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_text_errors_name_file_and_line),
        cmocka_unit_test(test_op_table_names_and_kinds),
        cmocka_unit_test(test_recorder_records_every_call),
        cmocka_unit_test(test_recorder_records_split_communicators),
        cmocka_unit_test(test_skipped_op_is_missing_at_its_seq),
        cmocka_unit_test(test_count_mismatch_names_ranks_and_seq),
        cmocka_unit_test(test_dtype_mismatch_names_ranks_and_seq),
        cmocka_unit_test(test_unmatched_p2p),
        cmocka_unit_test(test_cross_comm_order_deadlock),
        cmocka_unit_test(test_net_model_hand_values),
        cmocka_unit_test(test_net_small_all_reduce_is_nccl_latency),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
