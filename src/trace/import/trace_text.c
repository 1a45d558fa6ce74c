/* trace_text.c - shardsim's own trace format: writer and reader (the format
 * is specified in trace.h and README.md).
 * Sizes: `bytes` with the scope the line names ('rank' or 'total', trace.h's
 * shs_bytes_scope_t; for all_to_all 'rank' is the block for one peer and
 * 'total' a rank's whole send buffer).
 * What it is not: an importer of other tools' formats. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardsim/durable.h"
#include "shardsim/trace.h"
#include "trace/trace_util.h"

#define MAGIC "shardsim-trace 1"

static void put_int(FILE *f, long long v) {
    if (v < 0) fputs(" -", f);
    else fprintf(f, " %lld", v);
}

static void put_time(FILE *f, double s) {
    if (s < 0) fputs(" -", f);
    else fprintf(f, " %.3f", s * 1e6);
}

static void write_header(const shs_trace_t *t, FILE *f) {
    fprintf(f, MAGIC "\nworld %d\n", t->world);
    for (int c = 0; c < t->ncomms; c++) {
        const shs_trace_comm_t *cm = &t->comms[c];
        fprintf(f, "comm %s %d ", cm->name, cm->size);
        for (int i = 0; i < cm->size; i++) fprintf(f, i ? ",%d" : "%d", cm->ranks[i]);
        fputc('\n', f);
    }
    fputs("# rank comm seq op count dtype redop root peer tag bytes scope t_start_us t_end_us marker\n", f);
}

static void write_rec(const shs_trace_t *t, FILE *f, const shs_trace_rec_t *r) {
    fprintf(f, "%d %s %lld %s %llu %s %s", r->rank, t->comms[r->comm].name, (long long)r->seq,
            shs_coll_op_name(r->op), (unsigned long long)r->count,
            r->dtype == SHS_TRACE_NONE ? "-" : shs_dtype_name((shs_dtype_t)r->dtype),
            r->redop == SHS_TRACE_NONE ? "-" : shs_redop_name((shs_redop_t)r->redop));
    put_int(f, r->root);
    put_int(f, r->peer);
    put_int(f, r->tag);
    fprintf(f, " %llu %s", (unsigned long long)r->bytes, r->scope == SHS_BYTES_TOTAL ? "total" : "rank");
    put_time(f, r->t_start);
    put_time(f, r->t_end);
    const char *m = shs_trace_str(t, r->marker);
    fprintf(f, " %s", *m ? m : "-");
    if (r->op == SHS_OP_ALL_TO_ALLV && r->v_bytes) fprintf(f, " vbytes=%llu", (unsigned long long)r->v_bytes);
    fputc('\n', f);
}

shs_status_t shs_trace_write_text(const shs_trace_t *t, FILE *f, int rank) {
    write_header(t, f);
    for (int r = 0; r < t->world; r++) {
        if (rank >= 0 && r != rank) continue;
        for (size_t i = 0; i < t->ranks[r].n; i++) write_rec(t, f, &t->ranks[r].recs[i]);
    }
    if (fflush(f) != 0 || ferror(f)) return shs_set_error(SHS_IO, "trace write failed: %s", strerror(errno));
    return SHS_OK;
}

#define RANK_FILE "rank%d.trace" /* a trace directory's file of rank %d */

/* A directory written again by a smaller world keeps no rank files of the
 * larger one (they would be read back as ranks of this trace): remove
 * every regular file named rank<k>.trace with k >= world. */
static shs_status_t remove_stale_rank_files(const char *dir, int world) {
    DIR *d = opendir(dir);
    if (!d) return shs_set_error(SHS_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    struct dirent *e;
    shs_status_t st = SHS_OK;
    while ((e = readdir(d)) != NULL && st == SHS_OK) {
        int k;
        char mine[64];
        /* only names this writer makes: rank<k>.trace as RANK_FILE prints k */
        if (sscanf(e->d_name, RANK_FILE, &k) != 1 || k < world) continue;
        snprintf(mine, sizeof mine, RANK_FILE, k);
        if (strcmp(mine, e->d_name) != 0) continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && unlink(path) != 0)
            st = shs_set_error(SHS_IO, "%s: cannot remove a rank file of an earlier, larger trace: %s", path,
                               strerror(errno));
    }
    closedir(d);
    return st;
}

shs_status_t shs_trace_write_dir(const shs_trace_t *t, const char *dir) {
    struct stat sb;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return shs_set_error(SHS_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return shs_set_error(SHS_IO, "%s: exists and is not a directory", dir);
    for (int r = 0; r < t->world; r++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/" RANK_FILE, dir, r);
        shs_afile_t af; /* each file whole or not at all */
        SHS_CHECK(shs_afile_open(&af, path, "w"));
        shs_status_t st = shs_trace_write_text(t, af.fp, r);
        if (st != SHS_OK) {
            shs_afile_discard(&af);
            return shs_set_error(SHS_IO, "%s: %s", path, shs_last_error());
        }
        SHS_CHECK(shs_afile_commit(&af));
    }
    return remove_stale_rank_files(dir, t->world);
}

/* ---- reader -------------------------------------------------------------- */

typedef struct {
    const char *name;
    long line;
    int world;      /* ranks declared by this file's 'world' line; 0 before it */
    long world_line;
} where_t;

#define PERR(w, ...) perr(w, __VA_ARGS__)
static shs_status_t perr(const where_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static shs_status_t perr(const where_t *w, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return shs_set_error(SHS_PARSE, "%s:%ld: %s", w->name, w->line, msg);
}

/* '-' -> SHS_TRACE_NONE, else an int in [lo, hi]. */
static int opt_int(shs__tok_t t, long lo, long hi, int32_t *out) {
    if (shs__tok_is(t, "-")) { *out = SHS_TRACE_NONE; return 0; }
    int64_t v;
    if (shs__parse_i64(t.s, t.n, &v) || v < lo || v > hi) return -1;
    *out = (int32_t)v;
    return 0;
}

static int opt_time(shs__tok_t t, double *out) {
    if (shs__tok_is(t, "-")) { *out = -1; return 0; }
    double us;
    if (shs__parse_double(t.s, t.n, &us)) return -1;
    return shs__trace_time(us, 1e-6, out);
}

static shs_status_t parse_comm(shs_trace_t *t, const where_t *w, shs__tok_t *tk, int nt) {
    if (nt != 4) return PERR(w, "'comm' wants: comm <name> <size> <rank,rank,...>");
    uint64_t size;
    if (shs__parse_u64(tk[2].s, tk[2].n, 0, &size) || size < 1 || size > SHS_TRACE_MAX_WORLD)
        return PERR(w, "communicator size '%.*s' is not in 1..%d", (int)tk[2].n, tk[2].s, SHS_TRACE_MAX_WORLD);
    int *ranks = malloc(size * sizeof(int));
    if (!ranks) return shs_set_error(SHS_HOST_OOM, "%s:%ld: out of memory", w->name, w->line);
    size_t k = 0, i = 0;
    const char *s = tk[3].s;
    while (i <= tk[3].n) {
        size_t j = i;
        while (j < tk[3].n && s[j] != ',') j++;
        uint64_t g;
        if (k == size || shs__parse_u64(s + i, j - i, 0, &g) || g >= SHS_TRACE_MAX_WORLD) {
            free(ranks);
            return PERR(w, "member list '%.*s' must be %llu ranks in 0..%d", (int)tk[3].n, s,
                        (unsigned long long)size, SHS_TRACE_MAX_WORLD - 1);
        }
        if (w->world > 0 && g >= (uint64_t)w->world) {
            free(ranks);
            return PERR(w, "communicator '%.*s' names rank %llu, beyond the world of %d ranks declared at line %ld "
                        "(ranks 0..%d)", (int)tk[1].n, tk[1].s, (unsigned long long)g, w->world, w->world_line,
                        w->world - 1);
        }
        ranks[k++] = (int)g;
        i = j + 1;
    }
    if (k != size) {
        free(ranks);
        return PERR(w, "communicator lists %zu members but its size is %llu", k, (unsigned long long)size);
    }
    char name[128];
    shs_status_t st = shs_trace_add_comm(t, shs__tok_copy(tk[1], name, sizeof name), (int)size, ranks, NULL);
    free(ranks);
    if (st != SHS_OK) return PERR(w, "%s", shs_last_error());
    return SHS_OK;
}

/* Lookups a large trace repeats on every line: communicators and markers
 * by a small hash of their text (each hit verified by comparing the text,
 * so a miss only costs the full lookup). */
#define MARKER_SLOTS 256
#define COMM_SLOTS 256
#define MEMO_SLOTS 16
/* A name parsed before (op, dtype, reduce op) and its value; n 0 empty. */
typedef struct {
    char s[24];
    size_t n;
    int32_t v;
} memo_t;
typedef struct {
    int comm[COMM_SLOTS];          /* comm ids + 1, 0 empty */
    uint32_t marker[MARKER_SLOTS]; /* string ids, 0 empty */
    memo_t op[MEMO_SLOTS], dtype[MEMO_SLOTS], redop[MEMO_SLOTS];
} cache_t;

static int tok_eq(shs__tok_t a, const char *s) { return strncmp(a.s, s, a.n) == 0 && s[a.n] == 0; }

static uint32_t tok_hash(shs__tok_t tok) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < tok.n; i++) h = (h ^ (unsigned char)tok.s[i]) * 16777619u;
    return h;
}

static int find_comm_cached(shs_trace_t *t, cache_t *c, shs__tok_t tok, char *buf, size_t cap) {
    int *slot = &c->comm[tok_hash(tok) % COMM_SLOTS];
    if (*slot > 0 && *slot <= t->ncomms && tok_eq(tok, t->comms[*slot - 1].name)) return *slot - 1;
    int id = shs_trace_find_comm(t, shs__tok_copy(tok, buf, cap));
    if (id >= 0) *slot = id + 1;
    return id;
}

/* parse(token) through memo: a name parsed before is not parsed again.
 * The token is in buf after a miss (for the caller's message). */
static int memo_parse(memo_t *memo, shs__tok_t tok, int (*parse)(const char *, int32_t *), char *buf, size_t cap,
                      int32_t *v) {
    memo_t *m = &memo[tok_hash(tok) % MEMO_SLOTS];
    if (m->n && m->n == tok.n && memcmp(m->s, tok.s, tok.n) == 0) {
        *v = m->v;
        return 0;
    }
    if (parse(shs__tok_copy(tok, buf, cap), v)) return -1;
    if (tok.n < sizeof m->s) {
        memcpy(m->s, tok.s, tok.n);
        m->n = tok.n;
        m->v = *v;
    }
    return 0;
}

static int parse_op(const char *s, int32_t *v) {
    shs_coll_op_t o;
    if (shs_coll_op_parse(s, &o) || o == SHS_OP_SPLIT) return -1;
    *v = (int32_t)o;
    return 0;
}

static int parse_dtype(const char *s, int32_t *v) {
    shs_dtype_t d;
    if (shs_dtype_parse(s, &d)) return -1;
    *v = (int32_t)d;
    return 0;
}

static int parse_redop(const char *s, int32_t *v) {
    shs_redop_t o;
    if (shs_redop_parse(s, &o)) return -1;
    *v = (int32_t)o;
    return 0;
}

static uint32_t intern_cached(shs_trace_t *t, cache_t *c, shs__tok_t tok, char *buf, size_t cap) {
    uint32_t *slot = &c->marker[tok_hash(tok) % MARKER_SLOTS];
    if (*slot && *slot < t->nstrs && tok.n < cap && tok_eq(tok, t->strs[*slot])) return *slot;
    uint32_t id = shs_trace_intern(t, shs__tok_copy(tok, buf, cap));
    if (id != UINT32_MAX) *slot = id;
    return id;
}

static shs_status_t parse_rec(shs_trace_t *t, cache_t *cache, const where_t *w, shs__tok_t *tk, int nt) {
    int vb = nt == 16 && tk[15].n > 7 && memcmp(tk[15].s, "vbytes=", 7) == 0; /* all_to_allv's split sizes */
    if (nt != 15 && !vb) return PERR(w, "a record has 15 fields (an all_to_allv 16, the last vbytes=N), this line has %d",
                                     nt > 16 ? 17 : nt);
    shs_trace_rec_t r = shs_trace_rec_init();
    r.src_line = w->line;
    char buf[256];
    int64_t v;
    uint64_t u;
    if (shs__parse_i64(tk[0].s, tk[0].n, &v) || v < 0 || v >= t->world)
        return PERR(w, "rank '%.*s' is not in 0..%d (%s)", (int)tk[0].n, tk[0].s, t->world - 1,
                    w->world > 0 ? "the world declared by the 'world' line" : "the ranks of the communicators declared so far");
    r.rank = (int32_t)v;
    r.comm = find_comm_cached(t, cache, tk[1], buf, sizeof buf);
    if (r.comm < 0) return PERR(w, "communicator '%s' is not declared", buf);
    if (shs__parse_i64(tk[2].s, tk[2].n, &r.seq) || r.seq < 0) return PERR(w, "bad sequence number '%s'", shs__tok_copy(tk[2], buf, sizeof buf));
    int32_t v32;
    if (memo_parse(cache->op, tk[3], parse_op, buf, sizeof buf, &v32)) return PERR(w, "unknown op '%s'", buf);
    r.op = (shs_coll_op_t)v32;
    if (shs__parse_u64(tk[4].s, tk[4].n, 0, &r.count)) return PERR(w, "bad count '%s'", shs__tok_copy(tk[4], buf, sizeof buf));
    if (!shs__tok_is(tk[5], "-") && memo_parse(cache->dtype, tk[5], parse_dtype, buf, sizeof buf, &r.dtype))
        return PERR(w, "unknown dtype '%s'", buf);
    if (!shs__tok_is(tk[6], "-") && memo_parse(cache->redop, tk[6], parse_redop, buf, sizeof buf, &r.redop))
        return PERR(w, "unknown reduce op '%s'", buf);
    if (opt_int(tk[7], 0, SHS_TRACE_MAX_WORLD - 1, &r.root)) return PERR(w, "bad root");
    if (opt_int(tk[8], 0, SHS_TRACE_MAX_WORLD - 1, &r.peer)) return PERR(w, "bad peer");
    if (opt_int(tk[9], 0, INT32_MAX, &r.tag)) return PERR(w, "bad tag");
    if (shs__parse_u64(tk[10].s, tk[10].n, 0, &u)) return PERR(w, "bad byte count '%s'", shs__tok_copy(tk[10], buf, sizeof buf));
    r.bytes = u;
    if (r.dtype != SHS_TRACE_NONE) { /* bytes are whole elements, and not none of them */
        size_t es = shs_dtype_size((shs_dtype_t)r.dtype);
        if (es == 0 || (r.count > 0 && r.bytes == 0) || r.bytes % es != 0)
            return PERR(w, "byte count %llu does not hold %llu whole %s elements of %zu bytes",
                        (unsigned long long)r.bytes, (unsigned long long)r.count, shs_dtype_name((shs_dtype_t)r.dtype), es);
    }
    if (shs__tok_is(tk[11], "rank")) r.scope = SHS_BYTES_PER_RANK;
    else if (shs__tok_is(tk[11], "total")) r.scope = SHS_BYTES_TOTAL;
    else return PERR(w, "byte scope must be 'rank' or 'total'");
    if (r.dtype != SHS_TRACE_NONE && r.count > 0 && r.op != SHS_OP_ALL_TO_ALLV &&
        r.count <= SHS_TRACE_MAX_BYTES / shs_dtype_size((shs_dtype_t)r.dtype)) {
        /* count's scope (trace.h): one rank's part for all_gather /
         * reduce_scatter, the whole buffer otherwise; gather / scatter /
         * all_to_all may count either, every other op has one size */
        uint64_t want = r.count * shs_dtype_size((shs_dtype_t)r.dtype), n = (uint64_t)t->comms[r.comm].size;
        int per_rank_ok = r.scope == SHS_BYTES_PER_RANK ? r.bytes == want : r.bytes == want * n;
        int total_ok = r.scope == SHS_BYTES_TOTAL ? r.bytes == want : r.bytes * n == want;
        int scales = r.op == SHS_OP_ALL_GATHER || r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_ALL_TO_ALL ||
                     r.op == SHS_OP_GATHER || r.op == SHS_OP_SCATTER;
        int ok = !scales ? r.bytes == want
                 : r.op == SHS_OP_ALL_GATHER || r.op == SHS_OP_REDUCE_SCATTER ? per_rank_ok
                                                                            : per_rank_ok || total_ok;
        if (!ok)
            return PERR(w, "count %llu x %s (%zu bytes) = %llu bytes, but the line states %llu bytes (scope %s%s)",
                        (unsigned long long)r.count, shs_dtype_name((shs_dtype_t)r.dtype),
                        shs_dtype_size((shs_dtype_t)r.dtype), (unsigned long long)want,
                        (unsigned long long)r.bytes, r.scope == SHS_BYTES_TOTAL ? "total" : "rank",
                        scales ? ", comm size counted" : "");
    }
    if (opt_time(tk[12], &r.t_start) || opt_time(tk[13], &r.t_end)) return PERR(w, "bad time (microseconds in 0..2^63 ns, or '-')");
    if (r.t_start >= 0 && r.t_end >= 0 && r.t_end < r.t_start)
        return PERR(w, "the call ends (%.*s us) before it starts (%.*s us)", (int)tk[13].n, tk[13].s, (int)tk[12].n, tk[12].s);
    if (vb && (r.op != SHS_OP_ALL_TO_ALLV || shs__parse_u64(tk[15].s + 7, tk[15].n - 7, 0, &r.v_bytes) ||
               r.v_bytes > SHS_TRACE_MAX_BYTES))
        return PERR(w, "'%s': vbytes=N (bytes, at most 2^50) is an all_to_allv's field", shs__tok_copy(tk[15], buf, sizeof buf));
    if (!shs__tok_is(tk[14], "-")) {
        r.marker = intern_cached(t, cache, tk[14], buf, sizeof buf);
        if (r.marker == UINT32_MAX) return shs_set_error(SHS_HOST_OOM, "%s:%ld: out of memory", w->name, w->line);
    }
    if (shs_trace_append(t, &r) != SHS_OK) return PERR(w, "%s", shs_last_error());
    return SHS_OK;
}

static shs_status_t read_lines(shs_trace_t *t, cache_t *cache, where_t *wp, const char *buf, size_t len);

shs_status_t shs_trace_read_text(shs_trace_t *t, const char *buf, size_t len, const char *name) {
    where_t w = {name, 0, 0, 0};
    cache_t *cache = calloc(1, sizeof *cache);
    if (!cache) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
    shs_status_t st = read_lines(t, cache, &w, buf, len);
    free(cache);
    return st;
}

static shs_status_t read_lines(shs_trace_t *t, cache_t *cache, where_t *wp, const char *buf, size_t len) {
    where_t w = *wp;
    size_t i = 0;
    int seen_magic = 0;
    snprintf(t->format, sizeof t->format, "shardsim");
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t j = nl ? (size_t)(nl - buf) : len;
        w.line++;
        const char *line = buf + i;
        size_t n = j - i;
        i = j + 1;
        if (memchr(line, 0, n)) return PERR(&w, "NUL byte in a text trace");
        shs__tok_t tk[16];
        int nt = shs__tokens(line, n, tk, 16);
        if (nt == 0 || tk[0].s[0] == '#') continue;
        if (!seen_magic) {
            if (nt != 2 || !shs__tok_is(tk[0], "shardsim-trace")) return PERR(&w, "not a shardsim trace (first line must be '" MAGIC "')");
            if (!shs__tok_is(tk[1], "1")) return PERR(&w, "unsupported shardsim trace version '%.*s'", (int)tk[1].n, tk[1].s);
            seen_magic = 1;
            continue;
        }
        if (shs__tok_is(tk[0], "shardsim-trace")) continue; /* concatenated files */
        if (shs__tok_is(tk[0], "world")) {
            uint64_t n_;
            if (nt != 2 || shs__parse_u64(tk[1].s, tk[1].n, 0, &n_) || n_ < 1 || n_ > SHS_TRACE_MAX_WORLD)
                return PERR(&w, "'world' wants a rank count in 1..%d", SHS_TRACE_MAX_WORLD);
            if ((int)n_ < t->world) /* a communicator or an earlier file already named a rank beyond it */
                return PERR(&w, "'world %d', but rank %d is already named (by a communicator or an earlier file)",
                            (int)n_, t->world - 1);
            w.world = (int)n_;
            w.world_line = w.line;
            if (shs_trace_ensure_world(t, (int)n_) != SHS_OK) return PERR(&w, "%s", shs_last_error());
            continue;
        }
        if (shs__tok_is(tk[0], "comm")) {
            SHS_CHECK(parse_comm(t, &w, tk, nt));
            continue;
        }
        SHS_CHECK(parse_rec(t, cache, &w, tk, nt));
    }
    if (!seen_magic) return PERR(&w, "empty file: not a shardsim trace");
    return SHS_OK;
}
