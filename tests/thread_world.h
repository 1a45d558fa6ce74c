/* thread_world.h - test helper: run one function on N threads, each a rank
 * with its own handle on a fresh communicator (gloo's test pattern).
 *
 * cmocka's assert macros must not run off the main thread, so rank code
 * checks with TW_EXPECT(), which records the first failure of that rank,
 * aborts the communicator (the other ranks return instead of waiting) and
 * returns SHS_INTERNAL; tw_assert_all() then asserts on the main thread. */
#ifndef SHARDSIM_TEST_THREAD_WORLD_H
#define SHARDSIM_TEST_THREAD_WORLD_H

#include "shardsim/comm.h"

typedef struct tw_rank {
    int rank, nranks;
    shs_comm_t *comm;
    void *arg;
    shs_status_t status;     /* what the function returned */
    char error[1024];        /* the rank's shs_last_error() after it */
    char failure[512];       /* first failed TW_EXPECT, "" if none */
    double seconds;          /* wall time of the function */
} tw_rank_t;

typedef shs_status_t (*tw_fn)(tw_rank_t *r);

/* Create a communicator "world" of n ranks with timeout_ms, run fn(r) on n
 * threads, join, destroy the handles. Returns the ranks (free with free()). */
tw_rank_t *tw_run(int n, int timeout_ms, tw_fn fn, void *arg);
/* Asserts that every rank returned `expect` and no TW_EXPECT failed; prints
 * every rank's failure and error text otherwise. */
void tw_assert_all(const tw_rank_t *ranks, int n, shs_status_t expect);
/* tw_run + tw_assert_all(SHS_OK) + free. */
void tw_run_ok(int n, int timeout_ms, tw_fn fn, void *arg);
/* tw_run_ok with the calling thread (and so the communicator's view of the
 * machine, and every rank thread) pinned to one CPU, then unpinned: every
 * n >= 2 is then oversubscribed, whatever the machine, so the thread
 * backend's ranks-outnumber-cores paths run. Skips the pinning (plain
 * tw_run_ok) where affinity cannot be set. */
void tw_run_ok_one_cpu(int n, int timeout_ms, tw_fn fn, void *arg);

void tw_fail(tw_rank_t *r, const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The message (printf format and arguments) is required. */
#define TW_EXPECT(r, cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            tw_fail((r), __FILE__, __LINE__, #cond, __VA_ARGS__);                                  \
            return SHS_INTERNAL;                                                                   \
        }                                                                                          \
    } while (0)
/* Expect a call to return `want`; the rank's last-error text is printed if not. */
#define TW_EXPECT_STATUS(r, call, want)                                                            \
    do {                                                                                           \
        shs_status_t tw__s = (call);                                                               \
        TW_EXPECT(r, tw__s == (want), "%s returned %s: %s", #call, shs_status_name(tw__s),         \
                  shs_last_error());                                                               \
    } while (0)

#endif
