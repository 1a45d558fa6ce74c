/* test_mpi.c - the MPI communicator backend (comm_mpi.h) against the thread
 * backend, the reference: the same calls must give the same bits.
 *
 * Collectives: this program re-runs itself under mpirun (-np 3 and 4) as a
 * worker (SHS_TEST_MPI_WORKER=1). Each worker process makes a series of
 * calls on an MPI communicator - every reducing op and dtype, rank and ring
 * order, counts that do and do not divide by N, in place and out of place,
 * all-gather, broadcast, reduce, barrier, split - and then makes the same
 * calls with the same per-rank inputs on a thread world of N ranks in its own
 * process; its MPI result must equal thread rank r's result byte for byte.
 * Last, one rank aborts the communicator and every other rank's next call
 * must return SHS_ABORTED with the reason, and two ranks' different call
 * tags make every rank's call return SHS_MISMATCH naming both.
 * Trainer and CLI: `mpirun -np 4 shardsim train --backend mpi --strategy
 * zero3 --check ddp` prints, step by step, the same loss bits as `shardsim
 * train --world 4 --strategy zero3`; one rank issuing a different count makes
 * the job fail with the mismatch message; a rank that never arrives makes
 * the job fail with the timeout message (no hang: every run has a wall-clock
 * limit); --world that differs from the job is refused. The faults are
 * planted through SHS_TEST_FAULT=mismatch:RANK | stall:RANK (sim/test_fault.h),
 * not through the product's options.
 * Without MPI in the build (mpicc not found, or SAN=thread: OpenMPI is not
 * TSan-instrumented) this program does not compile, and `make test` does not
 * build it and says so: it never passes by skipping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/clock.h"
#include "shardsim/comm.h"
#include "shardsim/comm_mpi.h"
#include "shardsim/device.h"
#include "order_values.h"
#include "thread_world.h"

#define BIN SHS_BIN_PATH
#define STEPS 4
#define TIMEOUT_MS 20000

#ifndef SHS_HAVE_MPI
#error "test_mpi needs the MPI build (mpicc and mpirun found, SAN not thread); make test leaves it out otherwise"
#endif

/* ---- the worker (runs under mpirun) ------------------------------------------ */

/* One call: what every rank passes. */
typedef struct {
    shs_coll_op_t op;
    shs_dtype_t dtype;
    shs_redop_t redop;
    shs_reduce_order_t order;
    size_t count;        /* NCCL's count */
    int root;
    int in_place;
    uint64_t seed;
} case_t;

/* Rank r's input element i: random bits of either sign over 2^-8..2^8 for
 * floats (sums lose bits, so they depend on the order), near 1 for PROD,
 * small integers. */
static void fill(void *buf, const case_t *c, int r, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = test_mix64(c->seed * 1000003u + (uint64_t)r * 7919u + i);
        double m = 1.0 + (double)(h & 0xffffff) / 16777216.0;
        double v = ((h >> 40) & 1 ? -1.0 : 1.0) * m * (double)(1u << ((h >> 24) % 17)) / 256.0;
        if (c->redop == SHS_PROD) v = (v < 0 ? -1.0 : 1.0) * (1.0 + (v < 0 ? -v : v) / 512.0);
        switch (c->dtype) {
        case SHS_F16: ((uint16_t *)buf)[i] = shs_f32_to_f16((float)v); break;
        case SHS_BF16: ((uint16_t *)buf)[i] = shs_f32_to_bf16((float)v); break;
        case SHS_F32: ((float *)buf)[i] = (float)v; break;
        case SHS_F64: ((double *)buf)[i] = v; break;
        case SHS_I32: ((int32_t *)buf)[i] = (int32_t)(h >> 8); break; /* sums wrap */
        default: abort();
        }
    }
}

/* Elements of rank r's input and output buffers for the call. */
static size_t in_elems(const case_t *c, int n) {
    return c->op == SHS_OP_REDUCE_SCATTER ? c->count * (size_t)n : c->count;
}
static size_t out_elems(const case_t *c, int n) {
    return c->op == SHS_OP_ALL_GATHER ? c->count * (size_t)n : c->count;
}

/* Make the call as rank `rank` of `comm` and copy its output to `out`
 * (out_elems elements; left as is where the call writes nothing). */
static shs_status_t do_call(const case_t *c, shs_comm_t *comm, void *out) {
    int n = shs_comm_size(comm), r = shs_comm_rank(comm);
    size_t es = shs_dtype_size(c->dtype), ni = in_elems(c, n), no = out_elems(c, n);
    char *in = calloc(ni + no + 1, es), *res = in + ni * es; /* one block, so in place can alias */
    if (!in) return SHS_HOST_OOM;
    memcpy(res, out, no * es);
    SHS_CHECK(shs_comm_set_reduce_order(comm, c->order));
    shs_status_t s = SHS_INTERNAL;
    char *send = in;
    switch (c->op) {
    case SHS_OP_ALL_GATHER:
        if (c->in_place) send = res + (size_t)r * c->count * es;
        fill(send, c, r, ni);
        s = shs_all_gather(send, res, c->count, c->dtype, comm);
        break;
    case SHS_OP_REDUCE_SCATTER:
        /* in place: the input is the whole N*count buffer, the output its block r */
        if (c->in_place) {
            char *buf = malloc(ni * es);
            if (!buf) break;
            fill(buf, c, r, ni);
            s = shs_reduce_scatter(buf, buf + (size_t)r * c->count * es, c->count, c->dtype, c->redop, comm);
            memcpy(res, buf + (size_t)r * c->count * es, no * es);
            free(buf);
            break;
        }
        fill(in, c, r, ni);
        s = shs_reduce_scatter(in, res, c->count, c->dtype, c->redop, comm);
        break;
    case SHS_OP_ALL_REDUCE:
        if (c->in_place) send = res;
        fill(send, c, r, ni);
        s = shs_all_reduce(send, res, c->count, c->dtype, c->redop, comm);
        break;
    case SHS_OP_BROADCAST:
        if (c->in_place) send = res;
        fill(send, c, r, ni);
        s = shs_broadcast(send, res, c->count, c->dtype, c->root, comm);
        break;
    case SHS_OP_REDUCE:
        if (c->in_place) send = res;
        fill(send, c, r, ni);
        s = shs_reduce(send, res, c->count, c->dtype, c->redop, c->root, comm);
        break;
    case SHS_OP_BARRIER: s = shs_barrier(comm); break;
    default: break;
    }
    if (s == SHS_OK) memcpy(out, res, no * es);
    free(in);
    return s;
}

typedef struct {
    const case_t *c;
    char **outs;         /* (nranks) each thread rank's output */
} ref_arg_t;

static shs_status_t ref_rank(tw_rank_t *r) {
    ref_arg_t *a = r->arg;
    TW_EXPECT_STATUS(r, do_call(a->c, r->comm, a->outs[r->rank]), SHS_OK);
    return SHS_OK;
}

/* The call on MPI, then on a thread world of the same size: this process's
 * rank must hold the same bytes. Returns 0 when equal, 1 (printed) if not. */
static int check_case(const case_t *c, shs_comm_t *comm) {
    int n = shs_comm_size(comm), r = shs_comm_rank(comm);
    size_t es = shs_dtype_size(c->dtype), bytes = out_elems(c, n) * es;
    char *mine = malloc(bytes + 1);
    char **outs = calloc((size_t)n, sizeof *outs);
    for (int j = 0; j < n; j++) {
        outs[j] = malloc(bytes + 1);
        memset(outs[j], 0xab, bytes); /* what a call does not write stays the same on both sides */
    }
    memset(mine, 0xab, bytes);
    int bad = 0;
    shs_status_t s = do_call(c, comm, mine);
    char what[160];
    snprintf(what, sizeof what, "%s dtype %s op %s order %s count %zu root %d%s", shs_coll_op_name(c->op),
             shs_dtype_name(c->dtype), shs_redop_name(c->redop), shs_reduce_order_name(c->order), c->count, c->root,
             c->in_place ? " in place" : "");
    if (s != SHS_OK) {
        fprintf(stderr, "rank %d: %s: mpi returned %s: %s\n", r, what, shs_status_name(s), shs_last_error());
        bad = 1;
    } else {
        ref_arg_t a = {c, outs};
        tw_rank_t *ranks = tw_run(n, TIMEOUT_MS, ref_rank, &a);
        for (int j = 0; j < n && !bad; j++)
            if (ranks[j].status != SHS_OK || ranks[j].failure[0]) {
                fprintf(stderr, "rank %d: %s: thread rank %d failed: %s %s\n", r, what, j, ranks[j].failure,
                        ranks[j].error);
                bad = 1;
            }
        free(ranks);
        if (!bad && memcmp(mine, outs[r], bytes) != 0) {
            size_t i = 0;
            while (memcmp(mine + i * es, outs[r] + i * es, es) == 0) i++;
            fprintf(stderr, "rank %d: %s: element %zu differs from the thread backend's\n", r, what, i);
            bad = 1;
        }
    }
    for (int j = 0; j < n; j++) free(outs[j]);
    free(outs);
    free(mine);
    return bad;
}

static int run_cases(shs_comm_t *comm, int *ncases) {
    static const shs_dtype_t dtypes[] = {SHS_F32, SHS_F16, SHS_BF16, SHS_F64, SHS_I32};
    static const shs_redop_t redops[] = {SHS_SUM, SHS_AVG, SHS_MAX, SHS_MIN, SHS_PROD};
    static const size_t counts[] = {1, 7, 1001};
    int n = shs_comm_size(comm), bad = 0;
    uint64_t seed = 1;
    for (int op = SHS_OP_REDUCE_SCATTER; op <= SHS_OP_ALL_REDUCE; op++)
        for (int d = 0; d < 5; d++)
            for (int o = 0; o < 5; o++)
                for (int order = 0; order < 2; order++)
                    for (int k = 0; k < 3; k++)
                        for (int ip = 0; ip < 2; ip++) {
                            if ((redops[o] == SHS_MIN || redops[o] == SHS_PROD) && (k != 1 || ip)) continue;
                            case_t c = {(shs_coll_op_t)op, dtypes[d], redops[o], (shs_reduce_order_t)order,
                                        counts[k], 0, ip, seed++};
                            bad |= check_case(&c, comm);
                            ++*ncases;
                        }
    /* large: beyond any staging threshold of the thread backend */
    for (int order = 0; order < 2; order++) {
        case_t ar = {SHS_OP_ALL_REDUCE, SHS_F32, SHS_SUM, (shs_reduce_order_t)order, 70001, 0, 0, seed++};
        case_t rs = {SHS_OP_REDUCE_SCATTER, SHS_BF16, SHS_SUM, (shs_reduce_order_t)order, 30001, 0, 1, seed++};
        bad |= check_case(&ar, comm) | check_case(&rs, comm);
        *ncases += 2;
    }
    for (int k = 0; k < 3; k++)
        for (int ip = 0; ip < 2; ip++) {
            case_t ag = {SHS_OP_ALL_GATHER, SHS_F32, SHS_SUM, 0, counts[k] * 10, 0, ip, seed++};
            case_t bc = {SHS_OP_BROADCAST, SHS_BF16, SHS_SUM, 0, counts[k] * 10, n - 1, ip, seed++};
            case_t rd = {SHS_OP_REDUCE, SHS_F32, SHS_SUM, 0, counts[k] * 10, 1, ip, seed++};
            case_t rd16 = {SHS_OP_REDUCE, SHS_F16, SHS_AVG, 0, counts[k], n - 1, ip, seed++};
            bad |= check_case(&ag, comm) | check_case(&bc, comm) | check_case(&rd, comm) | check_case(&rd16, comm);
            *ncases += 4;
        }
    case_t bar = {SHS_OP_BARRIER, SHS_I8, SHS_SUM, 0, 0, 0, 0, seed++};
    bad |= check_case(&bar, comm);
    ++*ncases;
    return bad;
}

/* Split by parity, ranked by descending parent rank (key = -rank): the
 * child's rank and size follow, and a sum of parent ranks over it is the
 * closed form. */
static int check_split(shs_comm_t *comm) {
    int n = shs_comm_size(comm), r = shs_comm_rank(comm), color = r % 2;
    shs_comm_t *child = NULL;
    shs_status_t s = shs_comm_split(comm, color, -r, &child);
    if (s != SHS_OK || !child) {
        fprintf(stderr, "rank %d: split returned %s: %s\n", r, shs_status_name(s), shs_last_error());
        return 1;
    }
    int members = 0, above = 0, want_sum = 0;
    for (int j = color; j < n; j += 2) {
        members++;
        want_sum += j;
        above += j > r;
    }
    int32_t v = r;
    char want_name[64];
    size_t len = (size_t)snprintf(want_name, sizeof want_name, "split(color=%d)[", color);
    for (int j = color; j < n; j += 2) /* members two apart: a list, no ranges */
        len += (size_t)snprintf(want_name + len, sizeof want_name - len, "%s%d", j > color ? "," : "", j);
    snprintf(want_name + len, sizeof want_name - len, "]");
    s = shs_all_reduce(&v, &v, 1, SHS_I32, SHS_SUM, child);
    int bad = s != SHS_OK || shs_comm_size(child) != members || shs_comm_rank(child) != above || v != want_sum ||
              strcmp(shs_comm_name(child), want_name) != 0;
    if (bad)
        fprintf(stderr, "rank %d: split child: status %s, rank %d (want %d), size %d (want %d), sum %d (want %d), "
                "name %s (want %s)\n", r, shs_status_name(s), shs_comm_rank(child), above, shs_comm_size(child),
                members, (int)v, want_sum, shs_comm_name(child), want_name);
    shs_comm_t *none = comm;
    s = shs_comm_split(comm, r == 0 ? SHS_SPLIT_NOCOLOR : 0, 0, &none);
    if (s != SHS_OK || (r == 0) != (none == NULL)) {
        fprintf(stderr, "rank %d: split with NOCOLOR: %s\n", r, shs_status_name(s));
        bad = 1;
    }
    shs_comm_destroy(none);
    shs_comm_destroy(child);
    return bad;
}

/* Call tags (comm.h CALL TAGS) travel in the descriptor: untagged ranks
 * match tagged ones; then rank 1's tag 5 against rank N-1's tag 6 fails on
 * every rank at that call, naming both. */
static int check_tags(shs_comm_t *comm) {
    int n = shs_comm_size(comm), r = shs_comm_rank(comm);
    int32_t v = 1;
    shs_comm_set_tag(comm, r % 2 ? 5 : 0);
    shs_status_t s = shs_all_reduce(&v, &v, 1, SHS_I32, SHS_SUM, comm);
    if (s != SHS_OK || v != n) {
        fprintf(stderr, "rank %d: tags 0/5: %s (sum %d): %s\n", r, shs_status_name(s), (int)v, shs_last_error());
        return 1;
    }
    shs_comm_set_tag(comm, r == 1 ? 5 : r == n - 1 ? 6 : 0);
    s = shs_all_reduce(&v, &v, 1, SHS_I32, SHS_SUM, comm);
    char want[256];
    snprintf(want, sizeof want, "comm 'tags' seq 1: rank 1 called all_reduce(count=1, dtype=i32, op=sum) tag 5 but "
             "rank %d called all_reduce(count=1, dtype=i32, op=sum) tag 6", n - 1);
    if (s == SHS_MISMATCH && strstr(shs_last_error(), want)) return 0;
    fprintf(stderr, "rank %d: tags 5/6: %s: %s (want '%s')\n", r, shs_status_name(s), shs_last_error(), want);
    return 1;
}

/* Byte b of the message rank s sends to rank d (as test_comm_p2p.c). */
static uint8_t msg_byte(int s, int d, size_t b) {
    uint32_t h = (uint32_t)(s + 1) * 0x9E3779B1u ^ (uint32_t)(d + 7) * 0x85EBCA77u ^ (uint32_t)b * 0xC2B2AE3Du;
    return (uint8_t)(h ^ h >> 13 ^ h >> 24);
}

/* Element i of the all-to-all block rank s sends to rank d, and the size
 * of that block in the uneven form. */
static int32_t a2a_value(int s, int d, size_t i) { return (int32_t)(s * 1000003 + d * 7919 + (int)i * 31 + 1); }
static size_t split_count(int s, int d) { return (size_t)((s * 3 + d * 5 + 1) % 4) * (size_t)(1 + (s + d) % 3) * 37; }

/* Sends and receives against closed forms, bit for bit: nccl-tests'
 * sendrecv (to r+1, from r-1, one group) at sizes across the backend's
 * paths, then all-to-all even and uneven. */
static int check_p2p(shs_comm_t *comm) {
    int n = shs_comm_size(comm), r = shs_comm_rank(comm), next = (r + 1) % n, prev = (r - 1 + n) % n, bad = 0;
    static const size_t sizes[] = {0, 1, 13, 4096, 1000001};
    uint8_t *send = malloc(1000001), *recv = malloc(1000001);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && !bad; k++) {
        size_t bytes = sizes[k];
        for (size_t b = 0; b < bytes; b++) send[b] = msg_byte(r, next, b);
        memset(recv, 0, bytes);
        shs_status_t s = shs_group_start();
        if (s == SHS_OK) s = shs_send(send, bytes, SHS_U8, next, comm);
        if (s == SHS_OK) s = shs_recv(recv, bytes, SHS_U8, prev, comm);
        shs_status_t e = shs_group_end();
        if (s != SHS_OK || e != SHS_OK) {
            fprintf(stderr, "rank %d: sendrecv of %zu bytes: %s\n", r, bytes, shs_last_error());
            bad = 1;
        }
        for (size_t b = 0; b < bytes && !bad; b++)
            if (recv[b] != msg_byte(prev, r, b)) {
                fprintf(stderr, "rank %d: sendrecv of %zu bytes: byte %zu is 0x%02x, want 0x%02x\n", r, bytes, b, recv[b],
                        msg_byte(prev, r, b));
                bad = 1;
            }
    }
    free(send);
    free(recv);
    size_t count = 301, sc[16], rc[16], stot = 0, rtot = 0;
    int32_t *a = malloc((size_t)n * count * 4), *b = malloc((size_t)n * count * 4);
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < count; i++) a[(size_t)j * count + i] = a2a_value(r, j, i);
    if (shs_all_to_all(a, b, count, SHS_I32, comm) != SHS_OK) {
        fprintf(stderr, "rank %d: all_to_all: %s\n", r, shs_last_error());
        bad = 1;
    }
    for (int j = 0; j < n && !bad; j++)
        for (size_t i = 0; i < count && !bad; i++)
            if (b[(size_t)j * count + i] != a2a_value(j, r, i)) {
                fprintf(stderr, "rank %d: all_to_all block %d element %zu differs\n", r, j, i);
                bad = 1;
            }
    free(a);
    free(b);
    for (int j = 0; j < n; j++) {
        stot += sc[j] = split_count(r, j);
        rtot += rc[j] = split_count(j, r);
    }
    a = calloc(stot + 1, 4);
    b = calloc(rtot + 1, 4);
    size_t off = 0;
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < sc[j]; i++) a[off++] = a2a_value(r, j, i);
    if (shs_all_to_allv(a, sc, b, rc, SHS_I32, comm) != SHS_OK) {
        fprintf(stderr, "rank %d: all_to_allv: %s\n", r, shs_last_error());
        bad = 1;
    }
    off = 0;
    for (int j = 0; j < n && !bad; j++)
        for (size_t i = 0; i < rc[j] && !bad; i++, off++)
            if (b[off] != a2a_value(j, r, i)) {
                fprintf(stderr, "rank %d: all_to_allv from rank %d element %zu differs\n", r, j, i);
                bad = 1;
            }
    free(a);
    free(b);
    return bad;
}

/* Rank 1 sends 4 floats to rank 2, which expects 8: both fail at once with
 * SHS_MISMATCH naming both ends. */
static int check_p2p_mismatch(shs_comm_t *comm) {
    int r = shs_comm_rank(comm);
    if (r != 1 && r != 2) return 0;
    float x[8] = {0};
    double t0 = shs_now_seconds();
    shs_status_t s = r == 1 ? shs_send(x, 4, SHS_F32, 2, comm) : shs_recv(x, 8, SHS_F32, 1, comm);
    const char *want = "comm 'p2p': rank 1's send(count=4, dtype=f32, peer=2) seq 0 and rank 2's recv(count=8, "
                       "dtype=f32, peer=1) seq 0 are one message but their count differs";
    if (s == SHS_MISMATCH && strstr(shs_last_error(), want) && shs_now_seconds() - t0 < 5.0) return 0;
    fprintf(stderr, "rank %d: planted count mismatch: %s after %.3f s: %s (want '%s')\n", r, shs_status_name(s),
            shs_now_seconds() - t0, shs_last_error(), want);
    return 1;
}

/* A job over processes: ranks 1.. form a split whose all-reduce rank 1
 * calls with another count; rank 0 waits on the parent. The split's
 * mismatch fails the job: rank 0 returns SHS_ABORTED with it at once, not
 * after the timeout. */
static int check_job(shs_comm_t *comm) {
    int n = shs_comm_size(comm), r = shs_comm_rank(comm);
    shs_comm_t *rest = NULL;
    if (shs_comm_split(comm, r ? 1 : SHS_SPLIT_NOCOLOR, 0, &rest) != SHS_OK) {
        fprintf(stderr, "rank %d: job split: %s\n", r, shs_last_error());
        return 1;
    }
    float x[2] = {0};
    double t0 = shs_now_seconds();
    shs_status_t s = r ? shs_all_reduce(x, x, r == 1 ? 2 : 1, SHS_F32, SHS_SUM, rest) : shs_barrier(comm);
    double dt = shs_now_seconds() - t0;
    char cause[160];
    snprintf(cause, sizeof cause, "comm 'split(color=1)[1-%d]' seq 0: rank 0 called all_reduce(count=2, dtype=f32, "
             "op=sum) but rank 1 called all_reduce(count=1, dtype=f32, op=sum)", n - 1);
    int ok = s == (r ? SHS_MISMATCH : SHS_ABORTED) && strstr(shs_last_error(), cause) && dt < 5.0 &&
             (r || strstr(shs_last_error(), "the job failed: "));
    if (!ok)
        fprintf(stderr, "rank %d: job failure: %s after %.3f s: %s (want '%s')\n", r, shs_status_name(s), dt,
                shs_last_error(), cause);
    shs_comm_destroy(rest);
    return !ok;
}

/* Rank 1 aborts; everyone else's next call returns SHS_ABORTED with the reason. */
static int check_abort(shs_comm_t *comm) {
    int r = shs_comm_rank(comm);
    if (r == 1) shs_comm_abort(comm, "planted by test_mpi");
    shs_status_t s = shs_barrier(comm);
    if (s == SHS_ABORTED && strstr(shs_last_error(), "aborted by rank 1: planted by test_mpi")) return 0;
    fprintf(stderr, "rank %d: after rank 1's abort, barrier returned %s: %s\n", r, shs_status_name(s),
            shs_last_error());
    return 1;
}

static int worker_main(void) {
    if (shs_mpi_init(NULL, NULL) != SHS_OK) {
        fprintf(stderr, "worker: %s\n", shs_last_error());
        return 1;
    }
    shs_comm_t *comm = NULL, *victim = NULL, *tags = NULL, *p2p = NULL, *job = NULL;
    if (shs_comm_mpi_create(&comm, TIMEOUT_MS, "world") != SHS_OK ||
        shs_comm_mpi_create(&victim, TIMEOUT_MS, "victim") != SHS_OK ||
        shs_comm_mpi_create(&tags, TIMEOUT_MS, "tags") != SHS_OK ||
        shs_comm_mpi_create(&p2p, TIMEOUT_MS, "p2p") != SHS_OK ||
        shs_comm_mpi_create(&job, TIMEOUT_MS, "job") != SHS_OK) {
        fprintf(stderr, "worker: %s\n", shs_last_error());
        shs_mpi_abort(1);
    }
    int ncases = 0, bad = run_cases(comm, &ncases);
    bad |= check_split(comm);
    bad |= check_abort(victim);
    bad |= check_tags(tags);
    bad |= check_p2p(comm);
    bad |= check_p2p_mismatch(p2p);
    bad |= check_job(job);
    int32_t any = bad;
    if (shs_all_reduce(&any, &any, 1, SHS_I32, SHS_MAX, comm) != SHS_OK) {
        fprintf(stderr, "worker: %s\n", shs_last_error());
        shs_mpi_abort(1);
    }
    if (any) shs_mpi_abort(1);
    if (shs_comm_rank(comm) == 0)
        printf("mpi worker: %d cases at N=%d bit-identical to the thread backend on every rank; split, tags, abort, "
               "sendrecv, all_to_all(v), a p2p mismatch and a job's failure ok\n", ncases, shs_comm_size(comm));
    fflush(stdout);
    shs_comm_destroy(comm);
    shs_comm_destroy(victim);
    shs_comm_destroy(tags);
    shs_comm_destroy(p2p);
    shs_comm_destroy(job);
    shs_mpi_finalize();
    return 0;
}

/* ---- the tests (run mpirun as a child process) --------------------------------- */

static test_proc_t proc;

/* mpirun [root flags] --oversubscribe --bind-to none -np N argv... */
static const test_proc_t *run_mpi(int np, double timeout_s, char *const *args) {
    char *argv[64], npbuf[16];
    int n = 0;
    snprintf(npbuf, sizeof npbuf, "%d", np);
    argv[n++] = (char *)SHS_MPIRUN;
    if (geteuid() == 0) argv[n++] = "--allow-run-as-root";
    argv[n++] = "--oversubscribe";
    argv[n++] = "--bind-to";
    argv[n++] = "none";
    argv[n++] = "-np";
    argv[n++] = npbuf;
    for (int k = 0; args[k] && n < 63; k++) argv[n++] = args[k];
    argv[n] = NULL;
#if defined(__SANITIZE_ADDRESS__)
    /* OpenMPI's plugins leak at exit (LeakSanitizer names no frame of ours,
     * the plugins are unloaded by then): leak checks off in the MPI
     * processes only; address errors are still caught there */
    const char *old = getenv("ASAN_OPTIONS");
    char *saved = old ? strdup(old) : NULL, opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    test_run_process(argv, timeout_s, &proc);
    if (saved) setenv("ASAN_OPTIONS", saved, 1);
    else unsetenv("ASAN_OPTIONS");
    free(saved);
#else
    test_run_process(argv, timeout_s, &proc);
#endif
    if (proc.timed_out) fail_msg("mpirun did not finish within %.0f s (a hang); stderr:\n%s", timeout_s, proc.err);
    return &proc;
}

static void collectives_at(int np) {
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(len > 0);
    exe[len] = 0;
    setenv("SHS_TEST_MPI_WORKER", "1", 1);
    char *args[] = {exe, NULL};
    const test_proc_t *p = run_mpi(np, 120, args);
    unsetenv("SHS_TEST_MPI_WORKER");
    if (p->exit_code != 0 || !strstr(p->out, "bit-identical to the thread backend"))
        fail_msg("worker at N=%d: exit %d\nstdout:\n%s\nstderr:\n%s", np, p->exit_code, p->out, p->err);
    printf("  %s", p->out);
}

static void test_collectives_n3(void **state) { (void)state; collectives_at(3); }
static void test_collectives_n4(void **state) { (void)state; collectives_at(4); }

/* The "loss bits 0x........" of each step line, in order. */
static int loss_bits(const char *out, uint32_t *bits, int max) {
    int n = 0;
    for (const char *p = strstr(out, "loss bits 0x"); p && n < max; p = strstr(p + 1, "loss bits 0x"))
        bits[n++] = (uint32_t)strtoul(p + 12, NULL, 16);
    return n;
}

static void test_train_matches_threads(void **state) {
    (void)state;
    char data[1024], steps[16];
    snprintf(data, sizeof data, "%s/data/tinyshakespeare.txt", test_shared_dir());
    snprintf(steps, sizeof steps, "%d", STEPS);
    char *thread_argv[] = {BIN, "train", "--world", "4", "--strategy", "zero3", "--data", data, "--steps", steps,
                           "--loss-bits", NULL};
    test_run_process(thread_argv, 120, &proc);
    if (proc.timed_out || proc.exit_code != 0) fail_msg("thread run: exit %d\n%s", proc.exit_code, proc.err);
    uint32_t want[STEPS + 1], got[STEPS + 1];
    assert_int_equal(loss_bits(proc.out, want, STEPS + 1), STEPS);

    char *mpi_args[] = {BIN, "train", "--backend", "mpi", "--strategy", "zero3", "--data", data, "--check", "ddp",
                        "--steps", steps, "--loss-bits", NULL};
    const test_proc_t *p = run_mpi(4, 120, mpi_args);
    if (p->exit_code != 0) fail_msg("mpi run: exit %d\nstdout:\n%s\nstderr:\n%s", p->exit_code, p->out, p->err);
    assert_int_equal(loss_bits(p->out, got, STEPS + 1), STEPS);
    for (int s = 0; s < STEPS; s++)
        if (got[s] != want[s])
            fail_msg("step %d: mpi loss bits 0x%08x != thread 0x%08x", s + 1, (unsigned)got[s], (unsigned)want[s]);
    assert_non_null(strstr(p->out, "4 ranks (cpu, mpi: one process per rank)"));
    assert_non_null(strstr(p->out, "check: zero3 matched DDP bit for bit at all"));
}

static void test_mismatch_fails_fast(void **state) {
    (void)state;
    char *args[] = {BIN, "train", "--backend", "mpi", "--steps", "1", NULL};
    setenv("SHS_TEST_FAULT", "mismatch:3", 1);
    const test_proc_t *p = run_mpi(4, 60, args);
    unsetenv("SHS_TEST_FAULT");
    const char *want = "rank 0 called all_reduce(count=1, dtype=f32, op=sum) but rank 3 called "
                       "all_reduce(count=2, dtype=f32, op=sum)";
    if (p->exit_code == 0 || !strstr(p->err, want))
        fail_msg("expected a non-zero exit and '%s'; got exit %d, stderr:\n%s", want, p->exit_code, p->err);
}

static void test_missing_rank_times_out(void **state) {
    (void)state;
    char *args[] = {BIN, "train", "--backend", "mpi", "--steps", "1", "--timeout", "2", NULL};
    setenv("SHS_TEST_FAULT", "stall:2", 1);
    const test_proc_t *p = run_mpi(4, 60, args);
    unsetenv("SHS_TEST_FAULT");
    const char *want = "timed out after 2.000 s waiting for ranks [2]";
    if (p->exit_code == 0 || !strstr(p->err, want))
        fail_msg("expected a non-zero exit and '%s'; got exit %d, stderr:\n%s", want, p->exit_code, p->err);
}

static void test_world_must_match_job(void **state) {
    (void)state;
    char *args[] = {BIN, "train", "--backend", "mpi", "--world", "3", "--steps", "1", NULL};
    const test_proc_t *p = run_mpi(2, 60, args);
    if (p->exit_code == 0 || !strstr(p->err, "--world 3 differs from the MPI job's 2 processes"))
        fail_msg("got exit %d, stderr:\n%s", p->exit_code, p->err);
}

/* Options checked against the job's size, not --world's default (4), and
 * rank 0's memory timeline written by rank 0's process only. */
static void test_options_use_job_size(void **state) {
    (void)state;
    char svg[] = "/tmp/shs_mpi_timeline_XXXXXX.svg";
    int fd = mkstemps(svg, 4);
    assert_true(fd >= 0);
    close(fd);
    char *ok[] = {BIN, "train", "--backend", "mpi", "--strategy", "hybrid_shard", "--shard-group-size", "3",
                  "--steps", "1", "--layers", "1", "--channels", "32", "--context", "16", "--micro-batch", "1",
                  "--memory-timeline", svg, NULL};
    const test_proc_t *p = run_mpi(3, 60, ok);
    if (p->exit_code != 0 || !strstr(p->out, "wrote ")) fail_msg("got exit %d, stderr:\n%s", p->exit_code, p->err);
    test_assert_file_starts(svg, "<svg");
    unlink(svg);
    char *bad[] = {BIN, "train", "--backend", "mpi", "--strategy", "hybrid_shard", "--shard-group-size", "4",
                   "--steps", "1", NULL};
    p = run_mpi(2, 60, bad);
    if (p->exit_code != 2 || !strstr(p->err, "--shard-group-size 4 must divide the world size 2"))
        fail_msg("expected exit 2 naming the job's size; got exit %d, stderr:\n%s", p->exit_code, p->err);
}

/* Progress lines come from rank 0's process alone, as stdout does (every
 * process printed them, once per rank, for the same job). With a 1 ms
 * threshold every phase speaks; each line must then appear once. --metrics
 * is written by rank 0's process: one line per step. */
static void test_progress_and_metrics_from_rank0(void **state) {
    (void)state;
    char jsonl[] = "/tmp/shs_mpi_metrics_XXXXXX.jsonl";
    int fd = mkstemps(jsonl, 6);
    assert_true(fd >= 0);
    close(fd);
    char *args[] = {BIN, "train", "--backend", "mpi", "--steps", "2", "--layers", "1", "--channels", "32", "--context",
                    "16", "--progress", "0.001", "--metrics", jsonl, NULL};
    const test_proc_t *p = run_mpi(2, 60, args);
    if (p->exit_code != 0) fail_msg("exit %d, stderr:\n%s", p->exit_code, p->err);
    const char *phases[] = {"running step 1/2 on ", "running step 2/2 on "};
    for (int k = 0; k < 2; k++) {
        int n = 0;
        for (const char *l = p->err; (l = strstr(l, phases[k])) != NULL; l++)
            if (!strncmp(l + strcspn(l, "("), "(0.001 s so far)", 16)) n++;
        if (n != 1) fail_msg("'%s... (0.001 s so far)' %d times, once expected; stderr:\n%s", phases[k], n, p->err);
    }
    char text[4096];
    FILE *f = fopen(jsonl, "r");
    assert_non_null(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    unlink(jsonl);
    const char *second = strchr(text, '\n');
    if (strncmp(text, "{\"step\": 1,", 11) || !second || strncmp(second + 1, "{\"step\": 2,", 11) ||
        strchr(second + 1, '\n')[1] != 0)
        fail_msg("expected one line per step:\n%s", text);
}

/* One process per GPU over NCCL, bootstrapped over MPI: on a machine
 * without a GPU (or a build without CUDA) every process stops with the
 * reason and the job exits 1, nobody waits for the others. (Where GPUs
 * exist, tests/gpu runs the real thing.) */
static void test_mpi_nccl_without_gpu(void **state) {
    (void)state;
    int gpus = 0;
    if (shs_cuda_device_count(&gpus) == SHS_OK && gpus > 0) skip();
    char *args[] = {BIN, "train", "--backend", "mpi-nccl", "--steps", "1", NULL};
    const test_proc_t *p = run_mpi(2, 60, args);
    if (p->exit_code != 1 || !strstr(p->err, "--backend mpi-nccl") ||
        (!strstr(p->err, "no CUDA device") && !strstr(p->err, "built without the CUDA backend")))
        fail_msg("expected exit 1 naming --backend mpi-nccl and the missing GPU; got exit %d, stderr:\n%s",
                 p->exit_code, p->err);
}

int main(void) {
    if (getenv("SHS_TEST_MPI_WORKER")) return worker_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_n3),
        cmocka_unit_test(test_collectives_n4),
        cmocka_unit_test(test_train_matches_threads),
        cmocka_unit_test(test_mismatch_fails_fast),
        cmocka_unit_test(test_missing_rank_times_out),
        cmocka_unit_test(test_world_must_match_job),
        cmocka_unit_test(test_mpi_nccl_without_gpu),
        cmocka_unit_test(test_options_use_job_size),
        cmocka_unit_test(test_progress_and_metrics_from_rank0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
