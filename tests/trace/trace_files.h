/* trace_files.h - helpers of the trace tests: load a trace or expect its
 * refusal (failing the test with the loader's message otherwise), read a
 * file whole, write a trace in the text format to memory. */
#ifndef SHARDSIM_TEST_TRACE_FILES_H
#define SHARDSIM_TEST_TRACE_FILES_H

#include <stddef.h>

#include "shardsim/trace_import.h"

/* shs_trace_load(path) with the default options; fails the test on error. */
shs_trace_t *trace_load_ok(const char *path);
/* Write text to test_tmpdir/name and load it: the test fails unless it is
 * refused with a message holding `needle` and the file's path. */
void trace_expect_refused(const char *name, const char *text, const char *needle);
/* path's bytes, malloc'd (NUL-terminated; *n without the NUL); fails the test if unreadable. */
char *trace_slurp(const char *path, size_t *n);
/* t in shardsim's text format, all ranks (malloc'd, *n bytes). */
char *trace_as_text(const shs_trace_t *t, size_t *n);

#endif
