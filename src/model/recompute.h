/* recompute.h - private to src/model/: what a decoder block keeps for
 * backward under each activation-checkpointing policy (gpt.h's
 * shs_recompute_t), shared by gpt.c and llama_model.c. A model tags each
 * per-block buffer with a role; these functions say whether block l keeps
 * it (else it points into one shared set, or aliases a buffer it is only
 * a copy of) and whether block l recomputes its whole forward.
 * What it is not: the recomputation itself (each model's passes).
 *
 * Sources: torchtitan torchtitan/distributed/activation_checkpoint.py
 * (_apply_ac_to_transformer_block: full wraps each block in
 * checkpoint_wrapper; selective "N" wraps the blocks whose 1-based count is
 * a multiple of N; selective "op" wraps each block with a policy that
 * saves the outputs of the ops in _op_sac_save_list, torchtitan
 * models/llama3/infra/parallelize.py: aten.mm and the SDPA kernels
 * (flash, efficient, cuDNN), except every second aten.mm, counted per
 * block forward, and recomputes everything else); Megatron-LM's
 * --recompute-granularity selective (the attention core, Korthikanti et
 * al. 2022 §5). */
#ifndef SHARDSIM_MODEL_RECOMPUTE_H
#define SHARDSIM_MODEL_RECOMPUTE_H

#include "shardsim/gpt.h"

typedef enum {
    SHS__ACT_OUTPUT,   /* the block output: always kept (the next block's checkpointed input) */
    SHS__ACT_SAVED,    /* an intermediate the backward reads */
    SHS__ACT_PROBS,    /* eager attention's probabilities (and their dropout): Megatron's selective
                        * drops them; eager attention is composite ops, none of which op-level SAC saves */
    SHS__ACT_ATTN_OUT, /* the attention op's outputs (output, log-sum-exp): op-level SAC keeps them
                        * when the attention is one kernel (flash) */
    SHS__ACT_MM_OUT,   /* a projection output backward does not read (before RoPE, before a residual
                        * add): kept only when op-level SAC saves that mm */
} shs__act_role_t;
/* Short names for the models' buffer tables (X-macro rows). */
#define R_OUT SHS__ACT_OUTPUT
#define R_SAVED SHS__ACT_SAVED
#define R_PROBS SHS__ACT_PROBS
#define R_ATTN SHS__ACT_ATTN_OUT
#define R_MM SHS__ACT_MM_OUT

/* Whether block l (from 0) reruns its whole forward before its backward:
 * every block under FULL, blocks with (l + 1) % N == 0 under EVERY_N. */
int shs__ac_block_recomputes(const shs_gpt_exec_t *ex, int l);
/* Whether block l keeps a buffer of `role` for backward; mm_saved: the
 * buffer is the output of a projection that op-level SAC saves
 * (shs__ac_op_saved_linears). */
int shs__ac_keeps(const shs_gpt_exec_t *ex, int l, shs__act_role_t role, int mm_saved);
/* Whether some of the L blocks does not keep a buffer of `role` (the one
 * shared set then holds it); never for SHS__ACT_MM_OUT, which a block that
 * does not keep it does without (the value goes elsewhere). */
int shs__ac_shared_needed(const shs_gpt_exec_t *ex, int L, shs__act_role_t role, int mm_saved);
/* Op-level SAC over a block's n linears in forward order (has_bias[i]: a
 * linear with a bias runs as aten.addmm, which the policy neither counts
 * nor saves): bit i set when linear i's output is saved, i.e. it is the
 * 1st, 3rd, 5th, ... bias-free one. */
unsigned shs__ac_op_saved_linears(const int *has_bias, int n);

#endif
