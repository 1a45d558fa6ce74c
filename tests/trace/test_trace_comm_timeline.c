/* test_trace_comm_timeline.c - per-rank total and exposed communication under a
 * network model (trace_comm_timeline.h). Small traces whose schedules are worked
 * out by hand here from each call's alpha-beta time (trace_net.h, tested on
 * its own in test_trace.c), and properties of a real recorded trace. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_net.h"
#include "shardsim/trace_comm_timeline.h"

static shs_trace_t *parse(const char *text) {
    shs_trace_t *t;
    assert_int_equal(shs_trace_create(&t, 0), SHS_OK);
    if (shs_trace_read_text(t, text, strlen(text), "case") != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static shs_net_t net(void) {
    shs_net_t n;
    assert_int_equal(shs_net_preset("hgx-h100", &n), SHS_OK);
    return n;
}

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-12 + 1e-9 * fabs((double)(b)))

/* Two all-reduces; between them one rank computed 4 ms, the other 1 ms
 * (the recorded gaps). By hand, with d = one call's time: both end the
 * first at d; the slow rank arrives at d + 4 ms, the fast one at d + 1 ms
 * and waits 3 ms; both end at 2d + 4 ms. Exposed = wall - compute: 2d on
 * the slow rank, 2d + 3 ms on the fast one. Run both ways round, so the
 * latest arrival is once the first and once the last to be processed. */
static void test_collective_waits_for_the_last_member(void **state) {
    (void)state;
    for (int slow = 0; slow < 2; slow++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                 "0 world 0 all_reduce 1048576 f32 sum - - - 4194304 rank 0 1000 -\n"
                 "0 world 1 all_reduce 1048576 f32 sum - - - 4194304 rank %d %d -\n"
                 "1 world 0 all_reduce 1048576 f32 sum - - - 4194304 rank 0 1000 -\n"
                 "1 world 1 all_reduce 1048576 f32 sum - - - 4194304 rank %d %d -\n",
                 slow == 0 ? 5000 : 2000, slow == 0 ? 6000 : 3000, slow == 1 ? 5000 : 2000, slow == 1 ? 6000 : 3000);
        shs_trace_t *t = parse(text);
        shs_net_t n = net();
        double d = shs_net_rec_time(&n, SHS_ALGO_RING, t, &t->ranks[0].recs[0]);
        assert_true(d > 0);
        shs_trace_comm_timeline_t tl;
        assert_int_equal(shs_trace_comm_timeline(t, &n, SHS_ALGO_RING, &tl), SHS_OK);
        const shs_rank_comm_timeline_t *S = &tl.ranks[slow], *F = &tl.ranks[1 - slow];
        assert_int_equal(tl.complete, 1);
        assert_int_equal(tl.timed, 1);
        NEAR(S->compute_s, 4e-3);
        NEAR(F->compute_s, 1e-3);
        NEAR(S->comm_s, 2 * d);
        NEAR(F->comm_s, 2 * d);
        NEAR(S->wait_s, 0);
        NEAR(F->wait_s, 3e-3);
        NEAR(S->wall_s, 2 * d + 4e-3);
        NEAR(F->wall_s, 2 * d + 4e-3);
        NEAR(S->exposed_s, 2 * d);
        NEAR(F->exposed_s, 2 * d + 3e-3);
        NEAR(tl.wall_s, 2 * d + 4e-3);
        shs_trace_comm_timeline_free(&tl);
        shs_trace_free(t);
    }
}

/* Ping-pong without times: 0 sends (d1) then receives; 1 receives, then
 * sends back (d2). Rank 1 waits d1 for the first message, rank 0 waits d2
 * for the reply; both end at d1 + d2. The recv on rank 1 is listed before
 * rank 0's send in the file, so order of records across ranks does not
 * matter. */
static void test_send_recv_pairs_in_order(void **state) {
    (void)state;
    shs_trace_t *t = parse("shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                           "1 world 0 recv 256 f32 - - 0 7 1024 rank - - -\n"
                           "1 world 1 send 65536 f32 - - 0 7 262144 rank - - -\n"
                           "0 world 0 send 256 f32 - - 1 7 1024 rank - - -\n"
                           "0 world 1 recv 65536 f32 - - 1 7 262144 rank - - -\n");
    shs_net_t n = net();
    double d1 = shs_net_rec_time(&n, SHS_ALGO_RING, t, &t->ranks[0].recs[0]);
    double d2 = shs_net_rec_time(&n, SHS_ALGO_RING, t, &t->ranks[1].recs[1]);
    assert_true(d1 > 0 && d2 > d1);
    shs_trace_comm_timeline_t tl;
    assert_int_equal(shs_trace_comm_timeline(t, &n, SHS_ALGO_RING, &tl), SHS_OK);
    assert_int_equal(tl.complete, 1);
    assert_int_equal(tl.timed, 0);
    NEAR(tl.ranks[1].wait_s, d1);
    NEAR(tl.ranks[0].wait_s, d2);
    NEAR(tl.ranks[0].wall_s, d1 + d2);
    NEAR(tl.ranks[1].wall_s, d1 + d2);
    NEAR(tl.ranks[0].exposed_s, d1 + d2); /* no compute in the trace: all of it is exposed */
    shs_trace_comm_timeline_free(&tl);
    shs_trace_free(t);
}

/* Both ranks receive first: nothing can run; the timeline says so and
 * keeps what ran (nothing). */
static void test_deadlock_is_incomplete(void **state) {
    (void)state;
    shs_trace_t *t = parse("shardsim-trace 1\nworld 2\ncomm world 2 0,1\n"
                           "0 world 0 recv 4 f32 - - 1 0 16 rank - - -\n"
                           "0 world 1 send 4 f32 - - 1 0 16 rank - - -\n"
                           "1 world 0 recv 4 f32 - - 0 0 16 rank - - -\n"
                           "1 world 1 send 4 f32 - - 0 0 16 rank - - -\n");
    shs_net_t n = net();
    shs_trace_comm_timeline_t tl;
    assert_int_equal(shs_trace_comm_timeline(t, &n, SHS_ALGO_RING, &tl), SHS_OK);
    assert_int_equal(tl.complete, 0);
    assert_int_equal(tl.ranks[0].done, 0);
    assert_int_equal(tl.ranks[1].done, 0);
    shs_trace_comm_timeline_free(&tl);
    shs_trace_free(t);
}

/* A real recording (ZeRO-3, world 4, 2 steps): it completes; every rank
 * ends with the last world collective, so all walls are equal; exposed =
 * comm + wait on every rank (calls block); compute is the recorded gaps,
 * which equal, per rank, the time between its calls in the file. */
static void test_recorded_trace(void **state) {
    (void)state;
    shs_trace_t *t;
    shs_trace_load_opts_t lo = {0};
    if (shs_trace_load(&t, SHS_SOURCE_DIR "/traces/recorded/zero3", &lo) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_net_t n = net();
    shs_trace_comm_timeline_t tl;
    assert_int_equal(shs_trace_comm_timeline(t, &n, SHS_ALGO_RING, &tl), SHS_OK);
    assert_int_equal(tl.complete, 1);
    assert_int_equal(tl.timed, 1);
    for (int r = 0; r < t->world; r++) {
        const shs_rank_comm_timeline_t *o = &tl.ranks[r];
        double gaps = 0, comm = 0;
        const shs_trace_rank_t *tr = &t->ranks[r];
        for (size_t i = 0; i < tr->n; i++) {
            comm += shs_net_rec_time(&n, SHS_ALGO_RING, t, &tr->recs[i]);
            if (i && tr->recs[i].t_start > tr->recs[i - 1].t_end) gaps += tr->recs[i].t_start - tr->recs[i - 1].t_end;
        }
        assert_int_equal(o->done, tr->n);
        NEAR(o->compute_s, gaps);
        NEAR(o->comm_s, comm);
        NEAR(o->exposed_s, o->comm_s + o->wait_s);
        NEAR(o->wall_s, tl.wall_s);
    }
    shs_trace_comm_timeline_free(&tl);
    shs_trace_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collective_waits_for_the_last_member),
        cmocka_unit_test(test_send_recv_pairs_in_order),
        cmocka_unit_test(test_deadlock_is_incomplete),
        cmocka_unit_test(test_recorded_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
