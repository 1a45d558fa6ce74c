/* gpt.h - a GPT-2-style decoder written against the device interface.
 *
 * What it is: the parameter layout (layout.h: tensors grouped into wrap
 * units, each unit one flat parameter), deterministic initialization, and forward /
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
#ifndef SHARDSIM_GPT_H
#define SHARDSIM_GPT_H

#include "shardsim/device.h"
#include "shardsim/layout.h"
#include "shardsim/model.h"
#include "shardsim/status.h"

#define SHS_GPT_VOCAB 256
#define SHS_GPT_MAX_LAYERS 1024

typedef struct {
    int num_layers;    /* L >= 1 */
    int num_heads;     /* NH >= 1, divides C */
    int channels;      /* C >= 1 */
    int context;       /* T >= 1 */
    int vocab;         /* V: 0 means SHS_GPT_VOCAB (the 256 byte values); presets
                        * (model_preset.h) use GPT-2's 50257 */
} shs_gpt_config_t;

/* The vocabulary size V of a config (its vocab field, 0 meaning SHS_GPT_VOCAB). */
int shs_gpt_vocab(const shs_gpt_config_t *cfg);

/* Check a config: returns SHS_INVALID_ARG with a message naming the field. */
shs_status_t shs_gpt_config_validate(const shs_gpt_config_t *cfg);
/* Build the layout (allocates; free with shs_layout_free): L + 2 units,
 * 2 + 12 L + 2 tensors. Init follows GPT-2: weights N(0, 0.02), the residual
 * output projections (attn c_proj and mlp c_proj weights) N(0, 0.02/sqrt(2L)),
 * biases 0, LayerNorm weight 1, bias 0. Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_gpt_layout_create(shs_layout_t *layout, const shs_gpt_config_t *cfg);

/* A GPT on `dev` for B sequences per rank, with its activation buffers
 * (category ACTIVATIONS). `layout` must come from shs_gpt_layout_create(cfg)
 * and outlive the model. checkpoint_activations != 0: activation
 * checkpointing per block (torch.utils.checkpoint around each block): the
 * forward keeps only each block's input, and backward recomputes the
 * block's forward before its backward; results are bit-identical, activation
 * memory lower: L blocks' intermediates become one set shared by every
 * block plus L saved block outputs of B*T*C floats. forward keeps unit 0 acquired for the tied LM head;
 * backward starts with the head, releases it, and calls grads_ready in
 * reverse unit order (unit 0 last, summing both uses of wte).
 * Errors: SHS_OUT_OF_MEMORY (text names the rank), SHS_INVALID_ARG. */
shs_status_t shs_gpt_create(shs_model_t **out, const shs_layout_t *layout, const shs_gpt_config_t *cfg,
                            shs_device_t *dev, int B, int checkpoint_activations);

#endif
