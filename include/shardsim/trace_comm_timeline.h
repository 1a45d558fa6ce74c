/* trace_comm_timeline.h - what a trace's calls cost per rank under a network
 * model once ranks wait for each other: total and exposed communication.
 *
 * The model (the trace's calls run as they block, by the same execution
 * that trace_check.h uses to find deadlocks, src/trace/replay/trace_exec.h):
 *   - each rank runs its records in order with a clock that starts at 0;
 *   - compute between two calls is the gap the trace recorded between them
 *     (t_start of a call minus t_end of the rank's previous call, when both
 *     are known and the gap is positive; 0 otherwise, and 0 before the
 *     first call), kept as recorded: the what-if changes the network only;
 *   - a collective starts when the last member of its communicator arrives
 *     (every member's clock after its compute gap) and ends, on every
 *     member, the call's alpha-beta time later (trace_net.h,
 *     shs_net_rec_time: the same time replay --network prints; an uneven
 *     all_to_allv lasts as long as its busiest member's part);
 *   - a send is eager: it takes its alpha-beta time on the sender; the
 *     matching recv (the k-th send from a to b with tag t meets the k-th
 *     recv on b from a with tag t, MPI's non-overtaking order) ends when
 *     both it has been reached and the send has ended;
 *   - wait records take no time (their collective was already counted).
 * Per rank: comm = the sum of its calls' alpha-beta times; wait = time
 * blocked for peers; compute = the sum of recorded gaps; wall = the final
 * clock; exposed = wall - compute, the communication the rank's compute did
 * not hide (calls here block, as in the trace: nothing overlaps, so exposed
 * = comm + wait).
 * What it is not: a model of asynchronous overlap (no trace format here
 * records which stream a call ran on), nor of compute for formats that
 * carry none (then compute is 0 and exposed = wall).
 */
#ifndef SHARDSIM_TRACE_COMM_TIMELINE_H
#define SHARDSIM_TRACE_COMM_TIMELINE_H

#include <stddef.h>

#include "shardsim/trace.h"
#include "shardsim/trace_net.h"

typedef struct {
    double comm_s;      /* sum of the rank's calls' alpha-beta times */
    double wait_s;      /* blocked for peers (collective stragglers, recv before its send) */
    double compute_s;   /* recorded gaps between the rank's calls */
    double wall_s;      /* the rank's clock after its last record */
    double exposed_s;   /* wall - compute */
    size_t done;        /* records replayed (n when complete) */
} shs_rank_comm_timeline_t;

typedef struct {
    int world;
    shs_rank_comm_timeline_t *ranks;   /* world entries */
    int complete;                 /* 1: every record ran; 0: some rank stays blocked (the trace deadlocks) */
    int timed;                    /* 1: some compute gap came from recorded times */
    double wall_s;                /* the slowest rank's wall */
} shs_trace_comm_timeline_t;

/* Replay `t` under `net` with `algo` as above into *out (free with
 * shs_trace_comm_timeline_free). The trace should pass shs_trace_check first; a
 * trace that deadlocks returns SHS_OK with complete = 0 and each rank's
 * figures up to where it blocked. Errors: SHS_HOST_OOM. */
shs_status_t shs_trace_comm_timeline(const shs_trace_t *t, const shs_net_t *net, shs_net_algo_t algo,
                                shs_trace_comm_timeline_t *out);
void shs_trace_comm_timeline_free(shs_trace_comm_timeline_t *tl);

#endif
