/* wrap.c - size-based wrapping: grouped flat parameters and the decorator
 * that maps the model's units onto them (wrap.h). */
#include "train/wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shs__wrap_free(shs__wrap_map_t *w) {
    free(w->phys_of);
    free(w->offset_of);
    free(w->first);
    free(w->last);
    memset(w, 0, sizeof *w);
}

shs_status_t shs__wrap_build(const shs_layout_t *lo, int num_blocks, size_t min_params, shs_layout_t *phys,
                              shs__wrap_map_t *w) {
    int n = lo->num_units;
    memset(w, 0, sizeof *w);
    shs_layout_init(phys);
    w->num_logical = n;
    w->phys_of = calloc((size_t)n, sizeof(int));
    w->offset_of = calloc((size_t)n, sizeof(size_t));
    w->first = calloc((size_t)n, sizeof(int));
    w->last = calloc((size_t)n, sizeof(int));
    if (!w->phys_of || !w->offset_of || !w->first || !w->last) {
        shs__wrap_free(w);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate wrap map");
    }
    shs_status_t st = SHS_OK;
    int p = -1;
    size_t in_group = 0;
    for (int l = 0; l < n; l++) {
        const shs_unit_info_t *u = &lo->units[l];
        int block = l >= 1 && l <= num_blocks, prev_block = l - 1 >= 1 && l - 1 <= num_blocks;
        if (!(block && prev_block && in_group < min_params)) {
            p++;
            in_group = 0;
            SHS_CHECK_GOTO(shs_layout_add_unit(phys, u->name), st, fail);
            w->first[p] = l;
        } else {
            snprintf(phys->units[p].name, sizeof phys->units[p].name, "blocks %d-%d", w->first[p] - 1, l - 1);
        }
        w->last[p] = l;
        w->phys_of[l] = p;
        w->offset_of[l] = phys->units[p].numel;
        for (int t = u->first_tensor; t < u->first_tensor + u->num_tensors; t++) {
            const shs_tensor_info_t *ti = &lo->tensors[t];
            SHS_CHECK_GOTO(shs_layout_add_tensor(phys, ti->name, ti->rows, ti->cols, ti->init, ti->std), st, fail);
        }
        phys->units[p].replicated = phys->units[p].replicated || u->replicated;
        in_group += u->numel;
    }
    w->num_physical = p + 1;
    return SHS_OK;
fail:
    shs_layout_free(phys);
    shs__wrap_free(w);
    return st;
}

static int multi(const shs__wrap_source_t *ws, int p) { return ws->w->first[p] != ws->w->last[p]; }
static int first_in_pass(const shs__wrap_source_t *ws, int p, int l) {
    return *ws->phase == SHS_PHASE_BACKWARD ? l == ws->w->last[p] : l == ws->w->first[p];
}
static int last_in_pass(const shs__wrap_source_t *ws, int p, int l) {
    return *ws->phase == SHS_PHASE_BACKWARD ? l == ws->w->first[p] : l == ws->w->last[p];
}

static shs_status_t ws_acquire_params(void *self, int l, const float **params) {
    shs__wrap_source_t *ws = self;
    shs_param_source_t *in = ws->base.inner;
    int p = ws->w->phys_of[l];
    if (!multi(ws, p) || first_in_pass(ws, p, l)) SHS_CHECK(in->acquire_params(in->self, p, &ws->held_params[p]));
    *params = ws->held_params[p] + ws->w->offset_of[l];
    return SHS_OK;
}
static shs_status_t ws_release_params(void *self, int l) {
    shs__wrap_source_t *ws = self;
    shs_param_source_t *in = ws->base.inner;
    int p = ws->w->phys_of[l];
    if (!multi(ws, p) || last_in_pass(ws, p, l)) return in->release_params(in->self, p);
    return SHS_OK;
}
static shs_status_t ws_acquire_grads(void *self, int l, float **grads) {
    shs__wrap_source_t *ws = self;
    shs_param_source_t *in = ws->base.inner;
    int p = ws->w->phys_of[l];
    if (!multi(ws, p) || first_in_pass(ws, p, l)) SHS_CHECK(in->acquire_grads(in->self, p, &ws->held_grads[p]));
    *grads = ws->held_grads[p] + ws->w->offset_of[l];
    return SHS_OK;
}
static shs_status_t ws_grads_ready(void *self, int l) {
    shs__wrap_source_t *ws = self;
    shs_param_source_t *in = ws->base.inner;
    int p = ws->w->phys_of[l];
    if (!multi(ws, p) || last_in_pass(ws, p, l)) return in->grads_ready(in->self, p);
    return SHS_OK;
}

shs_status_t shs__wrap_source(shs__wrap_source_t *ws, shs_param_source_t *inner, const shs__wrap_map_t *w,
                              const shs_phase_t *phase, shs_param_source_t **out) {
    ws->w = w;
    ws->phase = phase;
    ws->held_params = calloc((size_t)w->num_physical, sizeof *ws->held_params);
    ws->held_grads = calloc((size_t)w->num_physical, sizeof *ws->held_grads);
    if (!ws->held_params || !ws->held_grads) {
        shs__wrap_source_free(ws);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate the wrap source");
    }
    shs_param_decorator_init(&ws->base, inner, NULL);
    ws->base.src.acquire_params = ws_acquire_params;
    ws->base.src.release_params = ws_release_params;
    ws->base.src.acquire_grads = ws_acquire_grads;
    ws->base.src.grads_ready = ws_grads_ready;
    *out = &ws->base.src;
    return SHS_OK;
}

void shs__wrap_source_free(shs__wrap_source_t *ws) {
    free(ws->held_params);
    free(ws->held_grads);
    ws->held_params = NULL;
    ws->held_grads = NULL;
}
