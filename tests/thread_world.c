/* thread_world.c - see thread_world.h. */
#include "thread_world.h"

#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "shardsim/clock.h"

typedef struct {
    tw_rank_t *r;
    tw_fn fn;
} tw_job_t;

static void *tw_main(void *p) {
    tw_job_t *job = p;
    tw_rank_t *r = job->r;
    shs_set_last_error_text("");
    double t0 = shs_now_seconds();
    r->status = job->fn(r);
    r->seconds = shs_now_seconds() - t0;
    snprintf(r->error, sizeof r->error, "%s", shs_last_error());
    return NULL;
}

void tw_fail(tw_rank_t *r, const char *file, int line, const char *cond, const char *fmt, ...) {
    if (r->failure[0]) return;
    int n = snprintf(r->failure, sizeof r->failure, "%s:%d: rank %d: expected %s: ", file, line, r->rank, cond);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof r->failure) vsnprintf(r->failure + n, sizeof r->failure - (size_t)n, fmt, ap);
    va_end(ap);
    shs_comm_abort(r->comm, r->failure);
}

tw_rank_t *tw_run(int n, int timeout_ms, tw_fn fn, void *arg) {
    tw_rank_t *ranks = calloc((size_t)n, sizeof *ranks);
    tw_job_t *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    shs_comm_id_t *id = NULL;
    assert_non_null(ranks);
    assert_non_null(jobs);
    assert_non_null(threads);
    assert_int_equal(shs_comm_id_create(&id, n, timeout_ms, "world"), SHS_OK);
    for (int r = 0; r < n; r++) {
        ranks[r] = (tw_rank_t){.rank = r, .nranks = n, .arg = arg};
        assert_int_equal(shs_comm_init_rank(&ranks[r].comm, id, r), SHS_OK);
        jobs[r] = (tw_job_t){&ranks[r], fn};
    }
    shs_comm_id_release(id);
    for (int r = 0; r < n; r++) assert_int_equal(pthread_create(&threads[r], NULL, tw_main, &jobs[r]), 0);
    for (int r = 0; r < n; r++) pthread_join(threads[r], NULL);
    for (int r = 0; r < n; r++) {
        shs_comm_destroy(ranks[r].comm);
        ranks[r].comm = NULL;
    }
    free(jobs);
    free(threads);
    return ranks;
}

void tw_assert_all(const tw_rank_t *ranks, int n, shs_status_t expect) {
    int bad = 0;
    for (int r = 0; r < n; r++) {
        if (ranks[r].status == expect && !ranks[r].failure[0]) continue;
        bad = 1;
        print_error("rank %d of %d returned %s (want %s)\n  failure: %s\n  last error: %s\n", r, n,
                    shs_status_name(ranks[r].status), shs_status_name(expect), ranks[r].failure, ranks[r].error);
    }
    assert_false(bad);
}

void tw_run_ok(int n, int timeout_ms, tw_fn fn, void *arg) {
    tw_rank_t *ranks = tw_run(n, timeout_ms, fn, arg);
    tw_assert_all(ranks, n, SHS_OK);
    free(ranks);
}

void tw_run_ok_one_cpu(int n, int timeout_ms, tw_fn fn, void *arg) {
#ifdef __linux__
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) == 0) {
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &all)) {
                CPU_SET(c, &one);
                break;
            }
        if (sched_setaffinity(0, sizeof one, &one) == 0) {
            tw_rank_t *ranks = tw_run(n, timeout_ms, fn, arg);
            sched_setaffinity(0, sizeof all, &all);
            tw_assert_all(ranks, n, SHS_OK);
            free(ranks);
            return;
        }
    }
#endif
    tw_run_ok(n, timeout_ms, fn, arg);
}
