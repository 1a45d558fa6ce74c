/* llama_impl.h - private: what the Llama family's config and layout
 * (llama.c), its model (llama_model.c) and its decoder layer
 * (llama_layer.c) share: the slots of a layer's tensors and the one list
 * that says, per config, which tensors a layer holds (Hugging Face names,
 * shapes, init, slots); the model's state and the layer's passes.
 * What it is not: the public API (llama.h). */
#ifndef SHARDSIM_LLAMA_IMPL_H
#define SHARDSIM_LLAMA_IMPL_H

#include <stddef.h>

#include "model/autocast.h"
#include "shardsim/llama.h"

/* What a layer's kernels read. A fused tensor serves several slots at
 * element offsets (Phi-3's qkv_proj: Q, K, V; gate_up_proj: GATE, UP);
 * InternLM2's grouped wqkv (and its bias) is one slot of its own. */
enum {
    SHS__LP_ATTN_IN, SHS__LP_Q, SHS__LP_K, SHS__LP_V, SHS__LP_QKV_GROUPED, SHS__LP_QB, SHS__LP_KB, SHS__LP_VB,
    SHS__LP_QKVB_GROUPED, SHS__LP_QN, SHS__LP_KN, SHS__LP_O, SHS__LP_OB, SHS__LP_ATTN_OUT, SHS__LP_MLP_IN,
    SHS__LP_GATE, SHS__LP_UP, SHS__LP_DOWN, SHS__LP_MLP_OUT, SHS__LP_COUNT
};

#define SHS__LLAMA_MAX_LAYER_TENSORS 20

/* The projections a layer computes, in forward order; fused or grouped ones
 * (Phi-3's qkv_proj and gate_up_proj, InternLM2's wqkv) are one linear. */
enum { SHS__LIN_Q, SHS__LIN_K, SHS__LIN_V, SHS__LIN_O, SHS__LIN_GATE, SHS__LIN_UP, SHS__LIN_DOWN, SHS__LIN_COUNT };

typedef struct {
    char suffix[40];       /* the name after "model.layers.N." */
    int rows, cols;
    shs_init_kind_t init;
    int nslots;
    int slot[3];           /* SHS__LP_* */
    size_t off[3];         /* each slot's element offset in the tensor */
} shs__llama_tensor_t;

/* The tensors of one decoder layer, in the unit's order; returns their
 * number (<= SHS__LLAMA_MAX_LAYER_TENSORS). cfg must be valid. */
int shs__llama_layer_tensors(const shs_llama_config_t *cfg, shs__llama_tensor_t *out);

/* The names of the embedding, the final norm and the LM head. */
const char *shs__llama_embed_name(const shs_llama_config_t *cfg);
const char *shs__llama_head_name(const shs_llama_config_t *cfg);

/* ---- the model (llama_model.c) and its layer (llama_layer.c) ----------------
 * Legend: B sequences, T context, C hidden, QD = NH*HD, KVD = NKV*HD, I
 * intermediate, V vocabulary. Dtypes (llama.h gives the rules): A, the
 * activation dtype; R, the residual stream's; statistics and the
 * log-sum-exp f32. Buffers of features a config lacks are NULL. */

typedef struct {
    float *rstd1;           /* (BT) ATTN_IN's rstd */
    void *ln1;              /* (n1,BT,C) A: the attention input as its projections read it (ATTN_IN's
                             * output, or without that norm the layer input's A casts; NULL when
                             * they read the layer input itself) */
    void *qp, *kp;          /* (BT,QD), (BT,KVD) A: the q and k projections before their norms and
                             * RoPE: kept with qk_norm (the norms read them); without, only when
                             * op-level SAC saves them, else NULL (q and k hold them) */
    float *rstdq, *rstdk;   /* their rstd: (BT*NH), (BT*NKV) per head, (BT), (BT) whole */
    void *q, *k, *v;        /* (BT,QD), (BT,KVD), (BT,KVD) A: q and k normed and rotated */
    void *att;              /* eager: (B,NH,T,T) A */
    float *lse;             /* flash: (B,NH,T) */
    void *atty;             /* (BT,QD) A: the attention output */
    void *ao;               /* (BT,C) A: o_proj's output: kept with ATTN_OUT (its norm reads it), else
                             * only when op-level SAC saves it, else NULL (it goes through proj) */
    float *rstdao;          /* (BT) */
    void *res2;             /* (BT,C) R: after the attention residual */
    float *rstd2;           /* (BT) MLP_IN's rstd */
    void *ln2;              /* (n2,BT,C) A: the MLP input as ln1 */
    void *gate, *up, *act;  /* (BT,I) A */
    void *mo;               /* (BT,C) A: down_proj's output, as ao with MLP_OUT */
    float *rstdmo;          /* (BT) */
    void *res3;             /* (BT,C) R: the layer output */
} shs__llama_acts_t;

typedef struct {
    shs_model_t base;                   /* ops: llama_model.c's */
    shs_llama_config_t cfg;
    shs_gpt_exec_t ex;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B, T;
    int HD, QD, KVD, R;                 /* head dim, NH*HD, NKV*HD, rotary dim */
    unsigned norms;                     /* shs_llama_norms */
    int ntensors;                       /* tensors per layer unit */
    int slot_tensor[SHS__LP_COUNT];     /* the unit tensor serving each slot, -1 none */
    size_t slot_off[SHS__LP_COUNT];     /* the slot's element offset in it */
    shs__amp_t amp;                     /* A, R, weight rounding (amp.ww in work_mem) */
    int lin_of[SHS__LIN_COUNT];         /* each projection's linear, counted in forward order */
    unsigned op_saved;                  /* op-level SAC: bit i set when it saves linear i's output */
    int n1, n2;                         /* copies in ln1 / ln2: when A is not R, one per projection that
                                         * reads them (autocast casts once per op: q, k, v separate 3,
                                         * fused or grouped 1; gate, up 2, fused 1), else 1 */
    void *acts_mem, *scratch_mem, *work_mem;
    void *encoded;                      /* (BT,C) R */
    shs__llama_acts_t *layer;           /* L; what a layer does not keep points into `shared` */
    shs__llama_acts_t shared;           /* one layer's worth, for the layers that recompute */
    void *lnf;                          /* (BT,C) A */
    float *rstdf;                       /* (BT) */
    float *logits, *probs, *losses;     /* (BT,V), (BT,V), (BT): logits hold A-rounded values */
    float *loss_sum;                    /* (1) */
    float *dres, *dbtc, *dpost;         /* (BT,C) */
    float *datty, *dq, *dqr, *dqn;      /* (BT,QD) */
    float *dk, *dkr, *dkn, *dv;         /* (BT,KVD) */
    float *dgate, *dup, *dact;          /* (BT,I) */
    float *datt;                        /* eager: (B,NH,T,T) */
    float *dlogits;                     /* (BT,V) */
    float *proj;                        /* (BT,C) a branch's output before its residual add */
    float *wa, *wb, *wc;                /* 16-bit A: (BT,max(C,QD,I)) f32 views */
    float *wk, *wv;                     /* 16-bit A: (BT,KVD) f32 views of k and v (and kp) */
    float *wt;                          /* 16-bit A, eager: (B,NH,T,T) f32 view of att */
    float *wx, *wr;                     /* 16-bit R: (BT,C) f32 views of a layer's input and res2 */
    float *wplus, *ones;                /* norm_plus_one: (max(C, QD)) the (1 + w) weight, and ones */
    float *wqkv, *dwqkv;                /* InternLM2: (QD+2KVD, C) + (QD+2KVD) wqkv (and its bias) in
                                         * the order q, k, v, and their gradients */
    float *inv_freq, *inv_local, *inv_long; /* (R/2) each: global, windowed layers', longrope's long */
    const float *inv_cur;               /* the global frequencies of the current batch */
    float mscale;                       /* shs_llama_rope_mscale */
    int32_t *tokens, *targets, *positions, *doc_ids; /* (BT) device each */
    int has_positions, has_doc_ids;     /* the last forward's batch had them */
    int64_t num_targets;                /* the last forward's counted targets */
    int head_unit;                      /* 0 tied, else L+2 */
    const float *head_params;           /* head unit as kept resident from forward to backward */
} shs__llama_t;

/* Pointers to layer l's slots inside a flat unit buffer `base` (parameters
 * or gradients: same layout); NULL for slots the config lacks. */
void shs__llama_layer_views(const shs__llama_t *g, const float *base, const float *p[SHS__LP_COUNT]);
/* Layer l's forward from its input x (BT,C) stored as R into g->layer[l]
 * (res3 its output). op_recompute: op-level SAC's recompute before the
 * layer's backward: the ops whose outputs the layer kept do not run again,
 * nor what follows the last value backward reads (torch's checkpoint stops
 * early there). */
void shs__llama_layer_forward(shs__llama_t *g, int l, const void *x, const float *const p[SHS__LP_COUNT],
                              int op_recompute);
/* Whether layer l keeps a buffer of `role` (model/recompute.h) that is the
 * output of projection `lin` (SHS__LIN_*, or -1). */
int shs__llama_kept(const shs__llama_t *g, int l, int role, int lin);
/* Its backward: g->dres holds d(loss)/d(output) on entry and d(loss)/d(x)
 * on exit; parameter gradients accumulate into gw (f32). */
void shs__llama_layer_backward(shs__llama_t *g, int l, const void *x, const float *const p[SHS__LP_COUNT],
                               const float *const gw[SHS__LP_COUNT]);
/* An RMSNorm in f32 with the config's weight convention (w, or 1 + w) and eps. */
void shs__llama_norm_forward(shs__llama_t *g, float *out, float *rstd, const float *x, const float *w, int N, int C);
void shs__llama_norm_backward(shs__llama_t *g, float *dx, float *dw, const float *dy, const float *x, const float *w,
                              const float *rstd, int N, int C);
/* An RMSNorm of x32 (BT,C) into `copies` A copies of ln (its output as
 * the following linears read it); without a weight (w NULL) the A casts of
 * x32 itself. */
void shs__llama_norm_to_copies(shs__llama_t *g, void *ln, int copies, float *rstd, const float *x32, const float *w);
/* Copy i of a (BT,C) A tensor stored as copies. */
void *shs__llama_copy(const shs__llama_t *g, void *ln, int i);

#endif
