/* memory_timeline.c - per-phase device memory of one rank over a step (see
 * memory_timeline.h). */
#include "shardsim/memory_timeline.h"

#include <stdio.h>
#include <stdlib.h>

#include "train/step_segments.h"

struct shs_memory_timeline {
    shs_device_t *dev;
    const shs_layout_t *layout;
    shs_param_source_t *inner, pub;
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

static void unit_seg(shs_memory_timeline_t *tl, int unit) {
    char label[48];
    snprintf(label, sizeof label, "%s %s", tl->backward ? "bwd" : "fwd", tl->layout->units[unit].name);
    open_seg(tl, tl->backward ? SHS_STEP_SEG_BACKWARD : SHS_STEP_SEG_FORWARD, unit, label);
}

static shs_status_t tl_acquire_params(void *self, int unit, const float **params) {
    shs_memory_timeline_t *tl = self;
    if (!tl->backward) unit_seg(tl, unit); /* backward segments start at the gradient */
    return tl->inner->acquire_params(tl->inner->self, unit, params);
}
static shs_status_t tl_release_params(void *self, int unit) {
    shs_memory_timeline_t *tl = self;
    return tl->inner->release_params(tl->inner->self, unit);
}
static shs_status_t tl_acquire_grads(void *self, int unit, float **grads) {
    shs_memory_timeline_t *tl = self;
    unit_seg(tl, unit);
    return tl->inner->acquire_grads(tl->inner->self, unit, grads);
}
static shs_status_t tl_grads_ready(void *self, int unit) {
    shs_memory_timeline_t *tl = self;
    return tl->inner->grads_ready(tl->inner->self, unit);
}

shs_param_source_t *shs_memory_timeline_source(shs_memory_timeline_t *tl, shs_param_source_t *inner) {
    tl->inner = inner;
    tl->pub = (shs_param_source_t){tl, tl_acquire_params, tl_release_params, tl_acquire_grads, tl_grads_ready};
    return &tl->pub;
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
