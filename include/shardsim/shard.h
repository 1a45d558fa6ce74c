/* shard.h - how a flat parameter of one wrap unit is split across ranks.
 *
 * What it is: the shard arithmetic of FSDP's FlatParameter and ZeRO's
 * partitions (llm.c zero.cuh's {offset, size} descriptor): a flat buffer of
 * `numel` elements is right-padded to N * S elements, and rank r owns the
 * contiguous range [r*S, (r+1)*S) with S = ceil(numel / N) rounded up to a
 * multiple of the alignment E (--shard-align; E = 1: no rounding), so every
 * shard starts on a multiple of E. With E > 1 the padding can cover several
 * trailing ranks entirely. Padding is zero and stays zero; it never enters a
 * result.
 * What it is not: memory management (see strategy.h).
 */
#ifndef SHARDSIM_SHARD_H
#define SHARDSIM_SHARD_H

#include <stddef.h>

typedef struct {
    size_t offset;   /* first element owned by the rank, in the padded flat buffer */
    size_t size;     /* elements owned (== shard size S, padding included) */
    size_t valid;    /* of those, elements below numel (real, not padding) */
} shs_shard_t;

/* S = ceil(numel / nranks) rounded up to a multiple of align (elements);
 * 0 when numel == 0. nranks >= 1, align >= 1. */
static inline size_t shs_shard_size(size_t numel, int nranks, size_t align) {
    size_t s = (numel + (size_t)nranks - 1) / (size_t)nranks;
    return (s + align - 1) / align * align;
}
/* N * S: the flat buffer's length after right-padding. */
static inline size_t shs_padded_numel(size_t numel, int nranks, size_t align) {
    return shs_shard_size(numel, nranks, align) * (size_t)nranks;
}
/* Rank `rank`'s shard of a flat buffer of `numel` real elements. */
static inline shs_shard_t shs_shard_of(size_t numel, int nranks, int rank, size_t align) {
    shs_shard_t s;
    s.size = shs_shard_size(numel, nranks, align);
    s.offset = s.size * (size_t)rank;
    s.valid = s.offset >= numel ? 0 : (numel - s.offset < s.size ? numel - s.offset : s.size);
    return s;
}

#endif
