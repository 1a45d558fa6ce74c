/* data.h - byte-level training text and deterministic batches.
 *
 * What it is: a corpus (a file's bytes, or the small text built into the
 * program) and the sampler that gives every rank its slice of every global
 * batch. Sequence g of the run starts at a position drawn from (seed, g)
 * alone, where g = (step * N + rank) * B + b, so a run's data depends on the
 * world size and micro-batch but never on the strategy.
 * What it is not: a tokenizer: tokens are byte values 0..255.
 */
#ifndef SHARDSIM_DATA_H
#define SHARDSIM_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/status.h"

typedef struct {
    uint8_t *bytes;
    size_t len;
    char source[512];   /* file path or "built-in" */
    int owned;          /* bytes were allocated by shs_corpus_load */
} shs_corpus_t;

/* Largest corpus read (4 GiB): also bounds endless inputs like /dev/zero. */
#define SHS_CORPUS_MAX_BYTES ((size_t)1 << 32)

/* Read a whole file (or pipe). Errors (SHS_IO, text names the path and the
 * reason): unreadable, a directory, empty, larger than SHS_CORPUS_MAX_BYTES. */
shs_status_t shs_corpus_load(shs_corpus_t *c, const char *path);
/* The built-in default corpus (no I/O). */
void shs_corpus_builtin(shs_corpus_t *c);
void shs_corpus_free(shs_corpus_t *c);

/* Fill tokens and targets (B*T each, host) for `rank` at `step` (0-based):
 * targets are tokens shifted by one. Requires c->len >= T + 1. */
void shs_corpus_batch(const shs_corpus_t *c, uint64_t seed, long step, int rank, int nranks, int B, int T,
                      int32_t *tokens, int32_t *targets);

#endif
