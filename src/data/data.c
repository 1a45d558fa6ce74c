/* data.c - corpus loading and the deterministic batch sampler (data.h). */
#include "shardsim/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rng.h"

extern const char shs__builtin_corpus[];
extern const size_t shs__builtin_corpus_len;

#define DATA_STREAM 0x64617461ULL /* "data": keeps batch draws apart from init draws */

shs_status_t shs_corpus_load(shs_corpus_t *c, const char *path) {
    memset(c, 0, sizeof *c);
    struct stat sb;
    if (stat(path, &sb) != 0) return shs_set_error(SHS_IO, "cannot read data file '%s': %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return shs_set_error(SHS_IO, "data file '%s' is a directory", path);
    /* a pipe or device could block or never end: regular files only, and
     * the size limit is checked before anything is read */
    if (!S_ISREG(sb.st_mode)) return shs_set_error(SHS_IO, "data file '%s' is not a regular file", path);
    if ((uint64_t)sb.st_size > (uint64_t)SHS_CORPUS_MAX_BYTES)
        return shs_set_error(SHS_IO, "data file '%s' is larger than the %zu-byte limit", path,
                             (size_t)SHS_CORPUS_MAX_BYTES);
    FILE *f = fopen(path, "rb");
    if (!f) return shs_set_error(SHS_IO, "cannot read data file '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap) break;
        if (cap >= SHS_CORPUS_MAX_BYTES) {
            free(buf);
            fclose(f);
            return shs_set_error(SHS_IO, "data file '%s' is larger than the %zu-byte limit", path,
                                 (size_t)SHS_CORPUS_MAX_BYTES);
        }
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return shs_set_error(SHS_HOST_OOM, "out of host memory reading '%s'", path);
    if (err) {
        free(buf);
        return shs_set_error(SHS_IO, "error reading data file '%s'", path);
    }
    if (len == 0) {
        free(buf);
        return shs_set_error(SHS_IO, "data file '%s' is empty", path);
    }
    c->bytes = buf;
    c->len = len;
    c->owned = 1;
    snprintf(c->source, sizeof c->source, "%s", path);
    return SHS_OK;
}

void shs_corpus_builtin(shs_corpus_t *c) {
    memset(c, 0, sizeof *c);
    c->bytes = (uint8_t *)shs__builtin_corpus;
    c->len = shs__builtin_corpus_len;
    snprintf(c->source, sizeof c->source, "built-in");
}

void shs_corpus_free(shs_corpus_t *c) {
    if (c->owned) free(c->bytes);
    memset(c, 0, sizeof *c);
}

/* The stream sampler's sequence g: T + 1 bytes from a drawn start. */
static void stream_sequence(const shs_corpus_t *c, uint64_t seed, uint64_t g, int T, int32_t *tokens,
                            int32_t *targets) {
    size_t starts = c->len - (size_t)T; /* valid start positions */
    size_t start = (size_t)(shs__rand_bits(seed, DATA_STREAM, g) % starts);
    for (int t = 0; t < T; t++) {
        tokens[t] = c->bytes[start + (size_t)t];
        targets[t] = c->bytes[start + (size_t)t + 1];
    }
}

void shs_corpus_batch(const shs_corpus_t *c, uint64_t seed, long step, int rank, int nranks, int B, int T,
                      int32_t *tokens, int32_t *targets) {
    shs_data_batch(c, NULL, seed, step, rank, nranks, B, T, tokens, targets, NULL, NULL);
}

shs_status_t shs_documents_build(shs_documents_t *d, const shs_corpus_t *c, shs_data_mode_t mode, uint8_t sep,
                                 int T) {
    memset(d, 0, sizeof *d);
    if (mode != SHS_DATA_PACK && mode != SHS_DATA_PAD)
        return shs_set_error(SHS_INVALID_ARG, "documents: mode must be pack or pad (got %d)", (int)mode);
    if (T < 1) return shs_set_error(SHS_INVALID_ARG, "documents: sequence length must be >= 1 (got %d)", T);
    if (!c->len) return shs_set_error(SHS_INVALID_ARG, "documents: corpus '%s' is empty", c->source);
    if (!memchr(c->bytes, sep, c->len))
        return shs_set_error(SHS_INVALID_ARG,
                             "documents: '%s' holds no separator byte 0x%02x, so it would be one document of %zu "
                             "bytes: check --doc-sep (a digit string is a byte value: 9 is 0x09)",
                             c->source, sep, c->len);
    size_t max = mode == SHS_DATA_PACK ? (size_t)T : SIZE_MAX; /* a piece's longest */
    /* two passes: count the boundaries (and the documents' statistics), then record them */
    for (int pass = 0; pass < 2; pass++) {
        size_t n = 0, begin = 0, doc_begin = 0;
        for (size_t i = 0; i < c->len; i++) {
            int last = c->bytes[i] == sep || i + 1 == c->len;
            if (i + 1 - begin == max || last) {
                if (pass) d->start[n] = begin;
                n++;
                begin = i + 1;
            }
            if (!pass && last) { /* a document of the corpus ends at i */
                size_t len = i + 1 - doc_begin;
                d->documents++;
                d->empty += len == 1 && c->bytes[i] == sep;
                d->cut += len > (size_t)T;
                doc_begin = i + 1;
            }
        }
        if (!pass) {
            d->start = malloc((n + 1) * sizeof *d->start);
            if (!d->start) return shs_set_error(SHS_HOST_OOM, "documents: cannot index %zu documents of '%s'", n,
                                                c->source);
            d->num_docs = n;
        }
    }
    d->start[d->num_docs] = c->len;
    d->mode = mode;
    d->sep = sep;
    d->T = T;
    return SHS_OK;
}

void shs_documents_free(shs_documents_t *d) {
    free(d->start);
    memset(d, 0, sizeof *d);
}

/* Sequence g (shs_documents_sequence), written where the arrays are not
 * NULL (c only read then); returns its count of real targets. */
static int64_t documents_sequence(const shs_documents_t *d, const shs_corpus_t *c, uint64_t seed, uint64_t g, int T,
                                  int32_t *tokens, int32_t *targets, int32_t *positions, int32_t *doc_ids) {
    size_t i = (size_t)(shs__rand_bits(seed, DATA_STREAM, g) % d->num_docs);
    int64_t counted = 0;
    int t = 0;
    for (int32_t doc = 0; t < T; doc++, i = (i + 1) % d->num_docs) {
        size_t s = d->start[i], len = d->start[i + 1] - s;
        size_t take = len < (size_t)(T - t) ? len : (size_t)(T - t);
        counted += (int64_t)take - (take == len); /* a whole piece's last position has no target */
        for (size_t j = 0; tokens && j < take; j++) {
            tokens[t + (int)j] = c->bytes[s + j];
            targets[t + (int)j] = j + 1 < len ? c->bytes[s + j + 1] : SHS_IGNORE_INDEX;
            if (positions) positions[t + (int)j] = d->mode == SHS_DATA_PACK ? (int32_t)j : t + (int32_t)j;
            if (doc_ids) doc_ids[t + (int)j] = d->mode == SHS_DATA_PACK ? doc : 0;
        }
        t += (int)take;
        if (d->mode == SHS_DATA_PAD) break;
    }
    for (; tokens && t < T; t++) { /* PAD only: the rest is padding */
        tokens[t] = d->sep;
        targets[t] = SHS_IGNORE_INDEX;
        if (positions) positions[t] = t;
        if (doc_ids) doc_ids[t] = 0;
    }
    return counted;
}

void shs_documents_sequence(const shs_documents_t *d, const shs_corpus_t *c, uint64_t seed, uint64_t g, int T,
                            int32_t *tokens, int32_t *targets, int32_t *positions, int32_t *doc_ids) {
    SHS_ASSERT(d->num_docs >= 1 && d->start[d->num_docs] == c->len);
    documents_sequence(d, c, seed, g, T, tokens, targets, positions, doc_ids);
}

int64_t shs_documents_num_targets(const shs_documents_t *d, uint64_t seed, uint64_t g, int T) {
    SHS_ASSERT(d->num_docs >= 1);
    return documents_sequence(d, NULL, seed, g, T, NULL, NULL, NULL, NULL);
}

void shs_data_batch(const shs_corpus_t *c, const shs_documents_t *d, uint64_t seed, long step, int rank,
                    int nranks, int B, int T, int32_t *tokens, int32_t *targets, int32_t *positions,
                    int32_t *doc_ids) {
    SHS_ASSERT(d || c->len >= (size_t)T + 1);
    for (int b = 0; b < B; b++) {
        uint64_t g = ((uint64_t)step * (uint64_t)nranks + (uint64_t)rank) * (uint64_t)B + (uint64_t)b;
        size_t o = (size_t)b * (size_t)T;
        if (!d) stream_sequence(c, seed, g, T, tokens + o, targets + o);
        else
            shs_documents_sequence(d, c, seed, g, T, tokens + o, targets + o, positions ? positions + o : NULL,
                                   doc_ids ? doc_ids + o : NULL);
    }
}

static int hex_digit(char ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                             : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

int shs_doc_sep_parse(const char *s, uint8_t *out) {
    if (!s || !*s) return -1;
    if (s[0] == '\\') {
        int v = -1;
        switch (s[1]) {
        case 'n': v = '\n'; break;
        case 't': v = '\t'; break;
        case 'r': v = '\r'; break;
        case '0': v = 0; break;
        case '\\': case '\'': case '"': v = s[1]; break;
        case 'x': case 'X': {
            int hi = hex_digit(s[2]), lo = hi < 0 ? -1 : hex_digit(s[3]);
            if (hi < 0 || s[lo < 0 ? 3 : 4]) return -1;
            *out = (uint8_t)(lo < 0 ? hi : hi * 16 + lo);
            return 0;
        }
        default: return -1;
        }
        if (s[2]) return -1;
        *out = (uint8_t)v;
        return 0;
    }
    if (s[0] >= '0' && s[0] <= '9') { /* decimal, or hex after 0x (never octal) */
        int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
        const char *p = s + (hex ? 2 : 0);
        if (!*p) return -1;
        unsigned v = 0;
        for (; *p; p++) {
            int dig = hex ? hex_digit(*p) : (*p >= '0' && *p <= '9' ? *p - '0' : -1);
            if (dig < 0) return -1;
            v = v * (hex ? 16u : 10u) + (unsigned)dig;
            if (v > 255) return -1;
        }
        *out = (uint8_t)v;
        return 0;
    }
    if (s[1]) return -1; /* one character stands for itself */
    *out = (uint8_t)s[0];
    return 0;
}
