/* plain_source.c - the whole-buffer test parameter source (plain_source.h). */
#include "plain_source.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static shs_status_t ps_acquire(void *self, int unit, const float **p) {
    plain_source_t *s = self;
    s->acquired++;
    *p = s->params[unit];
    return SHS_OK;
}
static shs_status_t ps_release(void *self, int unit) {
    plain_source_t *s = self;
    (void)unit;
    s->acquired--;
    return SHS_OK;
}
static shs_status_t ps_grads(void *self, int unit, float **g) {
    plain_source_t *s = self;
    s->grads_after_ready += s->ready[unit] != 0;
    *g = s->grads[unit];
    return SHS_OK;
}
static shs_status_t ps_ready(void *self, int unit) {
    plain_source_t *s = self;
    s->ready[unit]++;
    if (s->num_ready < s->lo->num_units * 4) s->ready_order[s->num_ready++] = unit;
    return SHS_OK;
}

void plain_source_init(plain_source_t *s, shs_device_t *dev, const shs_layout_t *lo, uint64_t seed, float perturb) {
    memset(s, 0, sizeof *s);
    int U = lo->num_units;
    s->src = (shs_param_source_t){s, ps_acquire, ps_release, ps_grads, ps_ready};
    s->dev = dev;
    s->lo = lo;
    s->params = calloc((size_t)U, sizeof(float *));
    s->grads = calloc((size_t)U, sizeof(float *));
    s->ready = calloc((size_t)U, sizeof(int));
    s->ready_order = calloc((size_t)U * 4, sizeof(int));
    for (int u = 0; u < U; u++) {
        size_t n = lo->units[u].numel;
        float *host = malloc((n ? n : 1) * sizeof(float));
        shs_layout_init_range(lo, seed, u, 0, n, host);
        for (size_t i = 0; i < n; i++) host[i] += perturb * (float)sin(0.7 * (double)i + u);
        shs_device_alloc(dev, (void **)&s->params[u], n * 4, SHS_MEM_PARAMS, NULL);
        shs_device_alloc(dev, (void **)&s->grads[u], n * 4, SHS_MEM_GRADS, NULL);
        shs_memcpy_h2d(dev, s->params[u], host, n * 4);
        free(host);
    }
    plain_source_zero_grads(s);
}

void plain_source_zero_grads(plain_source_t *s) {
    for (int u = 0; u < s->lo->num_units; u++) shs_memset(s->dev, s->grads[u], 0, s->lo->units[u].numel * 4);
    memset(s->ready, 0, (size_t)s->lo->num_units * sizeof(int));
    s->num_ready = 0;
}

void plain_source_free(plain_source_t *s) {
    for (int u = 0; s->params && u < s->lo->num_units; u++) {
        shs_device_free(s->dev, s->params[u]);
        shs_device_free(s->dev, s->grads[u]);
    }
    free(s->params);
    free(s->grads);
    free(s->ready);
    free(s->ready_order);
    memset(s, 0, sizeof *s);
}
