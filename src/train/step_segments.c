/* step_segments.c - step segments shared by memory_timeline.c and meta_run.c (step_segments.h). */
#include "train/step_segments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t device_flops(shs_device_t *dev) {
    shs_kernel_stats_t k;
    shs_device_kernel_stats(dev, &k);
    return k.flops;
}

void shs__step_seg_close(shs__step_seg_list_t *l, shs_device_t *dev, uint64_t ncalls) {
    if (!l->n) return;
    shs_step_segment_t *g = &l->segs[l->n - 1];
    shs_mem_stats_t m;
    shs_device_mem_stats(dev, &m);
    memcpy(g->mem_end, m.current, sizeof g->mem_end);
    g->peak_total = shs_device_window_peak(dev);
    shs_gpu_mem_stats_t gm;
    shs_device_gpu_mem_stats(dev, &gm);
    memcpy(g->gpu_mem_end, gm.alloc.current, sizeof g->gpu_mem_end);
    g->gpu_peak_total = shs_device_gpu_window_peak(dev);
    g->flops = device_flops(dev) - l->flops0;
    g->calls_end = ncalls;
}

int shs__step_seg_open(shs__step_seg_list_t *l, shs_device_t *dev, shs_step_seg_kind_t kind, int unit, const char *label,
                  uint64_t ncalls) {
    if (l->n) {
        const shs_step_segment_t *cur = &l->segs[l->n - 1];
        if (cur->kind == kind && cur->unit == unit && (kind == SHS_STEP_SEG_FORWARD || kind == SHS_STEP_SEG_BACKWARD))
            return 0; /* still the same unit's pass */
    }
    shs__step_seg_close(l, dev, ncalls);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        shs_step_segment_t *p = realloc(l->segs, (size_t)cap * sizeof *p);
        if (!p) return -1;
        l->segs = p;
        l->cap = cap;
    }
    shs_step_segment_t *g = &l->segs[l->n++];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->unit = unit;
    snprintf(g->label, sizeof g->label, "%s", label);
    g->calls_begin = g->calls_end = ncalls;
    l->flops0 = device_flops(dev);
    shs_device_window_peak(dev); /* the segment's window starts here */
    shs_device_gpu_window_peak(dev);
    return 0;
}

int shs__step_seg_open_unit(shs__step_seg_list_t *l, shs_device_t *dev, int backward, int unit, const char *name,
                            uint64_t ncalls) {
    char label[sizeof l->segs[0].label];
    snprintf(label, sizeof label, "%s %s", backward ? "bwd" : "fwd", name);
    return shs__step_seg_open(l, dev, backward ? SHS_STEP_SEG_BACKWARD : SHS_STEP_SEG_FORWARD, unit, label, ncalls);
}

void shs__step_seg_reset(shs__step_seg_list_t *l) { l->n = 0; }
