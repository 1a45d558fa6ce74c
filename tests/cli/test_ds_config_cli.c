/* test_ds_config_cli.c - `--ds-config` on the command line (sim/): a
 * DeepSpeed config with ZeRO stage 3 and CPU offload runs `train` (the small
 * default GPT) and `compare`; the options given beside it win and the header
 * says so; a bad config exits non-zero naming the file and the key.
 *
 * Independent references: DeepSpeed's key meanings (config-json.md) for the
 * expected strategy/offload, and the batch product 2 x 2 x 2 = 8 by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#ifdef SHS_HAVE_JANSSON
#include "train/ds_real_configs.h"
#endif

static const char z3_offload[] =
    "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, \"train_batch_size\": 8,"
    " \"gradient_clipping\": 1.0, \"steps_per_print\": 10, \"bf16\": {\"enabled\": true},"
    " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4, \"weight_decay\": 0.1}},"
    " \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true},"
    "   \"offload_param\": {\"device\": \"cpu\"}, \"overlap_comm\": true}}";

#ifdef SHS_HAVE_JANSSON
static void test_train_stage3_offload(void **state) {
    (void)state;
    const char *path = test_tmp_write("z3.json", z3_offload, sizeof z3_offload - 1);
    const test_proc_t *p = test_shardsim(120, "train", "--ds-config", path, "--world", "2", "--steps", "2",
                                         "--layers", "2", "--channels", "64", "--heads", "2", "--context", "32", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "strategy zero3 (config); offload params+optimizer (config)"));
    assert_non_null(strstr(p->out, "param dtype bf16 (config)"));
    assert_non_null(strstr(p->out, "micro-batch 2 (config) x accumulation 2 (config) x world 2 (command line) = "
                                   "train_batch_size 8"));
    assert_non_null(strstr(p->out, "clipping: global 2-norm to 1 (config)"));
    assert_non_null(strstr(p->out, "optimizer adamw (config): lr 0.0003 (config)"));
    assert_non_null(strstr(p->out, "ignored: steps_per_print"));
    assert_non_null(strstr(p->out, "step 2/2"));
    assert_non_null(strstr(p->out, "offload (rank 0)")); /* the offload really ran */
}

static void test_command_line_wins(void **state) {
    (void)state;
    const char *path = test_tmp_write("z3.json", z3_offload, sizeof z3_offload - 1);
    /* --strategy zero2 and --offload optimizer replace the file's; --micro-batch 1 makes its three contradict */
    const test_proc_t *p = test_shardsim(120, "train", "--ds-config", path, "--world", "2", "--steps", "1",
                                         "--layers", "2", "--channels", "64", "--heads", "2", "--context", "32",
                                         "--strategy", "zero2", "--offload", "optimizer", "--lr", "0.01", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "strategy zero2 (command line); offload optimizer (command line)"));
    assert_non_null(strstr(p->out, "lr 0.01 (command line)"));
    p = test_shardsim(60, "train", "--ds-config", path, "--world", "2", "--steps", "1", "--micro-batch", "1", NULL);
    assert_int_equal(p->exit_code, 1);
    assert_non_null(strstr(p->err, "train_batch_size 8 != train_micro_batch_size_per_gpu 1 (command line)"));
}

static void test_compare_stage3_offload(void **state) {
    (void)state;
    const char *path = test_tmp_write("z3.json", z3_offload, sizeof z3_offload - 1);
    const test_proc_t *p = test_shardsim(120, "compare", "--ds-config", path, "--world", "2", "--layers", "2",
                                         "--channels", "64", "--heads", "2", "--context", "32", "--vocab", "256", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "strategy zero3 (config); offload params+optimizer (config)"));
    assert_non_null(strstr(p->out, "\nzero3+offload "));  /* the config's one row */
    assert_null(strstr(p->out, "\nddp "));
    assert_null(strstr(p->out, "\nzero3 "));
}

/* A usual fp16 config (DeepSpeed's default hysteresis 2) runs: from 2^20
 * the first overflow only spends the counter (the scale stays), the next
 * halves it; ZeRO-3 equal to DDP throughout. */
static void test_fp16_deepspeed_scaler_runs(void **state) {
    (void)state;
    static const char cfg[] = "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 20, "
                              "\"loss_scale_window\": 2}, \"zero_optimization\": {\"stage\": 3}}";
    const char *path = test_tmp_write("fp16.json", cfg, sizeof cfg - 1);
    const test_proc_t *p = test_shardsim(120, "train", "--ds-config", path, "--world", "2", "--steps", "3", "--layers",
                                         "1", "--channels", "16", "--heads", "2", "--context", "16", "--check", "ddp",
                                         NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "loss scaler deepspeed (DeepSpeed default): initial scale 1.04858e+06 (config), "
                                   "scale window 2 (config), hysteresis 2 (DeepSpeed default)"));
    assert_non_null(strstr(p->out, "step 1/3 | "));
    assert_non_null(strstr(p->out, "scale 1.04858e+06 (overflow: step skipped)"));
    assert_non_null(strstr(p->out, "scale 524288 (overflow: step skipped)"));
}

static void test_bad_config_names_file_and_key(void **state) {
    (void)state;
    static const char bad[] = "{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true, \"fp16_master_weights_and_grads\": "
                              "true}}";
    const char *path = test_tmp_write("bad.json", bad, sizeof bad - 1);
    const char *cmds[] = {"train", "compare"};
    for (int k = 0; k < 2; k++) {
        const test_proc_t *p = test_shardsim(60, cmds[k], "--ds-config", path, "--world", "2", NULL);
        assert_int_not_equal(p->exit_code, 0);
        assert_non_null(strstr(p->err, "bad.json: fp16.fp16_master_weights_and_grads = true is not modelled"));
    }
    static const char unknown[] = "{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, \"offload\": 1}}";
    path = test_tmp_write("unknown.json", unknown, sizeof unknown - 1);
    const test_proc_t *p = test_shardsim(60, "train", "--ds-config", path, "--world", "2", NULL);
    assert_int_not_equal(p->exit_code, 0);
    assert_non_null(strstr(p->err, "unknown.json: unknown key zero_optimization.offload"));
}

/* A small Llama config.json with torch_dtype bfloat16. */
static const char small_llama[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, \"num_attention_heads\": 4,"
    " \"num_hidden_layers\": 2, \"num_key_value_heads\": 2, \"vocab_size\": 256, \"max_position_embeddings\": 64,"
    " \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}";

/* compare --hf-config beside --ds-config: the config's fp16 wins over
 * torch_dtype, and without fp16/bf16 DeepSpeed's fp32 does (as train says). */
static void test_compare_dtype_precedence(void **state) {
    (void)state;
    char hf[512], p16[512], pp[512]; /* test_tmp_write's path is overwritten by the next call */
    static const char fp16[] = "{\"train_batch_size\": 2, \"fp16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3}}";
    static const char plain[] = "{\"train_batch_size\": 2, \"zero_optimization\": {\"stage\": 3}}";
    snprintf(hf, sizeof hf, "%s", test_tmp_write("llama.json", small_llama, sizeof small_llama - 1));
    snprintf(p16, sizeof p16, "%s", test_tmp_write("fp16.json", fp16, sizeof fp16 - 1));
    snprintf(pp, sizeof pp, "%s", test_tmp_write("plain.json", plain, sizeof plain - 1));
    const test_proc_t *p = test_shardsim(120, "compare", "--hf-config", hf, "--ds-config", p16, "--world", "2", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "param dtype f16 (config)"));
    assert_non_null(strstr(p->out, "loss scaler deepspeed"));
    p = test_shardsim(120, "compare", "--hf-config", hf, "--ds-config", pp, "--world", "2", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "param dtype f32 (DeepSpeed default)"));
    p = test_shardsim(120, "train", "--hf-config", hf, "--ds-config", pp, "--world", "2", "--steps", "1", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "param dtype f32 (DeepSpeed default)"));
}

/* --strategy zero1 over a stage-3 file: its stage-3 keys and offload_param
 * have no effect and the header says so; compare --variants says the rows
 * choose the offload; a MiCS group not dividing the world names the key. */
static void test_stage_override_cli(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s", test_tmp_write("z3.json", z3_offload, sizeof z3_offload - 1));
    const test_proc_t *p = test_shardsim(120, "train", "--ds-config", path, "--world", "2", "--steps", "1",
                                         "--layers", "2", "--channels", "64", "--heads", "2", "--context", "32",
                                         "--strategy", "zero1", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "strategy zero1 (command line); offload optimizer (config)"));
    assert_null(strstr(p->out, "replicate units below"));
    assert_non_null(strstr(p->out, "note: zero_optimization.offload_param: no effect, zero1 (command line)"));
    p = test_shardsim(120, "compare", "--ds-config", path, "--world", "2", "--layers", "2", "--channels", "64",
                      "--heads", "2", "--context", "32", "--vocab", "256", "--variants", "plain", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "offload: each row's own"));
    assert_null(strstr(p->out, "offload none (command line)"));
    static const char mics[] = "{\"train_batch_size\": 32, \"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 3}}";
    char mp[512];
    snprintf(mp, sizeof mp, "%s", test_tmp_write("mics.json", mics, sizeof mics - 1));
    const char *cmds[] = {"train", "compare"};
    for (int k = 0; k < 2; k++) {
        p = test_shardsim(60, cmds[k], "--ds-config", mp, "--world", "4", NULL);
        assert_int_not_equal(p->exit_code, 0);
        assert_non_null(strstr(p->err, "zero_optimization.mics_shard_size 3 must divide the world 4"));
        assert_null(strstr(p->err, "--shard-group-size"));
    }
}
/* The row of ds_real_configs.h named `name`, written to a file; its path. */
static const char *real_file(const char *name) {
    for (size_t k = 0; k < REAL_CONFIGS_COUNT; k++)
        if (!strcmp(real_configs[k].name, name))
            return test_tmp_write("real.json", real_configs[k].json, strlen(real_configs[k].json));
    fail_msg("no row %s", name);
    return NULL;
}

/* Real files through the command line: LLaMA-Factory's ZeRO-3 file (keys
 * DeepSpeed never reads) and Alpaca's (a scheduler: the lr only) in
 * compare; BingBertSquad's Adam without bias correction in train; an
 * axolotl ZeRO-3 file with a live-parameter budget of 0. */
static void test_real_files(void **state) {
    (void)state;
    const test_proc_t *p = test_shardsim(120, "compare", "--ds-config", real_file("lf__ds_z3_config"), "--world", "2",
                                         "--layers", "2", "--channels", "64", "--heads", "2", "--context", "32",
                                         "--vocab", "256", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "ignored: comms_config (not a DeepSpeed key"));
    assert_non_null(strstr(p->out, "\nzero3 "));
    p = test_shardsim(120, "compare", "--ds-config", real_file("alpaca__default_offload_opt_param"), "--world", "2",
                      "--layers", "2", "--channels", "64", "--heads", "2", "--context", "32", "--vocab", "256", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "ignored: scheduler (changes only the trained values, which compare does not "
                                   "compute)"));
    p = test_shardsim(120, "train", "--ds-config", real_file("dse__training_BingBertSquad_deepspeed_bsz24_config"),
                      "--world", "4", "--steps", "1", "--layers", "1", "--channels", "16", "--heads", "2", "--context",
                      "16", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "bias correction off (config)"));
    assert_non_null(strstr(p->out, "micro-batch 3 (config) x accumulation 2 (derived) x world 4"));
    /* axolotl's ZeRO-3 file: live budget 0 and reuse distance 0, DeepSpeed's "prefetch nothing, release
     * each unit after its use" (partitioned_param_coordinator.py) */
    p = test_shardsim(60, "compare", "--ds-config", real_file("ax__zero3"), "--world", "2", "--layers", "2",
                      "--channels", "64", "--heads", "2", "--context", "32", "--vocab", "256", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "max live 0 (nothing prefetched), max reuse distance 0"));
}
#else
static void test_without_jansson(void **state) {
    (void)state;
    const char *path = test_tmp_write("z3.json", z3_offload, sizeof z3_offload - 1);
    const test_proc_t *p = test_shardsim(60, "train", "--ds-config", path, NULL);
    assert_int_not_equal(p->exit_code, 0);
    assert_non_null(strstr(p->err, "jansson"));
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
#ifdef SHS_HAVE_JANSSON
        cmocka_unit_test(test_train_stage3_offload),
        cmocka_unit_test(test_command_line_wins),
        cmocka_unit_test(test_compare_stage3_offload),
        cmocka_unit_test(test_fp16_deepspeed_scaler_runs),
        cmocka_unit_test(test_compare_dtype_precedence),
        cmocka_unit_test(test_stage_override_cli),
        cmocka_unit_test(test_bad_config_names_file_and_key),
        cmocka_unit_test(test_real_files),
#else
        cmocka_unit_test(test_without_jansson),
#endif
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
