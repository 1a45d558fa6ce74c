/* trace_exec.h - internal: run a trace's per-rank sequences as their calls
 * block, telling hooks what ran. Shared by the deadlock analysis
 * (trace_check.c) and the timing of exposed communication
 * (trace_comm_timeline.c).
 *
 * Semantics: every rank runs its records in order; a wait runs at once; a
 * send is eager (buffered); a recv blocks until a send on its channel
 * (communicator, source, dest, tag) is pending, and takes the oldest (MPI's
 * non-overtaking order: the k-th send pairs with the k-th recv, comm.h's
 * pairing rule);
 * a collective blocks until every member of its communicator has reached a
 * record of the same sequence number there, then runs for all of them (a
 * member that was not traced, shs_trace_rank_traced, is not waited for and
 * not passed to the hook). The
 * run ends when no rank can move: ranks not at their end are blocked for
 * ever (the trace deadlocks).
 * What it is not: a check of what the calls carry (trace_check.c) or of
 * their cost (src/net/net_alpha_beta.c).
 */
#ifndef SHARDSIM_TRACE_EXEC_H
#define SHARDSIM_TRACE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/trace.h"

typedef struct {
    void *ctx;
    /* a wait or a send: record idx of rank runs */
    void (*call)(void *ctx, int rank, size_t idx);
    /* a recv (record idx of rank) takes the send at record send_idx of rank src */
    void (*recv)(void *ctx, int rank, size_t idx, int src, size_t send_idx);
    /* a collective on comm runs: member k (global rank ranks[k]) at its record idxs[k] */
    void (*collective)(void *ctx, int comm, const int *ranks, const size_t *idxs, int n);
} shs__exec_hooks_t;   /* any hook may be NULL */

typedef struct shs__trace_exec shs__trace_exec_t;

/* Run `t` to the end or until no rank can move, calling the hooks (h may be
 * NULL). *out keeps where each rank stopped; free it with
 * shs__trace_exec_free. Errors: SHS_HOST_OOM. */
shs_status_t shs__trace_exec_run(const shs_trace_t *t, const shs__exec_hooks_t *h, shs__trace_exec_t **out);
void shs__trace_exec_free(shs__trace_exec_t *e);

/* The next record rank would run (its record count when it finished). */
size_t shs__trace_exec_pos(const shs__trace_exec_t *e, int rank);
/* The sequence number member `local` of comm waits at, or -1. */
int64_t shs__trace_exec_waiting(const shs__trace_exec_t *e, int comm, int local);
/* Each channel (comm, src, dst, tag) with sends never received: fn(ctx,
 * comm, src, dst, tag, how many). */
void shs__trace_exec_unreceived(const shs__trace_exec_t *e,
                                void (*fn)(void *ctx, int comm, int src, int dst, int tag, uint64_t n), void *ctx);

#endif
