/* test_durable.c - the whole-or-nothing writers (include/shardsim/durable.h): the
 * stdio form every report, picture and trace export goes through, what the
 * CLI does when such a write fails, and every output option of the CLI
 * against the target policy (a device written in place, a symlink written
 * through, a directory or an unwritable one refused). */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardsim/durable.h"
#include "harness.h"

/* The devices the tests write to: as root, private nodes of /dev/full (1,7)
 * and /dev/null (1,3) made in the test's temp directory, so that a writer
 * that regressed to "rename over the target" replaces a throwaway node and
 * never the machine's /dev (CI runs as root); otherwise the real ones, which
 * a non-root writer cannot replace. Either way they must be writable. */
static char dev_full[512], dev_null[512];

static int private_device(char *out, size_t n, const char *name, unsigned minor) {
    snprintf(out, n, "%s/devs", test_tmpdir);
    mkdir(out, 0755);
    snprintf(out, n, "%s/devs/%s", test_tmpdir, name);
    if (geteuid() != 0 || mknod(out, S_IFCHR | 0666, makedev(1, minor)) != 0) snprintf(out, n, "/dev/%s", name);
    if (access(out, W_OK) == 0) return 0;
    fprintf(stderr, "%s: not writable: %s\n", out, strerror(errno));
    return -1;
}

static void expect_contents(const char *path, const char *text) {
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_int_equal(n, strlen(text));
    assert_memory_equal(buf, text, n);
}

static void path_in_tmp(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", test_tmpdir, name); }

/* A discarded write leaves the earlier file whole and no temp file;
 * a committed one replaces it. */
static void test_discard_keeps_earlier_commit_replaces(void **state) {
    (void)state;
    char path[512], tmp[520];
    path_in_tmp(path, sizeof path, "report.txt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    test_tmp_write("report.txt", "earlier\n", 8);
    shs_afile_t f;
    assert_int_equal(shs_afile_open(&f, path, "w"), SHS_OK);
    fputs("half of a new re", f.fp);
    expect_contents(path, "earlier\n"); /* nothing reaches the name before commit */
    shs_afile_discard(&f);
    expect_contents(path, "earlier\n");
    assert_int_not_equal(access(tmp, F_OK), 0);

    assert_int_equal(shs_afile_open(&f, path, "w"), SHS_OK);
    fputs("new report\n", f.fp);
    assert_int_equal(shs_afile_commit(&f), SHS_OK);
    expect_contents(path, "new report\n");
    assert_int_not_equal(access(tmp, F_OK), 0);
}

/* Errors name the path: a missing directory at open; a device that refuses
 * the bytes (/dev/full, written in place as a device) at commit. */
static void test_errors_name_the_path(void **state) {
    (void)state;
    shs_afile_t f;
    char path[512];
    path_in_tmp(path, sizeof path, "no/such/dir/x.json");
    assert_int_equal(shs_afile_open(&f, path, "w"), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "no/such/dir/x.json: cannot create"));

    assert_int_equal(shs_afile_open(&f, dev_full, "w"), SHS_OK);
    for (int i = 0; i < 2000; i++) fputs("0123456789abcdef", f.fp); /* more than one stdio buffer */
    assert_int_equal(shs_afile_commit(&f), SHS_IO);
    assert_non_null(strstr(shs_last_error(), dev_full));
    assert_null(f.fp);
}

/* A device is written in place, not renamed onto: --output /dev/stdout. */
static void test_device_written_in_place(void **state) {
    (void)state;
    shs_afile_t f;
    assert_int_equal(shs_afile_open(&f, dev_null, "w"), SHS_OK);
    fputs("discarded by the device\n", f.fp);
    assert_int_equal(shs_afile_commit(&f), SHS_OK);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", dev_null);
    assert_int_equal(access(tmp, F_OK) != 0, 1);
}

/* The CLI: a report that cannot be written is an error (exit 1, the path
 * named; stdout on a full device too), and a plot into a missing directory
 * leaves nothing behind. */
static void test_cli_write_failures(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    {
        char *full[] = {SHS_BIN_PATH, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                        "--world", "2", "--variants", "plain", "--output", dev_full, NULL};
        test_run_process(full, 60, p);
        assert_int_equal(p->exit_code, 1);
        assert_non_null(strstr(p->err, dev_full));
    }
    { /* a report that never reaches stdout is a failure too */
        char cmd[1200];
        snprintf(cmd, sizeof cmd,
                 SHS_BIN_PATH " compare --layers 1 --channels 32 --heads 2 --context 8 --world 2 --variants plain > '%s'",
                 dev_full);
        char *sh[] = {"/bin/sh", "-c", cmd, NULL};
        test_run_process(sh, 60, p);
        assert_int_equal(p->exit_code, 1);
        assert_non_null(strstr(p->err, "cannot write the output"));
    }
    char plot[512], out[512];
    path_in_tmp(plot, sizeof plot, "missing/plot.svg");
    path_in_tmp(out, sizeof out, "table.txt");
    test_tmp_write("table.txt", "earlier table\n", 14);
    char *bad[] = {SHS_BIN_PATH, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                   "--world", "2", "--variants", "plain", "--plot", plot, NULL};
    test_run_process(bad, 60, p);
    assert_int_equal(p->exit_code, 1);
    assert_non_null(strstr(p->err, "missing/plot.svg"));
    /* a good run replaces the earlier table whole */
    char *good[] = {SHS_BIN_PATH, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                    "--world", "2", "--variants", "plain", "--format", "csv", "--output", out, NULL};
    test_run_process(good, 60, p);
    if (p->exit_code != 0) fail_msg("compare --output failed: %s", p->err);
    test_assert_file_starts(out, "name,");
    free(p);
}

/* ---- every output option of the CLI against the policy in durable.h ---- */

/* Each option as the CLI is run with it; the commands are the smallest that
 * write the output (the tiny model, one step, two ranks). "@TRACE" stands
 * for an input trace recorded in the group setup. */
#define TRAIN "train", "--steps", "1", "--world", "2", "--layers", "1", "--channels", "32", "--heads", "2", \
              "--context", "8"
#define COMPARE "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8", "--world", "2", \
                "--variants", "plain"
#define REPLAY "replay", "@TRACE", "--check-only"

typedef struct {
    const char *option;
    const char *args[20];  /* the command before the option */
    const char *files[2];  /* what VALUE names: VALUE + files[k] ("" the value itself; "/..." inside a directory) */
    size_t prefix_at;      /* where a good output shows its format, per the format's spec */
    const char *prefix;
    int refused_exit;      /* exit code when an output is refused before any work */
} out_opt_t;

static const out_opt_t outs[] = {
    /* safetensors: an 8-byte little-endian header length, then the JSON header */
    {"--export-safetensors", {TRAIN, NULL}, {"", NULL}, 8, "{\"", 2},
    {"--memory-timeline", {TRAIN, NULL}, {"", NULL}, 0, "<svg", 2},
    {"--trace", {TRAIN, NULL}, {"/rank0.trace", "/rank1.trace"}, 0, "shardsim-trace 1\n", 2},
    {"--output", {COMPARE, "--format", "csv", NULL}, {"", NULL}, 0, "name,", 1},
    {"--plot", {COMPARE, NULL}, {"", NULL}, 0, "<svg", 1},
    {"--export-text", {REPLAY, NULL}, {"", NULL}, 0, "shardsim-trace 1\n", 1},
    {"--export-perfetto", {REPLAY, NULL}, {"", NULL}, 0, "{\"traceEvents\":[", 1},
#ifdef SHS_HAVE_PROTOBUF_C
    /* Chakra ET: varint length 7 of GlobalMetadata, field 1 (tag 0x0a) of length 5, "0.0.4" */
    {"--export-chakra", {REPLAY, NULL}, {".0.et", ".1.et"}, 0, "\x07\x0a\x05" "0.0.4", 1},
#endif
};
enum { NUM_OUTS = sizeof outs / sizeof outs[0] };

static char in_trace[300];  /* the input of replay */
static char bin_copy[300];  /* the binary where user 65534 can run it */

static int nfiles(const out_opt_t *o) { return o->files[1] ? 2 : 1; }
static int inside_dir(const out_opt_t *o) { return o->files[0][0] == '/'; }

/* Group setup: the temp directory open to every user (the read-only test
 * runs as another), a copy of the binary there, and a two-rank trace. */
static int outputs_setup(void **state) {
    if (test_tmpdir_setup(state) != 0 || chmod(test_tmpdir, 0755) != 0) return -1;
    if (private_device(dev_full, sizeof dev_full, "full", 7) != 0 ||
        private_device(dev_null, sizeof dev_null, "null", 3) != 0)
        return -1;
    snprintf(bin_copy, sizeof bin_copy, "%s/shardsim", test_tmpdir);
    snprintf(in_trace, sizeof in_trace, "%s/in-trace", test_tmpdir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 0755 '%s'", SHS_BIN_PATH, bin_copy, bin_copy);
    if (system(cmd) != 0) return -1;
    char *argv[] = {SHS_BIN_PATH, TRAIN, "--trace", in_trace, NULL};
    test_proc_t *p = malloc(sizeof *p);
    if (!p) return -1;
    test_run_process(argv, 60, p);
    int rc = p->exit_code;
    if (rc != 0) fprintf(stderr, "cannot record the input trace: %s\n", p->err);
    free(p);
    return rc == 0 ? 0 : -1;
}

/* Run o's command with value; as user and group 65534 when unprivileged
 * and this process is root (a read-only directory does not stop root). */
static void run_out(const out_opt_t *o, const char *value, int unprivileged, test_proc_t *p) {
    char *argv[32];
    int n = 0;
    argv[n++] = unprivileged ? bin_copy : (char *)SHS_BIN_PATH;
    for (int i = 0; o->args[i]; i++) argv[n++] = strcmp(o->args[i], "@TRACE") ? (char *)o->args[i] : in_trace;
    argv[n++] = (char *)o->option;
    argv[n++] = (char *)value;
    argv[n] = NULL;
    if (!unprivileged) {
        test_run_process(argv, 60, p);
        assert_false(p->timed_out);
        return;
    }
    test_proc_t *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(shared != MAP_FAILED);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
                               setresuid(65534, 65534, 65534) != 0 || geteuid() == 0))
            _exit(3);
        test_run_process(argv, 60, shared);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("%s: could not drop to user 65534", o->option);
    memcpy(p, shared, sizeof *p);
    munmap(shared, sizeof *shared);
    assert_false(p->timed_out);
}

/* A fresh directory for one option in one scenario, and the value to pass:
 * DIR/tr (created) for a directory option, DIR/out otherwise. */
static void scenario(const char *name, int i, char *dir, char *value, size_t n) {
    snprintf(dir, n, "%s/%s-%d", test_tmpdir, name, i);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(value, n, "%s/%s", dir, inside_dir(&outs[i]) ? "tr" : "out");
    if (inside_dir(&outs[i])) assert_int_equal(mkdir(value, 0755), 0);
}

static void out_path(const out_opt_t *o, const char *value, int k, char *out, size_t n) {
    snprintf(out, n, "%s%s", value, o->files[k]);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void expect_char_device(const char *path) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    if (!S_ISCHR(sb.st_mode)) fail_msg("%s is no longer a character device", path);
}

/* path is a good output of o: its format's start, not the old contents. */
static void expect_output(const out_opt_t *o, const char *path) {
    unsigned char head[64] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: %s: not written: %s", o->option, path, strerror(errno));
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    size_t n = strlen(o->prefix);
    if (got < o->prefix_at + n || memcmp(head + o->prefix_at, o->prefix, n) != 0)
        fail_msg("%s: %s does not hold the output (%zu bytes read)", o->option, path, got);
}

static void expect_link(const char *link, const char *target) {
    struct stat sb;
    char got[512] = {0};
    assert_int_equal(lstat(link, &sb), 0);
    if (!S_ISLNK(sb.st_mode)) fail_msg("%s is no longer a symbolic link", link);
    assert_true(readlink(link, got, sizeof got - 1) > 0);
    assert_string_equal(got, target);
}

static void expect_exit(const out_opt_t *o, const test_proc_t *p, int code, const char *in_err) {
    if (p->exit_code != code || (in_err && !strstr(p->err, in_err)))
        fail_msg("%s: exit %d (want %d), stderr: %s (want it to name '%s')", o->option, p->exit_code, code, p->err,
                 in_err ? in_err : "");
}

/* A device: /dev/full refuses the bytes (exit 1, the device named, still a
 * device); /dev/null takes them (exit 0, nothing made beside it). Options
 * that write several files reach the device through links named as them. */
static void device_case(const char *dev, int want_exit) {
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    assert_int_equal(access(dev, W_OK), 0);
    for (int i = 0; i < NUM_OUTS; i++) {
        const out_opt_t *o = &outs[i];
        char dir[512], value[600], path[700];
        scenario(strrchr(dev, '/') + 1, i, dir, value, sizeof dir);
        if (!o->files[0][0]) {
            snprintf(value, sizeof value, "%s", dev);
        } else {
            for (int k = 0; k < nfiles(o); k++) {
                out_path(o, value, k, path, sizeof path);
                assert_int_equal(symlink(dev, path), 0);
            }
        }
        run_out(o, value, 0, p);
        /* the error names the device, or the link the option named */
        expect_exit(o, p, want_exit, want_exit ? (o->files[0][0] ? value : dev) : NULL);
        expect_char_device(dev);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", dev);
        assert_int_not_equal(access(tmp, F_OK), 0);
    }
    free(p);
}

static void test_outputs_device_full(void **state) {
    (void)state;
    device_case(dev_full, 1);
}

static void test_outputs_device_null(void **state) {
    (void)state;
    device_case(dev_null, 0);
}

/* /dev/stdout on a pipe (the test reads the child's stdout through one) is
 * written in place; its link chain ends in a magic name (pipe:[N]) that must
 * never be created as a file. */
static void test_outputs_dev_stdout(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char here[512];
    snprintf(here, sizeof here, "%s/stdout-cwd", test_tmpdir);
    assert_int_equal(mkdir(here, 0755), 0);
    assert_int_equal(chdir(here), 0);
    const int picks[] = {3, 5};
    const char *names[] = {"--output", "--export-text"};
    for (int j = 0; j < 2; j++) {
        const out_opt_t *o = &outs[picks[j]];
        assert_string_equal(o->option, names[j]);
        run_out(o, "/dev/stdout", 0, p);
        expect_exit(o, p, 0, NULL);
        if (!strstr(p->out, o->prefix)) fail_msg("%s /dev/stdout: the output is not on stdout", o->option);
    }
    int left = count_entries(here);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(left, 0);
    free(p);
}

/* A symlink to a file: the file's contents are replaced, the link stays a
 * link to it (relative target). A dangling link: its target is created. */
static void test_outputs_symlink_written_through(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    for (int i = 0; i < NUM_OUTS; i++) {
        const out_opt_t *o = &outs[i];
        for (int dangling = 0; dangling <= 1; dangling++) {
            char dir[512], value[600], path[700], target[64], real[800];
            scenario(dangling ? "dangling" : "link", i, dir, value, sizeof dir);
            for (int k = 0; k < nfiles(o); k++) {
                out_path(o, value, k, path, sizeof path);
                snprintf(target, sizeof target, "real%d", k);
                snprintf(real, sizeof real, "%s/%s", inside_dir(o) ? value : dir, target);
                if (!dangling) {
                    FILE *f = fopen(real, "w");
                    assert_non_null(f);
                    fputs("old contents\n", f);
                    assert_int_equal(fclose(f), 0);
                }
                assert_int_equal(symlink(target, path), 0);
            }
            run_out(o, value, 0, p);
            expect_exit(o, p, 0, NULL);
            for (int k = 0; k < nfiles(o); k++) {
                out_path(o, value, k, path, sizeof path);
                snprintf(target, sizeof target, "real%d", k);
                snprintf(real, sizeof real, "%s/%s", inside_dir(o) ? value : dir, target);
                expect_link(path, target);
                expect_output(o, real);
                snprintf(real + strlen(real), sizeof real - strlen(real), ".tmp");
                assert_int_not_equal(access(real, F_OK), 0);
            }
        }
    }
    free(p);
}

/* A directory where the file would go: refused naming it, left as it was. */
static void test_outputs_directory_refused(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    for (int i = 0; i < NUM_OUTS; i++) {
        const out_opt_t *o = &outs[i];
        char dir[512], value[600], path[700], keep[800];
        scenario("dir", i, dir, value, sizeof dir);
        for (int k = 0; k < nfiles(o); k++) {
            out_path(o, value, k, path, sizeof path);
            assert_int_equal(mkdir(path, 0755), 0);
            snprintf(keep, sizeof keep, "%s/keep", path);
            FILE *f = fopen(keep, "w");
            assert_non_null(f);
            fputs("kept\n", f);
            assert_int_equal(fclose(f), 0);
        }
        run_out(o, value, 0, p);
        /* a single file is refused up front; files inside a directory when reached */
        out_path(o, value, 0, path, sizeof path);
        expect_exit(o, p, inside_dir(o) ? 1 : o->refused_exit, "is a directory");
        if (!strstr(p->err, path)) fail_msg("%s: the error does not name %s: %s", o->option, path, p->err);
        for (int k = 0; k < nfiles(o); k++) {
            out_path(o, value, k, path, sizeof path);
            snprintf(keep, sizeof keep, "%s/keep", path);
            expect_contents(keep, "kept\n");
        }
    }
    free(p);
}


/* A read-only directory: refused, the error naming the path, nothing left
 * in it. Run as user 65534 when root, whom the mode would not stop. */
static void test_outputs_readonly_dir_refused(void **state) {
    (void)state;
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    for (int i = 0; i < NUM_OUTS; i++) {
        const out_opt_t *o = &outs[i];
        char dir[512], value[600], ro[560];
        scenario("ro", i, dir, value, sizeof dir);
        snprintf(ro, sizeof ro, "%s/ro", dir);
        assert_int_equal(mkdir(ro, 0755), 0);
        assert_int_equal(chmod(ro, 0555), 0);
        snprintf(value, sizeof value, "%s/out", ro);
        run_out(o, value, 1, p);
        expect_exit(o, p, o->refused_exit, value);
        if (!strstr(p->err, "Permission denied") && !strstr(p->err, "not writable"))
            fail_msg("%s: the error does not say why: %s", o->option, p->err);
        assert_int_equal(count_entries(ro), 0);
    }
    free(p);
}

/* --trace DIR itself: a link to a directory is written through; a device or
 * a read-only directory is refused before training, left as it was. */
static void test_trace_dir_targets(void **state) {
    (void)state;
    const out_opt_t *o = &outs[2];
    assert_string_equal(o->option, "--trace");
    test_proc_t *p = malloc(sizeof *p);
    assert_non_null(p);
    char real[512], link[512], rank1[600];
    snprintf(real, sizeof real, "%s/trace-real", test_tmpdir);
    snprintf(link, sizeof link, "%s/trace-link", test_tmpdir);
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(symlink("trace-real", link), 0);
    run_out(o, link, 0, p);
    expect_exit(o, p, 0, NULL);
    expect_link(link, "trace-real");
    snprintf(rank1, sizeof rank1, "%s/rank1.trace", real);
    expect_output(o, rank1);

    run_out(o, dev_full, 0, p);
    char want[600];
    snprintf(want, sizeof want, "%s: exists and is not a directory", dev_full);
    expect_exit(o, p, 2, want);
    expect_char_device(dev_full);

    char ro[512];
    snprintf(ro, sizeof ro, "%s/trace-ro", test_tmpdir);
    assert_int_equal(mkdir(ro, 0755), 0);
    assert_int_equal(chmod(ro, 0555), 0);
    run_out(o, ro, 1, p);
    expect_exit(o, p, 2, "trace-ro: is not writable");
    assert_int_equal(count_entries(ro), 0);
    free(p);
}

/* The resolution on its own: a link loop and a socket are refused by name;
 * a FIFO is written in place. */
static void test_resolve_loop_and_kinds(void **state) {
    (void)state;
    char a[512], b[512];
    path_in_tmp(a, sizeof a, "loop-a");
    path_in_tmp(b, sizeof b, "loop-b");
    assert_int_equal(symlink("loop-b", a), 0);
    assert_int_equal(symlink("loop-a", b), 0);
    shs_out_target_t to;
    assert_int_equal(shs_out_resolve(a, &to), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "loop-a: more than 40 symbolic links"));
    shs_afile_t f;
    assert_int_equal(shs_afile_open(&f, b, "w"), SHS_IO);

    char fifo[512];
    path_in_tmp(fifo, sizeof fifo, "fifo");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(shs_out_resolve(fifo, &to), SHS_OK);
    assert_int_equal(to.in_place, 1);
    assert_string_equal(to.path, fifo);

    assert_int_equal(shs_out_resolve(dev_full, &to), SHS_OK);
    assert_int_equal(to.in_place, 1);
    shs_dfile_t df;
    assert_int_equal(shs_dfile_open(&df, dev_full), SHS_OK);
    assert_int_equal(shs_dfile_write(&df, "x", 1), SHS_IO);
    char want[600];
    snprintf(want, sizeof want, "%s: write failed", dev_full);
    assert_non_null(strstr(shs_last_error(), want));
    shs_dfile_discard(&df);
    expect_char_device(dev_full);
}

/* A FIFO is written in place, never waited on: with no reader the command
 * fails at once naming it (it used to block forever in open); with a reader
 * the reader gets the whole report. */
static void test_fifo_output_needs_a_reader(void **state) {
    (void)state;
    char fifo[512], got[600];
    path_in_tmp(fifo, sizeof fifo, "report-fifo");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    const test_proc_t *p = test_shardsim(60, "compare", "--layers", "1", "--channels", "32", "--heads", "2",
                                         "--context", "8", "--world", "2", "--variants", "plain", "--output", fifo, NULL);
    if (p->exit_code != 1 || !strstr(p->err, "a named pipe (FIFO) with no reader"))
        fail_msg("exit %d, stderr: %s", p->exit_code, p->err);
    snprintf(got, sizeof got, "%s.got", fifo);
    pid_t reader = fork();
    if (reader == 0) { /* cat fifo > got */
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cat '%s' > '%s'", fifo, got);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    assert_true(reader > 0);
    p = NULL;
    for (int tries = 0; tries < 100; tries++) { /* until the reader has the FIFO open */
        p = test_shardsim(60, "compare", "--layers", "1", "--channels", "32", "--heads", "2", "--context", "8",
                          "--world", "2", "--variants", "plain", "--output", fifo, NULL);
        if (p->exit_code == 0 || !strstr(p->err, "no reader")) break;
        usleep(20000);
    }
    if (p->exit_code != 0) fail_msg("with a reader: exit %d, stderr: %s", p->exit_code, p->err);
    int status;
    assert_int_equal(waitpid(reader, &status, 0), reader);
    test_assert_file_starts(got, "shardsim compare");
}

/* A trace directory written again by a smaller world holds only the new
 * world's rank files: a stale rank2.trace would be read back as a rank of
 * the new trace. */
static void test_trace_dir_rewritten_smaller(void **state) {
    (void)state;
    char dir[512];
    path_in_tmp(dir, sizeof dir, "trace-shrinks");
    const test_proc_t *p = test_shardsim(120, "train", "--steps", "1", "--world", "4", "--layers", "1", "--channels",
                                         "32", "--heads", "2", "--context", "8", "--trace", dir, NULL);
    if (p->exit_code != 0) fail_msg("world 4: %s", p->err);
    assert_int_equal(count_entries(dir), 4);
    p = test_shardsim(120, "train", "--steps", "1", "--world", "2", "--strategy", "ddp", "--layers", "1", "--channels",
                      "32", "--heads", "2", "--context", "8", "--trace", dir, NULL);
    if (p->exit_code != 0) fail_msg("world 2: %s", p->err);
    assert_int_equal(count_entries(dir), 2);
    p = test_shardsim(60, "replay", dir, "--check-only", NULL);
    if (p->exit_code != 0) fail_msg("replay: %s\n%s", p->out, p->err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discard_keeps_earlier_commit_replaces),
        cmocka_unit_test(test_errors_name_the_path),
        cmocka_unit_test(test_device_written_in_place),
        cmocka_unit_test(test_cli_write_failures),
        cmocka_unit_test(test_outputs_device_full),
        cmocka_unit_test(test_outputs_device_null),
        cmocka_unit_test(test_outputs_dev_stdout),
        cmocka_unit_test(test_outputs_symlink_written_through),
        cmocka_unit_test(test_outputs_directory_refused),
        cmocka_unit_test(test_outputs_readonly_dir_refused),
        cmocka_unit_test(test_trace_dir_targets),
        cmocka_unit_test(test_resolve_loop_and_kinds),
        cmocka_unit_test(test_fifo_output_needs_a_reader),
        cmocka_unit_test(test_trace_dir_rewritten_smaller),
    };
    return cmocka_run_group_tests(tests, outputs_setup, test_tmpdir_teardown);
}
