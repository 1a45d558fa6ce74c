/* llama_fixture.h - a Llama-family model on the CPU device with a plain
 * parameter source (tests/plain_source.h), a fixed batch (optionally
 * packed: two documents per row, positions restarting, every 5th target
 * ignored), one step, and the comparison of its loss and every gradient
 * with the float64 reference (tests/model/llama_ref.h).
 * Not a test; used by tests/model/test_llama*.c. Include after <cmocka.h>. */
#ifndef SHARDSIM_TESTS_LLAMA_FIXTURE_H
#define SHARDSIM_TESTS_LLAMA_FIXTURE_H

#include <stdint.h>

#include "plain_source.h"
#include "shardsim/llama.h"

typedef struct {
    shs_llama_config_t cfg;
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *m;
    plain_source_t ps;
    shs_gpt_exec_t ex;
    int B, T;
    int32_t *tok, *tgt, *pos, *doc;
} fx_t;

/* Layout, CPU device (1 thread), model with exec `ex`, parameters (seed 42,
 * perturbed) and the batch. */
void fx_init(fx_t *f, shs_llama_config_t cfg, int B, int T, shs_gpt_exec_t ex, int packed);
void fx_free(fx_t *f);
shs_batch_t fx_batch(const fx_t *f);
/* Forward and backward into zeroed gradients; the loss. */
float fx_step(fx_t *f);
double fx_loss_cb(void *f);
/* The gradients of every unit, concatenated (host, malloc'd). */
float *fx_grads(fx_t *f);
/* One step's analytic gradient against central differences of the model's
 * own f32 loss (tests/finite_diff.h) for 3 elements of every tensor,
 * within 2e-3 relative + 2e-4 (test_model.c's tolerance, set by the f32
 * loss's rounding over steps of 5e-3); fails naming `what` and the
 * element. Returns the number of elements checked. */
int fx_check_finite_differences(fx_t *f, const char *what);

/* How far the model's loss and gradients are from the reference's: per
 * tensor the largest gradient error over the tensor's largest reference
 * gradient, the worst of them reported. */
typedef struct {
    double ref_loss, loss_rel, worst;
    double all_rel;                     /* every gradient at once: |g - ref| / |ref|, Frobenius */
    const char *worst_name;
    int tensor_failed;                  /* the first tensor above gtol, or -1 */
} ref_diff_t;

/* The model's last step (its loss `loss` and gradients) against the
 * reference of `ref_cfg` (which may differ from the model's, to plant a
 * fault) with autocast dtypes A and R (A = SHS_DTYPE_DEFAULT: none; the
 * weights rounded when A is 16-bit and the exec's parameters are not A);
 * every tensor must get a nonzero gradient. */
ref_diff_t diff_from_reference(fx_t *f, const shs_llama_config_t *ref_cfg, float loss, shs_dtype_t A, shs_dtype_t R,
                               double gtol);
/* One step against the reference with the model's own autocast rounding:
 * loss within `ltol` relative, per tensor the largest gradient error within
 * `gtol` of its largest reference gradient; prints the figures. */
ref_diff_t check_against_reference(fx_t *f, const char *what, double ltol, double gtol);
/* check_against_reference under the model's autocast, then the same
 * step against the reference without the rounding: returns that
 * comparison (printed) for the caller to require it off by more. */
ref_diff_t check_autocast_against_reference(fx_t *f, const char *what, double ltol, double gtol);
/* One step against the reference of `ref_cfg`; fails on a tensor only when
 * gtol > 0. Returns the worst tensor's relative gradient error; *loss_rel
 * the loss's. */
double compare_with_reference(fx_t *f, const shs_llama_config_t *ref_cfg, double gtol, const char *what,
                              double *loss_rel);

#endif
