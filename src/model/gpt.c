/* gpt.c - GPT-2-style decoder: parameter layout, initialization, forward
 * and backward passes, all math through the device interface (device.h).
 * What it is not: sharding (strategy.c) or optimization (optim.c).
 * Legend: B micro-batch, T context, C channels, NH heads, L layers, V vocab.
 */
#include "shardsim/gpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


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

/* ---- activations --------------------------------------------------------- */

/* Per-layer activation pointers into one ACTIVATIONS allocation. */
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;   /* (BT,C), (BT), (BT) */
    float *qkv;                         /* (BT,3C) */
    float *atty;                        /* (BT,C) */
    float *preatt, *att;                /* (B,NH,T,T) */
    float *attproj, *res2;              /* (BT,C) */
    float *ln2, *ln2_mean, *ln2_rstd;   /* (BT,C), (BT), (BT) */
    float *fch, *fch_gelu;              /* (BT,4C) */
    float *fcproj, *res3;               /* (BT,C) */
} layer_acts_t;

typedef struct {
    shs_model_t base;                   /* ops: gpt_ops */
    shs_gpt_config_t cfg;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B;
    int checkpoint;                     /* activation checkpointing per block */
    float *acts_mem;                    /* the whole forward activation block */
    float *encoded;                     /* (BT,C) */
    layer_acts_t *layer;                /* L; checkpointing: one shared set but res3 */
    float *lnf, *lnf_mean, *lnf_rstd;   /* (BT,C), (BT), (BT) */
    float *logits, *probs, *losses;     /* (BT,V), (BT,V), (BT) */
    float *scratch_mem;                 /* backward scratch block */
    float *dres, *dbtc;                 /* (BT,C) */
    float *dfch, *dfch_gelu;            /* (BT,4C) */
    float *dqkv;                        /* (BT,3C) */
    float *dpreatt, *datt;              /* (B,NH,T,T) */
    float *dlogits;                     /* (BT,V) */
    int32_t *tokens, *targets;          /* (BT) device */
    const float *head_params;           /* unit 0 as kept resident from forward to backward */
    float *loss_sum;                    /* (1) device */
} shs_gpt_t;

/* Carve `n` floats off *cursor (or just count them when base is NULL). */
static float *carve(float *base, size_t *cursor, size_t n) {
    float *p = base ? base + *cursor : NULL;
    *cursor += n;
    return p;
}

/* Without checkpointing every block keeps its own intermediates. With it,
 * each block keeps only its output res3 (the next block's input; block 0's
 * input is encoded) and all other intermediates live in one set shared by
 * every block, refilled by the recompute in backward. */
static void layout_acts(shs_gpt_t *g, float *base, size_t *total) {
    const shs_gpt_config_t *c = &g->cfg;
    size_t B = (size_t)g->B, T = (size_t)c->context, C = (size_t)c->channels, NH = (size_t)c->num_heads;
    size_t BT = B * T, V = (size_t)shs_gpt_vocab(c), cur = 0;
    int L = c->num_layers;
    g->encoded = carve(base, &cur, BT * C);
    if (g->checkpoint)
        for (int l = 0; l < L; l++) g->layer[l].res3 = carve(base, &cur, BT * C);
    for (int l = 0; l < (g->checkpoint ? 1 : L); l++) {
        layer_acts_t *a = &g->layer[l];
        a->ln1 = carve(base, &cur, BT * C);
        a->ln1_mean = carve(base, &cur, BT);
        a->ln1_rstd = carve(base, &cur, BT);
        a->qkv = carve(base, &cur, BT * 3 * C);
        a->atty = carve(base, &cur, BT * C);
        a->preatt = carve(base, &cur, B * NH * T * T);
        a->att = carve(base, &cur, B * NH * T * T);
        a->attproj = carve(base, &cur, BT * C);
        a->res2 = carve(base, &cur, BT * C);
        a->ln2 = carve(base, &cur, BT * C);
        a->ln2_mean = carve(base, &cur, BT);
        a->ln2_rstd = carve(base, &cur, BT);
        a->fch = carve(base, &cur, BT * 4 * C);
        a->fch_gelu = carve(base, &cur, BT * 4 * C);
        a->fcproj = carve(base, &cur, BT * C);
        if (!g->checkpoint) a->res3 = carve(base, &cur, BT * C);
    }
    for (int l = 1; g->checkpoint && l < L; l++) {
        float *res3 = g->layer[l].res3;
        g->layer[l] = g->layer[0];
        g->layer[l].res3 = res3;
    }
    g->lnf = carve(base, &cur, BT * C);
    g->lnf_mean = carve(base, &cur, BT);
    g->lnf_rstd = carve(base, &cur, BT);
    g->logits = carve(base, &cur, BT * V);
    g->probs = carve(base, &cur, BT * V);
    g->losses = carve(base, &cur, BT);
    g->loss_sum = carve(base, &cur, 1);
    *total = cur;
}

static void layout_scratch(shs_gpt_t *g, float *base, size_t *total) {
    const shs_gpt_config_t *c = &g->cfg;
    size_t B = (size_t)g->B, T = (size_t)c->context, C = (size_t)c->channels, NH = (size_t)c->num_heads;
    size_t BT = B * T, cur = 0;
    g->dres = carve(base, &cur, BT * C);
    g->dbtc = carve(base, &cur, BT * C);
    g->dfch = carve(base, &cur, BT * 4 * C);
    g->dfch_gelu = carve(base, &cur, BT * 4 * C);
    g->dqkv = carve(base, &cur, BT * 3 * C);
    g->dpreatt = carve(base, &cur, B * NH * T * T);
    g->datt = carve(base, &cur, B * NH * T * T);
    g->dlogits = carve(base, &cur, BT * (size_t)shs_gpt_vocab(c));
    *total = cur;
}

static const shs_model_ops_t gpt_ops;
static void gpt_destroy(shs_model_t *m);

shs_status_t shs_gpt_create(shs_model_t **out, const shs_layout_t *layout, const shs_gpt_config_t *cfg,
                            shs_device_t *dev, int B, int checkpoint_activations) {
    *out = NULL;
    SHS_CHECK(shs_gpt_config_validate(cfg));
    if (layout->num_units != cfg->num_layers + 2)
        return shs_set_error(SHS_INVALID_ARG, "layout has %d units, a GPT with %d layers needs %d", layout->num_units,
                             cfg->num_layers, cfg->num_layers + 2);
    if (B < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 (got %d)", B);
    shs_gpt_t *g = calloc(1, sizeof *g);
    if (!g) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    g->base.ops = &gpt_ops;
    g->cfg = *cfg;
    g->layout = layout;
    g->dev = dev;
    g->B = B;
    g->checkpoint = checkpoint_activations != 0;
    g->layer = calloc((size_t)cfg->num_layers, sizeof *g->layer);
    shs_status_t st = SHS_OK;
    if (!g->layer) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    size_t n_acts, n_scratch, BT = (size_t)B * (size_t)cfg->context;
    layout_acts(g, NULL, &n_acts);
    layout_scratch(g, NULL, &n_scratch);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->acts_mem, n_acts * sizeof(float), SHS_MEM_ACTIVATIONS,
                                    "forward activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->scratch_mem, n_scratch * sizeof(float),
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

static void gpt_destroy(shs_model_t *m) {
    shs_gpt_t *g = (shs_gpt_t *)m;
    if (!g) return;
    shs_device_free(g->dev, g->acts_mem);
    shs_device_free(g->dev, g->scratch_mem);
    shs_device_free(g->dev, g->tokens);
    free(g->layer);
    free(g);
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

static void block_forward(shs_gpt_t *g, int l, const float *x, const block_params_t *p) {
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, NH = c->num_heads, BT = B * T;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
    shs_layernorm_forward(d, a->ln1, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, BT, C);
    shs_matmul_forward(d, a->qkv, a->ln1, p->qkvw, p->qkvb, BT, C, 3 * C);
    shs_attention_forward(d, a->atty, a->preatt, a->att, a->qkv, B, T, C, NH);
    shs_matmul_forward(d, a->attproj, a->atty, p->attprojw, p->attprojb, BT, C, C);
    shs_residual_forward(d, a->res2, x, a->attproj, (size_t)BT * C);
    shs_layernorm_forward(d, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, BT, C);
    shs_matmul_forward(d, a->fch, a->ln2, p->fcw, p->fcb, BT, C, 4 * C);
    shs_gelu_forward(d, a->fch_gelu, a->fch, (size_t)BT * 4 * C);
    shs_matmul_forward(d, a->fcproj, a->fch_gelu, p->fcprojw, p->fcprojb, BT, 4 * C, C);
    shs_residual_forward(d, a->res3, a->res2, a->fcproj, (size_t)BT * C);
}

static shs_status_t gpt_forward(shs_model_t *m, shs_param_source_t *src, const int32_t *tokens,
                               const int32_t *targets, float *mean_loss) {
    shs_gpt_t *g = (shs_gpt_t *)m;
    const shs_layout_t *lo = g->layout;
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, L = c->num_layers, BT = B * T, V = shs_gpt_vocab(c);
    shs_device_t *d = g->dev;
    size_t tok_bytes = (size_t)BT * sizeof(int32_t);
    SHS_CHECK(shs_memcpy_h2d(d, g->tokens, tokens, tok_bytes));
    SHS_CHECK(shs_memcpy_h2d(d, g->targets, targets, tok_bytes));

    const float *emb;
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    const shs_tensor_info_t *te = &lo->tensors[lo->units[0].first_tensor];
    shs_encoder_forward(d, g->encoded, g->tokens, emb + te[0].offset, emb + te[1].offset, B, T, C);
    SHS_CHECK(src->release_params(src->self, 0));

    const float *x = g->encoded;
    for (int l = 0; l < L; l++) {
        const float *w;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        block_params_t p = block_views(lo, l, w);
        block_forward(g, l, x, &p);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        x = g->layer[l].res3;
    }

    const float *lnf;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &lnf));
    const shs_tensor_info_t *tf = &lo->tensors[lo->units[L + 1].first_tensor];
    shs_layernorm_forward(d, g->lnf, g->lnf_mean, g->lnf_rstd, x, lnf + tf[0].offset, lnf + tf[1].offset, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));

    /* LM head tied to wte: unit 0 again. It stays resident for the backward
     * pass, which starts with the head (FSDP keeps the last unit unsharded). */
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    g->head_params = emb;
    shs_matmul_forward(d, g->logits, g->lnf, emb + te[0].offset, NULL, BT, C, V);
    shs_softmax_xent_forward(d, g->losses, g->probs, g->logits, g->targets, BT, V);
    shs_sum(d, g->loss_sum, g->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, g->loss_sum, sizeof sum));
    *mean_loss = sum / (float)BT;
    return SHS_OK;
}

/* ---- backward -------------------------------------------------------------- */

/* dres (BT,C) holds d(loss)/d(block output) on entry and d(loss)/d(block
 * input) on exit; parameter gradients accumulate into gw. */
static void block_backward(shs_gpt_t *g, int l, const float *x, const block_params_t *p, block_params_t *gw) {
    const shs_gpt_config_t *c = &g->cfg;
    int B = g->B, T = c->context, C = c->channels, NH = c->num_heads, BT = B * T;
    shs_device_t *d = g->dev;
    layer_acts_t *a = &g->layer[l];
    size_t btc = (size_t)BT * C, bt4c = 4 * btc;
#define W(f) ((float *)gw->f)
    /* res3 = res2 + fcproj: both get dres */
    shs_memset(d, g->dfch_gelu, 0, bt4c * sizeof(float));
    shs_matmul_backward(d, g->dfch_gelu, W(fcprojw), W(fcprojb), g->dres, a->fch_gelu, p->fcprojw, BT, 4 * C, C);
    shs_memset(d, g->dfch, 0, bt4c * sizeof(float));
    shs_gelu_backward(d, g->dfch, a->fch, g->dfch_gelu, bt4c);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(fcw), W(fcb), g->dfch, a->ln2, p->fcw, BT, C, 4 * C);
    shs_layernorm_backward(d, g->dres, W(ln2w), W(ln2b), g->dbtc, a->res2, p->ln2w, a->ln2_mean, a->ln2_rstd, BT, C);
    /* res2 = x + attproj: both get dres */
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(attprojw), W(attprojb), g->dres, a->atty, p->attprojw, BT, C, C);
    shs_memset(d, g->dqkv, 0, 3 * btc * sizeof(float));
    shs_attention_backward(d, g->dqkv, g->dpreatt, g->datt, g->dbtc, a->qkv, a->att, B, T, C, NH);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(qkvw), W(qkvb), g->dqkv, a->ln1, p->qkvw, BT, C, 3 * C);
    shs_layernorm_backward(d, g->dres, W(ln1w), W(ln1b), g->dbtc, x, p->ln1w, a->ln1_mean, a->ln1_rstd, BT, C);
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
    const float *x_last = L > 0 ? g->layer[L - 1].res3 : g->encoded;

    /* LM head: unit 0 is still resident from the forward's last acquire */
    const float *emb = g->head_params;
    float *demb;
    SHS_ASSERT(emb);
    g->head_params = NULL;
    SHS_CHECK(src->acquire_grads(src->self, 0, &demb));
    shs_softmax_xent_backward(d, g->dlogits, g->probs, g->targets, dloss / (float)BT, BT, V);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs_matmul_backward(d, g->dbtc, demb + te[0].offset, NULL, g->dlogits, g->lnf, emb + te[0].offset, BT, C, V);
    SHS_CHECK(src->release_params(src->self, 0));

    /* final LayerNorm */
    const float *lnf;
    float *dlnf;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &lnf));
    SHS_CHECK(src->acquire_grads(src->self, L + 1, &dlnf));
    shs_memset(d, g->dres, 0, btc * sizeof(float));
    shs_layernorm_backward(d, g->dres, dlnf + tf[0].offset, dlnf + tf[1].offset, g->dbtc, x_last,
                           lnf + tf[0].offset, g->lnf_mean, g->lnf_rstd, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));
    SHS_CHECK(src->grads_ready(src->self, L + 1));

    for (int l = L - 1; l >= 0; l--) {
        const float *w;
        float *gw;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        SHS_CHECK(src->acquire_grads(src->self, 1 + l, &gw));
        block_params_t p = block_views(lo, l, w), pg = block_views(lo, l, gw);
        const float *x = l > 0 ? g->layer[l - 1].res3 : g->encoded;
        if (g->checkpoint) block_forward(g, l, x, &p); /* deterministic: the same bits as the forward's */
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
