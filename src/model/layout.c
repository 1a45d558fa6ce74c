/* layout.c - flat-parameter layouts: building them, finding a tensor by
 * element, and counter-based initialization (see layout.h). */
#include "shardsim/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

void shs_layout_init(shs_layout_t *lo) { memset(lo, 0, sizeof *lo); }

void shs_layout_free(shs_layout_t *lo) {
    free(lo->units);
    free(lo->tensors);
    shs_layout_init(lo);
}

/* Grow *p (elements of `size` bytes, capacity *cap) to hold `need`. */
static int grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int n = *cap ? 2 * *cap : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * size);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

shs_status_t shs_layout_add_unit(shs_layout_t *lo, const char *name) {
    if (grow((void **)&lo->units, &lo->cap_units, lo->num_units + 1, sizeof *lo->units))
        return shs_set_error(SHS_HOST_OOM, "cannot grow model layout");
    shs_unit_info_t *u = &lo->units[lo->num_units++];
    memset(u, 0, sizeof *u);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->first_tensor = lo->num_tensors;
    return SHS_OK;
}

shs_status_t shs_layout_add_tensor(shs_layout_t *lo, const char *name, int rows, int cols, shs_init_kind_t init,
                                   float std) {
    if (lo->num_units == 0) return shs_set_error(SHS_INVALID_ARG, "tensor '%s' added before any unit", name);
    if (rows < 0 || cols < 0)
        return shs_set_error(SHS_INVALID_ARG, "tensor '%s' has a negative shape (%d, %d)", name, rows, cols);
    if (grow((void **)&lo->tensors, &lo->cap_tensors, lo->num_tensors + 1, sizeof *lo->tensors))
        return shs_set_error(SHS_HOST_OOM, "cannot grow model layout");
    int unit = lo->num_units - 1;
    shs_unit_info_t *u = &lo->units[unit];
    shs_tensor_info_t *t = &lo->tensors[lo->num_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->unit = unit;
    t->offset = u->numel;
    t->rows = rows;
    t->cols = cols;
    t->numel = (size_t)rows * (size_t)cols;
    t->init = init;
    t->std = std;
    u->num_tensors++;
    u->numel += t->numel;
    lo->num_params += t->numel;
    lo->num_tensors++;
    return SHS_OK;
}

int shs_layout_tensor_at(const shs_layout_t *lo, int unit, size_t index) {
    const shs_unit_info_t *u = &lo->units[unit];
    for (int i = u->first_tensor; i < u->first_tensor + u->num_tensors; i++) {
        const shs_tensor_info_t *t = &lo->tensors[i];
        if (index >= t->offset && index < t->offset + t->numel) return i;
    }
    return -1;
}

void shs_layout_init_range(const shs_layout_t *lo, uint64_t seed, int unit, size_t begin, size_t end, float *out) {
    const shs_unit_info_t *u = &lo->units[unit];
    size_t i = begin;
    for (int ti = u->first_tensor; ti < u->first_tensor + u->num_tensors && i < end; ti++) {
        const shs_tensor_info_t *t = &lo->tensors[ti];
        for (; i < end && i < t->offset + t->numel; i++) {
            if (i < t->offset) continue;
            float v = 0.0f;
            if (t->init == SHS_INIT_ONES) v = 1.0f;
            else if (t->init == SHS_INIT_NORMAL)
                v = (float)(t->std * shs__rand_normal(seed, (uint64_t)ti, (uint64_t)(i - t->offset)));
            out[i - begin] = v;
        }
    }
    for (; i < end; i++) out[i - begin] = 0.0f; /* padding */
}
