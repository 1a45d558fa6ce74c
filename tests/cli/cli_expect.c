/* cli_expect.c - the one-error-line check of the CLI tests (see cli_expect.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cli/cli_expect.h"

void test_expect_error(const test_proc_t *p, int code, const char *needle) {
    if (p->exit_code != code || !strstr(p->err, needle))
        fail_msg("expected exit %d and '%s' in stderr; got exit %d, stderr:\n%s", code, needle, p->exit_code, p->err);
    char cmd[32] = "";
    if (sscanf(p->err, "shardsim %31[a-z]: error: ", cmd) != 1 && strncmp(p->err, "shardsim: error: ", 17) != 0)
        fail_msg("the error line is not 'shardsim COMMAND: error: ...':\n%s", p->err);
    const char *nl = strchr(p->err, '\n');
    if (!nl) fail_msg("the error line does not end:\n%s", p->err);
    char note[64];
    snprintf(note, sizeof note, "shardsim %s: note: ", cmd);
    for (const char *l = nl + 1; *l; l = strchr(l, '\n') + 1) {
        if (strncmp(l, note, strlen(note)) != 0 || !strchr(l, '\n')) fail_msg("more than one error line:\n%s", p->err);
    }
}
