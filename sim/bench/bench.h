/* bench.h - measurements behind `shardsim bench`: collective bandwidth in
 * the nccl-tests conventions, memcpy bandwidth for the same working set, the
 * CPU backend's matmul rate, and the machine's fp32 peak estimate.
 *
 * Conventions (nccl-tests, doc/PERFORMANCE.md):
 *   size     all_reduce / broadcast: the buffer (count * dtype size);
 *            all_gather: the receive buffer (N * sendcount * size);
 *            reduce_scatter: the send buffer (N * recvcount * size);
 *            sendrecv (op SHS_OP_SEND: each rank sends to (r+1) mod N and
 *            receives from (r-1+N) mod N in one group, nccl-tests'
 *            sendrecv.cu): one rank's message
 *   algbw    size / time
 *   busbw    algbw * 2(N-1)/N (all_reduce), * (N-1)/N (all_gather,
 *            reduce_scatter), * 1 (broadcast, sendrecv): shs_net_busbw_factor
 *            (net.h)
 * Memory traffic: the bytes any algorithm must move through memory
 * (shs_bench_min_traffic). memcpy moves 2 bytes (read + write) per byte
 * copied; both are counted the same way, so their ratio says how close a
 * collective comes to the machine's copy bandwidth.
 * What it is not: a timed test. Numbers depend on the machine and its load.
 */
#ifndef SHARDSIM_BENCH_H
#define SHARDSIM_BENCH_H

#include <stddef.h>

#include "shardsim/comm.h"
#include "shardsim/world.h"

typedef struct {
    shs_coll_op_t op;
    int nranks;
    size_t bytes;          /* nccl-tests size */
    size_t count;          /* elements of that size */
    shs_dtype_t dtype;
    shs_redop_t redop;
    int in_place;
    int iters;
    double time_us;        /* mean per call */
    double algbw, busbw;   /* GB/s (1e9 bytes) */
    double traffic;        /* minimal memory traffic per call, bytes */
} shs_bench_coll_t;

/* Minimal bytes read + written per call over all ranks, every input read
 * once and every output written once (S = nccl-tests size):
 * all_reduce N S + N S; all_gather S + N S; reduce_scatter N S + S;
 * broadcast S + N S; sendrecv N S + N S. */
double shs_bench_min_traffic(shs_coll_op_t op, int nranks, size_t bytes);

/* Time `op` (all_reduce, all_gather, reduce_scatter, broadcast, or
 * SHS_OP_SEND for sendrecv; f32, sum, root 0) on world `w` for a nccl-tests
 * size of `bytes` (rounded down to a multiple of 4 N; sendrecv: of 4).
 * Runs warm-up calls, then enough calls for about `target_s` seconds (at
 * least 3). Errors: collective errors, OOM, SHS_INVALID_ARG (sendrecv in
 * place). */
shs_status_t shs_bench_collective(shs_world_t *w, shs_coll_op_t op, size_t bytes, int in_place, double target_s,
                                  shs_bench_coll_t *out);

/* memcpy bandwidth in bytes moved per second (read + write) over a working
 * set of `working_set` bytes (half source, half destination), copied by
 * `threads` threads in parallel: the best of libc memcpy and a copy with
 * streaming (non-temporal) stores, two repetitions each. */
double shs_bench_memcpy_bw(size_t working_set, int threads);

/* Mean microseconds per call of the "naive thread design" (the thread
 * communicator's yardstick, bench_naive.c: plain pthreads, pthread_barrier_t between
 * phases, each rank reduces its slice then copies) for `op` (all_reduce,
 * all_gather, reduce_scatter or broadcast; f32 sum, root 0, out of place) on
 * `nranks` threads and a nccl-tests size of `bytes`, timed like
 * shs_bench_collective. Returns -1 if its threads or buffers could not be had. */
double shs_bench_naive_us(shs_coll_op_t op, int nranks, size_t bytes, double target_s);

/* GFLOP/s (2 BT C OC flops per call) of shs_matmul_forward on a CPU device
 * with `threads` kernel threads. */
double shs_bench_matmul_gflops(int BT, int C, int OC, int threads);

typedef struct {
    int cores;             /* online CPUs */
    double ghz;            /* max frequency if the kernel reports it, else current */
    int vector_floats;     /* f32 lanes of the widest vector ISA the CPU has */
    int fma;               /* 1 if FMA is available */
    int fma_units;         /* assumed vector FMA (or add+mul) pipes per core: 2 */
    double peak_gflops;    /* cores * ghz * vector_floats * (fma ? 2 : 1) * fma_units */
    char isa[16];          /* "avx512f", "avx2", "avx", "sse2" */
} shs_cpu_peak_t;

/* Estimate the fp32 peak from /proc/cpuinfo and cpufreq (Linux x86);
 * fields are best effort elsewhere. */
void shs_bench_cpu_peak(shs_cpu_peak_t *out);
/* The fp32 peak in GFLOP/s: cores * ghz * vector_floats * (fma ? 2 : 1) *
 * fma_units (an FMA counts as two flops). */
double shs_bench_peak_gflops(int cores, double ghz, int vector_floats, int fma, int fma_units);

#endif
