/* test_comm_p2p.c - sends, receives, groups and all-to-all on the thread
 * communicator (comm.h POINT-TO-POINT): every message checked bit for bit
 * against a closed form of (sending rank, byte index); all-to-all even and
 * uneven against closed forms of (sender, receiver, index); the pairing
 * checks (count, dtype, tag), cycles and timeouts named on every rank
 * involved; bad input; stats; and the meta backend's counts. Every run has
 * a timeout, errors a short one, so nothing can hang. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/clock.h"
#include "shardsim/comm.h"
#include "shardsim/comm_meta.h"
#include "thread_world.h"

#include "comm_values.h"

#define ERR_TIMEOUT_MS 30000 /* errors must come long before it */

/* Byte b of the message rank s sends to rank d (nccl-tests' sendrecv check:
 * what peer (r-1+n) mod n sent, as a formula of its rank and the index). */
static uint8_t msg_byte(int s, int d, size_t b) {
    uint32_t h = (uint32_t)(s + 1) * 0x9E3779B1u ^ (uint32_t)(d + 7) * 0x85EBCA77u ^ (uint32_t)b * 0xC2B2AE3Du;
    return (uint8_t)(h ^ h >> 13 ^ h >> 24);
}

static void fill_msg(uint8_t *buf, int s, int d, size_t bytes) {
    for (size_t b = 0; b < bytes; b++) buf[b] = msg_byte(s, d, b);
}

/* The first byte that differs from the closed form, or -1. */
static long first_bad(const uint8_t *buf, int s, int d, size_t bytes) {
    for (size_t b = 0; b < bytes; b++)
        if (buf[b] != msg_byte(s, d, b)) return (long)b;
    return -1;
}

/* ---- sendrecv: each rank sends to (r+1) mod n, receives from (r-1+n) mod n ---- */

typedef struct {
    shs_dtype_t dtype;
    size_t count;
    int grouped_recv_first; /* post the receive before the send inside the group */
} ring_case_t;

static shs_status_t rank_sendrecv(tw_rank_t *r) {
    const ring_case_t *c = r->arg;
    int n = r->nranks, next = (r->rank + 1) % n, prev = (r->rank - 1 + n) % n;
    size_t bytes = c->count * shs_dtype_size(c->dtype);
    uint8_t *send = malloc(bytes + 1), *recv = malloc(bytes + 1);
    TW_EXPECT(r, send && recv, "out of memory");
    for (int round = 0; round < 3; round++) {
        fill_msg(send, r->rank + 100 * round, next, bytes);
        memset(recv, 0xA5, bytes);
        TW_EXPECT_STATUS(r, shs_group_start(), SHS_OK);
        if (c->grouped_recv_first) TW_EXPECT_STATUS(r, shs_recv(recv, c->count, c->dtype, prev, r->comm), SHS_OK);
        TW_EXPECT_STATUS(r, shs_send(send, c->count, c->dtype, next, r->comm), SHS_OK);
        if (!c->grouped_recv_first) TW_EXPECT_STATUS(r, shs_recv(recv, c->count, c->dtype, prev, r->comm), SHS_OK);
        TW_EXPECT_STATUS(r, shs_group_end(), SHS_OK);
        long bad = first_bad(recv, prev + 100 * round, r->rank, bytes);
        TW_EXPECT(r, bad < 0, "round %d: byte %ld of the message from rank %d is 0x%02x, want 0x%02x", round, bad, prev,
                  recv[bad < 0 ? 0 : bad], msg_byte(prev + 100 * round, r->rank, (size_t)(bad < 0 ? 0 : bad)));
    }
    free(send);
    free(recv);
    return SHS_OK;
}

static void test_sendrecv_ring_bit_exact(void **state) {
    (void)state;
    static const shs_dtype_t dtypes[] = {SHS_U8, SHS_BF16, SHS_F32, SHS_F64};
    static const size_t counts[] = {0, 1, 7, 1000, 300000};
    for (int w = 0; w < NUM_WORLD_SIZES; w++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
                ring_case_t c = {dtypes[d], counts[k], (int)(k % 2)};
                tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_sendrecv, &c);
            }
}

/* Many messages to one peer in one group pair in call order (the k-th send
 * with the k-th receive), whatever their sizes; a pipeline's stage both
 * sends on and receives from its neighbours in one group. */
static shs_status_t rank_ordered_messages(tw_rank_t *r) {
    static const size_t sizes[] = {5, 0, 40000, 3};
    uint8_t *send[4], *recv[4];
    for (int k = 0; k < 4; k++) {
        send[k] = malloc(sizes[k] + 1);
        recv[k] = malloc(sizes[k] + 1);
        fill_msg(send[k], r->rank * 10 + k, r->rank + 1, sizes[k]);
        memset(recv[k], 0, sizes[k]);
    }
    int n = r->nranks;
    TW_EXPECT_STATUS(r, shs_group_start(), SHS_OK);
    for (int k = 0; k < 4; k++) {
        if (r->rank + 1 < n) TW_EXPECT_STATUS(r, shs_send(send[k], sizes[k], SHS_U8, r->rank + 1, r->comm), SHS_OK);
        if (r->rank > 0) TW_EXPECT_STATUS(r, shs_recv(recv[k], sizes[k], SHS_U8, r->rank - 1, r->comm), SHS_OK);
    }
    TW_EXPECT_STATUS(r, shs_group_end(), SHS_OK);
    for (int k = 0; k < 4 && r->rank > 0; k++) {
        long bad = first_bad(recv[k], (r->rank - 1) * 10 + k, r->rank, sizes[k]);
        TW_EXPECT(r, bad < 0, "message %d from rank %d: byte %ld differs", k, r->rank - 1, bad);
    }
    /* the same pairs one by one, outside a group: the chain is no cycle */
    for (int k = 0; k < 4; k++) {
        if (r->rank > 0) TW_EXPECT_STATUS(r, shs_recv(recv[k], sizes[k], SHS_U8, r->rank - 1, r->comm), SHS_OK);
        if (r->rank + 1 < n) TW_EXPECT_STATUS(r, shs_send(send[k], sizes[k], SHS_U8, r->rank + 1, r->comm), SHS_OK);
        if (r->rank > 0) TW_EXPECT(r, first_bad(recv[k], (r->rank - 1) * 10 + k, r->rank, sizes[k]) < 0, "message %d", k);
    }
    for (int k = 0; k < 4; k++) free(send[k]), free(recv[k]);
    return SHS_OK;
}

static void test_ordered_messages_and_chain(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_ordered_messages, NULL);
}

/* ---- all-to-all ----------------------------------------------------------------- */

/* Element i of the block rank s sends to rank d. */
static int32_t a2a_value(int s, int d, size_t i) { return (int32_t)(s * 1000003 + d * 7919 + (int)i * 31 + 1); }

static shs_status_t rank_all_to_all_even(tw_rank_t *r) {
    int n = r->nranks;
    for (size_t count = 0; count < 4000; count = count ? count * 9 : 1) {
        int32_t *send = malloc((size_t)n * count * 4 + 4), *recv = malloc((size_t)n * count * 4 + 4);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < count; i++) send[(size_t)j * count + i] = a2a_value(r->rank, j, i);
        memset(recv, 0, (size_t)n * count * 4);
        TW_EXPECT_STATUS(r, shs_all_to_all(send, recv, count, SHS_I32, r->comm), SHS_OK);
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < count; i++)
                TW_EXPECT(r, recv[(size_t)j * count + i] == a2a_value(j, r->rank, i),
                          "count %zu: block %d element %zu is %d, want %d", count, j, i, recv[(size_t)j * count + i],
                          a2a_value(j, r->rank, i));
        free(send);
        free(recv);
    }
    return SHS_OK;
}

static void test_all_to_all_even(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_all_to_all_even, NULL);
}

/* Uneven splits, zeros among them: rank s sends split(s, d) elements to d. */
static size_t split_count(int s, int d) { return (size_t)((s * 3 + d * 5 + 1) % 4) * (size_t)(1 + (s + d) % 3) * 37; }

static shs_status_t rank_all_to_allv(tw_rank_t *r) {
    int n = r->nranks;
    size_t sc[8] = {0}, rc[8] = {0}, stot = 0, rtot = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = split_count(r->rank, j);
        rc[j] = split_count(j, r->rank);
        stot += sc[j];
        rtot += rc[j];
    }
    int32_t *send = calloc(stot + 1, 4), *recv = calloc(rtot + 1, 4);
    size_t off = 0;
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < sc[j]; i++) send[off++] = a2a_value(r->rank, j, i);
    memset(recv, 0, rtot * 4);
    TW_EXPECT_STATUS(r, shs_all_to_allv(send, sc, recv, rc, SHS_I32, r->comm), SHS_OK);
    off = 0;
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < rc[j]; i++, off++)
            TW_EXPECT(r, recv[off] == a2a_value(j, r->rank, i), "from rank %d element %zu is %d, want %d", j, i,
                      recv[off], a2a_value(j, r->rank, i));
    free(send);
    free(recv);
    return SHS_OK;
}

static void test_all_to_allv_uneven(void **state) {
    (void)state;
    for (int w = 0; w < NUM_WORLD_SIZES; w++) tw_run_ok(world_sizes[w], DATA_TIMEOUT_MS, rank_all_to_allv, NULL);
}

/* ---- pairing checks: both ends named, long before the timeout ----------------------- */

typedef struct {
    int kind; /* 0 count, 1 dtype, 2 tag, 3 all_to_allv splits */
} mismatch_case_t;

/* rank 1 sends 4 floats to rank 2, which expects 8 (or another dtype, or
 * another tag); ranks 0 and 3 wait in a barrier. */
static shs_status_t rank_pair_mismatch(tw_rank_t *r) {
    const mismatch_case_t *c = r->arg;
    float buf[16] = {0}; /* an all_to_allv receives up to 5 at buf + 4 */
    if (c->kind == 3) {
        size_t sc[4], rc[4];
        for (int j = 0; j < 4; j++) sc[j] = rc[j] = 1;
        if (r->rank == 2) rc[1] = 2; /* rank 2 expects 2 elements from rank 1, which sends it 1 */
        return shs_all_to_allv(buf, sc, buf + 4, rc, SHS_F32, r->comm);
    }
    if (r->rank == 1) {
        if (c->kind == 2) shs_comm_set_tag(r->comm, 5);
        return shs_send(buf, 4, SHS_F32, 2, r->comm);
    }
    if (r->rank == 2) {
        if (c->kind == 2) shs_comm_set_tag(r->comm, 6);
        return shs_recv(buf, c->kind == 0 ? 8 : 4, c->kind == 1 ? SHS_I32 : SHS_F32, 1, r->comm);
    }
    return shs_barrier(r->comm);
}

static void test_pair_mismatch_named_on_both(void **state) {
    (void)state;
    static const char *const want[] = {
        "comm 'world': rank 1's send(count=4, dtype=f32, peer=2) seq 0 and rank 2's recv(count=8, dtype=f32, peer=1) "
        "seq 0 are one message but their count differs",
        "comm 'world': rank 1's send(count=4, dtype=f32, peer=2) seq 0 and rank 2's recv(count=4, dtype=i32, peer=1) "
        "seq 0 are one message but their dtype differs",
        "comm 'world': rank 1's send(count=4, dtype=f32, peer=2) tag 5 seq 0 and rank 2's recv(count=4, dtype=f32, "
        "peer=1) tag 6 seq 0 are one message but their tag differs",
        "rank 1's send(count=1, dtype=f32, peer=2) seq 0 and rank 2's recv(count=2, dtype=f32, peer=1) seq 0 are one "
        "message but their count differs"};
    for (int kind = 0; kind < 4; kind++) {
        mismatch_case_t c = {kind};
        double t0 = shs_now_seconds();
        tw_rank_t *ranks = tw_run(4, ERR_TIMEOUT_MS, rank_pair_mismatch, &c);
        double dt = shs_now_seconds() - t0;
        for (int r = 0; r < 4; r++) {
            int involved = r == 1 || r == 2;
            if (ranks[r].status != (involved ? SHS_MISMATCH : SHS_ABORTED) ||
                (involved && !strstr(ranks[r].error, want[kind])))
                print_error("kind %d rank %d: %s: %s\n", kind, r, shs_status_name(ranks[r].status), ranks[r].error);
            if (kind < 3 || involved) assert_int_equal(ranks[r].status, involved ? SHS_MISMATCH : SHS_ABORTED);
            if (involved) {
                char prefix[16];
                snprintf(prefix, sizeof prefix, "rank %d: ", r);
                assert_true(strncmp(ranks[r].error, prefix, strlen(prefix)) == 0);
                assert_non_null(strstr(ranks[r].error, want[kind]));
            } else if (kind < 3) {
                /* the barrier's ranks learn the cause */
                assert_non_null(strstr(ranks[r].error, want[kind]));
            }
        }
        assert_true(dt < 5.0); /* the mismatch, not the 30 s timeout */
        free(ranks);
    }
}

/* ---- cycles ------------------------------------------------------------------------ */

/* Every rank sends to the next without a group: each waits for its
 * receiver, which is itself in a send. */
static shs_status_t rank_ring_without_group(tw_rank_t *r) {
    float x[3] = {1, 2, 3};
    return shs_send(x, 3, SHS_F32, (r->rank + 1) % r->nranks, r->comm);
}

static void test_ring_without_group_is_a_cycle(void **state) {
    (void)state;
    for (int n = 2; n <= 5; n++) {
        double t0 = shs_now_seconds();
        tw_rank_t *ranks = tw_run(n, ERR_TIMEOUT_MS, rank_ring_without_group, NULL);
        double dt = shs_now_seconds() - t0;
        char set[64], link[160];
        snprintf(set, sizeof set, "ranks [0-%d] wait on each other in a cycle", n - 1);
        for (int r = 0; r < n; r++) {
            if (ranks[r].status != SHS_MISMATCH || !strstr(ranks[r].error, set))
                print_error("n %d rank %d: %s: %s\n", n, r, shs_status_name(ranks[r].status), ranks[r].error);
            assert_int_equal(ranks[r].status, SHS_MISMATCH);
            assert_non_null(strstr(ranks[r].error, set));
            /* every link named: the rank, its call with its sequence number, the peer */
            for (int q = 0; q < n; q++) {
                snprintf(link, sizeof link, "rank %d's send(count=3, dtype=f32, peer=%d) seq 0 waits for rank %d", q,
                         (q + 1) % n, (q + 1) % n);
                assert_non_null(strstr(ranks[r].error, link));
            }
        }
        assert_true(dt < 5.0);
        free(ranks);
    }
}

/* Rank 0 sends to rank 1, which skips the receive and enters a barrier:
 * the barrier waits for rank 0, rank 0 for rank 1. */
static shs_status_t rank_send_vs_barrier(tw_rank_t *r) {
    float x = 1;
    if (r->rank == 0) return shs_send(&x, 1, SHS_F32, 1, r->comm);
    return shs_barrier(r->comm);
}

static void test_send_against_collective_is_a_cycle(void **state) {
    (void)state;
    double t0 = shs_now_seconds();
    tw_rank_t *ranks = tw_run(3, ERR_TIMEOUT_MS, rank_send_vs_barrier, NULL);
    double dt = shs_now_seconds() - t0;
    const char *want = "comm 'world': ranks [0-1] wait on each other in a cycle, a deadlock: rank 0's "
                       "send(count=1, dtype=f32, peer=1) seq 0 waits for rank 1; rank 1 is in barrier seq 0, which "
                       "waits for rank 0";
    for (int r = 0; r < 3; r++) {
        if (!strstr(ranks[r].error, want)) print_error("rank %d: %s: %s\n", r, shs_status_name(ranks[r].status), ranks[r].error);
        assert_int_equal(ranks[r].status, r < 2 ? SHS_MISMATCH : SHS_ABORTED);
        assert_non_null(strstr(ranks[r].error, want));
    }
    assert_true(dt < 5.0);
    free(ranks);
}

/* ---- timeout: a peer that never comes ------------------------------------------------ */

static shs_status_t rank_send_to_absent(tw_rank_t *r) {
    float x = 1;
    if (r->rank == 0) return shs_send(&x, 1, SHS_F32, 1, r->comm);
    return SHS_OK; /* rank 1 never receives */
}

static void test_timeout_names_the_peer(void **state) {
    (void)state;
    tw_rank_t *ranks = tw_run(2, 300, rank_send_to_absent, NULL);
    assert_int_equal(ranks[0].status, SHS_TIMEOUT);
    const char *want = "rank 0: send to rank 1 seq 0 on comm 'world': timed out after 0.300 s: rank 0's "
                       "send(count=1, dtype=f32, peer=1) seq 0 waits for rank 1's receive from rank 0 seq 0, which "
                       "has made no collective call and is in no send or receive";
    if (!strstr(ranks[0].error, want)) print_error("%s\n", ranks[0].error);
    assert_non_null(strstr(ranks[0].error, want));
    assert_int_equal(ranks[1].status, SHS_OK);
    free(ranks);
}

/* ---- bad input ------------------------------------------------------------------------ */

static shs_status_t rank_bad_input(tw_rank_t *r) {
    float x[4] = {0};
    size_t counts[2] = {1, 1};
#define EXPECT_ARG(call, text)                                                                              \
    do {                                                                                                    \
        TW_EXPECT_STATUS(r, call, SHS_INVALID_ARG);                                                         \
        TW_EXPECT(r, strstr(shs_last_error(), text) != NULL, "'%s' not in: %s", text, shs_last_error());   \
    } while (0)
    char text[160];
    snprintf(text, sizeof text, "rank %d: send on comm 'world': peer 2 out of range [0, 2)", r->rank);
    EXPECT_ARG(shs_send(x, 1, SHS_F32, 2, r->comm), text);
    EXPECT_ARG(shs_recv(x, 1, SHS_F32, -1, r->comm), "recv on comm 'world': peer -1 out of range [0, 2)");
    EXPECT_ARG(shs_send(NULL, 1, SHS_F32, 1, r->comm), "NULL buffer with count > 0");
    EXPECT_ARG(shs_send(x, 1, (shs_dtype_t)99, 1, r->comm), "invalid dtype");
    EXPECT_ARG(shs_send(x, 1, SHS_F32, r->rank, r->comm), "a send to itself outside a group");
    EXPECT_ARG(shs_recv(x, 1, SHS_F32, r->rank, r->comm), "a receive from itself outside a group");
    EXPECT_ARG(shs_send(x, 1, SHS_F32, 1, NULL), "send: comm is NULL");
    EXPECT_ARG(shs_group_end(), "shs_group_end without shs_group_start");
    EXPECT_ARG(shs_all_to_allv(x, NULL, x + 2, counts, SHS_F32, r->comm), "send_counts is NULL");
    EXPECT_ARG(shs_all_to_all(x, x + 1, 2, SHS_F32, r->comm), "sendbuf and recvbuf overlap");
    TW_EXPECT_STATUS(r, shs_group_start(), SHS_OK);
    EXPECT_ARG(shs_barrier(r->comm), "barrier on comm 'world': called inside a group");
    EXPECT_ARG(shs_all_reduce(x, x, 1, SHS_F32, SHS_SUM, r->comm), "called inside a group");
    TW_EXPECT_STATUS(r, shs_group_end(), SHS_OK); /* empty: nothing runs */
    /* none of the refused calls took a number: the ranks still pair */
    TW_EXPECT_STATUS(r, shs_group_start(), SHS_OK);
    TW_EXPECT_STATUS(r, shs_send(x, 1, SHS_F32, 1 - r->rank, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_recv(x + 1, 1, SHS_F32, 1 - r->rank, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_group_end(), SHS_OK);
    TW_EXPECT_STATUS(r, shs_barrier(r->comm), SHS_OK);
    return SHS_OK;
#undef EXPECT_ARG
}

static void test_bad_input(void **state) {
    (void)state;
    tw_run_ok(2, ERR_TIMEOUT_MS, rank_bad_input, NULL);
}

/* A group on two communicators, and a send to itself left without its
 * receive (the communicator fails: the group's calls were numbered). */
static shs_status_t rank_bad_groups(tw_rank_t *r) {
    float x[2] = {0};
    shs_comm_t *child = NULL;
    TW_EXPECT_STATUS(r, shs_comm_split(r->comm, 0, r->rank, &child), SHS_OK);
    TW_EXPECT_STATUS(r, shs_group_start(), SHS_OK);
    TW_EXPECT_STATUS(r, shs_send(x, 1, SHS_F32, r->rank, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_recv(x + 1, 1, SHS_F32, r->rank, child), SHS_INVALID_ARG);
    TW_EXPECT(r, strstr(shs_last_error(), "the group already holds calls on comm 'world'") != NULL, "%s",
              shs_last_error());
    TW_EXPECT_STATUS(r, shs_group_end(), SHS_MISMATCH);
    char want[160];
    snprintf(want, sizeof want, "rank %d's send(count=1, dtype=f32, peer=%d) seq 0 to itself has no receive from "
             "itself in its group", r->rank, r->rank);
    TW_EXPECT(r, strstr(shs_last_error(), want) != NULL, "'%s' not in: %s", want, shs_last_error());
    /* the communicator failed, and with it the job: every later call says so */
    TW_EXPECT_STATUS(r, shs_send(x, 1, SHS_F32, 1 - r->rank, r->comm), SHS_ABORTED);
    TW_EXPECT_STATUS(r, shs_barrier(child), SHS_ABORTED);
    TW_EXPECT(r, strstr(shs_last_error(), "the job failed") != NULL, "%s", shs_last_error());
    shs_comm_destroy(child);
    return SHS_OK;
}

static void test_bad_groups(void **state) {
    (void)state;
    tw_run_ok(2, ERR_TIMEOUT_MS, rank_bad_groups, NULL);
}

/* ---- stats, meta counts ------------------------------------------------------------- */

static shs_status_t rank_stats(tw_rank_t *r) {
    float x[100] = {0}, y[100], z[10]; /* a group's receives into separate buffers: they are written at once */
    int peer = 1 - r->rank;
    TW_EXPECT_STATUS(r, shs_group_start(), SHS_OK);
    TW_EXPECT_STATUS(r, shs_send(x, 100, SHS_F32, peer, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_recv(y, 100, SHS_F32, peer, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_send(x, 10, SHS_F32, r->rank, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_recv(z, 10, SHS_F32, r->rank, r->comm), SHS_OK);
    TW_EXPECT_STATUS(r, shs_group_end(), SHS_OK);
    shs_comm_stats_t s;
    shs_comm_get_stats(r->comm, &s);
    TW_EXPECT(r, s.calls[SHS_OP_SEND] == 2 && s.calls[SHS_OP_RECV] == 2, "calls %llu %llu",
              (unsigned long long)s.calls[SHS_OP_SEND], (unsigned long long)s.calls[SHS_OP_RECV]);
    TW_EXPECT(r, s.bytes[SHS_OP_SEND] == 440 && s.bytes[SHS_OP_RECV] == 440, "bytes");
    TW_EXPECT(r, s.bytes_sent[SHS_OP_SEND] == 440 && s.bytes_sent[SHS_OP_RECV] == 0, "bytes sent %llu %llu",
              (unsigned long long)s.bytes_sent[SHS_OP_SEND], (unsigned long long)s.bytes_sent[SHS_OP_RECV]);
    TW_EXPECT(r, s.calls[SHS_OP_BARRIER] == 0, "no collective");
    return SHS_OK;
}

static void test_stats(void **state) {
    (void)state;
    tw_run_ok(2, DATA_TIMEOUT_MS, rank_stats, NULL);
}

/* What a recorder sees: one report per call after the group, each with its
 * peer and per-peer sequence number. */
typedef struct {
    shs_comm_call_info_t seen[8];
    int n;
} seen_t;

static void record(void *user, const shs_comm_t *comm, const shs_comm_call_info_t *call) {
    seen_t *s = user;
    if (s->n < 8) s->seen[s->n++] = *call;
}

/* The meta backend counts sends and receives as the thread backend does
 * and numbers them per peer; it moves nothing. */
static void test_meta_counts(void **state) {
    (void)state;
    shs_comm_t *m;
    assert_int_equal(shs_comm_create_meta(&m, 8, 3, "world", NULL, NULL), SHS_OK);
    seen_t seen = {0};
    shs_comm_set_recorder(m, record, &seen);
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    assert_int_equal(shs_send(x, 4, SHS_F32, 4, m), SHS_OK);
    assert_int_equal(shs_send(x, 2, SHS_F32, 4, m), SHS_OK);
    assert_int_equal(shs_all_to_all(x, y, 0, SHS_F32, m), SHS_OK);
    assert_true(y[0] == 0);
    shs_comm_stats_t s;
    shs_comm_get_stats(m, &s);
    assert_int_equal(s.calls[SHS_OP_SEND], 2 + 8);
    assert_int_equal(s.calls[SHS_OP_RECV], 8);
    assert_int_equal(s.bytes[SHS_OP_SEND], 24);
    assert_int_equal(seen.n, 8);
    assert_int_equal(seen.seen[0].op, SHS_OP_SEND);
    assert_int_equal(seen.seen[0].root, 4);
    assert_int_equal(seen.seen[0].seq, 0);
    assert_int_equal(seen.seen[1].seq, 1);
    assert_int_equal(seen.seen[1].count, 2);
    assert_int_equal(seen.seen[1].bytes, 8);
    /* the all_to_all's calls: send to 0, recv from 0, send to 1, ... */
    assert_int_equal(seen.seen[2].op, SHS_OP_SEND);
    assert_int_equal(seen.seen[2].root, 0);
    assert_int_equal(seen.seen[3].op, SHS_OP_RECV);
    assert_int_equal(seen.seen[3].root, 0);
    assert_int_equal(seen.seen[3].seq, 0);
    assert_int_equal(seen.seen[6].root, 2);
    assert_int_equal(shs_comm_rank(m), 3);
    shs_comm_destroy(m);
}

/* The pairing rule on its own (comm.h), field by field. */
static void test_pairing_rule(void **state) {
    (void)state;
    shs_p2p_end_t s = {.op = SHS_OP_SEND, .rank = 1, .peer = 2, .seq = 3, .count = 4, .dtype = SHS_F32, .bytes = 16};
    shs_p2p_end_t r = {.op = SHS_OP_RECV, .rank = 2, .peer = 1, .seq = 3, .count = 4, .dtype = SHS_F32, .bytes = 16};
    assert_null(shs_p2p_pair_differs(&s, &r));
    shs_p2p_end_t x = r;
    x.op = SHS_OP_SEND;
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "op");
    x = r, x.peer = 0;
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "peer");
    x = r, x.seq = 4;
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "seq");
    x = r, x.dtype = SHS_BF16;
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "dtype");
    x = r, x.count = 8;
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "count");
    x = r, x.dtype = -1, x.count = 0, x.bytes = 17; /* a trace that gives bytes only */
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "bytes");
    x.bytes = 16;
    assert_null(shs_p2p_pair_differs(&s, &x));
    x = r, x.tag = 9;
    assert_null(shs_p2p_pair_differs(&s, &x)); /* 0 matches any tag */
    s.tag = 8;
    assert_string_equal(shs_p2p_pair_differs(&s, &x), "tag");
}

int main(void) {
    alarm(900); /* a hang fails the binary instead of blocking the suite */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairing_rule),
        cmocka_unit_test(test_sendrecv_ring_bit_exact),
        cmocka_unit_test(test_ordered_messages_and_chain),
        cmocka_unit_test(test_all_to_all_even),
        cmocka_unit_test(test_all_to_allv_uneven),
        cmocka_unit_test(test_pair_mismatch_named_on_both),
        cmocka_unit_test(test_ring_without_group_is_a_cycle),
        cmocka_unit_test(test_send_against_collective_is_a_cycle),
        cmocka_unit_test(test_timeout_names_the_peer),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_bad_groups),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_meta_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
