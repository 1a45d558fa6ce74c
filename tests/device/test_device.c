/* test_device.c - device memory accounting: current and peak bytes per
 * category, the capacity limit and its out-of-memory text, copies; the token
 * grouping every backend's encoder backward uses. */
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "device/device_impl.h" /* private: shs__encoder_groups */
#include "shardsim/device.h"

static void test_categories_current_and_peak(void **state) {
    (void)state;
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 3, SIZE_MAX, 1), SHS_OK);
    void *p[SHS_MEM_NUM_CATEGORIES], *extra;
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++)
        assert_int_equal(shs_device_alloc(d, &p[c], 1000 * (size_t)(c + 1), (shs_mem_category_t)c, "t"), SHS_OK);
    assert_int_equal(shs_device_alloc(d, &extra, 500, SHS_MEM_COMM, "extra"), SHS_OK);
    shs_mem_stats_t s;
    shs_device_mem_stats(d, &s);
    size_t total = 0;
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) {
        size_t want = 1000 * (size_t)(c + 1) + (c == SHS_MEM_COMM ? 500 : 0);
        assert_int_equal(s.current[c], want);
        assert_int_equal(s.peak[c], want);
        total += want;
    }
    assert_int_equal(s.total_current, total);
    assert_int_equal(s.num_allocs, SHS_MEM_NUM_CATEGORIES + 1);
    shs_device_free(d, extra);
    shs_device_free(d, p[SHS_MEM_GRADS]);
    shs_device_mem_stats(d, &s);
    assert_int_equal(s.current[SHS_MEM_COMM], 1000 * (SHS_MEM_COMM + 1));
    assert_int_equal(s.peak[SHS_MEM_COMM], 1000 * (SHS_MEM_COMM + 1) + 500);
    assert_int_equal(s.current[SHS_MEM_GRADS], 0);
    assert_int_equal(s.peak[SHS_MEM_GRADS], 2000);
    assert_int_equal(s.total_peak, total);
    shs_device_reset_peak(d);
    shs_device_mem_stats(d, &s);
    assert_int_equal(s.peak[SHS_MEM_GRADS], 0);
    assert_int_equal(s.total_peak, total - 2500);
    shs_device_destroy(d); /* frees the live allocations (ASan would report a leak) */
}

static void test_many_allocations_table_growth(void **state) {
    (void)state;
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 0, SIZE_MAX, 1), SHS_OK);
    enum { N = 3000 };
    static void *p[N];
    for (int i = 0; i < N; i++) assert_int_equal(shs_device_alloc(d, &p[i], (size_t)i % 17, SHS_MEM_OTHER, NULL), SHS_OK);
    for (int i = 0; i < N; i += 2) shs_device_free(d, p[i]);
    for (int i = 0; i < N; i += 2) assert_int_equal(shs_device_alloc(d, &p[i], 8, SHS_MEM_OTHER, NULL), SHS_OK);
    shs_mem_stats_t s;
    shs_device_mem_stats(d, &s);
    size_t want = 0;
    for (int i = 0; i < N; i++) want += (i % 2 == 0) ? 8 : (size_t)i % 17;
    assert_int_equal(s.current[SHS_MEM_OTHER], want);
    assert_int_equal(s.num_allocs, N);
    for (int i = 0; i < N; i++) shs_device_free(d, p[i]);
    shs_device_mem_stats(d, &s);
    assert_int_equal(s.total_current, 0);
    shs_device_destroy(d);
}

static void test_out_of_memory_names_rank_request_usage(void **state) {
    (void)state;
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 5, 1 << 20, 1), SHS_OK);
    void *a, *b;
    assert_int_equal(shs_device_alloc(d, &a, 768 << 10, SHS_MEM_PARAMS, "weights"), SHS_OK);
    assert_int_equal(shs_device_alloc(d, &b, 512 << 10, SHS_MEM_ACTIVATIONS, "acts"), SHS_OUT_OF_MEMORY);
    assert_null(b);
    const char *e = shs_last_error();
    assert_non_null(strstr(e, "rank 5"));
    assert_non_null(strstr(e, "requested 512.00 KiB (activations, acts)"));
    assert_non_null(strstr(e, "768.00 KiB of 1.00 MiB in use"));
    assert_non_null(strstr(e, "params 768.00 KiB"));
    /* exactly filling the capacity is allowed; the failed request left no trace */
    assert_int_equal(shs_device_alloc(d, &b, 256 << 10, SHS_MEM_ACTIVATIONS, NULL), SHS_OK);
    shs_mem_stats_t s;
    shs_device_mem_stats(d, &s);
    assert_int_equal(s.total_current, 1 << 20);
    assert_int_equal(s.peak[SHS_MEM_ACTIVATIONS], 256 << 10);
    /* a request beyond SIZE_MAX - used must not wrap around */
    void *c;
    assert_int_equal(shs_device_alloc(d, &c, SIZE_MAX, SHS_MEM_OTHER, NULL), SHS_OUT_OF_MEMORY);
    shs_device_destroy(d);
}

static void test_copies_and_memset(void **state) {
    (void)state;
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 0, SIZE_MAX, 1), SHS_OK);
    uint8_t host[64], back[64], want[64];
    for (int i = 0; i < 64; i++) host[i] = (uint8_t)(i * 7 + 1);
    uint8_t *x, *y;
    assert_int_equal(shs_device_alloc(d, (void **)&x, 64, SHS_MEM_OTHER, NULL), SHS_OK);
    assert_int_equal(shs_device_alloc(d, (void **)&y, 64, SHS_MEM_OTHER, NULL), SHS_OK);
    assert_int_equal(shs_memcpy_h2d(d, x, host, 64), SHS_OK);
    assert_int_equal(shs_memset(d, y, 0xab, 64), SHS_OK);
    assert_int_equal(shs_memcpy_d2d(d, y + 8, x, 16), SHS_OK);
    assert_int_equal(shs_memcpy_d2d(d, x + 4, x, 32), SHS_OK); /* overlapping: memmove semantics */
    assert_int_equal(shs_memcpy_d2h(d, back, y, 64), SHS_OK);
    memset(want, 0xab, 64);
    memcpy(want + 8, host, 16);
    assert_memory_equal(back, want, 64);
    assert_int_equal(shs_memcpy_d2h(d, back, x, 64), SHS_OK);
    memcpy(want, host, 64);
    memmove(want + 4, host, 32);
    assert_memory_equal(back, want, 64);
    shs_device_destroy(d);
}

/* Wrappers validate, then dispatch: a copy or memset one element past an
 * allocation's end is refused, naming the op, the argument, the allocation
 * and the overflow (10 floats = 40 bytes; [4, 44) overflows by 4 bytes). */
static void expect_overflow(shs_status_t st, const char *op_arg) {
    assert_int_equal(st, SHS_INVALID_ARG);
    char want[160];
    snprintf(want, sizeof want, "rank 2: %s [4, 44) overflows its allocation (activations, 40 bytes at ", op_arg);
    if (!strstr(shs_last_error(), want) || !strstr(shs_last_error(), ") by 4 bytes"))
        fail_msg("want '%s... by 4 bytes' in: %s", want, shs_last_error());
}

static void check_bounds_on(shs_device_t *d) {
    float *a, *b, host[11] = {0};
    assert_int_equal(shs_device_alloc(d, (void **)&a, 10 * sizeof(float), SHS_MEM_ACTIVATIONS, "a"), SHS_OK);
    assert_int_equal(shs_device_alloc(d, (void **)&b, 64 * sizeof(float), SHS_MEM_ACTIVATIONS, "b"), SHS_OK);
    /* the last in-bounds element is fine */
    assert_int_equal(shs_memcpy_h2d(d, a + 1, host, 9 * sizeof(float)), SHS_OK);
    expect_overflow(shs_memcpy_h2d(d, a + 1, host, 10 * sizeof(float)), "memcpy_h2d: dst");
    expect_overflow(shs_memcpy_d2h(d, host, a + 1, 10 * sizeof(float)), "memcpy_d2h: src");
    expect_overflow(shs_memcpy_d2d(d, b, a + 1, 10 * sizeof(float)), "memcpy_d2d: src");
    expect_overflow(shs_memcpy_d2d(d, a + 1, b, 10 * sizeof(float)), "memcpy_d2d: dst");
    expect_overflow(shs_memset(d, a + 1, 0, 10 * sizeof(float)), "memset: dst");
    /* a device pointer this device never allocated */
    assert_int_equal(shs_memset(d, host, 0, sizeof host), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "memset: dst"));
    assert_non_null(strstr(shs_last_error(), "is in no allocation of this device"));
    shs_device_free(d, a);
    shs_device_free(d, b);
}

static void test_copy_past_allocation_end_is_refused(void **state) {
    (void)state;
    shs_device_t *d;
    assert_int_equal(shs_device_create_cpu(&d, 2, SIZE_MAX, 1), SHS_OK);
    check_bounds_on(d);
    shs_device_destroy(d);
    assert_int_equal(shs_device_create_meta(&d, 2, SIZE_MAX), SHS_OK);
    check_bounds_on(d);
    shs_device_destroy(d);
}

/* Tokens {5, 2, 5, 0, 2, 5} sorted by (token, position): (0,3) (2,1) (2,4)
 * (5,0) (5,2) (5,5), so three groups, written by hand from that order. The
 * CUDA backend passes the tokens in the groups buffer itself: same result. */
static void test_encoder_groups(void **state) {
    (void)state;
    const int32_t tokens[6] = {5, 2, 5, 0, 2, 5};
    const int32_t want[] = {3, 1, 4, 0, 2, 5, /* pos */ 0, 1, 3, 6, /* group_start */ 0, 2, 5 /* group_tok */};
    int32_t groups[3 * 6 + 1];
    memset(groups, 0x7f, sizeof groups);
    assert_int_equal(shs__encoder_groups(tokens, 6, groups), 3);
    assert_memory_equal(groups, want, sizeof want);
    memset(groups, 0x7f, sizeof groups);
    memcpy(groups, tokens, sizeof tokens);
    assert_int_equal(shs__encoder_groups(groups, 6, groups), 3);
    assert_memory_equal(groups, want, sizeof want);
    int32_t none[1] = {-1};
    assert_int_equal(shs__encoder_groups(tokens, 0, none), 0);
    assert_int_equal(none[0], 0); /* group_start[0] = BT */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_categories_current_and_peak),
        cmocka_unit_test(test_many_allocations_table_growth),
        cmocka_unit_test(test_out_of_memory_names_rank_request_usage),
        cmocka_unit_test(test_copies_and_memset),
        cmocka_unit_test(test_copy_past_allocation_end_is_refused),
        cmocka_unit_test(test_encoder_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
