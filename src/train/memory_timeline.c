/* memory_timeline.c - per-phase device memory of one rank over a step (see
 * memory_timeline.h). */
#include "shardsim/memory_timeline.h"

#include <stdio.h>
#include <stdlib.h>

#include "train/step_segments.h"

struct shs_memory_timeline {
    shs_param_decorator_t base; /* first: the source given to the model */
    shs_device_t *dev;
    const shs_layout_t *layout;
    int backward;
    shs__step_seg_list_t segs;
    int oom;                 /* a segment could not be stored: the rest are dropped */
};

shs_status_t shs_memory_timeline_create(shs_memory_timeline_t **out, shs_device_t *dev, const shs_layout_t *layout) {
    shs_memory_timeline_t *tl = calloc(1, sizeof *tl);
    if (!tl) return shs_set_error(SHS_HOST_OOM, "cannot allocate a memory timeline");
    tl->dev = dev;
    tl->layout = layout;
    *out = tl;
    return SHS_OK;
}

void shs_memory_timeline_destroy(shs_memory_timeline_t *tl) {
    if (!tl) return;
    free(tl->segs.segs);
    free(tl);
}

static void open_seg(shs_memory_timeline_t *tl, shs_step_seg_kind_t kind, int unit, const char *label) {
    if (tl->oom) return;
    if (shs__step_seg_open(&tl->segs, tl->dev, kind, unit, label, 0) != 0) tl->oom = 1;
}

/* A unit's forward segment starts at its first parameter acquire, its
 * backward segment at its gradient (not at a recompute's parameters). */
static void cut(shs_param_decorator_t *d, shs_param_call_t call, int unit) {
    shs_memory_timeline_t *tl = (shs_memory_timeline_t *)d;
    int starts = call == SHS_PARAM_CALL_ACQUIRE_GRADS || (call == SHS_PARAM_CALL_ACQUIRE_PARAMS && !tl->backward);
    if (!starts || tl->oom) return;
    if (shs__step_seg_open_unit(&tl->segs, tl->dev, tl->backward, unit, tl->layout->units[unit].name, 0) != 0) tl->oom = 1;
}

shs_param_source_t *shs_memory_timeline_source(shs_memory_timeline_t *tl, shs_param_source_t *inner) {
    return shs_param_decorator_init(&tl->base, inner, cut);
}

void shs_memory_timeline_begin_step(shs_memory_timeline_t *tl) {
    shs__step_seg_reset(&tl->segs);
    tl->oom = 0;
    tl->backward = 0;
    shs_device_window_peak(tl->dev);
}

void shs_memory_timeline_set_backward(shs_memory_timeline_t *tl, int backward) { tl->backward = backward; }

void shs_memory_timeline_mark(shs_memory_timeline_t *tl, shs_step_seg_kind_t kind, const char *label) {
    open_seg(tl, kind, -1, label);
}

void shs_memory_timeline_end_step(shs_memory_timeline_t *tl) { shs__step_seg_close(&tl->segs, tl->dev, 0); }

const shs_step_segment_t *shs_memory_timeline_segments(const shs_memory_timeline_t *tl, int *count) {
    *count = tl->segs.n;
    return tl->segs.segs;
}
