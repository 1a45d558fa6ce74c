/* test_recompute_cli.c - the recompute policies and autocast on the command
 * line (sim/options.c, sim/train_options.c, sim/cmd_compare.c), run as a
 * child process: a tiny Llama under ZeRO-3 with bf16 autocast and each
 * torchtitan policy bit-identical to DDP (--check ddp); compare running the
 * policies for llama3-8b, its rows ordered by what they keep, and the note
 * on Megatron's selective with flash attention; every bad spelling refused
 * with exit 2, naming the option, before any rank starts (no header).
 *
 * Independent references: DDP's bits; the policies' definitions (full keeps
 * least, none most, torchtitan's between); the options each refusal names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "shardsim/features.h"

#define run_args(...) test_shardsim(300.0, __VA_ARGS__)

/* GQA (4 heads, 2 key/value heads), untied head, byte vocabulary */
static const char tiny_llama[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,\n"
    " \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 256, \"max_position_embeddings\": 128,\n"
    " \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false}\n";

static void expect(const test_proc_t *p, int code, const char *in_out, const char *in_err) {
    if (p->exit_code != code || (in_out && !strstr(p->out, in_out)) || (in_err && !strstr(p->err, in_err)))
        fail_msg("exit %d (want %d); want stdout to hold '%s', stderr '%s'\n--- stdout:\n%s\n--- stderr:\n%s",
                 p->exit_code, code, in_out ? in_out : "", in_err ? in_err : "", p->out, p->err);
}

/* train --hf-config tiny --world 4 --strategy zero3 --autocast bf16 --check
 * ddp, with no recompute, op-level SAC and every 2nd layer. */
static void test_llama_autocast_policies_match_ddp(void **state) {
    (void)state;
    if (!shs_feature_available(SHS_FEATURE_JANSSON)) skip();
    const char *f = test_tmp_write("tiny.json", tiny_llama, strlen(tiny_llama));
    static const struct {
        const char *opt, *val, *label;
    } runs[] = {
        {NULL, NULL, "recompute none"},
        {"--selective-ac-option", "op", "recompute selective-op"},
        {"--selective-ac-option", "2", "recompute selective-2"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        const test_proc_t *p = runs[k].opt
            ? run_args("train", "--hf-config", f, "--world", "4", "--strategy", "zero3", "--autocast", "bf16", "--check",
                       "ddp", "--steps", "2", "--context", "32", "--ac-mode", "selective", runs[k].opt, runs[k].val, NULL)
            : run_args("train", "--hf-config", f, "--world", "4", "--strategy", "zero3", "--autocast", "bf16", "--check",
                       "ddp", "--steps", "2", "--context", "32", NULL);
        expect(p, 0, "zero3 matched DDP bit for bit at all 2 steps", NULL);
        expect(p, 0, "autocast bf16", NULL);
        expect(p, 0, runs[k].label, NULL);
        expect(p, 0, "(llama.h)", NULL);
    }
}

/* The activations column (bytes) of a CSV row named `name`. */
static double csv_activations(const char *out, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "\n%s,", name);
    const char *row = strstr(out, key);
    if (!row) fail_msg("no row %s in:\n%s", name, out);
    /* name,strategy,checkpointing,offload, then 7 fields, activations_bytes is the 12th */
    const char *c = row + 1;
    for (int i = 0; i < 11; i++) {
        c = strchr(c, ',');
        assert_non_null(c);
        c++;
    }
    return strtod(c, NULL);
}

/* compare --model llama3-8b with bf16 autocast, flash attention and bf16
 * parameters: each policy's row; full keeps least, none most, torchtitan's
 * policies between (every 2nd layer keeps more than op-level at this shape:
 * half the layers whole against every layer's saved mm outputs). */
static void test_compare_llama3_8b_policies(void **state) {
    (void)state;
    static const char *const common[] = {"compare", "--model", "llama3-8b", "--world", "8", "--micro-batch", "2",
                                         "--context", "8192", "--strategies", "zero3", "--autocast", "bf16",
                                         "--attention", "flash", "--param-dtype", "bf16", "--format", "csv"};
    static const struct {
        const char *a[4];
        const char *row;
    } policies[] = {
        {{"--ac-mode", "full", NULL, NULL}, "zero3+ckpt"},
        {{"--ac-mode", "selective", "--selective-ac-option", "op"}, "zero3+sac-op"},
        {{"--ac-mode", "selective", "--selective-ac-option", "2"}, "zero3+sac-2"},
    };
    double act[3], plain = 0;
    for (size_t k = 0; k < 3; k++) {
        char *argv[32];
        int n = 0;
        argv[n++] = SHS_BIN_PATH;
        for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) argv[n++] = (char *)common[i];
        for (int i = 0; i < 4 && policies[k].a[i]; i++) argv[n++] = (char *)policies[k].a[i];
        argv[n] = NULL;
        static test_proc_t p;
        test_run_process(argv, 300.0, &p);
        expect(&p, 0, policies[k].row, NULL);
        act[k] = csv_activations(p.out, policies[k].row);
        plain = csv_activations(p.out, "zero3");
        printf("llama3-8b zero3 %s: activations %.3f GiB (plain %.3f GiB)\n", policies[k].row, act[k] / 1073741824.0,
               plain / 1073741824.0);
    }
    assert_true(act[0] < act[1] && act[1] < act[2] && act[2] < plain);
}

/* Megatron's selective recompute with flash attention saves nothing: the
 * header says so, and its row keeps what the plain row keeps. */
static void test_megatron_selective_with_flash_noted(void **state) {
    (void)state;
    const test_proc_t *p = run_args("compare", "--model", "gpt2-124m", "--strategies", "zero2", "--attention", "flash",
                                    "--recompute-granularity", "selective", NULL);
    expect(p, 0, "zero2+sel", NULL);
    expect(p, 0, "note: Megatron's selective recompute drops eager attention's s^2 probabilities; flash", NULL);
    p = run_args("train", "--steps", "1", "--attention", "flash", "--recompute-granularity", "selective", NULL);
    expect(p, 0, "note: Megatron's selective recompute", NULL);
    p = run_args("train", "--steps", "1", "--recompute-granularity", "selective", NULL);
    if (strstr(p->out, "note: Megatron")) fail_msg("a note for eager attention, where selective saves:\n%s", p->out);
}

/* Bad spellings: exit 2, the option named, nothing run (no header line). */
static void test_refusals(void **state) {
    (void)state;
    static const struct {
        const char *a[6];
        const char *needle;
    } bad[] = {
        {{"--ac-mode", "some"}, "--ac-mode takes none, full or selective (got 'some')"},
        {{"--selective-ac-option", "op"}, "--selective-ac-option op applies with --ac-mode selective"},
        {{"--ac-mode", "full", "--selective-ac-option", "2"}, "applies with --ac-mode selective (got --ac-mode full)"},
        {{"--ac-mode", "selective", "--selective-ac-option", "0"}, "--selective-ac-option 0: N must be >= 1"},
        {{"--ac-mode", "selective", "--selective-ac-option", "-2"}, "--selective-ac-option -2: N must be >= 1"},
        {{"--ac-mode", "selective", "--selective-ac-option", "ops"}, "takes op or a block count N >= 1 (got 'ops')"},
        {{"--ac-mode", "selective", "--selective-ac-option", "5"},
         "--selective-ac-option 5: the model has 4 blocks, so no block would recompute"},
        {{"--checkpoint-activations", "--ac-mode", "none"}, "--checkpoint-activations conflicts with --ac-mode none"},
        {{"--recompute-granularity", "selective", "--ac-mode", "selective", "--selective-ac-option", "op"},
         "--recompute-granularity selective conflicts with --ac-mode selective --selective-ac-option op"},
        {{"--recompute-granularity", "full", "--ac-mode", "selective"}, "(--selective-ac-option 2 by default)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        for (int cmd = 0; cmd < 2; cmd++) {
            /* compare: gpt2-124m has 12 blocks; it has no --checkpoint-activations */
            if (cmd == 1 && (strstr(bad[k].needle, "blocks") || !strcmp(bad[k].a[0], "--checkpoint-activations")))
                continue;
            char *argv[16];
            int n = 0;
            argv[n++] = SHS_BIN_PATH;
            argv[n++] = cmd ? "compare" : "train";
            if (!cmd) argv[n++] = "--steps", argv[n++] = "1";
            for (int i = 0; i < 6 && bad[k].a[i]; i++) argv[n++] = (char *)bad[k].a[i];
            argv[n] = NULL;
            static test_proc_t p;
            test_run_process(argv, 60.0, &p);
            expect(&p, 2, NULL, bad[k].needle);
            if (p.out[0]) fail_msg("%s printed before refusing:\n%s", argv[1], p.out);
        }
    }
    /* compare: none is no checkpointing variant */
    const test_proc_t *p = run_args("compare", "--ac-mode", "none", NULL);
    expect(p, 2, NULL, "--ac-mode none: the checkpointing variants need full or selective");
    p = run_args("compare", "--ac-mode", "selective", "--selective-ac-option", "13", NULL);
    expect(p, 2, NULL, "--selective-ac-option 13: the model has 12 blocks");
}

int main(void) {
    if (access(SHS_BIN_PATH, X_OK) != 0) {
        fprintf(stderr, "test_recompute_cli: %s is not built (run make)\n", SHS_BIN_PATH);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_autocast_policies_match_ddp),
        cmocka_unit_test(test_compare_llama3_8b_policies),
        cmocka_unit_test(test_megatron_selective_with_flash_noted),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
