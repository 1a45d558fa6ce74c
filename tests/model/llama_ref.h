/* llama_ref.h - a float64 reference of the Hugging Face decoders shardsim's
 * Llama family models (LlamaForCausalLM, Mistral, Qwen2/3, Gemma 1/2/3,
 * Phi-3, OLMo 2, InternLM2), forward and backward, written here in plain
 * loops from transformers' modeling files: RMSNorm (w or 1 + w) before
 * and/or after each branch, q/k norms per head or whole, rotate_half RoPE
 * on the first R channels with an mscale, grouped-query causal attention
 * with per-document masks, per-layer sliding windows, soft-capped scores
 * and an explicit scale, SwiGLU or GeGLU (GELU's tanh form), embeddings
 * times sqrt(C), a soft-capped head, mean cross-entropy over counted
 * targets; optionally with torch.autocast's rounding at the points
 * llama.h lists. The weights are read by their Hugging Face names from the
 * layout, fused and grouped projections decoded here by HF's own rules
 * (Phi-3's qkv rows q|k|v and gate_up rows gate|up; InternLM2's wqkv
 * rearranged 'b q (h gs d)' with gs = NH/NKV + 2).
 * Not a test; linked into the test binaries (tests/model/test_llama*.c use it). */
#ifndef SHARDSIM_TESTS_LLAMA_REF_H
#define SHARDSIM_TESTS_LLAMA_REF_H

#include <stdint.h>

#include "shardsim/dtype.h"
#include "shardsim/layout.h"
#include "shardsim/llama.h"

typedef struct {
    const shs_llama_config_t *c;
    const shs_layout_t *lo;
    int B, T;
    const int32_t *tok, *tgt, *pos, *doc; /* (B*T) host; pos, doc may be NULL */
    const float *inv_global, *inv_local, *inv_long; /* (R/2) the frequencies (checked on their own) */
    double **p;                           /* per layout tensor, by index */
    double **g;                           /* their gradients (out, accumulated) */
    /* autocast emulation, off when A is SHS_DTYPE_DEFAULT or f32: every value the
     * model stores in A (the projections' inputs, q/k/v and the q/k norms' inputs,
     * RoPE outputs, attention probabilities and output, the output norms' inputs and
     * outputs, the activation and its inputs, the final norm, logits before and
     * after the soft cap) and in R (the embedding and its scale, the residual stream)
     * is rounded to that dtype (from its f32 value) where it is made;
     * round_weights: every weight and bias a matmul reads is rounded to A too */
    shs_dtype_t A, R;
    int round_weights;
    int flash;                            /* backward recomputes unrounded probabilities (flash) instead of
                                           * reading the stored rounded ones (eager); only matters with A */
} llama_ref_t;

/* The layout index of a tensor by name, -1 when absent. */
int llama_ref_tensor(const shs_layout_t *lo, const char *name);
/* Forward and backward of the mean loss; gradients into R->g. Returns the loss. */
double llama_ref_run(llama_ref_t *R);

#endif
