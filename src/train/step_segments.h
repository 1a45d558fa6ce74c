/* step_segments.h - the list of step segments (memory_timeline.h's shs_step_segment_t)
 * that both the trainer's memory timeline (memory_timeline.c) and the meta
 * backend's runs (meta_run.c) cut a step into. Internal.
 *
 * What it is: open/close bookkeeping over one device. Opening a segment
 * closes the open one and starts the device's peak window
 * (shs_device_window_peak, and the GPU ledger's); closing records the device
 * bytes per category, the window's peak (both ledgers), the kernel FLOPs since it opened and the number of
 * collectives so far (the caller's count, for meta runs; 0 otherwise).
 * Consecutive cuts in the same unit's forward or backward pass stay one
 * segment (a unit acquires its parameters, then its gradients, ...).
 * What it is not: the decision of where to cut (the callers' parameter
 * sources and marks).
 */
#ifndef SHARDSIM_STEP_SEGMENTS_H
#define SHARDSIM_STEP_SEGMENTS_H

#include <stdint.h>

#include "shardsim/memory_timeline.h"

typedef struct {
    shs_step_segment_t *segs; /* (n) of capacity cap, the last one open */
    int n, cap;
    uint64_t flops0;          /* device FLOPs when the open segment opened */
} shs__step_seg_list_t;

/* Close the open segment, if any. */
void shs__step_seg_close(shs__step_seg_list_t *l, shs_device_t *dev, uint64_t ncalls);
/* Open a segment (closing the open one) unless the open one is the same
 * unit's pass of the same kind (forward/backward). Returns 0, or -1 when
 * the list cannot grow (out of host memory): then nothing is open. */
int shs__step_seg_open(shs__step_seg_list_t *l, shs_device_t *dev, shs_step_seg_kind_t kind, int unit, const char *label,
                  uint64_t ncalls);
/* Open the segment of `unit`'s forward (backward: its backward) pass,
 * labelled "fwd <name>" ("bwd <name>"), as shs__step_seg_open. */
int shs__step_seg_open_unit(shs__step_seg_list_t *l, shs_device_t *dev, int backward, int unit, const char *name,
                       uint64_t ncalls);
/* Forget every segment (keeps the storage). */
void shs__step_seg_reset(shs__step_seg_list_t *l);

#endif
