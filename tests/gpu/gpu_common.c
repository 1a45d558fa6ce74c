/* gpu_common.c - helpers of the GPU tests (see gpu_common.h). */
#include "gpu_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gpu_require_device(void) {
    int n = 0;
    if (shs_cuda_device_count(&n) != SHS_OK || n < 1) {
        fprintf(stderr, "GPU tests cannot run: %s\n", shs_last_error());
        exit(1);
    }
}

void *gpu_upload_bytes(shs_device_t *dev, const void *host, size_t bytes) {
    void *p = NULL;
    if (shs_device_alloc(dev, &p, bytes, SHS_MEM_OTHER, "gpu test") != SHS_OK ||
        shs_memcpy_h2d(dev, p, host, bytes) != SHS_OK) {
        fprintf(stderr, "upload of %zu bytes failed: %s\n", bytes, shs_last_error());
        abort();
    }
    return p;
}

float *gpu_upload(shs_device_t *dev, const float *host, size_t n) {
    return gpu_upload_bytes(dev, host, n * sizeof(float));
}

float *gpu_download(shs_device_t *dev, const float *p, size_t n) {
    float *h = malloc(n * sizeof(float) + 1);
    if (!h || shs_memcpy_d2h(dev, h, p, n * sizeof(float)) != SHS_OK) {
        fprintf(stderr, "download of %zu floats failed: %s\n", n, shs_last_error());
        abort();
    }
    return h;
}

void gpu_fill(float *x, size_t n, uint64_t seed, float lo, float hi) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

int gpu_close(const char *name, const float *got, const float *want, size_t n, double atol, double rtol) {
    if (atol == 0 && rtol == 0) {
        for (size_t i = 0; i < n; i++)
            if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                uint32_t a, b;
                memcpy(&a, &got[i], 4);
                memcpy(&b, &want[i], 4);
                fprintf(stderr, "%s: not bit-identical at %zu of %zu: cuda %.9g (0x%08x), cpu %.9g (0x%08x)\n", name, i,
                        n, (double)got[i], a, (double)want[i], b);
                return 0;
            }
        return 1;
    }
    size_t worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(g) || isnan(w)) {
            if (isnan(g) && isnan(w)) continue;
            fprintf(stderr, "%s: NaN mismatch at %zu: cuda %g, cpu %g\n", name, i, g, w);
            return 0;
        }
        double excess = fabs(g - w) - (atol + rtol * fabs(w));
        if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    if (worst_excess > 0) {
        fprintf(stderr, "%s: beyond tolerance (atol %g, rtol %g) at %zu of %zu: cuda %.9g, cpu %.9g\n", name, atol, rtol,
                worst, n, (double)got[worst], (double)want[worst]);
        return 0;
    }
    return 1;
}
