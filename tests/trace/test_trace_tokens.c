/* test_trace_tokens.c - the readers' shared lexing (trace_util.h): blank-
 * separated tokens across the tokenizer's 64-byte blocks, and strict
 * number parsing at the digit counts where overflow becomes possible.
 * Expected tokens and values are written out by hand. White-box (-Isrc).
 * Not any format (test_trace_import*.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "trace/trace_util.h"

static void expect_tokens(const char *line, size_t len, int max, int want_n, const char *const *want) {
    shs__tok_t tk[48];
    int n = shs__tokens(line, len, tk, max);
    assert_int_equal(n, want_n);
    for (int i = 0; i < (n > max ? max : n); i++) {
        assert_int_equal(tk[i].n, strlen(want[i]));
        assert_memory_equal(tk[i].s, want[i], tk[i].n);
    }
}

static void test_tokens(void **state) {
    (void)state;
    /* space, tab and CR separate; runs of them count once; \x01 and \v do not */
    const char *a[] = {"NCCL", "INFO", "a\x01" "b", "c\vd"};
    expect_tokens("  NCCL\tINFO \r a\x01" "b\t\tc\vd\r", 22, 8, 4, a);
    /* a 70-byte token from byte 60 runs over the 64-byte block; one ends at byte 64 exactly */
    char line[200];
    memset(line, ' ', sizeof line);
    memset(line + 60, 'x', 70);
    memset(line + 140, 'y', 4);  /* 140..143 */
    memset(line + 188, 'z', 12); /* to the end of the line */
    char x70[71], y4[] = "yyyy", z12[13];
    memset(x70, 'x', 70), x70[70] = 0;
    memset(z12, 'z', 12), z12[12] = 0;
    const char *b[] = {x70, y4, z12};
    expect_tokens(line, sizeof line, 8, 3, b);
    /* a token ending at byte 64, the next at 65 */
    memset(line, 'p', 64);
    line[64] = ' ';
    memset(line + 65, 'q', 3);
    char p64[65];
    memset(p64, 'p', 64), p64[64] = 0;
    const char *c[] = {p64, "qqq"};
    expect_tokens(line, 68, 8, 2, c);
    /* more than max: max + 1, the first max kept */
    const char *d[] = {"a", "b"};
    expect_tokens("a b c d", 7, 2, 3, d);
    expect_tokens("", 0, 2, 0, NULL);
    expect_tokens(" \t\r ", 4, 2, 0, NULL);
}

static void test_parse_u64(void **state) {
    (void)state;
    uint64_t v = 0;
    assert_int_equal(shs__parse_u64("0xFfA", 5, 1, &v), 0);
    assert_int_equal(v, 4090);
    assert_int_equal(shs__parse_u64("ffffffffffffffff", 16, 2, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(shs__parse_u64("10000000000000000", 17, 2, &v), -1); /* 2^64 */
    assert_int_equal(shs__parse_u64("000000000000000001f", 19, 2, &v), 0);  /* leading zeros do not overflow */
    assert_int_equal(v, 31);
    assert_int_equal(shs__parse_u64("9999999999999999999", 19, 0, &v), 0);
    assert_true(v == 9999999999999999999ull);
    assert_int_equal(shs__parse_u64("18446744073709551615", 20, 0, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(shs__parse_u64("18446744073709551616", 20, 0, &v), -1);
    assert_int_equal(shs__parse_u64("1g", 2, 2, &v), -1);
    assert_int_equal(shs__parse_u64("12a", 3, 0, &v), -1);
    assert_int_equal(shs__parse_u64("0x", 2, 1, &v), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tokens), cmocka_unit_test(test_parse_u64)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
