/* test_log.c - the levelled log: SHS_DEBUG / SHS_DEBUG_SUBSYS read once,
 * the level and subsystem filter (NCCL_DEBUG's semantics: a level includes
 * the ones before it; WARN ignores the subsystem list), and a line's format. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/log.h"

/* Runs first: the first use reads the environment, later changes are not read. */
static void test_environment_read_once(void **state) {
    (void)state;
    setenv("SHS_DEBUG", "INFO", 1);
    setenv("SHS_DEBUG_SUBSYS", "trace,checkpoint", 1);
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(TRACE)), 1);
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(CHECKPOINT)), 1);
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(COMM)), 0);
    assert_int_equal(shs_log_enabled(SHS_LOG_TRACE, SHS_LOGSYS(TRACE)), 0);
    assert_int_equal(shs_log_enabled(SHS_LOG_WARN, SHS_LOGSYS(COMM)), 1); /* WARN: every subsystem */
    setenv("SHS_DEBUG", "TRACE", 1);
    assert_int_equal(shs_log_enabled(SHS_LOG_TRACE, SHS_LOGSYS(TRACE)), 0);
}

static void test_levels_and_subsystems(void **state) {
    (void)state;
    assert_int_equal(shs_log_configure("TRACE", "comm,strategy"), SHS_OK);
    for (int l = SHS_LOG_WARN; l <= SHS_LOG_TRACE; l++) {
        assert_int_equal(shs_log_enabled((shs_log_level_t)l, SHS_LOGSYS(COMM)), 1);
        assert_int_equal(shs_log_enabled((shs_log_level_t)l, SHS_LOGSYS(STRATEGY)), 1);
        assert_int_equal(shs_log_enabled((shs_log_level_t)l, SHS_LOGSYS(DEVICE)), l == SHS_LOG_WARN);
    }
    assert_int_equal(shs_log_configure("WARN", NULL), SHS_OK);
    assert_int_equal(shs_log_enabled(SHS_LOG_WARN, SHS_LOGSYS(TRAIN)), 1);
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(TRAIN)), 0);
    assert_int_equal(shs_log_configure("INFO", "^comm"), SHS_OK); /* all but comm */
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(COMM)), 0);
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(TRAIN)), 1);
    assert_int_equal(shs_log_configure("INFO", "ALL"), SHS_OK);
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(COMM)), 1);
    assert_int_equal(shs_log_configure(NULL, NULL), SHS_OK); /* unset: off */
    assert_int_equal(shs_log_enabled(SHS_LOG_WARN, SHS_LOGSYS(COMM)), 0);
    assert_int_equal(shs_log_enabled(SHS_LOG_NONE, SHS_LOGSYS(COMM)), 0);
}

static void test_bad_values_named_and_filter_kept(void **state) {
    (void)state;
    assert_int_equal(shs_log_configure("INFO", "comm"), SHS_OK);
    assert_int_equal(shs_log_configure("LOUD", NULL), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "SHS_DEBUG=LOUD: unknown level"));
    assert_int_equal(shs_log_configure("info", NULL), SHS_INVALID_ARG); /* NCCL's names are upper case */
    assert_int_equal(shs_log_configure("TRACE", "comm,bogus"), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "SHS_DEBUG_SUBSYS=comm,bogus: unknown subsystem 'bogus'"));
    assert_int_equal(shs_log_enabled(SHS_LOG_INFO, SHS_LOGSYS(COMM)), 1); /* unchanged */
    assert_int_equal(shs_log_enabled(SHS_LOG_TRACE, SHS_LOGSYS(COMM)), 0);
}

static int evaluated;
static int side_effect(void) { return ++evaluated; }

static void test_trace_line_format(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    shs_log_set_stream(f);
    assert_int_equal(shs_log_configure("TRACE", "comm"), SHS_OK);
    shs_log_set_rank(3);
    SHS_LOG(TRACE, COMM, "all_reduce seq %d", 7); int line = __LINE__;
    SHS_LOG(TRACE, STRATEGY, "not printed %d", side_effect()); /* filtered: arguments not evaluated */
    shs_log_set_rank(-1);
    SHS_LOG(INFO, COMM, "no rank");
    shs_log_set_stream(NULL);
    assert_int_equal(evaluated, 0);
    char got[512] = {0}, want[512];
    rewind(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    snprintf(want, sizeof want,
             "[rank 3] shardsim TRACE comm tests/core/test_log.c:%d: all_reduce seq 7\n"
             "[rank -] shardsim INFO comm tests/core/test_log.c:%d: no rank\n", line, line + 3);
    assert_int_equal(n, strlen(want));
    assert_string_equal(got, want);
    shs_log_configure(NULL, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_environment_read_once),
        cmocka_unit_test(test_levels_and_subsystems),
        cmocka_unit_test(test_bad_values_named_and_filter_kept),
        cmocka_unit_test(test_trace_line_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
