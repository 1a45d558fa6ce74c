/* gpt.c - GPT-2-style decoder: parameter layout, initialization, forward
 * and backward passes, all math through the device interface (device.h).
 * What it is not: sharding (strategy.c) or optimization (optim.c).
 * Legend: B micro-batch, T context, C channels, NH heads, L layers, V vocab.
 */
#include "shardsim/gpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/autocast.h"
#include "model/carver.h"
#include "model/loss_gpu_memory.h"
#include "model/recompute.h"


/* ---- layout ------------------------------------------------------------ */

int shs_gpt_vocab(const shs_gpt_config_t *c) { return c->vocab ? c->vocab : SHS_GPT_VOCAB; }

shs_status_t shs_gpt_config_validate(const shs_gpt_config_t *c) {
    if (c->vocab < 0 || c->vocab > (1 << 20))
        return shs_set_error(SHS_INVALID_ARG, "vocab must be in 1..%d, or 0 for %d (got %d)", 1 << 20, SHS_GPT_VOCAB,
                             c->vocab);
    if (c->num_layers < 1 || c->num_layers > SHS_GPT_MAX_LAYERS)
        return shs_set_error(SHS_INVALID_ARG, "layers must be in 1..%d (got %d)", SHS_GPT_MAX_LAYERS, c->num_layers);
    if (c->channels < 1 || c->channels > 65536)
        return shs_set_error(SHS_INVALID_ARG, "channels must be in 1..65536 (got %d)", c->channels);
    if (c->num_heads < 1 || c->channels % c->num_heads != 0)
        return shs_set_error(SHS_INVALID_ARG, "heads (%d) must be >= 1 and divide channels (%d)", c->num_heads,
                             c->channels);
    if (c->context < 1 || c->context > 65536)
        return shs_set_error(SHS_INVALID_ARG, "context must be in 1..65536 (got %d)", c->context);
    return SHS_OK;
}

shs_status_t shs_gpt_layout_create(shs_layout_t *lo, const shs_gpt_config_t *cfg) {
    SHS_CHECK(shs_gpt_config_validate(cfg));
    shs_layout_init(lo);
    int L = cfg->num_layers, C = cfg->channels, T = cfg->context, V = shs_gpt_vocab(cfg);
    const float std = 0.02f, proj_std = (float)(0.02 / sqrt(2.0 * L));
    shs_status_t st = SHS_OK;
#define ADD(name, r, c, kind, s) SHS_CHECK_GOTO(shs_layout_add_tensor(lo, name, r, c, kind, s), st, fail)
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "embed"), st, fail);
    ADD("wte", V, C, SHS_INIT_NORMAL, std);
    ADD("wpe", T, C, SHS_INIT_NORMAL, std);
    for (int l = 0; l < L; l++) {
        char n[48];
        snprintf(n, sizeof n, "block%d", l);
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, n), st, fail);
#define T_(suffix, r, c, kind, s) snprintf(n, sizeof n, "h.%d.%s", l, suffix); ADD(n, r, c, kind, s)
        T_("ln_1.weight", C, 1, SHS_INIT_ONES, 0);
        T_("ln_1.bias", C, 1, SHS_INIT_ZEROS, 0);
        T_("attn.c_attn.weight", 3 * C, C, SHS_INIT_NORMAL, std);
        T_("attn.c_attn.bias", 3 * C, 1, SHS_INIT_ZEROS, 0);
        T_("attn.c_proj.weight", C, C, SHS_INIT_NORMAL, proj_std);
        T_("attn.c_proj.bias", C, 1, SHS_INIT_ZEROS, 0);
        T_("ln_2.weight", C, 1, SHS_INIT_ONES, 0);
        T_("ln_2.bias", C, 1, SHS_INIT_ZEROS, 0);
        T_("mlp.c_fc.weight", 4 * C, C, SHS_INIT_NORMAL, std);
        T_("mlp.c_fc.bias", 4 * C, 1, SHS_INIT_ZEROS, 0);
        T_("mlp.c_proj.weight", C, 4 * C, SHS_INIT_NORMAL, proj_std);
        T_("mlp.c_proj.bias", C, 1, SHS_INIT_ZEROS, 0);
#undef T_
    }
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "lnf"), st, fail);
    ADD("ln_f.weight", C, 1, SHS_INIT_ONES, 0);
    ADD("ln_f.bias", C, 1, SHS_INIT_ZEROS, 0);
#undef ADD
    return SHS_OK;
fail:
    shs_layout_free(lo);
    return st;
}

/* ---- activations ---------------------------------------------------------
 * Dtypes: A, the activation dtype (autocast's low dtype, else f32), for what
 * a matmul or the attention core produces or consumes; R, the residual
 * stream's (encoded, res2, res3): A when the parameters are A too (the whole
 * model runs in A, as under FSDP MixedPrecision or Megatron's half model),
 * else f32 (torch's promotion of f32 + A). LayerNorm statistics, the
 * log-sum-exp of flash attention, logits-softmax and losses are f32. Kernels
 * work in f32: a tensor stored in a 16-bit dtype is converted into an f32
 * work buffer before use (a view) and a kernel's f32 output is rounded into
 * its 16-bit storage (a commit); work buffers and the forward-only
 * intermediates (preatt, the two projection outputs) are one set shared by
 * every block, not saved activations. */

/* Per-layer activation pointers into one ACTIVATIONS allocation. */
typedef struct {
    void *ln1;                          /* (BT,C) A */
    float *ln1_mean, *ln1_rstd;         /* (BT), (BT) */
    void *qkv;                          /* (BT,3C) A */
    void *atty;                         /* (BT,C) A */
    void *att, *att_drop;               /* eager: (B,NH,T,T) A; att_drop with dropout */
    uint8_t *att_mask;                  /* eager with dropout: (B,NH,T,T) */
    float *lse;                         /* flash: (B,NH,T) */
    uint8_t *proj_mask;                 /* dropout: (BT,C) after attn c_proj */
    void *res2;                         /* (BT,C) R */
    void *ln2;                          /* (BT,C) A */
    float *ln2_mean, *ln2_rstd;         /* (BT), (BT) */
    void *fch, *fch_gelu;               /* (BT,4C) A */
    uint8_t *mlp_mask;                  /* dropout: (BT,C) after mlp c_proj */
    void *res3;                         /* (BT,C) R: the block output */
} layer_acts_t;

typedef struct {
    shs_model_t base;                   /* ops: gpt_ops */
    shs_gpt_config_t cfg;
    shs_gpt_exec_t ex;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B;
    shs__amp_t amp;                     /* activation and residual dtypes (see above); amp.ww:
                                         * round_weights: max(4C*C + 4C, V*C) rounded weights */
    uint64_t micro_step, first_seq;     /* dropout positions (shs_gpt_set_position) */
    void *acts_mem;                     /* the whole forward activation block */
    void *encoded;                      /* (BT,C) R */
    layer_acts_t *layer;                /* L; what a block does not keep points into `shared` */
    layer_acts_t shared;                /* one block's worth, for the blocks that recompute */
    unsigned op_saved;                  /* op-level SAC: the linears (qkv, attn c_proj, c_fc, mlp c_proj)
                                         * whose outputs it saves (recompute.h): none, all have biases */
    void *lnf;                          /* (BT,C) A */
    float *lnf_mean, *lnf_rstd;         /* (BT), (BT) */
    float *logits, *probs, *losses;     /* (BT,V), (BT,V), (BT) */
    float *loss_sum;                    /* (1) device */
    void *scratch_mem;                  /* backward scratch and shared work */
    size_t scratch_grads;               /* bytes of scratch_mem's gradients and forward scratch (not the
                                         * logits' gradient or the f32 work buffers): the GPU ledger's */
    float *dres, *dbtc, *dproj;         /* (BT,C); dproj with dropout */
    float *dfch, *dfch_gelu;            /* (BT,4C) */
    float *dqkv;                        /* (BT,3C) */
    float *dpreatt, *datt;              /* eager: (B,NH,T,T) */
    float *dlogits;                     /* (BT,V) */
    float *preatt;                      /* eager: (B,NH,T,T) forward scratch */
    float *proj;                        /* (BT,C) a c_proj output before its residual add */
    float *w1, *w2;                     /* 16-bit A: (BT,4C) f32 work */
    float *wx, *wr;                     /* 16-bit R: (BT,C) f32 work */
    float *wt1, *wt2;                   /* 16-bit A, eager: (B,NH,T,T) f32 work */
    int32_t *tokens, *targets;          /* (BT) device */
    int64_t num_targets;                /* the last forward's counted targets (the mean's divisor) */
    const float *head_params;           /* unit 0 as kept resident from forward to backward */
} shs_gpt_t;

/* The block's linears in forward order (op-level SAC counts them). */
enum { LIN_QKV, LIN_ATTPROJ, LIN_FC, LIN_FCPROJ, LIN_COUNT };

/* Whether the linear lin (-1: none) is one op-level SAC saves. */
static int mm_saved(const shs_gpt_t *g, int lin) { return lin >= 0 && (g->op_saved >> lin & 1); }
/* Whether block l keeps a buffer of `role` (recompute.h) that is the output of linear lin. */
static int keeps(const shs_gpt_t *g, int l, shs__act_role_t role, int lin) {
    return shs__ac_keeps(&g->ex, l, role, mm_saved(g, lin));
}

/* Per-block buffers: name, elements, element size, role (recompute.h), the
 * linear whose output it is (or -1). */
#define LAYER_BUFS(X)                                                                                         \
    X(ln1, BTC, a, R_SAVED, -1) X(ln1_mean, BT, 4, R_SAVED, -1) X(ln1_rstd, BT, 4, R_SAVED, -1)                 \
    X(qkv, 3 * BTC, a, R_SAVED, LIN_QKV) X(atty, BTC, a, R_ATTN, -1) X(att, eager ? TT : 0, a, R_PROBS, -1)      \
    X(att_drop, eager && drop ? TT : 0, a, R_PROBS, -1) X(att_mask, eager && drop ? TT : 0, 1, R_PROBS, -1)      \
    X(lse, eager ? 0 : B * NH * T, 4, R_ATTN, -1) X(proj_mask, drop ? BTC : 0, 1, R_SAVED, -1)                   \
    X(res2, BTC, r, R_SAVED, -1) X(ln2, BTC, a, R_SAVED, -1) X(ln2_mean, BT, 4, R_SAVED, -1)                     \
    X(ln2_rstd, BT, 4, R_SAVED, -1) X(fch, 4 * BTC, a, R_SAVED, LIN_FC) X(fch_gelu, 4 * BTC, a, R_SAVED, -1)     \
    X(mlp_mask, drop ? BTC : 0, 1, R_SAVED, -1) X(res3, BTC, r, R_OUT, -1)

static void layout_acts(shs_gpt_t *g, void *base, size_t *total) {
    const shs_gpt_config_t *c = &g->cfg;
    size_t B = (size_t)g->B, T = (size_t)c->context, C = (size_t)c->channels, NH = (size_t)c->num_heads;
    size_t BT = B * T, BTC = BT * C, TT = B * NH * T * T, V = (size_t)shs_gpt_vocab(c);
    size_t a = shs_dtype_size(g->amp.A), r = shs_dtype_size(g->amp.R);
    int eager = g->ex.attention == SHS_ATTENTION_EAGER, drop = g->ex.dropout > 0.0f, L = c->num_layers;
    shs__carver_t k = {base, 0, 0};
    for (k.es = 4; k.es >= 1; k.es /= 2) {
        shs__carve(&k, &g->encoded, BTC, r);
        for (int l = 0; l < L; l++) {
            layer_acts_t *la = &g->layer[l];
#define CARVE(f, n, es, role, lin) if (keeps(g, l, role, lin)) shs__carve(&k, &la->f, n, es);
            LAYER_BUFS(CARVE)
#undef CARVE
        }
#define CARVE_SHARED(f, n, es, role, lin)                                                                      \
        if (shs__ac_shared_needed(&g->ex, L, role, mm_saved(g, lin))) shs__carve(&k, &g->shared.f, n, es);
        LAYER_BUFS(CARVE_SHARED)
#undef CARVE_SHARED
        shs__carve(&k, &g->lnf, BTC, a);
        shs__carve(&k, &g->lnf_mean, BT, 4);
        shs__carve(&k, &g->lnf_rstd, BT, 4);
        shs__carve(&k, &g->logits, BT * V, 4);
        shs__carve(&k, &g->probs, BT * V, 4);
        shs__carve(&k, &g->losses, BT, 4);
        shs__carve(&k, &g->loss_sum, 1, 4);
    }
    for (int l = 0; l < L; l++) {
#define SHARE(f, n, es, role, lin) if (!keeps(g, l, role, lin)) g->layer[l].f = g->shared.f;
        LAYER_BUFS(SHARE)
#undef SHARE
    }
    *total = k.cur;
}

static void layout_scratch(shs_gpt_t *g, void *base, size_t *total) {
    const shs_gpt_config_t *c = &g->cfg;
    size_t B = (size_t)g->B, T = (size_t)c->context, C = (size_t)c->channels, NH = (size_t)c->num_heads;
    size_t BT = B * T, BTC = BT * C, TT = B * NH * T * T, V = (size_t)shs_gpt_vocab(c);
    int eager = g->ex.attention == SHS_ATTENTION_EAGER, drop = g->ex.dropout > 0.0f;
    int a16 = g->amp.A != SHS_F32, r16 = g->amp.R != SHS_F32;
    shs__carver_t k = {base, 0, 4};
    shs__carve(&k, &g->dres, BTC, 4);
    shs__carve(&k, &g->dbtc, BTC, 4);
    shs__carve(&k, &g->dproj, drop ? BTC : 0, 4);
    shs__carve(&k, &g->dfch, 4 * BTC, 4);
    shs__carve(&k, &g->dfch_gelu, 4 * BTC, 4);
    shs__carve(&k, &g->dqkv, 3 * BTC, 4);
    shs__carve(&k, &g->dpreatt, eager ? TT : 0, 4);
    shs__carve(&k, &g->datt, eager ? TT : 0, 4);
    shs__carve(&k, &g->dlogits, BT * V, 4);
    shs__carve(&k, &g->preatt, eager ? TT : 0, 4);
    shs__carve(&k, &g->proj, BTC, 4);
    g->scratch_grads = k.cur - BT * V * 4;
    shs__carve(&k, &g->w1, a16 ? 4 * BTC : 0, 4);
    shs__carve(&k, &g->w2, a16 ? 4 * BTC : 0, 4);
    shs__carve(&k, &g->wx, r16 ? BTC : 0, 4);
    shs__carve(&k, &g->wr, r16 ? BTC : 0, 4);
    shs__carve(&k, &g->wt1, a16 && eager ? TT : 0, 4);
    shs__carve(&k, &g->wt2, a16 && eager && drop ? TT : 0, 4);
    size_t ww = 4 * C * C + 4 * C > V * C ? 4 * C * C + 4 * C : V * C;
    shs__carve(&k, &g->amp.ww, g->amp.round_weights ? ww : 0, 4);
    *total = k.cur;
}

static const shs_model_ops_t gpt_ops;
static void gpt_destroy(shs_model_t *m);

shs_status_t shs_gpt_exec_validate(const shs_gpt_exec_t *ex) {
    if ((int)ex->recompute < SHS_RECOMPUTE_NONE || ex->recompute > SHS_RECOMPUTE_EVERY_N)
        return shs_set_error(SHS_INVALID_ARG, "recompute must be none, full, selective, selective-op or selective-N "
                             "(got %d)", (int)ex->recompute);
    if (ex->recompute == SHS_RECOMPUTE_EVERY_N && ex->recompute_every < 1)
        return shs_set_error(SHS_INVALID_ARG, "recompute selective-N needs N >= 1 (every N-th block; got %d)",
                             ex->recompute_every);
    if ((int)ex->attention < SHS_ATTENTION_EAGER || ex->attention > SHS_ATTENTION_FLASH)
        return shs_set_error(SHS_INVALID_ARG, "attention must be eager or flash (got %d)", (int)ex->attention);
    if (ex->autocast != SHS_DTYPE_DEFAULT && ex->autocast != SHS_F32 && ex->autocast != SHS_BF16 &&
        ex->autocast != SHS_F16)
        return shs_set_error(SHS_INVALID_ARG, "autocast dtype must be bf16 or f16 (got %s)",
                             shs_dtype_name(ex->autocast));
    if (!(ex->dropout >= 0.0f && ex->dropout < 1.0f))
        return shs_set_error(SHS_INVALID_ARG, "dropout probability must be in [0, 1) (got %g)", (double)ex->dropout);
    return SHS_OK;
}

const char *shs_attention_name(shs_attention_kind_t k) { return k == SHS_ATTENTION_FLASH ? "flash" : "eager"; }

shs_status_t shs_gpt_create_ex(shs_model_t **out, const shs_layout_t *layout, const shs_gpt_config_t *cfg,
                               shs_device_t *dev, int B, const shs_gpt_exec_t *ex) {
    *out = NULL;
    SHS_CHECK(shs_gpt_config_validate(cfg));
    SHS_CHECK(shs_gpt_exec_validate(ex));
    if (layout->num_units != cfg->num_layers + 2)
        return shs_set_error(SHS_INVALID_ARG, "layout has %d units, a GPT with %d layers needs %d", layout->num_units,
                             cfg->num_layers, cfg->num_layers + 2);
    if (B < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 (got %d)", B);
    int flash = ex->attention == SHS_ATTENTION_FLASH, drop = ex->dropout > 0.0f;
    int autocast = ex->autocast == SHS_BF16 || ex->autocast == SHS_F16;
    if (!shs_device_supports(dev, flash ? SHS_KERNELS_FLASH_ATTENTION : 0) ||
        !shs_device_supports(dev, drop ? SHS_KERNELS_DROPOUT : 0) ||
        !shs_device_supports(dev, autocast ? SHS_KERNELS_ROUND : 0))
        return shs_set_error(SHS_UNSUPPORTED,
                             "the %s backend has no kernels for %s (the cpu and meta backends have them)",
                             shs_device_backend(dev),
                             flash && !shs_device_supports(dev, SHS_KERNELS_FLASH_ATTENTION) ? "attention flash"
                             : drop && !shs_device_supports(dev, SHS_KERNELS_DROPOUT)         ? "dropout"
                                                                                              : "autocast");
    shs_gpt_t *g = calloc(1, sizeof *g);
    if (!g) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    g->base.ops = &gpt_ops;
    g->cfg = *cfg;
    g->ex = *ex;
    g->layout = layout;
    g->dev = dev;
    g->B = B;
    shs__amp_setup(&g->amp, dev, ex);
    static const int has_bias[LIN_COUNT] = {1, 1, 1, 1};
    g->op_saved = shs__ac_op_saved_linears(has_bias, LIN_COUNT);
    g->layer = calloc((size_t)cfg->num_layers, sizeof *g->layer);
    shs_status_t st = SHS_OK;
    if (!g->layer) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    size_t n_acts, n_scratch, BT = (size_t)B * (size_t)cfg->context;
    layout_acts(g, NULL, &n_acts);
    layout_scratch(g, NULL, &n_scratch);
    /* the GPU ledger (device.h): the f32 logits and probabilities are the loss's, which the GPU holds at
     * its own peak (loss_gpu_memory.h), before the blocks' backward needs its gradients, in dtype A */
    size_t V = (size_t)shs_gpt_vocab(cfg), a = shs_dtype_size(g->amp.A), grads = g->scratch_grads / 4 * a;
    size_t loss = shs__loss_gpu_bytes(BT, V, a, ex->loss_kernel);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->acts_mem, n_acts, n_acts - 8 * BT * V, SHS_MEM_ACTIVATIONS,
                                            "forward activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->scratch_mem, n_scratch, loss > grads ? loss : grads,
                                            SHS_MEM_ACTIVATIONS, "backward scratch"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->tokens, 2 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    g->targets = g->tokens + BT;
    layout_acts(g, g->acts_mem, &n_acts);
    layout_scratch(g, g->scratch_mem, &n_scratch);
    *out = &g->base;
    return SHS_OK;
fail:
    gpt_destroy(&g->base);
    return st;
}

shs_status_t shs_gpt_create(shs_model_t **out, const shs_layout_t *layout, const shs_gpt_config_t *cfg,
                            shs_device_t *dev, int B, int checkpoint_activations) {
    shs_gpt_exec_t ex = {.recompute = checkpoint_activations ? SHS_RECOMPUTE_FULL : SHS_RECOMPUTE_NONE};
    return shs_gpt_create_ex(out, layout, cfg, dev, B, &ex);
}

void shs_gpt_set_position(shs_model_t *m, uint64_t micro_step, uint64_t first_sequence) {
    if (!m || m->ops != &gpt_ops) return;
    shs_gpt_t *g = (shs_gpt_t *)m;
    g->micro_step = micro_step;
    g->first_seq = first_sequence;
}

static void gpt_destroy(shs_model_t *m) {
    shs_gpt_t *g = (shs_gpt_t *)m;
    if (!g) return;
    shs_device_free(g->dev, g->acts_mem);
    shs_device_free(g->dev, g->scratch_mem);
    shs_device_free(g->dev, g->tokens);
    free(g->layer);
    free(g);
}

/* The dropout stream of (micro-step, layer, site), positions counted from
 * this rank's first sequence in the global batch (`per_seq` elements each). */
enum { SITE_ATTN = 0, SITE_PROJ = 1, SITE_MLP = 2 };
static shs_dropout_t dropout_at(const shs_gpt_t *g, int l, int site, size_t per_seq) {
    shs_dropout_t d = {g->ex.dropout, shs__rand_bits(g->ex.seed, g->micro_step, (uint64_t)l * 3 + (uint64_t)site),
                       g->first_seq * per_seq};
    return d;
}

/* ---- block parameter views ------------------------------------------------ */

typedef struct {
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    const float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} block_params_t;

/* Pointers to the 12 tensors of a block unit inside a flat buffer `base`
 * (parameters or gradients: same layout). */
static block_params_t block_views(const shs_layout_t *lo, int l, const float *base) {
    const shs_tensor_info_t *t = &lo->tensors[lo->units[1 + l].first_tensor];
    block_params_t p = {
        base + t[0].offset, base + t[1].offset, base + t[2].offset,  base + t[3].offset,
        base + t[4].offset, base + t[5].offset, base + t[6].offset,  base + t[7].offset,
        base + t[8].offset, base + t[9].offset, base + t[10].offset, base + t[11].offset,
    };
    return p;
}

/* ---- forward --------------------------------------------------------------- */

/* The attention core of block l from its stored qkv: eager writes att (and
 * att_drop, att_mask), flash writes lse; the output goes to `out` (f32). */
static void attention_core_forward(shs_gpt_t *g, int l, float *out) {
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, NH = c->num_heads;
    size_t BT = (size_t)B * T, TT = (size_t)B * NH * T * T;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
    const float *qkv = shs__amp_view(&g->amp, a->qkv, g->amp.A, g->w2, 3 * BT * C);
    shs_dropout_t drop = dropout_at(g, l, SITE_ATTN, (size_t)NH * T * T);
    if (g->ex.attention == SHS_ATTENTION_FLASH) {
        shs_attention_forward_flash(d, out, a->lse, qkv, B, T, C, NH, &drop);
    } else if (drop.p > 0.0f) {
        float *att = shs__amp_target(a->att, g->amp.A, g->wt1);
        float *att_drop = shs__amp_target(a->att_drop, g->amp.A, g->wt2);
        shs_attention_forward_dropout(d, out, g->preatt, att, att_drop, a->att_mask, qkv, B, T, C, NH, &drop);
        shs__amp_commit(&g->amp, a->att, g->amp.A, att, TT);
        shs__amp_commit(&g->amp, a->att_drop, g->amp.A, att_drop, TT);
    } else {
        float *att = shs__amp_target(a->att, g->amp.A, g->wt1);
        shs_attention_forward(d, out, g->preatt, att, qkv, B, T, C, NH);
        shs__amp_commit(&g->amp, a->att, g->amp.A, att, TT);
    }
}

/* x: the block input (stored as R). op_recompute: op-level SAC's recompute
 * before the block's backward: the ops whose outputs the block kept do not
 * run again, nor what follows the last value backward reads (mlp c_proj,
 * unless its dropout mask is read, and the residual: torch's checkpoint
 * stops early there). */
static void block_forward(shs_gpt_t *g, int l, const void *x, const block_params_t *p, int op_recompute) {
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, BT = B * T;
    size_t btc = (size_t)BT * C;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
    shs_dtype_t A = g->amp.A, R = g->amp.R;
    const float *x32 = shs__amp_view(&g->amp, x, R, g->wx, btc);
    float *o = shs__amp_target(a->ln1, A, g->w1);
    shs_layernorm_forward(d, o, a->ln1_mean, a->ln1_rstd, x32, p->ln1w, p->ln1b, BT, C);
    shs__amp_commit(&g->amp, a->ln1, A, o, btc);
    if (!(op_recompute && keeps(g, l, R_SAVED, LIN_QKV))) {
        o = shs__amp_target(a->qkv, A, g->w2);
        shs__amp_matmul(&g->amp, o, shs__amp_view(&g->amp, a->ln1, A, g->w1, btc), p->qkvw, p->qkvb, BT, C, 3 * C, 0);
        shs__amp_commit(&g->amp, a->qkv, A, o, 3 * btc);
    }
    if (!(op_recompute && keeps(g, l, R_ATTN, -1))) {
        o = shs__amp_target(a->atty, A, g->w1);
        attention_core_forward(g, l, o);
        if (A != SHS_F32) shs_round(d, o, A, btc); /* the attention output, as stored */
        shs__amp_commit(&g->amp, a->atty, A, o, btc);
    }
    shs__amp_matmul(&g->amp, g->proj, shs__amp_view(&g->amp, a->atty, A, g->w1, btc), p->attprojw, p->attprojb, BT, C,
                    C, 1);
    if (a->proj_mask) {
        shs_dropout_t drop = dropout_at(g, l, SITE_PROJ, (size_t)T * C);
        shs_dropout_forward(d, g->proj, a->proj_mask, g->proj, btc, &drop);
    }
    o = shs__amp_target(a->res2, R, g->wr);
    shs_residual_forward(d, o, x32, g->proj, btc);
    shs__amp_commit(&g->amp, a->res2, R, o, btc);
    const float *res2 = shs__amp_view(&g->amp, a->res2, R, g->wr, btc);
    o = shs__amp_target(a->ln2, A, g->w1);
    shs_layernorm_forward(d, o, a->ln2_mean, a->ln2_rstd, res2, p->ln2w, p->ln2b, BT, C);
    shs__amp_commit(&g->amp, a->ln2, A, o, btc);
    if (!(op_recompute && keeps(g, l, R_SAVED, LIN_FC))) {
        o = shs__amp_target(a->fch, A, g->w2);
        shs__amp_matmul(&g->amp, o, shs__amp_view(&g->amp, a->ln2, A, g->w1, btc), p->fcw, p->fcb, BT, C, 4 * C, 0);
        shs__amp_commit(&g->amp, a->fch, A, o, 4 * btc);
    }
    o = shs__amp_target(a->fch_gelu, A, g->w1);
    shs_gelu_forward(d, o, shs__amp_view(&g->amp, a->fch, A, g->w2, 4 * btc), 4 * btc);
    shs__amp_commit(&g->amp, a->fch_gelu, A, o, 4 * btc);
    if (op_recompute && !a->mlp_mask) return;
    shs__amp_matmul(&g->amp, g->proj, shs__amp_view(&g->amp, a->fch_gelu, A, g->w1, 4 * btc), p->fcprojw, p->fcprojb,
                    BT, 4 * C, C, 1);
    if (a->mlp_mask) {
        shs_dropout_t drop = dropout_at(g, l, SITE_MLP, (size_t)T * C);
        shs_dropout_forward(d, g->proj, a->mlp_mask, g->proj, btc, &drop);
    }
    if (op_recompute) return;
    o = shs__amp_target(a->res3, R, g->wr); /* may alias res2's view: residual_forward allows it */
    shs_residual_forward(d, o, res2, g->proj, btc);
    shs__amp_commit(&g->amp, a->res3, R, o, btc);
}

static shs_status_t gpt_forward(shs_model_t *m, shs_param_source_t *src, const shs_batch_t *batch,
                               float *mean_loss) {
    shs_gpt_t *g = (shs_gpt_t *)m;
    const shs_layout_t *lo = g->layout;
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, L = c->num_layers, BT = B * T, V = shs_gpt_vocab(c);
    size_t btc = (size_t)BT * C;
    shs_device_t *d = g->dev;
    size_t tok_bytes = (size_t)BT * sizeof(int32_t);
    if (batch->doc_ids || batch->positions)
        return shs_set_error(SHS_UNSUPPORTED, "the GPT has no per-document attention masks or position ids "
                                              "(packed documents need a Llama model)");
    SHS_CHECK(shs_memcpy_h2d(d, g->tokens, batch->tokens, tok_bytes));
    SHS_CHECK(shs_memcpy_h2d(d, g->targets, batch->targets, tok_bytes));
    g->num_targets = shs_batch_num_targets(batch, (size_t)BT);

    const float *emb;
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    const shs_tensor_info_t *te = &lo->tensors[lo->units[0].first_tensor];
    float *o = shs__amp_target(g->encoded, g->amp.R, g->wx);
    shs_encoder_forward(d, o, g->tokens, emb + te[0].offset, emb + te[1].offset, B, T, C);
    shs__amp_commit(&g->amp, g->encoded, g->amp.R, o, btc);
    SHS_CHECK(src->release_params(src->self, 0));

    const void *x = g->encoded;
    for (int l = 0; l < L; l++) {
        const float *w;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        block_params_t p = block_views(lo, l, w);
        block_forward(g, l, x, &p, 0);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        x = g->layer[l].res3;
    }

    const float *lnf;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &lnf));
    const shs_tensor_info_t *tf = &lo->tensors[lo->units[L + 1].first_tensor];
    o = shs__amp_target(g->lnf, g->amp.A, g->w1);
    shs_layernorm_forward(d, o, g->lnf_mean, g->lnf_rstd, shs__amp_view(&g->amp, x, g->amp.R, g->wx, btc),
                          lnf + tf[0].offset, lnf + tf[1].offset, BT, C);
    shs__amp_commit(&g->amp, g->lnf, g->amp.A, o, btc);
    SHS_CHECK(src->release_params(src->self, L + 1));

    /* LM head tied to wte: unit 0 again. It stays resident for the backward
     * pass, which starts with the head (FSDP keeps the last unit unsharded). */
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    g->head_params = emb;
    shs__amp_matmul(&g->amp, g->logits, shs__amp_view(&g->amp, g->lnf, g->amp.A, g->w1, btc), emb + te[0].offset,
                    NULL, BT, C, V, 1);
    shs_softmax_xent_forward(d, g->losses, g->probs, g->logits, g->targets, BT, V);
    shs_sum(d, g->loss_sum, g->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, g->loss_sum, sizeof sum));
    *mean_loss = g->num_targets ? sum / (float)g->num_targets : 0.0f;
    return SHS_OK;
}

/* ---- backward -------------------------------------------------------------- */

/* dres (BT,C) holds d(loss)/d(block output) on entry and d(loss)/d(block
 * input) on exit; parameter gradients accumulate into gw. Gradients stay
 * f32 (the autocast emulation rounds what the forward stores, not them). */
static void block_backward(shs_gpt_t *g, int l, const void *x, const block_params_t *p, block_params_t *gw) {
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, NH = c->num_heads, BT = B * T;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
    size_t btc = (size_t)BT * C, bt4c = 4 * btc, TT = (size_t)B * NH * T * T;
    shs_dtype_t A = g->amp.A, R = g->amp.R;
    float drop_p = g->ex.dropout;
#define W(f) ((float *)gw->f)
    /* res3 = res2 + dropout(fcproj): both get dres */
    const float *dproj = g->dres;
    if (a->mlp_mask) {
        shs_memset(d, g->dproj, 0, btc * sizeof(float));
        shs_dropout_backward(d, g->dproj, a->mlp_mask, g->dres, btc, drop_p);
        dproj = g->dproj;
    }
    shs_memset(d, g->dfch_gelu, 0, bt4c * sizeof(float));
    const float *fch_gelu = shs__amp_view(&g->amp, a->fch_gelu, A, g->w1, bt4c);
    shs__amp_matmul_backward(&g->amp, g->dfch_gelu, W(fcprojw), W(fcprojb), dproj, fch_gelu, p->fcprojw, BT, 4 * C, C);
    shs_memset(d, g->dfch, 0, bt4c * sizeof(float));
    shs_gelu_backward(d, g->dfch, shs__amp_view(&g->amp, a->fch, A, g->w2, bt4c), g->dfch_gelu, bt4c);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs__amp_matmul_backward(&g->amp, g->dbtc, W(fcw), W(fcb), g->dfch, shs__amp_view(&g->amp, a->ln2, A, g->w1, btc),
                             p->fcw, BT, C, 4 * C);
    shs_layernorm_backward(d, g->dres, W(ln2w), W(ln2b), g->dbtc, shs__amp_view(&g->amp, a->res2, R, g->wr, btc),
                           p->ln2w, a->ln2_mean, a->ln2_rstd, BT, C);
    /* res2 = x + dropout(attproj): both get dres */
    dproj = g->dres;
    if (a->proj_mask) {
        shs_memset(d, g->dproj, 0, btc * sizeof(float));
        shs_dropout_backward(d, g->dproj, a->proj_mask, g->dres, btc, drop_p);
        dproj = g->dproj;
    }
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    const float *atty = shs__amp_view(&g->amp, a->atty, A, g->w1, btc);
    shs__amp_matmul_backward(&g->amp, g->dbtc, W(attprojw), W(attprojb), dproj, atty, p->attprojw, BT, C, C);
    /* selective recompute: the attention core again (same bits) */
    if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE && g->ex.attention == SHS_ATTENTION_EAGER)
        attention_core_forward(g, l, g->proj);
    shs_memset(d, g->dqkv, 0, 3 * btc * sizeof(float));
    const float *qkv = shs__amp_view(&g->amp, a->qkv, A, g->w2, 3 * btc);
    if (g->ex.attention == SHS_ATTENTION_FLASH) {
        shs_dropout_t drop = dropout_at(g, l, SITE_ATTN, (size_t)NH * T * T);
        shs_attention_backward_flash(d, g->dqkv, g->dbtc, qkv, atty, a->lse, B, T, C, NH, &drop);
    } else if (a->att_mask) {
        const float *att = shs__amp_view(&g->amp, a->att, A, g->wt1, TT);
        const float *att_drop = shs__amp_view(&g->amp, a->att_drop, A, g->wt2, TT);
        shs_attention_backward_dropout(d, g->dqkv, g->dpreatt, g->datt, g->dbtc, qkv, att, att_drop, a->att_mask, B,
                                       T, C, NH, drop_p);
    } else {
        const float *att = shs__amp_view(&g->amp, a->att, A, g->wt1, TT);
        shs_attention_backward(d, g->dqkv, g->dpreatt, g->datt, g->dbtc, qkv, att, B, T, C, NH);
    }
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    const float *ln1 = shs__amp_view(&g->amp, a->ln1, A, g->w1, btc);
    shs__amp_matmul_backward(&g->amp, g->dbtc, W(qkvw), W(qkvb), g->dqkv, ln1, p->qkvw, BT, C, 3 * C);
    shs_layernorm_backward(d, g->dres, W(ln1w), W(ln1b), g->dbtc, shs__amp_view(&g->amp, x, R, g->wx, btc), p->ln1w,
                           a->ln1_mean, a->ln1_rstd, BT, C);
#undef W
}

static shs_status_t gpt_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    shs_gpt_t *g = (shs_gpt_t *)m;
    const shs_layout_t *lo = g->layout;
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, L = c->num_layers, BT = B * T, V = shs_gpt_vocab(c);
    shs_device_t *d = g->dev;
    size_t btc = (size_t)BT * C;
    const shs_tensor_info_t *te = &lo->tensors[lo->units[0].first_tensor];
    const shs_tensor_info_t *tf = &lo->tensors[lo->units[L + 1].first_tensor];
    const void *x_last = L > 0 ? g->layer[L - 1].res3 : g->encoded;

    /* LM head: unit 0 is still resident from the forward's last acquire */
    const float *emb = g->head_params;
    float *demb;
    SHS_ASSERT(emb);
    g->head_params = NULL;
    SHS_CHECK(src->acquire_grads(src->self, 0, &demb));
    shs_softmax_xent_backward(d, g->dlogits, g->probs, g->targets,
                              g->num_targets ? dloss / (float)g->num_targets : 0.0f, BT, V);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    const float *lnf_out = shs__amp_view(&g->amp, g->lnf, g->amp.A, g->w1, btc);
    shs__amp_matmul_backward(&g->amp, g->dbtc, demb + te[0].offset, NULL, g->dlogits, lnf_out, emb + te[0].offset, BT,
                             C, V);
    SHS_CHECK(src->release_params(src->self, 0));

    /* final LayerNorm */
    const float *lnf;
    float *dlnf;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &lnf));
    SHS_CHECK(src->acquire_grads(src->self, L + 1, &dlnf));
    shs_memset(d, g->dres, 0, btc * sizeof(float));
    shs_layernorm_backward(d, g->dres, dlnf + tf[0].offset, dlnf + tf[1].offset, g->dbtc,
                           shs__amp_view(&g->amp, x_last, g->amp.R, g->wx, btc), lnf + tf[0].offset, g->lnf_mean,
                           g->lnf_rstd, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));
    SHS_CHECK(src->grads_ready(src->self, L + 1));

    for (int l = L - 1; l >= 0; l--) {
        const float *w;
        float *gw;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        SHS_CHECK(src->acquire_grads(src->self, 1 + l, &gw));
        block_params_t p = block_views(lo, l, w), pg = block_views(lo, l, gw);
        const void *x = l > 0 ? g->layer[l - 1].res3 : g->encoded;
        /* recompute (deterministic: the same bits as the forward's): the whole block, or op-level SAC's part */
        if (shs__ac_block_recomputes(&g->ex, l)) block_forward(g, l, x, &p, 0);
        else if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE_OP) block_forward(g, l, x, &p, 1);
        block_backward(g, l, x, &p, &pg);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        SHS_CHECK(src->grads_ready(src->self, 1 + l));
    }

    /* embeddings: needs no parameter values, only the gradient buffer */
    SHS_CHECK(src->acquire_grads(src->self, 0, &demb));
    shs_encoder_backward(d, demb + te[0].offset, demb + te[1].offset, g->dres, g->tokens, B, T, C);
    SHS_CHECK(src->grads_ready(src->self, 0));
    return SHS_OK;
}

static const shs_model_ops_t gpt_ops = {gpt_forward, gpt_backward, gpt_destroy};
