/* llama_model.c - the Llama-family decoder's forward and backward passes
 * (llama.h): its activation buffers and what each layer keeps for backward
 * (recompute, autocast dtypes), all math through the device interface.
 * What it is not: the config, parameter count or layout (llama.c), sharding
 * or optimization, or the GPT (gpt.c).
 * Legend: B sequences, T context, C hidden, NH heads, NKV key/value heads,
 * HD head dim, KVD = NKV*HD, I intermediate, L layers, V vocabulary.
 *
 * Dtypes (llama.h gives the rules): A, the activation dtype (autocast's,
 * else f32); R, the residual stream's (A when the parameters are A, else
 * f32); statistics, the log-sum-exp, logits and losses f32. Kernels work in
 * f32: a 16-bit tensor is read through a view and written through a commit
 * (model/autocast.h), with f32 work buffers shared by every layer.
 */
#include "shardsim/llama.h"

#include <stdlib.h>
#include <string.h>

#include "model/autocast.h"
#include "model/carver.h"
#include "model/loss_gpu_memory.h"
#include "model/recompute.h"

/* Tensors per decoder layer, in the order shs_llama_layout_create adds them. */
enum { P_LN1, P_Q, P_K, P_V, P_QB, P_KB, P_VB, P_O, P_LN2, P_GATE, P_UP, P_DOWN, P_COUNT };
/* The layer's linears in forward order (op-level SAC counts them). */
enum { LIN_Q, LIN_K, LIN_V, LIN_O, LIN_GATE, LIN_UP, LIN_DOWN, LIN_COUNT };

/* ---- activations ------------------------------------------------------------ */

typedef struct {
    float *rstd1;                       /* (BT) */
    void *ln1;                          /* (n1,BT,C) A: one copy per q/k/v projection (n1 below) */
    void *qp, *kp;                      /* (BT,C), (BT,KVD) A: q and k before RoPE, kept apart from q and k
                                         * only when op-level SAC saves their projections, else NULL */
    void *q, *k, *v;                    /* (BT,C), (BT,KVD), (BT,KVD) A: q and k rotated */
    void *att;                          /* eager: (B,NH,T,T) A */
    float *lse;                         /* flash: (B,NH,T) */
    void *atty;                         /* (BT,C) A: the attention output */
    void *oproj, *dproj;                /* (BT,C) A: o_proj and down_proj outputs, kept only when op-level
                                         * SAC saves them, else NULL (they go through `proj`) */
    void *res2;                         /* (BT,C) R: after the attention residual */
    float *rstd2;                       /* (BT) */
    void *ln2;                          /* (n2,BT,C) A: one copy per gate/up projection */
    void *gate, *up, *act;              /* (BT,I) A */
    void *res3;                         /* (BT,C) R: the layer output */
} layer_acts_t;

typedef struct {
    shs_model_t base;                   /* ops: llama_ops */
    shs_llama_config_t cfg;
    shs_gpt_exec_t ex;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B, T;
    shs__amp_t amp;                     /* A, R, weight rounding (amp.ww in work_mem) */
    int n1, n2;                         /* copies of ln1 / ln2: 3 / 2 when R is f32 and A is not (autocast
                                         * casts an activation once per op that reads it), else 1 */
    void *acts_mem, *scratch_mem, *work_mem;
    void *encoded;                      /* (BT,C) R */
    layer_acts_t *layer;                /* L; what a layer does not keep points into `shared` */
    layer_acts_t shared;                /* one layer's worth, for the layers that recompute */
    unsigned op_saved;                  /* op-level SAC: the LIN_ linears whose outputs it saves */
    void *lnf;                          /* (BT,C) A */
    float *rstdf;                       /* (BT) */
    float *logits, *probs, *losses;     /* (BT,V), (BT,V), (BT): logits hold A-rounded values */
    float *loss_sum;                    /* (1) */
    float *inv_freq;                    /* (HD/2) */
    float *dres, *dbtc, *dq, *dqr;      /* (BT,C) */
    float *dk, *dkr, *dv;               /* (BT,KVD) */
    float *dgate, *dup, *dact;          /* (BT,I) */
    float *datt;                        /* eager: (B,NH,T,T) */
    float *dlogits;                     /* (BT,V) */
    float *proj;                        /* (BT,C) a projection before its residual add */
    float *wa, *wb, *wc;                /* 16-bit A: (BT,max(C,I)) f32 views */
    float *wk, *wv;                     /* 16-bit A: (BT,KVD) f32 views of k and v */
    float *wt;                          /* 16-bit A, eager: (B,NH,T,T) f32 view of att */
    float *wx, *wr;                     /* 16-bit R: (BT,C) f32 views of a layer's input and res2 */
    int32_t *tokens, *targets, *positions, *doc_ids; /* (BT) device each */
    int has_positions, has_doc_ids;     /* the last forward's batch had them */
    int64_t num_targets;                /* the last forward's counted targets */
    int head_unit;                      /* 0 tied, else L+2 */
    const float *head_params;           /* head unit as kept resident from forward to backward */
} shs_llama_t;

/* Whether the linear lin (-1: none) is one op-level SAC saves. */
static int mm_saved(const shs_llama_t *g, int lin) { return lin >= 0 && (g->op_saved >> lin & 1); }
/* Whether layer l keeps a buffer of `role` (recompute.h) that is the output
 * of linear lin; projection outputs it does not keep alias q or k, or go
 * through proj. */
static int kept(const shs_llama_t *g, int l, shs__act_role_t role, int lin) {
    return shs__ac_keeps(&g->ex, l, role, mm_saved(g, lin));
}

/* Per-layer buffers: name, elements, element size, role, the linear whose output it is (or -1). */
#define LAYER_BUFS(X)                                                                                           \
    X(rstd1, BT, 4, R_SAVED, -1) X(ln1, g->n1 * BTC, a, R_SAVED, -1) X(qp, BTC, a, R_MM, LIN_Q)                    \
    X(kp, BTK, a, R_MM, LIN_K) X(q, BTC, a, R_SAVED, -1) X(k, BTK, a, R_SAVED, -1) X(v, BTK, a, R_SAVED, LIN_V)    \
    X(att, eager ? TT : 0, a, R_PROBS, -1) X(lse, eager ? 0 : B * NH * T, 4, R_ATTN, -1)                          \
    X(atty, BTC, a, R_ATTN, -1) X(oproj, BTC, a, R_MM, LIN_O) X(res2, BTC, r, R_SAVED, -1)                         \
    X(rstd2, BT, 4, R_SAVED, -1) X(ln2, g->n2 * BTC, a, R_SAVED, -1) X(gate, BTI, a, R_SAVED, LIN_GATE)            \
    X(up, BTI, a, R_SAVED, LIN_UP) X(act, BTI, a, R_SAVED, -1) X(dproj, BTC, a, R_MM, LIN_DOWN)                    \
    X(res3, BTC, r, R_OUT, -1)

#define DIMS(g)                                                                                                  \
    const shs_llama_config_t *c = &(g)->cfg;                                                                     \
    size_t B = (size_t)(g)->B, T = (size_t)(g)->T, C = (size_t)c->hidden, NH = (size_t)c->num_heads;             \
    size_t HD = C / NH, BT = B * T, BTC = BT * C, BTK = BT * (size_t)c->num_kv_heads * HD;                       \
    size_t BTI = BT * (size_t)c->intermediate, TT = B * NH * T * T, V = (size_t)c->vocab;                        \
    size_t a = shs_dtype_size((g)->amp.A), r = shs_dtype_size((g)->amp.R);                                       \
    int eager = (g)->ex.attention == SHS_ATTENTION_EAGER;                                                        \
    (void)BTK; (void)BTI; (void)TT; (void)V; (void)HD; (void)a; (void)r; (void)eager

/* The forward activations: the embedding output, each layer's kept
 * buffers, one shared set for what some layer does not keep, the final
 * norm, logits and loss. */
static void layout_acts(shs_llama_t *g, void *base, size_t *total) {
    DIMS(g);
    int L = c->num_layers;
    shs__carver_t k = {base, 0, 0};
    for (k.es = 4; k.es >= 2; k.es /= 2) {
        shs__carve(&k, &g->encoded, BTC, r);
        for (int l = 0; l < L; l++) {
            layer_acts_t *la = &g->layer[l];
#define CARVE(f, n, es, role, lin) if (kept(g, l, role, lin)) shs__carve(&k, &la->f, n, es);
            LAYER_BUFS(CARVE)
#undef CARVE
        }
#define CARVE_SHARED(f, n, es, role, lin)                                                                      \
        if (shs__ac_shared_needed(&g->ex, L, role, mm_saved(g, lin))) shs__carve(&k, &g->shared.f, n, es);
        LAYER_BUFS(CARVE_SHARED)
#undef CARVE_SHARED
        shs__carve(&k, &g->lnf, BTC, a);
        shs__carve(&k, &g->rstdf, BT, 4);
        shs__carve(&k, &g->logits, BT * V, 4);
        shs__carve(&k, &g->probs, BT * V, 4);
        shs__carve(&k, &g->losses, BT, 4);
        shs__carve(&k, &g->loss_sum, 1, 4);
        shs__carve(&k, &g->inv_freq, HD / 2, 4);
    }
    for (int l = 0; l < L; l++) {
#define SHARE(f, n, es, role, lin) if (!kept(g, l, role, lin)) g->layer[l].f = g->shared.f;
        LAYER_BUFS(SHARE)
#undef SHARE
    }
    *total = k.cur;
}

static void layout_scratch(shs_llama_t *g, void *base, size_t *total) {
    DIMS(g);
    shs__carver_t k = {base, 0, 4};
    shs__carve(&k, &g->dres, BTC, 4);
    shs__carve(&k, &g->dbtc, BTC, 4);
    shs__carve(&k, &g->dq, BTC, 4);
    shs__carve(&k, &g->dqr, BTC, 4);
    shs__carve(&k, &g->dk, BTK, 4);
    shs__carve(&k, &g->dkr, BTK, 4);
    shs__carve(&k, &g->dv, BTK, 4);
    shs__carve(&k, &g->dgate, BTI, 4);
    shs__carve(&k, &g->dup, BTI, 4);
    shs__carve(&k, &g->dact, BTI, 4);
    shs__carve(&k, &g->datt, eager ? TT : 0, 4);
    shs__carve(&k, &g->dlogits, BT * V, 4);
    shs__carve(&k, &g->proj, BTC, 4);
    *total = k.cur;
}

/* The autocast emulation's f32 work: views of 16-bit activations and the
 * rounded weights (none without autocast). */
static void layout_work(shs_llama_t *g, void *base, size_t *total) {
    DIMS(g);
    int a16 = g->amp.A != SHS_F32, r16 = g->amp.R != SHS_F32;
    size_t wide = BTI > BTC ? BTI : BTC, I = (size_t)c->intermediate;
    size_t ww = C * C + C; /* the q projection and its bias */
    ww = I * C > ww ? I * C : ww;
    ww = V * C > ww ? V * C : ww;
    shs__carver_t k = {base, 0, 4};
    shs__carve(&k, &g->wa, a16 ? wide : 0, 4);
    shs__carve(&k, &g->wb, a16 ? wide : 0, 4);
    shs__carve(&k, &g->wc, a16 ? wide : 0, 4);
    shs__carve(&k, &g->wk, a16 ? BTK : 0, 4);
    shs__carve(&k, &g->wv, a16 ? BTK : 0, 4);
    shs__carve(&k, &g->wt, a16 && eager ? TT : 0, 4);
    shs__carve(&k, &g->wx, r16 ? BTC : 0, 4);
    shs__carve(&k, &g->wr, r16 ? BTC : 0, 4);
    shs__carve(&k, &g->amp.ww, g->amp.round_weights ? ww : 0, 4);
    *total = k.cur;
}

static const shs_model_ops_t llama_ops;
static void llama_destroy(shs_model_t *m);

shs_status_t shs_llama_create(shs_model_t **out, const shs_layout_t *layout, const shs_llama_config_t *cfg,
                              shs_device_t *dev, int B, int T, const shs_gpt_exec_t *ex) {
    *out = NULL;
    SHS_CHECK(shs_llama_config_validate(cfg));
    SHS_CHECK(shs_gpt_exec_validate(ex));
    if (ex->dropout != 0.0f)
        return shs_set_error(SHS_UNSUPPORTED, "the Llama model has no dropout (got dropout %g)", (double)ex->dropout);
    int nunits = cfg->num_layers + (cfg->tie_word_embeddings ? 2 : 3);
    if (layout->num_units != nunits)
        return shs_set_error(SHS_INVALID_ARG, "layout has %d units, a Llama with %d layers and a%s head needs %d",
                             layout->num_units, cfg->num_layers, cfg->tie_word_embeddings ? " tied" : "n untied",
                             nunits);
    if (B < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 (got %d)", B);
    if (T < 1 || T > cfg->max_position)
        return shs_set_error(SHS_INVALID_ARG, "context %d must be in 1..max_position_embeddings (%d)", T,
                             cfg->max_position);
    if (!shs_device_supports(dev, SHS_KERNELS_LLAMA))
        return shs_set_error(SHS_UNSUPPORTED,
                             "the %s backend has no Llama kernels (RMSNorm, RoPE, SwiGLU, grouped-query attention); "
                             "the cpu and meta backends have them", shs_device_backend(dev));
    if (ex->attention == SHS_ATTENTION_FLASH && !shs_device_supports(dev, SHS_KERNELS_FLASH_ATTENTION))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no kernels for attention flash",
                             shs_device_backend(dev));
    int autocast = ex->autocast == SHS_BF16 || ex->autocast == SHS_F16;
    if (autocast && !shs_device_supports(dev, SHS_KERNELS_ROUND))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no kernels for autocast", shs_device_backend(dev));
    shs_llama_t *g = calloc(1, sizeof *g);
    if (!g) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    g->base.ops = &llama_ops;
    g->cfg = *cfg;
    g->ex = *ex;
    g->layout = layout;
    g->dev = dev;
    g->B = B;
    g->T = T;
    shs__amp_setup(&g->amp, dev, ex);
    g->n1 = g->amp.A != g->amp.R ? 3 : 1;
    g->n2 = g->amp.A != g->amp.R ? 2 : 1;
    const int has_bias[LIN_COUNT] = {cfg->qkv_bias, cfg->qkv_bias, cfg->qkv_bias, 0, 0, 0, 0};
    g->op_saved = shs__ac_op_saved_linears(has_bias, LIN_COUNT);
    g->head_unit = cfg->tie_word_embeddings ? 0 : cfg->num_layers + 2;
    g->layer = calloc((size_t)cfg->num_layers, sizeof *g->layer);
    shs_status_t st = SHS_OK;
    float *inv = malloc((size_t)(cfg->hidden / cfg->num_heads / 2) * sizeof(float) + sizeof(float));
    if (!g->layer || !inv) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    size_t n_acts, n_scratch, n_work, BT = (size_t)B * (size_t)T;
    layout_acts(g, NULL, &n_acts);
    layout_scratch(g, NULL, &n_scratch);
    layout_work(g, NULL, &n_work);
    /* the GPU ledger (device.h): the f32 logits and probabilities are the loss's, which the GPU holds at
     * its own peak (loss_gpu_memory.h), before the layers' backward needs the rest of the scratch (the
     * gradients, in dtype A there); the f32 work is the emulation's alone */
    size_t V = (size_t)cfg->vocab, a = shs_dtype_size(g->amp.A), grads = (n_scratch - 4 * BT * V) / 4 * a;
    size_t loss = shs__loss_gpu_bytes(BT, V, a, ex->loss_kernel);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->acts_mem, n_acts, n_acts - 8 * BT * V, SHS_MEM_ACTIVATIONS,
                                            "forward activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->scratch_mem, n_scratch, loss > grads ? loss : grads,
                                            SHS_MEM_ACTIVATIONS, "backward scratch"), st, fail);
    if (n_work)
        SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->work_mem, n_work, 0, SHS_MEM_ACTIVATIONS,
                                                "autocast f32 work (views of 16-bit activations, rounded weights)"),
                       st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->tokens, 4 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    g->targets = g->tokens + BT;
    g->positions = g->tokens + 2 * BT;
    g->doc_ids = g->tokens + 3 * BT;
    layout_acts(g, g->acts_mem, &n_acts);
    layout_scratch(g, g->scratch_mem, &n_scratch);
    layout_work(g, g->work_mem, &n_work);
    shs_llama_inv_freq(cfg, inv);
    SHS_CHECK_GOTO(shs_memcpy_h2d(dev, g->inv_freq, inv, (size_t)(cfg->hidden / cfg->num_heads / 2) * sizeof(float)),
                   st, fail);
    free(inv);
    *out = &g->base;
    return SHS_OK;
fail:
    free(inv);
    llama_destroy(&g->base);
    return st;
}

static void llama_destroy(shs_model_t *m) {
    shs_llama_t *g = (shs_llama_t *)m;
    if (!g) return;
    shs_device_free(g->dev, g->acts_mem);
    shs_device_free(g->dev, g->scratch_mem);
    shs_device_free(g->dev, g->work_mem);
    shs_device_free(g->dev, g->tokens);
    free(g->layer);
    free(g);
}

/* ---- layer parameter views ---------------------------------------------------- */

/* Pointers to a layer unit's tensors inside a flat buffer `base` (parameters
 * or gradients: same layout); the bias entries are NULL without qkv_bias. */
static void layer_views(const shs_llama_t *g, int l, const float *base, const float *p[P_COUNT]) {
    const shs_layout_t *lo = g->layout;
    const shs_tensor_info_t *t = &lo->tensors[lo->units[1 + l].first_tensor];
    int bias = g->cfg.qkv_bias, i = 0;
    for (int k = 0; k < P_COUNT; k++) {
        int is_bias = k == P_QB || k == P_KB || k == P_VB;
        p[k] = is_bias && !bias ? NULL : base + t[i++].offset;
    }
}

/* ---- forward -------------------------------------------------------------------- */

static const int32_t *pos_arg(const shs_llama_t *g) { return g->has_positions ? g->positions : NULL; }
static const int32_t *doc_arg(const shs_llama_t *g) { return g->has_doc_ids ? g->doc_ids : NULL; }

/* Copy i of a norm output stored as `copies` (BT,C) A tensors. */
static void *norm_copy(const shs_llama_t *g, void *ln, int i) {
    return (char *)ln + (size_t)i * (size_t)g->B * (size_t)g->T * (size_t)g->cfg.hidden * shs_dtype_size(g->amp.A);
}

/* RMSNorm of x32 (f32) with its f32 statistics into `copies` A copies of ln. */
static void norm_forward(shs_llama_t *g, void *ln, int copies, float *rstd, const float *x32, const float *w) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    float *o = shs__amp_target(ln, g->amp.A, g->wa);
    shs_rmsnorm_forward(g->dev, o, rstd, x32, w, BT, C, g->cfg.rms_norm_eps);
    for (int i = 0; i < copies; i++) shs__amp_commit(&g->amp, norm_copy(g, ln, i), g->amp.A, o, (size_t)BT * C);
}

/* out (BT,OC) A = the autocast linear of a stored (BT,C) A input. */
static void linear_forward(shs_llama_t *g, void *out, const void *inp, const float *w, const float *bias, int C,
                           int OC) {
    int BT = g->B * g->T;
    float *o = shs__amp_target(out, g->amp.A, g->wb);
    shs__amp_matmul(&g->amp, o, shs__amp_view(&g->amp, inp, g->amp.A, g->wa, (size_t)BT * C), w, bias, BT, C, OC, 0);
    shs__amp_commit(&g->amp, out, g->amp.A, o, (size_t)BT * OC);
}

/* RoPE in place on a stored (BT, heads*HD) A tensor (computed in f32, the
 * result rounded to A once). */
static void rope_forward(shs_llama_t *g, void *out, const void *inp, int heads) {
    int HD = g->cfg.hidden / g->cfg.num_heads;
    size_t n = (size_t)g->B * g->T * heads * HD;
    const float *x32 = shs__amp_view(&g->amp, inp, g->amp.A, g->wb, n);
    float *o = shs__amp_target(out, g->amp.A, g->wb); /* 16-bit: in place on the view */
    shs_rope_forward(g->dev, o, x32, pos_arg(g), g->inv_freq, g->B, g->T, heads, HD);
    shs__amp_commit(&g->amp, out, g->amp.A, o, n);
}

/* A projection whose output only feeds a residual add (o_proj, down_proj)
 * from a stored (BT,K) A input: its f32, A-rounded output, computed into
 * proj or into `saved` (op-level SAC keeps it: NULL otherwise), or with
 * `reuse` read back from `saved`. */
static const float *proj_forward(shs_llama_t *g, void *saved, int reuse, const void *inp, const float *w, int K) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    size_t n = (size_t)BT * C;
    if (reuse) return shs__amp_view(&g->amp, saved, g->amp.A, g->proj, n);
    float *o = saved ? shs__amp_target(saved, g->amp.A, g->proj) : g->proj;
    shs__amp_matmul(&g->amp, o, shs__amp_view(&g->amp, inp, g->amp.A, g->wa, (size_t)BT * K), w, NULL, BT, K, C, 1);
    if (saved) shs__amp_commit(&g->amp, saved, g->amp.A, o, n);
    return o;
}

/* The attention core of layer l from its stored q, k, v into `out` (f32). */
static void attention_core_forward(shs_llama_t *g, int l, float *out) {
    DIMS(g);
    int NKV = c->num_kv_heads;
    layer_acts_t *la = &g->layer[l];
    const float *q = shs__amp_view(&g->amp, la->q, g->amp.A, g->wa, BTC);
    const float *k = shs__amp_view(&g->amp, la->k, g->amp.A, g->wk, BTK);
    const float *v = shs__amp_view(&g->amp, la->v, g->amp.A, g->wv, BTK);
    if (!eager) {
        shs_attention_gqa_forward_flash(g->dev, out, la->lse, q, k, v, doc_arg(g), g->B, g->T, (int)NH, NKV, (int)HD);
        return;
    }
    float *att = shs__amp_target(la->att, g->amp.A, g->wt);
    shs_attention_gqa_forward(g->dev, out, att, q, k, v, doc_arg(g), g->B, g->T, (int)NH, NKV, (int)HD);
    shs__amp_commit(&g->amp, la->att, g->amp.A, att, TT);
}

/* x: the layer input (stored as R). op_recompute: op-level SAC's recompute
 * before the layer's backward: the ops whose outputs the layer kept do not
 * run again, nor what follows the last value backward reads (down_proj and
 * the residual: torch's checkpoint stops early there). */
static void layer_forward(shs_llama_t *g, int l, const void *x, const float *const p[P_COUNT], int op_recompute) {
    DIMS(g);
    int Ci = (int)C, KVD = c->num_kv_heads * (int)HD, I = c->intermediate;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    shs_dtype_t A = amp->A, R = amp->R;
    layer_acts_t *la = &g->layer[l];
    const float *x32 = shs__amp_view(amp, x, R, g->wx, BTC);
#define RUN(role, lin) (!(op_recompute && kept(g, l, role, lin)))
    norm_forward(g, la->ln1, g->n1, la->rstd1, x32, p[P_LN1]);
    void *qp = la->qp ? la->qp : la->q, *kp = la->kp ? la->kp : la->k;
    if (RUN(R_MM, LIN_Q)) linear_forward(g, qp, norm_copy(g, la->ln1, 0), p[P_Q], p[P_QB], Ci, Ci);
    if (RUN(R_MM, LIN_K)) linear_forward(g, kp, norm_copy(g, la->ln1, g->n1 > 1 ? 1 : 0), p[P_K], p[P_KB], Ci, KVD);
    if (RUN(R_SAVED, LIN_V))
        linear_forward(g, la->v, norm_copy(g, la->ln1, g->n1 > 2 ? 2 : 0), p[P_V], p[P_VB], Ci, KVD);
    rope_forward(g, la->q, qp, (int)NH);
    rope_forward(g, la->k, kp, c->num_kv_heads);
    if (RUN(R_ATTN, -1)) {
        float *o = shs__amp_target(la->atty, A, g->wb);
        attention_core_forward(g, l, o);
        shs__amp_commit(amp, la->atty, A, o, BTC);
    }
    const float *proj = proj_forward(g, la->oproj, op_recompute && la->oproj, la->atty, p[P_O], Ci);
    float *o = shs__amp_target(la->res2, R, g->wr);
    shs_residual_forward(d, o, x32, proj, BTC);
    shs__amp_commit(amp, la->res2, R, o, BTC);
    const float *res2 = shs__amp_view(amp, la->res2, R, g->wr, BTC);
    norm_forward(g, la->ln2, g->n2, la->rstd2, res2, p[P_LN2]);
    if (RUN(R_SAVED, LIN_GATE)) linear_forward(g, la->gate, norm_copy(g, la->ln2, 0), p[P_GATE], NULL, Ci, I);
    if (RUN(R_SAVED, LIN_UP))
        linear_forward(g, la->up, norm_copy(g, la->ln2, g->n2 > 1 ? 1 : 0), p[P_UP], NULL, Ci, I);
#undef RUN
    o = shs__amp_target(la->act, A, g->wc);
    shs_swiglu_forward(d, o, shs__amp_view(amp, la->gate, A, g->wa, BTI), shs__amp_view(amp, la->up, A, g->wb, BTI),
                       BTI);
    shs__amp_commit(amp, la->act, A, o, BTI);
    if (op_recompute) return;
    proj = proj_forward(g, la->dproj, 0, la->act, p[P_DOWN], I);
    o = shs__amp_target(la->res3, R, g->wr); /* may alias res2's view: residual_forward allows it */
    shs_residual_forward(d, o, res2, proj, BTC);
    shs__amp_commit(amp, la->res3, R, o, BTC);
}

/* The head's weight inside its unit's flat parameter (or gradient) buffer. */
static size_t head_offset(const shs_llama_t *g) {
    const shs_layout_t *lo = g->layout;
    return lo->tensors[lo->units[g->head_unit].first_tensor].offset;
}

static shs_status_t llama_forward(shs_model_t *m, shs_param_source_t *src, const shs_batch_t *batch,
                                  float *mean_loss) {
    shs_llama_t *g = (shs_llama_t *)m;
    const shs_layout_t *lo = g->layout;
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, C = c->hidden, L = c->num_layers, BT = B * T, V = c->vocab;
    size_t btc = (size_t)BT * C;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    size_t tok_bytes = (size_t)BT * sizeof(int32_t);
    g->num_targets = shs_batch_num_targets(batch, (size_t)BT);
    if (g->num_targets < BT && !shs_device_supports(d, SHS_KERNELS_IGNORE_INDEX))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no cross-entropy with ignored targets (%d of %d "
                             "targets are %d)", shs_device_backend(d), (int)(BT - g->num_targets), BT,
                             SHS_IGNORE_INDEX);
    SHS_CHECK(shs_memcpy_h2d(d, g->tokens, batch->tokens, tok_bytes));
    SHS_CHECK(shs_memcpy_h2d(d, g->targets, batch->targets, tok_bytes));
    g->has_positions = batch->positions != NULL;
    g->has_doc_ids = batch->doc_ids != NULL;
    if (batch->positions) SHS_CHECK(shs_memcpy_h2d(d, g->positions, batch->positions, tok_bytes));
    if (batch->doc_ids) SHS_CHECK(shs_memcpy_h2d(d, g->doc_ids, batch->doc_ids, tok_bytes));

    const float *emb;
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    float *o = shs__amp_target(g->encoded, amp->R, g->wx);
    shs_encoder_forward(d, o, g->tokens, emb + lo->tensors[lo->units[0].first_tensor].offset, NULL, B, T, C);
    shs__amp_commit(amp, g->encoded, amp->R, o, btc);
    SHS_CHECK(src->release_params(src->self, 0));

    const void *x = g->encoded;
    for (int l = 0; l < L; l++) {
        const float *w, *p[P_COUNT];
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        layer_views(g, l, w, p);
        layer_forward(g, l, x, p, 0);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        x = g->layer[l].res3;
    }

    const float *nw;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    norm_forward(g, g->lnf, 1, g->rstdf, shs__amp_view(amp, x, amp->R, g->wx, btc),
                 nw + lo->tensors[lo->units[L + 1].first_tensor].offset);
    SHS_CHECK(src->release_params(src->self, L + 1));

    /* the head (unit 0 tied, else its own unit) stays resident for the
     * backward pass, which starts with it (FSDP keeps the last unit unsharded) */
    const float *hw;
    SHS_CHECK(src->acquire_params(src->self, g->head_unit, &hw));
    g->head_params = hw;
    shs__amp_matmul(amp, g->logits, shs__amp_view(amp, g->lnf, amp->A, g->wa, btc), hw + head_offset(g), NULL, BT, C,
                    V, 1);
    shs_softmax_xent_forward(d, g->losses, g->probs, g->logits, g->targets, BT, V);
    shs_sum(d, g->loss_sum, g->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, g->loss_sum, sizeof sum));
    *mean_loss = g->num_targets ? sum / (float)g->num_targets : 0.0f;
    return SHS_OK;
}

/* ---- backward -------------------------------------------------------------------- */

/* dres (BT,C) holds d(loss)/d(layer output) on entry and d(loss)/d(layer
 * input) on exit; parameter gradients accumulate into gw. Gradients stay
 * f32 (the autocast emulation rounds what the forward stores, not them). */
static void layer_backward(shs_llama_t *g, int l, const void *x, const float *const p[P_COUNT],
                           const float *const gw_c[P_COUNT]) {
    DIMS(g);
    int Bi = g->B, Ti = g->T, BTi = (int)BT, Ci = (int)C, NHi = (int)NH, NKV = c->num_kv_heads, HDi = (int)HD;
    int KVD = NKV * HDi, I = c->intermediate;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    shs_dtype_t A = amp->A, R = amp->R;
    layer_acts_t *la = &g->layer[l];
#define W(k) ((float *)gw_c[k])
#define VIEW(t, work, n) shs__amp_view(amp, t, A, work, n)
    /* res3 = res2 + down(swiglu(gate(ln2), up(ln2))) */
    shs_memset(d, g->dact, 0, BTI * sizeof(float));
    shs__amp_matmul_backward(amp, g->dact, W(P_DOWN), NULL, g->dres, VIEW(la->act, g->wa, BTI), p[P_DOWN], BTi, I, Ci);
    shs_memset(d, g->dgate, 0, BTI * sizeof(float));
    shs_memset(d, g->dup, 0, BTI * sizeof(float));
    shs_swiglu_backward(d, g->dgate, g->dup, g->dact, VIEW(la->gate, g->wa, BTI), VIEW(la->up, g->wb, BTI), BTI);
    shs_memset(d, g->dbtc, 0, BTC * sizeof(float));
    shs__amp_matmul_backward(amp, g->dbtc, W(P_GATE), NULL, g->dgate, VIEW(norm_copy(g, la->ln2, 0), g->wa, BTC),
                             p[P_GATE], BTi, Ci, I);
    shs__amp_matmul_backward(amp, g->dbtc, W(P_UP), NULL, g->dup,
                             VIEW(norm_copy(g, la->ln2, g->n2 > 1 ? 1 : 0), g->wa, BTC), p[P_UP], BTi, Ci, I);
    shs_rmsnorm_backward(d, g->dres, W(P_LN2), g->dbtc, shs__amp_view(amp, la->res2, R, g->wr, BTC), p[P_LN2],
                         la->rstd2, BTi, Ci);
    /* res2 = x + o(attention(rope(q(ln1)), rope(k(ln1)), v(ln1))) */
    shs_memset(d, g->dbtc, 0, BTC * sizeof(float));
    shs__amp_matmul_backward(amp, g->dbtc, W(P_O), NULL, g->dres, VIEW(la->atty, g->wc, BTC), p[P_O], BTi, Ci, Ci);
    /* selective recompute: the probabilities again (same bits) */
    if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE && eager) attention_core_forward(g, l, g->proj);
    shs_memset(d, g->dqr, 0, BTC * sizeof(float));
    shs_memset(d, g->dkr, 0, BTK * sizeof(float));
    shs_memset(d, g->dv, 0, BTK * sizeof(float));
    const float *q = VIEW(la->q, g->wa, BTC), *k = VIEW(la->k, g->wk, BTK), *v = VIEW(la->v, g->wv, BTK);
    if (!eager)
        shs_attention_gqa_backward_flash(d, g->dqr, g->dkr, g->dv, g->dbtc, q, k, v, VIEW(la->atty, g->wc, BTC),
                                         la->lse, doc_arg(g), Bi, Ti, NHi, NKV, HDi);
    else
        shs_attention_gqa_backward(d, g->dqr, g->dkr, g->dv, g->datt, g->dbtc, q, k, v, VIEW(la->att, g->wt, TT), Bi,
                                   Ti, NHi, NKV, HDi);
    shs_memset(d, g->dq, 0, BTC * sizeof(float));
    shs_memset(d, g->dk, 0, BTK * sizeof(float));
    shs_rope_backward(d, g->dq, g->dqr, pos_arg(g), g->inv_freq, Bi, Ti, NHi, HDi);
    shs_rope_backward(d, g->dk, g->dkr, pos_arg(g), g->inv_freq, Bi, Ti, NKV, HDi);
    shs_memset(d, g->dbtc, 0, BTC * sizeof(float));
    shs__amp_matmul_backward(amp, g->dbtc, W(P_Q), W(P_QB), g->dq, VIEW(norm_copy(g, la->ln1, 0), g->wa, BTC), p[P_Q],
                             BTi, Ci, Ci);
    shs__amp_matmul_backward(amp, g->dbtc, W(P_K), W(P_KB), g->dk,
                             VIEW(norm_copy(g, la->ln1, g->n1 > 1 ? 1 : 0), g->wa, BTC), p[P_K], BTi, Ci, KVD);
    shs__amp_matmul_backward(amp, g->dbtc, W(P_V), W(P_VB), g->dv,
                             VIEW(norm_copy(g, la->ln1, g->n1 > 2 ? 2 : 0), g->wa, BTC), p[P_V], BTi, Ci, KVD);
    shs_rmsnorm_backward(d, g->dres, W(P_LN1), g->dbtc, shs__amp_view(amp, x, R, g->wx, BTC), p[P_LN1], la->rstd1,
                         BTi, Ci);
#undef VIEW
#undef W
}

static shs_status_t llama_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    shs_llama_t *g = (shs_llama_t *)m;
    const shs_layout_t *lo = g->layout;
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, C = c->hidden, L = c->num_layers, BT = B * T, V = c->vocab;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    size_t btc = (size_t)BT * C;
    const void *x_last = g->layer[L - 1].res3;

    /* LM head: still resident from the forward's last acquire */
    const float *hw = g->head_params;
    float *dhw;
    SHS_ASSERT(hw);
    g->head_params = NULL;
    SHS_CHECK(src->acquire_grads(src->self, g->head_unit, &dhw));
    shs_softmax_xent_backward(d, g->dlogits, g->probs, g->targets,
                              g->num_targets ? dloss / (float)g->num_targets : 0.0f, BT, V);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs__amp_matmul_backward(amp, g->dbtc, dhw + head_offset(g), NULL, g->dlogits,
                             shs__amp_view(amp, g->lnf, amp->A, g->wa, btc), hw + head_offset(g), BT, C, V);
    SHS_CHECK(src->release_params(src->self, g->head_unit));
    if (g->head_unit != 0) SHS_CHECK(src->grads_ready(src->self, g->head_unit));

    /* final RMSNorm */
    const float *nw;
    float *dnw;
    size_t off = lo->tensors[lo->units[L + 1].first_tensor].offset;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    SHS_CHECK(src->acquire_grads(src->self, L + 1, &dnw));
    shs_memset(d, g->dres, 0, btc * sizeof(float));
    shs_rmsnorm_backward(d, g->dres, dnw + off, g->dbtc, shs__amp_view(amp, x_last, amp->R, g->wx, btc), nw + off,
                         g->rstdf, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));
    SHS_CHECK(src->grads_ready(src->self, L + 1));

    for (int l = L - 1; l >= 0; l--) {
        const float *w, *p[P_COUNT], *pg[P_COUNT];
        float *gw;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        SHS_CHECK(src->acquire_grads(src->self, 1 + l, &gw));
        layer_views(g, l, w, p);
        layer_views(g, l, gw, pg);
        const void *x = l > 0 ? g->layer[l - 1].res3 : g->encoded;
        /* recompute (deterministic: the same bits as the forward's): the whole layer, or op-level SAC's part */
        if (shs__ac_block_recomputes(&g->ex, l)) layer_forward(g, l, x, p, 0);
        else if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE_OP) layer_forward(g, l, x, p, 1);
        layer_backward(g, l, x, p, pg);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        SHS_CHECK(src->grads_ready(src->self, 1 + l));
    }

    /* embedding: needs no parameter values, only the gradient buffer */
    float *demb;
    SHS_CHECK(src->acquire_grads(src->self, 0, &demb));
    shs_encoder_backward(d, demb + lo->tensors[lo->units[0].first_tensor].offset, NULL, g->dres, g->tokens, B, T, C);
    SHS_CHECK(src->grads_ready(src->self, 0));
    return SHS_OK;
}

static const shs_model_ops_t llama_ops = {llama_forward, llama_backward, llama_destroy};
