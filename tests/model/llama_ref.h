/* llama_ref.h - a float64 reference of Hugging Face LlamaForCausalLM's
 * forward and backward written in plain loops (RMSNorm, rotate_half RoPE,
 * grouped-query causal attention with per-document masks, SwiGLU, mean
 * cross-entropy over counted targets), optionally with torch.autocast's
 * rounding at the points llama.h lists, for the Llama model's tests.
 * What it is not: the model under test (it shares no code with
 * src/model/llama_model.c). */
#ifndef SHARDSIM_TESTS_LLAMA_REF_H
#define SHARDSIM_TESTS_LLAMA_REF_H

#include <stdint.h>

#include "shardsim/dtype.h"
#include "shardsim/layout.h"
#include "shardsim/llama.h"

typedef struct {
    const shs_llama_config_t *c;
    int B, T;
    const int32_t *tok, *tgt, *pos, *doc;
    const float *inv_freq;          /* HD/2, as the model uses (checked separately) */
    double **p;                     /* per tensor of the layout, by index */
    double **g;                     /* their gradients (out, accumulated) */
    const shs_layout_t *lo;
    /* autocast emulation, off when A is SHS_DTYPE_DEFAULT or f32: every value the
     * model stores in A (norm outputs, projections, RoPE outputs, attention
     * probabilities and output, SwiGLU output, logits) and in R (the residual
     * stream) is rounded to that dtype (from its f32 value) where it is made;
     * round_weights: every weight and bias a matmul reads is rounded to A too */
    shs_dtype_t A, R;
    int round_weights;
    int flash;                      /* backward recomputes unrounded probabilities (flash) instead of
                                     * reading the stored rounded ones (eager); only matters with A */
} llama_ref_t;

/* The layout index of a tensor by name (fails the test if absent). */
int llama_ref_tensor(const shs_layout_t *lo, const char *name);
/* Forward and backward of the mean loss; gradients into R->g. Returns the loss. */
double llama_ref_run(llama_ref_t *R);

#endif
