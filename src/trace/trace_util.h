/* trace_util.h - private helpers shared by the trace readers: whole-file
 * reading with a size cap (gzip: trace_stream.h), strict number parsing,
 * blank-separated tokens.
 * What it is not: a format. */
#ifndef SHARDSIM_TRACE_UTIL_H
#define SHARDSIM_TRACE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shardsim/status.h"

/* Largest trace file read (bytes): a bound on memory, not a format limit. */
#define SHS__TRACE_MAX_FILE ((size_t)2 << 30)

/* Read all of `path` into a NUL-terminated malloc'd buffer. Only a regular
 * file is read: the path is opened without blocking and checked before any
 * read, so a FIFO, device or socket is refused at once (naming its kind)
 * instead of waiting for a writer forever.
 * Errors: SHS_IO (naming the path), SHS_HOST_OOM. */
shs_status_t shs__read_file(const char *path, char **buf, size_t *len);
/* Open `path` for blocking reads after checking, without blocking, that it
 * is a regular file; *fd and its *size in bytes. Errors: as shs__read_file. */
shs_status_t shs__open_regular(const char *path, int *fd, uint64_t *size);
/* What a st_mode is, for messages: "a named pipe (FIFO)", "a character
 * device", "a block device", "a socket", "a directory", "a regular file",
 * or "not a regular file". */
const char *shs__file_kind(unsigned mode);

/* Strict decimal (or 0x hex when `hex_ok` and the text starts 0x; pure hex
 * when hex_ok == 2) parse of s[0..n): digits only, no sign, no overflow.
 * 0 ok, -1 otherwise. */
int shs__parse_u64(const char *s, size_t n, int hex_ok, uint64_t *out);
/* Optional leading '-'; range of int64. */
int shs__parse_i64(const char *s, size_t n, int64_t *out);
/* strtod over exactly s[0..n), finite. */
int shs__parse_double(const char *s, size_t n, double *out);

/* A time or duration read from a trace: v in units of unit_s seconds
 * (1e-6 for microseconds). 0 with the seconds in *s when v is finite,
 * >= 0 and at most SHS_TRACE_MAX_TIME_S (2^63 ns, trace.h); -1 otherwise. */
int shs__trace_time(double v, double unit_s, double *s);

/* Split line[0..len) at blanks (space, tab, CR) into at most max tokens
 * (start, length); returns the count, or max + 1 when there are more. */
typedef struct { const char *s; size_t n; } shs__tok_t;
int shs__tokens(const char *line, size_t len, shs__tok_t *toks, int max);
/* Token equals the C string (inline: readers compare every token of a
 * large file against literals, whose length the compiler knows). */
static inline int shs__tok_is(shs__tok_t t, const char *s) { return strlen(s) == t.n && memcmp(t.s, s, t.n) == 0; }
/* Copy a token into buf (size cap, truncates); returns buf. */
char *shs__tok_copy(shs__tok_t t, char *buf, size_t cap);

/* The last run of decimal digits in a path's base name, or -1 (rank from
 * file names such as dlrm_eg_3.json, all_reduce.3.et, rank3.trace). */
int shs__rank_from_name(const char *path);

#endif
