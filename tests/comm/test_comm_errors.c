/* test_comm_errors.c - the thread communicator beyond the data paths:
 * barrier, split, stats, many ranks on few cores, and the error paths
 * (mismatch, timeout, abort, invalid arguments, names). Every error test
 * runs with a short timeout, so nothing can hang. Not the call tags
 * (test_comm_tags.c). */
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
#include "shardsim/clock.h"

#include "comm_values.h"

/* ---- barrier -------------------------------------------------------------- */

static shs_status_t rank_barrier(tw_rank_t *r) {
    atomic_int *arrived = r->arg;
    for (int round = 0; round < 50; round++) {
        if (round % 10 == 0) sleep_ms(r->rank); /* stagger arrivals */
        atomic_fetch_add(arrived, 1);
        TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
        int seen = atomic_load(arrived);
        TW_EXPECT(r, seen >= (round + 1) * r->nranks, "round %d: passed the barrier with %d arrivals", round, seen);
        TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK); /* nobody starts the next round early */
    }
    return SHS_OK;
}

static void test_barrier(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) {
        atomic_int arrived = 0;
        tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_barrier, &arrived);
        assert_int_equal(atomic_load(&arrived), 50 * world_sizes[w]);
    }
}

/* ---- split ---------------------------------------------------------------- */

static shs_status_t check_child(tw_rank_t *r, shs_comm_t *child, const char *name, int size, int rank,
                                const int *members /* parent ranks in child rank order */) {
    TW_EXPECT(r, child != NULL, "no child comm");
    TW_EXPECT(r, strcmp(shs_comm_name(child), name) == 0, "name '%s' want '%s'", shs_comm_name(child), name);
    TW_EXPECT(r, shs_comm_size(child) == size, "size %d want %d", shs_comm_size(child), size);
    TW_EXPECT(r, shs_comm_rank(child) == rank, "rank %d want %d", shs_comm_rank(child), rank);
    int32_t mine = r->rank, gathered[8], sum = 0, want_sum = 0;
    TW_EXPECT_STATUS(r, shs_all_gather(&mine, gathered, 1, SHS_I32, child), SHS_OK);
    for (int j = 0; j < size; j++) TW_EXPECT(r, gathered[j] == members[j], "member %d is %d want %d", j, gathered[j], members[j]);
    TW_EXPECT_STATUS(r, shs_all_reduce(&mine, &sum, 1, SHS_I32, SHS_SUM, child), SHS_OK);
    for (int j = 0; j < size; j++) want_sum += members[j];
    TW_EXPECT(r, sum == want_sum, "sum %d want %d", sum, want_sum);
    return SHS_OK;
}

static shs_status_t rank_split(tw_rank_t *r) {
    int p = r->rank;
    char name[64];
    /* colors p%2, keys reversed: color 0 = parents {4,2,0}, color 1 = {5,3,1} */
    shs_comm_t *by_parity = NULL, *by_half = NULL, *most = NULL, *nested = NULL;
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, p % 2, -p, &by_parity), SHS_OK);
    static const int parity_members[2][3] = {{4, 2, 0}, {5, 3, 1}};
    /* named by colour and members (root ranks) */
    snprintf(name, sizeof name, "split(color=%d)%s", p % 2, p % 2 ? "[1,3,5]" : "[0,2,4]");
    SHS_CHECK(check_child(r, by_parity, name, 3, 2 - p / 2, parity_members[p % 2]));
    /* colors p/3, equal keys: ranked by parent rank */
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, p / 3, 7, &by_half), SHS_OK);
    static const int half_members[2][3] = {{0, 1, 2}, {3, 4, 5}};
    snprintf(name, sizeof name, "split(color=%d)%s", p / 3, p / 3 ? "[3-5]" : "[0-2]");
    SHS_CHECK(check_child(r, by_half, name, 3, p % 3, half_members[p / 3]));
    /* rank 5 opts out */
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, p == 5 ? SHS_SPLIT_NOCOLOR : 3, 0, &most), SHS_OK);
    static const int most_members[5] = {0, 1, 2, 3, 4};
    if (p == 5) TW_EXPECT(r, most == NULL, "NOCOLOR gave a communicator");
    else SHS_CHECK(check_child(r, most, "split(color=3)[0-4]", 5, p, most_members));
    /* split of a child, collectives on both at once */
    TW_EXPECT_STATUS(r, shs_comm_split(by_parity, 0, shs_comm_rank(by_parity) == 0 ? 1 : 0, &nested), SHS_OK);
    static const int nested_members[2][3] = {{2, 0, 4}, {3, 1, 5}};
    /* even parents: the same colour and members as by_parity's first child,
     * so the name is made unique; odd ones differ from theirs by colour */
    snprintf(name, sizeof name, "%s", p % 2 ? "split(color=0)[1,3,5]" : "split(color=0)[0,2,4]#2");
    SHS_CHECK(check_child(r, nested, name, 3, (shs_comm_rank(by_parity) + 2) % 3, nested_members[p % 2]));
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    shs_comm_destroy(by_parity); /* the parent and the other children outlive it */
    TW_EXPECT_STATUS(r, shs_barrier(nested), SHS_OK);
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    shs_comm_destroy(by_half);
    shs_comm_destroy(most);
    shs_comm_destroy(nested);
    return SHS_OK;
}

static void test_split(void **state) {
    (void)state;
    tw_run_ok(6, DATA_TIMEOUT_MS, rank_split, NULL);
}

/* A child inherits the parent's timeout: a member that never calls makes the
 * others time out after the parent's 500 ms, naming the child. */
static shs_status_t rank_split_timeout(tw_rank_t *r) {
    shs_comm_t *child = NULL;
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, r->rank % 2, 0, &child), SHS_OK);
    shs_status_t s = SHS_OK;
    if (r->rank != 3) s = shs_barrier(child);
    shs_comm_destroy(child);
    return s;
}

static void test_split_child_inherits_timeout(void **state) {
    (void)state;
    tw_rank_t *ranks = tw_run(4, 500, rank_split_timeout, NULL);
    for (int r = 0; r < 4; r++) {
        if (r == 3 || r % 2 == 0) {
            assert_int_equal(ranks[r].status, SHS_OK);
            continue;
        }
        assert_int_equal(ranks[r].status, SHS_TIMEOUT);
        assert_non_null(strstr(ranks[r].error, "comm 'split(color=1)[1,3]'"));
        assert_non_null(strstr(ranks[r].error, "timed out after 0.500 s waiting for ranks [1]"));
    }
    free(ranks);
}

/* ---- stats ---------------------------------------------------------------- */

static shs_status_t rank_stats(tw_rank_t *r) {
    float *buf = xmalloc(4000 * 4), *big = xmalloc(4 * 4000 * 4);
    for (int i = 0; i < 4000; i++) buf[i] = 1.0f;
    TW_EXPECT_STATUS(r, shs_all_reduce(buf, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_reduce(buf, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_gather(buf, big, 1000, SHS_F32, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(big, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_broadcast(buf, buf, 1000, SHS_F32, 1, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_reduce(buf, buf, 1000, SHS_F32, SHS_MAX, 2, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_all_reduce(NULL, buf, 1000, SHS_F32, SHS_SUM, r->comm), SHS_INVALID_ARG); /* not counted */
    shs_comm_stats_t s;
    shs_comm_get_stats(r->comm, &s);
    TW_EXPECT(r, s.calls[SHS_OP_ALL_REDUCE] == 2 && s.bytes[SHS_OP_ALL_REDUCE] == 8000 &&
                     s.bytes_sent[SHS_OP_ALL_REDUCE] == 2 * 6000,
              "all_reduce %llu %llu %llu", (unsigned long long)s.calls[SHS_OP_ALL_REDUCE],
              (unsigned long long)s.bytes[SHS_OP_ALL_REDUCE], (unsigned long long)s.bytes_sent[SHS_OP_ALL_REDUCE]);
    for (int op = SHS_OP_ALL_GATHER; op <= SHS_OP_REDUCE_SCATTER; op++)
        TW_EXPECT(r, s.calls[op] == 1 && s.bytes[op] == 16000 && s.bytes_sent[op] == 12000, "%s",
                  shs_coll_op_name((shs_coll_op_t)op));
    for (int op = SHS_OP_BROADCAST; op <= SHS_OP_REDUCE; op++)
        TW_EXPECT(r, s.calls[op] == 1 && s.bytes[op] == 4000 && s.bytes_sent[op] == 3000, "%s",
                  shs_coll_op_name((shs_coll_op_t)op));
    TW_EXPECT(r, s.calls[SHS_OP_BARRIER] == 1 && s.bytes[SHS_OP_BARRIER] == 0, "barrier");
    TW_EXPECT(r, s.calls[SHS_OP_SPLIT] == 0, "split");
    free(buf);
    free(big);
    return SHS_OK;
}

static void test_stats(void **state) {
    (void)state;
    tw_run_ok(4, DATA_TIMEOUT_MS, rank_stats, NULL);
}

/* ---- many ranks on few cores ---------------------------------------------- */

static shs_status_t rank_small_all_reduces(tw_rank_t *r) {
    const int calls = 2000;
    float x[256], y[256];
    for (int call = 0; call < calls; call++) {
        for (int i = 0; i < 256; i++) x[i] = (float)(r->rank + i + call % 3);
        TW_EXPECT_STATUS(r, shs_all_reduce(x, y, 256, SHS_F32, SHS_SUM, r->comm), SHS_OK);
    }
    int n = r->nranks, last = (calls - 1) % 3;
    for (int i = 0; i < 256; i++)
        TW_EXPECT(r, y[i] == (float)(n * (n - 1) / 2 + n * (i + last)), "i=%d: %g", i, y[i]);
    return SHS_OK;
}

static void test_oversubscribed_small_all_reduces(void **state) {
    (void)state;
    const int n = 16;
    double t0 = shs_now_seconds();
    tw_run_ok(n, DATA_TIMEOUT_MS, rank_small_all_reduces, NULL);
    double dt = shs_now_seconds() - t0;
    print_message("    16 ranks on %ld cores: 2000 all_reduce(256 x f32) in %.3f s, %.1f us per call\n",
                  sysconf(_SC_NPROCESSORS_ONLN), dt, dt / 2000 * 1e6);
}

/* ---- mismatches ------------------------------------------------------------ */

typedef enum { MM_OP, MM_COUNT, MM_DTYPE, MM_ROOT, MM_REDOP } mismatch_t;

typedef struct {
    mismatch_t kind;
    const char *common, *odd; /* the calls as the error text must show them */
} mismatch_case_t;

static shs_status_t rank_mismatch(tw_rank_t *r) {
    const mismatch_case_t *mc = r->arg;
    float *buf = xmalloc(4096 * 4), *out = xmalloc(4096 * 4);
    memset(buf, 0, 4096 * 4);
    int odd = r->rank == 2;
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK); /* seq 0 */
    shs_status_t s = SHS_OK;
    switch (mc->kind) {
    case MM_OP:
        s = odd ? shs_all_gather(buf, out, 256, SHS_F32, r->comm) : shs_all_reduce(buf, out, 1024, SHS_F32, SHS_SUM, r->comm);
        break;
    case MM_COUNT: s = shs_all_reduce(buf, out, odd ? 1000 : 1024, SHS_F32, SHS_SUM, r->comm); break;
    case MM_DTYPE: s = shs_all_reduce(buf, out, 1024, odd ? SHS_BF16 : SHS_F32, SHS_SUM, r->comm); break;
    case MM_ROOT: s = shs_broadcast(buf, out, 1024, SHS_F32, odd ? 3 : 1, r->comm); break;
    case MM_REDOP: s = shs_reduce(buf, out, 1024, SHS_F32, odd ? SHS_MAX : SHS_SUM, 0, r->comm); break;
    }
    const char *e = shs_last_error();
    TW_EXPECT(r, s == SHS_MISMATCH, "got %s: %s", shs_status_name(s), e);
    TW_EXPECT(r, strstr(e, "comm 'world' seq 1:") != NULL, "no comm/seq in: %s", e);
    char want[256];
    snprintf(want, sizeof want, "rank 0 called %s but rank 2 called %s", mc->common, mc->odd);
    TW_EXPECT(r, strstr(e, want) != NULL, "'%s' not in: %s", want, e);
    /* the communicator is failed now */
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_ABORTED);
    TW_EXPECT(r, strstr(shs_last_error(), "failed earlier") != NULL, "%s", shs_last_error());
    TW_EXPECT_STATUS(r, shs_all_reduce(buf, out, 1024, SHS_F32, SHS_SUM, r->comm), SHS_ABORTED);
    free(buf);
    free(out);
    return SHS_OK;
}

static void test_mismatches(void **state) {
    (void)state;
    static const mismatch_case_t cases[] = {
        {MM_OP, "all_reduce(count=1024, dtype=f32, op=sum)", "all_gather(count=256, dtype=f32)"},
        {MM_COUNT, "all_reduce(count=1024, dtype=f32, op=sum)", "all_reduce(count=1000, dtype=f32, op=sum)"},
        {MM_DTYPE, "all_reduce(count=1024, dtype=f32, op=sum)", "all_reduce(count=1024, dtype=bf16, op=sum)"},
        {MM_ROOT, "broadcast(count=1024, dtype=f32, root=1)", "broadcast(count=1024, dtype=f32, root=3)"},
        {MM_REDOP, "reduce(count=1024, dtype=f32, op=sum, root=0)", "reduce(count=1024, dtype=f32, op=max, root=0)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) tw_run_ok(4, 500, rank_mismatch, (void *)&cases[k]);
}

/* ---- timeout ------------------------------------------------------------------ */

typedef struct {
    int missing[4];       /* ranks that skip the collective, -1 ends */
    atomic_int returned;  /* ranks done waiting */
    int waiters;
} timeout_case_t;

static int in_list(const int *list, int r) {
    for (int k = 0; k < 4 && list[k] >= 0; k++)
        if (list[k] == r) return 1;
    return 0;
}

static shs_status_t rank_timeout(tw_rank_t *r) {
    timeout_case_t *tc = r->arg;
    float x[64] = {0}, y[64];
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK); /* seq 0 */
    if (!in_list(tc->missing, r->rank)) {
        shs_status_t s = shs_all_reduce(x, y, 64, SHS_F32, SHS_SUM, r->comm);
        char text[1024];
        snprintf(text, sizeof text, "%s", shs_last_error());
        atomic_fetch_add(&tc->returned, 1);
        TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_ABORTED); /* failed for good */
        shs_set_last_error_text(text);
        return s;
    }
    while (atomic_load(&tc->returned) < tc->waiters) sleep_ms(5);
    /* late: the communicator failed meanwhile */
    return shs_all_reduce(x, y, 64, SHS_F32, SHS_SUM, r->comm);
}

static void check_timeout(int n, timeout_case_t *tc, const char *missing_text, const char *last_calls_text) {
    double t0 = shs_now_seconds();
    tw_rank_t *ranks = tw_run(n, 500, rank_timeout, tc);
    double dt = shs_now_seconds() - t0;
    for (int r = 0; r < n; r++) {
        const char *e = ranks[r].error;
        if (in_list(tc->missing, r)) {
            assert_int_equal(ranks[r].status, SHS_ABORTED);
            assert_non_null(strstr(e, "failed earlier"));
            continue;
        }
        if (ranks[r].status != SHS_TIMEOUT) print_error("rank %d: %s\n", r, e);
        assert_int_equal(ranks[r].status, SHS_TIMEOUT);
        assert_true(ranks[r].seconds >= 0.45 && ranks[r].seconds < 5.0);
        char want[128];
        snprintf(want, sizeof want, "rank %d: all_reduce seq 1 on comm 'world': timed out after 0.500 s", r);
        assert_non_null(strstr(e, want));
        assert_non_null(strstr(e, missing_text));
        if (!strstr(e, last_calls_text)) print_error("'%s' not in: %s\n", last_calls_text, e);
        assert_non_null(strstr(e, last_calls_text));
    }
    assert_true(dt < 10.0);
    free(ranks);
}

static void test_timeout_names_missing_rank(void **state) {
    (void)state;
    timeout_case_t tc = {.missing = {3, -1}, .waiters = 3};
    check_timeout(4, &tc, "waiting for ranks [3]",
                  "last calls: ranks [0-2] all_reduce seq 1 (in progress); ranks [3] barrier seq 0 (completed)");
}

static void test_timeout_many_ranks(void **state) {
    (void)state;
    timeout_case_t tc = {.missing = {5, 9, 10, -1}, .waiters = 13};
    check_timeout(16, &tc, "waiting for ranks [5,9-10]",
                  "ranks [0-4,6-8,11-15] all_reduce seq 1 (in progress); ranks [5,9-10] barrier seq 0 (completed)");
}

/* ---- abort -------------------------------------------------------------------- */

static shs_status_t rank_abort(tw_rank_t *r) {
    float x[64] = {0}, y[64];
    if (r->rank == 3) {
        sleep_ms(100);
        shs_comm_abort(r->comm, "test abort");
        shs_comm_abort(r->comm, "second reason is ignored");
    }
    return shs_all_reduce(x, y, 64, SHS_F32, SHS_SUM, r->comm);
}

static void test_abort_wakes_waiting_ranks(void **state) {
    (void)state;
    tw_rank_t *ranks = tw_run(4, 20000, rank_abort, NULL);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(ranks[r].status, SHS_ABORTED);
        assert_non_null(strstr(ranks[r].error, "aborted by rank 3: test abort"));
        assert_true(ranks[r].seconds < 2.0);
    }
    free(ranks);
}

/* ---- invalid arguments ---------------------------------------------------------- */

static shs_status_t rank_invalid_args(tw_rank_t *r) {
    float a[16] = {0}, b[64] = {0};
    shs_comm_t *c = r->comm, *child = NULL;
    int n = r->nranks;
    TW_EXPECT_STATUS(r, shs_all_reduce(NULL, b, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT(r, strstr(shs_last_error(), "all_reduce on comm 'world'") != NULL, "%s", shs_last_error());
    TW_EXPECT_STATUS(r, shs_all_reduce(a, NULL, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_NUM_DTYPES, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_F32, SHS_NUM_REDOPS, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_F32, (shs_redop_t)-1, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(b, b + 1, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG); /* partial overlap */
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, SIZE_MAX / 2, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_gather(NULL, b, 4, SHS_F32, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_gather(a, b, 4, (shs_dtype_t)-3, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_gather(b + 1, b, 4, SHS_F32, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(a, NULL, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(a, b, 4, SHS_F32, (shs_redop_t)9, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce_scatter(b, b + 1, 4, SHS_F32, SHS_SUM, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_broadcast(a, b, 4, SHS_F32, -1, c), SHS_INVALID_ARG);
    TW_EXPECT(r, strstr(shs_last_error(), "root -1 out of range") != NULL, "%s", shs_last_error());
    TW_EXPECT_STATUS(r, shs_broadcast(a, b, 4, SHS_F32, n, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_broadcast(a, NULL, 4, SHS_F32, 0, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce(a, b, 4, SHS_F32, SHS_SUM, n, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce(NULL, b, 4, SHS_F32, SHS_SUM, 0, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_reduce(a, b, 4, SHS_F32, SHS_AVG + 1, 0, c), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_comm_split(c, 0, 0, NULL), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_comm_split(c, -5, 0, &child), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_barrier(NULL), SHS_INVALID_ARG);
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 4, SHS_F32, SHS_SUM, NULL), SHS_INVALID_ARG);
    /* NULL buffers are fine with count 0; the communicator is still usable
     * and the failed calls took no sequence number */
    TW_EXPECT_STATUS(r, shs_all_reduce(NULL, NULL, 0, SHS_F32, SHS_SUM, c), SHS_OK);
    for (int i = 0; i < 16; i++) a[i] = (float)r->rank;
    TW_EXPECT_STATUS(r, shs_all_reduce(a, b, 16, SHS_F32, SHS_SUM, c), SHS_OK);
    TW_EXPECT(r, b[5] == (float)(n * (n - 1) / 2), "sum %g", b[5]);
    /* reduce: recvbuf is ignored on non-roots, sendbuf of broadcast too */
    TW_EXPECT_STATUS(r, shs_reduce(a, r->rank == 0 ? b : NULL, 16, SHS_F32, SHS_SUM, 0, c), SHS_OK);
    TW_EXPECT_STATUS(r, shs_broadcast(r->rank == 0 ? a : NULL, b, 16, SHS_F32, 0, c), SHS_OK);
    shs_comm_stats_t s;
    shs_comm_get_stats(c, &s);
    TW_EXPECT(r, s.calls[SHS_OP_ALL_REDUCE] == 2, "calls %llu", (unsigned long long)s.calls[SHS_OP_ALL_REDUCE]);
    return SHS_OK;
}

static void test_invalid_args(void **state) {
    (void)state;
    tw_run_ok(1, 500, rank_invalid_args, NULL);
    tw_run_ok(3, 500, rank_invalid_args, NULL);
}

static void test_init_errors(void **state) {
    (void)state;
    shs_comm_id_t *id = NULL;
    shs_comm_t *c0 = NULL, *again = NULL;
    assert_int_equal(shs_comm_id_create(&id, 0, 0, NULL), SHS_INVALID_ARG);
    assert_int_equal(shs_comm_id_create(&id, 2, 0, NULL), SHS_OK);
    assert_int_equal(shs_comm_init_rank(&c0, id, 2), SHS_INVALID_ARG);
    assert_int_equal(shs_comm_init_rank(&c0, id, -1), SHS_INVALID_ARG);
    assert_int_equal(shs_comm_init_rank(&c0, id, 0), SHS_OK);
    assert_int_equal(shs_comm_init_rank(&again, id, 0), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "already taken"));
    assert_null(again);
    assert_string_equal(shs_comm_name(c0), "world");
    assert_int_equal(shs_comm_size(c0), 2);
    assert_int_equal(shs_comm_rank(c0), 0);
    /* the creator may release the id before the ranks destroy their handles */
    shs_comm_id_release(id);
    shs_comm_abort(c0, "nobody else joined");
    assert_int_equal(shs_barrier(c0), SHS_ABORTED);
    assert_non_null(strstr(shs_last_error(), "aborted by rank 0: nobody else joined"));
    shs_comm_destroy(c0);
    shs_comm_destroy(NULL);
    shs_comm_id_release(NULL);
}

static void test_names(void **state) {
    (void)state;
    static const char *names[] = {"sum", "prod", "max", "min", "avg"};
    for (int op = 0; op < SHS_NUM_REDOPS; op++) {
        shs_redop_t parsed;
        assert_string_equal(shs_redop_name((shs_redop_t)op), names[op]);
        assert_int_equal(shs_redop_parse(names[op], &parsed), 0);
        assert_int_equal(parsed, op);
    }
    shs_redop_t unused;
    assert_int_equal(shs_redop_parse("mean", &unused), -1);
    assert_int_equal(shs_redop_parse(NULL, &unused), -1);
    assert_string_equal(shs_redop_name(SHS_NUM_REDOPS), "invalid");
    assert_string_equal(shs_coll_op_name(SHS_OP_ALL_GATHER), "all_gather");
    assert_string_equal(shs_coll_op_name(SHS_OP_REDUCE_SCATTER), "reduce_scatter");
    assert_string_equal(shs_coll_op_name(SHS_OP_SPLIT), "split");
    assert_string_equal(shs_coll_op_name(SHS_NUM_OPS), "invalid");
}

int main(void) {
    alarm(900); /* a hang fails the binary instead of blocking the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_split_child_inherits_timeout),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_oversubscribed_small_all_reduces),
        cmocka_unit_test(test_mismatches),
        cmocka_unit_test(test_timeout_names_missing_rank),
        cmocka_unit_test(test_timeout_many_ranks),
        cmocka_unit_test(test_abort_wakes_waiting_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
