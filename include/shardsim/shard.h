/* shard.h - how a flat parameter of one wrap unit is split across ranks.
 *
 * What it is: the shard arithmetic of FSDP's FlatParameter and ZeRO's
 * partitions (llm.c zero.cuh's {offset, size} descriptor): a flat buffer of
 * `numel` elements is right-padded to a multiple of N, and rank r owns the
 * contiguous range [r*S, (r+1)*S) with S = ceil(numel / N). Padding is zero
 * and stays zero; it never enters a result.
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

/* S = ceil(numel / nranks); 0 when numel == 0. nranks >= 1. */
static inline size_t shs_shard_size(size_t numel, int nranks) {
    return (numel + (size_t)nranks - 1) / (size_t)nranks;
}
/* N * S: the flat buffer's length after right-padding. */
static inline size_t shs_padded_numel(size_t numel, int nranks) {
    return shs_shard_size(numel, nranks) * (size_t)nranks;
}
/* Rank `rank`'s shard of a flat buffer of `numel` real elements. */
static inline shs_shard_t shs_shard_of(size_t numel, int nranks, int rank) {
    shs_shard_t s;
    s.size = shs_shard_size(numel, nranks);
    s.offset = s.size * (size_t)rank;
    s.valid = s.offset >= numel ? 0 : (numel - s.offset < s.size ? numel - s.offset : s.size);
    return s;
}

#endif
