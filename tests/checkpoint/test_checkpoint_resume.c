/* test_checkpoint_resume.c - sharded checkpoints saved and resumed.
 * References are independent of the code under test: an uninterrupted run
 * (losses and parameters memcmp-equal after resuming through other world
 * sizes, stages and alignments), hand-computed sizes, values planted by the
 * test, the standard CRC-32 check value. Training at different world sizes
 * is not bit-identical (each rank sums its own micro-batch first), so a
 * continuation at N' is compared with an uninterrupted run at N' after
 * routing the state through other sizes. Not the refusals
 * (test_checkpoint_refusals.c) nor safetensors (test_checkpoint_safetensors.c). */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

#include "shardsim/checkpoint.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "shardsim/world.h"
#include "harness.h"

#include "checkpoint_run.h"

/* ---- CRC-32 ------------------------------------------------------------------ */

static void test_crc32_check_value(void **state) {
    (void)state;
    assert_int_equal(shs_crc32(0, "123456789", 9), 0xCBF43926u); /* the CRC-32/ISO-HDLC check value */
    assert_int_equal(shs_crc32(shs_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    assert_int_equal(shs_crc32(0, "", 0), 0u);
}

/* ---- resume: bit-identical continuation --------------------------------------- */

typedef struct {
    int world;
    shs_strategy_kind_t kind;
    size_t align;
} hop_t;

/* Uninterrupted: `total` steps at `last`. Checkpointed: `first` steps at
 * hops[0]'s world, saved, loaded and saved again at each middle hop without
 * training, then loaded at `last`, which trains the remaining steps. Losses
 * and real parameters must be memcmp-equal, and after each load the state
 * must equal the saved run's parameters. */
static shs_train_config_t hop_config(const shs_train_config_t *tmpl, hop_t h) {
    shs_train_config_t c = *tmpl;
    c.world_size = h.world;
    c.strategy.kind = h.kind;
    c.strategy.shard_align = h.align;
    return c;
}

static void check_chain(const shs_train_config_t *tmpl, int first, int total, const hop_t *hops, int nhops, hop_t last) {
    shs_train_config_t rc = hop_config(tmpl, last);
    shs_trainer_t *ref = make(&rc);
    float ref_loss[16];
    steps(ref, total, ref_loss);
    float *ref_params = params_of(ref);
    shs_trainer_destroy(ref);

    shs_train_config_t c0 = hop_config(tmpl, hops[0]);
    shs_trainer_t *t = make(&c0);
    float loss[16];
    steps(t, first, loss);
    assert_memory_equal(loss, ref_loss, (size_t)first * sizeof(float)); /* same N: the same run so far */
    float *saved = params_of(t);
    shs_loss_scale_state_t scale = shs_trainer_loss_scale(t);
    char dir[64];
    snprintf(dir, sizeof dir, "chain-%d", 0);
    save_ok(t, tpath(dir));
    shs_trainer_destroy(t);
    const shs_layout_t *lo = NULL;
    for (int h = 1; h <= nhops; h++) {
        hop_t hp = h < nhops ? hops[h] : last;
        shs_train_config_t c = hop_config(tmpl, hp);
        t = make(&c);
        resume_ok(t, tpath(dir));
        assert_int_equal(shs_trainer_steps_done(t), first);
        shs_loss_scale_state_t now_scale = shs_trainer_loss_scale(t);
        assert_memory_equal(&now_scale.scale, &scale.scale, sizeof(float));
        assert_int_equal(now_scale.good_steps, scale.good_steps);
        assert_int_equal(now_scale.skipped_steps, scale.skipped_steps);
        assert_int_equal(now_scale.iter, scale.iter);
        assert_int_equal(now_scale.last_overflow_iter, scale.last_overflow_iter);
        assert_int_equal(now_scale.hysteresis, scale.hysteresis);
        lo = shs_trainer_layout(t);
        float *now = params_of(t);
        assert_memory_equal(now, saved, lo->num_params * sizeof(float));
        free(now);
        if (h == nhops) break;
        snprintf(dir, sizeof dir, "chain-%d", h);
        save_ok(t, tpath(dir));
        shs_trainer_destroy(t);
    }
    steps(t, total - first, loss);
    assert_memory_equal(loss, ref_loss + first, (size_t)(total - first) * sizeof(float));
    float *end = params_of(t);
    assert_memory_equal(end, ref_params, shs_trainer_layout(t)->num_params * sizeof(float));
    free(end);
    shs_trainer_destroy(t);
    free(saved);
    free(ref_params);
}

/* 4 steps ZeRO-3 at N=4, resumed at N=4 under DDP and ZeRO-2 with E=8 for 3
 * more: equal to 7 uninterrupted steps. */
static void test_resume_same_world_other_stage(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    hop_t z3[] = {{4, SHS_ZERO3, 1}};
    check_chain(&c, 4, 7, z3, 1, (hop_t){4, SHS_DDP, 1});
    check_chain(&c, 4, 7, z3, 1, (hop_t){4, SHS_ZERO2, 8});
}

/* Saved at N=3 (ZeRO-3), resharded through N=4 (DDP), N=2 (ZeRO-3, E=8) and
 * N=5 (ZeRO-1), continued at N=3 under ZeRO-1: equal to 7 uninterrupted
 * ZeRO-1 steps at N=3. */
static void test_resume_through_other_world_sizes(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    hop_t hops[] = {{3, SHS_ZERO3, 1}, {4, SHS_DDP, 1}, {2, SHS_ZERO3, 8}, {5, SHS_ZERO1, 1}};
    check_chain(&c, 4, 7, hops, 4, (hop_t){3, SHS_ZERO1, 1});
}

/* SGD with momentum (one state array) and plain SGD (none). */
static void test_resume_sgd(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    c.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    c.strategy.optim.lr = 0.05f;
    c.strategy.optim.momentum = 0.9f;
    c.strategy.optim.weight_decay = 0.01f;
    hop_t hops[] = {{2, SHS_DDP, 1}, {5, SHS_ZERO3, 4}};
    check_chain(&c, 3, 5, hops, 2, (hop_t){2, SHS_ZERO2, 1});
    c.strategy.optim.momentum = 0;
    check_chain(&c, 2, 4, hops, 2, (hop_t){2, SHS_ZERO3, 1});
}

/* fp16 compute with dynamic loss scaling (growth every 2 good steps, so the
 * scale moves within the test) and bf16 with gradient accumulation and
 * clipping: the scaler state and the step travel with the checkpoint. */
static void test_resume_mixed_precision(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    c.strategy.param_dtype = SHS_F16;
    c.strategy.scaler = (shs_loss_scaler_config_t){.init_scale = 1024.0f, .growth_interval = 2};
    hop_t hops[] = {{2, SHS_ZERO3, 1}, {3, SHS_ZERO2, 1}};
    check_chain(&c, 3, 6, hops, 2, (hop_t){2, SHS_ZERO1, 1});
    /* DeepSpeed's scaler from 2^20, where the data overflows by itself:
     * saved after 3 steps (two overflows: the counter spent, then one
     * halving), the counter, the last overflow's iteration and the
     * iteration count travel too: the resumed run (resharded through world
     * 2) goes on as the uninterrupted one, skips and growth included. */
    c = small_config(1, SHS_DDP, 1);
    c.strategy.param_dtype = SHS_F16;
    c.strategy.scaler = (shs_loss_scaler_config_t){.kind = SHS_SCALER_DEEPSPEED, .init_scale = 1048576.0f,
                                                   .growth_interval = 2, .hysteresis = 2, .min_scale = 1.0f};
    hop_t hd[] = {{3, SHS_ZERO3, 1}, {2, SHS_DDP, 1}};
    check_chain(&c, 3, 8, hd, 2, (hop_t){3, SHS_ZERO2, 1});
    c = small_config(1, SHS_DDP, 1);
    c.strategy.param_dtype = SHS_BF16;
    c.strategy.reduce_dtype = SHS_F32;
    c.grad_accum = 2;
    c.strategy.clip_norm = 0.5f;
    c.strategy.norm_type = 2;
    hop_t h2[] = {{3, SHS_ZERO2, 1}, {1, SHS_ZERO3, 1}};
    check_chain(&c, 2, 4, h2, 2, (hop_t){3, SHS_ZERO3, 4});
}

/* ---- a 57-element model at N=2 (shards of unequal size) ------------------------ */

typedef struct {
    shs_layout_t lo;
    shs_strategy_t *s[8];
    size_t align;
    shs_checkpoint_writer_t *w;
    const shs_checkpoint_t *ck;
} small_world_t;

static shs_status_t create_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    shs_strategy_config_t sc = {.kind = SHS_ZERO3, .optim = shs_optim_default(SHS_OPTIM_ADAMW), .seed = 7,
                                .shard_align = sw->align};
    return shs_strategy_create(&sw->s[ctx->rank], &sc, &sw->lo, ctx->dev, ctx->comm);
}
static shs_status_t plant_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    float p[57], st[2 * 57];
    for (int i = 0; i < 57; i++) {
        p[i] = (float)(i + 1);
        st[i] = 1000.0f + (float)i;
        st[57 + i] = 2000.0f + (float)i;
    }
    return shs_strategy_load_state(sw->s[ctx->rank], 0, p, st);
}
static shs_status_t write_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    return shs_checkpoint_write_rank(sw->w, ctx->rank, sw->s[ctx->rank]);
}
static shs_status_t load_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    return shs_checkpoint_load_rank(sw->ck, sw->s[ctx->rank]);
}
/* Each rank's shard after loading holds the planted values at its range. */
static shs_status_t verify_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    shs_shard_t sh = shs_shard_of(57, ctx->world_size, ctx->rank, sw->align);
    float p[64], st[128];
    SHS_CHECK(shs_strategy_read_state(sw->s[ctx->rank], 0, p, st));
    for (size_t i = 0; i < sh.size; i++) {
        size_t g = sh.offset + i;
        float want = g < 57 ? (float)(g + 1) : 0.0f, m = g < 57 ? 1000.0f + (float)g : 0.0f,
              v = g < 57 ? 2000.0f + (float)g : 0.0f;
        if (p[i] != want || st[i] != m || st[sh.size + i] != v)
            return shs_set_error(SHS_INTERNAL, "rank %d element %zu: %g %g %g", ctx->rank, g, (double)p[i],
                                 (double)st[i], (double)st[sh.size + i]);
    }
    return SHS_OK;
}
static shs_status_t destroy_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    shs_strategy_destroy(sw->s[ctx->rank]);
    return SHS_OK;
}

static shs_world_t *small_world(int n) {
    shs_world_t *w;
    shs_world_config_t wc = {.world_size = n, .device_mem = SIZE_MAX, .timeout_ms = 20000, .name = "world"};
    assert_int_equal(shs_world_create(&w, &wc), SHS_OK);
    return w;
}

static void check_57(size_t align, size_t want_shard, const char *name) {
    small_world_t sw = {.align = align};
    shs_layout_init(&sw.lo);
    assert_int_equal(shs_layout_add_unit(&sw.lo, "only"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw.lo, "w", 8, 7, SHS_INIT_NORMAL, 0.02f), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw.lo, "b", 1, 1, SHS_INIT_ZEROS, 0), SHS_OK);
    assert_int_equal(sw.lo.num_params, 57);
    shs_world_t *w = small_world(2);
    assert_int_equal(shs_world_run(w, create_job, &sw), SHS_OK);
    assert_int_equal(shs_world_run(w, plant_job, &sw), SHS_OK);
    shs_checkpoint_meta_t m = {.layout = &sw.lo, .world_size = 2, .shard_align = align, .strategy = SHS_ZERO3,
                               .optim = shs_optim_default(SHS_OPTIM_ADAMW), .state_per_param = 2, .step = 9,
                               .seed = 7, .micro_batch = 1, .grad_accum = 1, .loss_scale = {.scale = 1.0f}};
    snprintf(m.model, sizeof m.model, "test 57");
    const char *dir = tpath(name);
    assert_int_equal(shs_checkpoint_writer_begin(&sw.w, dir, &m), SHS_OK);
    assert_int_equal(shs_world_run(w, write_job, &sw), SHS_OK);
    if (shs_checkpoint_writer_commit(sw.w) != SHS_OK) fail_msg("commit: %s", shs_last_error());
    shs_world_run(w, destroy_job, &sw);
    shs_world_destroy(w);

    /* the index, read here: each rank's shard size, and file bytes =
     * 64 header + S * 3 arrays * 4 bytes */
    char path[600], want[128];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    char *idx = slurp(path, NULL);
    for (int r = 0; r < 2; r++) {
        snprintf(want, sizeof want, "rank %d rank-%05d-of-00002.g1.bin %zu ", r, r, 64 + want_shard * 3 * 4);
        char *line = strstr(idx, want);
        if (!line) fail_msg("no '%s' in\n%s", want, idx);
        char *nl = strchr(line, '\n');
        snprintf(want, sizeof want, " %zu", want_shard);
        assert_memory_equal(nl - strlen(want), want, strlen(want)); /* the unit's shard size ends the line */
        struct stat sb;
        snprintf(path, sizeof path, "%s/rank-%05d-of-00002.g1.bin", dir, r);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((size_t)sb.st_size, 64 + want_shard * 3 * 4);
    }
    assert_non_null(strstr(idx, "\nunit only 57 2\ntensor w 8 7 0\ntensor b 1 1 56\n"));
    free(idx);

    shs_checkpoint_t *ck;
    if (shs_checkpoint_open(&ck, dir) != SHS_OK) fail_msg("open: %s", shs_last_error());
    assert_int_equal(shs_checkpoint_meta(ck)->layout->units[0].numel, 57);
    assert_int_equal(shs_checkpoint_meta(ck)->step, 9);
    const float *p = shs_checkpoint_params(ck, 0), *st = shs_checkpoint_state(ck, 0);
    for (int i = 0; i < 57; i++) {
        assert_true(p[i] == (float)(i + 1));
        assert_true(st[i] == 1000.0f + (float)i);
        assert_true(st[57 + i] == 2000.0f + (float)i);
    }
    /* into 3 ranks (S = 19, no padding) and back out, values where planted */
    small_world_t sw3 = {.align = 1, .ck = ck};
    shs_layout_init(&sw3.lo);
    assert_int_equal(shs_layout_add_unit(&sw3.lo, "only"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw3.lo, "w", 8, 7, SHS_INIT_NORMAL, 0.02f), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw3.lo, "b", 1, 1, SHS_INIT_ZEROS, 0), SHS_OK);
    w = small_world(3);
    assert_int_equal(shs_world_run(w, create_job, &sw3), SHS_OK);
    assert_int_equal(shs_world_run(w, load_job, &sw3), SHS_OK);
    if (shs_world_run(w, verify_job, &sw3) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_world_run(w, destroy_job, &sw3);
    shs_world_destroy(w);
    shs_checkpoint_close(ck);
    shs_layout_free(&sw.lo);
    shs_layout_free(&sw3.lo);
}

static void test_bug_case_57_elements(void **state) {
    (void)state;
    check_57(6, 30, "c57-e6"); /* ceil(57/2) = 29 -> 30 with E = 6: padded to 60 */
    check_57(1, 29, "c57-e1"); /* padded to 58 */
}


/* A hybrid-sharded run (G = 2 ranks per group, 2 replicas) saves one copy
 * of each shard (a 2-rank checkpoint). Resumed into the same configuration
 * it continues bit for bit like the uninterrupted run; resumed at another
 * world size and stage it has every parameter as saved. */
static void test_hybrid_save_resume(void **state) {
    shs_train_config_t h = small_config(4, SHS_HYBRID_SHARD, 1);
    h.strategy.shard_group_size = 2;
    shs_trainer_t *t = make(&h);
    steps(t, 3, NULL);
    save_ok(t, tpath("hybrid"));
    float *saved = params_of(t);
    /* uninterrupted vs resumed into the same hybrid configuration: the same
     * bits (parameters and optimizer state came back whole) */
    float la[2], lb[2];
    steps(t, 2, la);
    shs_trainer_t *th = make(&h);
    resume_ok(th, tpath("hybrid"));
    steps(th, 2, lb);
    assert_memory_equal(la, lb, sizeof la);
    float *pa = params_of(t), *pb = params_of(th);
    assert_memory_equal(pa, pb, shs_trainer_layout(t)->num_params * sizeof(float));
    free(pa);
    free(pb);
    shs_trainer_destroy(th);
    shs_trainer_destroy(t);
    /* the index says 2 ranks, two rank files */
    assert_int_equal(count_files(tpath("hybrid"), "-of-00002."), 2);
    shs_train_config_t z = small_config(3, SHS_ZERO3, 1);
    shs_trainer_t *r = make(&z);
    resume_ok(r, tpath("hybrid"));
    float *loaded = params_of(r);
    assert_memory_equal(saved, loaded, shs_trainer_layout(r)->num_params * sizeof(float));
    assert_int_equal(shs_trainer_steps_done(r), 3);
    free(saved);
    free(loaded);
    shs_trainer_destroy(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_check_value),
        cmocka_unit_test(test_resume_same_world_other_stage),
        cmocka_unit_test(test_resume_through_other_world_sizes),
        cmocka_unit_test(test_resume_sgd),
        cmocka_unit_test(test_resume_mixed_precision),
        cmocka_unit_test(test_bug_case_57_elements),
        cmocka_unit_test(test_hybrid_save_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
