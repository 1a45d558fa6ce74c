/* caching_allocator.c - the caching allocator model (caching_allocator.h):
 * blocks of segments, two pools, best fit, split and merge.
 * What it is not: memory (addresses are a counter, never dereferenced).
 */
#include "device/caching_allocator.h"

#include <stdlib.h>

/* c10/cuda/CUDACachingAllocator.cpp's constants */
#define MIN_BLOCK ((size_t)512)               /* kMinBlockSize */
#define SMALL_SIZE ((size_t)1 << 20)          /* kSmallSize */
#define SMALL_BUFFER ((size_t)2 << 20)        /* kSmallBuffer */
#define LARGE_BUFFER ((size_t)20 << 20)       /* kLargeBuffer */
#define MIN_LARGE_ALLOC ((size_t)10 << 20)    /* kMinLargeAlloc */
#define ROUND_LARGE ((size_t)2 << 20)         /* kRoundLarge */

enum { SMALL = 0, LARGE = 1 };

typedef struct {
    size_t addr, size;
    long prev, next;   /* neighbours in the segment, -1 none */
    int pool;
    int allocated;     /* 1 in use, 0 free (in its pool), -1 an unused slot */
} blk_t;

struct shs__callocator {
    blk_t *b;
    long n, cap;       /* slots used (live and unused), capacity */
    long unused;       /* an unused slot to take first (-1 none) */
    size_t next_addr, limit;
    shs__callocator_stats_t st;
};

shs__callocator_t *shs__callocator_create(size_t limit) {
    shs__callocator_t *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->unused = -1;
    a->limit = limit;
    a->next_addr = 1; /* any start: addresses only order blocks */
    return a;
}

void shs__callocator_destroy(shs__callocator_t *a) {
    if (!a) return;
    free(a->b);
    free(a);
}

void shs__callocator_set_limit(shs__callocator_t *a, size_t limit) { a->limit = limit; }

void shs__callocator_stats(const shs__callocator_t *a, shs__callocator_stats_t *out) { *out = a->st; }

static size_t round_size(size_t s) { return s < MIN_BLOCK ? MIN_BLOCK : (s + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK; }

static size_t segment_size(size_t s) {
    if (s <= SMALL_SIZE) return SMALL_BUFFER;
    if (s < MIN_LARGE_ALLOC) return LARGE_BUFFER;
    return (s + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

static long new_slot(shs__callocator_t *a) {
    if (a->unused >= 0) {
        long i = a->unused;
        a->unused = -1;
        for (long k = i + 1; k < a->n && a->unused < 0; k++) /* the next unused slot, if any */
            if (a->b[k].allocated < 0) a->unused = k;
        return i;
    }
    if (a->n == a->cap) {
        long cap = a->cap ? 2 * a->cap : 64;
        blk_t *p = realloc(a->b, (size_t)cap * sizeof *p);
        if (!p) return -1;
        a->b = p;
        a->cap = cap;
    }
    return a->n++;
}

static void drop_slot(shs__callocator_t *a, long i) {
    a->b[i].allocated = -1;
    if (a->unused < 0 || i < a->unused) a->unused = i;
}

/* The pool's lower_bound on (size, address): the smallest free block that holds `size`. */
static long best_fit(const shs__callocator_t *a, int pool, size_t size) {
    long best = -1;
    for (long i = 0; i < a->n; i++) {
        const blk_t *k = &a->b[i];
        if (k->allocated != 0 || k->pool != pool || k->size < size) continue;
        if (best < 0 || k->size < a->b[best].size || (k->size == a->b[best].size && k->addr < a->b[best].addr))
            best = i;
    }
    return best;
}

/* release_cached_blocks: give back every free segment that is not split. */
static void release_free_segments(shs__callocator_t *a) {
    for (long i = 0; i < a->n; i++) {
        blk_t *k = &a->b[i];
        if (k->allocated != 0 || k->prev >= 0 || k->next >= 0) continue;
        a->st.reserved -= k->size;
        a->st.segments--;
        drop_slot(a, i);
    }
}

long shs__callocator_alloc(shs__callocator_t *a, size_t bytes) {
    size_t size = round_size(bytes);
    int pool = size <= SMALL_SIZE ? SMALL : LARGE;
    long i = best_fit(a, pool, size);
    if (i < 0) {
        size_t seg = segment_size(size);
        if (a->st.reserved + seg > a->limit || a->st.reserved + seg < a->st.reserved) {
            release_free_segments(a); /* cuda_malloc_retry */
            a->st.retries++;
        }
        if ((i = new_slot(a)) < 0) return -1;
        a->b[i] = (blk_t){.addr = a->next_addr, .size = seg, .prev = -1, .next = -1, .pool = pool, .allocated = 0};
        a->next_addr += seg;
        a->st.reserved += seg;
        a->st.segments++;
        if (a->st.reserved > a->st.reserved_peak) a->st.reserved_peak = a->st.reserved;
    }
    size_t rest = a->b[i].size - size;
    if (pool == SMALL ? rest >= MIN_BLOCK : rest > SMALL_SIZE) { /* should_split */
        long r = new_slot(a);
        if (r < 0) return -1;
        blk_t *k = &a->b[i];
        a->b[r] = (blk_t){.addr = k->addr + size, .size = rest, .prev = i, .next = k->next, .pool = pool,
                          .allocated = 0};
        if (k->next >= 0) a->b[k->next].prev = r;
        k->next = r;
        k->size = size;
    }
    a->b[i].allocated = 1;
    a->st.allocated += a->b[i].size;
    return i;
}

/* try_merge_blocks: `src`, a free neighbour of free `dst`, joins it. */
static void merge(shs__callocator_t *a, long dst, long src) {
    if (src < 0 || a->b[src].allocated != 0) return;
    blk_t *d = &a->b[dst], *s = &a->b[src];
    if (d->prev == src) {
        d->addr = s->addr;
        d->prev = s->prev;
        if (d->prev >= 0) a->b[d->prev].next = dst;
    } else {
        d->next = s->next;
        if (d->next >= 0) a->b[d->next].prev = dst;
    }
    d->size += s->size;
    drop_slot(a, src);
}

void shs__callocator_free(shs__callocator_t *a, long i) {
    if (i < 0 || i >= a->n || a->b[i].allocated != 1) return;
    a->b[i].allocated = 0;
    a->st.allocated -= a->b[i].size;
    merge(a, i, a->b[i].prev);
    merge(a, i, a->b[i].next);
}
