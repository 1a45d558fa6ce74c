/* caching_allocator.h - private: a model of PyTorch's CUDA caching allocator
 * (c10/cuda/CUDACachingAllocator.cpp), for the bytes a GPU run reserves
 * beside the bytes its tensors hold. Internal to src/device/.
 *
 * What it is: the allocator's placement rules on sizes alone (no memory):
 *   - a request is rounded up to a multiple of 512 B (kMinBlockSize), at
 *     least 512 B;
 *   - requests of at most 1 MiB (kSmallSize) come from the small pool, the
 *     rest from the large pool;
 *   - the smallest free block of the pool that holds the request is taken
 *     (ties: the lowest address: the pool's lower_bound on (size, address));
 *   - without one, a segment is reserved (cudaMalloc) of 2 MiB
 *     (kSmallBuffer) for a small request, 20 MiB (kLargeBuffer) for one below
 *     10 MiB (kMinLargeAlloc), else the request rounded up to 2 MiB
 *     (kRoundLarge); when that would pass the limit, every free segment that
 *     is not split is released first (cuda_malloc_retry / release_cached_blocks,
 *     counted as a retry);
 *   - a block larger than the request is split when the rest is at least
 *     512 B (small pool) or more than 1 MiB (large pool), the rest staying
 *     free in the pool;
 *   - a freed block merges with free neighbours of its segment; segments are
 *     never given back otherwise (no empty_cache).
 * One stream (blocks used on several streams are not delayed), no
 * expandable segments, max_split_size unlimited (PyTorch's defaults).
 * What it is not: an allocator (it hands out no memory) or the ledger that
 * calls it (gpu_ledger.c).
 */
#ifndef SHARDSIM_CACHING_ALLOCATOR_H
#define SHARDSIM_CACHING_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

typedef struct shs__callocator shs__callocator_t;

/* A model with nothing reserved; `limit` bytes may be reserved before
 * cached segments are released (SIZE_MAX: no limit). NULL: out of host memory. */
shs__callocator_t *shs__callocator_create(size_t limit);
void shs__callocator_destroy(shs__callocator_t *a);
/* Set the limit (as at create). */
void shs__callocator_set_limit(shs__callocator_t *a, size_t limit);
/* Place a request of `bytes` (> 0); returns its handle (>= 0), or -1 when
 * the host cannot grow the model's tables. Reserving past the limit is not
 * refused: the reserved bytes then exceed it (the caller's capacity check
 * says whether the run fits). */
long shs__callocator_alloc(shs__callocator_t *a, size_t bytes);
/* Give a handle back. */
void shs__callocator_free(shs__callocator_t *a, long handle);

typedef struct {
    size_t reserved;        /* bytes of segments now */
    size_t reserved_peak;   /* the most since creation */
    size_t allocated;       /* bytes of blocks in use (requests rounded to 512 B) */
    size_t segments;        /* segments now */
    uint64_t retries;       /* times cached segments were released to stay within the limit */
} shs__callocator_stats_t;

void shs__callocator_stats(const shs__callocator_t *a, shs__callocator_stats_t *out);

#endif
