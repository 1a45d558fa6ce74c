/* llama.c - the Llama family's model (llama.h): activation buffers, the
 * embedding, the walk over decoder layers and wrap units, the final norm
 * and the LM head, forward and backward, all math through the device
 * interface (device.h).
 * What it is not: a decoder layer (llama_layer.c), the config and layout
 * (llama_config.c), sharding (strategy.c), optimization (optim.c), a config
 * file reader (hf_config.c) or the GPT (gpt.c).
 * Legend: B sequences, T context, C hidden, NH heads, NKV key/value heads,
 * HD head dim, QD = NH*HD, KVD = NKV*HD, R rotary dim, I intermediate, L
 * layers, V vocabulary.
 * Everything is f32 (autocast is refused), so there are no dtype views.
 */
#include "model/llama_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- activations ------------------------------------------------------------ */

static void carve(char *base, size_t *cur, float **p, size_t n) {
    *p = n && base ? (float *)(base + *cur) : NULL;
    *cur += n * sizeof(float);
}

/* What a layer keeps: 0 intermediates (dropped by full recompute), 1 the
 * eager attention probabilities (dropped by full and selective), 2 the output. */
static int kept(const shs__llama_t *g, int kind) {
    return kind == 2 || (kind == 0 && g->ex.recompute != SHS_RECOMPUTE_FULL) ||
           (kind == 1 && g->ex.recompute == SHS_RECOMPUTE_NONE);
}

#define LAYER_BUFS(X)                                                                                           \
    X(ln1, NIN ? BTC : 0, 0) X(rstd1, NIN ? BT : 0, 0) X(qraw, QKN ? BTQ : 0, 0) X(kraw, QKN ? BTK : 0, 0)       \
    X(rstdq, QKN ? BT * QKH : 0, 0) X(rstdk, QKN ? BT * KKH : 0, 0) X(q, BTQ, 0) X(k, BTK, 0) X(v, BTK, 0)      \
    X(att, eager ? TT : 0, 1) X(lse, eager ? 0 : B * NH * T, 0) X(atty, BTQ, 0) X(ao, AOUT ? BTC : 0, 0)         \
    X(rstdao, AOUT ? BT : 0, 0) X(res2, BTC, 0) X(ln2, MIN ? BTC : 0, 0) X(rstd2, MIN ? BT : 0, 0)               \
    X(gate, BTI, 0) X(up, BTI, 0) X(act, BTI, 0) X(mo, MOUT ? BTC : 0, 0) X(rstdmo, MOUT ? BT : 0, 0)           \
    X(res3, BTC, 2)

#define DIMS(g)                                                                                                  \
    const shs_llama_config_t *c = &(g)->cfg;                                                                     \
    size_t B = (size_t)(g)->B, T = (size_t)(g)->T, C = (size_t)c->hidden, NH = (size_t)c->num_heads;             \
    size_t BT = B * T, BTC = BT * C, BTQ = BT * (size_t)(g)->QD, BTK = BT * (size_t)(g)->KVD;                    \
    size_t BTI = BT * (size_t)c->intermediate, TT = B * NH * T * T, V = (size_t)c->vocab;                        \
    int eager = (g)->ex.attention == SHS_ATTENTION_EAGER, QKN = c->qk_norm != SHS_QK_NORM_NONE;                  \
    size_t QKH = c->qk_norm == SHS_QK_NORM_HEAD ? NH : 1, KKH = c->qk_norm == SHS_QK_NORM_HEAD ? (size_t)c->num_kv_heads : 1; \
    unsigned nb = (g)->norms;                                                                                    \
    int NIN = nb & SHS_LLAMA_NORM_ATTN_IN, AOUT = nb & SHS_LLAMA_NORM_ATTN_OUT, MIN = nb & SHS_LLAMA_NORM_MLP_IN; \
    int MOUT = nb & SHS_LLAMA_NORM_MLP_OUT;                                                                      \
    (void)BTK; (void)BTI; (void)TT; (void)V; (void)eager; (void)QKH; (void)KKH; (void)NIN; (void)AOUT; (void)MIN; \
    (void)MOUT; (void)QKN

static void layout_acts(shs__llama_t *g, void *base, size_t *total) {
    DIMS(g);
    size_t cur = 0, half = (size_t)g->R / 2;
    carve(base, &cur, &g->encoded, BTC);
    for (int l = 0; l < c->num_layers; l++) {
        shs__llama_acts_t *la = &g->layer[l];
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
    carve(base, &cur, &g->inv_freq, half);
    carve(base, &cur, &g->inv_local, c->rope_local_theta > 0 ? half : 0);
    carve(base, &cur, &g->inv_long, c->rope_scaling.kind == SHS_ROPE_SCALING_LONGROPE ? half : 0);
    for (int l = 1; l < c->num_layers; l++) {
#define SHARE(f, n, kind) if (!kept(g, kind)) g->layer[l].f = g->layer[0].f;
        LAYER_BUFS(SHARE)
#undef SHARE
    }
    *total = cur;
}

static void layout_scratch(shs__llama_t *g, void *base, size_t *total) {
    DIMS(g);
    size_t cur = 0, wmax = C > (size_t)g->QD ? C : (size_t)g->QD;
    size_t wqkv = c->names == SHS_LLAMA_NAMES_INTERNLM2 ? (size_t)(g->QD + 2 * g->KVD) * (C + 1) : 0;
    carve(base, &cur, &g->dres, BTC);
    carve(base, &cur, &g->dbtc, BTC > BTQ ? BTC : BTQ);
    g->datty = g->dbtc; /* d(atty) is consumed before dbtc takes d(attention input) */
    carve(base, &cur, &g->dq, BTQ);
    carve(base, &cur, &g->dqr, BTQ);
    carve(base, &cur, &g->dk, BTK);
    carve(base, &cur, &g->dkr, BTK);
    carve(base, &cur, &g->dv, BTK);
    carve(base, &cur, &g->dgate, BTI);
    carve(base, &cur, &g->dup, BTI);
    carve(base, &cur, &g->dact, BTI);
    carve(base, &cur, &g->datt, eager ? TT : 0);
    carve(base, &cur, &g->dlogits, BT * V);
    carve(base, &cur, &g->proj, BTC);
    carve(base, &cur, &g->dqn, QKN ? BTQ : 0);
    carve(base, &cur, &g->dkn, QKN ? BTK : 0);
    carve(base, &cur, &g->dpost, AOUT || MOUT ? BTC : 0);
    carve(base, &cur, &g->wplus, c->norm_plus_one ? wmax : 0);
    carve(base, &cur, &g->ones, c->norm_plus_one ? wmax : 0);
    carve(base, &cur, &g->wqkv, wqkv);
    carve(base, &cur, &g->dwqkv, wqkv);
    *total = cur;
}

static const shs_model_ops_t llama_ops;
static void llama_destroy(shs_model_t *m);

/* The slots of a layer unit: which tensor serves each, at what offset. */
static void map_slots(shs__llama_t *g) {
    shs__llama_tensor_t lt[SHS__LLAMA_MAX_LAYER_TENSORS];
    g->ntensors = shs__llama_layer_tensors(&g->cfg, lt);
    const shs_tensor_info_t *t = &g->layout->tensors[g->layout->units[1].first_tensor];
    for (int k = 0; k < SHS__LP_COUNT; k++) g->slot_tensor[k] = -1, g->slot_off[k] = 0;
    for (int i = 0; i < g->ntensors; i++)
        for (int j = 0; j < lt[i].nslots; j++) {
            g->slot_tensor[lt[i].slot[j]] = i;
            g->slot_off[lt[i].slot[j]] = t[i].offset + lt[i].off[j];
        }
}

/* The RoPE frequencies, the ones of norm_plus_one, onto the device. */
static shs_status_t upload_constants(shs__llama_t *g) {
    const shs_llama_config_t *c = &g->cfg;
    size_t half = (size_t)g->R / 2, wmax = (size_t)(c->hidden > g->QD ? c->hidden : g->QD);
    size_t n = half > wmax ? half : wmax;
    float *h = malloc(n * sizeof(float) + sizeof(float));
    if (!h) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    shs_status_t st = SHS_OK;
    shs_llama_inv_freq(c, SHS_ROPE_FREQ_GLOBAL, h);
    SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->inv_freq, h, half * sizeof(float)), st, done);
    if (g->inv_local) {
        shs_llama_inv_freq(c, SHS_ROPE_FREQ_LOCAL, h);
        SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->inv_local, h, half * sizeof(float)), st, done);
    }
    if (g->inv_long) {
        shs_llama_inv_freq(c, SHS_ROPE_FREQ_LONG, h);
        SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->inv_long, h, half * sizeof(float)), st, done);
    }
    if (g->ones) {
        for (size_t i = 0; i < wmax; i++) h[i] = 1.0f;
        SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->ones, h, wmax * sizeof(float)), st, done);
    }
done:
    free(h);
    return st;
}

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
    shs__llama_tensor_t lt[SHS__LLAMA_MAX_LAYER_TENSORS];
    if (layout->units[1].num_tensors != shs__llama_layer_tensors(cfg, lt))
        return shs_set_error(SHS_INVALID_ARG, "layout's layer unit has %d tensors, this config's layer %d",
                             layout->units[1].num_tensors, shs__llama_layer_tensors(cfg, lt));
    if (B < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 (got %d)", B);
    if (T < 1 || T > cfg->max_position)
        return shs_set_error(SHS_INVALID_ARG, "context %d must be in 1..max_position_embeddings (%d)", T,
                             cfg->max_position);
    if (!shs_device_supports(dev, SHS_KERNELS_LLAMA))
        return shs_set_error(SHS_UNSUPPORTED,
                             "the %s backend has no Llama kernels (RMSNorm, RoPE, SwiGLU, GeGLU, soft capping, "
                             "grouped-query attention); the cpu and meta backends have them", shs_device_backend(dev));
    if (ex->attention == SHS_ATTENTION_FLASH && !shs_device_supports(dev, SHS_KERNELS_FLASH_ATTENTION))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no kernels for attention flash",
                             shs_device_backend(dev));
    shs__llama_t *g = calloc(1, sizeof *g);
    if (!g) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    g->base.ops = &llama_ops;
    g->cfg = *cfg;
    g->ex = *ex;
    g->layout = layout;
    g->dev = dev;
    g->B = B;
    g->T = T;
    g->HD = shs_llama_head_dim(cfg);
    g->QD = cfg->num_heads * g->HD;
    g->KVD = cfg->num_kv_heads * g->HD;
    g->R = shs_llama_rotary_dim(cfg);
    g->norms = shs_llama_norms(cfg);
    g->mscale = shs_llama_rope_mscale(cfg);
    g->head_unit = cfg->tie_word_embeddings ? 0 : cfg->num_layers + 2;
    map_slots(g);
    g->layer = calloc((size_t)cfg->num_layers, sizeof *g->layer);
    shs_status_t st = SHS_OK;
    if (!g->layer) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    size_t n_acts, n_scratch, BT = (size_t)B * (size_t)T;
    layout_acts(g, NULL, &n_acts);
    layout_scratch(g, NULL, &n_scratch);
    SHS_CHECK_GOTO(shs_device_alloc(dev, &g->acts_mem, n_acts, SHS_MEM_ACTIVATIONS, "forward activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, &g->scratch_mem, n_scratch, SHS_MEM_ACTIVATIONS, "backward scratch"), st,
                   fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->tokens, 4 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    g->targets = g->tokens + BT;
    g->positions = g->tokens + 2 * BT;
    g->doc_ids = g->tokens + 3 * BT;
    layout_acts(g, g->acts_mem, &n_acts);
    layout_scratch(g, g->scratch_mem, &n_scratch);
    g->inv_cur = g->inv_freq;
    SHS_CHECK_GOTO(upload_constants(g), st, fail);
    *out = &g->base;
    return SHS_OK;
fail:
    llama_destroy(&g->base);
    return st;
}

static void llama_destroy(shs_model_t *m) {
    shs__llama_t *g = (shs__llama_t *)m;
    if (!g) return;
    shs_device_free(g->dev, g->acts_mem);
    shs_device_free(g->dev, g->scratch_mem);
    shs_device_free(g->dev, g->tokens);
    free(g->layer);
    free(g);
}

/* ---- forward -------------------------------------------------------------------- */

/* A unit's first tensor inside its flat parameter (or gradient) buffer. */
static size_t first_offset(const shs__llama_t *g, int unit) {
    const shs_layout_t *lo = g->layout;
    return lo->tensors[lo->units[unit].first_tensor].offset;
}

/* LongRoPE's frequencies for this batch (HF longrope_frequency_update): the
 * long factors once its positions reach past original_max_position_embeddings
 * (seq_len = the largest position + 1, or T without positions). */
static void choose_rope(shs__llama_t *g, const shs_batch_t *batch) {
    g->inv_cur = g->inv_freq;
    if (!g->inv_long) return;
    int64_t seq_len = g->T;
    if (batch->positions) {
        seq_len = 0;
        for (size_t i = 0; i < (size_t)g->B * g->T; i++)
            if (batch->positions[i] + 1 > seq_len) seq_len = batch->positions[i] + 1;
    }
    if (seq_len > g->cfg.rope_scaling.original_max_position_embeddings) g->inv_cur = g->inv_long;
}

static shs_status_t llama_forward(shs_model_t *m, shs_param_source_t *src, const shs_batch_t *batch,
                                  float *mean_loss) {
    shs__llama_t *g = (shs__llama_t *)m;
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
    choose_rope(g, batch);

    const float *emb;
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    shs_encoder_forward(d, g->encoded, g->tokens, emb + first_offset(g, 0), NULL, B, T, C);
    SHS_CHECK(src->release_params(src->self, 0));
    if (c->embed_scale) shs_scale(d, g->encoded, shs_llama_embed_scale(c, SHS_F32), (size_t)BT * C);

    const float *x = g->encoded;
    for (int l = 0; l < L; l++) {
        const float *w, *p[SHS__LP_COUNT];
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        shs__llama_layer_views(g, w, p);
        shs__llama_layer_forward(g, l, x, p);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        x = g->layer[l].res3;
    }

    const float *nw;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    shs__llama_norm_forward(g, g->lnf, g->rstdf, x, nw + first_offset(g, L + 1), BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));

    /* the head (unit 0 tied, else its own unit) stays resident for the
     * backward pass, which starts with it (FSDP keeps the last unit unsharded) */
    const float *hw;
    SHS_CHECK(src->acquire_params(src->self, g->head_unit, &hw));
    g->head_params = hw;
    shs_matmul_forward(d, g->logits, g->lnf, hw + first_offset(g, g->head_unit), NULL, BT, C, V);
    if (c->final_softcap > 0) shs_softcap_forward(d, g->logits, g->logits, c->final_softcap, (size_t)BT * V);
    shs_softmax_xent_forward(d, g->losses, g->probs, g->logits, g->targets, BT, V);
    shs_sum(d, g->loss_sum, g->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, g->loss_sum, sizeof sum));
    *mean_loss = g->num_targets ? sum / (float)g->num_targets : 0.0f;
    return SHS_OK;
}

/* ---- backward -------------------------------------------------------------------- */

static shs_status_t llama_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    shs__llama_t *g = (shs__llama_t *)m;
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
    if (c->final_softcap > 0)
        shs_softcap_backward(d, g->dlogits, g->dlogits, g->logits, c->final_softcap, (size_t)BT * V);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    size_t ho = first_offset(g, g->head_unit);
    shs_matmul_backward(d, g->dbtc, dhw + ho, NULL, g->dlogits, g->lnf, hw + ho, BT, C, V);
    SHS_CHECK(src->release_params(src->self, g->head_unit));
    if (g->head_unit != 0) SHS_CHECK(src->grads_ready(src->self, g->head_unit));

    /* final RMSNorm */
    const float *nw;
    float *dnw;
    size_t off = first_offset(g, L + 1);
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    SHS_CHECK(src->acquire_grads(src->self, L + 1, &dnw));
    shs_memset(d, g->dres, 0, btc * sizeof(float));
    shs__llama_norm_backward(g, g->dres, dnw + off, g->dbtc, x_last, nw + off, g->rstdf, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));
    SHS_CHECK(src->grads_ready(src->self, L + 1));

    for (int l = L - 1; l >= 0; l--) {
        const float *w, *p[SHS__LP_COUNT], *pg[SHS__LP_COUNT];
        float *gw;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        SHS_CHECK(src->acquire_grads(src->self, 1 + l, &gw));
        shs__llama_layer_views(g, w, p);
        shs__llama_layer_views(g, gw, pg);
        const float *x = l > 0 ? g->layer[l - 1].res3 : g->encoded;
        /* full recompute: deterministic, the same bits as the forward's */
        if (g->ex.recompute == SHS_RECOMPUTE_FULL) shs__llama_layer_forward(g, l, x, p);
        shs__llama_layer_backward(g, l, x, p, pg);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        SHS_CHECK(src->grads_ready(src->self, 1 + l));
    }

    /* embedding: needs no parameter values, only the gradient buffer */
    float *demb;
    SHS_CHECK(src->acquire_grads(src->self, 0, &demb));
    if (c->embed_scale) shs_scale(d, g->dres, shs_llama_embed_scale(c, SHS_F32), btc);
    shs_encoder_backward(d, demb + first_offset(g, 0), NULL, g->dres, g->tokens, B, T, C);
    SHS_CHECK(src->grads_ready(src->self, 0));
    return SHS_OK;
}

static const shs_model_ops_t llama_ops = {llama_forward, llama_backward, llama_destroy};
