/* test_comm_job.c - a fault anywhere fails the whole job at once (comm.h JOB
 * FAILURE): hybrid sharding's shard and replica groups (1 < G < N) with a
 * mismatch planted in one shard group fail every rank within a second or
 * two under the default 60 s timeout, each naming the original error, at
 * the communicator level and through the real strategy; an abort of the
 * world reaches a split's waiting ranks; names are unique within a job.
 * Not the single-communicator checks (test_comm_errors.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "run_record.h"
#include "shardsim/clock.h"
#include "shardsim/comm.h"
#include "shardsim/strategy.h"
#include "shardsim/train.h"
#include "strategy/strategy_testing.h" /* shs_strategy_skip_gather */
#include "thread_world.h"

#define N 6
#define G 2                    /* shard group size: 3 shard groups of 2, 2 replica groups of 3 */
#define PLANT_RANK 2           /* in shard group 1 (ranks 2, 3) */
#define FAST_S 3.0             /* well under the default timeout of 60 s */

/* ---- the communicators hybrid sharding makes, a planted mismatch ------------- */

typedef struct {
    char shard_name[N][64], replica_name[N][64];
} names_t;

/* Splits as strategy.c does (shard = ranks r/G alike, replica = r mod G
 * alike, by shs_strategy_hybrid_color), then steps of reduce-scatter on the
 * shard group and all-reduce on the replica group; at step 2, rank
 * PLANT_RANK's reduce-scatter has another count. */
static shs_status_t rank_hybrid(tw_rank_t *r) {
    names_t *nm = r->arg;
    shs_comm_t *shard = NULL, *replica = NULL;
    int key, color = shs_strategy_hybrid_color(G, 0, r->rank, &key);
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, color, key, &shard), SHS_OK);
    color = shs_strategy_hybrid_color(G, 1, r->rank, &key);
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, color, key, &replica), SHS_OK);
    snprintf(nm->shard_name[r->rank], sizeof nm->shard_name[0], "%s", shs_comm_name(shard));
    snprintf(nm->replica_name[r->rank], sizeof nm->replica_name[0], "%s", shs_comm_name(replica));
    float grad[2 * G] = {0}, shard_grad[2] = {0};
    shs_status_t st = SHS_OK;
    for (int step = 0; step < 5 && st == SHS_OK; step++) {
        size_t count = step == 2 && r->rank == PLANT_RANK ? 1 : 2;
        st = shs_reduce_scatter(grad, shard_grad, count, SHS_F32, SHS_SUM, shard);
        if (st == SHS_OK) st = shs_all_reduce(shard_grad, shard_grad, 2, SHS_F32, SHS_SUM, replica);
    }
    char err[1024];
    snprintf(err, sizeof err, "%s", shs_last_error());
    shs_comm_destroy(shard);
    shs_comm_destroy(replica);
    shs_set_last_error_text(err);
    return st;
}

static void test_hybrid_group_fault_fails_every_rank_fast(void **state) {
    (void)state;
    names_t nm;
    double t0 = shs_now_seconds();
    tw_rank_t *ranks = tw_run(N, 0 /* the default timeout, 60 s */, rank_hybrid, &nm);
    double dt = shs_now_seconds() - t0;
    /* the original error: shard group 1 ('split(color=1)[2-3]') at its reduce-scatter of step 2 */
    const char *cause = "comm 'split(color=1)[2-3]' seq 2: rank 0 called reduce_scatter(count=1, dtype=f32, op=sum) "
                        "but rank 1 called reduce_scatter(count=2, dtype=f32, op=sum)";
    for (int r = 0; r < N; r++) {
        int group = r / G == PLANT_RANK / G;
        if (!strstr(ranks[r].error, cause) || ranks[r].status != (group ? SHS_MISMATCH : SHS_ABORTED))
            print_error("rank %d: %s after %.3f s: %s\n", r, shs_status_name(ranks[r].status), ranks[r].seconds,
                        ranks[r].error);
        assert_int_equal(ranks[r].status, group ? SHS_MISMATCH : SHS_ABORTED);
        assert_non_null(strstr(ranks[r].error, cause));
        if (!group) assert_non_null(strstr(ranks[r].error, "the job failed: rank "));
        assert_true(ranks[r].seconds < FAST_S);
    }
    assert_true(dt < FAST_S);
    printf("  every rank of %d failed within %.3f s (timeout 60 s)\n", N, dt);
    /* every communicator of the job has its own name */
    static const char *const shard_want[3] = {"split(color=0)[0-1]", "split(color=1)[2-3]", "split(color=2)[4-5]"};
    static const char *const replica_want[2] = {"split(color=0)[0,2,4]", "split(color=1)[1,3,5]"};
    for (int r = 0; r < N; r++) {
        assert_string_equal(nm.shard_name[r], shard_want[r / G]);
        assert_string_equal(nm.replica_name[r], replica_want[r % G]);
    }
    free(ranks);
}

/* ---- through the strategy: a skipped gather in one shard group ------------------ */

static shs_status_t skip_in_group1(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    return ctx->rank == PLANT_RANK ? shs_strategy_skip_gather(shs_trainer_strategy(t, ctx->rank), 1) : SHS_OK;
}

/* Hybrid sharding, world 6, shard groups of 2: rank 2 leaves out block0's
 * gather in the first forward. Its shard group fails at the skip (the
 * tags differ); the other groups go on to the replica all-reduce, which
 * waits for ranks of the failed group: before jobs, they waited out the
 * whole timeout and reported a secondary TIMEOUT. */
static void test_strategy_hybrid_skip_fails_fast(void **state) {
    (void)state;
    shs_corpus_t corpus;
    shs_corpus_builtin(&corpus);
    shs_train_config_t cfg = test_small_config(N, 3);
    cfg.strategy.kind = SHS_HYBRID_SHARD;
    cfg.strategy.shard_group_size = G;
    cfg.timeout_ms = 0; /* the default, 60 s */
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &corpus), SHS_OK);
    assert_int_equal(shs_trainer_run(t, skip_in_group1, t), SHS_OK);
    float loss;
    double t0 = shs_now_seconds();
    shs_status_t st = shs_trainer_step(t, &loss);
    double dt = shs_now_seconds() - t0;
    const char *e = shs_last_error();
    /* rank 2 is the group's rank 0: its next gather (block1's) met rank 3's block0 gather */
    const char *want[] = {"comm 'split(color=1)[2-3]' seq 1: rank 0 called all_gather(",
                          " [fwd-all-gather unit 2 micro 0 step 1] but rank 1 called all_gather(",
                          " [fwd-all-gather unit 1 micro 0 step 1]"};
    if (st != SHS_MISMATCH || dt >= FAST_S) print_error("%s after %.3f s: %s\n", shs_status_name(st), dt, e);
    assert_int_equal(st, SHS_MISMATCH);
    for (int k = 0; k < 3; k++) {
        if (!strstr(e, want[k])) print_error("'%s' not in: %s\n", want[k], e);
        assert_non_null(strstr(e, want[k]));
    }
    assert_true(dt < FAST_S);
    printf("  the step failed after %.3f s (timeout 60 s)\n", dt);
    shs_trainer_destroy(t);
    shs_corpus_free(&corpus);
}

/* ---- an abort of the world reaches a split's waiting ranks ------------------------ */

static shs_status_t rank_abort_world(tw_rank_t *r) {
    shs_comm_t *half = NULL;
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, r->rank / 2, 0, &half), SHS_OK);
    shs_status_t st = SHS_OK;
    if (r->rank == 0) shs_comm_abort(r->comm, "out of patience");
    else if (r->rank == 1) st = shs_barrier(half); /* its partner, rank 0, aborted instead of coming */
    else st = shs_barrier(r->comm);                /* waits for ranks 0 and 1 */
    char err[1024];
    snprintf(err, sizeof err, "%s", shs_last_error());
    shs_comm_destroy(half);
    shs_set_last_error_text(err);
    return st;
}

static void test_abort_reaches_every_communicator(void **state) {
    (void)state;
    double t0 = shs_now_seconds();
    tw_rank_t *ranks = tw_run(4, 0, rank_abort_world, NULL);
    assert_true(shs_now_seconds() - t0 < FAST_S);
    assert_int_equal(ranks[0].status, SHS_OK);
    for (int r = 1; r < 4; r++) {
        const char *want = r == 1 ? "rank 1: barrier seq 0 on comm 'split(color=0)[0-1]': the job failed: rank 0 "
                                    "aborted comm 'world': out of patience"
                                  : "barrier seq 1 on comm 'world': aborted by rank 0: out of patience";
        if (ranks[r].status != SHS_ABORTED || !strstr(ranks[r].error, want))
            print_error("rank %d: %s: %s\n", r, shs_status_name(ranks[r].status), ranks[r].error);
        assert_int_equal(ranks[r].status, SHS_ABORTED);
        assert_non_null(strstr(ranks[r].error, want));
    }
    free(ranks);
}

int main(void) {
    alarm(900); /* a hang fails the binary instead of blocking the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_group_fault_fails_every_rank_fast),
        cmocka_unit_test(test_strategy_hybrid_skip_fails_fast),
        cmocka_unit_test(test_abort_reaches_every_communicator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
