/* finite_diff.c - see finite_diff.h. */
#include "finite_diff.h"

static double central(shs_device_t *dev, float *dp, float orig, float h, fd_loss_fn loss, void *ctx) {
    float v = orig + h;
    shs_memcpy_h2d(dev, dp, &v, 4);
    double lp = loss(ctx);
    v = orig - h;
    shs_memcpy_h2d(dev, dp, &v, 4);
    double lm = loss(ctx);
    shs_memcpy_h2d(dev, dp, &orig, 4);
    return (lp - lm) / (2.0 * (double)h);
}

double fd_derivative(shs_device_t *dev, float *dp, fd_loss_fn loss, void *ctx) {
    float orig;
    shs_memcpy_d2h(dev, &orig, dp, 4);
    return (4.0 * central(dev, dp, orig, 5e-3f, loss, ctx) - central(dev, dp, orig, 1e-2f, loss, ctx)) / 3.0;
}
