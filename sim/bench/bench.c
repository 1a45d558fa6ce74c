/* bench.c - collective, memcpy and matmul measurements (bench.h). */
#include "bench/bench.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardsim/device.h"
#include "shardsim/clock.h"
#include "shardsim/net.h"
#include "comm/comm_impl.h"

double shs_bench_min_traffic(shs_coll_op_t op, int n, size_t bytes) {
    double s = (double)bytes;
    switch (op) {
    case SHS_OP_ALL_REDUCE: return 2.0 * n * s;
    case SHS_OP_REDUCE_SCATTER: return n * s + s;
    case SHS_OP_SEND: return 2.0 * n * s; /* sendrecv: every message read once, written once */
    default: return s + n * s; /* all_gather, broadcast */
    }
}

/* ---- collectives -------------------------------------------------------- */

typedef struct {
    shs_coll_op_t op;
    size_t count;          /* NCCL count argument */
    size_t send_elems, recv_elems;
    int in_place;
    double target_s;
    int iters;             /* set by rank 0 between barriers */
    double elapsed;        /* rank 0: seconds for `iters` calls */
} coll_job_t;

static shs_status_t call_once(const coll_job_t *j, shs_rank_ctx_t *ctx, const float *send, float *recv) {
    switch (j->op) {
    case SHS_OP_ALL_REDUCE: return shs_all_reduce(send, recv, j->count, SHS_F32, SHS_SUM, ctx->comm);
    case SHS_OP_ALL_GATHER: return shs_all_gather(send, recv, j->count, SHS_F32, ctx->comm);
    case SHS_OP_REDUCE_SCATTER: return shs_reduce_scatter(send, recv, j->count, SHS_F32, SHS_SUM, ctx->comm);
    case SHS_OP_BROADCAST: return shs_broadcast(send, recv, j->count, SHS_F32, 0, ctx->comm);
    case SHS_OP_SEND: { /* nccl-tests sendrecv: to the next rank, from the previous, in one group */
        int n = ctx->world_size;
        SHS_CHECK(shs_group_start());
        shs_status_t st = shs_send(send, j->count, SHS_F32, (ctx->rank + 1) % n, ctx->comm);
        if (st == SHS_OK) st = shs_recv(recv, j->count, SHS_F32, (ctx->rank - 1 + n) % n, ctx->comm);
        shs_status_t end = shs_group_end();
        return st != SHS_OK ? st : end;
    }
    default: return shs_set_error(SHS_INVALID_ARG, "bench: unsupported op %s", shs_coll_op_name(j->op));
    }
}

static shs_status_t coll_job(shs_rank_ctx_t *ctx, void *arg) {
    coll_job_t *j = arg;
    float *big = NULL, *other = NULL, *send, *recv;
    shs_status_t st = SHS_OK;
    size_t big_elems = j->send_elems > j->recv_elems ? j->send_elems : j->recv_elems;
    SHS_CHECK_GOTO(shs_device_alloc(ctx->dev, (void **)&big, big_elems * sizeof(float), SHS_MEM_COMM, "bench"), st, out);
    SHS_CHECK_GOTO(shs_memset(ctx->dev, big, 0, big_elems * sizeof(float)), st, out);
    if (j->in_place) {
        /* NCCL's in-place positions: the small buffer inside the big one */
        float *part = big + (size_t)ctx->rank * j->count;
        send = j->op == SHS_OP_ALL_GATHER ? part : big;
        recv = j->op == SHS_OP_REDUCE_SCATTER ? part : big;
    } else {
        size_t small = j->send_elems + j->recv_elems - big_elems;
        SHS_CHECK_GOTO(shs_device_alloc(ctx->dev, (void **)&other, small * sizeof(float), SHS_MEM_COMM, "bench"), st, out);
        SHS_CHECK_GOTO(shs_memset(ctx->dev, other, 0, small * sizeof(float)), st, out);
        int send_is_big = j->send_elems >= j->recv_elems;
        send = send_is_big ? big : other;
        recv = send_is_big ? other : big;
    }
    /* warm-up: two calls, the second timed to size the run */
    SHS_CHECK_GOTO(call_once(j, ctx, send, recv), st, out);
    SHS_CHECK_GOTO(shs_barrier(ctx->comm), st, out);
    double t0 = shs_now_seconds();
    SHS_CHECK_GOTO(call_once(j, ctx, send, recv), st, out);
    SHS_CHECK_GOTO(shs_barrier(ctx->comm), st, out);
    if (ctx->rank == 0) {
        double one = shs_now_seconds() - t0;
        double want = one > 0 ? j->target_s / one : 1000;
        j->iters = want < 3 ? 3 : want > 10000 ? 10000 : (int)want;
    }
    SHS_CHECK_GOTO(shs_barrier(ctx->comm), st, out); /* publishes iters */
    int iters = j->iters;
    t0 = shs_now_seconds();
    for (int i = 0; i < iters; i++) SHS_CHECK_GOTO(call_once(j, ctx, send, recv), st, out);
    SHS_CHECK_GOTO(shs_barrier(ctx->comm), st, out);
    if (ctx->rank == 0) j->elapsed = shs_now_seconds() - t0;
out:
    shs_device_free(ctx->dev, big);
    shs_device_free(ctx->dev, other);
    return st;
}

shs_status_t shs_bench_collective(shs_world_t *w, shs_coll_op_t op, size_t bytes, int in_place, double target_s,
                                  shs_bench_coll_t *out) {
    int n = shs_world_size(w);
    size_t total = bytes / sizeof(float) / (size_t)n * (size_t)n; /* elements, multiple of N */
    coll_job_t j = {.op = op, .in_place = in_place, .target_s = target_s};
    switch (op) {
    case SHS_OP_ALL_GATHER: j.count = total / n; j.send_elems = j.count; j.recv_elems = total; break;
    case SHS_OP_REDUCE_SCATTER: j.count = total / n; j.send_elems = total; j.recv_elems = j.count; break;
    case SHS_OP_ALL_REDUCE:
    case SHS_OP_BROADCAST: j.count = total; j.send_elems = j.recv_elems = total; break;
    case SHS_OP_SEND:
        if (in_place)
            return shs_set_error(SHS_INVALID_ARG, "bench: sendrecv runs out of place (a rank's buffer is read by its "
                                 "receiver while its sender writes it)");
        total = bytes / sizeof(float); /* one message per rank: no multiple of N needed */
        j.count = total;
        j.send_elems = j.recv_elems = total;
        break;
    default: return shs_set_error(SHS_INVALID_ARG, "bench: unsupported op %s", shs_coll_op_name(op));
    }
    SHS_CHECK(shs_world_run(w, coll_job, &j));
    memset(out, 0, sizeof *out);
    out->op = op;
    out->nranks = n;
    out->bytes = total * sizeof(float);
    out->count = total;
    out->dtype = SHS_F32;
    out->redop = SHS_SUM;
    out->in_place = in_place;
    out->iters = j.iters;
    double t = j.elapsed / j.iters;
    out->time_us = t * 1e6;
    out->algbw = t > 0 ? (double)out->bytes / t / 1e9 : 0;
    out->busbw = out->algbw * shs_net_busbw_factor(op, n);
    out->traffic = shs_bench_min_traffic(op, n, out->bytes);
    return SHS_OK;
}

/* ---- memcpy -------------------------------------------------------------- */

typedef struct {
    char *dst;
    const char *src;
    size_t n;
    int reps;
    int stream;            /* streaming (non-temporal) stores instead of memcpy */
    pthread_barrier_t *start;
    double t0, t1;         /* this thread's own start and end */
} copy_part_t;

/* Each thread copies its part `reps` times between one start barrier and
 * the join: no synchronization inside the timed loop. */
static void *copy_worker(void *p) {
    copy_part_t *c = p;
    pthread_barrier_wait(c->start);
    c->t0 = shs_now_seconds();
    void *dst = c->dst;
    for (int r = 0; r < c->reps; r++) {
        if (c->stream) shs__copy_multi(&dst, 1, c->src, c->n, 1);
        else memcpy(c->dst, c->src, c->n);
        __asm__ __volatile__("" ::: "memory"); /* keep every repetition */
    }
    c->t1 = shs_now_seconds();
    return NULL;
}

double shs_bench_memcpy_bw(size_t working_set, int threads) {
    enum { MAX_THREADS = 64 };
    int nt = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    size_t half = working_set / 2;
    if (half < 64 * (size_t)nt) half = 64 * (size_t)nt;
    char *src = malloc(half), *dst = malloc(half);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0;
    }
    memset(src, 1, half);
    memset(dst, 2, half);
    int reps = (int)(((size_t)512 << 20) / half);
    reps = reps < 3 ? 3 : reps > 100000 ? 100000 : reps;
    double best = 0;
    for (int trial = 0; trial < 4; trial++) { /* plain, streaming, plain, streaming */
        pthread_t tid[MAX_THREADS];
        copy_part_t parts[MAX_THREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)nt);
        size_t per = half / (size_t)nt;
        for (int i = 0; i < nt; i++) {
            size_t lo = per * (size_t)i;
            parts[i] = (copy_part_t){.dst = dst + lo, .src = src + lo, .n = i == nt - 1 ? half - lo : per, .reps = reps,
                                  .stream = trial & 1, .start = &start};
            pthread_create(&tid[i], NULL, copy_worker, &parts[i]);
        }
        double t0 = 1e300, t1 = 0;
        for (int i = 0; i < nt; i++) {
            pthread_join(tid[i], NULL);
            t0 = parts[i].t0 < t0 ? parts[i].t0 : t0;
            t1 = parts[i].t1 > t1 ? parts[i].t1 : t1;
        }
        double dt = t1 - t0;
        pthread_barrier_destroy(&start);
        double bw = 2.0 * (double)half * reps / dt;
        if (bw > best) best = bw;
    }
    free(src);
    free(dst);
    return best;
}

/* ---- matmul -------------------------------------------------------------- */

double shs_bench_matmul_gflops(int BT, int C, int OC, int threads) {
    shs_device_t *dev;
    if (shs_device_create_cpu(&dev, 0, SIZE_MAX, threads) != SHS_OK) return 0;
    float *out, *inp, *w, *b;
    size_t ni = (size_t)BT * C, nw = (size_t)OC * C, no = (size_t)BT * OC;
    double gflops = 0;
    if (shs_device_alloc(dev, (void **)&out, no * 4, SHS_MEM_ACTIVATIONS, NULL) == SHS_OK &&
        shs_device_alloc(dev, (void **)&inp, ni * 4, SHS_MEM_ACTIVATIONS, NULL) == SHS_OK &&
        shs_device_alloc(dev, (void **)&w, nw * 4, SHS_MEM_PARAMS, NULL) == SHS_OK &&
        shs_device_alloc(dev, (void **)&b, (size_t)OC * 4, SHS_MEM_PARAMS, NULL) == SHS_OK) {
        shs_memset(dev, inp, 0, ni * 4);
        shs_memset(dev, w, 0, nw * 4);
        shs_memset(dev, b, 0, (size_t)OC * 4);
        double flop = 2.0 * BT * C * OC;
        shs_matmul_forward(dev, out, inp, w, b, BT, C, OC); /* warm-up */
        int reps = (int)(2e9 / flop);
        reps = reps < 3 ? 3 : reps > 1000 ? 1000 : reps;
        for (int trial = 0; trial < 3; trial++) {
            double t0 = shs_now_seconds();
            for (int r = 0; r < reps; r++) shs_matmul_forward(dev, out, inp, w, b, BT, C, OC);
            double g = flop * reps / (shs_now_seconds() - t0) / 1e9;
            if (g > gflops) gflops = g;
        }
    }
    shs_device_destroy(dev);
    return gflops;
}

/* ---- peak ------------------------------------------------------------------ */

void shs_bench_cpu_peak(shs_cpu_peak_t *p) {
    memset(p, 0, sizeof *p);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    p->cores = cores > 0 ? (int)cores : 1;
    p->vector_floats = 4;
    snprintf(p->isa, sizeof p->isa, "sse2");
    p->fma_units = 2;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    double mhz = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu MHz", 7) == 0 && mhz == 0) {
            const char *c = strchr(line, ':');
            if (c) mhz = atof(c + 1);
        } else if (strncmp(line, "flags", 5) == 0 && p->isa[0] == 's') {
            char *save = NULL;
            int avx = 0, avx2 = 0, avx512 = 0;
            for (char *tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
                if (strcmp(tok, "avx") == 0) avx = 1;
                else if (strcmp(tok, "avx2") == 0) avx2 = 1;
                else if (strcmp(tok, "avx512f") == 0) avx512 = 1;
                else if (strcmp(tok, "fma") == 0) p->fma = 1;
            }
            if (avx512) { p->vector_floats = 16; snprintf(p->isa, sizeof p->isa, "avx512f"); }
            else if (avx2) { p->vector_floats = 8; snprintf(p->isa, sizeof p->isa, "avx2"); }
            else if (avx) { p->vector_floats = 8; snprintf(p->isa, sizeof p->isa, "avx"); }
        }
    }
    if (f) fclose(f);
    FILE *fq = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (fq) {
        if (fscanf(fq, "%ld", &khz) != 1) khz = 0;
        fclose(fq);
    }
    p->ghz = khz > 0 ? khz / 1e6 : mhz / 1e3;
    p->peak_gflops = shs_bench_peak_gflops(p->cores, p->ghz, p->vector_floats, p->fma, p->fma_units);
}

double shs_bench_peak_gflops(int cores, double ghz, int vector_floats, int fma, int fma_units) {
    return cores * ghz * vector_floats * (fma ? 2 : 1) * fma_units;
}
