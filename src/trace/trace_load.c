/* trace_load.c - format names, detection from content, and loading a file
 * or a directory of per-rank files through the matching reader.
 * What it is not: any reader (trace_<format>.c). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardsim/trace_import.h"
#include "core/names.h"
#include "trace/import/trace_nccl.h"
#include "trace/trace_stream.h"
#include "trace/trace_tar.h"
#include "trace/trace_util.h"

#define FORMAT_NAME(id, name) name,
static const char *const fmt_names[] = {SHS_TRACE_FORMAT_MAP(FORMAT_NAME)};
#undef FORMAT_NAME

const char *shs_trace_format_name(shs_trace_format_t f) { return shs__name_of(fmt_names, SHS_NUM_TFMTS, (int)f, "unknown"); }

int shs_trace_format_parse(const char *name, shs_trace_format_t *out) {
    int k = shs__name_find(fmt_names + 1, SHS_NUM_TFMTS - 1, name); /* "unknown" is no format to ask for */
    if (k >= 0) *out = (shs_trace_format_t)(k + 1);
    return k >= 0 ? 0 : -1;
}

shs_status_t shs_trace_import_text(shs_trace_t *t, const shs_trace_input_t *in) {
    return shs_trace_read_text(t, in->buf, in->len, in->name);
}

/* First non-blank byte at or after i in the first `len` bytes, or 0. */
static char first_nonblank(const char *b, size_t len, size_t *at) {
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) i++;
    if (at) *at = i;
    return i < len ? b[i] : 0;
}

static int has(const char *b, size_t len, const char *needle) {
    size_t n = strlen(needle);
    if (len > (1u << 20)) len = 1u << 20; /* look at the first MiB */
    for (size_t i = 0; i + n <= len; i++)
        if (b[i] == needle[0] && memcmp(b + i, needle, n) == 0) return 1;
    return 0;
}

shs_trace_format_t shs_trace_detect(const char *b, size_t len) {
    if (len >= 14 && memcmp(b, "shardsim-trace", 14) == 0) return SHS_TFMT_SHARDSIM;
    size_t at;
    char c = first_nonblank(b, len, &at);
    if (c == '{' || c == '[') {
        if (has(b, len, "\"traceEvents\"")) return SHS_TFMT_KINETO;
        if (has(b, len, "\"entries\"") && (has(b, len, "\"pg_config\"") || has(b, len, "collective_seq_id")))
            return SHS_TFMT_FLIGHT;
        if (has(b, len, "\"nodes\"") && has(b, len, "\"schema\"")) return SHS_TFMT_PYTORCH_ET;
        /* Horovod: a bare array; negotiation phases, or the later writer's first event */
        if (c == '[' && (has(b, len, "\"NEGOTIATE_") || has(b, len, "\"start_time_since_epoch_in_micros\"")))
            return SHS_TFMT_HOROVOD;
        if (c == '{') return SHS_TFMT_UNKNOWN; /* '[' may be torchrun's "[default0]:" before a log line */
    }
    if (has(b, len, " NCCL INFO ")) return SHS_TFMT_NCCL;
    /* ASTRA-sim 1.0: a parallelism keyword line, then a layer count */
    static const char *const kinds[] = {"DATA", "MODEL", "HYBRID", "MICRO", "TRANSFORMER", "DISTRIBUTED"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = strlen(kinds[k]);
        if (len - at > n && memcmp(b + at, kinds[k], n) == 0) {
            size_t e = at;
            while (e < len && b[e] != '\n') e++;
            size_t f = e + 1;
            while (f < len && (b[f] == ' ' || b[f] == '\t')) f++;
            if (f < len && b[f] >= '0' && b[f] <= '9') return SHS_TFMT_ASTRA;
        }
    }
    /* Chakra ET: binary, starts with a varint length then field 1 or 2 of GlobalMetadata */
    if (len >= 2) {
        size_t i = 0;
        uint64_t l = 0;
        int shift = 0;
        while (i < len && i < 10 && (b[i] & 0x80)) { l |= (uint64_t)(b[i] & 0x7f) << shift; shift += 7; i++; }
        if (i < len && i < 10) {
            l |= (uint64_t)(b[i] & 0x7f) << shift;
            i++;
            if (l > 0 && l <= len - i && (b[i] == 0x0a || b[i] == 0x12)) {
                int binary = 0;
                for (size_t k = 0; k < len && k < 256; k++) binary |= (unsigned char)b[k] < 0x09;
                if (binary || l < 0x20) return SHS_TFMT_CHAKRA;
            }
        }
    }
    return SHS_TFMT_UNKNOWN;
}

typedef shs_status_t (*reader_fn)(shs_trace_t *, const shs_trace_input_t *);

static reader_fn reader_of(shs_trace_format_t f) {
    switch (f) {
    case SHS_TFMT_SHARDSIM: return shs_trace_import_text;
    case SHS_TFMT_NCCL: return shs_trace_import_nccl;
    case SHS_TFMT_PYTORCH_ET: return shs_trace_import_pytorch_et;
    case SHS_TFMT_CHAKRA: return shs_trace_import_chakra;
    case SHS_TFMT_ASTRA: return shs_trace_import_astra;
    case SHS_TFMT_KINETO: return shs_trace_import_kineto;
    case SHS_TFMT_FLIGHT: return shs_trace_import_flight;
    case SHS_TFMT_HOROVOD: return shs_trace_import_horovod;
    default: return NULL;
    }
}

/* Formats whose sequence numbers are positions (the source has none). */
static int needs_renumber(shs_trace_format_t f) {
    return f == SHS_TFMT_CHAKRA || f == SHS_TFMT_ASTRA || f == SHS_TFMT_KINETO || f == SHS_TFMT_PYTORCH_ET;
}

/* One file of a trace: a path to read, or an archive member's bytes. */
typedef struct {
    char *name;            /* the path, or "ARCHIVE/member" (messages, the rank from its number) */
    const char *buf;       /* a member's bytes; NULL: read the file `name` */
    size_t len;
} entry_t;

/* The format the files of a directory or archive must share: that of its
 * first file read (`first`, with `more` set once others were read too);
 * UNKNOWN before any. */
typedef struct {
    const char *what;      /* "trace directory DIR", "archive A" */
    const char *first;
    shs_trace_format_t fmt;
    int more;
} set_format_t;

/* What every file of one load shares. */
typedef struct {
    int world, first_dim;
} load_ctx_t;

/* Bytes of a file detection looks at (and a streamed format reads again). */
#define PEEK ((size_t)1 << 20)

/* The refusals before a file is read into the trace: a format other than
 * the set's, or none (outside a set; in one it is skipped). */
static shs_status_t check_format(const char *name, shs_trace_format_t f, int in_set, const set_format_t *same) {
    reader_fn rd = reader_of(f);
    if (rd && same && same->fmt != SHS_TFMT_UNKNOWN && f != same->fmt)
        return shs_set_error(SHS_PARSE, "%s: is %s, but %s%s is %s: the files of %s must all be one format", name,
                             shs_trace_format_name(f), same->first, same->more ? " (and every file read before it)" : "",
                             shs_trace_format_name(same->fmt), same->what);
    if (!rd && !in_set)
        return shs_set_error(SHS_PARSE, "%s: unrecognized trace format (give --format: shardsim, nccl, pytorch-et, "
                                        "chakra, astra, kineto, flight, horovod)", name);
    return SHS_OK;
}

/* Read buf[0..len) (NUL at buf[len]) as format f into t. */
static shs_status_t read_as(shs_trace_t *t, const char *name, const char *buf, size_t len, shs_trace_format_t f,
                            const load_ctx_t *c) {
    shs_trace_input_t in = {.name = name, .buf = buf, .len = len, .rank = shs__rank_from_name(name),
                            .world = c->world, .first_dim = c->first_dim};
    return reader_of(f)(t, &in);
}

/* A file: its first PEEK bytes (inflated) tell the format; an NCCL log is
 * then streamed from its start (trace_nccl.h), any other format read whole
 * (at most SHS__TRACE_MAX_FILE bytes) and handed to its reader. */
static shs_status_t load_file(shs_trace_t *t, const char *path, shs_trace_format_t want, shs_trace_format_t *got,
                              const load_ctx_t *c, int in_set, const set_format_t *same) {
    shs__stream_t *s;
    SHS_CHECK(shs__stream_open(&s, path));
    char *buf = malloc(PEEK + 1);
    size_t len = 0, n = 1;
    shs_status_t st = buf ? SHS_OK : shs_set_error(SHS_HOST_OOM, "%s: out of memory", path);
    while (st == SHS_OK && len < PEEK && n > 0) st = shs__stream_read(s, buf + len, PEEK - len, &n), len += n;
    if (st == SHS_OK) {
        buf[len] = 0;
        *got = want != SHS_TFMT_UNKNOWN ? want : shs_trace_detect(buf, len);
        st = check_format(path, *got, in_set, same);
    }
    if (st == SHS_OK && *got == SHS_TFMT_NCCL) { /* streamed: never held whole */
        shs__lines_t l;
        st = shs__lines_init(&l, s);
        if (st == SHS_OK) st = shs__lines_rewind(&l);
        if (st == SHS_OK) st = shs__trace_import_nccl_lines(t, &l, path);
        shs__lines_free(&l);
    } else if (st == SHS_OK && reader_of(*got)) {
        if (len == PEEK) st = shs__stream_read_all(s, &buf, &len, len, SHS__TRACE_MAX_FILE);
        if (st == SHS_OK) st = read_as(t, path, buf, len, *got, c);
    }
    free(buf);
    shs__stream_close(s);
    return st;
}

/* An archive member: a copy, inflated when it is gzip data, then read. */
static shs_status_t load_member(shs_trace_t *t, const entry_t *e, shs_trace_format_t want, shs_trace_format_t *got,
                                const load_ctx_t *c, int in_set, const set_format_t *same) {
    char *buf = malloc(e->len + 1);
    size_t len = e->len;
    if (!buf) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", e->name);
    memcpy(buf, e->buf, len);
    buf[len] = 0;
    shs_status_t st = shs__gunzip(e->name, &buf, &len);
    if (st == SHS_OK) {
        *got = want != SHS_TFMT_UNKNOWN ? want : shs_trace_detect(buf, len);
        st = check_format(e->name, *got, in_set, same);
    }
    if (st == SHS_OK && reader_of(*got)) st = read_as(t, e->name, buf, len, *got, c);
    free(buf);
    return st;
}

static shs_status_t load_entry(shs_trace_t *t, const entry_t *e, shs_trace_format_t want, shs_trace_format_t *got,
                               const load_ctx_t *c, int in_set, const set_format_t *same) {
    return e->buf ? load_member(t, e, want, got, c, in_set, same) : load_file(t, e->name, want, got, c, in_set, same);
}

/* Load e[i], a file of a directory or archive, then claim the ranks it gave
 * records to: (*owner)[r] is the index + 1 of the file that first gave
 * rank r records. A second file giving records to the same rank is two
 * files claiming one rank (a copied or misnamed rank file; two Kineto or
 * Flight Recorder dumps with the same "rank"), refused naming both rather
 * than merged into one sequence. */
static shs_status_t load_claim(shs_trace_t *t, const char *where, const entry_t *e, size_t i, shs_trace_format_t want,
                               shs_trace_format_t *got, const load_ctx_t *c, int in_set, size_t **owner, int *nowner,
                               const set_format_t *same) {
    int w0 = t->world;
    size_t *before = malloc((size_t)(w0 > 0 ? w0 : 1) * sizeof *before);
    if (!before) return shs_set_error(SHS_HOST_OOM, "out of memory");
    for (int r = 0; r < w0; r++) before[r] = t->ranks[r].n;
    shs_status_t st = load_entry(t, &e[i], want, got, c, in_set, same);
    if (st == SHS_OK && t->world > *nowner) {
        size_t *no = realloc(*owner, (size_t)t->world * sizeof *no);
        if (!no) st = shs_set_error(SHS_HOST_OOM, "out of memory");
        else {
            memset(no + *nowner, 0, (size_t)(t->world - *nowner) * sizeof *no);
            *owner = no;
            *nowner = t->world;
        }
    }
    for (int r = 0; r < t->world && st == SHS_OK; r++) {
        if (t->ranks[r].n == (r < w0 ? before[r] : 0)) continue;
        size_t o = (*owner)[r];
        if (o && o != i + 1)
            st = shs_set_error(SHS_PARSE, "%s: has records of rank %d, and so has %s: two files of %s claim one rank",
                               e[i].name, r, e[o - 1].name, where);
        (*owner)[r] = i + 1;
    }
    free(before);
    return st;
}

static int cmp_entry(const void *a, const void *b) { return strcmp(((const entry_t *)a)->name, ((const entry_t *)b)->name); }

/* The files of a directory or archive (`what` names it in messages, `where`
 * is its path), sorted by name, read as one trace; *used gets their format. */
static shs_status_t load_set(shs_trace_t *t, const char *what, const char *where, entry_t *e, size_t n,
                             shs_trace_load_opts_t *opts, shs_trace_format_t *used) {
    if (n) qsort(e, n, sizeof *e, cmp_entry);
    load_ctx_t c = {opts->world, opts->first_dim};
    char *skipped = calloc(n ? n : 1, 1);
    size_t *owner = NULL; /* per rank: index + 1 of the file that gave it records */
    set_format_t fmt = {.what = what, .fmt = SHS_TFMT_UNKNOWN};
    int nowner = 0;
    shs_status_t st = skipped ? SHS_OK : shs_set_error(SHS_HOST_OOM, "out of memory");
    for (size_t i = 0; i < n && st == SHS_OK; i++) {
        struct stat fs;
        if (!e[i].buf && (stat(e[i].name, &fs) != 0 || S_ISDIR(fs.st_mode))) continue; /* subdirectories are not read */
        if (!e[i].buf && !S_ISREG(fs.st_mode)) { /* a FIFO among the rank files: refused, not waited on or skipped */
            st = shs_set_error(SHS_IO, "%s: is %s, not a regular file: every entry of %s must be a file (or a "
                               "subdirectory, not read)", e[i].name, shs__file_kind((unsigned)fs.st_mode), what);
            break;
        }
        shs_trace_format_t f;
        st = load_claim(t, where, e, i, opts->format, &f, &c, 1, &owner, &nowner, &fmt);
        if (st != SHS_OK) break;
        if (!reader_of(f)) { opts->files_skipped++; skipped[i] = 1; continue; }
        if (*used == SHS_TFMT_UNKNOWN) fmt.first = e[i].name, fmt.fmt = f;
        else fmt.more = 1;
        *used = f;
        opts->files_read++;
    }
    /* a skipped file named like the ones read (same extension) is a
     * damaged rank file, not a stray one: read it as their format, so
     * the error says what is wrong and where */
    for (size_t i = 0; i < n && st == SHS_OK && *used != SHS_TFMT_UNKNOWN; i++) {
        if (!skipped[i]) continue;
        const char *ext = strrchr(e[i].name, '.');
        int same = 0;
        for (size_t j = 0; j < n && !same; j++) {
            const char *ej = strrchr(e[j].name, '.');
            same = !skipped[j] && ext && ej && strchr(ext, '/') == NULL && strcmp(ext, ej) == 0;
        }
        if (!same) continue;
        shs_trace_format_t f;
        st = load_claim(t, where, e, i, *used, &f, &c, 0, &owner, &nowner, NULL);
        if (st == SHS_OK) /* it parses as that format after all (only detection failed): take it */
            opts->files_skipped--, opts->files_read++;
        else
            st = shs_set_error(SHS_PARSE, "%s (the other %s files in %s are %s)", shs_last_error(), ext, where,
                               shs_trace_format_name(*used));
    }
    free(skipped);
    free(owner);
    if (st == SHS_OK && opts->files_read == 0)
        st = shs_set_error(SHS_PARSE, "%s: no trace file of a known format in this %s", where,
                           e && n && e[0].buf ? "archive" : "directory");
    return st;
}

/* A tar archive (inflated already when it was a .tar.gz) as the set of its
 * members: each a rank's file, the hidden ones (a name starting with '.',
 * macOS's "._" resource files) left out. */
static shs_status_t load_archive(shs_trace_t *t, const char *path, const char *buf, size_t len,
                                 shs_trace_load_opts_t *opts, shs_trace_format_t *used) {
    shs__tar_member_t *m;
    size_t nm, n = 0;
    SHS_CHECK(shs__tar_members(path, buf, len, &m, &nm));
    entry_t *e = calloc(nm ? nm : 1, sizeof *e);
    shs_status_t st = e ? SHS_OK : shs_set_error(SHS_HOST_OOM, "out of memory");
    for (size_t i = 0; i < nm && st == SHS_OK; i++) {
        const char *base = strrchr(m[i].name, '/');
        if ((base ? base[1] : m[i].name[0]) == '.') continue;
        size_t l = strlen(path) + strlen(m[i].name) + 2;
        if (!(e[n].name = malloc(l))) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); break; }
        snprintf(e[n].name, l, "%s/%s", path, m[i].name);
        e[n].buf = buf + m[i].off;
        e[n++].len = m[i].size;
    }
    char what[4200];
    snprintf(what, sizeof what, "archive %s", path);
    if (st == SHS_OK) st = load_set(t, what, path, e, n, opts, used);
    for (size_t i = 0; i < n; i++) free(e[i].name);
    free(e);
    shs__tar_members_free(m, nm);
    return st;
}

/* A directory's entries (names starting with '.' are not read). */
static shs_status_t load_dir(shs_trace_t *t, const char *path, shs_trace_load_opts_t *opts, shs_trace_format_t *used) {
    DIR *d = opendir(path);
    entry_t *e = NULL;
    size_t n = 0, cap = 0;
    shs_status_t st = d ? SHS_OK : shs_set_error(SHS_IO, "%s: cannot open directory", path);
    struct dirent *de;
    while (st == SHS_OK && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            entry_t *ne = realloc(e, cap * sizeof *ne);
            if (!ne) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); break; }
            e = ne;
        }
        size_t l = strlen(path) + strlen(de->d_name) + 2;
        e[n] = (entry_t){0};
        if (!(e[n].name = malloc(l))) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); break; }
        snprintf(e[n++].name, l, "%s/%s", path, de->d_name);
    }
    if (d) closedir(d);
    char what[4200];
    snprintf(what, sizeof what, "trace directory %s", path);
    if (st == SHS_OK) st = load_set(t, what, path, e, n, opts, used);
    for (size_t i = 0; i < n; i++) free(e[i].name);
    free(e);
    return st;
}

/* A regular file: an archive of rank files, or one trace file. */
static shs_status_t load_path(shs_trace_t *t, const char *path, shs_trace_load_opts_t *opts, shs_trace_format_t *used) {
    shs__stream_t *s;
    SHS_CHECK(shs__stream_open(&s, path));
    char head[512];
    size_t len = 0, n = 1;
    shs_status_t st = SHS_OK;
    while (st == SHS_OK && len < sizeof head && n > 0) st = shs__stream_read(s, head + len, sizeof head - len, &n), len += n;
    if (st == SHS_OK && shs__is_tar(head, len)) {
        char *buf = NULL;
        size_t all = 0;
        if ((st = shs__stream_rewind(s)) == SHS_OK) st = shs__stream_read_all(s, &buf, &all, 0, SHS__TRACE_MAX_FILE);
        shs__stream_close(s);
        if (st == SHS_OK) st = load_archive(t, path, buf, all, opts, used);
        free(buf);
        return st;
    }
    shs__stream_close(s);
    if (st != SHS_OK) return st;
    load_ctx_t c = {opts->world, opts->first_dim};
    st = load_file(t, path, opts->format, used, &c, 0, NULL);
    opts->files_read = st == SHS_OK;
    return st;
}

/* After the reader(s): check and apply --world, number formats without
 * sequence numbers by position, name the format. */
static shs_status_t finish(shs_trace_t *t, const char *path, int world, shs_trace_format_t used) {
    if (t->world == 0) /* an empty log, or no line of the format: nothing to check, not an empty success */
        return shs_set_error(SHS_PARSE, "%s: has no communication record of any rank (empty, or not %s output)", path,
                             shs_trace_format_name(used));
    if (world > 0 && world < t->world && used != SHS_TFMT_ASTRA)
        return shs_set_error(SHS_INVALID_ARG, "%s: the trace has %d ranks, more than --world %d", path, t->world, world);
    if (world > t->world) SHS_CHECK(shs_trace_ensure_world(t, world));
    if (world > 0) t->views = 0; /* --world N: every rank of the N was to be traced */
    if (needs_renumber(used)) shs_trace_renumber(t);
    snprintf(t->format, sizeof t->format, "%s", shs_trace_format_name(used));
    return SHS_OK;
}

shs_status_t shs_trace_load(shs_trace_t **out, const char *path, shs_trace_load_opts_t *opts) {
    *out = NULL;
    shs_trace_load_opts_t dflt = {0};
    if (!opts) opts = &dflt;
    opts->files_read = opts->files_skipped = 0;
    shs_trace_t *t;
    SHS_CHECK(shs_trace_create(&t, 0));
    struct stat sb;
    shs_status_t st = SHS_OK;
    shs_trace_format_t used = SHS_TFMT_UNKNOWN;
    if (stat(path, &sb) != 0)
        st = shs_set_error(SHS_IO, "%s: no such file or directory", path);
    else if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) /* a FIFO would wait for a writer forever, a device read without end */
        st = shs_set_error(SHS_IO, "%s: is %s, not a regular file: a trace is read from a file or a directory of "
                           "per-rank files", path, shs__file_kind((unsigned)sb.st_mode));
    else if (S_ISDIR(sb.st_mode))
        st = load_dir(t, path, opts, &used);
    else
        st = load_path(t, path, opts, &used);
    if (st == SHS_OK) st = finish(t, path, opts->world, used);
    if (st != SHS_OK) {
        shs_trace_free(t);
        return st;
    }
    *out = t;
    return SHS_OK;
}

shs_status_t shs_trace_load_buffer(shs_trace_t **out, const shs_trace_input_t *in, shs_trace_format_t format) {
    *out = NULL;
    shs_trace_input_t plain = *in;
    char *inflated = NULL;
    if (shs__is_gzip(in->buf, in->len)) { /* inflate a copy: the caller's buffer is theirs */
        size_t n = in->len;
        if (!(inflated = malloc(n + 1))) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
        memcpy(inflated, in->buf, n + 1);
        SHS_CHECK(shs__gunzip(in->name, &inflated, &n));
        plain.buf = inflated;
        plain.len = n;
    }
    shs_trace_t *t = NULL;
    shs_status_t st = shs_trace_create(&t, 0);
    shs_trace_format_t f = format;
    if (st == SHS_OK && format == SHS_TFMT_UNKNOWN && shs__is_tar(plain.buf, plain.len)) { /* an archive of rank files */
        shs_trace_load_opts_t o = {.world = in->world, .first_dim = in->first_dim};
        f = SHS_TFMT_UNKNOWN;
        st = load_archive(t, in->name, plain.buf, plain.len, &o, &f);
    } else if (st == SHS_OK) {
        if (f == SHS_TFMT_UNKNOWN) f = shs_trace_detect(plain.buf, plain.len);
        reader_fn rd = reader_of(f);
        st = rd ? rd(t, &plain) : shs_set_error(SHS_PARSE, "%s: unrecognized trace format", in->name);
    }
    free(inflated);
    if (st == SHS_OK) st = finish(t, in->name, in->world, f);
    if (st != SHS_OK) {
        if (t) shs_trace_free(t);
        return st;
    }
    *out = t;
    return SHS_OK;
}
