/* test_world.c - the rank-thread launcher: jobs run on every rank, and a
 * rank that fails wakes the ranks waiting for it in a collective, so the
 * world reports the failing rank's own error instead of hanging. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "shardsim/world.h"
#include "shardsim/clock.h"

static shs_status_t sum_ranks_job(shs_rank_ctx_t *ctx, void *arg) {
    int *out = arg;
    float *x;
    SHS_CHECK(shs_device_alloc(ctx->dev, (void **)&x, sizeof(float), SHS_MEM_OTHER, "x"));
    float v = (float)ctx->rank;
    SHS_CHECK(shs_memcpy_h2d(ctx->dev, x, &v, sizeof v));
    SHS_CHECK(shs_all_reduce(x, x, 1, SHS_F32, SHS_SUM, ctx->comm));
    SHS_CHECK(shs_memcpy_d2h(ctx->dev, &v, x, sizeof v));
    shs_device_free(ctx->dev, x);
    out[ctx->rank] = (int)v;
    return SHS_OK;
}

static void test_jobs_run_on_every_rank_repeatedly(void **state) {
    (void)state;
    shs_world_t *w;
    shs_world_config_t cfg = {.world_size = 7, .device_mem = SIZE_MAX, .timeout_ms = 10000, .name = "w"};
    assert_int_equal(shs_world_create(&w, &cfg), SHS_OK);
    for (int rep = 0; rep < 20; rep++) {
        int out[7] = {0};
        assert_int_equal(shs_world_run(w, sum_ranks_job, out), SHS_OK);
        for (int r = 0; r < 7; r++) assert_int_equal(out[r], 21); /* 0+1+...+6 */
    }
    shs_world_destroy(w);
}

/* Rank 2 fails (as an out-of-memory would) before the collective the
 * others are already waiting in. */
static shs_status_t rank2_fails_job(shs_rank_ctx_t *ctx, void *arg) {
    (void)arg;
    if (ctx->rank == 2) {
        void *p;
        return shs_device_alloc(ctx->dev, &p, (size_t)1 << 40, SHS_MEM_ACTIVATIONS, "huge");
    }
    return shs_barrier(ctx->comm);
}

static void test_failing_rank_aborts_waiters(void **state) {
    (void)state;
    shs_world_t *w;
    /* a 30 s timeout: the test passes only if the abort, not the timeout, ends the wait */
    shs_world_config_t cfg = {.world_size = 4, .device_mem = (size_t)1 << 30, .timeout_ms = 30000, .name = "world"};
    assert_int_equal(shs_world_create(&w, &cfg), SHS_OK);
    double t0 = shs_now_seconds();
    shs_status_t st = shs_world_run(w, rank2_fails_job, NULL);
    double dt = shs_now_seconds() - t0;
    assert_int_equal(st, SHS_OUT_OF_MEMORY);           /* the cause, not the ABORTED it caused */
    assert_non_null(strstr(shs_last_error(), "rank 2"));
    assert_true(dt < 10.0);
    /* the world's communicator stays failed: later collectives return at once */
    int out[4];
    t0 = shs_now_seconds();
    st = shs_world_run(w, sum_ranks_job, out);
    assert_int_equal(st, SHS_ABORTED);
    assert_true(shs_now_seconds() - t0 < 10.0);
    shs_world_destroy(w);
}

static void test_world_size_limits(void **state) {
    (void)state;
    shs_world_t *w = NULL;
    shs_world_config_t cfg = {.world_size = 0, .device_mem = SIZE_MAX};
    assert_int_equal(shs_world_create(&w, &cfg), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "world size must be in 1..1024 (got 0)"));
    cfg.world_size = SHS_MAX_WORLD + 1;
    assert_int_equal(shs_world_create(&w, &cfg), SHS_INVALID_ARG);
    assert_null(w);
}

/* 64 ranks on a 2-core machine: oversubscribed, still correct. */
static void test_oversubscribed_world(void **state) {
    (void)state;
    shs_world_t *w;
    shs_world_config_t cfg = {.world_size = 64, .device_mem = SIZE_MAX, .timeout_ms = 30000, .name = "big"};
    assert_int_equal(shs_world_create(&w, &cfg), SHS_OK);
    int out[64];
    for (int rep = 0; rep < 5; rep++) {
        assert_int_equal(shs_world_run(w, sum_ranks_job, out), SHS_OK);
        for (int r = 0; r < 64; r++) assert_int_equal(out[r], 64 * 63 / 2);
    }
    shs_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_run_on_every_rank_repeatedly),
        cmocka_unit_test(test_failing_rank_aborts_waiters),
        cmocka_unit_test(test_world_size_limits),
        cmocka_unit_test(test_oversubscribed_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
