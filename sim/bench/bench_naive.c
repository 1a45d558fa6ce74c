/* bench_naive.c - the yardstick collectives of `shardsim bench`: the "naive
 * thread design" the thread communicator is measured against, run side by side with the real
 * communicator so that both see the same machine at the same moment.
 *
 * What it is: N plain pthreads with their own buffers and a pthread_barrier_t
 * between phases, no staging, no streaming stores, no spinning:
 *   all_reduce      barrier; rank r sums slice r of every sendbuf (rank
 *                   order) into slice r of its recvbuf; barrier; rank r
 *                   copies every other slice j from rank j's recvbuf; barrier.
 *   all_gather      barrier; rank r copies every rank's sendbuf into its
 *                   recvbuf; barrier.
 *   reduce_scatter  barrier; rank r sums block r of every sendbuf; barrier.
 *   broadcast       barrier; every rank copies rank 0's buffer; barrier.
 * f32 and sum only, out of place. The plain loop is what a first thread
 * implementation writes; it gives the same sums as the communicator.
 * What it is not: part of the product. Nothing but bench uses it.
 */
#include "bench/bench.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "shardsim/clock.h"

typedef struct {
    shs_coll_op_t op;
    int n;
    size_t count;            /* elements per rank's full buffer (all_reduce, broadcast, rs send, ag recv) */
    float **send, **recv;    /* (n) */
    float **srcs;            /* (n, n) scratch: rank r's source pointers at srcs + r*n */
    pthread_barrier_t bar;
    int iters;
    pthread_mutex_t mu;      /* start gate: threads run once go is 1, leave if it is -1 */
    pthread_cond_t cv;
    int go;
} naive_t;

typedef struct {
    naive_t *nv;
    int rank;
} naive_rank_t;


static void sum_slice(float *dst, float *const *srcs, int n, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; i++) {
        float acc = srcs[0][i];
        for (int j = 1; j < n; j++) acc += srcs[j][i];
        dst[i] = acc;
    }
}

static void naive_call(naive_t *nv, int r) {
    int n = nv->n;
    size_t count = nv->count, block = count / (size_t)n;
    pthread_barrier_wait(&nv->bar);
    switch (nv->op) {
    case SHS_OP_ALL_REDUCE:
        sum_slice(nv->recv[r], nv->send, n, shs__chunk_start(count, n, r), shs__chunk_start(count, n, r + 1));
        pthread_barrier_wait(&nv->bar);
        for (int j = 0; j < n; j++) {
            if (j == r) continue;
            size_t lo = shs__chunk_start(count, n, j);
            memcpy(nv->recv[r] + lo, nv->recv[j] + lo, (shs__chunk_start(count, n, j + 1) - lo) * sizeof(float));
        }
        break;
    case SHS_OP_ALL_GATHER:
        for (int j = 0; j < n; j++) memcpy(nv->recv[r] + (size_t)j * block, nv->send[j], block * sizeof(float));
        break;
    case SHS_OP_REDUCE_SCATTER: {
        float **srcs = nv->srcs + (size_t)r * (size_t)n;
        for (int j = 0; j < n; j++) srcs[j] = nv->send[j] + (size_t)r * block;
        sum_slice(nv->recv[r], srcs, n, 0, block);
        break;
    }
    default: /* broadcast from rank 0 */
        if (r != 0) memcpy(nv->recv[r], nv->send[0], count * sizeof(float));
        else memcpy(nv->recv[0], nv->send[0], count * sizeof(float));
        break;
    }
    pthread_barrier_wait(&nv->bar);
}

static void *naive_main(void *p) {
    naive_rank_t *me = p;
    naive_t *nv = me->nv;
    pthread_mutex_lock(&nv->mu);
    while (nv->go == 0) pthread_cond_wait(&nv->cv, &nv->mu);
    int go = nv->go;
    pthread_mutex_unlock(&nv->mu);
    if (go < 0) return NULL;
    for (int i = 0; i < me->nv->iters; i++) naive_call(me->nv, me->rank);
    return NULL;
}

static void open_gate(naive_t *nv, int go) {
    pthread_mutex_lock(&nv->mu);
    nv->go = go;
    pthread_cond_broadcast(&nv->cv);
    pthread_mutex_unlock(&nv->mu);
}

/* Run `iters` calls on n threads: seconds, or -1 if the threads could not
 * all start (those that did are sent home before any barrier). */
static double naive_run(naive_t *nv, int iters) {
    pthread_t *tid = malloc((size_t)nv->n * sizeof *tid);
    naive_rank_t *ranks = malloc((size_t)nv->n * sizeof *ranks);
    if (!tid || !ranks) {
        free(tid);
        free(ranks);
        return -1;
    }
    nv->iters = iters;
    nv->go = 0;
    int started = 0;
    for (; started < nv->n; started++) {
        ranks[started] = (naive_rank_t){nv, started};
        if (pthread_create(&tid[started], NULL, naive_main, &ranks[started]) != 0) break;
    }
    double t0 = shs_now_seconds();
    open_gate(nv, started == nv->n ? 1 : -1);
    for (int j = 0; j < started; j++) pthread_join(tid[j], NULL);
    double dt = shs_now_seconds() - t0;
    free(tid);
    free(ranks);
    return started == nv->n ? dt : -1;
}

double shs_bench_naive_us(shs_coll_op_t op, int nranks, size_t bytes, double target_s) {
    if (nranks < 1) return -1;
    int n = nranks;
    size_t total = bytes / sizeof(float) / (size_t)n * (size_t)n;
    size_t send_elems = op == SHS_OP_ALL_GATHER ? total / (size_t)n : total;
    size_t recv_elems = op == SHS_OP_REDUCE_SCATTER ? total / (size_t)n : total;
    naive_t nv = {.op = op, .n = n, .count = total};
    nv.send = calloc((size_t)n, sizeof *nv.send);
    nv.recv = calloc((size_t)n, sizeof *nv.recv);
    nv.srcs = calloc((size_t)n * (size_t)n, sizeof *nv.srcs);
    double us = -1;
    int ok = nv.send && nv.recv && nv.srcs;
    for (int j = 0; ok && j < n; j++) {
        nv.send[j] = calloc(send_elems ? send_elems : 1, sizeof(float));
        nv.recv[j] = calloc(recv_elems ? recv_elems : 1, sizeof(float));
        ok = nv.send[j] && nv.recv[j];
        /* Write every page: a calloc'd buffer that is only read maps the
         * kernel's one zero page, which would make the reads cache hits. */
        if (ok) {
            memset(nv.send[j], 1, (send_elems ? send_elems : 1) * sizeof(float));
            memset(nv.recv[j], 1, (recv_elems ? recv_elems : 1) * sizeof(float));
        }
    }
    if (ok && pthread_barrier_init(&nv.bar, NULL, (unsigned)n) == 0) {
        pthread_mutex_init(&nv.mu, NULL);
        pthread_cond_init(&nv.cv, NULL);
        double two = naive_run(&nv, 2); /* warm-up, sizes the run */
        if (two >= 0) {
            int iters = two > 0 ? (int)(target_s / (two / 2)) : 1000;
            iters = iters < 3 ? 3 : iters > 10000 ? 10000 : iters;
            double t = naive_run(&nv, iters);
            if (t >= 0) us = t / iters * 1e6;
        }
        pthread_cond_destroy(&nv.cv);
        pthread_mutex_destroy(&nv.mu);
        pthread_barrier_destroy(&nv.bar);
    }
    for (int j = 0; j < n && nv.send && nv.recv; j++) {
        free(nv.send[j]);
        free(nv.recv[j]);
    }
    free(nv.send);
    free(nv.recv);
    free(nv.srcs);
    return us;
}
