/* llama.c - Llama-family decoder (llama.h): config checks, parameter count,
 * RoPE frequencies, layout with Hugging Face tensor names, forward and
 * backward passes, all math through the device interface (device.h).
 * What it is not: sharding (strategy.c), optimization (optim.c), a config
 * file reader (hf_config.c) or the GPT (gpt.c).
 * Legend: B sequences, T context, C hidden, NH heads, NKV key/value heads,
 * HD head dim, KVD = NKV*HD, I intermediate, L layers, V vocabulary.
 * Everything is f32 (autocast is refused), so there are no dtype views.
 */
#include "shardsim/llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/loss_gpu_memory.h"

/* ---- config ----------------------------------------------------------------- */

shs_status_t shs_llama_config_validate(const shs_llama_config_t *c) {
    if (c->num_layers < 1 || c->num_layers > SHS_GPT_MAX_LAYERS)
        return shs_set_error(SHS_INVALID_ARG, "num_hidden_layers must be in 1..%d (got %d)", SHS_GPT_MAX_LAYERS,
                             c->num_layers);
    if (c->hidden < 1 || c->hidden > 65536)
        return shs_set_error(SHS_INVALID_ARG, "hidden_size must be in 1..65536 (got %d)", c->hidden);
    if (c->num_heads < 1 || c->hidden % c->num_heads != 0 || (c->hidden / c->num_heads) % 2 != 0)
        return shs_set_error(SHS_INVALID_ARG,
                             "num_attention_heads (%d) must be >= 1 and divide hidden_size (%d) into an even head "
                             "dimension (RoPE rotates pairs)", c->num_heads, c->hidden);
    if (c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0)
        return shs_set_error(SHS_INVALID_ARG, "num_key_value_heads (%d) must be >= 1 and divide num_attention_heads (%d)",
                             c->num_kv_heads, c->num_heads);
    if (c->intermediate < 1 || c->intermediate > (1 << 20))
        return shs_set_error(SHS_INVALID_ARG, "intermediate_size must be in 1..%d (got %d)", 1 << 20, c->intermediate);
    if (c->vocab < 1 || c->vocab > (1 << 22))
        return shs_set_error(SHS_INVALID_ARG, "vocab_size must be in 1..%d (got %d)", 1 << 22, c->vocab);
    if (c->max_position < 1)
        return shs_set_error(SHS_INVALID_ARG, "max_position_embeddings must be >= 1 (got %d)", c->max_position);
    if (!(c->rms_norm_eps > 0.0f) || !isfinite(c->rms_norm_eps))
        return shs_set_error(SHS_INVALID_ARG, "rms_norm_eps must be > 0 (got %g)", (double)c->rms_norm_eps);
    if (!(c->rope_theta > 0.0) || !isfinite(c->rope_theta))
        return shs_set_error(SHS_INVALID_ARG, "rope_theta must be > 0 (got %g)", c->rope_theta);
    if (c->tie_word_embeddings != 0 && c->tie_word_embeddings != 1)
        return shs_set_error(SHS_INVALID_ARG, "tie_word_embeddings must be 0 or 1 (got %d)", c->tie_word_embeddings);
    if (c->qkv_bias != 0 && c->qkv_bias != 1)
        return shs_set_error(SHS_INVALID_ARG, "qkv_bias must be 0 or 1 (got %d)", c->qkv_bias);
    const shs_rope_scaling_t *s = &c->rope_scaling;
    if (s->kind == SHS_ROPE_SCALING_LLAMA3) {
        if (!(s->factor > 0.0) || !isfinite(s->factor))
            return shs_set_error(SHS_INVALID_ARG, "rope_scaling.factor must be > 0 (got %g)", s->factor);
        if (!(s->low_freq_factor > 0.0) || !(s->high_freq_factor > s->low_freq_factor) ||
            !isfinite(s->high_freq_factor))
            return shs_set_error(SHS_INVALID_ARG,
                                 "rope_scaling needs 0 < low_freq_factor < high_freq_factor (got %g and %g)",
                                 s->low_freq_factor, s->high_freq_factor);
        if (s->original_max_position_embeddings < 1)
            return shs_set_error(SHS_INVALID_ARG, "rope_scaling.original_max_position_embeddings must be >= 1 (got %d)",
                                 s->original_max_position_embeddings);
    } else if (s->kind != SHS_ROPE_SCALING_NONE) {
        return shs_set_error(SHS_INVALID_ARG, "rope_scaling kind %d is not known (none or llama3)", (int)s->kind);
    }
    return SHS_OK;
}

uint64_t shs_llama_num_params(const shs_llama_config_t *c) {
    uint64_t C = (uint64_t)c->hidden, NH = (uint64_t)c->num_heads, NKV = (uint64_t)c->num_kv_heads;
    uint64_t HD = NH ? C / NH : 0, I = (uint64_t)c->intermediate, V = (uint64_t)c->vocab;
    uint64_t layer = 2 * C + 2 * C * NH * HD + 2 * C * NKV * HD + 3 * C * I;
    if (c->qkv_bias) layer += NH * HD + 2 * NKV * HD;
    return (uint64_t)c->num_layers * layer + V * C + C + (c->tie_word_embeddings ? 0 : V * C);
}

void shs_llama_inv_freq(const shs_llama_config_t *c, float *inv_freq) {
    int HD = c->hidden / c->num_heads;
    const shs_rope_scaling_t *s = &c->rope_scaling;
    for (int i = 0; i < HD / 2; i++) {
        float f = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / (double)HD));
        if (s->kind == SHS_ROPE_SCALING_LLAMA3) {
            /* HF _compute_llama3_parameters: wavelengths shorter than
             * old_ctx / high_freq_factor are kept, longer than old_ctx /
             * low_freq_factor divided by factor, and those between blended */
            double old_ctx = s->original_max_position_embeddings;
            double low_wavelen = old_ctx / s->low_freq_factor, high_wavelen = old_ctx / s->high_freq_factor;
            double inv = f, wavelen = 2.0 * M_PI / inv;
            double scaled = wavelen > low_wavelen ? inv / s->factor : inv;
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                double smooth = (old_ctx / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
                scaled = (1.0 - smooth) * scaled / s->factor + smooth * scaled;
            }
            f = (float)scaled;
        }
        inv_freq[i] = f;
    }
}

/* Tensors per decoder layer and their order in the unit. */
enum { P_LN1, P_Q, P_K, P_V, P_QB, P_KB, P_VB, P_O, P_LN2, P_GATE, P_UP, P_DOWN, P_COUNT };

shs_status_t shs_llama_layout_create(shs_layout_t *lo, const shs_llama_config_t *cfg) {
    SHS_CHECK(shs_llama_config_validate(cfg));
    shs_layout_init(lo);
    int L = cfg->num_layers, C = cfg->hidden, NH = cfg->num_heads, HD = C / NH, KVD = cfg->num_kv_heads * HD;
    int I = cfg->intermediate, V = cfg->vocab;
    const float std = 0.02f; /* HF initializer_range */
    shs_status_t st = SHS_OK;
#define ADD(name, r, c, kind) SHS_CHECK_GOTO(shs_layout_add_tensor(lo, name, r, c, kind, (kind) == SHS_INIT_NORMAL ? std : 0), st, fail)
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "embed"), st, fail);
    ADD("model.embed_tokens.weight", V, C, SHS_INIT_NORMAL);
    for (int l = 0; l < L; l++) {
        char n[64];
        snprintf(n, sizeof n, "layer%d", l);
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, n), st, fail);
#define T_(suffix, r, c, kind) snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix); ADD(n, r, c, kind)
        T_("input_layernorm.weight", C, 1, SHS_INIT_ONES);
        T_("self_attn.q_proj.weight", NH * HD, C, SHS_INIT_NORMAL);
        T_("self_attn.k_proj.weight", KVD, C, SHS_INIT_NORMAL);
        T_("self_attn.v_proj.weight", KVD, C, SHS_INIT_NORMAL);
        if (cfg->qkv_bias) {
            T_("self_attn.q_proj.bias", NH * HD, 1, SHS_INIT_ZEROS);
            T_("self_attn.k_proj.bias", KVD, 1, SHS_INIT_ZEROS);
            T_("self_attn.v_proj.bias", KVD, 1, SHS_INIT_ZEROS);
        }
        T_("self_attn.o_proj.weight", C, NH * HD, SHS_INIT_NORMAL);
        T_("post_attention_layernorm.weight", C, 1, SHS_INIT_ONES);
        T_("mlp.gate_proj.weight", I, C, SHS_INIT_NORMAL);
        T_("mlp.up_proj.weight", I, C, SHS_INIT_NORMAL);
        T_("mlp.down_proj.weight", C, I, SHS_INIT_NORMAL);
#undef T_
    }
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "norm"), st, fail);
    ADD("model.norm.weight", C, 1, SHS_INIT_ONES);
    if (!cfg->tie_word_embeddings) {
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, "lm_head"), st, fail);
        ADD("lm_head.weight", V, C, SHS_INIT_NORMAL);
    }
#undef ADD
    return SHS_OK;
fail:
    shs_layout_free(lo);
    return st;
}

/* ---- activations ------------------------------------------------------------ */

typedef struct {
    float *ln1, *rstd1;                 /* (BT,C), (BT) */
    float *q, *k, *v;                   /* (BT,C), (BT,KVD), (BT,KVD): q and k rotated */
    float *att;                         /* eager: (B,NH,T,T) */
    float *lse;                         /* flash: (B,NH,T) */
    float *atty;                        /* (BT,C) attention output */
    float *res2;                        /* (BT,C) after the attention residual */
    float *ln2, *rstd2;                 /* (BT,C), (BT) */
    float *gate, *up, *act;             /* (BT,I) */
    float *res3;                        /* (BT,C) the layer output */
} layer_acts_t;

typedef struct {
    shs_model_t base;                   /* ops: llama_ops */
    shs_llama_config_t cfg;
    shs_gpt_exec_t ex;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B, T;
    void *acts_mem, *scratch_mem;
    float *encoded;                     /* (BT,C) */
    layer_acts_t *layer;                /* L; shared entries alias layer 0's (recompute) */
    float *lnf, *rstdf;                 /* (BT,C), (BT) */
    float *logits, *probs, *losses;     /* (BT,V), (BT,V), (BT) */
    float *loss_sum;                    /* (1) */
    float *dres, *dbtc, *dq, *dqr;      /* (BT,C) */
    float *dk, *dkr, *dv;               /* (BT,KVD) */
    float *dgate, *dup, *dact;          /* (BT,I) */
    float *datt;                        /* eager: (B,NH,T,T) */
    float *dlogits;                     /* (BT,V) */
    float *proj;                        /* (BT,C) a projection before its residual add */
    float *inv_freq;                    /* (HD/2) */
    int32_t *tokens, *targets, *positions, *doc_ids; /* (BT) device each */
    int has_positions, has_doc_ids;     /* the last forward's batch had them */
    int64_t num_targets;                /* the last forward's counted targets */
    int head_unit;                      /* 0 tied, else L+2 */
    const float *head_params;           /* head unit as kept resident from forward to backward */
} shs_llama_t;

static void carve(char *base, size_t *cur, float **p, size_t n) {
    *p = n && base ? (float *)(base + *cur) : NULL;
    *cur += n * sizeof(float);
}

/* What a layer keeps: 0 intermediates (dropped by full recompute), 1 the
 * eager attention probabilities (dropped by full and selective), 2 the output. */
static int kept(const shs_llama_t *g, int kind) {
    return kind == 2 || (kind == 0 && g->ex.recompute != SHS_RECOMPUTE_FULL) ||
           (kind == 1 && g->ex.recompute == SHS_RECOMPUTE_NONE);
}

#define LAYER_BUFS(X)                                                                                \
    X(ln1, BTC, 0) X(rstd1, BT, 0) X(q, BTC, 0) X(k, BTK, 0) X(v, BTK, 0) X(att, eager ? TT : 0, 1) \
    X(lse, eager ? 0 : B * NH * T, 0) X(atty, BTC, 0) X(res2, BTC, 0) X(ln2, BTC, 0) X(rstd2, BT, 0) \
    X(gate, BTI, 0) X(up, BTI, 0) X(act, BTI, 0) X(res3, BTC, 2)

#define DIMS(g)                                                                                                  \
    const shs_llama_config_t *c = &(g)->cfg;                                                                     \
    size_t B = (size_t)(g)->B, T = (size_t)(g)->T, C = (size_t)c->hidden, NH = (size_t)c->num_heads;             \
    size_t HD = C / NH, BT = B * T, BTC = BT * C, BTK = BT * (size_t)c->num_kv_heads * HD;                       \
    size_t BTI = BT * (size_t)c->intermediate, TT = B * NH * T * T, V = (size_t)c->vocab;                        \
    int eager = (g)->ex.attention == SHS_ATTENTION_EAGER;                                                        \
    (void)BTK; (void)BTI; (void)TT; (void)V; (void)eager

static void layout_acts(shs_llama_t *g, void *base, size_t *total) {
    DIMS(g);
    size_t cur = 0;
    carve(base, &cur, &g->encoded, BTC);
    for (int l = 0; l < c->num_layers; l++) {
        layer_acts_t *la = &g->layer[l];
#define CARVE(f, n, kind) if (l == 0 || kept(g, kind)) carve(base, &cur, &la->f, n);
        LAYER_BUFS(CARVE)
#undef CARVE
    }
    carve(base, &cur, &g->lnf, BTC);
    carve(base, &cur, &g->rstdf, BT);
    carve(base, &cur, &g->logits, BT * V);
    carve(base, &cur, &g->probs, BT * V);
    carve(base, &cur, &g->losses, BT);
    carve(base, &cur, &g->loss_sum, 1);
    carve(base, &cur, &g->inv_freq, HD / 2);
    for (int l = 1; l < c->num_layers; l++) {
#define SHARE(f, n, kind) if (!kept(g, kind)) g->layer[l].f = g->layer[0].f;
        LAYER_BUFS(SHARE)
#undef SHARE
    }
    *total = cur;
}

static void layout_scratch(shs_llama_t *g, void *base, size_t *total) {
    DIMS(g);
    size_t cur = 0;
    carve(base, &cur, &g->dres, BTC);
    carve(base, &cur, &g->dbtc, BTC);
    carve(base, &cur, &g->dq, BTC);
    carve(base, &cur, &g->dqr, BTC);
    carve(base, &cur, &g->dk, BTK);
    carve(base, &cur, &g->dkr, BTK);
    carve(base, &cur, &g->dv, BTK);
    carve(base, &cur, &g->dgate, BTI);
    carve(base, &cur, &g->dup, BTI);
    carve(base, &cur, &g->dact, BTI);
    carve(base, &cur, &g->datt, eager ? TT : 0);
    carve(base, &cur, &g->dlogits, BT * V);
    carve(base, &cur, &g->proj, BTC);
    *total = cur;
}

static const shs_model_ops_t llama_ops;
static void llama_destroy(shs_model_t *m);

shs_status_t shs_llama_create(shs_model_t **out, const shs_layout_t *layout, const shs_llama_config_t *cfg,
                              shs_device_t *dev, int B, int T, const shs_gpt_exec_t *ex) {
    *out = NULL;
    SHS_CHECK(shs_llama_config_validate(cfg));
    SHS_CHECK(shs_gpt_exec_validate(ex));
    if (ex->autocast != SHS_DTYPE_DEFAULT && ex->autocast != SHS_F32)
        return shs_set_error(SHS_UNSUPPORTED, "the Llama model has no autocast (got autocast %s); it runs in f32",
                             shs_dtype_name(ex->autocast));
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
    shs_llama_t *g = calloc(1, sizeof *g);
    if (!g) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    g->base.ops = &llama_ops;
    g->cfg = *cfg;
    g->ex = *ex;
    g->layout = layout;
    g->dev = dev;
    g->B = B;
    g->T = T;
    g->head_unit = cfg->tie_word_embeddings ? 0 : cfg->num_layers + 2;
    g->layer = calloc((size_t)cfg->num_layers, sizeof *g->layer);
    shs_status_t st = SHS_OK;
    float *inv = malloc((size_t)(cfg->hidden / cfg->num_heads / 2) * sizeof(float) + sizeof(float));
    if (!g->layer || !inv) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    size_t n_acts, n_scratch, BT = (size_t)B * (size_t)T;
    layout_acts(g, NULL, &n_acts);
    layout_scratch(g, NULL, &n_scratch);
    /* the GPU ledger (device.h): the f32 logits and probabilities are the loss's, which the GPU holds at
     * its own peak (loss_gpu_memory.h), before the layers' backward needs the rest of the scratch */
    size_t V = (size_t)cfg->vocab, grads = n_scratch - 4 * BT * V;
    size_t loss = shs__loss_gpu_bytes(BT, V, sizeof(float), ex->loss_kernel);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->acts_mem, n_acts, n_acts - 8 * BT * V, SHS_MEM_ACTIVATIONS,
                                            "forward activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->scratch_mem, n_scratch, loss > grads ? loss : grads,
                                            SHS_MEM_ACTIVATIONS, "backward scratch"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->tokens, 4 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    g->targets = g->tokens + BT;
    g->positions = g->tokens + 2 * BT;
    g->doc_ids = g->tokens + 3 * BT;
    layout_acts(g, g->acts_mem, &n_acts);
    layout_scratch(g, g->scratch_mem, &n_scratch);
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

/* The attention core of layer l from its stored q, k, v into `out`. */
static void attention_core_forward(shs_llama_t *g, int l, float *out) {
    const shs_llama_config_t *c = &g->cfg;
    int NH = c->num_heads, HD = c->hidden / NH;
    layer_acts_t *a = &g->layer[l];
    if (g->ex.attention == SHS_ATTENTION_FLASH)
        shs_attention_gqa_forward_flash(g->dev, out, a->lse, a->q, a->k, a->v, doc_arg(g), g->B, g->T, NH,
                                        c->num_kv_heads, HD);
    else
        shs_attention_gqa_forward(g->dev, out, a->att, a->q, a->k, a->v, doc_arg(g), g->B, g->T, NH, c->num_kv_heads,
                                  HD);
}

static void layer_forward(shs_llama_t *g, int l, const float *x, const float *const p[P_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, BT = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads, HD = C / NH;
    int KVD = NKV * HD, I = c->intermediate;
    size_t btc = (size_t)BT * C;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
    shs_rmsnorm_forward(d, a->ln1, a->rstd1, x, p[P_LN1], BT, C, c->rms_norm_eps);
    shs_matmul_forward(d, a->q, a->ln1, p[P_Q], p[P_QB], BT, C, NH * HD);
    shs_matmul_forward(d, a->k, a->ln1, p[P_K], p[P_KB], BT, C, KVD);
    shs_matmul_forward(d, a->v, a->ln1, p[P_V], p[P_VB], BT, C, KVD);
    shs_rope_forward(d, a->q, a->q, pos_arg(g), g->inv_freq, B, T, NH, HD);
    shs_rope_forward(d, a->k, a->k, pos_arg(g), g->inv_freq, B, T, NKV, HD);
    attention_core_forward(g, l, a->atty);
    shs_matmul_forward(d, g->proj, a->atty, p[P_O], NULL, BT, NH * HD, C);
    shs_residual_forward(d, a->res2, x, g->proj, btc);
    shs_rmsnorm_forward(d, a->ln2, a->rstd2, a->res2, p[P_LN2], BT, C, c->rms_norm_eps);
    shs_matmul_forward(d, a->gate, a->ln2, p[P_GATE], NULL, BT, C, I);
    shs_matmul_forward(d, a->up, a->ln2, p[P_UP], NULL, BT, C, I);
    shs_swiglu_forward(d, a->act, a->gate, a->up, (size_t)BT * I);
    shs_matmul_forward(d, g->proj, a->act, p[P_DOWN], NULL, BT, I, C);
    shs_residual_forward(d, a->res3, a->res2, g->proj, btc);
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
    shs_device_t *d = g->dev;
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
    shs_encoder_forward(d, g->encoded, g->tokens, emb + lo->tensors[lo->units[0].first_tensor].offset, NULL, B, T, C);
    SHS_CHECK(src->release_params(src->self, 0));

    const float *x = g->encoded;
    for (int l = 0; l < L; l++) {
        const float *w, *p[P_COUNT];
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        layer_views(g, l, w, p);
        layer_forward(g, l, x, p);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        x = g->layer[l].res3;
    }

    const float *nw;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    shs_rmsnorm_forward(d, g->lnf, g->rstdf, x, nw + lo->tensors[lo->units[L + 1].first_tensor].offset, BT, C,
                        c->rms_norm_eps);
    SHS_CHECK(src->release_params(src->self, L + 1));

    /* the head (unit 0 tied, else its own unit) stays resident for the
     * backward pass, which starts with it (FSDP keeps the last unit unsharded) */
    const float *hw;
    SHS_CHECK(src->acquire_params(src->self, g->head_unit, &hw));
    g->head_params = hw;
    shs_matmul_forward(d, g->logits, g->lnf, hw + head_offset(g), NULL, BT, C, V);
    shs_softmax_xent_forward(d, g->losses, g->probs, g->logits, g->targets, BT, V);
    shs_sum(d, g->loss_sum, g->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, g->loss_sum, sizeof sum));
    *mean_loss = g->num_targets ? sum / (float)g->num_targets : 0.0f;
    return SHS_OK;
}

/* ---- backward -------------------------------------------------------------------- */

/* dres (BT,C) holds d(loss)/d(layer output) on entry and d(loss)/d(layer
 * input) on exit; parameter gradients accumulate into gw. */
static void layer_backward(shs_llama_t *g, int l, const float *x, const float *const p[P_COUNT],
                           const float *const gw_c[P_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, BT = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads, HD = C / NH;
    int KVD = NKV * HD, I = c->intermediate;
    size_t btc = (size_t)BT * C, btk = (size_t)BT * KVD, bti = (size_t)BT * I;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
#define W(k) ((float *)gw_c[k])
    /* res3 = res2 + down(swiglu(gate(ln2), up(ln2))) */
    shs_memset(d, g->dact, 0, bti * sizeof(float));
    shs_matmul_backward(d, g->dact, W(P_DOWN), NULL, g->dres, a->act, p[P_DOWN], BT, I, C);
    shs_memset(d, g->dgate, 0, bti * sizeof(float));
    shs_memset(d, g->dup, 0, bti * sizeof(float));
    shs_swiglu_backward(d, g->dgate, g->dup, g->dact, a->gate, a->up, bti);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(P_GATE), NULL, g->dgate, a->ln2, p[P_GATE], BT, C, I);
    shs_matmul_backward(d, g->dbtc, W(P_UP), NULL, g->dup, a->ln2, p[P_UP], BT, C, I);
    shs_rmsnorm_backward(d, g->dres, W(P_LN2), g->dbtc, a->res2, p[P_LN2], a->rstd2, BT, C);
    /* res2 = x + o(attention(rope(q(ln1)), rope(k(ln1)), v(ln1))) */
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(P_O), NULL, g->dres, a->atty, p[P_O], BT, NH * HD, C);
    /* selective recompute: the probabilities again (same bits) */
    if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE && g->ex.attention == SHS_ATTENTION_EAGER)
        attention_core_forward(g, l, g->proj);
    shs_memset(d, g->dqr, 0, btc * sizeof(float));
    shs_memset(d, g->dkr, 0, btk * sizeof(float));
    shs_memset(d, g->dv, 0, btk * sizeof(float));
    if (g->ex.attention == SHS_ATTENTION_FLASH)
        shs_attention_gqa_backward_flash(d, g->dqr, g->dkr, g->dv, g->dbtc, a->q, a->k, a->v, a->atty, a->lse,
                                         doc_arg(g), B, T, NH, NKV, HD);
    else
        shs_attention_gqa_backward(d, g->dqr, g->dkr, g->dv, g->datt, g->dbtc, a->q, a->k, a->v, a->att, B, T, NH, NKV,
                                   HD);
    shs_memset(d, g->dq, 0, btc * sizeof(float));
    shs_memset(d, g->dk, 0, btk * sizeof(float));
    shs_rope_backward(d, g->dq, g->dqr, pos_arg(g), g->inv_freq, B, T, NH, HD);
    shs_rope_backward(d, g->dk, g->dkr, pos_arg(g), g->inv_freq, B, T, NKV, HD);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(P_Q), W(P_QB), g->dq, a->ln1, p[P_Q], BT, C, NH * HD);
    shs_matmul_backward(d, g->dbtc, W(P_K), W(P_KB), g->dk, a->ln1, p[P_K], BT, C, KVD);
    shs_matmul_backward(d, g->dbtc, W(P_V), W(P_VB), g->dv, a->ln1, p[P_V], BT, C, KVD);
    shs_rmsnorm_backward(d, g->dres, W(P_LN1), g->dbtc, x, p[P_LN1], a->rstd1, BT, C);
#undef W
}

static shs_status_t llama_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    shs_llama_t *g = (shs_llama_t *)m;
    const shs_layout_t *lo = g->layout;
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, C = c->hidden, L = c->num_layers, BT = B * T, V = c->vocab;
    shs_device_t *d = g->dev;
    size_t btc = (size_t)BT * C;
    const float *x_last = g->layer[L - 1].res3;

    /* LM head: still resident from the forward's last acquire */
    const float *hw = g->head_params;
    float *dhw;
    SHS_ASSERT(hw);
    g->head_params = NULL;
    SHS_CHECK(src->acquire_grads(src->self, g->head_unit, &dhw));
    shs_softmax_xent_backward(d, g->dlogits, g->probs, g->targets,
                              g->num_targets ? dloss / (float)g->num_targets : 0.0f, BT, V);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, dhw + head_offset(g), NULL, g->dlogits, g->lnf, hw + head_offset(g), BT, C, V);
    SHS_CHECK(src->release_params(src->self, g->head_unit));
    if (g->head_unit != 0) SHS_CHECK(src->grads_ready(src->self, g->head_unit));

    /* final RMSNorm */
    const float *nw;
    float *dnw;
    size_t off = lo->tensors[lo->units[L + 1].first_tensor].offset;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    SHS_CHECK(src->acquire_grads(src->self, L + 1, &dnw));
    shs_memset(d, g->dres, 0, btc * sizeof(float));
    shs_rmsnorm_backward(d, g->dres, dnw + off, g->dbtc, x_last, nw + off, g->rstdf, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));
    SHS_CHECK(src->grads_ready(src->self, L + 1));

    for (int l = L - 1; l >= 0; l--) {
        const float *w, *p[P_COUNT], *pg[P_COUNT];
        float *gw;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        SHS_CHECK(src->acquire_grads(src->self, 1 + l, &gw));
        layer_views(g, l, w, p);
        layer_views(g, l, gw, pg);
        const float *x = l > 0 ? g->layer[l - 1].res3 : g->encoded;
        /* full recompute: deterministic, the same bits as the forward's */
        if (g->ex.recompute == SHS_RECOMPUTE_FULL) layer_forward(g, l, x, p);
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
