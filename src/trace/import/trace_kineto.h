/* trace_kineto.h - the Kineto reader's parts (private to src/trace): the
 * fields of a communication event as the scan found them
 * (trace_kineto.c) and the record built from one (trace_kineto_rec.c).
 * What it is not: the scanner (trace_json_scan.h). */
#ifndef SHARDSIM_TRACE_KINETO_H
#define SHARDSIM_TRACE_KINETO_H

#include "shardsim/trace_import.h"
#include "trace/trace_json_scan.h"

/* The event args read, by index (names in trace_kineto.c). */
enum { SHS__K_COLL, SHS__K_IN, SHS__K_OUT, SHS__K_DTYPE, SHS__K_GSIZE, SHS__K_PGNAME, SHS__K_PGRANKS,
       SHS__K_INSPLIT, SHS__K_OUTSPLIT, SHS__K_DIMS, SHS__K_ITYPE, SHS__K_NARGS };

/* The kinds of communication event, most informative first: a file is
 * read from the first kind it has. */
enum { FORM_KERNEL_ARGS, FORM_PARAM_COMMS, FORM_NCCL_ANNOTATION, FORM_KERNEL_NAME, NUM_FORMS };

/* One event's fields, as spans of the file (kind SHS__JS_NONE: absent). */
typedef struct {
    size_t idx;                    /* traceEvents[idx] */
    shs__js_span_t name, ph, cat, ts, dur, a[SHS__K_NARGS];
    double tsv, durv;              /* ts, dur (us), checked */
    shs_coll_op_t op;
} shs__kev_t;

/* Append event e (of kind `form`) as a call of `rank` on comm `wc` (the
 * identity world) or its process group; `world` is distributedInfo's
 * world_size (0 unknown). *truncated is set when an all_to_allv's split
 * sizes were cut by the profiler. Errors: SHS_PARSE naming
 * traceEvents[idx], SHS_HOST_OOM. */
shs_status_t shs__kineto_record(shs_trace_t *t, const shs__js_t *js, const shs_trace_input_t *in, const shs__kev_t *e,
                                int form, int rank, int64_t world, int wc, int *truncated);

#endif
