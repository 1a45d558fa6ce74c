/* test_model_file_train.c - models from model-description files through
 * the trainer: ZeRO-1/2/3 against DDP bit for bit on the layouts that
 * break real systems (a tied embedding, sim/models/tied_tiny.txt; sizes
 * [8, 0, 24], sim/models/zero_size.txt; mixed layouts; zero-size
 * positions), and `--model-file` end to end on the command line. */
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

#include "shardsim/model_file.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "harness.h"

#include "model_file_text.h"

/* ---- equivalence through the trainer ------------------------------------- */

#define STEPS 3

typedef struct {
    float loss[STEPS];
    float *snap[STEPS];
    size_t len;
} run_record_t;

static void run(const shs_train_config_t *cfg, run_record_t *rec) {
    shs_trainer_t *t = NULL;
    shs_status_t st = shs_trainer_create(&t, cfg, &test_corpus);
    if (st != SHS_OK) fail_msg("trainer_create (%s): %s", shs_strategy_name(cfg->strategy.kind), shs_last_error());
    rec->len = shs_trainer_snapshot_len(t);
    for (int s = 0; s < STEPS; s++) {
        st = shs_trainer_step(t, &rec->loss[s]);
        if (st != SHS_OK) fail_msg("%s step %d: %s", shs_strategy_name(cfg->strategy.kind), s, shs_last_error());
        rec->snap[s] = malloc(rec->len * sizeof(float));
        assert_non_null(rec->snap[s]);
        assert_int_equal(shs_trainer_snapshot(t, rec->snap[s]), SHS_OK);
    }
    shs_trainer_destroy(t);
}

static void free_record(run_record_t *rec) {
    for (int s = 0; s < STEPS; s++) free(rec->snap[s]);
}

/* Real elements memcmp-equal unit by unit, padding +0.0 in both. */
static void assert_same_params(const shs_layout_t *lo, int n, size_t align, const float *ddp, const float *zero) {
    size_t base = 0;
    for (int u = 0; u < lo->num_units; u++) {
        size_t numel = lo->units[u].numel, padded = shs_padded_numel(numel, n, align);
        if (numel) assert_memory_equal(ddp + base, zero + base, numel * sizeof(float));
        for (size_t i = numel; i < padded; i++) {
            uint32_t a, b;
            memcpy(&a, ddp + base + i, 4);
            memcpy(&b, zero + base + i, 4);
            assert_int_equal(a, 0u);
            assert_int_equal(b, 0u);
        }
        base += padded;
    }
}

/* DDP first, then ZeRO-1/2/3 on the same config: losses and parameters bit
 * for bit after every step. Returns DDP's record (caller frees). */
static run_record_t check_equivalence(const shs_model_file_t *nd, shs_train_config_t cfg) {
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    cfg.model_file = nd;
    cfg.strategy.kind = SHS_DDP;
    size_t align = cfg.strategy.shard_align ? cfg.strategy.shard_align : 1;
    run_record_t ddp = {0};
    run(&cfg, &ddp);
    for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        run_record_t z = {0};
        run(&cfg, &z);
        assert_int_equal(z.len, ddp.len);
        for (int s = 0; s < STEPS; s++) {
            if (memcmp(&ddp.loss[s], &z.loss[s], sizeof(float)) != 0)
                fail_msg("N=%d %s step %d: loss %.9g vs ddp %.9g", cfg.world_size, shs_strategy_name(cfg.strategy.kind), s,
                         (double)z.loss[s], (double)ddp.loss[s]);
            assert_same_params(&lo, cfg.world_size, align, ddp.snap[s], z.snap[s]);
        }
        free_record(&z);
    }
    assert_memory_not_equal(ddp.snap[0], ddp.snap[STEPS - 1], ddp.len * sizeof(float));
    shs_layout_free(&lo);
    return ddp;
}

static shs_train_config_t small_config(int world, shs_optim_kind_t opt) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.world_size = world;
    cfg.micro_batch = 2;
    cfg.model.context = 8;
    cfg.strategy.optim = shs_optim_default(opt);
    if (opt == SHS_OPTIM_SGD) cfg.strategy.optim.lr = 0.5f;
    cfg.timeout_ms = 20000;
    cfg.strategy.bucket_bytes = 64; /* several DDP buckets */
    return cfg;
}

/* A tied Embedding of 10 rows x 4 columns used for input lookup
 * and output logits, SGD, 3 steps, N = 2, 3, 4. With --shard-align 4 (one row)
 * the shards hold 5/5, 4/4/2 and 3/3/3/1 rows; without, 20/20, 14/14/12 and
 * 10/10/10/10 elements (rows cut in the middle). ZeRO-3 equals DDP bit for
 * bit, padding stays zero, and no row is left untrained. */
static void test_tied_embedding(void **state) {
    (void)state;
    static const char text[] =
        "unit embed\n"
        "Embedding 10 4 name=wte\n"
        "unit head\n"
        "Linear 4 10 nobias tied=wte\n";
    shs_model_file_t *nd = parse_ok(text);
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    float init[40];
    shs_layout_init_range(&lo, shs_train_default_config().strategy.seed, 0, 0, 40, init);
    static const int worlds[] = {2, 3, 4};
    static const int rows_last[] = {5, 2, 1}, rows_first[] = {5, 4, 3};
    for (int w = 0; w < 3; w++) {
        for (size_t align = 1; align <= 4; align += 3) {
            int N = worlds[w];
            if (align == 4) {
                assert_int_equal(shs_shard_size(40, N, 4), (size_t)rows_first[w] * 4);
                assert_int_equal(shs_shard_of(40, N, N - 1, 4).valid, (size_t)rows_last[w] * 4);
            }
            shs_train_config_t cfg = small_config(N, SHS_OPTIM_SGD);
            cfg.strategy.shard_align = align;
            run_record_t ddp = check_equivalence(nd, cfg);
            /* every row moved from its initial value (wte is unit 0, first in the snapshot) */
            for (int r = 0; r < 10; r++)
                if (memcmp(ddp.snap[STEPS - 1] + r * 4, init + r * 4, 16) == 0)
                    fail_msg("N=%d align %zu: row %d of wte is still at its initial value", N, align, r);
            free_record(&ddp);
        }
    }
    shs_layout_free(&lo);
    shs_model_file_free(nd);
}

/* Parameters of sizes [8, 0, 24] at N = 2 (the empty one inside
 * rank 0's shard) and a trailing Linear(4, 0): no crash, identical to DDP. */
static void test_zero_size_params(void **state) {
    (void)state;
    shs_model_file_t *nd = parse_ok(zero_size_text);
    for (int opt = 0; opt < 2; opt++) {
        run_record_t ddp = check_equivalence(nd, small_config(2, opt ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW));
        free_record(&ddp);
    }
    shs_model_file_free(nd);
}

/* Everything else at once: tiny units (numel < N), an empty unit, a
 * replicated unit, a unit holding only unused tensors, ReLU and GELU, an
 * untied Embedding, zero-width matmuls in the path; N = 3, 5 (and 2 with
 * --shard-align 4). */
static void test_mixed_layouts(void **state) {
    (void)state;
    static const char text[] =
        "unit emb\n"
        "Embedding 16 6\n"
        "unit blk\n"
        "Linear 6 12\n"
        "GELU\n"
        "Linear 12 6 name=proj\n"
        "ReLU\n"
        "unit tiny\n"
        "LayerNorm 1 unused        # 2 elements, fewer than N\n"
        "unit empty\n"
        "unit norm replicated\n"
        "LayerNorm 6\n"
        "unit narrow\n"
        "Linear 6 0\n"
        "Linear 0 3                # bias only\n"
        "Linear 3 5 name=head\n";
    shs_model_file_t *nd = parse_ok(text);
    static const int worlds[] = {3, 5};
    for (int w = 0; w < 2; w++) {
        run_record_t ddp = check_equivalence(nd, small_config(worlds[w], SHS_OPTIM_ADAMW));
        free_record(&ddp);
    }
    shs_train_config_t cfg = small_config(2, SHS_OPTIM_SGD);
    cfg.strategy.shard_align = 4;
    run_record_t ddp = check_equivalence(nd, cfg);
    free_record(&ddp);
    shs_model_file_free(nd);
}

/* Zero-size parameters at the start, in the middle and at the end of a
 * unit; the middle one exactly on the N = 2 shard boundary (offset 4 of 8);
 * and a unit of one 2-element tensor, so that at N = 3 and N = 5 the last
 * ranks own nothing but padding, and at N = 2 each owns one element. */
static void test_zero_size_positions(void **state) {
    (void)state;
    static const char text[] =
        "unit a\n"
        "Linear 4 0 unused          # 0 elements, at the start\n"
        "Linear 2 2 nobias name=p   # 4 elements: [0, 4)\n"
        "Linear 4 0 unused          # 0 elements at offset 4: the N = 2 shard boundary\n"
        "LayerNorm 2                # 4 elements: [4, 8)\n"
        "Linear 4 0 unused          # 0 elements, at the end\n"
        "unit b\n"
        "LayerNorm 1 unused         # 2 elements\n";
    shs_model_file_t *nd = parse_ok(text);
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    assert_int_equal(lo.units[0].numel, 8);
    int zeros = 0;
    for (int i = lo.units[0].first_tensor; i < lo.units[0].first_tensor + lo.units[0].num_tensors; i++)
        if (lo.tensors[i].numel == 0) {
            zeros++;
            assert_true(lo.tensors[i].offset == 0 || lo.tensors[i].offset == 4 || lo.tensors[i].offset == 8);
        }
    assert_true(zeros >= 3);
    assert_int_equal(lo.units[1].numel, 2);
    shs_layout_free(&lo);
    static const int worlds[] = {2, 3, 5};
    for (int w = 0; w < 3; w++) {
        run_record_t ddp = check_equivalence(nd, small_config(worlds[w], w == 1 ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW));
        free_record(&ddp);
    }
    shs_model_file_free(nd);
}

/* The example files shipped in sim/models/ parse and train under the CLI,
 * --check ddp passing. */
static void test_cli_model_file(void **state) {
    (void)state;
    static const char *files[] = {"sim/models/tied_tiny.txt", "sim/models/zero_size.txt", "sim/models/mlp.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        shs_model_file_t *nd = NULL;
        if (shs_model_file_load(&nd, files[i]) != SHS_OK) fail_msg("%s", shs_last_error());
        shs_model_file_free(nd);
        char *argv[] = {SHS_BIN_PATH, "train", "--model-file", (char *)files[i], "--world", "3", "--steps", "2",
                        "--context", "8", "--check", "ddp", "--device-mem", "unlimited", NULL};
        test_proc_t *p = calloc(1, sizeof *p);
        test_run_process(argv, 60, p);
        if (p->exit_code != 0) fail_msg("%s: exit %d\n%s%s", files[i], p->exit_code, p->out, p->err);
        assert_non_null(strstr(p->out, "matched DDP bit for bit at all 2 steps"));
        free(p);
    }
    /* a bad file: one error line naming file and line, exit 1 */
    char path[] = "/tmp/shs_model_file_cli_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char bad_text[] = "unit a\nLinear 4 8\nLayerNorm 6\n";
    assert_int_equal(write(fd, bad_text, sizeof bad_text - 1), (ssize_t)(sizeof bad_text - 1));
    close(fd);
    char *argv[] = {SHS_BIN_PATH, "train", "--model-file", path, "--steps", "1", NULL};
    test_proc_t *p = calloc(1, sizeof *p);
    test_run_process(argv, 60, p);
    assert_int_equal(p->exit_code, 1);
    char want[256];
    snprintf(want, sizeof want,
             "shardsim train: error: %s:3: LayerNorm expects input width 6, but the layer before it (line 2) outputs 8\n", path);
    assert_string_equal(p->err, want);
    free(p);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tied_embedding),
        cmocka_unit_test(test_zero_size_params),
        cmocka_unit_test(test_mixed_layouts),
        cmocka_unit_test(test_zero_size_positions),
        cmocka_unit_test(test_cli_model_file),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
