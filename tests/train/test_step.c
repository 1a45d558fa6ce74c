/* test_step.c - the trainer's one step loop (src/train/step.c): size-based
 * wrapping (train --wrap size:N) and the decorators in front of the
 * strategy's parameter source, attached only when asked.
 *
 * References: a DDP run with one unit per block (the plain layout, no wrap
 * decorator) for the values; the greedy grouping rule worked out by hand
 * for the unit counts; `shardsim compare`'s report for the same model and
 * N; the strategy's own source (shs_strategy_source) for pointer equality.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "shardsim/meta_run.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "train/step.h"

/* L=6 C=16 NH=2 T=8: a block holds 12 C^2 + 13 C = 3280 elements */
#define BLOCK 3280

static shs_train_config_t small(shs_strategy_kind_t kind, int N) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 6, .num_heads = 2, .channels = 16, .context = 8};
    cfg.world_size = N;
    cfg.micro_batch = 2;
    cfg.strategy.kind = kind;
    return cfg;
}

/* Tensor ti of a snapshot (shs_trainer_snapshot) of layout lo. */
static const float *tensor_in(const shs_layout_t *lo, int N, const float *snap, int ti) {
    const shs_tensor_info_t *t = &lo->tensors[ti];
    size_t base = 0;
    for (int u = 0; u < t->unit; u++) base += shs_padded_numel(lo->units[u].numel, N, 1);
    return snap + base + t->offset;
}

typedef struct {
    float loss[3];
    float *snap;
    shs_layout_t layout; /* copy of the trainer's unit and tensor tables (pointers freed with the trainer) */
    int num_units;
} run_t;

static void run(const shs_train_config_t *cfg, run_t *r) {
    shs_trainer_t *t;
    if (shs_trainer_create(&t, cfg, &test_corpus) != SHS_OK) fail_msg("create: %s", shs_last_error());
    for (int s = 0; s < 3; s++)
        if (shs_trainer_step(t, &r->loss[s]) != SHS_OK) fail_msg("step %d: %s", s + 1, shs_last_error());
    r->snap = malloc(shs_trainer_snapshot_len(t) * sizeof(float));
    assert_non_null(r->snap);
    assert_int_equal(shs_trainer_snapshot(t, r->snap), SHS_OK);
    const shs_layout_t *lo = shs_trainer_layout(t);
    r->num_units = lo->num_units;
    r->layout = *lo;
    r->layout.units = malloc((size_t)lo->num_units * sizeof *lo->units);
    r->layout.tensors = malloc((size_t)lo->num_tensors * sizeof *lo->tensors);
    assert_true(r->layout.units && r->layout.tensors);
    memcpy(r->layout.units, lo->units, (size_t)lo->num_units * sizeof *lo->units);
    memcpy(r->layout.tensors, lo->tensors, (size_t)lo->num_tensors * sizeof *lo->tensors);
    shs_trainer_destroy(t);
}

static void run_free(run_t *r) {
    free(r->snap);
    free(r->layout.units);
    free(r->layout.tensors);
}

/* Every strategy with blocks grouped two by two gives DDP's losses and
 * parameters bit for bit (N = 3 pads the grouped units differently from
 * the blocks; hybrid sharding with one replica, G = N, as the README's
 * exactness rules say: 1 < G < N sums group sums, not DDP's order). */
static void test_wrap_size_equals_ddp(void **state) {
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3, SHS_HYBRID_SHARD,
                                                SHS_HYBRID_SHARD_ZERO2};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int N = 3;
        shs_train_config_t ref_cfg = small(SHS_DDP, N), cfg = small(kinds[k], N);
        cfg.wrap_min_params = 2 * BLOCK;
        cfg.strategy.clip_norm = kinds[k] == SHS_ZERO3 ? 0.5f : 0.0f; /* the norm over grouped units too */
        ref_cfg.strategy.clip_norm = cfg.strategy.clip_norm;
        run_t ref, got;
        run(&ref_cfg, &ref);
        run(&cfg, &got);
        const char *name = shs_strategy_name(kinds[k]);
        assert_int_equal(ref.num_units, 8);
        if (got.num_units != 5) fail_msg("%s: %d units, want 5 (embed, 3 pairs of blocks, lnf)", name, got.num_units);
        for (int s = 0; s < 3; s++)
            if (memcmp(&ref.loss[s], &got.loss[s], sizeof(float)))
                fail_msg("%s step %d: loss %.9g, DDP's %.9g", name, s + 1, got.loss[s], ref.loss[s]);
        assert_int_equal(got.layout.num_tensors, ref.layout.num_tensors);
        for (int ti = 0; ti < ref.layout.num_tensors; ti++) {
            const shs_tensor_info_t *t = &ref.layout.tensors[ti];
            assert_string_equal(got.layout.tensors[ti].name, t->name);
            size_t n = (size_t)t->rows * (size_t)t->cols;
            const float *a = tensor_in(&ref.layout, N, ref.snap, ti), *b = tensor_in(&got.layout, N, got.snap, ti);
            for (size_t i = 0; i < n; i++)
                if (memcmp(&a[i], &b[i], sizeof(float)))
                    fail_msg("%s: %s[%zu] = %.9g, DDP's %.9g", name, t->name, i, b[i], a[i]);
        }
        run_free(&ref);
        run_free(&got);
    }
}

/* Units by the greedy rule (blocks added to a unit while it holds fewer
 * than N elements): N = 1 one per block, 8 units; N = 2 blocks: pairs, 5;
 * N = 2 blocks + 1: triples, 4; N = 6 blocks: one group, 3. The trainer,
 * the meta run and the CLIs agree. */
static void test_wrap_size_units(void **state) {
    static const struct { size_t n; int units; } cases[] = {{1, 8}, {2 * BLOCK, 5}, {2 * BLOCK + 1, 4}, {6 * BLOCK, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        shs_train_config_t cfg = small(SHS_ZERO3, 2);
        cfg.wrap_min_params = cases[c].n;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        assert_int_equal(shs_trainer_layout(t)->num_units, cases[c].units);
        shs_trainer_destroy(t);
        shs_meta_config_t mc = {.train = cfg};
        shs_meta_result_t m;
        assert_int_equal(shs_meta_run(&mc, &m), SHS_OK);
        assert_int_equal(m.num_units, cases[c].units);
        shs_meta_result_free(&m);

        char wrap[48], want[64];
        snprintf(wrap, sizeof wrap, "size:%zu", cases[c].n);
        const test_proc_t *p = test_shardsim(60, "train", "--layers", "6", "--channels", "16", "--heads", "2",
                                             "--context", "8", "--world", "2", "--steps", "1", "--wrap", wrap, NULL);
        if (p->exit_code != 0) fail_msg("train --wrap %s: %s", wrap, p->err);
        snprintf(want, sizeof want, "params in %d units", cases[c].units);
        if (!strstr(p->out, want)) fail_msg("train --wrap %s: no '%s' in\n%s", wrap, want, p->out);
        p = test_shardsim(60, "compare", "--layers", "6", "--channels", "16", "--heads", "2", "--context", "8",
                          "--world", "2", "--strategies", "zero3", "--wrap", wrap, NULL);
        if (p->exit_code != 0) fail_msg("compare --wrap %s: %s", wrap, p->err);
        snprintf(want, sizeof want, "  %d wrap units;", cases[c].units);
        if (!strstr(p->out, want)) fail_msg("compare --wrap %s: no '%s' in\n%s", wrap, want, p->out);
    }
}

/* Size-based wrapping groups GPT blocks (or Llama layers): a described model is refused, and
 * so are checkpoints (their units are the blocks), before any step. */
static void test_wrap_size_refused(void **state) {
    const test_proc_t *p = test_shardsim(30, "train", "--steps", "1", "--wrap", "size:1000", "--model-file",
                                         SHS_SOURCE_DIR "/sim/models/mlp.txt", NULL);
    assert_int_not_equal(p->exit_code, 0);
    if (!strstr(p->err, "size-based wrapping applies to the GPT and the Llama only")) fail_msg("stderr: %s", p->err);
    const char *opts[] = {"--save", "--resume"};
    for (int k = 0; k < 2; k++) {
        /* the default model's blocks (198,272 elements) grouped in pairs */
        p = test_shardsim(30, "train", "--steps", "1", "--wrap", "size:300000", opts[k], "/tmp/shs-no-such-dir", NULL);
        assert_int_equal(p->exit_code, 2);
        if (!strstr(p->err, "--wrap size:300000: checkpoints (--save, --resume) keep one unit per block"))
            fail_msg("%s: stderr: %s", opts[k], p->err);
        assert_null(strstr(p->out, "step 1/1"));
    }
}

/* Without --trace and --memory-timeline every rank's model calls its
 * strategy's own source; with them rank 0's is decorated, and the losses
 * and parameters stay the same bits. */
static void test_decorators_only_when_asked(void **state) {
    shs_train_config_t cfg = small(SHS_ZERO3, 2);
    shs_trainer_t *plain, *deco;
    assert_int_equal(shs_trainer_create(&plain, &cfg, &test_corpus), SHS_OK);
    for (int r = 0; r < 2; r++)
        assert_ptr_equal(shs__trainer_model_source(plain, r), shs_strategy_source(shs_trainer_strategy(plain, r)));
    shs_trace_recorder_t *rec;
    assert_int_equal(shs_trace_recorder_create(&rec, 2), SHS_OK);
    cfg.trace = rec;
    cfg.memory_timeline = 1;
    assert_int_equal(shs_trainer_create(&deco, &cfg, &test_corpus), SHS_OK);
    for (int r = 0; r < 2; r++)
        assert_ptr_not_equal(shs__trainer_model_source(deco, r), shs_strategy_source(shs_trainer_strategy(deco, r)));
    for (int s = 0; s < 2; s++) {
        float a, b;
        assert_int_equal(shs_trainer_step(plain, &a), SHS_OK);
        assert_int_equal(shs_trainer_step(deco, &b), SHS_OK);
        assert_memory_equal(&a, &b, sizeof a);
    }
    size_t n = shs_trainer_snapshot_len(plain);
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    assert_true(x && y);
    assert_int_equal(shs_trainer_snapshot(plain, x), SHS_OK);
    assert_int_equal(shs_trainer_snapshot(deco, y), SHS_OK);
    assert_memory_equal(x, y, n * sizeof(float));
    int segs;
    assert_null(shs_trainer_timeline(plain, &segs));
    assert_non_null(shs_trainer_timeline(deco, &segs));
    assert_true(segs > 0);
    free(x);
    free(y);
    shs_trainer_destroy(plain);
    shs_trainer_destroy(deco);
    shs_trace_recorder_free(rec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decorators_only_when_asked),
        cmocka_unit_test(test_wrap_size_units),
        cmocka_unit_test(test_wrap_size_refused),
        cmocka_unit_test(test_wrap_size_equals_ddp),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
