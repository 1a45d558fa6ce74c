/* test_checkpoint_refusals.c - checkpoints that must not load: missing,
 * truncated, corrupted and mismatched files refused with a message naming
 * what and where; saving over a checkpoint, and a failed save keeping the
 * previous one whole. */
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

/* ---- refusals ------------------------------------------------------------------ */

static void copy_dir(const char *from, const char *to) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    assert_int_equal(system(cmd), 0);
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, at, at < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* Resume into a fresh trainer must fail with `needle` in the error, and
 * leave its parameters and step count as they were. */
static void expect_refused(const shs_train_config_t *cfg, const char *dir, const char *needle, const char *needle2) {
    shs_trainer_t *t = make(cfg);
    steps(t, 1, NULL);
    float *before = params_of(t);
    shs_status_t st = shs_checkpoint_resume(t, dir);
    const char *err = shs_last_error();
    if (st == SHS_OK || !strstr(err, needle) || (needle2 && !strstr(err, needle2)))
        fail_msg("resume %s: expected an error with '%s' and '%s', got %s: %s", dir, needle, needle2 ? needle2 : "",
                 shs_status_name(st), err);
    assert_int_equal(shs_trainer_steps_done(t), 1);
    float *after = params_of(t);
    assert_memory_equal(before, after, shs_trainer_layout(t)->num_params * sizeof(float));
    free(before);
    free(after);
    shs_trainer_destroy(t);
}

static void test_refuses_bad_checkpoints(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(2, SHS_ZERO3, 1);
    shs_trainer_t *t = make(&cfg);
    steps(t, 2, NULL);
    const char *good = tpath("good");
    char good_s[512];
    snprintf(good_s, sizeof good_s, "%s", good);
    save_ok(t, good_s);
    shs_trainer_destroy(t);
    shs_train_config_t other = small_config(3, SHS_ZERO1, 1);
    char d[512];

    snprintf(d, sizeof d, "%s", tpath("missing-rank"));
    copy_dir(good_s, d);
    assert_int_equal(unlink(rank_file(d, 1, 2, 1)), 0);
    expect_refused(&other, d, rank_file(d, 1, 2, 1), "missing");

    snprintf(d, sizeof d, "%s", tpath("truncated-rank"));
    copy_dir(good_s, d);
    truncate_by(rank_file(d, 0, 2, 1), 4);
    expect_refused(&other, d, rank_file(d, 0, 2, 1), "truncated");

    snprintf(d, sizeof d, "%s", tpath("corrupt-rank"));
    copy_dir(good_s, d);
    flip_byte(rank_file(d, 1, 2, 1), 1000);
    expect_refused(&other, d, rank_file(d, 1, 2, 1), "checksum mismatch");

    snprintf(d, sizeof d, "%s", tpath("corrupt-index"));
    copy_dir(good_s, d);
    char ip[600];
    snprintf(ip, sizeof ip, "%s/index.txt", d);
    flip_byte(ip, 40);
    expect_refused(&other, d, ip, "checksum mismatch");

    snprintf(d, sizeof d, "%s", tpath("truncated-index"));
    copy_dir(good_s, d);
    snprintf(ip, sizeof ip, "%s/index.txt", d);
    truncate_by(ip, 30);
    expect_refused(&other, d, ip, "truncated");

    snprintf(d, sizeof d, "%s", tpath("no-index"));
    copy_dir(good_s, d);
    snprintf(ip, sizeof ip, "%s/index.txt", d);
    assert_int_equal(unlink(ip), 0);
    expect_refused(&other, d, ip, "missing");

    expect_refused(&other, tpath("does-not-exist"), "does-not-exist", "not a checkpoint directory");

    /* a rank file from another save (same size, valid header, other data) */
    shs_trainer_t *t2 = make(&cfg);
    steps(t2, 3, NULL);
    save_ok(t2, tpath("later"));
    shs_trainer_destroy(t2);
    snprintf(d, sizeof d, "%s", tpath("mixed"));
    copy_dir(good_s, d);
    char cmd[1400], later[600];
    snprintf(later, sizeof later, "%s", rank_file(tpath("later"), 1, 2, 1));
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", later, rank_file(d, 1, 2, 1));
    assert_int_equal(system(cmd), 0);
    expect_refused(&other, d, rank_file(d, 1, 2, 1), "checksum mismatch");

    /* mismatches with the run */
    shs_train_config_t bad = other;
    bad.model.num_layers = 3;
    expect_refused(&bad, good_s, "holds model 'gpt layers=2 heads=4 channels=16 context=16'", "layers=3");
    bad = other;
    bad.model.context = 8;
    expect_refused(&bad, good_s, "context=16", "context=8");
    bad = other;
    bad.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    expect_refused(&bad, good_s, "saved with optimizer adamw; this run uses sgd", NULL);
    bad = other;
    bad.strategy.optim.lr = 2e-3f;
    expect_refused(&bad, good_s, "lr 0.00100000005; this run has 0.00200000009", NULL);
    bad = other;
    bad.strategy.seed = 1;
    expect_refused(&bad, good_s, "seed 1337; this run has 1", NULL);
    bad = other;
    bad.strategy.clip_norm = 1.0f;
    bad.strategy.norm_type = 2;
    expect_refused(&bad, good_s, "gradient clipping", NULL);
    bad = other;
    bad.strategy.param_dtype = SHS_BF16;
    expect_refused(&bad, good_s, "param dtype f32, reduce dtype f32; this run has bf16, bf16", NULL);

    /* and the good one loads, at another size and stage */
    t = make(&other);
    resume_ok(t, good_s);
    assert_int_equal(shs_trainer_steps_done(t), 2);
    shs_trainer_destroy(t);
}

/* ---- saving over a checkpoint; a failed save keeps the previous one ------------ */

static void test_failed_save_keeps_previous(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(2, SHS_ZERO2, 1);
    shs_trainer_t *t = make(&cfg);
    steps(t, 2, NULL);
    float *at2 = params_of(t);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tpath("resave"));
    save_ok(t, dir);
    steps(t, 1, NULL);

    /* rank 1's temp file of the next save cannot be created */
    char blocker[700];
    snprintf(blocker, sizeof blocker, "%s.tmp", rank_file(dir, 1, 2, 2));
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_not_equal(shs_checkpoint_save(t, dir), SHS_OK);
    if (!strstr(shs_last_error(), blocker)) fail_msg("error does not name %s: %s", blocker, shs_last_error());
    assert_int_equal(count_files(dir, ".g2.bin"), 1); /* only the blocker; rank 0's new file was removed */
    assert_int_equal(count_files(dir, ".g1.bin"), 2);

    shs_train_config_t c3 = small_config(3, SHS_DDP, 1);
    shs_trainer_t *r = make(&c3);
    resume_ok(r, dir);
    assert_int_equal(shs_trainer_steps_done(r), 2);
    float *got = params_of(r);
    assert_memory_equal(got, at2, shs_trainer_layout(r)->num_params * sizeof(float));
    free(got);
    shs_trainer_destroy(r);
    assert_int_equal(rmdir(blocker), 0);

    /* every rank file written, but the index cannot be: the new files go */
    snprintf(blocker, sizeof blocker, "%s/index.txt.tmp", dir);
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_not_equal(shs_checkpoint_save(t, dir), SHS_OK);
    if (!strstr(shs_last_error(), blocker)) fail_msg("error does not name %s: %s", blocker, shs_last_error());
    assert_int_equal(count_files(dir, ".g2.bin"), 0);
    assert_int_equal(count_files(dir, ".g1.bin"), 2);
    r = make(&c3);
    resume_ok(r, dir);
    assert_int_equal(shs_trainer_steps_done(r), 2);
    shs_trainer_destroy(r);
    assert_int_equal(rmdir(blocker), 0);

    /* the blockers gone, saving over the checkpoint works and replaces it */
    float *at3 = params_of(t);
    save_ok(t, dir);
    assert_int_equal(count_files(dir, ".g1.bin"), 0);
    assert_int_equal(count_files(dir, ".g2.bin"), 2);
    assert_int_equal(count_files(dir, ".tmp"), 0);
    r = make(&c3);
    resume_ok(r, dir);
    assert_int_equal(shs_trainer_steps_done(r), 3);
    got = params_of(r);
    assert_memory_equal(got, at3, shs_trainer_layout(r)->num_params * sizeof(float));
    free(got);
    shs_trainer_destroy(r);
    shs_trainer_destroy(t);
    free(at2);
    free(at3);

    /* a path that is a file cannot hold a checkpoint */
    FILE *f = fopen(tpath("plainfile"), "w");
    fclose(f);
    t = make(&cfg);
    assert_int_equal(shs_checkpoint_save(t, tpath("plainfile")), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "not a directory"));
    shs_trainer_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_bad_checkpoints),
        cmocka_unit_test(test_failed_save_keeps_previous),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
