/* test_comm_collectives.c - collectives of the thread communicator against
 * closed-form expected values (gloo's manner: x_r[i] depends on rank r and
 * index i, the expected result is a formula in i and N), over N in
 * {1,2,3,4,5,8}, every dtype and op, counts divisible and not by N (and 0),
 * in place and out of place: all_reduce, reduce_scatter, all_gather,
 * broadcast, reduce. Not the reduction order (test_comm_order.c) nor the
 * error paths (test_comm_errors.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/comm.h"
#include "thread_world.h"

#include "comm_values.h"

/* ---- all_reduce --------------------------------------------------------- */

static const size_t reduce_counts[] = {0, 1, 7, 120, 121, 3001, 70001};

static shs_status_t rank_all_reduce(tw_rank_t *r) {
    int n = r->nranks;
    for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
        size_t es = shs_dtype_size((shs_dtype_t)t);
        for (int op = 0; op < SHS_NUM_REDOPS; op++) {
            for (size_t c = 0; c < sizeof reduce_counts / sizeof reduce_counts[0]; c++) {
                size_t count = reduce_counts[c];
                if (count > 10000 && op != SHS_SUM && t != SHS_F32) continue; /* keep the run short */
                for (int ip = 0; ip < 2; ip++) {
                    char *send = xmalloc(count * es), *recv = ip ? send : xmalloc(count * es);
                    for (size_t i = 0; i < count; i++) put(send, t, i, red_input(op, t, r->rank, i, n));
                    TW_EXPECT_STATUS(r, shs_all_reduce(send, recv, count, t, op, r->comm), SHS_OK);
                    for (size_t i = 0; i < count; i++) {
                        double got = get(recv, t, i), want = red_expect(op, t, i, n);
                        TW_EXPECT(r, got == want, CASE_FMT " i=%zu: got %g want %g", CASE_ARGS(t, op, n, count, ip), i,
                                  got, want);
                        if (!ip) {
                            double in = get(send, t, i), x = red_input(op, t, r->rank, i, n);
                            TW_EXPECT(r, in == x, CASE_FMT ": sendbuf changed at %zu", CASE_ARGS(t, op, n, count, ip), i);
                        }
                    }
                    if (!ip) free(recv);
                    free(send);
                }
            }
        }
    }
    return SHS_OK;
}

static void test_all_reduce(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_all_reduce, NULL);
}

/* On one CPU every world is oversubscribed: small all_reduces take the
 * shared one-shot reduction (one rank reduces, all copy) on any machine. */
static void test_all_reduce_oversubscribed(void **state) {
    (void)state;
    static const int worlds[] = {2, 3, 5};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        tw_run_ok_one_cpu(worlds[w], DATA_TIMEOUT_MS, rank_all_reduce, NULL);
}

/* ---- reduce_scatter ----------------------------------------------------- */

static const size_t block_counts[] = {0, 1, 7, 1000, 3001};

/* Rank r's sendbuf holds N blocks; element g = j*recvcount + i is x_r[g]. */
static shs_status_t rank_reduce_scatter(tw_rank_t *r) {
    int n = r->nranks;
    for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
        size_t es = shs_dtype_size((shs_dtype_t)t);
        for (int op = 0; op < SHS_NUM_REDOPS; op++) {
            for (size_t c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++) {
                size_t count = block_counts[c], total = count * (size_t)n;
                for (int ip = 0; ip < 2; ip++) {
                    char *send = xmalloc(total * es);
                    char *recv = ip ? send + (size_t)r->rank * count * es : xmalloc(count * es);
                    for (size_t g = 0; g < total; g++) put(send, t, g, red_input(op, t, r->rank, g, n));
                    TW_EXPECT_STATUS(r, shs_reduce_scatter(send, recv, count, t, op, r->comm), SHS_OK);
                    for (size_t i = 0; i < count; i++) {
                        size_t g = (size_t)r->rank * count + i;
                        double got = get(recv, t, i), want = red_expect(op, t, g, n);
                        TW_EXPECT(r, got == want, CASE_FMT " i=%zu: got %g want %g", CASE_ARGS(t, op, n, count, ip), i,
                                  got, want);
                    }
                    if (!ip) free(recv);
                    free(send);
                }
            }
        }
    }
    return SHS_OK;
}

static void test_reduce_scatter(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_reduce_scatter, NULL);
}

/* ---- all_gather --------------------------------------------------------- */

static shs_status_t rank_all_gather(tw_rank_t *r) {
    int n = r->nranks;
    for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
        size_t es = shs_dtype_size((shs_dtype_t)t);
        for (size_t c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++) {
            size_t count = block_counts[c], total = count * (size_t)n;
            for (int ip = 0; ip < 2; ip++) {
                char *recv = xmalloc(total * es);
                char *send = ip ? recv + (size_t)r->rank * count * es : xmalloc(count * es);
                for (size_t g = 0; g < total; g++) put(recv, t, g, 99);
                for (size_t i = 0; i < count; i++) put(send, t, i, move_input(t, r->rank, i));
                TW_EXPECT_STATUS(r, shs_all_gather(send, recv, count, t, r->comm), SHS_OK);
                for (size_t g = 0; g < total; g++) {
                    double got = get(recv, t, g), want = move_input(t, (int)(g / count), g % count);
                    TW_EXPECT(r, got == want, CASE_FMT " g=%zu: got %g want %g", CASE_ARGS(t, SHS_SUM, n, count, ip),
                              g, got, want);
                }
                if (!ip) free(send);
                free(recv);
            }
        }
    }
    return SHS_OK;
}

static void test_all_gather(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_all_gather, NULL);
}

/* ---- broadcast ---------------------------------------------------------- */

static const size_t root_counts[] = {0, 1, 7, 120, 121, 3001};

static shs_status_t rank_broadcast(tw_rank_t *r) {
    int n = r->nranks;
    for (int root = 0; root < n; root++) {
        for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
            size_t es = shs_dtype_size((shs_dtype_t)t);
            for (size_t c = 0; c < sizeof root_counts / sizeof root_counts[0]; c++) {
                size_t count = root_counts[c];
                for (int ip = 0; ip < 2; ip++) {
                    char *recv = xmalloc(count * es), *send = ip ? recv : xmalloc(count * es);
                    for (size_t i = 0; i < count; i++) {
                        put(recv, t, i, 99);
                        put(send, t, i, move_input(t, r->rank, i));
                    }
                    /* sendbuf is read on the root only: others pass NULL in one variant */
                    const void *sb = (!ip && r->rank != root && c % 2) ? NULL : send;
                    TW_EXPECT_STATUS(r, shs_broadcast(sb, recv, count, t, root, r->comm), SHS_OK);
                    for (size_t i = 0; i < count; i++) {
                        double got = get(recv, t, i), want = move_input(t, root, i);
                        TW_EXPECT(r, got == want, CASE_FMT " root=%d i=%zu: got %g want %g",
                                  CASE_ARGS(t, SHS_SUM, n, count, ip), root, i, got, want);
                    }
                    if (!ip) free(send);
                    free(recv);
                }
            }
        }
    }
    return SHS_OK;
}

static void test_broadcast(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_broadcast, NULL);
}

/* ---- reduce ------------------------------------------------------------- */

static shs_status_t rank_reduce(tw_rank_t *r) {
    int n = r->nranks;
    for (int root = 0; root < n; root++) {
        for (int t = SHS_DTYPE_DEFAULT + 1; t < SHS_NUM_DTYPES; t++) {
            size_t es = shs_dtype_size((shs_dtype_t)t);
            for (int op = 0; op < SHS_NUM_REDOPS; op++) {
                for (size_t c = 0; c < sizeof root_counts / sizeof root_counts[0]; c++) {
                    size_t count = root_counts[c];
                    for (int ip = 0; ip < 2; ip++) {
                        char *send = xmalloc(count * es), *recv = ip ? send : xmalloc(count * es);
                        for (size_t i = 0; i < count; i++) {
                            if (!ip) put(recv, t, i, 99);
                            put(send, t, i, red_input(op, t, r->rank, i, n));
                        }
                        TW_EXPECT_STATUS(r, shs_reduce(send, recv, count, t, op, root, r->comm), SHS_OK);
                        for (size_t i = 0; i < count; i++) {
                            /* non-roots: recvbuf untouched (in place: it is the sendbuf) */
                            double got = get(recv, t, i);
                            double want = r->rank == root ? red_expect(op, t, i, n)
                                          : ip            ? red_input(op, t, r->rank, i, n)
                                                          : 99;
                            TW_EXPECT(r, got == want, CASE_FMT " root=%d i=%zu: got %g want %g",
                                      CASE_ARGS(t, op, n, count, ip), root, i, got, want);
                        }
                        if (!ip) free(recv);
                        free(send);
                    }
                }
            }
        }
    }
    return SHS_OK;
}

static void test_reduce(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_reduce, NULL);
}

int main(void) {
    alarm(900); /* a hang fails the binary instead of blocking the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_reduce),
        cmocka_unit_test(test_all_reduce_oversubscribed),
        cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_all_gather),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reduce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
