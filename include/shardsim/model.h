/* model.h - the model interface the trainer drives.
 *
 * What it is: a network instance on one rank's device with forward and
 * backward passes over a micro-batch of B*T token positions. Its parameters
 * are laid out as a layout.h layout and come from a param_source.h source
 * (the strategy). Two implementations: the GPT (gpt.h) and networks read
 * from a model-description file (model_file.h), and the Llama (llama.h).
 * What it is not: a layout, a strategy or an optimizer.
 */
#ifndef SHARDSIM_MODEL_H
#define SHARDSIM_MODEL_H

#include <stdint.h>

#include "shardsim/param_source.h"
#include "shardsim/status.h"

typedef struct shs_model shs_model_t;

/* torch.nn.CrossEntropyLoss's default ignore_index: a target with this
 * value contributes no loss and no gradient (padding, masked prompts). */
#define SHS_IGNORE_INDEX (-100)

/* One rank's micro-batch: B sequences of T positions, host arrays of B*T
 * int32 values each, row-major (b, t). */
typedef struct {
    const int32_t *tokens;    /* input ids */
    const int32_t *targets;   /* next-token ids, or SHS_IGNORE_INDEX where no loss is taken */
    const int32_t *positions; /* position ids (RoPE / learned positions), or NULL: t for every row
                               * (packed documents restart at 0 per document) */
    const int32_t *doc_ids;   /* the document of each position, or NULL: one document per row;
                               * position t attends to t2 only if t2 <= t and both lie in one document
                               * (packing with per-document causal masks) */
} shs_batch_t;

/* The number of targets of a B*T batch that are not SHS_IGNORE_INDEX. */
int64_t shs_batch_num_targets(const shs_batch_t *batch, size_t bt);

typedef struct {
    /* Writes the mean cross-entropy over the batch's counted targets (those
     * not SHS_IGNORE_INDEX; f32 sum / count, 0 when none is counted) to
     * *mean_loss (host). Keeps what backward needs; every forward must be
     * followed by backward. A model without per-document attention or
     * position ids returns SHS_UNSUPPORTED, naming them, for a batch that
     * has them. */
    shs_status_t (*forward)(shs_model_t *m, shs_param_source_t *src, const shs_batch_t *batch, float *mean_loss);
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

static inline shs_status_t shs_model_forward(shs_model_t *m, shs_param_source_t *src, const shs_batch_t *batch,
                                             float *mean_loss) {
    return m->ops->forward(m, src, batch, mean_loss);
}
static inline shs_status_t shs_model_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    return m->ops->backward(m, src, dloss);
}
static inline void shs_model_destroy(shs_model_t *m) {
    if (m) m->ops->destroy(m);
}

#endif
