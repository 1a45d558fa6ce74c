/* model.h - the model interface the trainer drives.
 *
 * What it is: a network instance on one rank's device with forward and
 * backward passes over a micro-batch of B*T token positions. Its parameters
 * are laid out as a layout.h layout and come from a param_source.h source
 * (the strategy). Two implementations: the GPT (gpt.h) and networks read
 * from a model-description file (model_file.h).
 * What it is not: a layout, a strategy or an optimizer.
 */
#ifndef SHARDSIM_MODEL_H
#define SHARDSIM_MODEL_H

#include <stdint.h>

#include "shardsim/param_source.h"
#include "shardsim/status.h"

typedef struct shs_model shs_model_t;

typedef struct {
    /* tokens, targets: host arrays of B*T values. Writes the mean
     * cross-entropy over the B*T positions to *mean_loss (host). Keeps what
     * backward needs; every forward must be followed by backward. */
    shs_status_t (*forward)(shs_model_t *m, shs_param_source_t *src, const int32_t *tokens, const int32_t *targets,
                            float *mean_loss);
    /* Backward of the last forward: accumulates dloss * d(mean_loss)/d(params)
     * into the source's gradient buffers (dloss folds in 1/K for gradient
     * accumulation and the fp16 loss scale), calling grads_ready per unit
     * as soon as its gradient is complete. */
    shs_status_t (*backward)(shs_model_t *m, shs_param_source_t *src, float dloss);
    void (*destroy)(shs_model_t *m);
} shs_model_ops_t;

struct shs_model {
    const shs_model_ops_t *ops;
};

static inline shs_status_t shs_model_forward(shs_model_t *m, shs_param_source_t *src, const int32_t *tokens,
                                             const int32_t *targets, float *mean_loss) {
    return m->ops->forward(m, src, tokens, targets, mean_loss);
}
static inline shs_status_t shs_model_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    return m->ops->backward(m, src, dloss);
}
static inline void shs_model_destroy(shs_model_t *m) {
    if (m) m->ops->destroy(m);
}

#endif
