/* test_gpu_ledger.c - the modelled GPU's ledger (device.h) and its caching
 * allocator model (src/device/caching_allocator.h).
 *
 * Expected values are worked by hand from the rules of PyTorch's
 * c10/cuda/CUDACachingAllocator.cpp (kMinBlockSize 512 B, kSmallSize 1 MiB,
 * kSmallBuffer 2 MiB, kLargeBuffer 20 MiB, kMinLargeAlloc 10 MiB,
 * kRoundLarge 2 MiB; best fit; a large block split only when more than
 * 1 MiB is left; cached unsplit segments released before a cudaMalloc past
 * the limit), not from the model's code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "device/caching_allocator.h"
#include "shardsim/device.h"

#define MiB ((size_t)1 << 20)

static shs__callocator_stats_t stats_of(const shs__callocator_t *a) {
    shs__callocator_stats_t s;
    shs__callocator_stats(a, &s);
    return s;
}

/* Small requests: rounded to 512 B, packed in one 2 MiB segment, merged back. */
static void test_small_requests_share_a_2mib_segment(void **state) {
    (void)state;
    shs__callocator_t *a = shs__callocator_create(SIZE_MAX);
    assert_non_null(a);
    long x = shs__callocator_alloc(a, 100);  /* 512 */
    long y = shs__callocator_alloc(a, 600);  /* 1024 */
    long z = shs__callocator_alloc(a, MiB);  /* 1 MiB is still small: 1 MiB from the same segment */
    shs__callocator_stats_t s = stats_of(a);
    assert_int_equal(s.reserved, 2 * MiB);
    assert_int_equal(s.segments, 1);
    assert_int_equal(s.allocated, 512 + 1024 + MiB);
    long w = shs__callocator_alloc(a, MiB);  /* 1 MiB - 1536 B left: a second 2 MiB segment */
    s = stats_of(a);
    assert_int_equal(s.reserved, 4 * MiB);
    shs__callocator_free(a, x);
    shs__callocator_free(a, y);
    shs__callocator_free(a, z);
    shs__callocator_free(a, w);
    s = stats_of(a);
    assert_int_equal(s.allocated, 0);
    assert_int_equal(s.reserved, 4 * MiB); /* cached, not given back */
    assert_int_equal(s.reserved_peak, 4 * MiB);
    /* 2 MiB is large (> 1 MiB): the large pool is empty, so a 20 MiB segment, its 18 MiB rest split off */
    long v = shs__callocator_alloc(a, 2 * MiB);
    assert_int_equal(stats_of(a).reserved, 24 * MiB);
    long u = shs__callocator_alloc(a, 2 * MiB - 512); /* large (> 1 MiB): the 18 MiB rest of the 20 MiB segment */
    assert_int_equal(stats_of(a).reserved, 24 * MiB);
    shs__callocator_free(a, v);
    shs__callocator_free(a, u);
    shs__callocator_alloc(a, 2 * MiB - 1024); /* the merged 20 MiB block: no new segment */
    assert_int_equal(stats_of(a).reserved, 24 * MiB);
    shs__callocator_destroy(a);
}

/* Large requests: 1..10 MiB from 20 MiB segments, >= 10 MiB their own
 * segment rounded to 2 MiB; a rest of 1 MiB or less is not split off. */
static void test_large_requests_segments_and_split(void **state) {
    (void)state;
    shs__callocator_t *a = shs__callocator_create(SIZE_MAX);
    long p = shs__callocator_alloc(a, 5 * MiB);        /* 20 MiB segment, 15 MiB left */
    long q = shs__callocator_alloc(a, 12 * MiB);       /* best fit: the 15 MiB rest; 3 MiB left */
    shs__callocator_stats_t s = stats_of(a);
    assert_int_equal(s.reserved, 20 * MiB);
    assert_int_equal(s.segments, 1);
    long r = shs__callocator_alloc(a, 11 * MiB + 1);   /* 11 MiB + 512 B: own segment of 12 MiB, 0.5 MiB rest kept */
    s = stats_of(a);
    assert_int_equal(s.reserved, 32 * MiB);
    assert_int_equal(s.allocated, 5 * MiB + 12 * MiB + 12 * MiB); /* the unsplit rest counts as allocated */
    long t = shs__callocator_alloc(a, 2 * MiB + 512);  /* the 3 MiB rest, whole: 1 MiB - 512 B left is not split */
    s = stats_of(a);
    assert_int_equal(s.reserved, 32 * MiB);
    assert_int_equal(s.allocated, 5 * MiB + 12 * MiB + 12 * MiB + 3 * MiB);
    shs__callocator_free(a, p);
    shs__callocator_free(a, q);
    shs__callocator_free(a, r);
    shs__callocator_free(a, t);
    assert_int_equal(stats_of(a).allocated, 0);
    /* the 20 MiB segment merged whole: a 20 MiB request fits it */
    shs__callocator_alloc(a, 20 * MiB);
    assert_int_equal(stats_of(a).reserved, 32 * MiB);
    shs__callocator_destroy(a);
}

/* Fragmentation: a freed block too small for the next request stays
 * reserved beside the new segment. */
static void test_fragmentation_reserves_more_than_allocated(void **state) {
    (void)state;
    shs__callocator_t *a = shs__callocator_create(SIZE_MAX);
    long x = shs__callocator_alloc(a, 10 * MiB);
    long y = shs__callocator_alloc(a, 10 * MiB);
    shs__callocator_free(a, x);
    long z = shs__callocator_alloc(a, 12 * MiB);
    shs__callocator_stats_t s = stats_of(a);
    assert_int_equal(s.allocated, 22 * MiB);
    assert_int_equal(s.reserved, 32 * MiB);
    long w = shs__callocator_alloc(a, 8 * MiB); /* best fit: the cached 10 MiB block, its 2 MiB rest split off */
    s = stats_of(a);
    assert_int_equal(s.reserved, 32 * MiB);
    assert_int_equal(s.allocated, 30 * MiB);
    (void)y, (void)z, (void)w;
    shs__callocator_destroy(a);
}

/* Past the limit, cached unsplit segments are released first (one retry). */
static void test_limit_releases_cached_segments(void **state) {
    (void)state;
    shs__callocator_t *a = shs__callocator_create(30 * MiB);
    long x = shs__callocator_alloc(a, 10 * MiB), y = shs__callocator_alloc(a, 10 * MiB);
    shs__callocator_free(a, x);
    shs__callocator_free(a, y);
    long z = shs__callocator_alloc(a, 16 * MiB); /* 20 + 16 > 30: both free 10 MiB segments go */
    shs__callocator_stats_t s = stats_of(a);
    assert_int_equal(s.reserved, 16 * MiB);
    assert_int_equal(s.reserved_peak, 20 * MiB);
    assert_int_equal(s.retries, 1);
    assert_int_equal(s.segments, 1);
    long w = shs__callocator_alloc(a, 16 * MiB); /* nothing to release: reserved passes the limit */
    s = stats_of(a);
    assert_int_equal(s.reserved, 32 * MiB);
    assert_int_equal(s.retries, 2);
    (void)z, (void)w;
    shs__callocator_destroy(a);
}

/* The device's two ledgers: shs_device_alloc counts in both, the modeled
 * allocation its own size in each; the emulation's surplus; both backends. */
static void test_two_ledgers(void **state) {
    (void)state;
    for (int meta = 0; meta < 2; meta++) {
        shs_device_t *d;
        assert_int_equal(meta ? shs_device_create_meta(&d, 1, SIZE_MAX) : shs_device_create_cpu(&d, 1, SIZE_MAX, 1),
                         SHS_OK);
        void *plain, *view, *phantom, *bigger;
        assert_int_equal(shs_device_alloc(d, &plain, 4 * MiB, SHS_MEM_PARAMS, "plain"), SHS_OK);
        /* an f32 view of a 16-bit tensor: the GPU holds none of it */
        assert_int_equal(shs_device_alloc_modeled(d, &view, 8 * MiB, 0, SHS_MEM_COMM, "view"), SHS_OK);
        /* a buffer only the GPU holds */
        assert_int_equal(shs_device_alloc_modeled(d, &phantom, 0, 3 * MiB, SHS_MEM_ACTIVATIONS, "phantom"), SHS_OK);
        /* kept in f32 here, 2 bytes per element there */
        assert_int_equal(shs_device_alloc_modeled(d, &bigger, 12 * MiB, 6 * MiB, SHS_MEM_COMM, "gathered"), SHS_OK);
        shs_mem_stats_t m;
        shs_gpu_mem_stats_t g;
        shs_device_mem_stats(d, &m);
        shs_device_gpu_mem_stats(d, &g);
        assert_int_equal(m.total_current, 24 * MiB);
        assert_int_equal(m.current[SHS_MEM_COMM], 20 * MiB);
        assert_int_equal(m.current[SHS_MEM_ACTIVATIONS], 0);
        assert_int_equal(m.num_allocs, 3); /* the GPU-only buffer is not this process's */
        assert_int_equal(g.alloc.total_current, 13 * MiB);
        assert_int_equal(g.alloc.current[SHS_MEM_PARAMS], 4 * MiB);
        assert_int_equal(g.alloc.current[SHS_MEM_COMM], 6 * MiB);
        assert_int_equal(g.alloc.current[SHS_MEM_ACTIVATIONS], 3 * MiB);
        assert_int_equal(g.alloc.num_allocs, 3);
        assert_int_equal(g.emulation_current, 8 * MiB + 6 * MiB);
        /* 4 MiB and 3 MiB: one 20 MiB segment (13 MiB left, then 10); 6 MiB: the same segment's rest */
        assert_int_equal(g.reserved, 20 * MiB);
        shs_device_free(d, view);
        shs_device_free(d, bigger);
        shs_device_gpu_mem_stats(d, &g);
        assert_int_equal(g.alloc.total_current, 7 * MiB);
        assert_int_equal(g.alloc.total_peak, 13 * MiB);
        assert_int_equal(g.emulation_current, 0);
        assert_int_equal(g.emulation_peak, 14 * MiB);
        assert_int_equal(shs_device_gpu_window_peak(d), 13 * MiB);
        assert_int_equal(shs_device_gpu_window_peak(d), 7 * MiB);
        shs_device_reset_peak(d);
        shs_device_gpu_mem_stats(d, &g);
        assert_int_equal(g.alloc.total_peak, 7 * MiB);
        assert_int_equal(g.emulation_peak, 0);
        assert_int_equal(g.reserved_peak, 20 * MiB); /* reserved stays: the segment is cached */
        shs_device_free(d, phantom);
        shs_device_free(d, plain);
        shs_device_destroy(d);
    }
}

/* The process ledger's capacity check applies to the process's bytes. */
static void test_capacity_checks_process_bytes(void **state) {
    (void)state;
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 0, 1000, 1), SHS_OK);
    void *p;
    assert_int_equal(shs_device_alloc_modeled(d, &p, 0, 1 << 30, SHS_MEM_OTHER, "gpu only"), SHS_OK);
    void *q;
    assert_int_equal(shs_device_alloc_modeled(d, &q, 1001, 0, SHS_MEM_OTHER, "too big"), SHS_OUT_OF_MEMORY);
    assert_int_equal(shs_device_alloc_modeled(d, &q, 10, 10, (shs_mem_category_t)99, "bad"), SHS_INVALID_ARG);
    shs_device_destroy(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_requests_share_a_2mib_segment),
        cmocka_unit_test(test_large_requests_segments_and_split),
        cmocka_unit_test(test_fragmentation_reserves_more_than_allocated),
        cmocka_unit_test(test_limit_releases_cached_segments),
        cmocka_unit_test(test_two_ledgers),
        cmocka_unit_test(test_capacity_checks_process_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
