/* fuzz_common.h - the body every importer's libFuzzer target shares.
 *
 * What it is: LLVMFuzzerTestOneInput for one trace format: the input bytes
 * (NUL-terminated copy, as the loader reads files) go through
 * shs_trace_load_buffer with the format forced, so the reader sees every
 * input whether or not detection would pick it. A trace that loads is
 * then checked (trace_check.h), written back in the text format and
 * exported as Perfetto JSON (both to /dev/null): the analysis and the
 * writers see whatever an importer accepts. A refused input must come
 * with an error message that names the input (the file in a real run);
 * one that does not aborts, which libFuzzer reports as a finding.
 * ASan, UBSan and libFuzzer's -malloc_limit_mb / -rss_limit_mb / -timeout
 * (set by fuzz/run_fuzz.sh) catch memory errors, undefined behaviour,
 * unbounded allocations and hangs.
 * What it is not: a replay (threads and real buffers are not fuzzed).
 */
#ifndef SHARDSIM_FUZZ_COMMON_H
#define SHARDSIM_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_perfetto.h"

static int shs_fuzz_one(shs_trace_format_t fmt, const char *name, const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    buf[size] = 0;
    /* rank 1: per-rank formats take the file's rank from its name or content */
    shs_trace_input_t in = {.name = name, .buf = buf, .len = size, .rank = 1, .world = 0};
    shs_trace_t *t = NULL;
    shs_status_t st = shs_trace_load_buffer(&t, &in, fmt);
    if (st != SHS_OK) {
        const char *msg = shs_last_error();
        if (!msg || !strstr(msg, name)) {
            fprintf(stderr, "refused (%s) without naming the input: '%s'\n", shs_strerror(st), msg ? msg : "(null)");
            abort();
        }
    } else {
        shs_trace_report_t rep;
        if (shs_trace_check(t, &rep, 8) == SHS_OK) shs_trace_report_free(&rep);
        if (sink) shs_trace_write_text(t, sink, -1);
        shs_trace_export_perfetto(t, "/dev/null", NULL);
        shs_trace_free(t);
    }
    free(buf);
    return 0;
}

#define SHS_FUZZ_TARGET(FMT, NAME)                                            \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);             \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {            \
        return shs_fuzz_one(FMT, NAME, data, size);                           \
    }

#endif
