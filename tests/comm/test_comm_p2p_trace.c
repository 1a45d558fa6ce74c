/* test_comm_p2p_trace.c - sends and receives in traces: recorded (peer as
 * a global rank, the per-(comm, peer) sequence number, tag 0), checked by
 * the trace analysis with the communicator's pairing rule (a count that
 * differs between the two ends is a mismatch naming both; channels are per
 * communicator), written and read back, and replayed (as groups, real
 * buffers; a trace that runs only with buffered sends fails there with the
 * communicator's cycle error, not a hang). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/clock.h"
#include "shardsim/comm.h"
#include "shardsim/trace.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_record.h"
#include "shardsim/trace_replay.h"
#include "thread_world.h"

static shs_trace_recorder_t *g_rec;

/* On 4 ranks: a pipeline over the odd ranks' split (1 -> 3, as global
 * ranks), a ring sendrecv on the world, an uneven all-to-all. */
static shs_status_t rank_p2p_run(tw_rank_t *r) {
    SHS_CHECK(shs_trace_recorder_attach(g_rec, r->comm, r->rank, NULL));
    shs_comm_t *odd = NULL;
    SHS_CHECK(shs_comm_split(r->comm, r->rank % 2 ? 1 : SHS_SPLIT_NOCOLOR, 0, &odd));
    float a[16] = {0}, b[16];
    if (r->rank == 1) SHS_CHECK(shs_send(a, 5, SHS_F32, 1, odd));
    if (r->rank == 3) SHS_CHECK(shs_recv(b, 5, SHS_F32, 0, odd));
    int n = r->nranks;
    SHS_CHECK(shs_group_start());
    SHS_CHECK(shs_send(a, 3, SHS_BF16, (r->rank + 1) % n, r->comm));
    SHS_CHECK(shs_recv(b, 3, SHS_BF16, (r->rank - 1 + n) % n, r->comm));
    SHS_CHECK(shs_group_end());
    size_t sc[4], rc[4];
    for (int j = 0; j < 4; j++) sc[j] = (size_t)(r->rank + j) % 3, rc[j] = (size_t)(j + r->rank) % 3;
    SHS_CHECK(shs_all_to_allv(a, sc, b, rc, SHS_F32, r->comm));
    shs_comm_destroy(odd);
    return SHS_OK;
}

static shs_trace_t *record_p2p_run(void) {
    assert_int_equal(shs_trace_recorder_create(&g_rec, 4), SHS_OK);
    tw_rank_t *ranks = tw_run(4, 10000, rank_p2p_run, NULL);
    tw_assert_all(ranks, 4, SHS_OK);
    free(ranks);
    shs_trace_t *t;
    assert_int_equal(shs_trace_recorder_finish(g_rec, &t), SHS_OK);
    shs_trace_recorder_free(g_rec);
    return t;
}

static void test_recorded_checked_replayed(void **state) {
    (void)state;
    shs_trace_t *t = record_p2p_run();
    assert_int_equal(t->ncomms, 2);
    /* rank 1's first record: the pipeline send, peer as a global rank */
    const shs_trace_rec_t *x = &t->ranks[1].recs[0];
    assert_int_equal(x->op, SHS_OP_SEND);
    assert_string_equal(t->comms[x->comm].name, "world/1@0");
    assert_int_equal(x->peer, 3);
    assert_int_equal(x->seq, 0);
    assert_int_equal(x->tag, 0);
    assert_int_equal(x->count, 5);
    assert_int_equal(x->bytes, 20);
    /* rank 0: the ring's send then recv, then the all-to-all's 4 + 4 */
    assert_int_equal(t->ranks[0].n, 2 + 8);
    assert_int_equal(t->ranks[0].recs[0].peer, 1);
    assert_int_equal(t->ranks[0].recs[1].op, SHS_OP_RECV);
    assert_int_equal(t->ranks[0].recs[1].peer, 3);
    /* the all-to-all's send to rank 1 is rank 0's second send to it */
    assert_int_equal(t->ranks[0].recs[4].op, SHS_OP_SEND);
    assert_int_equal(t->ranks[0].recs[4].peer, 1);
    assert_int_equal(t->ranks[0].recs[4].seq, 1);

    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 16), SHS_OK);
    for (size_t i = 0; i < rep.n; i++) print_error("%s\n", rep.issues[i].text);
    assert_int_equal(rep.total, 0);
    assert_int_equal(rep.p2p_matched, 1 + 4 + 16);
    shs_trace_report_free(&rep);

    /* written and read back, the same records */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(shs_trace_write_text(t, f, -1), SHS_OK);
    fclose(f);
    shs_trace_t *back;
    assert_int_equal(shs_trace_create(&back, 0), SHS_OK);
    assert_int_equal(shs_trace_read_text(back, text, len, "mem"), SHS_OK);
    assert_int_equal(shs_trace_num_records(back), shs_trace_num_records(t));
    assert_int_equal(back->ranks[1].recs[0].peer, 3);
    free(text);

    shs_replay_opts_t ro = {.timeout_ms = 10000};
    shs_replay_stats_t s;
    if (shs_trace_replay(back, &ro, &s) != SHS_OK) fail_msg("%s", shs_last_error());
    assert_int_equal(s.calls[SHS_OP_SEND], 1 + 4 + 16);
    assert_int_equal(s.calls[SHS_OP_RECV], 1 + 4 + 16);
    assert_int_equal(s.not_run[SHS_OP_SEND], 0);
    assert_int_equal(s.moved_bytes[SHS_OP_SEND], s.trace_bytes[SHS_OP_SEND]);
    assert_int_equal(s.moved_bytes[SHS_OP_RECV], s.trace_bytes[SHS_OP_RECV]);
    assert_int_equal(s.trace_bytes[SHS_OP_SEND], 20 + 4 * 6 + 15 * 4); /* sum of (r + j) mod 3 over r, j < 4: 15 */
    shs_trace_free(back);
    shs_trace_free(t);
}

static shs_trace_t *from_text(const char *text) {
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 0), SHS_OK);
    if (shs_trace_read_text(t, text, strlen(text), "mem") != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

/* The two ends disagree: the analysis names both, as the communicator does. */
static void test_check_names_both_ends(void **state) {
    (void)state;
    shs_trace_t *t = from_text("shardsim-trace 1\nworld 3\ncomm world 3 0,1,2\n"
                               "1 world 0 send 4 f32 - - 2 0 16 rank - - -\n"
                               "2 world 0 recv 8 f32 - - 1 0 32 rank - - -\n");
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    assert_int_equal(rep.total, 1);
    assert_int_equal(rep.issues[0].kind, SHS_ISSUE_MISMATCH);
    assert_int_equal(rep.issues[0].rank, 2);
    assert_int_equal(rep.issues[0].other, 1);
    const char *want = "comm world: rank 1's send(count=4, dtype=f32, to=2, tag=0, bytes=16/rank) (line 4) and rank "
                       "2's recv(count=8, dtype=f32, from=1, tag=0, bytes=32/rank) (line 5) are one message but their "
                       "count differs";
    if (!strstr(rep.issues[0].text, want)) print_error("%s\n", rep.issues[0].text);
    assert_non_null(strstr(rep.issues[0].text, want));
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* Sends on two communicators between the same ranks: each channel is its
 * communicator's, so the second comm's recv does not take the first's send. */
static void test_channels_are_per_communicator(void **state) {
    (void)state;
    shs_trace_t *t = from_text("shardsim-trace 1\nworld 2\ncomm world 2 0,1\ncomm pair 2 0,1\n"
                               "0 world 0 send 4 f32 - - 1 0 16 rank - - -\n"
                               "0 pair 0 send 9 f32 - - 1 0 36 rank - - -\n"
                               "1 pair 0 recv 9 f32 - - 0 0 36 rank - - -\n"
                               "1 world 0 recv 4 f32 - - 0 0 16 rank - - -\n");
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    for (size_t i = 0; i < rep.n; i++) print_error("%s\n", rep.issues[i].text);
    assert_int_equal(rep.total, 0);
    assert_int_equal(rep.p2p_matched, 2);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

/* Consistent with buffered sends (the analysis), a cycle when sends wait
 * for their receives (the replay): rank 0 sends then enters a barrier, rank
 * 1 enters the barrier first. The replay fails fast, naming the cycle. */
static void test_replay_reports_a_cycle(void **state) {
    (void)state;
    shs_trace_t *t = from_text("shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                               "0 world 0 send 4 f32 - - 1 0 16 rank - - -\n"
                               "0 world 0 barrier 0 - - - - - 0 rank - - -\n"
                               "1 world 0 barrier 0 - - - - - 0 rank - - -\n"
                               "1 world 0 recv 4 f32 - - 0 0 16 rank - - -\n");
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    assert_int_equal(rep.total, 0);
    shs_trace_report_free(&rep);
    shs_replay_opts_t ro = {.timeout_ms = 30000};
    shs_replay_stats_t s;
    double t0 = shs_now_seconds();
    assert_int_equal(shs_trace_replay(t, &ro, &s), SHS_MISMATCH);
    const char *want = "ranks [0-1] wait on each other in a cycle, a deadlock: rank 0's send(count=4, dtype=f32, "
                       "peer=1) seq 0 waits for rank 1; rank 1 is in barrier seq 0, which waits for rank 0";
    if (!strstr(shs_last_error(), want)) print_error("%s\n", shs_last_error());
    assert_non_null(strstr(shs_last_error(), want));
    assert_true(shs_now_seconds() - t0 < 5.0);
    shs_trace_free(t);
}

int main(void) {
    alarm(600);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded_checked_replayed),
        cmocka_unit_test(test_check_names_both_ends),
        cmocka_unit_test(test_channels_are_per_communicator),
        cmocka_unit_test(test_replay_reports_a_cycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
