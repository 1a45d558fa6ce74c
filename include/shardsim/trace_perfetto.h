/* trace_perfetto.h - write a trace as Chrome / Perfetto trace JSON (the
 * Trace Event Format that chrome://tracing and ui.perfetto.dev load).
 *
 * What it is: one track per rank (pid = tid = the global rank, named by
 * process_name / thread_name metadata events "rank <k>", sorted by rank)
 * and every record as a complete event ("ph": "X") named after its op,
 * category "collective", "p2p" or "wait", with ts and dur in microseconds
 * (17 significant digits, chosen so that ts x 1e-6 and (ts + dur) x 1e-6
 * give back the record's start and end in seconds exactly: epoch-
 * microsecond times round-trip bit for bit) and args {comm, seq, op, count, dtype, bytes, bytes_scope, marker, time}
 * (plus redop, root, peer, tag when the record has them; null for an
 * unknown dtype or an absent marker). Where a slice's times come from:
 *   recorded   the record's start and end (train --trace, Kineto, Flight
 *              Recorder, Chakra with times): ts = t_start, dur = t_end - t_start;
 *   estimate   a record without times, with a network model given: the
 *              alpha-beta estimate of trace_net.h for its algorithm is
 *              the duration, and the slice starts where the rank's
 *              previous slice ended (calls back to back, no compute);
 *   sequential a record without times and no network model: 1 us slices
 *              back to back, so the view shows the order only.
 * args.time names the source of each slice. Output is streamed (one
 * event in memory at a time), written with jansson.
 * What it is not: a reader of this format (Kineto's JSON is read by
 * trace_import.h), and no flow arrows between send and recv.
 */
#ifndef SHARDSIM_TRACE_PERFETTO_H
#define SHARDSIM_TRACE_PERFETTO_H

#include <stddef.h>

#include "shardsim/trace.h"
#include "shardsim/trace_net.h"

typedef struct {
    const shs_net_t *net;      /* network for records without times; NULL: sequential layout */
    shs_net_algo_t algo;       /* algorithm for the estimate (ring by default) */
    /* out: slices written, by the source of their times */
    size_t slices, recorded, estimated, sequential;
} shs_perfetto_opts_t;

/* Write `t` to `path` as trace-event JSON ({"traceEvents": [...],
 * "displayTimeUnit": "ms", "otherData": {...}}). opts may be NULL.
 * Errors: SHS_IO (path), SHS_UNSUPPORTED (built without jansson),
 * SHS_HOST_OOM. */
shs_status_t shs_trace_export_perfetto(const shs_trace_t *t, const char *path, shs_perfetto_opts_t *opts);

#endif
