/* device_memory.c - device memory behind the public wrappers: the table of
 * live allocations, per-category accounting against the capacity in two
 * ledgers (this process's, and the modelled GPU run's with its caching
 * allocator model), out-of-memory text, copies checked against the
 * allocation that holds them.
 * What it is not: kernels (device.c) or any backend's memory (device_cpu.c, ...).
 */
#include "device/device_impl.h"

#include "device/caching_allocator.h"

#include "shardsim/units.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOMBSTONE ((void *)1)

const char *shs_mem_category_name(shs_mem_category_t c) {
    switch (c) {
#define SHS_MEM_NAME(name, str) case SHS_MEM_##name: return str;
        SHS_MEM_CATEGORY_MAP(SHS_MEM_NAME)
#undef SHS_MEM_NAME
    default: return "invalid";
    }
}

shs_status_t shs__device_new(shs_device_t **out, const shs_device_iface_t *iface, void *ctx, int rank,
                             size_t capacity, int num_threads) {
    if (!out || !iface) return shs_set_error(SHS_INVALID_ARG, "shs__device_new: NULL argument");
    if (rank < 0) return shs_set_error(SHS_INVALID_ARG, "device: negative rank %d", rank);
    shs_device_t *dev = calloc(1, sizeof *dev);
    if (!dev) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate device struct", rank);
    dev->iface = iface;
    dev->ctx = ctx;
    dev->rank = rank;
    dev->num_threads = num_threads < 1 ? 1 : num_threads;
    dev->stats.capacity = capacity;
    dev->gpu.alloc.capacity = capacity;
    if (!(dev->callocator = shs__callocator_create(SIZE_MAX))) {
        free(dev);
        return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate the caching allocator model", rank);
    }
    *out = dev;
    return SHS_OK;
}

void shs_device_destroy(shs_device_t *dev) {
    if (!dev) return;
    for (size_t i = 0; i < dev->table_cap; i++) {
        void *p = dev->table[i].ptr;
        if (p && p != TOMBSTONE) dev->iface->free(dev, p, dev->table[i].bytes);
    }
    free(dev->table);
    shs__callocator_destroy(dev->callocator);
    if (dev->iface->destroy) dev->iface->destroy(dev);
    free(dev);
}

const char *shs_device_backend(const shs_device_t *dev) { return dev->iface->name; }

/* ---- allocation table: open addressing keyed by pointer ---------------- */

static size_t hash_ptr(const void *p, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static shs__alloc_entry_t *table_find(shs_device_t *dev, const void *p) {
    if (!dev->table_cap) return NULL;
    for (size_t i = hash_ptr(p, dev->table_cap), n = 0; n < dev->table_cap; i = (i + 1) & (dev->table_cap - 1), n++) {
        if (dev->table[i].ptr == NULL) return NULL;
        if (dev->table[i].ptr == p) return &dev->table[i];
    }
    return NULL;
}

static int table_insert_raw(shs__alloc_entry_t *table, size_t cap, shs__alloc_entry_t e) {
    for (size_t i = hash_ptr(e.ptr, cap), n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
        if (table[i].ptr == NULL || table[i].ptr == TOMBSTONE) {
            table[i] = e;
            return 1;
        }
    }
    return 0;
}

static shs_status_t table_insert(shs_device_t *dev, shs__alloc_entry_t e) {
    if ((dev->table_used + 1) * 2 > dev->table_cap) {
        /* rehash, dropping tombstones, to at most 1/4 load */
        size_t cap = 64;
        while ((dev->table_live + 1) * 4 > cap) cap *= 2;
        shs__alloc_entry_t *t = calloc(cap, sizeof *t);
        if (!t) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot grow allocation table", dev->rank);
        for (size_t i = 0; i < dev->table_cap; i++)
            if (dev->table[i].ptr && dev->table[i].ptr != TOMBSTONE) table_insert_raw(t, cap, dev->table[i]);
        free(dev->table);
        dev->table = t;
        dev->table_cap = cap;
        dev->table_used = dev->table_live;
    }
    SHS_ASSERT(table_insert_raw(dev->table, dev->table_cap, e));
    dev->table_used++;
    return SHS_OK;
}

static shs_status_t oom_error(shs_device_t *dev, size_t bytes, shs_mem_category_t cat, const char *tag) {
    char req[32], used[32], cap[32], usage[512];
    size_t off = 0;
    usage[0] = 0;
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) {
        char b[32];
        off += (size_t)snprintf(usage + off, sizeof usage - off, "%s%s %s", c ? ", " : "",
                                shs_mem_category_name((shs_mem_category_t)c), shs_format_bytes(b, sizeof b, (double)dev->stats.current[c]));
        if (off >= sizeof usage) break;
    }
    return shs_set_error(SHS_OUT_OF_MEMORY,
                         "rank %d: out of device memory: requested %s (%s%s%s) with %s of %s in use (%s)",
                         dev->rank, shs_format_bytes(req, sizeof req, (double)bytes), shs_mem_category_name(cat),
                         tag ? ", " : "", tag ? tag : "", shs_format_bytes(used, sizeof used, (double)dev->stats.total_current),
                         shs_format_bytes(cap, sizeof cap, (double)dev->stats.capacity), usage);
}

/* A buffer only the modelled GPU holds: not one of this process's allocations. */
static int gpu_only(const shs__alloc_entry_t *e) { return e->bytes == 0 && e->gpu_bytes > 0; }

/* One ledger's books: `bytes` more (sign 1) or fewer (-1) in category `cat`. */
static void ledger_add(shs_mem_stats_t *s, shs_mem_category_t cat, size_t bytes, int sign, size_t *window_peak) {
    if (sign < 0) {
        s->current[cat] -= bytes;
        s->total_current -= bytes;
        return;
    }
    s->current[cat] += bytes;
    s->total_current += bytes;
    if (s->current[cat] > s->peak[cat]) s->peak[cat] = s->current[cat];
    if (s->total_current > s->total_peak) s->total_peak = s->total_current;
    if (s->total_current > *window_peak) *window_peak = s->total_current;
}

/* The GPU ledger's side of an allocation (sign 1) or a free (-1). */
static void gpu_books(shs_device_t *dev, shs__alloc_entry_t *e, int sign) {
    shs_gpu_mem_stats_t *g = &dev->gpu;
    ledger_add(&g->alloc, e->cat, e->gpu_bytes, sign, &dev->gpu_window_peak);
    size_t extra = e->bytes > e->gpu_bytes ? e->bytes - e->gpu_bytes : 0;
    if (sign < 0) g->emulation_current -= extra;
    else if ((g->emulation_current += extra) > g->emulation_peak) g->emulation_peak = g->emulation_current;
    if (!e->gpu_bytes) return;
    if (sign < 0) {
        g->alloc.num_allocs--;
        shs__callocator_free(dev->callocator, e->gpu_block);
    } else {
        g->alloc.num_allocs++;
    }
    shs__callocator_stats_t cs;
    shs__callocator_stats(dev->callocator, &cs);
    g->reserved = cs.reserved;
    if (cs.reserved > g->reserved_peak) g->reserved_peak = cs.reserved;
    g->alloc_retries = cs.retries;
}

shs_status_t shs_device_alloc_modeled(shs_device_t *dev, void **ptr, size_t bytes, size_t gpu_bytes,
                                      shs_mem_category_t cat, const char *tag) {
    SHS_ASSERT(dev && ptr);
    if ((int)cat < 0 || cat >= SHS_MEM_NUM_CATEGORIES)
        return shs_set_error(SHS_INVALID_ARG, "rank %d: invalid memory category %d", dev->rank, (int)cat);
    *ptr = NULL;
    shs_mem_stats_t *s = &dev->stats;
    if (bytes > s->capacity || s->total_current > s->capacity - bytes) return oom_error(dev, bytes, cat, tag);
    long block = gpu_bytes ? shs__callocator_alloc(dev->callocator, gpu_bytes) : -1;
    if (gpu_bytes && block < 0) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot grow the caching allocator model", dev->rank);
    void *p = NULL;
    shs_status_t st = dev->iface->alloc(dev, &p, bytes);
    shs__alloc_entry_t e = {.ptr = p, .bytes = bytes, .gpu_bytes = gpu_bytes, .gpu_block = block, .cat = cat};
    if (st == SHS_OK) st = table_insert(dev, e);
    if (st != SHS_OK) {
        if (p) dev->iface->free(dev, p, bytes);
        shs__callocator_free(dev->callocator, block);
        return st;
    }
    dev->table_live++;
    if (!gpu_only(&e)) s->num_allocs++;
    ledger_add(s, cat, bytes, 1, &dev->window_peak);
    gpu_books(dev, &e, 1);
    *ptr = p;
    return SHS_OK;
}

shs_status_t shs_device_alloc(shs_device_t *dev, void **ptr, size_t bytes, shs_mem_category_t cat,
                              const char *tag) {
    return shs_device_alloc_modeled(dev, ptr, bytes, bytes, cat, tag);
}

void shs_device_free(shs_device_t *dev, void *ptr) {
    if (!ptr) return;
    shs__alloc_entry_t *e = table_find(dev, ptr);
    if (!e) {
        fprintf(stderr, "shardsim: rank %d: free of %p, which this device did not allocate\n", dev->rank, ptr);
        SHS_ASSERT(!"shs_device_free: pointer not owned by this device");
    }
    ledger_add(&dev->stats, e->cat, e->bytes, -1, &dev->window_peak);
    dev->table_live--;
    if (!gpu_only(e)) dev->stats.num_allocs--;
    gpu_books(dev, e, -1);
    e->ptr = TOMBSTONE;
    if (dev->poison_freed & (1 << e->cat)) dev->iface->memset(dev, ptr, 0xff, e->bytes); /* all-ones: f32 NaN */
    dev->iface->free(dev, ptr, e->bytes);
}

void shs_device_set_poison_freed(shs_device_t *dev, unsigned category_mask) { dev->poison_freed = (int)category_mask; }

/* ---- bounds: every device range inside the allocation that holds it ----- */

/* The live allocation whose bytes hold address p (a 0-byte allocation holds
 * its own address only), or NULL. A scan of the table: it holds the few
 * hundred allocations of a run, and a call moves far more bytes. */
static const shs__alloc_entry_t *table_holding(const shs_device_t *dev, const void *p) {
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < dev->table_cap; i++) {
        const shs__alloc_entry_t *e = &dev->table[i];
        if (!e->ptr || e->ptr == TOMBSTONE) continue;
        uintptr_t b = (uintptr_t)e->ptr;
        if (a == b || (a > b && a - b < e->bytes)) return e;
    }
    return NULL;
}

shs_status_t shs__device_check_range(const shs_device_t *dev, const char *op, const char *arg, const void *p,
                                     size_t bytes, int strict) {
    const shs__alloc_entry_t *e = table_holding(dev, p);
    if (!e) {
        if (!strict) return SHS_OK;
        return shs_set_error(SHS_INVALID_ARG, "rank %d: %s: %s %p (%zu bytes) is in no allocation of this device",
                             dev->rank, op, arg, p, bytes);
    }
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)e->ptr), room = e->bytes - off;
    if (bytes <= room) return SHS_OK;
    return shs_set_error(SHS_INVALID_ARG,
                         "rank %d: %s: %s [%zu, %zu) overflows its allocation (%s, %zu bytes at %p) by %zu bytes",
                         dev->rank, op, arg, off, off + bytes, shs_mem_category_name(e->cat), e->bytes, e->ptr,
                         bytes - room);
}

shs_status_t shs_memcpy_h2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst && src);
    SHS_CHECK(shs__device_check_range(dev, "memcpy_h2d", "dst", dst, bytes, 1));
    return dev->iface->memcpy_h2d(dev, dst, src, bytes);
}
shs_status_t shs_memcpy_d2h(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst && src);
    SHS_CHECK(shs__device_check_range(dev, "memcpy_d2h", "src", src, bytes, 1));
    return dev->iface->memcpy_d2h(dev, dst, src, bytes);
}
shs_status_t shs_memcpy_d2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst && src);
    SHS_CHECK(shs__device_check_range(dev, "memcpy_d2d", "dst", dst, bytes, 1));
    SHS_CHECK(shs__device_check_range(dev, "memcpy_d2d", "src", src, bytes, 1));
    if (dst == src) return SHS_OK;
    return dev->iface->memcpy_d2d(dev, dst, src, bytes);
}
shs_status_t shs_memset(shs_device_t *dev, void *dst, int value, size_t bytes) {
    if (!bytes) return SHS_OK;
    SHS_ASSERT(dst);
    SHS_CHECK(shs__device_check_range(dev, "memset", "dst", dst, bytes, 1));
    return dev->iface->memset(dev, dst, value, bytes);
}
shs_status_t shs_device_sync(shs_device_t *dev) { return dev->iface->sync ? dev->iface->sync(dev) : SHS_OK; }

void shs_device_mem_stats(const shs_device_t *dev, shs_mem_stats_t *out) { *out = dev->stats; }

shs_status_t shs_device_kernel_stats(const shs_device_t *dev, shs_kernel_stats_t *out) {
    memset(out, 0, sizeof *out);
    if (!dev->iface->kernel_stats)
        return shs_set_error(SHS_UNSUPPORTED, "rank %d: the %s backend does not count kernel work", dev->rank,
                             dev->iface->name);
    dev->iface->kernel_stats(dev, out);
    return SHS_OK;
}

size_t shs_device_window_peak(shs_device_t *dev) {
    size_t p = dev->window_peak > dev->stats.total_current ? dev->window_peak : dev->stats.total_current;
    dev->window_peak = dev->stats.total_current;
    return p;
}

static void reset_ledger(shs_mem_stats_t *s) {
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) s->peak[c] = s->current[c];
    s->total_peak = s->total_current;
}

void shs_device_reset_peak(shs_device_t *dev) {
    reset_ledger(&dev->stats);
    reset_ledger(&dev->gpu.alloc);
    dev->gpu.reserved_peak = dev->gpu.reserved;
    dev->gpu.emulation_peak = dev->gpu.emulation_current;
}

void shs_device_gpu_mem_stats(const shs_device_t *dev, shs_gpu_mem_stats_t *out) { *out = dev->gpu; }

void shs_device_set_gpu_reserve_limit(shs_device_t *dev, size_t bytes) { shs__callocator_set_limit(dev->callocator, bytes); }

size_t shs_device_gpu_window_peak(shs_device_t *dev) {
    size_t p = dev->gpu_window_peak > dev->gpu.alloc.total_current ? dev->gpu_window_peak : dev->gpu.alloc.total_current;
    dev->gpu_window_peak = dev->gpu.alloc.total_current;
    return p;
}
