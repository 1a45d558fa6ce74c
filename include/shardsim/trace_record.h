/* trace_record.h - record a run's collectives and point-to-point calls into
 * a trace (trace.h).
 *
 * What it is: a recorder that hooks each rank's communicator
 * (shs_comm_set_recorder) and keeps one record per call in a per-rank
 * buffer, so ranks never contend; shs_trace_recorder_finish() then builds
 * the trace. Times are seconds since the recorder was created; bytes are
 * each rank's part (count x dtype size, scope "rank"); a send or recv names
 * its peer as a global rank, tag 0, and its sequence number on its (comm,
 * peer) channel (comm.h POINT-TO-POINT); the marker is the
 * communicator's marker at the time of the call (shs_comm_set_marker), or,
 * when it has none, that of the communicator it was split from.
 *
 * Communicators split from a recorded one (shs_comm_split after the
 * attach: hybrid sharding's shard and replica groups) are recorded too, each
 * as its own trace communicator named "<parent>/<color>@<seq>" (seq: the
 * split's sequence number on the parent, since two splits of one parent can
 * both give color 0), with its members' global ranks. The split itself is
 * not a record: the parent's sequence numbers skip it.
 * What it is not: a file format (shs_trace_write_dir writes it).
 */
#ifndef SHARDSIM_TRACE_RECORD_H
#define SHARDSIM_TRACE_RECORD_H

#include "shardsim/comm.h"
#include "shardsim/layout.h"
#include "shardsim/param_source.h"
#include "shardsim/trace.h"

typedef struct shs_trace_recorder shs_trace_recorder_t;

/* A recorder for ranks 0..world-1. Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_trace_recorder_create(shs_trace_recorder_t **out, int world);
void shs_trace_recorder_free(shs_trace_recorder_t *r);

/* Hook `comm`, the handle of global rank `rank`; call from that rank's
 * thread (or before the ranks start), before any split whose children
 * should be recorded. The communicator is recorded under its name
 * (shs_comm_name) with members `members` (global ranks by local rank; NULL:
 * 0..size-1). A recorded handle must outlive the calls of the handles split
 * from it (their markers fall back to its), and the recorder every recorded
 * call. Errors: SHS_INVALID_ARG (rank out of range), SHS_HOST_OOM. */
shs_status_t shs_trace_recorder_attach(shs_trace_recorder_t *r, shs_comm_t *comm, int rank, const int *members);

/* Build the trace of everything recorded so far (call when no rank is
 * recording). Errors: SHS_HOST_OOM (also when a rank's buffer could not
 * grow during the run: the trace would be incomplete), SHS_INVALID_ARG (a
 * split communicator with a member this recorder never saw, e.g. one
 * recorded in another process). */
shs_status_t shs_trace_recorder_finish(shs_trace_recorder_t *r, shs_trace_t **out);

/* A parameter source decorator (param_source.h) that sets the
 * communicator marker to "<phase>/<unit name>" (phase: the part of the
 * current marker before any '/') before each call into `inner`, so the
 * collectives a strategy issues for a unit carry its name ("fwd/block3").
 * Attach it only when recording a trace. `w` is caller-owned storage that
 * must outlive its use; returns &w->base.src. */
typedef struct {
    shs_param_decorator_t base; /* first: the forwarding source */
    shs_comm_t *comm;
    const shs_layout_t *layout;
} shs_trace_marking_source_t;
shs_param_source_t *shs_trace_marking_source(shs_trace_marking_source_t *w, shs_param_source_t *inner,
                                             shs_comm_t *comm, const shs_layout_t *layout);

#endif
