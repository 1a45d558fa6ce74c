/* harness.c - shared test helpers (see harness.h). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/clock.h"

const char *test_shared_dir(void) {
    const char *d = getenv("SHS_SHARED_DIR");
    return d && *d ? d : SHS_SHARED_DIR;
}

shs_status_t test_load_shakespeare(shs_corpus_t *c) {
    char path[1024];
    snprintf(path, sizeof path, "%s/data/tinyshakespeare.txt", test_shared_dir());
    shs_status_t st = shs_corpus_load(c, path);
    if (st != SHS_OK) fprintf(stderr, "cannot load the test corpus: %s (set SHS_SHARED_DIR)\n", shs_last_error());
    return st;
}

shs_corpus_t test_corpus;

int test_corpus_setup(void **state) {
    (void)state;
    return test_load_shakespeare(&test_corpus) == SHS_OK ? 0 : -1;
}

int test_corpus_teardown(void **state) {
    (void)state;
    shs_corpus_free(&test_corpus);
    return 0;
}

char test_tmpdir[256];

int test_tmpdir_setup(void **state) {
    (void)state;
    snprintf(test_tmpdir, sizeof test_tmpdir, "/tmp/shardsim-test-XXXXXX");
    return mkdtemp(test_tmpdir) ? 0 : -1;
}

int test_tmpdir_teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

void test_run_process(char *const argv[], double timeout_s, test_proc_t *p) {
    memset(p, 0, sizeof *p);
    p->exit_code = -1;
    int po[2], pe[2];
    if (pipe(po) || pipe(pe)) return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t no = 0, ne = 0;
    int open_fds = 2;
    double deadline = shs_now_seconds() + timeout_s;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    while (open_fds > 0) {
        int ms = (int)((deadline - shs_now_seconds()) * 1000);
        if (ms <= 0) {
            p->timed_out = 1;
            kill(pid, SIGKILL);
            break;
        }
        if (poll(fds, 2, ms) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
            char tmp[4096];
            ssize_t k = read(fds[i].fd, tmp, sizeof tmp);
            if (k <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            char *dst = i == 0 ? p->out : p->err;
            size_t cap = i == 0 ? sizeof p->out : sizeof p->err, *len = i == 0 ? &no : &ne;
            size_t take = (size_t)k < cap - 1 - *len ? (size_t)k : cap - 1 - *len;
            memcpy(dst + *len, tmp, take);
            *len += take;
            dst[*len] = 0;
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    int status;
    waitpid(pid, &status, 0);
    if (!p->timed_out && WIFEXITED(status)) p->exit_code = WEXITSTATUS(status);
}

const test_proc_t *test_shardsim(double timeout_s, const char *first, ...) {
    static test_proc_t proc;
    enum { MAX_ARGS = 40 };
    char *argv[MAX_ARGS + 1];
    int n = 0;
    argv[n++] = (char *)SHS_BIN_PATH;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < MAX_ARGS; a = va_arg(ap, const char *)) argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    test_run_process(argv, timeout_s, &proc);
    assert_false(proc.timed_out);
    return &proc;
}

const char *test_tmp_write(const char *name, const void *data, size_t n) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return path;
}

void test_assert_file_starts(const char *path, const char *prefix) {
    size_t n = strlen(prefix);
    char head[256] = {0};
    assert_true(n < sizeof head);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s: cannot open: %s", path, strerror(errno));
    size_t got = fread(head, 1, n, f);
    fclose(f);
    if (got != n || memcmp(head, prefix, n)) fail_msg("%s: does not start with '%s' (got '%.*s')", path, prefix, (int)got, head);
}
