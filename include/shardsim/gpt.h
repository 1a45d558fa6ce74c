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

/* How a GPT executes (not its shape): what its forward keeps for backward,
 * which attention kernel runs, at what precision, with what dropout. The
 * zero value is the default: every activation kept, eager attention, f32,
 * no dropout. */
typedef enum {
    SHS_RECOMPUTE_NONE = 0,
    SHS_RECOMPUTE_FULL,      /* per block (torch.utils.checkpoint around each block; Megatron-LM
                              * --recompute-granularity full; torchtitan activation_checkpoint.mode
                              * full): only each block's output is kept, the block's whole forward
                              * runs again before its backward (as Megatron's reentrant checkpoint;
                              * torch's non-reentrant one stops early, after the last tensor
                              * backward reads: the last projection and residual are not rerun) */
    SHS_RECOMPUTE_SELECTIVE, /* the attention core only (Korthikanti et al. 2022 §5; Megatron-LM
                              * --recompute-granularity selective): eager attention's probabilities
                              * (and dropout mask and output) are not kept but recomputed from
                              * qkv in backward; with flash attention there is nothing to drop:
                              * it keeps what NONE keeps */
    SHS_RECOMPUTE_SELECTIVE_OP, /* torchtitan's op-level selective AC (selective_ac_option "op"):
                              * per block, the outputs of the flash attention kernel (output and
                              * log-sum-exp) and of every other bias-free projection (aten.mm; the
                              * 1st, 3rd, ... of the block; a projection with a bias is aten.addmm,
                              * neither saved nor counted) are kept, everything else is recomputed
                              * from the block input before its backward (not the saved ops); the
                              * Llama keeps q (before RoPE), v, gate and down_proj's outputs, the
                              * GPT (biases everywhere) only the flash attention's */
    SHS_RECOMPUTE_EVERY_N,   /* torchtitan's layer selective AC (selective_ac_option N): block l
                              * (from 0) recomputes as FULL when (l + 1) % recompute_every == 0,
                              * the others keep everything (as NONE) */
} shs_recompute_t;
typedef enum {
    SHS_ATTENTION_EAGER = 0, /* scores and softmax as (B,NH,T,T) matrices; backward reads them */
    SHS_ATTENTION_FLASH,     /* FlashAttention (Dao et al. 2022): no (T,T) matrix kept, only the
                              * log-sum-exp per row (f32); backward recomputes the probabilities */
} shs_attention_kind_t;
/* The loss kernel of the GPU run the device's GPU ledger models (device.h);
 * it changes no value here (the softmax cross-entropy kernel is the same),
 * only the bytes that ledger counts for the loss (src/model/loss_gpu_memory.h):
 * TORCH torch's cross_entropy on f32 logits, FUSED a fused kernel on the
 * logits' own dtype (flash-attn's xentropy). */
typedef enum { SHS_LOSS_TORCH = 0, SHS_LOSS_FUSED = 1 } shs_loss_kernel_t;
typedef struct {
    shs_recompute_t recompute;
    int recompute_every;     /* SHS_RECOMPUTE_EVERY_N: N >= 1 (1 is FULL); else unused */
    shs_attention_kind_t attention;
    shs_dtype_t autocast;    /* SHS_BF16 or SHS_F16: emulate torch.autocast (below); DEFAULT or
                              * F32: off, everything f32 */
    shs_dtype_t param_dtype; /* what the strategy rounds parameters to (strategy.h); with autocast
                              * equal to it the whole model runs in that dtype, residual stream
                              * included (FSDP MixedPrecision, Megatron's half model) */
    float dropout;           /* p in [0,1): GPT-2's attn_pdrop and resid_pdrop (the probabilities
                              * and the outputs of both c_proj), 1-byte masks; 0: none */
    uint64_t seed;           /* dropout masks: a pure function of (seed, micro-step, layer,
                              * site, position in the global batch), see shs_gpt_set_position */
    shs_loss_kernel_t loss_kernel; /* the GPU ledger's loss (above); no effect on values */
} shs_gpt_exec_t;

/* Autocast emulation (torch.autocast with dtype A = bf16 or f16). Followed:
 * PyTorch's amp.rst op lists for CUDA, "ops that can autocast to float16"
 * (linear/addmm/matmul/bmm/baddbmm: inputs cast to A, f32 accumulation,
 * output in A) and "ops that autocast to float32" (layer_norm, softmax,
 * log_softmax, cross_entropy/nll_loss: computed in f32); other ops (GELU,
 * dropout, the residual add) run in their input's dtype. Here: every
 * matmul reads A-rounded inputs and weights (weights rounded unless the
 * parameters are A already) and its output is rounded to A; qkv, the
 * attention output, ln1/ln2/lnf outputs (what the following matmul saves:
 * torch keeps the A cast of a LayerNorm's f32 output), fch and GELU's
 * output are stored in A (2 bytes); eager attention's probabilities are
 * computed in f32 and stored in A (Megatron-LM's fused softmax: f32 inside,
 * half output; torch's autocast softmax would keep f32); the residual
 * stream is A when the parameters are A, else f32 (torch's promotion of
 * f32 + A); LayerNorm statistics, the log-sum-exp, the logits' softmax and
 * the losses stay f32. Gradients are not rounded (f32 throughout backward):
 * a difference from torch, where an A tensor's gradient is A. */
shs_status_t shs_gpt_exec_validate(const shs_gpt_exec_t *ex);
/* "eager", "flash"; "none", "full", "selective", "selective-op", "selective-N"
 * (EVERY_N: "selective-" and a literal N; shs_recompute_label prints the number). */
const char *shs_attention_name(shs_attention_kind_t k);
const char *shs_recompute_name(shs_recompute_t r);
/* The policy's name with EVERY_N's N filled in ("selective-2") into buf (n
 * bytes); returns buf. */
const char *shs_recompute_label(char *buf, size_t n, shs_recompute_t r, int every);

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
/* The same with every execution choice (shs_gpt_exec_t; shs_gpt_create is
 * this with recompute full or none and the rest zero). What is kept per
 * block (bytes, b = B, s = T, h = C, a = NH; A = 2 under autocast else 4,
 * R the residual width; masks 1 byte):
 *   ln1 A sbh, qkv 3A sbh, attention output A sbh, res2 R sbh, ln2 A sbh,
 *   fch and its GELU 8A sbh, the block output R sbh, LayerNorm statistics
 *   16 sb; eager: probabilities A as^2b (+ dropout: mask as^2b and the
 *   dropped probabilities A as^2b); flash: log-sum-exp 4 asb; dropout:
 *   two masks 2 sbh.
 * With A = R = 2 and dropout that is Korthikanti et al. 2022's
 * sbh(34 + 5as/h) (Table 2, no parallelism) plus the 16 sb of statistics
 * it leaves out. Full recompute keeps the block outputs only (R sbh per
 * block) and one shared set; selective keeps all but the eager attention
 * core; op-level SAC the block output and, with flash, the attention
 * output and log-sum-exp (A sbh + 4 asb: GPT-2's projections have biases,
 * none is saved); EVERY_N its recomputing blocks as full, the others as
 * none. Forward-only intermediates and f32 work buffers are one set for
 * all blocks. Errors: as shs_gpt_create, and SHS_UNSUPPORTED when the
 * device lacks kernels for flash attention, dropout or autocast
 * (shs_device_supports; the CUDA backend), naming them. */
shs_status_t shs_gpt_create_ex(shs_model_t **out, const shs_layout_t *layout, const shs_gpt_config_t *cfg,
                               shs_device_t *dev, int B, const shs_gpt_exec_t *ex);
/* Where the next forward's dropout masks come from: the micro-step (the
 * same in every rank and stage for one batch; the recomputing backward
 * reuses it) and the index of this rank's first sequence in the global
 * batch. A no-op for a model that is not a GPT. */
void shs_gpt_set_position(shs_model_t *m, uint64_t micro_step, uint64_t first_sequence);

#endif
