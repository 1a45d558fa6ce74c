/* trace_stream.h - a trace file read as a stream: bytes from a regular file
 * or a buffer, gzip-inflated as they are read (concatenated members one
 * after another, as gzip -d does), and its lines one at a time; the readers
 * that stream (NCCL logs) keep only a window of it in memory, the others
 * read it whole through it.
 * What it is not: a format (trace_<format>.c) or format detection
 * (trace_load.c). */
#ifndef SHARDSIM_TRACE_STREAM_H
#define SHARDSIM_TRACE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/status.h"

typedef struct shs__stream shs__stream_t;

/* Open `path` for reading from its first byte. Only a regular file is
 * read: the path is opened without blocking and checked first, so a FIFO,
 * device or socket is refused at once, naming its kind. A file starting
 * with gzip's magic bytes (1f 8b) is inflated as it is read; without zlib
 * it is refused with SHS_UNSUPPORTED naming zlib1g-dev.
 * Errors: SHS_IO (naming the path), SHS_UNSUPPORTED, SHS_HOST_OOM. */
shs_status_t shs__stream_open(shs__stream_t **out, const char *path);
/* The same over buf[0..len) (not copied: it must outlive the stream);
 * `name` names it in errors. */
shs_status_t shs__stream_open_mem(shs__stream_t **out, const char *name, const char *buf, size_t len);
void shs__stream_close(shs__stream_t *s);
/* Whether the stream inflates gzip data; the name errors give it. */
int shs__stream_gzip(const shs__stream_t *s);
const char *shs__stream_name(const shs__stream_t *s);
/* gzip's magic bytes (1f 8b) at buf[0]. */
int shs__is_gzip(const char *buf, size_t len);
/* A gzip-compressed buffer is inflated in memory: *buf and *len (malloc'd,
 * NUL-terminated) are replaced by the inflated bytes, and *buf freed; any
 * other buffer is left as it is. The inflated size is capped at
 * SHS__TRACE_MAX_FILE. On error *buf is freed and NULL. Errors: as
 * shs__stream_read, SHS_UNSUPPORTED without zlib, SHS_IO above the cap. */
shs_status_t shs__gunzip(const char *name, char **buf, size_t *len);
/* The next bytes, up to cap, into dst; *got = 0 only at the end.
 * Errors: SHS_IO (a read error), SHS_PARSE naming the stream and the
 * compressed byte offset (corrupt or truncated gzip data, bytes that are
 * not gzip data after the last member), SHS_HOST_OOM. */
shs_status_t shs__stream_read(shs__stream_t *s, char *dst, size_t cap, size_t *got);
/* Back to the first byte. Errors: SHS_IO. */
shs_status_t shs__stream_rewind(shs__stream_t *s);
/* The rest of the stream appended to the `have` bytes already in *buf
 * (malloc'd, or NULL with have 0), NUL-terminated; at most `max` bytes in
 * all, else SHS_IO naming the limit ("inflates to more than" for gzip).
 * On error *buf is freed and NULL. */
shs_status_t shs__stream_read_all(shs__stream_t *s, char **buf, size_t *len, size_t have, size_t max);

/* A stream's lines. The pointers returned stay valid until the next call. */
typedef struct {
    shs__stream_t *s;
    const char *mem;      /* a plain buffer's bytes, read in place (mem_len); NULL: the window */
    size_t mem_len;
    char *buf;            /* window: buf[beg..end) not yet returned */
    size_t cap, beg, end;
    int eof;
    int64_t line;         /* 1-based number of the line last returned */
    size_t max_line;      /* longest line accepted, bytes */
} shs__lines_t;

/* Lines of s (which stays the caller's). Errors: SHS_HOST_OOM. */
shs_status_t shs__lines_init(shs__lines_t *l, shs__stream_t *s);
/* The next line without its '\n' in *line, *len: 1, or 0 at the end.
 * Errors (returned in *st, with -1): the stream's, and SHS_PARSE for a
 * line longer than l->max_line (64 MiB unless set), naming the line. */
int shs__lines_next(shs__lines_t *l, const char **line, size_t *len, shs_status_t *st);
/* Back to line 1 (the stream rewound). */
shs_status_t shs__lines_rewind(shs__lines_t *l);
void shs__lines_free(shs__lines_t *l);

#endif
