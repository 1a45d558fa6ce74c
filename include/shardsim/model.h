/* model.h - a GPT-2-style decoder written against the device interface.
 *
 * What it is: the parameter layout (tensors grouped into wrap units, each
 * unit one flat parameter), deterministic initialization, and forward /
 * backward passes that get every unit's parameters and gradient buffers from
 * a strategy (strategy.h) and do all math through device.h. The math is
 * GPT-2's as in llm.c (Radford et al. 2019): token + position embedding; L
 * blocks of pre-LayerNorm causal multi-head attention and a 4C GELU MLP with
 * residuals; a final LayerNorm; an LM head tied to the token embedding.
 * What it is not: a tokenizer (the vocabulary is the 256 byte values) or an
 * optimizer.
 *
 * Legend: B sequences per rank (micro-batch), T context, C channels,
 * NH heads, L layers, V vocabulary (256).
 *
 * Wrap units, in order (FSDP auto-wrap by block):
 *   unit 0        "embed"   wte (V,C), wpe (T,C)
 *   unit 1..L     "blockI"  ln1w (C), ln1b (C), qkvw (3C,C), qkvb (3C),
 *                           attprojw (C,C), attprojb (C), ln2w (C), ln2b (C),
 *                           fcw (4C,C), fcb (4C), fcprojw (C,4C), fcprojb (C)
 *   unit L+1      "lnf"     lnfw (C), lnfb (C)
 * The LM head reuses wte (unit 0), so unit 0 is needed at both ends of the
 * forward pass and its gradient sums both uses.
 */
#ifndef SHARDSIM_MODEL_H
#define SHARDSIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/device.h"
#include "shardsim/status.h"

#define SHS_GPT_VOCAB 256
#define SHS_GPT_MAX_LAYERS 1024

typedef struct {
    int num_layers;    /* L >= 1 */
    int num_heads;     /* NH >= 1, divides C */
    int channels;      /* C >= 1 */
    int context;       /* T >= 1 */
} shs_gpt_config_t;

typedef enum { SHS_INIT_NORMAL, SHS_INIT_ZEROS, SHS_INIT_ONES } shs_init_kind_t;

typedef struct {
    char name[32];        /* GPT-2 style, e.g. "h.3.attn.c_attn.weight" */
    int unit;             /* wrap unit holding it */
    size_t offset;        /* first element within the unit's flat parameter */
    size_t numel;
    int rows, cols;       /* shape (rows, cols); cols == 1 for vectors */
    shs_init_kind_t init;
    float std;            /* for SHS_INIT_NORMAL */
} shs_tensor_info_t;

typedef struct {
    char name[16];        /* "embed", "block0", ..., "lnf" */
    size_t numel;         /* real elements of the flat parameter (no padding) */
    int first_tensor, num_tensors;
} shs_unit_info_t;

/* Parameter layout of a GPT for a config. */
typedef struct {
    shs_gpt_config_t cfg;
    int num_units;            /* L + 2 */
    shs_unit_info_t *units;   /* num_units */
    int num_tensors;          /* 2 + 12 L + 2 */
    shs_tensor_info_t *tensors;
    size_t num_params;        /* sum of unit numel */
} shs_gpt_layout_t;

/* Check a config: returns SHS_INVALID_ARG with a message naming the field. */
shs_status_t shs_gpt_config_validate(const shs_gpt_config_t *cfg);
/* Build the layout (allocates; free with shs_gpt_layout_free). Init follows
 * GPT-2: weights N(0, 0.02), the residual output projections (attn c_proj
 * and mlp c_proj weights) N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weight 1,
 * bias 0. Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_gpt_layout_create(shs_gpt_layout_t *layout, const shs_gpt_config_t *cfg);
void shs_gpt_layout_free(shs_gpt_layout_t *layout);
/* Tensor containing element `index` of unit `unit`'s flat parameter, or -1
 * for padding. */
int shs_gpt_tensor_at(const shs_gpt_layout_t *layout, int unit, size_t index);

/* Write initial values of elements [begin, end) of unit `unit`'s flat
 * parameter to host memory `out` (end - begin floats); elements at or past
 * the unit's numel (padding) are 0. Each value depends only on (seed, unit,
 * element index), never on which rank asks or how the unit is sharded. */
void shs_gpt_init_range(const shs_gpt_layout_t *layout, uint64_t seed, int unit, size_t begin, size_t end,
                        float *out);

/* Where the forward/backward passes get parameters and gradient buffers.
 * Implemented by strategy.c (DDP, ZeRO-1/2/3); the model never allocates or
 * frees parameters itself. All pointers are device pointers to the unit's
 * full flat buffer (unit numel elements, plus possibly padding). */
typedef struct shs_param_source shs_param_source_t;
struct shs_param_source {
    void *self;
    /* Full parameters of `unit`, resident until the matching release. */
    shs_status_t (*acquire_params)(void *self, int unit, const float **params);
    shs_status_t (*release_params)(void *self, int unit);
    /* Full gradient buffer of `unit` to accumulate into (zeroed at the start
     * of each backward pass), valid until grads_ready. */
    shs_status_t (*acquire_grads)(void *self, int unit, float **grads);
    /* The unit's backward is complete: no more accumulation into it. */
    shs_status_t (*grads_ready)(void *self, int unit);
};

typedef struct shs_gpt shs_gpt_t;

/* Activation buffers for B sequences per rank, on `dev` (category
 * ACTIVATIONS). Errors: SHS_OUT_OF_MEMORY (text names the rank), SHS_INVALID_ARG. */
shs_status_t shs_gpt_create(shs_gpt_t **out, const shs_gpt_layout_t *layout, shs_device_t *dev, int B);
void shs_gpt_destroy(shs_gpt_t *gpt);

/* Forward pass on this rank's micro-batch: tokens and targets are host
 * arrays of B*T bytes values (0..255). Writes the mean cross-entropy over
 * the B*T positions to *mean_loss (host). Keeps activations for backward,
 * and unit 0 acquired for the tied LM head: every forward must be followed
 * by shs_gpt_backward, which releases it. */
shs_status_t shs_gpt_forward(shs_gpt_t *gpt, shs_param_source_t *src, const int32_t *tokens,
                             const int32_t *targets, float *mean_loss);
/* Backward of the last forward: accumulates d(mean_loss)/d(params) into the
 * strategy's gradient buffers, calling grads_ready for each unit as soon as
 * its gradient is complete (reverse unit order; unit 0 last). */
shs_status_t shs_gpt_backward(shs_gpt_t *gpt, shs_param_source_t *src);

#endif
