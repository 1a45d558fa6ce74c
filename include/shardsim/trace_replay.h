/* trace_replay.h - run a trace's per-rank sequences on the thread backend
 * with real buffers.
 *
 * What it is: one thread per rank; one communicator per trace
 * communicator (comm.h, so every call is also cross-checked by the
 * backend); each collective the backend has (all_gather, reduce_scatter,
 * all_reduce, broadcast, reduce, barrier) runs with buffers of the
 * record's size, capped at max_bytes for the largest buffer of the call
 * (the element count is scaled down, never to 0). send and recv run as
 * shs_send and shs_recv with buffers of the record's size (the peer mapped
 * to its rank in the communicator), a rank's consecutive sends and
 * receives on one communicator as one group (as ncclGroupStart/End wraps
 * them), so a pipeline stage's send and receive do not wait on each other;
 * a send blocks until its receive comes, so a trace that runs only with
 * buffered sends (trace_check.h's execution) fails here with the
 * communicator's cycle error. all_to_all(v), gather and scatter run as a
 * barrier on their communicator (the ordering, not the data); wait is not
 * run. Unknown dtypes move bytes (u8). Run only consistent traces
 * (shs_trace_check): an inconsistent one ends in the backend's mismatch or
 * timeout error.
 * Timing: each rank times every call it runs (real buffers or barrier).
 * A capped call's time is also scaled back to the trace's size, linearly:
 * scaled = measured x trace bytes / moved bytes (one rank's part); an
 * uncapped call's scaled time is its measured time. This extrapolation
 * assumes time proportional to bytes (no latency term), so it is an
 * estimate, not a measurement. Bandwidth follows nccl-tests: algbw = bytes
 * / time with bytes the whole buffer (all_gather's output, reduce_scatter's
 * input, the buffer of the others), busbw = algbw x 2(n-1)/n (all_reduce),
 * (n-1)/n (all_gather, reduce_scatter, all_to_all), 1 (others), from the moved bytes
 * and the measured time.
 * What it is not: a timing model of a real network (trace_net.h).
 */
#ifndef SHARDSIM_TRACE_REPLAY_H
#define SHARDSIM_TRACE_REPLAY_H

#include "shardsim/trace.h"

typedef struct {
    uint64_t max_bytes;    /* cap on one call's largest buffer per rank (bytes); 0: none */
    uint64_t mem_limit;    /* refuse when all ranks' buffers together exceed this (bytes); 0: 4 GiB */
    int timeout_ms;        /* collective timeout; <= 0 default */
} shs_replay_opts_t;

typedef struct {
    uint64_t calls[SHS_NUM_OPS];          /* records replayed, all ranks */
    uint64_t trace_bytes[SHS_NUM_OPS];    /* their sizes in the trace (per-rank scope, summed) */
    uint64_t moved_bytes[SHS_NUM_OPS];    /* per-rank bytes actually passed to the backend, summed */
    uint64_t sync_only[SHS_NUM_OPS];      /* run as a barrier */
    uint64_t not_run[SHS_NUM_OPS];        /* wait */
    /* timing, summed over ranks (rank-seconds); per rank = divide by ranks[k] */
    uint64_t ranks[SHS_NUM_OPS];          /* ranks that timed at least one call of the op */
    double call_seconds[SHS_NUM_OPS];     /* measured time inside the op's calls */
    double scaled_seconds[SHS_NUM_OPS];   /* the same with capped calls scaled to the trace's bytes */
    double alg_bytes[SHS_NUM_OPS];        /* nccl-tests bytes moved (whole buffer), summed like the times */
    double bus_bytes[SHS_NUM_OPS];        /* alg_bytes x each call's busbw factor */
    int timed_ranks;                            /* ranks that timed any call */
    uint64_t capped;                            /* calls whose size was capped */
    uint64_t buffer_bytes;                      /* buffers allocated, all ranks */
    double seconds;                             /* wall time of the replay */
} shs_replay_stats_t;

/* Replay `t`. Errors: SHS_INVALID_ARG (world beyond 1024 threads, a rank
 * that was not traced (shs_trace_rank_traced), buffers over mem_limit: the
 * message suggests --max-bytes), SHS_HOST_OOM, and any
 * collective error (SHS_MISMATCH, SHS_TIMEOUT, ...) with its rank's text. */
shs_status_t shs_trace_replay(const shs_trace_t *t, const shs_replay_opts_t *opts, shs_replay_stats_t *stats);

#endif
