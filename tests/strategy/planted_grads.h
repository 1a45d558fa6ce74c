/* planted_grads.h - test helper: N rank threads, each with its own strategy
 * over one wrap unit of zero-initialized parameters, whose local gradient in
 * each step is planted by the test (no model: acquire_grads, the planted
 * values, grads_ready, finish_step). With SGD at lr 1 and no momentum or
 * decay the parameters after one step are minus the reduced gradient, so a
 * test reads the reduction's result exactly. Header-only; included by the
 * strategy tests that plant gradients. */
#ifndef SHARDSIM_TEST_PLANTED_GRADS_H
#define SHARDSIM_TEST_PLANTED_GRADS_H

#include <stdlib.h>
#include <string.h>

#include "shardsim/strategy.h"
#include "shardsim/world.h"
#include "strategy/strategy_testing.h"

#define PG_MAX_RANKS 8
#define PG_MAX_ELEMS 64

typedef struct {
    shs_strategy_config_t sc;      /* the strategy every rank runs */
    size_t n;                      /* the unit's elements (<= PG_MAX_ELEMS) */
    float (*grad)(int rank, size_t i, long step); /* rank's local gradient element i at step (1-based) */
    long plant_inf_at;             /* a step whose reduced gradient gets +inf at element 0 (0: none) */
    /* set by the helper */
    shs_layout_t lo;
    shs_world_t *world;
    shs_strategy_t *s[PG_MAX_RANKS];
    long step;
} pg_world_t;

static inline shs_status_t pg_create_job(shs_rank_ctx_t *ctx, void *arg) {
    pg_world_t *w = arg;
    return shs_strategy_create(&w->s[ctx->rank], &w->sc, &w->lo, ctx->dev, ctx->comm);
}

static inline shs_status_t pg_step_job(shs_rank_ctx_t *ctx, void *arg) {
    pg_world_t *w = arg;
    shs_strategy_t *s = w->s[ctx->rank];
    shs_param_source_t *src = shs_strategy_source(s);
    float g[PG_MAX_ELEMS], *buf;
    for (size_t i = 0; i < w->n; i++) g[i] = w->grad(ctx->rank, i, w->step);
    SHS_CHECK(shs_strategy_begin_step(s));
    shs_strategy_set_phase(s, SHS_PHASE_FORWARD);
    shs_strategy_set_phase(s, SHS_PHASE_BACKWARD);
    SHS_CHECK(src->acquire_grads(src->self, 0, &buf));
    SHS_CHECK(shs_memcpy_h2d(ctx->dev, buf, g, w->n * sizeof(float)));
    SHS_CHECK(src->grads_ready(src->self, 0));
    if (w->step == w->plant_inf_at) SHS_CHECK(shs_strategy_plant_grad_inf(s, 0, 0));
    return shs_strategy_finish_step(s, w->step);
}

static inline shs_status_t pg_destroy_job(shs_rank_ctx_t *ctx, void *arg) {
    pg_world_t *w = arg;
    shs_strategy_destroy(w->s[ctx->rank]);
    return SHS_OK;
}

/* Start N ranks; fails the test on an error. */
static inline void pg_start(pg_world_t *w, int nranks) {
    assert_true(nranks <= PG_MAX_RANKS && w->n <= PG_MAX_ELEMS);
    shs_layout_init(&w->lo);
    assert_int_equal(shs_layout_add_unit(&w->lo, "u"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&w->lo, "w", 1, (int)w->n, SHS_INIT_ZEROS, 0), SHS_OK);
    shs_world_config_t wc = {.world_size = nranks, .device_mem = SIZE_MAX, .timeout_ms = 20000, .name = "pg"};
    assert_int_equal(shs_world_create(&w->world, &wc), SHS_OK);
    if (shs_world_run(w->world, pg_create_job, w) != SHS_OK) fail_msg("create: %s", shs_last_error());
    w->step = 0;
}

/* One step on every rank. */
static inline void pg_step(pg_world_t *w) {
    w->step++;
    if (shs_world_run(w->world, pg_step_job, w) != SHS_OK) fail_msg("step %ld: %s", w->step, shs_last_error());
}

/* The unit's parameters (n floats) from the shards of the ranks that hold
 * one copy of each (the first replica). */
static inline void pg_params(pg_world_t *w, float *out) {
    int N = shs_world_size(w->world);
    for (int r = 0; r < N; r++) {
        shs_shard_t sh;
        int replica;
        shs_strategy_shard_info(w->s[r], 0, &sh, &replica);
        if (replica != 0) continue;
        float shard[PG_MAX_ELEMS];
        assert_int_equal(shs_strategy_read_shard(w->s[r], 0, shard), SHS_OK);
        for (size_t i = 0; i < sh.size && sh.offset + i < w->n; i++) out[sh.offset + i] = shard[i];
    }
}

static inline void pg_stop(pg_world_t *w) {
    shs_world_run(w->world, pg_destroy_job, w);
    shs_world_destroy(w->world);
    shs_layout_free(&w->lo);
}

#endif
