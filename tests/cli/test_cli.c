/* test_cli.c - the shardsim program as a user runs it: exit codes and
 * one-line messages for each kind of bad input, and the main job with
 * --check ddp succeeding. Every run has a wall-clock limit: a hang fails. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "cli/cli_expect.h"
#include "shardsim/features.h"

#define BIN SHS_BIN_PATH

/* shardsim with these arguments (NULL-terminated), 120 s at most. */
#define run_args(...) test_shardsim(120.0, __VA_ARGS__)

/* Exit code and a substring of stderr; bad input gives exactly one error line
 * "shardsim COMMAND: error: ..." (plus optional "shardsim COMMAND: note:"
 * lines), never a crash (cli_expect.h). */
#define expect_error test_expect_error

static const char *tmp_file(const char *name, const char *content) {
    return test_tmp_write(name, content, strlen(content));
}

/* The header says which activation options took effect, and says nothing
 * new for a default run (its output is compared byte for byte elsewhere). */
static void test_train_header_names_activation_options(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--steps", "1", "--world", "2", "--attention", "flash", "--autocast", "bf16",
                                    "--dropout", "0.25", "--recompute-granularity", "selective", NULL);
    if (p->exit_code != 0 ||
        !strstr(p->out, "activations: attention flash, autocast bf16, dropout 0.25, recompute selective"))
        fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", p->exit_code, p->out, p->err);
    p = run_args("train", "--steps", "1", "--world", "2", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_null(strstr(p->out, "activations:"));
}

static void test_unknown_command_and_option(void **state) {
    (void)state;
    expect_error(run_args("frobnicate", NULL), 2, "unknown command 'frobnicate'");
    expect_error(run_args("train", "--wrold", "4", NULL), 2, "unknown option '--wrold'");
    expect_error(run_args("train", "stray", NULL), 2, "unexpected argument 'stray'");
    expect_error(run_args("train", "--steps", NULL), 2, "--steps needs a value");
    expect_error(run_args("train", "--bogus", NULL), 2, "unknown option '--bogus'");
    expect_error(run_args("train", "--strategy", "zero4", NULL), 2, "unknown strategy 'zero4'");
    expect_error(run_args("train", "--check", "zero1", NULL), 2, "--check takes 'ddp'");
    expect_error(run_args("train", "--optimizer", "lion", NULL), 2, "unknown optimizer 'lion'");
}

/* The test suite's planted faults are no options of the product; they come
 * from SHS_TEST_FAULT (sim/test_fault.h), checked like any input. */
static void test_test_hooks_are_not_options(void **state) {
    (void)state;
    expect_error(run_args("train", "--debug-mismatch-rank", "1", NULL), 2, "unknown option '--debug-mismatch-rank'");
    expect_error(run_args("train", "--debug-stall-rank", "1", NULL), 2, "unknown option '--debug-stall-rank'");
    setenv("SHS_TEST_FAULT", "stall:1", 1);
    expect_error(run_args("train", "--steps", "1", NULL), 2, "SHS_TEST_FAULT=stall:1 needs --backend mpi");
    setenv("SHS_TEST_FAULT", "stall:x", 1);
    expect_error(run_args("train", "--steps", "1", NULL), 2, "SHS_TEST_FAULT=stall:x: rank 'x' is not an integer");
    setenv("SHS_TEST_FAULT", "crash:1", 1);
    expect_error(run_args("train", "--steps", "1", NULL), 2, "SHS_TEST_FAULT=crash:1: want mismatch:RANK or stall:RANK");
    unsetenv("SHS_TEST_FAULT");
    const test_proc_t *p = run_args("train", "--help", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_null(strstr(p->out, "--debug-"));
}

/* The first line of OPT's entry in CMD's --help, up to " (default" (the
 * default may differ per command). */
static void help_line(const char *cmd, const char *opt, char *out, size_t n) {
    const test_proc_t *p = run_args(cmd, "--help", NULL);
    assert_int_equal(p->exit_code, 0);
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", opt);
    const char *l = strstr(p->out, key);
    if (!l) fail_msg("%s --help has no %s", cmd, opt);
    l += 1;
    size_t len = strcspn(l, "\n");
    const char *d = strstr(l, " (default");
    if (d && (size_t)(d - l) < len) len = (size_t)(d - l);
    snprintf(out, n, "%.*s", (int)len, l);
}

/* Options train and compare share mean the same in both: the same --help
 * entry and the same range and error for a bad value. (--world and
 * --shard-group-size differ on purpose: compare's meta run takes up to
 * 65536 ranks, train's threads 1024; test_compare.c checks compare's.) */
static void test_shared_options_agree(void **state) {
    (void)state;
    static const char *const shared[][2] = {{"--layers", "1025"}, {"--heads", "0"}, {"--channels", "65537"},
                                            {"--context", "0"}, {"--micro-batch", "0"}, {"--momentum", "2"},
                                            {"--grad-accum-dtype", "f64"}};
    for (size_t k = 0; k < sizeof shared / sizeof shared[0]; k++) {
        char a[256], b[256];
        help_line("train", shared[k][0], a, sizeof a);
        help_line("compare", shared[k][0], b, sizeof b);
        assert_string_equal(a, b);
        char err[2][256];
        const char *cmds[2] = {"train", "compare"};
        for (int c = 0; c < 2; c++) {
            const test_proc_t *p = run_args(cmds[c], shared[k][0], shared[k][1], NULL);
            assert_int_equal(p->exit_code, 2);
            const char *e = strstr(p->err, "error: ");
            assert_non_null(e);
            snprintf(err[c], sizeof err[c], "%.*s", (int)(strstr(e, " (see ") ? strstr(e, " (see ") - e : 200), e);
        }
        assert_string_equal(err[0], err[1]);
    }
}

static void test_bad_numbers(void **state) {
    (void)state;
    expect_error(run_args("train", "--world", "0", NULL), 2, "--world: 0 is out of range");
    expect_error(run_args("train", "--world", "1000000", NULL), 2, "--world: 1000000 is out of range");
    expect_error(run_args("train", "--world", "-3", NULL), 2, "out of range");
    expect_error(run_args("train", "--world", "99999999999999999999", NULL), 2, "--world: 99999999999999999999 is out of range");
    expect_error(run_args("train", "--steps", "-1", NULL), 2, "--steps: -1 is out of range");
    expect_error(run_args("train", "--steps", "ten", NULL), 2, "'ten' is not an integer");
    expect_error(run_args("train", "--lr", "fast", NULL), 2, "'fast' is not a number");
    expect_error(run_args("train", "--device-mem", "80Gb", NULL), 2, "unknown unit");
    expect_error(run_args("train", "--heads", "3", "--channels", "16", NULL), 2, "--heads 3 must divide --channels 16");
    expect_error(run_args("train", "--seed", "-1", NULL), 2, "--seed: -1 is out of range");
    /* conflicting feature options are usage errors */
    expect_error(run_args("train", "--strategy", "zero3", "--shard-group-size", "2", NULL), 2,
                 "--shard-group-size applies to hybrid_shard");
    expect_error(run_args("train", "--world", "6", "--strategy", "hybrid_shard", "--shard-group-size", "4", NULL), 2,
                 "--shard-group-size 4 must divide the world size 6");
    expect_error(run_args("train", "--world", "3", "--reduce-order", "ring", "--check", "ddp", "--inject-bitflip", "1",
                          NULL), 2, "--inject-bitflip needs an exact --check");
    expect_error(run_args("train", "--norm-type", "2", NULL), 2, "--norm-type needs --clip-grad-norm");
    expect_error(run_args("train", "--strategy", "ddp", "--offload", "params", NULL), 2,
                 "--offload params needs sharded parameters (zero3 or hybrid_shard), not ddp");
    expect_error(run_args("train", "--param-dtype", "fp8", NULL), 2, "--param-dtype takes f32, bf16 or f16");
    /* outputs go to places that exist and are writable, checked before training */
    expect_error(run_args("train", "--export-safetensors", "/nonexistent/dir/x", NULL), 2,
                 "--export-safetensors /nonexistent/dir/x: cannot create: No such file or directory");
    expect_error(run_args("train", "--memory-timeline", "/nonexistent/x.svg", NULL), 2,
                 "--memory-timeline /nonexistent/x.svg: cannot create");
}

/* --seed takes any value in 0..2^62 (its upper bound once converted to
 * LONG_MIN, refusing every seed); the same seed gives the same run. */
static void test_seed_values(void **state) {
    (void)state;
    static char first[65536];
    static const char *const seeds[] = {"0", "42", "1337", "4611686018427387904"};
    for (int i = 0; i < 4; i++) {
        const test_proc_t *p = run_args("train", "--world", "1", "--steps", "1", "--layers", "1", "--channels", "8",
                                        "--heads", "2", "--context", "8", "--seed", seeds[i], NULL);
        if (p->exit_code != 0) fail_msg("--seed %s: exit %d: %s", seeds[i], p->exit_code, p->err);
        const char *loss = strstr(p->out, "loss ");
        assert_non_null(loss);
        /* "loss 5.543400 |" : the loss alone, not the step time after the bar */
        if (i == 2) snprintf(first, sizeof first, "%.*s", (int)strcspn(loss, "|"), loss);
    }
    const test_proc_t *p = run_args("train", "--world", "1", "--steps", "1", "--layers", "1", "--channels", "8",
                                    "--heads", "2", "--context", "8", "--seed", "1337", NULL);
    const char *again = strstr(p->out, "loss ");
    assert_non_null(again);
    assert_int_equal(strcspn(again, "|"), strlen(first));
    assert_int_equal(strncmp(again, first, strlen(first)), 0);
}

/* Option order never matters, and options of the other optimizer are refused. */
static void test_optimizer_options(void **state) {
    (void)state;
    static char a[65536], b[65536];
    const test_proc_t *p = run_args("train", "--world", "1", "--steps", "3", "--layers", "1", "--channels", "16",
                                    "--context", "16", "--momentum", "0.9", "--optimizer", "sgd", NULL);
    assert_int_equal(p->exit_code, 0);
    snprintf(a, sizeof a, "%s", p->out);
    p = run_args("train", "--world", "1", "--steps", "3", "--layers", "1", "--channels", "16", "--context", "16",
                 "--optimizer", "sgd", "--momentum", "0.9", NULL);
    assert_int_equal(p->exit_code, 0);
    snprintf(b, sizeof b, "%s", p->out);
    const char *la = strstr(a, "step 3/3 | loss "), *lb = strstr(b, "step 3/3 | loss ");
    assert_non_null(la);
    assert_non_null(lb);
    assert_memory_equal(la, lb, 30);
    p = run_args("train", "--world", "1", "--steps", "3", "--layers", "1", "--channels", "16", "--context", "16",
                 "--optimizer", "sgd", NULL);
    assert_memory_not_equal(strstr(p->out, "step 3/3 | loss "), lb, 30); /* momentum made a difference */
    expect_error(run_args("train", "--momentum", "0.9", NULL), 2, "--momentum applies to sgd, not adamw");
    expect_error(run_args("train", "--optimizer", "sgd", "--beta1", "0.8", NULL), 2, "--beta1 applies to adamw, not sgd");
    expect_error(run_args("train", "--beta1", "1", NULL), 2, "--beta1: 1 is out of range [0, 1)");
    /* below a half-open range: the same notation as above it (not "0..1" beside "[0, 1)") */
    expect_error(run_args("train", "--beta1", "-0.5", NULL), 2, "--beta1: -0.5 is out of range [0, 1)");
    expect_error(run_args("train", "--lr", "1e-50", NULL), 2, "below the smallest f32");
}

/* AdamW with eps = 0 makes 0/0 on padding: padding must still stay 0. */
static void test_eps_zero_keeps_padding(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "3", "--steps", "2", "--layers", "1", "--channels", "16",
                                    "--context", "16", "--eps", "0", "--check", "ddp", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
}

static void test_divergence_and_output_errors(void **state) {
    (void)state;
    expect_error(run_args("train", "--world", "2", "--steps", "5", "--layers", "1", "--channels", "16", "--context",
                          "16", "--lr", "1e6", NULL), 1, "training diverged");
    /* a full disk is an error, not a silent success */
    char *argv[] = {"/bin/sh", "-c", BIN " train --world 1 --steps 1 --layers 1 --channels 8 --context 8 > /dev/full",
                    NULL};
    static test_proc_t full;
    test_run_process(argv, 60, &full);
    assert_int_equal(full.exit_code, 1);
    assert_non_null(strstr(full.err, "cannot write the output"));
}

static void test_bad_data_files(void **state) {
    (void)state;
    expect_error(run_args("train", "--data", "/nonexistent/corpus.txt", NULL), 1,
                 "cannot read data file '/nonexistent/corpus.txt'");
    expect_error(run_args("train", "--data", tmp_file("empty.txt", ""), NULL), 1, "is empty");
    expect_error(run_args("train", "--data", test_tmpdir, NULL), 1, "is a directory");
    /* devices and pipes could block or never end: refused before reading */
    expect_error(run_args("train", "--data", "/dev/zero", NULL), 1, "is not a regular file");
    expect_error(run_args("train", "--model-file", "/dev/zero", NULL), 1, "is not a regular file");
    /* 32 bytes of text cannot hold one sequence of context 64 */
    expect_error(run_args("train", "--data", tmp_file("short.txt", "thirty-two bytes of text here!!\n"), "--context", "64",
                          NULL), 1, "context length 64 needs at least 65 bytes");
}

static void test_model_does_not_fit(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--device-mem", "1MiB", "--steps", "1", NULL);
    expect_error(p, 1, "out of device memory");
    assert_non_null(strstr(p->err, "rank "));
    assert_non_null(strstr(p->err, "of 1.00 MiB in use"));
}

/* Every boolean option: alone it means true, with true|false (yes/no, 1/0)
 * or =WORD it is that value; a next argument that is no such word is the next
 * option. A bad word is refused naming the option. */
static void test_boolean_options(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--forward-prefetch", "--steps", "1", "--loss-bits", NULL);
    if (p->exit_code != 0) fail_msg("bare --forward-prefetch: exit %d\n%s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "step 1/1 | loss "));
    assert_non_null(strstr(p->out, "| loss bits 0x")); /* a bare boolean last on the line */
    p = run_args("train", "--world", "2", "--steps", "1", "--loss-bits", "false", "--checkpoint-activations", "no",
                 "--reshard-after-forward=0", "--poison-freed-buffers", "yes", NULL);
    if (p->exit_code != 0) fail_msg("boolean words: exit %d\n%s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "step 1/1 | loss "));
    assert_null(strstr(p->out, "loss bits"));
    expect_error(run_args("train", "--forward-prefetch", "maybe", NULL), 2,
                 "unexpected argument 'maybe' after --forward-prefetch");
    expect_error(run_args("train", "--forward-prefetch=maybe", NULL), 2,
                 "option --forward-prefetch takes true or false, or no value for true (got 'maybe')");
    expect_error(run_args("train", "--loss-bits=", NULL), 2, "option --loss-bits takes true or false");
    /* a value that is the next option is no value: the error names the option missing one */
    expect_error(run_args("train", "--data", "--steps", "1", NULL), 2, "option --data needs a value, not the option '--steps'");
    expect_error(run_args("train", "--world=", NULL), 2, "--world: '' is not an integer");
    expect_error(run_args("bench", "--in-place", "maybe", NULL), 2, "unexpected argument 'maybe' after --in-place");
    expect_error(run_args("bench", "--op", "--in-place", NULL), 2, "option --op needs a value");
    expect_error(run_args("compare", "--world", "--strategies", "ddp", NULL), 2, "option --world needs a value");
}

/* One error format everywhere: "shardsim COMMAND: error: ..." */
static void test_error_format(void **state) {
    (void)state;
    static const char *const cmds[] = {"train", "bench", "replay", "compare"};
    for (int k = 0; k < 4; k++) {
        const test_proc_t *p = run_args(cmds[k], "--bogus", NULL);
        char want[96];
        snprintf(want, sizeof want, "shardsim %s: error: unknown option '--bogus' (see 'shardsim %s --help')\n", cmds[k],
                 cmds[k]);
        assert_int_equal(p->exit_code, 2);
        assert_string_equal(p->err, want);
    }
    const test_proc_t *p = run_args("train", "--data", "/nonexistent/file.txt", NULL);
    expect_error(p, 1, "/nonexistent/file.txt");
    assert_memory_equal(p->err, "shardsim train: error: ", 23);
    p = run_args("compare", "--strategies", "ddp,,zero3", NULL);
    expect_error(p, 2, "shardsim compare: error: --strategies: empty entry in 'ddp,,zero3'");
}

/* --backend mpi outside an MPI launcher would run a world of one process:
 * refused, saying how to launch (or, in a build without MPI, which package
 * it needs). */
static void test_mpi_backend_needs_launcher(void **state) {
    (void)state;
    unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("PMI_SIZE"), unsetenv("PMIX_RANK");
    const test_proc_t *p = run_args("train", "--backend", "mpi", "--world", "4", "--steps", "1", NULL);
#ifdef SHS_HAVE_MPI
    expect_error(p, 2, "--backend mpi runs one rank per process under an MPI launcher");
    assert_non_null(strstr(p->err, "run mpirun -np 4 "));
    assert_non_null(strstr(p->err, "shardsim train --backend mpi ..."));
    p = run_args("train", "--backend", "mpi-nccl", NULL);
    expect_error(p, 2, "run mpirun -np N ");
#else
    expect_error(p, 2, "--backend mpi needs libopenmpi-dev and openmpi-bin");
#endif
}

/* The message for each optional library names its Debian package(s) and
 * how to get them; every refusal takes its words from it. */
static void test_feature_messages(void **state) {
    (void)state;
    static const struct {
        shs_feature_t f;
        const char *pkgs, *how;
    } want[] = {
        {SHS_FEATURE_JANSSON, "needs libjansson-dev: ", "run make deps"},
        {SHS_FEATURE_PROTOBUF_C, "needs libprotobuf-c-dev and protobuf-c-compiler: ", "run make deps"},
        {SHS_FEATURE_MPI, "needs libopenmpi-dev and openmpi-bin: ", "run make deps"},
        {SHS_FEATURE_CUDA, "needs the CUDA toolkit's nvcc (Debian: nvidia-cuda-toolkit): ", "then make without NVCC="},
        {SHS_FEATURE_ZLIB, "needs zlib1g-dev: ", "run make deps"},
    };
    assert_int_equal(sizeof want / sizeof want[0], SHS_NUM_FEATURES);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const char *m = shs_feature_missing(want[k].f);
        if (strncmp(m, want[k].pkgs, strlen(want[k].pkgs)) != 0 || !strstr(m, want[k].how))
            fail_msg("feature %zu: '%s' lacks '%s' or '%s'", k, m, want[k].pkgs, want[k].how);
    }
    assert_string_equal(shs_feature_missing(SHS_NUM_FEATURES), "");
#ifdef SHS_HAVE_JANSSON
    assert_true(shs_feature_available(SHS_FEATURE_JANSSON));
#else
    assert_false(shs_feature_available(SHS_FEATURE_JANSSON));
    expect_error(run_args("bench", "--format", "json", NULL), 2, "--format json needs libjansson-dev");
#endif
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* The loss text of the last "step K/N | loss X" line of out. */
static void last_step_loss(const char *out, const char *step, char *loss, size_t n) {
    const char *q = strstr(out, step);
    if (!q) fail_msg("no '%s' in:\n%s", step, out);
    q = strstr(q, "| loss ");
    assert_non_null(q);
    snprintf(loss, n, "%.8s", q + 7);
}

/* --steps 0: initialize, export and save the initial weights; the step-0
 * checkpoint resumes into the same run as one never interrupted. */
static void test_zero_steps(void **state) {
    (void)state;
    char dir[512], st[512], ref[16], got[16];
    snprintf(dir, sizeof dir, "%s/ck0", test_tmpdir);
    snprintf(st, sizeof st, "%s/init.safetensors", test_tmpdir);
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "0", "--save", dir, "--export-safetensors", st,
                                    NULL);
    if (p->exit_code != 0) fail_msg("--steps 0: exit %d\n%s", p->exit_code, p->err);
    assert_null(strstr(p->out, "step 1/"));
    assert_non_null(strstr(p->out, "saved checkpoint"));
    assert_non_null(strstr(p->out, "(step 0, "));
    /* safetensors: 8-byte little-endian header length, the JSON header, then
     * the default GPT's parameters in f32: V=256, C=128, T=64, L=4:
     * V*C + T*C + L*(12*C*C + 13*C) + 2*C = 834304 */
    FILE *f = fopen(st, "rb");
    assert_non_null(f);
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, f), 8);
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = hlen << 8 | len8[k];
    assert_true(hlen > 0 && hlen < 65536);
    char *header = calloc(1, hlen + 1);
    assert_int_equal(fread(header, 1, hlen, f), hlen);
    fclose(f);
    assert_non_null(strstr(header, "\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[256,128]"));
    free(header);
    assert_int_equal(file_size(st), 8 + (long)hlen + 834304L * 4);
    /* resumed from step 0: the same losses as an uninterrupted run */
    p = run_args("train", "--world", "2", "--steps", "2", NULL);
    assert_int_equal(p->exit_code, 0);
    last_step_loss(p->out, "step 2/2 |", ref, sizeof ref);
    p = run_args("train", "--world", "4", "--strategy", "ddp", "--micro-batch", "2", "--steps", "2", "--resume", dir,
                 NULL);
    if (p->exit_code != 0) fail_msg("resume from step 0: exit %d\n%s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "after step 0: steps 1..2"));
    last_step_loss(p->out, "step 2/2 |", got, sizeof got);
    assert_string_equal(got, ref);
    expect_error(run_args("train", "--steps", "0", "--memory-timeline", st, NULL), 2,
                 "needs a step to draw (--steps 0 runs none)");
}

/* --save-every reports each save (directory, step, size); a resumed run
 * numbers its steps from the checkpoint's. */
static void test_save_every_and_resume_numbering(void **state) {
    (void)state;
    char dir[512], line[600];
    snprintf(dir, sizeof dir, "%s/ck-every", test_tmpdir);
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "3", "--save", dir, "--save-every", "1", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s", p->exit_code, p->err);
    for (int s = 1; s <= 3; s++) {
        snprintf(line, sizeof line, "saved checkpoint %s (step %d, ", dir, s);
        if (!strstr(p->out, line)) fail_msg("no '%s' in:\n%s", line, p->out);
    }
    assert_non_null(strstr(p->out, " MiB in 3 files)\n")); /* index and two rank files of about 5 MiB */
    p = run_args("train", "--world", "2", "--steps", "2", "--resume", dir, "--loss-bits", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "resumed from"));
    assert_non_null(strstr(p->out, "\nstep 4/5 | loss "));
    assert_non_null(strstr(p->out, "\nstep 5/5 | loss "));
    assert_null(strstr(p->out, "step 1/"));
    assert_non_null(strstr(p->out, "final loss "));
    assert_non_null(strstr(p->out, "after step 5 (2 steps in this run)"));
    expect_error(run_args("train", "--world", "2", "--steps", "1", "--resume", dir, "--check", "ddp",
                          "--inject-bitflip", "1", NULL), 2, "--inject-bitflip 1 is not a step of this run (4..4)");
}

/* A phase that runs longer than --progress seconds is announced on stderr;
 * by default (5 s) a short run says nothing there. */
static void test_progress_lines(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "1", "--progress", "0.001", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s", p->exit_code, p->err);
    if (!strstr(p->err, "shardsim train: running step 1/1 on 2 rank threads ... ("))
        fail_msg("no progress line in stderr:\n%s", p->err);
    /* --progress 0 turns the lines off (the default, 5 s, is a wall-clock
     * threshold: a slow machine or a sanitizer build may cross it) */
    p = run_args("train", "--world", "2", "--steps", "1", "--progress", "0", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_string_equal(p->err, "");
}

/* The main job on the real corpus: ZeRO-3 matches DDP bit for bit. */
static void test_train_check_ddp_passes(void **state) {
    (void)state;
    char data[1024];
    snprintf(data, sizeof data, "%s/data/tinyshakespeare.txt", test_shared_dir());
    const char *strategies[] = {"zero1", "zero2", "zero3"};
    for (int i = 0; i < 3; i++) {
        const test_proc_t *p = run_args("train", "--world", "3", "--strategy", strategies[i], "--data", data, "--steps",
                                        "3", "--layers", "1", "--channels", "24", "--heads", "2", "--context", "16",
                                        "--check", "ddp", NULL);
        if (p->exit_code != 0) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
        assert_non_null(strstr(p->out, "step 3/3"));
        assert_non_null(strstr(p->out, "ddp check: bit-identical"));
        assert_non_null(strstr(p->out, "matched DDP bit for bit at all 3 steps"));
        assert_non_null(strstr(p->out, "peak device memory per rank"));
        /* the emulation's own buffers are labelled, beside what the GPU run would hold */
        assert_non_null(strstr(p->out, "  of which emulation (rank 0): up to "));
        assert_non_null(strstr(p->out, "GPU run would peak at "));
        assert_non_null(strstr(p->out, "reduce_scatter"));
    }
}

/* A planted one-bit fault is found and named, with exit code 3: under
 * ZeRO-3 in the owner's shard, under ZeRO-2 in the last rank's replica. */
static void test_check_names_first_difference(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "3", "--strategy", "zero3", "--steps", "4", "--layers", "1",
                                    "--channels", "16", "--context", "16", "--check", "ddp", "--inject-bitflip", "2",
                                    NULL);
    if (p->exit_code != 3) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
    assert_non_null(strstr(p->out, "step 1/4"));
    assert_non_null(strstr(p->out, "ddp check: PARAMETERS DIFFER"));
    assert_null(strstr(p->out, "step 3/4"));
    assert_non_null(strstr(p->err, "check failed at step 2: first difference in unit embed, tensor wte, "
                                   "element 0 (row 0, col 0)"));
    p = run_args("train", "--world", "3", "--strategy", "zero2", "--steps", "3", "--layers", "1", "--channels", "16",
                 "--context", "16", "--check", "ddp", "--inject-bitflip", "1", NULL);
    if (p->exit_code != 3) fail_msg("exit %d\n%s\n%s", p->exit_code, p->out, p->err);
    assert_non_null(strstr(p->out, "ddp check: REPLICAS DIFFER"));
    assert_non_null(strstr(p->err, "check failed at step 1: in the zero2 run, rank 2's copy of unit embed, tensor wte, "
                                   "element 0 differs from the shard owner's"));
    expect_error(run_args("train", "--inject-bitflip", "1", NULL), 2, "--inject-bitflip needs --check ddp");
    expect_error(run_args("train", "--check", "ddp", "--steps", "2", "--inject-bitflip", "3", NULL), 2,
                 "--inject-bitflip needs --check ddp");
}

/* No --data: the built-in corpus, so a fresh machine needs nothing else. */
static void test_train_builtin_corpus(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "2", "--layers", "1", "--channels", "16",
                                    "--context", "16", NULL);
    if (p->exit_code != 0) fail_msg("exit %d\n%s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "data built-in"));
    assert_non_null(strstr(p->out, "final loss"));
}

static void test_help_and_version(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--help", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_non_null(strstr(p->out, "--device-mem"));
    p = run_args("version", NULL);
    assert_int_equal(p->exit_code, 0);
    assert_non_null(strstr(p->out, "shardsim "));
}

/* GradScaler's knobs from the CLI: the default model at world 2 and scale
 * 131072 overflows in f16 on step 1 (skipped everywhere), so the next scale
 * is 131072 x backoff; with growth every good step it is then x growth (at
 * 65536 step 2 fits). The expected scales are that arithmetic, done here. */
static void test_loss_scaler_options(void **state) {
    (void)state;
    const test_proc_t *p = run_args("train", "--world", "2", "--steps", "2", "--param-dtype", "f16", "--init-scale",
                                    "131072", "--backoff-factor", "0.25", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "step 1/2 | loss"));
    assert_non_null(strstr(p->out, "scale 32768 (overflow: step skipped)")); /* 131072 x 0.25 */
    p = run_args("train", "--world", "2", "--steps", "2", "--param-dtype", "f16", "--init-scale", "131072",
                 "--growth-interval", "1", "--growth-factor", "4", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "scale 65536 (overflow: step skipped)")); /* 131072 x 0.5 */
    assert_non_null(strstr(p->out, "scale 262144 |"));                       /* 65536 x 4 after one good step */
    expect_error(run_args("train", "--backoff-factor", "0.5", NULL), 2, "apply to --param-dtype f16");
    expect_error(run_args("train", "--param-dtype", "f16", "--backoff-factor", "1", NULL), 2, "--backoff-factor: 1 is out of range");
    expect_error(run_args("train", "--param-dtype", "f16", "--growth-factor", "0.5", NULL), 2, "--growth-factor: 0.5 is out of range");
    expect_error(run_args("train", "--param-dtype", "f16", "--growth-factor", "1", NULL), 2, "--growth-factor must be > 1 (got '1')");
    /* DeepSpeed's rule, hysteresis 2: the first overflow at 131072 spends the
     * counter (scale kept), the second halves it */
    p = run_args("train", "--world", "2", "--steps", "2", "--param-dtype", "f16", "--init-scale", "131072",
                 "--loss-scaler", "deepspeed", "--hysteresis", "2", NULL);
    if (p->exit_code != 0) fail_msg("exit %d: %s", p->exit_code, p->err);
    assert_non_null(strstr(p->out, "scale 131072 (overflow: step skipped)"));
    assert_non_null(strstr(p->out, "scale 65536 (overflow: step skipped)"));
    expect_error(run_args("train", "--param-dtype", "f16", "--loss-scaler", "apex", NULL), 2, "unknown --loss-scaler 'apex'");
    expect_error(run_args("train", "--param-dtype", "f16", "--hysteresis", "2", NULL), 2,
                 "apply to --loss-scaler deepspeed, not torch");
    expect_error(run_args("train", "--param-dtype", "f16", "--loss-scaler", "deepspeed", "--growth-factor", "4", NULL), 2,
                 "apply to --loss-scaler torch");
}

int main(void) {
    if (access(BIN, X_OK) != 0) {
        fprintf(stderr, "test_cli: %s is not built (run make)\n", BIN);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_command_and_option),
        cmocka_unit_test(test_train_header_names_activation_options),
        cmocka_unit_test(test_test_hooks_are_not_options),
        cmocka_unit_test(test_shared_options_agree),
        cmocka_unit_test(test_bad_numbers),
        cmocka_unit_test(test_seed_values),
        cmocka_unit_test(test_bad_data_files),
        cmocka_unit_test(test_optimizer_options),
        cmocka_unit_test(test_eps_zero_keeps_padding),
        cmocka_unit_test(test_divergence_and_output_errors),
        cmocka_unit_test(test_model_does_not_fit),
        cmocka_unit_test(test_boolean_options),
        cmocka_unit_test(test_error_format),
        cmocka_unit_test(test_mpi_backend_needs_launcher),
        cmocka_unit_test(test_feature_messages),
        cmocka_unit_test(test_zero_steps),
        cmocka_unit_test(test_save_every_and_resume_numbering),
        cmocka_unit_test(test_progress_lines),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_train_builtin_corpus),
        cmocka_unit_test(test_check_names_first_difference),
        cmocka_unit_test(test_train_check_ddp_passes),
        cmocka_unit_test(test_loss_scaler_options),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
