/* finite_diff.h - the finite-difference oracle of the model tests
 * (test_model.c, test_model_file_grad.c): the derivative of a loss in one f32
 * parameter element that lives in device memory.
 * What it is not: a tolerance policy; each test states its own.
 */
#ifndef SHARDSIM_TESTS_FINITE_DIFF_H
#define SHARDSIM_TESTS_FINITE_DIFF_H

#include "shardsim/device.h"

/* Loss of the model with its current parameters (a forward pass; the
 * callback may also run backward to keep its protocol balanced). */
typedef double (*fd_loss_fn)(void *ctx);

/* d loss / d *dp by central differences with Richardson extrapolation,
 * (4 D(h/2) - D(h)) / 3 with h = 1e-2 (error O(h^4)): small LayerNorm widths
 * make the h^2 term of a plain central difference visible at f32-friendly
 * steps. dp: one f32 on `dev`, restored to its value before returning. */
double fd_derivative(shs_device_t *dev, float *dp, fd_loss_fn loss, void *ctx);

#endif
