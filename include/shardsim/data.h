/* data.h - byte-level training text and deterministic batches.
 *
 * What it is: a corpus (a file's bytes, or the small text built into the
 * program), its documents (cut at a separator byte), and the sampler that
 * gives every rank its slice of every global batch. Sequence g of the run
 * is a pure function of (seed, g), where g = (step * N + rank) * B + b, so
 * a run's data depends on the world size and micro-batch but never on the
 * strategy. The trainer's micro-step s * K + k (gradient accumulation K)
 * takes the place of `step`: step s's global batch is then the sequences
 * g in [s*K*N*B, (s+1)*K*N*B) for every split N x B x K of the same
 * product, only their assignment to ranks and micro-batches differs.
 * What it is not: a tokenizer: tokens are byte values 0..255.
 */
#ifndef SHARDSIM_DATA_H
#define SHARDSIM_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/status.h"
#include "shardsim/model.h" /* SHS_IGNORE_INDEX */

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

/* ---- documents: packing and padding ------------------------------------------
 * A document is a run of bytes ending with the separator byte, which it
 * keeps as its last token (as an EOS token would be; the last document may
 * lack it). Within a document the target of position t is the document's
 * next byte, so the separator is predicted; the target of a document's
 * last position would lie in the next document and is SHS_IGNORE_INDEX:
 * no target is ever taken across a document boundary. */
typedef enum {
    SHS_DATA_STREAM = 0, /* shs_corpus_batch: a window of T + 1 bytes anywhere, no masks (the default) */
    SHS_DATA_PACK,       /* --pack: documents back to back in each sequence (per-document masks) */
    SHS_DATA_PAD,        /* --pad: one document per sequence, padded */
} shs_data_mode_t;

typedef struct {
    shs_data_mode_t mode;  /* PACK or PAD */
    uint8_t sep;           /* the separator byte; also the padding token (pad = EOS, as Llama tokenizers) */
    int T;                 /* the sequence length the pieces were cut for */
    size_t num_docs;       /* >= 1 */
    size_t *start;         /* (num_docs + 1) offsets into the corpus: document i is [start[i], start[i+1]) */
    /* the corpus's documents before any cutting (what a header reports):
     * how many, how many are the separator alone (two separators in a row,
     * or one at the start), how many are longer than T (cut: split into
     * pieces by PACK, their first T tokens taken by PAD) */
    size_t documents, empty, cut;
} shs_documents_t;

/* Cut corpus `c` into documents at byte `sep` for sequences of T tokens.
 * PACK: a document longer than T is split into pieces of T bytes (the last
 * one shorter), each packed as a document of its own (positions restart,
 * attention and targets do not cross into the next piece), as packers that
 * split overflowing documents do. PAD: documents stay whole (a sequence
 * takes the first T tokens of a longer one). Errors: SHS_INVALID_ARG (mode
 * not PACK or PAD, T < 1, empty corpus, a corpus without the separator byte: it would be one
 * document, which is rarely meant; the text names the corpus and the byte),
 * SHS_HOST_OOM. */
shs_status_t shs_documents_build(shs_documents_t *d, const shs_corpus_t *c, shs_data_mode_t mode, uint8_t sep,
                                 int T);
void shs_documents_free(shs_documents_t *d);

/* Sequence g (T positions) as a pure function of (seed, g), drawn as
 * document i = rand(seed, g) mod num_docs (the stream sampler's generator).
 * PACK: documents i, i+1, ... (cyclic) back to back until T positions are
 * filled; the last one is cut at T (its last kept position's target is its
 * next byte, a real target: it is still the same document). positions
 * restart at 0 per document, doc_ids count the documents of the sequence
 * from 0. PAD: document i's first min(len, T) tokens, then padding (the
 * separator byte) with target SHS_IGNORE_INDEX; positions are t and
 * doc_ids 0 (one document per row, what NULL means in shs_batch_t).
 * positions and doc_ids may be NULL (not written). */
void shs_documents_sequence(const shs_documents_t *d, const shs_corpus_t *c, uint64_t seed, uint64_t g, int T,
                            int32_t *tokens, int32_t *targets, int32_t *positions, int32_t *doc_ids);

/* The number of real targets (not SHS_IGNORE_INDEX) of sequence g, as
 * shs_documents_sequence would write it, without building it: 0 when
 * every position is padding or a document's last. */
int64_t shs_documents_num_targets(const shs_documents_t *d, uint64_t seed, uint64_t g, int T);

/* Rank `rank`'s B sequences at `step`, g = (step * nranks + rank) * B + b:
 * shs_corpus_batch's when d is NULL (positions and doc_ids untouched),
 * else shs_documents_sequence's. Arrays B*T, row-major (b, t). */
void shs_data_batch(const shs_corpus_t *c, const shs_documents_t *d, uint64_t seed, long step, int rank,
                    int nranks, int B, int T, int32_t *tokens, int32_t *targets, int32_t *positions,
                    int32_t *doc_ids);

/* Parse a --doc-sep value into a byte: a decimal number 0-255, a hex
 * number 0x00-0xff, a single character ("|"), or a C escape: \n \t \r
 * \0 \\ \' \" \xHH (one or two hex digits). Returns 0 and sets *out,
 * or -1 for anything else. */
int shs_doc_sep_parse(const char *s, uint8_t *out);

#endif
