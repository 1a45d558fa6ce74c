/* trace_stream.c - a trace file read as a stream of bytes and lines (see
 * trace_stream.h). gzip: RFC 1952 members inflated by zlib (inflate with
 * the gzip wrapper, 16 + MAX_WBITS), one member after another. */
#include "trace/trace_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardsim/features.h"
#include "trace/trace_util.h"

#ifdef SHS_HAVE_ZLIB
#include <zlib.h>
#endif

#define RAW_PIECE ((size_t)1 << 18) /* compressed bytes read at a time */

struct shs__stream {
    char *name;
    int fd;                      /* -1: memory */
    const unsigned char *mem;
    size_t mem_len, mem_pos;
    uint64_t raw_size;           /* bytes of the source (the compressed size for gzip) */
    int gz;
#ifdef SHS_HAVE_ZLIB
    z_stream zs;
    int zs_live;                 /* inflateInit2 done */
    unsigned char *zin;          /* compressed bytes read, zs.next_in into it */
    uint64_t zin_base;           /* source offset of zin[0] */
    int raw_eof, ended;          /* source read to its end; last member ended with nothing after it */
#endif
};

int shs__is_gzip(const char *b, size_t len) {
    return len >= 2 && (unsigned char)b[0] == 0x1f && (unsigned char)b[1] == 0x8b;
}

/* Up to cap bytes of the source (file or memory) as they are. */
static shs_status_t raw_read(shs__stream_t *s, unsigned char *dst, size_t cap, size_t *got) {
    *got = 0;
    if (s->fd < 0) {
        size_t n = s->mem_len - s->mem_pos < cap ? s->mem_len - s->mem_pos : cap;
        memcpy(dst, s->mem + s->mem_pos, n);
        s->mem_pos += n;
        *got = n;
        return SHS_OK;
    }
    while (*got < cap) {
        ssize_t r = read(s->fd, dst + *got, cap - *got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return shs_set_error(SHS_IO, "%s: read error: %s", s->name, strerror(errno));
        if (r == 0) break;
        *got += (size_t)r;
    }
    return SHS_OK;
}

static shs_status_t start(shs__stream_t *s, const unsigned char *head, size_t nhead) {
    s->gz = shs__is_gzip((const char *)head, nhead);
    if (!s->gz) return SHS_OK;
#ifdef SHS_HAVE_ZLIB
    if (!(s->zin = malloc(RAW_PIECE))) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", s->name);
    if (inflateInit2(&s->zs, 16 + MAX_WBITS) != Z_OK) /* 16 +: the gzip wrapper only */
        return shs_set_error(SHS_HOST_OOM, "%s: zlib cannot start inflating", s->name);
    s->zs_live = 1;
    s->zs.next_in = s->zin;
    s->zs.avail_in = 0;
    return SHS_OK;
#else
    return shs_set_error(SHS_UNSUPPORTED, "%s: is gzip-compressed: reading it %s", s->name,
                         shs_feature_missing(SHS_FEATURE_ZLIB));
#endif
}

shs_status_t shs__stream_open_mem(shs__stream_t **out, const char *name, const char *buf, size_t len) {
    *out = NULL;
    shs__stream_t *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        return shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
    }
    s->fd = -1;
    s->mem = (const unsigned char *)buf;
    s->mem_len = len;
    s->raw_size = len;
    shs_status_t st = start(s, s->mem, len);
    if (st != SHS_OK) {
        shs__stream_close(s);
        return st;
    }
    *out = s;
    return SHS_OK;
}

shs_status_t shs__stream_open(shs__stream_t **out, const char *path) {
    *out = NULL;
    int fd;
    uint64_t size;
    SHS_CHECK(shs__open_regular(path, &fd, &size));
#ifdef POSIX_FADV_SEQUENTIAL
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    shs__stream_t *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(path))) {
        free(s);
        close(fd);
        return shs_set_error(SHS_HOST_OOM, "%s: out of memory", path);
    }
    s->fd = fd;
    s->raw_size = size;
    unsigned char head[2];
    ssize_t n = pread(fd, head, 2, 0);
    shs_status_t st = n < 0 ? shs_set_error(SHS_IO, "%s: read error: %s", path, strerror(errno))
                            : start(s, head, (size_t)n);
    if (st != SHS_OK) {
        shs__stream_close(s);
        return st;
    }
    *out = s;
    return SHS_OK;
}

void shs__stream_close(shs__stream_t *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
#ifdef SHS_HAVE_ZLIB
    if (s->zs_live) inflateEnd(&s->zs);
    free(s->zin);
#endif
    free(s->name);
    free(s);
}

int shs__stream_gzip(const shs__stream_t *s) { return s->gz; }

const char *shs__stream_name(const shs__stream_t *s) { return s->name; }

shs_status_t shs__stream_rewind(shs__stream_t *s) {
    if (s->fd >= 0 && lseek(s->fd, 0, SEEK_SET) != 0)
        return shs_set_error(SHS_IO, "%s: cannot seek back to the start: %s", s->name, strerror(errno));
    s->mem_pos = 0;
#ifdef SHS_HAVE_ZLIB
    if (s->gz) {
        if (inflateReset(&s->zs) != Z_OK) return shs_set_error(SHS_HOST_OOM, "%s: zlib cannot restart", s->name);
        s->zs.next_in = s->zin;
        s->zs.avail_in = 0;
        s->zin_base = 0;
        s->raw_eof = s->ended = 0;
    }
#endif
    return SHS_OK;
}

#ifdef SHS_HAVE_ZLIB
/* Keep the unread compressed bytes and read more after them (at least
 * `want` in all unless the source ends). */
static shs_status_t fill(shs__stream_t *s, size_t want) {
    while (s->zs.avail_in < want && !s->raw_eof) {
        size_t keep = s->zs.avail_in;
        s->zin_base += (uint64_t)(s->zs.next_in - s->zin);
        memmove(s->zin, s->zs.next_in, keep);
        size_t got;
        SHS_CHECK(raw_read(s, s->zin + keep, RAW_PIECE - keep, &got));
        if (got == 0) s->raw_eof = 1;
        s->zs.next_in = s->zin;
        s->zs.avail_in = (uInt)(keep + got);
    }
    return SHS_OK;
}

static shs_status_t inflate_some(shs__stream_t *s, char *dst, size_t cap, size_t *got) {
    *got = 0;
    if (cap > ((size_t)1 << 30)) cap = (size_t)1 << 30; /* zlib counts in uInt */
    while (*got == 0 && !s->ended) {
        if (s->zs.avail_in == 0) SHS_CHECK(fill(s, 1));
        uint64_t at = s->zin_base + (uint64_t)(s->zs.next_in - s->zin); /* compressed bytes consumed */
        if (s->zs.avail_in == 0) /* the source ended inside a member */
            return shs_set_error(SHS_PARSE, "%s: gzip data truncated: it ends at compressed byte %llu before the end "
                                 "of the compressed stream", s->name, (unsigned long long)at);
        s->zs.next_out = (Bytef *)dst;
        s->zs.avail_out = (uInt)cap;
        int rc = inflate(&s->zs, Z_NO_FLUSH);
        *got = cap - s->zs.avail_out;
        at = s->zin_base + (uint64_t)(s->zs.next_in - s->zin);
        if (rc == Z_STREAM_END) { /* a member ended: another one, nothing, or garbage follows */
            SHS_CHECK(fill(s, 2));
            if (s->zs.avail_in == 0) { s->ended = 1; break; }
            if (shs__is_gzip((const char *)s->zs.next_in, s->zs.avail_in) && inflateReset(&s->zs) == Z_OK) continue;
            return shs_set_error(SHS_PARSE, "%s: %llu bytes that are not gzip data after the end of the compressed "
                                 "data (compressed byte %llu)", s->name, (unsigned long long)(s->raw_size - at),
                                 (unsigned long long)at);
        }
        if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR)
            return shs_set_error(SHS_PARSE, "%s: corrupt gzip data near compressed byte %llu of %llu: %s", s->name,
                                 (unsigned long long)at, (unsigned long long)s->raw_size,
                                 s->zs.msg ? s->zs.msg : "invalid data");
        if (rc == Z_MEM_ERROR) return shs_set_error(SHS_HOST_OOM, "%s: zlib out of memory while inflating", s->name);
        if (rc == Z_BUF_ERROR && s->zs.avail_in == 0 && s->raw_eof)
            return shs_set_error(SHS_PARSE, "%s: gzip data truncated: it ends at compressed byte %llu before the end "
                                 "of the compressed stream", s->name, (unsigned long long)at);
    }
    return SHS_OK;
}
#endif

shs_status_t shs__stream_read(shs__stream_t *s, char *dst, size_t cap, size_t *got) {
#ifdef SHS_HAVE_ZLIB
    if (s->gz) return inflate_some(s, dst, cap, got);
#endif
    return raw_read(s, (unsigned char *)dst, cap, got);
}

shs_status_t shs__stream_read_all(shs__stream_t *s, char **buf, size_t *len, size_t have, size_t max) {
    char *b = *buf;
    size_t used = have, cap = have;
    shs_status_t st = SHS_OK;
    /* a plain file's size is known: one allocation of it (plus the NUL) */
    size_t size = !s->gz && s->raw_size > have ? (size_t)(s->raw_size < (uint64_t)max ? s->raw_size : max) : 0;
    if (size > cap) {
        char *nb = realloc(b, size + 1);
        if (!nb) st = shs_set_error(SHS_HOST_OOM, "%s: cannot allocate %zu bytes", s->name, size + 1);
        else b = nb, cap = size;
    }
    while (st == SHS_OK) {
        size_t got;
        if (used == cap) { /* full: is there more? */
            char probe;
            if ((st = shs__stream_read(s, &probe, 1, &got)) != SHS_OK || got == 0) break;
            if (cap >= max) {
                st = s->gz ? shs_set_error(SHS_IO, "%s: inflates to more than the %zu-byte limit for a trace file",
                                           s->name, max)
                           : shs_set_error(SHS_IO, "%s: %llu bytes is larger than the %zu-byte limit for a trace file",
                                           s->name, (unsigned long long)s->raw_size, max);
                break;
            }
            size_t nc = cap < 65536 ? 65536 : cap < max / 2 ? 2 * cap : max;
            char *nb = realloc(b, nc + 1);
            if (!nb) { st = shs_set_error(SHS_HOST_OOM, "%s: cannot allocate %zu bytes", s->name, nc + 1); break; }
            b = nb;
            cap = nc;
            b[used++] = probe;
            continue;
        }
        if ((st = shs__stream_read(s, b + used, cap - used, &got)) != SHS_OK || got == 0) break;
        used += got;
    }
    if (st != SHS_OK) {
        free(b);
        *buf = NULL;
        *len = 0;
        return st;
    }
    if (!b && !(b = malloc(1))) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", s->name);
    b[used] = 0;
    *buf = b;
    *len = used;
    return SHS_OK;
}

shs_status_t shs__gunzip(const char *name, char **buf, size_t *len) {
    if (!shs__is_gzip(*buf, *len)) return SHS_OK;
    shs__stream_t *s;
    shs_status_t st = shs__stream_open_mem(&s, name, *buf, *len);
    char *out = NULL;
    size_t n = 0;
    if (st == SHS_OK) st = shs__stream_read_all(s, &out, &n, 0, SHS__TRACE_MAX_FILE);
    shs__stream_close(s);
    free(*buf);
    *buf = out;
    *len = n;
    return st;
}

/* ---- lines ---- */

#define LINES_WINDOW ((size_t)1 << 20)

shs_status_t shs__lines_init(shs__lines_t *l, shs__stream_t *s) {
    *l = (shs__lines_t){.s = s, .cap = LINES_WINDOW, .max_line = (size_t)64 << 20};
    if (s->fd < 0 && !s->gz) { /* a plain buffer: its lines in place, no window */
        l->mem = (const char *)s->mem;
        l->mem_len = s->mem_len;
        return SHS_OK;
    }
    if (!(l->buf = malloc(l->cap + 1))) return shs_set_error(SHS_HOST_OOM, "out of memory for a read buffer");
    return SHS_OK;
}

void shs__lines_free(shs__lines_t *l) {
    free(l->buf);
    l->buf = NULL;
}

shs_status_t shs__lines_rewind(shs__lines_t *l) {
    l->beg = l->end = 0;
    l->eof = 0;
    l->line = 0;
    return shs__stream_rewind(l->s);
}

int shs__lines_next(shs__lines_t *l, const char **line, size_t *len, shs_status_t *st) {
    *st = SHS_OK;
    if (l->mem) {
        if (l->beg >= l->mem_len) return 0;
        const char *p = l->mem + l->beg, *nl = memchr(p, '\n', l->mem_len - l->beg);
        *line = p;
        *len = nl ? (size_t)(nl - p) : l->mem_len - l->beg;
        l->beg += *len + 1;
        l->line++;
        return 1;
    }
    size_t scan = l->beg; /* bytes before it hold no '\n' */
    for (;;) {
        char *nl = scan < l->end ? memchr(l->buf + scan, '\n', l->end - scan) : NULL;
        if (nl || (l->eof && l->end > l->beg)) {
            size_t e = nl ? (size_t)(nl - l->buf) : l->end;
            *line = l->buf + l->beg;
            *len = e - l->beg;
            l->beg = nl ? e + 1 : e;
            l->line++;
            return 1;
        }
        if (l->eof) return 0;
        /* no whole line in the window: move the partial one to the front, read more */
        size_t part = l->end - l->beg;
        if (part >= l->max_line) {
            *st = shs_set_error(SHS_PARSE, "%s:%lld: a line longer than %zu bytes (not a text log?)",
                                l->s->name, (long long)l->line + 1, l->max_line);
            return -1;
        }
        memmove(l->buf, l->buf + l->beg, part);
        l->beg = 0;
        l->end = part;
        scan = part;
        if (l->end == l->cap) {
            size_t nc = l->cap * 2 < l->max_line + 1 ? l->cap * 2 : l->max_line + 1;
            char *nb = realloc(l->buf, nc + 1);
            if (!nb) {
                *st = shs_set_error(SHS_HOST_OOM, "out of memory for a line of %zu bytes", part);
                return -1;
            }
            l->buf = nb;
            l->cap = nc;
        }
        size_t got;
        if ((*st = shs__stream_read(l->s, l->buf + l->end, l->cap - l->end, &got)) != SHS_OK) return -1;
        if (got == 0) l->eof = 1;
        l->end += got;
    }
}
