/* trace_files.c - helpers of the trace tests (see trace_files.h). */
#include "trace/trace_files.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

shs_trace_t *trace_load_ok(const char *path) {
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t o = {0};
    if (shs_trace_load(&t, path, &o) != SHS_OK) fail_msg("%s: %s", path, shs_last_error());
    return t;
}

void trace_expect_refused(const char *name, const char *text, const char *needle) {
    const char *p = test_tmp_write(name, text, strlen(text));
    shs_trace_t *t = NULL;
    shs_trace_load_opts_t o = {0};
    if (shs_trace_load(&t, p, &o) == SHS_OK) {
        shs_trace_free(t);
        fail_msg("%s loaded; want an error with '%s'", name, needle);
    }
    if (!strstr(shs_last_error(), needle) || !strstr(shs_last_error(), p))
        fail_msg("want '%s' and the path in: %s", needle, shs_last_error());
}

char *trace_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) fail_msg("cannot read %s", path);
    fclose(f);
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

char *trace_as_text(const shs_trace_t *t, size_t *n) {
    char *b = NULL;
    FILE *f = open_memstream(&b, n);
    if (!f || shs_trace_write_text(t, f, -1) != SHS_OK) fail_msg("cannot write the trace as text");
    fclose(f);
    return b;
}
