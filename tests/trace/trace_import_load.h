/* trace_import_load.h - what the importer tests share: a trace of
 * ../shared/traces/ or of traces/cases/ loaded (it must load), the
 * consistency issues of a trace, the calls of one op on one rank. Include
 * after <cmocka.h>. Not a test; included by test_trace_import.c and
 * test_trace_import_refusals.c only. */
#ifndef SHARDSIM_TEST_TRACE_IMPORT_LOAD_H
#define SHARDSIM_TEST_TRACE_IMPORT_LOAD_H

#include <stdio.h>

#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#include "harness.h"
static inline shs_trace_t *load(const char *rel, shs_trace_format_t fmt, int world) {
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/%s", test_shared_dir(), rel);
    shs_trace_load_opts_t o = {.format = fmt, .world = world};
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, &o) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static inline shs_trace_t *load_case(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/cases/%s", SHS_SOURCE_DIR, name);
    shs_trace_t *t = NULL;
    if (shs_trace_load(&t, path, NULL) != SHS_OK) fail_msg("%s", shs_last_error());
    return t;
}

static inline size_t issues(const shs_trace_t *t, shs_trace_report_t *keep) {
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 16), SHS_OK);
    size_t n = rep.total;
    for (size_t i = 0; i < rep.n && n; i++) fprintf(stderr, "  issue: %s\n", rep.issues[i].text);
    if (keep) *keep = rep;
    else shs_trace_report_free(&rep);
    return n;
}

static inline int count_op(const shs_trace_t *t, int rank, shs_coll_op_t op) {
    int n = 0;
    for (size_t i = 0; i < t->ranks[rank].n; i++) n += t->ranks[rank].recs[i].op == op;
    return n;
}

/* fsdp-4rank-bf16.log: 4 ranks, each 12 AllGather (bf16), 6 ReduceScatter

#endif
