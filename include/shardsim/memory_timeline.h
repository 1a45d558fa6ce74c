/* memory_timeline.h - one rank's device memory over a training step, cut at the
 * step's phases: the forward of each wrap unit, the backward of each unit,
 * the optimizer step and the loss all-reduce (train --memory-timeline).
 *
 * What it is: a recorder the trainer drives on one rank. It wraps the
 * strategy's parameter source so the first parameter acquire of a unit in
 * forward, and the first gradient acquire in backward, start that unit's
 * segment; the trainer marks the optimizer and loss segments. Each segment
 * keeps the device bytes per category at its end and the highest total
 * inside it (shs_device_window_peak). The segment type is shared with the
 * meta backend's runs (meta_run.h), so `compare --plot`'s SVG writer draws
 * real runs too.
 * What it is not: a trace of collectives (trace.h) or a profiler of time.
 */
#ifndef SHARDSIM_MEMORY_TIMELINE_H
#define SHARDSIM_MEMORY_TIMELINE_H

#include "shardsim/device.h"
#include "shardsim/layout.h"
#include "shardsim/param_source.h"

typedef enum {
    SHS_STEP_SEG_SETUP,      /* model and strategy creation */
    SHS_STEP_SEG_FORWARD,    /* forward of one wrap unit */
    SHS_STEP_SEG_BACKWARD,   /* backward of one wrap unit */
    SHS_STEP_SEG_OPTIM,      /* gradient flush, clipping, optimizer step, re-gather */
    SHS_STEP_SEG_LOSS        /* the loss all-reduce */
} shs_step_seg_kind_t;

/* One segment of the step. */
typedef struct {
    shs_step_seg_kind_t kind;
    int unit;                /* wrap unit (in the strategy's layout), -1 for other kinds */
    char label[48];          /* "fwd embed", "bwd blocks 3-5", "optim", ... */
    size_t mem_end[SHS_MEM_NUM_CATEGORIES]; /* device bytes per category when it ends */
    size_t peak_total;       /* highest device total inside it */
    size_t gpu_mem_end[SHS_MEM_NUM_CATEGORIES]; /* the same in the modelled GPU's ledger (device.h) */
    size_t gpu_peak_total;
    uint64_t flops;          /* device kernel FLOPs inside it (not the offload host's) */
    uint64_t calls_begin, calls_end; /* its collectives: [begin, end) of calls */
} shs_step_segment_t;

typedef struct shs_memory_timeline shs_memory_timeline_t;

/* A recorder for `dev`, naming units from `layout` (both outlive it).
 * Errors: SHS_HOST_OOM. */
shs_status_t shs_memory_timeline_create(shs_memory_timeline_t **out, shs_device_t *dev, const shs_layout_t *layout);
void shs_memory_timeline_destroy(shs_memory_timeline_t *tl);

/* The parameter source to give the model: `inner` with segment cuts. */
shs_param_source_t *shs_memory_timeline_source(shs_memory_timeline_t *tl, shs_param_source_t *inner);

/* Start of a step (discards the previous step's segments), of its forward
 * and backward passes, and the optimizer / loss segments. */
void shs_memory_timeline_begin_step(shs_memory_timeline_t *tl);
void shs_memory_timeline_set_backward(shs_memory_timeline_t *tl, int backward);
void shs_memory_timeline_mark(shs_memory_timeline_t *tl, shs_step_seg_kind_t kind, const char *label);
/* Close the last segment. */
void shs_memory_timeline_end_step(shs_memory_timeline_t *tl);

/* The last complete step's segments (valid until the next begin_step). */
const shs_step_segment_t *shs_memory_timeline_segments(const shs_memory_timeline_t *tl, int *count);

#endif
