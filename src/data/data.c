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

void shs_corpus_batch(const shs_corpus_t *c, uint64_t seed, long step, int rank, int nranks, int B, int T,
                      int32_t *tokens, int32_t *targets) {
    SHS_ASSERT(c->len >= (size_t)T + 1);
    size_t starts = c->len - (size_t)T; /* valid start positions */
    for (int b = 0; b < B; b++) {
        uint64_t g = ((uint64_t)step * (uint64_t)nranks + (uint64_t)rank) * (uint64_t)B + (uint64_t)b;
        size_t start = (size_t)(shs__rand_bits(seed, DATA_STREAM, g) % starts);
        for (int t = 0; t < T; t++) {
            tokens[b * T + t] = c->bytes[start + (size_t)t];
            targets[b * T + t] = c->bytes[start + (size_t)t + 1];
        }
    }
}
